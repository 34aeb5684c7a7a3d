//! The screen: every environment's section, in a stable order, each cut to
//! its `max_lines`.
//!
//! This module owns the [`Screen`] value, the truncation rule (with a marker
//! that says how many lines were cut) and the human-readable rendering used
//! by the REPL. It does not collect sections (the orchestrator does) and does
//! not know the wire format (the protocol serialises a `Screen`).

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
        let mut out = String::new();
        let mut unchanged = Vec::new();
        for (name, section) in &self.sections {
            if before.and_then(|b| b.get(name)) == Some(section) {
                unchanged.push(name.as_str());
                continue;
            }
            out.push_str(&format!(
                "==================== {} ====================\n",
                name.to_uppercase()
            ));
            out.push_str(&section.content);
            if !section.content.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        if !unchanged.is_empty() {
            out.push_str(&format!("(unchanged: {})\n\n", unchanged.join(", ")));
        }
        out
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
}
