//! The bash environment through the real binary: persistence, completion
//! detection, every kind of command, the screen, timeouts that keep state,
//! commands waiting for input, pagers and editors, secrets, restarts, huge
//! output and clean shutdown.

use std::time::Duration;

use crate::harness::{Host, Project, Reply, process_alive, skip_unprivileged, wait_until_dead};

/// The help line, and the line the default bash adds on opening another.
const HELP: &str = "Any bash command. Use & for background jobs.\nAnother bash: send to \"bash:NAME\" to open one (its own state and section); close ends it.";

/// A timeout far beyond what any command here needs: reaching it means the
/// behaviour under test (e.g. early detection of input waits) is broken.
const NEVER_MS: u64 = 60_000;

fn bash(host: &mut Host, command: &str) -> Reply {
    host.command("bash", command)
}

fn bash_within(host: &mut Host, command: &str, timeout_ms: u64) -> Reply {
    host.command_with_timeout("bash", command, timeout_ms)
}

/// The pids a command printed, one per line.
fn pids(output: &str) -> Vec<i32> {
    output
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

fn host_peak_memory_kib(host: &Host) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.pid()))
        .expect("read the host's /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc status")
}

#[test]
fn the_screen_is_minimal_before_first_use_and_seed_shaped_after() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let screen = host.screen();
    assert_eq!(
        screen.screen("bash"),
        format!("Bash shell (ready)\n\n{HELP}")
    );

    let reply = bash(&mut host, "echo hi");
    assert_eq!(
        reply.ok(),
        "hi\n",
        "no echo of the command, no prompt noise"
    );
    assert_eq!(
        reply.screen("bash"),
        format!(
            "Working directory: {}\nLast exit code: 0\n\n{HELP}",
            project.canonical().display()
        )
    );

    let reply = bash(&mut host, "mkdir -p sub && cd sub && (exit 3)");
    assert_eq!(reply.failed(), "");
    assert_eq!(
        reply.screen("bash"),
        format!(
            "Working directory: {}\nLast exit code: 3\n\n{HELP}",
            project.canonical().join("sub").display()
        )
    );

    let reply = bash(&mut host, "sleep 300 & echo $!");
    let pid = pids(reply.ok())[0];
    assert!(reply.ok().contains(&format!("[1] {pid}")), "{}", reply.0);
    assert_eq!(
        reply.screen("bash"),
        format!(
            "Working directory: {}\nLast exit code: 0\nBackground jobs: [1] {pid} sleep 300\n\n{HELP}",
            project.canonical().join("sub").display()
        )
    );
    // The screen alone costs no command, and still shows the job.
    assert!(
        host.screen()
            .screen("bash")
            .contains(&format!("[1] {pid} sleep 300"))
    );
    bash(&mut host, "kill %1; wait");
    let reply = bash(&mut host, "true");
    assert!(
        !reply.screen("bash").contains("Background jobs"),
        "{}",
        reply.0
    );
    host.finish();
}

#[test]
fn state_persists_between_commands() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "mkdir -p a/b && cd a/b").ok();
    bash(&mut host, "export GREETING=hello; plain=kept").ok();
    bash(&mut host, "alias greet='echo alias-works'").ok();
    bash(&mut host, "shout() { echo \"${1^^}\"; }").ok();
    bash(&mut host, "declare -a list=(x y z)").ok();
    let reply = bash(
        &mut host,
        "pwd; echo $GREETING $plain; greet; shout quiet; echo ${list[2]}; bash -c 'echo child sees $GREETING'",
    );
    assert_eq!(
        reply.ok(),
        format!(
            "{}\nhello kept\nalias-works\nQUIET\nz\nchild sees hello\n",
            project.canonical().join("a/b").display()
        )
    );
    bash(&mut host, "false").failed();
    assert_eq!(bash(&mut host, "echo $?").ok(), "1\n", "$? carries over");
    host.finish();
}

