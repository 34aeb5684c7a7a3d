//! When a block typed at the terminal is complete, so that Enter runs it,
//! and what command a finished block stands for.
//!
//! The rules, per environment (each a heuristic that errs towards asking
//! for one more line; Alt-Enter runs a block as it stands, and the explicit
//! block — `ENV:` alone, ended by a line holding a single `.` — is always
//! exact):
//!
//! - `bash: ...` is complete unless a quote is open, the last line ends
//!   with `\`, `|`, `&&` or `||`, a here-document has not reached its
//!   delimiter line, or an `if`/`case`/`for`/`while`/`until`/`select`/`{`
//!   has not reached its `fi`/`esac`/`done`/`}`.
//! - `python: ...` is complete unless a bracket or a triple-quoted string
//!   is open or the last line ends with `\`; a block with a compound
//!   statement (a line ending with `:`, a decorator, an indented line)
//!   ends, as in Python's own console, at an empty line.
//! - A command of the editor or a plugin whose described example spans
//!   several lines (the editor's `edit` and `create`: their content
//!   follows the first line) ends at a line holding a single `.`.
//! - Anything else is one line.
//!
//! This module reads text; it must not run commands or know the terminal.

use std::collections::HashMap;

use envhost_core::{InputRule, Usage};

use super::entry::{Entry, parse_entry};

/// How an environment's commands are found complete.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rule {
    Shell,
    Python,
    /// The commands whose content follows on the next lines.
    Bodies(Vec<String>),
}

/// The rule of every environment.
#[derive(Debug, Clone, Default)]
pub struct Blocks {
    rules: HashMap<String, Rule>,
}

/// The line that ends an explicit block, and a command with content.
const END: &str = ".";

impl Blocks {
    /// The rules for these environments, as each one's usage says
    /// ([`InputRule`]): a shell's, Python's, or content after the commands
    /// its usage shows with content.
    pub fn new<'a>(environments: impl IntoIterator<Item = (&'a str, Option<&'a Usage>)>) -> Self {
        let mut rules = HashMap::new();
        for (name, usage) in environments {
            let rule = match usage.map(|usage| usage.input) {
                Some(InputRule::Shell) => Rule::Shell,
                Some(InputRule::Python) => Rule::Python,
                Some(InputRule::Commands) | None => Rule::Bodies(
                    usage
                        .map(|usage| {
                            usage
                                .commands
                                .iter()
                                .filter(|spec| spec.example.trim_end().contains('\n'))
                                .map(|spec| spec.name().to_owned())
                                .collect()
                        })
                        .unwrap_or_default(),
                ),
            };
            rules.insert(name.to_owned(), rule);
        }
        Blocks { rules }
    }

    /// Whether `buffer` (everything typed at the prompt so far, its lines
    /// joined by `\n`) is a whole entry, ready to run.
    pub fn is_complete(&self, buffer: &str) -> bool {
        let (first, rest) = match buffer.split_once('\n') {
            Some((first, rest)) => (first, Some(rest)),
            None => (buffer, None),
        };
        match parse_entry(first) {
            Entry::StartBlock { .. } => rest.is_some_and(|rest| last_line(rest).trim_end() == END),
            Entry::Command {
                environment,
                command,
            } => {
                let command = match rest {
                    Some(rest) => format!("{command}\n{rest}"),
                    None => command,
                };
                // An instance (`bash:server`) follows its kind's rule.
                let kind = environment.split(':').next().unwrap_or(&environment);
                match self.rules.get(kind) {
                    Some(Rule::Shell) => shell_complete(&command),
                    Some(Rule::Python) => python_complete(&command),
                    Some(Rule::Bodies(bodies)) => {
                        let name = command.split_whitespace().next().unwrap_or("");
                        !bodies.iter().any(|body| body == name)
                            || (command.contains('\n') && last_line(&command).trim_end() == END)
                    }
                    None => true,
                }
            }
            _ => true,
        }
    }
}

fn last_line(text: &str) -> &str {
    text.rsplit('\n').next().unwrap_or(text)
}

