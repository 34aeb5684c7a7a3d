//! A plugin command left running while it waits on a program.
//!
//! A command that may yield, to a plugin that may run programs, runs on the
//! environment's worker thread (started at the first such command and kept,
//! so a command pays two thread hand-offs, not a thread's start; the
//! instance moves there and comes back when the call ends). Once the command has run past its yield time *and* the
//! plugin is blocked waiting on one of its programs, the host answers the
//! agent with what the program printed so far and leaves the command
//! running; later waits take more of that output, input is typed into the
//! program, an interrupt interrupts it. A plugin busy with its own
//! WebAssembly work is never left running: it is waited for, as any call
//! is, within its limit. When the call ends, its answer is the plugin's,
//! less the part of it already shown. This module must not know the
//! agent's protocol nor what the plugin does.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
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

/// What the worker hands back: the instance and the call's result, or
/// the panic that lost the instance.
type Ended = Result<(LiveInstance, Called<CommandResponse>), LostCall>;

/// Why a command on the worker ended without an answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LostCall {
    #[error("panic: {0}")]
    Panicked(String),
    #[error("the call's thread ended without an answer")]
    ThreadEnded,
}

/// Why the worker cannot take a command or the text typed for one.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    #[error("cannot start a thread for the plugin's commands: {0}")]
    ThreadNotStarted(std::io::Error),
    #[error("the thread for the plugin's commands is gone")]
    Gone,
    #[error("the plugin is not waiting on a program right now")]
    NotWaiting,
    #[error("{0}")]
    Typing(envhost_process::SessionError),
}

/// One command for the worker.
struct Job {
    instance: LiveInstance,
    sandbox: Arc<Sandbox>,
    command: String,
    limit: Duration,
    cancel: CancelFlag,
    done: SyncSender<Ended>,
}

/// The thread an environment's commands that may yield run on.
pub(crate) struct Worker {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts the thread.
    pub(crate) fn start() -> Result<Worker, WorkerError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = thread::Builder::new()
            .name("envhost-plugin-call".into())
            .spawn(move || {
                for mut job in queue {
                    let called = catch_unwind(AssertUnwindSafe(|| {
                        job.instance.handle_command(
                            &job.sandbox,
                            &job.command,
                            job.limit,
                            &job.cancel,
                        )
                    }));
                    let ended = match called {
                        Ok(called) => {
                            job.instance.set_live_call(None);
                            Ok((job.instance, called))
                        }
                        // The instance is dropped: a panic left it unknown.
                        Err(panic) => Err(LostCall::Panicked(panic_message(panic.as_ref()))),
                    };
                    let _ = job.done.send(ended);
                }
            })
            .map_err(WorkerError::ThreadNotStarted)?;
        Ok(Worker {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Its queue closes, so it ends after the job it runs (which its
        // `Yielded` interrupted already).
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A command running on the worker.
pub(crate) struct Yielded {
    command: String,
    started: Instant,
    call: Arc<LiveCall>,
    done: Receiver<Ended>,
    /// The call has not ended (its answer is still to come).
    pending: bool,
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
    /// Starts `command` on `instance` on `worker`, within `limit` (its own
    /// WebAssembly work; `limited`: whether waits on programs are bounded
    /// by it too). If the worker is gone the instance is lost with the
    /// job, and the error says so.
    pub(crate) fn start(
        worker: &Worker,
        mut instance: LiveInstance,
        sandbox: Arc<Sandbox>,
        command: &str,
        limit: Duration,
        limited: bool,
    ) -> Result<Yielded, WorkerError> {
        let call = Arc::new(LiveCall::new(limited));
        instance.set_live_call(Some(Arc::clone(&call)));
        let (sender, done) = mpsc::sync_channel(1);
        let job = Job {
            instance,
            sandbox,
            command: command.to_owned(),
            limit,
            cancel: call.cancel_flag().clone(),
            done: sender,
        };
        let sent = match &worker.jobs {
            Some(jobs) => jobs.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(WorkerError::Gone);
        }
        Ok(Yielded {
            command: command.to_owned(),
            started: Instant::now(),
            call,
            done,
            pending: true,
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
                Ok(Ok((instance, called))) => return self.ended(instance, called),
                Ok(Err(why)) => return self.lost(why),
                Err(RecvTimeoutError::Disconnected) => {
                    return self.lost(LostCall::ThreadEnded);
                }
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
    pub(crate) fn type_text(&self, text: &str) -> Result<(), WorkerError> {
        let Some(session) = self.call.waited_on() else {
            return Err(WorkerError::NotWaiting);
        };
        session
            .type_text(text, Instant::now() + Duration::from_secs(1))
            .map_err(WorkerError::Typing)
    }

    /// Interrupts the command (its program with SIGINT, as Ctrl-C would)
    /// and waits for it to end.
    pub(crate) fn interrupt(&mut self, host: &CancelFlag) -> Progress {
        self.call.interrupt();
        self.wait(INTERRUPT_PATIENCE, host)
    }

    fn ended(&mut self, instance: LiveInstance, called: Called<CommandResponse>) -> Progress {
        self.pending = false;
        self.call.finish();
        Progress::Ended(Box::new(EndedCall {
            instance,
            called,
            shown: std::mem::take(&mut self.shown),
        }))
    }

    fn lost(&mut self, why: LostCall) -> Progress {
        self.pending = false;
        self.call.finish();
        Progress::Lost(why.to_string())
    }
}

impl Drop for Yielded {
    /// A command still running when the host stops or the environment
    /// restarts: interrupted, and its end waited for (the instance comes
    /// back with it and is dropped, and its programs with it).
    fn drop(&mut self) {
        if self.pending {
            self.call.interrupt();
            let _ = self.done.recv_timeout(INTERRUPT_PATIENCE);
        }
        self.call.finish();
    }
}

/// The part of `answer` the agent has not seen. `shown` is what its
/// programs printed while it ran; the answer is what the plugin made of
/// it, which usually starts with the end of what was shown (a plugin
/// leaves out a program's banner, for one). So the answer is given from
/// where the longest such overlap ends, the overlap starting at a line of
/// `shown`; with none, whole.
pub(crate) fn unseen(answer: &str, shown: &str) -> String {
    let line_starts = std::iter::once(0).chain(
        shown
            .match_indices('\n')
            .map(|(at, _)| at + 1)
            .filter(|&at| at < shown.len()),
    );
    for start in line_starts {
        if let Some(rest) = answer.strip_prefix(&shown[start..]) {
            return rest.to_owned();
        }
    }
    answer.to_owned()
}

#[cfg(test)]
mod tests {
    use super::unseen;

    #[test]
    fn the_answer_goes_on_where_the_shown_output_stopped() {
        // The answer starts with all that was shown.
        assert_eq!(
            unseen("tick 1\nName? John\nHello\n", "tick 1\nName? "),
            "John\nHello\n"
        );
        // A banner was shown that the plugin left out of its answer.
        assert_eq!(
            unseen("| 1 |\n", "SQLite version 3\nEnter .help\n"),
            "| 1 |\n"
        );
        assert_eq!(unseen("one\ntwo\nthree\n", "banner\none\ntw"), "o\nthree\n");
        // Nothing shown, or nothing in common: the whole answer.
        assert_eq!(unseen("all\n", ""), "all\n");
        assert_eq!(unseen("\nall\n", "x\n"), "\nall\n");
        assert_eq!(unseen("done\n", "done\n"), "");
    }
}
