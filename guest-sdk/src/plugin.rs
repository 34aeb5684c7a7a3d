//! The manual style: the [`Plugin`] trait and the values that cross the
//! host boundary, as plain Rust types (the generated bindings stay inside
//! the crate).

use std::fmt;

/// The default `restore` of a plugin that keeps no state: it accepts only
/// the default snapshot (no bytes).
pub(crate) fn restore_no_state(snapshot: &[u8]) -> Result<()> {
    if snapshot.is_empty() {
        Ok(())
    } else {
        Err(Error::new(
            "this plugin keeps no state, so it cannot restore a snapshot",
        ))
    }
}

/// An environment with full control: it handles any command text and
/// produces its own screen.
///
/// If [`describe`](Plugin::describe) lists commands, the host still routes
/// by first word (only those commands reach [`handle`](Plugin::handle)) and
/// renders their help under your screen content; if it lists none, the
/// section is yours alone.
pub trait Plugin: 'static {
    /// What the environment is, and its commands (if any). Called once per
    /// instance, before any other method.
    fn describe(&self) -> Description;

    /// Runs one command.
    fn handle(&mut self, command: &str) -> Response;

    /// The screen section, called after every command to any environment
    /// (only after your own calls when [`screen_changes`](Plugin::screen_changes)
    /// says [`ScreenChanges::WhenCalled`]): keep it cheap.
    fn screen(&mut self) -> Screen;

    /// When the screen section can change. The default, `AnyTime`, has the
    /// host ask for it after every command to any environment. Say
    /// `WhenCalled` when [`screen`](Plugin::screen) draws only from state
    /// your own methods change (no clock, no files, no program's
    /// progress): the host then asks only after calling you, and commands
    /// to other environments no longer wait for your screen. Must give the
    /// same answer every time.
    fn screen_changes(&self) -> ScreenChanges {
        ScreenChanges::AnyTime
    }

    /// Called once when the host stops.
    fn shutdown(&mut self) {}

    /// What the plugin asks the operator for: directories, variables,
    /// programs, memory. The host shows it next to what the operator
    /// granted (in `env/envhost.toml`); asking grants nothing by itself.
    fn requests(&self) -> Vec<Request> {
        Vec::new()
    }

    /// The plugin's state as bytes, in a format of your choosing (the host
    /// neither reads nor changes them), so that it survives a trap (a
    /// panic, a time or memory limit) and a host restart with `--resume`:
    /// the host calls this after every command that returned and gives the
    /// latest bytes to [`restore`](Plugin::restore) on the next fresh
    /// instance. Called after every command: keep it cheap, and small (the
    /// host keeps at most 16 MiB). The default keeps no state (no bytes).
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Puts back state from [`snapshot`](Plugin::snapshot)'s bytes, taken by
    /// an earlier instance (perhaps of an older build of this plugin), on a
    /// fresh instance before any command. An error leaves the instance
    /// fresh (empty state), and the host tells the agent your message. The
    /// default accepts only the default snapshot (no bytes).
    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        restore_no_state(snapshot)
    }
}

/// A power a plugin may ask the operator for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Power {
    /// Read a directory of the project (relative to it; `.` is all of it).
    /// The plugin sees it at `/` + the path (`data` is `/data`).
    ReadDirectory(String),
    /// Read and write a directory of the project.
    WriteDirectory(String),
    /// See one of the host's environment variables.
    Variable(String),
    /// Run a program interactively ([`crate::interactive`]).
    Program(String),
    /// Use up to this many bytes of memory.
    Memory(u64),
    /// Send HTTP requests to destinations matching a pattern, written as
    /// the operator grants it in `allowed-hosts`: a scheme, a host (`*.`
    /// in front allows its subdomains) and an optional port, e.g.
    /// `https://api.github.com`.
    Network(String),
}

/// A power and why the plugin wants it (shown to the operator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub power: Power,
    pub reason: String,
}

impl Request {
    pub fn new(power: Power, reason: impl Into<String>) -> Self {
        Request {
            power,
            reason: reason.into(),
        }
    }

    pub fn read_directory(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Request::new(Power::ReadDirectory(path.into()), reason)
    }

