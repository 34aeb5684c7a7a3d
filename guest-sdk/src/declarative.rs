//! The declarative style: a static
//! table of commands, each a signature, its help and a handler method.
//! Every [`Declarative`] type is a [`Plugin`]: routing by first word,
//! `describe`, `handle` and `screen` are implemented here.

use crate::plugin::{
    CommandSpec, Description, Plugin, Request, Response, Result, Screen, ScreenChanges,
};

/// An environment made of commands.
///
/// The host renders the commands' progressive help under
/// [`state`](Declarative::state) and only passes on commands whose first
/// word is one of them.
pub trait Declarative: Sized + 'static {
    /// One line: what this environment is for (shown by `envhost check`,
    /// and as the state until [`state`](Declarative::state) says more).
    const SUMMARY: &'static str;

    /// The commands, in the order their help is shown.
    const COMMANDS: &'static [Command<Self>];

    /// When [`state`](Declarative::state) can change (see
    /// [`Plugin::screen_changes`]): `WhenCalled` when it shows only what
    /// the commands change, so the host stops asking for it after commands
    /// to other environments. The default is `AnyTime`.
    const SCREEN_CHANGES: ScreenChanges = ScreenChanges::AnyTime;

    /// The environment's current state, shown above the commands' help
    /// (its state display).
    fn state(&self) -> String {
        Self::SUMMARY.to_owned()
    }

    /// The most lines of [`state`](Declarative::state) the host shows.
    fn max_lines(&self) -> u32 {
        Screen::DEFAULT_MAX_LINES
    }

    /// Called once when the host stops.
    fn on_shutdown(&mut self) {}

    /// What the environment asks the operator for (see
    /// [`Plugin::requests`]).
    fn requests(&self) -> Vec<Request> {
        Vec::new()
    }

    /// The environment's state as bytes, kept by the host across traps and
    /// restarts (see [`Plugin::snapshot`]). The default keeps none.
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Puts back a [`snapshot`](Declarative::snapshot) (see
    /// [`Plugin::restore`]). The default accepts only an empty one.
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        crate::plugin::restore_no_state(snapshot)
    }
}

/// A command handler: a method taking the parsed command.
pub type Handler<S> = fn(&mut S, &Call) -> Result<String>;

/// One command of a [`Declarative`] environment. Built in a `const`:
///
/// ```ignore
/// Command::new("stop", Self::stop)
///     .description("Stop the timer and record elapsed time.")
///     .example("stop")
/// ```
pub struct Command<S> {
    signature: &'static str,
    description: &'static str,
    summary: Option<&'static str>,
    example: &'static str,
    simple: bool,
    handler: Handler<S>,
}

impl<S> Command<S> {
    /// `signature` is how to call it (`view <file> [label]`); its first word
    /// is the command's name.
    pub const fn new(signature: &'static str, handler: Handler<S>) -> Self {
        Command {
            signature,
            description: "",
            summary: None,
            example: "",
            simple: false,
            handler,
        }
    }

    /// What it does, shown in LONG help; may span several lines.
    pub const fn description(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    /// The one-line form for SHORT help (default: the description's first
    /// line).
    pub const fn summary(mut self, summary: &'static str) -> Self {
        self.summary = Some(summary);
        self
    }

    /// A raw command as the agent would type it; the host adds the fence.
    pub const fn example(mut self, example: &'static str) -> Self {
        self.example = example;
        self
    }

    /// Always show SHORT help (for self-explanatory commands).
    pub const fn simple(mut self) -> Self {
        self.simple = true;
        self
    }

    /// The first word of the signature.
    pub fn name(&self) -> &'static str {
        self.signature.split_whitespace().next().unwrap_or("")
    }

    fn spec(&self) -> CommandSpec {
        CommandSpec {
            signature: self.signature.to_owned(),
            description: self.description.to_owned(),
            summary: self.summary.map(str::to_owned),
            example: self.example.to_owned(),
            simple: self.simple,
        }
    }
}

/// A command as the handler receives it: `edit src/a.py 3-4` followed by
/// content lines gives `name = "edit"`, `args = "src/a.py 3-4"` and the
/// content lines in `body`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    /// The first word.
    pub name: &'a str,
    /// The rest of the first line, trimmed.
    pub args: &'a str,
    /// The lines after the first, verbatim (None for a one-line command).
    pub body: Option<&'a str>,
    /// The whole command text.
    pub text: &'a str,
}

impl<'a> Call<'a> {
    /// Splits a command's text by the rule the host routes by
    /// (`wit/command-split-cases.json`): leading whitespace, blank lines
    /// included, is skipped; the name is the first line up to its first
    /// whitespace character; the arguments are the rest of that line without
    /// leading or trailing whitespace; the body is everything after the
    /// first `\n`, verbatim (`None` without one). Whitespace is Unicode's
    /// White_Space ([`char::is_whitespace`]).
    pub fn parse(text: &'a str) -> Call<'a> {
        let rest = text.trim_start();
        let (first_line, body) = match rest.split_once('\n') {
            Some((first_line, body)) => (first_line, Some(body)),
            None => (rest, None),
        };
        let (name, args) = first_line
            .split_once(char::is_whitespace)
            .unwrap_or((first_line, ""));
        Call {
            name,
            args: args.trim(),
            body,
            text,
        }
    }

    /// The arguments split on whitespace.
    pub fn words(&self) -> impl Iterator<Item = &'a str> {
        self.args.split_whitespace()
    }

