//! Commands that outlive the wait, through the real binary: a command
//! with `yield_ms` answered while it runs, then `wait`, `input`,
//! `interrupt` and `restart`; the busy environment refusing a new command
//! while the others serve; the screen showing what runs; shutdown while a
//! command runs. The environments that yield here are interactive plugins
//! (sqlite3 and gdb through their plugins); a plugin's own WebAssembly work
//! never yields.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::capabilities::skip;
use crate::harness::{Host, Project, Reply, process_alive, wait_until_dead};
use crate::plugins::{install, start};

/// A query sqlite3 works on for a while (counting to `n`).
fn counting(n: u64) -> String {
    format!(
        "with recursive c(x) as (select 1 union all select x + 1 from c limit {n}) select count(*) as n from c;"
    )
}

fn sqlite_project() -> Project {
    let project = Project::new();
    install(&project, &[("sqlite", "sqlite")]);
    project.write(
        "env/envhost.toml",
        "[plugins.sqlite]\nprograms = [\"sqlite3\"]\n",
    );
    project
}

fn command(environment: &str, command: &str, yield_ms: u64) -> Value {
    json!({"type": "command", "environment": environment, "command": command, "yield_ms": yield_ms})
}

/// Waits (in `wait` requests of `timeout_ms`) until the command ends; the
/// outputs of every answer, the last one's reply.
fn wait_until_ended(host: &mut Host, environment: &str, timeout_ms: u64) -> (Vec<String>, Reply) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut outputs = Vec::new();
    loop {
        let reply = host.request(
            &json!({"type": "wait", "environment": environment, "timeout_ms": timeout_ms}),
        );
        assert_eq!(reply.kind(), "response", "{}", reply.0);
        outputs.push(reply.output().to_owned());
        if !reply.running() {
            return (outputs, reply);
        }
        assert!(Instant::now() < deadline, "the command never ended");
    }
}

