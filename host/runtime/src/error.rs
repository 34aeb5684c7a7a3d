//! Why a host could not start: each error says what to do next.

use std::path::PathBuf;

/// Why [`Host::start`](crate::Host::start) (or the containment it sets up
/// first) failed; nothing was started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The project directory does not exist or cannot be read.
    #[error("the project directory {} cannot be used ({reason}); pass --project DIR", path.display())]
    Project {
        /// The path as given.
        path: PathBuf,
        /// Why it cannot be used (in the message, not a source: a chain
        /// printed whole would say it twice).
        reason: std::io::Error,
    },
    /// The project path names something other than a directory.
    #[error("the project path {} is not a directory; pass --project DIR", .0.display())]
    NotADirectory(PathBuf),
    /// The isolation asked for is not available here.
    #[error("{0}")]
    Isolation(String),
    /// The transcript file cannot be opened for appending.
    #[error("cannot open the transcript file {} ({reason})", path.display())]
    Transcript {
        /// The transcript file.
        path: PathBuf,
        /// Why it cannot be opened (in the message, as above).
        reason: std::io::Error,
    },
}
