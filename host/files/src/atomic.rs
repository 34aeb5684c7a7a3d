//! Writing a file so that nothing is lost: neither half of it to a crash,
//! nor the bytes another process writes to it.
//!
//! An edit replaces a file's content only if the file is still exactly what
//! the edit verified (same content, size, modification time, inode) and no
//! other process holds it open for writing ([`writers`]); it looks again
//! right before the switch. A file with a single link gets the new content
//! through a temporary file beside it, flushed to disk and renamed over it in
//! one step (a crash leaves the old or the new file, never half of one; the
//! mode and, where the host may set it, the owner are kept). A file with
//! other hard links is written in place instead, from the first changed
//! byte, so that every link keeps showing the same file: the trade-off is
//! that a crash in the middle of that write can leave it half written.
//!
//! The temporary file is created `O_EXCL` at a name nobody can guess, and
//! the target is opened without following a symlink swapped in for it or
//! waiting on a FIFO ([`untrusted`](crate::untrusted)).
//!
//! This module owns those sequences and creating a new file without ever
//! replacing one that appeared meanwhile. It must not decide what to write.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::untrusted::{self, FileRefusal, RefusalReason};
use crate::writers::{self, Writer};

/// Why an edit's content did not go in cleanly.
#[derive(Debug)]
pub enum WriteProblem {
    /// The file is no longer what the edit verified: nothing was written.
    Changed,
    /// Other processes have the file open for writing: nothing was written.
    OpenForWriting(Vec<Writer>),
    /// Writing failed: the file was not changed.
    Io(io::Error),
    /// The new content is in, but another process wrote to the file during
    /// the switch itself.
    ChangedDuringSwitch,
}

impl From<io::Error> for WriteProblem {
    fn from(err: io::Error) -> Self {
        WriteProblem::Io(err)
    }
}

/// How the new content went in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// A new file renamed over the old one.
    Replaced,
    /// Into the same file (it has other hard links).
    InPlace,
}

/// Replaces `target`'s content with `content`, provided it still holds
/// exactly `expected` and nobody else has it open for writing.
pub fn replace_verified(
    target: &Path,
    expected: &[u8],
    content: &[u8],
) -> Result<Written, WriteProblem> {
    let current = untrusted::open_file(target)
        .map_err(refusal_to_io)?
        .into_file();
    let before = current.metadata()?;
    if before.len() != expected.len() as u64 || read_whole(&current)? != expected {
        return Err(WriteProblem::Changed);
    }
    let writers = writers::others_writing_file(&current, before.dev(), before.ino());
    if !writers.is_empty() {
        return Err(WriteProblem::OpenForWriting(writers));
    }
    if before.nlink() > 1 {
        return write_in_place(target, &current, &before, expected, content);
    }
    let (temp, mut file) = open_temp_beside(target)?;
    let result = (|| {
        file.write_all(content)?;
        file.set_permissions(fs::Permissions::from_mode(before.mode() & 0o7777))?;
        // Keeping the owner needs privileges the host may not have; the
        // content and mode matter more than failing the edit over it.
        let _ = std::os::unix::fs::fchown(&file, Some(before.uid()), Some(before.gid()));
        file.sync_all()?;
        // The last look before the switch: the same file at the path, and
        // not written since it was verified.
        let at_path = fs::metadata(target)?;
        if !unchanged(&before, &current.metadata()?) || !same_file(&before, &at_path) {
            return Err(WriteProblem::Changed);
        }
        fs::rename(&temp, target)?;
        Ok(())
    })();
    if let Err(problem) = result {
        let _ = fs::remove_file(&temp);
        return Err(problem);
    }
    sync_parent(target);
    // Bytes written to the old file after the last look went with it.
    // (Its change time moved with the rename's unlink: only its size and
    // modification time tell.)
    let old = current.metadata()?;
    if old.len() != before.len()
        || old.mtime() != before.mtime()
        || old.mtime_nsec() != before.mtime_nsec()
    {
        return Err(WriteProblem::ChangedDuringSwitch);
    }
    Ok(Written::Replaced)
}

/// Writes `content` into the file itself, from the first byte that differs
/// from `expected`, and cuts it to length.
fn write_in_place(
    target: &Path,
    current: &File,
    before: &Metadata,
    expected: &[u8],
    content: &[u8],
) -> Result<Written, WriteProblem> {
    // Never through a symlink swapped in, never waiting on a FIFO.
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(target)?;
    if !same_file(before, &file.metadata()?) || !unchanged(before, &current.metadata()?) {
        return Err(WriteProblem::Changed);
    }
    let first = expected
        .iter()
        .zip(content)
        .take_while(|(old, new)| old == new)
        .count();
    file.write_all_at(&content[first..], first as u64)?;
    file.set_len(content.len() as u64)?;
    file.sync_all()?;
    if file.metadata()?.len() != content.len() as u64 {
        return Err(WriteProblem::ChangedDuringSwitch);
    }
    Ok(Written::InPlace)
}

fn read_whole(file: &File) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut reader = file;
    reader.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Nothing wrote to the file between the two looks.
fn unchanged(before: &Metadata, now: &Metadata) -> bool {
    same_file(before, now)
        && before.len() == now.len()
        && before.mtime() == now.mtime()
        && before.mtime_nsec() == now.mtime_nsec()
        && before.ctime() == now.ctime()
        && before.ctime_nsec() == now.ctime_nsec()
}

