//! Which environment variables a child process inherits.
//!
//! Secrets stay out of reach: variables that look like secrets (`*_API_KEY`,
//! `*_SECRET`, `*_TOKEN`, `*_PASSWORD`, `*_CREDENTIAL`) are left out of every
//! environment's variables by default, so an agent cannot read, print or leak
//! them. We also catch the common shapes that list misses
//! (`AWS_SECRET_ACCESS_KEY`, `*_PRIVATE_KEY`, plurals). An operator passes a
//! specific variable through by name (`--pass-env NAME`). This module
//! decides, and takes the secrets out of the copy of the environment the
//! kernel shows in `/proc/<host>/environ` ([`hide_from_proc_environ`]); it
//! never spawns anything.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use nix::libc;

/// Name endings (compared case-insensitively) that mark a secret. A name
/// matches when it equals an ending or ends with `_` + the ending.
const SECRET_ENDINGS: [&str; 13] = [
    "API_KEY",
    "APIKEY",
    "SECRET",
    "SECRETS",
    "TOKEN",
    "TOKENS",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "SECRET_KEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
];

/// Well-known secret variables whose names escape the endings above.
const SECRET_NAMES: [&str; 3] = ["PGPASSWORD", "MYSQL_PWD", "REDISCLI_AUTH"];

/// The operator's choices about secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretPolicy {
    /// Variables passed through even though their names look secret.
    pub pass_through: Vec<String>,
}

impl SecretPolicy {
    /// Withholds secret-looking variables except those named in
    /// `pass_through`.
    pub fn new(pass_through: Vec<String>) -> Self {
        SecretPolicy { pass_through }
    }

    /// True if `name` may be given to a child.
    pub fn allows(&self, name: &str) -> bool {
        !is_secret_name(name) || self.pass_through.iter().any(|p| p == name)
    }

    /// The host's own environment without the secrets, for a child.
    pub fn filtered_environment(&self) -> Vec<(OsString, OsString)> {
        self.filter(std::env::vars_os())
    }

    fn filter(
        &self,
        vars: impl Iterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.filter(|(name, _)| self.allows_os(name)).collect()
    }

    fn allows_os(&self, name: &OsStr) -> bool {
        // A name that is not UTF-8 cannot match our (ASCII) patterns.
        name.to_str().is_none_or(|name| self.allows(name))
    }
}

/// Moves every secret-looking variable out of the block the kernel wrote
/// the environment into at exec, into the process's own copy, and wipes its
/// entry (name and value) in the block. The host reads its variables as
/// before; `/proc/<host>/environ`, which shows that block, no longer shows
/// them. Returns how many were moved.
///
/// That file is the way around the withholding: the kernel lets processes
/// that may not trace the host read it (on this machine's 6.18 kernel any
/// process of the host's user, even with the host not dumpable and without
/// `CAP_SYS_PTRACE`), so `cat /proc/$PPID/environ` in a command printed the
/// keys kept out of its environment.
///
/// # Safety
/// Only while the process has one thread (first thing in `main`): it
/// changes the environment.
pub unsafe fn hide_from_proc_environ() -> usize {
    let Some((start, end)) = exec_environment_block() else {
        return 0;
    };
    let mut moved = 0;
    for (name, value) in std::env::vars_os() {
        if !name.to_str().is_some_and(is_secret_name) {
            continue;
        }
        let Ok(c_name) = CString::new(name.as_bytes()) else {
            continue;
        };
        // SAFETY: a NUL-terminated name; one thread, so nothing changes
        // the environment meanwhile.
        let before = unsafe { libc::getenv(c_name.as_ptr()) } as usize;
        let entry = before.wrapping_sub(name.len() + 1);
        let entry_end = before + value.len();
        if before == 0 || entry < start || entry_end >= end {
            continue;
        }
        // SAFETY: one thread (the caller's promise). The C library copies
        // the entry to memory of its own and points the environment there.
        unsafe { std::env::set_var(&name, &value) };
        // SAFETY: as above.
        let after = unsafe { libc::getenv(c_name.as_ptr()) } as usize;
        if after == 0 || after == before {
            continue;
        }
        // SAFETY: [entry, entry_end] ("NAME=value" and its NUL) lies in
        // the block the kernel wrote at exec, which is this process's
        // writable stack memory, and nothing points into it any more.
        unsafe { std::ptr::write_bytes(entry as *mut u8, 0, entry_end - entry) };
        moved += 1;
    }
    moved
}

/// Where the kernel wrote the environment at exec (`env_start` and
/// `env_end` in `/proc/self/stat`, fields 50 and 51).
fn exec_environment_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields from the third on follow the command name's closing paren.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(50 - 3);
    let start = fields.next()?.parse().ok()?;
    let end = fields.next()?.parse().ok()?;
    (start < end).then_some((start, end))
}

/// True if a variable name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || SECRET_ENDINGS.iter().any(|ending| {
            upper == *ending
                || upper
                    .strip_suffix(ending)
                    .is_some_and(|prefix| prefix.ends_with('_'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_names_are_secret() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "DB_SECRET",
            "GITHUB_TOKEN",
            "PGPASSWORD",
            "MY_CREDENTIAL",
            "AWS_SECRET_ACCESS_KEY",
            "SSH_PRIVATE_KEY",
            "github_token",
            "TOKEN",
        ] {
            assert!(is_secret_name(name), "{name} should be secret");
        }
    }

    #[test]
    fn ordinary_variables_pass() {
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "TERM",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD",
            "SECRETARY",
            "MONKEY",
            "PASSWORDLESS",
        ] {
            assert!(!is_secret_name(name), "{name} should pass");
        }
    }

    #[test]
    fn pass_through_overrides_the_filter() {
        let policy = SecretPolicy::new(vec!["GITHUB_TOKEN".into()]);
        let vars = vec![
            (OsString::from("GITHUB_TOKEN"), OsString::from("a")),
            (OsString::from("NPM_TOKEN"), OsString::from("b")),
            (OsString::from("PATH"), OsString::from("/bin")),
        ];
        let kept: Vec<_> = policy
            .filter(vars.into_iter())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            kept,
            [OsString::from("GITHUB_TOKEN"), OsString::from("PATH")]
        );
    }
}
