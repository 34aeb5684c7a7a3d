//! Project files moved whole over the protocol (`read_file` / `write_file`):
//! any bytes, in bounded chunks, confined to the project.
//!
//! This module owns reading a file a chunk at a time, writing one in
//! chunks that appear all at once (the chunks go to a temporary file
//! beside the target, renamed over it with the last chunk, keeping the
//! replaced file's permissions), forgetting unfinished writes, and the
//! rule that paths stay inside the project ([`ProjectRoot`]) unless the
//! host allows otherwise. It must not know the wire format (JSON, base64)
//! or any environment.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::atomic;
use crate::paths::{PathError, ProjectRoot};
use crate::untrusted::{self, FileKind, FileRefusal, RefusalReason};

/// Most bytes one `read_file` answer carries (and the default): 8 MiB,
/// about 11 MiB of base64, well under the protocol's 16 MiB line.
pub const MAX_READ_CHUNK: u64 = 8 * 1024 * 1024;

/// Most unfinished chunked writes kept at once; each holds a temporary
/// file open.
pub const MAX_UNFINISHED_WRITES: usize = 16;

/// A chunk of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChunk {
    /// The file's size when the chunk was read.
    pub size: u64,
    /// Where the chunk starts.
    pub offset: u64,
    /// The bytes from `offset` (at most the length asked for).
    pub content: Vec<u8>,
    /// Whether the chunk reaches the end of the file.
    pub eof: bool,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileWritten {
    /// Bytes written so far (the file's size once complete).
    pub size: u64,
    /// Whether the file is in place (false while more chunks are expected).
    pub complete: bool,
}

/// Why a file request was refused.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path leaves the project (or names nothing).
    #[error("{0}")]
    Path(#[from] PathError),
    /// Nothing is there.
    #[error("{path} does not exist")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A folder where a file was expected.
    #[error("{path} is a folder, not a file")]
    IsDirectory {
        /// The path as given.
        path: String,
    },
    /// A device, pipe or socket: reading it could block or never end.
    #[error(
        "{path} is not a regular file (a device, pipe or socket); only regular files can be read or written"
    )]
    NotAFile {
        /// The path as given.
        path: String,
    },
    /// A symlink swapped in (inside the project nothing on the way to a
    /// file is followed), or another refusal of the file itself.
    #[error("{0}")]
    Refused(FileRefusal),
    /// The host's user may not do it.
    #[error("{path}: permission denied ({detail})")]
    PermissionDenied {
        /// The path as given.
        path: String,
        /// The system's words.
        detail: String,
    },
    /// A chunk with `append` and no unfinished write of that file.
    #[error(
        "no write of {path} is in progress: send its first chunk without \"append\" (and with \"more\":true if more chunks follow)"
    )]
    NoWriteInProgress {
        /// The path as given.
        path: String,
    },
    /// Too many unfinished chunked writes.
    #[error(
        "{MAX_UNFINISHED_WRITES} chunked writes are already unfinished; finish one (its last chunk without \"more\") before starting {path}"
    )]
    TooManyWrites {
        /// The path as given.
        path: String,
    },
    /// Another input/output failure.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The failure.
        source: io::Error,
    },
}

