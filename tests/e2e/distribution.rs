//! Distributing plugins through the real binary against a real OCI
//! registry (Debian's `docker-registry` on 127.0.0.1, started per test):
//! `envhost publish` pushes the example plugins; `add`, `install`,
//! `update`, `verify`, `remove` and `list` work on throw-away projects. Each
//! refusal is checked to leave the project untouched.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::harness::{Host, Project, envhost_binary, target_dir};
use crate::plugins::guest;

#[path = "../../host/registry/tests/support/mod.rs"]
mod registry_support;

use registry_support::{Registry, component, key_pair};

/// Runs `envhost ARGS` with its own cache and no docker credentials.
struct Cli {
    home: tempfile::TempDir,
}

impl Cli {
    fn new() -> Cli {
        Cli {
            home: tempfile::Builder::new()
                .prefix("envhost-e2e-home-")
                .tempdir()
                .expect("temporary folder"),
        }
    }

    fn cache(&self) -> PathBuf {
        self.home.path().join("cache")
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(envhost_binary())
            .args(args)
            .env("XDG_CACHE_HOME", self.cache())
            .env("DOCKER_CONFIG", self.home.path().join("docker"))
            .env("HOME", self.home.path())
            .output()
            .expect("running envhost")
    }

    /// Runs and expects success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "envhost {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs and expects failure; returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            !output.status.success(),
            "envhost {args:?} succeeded:\n{}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }
}

fn project_arg(project: &Project) -> String {
    project.path().display().to_string()
}

/// Every file in the project (relative), for "nothing was written".
fn project_files(project: &Project) -> Vec<PathBuf> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.push(path.strip_prefix(base).unwrap_or(&path).to_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(project.path(), project.path(), &mut out);
    out.sort();
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    envhost_registry::Sha256::of(bytes).hex()
}

fn publish(cli: &Cli, file: &Path, target: &str) -> String {
    cli.ok(&["publish", file.to_str().unwrap(), target])
}

#[test]
fn three_commands_take_an_empty_project_to_a_locked_verified_set() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    let timer = guest("timer");
    let gdb = guest("gdb");
    publish(&cli, &timer, &registry.reference("plugins/timer:1.0"));
    publish(&cli, &gdb, &registry.reference("plugins/gdb:1.0"));

    let project = Project::new();
    let dir = project_arg(&project);
    let added = cli.ok(&[
        "add",
        &registry.reference("plugins/timer:1.0"),
        "--project",
        &dir,
    ]);
    // The check's report: what it offers and asks for.
    assert!(
        added.contains("OK, loads as the environment `timer`"),
        "{added}"
    );
    assert!(added.contains("added timer"), "{added}");
    cli.ok(&[
        "add",
        &registry.reference("plugins/gdb:1.0"),
        "--project",
        &dir,
    ]);
    let verified = cli.ok(&["verify", "--project", &dir]);
    assert!(
        verified.contains("timer: ok") && verified.contains("gdb: ok"),
        "{verified}"
    );

    assert_eq!(
        std::fs::read(project.path().join("env/timer.wasm")).unwrap(),
        std::fs::read(&timer).unwrap()
    );
    let lock = project.read("env/envhost.lock");
    assert!(
        lock.contains("name = \"gdb\"") && lock.contains("name = \"timer\""),
        "{lock}"
    );
    assert!(
        lock.contains("world = \"envhost:environment/full-plugin@0.2.1\""),
        "{lock}"
    );
    let grants = project.read("env/envhost.toml");
    assert!(
        grants.contains(&format!(
            "sha256 = \"{}\"",
            sha256_hex(&std::fs::read(&timer).unwrap())
        )),
        "{grants}"
    );
    // Pins only: nothing granted.
    assert!(
        !grants.contains("programs") && !grants.contains("read-"),
        "{grants}"
    );

    // The set loads: the host starts them from disk, pinned.
    let mut host = Host::start(project.path());
    let reply = host.command("timer", "start");
    assert!(reply.success(), "{}", reply.output());
    drop(host);

    let listed = cli.ok(&["list", "--project", &dir]);
    assert!(
        listed.lines().next().unwrap().starts_with("NAME"),
        "{listed}"
    );
    assert!(
        listed.contains("timer") && listed.contains("1.0"),
        "{listed}"
    );
    assert!(
        listed.contains("envhost:environment/full-plugin@0.2.1"),
        "{listed}"
    );
    assert!(listed.contains("nothing"), "{listed}");
}

