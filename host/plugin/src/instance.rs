//! One live instance of a plugin: its store and its exports, and the one
//! way to call them — armed with a time limit, its output collected, its
//! failure classified.
//!
//! An instance that trapped is poisoned (wasmtime refuses to enter it
//! again); the owner drops it and instantiates afresh from the kept
//! `PluginPre`, which is cheap. This module must not decide when to do that
//! nor what to tell the agent.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::Store;

use crate::exports::{Exports, PluginPre};
use crate::failure::{CallFailure, FailureCause, classify};
use crate::grants::{self, Grants};
use crate::guest_io::{CallOutput, GuestOutput};
use crate::limits::{QUICK_CALL_LIMIT, RESTORE_LIMIT, SCREEN_LIMIT, SNAPSHOT_LIMIT};
use crate::live_call::LiveCall;
use crate::plugin_text;
use crate::sandbox::Sandbox;
use crate::state::HostState;
use crate::wit::latest::{CommandResponse, Description, Power, Request, ScreenSection, When};
use envhost_core::CancelFlag;

/// A call's result and what the plugin said during it.
pub struct Called<T> {
    pub result: Result<T, CallFailure>,
    pub output: CallOutput,
    /// The call's time ran out while the host waited for a program (which
    /// was interrupted), and the plugin answered in its grace.
    pub timed_out_in_host: bool,
}

/// A plugin instance ready for calls.
pub struct LiveInstance {
    store: Store<HostState>,
    exports: Exports,
    /// When its screen can change, as its `screen-changes` export said
    /// (asked once, by [`ask_screen_changes`](Self::ask_screen_changes)).
    screen_changes: When,
}

impl LiveInstance {
    /// Instantiates the plugin in a fresh store with `grants`. The error is
    /// wasmtime's (with the call's output), for the caller to translate.
    pub fn instantiate(
        sandbox: &Sandbox,
        pre: &PluginPre,
        grants: &Arc<Grants>,
    ) -> Result<LiveInstance, (wasmtime::Error, CallOutput)> {
        let output = GuestOutput::new();
        let mut store = sandbox.new_store(pre.instance_pre().engine(), output.clone(), grants);
        let instantiated = {
            let _call = sandbox.begin_call(&mut store, QUICK_CALL_LIMIT, None);
            pre.instantiate(&mut store)
        };
        match instantiated {
            Ok((_, exports)) => Ok(LiveInstance {
                store,
                exports,
                screen_changes: When::AnyTime,
            }),
            Err(err) => Err((err, output.take())),
        }
    }

    fn call<T>(
        &mut self,
        sandbox: &Sandbox,
        limit: Duration,
        cancel: Option<&CancelFlag>,
        f: impl FnOnce(&Exports, &mut Store<HostState>) -> wasmtime::Result<T>,
    ) -> Called<T> {
        let result = {
            let _call = sandbox.begin_call(&mut self.store, limit, cancel);
            f(&self.exports, &mut self.store)
        };
        let output = self.store.data().output().take();
        let timed_out_in_host = self.store.data().budget().timed_out_in_host();
        let result = result.map_err(|err| classify(&err, &output.stderr()));
        Called {
            result,
            output,
            timed_out_in_host,
        }
    }

    /// What the plugin asks for: its optional `capabilities` export, or
    /// nothing when it has none.
    pub fn requested(&mut self, sandbox: &Sandbox) -> Called<Vec<grants::Request>> {
        let called = self.call(sandbox, QUICK_CALL_LIMIT, None, |exports, store| {
            exports.requested(store)
        });
        Called {
            result: called
                .result
                .map(|requests| requests.into_iter().map(host_request).collect()),
            output: called.output,
            timed_out_in_host: called.timed_out_in_host,
        }
    }

    pub fn describe(&mut self, sandbox: &Sandbox) -> Called<Description> {
        self.call(sandbox, QUICK_CALL_LIMIT, None, |exports, store| {
            exports.describe(store)
        })
    }

    /// Asks its `screen-changes` export when its screen can change, and
    /// keeps the answer; `any-time` without the export (nothing is
    /// called).
    pub fn ask_screen_changes(&mut self, sandbox: &Sandbox) -> Called<When> {
        let called = self.call(sandbox, QUICK_CALL_LIMIT, None, |exports, store| {
            exports.screen_changes(store)
        });
        if let Ok(when) = called.result {
            self.screen_changes = when;
        }
        called
    }

