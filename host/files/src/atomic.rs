//! Writing a file so that nothing is lost: neither half of it to a crash,
//! nor the bytes another process writes to it.
//!
//! An edit replaces a file's content only if the file is still exactly what
//! the edit verified and no other process holds it open for writing
//! ([`writers`]). The content is read once, through the descriptor the
//! write then uses: that descriptor's inode, size, modification and change
//! times, taken just before the read, must still be the file's when the
//! write starts and again right before the switch (and the path must still
//! name that inode).
//!
//! The file is not read a second time to compare its content: a second
//! read would itself be followed by metadata looks only, up to the switch,
//! so it would leave the same window, a write that keeps the size and
//! lands within the same timestamp tick as the look before it. On Linux
//! 6.13 and later (multigrain timestamps, on ext4, xfs, btrfs and tmpfs),
//! taking a file's times makes its next change take a fine-grained time,
//! and that window is closed: every write after the look changes the change
//! time (Linux 6.18 on ext4 here: none of 20,000 one-byte writes right after
//! a look kept the times). The refusals are tested in
//! `a_file_changed_since_it_was_read_is_not_written`.
//!
//! A file with a single link gets the new content
//! through a temporary file beside it, flushed to disk and renamed over it in
//! one step (a crash leaves the old or the new file, never half of one; the
//! mode and, where the host may set it, the owner are kept); the folder is
//! flushed after the rename, so that an edit reported done survives a power
//! cut. A file with
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
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::untrusted::{self, Opened};
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

