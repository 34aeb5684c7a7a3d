//! The editor's regular expressions: written as an agent writes them
//! (Python's `re` syntax), run by Rust's `regex` engine, one line at a time.
//!
//! This module owns the translation of the Python-isms that Rust's syntax
//! spells differently or refuses (`\Z`, a literal `{`, `[` inside a class,
//! `{,n}`), the clear refusal of what the engine cannot do (look-around,
//! back-references), the escaped-literal patterns that replace edited
//! boundary lines, and line-oriented matching over a whole file. It must not
//! read files or know about views: callers hand it bytes.
//!
//! Matching is line-oriented: a match never spans a line break (`\s` and
//! `[^x]` do not match `\n`), `^` and `$` anchor at every line's start and
//! end (before `\r\n` too), and each line counts at most once. The haystack
//! is a whole file without its final line ending, so `\A` matches only on
//! the first line and `\z` only on the last.

use std::fmt;

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};

/// A compiled pattern and the text the agent wrote for it.
#[derive(Clone)]
pub struct LinePattern {
    source: String,
    matcher: RegexMatcher,
}

impl fmt::Debug for LinePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/", self.source)
    }
}

/// A pattern the editor cannot use, with the reason in the agent's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern /{pattern}/: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

impl LinePattern {
    /// Compiles a pattern written in Python's `re` syntax.
    pub fn compile(source: &str) -> Result<Self, PatternError> {
        let fail = |reason: String| PatternError {
            pattern: source.to_owned(),
            reason,
        };
        if source.is_empty() {
            return Err(fail(
                "the pattern is empty; write what the line should contain, e.g. /^def main/"
                    .to_owned(),
            ));
        }
        let translated = translate(source).map_err(|why| fail(why.to_string()))?;
        let matcher = line_matcher(&translated).map_err(|e| fail(e.to_string()))?;
        Ok(LinePattern {
            source: source.to_owned(),
            matcher,
        })
    }

    /// The pattern that matches exactly this line and nothing else: what an
    /// edited boundary line becomes. `/` is escaped too, so the pattern can
    /// be copied into a `view` command as shown.
    /// (It can only fail on a line too long for the engine's size limit.)
    pub fn literal(line: &str) -> Result<Self, PatternError> {
        let source = literal_source(line);
        match line_matcher(&source) {
            Ok(matcher) => Ok(LinePattern { source, matcher }),
            Err(err) => Err(PatternError {
                pattern: source,
                reason: err.to_string(),
            }),
        }
    }

    /// The pattern as the agent wrote it (or as [`literal`](Self::literal)
    /// made it), without delimiters.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn matcher(&self) -> &RegexMatcher {
        &self.matcher
    }

    /// The offset of the start of the first line at or after `from` (a line
    /// start) that the pattern matches, in `haystack`.
    ///
    /// `cut` says that `haystack` was cut just after a line ending, inside a
    /// larger text: the empty position at its very end is then the start of
    /// a line outside the window, and does not count.
    pub fn first_line_from(&self, haystack: &[u8], from: usize, cut: bool) -> Option<usize> {
        if from > haystack.len() {
            return None;
        }
        let found = self.matcher.find_at(haystack, from).ok().flatten()?;
        if cut && found.start() == haystack.len() {
            return None;
        }
        Some(line_start(haystack, found.start()))
    }

    /// Offsets of the starts of every line the pattern matches, in order.
    pub fn matching_line_starts(&self, haystack: &[u8]) -> Vec<usize> {
        let mut starts = Vec::new();
        let mut at = 0;
        while let Some(start) = self.first_line_from(haystack, at, false) {
            starts.push(start);
            match memchr::memchr(b'\n', &haystack[start..]) {
                Some(newline) => at = start + newline + 1,
                None => break,
            }
        }
        starts
    }
}

/// Builds the matcher every editor pattern runs on (views and search).
fn line_matcher(pattern: &str) -> Result<RegexMatcher, grep_regex::Error> {
    RegexMatcherBuilder::new()
        .multi_line(true)
        .crlf(true)
        .line_terminator(Some(b'\n'))
        .build(pattern)
}

