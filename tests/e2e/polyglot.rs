//! Plugins written in Python and JavaScript, through the real binary: the
//! `tasks` board (componentize-py) and the `regex` workbench
//! (componentize-js) answer their commands, keep their state, get the
//! progressive help (long until a command is first used), pass `envhost check`, and an exception they do
//! not catch costs neither the host nor the state they keep (their `state`
//! export puts back the board and the workbench); a host restarted with
//! `--resume` gets that state back too.
//!
//! The components are built by `scripts/build-polyglot-plugins` (run here
//! once per test run; it does nothing when they are up to date). They are
//! 12-18 MB each and take Cranelift seconds to compile, so every test shares
//! one compiled-code cache under the target folder, filled once by
//! `envhost check` before the first test uses it: each component is
//! compiled once, not once per test (and not again on the next run unless
//! it changed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Host, HostBuilder, Project, Reply, envhost_binary, target_dir, workspace};

/// The components this module uses, by file stem in target/polyglot/.
const COMPONENTS: [&str; 4] = ["tasks", "regex", "tasks_crash", "regex_crash"];

/// What the shared setup produced: where the components are and the
/// compiled-code cache that already holds them.
pub(crate) struct Built {
    pub(crate) components: PathBuf,
    cache: PathBuf,
}

pub(crate) fn built() -> &'static Built {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let script = workspace().join("scripts/build-polyglot-plugins");
        let output = Command::new(&script)
            .current_dir(workspace())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let components = target_dir().join("polyglot");
        let cache = components.join("e2e-code-cache");
        let files: Vec<PathBuf> = COMPONENTS
            .iter()
            .map(|name| components.join(format!("{name}.wasm")))
            .collect();
        prune_cache(&cache, &files);
        let warmed = Command::new(envhost_binary())
            .arg("check")
            .arg("--plugin-cache")
            .arg(&cache)
            .args(&files)
            .output()
            .map_err(|e| format!("cannot run envhost check: {e}"))?;
        if !warmed.status.success() {
            return Err(format!(
                "envhost check refused a Python or JavaScript plugin:\n{}{}",
                String::from_utf8_lossy(&warmed.stdout),
                String::from_utf8_lossy(&warmed.stderr)
            ));
        }
        Ok(Built { components, cache })
    });
    match built {
        Ok(built) => built,
        Err(why) => panic!(
            "the Python and JavaScript plugins could not be built and checked.\n\
             Run `scripts/build-polyglot-plugins` (it needs python3, node and npm, and the \
             network the first time).\n{why}"
        ),
    }
}

