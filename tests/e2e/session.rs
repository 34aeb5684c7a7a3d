//! Crash-safe sessions: the host is killed with SIGKILL from outside at
//! several points of a stream of commands, started again with `--resume`,
//! and must bring back exactly the state of the last answered command;
//! corrupted and foreign state is refused with a sentence and a fresh
//! start.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::thread;
use std::time::Duration;

use crate::harness::{Host, Project};

fn resumed(project: &Project) -> Host {
    Host::builder().arg("--resume").start(project.path())
}

/// What the shell holds, printed on one line per item.
const PROBE: &str = "echo \"status=$? pwd=$PWD a=$a b=$b during=${during-unset}\"; \
                     greet x; hi; shopt -q extglob && echo extglob-on; \
                     declare -p arr; printf '%s' \"$multi\" | od -c | head -1";

fn session_file(project: &Project, environment: &str) -> std::path::PathBuf {
    project
        .path()
        .join(".envhost/session")
        .join(format!("{environment}.json"))
}

fn kill_9(host: &mut Host) {
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));
}

#[test]
fn bash_and_editor_come_back_as_the_last_answer_left_them_after_kill_9() {
    let project = Project::new();
    project.write("sub/notes.txt", "alpha\nbeta 1\ngamma\nbeta 2\ndelta\n");

    // Kill 1: after answers.
    let mut host = Host::start(project.path());
    host.command(
        "bash",
        "cd sub && a=1 && b=1 && export EXPORTED=yes; greet() { echo \"hello $1\"; }; \
         alias hi='echo hi-alias'; shopt -s extglob; arr=(x 'y z'); multi=$'one\\ntwo'",
    )
    .ok();
    host.command("editor", "view sub/notes.txt /^beta/ /^gamma|^delta/ betas")
        .ok();
    host.command("editor", "next_match 1").ok();
    host.command(
        "python",
        "import json as j\nimport threading\ncount = 41\nrows = [{'a': 1}]\nlock = threading.Lock()\nbig = b'x' * 2_000_000",
    )
    .ok();
    host.command("python", "count += 1\nrows.append({'b': 2})")
        .ok();
    host.command("bash", "false").failed();
    let folder = project.path().join(".envhost/session");
    assert_eq!(
        fs::metadata(&folder).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        fs::metadata(session_file(&project, "bash"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    kill_9(&mut host);

    let mut host = resumed(&project);
    let screen = host.screen();
    assert!(screen.screen("session").contains("bash: restored"));
    let first = host.command("bash", PROBE);
    let output = first.output();
    assert!(output.contains("Session resumed"), "{output}");
    assert!(
        output.contains("bash: restored the working directory"),
        "{output}"
    );
    assert!(output.contains("editor: restored 1 view"), "{output}");
    assert!(first.screen("session").contains("Session resumed"));
    let sub = project.canonical().join("sub");
    assert!(
        output.contains(&format!(
            "status=1 pwd={} a=1 b=1 during=unset",
            sub.display()
        )),
        "{output}"
    );
    assert!(output.contains("hello x"), "{output}");
    assert!(output.contains("hi-alias"), "{output}");
    assert!(output.contains("extglob-on"), "{output}");
    assert!(
        output.contains("declare -a arr=([0]=\"x\" [1]=\"y z\")"),
        "{output}"
    );
    assert!(output.contains("o   n   e  \\n   t   w   o"), "{output}");
    // The editor: the view, its label and its match index; `view` and
    // `next_match` were used, so their help is short now.
    let editor = first.screen("editor");
    assert!(editor.contains("[1] sub/notes.txt"), "{editor}");
    assert!(editor.contains("(match 2/2) \"betas\""), "{editor}");
    assert!(editor.contains("beta 2"), "{editor}");
    assert!(
        output.contains("python: restored 2 variable(s)"),
        "{output}"
    );
    assert!(output.contains("json as j"), "{output}");
    assert!(
        output.contains(
            "Could not be saved: `big` (a bytes of 1.9 MiB pickled, over the 1.0 MiB bound); `lock`"
        ),
        "{output}"
    );
    let python = host.command("python", "print(count, rows, j.dumps(1))");
    assert_eq!(python.ok(), "42 [{'a': 1}, {'b': 2}] 1\n");
    // Said once: the next answer has no session section.
    let second = host.command("bash", "echo $EXPORTED; printenv EXPORTED");
    assert_eq!(second.ok(), "yes\nyes\n");
    assert!(second.0["screen"].get("session").is_none());
    let view = host.command("editor", "view sub/notes.txt /^alpha/ /^beta/");
    view.ok();
    assert!(
        view.screen("editor").contains("[2] sub/notes.txt /^alpha/"),
        "the next view id came back: {}",
        view.screen("editor")
    );

    // Kill 2: during a command. It changed the shell, but it was never
    // answered: the state is the last answer's.
    host.command("bash", "a=2; b=2").ok();
    host.send(&serde_json::json!({
        "type": "command", "environment": "bash",
        "command": "during=yes; a=3; sleep 20; b=3"
    }));
    thread::sleep(Duration::from_millis(500));
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host.command("bash", PROBE).output().to_owned();
    assert!(output.contains("a=2 b=2 during=unset"), "{output}");

    // Kill 3: right as a command is sent: the state is the one before it
    // or the one after it, never a mix.
    host.send(&serde_json::json!({
        "type": "command", "environment": "bash", "command": "a=4; b=4"
    }));
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host.command("bash", PROBE).output().to_owned();
    assert!(
        output.contains("a=2 b=2") || output.contains("a=4 b=4"),
        "{output}"
    );

    // A background job is recorded as lost.
    host.command("bash", "sleep 30 &").ok();
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host.command("bash", "true").output().to_owned();
    assert!(output.contains("Lost: 1 background job(s)"), "{output}");
    assert!(output.contains("sleep 30"), "{output}");
    // Said once: the state written with that answer no longer has the job.
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host.command("bash", "true").output().to_owned();
    assert!(output.contains("bash: restored"), "{output}");
    assert!(!output.contains("background job"), "{output}");
    drop(host);
}

#[test]
fn a_corrupted_state_is_refused_and_the_host_starts_fresh() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash", "kept=yes").ok();
    kill_9(&mut host);
    let file = session_file(&project, "bash");
    let whole = fs::read(&file).unwrap();
    fs::write(&file, &whole[..whole.len() / 2]).unwrap();

    let mut host = resumed(&project);
    let reply = host.command("bash", "echo \"kept=${kept-unset}\"");
    let output = reply.ok();
    assert!(output.contains("is corrupted"), "{output}");
    assert!(
        output.contains("Every environment starts fresh"),
        "{output}"
    );
    assert!(output.ends_with("kept=unset\n"), "{output}");
}

#[test]
fn a_state_from_another_project_is_refused_with_the_reason() {
    let first = Project::new();
    let mut host = Host::start(first.path());
    host.command("bash", "kept=yes").ok();
    drop(host);
    let second = Project::new();
    let folder = second.path().join(".envhost/session");
    fs::create_dir_all(&folder).unwrap();
    fs::copy(session_file(&first, "bash"), folder.join("bash.json")).unwrap();

    let mut host = resumed(&second);
    let reply = host.command("bash", "echo \"kept=${kept-unset}\"");
    let output = reply.ok();
    assert!(output.contains("belongs to the project"), "{output}");
    assert!(output.contains("kept=unset"), "{output}");
}

#[test]
fn without_session_state_nothing_is_written() {
    let project = Project::new();
    let mut host = Host::builder()
        .arg("--no-session-state")
        .start(project.path());
    host.command("bash", "kept=yes").ok();
    drop(host);
    assert!(!project.path().join(".envhost/session").exists());
    let mut host = resumed(&project);
    let output = host.command("bash", "true").output().to_owned();
    assert!(output.contains("nothing was saved"), "{output}");
}

#[test]
fn plugins_restart_fresh_and_a_rebuilt_plugin_refuses_the_old_state() {
    let project = Project::new();
    crate::plugins::install(&project, &[("tick", "timer")]);
    let mut host = crate::plugins::start(&project, &[]);
    host.command("bash", "kept=yes").ok();
    kill_9(&mut host);

    // The same plugin: the session comes back, the plugin starts fresh.
    let mut host = crate::plugins::start(&project, &["--resume"]);
    let output = host
        .command("bash", "echo \"kept=${kept-unset}\"")
        .ok()
        .to_owned();
    assert!(
        output.contains("tick: a plugin, restarted fresh"),
        "{output}"
    );
    assert!(output.ends_with("kept=yes\n"), "{output}");
    kill_9(&mut host);

    // Another build under the same name: the state is refused.
    crate::plugins::install(&project, &[("tick", "sqlite")]);
    let mut host = crate::plugins::start(&project, &["--resume"]);
    let output = host
        .command("bash", "echo \"kept=${kept-unset}\"")
        .ok()
        .to_owned();
    assert!(
        output.contains("the plugins changed since (added, removed or rebuilt: tick)"),
        "{output}"
    );
    assert!(output.ends_with("kept=unset\n"), "{output}");
}

#[test]
fn a_command_that_yielded_is_kept_once_its_end_is_answered() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let reply = host.request(&serde_json::json!({
        "type": "command", "environment": "bash",
        "command": "late=1; sleep 1; later=2", "yield_ms": 50
    }));
    assert!(reply.running());
    let reply = host.request(&serde_json::json!({
        "type": "wait", "environment": "bash", "timeout_ms": 10_000
    }));
    assert!(!reply.running());
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host
        .command("bash", "echo \"$late $later\"")
        .ok()
        .to_owned();
    assert!(output.ends_with("1 2\n"), "{output}");
}

#[test]
fn a_shell_that_ended_is_kept_as_a_fresh_one_and_set_e_comes_back_safely() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command("bash", "gone=yes").ok();
    host.command("bash", "exit 4").failed();
    host.command("bash", "set -e; kept=yes").ok();
    host.command("bash", "false || true").ok();
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host
        .command("bash", "echo \"gone=${gone-unset} kept=$kept $-\"")
        .ok()
        .to_owned();
    assert!(output.contains("gone=unset kept=yes"), "{output}");
    let flags = output.trim_end().rsplit(' ').next().unwrap_or("");
    assert!(flags.contains('e'), "set -e is back: {output}");
    // With set -e back, the shell still runs commands.
    assert_eq!(host.command("bash", "echo alive").ok(), "alive\n");
    drop(host);

    let mut host = Host::start(project.path());
    host.command("bash", "ended=no").ok();
    host.command("bash", "exit").ok();
    kill_9(&mut host);
    let mut host = resumed(&project);
    let output = host
        .command("bash", "echo \"ended=${ended-unset}\"")
        .ok()
        .to_owned();
    assert!(output.ends_with("ended=unset\n"), "{output}");
}

