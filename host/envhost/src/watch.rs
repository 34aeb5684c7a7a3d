//! `envhost serve --watch`: plugins rebuilt while the host runs.
//!
//! Before each command the front end asks the [`Watcher`] to look at
//! `<project>/env/`: one directory listing and one `stat` per `*.wasm`
//! file (size, modification and change times, inode), never a read or a
//! hash while nothing changed. A file whose stamp changed, or a new one, is
//! loaded exactly as at start-up (`plugin::load_file`: grants and pin,
//! compile or cache, link, instantiate, describe); a build that passes
//! takes the place of the old instance, which is shut down (its state is
//! lost), and that command's answer says so. A build that is refused
//! leaves the old instance running, and the answer says why — once per
//! build, not at every command. A file removed from env/ leaves its plugin
//! running until the host restarts (the agent may be using it), and the
//! answer says so once.
//!
//! A host without `--watch` has no watcher: it pays nothing.
//!
//! It must not know the protocol: it hands back sentences for the answer.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

use envhost_core::{CancelFlag, LoadedEnvironment, Orchestrator};
use envhost_plugin::{self as plugin, LogSink, PluginFile, PluginSettings};
use envhost_process::OutputLimits;

/// A file modified more recently than this may still be being written: the
/// watcher waits until it has been still this long before loading it.
const SETTLE: Duration = Duration::from_millis(200);

/// The longest the watcher waits for a file that keeps changing; then it
/// loads what is there (a torn build is refused, and the next change is
/// tried again).
const MOST_SETTLING: Duration = Duration::from_secs(2);

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// This build is the one running (or was refused and told: either way
    /// nothing more to do until it changes).
    Current(Stamp),
    /// The file is gone; the answer said so.
    Removed,
}

/// Watches `<project>/env/` for a serving host.
pub struct Watcher {
    project: PathBuf,
    folder: PathBuf,
    settings: PluginSettings,
    output_limits: OutputLimits,
    cancel: CancelFlag,
    log: Arc<dyn LogSink>,
    files: BTreeMap<PathBuf, Seen>,
}

impl Watcher {
    /// A watcher of `<project>/env/` that knows the files there now: call
    /// it before the plugins are loaded, so that a change made while they
    /// load is seen at the first command.
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
            .filter_map(|path| Some((path.clone(), Seen::Current(Stamp::of(&path)?))))
            .collect();
        Watcher {
            project: project.to_owned(),
            folder,
            settings,
            output_limits,
            cancel,
            log,
            files,
        }
    }

    /// Looks at env/ and swaps in every plugin rebuilt since the last look;
    /// returns what the next answer must say (nothing when nothing
    /// changed).
    pub fn refresh(&mut self, orchestrator: &mut Orchestrator) -> Vec<String> {
        let mut said = Vec::new();
        let present = plugin_files(&self.folder);
        for path in &present {
            let Some(stamp) = Stamp::of(path) else {
                continue;
            };
            let known = self.files.get(path).copied();
            if known == Some(Seen::Current(stamp)) {
                continue;
            }
            let stamp = settle(path, stamp);
            self.files.insert(path.clone(), Seen::Current(stamp));
            let new = !matches!(known, Some(Seen::Current(_)));
            said.push(self.load(path, new, orchestrator));
        }
        for (path, seen) in self.files.iter_mut() {
            if *seen != Seen::Removed && !present.contains(path) {
                *seen = Seen::Removed;
                let name = stem(path);
                if orchestrator.environment_names().contains(&name.as_str()) {
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
    fn load(&self, path: &Path, new: bool, orchestrator: &mut Orchestrator) -> String {
        let shown = shown(&self.project, path);
        let name = stem(path);
        let running = orchestrator.environment_names().contains(&name.as_str());
        let loaded = plugin::load_file(
            &PluginFile {
                path,
                apply_grants: true,
                sharing: orchestrator.environment_names().len().max(1),
            },
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
            Ok(()) => format!("[envhost] loaded {name} from {shown} ({why})."),
            Err(err) => refused(err.to_string()),
        }
    }
}

/// `path` as the agent reads it: relative to the project.
fn shown(project: &Path, path: &Path) -> String {
    path.strip_prefix(project)
        .unwrap_or(path)
        .display()
        .to_string()
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

/// Waits until the file at `path` has been still for [`SETTLE`] (a build
/// being copied in), at most [`MOST_SETTLING`]; its stamp then.
fn settle(path: &Path, mut stamp: Stamp) -> Stamp {
    let began = SystemTime::now();
    loop {
        let age = fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok())
            .unwrap_or(SETTLE);
        let waited = SystemTime::now()
            .duration_since(began)
            .unwrap_or(MOST_SETTLING);
        if age >= SETTLE || waited >= MOST_SETTLING {
            return Stamp::of(path).unwrap_or(stamp);
        }
        thread::sleep(SETTLE - age);
        match Stamp::of(path) {
            Some(now) => stamp = now,
            None => return stamp,
        }
    }
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
