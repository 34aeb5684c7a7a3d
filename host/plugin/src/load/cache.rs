//! The compiled-code cache: a plugin's machine code is compiled once per
//! content and engine, saved, and mapped back in on later starts.
//!
//! Compiling a component with Cranelift takes 60-100 ms for a small Rust
//! plugin and 9-16 s for a Python or JavaScript one; mapping the saved code
//! takes well under a millisecond to a few. An entry is named by the SHA-256
//! of the plugin's bytes and a digest of everything in the engine that
//! compiled code depends on (wasmtime's own compatibility hash, and the
//! wasmtime version), so a changed plugin, a changed engine setting or a new
//! envhost simply misses. wasmtime re-checks compatibility when it loads an
//! entry; an entry it rejects is compiled again and replaced.
//!
//! Default location: `$XDG_CACHE_HOME/envhost/plugins`, else
//! `~/.cache/envhost/plugins` (the flag `--plugin-cache DIR` overrides it,
//! `--no-plugin-cache` turns it off). The folder is created private to the
//! user (0700) and entries are written to a temporary name and renamed, so
//! a crash never leaves half an entry. This module owns the folder and the
//! names in it; it must not validate or run plugins.

use std::fs;
use std::hash::Hasher;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The wasmtime this host was built with, part of every entry's name.
const WASMTIME_VERSION: &str = "48.0.8";

/// The cache, or its absence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeCache {
    /// No cache: every start compiles.
    Disabled,
    /// Compiled code is kept in this folder.
    Directory(PathBuf),
}

/// How a component was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Mapped from a saved entry.
    Hit { path: PathBuf },
    /// Compiled, then saved (or not: `saved` says why).
    Compiled { saved: Result<PathBuf, String> },
    /// Compiled; the cache is off.
    CompiledUncached,
}

/// A compiled component and what it took.
pub struct Compiled {
    pub component: Component,
    pub outcome: CacheOutcome,
    pub took: Duration,
}

impl CodeCache {
    /// The default folder for this user, if one can be found.
    pub fn default_directory() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|home| home.join(".cache"))
            })?;
        Some(base.join("envhost").join("plugins"))
    }

    /// The cache's folder, when there is one.
    pub fn directory(&self) -> Option<PathBuf> {
        match self {
            CodeCache::Disabled => None,
            CodeCache::Directory(dir) => Some(dir.clone()),
        }
    }

    /// The entry for these bytes under this engine, whether or not it exists.
    pub fn entry_path(&self, engine: &Engine, content_sha256: &str) -> Option<PathBuf> {
        match self {
            CodeCache::Disabled => None,
            CodeCache::Directory(dir) => {
                Some(dir.join(format!("{content_sha256}-{}.cwasm", engine_digest(engine))))
            }
        }
    }

    /// Whether compiling these bytes would be a cache hit (for the "first
    /// start: compiling" notice).
    pub fn has_entry(&self, engine: &Engine, content_sha256: &str) -> bool {
        self.entry_path(engine, content_sha256)
            .is_some_and(|path| path.is_file())
    }

    /// The component for `bytes`: from the cache when it is there, else
    /// compiled (and saved). A compile error is the plugin's; cache trouble
    /// only costs time and is reported in the outcome.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        content_sha256: &str,
    ) -> wasmtime::Result<Compiled> {
        let started = Instant::now();
        let Some(path) = self.entry_path(engine, content_sha256) else {
            let component = Component::from_binary(engine, bytes)?;
            return Ok(Compiled {
                component,
                outcome: CacheOutcome::CompiledUncached,
                took: started.elapsed(),
            });
        };
        if let Err(reason) = path.parent().map_or(Ok(()), private_to_user) {
            let component = Component::from_binary(engine, bytes)?;
            return Ok(Compiled {
                component,
                outcome: CacheOutcome::Compiled {
                    saved: Err(format!(
                        "the compiled code was neither read from nor saved to the cache: {reason}"
                    )),
                },
                took: started.elapsed(),
            });
        }
        if let Some(hit) = self.load_cached(engine, content_sha256) {
            return Ok(hit);
        }
        let component = Component::from_binary(engine, bytes)?;
        let saved = save(&component, &path);
        Ok(Compiled {
            component,
            outcome: CacheOutcome::Compiled { saved },
            took: started.elapsed(),
        })
    }
}

impl CodeCache {
    /// The saved entry for content with this sha256, mapped back in, if
    /// there is a trustworthy one; `None` means it must be compiled.
    pub fn load_cached(&self, engine: &Engine, content_sha256: &str) -> Option<Compiled> {
        let started = Instant::now();
        let path = self.entry_path(engine, content_sha256)?;
        path.parent().map_or(Ok(()), private_to_user).ok()?;
        if !path.is_file() || private_to_user(&path).is_err() {
            return None;
        }
        // SAFETY: `deserialize_file` maps machine code and trusts it. The
        // folder and the entry belong to this user and nobody else can
        // write them (checked just above). Entries are only ever written
        // by `save` below, from `Component::serialize` of this engine, into
        // a folder private to the user, under a temporary name renamed into
        // place once complete; the name binds them to the exact plugin
        // bytes and engine. wasmtime also checks the header and engine
        // compatibility and refuses a mismatched entry, which is then
        // recompiled.
        let component = unsafe { Component::deserialize_file(engine, &path) }.ok()?;
        Some(Compiled {
            component,
            outcome: CacheOutcome::Hit { path },
            took: started.elapsed(),
        })
    }
}

