//! The shell's recoverable state, for crash-safe sessions.
//!
//! When the session is recorded, the prompt writes a dump of the shell's
//! state to a private file after a command that could have changed it
//! ([`could_change_state`]: not after `ls`, `cargo test` or `true`), with
//! builtins only (no fork): `declare -p` (whose `SHELLOPTS` and
//! `BASHOPTS` say which `set -o` and `shopt` options are on), `alias -p`,
//! then, after a marker line, `declare -f`, then an end line. The
//! file is overwritten in place, never truncated (on a disk-backed /tmp a
//! truncated file's writes cost ten times more): what follows the end line
//! is a longer earlier dump's tail. This module reads that dump, keeps what
//! differs from the dump the fresh shell wrote right after its set-up (so
//! the host's own variables and options are never kept, only what the
//! agent changed), and turns a kept state back into a script the next
//! shell sources.
//!
//! It owns the dump's parsing, the comparison and the restore script. It
//! must not know where the state is stored nor how the shell is driven.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The line the prompt prints between the one-line entries and the
/// functions.
pub const FUNCTIONS_MARKER: &str = "#envhost-functions";

/// The line that ends a dump.
pub const END_MARKER: &str = "#envhost-end";

/// The prompt's dump, when the command line asked for one
/// (`__envhost_dump=1`), to the file in `$__envhost_state`.
pub const DUMP: &str = r#"[[ -z $__envhost_dump ]] || { __envhost_dump=; { declare -p; alias -p; printf '%s\n' '#envhost-functions'; declare -f; printf '%s\n' '#envhost-end'; } 1<>"$__envhost_state"; }"#;

/// Builtins and keywords that can change the shell itself.
const STATEFUL: &[&str] = &[
    "!",
    ".",
    "((",
    "[[",
    "alias",
    "bg",
    "bind",
    "builtin",
    "case",
    "cd",
    "command",
    "complete",
    "compopt",
    "coproc",
    "declare",
    "disown",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "fc",
    "fg",
    "for",
    "function",
    "getopts",
    "hash",
    "history",
    "if",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "pushd",
    "read",
    "readarray",
    "readonly",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "time",
    "trap",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// Whether `command` could change the shell's state, judged from its
/// text: an `=` anywhere (assignments, `${x:=v}`, `$((x=1))`), or a part
/// that starts with a builtin or keyword that changes the shell, or with
/// one of the agent's functions or aliases (as of `known`, the last
/// dump). Running programs (`ls`, `cargo test`) cannot; a wrong `true`
/// only costs a dump.
pub fn could_change_state(command: &str, known: Option<&Dump>) -> bool {
    let Some(known) = known else { return true };
    // `((x++))`, `$((x--))`: arithmetic changes variables without `=`.
    if command.contains('=') || command.contains("((") {
        return true;
    }
    command
        .split([';', '&', '|', '\n', '(', ')', '{', '}', '`'])
        .any(|part| {
            let Some(first) = part.split_whitespace().next() else {
                return false;
            };
            // A word the shell expands or unquotes first (`$cmd`, `\cd`,
            // `'cd'`) may turn out to be anything.
            STATEFUL.contains(&first)
                || first.starts_with('$')
                || first.contains(['\'', '"', '\\'])
                || (first == "printf" && part.contains("-v"))
                || known.functions.contains_key(first)
                || known.aliases.contains_key(first)
        })
}

/// Variables that bash itself sets or changes on its own, or that belong
/// to the host's plumbing: never kept.
const VOLATILE: &[&str] = &[
    "_",
    "BASH",
    "BASHOPTS",
    "BASHPID",
    "BASH_ALIASES",
    "BASH_ARGC",
    "BASH_ARGV",
    "BASH_ARGV0",
    "BASH_CMDS",
    "BASH_COMMAND",
    "BASH_EXECUTION_STRING",
    "BASH_LINENO",
    "BASH_REMATCH",
    "BASH_SOURCE",
    "BASH_SUBSHELL",
    "BASH_VERSINFO",
    "BASH_VERSION",
    "COLUMNS",
    "COMP_WORDBREAKS",
    "DIRSTACK",
    "EPOCHREALTIME",
    "EPOCHSECONDS",
    "EUID",
    "FUNCNAME",
    "GROUPS",
    "HISTCMD",
    "HISTFILE",
    "LINENO",
    "LINES",
    "PIPESTATUS",
    "PPID",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "PWD",
    "RANDOM",
    "SECONDS",
    "SHELLOPTS",
    "SRANDOM",
    "UID",
];

const PLUMBING_PREFIX: &str = "__envhost_";

/// A dump, by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dump {
    variables: BTreeMap<String, String>,
    aliases: BTreeMap<String, String>,
    options: BTreeMap<String, String>,
    functions: BTreeMap<String, String>,
}