#[test]
fn add_by_tag_pins_the_digest_and_a_moved_tag_changes_nothing_until_update() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    let tag = registry.reference("plugins/timer:stable");
    let first = guest("timer");
    let published = publish(&cli, &first, &tag);
    let manifest = published
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("publish prints the manifest digest")
        .to_owned();

    let project = Project::new();
    let dir = project_arg(&project);
    cli.ok(&["add", &tag, "--project", &dir, "--name", "clock"]);
    let lock = project.read("env/envhost.lock");
    assert!(
        lock.contains(&format!("manifest = \"{manifest}\"")),
        "{lock}\n{published}"
    );
    assert!(lock.contains(&format!("source = \"{tag}\"")), "{lock}");

    // The tag moves to another component.
    let second = guest("gdb");
    publish(&cli, &second, &tag);

    // install restores what the lock says, by digest, even from a fresh cache.
    std::fs::remove_file(project.path().join("env/clock.wasm")).unwrap();
    let fresh = Cli::new();
    fresh.ok(&["install", "--project", &dir]);
    assert_eq!(
        std::fs::read(project.path().join("env/clock.wasm")).unwrap(),
        std::fs::read(&first).unwrap()
    );
    assert_eq!(project.read("env/envhost.lock"), lock);

    // update --dry-run reports the move and writes nothing.
    let before = project_files(&project);
    let report = cli.ok(&["update", "--dry-run", "--project", &dir]);
    assert!(report.contains("now names"), "{report}");
    assert!(report.contains("nothing was written"), "{report}");
    assert_eq!(project.read("env/envhost.lock"), lock);
    assert_eq!(project_files(&project), before);

    // update installs it.
    cli.ok(&["update", "clock", "--project", &dir]);
    assert_eq!(
        std::fs::read(project.path().join("env/clock.wasm")).unwrap(),
        std::fs::read(&second).unwrap()
    );
    let updated = project.read("env/envhost.lock");
    assert!(!updated.contains(&manifest), "{updated}");
    assert!(
        project
            .read("env/envhost.toml")
            .contains(&sha256_hex(&std::fs::read(&second).unwrap()))
    );
    cli.ok(&["verify", "--project", &dir]);
}

#[test]
fn a_tampered_plugin_fails_install_frozen_and_verify() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    publish(
        &cli,
        &guest("timer"),
        &registry.reference("plugins/timer:1.0"),
    );
    let project = Project::new();
    let dir = project_arg(&project);
    cli.ok(&[
        "add",
        &registry.reference("plugins/timer:1.0"),
        "--project",
        &dir,
    ]);
    let frozen = cli.ok(&["install", "--frozen", "--project", &dir]);
    assert!(frozen.contains("matches"), "{frozen}");

    let path = project.path().join("env/timer.wasm");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let before = project_files(&project);

    let error = cli.fails(&["install", "--frozen", "--project", &dir]);
    assert!(error.contains("env/timer.wasm has sha256"), "{error}");
    assert!(error.contains("without --frozen restores"), "{error}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "--frozen changed nothing"
    );
    assert_eq!(project_files(&project), before);
    let error = cli.fails(&["verify", "--project", &dir]);
    assert!(error.contains("env/timer.wasm has sha256"), "{error}");

    // A plugin dropped into env/ without the lock is a difference too.
    std::fs::copy(guest("gdb"), project.path().join("env/gdb.wasm")).unwrap();
    let error = cli.fails(&["install", "--frozen", "--project", &dir]);
    assert!(error.contains("env/gdb.wasm is not in the lock"), "{error}");

    // Without --frozen, install restores the locked bytes.
    cli.ok(&["install", "--project", &dir]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(guest("timer")).unwrap()
    );
}

