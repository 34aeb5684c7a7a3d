//! Interactive programs: a program
//! the operator granted this plugin runs in a pseudo-terminal on the host,
//! and the plugin types lines into it and reads what it prints up to its
//! next prompt.
//!
//! Two levels:
//!
//! - [`Interactive`] + [`export_interactive!`](crate::export_interactive):
//!   a whole environment from a command, a prompt and a description. Each
//!   line the agent sends is typed into the program and answered by what it
//!   prints before its prompt comes back; the screen says whether it runs.
//!
//!   ```
//!   #[derive(Default)]
//!   struct Gdb;
//!   impl envhost_sdk::Interactive for Gdb {
//!       const COMMAND: &'static str = "gdb -q -nx";
//!       const PROMPT: &'static str = r"\(gdb\) ";
//!       const DESCRIPTION: &'static str = "GDB debugger";
//!   }
//!   envhost_sdk::export_interactive!(Gdb);
//!   # fn main() {}
//!   ```
//!
//! - [`Program`]: start a program yourself and [`run`](Program::run) lines
//!   in it, for a plugin with its own commands.
//!
//! The host enforces the rest: only granted programs start (`programs` in
//! the plugin's entry of `env/envhost.toml`), a wait never outlasts the
//! agent's command (past it the host interrupts the program with Ctrl-C,
//! then SIGTERM, then SIGKILL, and the reply says so), and the program ends
//! when its [`Program`] is dropped or the plugin is restarted.

use std::marker::PhantomData;

use crate::bindings::envhost::environment::interactive as wit;
use crate::plugin::{Description, Error, Plugin, Request, Response, Result, Screen};

/// How a wait for the prompt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The prompt came back (the text it matched).
    Prompt(String),
    /// Time ran out first; the host interrupted the program. The text says
    /// how that went (e.g. "interrupted with SIGINT; gdb is back at its
    /// prompt").
    TimedOut(String),
    /// The agent interrupted the command (an `interrupt` message, Ctrl-C in
    /// the REPL) while the plugin waited; the host interrupted the program
    /// as for a spent time limit. The text says how that went.
    Interrupted(String),
    /// The program ended with this exit status.
    Exited(i32),
}

/// What the program printed before its prompt (ANSI escapes removed, the
/// echo of the typed line left out), and how the wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub output: String,
    pub ending: Ending,
}

fn error(err: wit::Error) -> Error {
    match err {
        wit::Error::NotGranted(m)
        | wit::Error::CannotStart(m)
        | wit::Error::Ended(m)
        | wit::Error::BadPattern(m)
        | wit::Error::OutOfTime(m)
        | wit::Error::Failed(m) => Error::new(m),
    }
}

/// A running program (host import). Dropping it ends the program.
pub struct Program {
    session: wit::Session,
    prompt: String,
}

impl Program {
    /// Starts `program` with `args`. `program` must be granted to this
    /// plugin, as written in the grant (`gdb`) or as its full path.
    pub fn start(program: &str, args: &[&str], prompt: &str) -> Result<Program> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let session = wit::start(program, &args).map_err(error)?;
        Ok(Program {
            session,
            prompt: prompt.to_owned(),
        })
    }

    /// Waits for the prompt (after starting: the banner before it).
    pub fn expect(&mut self, timeout_ms: Option<u32>) -> Result<Reply> {
        let prompt = self.prompt.clone();
        self.expect_pattern(&prompt, timeout_ms)
    }

    /// Waits for another prompt than the usual one.
    pub fn expect_pattern(&mut self, prompt: &str, timeout_ms: Option<u32>) -> Result<Reply> {
        let reply = self.session.expect(prompt, timeout_ms).map_err(error)?;
        Ok(Reply {
            output: reply.output,
            ending: match reply.ending {
                wit::Ending::Prompt(text) => Ending::Prompt(text),
                wit::Ending::TimedOut(how) => Ending::TimedOut(how),
                wit::Ending::Interrupted(how) => Ending::Interrupted(how),
                wit::Ending::Exited(status) => Ending::Exited(status),
            },
        })
    }

    /// Types a line (and Enter), then waits for the prompt, within the
    /// agent's command time.
    pub fn run(&mut self, line: &str) -> Result<Reply> {
        self.send_line(line)?;
        self.expect(None)
    }

    pub fn send_line(&mut self, line: &str) -> Result<()> {
        self.session.send_line(line).map_err(error)
    }

    /// Types text as it is (`"\u{4}"` is Ctrl-D).
    pub fn send(&mut self, text: &str) -> Result<()> {
        self.session.send(text).map_err(error)
    }

    /// Ctrl-C: SIGINT to the program's foreground job.
    pub fn interrupt(&mut self) -> Result<()> {
        self.session.interrupt().map_err(error)
    }

    /// The exit status once the program has ended.
    pub fn exit_status(&self) -> Option<i32> {
        self.session.exit_status()
    }
}

