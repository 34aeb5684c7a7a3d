//! Opening the images a command produced with the desktop's viewer, for
//! `envhost repl --open-figures`: `xdg-open`, found on `PATH` once. The
//! viewer is a child of the host, so it is ended with the session (the
//! host leaves no process behind). It must not know how images are made.
//!
//! The opener starts with a cleared environment plus what finding and
//! showing a desktop application needs ([`opener_environment`]): the
//! host's own environment holds the secrets withheld from the
//! environments, and neither `xdg-open` nor the viewer it starts has any
//! use for them. It holds nothing secret, so it is left dumpable (exec
//! would make it dumpable again anyway).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;

use envhost_process::SecretPolicy;

/// The program that opens a file with the desktop's default application.
const OPENER: &str = "xdg-open";

/// The variables the opener is given, when the host has them: where
/// programs are, who and where the user is, the language, and how to reach
/// the desktop (X11, Wayland, the session bus, the XDG folders and the
/// desktop's name, which `xdg-open` chooses its opener by).
const OPENER_VARIABLES: [&str; 19] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DESKTOP_SESSION",
    "KDE_FULL_SESSION",
    "KDE_SESSION_VERSION",
    "GNOME_DESKTOP_SESSION_ID",
    "MATE_DESKTOP_SESSION_ID",
    "BROWSER",
];

/// Prefixes of variables the opener is given as well: the locale's
/// categories and the XDG desktop's (`XDG_RUNTIME_DIR`,
/// `XDG_CURRENT_DESKTOP`, `XDG_DATA_DIRS`, ...).
const OPENER_PREFIXES: [&str; 2] = ["LC_", "XDG_"];

/// The opener's environment, taken from `host`'s variables: those it needs
/// ([`OPENER_VARIABLES`], [`OPENER_PREFIXES`]), never one whose name looks
/// like a secret's, whatever `--pass-env` passes to the environments.
fn opener_environment(
    host: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let secrets = SecretPolicy::default();
    host.into_iter()
        .filter(|(name, _)| {
            name.to_str().is_some_and(|name| {
                (OPENER_VARIABLES.contains(&name)
                    || OPENER_PREFIXES
                        .iter()
                        .any(|prefix| name.starts_with(prefix)))
                    && secrets.allows(name)
            })
        })
        .collect()
}

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
            .env_clear()
            .envs(opener_environment(std::env::vars_os()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opener_gets_the_desktops_variables_and_no_secret() {
        let host = [
            ("PATH", "/usr/bin"),
            ("DISPLAY", ":0"),
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("LC_ALL", "C.UTF-8"),
            ("OPENAI_API_KEY", "sk-1"),
            ("XDG_SESSION_TOKEN", "t"),
            ("PYTHONPATH", "/project"),
            ("LD_PRELOAD", "/tmp/x.so"),
        ]
        .map(|(name, value)| (OsString::from(name), OsString::from(value)));
        let names: Vec<OsString> = opener_environment(host)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, ["PATH", "DISPLAY", "XDG_RUNTIME_DIR", "LC_ALL"]);
    }
}
