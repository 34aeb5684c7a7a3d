//! The registry client against hostile registries (`support::hostile`, a
//! small server on an address of this machine) beside the real
//! `docker-registry`: a challenge that names an auth realm on another
//! host, credentials asked for over plain HTTP by a host that is not this
//! machine, answers trickled a byte at a time, answers that stop, and
//! answers that never end. Each must end with a sentence, in bounded time
//! and memory, with the credentials kept where they belong.
//!
//! Times are checked only with generous bounds that prove "it did not
//! hang": the hostile server holds a trickle for a minute, the client's
//! limits here are a few seconds.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use envhost_registry::{Client, Credentials, Error, OciReference, Source};
use support::hostile::{HostileServer, Reply, Seen};
use support::{Registry, client_with, component};

const USER: &str = "envhost-tester";
const SECRET: &str = "s3cret-that-stays-home";

/// Far below what the server would send to a client that never stops.
const BOUNDED: u64 = 64 << 20;
/// Far below the minute the server holds a trickle or a silence.
const NOT_HUNG: Duration = Duration::from_secs(30);

fn token_file(dir: &Path) -> PathBuf {
    let path = dir.join("token");
    std::fs::write(&path, format!("{USER}:{SECRET}\n")).unwrap();
    path
}

/// The credentials as they would appear in an `Authorization` header.
fn basic_header() -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{SECRET}"))
    )
}

/// Whether any request carried the credentials, in any form.
fn carries_the_secret(seen: &[Seen]) -> bool {
    seen.iter().any(|request| {
        request
            .authorization
            .as_deref()
            .is_some_and(|value| value == basic_header() || value.contains(SECRET))
            || request.path.contains(SECRET)
    })
}

fn with_credentials(dir: &Path, change: impl FnOnce(&mut envhost_registry::Options)) -> Client {
    let token = token_file(dir);
    client_with(dir, |options| {
        options.credentials = Credentials::TokenFile(token);
        change(options);
    })
}

fn quick_limits(options: &mut envhost_registry::Options) {
    options.stall_timeout = Duration::from_secs(2);
    options.deadline = Duration::from_secs(3);
}

fn source(address: &str) -> Source {
    format!("oci://{address}/plugins/timer:1.0")
        .parse()
        .unwrap()
}

/// A host address of this machine that is not loopback (the tests'
/// stand-in for a host across the network: connections to it never leave
/// the machine).
fn non_loopback_address() -> String {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    // No packet is sent: connecting a UDP socket only picks the route.
    socket.connect("192.0.2.1:9").unwrap();
    let ip = socket.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "this test needs a non-loopback IPv4 address on this machine, found {ip}"
    );
    ip.to_string()
}

