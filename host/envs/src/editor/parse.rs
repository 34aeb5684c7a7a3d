//! The arguments of the editor's commands, read from the text after the
//! command word.
//!
//! This module owns the command syntax: `/pattern/` delimiters (an optional
//! `to` between the two), quoted paths and labels, line ranges, search
//! patterns and globs, and how the content lines after `edit` / `create` are
//! split. Every refusal says what was expected, with an example. It must not
//! touch files or compile patterns.

/// `view <file> /<start>/ [to] /<end>/ [label]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewArgs {
    pub file: String,
    pub start: String,
    pub end: String,
    pub label: Option<String>,
}

/// An inclusive, 1-based range of lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    pub first: usize,
    pub last: usize,
}

impl LineRange {
    pub fn len(&self) -> usize {
        self.last - self.first + 1
    }

    pub fn contains(&self, line: usize) -> bool {
        (self.first..=self.last).contains(&line)
    }
}

/// `search "<pattern>" [glob ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchArgs {
    pub pattern: String,
    pub globs: Vec<String>,
}

/// What is wrong with an editor command's arguments, with its usage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadUsage(String);

impl From<String> for BadUsage {
    fn from(message: String) -> Self {
        BadUsage(message)
    }
}

pub const VIEW_USAGE: &str =
    "view <file> /<start>/ /<end>/ [label], e.g. view src/main.py /^def main/ /^if __name__/";
pub const EDIT_USAGE: &str =
    "edit <file> <start>-<end> with the new lines after it, e.g. edit src/main.py 45-50";
pub const SEARCH_USAGE: &str = "search \"<pattern>\" <glob>, e.g. search \"TODO\" *.py";

pub fn view_args(args: &str) -> Result<ViewArgs, BadUsage> {
    let Some((file, rest)) = take_word(args) else {
        return Err(format!("view needs a file and two patterns: {VIEW_USAGE}").into());
    };
    let rest = rest.trim_start();
    let (start, rest) = take_pattern(rest, "start", &file)?;
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix("to") {
        Some(after)
            if after.trim_start().starts_with('/') && after.starts_with(char::is_whitespace) =>
        {
            after.trim_start()
        }
        _ => rest,
    };
    let (end, rest) = take_pattern(rest, "end", &file)?;
    let label = unquote(rest.trim());
    Ok(ViewArgs {
        file,
        start,
        end,
        label: (!label.is_empty()).then(|| label.to_owned()),
    })
}

/// A `/pattern/`: it ends at the first unescaped `/` followed by a space or
/// the end of the line, so `/a/b/` is the pattern `a/b`; write `\/` for a
/// `/` that is followed by a space.
fn take_pattern<'a>(text: &'a str, which: &str, file: &str) -> Result<(String, &'a str), BadUsage> {
    let Some(body) = text.strip_prefix('/') else {
        let found = if text.is_empty() {
            "nothing".to_owned()
        } else {
            format!("{:?}", text.split_whitespace().next().unwrap_or(text))
        };
        return Err(format!(
            "expected the {which} pattern as /<pattern>/ after {file}, found {found}; {VIEW_USAGE} (quote a path that has spaces)"
        ).into());
    };
    let mut escaped = false;
    for (at, c) in body.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '/' => {
                let after = &body[at + 1..];
                if after.is_empty() || after.starts_with(char::is_whitespace) {
                    return Ok((body[..at].to_owned(), after));
                }
            }
            _ => {}
        }
    }
    Err(format!(
        "the {which} pattern /{body} is not closed: end it with / followed by a space; {VIEW_USAGE}"
    )
    .into())
}

/// `<file> <start>-<end>`; the file may contain spaces (the range is the
/// last word).
pub fn edit_args(args: &str) -> Result<(String, LineRange), BadUsage> {
    let args = args.trim();
    let Some((file, range)) = args.rsplit_once(char::is_whitespace) else {
        return Err(format!("edit needs a file and a line range: {EDIT_USAGE}").into());
    };
    let file = unquote(file.trim());
    if file.is_empty() {
        return Err(format!("edit needs a file and a line range: {EDIT_USAGE}").into());
    }
    Ok((file.to_owned(), line_range(range)?))
}

