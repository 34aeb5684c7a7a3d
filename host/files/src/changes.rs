//! The files a command created or changed, found cheaply: a bounded look
//! at a few directories for entries modified since the command started,
//! never a walk of the whole project.
//!
//! A [`Since`] is taken when a command starts, on the clock the kernel
//! stamps files with; [`changed_since`] then reads the directories it is
//! given (the command's working directory and the project root) and goes
//! down only into subdirectories whose own entries changed (a directory's
//! modification time moves when a file is created, removed or renamed in
//! it), to a bounded depth and a bounded number of entries. A file changed
//! in place deep inside an untouched directory is not seen: that is the
//! price of never walking a big project. The host's own writes (figures,
//! saved output, editor writes) are named by whoever made them and
//! [`describe`]d here. It must not know who runs commands or how the
//! answer is sent.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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
    /// (it may have changed since it was described).
    pub fn read_bounded(&self, limit: u64) -> Option<Vec<u8>> {
        read_regular(&self.absolute, limit)
    }
}

/// `path` opened for reading if it is a regular file: a symlink is not
/// followed, and a FIFO swapped in does not block the host (the agent's
/// commands can put either where a file is expected).
pub fn open_regular(path: &Path) -> Option<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The first bytes of a regular file ([`open_regular`]), up to `limit`;
/// `None` when `path` is not one or holds more than `limit` bytes.
pub fn read_regular(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= limit).then_some(bytes)
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
        for (path, modified) in scan(project, dirs, since) {
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
/// changed subdirectories, with their modification times.
fn scan(project: &Path, dirs: &[PathBuf], since: Since) -> BTreeMap<PathBuf, SystemTime> {
    let mut queue: VecDeque<(PathBuf, usize)> = VecDeque::new();
    let mut queued = BTreeSet::new();
    for dir in dirs {
        if dir.starts_with(project) && !skipped(project, dir) && queued.insert(dir.clone()) {
            queue.push_back((dir.clone(), 0));
        }
    }
    let mut found = BTreeMap::new();
    let mut budget = MAX_ENTRIES;
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.take(MAX_ENTRIES_PER_DIRECTORY) {
            if budget == 0 {
                break;
            }
            budget -= 1;
            let Ok(entry) = entry else { continue };
            // Skipped by name, before the stat: every project has them.
            if SKIPPED.iter().any(|s| entry.file_name() == *s) {
                continue;
            }
            // lstat: a symlink is neither followed nor reported.
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            let Some(modified) = metadata.modified().ok().filter(|t| *t >= since.0) else {
                continue;
            };
            let path = entry.path();
            if metadata.is_file() {
                found.insert(path, modified);
            } else if metadata.is_dir() && depth < MAX_DEPTH && queued.insert(path.clone()) {
                queue.push_back((path, depth + 1));
            }
        }
    }
    found
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
