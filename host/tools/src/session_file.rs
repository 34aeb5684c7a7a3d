//! The session files of `envhost test`: parsing, comparing a plugin's
//! answers with the expected blocks, the unified diff of a mismatch, and
//! the rewritten file of `--bless`.
//!
//! The format (plain text, `.session` by convention):
//!
//! ```text
//! # a comment (only before the first command: after it, every line until
//! # the next `$ ` line is expected output)
//! $ put colour blue          a command, sent to the plugin
//! > a body line              `> ` lines right after it continue the command
//! stored colour              the expected output
//! $ get nothing
//! ! no key named nothing     a first line `! …` (or `!` alone): the command must fail
//! $ screen                   the plugin's screen section instead of a command
//! Keys: 1
//! ...                        any number of lines (none too)
//! ```
//!
//! Output is compared line by line after trimming the whitespace at the end
//! of each line and the blank lines at the end. A command block cannot
//! expect a line that starts with `$ ` (it would start the next command).
//!
//! It must not know how the commands reach the plugin: `plugin_test` runs
//! them and hands the answers here.

use std::fmt;

/// The pseudo-command that compares the screen section.
pub const SCREEN: &str = "screen";

/// A session file, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFile {
    /// The file's lines as written (for `--bless`).
    lines: Vec<String>,
    /// Whether the file ended with a newline.
    final_newline: bool,
    /// The commands, in order.
    pub steps: Vec<Step>,
}

/// One `$ ` line, its body and its expected block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The line of the `$ ` (1-based).
    pub line: usize,
    /// What to run.
    pub action: Action,
    /// What it must answer.
    pub expected: Expected,
}

/// What a step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A command to the plugin (its body lines joined with `\n`).
    Command(String),
    /// `$ screen`: the plugin's screen section.
    Screen,
}

/// An expected block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// The index (0-based) of its first line in the file.
    start: usize,
    /// The index just past its last non-blank line.
    end: usize,
    /// The command must fail (`! `).
    pub fails: bool,
    /// The lines, `...` as [`Pattern::Any`].
    pub patterns: Vec<Pattern>,
}

/// One expected line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Exactly this line (its trailing whitespace trimmed).
    Line(String),
    /// `...`: any number of lines.
    Any,
}

/// What the plugin answered to one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether the command succeeded (a screen always does).
    pub success: bool,
    /// Its output (or the screen section).
    pub output: String,
}

/// A malformed session file: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl SessionFile {
    /// Parses the text of a session file.
    pub fn parse(text: &str) -> Result<SessionFile, ParseError> {
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let mut steps = Vec::new();
        let mut index = 0;
        while index < lines.len() && !is_command(&lines[index]) {
            let line = lines[index].trim_end();
            if !(line.is_empty() || line.starts_with('#')) {
                return Err(ParseError {
                    line: index + 1,
                    message: format!(
                        "expected a command (`$ COMMAND`), a comment (`# ...`) or a blank line before the first command, found `{}`",
                        shorten(line)
                    ),
                });
            }
            index += 1;
        }
        while index < lines.len() {
            let line_number = index + 1;
            let command = lines[index]["$ ".len()..].trim_end().to_owned();
            if command.trim().is_empty() {
                return Err(ParseError {
                    line: line_number,
                    message: "an empty command: write the command after `$ ` (e.g. `$ help`), or `$ screen` to compare the screen section".to_owned(),
                });
            }
            index += 1;
            let mut body = Vec::new();
            while index < lines.len() && is_body(&lines[index]) {
                body.push(lines[index].get(2..).unwrap_or("").to_owned());
                index += 1;
            }
            let action = if command.trim() == SCREEN {
                if !body.is_empty() {
                    return Err(ParseError {
                        line: line_number + 1,
                        message: "`$ screen` takes no body: remove the `> ` lines after it, or send a command instead".to_owned(),
                    });
                }
                Action::Screen
            } else {
                let mut text = command;
                for line in body {
                    text.push('\n');
                    text.push_str(&line);
                }
                Action::Command(text)
            };
            let start = index;
            while index < lines.len() && !is_command(&lines[index]) {
                index += 1;
            }
            let mut end = index;
            while end > start && lines[end - 1].trim_end().is_empty() {
                end -= 1;
            }
            let (fails, patterns) = expected_lines(&lines[start..end]);
            if fails && action == Action::Screen {
                return Err(ParseError {
                    line: start + 1,
                    message: "a screen cannot fail: remove the `!` after `$ screen`".to_owned(),
                });
            }
            steps.push(Step {
                line: line_number,
                action,
                expected: Expected {
                    start,
                    end,
                    fails,
                    patterns,
                },
            });
        }
        if steps.is_empty() {
            return Err(ParseError {
                line: lines.len().max(1),
                message: "no command: a session file needs at least one `$ COMMAND` line followed by the expected output".to_owned(),
            });
        }
        Ok(SessionFile {
            final_newline: text.ends_with('\n') || text.is_empty(),
            lines,
            steps,
        })
    }

    /// The file with the expected block of each step in `blessed` (by index)
    /// replaced by what the plugin answered; the rest kept as written.
    pub fn blessed(&self, answers: &[(usize, &Answer)]) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut copied = 0;
        let mut sorted: Vec<&(usize, &Answer)> = answers.iter().collect();
        sorted.sort_by_key(|(step, _)| *step);
        for (step, answer) in sorted {
            let Some(step) = self.steps.get(*step) else {
                continue;
            };
            out.extend_from_slice(&self.lines[copied..step.expected.start]);
            out.extend(render_answer(answer));
            copied = step.expected.end;
        }
        out.extend_from_slice(&self.lines[copied..]);
        let mut text = out.join("\n");
        if self.final_newline && !text.is_empty() {
            text.push('\n');
        }
        text
    }
}

