//! The compiled-code cache: a plugin's machine code is compiled once per
//! content and engine, saved, and verified and mapped back in on later
//! starts.
//!
//! Compiling a component with Cranelift takes 60-100 ms for a small Rust
//! plugin and 9-16 s for a Python or JavaScript one; loading the saved code
//! takes well under a millisecond to a few tens. An entry is named by the
//! SHA-256 of the plugin's bytes and a digest of everything in the engine
//! that compiled code depends on (wasmtime's own compatibility hash, and
//! the wasmtime version), so a changed plugin, a changed engine setting or
//! a new envhost simply misses.
//!
//! The host runs an entry's machine code as it is, so an entry is trusted
//! only if it proves where it came from: it starts with an HMAC-SHA256,
//! under a key kept in the cache folder, of the plugin's sha256, the engine
//! digest and the code. An entry renamed onto another plugin's name, made
//! for another plugin, damaged, cut short or written by anyone without the
//! key fails the check, is compiled again and replaced — never run. The
//! entry is never mapped where others could change it under the host (a
//! mapped file cut short kills the process with SIGBUS): it is copied into
//! a sealed memory file (`memfd`, which nobody, the host included, can
//! shrink or write any more), checked there, and wasmtime maps that copy.
//!
//! What the key does not stop: a process of the same user (the agent's
//! bash among them) can read it and forge entries; `docs/security.md` says
//! so. No grant can reach the folder (`grants::Shielded`).
//!
//! Default location: `$XDG_CACHE_HOME/envhost/plugins`, else
//! `~/.cache/envhost/plugins` (the flag `--plugin-cache DIR` overrides it,
//! `--no-plugin-cache` turns it off). The folder is created private to the
//! user (0700) and refused if others could write it; entries and the key
//! are written to a temporary name and renamed (or linked), so a crash
//! never leaves half of one. This module owns the folder and the names in
//! it; it must not validate or run plugins.

use std::fs::{self, File};
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The wasmtime this host was built with, part of every entry's name.
const WASMTIME_VERSION: &str = "48.0.8";

/// What every entry starts with, then its MAC, then the code.
const ENTRY_MAGIC: &[u8; 16] = b"envhost-cwasm-1\n";
const MAC_BYTES: usize = 32;

/// Largest entry read (a Python or JavaScript plugin's code is 35-37 MB).
const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// The key's file in the cache folder, and its length.
const KEY_FILE: &str = "key";
const KEY_BYTES: usize = 32;

/// Why the cache could not be used for one entry (read, written, or
/// trusted), in words that follow "the cache entry…" or stand alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CacheError(String);

impl From<String> for CacheError {
    fn from(message: String) -> Self {
        CacheError(message)
    }
}

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
    /// Loaded from a saved entry that passed its check.
    Hit { path: PathBuf },
    /// Compiled, then saved (or not: `saved` says why). `rejected` says why
    /// the entry that was there was not used.
    Compiled {
        saved: Result<PathBuf, CacheError>,
        rejected: Option<String>,
    },
    /// Compiled; the cache is off.
    CompiledUncached,
    /// Compiled to baseline code, to run at once, while the optimised code
    /// is compiled for the cache in the background (`tiering`). `rejected`
    /// says why the entry that was there was not used.
    Baseline { rejected: Option<String> },
}

/// A compiled component and what it took.
pub struct Compiled {
    pub component: Component,
    pub outcome: CacheOutcome,
    pub took: Duration,
}

/// Why a cache lookup found nothing to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// No entry (or no cache).
    Absent,
    /// An entry that is not to be trusted or cannot be used, and why.
    Rejected(String),
}