/// The entry a finished block stands for: its first line read as usual,
/// the lines after it added to the command; the closing `.` line and
/// trailing blank lines are not part of the command.
pub fn entry_of_block(buffer: &str) -> Entry {
    let (first, rest) = match buffer.split_once('\n') {
        Some((first, rest)) => (first, rest),
        None => return parse_entry(buffer),
    };
    let mut lines: Vec<&str> = rest.split('\n').collect();
    while lines.last().is_some_and(|line| line.trim().is_empty()) {
        lines.pop();
    }
    if lines.last().is_some_and(|line| line.trim_end() == END) {
        lines.pop();
    }
    let body = lines.join("\n");
    match parse_entry(first) {
        Entry::StartBlock { environment } => Entry::Command {
            environment,
            command: body,
        },
        Entry::Command {
            environment,
            command,
        } if !body.is_empty() => Entry::Command {
            environment,
            command: format!("{command}\n{body}"),
        },
        other => other,
    }
}

/// The shell rule (see the module's documentation).
pub fn shell_complete(script: &str) -> bool {
    ShellScan::new().scan(script)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
    AnsiC,
    Backtick,
}

struct HereDoc {
    delimiter: String,
    strip_tabs: bool,
}

struct ShellScan {
    quote: Quote,
    /// Open `if`, `case`, loops and `{`.
    depth: i32,
    heredocs: Vec<HereDoc>,
    /// The next word is in command position (reserved words count there).
    command_position: bool,
    /// The last thing on the last line asks for more: `|`, `&&`, `||`, `\`.
    dangling: bool,
    word: String,
    /// The word has a quoted part (so it is never a reserved word).
    word_quoted: bool,
}

const OPENERS: [&str; 7] = ["if", "case", "for", "while", "until", "select", "{"];
const CLOSERS: [&str; 4] = ["fi", "esac", "done", "}"];
/// Reserved words after which a command starts.
const LEADING: [&str; 8] = ["then", "else", "elif", "do", "!", "if", "while", "until"];

impl ShellScan {
    fn new() -> Self {
        ShellScan {
            quote: Quote::None,
            depth: 0,
            heredocs: Vec::new(),
            command_position: true,
            dangling: false,
            word: String::new(),
            word_quoted: false,
        }
    }

    fn scan(mut self, script: &str) -> bool {
        let mut reading_heredoc: Option<HereDoc> = None;
        for line in script.split('\n') {
            if let Some(heredoc) = &reading_heredoc {
                let candidate = if heredoc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if candidate == heredoc.delimiter {
                    reading_heredoc = None;
                }
                if reading_heredoc.is_none() && !self.heredocs.is_empty() {
                    reading_heredoc = Some(self.heredocs.remove(0));
                }
                continue;
            }
            self.line(line);
            if !self.heredocs.is_empty() {
                reading_heredoc = Some(self.heredocs.remove(0));
            }
        }
        reading_heredoc.is_none()
            && self.heredocs.is_empty()
            && self.quote == Quote::None
            && self.depth <= 0
            && !self.dangling
    }

