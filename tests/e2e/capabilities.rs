//! Plugin capabilities through the real binary: what `env/envhost.toml`
//! grants (directories, variables, programs, memory, time) and nothing
//! more, every escape attempt refused with a clear message, pins, config
//! errors with file, line and key, requests next to grants on the screen
//! and in `envhost check`, interactive programs (timeouts that interrupt,
//! processes that end with the plugin), and plugins built for the first
//! 0.1.0 world still loading.
//!
//! The misbehaving plugin is the `rogue` fixture; the interactive programs
//! are `sh` (everywhere) and, for the sqlite and gdb plugins, `sqlite3`,
//! `gdb` and a C compiler. Those tests fail when the program is missing
//! (`.ci/run` installs them), unless `ENVHOST_SKIP_MISSING_PROGRAMS=1` says
//! to skip them, which they then report.

use std::time::Duration;

use crate::harness::{Host, Project, process_alive, wait_until_dead};
use crate::plugins::{check, check_with_grants, events, host_builder, install, start, transcript};

/// The rogue fixture's project: `data/` and `ro/` inside the project, a
/// secret outside every grant, and symlinks in `data/` that lead out.
fn rogue_project(config: &str) -> Project {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    project.write("data/inside.txt", "granted text\n");
    project.write("ro/notes.txt", "read-only text\n");
    project.write("secret.txt", "the password is swordfish\n");
    std::os::unix::fs::symlink("/etc", project.path().join("data/etc")).expect("symlink");
    std::os::unix::fs::symlink("../secret.txt", project.path().join("data/secret"))
        .expect("symlink");
    project.write("env/envhost.toml", config);
    project
}

const ROGUE_GRANTS: &str = r#"
[plugins.rogue]
read-write = ["data"]
read-only = ["ro"]
variables = ["ROGUE_VISIBLE", "PS1"]
programs = ["sh"]
"#;

fn rogue_host(project: &Project) -> Host {
    host_builder(project)
        .env("ROGUE_VISIBLE", "plain")
        .env("ROGUE_HIDDEN", "not granted")
        .env("ROGUE_TEST_TOKEN", "hunter2")
        .env("PS1", "rogue$ ")
        .start(project.path())
}

#[test]
fn a_plugin_reaches_its_granted_directories_and_nothing_else() {
    let project = rogue_project(ROGUE_GRANTS);
    let mut host = rogue_host(&project);

    // Granted: at / + the path, or relative to /.
    assert_eq!(
        host.command("rogue", "read /data/inside.txt").ok(),
        "read 13 bytes: granted text\n"
    );
    assert_eq!(
        host.command("rogue", "read data/inside.txt").ok(),
        "read 13 bytes: granted text\n"
    );
    assert_eq!(
        host.command("rogue", "read /ro/notes.txt").ok(),
        "read 15 bytes: read-only text\n"
    );

    // Outside the grant: `..`, absolute paths, symlinks leading out.
    let secret = project.path().join("secret.txt");
    for path in [
        "/data/../secret.txt",
        "data/../secret.txt",
        "../secret.txt",
        "/secret.txt",
        secret.to_str().expect("utf-8"),
        "/etc/passwd",
        "/data/etc/passwd",
        "/data/secret",
    ] {
        let reply = host.command("rogue", &format!("read {path}"));
        let output = reply.failed();
        assert!(
            output.starts_with(&format!("cannot read {path}: ")),
            "{path}: {output}"
        );
        assert!(
            output.contains("Operation not permitted") || output.contains("No such file"),
            "{path}: {output}"
        );
        assert!(
            !output.contains("swordfish") && !output.contains("root:"),
            "{output}"
        );
    }
    assert!(
        host.command("rogue", "list /")
            .failed()
            .starts_with("cannot list /: ")
    );

    // Writing: the read-write grant works, the read-only one does not.
    assert_eq!(
        host.command("rogue", "write /data/loot.txt gold").ok(),
        "wrote 4 bytes to /data/loot.txt"
    );
    assert_eq!(project.read("data/loot.txt"), "gold");
    for path in ["/ro/notes.txt", "/ro/new.txt"] {
        let output = host
            .command("rogue", &format!("write {path} overwritten"))
            .failed()
            .to_owned();
        assert!(
            output.starts_with(&format!("cannot write {path}: Operation not permitted")),
            "{output}"
        );
    }
    assert_eq!(project.read("ro/notes.txt"), "read-only text\n");
    assert!(!project.path().join("ro/new.txt").exists());
    let escape = host.command("rogue", "write /data/secret stolen");
    assert!(escape.failed().starts_with("cannot write /data/secret: "));
    assert_eq!(project.read("secret.txt"), "the password is swordfish\n");

    // None of it trapped: the plugin kept its state.
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    assert!(host.finish().0.success());
}

