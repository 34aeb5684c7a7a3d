//! Verified line edits: the lines must be
//! visible in a view, must still hold what the view showed, and are
//! replaced without disturbing a single other byte of the file.
//!
//! This module owns the checks (visible? unchanged?) and their messages,
//! the splice itself (line endings and a missing final newline kept, lines
//! not edited kept byte for byte even when they are not UTF-8), and where a
//! view's boundaries land after an edit, so its patterns can follow the
//! edited lines. It must not read or write files (it is handed bytes) nor
//! hold views.

use std::fmt::Write as _;

use super::lines::{
    display, dominant_ending, line_start, line_starting_at, lines_from, offset_after_lines,
};
use super::parse::LineRange;
use super::views::Shown;

/// How many differing lines a "file changed" refusal lists.
const MAX_LISTED_DIFFERENCES: usize = 10;

/// A view of the edited file, as the last screen showed it.
pub struct VisibleView<'a> {
    pub id: u32,
    pub shown: &'a Shown,
}

/// Why an edit was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Some lines of the range are in no view.
    NotVisible { missing: Vec<usize> },
    /// The file no longer holds what the views showed.
    Changed { differences: Vec<Difference> },
}

/// One line that is not what the screen showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub line: usize,
    pub view: u32,
    pub expected: Vec<u8>,
    /// `None` when the file no longer has that line.
    pub actual: Option<Vec<u8>>,
}

/// Checks that every line of `range` is in a view and still holds what
/// that view showed in `current`, the file's bytes now.
pub fn verify(range: LineRange, views: &[VisibleView<'_>], current: &[u8]) -> Result<(), Refusal> {
    // Only the lines of the range are looked at: no index of the file.
    let actual_lines = lines_from(current, line_start(current, range.first), range.len());
    let mut missing = Vec::new();
    let mut differences = Vec::new();
    for number in range.first..=range.last {
        let Some((id, expected)) = views
            .iter()
            .find_map(|v| v.shown.line(number).map(|text| (v.id, text)))
        else {
            missing.push(number);
            continue;
        };
        let actual = actual_lines.get(number - range.first).copied();
        if actual != Some(expected) {
            differences.push(Difference {
                line: number,
                view: id,
                expected: expected.to_vec(),
                actual: actual.map(<[u8]>::to_vec),
            });
        }
    }
    if !missing.is_empty() {
        return Err(Refusal::NotVisible { missing });
    }
    if !differences.is_empty() {
        return Err(Refusal::Changed { differences });
    }
    Ok(())
}

/// The file with lines `range` replaced by `new_lines`.
///
/// New lines get the line ending of the first line they replace (the
/// file's usual ending if it had none); every other byte is kept; a file
/// that did not end with a line ending still does not. The bytes before
/// and after the range are copied as two blocks into a buffer of the exact
/// size: no index of the file's lines is built.
pub fn splice(bytes: &[u8], range: LineRange, new_lines: &[String]) -> Vec<u8> {
    let start = line_start(bytes, range.first);
    let end = offset_after_lines(bytes, start, range.len());
    let ending: &[u8] = match line_starting_at(bytes, start) {
        Some(line) if !line.ending.is_empty() => line.ending,
        _ => dominant_ending(bytes),
    };
    let had_final_ending = bytes.is_empty() || bytes.ends_with(b"\n");
    let inserted: usize = new_lines.iter().map(|l| l.len() + ending.len()).sum();
    let mut out = Vec::with_capacity(start + inserted + (bytes.len() - end));
    out.extend_from_slice(&bytes[..start]);
    for line in new_lines {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(ending);
    }
    out.extend_from_slice(&bytes[end..]);
    if !had_final_ending {
        if out.ends_with(b"\r\n") {
            out.truncate(out.len() - 2);
        } else if out.ends_with(b"\n") {
            out.truncate(out.len() - 1);
        }
    }
    out
}

/// Where a view's section lies after an edit, and which of its boundary
/// lines the edit replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boundaries {
    /// 1-based line where the section now starts.
    pub first_line: usize,
    /// 1-based line where it now ends.
    pub last_line: usize,
    pub start_replaced: bool,
    pub end_replaced: bool,
}

/// Follows a section `[first, last]` through replacing `range` with
/// `new_len` lines. `None` when the edit removed the whole section.
pub fn boundaries_after(
    first: usize,
    last: usize,
    range: LineRange,
    new_len: usize,
) -> Option<Boundaries> {
    // Only called for lines outside the range: those below it are at
    // least `range.len() + 1`, so the subtraction cannot underflow.
    let moved = |line: usize| {
        if line < range.first {
            line
        } else {
            line + new_len - range.len()
        }
    };
    let start_replaced = range.contains(first);
    let end_replaced = range.contains(last);
    let first_line = if start_replaced {
        range.first
    } else {
        moved(first)
    };
    let last_line = match (end_replaced, new_len) {
        (true, 0) => range.first.checked_sub(1)?,
        (true, _) => range.first + new_len - 1,
        (false, _) => moved(last),
    };
    (first_line <= last_line).then_some(Boundaries {
        first_line,
        last_line,
        start_replaced,
        end_replaced,
    })
}

