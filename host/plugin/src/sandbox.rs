//! The sandbox every plugin runs in: the wasmtime engine and its
//! configuration, the linker with the only imports a plugin gets, and fresh
//! stores whose state (`state`) enforces the defaults.
//!
//! Defaults, all enforced here: no filesystem (no preopened directory), no
//! network (TCP, UDP and name lookup denied), no environment variables, no
//! arguments, no processes (WASI 0.2 has none), stdin closed,
//! stdout/stderr captured in bounded memory (`guest_io`), memory, tables,
//! instances, resources and open files bounded (`limits`), and every call
//! bounded in time (`limits`): by epoch interruption in the plugin's code,
//! and in host calls by the host's own versions of the WASI calls that can
//! wait (`host`). Clocks and random numbers work.
//!
//! A plugin's [`Grants`] open exactly what the operator granted, per store:
//! each granted directory's handle (opened once, at load) as a WASI
//! preopen (read-only or read-write, at `/` + its path in the project),
//! the granted variables as its WASI environment, a different memory
//! limit, and the programs the `interactive` import may start (checked
//! there). Nothing else is linked or opened. This module must not know
//! about the agent, help or screens.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use envhost_core::CancelFlag;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::WasiCtx;

use crate::grants::Grants;
use crate::guest_io::GuestOutput;
use crate::limits::{ActiveCall, CallBudget, EndOfCall, EpochTicker, ShutdownClock};
use crate::state::HostState;
use crate::wit::{latest, since_v0_1_0 as v0_1_0};

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
    open_files: usize,
    shutdown: ShutdownClock,
}

impl fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandbox")
            .field("memory_limit", &self.memory_limit)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// The sandbox for plugins with `memory_limit` bytes each (unless
    /// granted another), and at most `open_files` files open each.
    pub fn new(memory_limit: usize, open_files: usize) -> Result<Self, SandboxError> {
        let engine =
            Engine::new(&engine_config()).map_err(|e| SandboxError::Engine(e.to_string()))?;
        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("linking WASI: {e}")))?;
        crate::host::replace_wasi_calls(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("linking the host's WASI calls: {e}")))?;
        crate::host::add_http_to_linker(&mut linker)
            .map_err(|e| SandboxError::Engine(format!("linking outgoing HTTP: {e}")))?;
        // Every version's imports, side by side (their names differ by
        // version): a component links to the ones it was built against.
        let linked = latest::logging::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .and_then(|()| latest::interactive::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s))
            .and_then(|()| v0_1_0::logging::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s))
            .and_then(|()| v0_1_0::interactive::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s));
        linked.map_err(|e| SandboxError::Engine(format!("linking envhost's imports: {e}")))?;
        let ticker = EpochTicker::start(&engine)?;
        Ok(Sandbox {
            engine,
            linker,
            ticker,
            memory_limit,
            open_files,
            shutdown: ShutdownClock::default(),
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
    /// with what `grants` opens.
    pub fn new_store(&self, output: GuestOutput, grants: &Arc<Grants>) -> Store<HostState> {
        let mut wasi = WasiCtx::builder();
        wasi.stdout(output.stdout())
            .stderr(output.stderr())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            // Calls are synchronous: file operations run on the calling
            // thread rather than hopping to a blocking pool.
            .allow_blocking_current_thread(true);
        // Granted directories are not preopened here by path: `host::files`
        // hands out the handles opened at load.
        for (name, value) in grants.variable_values() {
            wasi.env(name, value);
        }
        let state = HostState::new(
            wasi.build(),
            grants.memory.unwrap_or(self.memory_limit),
            self.open_files,
            output,
            Arc::clone(grants),
        );
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| state.limiter());
        store.epoch_deadline_callback(|cx| cx.data().budget().on_tick());
        store.set_epoch_deadline(1);
        store
    }

    /// The time the next plugin may take to shut down (see
    /// [`ShutdownClock`]).
    pub(crate) fn shutdown_limit(&self) -> Option<Duration> {
        self.shutdown.next_limit()
    }

    /// Arms a store for one call: `limit` from now, watching `cancel`. The
    /// returned guard keeps the clock ticking; drop it when the call ends
    /// (which ends the HTTP requests the call started).
    pub fn begin_call(
        &self,
        store: &mut Store<HostState>,
        limit: Duration,
        cancel: Option<&CancelFlag>,
    ) -> CallInProgress<'_> {
        *store.data_mut().budget_mut() = CallBudget::starting_now(limit, cancel);
        store.set_epoch_deadline(1);
        CallInProgress {
            _requests: store.data_mut().requests().end_of_call(),
            _ticking: self.ticker.activate(),
        }
    }
}

/// A call in progress (see [`Sandbox::begin_call`]).
pub struct CallInProgress<'a> {
    _ticking: ActiveCall<'a>,
    _requests: EndOfCall,
}

/// The engine's configuration; the compiler process uses the same, so that
/// the code it makes loads here.
pub(crate) fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config
}
