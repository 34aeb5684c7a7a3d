//! The screen: every environment's section, in a stable order, each cut to
//! its `max_lines`.
//!
//! This module owns the [`Screen`] value, the truncation rule (with a marker
//! that says how many lines were cut) and the human-readable rendering used
//! by the REPL. It does not collect sections (the orchestrator does) and does
//! not know the wire format (the protocol serialises a `Screen`).

use std::collections::HashSet;

use crate::environment::ScreenSection;
use crate::text;

/// A section on the screen that is not an environment: e.g. the list of
/// plugins that were refused at load time. Its key is never a valid
/// environment name, so it cannot collide with one.
#[derive(Debug, Clone)]
pub struct NoticeSection {
    /// The section's key on the screen (never an identifier).
    pub key: String,
    /// What it shows.
    pub section: ScreenSection,
}

/// The complete screen after a command: named sections in display order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Screen {
    sections: Vec<(String, ScreenSection)>,
}

impl Screen {
    /// An empty screen.
    pub fn new() -> Self {
        Screen::default()
    }

    /// Appends a section, cutting its content to its `max_lines`.
    pub fn push(&mut self, name: impl Into<String>, section: ScreenSection) {
        let content = truncate_lines(&section.content, section.max_lines);
        self.sections.push((
            name.into(),
            ScreenSection {
                content,
                max_lines: section.max_lines,
            },
        ));
    }

    /// The sections, in display order, with their names.
    pub fn sections(&self) -> impl Iterator<Item = (&str, &ScreenSection)> {
        self.sections.iter().map(|(name, s)| (name.as_str(), s))
    }

    /// The section named `name`.
    pub fn get(&self, name: &str) -> Option<&ScreenSection> {
        self.sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, section)| section)
    }

    /// How many sections there are.
    pub fn len(&self) -> usize {
        self.sections.len()
    }

    /// Whether there is no section.
    pub fn is_empty(&self) -> bool {
        self.sections.is_empty()
    }

    /// Renders the screen for a person, with a header per section:
    /// `==================== BASH ====================`.
    pub fn render_for_humans(&self) -> String {
        self.render_changes_since(None)
    }

    /// Like [`render_for_humans`](Screen::render_for_humans), but sections
    /// that are the same as in `before` are only named in a last line, so
    /// a person sees what a command changed.
    pub fn render_changes_since(&self, before: Option<&Screen>) -> String {
        self.render_marked(before, &Unmarked)
    }

    /// [`render_changes_since`](Screen::render_changes_since) with its parts
    /// marked by `marks` (the REPL's colours): each section's header, the
    /// lines of a section that were not in it in `before`, and the line
    /// that names the unchanged sections.
    pub fn render_marked(&self, before: Option<&Screen>, marks: &dyn ScreenMarks) -> String {
        let mut out = String::new();
        let mut unchanged = Vec::new();
        for (name, section) in &self.sections {
            let previous = before.and_then(|b| b.get(name));
            if previous == Some(section) {
                unchanged.push(name.as_str());
                continue;
            }
            let header = format!(
                "==================== {} ====================",
                name.to_uppercase()
            );
            out.push_str(&marks.header(&header));
            out.push('\n');
            let old: Option<HashSet<&str>> = previous.map(|p| p.content.lines().collect());
            for piece in section.content.split_inclusive('\n') {
                let line = piece.strip_suffix('\n').unwrap_or(piece);
                match &old {
                    Some(old) if !old.contains(line) && !line.trim().is_empty() => {
                        out.push_str(&marks.changed(line));
                        out.push_str(&piece[line.len()..]);
                    }
                    _ => out.push_str(piece),
                }
            }
            if !section.content.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        if !unchanged.is_empty() {
            let note = format!("(unchanged: {})", unchanged.join(", "));
            out.push_str(&marks.note(&note));
            out.push_str("\n\n");
        }
        out
    }
}

/// How [`Screen::render_marked`] marks the parts of a screen for a person
/// (colours, in the REPL). Each method gets one line without its line end
/// and returns it marked; it must not change the text a person reads.
pub trait ScreenMarks {
    /// A section's header line.
    fn header(&self, line: &str) -> String;
    /// A line that was not in its section the last time it was shown.
    fn changed(&self, line: &str) -> String;
    /// The line that names the sections that did not change.
    fn note(&self, line: &str) -> String;
}

/// The plain rendering: nothing marked.
struct Unmarked;