#[test]
fn a_tampered_blob_fails_add_with_a_digest_error_and_writes_nothing() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    let timer = std::fs::read(guest("timer")).unwrap();
    publish(
        &cli,
        &guest("timer"),
        &registry.reference("plugins/timer:1.0"),
    );
    let blob = registry.blob_path(&envhost_registry::Sha256::of(&timer));
    let mut tampered = std::fs::read(&blob).unwrap();
    tampered[100] ^= 0xff;
    std::fs::write(&blob, &tampered).unwrap();

    let project = Project::new();
    let fresh = Cli::new();
    let error = fresh.fails(&[
        "add",
        &registry.reference("plugins/timer:1.0"),
        "--project",
        &project_arg(&project),
    ]);
    assert!(error.contains("digest"), "{error}");
    assert!(
        error.contains(&envhost_registry::Sha256::of(&timer).to_string()),
        "{error}"
    );
    assert!(error.contains("nothing was written"), "{error}");
    assert_eq!(project_files(&project), Vec::<PathBuf>::new());
    assert!(registry_support::files_under(&fresh.cache().join("envhost/blobs")).is_empty());
}

#[test]
fn components_the_host_would_refuse_are_refused_by_add() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    let scratch = tempfile::tempdir().unwrap();
    // A valid component that is not an envhost plugin: the registry layer
    // accepts it, the host's check refuses it.
    let empty = scratch.path().join("empty.wasm");
    std::fs::write(&empty, component("not a plugin")).unwrap();
    publish(&cli, &empty, &registry.reference("plugins/empty:1"));
    // A plugin built for another world.
    publish(
        &cli,
        &guest("other_world"),
        &registry.reference("plugins/other:1"),
    );

    let project = Project::new();
    let dir = project_arg(&project);
    for (reference, expected) in [
        ("plugins/empty:1", "REFUSED"),
        ("plugins/other:1", "REFUSED"),
    ] {
        let output = cli.run(&["add", &registry.reference(reference), "--project", &dir]);
        assert!(!output.status.success(), "{reference} was added");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stdout.contains(expected), "{reference}: {stdout}");
        assert!(
            stderr.contains("nothing was written"),
            "{reference}: {stderr}"
        );
        assert_eq!(project_files(&project), Vec::<PathBuf>::new());
    }

    // A core module is refused before the host even looks at it.
    let module = scratch.path().join("module.wasm");
    std::fs::write(&module, registry_support::CORE_MODULE).unwrap();
    let error = cli.fails(&[
        "publish",
        module.to_str().unwrap(),
        &registry.reference("plugins/module:1"),
    ]);
    assert!(error.contains("core WebAssembly module"), "{error}");
    let error = cli.fails(&["add", module.to_str().unwrap(), "--project", &dir]);
    assert!(error.contains("core WebAssembly module"), "{error}");
    assert_eq!(project_files(&project), Vec::<PathBuf>::new());
}

