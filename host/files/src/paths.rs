//! Paths the agent (or a client) names, resolved against the project
//! directory.
//!
//! This module owns the rule that the host only touches files inside the
//! project on the agent's behalf: a path that leaves it by `..`, by being
//! absolute, or through a symlink is refused with the reason, unless the
//! host was started with `--allow-outside-project`. It also decides how a path is shown (relative
//! to the project, as the agent wrote it, `./` and `a/../` folded away). It
//! must not read or write file contents.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

/// The project directory and whether paths may leave it.
#[derive(Debug, Clone)]
pub struct ProjectRoot {
    root: PathBuf,
    allow_outside: bool,
}

/// A path the host may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// How the screen and responses name it: relative to the project with
    /// `/` separators, or absolute if it lies outside (when allowed).
    pub display: String,
    /// Where to read and write: symlinks followed, so an edit through a
    /// symlink changes its target and keeps the link.
    pub real: PathBuf,
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// An empty path.
    #[error("no file path given")]
    Empty,
    /// A relative path whose `..` climbs out of the project.
    #[error(
        "{path} leads outside the project ({root}) through `..`; only files inside the project can be used (start envhost with --allow-outside-project to lift this)"
    )]
    DotDotEscape {
        /// The path as written.
        path: String,
        /// The project directory.
        root: String,
    },
    /// An absolute path outside the project.
    #[error(
        "{path} is an absolute path outside the project ({root}); use a path relative to the project (start envhost with --allow-outside-project to lift this)"
    )]
    AbsoluteOutside {
        /// The path as written.
        path: String,
        /// The project directory.
        root: String,
    },
    /// A path inside the project that a symlink leads out of it.
    #[error(
        "{path} goes through a symlink to {target}, outside the project ({root}); only files inside the project can be used (start envhost with --allow-outside-project to lift this)"
    )]
    SymlinkEscape {
        /// The path as written.
        path: String,
        /// Where the symlinks lead.
        target: String,
        /// The project directory.
        root: String,
    },
    /// The path's folders cannot be read to find where it leads.
    #[error("{path} cannot be resolved: {reason}")]
    Unresolvable {
        /// The path as written.
        path: String,
        /// The system's words.
        reason: String,
    },
}

impl ProjectRoot {
    /// `root` must be the canonical project directory.
    pub fn new(root: PathBuf, allow_outside: bool) -> Self {
        ProjectRoot {
            root,
            allow_outside,
        }
    }

    /// The project directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Resolves a path as the agent wrote it. The file need not exist (for
    /// `create`); its nearest existing folder decides where it really is.
    pub fn resolve(&self, text: &str) -> Result<ResolvedPath, PathError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(PathError::Empty);
        }
        let written = Path::new(text);
        let root_text = self.root.display().to_string();
        let lexical = normalize(&self.root.join(written));
        let lexically_inside = lexical.starts_with(&self.root);
        if !lexically_inside && !self.allow_outside {
            return Err(if written.is_absolute() {
                PathError::AbsoluteOutside {
                    path: text.to_owned(),
                    root: root_text,
                }
            } else {
                PathError::DotDotEscape {
                    path: text.to_owned(),
                    root: root_text,
                }
            });
        }
        let real = real_path(&lexical).map_err(|reason| PathError::Unresolvable {
            path: text.to_owned(),
            reason: reason.to_string(),
        })?;
        let really_inside = real.starts_with(&self.root);
        if !really_inside && !self.allow_outside {
            return Err(PathError::SymlinkEscape {
                path: text.to_owned(),
                target: real.display().to_string(),
                root: root_text,
            });
        }
        let display = if let Ok(relative) = lexical.strip_prefix(&self.root) {
            slash_path(relative)
        } else if let Ok(relative) = real.strip_prefix(&self.root) {
            slash_path(relative)
        } else {
            real.display().to_string()
        };
        Ok(ResolvedPath { display, real })
    }
}

fn slash_path(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// Folds `.` and `..` without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The path with every symlink resolved: the canonical form of its deepest
/// existing ancestor, then the parts that do not exist yet.
fn real_path(path: &Path) -> std::io::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(canonical) => {
                let mut real = canonical;
                for part in missing.iter().rev() {
                    real.push(part);
                }
                return Ok(real);
            }
            Err(err) if err.kind() == ErrorKind::NotFound => match existing.file_name() {
                Some(name) => {
                    missing.push(name.to_owned());
                    existing.pop();
                }
                None => return Err(err),
            },
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> (tempfile::TempDir, ProjectRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.py"), "x\n").unwrap();
        (dir, ProjectRoot::new(root, false))
    }

    #[test]
    fn relative_paths_are_folded_and_shown_relative() {
        let (_dir, root) = project();
        let resolved = root.resolve("./src/../src/a.py").unwrap();
        assert_eq!(resolved.display, "src/a.py");
        assert_eq!(resolved.real, root.path().join("src/a.py"));
        let absolute = root.path().join("src/a.py");
        let resolved = root.resolve(absolute.to_str().unwrap()).unwrap();
        assert_eq!(resolved.display, "src/a.py");
        let new = root.resolve("new/dir/file.txt").unwrap();
        assert_eq!(new.display, "new/dir/file.txt");
        assert_eq!(new.real, root.path().join("new/dir/file.txt"));
    }

    #[test]
    fn escapes_are_refused_with_their_reason() {
        let (_dir, root) = project();
        assert!(matches!(
            root.resolve("../outside.txt"),
            Err(PathError::DotDotEscape { .. })
        ));
        assert!(matches!(
            root.resolve("src/../../x"),
            Err(PathError::DotDotEscape { .. })
        ));
        assert!(matches!(
            root.resolve("/etc/hostname"),
            Err(PathError::AbsoluteOutside { .. })
        ));
        std::os::unix::fs::symlink("/etc", root.path().join("etc-link")).unwrap();
        let err = root.resolve("etc-link/hostname").unwrap_err();
        assert!(matches!(err, PathError::SymlinkEscape { .. }), "{err}");
        assert!(err.to_string().contains("--allow-outside-project"));
        assert_eq!(root.resolve("  "), Err(PathError::Empty));
    }

    #[test]
    fn symlinks_inside_the_project_resolve_to_their_target() {
        let (_dir, root) = project();
        std::os::unix::fs::symlink("src/a.py", root.path().join("link.py")).unwrap();
        let resolved = root.resolve("link.py").unwrap();
        assert_eq!(resolved.display, "link.py");
        assert_eq!(resolved.real, root.path().join("src/a.py"));
    }

    #[test]
    fn the_flag_allows_outside_paths() {
        let (_dir, root) = project();
        let open = ProjectRoot::new(root.path().to_path_buf(), true);
        let resolved = open.resolve("/etc/hostname").unwrap();
        assert_eq!(resolved.display, resolved.real.display().to_string());
        assert!(open.resolve("../x").is_ok());
    }
}