fn line_start(haystack: &[u8], offset: usize) -> usize {
    memchr::memrchr(b'\n', &haystack[..offset]).map_or(0, |newline| newline + 1)
}

/// `^<escaped line>$`, with `/` escaped as well.
pub fn literal_source(line: &str) -> String {
    format!("^{}$", regex::escape(line).replace('/', "\\/"))
}

/// Why a Python pattern cannot run on the editor's engine, in the agent's
/// terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Untranslatable(String);

impl From<String> for Untranslatable {
    fn from(reason: String) -> Self {
        Untranslatable(reason)
    }
}

/// Rewrites a Python `re` pattern into Rust `regex` syntax, or says why the
/// Rust engine cannot run it.
pub fn translate(python: &str) -> Result<String, Untranslatable> {
    let mut translation = Translation {
        chars: python.chars().collect(),
        out: String::with_capacity(python.len() + 8),
        at: 0,
        in_class: false,
    };
    while let Some(&c) = translation.chars.get(translation.at) {
        if c == '\\' {
            translation.escape()?;
        } else if translation.in_class {
            translation.class_member(c);
        } else {
            translation.outside_class(c)?;
        }
    }
    Ok(translation.out)
}

/// A pattern being translated, one construct at a time.
struct Translation {
    chars: Vec<char>,
    out: String,
    /// The next character to read.
    at: usize,
    /// Inside `[...]`.
    in_class: bool,
}

impl Translation {
    /// A backslash and what it escapes.
    fn escape(&mut self) -> Result<(), Untranslatable> {
        let chars = &self.chars;
        let out = &mut self.out;
        let Some(&next) = chars.get(self.at + 1) else {
            return Err(
                "the pattern ends with a lone backslash; write \\\\ for a literal backslash"
                    .to_owned()
                    .into(),
            );
        };
        self.at += 2;
        if self.in_class {
            match next {
                // In a Python class `\b` is a backspace; Rust refuses it.
                'b' => out.push_str("\\x08"),
                _ => {
                    out.push('\\');
                    out.push(next);
                }
            }
            return Ok(());
        }
        match next {
            'Z' => out.push_str("\\z"),
            '1'..='9' => {
                return Err(format!(
                    "back-references (\\{next}) are not supported: the editor's regex engine runs in linear time and cannot refer back to a group"
                )
                .into());
            }
            '0' => {
                let digits: String = chars[self.at..]
                    .iter()
                    .take(2)
                    .take_while(|d| ('0'..='7').contains(*d))
                    .collect();
                self.at += digits.len();
                let value = u32::from_str_radix(&format!("0{digits}"), 8).unwrap_or(0);
                out.push_str(&format!("\\x{{{value:X}}}"));
            }
            _ => {
                out.push('\\');
                out.push(next);
            }
        }
        Ok(())
    }

    /// A character inside `[...]`.
    fn class_member(&mut self, c: char) {
        match c {
            ']' => {
                self.in_class = false;
                self.out.push(']');
            }
            // Literal in Python; a nested class or a set operator in Rust.
            '[' | '&' | '~' => {
                self.out.push('\\');
                self.out.push(c);
            }
            _ => self.out.push(c),
        }
        self.at += 1;
    }

