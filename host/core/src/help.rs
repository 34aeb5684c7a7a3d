//! Progressive help: declarative command descriptions, per-command
//! usage tracking, routing by first word, and progressive disclosure on the
//! screen (LONG help for commands not used yet, SHORT help for used ones).
//!
//! This is the one implementation of that mechanism. The editor uses it, and
//! so does every WebAssembly plugin that describes its commands, whatever
//! language it was written in: the plugin hands the host the same
//! [`CommandSpec`]s and the host renders them. This module formats text and
//! routes command words; it must not execute commands or know any
//! environment's state.

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;

/// One command of a structured environment, as its author describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// How to call it: `view <file> /<start>/ /<end>/ [label]`. The first
    /// word is the command's name.
    pub signature: String,
    /// What it does; may span several lines. Shown in full in LONG help.
    pub description: String,
    /// The one-line form for SHORT help. Without it, the first line of the
    /// description is used (without its final full stop).
    pub summary: Option<String>,
    /// Raw command text; the help wraps it in a fence named after the
    /// environment. May span several lines (e.g. an edit and its content).
    pub example: String,
    /// Simple commands (`close <id>`) always get SHORT help.
    pub simple: bool,
}

impl CommandSpec {
    /// A command: how to call it (`view <file> [label]`), what it does, and
    /// an example.
    pub fn new(signature: &str, description: &str, example: &str) -> Self {
        CommandSpec {
            signature: signature.to_owned(),
            description: description.to_owned(),
            summary: None,
            example: example.to_owned(),
            simple: false,
        }
    }

    /// The one line its short help shows, when not the description's first.
    pub fn with_summary(mut self, summary: &str) -> Self {
        self.summary = Some(summary.to_owned());
        self
    }

    /// Marks it simple: its signature says it all, so its long help is
    /// short.
    pub fn simple(mut self) -> Self {
        self.simple = true;
        self
    }

    /// The command's name: the first word of its signature.
    pub fn name(&self) -> &str {
        self.signature.split_whitespace().next().unwrap_or("")
    }

    /// The text after `signature - ` in SHORT help.
    pub fn short_description(&self) -> String {
        match &self.summary {
            Some(summary) => summary.trim().to_owned(),
            None => {
                let first = self.description.lines().next().unwrap_or("").trim();
                first.strip_suffix('.').unwrap_or(first).to_owned()
            }
        }
    }
}

/// A description that cannot drive the help system.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelpError {
    /// A command has no signature.
    #[error("command #{index} has an empty signature; a signature starts with the command's name")]
    EmptySignature {
        /// The command's position in the list.
        index: usize,
    },
    /// Two commands have the same name.
    #[error("two commands are named {name:?}; each command's first word must be unique")]
    DuplicateName {
        /// The name used twice.
        name: String,
    },
}

/// A command word that matches no described command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCommand {
    /// The environment it was sent to.
    pub environment: String,
    /// The word that names no command.
    pub word: String,
    /// The names of its commands.
    pub available: Vec<String>,
}

impl fmt::Display for UnknownCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.word.is_empty() {
            write!(f, "Empty command.")?;
        } else {
            write!(f, "Unknown command: {}", self.word)?;
        }
        write!(
            f,
            "\nAvailable: {}\nThe Commands section of the {} screen shows how to use each one.",
            self.available.join(", "),
            self.environment
        )
    }
}

/// A command routed to its spec: the name and everything after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed<'a> {
    /// The command's name.
    pub name: &'a str,
    /// The text after the command word on the first line, trimmed.
    pub arguments: &'a str,
    /// The lines after the first (content for `edit` / `create`), verbatim.
    pub body: Option<&'a str>,
}

/// An environment's described commands and which of them have been used.
#[derive(Debug, Clone)]
pub struct CommandHelp {
    environment: String,
    commands: Vec<CommandSpec>,
    used: HashSet<String>,
    /// [`render`](Self::render)'s text, kept until a command is first
    /// used: every answer's screen shows it, and it changes only then.
    rendered: OnceLock<String>,
}

