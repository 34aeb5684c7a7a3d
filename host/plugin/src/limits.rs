//! Every limit a plugin runs under, in one place: how long a call may take
//! ([`QUICK_CALL_LIMIT`], [`SCREEN_LIMIT`], [`SHUTDOWN_LIMIT`] and
//! [`SHUTDOWN_TOTAL`], [`ANSWER_GRACE`], the command's timeout), how much
//! memory, how many tables, instances, resources and open files a plugin
//! may hold, and the clock that enforces the time limits.
//!
//! # How a time limit holds, even inside a host call
//!
//! A plugin call runs synchronously on the thread that makes it. Two kinds
//! of time pass in it:
//!
//! - the plugin's own code: wasmtime checks the engine's epoch at function
//!   entries and loop back-edges, and one clock thread ([`EpochTicker`])
//!   advances it every [`TICK`] while a call runs; each advance runs the
//!   store's deadline callback ([`CallBudget::on_tick`]), which stops the
//!   call when its time is up or the host was interrupted;
//! - host calls (WASI and envhost's imports), where the epoch never fires.
//!   Every one of them is bounded by construction. The WASI 0.2 calls that
//!   wait for an event are `wasi:io/poll`'s `poll` and `pollable.block`
//!   (`sleep`, and waiting for any stream or socket) and the streams'
//!   `blocking-*` operations. The first two are replaced by the host's own
//!   (`host::poll`), which wait at most until the call's deadline and watch
//!   the host's cancellation ([`wait_within`]). The streams a plugin can
//!   hold never make a blocking operation wait: stdin is closed, stdout and
//!   stderr are captured in memory, sockets are denied, and file streams
//!   only exist for regular files, because files are opened non-blocking
//!   and anything else (a FIFO, a device, a socket) is refused at `open`
//!   (`host::files`) — a FIFO in a granted directory would otherwise block
//!   the `open` itself until a writer came. The `interactive` import's
//!   waits take the call's deadline too. What is left is single
//!   file-system calls on the project's disk.
//!
//! Why this and not the alternatives wasmtime 48 offers. Async calls
//! (`call_async` with `UpdateDeadline::Yield` / fuel) can drop a call at
//! its deadline, but dropping the future does not stop the system call it
//! waits in: wasmtime-wasi runs blocking file operations either on the
//! calling thread (which then blocks the executor just the same) or on
//! tokio's blocking pool (where a thread stuck opening a FIFO stays stuck,
//! one more per attempt). Running each call on a worker thread that the
//! host abandons has the same leak and adds a thread hand-off to every call
//! (tens of microseconds against the 1-2 µs a call costs). Both still need
//! the blocking calls themselves made bounded, and once they are, the
//! synchronous call is bounded too — at no cost per call.
//!
//! This module must not know what a plugin is asked to do, nor what the
//! agent is told when a limit is reached (that is `failure`).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, text};
use wasmtime::{Engine, ResourceLimiter, UpdateDeadline};

/// Time a plugin gets to instantiate, describe itself or say what it asks
/// for. These must be quick; commands get the command's timeout.
pub const QUICK_CALL_LIMIT: Duration = Duration::from_secs(5);

/// Time a plugin gets to draw its screen section. Every response waits for
/// every screen, so it is short: a slow plugin delays the others' answers
/// by this much at most, once (a plugin whose screen failed is not called
/// again until its next command).
pub const SCREEN_LIMIT: Duration = Duration::from_secs(1);

/// Time a plugin gets to take a snapshot of its state (its `state`
/// export), after every command: like a screen, it must be cheap.
pub const SNAPSHOT_LIMIT: Duration = SCREEN_LIMIT;

/// Time a fresh instance gets to put back a snapshot (`restore`), before
/// any command: like describing itself.
pub const RESTORE_LIMIT: Duration = QUICK_CALL_LIMIT;

/// The largest snapshot the host keeps for a plugin: 16 MiB. A bigger one
/// is dropped (and the plugin's screen says so).
pub const MAX_SNAPSHOT_BYTES: usize = 16 << 20;

/// Time one plugin gets to shut down.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(1);

/// Time all plugins together get to shut down, so that a host with many
/// slow plugins still stops within seconds of SIGTERM or end of input.
pub const SHUTDOWN_TOTAL: Duration = Duration::from_secs(3);

