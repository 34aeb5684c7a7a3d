//! envhost's project files: the rules every part of the host follows when
//! it touches a file of the project on the agent's behalf.
//!
//! This crate owns:
//!
//! - [`ProjectRoot`]: which paths are inside the project (`..`, absolute
//!   paths and symlinks that lead out are refused with the reason, unless
//!   the host runs with `--allow-outside-project`) and how a path is shown;
//! - [`replace_verified`] and [`create_new`]: writes that lose nothing —
//!   never half a file (a temporary file beside the target, renamed over
//!   it, or an in-place write that keeps hard links), and never the bytes
//!   another process writes: a file changed since it was verified, or held
//!   open for writing by another process ([`writers`]), is not written;
//! - [`ProjectFiles`]: whole files moved in bounded chunks (the protocol's
//!   `read_file` / `write_file`), a chunked write appearing all at once.
//!
//! - [`changes`]: the files a command created or changed, found with a
//!   bounded look at a few directories, never a walk of the project;
//! - [`untrusted`]: how the host opens and creates any file where a
//!   command can write (the project, `.envhost/`, `env/`, the shells'
//!   private folders): no symlink followed, nothing that blocks, nothing
//!   read without bound, nothing written through a planted name.
//!
//! The editor uses the first two; the front ends use the third. It must
//! not know the wire format (JSON, base64) or any environment.

#![deny(missing_docs)]

mod atomic;
pub mod changes;
mod paths;
mod transfer;
pub mod untrusted;
pub mod writers;

pub use crate::atomic::{WriteProblem, Written, create_new, replace_verified};
pub use crate::paths::{PathError, ProjectRoot, ResolvedPath};
pub use crate::transfer::{
    FileChunk, FileError, FileWritten, MAX_READ_CHUNK, MAX_UNFINISHED_WRITES, ProjectFiles,
};
pub use crate::untrusted::{Bound, FileKind, FileRefusal, Folder, Opened, RefusalReason};
