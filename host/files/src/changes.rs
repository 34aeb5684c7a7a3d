//! The files a command created or changed, found cheaply: a bounded look
//! at a few directories for entries modified since the command started,
//! never a walk of the whole project.
//!
//! A [`Since`] is taken when a command starts, on the clock the kernel
//! stamps files with; [`Reported::changed_since`] then reads the
//! directories it is given (the command's working directory and the project
//! root) and goes down only into subdirectories whose own entries changed
//! (a directory's modification time moves when a file is created, removed
//! or renamed in it), to a bounded depth and a bounded number of entries. A
//! file changed in place deep inside an untouched directory is not seen:
//! that is the price of never walking a big project. The starting
//! directories are watched for file events from their first look on
//! (`watch`): later looks read only the entries the events name and the
//! subdirectories, not every entry. The host's own writes (figures,
//! saved output, editor writes) are named by whoever made them and
//! [`describe`]d here. It must not know who runs commands or how the
//! answer is sent.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::untrusted::Bound;

mod watch;

use watch::{FolderWatch, Look};

/// Folders never looked into: version control's own churn, and the host's
/// own folder (what the host writes there it names itself).
const SKIPPED: [&str; 2] = [".git", ".envhost"];

/// How deep below a starting directory a changed subdirectory is read.
const MAX_DEPTH: usize = 3;

/// Entries read in one directory; a bigger one is read only this far.
const MAX_ENTRIES_PER_DIRECTORY: usize = 1_000;

/// Entries read in all, per answer.
const MAX_ENTRIES: usize = 4_000;

/// Files named in one answer, at most.
pub const MAX_FILES: usize = 100;

/// A file a command created or changed, as an answer names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducedFile {
    /// The path, relative to the project when it is inside it (with `/`),
    /// else absolute.
    pub path: String,
    /// Its absolute path.
    pub absolute: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its media type, from its name (`image/png`, `text/csv`,
    /// `application/octet-stream` when unknown).
    pub media_type: String,
}

impl ProducedFile {
    /// Its bytes, if it is still a regular file of at most `limit` bytes
    /// (it may have changed since it was described: inside the project no
    /// symlink swapped in on the way is followed, outside none at its
    /// name, and a FIFO is never waited for).
    pub fn read_bounded(&self, limit: u64) -> Option<Vec<u8>> {
        let bound = Bound::new(limit, "a produced file");
        let relative = Path::new(&self.path);
        let project = (!relative.is_absolute())
            .then(|| self.absolute.ancestors().nth(relative.components().count()))
            .flatten();
        match project {
            Some(project) => crate::untrusted::read_beneath(project, relative, bound).ok(),
            None => crate::untrusted::read_file(&self.absolute, bound).ok(),
        }
    }
}

/// When a command started, on the clock the kernel stamps modification
/// times with (coarse: it lags the precise clock by up to a tick, so a
/// file written just after the start is never stamped before it). The
/// price: a file written in the tick before the start may be stamped at
/// or after it (file systems with fine-grained stamps stamp ahead of the
/// coarse clock), and is then named by the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since(SystemTime);

impl Since {
    /// Now.
    pub fn now() -> Since {
        use nix::time::{ClockId, clock_gettime};
        let coarse = clock_gettime(ClockId::CLOCK_REALTIME_COARSE)
            .ok()
            .and_then(|t| {
                let nanos = u32::try_from(t.tv_nsec()).ok()?;
                let secs = u64::try_from(t.tv_sec()).ok()?;
                SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
            });
        // Without the coarse clock: the precise one, a tick earlier.
        Since(coarse.unwrap_or_else(|| SystemTime::now() - Duration::from_millis(10)))
    }

    /// `ago` before now (for a command that started `ago` ago).
    pub fn before_now(ago: Duration) -> Since {
        let now = Since::now().0;
        Since(now.checked_sub(ago).unwrap_or(now))
    }
}

/// The files earlier answers named, with the modification time they had
/// then. A file is stamped with the tick it was written in, and the next
/// command may start in that same tick: without this, a file written at
/// the very end of one command would be named again by the next.
#[derive(Debug, Default)]
pub struct Reported {
    files: HashMap<PathBuf, SystemTime>,
    watch: FolderWatch,
}

