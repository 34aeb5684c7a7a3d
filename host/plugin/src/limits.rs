//! Every limit a plugin call runs under, in one place: how long a call may
//! take (the command's timeout, [`QUICK_CALL_LIMIT`], [`SHUTDOWN_LIMIT`],
//! [`ANSWER_GRACE`]), how much memory and how many table elements an
//! instance may use, and the clock that enforces the time limits.
//!
//! The clock is one thread that advances the engine's epoch every [`TICK`]
//! while a plugin call runs. wasmtime checks the epoch at function entries
//! and loop back-edges; each advance runs the store's deadline callback
//! ([`CallBudget::on_tick`]), which decides whether the call has run out of
//! time or the host was interrupted. Between calls the thread lingers a
//! moment (so a burst of calls does not pay a wake-up each) and then parks,
//! so an idle host does not wake up a hundred times a second.
//!
//! This module must not know what a plugin is asked to do, nor what the
//! agent is told when a limit is reached (that is `failure`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, text};
use wasmtime::{Engine, ResourceLimiter, UpdateDeadline};

/// Time a plugin gets to instantiate, describe itself or draw its screen.
/// These must be quick; commands get the command's timeout.
pub const QUICK_CALL_LIMIT: Duration = Duration::from_secs(5);

/// Time a plugin gets to shut down: the host is stopping, and every
/// plugin's shutdown runs in turn.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// Time a plugin gets to answer after a wait used up its command's time
/// (the program was interrupted; the plugin reports that).
pub const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// Default memory a plugin instance may use: 256 MiB. Rust plugins use a
/// few MiB; Python and JavaScript runtimes tens of MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 256 << 20;

/// A command's time: the agent's `timeout` (or the host's default), capped
/// by the operator's `time-limit` for the plugin; and whether the cap
/// applied. A command without a limit (sent with `yield_ms`) gets
/// [`CALL_LIMIT_WITHOUT_TIMEOUT`] for its own WebAssembly work, which never
/// yields; its waits on programs do not count against it.
pub(crate) fn command_limit(
    timeout: Option<Duration>,
    granted: Option<Duration>,
) -> (Duration, bool) {
    let timeout = timeout.unwrap_or(CALL_LIMIT_WITHOUT_TIMEOUT);
    match granted {
        Some(limit) if limit < timeout => (limit, true),
        _ => (timeout, false),
    }
}

/// The time a plugin command may take when its context sets no limit.
const CALL_LIMIT_WITHOUT_TIMEOUT: Duration = Duration::from_secs(120);

/// Elements a plugin's tables may hold (function references, resources).
const TABLE_ELEMENTS_LIMIT: usize = 1 << 20;

/// The time a call may take, checked on every epoch tick.
#[derive(Default)]
pub(crate) struct CallBudget {
    deadline: Option<Instant>,
    limit: Duration,
    cancel: Option<CancelFlag>,
    /// A host call (an interactive wait) used up the call's time.
    spent: bool,
    /// ... because the deadline passed (not because of a cancellation).
    timed_out: bool,
}

impl CallBudget {
    /// The budget of a call that may run `limit` from now, and stops early
    /// when `cancel` is set.
    pub(crate) fn starting_now(limit: Duration, cancel: Option<&CancelFlag>) -> Self {
        CallBudget {
            deadline: Instant::now().checked_add(limit),
            limit,
            cancel: cancel.cloned(),
            spent: false,
            timed_out: false,
        }
    }

    /// When the call must end.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The host's cancellation the call watches, if it still does.
    pub(crate) fn cancel_flag(&self) -> Option<CancelFlag> {
        self.cancel.clone()
    }

    /// Whether a host call already used up this call's time.
    pub(crate) fn is_spent(&self) -> bool {
        self.spent
    }

    /// A host call used up the call's time (and interrupted what it ran):
    /// the plugin gets `grace` to return, and later waits fail at once.
    pub(crate) fn spend(&mut self, grace: Duration) {
        self.spent = true;
        self.deadline = Instant::now().checked_add(grace);
    }

    /// A host call waited `waited` on a program that may take as long as it
    /// takes: that time does not count against the call's own work.
    pub(crate) fn extend(&mut self, waited: Duration) {
        if let Some(deadline) = self.deadline {
            self.deadline = deadline.checked_add(waited).or(Some(deadline));
        }
    }

    /// The host's cancellation arrived while a host call waited, and the
    /// host call handled it (it interrupted its program): the rest of this
    /// call is not stopped for it.
    pub(crate) fn forgive_cancellation(&mut self) {
        self.cancel = None;
    }

    /// The command's deadline passed while a host call waited.
    pub(crate) fn note_host_timeout(&mut self) {
        self.timed_out = true;
    }

    /// Whether the call's time ran out inside a host call, which the plugin
    /// survived (it answered within its grace).
    pub(crate) fn timed_out_in_host(&self) -> bool {
        self.timed_out
    }

