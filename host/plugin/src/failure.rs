//! Why a call into a plugin failed, in words an agent can act on.
//!
//! A failed call is a wasmtime error: a trap (out-of-bounds access, stack
//! exhausted, `unreachable` after a Rust panic), the sandbox's own stop
//! (time limit, host shutdown, memory limit), or a host-side failure. This
//! module turns one into a [`CallFailure`]: a cause with a sentence, and
//! wasmtime's text kept for the record. It reads the call's stderr to name a
//! panic (a Rust plugin prints `panicked at FILE:LINE:COL:` and its message
//! there just before it aborts) or an exception a Python or JavaScript
//! plugin did not catch (their runtimes print the traceback, then abort).
//! It must not restart anything.

use std::fmt;
use std::time::Duration;

use wasmtime::{Trap, WasmBacktrace};

use crate::limits::{self, Interrupted, MemoryLimitExceeded, TableLimitExceeded};
use envhost_core::text;

/// What went wrong in a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureCause {
    /// The call ran past its time limit (an endless loop, or slow work).
    TimedOut { limit: Duration },
    /// The host was interrupted while the call ran (SIGTERM, or Ctrl-C in
    /// the REPL).
    Cancelled,
    /// The plugin tried to use more memory than allowed.
    OutOfMemory { desired: usize, limit: usize },
    /// A Rust-style panic, with its message and location when printed.
    Panicked { message: String },
    /// An exception a Python or JavaScript plugin did not catch: its last
    /// line (`ValueError: boom`) and the traceback its runtime printed.
    Uncaught { message: String, traceback: String },
    /// The WebAssembly call stack ran out (deep or endless recursion).
    StackOverflow,
    /// Any other trap, with wasmtime's description.
    Trap { trap: String },
    /// It creates more instances, memories or tables than a plugin may.
    TooMany { what: &'static str, limit: usize },
    /// Not a trap: the call could not be made or completed.
    Other { message: String },
}

/// A failed call: the cause, wasmtime's own text, and what the plugin wrote
/// to stderr during the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    pub cause: FailureCause,
    pub detail: String,
    pub stderr: String,
}

impl FailureCause {
    /// Whether the failure is the host's doing rather than the plugin's.
    pub fn is_timeout(&self) -> bool {
        matches!(self, FailureCause::TimedOut { .. })
    }

    /// A short name for events: `timed out`, `panic`, ...
    pub fn short(&self) -> String {
        match self {
            FailureCause::TimedOut { limit } => {
                format!("timed out after {}", text::duration(*limit))
            }
            FailureCause::Cancelled => text::INTERRUPTED.to_owned(),
            FailureCause::OutOfMemory { .. } => "out of memory".to_owned(),
            FailureCause::Panicked { message } => format!("panic: {message}"),
            FailureCause::Uncaught { message, .. } => format!("uncaught exception: {message}"),
            FailureCause::StackOverflow => "stack overflow".to_owned(),
            FailureCause::Trap { trap } => format!("trap: {trap}"),
            FailureCause::TooMany { what, .. } => format!("too many {what}"),
            FailureCause::Other { message } => message.clone(),
        }
    }
}

impl fmt::Display for FailureCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureCause::TimedOut { limit } => write!(
                f,
                "it ran past its time limit of {} and was stopped (an endless loop, or work too slow for one command; a longer `timeout_ms` allows more)",
                text::duration(*limit)
            ),
            FailureCause::Cancelled => write!(f, "it was {}", text::INTERRUPTED),
            FailureCause::OutOfMemory { desired, limit } => write!(
                f,
                "it ran out of memory: it tried to grow its memory to {}, over its limit of {}",
                text::bytes(*desired as u64),
                text::bytes(*limit as u64)
            ),
            FailureCause::Panicked { message } => write!(f, "it panicked: {message}"),
            FailureCause::Uncaught { message, .. } => {
                write!(f, "it raised an exception it did not catch: {message}")
            }
            FailureCause::StackOverflow => write!(
                f,
                "it overflowed its call stack (endless or too deep recursion)"
            ),
            FailureCause::Trap { trap } => write!(f, "it trapped: {trap}"),
            FailureCause::TooMany { what, limit } => {
                write!(f, "it creates more {what} than a plugin may have ({limit})")
            }
            FailureCause::Other { message } => write!(f, "the call failed: {message}"),
        }
    }
}

