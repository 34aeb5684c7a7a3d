//! Pattern views: file sections bounded by a start and an end
//! pattern, re-read from disk on every screen.
//!
//! This module owns the set of views (at most [`MAX_VIEWS`], ids never
//! reused, the oldest closed to make room), locating a view's section in a
//! file (which start match, the first end match within [`MAX_VIEW_LINES`]
//! lines, truncation), the `Views:` part of the screen, the cache of what
//! each view last showed (edits are verified against it), and removing a
//! view once it has shown that its file or patterns are gone. It must not
//! write files.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::files::{self, FileProblem, TextFile};
use super::lines::{count_newlines, display, lines_from, offset_after_lines, searchable};
use super::patterns::LinePattern;
use envhost_files::ProjectRoot;

/// Views open at once; adding one more closes the oldest.
pub const MAX_VIEWS: usize = 5;

/// Lines a view shows at most, and how far it looks for its end pattern.
pub const MAX_VIEW_LINES: usize = 1000;

/// Why a view shows fewer lines than its patterns would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// The end pattern is not within [`MAX_VIEW_LINES`] lines of the start.
    LineLimit,
    /// The file ends before the end pattern is found.
    EndOfFile,
}

impl Truncation {
    pub fn marker(self) -> &'static str {
        match self {
            Truncation::LineLimit => "[TRUNCATED: end pattern not found within 1000 lines]",
            Truncation::EndOfFile => {
                "[TRUNCATED: end pattern not found before the end of the file]"
            }
        }
    }
}

/// Where a view's section is in a file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'a> {
    /// How many lines match the start pattern.
    pub match_count: usize,
    /// Which of them is shown (0-based, clamped to the matches there are).
    pub match_index: usize,
    /// 1-based number of the first line shown.
    pub first_line: usize,
    /// The lines shown, without their endings.
    pub lines: Vec<&'a [u8]>,
    pub truncation: Option<Truncation>,
}

impl Section<'_> {
    pub fn last_line(&self) -> usize {
        self.first_line + self.lines.len().saturating_sub(1)
    }
}

/// Finds the `wanted`-th start match (or the last, if there are fewer) and
/// the section it opens; `None` when no line matches the start pattern.
pub fn locate<'a>(
    start: &LinePattern,
    end: &LinePattern,
    bytes: &'a [u8],
    wanted: usize,
) -> Option<Section<'a>> {
    if bytes.is_empty() {
        return None;
    }
    let haystack = searchable(bytes);
    let starts = start.matching_line_starts(haystack);
    let match_index = wanted.min(starts.len().checked_sub(1)?);
    let start_offset = starts[match_index];
    let first_line = count_newlines(&haystack[..start_offset]) + 1;
    // The lines from the start to the end of the file, counted no further
    // than one past what a view shows: counting the whole file for every
    // view was a third of a screen over a large one.
    let remaining = lines_left(haystack, start_offset, MAX_VIEW_LINES);
    let window = remaining.min(MAX_VIEW_LINES);
    let mut end_line = None;
    if window > 1 {
        let after_start = offset_after_lines(haystack, start_offset, 1);
        let window_end = offset_after_lines(haystack, start_offset, window);
        let cut = window < remaining;
        if let Some(end_offset) = end.first_line_from(&haystack[..window_end], after_start, cut) {
            end_line = Some(first_line + count_newlines(&haystack[start_offset..end_offset]));
        }
    }
    let (shown, truncation) = match end_line {
        Some(end_line) => (end_line - first_line + 1, None),
        None if window == MAX_VIEW_LINES => (window, Some(Truncation::LineLimit)),
        None => (window, Some(Truncation::EndOfFile)),
    };
    Some(Section {
        match_count: starts.len(),
        match_index,
        first_line,
        lines: lines_from(bytes, start_offset, shown),
        truncation,
    })
}

/// The lines of `haystack` from the one starting at `from` to its end,
/// counted up to `limit + 1` at most (one more than `limit` says there are
/// more).
fn lines_left(haystack: &[u8], from: usize, limit: usize) -> usize {
    memchr::memchr_iter(b'\n', &haystack[from..])
        .take(limit)
        .count()
        + 1
}