/// Kills at varied instants of a stream of commands (each sets two values
/// in bash and in python): the resumed state is always the last answered
/// command's or, for a command sent but not answered, possibly that one's
/// — never one value from each, never older.
#[test]
fn kills_at_varied_instants_never_leave_a_mix() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    let mut answered = 0u64;
    for round in 0..6u64 {
        // Commands answered in this round, then one sent and the host
        // killed after a delay that moves through the command's life.
        for _ in 0..3 {
            answered += 1;
            host.command("bash", &format!("a={answered}; sleep 0.01; b={answered}"))
                .ok();
            host.command(
                "python",
                &format!("a = {answered}\nimport time; time.sleep(0.01)\nb = {answered}"),
            )
            .ok();
        }
        let sent = answered + 1;
        let environment = if round % 2 == 0 { "bash" } else { "python" };
        let code = if environment == "bash" {
            format!("a={sent}; sleep 0.02; b={sent}")
        } else {
            format!("a = {sent}\nimport time; time.sleep(0.02)\nb = {sent}")
        };
        host.send(&serde_json::json!({
            "type": "command", "environment": environment, "command": code
        }));
        thread::sleep(Duration::from_millis(round * 8));
        kill_9(&mut host);

        host = resumed(&project);
        let shell = host.command("bash", "echo \"$a $b\"").ok().to_owned();
        let shell = shell.lines().last().unwrap_or("").to_owned();
        let python = host.command("python", "print(a, b)").ok().to_owned();
        let python = python.lines().last().unwrap_or("").to_owned();
        let before = format!("{answered} {answered}");
        let after = format!("{sent} {sent}");
        for (name, got, own) in [
            ("bash", &shell, environment == "bash"),
            ("python", &python, environment == "python"),
        ] {
            assert!(
                *got == before || (own && *got == after),
                "round {round}: {name} came back as `{got}`, expected `{before}`{}",
                if own {
                    format!(" or `{after}`")
                } else {
                    String::new()
                }
            );
        }
        // Go on from what came back, in both.
        if shell == after || python == after {
            answered = sent;
            host.command("bash", &format!("a={answered}; b={answered}"))
                .ok();
            host.command("python", &format!("a = {answered}\nb = {answered}"))
                .ok();
        }
    }
}