/// Time a plugin gets to answer after a wait used up its command's time
/// (the program was interrupted; the plugin reports that).
pub const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// Default memory a plugin instance may use, all its memories and tables
/// together: 256 MiB. Rust plugins use a few MiB; Python and JavaScript
/// runtimes tens of MiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 256 << 20;

/// Default number of plugins the host loads; past it, the rest (in name
/// order) are refused. Every plugin's screen section is in every response.
pub const DEFAULT_MAX_PLUGINS: usize = 32;

/// Default size of the largest plugin file compiled: 32 MiB (the Python
/// and JavaScript plugins are 12-18 MB; compiling costs time and memory
/// roughly in proportion).
pub const DEFAULT_MAX_PLUGIN_SIZE: u64 = 32 << 20;

/// Default CPU time compiling one plugin may use (its threads together;
/// wall-clock time twice that): a Python or JavaScript plugin takes 10-30 s.
pub const DEFAULT_COMPILE_TIME: Duration = Duration::from_secs(120);

/// Default data memory compiling one plugin may use (a Python plugin needs
/// about 350 MB).
pub const DEFAULT_COMPILE_MEMORY: u64 = 2 << 30;

/// The largest first-shown help (every command's long help) a plugin may
/// have: the help is in every response until each command is used.
pub const HELP_BYTES_LIMIT: usize = 16 * 1024;

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

/// Elements all of a plugin's tables may hold together (function
/// references, resources): at 8-16 bytes each, 16 MiB at most.
const TABLE_ELEMENTS_LIMIT: usize = 1 << 20;

/// Most core instances, linear memories and tables one plugin instance may
/// create. A Rust plugin has 3-4 instances and 1-2 memories; the Python
/// and JavaScript runtimes a few dozen instances. Each memory reserves
/// gigabytes of address space (not memory), so their number is bounded
/// besides their summed size.
pub(crate) const MAX_INSTANCES: usize = 200;
pub(crate) const MAX_MEMORIES: usize = 32;
pub(crate) const MAX_TABLES: usize = 200;

/// Most entries a plugin's resource table may hold at once (open files,
/// streams, pollables, directory listings, program sessions): each costs
/// the host memory outside the plugin's own limit. Past it, the call that
/// would add one fails and the plugin is restarted.
pub const RESOURCE_TABLE_LIMIT: usize = 4096;

/// Default number of files and directories one plugin may hold open.
pub const DEFAULT_OPEN_FILES: usize = 256;

/// Most programs one plugin instance may run at once (`interactive`).
pub const MAX_SESSIONS: usize = 8;

/// File descriptors a program session holds in the host (the terminal's
/// two sides and the child's handle), counted against the open-file budget.
const DESCRIPTORS_PER_SESSION: usize = 3;

/// Most outgoing HTTP requests one plugin instance may have in flight at
/// once (each holds a connection, a socket, and a response being read);
/// past it, a request is refused until one ends.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 8;

/// Most files each plugin may hold open: `configured`, lowered so that
/// `plugins` plugins, each with every program session it may run, hold at
/// most half of the host's descriptor limit together. The other half stays
/// for bash, python, the editor and the host itself.
pub fn open_files_per_plugin(configured: usize, plugins: usize) -> usize {
    let soft_limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| usize::try_from(soft).unwrap_or(usize::MAX))
        .unwrap_or(1024);
    let share = (soft_limit / 2) / plugins.max(1);
    configured
        .min(share.saturating_sub(MAX_SESSIONS * DESCRIPTORS_PER_SESSION + MAX_REQUESTS_IN_FLIGHT))
        .max(1)
}

/// Files and directories a plugin instance holds open, by weak handles:
/// one is closed once the plugin dropped its descriptor and every stream
/// made from it.
pub(crate) struct OpenFiles {
    limit: usize,
    held: Vec<Weak<std::fs::File>>,
}

impl OpenFiles {
    pub(crate) fn new(limit: usize) -> Self {
        OpenFiles {
            limit,
            held: Vec::new(),
        }
    }

    /// Whether one more may be opened.
    pub(crate) fn has_room(&mut self) -> bool {
        if self.held.len() >= self.limit {
            self.held.retain(|file| file.strong_count() > 0);
        }
        self.held.len() < self.limit
    }

    pub(crate) fn hold(&mut self, file: &Arc<std::fs::File>) {
        self.held.push(Arc::downgrade(file));
    }
}