#[test]
fn install_works_offline_from_the_cache() {
    let Some(mut registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    publish(
        &cli,
        &guest("timer"),
        &registry.reference("plugins/timer:1.0"),
    );
    let project = Project::new();
    let dir = project_arg(&project);
    cli.ok(&[
        "add",
        &registry.reference("plugins/timer:1.0"),
        "--project",
        &dir,
    ]);

    registry.stop();
    std::fs::remove_file(project.path().join("env/timer.wasm")).unwrap();
    cli.ok(&["install", "--offline", "--project", &dir]);
    std::fs::remove_file(project.path().join("env/timer.wasm")).unwrap();
    cli.ok(&["install", "--project", &dir]);
    assert_eq!(
        std::fs::read(project.path().join("env/timer.wasm")).unwrap(),
        std::fs::read(guest("timer")).unwrap()
    );

    // With nothing cached, offline says what it needed.
    std::fs::remove_file(project.path().join("env/timer.wasm")).unwrap();
    let empty = Cli::new();
    let error = empty.fails(&["install", "--offline", "--project", &dir]);
    assert!(error.contains("the network is off"), "{error}");
    assert!(!project.path().join("env/timer.wasm").exists());
}

#[test]
fn signed_plugins_are_accepted_and_wrongly_signed_or_unsigned_refused() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    let keys = tempfile::tempdir().unwrap();
    let Some((alice_key, alice_pub)) = key_pair(keys.path(), "alice") else {
        return;
    };
    let Some((mallory_key, _)) = key_pair(keys.path(), "mallory") else {
        return;
    };
    let timer = guest("timer");
    let signed = registry.reference("plugins/timer:signed");
    let out = cli.ok(&[
        "publish",
        timer.to_str().unwrap(),
        &signed,
        "--sign-key",
        alice_key.to_str().unwrap(),
    ]);
    assert!(out.contains("signed:"), "{out}");
    let forged = registry.reference("plugins/timer:forged");
    cli.ok(&[
        "publish",
        guest("gdb").to_str().unwrap(),
        &forged,
        "--sign-key",
        mallory_key.to_str().unwrap(),
    ]);
    let unsigned = registry.reference("plugins/sqlite:1");
    publish(&cli, &guest("sqlite"), &unsigned);

    let project = Project::new();
    let dir = project_arg(&project);
    let key_in_project = project.path().join("keys/alice.pub");
    std::fs::create_dir_all(key_in_project.parent().unwrap()).unwrap();
    std::fs::copy(&alice_pub, &key_in_project).unwrap();
    let key_arg = key_in_project.to_str().unwrap();

    let added = cli.ok(&["add", &signed, "--project", &dir, "--verify-key", key_arg]);
    assert!(added.contains("signed by the key"), "{added}");
    let grants = project.read("env/envhost.toml");
    assert!(
        grants.contains("verify = { key = \"keys/alice.pub\" }"),
        "{grants}"
    );
    let lock = project.read("env/envhost.lock");
    assert!(
        lock.contains("signer = { key = \"keys/alice.pub\" }"),
        "{lock}"
    );
    assert!(lock.contains("signature = \"sha256:"), "{lock}");
    let verified = cli.ok(&["verify", "--project", &dir]);
    assert!(verified.contains("signed by the key"), "{verified}");

    let before = project_files(&project);
    let error = cli.fails(&[
        "add",
        &forged,
        "--project",
        &dir,
        "--name",
        "forged",
        "--verify-key",
        key_arg,
    ]);
    assert!(error.contains("must be signed by the key"), "{error}");
    assert!(error.contains("another key"), "{error}");
    let error = cli.fails(&["add", &unsigned, "--project", &dir, "--verify-key", key_arg]);
    assert!(error.contains("no signature was found"), "{error}");
    assert_eq!(project_files(&project), before);
    assert_eq!(project.read("env/envhost.toml"), grants);

    // A requirement written in the grants file is enforced by install too.
    std::fs::remove_file(project.path().join("env/timer.wasm")).unwrap();
    let fresh = Cli::new();
    fresh.ok(&["install", "--project", &dir]);
    assert!(project.path().join("env/timer.wasm").exists());

    // The operator now requires another signer: install refuses the
    // locked plugin rather than write it, and verify reports it.
    let Some((_, bob_pub)) = key_pair(keys.path(), "bob") else {
        return;
    };
    std::fs::copy(&bob_pub, project.path().join("keys/bob.pub")).unwrap();
    let grants = project
        .read("env/envhost.toml")
        .replace("keys/alice.pub", "keys/bob.pub");
    project.write("env/envhost.toml", &grants);
    let error = cli.fails(&["verify", "--project", &dir]);
    assert!(error.contains("must be signed by the key"), "{error}");
    std::fs::remove_file(project.path().join("env/timer.wasm")).unwrap();
    let error = Cli::new().fails(&["install", "--project", &dir]);
    assert!(error.contains("keys/bob.pub"), "{error}");
    assert!(!project.path().join("env/timer.wasm").exists());
}

#[test]
fn a_component_pushed_by_oras_installs() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let Some(python) = oras_python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("timer.wasm");
    std::fs::copy(guest("timer"), &file).unwrap();
    let config = scratch.path().join("config.json");
    std::fs::write(
        &config,
        r#"{"architecture":"wasm","os":"wasip2","layerDigests":[]}"#,
    )
    .unwrap();
    let helper = crate::harness::workspace().join("host/registry/tests/oras/oras_helper.py");
    let status = Command::new(python)
        .arg(helper)
        .args([
            "push",
            &format!("{}/third-party/timer:0.1", registry.address),
            file.to_str().unwrap(),
            config.to_str().unwrap(),
            "application/vnd.wasm.config.v0+json",
        ])
        .status()
        .unwrap();
    assert!(status.success());

    let project = Project::new();
    let cli = Cli::new();
    cli.ok(&[
        "add",
        &registry.reference("third-party/timer:0.1"),
        "--project",
        &project_arg(&project),
    ]);
    let mut host = Host::start(project.path());
    assert!(host.command("timer", "start").success());
}

