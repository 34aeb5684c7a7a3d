//! The distribution commands' steps, one by one, without a registry (the end-to-end tests drive a
//! real one).

use std::path::{Path, PathBuf};

use envhost_plugin::{GrantsFile, PluginSettings, Verify, VerifyChange};
use envhost_registry::{self as registry, Lock, LockedPlugin, Source};

use super::add::{Placement, chosen_name, default_name, flagged_verify, relative_to, write_added};
use super::install::{Drift, frozen, stage_locked_pins};
use super::list::short;
use super::project::{Changes, Project, with_pin};
use super::update::{changed_file, to_update};
use super::*;

fn name_from(source: &str) -> Result<String> {
    default_name(&source.parse::<Source>()?)
}

#[test]
fn the_default_name_is_the_sources_last_path_part() {
    assert_eq!(
        name_from("oci://127.0.0.1:5000/plugins/kv-store:1.0").unwrap(),
        "kv_store"
    );
    assert_eq!(
        name_from("https://example.com/files/timer.wasm#sha256=0000000000000000000000000000000000000000000000000000000000000000").unwrap(),
        "timer"
    );
    assert_eq!(name_from("./build/sqlite.wasm").unwrap(), "sqlite");
}

#[test]
fn a_source_that_makes_no_name_asks_for_name() {
    let said = match default_name(&Source::Path(PathBuf::from("/"))) {
        Ok(name) => panic!("a name was made from /: {name}"),
        Err(err) => err.to_string(),
    };
    assert!(said.contains("pass --name NAME"), "{said}");
}

#[test]
fn a_key_inside_the_project_is_written_relative_to_it() {
    let project = tempfile::tempdir().unwrap();
    let project_dir = project.path().canonicalize().unwrap();
    let key = project_dir.join("keys").join("signer.pem");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(&key, "key").unwrap();
    assert_eq!(relative_to(&project_dir, &key).unwrap(), "keys/signer.pem");
    let outside = tempfile::NamedTempFile::new().unwrap();
    let shown = relative_to(&project_dir, outside.path()).unwrap();
    assert!(Path::new(&shown).is_absolute(), "{shown}");
}

#[test]
fn a_missing_key_file_is_named_in_the_error() {
    let project = tempfile::tempdir().unwrap();
    let missing = project.path().join("absent.pem");
    let said = format!("{:#}", relative_to(project.path(), &missing).unwrap_err());
    assert!(said.contains("absent.pem"), "{said}");
}

// --- the words of typical failures --------------------------------------------

/// An error and each source under it, as the binary prints it (`{:#}`
/// of the anyhow error it becomes).
fn chain(error: &DistributionError) -> String {
    let mut said = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        said.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    said
}

fn open(dir: &Path) -> Project {
    Project::open(&ProjectArgs {
        project: dir.to_owned(),
        settings: PluginSettings::default(),
    })
    .expect("a project folder")
}

fn locked(name: &str, bytes: &[u8], source: &str) -> LockedPlugin {
    LockedPlugin {
        name: name.to_owned(),
        source: source.parse().expect("a source"),
        manifest: None,
        sha256: registry::Sha256::of(bytes),
        size: bytes.len() as u64,
        world: "envhost:environment/full-plugin@0.2.0".to_owned(),
        signer: None,
        signature: None,
    }
}

fn write_lock(project: &Project, plugins: &[LockedPlugin]) -> Lock {
    let mut lock = Lock::default();
    for plugin in plugins {
        lock.insert(plugin.clone());
    }
    std::fs::create_dir_all(&project.env).unwrap();
    std::fs::write(&project.lock_path, lock.to_text()).unwrap();
    lock
}

#[test]
fn a_project_without_a_lock_is_told_to_add_plugins_first() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    let said = project.existing_lock().unwrap_err().to_string();
    assert!(
        said.ends_with("has no env/envhost.lock; add plugins with `envhost add SOURCE` first"),
        "{said}"
    );
    assert!(said.contains(&project.dir.display().to_string()), "{said}");
}

#[test]
fn a_lock_that_does_not_parse_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    std::fs::create_dir_all(&project.env).unwrap();
    std::fs::write(&project.lock_path, "version = 1\nnot = toml = here\n").unwrap();
    let said = chain(&project.lock().unwrap_err());
    assert!(said.starts_with("env/envhost.lock:2:"), "{said}");
}

#[test]
fn an_install_that_fails_says_which_plugin_and_then_why() {
    let error = DistributionError::Install {
        name: "timer".to_owned(),
        source: Box::new(registry::Error::Offline {
            what: "the manifest of oci://127.0.0.1:5000/plugins/timer:1.0".to_owned(),
            reason: "it is not in the cache".to_owned(),
        }),
    };
    assert_eq!(error.to_string(), "installing timer");
    let said = chain(&error);
    assert!(
        said.starts_with("installing timer: the manifest of"),
        "{said}"
    );
    assert!(
        said.ends_with(
            "and the network is off; run the command once with the network to fill the cache"
        ),
        "{said}"
    );
}

