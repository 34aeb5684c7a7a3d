//! A project's plugin files (env/, the grants file, the lock) and the staged changes written into
//! place only once every step succeeded.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use envhost_plugin::{self as plugin, GrantsFile, PluginSettings, VerifyChange};
use envhost_registry::{self as registry, Lock, LockedPlugin, Source};

use super::args::ProjectArgs;
use super::error::{DistributionError, Result};

/// A project's plugin files.
pub(super) struct Project {
    pub(super) dir: PathBuf,
    pub(super) env: PathBuf,
    pub(super) lock_path: PathBuf,
    pub(super) settings: PluginSettings,
}

impl Project {
    pub(super) fn open(args: &ProjectArgs) -> Result<Project> {
        let dir = envhost_runtime::resolve_project(&args.project)?;
        let env = dir.join("env");
        Ok(Project {
            lock_path: env.join(registry::LOCK_FILE_NAME),
            env,
            dir,
            settings: args.settings.clone(),
        })
    }

    pub(super) fn wasm(&self, name: &str) -> PathBuf {
        self.env.join(format!("{name}.wasm"))
    }

    /// The lock; a missing file is an empty lock.
    pub(super) fn lock(&self) -> Result<Lock> {
        match std::fs::read_to_string(&self.lock_path) {
            Ok(text) => Lock::parse(&text).map_err(DistributionError::Lock),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Lock::default()),
            Err(source) => Err(DistributionError::Read {
                path: self.lock_path.clone(),
                source,
            }),
        }
    }

    /// The lock, which must exist.
    pub(super) fn existing_lock(&self) -> Result<Lock> {
        if !self.lock_path.exists() {
            return Err(DistributionError::NoLock {
                project: self.dir.clone(),
            });
        }
        self.lock()
    }

    pub(super) fn grants(&self) -> Result<GrantsFile> {
        Ok(plugin::grants_file(&self.dir, &self.settings)?)
    }

    /// The bytes of env/NAME.wasm, if there is such a file.
    pub(super) fn plugin_bytes(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.wasm(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(DistributionError::Read { path, source }),
        }
    }

    /// The sha256 of env/NAME.wasm, if there is such a file.
    pub(super) fn installed(&self, name: &str) -> Result<Option<registry::Sha256>> {
        Ok(self
            .plugin_bytes(name)?
            .map(|bytes| registry::Sha256::of(&bytes)))
    }

    /// Every plugin's name the project has: the lock's and the files' in
    /// env/ (`NAME.wasm`, not `_`-prefixed).
    pub(super) fn plugin_names(&self, lock: &Lock) -> Vec<String> {
        let mut names: Vec<String> = lock.plugins.iter().map(|p| p.name.clone()).collect();
        names.extend(self.unlocked(lock));
        names
    }

    /// The plugins in env/ (`NAME.wasm`, not `_`-prefixed) that the lock
    /// does not name.
    pub(super) fn unlocked(&self, lock: &Lock) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.env) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry
                    .file_name()
                    .to_str()?
                    .strip_suffix(".wasm")?
                    .to_owned();
                (!name.starts_with('_') && entry.path().is_file() && lock.get(&name).is_none())
                    .then_some(name)
            })
            .collect();
        names.sort();
        names
    }

    /// Where a path source is read from: a path in the lock is relative to
    /// the project.
    pub(super) fn source_path(&self, path: &Path) -> PathBuf {
        if path.is_relative() {
            self.dir.join(path)
        } else {
            path.to_owned()
        }
    }

    /// How a locked source is fetched.
    pub(super) fn resolved(&self, locked: &LockedPlugin) -> LockedPlugin {
        let mut resolved = locked.clone();
        if let Source::Path(path) = &locked.source {
            resolved.source = Source::Path(self.source_path(path));
        }
        resolved
    }

    /// `path` relative to the project when it is inside it.
    pub(super) fn shown<'a>(&self, path: &'a Path) -> &'a Path {
        path.strip_prefix(&self.dir).unwrap_or(path)
    }
}

/// The files one command writes, staged as temporary files beside their
/// targets and renamed into place together at the end.
#[derive(Default)]
pub(super) struct Changes {
    pub(super) writes: Vec<(tempfile::NamedTempFile, PathBuf)>,
    pub(super) removals: Vec<PathBuf>,
}

impl Changes {
    pub(super) fn write(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| DistributionError::CreateFolder {
            path: dir.to_owned(),
            source,
        })?;
        let mut temp = tempfile::Builder::new()
            .prefix(".envhost-")
            .tempfile_in(dir)
            .map_err(|source| DistributionError::WriteIn {
                folder: dir.to_owned(),
                source,
            })?;
        let written = |source| DistributionError::Write {
            path: path.to_owned(),
            source,
        };
        temp.write_all(bytes)
            .and_then(|()| temp.as_file().sync_all())
            .map_err(written)?;
        // The file keeps the permissions it had (a grants file kept private
        // stays private); a new one gets the usual 0644.
        let mode = std::fs::metadata(path)
            .map(|m| m.permissions())
            .unwrap_or_else(|_| std::os::unix::fs::PermissionsExt::from_mode(0o644));
        std::fs::set_permissions(temp.path(), mode).map_err(written)?;
        self.writes.push((temp, path.to_owned()));
        Ok(())
    }

    pub(super) fn remove(&mut self, path: &Path) {
        self.removals.push(path.to_owned());
    }

    pub(super) fn commit(self) -> Result<()> {
        for (temp, path) in self.writes {
            if let Err(refused) = temp.persist(&path) {
                return Err(DistributionError::Write {
                    path,
                    source: refused.error,
                });
            }
        }
        for path in self.removals {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(DistributionError::Remove { path, source }),
            }
        }
        Ok(())
    }
}

/// `text` (the grants file's) with the pin of `name` set to `sha256` (or
/// removed), its `verify` changed as `verify` says.
pub(super) fn with_pin(
    grants: &GrantsFile,
    text: &str,
    name: &str,
    sha256: Option<&registry::Sha256>,
    verify: &VerifyChange,
) -> Result<String> {
    let hex = sha256.map(registry::Sha256::hex);
    plugin::with_pin(text, name, hex.as_deref(), verify).map_err(|error| DistributionError::Pin {
        grants: grants.shown.clone(),
        error,
    })
}
