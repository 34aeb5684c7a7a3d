//! A command that outlived its wait: the thread that keeps waiting for it
//! between the agent's answers, and what it collects.
//!
//! When a command yields, its [`Shell`] moves into a thread that goes on
//! reading the terminal and waiting for the command's end exactly as the
//! host's own thread did ([`Shell::proceed_yielded`]): the command's limit
//! still holds (the ladder runs there if it passes), the host's
//! cancellation still stops it, and an input wait only sets a flag. Every
//! byte goes into a [`CommandOutput`] (capped and saved to a file like any
//! command's output, never dropped like background output between
//! commands), which each answer swaps for a fresh one: an answer carries
//! what came since the previous one, no line lost or repeated (a line cut
//! by an answer continues in the next). When the command ends, the thread
//! gives the shell back.
//!
//! This module decides nothing about what an answer says: it hands the
//! environment the output and, at the end, the shell and the run.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use envhost_core::{CancelFlag, RunningCommand};
use envhost_process::CommandOutput;

use super::setup::TypedMark;
use super::shell::{Controls, Run, Shell, Waiter};

/// What the thread collects, and whether the command has ended.
struct Collected {
    /// Output since the last answer.
    output: CommandOutput,
    /// Bytes in the answers before this one.
    delivered_bytes: u64,
    /// The last line of the answers before this one.
    delivered_last_line: Option<String>,
    ended: bool,
}

struct Collector {
    state: Mutex<Collected>,
    /// Signalled when the command ends.
    ended: Condvar,
}

impl Collector {
    fn lock(&self) -> MutexGuard<'_, Collected> {
        // Single operations keep it consistent: usable after a panic.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How a wait for a yielded command came out.
pub enum Answer {
    /// Still running: its output since the last answer.
    Running(Box<CommandOutput>),
    /// It ended: the shell is back, with what the run left and the last
    /// output.
    Ended(Box<Ended>),
}

/// The end of a yielded command.
pub struct Ended {
    /// `None` if the thread failed (the shell is gone with it).
    pub shell: Option<Shell>,
    /// `None` likewise.
    pub run: Option<Run>,
    /// The output since the last answer.
    pub output: CommandOutput,
}

/// A yielded command and the thread that waits for it.
pub struct Yielded {
    command: String,
    started: Instant,
    collector: Arc<Collector>,
    controls: Arc<Controls>,
    /// The terminal's master side, for typing into the command.
    terminal: File,
    typed: TypedMark,
    thread: Option<JoinHandle<(Shell, Option<Run>)>>,
}

impl Yielded {
    /// Hands `shell`, running the command `waiter` waits for, to a thread
    /// that waits for it until it ends, `cancel` is set, or the agent's
    /// `controls` ask. `so_far` is what the answer that yields carries.
    pub fn start(
        shell: Shell,
        mut waiter: Waiter,
        command: &str,
        so_far: &CommandOutput,
        cancel: CancelFlag,
        controls: Arc<Controls>,
    ) -> io::Result<Yielded> {
        let terminal = shell.terminal_copy()?;
        let typed = shell.typed_mark();
        let collector = Arc::new(Collector {
            state: Mutex::new(Collected {
                output: so_far.empty_like(),
                delivered_bytes: so_far.total_bytes(),
                delivered_last_line: so_far.last_line(),
                ended: false,
            }),
            ended: Condvar::new(),
        });
        let started = waiter.started();
        let thread_collector = Arc::clone(&collector);
        let thread_controls = Arc::clone(&controls);
        let thread = thread::Builder::new()
            .name("envhost-bash-yielded".into())
            .spawn(move || {
                let mut shell = shell;
                let run = shell.proceed_yielded(
                    &mut waiter,
                    None,
                    &cancel,
                    &thread_controls,
                    &mut |bytes| thread_collector.lock().output.feed(bytes),
                );
                thread_collector.lock().ended = true;
                thread_collector.ended.notify_all();
                (shell, run)
            })?;
        Ok(Yielded {
            command: command.to_owned(),
            started,
            collector,
            controls,
            terminal,
            typed,
            thread: Some(thread),
        })
    }

    /// The command as the screen and the busy refusal describe it.
    pub fn running(&self) -> RunningCommand {
        let collected = self.collector.lock();
        RunningCommand {
            command: self.command.clone(),
            started: self.started,
            output_bytes: collected.delivered_bytes + collected.output.total_bytes(),
            last_line: collected
                .output
                .last_line()
                .or_else(|| collected.delivered_last_line.clone()),
            waiting_for_input: !collected.ended
                && self.controls.waiting_for_input.load(Ordering::SeqCst),
        }
    }

    /// Whether the command has ended (its last output not yet answered).
    pub fn ended(&self) -> bool {
        self.collector.lock().ended
    }

    /// Types `text` into the command's terminal, as keys would.
    pub fn type_text(&self, text: &str) -> io::Result<()> {
        self.controls
            .waiting_for_input
            .store(false, Ordering::SeqCst);
        self.typed.set()?;
        (&self.terminal).write_all(text.as_bytes())
    }

    /// Asks the thread to interrupt the command with the ladder.
    pub fn interrupt(&self) {
        self.controls.interrupt.cancel();
    }

    /// Waits until the command ends, `until` passes (`None`: no limit) or
    /// `cancel` is set, and answers with the output since the last answer.
    pub fn wait(
        mut self,
        until: Option<Instant>,
        cancel: &CancelFlag,
    ) -> (Option<Yielded>, Answer) {
        let mut collected = self.collector.lock();
        while !collected.ended && !cancel.is_cancelled() {
            let now = Instant::now();
            let step = std::time::Duration::from_millis(50);
            let limit = match until {
                Some(until) if now >= until => break,
                Some(until) => (until - now).min(step),
                // Cancellation is looked at every step.
                None => step,
            };
            collected = self
                .collector
                .ended
                .wait_timeout(collected, limit)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        let fresh = collected.output.empty_like();
        let output = std::mem::replace(&mut collected.output, fresh);
        collected.delivered_bytes += output.total_bytes();
        if let Some(line) = output.last_line() {
            collected.delivered_last_line = Some(line);
        }
        let ended = collected.ended;
        drop(collected);
        if !ended {
            return (Some(self), Answer::Running(Box::new(output)));
        }
        let (shell, run) = match self.thread.take().map(JoinHandle::join) {
            Some(Ok((shell, run))) => (Some(shell), run),
            _ => (None, None),
        };
        (None, Answer::Ended(Box::new(Ended { shell, run, output })))
    }

    /// Stops waiting at once (the shell is about to be ended) and gives the
    /// shell back, with the output not yet answered.
    pub fn abandon(mut self) -> (Option<Shell>, CommandOutput) {
        self.controls.abandon.cancel();
        let shell = self
            .thread
            .take()
            .and_then(|thread| thread.join().ok())
            .map(|(shell, _)| shell);
        let mut collected = self.collector.lock();
        let fresh = collected.output.empty_like();
        let output = std::mem::replace(&mut collected.output, fresh);
        drop(collected);
        (shell, output)
    }
}

impl Drop for Yielded {
    fn drop(&mut self) {
        // The shell ends with the thread's copy of it.
        self.controls.abandon.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
