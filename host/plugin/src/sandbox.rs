//! The sandbox every plugin runs in: the wasmtime engine and its
//! configuration, the linker with the only imports a plugin gets, and fresh
//! stores whose state (`state`) enforces the defaults.
//!
//! Defaults, all enforced here: no filesystem (no preopened directory), no
//! network (TCP, UDP and name lookup denied), no environment variables, no
//! arguments, no processes (WASI 0.2 has none), stdout/stderr captured in
//! bounded memory (`guest_io`), memory bounded by a resource limiter that
//! traps on the first grow past the limit, and every call bounded in time by
//! epoch interruption (`limits`) with the host's cancellation watched on every
//! tick. Clocks and random numbers work.
//!
//! A plugin's [`Grants`] open exactly what the operator granted, per store:
//! each granted directory as a WASI preopen (read-only or read-write, at
//! `/` + its path in the project), the granted variables as its WASI
//! environment, a different memory limit, and the programs the
//! `interactive` import may start (checked there). Nothing else is linked
//! or opened. This module must not know about the agent, help or screens.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use envhost_core::CancelFlag;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{FsPerms, WasiCtx};

use crate::grants::Grants;
use crate::guest_io::GuestOutput;
use crate::limits::{ActiveCall, CallBudget, EpochTicker, MemoryLimiter};
use crate::state::HostState;
use crate::wit::latest;

/// Why the sandbox could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    #[error("cannot start the plugin clock thread: {0}")]
    Ticker(#[from] std::io::Error),
}

/// One engine, one linker and one clock thread, shared by all plugins.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    ticker: EpochTicker,
    memory_limit: usize,
}

impl fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandbox")
            .field("memory_limit", &self.memory_limit)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    pub fn new(memory_limit: usize) -> Result<Self, SandboxError> {
        let engine =
            Engine::new(&engine_config()).map_err(|e| SandboxError::Engine(e.to_string()))?;
        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("linking WASI: {e}")))?;
        latest::logging::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |state| state)
            .map_err(|e| SandboxError::Engine(format!("linking the logging import: {e}")))?;
        latest::interactive::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |state| {
            state
        })
        .map_err(|e| SandboxError::Engine(format!("linking the interactive import: {e}")))?;
        let ticker = EpochTicker::start(&engine)?;
        Ok(Sandbox {
            engine,
            linker,
            ticker,
            memory_limit,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn linker(&self) -> &Linker<HostState> {
        &self.linker
    }

    pub fn memory_limit(&self) -> usize {
        self.memory_limit
    }

    /// A fresh store for one plugin instance, its output going to `output`,
    /// with what `grants` opens. Fails when a granted directory cannot be
    /// opened (removed since the host started).
    pub fn new_store(
        &self,
        output: GuestOutput,
        grants: &Arc<Grants>,
    ) -> Result<Store<HostState>, String> {
        let mut wasi = WasiCtx::builder();
        wasi.stdout(output.stdout())
            .stderr(output.stderr())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            // Calls are synchronous: file operations run on the calling
            // thread rather than hopping to a blocking pool.
            .allow_blocking_current_thread(true);
        for dir in &grants.directories {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&dir.host_path, &dir.guest_path, perms)
                .map_err(|err| {
                    format!(
                        "its granted directory {} cannot be opened: {err}",
                        dir.relative
                    )
                })?;
        }
        for (name, value) in grants.variable_values() {
            wasi.env(name, value);
        }
        let state = HostState::new(
            wasi.build(),
            MemoryLimiter::new(grants.memory.unwrap_or(self.memory_limit)),
            output,
            Arc::clone(grants),
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| state.limiter());
        store.epoch_deadline_callback(|cx| cx.data().budget().on_tick());
        store.set_epoch_deadline(1);
        Ok(store)
    }

    /// Arms a store for one call: `limit` from now, watching `cancel`. The
    /// returned guard keeps the clock ticking; drop it when the call ends.
    pub fn begin_call(
        &self,
        store: &mut Store<HostState>,
        limit: Duration,
        cancel: Option<&CancelFlag>,
    ) -> ActiveCall<'_> {
        *store.data_mut().budget_mut() = CallBudget::starting_now(limit, cancel);
        store.set_epoch_deadline(1);
        self.ticker.activate()
    }
}

fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config
}