#[test]
fn a_session_folder_that_is_a_symlink_is_not_written_through() {
    let project = Project::new();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::create_dir_all(project.path().join(".envhost")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), project.path().join(".envhost/session")).unwrap();
    let before = fs::metadata(elsewhere.path()).unwrap().permissions().mode();
    let mut host = Host::start(project.path());
    host.command("bash", "secret=yes").ok();
    let (_, stderr) = host.finish();
    assert!(stderr.contains("is not a folder"), "{stderr}");
    assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    assert_eq!(
        fs::metadata(elsewhere.path()).unwrap().permissions().mode(),
        before
    );
}

/// Python's state keeping looks again at the variables a command names,
/// and at the others only when the namespace's names or objects changed:
/// a variable rebound by a function the command calls (and does not name)
/// is still kept, as is one mutated through its own name, one named only
/// inside a string, and the same value bound again.
#[test]
fn python_keeps_variables_rebound_out_of_sight() {
    let project = Project::new();
    let mut host = Host::start(project.path());
    host.command(
        "python",
        "total = 1000\nitems = [1]\nsame = 7\ndef bump():\n    global total\n    total = total + 1000",
    )
    .ok();
    host.command("python", "bump()").ok();
    host.command("python", "items.append(2)").ok();
    host.command("python", "exec('late = 5')").ok();
    host.command("python", "same = 7").ok();
    host.command("python", "bump()").ok();
    kill_9(&mut host);
    let mut host = resumed(&project);
    let python = host.command("python", "print(total, items, late, same)");
    let output = python.ok();
    assert!(output.ends_with("\n3000 [1, 2] 5 7\n"), "{output}");
    host.finish();
}