    /// Whether the call goes on after one more tick of the clock.
    pub(crate) fn on_tick(&self) -> wasmtime::Result<UpdateDeadline> {
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
    #[error("the call ran past its time limit of {}", text::duration(*limit))]
    TimedOut { limit: Duration },
    #[error("the call was {}", text::INTERRUPTED)]
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

/// Enforces an instance's memory and table limits on every grow.
pub(crate) struct MemoryLimiter {
    memory_limit: usize,
}

impl MemoryLimiter {
    /// A limiter that lets memory grow to `memory_limit` bytes.
    pub(crate) fn new(memory_limit: usize) -> Self {
        MemoryLimiter { memory_limit }
    }
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

/// How often the epoch advances during a call: the granularity of time
/// limits and of noticing the host's cancellation.
const TICK: Duration = Duration::from_millis(10);

/// How long the thread keeps ticking after the last call ended.
const LINGER: Duration = Duration::from_millis(500);

struct Shared {
    active_calls: AtomicUsize,
    parked: AtomicBool,
    stop: AtomicBool,
}

/// Advances an engine's epoch while calls are active. Stops its thread when
/// dropped.
pub(crate) struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    handle: Thread,
}

impl EpochTicker {
    /// Starts the clock thread for `engine`.
    pub(crate) fn start(engine: &Engine) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            active_calls: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let engine = engine.clone();
        let state = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name("envhost-epoch".into())
            .spawn(move || run(&engine, &state))?;
        let handle = thread.thread().clone();
        Ok(EpochTicker {
            shared,
            thread: Some(thread),
            handle,
        })
    }

    /// Marks a call as running until the guard is dropped.
    pub(crate) fn activate(&self) -> ActiveCall<'_> {
        self.shared.active_calls.fetch_add(1, Ordering::SeqCst);
        // Pairs with `run`: it sets `parked` and then re-reads the count, so
        // either it sees this call or this sees it parked (or about to
        // park, which an early unpark turns into no park at all).
        if self.shared.parked.load(Ordering::SeqCst) {
            self.handle.unpark();
        }
        ActiveCall { ticker: self }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.handle.unpark();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A running call; see [`EpochTicker::activate`].
pub(crate) struct ActiveCall<'a> {
    ticker: &'a EpochTicker,
}

impl Drop for ActiveCall<'_> {
    fn drop(&mut self) {
        self.ticker
            .shared
            .active_calls
            .fetch_sub(1, Ordering::SeqCst);
    }
}

fn run(engine: &Engine, shared: &Shared) {
    let mut last_active = Instant::now();
    while !shared.stop.load(Ordering::SeqCst) {
        if shared.active_calls.load(Ordering::SeqCst) > 0 {
            last_active = Instant::now();
        } else if last_active.elapsed() >= LINGER {
            shared.parked.store(true, Ordering::SeqCst);
            if shared.active_calls.load(Ordering::SeqCst) == 0
                && !shared.stop.load(Ordering::SeqCst)
            {
                thread::park();
            }
            shared.parked.store(false, Ordering::SeqCst);
            last_active = Instant::now();
            continue;
        }
        thread::sleep(TICK);
        engine.increment_epoch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::{Config, Instance, Module, Store};

    /// `(module (func (export "run") (loop (br 0))))`, hand-assembled so the
    /// test needs no WAT parser.
    const LOOP_FOREVER: &[u8] = &[
        0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
        0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type 0: func () -> ()
        0x03, 0x02, 0x01, 0x00, // func 0 has type 0
        0x07, 0x07, 0x01, 0x03, b'r', b'u', b'n', 0x00, 0x00, // export "run"
        0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop { br 0 }
    ];

    #[test]
    fn an_endless_loop_sees_the_epoch_advance_only_while_a_call_is_active() {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).expect("engine");
        let ticker = EpochTicker::start(&engine).expect("ticker");
        let module = Module::new(&engine, LOOP_FOREVER).expect("module");
        let mut store = Store::new(&engine, 0u32);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut cx| {
            *cx.data_mut() += 1;
            if *cx.data() >= 3 {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        let instance = Instance::new(&mut store, &module, &[]).expect("instance");
        let run = instance
            .get_typed_func::<(), ()>(&mut store, "run")
            .expect("run");
        let result = {
            let _call = ticker.activate();
            run.call(&mut store, ())
        };
        let err = result.expect_err("the loop must be interrupted");
        assert_eq!(
            err.downcast_ref::<wasmtime::Trap>(),
            Some(&wasmtime::Trap::Interrupt)
        );
        assert_eq!(*store.data(), 3, "three ticks, then the interrupt");
        assert_eq!(ticker.shared.active_calls.load(Ordering::SeqCst), 0);
        drop(ticker); // joins the thread: a hang here fails the run
    }
}
