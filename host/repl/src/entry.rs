//! What a line (or a block) typed at the REPL asks for: a command for an
//! environment, the start of a `.`-terminated block, or one of the REPL's
//! own `:` commands, with their arguments read and checked.
//!
//! This module reads text only; it must not run anything nor know how a
//! block is found complete (that is `blocks`).

use std::time::Duration;

use envhost_core::text;

/// A parsed line of REPL input.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// `ENV: command`.
    Command {
        environment: String,
        command: String,
    },
    /// `ENV:` alone: the lines up to a line holding a single `.` are one
    /// command.
    StartBlock { environment: String },
    /// One of the REPL's own commands.
    Meta(Meta),
    /// Nothing but whitespace.
    Blank,
    /// Neither: the REPL says how to write a command.
    Unrecognised,
}

/// The REPL's own commands (`:screen`, `:wait 5`, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum Meta {
    Screen,
    Help,
    Quit,
    /// Follow a running command: in `environment` (else the one the REPL
    /// left running last), for at most `limit`.
    Wait {
        environment: Option<String>,
        limit: Option<Duration>,
    },
    /// Type `text` (escapes resolved) into the running command.
    Input {
        text: String,
    },
    /// Stop a running command.
    Interrupt {
        environment: Option<String>,
    },
    /// End an environment and start it afresh.
    Restart {
        environment: String,
    },
    /// End a named instance (`bash:server`) and everything it runs.
    Close {
        environment: String,
    },
    /// A `:` command with something wrong: what to write instead.
    Mistake(String),
}

/// Reads one line (the first line of a block) of input.
pub fn parse_entry(line: &str) -> Entry {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Entry::Blank;
    }
    if matches!(trimmed, "help" | "?") {
        return Entry::Meta(Meta::Help);
    }
    if let Some(meta) = trimmed.strip_prefix(':') {
        return Entry::Meta(parse_meta(meta));
    }
    let Some((environment, rest)) = split_environment(line) else {
        return Entry::Unrecognised;
    };
    let environment = environment.trim();
    if environment.is_empty() || environment.contains(char::is_whitespace) {
        return Entry::Unrecognised;
    }
    let command = rest.strip_prefix(' ').unwrap_or(rest);
    if command.trim().is_empty() {
        Entry::StartBlock {
            environment: environment.to_owned(),
        }
    } else {
        Entry::Command {
            environment: environment.to_owned(),
            command: command.to_owned(),
        }
    }
}

/// `ENV: rest` split after the environment: `bash:server: ls` names the
/// instance `bash:server` (a word that starts with a letter, right after
/// the first colon, then a second colon that ends the line or is followed
/// by a space), `python:x=1` is `x=1` for python and `bash:http://x` is
/// `http://x` for bash.
pub fn split_environment(line: &str) -> Option<(&str, &str)> {
    let (kind, rest) = line.split_once(':')?;
    if let Some((name, after)) = rest.split_once(':')
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && (after.is_empty() || after.starts_with(char::is_whitespace))
    {
        return Some((&line[..kind.len() + 1 + name.len()], after));
    }
    Some((kind, rest))
}

/// The `:` commands, for completion and the unknown-command message.
pub const META_COMMANDS: [&str; 9] = [
    ":help",
    ":screen",
    ":wait",
    ":input",
    ":interrupt",
    ":restart",
    ":close",
    ":quit",
    ":exit",
];

