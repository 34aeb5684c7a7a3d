//! The host side of `envhost:environment/logging`: a plugin's log lines go
//! to its output, tagged with their level.

use crate::guest_io::LogLevel;
use crate::state::HostState;
use crate::wit::latest::logging::{Host, Level};

impl Host for HostState {
    fn log(&mut self, level: Level, message: String) {
        let level = match level {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        self.output().log(level, &message);
    }
}

/// 0.1.0's `logging` is the same interface: its calls go to the latest's.
impl crate::wit::since_v0_1_0::logging::Host for HostState {
    fn log(&mut self, level: crate::wit::since_v0_1_0::logging::Level, message: String) {
        Host::log(self, level.into(), message);
    }
}