/// The 1-based line numbers of every line a pattern matches.
pub fn matching_lines(pattern: &LinePattern, bytes: &[u8]) -> Vec<usize> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let haystack = searchable(bytes);
    let mut line = 1;
    let mut counted_to = 0;
    pattern
        .matching_line_starts(haystack)
        .into_iter()
        .map(|offset| {
            line += count_newlines(&haystack[counted_to..offset]);
            counted_to = offset;
            line
        })
        .collect()
}

/// What a view showed on the last screen: the lines an edit may change and
/// the content it must find there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub first_line: usize,
    pub lines: Vec<Vec<u8>>,
}

impl Shown {
    pub fn last_line(&self) -> usize {
        self.first_line + self.lines.len().saturating_sub(1)
    }

    pub fn line(&self, number: usize) -> Option<&[u8]> {
        number
            .checked_sub(self.first_line)
            .and_then(|index| self.lines.get(index))
            .map(Vec::as_slice)
    }
}

/// One view.
#[derive(Debug, Clone)]
pub struct View {
    pub id: u32,
    /// The path as the agent wrote it, resolved again on every screen.
    pub written: String,
    /// How the path is shown.
    pub display: String,
    /// Where the file really is (symlinks followed), as last resolved.
    pub real: PathBuf,
    pub start: LinePattern,
    pub end: LinePattern,
    /// 0-based index of the start match shown.
    pub match_index: usize,
    pub label: Option<String>,
    /// What the last screen showed; `None` before the first screen.
    pub shown: Option<Shown>,
}

impl View {
    /// `[1] src/main.py /^def main/ to /^if __name__/`
    pub fn describe(&self) -> String {
        format!(
            "[{}] {} /{}/ to /{}/",
            self.id,
            self.display,
            self.start.source(),
            self.end.source()
        )
    }

    fn header(&self, section: &Section<'_>) -> String {
        let mut header = format!(
            "  {} (match {}/{})",
            self.describe(),
            section.match_index + 1,
            section.match_count
        );
        if let Some(label) = &self.label {
            let _ = write!(header, " \"{label}\"");
        }
        if let Some(truncation) = section.truncation {
            let _ = write!(header, " {}", truncation.marker());
        }
        header
    }
}

/// A view as a saved session keeps it: what the agent gave, not what the
/// file holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptView {
    pub id: u32,
    /// The path as the agent wrote it.
    pub file: String,
    pub start: String,
    pub end: String,
    pub match_index: usize,
    pub label: Option<String>,
}

/// The open views, oldest first.
#[derive(Debug, Default)]
pub struct ViewSet {
    views: Vec<View>,
    next_id: u32,
}

/// A view about to be added.
pub struct NewView {
    pub written: String,
    pub display: String,
    pub real: PathBuf,
    pub start: LinePattern,
    pub end: LinePattern,
    pub label: Option<String>,
    pub shown: Shown,
}

impl ViewSet {
    pub fn new() -> Self {
        ViewSet {
            views: Vec::new(),
            next_id: 1,
        }
    }

    /// The views as a saved session keeps them, and the next id.
    pub fn kept(&self) -> (Vec<KeptView>, u32) {
        let views = self
            .views
            .iter()
            .map(|view| KeptView {
                id: view.id,
                file: view.written.clone(),
                start: view.start.source().to_owned(),
                end: view.end.source().to_owned(),
                match_index: view.match_index,
                label: view.label.clone(),
            })
            .collect();
        (views, self.next_id)
    }

