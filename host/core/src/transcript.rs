//! The `--transcript FILE` observer: every event as one JSON line with a UTC
//! timestamp (a structured log).
//!
//! Each event is written with a single `write` to a file opened for
//! appending, without user-space buffering, so a host killed at any moment
//! leaves a file whose every line is complete JSON (the kernel has it even if
//! the process dies the next instant). This module only formats and writes;
//! what is recorded is decided by the orchestrator's events.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::events::{Observer, ObserverError, StampedEvent};

/// The `--transcript FILE` observer: every event as one JSON line.
pub struct TranscriptObserver {
    path: PathBuf,
    file: File,
}

impl TranscriptObserver {
    /// Opens (creating if needed) `path` for appending. A transcript shared
    /// by several sessions is one record per line, each session starting
    /// with a `host_started` event.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(TranscriptObserver {
            path: path.to_owned(),
            file,
        })
    }
}

impl Observer for TranscriptObserver {
    fn name(&self) -> &str {
        "transcript"
    }

    fn observe(&mut self, event: &StampedEvent) -> Result<(), ObserverError> {
        let mut line = serde_json::to_vec(event)
            .map_err(|e| ObserverError(format!("cannot serialise event: {e}")))?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|e| ObserverError(format!("cannot write to {}: {e}", self.path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventBus};

    #[test]
    fn writes_one_json_object_per_line_and_appends() {
        let dir = std::env::temp_dir().join(format!("envhost-transcript-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let _ = std::fs::remove_file(&path);
        for round in 0..2 {
            let mut bus = EventBus::new();
            bus.subscribe(Box::new(TranscriptObserver::open(&path).unwrap()));
            bus.emit(Event::HostStopping {
                reason: format!("round {round}"),
            });
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["reason"], "round 1");
        assert!(lines[0]["ts"].as_str().unwrap().ends_with('Z'));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