    fn line(&mut self, line: &str) {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            match self.quote {
                Quote::Single if c == '\'' => self.quote = Quote::None,
                Quote::Single => {}
                Quote::Double | Quote::AnsiC | Quote::Backtick if c == '\\' => i += 1,
                Quote::Double if c == '"' => self.quote = Quote::None,
                Quote::AnsiC if c == '\'' => self.quote = Quote::None,
                Quote::Backtick if c == '`' => self.quote = Quote::None,
                Quote::Double | Quote::AnsiC | Quote::Backtick => {}
                Quote::None => {
                    if !c.is_whitespace() {
                        self.dangling = false;
                    }
                    match c {
                        '\\' if next.is_none() => {
                            // A line continuation: the word goes on.
                            self.dangling = true;
                            return;
                        }
                        '\\' => {
                            self.word.push(chars[i + 1]);
                            self.word_quoted = true;
                            i += 1;
                        }
                        '#' if self.word.is_empty() && !self.word_quoted => break,
                        '\'' => self.open(Quote::Single),
                        '"' => self.open(Quote::Double),
                        '`' => self.open(Quote::Backtick),
                        '$' if next == Some('\'') => {
                            self.open(Quote::AnsiC);
                            i += 1;
                        }
                        '$' if next == Some('(') && chars.get(i + 2) == Some(&'(') => {
                            i = skip_arithmetic(&chars, i + 3);
                            self.word.push('$');
                            continue;
                        }
                        ' ' | '\t' => self.end_word(),
                        ';' | '&' | '|' | '(' | ')' => {
                            let arithmetic = c == '('
                                && next == Some('(')
                                && self.word.is_empty()
                                && self.command_position;
                            self.end_word();
                            if arithmetic {
                                i = skip_arithmetic(&chars, i + 2);
                                continue;
                            }
                            let pair = next.is_some_and(|n| {
                                matches!((c, n), ('&', '&') | ('|', '|') | (';', ';') | ('|', '&'))
                            });
                            if pair {
                                i += 1;
                            }
                            self.command_position = true;
                            self.dangling = matches!(c, '|') || (c == '&' && pair);
                        }
                        '<' if next == Some('<') && chars.get(i + 2) != Some(&'<') => {
                            self.end_word();
                            i = self.heredoc(&chars, i + 2);
                            continue;
                        }
                        '<' | '>' => {
                            self.end_word();
                            // The word after a redirection is its target.
                            self.command_position = false;
                            while matches!(chars.get(i + 1), Some('<' | '>' | '&' | '|')) {
                                i += 1;
                            }
                        }
                        other => self.word.push(other),
                    }
                }
            }
            i += 1;
        }
        if self.quote == Quote::None {
            self.end_word();
            // A line's end separates commands.
            self.command_position = true;
        }
    }

    fn open(&mut self, quote: Quote) {
        self.quote = quote;
        self.word_quoted = true;
    }

    fn end_word(&mut self) {
        if self.word.is_empty() && !self.word_quoted {
            return;
        }
        let word = std::mem::take(&mut self.word);
        let reserved = !self.word_quoted;
        self.word_quoted = false;
        if reserved && (self.command_position || word == "{") {
            if OPENERS.contains(&word.as_str()) {
                self.depth += 1;
            } else if CLOSERS.contains(&word.as_str()) {
                self.depth -= 1;
            }
            self.command_position = LEADING.contains(&word.as_str()) || word == "{";
        } else {
            self.command_position = false;
        }
    }

    /// Reads a here-document's operator after `<<`; returns where to go on.
    fn heredoc(&mut self, chars: &[char], mut i: usize) -> usize {
        let strip_tabs = chars.get(i) == Some(&'-');
        if strip_tabs {
            i += 1;
        }
        while matches!(chars.get(i), Some(' ' | '\t')) {
            i += 1;
        }
        let mut delimiter = String::new();
        let mut quote: Option<char> = None;
        while let Some(&c) = chars.get(i) {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => delimiter.push(c),
                (None, '\'' | '"') => quote = Some(c),
                (None, '\\') => {
                    if let Some(&escaped) = chars.get(i + 1) {
                        delimiter.push(escaped);
                        i += 1;
                    }
                }
                (None, c) if c.is_whitespace() || ";&|<>()".contains(c) => break,
                (None, c) => delimiter.push(c),
            }
            i += 1;
        }
        if !delimiter.is_empty() {
            self.heredocs.push(HereDoc {
                delimiter,
                strip_tabs,
            });
        }
        self.command_position = false;
        i
    }
}

