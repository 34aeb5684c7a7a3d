//! The words about a command that outlives the wait: the note that ends a
//! response whose command is still running, the refusal of a new command
//! while one runs, the answer when nothing runs, and the block an
//! environment's screen section starts with while its command runs.
//!
//! Written once here so that bash, python and plugins say the same facts
//! the same way; the facts come from [`RunningCommand`]. It must not know
//! how a command runs nor how the agent's messages are spelled on the wire
//! (it names the ways on as `wait`, `input`, `interrupt` and `restart`).

use std::time::{Duration, Instant};

use crate::environment::RunningCommand;
use crate::text;

/// Longest command or output line quoted on one line.
const QUOTED_CHARS: usize = 100;

/// How the agent goes on with a running command.
const WAYS_ON: &str = "wait to read more of its output, input to type text into it \
                       (\"\\u0003\" is Ctrl-C), or interrupt to stop it";

/// How the note that ends a still-running command's output begins.
const NOTE_START: &str = "[envhost] The command is still running";

/// The sentence that ends the output of a response whose command is still
/// running. `running` is the environment's own account, when it gives one.
pub fn still_running_note(running: Option<&RunningCommand>, now: Instant) -> String {
    let Some(running) = running else {
        return format!("{NOTE_START}. Go on with {WAYS_ON}.\n");
    };
    let mut note = format!(
        "{NOTE_START} ({} so far, {} of output). ",
        elapsed(running, now),
        text::bytes(running.output_bytes)
    );
    if running.waiting_for_input {
        note.push_str("It seems to be waiting for input: answer it with input. ");
    }
    note.push_str(&format!("Go on with {WAYS_ON}.\n"));
    note
}

/// `output` without the [`still_running_note`] that ends it, if it does:
/// for a front end that says it in its own words (the REPL, which follows
/// a running command piece by piece and has its own commands to go on).
pub fn without_note(output: &str) -> &str {
    let Some(start) = output.rfind(NOTE_START) else {
        return output;
    };
    let at_line_start = start == 0 || output[..start].ends_with('\n');
    let note = &output[start..];
    let one_line = note.find('\n').is_none_or(|end| end + 1 == note.len());
    if at_line_start && one_line {
        &output[..start]
    } else {
        output
    }
}

/// The refusal of a new command while `running` runs in `environment`.
pub fn busy_refusal(environment: &str, running: &RunningCommand, now: Instant) -> String {
    let mut refusal = format!(
        "{environment} is still running {} (for {}, {} of output so far",
        quoted_command(&running.command),
        elapsed(running, now),
        text::bytes(running.output_bytes)
    );
    if let Some(line) = &running.last_line {
        refusal.push_str(&format!("; last line: {}", quoted(line)));
    }
    refusal.push_str("), so it takes no new command until that one ends. ");
    if running.waiting_for_input {
        refusal.push_str("It seems to be waiting for input. ");
    }
    refusal.push_str(&format!(
        "Go on with {WAYS_ON}; or restart {environment} to start it afresh (its state is lost). \
         Other environments take commands meanwhile."
    ));
    refusal
}

/// The answer to `wait`, `input` or `interrupt` (named by `request`) when
/// nothing runs in `environment`.
pub fn nothing_running(environment: &str, request: &str) -> String {
    let what = match request {
        "input" => "to type into",
        "interrupt" => "to interrupt",
        _ => "to wait for",
    };
    format!(
        "Nothing is running in {environment}, so there is nothing {what}: wait, input and \
         interrupt go on with a command that was still running when it was answered. Send a \
         command instead."
    )
}

/// The lines an environment's screen section starts with while its command
/// runs.
pub fn screen_block(running: &RunningCommand, now: Instant) -> String {
    let mut block = format!(
        "Running for {}: {}\nOutput so far: {}",
        elapsed(running, now),
        quoted_command(&running.command),
        text::bytes(running.output_bytes)
    );
    if let Some(line) = &running.last_line {
        block.push_str(&format!("; last line: {}", quoted(line)));
    }
    block.push('\n');
    if running.waiting_for_input {
        block.push_str("It seems to be waiting for input: answer it with input.\n");
    }
    block.push_str("It takes no new command until it ends: go on with wait, input or interrupt.\n");
    block
}

