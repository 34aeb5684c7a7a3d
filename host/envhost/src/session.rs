//! The session recorder: each environment's recoverable state on disk, so
//! that a host started again with `--resume` goes on where a killed one
//! stopped.
//!
//! It owns `<project>/.envhost/session/`: one file per environment
//! (`bash.json`, …), each written whole (a temporary file beside it,
//! flushed to disk, renamed over it), so that a kill at any instant leaves
//! the state before or after a command, never a torn file. The folder is
//! not flushed after the rename (that would double the cost of a write):
//! after a power loss the rename may be undone, which leaves the state
//! before the command, whole. The folder is 0700 and the files 0600 (secrets in variables are
//! stored too). Every file carries the session's identity (the envhost
//! version, the project, the plugins' hashes): a state from another
//! project or another build is refused with a sentence that says why, as
//! is a corrupted one, and the host then starts fresh.
//!
//! A state it cannot write (a full disk, a read-only folder) is refused in
//! a sentence that says why and what to do; the orchestrator tells the
//! agent and hands the state again after the next answer.
//!
//! It must not know what an environment's state holds: that is each
//! environment's own format, carried as a string.

use std::collections::BTreeMap;
use std::fs::{self, DirBuilder};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use envhost_core::StateKeeper;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a saved state must match to be restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub envhost: String,
    pub project: PathBuf,
    /// Plugin name → sha256 of its file.
    pub plugins: BTreeMap<String, String>,
}

impl Identity {
    pub fn new(project: &Path) -> Self {
        Identity {
            envhost: env!("CARGO_PKG_VERSION").to_owned(),
            project: project.to_path_buf(),
            plugins: BTreeMap::new(),
        }
    }

    /// Adds the plugin `name` loaded from `file`.
    pub fn add_plugin(&mut self, name: &str, file: &Path) {
        let hash = match fs::read(file) {
            Ok(bytes) => format!("{:x}", Sha256::digest(&bytes)),
            Err(err) => format!("unreadable: {err}"),
        };
        self.plugins.insert(name.to_owned(), hash);
    }

    /// Why a state saved under `saved` does not belong here, if it does not.
    fn mismatch(&self, saved: &Identity) -> Option<String> {
        if saved.project != self.project {
            return Some(format!(
                "it belongs to the project {}, not {}",
                saved.project.display(),
                self.project.display()
            ));
        }
        if saved.envhost != self.envhost {
            return Some(format!(
                "it was saved by envhost {}, and this is envhost {}",
                saved.envhost, self.envhost
            ));
        }
        if saved.plugins != self.plugins {
            let changed: Vec<&str> = saved
                .plugins
                .keys()
                .chain(self.plugins.keys())
                .filter(|name| saved.plugins.get(*name) != self.plugins.get(*name))
                .map(String::as_str)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            return Some(format!(
                "the plugins changed since (added, removed or rebuilt: {})",
                changed.join(", ")
            ));
        }
        None
    }
}

#[derive(Serialize, Deserialize)]
struct StateFile {
    identity: Identity,
    environment: String,
    state: String,
}

/// The session folder of one project.
pub struct SessionStore {
    dir: PathBuf,
    identity: Identity,
}

impl SessionStore {
    pub fn new(identity: Identity) -> Self {
        SessionStore {
            dir: identity.project.join(".envhost").join("session"),
            identity,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every saved environment's state, or why none can be used (a file
    /// that is corrupted or belongs to another project or build: then
    /// nothing is, never a mix).
    pub fn load(&self) -> Result<Vec<(String, String)>, String> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(format!("cannot read {}: {err}", self.dir.display())),
        };
        let mut states = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = fs::read_to_string(&path)
                .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            let file: StateFile = serde_json::from_str(&text).map_err(|err| {
                format!("the saved state {} is corrupted ({err})", path.display())
            })?;
            if let Some(why) = self.identity.mismatch(&file.identity) {
                return Err(format!(
                    "the saved state {} cannot be restored: {why}",
                    path.display()
                ));
            }
            states.push((file.environment, file.state));
        }
        states.sort();
        Ok(states)
    }

    /// Removes every saved state, and temporary files a killed host left
    /// (a fresh session starts).
    pub fn clear(&self) {
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".json") || name.starts_with(".state-") {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }

    /// Removes `environment`'s saved state.
    pub fn forget(&self, environment: &str) {
        let _ = fs::remove_file(self.file(environment));
    }

    /// Creates the folder (0700, ignored by git like the output folder)
    /// if it is not there.
    pub fn prepare(&self) -> io::Result<()> {
        if let Some(parent) = self.dir.parent() {
            fs::create_dir_all(parent)?;
            refuse_symlink(parent)?;
        }
        let created = DirBuilder::new().mode(0o700).create(&self.dir);
        // A project may hold a symlink here to make the host write (and
        // chmod) somewhere else: only a real folder is used.
        refuse_symlink(&self.dir)?;
        match created {
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))?
            }
            other => other?,
        }
        let ignore = self.dir.join(".gitignore");
        if !ignore.exists() {
            // Best effort: the session works without it, git just shows it.
            let _ = fs::write(&ignore, "# envhost's saved session state\n*\n");
        }
        Ok(())
    }

    fn file(&self, environment: &str) -> PathBuf {
        self.dir.join(format!("{environment}.json"))
    }

    fn write(&self, environment: &str, state: &str) -> io::Result<()> {
        let content = serde_json::to_vec(&StateFile {
            identity: self.identity.clone(),
            environment: environment.to_owned(),
            state: state.to_owned(),
        })
        .map_err(io::Error::other)?;
        // tempfile creates it 0600.
        let mut temporary = tempfile::Builder::new()
            .prefix(".state-")
            .tempfile_in(&self.dir)?;
        temporary.write_all(&content)?;
        temporary.as_file().sync_all()?;
        temporary
            .persist(self.file(environment))
            .map_err(|err| err.error)?;
        Ok(())
    }
}