type HmacSha256 = Hmac<Sha256>;

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

    /// The component for `bytes`: from the cache when a trustworthy entry
    /// is there, else compiled by `compile` (which returns the serialized
    /// code) and saved. A compile error is the plugin's; cache trouble only
    /// costs time and is reported in the outcome.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        content_sha256: &str,
        compile: impl FnOnce(&[u8]) -> wasmtime::Result<Vec<u8>>,
    ) -> wasmtime::Result<Compiled> {
        let started = Instant::now();
        let Some(path) = self.entry_path(engine, content_sha256) else {
            let component = from_serialized(engine, &compile(bytes)?)?;
            return Ok(Compiled {
                component,
                outcome: CacheOutcome::CompiledUncached,
                took: started.elapsed(),
            });
        };
        let key = match path
            .parent()
            .map_or(Ok(()), private_to_user)
            .and_then(|()| {
                path.parent()
                    .ok_or_else(|| CacheError::from("the cache entry has no folder".to_owned()))
                    .and_then(cache_key)
            }) {
            Ok(key) => key,
            Err(reason) => {
                let component = from_serialized(engine, &compile(bytes)?)?;
                return Ok(Compiled {
                    component,
                    outcome: CacheOutcome::Compiled {
                        saved: Err(format!(
                            "the compiled code was neither read from nor saved to the cache: {reason}"
                        )
                        .into()),
                        rejected: None,
                    },
                    took: started.elapsed(),
                });
            }
        };
        let rejected = match load_entry(engine, &path, &key, content_sha256) {
            Ok(component) => {
                return Ok(Compiled {
                    component,
                    outcome: CacheOutcome::Hit { path },
                    took: started.elapsed(),
                });
            }
            Err(Miss::Absent) => None,
            Err(Miss::Rejected(why)) => Some(why),
        };
        let serialized = compile(bytes)?;
        let component = from_serialized(engine, &serialized)?;
        let saved = save(&serialized, &path, &key, content_sha256, engine);
        Ok(Compiled {
            component,
            outcome: CacheOutcome::Compiled { saved, rejected },
            took: started.elapsed(),
        })
    }

    /// Saves `serialized`, this engine's code for content with this sha256
    /// (compiled in the background): where, or why not.
    pub fn save_compiled(
        &self,
        engine: &Engine,
        content_sha256: &str,
        serialized: &[u8],
    ) -> Result<PathBuf, CacheError> {
        let path = self
            .entry_path(engine, content_sha256)
            .ok_or_else(|| "the cache is off".to_owned())?;
        let dir = path
            .parent()
            .ok_or_else(|| "the cache entry has no folder".to_owned())?;
        private_to_user(dir)?;
        let key = cache_key(dir)?;
        save(serialized, &path, &key, content_sha256, engine)
    }

    /// The saved entry for content with this sha256, checked and loaded,
    /// if there is a trustworthy one; else why not.
    pub fn load_cached(&self, engine: &Engine, content_sha256: &str) -> Result<Compiled, Miss> {
        let started = Instant::now();
        let path = self
            .entry_path(engine, content_sha256)
            .ok_or(Miss::Absent)?;
        let dir = path.parent().ok_or(Miss::Absent)?;
        private_to_user(dir).map_err(|why| Miss::Rejected(why.to_string()))?;
        let key = cache_key(dir).map_err(|why| Miss::Rejected(why.to_string()))?;
        let component = load_entry(engine, &path, &key, content_sha256)?;
        Ok(Compiled {
            component,
            outcome: CacheOutcome::Hit { path },
            took: started.elapsed(),
        })
    }
}

/// The component from code this engine serialized (just now, in this
/// process or in the compiler process this host started).
pub(crate) fn from_serialized(engine: &Engine, serialized: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `serialized` is the output of `Component::serialize` or
    // `Engine::precompile_component` for this engine configuration, made
    // by this host (in-process, or by the copy of this binary it ran to
    // compile), never read from a file.
    unsafe { Component::deserialize(engine, serialized) }
}

/// What the MAC of an entry covers besides the code.
fn mac_for(key: &[u8; KEY_BYTES], content_sha256: &str, engine: &Engine) -> HmacSha256 {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(ENTRY_MAGIC);
    mac.update(content_sha256.as_bytes());
    mac.update(engine_digest(engine).as_bytes());
    mac
}