fn is_command(line: &str) -> bool {
    line.starts_with("$ ")
}

fn is_body(line: &str) -> bool {
    line.starts_with("> ") || line.trim_end() == ">"
}

/// Whether the block says the command fails, and its lines.
fn expected_lines(block: &[String]) -> (bool, Vec<Pattern>) {
    let mut lines: Vec<&str> = block.iter().map(|line| line.trim_end()).collect();
    let mut fails = false;
    if let Some(first) = lines.first().copied() {
        if first == "!" {
            fails = true;
            lines.remove(0);
        } else if let Some(rest) = first.strip_prefix("! ") {
            fails = true;
            lines[0] = rest;
        }
    }
    let patterns = lines
        .into_iter()
        .map(|line| {
            if line == "..." {
                Pattern::Any
            } else {
                Pattern::Line(line.to_owned())
            }
        })
        .collect();
    (fails, patterns)
}

/// The lines of an output as compared: trailing whitespace trimmed, blank
/// lines at the end dropped.
pub fn normalized(output: &str) -> Vec<String> {
    let mut lines: Vec<String> = output
        .lines()
        .map(|line| line.trim_end().to_owned())
        .collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// An answer as a session file writes it (`! ` on the first line of a
/// failure).
pub fn render_answer(answer: &Answer) -> Vec<String> {
    let mut lines = normalized(&answer.output);
    if !answer.success {
        match lines.first_mut() {
            Some(first) if !first.is_empty() => first.insert_str(0, "! "),
            _ => lines.insert(0, "!".to_owned()),
        }
    }
    lines
}

/// A step as `envhost call` prints it: the command (its body as `> `
/// lines), then the answer.
pub fn render_step(action: &Action, answer: &Answer) -> Vec<String> {
    let mut lines = Vec::new();
    match action {
        Action::Screen => lines.push(format!("$ {SCREEN}")),
        Action::Command(command) => {
            let mut parts = command.split('\n');
            lines.push(format!("$ {}", parts.next().unwrap_or("")));
            for body in parts {
                lines.push(if body.is_empty() {
                    ">".to_owned()
                } else {
                    format!("> {body}")
                });
            }
        }
    }
    lines.extend(render_answer(answer));
    lines
}

impl Expected {
    /// Whether `answer` is what the block expects.
    pub fn matches(&self, answer: &Answer) -> bool {
        self.fails != answer.success && lines_match(&self.patterns, &normalized(&answer.output))
    }

    /// The block as written (normalized), for the diff.
    fn rendered(&self, file: &SessionFile) -> Vec<String> {
        file.lines[self.start..self.end]
            .iter()
            .map(|line| line.trim_end().to_owned())
            .collect()
    }
}

/// Whether `actual` matches `patterns` (`...` any run of lines).
fn lines_match(patterns: &[Pattern], actual: &[String]) -> bool {
    // reachable[j]: the patterns so far match actual[..j].
    let mut reachable = vec![false; actual.len() + 1];
    reachable[0] = true;
    for pattern in patterns {
        let mut next = vec![false; actual.len() + 1];
        match pattern {
            Pattern::Any => {
                let mut on = false;
                for j in 0..=actual.len() {
                    on |= reachable[j];
                    next[j] = on;
                }
            }
            Pattern::Line(line) => {
                for j in 0..actual.len() {
                    next[j + 1] = reachable[j] && actual[j] == *line;
                }
            }
        }
        reachable = next;
    }
    reachable[actual.len()]
}

/// One row of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    /// On both sides (or a `...` and the lines it stands for).
    Same(String),
    Expected(String),
    Actual(String),
}