fn parse_meta(text: &str) -> Meta {
    let (name, arguments) = match text.split_once(char::is_whitespace) {
        Some((name, arguments)) => (name, arguments),
        None => (text, ""),
    };
    let words: Vec<&str> = arguments.split_whitespace().collect();
    match name {
        "quit" | "q" | "exit" => Meta::Quit,
        "screen" | "s" => Meta::Screen,
        "help" | "h" => Meta::Help,
        "wait" => parse_wait(&words),
        "interrupt" => match words.as_slice() {
            [] => Meta::Interrupt { environment: None },
            [environment] => Meta::Interrupt {
                environment: Some((*environment).to_owned()),
            },
            _ => Meta::Mistake(":interrupt takes at most an environment's name, e.g. :interrupt bash".into()),
        },
        "restart" => match words.as_slice() {
            [environment] => Meta::Restart {
                environment: (*environment).to_owned(),
            },
            _ => Meta::Mistake(
                ":restart takes the environment to restart, e.g. :restart python (its state is lost)"
                    .into(),
            ),
        },
        "close" => match words.as_slice() {
            [environment] => Meta::Close {
                environment: (*environment).to_owned(),
            },
            _ => Meta::Mistake(
                ":close takes the instance to close, e.g. :close bash:server (it and everything it runs end)"
                    .into(),
            ),
        },
        "input" => {
            // Everything after one space is the text, spaces included.
            let raw = text
                .strip_prefix("input")
                .and_then(|rest| rest.strip_prefix(' ').or(Some(rest)))
                .unwrap_or("");
            if raw.is_empty() {
                return Meta::Mistake(
                    ":input takes the text to type, e.g. :input yes\\n (\\n is Enter, \\x03 is Ctrl-C)"
                        .into(),
                );
            }
            match unescape(raw) {
                Ok(text) => Meta::Input { text },
                Err(mistake) => Meta::Mistake(mistake),
            }
        }
        other => Meta::Mistake(format!(
            "Unknown REPL command :{other}. The REPL's commands: {}; type :help for more.",
            META_COMMANDS.join(", ")
        )),
    }
}

fn parse_wait(words: &[&str]) -> Meta {
    let mut environment = None;
    let mut limit = None;
    for word in words {
        if word.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            if limit.is_some() {
                return Meta::Mistake(":wait takes one duration".into());
            }
            match wait_limit(word) {
                Ok(duration) => limit = Some(duration),
                Err(mistake) => return Meta::Mistake(mistake),
            }
        } else if environment.replace((*word).to_owned()).is_some() {
            return Meta::Mistake(
                ":wait takes at most an environment and a duration, e.g. :wait bash 30".into(),
            );
        }
    }
    Meta::Wait { environment, limit }
}

/// A bare number is seconds (`5`, `0.5`); otherwise a duration (`2m`).
fn wait_limit(word: &str) -> Result<Duration, String> {
    match word.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 && seconds < 1e9 => {
            Ok(Duration::from_secs_f64(seconds))
        }
        Ok(_) => Err(format!(
            "{word} is not a time to wait: give seconds above zero (e.g. :wait 5) or a duration (:wait 2m)"
        )),
        Err(_) => text::parse_duration(word).map_err(|e| format!("{word}: {e}")),
    }
}

