//! Signature checks against real recorded Sigstore bundles (see
//! `fixtures/sigstore/SOURCE.md`), offline, with the trust root compiled
//! into the build: a keyless signature and a key signature logged in Rekor,
//! each accepted for the signer that made it and refused otherwise.

mod support;

use std::path::PathBuf;

use envhost_registry::{Sha256, SignatureError, Signer, TrustRoot, verify_signature};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sigstore")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn keyless(identity: &str, issuer: &str) -> Signer {
    Signer::Keyless {
        identity: identity.to_owned(),
        issuer: issuer.to_owned(),
    }
}

const GITHUB_ISSUER: &str = "https://github.com/login/oauth";

#[test]
fn a_recorded_keyless_signature_verifies_for_its_identity_only() {
    let trust = TrustRoot::public_good().unwrap();
    let artifact = Sha256::of(&fixture("cosign-v3-blob.txt"));
    let bundle = fixture("cosign-v3-blob.sigstore.json");

    // Who signed it, as the refusal for a wrong identity reports it.
    let error = verify_signature(
        &keyless("nobody@example.com", GITHUB_ISSUER),
        &trust,
        &artifact,
        &bundle,
        "the fixture",
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, SignatureError::Wrong { .. }), "{message}");
    let identity = message
        .split("its certificate names ")
        .nth(1)
        .and_then(|rest| rest.split(" and issuer").next())
        .unwrap_or_else(|| panic!("the refusal names the signer: {message}"))
        .to_owned();
    assert!(message.contains(GITHUB_ISSUER), "{message}");
    eprintln!("the recorded keyless signature is by {identity}");

    // That identity and issuer: accepted.
    verify_signature(
        &keyless(&identity, GITHUB_ISSUER),
        &trust,
        &artifact,
        &bundle,
        "x",
    )
    .unwrap();
    // The right identity from another issuer: refused.
    let error = verify_signature(
        &keyless(&identity, "https://accounts.google.com"),
        &trust,
        &artifact,
        &bundle,
        "x",
    )
    .unwrap_err();
    assert!(matches!(error, SignatureError::Wrong { .. }), "{error}");
    // Other bytes: refused, naming both digests.
    let other = Sha256::of(b"other bytes");
    let error = verify_signature(
        &keyless(&identity, GITHUB_ISSUER),
        &trust,
        &other,
        &bundle,
        "x",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains(&other.hex()), "{error}");
    // A key requirement is not met by a keyless signature.
    let key = Signer::Key {
        label: "managed-key.pub".into(),
        pem: String::from_utf8(fixture("managed-key.pub")).unwrap(),
    };
    let error = verify_signature(&key, &trust, &artifact, &bundle, "x")
        .unwrap_err()
        .to_string();
    assert!(error.contains("keylessly"), "{error}");
}

#[test]
fn a_recorded_keyless_signature_needs_its_trust_root() {
    // A trust root without the public-good authorities (Sigstore's own
    // test root for a private instance) does not vouch for the certificate.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("trusted_root.json");
    std::fs::write(
        &root,
        r#"{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1","tlogs":[],"certificateAuthorities":[],"ctlogs":[],"timestampAuthorities":[]}"#,
    )
    .unwrap();
    let trust = TrustRoot::from_file(&root).unwrap();
    let artifact = Sha256::of(&fixture("cosign-v3-blob.txt"));
    let error = verify_signature(
        &keyless("anyone", GITHUB_ISSUER),
        &trust,
        &artifact,
        &fixture("cosign-v3-blob.sigstore.json"),
        "x",
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            SignatureError::Wrong { .. } | SignatureError::TrustRoot { .. }
        ),
        "{error}"
    );
}

#[test]
fn a_recorded_key_signature_with_a_log_entry_verifies_with_its_key_only() {
    let trust = TrustRoot::public_good().unwrap();
    let artifact = Sha256::of(&fixture("managed-key.txt"));
    let bundle = fixture("managed-key.sigstore.json");
    let key = Signer::Key {
        label: "managed-key.pub".into(),
        pem: String::from_utf8(fixture("managed-key.pub")).unwrap(),
    };
    verify_signature(&key, &trust, &artifact, &bundle, "x").unwrap();

    let dir = tempfile::tempdir().unwrap();
    let Some((_, other_key)) = support::key_pair(dir.path(), "other") else {
        return;
    };
    let other = Signer::key_file(&other_key).unwrap();
    let error = verify_signature(&other, &trust, &artifact, &bundle, "x").unwrap_err();
    assert!(matches!(error, SignatureError::Wrong { .. }), "{error}");
    assert!(
        error.to_string().contains("does not verify with that key"),
        "{error}"
    );
    let error = verify_signature(&key, &trust, &Sha256::of(b"other"), &bundle, "x").unwrap_err();
    assert!(matches!(error, SignatureError::Wrong { .. }), "{error}");
}

#[test]
fn bad_key_files_say_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key.pub");
    std::fs::write(&path, "not a key").unwrap();
    let error = Signer::key_file(&path).unwrap_err().to_string();
    assert!(error.contains("BEGIN PUBLIC KEY"), "{error}");
    let error = envhost_registry::SigningKey::from_file(&path)
        .unwrap_err()
        .to_string();
    assert!(error.contains("openssl genpkey"), "{error}");
    std::fs::write(&path, "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n").unwrap();
    let error = envhost_registry::SigningKey::from_file(&path)
        .unwrap_err()
        .to_string();
    assert!(error.contains("encrypted"), "{error}");
}