    /// A character outside any class.
    fn outside_class(&mut self, c: char) -> Result<(), Untranslatable> {
        let chars = &self.chars;
        let i = &mut self.at;
        let out = &mut self.out;
        match c {
            '[' => {
                self.in_class = true;
                out.push('[');
                *i += 1;
                if chars.get(*i) == Some(&'^') {
                    out.push('^');
                    *i += 1;
                }
                // A `]` right after the opening is a literal in both syntaxes.
                if chars.get(*i) == Some(&']') {
                    out.push_str("\\]");
                    *i += 1;
                }
            }
            '{' => match counted_repetition(&chars[*i..]) {
                Some((rust, consumed)) => {
                    out.push_str(&rust);
                    *i += consumed;
                    refuse_possessive(chars, *i)?;
                }
                None => {
                    out.push_str("\\{");
                    *i += 1;
                }
            },
            '(' => {
                let rest: String = chars[*i..].iter().take(4).collect();
                if rest.starts_with("(?#") {
                    let close = chars[*i..].iter().position(|&d| d == ')').ok_or_else(|| {
                        Untranslatable("the comment (?#... is not closed with )".to_owned())
                    })?;
                    *i += close + 1;
                    return Ok(());
                }
                if let Some(reason) = unsupported_group(&rest) {
                    return Err(reason.into());
                }
                out.push('(');
                *i += 1;
            }
            '*' | '+' | '?' => {
                out.push(c);
                *i += 1;
                if chars.get(*i) == Some(&'?') {
                    // Lazy: same syntax in both.
                    out.push('?');
                    *i += 1;
                }
                refuse_possessive(chars, *i)?;
            }
            _ => {
                out.push(c);
                *i += 1;
            }
        }
        Ok(())
    }
}