    /// The views a saved session had (oldest first, at most
    /// [`MAX_VIEWS`]), ids kept; `next_id` never goes back to one in use.
    pub fn restored(mut views: Vec<View>, next_id: u32) -> Self {
        views.truncate(MAX_VIEWS);
        let past = views.iter().map(|v| v.id + 1).max().unwrap_or(1);
        ViewSet {
            views,
            next_id: next_id.max(past),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &View> {
        self.views.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut View> {
        self.views.iter_mut()
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut View> {
        self.views.iter_mut().find(|v| v.id == id)
    }

    /// Adds a view; returns it and the view closed to make room, if any.
    pub fn add(&mut self, new: NewView) -> (&View, Option<View>) {
        let closed = if self.views.len() >= MAX_VIEWS {
            Some(self.views.remove(0))
        } else {
            None
        };
        let id = self.next_id;
        self.next_id += 1;
        self.views.push(View {
            id,
            written: new.written,
            display: new.display,
            real: new.real,
            start: new.start,
            end: new.end,
            match_index: 0,
            label: new.label,
            shown: Some(new.shown),
        });
        let added = &self.views[self.views.len() - 1];
        (added, closed)
    }

    pub fn close(&mut self, id: u32) -> Option<View> {
        let position = self.views.iter().position(|v| v.id == id)?;
        Some(self.views.remove(position))
    }

    /// `[1] src/a.py, [3] README.md` — for messages naming the open views.
    pub fn summary(&self) -> String {
        if self.views.is_empty() {
            return "no views are open".to_owned();
        }
        let ids: Vec<String> = self
            .views
            .iter()
            .map(|v| format!("[{}] {}", v.id, v.display))
            .collect();
        format!("open views: {}", ids.join(", "))
    }

    /// Re-reads every view's file, renders the `Views:` block, remembers
    /// what each view shows, and removes the views whose file or start
    /// pattern is gone (they show why, this once).
    pub fn render(&mut self, root: &ProjectRoot) -> String {
        let mut out = String::from("Views:\n");
        if self.views.is_empty() {
            out.push_str("  (no views)\n");
            return out;
        }
        // One read per file per screen, however many views show it.
        let mut contents: HashMap<String, Result<TextFile, FileProblem>> = HashMap::new();
        let mut broken = Vec::new();
        for (position, view) in self.views.iter_mut().enumerate() {
            if position > 0 {
                out.push('\n');
            }
            let content = contents.entry(view.written.clone()).or_insert_with(|| {
                files::read_text(root, &view.written).map_err(|(_, problem)| problem)
            });
            let bytes = match content {
                Ok(file) => {
                    view.real = file.path.real.clone();
                    view.display = file.path.display.clone();
                    &file.bytes
                }
                Err(problem) => {
                    let _ = writeln!(out, "  [{}] {} {}", view.id, view.display, problem.marker());
                    broken.push(view.id);
                    continue;
                }
            };
            let Some(section) = locate(&view.start, &view.end, bytes, view.match_index) else {
                let _ = writeln!(
                    out,
                    "  [{}] {} [BROKEN: patterns not found]",
                    view.id, view.display
                );
                broken.push(view.id);
                continue;
            };
            view.match_index = section.match_index;
            out.push_str(&view.header(&section));
            out.push('\n');
            render_lines(&mut out, &section);
            view.shown = Some(Shown {
                first_line: section.first_line,
                lines: section.lines.iter().map(|line| line.to_vec()).collect(),
            });
        }
        self.views.retain(|v| !broken.contains(&v.id));
        out
    }
}

/// `     45  def main():` — numbers right-aligned under the header.
fn render_lines(out: &mut String, section: &Section<'_>) {
    let width = section.last_line().to_string().len().max(3);
    for (offset, line) in section.lines.iter().enumerate() {
        let number = section.first_line + offset;
        let text = display(line);
        if text.is_empty() {
            let _ = writeln!(out, "    {number:>width$}");
        } else {
            let _ = writeln!(out, "    {number:>width$}  {text}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(
        start: &str,
        end: &str,
        text: &str,
        wanted: usize,
    ) -> Option<(usize, usize, usize, usize, Option<Truncation>)> {
        let start = LinePattern::compile(start).unwrap();
        let end = LinePattern::compile(end).unwrap();
        locate(&start, &end, text.as_bytes(), wanted).map(|s| {
            (
                s.match_index + 1,
                s.match_count,
                s.first_line,
                s.last_line(),
                s.truncation,
            )
        })
    }

    const C: &str = "#include <stdio.h>\nint main_helper() {\n    return 1;\n}\n\nint main(int argc) {\n    run();\n}\n";

    #[test]
    fn seed_example_matches_and_navigation() {
        assert_eq!(
            section(r"^int main", r"^}$", C, 0),
            Some((1, 2, 2, 4, None))
        );
        assert_eq!(
            section(r"^int main", r"^}$", C, 1),
            Some((2, 2, 6, 8, None))
        );
        // An index past the matches shows the last one.
        assert_eq!(
            section(r"^int main", r"^}$", C, 7),
            Some((2, 2, 6, 8, None))
        );
        assert_eq!(section(r"^int nothing", r"^}$", C, 0), None);
        assert_eq!(section(r"^int", r"^}$", "", 0), None, "empty file");
    }

    #[test]
    fn the_end_is_searched_after_the_start_line() {
        let text = "class A:\n  x\nclass B:\n  y\n";
        assert_eq!(
            section(r"^class A", r"^class \w+", text, 0),
            Some((1, 1, 1, 3, None))
        );
    }

    #[test]
    fn truncation_at_the_limit_and_at_the_end_of_the_file() {
        let long: String = (1..=1500).map(|n| format!("line {n}\n")).collect();
        assert_eq!(
            section("^line 1$", "^never$", &long, 0),
            Some((1, 1, 1, 1000, Some(Truncation::LineLimit)))
        );
        // Line 1000 is the last one the end may be on; 1001 is too far.
        assert_eq!(
            section("^line 1$", "^line 1000$", &long, 0),
            Some((1, 1, 1, 1000, None))
        );
        assert_eq!(
            section("^line 1$", "^line 1001$", &long, 0).unwrap().4,
            Some(Truncation::LineLimit)
        );
        assert_eq!(
            section("^line 1400$", "^never$", &long, 0),
            Some((1, 1, 1400, 1500, Some(Truncation::EndOfFile)))
        );
        assert_eq!(
            section("^line 1500$", "^x", &long, 0),
            Some((1, 1, 1500, 1500, Some(Truncation::EndOfFile)))
        );
    }

    #[test]
    fn empty_last_lines_and_file_anchors() {
        assert_eq!(section("^a$", "^$", "a\n\n", 0), Some((1, 1, 1, 2, None)));
        assert_eq!(
            section(r"\A", r"\z", "a\nb\nc\n", 0),
            Some((1, 1, 1, 3, None))
        );
        assert_eq!(
            section("^a$", "^$", "a\n", 0).unwrap().4,
            Some(Truncation::EndOfFile)
        );
    }

    #[test]
    fn matching_lines_are_numbered() {
        let pattern = LinePattern::compile("^}$").unwrap();
        assert_eq!(matching_lines(&pattern, C.as_bytes()), vec![4, 8]);
    }

    /// `locate` as it was before it stopped counting every line of the
    /// file: the number of lines left from the start line, uncapped.
    fn uncapped_window(bytes: &[u8], first_line: usize) -> (usize, bool) {
        let remaining = super::super::lines::line_count(bytes) - first_line + 1;
        let window = remaining.min(MAX_VIEW_LINES);
        (window, window < remaining)
    }

    #[test]
    fn the_window_is_the_same_as_counting_every_line() {
        let start = LinePattern::compile("^s").unwrap();
        let end = LinePattern::compile("^never").unwrap();
        for lines in [1_usize, 2, 998, 999, 1000, 1001, 1002, 2500] {
            for ending in ["\n", "\r\n", ""] {
                for start_line in [1, lines / 2 + 1, lines.saturating_sub(999).max(1), lines] {
                    let mut text = String::new();
                    for n in 1..=lines {
                        text.push_str(if n == start_line { "s" } else { "x" });
                        if n < lines {
                            text.push('\n');
                        }
                    }
                    text.push_str(ending);
                    let bytes = text.as_bytes();
                    let found = locate(&start, &end, bytes, 0).unwrap();
                    assert_eq!(found.first_line, start_line);
                    let (window, cut) = uncapped_window(bytes, start_line);
                    assert_eq!(
                        found.lines.len(),
                        window,
                        "{lines} lines, start {start_line}"
                    );
                    let expected = if window == MAX_VIEW_LINES {
                        Truncation::LineLimit
                    } else {
                        Truncation::EndOfFile
                    };
                    assert_eq!(
                        found.truncation,
                        Some(expected),
                        "{lines} lines, start {start_line}"
                    );
                    let from = super::super::lines::line_start(bytes, start_line);
                    let remaining = lines_left(searchable(bytes), from, MAX_VIEW_LINES);
                    assert_eq!(remaining.min(MAX_VIEW_LINES), window);
                    assert_eq!(window < remaining, cut, "{lines} lines, start {start_line}");
                }
            }
        }
    }

    #[test]
    fn rendering_aligns_numbers() {
        let start = LinePattern::compile("^a").unwrap();
        let end = LinePattern::compile("^c").unwrap();
        let found = locate(&start, &end, b"a\n\nc\n", 0).unwrap();
        let mut out = String::new();
        render_lines(&mut out, &found);
        assert_eq!(out, "      1  a\n      2\n      3  c\n");
    }
}
