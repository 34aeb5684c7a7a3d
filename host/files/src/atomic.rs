//! Writing a file so that a crash never leaves half of it: the new content
//! goes to a temporary file beside the target, is flushed to disk, and is
//! renamed over the target in one step.
//!
//! This module owns that sequence, keeping the replaced file's permissions
//! (and owner, where the host may set it), and creating a new file without
//! ever replacing one that appeared meanwhile. It must not decide what to
//! write.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Replaces an existing file's content; its mode and owner stay as they were.
pub fn replace(target: &Path, content: &[u8]) -> io::Result<()> {
    fs::metadata(target)?;
    let (temp, mut file) = open_temp_beside(target)?;
    if let Err(err) = file.write_all(content) {
        let _ = fs::remove_file(&temp);
        return Err(err);
    }
    put_in_place(&temp, file, target)
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
/// created with the mode a new file gets.
pub(crate) fn open_temp_beside(target: &Path) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let folder = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    loop {
        let attempt = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut temp_name = OsString::from(".");
        temp_name.push(format!(
            "{name}.envhost-{}-{attempt}.tmp",
            std::process::id()
        ));
        let temp = folder.join(temp_name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(err) if err.kind() == ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
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
        replace(&target, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o751);
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn create_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a/b/new.txt");
        create_new(&target, b"one").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        let err = create_new(&target, b"two").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&target).unwrap(), b"one");
        assert!(leftovers(&dir.path().join("a/b")).is_empty());
    }
}