/// A whole environment around one interactive program. Implement the three constants and export it
/// with [`export_interactive!`](crate::export_interactive).
pub trait Interactive: Default + 'static {
    /// The program and its arguments, split on whitespace
    /// (`"gdb -q -nx"`). The program must be granted to the plugin.
    const COMMAND: &'static str;
    /// A regular expression matching the program's prompt, as it looks on
    /// a terminal without colours (`r"\(gdb\) "`). If the program has a
    /// continuation prompt (`   ...> ` in sqlite3), match it too: every
    /// line sent waits for one of them.
    const PROMPT: &'static str;
    /// One line: what the environment is.
    const DESCRIPTION: &'static str;
    /// Lines typed once after the program starts, their output dropped
    /// (e.g. `set pagination off`).
    const SETUP: &'static [&'static str] = &[];

    /// Whether an answer means the command failed (default: never; a
    /// program's errors are in its output).
    fn failed(&self, _output: &str) -> bool {
        false
    }

    /// How to use it, shown on the screen under the status line.
    fn usage(&self) -> String {
        format!(
            "Each line you send is typed into {}; the answer is what it prints before its next prompt. Its state persists across commands.",
            program_name(Self::COMMAND)
        )
    }

    /// What the plugin asks the operator for: by default, the program.
    fn requests(&self) -> Vec<Request> {
        vec![Request::program(
            program_name(Self::COMMAND),
            format!("to run `{}` ({})", Self::COMMAND, Self::DESCRIPTION),
        )]
    }
}

fn program_name(command: &str) -> &str {
    command.split_whitespace().next().unwrap_or(command)
}

/// What the environment drives: the host's terminal, or a test double.
pub trait Terminal: Sized {
    fn start(program: &str, args: &[&str], prompt: &str) -> Result<Self>;
    fn expect(&mut self) -> Result<Reply>;
    fn run(&mut self, line: &str) -> Result<Reply>;
    fn exit_status(&self) -> Option<i32>;
}

impl Terminal for Program {
    fn start(program: &str, args: &[&str], prompt: &str) -> Result<Self> {
        Program::start(program, args, prompt)
    }

    fn expect(&mut self) -> Result<Reply> {
        Program::expect(self, None)
    }

    fn run(&mut self, line: &str) -> Result<Reply> {
        Program::run(self, line)
    }

    fn exit_status(&self) -> Option<i32> {
        Program::exit_status(self)
    }
}

/// The [`Plugin`] made from an [`Interactive`] description. The manual
/// style: any text is for the program, and the section is the plugin's.
pub struct InteractiveEnvironment<T: Interactive, D: Terminal = Program> {
    spec: T,
    program: Option<D>,
    /// How the last program ended, for the screen.
    ended: Option<i32>,
    _terminal: PhantomData<D>,
}

impl<T: Interactive, D: Terminal> Default for InteractiveEnvironment<T, D> {
    fn default() -> Self {
        InteractiveEnvironment {
            spec: T::default(),
            program: None,
            ended: None,
            _terminal: PhantomData,
        }
    }
}

