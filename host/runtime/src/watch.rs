//! `--watch`: plugins rebuilt while the host runs, under every front end.
//!
//! Before each command the orchestrator asks the [`Watcher`] to look at
//! `<project>/env/`: one directory listing and one `stat` per `*.wasm`
//! file (size, modification and change times, inode), never a read or a
//! hash while nothing changed. A file whose stamp changed, or a new one, is
//! first hashed: when its bytes are those of the build the watcher last
//! took (loaded, or refused and told), nothing is reloaded — the running
//! instance and its state stay, and only the stamp is updated (a `touch`,
//! a copy of the same build). A file whose bytes changed is loaded through
//! the start-up checks (`plugin::load_changed`: the name rules and the
//! plugin count beside the plugins already loaded, then size, grants and
//! pin, compile or cache, link, instantiate, describe); a build that
//! passes takes the place of the old instance, which is shut down (its
//! state is lost), and that command's answer says so. A build that is
//! refused leaves the old instance running, and the answer says why, in
//! the loader's words — once per build, not at every command. A file
//! removed from env/ leaves its plugin running until the host restarts
//! (the agent may be using it), and the answer says so once.
//!
//! The work per command is bounded, so that a command that touches or
//! rewrites plugin files in a loop costs each answer a bounded time: one
//! wait of at most [`MOST_SETTLING`] for files still being written, at
//! most [`MOST_HASHES`] files ([`MOST_HASHED_BYTES`]) hashed and
//! [`MOST_LOADS`] builds loaded; the rest are said to be pending and taken
//! first at the next commands.
//!
//! A host without `--watch` has no watcher: it pays nothing.
//!
//! It must not know the protocol: it hands back sentences for the answer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use envhost_core::{CancelFlag, LoadedEnvironment, Orchestrator};
use envhost_plugin::{self as plugin, LogSink, PluginFile, PluginSettings};
use envhost_process::OutputLimits;

/// A file modified more recently than this may still be being written: the
/// watcher waits until it has been still this long before loading it.
const SETTLE: Duration = Duration::from_millis(200);

/// The longest one command waits for files that keep changing; then it
/// takes what is there (a torn build is refused, and the next change is
/// tried again).
const MOST_SETTLING: Duration = Duration::from_secs(2);

/// The most changed files hashed before one command; the others wait for
/// the next commands.
const MOST_HASHES: usize = 64;

/// The most bytes hashed before one command (past the first file): the
/// others wait for the next commands.
const MOST_HASHED_BYTES: u64 = 128 << 20;

/// The most builds loaded (compiled, instantiated) before one command; the
/// others wait for the next commands.
const MOST_LOADS: usize = 2;

/// What identifies one build of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
    inode: u64,
    device: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let metadata = fs::metadata(path).ok()?;
        Some(Stamp {
            size: metadata.len(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
            inode: metadata.ino(),
            device: metadata.dev(),
        })
    }
}

/// What the watcher knows of one file in env/.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Known {
    /// The stamp of the build last taken (loaded, refused and told, or
    /// found to hold the same bytes); `None` once the file is gone and the
    /// answer said so.
    stamp: Option<Stamp>,
    /// The sha256 of that build's bytes, when known: a file whose stamp
    /// changes but whose bytes do not is not reloaded.
    sha256: Option<String>,
}

/// Watches `<project>/env/` for a serving host.
pub struct Watcher {
    project: PathBuf,
    folder: PathBuf,
    settings: PluginSettings,
    output_limits: OutputLimits,
    cancel: CancelFlag,
    log: Arc<dyn LogSink>,
    files: BTreeMap<PathBuf, Known>,
    /// The plugins running, by name: the others a new plugin's name and
    /// count are checked against, as at start-up.
    plugins: BTreeSet<String>,
    /// Files still being written after the last command's wait: they are
    /// not waited for again (a file rewritten in a loop would cost every
    /// answer the whole wait), but taken as they are.
    restless: BTreeSet<PathBuf>,
    /// Files left for later by the last command's bounds: taken first at
    /// the next, so that files that keep changing cannot starve them.
    pending: Vec<PathBuf>,
}