impl FileError {
    /// One word for programs: `not_found`, `is_directory`, `not_a_file`,
    /// `permission_denied`, `outside_project`, `invalid_path`,
    /// `no_write_in_progress`, `too_many_writes`, `io`.
    pub fn reason(&self) -> &'static str {
        match self {
            FileError::Path(PathError::Empty | PathError::Unresolvable { .. }) => "invalid_path",
            FileError::Path(_) => "outside_project",
            FileError::NotFound { .. } => "not_found",
            FileError::IsDirectory { .. } => "is_directory",
            FileError::NotAFile { .. } | FileError::Refused(_) => "not_a_file",
            FileError::PermissionDenied { .. } => "permission_denied",
            FileError::NoWriteInProgress { .. } => "no_write_in_progress",
            FileError::TooManyWrites { .. } => "too_many_writes",
            FileError::Io { .. } => "io",
        }
    }

    fn from_refusal(path: &str, refusal: FileRefusal) -> FileError {
        let path = path.to_owned();
        match refusal.reason {
            RefusalReason::Missing => FileError::NotFound { path },
            RefusalReason::NotRegular(FileKind::Folder) => FileError::IsDirectory { path },
            RefusalReason::NotRegular(_) => FileError::NotAFile { path },
            RefusalReason::Io(error) => FileError::from_io(&path, error),
            _ => FileError::Refused(refusal),
        }
    }

    fn from_io(path: &str, error: io::Error) -> FileError {
        match error.kind() {
            ErrorKind::NotFound => FileError::NotFound {
                path: path.to_owned(),
            },
            ErrorKind::IsADirectory => FileError::IsDirectory {
                path: path.to_owned(),
            },
            ErrorKind::PermissionDenied => FileError::PermissionDenied {
                path: path.to_owned(),
                detail: error.to_string(),
            },
            _ => FileError::Io {
                path: path.to_owned(),
                source: error,
            },
        }
    }
}

/// A chunked write waiting for its next chunk.
struct Unfinished {
    temp: PathBuf,
    file: File,
    written: u64,
}

/// The project's files as the file messages see them.
pub struct ProjectFiles {
    root: ProjectRoot,
    /// By the target's real path.
    unfinished: HashMap<PathBuf, Unfinished>,
}

impl ProjectFiles {
    /// Files under `root`.
    pub fn new(root: ProjectRoot) -> Self {
        ProjectFiles {
            root,
            unfinished: HashMap::new(),
        }
    }

    /// Up to `length` bytes (at most [`MAX_READ_CHUNK`], the default) of
    /// the regular file at `path`, from `offset`.
    pub fn read(
        &self,
        path: &str,
        offset: u64,
        length: Option<u64>,
    ) -> Result<FileChunk, FileError> {
        let real = self.root.resolve(path)?.real;
        // Nothing on the way followed inside the project (a symlink swapped
        // in since the path was resolved is refused), and a FIFO refused
        // without waiting for a writer.
        let opened = untrusted::open_within(self.root.path(), &real)
            .map_err(|refusal| FileError::from_refusal(path, refusal))?;
        let metadata = opened.metadata().clone();
        let file = opened.into_file();
        let size = metadata.len();
        let wanted = length.unwrap_or(MAX_READ_CHUNK).min(MAX_READ_CHUNK);
        let available = size.saturating_sub(offset);
        let mut content = vec![0u8; wanted.min(available) as usize];
        let mut filled = 0;
        while filled < content.len() {
            match file.read_at(&mut content[filled..], offset + filled as u64) {
                // The file shrank while it was read.
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => return Err(FileError::from_io(path, error)),
            }
        }
        content.truncate(filled);
        let eof = offset + filled as u64 >= size;
        Ok(FileChunk {
            size,
            offset,
            content,
            eof,
        })
    }

    /// Writes a chunk of the file at `path`. Without `append` it starts the
    /// file afresh (dropping an unfinished write of it); with `append` it
    /// continues the unfinished one. Without `more` the file is put in
    /// place: it appears whole, replacing any old one (whose permissions
    /// it keeps); parent folders are created.
    pub fn write(
        &mut self,
        path: &str,
        content: &[u8],
        append: bool,
        more: bool,
    ) -> Result<FileWritten, FileError> {
        let real = self.root.resolve(path)?.real;
        let mut unfinished = if append {
            self.unfinished
                .remove(&real)
                .ok_or_else(|| FileError::NoWriteInProgress {
                    path: path.to_owned(),
                })?
        } else {
            self.forget(&real);
            if more && self.unfinished.len() >= MAX_UNFINISHED_WRITES {
                return Err(FileError::TooManyWrites {
                    path: path.to_owned(),
                });
            }
            self.start(path, &real)?
        };
        if let Err(error) = unfinished.file.write_all(content) {
            let _ = fs::remove_file(&unfinished.temp);
            return Err(FileError::from_io(path, error));
        }
        unfinished.written += content.len() as u64;
        let size = unfinished.written;
        if more {
            self.unfinished.insert(real, unfinished);
            return Ok(FileWritten {
                size,
                complete: false,
            });
        }
        self.finish(path, &real, unfinished)?;
        Ok(FileWritten {
            size,
            complete: true,
        })
    }