/// The pids of the host's children named `name`.
fn children_named(host: &Host, name: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map_or("", |(_, comm)| comm);
        let parent = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if comm == name && parent == Some(host.pid()) && process_alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_plugin_command_blocked_on_its_program_yields_while_other_environments_serve() {
    if skip(
        "a_plugin_command_blocked_on_its_program_yields_while_other_environments_serve",
        "sqlite3",
    ) {
        return;
    }
    let project = sqlite_project();
    let mut host = start(&project, &[]);
    let quick = host.request(&command("sqlite", "select 1 as one;", 10_000));
    assert_eq!(quick.ok(), "+-----+\n| one |\n+-----+\n| 1   |\n+-----+\n");
    assert!(!quick.running());

    let started = host.request(&command("sqlite", &counting(20_000_000), 200));
    assert!(started.running(), "{}", started.0);
    assert!(started.success());
    let output = started.output();
    assert!(
        output.starts_with("[envhost] The command is still running ("),
        "{output}"
    );
    assert!(output.contains("Go on with wait"), "{output}");
    let section = started.screen("sqlite");
    assert!(
        section.starts_with("Running for ") && section.contains(": `with recursive c(x)"),
        "{section}"
    );
    assert!(
        section.contains("go on with wait, input or interrupt"),
        "{section}"
    );

    // The busy environment refuses a new command, naming what runs and the
    // ways on; the others serve meanwhile.
    let refused = host.request(&command("sqlite", "select 2;", 1_000));
    assert!(!refused.running());
    let refusal = refused.failed();
    assert!(
        refusal.starts_with("sqlite is still running `with recursive c(x)"),
        "{refusal}"
    );
    for way in ["wait", "input", "interrupt", "restart sqlite"] {
        assert!(refusal.contains(way), "{way}: {refusal}");
    }
    let meanwhile = host.command("bash", "echo meanwhile");
    assert_eq!(meanwhile.ok(), "meanwhile\n");
    assert!(meanwhile.screen("sqlite").starts_with("Running for "));

    let (_, ended) = wait_until_ended(&mut host, "sqlite", 60_000);
    assert_eq!(
        ended.ok(),
        "+----------+\n|    n     |\n+----------+\n| 20000000 |\n+----------+\n"
    );
    assert!(!ended.screen("sqlite").starts_with("Running for "));
    let nothing = host.request(&json!({"type": "wait", "environment": "sqlite"}));
    assert!(
        nothing
            .failed()
            .starts_with("Nothing is running in sqlite, so there is nothing to wait for"),
        "{}",
        nothing.0
    );

    // interrupt: the query stops, the connection and its state stay.
    host.request(&command(
        "sqlite",
        "create table t(x); insert into t values (7);",
        1_000,
    ))
    .ok();
    let endless = host.request(&command("sqlite", &counting(10_000_000_000), 200));
    assert!(endless.running(), "{}", endless.0);
    let stopped =
        host.request(&json!({"type": "interrupt", "environment": "sqlite", "id": "stop"}));
    assert_eq!(stopped.0["id"], "stop");
    assert!(!stopped.running());
    assert!(
        stopped.failed().contains(
            "[interrupted: interrupted as the agent asked: interrupted with SIGINT; sqlite3 is back at its prompt]"
        ),
        "{}",
        stopped.0
    );
    assert_eq!(
        host.command("sqlite", "select x from t;").ok(),
        "+---+\n| x |\n+---+\n| 7 |\n+---+\n"
    );

    // restart: the running query and sqlite3 itself end; a fresh one serves.
    let before = children_named(&host, "sqlite3");
    assert_eq!(before.len(), 1, "{before:?}");
    assert!(
        host.request(&command("sqlite", &counting(10_000_000_000), 200))
            .running()
    );
    let restarted = host.request(&json!({"type": "restart", "environment": "sqlite"}));
    assert!(
        restarted
            .ok()
            .starts_with("Started the sqlite plugin afresh. Lost: "),
        "{}",
        restarted.0
    );
    assert!(
        wait_until_dead(before[0], Duration::from_secs(10)),
        "the old sqlite3 lives on"
    );
    assert!(
        host.command("sqlite", "select x from t;")
            .failed()
            .contains("no such table: t")
    );
    assert!(host.finish().0.success());
}

#[test]
fn input_reaches_a_program_under_a_plugin_and_waits_give_every_line_once() {
    if skip(
        "input_reaches_a_program_under_a_plugin_and_waits_give_every_line_once",
        "gdb",
    ) || skip(
        "input_reaches_a_program_under_a_plugin_and_waits_give_every_line_once",
        "cc",
    ) {
        return;
    }
    let project = Project::new();
    install(&project, &[("gdb", "gdb")]);
    project.write("env/envhost.toml", "[plugins.gdb]\nprograms = [\"gdb\"]\n");
    project.write(
        "ask.c",
        "#include <stdio.h>\n#include <unistd.h>\n\
         int main(void) {\n\
           char name[64];\n\
           for (int i = 1; i <= 8; i++) { printf(\"tick %d\\n\", i); fflush(stdout); usleep(150000); }\n\
           printf(\"Name? \"); fflush(stdout);\n\
           if (!fgets(name, sizeof name, stdin)) return 1;\n\
           printf(\"Hello %s\", name);\n\
           return 0;\n\
         }\n",
    );
    let compiled = std::process::Command::new("cc")
        .args(["-g", "-O0", "-o", "ask", "ask.c"])
        .current_dir(project.path())
        .status()
        .expect("run cc");
    assert!(compiled.success());
    let mut host = start(&project, &[]);
    host.command("gdb", "file ./ask").ok();

    let first = host.request(&command("gdb", "run", 100));
    assert!(first.running(), "{}", first.0);
    let mut seen = first
        .output()
        .split("[envhost]")
        .next()
        .unwrap_or_default()
        .to_owned();
    // Piece by piece until the program asks.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut asked = None;
    while asked.is_none() {
        assert!(Instant::now() < deadline, "never asked: {seen:?}");
        let reply = host.request(&json!({"type": "wait", "environment": "gdb", "timeout_ms": 200}));
        assert!(reply.running(), "{}", reply.0);
        seen.push_str(reply.output().split("[envhost]").next().unwrap_or_default());
        if reply
            .screen("gdb")
            .contains("It seems to be waiting for input: answer it with input.")
        {
            asked = Some(reply);
        }
    }
    let asked = asked.unwrap();
    assert!(
        asked.screen("gdb").contains("last line: `Name?`"),
        "{}",
        asked.0
    );
    let answered = host.request(
        &json!({"type": "input", "environment": "gdb", "text": "John\n", "timeout_ms": 10_000}),
    );
    assert!(!answered.running(), "{}", answered.0);
    let rest = answered.ok();
    seen.push_str(rest);
    let ticks: Vec<&str> = seen.lines().filter(|l| l.starts_with("tick ")).collect();
    assert_eq!(
        ticks,
        (1..=8).map(|i| format!("tick {i}")).collect::<Vec<_>>(),
        "every line once, in order: {seen:?}"
    );
    // The answer goes on where the last piece stopped (after "Name? ").
    assert!(seen.contains("tick 8\nName? "), "{seen:?}");
    assert!(rest.starts_with("John\nHello John\n"), "{rest:?}");
    assert!(rest.contains("exited normally]"), "{rest:?}");
    assert!(host.finish().0.success());
}

#[test]
fn a_plugins_own_webassembly_work_never_yields() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    project.write("env/envhost.toml", "[plugins.rogue]\nprograms = [\"sh\"]\n");
    let mut host = start(&project, &[]);
    let started = Instant::now();
    let reply = host.request(&json!({
        "type": "command", "environment": "rogue", "command": "loop", "yield_ms": 50, "timeout_ms": 1_500
    }));
    assert!(!reply.running(), "{}", reply.0);
    assert!(started.elapsed() >= Duration::from_millis(1_400));
    assert!(
        reply.failed().contains("ran past its time limit"),
        "{}",
        reply.0
    );
    // It restarted, and a command that ends at once answers at once.
    let count = host.request(&command("rogue", "count", 50));
    assert!(!count.running());
    assert!(count.ok().contains('1'), "{}", count.0);
    assert!(host.finish().0.success());
}

