//! `envhost repl`: the same host for a person at a terminal, a peer of
//! the NDJSON front end (`envhost-ndjson`) and MCP (`envhost-mcp`).
//!
//! Input is `ENV: command`. After each command the output and the screen
//! are printed with a header per section: what an agent would see, except
//! that sections unchanged since they were last printed are only named.
//!
//! A person at a terminal types into a line editor ([`line_editor`]): line
//! editing, history kept across sessions ([`history`]), Tab completion
//! ([`completion`]), blocks that run when complete ([`blocks`]) and colour
//! ([`colour`]). The REPL follows each command in the foreground: output
//! appears as it comes, Ctrl-C interrupts the command, and a command that
//! waits for input (or runs past `--yield-after`) is left running, to go on
//! with `:wait`, `:input TEXT` and `:interrupt`.
//!
//! A script (input that is not a terminal) gets what it always got, byte
//! for byte: lines are read as they are, a line with only `ENV:` starts a
//! block that ends at a line holding a single `.`, each command is echoed
//! before its output, and each command runs to its end (unless
//! `--yield-after` says otherwise), without colour.
//!
//! This crate owns the conversation with the person; it must not know how
//! any environment runs a command.

mod blocks;
mod colour;
mod completion;
mod entry;
mod history;
mod input;
mod interrupts;
mod line_editor;
mod viewer;

pub use viewer::Viewer;

use std::collections::VecDeque;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use envhost_core::ProducedFile;
use envhost_core::{
    CancelFlag, CommandRequest, Control, ControlRequest, Orchestrator, Outcome, Screen, running,
    text,
};
use envhost_protocol::{LineReader, RawLine};
use envhost_runtime::signals::{self, HostSignal};
use envhost_runtime::{Host, Stopped};

use self::blocks::{Blocks, entry_of_block};
use self::colour::{Colours, Status};
use self::completion::{Completions, LiveInstances};
use self::entry::{Entry, Meta, parse_entry};
use self::input::Input;
use self::interrupts::Interrupts;
use self::line_editor::{LineEditor, Setup};

const HELP: &str = "\
Type ENV: COMMAND, e.g.
  bash: ls -la
  python: 6 * 7
A line with only ENV: starts a block; a line with a single . ends it (blank
lines inside are kept):
  python:
  def f(x):

      return x + 1
  .
At a terminal, Enter runs an entry once it is complete and otherwise adds a
line to it; Alt-Enter runs it as it stands:
  python: def f(x):          a compound statement ends at an empty line
  bash: cat <<EOF > notes    a here-document ends at its delimiter
  editor: create notes.txt   content ends at a line holding a single .
A command that waits for input, or runs past --yield-after, is left running
(the prompt names it); go on with:
  :wait [ENV] [SECONDS]   follow it again (for at most SECONDS)
  :input TEXT             type TEXT into it: \\n is Enter, \\x03 Ctrl-C,
                          \\x04 Ctrl-D, \\t, \\e, \\\\, \\u{HHHH}
  :interrupt [ENV]        stop it
  :restart ENV            end ENV and start it afresh (its state is lost)
Another shell: bash:NAME: COMMAND (or python:NAME:) opens the instance NAME
with its own state and screen section; :close bash:NAME ends it and all it runs.
:screen shows the whole screen, :help this text, :quit (or Ctrl-D) leaves.
Keys: Tab completes environments, commands and project files; Up and Down
recall the entries that start as typed (after ENV:, that environment's
only); Ctrl-R searches the history; Ctrl-C stops the command that runs, or
clears the line.";

/// How long a command runs before the REPL, following it for a person,
/// shows its first output.
const FIRST_LOOK: Duration = Duration::from_millis(250);

/// How much longer than its first look a command may take to answer
/// before a Ctrl-C cancels it (it cannot be followed: see `interrupts`).
const CTRL_C_MARGIN: Duration = Duration::from_millis(150);

