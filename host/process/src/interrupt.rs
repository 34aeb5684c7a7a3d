//! Interrupting a running job with escalating signals.
//!
//! An interruption that keeps what it can: a timed-out command first gets SIGINT
//! (what Ctrl-C would send, so shells and interpreters keep their state),
//! then SIGTERM, then SIGKILL, each after a grace period. This module owns
//! that sequence; the caller says how to deliver a signal (to a process
//! group, to one pid) and how to wait for the job to end (read a PTY up to a
//! prompt, wait for a sentinel), so it serves every environment alike.

use std::time::Duration;

use nix::sys::signal::Signal;

/// One rung of the ladder: send `signal`, then wait up to `grace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub signal: Signal,
    pub grace: Duration,
}

/// The default ladder: SIGINT, SIGTERM, SIGKILL with two seconds each
/// ("SIGTERM, then SIGKILL after 2 s", preceded by SIGINT).
pub const DEFAULT_LADDER: [Step; 3] = [
    Step {
        signal: Signal::SIGINT,
        grace: Duration::from_secs(2),
    },
    Step {
        signal: Signal::SIGTERM,
        grace: Duration::from_secs(2),
    },
    Step {
        signal: Signal::SIGKILL,
        grace: Duration::from_secs(2),
    },
];

/// How an escalation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escalation {
    /// The job ended after this signal.
    StoppedBy(Signal),
    /// Nothing was left to signal (the job ended on its own or its group is
    /// gone) before or during the ladder.
    AlreadyGone,
    /// Even SIGKILL did not bring the caller's wait condition about: the
    /// process driving the job (the shell, the interpreter) is wedged.
    Unresponsive,
}

/// Climbs `ladder`: for each step, `send(signal)` then `wait(grace)`. `send`
/// returns `false` when there is nothing left to signal; `wait` returns
/// `true` once the job has ended.
pub fn escalate(
    ladder: &[Step],
    mut send: impl FnMut(Signal) -> bool,
    mut wait: impl FnMut(Duration) -> bool,
) -> Escalation {
    for step in ladder {
        if !send(step.signal) {
            return if wait(step.grace) {
                Escalation::AlreadyGone
            } else {
                Escalation::Unresponsive
            };
        }
        if wait(step.grace) {
            return Escalation::StoppedBy(step.signal);
        }
    }
    Escalation::Unresponsive
}

/// Sends `signal` to every process of group `pgid`. `false` if the group no
/// longer exists.
pub fn signal_group(pgid: i32, signal: Signal) -> bool {
    if pgid <= 1 {
        return false;
    }
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_the_first_signal_that_works() {
        let mut sent = Vec::new();
        let mut waits = 0;
        let result = escalate(
            &DEFAULT_LADDER,
            |s| {
                sent.push(s);
                true
            },
            |_| {
                waits += 1;
                waits == 2
            },
        );
        assert_eq!(result, Escalation::StoppedBy(Signal::SIGTERM));
        assert_eq!(sent, [Signal::SIGINT, Signal::SIGTERM]);
    }

    #[test]
    fn reports_unresponsive_and_gone() {
        assert_eq!(
            escalate(&DEFAULT_LADDER, |_| true, |_| false),
            Escalation::Unresponsive
        );
        assert_eq!(
            escalate(&DEFAULT_LADDER, |_| false, |_| true),
            Escalation::AlreadyGone
        );
    }

    #[test]
    fn signal_group_refuses_init_and_missing_groups() {
        assert!(!signal_group(1, Signal::SIGCONT));
        assert!(!signal_group(0, Signal::SIGCONT));
        assert!(!signal_group(i32::MAX - 1, Signal::SIGCONT));
    }
}