/// Replaces the content of the file `read` is open on with `content`,
/// provided it is still the file `expected` was read from (whole, with
/// [`Opened::read`]) and nobody else has it open for writing.
///
/// `read` must come from a file opened as hostile input (nothing on the way
/// followed, see [`untrusted`]); its path names the file to replace. It is
/// closed before the folder is flushed, so that the old file, unlinked by
/// the rename, is freed before the flush rather than after it (ext4 here:
/// the flush and the close took 3.3 ms together in that order, 7.2 ms the
/// other way round; medians of 30).
pub fn replace_verified(
    read: Opened,
    expected: &[u8],
    content: &[u8],
) -> Result<Written, WriteProblem> {
    let target = read.path();
    let current = read.file();
    let before = read.metadata();
    // The read went to the end of the file: more or fewer bytes than its
    // size before the read mean it was written meanwhile.
    if before.len() != expected.len() as u64 || !unchanged(before, &current.metadata()?) {
        return Err(WriteProblem::Changed);
    }
    let writers = writers::others_writing_file(current, before.dev(), before.ino());
    if !writers.is_empty() {
        return Err(WriteProblem::OpenForWriting(writers));
    }
    if before.nlink() > 1 {
        return write_in_place(target, current, before, expected, content);
    }
    let (temp, mut file) = open_temp_beside(target)?;
    let result = (|| {
        file.write_all(content)?;
        file.set_permissions(fs::Permissions::from_mode(before.mode() & 0o7777))?;
        // Keeping the owner needs privileges the host may not have; the
        // content and mode matter more than failing the edit over it.
        let _ = std::os::unix::fs::fchown(&file, Some(before.uid()), Some(before.gid()));
        file.sync_all()?;
        // The last look before the switch: the same file at the path (not
        // a symlink swapped in for it), and not written since it was read.
        let at_path = fs::symlink_metadata(target)?;
        if !unchanged(before, &current.metadata()?) || !same_file(before, &at_path) {
            return Err(WriteProblem::Changed);
        }
        fs::rename(&temp, target)?;
        Ok(())
    })();
    if let Err(problem) = result {
        let _ = fs::remove_file(&temp);
        return Err(problem);
    }
    // Bytes written to the old file after the last look went with it.
    // (Its change time moved with the rename's unlink: only its size and
    // modification time tell.)
    let written_meanwhile = current.metadata().map(|old| {
        old.len() != before.len()
            || old.mtime() != before.mtime()
            || old.mtime_nsec() != before.mtime_nsec()
    });
    let target = target.to_owned();
    drop(read);
    // Makes the rename itself durable: without it, a power cut after the
    // edit was reported could bring the old file back.
    sync_parent(&target);
    if written_meanwhile? {
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
    use crate::untrusted::Bound;
    use std::time::Duration;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".envhost-"))
            .collect()
    }

    /// The file opened and read as the editor reads it.
    fn read(path: &Path) -> (Opened, Vec<u8>) {
        let opened = untrusted::open_file(path).unwrap();
        let bytes = opened.read(Bound::new(1 << 20, "a test file")).unwrap();
        (opened, bytes)
    }

    /// Kernels before multigrain timestamps (6.13) give a write in the
    /// same tick as the look the same times; a test that means to change
    /// the file after it was read waits past one tick (at most 10 ms).
    fn past_a_timestamp_tick() {
        std::thread::sleep(Duration::from_millis(20));
    }

    #[test]
    fn replace_keeps_the_mode_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run.sh");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        let (opened, old) = read(&target);
        let written = replace_verified(opened, &old, b"new").unwrap();
        assert_eq!(written, Written::Replaced);
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o751);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_file_changed_since_it_was_read_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        fs::write(&target, "one\ntwo\n").unwrap();

        // Appended to.
        let (opened, old) = read(&target);
        past_a_timestamp_tick();
        OpenOptions::new()
            .append(true)
            .open(&target)
            .unwrap()
            .write_all(b"appended\n")
            .unwrap();
        let problem = replace_verified(opened, &old, b"ONE\ntwo\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert_eq!(fs::read(&target).unwrap(), b"one\ntwo\nappended\n");

        // Same size, different bytes, written in place.
        let (opened, old) = read(&target);
        past_a_timestamp_tick();
        OpenOptions::new()
            .write(true)
            .open(&target)
            .unwrap()
            .write_all_at(b"ONE", 0)
            .unwrap();
        let problem = replace_verified(opened, &old, b"x\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert_eq!(fs::read(&target).unwrap(), b"ONE\ntwo\nappended\n");

        // Replaced by another file renamed over it (an editor's save).
        let (opened, old) = read(&target);
        let other = dir.path().join("other.txt");
        fs::write(&other, "saved elsewhere\n").unwrap();
        fs::rename(&other, &target).unwrap();
        let problem = replace_verified(opened, &old, b"x\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert_eq!(fs::read(&target).unwrap(), b"saved elsewhere\n");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn content_that_is_not_the_whole_file_as_read_is_not_written() {
        // A file that grew while it was read: more bytes than its size
        // before the read.
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        fs::write(&target, "one\ntwo\n").unwrap();
        let (opened, old) = read(&target);
        let problem = replace_verified(opened, &old[..4], b"x\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert_eq!(fs::read(&target).unwrap(), b"one\ntwo\n");
    }

    #[test]
    fn a_symlink_swapped_in_for_the_file_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        let elsewhere = dir.path().join("elsewhere.txt");
        fs::write(&target, "one\n").unwrap();
        let (opened, old) = read(&target);
        // The same inode, now reached through a symlink at the path.
        fs::rename(&target, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &target).unwrap();
        let problem = replace_verified(opened, &old, b"two\n").unwrap_err();
        assert!(matches!(problem, WriteProblem::Changed), "{problem:?}");
        assert!(
            fs::symlink_metadata(&target)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&elsewhere).unwrap(), b"one\n");
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
        let (opened, old) = read(&target);
        let written = replace_verified(opened, &old, b"same start\nnew\n");
        assert_eq!(written.unwrap(), Written::InPlace);
        assert_eq!(fs::read(&link).unwrap(), b"same start\nnew\n");
        assert_eq!(fs::metadata(&target).unwrap().ino(), inode);
        let longer = b"same start\nnew\nand a longer tail\n";
        let (opened, old) = read(&target);
        replace_verified(opened, &old, longer).unwrap();
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
        let (opened, old) = read(&target);
        let result = replace_verified(opened, &old, b"LINE\n");
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