impl CommandHelp {
    /// `environment` names the fence of examples (```` ```editor ````).
    pub fn new(environment: &str, commands: Vec<CommandSpec>) -> Result<Self, HelpError> {
        let mut seen = HashSet::new();
        for (index, spec) in commands.iter().enumerate() {
            let name = spec.name();
            if name.is_empty() {
                return Err(HelpError::EmptySignature { index });
            }
            if !seen.insert(name.to_owned()) {
                return Err(HelpError::DuplicateName {
                    name: name.to_owned(),
                });
            }
        }
        Ok(CommandHelp {
            environment: environment.to_owned(),
            commands,
            used: HashSet::new(),
            rendered: OnceLock::new(),
        })
    }

    /// The commands, in the order the help lists them.
    pub fn commands(&self) -> &[CommandSpec] {
        &self.commands
    }

    /// Whether the command `name` has been used (its help is short now).
    pub fn is_used(&self, name: &str) -> bool {
        self.used.contains(name)
    }

    /// The commands used so far, sorted (for a saved session).
    pub fn used(&self) -> Vec<String> {
        let mut used: Vec<String> = self.used.iter().cloned().collect();
        used.sort();
        used
    }

    /// Marks `name` used, as a restored session had it; `false` (and
    /// nothing marked) when no command has that name.
    pub fn mark_used(&mut self, name: &str) -> bool {
        let known = self.commands.iter().any(|c| c.name() == name);
        if known && self.used.insert(name.to_owned()) {
            self.rendered = OnceLock::new();
        }
        known
    }

    /// Finds the command a text is for, by its first word, and marks it used
    /// (before it runs).
    pub fn route<'t>(&mut self, text: &'t str) -> Result<Routed<'t>, UnknownCommand> {
        let routed = split_command(text);
        if !self.commands.iter().any(|c| c.name() == routed.name) {
            return Err(UnknownCommand {
                environment: self.environment.clone(),
                word: routed.name.to_owned(),
                available: self.commands.iter().map(|c| c.name().to_owned()).collect(),
            });
        }
        if self.used.insert(routed.name.to_owned()) {
            self.rendered = OnceLock::new();
        }
        Ok(routed)
    }

    /// The `Commands:` part of a screen.
    pub fn render(&self) -> String {
        self.kept_render().to_owned()
    }

    fn kept_render(&self) -> &str {
        self.rendered.get_or_init(|| self.render_now())
    }

    fn render_now(&self) -> String {
        let mut out = String::from("Commands:\n");
        let mut previous: Option<(bool, bool)> = None; // (long, simple)
        for spec in &self.commands {
            let long = !spec.simple && !self.used.contains(spec.name());
            if let Some((prev_long, prev_simple)) = previous {
                // Short entries of the same kind sit on adjacent lines; a
                // long entry, or a change from regular to simple commands,
                // gets a blank line around it.
                if long || prev_long || prev_simple != spec.simple {
                    out.push('\n');
                }
            }
            if long {
                self.render_long(spec, &mut out);
            } else {
                out.push_str(&format!(
                    "  {} - {}\n",
                    spec.signature.trim(),
                    spec.short_description()
                ));
            }
            previous = Some((long, spec.simple));
        }
        out
    }

    /// A whole structured-environment screen: the state display, then the
    /// commands.
    pub fn screen_with_state(&self, state: &str) -> String {
        let state = state.trim_end_matches('\n');
        let commands = self.kept_render();
        if state.is_empty() {
            commands.to_owned()
        } else {
            let mut screen = String::with_capacity(state.len() + 2 + commands.len());
            screen.push_str(state);
            screen.push_str("\n\n");
            screen.push_str(commands);
            screen
        }
    }

    fn render_long(&self, spec: &CommandSpec, out: &mut String) {
        out.push_str(&format!("  {}\n", spec.signature.trim()));
        for line in spec.description.trim_end().lines() {
            push_indented(out, 4, line);
        }
        let example = spec.example.trim_end_matches('\n');
        if !example.trim().is_empty() {
            out.push_str("    Example:\n");
            push_indented(out, 6, &format!("```{}", self.environment));
            for line in example.lines() {
                push_indented(out, 6, line);
            }
            push_indented(out, 6, "```");
        }
    }
}