impl Reported {
    /// Remembers files their writer names itself (the host's own writes:
    /// an editor write, saved output), so that a look in the same tick
    /// does not name them again.
    pub fn remember(&mut self, paths: &[PathBuf]) {
        for path in paths {
            if let Ok(modified) = fs::symlink_metadata(path).and_then(|m| m.modified()) {
                self.files.insert(path.clone(), modified);
            }
        }
    }

    /// The regular files inside `project` modified at or after `since`,
    /// in the directories `dirs` (those outside the project are left out)
    /// and the changed subdirectories below them, sorted by path, except
    /// those an earlier answer named unchanged; at most [`MAX_FILES`].
    /// Symlinks are not followed.
    pub fn changed_since(
        &mut self,
        project: &Path,
        dirs: &[PathBuf],
        since: Since,
    ) -> Vec<PathBuf> {
        // Only files stamped in the tick a command started in can be
        // mistaken: older memories are dropped.
        let horizon = since
            .0
            .checked_sub(Duration::from_secs(1))
            .unwrap_or(since.0);
        self.files.retain(|_, modified| *modified >= horizon);
        let mut fresh = Vec::new();
        for (path, modified) in scan(&mut self.watch, project, dirs, since) {
            if self.files.get(&path) != Some(&modified) {
                self.files.insert(path.clone(), modified);
                fresh.push(path);
            }
        }
        fresh.truncate(MAX_FILES);
        fresh
    }
}

/// The regular files modified at or after `since` in `dirs` and their
/// changed subdirectories, with their modification times. A starting
/// directory that `watch` has watched since an earlier look is not read:
/// only the entries its events name, and its subdirectories, are looked at.
fn scan(
    watch: &mut FolderWatch,
    project: &Path,
    dirs: &[PathBuf],
    since: Since,
) -> BTreeMap<PathBuf, SystemTime> {
    let mut starting = Vec::new();
    for dir in dirs {
        if dir.starts_with(project) && !skipped(project, dir) && !starting.contains(dir) {
            starting.push(dir.clone());
        }
    }
    watch.collect(&starting);
    let mut look = Looking {
        since,
        found: BTreeMap::new(),
        queue: VecDeque::new(),
        queued: starting.iter().cloned().collect(),
        budget: MAX_ENTRIES,
    };
    for dir in &starting {
        match watch.look(dir) {
            Look::Entries {
                touched,
                subfolders,
            } => {
                let names = touched
                    .into_iter()
                    .chain(subfolders)
                    .filter(|name| !SKIPPED.iter().any(|s| name == *s))
                    .collect::<BTreeSet<_>>();
                for name in names.into_iter().take(MAX_ENTRIES_PER_DIRECTORY) {
                    look.entry(dir, &name, 0);
                }
            }
            Look::Everything => {
                watch.begin_reading(dir);
                let (subfolders, whole) = look.read(dir, 0);
                watch.finish_reading(dir, subfolders, whole);
            }
        }
    }
    while let Some((dir, depth)) = look.queue.pop_front() {
        look.read(&dir, depth);
    }
    look.found
}

/// One look's progress: what it found, the subdirectories still to read.
struct Looking {
    since: Since,
    found: BTreeMap<PathBuf, SystemTime>,
    queue: VecDeque<(PathBuf, usize)>,
    queued: BTreeSet<PathBuf>,
    budget: usize,
}

impl Looking {
    /// Reads every entry of `dir` (to the bounds); returns the names of
    /// its subdirectories and whether it was read whole.
    fn read(&mut self, dir: &Path, depth: usize) -> (BTreeSet<OsString>, bool) {
        let mut subfolders = BTreeSet::new();
        let Ok(entries) = fs::read_dir(dir) else {
            return (subfolders, false);
        };
        for (read, entry) in entries.enumerate() {
            if read == MAX_ENTRIES_PER_DIRECTORY || self.budget == 0 {
                return (subfolders, false);
            }
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            // Skipped by name, before the stat: every project has them.
            if SKIPPED.iter().any(|s| name == *s) {
                continue;
            }
            self.budget -= 1;
            // lstat: a symlink is neither followed nor reported.
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if metadata.is_dir() {
                subfolders.insert(name);
            }
            self.consider(entry.path(), &metadata, depth);
        }
        (subfolders, true)
    }

