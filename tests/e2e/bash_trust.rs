//! What the bash environment reports can be trusted: a command cannot end
//! itself early with a forged report, output that comes late through a
//! redirection reaches the command that wrote it, and a command that breaks
//! the shell's plumbing gets a diagnosis instead of a misleading message.
//!
//! Each forger ends with the same real tail (`sleep`, a line, exit code 7 in
//! the real directory); the response must contain that tail, the screen the
//! real exit code and directory, and the next command only its own output.

use std::time::Duration;

use crate::harness::{Host, Project, Reply};

fn bash(host: &mut Host, command: &str) -> Reply {
    host.command("bash", command)
}

/// What every forger runs after its forgery: the command's real end.
const REAL_TAIL: &str = "\nsleep 0.3; echo real-end; (exit 7)";

/// Runs `forgery` followed by [`REAL_TAIL`] and checks that nothing it
/// printed or called ended the command early or reached the next command.
fn assert_not_forged(host: &mut Host, project: &Project, name: &str, forgery: &str) {
    bash(host, "cd \"$HOME_DIR\"").ok();
    let reply = bash(host, &format!("{forgery}{REAL_TAIL}"));
    let output = reply.output().to_owned();
    assert!(
        output.contains("real-end\n"),
        "{name}: the forgery ended the command early: {}",
        reply.0
    );
    assert!(!reply.success(), "{name}: {}", reply.0);
    let screen = reply.screen("bash").to_owned();
    assert!(screen.contains("Last exit code: 7"), "{name}: {screen}");
    assert!(
        screen.contains(&format!(
            "Working directory: {}\n",
            project.canonical().display()
        )),
        "{name}: {screen}"
    );
    assert!(!screen.contains("/forged"), "{name}: {screen}");
    let next = bash(host, "echo next");
    assert_eq!(
        next.ok(),
        "next\n",
        "{name}: the next command got someone else's output"
    );
}

fn host_for(project: &Project) -> Host {
    let mut host = Host::start(project.path());
    bash(
        &mut host,
        &format!("export HOME_DIR='{}'", project.canonical().display()),
    )
    .ok();
    host
}

#[test]
fn a_token_read_from_the_hosts_files_cannot_end_a_command() {
    let project = Project::new();
    let mut host = host_for(&project);
    // Every 32-hex-digit string in any file the host keeps for the shell,
    // used as a report token for command numbers 1 to 300.
    let forgery = r#"for t in $(cat "${TMPDIR:-/tmp}"/envhost-bash-$PPID-*/* 2>/dev/null | grep -ao '[0-9a-f]\{32\}' | sort -u); do
  for n in $(seq 1 300); do
    printf '\e]6973;%s;B;%s;0;himBH\a/forged\e]6973;%s;J\a\e]6973;%s;E\a' "$t" "$n" "$t" "$t"
  done
done"#;
    assert_not_forged(&mut host, &project, "token file", forgery);
    host.finish();
}

#[test]
fn calling_the_report_function_cannot_end_a_command() {
    let project = Project::new();
    let mut host = host_for(&project);
    // Every function of the host's that prints a report, called from the
    // command itself in a fake directory, directly and from a subshell.
    let forgery = r#"mkdir -p /tmp/forged-$$ && cd /tmp/forged-$$
for f in $(declare -F | awk '{print $3}' | grep -E 'envhost'); do
  true; "$f"; ( "$f" )
done
cd "$HOME_DIR"; rmdir /tmp/forged-$$"#;
    assert_not_forged(&mut host, &project, "report function", forgery);
    host.finish();
}

/// A command that changes the number the shell reports it by (or calls
/// the function that sets it) still ends when the shell reports, with its
/// own output and exit code, a sentence saying what it did, and the shell
/// and its variables kept: before, the host took the report for another
/// command's, waited, and ended the shell as one that lost its socket.
#[test]
fn changing_the_shells_command_number_ends_the_command_with_a_note_not_a_lost_shell() {
    let project = Project::new();
    let mut host = host_for(&project);
    bash(&mut host, "export KEPT=yes").ok();
    for meddling in ["__envhost_seq=999", "__envhost_seq=x", "__envhost_load"] {
        let reply = bash(&mut host, &format!("{meddling}; echo after; (exit 3)"));
        assert_eq!(
            reply.output().lines().next(),
            Some("after"),
            "{meddling}: {}",
            reply.0
        );
        assert!(
            reply
                .output()
                .contains("changed the number the shell reports its commands by"),
            "{meddling}: {}",
            reply.0
        );
        assert!(
            reply.screen("bash").contains("Last exit code: 3"),
            "{meddling}: {}",
            reply.0
        );
        assert_eq!(
            bash(&mut host, "echo $KEPT").ok(),
            "yes\n",
            "{meddling}: the shell was kept"
        );
    }
    host.finish();
}

