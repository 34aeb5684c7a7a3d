//! Interoperability with an independent OCI client, oras-py (installed
//! pinned by `scripts/install-oras` into `target/oras-venv`): what oras
//! pushes in the CNCF Wasm layout, envhost fetches; what envhost publishes,
//! oras pulls byte for byte; what oras pushes with its default config is
//! refused with the media type it has.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use envhost_registry::{CONFIG_MEDIA_TYPE, Error, OciReference, Sha256, Source};
use support::{Registry, client, component};

/// The venv's python, or `None` (after saying so) when the tests may be
/// skipped.
fn oras_python() -> Option<PathBuf> {
    let python = match std::env::var_os("ENVHOST_ORAS_PYTHON") {
        Some(path) => PathBuf::from(path),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
            target.join("oras-venv/bin/python")
        }
    };
    if python.is_file() {
        return Some(python);
    }
    if std::env::var_os(support::SKIP_VARIABLE).is_some() {
        eprintln!("skipped: oras-py is not installed ({})", python.display());
        return None;
    }
    panic!(
        "oras-py is needed by this test: run scripts/install-oras (expected {}), or set {}=1 to skip the registry tests",
        python.display(),
        support::SKIP_VARIABLE
    );
}

fn oras(python: &Path, args: &[&str]) -> String {
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oras/oras_helper.py");
    let output = Command::new(python)
        .arg(&helper)
        .args(args)
        .output()
        .expect("running oras-py");
    assert!(
        output.status.success(),
        "oras {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn oci(text: &str) -> OciReference {
    match text.parse::<Source>() {
        Ok(Source::Oci(reference)) => reference,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn what_oras_pushes_envhost_fetches() {
    let Some(python) = oras_python() else { return };
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bytes = component("pushed by oras");
    let file = dir.path().join("calc.wasm");
    std::fs::write(&file, &bytes).unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"architecture":"wasm","os":"wasip2","layerDigests":["{}"],"component":{{"exports":[],"imports":[]}}}}"#,
            Sha256::of(&bytes)
        ),
    )
    .unwrap();
    let target = format!("{}/tools/calc:0.1", registry.address);
    oras(
        &python,
        &[
            "push",
            &target,
            file.to_str().unwrap(),
            config.to_str().unwrap(),
            CONFIG_MEDIA_TYPE,
        ],
    );

    let fetched = client(dir.path())
        .fetch(&format!("oci://{target}").parse().unwrap(), None)
        .unwrap();
    assert_eq!(fetched.component, bytes);
    assert_eq!(fetched.config.unwrap().os, "wasip2");
}

#[test]
fn what_envhost_publishes_oras_pulls() {
    let Some(python) = oras_python() else { return };
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bytes = component("published by envhost");
    let target = registry.reference("tools/timer:1.0");
    client(dir.path())
        .publish(&bytes, &oci(&target), None)
        .unwrap();

    let out = dir.path().join("pulled");
    std::fs::create_dir(&out).unwrap();
    let pulled = oras(
        &python,
        &[
            "pull",
            &format!("{}/tools/timer:1.0", registry.address),
            out.to_str().unwrap(),
        ],
    );
    let files: Vec<&str> = pulled.lines().collect();
    // The layer's title annotation names the file.
    assert_eq!(files.len(), 1, "{pulled}");
    assert!(files[0].ends_with("timer.wasm"), "{pulled}");
    assert_eq!(std::fs::read(files[0]).unwrap(), bytes);
}

#[test]
fn what_oras_pushes_with_its_default_config_is_refused() {
    let Some(python) = oras_python() else { return };
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calc.wasm");
    std::fs::write(&file, component("no config")).unwrap();
    let target = format!("{}/tools/calc:plain", registry.address);
    oras(
        &python,
        &["push-default-config", &target, file.to_str().unwrap()],
    );

    let error = client(dir.path())
        .fetch(&format!("oci://{target}").parse().unwrap(), None)
        .unwrap_err();
    assert!(matches!(error, Error::MediaType { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(CONFIG_MEDIA_TYPE), "{message}");
    assert!(
        message.contains("application/vnd.unknown.config.v1+json"),
        "{message}"
    );
}
