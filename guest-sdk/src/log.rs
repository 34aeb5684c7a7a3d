//! Log lines for the plugin's author and the host's operator: they go to
//! the host's log (its stderr, prefixed with the plugin's name), never to
//! the agent. `println!`/`eprintln!` end up there too.

use crate::bindings::envhost::environment::logging::{self as wit, Level};

pub fn debug(message: &str) {
    wit::log(Level::Debug, message);
}

pub fn info(message: &str) {
    wit::log(Level::Info, message);
}

pub fn warn(message: &str) {
    wit::log(Level::Warn, message);
}

pub fn error(message: &str) {
    wit::log(Level::Error, message);
}
