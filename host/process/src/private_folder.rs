//! Private folders for an environment's plumbing (bash's start-up script
//! and command file, python's state file): `envhost-<kind>-<pid>-<random>`
//! in the temporary directory, mode 0700, removed when dropped.
//!
//! The folder is held open ([`Folder`]): the environments read and create
//! their files through that handle, never through its path, and its name
//! has a random part, so no folder can be planted for it in advance. The
//! programs that run there are the host user's, so they can still swap a
//! file inside: [`Folder`] refuses symlinks, FIFOs and files over bound.
//!
//! A host killed with SIGKILL drops nothing, and its folders would stay in
//! `/tmp` for ever, holding a dump of its shell's variables. So the host
//! holds an `flock` on each folder for as long as the folder lives, and the
//! first folder of a kind a host creates sweeps the folders of that kind
//! nobody holds: their host died. Creating a folder and locking it is one
//! step for the hosts that share the directory (they take a lock on the
//! directory itself for it, without waiting: a directory someone else holds
//! locked only means no sweep this time), and a folder whose pid is alive
//! in this PID namespace is never swept, so no host takes another's new
//! folder for a dead one's. Only directories owned by this user are
//! looked at, never followed through a symlink.
//!
//! This module knows folders and locks, nothing of environments.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use envhost_files::Folder;

/// A folder of this host's, removed with everything in it when dropped.
#[derive(Debug)]
pub struct PrivateFolder {
    dir: PathBuf,
    /// Held open and locked for the folder's life: a folder nobody holds
    /// is a dead host's.
    folder: Folder,
}

impl PrivateFolder {
    /// A new folder `envhost-<kind>-<pid>-<random>` in `parent`, mode
    /// 0700. The first one of a `kind` this process creates in `parent`
    /// first removes the folders of that kind left by hosts that died.
    pub fn create(parent: &Path, kind: &str) -> io::Result<PrivateFolder> {
        static SWEPT: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());
        let parent_lock = open_dir(parent).ok().filter(lock);
        if parent_lock.is_some() {
            let mut swept = SWEPT
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = (parent.to_owned(), kind.to_owned());
            if !swept.contains(&key) {
                remove_abandoned(parent, kind);
                swept.push(key);
            }
        }
        for _ in 0..16 {
            let name = envhost_files::untrusted::unpredictable_name(
                &format!("envhost-{kind}-{}-", std::process::id()),
                "",
            )?;
            let dir = parent.join(name);
            match DirBuilder::new().mode(0o700).create(&dir) {
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
                Ok(()) => {}
            }
            let held = Folder::open(&dir).and_then(|folder| {
                if lock(&folder) {
                    Ok(folder)
                } else {
                    Err(io::Error::other("another process holds it locked"))
                }
            });
            return match held {
                Ok(folder) => Ok(PrivateFolder { dir, folder }),
                Err(err) => {
                    let _ = fs::remove_dir(&dir);
                    Err(io::Error::new(
                        err.kind(),
                        format!("cannot lock the new folder {} ({err})", dir.display()),
                    ))
                }
            };
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "16 random names for a private folder in {} were all taken",
                parent.display()
            ),
        ))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The folder, held open: read and create its files through this.
    pub fn folder(&self) -> &Folder {
        &self.folder
    }
}

impl Drop for PrivateFolder {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Removes `envhost-<kind>-<pid>-…` folders in `parent` that are this
/// user's, that nobody holds locked and whose pid is not alive here.
fn remove_abandoned(parent: &Path, kind: &str) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let prefix = format!("envhost-{kind}-");
    let own_pid = std::process::id();
    // SAFETY: geteuid has no preconditions.
    let own_uid = unsafe { nix::libc::geteuid() };
    let can_see_pids = Path::new("/proc/self").exists();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(&prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own_pid || (can_see_pids && Path::new(&format!("/proc/{pid}")).exists()) {
            continue;
        }
        // lstat: a symlink planted under the name is never followed.
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != own_uid {
            continue;
        }
        let Ok(dir) = open_dir(&path) else {
            continue;
        };
        if lock(&dir) {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC | nix::libc::O_NOFOLLOW)
        .open(path)
}

/// An exclusive `flock` on `dir` if nobody holds one; never waits.
fn lock(dir: &impl AsFd) -> bool {
    // SAFETY: flock on a descriptor this function borrows.
    unsafe {
        nix::libc::flock(
            dir.as_fd().as_raw_fd(),
            nix::libc::LOCK_EX | nix::libc::LOCK_NB,
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_private_locked_and_removed_when_dropped() {
        let parent = tempfile::tempdir().expect("tempdir");
        let folder = PrivateFolder::create(parent.path(), "test").expect("create");
        let path = folder.path().to_owned();
        let meta = fs::symlink_metadata(&path).expect("stat");
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert!(!lock(&open_dir(&path).expect("open")), "held while alive");
        drop(folder);
        assert!(!path.exists());
    }

    #[test]
    fn only_the_folders_of_dead_hosts_are_swept() {
        let parent = tempfile::tempdir().expect("tempdir");
        // A pid no process has (above pid_max's ceiling), a live one
        // (ours, but as another host would write it) and a planted symlink.
        let dead = parent.path().join("envhost-sweep-4294967295-0");
        fs::create_dir(&dead).expect("dead");
        fs::write(dead.join("state"), "secret=1").expect("state");
        let live = parent.path().join(format!("envhost-sweep-{}-99", 1));
        fs::create_dir(&live).expect("live");
        let target = tempfile::tempdir().expect("target");
        let planted = parent.path().join("envhost-sweep-4294967294-0");
        std::os::unix::fs::symlink(target.path(), &planted).expect("symlink");
        let other_kind = parent.path().join("envhost-other-4294967295-0");
        fs::create_dir(&other_kind).expect("other kind");

        let folder = PrivateFolder::create(parent.path(), "sweep").expect("create");
        assert!(!dead.exists(), "a dead host's folder is swept");
        assert!(live.exists(), "pid 1 is alive: its folder stays");
        assert!(
            target.path().exists() && planted.exists(),
            "a symlink is not followed"
        );
        assert!(other_kind.exists(), "only its own kind");
        assert!(folder.path().exists());
    }

    #[test]
    fn a_dead_hosts_folder_that_someone_holds_is_kept() {
        let parent = tempfile::tempdir().expect("tempdir");
        let held = parent.path().join("envhost-held-4294967295-0");
        fs::create_dir(&held).expect("held");
        let holder = open_dir(&held).expect("open");
        assert!(lock(&holder));
        let _folder = PrivateFolder::create(parent.path(), "held").expect("create");
        assert!(held.exists(), "a host in another PID namespace may hold it");
    }
}
