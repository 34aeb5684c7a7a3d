//! Which files the project's ignore files leave out of a search: each
//! folder's `.ignore` and `.gitignore`, and the project's
//! `.git/info/exclude`, as git and ripgrep read them (the deepest folder's
//! files decide first; in one folder `.ignore` before `.gitignore` before
//! the exclude file; a `!pattern` brings a path back).
//!
//! The `ignore` crate would read these files itself, with a plain `open`:
//! a FIFO named `.gitignore` would block the search for ever, and a
//! symlink to `/dev/zero` would be read as one endless line. Any command
//! can plant either, so this module reads them as hostile files
//! ([`envhost_files::untrusted`]: nothing followed, nothing that blocks, at
//! most [`IGNORE_FILE_BOUND`]) and tells the walk what to skip; one that
//! cannot be read is left out and named in the search's answer.
//!
//! It owns reading and matching the ignore files, never the walk or the
//! search itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use envhost_files::{Bound, Folder};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The most of one ignore file read.
pub const IGNORE_FILE_BOUND: Bound = Bound::new(1 << 20, "an ignore file");

/// Each folder's ignore files, read once per search.
pub struct IgnoreFiles {
    root: Folder,
    /// By folder: its matchers, in the order they decide.
    read: Mutex<HashMap<PathBuf, Arc<Vec<Gitignore>>>>,
    /// Why ignore files were not read.
    refused: Mutex<Vec<String>>,
}

impl IgnoreFiles {
    /// The ignore files of the project `root`.
    pub fn new(root: Folder) -> IgnoreFiles {
        IgnoreFiles {
            root,
            read: Mutex::new(HashMap::new()),
            refused: Mutex::new(Vec::new()),
        }
    }

    /// Whether `path`, inside the project, is ignored by the ignore files
    /// of the folders above it.
    pub fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut folder = path.parent();
        while let Some(dir) = folder {
            if !dir.starts_with(self.root.path()) {
                break;
            }
            for matcher in self.matchers(dir).iter() {
                match matcher.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            folder = dir.parent();
        }
        false
    }

    /// The sentences saying which ignore files were not read, and why.
    pub fn refused(&self) -> Vec<String> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn matchers(&self, dir: &Path) -> Arc<Vec<Gitignore>> {
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(matchers) = read.get(dir) {
            return Arc::clone(matchers);
        }
        let mut names = vec![dir.join(".ignore"), dir.join(".gitignore")];
        if dir == self.root.path() {
            names.push(dir.join(".git/info/exclude"));
        }
        let matchers: Vec<Gitignore> = names
            .iter()
            .filter_map(|file| self.read_one(dir, file))
            .collect();
        let matchers = Arc::new(matchers);
        read.insert(dir.to_owned(), Arc::clone(&matchers));
        matchers
    }

    /// The matcher of one ignore file, if there is one that can be read.
    fn read_one(&self, dir: &Path, file: &Path) -> Option<Gitignore> {
        let bytes = match self
            .root
            .open_within(file)
            .and_then(|opened| opened.read(IGNORE_FILE_BOUND))
        {
            Ok(bytes) => bytes,
            Err(refusal) if refusal.is_missing() => return None,
            Err(refusal) => {
                self.refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(refusal.to_string());
                return None;
            }
        };
        let mut builder = GitignoreBuilder::new(dir);
        for line in String::from_utf8_lossy(&bytes).lines() {
            // A line that is no valid glob is skipped, as git does.
            let _ = builder.add_line(Some(file.to_owned()), line);
        }
        builder.build().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, root)
    }

    #[test]
    fn deeper_files_decide_first_and_negations_bring_paths_back() {
        let (_dir, root) = project();
        std::fs::create_dir_all(root.join("src/gen")).unwrap();
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::write(root.join(".gitignore"), "*.log\nbuild/\n").unwrap();
        std::fs::write(root.join("src/.gitignore"), "!keep.log\n").unwrap();
        std::fs::write(root.join("src/gen/.ignore"), "*.py\n").unwrap();
        std::fs::write(root.join(".git/info/exclude"), "secret.txt\n").unwrap();
        let files = IgnoreFiles::new(Folder::open(&root).unwrap());
        assert!(files.ignored(&root.join("debug.log"), false));
        assert!(files.ignored(&root.join("build"), true));
        assert!(!files.ignored(&root.join("src/keep.log"), false));
        assert!(files.ignored(&root.join("src/other.log"), false));
        assert!(files.ignored(&root.join("src/gen/made.py"), false));
        assert!(!files.ignored(&root.join("src/app.py"), false));
        assert!(files.ignored(&root.join("secret.txt"), false));
        assert!(files.refused().is_empty());
    }

    #[test]
    fn fifos_and_links_planted_as_ignore_files_are_named_not_read() {
        let (_dir, root) = project();
        nix::unistd::mkfifo(
            &root.join(".gitignore"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join(".ignore")).unwrap();
        let files = IgnoreFiles::new(Folder::open(&root).unwrap());
        assert!(!files.ignored(&root.join("a.txt"), false));
        let refused = files.refused();
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].ends_with(".ignore is a symlink; the host does not follow symlinks where a command could have planted one"), "{refused:?}");
        assert!(
            refused[1].ends_with(".gitignore is a FIFO, not a regular file"),
            "{refused:?}"
        );
    }
}