/// The whole of an environment's usage as text, every command in its long
/// form whether used or not: for describing an environment ahead of its
/// screen (an MCP tool's description). `environment` names the examples'
/// fence.
pub fn render_usage(environment: &str, summary: &str, commands: &[CommandSpec]) -> String {
    let mut out = summary.trim_end().to_owned();
    if commands.is_empty() {
        return out;
    }
    let help = CommandHelp {
        environment: environment.to_owned(),
        commands: commands.to_vec(),
        used: HashSet::new(),
        rendered: OnceLock::new(),
    };
    let mut rendered = String::from("Commands:\n");
    for (index, spec) in commands.iter().enumerate() {
        if index > 0 {
            rendered.push('\n');
        }
        help.render_long(spec, &mut rendered);
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(rendered.trim_end());
    out
}

fn push_indented(out: &mut String, indent: usize, line: &str) {
    if line.is_empty() {
        out.push('\n');
    } else {
        out.push_str(&" ".repeat(indent));
        out.push_str(line);
        out.push('\n');
    }
}

/// Splits a command's text into its name, its arguments and its body: the
/// one rule the host, the guest SDK and every example plugin follow
/// (`wit/command-split-cases.json` holds it with the cases each of them is
/// tested against).
///
/// Leading whitespace, blank lines included, is skipped. The first line
/// runs to the first `\n`. The name is that line up to its first whitespace
/// character; the arguments are the rest of the line with leading and
/// trailing whitespace removed (so the `\r` of a CRLF line end goes too);
/// the body is everything after the `\n`, verbatim, or `None` without one.
/// Whitespace is Unicode's White_Space ([`char::is_whitespace`]).
pub fn split_command(text: &str) -> Routed<'_> {
    let text = text.trim_start();
    let (first_line, body) = match text.split_once('\n') {
        Some((first_line, body)) => (first_line, Some(body)),
        None => (text, None),
    };
    let (name, arguments) = first_line
        .split_once(char::is_whitespace)
        .unwrap_or((first_line, ""));
    Routed {
        name,
        arguments: arguments.trim(),
        body,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn usage_lists_every_command_in_its_long_form() {
        let commands = vec![
            CommandSpec::new("view <file>", "Shows a file.", "view a.txt"),
            CommandSpec::new("close <id>", "Closes a view.", "close 1").simple(),
        ];
        let text = render_usage("editor", "Edits files.", &commands);
        assert_eq!(
            text,
            "Edits files.\n\nCommands:\n  view <file>\n    Shows a file.\n    Example:\n      ```editor\n      view a.txt\n      ```\n\n  close <id>\n    Closes a view.\n    Example:\n      ```editor\n      close 1\n      ```"
        );
        assert_eq!(render_usage("bash", "Any command.", &[]), "Any command.");
    }
    use super::*;

    fn timer() -> CommandHelp {
        CommandHelp::new(
            "timer",
            vec![
                CommandSpec::new(
                    "start",
                    "Start the timer from zero or resume after stop.",
                    "start",
                ),
                CommandSpec::new("stop", "Stop the timer and record elapsed time.", "stop"),
                CommandSpec::new("reset", "Reset timer to zero.", "reset"),
            ],
        )
        .unwrap()
    }

    #[test]
    fn the_timer_before_any_command_shows_long_help() {
        let help = timer();
        let expected = "\
Timer: Stopped (0.00s)

Commands:
  start
    Start the timer from zero or resume after stop.
    Example:
      ```timer
      start
      ```

  stop
    Stop the timer and record elapsed time.
    Example:
      ```timer
      stop
      ```

  reset
    Reset timer to zero.
    Example:
      ```timer
      reset
      ```
";
        assert_eq!(help.screen_with_state("Timer: Stopped (0.00s)"), expected);
    }

    #[test]
    fn the_timer_after_start_shows_short_help_for_start() {
        let mut help = timer();
        help.route("start").unwrap();
        let rendered = help.render();
        assert!(rendered.starts_with(
            "Commands:\n  start - Start the timer from zero or resume after stop\n\n  stop\n"
        ));
    }

    fn editor() -> CommandHelp {
        CommandHelp::new(
            "editor",
            vec![
                CommandSpec::new(
                    "view <file> /<start>/ /<end>/ [label]",
                    "View a section.",
                    "view a /x/ /y/",
                )
                .with_summary("View file section by regex patterns"),
                CommandSpec::new(
                    "edit <file> <start>-<end>",
                    "Replace lines.\nContent follows.",
                    "edit a 1-2\nnew",
                )
                .with_summary("Replace lines (must be visible in a view)"),
                CommandSpec::new(
                    "search \"<pattern>\" <glob>",
                    "Find text.",
                    "search \"TODO\" *.py",
                )
                .with_summary("Find text matching pattern in files"),
                CommandSpec::new(
                    "create <file>",
                    "Create a new file with initial content.",
                    "create f.py\n# New",
                ),
                CommandSpec::new("close <id>", "Close a view", "close 1").simple(),
                CommandSpec::new(
                    "next_match <id>",
                    "Show next pattern match for a view",
                    "next_match 1",
                )
                .simple(),
            ],
        )
        .unwrap()
    }

    #[test]
    fn used_commands_group_after_view_edit_search() {
        let mut help = editor();
        for cmd in ["view a /x/ /y/", "edit a 1-1\nz", "search \"q\" *"] {
            help.route(cmd).unwrap();
        }
        let expected = "\
Commands:
  view <file> /<start>/ /<end>/ [label] - View file section by regex patterns
  edit <file> <start>-<end> - Replace lines (must be visible in a view)
  search \"<pattern>\" <glob> - Find text matching pattern in files

  create <file>
    Create a new file with initial content.
    Example:
      ```editor
      create f.py
      # New
      ```

  close <id> - Close a view
  next_match <id> - Show next pattern match for a view
";
        assert_eq!(help.render(), expected);
    }

    #[test]
    fn the_kept_text_follows_each_first_use() {
        let mut help = editor();
        let fresh = help.render();
        assert!(fresh.contains("  view <file> /<start>/ /<end>/ [label]\n    View"));
        help.route("view a /x/ /y/").unwrap();
        let after_view = help.render();
        assert!(
            after_view.contains("[label] - View file section"),
            "{after_view}"
        );
        assert!(help.mark_used("create"));
        assert!(
            help.screen_with_state("Views:")
                .contains("  create <file> - Create")
        );
        // Using a command again changes nothing.
        help.route("view b /x/ /y/").unwrap();
        assert!(help.render().contains("[label] - View file section"));
        assert_ne!(fresh, after_view);
    }

    #[test]
    fn short_regular_then_short_simple_are_separated() {
        let mut help = editor();
        for cmd in [
            "view a /x/ /y/",
            "edit a 1-1\nz",
            "search \"q\" *",
            "create b\n",
        ] {
            help.route(cmd).unwrap();
        }
        assert!(
            help.render().contains(
                "  create <file> - Create a new file with initial content\n\n  close <id>"
            )
        );
    }

    #[test]
    fn unknown_and_empty_commands_list_what_is_available() {
        let mut help = timer();
        let err = help.route("frobnicate now").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Unknown command: frobnicate\nAvailable: start, stop, reset\nThe Commands section of the timer screen shows how to use each one."
        );
        assert!(
            help.route("   ")
                .unwrap_err()
                .to_string()
                .starts_with("Empty command.")
        );
        assert!(!help.is_used("frobnicate"));
    }

    #[test]
    fn commands_split_by_the_rule_every_implementation_shares() {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("../../../wit/command-split-cases.json"))
                .expect("the cases are JSON");
        let cases = cases["cases"].as_array().expect("a list of cases");
        assert!(cases.len() > 20);
        for case in cases {
            let routed = split_command(case["text"].as_str().expect("text"));
            assert_eq!(
                (routed.name, routed.arguments, routed.body),
                (
                    case["name"].as_str().expect("name"),
                    case["arguments"].as_str().expect("arguments"),
                    case["body"].as_str()
                ),
                "{}",
                case["why"]
            );
        }
    }

    #[test]
    fn routing_splits_arguments_and_body() {
        let routed = split_command("edit src/a.py 3-4\n    x = 1\n\ny = 2\n");
        assert_eq!(routed.name, "edit");
        assert_eq!(routed.arguments, "src/a.py 3-4");
        assert_eq!(routed.body, Some("    x = 1\n\ny = 2\n"));
        let routed = split_command("close 1");
        assert_eq!(
            (routed.name, routed.arguments, routed.body),
            ("close", "1", None)
        );
    }

    #[test]
    fn duplicate_and_empty_names_are_refused() {
        let dup = CommandHelp::new(
            "x",
            vec![
                CommandSpec::new("a", "", ""),
                CommandSpec::new("a <n>", "", ""),
            ],
        );
        assert_eq!(
            dup.unwrap_err(),
            HelpError::DuplicateName { name: "a".into() }
        );
        let empty = CommandHelp::new("x", vec![CommandSpec::new("  ", "", "")]);
        assert_eq!(empty.unwrap_err(), HelpError::EmptySignature { index: 0 });
    }
}