    fn start(&self, path: &str, real: &Path) -> Result<Unfinished, FileError> {
        match fs::symlink_metadata(real) {
            Ok(metadata) if metadata.is_dir() => {
                return Err(FileError::IsDirectory {
                    path: path.to_owned(),
                });
            }
            Ok(metadata) if !metadata.is_file() && !metadata.file_type().is_symlink() => {
                return Err(FileError::NotAFile {
                    path: path.to_owned(),
                });
            }
            _ => {}
        }
        if let Some(parent) = real.parent() {
            fs::create_dir_all(parent).map_err(|error| FileError::from_io(path, error))?;
        }
        let (temp, file) =
            atomic::open_temp_beside(real).map_err(|error| FileError::from_io(path, error))?;
        Ok(Unfinished {
            temp,
            file,
            written: 0,
        })
    }

    fn finish(&self, path: &str, real: &Path, unfinished: Unfinished) -> Result<(), FileError> {
        let Unfinished { temp, file, .. } = unfinished;
        let result = atomic::put_in_place(&temp, file, real);
        result.map_err(|error| {
            let _ = fs::remove_file(&temp);
            FileError::from_io(path, error)
        })
    }

    fn forget(&mut self, real: &Path) {
        if let Some(unfinished) = self.unfinished.remove(real) {
            let _ = fs::remove_file(&unfinished.temp);
        }
    }
}

impl Drop for ProjectFiles {
    /// Unfinished writes leave nothing behind.
    fn drop(&mut self) {
        for (_, unfinished) in self.unfinished.drain() {
            let _ = fs::remove_file(&unfinished.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn project() -> (tempfile::TempDir, ProjectFiles) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, ProjectFiles::new(ProjectRoot::new(root, false)))
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        walk(dir)
            .into_iter()
            .filter(|name| name.contains(".envhost-"))
            .collect()
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            names.push(entry.file_name().to_string_lossy().into_owned());
            if entry.file_type().unwrap().is_dir() {
                names.extend(walk(&entry.path()));
            }
        }
        names
    }

