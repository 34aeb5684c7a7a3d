//! Versions of the contract through the real binary: a plugin built
//! against the frozen `envhost:environment@0.1.0` (a committed build of the
//! timer, `tests/fixtures/plugins/v0.1.0/timer.wasm`) loads and works beside
//! the same plugin built against 0.2.1 today, and one built against the
//! frozen 0.2.0 loads too, each told apart by the `environment` interface
//! it exports; the optional exports are detected, never required; a plugin
//! that says its screen changes only when called (0.2.1) is drawn only
//! then; an agent's interrupt ends a 0.2.x plugin's wait as `interrupted`,
//! a 0.1.0 plugin's as `timed-out`, as it always did.

use std::path::PathBuf;

use serde_json::json;

use crate::capabilities::{skip, wait_for_descendant};
use crate::harness::{Host, Project, Reply, workspace};
use crate::plugins::{TIMER_BEFORE_ANY_COMMAND, check, guest, host_builder, install, start};

/// The timer as built against 0.1.0, never rebuilt (see the README beside
/// it).
fn timer_v0_1_0() -> PathBuf {
    workspace().join("tests/fixtures/plugins/v0.1.0/timer.wasm")
}

#[test]
fn a_timer_built_against_0_1_0_loads_and_works_beside_one_built_today() {
    let project = Project::new();
    let old = std::fs::read(timer_v0_1_0()).expect("the committed 0.1.0 timer");
    project.write("env/old_timer.wasm", old);
    install(&project, &[("timer", "timer")]);
    let mut host = start(&project, &[]);

    let screen = host.screen();
    assert_eq!(
        screen.0["screen"]["timer"]["content"],
        TIMER_BEFORE_ANY_COMMAND
    );
    assert_eq!(
        screen.0["screen"]["old_timer"]["content"],
        TIMER_BEFORE_ANY_COMMAND.replace("```timer", "```old_timer"),
        "the 0.1.0 build's section is today's build's"
    );
    for timer in ["old_timer", "timer"] {
        assert_eq!(host.command(timer, "start").ok(), "Timer started");
        let again = host.command(timer, "start");
        assert!(
            again.failed().starts_with("Timer already running"),
            "{}",
            again.0
        );
        let stopped = host.command(timer, "stop");
        assert!(stopped.ok().starts_with("Elapsed: "), "{}", stopped.0);
        assert!(stopped.screen(timer).starts_with("Timer: Stopped ("));
        assert_eq!(host.command(timer, "reset").ok(), "Timer reset");
    }
    assert!(host.finish().0.success());

    let (ok, text) = check(&[project.path().join("env/old_timer.wasm")], &project);
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "contract:    envhost:environment@0.1.0 (world `envhost:environment/plugin-with-capabilities@0.1.0`)\n"
        ),
        "{text}"
    );
    let (ok, text) = check(&[guest("timer")], &project);
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "contract:    envhost:environment@0.2.1 (world `envhost:environment/full-plugin@0.2.1`); its state is kept across traps and restarts\n"
        ),
        "{text}"
    );
}

#[test]
fn a_0_2_0_plugin_without_optional_exports_loads() {
    let project = Project::new();
    install(&project, &[("bare", "bare_v0_2_0")]);
    let mut host = start(&project, &[]);
    let reply = host.command("bare", "hello");
    assert_eq!(reply.ok(), "bare: hello");
    assert_eq!(reply.screen("bare"), "Bare (0.2.0)");
    assert!(host.finish().0.success());
    let (ok, text) = check(&[project.path().join("env/bare.wasm")], &project);
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "contract:    envhost:environment@0.2.0 (world `envhost:environment/plugin@0.2.0`)\n"
        ),
        "{text}"
    );
}