/// Classifies a call's error, given what the plugin wrote to stderr.
pub fn classify(error: &wasmtime::Error, stderr: &str) -> CallFailure {
    let detail = error_chain(error);
    let cause = if let Some(interrupted) = error.downcast_ref::<Interrupted>() {
        match interrupted {
            Interrupted::TimedOut { limit } => FailureCause::TimedOut { limit: *limit },
            Interrupted::Cancelled => FailureCause::Cancelled,
        }
    } else if let Some(memory) = error.downcast_ref::<MemoryLimitExceeded>() {
        FailureCause::OutOfMemory {
            desired: memory.desired,
            limit: memory.limit,
        }
    } else if let Some(table) = error.downcast_ref::<TableLimitExceeded>() {
        FailureCause::Trap {
            trap: table.to_string(),
        }
    } else if let Some((what, limit)) = count_limit(error) {
        FailureCause::TooMany { what, limit }
    } else if let Some(trap) = error.downcast_ref::<Trap>() {
        if *trap == Trap::MemoryOutOfBounds && is_deep_recursion(error) {
            FailureCause::StackOverflow
        } else {
            classify_trap(*trap, stderr)
        }
    } else {
        FailureCause::Other {
            message: detail.clone(),
        }
    };
    CallFailure {
        cause,
        detail,
        stderr: stderr.to_owned(),
    }
}

/// wasmtime's refusal to create one more instance, memory or table than
/// the store's limiter allows (`resource limit exceeded: memory count too
/// high at 33`).
fn count_limit(error: &wasmtime::Error) -> Option<(&'static str, usize)> {
    error.chain().find_map(|cause| {
        let text = cause.to_string();
        let what = text
            .strip_prefix("resource limit exceeded: ")?
            .split(" count too high")
            .next()?
            .to_owned();
        match what.as_str() {
            "instance" => Some(("core instances", limits::MAX_INSTANCES)),
            "memory" => Some(("linear memories", limits::MAX_MEMORIES)),
            "table" => Some(("tables", limits::MAX_TABLES)),
            _ => None,
        }
    })
}

fn classify_trap(trap: Trap, stderr: &str) -> FailureCause {
    // Before panics: componentize-py reports an uncaught exception with a
    // Rust panic of its own, which says nothing about the exception.
    if let Some(uncaught) = uncaught_exception(stderr) {
        return uncaught;
    }
    if let Some(message) = panic_message(stderr) {
        return FailureCause::Panicked { message };
    }
    match trap {
        Trap::StackOverflow => FailureCause::StackOverflow,
        Trap::UnreachableCodeReached => FailureCause::Trap {
            trap: "it reached an `unreachable` instruction (it aborted; a Rust plugin does this after a panic or a failed allocation)".to_owned(),
        },
        Trap::MemoryOutOfBounds => FailureCause::Trap {
            trap: "an out-of-bounds memory access (a bug in the plugin; in Rust often a stack overflow)".to_owned(),
        },
        other => FailureCause::Trap {
            trap: other
                .to_string()
                .trim_start_matches("wasm trap: ")
                .to_owned(),
        },
    }
}

/// Whether the trap's wasm backtrace is one or two functions calling
/// themselves over and over. Rust keeps large stack frames in linear memory
/// (a "shadow stack" below the data); overflowing it is an out-of-bounds
/// access, not wasmtime's stack-exhausted trap, and the backtrace is what
/// tells the two bugs apart.
fn is_deep_recursion(error: &wasmtime::Error) -> bool {
    let Some(backtrace) = error.downcast_ref::<WasmBacktrace>() else {
        return false;
    };
    let frames = backtrace.frames();
    if frames.len() < 16 {
        return false;
    }
    let mut functions: Vec<u32> = frames.iter().map(|f| f.func_index()).collect();
    functions.sort_unstable();
    functions.dedup();
    functions.len() <= 2
}