/// The time a call may take, checked on every epoch tick and by every host
/// call that waits.
pub(crate) struct CallBudget {
    deadline: Instant,
    limit: Duration,
    cancel: Option<CancelFlag>,
    /// A host call (an interactive wait) used up the call's time.
    spent: bool,
    /// ... because the deadline passed (not because of a cancellation).
    timed_out: bool,
}

impl Default for CallBudget {
    /// Outside any call: no time at all.
    fn default() -> Self {
        CallBudget::starting_now(Duration::ZERO, None)
    }
}

impl CallBudget {
    /// The budget of a call that may run `limit` from now, and stops early
    /// when `cancel` is set.
    pub(crate) fn starting_now(limit: Duration, cancel: Option<&CancelFlag>) -> Self {
        let now = Instant::now();
        CallBudget {
            deadline: now
                .checked_add(limit)
                .unwrap_or(now + CALL_LIMIT_WITHOUT_TIMEOUT),
            limit,
            cancel: cancel.cloned(),
            spent: false,
            timed_out: false,
        }
    }

    /// When the call must end.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        Some(self.deadline)
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
        self.deadline = Instant::now() + grace;
    }

    /// A host call waited `waited` on a program that may take as long as it
    /// takes: that time does not count against the call's own work.
    pub(crate) fn extend(&mut self, waited: Duration) {
        if let Some(later) = self.deadline.checked_add(waited) {
            self.deadline = later;
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

    /// Whether the call may go on: its time is left and the host was not
    /// interrupted.
    fn check(&self) -> Result<(), Interrupted> {
        if self.cancel.as_ref().is_some_and(CancelFlag::is_cancelled) {
            return Err(Interrupted::Cancelled);
        }
        if Instant::now() >= self.deadline {
            return Err(Interrupted::TimedOut { limit: self.limit });
        }
        Ok(())
    }

    /// Whether the call goes on after one more tick of the clock.
    pub(crate) fn on_tick(&self) -> wasmtime::Result<UpdateDeadline> {
        self.check()?;
        Ok(UpdateDeadline::Continue(1))
    }

    /// What a host call needs to wait within this budget, detached from
    /// the store (whose table the wait borrows).
    pub(crate) fn watch(&self) -> BudgetWatch {
        BudgetWatch {
            deadline: self.deadline,
            limit: self.limit,
            cancel: self.cancel.clone(),
        }
    }
}

/// A call's deadline and cancellation, for a host call that waits.
pub(crate) struct BudgetWatch {
    deadline: Instant,
    limit: Duration,
    cancel: Option<CancelFlag>,
}

/// Runs a host call's wait (`future`, on wasmtime-wasi's runtime, as its
/// own synchronous calls do) until it completes, the call's deadline passes
/// or the host is interrupted; then the wait is dropped and the call stops
/// with [`Interrupted`]. The cancellation is checked every [`TICK`].
pub(crate) fn wait_within<F: Future>(
    watch: BudgetWatch,
    future: F,
) -> Result<F::Output, Interrupted> {
    wasmtime_wasi::runtime::in_tokio(async move {
        let mut future = std::pin::pin!(future);
        loop {
            if watch.cancel.as_ref().is_some_and(CancelFlag::is_cancelled) {
                return Err(Interrupted::Cancelled);
            }
            let now = Instant::now();
            if now >= watch.deadline {
                return Err(Interrupted::TimedOut { limit: watch.limit });
            }
            let slice = (watch.deadline - now).min(TICK);
            if let Ok(output) = tokio::time::timeout(slice, future.as_mut()).await {
                return Ok(output);
            }
        }
    })
}

/// A plugin instance's outgoing requests: how many are in flight, and the
/// call each belongs to. A request never outlives its call: it ends when
/// the call's deadline passes, the host cancels the call, or the call
/// returns ([`EndOfCall`]) — whichever comes first.
#[derive(Default)]
pub(crate) struct RequestCalls {
    in_flight: Arc<AtomicUsize>,
    /// Bumped when a call ends; a request remembers the value it started
    /// under.
    ended_calls: Arc<AtomicU64>,
    /// The slot of the request being handed to the HTTP client.
    armed: Option<RequestSlot>,
}

impl RequestCalls {
    /// A slot for one more request within the current call (`watch`), or
    /// `None` when [`MAX_REQUESTS_IN_FLIGHT`] are in flight.
    pub(crate) fn start(&self, watch: BudgetWatch) -> Option<RequestSlot> {
        self.in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_REQUESTS_IN_FLIGHT).then_some(n + 1)
            })
            .ok()?;
        Some(RequestSlot {
            in_flight: Arc::clone(&self.in_flight),
            bound: Arc::new(RequestBound {
                watch,
                call: self.ended_calls.load(Ordering::SeqCst),
                ended_calls: Arc::clone(&self.ended_calls),
            }),
        })
    }

    /// Ends every request of the current call when dropped.
    pub(crate) fn end_of_call(&self) -> EndOfCall {
        EndOfCall(Arc::clone(&self.ended_calls))
    }

    /// Holds `slot` for the request about to be sent.
    pub(crate) fn arm(&mut self, slot: RequestSlot) {
        self.armed = Some(slot);
    }

    /// The slot armed for the request being sent, if any.
    pub(crate) fn take_armed(&mut self) -> Option<RequestSlot> {
        self.armed.take()
    }
}