/// Loads the entry at `path` for `content_sha256`: copied into a sealed
/// memory file, its MAC checked there, then mapped by wasmtime.
fn load_entry(
    engine: &Engine,
    path: &Path,
    key: &[u8; KEY_BYTES],
    content_sha256: &str,
) -> Result<Component, Miss> {
    // Not followed if a symlink, not waited on if a FIFO: a process of the
    // same user can put anything here.
    let opened = match envhost_files::untrusted::open_file(path) {
        Ok(opened) => opened,
        Err(refusal) if refusal.is_missing() => return Err(Miss::Absent),
        Err(refusal) => return Err(rejected(format!("it {}", refusal.reason))),
    };
    let metadata = opened.metadata().clone();
    let mut file = opened.into_file();
    owned_privately(&metadata, path).map_err(rejected)?;
    let size = metadata.len();
    if size > MAX_ENTRY_BYTES || size < (ENTRY_MAGIC.len() + MAC_BYTES) as u64 {
        return Err(rejected(format!("it is {size} bytes long")));
    }
    // The header is read first; the code after it is copied into the
    // sealed file and checked there, against the MAC held in memory.
    let mut header = [0; ENTRY_MAGIC.len()];
    let mut mac_bytes = [0; MAC_BYTES];
    file.read_exact(&mut header)
        .and_then(|()| file.read_exact(&mut mac_bytes))
        .map_err(|err| rejected(format!("it cannot be read: {err}")))?;
    if &header != ENTRY_MAGIC {
        return Err(rejected("it is not an envhost cache entry".to_owned()));
    }
    let code_len = size - (ENTRY_MAGIC.len() + MAC_BYTES) as u64;
    let sealed = SealedCopy::of(&mut file, code_len).map_err(rejected)?;
    let mut mac = mac_for(key, content_sha256, engine);
    sealed
        .each_chunk(|chunk| mac.update(chunk))
        .map_err(rejected)?;
    if mac.verify_slice(&mac_bytes).is_err() {
        return Err(rejected(
            "its authentication code does not match: it was not compiled by this host from this plugin, or it was changed since".to_owned(),
        ));
    }
    sealed
        .component(engine)
        .map_err(|err| rejected(format!("wasmtime refused it: {err}")))
}

/// An entry's code copied into an anonymous memory file and sealed: nobody
/// can write, shrink or grow it any more, so what is checked is what runs,
/// and a change to the entry on disk cannot reach the mapped code.
struct SealedCopy {
    memory: File,
    size: u64,
}

impl SealedCopy {
    /// The next `size` bytes of `file`, copied (in the kernel) and sealed.
    fn of(file: &mut File, size: u64) -> Result<SealedCopy, CacheError> {
        use nix::fcntl::{FcntlArg, SealFlag, fcntl};
        use nix::sys::memfd::{MemFdCreateFlag, memfd_create};
        let memory: File = memfd_create(
            c"envhost-plugin-code",
            MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
        )
        .map(File::from)
        .map_err(|err| format!("no memory file for it: {err}"))?;
        let copied = std::io::copy(&mut file.take(size), &mut &memory)
            .map_err(|err| format!("it cannot be read: {err}"))?;
        if copied != size {
            return Err(
                format!("it changed while it was read ({copied} of {size} bytes of code)").into(),
            );
        }
        fcntl(
            memory.as_raw_fd(),
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK
                    | SealFlag::F_SEAL_GROW
                    | SealFlag::F_SEAL_WRITE
                    | SealFlag::F_SEAL_SEAL,
            ),
        )
        .map_err(|err| format!("its copy cannot be sealed: {err}"))?;
        Ok(SealedCopy { memory, size })
    }

    /// Every byte of the copy, in order, a chunk at a time.
    fn each_chunk(&self, mut f: impl FnMut(&[u8])) -> Result<(), CacheError> {
        use std::os::unix::fs::FileExt;
        let size = usize::try_from(self.size).map_err(|_| "it is too large".to_owned())?;
        let mut buffer = vec![0; (1 << 20).min(size.max(1))];
        let mut offset = 0;
        while offset < size {
            let take = buffer.len().min(size - offset);
            self.memory
                .read_exact_at(&mut buffer[..take], offset as u64)
                .map_err(|err| format!("its copy cannot be read: {err}"))?;
            f(&buffer[..take]);
            offset += take;
        }
        Ok(())
    }

    /// The code, loaded by wasmtime.
    fn component(&self, engine: &Engine) -> wasmtime::Result<Component> {
        let through_proc = PathBuf::from(format!("/proc/self/fd/{}", self.memory.as_raw_fd()));
        // SAFETY: the code's MAC was checked just above, under this user's
        // key, binding it to the plugin's sha256 and this engine: it is
        // the output of `Component::serialize` (or `precompile_component`)
        // of this engine, saved by this host. It was checked in a sealed
        // memory file that nobody can write, shrink or grow any more, and
        // that file is what wasmtime maps (opened again through /proc).
        let mapped = unsafe { Component::deserialize_file(engine, &through_proc) };
        if mapped.is_ok() || Path::new("/proc/self/fd").is_dir() {
            return mapped;
        }
        // Without /proc: the checked code, read into memory, which
        // wasmtime copies.
        let mut code = Vec::with_capacity(usize::try_from(self.size)?);
        self.each_chunk(|chunk| code.extend_from_slice(chunk))
            .map_err(wasmtime::Error::msg)?;
        // SAFETY: as above; these bytes are the checked code.
        unsafe { Component::deserialize(engine, &code) }
    }
}