#[test]
fn any_bash_command_works() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let script = "for i in 1 2 3; do\n  echo \"line $i\"\ndone\nif [ -d . ]; then\n  echo yes\nelse\n  echo no\nfi\ncat <<'EOF'\nheredoc $HOME stays\nEOF\n";
    assert_eq!(
        bash(&mut host, script).ok(),
        "line 1\nline 2\nline 3\nyes\nheredoc $HOME stays\n"
    );

    // Far beyond the 4095-byte line limit of a terminal in canonical mode.
    let long_line = format!("echo {} | wc -c", "x".repeat(200_000));
    assert_eq!(bash(&mut host, &long_line).ok().trim(), "200001");

    // A long script of many lines.
    let many: String = (0..5000).map(|i| format!("v{i}={i}\n")).collect();
    bash(&mut host, &many).ok();
    assert_eq!(bash(&mut host, "echo $v0 $v4999").ok(), "0 4999\n");

    // Every byte a command may hold arrives as it was sent, whether the
    // command is short (typed inline) or long (through a file).
    let tricky = "tab\there, bang!! !$ !-1, quotes ' \" `, backslash \\ \\n \\x41, dollar $HOME ${x}, \u{e9}\u{20ac}\u{1d11e}, controls \u{1}\u{2}\u{1b}[31m \u{7f} \u{4} \u{3} \u{15} \u{17} \u{16} \r end";
    for padding in [0, 5000] {
        let content = format!("{}{tricky}", "p".repeat(padding));
        let command = format!("cat > tricky.txt <<'EOF'\n{content}\nEOF");
        bash(&mut host, &command).ok();
        assert_eq!(project.read("tricky.txt"), format!("{content}\n"));
    }

    // Incomplete input is a syntax error at once, not a PS2 wait.
    let reply = bash_within(&mut host, "echo \"unterminated", NEVER_MS);
    assert!(reply.failed().contains("unexpected EOF"), "{}", reply.0);
    let reply = bash_within(&mut host, "if true; then", NEVER_MS);
    assert!(reply.failed().contains("syntax error"), "{}", reply.0);

    // Windows line endings are read as a terminal would.
    assert_eq!(
        bash(&mut host, "echo one\r\necho two\r\n").ok(),
        "one\ntwo\n"
    );

    // Empty command.
    assert_eq!(bash(&mut host, "").ok(), "");

    // NUL cannot reach bash; the message says so and nothing breaks.
    let reply = bash(&mut host, "echo a\u{0}b");
    assert!(reply.failed().contains("NUL"), "{}", reply.0);
    assert_eq!(bash(&mut host, "echo fine").ok(), "fine\n");
    host.finish();
}

#[test]
fn output_is_what_a_terminal_shows_stdout_and_stderr_in_order() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = bash(
        &mut host,
        "echo out1; echo err1 >&2; echo out2; printf '\\e[1;31mred\\e[0m\\n'; printf 'progress 10%%\\rprogress 100%%\\n'; [ -t 1 ] && echo stdout-is-a-tty; echo $TERM; stty size",
    );
    assert_eq!(
        reply.ok(),
        "out1\nerr1\nout2\nred\nprogress 100%\nstdout-is-a-tty\ndumb\n40 120\n"
    );
    // `set -x` traces the command, never the host's plumbing.
    let reply = bash(&mut host, "set -x; echo traced");
    assert_eq!(reply.ok(), "++ echo traced\ntraced\n");
    let reply = bash(&mut host, "echo again; set +x");
    assert_eq!(reply.ok(), "++ echo again\nagain\n++ set +x\n");
    host.finish();
}

#[test]
fn marker_lookalikes_and_old_markers_do_not_end_a_command() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    // Prompt-like text and a frame with a wrong token.
    let reply = bash(
        &mut host,
        "printf '$ \\nbash-5.2$ \\n<<<PROMPT>>>\\n\\e]6973;00000000000000000000000000000000;B;9;0;x\\a/\\e]6973;00000000000000000000000000000000;E\\a\\n'; sleep 0.2; echo still-running",
    );
    assert!(reply.ok().ends_with("still-running\n"), "{}", reply.0);
    assert!(reply.ok().contains("bash-5.2$"), "{}", reply.0);

    // A faithful replay of the previous command's report, with the real
    // token: its command number is old, so it must be ignored.
    let replay = r#"fmt=$(declare -f __envhost_prompt | grep -o "printf '[^']*'" | head -1); fmt=${fmt#printf \'}; fmt=${fmt%\'}
