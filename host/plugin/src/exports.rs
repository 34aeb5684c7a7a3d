//! A plugin's exports, whatever version of the contract it was built
//! against: which version it speaks (the `environment` interface it
//! exports), which optional exports it has (`capabilities`, `state`,
//! `screen-changes`, found once at load, never required), and each export
//! called with the latest version's types (an older version's results
//! converted by its `wit` module).
//!
//! This module only finds and calls exports; when to call them, with which
//! time limit, and what to tell the agent is the callers' business.

use wasmtime::Engine;
use wasmtime::component::{Component, Instance, InstancePre};

use crate::state::HostState;
use crate::wit::{Version, latest, since_v0_1_0 as v0_1_0};

/// Why a component's exports do not make a plugin.
#[derive(Debug)]
pub enum ExportsError {
    /// It exports no `environment` interface at all; its exports' names.
    NoEnvironment { exports: Vec<String> },
    /// It exports an `environment` interface of a version the host does not
    /// accept.
    OtherVersion { export: String },
    /// The interface of `version` is there, but a function is missing
    /// (wasmtime's error names it).
    Incomplete {
        version: Version,
        error: wasmtime::Error,
    },
}

/// A component's exports, found once at load: what every instance of it is
/// called through.
#[derive(Clone)]
pub struct PluginPre {
    instance_pre: InstancePre<HostState>,
    indices: Indices,
}

#[derive(Clone)]
enum Indices {
    V0_1_0 {
        environment: v0_1_0::EnvironmentIndices,
        capabilities: Option<v0_1_0::CapabilitiesIndices>,
    },
    /// 0.2.0 and 0.2.1: one set of bindings (`wit::since_v0_2_0`).
    V0_2 {
        version: Version,
        environment: latest::EnvironmentIndices,
        capabilities: Option<latest::CapabilitiesIndices>,
        state: Option<latest::StateIndices>,
        screen_changes: Option<latest::ScreenChangesIndices>,
    },
}

impl PluginPre {
    /// Finds the exports of `instance_pre`'s component.
    pub fn new(
        instance_pre: InstancePre<HostState>,
        engine: &Engine,
    ) -> Result<PluginPre, ExportsError> {
        let version = version_of(instance_pre.component(), engine)?;
        let incomplete = |error| ExportsError::Incomplete { version, error };
        // An optional interface may be missing; one that is there must be
        // whole.
        let optional = |interface: &str| {
            instance_pre
                .component()
                .get_export_index(None, version.name(interface))
                .is_some()
        };
        let indices = match version {
            Version::V0_1_0 => Indices::V0_1_0 {
                environment: v0_1_0::EnvironmentIndices::new(&instance_pre).map_err(incomplete)?,
                capabilities: optional("capabilities")
                    .then(|| v0_1_0::CapabilitiesIndices::new(&instance_pre))
                    .transpose()
                    .map_err(incomplete)?,
            },
            Version::V0_2_0 | Version::V0_2_1 => Indices::V0_2 {
                version,
                environment: latest::EnvironmentIndices::new(&instance_pre).map_err(incomplete)?,
                capabilities: optional("capabilities")
                    .then(|| latest::CapabilitiesIndices::new(&instance_pre))
                    .transpose()
                    .map_err(incomplete)?,
                state: optional("state")
                    .then(|| latest::StateIndices::new(&instance_pre))
                    .transpose()
                    .map_err(incomplete)?,
                // Only 0.2.1 has it: a 0.2.0 plugin has none to find.
                screen_changes: optional("screen-changes")
                    .then(|| latest::ScreenChangesIndices::new(&instance_pre))
                    .transpose()
                    .map_err(incomplete)?,
            },
        };
        Ok(PluginPre {
            instance_pre,
            indices,
        })
    }

    pub fn instance_pre(&self) -> &InstancePre<HostState> {
        &self.instance_pre
    }

    pub fn version(&self) -> Version {
        match self.indices {
            Indices::V0_1_0 { .. } => Version::V0_1_0,
            Indices::V0_2 { version, .. } => version,
        }
    }

    /// Whether it exports `state` (snapshots to keep across traps and
    /// restarts).
    pub fn has_state(&self) -> bool {
        matches!(self.indices, Indices::V0_2 { state: Some(_), .. })
    }

    /// The world it was built for, as far as its exports tell.
    pub fn world(&self) -> String {
        let capabilities = match &self.indices {
            Indices::V0_1_0 { capabilities, .. } => capabilities.is_some(),
            Indices::V0_2 { capabilities, .. } => capabilities.is_some(),
        };
        self.version().world(capabilities, self.has_state())
    }

