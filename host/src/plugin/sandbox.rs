//! The sandbox every plugin runs in: the wasmtime engine and its
//! configuration, the linker with the only imports a plugin gets, and the
//! per-store state that enforces the defaults.
//!
//! Defaults, all enforced here: no filesystem (no preopened directory), no
//! network (TCP, UDP and name lookup denied), no environment variables, no
//! arguments, no processes (WASI 0.2 has none), stdout/stderr captured in
//! bounded memory (`guest_io`), memory bounded by a resource limiter that
//! traps on the first grow past the limit, and every call bounded in time by
//! epoch interruption (`epoch`) with the host's cancellation watched on every
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
use std::time::{Duration, Instant};

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

use super::bindings::{self, Level};
use super::epoch::{ActiveCall, EpochTicker};
use super::grants::Grants;
use super::guest_io::GuestOutput;
use crate::environment::CancelFlag;

/// Default memory a plugin instance may use: 256 MiB. Rust plugins use a
/// few MiB; Python and JavaScript runtimes tens of MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 256 << 20;

/// Elements a plugin's tables may hold (function references, resources).
const TABLE_ELEMENTS_LIMIT: usize = 1 << 20;

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
        bindings::envhost::environment::logging::add_to_linker::<HostState, HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )
        .map_err(|e| SandboxError::Engine(format!("linking the logging import: {e}")))?;
        bindings::interactive::add_to_linker::<HostState, HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )
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
        let state = HostState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                memory_limit: grants.memory.unwrap_or(self.memory_limit),
            },
            output,
            budget: CallBudget::default(),
            grants: Arc::clone(grants),
            sessions: 0,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_callback(|cx| cx.data().budget.on_tick());
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
        store.data_mut().budget = CallBudget {
            deadline: Instant::now().checked_add(limit),
            limit,
            cancel: cancel.cloned(),
            spent: false,
            timed_out: false,
        };
        store.set_epoch_deadline(1);
        self.ticker.activate()
    }
}

fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config
}

/// Everything a plugin's store holds. Dropping it (a trap, a restart,
/// shutdown) drops its resource table, and with it every program session
/// the plugin still had.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    output: GuestOutput,
    budget: CallBudget,
    grants: Arc<Grants>,
    /// Program sessions alive in `table`.
    sessions: usize,
}

impl HostState {
    pub fn output(&self) -> &GuestOutput {
        &self.output
    }

    pub fn grants(&self) -> Arc<Grants> {
        Arc::clone(&self.grants)
    }

    pub(super) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    pub(super) fn session_count(&self) -> usize {
        self.sessions
    }

    pub(super) fn session_started(&mut self) {
        self.sessions += 1;
    }

    pub(super) fn session_ended(&mut self) {
        self.sessions = self.sessions.saturating_sub(1);
    }

    /// When the current call must end.
    pub(super) fn call_deadline(&self) -> Option<Instant> {
        self.budget.deadline
    }

    pub(super) fn cancel_flag(&self) -> Option<CancelFlag> {
        self.budget.cancel.clone()
    }

    /// Whether a host call already used up this call's time.
    pub(super) fn call_time_spent(&self) -> bool {
        self.budget.spent
    }

    /// A host call used up the call's time (and interrupted what it ran):
    /// the plugin gets `grace` to return, and later waits fail at once.
    pub(super) fn spend_call_time(&mut self, grace: Duration) {
        self.budget.spent = true;
        self.budget.deadline = Instant::now().checked_add(grace);
    }

    /// The host's cancellation arrived while a host call waited, and the
    /// host call handled it (it interrupted its program): the rest of this
    /// call is not stopped for it.
    pub(super) fn forgive_cancellation(&mut self) {
        self.budget.cancel = None;
    }

    /// The command's deadline passed while a host call waited.
    pub(super) fn note_host_timeout(&mut self) {
        self.budget.timed_out = true;
    }

    /// Whether the last call's time ran out inside a host call, which the
    /// plugin survived (it answered within its grace).
    pub fn call_timed_out_in_host(&self) -> bool {
        self.budget.timed_out
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl bindings::envhost::environment::logging::Host for HostState {
    fn log(&mut self, level: Level, message: String) {
        self.output.log(level, &message);
    }
}

/// The time a call may take, checked on every epoch tick.
#[derive(Default)]
struct CallBudget {
    deadline: Option<Instant>,
    limit: Duration,
    cancel: Option<CancelFlag>,
    /// A host call (an interactive wait) used up the call's time.
    spent: bool,
    /// ... because the deadline passed (not because of a cancellation).
    timed_out: bool,
}

impl CallBudget {
    fn on_tick(&self) -> wasmtime::Result<UpdateDeadline> {
        if self.cancel.as_ref().is_some_and(CancelFlag::is_cancelled) {
            return Err(Interrupted::Cancelled.into());
        }
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => {
                Err(Interrupted::TimedOut { limit: self.limit }.into())
            }
            _ => Ok(UpdateDeadline::Continue(1)),
        }
    }
}

/// Why the host stopped a running call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Interrupted {
    #[error("the call ran past its time limit of {}", crate::plugin::format_duration(*limit))]
    TimedOut { limit: Duration },
    #[error("the host was interrupted")]
    Cancelled,
}

/// A grow past the plugin's memory limit; it traps the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the plugin tried to grow its memory to {} bytes, over its limit of {}",
    desired,
    limit
)]
pub struct MemoryLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// A table grow past [`TABLE_ELEMENTS_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the plugin tried to grow a table to {desired} elements, over the limit of {limit}")]
pub struct TableLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

struct MemoryLimiter {
    memory_limit: usize,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            return Err(MemoryLimitExceeded {
                desired,
                limit: self.memory_limit,
            }
            .into());
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > TABLE_ELEMENTS_LIMIT {
            return Err(TableLimitExceeded {
                desired,
                limit: TABLE_ELEMENTS_LIMIT,
            }
            .into());
        }
        Ok(true)
    }
}