/// This cache folder's key, made on first use (32 random bytes, private to
/// the user).
fn cache_key(dir: &Path) -> Result<[u8; KEY_BYTES], CacheError> {
    let path = dir.join(KEY_FILE);
    match read_key(&path) {
        Ok(Some(key)) => return Ok(key),
        Ok(None) => {}
        Err(why) => return Err(why),
    }
    create_private_dir(dir)?;
    let mut key = [0; KEY_BYTES];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut key))
        .map_err(|err| format!("no random bytes for the cache key: {err}"))?;
    let (temporary, mut file) = temporary_file(dir, KEY_FILE)
        .map_err(|err| format!("cannot write the cache key {}: {err}", path.display()))?;
    let written = file
        .write_all(&key)
        .and_then(|()| file.sync_all())
        // A link never replaces: two hosts starting at once agree on the
        // first key.
        .and_then(|()| fs::hard_link(&temporary, &path));
    let _ = fs::remove_file(&temporary);
    match written {
        Ok(()) => Ok(key),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => read_key(&path)?
            .ok_or_else(|| format!("{} vanished as it was made", path.display()).into()),
        Err(err) => Err(format!("cannot write the cache key {}: {err}", path.display()).into()),
    }
}

fn read_key(path: &Path) -> Result<Option<[u8; KEY_BYTES]>, CacheError> {
    let opened = match envhost_files::untrusted::open_file(path) {
        Ok(opened) => opened,
        Err(refusal) if refusal.is_missing() => return Ok(None),
        Err(refusal) => {
            return Err(format!(
                "cannot read the cache key: {refusal}; remove it (a new one is made)"
            )
            .into());
        }
    };
    let metadata = opened.metadata().clone();
    let mut file = opened.into_file();
    owned_privately(&metadata, path)?;
    if metadata.mode() & 0o077 != 0 {
        return Err(format!(
            "the cache key {} can be read by other users (mode {:o}); remove it (a new one is made) or use another folder (--plugin-cache DIR)",
            path.display(),
            metadata.mode() & 0o7777
        ).into());
    }
    let mut key = [0; KEY_BYTES];
    if metadata.len() != KEY_BYTES as u64 || file.read_exact(&mut key).is_err() {
        return Err(format!(
            "the cache key {} is damaged; remove it (a new one is made, and old entries are compiled again)",
            path.display()
        ).into());
    }
    Ok(Some(key))
}

/// Refuses a cache folder or entry that another user could have written:
/// whoever can write there could make the host throw its code away or
/// fill the disk. A folder that does not exist yet is fine (it is created
/// private).
pub(super) fn private_to_user(path: &Path) -> Result<(), CacheError> {
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(format!("cannot inspect {}: {err}", path.display()).into()),
    };
    if metadata.file_type().is_symlink() {
        return Err(format!(
            "{} is a symbolic link; the cache folder and its entries must not be",
            path.display()
        )
        .into());
    }
    owned_privately(&metadata, path)
}

/// Owned by this user and writable by nobody else.
fn owned_privately(metadata: &fs::Metadata, path: &Path) -> Result<(), CacheError> {
    let me = nix::unistd::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(format!(
            "{} belongs to another user (uid {}); use a cache folder of your own (--plugin-cache DIR)",
            path.display(),
            metadata.uid()
        ).into());
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!(
            "{} can be written by other users (mode {:o}); make it private (chmod go-w) or use another folder (--plugin-cache DIR)",
            path.display(),
            metadata.mode() & 0o7777
        ).into());
    }
    Ok(())
}

fn create_private_dir(dir: &Path) -> Result<(), CacheError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create the cache folder {}: {e}", dir.display()).into())
}

fn save(
    serialized: &[u8],
    path: &Path,
    key: &[u8; KEY_BYTES],
    content_sha256: &str,
    engine: &Engine,
) -> Result<PathBuf, CacheError> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{} has no parent folder", path.display()))?;
    create_private_dir(dir)?;
    let mut mac = mac_for(key, content_sha256, engine);
    mac.update(serialized);
    let mac = mac.finalize().into_bytes();
    let (temporary, mut file) = temporary_file(
        dir,
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
    )
    .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    let written = (|| {
        file.write_all(ENTRY_MAGIC)?;
        file.write_all(&mac)?;
        file.write_all(serialized)?;
        file.sync_all()
    })();
    if let Err(err) = written.and_then(|()| fs::rename(&temporary, path)) {
        let _ = fs::remove_file(&temporary);
        return Err(format!("cannot write {}: {err}", path.display()).into());
    }
    Ok(path.to_owned())
}