/// How often the REPL shows the new output of a command it follows.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// Serves the REPL on stdin and stdout for `host` until `:quit`, end of
/// input, SIGTERM or SIGHUP; with `open_figures`, images a command
/// produced open in the desktop's viewer.
pub fn serve(host: &Host, open_figures: bool) -> Stopped {
    let input = Box::new(std::io::BufReader::with_capacity(
        64 * 1024,
        std::io::stdin(),
    ));
    let mut stdout = std::io::stdout().lock();
    let viewer = open_figures.then(Viewer::find);
    run(
        host.orchestrator(),
        host.project(),
        input,
        &mut stdout,
        host.cancel(),
        viewer,
    )
}

/// Runs the REPL in `project` until `:quit`, end of input, SIGTERM or
/// SIGHUP. Returns the reason it stopped.
pub fn run(
    orchestrator: &Orchestrator,
    project: &Path,
    input: Box<dyn BufRead + Send>,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    viewer: Option<Viewer>,
) -> Stopped {
    let interactive = std::io::stdin().is_terminal();
    let (sender, receiver) = mpsc::sync_channel::<Input>(1);
    let signal_sender = sender.clone();
    let interrupts = Interrupts::new(cancel.clone(), interactive, FIRST_LOOK + CTRL_C_MARGIN);
    let arbiter = interrupts.clone();
    let deliver = move |signal| {
        arbiter.arrived(signal);
        signal_sender.send(Input::Signal(signal)).is_ok()
    };
    // Not the host's cancel flag: `interrupts` decides what a signal stops
    // (a Ctrl-C stops the command in the foreground, not the others).
    if let Err(err) = signals::watch(CancelFlag::new(), deliver) {
        eprintln!("envhost: cannot watch for signals ({err})");
    }
    let colours = if interactive {
        Colours::detect()
    } else {
        Colours::off()
    };
    let live = LiveInstances::default();
    let editor = if interactive {
        let usages: Vec<_> = orchestrator
            .environment_names()
            .into_iter()
            .map(|name| {
                let usage = orchestrator.usage(&name);
                (name, usage)
            })
            .collect();
        let usages = || {
            usages
                .iter()
                .map(|(name, usage)| (name.as_str(), usage.as_ref()))
        };
        let history = history::file();
        if history.is_none() {
            eprintln!(
                "envhost: neither XDG_STATE_HOME nor HOME is set, so this session's history is not kept"
            );
        }
        let setup = Setup {
            completions: Completions::new(usages(), project)
                .with_instances(&orchestrator.instance_kinds(), Arc::clone(&live)),
            blocks: Blocks::new(usages()),
            colours,
            history,
        };
        match LineEditor::start(setup, sender.clone()) {
            Ok(editor) => Some(editor),
            Err(err) => {
                eprintln!("envhost: the line editor cannot start ({err}); reading plain lines");
                None
            }
        }
    } else {
        None
    };
    if editor.is_none() {
        spawn_reader(input, sender);
    }
    let mut repl = Repl {
        orchestrator,
        output,
        cancel,
        interrupts,
        receiver,
        pending: VecDeque::new(),
        colours,
        shown: Screen::new(),
        target: None,
        interactive,
        viewer,
        live,
    };
    let reason = repl.converse(editor.as_ref());
    drop(editor);
    reason
}

struct Repl<'a> {
    orchestrator: &'a Orchestrator,
    output: &'a mut dyn Write,
    cancel: &'a CancelFlag,
    interrupts: Interrupts,
    receiver: Receiver<Input>,
    /// Inputs that arrived while a command was followed.
    pending: VecDeque<Input>,
    colours: Colours,
    /// What was last shown, so that after a command only changes are
    /// printed.
    shown: Screen,
    /// The named instances open, for completion.
    live: LiveInstances,
    /// The environment whose running command `:wait` and `:input` go on
    /// with when they name none.
    target: Option<String>,
    /// A person at a terminal: commands are followed, not echoed.
    interactive: bool,
    /// `--open-figures`: the viewer images are opened with.
    viewer: Option<Viewer>,
}

/// Whether the REPL goes on.
type Flow = Result<(), Stopped>;