impl Watcher {
    /// A watcher of `<project>/env/` that knows the files there now: call
    /// it before the plugins are loaded, so that a change made while they
    /// load is seen at the first command; then tell it each plugin that
    /// start-up registered ([`Watcher::loaded_at_start`]).
    pub fn new(
        project: &Path,
        settings: PluginSettings,
        output_limits: OutputLimits,
        cancel: CancelFlag,
        log: Arc<dyn LogSink>,
    ) -> Watcher {
        let folder = plugin::plugin_dir(project);
        let files = plugin_files(&folder)
            .into_iter()
            .filter_map(|path| {
                let stamp = Stamp::of(&path)?;
                Some((
                    path,
                    Known {
                        stamp: Some(stamp),
                        sha256: None,
                    },
                ))
            })
            .collect();
        Watcher {
            project: project.to_owned(),
            folder,
            settings,
            output_limits,
            cancel,
            log,
            files,
            plugins: BTreeSet::new(),
            restless: BTreeSet::new(),
            pending: Vec::new(),
        }
    }

    /// Start-up registered the plugin `name`, built from `file` whose bytes
    /// hash to `sha256`.
    pub fn loaded_at_start(&mut self, name: &str, file: &Path, sha256: &str) {
        self.plugins.insert(name.to_owned());
        self.files.entry(file.to_owned()).or_default().sha256 = Some(sha256.to_owned());
    }

    /// Looks at env/ and swaps in every plugin rebuilt since the last look,
    /// within the bounds of one command; returns what the next answer must
    /// say (nothing when nothing changed).
    pub fn refresh(&mut self, orchestrator: &Orchestrator) -> Vec<String> {
        let mut said = Vec::new();
        let present = plugin_files(&self.folder);
        let mut changed: Vec<PathBuf> = present
            .iter()
            .filter(|path| {
                let stamp = Stamp::of(path);
                stamp.is_some() && self.files.get(*path).and_then(|known| known.stamp) != stamp
            })
            .cloned()
            .collect();
        let calm: Vec<&PathBuf> = changed
            .iter()
            .filter(|path| !self.restless.contains(*path))
            .collect();
        if !calm.is_empty() {
            settle(&calm);
        }
        self.restless = changed
            .iter()
            .filter(|path| age(path) < SETTLE)
            .cloned()
            .collect();
        // Stable: in name order, those left for later by the last command
        // first.
        changed.sort_by_key(|path| !self.pending.contains(path));
        let mut pending = Vec::new();
        let (mut hashed, mut hashed_bytes, mut loads) = (0, 0, 0);
        for path in changed.drain(..) {
            let Some(stamp) = Stamp::of(&path) else {
                continue;
            };
            let over_bytes = hashed > 0 && hashed_bytes + stamp.size > MOST_HASHED_BYTES;
            if hashed >= MOST_HASHES || over_bytes || loads >= MOST_LOADS {
                pending.push(path);
                continue;
            }
            hashed += 1;
            hashed_bytes += stamp.size.min(self.settings.max_size);
            let sha256 = plugin::file_sha256(&path, &self.settings);
            let known = self.files.entry(path.clone()).or_default();
            let was_present = known.stamp.is_some();
            let same_bytes = sha256.is_some() && sha256 == known.sha256;
            known.stamp = Some(stamp);
            if same_bytes {
                // A touch or a copy of the same build: the instance and
                // its state stay.
                continue;
            }
            known.sha256 = sha256;
            loads += 1;
            said.push(self.load(&path, !was_present, orchestrator));
        }
        if !pending.is_empty() {
            said.push(pending_sentence(&self.project, &pending));
        }
        self.pending = pending;
        for (path, known) in self.files.iter_mut() {
            if known.stamp.is_some() && !present.contains(path) {
                known.stamp = None;
                let name = stem(path);
                if self.plugins.contains(&name) {
                    said.push(format!(
                        "[envhost] {} was removed from disk; {name} keeps running until the host restarts.",
                        shown(&self.project, path)
                    ));
                }
            }
        }
        said
    }