/// A new file in `dir` for writing `name` before it is put in place,
/// created `O_EXCL` (0600) at a name nobody can plant in advance.
fn temporary_file(dir: &Path, name: &str) -> std::io::Result<(PathBuf, File)> {
    envhost_files::untrusted::create_unique(dir, &format!(".{name}."), ".tmp", 0o600)
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

/// A cache entry refused, and why (in the words the load's answer shows).
fn rejected(why: impl std::fmt::Display) -> Miss {
    Miss::Rejected(why.to_string())
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
    /// Another one: the header and an empty custom section.
    const OTHER_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0\0\x02\x01x";

    fn in_process(engine: &Engine) -> impl FnOnce(&[u8]) -> wasmtime::Result<Vec<u8>> + '_ {
        move |bytes| engine.precompile_component(bytes)
    }

    fn load(cache: &CodeCache, engine: &Engine, bytes: &[u8]) -> CacheOutcome {
        cache
            .load_or_compile(engine, bytes, &content_sha256(bytes), in_process(engine))
            .unwrap()
            .outcome
    }

    #[test]
    fn entries_are_saved_then_checked_and_loaded_back() {
        use std::os::unix::fs::PermissionsExt;
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::Directory(dir.path().join("plugins"));
        let CacheOutcome::Compiled {
            saved: Ok(entry),
            rejected: None,
        } = load(&cache, &engine, EMPTY_COMPONENT)
        else {
            panic!("the first load compiles and saves");
        };
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("plugins")), 0o700);
        assert_eq!(mode(&dir.path().join("plugins/key")), 0o600);
        assert_eq!(mode(&entry), 0o600);
        assert_eq!(
            load(&cache, &engine, EMPTY_COMPONENT),
            CacheOutcome::Hit {
                path: entry.clone()
            }
        );
        // An entry others could have rewritten is not trusted.
        fs::set_permissions(&entry, fs::Permissions::from_mode(0o666)).unwrap();
        let CacheOutcome::Compiled {
            rejected: Some(why),
            saved: Ok(_),
        } = load(&cache, &engine, EMPTY_COMPONENT)
        else {
            panic!("a writable entry is rejected");
        };
        assert!(why.contains("can be written by other users"), "{why}");
    }

    #[test]
    fn a_swapped_cut_or_forged_entry_is_rejected_and_replaced() {
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::Directory(dir.path().to_owned());
        load(&cache, &engine, EMPTY_COMPONENT);
        load(&cache, &engine, OTHER_COMPONENT);
        let empty = cache
            .entry_path(&engine, &content_sha256(EMPTY_COMPONENT))
            .unwrap();
        let other = cache
            .entry_path(&engine, &content_sha256(OTHER_COMPONENT))
            .unwrap();
        let rejected = |cache: &CodeCache| match load(cache, &engine, EMPTY_COMPONENT) {
            CacheOutcome::Compiled {
                rejected: Some(why),
                saved: Ok(_),
            } => why,
            other => panic!("expected a rejection: {other:?}"),
        };
        // Another plugin's entry, renamed onto this one's name.
        fs::rename(&other, &empty).unwrap();
        assert!(rejected(&cache).contains("authentication code does not match"));
        // Cut short.
        let whole = fs::read(&empty).unwrap();
        fs::write(&empty, &whole[..whole.len() / 2]).unwrap();
        assert!(rejected(&cache).contains("authentication code does not match"));
        fs::write(&empty, &whole[..10]).unwrap();
        assert!(rejected(&cache).contains("10 bytes long"));
        // Written without the key.
        let mut forged = whole.clone();
        forged[ENTRY_MAGIC.len()] ^= 1;
        fs::write(&empty, &forged).unwrap();
        assert!(rejected(&cache).contains("authentication code does not match"));
        assert!(matches!(
            load(&cache, &engine, EMPTY_COMPONENT),
            CacheOutcome::Hit { .. }
        ));
        // Another key: every entry is compiled again.
        fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        assert!(rejected(&cache).contains("authentication code does not match"));
    }

    #[test]
    fn a_folder_others_can_write_is_neither_read_nor_written() {
        use std::os::unix::fs::PermissionsExt;
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let cache = CodeCache::Directory(dir.path().to_owned());
        let CacheOutcome::Compiled {
            saved: Err(reason), ..
        } = load(&cache, &engine, EMPTY_COMPONENT)
        else {
            panic!("expected a refusal");
        };
        assert!(
            reason.to_string().contains("can be written by other users"),
            "{reason}"
        );
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