/// A Python repetition `{m}`, `{m,}`, `{,n}`, `{m,n}` at the start of
/// `chars`, in Rust syntax, with the number of characters it took; `None`
/// when the brace is a literal (as Python reads `{` that starts no
/// repetition, e.g. in `int main() {`).
fn counted_repetition(chars: &[char]) -> Option<(String, usize)> {
    let close = chars.iter().position(|&c| c == '}')?;
    let inner: String = chars[1..close].iter().collect();
    let (low, high) = match inner.split_once(',') {
        Some((low, high)) => (low, Some(high)),
        None => (inner.as_str(), None),
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if !digits(low) || !high.is_none_or(digits) {
        return None;
    }
    let rust = match high {
        None if low.is_empty() => return None,
        None => format!("{{{low}}}"),
        Some(high) if low.is_empty() && high.is_empty() => return None,
        Some(high) if low.is_empty() => format!("{{0,{high}}}"),
        Some(high) => format!("{{{low},{high}}}"),
    };
    let mut consumed = close + 1;
    if chars.get(consumed) == Some(&'?') {
        consumed += 1;
        return Some((format!("{rust}?"), consumed));
    }
    Some((rust, consumed))
}

fn refuse_possessive(chars: &[char], at: usize) -> Result<(), Untranslatable> {
    if chars.get(at) == Some(&'+') {
        return Err(
            "possessive repetitions (*+, ++, ?+) are not supported; a plain repetition matches the same lines here"
                .to_owned()
                .into(),
        );
    }
    Ok(())
}

fn unsupported_group(start: &str) -> Option<String> {
    let what = if start.starts_with("(?<=") || start.starts_with("(?<!") {
        "look-behind (?<=...) / (?<!...)"
    } else if start.starts_with("(?=") || start.starts_with("(?!") {
        "look-ahead (?=...) / (?!...)"
    } else if start.starts_with("(?P=") {
        "named back-references (?P=name)"
    } else if start.starts_with("(?>") {
        "atomic groups (?>...)"
    } else if start.starts_with("(?(") {
        "conditional groups (?(...)...)"
    } else {
        return None;
    };
    Some(format!(
        "{what} are not supported: the editor's regex engine (Rust's `regex`) runs in linear time and has no look-around or back-references; match the text itself instead"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(pattern: &str, text: &str) -> Vec<usize> {
        let compiled = LinePattern::compile(pattern).unwrap();
        // As views search: the file without its final line ending.
        let haystack = crate::editor::lines::searchable(text.as_bytes());
        compiled
            .matching_line_starts(haystack)
            .into_iter()
            .map(|start| haystack[..start].iter().filter(|&&b| b == b'\n').count() + 1)
            .collect()
    }

    #[test]
    fn python_isms_translate() {
        assert_eq!(translate(r"^int main() {").unwrap(), r"^int main() \{");
        assert_eq!(translate(r"^}$").unwrap(), r"^}$");
        assert_eq!(
            translate(r"a{2}b{1,}c{,3}d{2,4}?").unwrap(),
            r"a{2}b{1,}c{0,3}d{2,4}?"
        );
        assert_eq!(translate(r"x{a}").unwrap(), r"x\{a}");
        assert_eq!(translate(r"end\Z").unwrap(), r"end\z");
        assert_eq!(translate(r"[[]x[]a][^]b]").unwrap(), r"[\[]x[\]a][^\]b]");
        assert_eq!(translate(r"[a&&b~~c]").unwrap(), r"[a\&\&b\~\~c]");
        assert_eq!(translate(r"[\b]").unwrap(), r"[\x08]");
        assert_eq!(translate(r"a(?#note)b").unwrap(), "ab");
        assert_eq!(translate(r"\012").unwrap(), r"\x{A}");
        assert_eq!(translate(r"(?P<name>\w+)").unwrap(), r"(?P<name>\w+)");
    }

    #[test]
    fn unsupported_features_are_named() {
        for (pattern, fragment) in [
            (r"foo(?=bar)", "look-ahead"),
            (r"(?<!x)y", "look-behind"),
            (r"(a)\1", "back-references"),
            (r"(?P<q>a)(?P=q)", "named back-references"),
            (r"a*+", "possessive"),
            (r"(?>a)", "atomic"),
            ("a\\", "lone backslash"),
        ] {
            let err = LinePattern::compile(pattern).unwrap_err();
            assert!(err.reason.contains(fragment), "{pattern}: {err}");
            assert!(
                err.to_string()
                    .starts_with(&format!("invalid pattern /{pattern}/"))
            );
        }
        assert!(
            LinePattern::compile("")
                .unwrap_err()
                .reason
                .contains("empty")
        );
        assert!(LinePattern::compile("a(b").is_err());
    }

    #[test]
    fn matching_is_per_line() {
        let text = "int main_helper() {\n  x;\n}\n\n\nint main(int argc) {\n}\n";
        assert_eq!(lines(r"^int main\(", text), vec![6]);
        assert_eq!(lines(r"^int main", text), vec![1, 6]);
        assert_eq!(lines(r"^}$", text), vec![3, 7]);
        assert_eq!(
            lines(r"^\s*$", text),
            vec![4, 5],
            "\\s must not cross lines"
        );
        assert_eq!(lines(r"\d+", "a1\nb\nc22 33\n"), vec![1, 3]);
        assert_eq!(lines(r"\w+\(", "  call(x)\n"), vec![1]);
    }

    #[test]
    fn crlf_lines_and_file_anchors() {
        assert_eq!(lines(r"^b$", "a\r\nb\r\nc"), vec![2]);
        assert_eq!(lines(r"\A", "a\nb\nc"), vec![1]);
        assert_eq!(lines(r"\z", "a\nb\nc"), vec![3]);
        assert_eq!(lines(r"^$", "a\n\nb"), vec![2]);
    }

    #[test]
    fn a_cut_window_does_not_match_past_its_end() {
        let pattern = LinePattern::compile("^$").unwrap();
        // The window holds "a\n"; the position after it is the next line.
        assert_eq!(pattern.first_line_from(b"a\n", 0, true), None);
        assert_eq!(pattern.first_line_from(b"a\n", 0, false), Some(2));
    }

    #[test]
    fn literals_match_exactly_their_line() {
        let literal = LinePattern::literal("int main(void) { // a/b $x").unwrap();
        assert_eq!(literal.source(), r"^int main\(void\) \{ \/\/ a\/b \$x$");
        let text = "int main(void) { // a/b $x\n  int main(void) { // a/b $x\n";
        assert_eq!(lines(literal.source(), text), vec![1]);
        // What the screen shows can be typed back into a view command.
        assert!(LinePattern::compile(literal.source()).is_ok());
        assert_eq!(LinePattern::literal("}").unwrap().source(), r"^\}$");
    }
}