/// Removes cache entries for components that no longer exist, so that
/// rebuilding the plugins does not pile up 35 MB entries.
fn prune_cache(cache: &Path, current: &[PathBuf]) {
    let hashes: Vec<String> = current
        .iter()
        .filter_map(|file| std::fs::read(file).ok())
        .map(|bytes| envhost_plugin::content_sha256(&bytes))
        .collect();
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !hashes.iter().any(|hash| name.starts_with(hash.as_str())) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A project whose `env/` holds the given components under the given
/// environment names.
fn project_with(plugins: &[(&str, &str)]) -> Project {
    let built = built();
    let project = Project::new();
    for (env_name, component) in plugins {
        let bytes = std::fs::read(built.components.join(format!("{component}.wasm")))
            .expect("read a built component");
        project.write(&format!("env/{env_name}.wasm"), bytes);
    }
    project
}

/// A host on `project` using the shared compiled-code cache, with a
/// transcript.
fn start(project: &Project) -> Host {
    builder(project).start(project.path())
}

/// How [`start`] starts a host, for adding arguments.
fn builder(project: &Project) -> HostBuilder {
    Host::builder()
        .arg("--plugin-cache")
        .arg(built().cache.to_str().expect("utf-8 path"))
        .arg("--transcript")
        .arg(
            project
                .path()
                .join("transcript.jsonl")
                .to_str()
                .expect("utf-8 path"),
        )
}

fn transcript(project: &Project) -> Vec<Value> {
    project
        .read("transcript.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("transcript line is JSON"))
        .collect()
}

fn events<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// The `environment_loaded` detail of `name`.
fn load_detail(record: &[Value], name: &str) -> String {
    events(record, "environment_loaded")
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["detail"].as_str())
        .unwrap_or_else(|| panic!("no environment_loaded event for {name}: {record:?}"))
        .to_owned()
}

/// The part of a plugin's section above the host's help.
fn state_of(section: &str) -> &str {
    section.split("\n\nCommands:\n").next().unwrap_or(section)
}

const TASKS_BEFORE_ANY_COMMAND: &str = "\
Tasks: none yet. Plan your work with `add`, one task per line.

Commands:
  add <title>
    Add a task at the end of the board.
    Each further line adds one more task, so a whole plan goes in at once.
    Example:
      ```tasks
      add Reproduce the crash
      Write a failing test
      Fix the parser
      ```

  start <n>
    Mark task n as in progress (this also reopens a blocked or done task).
    Example:
      ```tasks
      start 1
      ```

  done <n> [note]
    Mark task n as done, with an optional note on the outcome.
    Example:
      ```tasks
      done 1 crashes on an empty header, see test_empty_header
      ```

  note <n> <text>
    Attach a note to task n: a finding, a file, a command to remember.
    The newest note shows on the board; lines after the first belong to the note.
    Example:
      ```tasks
      note 3 the bug is in parse_header (src/lexer.rs:88)
      ```

  block <n> <reason>
    Mark task n as blocked and say why; `start <n>` when it can go on.
    Example:
      ```tasks
      block 3 waiting for the staging credentials
      ```

  show <n> - Show task n with all its notes
  edit <n> <title> - Give task n a new title
  drop <n> - Remove task n from the board
  clear - Remove every done task from the board
";

#[test]
fn the_python_tasks_plugin_keeps_a_board_with_progressive_help() {
    let project = project_with(&[("tasks", "tasks")]);
    let mut host = start(&project);

    let first = host.screen();
    assert_eq!(
        first.0["screen"]["tasks"]["content"],
        TASKS_BEFORE_ANY_COMMAND
    );

    let added = host.command(
        "tasks",
        "add Reproduce the crash\nWrite a failing test\n\nFix the parser",
    );
    assert_eq!(
        added.ok(),
        "Added 3 tasks:\n[ ] 1. Reproduce the crash\n[ ] 2. Write a failing test\n[ ] 3. Fix the parser"
    );
    let screen = added.screen("tasks");
    assert_eq!(
        state_of(screen),
        "Tasks: 3 (0 in progress, 3 to do, 0 blocked, 0 done)\n  [ ] 1. Reproduce the crash\n  [ ] 2. Write a failing test\n  [ ] 3. Fix the parser"
    );
    assert!(
        screen.contains(
            "Commands:\n  add <title> - Add a task; each further line adds another\n\n  start <n>\n    Mark task n as in progress"
        ),
        "add collapses to SHORT help, start keeps LONG help:\n{screen}"
    );

    assert_eq!(
        host.command("tasks", "start 1").ok(),
        "Started [>] 1. Reproduce the crash"
    );
    assert_eq!(
        host.command(
            "tasks",
            "note #1 crashes in parse_header\nwhen the header is empty"
        )
        .ok(),
        "Noted on task 1 (1 note)."
    );
    let done = host.command("tasks", "done 1 see test_empty_header");
    assert_eq!(
        done.ok(),
        "Done [x] 1. Reproduce the crash (note: see test_empty_header)\n1 of 3 done."
    );
    let blocked = host.command("tasks", "block 3 waiting for review");
    assert_eq!(
        blocked.ok(),
        "Blocked [!] 3. Fix the parser (blocked: waiting for review)"
    );
    let screen = blocked.screen("tasks");
    assert_eq!(
        state_of(screen),
        "Tasks: 3 (0 in progress, 1 to do, 1 blocked, 1 done)\n  [x] 1. Reproduce the crash (note: see test_empty_header)\n  [ ] 2. Write a failing test\n  [!] 3. Fix the parser (blocked: waiting for review)"
    );
    assert!(
        screen.contains(
            "  add <title> - Add a task; each further line adds another\n  start <n> - Mark task n as in progress (this also reopens a blocked or done task)\n  done <n> [note] - Mark task n as done, with an optional note on the outcome\n  note <n> <text> - Attach a note to task n\n  block <n> <reason> - Mark task n as blocked and say why; `start <n>` when it can go on\n"
        ),
        "every used command is SHORT now:\n{screen}"
    );

    // State is kept across commands: the notes from earlier are all there.
    assert_eq!(
        host.command("tasks", "show 1").ok(),
        "1. Reproduce the crash\nStatus: done\nNotes (2):\n  1. crashes in parse_header\n     when the header is empty\n  2. see test_empty_header"
    );

    // Mistakes are failed responses that change nothing.
    let missing = host.command("tasks", "start 9");
    assert_eq!(
        missing.failed(),
        "There is no task 9. The board has: 1, 2, 3."
    );
    assert_eq!(state_of(missing.screen("tasks")), state_of(screen));
    assert_eq!(
        host.command("tasks", "done two").failed(),
        "done needs a task number (got 'two'), e.g. `done 2`; the board shows each task's number."
    );
    assert_eq!(
        host.command("tasks", "finish 2").failed(),
        "Unknown command: finish\nAvailable: add, start, done, note, block, show, edit, drop, clear\nThe Commands section of the tasks screen shows how to use each one."
    );
    assert_eq!(host.command("tasks", "clear").ok(), "Cleared 1 done task.");

    // The plugin splits a command by the host's rule: a tab after the name
    // routes in both (it used to reach the plugin as "Unknown command").
    assert_eq!(
        host.command("tasks", "show\t2").ok(),
        "2. Write a failing test\nStatus: todo\nNotes: none"
    );

    let (status, _) = host.finish();
    assert!(status.success());
    let detail = load_detail(&transcript(&project), "tasks");
    assert!(detail.contains("9 commands"), "{detail}");
    assert!(
        detail.contains("compiled code from the cache"),
        "the shared cache makes the start fast: {detail}"
    );
}

#[test]
fn the_javascript_regex_plugin_keeps_a_workbench_with_progressive_help() {
    let project = project_with(&[("regex", "regex")]);
    let mut host = start(&project);

    let first = host.screen();
    let section = first.0["screen"]["regex"]["content"]
        .as_str()
        .expect("a regex section");
    assert_eq!(
        state_of(section),
        "Pattern: none yet (`pattern` sets one)\nSamples: none yet (`sample` adds texts to try the pattern on)"
    );
    assert!(
        section.contains(
            "Commands:\n  pattern <regex>\n    Set the pattern, as /source/flags or as a bare source (JavaScript syntax; flags d g i m s u v y).\n"
        ),
        "{section}"
    );
    assert!(
        section.contains(
            "    Example:\n      ```regex\n      sample released 2024-05-01, patched 2024-06-12\n      no date in this one\n      ```\n"
        ),
        "{section}"
    );
    assert!(
        section.ends_with(
            "  escape <text> - Show the text as a pattern that matches it literally\n  drop <n> - Remove sample n\n  clear - Remove every sample (the pattern is kept)\n"
        ),
        "simple commands are always SHORT:\n{section}"
    );

    let set = host.command("regex", r"pattern /(?<year>\d{4})-(\d{2})-(\d{2})/g");
    assert_eq!(
        set.ok(),
        "Pattern set: /(?<year>\\d{4})-(\\d{2})-(\\d{2})/g (3 groups)\nNo samples yet: `sample` adds texts to try it on."
    );
    let screen = set.screen("regex");
    assert!(
        screen.contains(
            "Commands:\n  pattern <regex> - Set the pattern (/source/flags or a bare source)\n\n  sample <text>\n"
        ),
        "pattern collapses to SHORT help, sample keeps LONG help:\n{screen}"
    );

    let sampled = host.command(
        "regex",
        "sample released 2024-05-01, patched 2024-06-12\nno date in this one",
    );
    assert_eq!(sampled.ok(), "Added samples 1-2: 1 of 2 match.");
    assert_eq!(
        state_of(sampled.screen("regex")),
        "Pattern: /(?<year>\\d{4})-(\\d{2})-(\\d{2})/g (3 groups)\n\
         Samples: 1 of 2 match (matches in [[ ]]):\n  \
         1. released [[2024-05-01]], patched [[2024-06-12]]\n       \
         year=\"2024\" $2=\"05\" $3=\"01\" | year=\"2024\" $2=\"06\" $3=\"12\"\n  \
         2. no date in this one   (no match)"
    );

    assert_eq!(
        host.command("regex", "test due 2025-01-31").ok(),
        "1 match for /(?<year>\\d{4})-(\\d{2})-(\\d{2})/g:\n  1. \"2025-01-31\" at 4-14, year=\"2025\" $2=\"01\" $3=\"31\""
    );
    assert_eq!(
        host.command("regex", "replace $3/$2/$<year>").ok(),
        "/(?<year>\\d{4})-(\\d{2})-(\\d{2})/g → \"$3/$2/$<year>\", replacing every match; the samples are unchanged:\n  1. released 01/05/2024, patched 12/06/2024\n  2. no date in this one"
    );

    // A pattern that does not compile is refused and the old one kept.
    let broken = host.command("regex", "pattern /(unclosed/");
    assert_eq!(
        broken.failed(),
        "That pattern does not compile: unterminated parenthetical. The pattern is unchanged."
    );
    assert!(
        broken.screen("regex").starts_with(
            "Pattern: /(?<year>\\d{4})-(\\d{2})-(\\d{2})/g (3 groups)\nSamples: 1 of 2 match"
        ),
        "{}",
        broken.screen("regex")
    );

    // State is kept across commands: a new pattern re-checks the samples.
    let retried = host.command("regex", "pattern one|this|patched");
    assert_eq!(
        retried.ok(),
        "Pattern set: /one|this|patched/ (0 groups)\n2 of 2 samples match."
    );
    assert!(
        retried.screen("regex").contains(
            "  1. released 2024-05-01, [[patched]] 2024-06-12\n  2. no date in [[this]] [[one]]\n"
        ),
        "{}",
        retried.screen("regex")
    );
    assert_eq!(
        host.command("regex", "escape price (USD): $4.99").ok(),
        r"price \(USD\): \$4\.99"
    );
    assert_eq!(
        host.command("regex", "drop 7").failed(),
        "There is no sample 7: the samples are numbered 1-2."
    );

    let (status, _) = host.finish();
    assert!(status.success());
    let detail = load_detail(&transcript(&project), "regex");
    assert!(detail.contains("7 commands"), "{detail}");
    assert!(
        detail.contains("compiled code from the cache"),
        "the shared cache makes the start fast: {detail}"
    );
}

/// The sentence that ends a failed response when the host put the plugin's
/// last snapshot back into a fresh instance (host/plugin/src/environment.rs
/// and kept_state.rs), around the snapshot's size.
const CAME_BACK: [&str; 2] = [
    "The host restarted the plugin and its state was restored from the snapshot it gave after its last command (",
    " B); the next command runs in the restored instance.",
];

/// Runs the fixture's `crash` command in `env` after building up some
/// state, and checks the failure names the exception, shows where it was
/// raised, says the state came back from the last snapshot, and returns
/// the reply (whose screen is the restored instance's).
fn assert_uncaught_exception_survived(
    host: &mut Host,
    env: &str,
    exception: &str,
    raised_at: &str,
) -> Reply {
    let reply = host.command(env, "crash the parser blew up");
    let output = reply.failed().to_owned();
    assert!(
        output.starts_with(&format!(
            "The {env} plugin stopped during this command: it raised an exception it did not catch: {exception}.\n"
        )),
        "{output}"
    );
    assert!(output.contains(raised_at), "the traceback: {output}");
    let last_line = output.lines().last().unwrap_or_default();
    assert!(
        last_line.starts_with(CAME_BACK[0]) && last_line.ends_with(CAME_BACK[1]),
        "the state came back: {output}"
    );
    reply
}

#[test]
fn an_uncaught_python_exception_costs_the_plugin_nothing_it_kept_and_not_the_host() {
    let project = project_with(&[("tasks", "tasks_crash"), ("regex", "regex")]);
    let mut host = start(&project);
    host.command("tasks", "add Keep me\nAnd me\nDrop me").ok();
    host.command("tasks", "drop 3").ok();
    host.command("tasks", "start 1").ok();
    host.command("tasks", "note 2 kept across the crash").ok();
    host.command("regex", "sample still here").ok();
    let board = "Tasks: 2 (1 in progress, 1 to do, 0 blocked, 0 done)\n  [>] 1. Keep me\n  [ ] 2. And me (note: kept across the crash)";

    let crashed = assert_uncaught_exception_survived(
        &mut host,
        "tasks",
        "ValueError: the parser blew up",
        "File \"/1/tasks_crash.py\", line",
    );
    let output = crashed.failed();
    assert!(
        output.contains("Traceback (most recent call last):"),
        "{output}"
    );
    // The board came back in the restored instance, on the crash's own
    // screen and after.
    assert_eq!(state_of(crashed.screen("tasks")), board);
    let screen = host.screen();
    assert_eq!(state_of(screen.screen("tasks")), board);
    assert_eq!(
        host.command("tasks", "show 2").ok(),
        "2. And me\nStatus: todo\nNotes (1):\n  1. kept across the crash"
    );
    // Its numbering too: 3 was dropped before the crash, 4 is next.
    assert_eq!(
        host.command("tasks", "add Go on").ok(),
        "Added [ ] 4. Go on"
    );
    // The other plugin never noticed.
    assert!(
        screen
            .screen("regex")
            .contains("Samples (1):\n  1. still here"),
        "{}",
        screen.screen("regex")
    );

    let (status, _) = host.finish();
    assert!(status.success());
    let record = transcript(&project);
    let trapped: Vec<&str> = events(&record, "plugin_trapped")
        .iter()
        .filter_map(|e| e["cause"].as_str())
        .collect();
    assert_eq!(
        trapped,
        ["uncaught exception: ValueError: the parser blew up"]
    );
    assert_eq!(events(&record, "environment_restarted").len(), 1);
}

#[test]
fn an_uncaught_javascript_exception_costs_the_plugin_nothing_it_kept_and_not_the_host() {
    let project = project_with(&[("regex", "regex_crash"), ("tasks", "tasks")]);
    let mut host = start(&project);
    host.command("regex", "pattern /(?<n>\\d+)/g").ok();
    host.command("regex", "sample order 66 shipped\nno digits")
        .ok();
    host.command("tasks", "add Still here").ok();
    let workbench = "Pattern: /(?<n>\\d+)/g (1 group)\n\
         Samples: 1 of 2 match (matches in [[ ]]):\n  \
         1. order [[66]] shipped\n       \
         n=\"66\"\n  \
         2. no digits   (no match)";

    let crashed = assert_uncaught_exception_survived(
        &mut host,
        "regex",
        "the parser blew up",
        "regex_crash.js:",
    );
    assert!(crashed.failed().contains("Stack:"), "{}", crashed.failed());

    // The workbench came back: the pattern, the samples, their matches.
    assert_eq!(state_of(crashed.screen("regex")), workbench);
    let screen = host.screen();
    assert_eq!(state_of(screen.screen("regex")), workbench);
    assert_eq!(
        host.command("regex", "test 42").ok(),
        "1 match for /(?<n>\\d+)/g:\n  1. \"42\" at 0-2, n=\"42\""
    );
    assert!(
        state_of(screen.screen("tasks")).ends_with("[ ] 1. Still here"),
        "the other plugin never noticed: {}",
        screen.screen("tasks")
    );

    let (status, _) = host.finish();
    assert!(status.success());
    let record = transcript(&project);
    let trapped: Vec<&str> = events(&record, "plugin_trapped")
        .iter()
        .filter_map(|e| e["cause"].as_str())
        .collect();
    assert_eq!(trapped, ["uncaught exception: the parser blew up"]);
}

#[test]
fn the_board_and_the_workbench_survive_a_host_killed_and_resumed() {
    let project = project_with(&[("tasks", "tasks"), ("regex", "regex")]);
    let mut host = start(&project);
    host.command("tasks", "add Plan\nBuild\nShip\nScrap").ok();
    host.command("tasks", "drop 4").ok();
    host.command("tasks", "done 1 planned").ok();
    host.command("tasks", "block 3 waiting for review").ok();
    host.command("regex", "pattern /b(.)/i").ok();
    let last = host.command("regex", "sample aBc\nxyz");
    let board = state_of(last.screen("tasks")).to_owned();
    let workbench = state_of(last.screen("regex")).to_owned();
    assert_eq!(
        board,
        "Tasks: 3 (0 in progress, 1 to do, 1 blocked, 1 done)\n  [x] 1. Plan (note: planned)\n  [ ] 2. Build\n  [!] 3. Ship (blocked: waiting for review)"
    );
    assert!(
        workbench.starts_with("Pattern: /b(.)/i (1 group)\nSamples: 1 of 2 match"),
        "{workbench}"
    );
    host.signal("KILL");
    host.wait_exit(Duration::from_secs(10));

    let mut host = builder(&project).arg("--resume").start(project.path());
    let first = host.command("tasks", "add Celebrate");
    let output = first.output();
    assert!(output.contains("Session resumed"), "{output}");
    for env in ["tasks", "regex"] {
        assert!(
            output.contains(&format!(
                "- {env}: its state was restored from the snapshot it gave after its last command ("
            )),
            "{env}: {output}"
        );
    }
    // The numbering went on where it was: 4 was dropped, 5 is next.
    assert!(output.contains("Added [ ] 5. Celebrate"), "{output}");
    assert_eq!(
        state_of(first.screen("tasks")),
        format!(
            "{}\n  [ ] 5. Celebrate",
            board.replace(
                "Tasks: 3 (0 in progress, 1 to do",
                "Tasks: 4 (0 in progress, 2 to do"
            )
        )
    );
    assert_eq!(state_of(first.screen("regex")), workbench);
    assert_eq!(
        host.command("tasks", "show 1").ok(),
        "1. Plan\nStatus: done\nNotes (1):\n  1. planned"
    );
    assert_eq!(
        host.command("regex", "replace <$1>").ok(),
        "/b(.)/i → \"<$1>\", replacing the first match (add the g flag for all); the samples are unchanged:\n  1. a<c>\n  2. xyz"
    );
    assert!(host.finish().0.success());
}

#[test]
fn envhost_check_describes_both_plugins() {
    let built = built();
    let output = Command::new(envhost_binary())
        .arg("check")
        .arg("--plugin-cache")
        .arg(&built.cache)
        .arg(built.components.join("tasks.wasm"))
        .arg(built.components.join("regex.wasm"))
        .output()
        .expect("run envhost check");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    for fragment in [
        "tasks.wasm: OK, loads as the environment `tasks`",
        "description: A task board to plan work on: add tasks, track progress and notes; the plan stays on screen",
        "style:       declarative: 9 commands",
        "    add <title> - Add a task; each further line adds another",
        "    clear - Remove every done task from the board (simple)",
        // componentize-py's runtime links WASI's sockets; the sandbox denies them.
        "    wasi:sockets/tcp@0.2",
        "regex.wasm: OK, loads as the environment `regex`",
        "description: A regular-expression workbench: a pattern, sample texts, and their matches on screen",
        "style:       declarative: 7 commands",
        "    pattern <regex> - Set the pattern (/source/flags or a bare source)",
        "code:        loaded from the cache (",
        "  | Tasks: none yet. Plan your work with `add`, one task per line.",
        "  | Pattern: none yet (`pattern` sets one)",
    ] {
        assert!(text.contains(fragment), "lacks {fragment:?}:\n{text}");
    }
    // Both are 0.2.1 plugins that keep their state and say their screens
    // change only when they are called.
    let contract = "contract:    envhost:environment@0.2.1 (world `envhost:environment/full-plugin@0.2.1`); its state is kept across traps and restarts; its screen is redrawn only after its own calls\n";
    assert_eq!(text.matches(contract).count(), 2, "{text}");
}