#[test]
fn stopping_the_host_while_a_plugin_command_runs_ends_it_and_its_program() {
    if skip(
        "stopping_the_host_while_a_plugin_command_runs_ends_it_and_its_program",
        "sqlite3",
    ) {
        return;
    }
    let project = sqlite_project();
    for stop in ["end of input", "SIGTERM"] {
        let mut host = start(&project, &[]);
        assert!(
            host.request(&command("sqlite", &counting(10_000_000_000), 100))
                .running()
        );
        let sqlite = children_named(&host, "sqlite3");
        assert_eq!(sqlite.len(), 1, "{stop}: {sqlite:?}");
        let asked = Instant::now();
        if stop == "SIGTERM" {
            host.signal("TERM");
        } else {
            host.close_stdin();
        }
        let status = host.wait_exit(Duration::from_secs(30));
        assert_eq!(status.code(), Some(0), "{stop}");
        assert!(
            asked.elapsed() < Duration::from_secs(20),
            "{stop}: slow to stop"
        );
        assert!(
            wait_until_dead(sqlite[0], Duration::from_secs(5)),
            "{stop}: sqlite3 outlived the host"
        );
    }
}

#[test]
fn yield_after_makes_every_command_yield_and_lifts_the_default_limit_only() {
    let test = "yield_after_makes_every_command_yield_and_lifts_the_default_limit_only";
    if skip(test, "sqlite3") {
        return;
    }
    let project = sqlite_project();
    let mut host = start(&project, &["--timeout", "1s", "--yield-after", "200ms"]);
    let plain =
        |command: &str| json!({"type": "command", "environment": "sqlite", "command": command});

    // A command that ends in time is an ordinary answer.
    let quick = host.request(&plain("select 1 as one;"));
    assert!(!quick.running(), "{}", quick.0);
    assert!(quick.0["response"].get("running").is_none());
    assert_eq!(quick.ok(), "+-----+\n| one |\n+-----+\n| 1   |\n+-----+\n");

    // Without yield_ms it yields all the same, and the one-second default
    // limit no longer applies: twenty million rows take longer (2 s of CPU
    // here) and still end with their answer.
    let long = host.request(&plain(&counting(20_000_000)));
    assert!(long.running(), "{}", long.0);
    assert!(
        long.output()
            .contains("[envhost] The command is still running ("),
        "{}",
        long.0
    );
    let (_, ended) = wait_until_ended(&mut host, "sqlite", 60_000);
    assert_eq!(
        ended.ok(),
        "+----------+\n|    n     |\n+----------+\n| 20000000 |\n+----------+\n"
    );

    // A command's own timeout_ms still limits it after it yielded.
    let limited = host.request(&json!({
        "type": "command", "environment": "sqlite",
        "command": counting(10_000_000_000), "timeout_ms": 1_500
    }));
    assert!(limited.running(), "{}", limited.0);
    let (_, stopped) = wait_until_ended(&mut host, "sqlite", 60_000);
    assert!(stopped.failed().contains("timed out"), "{}", stopped.0);

    // A command's own yield_ms wins over the host's: this one ends first.
    let patient = host.request(&json!({
        "type": "command", "environment": "sqlite",
        "command": counting(200_000), "yield_ms": 60_000
    }));
    assert!(!patient.running(), "{}", patient.0);
    assert!(patient.ok().contains("| 200000 |"), "{}", patient.0);
    assert!(host.finish().0.success());
}
