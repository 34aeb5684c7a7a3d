//! The words the agent reads about durations, sizes, counts, quoted
//! commands and names, cut text and interruptions, written once so that
//! every environment says the same fact
//! the same way ("120 s", "92.7 KiB", "3 lines").
//!
//! It also reads durations and sizes as operators write them in flags and
//! config files (`90s`, `2m`, `64MiB`), and names the kind of a JSON value
//! the same way for every front end ("a string", "an array"). It must not
//! know who prints the words or why.

use std::time::Duration;

/// How every environment says that a command was interrupted because the
/// host was asked to stop (Ctrl-C in the REPL, SIGINT or SIGTERM).
pub const INTERRUPTED: &str =
    "interrupted because the host was asked to stop (Ctrl-C, SIGINT or SIGTERM)";

/// The kind of a JSON value as a message names it ("expected a string,
/// got an array"): `null`, `a boolean`, `a number`, `a string`, `an
/// array`, `an object`.
pub fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `fragment` with its first letter in upper case, to start a sentence.
pub fn capitalized(fragment: &str) -> String {
    let mut chars = fragment.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A duration as the agent reads it: `42 µs`, `2.5 ms`, `300 ms`, `1.5 s`,
/// `120 s`.
pub fn duration(duration: Duration) -> String {
    if duration < Duration::from_millis(1) {
        return format!("{} µs", duration.as_micros());
    }
    if duration < Duration::from_secs(1) {
        let ms = duration.as_secs_f64() * 1_000.0;
        return if ms < 10.0 {
            format!("{ms:.1} ms")
        } else {
            format!("{ms:.0} ms")
        };
    }
    let s = duration.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// A size as the agent reads it: `512 B`, `92.7 KiB`, `256 MiB`, `4.0 GiB`.
/// (The wording lives in `envhost-files`, the lowest crate, whose refusals
/// of oversized files say sizes too.)
pub fn bytes(bytes: u64) -> String {
    envhost_files::untrusted::size_words(bytes)
}

/// `noun` in the form that goes with `count`: `line`, `lines`;
/// `process`, `processes`.
pub fn noun(count: usize, noun: &str) -> String {
    if count == 1 {
        noun.to_owned()
    } else if noun.ends_with(['s', 'x']) || noun.ends_with("sh") || noun.ends_with("ch") {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

/// `count` with its noun: `1 line`, `3 lines`.
pub fn counted(count: usize, singular: &str) -> String {
    format!("{count} {}", noun(count, singular))
}

/// `items` as a sentence lists them: `a`, `a and b`, `a, b and c`.
pub fn listed(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// How every message quotes a command, a name or a line: its first line in
/// backquotes, cut after `max_chars` characters, with `…` when anything was
/// left out (the rest of the line, or the lines after it).
pub fn quoted(text: &str, max_chars: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let cut: String = first.chars().take(max_chars).collect();
    let more = if cut.len() < text.len() { "…" } else { "" };
    format!("`{cut}{more}`")
}

/// Each item quoted in backquotes, joined with commas: `` `a`, `b` ``.
pub fn quoted_list<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|item| format!("`{}`", item.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The longest start of `text` that is at most `limit` bytes and ends on a
/// character boundary, and how many bytes it leaves out.
pub fn head(text: &str, limit: usize) -> (&str, usize) {
    let end = text.floor_char_boundary(limit);
    (&text[..end], text.len() - end)
}

/// Why a duration as written cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum UnreadableDuration {
    /// Not a duration at all (humantime's words).
    #[error("{0}; write a duration such as 90s, 2m or 500ms")]
    Unreadable(humantime::DurationError),
    /// Zero, which no limit means.
    #[error("the duration must be longer than zero")]
    Zero,
}

/// Reads a duration as the command line and config files write it (`90s`,
/// `2m`, `500ms`); zero is refused.
pub fn parse_duration(text: &str) -> Result<Duration, UnreadableDuration> {
    let duration = humantime::parse_duration(text).map_err(UnreadableDuration::Unreadable)?;
    if duration.is_zero() {
        return Err(UnreadableDuration::Zero);
    }
    Ok(duration)
}

/// Why a size as written cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnreadableSize {
    /// The text does not start with a number.
    #[error("{0:?} is not a size; write e.g. 65536, 128KiB or 1MiB")]
    NotASize(String),
    /// A unit other than B, K, M or G.
    #[error("unknown size unit {0:?}; use K, M or G")]
    UnknownUnit(String),
    /// Zero, which no limit means.
    #[error("the size must be larger than zero")]
    Zero,
    /// More bytes than the machine can count.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// Reads `65536`, `64K`, `64KiB`, `1M`, `1MiB`, `1MB` (binary multiples);
/// zero is refused.
pub fn parse_size(text: &str) -> Result<usize, UnreadableSize> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits
        .parse()
        .map_err(|_| UnreadableSize::NotASize(text.to_owned()))?;
    let multiplier: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(UnreadableSize::UnknownUnit(other.to_owned())),
    };
    match number.checked_mul(multiplier) {
        Some(0) => Err(UnreadableSize::Zero),
        Some(bytes) => Ok(bytes),
        None => Err(UnreadableSize::TooLarge(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_names_are_quoted_one_way() {
        assert_eq!(quoted("ls -la", 60), "`ls -la`");
        assert_eq!(quoted("make\nmake test", 60), "`make…`");
        assert_eq!(quoted("abcdef", 3), "`abc…`");
        assert_eq!(quoted("héllo", 2), "`hé…`");
        assert_eq!(quoted_list(&["a", "b"]), "`a`, `b`");
        assert_eq!(quoted_list::<&str>(&[]), "");
        assert_eq!(counted(1, "process"), "1 process");
        assert_eq!(counted(2, "process"), "2 processes");
        assert_eq!(counted(3, "line"), "3 lines");
    }

    #[test]
    fn sizes_and_durations_read_naturally() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(94_908), "92.7 KiB");
        assert_eq!(bytes(256 << 20), "256 MiB");
        assert_eq!(bytes(4 << 30), "4.0 GiB");
        assert_eq!(duration(Duration::from_micros(42)), "42 µs");
        assert_eq!(duration(Duration::from_micros(2_500)), "2.5 ms");
        assert_eq!(duration(Duration::from_millis(300)), "300 ms");
        assert_eq!(duration(Duration::from_secs(120)), "120 s");
        assert_eq!(duration(Duration::from_millis(1_500)), "1.5 s");
    }

    #[test]
    fn counts_take_their_noun() {
        assert_eq!(counted(1, "line"), "1 line");
        assert_eq!(counted(0, "line"), "0 lines");
        assert_eq!(noun(3, "line"), "lines");
    }

    #[test]
    fn fragments_start_sentences() {
        assert_eq!(capitalized("interrupted"), "Interrupted");
        assert_eq!(capitalized(""), "");
    }

    #[test]
    fn heads_end_on_a_character_boundary() {
        assert_eq!(head("héllo", 2), ("h", 5));
        assert_eq!(head("abc", 10), ("abc", 0));
    }

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("128KiB"), Ok(128 * 1024));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
