//! Opening the images a command produced with the desktop's viewer, for
//! `envhost repl --open-figures`: `xdg-open`, found on `PATH` once. The
//! viewer is a child of the host, so it is ended with the session (the
//! host leaves no process behind). It must not know how images are made.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;

/// The program that opens a file with the desktop's default application.
const OPENER: &str = "xdg-open";

/// The desktop's viewer, or the sentence that says there is none.
pub struct Viewer {
    program: Option<PathBuf>,
    /// The person was told there is no viewer (told once).
    told: bool,
}

impl Viewer {
    /// `xdg-open` on `PATH`, if it is there.
    pub fn find() -> Viewer {
        let program = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(OPENER))
                .find(|candidate| is_executable(candidate))
        });
        Viewer {
            program,
            told: false,
        }
    }

    /// Opens `path` in the background; a sentence for the person when it
    /// cannot be.
    pub fn open(&mut self, path: &Path) -> Option<String> {
        let Some(program) = &self.program else {
            if self.told {
                return None;
            }
            self.told = true;
            return Some(format!(
                "--open-figures: there is no {OPENER} on PATH (no desktop here?), so images \
                 are not opened; their paths are above."
            ));
        };
        let spawned = Command::new(program)
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(mut child) => {
                // Reaped when it ends; it does not hold up the REPL.
                thread::spawn(move || child.wait());
                None
            }
            Err(err) => Some(format!(
                "--open-figures: {} could not be started: {err}",
                program.display()
            )),
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
