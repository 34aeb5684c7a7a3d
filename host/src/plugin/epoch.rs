//! The clock behind plugins' time limits: one thread that advances the
//! engine's epoch every [`TICK`] while a plugin call runs.
//!
//! wasmtime checks the epoch at function entries and loop back-edges; each
//! advance runs the store's deadline callback (see `sandbox`), which decides
//! whether the call has run out of time. Between calls the thread lingers a
//! moment (so a burst of calls does not pay a wake-up each) and then parks,
//! so an idle host does not wake up a hundred times a second. This module
//! owns that thread; it must not decide what a deadline is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use wasmtime::Engine;

/// How often the epoch advances during a call: the granularity of time
/// limits and of noticing the host's cancellation.
pub const TICK: Duration = Duration::from_millis(10);

/// How long the thread keeps ticking after the last call ended.
const LINGER: Duration = Duration::from_millis(500);

struct Shared {
    active_calls: AtomicUsize,
    parked: AtomicBool,
    stop: AtomicBool,
}

/// Advances an engine's epoch while calls are active. Stops its thread when
/// dropped.
pub struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    handle: Thread,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> std::io::Result<Self> {
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
    pub fn activate(&self) -> ActiveCall<'_> {
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
pub struct ActiveCall<'a> {
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
    use wasmtime::{Config, Instance, Module, Store, UpdateDeadline};

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