/// How often a `drawn_*` fixture's screen was drawn, from its section.
fn draws(reply: &Reply, environment: &str) -> u64 {
    let section = reply.screen(environment);
    section
        .strip_prefix("drawn ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("not a drawn section: {section:?}"))
}

/// 0.2.1's `screen-changes`: a plugin that answers `when-called` is not
/// asked for its screen after commands to other environments (its last
/// section stands), only after calls into it; one that does not answer
/// (the SDK's default, `any-time`) is asked after every command.
#[test]
fn a_plugin_whose_screen_changes_only_when_called_is_drawn_only_then() {
    let project = Project::new();
    install(
        &project,
        &[("lazy", "drawn_when_called"), ("eager", "drawn_any_time")],
    );
    let mut host = start(&project, &[]);
    let before = host.command("bash", "true");
    let (lazy, eager) = (draws(&before, "lazy"), draws(&before, "eager"));
    for _ in 0..3 {
        host.command("bash", "true");
    }
    let after = host.command("bash", "true");
    assert_eq!(
        after.screen("lazy"),
        before.screen("lazy"),
        "nothing called it: its section stands"
    );
    assert_eq!(draws(&after, "eager"), eager + 4, "{}", after.0);

    let called = host.command("lazy", "go");
    assert_eq!(called.ok(), "command 1");
    assert_eq!(
        called.screen("lazy"),
        format!("drawn {} times, 1 commands", lazy + 1),
        "a command to it redraws it"
    );
    let other = host.command("bash", "true");
    assert_eq!(other.screen("lazy"), called.screen("lazy"));
    // The host's one-time note (a snapshot over 16 MiB was dropped) is
    // shown once: the next screen is drawn again without it, then kept.
    let huge = host.command("lazy", "huge");
    let noted = huge.screen("lazy");
    assert!(
        noted.starts_with("[envhost] The plugin's last snapshot was 17 MiB"),
        "{noted}"
    );
    let after_note = host.command("bash", "true");
    assert_eq!(
        after_note.screen("lazy"),
        format!("drawn {} times, 2 commands", lazy + 3)
    );
    assert_eq!(
        host.command("bash", "true").screen("lazy"),
        after_note.screen("lazy")
    );
    // Commands to it that the host answers itself do not call it either:
    // a restart does, and the fresh instance is drawn.
    let restarted = host.request(&json!({"type": "restart", "environment": "lazy"}));
    assert_eq!(
        restarted.screen("lazy"),
        "drawn 1 times, 0 commands",
        "{}",
        restarted.0
    );
    assert!(host.finish().0.success());

    let (ok, text) = check(&[project.path().join("env/lazy.wasm")], &project);
    assert!(ok, "{text}");
    assert!(
        text.contains(
            "contract:    envhost:environment@0.2.1 (world `envhost:environment/full-plugin@0.2.1`); its state is kept across traps and restarts; its screen is redrawn only after its own calls\n"
        ),
        "{text}"
    );
    let (ok, text) = check(&[project.path().join("env/eager.wasm")], &project);
    assert!(ok, "{text}");
    assert!(!text.contains("redrawn only"), "{text}");
}

/// Sends `line` to `environment` as a command that yields (its program
/// runs on), waits until `sleep` runs below the host, then interrupts it
/// as the agent would; the interrupt's reply.
fn interrupt_a_sleep(host: &mut Host, environment: &str, line: &str) -> String {
    let running = host.request(&json!({
        "type": "command", "environment": environment, "command": line, "yield_ms": 200
    }));
    assert!(running.running(), "{}", running.0);
    wait_for_descendant(host.pid(), "sleep");
    let stopped = host.request(&json!({"type": "interrupt", "environment": environment}));
    assert!(!stopped.running(), "{}", stopped.0);
    stopped.output().to_owned()
}

#[test]
fn an_interrupt_ends_a_wait_as_interrupted_for_0_2_0_and_as_timed_out_for_0_1_0() {
    if skip("an_interrupt_ends_a_wait_...", "sh") {
        return;
    }
    let project = Project::new();
    install(
        &project,
        &[("rogue", "rogue"), ("old_shell", "interactive_v0_1_0")],
    );
    project.write(
        "env/envhost.toml",
        "[plugins.rogue]\nprograms = [\"sh\"]\nvariables = [\"PS1\"]\n\n[plugins.old_shell]\nprograms = [\"sh\"]\nvariables = [\"PS1\"]\n",
    );
    let mut host = host_builder(&project)
        .env("PS1", "v1$ ")
        .start(project.path());

    // 0.2.0 (the SDK's rogue fixture): `interrupted`, not `timed-out`.
    let started = host.command("rogue", "pty sh -i");
    assert!(started.ok().ends_with("[prompt \"$ \"]"), "{}", started.0);
    let output = interrupt_a_sleep(&mut host, "rogue", "pty-run sleep 60");
    assert!(
        output.ends_with(
            "[interrupted: interrupted as the agent asked: interrupted with SIGINT; sh is back at its prompt]"
        ),
        "{output}"
    );

    // 0.1.0 has no `interrupted`: its plugins still get `timed-out`.
    assert_eq!(
        host.command("old_shell", "echo ready").ok(),
        "ready\n[prompt]"
    );
    let output = interrupt_a_sleep(&mut host, "old_shell", "sleep 60");
    assert!(
        output.ends_with(
            "[timed-out: interrupted as the agent asked: interrupted with SIGINT; sh is back at its prompt]"
        ),
        "{output}"
    );
    assert_eq!(
        host.command("old_shell", "echo again").ok(),
        "again\n[prompt]"
    );
    assert!(host.finish().0.success());
}
