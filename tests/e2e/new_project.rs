//! `envhost new` through the real binary: for each language the new
//! project builds with its own `build.sh`, passes `envhost check` with its
//! grants, passes its session file with `envhost test` (its notes land in
//! the granted folder), and keeps its values across a trap and across a
//! host restart with `--resume` (the SDK's state snapshot). A bad name and
//! a folder that is not empty are refused with a sentence.
//!
//! To trap on demand, the test adds one command to the generated sources
//! before building, `crash`, which fails the way a plugin's bug does (an
//! uncaught exception, a panic); the rest is the template as written.
//!
//! The builds reuse the toolchains the repository already installed
//! (`scripts/build-polyglot-plugins`: componentize-py in
//! plugins/tasks/.venv, jco in plugins/regex/node_modules, through the
//! build scripts' ENVHOST_COMPONENTIZE_PY and ENVHOST_JCO) and, for Rust,
//! one CARGO_TARGET_DIR under the target folder, so nothing is downloaded
//! again. Each build's time is printed (`cargo test -- --nocapture`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::harness::{Host, Project, envhost_binary, target_dir, workspace};
use crate::loopback_http::{BODY, Behaviour, Server};

/// The toolchains for Python and JavaScript, installed once per run.
fn toolchains() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        let output = Command::new(workspace().join("scripts/build-polyglot-plugins"))
            .current_dir(workspace())
            .output()
            .map_err(|e| format!("cannot run scripts/build-polyglot-plugins: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    if let Err(why) = ready {
        panic!(
            "the Python and JavaScript toolchains could not be installed (scripts/build-polyglot-plugins):\n{why}"
        );
    }
}

fn scratch() -> PathBuf {
    let dir = target_dir().join("new-project");
    std::fs::create_dir_all(&dir).expect("create target/new-project");
    dir
}

fn envhost(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(envhost_binary())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run envhost")
}

/// The plugin project `envhost new kv --lang LANG` wrote and `build.sh`
/// built, once per test run (in target/new-project/LANG/kv, written
/// afresh): the tests of a language share one build.
fn built(lang: &'static str) -> PathBuf {
    static BUILT: Mutex<Vec<(&'static str, PathBuf)>> = Mutex::new(Vec::new());
    let mut done = BUILT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, project)) = done.iter().find(|(built, _)| *built == lang) {
        return project.clone();
    }
    let folder = scratch().join(lang);
    if folder.exists() {
        std::fs::remove_dir_all(&folder).expect("remove the previous run's project");
    }
    std::fs::create_dir_all(&folder).expect("create the project's parent");
    let project = new_and_build(lang, &folder);
    done.push((lang, project.clone()));
    project
}