#[test]
fn variables_and_programs_are_only_those_granted() {
    let project = rogue_project(ROGUE_GRANTS);
    let mut host = rogue_host(&project);

    assert_eq!(
        host.command("rogue", "env").ok(),
        "2 variables: ROGUE_VISIBLE=plain PS1=rogue$ "
    );
    for hidden in ["ROGUE_HIDDEN", "ROGUE_TEST_TOKEN", "HOME", "PATH"] {
        assert_eq!(
            host.command("rogue", &format!("env {hidden}")).failed(),
            format!("cannot read {hidden}: environment variable not found")
        );
    }

    // A program not granted, by name or by path: refused at the call,
    // naming what is granted and where.
    for program in ["bash", "/bin/bash", "cat"] {
        let output = host
            .command("rogue", &format!("pty {program}"))
            .failed()
            .to_owned();
        assert_eq!(
            output,
            format!(
                "the program `{program}` is not granted to this plugin; it may run only `sh`. The operator grants programs in `programs` of [plugins.rogue] in env/envhost.toml (line 2)"
            )
        );
    }
    // WASI itself still has no processes.
    assert!(
        host.command("rogue", "spawn /bin/sh")
            .failed()
            .starts_with("cannot run /bin/sh: ")
    );

    // The granted program runs in the project with the small environment
    // plus the granted variables.
    let started = host.command("rogue", "pty sh -i");
    assert!(started.ok().ends_with("[prompt \"$ \"]"), "{}", started.0);
    let seen = host.command(
        "rogue",
        "pty-run echo \"[$ROGUE_VISIBLE|$ROGUE_HIDDEN|$ROGUE_TEST_TOKEN|$TERM]\"; pwd",
    );
    let canonical = project.canonical();
    assert_eq!(
        seen.ok(),
        format!(
            "[plain|||dumb]\n{}\nrogue[prompt \"$ \"]",
            canonical.display()
        )
    );
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");
    assert!(host.finish().0.success());
}

/// Processes below `pid` whose command name is `name`.
pub(crate) fn descendants_named(pid: u32, name: &str) -> Vec<i32> {
    let mut table = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let Some(open) = stat.find('(') else { continue };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let parent: i32 = fields.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
        if fields.first() != Some(&"Z") {
            table.push((child, parent, comm));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid as i32];
    while let Some(parent) = frontier.pop() {
        for (child, _, comm) in table.iter().filter(|(_, p, _)| *p == parent) {
            frontier.push(*child);
            if comm == name {
                found.push(*child);
            }
        }
    }
    found
}

/// Waits (up to a hang guard) until a process named `name` runs below `pid`.
pub(crate) fn wait_for_descendant(pid: u32, name: &str) -> i32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = descendants_named(pid, name).first() {
            return *found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {name} below the host"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_sh(host: &mut Host) -> i32 {
    assert!(
        host.command("rogue", "pty sh -i")
            .ok()
            .ends_with("[prompt \"$ \"]")
    );
    let shells = descendants_named(host.pid(), "sh");
    assert_eq!(shells.len(), 1, "one sh below the host: {shells:?}");
    shells[0]
}

