//! Remembering each plugin file's sha256 by the file's identity, so that a
//! warm start neither reads nor hashes a file that has not changed.
//!
//! The compiled-code cache is keyed by the sha256 of a plugin's bytes.
//! Hashing a 12-18 MB Python or JavaScript component costs more at every
//! start (reading it in and hashing it: about 30 ms here) than mapping its
//! compiled code back in. Like git's index, this module records, next to
//! the hash, what identifies the file's content on disk without reading it:
//! device, inode, size, modification and status-change times. The status-
//! change time (ctime) moves on every write and cannot be set back by a
//! program, so an unchanged identity means unchanged bytes — except for a
//! change made within the same clock tick as the recording, which is why a
//! record is only trusted if the file had been unchanged for a while before
//! it was hashed (git's "racy" rule).
//!
//! Records live in the private code-cache folder (`files/`), so they are
//! as trustworthy as the compiled code next to them. This module owns that
//! folder; it does not decide what is loaded: the loader still hashes the
//! bytes whenever a plugin is pinned.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::load::cache::{content_sha256, private_to_user};

/// How long a file must have been unchanged when its hash was recorded for
/// the record to be trusted later.
const SETTLED_NS: i128 = 2_000_000_000;

/// Format tag of a record line, so a future format cannot be misread.
const FORMAT: &str = "envhost-file-hash-1";