fn oras_python() -> Option<PathBuf> {
    let python = target_dir().join("oras-venv/bin/python");
    if python.is_file() {
        return Some(python);
    }
    if std::env::var_os(registry_support::SKIP_VARIABLE).is_some() {
        eprintln!("skipped: oras-py is not installed ({})", python.display());
        return None;
    }
    panic!(
        "oras-py is needed by this test: run scripts/install-oras (expected {})",
        python.display()
    );
}

#[test]
fn remove_takes_out_the_file_the_pin_and_the_lock_entry_and_keeps_grants() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let cli = Cli::new();
    publish(
        &cli,
        &guest("timer"),
        &registry.reference("plugins/timer:1.0"),
    );
    let project = Project::new();
    let dir = project_arg(&project);
    project.write(
        "env/envhost.toml",
        "# the operator's notes\n[plugins.timer]\nread-only = [\"data\"]   # it reads data\n",
    );
    std::fs::create_dir_all(project.path().join("data")).unwrap();
    cli.ok(&[
        "add",
        &registry.reference("plugins/timer:1.0"),
        "--project",
        &dir,
    ]);
    let grants = project.read("env/envhost.toml");
    assert!(grants.starts_with("# the operator's notes\n[plugins.timer]\nread-only = [\"data\"]   # it reads data\nsha256 = "), "{grants}");
    let listed = cli.ok(&["list", "--project", &dir]);
    assert!(listed.contains("reads data"), "{listed}");

    cli.ok(&["remove", "timer", "--project", &dir]);
    assert!(!project.path().join("env/timer.wasm").exists());
    assert_eq!(
        project.read("env/envhost.toml"),
        "# the operator's notes\n[plugins.timer]\nread-only = [\"data\"]   # it reads data\n"
    );
    assert!(!project.read("env/envhost.lock").contains("timer"));
    let error = cli.fails(&["remove", "timer", "--project", &dir]);
    assert!(error.contains("there is no plugin timer"), "{error}");
}

#[test]
fn serving_never_touches_the_network() {
    // A "registry" that only counts connections.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let project = Project::new();
    let timer = std::fs::read(guest("timer")).unwrap();
    project.write("env/timer.wasm", &timer);
    project.write(
        "env/envhost.toml",
        format!("[plugins.timer]\nsha256 = \"{}\"\n", sha256_hex(&timer)),
    );
    // The lock names the registry, and a plugin that is not in env/.
    project.write(
        "env/envhost.lock",
        format!(
            "version = 1\n\n[[plugin]]\nname = \"timer\"\nsource = \"oci://{address}/plugins/timer:1.0\"\nmanifest = \"sha256:{hex}\"\nsha256 = \"{hex2}\"\nsize = {size}\nworld = \"envhost:environment/plugin@0.1.0\"\n\n[[plugin]]\nname = \"absent\"\nsource = \"oci://{address}/plugins/absent:1.0\"\nmanifest = \"sha256:{hex}\"\nsha256 = \"{hex}\"\nsize = 1\nworld = \"envhost:environment/plugin@0.1.0\"\n",
            hex = "0".repeat(64),
            hex2 = sha256_hex(&timer),
            size = timer.len()
        ),
    );
    let mut host = Host::start(project.path());
    assert!(host.command("timer", "start").success());
    let reply = host.command("absent", "start");
    assert!(!reply.success());
    drop(host);
    let connections = std::iter::from_fn(|| listener.accept().ok()).count();
    assert_eq!(connections, 0, "the host connected to the registry");
}