/// The unified diff of a step whose answer differs from its block: the
/// expected block (by its lines in `shown`) against what the plugin said.
pub fn diff(file: &SessionFile, step: &Step, answer: &Answer, shown: &str) -> String {
    let expected = step.expected.rendered(file);
    let actual = render_answer(answer);
    let rows = align(&expected, &actual);
    let command = match &step.action {
        Action::Screen => format!("$ {SCREEN}"),
        Action::Command(command) => format!("$ {}", command.lines().next().unwrap_or("")),
    };
    let mut out = format!(
        "--- {shown}:{} (expected after `{}`)\n+++ the plugin's answer\n",
        step.expected.start + 1,
        shorten(&command)
    );
    out.push_str(&hunks(&rows, step.expected.start + 1));
    out
}

/// Aligns the expected lines (`...` matching any run) with the actual
/// ones, with the fewest lines added and removed.
fn align(expected: &[String], actual: &[String]) -> Vec<Row> {
    let (n, m) = (expected.len(), actual.len());
    // Huge answers: no alignment, the whole blocks.
    if n.saturating_mul(m) > 4_000_000 {
        let mut rows: Vec<Row> = expected.iter().cloned().map(Row::Expected).collect();
        rows.extend(actual.iter().cloned().map(Row::Actual));
        return rows;
    }
    let wild = |i: usize| expected[i] == "...";
    // cost[i][j]: fewest edits aligning expected[i..] with actual[j..].
    let width = m + 1;
    let mut cost = vec![0u32; (n + 1) * width];
    for i in (0..=n).rev() {
        for j in (0..=m).rev() {
            let here = i * width + j;
            cost[here] = if i == n {
                (m - j) as u32
            } else if j == m {
                let rest = cost[(i + 1) * width + j];
                if wild(i) { rest } else { rest + 1 }
            } else if wild(i) {
                cost[(i + 1) * width + j].min(cost[i * width + j + 1])
            } else {
                // A changed line (one removed, one added) costs as much as
                // a removed one: a `...` then does not swallow it.
                let mut best = cost[(i + 1) * width + j]
                    .min(cost[i * width + j + 1])
                    .min(cost[(i + 1) * width + j + 1])
                    + 1;
                if expected[i] == actual[j] {
                    best = best.min(cost[(i + 1) * width + j + 1]);
                }
                best
            };
        }
    }
    let mut rows = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        let here = cost[i * width + j];
        if i < n && wild(i) {
            // The `...` stays shown once, where it stops matching.
            if cost[(i + 1) * width + j] == here {
                rows.push(Row::Same("...".to_owned()));
                i += 1;
            } else {
                j += 1;
            }
        } else if i < n
            && j < m
            && expected[i] == actual[j]
            && cost[(i + 1) * width + j + 1] == here
        {
            rows.push(Row::Same(expected[i].clone()));
            i += 1;
            j += 1;
        } else if i < n && j < m && cost[(i + 1) * width + j + 1] + 1 == here {
            rows.push(Row::Expected(expected[i].clone()));
            rows.push(Row::Actual(actual[j].clone()));
            i += 1;
            j += 1;
        } else if i < n && cost[(i + 1) * width + j] + 1 == here {
            rows.push(Row::Expected(expected[i].clone()));
            i += 1;
        } else {
            rows.push(Row::Actual(actual[j].clone()));
            j += 1;
        }
    }
    // Within a run of changes, the removed lines first, as diff shows them.
    let mut start = 0;
    while start < rows.len() {
        if matches!(rows[start], Row::Same(_)) {
            start += 1;
            continue;
        }
        let mut end = start;
        while end < rows.len() && !matches!(rows[end], Row::Same(_)) {
            end += 1;
        }
        rows[start..end].sort_by_key(|row| matches!(row, Row::Actual(_)));
        start = end;
    }
    rows
}