impl ScreenMarks for Unmarked {
    fn header(&self, line: &str) -> String {
        line.to_owned()
    }
    fn changed(&self, line: &str) -> String {
        line.to_owned()
    }
    fn note(&self, line: &str) -> String {
        line.to_owned()
    }
}

/// Cuts `content` to at most `max_lines` lines. When lines are cut, the last
/// line kept is replaced by a marker saying how many were cut, so the result
/// never exceeds `max_lines` lines and the agent knows something is missing.
///
/// A trailing newline does not count as an extra (empty) line.
pub fn truncate_lines(content: &str, max_lines: usize) -> String {
    let body = content.strip_suffix('\n').unwrap_or(content);
    let line_count = if body.is_empty() {
        0
    } else {
        body.split('\n').count()
    };
    if line_count <= max_lines {
        return content.to_owned();
    }
    if max_lines == 0 {
        return String::new();
    }
    let keep = max_lines - 1;
    let cut = line_count - keep;
    let mut out: String = body
        .split('\n')
        .take(keep)
        .flat_map(|line| [line, "\n"])
        .collect();
    out.push_str(&format!(
        "[... {cut} more {} cut: this section is limited to {max_lines} {}]",
        text::noun(cut, "line"),
        text::noun(max_lines, "line")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_content_is_untouched() {
        assert_eq!(truncate_lines("a\nb\n", 2), "a\nb\n");
        assert_eq!(truncate_lines("a\nb", 2), "a\nb");
        assert_eq!(truncate_lines("", 0), "");
    }

    #[test]
    fn long_content_keeps_max_lines_including_marker() {
        let content: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let cut = truncate_lines(&content, 4);
        let lines: Vec<&str> = cut.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(&lines[..3], ["line 1", "line 2", "line 3"]);
        assert_eq!(
            lines[3],
            "[... 7 more lines cut: this section is limited to 4 lines]"
        );
    }

    #[test]
    fn one_line_over_says_line_singular() {
        let cut = truncate_lines("a\nb\nc", 2);
        assert_eq!(
            cut,
            "a\n[... 2 more lines cut: this section is limited to 2 lines]"
        );
        let cut = truncate_lines("a\nb", 1);
        assert_eq!(
            cut,
            "[... 2 more lines cut: this section is limited to 1 line]"
        );
    }

    #[test]
    fn screen_keeps_insertion_order_and_truncates() {
        let mut screen = Screen::new();
        screen.push("bash", ScreenSection::with_max_lines("x\ny\nz", 2));
        screen.push("python", ScreenSection::new("p"));
        let names: Vec<&str> = screen.sections().map(|(n, _)| n).collect();
        assert_eq!(names, ["bash", "python"]);
        assert!(
            screen
                .get("bash")
                .unwrap()
                .content
                .contains("2 more lines cut")
        );
        assert!(screen.render_for_humans().contains("== BASH =="));
        let mut later = screen.clone();
        later.sections[1].1.content = "q".into();
        let changes = later.render_changes_since(Some(&screen));
        assert!(!changes.contains("== BASH =="));
        assert!(changes.contains("PYTHON ====================\nq\n"));
        assert!(changes.ends_with("(unchanged: bash)\n\n"));
    }

    #[test]
    fn marks_show_headers_new_lines_and_the_unchanged_note() {
        struct Brackets;
        impl ScreenMarks for Brackets {
            fn header(&self, line: &str) -> String {
                format!("<h>{line}</h>")
            }
            fn changed(&self, line: &str) -> String {
                format!("<c>{line}</c>")
            }
            fn note(&self, line: &str) -> String {
                format!("<n>{line}</n>")
            }
        }
        let mut before = Screen::new();
        before.push("bash", ScreenSection::new("cwd: /a\nexit: 0\n\nhelp"));
        before.push("python", ScreenSection::new("p"));
        let mut after = Screen::new();
        after.push("bash", ScreenSection::new("cwd: /a\nexit: 1\n\nhelp"));
        after.push("python", ScreenSection::new("p"));
        assert_eq!(
            after.render_marked(Some(&before), &Brackets),
            "<h>==================== BASH ====================</h>\n\
             cwd: /a\n<c>exit: 1</c>\n\nhelp\n\n<n>(unchanged: python)</n>\n\n"
        );
        // A first rendering marks no line as changed.
        assert!(!after.render_marked(None, &Brackets).contains("<c>"));
        // Unmarked, the rendering is the plain one, byte for byte.
        assert_eq!(
            after.render_changes_since(Some(&before)),
            "==================== BASH ====================\ncwd: /a\nexit: 1\n\nhelp\n\n(unchanged: python)\n\n"
        );
    }
}
