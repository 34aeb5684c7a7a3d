//! `envhost repl`: the same orchestrator for a person at a terminal.
//!
//! Input is `ENV: command`, one per line. A line with only `ENV:` starts a
//! multi-line command that ends at a line holding a single `.`, so Python
//! functions with blank lines inside, heredocs and editor edits can be typed
//! or pasted. `:screen` shows the screen, `:help` the syntax, `:quit` (or
//! end of input) leaves. Ctrl-C interrupts the running command and keeps the
//! session. After each command the output and the whole screen are printed
//! with a header per section: what an agent would see, except that
//! sections unchanged since they were last printed are only named. When
//! the input is not a terminal (a scripted session), each command is echoed
//! before its output.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::mpsc;
use std::thread;

use crate::signals::{self, HostSignal};
use envhost_core::CancelFlag;
use envhost_core::Screen;
use envhost_core::{CommandRequest, Orchestrator};
use envhost_protocol::{LineReader, RawLine};

const HELP: &str = "\
Type ENV: COMMAND, e.g.
  bash: ls -la
A line with only ENV: starts a multi-line command; a line with a single . ends it:
  python:
  def f(x):

      return x + 1
  .
:screen shows the screen, :help this text, :quit (or Ctrl-D) leaves.
Ctrl-C interrupts the running command.";

enum Input {
    Line(String),
    End,
    Signal(HostSignal),
}

/// A parsed line of REPL input.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Command {
        environment: String,
        command: String,
    },
    StartBlock {
        environment: String,
    },
    Screen,
    Help,
    Quit,
    Blank,
    Unrecognised,
}

fn parse_entry(line: &str) -> Entry {
    let trimmed = line.trim();
    match trimmed {
        "" => return Entry::Blank,
        ":quit" | ":q" | ":exit" => return Entry::Quit,
        ":screen" | ":s" => return Entry::Screen,
        ":help" | ":h" | "help" | "?" => return Entry::Help,
        _ => {}
    }
    let Some((environment, rest)) = line.split_once(':') else {
        return Entry::Unrecognised;
    };
    let environment = environment.trim();
    if environment.is_empty() || environment.contains(char::is_whitespace) {
        return Entry::Unrecognised;
    }
    let command = rest.strip_prefix(' ').unwrap_or(rest);
    if command.trim().is_empty() {
        Entry::StartBlock {
            environment: environment.to_owned(),
        }
    } else {
        Entry::Command {
            environment: environment.to_owned(),
            command: command.to_owned(),
        }
    }
}

/// Runs the REPL until `:quit`, end of input, SIGTERM or SIGHUP. Returns
/// the reason it stopped.
pub fn run(
    orchestrator: &Orchestrator,
    input: Box<dyn BufRead + Send>,
    output: &mut dyn Write,
    cancel: &CancelFlag,
) -> String {
    let interactive = std::io::stdin().is_terminal();
    let (sender, receiver) = mpsc::sync_channel::<Input>(1);
    let signal_sender = sender.clone();
    let deliver = move |signal| signal_sender.send(Input::Signal(signal)).is_ok();
    if let Err(err) = signals::watch(cancel.clone(), deliver) {
        eprintln!("envhost: cannot watch for signals ({err})");
    }
    spawn_reader(input, sender);

    let names = orchestrator.environment_names().join(", ");
    let _ = writeln!(
        output,
        "envhost repl: environments {names}. Type :help for the syntax.\n"
    );
    let screen = orchestrator.screen();
    let _ = write!(output, "{}", screen.render_for_humans());
    // What was last shown, so that after a command only changes are printed.
    let mut shown = screen;

    let mut block: Option<(String, Vec<String>)> = None;
    loop {
        if interactive {
            let prompt = if block.is_some() { "... " } else { "envhost> " };
            eprint!("{prompt}");
        }
        let line = match receiver.recv() {
            Ok(Input::Line(line)) => line,
            Ok(Input::Signal(HostSignal::Interrupt)) => {
                cancel.reset();
                block = None;
                eprintln!("\n(interrupted; :quit or Ctrl-D leaves)");
                continue;
            }
            Ok(Input::Signal(signal)) => return format!("received {}", signal.name()),
            Ok(Input::End) | Err(_) => return "end of input".to_owned(),
        };
        if let Some((environment, lines)) = &mut block {
            if line.trim_end() == "." {
                let command = lines.join("\n");
                let environment = std::mem::take(environment);
                block = None;
                run_command(
                    orchestrator,
                    output,
                    cancel,
                    environment,
                    command,
                    !interactive,
                    &mut shown,
                );
            } else {
                lines.push(line);
            }
            continue;
        }
        match parse_entry(&line) {
            Entry::Blank => {}
            Entry::Quit => return ":quit".to_owned(),
            Entry::Help => {
                let _ = writeln!(output, "{HELP}");
            }
            Entry::Screen => {
                shown = orchestrator.screen();
                let _ = write!(output, "{}", shown.render_for_humans());
            }
            Entry::StartBlock { environment } => block = Some((environment, Vec::new())),
            Entry::Command {
                environment,
                command,
            } => run_command(
                orchestrator,
                output,
                cancel,
                environment,
                command,
                !interactive,
                &mut shown,
            ),
            Entry::Unrecognised => {
                let _ = writeln!(
                    output,
                    "Start the line with an environment name and a colon, e.g. `bash: ls`. \
                     Environments: {}. Type :help for more.",
                    orchestrator.environment_names().join(", ")
                );
            }
        }
        let _ = output.flush();
    }
}

fn run_command(
    orchestrator: &Orchestrator,
    output: &mut dyn Write,
    cancel: &CancelFlag,
    environment: String,
    command: String,
    echo: bool,
    shown: &mut Screen,
) {
    if echo {
        // Input from a file or a pipe is not on the screen: show what runs.
        let _ = writeln!(output, ">>> {environment}:");
        for line in command.lines() {
            let _ = writeln!(output, ">>>   {line}");
        }
    }
    cancel.reset();
    let outcome = orchestrator.execute(&CommandRequest {
        environment: environment.clone(),
        command,
        timeout: None,
        yield_after: None,
        id: None,
    });
    let status = if outcome.success { "ok" } else { "failed" };
    let _ = writeln!(output, "---- {environment}: {status} ----");
    let _ = write!(output, "{}", outcome.output);
    if !outcome.output.is_empty() && !outcome.output.ends_with('\n') {
        let _ = writeln!(output);
    }
    let _ = writeln!(output);
    let _ = write!(
        output,
        "{}",
        outcome.screen.render_changes_since(Some(shown))
    );
    *shown = outcome.screen;
    let _ = output.flush();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands_blocks_and_meta_commands() {
        assert_eq!(
            parse_entry("bash: ls -la"),
            Entry::Command {
                environment: "bash".into(),
                command: "ls -la".into()
            }
        );
        assert_eq!(
            parse_entry("python:x = {'a': 1}"),
            Entry::Command {
                environment: "python".into(),
                command: "x = {'a': 1}".into()
            }
        );
        assert_eq!(
            parse_entry("editor:"),
            Entry::StartBlock {
                environment: "editor".into()
            }
        );
        assert_eq!(parse_entry(":quit"), Entry::Quit);
        assert_eq!(parse_entry(":screen"), Entry::Screen);
        assert_eq!(parse_entry("   "), Entry::Blank);
        assert_eq!(parse_entry("echo a:b"), Entry::Unrecognised);
        assert_eq!(parse_entry("no colon"), Entry::Unrecognised);
    }
}
