//! A plugin's state as the host keeps it: the last snapshot its `state`
//! export gave (at most [`MAX_SNAPSHOT_BYTES`]), put back into a fresh
//! instance after a trap and into the first instance of a resumed session,
//! and what to tell the agent about it.
//!
//! The bytes are the plugin's own format: the host never reads them. A
//! plugin without a `state` export is never asked (no call, no cost). An
//! empty snapshot is no state: nothing is restored from it. This module
//! takes and puts back snapshots; when to do it (after which call, on which
//! instance) and how to word the whole response is the environment's.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::failure::CallFailure;
use crate::guest_io::CallOutput;
use crate::instance::LiveInstance;
use crate::limits::MAX_SNAPSHOT_BYTES;
use crate::plugin_text;
use crate::sandbox::Sandbox;
use envhost_core::CancelFlag;
use envhost_core::text;

/// The last snapshot, and what the session file and the screen have not
/// been told yet.
#[derive(Default)]
pub struct KeptState {
    last: Vec<u8>,
    /// Changed since the session recorder last asked.
    unsaved: bool,
    /// A snapshot was dropped for its size: the screen says so once.
    dropped: Option<usize>,
}

/// What putting back the last snapshot into a fresh instance gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// Nothing was kept (no `state` export, or no snapshot yet).
    Nothing,
    /// The plugin took back this many bytes.
    CameBack(usize),
    /// The plugin refused them with this sentence; it has empty state.
    Refused(String),
    /// `restore` failed (trapped, ran out of time); a fresh instance with
    /// empty state replaced it.
    Failed(String),
}

impl Restored {
    /// Whether the plugin's state came back.
    pub fn came_back(&self) -> bool {
        matches!(self, Restored::CameBack(_))
    }

    /// The outcome as a clause ("its state was restored from …").
    pub fn clause(&self) -> String {
        match self {
            Restored::Nothing => "its state was lost".to_owned(),
            Restored::CameBack(bytes) => format!(
                "its state was restored from the snapshot it gave after its last command ({})",
                text::bytes(*bytes as u64)
            ),
            Restored::Refused(why) => format!(
                "restoring its last snapshot failed (the plugin said: {why}), so it starts with empty state"
            ),
            Restored::Failed(why) => format!(
                "restoring its last snapshot failed ({why}), so it starts afresh with empty state"
            ),
        }
    }
}

impl KeptState {
    /// Whether a snapshot is kept.
    pub fn has_snapshot(&self) -> bool {
        !self.last.is_empty()
    }

    /// Forgets the snapshot (the agent asked for a fresh start, or it was
    /// refused).
    pub fn clear(&mut self) {
        if self.has_snapshot() {
            self.unsaved = true;
        }
        self.last = Vec::new();
    }

    /// Asks `instance` for its snapshot (if it exports `state`) and keeps
    /// it if it is small enough. `Err` when the call failed: the instance
    /// is then unusable.
    pub fn take(
        &mut self,
        instance: &mut LiveInstance,
        sandbox: &Sandbox,
        cancel: &CancelFlag,
    ) -> (Result<(), CallFailure>, CallOutput) {
        let Some(called) = instance.snapshot(sandbox, cancel) else {
            return (Ok(()), CallOutput::default());
        };
        let result = called.result.map(|snapshot| {
            if snapshot.len() > MAX_SNAPSHOT_BYTES {
                // An older snapshot would bring back an older state without
                // a word: none is kept.
                self.clear();
                self.dropped = Some(snapshot.len());
            } else if snapshot != self.last {
                self.last = snapshot;
                self.unsaved = true;
                self.dropped = None;
            } else {
                self.dropped = None;
            }
        });
        (result, called.output)
    }

    /// Puts the kept snapshot back into `instance`, fresh and described.
    /// On `Restored::Failed` the instance is unusable: the caller replaces
    /// it. A snapshot that did not go back is forgotten.
    pub fn restore_into(
        &mut self,
        instance: &mut LiveInstance,
        sandbox: &Sandbox,
    ) -> (Restored, CallOutput) {
        if !self.has_snapshot() {
            return (Restored::Nothing, CallOutput::default());
        }
        let Some(called) = instance.restore(sandbox, &self.last) else {
            return (Restored::Nothing, CallOutput::default());
        };
        let restored = match called.result {
            Ok(Ok(())) => Restored::CameBack(self.last.len()),
            Ok(Err(why)) => Restored::Refused(plugin_text::line(&why)),
            Err(failure) => Restored::Failed(failure.cause.to_string()),
        };
        if !restored.came_back() {
            self.clear();
        }
        (restored, called.output)
    }

    /// Whether [`screen_note`](Self::screen_note) has a line to show.
    pub fn has_screen_note(&self) -> bool {
        self.dropped.is_some()
    }

    /// The line the screen shows once after a snapshot was dropped.
    pub fn screen_note(&mut self) -> Option<String> {
        let size = self.dropped.take()?;
        Some(format!(
            "[envhost] The plugin's last snapshot was {}, over the {} the host keeps: it was dropped, so a trap or a restart loses its state until it gives a smaller one.",
            text::bytes(size as u64),
            text::bytes(MAX_SNAPSHOT_BYTES as u64)
        ))
    }

    /// The snapshot for the session file, when it changed since the last
    /// call (base64; empty for none).
    pub fn saved_if_changed(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.unsaved) {
            return None;
        }
        Some(BASE64.encode(&self.last))
    }

    /// Takes a snapshot saved by [`saved_if_changed`](Self::saved_if_changed)
    /// in an earlier host.
    pub fn load_saved(&mut self, saved: &str) -> Result<(), UnusableSnapshot> {
        let bytes = BASE64
            .decode(saved.trim())
            .map_err(UnusableSnapshot::NotBase64)?;
        if bytes.len() > MAX_SNAPSHOT_BYTES {
            return Err(UnusableSnapshot::TooLarge(bytes.len()));
        }
        self.last = bytes;
        self.unsaved = false;
        Ok(())
    }
}

/// Why a snapshot saved by an earlier host cannot be taken back.
#[derive(Debug, thiserror::Error)]
pub enum UnusableSnapshot {
    /// Not base64.
    #[error("its saved snapshot is not valid base64 ({0})")]
    NotBase64(base64::DecodeError),
    /// Larger than the host keeps (its size in bytes).
    #[error(
        "its saved snapshot is {}, over the {} the host keeps",
        text::bytes(*.0 as u64),
        text::bytes(MAX_SNAPSHOT_BYTES as u64)
    )]
    TooLarge(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_snapshot_round_trips_and_is_only_saved_when_changed() {
        let mut kept = KeptState::default();
        assert_eq!(kept.saved_if_changed(), None);
        kept.last = vec![0, 1, 2, 255];
        kept.unsaved = true;
        let saved = kept.saved_if_changed().unwrap();
        assert_eq!(kept.saved_if_changed(), None);
        let mut again = KeptState::default();
        again.load_saved(&saved).unwrap();
        assert_eq!(again.last, [0, 1, 2, 255]);
        assert!(again.load_saved("not base64!").is_err());
        again.clear();
        assert_eq!(again.saved_if_changed().as_deref(), Some(""));
    }

    #[test]
    fn the_outcome_reads_as_a_clause() {
        assert_eq!(Restored::Nothing.clause(), "its state was lost");
        assert!(Restored::CameBack(12).clause().contains("(12 B)"));
        assert!(
            Restored::Refused("bad".into())
                .clause()
                .contains("the plugin said: bad")
        );
    }
}
