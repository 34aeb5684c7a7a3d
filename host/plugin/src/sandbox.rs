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
//!
//! Two compilers, one sandbox: code made by Cranelift (optimised, what the
//! compiled-code cache holds) and by Winch (wasmtime's baseline compiler,
//! several times cheaper to compile, for a plugin's first start while its
//! optimised code is made in the background: `load::tiering`). Each has
//! its engine and its linker, built by the same function; the clock
//! thread advances both engines' epochs, and every store gets the same
//! limits, whichever engine made its code. Winch in wasmtime 48 emits the
//! epoch check at every function entry and loop header, as Cranelift does,
//! so an endless loop in baseline code is stopped the same way.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use envhost_core::CancelFlag;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store};

pub use crate::engine_config::Tier;
use crate::engine_config::engine_config;
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

/// An engine and the linker of the host's imports for it.
#[derive(Clone)]
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
}

impl Runtime {
    fn new(tier: Tier) -> Result<Self, SandboxError> {
        let engine =
            Engine::new(&engine_config(tier)).map_err(|e| SandboxError::Engine(e.to_string()))?;
        let linker = linker_for(&engine)?;
        Ok(Runtime { engine, linker })
    }
}

/// The linker with every import a plugin gets, for `engine`.
fn linker_for(engine: &Engine) -> Result<Linker<HostState>, SandboxError> {
    let mut linker = Linker::<HostState>::new(engine);
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
    Ok(linker)
}

/// Two engines (optimised and baseline code), their linkers and one clock
/// thread, shared by all plugins.
pub struct Sandbox {
    optimised: Runtime,
    baseline: Runtime,
    ticker: EpochTicker,
    background: crate::background::Background,
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
        let optimised = Runtime::new(Tier::Optimised)?;
        let baseline = Runtime::new(Tier::Baseline)?;
        let ticker = EpochTicker::start(&[optimised.engine.clone(), baseline.engine.clone()])?;
        Ok(Sandbox {
            optimised,
            baseline,
            ticker,
            background: crate::background::Background::default(),
            memory_limit,
            open_files,
            shutdown: ShutdownClock::default(),
        })
    }

    /// The engine of optimised code (the cache's).
    pub fn engine(&self) -> &Engine {
        &self.optimised.engine
    }

    pub(crate) fn runtime(&self, tier: Tier) -> &Runtime {
        match tier {
            Tier::Optimised => &self.optimised,
            Tier::Baseline => &self.baseline,
        }
    }

    /// The linker for code made by `engine` (one of this sandbox's).
    pub fn linker(&self, engine: &Engine) -> &Linker<HostState> {
        if Engine::same(engine, &self.baseline.engine) {
            &self.baseline.linker
        } else {
            &self.optimised.linker
        }
    }

    /// The optimised code being compiled in the background.
    pub(crate) fn background(&self) -> &crate::background::Background {
        &self.background
    }

    pub fn memory_limit(&self) -> usize {
        self.memory_limit
    }

    /// A fresh store for one plugin instance of code made by `engine` (one
    /// of this sandbox's), its output going to `output`, with what `grants`
    /// opens.
    pub fn new_store(
        &self,
        engine: &Engine,
        output: GuestOutput,
        grants: &Arc<Grants>,
    ) -> Store<HostState> {
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
        let mut store = Store::new(engine, state);
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
