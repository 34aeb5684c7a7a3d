//! Reading a file the editor may show or edit: the path resolved inside the
//! project, the whole content, and the refusals (missing, a folder, binary,
//! too large), each phrased so the agent knows what to do instead.
//!
//! This module owns those checks so views, edits and the screen refuse the
//! same things in the same words. It must not interpret the content.

use std::fmt;
use std::fs::File;
use std::io::{ErrorKind, Read};

use envhost_core::text;

use super::lines::is_binary;
use envhost_files::{ProjectRoot, ResolvedPath};

/// Views re-read their file on every screen, so a view's file is kept
/// below a size that re-reading cannot make slow.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Why a file cannot be shown or edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    /// The path was refused (outside the project, unresolvable).
    Refused(String),
    NotFound,
    Directory,
    Binary,
    TooLarge {
        bytes: u64,
    },
    Unreadable(String),
}

impl FileProblem {
    /// The marker a view shows once before it is removed
    /// (`[ERROR: file not found]`).
    pub fn marker(&self) -> String {
        match self {
            FileProblem::NotFound => "[ERROR: file not found]".to_owned(),
            FileProblem::Directory => "[ERROR: now a folder, not a file]".to_owned(),
            FileProblem::Binary => "[ERROR: now a binary file]".to_owned(),
            FileProblem::TooLarge { bytes } => {
                format!(
                    "[ERROR: file grew to {}, over the 64 MiB a view can re-read]",
                    text::bytes(*bytes)
                )
            }
            FileProblem::Unreadable(reason) => format!("[ERROR: cannot read the file: {reason}]"),
            FileProblem::Refused(reason) => format!("[ERROR: {reason}]"),
        }
    }

    /// A sentence for a command's response, naming the file.
    pub fn sentence(&self, display: &str) -> String {
        match self {
            FileProblem::Refused(reason) => reason.clone(),
            FileProblem::NotFound => format!(
                "{display}: file not found. Paths are relative to the project; use search to find a file, or create to make a new one."
            ),
            FileProblem::Directory => {
                format!("{display} is a folder; give the path of a file inside it.")
            }
            FileProblem::Binary => format!(
                "{display} is a binary file (it contains NUL bytes); the editor only shows and edits text. Use bash to inspect it (e.g. xxd, file)."
            ),
            FileProblem::TooLarge { bytes } => format!(
                "{display} is {}, over the 64 MiB the editor re-reads on every screen; use search, or bash (grep -n, sed -n 'A,Bp') to look into it.",
                text::bytes(*bytes)
            ),
            FileProblem::Unreadable(reason) => format!("{display} cannot be read: {reason}"),
        }
    }
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.marker())
    }
}

/// A text file, read whole.
pub struct TextFile {
    pub path: ResolvedPath,
    pub bytes: Vec<u8>,
}

/// Resolves and reads a text file.
pub fn read_text(root: &ProjectRoot, written: &str) -> Result<TextFile, (String, FileProblem)> {
    let path = root
        .resolve(written)
        .map_err(|err| (written.to_owned(), FileProblem::Refused(err.to_string())))?;
    match read_resolved(&path) {
        Ok(bytes) => Ok(TextFile { path, bytes }),
        Err(problem) => Err((path.display, problem)),
    }
}

/// Reads a resolved path, refusing what is not a text file.
pub fn read_resolved(path: &ResolvedPath) -> Result<Vec<u8>, FileProblem> {
    let file = File::open(&path.real).map_err(io_problem)?;
    let metadata = file.metadata().map_err(io_problem)?;
    if metadata.is_dir() {
        return Err(FileProblem::Directory);
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(FileProblem::TooLarge {
            bytes: metadata.len(),
        });
    }
    // Bounded even if the file grows between the check and the read.
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_problem)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FileProblem::TooLarge {
            bytes: bytes.len() as u64,
        });
    }
    if is_binary(&bytes) {
        return Err(FileProblem::Binary);
    }
    Ok(bytes)
}

fn io_problem(err: std::io::Error) -> FileProblem {
    match err.kind() {
        ErrorKind::NotFound => FileProblem::NotFound,
        ErrorKind::IsADirectory => FileProblem::Directory,
        _ => FileProblem::Unreadable(err.to_string()),
    }
}
