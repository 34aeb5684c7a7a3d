//! The settings a session runs with, resolved once at start-up.
//!
//! The CLI (or a test) builds a [`HostConfig`]; environments take the parts
//! they need when they are created. This module owns the defaults and their
//! documentation, and the parsing of the sizes and durations written in
//! flags and config files; it must not parse command lines or files
//! itself.

use std::path::PathBuf;
use std::time::Duration;

use crate::output::capture::OutputLimits;
use crate::process::secrets::SecretPolicy;

/// Default time a command may run before it is interrupted: two minutes,
/// long enough for most builds and test runs, short enough that an agent
/// stuck on a command that never ends gets control back. Per command, the
/// `timeout_ms` field overrides it.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The project directory: where environments start, where the editor's
    /// paths are relative to, where `env/*.wasm` plugins are found.
    pub project_dir: PathBuf,
    pub default_timeout: Duration,
    pub output: OutputLimits,
    pub secrets: SecretPolicy,
    /// Let the editor open paths outside the project directory (`..`,
    /// absolute paths, symlinks leading out). Off by default.
    pub allow_outside_project: bool,
    /// The Python interpreter for the python environment (a path, or a
    /// command name looked up on `PATH`); `None` means `python3` on `PATH`.
    pub python: Option<PathBuf>,
}

impl HostConfig {
    /// Defaults for a project (which must already be an absolute path).
    pub fn for_project(project_dir: PathBuf) -> Self {
        HostConfig {
            output: OutputLimits::for_project(&project_dir),
            project_dir,
            default_timeout: DEFAULT_TIMEOUT,
            secrets: SecretPolicy::default(),
            allow_outside_project: false,
            python: None,
        }
    }
}

/// Parses a duration as the command line and config files write it
/// (`90s`, `2m`, `500ms`); zero is refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text)
        .map_err(|e| format!("{e}; write a duration such as 90s, 2m or 500ms"))?;
    if duration.is_zero() {
        return Err("the duration must be longer than zero".to_owned());
    }
    Ok(duration)
}

/// Parses `65536`, `64K`, `64KiB`, `1M`, `1MiB`, `1MB` (binary multiples).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size; write e.g. 65536, 128KiB or 1MiB"))?;
    let multiplier: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?}; use K, M or G")),
    };
    match number.checked_mul(multiplier) {
        Some(0) => Err("the size must be larger than zero".to_owned()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("{text:?} is too large")),
    }
}