/// The message and location of a Rust panic printed on stderr:
/// `panicked at src/lib.rs:12:9:\nboom` gives `boom (at src/lib.rs:12:9)`.
/// Allocation failures (`memory allocation of N bytes failed`) count too.
pub fn panic_message(stderr: &str) -> Option<String> {
    if let Some(at) = stderr.find("panicked at ") {
        let rest = &stderr[at + "panicked at ".len()..];
        let (location, message) = match rest.find(":\n") {
            Some(end) => (&rest[..end], rest[end + 2..].lines().next().unwrap_or("")),
            // Older format: panicked at 'message', file:line:col
            None => ("", rest.lines().next().unwrap_or("")),
        };
        let message = message.trim();
        return Some(if location.is_empty() {
            message.to_owned()
        } else if message.is_empty() {
            format!("(at {location})")
        } else {
            format!("{message} (at {location})")
        });
    }
    stderr
        .lines()
        .find(|line| line.starts_with("memory allocation of ") && line.ends_with(" failed"))
        .map(|line| line.trim().to_owned())
}

/// componentize-py's runtime prints this after the traceback of an
/// exception that escaped a call, then panics.
const PYTHON_UNCAUGHT: &str = "Python function threw an unexpected exception";
/// componentize-js's runtime (StarlingMonkey) prints the exception and
/// `Stack:` with its frames, then this, and aborts.
const JAVASCRIPT_ABORT: &str = "Redirecting call to abort() to mozalloc_abort";

/// The exception a Python or JavaScript plugin did not catch, from what its
/// runtime printed on stderr before it aborted.
pub fn uncaught_exception(stderr: &str) -> Option<FailureCause> {
    let lines: Vec<&str> = stderr.lines().collect();
    if stderr.contains(PYTHON_UNCAUGHT) {
        // From the first traceback (chained exceptions print several) to
        // the runtime's panic.
        let start = lines
            .iter()
            .position(|line| line.starts_with("Traceback (most recent call last):"))?;
        let end = lines[start..]
            .iter()
            .position(|line| line.starts_with("thread '") || line.contains(PYTHON_UNCAUGHT))
            .map_or(lines.len(), |offset| start + offset);
        let traceback = &lines[start..end];
        // The exception's line is the last one not indented (frames and
        // source lines are).
        let message = traceback
            .iter()
            .rev()
            .find(|line| !line.trim().is_empty() && !line.starts_with(' '))?;
        return Some(FailureCause::Uncaught {
            message: message.trim().to_owned(),
            traceback: join_trimmed(traceback),
        });
    }
    let abort = lines
        .iter()
        .rposition(|line| line.trim() == JAVASCRIPT_ABORT)?;
    let before = &lines[..abort];
    // The message is what comes before `Stack:` (an Error) or before the
    // abort (a thrown string or number); its last line names it.
    let message_end = before
        .iter()
        .rposition(|line| line.trim() == "Stack:")
        .unwrap_or(before.len());
    let message = before[..message_end]
        .iter()
        .rev()
        .find(|line| !line.trim().is_empty())?;
    Some(FailureCause::Uncaught {
        message: message.trim().to_owned(),
        traceback: join_trimmed(before),
    })
}

fn join_trimmed(lines: &[&str]) -> String {
    lines.join("\n").trim_matches('\n').trim_end().to_owned()
}

