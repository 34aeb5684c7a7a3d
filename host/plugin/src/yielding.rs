//! A plugin command left running while it waits on a program.
//!
//! A command that may yield, to a plugin that may run programs, runs on a
//! worker thread of its own (the instance moves there and comes back when
//! the call ends). Once the command has run past its yield time *and* the
//! plugin is blocked waiting on one of its programs, the host answers the
//! agent with what the program printed so far and leaves the command
//! running; later waits take more of that output, input is typed into the
//! program, an interrupt interrupts it. A plugin busy with its own
//! WebAssembly work is never left running: it is waited for, as any call
//! is, within its limit. When the call ends, its answer is the plugin's,
//! less the part of it already shown. This module must not know the
//! agent's protocol nor what the plugin does.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use envhost_core::{CancelFlag, RunningCommand, panic_message};

use crate::instance::{Called, LiveInstance};
use crate::live_call::LiveCall;
use crate::sandbox::Sandbox;
use crate::wit::latest::CommandResponse;

/// How often a wait looks at the call, the clock and the host's
/// cancellation.
const TICK: Duration = Duration::from_millis(20);

/// How long an interrupted call gets to end before the host stops waiting
/// for it (its programs are interrupted at once; its own work is stopped
/// at its next clock tick).
const INTERRUPT_PATIENCE: Duration = Duration::from_secs(10);

/// What a worker hands back: the instance, and the call's result.
type Ended = (LiveInstance, Called<CommandResponse>);

/// A command running on a worker thread.
pub(crate) struct Yielded {
    command: String,
    started: Instant,
    call: Arc<LiveCall>,
    done: Receiver<Ended>,
    worker: Option<JoinHandle<()>>,
    /// Every piece of output given to the agent so far, in order.
    shown: String,
}

/// A call that ended: the instance back, its result, and the output the
/// agent already has.
pub(crate) struct EndedCall {
    pub(crate) instance: LiveInstance,
    pub(crate) called: Called<CommandResponse>,
    pub(crate) shown: String,
}

/// Where a command stands after a wait.
pub(crate) enum Progress {
    /// Still running, blocked on a program: the output since the last
    /// answer.
    Running(String),
    /// The call ended.
    Ended(Box<EndedCall>),
    /// The worker failed in the host itself (a panic); the instance is
    /// lost.
    Lost(String),
}

impl Yielded {
    /// Starts `command` on `instance` on a worker thread, within `limit`
    /// (its own WebAssembly work; `limited`: whether waits on programs are
    /// bounded by it too). If no thread can be started the instance is
    /// lost with it, and the error says why.
    pub(crate) fn start(
        mut instance: LiveInstance,
        sandbox: Arc<Sandbox>,
        command: &str,
        limit: Duration,
        limited: bool,
    ) -> Result<Yielded, String> {
        let call = Arc::new(LiveCall::new(limited));
        instance.set_live_call(Some(Arc::clone(&call)));
        let (sender, done) = mpsc::sync_channel(1);
        let text = command.to_owned();
        let cancel = call.cancel_flag().clone();
        let worker = thread::Builder::new()
            .name("envhost-plugin-call".into())
            .spawn(move || {
                let called = instance.handle_command(&sandbox, &text, limit, &cancel);
                instance.set_live_call(None);
                let _ = sender.send((instance, called));
            })
            .map_err(|err| format!("cannot start a thread for the command: {err}"))?;
        Ok(Yielded {
            command: command.to_owned(),
            started: Instant::now(),
            call,
            done,
            worker: Some(worker),
            shown: String::new(),
        })
    }

    /// The command as the screen and the busy refusal describe it.
    pub(crate) fn running(&self) -> RunningCommand {
        let waiting_for_input = self
            .call
            .waited_on()
            .is_some_and(|session| session.reading_terminal());
        RunningCommand {
            command: self.command.clone(),
            started: self.started,
            output_bytes: self.call.output_bytes(),
            last_line: self.call.last_line(),
            waiting_for_input,
        }
    }

    /// Waits up to `wait` for the call to end; past it, answers as soon as
    /// the plugin is blocked on a program. The host's cancellation
    /// interrupts the call (and the wait goes on until it ends).
    pub(crate) fn wait(&mut self, wait: Duration, host: &CancelFlag) -> Progress {
        let until = Instant::now() + wait;
        loop {
            let now = Instant::now();
            let tick = until
                .saturating_duration_since(now)
                .clamp(Duration::from_millis(1), TICK);
            match self.done.recv_timeout(tick) {
                Ok((instance, called)) => return self.ended(instance, called),
                Err(RecvTimeoutError::Disconnected) => return self.lost(),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if host.is_cancelled() {
                self.call.cancel_flag().cancel();
            }
            if Instant::now() >= until
                && !self.call.cancel_flag().is_cancelled()
                && self.call.waited_on().is_some()
            {
                let output = self.call.take_output();
                self.shown.push_str(&output);
                return Progress::Running(output);
            }
        }
    }

    /// Types `text` into the program the plugin waits on.
    pub(crate) fn type_text(&self, text: &str) -> Result<(), String> {
        let Some(session) = self.call.waited_on() else {
            return Err("the plugin is not waiting on a program right now".to_owned());
        };
        session
            .type_text(text, Instant::now() + Duration::from_secs(1))
            .map_err(|err| err.to_string())
    }

    /// Interrupts the command (its program with SIGINT, as Ctrl-C would)
    /// and waits for it to end.
    pub(crate) fn interrupt(&mut self, host: &CancelFlag) -> Progress {
        self.call.interrupt();
        self.wait(INTERRUPT_PATIENCE, host)
    }

    fn ended(&mut self, instance: LiveInstance, called: Called<CommandResponse>) -> Progress {
        self.call.finish();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        Progress::Ended(Box::new(EndedCall {
            instance,
            called,
            shown: std::mem::take(&mut self.shown),
        }))
    }

    fn lost(&mut self) -> Progress {
        self.call.finish();
        let why = match self.worker.take().map(JoinHandle::join) {
            Some(Err(panic)) => format!("panic: {}", panic_message(panic.as_ref())),
            _ => "the call's thread ended without an answer".to_owned(),
        };
        Progress::Lost(why)
    }
}

impl Drop for Yielded {
    /// A command still running when the host stops or the environment
    /// restarts: interrupted, and its thread waited for (the instance it
    /// holds, with its programs, is dropped there).
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            self.call.interrupt();
            let deadline = Instant::now() + INTERRUPT_PATIENCE;
            while !worker.is_finished() && Instant::now() < deadline {
                thread::sleep(TICK);
            }
            if worker.is_finished() {
                let _ = worker.join();
            }
            self.call.finish();
        }
    }
}

/// The part of `answer` the agent has not seen: `answer` less `shown` when
/// it starts with it; otherwise the whole answer, saying it repeats.
pub(crate) fn unseen(answer: &str, shown: &str) -> String {
    if shown.is_empty() {
        return answer.to_owned();
    }
    match answer.strip_prefix(shown) {
        Some(rest) => rest.to_owned(),
        None => format!(
            "[envhost] The command ended; the plugin's whole answer follows (it repeats output shown while it ran):\n{answer}"
        ),
    }
}
