//! Named instances (`bash:server`): which kinds may have them, opening one
//! on its first request, the address rule, and `close`. They live beside
//! the environments registered at start-up, behind a lock of their own.
//! It must not know what an instance runs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Orchestrator, RegisterError, Slot, View};
use crate::environment::{CommandResponse, EnvironmentKind, EnvironmentName};
use crate::events::{Event, panic_message};
use crate::instance::{self, InstanceFactory};
use crate::request::ControlRequest;
use crate::{running, text};

impl Orchestrator {
    /// Lets `kind` (a registered environment: bash, python) have named
    /// instances (`bash:NAME`), each made by `factory` on its first
    /// request.
    pub fn allow_instances(
        &mut self,
        kind: &str,
        factory: InstanceFactory,
    ) -> Result<(), RegisterError> {
        let Some(slot) = self.slot(kind) else {
            return Err(RegisterError::NoSuchKind(kind.to_owned()));
        };
        let name = slot.name.clone();
        self.factories.retain(|(known, _)| *known != name);
        self.factories.push((name, factory));
        Ok(())
    }

    /// The kinds that have named instances (bash, python), in display order.
    pub fn instance_kinds(&self) -> Vec<String> {
        self.slots()
            .iter()
            .filter(|slot| self.factory(slot.name.as_str()).is_some())
            .map(|slot| slot.name.as_str().to_owned())
            .collect()
    }

    /// The named instances alive (`bash:server`), in display order.
    pub fn instance_names(&self) -> Vec<String> {
        self.instances
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|slot| slot.name.to_string())
            .collect()
    }

    pub(super) fn factory(&self, kind: &str) -> Option<&InstanceFactory> {
        self.factories
            .iter()
            .find(|(known, _)| known.as_str() == kind)
            .map(|(_, factory)| factory)
    }

    /// The environment `name` names, creating it if it is a named instance
    /// not yet alive; or the words that refuse it (an unknown environment,
    /// a bad instance name, a kind with one instance, too many instances).
    pub(super) fn open(&self, name: &str) -> Result<Arc<Slot>, String> {
        if let Some(slot) = self.slot(name) {
            return Ok(slot);
        }
        let (kind, instance_name) = self.instance_address(name)?;
        let mut instances = self
            .instances
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Another thread may have opened it since the look above.
        if let Some(slot) = instances.iter().find(|s| s.name.as_str() == name) {
            return Ok(Arc::clone(slot));
        }
        let live: Vec<&str> = instances
            .iter()
            .filter(|slot| slot.instance_of.as_ref() == Some(&kind))
            .map(|slot| slot.name.as_str())
            .collect();
        if live.len() >= self.settings.max_instances {
            return Err(instance::too_many(name, kind.as_str(), &live));
        }
        let Some(factory) = self.factory(kind.as_str()) else {
            return Err(instance::single(kind.as_str(), &self.instance_kinds()));
        };
        let environment = catch_unwind(AssertUnwindSafe(|| factory(instance_name))).map_err(|panic| {
            format!(
                "{name} could not be created (internal failure: {}); the host is still running.",
                panic_message(panic.as_ref())
            )
        })?;
        let usage = self.usage(kind.as_str()).unwrap_or_default();
        let slot = Arc::new(Slot {
            name: EnvironmentName::instance(&kind, instance_name),
            kind: EnvironmentKind::Builtin,
            instance_of: Some(kind.clone()),
            usage,
            environment: Mutex::new(environment),
            view: Mutex::new(View::default()),
        });
        instances.push(Arc::clone(&slot));
        instances.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        drop(instances);
        self.emit(Event::EnvironmentLoaded {
            name: name.to_owned(),
            kind: EnvironmentKind::Builtin,
            detail: Some(format!("another instance of {kind}")),
        });
        Ok(slot)
    }

    /// `name` as `(kind, instance name)` if it is a valid address of an
    /// instance of a kind that has them; otherwise the words that refuse
    /// it.
    pub(super) fn instance_address<'n>(
        &self,
        name: &'n str,
    ) -> Result<(EnvironmentName, &'n str), String> {
        let Some((kind, instance_name)) = instance::split(name) else {
            return Err(self.unknown_environment(name).output);
        };
        let kinds = self.instance_kinds();
        let Some(slot) = self.slot(kind) else {
            return Err(instance::unknown_kind(name, kind, &kinds));
        };
        if self.factory(kind).is_none() {
            return Err(instance::single(kind, &kinds));
        }
        instance::check_name(kind, instance_name).map_err(|err| format!("{err}."))?;
        Ok((slot.name.clone(), instance_name))
    }

    /// Ends the named instance `request` is for and everything it runs,
    /// and removes it (and its kept state); refuses a default instance or
    /// one that is not open.
    pub(super) fn close(&self, request: &ControlRequest) -> CommandResponse {
        let name = request.environment.as_str();
        if self.slots().iter().any(|s| s.name.as_str() == name) {
            let default = self.factory(name).is_some();
            return CommandResponse::failure(instance::not_closable(
                name,
                default,
                &self.instance_kinds(),
            ));
        }
        let removed = {
            let mut instances = self
                .instances
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            instances
                .iter()
                .position(|s| s.name.as_str() == name)
                .map(|index| instances.remove(index))
        };
        let Some(slot) = removed else {
            return CommandResponse::failure(self.not_open(name, "close"));
        };
        // No new request finds it now; one inside it is waited for.
        let mut inside = slot.enter("close");
        let running = self.running_in(&slot, &**inside.environment);
        let mut ended =
            catch_unwind(AssertUnwindSafe(|| inside.environment.holdings())).unwrap_or_default();
        if let Some(running) = running {
            ended.push(format!(
                "the running command {}",
                running::quoted_command(&running.command)
            ));
        }
        let environment = &mut inside.environment;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| environment.shutdown())) {
            self.emit(Event::Error {
                context: format!("{name} shutdown"),
                message: panic_message(panic.as_ref()),
            });
        }
        drop(inside);
        if let Some(keeper) = &self.keeper {
            self.keeping
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .unsaved
                .retain(|(kept, _)| *kept != slot.name);
            keeper.forget(name);
        }
        let ended = if ended.is_empty() {
            "nothing was running in it".to_owned()
        } else {
            format!("ended {}", text::listed(&ended))
        };
        self.emit(Event::EnvironmentClosed {
            name: name.to_owned(),
            ended: ended.clone(),
        });
        CommandResponse::success(instance::closed(name, &ended))
    }

    /// Why a request that needs a live environment found none at `name`.
    pub(super) fn not_open(&self, name: &str, what: &str) -> String {
        match self.instance_address(name) {
            Ok((kind, _)) => {
                let live: Vec<String> = self
                    .instance_names()
                    .into_iter()
                    .filter(|open| instance::split(open).is_some_and(|(k, _)| k == kind.as_str()))
                    .collect();
                instance::not_open(name, what, kind.as_str(), &live)
            }
            Err(why) => why,
        }
    }
}