    /// The `index`-th argument word, if there is one.
    pub fn arg(&self, index: usize) -> Option<&'a str> {
        self.words().nth(index)
    }
}

impl<T: Declarative> Plugin for T {
    fn describe(&self) -> Description {
        Description {
            summary: T::SUMMARY.to_owned(),
            commands: T::COMMANDS.iter().map(Command::spec).collect(),
        }
    }

    fn handle(&mut self, command: &str) -> Response {
        let call = Call::parse(command);
        let Some(found) = T::COMMANDS.iter().find(|c| c.name() == call.name) else {
            // The host answers unknown words before calling the plugin; this
            // is for a host that does not.
            let names: Vec<&str> = T::COMMANDS.iter().map(Command::name).collect();
            return Response::fail(format!(
                "Unknown command: {}\nAvailable: {}",
                call.name,
                names.join(", ")
            ));
        };
        match (found.handler)(self, &call) {
            Ok(output) => Response::ok(output),
            Err(err) => Response::fail(err.message()),
        }
    }

    fn screen(&mut self) -> Screen {
        Screen::new(self.state()).max_lines(self.max_lines())
    }

    fn screen_changes(&self) -> ScreenChanges {
        T::SCREEN_CHANGES
    }

    fn shutdown(&mut self) {
        self.on_shutdown();
    }

    fn requests(&self) -> Vec<Request> {
        Declarative::requests(self)
    }

    fn snapshot(&self) -> Vec<u8> {
        Declarative::snapshot(self)
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        Declarative::restore(self, snapshot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fail;

    #[derive(Default)]
    struct Tally {
        total: i64,
        stopped: bool,
    }

    impl Declarative for Tally {
        const SUMMARY: &'static str = "Adds numbers";
        const COMMANDS: &'static [Command<Self>] = &[
            Command::new("add <n>", Self::add)
                .description("Add n to the total.\nNegative numbers subtract.")
                .example("add 3"),
            Command::new("clear", Self::clear)
                .description("Set the total to zero.")
                .simple(),
        ];

        fn state(&self) -> String {
            format!("Total: {}", self.total)
        }

        fn on_shutdown(&mut self) {
            self.stopped = true;
        }
    }

    impl Tally {
        fn add(&mut self, call: &Call) -> Result<String> {
            let Some(word) = call.arg(0) else {
                fail!("add needs a number, e.g. `add 3`");
            };
            self.total += word.parse::<i64>()?;
            Ok(format!("Total: {}", self.total))
        }

        fn clear(&mut self, _: &Call) -> Result<String> {
            self.total = 0;
            Ok("Cleared".into())
        }
    }

    #[test]
    fn commands_split_by_the_rule_every_implementation_shares() {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("../../wit/command-split-cases.json"))
                .expect("the cases are JSON");
        let cases = cases["cases"].as_array().expect("a list of cases");
        assert!(cases.len() > 20);
        for case in cases {
            let call = Call::parse(case["text"].as_str().expect("text"));
            assert_eq!(
                (call.name, call.args, call.body),
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
    fn describes_every_command_in_order() {
        let description = Tally::default().describe();
        assert_eq!(description.summary, "Adds numbers");
        let names: Vec<&str> = description
            .commands
            .iter()
            .map(|c| c.signature.as_str())
            .collect();
        assert_eq!(names, ["add <n>", "clear"]);
        assert!(description.commands[1].simple);
        assert_eq!(description.commands[0].example, "add 3");
    }

    #[test]
    fn routes_by_first_word_and_reports_handler_errors() {
        let mut tally = Tally::default();
        assert_eq!(tally.handle("add 4"), Response::ok("Total: 4"));
        assert_eq!(tally.handle("  add -1  "), Response::ok("Total: 3"));
        let bad = tally.handle("add four");
        assert!(!bad.success);
        assert_eq!(bad.output, "invalid digit found in string");
        let missing = tally.handle("add");
        assert_eq!(missing.output, "add needs a number, e.g. `add 3`");
        let unknown = tally.handle("multiply 2");
        assert_eq!(
            unknown.output,
            "Unknown command: multiply\nAvailable: add, clear"
        );
        assert_eq!(tally.screen().content, "Total: 3");
        tally.handle("clear");
        assert_eq!(tally.screen(), Screen::new("Total: 0"));
        Plugin::shutdown(&mut tally);
        assert!(tally.stopped);
    }

    #[test]
    fn call_splits_like_the_host() {
        let call = Call::parse("\nedit src/a.py 3-4\n    x = 1\n\ny\n");
        assert_eq!(call.name, "edit");
        assert_eq!(call.args, "src/a.py 3-4");
        assert_eq!(call.body, Some("    x = 1\n\ny\n"));
        assert_eq!(call.words().collect::<Vec<_>>(), ["src/a.py", "3-4"]);
        let bare = Call::parse("reset");
        assert_eq!((bare.name, bare.args, bare.body), ("reset", "", None));
    }
}
