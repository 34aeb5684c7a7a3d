//! Instance names: `bash:server`, `python:worker` — another instance of an
//! environment kind that can have several (several shells at once).
//!
//! This module owns the rule for an instance's address (`KIND:NAME`, NAME a
//! letter, then letters, digits, `_` or `-`, at most
//! [`MAX_INSTANCE_NAME`] characters), the words that refuse a bad one, and
//! [`InstanceFactory`], the way a kind makes another instance with the
//! default's options. It must not know which kinds exist or how many
//! instances live: the orchestrator holds those.

use crate::environment::Environment;

/// The most characters an instance's NAME (after the colon) may have.
pub const MAX_INSTANCE_NAME: usize = 32;

/// How many named instances of one kind may live at once when the host is
/// not told otherwise (`--max-instances`): a handful of services and a
/// test runner, as many terminal tabs as a person keeps open.
pub const DEFAULT_MAX_INSTANCES: usize = 8;

/// Makes another instance of a kind with the same options as its default
/// instance (the same project directory, output limits, filtered
/// variables), given its NAME (`server` for `bash:server`). The instance
/// starts its program on its first command.
pub type InstanceFactory = Box<dyn Fn(&str) -> Box<dyn Environment> + Send + Sync>;

/// An environment address split at its first colon: `("bash", "server")`
/// for `bash:server`; `None` for a plain name.
pub fn split(environment: &str) -> Option<(&str, &str)> {
    environment.split_once(':')
}

/// Why `KIND:NAME`'s NAME cannot name an instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadInstanceName {
    /// Nothing after the colon (`bash:`).
    #[error(
        "{kind}: names no instance: put a name after the colon, e.g. {kind}:server (a letter, then letters, digits, `_` or `-`, at most {MAX_INSTANCE_NAME} characters)"
    )]
    Empty {
        /// The kind before the colon.
        kind: String,
    },
    /// Longer than [`MAX_INSTANCE_NAME`].
    #[error(
        "the instance name {name:?} is {length} characters long; an instance name has at most {MAX_INSTANCE_NAME} (e.g. {kind}:server)"
    )]
    TooLong {
        /// The kind before the colon.
        kind: String,
        /// The name as given.
        name: String,
        /// Its length in characters.
        length: usize,
    },
    /// A character or a start the rule does not allow (a space, `.`, `/`,
    /// a second colon, a digit first).
    #[error(
        "{kind}:{name} is not an instance name: after `{kind}:` comes a letter, then letters, digits, `_` or `-`, at most {MAX_INSTANCE_NAME} characters (e.g. {kind}:server)"
    )]
    Invalid {
        /// The kind before the colon.
        kind: String,
        /// The name as given.
        name: String,
    },
}

/// Checks the NAME of `kind:name` against the rule.
pub fn check_name(kind: &str, name: &str) -> Result<(), BadInstanceName> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(BadInstanceName::Empty {
            kind: kind.to_owned(),
        });
    };
    let length = name.chars().count();
    if length > MAX_INSTANCE_NAME {
        return Err(BadInstanceName::TooLong {
            kind: kind.to_owned(),
            name: name.to_owned(),
            length,
        });
    }
    // ASCII only: the name becomes part of file names and screen keys, and
    // look-alike letters would make two instances read as one.
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(BadInstanceName::Invalid {
            kind: kind.to_owned(),
            name: name.to_owned(),
        })
    }
}

// The words that answer requests about instances; each refusal says what
// to send instead.

/// `kind:NAME` for each kind: how instances are addressed.
fn addresses(kinds: &[String]) -> String {
    kinds
        .iter()
        .map(|kind| format!("{kind}:NAME"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kinds, as a sentence names them.
fn kinds_named(kinds: &[String]) -> String {
    if kinds.is_empty() {
        "no environment in this host".to_owned()
    } else {
        kinds.join(" and ")
    }
}

/// `name` (`ruby:x`) names a kind that is not loaded.
pub fn unknown_kind(name: &str, kind: &str, kinds: &[String]) -> String {
    let shown = if kind.is_empty() { "(empty)" } else { kind };
    format!(
        "Unknown environment kind {shown} in {name}: instances are opened of {} ({}).",
        kinds_named(kinds),
        addresses(kinds)
    )
}

/// `kind` (the editor, a plugin) has no instances besides itself.
pub fn single(kind: &str, kinds: &[String]) -> String {
    format!(
        "{kind} has one instance only: send to {kind} itself. Several instances are opened of \
         {} ({}).",
        kinds_named(kinds),
        addresses(kinds)
    )
}

/// `name` would be one more instance of `kind` than the host allows;
/// `live` are the open ones.
pub fn too_many(name: &str, kind: &str, live: &[&str]) -> String {
    format!(
        "{name} was not opened: {} instances of {kind} are open, the most this host allows \
         (--max-instances). Open: {}. Close one you no longer need with \
         {{\"type\":\"close\",\"environment\":\"{}\"}} and send this again.",
        live.len(),
        live.join(", "),
        live.first().copied().unwrap_or("KIND:NAME")
    )
}

/// `name` is a registered environment, not a named instance: the default
/// instance of a kind that has instances (`default`), or one that has none.
pub fn not_closable(name: &str, default: bool, kinds: &[String]) -> String {
    let restart = format!("{{\"type\":\"restart\",\"environment\":\"{name}\"}}");
    if default {
        format!(
            "{name} is the default {name} and cannot be closed. To end everything it runs and \
             start it afresh, restart it: {restart}. Close only the instances you opened \
             ({name}:NAME)."
        )
    } else {
        format!(
            "{name} cannot be closed: only named instances ({}) are. To start it afresh, restart \
             it: {restart}.",
            addresses(kinds)
        )
    }
}

/// `name` is a valid instance of `kind` that is not open, so `what`
/// (wait, close…) has nothing to act on; `live` are the open ones.
pub fn not_open(name: &str, what: &str, kind: &str, live: &[String]) -> String {
    let live = if live.is_empty() {
        "none".to_owned()
    } else {
        live.join(", ")
    };
    format!(
        "{name} is not open, so there is nothing to {what}: a command sent to {name} opens it. \
         Open instances of {kind}: {live}."
    )
}

/// The answer to closing `name`, after `ended` (what was ended, in words).
pub fn closed(name: &str, ended: &str) -> String {
    format!(
        "Closed {name}: {ended}. Its section is gone; a command sent to {name} opens a fresh one."
    )
}

/// The line the default instance of `kind` adds to its section.
pub fn hint(kind: &str) -> String {
    format!(
        "Another {kind}: send to \"{kind}:NAME\" to open one (its own state and section); close \
         ends it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        for good in ["server", "a", "web-2", "db_main", &"x".repeat(32)] {
            assert_eq!(check_name("bash", good), Ok(()), "{good}");
        }
        for bad in [
            "2nd",
            "my server",
            "..",
            "a/b",
            "a:b",
            "é",
            "-x",
            "_x",
            "a.b",
        ] {
            assert!(
                matches!(
                    check_name("bash", bad),
                    Err(BadInstanceName::Invalid { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            check_name("bash", ""),
            Err(BadInstanceName::Empty { .. })
        ));
        let long = check_name("python", &"y".repeat(33)).unwrap_err();
        assert!(long.to_string().contains("33 characters long"), "{long}");
    }

    #[test]
    fn split_is_at_the_first_colon() {
        assert_eq!(split("bash:server"), Some(("bash", "server")));
        assert_eq!(split("bash:a:b"), Some(("bash", "a:b")));
        assert_eq!(split("bash"), None);
    }
}