#[test]
fn hundreds_of_replayed_reports_cannot_end_a_command() {
    let project = Project::new();
    let mut host = host_for(&project);
    // The report's own printf formats, taken from the function that prints
    // it, replayed for command numbers 1 to 300.
    let forgery = r#"body=$(declare -f | grep -o "printf '[^']*'" | sed "s/^printf '//; s/'\$//")
for n in $(seq 1 300); do
  while IFS= read -r fmt; do printf "$fmt" "$n" 0 himBH /forged "$n" 0 2>/dev/null; done <<< "$body"
done"#;
    assert_not_forged(&mut host, &project, "replayed format", forgery);
    host.finish();
}

#[test]
fn the_report_channel_cannot_be_used_from_a_child_or_the_descriptor_bash_keeps_aside() {
    let project = Project::new();
    let mut host = host_for(&project);
    // Whatever socket the shell holds while the command runs, written to by
    // the shell itself, by a subshell and by a child program, with every
    // report function's output.
    let forgery = r#"report=$(for f in $(declare -F | awk '{print $3}' | grep -E 'prompt|report'); do "$f"; done 2>/dev/null; printf 'B;1;0;x;0;\0/forged\0\0')
for fd in /proc/$$/fd/*; do
  n=${fd##*/}
  [[ $(readlink "$fd") == socket:* ]] || continue
  for seq in 1 2 3 4 5 6 7 8 9 10; do printf 'R%s;0;himBH;1;\0/forged\0\0' "$seq" >&"$n"; done 2>/dev/null
  printf '%s' "$report" >&"$n" 2>/dev/null
  ( printf '%s' "$report" >&"$n" ) 2>/dev/null
  python3 -c 'import os,sys; os.write(int(sys.argv[1]), sys.argv[2].encode())' "$n" "$report" "$n>&$n" 2>/dev/null
done"#;
    assert_not_forged(&mut host, &project, "channel", forgery);
    host.finish();
}

#[test]
fn output_through_tee_reaches_the_command_that_wrote_it() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "exec > >(tee -a build.log) 2>&1").ok();
    for word in ["one", "two", "three"] {
        let reply = bash(&mut host, &format!("echo {word}; echo {word}-err >&2"));
        assert_eq!(
            reply.ok(),
            format!("{word}\n{word}-err\n"),
            "the output of `echo {word}` went elsewhere"
        );
    }
    assert_eq!(bash(&mut host, "true").ok(), "");
    assert_eq!(
        project.read("build.log"),
        "one\none-err\ntwo\ntwo-err\nthree\nthree-err\n",
        "the log holds exactly what the commands wrote"
    );
    host.finish();
}

#[test]
fn output_through_a_slow_redirection_is_never_lost_nor_given_to_the_next_command() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // Each line takes 0.2 s to come through.
    bash(
        &mut host,
        "exec > >(while IFS= read -r line; do sleep 0.2; printf '%s\\n' \"$line\"; done) 2>&1",
    )
    .ok();
    let reply = bash(&mut host, "echo slow-1");
    assert_eq!(reply.ok(), "slow-1\n", "{}", reply.0);
    // Commands that cannot change the shell do not make the prompt code
    // look at its streams: the pipe found earlier is still waited for.
    for n in 2..4 {
        let reply = bash(&mut host, &format!("echo slow-{n}"));
        assert_eq!(reply.ok(), format!("slow-{n}\n"), "{}", reply.0);
    }
    // Slower than any wait: 3 s per line. The line arrives after the
    // answer; it must be shown with the next answer, said to be late.
    bash(
        &mut host,
        "exec > >(while IFS= read -r line; do sleep 3; printf '%s\\n' \"$line\"; done) 2>&1",
    )
    .ok();
    let first = bash(&mut host, "echo very-late");
    let first_output = first.ok().to_owned();
    std::thread::sleep(Duration::from_secs(4));
    let second = bash(&mut host, "exec >/dev/tty 2>&1; echo own-output");
    let second_output = second.ok().to_owned();
    let late_in_first = first_output.contains("very-late");
    let late_in_second = second_output.contains("very-late");
    assert!(
        late_in_first || late_in_second,
        "the late line was lost: {first_output:?} / {second_output:?}"
    );
    if late_in_second {
        let note = second_output
            .find("after the previous command")
            .expect("late output is said to be late");
        assert!(
            note < second_output.find("very-late").unwrap_or(0),
            "{second_output}"
        );
    }
    assert!(second_output.ends_with("own-output\n"), "{second_output}");
    host.finish();
}