/// What is kept of a shell: what differs from a fresh one.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptShell {
    pub cwd: PathBuf,
    pub last_exit_code: i32,
    /// `declare` lines of the variables set or changed.
    pub variables: BTreeMap<String, String>,
    /// Variables of the fresh shell that were unset.
    pub unset: Vec<String>,
    pub functions: BTreeMap<String, String>,
    /// `alias` lines.
    pub aliases: BTreeMap<String, String>,
    pub unaliased: Vec<String>,
    /// `shopt -s x` / `set -o x` lines that differ.
    pub options: BTreeMap<String, String>,
    /// The background jobs that ran (they cannot be resumed).
    pub jobs: Vec<String>,
}

impl Dump {
    pub fn parse(text: &str) -> Dump {
        let mut dump = Dump::default();
        let (entries, functions) = match split_at_marker(text) {
            Some((entries, functions)) => (entries, functions),
            None => (text, ""),
        };
        // The functions end at the end line; a longer earlier dump's tail
        // follows it.
        let end = format!("{END_MARKER}\n");
        let functions = if functions.starts_with(&end) {
            ""
        } else {
            functions
                .find(&format!("\n{end}"))
                .map_or(functions, |at| &functions[..=at])
        };
        for line in logical_lines(entries) {
            if let Some(rest) = line.strip_prefix("declare ") {
                // `declare -x NAME="value"` or `declare -- NAME`.
                let rest = rest.split_once(' ').map_or("", |(_, rest)| rest);
                let name = rest.split(['=', ' ']).next().unwrap_or("");
                if !name.is_empty() {
                    dump.variables.insert(name.to_owned(), line.to_owned());
                }
            } else if let Some(rest) = line.strip_prefix("alias ") {
                let name = rest.split('=').next().unwrap_or("");
                dump.aliases.insert(name.to_owned(), line.to_owned());
            }
        }
        for (variable, command) in [("SHELLOPTS", "set -o"), ("BASHOPTS", "shopt -s")] {
            let Some(line) = dump.variables.get(variable) else {
                continue;
            };
            // declare -r SHELLOPTS="braceexpand:hashall:..."
            let list = line
                .split_once('=')
                .map_or("", |(_, value)| value.trim_matches('"'));
            for option in list.split(':').filter(|o| !o.is_empty()) {
                let key = format!("{} {option}", &command[..command.len() - 3]);
                dump.options.insert(key, format!("{command} {option}"));
            }
        }
        dump.functions = split_functions(functions);
        dump
    }

    /// What differs in `self` from the fresh shell's `baseline`.
    pub fn kept(
        &self,
        baseline: &Dump,
        cwd: &Path,
        last_exit_code: i32,
        jobs: Vec<String>,
    ) -> KeptShell {
        let keep = |name: &str| !name.starts_with(PLUMBING_PREFIX) && !VOLATILE.contains(&name);
        KeptShell {
            cwd: cwd.to_path_buf(),
            last_exit_code,
            variables: changed(&self.variables, &baseline.variables, keep),
            unset: removed(&self.variables, &baseline.variables, keep),
            functions: changed(&self.functions, &baseline.functions, keep),
            aliases: changed(&self.aliases, &baseline.aliases, |_| true),
            unaliased: removed(&self.aliases, &baseline.aliases, |_| true),
            options: changed(&self.options, &baseline.options, |_| true)
                .into_iter()
                .chain(
                    removed(&self.options, &baseline.options, |_| true)
                        .into_iter()
                        .filter_map(|key| {
                            let line = baseline.options.get(&key)?;
                            let off = line
                                .replacen("set -o", "set +o", 1)
                                .replacen("shopt -s", "shopt -u", 1);
                            Some((key, off))
                        }),
                )
                .collect(),
            jobs,
        }
    }
}