/// The first line of a section whose environment is handling another
/// request (`what`, for `busy_for`); the rest of the section is as it was
/// last shown.
pub fn busy_line(what: &str, busy_for: Duration, shown_before: bool) -> String {
    let rest = if shown_before {
        "the rest of this section is as it was before"
    } else {
        "its state is shown once it is done"
    };
    format!(
        "[Busy: handling a {what} request for {}; {rest}.]",
        text::duration(round_to_tenths(busy_for))
    )
}

fn elapsed(running: &RunningCommand, now: Instant) -> String {
    text::duration(round_to_tenths(
        now.saturating_duration_since(running.started),
    ))
}

/// Whole tenths of a second read better than microseconds for a command
/// that runs on; under a second, milliseconds.
fn round_to_tenths(duration: Duration) -> Duration {
    if duration < Duration::from_secs(1) {
        Duration::from_millis(duration.as_millis() as u64)
    } else {
        Duration::from_millis(duration.as_millis() as u64 / 100 * 100)
    }
}

/// The command's first line, quoted, with a count of the lines left out.
pub fn quoted_command(command: &str) -> String {
    let mut lines = command.lines().filter(|line| !line.trim().is_empty());
    let first = lines.next().unwrap_or("");
    let more = lines.count();
    let mut quoted = quoted(first.trim());
    if more > 0 {
        quoted.push_str(&format!(" (and {more} more {})", text::noun(more, "line")));
    }
    quoted
}

/// `line` in backquotes, cut to a readable length.
fn quoted(line: &str) -> String {
    text::quoted(line, QUOTED_CHARS)
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_note_can_be_taken_off_the_output() {
        let now = Instant::now();
        for running in [
            None,
            Some(&RunningCommand {
                command: "make".into(),
                started: now,
                output_bytes: 3,
                last_line: None,
                waiting_for_input: true,
            }),
        ] {
            let output = format!("ab\n{}", still_running_note(running, now));
            assert_eq!(without_note(&output), "ab\n");
            assert_eq!(without_note(&still_running_note(running, now)), "");
        }
        // Only the note at the end, on its own line.
        assert_eq!(without_note("ab\n"), "ab\n");
        let quoted = format!("echo '{NOTE_START}' x");
        assert_eq!(without_note(&quoted), quoted);
        let earlier = format!("{NOTE_START}\nlater\n");
        assert_eq!(without_note(&earlier), earlier);
    }
    use super::*;

    fn running(waiting: bool) -> (RunningCommand, Instant) {
        let started = Instant::now();
        let command = RunningCommand {
            command: "make test\n\n  echo done\n".into(),
            started,
            output_bytes: 12_660,
            last_line: Some("test foo ... ok".into()),
            waiting_for_input: waiting,
        };
        (command, started + Duration::from_millis(42_345))
    }

    #[test]
    fn the_screen_block_names_command_time_size_and_last_line() {
        let (command, now) = running(true);
        assert_eq!(
            screen_block(&command, now),
            "Running for 42.3 s: `make test` (and 1 more line)\n\
             Output so far: 12.4 KiB; last line: `test foo ... ok`\n\
             It seems to be waiting for input: answer it with input.\n\
             It takes no new command until it ends: go on with wait, input or interrupt.\n"
        );
    }

    #[test]
    fn the_refusal_names_what_runs_and_the_ways_on() {
        let (command, now) = running(false);
        let refusal = busy_refusal("bash", &command, now);
        assert!(refusal.starts_with(
            "bash is still running `make test` (and 1 more line) (for 42.3 s, 12.4 KiB of output so far; last line: `test foo ... ok`)"
        ), "{refusal}");
        for way in ["wait", "input", "interrupt", "restart bash"] {
            assert!(refusal.contains(way), "{refusal}");
        }
    }

    #[test]
    fn the_note_says_how_to_go_on() {
        let (command, now) = running(true);
        let note = still_running_note(Some(&command), now);
        assert!(note.starts_with("[envhost] The command is still running (42.3 s so far, 12.4 KiB of output). It seems to be waiting for input"), "{note}");
        assert!(note.ends_with("or interrupt to stop it.\n"));
        assert!(still_running_note(None, now).contains("wait to read more"));
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "x".repeat(300);
        assert_eq!(quoted(&long).chars().count(), QUOTED_CHARS + 3);
        assert_eq!(
            nothing_running("python", "input"),
            "Nothing is running in python, so there is nothing to type into: wait, input and interrupt go on with a command that was still running when it was answered. Send a command instead."
        );
        assert_eq!(
            busy_line("wait", Duration::from_millis(3_250), true),
            "[Busy: handling a wait request for 3.2 s; the rest of this section is as it was before.]"
        );
    }
}