    /// Looks at the entry `name` of `dir`, which file events named.
    fn entry(&mut self, dir: &Path, name: &OsString, depth: usize) {
        if self.budget == 0 {
            return;
        }
        self.budget -= 1;
        let path = dir.join(name);
        if let Ok(metadata) = fs::symlink_metadata(&path) {
            self.consider(path, &metadata, depth);
        }
    }

    fn consider(&mut self, path: PathBuf, metadata: &fs::Metadata, depth: usize) {
        let Some(modified) = metadata.modified().ok().filter(|t| *t >= self.since.0) else {
            return;
        };
        if metadata.is_file() {
            self.found.insert(path, modified);
        } else if metadata.is_dir() && depth < MAX_DEPTH && self.queued.insert(path.clone()) {
            self.queue.push_back((path, depth + 1));
        }
    }
}

/// Whether `dir` is (inside) one of the folders never looked into.
fn skipped(project: &Path, dir: &Path) -> bool {
    dir.strip_prefix(project).is_ok_and(|inside| {
        inside
            .components()
            .next()
            .is_some_and(|first| SKIPPED.iter().any(|s| first.as_os_str() == *s))
    })
}

/// `path` as an answer names it; `None` when it is not a regular file
/// (any more).
pub fn describe(project: &Path, path: &Path) -> Option<ProducedFile> {
    let metadata = fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    let shown = match path.strip_prefix(project) {
        Ok(inside) => inside
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => path.display().to_string(),
    };
    Some(ProducedFile {
        path: shown,
        absolute: path.to_path_buf(),
        size: metadata.len(),
        media_type: mime_guess::from_path(path)
            .first_raw()
            .unwrap_or("application/octet-stream")
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn finds_new_files_in_changed_folders_and_skips_the_rest() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().to_path_buf();
        fs::create_dir_all(root.join("old/deep")).unwrap();
        fs::write(root.join("old/deep/before.txt"), "x").unwrap();
        fs::write(root.join("before.txt"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let since = Since::now();
        fs::write(root.join("a.csv"), "1,2").unwrap();
        fs::create_dir_all(root.join("out/plots")).unwrap();
        fs::write(root.join("out/plots/p.png"), "png").unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".git/index"), "x").unwrap();
        let mut reported = Reported::default();
        let found = reported.changed_since(&root, std::slice::from_ref(&root), since);
        let names: Vec<_> = found
            .iter()
            .map(|p| describe(&root, p).unwrap())
            .map(|f| (f.path, f.media_type))
            .collect();
        assert_eq!(
            names,
            [
                ("a.csv".to_owned(), "text/csv".to_owned()),
                ("out/plots/p.png".to_owned(), "image/png".to_owned()),
            ]
        );
        // The next command, maybe in the same tick, does not name them again.
        let again = reported.changed_since(&root, std::slice::from_ref(&root), since);
        assert!(again.is_empty(), "{again:?}");
    }

    fn names(root: &Path, found: &[PathBuf]) -> Vec<String> {
        found
            .iter()
            .map(|p| describe(root, p).unwrap().path)
            .collect()
    }

    /// Sets `path`'s modification time an hour ahead: every look that
    /// reads its folder whole names it, a look that follows file events
    /// does not (nothing happened to it).
    fn stamp_ahead(path: &Path) {
        let ahead = SystemTime::now() + Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(ahead)
            .unwrap();
    }

    #[test]
    fn later_looks_follow_file_events_and_still_find_every_kind_of_change() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().to_path_buf();
        fs::write(root.join("edited.txt"), "old").unwrap();
        fs::write(root.join("touched.txt"), "x").unwrap();
        fs::write(root.join("between.txt"), "x").unwrap();
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("quiet.txt"), "x").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        // A second name for quiet.txt, outside the root: a write through
        // it makes no event in the root.
        fs::hard_link(
            root.join("quiet.txt"),
            elsewhere.path().join("other-name.txt"),
        )
        .unwrap();
        let mut reported = Reported::default();
        // The first look reads the root whole, and watches it from then on.
        reported.changed_since(&root, std::slice::from_ref(&root), Since::now());
        // Written between two commands: an event, but before the command.
        fs::write(root.join("between.txt"), "y").unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let since = Since::now();
        fs::write(root.join("new.txt"), "x").unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(root.join("edited.txt"))
            .unwrap()
            .write_all(b" and new")
            .unwrap();
        fs::File::options()
            .write(true)
            .open(root.join("touched.txt"))
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        fs::write(root.join("sub/inside.txt"), "x").unwrap();
        fs::create_dir_all(root.join("fresh/deeper")).unwrap();
        fs::write(root.join("fresh/deeper/made.txt"), "x").unwrap();
        // The host's own folder, made during the command: never looked into.
        fs::create_dir_all(root.join(".envhost/figures")).unwrap();
        fs::write(root.join(".envhost/figures/f.png"), "png").unwrap();
        // Changed through its other name: only a whole read would see it.
        fs::write(elsewhere.path().join("other-name.txt"), "changed").unwrap();
        // Written elsewhere during the command, then moved in.
        fs::write(elsewhere.path().join("moved.txt"), "x").unwrap();
        fs::rename(elsewhere.path().join("moved.txt"), root.join("moved.txt")).unwrap();
        let found = reported.changed_since(&root, std::slice::from_ref(&root), since);
        assert_eq!(
            names(&root, &found),
            [
                "edited.txt",
                "fresh/deeper/made.txt",
                "moved.txt",
                "new.txt",
                "sub/inside.txt",
                "touched.txt"
            ],
            "quiet.txt, changed through a name outside the root, would be named by a whole read"
        );
    }

    #[test]
    fn a_watched_folder_removed_and_made_again_is_read_whole() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().to_path_buf();
        let work = root.join("work");
        fs::create_dir_all(&work).unwrap();
        let mut reported = Reported::default();
        let dirs = [work.clone(), root.clone()];
        reported.changed_since(&root, &dirs, Since::now());
        reported.changed_since(&root, &dirs, Since::now());
        let since = Since::now();
        fs::remove_dir_all(&work).unwrap();
        fs::create_dir_all(&work).unwrap();
        fs::write(work.join("again.txt"), "x").unwrap();
        stamp_ahead(&work.join("again.txt"));
        let found = reported.changed_since(&root, &dirs, since);
        assert_eq!(names(&root, &found), ["work/again.txt"]);
        // A new working directory is read whole the first time.
        let other = root.join("other");
        fs::create_dir_all(&other).unwrap();
        fs::write(other.join("there.txt"), "x").unwrap();
        stamp_ahead(&other.join("there.txt"));
        let found = reported.changed_since(&root, &[other, root.clone()], since);
        assert_eq!(names(&root, &found), ["other/there.txt"]);
    }

    #[test]
    fn files_named_by_their_writer_are_not_named_again() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().to_path_buf();
        let since = Since::now();
        fs::write(root.join("edited.py"), "x = 1\n").unwrap();
        let mut reported = Reported::default();
        reported.remember(&[root.join("edited.py")]);
        let found = reported.changed_since(&root, std::slice::from_ref(&root), since);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_produced_file_is_read_without_following_a_folder_swapped_for_a_link() {
        let project = tempfile::tempdir().unwrap();
        let root = project.path().canonicalize().unwrap();
        fs::create_dir(root.join("out")).unwrap();
        fs::write(root.join("out/plot.png"), "png").unwrap();
        let produced = describe(&root, &root.join("out/plot.png")).unwrap();
        assert_eq!(produced.read_bounded(10).unwrap(), b"png");
        assert!(produced.read_bounded(2).is_none(), "over its bound");
        let elsewhere = tempfile::tempdir().unwrap();
        fs::write(elsewhere.path().join("plot.png"), "secret").unwrap();
        fs::remove_dir_all(root.join("out")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), root.join("out")).unwrap();
        assert!(produced.read_bounded(10).is_none());
    }

    #[test]
    fn folders_outside_the_project_are_not_read() {
        let project = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let since = Since::now();
        fs::write(elsewhere.path().join("x.txt"), "x").unwrap();
        let found = Reported::default().changed_since(
            project.path(),
            &[elsewhere.path().to_path_buf(), project.path().join(".git")],
            since,
        );
        assert!(found.is_empty(), "{found:?}");
    }
}
