//! Finding a program the way a shell would: a name on `PATH`, or a path.

use std::path::{Path, PathBuf};

/// Why a program cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramNotFound {
    /// A path (it has a `/`) that is not an executable file.
    #[error("{0} is not an executable file")]
    NotExecutable(String),
    /// A name no directory of `PATH` holds as an executable file.
    #[error("`{program}` was not found on PATH ({path}); install it")]
    NotOnPath {
        /// The name looked for.
        program: String,
        /// `PATH` as it was searched.
        path: String,
    },
}

/// A name on `PATH`, or an absolute path, to an executable file.
pub fn find_program(program: &str) -> Result<PathBuf, ProgramNotFound> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if is_executable_file(&path) {
            Ok(path)
        } else {
            Err(ProgramNotFound::NotExecutable(program.to_owned()))
        };
    }
    search_path(program).ok_or_else(|| ProgramNotFound::NotOnPath {
        program: program.to_owned(),
        path: std::env::var_os("PATH")
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
    })
}

/// The host's one rule for finding `name` on `PATH`: the first of its
/// directories that holds an executable file of that name. Only absolute
/// directories count: an empty or relative entry would be resolved against
/// wherever the host happens to run, which may be a hostile project.
pub fn search_path(name: &str) -> Option<PathBuf> {
    search_path_in(name, &std::env::var_os("PATH").unwrap_or_default())
}

/// [`search_path`] with `path_var` as `PATH`.
pub fn search_path_in(name: &str, path_var: &std::ffi::OsStr) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// A regular file (symlinks followed) with an execute bit set.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_path_or_refused_with_a_reason() {
        assert!(find_program("sh").is_ok_and(|path| path.is_absolute()));
        let missing = find_program("no-such-program-envhost").expect_err("missing");
        assert!(
            missing.to_string().contains("was not found on PATH"),
            "{missing}"
        );
        assert!(find_program("/etc/passwd").is_err());
    }

    #[test]
    fn path_search_takes_only_absolute_directories() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("tool");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        let absolute = std::env::join_paths([dir.path()]).unwrap();
        assert_eq!(
            search_path_in("tool", &absolute),
            None,
            "not executable yet"
        );
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(search_path_in("tool", &absolute), Some(program));
        // A relative entry names wherever the host runs (maybe a hostile
        // project): never searched, even when it holds the program.
        let cwd = std::env::current_dir().unwrap();
        let mut relative = PathBuf::new();
        for _ in cwd.components().skip(1) {
            relative.push("..");
        }
        relative.push(dir.path().strip_prefix("/").unwrap());
        assert!(
            relative.join("tool").is_file(),
            "the relative entry leads to it"
        );
        let relative = std::env::join_paths([relative]).unwrap();
        assert_eq!(search_path_in("tool", &relative), None);
    }
}