    /// Whether its screen changes only during its own calls (it said
    /// `when-called`): the section it drew last stands until the next one.
    pub fn screen_changes_only_when_called(&self) -> bool {
        self.screen_changes == When::WhenCalled
    }

    /// Sets (or clears) the command that may outlive the agent's wait,
    /// for the host calls it makes.
    pub(crate) fn set_live_call(&mut self, call: Option<Arc<LiveCall>>) {
        self.store.data_mut().set_live_call(call);
    }

    pub fn handle_command(
        &mut self,
        sandbox: &Sandbox,
        command: &str,
        limit: Duration,
        cancel: &CancelFlag,
    ) -> Called<CommandResponse> {
        self.call(sandbox, limit, Some(cancel), |exports, store| {
            exports.handle_command(store, command)
        })
    }

    pub fn screen(&mut self, sandbox: &Sandbox, cancel: &CancelFlag) -> Called<ScreenSection> {
        self.call(sandbox, SCREEN_LIMIT, Some(cancel), |exports, store| {
            exports.get_screen(store)
        })
    }

    /// Whether it exports `state`: only then are [`snapshot`](Self::snapshot)
    /// and [`restore`](Self::restore) called.
    pub fn has_state(&self) -> bool {
        self.exports.has_state()
    }

    /// Its state now (its `state` export), bounded like a screen; `None`
    /// without a `state` export (nothing is called).
    pub fn snapshot(&mut self, sandbox: &Sandbox, cancel: &CancelFlag) -> Option<Called<Vec<u8>>> {
        if !self.has_state() {
            return None;
        }
        Some(
            self.call(sandbox, SNAPSHOT_LIMIT, Some(cancel), |exports, store| {
                exports.snapshot(store).unwrap_or_else(|| Ok(Vec::new()))
            }),
        )
    }

    /// Puts back a snapshot (its `state` export); the inner `Err` is the
    /// plugin's own refusal. `None` without a `state` export.
    pub fn restore(
        &mut self,
        sandbox: &Sandbox,
        snapshot: &[u8],
    ) -> Option<Called<Result<(), String>>> {
        if !self.has_state() {
            return None;
        }
        Some(self.call(sandbox, RESTORE_LIMIT, None, |exports, store| {
            exports.restore(store, snapshot).unwrap_or(Ok(Ok(())))
        }))
    }

    pub fn shutdown(&mut self, sandbox: &Sandbox, limit: Duration) -> Called<()> {
        self.call(sandbox, limit, None, |exports, store| {
            exports.shutdown(store)
        })
    }
}

fn host_request(request: Request) -> grants::Request {
    let power = match request.power {
        Power::ReadDirectory(dir) => grants::Power::ReadDirectory(dir),
        Power::WriteDirectory(dir) => grants::Power::WriteDirectory(dir),
        Power::Variable(name) => grants::Power::Variable(name),
        Power::Program(program) => grants::Power::Program(program),
        Power::Memory(bytes) => grants::Power::Memory(bytes),
        Power::Network(pattern) => grants::Power::Network(pattern),
    };
    grants::Request {
        power,
        // Shown to the operator in `envhost check` and to the agent on the
        // screen, one line each.
        reason: plugin_text::line(&request.reason),
    }
}

/// A fresh instance that has described itself, as the WIT requires before
/// any other call, and said when its screen changes. The failure says
/// which step failed.
pub fn start_described(
    sandbox: &Sandbox,
    pre: &PluginPre,
    grants: &Arc<Grants>,
) -> Result<(LiveInstance, Description, CallOutput), CallFailure> {
    let mut instance =
        LiveInstance::instantiate(sandbox, pre, grants).map_err(|(err, output)| {
            let mut failure = classify(&err, &output.stderr());
            if let FailureCause::Other { message } = &failure.cause {
                failure.cause = FailureCause::Other {
                    message: format!("instantiating it failed: {message}"),
                };
            }
            failure
        })?;
    let described = instance.describe(sandbox);
    let description = described.result?;
    let mut output = described.output;
    let asked = instance.ask_screen_changes(sandbox);
    output.append(asked.output);
    asked.result?;
    Ok((instance, description, output))
}
