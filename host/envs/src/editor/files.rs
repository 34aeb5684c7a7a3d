//! Reading a file the editor may show or edit: the path resolved inside the
//! project, the whole content, and the refusals (missing, a folder, a FIFO,
//! a socket or a device, binary, too large), each phrased so the agent
//! knows what to do instead.
//!
//! The file is opened as any file a command can swap
//! ([`envhost_files::untrusted`]): inside the project nothing on the way to
//! its resolved path is followed (a symlink swapped in since it was
//! resolved is refused), nothing blocks, and at most [`MAX_FILE_BYTES`]
//! are read. A view re-reads its file on every screen, so a hostile swap
//! costs the view one marker, never a hang.
//!
//! This module owns those checks so views, edits and the screen refuse the
//! same things in the same words. It must not interpret the content.

use std::fmt;

use envhost_core::text;

use super::lines::is_binary;
use envhost_files::{Bound, FileKind, Opened, ProjectRoot, RefusalReason, ResolvedPath, untrusted};

/// Views re-read their file on every screen, so a view's file is kept
/// below a size that re-reading cannot make slow.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// [`MAX_FILE_BYTES`] as the bound files are read with.
const VIEWABLE: Bound = Bound::new(MAX_FILE_BYTES, "a file the editor re-reads");

/// Why a file cannot be shown or edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    /// The path was refused (outside the project, unresolvable).
    Refused(String),
    NotFound,
    Directory,
    /// A FIFO, a socket or a device: reading it could block or never end.
    NotRegular(FileKind),
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
            FileProblem::NotRegular(kind) => format!("[ERROR: now {kind}, not a regular file]"),
            FileProblem::Binary => "[ERROR: now a binary file]".to_owned(),
            FileProblem::TooLarge { bytes } => {
                format!(
                    "[ERROR: file grew to {}, over the 64 MiB a view can re-read]",
                    text::bytes(*bytes)
                )
            }
            FileProblem::Unreadable(reason) => format!("[ERROR: {reason}]"),
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
            FileProblem::NotRegular(kind) => format!(
                "{display} is {kind}, not a regular file; the editor only shows and edits regular files."
            ),
            FileProblem::Binary => format!(
                "{display} is a binary file (it contains NUL bytes); the editor only shows and edits text. Use bash to inspect it (e.g. xxd, file)."
            ),
            FileProblem::TooLarge { bytes } => format!(
                "{display} is {}, over the 64 MiB the editor re-reads on every screen; use search, or bash (grep -n, sed -n 'A,Bp') to look into it.",
                text::bytes(*bytes)
            ),
            FileProblem::Unreadable(reason) => format!("{display} {reason}"),
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
    match read_resolved(root, &path) {
        Ok(bytes) => Ok(TextFile { path, bytes }),
        Err(problem) => Err((path.display, problem)),
    }
}

/// Reads a resolved path, refusing what is not a text file.
pub fn read_resolved(root: &ProjectRoot, path: &ResolvedPath) -> Result<Vec<u8>, FileProblem> {
    read_for_edit(root, path).map(|(_, bytes)| bytes)
}

/// Reads a resolved path as [`read_resolved`] does, and keeps the
/// descriptor it was read through: an edit writes only if the file is still
/// the one read ([`envhost_files::replace_verified`]), without reading it
/// again.
pub fn read_for_edit(
    root: &ProjectRoot,
    path: &ResolvedPath,
) -> Result<(Opened, Vec<u8>), FileProblem> {
    let read = untrusted::open_within(root.path(), &path.real).and_then(|opened| {
        let bytes = opened.read(VIEWABLE)?;
        Ok((opened, bytes))
    });
    let (opened, bytes) = read.map_err(|refusal| match refusal.reason {
        RefusalReason::Missing => FileProblem::NotFound,
        RefusalReason::NotRegular(FileKind::Folder) => FileProblem::Directory,
        RefusalReason::NotRegular(kind) => FileProblem::NotRegular(kind),
        RefusalReason::TooLarge { size, .. } => FileProblem::TooLarge { bytes: size },
        other => FileProblem::Unreadable(other.to_string()),
    })?;
    if is_binary(&bytes) {
        return Err(FileProblem::Binary);
    }
    Ok((opened, bytes))
}