/// Moves a finished temporary file (from [`open_temp_beside`]) over
/// `target` in one step, flushed to disk first. A file it replaces passes
/// on its mode and owner. On failure the temporary file is removed.
pub(crate) fn put_in_place(temp: &Path, file: File, target: &Path) -> io::Result<()> {
    let result = (|| {
        if let Ok(metadata) = fs::metadata(target)
            && metadata.is_file()
        {
            file.set_permissions(fs::Permissions::from_mode(metadata.mode() & 0o7777))?;
            // Keeping the owner needs privileges the host may not have; the
            // content and mode matter more than failing the write over it.
            let _ = std::os::unix::fs::fchown(&file, Some(metadata.uid()), Some(metadata.gid()));
        }
        file.sync_all()?;
        fs::rename(temp, target)
    })();
    finish(result, temp, target)
}

/// Creates a file that must not exist yet (`ErrorKind::AlreadyExists` if it
/// does). Missing parent folders are created; the mode follows the umask as
/// for any new file.
pub fn create_new(target: &Path, content: &[u8]) -> io::Result<()> {
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    let (temp, mut file) = open_temp_beside(target)?;
    let result = (|| {
        file.write_all(content)?;
        file.sync_all()?;
        rename_no_replace(&temp, target)
    })();
    finish(result, &temp, target)
}

fn finish(result: io::Result<()>, temp: &Path, target: &Path) -> io::Result<()> {
    match result {
        Ok(()) => {
            sync_parent(target);
            Ok(())
        }
        Err(err) => {
            let _ = fs::remove_file(temp);
            Err(err)
        }
    }
}

/// A fresh file next to `target` (same folder, so the rename is atomic),
/// created `O_EXCL` at a name nobody can guess, with the mode a new file
/// gets.
pub(crate) fn open_temp_beside(target: &Path) -> io::Result<(PathBuf, File)> {
    let folder = target.parent().unwrap_or(Path::new(""));
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    untrusted::create_unique(folder, &format!(".{name}.envhost-"), ".tmp", 0o666)
}

/// A refusal as the `io::Error` the write sequences report.
fn refusal_to_io(refusal: FileRefusal) -> io::Error {
    let kind = match &refusal.reason {
        RefusalReason::Missing => io::ErrorKind::NotFound,
        RefusalReason::Io(err) => err.kind(),
        _ => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, refusal.to_string())
}

/// Renames only if nothing is at `to` (renameat2 RENAME_NOREPLACE, or a
/// hard link where the file system lacks it).
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use nix::libc;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    // The system call itself: nix wraps renameat2 for glibc only, and the
    // musl of the static build has no wrapper at all.
    let from_c = CString::new(from.as_os_str().as_bytes())?;
    let to_c = CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: both paths are NUL-terminated strings that outlive the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            from_c.as_ptr(),
            libc::AT_FDCWD,
            to_c.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if result == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
        _ => Err(error),
    }
}

/// Makes the rename itself durable; best effort (not every file system
/// lets a folder be synced).
fn sync_parent(target: &Path) {
    if let Some(parent) = target.parent()
        && let Ok(folder) = File::open(if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        })
    {
        let _ = folder.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".envhost-"))
            .collect()
    }

    #[test]
    fn replace_keeps_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        let written = replace_verified(&target, b"old", b"new").unwrap();
        assert_eq!(written, Written::Replaced);
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o751);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_file_changed_since_it_was_verified_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        fs::write(&target, "one\ntwo\nappended\n").unwrap();
        let problem = replace_verified(&target, b"one\ntwo\n", b"ONE\ntwo\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert_eq!(fs::read(&target).unwrap(), b"one\ntwo\nappended\n");
        // Same size, different bytes.
        let problem = replace_verified(&target, b"one\ntwo\nAPPENDED\n", b"x\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_hard_linked_file_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        let link = dir.path().join("b.txt");
        fs::write(&target, "same start\nold end\n").unwrap();
        fs::hard_link(&target, &link).unwrap();
        let inode = fs::metadata(&target).unwrap().ino();
        let written = replace_verified(&target, b"same start\nold end\n", b"same start\nnew\n");
        assert_eq!(written.unwrap(), Written::InPlace);
        assert_eq!(fs::read(&link).unwrap(), b"same start\nnew\n");
        assert_eq!(fs::metadata(&target).unwrap().ino(), inode);
        let longer = b"same start\nnew\nand a longer tail\n";
        replace_verified(&target, b"same start\nnew\n", longer).unwrap();
        assert_eq!(fs::read(&link).unwrap(), longer);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_file_open_for_writing_elsewhere_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("log.txt");
        fs::write(&target, "line\n").unwrap();
        let mut holder = std::process::Command::new("sleep")
            .arg("30")
            .stdout(OpenOptions::new().append(true).open(&target).unwrap())
            .spawn()
            .unwrap();
        let result = replace_verified(&target, b"line\n", b"LINE\n");
        let _ = (holder.kill(), holder.wait());
        match result {
            Err(WriteProblem::OpenForWriting(writers)) => {
                assert_eq!(writers[0].pid, holder.id() as i32);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fs::read(&target).unwrap(), b"line\n");
    }

    #[test]
    fn create_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a/b/new.txt");
        create_new(&target, b"one").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        let err = create_new(&target, b"two").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&target).unwrap(), b"one");
        assert!(leftovers(&dir.path().join("a/b")).is_empty());
    }
}