/// A small tmpfs mounted over a folder for a test's length (root only);
/// unmounted when dropped, whatever the test did.
struct Mounted {
    at: std::path::PathBuf,
}

impl Mounted {
    fn tmpfs(at: &std::path::Path, size: &str) -> Mounted {
        fs::create_dir_all(at).unwrap();
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount a tmpfs on {}", at.display());
        Mounted { at: at.to_owned() }
    }

    /// `mount -o remount,OPTIONS`: `ro` or `rw`.
    fn remount(&self, options: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.at)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {} {options}", self.at.display());
    }

    /// Writes a file until the file system is full; returns its path.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.at.join("filler");
        let mut file = fs::File::create(&path).unwrap();
        let block = [0u8; 4096];
        while file.write_all(&block).is_ok() {}
        path
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
    }
}

/// Whether this test may mount file systems (it runs as root); otherwise
/// it is skipped where ENVHOST_SKIP_PRIVILEGED=1 says so, and fails.
fn cannot_mount(test: &str) -> bool {
    !nix::unistd::geteuid().is_root()
        && crate::harness::skip_unprivileged(test, "root (to mount a small tmpfs)")
}

const NOT_SAVED: &str = "[envhost] Session state is not being saved: ";
const SAVED_AGAIN: &str =
    "[envhost] Session state is saved again: every environment's latest state is on disk.";

/// The temporary files a failed write may have left in the folder.
fn temporary_files(folder: &std::path::Path) -> Vec<String> {
    fs::read_dir(folder)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".state-"))
        .collect()
}