impl<T: Interactive, D: Terminal> InteractiveEnvironment<T, D> {
    fn program_name() -> &'static str {
        program_name(T::COMMAND)
    }

    /// The running program, starting it (and its set-up) first if needed.
    fn running(&mut self) -> Result<&mut D> {
        if self
            .program
            .as_ref()
            .is_some_and(|p| p.exit_status().is_some())
        {
            self.program = None;
        }
        if self.program.is_none() {
            let mut words = T::COMMAND.split_whitespace();
            let program = words.next().unwrap_or_default();
            let args: Vec<&str> = words.collect();
            let mut started = D::start(program, &args, T::PROMPT)?;
            let first = started.expect()?;
            if let Some(problem) = not_at_prompt(&first, program) {
                return Err(Error::new(format!(
                    "{program} did not reach its prompt after starting: {problem}{}",
                    shown_output(&first.output)
                )));
            }
            for line in T::SETUP {
                let reply = started.run(line)?;
                if let Some(problem) = not_at_prompt(&reply, program) {
                    return Err(Error::new(format!(
                        "setting up {program} (`{line}`) failed: {problem}{}",
                        shown_output(&reply.output)
                    )));
                }
            }
            self.ended = None;
            self.program = Some(started);
        }
        self.program
            .as_mut()
            .ok_or_else(|| Error::new("the program is not running"))
    }
}

fn not_at_prompt(reply: &Reply, program: &str) -> Option<String> {
    match &reply.ending {
        Ending::Prompt(_) => None,
        Ending::TimedOut(how) => Some(format!("no prompt in time ({how})")),
        Ending::Interrupted(how) => Some(format!("interrupted ({how})")),
        Ending::Exited(status) => Some(format!("{program} exited with status {status}")),
    }
}

/// Adds a bracketed note on a line of its own.
fn append_note(output: &mut String, note: &str) {
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(&format!("[{note}]"));
}

fn shown_output(output: &str) -> String {
    let output = output.trim_end();
    if output.is_empty() {
        String::new()
    } else {
        format!("\nIt printed:\n{output}")
    }
}

impl<T: Interactive, D: Terminal + 'static> Plugin for InteractiveEnvironment<T, D> {
    fn describe(&self) -> Description {
        Description::new(T::DESCRIPTION)
    }

    fn handle(&mut self, command: &str) -> Response {
        let program = Self::program_name();
        let text = command.strip_suffix('\n').unwrap_or(command);
        let mut output = String::new();
        let lines: Vec<&str> = text.split('\n').collect();
        for line in lines {
            let reply = match self
                .running()
                .and_then(|p| p.run(line.trim_end_matches('\r')))
            {
                Ok(reply) => reply,
                Err(err) => {
                    output.push_str(err.message());
                    return Response::fail(output);
                }
            };
            output.push_str(&reply.output);
            match reply.ending {
                Ending::Prompt(_) => {}
                Ending::TimedOut(how) => {
                    append_note(&mut output, &format!("timed out: {how}"));
                    return Response::fail(output);
                }
                Ending::Interrupted(how) => {
                    append_note(&mut output, &format!("interrupted: {how}"));
                    return Response::fail(output);
                }
                Ending::Exited(status) => {
                    self.program = None;
                    self.ended = Some(status);
                    append_note(
                        &mut output,
                        &format!(
                            "{program} exited with status {status}; the next command starts it again"
                        ),
                    );
                    return if status == 0 {
                        Response::ok(output)
                    } else {
                        Response::fail(output)
                    };
                }
            }
        }
        if self.spec.failed(&output) {
            Response::fail(output)
        } else {
            Response::ok(output)
        }
    }

    fn screen(&mut self) -> Screen {
        let program = Self::program_name();
        let running = self.program.as_ref().map(|p| p.exit_status());
        let status = match (running, self.ended) {
            (Some(None), _) => format!("{program} is running"),
            (Some(Some(status)), _) | (None, Some(status)) => {
                format!("{program} exited with status {status}; the next command starts it again")
            }
            (None, None) => format!("not started; the first command starts `{}`", T::COMMAND),
        };
        Screen::new(format!(
            "{} ({status})\n\n{}",
            T::DESCRIPTION,
            self.spec.usage()
        ))
        .max_lines(10)
    }

    fn shutdown(&mut self) {
        self.program = None;
    }

    fn requests(&self) -> Vec<Request> {
        self.spec.requests()
    }
}