#[test]
fn credentials_go_to_no_auth_realm_on_another_host() {
    let dir = tempfile::tempdir().unwrap();
    let realm = HostileServer::start("127.0.0.2", |_| Reply::json(r#"{"token":"granted"}"#));
    let realm_url = format!("http://{}/token", realm.address);
    let registry = HostileServer::start("127.0.0.1", move |request| {
        match request.authorization.as_deref() {
            Some("Bearer granted") => Reply::status(404),
            _ => Reply::bearer_challenge(&realm_url, "hostile"),
        }
    });

    let error = with_credentials(dir.path(), |_| {})
        .fetch(&source(&registry.address), None)
        .unwrap_err();
    let to_realm = realm.seen();
    assert!(
        !carries_the_secret(&to_realm),
        "the realm on another host was sent the credentials: {to_realm:?}"
    );
    assert!(to_realm.is_empty(), "{to_realm:?}");
    assert!(!carries_the_secret(&registry.seen()));
    assert!(
        matches!(error, Error::CredentialsElsewhere { .. }),
        "{error}"
    );
    let message = error.to_string();
    for part in [
        registry.address.as_str(),
        "127.0.0.2",
        "--registry-auth-host 127.0.0.2",
    ] {
        assert!(message.contains(part), "{part:?} missing: {message}");
    }

    // Without credentials, the realm is asked for an anonymous token, as
    // docker and oci-client do: nothing secret goes anywhere.
    let anonymous = support::client(dir.path());
    let error = anonymous
        .fetch(&source(&registry.address), None)
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    let to_realm = realm.seen();
    assert_eq!(to_realm.len(), 1, "{to_realm:?}");
    assert_eq!(to_realm[0].authorization, None);
    assert!(
        to_realm[0]
            .path
            .contains("scope=repository%3Aplugins%2Ftimer%3Apull")
    );

    // The operator allows the realm's host: it gets the credentials, the
    // registry gets only the token.
    let allowed = with_credentials(dir.path(), |o| o.auth_hosts = vec!["127.0.0.2".to_owned()]);
    let error = allowed.fetch(&source(&registry.address), None).unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    let to_realm = realm.seen();
    assert_eq!(to_realm.len(), 2, "{to_realm:?}");
    assert_eq!(to_realm[1].authorization, Some(basic_header()));
    let to_registry = registry.seen();
    assert!(!carries_the_secret(&to_registry), "{to_registry:?}");
    assert!(
        to_registry
            .iter()
            .any(|r| r.authorization.as_deref() == Some("Bearer granted")),
        "{to_registry:?}"
    );
}

#[test]
fn an_auth_realm_on_the_registrys_own_host_gets_the_credentials() {
    // The token service on another port of the registry's host (as the
    // distribution project's token server setups run it).
    let dir = tempfile::tempdir().unwrap();
    let realm = HostileServer::start("127.0.0.1", |_| Reply::json(r#"{"access_token":"own"}"#));
    let realm_url = format!("http://{}/token", realm.address);
    let registry = HostileServer::start("127.0.0.1", move |request| {
        match request.authorization.as_deref() {
            Some("Bearer own") => Reply::status(404),
            _ => Reply::bearer_challenge(&realm_url, "own"),
        }
    });
    let error = with_credentials(dir.path(), |_| {})
        .fetch(&source(&registry.address), None)
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");
    assert_eq!(realm.seen()[0].authorization, Some(basic_header()));
}

#[test]
fn credentials_never_travel_over_plain_http_to_a_non_loopback_host() {
    let host = non_loopback_address();
    let dir = tempfile::tempdir().unwrap();

    // The registry itself, reached over plain HTTP because the operator
    // listed it as insecure, asks for basic authentication.
    let registry = HostileServer::start(&host, |request| {
        if request.authorization.is_some() {
            Reply::status(404)
        } else {
            Reply::basic_challenge("hostile")
        }
    });
    let error = with_credentials(dir.path(), |o| o.insecure_hosts = vec![host.clone()])
        .fetch(&source(&registry.address), None)
        .unwrap_err();
    let seen = registry.seen();
    assert!(
        !carries_the_secret(&seen),
        "the credentials went over plain HTTP to {host}: {seen:?}"
    );
    assert!(matches!(error, Error::CredentialsInClear { .. }), "{error}");
    assert!(error.to_string().contains(&host), "{error}");
    // Without credentials it is fetched from as before (and says 401).
    let error = client_with(dir.path(), |o| o.insecure_hosts = vec![host.clone()])
        .fetch(&source(&registry.address), None)
        .unwrap_err();
    assert!(
        matches!(error, Error::Unauthorized { .. } | Error::NotFound { .. }),
        "{error}"
    );

    // A loopback registry names an auth realm on that host over plain
    // HTTP; the operator allowed the host as a realm, but not in clear.
    let realm = HostileServer::start(&host, |_| Reply::json(r#"{"token":"granted"}"#));
    let realm_url = format!("http://{}/token", realm.address);
    let loopback = HostileServer::start("127.0.0.1", move |request| {
        match request.authorization.as_deref() {
            Some("Bearer granted") => Reply::status(404),
            _ => Reply::bearer_challenge(&realm_url, "hostile"),
        }
    });
    let error = with_credentials(dir.path(), |o| {
        o.auth_hosts = vec![host.clone()];
        o.insecure_hosts = vec![host.clone()];
    })
    .fetch(&source(&loopback.address), None)
    .unwrap_err();
    let seen = realm.seen();
    assert!(
        !carries_the_secret(&seen),
        "the credentials went over plain HTTP to {host}: {seen:?}"
    );
    assert!(matches!(error, Error::CredentialsInClear { .. }), "{error}");
}

/// A real artifact (published to the real registry): its manifest, config
/// and component, to be served by a hostile server.
struct Artifact {
    manifest: Vec<u8>,
    config: Vec<u8>,
    config_digest: String,
    component_digest: String,
    component: Vec<u8>,
}

fn artifact(dir: &Path) -> Option<Arc<Artifact>> {
    let registry = Registry::start()?;
    // Large enough that trickled at 4 bytes a second it would take
    // minutes, whatever the deadline is checked against.
    let bytes = component(&"trickled ".repeat(100));
    let target: OciReference = match source(&registry.address) {
        Source::Oci(reference) => reference,
        other => panic!("{other:?}"),
    };
    let published = support::client(dir).publish(&bytes, &target, None).unwrap();
    let manifest = std::fs::read(registry.blob_path(&published.manifest)).unwrap();
    let parsed: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    let config_digest = parsed["config"]["digest"].as_str().unwrap().to_owned();
    let config_hex = config_digest.strip_prefix("sha256:").unwrap();
    let config =
        std::fs::read(registry.blob_path(&envhost_registry::Sha256::from_hex(config_hex).unwrap()))
            .unwrap();
    Some(Arc::new(Artifact {
        manifest,
        config,
        config_digest,
        component_digest: published.sha256.to_string(),
        component: bytes,
    }))
}

/// Which answer a hostile server spoils.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Token,
    Manifest,
    Config,
    Component,
}

/// Serves `artifact` behind a token challenge (realm: `token`), spoiling
/// `part`'s answer with `spoil`.
fn serving(
    artifact: Arc<Artifact>,
    realm: String,
    part: Part,
    spoil: impl Fn() -> Reply + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |request| {
        if request.authorization.as_deref() != Some("Bearer granted") {
            return Reply::bearer_challenge(&realm, "hostile");
        }
        let path = request.path.as_str();
        let (this, reply) = if path.ends_with("/manifests/1.0") {
            (
                Part::Manifest,
                Reply::bytes(
                    "application/vnd.oci.image.manifest.v1+json",
                    artifact.manifest.clone(),
                ),
            )
        } else if path.ends_with(&format!("/blobs/{}", artifact.config_digest)) {
            (
                Part::Config,
                Reply::bytes(
                    "application/vnd.wasm.config.v0+json",
                    artifact.config.clone(),
                ),
            )
        } else if path.ends_with(&format!("/blobs/{}", artifact.component_digest)) {
            (
                Part::Component,
                Reply::bytes("application/wasm", artifact.component.clone()),
            )
        } else {
            return Reply::status(404);
        };
        if this == part { spoil() } else { reply }
    }
}

/// A token service on 127.0.0.1 whose answer is `spoil`'s when `part` is
/// the token, and the registry serving `artifact` with it.
fn hostile_pair(
    artifact: &Arc<Artifact>,
    part: Part,
    spoil: impl Fn() -> Reply + Send + Sync + Clone + 'static,
) -> (HostileServer, HostileServer) {
    let token_spoil = spoil.clone();
    let realm = HostileServer::start("127.0.0.1", move |_| {
        if part == Part::Token {
            token_spoil()
        } else {
            Reply::json(r#"{"token":"granted"}"#)
        }
    });
    let realm_url = format!("http://{}/token", realm.address);
    let registry = HostileServer::start(
        "127.0.0.1",
        serving(artifact.clone(), realm_url, part, spoil),
    );
    (realm, registry)
}

#[test]
fn a_trickled_answer_ends_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let Some(artifact) = artifact(dir.path()) else {
        return;
    };
    for part in [Part::Token, Part::Manifest, Part::Config, Part::Component] {
        // A component's first bytes are checked as soon as they are in.
        let first = match part {
            Part::Component => artifact.component[..8].to_vec(),
            _ => Vec::new(),
        };
        let trickle = move || Reply::Trickle {
            status: 200,
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            first: first.clone(),
            // More often than the stall timeout: only the deadline ends it.
            every: Duration::from_millis(250),
        };
        let (realm, registry) = hostile_pair(&artifact, part, trickle);
        let fresh = tempfile::tempdir().unwrap();
        let client = client_with(fresh.path(), quick_limits);
        let started = Instant::now();
        let error = client.fetch(&source(&registry.address), None).unwrap_err();
        let took = started.elapsed();
        assert!(
            took < NOT_HUNG,
            "{part:?}: the fetch took {took:?}: {error}"
        );
        assert!(matches!(error, Error::Deadline { .. }), "{part:?}: {error}");
        assert!(
            error.to_string().contains("--registry-deadline"),
            "{part:?}: {error}"
        );
        assert!(
            registry.sent() + realm.sent() > 0,
            "{part:?}: nothing trickled"
        );
        assert!(support::files_under(&fresh.path().join("cache")).is_empty());
    }
}

#[test]
fn a_publish_to_a_trickling_registry_ends_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let registry = HostileServer::start("127.0.0.1", |request| {
        if request.method == "HEAD" {
            Reply::status(404)
        } else if request.path.starts_with("/v2/plugins/timer/blobs/uploads") {
            Reply::Trickle {
                status: 500,
                headers: Vec::new(),
                first: Vec::new(),
                every: Duration::from_millis(250),
            }
        } else {
            Reply::status(200)
        }
    });
    let target: OciReference = match source(&registry.address) {
        Source::Oci(reference) => reference,
        other => panic!("{other:?}"),
    };
    let started = Instant::now();
    let error = client_with(dir.path(), quick_limits)
        .publish(&component("slow"), &target, None)
        .unwrap_err();
    let took = started.elapsed();
    assert!(took < NOT_HUNG, "the publish took {took:?}: {error}");
    assert!(matches!(error, Error::Deadline { .. }), "{error}");
}

#[test]
fn an_answer_that_stops_ends_at_the_stall_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let Some(artifact) = artifact(dir.path()) else {
        return;
    };
    let silent = || Reply::Silent {
        status: 200,
        headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
    };
    for part in [Part::Token, Part::Component] {
        let (_realm, registry) = hostile_pair(&artifact, part, silent);
        let fresh = tempfile::tempdir().unwrap();
        let client = client_with(fresh.path(), |o| {
            o.stall_timeout = Duration::from_secs(2);
            o.deadline = Duration::from_secs(600);
        });
        let started = Instant::now();
        let error = client.fetch(&source(&registry.address), None).unwrap_err();
        let took = started.elapsed();
        assert!(
            took < NOT_HUNG,
            "{part:?}: the fetch took {took:?}: {error}"
        );
        assert!(matches!(error, Error::Stalled { .. }), "{part:?}: {error}");
        assert!(
            error.to_string().contains("--registry-stall-timeout"),
            "{part:?}: {error}"
        );
    }
}

#[test]
fn endless_answers_stop_at_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let Some(artifact) = artifact(dir.path()) else {
        return;
    };
    let endless = |status: u16, declared: Option<u64>| {
        move || Reply::Endless {
            status,
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            declared,
        }
    };
    let cases: Vec<(Part, u16, Option<u64>, &str)> = vec![
        // A token answer with no length, and one declaring 5 GiB.
        (Part::Token, 200, None, "token"),
        (Part::Token, 200, Some(5 << 30), "token"),
        // A refusal of the token whose explanation never ends.
        (Part::Token, 401, None, "token"),
        // An error answer for the component that never ends.
        (Part::Component, 500, None, "500"),
    ];
    for (part, status, declared, mentions) in cases {
        let (realm, registry) = hostile_pair(&artifact, part, endless(status, declared));
        let fresh = tempfile::tempdir().unwrap();
        let error = client_with(fresh.path(), |_| {})
            .fetch(&source(&registry.address), None)
            .unwrap_err();
        let sent = realm.sent() + registry.sent();
        assert!(
            sent < BOUNDED,
            "{part:?} {status} {declared:?}: the server sent {sent} bytes ({error})"
        );
        assert!(
            error.to_string().contains(mentions),
            "{part:?} {status} {declared:?}: {error}"
        );
        if status == 200 {
            assert!(matches!(error, Error::TooLarge { .. }), "{part:?}: {error}");
        }
    }
}

#[test]
fn a_registry_listing_thousands_of_signatures_gets_a_few_fetched() {
    use envhost_registry::{SignatureCheck, Signer, TrustRoot};
    let dir = tempfile::tempdir().unwrap();
    let Some(artifact) = artifact(dir.path()) else {
        return;
    };
    let Some((_, public_key)) = support::key_pair(dir.path(), "alice") else {
        return;
    };
    // Each bundle is what its digest says, so only verifying it refuses it.
    let bundles: Vec<(String, Vec<u8>)> = (0..2000)
        .map(|i| {
            let bytes = format!("{{\"not-a-bundle\":{i}}}").into_bytes();
            (envhost_registry::Sha256::of(&bytes).to_string(), bytes)
        })
        .collect();
    let layers: Vec<String> = bundles
        .iter()
        .map(|(digest, bytes)| {
            format!(
                r#"{{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","digest":"{digest}","size":{}}}"#,
                bytes.len()
            )
        })
        .collect();
    let signature_manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}},"layers":[{}]}}"#,
        layers.join(",")
    );
    let component_hex = artifact
        .component_digest
        .strip_prefix("sha256:")
        .unwrap()
        .to_owned();
    let bundles = Arc::new(bundles);
    let served = bundles.clone();
    let signed = artifact.clone();
    let registry = HostileServer::start("127.0.0.1", move |request| {
        let path = request.path.as_str();
        if path.ends_with(&format!("/manifests/sha256-{component_hex}.sigstore")) {
            return Reply::bytes(
                "application/vnd.oci.image.manifest.v1+json",
                signature_manifest.clone().into_bytes(),
            );
        }
        if let Some((_, bytes)) = served
            .iter()
            .find(|(digest, _)| path.ends_with(&format!("/blobs/{digest}")))
        {
            return Reply::bytes("application/json", bytes.clone());
        }
        serving(signed.clone(), String::new(), Part::Token, || {
            Reply::status(500)
        })(&Seen {
            authorization: Some("Bearer granted".to_owned()),
            ..request.clone()
        })
    });
    let trust = TrustRoot::public_good().unwrap();
    let alice = Signer::key_file(&public_key).unwrap();
    let check = SignatureCheck {
        signer: &alice,
        trust: &trust,
    };
    let error = support::client(dir.path())
        .fetch(&source(&registry.address), Some(&check))
        .unwrap_err();
    assert!(matches!(error, Error::Signature(_)), "{error}");
    let fetched_bundles = registry
        .seen()
        .iter()
        .filter(|r| bundles.iter().any(|(d, _)| r.path.ends_with(d.as_str())))
        .count();
    assert_eq!(fetched_bundles, 16, "bundles fetched");
}