#[test]
fn a_full_disk_is_said_once_shown_on_the_screen_and_saving_resumes() {
    if cannot_mount("a_full_disk_is_said_once_shown_on_the_screen_and_saving_resumes") {
        return;
    }
    let project = Project::new();
    let folder = project.path().join(".envhost/session");
    let disk = Mounted::tmpfs(&folder, "256k");
    let mut host = Host::start(project.path());
    let first = host.command("bash", "a=1");
    assert!(!first.ok().contains("Session state"), "{}", first.0);
    assert!(!first.section_names().contains(&"session-state".to_owned()));
    assert!(session_file(&project, "bash").exists());

    let filler = disk.fill();
    let full = host.command("bash", "during=full-disk-marker");
    let output = full.ok();
    let said = format!(
        "{NOT_SAVED}cannot save bash's state in {} (No space left on device (os error 28)); free some space on that disk.",
        folder.display()
    );
    assert!(output.contains(&said), "{output}");
    assert!(
        full.screen("session-state").starts_with(&format!(
            "Session state is not being kept: cannot save bash's state in {} (No space left on device",
            folder.display()
        )),
        "{}",
        full.0
    );
    // Said once; shown on every screen while it lasts.
    for (environment, command) in [("bash", "b=2"), ("python", "x = 41"), ("bash", "true")] {
        let reply = host.command(environment, command);
        assert!(!reply.ok().contains("Session state"), "{}", reply.0);
        assert!(
            reply
                .screen("session-state")
                .contains("No space left on device"),
            "{}",
            reply.0
        );
    }
    assert!(
        host.screen()
            .screen("session-state")
            .contains("envhost tries again after every answer")
    );
    assert_eq!(temporary_files(&folder), Vec::<String>::new());
    let kept = fs::read_to_string(session_file(&project, "bash")).unwrap();
    assert!(!kept.contains("full-disk-marker"), "{kept}");

    // Space comes back: the next answer saves what was not, even a command
    // that changes nothing, and says so once.
    fs::remove_file(&filler).unwrap();
    let again = host.command("bash", "true");
    assert!(again.output().contains(SAVED_AGAIN), "{}", again.0);
    assert_eq!(
        again.screen("session-state"),
        "Session state is kept again: every environment's latest state is on disk."
    );
    let kept = fs::read_to_string(session_file(&project, "bash")).unwrap();
    assert!(kept.contains("full-disk-marker"), "{kept}");
    assert!(session_file(&project, "python").exists());
    let after = host.command("bash", "c=3");
    assert!(!after.ok().contains("Session state"), "{}", after.0);
    assert!(!after.section_names().contains(&"session-state".to_owned()));

    // What was kept while the disk was full comes back after a kill.
    kill_9(&mut host);
    let mut host = resumed(&project);
    let probe = host.command("bash", "echo \"$a $b $during $c\"");
    assert!(
        probe.ok().ends_with("1 2 full-disk-marker 3\n"),
        "{}",
        probe.0
    );
    let probe = host.command("python", "print(x + 1)");
    assert!(probe.ok().ends_with("42\n"), "{}", probe.0);
    host.finish();
    drop(disk);
}

#[test]
fn a_read_only_session_folder_is_said_once_and_saving_resumes_when_writable() {
    if cannot_mount("a_read_only_session_folder_is_said_once_and_saving_resumes_when_writable") {
        return;
    }
    let project = Project::new();
    let folder = project.path().join(".envhost/session");
    let disk = Mounted::tmpfs(&folder, "1m");
    let mut host = Host::start(project.path());
    host.command("bash", "a=1").ok();
    disk.remount("ro");
    let refused = host.command("bash", "b=read-only-marker");
    assert!(
        refused.ok().contains(&format!(
            "{NOT_SAVED}cannot save bash's state in {} (Read-only file system (os error 30)); the folder is on a read-only file system: make it writable."
        , folder.display())),
        "{}",
        refused.0
    );
    assert!(
        refused
            .screen("session-state")
            .contains("Read-only file system"),
        "{}",
        refused.0
    );
    let second = host.command("bash", "true");
    assert!(!second.ok().contains("Session state"), "{}", second.0);
    assert!(second.screen("session-state").contains("Read-only"));
    disk.remount("rw");
    let again = host.command("bash", "true");
    assert!(again.output().contains(SAVED_AGAIN), "{}", again.0);
    let kept = fs::read_to_string(session_file(&project, "bash")).unwrap();
    assert!(kept.contains("read-only-marker"), "{kept}");
    assert!(host.finish().0.success());
    drop(disk);
}