    /// A new instance in `store`, with its exports. A function of the wrong
    /// type fails here.
    pub fn instantiate(&self, store: Store<'_>) -> wasmtime::Result<(Instance, Exports)> {
        let instance = self.instance_pre.instantiate(&mut *store)?;
        let exports = match &self.indices {
            Indices::V0_1_0 {
                environment,
                capabilities,
            } => Exports::V0_1_0 {
                environment: environment.load(&mut *store, &instance)?,
                capabilities: capabilities
                    .as_ref()
                    .map(|c| c.load(&mut *store, &instance))
                    .transpose()?,
            },
            Indices::V0_2 {
                version: _,
                environment,
                capabilities,
                state,
                screen_changes,
            } => Exports::V0_2 {
                environment: environment.load(&mut *store, &instance)?,
                capabilities: capabilities
                    .as_ref()
                    .map(|c| c.load(&mut *store, &instance))
                    .transpose()?,
                state: state
                    .as_ref()
                    .map(|s| s.load(&mut *store, &instance))
                    .transpose()?,
                screen_changes: screen_changes
                    .as_ref()
                    .map(|s| s.load(&mut *store, &instance))
                    .transpose()?,
            },
        };
        Ok((instance, exports))
    }
}

/// The version of the contract `component` was built against, by the
/// `environment` interface it exports.
fn version_of(component: &Component, engine: &Engine) -> Result<Version, ExportsError> {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let mut other = None;
    for name in &exports {
        match Version::of_export(name) {
            Some(Ok(version)) => return Ok(version),
            Some(Err(_)) => other = Some(name.clone()),
            None => {}
        }
    }
    Err(match other {
        Some(export) => ExportsError::OtherVersion { export },
        None => ExportsError::NoEnvironment { exports },
    })
}

/// One instance's exports, called with the latest version's types.
pub enum Exports {
    V0_1_0 {
        environment: v0_1_0::Environment,
        capabilities: Option<v0_1_0::Capabilities>,
    },
    V0_2 {
        environment: latest::Environment,
        capabilities: Option<latest::Capabilities>,
        state: Option<latest::State>,
        screen_changes: Option<latest::ScreenChanges>,
    },
}

type Store<'a> = &'a mut wasmtime::Store<HostState>;

impl Exports {
    pub fn describe(&self, store: Store<'_>) -> wasmtime::Result<latest::Description> {
        match self {
            Exports::V0_1_0 { environment, .. } => environment.call_describe(store).map(Into::into),
            Exports::V0_2 { environment, .. } => environment.call_describe(store),
        }
    }

    pub fn handle_command(
        &self,
        store: Store<'_>,
        command: &str,
    ) -> wasmtime::Result<latest::CommandResponse> {
        match self {
            Exports::V0_1_0 { environment, .. } => environment
                .call_handle_command(store, command)
                .map(Into::into),
            Exports::V0_2 { environment, .. } => environment.call_handle_command(store, command),
        }
    }

    pub fn get_screen(&self, store: Store<'_>) -> wasmtime::Result<latest::ScreenSection> {
        match self {
            Exports::V0_1_0 { environment, .. } => {
                environment.call_get_screen(store).map(Into::into)
            }
            Exports::V0_2 { environment, .. } => environment.call_get_screen(store),
        }
    }

    pub fn shutdown(&self, store: Store<'_>) -> wasmtime::Result<()> {
        match self {
            Exports::V0_1_0 { environment, .. } => environment.call_shutdown(store),
            Exports::V0_2 { environment, .. } => environment.call_shutdown(store),
        }
    }

    /// What it asks for; nothing without a `capabilities` export.
    pub fn requested(&self, store: Store<'_>) -> wasmtime::Result<Vec<latest::Request>> {
        match self {
            Exports::V0_1_0 {
                capabilities: Some(capabilities),
                ..
            } => Ok(capabilities
                .call_requested(store)?
                .into_iter()
                .map(Into::into)
                .collect()),
            Exports::V0_2 {
                capabilities: Some(capabilities),
                ..
            } => capabilities.call_requested(store),
            _ => Ok(Vec::new()),
        }
    }

    /// When its screen can change: `any-time` without a `screen-changes`
    /// export.
    pub fn screen_changes(&self, store: Store<'_>) -> wasmtime::Result<latest::When> {
        match self {
            Exports::V0_2 {
                screen_changes: Some(screen_changes),
                ..
            } => screen_changes.call_screen_changes(store),
            _ => Ok(latest::When::AnyTime),
        }
    }

    /// Whether it exports `state`.
    pub fn has_state(&self) -> bool {
        matches!(self, Exports::V0_2 { state: Some(_), .. })
    }

    /// Its state now, when it exports `state`.
    pub fn snapshot(&self, store: Store<'_>) -> Option<wasmtime::Result<Vec<u8>>> {
        match self {
            Exports::V0_2 {
                state: Some(state), ..
            } => Some(state.call_snapshot(store)),
            _ => None,
        }
    }

    /// Puts back a snapshot, when it exports `state`: the plugin's own
    /// refusal is the inner `Err`.
    pub fn restore(
        &self,
        store: Store<'_>,
        snapshot: &[u8],
    ) -> Option<wasmtime::Result<Result<(), String>>> {
        match self {
            Exports::V0_2 {
                state: Some(state), ..
            } => Some(state.call_restore(store, snapshot)),
            _ => None,
        }
    }
}