    #[test]
    fn bytes_round_trip_in_chunks() {
        let (dir, mut files) = project();
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let written = files.write("a/b/data.bin", &bytes, false, false).unwrap();
        assert_eq!(
            written,
            FileWritten {
                size: 1000,
                complete: true
            }
        );
        assert_eq!(fs::read(dir.path().join("a/b/data.bin")).unwrap(), bytes);
        let whole = files.read("a/b/data.bin", 0, None).unwrap();
        assert_eq!((whole.size, whole.offset, whole.eof), (1000, 0, true));
        assert_eq!(whole.content, bytes);
        let middle = files.read("a/b/data.bin", 10, Some(5)).unwrap();
        assert_eq!(
            (middle.content.as_slice(), middle.eof),
            (&bytes[10..15], false)
        );
        let last = files.read("a/b/data.bin", 995, Some(100)).unwrap();
        assert_eq!((last.content.as_slice(), last.eof), (&bytes[995..], true));
        let past = files.read("a/b/data.bin", 5000, None).unwrap();
        assert!(past.content.is_empty() && past.eof);
        files.write("empty", b"", false, false).unwrap();
        let empty = files.read("empty", 0, None).unwrap();
        assert!(empty.content.is_empty() && empty.eof && empty.size == 0);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn reads_never_exceed_the_chunk_limit() {
        let (dir, files) = project();
        let file = File::create(dir.path().join("big")).unwrap();
        file.set_len(MAX_READ_CHUNK + 10).unwrap();
        let chunk = files.read("big", 0, Some(u64::MAX)).unwrap();
        assert_eq!(chunk.content.len() as u64, MAX_READ_CHUNK);
        assert!(!chunk.eof);
    }

    #[test]
    fn a_chunked_write_appears_whole_and_keeps_the_mode() {
        let (dir, mut files) = project();
        let target = dir.path().join("run.sh");
        fs::write(&target, "old\n").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        let first = files.write("run.sh", b"new ", false, true).unwrap();
        assert_eq!(
            first,
            FileWritten {
                size: 4,
                complete: false
            }
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "old\n");
        files.write("run.sh", b"content", true, true).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "old\n");
        let last = files.write("./run.sh", b"\n", true, false).unwrap();
        assert_eq!(
            last,
            FileWritten {
                size: 12,
                complete: true
            }
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "new content\n");
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o7777,
            0o751
        );
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn unfinished_writes_are_restarted_refused_bounded_and_cleaned_up() {
        let (dir, mut files) = project();
        let error = files.write("x", b"more", true, false).unwrap_err();
        assert_eq!(error.reason(), "no_write_in_progress");
        assert!(error.to_string().contains("without \"append\""));
        files.write("x", b"first try", false, true).unwrap();
        // Starting again drops the first attempt and its temporary file.
        files.write("x", b"second", false, true).unwrap();
        assert_eq!(leftovers(dir.path()).len(), 1);
        files.write("x", b" try", true, false).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("x")).unwrap(),
            "second try"
        );
        for n in 0..MAX_UNFINISHED_WRITES {
            files
                .write(&format!("many/{n}"), b"part", false, true)
                .unwrap();
        }
        let error = files
            .write("one-too-many", b"part", false, true)
            .unwrap_err();
        assert_eq!(error.reason(), "too_many_writes");
        // A write in one chunk needs no slot.
        files.write("single", b"whole", false, false).unwrap();
        assert_eq!(leftovers(dir.path()).len(), MAX_UNFINISHED_WRITES);
        drop(files);
        assert!(leftovers(dir.path()).is_empty());
        assert!(!dir.path().join("many/0").exists());
    }

    #[test]
    fn refusals_say_why() {
        let (dir, mut files) = project();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("escape")).unwrap();
        fs::create_dir(dir.path().join("folder")).unwrap();
        nix::unistd::mkfifo(&dir.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let secret = outside.path().join("secret");
        let cases = [
            (files.read("missing", 0, None).unwrap_err(), "not_found"),
            (files.read("folder", 0, None).unwrap_err(), "is_directory"),
            (files.read("pipe", 0, None).unwrap_err(), "not_a_file"),
            (files.read("../x", 0, None).unwrap_err(), "outside_project"),
            (
                files.read(secret.to_str().unwrap(), 0, None).unwrap_err(),
                "outside_project",
            ),
            (
                files.read("escape/secret", 0, None).unwrap_err(),
                "outside_project",
            ),
            (files.read("  ", 0, None).unwrap_err(), "invalid_path"),
            (
                files.write("folder", b"x", false, false).unwrap_err(),
                "is_directory",
            ),
            (
                files.write("pipe", b"x", false, false).unwrap_err(),
                "not_a_file",
            ),
            (
                files
                    .write("escape/planted", b"x", false, false)
                    .unwrap_err(),
                "outside_project",
            ),
        ];
        for (error, reason) in cases {
            assert_eq!(error.reason(), reason, "{error}");
        }
        assert!(!outside.path().join("planted").exists());
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn outside_the_project_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let mut files =
            ProjectFiles::new(ProjectRoot::new(dir.path().canonicalize().unwrap(), true));
        let target = outside.path().join("note");
        files
            .write(target.to_str().unwrap(), b"hi", false, false)
            .unwrap();
        assert_eq!(
            files
                .read(target.to_str().unwrap(), 0, None)
                .unwrap()
                .content,
            b"hi"
        );
    }
}