#[test]
fn programs_end_when_dropped_restarted_or_when_the_host_exits() {
    let project = rogue_project(ROGUE_GRANTS);
    let mut host = rogue_host(&project);

    // Dropped by the plugin.
    let sh = start_sh(&mut host);
    assert_eq!(host.command("rogue", "pty-drop").ok(), "dropped");
    assert!(
        wait_until_dead(sh, Duration::from_secs(10)),
        "sh {sh} survived its session"
    );

    // The plugin traps and is restarted: its programs go with it, children
    // of the program included.
    let sh = start_sh(&mut host);
    host.command("rogue", "pty-send sleep 1000 &").ok();
    let sleeper = wait_for_descendant(host.pid(), "sleep");
    let reply = host.command("rogue", "panic on purpose");
    assert!(
        reply
            .failed()
            .contains("Its state was lost: the host restarted the plugin"),
        "{}",
        reply.0
    );
    assert!(
        wait_until_dead(sh, Duration::from_secs(10)),
        "sh {sh} survived the restart"
    );
    assert!(
        wait_until_dead(sleeper, Duration::from_secs(10)),
        "its background job survived the restart"
    );
    assert_eq!(
        host.command("rogue", "pty-run echo hi").failed(),
        "no program; use pty first"
    );

    // The host exits.
    let sh = start_sh(&mut host);
    let (status, _) = host.finish();
    assert!(status.success());
    assert!(!process_alive(sh), "sh {sh} outlived the host");
}

#[test]
fn a_wait_past_the_command_timeout_interrupts_the_program_and_keeps_the_plugin() {
    let project = rogue_project(ROGUE_GRANTS);
    let mut host = rogue_host(&project);
    start_sh(&mut host);
    assert_eq!(host.command("rogue", "count").ok(), "count = 1");

    let reply = host.command_with_timeout("rogue", "pty-run sleep 60; echo never", 1_000);
    let output = reply.ok();
    assert!(
        output.ends_with(
            "[timed out: no prompt within the command's time limit: interrupted with SIGINT; sh is back at its prompt]"
        ),
        "{output}"
    );
    assert!(
        !output.contains("never"),
        "the rest of the line was abandoned: {output}"
    );
    // The plugin and the program both kept their state.
    assert_eq!(host.command("rogue", "count").ok(), "count = 2");
    assert_eq!(
        host.command("rogue", "pty-run echo alive").ok(),
        "alive\nrogue[prompt \"$ \"]"
    );

    // A shorter limit of the plugin's own only stops its wait: the program
    // runs on, and a later wait gets the rest.
    assert_eq!(
        host.command("rogue", "pty-send sleep 1; echo done").ok(),
        "sent"
    );
    assert_eq!(
        host.command("rogue", "pty-expect [$#>] $ 100").ok(),
        "[timed out: no prompt within the wait's limit of 100 ms: sh is still running (wait again, or interrupt it)]"
    );
    assert_eq!(
        host.command("rogue", "pty-expect [$#>] $").ok(),
        "done\nrogue[prompt \"$ \"]"
    );
    assert!(host.finish().0.success());
    let record = transcript(&project);
    assert_eq!(events(&record, "command_timed_out").len(), 1);
    assert!(events(&record, "plugin_trapped").is_empty());
}

#[test]
fn a_signal_to_the_host_interrupts_the_program_like_ctrl_c() {
    let project = rogue_project(ROGUE_GRANTS);
    let mut host = rogue_host(&project);
    let sh = start_sh(&mut host);
    host.send(&serde_json::json!({
        "type": "command", "environment": "rogue", "command": "pty-run sleep 60", "timeout_ms": 600_000
    }));
    // Signal once the program runs the job (the plugin is then waiting).
    wait_for_descendant(host.pid(), "sleep");
    host.signal("TERM");
    let reply = crate::harness::Reply(host.recv());
    let output = reply.ok();
    assert!(
        output.ends_with(
            "[interrupted: the host was interrupted (Ctrl-C or a signal): interrupted with SIGINT; sh is back at its prompt]"
        ),
        "the plugin answered, it did not trap: {output}"
    );
    let status = host.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(!process_alive(sh), "sh {sh} outlived the host");
}

