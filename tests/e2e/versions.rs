//! Versions of the contract through the real binary: a plugin built
//! against the frozen `envhost:environment@0.1.0` (a committed build of the
//! timer, `tests/fixtures/plugins/v0.1.0/timer.wasm`) loads and works beside
//! the same plugin built against 0.2.0 today, each told apart by the
//! `environment` interface it exports; 0.2.0's optional exports are
//! detected, never required.

use std::path::PathBuf;

use crate::harness::{Project, workspace};
use crate::plugins::{TIMER_BEFORE_ANY_COMMAND, check, guest, install, start};

/// The timer as built against 0.1.0, never rebuilt (see the README beside
/// it).
fn timer_v0_1_0() -> PathBuf {
    workspace().join("tests/fixtures/plugins/v0.1.0/timer.wasm")
}

#[test]
fn a_timer_built_against_0_1_0_loads_and_works_beside_one_built_against_0_2_0() {
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
        "the 0.1.0 build's section is the 0.2.0 build's"
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
            "contract:    envhost:environment@0.2.0 (world `envhost:environment/full-plugin@0.2.0`); its state is kept across traps and restarts\n"
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