fn line_range(text: &str) -> Result<LineRange, BadUsage> {
    let number = |part: &str| -> Result<usize, BadUsage> {
        match part.trim().parse::<usize>() {
            Ok(0) => Err("line numbers start at 1".to_owned().into()),
            Ok(n) => Ok(n),
            Err(_) => Err(format!(
                "{text:?} is not a line range; write <start>-<end> with the line numbers shown in a view, e.g. 45-50 (or 45 for one line)"
            ).into()),
        }
    };
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => (number(first)?, number(last)?),
        None => {
            let line = number(text)?;
            (line, line)
        }
    };
    if last < first {
        return Err(format!(
            "the range {first}-{last} ends before it starts; write the first line, then the last (e.g. {last}-{first})"
        ).into());
    }
    Ok(LineRange { first, last })
}

pub fn search_args(args: &str) -> Result<SearchArgs, BadUsage> {
    let args = args.trim();
    if args.is_empty() {
        return Err(format!("search needs a pattern: {SEARCH_USAGE}").into());
    }
    let (pattern, rest) = match args.chars().next() {
        Some(quote @ ('"' | '\'' | '/')) => {
            let body = &args[1..];
            let mut escaped = false;
            let mut end = None;
            for (at, c) in body.char_indices() {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == quote {
                    let after = &body[at + 1..];
                    if after.is_empty() || after.starts_with(char::is_whitespace) {
                        end = Some(at);
                        break;
                    }
                }
            }
            let Some(end) = end else {
                return Err(format!(
                    "the pattern {quote}{body} is not closed with {quote}; {SEARCH_USAGE}"
                )
                .into());
            };
            (body[..end].to_owned(), &body[end + 1..])
        }
        _ => match take_word(args) {
            Some((word, rest)) => (word, rest),
            None => return Err(format!("search needs a pattern: {SEARCH_USAGE}").into()),
        },
    };
    let mut globs = Vec::new();
    let mut rest = rest;
    while let Some((glob, after)) = take_word(rest) {
        globs.push(glob);
        rest = after;
    }
    Ok(SearchArgs { pattern, globs })
}

/// `<id>` for close / next_match / prev_match; `[2]` is accepted too.
pub fn view_id(args: &str, command: &str) -> Result<u32, BadUsage> {
    let text = args.trim();
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    bare.parse::<u32>().map_err(|_| {
        BadUsage(if text.is_empty() {
            format!(
                "{command} needs a view id, e.g. {command} 1 (ids are shown as [1] on the screen)"
            )
        } else {
            format!(
                "{text:?} is not a view id; write {command} 1 (ids are shown as [1] on the screen)"
            )
        })
    })
}

/// The file of `create <file>`: the whole argument (it may have spaces).
pub fn file_arg(args: &str, usage: &str) -> Result<String, BadUsage> {
    let file = unquote(args.trim());
    if file.is_empty() {
        return Err(format!("no file given; {usage}").into());
    }
    Ok(file.to_owned())
}

/// The lines after the command line, without their endings. A final line
/// ending ends the last line rather than adding an empty one, so `edit f
/// 3-3` followed by nothing deletes line 3 and a lone empty line replaces
/// it with one empty line.
pub fn content_lines(body: Option<&str>) -> Vec<String> {
    match body {
        None | Some("") => Vec::new(),
        Some(body) => {
            let body = body.strip_suffix('\n').unwrap_or(body);
            body.split('\n')
                .map(|line| line.strip_suffix('\r').unwrap_or(line).to_owned())
                .collect()
        }
    }
}

/// The next word, or a quoted string with the quotes removed.
fn take_word(text: &str) -> Option<(String, &str)> {
    let text = text.trim_start();
    let first = text.chars().next()?;
    if (first == '"' || first == '\'')
        && let Some(close) = text[1..].find(first)
    {
        return Some((text[1..1 + close].to_owned(), &text[close + 2..]));
    }
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    Some((text[..end].to_owned(), &text[end..]))
}