#[test]
fn memory_and_time_limits_come_from_the_grants() {
    let project = rogue_project("[plugins.rogue]\nmemory = \"32MiB\"\ntime-limit = \"1s\"\n");
    let mut host = rogue_host(&project);
    let memory = host.command("rogue", "alloc 64");
    assert!(
        memory.failed().starts_with(
            "The rogue plugin stopped during this command: it ran out of memory: it tried to grow its memory to"
        ) && memory.failed().contains("over its limit of 32 MiB"),
        "{}",
        memory.0
    );
    let looped = host.command_with_timeout("rogue", "loop", 60_000);
    let output = looped.failed();
    assert!(
        output.starts_with(
            "The rogue plugin stopped during this command: it ran past its time limit of 1 s"
        ),
        "{output}"
    );
    assert!(
        output.contains("(The operator limits this plugin's commands to 1 s in [plugins.rogue] in env/envhost.toml (line 1); a longer timeout_ms does not raise that.)"),
        "{output}"
    );
    assert!(host.finish().0.success());
}

#[test]
fn requests_and_grants_are_shown_on_screen_and_in_check() {
    // rogue asks for data/ read-write, ROGUE_VISIBLE and sh; it gets data/
    // read-only and a variable it did not ask for.
    let project =
        rogue_project("[plugins.rogue]\nread-only = [\"data\"]\nvariables = [\"LANG\"]\n");
    let mut host = rogue_host(&project);
    let screen = host.screen();
    let section = screen.screen("rogue");
    assert!(
        section.starts_with(
            "Count: 0\n\nGranted by the operator: read data/; see the variable LANG\nAsked for but not granted (those calls fail): read and write data/; see the variable ROGUE_VISIBLE; run sh\n\nCommands:\n"
        ),
        "{section}"
    );
    // A plugin with no grants and no requests shows nothing of the kind.
    assert!(host.finish().0.success());

    let (ok, text) = check_with_grants(
        &[project.path().join("env/rogue.wasm")],
        &project,
        Some(&project.path().join("env/envhost.toml")),
    );
    assert!(ok, "{text}");
    for fragment in [
        "  powers:      grants from [plugins.rogue] in ",
        "    requested, NOT granted   read and write data/ - \"to keep its loot\"\n",
        "    requested, NOT granted   see the variable ROGUE_VISIBLE - \"to see it\"\n",
        "    requested, NOT granted   run sh - \"to run anything at all\"\n",
        "    granted (not requested)  see the variable LANG\n",
        "    granted (not requested)  read data/\n",
        "  sandbox:     memory up to 256 MiB; no sockets; HTTP, files, variables and programs only as granted above\n",
    ] {
        assert!(text.contains(fragment), "lacks {fragment:?}:\n{text}");
    }
}

#[test]
fn a_pin_mismatch_refuses_the_plugin_showing_both_hashes() {
    let project = Project::new();
    install(&project, &[("timer", "timer"), ("rogue", "rogue")]);
    let wrong = "0".repeat(64);
    let (_, text) = check(&[project.path().join("env/timer.wasm")], &project);
    let actual = text
        .split("(sha256 ")
        .nth(1)
        .and_then(|rest| rest.get(..64))
        .expect("check prints the sha256")
        .to_owned();
    project.write(
        "env/envhost.toml",
        format!(
            "[plugins.rogue]\nsha256 = \"{wrong}\"\n\n[plugins.timer]\nsha256 = \"{}\"\n",
            actual.to_uppercase()
        ),
    );
    let mut host = start(&project, &[]);
    let screen = host.screen();
    let refused = screen.screen("refused-plugins");
    assert!(
        refused.contains("plugin `rogue` (env/rogue.wasm) was refused: its content does not match the pin in env/envhost.toml: the file's sha256 is "),
        "{refused}"
    );
    assert!(
        refused.contains(&format!(
            "the pin (line 2, [plugins.rogue] sha256) is {wrong}"
        )),
        "{refused}"
    );
    assert!(!screen.section_names().contains(&"rogue".to_owned()));
    // The matching pin (written in capitals) loads.
    assert_eq!(host.command("timer", "start").ok(), "Timer started");
    let (status, stderr) = host.finish();
    assert!(status.success());
    assert!(
        stderr.contains("its content does not match the pin"),
        "{stderr}"
    );

    let (ok, text) = check_with_grants(
        &[project.path().join("env/rogue.wasm")],
        &project,
        Some(&project.path().join("env/envhost.toml")),
    );
    assert!(!ok);
    assert!(
        text.contains("its content does not match the pin"),
        "{text}"
    );
    let (ok, text) = check_with_grants(
        &[project.path().join("env/timer.wasm")],
        &project,
        Some(&project.path().join("env/envhost.toml")),
    );
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!("  pin:         sha256 {actual} (line 5 of ")),
        "{text}"
    );
}