/// A hostile registry on 127.0.0.1 that names an auth realm on another
/// host (127.0.0.2, a loopback address that is not the registry's host):
/// `add` with `--registry-token-file` refuses with a sentence naming both
/// hosts and the flag, the realm is sent nothing, and the project is left
/// as it was.
#[test]
fn add_sends_no_credentials_to_an_auth_realm_on_another_host() {
    use registry_support::hostile::{HostileServer, Reply};
    let realm = HostileServer::start("127.0.0.2", |_| Reply::json(r#"{"token":"granted"}"#));
    let realm_url = format!("http://{}/token", realm.address);
    let registry = HostileServer::start("127.0.0.1", move |request| {
        match request.authorization.as_deref() {
            Some("Bearer granted") => Reply::status(404),
            _ => Reply::bearer_challenge(&realm_url, "hostile"),
        }
    });
    let cli = Cli::new();
    let token = cli.home.path().join("token");
    std::fs::write(&token, "envhost-tester:s3cret-that-stays-home\n").unwrap();
    let project = Project::new();
    let source = format!("oci://{}/plugins/timer:1.0", registry.address);
    let error = cli.fails(&[
        "add",
        &source,
        "--registry-token-file",
        token.to_str().unwrap(),
        "--project",
        &project_arg(&project),
    ]);
    assert_eq!(realm.seen().len(), 0, "{:?}", realm.seen());
    assert!(error.contains("--registry-auth-host 127.0.0.2"), "{error}");
    assert!(error.contains(&registry.address), "{error}");
    assert_eq!(project_files(&project), Vec::<PathBuf>::new());

    // With the flag, the credentials go to the realm (and the registry,
    // which has no such tag, says so).
    let error = cli.fails(&[
        "add",
        &source,
        "--registry-token-file",
        token.to_str().unwrap(),
        "--registry-auth-host",
        "127.0.0.2",
        "--project",
        &project_arg(&project),
    ]);
    assert!(error.contains("not found"), "{error}");
    assert_eq!(realm.seen().len(), 1, "{:?}", realm.seen());
    assert!(realm.seen()[0].authorization.is_some());
}

/// A registry that trickles its manifest a byte every quarter second:
/// `add` ends at `--registry-deadline` with a sentence, writing nothing.
#[test]
fn add_ends_a_trickled_transfer_at_its_deadline() {
    use registry_support::hostile::{HostileServer, Reply};
    let registry = HostileServer::start("127.0.0.1", |request| {
        if request.path.contains("/manifests/") {
            Reply::Trickle {
                status: 200,
                headers: vec![(
                    "Content-Type".to_owned(),
                    "application/vnd.oci.image.manifest.v1+json".to_owned(),
                )],
                first: Vec::new(),
                every: std::time::Duration::from_millis(250),
            }
        } else {
            Reply::status(200)
        }
    });
    let cli = Cli::new();
    let project = Project::new();
    let started = std::time::Instant::now();
    let error = cli.fails(&[
        "add",
        &format!("oci://{}/plugins/timer:1.0", registry.address),
        "--registry-deadline",
        "3s",
        "--project",
        &project_arg(&project),
    ]);
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(30),
        "add took {took:?}: {error}"
    );
    assert!(error.contains("did not finish within 3s"), "{error}");
    assert!(error.contains("--registry-deadline"), "{error}");
    assert!(registry.sent() > 0);
    assert_eq!(project_files(&project), Vec::<PathBuf>::new());
}

/// The sentence of a refusal `envhost add` printed, without its remedy
/// (`; choose another with --name NAME`).
fn add_refusal(stderr: &str) -> &str {
    let sentence = stderr
        .trim()
        .strip_prefix("envhost: ")
        .unwrap_or(stderr.trim());
    sentence
        .split_once("; choose another with --name NAME")
        .map_or(sentence, |(sentence, _)| sentence)
}

#[test]
fn add_refuses_the_names_the_loader_refuses_with_its_words() {
    let cli = Cli::new();
    let timer = guest("timer");
    let timer_arg = timer.to_str().expect("utf-8 path");
    let project = Project::new();
    let dir = project_arg(&project);
    let scratch = tempfile::tempdir().expect("temporary folder");
    for (name, expected) in [
        (
            "bash",
            "the name `bash` belongs to a built-in environment (bash, python, editor)",
        ),
        (
            "Bash",
            "the name `Bash` reads like `bash`, a built-in environment's, and its screen section would pass for the built-in's",
        ),
        (
            "pyth\u{3bf}n", // a Greek omicron
            "the name `pyth\u{3bf}n` reads like `python`, a built-in environment's",
        ),
        (
            "EDIT\u{39f}R", // a Greek capital omicron
            "the name `EDIT\u{39f}R` reads like `editor`",
        ),
        (
            "my-timer",
            "`my-timer` is not a valid environment name: it must be an identifier",
        ),
    ] {
        let error = cli.fails(&["add", timer_arg, "--name", name, "--project", &dir]);
        assert!(error.contains(expected), "{name}: {error}");
        assert!(
            error.contains("choose another with --name NAME"),
            "{name}: {error}"
        );
        assert_eq!(project_files(&project), Vec::<PathBuf>::new(), "{name}");
        // The loader says the same of a file of that name in env/.
        let file = scratch.path().join("env").join(format!("{name}.wasm"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::copy(&timer, &file).unwrap();
        let checked = cli.run(&["check", file.to_str().unwrap()]);
        let report = String::from_utf8_lossy(&checked.stdout).into_owned()
            + &String::from_utf8_lossy(&checked.stderr);
        assert!(!checked.status.success(), "{name}: {report}");
        assert!(report.contains(add_refusal(&error)), "{name}:\n{report}");
    }
    // A name too long to be a file's is refused before anything is fetched.
    let long = "t".repeat(251);
    let error = cli.fails(&["add", timer_arg, "--name", &long, "--project", &dir]);
    assert!(error.contains("is 251 bytes long"), "{error}");

    // A name that reads like a plugin's the project has, locked or only in
    // env/ (as the loader compares every plugin with the ones before it).
    cli.ok(&["add", timer_arg, "--name", "Notes", "--project", &dir]);
    project.write("env/Clock.wasm", std::fs::read(&timer).unwrap());
    let files = project_files(&project);
    for (name, other) in [("notes", "Notes"), ("NOTES", "Notes"), ("clock", "Clock")] {
        let error = cli.fails(&["add", timer_arg, "--name", name, "--project", &dir]);
        assert!(
            error.contains(&format!(
                "the name `{name}` reads like that of the plugin `{other}`, and their screen sections would look alike; choose another with --name NAME"
            )),
            "{name}: {error}"
        );
        assert_eq!(project_files(&project), files, "{name}");
    }
    let lock = project.read("env/envhost.lock");
    assert!(!lock.contains("notes") && !lock.contains("clock"), "{lock}");
}

#[test]
fn a_non_ascii_name_add_accepts_reads_back_from_the_lock() {
    let cli = Cli::new();
    let timer = guest("timer");
    let project = Project::new();
    let dir = project_arg(&project);
    let added = cli.ok(&[
        "add",
        timer.to_str().unwrap(),
        "--name",
        "donn\u{e9}es",
        "--project",
        &dir,
    ]);
    assert!(added.contains("added donn\u{e9}es"), "{added}");
    assert!(
        project
            .read("env/envhost.lock")
            .contains("name = \"donn\u{e9}es\""),
        "{}",
        project.read("env/envhost.lock")
    );
    // Every command that reads the lock reads it back.
    let verified = cli.ok(&["verify", "--project", &dir]);
    assert!(verified.contains("donn\u{e9}es: ok"), "{verified}");
    let frozen = cli.ok(&["install", "--frozen", "--project", &dir]);
    assert!(frozen.contains("matches env/envhost.lock"), "{frozen}");
    let listed = cli.ok(&["list", "--project", &dir]);
    assert!(listed.contains("donn\u{e9}es "), "{listed}");
    std::fs::remove_file(project.path().join("env/donn\u{e9}es.wasm")).unwrap();
    let installed = cli.ok(&["install", "--project", &dir]);
    assert!(installed.contains("1 written"), "{installed}");
    // And the host loads it under that name.
    let mut host = Host::start(project.path());
    assert_eq!(host.command("donn\u{e9}es", "start").ok(), "Timer started");
    assert!(host.finish().0.success());
    cli.ok(&["remove", "donn\u{e9}es", "--project", &dir]);
    assert!(!project.read("env/envhost.lock").contains("donn"));
}