fn refuse_symlink(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a folder (a symlink or a file); remove it to record the session",
            path.display()
        )));
    }
    Ok(())
}

impl StateKeeper for SessionStore {
    /// Fails in a sentence that says why and what to do: the orchestrator
    /// shows it to the agent (once) and on the screen.
    fn keep(&self, environment: &str, state: &str) -> Result<(), String> {
        self.write(environment, state).map_err(|err| {
            let remedy = match err.kind() {
                io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                    "; free some space on that disk"
                }
                io::ErrorKind::ReadOnlyFilesystem => {
                    "; the folder is on a read-only file system: make it writable"
                }
                io::ErrorKind::PermissionDenied => "; make the folder writable for envhost",
                _ => "",
            };
            format!(
                "cannot save {environment}'s state in {} ({}){remedy}",
                self.dir.display(),
                system_words(&err)
            )
        })
    }
}

/// The system's words for `err` (`No space left on device (os error
/// 28)`), without the name of the temporary file that tempfile appends
/// (` at path "…/.state-XXXX"`): it is gone by the time anyone reads this.
fn system_words(err: &io::Error) -> String {
    let words = err.to_string();
    match words.find(" at path \"") {
        Some(end) => words[..end].to_owned(),
        None => words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_round_trips_and_another_project_is_refused() {
        let project = tempfile::tempdir().unwrap();
        let store = SessionStore::new(Identity::new(project.path()));
        store.prepare().unwrap();
        store.keep("bash", "{\"x\":1}").unwrap();
        let mode = fs::metadata(store.file("bash"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            store.load().unwrap(),
            [("bash".to_owned(), "{\"x\":1}".to_owned())]
        );
        let elsewhere = SessionStore {
            dir: store.dir.clone(),
            identity: Identity::new(Path::new("/elsewhere")),
        };
        let refusal = elsewhere.load().unwrap_err();
        assert!(refusal.contains("belongs to the project"), "{refusal}");
    }

    /// A keeper that fails on demand: its folder is taken away. The refusal
    /// names the environment, the folder and the system's words, not the
    /// temporary file tempfile named (it never existed); and once the
    /// folder is back, the same state is kept.
    #[test]
    fn a_state_that_cannot_be_written_is_refused_in_words_that_name_the_folder() {
        let project = tempfile::tempdir().unwrap();
        let store = SessionStore::new(Identity::new(project.path()));
        store.prepare().unwrap();
        fs::remove_dir_all(store.dir()).unwrap();

        let refusal = store.keep("bash", "{\"x\":1}").unwrap_err();
        assert!(
            refusal.starts_with(&format!(
                "cannot save bash's state in {} (",
                store.dir().display()
            )),
            "{refusal}"
        );
        assert!(!refusal.contains(".state-"), "{refusal}");
        assert!(!refusal.contains(" at path "), "{refusal}");
        assert!(refusal.ends_with("(os error 2))"), "{refusal}");

        store.prepare().unwrap();
        store.keep("bash", "{\"x\":1}").unwrap();
        assert_eq!(
            store.load().unwrap(),
            [("bash".to_owned(), "{\"x\":1}".to_owned())]
        );
    }

    #[test]
    fn the_system_words_leave_out_the_temporary_files_name() {
        let err = io::Error::new(
            io::ErrorKind::StorageFull,
            "No space left on device (os error 28) at path \"/p/.envhost/session/.state-Ab12\"",
        );
        assert_eq!(system_words(&err), "No space left on device (os error 28)");
        let plain = io::Error::from_raw_os_error(30);
        assert_eq!(system_words(&plain), plain.to_string());
    }
}