#[test]
fn config_errors_name_file_line_and_key_and_refuse_the_plugins_they_concern() {
    let project = Project::new();
    install(&project, &[("timer", "timer"), ("rogue", "rogue")]);
    project.write(
        "env/envhost.toml",
        "[plugins.rogue]\nprograms = [\"sh\"]\nreed-only = [\"data\"]\n\n[plugins.timer]\nmemory = \"64MiB\"\n\n[plugins.tmer]\n",
    );
    let mut host = start(&project, &[]);
    let screen = host.screen();
    let refused = screen.screen("refused-plugins");
    assert!(
        refused.contains(
            "plugin `rogue` (env/rogue.wasm) was refused: its entry in the plugin configuration is invalid: env/envhost.toml:3:1: [plugins.rogue] `reed-only`: unknown field `reed-only`; the keys of a plugin's entry are read-only, read-write, variables, programs, memory, time-limit, allowed-hosts, sha256, verify"
        ),
        "{refused}"
    );
    let notice = screen.screen("plugin-config");
    assert!(
        notice.contains("warning: env/envhost.toml:8: [plugins.tmer] grants powers to `tmer`, but there is no tmer.wasm among the plugins; is the name misspelled?"),
        "{notice}"
    );
    // The entry that is fine still applies.
    assert_eq!(host.command("timer", "start").ok(), "Timer started");
    let (status, stderr) = host.finish();
    assert!(status.success());
    assert!(
        stderr.contains("env/envhost.toml:3:1: [plugins.rogue] `reed-only`"),
        "{stderr}"
    );
    assert!(stderr.contains("[plugins.tmer] grants powers"), "{stderr}");

    // `envhost check` says the same.
    let (ok, text) = check_with_grants(
        &[project.path().join("env/rogue.wasm")],
        &project,
        Some(&project.path().join("env/envhost.toml")),
    );
    assert!(!ok);
    assert!(
        text.contains("`reed-only`: unknown field `reed-only`"),
        "{text}"
    );

    // A file that is not TOML concerns every plugin: none loads (a pin in
    // it cannot be trusted); the built-in environments still do.
    project.write("env/envhost.toml", "[plugins.timer]\nmemory = \"64MiB\n");
    let mut host = start(&project, &[]);
    let screen = host.screen();
    let refused = screen.screen("refused-plugins");
    for plugin in ["rogue", "timer"] {
        assert!(
            refused.contains(&format!(
                "plugin `{plugin}` (env/{plugin}.wasm) was refused: the plugin configuration cannot be used, so no plugin loads until it is fixed: env/envhost.toml:2:"
            )),
            "{refused}"
        );
    }
    assert!(refused.contains("this is not valid TOML"), "{refused}");
    assert!(screen.section_names().contains(&"editor".to_owned()));
    assert!(host.finish().0.success());
}

#[test]
fn a_plugin_built_for_the_first_world_still_loads() {
    let project = Project::new();
    install(&project, &[("echo", "first_world")]);
    project.write(
        "env/envhost.toml",
        "[plugins.echo]\nvariables = [\"LANG\"]\n",
    );
    let mut host = start(&project, &[]);
    let reply = host.command("echo", "hello");
    assert_eq!(reply.ok(), "echo: hello");
    assert_eq!(
        reply.screen("echo"),
        "Echo (first world)\n\nGranted by the operator: see the variable LANG"
    );
    assert!(host.finish().0.success());
    let (ok, text) = check(&[project.path().join("env/echo.wasm")], &project);
    assert!(ok, "{text}");
    assert!(!text.contains("envhost:environment/interactive"), "{text}");
}

fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Whether to skip `test` because `program` is missing. A missing program
/// fails the test (a test that passes without running proves nothing)
/// unless `ENVHOST_SKIP_MISSING_PROGRAMS=1` asks to skip it, which is then
/// said on stderr.
pub(crate) fn skip(test: &str, program: &str) -> bool {
    if have(program) {
        return false;
    }
    let opted_out = std::env::var_os("ENVHOST_SKIP_MISSING_PROGRAMS").is_some_and(|v| v == "1");
    assert!(
        opted_out,
        "{test} needs `{program}`, which is not installed: install it (apt-get install {package}; .ci/run does), \
         or set ENVHOST_SKIP_MISSING_PROGRAMS=1 to skip the tests that need it",
        package = debian_package(program)
    );
    eprintln!(
        "SKIPPED {test}: `{program}` is not installed and ENVHOST_SKIP_MISSING_PROGRAMS=1 (apt-get install {})",
        debian_package(program)
    );
    true
}

/// The Debian package that provides `program`.
fn debian_package(program: &str) -> &str {
    match program {
        "cc" => "gcc",
        other => other,
    }
}

#[test]
fn the_sqlite_plugin_runs_sqlite3_as_an_interactive_environment() {
    if skip(
        "the_sqlite_plugin_runs_sqlite3_as_an_interactive_environment",
        "sqlite3",
    ) {
        return;
    }
    let project = Project::new();
    install(&project, &[("sqlite", "sqlite")]);
    let mut host = start(&project, &[]);
    // Without a grant: refused at the first command, saying how to grant.
    let refused = host.command("sqlite", "select 1;");
    assert!(
        refused.failed().starts_with(
            "the program `sqlite3` is not granted to this plugin; it may run no programs. The operator grants programs in `programs` of [plugins.sqlite] in env/envhost.toml"
        ),
        "{}",
        refused.0
    );
    assert!(
        refused
            .screen("sqlite")
            .contains("Asked for but not granted (those calls fail): run sqlite3"),
        "{}",
        refused.0
    );
    assert!(host.finish().0.success());

    project.write(
        "env/envhost.toml",
        "[plugins.sqlite]\nprograms = [\"sqlite3\"]\n",
    );
    let mut host = start(&project, &[]);
    assert!(host.screen().screen("sqlite").starts_with(
        "SQLite shell (not started; the first command starts `sqlite3 -interactive`)"
    ));
    let created = host.command(
        "sqlite",
        ".open app.db\ncreate table users(name text);\ninsert into users values ('ada'), ('grace');\nselect name\n  from users\n  order by name;",
    );
    assert_eq!(
        created.ok(),
        "+-------+\n| name  |\n+-------+\n| ada   |\n| grace |\n+-------+\n"
    );
    assert!(
        created
            .screen("sqlite")
            .starts_with("SQLite shell (sqlite3 is running)")
    );
    assert!(
        project.path().join("app.db").is_file(),
        "the database is a project file"
    );

    let error = host.command("sqlite", "selec 1;");
    assert!(
        error
            .failed()
            .starts_with("Parse error: near \"selec\": syntax error"),
        "{}",
        error.0
    );

    // A query past the command's timeout is interrupted; the connection
    // and its state survive.
    let slow = host.command_with_timeout(
        "sqlite",
        "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c;",
        1_000,
    );
    assert_eq!(
        slow.failed(),
        "Runtime error: interrupted (9)\n[timed out: no prompt within the command's time limit: interrupted with SIGINT; sqlite3 is back at its prompt]"
    );
    assert_eq!(
        host.command("sqlite", "select count(*) as n from users;")
            .ok(),
        "+---+\n| n |\n+---+\n| 2 |\n+---+\n"
    );
    // sqlite3 exits with status 1 after a session with errors: the exit is
    // reported as it is.
    let quit = host.command("sqlite", ".quit");
    assert_eq!(
        quit.failed(),
        "[sqlite3 exited with status 1; the next command starts it again]"
    );
    assert!(quit.screen("sqlite").starts_with(
        "SQLite shell (sqlite3 exited with status 1; the next command starts it again)"
    ));
    // A fresh sqlite3: the in-memory default again, the file still there.
    assert_eq!(
        host.command("sqlite", ".open app.db\nselect count(*) as n from users;")
            .ok(),
        "+---+\n| n |\n+---+\n| 2 |\n+---+\n"
    );
    assert!(host.finish().0.success());
}