/// Refuses a cache folder or entry that another user could have written:
/// whoever can write there can make the host run their machine code. A
/// folder that does not exist yet is fine (`save` creates it private).
pub(super) fn private_to_user(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(format!("cannot inspect {}: {err}", path.display())),
    };
    let me = nix::unistd::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(format!(
            "{} belongs to another user (uid {}); use a cache folder of your own (--plugin-cache DIR)",
            path.display(),
            metadata.uid()
        ));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "{} can be written by other users (mode {:o}); make it private (chmod go-w) or use another folder (--plugin-cache DIR)",
            path.display(),
            metadata.mode() & 0o7777
        ));
    }
    if metadata.file_type().is_symlink() {
        return Err(format!(
            "{} is a symbolic link; cache entries must be plain files",
            path.display()
        ));
    }
    Ok(())
}

fn save(component: &Component, path: &Path) -> Result<PathBuf, String> {
    let serialized = component
        .serialize()
        .map_err(|e| format!("cannot serialise the compiled code: {e}"))?;
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no parent folder", path.display()))?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create the cache folder {}: {e}", dir.display()))?;
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id()
    ));
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(&serialized)?;
            file.sync_all()
        });
    if let Err(err) = written.and_then(|()| fs::rename(&temporary, path)) {
        let _ = fs::remove_file(&temporary);
        return Err(format!("cannot write {}: {err}", path.display()));
    }
    Ok(path.to_owned())
}

/// Hex SHA-256 of a plugin's bytes: its identity in the cache (and what an
/// operator pins).
pub fn content_sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A short digest of what compiled code depends on in this engine.
fn engine_digest(engine: &Engine) -> String {
    struct Sha256Hasher(Sha256);
    impl Hasher for Sha256Hasher {
        fn finish(&self) -> u64 {
            0 // unused: the digest is read with `finalize`
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = Sha256Hasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut hasher);
    hasher.0.update(WASMTIME_VERSION.as_bytes());
    let digest = hasher.0.finalize();
    hex(&digest[..8])
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_is_hex_sha256() {
        assert_eq!(
            content_sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// The smallest valid component: the header and nothing else.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn entries_are_saved_then_mapped_back() {
        use std::os::unix::fs::PermissionsExt;
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::Directory(dir.path().join("plugins"));
        let sha = content_sha256(EMPTY_COMPONENT);
        let first = cache
            .load_or_compile(&engine, EMPTY_COMPONENT, &sha)
            .unwrap();
        let CacheOutcome::Compiled { saved: Ok(entry) } = first.outcome else {
            panic!("the first load compiles and saves: {:?}", first.outcome);
        };
        let folder_mode = fs::metadata(dir.path().join("plugins"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(folder_mode & 0o777, 0o700);
        let second = cache
            .load_or_compile(&engine, EMPTY_COMPONENT, &sha)
            .unwrap();
        assert_eq!(
            second.outcome,
            CacheOutcome::Hit {
                path: entry.clone()
            }
        );
        // An entry others could have rewritten is not trusted.
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o666)).unwrap();
        let third = cache
            .load_or_compile(&engine, EMPTY_COMPONENT, &sha)
            .unwrap();
        assert!(
            matches!(third.outcome, CacheOutcome::Compiled { .. }),
            "{:?}",
            third.outcome
        );
    }

    #[test]
    fn a_folder_others_can_write_is_neither_read_nor_written() {
        use std::os::unix::fs::PermissionsExt;
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let cache = CodeCache::Directory(dir.path().to_owned());
        let sha = content_sha256(EMPTY_COMPONENT);
        let compiled = cache
            .load_or_compile(&engine, EMPTY_COMPONENT, &sha)
            .unwrap();
        let CacheOutcome::Compiled { saved: Err(reason) } = compiled.outcome else {
            panic!("expected a refusal: {:?}", compiled.outcome);
        };
        assert!(reason.contains("can be written by other users"), "{reason}");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing saved"
        );
    }

    #[test]
    fn entry_names_bind_content_and_engine() {
        let engine = Engine::default();
        let cache = CodeCache::Directory(PathBuf::from("/tmp/x"));
        let a = cache.entry_path(&engine, "aaaa").unwrap();
        let b = cache.entry_path(&engine, "bbbb").unwrap();
        assert_ne!(a, b);
        assert_eq!(a, cache.entry_path(&engine, "aaaa").unwrap(), "stable");
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let other = Engine::new(&config).unwrap();
        assert_ne!(
            a,
            cache.entry_path(&other, "aaaa").unwrap(),
            "another engine configuration is another entry"
        );
        assert_eq!(CodeCache::Disabled.entry_path(&engine, "aaaa"), None);
    }
}