end=$(declare -f __envhost_prompt | grep -o "printf '[^']*'" | tail -1); end=${end#printf \'}; end=${end%\'}
printf "$fmt" $((__envhost_seq - 1)) 0 himBHs "$PWD"; printf "$end"
sleep 0.2
echo after-the-replay"#;
    let reply = bash(&mut host, replay);
    assert!(
        reply.ok().ends_with("after-the-replay\n"),
        "an old report ended the command early: {}",
        reply.0
    );
    assert_eq!(bash(&mut host, "echo next").ok(), "next\n");

    // The plumbing cannot be replaced by accident.
    let reply = bash(&mut host, "PROMPT_COMMAND='echo hook'; echo went-on");
    assert!(reply.output().contains("readonly variable"), "{}", reply.0);
    assert_eq!(bash(&mut host, "echo still-fine").ok(), "still-fine\n");
    host.finish();
}

#[test]
fn a_timeout_interrupts_the_job_and_the_shell_keeps_its_state() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(
        &mut host,
        "mkdir -p work && cd work && export KEEP=me; sleep 300 &",
    )
    .ok();
    let job = pids(bash(&mut host, "jobs -p").ok())[0];
    let job_outside = host.outer_pid(job);
    let reply = bash_within(&mut host, "echo partial; sleep 60; echo never", 500);
    let output = reply.failed();
    assert!(output.starts_with("partial\n"), "{output}");
    assert!(!output.contains("never"), "{output}");
    assert!(
        output.contains("still running after 500 ms (its timeout)"),
        "{output}"
    );
    assert!(output.contains("SIGINT"), "{output}");
    assert!(reply.screen("bash").contains("Last exit code: 130"));

    let reply = bash(&mut host, "pwd; echo $KEEP; jobs -p");
    assert_eq!(
        reply.ok(),
        format!(
            "{}\nme\n{job}\n",
            project.canonical().join("work").display()
        )
    );
    assert!(
        process_alive(job_outside),
        "the background job survived the timeout"
    );
    host.finish();
    assert!(wait_until_dead(job_outside, Duration::from_secs(10)));
}

#[test]
fn a_timeout_escalates_past_a_job_that_ignores_sigint() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "export KEEP=yes").ok();
    // `sleep` inherits the ignored SIGINT.
    let stubborn =
        "for i in 1 2 3; do sh -c \"trap '' INT; exec sleep 100\"; echo \"loop went on $i\"; done";
    let reply = bash_within(&mut host, stubborn, 1000);
    let output = reply.failed();
    assert!(
        output.contains("ignored SIGINT and was stopped with SIGTERM"),
        "{output}"
    );
    assert!(
        !output.contains("loop went on"),
        "the shell dropped the rest of the list: {output}"
    );
    assert_eq!(bash(&mut host, "echo $KEEP").ok(), "yes\n");
    host.finish();
}

#[test]
fn a_wedged_shell_is_replaced_and_the_response_says_what_was_lost() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "mkdir -p deep && cd deep && export GONE=1").ok();
    // SIGINT is ignored by the shell's own loop, SIGTERM by any interactive
    // bash: only SIGKILL ends it.
    let reply = bash_within(&mut host, "trap '' INT; while :; do :; done", 300);
    let output = reply.failed();
    assert!(output.contains("SIGKILL"), "{output}");
    assert!(output.contains("fresh shell starts in"), "{output}");
    assert!(output.contains("are lost"), "{output}");
    assert!(
        reply
            .screen("bash")
            .contains("a fresh shell starts in this directory with the next command"),
        "{}",
        reply.0
    );
    let reply = bash(&mut host, "pwd; echo \"GONE=$GONE\"");
    assert_eq!(
        reply.ok(),
        format!("{}\nGONE=\n", project.canonical().join("deep").display())
    );
    assert!(!reply.screen("bash").contains("fresh shell"));
    host.finish();
}

