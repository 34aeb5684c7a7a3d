//! Which entries of the folders a look starts from changed since the last
//! look, from the kernel's file events (inotify), so that a look after a
//! command reads only those entries and the subfolders, not every entry of
//! the working directory and the project root (a read of a folder and one
//! `stat` per entry, after every command: 8 µs for a folder of 20 files
//! here, and it grows with the folder).
//!
//! A folder is watched from the first look that reads it whole; every later
//! look trusts the events queued since, which name each entry created,
//! written, closed after writing, moved in or out, removed or touched in
//! it, and keeps a list of its subfolders up to date (a file created inside
//! a subfolder makes no event in the folder above, so the subfolders' own
//! times are still looked at). When the kernel could not keep every event
//! (its queue overflowed), a watched folder went away, or file events are
//! unavailable (the per-user limit on inotify instances or watches was
//! reached), the look reads everything, as it would without this module.
//!
//! What it cannot see: a file changed through a memory mapping whose
//! descriptor is still open when the look comes (the kernel reports
//! memory-mapped writes only when the descriptor is closed), and a file
//! changed through another name it has in another folder (a hard link: the
//! event goes to the folder of the name used). A whole read sees both. It
//! owns the watches and their events; it must not know which entries a
//! look reports.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// What a look must read in one of its starting folders.
pub(super) enum Look {
    /// Every entry: the folder is not watched, or events were lost.
    Everything,
    /// Only these entries, and these subfolders' own times.
    Entries {
        touched: Vec<OsString>,
        subfolders: Vec<OsString>,
    },
}

/// Watches over the folders looks start from (the project root and the
/// working directory).
#[derive(Debug)]
pub(super) struct FolderWatch {
    /// `None` when file events are unavailable.
    inotify: Option<Inotify>,
    watched: HashMap<WatchDescriptor, Watched>,
    by_path: HashMap<PathBuf, WatchDescriptor>,
}

#[derive(Debug)]
struct Watched {
    path: PathBuf,
    /// Read whole since the watch was added: its events can be trusted.
    established: bool,
    subfolders: BTreeSet<OsString>,
    touched: BTreeSet<OsString>,
}

/// Every event that can change what a look finds in a folder, and the end
/// of the folder itself.
fn watched_events() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
}

impl Default for FolderWatch {
    fn default() -> Self {
        FolderWatch {
            inotify: Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok(),
            watched: HashMap::new(),
            by_path: HashMap::new(),
        }
    }
}

impl FolderWatch {
    /// Takes in the events queued since the last look, and stops watching
    /// folders that are no longer starting folders (`keep`).
    pub(super) fn collect(&mut self, keep: &[PathBuf]) {
        let stale: Vec<PathBuf> = self
            .by_path
            .keys()
            .filter(|path| !keep.contains(path))
            .cloned()
            .collect();
        for path in stale {
            self.forget(&path, true);
        }
        loop {
            let Some(read) = self.inotify.as_ref().map(Inotify::read_events) else {
                return;
            };
            let events = match read {
                Ok(events) if !events.is_empty() => events,
                Ok(_) | Err(Errno::EAGAIN) => return,
                Err(Errno::EINTR) => continue,
                Err(_) => {
                    // Cannot be read: look at everything from now on.
                    self.inotify = None;
                    self.watched.clear();
                    self.by_path.clear();
                    return;
                }
            };
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    for watched in self.watched.values_mut() {
                        watched.established = false;
                    }
                    continue;
                }
                let Some(watched) = self.watched.get_mut(&event.wd) else {
                    continue;
                };
                if event.mask.intersects(
                    AddWatchFlags::IN_IGNORED
                        | AddWatchFlags::IN_DELETE_SELF
                        | AddWatchFlags::IN_MOVE_SELF,
                ) {
                    let path = watched.path.clone();
                    let removed = event.mask.contains(AddWatchFlags::IN_IGNORED);
                    self.forget(&path, !removed);
                    continue;
                }
                let Some(name) = event.name else { continue };
                if event.mask.contains(AddWatchFlags::IN_ISDIR) {
                    if event
                        .mask
                        .intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO)
                    {
                        watched.subfolders.insert(name.clone());
                    } else if event
                        .mask
                        .intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM)
                    {
                        watched.subfolders.remove(&name);
                    }
                }
                watched.touched.insert(name);
            }
        }
    }

    /// What to read in `dir` (a starting folder) this time; the events
    /// taken in for it are handed over.
    pub(super) fn look(&mut self, dir: &Path) -> Look {
        let watched = self
            .by_path
            .get(dir)
            .and_then(|wd| self.watched.get_mut(wd));
        match watched {
            Some(watched) if watched.established => Look::Entries {
                touched: std::mem::take(&mut watched.touched).into_iter().collect(),
                subfolders: watched.subfolders.iter().cloned().collect(),
            },
            _ => Look::Everything,
        }
    }

    /// Before `dir` is read whole: watch it (again) from now on, so that
    /// nothing that changes while it is read is missed next time.
    pub(super) fn begin_reading(&mut self, dir: &Path) {
        let Some(inotify) = &self.inotify else {
            return;
        };
        if let Some(wd) = self.by_path.get(dir)
            && let Some(watched) = self.watched.get_mut(wd)
        {
            watched.touched.clear();
            return;
        }
        let Ok(wd) = inotify.add_watch(dir, watched_events()) else {
            return;
        };
        // The kernel gives the same descriptor for a folder watched twice
        // (a path and a symlink to it): one entry per descriptor.
        if let Some(earlier) = self.watched.remove(&wd) {
            self.by_path.remove(&earlier.path);
        }
        self.by_path.insert(dir.to_path_buf(), wd);
        self.watched.insert(
            wd,
            Watched {
                path: dir.to_path_buf(),
                established: false,
                subfolders: BTreeSet::new(),
                touched: BTreeSet::new(),
            },
        );
    }

    /// After `dir` was read whole (`subfolders` are the folders in it): its
    /// later events can be trusted. A folder read only in part (a bound was
    /// reached) is never trusted: its events would not name what was left.
    pub(super) fn finish_reading(
        &mut self,
        dir: &Path,
        subfolders: BTreeSet<OsString>,
        whole: bool,
    ) {
        if let Some(watched) = self
            .by_path
            .get(dir)
            .and_then(|wd| self.watched.get_mut(wd))
        {
            watched.established = whole;
            watched.subfolders = subfolders;
        }
    }

    fn forget(&mut self, path: &Path, remove_watch: bool) {
        let Some(wd) = self.by_path.remove(path) else {
            return;
        };
        self.watched.remove(&wd);
        if remove_watch && let Some(inotify) = &self.inotify {
            let _ = inotify.rm_watch(wd);
        }
    }
}