/// The recovery steps for an edit of a file
/// no view shows. `suggested` is a view command for those lines.
pub fn no_view_help(file: &str, range: LineRange, suggested: &str) -> String {
    format!(
        "Cannot edit - no view contains line {first}\n\
         \n\
         To edit a file:\n  \
           1. Create a view first: {suggested}\n  \
           2. See line numbers in the view on screen\n  \
           3. Edit using those lines: edit {file} {first}-{last}\n\
         \n\
         The view command is shown above in the Commands section.",
        first = range.first,
        last = range.last,
    )
}

/// The refusal's message for the agent.
pub fn describe_refusal(
    refusal: &Refusal,
    file: &str,
    range: LineRange,
    views: &[VisibleView<'_>],
) -> String {
    match refusal {
        Refusal::NotVisible { missing } => {
            let mut out = format!(
                "Can only edit lines visible in a view: {} of {file} {} not shown in any view.\n",
                describe_lines(missing),
                if missing.len() == 1 { "is" } else { "are" }
            );
            for view in views {
                let _ = writeln!(
                    out,
                    "View [{}] shows lines {}-{} of {file}.",
                    view.id,
                    view.shown.first_line,
                    view.shown.last_line()
                );
            }
            let _ = write!(
                out,
                "Edit lines shown in a view, or open a view that shows lines {}-{}: view {file} /<start>/ /<end>/",
                range.first, range.last
            );
            out
        }
        Refusal::Changed { differences } => {
            let mut out = format!(
                "Cannot edit {file}: the file changed since the screen was shown, so {} {} not what the view shows.\n",
                describe_lines(&differences.iter().map(|d| d.line).collect::<Vec<_>>()),
                if differences.len() == 1 { "is" } else { "are" }
            );
            out.push_str("Expected (as the view showed it):\n");
            for difference in differences.iter().take(MAX_LISTED_DIFFERENCES) {
                let _ = writeln!(
                    out,
                    "  {:>5}  {}   (view [{}])",
                    difference.line,
                    display(&difference.expected),
                    difference.view
                );
            }
            out.push_str("Actual (in the file now):\n");
            for difference in differences.iter().take(MAX_LISTED_DIFFERENCES) {
                match &difference.actual {
                    Some(actual) => {
                        let _ = writeln!(out, "  {:>5}  {}", difference.line, display(actual));
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "  {:>5}  (no such line: the file is shorter now)",
                            difference.line
                        );
                    }
                }
            }
            if differences.len() > MAX_LISTED_DIFFERENCES {
                let _ = writeln!(
                    out,
                    "  ... and {} more differing lines",
                    differences.len() - MAX_LISTED_DIFFERENCES
                );
            }
            out.push_str("Nothing was written. The screen now shows the file as it is: check the line numbers there and send the edit again.");
            out
        }
    }
}