/// wasmtime's error as one text: each cause on its own line, without the
/// wasm backtrace (addresses mean nothing to an agent).
pub fn error_chain(error: &wasmtime::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        let first = text
            .split("\nwasm backtrace:")
            .next()
            .unwrap_or(&text)
            .trim();
        if first.starts_with("error while executing at wasm backtrace") || first.is_empty() {
            continue;
        }
        if parts.last().map(String::as_str) != Some(first) {
            parts.push(first.to_owned());
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_rust_panics_from_stderr() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:12:9:\nboom: it broke\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom: it broke (at src/lib.rs:12:9)")
        );
        assert_eq!(
            panic_message("memory allocation of 4294967296 bytes failed\n").as_deref(),
            Some("memory allocation of 4294967296 bytes failed")
        );
        assert_eq!(panic_message("just chatter\n"), None);
    }

    #[test]
    fn names_uncaught_python_exceptions_from_stderr() {
        // What componentize-py 0.25.1 prints for `raise ValueError(...)`.
        let stderr = "Traceback (most recent call last):\n  File \"/0/app.py\", line 186, in handle_command\n  File \"/1/tasks_crash.py\", line 10, in crash\nValueError: the parser blew up\n\nthread '<unnamed>' (1) panicked at runtime/src/lib.rs:1280:25:\nPython function threw an unexpected exception\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        let cause = classify_trap(Trap::UnreachableCodeReached, stderr);
        assert_eq!(
            cause,
            FailureCause::Uncaught {
                message: "ValueError: the parser blew up".into(),
                traceback: "Traceback (most recent call last):\n  File \"/0/app.py\", line 186, in handle_command\n  File \"/1/tasks_crash.py\", line 10, in crash\nValueError: the parser blew up".into(),
            }
        );
        assert_eq!(
            cause.to_string(),
            "it raised an exception it did not catch: ValueError: the parser blew up"
        );
        assert_eq!(
            cause.short(),
            "uncaught exception: ValueError: the parser blew up"
        );
    }

    #[test]
    fn names_uncaught_javascript_exceptions_from_stderr() {
        // What componentize-js 0.23.0 prints for `throw new TypeError(...)`,
        // after a line the plugin printed itself.
        let stderr = "some chatter\nthe workbench blew up\nStack:\n  run@plugin.js:12:11\n  handleCommand@plugin.js:140:32\n\nRedirecting call to abort() to mozalloc_abort\n";
        assert_eq!(
            classify_trap(Trap::UnreachableCodeReached, stderr),
            FailureCause::Uncaught {
                message: "the workbench blew up".into(),
                traceback: "some chatter\nthe workbench blew up\nStack:\n  run@plugin.js:12:11\n  handleCommand@plugin.js:140:32".into(),
            }
        );
        // `throw 'text'`: no stack.
        let thrown = "\"a plain string\"\nRedirecting call to abort() to mozalloc_abort\n";
        assert!(matches!(
            classify_trap(Trap::UnreachableCodeReached, thrown),
            FailureCause::Uncaught { message, .. } if message == "\"a plain string\""
        ));
        assert_eq!(uncaught_exception("just chatter\n"), None);
    }

    #[test]
    fn traps_get_sentences_and_panics_win_over_unreachable() {
        let plain = classify_trap(Trap::UnreachableCodeReached, "");
        assert!(matches!(plain, FailureCause::Trap { .. }));
        let panic = classify_trap(
            Trap::UnreachableCodeReached,
            "panicked at a.rs:1:1:\nkaboom\n",
        );
        assert_eq!(
            panic,
            FailureCause::Panicked {
                message: "kaboom (at a.rs:1:1)".into()
            }
        );
        assert_eq!(
            classify_trap(Trap::StackOverflow, ""),
            FailureCause::StackOverflow
        );
        assert_eq!(
            classify_trap(Trap::IntegerDivisionByZero, ""),
            FailureCause::Trap {
                trap: "integer divide by zero".into()
            }
        );
    }

    #[test]
    fn sandbox_stops_are_recognised_through_wasmtime_errors() {
        let error = wasmtime::Error::new(Interrupted::TimedOut {
            limit: Duration::from_millis(300),
        })
        .context("error while executing at wasm backtrace:\n    0: 0x1 - <unknown>");
        let failure = classify(&error, "");
        assert_eq!(
            failure.cause,
            FailureCause::TimedOut {
                limit: Duration::from_millis(300)
            }
        );
        assert!(failure.cause.to_string().contains("300 ms"));
        assert_eq!(failure.detail, "the call ran past its time limit of 300 ms");
        let memory = wasmtime::Error::new(MemoryLimitExceeded {
            desired: 4 << 30,
            limit: 256 << 20,
        });
        assert_eq!(
            classify(&memory, "").cause.to_string(),
            "it ran out of memory: it tried to grow its memory to 4.0 GiB, over its limit of 256 MiB"
        );
    }
}