/// The end of a call, for the requests it started: dropping it ends them.
pub struct EndOfCall(Arc<AtomicU64>);

impl Drop for EndOfCall {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// One request's place among those in flight; dropping it (the request
/// and its response are done, or dropped) frees the place.
pub(crate) struct RequestSlot {
    in_flight: Arc<AtomicUsize>,
    bound: Arc<RequestBound>,
}

impl RequestSlot {
    /// How long the request may still take.
    pub(crate) fn remaining(&self) -> Duration {
        self.bound
            .watch
            .deadline
            .saturating_duration_since(Instant::now())
    }

    /// Runs `future` (on wasmtime-wasi's runtime) while the request's call
    /// lasts; `None` when the call ended first (the future is dropped).
    pub(crate) async fn within<F: Future>(self: &Arc<Self>, future: F) -> Option<F::Output> {
        let mut future = std::pin::pin!(future);
        loop {
            if self.bound.ended() {
                return None;
            }
            let slice = self.remaining().min(TICK).max(Duration::from_millis(1));
            if let Ok(output) = tokio::time::timeout(slice, future.as_mut()).await {
                return Some(output);
            }
        }
    }
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The end of the call a request belongs to.
struct RequestBound {
    watch: BudgetWatch,
    call: u64,
    ended_calls: Arc<AtomicU64>,
}

impl RequestBound {
    fn ended(&self) -> bool {
        self.ended_calls.load(Ordering::SeqCst) != self.call
            || Instant::now() >= self.watch.deadline
            || self
                .watch
                .cancel
                .as_ref()
                .is_some_and(CancelFlag::is_cancelled)
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

/// A grow past the plugin's memory limit (all its memories together); it
/// traps the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the plugin tried to grow its memory to {} bytes in all, over its limit of {}",
    desired,
    limit
)]
pub struct MemoryLimitExceeded {
    /// The bytes all its memories would have held together.
    pub desired: usize,
    pub limit: usize,
}

/// A table grow past [`TABLE_ELEMENTS_LIMIT`] (all tables together).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the plugin tried to grow its tables to {desired} elements in all, over the limit of {limit}"
)]
pub struct TableLimitExceeded {
    pub desired: usize,
    pub limit: usize,
}

/// Enforces a plugin instance's limits on everything it allocates: the
/// bytes of all its linear memories together, the elements of all its
/// tables together, and how many instances, memories and tables it has.
pub(crate) struct PluginLimiter {
    memory_limit: usize,
    /// Bytes of every memory of the store, as last allowed to grow.
    memory_total: usize,
    /// The last allowed grow, undone if the grow then failed.
    memory_pending: usize,
    table_total: usize,
    table_pending: usize,
}

impl PluginLimiter {
    /// A limiter that lets the memories grow to `memory_limit` bytes in all.
    pub(crate) fn new(memory_limit: usize) -> Self {
        PluginLimiter {
            memory_limit,
            memory_total: 0,
            memory_pending: 0,
            table_total: 0,
            table_pending: 0,
        }
    }
}

