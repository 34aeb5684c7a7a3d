//! Typed events and the synchronous bus that delivers them to observers.
//!
//! This module owns the [`Event`] vocabulary, the [`EventBus`] and the
//! [`Observer`] trait. The bus guarantees that an observer can never stop
//! the core loop: an observer that returns an error or panics is reported
//! once on stderr and the event goes on to the others. Observers live in
//! submodules; this module must not know what they do with events.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;

use crate::environment::EnvironmentKind;
use crate::request::RequestId;

/// Something that happened in the host, for the record.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The host started.
    HostStarted {
        /// envhost's version.
        version: String,
        /// The project directory.
        project: PathBuf,
        /// `serve` or `repl`.
        mode: String,
    },
    /// The host is stopping.
    HostStopping {
        /// Why.
        reason: String,
    },
    /// An environment was loaded and registered.
    EnvironmentLoaded {
        /// The environment's name.
        name: String,
        /// Built in or a plugin.
        kind: EnvironmentKind,
        #[serde(skip_serializing_if = "Option::is_none")]
        /// How it was loaded, when there is more to say.
        detail: Option<String>,
    },
    /// An environment could not be loaded.
    EnvironmentFailed {
        /// The environment's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// An environment was started afresh; `lost` says what state is gone.
    EnvironmentRestarted {
        /// The environment's name.
        name: String,
        /// Why.
        reason: String,
        /// What state is gone.
        lost: String,
    },
    /// A command arrived.
    CommandReceived {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id`, if the command had one.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
        /// The command's text.
        command: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The time it may take; absent: no limit (it yields, and runs
        /// until it ends or is interrupted).
        timeout_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        /// When it yields, if it may.
        yield_ms: Option<u64>,
    },
    /// An answer reported that a command ended (the answer to the command
    /// itself, or to a later `wait`, `input` or `interrupt`).
    CommandFinished {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id` of the request answered.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
        /// Whether it succeeded.
        success: bool,
        /// How long it ran, from its start.
        duration_ms: f64,
        /// The size of the output in this answer.
        output_bytes: usize,
        /// The output, cut to a readable size for the record.
        output: String,
    },
    /// An answer left a command running (it yielded).
    CommandYielded {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id` of the request answered.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
        /// How long it has run, from its start.
        duration_ms: f64,
        /// The size of the output in this answer.
        output_bytes: usize,
        /// The output, cut to a readable size for the record.
        output: String,
    },
    /// The agent waits for a running command's output.
    WaitRequested {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id`, if the request had one.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
        /// How long it waits at most.
        timeout_ms: u64,
    },
    /// The agent types into a running command.
    InputTyped {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id`, if the request had one.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
        /// How much it types.
        bytes: usize,
        /// What it types, cut to a readable size for the record.
        text: String,
    },
    /// The agent interrupts a running command.
    InterruptRequested {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id`, if the request had one.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
    },
    /// The agent restarts an environment.
    RestartRequested {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id`, if the request had one.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
    },
    /// The agent closes an instance (`bash:server`).
    CloseRequested {
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The agent's `id`, if the request had one.
        id: Option<RequestId>,
        /// The environment.
        environment: String,
    },
    /// An instance was closed: it and everything it ran were ended.
    EnvironmentClosed {
        /// The instance's name (`bash:server`).
        name: String,
        /// What was ended, in the agent's words.
        ended: String,
    },
    /// A command ran past its timeout.
    CommandTimedOut {
        /// The environment.
        environment: String,
        /// The timeout it ran past.
        after_ms: u64,
    },
    /// A command's output went over the cap.
    OutputCapped {
        /// The environment.
        environment: String,
        /// The size of the whole output.
        total_bytes: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        /// The file holding the whole output, if it could be saved.
        saved_to: Option<PathBuf>,
    },
    /// A plugin trapped.
    PluginTrapped {
        /// The environment.
        environment: String,
        /// What happened, in a few words.
        cause: String,
    },
    /// A chunk of a project file was sent (`read_file`).
    FileRead {
        /// The path, as the request gave it.
        path: String,
        /// Where the chunk starts.
        offset: u64,
        /// The chunk's size.
        bytes: u64,
    },
    /// A chunk of a project file was written (`write_file`).
    FileWritten {
        /// The path, as the request gave it.
        path: String,
        /// Bytes written so far.
        bytes: u64,
        /// Whether the file is now in place.
        complete: bool,
    },
    /// A file request was refused.
    FileRefused {
        /// The path, as the request gave it.
        path: String,
        /// The one-word reason.
        reason: String,
        /// The message sent back.
        message: String,
    },
    /// A bad input line, answered with `{"type":"error"}`.
    ProtocolError {
        /// What was wrong.
        message: String,
    },
    /// An internal failure the host survived (a panic in an environment, a
    /// screen that could not be produced).
    Error {
        /// Where it happened.
        context: String,
        /// What was wrong.
        message: String,
    },
}

/// An event with the moment it was emitted.
#[derive(Debug, Clone, Serialize)]
pub struct StampedEvent {
    /// UTC, ISO-8601 / RFC 3339 with milliseconds, e.g.
    /// `2026-11-22T10:31:05.123Z`.
    #[serde(rename = "ts", serialize_with = "serialize_timestamp")]
    pub at: SystemTime,
    #[serde(flatten)]
    /// What happened.
    pub event: Event,
}

fn serialize_timestamp<S: serde::Serializer>(at: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_millis(*at))
}

/// A failure inside an observer.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ObserverError(pub String);

impl From<std::io::Error> for ObserverError {
    fn from(err: std::io::Error) -> Self {
        ObserverError(err.to_string())
    }
}

/// Receives every event the host emits.
pub trait Observer: Send {
    /// A short name for messages about this observer ("transcript").
    fn name(&self) -> &str;

    /// Records one event; an error is reported once and the host goes on.
    fn observe(&mut self, event: &StampedEvent) -> Result<(), ObserverError>;
}

struct Subscription {
    observer: Box<dyn Observer>,
    failure_reported: bool,
}

/// Delivers each event, in order, to every observer on the calling thread.
#[derive(Default)]
pub struct EventBus {
    subscriptions: Vec<Subscription>,
}

impl EventBus {
    /// A bus with no observers.
    pub fn new() -> Self {
        EventBus::default()
    }

    /// Adds an observer; it gets every event from now on.
    pub fn subscribe(&mut self, observer: Box<dyn Observer>) {
        self.subscriptions.push(Subscription {
            observer,
            failure_reported: false,
        });
    }

    /// Delivers `event` to every observer, in order, on this thread.
    pub fn emit(&mut self, event: Event) {
        if self.subscriptions.is_empty() {
            return;
        }
        let stamped = StampedEvent {
            at: SystemTime::now(),
            event,
        };
        for subscription in &mut self.subscriptions {
            let result = catch_unwind(AssertUnwindSafe(|| subscription.observer.observe(&stamped)));
            let failure = match result {
                Ok(Ok(())) => continue,
                Ok(Err(err)) => err.to_string(),
                Err(panic) => format!("panicked: {}", panic_message(panic.as_ref())),
            };
            if !subscription.failure_reported {
                subscription.failure_reported = true;
                eprintln!(
                    "envhost: the {} observer failed ({failure}); the host keeps running and will not report further failures of this observer",
                    subscription.observer.name()
                );
            }
        }
    }
}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    struct Recorder(Arc<Mutex<Vec<String>>>);
    impl Observer for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
        fn observe(&mut self, event: &StampedEvent) -> Result<(), ObserverError> {
            let json = serde_json::to_string(event).map_err(|e| ObserverError(e.to_string()))?;
            self.0.lock().unwrap().push(json);
            Ok(())
        }
    }

    struct Panicker;
    impl Observer for Panicker {
        fn name(&self) -> &str {
            "panicker"
        }
        fn observe(&mut self, _: &StampedEvent) -> Result<(), ObserverError> {
            panic!("observer bug")
        }
    }

    struct Failer;
    impl Observer for Failer {
        fn name(&self) -> &str {
            "failer"
        }
        fn observe(&mut self, _: &StampedEvent) -> Result<(), ObserverError> {
            Err(ObserverError("disk full".into()))
        }
    }

    #[test]
    fn failing_and_panicking_observers_do_not_stop_delivery() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut bus = EventBus::new();
        bus.subscribe(Box::new(Panicker));
        bus.subscribe(Box::new(Failer));
        bus.subscribe(Box::new(Recorder(Arc::clone(&seen))));
        for i in 0..3 {
            bus.emit(Event::HostStopping {
                reason: format!("r{i}"),
            });
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert!(bus.subscriptions[0].failure_reported);
        assert!(bus.subscriptions[1].failure_reported);
        assert!(!bus.subscriptions[2].failure_reported);
    }

    #[test]
    fn stamped_events_serialise_flat_with_utc_timestamp() {
        let stamped = StampedEvent {
            at: SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_500),
            event: Event::CommandTimedOut {
                environment: "bash".into(),
                after_ms: 100,
            },
        };
        let json = serde_json::to_value(&stamped).unwrap();
        assert_eq!(json["ts"], "1970-01-01T00:00:01.500Z");
        assert_eq!(json["event"], "command_timed_out");
        assert_eq!(json["environment"], "bash");
        assert_eq!(json["after_ms"], 100);
    }
}
