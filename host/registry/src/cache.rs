//! The content-addressed blob cache: every manifest, config, component and
//! signature bundle fetched, stored as `DIR/sha256/<hex>` under its own
//! digest, so an install can run offline.
//!
//! Default location `$XDG_CACHE_HOME/envhost/blobs`, else
//! `~/.cache/envhost/blobs`. Entries are re-hashed on every read (a changed
//! entry is deleted and reported as missing, never returned) and written
//! to a temporary name then renamed, so a crash never leaves half an entry.
//! The folder is private to the user (0700). This module owns the folder
//! and the names in it; it does not fetch anything.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::digest::{Hasher, Sha256};
use crate::error::Error;

/// The cache folder (see the module documentation).
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    /// A cache in `dir` (created when something is first stored).
    pub fn new(dir: PathBuf) -> Self {
        BlobCache { dir }
    }

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
        Some(base.join("envhost").join("blobs"))
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the blob with this digest is (or would be) kept.
    pub fn path(&self, digest: &Sha256) -> PathBuf {
        self.dir.join("sha256").join(digest.hex())
    }

    /// The blob's bytes, if the cache holds it intact. An entry whose bytes
    /// no longer match its name, or that is larger than `max_size`, is
    /// removed and treated as missing.
    pub fn get(&self, digest: &Sha256, max_size: u64) -> Result<Option<Vec<u8>>, Error> {
        let path = self.path(digest);
        let file = match fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("reading the cached blob", path, e)),
        };
        let mut bytes = Vec::new();
        file.take(max_size.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("reading the cached blob", &path, e))?;
        let mut hasher = Hasher::default();
        hasher.update(&bytes);
        if bytes.len() as u64 > max_size || hasher.finish() != *digest {
            // A damaged entry is worth nothing; the next fetch replaces it.
            let _ = fs::remove_file(&path);
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// Stores bytes the caller has verified against `digest`.
    pub fn put(&self, digest: &Sha256, bytes: &[u8]) -> Result<(), Error> {
        debug_assert_eq!(Sha256::of(bytes), *digest);
        let dir = self.dir.join("sha256");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io("creating the blob cache", &dir, e))?;
        let path = self.path(digest);
        if path.is_file() {
            return Ok(());
        }
        let mut temp = tempfile::NamedTempFile::new_in(&dir)
            .map_err(|e| Error::io("writing to the blob cache", &dir, e))?;
        temp.write_all(bytes)
            .and_then(|()| temp.flush())
            .map_err(|e| Error::io("writing to the blob cache", &dir, e))?;
        temp.persist(&path)
            .map_err(|e| Error::io("writing to the blob cache", &path, e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_and_verifies_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path().join("blobs"));
        let digest = Sha256::of(b"component");
        assert_eq!(cache.get(&digest, 100).unwrap(), None);
        cache.put(&digest, b"component").unwrap();
        assert_eq!(
            cache.get(&digest, 100).unwrap().as_deref(),
            Some(&b"component"[..])
        );

        // An entry changed on disk is dropped, not returned.
        fs::write(cache.path(&digest), b"tampered!").unwrap();
        assert_eq!(cache.get(&digest, 100).unwrap(), None);
        assert!(!cache.path(&digest).exists());

        // So is one larger than the caller allows.
        cache.put(&digest, b"component").unwrap();
        assert_eq!(cache.get(&digest, 4).unwrap(), None);
    }
}