/// Skips an arithmetic expression up to its closing `))`; returns the
/// index after it (or the line's end).
fn skip_arithmetic(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match chars[i] {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            ')' if chars.get(i + 1) == Some(&')') => return i + 2,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The Python rule (see the module's documentation).
pub fn python_complete(code: &str) -> bool {
    let mut brackets = 0i32;
    // The open string's quote and whether it is triple.
    let mut string: Option<(char, bool)> = None;
    let mut compound = false;
    let mut continued = false;
    for (number, line) in code.split('\n').enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let starts_logical = string.is_none() && brackets == 0 && !continued;
        continued = false;
        if starts_logical && number > 0 {
            let code_start = chars.iter().position(|c| !c.is_whitespace());
            if let Some(start) = code_start
                && (start > 0 && chars[start] != '#')
            {
                compound = true;
            }
        }
        if starts_logical && line.trim_start().starts_with('@') {
            compound = true;
        }
        let mut last_significant: Option<char> = None;
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match string {
                Some((quote, triple)) => {
                    if c == '\\' {
                        i += 1;
                    } else if c == quote {
                        if !triple {
                            string = None;
                        } else if chars.get(i + 1) == Some(&quote)
                            && chars.get(i + 2) == Some(&quote)
                        {
                            string = None;
                            i += 2;
                        }
                    }
                }
                None => match c {
                    '#' => break,
                    '\\' if i + 1 == chars.len() => continued = true,
                    '\'' | '"' => {
                        let triple = chars.get(i + 1) == Some(&c) && chars.get(i + 2) == Some(&c);
                        string = Some((c, triple));
                        if triple {
                            i += 2;
                        }
                        last_significant = Some(c);
                    }
                    '(' | '[' | '{' => {
                        brackets += 1;
                        last_significant = Some(c);
                    }
                    ')' | ']' | '}' => {
                        brackets -= 1;
                        last_significant = Some(c);
                    }
                    c if c.is_whitespace() => {}
                    c => last_significant = Some(c),
                },
            }
            i += 1;
        }
        // A one-line string left open ends with its line (a syntax error
        // Python will report).
        if let Some((_, false)) = string {
            string = None;
        }
        if string.is_none() && brackets <= 0 && !continued && last_significant == Some(':') {
            compound = true;
        }
    }
    if string.is_some() || brackets > 0 || continued {
        return false;
    }
    if !compound {
        return true;
    }
    // A compound statement ends at an empty line after it.
    code.contains('\n') && last_line(code).trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use envhost_core::CommandSpec;

    fn blocks() -> Blocks {
        let editor = Usage {
            summary: String::new(),
            commands: vec![
                CommandSpec::new("view <file>", "Shows it.", "view a.py"),
                CommandSpec::new("create <file>", "Creates it.", "create a.py\n# content"),
            ],
            ..Usage::default()
        };
        let shell = Usage {
            input: InputRule::Shell,
            ..Usage::default()
        };
        let python = Usage {
            input: InputRule::Python,
            ..Usage::default()
        };
        Blocks::new([
            ("bash", Some(&shell)),
            ("python", Some(&python)),
            ("editor", Some(&editor)),
            ("timer", None),
        ])
    }

    #[test]
    fn lines_and_meta_commands_are_complete_at_once() {
        let blocks = blocks();
        for complete in [
            "bash: ls",
            ":wait 5",
            "",
            "nonsense",
            "timer: start 5",
            "editor: view a.py",
            "nowhere: x",
        ] {
            assert!(blocks.is_complete(complete), "{complete:?}");
        }
    }

    #[test]
    fn an_explicit_block_ends_at_a_dot() {
        let blocks = blocks();
        assert!(!blocks.is_complete("python:"));
        assert!(!blocks.is_complete("python:\ndef f():\n\n    return 1\n"));
        assert!(blocks.is_complete("python:\ndef f():\n\n    return 1\n."));
        assert_eq!(
            entry_of_block("python:\ndef f():\n\n    return 1\n.\n"),
            Entry::Command {
                environment: "python".into(),
                command: "def f():\n\n    return 1".into()
            }
        );
    }

    #[test]
    fn editor_content_ends_at_a_dot() {
        let blocks = blocks();
        assert!(!blocks.is_complete("editor: create a.py"));
        assert!(!blocks.is_complete("editor: create a.py\nimport os\n\n"));
        assert!(blocks.is_complete("editor: create a.py\nimport os\n\nx = 1\n."));
        assert_eq!(
            entry_of_block("editor: create a.py\nimport os\n\nx = 1\n."),
            Entry::Command {
                environment: "editor".into(),
                command: "create a.py\nimport os\n\nx = 1".into()
            }
        );
        // An empty file: the command alone.
        assert_eq!(
            entry_of_block("editor: create a.py\n."),
            Entry::Command {
                environment: "editor".into(),
                command: "create a.py".into()
            }
        );
    }

    #[test]
    fn python_blocks_end_like_in_pythons_console() {
        for complete in [
            "x = 1",
            "print('a:')",
            "d = {'a': 1}",
            "for i in range(3): print(i)",
            "def f(x):\n    return x + 1\n",
            "def f(x):\n    return x + 1\n    ",
            "class A:\n    def f(self):\n        pass\n\n",
            "if x:\n    a()\nelse:\n    b()\n",
            "@decorator\ndef f():\n    pass\n",
            "x = (1,\n     2)",
            "s = '''a\nb'''",
            "x = 1 + \\\n    2",
            "x = 'unclosed",
            "# just a comment:",
        ] {
            assert!(python_complete(complete), "{complete:?}");
        }
        for incomplete in [
            "def f(x):",
            "def f(x):\n    return x + 1",
            "if x:\n    a()\nelse:",
            "@decorator",
            "x = (1,",
            "x = [\n1,\n2,",
            "s = '''a\nb",
            "s = \"\"\"doc",
            "x = 1 + \\",
            "for i in range(3):  # loop",
            "d = {'a:': (1,",
        ] {
            assert!(!python_complete(incomplete), "{incomplete:?}");
        }
        let blocks = blocks();
        assert!(!blocks.is_complete("python: def f(x):\n    return x"));
        assert!(blocks.is_complete("python: def f(x):\n    return x\n"));
        assert_eq!(
            entry_of_block("python: def f(x):\n    return x\n"),
            Entry::Command {
                environment: "python".into(),
                command: "def f(x):\n    return x".into()
            }
        );
    }

    #[test]
    fn shell_blocks_end_when_the_shell_would_run_them() {
        for complete in [
            "ls -la",
            "echo 'a b' \"c d\" $'e\\'f'",
            "echo $((1 << 2)) && ((x = 1 << 3))",
            "cat <<EOF\nhello\nEOF",
            "cat <<-'END' > f\n\tline $x\n\tEND",
            "cat <<< 'here string'",
            "for f in *; do echo \"$f\"; done",
            "if true; then\n  echo yes\nfi",
            "case $x in\n  a) echo a;;\n  *) echo other;;\nesac",
            "f() {\n  echo hi\n}",
            "echo done fi esac",
            "echo '{' if",
            "echo a # if (comment",
            "echo a | cat",
            "sleep 1 &",
            "x=1; echo $x",
            "echo a\\ b",
        ] {
            assert!(shell_complete(complete), "{complete:?}");
        }
        for incomplete in [
            "echo 'open",
            "echo \"open\nstill",
            "cat <<EOF\nhello",
            "cat <<EOF\nhello\n EOF",
            "cat <<A <<B\na\nA\nb",
            "ls \\",
            "ls |",
            "true &&",
            "false ||",
            "for f in *; do",
            "for f in *\ndo\n  echo $f",
            "if true; then\n  echo yes",
            "while read line; do\n  echo $line",
            "case $x in\n  a) echo a;;",
            "f() {\n  echo hi",
            "if [ -f a ]; then\n  cat <<EOF\nfi\nEOF",
        ] {
            assert!(!shell_complete(incomplete), "{incomplete:?}");
        }
        let blocks = blocks();
        assert!(!blocks.is_complete("bash: cat <<EOF > notes.txt\nfirst"));
        assert!(blocks.is_complete("bash: cat <<EOF > notes.txt\nfirst\nEOF"));
    }
}