fn unquote(text: &str) -> &str {
    for quote in ['"', '\''] {
        if text.len() >= 2 && text.starts_with(quote) && text.ends_with(quote) {
            return &text[1..text.len() - 1];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(args: &str) -> ViewArgs {
        view_args(args).unwrap()
    }

    #[test]
    fn view_accepts_both_seed_forms_and_labels() {
        let plain = view(r"src/main.c /^int main\(/ /^}$/");
        assert_eq!(
            (
                plain.file.as_str(),
                plain.start.as_str(),
                plain.end.as_str()
            ),
            ("src/main.c", r"^int main\(", "^}$")
        );
        assert_eq!(plain.label, None);
        let with_to = view(r"src/api.py /^class APIHandler/ to /^class \w+/ APIHandler");
        assert_eq!(with_to.end, r"^class \w+");
        assert_eq!(with_to.label.as_deref(), Some("APIHandler"));
        let quoted = view(r#""my notes.md" /^## Installation/ /^## Usage/ "install steps""#);
        assert_eq!(quoted.file, "my notes.md");
        assert_eq!(quoted.start, "^## Installation");
        assert_eq!(quoted.label.as_deref(), Some("install steps"));
        // A `/` inside a pattern needs no escape unless a space follows it.
        let slashes = view(r#"a.html /<a href="x/y">/ /<\/a> end/"#);
        assert_eq!(
            (slashes.start.as_str(), slashes.end.as_str()),
            (r#"<a href="x/y">"#, r"<\/a> end")
        );
        // `to` may also be a label when no pattern follows it.
        assert_eq!(view("f /a/ /b/ to").label.as_deref(), Some("to"));
    }

    #[test]
    fn view_errors_say_what_was_expected() {
        assert!(
            view_args("")
                .unwrap_err()
                .to_string()
                .contains("view <file>")
        );
        assert!(
            view_args("src/main.py")
                .unwrap_err()
                .to_string()
                .contains("expected the start pattern")
        );
        assert!(
            view_args("src/main.py /a/")
                .unwrap_err()
                .to_string()
                .contains("expected the end pattern")
        );
        assert!(
            view_args("src/main.py /abc")
                .unwrap_err()
                .to_string()
                .contains("not closed")
        );
        assert!(
            view_args("my file.py /a/ /b/")
                .unwrap_err()
                .to_string()
                .contains("quote a path")
        );
    }

    #[test]
    fn edit_ranges() {
        assert_eq!(
            edit_args("src/main.c 121-121").unwrap(),
            (
                "src/main.c".to_owned(),
                LineRange {
                    first: 121,
                    last: 121
                }
            )
        );
        assert_eq!(
            edit_args("a b.txt 7").unwrap(),
            ("a b.txt".to_owned(), LineRange { first: 7, last: 7 })
        );
        assert!(
            edit_args("f 0-3")
                .unwrap_err()
                .to_string()
                .contains("start at 1")
        );
        assert!(
            edit_args("f 9-3")
                .unwrap_err()
                .to_string()
                .contains("ends before it starts")
        );
        assert!(
            edit_args("f lines")
                .unwrap_err()
                .to_string()
                .contains("not a line range")
        );
        assert!(
            edit_args("f")
                .unwrap_err()
                .to_string()
                .contains("needs a file and a line range")
        );
    }

    #[test]
    fn search_patterns_and_globs() {
        assert_eq!(
            search_args(r#""TODO" *.py"#).unwrap(),
            SearchArgs {
                pattern: "TODO".into(),
                globs: vec!["*.py".into()]
            }
        );
        assert_eq!(
            search_args(r#""say \"hi\"" src/**/*.rs *.md"#)
                .unwrap()
                .globs
                .len(),
            2
        );
        assert_eq!(search_args(r#""a\"b" x"#).unwrap().pattern, r#"a\"b"#);
        assert_eq!(
            search_args("fn\\s+main").unwrap(),
            SearchArgs {
                pattern: "fn\\s+main".into(),
                globs: vec![]
            }
        );
        assert_eq!(
            search_args("/x y/ '*.txt'").unwrap(),
            SearchArgs {
                pattern: "x y".into(),
                globs: vec!["*.txt".into()]
            }
        );
        assert!(
            search_args(r#""open *.py"#)
                .unwrap_err()
                .to_string()
                .contains("not closed")
        );
        assert!(search_args("  ").is_err());
    }

    #[test]
    fn content_lines_follow_the_command() {
        assert_eq!(content_lines(None), Vec::<String>::new());
        assert_eq!(content_lines(Some("")), Vec::<String>::new());
        assert_eq!(content_lines(Some("\n")), vec![String::new()]);
        assert_eq!(content_lines(Some("  a\r\n\nb\n")), vec!["  a", "", "b"]);
        assert_eq!(content_lines(Some("x")), vec!["x"]);
    }

    #[test]
    fn ids() {
        assert_eq!(view_id(" 2 ", "close"), Ok(2));
        assert_eq!(view_id("[3]", "close"), Ok(3));
        assert!(
            view_id("", "close")
                .unwrap_err()
                .to_string()
                .contains("needs a view id")
        );
        assert!(
            view_id("one", "next_match")
                .unwrap_err()
                .to_string()
                .contains("not a view id")
        );
    }
}