#[test]
fn the_gdb_plugin_debugs_a_program() {
    if skip("the_gdb_plugin_debugs_a_program", "gdb")
        || skip("the_gdb_plugin_debugs_a_program", "cc")
    {
        return;
    }
    let project = Project::new();
    install(&project, &[("gdb", "gdb")]);
    project.write("env/envhost.toml", "[plugins.gdb]\nprograms = [\"gdb\"]\n");
    project.write(
        "square.c",
        "#include <stdio.h>\nint square(int x) { return x * x; }\nint main(void) { printf(\"%d\\n\", square(7)); return 0; }\n",
    );
    let compiled = std::process::Command::new("cc")
        .args(["-g", "-O0", "-o", "square", "square.c"])
        .current_dir(project.path())
        .status()
        .expect("run cc");
    assert!(compiled.success());
    let mut host = start(&project, &[]);

    let stopped = host.command("gdb", "file ./square\nbreak square\nrun");
    let output = stopped.ok();
    assert!(
        output.starts_with("Reading symbols from ./square...\nBreakpoint 1 at "),
        "{output}"
    );
    assert!(
        output.contains("Breakpoint 1, square (x=7) at square.c:2"),
        "{output}"
    );
    assert!(
        stopped
            .screen("gdb")
            .starts_with("GDB debugger (gdb is running)")
    );
    let backtrace = host.command("gdb", "backtrace");
    assert!(
        backtrace
            .ok()
            .starts_with("#0  square (x=7) at square.c:2\n#1  "),
        "{}",
        backtrace.0
    );
    let finished = host.command("gdb", "finish\ncontinue");
    let output = finished.ok();
    assert!(output.contains("Value returned is $1 = 49"), "{output}");
    assert!(output.contains("49\n[Inferior 1 (process "), "{output}");
    assert!(output.contains(") exited normally]"), "{output}");
    assert!(host.finish().0.success());
}

#[test]
fn check_grants_only_what_the_grants_file_it_is_given_grants() {
    let project = Project::new();
    install(&project, &[("rogue", "rogue")]);
    let plugin = project.path().join("env/rogue.wasm");
    let (ok, text) = check(std::slice::from_ref(&plugin), &project);
    assert!(ok, "{text}");
    assert!(
        text.contains("  powers:      nothing is granted: no grants file was given (--grants FILE applies one)"),
        "{text}"
    );

    // A grants file next to the plugin (a downloaded bundle's own) is not
    // applied, and the report says so.
    project.write("env/envhost.toml", "[plugins.rogue]\nprograms = [\"sh\"]\n");
    let (ok, text) = check(std::slice::from_ref(&plugin), &project);
    assert!(ok, "{text}");
    assert!(
        text.contains("    requested, NOT granted   run sh"),
        "{text}"
    );
    assert!(
        text.contains("envhost.toml was not applied: `envhost check` grants nothing unless told which grants file to apply; to check the plugin with those grants, pass --grants "),
        "{text}"
    );

    // The grants file given is applied, wherever it is.
    let elsewhere = project.write(
        "operator/grants.toml",
        "[plugins.rogue]\nprograms = [\"sh\"]\n",
    );
    let (ok, text) = check_with_grants(std::slice::from_ref(&plugin), &project, Some(&elsewhere));
    assert!(ok, "{text}");
    assert!(
        text.contains("    requested, granted       run sh (/"),
        "{text}"
    );
    // So is a missing one, as nothing.
    let (ok, text) = check_with_grants(
        std::slice::from_ref(&plugin),
        &project,
        Some(&project.path().join("operator/absent.toml")),
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("absent.toml found: nothing is granted"),
        "{text}"
    );
}