#[test]
fn a_grants_file_that_is_not_toml_is_to_be_fixed_by_hand() {
    let grants = GrantsFile {
        path: PathBuf::from("/p/env/envhost.toml"),
        shown: "env/envhost.toml".to_owned(),
        text: Some("[plugins\n".to_owned()),
        entries: Vec::new(),
    };
    let text = grants.text.clone().unwrap();
    let said = with_pin(&grants, &text, "timer", None, &VerifyChange::Keep)
        .unwrap_err()
        .to_string();
    assert!(
        said.starts_with("env/envhost.toml: it is not valid TOML"),
        "{said}"
    );
    assert!(said.ends_with("; fix it by hand first"), "{said}");
}

#[test]
fn a_file_error_keeps_the_io_error_as_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent.wasm");
    let error = DistributionError::Read {
        path: missing.clone(),
        source: std::fs::read(&missing).unwrap_err(),
    };
    assert_eq!(error.to_string(), format!("reading {}", missing.display()));
    assert!(chain(&error).ends_with("No such file or directory (os error 2)"));
}

// --- add's steps ------------------------------------------------------------------

#[test]
fn a_name_the_loader_refuses_is_refused_before_anything_is_read() {
    let source: Source = "oci://127.0.0.1:5000/plugins/timer:1.0".parse().unwrap();
    assert_eq!(chosen_name(None, &source).unwrap(), "timer");
    assert_eq!(chosen_name(Some("clock"), &source).unwrap(), "clock");
    let said = chosen_name(Some("bash"), &source).unwrap_err().to_string();
    assert!(
        said.contains("`bash` belongs to a built-in environment"),
        "{said}"
    );
    assert!(
        said.ends_with("; choose another with --name NAME"),
        "{said}"
    );
}

#[test]
fn a_path_inside_the_project_is_recorded_relative_and_env_files_are_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    std::fs::create_dir_all(project.dir.join("build")).unwrap();
    std::fs::create_dir_all(&project.env).unwrap();
    std::fs::write(project.dir.join("build/timer.wasm"), b"component").unwrap();

    let given = Source::Path(project.dir.join("build/../build/timer.wasm"));
    let placed = Placement::of(&project, "timer", given).unwrap();
    assert_eq!(
        placed.recorded,
        Source::Path(PathBuf::from("build/timer.wasm"))
    );
    assert_eq!(
        placed.fetch_from,
        Source::Path(project.dir.join("build/timer.wasm"))
    );
    assert!(!placed.adopting);

    std::fs::write(project.wasm("clock"), b"component").unwrap();
    let adopted = Placement::of(&project, "clock", Source::Path(project.wasm("clock"))).unwrap();
    assert!(adopted.adopting);
    assert_eq!(
        adopted.recorded,
        Source::Path(PathBuf::from("env/clock.wasm"))
    );

    let said = Placement::of(
        &project,
        "clock",
        "oci://127.0.0.1:5000/p/clock:1".parse().unwrap(),
    )
    .err()
    .expect("a file in the way")
    .to_string();
    assert_eq!(
        said,
        "env/clock.wasm exists and is not in the lock; remove it, add it as it is (`envhost add env/clock.wasm`), or choose another --name"
    );

    let missing = Placement::of(
        &project,
        "gone",
        Source::Path(project.dir.join("gone.wasm")),
    )
    .err()
    .expect("no such file");
    assert!(
        chain(&missing).starts_with(&format!(
            "the plugin file {} cannot be read: ",
            project.dir.join("gone.wasm").display()
        )),
        "{missing}"
    );
}

#[test]
fn the_flags_make_the_requirement_the_grants_file_records() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    let key = project.dir.join("alice.pub");
    std::fs::write(&key, "key").unwrap();
    assert_eq!(
        flagged_verify(&project.dir, Some(&key), None, None).unwrap(),
        Some(Verify::Key {
            key: "alice.pub".to_owned()
        })
    );
    assert_eq!(
        flagged_verify(
            &project.dir,
            None,
            Some("me@example.com"),
            Some("https://issuer")
        )
        .unwrap(),
        Some(Verify::Keyless {
            identity: "me@example.com".to_owned(),
            issuer: "https://issuer".to_owned(),
            trusted_root: None,
        })
    );
    assert_eq!(
        flagged_verify(&project.dir, None, None, None).unwrap(),
        None
    );
}

#[test]
fn an_added_plugin_is_written_pinned_and_locked_together() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    let grants = project.grants().unwrap();
    let entry = locked(
        "timer",
        b"component",
        "oci://127.0.0.1:5000/plugins/timer:1.0",
    );
    let sha = entry.sha256.hex();
    write_added(
        &project,
        Lock::default(),
        &grants,
        entry.clone(),
        Some(b"component"),
        &VerifyChange::Keep,
    )
    .unwrap();
    assert_eq!(std::fs::read(project.wasm("timer")).unwrap(), b"component");
    assert_eq!(project.lock().unwrap().get("timer"), Some(&entry));
    let pinned = project.grants().unwrap();
    assert_eq!(
        pinned.entry("timer").and_then(|e| e.sha256.clone()),
        Some(sha)
    );
    let leftovers: Vec<_> = std::fs::read_dir(&project.env)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".envhost-"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file left behind");
}