impl ResourceLimiter for PluginLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // `current` is part of the total already (0 for a new memory).
        let grow = desired.saturating_sub(current);
        let total = self.memory_total.saturating_add(grow);
        if total > self.memory_limit {
            return Err(MemoryLimitExceeded {
                desired: total,
                limit: self.memory_limit,
            }
            .into());
        }
        self.memory_total = total;
        self.memory_pending = grow;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_total -= std::mem::take(&mut self.memory_pending);
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current);
        let total = self.table_total.saturating_add(grow);
        if total > TABLE_ELEMENTS_LIMIT {
            return Err(TableLimitExceeded {
                desired: total,
                limit: TABLE_ELEMENTS_LIMIT,
            }
            .into());
        }
        self.table_total = total;
        self.table_pending = grow;
        Ok(true)
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.table_total -= std::mem::take(&mut self.table_pending);
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

/// The time left for plugins to shut down: [`SHUTDOWN_TOTAL`] from the
/// first shutdown, at most [`SHUTDOWN_LIMIT`] each.
#[derive(Default)]
pub(crate) struct ShutdownClock {
    started: Mutex<Option<Instant>>,
}

impl ShutdownClock {
    /// The limit for the next plugin's shutdown; `None` once the total is
    /// spent (the plugin is then dropped without being asked).
    pub(crate) fn next_limit(&self) -> Option<Duration> {
        let mut started = self.started.lock().unwrap_or_else(|p| p.into_inner());
        let started = *started.get_or_insert_with(Instant::now);
        let left = SHUTDOWN_TOTAL.checked_sub(started.elapsed())?;
        (!left.is_zero()).then(|| left.min(SHUTDOWN_LIMIT))
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
    /// Starts the clock thread for `engines` (the optimised and the
    /// baseline code's: a call on either is bounded alike).
    pub(crate) fn start(engines: &[Engine]) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            active_calls: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let engines = engines.to_vec();
        let state = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name("envhost-epoch".into())
            .spawn(move || run(&engines, &state))?;
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

fn run(engines: &[Engine], shared: &Shared) {
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
        for engine in engines {
            engine.increment_epoch();
        }
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
        let ticker = EpochTicker::start(std::slice::from_ref(&engine)).expect("ticker");
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

    #[test]
    fn memories_count_together_against_the_limit() {
        let mut limiter = PluginLimiter::new(100);
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        // A second memory: 60 + 50 is over 100, though each is under it.
        let over = limiter.memory_growing(0, 50, None).unwrap_err();
        let over = over.downcast_ref::<MemoryLimitExceeded>().unwrap();
        assert_eq!((over.desired, over.limit), (110, 100));
        assert!(limiter.memory_growing(0, 30, None).unwrap());
        // A grow that then fails is not counted.
        assert!(limiter.memory_growing(30, 35, None).unwrap());
        limiter
            .memory_grow_failed(wasmtime::Error::msg("mmap"))
            .unwrap();
        assert_eq!(limiter.memory_total, 90);
        assert!(limiter.memory_growing(30, 40, None).unwrap());
        assert!(limiter.memory_growing(60, 61, None).is_err());
    }

    #[test]
    fn waits_end_at_the_deadline_or_the_cancellation() {
        let budget = CallBudget::starting_now(Duration::from_millis(50), None);
        let started = Instant::now();
        let waited = wait_within(budget.watch(), std::future::pending::<()>());
        assert_eq!(
            waited,
            Err(Interrupted::TimedOut {
                limit: Duration::from_millis(50)
            })
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        let cancel = CancelFlag::new();
        cancel.cancel();
        let budget = CallBudget::starting_now(Duration::from_secs(60), Some(&cancel));
        assert_eq!(
            wait_within(budget.watch(), std::future::pending::<()>()),
            Err(Interrupted::Cancelled)
        );
        let budget = CallBudget::starting_now(Duration::from_secs(60), None);
        assert_eq!(wait_within(budget.watch(), async { 7 }), Ok(7));
    }

    #[test]
    fn shutdowns_share_one_total() {
        let clock = ShutdownClock::default();
        assert_eq!(clock.next_limit(), Some(SHUTDOWN_LIMIT));
        *clock.started.lock().unwrap() = Some(Instant::now() - SHUTDOWN_TOTAL);
        assert_eq!(clock.next_limit(), None);
    }

    #[test]
    fn open_files_are_counted_until_dropped() {
        let mut files = OpenFiles::new(2);
        let a = Arc::new(tempfile::tempfile().unwrap());
        let b = Arc::new(tempfile::tempfile().unwrap());
        files.hold(&a);
        assert!(files.has_room());
        files.hold(&b);
        assert!(!files.has_room());
        drop(a);
        assert!(files.has_room(), "a dropped file frees its place");
    }
}