/// `line 7`, `lines 7-9`, `lines 3, 7-9`.
fn describe_lines(lines: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &line in lines {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == line => *end = line,
            _ => runs.push((line, line)),
        }
    }
    let parts: Vec<String> = runs
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if lines.len() == 1 {
        format!("line {}", parts.join(", "))
    } else {
        format!("lines {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::editor::lines::split_lines;

    fn range(first: usize, last: usize) -> LineRange {
        LineRange { first, last }
    }

    fn new(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn splice_keeps_endings_and_other_bytes() {
        assert_eq!(
            splice(b"a\nb\nc\n", range(2, 2), &new(&["B1", "B2"])),
            b"a\nB1\nB2\nc\n"
        );
        assert_eq!(
            splice(b"a\r\nb\r\nc\r\n", range(2, 3), &new(&["x"])),
            b"a\r\nx\r\n"
        );
        assert_eq!(
            splice(b"a\nb\nc", range(3, 3), &new(&["C", "D"])),
            b"a\nb\nC\nD"
        );
        assert_eq!(splice(b"a\nb\nc", range(2, 3), &new(&[])), b"a");
        assert_eq!(splice(b"a\nb\n", range(1, 1), &new(&[])), b"b\n");
        // Bytes that are not UTF-8 survive on lines that are not edited.
        assert_eq!(
            splice(b"caf\xe9\nx\n", range(2, 2), &new(&["y"])),
            b"caf\xe9\ny\n"
        );
        // A CRLF file without a final newline.
        assert_eq!(splice(b"a\r\nb", range(2, 2), &new(&["c"])), b"a\r\nc");
    }

    /// The splice as it was written first: every line split out, then
    /// joined again.
    fn splice_by_lines(bytes: &[u8], range: LineRange, new_lines: &[String]) -> Vec<u8> {
        let lines = split_lines(bytes);
        let first = (range.first - 1).min(lines.len());
        let last = range.last.min(lines.len());
        let ending: &[u8] = match lines.get(first) {
            Some(line) if !line.ending.is_empty() => line.ending,
            _ => dominant_ending(bytes),
        };
        let had_final_ending = lines.last().is_none_or(|line| !line.ending.is_empty());
        let mut out = Vec::new();
        for line in &lines[..first] {
            out.extend_from_slice(line.text);
            out.extend_from_slice(line.ending);
        }
        for line in new_lines {
            out.extend_from_slice(line.as_bytes());
            out.extend_from_slice(ending);
        }
        for line in &lines[last..] {
            out.extend_from_slice(line.text);
            out.extend_from_slice(line.ending);
        }
        if !had_final_ending {
            if out.ends_with(b"\r\n") {
                out.truncate(out.len() - 2);
            } else if out.ends_with(b"\n") {
                out.truncate(out.len() - 1);
            }
        }
        out
    }

    #[test]
    fn splice_agrees_with_splitting_every_line() {
        // Every range (and some past the end) of files mixing endings, a
        // lone `\r`, empty lines, with and without a final ending, and
        // replacements of none, one and two lines.
        let files: [&[u8]; 9] = [
            b"",
            b"a",
            b"a\n",
            b"\n\n",
            b"a\r\nb\nc",
            b"a\nb\r\n\r\nc\r\n",
            b"x\r\ny\r",
            b"\r\n",
            b"caf\xe9\n\nz\r\nlast",
        ];
        let replacements = [new(&[]), new(&["N"]), new(&["N1", ""])];
        for bytes in files {
            let count = split_lines(bytes).len();
            for first in 1..=count + 2 {
                for last in first..=count + 2 {
                    for lines in &replacements {
                        assert_eq!(
                            splice(bytes, range(first, last), lines),
                            splice_by_lines(bytes, range(first, last), lines),
                            "{:?} {first}-{last} {lines:?}",
                            String::from_utf8_lossy(bytes)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn verification_finds_missing_and_changed_lines() {
        let shown = Shown {
            first_line: 2,
            lines: vec![b"two".to_vec(), b"three".to_vec()],
        };
        let views = [VisibleView {
            id: 1,
            shown: &shown,
        }];
        let current: &[u8] = b"one\ntwo\nTHREE\n";
        assert_eq!(verify(range(2, 2), &views, current), Ok(()));
        assert_eq!(
            verify(range(1, 2), &views, current),
            Err(Refusal::NotVisible { missing: vec![1] })
        );
        let refusal = verify(range(2, 3), &views, current).unwrap_err();
        let text = describe_refusal(&refusal, "f.txt", range(2, 3), &views);
        assert!(
            text.starts_with("Cannot edit f.txt: the file changed"),
            "{text}"
        );
        assert!(
            text.contains("Expected (as the view showed it):\n      3  three"),
            "{text}"
        );
        assert!(
            text.contains("Actual (in the file now):\n      3  THREE"),
            "{text}"
        );
        let refusal = verify(range(3, 3), &views, b"one\ntwo\n").unwrap_err();
        assert!(describe_refusal(&refusal, "f", range(3, 3), &views).contains("no such line"));
    }

    #[test]
    fn boundaries_follow_edits() {
        // Edit inside: the section grows.
        assert_eq!(
            boundaries_after(10, 20, range(12, 12), 3),
            Some(Boundaries {
                first_line: 10,
                last_line: 22,
                start_replaced: false,
                end_replaced: false
            })
        );
        // Edit above: the section moves.
        assert_eq!(
            boundaries_after(10, 20, range(2, 4), 0).map(|b| (b.first_line, b.last_line)),
            Some((7, 17))
        );
        // Start line replaced by two lines.
        assert_eq!(
            boundaries_after(10, 20, range(10, 10), 2),
            Some(Boundaries {
                first_line: 10,
                last_line: 21,
                start_replaced: true,
                end_replaced: false
            })
        );
        // End line replaced by two lines: the section ends at the second.
        assert_eq!(
            boundaries_after(10, 20, range(19, 20), 2).map(|b| (b.last_line, b.end_replaced)),
            Some((20, true))
        );
        // End line deleted: the line before it ends the section.
        assert_eq!(
            boundaries_after(10, 20, range(20, 20), 0).map(|b| b.last_line),
            Some(19)
        );
        // The whole section deleted.
        assert_eq!(boundaries_after(10, 20, range(10, 20), 0), None);
        // Edit below: nothing moves.
        assert_eq!(
            boundaries_after(10, 20, range(30, 31), 9).map(|b| (b.first_line, b.last_line)),
            Some((10, 20))
        );
    }

    #[test]
    fn an_edit_without_a_view_gives_recovery_steps() {
        let text = no_view_help(
            "src/main.py",
            range(45, 50),
            "view src/main.py /^def main/ /^$/",
        );
        assert_eq!(
            text,
            "Cannot edit - no view contains line 45\n\nTo edit a file:\n  1. Create a view first: view src/main.py /^def main/ /^$/\n  2. See line numbers in the view on screen\n  3. Edit using those lines: edit src/main.py 45-50\n\nThe view command is shown above in the Commands section."
        );
    }

    #[test]
    fn line_lists_read_naturally() {
        assert_eq!(describe_lines(&[7]), "line 7");
        assert_eq!(describe_lines(&[3, 7, 8, 9]), "lines 3, 7-9");
    }
}