    pub fn write_directory(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Request::new(Power::WriteDirectory(path.into()), reason)
    }

    pub fn variable(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Request::new(Power::Variable(name.into()), reason)
    }

    pub fn program(program: impl Into<String>, reason: impl Into<String>) -> Self {
        Request::new(Power::Program(program.into()), reason)
    }

    pub fn memory(bytes: u64, reason: impl Into<String>) -> Self {
        Request::new(Power::Memory(bytes), reason)
    }

    pub fn network(pattern: impl Into<String>, reason: impl Into<String>) -> Self {
        Request::new(Power::Network(pattern.into()), reason)
    }
}

/// What a plugin is: one line, and the commands it understands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Description {
    /// One line: what this environment is for.
    pub summary: String,
    /// Empty for a plugin that owns its whole screen.
    pub commands: Vec<CommandSpec>,
}

impl Description {
    pub fn new(summary: impl Into<String>) -> Self {
        Description {
            summary: summary.into(),
            commands: Vec::new(),
        }
    }

    pub fn command(mut self, spec: CommandSpec) -> Self {
        self.commands.push(spec);
        self
    }
}

/// One command, for the host's progressive help (long until first used).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CommandSpec {
    /// `view <file> /<start>/ /<end>/ [label]`: the first word is the name.
    pub signature: String,
    /// Shown in LONG help; may span several lines.
    pub description: String,
    /// Shown in SHORT help; defaults to the description's first line.
    pub summary: Option<String>,
    /// A raw command; the host wraps it in a fence. May be empty.
    pub example: String,
    /// Simple commands always get SHORT help.
    pub simple: bool,
}

impl CommandSpec {
    pub fn new(signature: impl Into<String>, description: impl Into<String>) -> Self {
        CommandSpec {
            signature: signature.into(),
            description: description.into(),
            ..CommandSpec::default()
        }
    }

    pub fn example(mut self, example: impl Into<String>) -> Self {
        self.example = example.into();
        self
    }

    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    pub fn simple(mut self) -> Self {
        self.simple = true;
        self
    }
}

/// The result of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub output: String,
    pub success: bool,
}

impl Response {
    pub fn ok(output: impl Into<String>) -> Self {
        Response {
            output: output.into(),
            success: true,
        }
    }

    /// A failed command; say what went wrong and how to recover.
    pub fn fail(output: impl Into<String>) -> Self {
        Response {
            output: output.into(),
            success: false,
        }
    }
}

/// When a plugin's screen section can change (see
/// [`Plugin::screen_changes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScreenChanges {
    /// At any time (it shows a clock, files, a program's progress): the
    /// host asks for it after every command to any environment.
    #[default]
    AnyTime,
    /// Only during the plugin's own calls: the host asks after those and
    /// shows the section it drew last otherwise.
    WhenCalled,
}

/// The plugin's screen section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub content: String,
    /// The host cuts `content` to this many lines.
    pub max_lines: u32,
}

impl Screen {
    /// The host's default of 50 lines.
    pub const DEFAULT_MAX_LINES: u32 = 50;

    pub fn new(content: impl Into<String>) -> Self {
        Screen {
            content: content.into(),
            max_lines: Self::DEFAULT_MAX_LINES,
        }
    }

    pub fn max_lines(mut self, max_lines: u32) -> Self {
        self.max_lines = max_lines;
        self
    }
}

/// A failed command's message. Anything that can be displayed converts
/// into it, so `?` works on parse errors, I/O errors and the like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    pub fn new(message: impl Into<String>) -> Self {
        Error(message.into())
    }

    pub fn message(&self) -> &str {
        &self.0
    }
}

// No `Display` for `Error` itself: that is what keeps this blanket
// conversion coherent (as with `anyhow::Error`).
impl<E: fmt::Display> From<E> for Error {
    fn from(err: E) -> Self {
        Error(err.to_string())
    }
}

/// What a command handler returns: the output, or why it failed.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Returns early from a command handler with an error message:
/// `fail!("no such item: {name}")`.
#[macro_export]
macro_rules! fail {
    ($($message:tt)+) => {
        return ::core::result::Result::Err($crate::Error::new(::std::format!($($message)+)))
    };
}