/// A record is one line of a few numbers and a hash.
const RECORD_BOUND: envhost_files::Bound = envhost_files::Bound::new(4096, "a file-hash record");

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    device: u64,
    inode: u64,
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl FileIdentity {
    /// The identity of the regular file at `path` (not followed if it is
    /// a symlink: the plugin is then refused when it is read).
    pub fn of(path: &Path) -> std::io::Result<FileIdentity> {
        let metadata = fs::symlink_metadata(path)?;
        if !metadata.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        Ok(FileIdentity {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.len(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
            changed_ns: i128::from(metadata.ctime()) * 1_000_000_000
                + i128::from(metadata.ctime_nsec()),
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }
}

/// The records, in `<cache>/files/`.
#[derive(Debug, Clone)]
pub struct FileHashes {
    dir: PathBuf,
}

impl FileHashes {
    /// The records kept with the compiled code in `cache_dir`.
    pub fn in_cache(cache_dir: &Path) -> FileHashes {
        FileHashes {
            dir: cache_dir.join("files"),
        }
    }

    /// The sha256 recorded for `path` if its identity is still `identity`
    /// and the record can be trusted.
    pub fn lookup(&self, path: &Path, identity: &FileIdentity) -> Option<String> {
        let record = self.record_path(path)?;
        private_to_user(&self.dir).ok()?;
        private_to_user(&record).ok()?;
        let bytes = envhost_files::untrusted::read_file(&record, RECORD_BOUND).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [
            format,
            device,
            inode,
            size,
            modified,
            changed,
            recorded,
            sha256,
        ] = fields[..]
        else {
            return None;
        };
        let same = format == FORMAT
            && device.parse() == Ok(identity.device)
            && inode.parse() == Ok(identity.inode)
            && size.parse() == Ok(identity.size)
            && modified.parse() == Ok(identity.modified_ns)
            && changed.parse() == Ok(identity.changed_ns);
        let settled = recorded
            .parse::<i128>()
            .is_ok_and(|recorded| identity.changed_ns + SETTLED_NS <= recorded);
        let well_formed = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        (same && settled && well_formed).then(|| sha256.to_owned())
    }

    /// Records that the file with `identity` (taken before it was read)
    /// hashed to `sha256`. Best effort: a record that cannot be written
    /// only means the next start hashes the file again.
    pub fn record(&self, path: &Path, identity: &FileIdentity, sha256: &str) {
        self.record_at(path, identity, sha256, now_ns());
    }

    fn record_at(&self, path: &Path, identity: &FileIdentity, sha256: &str, recorded_ns: i128) {
        let Some(record) = self.record_path(path) else {
            return;
        };
        let created = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir);
        if created.is_err() || private_to_user(&self.dir).is_err() {
            return;
        }
        let line = format!(
            "{FORMAT} {} {} {} {} {} {recorded_ns} {sha256}\n",
            identity.device,
            identity.inode,
            identity.size,
            identity.modified_ns,
            identity.changed_ns
        );
        let Ok((temporary, mut file)) =
            envhost_files::untrusted::create_unique(&self.dir, ".record.", ".tmp", 0o600)
        else {
            return;
        };
        if file
            .write_all(line.as_bytes())
            .and_then(|()| fs::rename(&temporary, &record))
            .is_err()
        {
            let _ = fs::remove_file(&temporary);
        }
    }

    /// One record per plugin path, named by the hash of the absolute path.
    fn record_path(&self, path: &Path) -> Option<PathBuf> {
        let absolute = fs::canonicalize(path).ok()?;
        let name = content_sha256(absolute.as_os_str().as_encoded_bytes());
        Some(self.dir.join(name))
    }
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i128)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    fn setup() -> (tempfile::TempDir, FileHashes, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let hashes = FileHashes::in_cache(&dir.path().join("cache"));
        let plugin = dir.path().join("timer.wasm");
        fs::write(&plugin, b"abc").unwrap();
        (dir, hashes, plugin)
    }

    #[test]
    fn a_settled_unchanged_file_is_remembered() {
        let (_dir, hashes, plugin) = setup();
        let identity = FileIdentity::of(&plugin).unwrap();
        assert_eq!(
            hashes.lookup(&plugin, &identity),
            None,
            "nothing recorded yet"
        );
        hashes.record_at(&plugin, &identity, SHA, identity.changed_ns + SETTLED_NS);
        assert_eq!(hashes.lookup(&plugin, &identity).as_deref(), Some(SHA));
    }

    #[test]
    fn a_record_made_right_after_a_change_is_not_trusted() {
        let (_dir, hashes, plugin) = setup();
        let identity = FileIdentity::of(&plugin).unwrap();
        hashes.record_at(&plugin, &identity, SHA, identity.changed_ns + 1_000);
        assert_eq!(hashes.lookup(&plugin, &identity), None);
    }

    #[test]
    fn any_change_to_the_file_forgets_the_hash() {
        let (_dir, hashes, plugin) = setup();
        let before = FileIdentity::of(&plugin).unwrap();
        hashes.record_at(&plugin, &before, SHA, before.changed_ns + SETTLED_NS);
        // Same size, same content length: only the times and inode tell.
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&plugin, b"xyz").unwrap();
        let after = FileIdentity::of(&plugin).unwrap();
        assert_ne!(before, after);
        assert_eq!(hashes.lookup(&plugin, &after), None);
        // Replaced by another file (a new inode) with the old times.
        let replacement = plugin.with_extension("new");
        fs::write(&replacement, b"abc").unwrap();
        fs::rename(&replacement, &plugin).unwrap();
        let replaced = FileIdentity::of(&plugin).unwrap();
        assert_eq!(hashes.lookup(&plugin, &replaced), None);
    }

    /// A file replaced after its identity was taken but long before the
    /// record was written (during a slow compile): only the identity
    /// comparison can tell.
    #[test]
    fn a_change_during_hashing_is_still_seen() {
        let (_dir, hashes, plugin) = setup();
        let taken = FileIdentity::of(&plugin).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&plugin, b"new").unwrap();
        let now = FileIdentity::of(&plugin).unwrap();
        let recorded_much_later = now.changed_ns + 100 * SETTLED_NS;
        hashes.record_at(&plugin, &taken, SHA, recorded_much_later);
        assert_eq!(hashes.lookup(&plugin, &now), None);
        assert_eq!(hashes.lookup(&plugin, &taken).as_deref(), Some(SHA));
    }

    #[test]
    fn records_are_private_and_garbage_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, hashes, plugin) = setup();
        let identity = FileIdentity::of(&plugin).unwrap();
        hashes.record_at(&plugin, &identity, SHA, identity.changed_ns + SETTLED_NS);
        let record = hashes.record_path(&plugin).unwrap();
        assert_eq!(
            fs::metadata(&record).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::set_permissions(&record, fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            hashes.lookup(&plugin, &identity),
            None,
            "others could have written it"
        );
        fs::set_permissions(&record, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&record, "not a record").unwrap();
        assert_eq!(hashes.lookup(&plugin, &identity), None);
    }
}