#[test]
fn commands_waiting_for_input_are_stopped_early_with_a_clear_message() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "export KEEP=1").ok();
    for (command, reader) in [
        ("cat", "cat"),
        ("read answer; echo got $answer", "bash"),
        ("python3", "python3"),
        (
            "python3 -c 'import getpass; getpass.getpass(\"Password: \")'",
            "python3",
        ),
        ("echo before; cat | sort", "cat"),
    ] {
        let reply = bash_within(&mut host, command, NEVER_MS);
        let output = reply.failed();
        assert!(
            output.contains(&format!(
                "waiting for input from the terminal ({reader} is reading it)"
            )),
            "{command}: {output}"
        );
        assert!(output.contains("Give input another way"), "{output}");
        assert_eq!(bash(&mut host, "echo $KEEP").ok(), "1\n", "after {command}");
    }
    // The same commands with their input given do not wait.
    assert_eq!(bash(&mut host, "echo typed | cat").ok(), "typed\n");
    assert_eq!(
        bash(&mut host, "read answer <<< yes; echo got $answer").ok(),
        "got yes\n"
    );
    host.finish();
}

#[test]
fn pagers_never_block_and_editors_fail_fast() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = bash(&mut host, "echo $PAGER $GIT_PAGER $MANPAGER");
    assert_eq!(reply.ok(), "cat cat cat\n");
    let reply = bash_within(
        &mut host,
        "git init -q repo && cd repo && for i in $(seq 80); do git -c user.name=t -c user.email=t@e commit -q --allow-empty -m \"commit $i\"; done && git log --oneline | wc -l && git log --format=%s -1",
        NEVER_MS,
    );
    assert_eq!(reply.ok(), "80\ncommit 80\n");
    // 80 lines to the terminal through git's pager machinery, even with a
    // configured `less`: must not wait for someone to press `q`.
    let reply = bash_within(
        &mut host,
        "git -c core.pager=less log --format=%s",
        NEVER_MS,
    );
    assert_eq!(reply.ok().lines().count(), 80, "{}", reply.0);
    let reply = bash_within(
        &mut host,
        "git -c user.name=t -c user.email=t@e commit --allow-empty",
        NEVER_MS,
    );
    let output = reply.failed();
    assert!(output.contains("no interactive editor"), "{output}");
    assert!(output.contains("git commit -m"), "{output}");
    let reply = bash_within(&mut host, "$EDITOR notes.txt", NEVER_MS);
    assert!(
        reply.failed().contains("no interactive editor"),
        "{}",
        reply.0
    );
    host.finish();
}

#[test]
fn secrets_are_filtered_unless_passed_through() {
    let project = Project::new();
    let mut host = Host::builder()
        .env("DEMO_API_KEY", "leaked-key")
        .env("DEMO_TOKEN", "passed-token")
        .env("DEMO_PLAIN", "plain-value")
        .args(["--pass-env", "DEMO_TOKEN"])
        .start(project.path());
    let reply = bash(
        &mut host,
        "echo \"${DEMO_API_KEY:-unset} ${DEMO_TOKEN:-unset} ${DEMO_PLAIN:-unset}\"; env | grep -c leaked-key",
    );
    assert_eq!(reply.output(), "unset passed-token plain-value\n0\n");
    host.finish();
}

#[test]
fn exit_exec_and_a_killed_shell_start_a_fresh_shell_in_the_last_directory() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let last_dir = project.canonical().join("here");
    for (command, said, code) in [
        ("exit 3", "The shell exited with code 3", 3),
        ("exec false", "The shell exited with code 1", 1),
        ("kill -9 $$", "The shell was killed by SIGKILL", 137),
        (
            "set -e; false; echo unreachable",
            "The shell exited with code 1 (`set -e` was on",
            1,
        ),
    ] {
        bash(&mut host, "mkdir -p here && cd here && export LOST=yes").ok();
        let reply = bash(&mut host, command);
        let output = reply.failed();
        assert!(output.contains(said), "{command}: {output}");
        assert!(!output.contains("unreachable"), "{output}");
        assert!(
            output.contains(&format!("A fresh shell starts in {}", last_dir.display())),
            "{output}"
        );
        let screen = reply.screen("bash");
        assert!(
            screen.contains(&format!("Last exit code: {code}")),
            "{screen}"
        );
        assert!(
            screen.contains("a fresh shell starts in this directory with the next command"),
            "{screen}"
        );
        let reply = bash(&mut host, "pwd; echo \"LOST=$LOST\"");
        assert_eq!(reply.ok(), format!("{}\nLOST=\n", last_dir.display()));
        bash(&mut host, "cd ..").ok();
    }
    host.finish();
}