/// The rows as unified-diff hunks with three lines of context, numbered
/// from `first_line` of the file.
fn hunks(rows: &[Row], first_line: usize) -> String {
    const CONTEXT: usize = 3;
    let changed: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, row)| !matches!(row, Row::Same(_)))
        .map(|(index, _)| index)
        .collect();
    if changed.is_empty() {
        // Same lines, different status cannot happen (the `!` is a line);
        // say so rather than print nothing.
        return "(the lines are the same)\n".to_owned();
    }
    // Group the changes whose contexts touch.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for &index in &changed {
        let from = index.saturating_sub(CONTEXT);
        let to = (index + CONTEXT + 1).min(rows.len());
        match groups.last_mut() {
            Some(last) if from <= last.1 => last.1 = to,
            _ => groups.push((from, to)),
        }
    }
    let mut out = String::new();
    for (from, to) in groups {
        // Line numbers at `from`.
        let (mut old, mut new) = (first_line, first_line);
        for row in &rows[..from] {
            match row {
                Row::Same(_) => {
                    old += 1;
                    new += 1;
                }
                Row::Expected(_) => old += 1,
                Row::Actual(_) => new += 1,
            }
        }
        let slice = &rows[from..to];
        let old_count = slice
            .iter()
            .filter(|row| !matches!(row, Row::Actual(_)))
            .count();
        let new_count = slice
            .iter()
            .filter(|row| !matches!(row, Row::Expected(_)))
            .count();
        out.push_str(&format!("@@ -{old},{old_count} +{new},{new_count} @@\n"));
        for row in slice {
            match row {
                Row::Same(line) => out.push_str(&format!(" {line}\n")),
                Row::Expected(line) => out.push_str(&format!("-{line}\n")),
                Row::Actual(line) => out.push_str(&format!("+{line}\n")),
            }
        }
    }
    out
}

