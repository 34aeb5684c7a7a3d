//! A timer, as an envhost plugin: `start`, `stop`, `reset`,
//! with the elapsed time on screen. The declarative style: the host renders
//! each command's help (LONG until used, SHORT after) under the state line.

use std::time::{Duration, Instant};

use envhost_sdk::{Call, Command, Declarative, Result, fail};

#[derive(Default)]
struct Timer {
    /// When the current run started; `None` while stopped.
    running_since: Option<Instant>,
    /// Time accumulated by earlier runs (kept across stop/start).
    banked: Duration,
}

impl Declarative for Timer {
    const SUMMARY: &'static str = "Timer for tracking elapsed time";
    const COMMANDS: &'static [Command<Self>] = &[
        Command::new("start", Self::start)
            .description("Start the timer from zero or resume after stop.")
            .example("start"),
        Command::new("stop", Self::stop)
            .description("Stop the timer and record elapsed time.")
            .example("stop"),
        Command::new("reset", Self::reset)
            .description("Reset timer to zero.")
            .example("reset"),
    ];

    fn state(&self) -> String {
        match self.running_since {
            Some(_) => format!("Timer: Running ({:.2}s)", self.elapsed().as_secs_f64()),
            None => format!("Timer: Stopped ({:.2}s)", self.elapsed().as_secs_f64()),
        }
    }
}

impl Timer {
    fn elapsed(&self) -> Duration {
        self.banked
            + self
                .running_since
                .map_or(Duration::ZERO, |since| since.elapsed())
    }

    fn start(&mut self, _: &Call) -> Result<String> {
        if self.running_since.is_some() {
            fail!(
                "Timer already running ({:.2}s). Use stop first, or reset to start over.",
                self.elapsed().as_secs_f64()
            );
        }
        self.running_since = Some(Instant::now());
        Ok(if self.banked.is_zero() {
            "Timer started".to_owned()
        } else {
            format!("Timer resumed at {:.2}s", self.banked.as_secs_f64())
        })
    }

    fn stop(&mut self, _: &Call) -> Result<String> {
        if self.running_since.is_none() {
            fail!("Timer not running. Use start first.");
        }
        self.banked = self.elapsed();
        self.running_since = None;
        Ok(format!("Elapsed: {:.2}s", self.banked.as_secs_f64()))
    }

    fn reset(&mut self, _: &Call) -> Result<String> {
        self.running_since = None;
        self.banked = Duration::ZERO;
        Ok("Timer reset".to_owned())
    }
}

envhost_sdk::export!(Timer);