// --- install's steps --------------------------------------------------------------

#[test]
fn drift_lists_missing_and_changed_files_and_pins() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    let timer = locked("timer", b"timer", "oci://127.0.0.1:5000/plugins/timer:1.0");
    let clock = locked("clock", b"clock", "oci://127.0.0.1:5000/plugins/clock:1.0");
    let lock = write_lock(&project, &[timer.clone(), clock.clone()]);
    std::fs::write(project.wasm("timer"), b"tampered").unwrap();
    std::fs::write(
        project.env.join("envhost.toml"),
        format!("[plugins.clock]\nsha256 = \"{}\"\n", clock.sha256.hex()),
    )
    .unwrap();
    let grants = project.grants().unwrap();
    let drift = Drift::between(&project, &lock, &grants).unwrap();
    let names = |plugins: &[&LockedPlugin]| -> Vec<String> {
        plugins.iter().map(|p| p.name.clone()).collect()
    };
    assert_eq!(names(&drift.to_fetch), ["timer", "clock"]);
    assert_eq!(names(&drift.to_pin), ["timer"]);
    assert_eq!(
        drift.differences,
        [
            format!(
                "env/timer.wasm has sha256 {}, the lock says {}",
                registry::Sha256::of(b"tampered").hex(),
                timer.sha256.hex()
            ),
            "timer has no pin in env/envhost.toml".to_owned(),
            "env/clock.wasm is missing".to_owned(),
        ]
    );
}

#[test]
fn frozen_counts_each_difference_and_says_how_to_restore() {
    let lock = Lock::default();
    assert!(frozen(&lock, Vec::new(), &[]).is_ok());
    let said = frozen(
        &lock,
        vec!["env/timer.wasm is missing".to_owned()],
        &["stray".to_owned()],
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        said,
        "env/ differs from env/envhost.lock in 2 ways (listed above); `envhost install` without --frozen restores what the lock says"
    );
}

#[test]
fn locked_pins_are_staged_and_other_entries_kept() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    std::fs::create_dir_all(&project.env).unwrap();
    let old = registry::Sha256::of(b"old").hex();
    std::fs::write(
        project.env.join("envhost.toml"),
        format!("[plugins.timer]\nsha256 = \"{old}\"\nread-only = [\"data\"]\n"),
    )
    .unwrap();
    let grants = project.grants().unwrap();
    let timer = locked("timer", b"timer", "oci://127.0.0.1:5000/plugins/timer:1.0");
    let mut changes = Changes::default();
    stage_locked_pins(&mut changes, &grants, &[&timer]).unwrap();
    let before = std::fs::read_to_string(&grants.path).unwrap();
    assert!(before.contains(&old), "staged, not yet written: {before}");
    changes.commit().unwrap();
    let entry = project.grants().unwrap().entry("timer").cloned().unwrap();
    assert_eq!(entry.sha256, Some(timer.sha256.hex()));
    assert_eq!(entry.grants, ["reads data"]);
}

// --- update's steps ---------------------------------------------------------------

#[test]
fn update_of_a_name_not_in_the_lock_says_where_names_are_listed() {
    let timer = locked("timer", b"timer", "oci://127.0.0.1:5000/plugins/timer:1.0");
    let mut lock = Lock::default();
    lock.insert(timer.clone());
    assert_eq!(
        to_update(&lock, None).unwrap(),
        std::slice::from_ref(&timer)
    );
    assert_eq!(to_update(&lock, Some("timer")).unwrap(), [timer]);
    let said = to_update(&lock, Some("clock")).unwrap_err().to_string();
    assert_eq!(
        said,
        "plugin clock is not in env/envhost.lock (`envhost list` lists it)"
    );
}

#[test]
fn a_path_source_moves_when_its_bytes_change() {
    let dir = tempfile::tempdir().unwrap();
    let project = open(dir.path());
    std::fs::write(project.dir.join("timer.wasm"), b"timer").unwrap();
    let timer = locked("timer", b"timer", "timer.wasm");
    let relative = Path::new("timer.wasm");
    assert!(changed_file(&project, relative, &timer).unwrap().is_none());
    std::fs::write(project.dir.join("timer.wasm"), b"timer, rebuilt").unwrap();
    let newer = changed_file(&project, relative, &timer)
        .unwrap()
        .expect("moved");
    assert_eq!(
        newer.fetch_from,
        Source::Path(project.dir.join("timer.wasm"))
    );
    assert_eq!(newer.manifest, None);
    std::fs::remove_file(project.dir.join("timer.wasm")).unwrap();
    let said = changed_file(&project, relative, &timer)
        .err()
        .expect("gone")
        .to_string();
    assert_eq!(
        said,
        format!(
            "timer: reading {}",
            project.dir.join("timer.wasm").display()
        )
    );
}

#[test]
fn a_digest_is_shown_by_its_first_twelve_characters() {
    assert_eq!(short("0123456789abcdef0123"), "0123456789ab");
    assert_eq!(short("abc"), "abc");
}