/// A line cut for a message.
fn shorten(line: &str) -> String {
    const MOST: usize = 60;
    if line.chars().count() <= MOST {
        line.to_owned()
    } else {
        let head: String = line.chars().take(MOST).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(output: &str) -> Answer {
        Answer {
            success: true,
            output: output.to_owned(),
        }
    }

    fn failed(output: &str) -> Answer {
        Answer {
            success: false,
            output: output.to_owned(),
        }
    }

    const EXAMPLE: &str = "\
# a comment
#
$ put colour blue
stored colour
$ get colour
blue

$ note add
> a body line
> another
added note 1
$ get nothing
! no key named nothing
$ screen
Keys: 1
...
";

    #[test]
    fn the_example_of_the_format_parses() {
        let file = SessionFile::parse(EXAMPLE).unwrap();
        let actions: Vec<&Action> = file.steps.iter().map(|s| &s.action).collect();
        assert_eq!(
            actions,
            [
                &Action::Command("put colour blue".into()),
                &Action::Command("get colour".into()),
                &Action::Command("note add\na body line\nanother".into()),
                &Action::Command("get nothing".into()),
                &Action::Screen,
            ]
        );
        let lines: Vec<usize> = file.steps.iter().map(|s| s.line).collect();
        assert_eq!(lines, [3, 5, 8, 12, 14]);
        assert_eq!(
            file.steps[1].expected.patterns,
            [Pattern::Line("blue".into())],
            "the blank line before the next command is not expected"
        );
        assert!(file.steps[3].expected.fails);
        assert_eq!(
            file.steps[3].expected.patterns,
            [Pattern::Line("no key named nothing".into())]
        );
        assert_eq!(
            file.steps[4].expected.patterns,
            [Pattern::Line("Keys: 1".into()), Pattern::Any]
        );
    }

    #[test]
    fn outputs_compare_without_trailing_whitespace_and_blank_lines() {
        let file = SessionFile::parse("$ a\nx  \n\ny\n\n\n").unwrap();
        let expected = &file.steps[0].expected;
        assert!(expected.matches(&ok("x\n\ny   \n\n")));
        assert!(expected.matches(&ok("x\t\n\ny")));
        assert!(!expected.matches(&ok("x\ny")), "inner blank lines count");
        assert!(
            !expected.matches(&ok(" x\n\ny")),
            "leading whitespace counts"
        );
        assert!(!expected.matches(&failed("x\n\ny")), "the status counts");
    }

    #[test]
    fn an_empty_block_expects_an_empty_success() {
        let file = SessionFile::parse("$ a\n$ b\n").unwrap();
        assert!(file.steps[0].expected.matches(&ok("")));
        assert!(file.steps[0].expected.matches(&ok("\n  \n")));
        assert!(!file.steps[0].expected.matches(&ok("x")));
        assert!(!file.steps[0].expected.matches(&failed("")));
    }

    #[test]
    fn a_bang_expects_a_failure() {
        let file = SessionFile::parse("$ a\n! oops\nmore\n$ b\n!\n$ c\n!\nline\n").unwrap();
        assert!(file.steps[0].expected.matches(&failed("oops\nmore")));
        assert!(!file.steps[0].expected.matches(&ok("oops\nmore")));
        assert!(!file.steps[0].expected.matches(&failed("! oops\nmore")));
        assert!(file.steps[1].expected.matches(&failed("")));
        assert!(file.steps[2].expected.matches(&failed("line")));
        assert!(
            !SessionFile::parse("$ a\nfine\n! not first\n")
                .unwrap()
                .steps[0]
                .expected
                .fails,
            "only a first line says failure"
        );
    }

    #[test]
    fn dots_match_any_number_of_lines() {
        let file =
            SessionFile::parse("$ a\nfirst\n...\nlast\n$ b\n...\n$ c\n...\nx\n...\n").unwrap();
        let [a, b, c] = [0, 1, 2].map(|i| &file.steps[i].expected);
        assert!(a.matches(&ok("first\nlast")));
        assert!(a.matches(&ok("first\n1\n2\n3\nlast")));
        assert!(a.matches(&ok("first\nlast\nlast")));
        assert!(!a.matches(&ok("first\n1")));
        assert!(!a.matches(&ok("zero\nfirst\nlast")));
        assert!(b.matches(&ok("")));
        assert!(b.matches(&ok("anything\nat all")));
        assert!(c.matches(&ok("x")));
        assert!(c.matches(&ok("a\nx\nb")));
        assert!(!c.matches(&ok("a\nb")));
        assert!(
            !SessionFile::parse("$ a\n ...\n").unwrap().steps[0]
                .expected
                .matches(&ok("anything")),
            "only a line of exactly three dots is the wildcard"
        );
    }

    #[test]
    fn malformed_files_name_the_line_and_what_to_write() {
        let cases: &[(&str, usize, &str)] = &[
            ("hello\n$ a\n", 1, "expected a command (`$ COMMAND`)"),
            ("# c\n\n  stray\n$ a\n", 3, "found `  stray`"),
            ("$ a\nx\n$ \n", 3, "an empty command"),
            ("$    \n", 1, "an empty command"),
            ("$ screen\n> body\n", 2, "`$ screen` takes no body"),
            ("$ a\n$ screen\n! no\n", 3, "a screen cannot fail"),
            ("", 1, "no command"),
            ("# only a comment\n", 1, "no command"),
            ("$a\n", 1, "expected a command"),
        ];
        for (text, line, words) in cases {
            let err = SessionFile::parse(text).expect_err(text);
            assert_eq!(err.line, *line, "{text:?}: {err}");
            assert!(err.message.contains(words), "{text:?}: {err}");
        }
    }

    #[test]
    fn body_lines_follow_the_command_only() {
        let file = SessionFile::parse("$ a\n> one\n>\n> three\nout\n> not body\n").unwrap();
        assert_eq!(
            file.steps[0].action,
            Action::Command("a\none\n\nthree".into())
        );
        assert_eq!(
            file.steps[0].expected.patterns,
            [
                Pattern::Line("out".into()),
                Pattern::Line("> not body".into())
            ]
        );
    }

    #[test]
    fn comments_after_the_first_command_are_expected_output() {
        let file = SessionFile::parse("$ a\n# not a comment\n").unwrap();
        assert_eq!(
            file.steps[0].expected.patterns,
            [Pattern::Line("# not a comment".into())]
        );
    }

    #[test]
    fn a_diff_names_the_file_line_and_shows_both_sides() {
        let text = "$ a\nok\n$ get colour\nblue\nsky\n";
        let file = SessionFile::parse(text).unwrap();
        let step = &file.steps[1];
        let answer = ok("red\nsky");
        assert!(!step.expected.matches(&answer));
        let diff = diff(&file, step, &answer, "kv.session");
        assert_eq!(
            diff,
            "--- kv.session:4 (expected after `$ get colour`)\n+++ the plugin's answer\n@@ -4,2 +4,2 @@\n-blue\n+red\n sky\n"
        );
    }

    #[test]
    fn a_diff_shows_a_wrong_status_on_the_first_line() {
        let file = SessionFile::parse("$ a\n! gone\n").unwrap();
        let diff = diff(&file, &file.steps[0], &ok("gone"), "f");
        assert!(
            diff.ends_with("@@ -2,1 +2,1 @@\n-! gone\n+gone\n"),
            "{diff}"
        );
    }

    #[test]
    fn a_diff_lets_dots_stand_for_what_they_match() {
        let file = SessionFile::parse("$ a\nhead\n...\ntail\n").unwrap();
        let diff = diff(&file, &file.steps[0], &ok("head\n1\n2\n3\nTAIL"), "f");
        assert!(
            diff.ends_with(" head\n ...\n-tail\n+TAIL\n"),
            "the lines `...` matches are not shown as added: {diff}"
        );
    }

    #[test]
    fn far_apart_changes_get_hunks_of_their_own() {
        let expected: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let actual = expected
            .replace("2\n", "two\n")
            .replace("19\n", "nineteen\n");
        let file = SessionFile::parse(&format!("$ a\n{expected}")).unwrap();
        let diff = diff(&file, &file.steps[0], &ok(&actual), "f");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(
            diff.contains("@@ -2,5 +2,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n"),
            "{diff}"
        );
    }

    #[test]
    fn bless_rewrites_only_the_blocks_given_and_keeps_the_rest() {
        let text = "# keep me\n$ a\nold\n...\n\n$ b\nfine\n$ c\n> body\n! was failing\n";
        let file = SessionFile::parse(text).unwrap();
        let a = ok("new\nlines  \n\n");
        let c = ok("now fine");
        let blessed = file.blessed(&[(0, &a), (2, &c)]);
        assert_eq!(
            blessed,
            "# keep me\n$ a\nnew\nlines\n\n$ b\nfine\n$ c\n> body\nnow fine\n"
        );
        let again = SessionFile::parse(&blessed).unwrap();
        assert!(again.steps[0].expected.matches(&a));
        assert!(again.steps[2].expected.matches(&c));
    }

    #[test]
    fn blessed_failures_round_trip() {
        for output in ["oops", "", "\nsecond line", "! looks like a bang"] {
            let answer = failed(output);
            let file = SessionFile::parse("$ a\nx\n").unwrap();
            let blessed = file.blessed(&[(0, &answer)]);
            let again = SessionFile::parse(&blessed).unwrap();
            assert!(
                again.steps[0].expected.matches(&answer),
                "{output:?}: {blessed:?}"
            );
        }
    }

    #[test]
    fn steps_render_as_a_session_file() {
        let lines = render_step(&Action::Command("note add\nbody\n".into()), &failed("no\n"));
        assert_eq!(lines, ["$ note add", "> body", ">", "! no"]);
        let rendered = lines.join("\n");
        let file = SessionFile::parse(&rendered).unwrap();
        assert_eq!(
            file.steps[0].action,
            Action::Command("note add\nbody\n".into())
        );
        assert!(file.steps[0].expected.matches(&failed("no")));
    }
}
