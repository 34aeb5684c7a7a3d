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
//! Commands can write in the project, so the folder is reached from the
//! project without following any symlink, and each file in it is read as
//! a hostile one ([`envhost_files::untrusted`]): a symlink, a FIFO, a
//! folder or a file over [`RECORD_BOUND`] is refused with a sentence, never
//! followed, waited on or read whole. Temporary files are created `O_EXCL`
//! at random names.
//!
//! It must not know what an environment's state holds: that is each
//! environment's own format, carried as a string.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use envhost_core::StateKeeper;
use envhost_files::{Bound, FileRefusal, Folder, untrusted};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The most bytes of one session record read back (and written: a bigger
/// state is not saved, and the failure says why).
pub const RECORD_BOUND: Bound = Bound::new(256 << 20, "a session record");

/// The most bytes of a plugin file hashed for the identity.
const PLUGIN_HASH_BOUND: Bound = Bound::new(1 << 30, "a plugin file");

/// The session folder, inside the project.
const FOLDER: &str = ".envhost/session";

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
        let hash = match hash_plugin(file) {
            Ok(hash) => hash,
            Err(refusal) => format!("unreadable: {refusal}"),
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

/// The sha256 of a plugin file, read as a hostile file (not followed, not
/// waited on) and in pieces, at most [`PLUGIN_HASH_BOUND`] bytes.
fn hash_plugin(file: &Path) -> Result<String, FileRefusal> {
    let opened = untrusted::open_file(file)?;
    let too_large = |size| FileRefusal {
        path: file.to_owned(),
        reason: envhost_files::RefusalReason::TooLarge {
            size,
            bound: PLUGIN_HASH_BOUND,
        },
    };
    if opened.metadata().len() > PLUGIN_HASH_BOUND.bytes {
        return Err(too_large(opened.metadata().len()));
    }
    let mut hasher = Sha256::new();
    let mut reader = opened.file().take(PLUGIN_HASH_BOUND.bytes + 1);
    let mut buffer = vec![0; 1 << 16];
    let mut total = 0u64;
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                return Err(FileRefusal {
                    path: file.to_owned(),
                    reason: envhost_files::RefusalReason::Io(err),
                });
            }
        };
        total += read as u64;
        hasher.update(&buffer[..read]);
    }
    if total > PLUGIN_HASH_BOUND.bytes {
        return Err(too_large(total));
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// The session folder of one project.
pub struct SessionStore {
    dir: PathBuf,
    identity: Identity,
}

impl SessionStore {
    pub fn new(identity: Identity) -> Self {
        SessionStore {
            dir: identity.project.join(FOLDER),
            identity,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder, reached from the project without following a symlink;
    /// with `create`, made (0700) if missing.
    fn folder(&self, create: bool) -> Result<Folder, FileRefusal> {
        Folder::beneath(
            &self.identity.project,
            Path::new(FOLDER),
            create.then_some(0o700),
        )
    }

    /// Every saved environment's state, or why none can be used (a file
    /// that is corrupted, belongs to another project or build, or is not a
    /// regular file: then nothing is, never a mix).
    pub fn load(&self) -> Result<Vec<(String, String)>, String> {
        let folder = match self.folder(false) {
            Ok(folder) => folder,
            Err(refusal) if refusal.is_missing() => return Ok(Vec::new()),
            Err(refusal) => return Err(refusal.to_string()),
        };
        let entries = folder
            .entries()
            .map_err(|err| format!("cannot read {}: {err}", self.dir.display()))?;
        let mut states = Vec::new();
        for (name, _) in entries {
            if Path::new(&name).extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let path = folder.join(&name);
            let bytes = folder
                .read(&name, RECORD_BOUND)
                .map_err(|refusal| refusal.to_string())?;
            let file: StateFile = serde_json::from_slice(&bytes).map_err(|err| {
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
    /// (a fresh session starts). A folder that is a symlink is left alone:
    /// nothing is removed where it leads.
    pub fn clear(&self) {
        let Ok(folder) = self.folder(false) else {
            return;
        };
        for (name, stat) in folder.entries().unwrap_or_default() {
            let text = name.to_string_lossy();
            if !(text.ends_with(".json") || text.starts_with(".state-")) {
                continue;
            }
            let is_folder =
                stat.is_some_and(|stat| stat.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR);
            if is_folder {
                // An empty folder where a state goes would block every save.
                let _ = folder.remove_folder(&name);
            } else {
                let _ = folder.remove(&name);
            }
        }
    }

    /// Removes `environment`'s saved state.
    pub fn forget(&self, environment: &str) {
        if let Ok(folder) = self.folder(false) {
            let _ = folder.remove(file_name(environment));
        }
    }

    /// Creates the folder (0700, ignored by git like the output folder)
    /// if it is not there.
    pub fn prepare(&self) -> io::Result<()> {
        // A project may hold a symlink here to make the host write (and
        // chmod) somewhere else: only a real folder is used.
        let folder = self.folder(true).map_err(|refusal| {
            io::Error::other(format!(
                "{} is not a folder (a symlink or a file, or behind one: {}); remove it to record the session",
                self.dir.display(),
                refusal.reason
            ))
        })?;
        folder.set_mode(0o700)?;
        // Best effort: the session works without it, git just shows it.
        if let Ok(mut ignore) = folder.create_new(".gitignore", 0o666) {
            let _ = ignore.write_all(b"# envhost's saved session state\n*\n");
        }
        Ok(())
    }

    fn write(&self, environment: &str, state: &str) -> io::Result<()> {
        let content = serde_json::to_vec(&StateFile {
            identity: self.identity.clone(),
            environment: environment.to_owned(),
            state: state.to_owned(),
        })
        .map_err(io::Error::other)?;
        if content.len() as u64 > RECORD_BOUND.bytes {
            return Err(io::Error::other(format!(
                "the state is {}, more than the {} {} may be",
                untrusted::size_words(content.len() as u64),
                untrusted::size_words(RECORD_BOUND.bytes),
                RECORD_BOUND.what
            )));
        }
        let folder = self
            .folder(false)
            .map_err(|refusal| io::Error::other(refusal.to_string()))?;
        let (temporary, mut file) = folder.create_unique(".state-", ".tmp", 0o600)?;
        let written = file
            .write_all(&content)
            .and_then(|()| file.sync_all())
            .and_then(|()| folder.rename(&temporary, file_name(environment)));
        if written.is_err() {
            let _ = folder.remove(&temporary);
        }
        written
    }
}

/// The record of `environment` in the folder.
fn file_name(environment: &str) -> String {
    format!("{environment}.json")
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

    /// A closed instance's record goes: `--resume` must not reopen it.
    fn forget(&self, environment: &str) {
        SessionStore::forget(self, environment);
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
        let parent = tempfile::tempdir().unwrap();
        let project = parent.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let store = SessionStore::new(Identity::new(&project));
        store.prepare().unwrap();
        store.keep("bash", "{\"x\":1}").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.dir.join("bash.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            store.load().unwrap(),
            [("bash".to_owned(), "{\"x\":1}".to_owned())]
        );
        // The store is found below the project it serves: a project moved
        // elsewhere finds records that name the old place.
        let moved = parent.path().join("moved");
        std::fs::rename(&project, &moved).unwrap();
        let elsewhere = SessionStore::new(Identity::new(&moved));
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
        std::fs::remove_dir_all(store.dir()).unwrap();

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
        assert!(
            refusal.ends_with("does not exist)") || refusal.ends_with("(os error 2))"),
            "{refusal}"
        );

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
