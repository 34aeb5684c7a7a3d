//! Which names plugins may take. A plugin's name is its file's stem; the
//! screen shows its section under that name, upper-cased in the REPL
//! (`==== BASH ====`). So besides being an identifier, a name must not
//! read like a built-in's (`Bash.wasm`, `baſh.wasm` with a long s,
//! `pythοn.wasm` with a Greek omicron would each forge the real section's
//! header), nor like another plugin's.
//!
//! Two names read alike when their keys are equal: the name in
//! compatibility form (NFKC: `ſ` is `s`, `ﬁ` is `fi`), in lower case, then
//! reduced to its Unicode confusable skeleton (UTS #39: `ο` is `o`, `а` is
//! `a`), in lower case again. This module only compares; `loader` refuses.

use unicode_normalization::UnicodeNormalization;

/// The names of the built-in environments: a plugin may not take them, or
/// one that reads like them, whether or not the built-in is available on
/// this machine.
pub const RESERVED_NAMES: [&str; 3] = ["bash", "python", "editor"];

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
}