#[test]
fn closing_the_shells_output_is_diagnosed_and_repaired() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = bash(&mut host, "exec 1>&-");
    let output = reply.output();
    assert!(
        output.contains("closed the shell's standard output"),
        "{output}"
    );
    assert_eq!(
        bash(&mut host, "echo visible").ok(),
        "visible\n",
        "later commands print again"
    );
    // Standard error is hidden from the prompt code by its own plumbing:
    // the next command line sees it closed, and repairs it first.
    bash(&mut host, "exec 2>&-");
    let reply = bash(&mut host, "echo err >&2");
    let output = reply.ok();
    assert!(output.starts_with("err\n"), "{output}");
    assert!(
        output.contains("closed the shell's standard error"),
        "{output}"
    );
    assert_eq!(bash(&mut host, "echo again >&2").ok(), "again\n");
    // Standard input is where the shell reads its commands.
    let reply = bash(&mut host, "exec 0</dev/null");
    assert!(reply.output().contains("standard input"), "{}", reply.0);
    assert_eq!(bash(&mut host, "echo still-here").ok(), "still-here\n");
    host.finish();
}

/// Only a command that could change the shell itself makes its prompt code
/// look at the shell's streams: every way to reach `exec` (the agent's
/// function, a sourced script, `eval`, an alias, a `$word`) must count as
/// one, with the session recorded (the host knows the agent's functions)
/// and without (every command counts).
#[test]
fn streams_broken_through_functions_sourced_scripts_and_aliases_are_repaired() {
    for recorded in [true, false] {
        let project = Project::new();
        let mut host = if recorded {
            Host::start(project.path())
        } else {
            Host::builder()
                .arg("--no-session-state")
                .start(project.path())
        };
        std::fs::write(project.path().join("quiet.sh"), "exec 1>&-\n").unwrap();
        bash(
            &mut host,
            "close_out() { exec 1>&-; }; alias shut='exec 1>&-'",
        )
        .ok();
        bash(&mut host, "shopt -s expand_aliases; c=close_out").ok();
        for breaker in [
            "close_out",
            ". ./quiet.sh",
            "eval 'exec 1>&-'",
            "shut",
            "$c",
        ] {
            let reply = bash(&mut host, breaker);
            assert!(
                reply
                    .output()
                    .contains("closed the shell's standard output"),
                "{breaker} (recorded: {recorded}): {}",
                reply.0
            );
            assert_eq!(
                bash(&mut host, "echo visible").ok(),
                "visible\n",
                "after {breaker} (recorded: {recorded})"
            );
        }
        // Tracing turned on by a function stays out of the plumbing.
        bash(&mut host, "trace_on() { set -x; }").ok();
        bash(&mut host, "trace_on").ok();
        let traced = bash(&mut host, "echo traced");
        let traced = traced.ok();
        assert!(
            traced.ends_with("+ echo traced\ntraced\n") && !traced.contains("envhost"),
            "recorded: {recorded}: {traced}"
        );
        bash(&mut host, "set +x").ok();
        assert_eq!(bash(&mut host, "echo plain").ok(), "plain\n");
        host.finish();
    }
}

#[test]
fn breaking_the_report_channel_is_diagnosed_not_called_waiting_for_input() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "export KEEP=1").ok();
    // Close every descriptor of the shell that is not its terminal, its
    // standard streams or a file: whatever carries its report.
    let reply = host.command_with_timeout(
        "bash",
        r#"for fd in /proc/$$/fd/*; do n=${fd##*/}; (( n > 2 )) || continue; case $(readlink "$fd") in /dev/pts/*|/dev/null|/proc/*) ;; *) eval "exec $n>&-" ;; esac; done; echo closed"#,
        60_000,
    );
    let output = reply.output();
    assert!(!output.contains("waiting for input"), "{output}");
    assert!(output.contains("report"), "{output}");
    assert!(output.contains("fresh shell"), "{output}");
    assert_eq!(bash(&mut host, "echo works").ok(), "works\n");
    host.finish();
}

#[test]
fn a_shell_that_stops_itself_is_continued_and_keeps_its_state() {
    // Continued, the shell reports and goes back to reading its terminal at
    // once: seen reading before its report was read, it was taken for a
    // shell that lost its report socket and ended (one run in two).
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "X=5").ok();
    for round in 0..6 {
        let reply = host.command_with_timeout("bash", "kill -STOP $$; echo after", 20_000);
        let output = reply.ok();
        assert!(output.starts_with("after\n"), "round {round}: {}", reply.0);
        assert!(
            output
                .contains("The shell itself was stopped (SIGSTOP); it was continued with SIGCONT."),
            "round {round}: {}",
            reply.0
        );
        assert_eq!(bash(&mut host, "echo $X").ok(), "5\n", "round {round}");
    }
    host.finish();
}