#[test]
fn the_authorization_stays_off_redirects_and_uploads_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let Some(artifact) = artifact(dir.path()) else {
        return;
    };
    // Storage on another host: serves the component, and takes uploads.
    let storage_artifact = artifact.clone();
    let storage = HostileServer::start("127.0.0.2", move |request| {
        if request.method == "PUT" {
            Reply::status(201)
        } else {
            Reply::bytes("application/wasm", storage_artifact.component.clone())
        }
    });
    let storage_address = storage.address.clone();
    let served = artifact.clone();
    let registry = HostileServer::start("127.0.0.1", move |request| {
        if request.authorization.is_none() {
            return Reply::basic_challenge("hostile");
        }
        let path = request.path.as_str();
        let elsewhere = |to: &str| Reply::Full {
            status: if to == "upload" { 202 } else { 307 },
            headers: vec![(
                "Location".to_owned(),
                format!("http://{storage_address}/{to}"),
            )],
            body: Vec::new(),
        };
        if path.ends_with(&format!("/blobs/{}", served.component_digest)) {
            elsewhere("component")
        } else if request.method == "HEAD" {
            Reply::status(404)
        } else if request.method == "POST" {
            elsewhere("upload")
        } else if request.method == "PUT" {
            Reply::status(201)
        } else {
            serving(served.clone(), String::new(), Part::Token, || {
                Reply::status(500)
            })(&Seen {
                authorization: Some("Bearer granted".to_owned()),
                ..request.clone()
            })
        }
    });
    let client = with_credentials(dir.path(), |_| {});
    let fetched = client.fetch(&source(&registry.address), None).unwrap();
    assert_eq!(fetched.component, artifact.component);
    let target: OciReference = match source(&registry.address) {
        Source::Oci(reference) => reference,
        other => panic!("{other:?}"),
    };
    client
        .publish(&component("elsewhere"), &target, None)
        .unwrap();
    let to_registry = registry.seen();
    assert!(
        to_registry
            .iter()
            .any(|r| r.authorization.as_deref() == Some(basic_header().as_str())),
        "{to_registry:?}"
    );
    let to_storage = storage.seen();
    assert!(
        to_storage.iter().any(|r| r.method == "GET")
            && to_storage.iter().any(|r| r.method == "PUT"),
        "{to_storage:?}"
    );
    assert!(
        to_storage.iter().all(|r| r.authorization.is_none()),
        "{to_storage:?}"
    );
}