impl KeptShell {
    /// The script that brings the state back in a fresh shell (sourced at
    /// the top level, so `declare` makes globals); it ends with the kept
    /// exit code as its status.
    pub fn restore_script(&self) -> String {
        let mut script = String::new();
        let cwd = self.cwd.to_string_lossy().replace('\'', r"'\''");
        script.push_str(&format!("cd -- '{cwd}'\n"));
        for name in &self.unset {
            script.push_str(&format!("unset -v {name}\n"));
        }
        for line in self.variables.values() {
            script.push_str(line);
            script.push('\n');
        }
        for text in self.functions.values() {
            script.push_str(text);
            script.push('\n');
        }
        for name in &self.unaliased {
            script.push_str(&format!("unalias -- {name}\n"));
        }
        for line in self.aliases.values().chain(self.options.values()) {
            script.push_str(line);
            script.push('\n');
        }
        // Under errexit a failing `.` would end the shell: the exit code
        // is then not brought back.
        let code = if self.errexit() {
            0
        } else {
            self.last_exit_code & 0xff
        };
        script.push_str(&format!("return {code}\n"));
        script
    }

    /// `set -e` is among the options brought back.
    pub fn errexit(&self) -> bool {
        self.options.get("set errexit").map(String::as_str) == Some("set -o errexit")
    }

    /// What came back, in the agent's words.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("the working directory {}", self.cwd.display())];
        if self.errexit() && self.last_exit_code != 0 {
            parts.push(format!(
                "not the last exit code {} (with set -e it would end the shell; $? is 0)",
                self.last_exit_code
            ));
        } else {
            parts.push(format!("the last exit code {}", self.last_exit_code));
        }
        let mut counted = |what: &str, names: Vec<&String>| {
            if !names.is_empty() {
                let list = names
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                parts.push(format!("{} {what} ({list})", names.len()));
            }
        };
        counted("variable(s)", self.variables.keys().collect());
        counted("unset variable(s)", self.unset.iter().collect());
        counted("function(s)", self.functions.keys().collect());
        counted("alias(es)", self.aliases.keys().collect());
        counted("shell option(s)", self.options.keys().collect());
        let mut text = format!("restored {}.", parts.join(", "));
        if !self.jobs.is_empty() {
            text.push_str(&format!(
                " Lost: {} background job(s), which cannot be resumed: {}.",
                self.jobs.len(),
                self.jobs.join("; ")
            ));
        }
        text
    }
}

fn changed(
    now: &BTreeMap<String, String>,
    baseline: &BTreeMap<String, String>,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, String> {
    now.iter()
        .filter(|(name, line)| keep(name) && baseline.get(*name) != Some(line))
        .map(|(name, line)| (name.clone(), line.clone()))
        .collect()
}

fn removed(
    now: &BTreeMap<String, String>,
    baseline: &BTreeMap<String, String>,
    keep: impl Fn(&str) -> bool,
) -> Vec<String> {
    baseline
        .keys()
        .filter(|name| keep(name) && !now.contains_key(*name))
        .cloned()
        .collect()
}

/// The entries before the marker line and the functions after it; the
/// marker counts only outside quotes.
fn split_at_marker(text: &str) -> Option<(&str, &str)> {
    logical_lines(text).into_iter().find_map(|line| {
        if line != FUNCTIONS_MARKER {
            return None;
        }
        // `line` is a slice of `text`: its offset is the pointers' distance.
        let start = line.as_ptr() as usize - text.as_ptr() as usize;
        let functions = text.get(start + line.len() + 1..).unwrap_or("");
        Some((text.get(..start).unwrap_or(""), functions))
    })
}

/// Lines, where a newline inside '…', "…" or $'…' does not end one.
fn logical_lines(text: &str) -> Vec<&str> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
        Ansi,
    }
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let mut start = 0;
    let mut quote = Quote::None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Quote::None => match b {
                b'\n' => {
                    lines.push(&text[start..i]);
                    start = i + 1;
                }
                b'\\' => i += 1,
                b'\'' => quote = Quote::Single,
                b'"' => quote = Quote::Double,
                b'$' if bytes.get(i + 1) == Some(&b'\'') => {
                    quote = Quote::Ansi;
                    i += 1;
                }
                _ => {}
            },
            Quote::Single if b == b'\'' => quote = Quote::None,
            Quote::Double | Quote::Ansi if b == b'\\' => i += 1,
            Quote::Double if b == b'"' => quote = Quote::None,
            Quote::Ansi if b == b'\'' => quote = Quote::None,
            _ => {}
        }
        i += 1;
    }
    if start < text.len() {
        lines.push(&text[start.min(text.len())..]);
    }
    lines
}

