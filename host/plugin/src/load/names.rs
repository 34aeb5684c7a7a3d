//! Which names plugins may take: one rule for the loader (a file in
//! `env/`), `envhost check` and `envhost add --name`, so that `add` never
//! writes a plugin the next start refuses. A plugin's name is its file's
//! stem; the screen shows its section under that name, upper-cased in the
//! REPL (`==== BASH ====`). So besides being an identifier short enough to
//! be a file's name, a name must not read like a built-in's (`Bash.wasm`,
//! `baſh.wasm` with a long s, `pythοn.wasm` with a Greek omicron would each
//! forge the real section's header), nor like another plugin's.
//!
//! Two names read alike when their keys are equal: the name in
//! compatibility form (NFKC: `ſ` is `s`, `ﬁ` is `fi`), in lower case, then
//! reduced to its Unicode confusable skeleton (UTS #39: `ο` is `o`, `а` is
//! `a`), in lower case again. This module decides and words the refusal
//! ([`NameRefusal`]); each caller adds what to do about it (rename the
//! file, pass another `--name`).

use unicode_normalization::UnicodeNormalization;

use envhost_core::EnvironmentName;

use crate::plugin_text;

/// The names of the built-in environments: a plugin may not take them, or
/// one that reads like them, whether or not the built-in is available on
/// this machine.
pub const RESERVED_NAMES: [&str; 3] = ["bash", "python", "editor"];

/// The longest name in bytes: `NAME.wasm` (and the session's `NAME.json`)
/// must fit in a file name, 255 bytes on Linux's file systems.
pub const MAX_NAME_BYTES: usize = 255 - ".wasm".len();

/// Why a plugin may not take a name, in the words every caller shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameRefusal {
    #[error(
        "`{shown}` is not a valid environment name: it must be an identifier (a letter or `_`, then letters, digits or `_`)",
        shown = plugin_text::name(.0)
    )]
    /// Not an identifier (`my-env`, `2fast`).
    NotAnIdentifier(String),
    #[error(
        "the name `{start}…` is {length} bytes long, and a plugin's name is at most {MAX_NAME_BYTES} (NAME.wasm must fit in a file name)",
        start = .0.chars().take(20).collect::<String>(),
        length = .0.len()
    )]
    /// Longer than [`MAX_NAME_BYTES`].
    TooLong(String),
    #[error(
        "the name `{0}` belongs to a built-in environment ({list})",
        list = RESERVED_NAMES.join(", ")
    )]
    /// A built-in's own name.
    Builtin(String),
    #[error(
        "the name `{name}` reads like `{builtin}`, a built-in environment's, and its screen section would pass for the built-in's"
    )]
    /// A name that reads like a built-in's (`Bash`, `pythοn`).
    ReadsLikeBuiltin {
        /// The name refused.
        name: String,
        /// The built-in it reads like.
        builtin: &'static str,
    },
    #[error(
        "the name `{name}` reads like that of the plugin `{other}`, and their screen sections would look alike"
    )]
    /// A name that reads like another plugin's.
    ReadsLikePlugin {
        /// The name refused.
        name: String,
        /// The other plugin's name.
        other: String,
    },
}

/// `name` as a plugin's name, or why a plugin may not take it (before
/// looking at the other plugins: [`reads_like_plugin`]).
pub fn plugin_name(name: &str) -> Result<EnvironmentName, NameRefusal> {
    let valid =
        EnvironmentName::new(name).map_err(|_| NameRefusal::NotAnIdentifier(name.to_owned()))?;
    if name.len() > MAX_NAME_BYTES {
        return Err(NameRefusal::TooLong(name.to_owned()));
    }
    match reads_like_builtin(name) {
        Some(builtin) if builtin == name => Err(NameRefusal::Builtin(name.to_owned())),
        Some(builtin) => Err(NameRefusal::ReadsLikeBuiltin {
            name: name.to_owned(),
            builtin,
        }),
        None => Ok(valid),
    }
}

/// The refusal of `name` beside the plugins named `others` when it reads
/// like one of them and is not the same name.
pub fn reads_like_plugin<'a>(
    name: &str,
    others: impl IntoIterator<Item = &'a str>,
) -> Option<NameRefusal> {
    let key = look_alike_key(name);
    others
        .into_iter()
        .find(|other| *other != name && look_alike_key(other) == key)
        .map(|other| NameRefusal::ReadsLikePlugin {
            name: name.to_owned(),
            other: other.to_owned(),
        })
}

/// What a name reads as: names with equal keys look alike.
pub fn look_alike_key(name: &str) -> String {
    let folded: String = name.nfkc().flat_map(char::to_lowercase).collect();
    unicode_security::skeleton(&folded)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The built-in whose name `name` reads like, if any.
pub fn reads_like_builtin(name: &str) -> Option<&'static str> {
    let key = look_alike_key(name);
    RESERVED_NAMES
        .into_iter()
        .find(|reserved| look_alike_key(reserved) == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_read_like_a_builtin_are_found() {
        for name in [
            "bash",
            "Bash",
            "BASH",
            "ba\u{17f}h",   // long s
            "pyth\u{3bf}n", // Greek omicron
            "\u{440}ython", // Cyrillic er
            "EDIT\u{39f}R", // Greek capital omicron
            "\u{ff42}ash",  // fullwidth b
        ] {
            assert!(reads_like_builtin(name).is_some(), "{name}");
        }
        for name in ["bashful", "timer", "donn\u{e9}es", "py", "editors"] {
            assert_eq!(reads_like_builtin(name), None, "{name}");
        }
        assert_eq!(look_alike_key("Timer"), look_alike_key("timer"));
        assert_ne!(look_alike_key("timer"), look_alike_key("timers"));
    }

    #[test]
    fn a_plugin_name_is_an_identifier_of_its_own() {
        for name in ["timer", "donn\u{e9}es", "_x", "Notes"] {
            assert_eq!(
                plugin_name(name).map(|n| n.to_string()),
                Ok(name.to_owned())
            );
        }
        assert!(matches!(plugin_name("bash"), Err(NameRefusal::Builtin(_))));
        assert!(matches!(
            plugin_name("pyth\u{3bf}n"),
            Err(NameRefusal::ReadsLikeBuiltin {
                builtin: "python",
                ..
            })
        ));
        for name in ["my-env", "2fast", "", "a/b", "x\u{1b}[2J"] {
            assert!(
                matches!(plugin_name(name), Err(NameRefusal::NotAnIdentifier(_))),
                "{name:?}"
            );
        }
        let long = "a".repeat(MAX_NAME_BYTES + 1);
        assert!(matches!(plugin_name(&long), Err(NameRefusal::TooLong(_))));
        assert!(plugin_name(&long[1..]).is_ok());
        // The refusal names the name with its control characters escaped.
        let refusal = plugin_name("x\u{1b}[2J").unwrap_err().to_string();
        assert!(!refusal.contains('\u{1b}'), "{refusal}");

        assert_eq!(
            reads_like_plugin("notes", ["timer", "Notes"]),
            Some(NameRefusal::ReadsLikePlugin {
                name: "notes".to_owned(),
                other: "Notes".to_owned()
            })
        );
        assert_eq!(reads_like_plugin("notes", ["notes", "timer"]), None);
    }
}
