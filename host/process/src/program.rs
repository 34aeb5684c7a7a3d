//! Finding a program the way a shell would: a name on `PATH`, or a path.

use std::path::{Path, PathBuf};

/// A name on `PATH`, or an absolute path, to an executable file.
pub fn find_program(program: &str) -> Result<PathBuf, String> {
    let is_executable = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!("{program} is not an executable file"))
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            format!(
                "`{program}` was not found on PATH ({}); install it",
                search.to_string_lossy()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_path_or_refused_with_a_reason() {
        assert!(find_program("sh").is_ok_and(|path| path.is_absolute()));
        let missing = find_program("no-such-program-envhost").expect_err("missing");
        assert!(missing.contains("was not found on PATH"), "{missing}");
        assert!(find_program("/etc/passwd").is_err());
    }
}
