//! One live instance of a plugin: its store and its exports, and the one
//! way to call them — armed with a time limit, its output collected, its
//! failure classified.
//!
//! An instance that trapped is poisoned (wasmtime refuses to enter it
//! again); the owner drops it and instantiates afresh from the kept
//! `PluginPre`, which is cheap. This module must not decide when to do that
//! nor what to tell the agent.

use std::time::Duration;

use wasmtime::Store;

use super::bindings::{CommandResponse, Description, Plugin, PluginPre, ScreenSection};
use super::failure::{CallFailure, FailureCause, classify};
use super::guest_io::{CallOutput, GuestOutput};
use super::sandbox::{HostState, Sandbox};
use crate::environment::CancelFlag;

/// Time a plugin gets to instantiate, describe itself or draw its screen.
/// These must be quick; commands get the command's timeout.
pub const QUICK_CALL_LIMIT: Duration = Duration::from_secs(5);

/// Time a plugin gets to shut down: the host is stopping, and every
/// plugin's shutdown runs in turn.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// A call's result and what the plugin said during it.
pub struct Called<T> {
    pub result: Result<T, CallFailure>,
    pub output: CallOutput,
}

/// A plugin instance ready for calls.
pub struct LiveInstance {
    store: Store<HostState>,
    plugin: Plugin,
}

impl LiveInstance {
    /// Instantiates the plugin in a fresh store. The error is wasmtime's
    /// (with the call's output), for the caller to translate.
    pub fn instantiate(
        sandbox: &Sandbox,
        pre: &PluginPre<HostState>,
    ) -> Result<LiveInstance, (wasmtime::Error, CallOutput)> {
        let output = GuestOutput::new();
        let mut store = sandbox.new_store(output.clone());
        let instantiated = {
            let _call = sandbox.begin_call(&mut store, QUICK_CALL_LIMIT, None);
            pre.instantiate(&mut store)
        };
        match instantiated {
            Ok(plugin) => Ok(LiveInstance { store, plugin }),
            Err(err) => Err((err, output.take())),
        }
    }

    fn call<T>(
        &mut self,
        sandbox: &Sandbox,
        limit: Duration,
        cancel: Option<&CancelFlag>,
        f: impl FnOnce(&Plugin, &mut Store<HostState>) -> wasmtime::Result<T>,
    ) -> Called<T> {
        let result = {
            let _call = sandbox.begin_call(&mut self.store, limit, cancel);
            f(&self.plugin, &mut self.store)
        };
        let output = self.store.data().output().take();
        let result = result.map_err(|err| classify(&err, &output.stderr()));
        Called { result, output }
    }

    pub fn describe(&mut self, sandbox: &Sandbox) -> Called<Description> {
        self.call(sandbox, QUICK_CALL_LIMIT, None, |plugin, store| {
            plugin
                .envhost_environment_environment()
                .call_describe(store)
        })
    }

    pub fn handle_command(
        &mut self,
        sandbox: &Sandbox,
        command: &str,
        limit: Duration,
        cancel: &CancelFlag,
    ) -> Called<CommandResponse> {
        self.call(sandbox, limit, Some(cancel), |plugin, store| {
            plugin
                .envhost_environment_environment()
                .call_handle_command(store, command)
        })
    }

    pub fn screen(&mut self, sandbox: &Sandbox, cancel: &CancelFlag) -> Called<ScreenSection> {
        self.call(sandbox, QUICK_CALL_LIMIT, Some(cancel), |plugin, store| {
            plugin
                .envhost_environment_environment()
                .call_get_screen(store)
        })
    }

    pub fn shutdown(&mut self, sandbox: &Sandbox) -> Called<()> {
        self.call(sandbox, SHUTDOWN_LIMIT, None, |plugin, store| {
            plugin
                .envhost_environment_environment()
                .call_shutdown(store)
        })
    }
}

/// A fresh instance that has described itself, as the WIT requires before
/// any other call. The failure says which step failed.
pub fn start_described(
    sandbox: &Sandbox,
    pre: &PluginPre<HostState>,
) -> Result<(LiveInstance, Description, CallOutput), CallFailure> {
    let mut instance = LiveInstance::instantiate(sandbox, pre).map_err(|(err, output)| {
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
    Ok((instance, description, described.output))
}