/// `declare -f`'s output, by function: each starts with a `name () ` line.
fn split_functions(text: &str) -> BTreeMap<String, String> {
    let mut functions = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.split_inclusive('\n') {
        let header = line
            .trim_end_matches('\n')
            .strip_suffix(" () ")
            .filter(|name| !name.is_empty() && !name.contains(char::is_whitespace));
        if let Some(name) = header {
            if let Some((name, body)) = current.take() {
                functions.insert(name, body.trim_end().to_owned());
            }
            current = Some((name.to_owned(), line.to_owned()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
        }
    }
    if let Some((name, body)) = current {
        functions.insert(name, body.trim_end().to_owned());
    }
    functions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_changed_is_kept_and_multi_line_values_stay_whole() {
        let baseline = Dump::parse(
            "declare -x HOME=\"/root\"\ndeclare -- __envhost_seq=\"1\"\ndeclare -r BASHOPTS=\"checkwinsize:cmdhist\"\ndeclare -r SHELLOPTS=\"braceexpand:hashall\"\n#envhost-functions\n",
        );
        let now = Dump::parse(
            "declare -x HOME=\"/root\"\ndeclare -- X=\"a\n#envhost-functions\nb\"\ndeclare -a A=([0]=\"1\" [1]=\"2\")\nalias ll='ls -l'\ndeclare -r BASHOPTS=\"checkwinsize:cmdhist:extglob\"\ndeclare -r SHELLOPTS=\"hashall\"\n#envhost-functions\ngreet () \n{ \n    echo hi\n}\n__envhost_load () \n{ \n    :\n}\n#envhost-end\nold () \n{ \n",
        );
        let kept = now.kept(&baseline, Path::new("/tmp"), 3, Vec::new());
        assert_eq!(
            kept.variables.get("X").map(String::as_str),
            Some("declare -- X=\"a\n#envhost-functions\nb\"")
        );
        assert!(kept.variables.contains_key("A"));
        assert!(!kept.variables.contains_key("HOME"));
        assert_eq!(kept.aliases.len(), 1);
        assert_eq!(
            kept.options.values().collect::<Vec<_>>(),
            ["set +o braceexpand", "shopt -s extglob"]
        );
        assert_eq!(kept.functions.keys().collect::<Vec<_>>(), ["greet"]);
        assert!(kept.restore_script().ends_with("return 3\n"));
    }

    #[test]
    fn running_programs_asks_for_no_dump_and_changing_the_shell_does() {
        let known = Dump::parse("alias ll='ls -l'\n#envhost-functions\ngreet () \n{ \n    :\n}\n");
        for quiet in [
            "true",
            "echo hello",
            "ls -la | wc -l",
            "cargo test 2>&1 | tail",
        ] {
            assert!(!could_change_state(quiet, Some(&known)), "{quiet}");
        }
        for changes in [
            "x=1",
            "cd /tmp",
            "ls; export A",
            "greet",
            "ll",
            "echo ${x:=1}",
            "source a.sh",
            "for i in 1; do :; done",
            "((n++))",
            "echo $((n--))",
            "$cmd /tmp",
            "\\cd /tmp",
            "'cd' /tmp",
        ] {
            assert!(could_change_state(changes, Some(&known)), "{changes}");
        }
    }
}