/// Resolves the escapes of `:input TEXT`: `\n` (Enter), `\r`, `\t`, `\e`
/// (Escape), `\0`, `\\`, `\xHH` (a byte below 0x80, e.g. `\x03` for
/// Ctrl-C) and `\u{HHHH}` or `\uHHHH` (any character).
pub fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escape = chars.next();
        match escape {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('e') => out.push('\u{1b}'),
            Some('0') => out.push('\0'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                match u8::from_str_radix(&hex, 16) {
                    Ok(byte) if hex.len() == 2 && byte < 0x80 => out.push(char::from(byte)),
                    _ => {
                        return Err(format!(
                            "\\x{hex} is not a character: \\x takes two hex digits below 80, e.g. \\x03 (Ctrl-C); \\u{{...}} writes any character"
                        ));
                    }
                }
            }
            Some('u') => {
                let rest = chars.as_str();
                let (hex, used) = match rest.strip_prefix('{') {
                    Some(inner) => match inner.find('}') {
                        Some(end) => (&inner[..end], end + 2),
                        None => ("", 0),
                    },
                    None => (rest.get(..4).unwrap_or(""), 4),
                };
                match u32::from_str_radix(hex, 16).ok().and_then(char::from_u32) {
                    Some(character) if !hex.is_empty() => {
                        out.push(character);
                        chars = rest[used..].chars();
                    }
                    _ => {
                        return Err(
                            "\\u takes four hex digits or braces, e.g. \\u0004 or \\u{1F600}"
                                .into(),
                        );
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "\\{other} is not an escape :input knows: use \\n (Enter), \\r, \\t, \\e, \\0, \\\\, \\xHH or \\u{{HHHH}}"
                ));
            }
            None => {
                return Err("the text ends with a lone \\: write \\\\ for a backslash".to_owned());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(line: &str) -> Meta {
        match parse_entry(line) {
            Entry::Meta(meta) => meta,
            other => panic!("{line:?} read as {other:?}"),
        }
    }

    #[test]
    fn parses_commands_blocks_and_meta_commands() {
        assert_eq!(
            parse_entry("bash: ls -la"),
            Entry::Command {
                environment: "bash".into(),
                command: "ls -la".into()
            }
        );
        assert_eq!(
            parse_entry("python:x = {'a': 1}"),
            Entry::Command {
                environment: "python".into(),
                command: "x = {'a': 1}".into()
            }
        );
        assert_eq!(
            parse_entry("editor:"),
            Entry::StartBlock {
                environment: "editor".into()
            }
        );
        assert_eq!(meta(":quit"), Meta::Quit);
        assert_eq!(meta(":screen"), Meta::Screen);
        assert_eq!(meta("?"), Meta::Help);
        assert_eq!(parse_entry("   "), Entry::Blank);
        assert_eq!(parse_entry("echo a:b"), Entry::Unrecognised);
        assert_eq!(parse_entry("no colon"), Entry::Unrecognised);
        assert!(matches!(meta(":frobnicate"), Meta::Mistake(m) if m.contains(":wait")));
    }

    #[test]
    fn an_instance_is_the_word_between_two_colons() {
        assert_eq!(
            parse_entry("bash:server: python3 -m http.server"),
            Entry::Command {
                environment: "bash:server".into(),
                command: "python3 -m http.server".into()
            }
        );
        assert_eq!(
            parse_entry("python:w-2:"),
            Entry::StartBlock {
                environment: "python:w-2".into()
            }
        );
        // Not an instance: a colon inside the command, not before a space.
        assert_eq!(
            parse_entry("bash:http://localhost:8000"),
            Entry::Command {
                environment: "bash".into(),
                command: "http://localhost:8000".into()
            }
        );
        assert_eq!(
            parse_entry("python:2:3"),
            Entry::Command {
                environment: "python".into(),
                command: "2:3".into()
            }
        );
        assert_eq!(
            parse_entry("python:d = {'a': 1}"),
            Entry::Command {
                environment: "python".into(),
                command: "d = {'a': 1}".into()
            }
        );
        assert_eq!(
            meta(":close bash:server"),
            Meta::Close {
                environment: "bash:server".into()
            }
        );
        assert!(matches!(meta(":close"), Meta::Mistake(m) if m.contains(":close bash:server")));
    }

    #[test]
    fn wait_takes_an_environment_and_a_duration_in_any_order() {
        assert_eq!(
            meta(":wait"),
            Meta::Wait {
                environment: None,
                limit: None
            }
        );
        assert_eq!(
            meta(":wait 2.5"),
            Meta::Wait {
                environment: None,
                limit: Some(Duration::from_millis(2500))
            }
        );
        assert_eq!(
            meta(":wait 2m bash"),
            Meta::Wait {
                environment: Some("bash".into()),
                limit: Some(Duration::from_secs(120))
            }
        );
        assert!(matches!(meta(":wait 0"), Meta::Mistake(_)));
        assert!(matches!(meta(":wait 5 6"), Meta::Mistake(_)));
        assert!(matches!(meta(":wait bash python"), Meta::Mistake(_)));
        assert_eq!(
            meta(":interrupt python"),
            Meta::Interrupt {
                environment: Some("python".into())
            }
        );
        assert_eq!(
            meta(":restart bash"),
            Meta::Restart {
                environment: "bash".into()
            }
        );
        assert!(matches!(meta(":restart"), Meta::Mistake(_)));
    }

    #[test]
    fn input_keeps_spaces_and_resolves_escapes() {
        assert_eq!(
            meta(":input  John Smith\\n"),
            Meta::Input {
                text: " John Smith\n".into()
            }
        );
        assert_eq!(
            meta(":input \\x03"),
            Meta::Input {
                text: "\u{3}".into()
            }
        );
        assert!(matches!(meta(":input"), Meta::Mistake(m) if m.contains("\\n")));
        assert_eq!(
            unescape(r"a\tb\\c\e[A\u0004\u{1F600}\0").unwrap(),
            "a\tb\\c\u{1b}[A\u{4}\u{1F600}\0"
        );
        for bad in [r"\q", r"\x9", r"\xff", r"\u12", r"\u{110000}", "end\\"] {
            assert!(unescape(bad).is_err(), "{bad}");
        }
    }
}