impl Repl<'_> {
    fn converse(&mut self, editor: Option<&LineEditor>) -> Stopped {
        let names = self.orchestrator.environment_names().join(", ");
        let _ = writeln!(
            self.output,
            "envhost repl: environments {names}. Type :help for the syntax.\n"
        );
        let screen = self.orchestrator.screen();
        let _ = write!(self.output, "{}", screen.render_marked(None, &self.colours));
        let _ = self.output.flush();
        self.shown = screen;

        // A script's `ENV:` block being read: its environment and lines.
        let mut block: Option<(String, Vec<String>)> = None;
        let mut reading = false;
        loop {
            if let Some(editor) = editor {
                if let Err(reason) = self.forget_old_interrupts() {
                    return reason;
                }
                if !reading {
                    if !editor.read(self.prompt()) {
                        return Stopped::EndOfInput;
                    }
                    reading = true;
                }
            } else if self.interactive {
                eprint!("{}", if block.is_some() { "... " } else { "envhost> " });
            }
            let line = match self.next_input() {
                Input::Line(line) => line,
                Input::Cleared => {
                    reading = false;
                    continue;
                }
                Input::Signal(HostSignal::Interrupt) => {
                    self.cancel.reset();
                    if editor.is_none() {
                        block = None;
                        eprintln!("\n(interrupted; :quit or Ctrl-D leaves)");
                    }
                    continue;
                }
                Input::Signal(signal) => return Stopped::Signal(signal),
                Input::End => {
                    if editor.is_some() {
                        eprintln!();
                    }
                    return Stopped::EndOfInput;
                }
            };
            reading = false;
            let entry = if editor.is_some() {
                entry_of_block(&line)
            } else {
                if let Some((environment, lines)) = &mut block {
                    if line.trim_end() == "." {
                        let command = lines.join("\n");
                        let environment = std::mem::take(environment);
                        block = None;
                        if let Err(reason) = self.run_command(environment, command) {
                            return reason;
                        }
                    } else {
                        lines.push(line);
                    }
                    continue;
                }
                parse_entry(&line)
            };
            let flow = match entry {
                Entry::Blank => Ok(()),
                Entry::StartBlock { environment } => {
                    block = Some((environment, Vec::new()));
                    Ok(())
                }
                Entry::Command {
                    environment,
                    command,
                } => self.run_command(environment, command),
                Entry::Meta(Meta::Quit) => return Stopped::Done(":quit".to_owned()),
                Entry::Meta(meta) => self.meta(meta),
                Entry::Unrecognised => {
                    self.say(&format!(
                        "Start the line with an environment name and a colon, e.g. `bash: ls`. \
                         Environments: {}. Type :help for more.",
                        self.orchestrator.environment_names().join(", ")
                    ));
                    Ok(())
                }
            };
            if let Err(reason) = flow {
                return reason;
            }
            let _ = self.output.flush();
        }
    }

    fn meta(&mut self, meta: Meta) -> Flow {
        match meta {
            Meta::Help => {
                let _ = writeln!(self.output, "{HELP}");
            }
            Meta::Screen => {
                self.shown = self.orchestrator.screen();
                let _ = write!(
                    self.output,
                    "{}",
                    self.shown.render_marked(None, &self.colours)
                );
            }
            Meta::Mistake(mistake) => self.say(&mistake),
            Meta::Wait { environment, limit } => {
                let Some(environment) = self.target(environment) else {
                    return Ok(());
                };
                if self.interactive {
                    let tick = limit.map_or(FOLLOW_EVERY, |limit| limit.min(FOLLOW_EVERY));
                    let outcome = self.control(
                        &environment,
                        Control::Wait {
                            timeout: Some(tick),
                        },
                    );
                    let deadline = limit.map(|limit| Instant::now() + limit);
                    return self.follow(&environment, outcome, deadline);
                }
                let outcome = self.control(&environment, Control::Wait { timeout: limit });
                self.show(&environment, outcome);
            }
            Meta::Input { text } => {
                let Some(environment) = self.target(None) else {
                    return Ok(());
                };
                if self.interactive {
                    let outcome = self.control(
                        &environment,
                        Control::Input {
                            text,
                            timeout: Some(FOLLOW_EVERY),
                        },
                    );
                    let deadline = self.yield_deadline(Instant::now());
                    return self.follow(&environment, outcome, deadline);
                }
                let outcome = self.control(
                    &environment,
                    Control::Input {
                        text,
                        timeout: None,
                    },
                );
                self.show(&environment, outcome);
            }
            Meta::Interrupt { environment } => {
                let Some(environment) = self.target(environment) else {
                    return Ok(());
                };
                let outcome = self.control(&environment, Control::Interrupt);
                self.show(&environment, outcome);
            }
            Meta::Restart { environment } => {
                let outcome = self.control(&environment, Control::Restart);
                self.show(&environment, outcome);
            }
            Meta::Close { environment } => {
                let outcome = self.control(&environment, Control::Close);
                self.show(&environment, outcome);
            }
            Meta::Quit => {}
        }
        Ok(())
    }

    fn run_command(&mut self, environment: String, command: String) -> Flow {
        if !self.interactive {
            // Input from a file or a pipe is not on the screen: show what runs.
            let _ = writeln!(self.output, ">>> {environment}:");
            for line in command.lines() {
                let _ = writeln!(self.output, ">>>   {line}");
            }
        }
        self.cancel.reset();
        let yield_after = self.orchestrator.settings().yield_after;
        let request = if self.interactive {
            // Followed: a first look soon, then a piece at a time. Its
            // limit stays what it would be unfollowed.
            CommandRequest {
                environment: environment.clone(),
                command,
                timeout: match yield_after {
                    Some(_) => None,
                    None => Some(self.orchestrator.default_timeout()),
                },
                yield_after: Some(yield_after.map_or(FIRST_LOOK, |y| y.min(FIRST_LOOK))),
                id: None,
            }
        } else {
            CommandRequest {
                environment: environment.clone(),
                command,
                timeout: None,
                yield_after: None,
                id: None,
            }
        };
        let started = Instant::now();
        let outcome = if self.interactive {
            self.interrupts
                .starting(|| self.orchestrator.execute(&request))
        } else {
            self.orchestrator.execute(&request)
        };
        if self.cancel.is_cancelled() {
            self.end_ctrl_c_line();
        }
        if outcome.running && self.interactive {
            let deadline = self.yield_deadline(started);
            return self.follow(&environment, outcome, deadline);
        }
        self.show(&environment, outcome);
        Ok(())
    }

    /// When a followed command is left running: after `--yield-after`.
    fn yield_deadline(&self, from: Instant) -> Option<Instant> {
        self.orchestrator
            .settings()
            .yield_after
            .map(|after| from + after)
    }

    /// Prints a whole answer: its status, its output, what to do while it
    /// runs, and what changed on the screen.
    fn show(&mut self, environment: &str, outcome: Outcome) {
        let status = match (outcome.running, outcome.success) {
            (true, _) => Status::Running,
            (false, true) => Status::Ok,
            (false, false) => Status::Failed,
        };
        let _ = writeln!(
            self.output,
            "{}",
            self.colours.status_line(environment, status)
        );
        let output = if outcome.running {
            running::without_note(&outcome.output)
        } else {
            &outcome.output
        };
        self.write_output(output);
        if outcome.running {
            self.target = Some(environment.to_owned());
            let note = self.running_note(environment);
            let _ = writeln!(self.output, "{}", self.colours.note(&note));
        }
        self.show_images(&outcome.files);
        let _ = writeln!(self.output);
        self.show_screen(outcome.screen);
    }

    /// The images among the files a command produced: their full paths,
    /// and with `--open-figures` each opened in the desktop's viewer.
    fn show_images(&mut self, files: &[ProducedFile]) {
        for file in files.iter().filter(|f| f.media_type.starts_with("image/")) {
            let line = format!("image: {}", file.absolute.display());
            let _ = writeln!(self.output, "{}", self.colours.note(&line));
            if let Some(problem) = self.viewer.as_mut().and_then(|v| v.open(&file.absolute)) {
                let _ = writeln!(self.output, "{}", self.colours.note(&problem));
            }
        }
    }

    /// Follows a running command, printing its output as it comes, until it
    /// ends, waits for input, passes `deadline`, or Ctrl-C stops it.
    fn follow(&mut self, environment: &str, first: Outcome, deadline: Option<Instant>) -> Flow {
        if !first.running {
            self.show(environment, first);
            return Ok(());
        }
        let _ = writeln!(
            self.output,
            "{}",
            self.colours.status_line(environment, Status::Running)
        );
        self.write_output(running::without_note(&first.output));
        let mut screen = first.screen;
        loop {
            match self.poll_signal() {
                Some(HostSignal::Interrupt) => {
                    self.end_ctrl_c_line();
                    self.cancel.reset();
                    let outcome = self.control(environment, Control::Interrupt);
                    return self.end_follow(environment, outcome);
                }
                Some(signal) => return Err(Stopped::Signal(signal)),
                None => {}
            }
            let waits_for_input = self
                .orchestrator
                .running(environment)
                .is_some_and(|running| running.waiting_for_input);
            let now = Instant::now();
            if waits_for_input || deadline.is_some_and(|deadline| now >= deadline) {
                self.target = Some(environment.to_owned());
                let note = self.running_note(environment);
                let _ = writeln!(self.output, "{}\n", self.colours.note(&note));
                self.show_screen(screen);
                return Ok(());
            }
            let tick = match deadline {
                Some(deadline) => FOLLOW_EVERY.min(deadline - now),
                None => FOLLOW_EVERY,
            };
            let outcome = self.control(
                environment,
                Control::Wait {
                    timeout: Some(tick),
                },
            );
            if !outcome.running {
                return self.end_follow(environment, outcome);
            }
            self.write_output(running::without_note(&outcome.output));
            screen = outcome.screen;
        }
    }

    /// The last piece of a followed command, its status and the screen.
    fn end_follow(&mut self, environment: &str, outcome: Outcome) -> Flow {
        self.write_output(&outcome.output);
        self.show_images(&outcome.files);
        let status = if outcome.success {
            Status::Ok
        } else {
            Status::Failed
        };
        let _ = writeln!(
            self.output,
            "{}\n",
            self.colours.status_line(environment, status)
        );
        self.show_screen(outcome.screen);
        Ok(())
    }

    /// After Ctrl-C at a terminal, which shows `^C`, the next line starts
    /// on a line of its own, as at a shell.
    fn end_ctrl_c_line(&self) {
        if self.interactive {
            eprintln!();
        }
    }

    fn write_output(&mut self, output: &str) {
        let _ = write!(self.output, "{output}");
        if !output.is_empty() && !output.ends_with('\n') {
            let _ = writeln!(self.output);
        }
        let _ = self.output.flush();
    }

    fn show_screen(&mut self, screen: Screen) {
        let _ = write!(
            self.output,
            "{}",
            screen.render_marked(Some(&self.shown), &self.colours)
        );
        self.shown = screen;
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) =
            self.orchestrator.instance_names();
        let _ = self.output.flush();
    }

    fn say(&mut self, text: &str) {
        let _ = writeln!(self.output, "{text}");
    }

    fn control(&self, environment: &str, control: Control) -> Outcome {
        self.orchestrator.control(&ControlRequest {
            environment: environment.to_owned(),
            control,
            id: None,
        })
    }

    /// The environment a `:wait`, `:input` or `:interrupt` goes on with:
    /// the one it names, else the one last left running, else any with a
    /// running command. `None` (and a word why) when nothing runs there.
    fn target(&mut self, named: Option<String>) -> Option<String> {
        let names = self.orchestrator.environment_names();
        let runs = |name: &str| self.orchestrator.running(name).is_some();
        let found = match named {
            // An unknown name: the orchestrator's answer lists the known.
            Some(name) if !names.contains(&name) || runs(&name) => Some(name),
            Some(name) => {
                self.say(&format!(
                    "Nothing is running in {name}: :wait, :input and :interrupt go on with a \
                     command that was left running. Run one with {name}: COMMAND."
                ));
                return None;
            }
            None => self
                .target
                .clone()
                .filter(|target| runs(target))
                .or_else(|| {
                    names
                        .iter()
                        .find(|name| runs(name))
                        .map(|n| (*n).to_owned())
                }),
        };
        if found.is_none() {
            self.say(
                "Nothing is running: :wait, :input and :interrupt go on with a command that was \
                 left running (one that waits for input, or runs past --yield-after). Run one \
                 with ENV: COMMAND.",
            );
        }
        found
    }

    /// The REPL's words for a command left running in `environment`.
    fn running_note(&self, environment: &str) -> String {
        let ways = ":wait follows it, :input TEXT types into it (:input yes\\n answers a prompt), \
                    :interrupt stops it; other environments take commands meanwhile";
        let Some(running) = self.orchestrator.running(environment) else {
            return format!("({environment} is still running. {ways}.)");
        };
        let elapsed = running.started.elapsed();
        let tenths = Duration::from_millis(elapsed.as_millis() as u64 / 100 * 100);
        let command = running.command.lines().next().unwrap_or("");
        let (command, cut) = text::head(command, 60);
        let ellipsis = if cut > 0 || running.command.contains('\n') {
            "…"
        } else {
            ""
        };
        let waits = if running.waiting_for_input {
            "; it seems to wait for input"
        } else {
            ""
        };
        format!(
            "({environment} is still running `{command}{ellipsis}`: {} so far, {} of output{waits}. \
             {ways}.)",
            text::duration(tenths),
            text::bytes(running.output_bytes)
        )
    }

    /// The prompt, naming the environments whose command is left running.
    fn prompt(&self) -> String {
        let running: Vec<String> = self
            .orchestrator
            .environment_names()
            .into_iter()
            .chain(self.orchestrator.instance_names())
            .filter(|name| self.orchestrator.running(name).is_some())
            .collect();
        if running.is_empty() {
            "envhost> ".to_owned()
        } else {
            format!("envhost ({} running)> ", running.join(", "))
        }
    }

    fn next_input(&mut self) -> Input {
        match self.pending.pop_front() {
            Some(input) => input,
            None => self.receiver.recv().unwrap_or(Input::End),
        }
    }

    /// A signal that arrived, without waiting; other inputs are kept for
    /// later.
    fn poll_signal(&mut self) -> Option<HostSignal> {
        loop {
            match self.receiver.try_recv() {
                Ok(Input::Signal(signal)) => return Some(signal),
                Ok(other) => self.pending.push_back(other),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return None,
            }
        }
    }

    /// Before a prompt: a Ctrl-C that came after its command ended is
    /// forgotten; a signal to stop is not.
    fn forget_old_interrupts(&mut self) -> Flow {
        while let Some(signal) = self.poll_signal() {
            match signal {
                HostSignal::Interrupt => self.cancel.reset(),
                other => return Err(Stopped::Signal(other)),
            }
        }
        Ok(())
    }
}

fn spawn_reader(input: Box<dyn BufRead + Send>, sender: mpsc::SyncSender<Input>) {
    let spawned = thread::Builder::new()
        .name("envhost-repl-input".into())
        .spawn(move || {
            let mut reader = LineReader::new(input, envhost_protocol::DEFAULT_MAX_LINE_BYTES);
            loop {
                let message = match reader.next_line() {
                    Ok(Some(RawLine::Complete(bytes))) => {
                        let text = String::from_utf8_lossy(&bytes);
                        Input::Line(text.strip_suffix('\r').unwrap_or(&text).to_owned())
                    }
                    Ok(Some(RawLine::TooLong { length })) => {
                        eprintln!("(a {length}-byte line was too long and was skipped)");
                        continue;
                    }
                    Ok(None) | Err(_) => Input::End,
                };
                let last = matches!(message, Input::End);
                if sender.send(message).is_err() || last {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("envhost: cannot start the input reader: {err}");
    }
}