    /// Loads the build at `path` and puts it in place; the sentence for
    /// the answer.
    fn load(&mut self, path: &Path, new: bool, orchestrator: &Orchestrator) -> String {
        let shown = shown(&self.project, path);
        let name = stem(path);
        let running = self.plugins.contains(&name);
        let loaded_plugins: Vec<String> = self.plugins.iter().cloned().collect();
        let loaded = plugin::load_changed(
            &PluginFile {
                path,
                apply_grants: true,
                sharing: orchestrator.environment_names().len().max(1),
            },
            &loaded_plugins,
            &self.project,
            &self.settings,
            &self.output_limits,
            &self.cancel,
            Arc::clone(&self.log),
        );
        let why = if new {
            "new on disk"
        } else {
            "changed on disk"
        };
        let refused = |reason: String| {
            if running {
                format!(
                    "[envhost] {shown} {} but the new build was refused, so the old {name} keeps running: {reason}",
                    if new { "appeared" } else { "changed on disk" }
                )
            } else {
                format!("[envhost] {shown} ({why}) was refused: {reason}")
            }
        };
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(reason) => return refused(reason),
        };
        let LoadedEnvironment {
            name: loaded_name,
            kind,
            environment,
            detail,
        } = loaded.environment;
        match orchestrator.replace(loaded_name, kind, environment, detail) {
            Ok(()) if running => format!(
                "[envhost] reloaded {name} from {shown} ({why}). The old instance was shut down; {name} starts with fresh state."
            ),
            Ok(()) => {
                self.plugins.insert(name.clone());
                format!("[envhost] loaded {name} from {shown} ({why}).")
            }
            Err(err) => refused(err.to_string()),
        }
    }
}

/// The sentence for the changed files left for the next commands.
fn pending_sentence(project: &Path, pending: &[PathBuf]) -> String {
    let mut listed: Vec<String> = pending
        .iter()
        .take(5)
        .map(|path| shown(project, path))
        .collect();
    if pending.len() > listed.len() {
        listed.push(format!("and {} more", pending.len() - listed.len()));
    }
    format!(
        "[envhost] {} more changed plugin file{} in env/ ({}) will be looked at before the next commands (at most {MOST_LOADS} plugins are reloaded before one command).",
        pending.len(),
        if pending.len() == 1 { "" } else { "s" },
        listed.join(", ")
    )
}

/// `path` as the agent reads it: relative to the project, escaped as the
/// loader escapes it (a command may name a file in env/ with line breaks
/// and terminal escapes, to forge a line of the answer).
fn shown(project: &Path, path: &Path) -> String {
    let relative = path
        .strip_prefix(project)
        .unwrap_or(path)
        .display()
        .to_string();
    plugin::shown_file_name(&relative).into_owned()
}

/// The `*.wasm` files of `folder` that the host would load (not `_name`).
fn plugin_files(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(folder) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "wasm")
                && !path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with('_'))
        })
        .collect();
    files.sort();
    files
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Waits until every file of `paths` has been still for [`SETTLE`] (a
/// build being copied in): one wait for all of them, at most
/// [`MOST_SETTLING`] before one command, however many files change and
/// however often.
fn settle(paths: &[&PathBuf]) {
    let began = Instant::now();
    loop {
        let youngest = paths.iter().map(|path| age(path)).min().unwrap_or(SETTLE);
        let waited = began.elapsed();
        if youngest >= SETTLE || waited >= MOST_SETTLING {
            return;
        }
        thread::sleep((SETTLE - youngest).min(MOST_SETTLING - waited));
    }
}

/// How long ago the file at `path` was last modified ([`SETTLE`] when that
/// cannot be told: a file gone, a time in the future).
fn age(path: &Path) -> Duration {
    fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .unwrap_or(SETTLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_changes_with_a_rewrite_in_place_and_a_rename_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kv.wasm");
        fs::write(&path, b"one").unwrap();
        let first = Stamp::of(&path).unwrap();
        assert_eq!(Stamp::of(&path), Some(first), "no change, same stamp");
        // Same size, rewritten in place: the change time moves.
        thread::sleep(Duration::from_millis(20));
        fs::write(&path, b"two").unwrap();
        let second = Stamp::of(&path).unwrap();
        assert_ne!(first, second);
        // Renamed over: another inode.
        let other = dir.path().join("new.wasm");
        fs::write(&other, b"two").unwrap();
        fs::rename(&other, &path).unwrap();
        assert_ne!(Stamp::of(&path).unwrap().inode, second.inode);
    }

    #[test]
    fn private_and_other_files_are_not_watched() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "b.wasm",
            "a.wasm",
            "_private.wasm",
            "notes.txt",
            "envhost.toml",
        ] {
            fs::write(dir.path().join(name), b"x").unwrap();
        }
        let names: Vec<String> = plugin_files(dir.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.wasm", "b.wasm"]);
        assert!(plugin_files(&dir.path().join("absent")).is_empty());
    }
}