/// `envhost new kv --lang LANG` in `parent`, built; the project's folder.
fn new_and_build(lang: &str, parent: &Path) -> PathBuf {
    let made = envhost(&["new", "kv", "--lang", lang, "--dir", "kv"], parent);
    assert!(
        made.status.success(),
        "envhost new failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let stdout = String::from_utf8_lossy(&made.stdout);
    assert!(
        stdout.contains("Created the") && stdout.contains("./build.sh"),
        "{stdout}"
    );
    let project = parent.join("kv");
    add_crash_command(&project, lang);

    let mut build = Command::new(project.join("build.sh"));
    match lang {
        "python" => {
            toolchains();
            build.env(
                "ENVHOST_COMPONENTIZE_PY",
                workspace().join("plugins/tasks/.venv/bin/componentize-py"),
            );
        }
        "js" => {
            toolchains();
            build.env(
                "ENVHOST_JCO",
                workspace().join("plugins/regex/node_modules/.bin/jco"),
            );
        }
        _ => {
            build.env("CARGO_TARGET_DIR", scratch().join("cargo-target"));
        }
    }
    let started = Instant::now();
    let built = build.current_dir(&project).output().expect("run build.sh");
    let took = started.elapsed();
    assert!(
        built.status.success(),
        "the {lang} project's build.sh failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    println!(
        "envhost new --lang {lang}: build.sh took {:.1} s",
        took.as_secs_f64()
    );
    assert!(project.join("env/kv.wasm").is_file());
    project
}

/// Adds `crash` to the generated plugin (see the module's documentation).
fn add_crash_command(project: &Path, lang: &str) {
    let (file, anchor, insert) = match lang {
        "python" => (
            "src/app.py",
            "Environment, Capabilities, State, ScreenChanges = export(KeyValue)\n",
            "class Crashing(KeyValue):\n    @command(\"crash\", \"Raises an exception it does not catch.\")\n    \
             def crash(self, call):\n        raise RuntimeError(\"the plugin blew up\")\n\n\n\
             Environment, Capabilities, State, ScreenChanges = export(Crashing)\n",
        ),
        "js" => (
            "src/plugin.js",
            "  commands: [\n",
            "  commands: [\n    { signature: 'crash', description: 'Throws an exception it does not catch.', \
             run() { throw new Error('the plugin blew up'); } },\n",
        ),
        _ => (
            "src/lib.rs",
            "const COMMANDS: &'static [Command<Self>] = &[\n",
            "const COMMANDS: &'static [Command<Self>] = &[\n        \
             Command::new(\"crash\", |_, _| panic!(\"the plugin blew up\")).description(\"Panics.\"),\n",
        ),
    };
    let path = project.join(file);
    let source = std::fs::read_to_string(&path).expect("the generated source");
    assert!(source.contains(anchor), "{file} lacks `{anchor}`");
    std::fs::write(&path, source.replacen(anchor, insert, 1)).expect("write the source");
}

fn cache() -> String {
    scratch().join("code-cache").to_string_lossy().into_owned()
}

/// `envhost check` with the project's grants stub, sharing a compiled-code
/// cache so the host compiles each build once.
fn check(project: &Path) {
    let checked = envhost(
        &[
            "check",
            "--plugin-cache",
            &cache(),
            "--grants",
            "env/envhost.toml",
            "env/kv.wasm",
        ],
        project,
    );
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "envhost check refused the new plugin:\n{stdout}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(stdout.contains("put <key> <value>"), "{stdout}");
    assert!(
        stdout.contains("notes"),
        "the write-directory request shows: {stdout}"
    );
}

/// Another project using the plugin as the README says: kv.wasm in env/,
/// the grants stub as env/envhost.toml, and a notes/ folder.
fn project_using(plugin: &Path) -> Project {
    let project = Project::new();
    project.write(
        "env/kv.wasm",
        std::fs::read(plugin.join("env/kv.wasm")).expect("kv.wasm"),
    );
    project.write(
        "env/envhost.toml",
        std::fs::read(plugin.join("env/envhost.toml")).expect("envhost.toml"),
    );
    std::fs::create_dir_all(project.path().join("notes")).expect("notes/");
    project
}

fn start(project: &Project, resume: bool) -> Host {
    let mut builder = Host::builder().arg("--plugin-cache").arg(cache());
    if resume {
        builder = builder.arg("--resume");
    }
    builder.start(project.path())
}

/// Built, checked, then its session file through `envhost test` in the
/// project folder, as its README says (the notes land in the granted
/// folder); in another project without the grant, the answer names the
/// grant to ask for.
fn a_new_project_passes_its_session(lang: &'static str) {
    let plugin = built(lang);
    check(&plugin);
    let tested = envhost(
        &[
            "test",
            "env/kv.wasm",
            "tests/kv.session",
            "--grants",
            "env/envhost.toml",
            "--plugin-cache",
            &cache(),
        ],
        &plugin,
    );
    assert!(
        tested.status.success(),
        "envhost test failed on the new project's session:\n{}{}",
        String::from_utf8_lossy(&tested.stdout),
        String::from_utf8_lossy(&tested.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(plugin.join("notes/todo.txt")).expect("the saved note"),
        "buy milk\ncall Ada\n"
    );

    let project = project_using(&plugin);
    std::fs::remove_file(project.path().join("env/envhost.toml")).expect("remove the grants");
    let mut host = start(&project, false);
    let refused = host.command("kv", "save todo.txt\nx");
    let output = refused.failed();
    assert!(
        output.starts_with("cannot ")
            && output.ends_with(
                "notes/todo.txt: ask the operator to grant notes in env/envhost.toml ([plugins.kv] read-write = [\"notes\"])"
            ),
        "{output}"
    );
}

/// A trap costs the instance, not the values (the fresh instance starts
/// from the last snapshot), and a new host resuming the session gets them
/// back too.
fn a_new_project_keeps_its_values_across_a_trap_and_a_restart(lang: &'static str) {
    let plugin = built(lang);
    let project = project_using(&plugin);
    let mut host = start(&project, false);
    assert_eq!(host.command("kv", "put colour blue").ok(), "stored colour");
    let crashed = host.command("kv", "crash");
    assert!(
        crashed.failed().contains("the plugin blew up"),
        "{}",
        crashed.0
    );
    assert_eq!(host.command("kv", "get colour").ok(), "blue");
    let (status, _) = host.finish();
    assert!(status.success());

    let mut host = start(&project, true);
    let resumed = host.command("kv", "get colour");
    assert!(resumed.ok().ends_with("blue"), "{}", resumed.0);
}

/// The template's `fetch` reaches a host the operator allowed (a server
/// on 127.0.0.1 granted in env/envhost.toml) and keeps the body as a value;
/// a host not granted is refused before anything is connected, with the
/// SDK's sentence naming the grant to ask for and the host's line after it.
fn a_new_project_fetches_from_an_allowed_host(lang: &'static str) {
    let plugin = built(lang);
    let server = Server::start(Behaviour::Answer);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let project = project_using(&plugin);
    project.write(
        "env/envhost.toml",
        format!("[plugins.kv]\nread-write = [\"notes\"]\nallowed-hosts = [\"{origin}\"]\n"),
    );
    let mut host = start(&project, false);
    let fetched = host.command("kv", &format!("fetch greeting {origin}/greeting"));
    assert!(fetched.ok().starts_with("stored greeting"), "{}", fetched.0);
    assert_eq!(host.command("kv", "get greeting").ok(), BODY);
    assert_eq!(server.accepted(), 1);

    // Port 9 on loopback: not granted, so nothing may be connected.
    let refused = host.command("kv", "fetch other http://127.0.0.1:9/x");
    let output = refused.failed();
    assert!(
        output.contains(
            "ask the operator to add \"http://127.0.0.1:9\" to allowed-hosts in env/envhost.toml"
        ) && output
            .contains("[envhost] refused an HTTP request to http://127.0.0.1:9 from plugin kv"),
        "{output}"
    );
    assert_eq!(server.accepted(), 1, "nothing more was connected");
    assert_eq!(host.command("kv", "get greeting").ok(), BODY);
}

/// Each way a granted fetch can fail reads as a sentence, and stores
/// nothing: a status that is not 2xx, a body over 64 KiB (one exactly
/// 64 KiB is kept), and a granted port nobody listens on.
fn a_new_project_says_why_a_fetch_failed(lang: &'static str) {
    let plugin = built(lang);
    let server = Server::start(Behaviour::Answer);
    let origin = format!("http://127.0.0.1:{}", server.port);
    // A port that was free a moment ago: connecting to it is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port();
    let project = project_using(&plugin);
    project.write(
        "env/envhost.toml",
        format!("[plugins.kv]\nallowed-hosts = [\"{origin}\", \"http://127.0.0.1:{closed}\"]\n"),
    );
    let mut host = start(&project, false);

    let missing = host.command("kv", &format!("fetch missing {origin}/status/404"));
    assert_eq!(
        missing.failed(),
        format!("GET {origin}/status/404 answered 404")
    );
    let large = host.command("kv", &format!("fetch large {origin}/bytes/65537"));
    assert_eq!(
        large.failed(),
        format!(
            "cannot fetch {origin}/bytes/65537: its body is larger than 64 KiB, the most this plugin keeps"
        )
    );
    let full = host.command("kv", &format!("fetch full {origin}/bytes/65536"));
    assert_eq!(
        full.ok(),
        format!("stored full (65536 bytes from {origin})")
    );
    let refused = host.command("kv", &format!("fetch down http://127.0.0.1:{closed}/"));
    assert_eq!(
        refused.failed(),
        format!("cannot fetch http://127.0.0.1:{closed}/: connection refused")
    );
    let screen = refused.screen("kv");
    assert!(screen.contains("Keys (1): full"), "{screen}");
}

#[test]
fn a_new_python_project_passes_its_session() {
    a_new_project_passes_its_session("python");
}

#[test]
fn a_new_javascript_project_passes_its_session() {
    a_new_project_passes_its_session("js");
}

/// Each language's project builds as written (the SDK's checks at build
/// time included), whatever the host then does with it.
#[test]
fn a_new_python_project_builds() {
    assert!(built("python").join("env/kv.wasm").is_file());
}

#[test]
fn a_new_javascript_project_builds() {
    assert!(built("js").join("env/kv.wasm").is_file());
}

#[test]
fn a_new_rust_project_passes_its_session() {
    a_new_project_passes_its_session("rust");
}

#[test]
fn a_new_python_project_keeps_its_values_across_a_trap_and_a_restart() {
    a_new_project_keeps_its_values_across_a_trap_and_a_restart("python");
}

#[test]
fn a_new_javascript_project_keeps_its_values_across_a_trap_and_a_restart() {
    a_new_project_keeps_its_values_across_a_trap_and_a_restart("js");
}

#[test]
fn a_new_rust_project_keeps_its_values_across_a_trap_and_a_restart() {
    a_new_project_keeps_its_values_across_a_trap_and_a_restart("rust");
}

#[test]
fn bad_names_and_busy_folders_are_refused_with_a_sentence() {
    let temp = tempfile::tempdir().expect("a temporary folder");
    let bad = envhost(&["new", "Key-Value", "--lang", "python"], temp.path());
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim_end(),
        "envhost: `Key-Value` cannot name a plugin: a name is lowercase letters, digits and `_`, starting with a letter, at most 64 \
         (it is the environment's name, the .wasm file's stem and the package's name); e.g. `envhost new key_value ...`"
    );
    std::fs::create_dir(temp.path().join("kv")).expect("mkdir");
    std::fs::write(temp.path().join("kv/mine.txt"), "mine").expect("write");
    let busy = envhost(&["new", "kv", "--lang", "js"], temp.path());
    assert_eq!(busy.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("kv exists and is not empty"),
        "{}",
        String::from_utf8_lossy(&busy.stderr)
    );
    let names: Vec<_> = std::fs::read_dir(temp.path().join("kv"))
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["mine.txt"], "nothing written into a busy folder");
}

#[test]
fn a_new_rust_project_fetches_from_an_allowed_host() {
    a_new_project_fetches_from_an_allowed_host("rust");
}

#[test]
fn a_new_python_project_fetches_from_an_allowed_host() {
    a_new_project_fetches_from_an_allowed_host("python");
}

#[test]
fn a_new_javascript_project_fetches_from_an_allowed_host() {
    a_new_project_fetches_from_an_allowed_host("js");
}

#[test]
fn a_new_rust_project_says_why_a_fetch_failed() {
    a_new_project_says_why_a_fetch_failed("rust");
}

#[test]
fn a_new_python_project_says_why_a_fetch_failed() {
    a_new_project_says_why_a_fetch_failed("python");
}