#[test]
fn a_shell_killed_from_outside_is_replaced_at_the_next_command() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let shell = pids(bash(&mut host, "echo $$").ok())[0];
    let shell = host.outer_pid(shell);
    let job = pids(bash(&mut host, "sleep 300 & echo $!").ok())[0];
    let job = host.outer_pid(job);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shell),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the shell");
    assert!(wait_until_dead(shell, Duration::from_secs(10)));
    let screen = host.screen();
    assert!(
        screen.screen("bash").contains(
            "The shell was killed by SIGKILL; a fresh shell starts in this directory with the next command."
        ),
        "{}",
        screen.0
    );
    let reply = bash(&mut host, "echo alive");
    let output = reply.ok();
    assert!(
        output.starts_with("alive\n") || output.contains("\nalive\n"),
        "{output}"
    );
    assert!(
        output.contains("The shell was killed by SIGKILL since the last command"),
        "{output}"
    );
    assert!(
        wait_until_dead(job, Duration::from_secs(10)),
        "the old shell's job was ended with it"
    );
    host.finish();
}

#[test]
fn background_output_between_commands_reaches_the_next_response() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    bash(&mut host, "(sleep 0.1; echo late-line) &").ok();
    std::thread::sleep(Duration::from_secs(2));
    let reply = bash(&mut host, "sleep 0.2; echo now");
    let output = reply.ok();
    assert!(output.contains("late-line\n"), "{output}");
    assert!(output.ends_with("now\n"), "{output}");
    host.finish();
}

#[test]
fn a_gigabyte_of_output_is_capped_saved_and_leaves_memory_bounded() {
    let project = Project::new();
    let mut host = Host::builder()
        .args(["--output-file-limit", "2GiB"])
        .start(project.path());
    bash(&mut host, "true").ok();
    let before = host_peak_memory_kib(&host);
    let gigabyte = 1_000_000_000u64;
    let reply = bash_within(
        &mut host,
        // Lines of 99 letters and a newline.
        &format!("yes {} | head -c {gigabyte}; echo done", "y".repeat(99)),
        600_000,
    );
    let output = reply.ok();
    assert!(output.starts_with("yyyy"), "{}", &output[..100]);
    assert!(output.ends_with("done\n"), "the tail is kept");
    assert!(
        output.contains("output too long"),
        "a marker between head and tail"
    );
    assert!(output.len() < 200 * 1024, "{} bytes returned", output.len());
    let saved = output
        .split("saved in ")
        .nth(1)
        .and_then(|rest| rest.split(" ...]").next())
        .expect("the response names the file");
    let size = std::fs::metadata(saved).expect("the saved output").len();
    assert_eq!(size, gigabyte + "done\n".len() as u64);
    let peak = host_peak_memory_kib(&host);
    eprintln!("1 GB of output: host peak memory {before} KiB before, {peak} KiB after");
    assert!(
        peak < before + 64 * 1024,
        "host peak memory grew from {before} KiB to {peak} KiB"
    );
    host.finish();
}

#[test]
fn a_runaway_commands_saved_output_is_bounded() {
    let project = Project::new();
    let mut host = Host::builder()
        .args(["--output-file-limit", "1MiB"])
        .start(project.path());
    let reply = bash(&mut host, "yes | head -c 5000000; echo done");
    let output = reply.ok();
    assert!(output.ends_with("done\n"), "the tail is kept");
    assert!(
        output.contains("the first 1048576 bytes are saved in"),
        "{}",
        &output[output.len() - 400..]
    );
    let saved = output
        .split("saved in ")
        .nth(1)
        .and_then(|rest| rest.split(" (the file").next())
        .expect("the response names the file");
    assert_eq!(std::fs::metadata(saved).expect("saved").len(), 1 << 20);
    host.finish();
}

