//! A plugin's state kept by the host through its `state` export (0.2.0),
//! through the real binary: the `counter` fixture (the Rust SDK's
//! `snapshot` / `restore`) keeps its count across a trap and across a host
//! killed with SIGKILL and started again with `--resume`; a snapshot the
//! plugin refuses, one over the host's 16 MiB, and a `snapshot` or
//! `restore` that loops forever (stopped by their time bounds) each leave a
//! working plugin and a response or screen that says what happened. Times
//! are checked only with generous bounds that prove "it did not hang".

use std::time::{Duration, Instant};

use crate::harness::{Host, Project};
use crate::plugins::{host_builder, install};

fn counter_project() -> Project {
    let project = Project::new();
    install(&project, &[("counter", "counter")]);
    project
}

fn started(project: &Project) -> Host {
    host_builder(project).start(project.path())
}

/// Adds 5 and 2: the counter is at 7, its snapshot `7 ` (count, mode).
fn count_to_seven(host: &mut Host) {
    assert_eq!(host.command("counter", "add 5").ok(), "Count is now 5");
    let reply = host.command("counter", "add 2");
    assert_eq!(reply.ok(), "Count is now 7");
    assert!(reply.screen("counter").starts_with("Count: 7"));
}

#[test]
fn a_plugin_keeps_its_state_across_a_trap() {
    let project = counter_project();
    let mut host = started(&project);
    count_to_seven(&mut host);
    let crashed = host.command("counter", "crash");
    let text = crashed.failed();
    assert!(
        text.contains("it panicked: crashing on purpose at count 7"),
        "{text}"
    );
    assert!(
        text.contains(
            "The host restarted the plugin and its state was restored from the snapshot it gave after its last command (2 B); the next command runs in the restored instance."
        ),
        "{text}"
    );
    assert!(crashed.screen("counter").starts_with("Count: 7"));
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 8");
    let record = project.read("transcript.jsonl");
    assert!(
        record.contains("any program it was running (its state came back from its last snapshot)"),
        "the record says what the restart lost: {record}"
    );
    // The agent's own restart is a fresh start: the snapshot goes too.
    host.request(&serde_json::json!({"type": "restart", "environment": "counter"}));
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 1");
    assert!(host.finish().0.success());
}

#[test]
fn a_plugin_keeps_its_state_across_a_host_killed_and_resumed() {
    let project = counter_project();
    let mut host = started(&project);
    count_to_seven(&mut host);
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));

    let mut host = host_builder(&project).arg("--resume").start(project.path());
    let first = host.command("counter", "add 1");
    let output = first.output();
    assert!(output.contains("Session resumed"), "{output}");
    assert!(
        output.contains(
            "- counter: its state was restored from the snapshot it gave after its last command (2 B)."
        ),
        "{output}"
    );
    assert!(output.contains("Count is now 8"), "{output}");
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));

    // Without --resume the session starts fresh.
    let mut host = started(&project);
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 1");
    assert!(host.finish().0.success());
}

#[test]
fn a_snapshot_the_plugin_refuses_leaves_it_fresh_and_says_why() {
    let project = counter_project();
    let mut host = started(&project);
    count_to_seven(&mut host);
    host.command("counter", "mode refuse").ok();
    let crashed = host.command("counter", "crash");
    let text = crashed.failed();
    assert!(
        text.contains(
            "The host restarted the plugin, but restoring its last snapshot failed (the plugin said: this snapshot is refused on purpose), so it starts with empty state; the next command runs in a fresh instance."
        ),
        "{text}"
    );
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 1");
    assert!(host.finish().0.success());

    // The same refusal on --resume: said, and the session goes on fresh.
    let mut host = started(&project);
    count_to_seven(&mut host);
    host.command("counter", "mode refuse").ok();
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));
    let mut host = host_builder(&project).arg("--resume").start(project.path());
    let output = host.command("counter", "add 1").output().to_owned();
    assert!(
        output.contains("- counter: not restored (restoring its last snapshot failed (the plugin said: this snapshot is refused on purpose)"),
        "{output}"
    );
    assert!(output.contains("Count is now 1"), "{output}");
    assert!(host.finish().0.success());
}

#[test]
fn a_snapshot_over_16_mib_is_dropped_and_the_screen_says_so_once() {
    let project = counter_project();
    let mut host = started(&project);
    count_to_seven(&mut host);
    let reply = host.command("counter", "mode huge");
    assert_eq!(reply.ok(), "mode huge");
    let screen = reply.screen("counter");
    assert!(
        screen.starts_with(
            "[envhost] The plugin's last snapshot was 17 MiB, over the 16 MiB the host keeps: it was dropped"
        ),
        "{screen}"
    );
    let again = host.screen();
    assert!(
        !again.screen("counter").contains("[envhost]"),
        "said once: {}",
        again.screen("counter")
    );
    // No snapshot is kept, not even the older one: the state is lost.
    let text = host.command("counter", "crash").failed().to_owned();
    assert!(
        text.contains("Its state was lost: the host restarted the plugin"),
        "{text}"
    );
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 1");
    assert!(host.finish().0.success());
}

/// Attack: a plugin whose `snapshot` or `restore` never returns would hang
/// the host after every command, or at every restart. Each call has its
/// time bound (a screen's for `snapshot`, describing itself's for
/// `restore`); the plugin is replaced and the agent told.
#[test]
fn a_snapshot_or_restore_that_loops_forever_is_stopped_by_its_time_bound() {
    let project = counter_project();
    let mut host = started(&project);
    count_to_seven(&mut host);

    let began = Instant::now();
    let reply = host.command("counter", "mode slow-snapshot");
    assert!(began.elapsed() < Duration::from_secs(30), "it hung");
    let text = reply.ok();
    assert!(text.starts_with("mode slow-snapshot\n"), "{text}");
    assert!(
        text.contains("[envhost] The counter plugin failed while giving its snapshot after this command: it ran past its time limit"),
        "{text}"
    );
    assert!(
        text.contains(
            "its state was restored from the snapshot it gave after its last command (2 B)"
        ),
        "{text}"
    );
    assert!(
        text.contains("This command's changes to its state are lost."),
        "{text}"
    );
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 8");

    host.command("counter", "mode slow-restore").ok();
    let began = Instant::now();
    let crashed = host.command("counter", "crash");
    assert!(began.elapsed() < Duration::from_secs(60), "it hung");
    let text = crashed.failed();
    assert!(
        text.contains("The host restarted the plugin, but restoring its last snapshot failed (it ran past its time limit"),
        "{text}"
    );
    assert!(
        text.contains("so it starts afresh with empty state"),
        "{text}"
    );
    assert_eq!(host.command("counter", "add 1").ok(), "Count is now 1");
    assert!(host.finish().0.success());
}