/// Exports an [`Interactive`] environment as the plugin
/// (`export!(InteractiveEnvironment<T>)`).
#[macro_export]
macro_rules! export_interactive {
    ($spec:ty) => {
        $crate::export!($crate::interactive::InteractiveEnvironment<$spec>);
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        static SCRIPT: RefCell<Vec<(String, Reply)>> = const { RefCell::new(Vec::new()) };
        static TYPED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    fn prompt(output: &str) -> Reply {
        Reply {
            output: output.to_owned(),
            ending: Ending::Prompt("db> ".into()),
        }
    }

    /// Answers each typed line from a script.
    struct Fake {
        exited: Option<i32>,
    }

    impl Terminal for Fake {
        fn start(program: &str, args: &[&str], _: &str) -> Result<Self> {
            TYPED.with(|t| {
                t.borrow_mut()
                    .push(format!("start {program} {}", args.join(" ")))
            });
            Ok(Fake { exited: None })
        }
        fn expect(&mut self) -> Result<Reply> {
            Ok(prompt("banner\n"))
        }
        fn run(&mut self, line: &str) -> Result<Reply> {
            TYPED.with(|t| t.borrow_mut().push(line.to_owned()));
            let reply = SCRIPT.with(|s| {
                let mut s = s.borrow_mut();
                if s.is_empty() {
                    prompt("")
                } else {
                    s.remove(0).1
                }
            });
            if let Ending::Exited(status) = reply.ending {
                self.exited = Some(status);
            }
            Ok(reply)
        }
        fn exit_status(&self) -> Option<i32> {
            self.exited
        }
    }

    #[derive(Default)]
    struct Db;
    impl Interactive for Db {
        const COMMAND: &'static str = "db --quiet";
        const PROMPT: &'static str = "db> ";
        const DESCRIPTION: &'static str = "A database shell";
        const SETUP: &'static [&'static str] = &["mode plain"];
        fn failed(&self, output: &str) -> bool {
            output.starts_with("Error")
        }
    }

    fn script(replies: &[(&str, Reply)]) {
        SCRIPT.with(|s| {
            *s.borrow_mut() = replies
                .iter()
                .map(|(l, r)| (l.to_string(), r.clone()))
                .collect()
        });
        TYPED.with(|t| t.borrow_mut().clear());
    }

    #[test]
    fn starts_on_first_use_runs_each_line_and_shows_its_state() {
        let mut env: InteractiveEnvironment<Db, Fake> = InteractiveEnvironment::default();
        assert_eq!(
            env.screen().content,
            "A database shell (not started; the first command starts `db --quiet`)\n\nEach line you send is typed into db; the answer is what it prints before its next prompt. Its state persists across commands."
        );
        script(&[
            ("mode plain", prompt("")),
            ("select 1;", prompt("1\n")),
            ("select 2;", prompt("2\n")),
        ]);
        let response = env.handle("select 1;\nselect 2;\n");
        assert_eq!(response, Response::ok("1\n2\n"));
        TYPED.with(|t| {
            assert_eq!(
                *t.borrow(),
                ["start db --quiet", "mode plain", "select 1;", "select 2;"]
            )
        });
        assert!(
            env.screen()
                .content
                .starts_with("A database shell (db is running)")
        );
        script(&[("bad", prompt("Error: no\n"))]);
        assert!(!env.handle("bad").success, "the spec's failed() decides");
        assert_eq!(
            env.requests(),
            vec![Request::program(
                "db",
                "to run `db --quiet` (A database shell)"
            )]
        );
    }

    #[test]
    fn timeouts_fail_and_exits_restart_next_time() {
        let mut env: InteractiveEnvironment<Db, Fake> = InteractiveEnvironment::default();
        script(&[
            ("mode plain", prompt("")),
            (
                "slow",
                Reply {
                    output: "partial\n".into(),
                    ending: Ending::TimedOut("interrupted with SIGINT".into()),
                },
            ),
        ]);
        let response = env.handle("slow\nnever sent");
        assert_eq!(
            response,
            Response::fail("partial\n[timed out: interrupted with SIGINT]")
        );
        TYPED.with(|t| assert!(!t.borrow().contains(&"never sent".to_owned())));
        script(&[(
            ".quit",
            Reply {
                output: String::new(),
                ending: Ending::Exited(0),
            },
        )]);
        let quit = env.handle(".quit");
        assert!(quit.success);
        assert!(
            quit.output
                .contains("db exited with status 0; the next command starts it again")
        );
        assert!(env.screen().content.contains("(db exited with status 0;"));
        script(&[("mode plain", prompt("")), ("again", prompt("ok\n"))]);
        assert_eq!(env.handle("again"), Response::ok("ok\n"));
        TYPED.with(|t| assert_eq!(t.borrow()[0], "start db --quiet"));
    }
}