/// A small file system mounted over the project's output folder, for one
/// test; unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &std::path::Path) -> Result<SmallDisk, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                "size=256k",
                "envhost-test",
                &at.to_string_lossy(),
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if status.success() {
            Ok(SmallDisk(at.to_owned()))
        } else {
            Err("mounting a tmpfs needs root".into())
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_leaves_no_partial_output_file() {
    let project = Project::new();
    let output_dir = project.path().join(".envhost/output");
    let _disk = match SmallDisk::mount(&output_dir) {
        Ok(disk) => disk,
        Err(reason) => {
            skip_unprivileged(
                "a_full_disk_leaves_no_partial_output_file",
                &format!("a small disk to fill ({reason})"),
            );
            return;
        }
    };
    let mut host = Host::start(project.path());
    let reply = bash(&mut host, "yes | head -c 3000000; echo done");
    let output = reply.ok();
    assert!(output.ends_with("done\n"), "the tail is kept");
    assert!(
        output.contains("the partial file was removed"),
        "{}",
        &output[output.len() - 400..]
    );
    let left: Vec<_> = std::fs::read_dir(&output_dir)
        .expect("the output folder")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "txt"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    host.finish();
}

#[test]
fn a_timed_out_server_that_exits_cleanly_is_said_to_have_failed_and_why() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = bash_within(&mut host, "python3 -m http.server 0 --bind 127.0.0.1", 1500);
    let output = reply.failed();
    assert!(
        reply.screen("bash").contains("Last exit code: 0"),
        "{}",
        reply.0
    );
    assert!(
        output.contains("exited with code 0 when interrupted"),
        "{output}"
    );
    assert!(output.contains("counts as failed"), "{output}");
    host.finish();
}

#[test]
fn no_process_survives_the_host_after_end_of_input() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = bash(
        &mut host,
        "sleep 1001 & echo $!
nohup sleep 1002 >/dev/null 2>&1 & echo $!
(sleep 1003 & echo $!)
setsid sh -c 'echo $$ > own-session.pid; exec sleep 1004' &
nohup sh -c 'sleep 1005 & echo $! > grandchild.pid; wait' >/dev/null 2>&1 &
until [ -s own-session.pid ] && [ -s grandchild.pid ]; do sleep 0.05; done
cat own-session.pid grandchild.pid",
    );
    let started = host.outer_pids(&pids(reply.ok()));
    assert_eq!(started.len(), 5, "{}", reply.0);
    for pid in &started {
        assert!(process_alive(*pid), "{pid} runs before the end");
    }
    let (status, _) = host.finish();
    assert!(status.success());
    for pid in started {
        assert!(
            wait_until_dead(pid, Duration::from_secs(10)),
            "process {pid} outlived the host"
        );
    }
}

#[test]
fn sigterm_to_the_host_during_a_command_stops_everything_promptly() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let job = pids(bash(&mut host, "sleep 1000 & echo $!").ok())[0];
    let job = host.outer_pid(job);
    host.send(&serde_json::json!({"type": "command", "environment": "bash", "command": "echo started; sleep 1000"}));
    std::thread::sleep(Duration::from_millis(500));
    host.signal("TERM");
    let status = host.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(wait_until_dead(job, Duration::from_secs(10)));
}

#[test]
fn without_bash_the_error_is_clear_and_the_host_keeps_serving() {
    let project = Project::new();
    let mut host = Host::builder()
        .env("PATH", "/nonexistent-envhost-path")
        .start(project.path());
    let reply = bash(&mut host, "echo hi");
    let output = reply.failed();
    assert!(
        output.contains("Environment error in bash: bash cannot be run"),
        "{output}"
    );
    assert!(output.contains("PATH"), "{output}");
    assert_eq!(host.screen().kind(), "screen");
    let (status, _) = host.finish();
    assert!(status.success());
}

/// The report of a command's end can reach the host before the last bytes
/// the command wrote have passed the kernel's terminal buffers; the host
/// reads the terminal dry after the report, so each command's output comes
/// whole with its own answer, never late with the next one. Written by a
/// child process just before it exits (bash reports at once after), many
/// times in a row, small and large.
#[test]
fn the_last_bytes_a_command_writes_come_with_its_own_answer() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    for round in 0..300 {
        let size = [1, 100, 3000, 20_000][round % 4];
        let reply = bash(
            &mut host,
            &format!("/usr/bin/printf 'round-{round} %0{size}d\\n' 0"),
        );
        let output = reply.ok();
        assert_eq!(
            output.len(),
            format!("round-{round} ").len() + size + 1,
            "round {round}: {}",
            &output[..output.len().min(200)]
        );
        assert!(
            output.starts_with(&format!("round-{round} 0")),
            "round {round}"
        );
    }
    host.finish();
}
