//! envhost's project files: the rules every part of the host follows when
//! it touches a file of the project on the agent's behalf.
//!
//! This crate owns:
//!
//! - [`ProjectRoot`]: which paths are inside the project (`..`, absolute
//!   paths and symlinks that lead out are refused with the reason, unless
//!   the host runs with `--allow-outside-project`) and how a path is shown;
//! - [`replace`] and [`create_new`]: writes that never leave half a file
//!   (a temporary file beside the target, renamed over it);
//! - [`ProjectFiles`]: whole files moved in bounded chunks (the protocol's
//!   `read_file` / `write_file`), a chunked write appearing all at once.
//!
//! The editor uses the first two; the front ends use the third. It must
//! not know the wire format (JSON, base64) or any environment.

#![deny(missing_docs)]

mod atomic;
mod paths;
mod transfer;

pub use crate::atomic::{create_new, replace};
pub use crate::paths::{PathError, ProjectRoot, ResolvedPath};
pub use crate::transfer::{
    FileChunk, FileError, FileWritten, MAX_READ_CHUNK, MAX_UNFINISHED_WRITES, ProjectFiles,
};
