//! The interpreter's recoverable state, for crash-safe sessions.
//!
//! When the session is recorded, the driver writes the variables a command
//! touched (pickled, under a size bound), the names it could not save and
//! why, its imports and its working directory to a private file after the
//! command ([`StateFile`] names it through `ENVHOST_STATE_FILE`, which the
//! driver removes from its environment at start), and says so in its
//! answer. This module reads the file then (and checks, with one `fstat`,
//! that it did change), and turns a kept state back into code the next
//! interpreter runs, and its report into the agent's words.
//!
//! The agent's code shares the interpreter with the driver, so it can put
//! anything at that name: the file is read through the private folder's
//! handle, never followed if it is a symlink, never waited on if it is a
//! FIFO, and never read past [`STATE_BOUND`]; a refusal is kept for the
//! screen ([`StateFile::refused`]).
//!
//! It owns the private folder, the restore code and the words. It must not
//! know where the session is stored, nor talk to the interpreter itself.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use envhost_files::Bound;
use envhost_process::PrivateFolder;
use serde::Deserialize;

/// The state of an interpreter that holds nothing: what is kept after a
/// restart.
pub const EMPTY: &str = r#"{"cwd":null,"imports":[],"unsaved":{},"variables":{}}"#;

/// The most of the driver's state file the host reads (the driver keeps
/// at most 64 MiB of pickled variables, base64 and names around them).
pub const STATE_BOUND: Bound = Bound::new(128 << 20, "python's saved state");

/// The state file's name in the private folder.
const STATE_FILE: &str = "state.json";

/// The private folder (0700) that holds the driver's state file.
pub struct StateFile {
    /// Removed, with the state in it, when the file is dropped.
    dir: PrivateFolder,
    /// What the file was when last read: inode, modification time, size.
    seen: Option<(u64, i64, i64, u64)>,
    /// The driver said it wrote the file, or the file was removed, since
    /// the last look.
    maybe_changed: bool,
    /// Why the last state written could not be read, if it could not.
    refused: Option<String>,
}

impl StateFile {
    pub fn create() -> std::io::Result<StateFile> {
        let dir = PrivateFolder::create(&std::env::temp_dir(), "python")?;
        Ok(StateFile {
            dir,
            seen: None,
            maybe_changed: false,
            refused: None,
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join(STATE_FILE)
    }

    /// Writes `state` to a new file only its owner can read, at a name
    /// nobody can plant in advance; returns its path ([`remove`] it after).
    ///
    /// [`remove`]: StateFile::remove
    pub fn write_restore(&self, state: &str) -> std::io::Result<PathBuf> {
        let folder = self.dir.folder();
        let (name, mut file) = folder.create_unique("restore-", ".json", 0o600)?;
        if let Err(err) = file.write_all(state.as_bytes()) {
            let _ = folder.remove(&name);
            return Err(err);
        }
        Ok(folder.join(name))
    }

    /// Removes a file [`write_restore`](StateFile::write_restore) wrote.
    pub fn remove(&self, path: &Path) {
        if let Some(name) = path.file_name() {
            let _ = self.dir.folder().remove(name);
        }
    }

    /// A fresh interpreter holds nothing: the old file goes.
    pub fn forget(&mut self) {
        let _ = self.dir.folder().remove(STATE_FILE);
        self.maybe_changed = true;
    }

    /// The driver said it wrote the file.
    pub fn written(&mut self) {
        self.maybe_changed = true;
    }

    /// Why the state the driver last wrote could not be read (a file the
    /// agent's code swapped in), until one can.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// The state if the driver wrote a new one since the last call; the
    /// empty state once if the file went (a fresh interpreter). Looks only
    /// when the driver said it wrote, or the file was removed: after most
    /// commands nothing is kept anew and nothing is looked at.
    pub fn changed(&mut self) -> Option<String> {
        if !std::mem::take(&mut self.maybe_changed) {
            return None;
        }
        let opened = match self.dir.folder().open_file(STATE_FILE) {
            Ok(opened) => opened,
            Err(refusal) if refusal.is_missing() => {
                self.refused = None;
                return self.seen.take().map(|_| EMPTY.to_owned());
            }
            Err(refusal) => {
                self.refused = Some(refusal.to_string());
                return None;
            }
        };
        let meta = opened.metadata();
        let now = (meta.ino(), meta.mtime(), meta.mtime_nsec(), meta.len());
        if self.seen == Some(now) {
            return None;
        }
        match opened.read(STATE_BOUND) {
            Ok(bytes) => {
                self.refused = None;
                self.seen = Some(now);
                String::from_utf8(bytes).ok()
            }
            Err(refusal) => {
                self.refused = Some(refusal.to_string());
                None
            }
        }
    }
}

/// What the saved state says (for the words).
#[derive(Deserialize)]
pub struct Kept {
    pub cwd: Option<String>,
    #[serde(default)]
    pub unsaved: std::collections::BTreeMap<String, String>,
}

/// The code that brings a saved state at `path` back into the namespace
/// and prints one JSON line saying what came back.
pub fn restore_code(path: &Path) -> String {
    let path = path
        .to_string_lossy()
        .replace('\\', "\\\\")
        .replace('\'', "\\'");
    format!(
        r#"def __envhost_restore(path):
    import base64, importlib, json, os, pickle
    with open(path) as file:
        state = json.load(file)
    space = globals()
    variables, imports, failed = [], [], []
    if state.get("cwd"):
        try:
            os.chdir(state["cwd"])
        except OSError as err:
            failed.append("the working directory %s (%s)" % (state["cwd"], err.strerror))
    for module, name in state.get("imports", []):
        try:
            space[name] = importlib.import_module(module)
            imports.append(module if name == module else "%s as %s" % (module, name))
        except BaseException as err:
            failed.append("import %s (%s: %s)" % (module, type(err).__name__, err))
    for name, (kind, data) in sorted(state.get("variables", {{}}).items()):
        try:
            space[name] = pickle.loads(base64.b64decode(data))
            variables.append("%s (%s)" % (name, kind))
        except BaseException as err:
            failed.append("%s, a %s (%s: %s)" % (name, kind, type(err).__name__, err))
    print("\n" + json.dumps({{"variables": variables, "imports": imports, "failed": failed}}))
__envhost_restore('{path}')
del __envhost_restore
"#
    )
}

/// What the restore code printed, in the agent's words, with what was
/// never saved.
pub fn describe(kept: &Kept, printed: &str) -> String {
    #[derive(Deserialize)]
    struct Report {
        variables: Vec<String>,
        imports: Vec<String>,
        failed: Vec<String>,
    }
    let report = printed
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str::<Report>(line.trim()).ok());
    let Some(report) = report else {
        return format!("restoring failed; the interpreter said: {}", printed.trim());
    };
    let mut words = format!("restored {} variable(s)", report.variables.len());
    if !report.variables.is_empty() {
        words.push_str(&format!(" ({})", report.variables.join(", ")));
    }
    if !report.imports.is_empty() {
        words.push_str(&format!(", imports: {}", report.imports.join(", ")));
    }
    if let Some(cwd) = &kept.cwd {
        words.push_str(&format!(", the working directory {cwd}"));
    }
    words.push('.');
    if !report.failed.is_empty() {
        words.push_str(&format!(" Not restored: {}.", report.failed.join("; ")));
    }
    if !kept.unsaved.is_empty() {
        let unsaved: Vec<String> = kept
            .unsaved
            .iter()
            .map(|(name, why)| format!("`{name}` ({why})"))
            .collect();
        words.push_str(&format!(" Could not be saved: {}.", unsaved.join("; ")));
    }
    words
}
