//! The registry client against a real OCI registry on 127.0.0.1 (see
//! `support`): publish and fetch, tags resolved once and pinned, tampered
//! and mislabelled artifacts refused with nothing written, the cache
//! serving installs offline, credentials, and signatures.

mod support;

use envhost_registry::{
    Error, Lock, LockedPlugin, OciReference, SignatureCheck, SignatureError, Signer, SigningKey,
    Source, TrustRoot, signature_tag,
};
use support::{
    CORE_MODULE, Registry, RegistrySettings, client, client_with, component, files_under,
};

fn oci(text: &str) -> OciReference {
    match text.parse::<Source>() {
        Ok(Source::Oci(reference)) => reference,
        other => panic!("{text}: {other:?}"),
    }
}

fn locked(name: &str, source: &str, fetched: &envhost_registry::Fetched) -> LockedPlugin {
    LockedPlugin {
        name: name.to_owned(),
        source: source.parse().expect("source"),
        manifest: fetched.manifest,
        sha256: fetched.sha256,
        size: fetched.size,
        world: "envhost:environment/plugin@0.1.0".to_owned(),
        signer: None,
        signature: fetched.signature,
    }
}

/// Pushes an arbitrary manifest with oci-client (for artifacts
/// `publish` would never make).
fn push_raw(
    registry: &Registry,
    repository_and_tag: &str,
    config: (&str, &[u8]),
    layers: &[(&str, &[u8])],
) {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference: oci_client::Reference = format!("{}/{repository_and_tag}", registry.address)
        .parse()
        .expect("reference");
    let layers: Vec<ImageLayer> = layers
        .iter()
        .map(|(media_type, bytes)| ImageLayer::new(bytes.to_vec(), media_type.to_string(), None))
        .collect();
    let config = Config::new(config.1.to_vec(), config.0.to_owned(), None);
    runtime
        .block_on(client.push(
            &reference,
            &layers,
            config,
            &oci_client::secrets::RegistryAuth::Anonymous,
            None,
        ))
        .expect("push");
}

const WASM_CONFIG: &str = r#"{"architecture":"wasm","os":"wasip2","layerDigests":[]}"#;

#[test]
fn publish_then_fetch_by_tag_pins_the_manifest_digest() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = client(dir.path());
    let bytes = component("timer 1.0");
    let target = registry.reference("plugins/timer:1.0");

    let published = client.publish(&bytes, &oci(&target), None).unwrap();
    assert_eq!(published.sha256, envhost_registry::Sha256::of(&bytes));

    let fetched = client.fetch(&target.parse().unwrap(), None).unwrap();
    assert_eq!(fetched.component, bytes);
    assert_eq!(fetched.sha256, published.sha256);
    assert_eq!(fetched.manifest, Some(published.manifest));
    let config = fetched.config.expect("an OCI fetch returns the config");
    assert_eq!(config.os, "wasip2");
    assert_eq!(config.layer_digests, vec![published.sha256.to_string()]);
    // The manifest, config and component are now in the cache, each under
    // its digest.
    let cached = files_under(&dir.path().join("cache"));
    assert_eq!(cached.len(), 3, "{cached:?}");
    assert!(cached.iter().any(|p| p.ends_with(published.sha256.hex())));
    assert!(cached.iter().any(|p| p.ends_with(published.manifest.hex())));

    // Resolving the tag again names the same manifest.
    assert_eq!(client.resolve(&oci(&target)).unwrap(), published.manifest);
    // And fetching by that digest gives the same bytes.
    let by_digest = format!(
        "{}@{}",
        registry.reference("plugins/timer"),
        published.manifest
    );
    assert_eq!(
        client
            .fetch(&by_digest.parse().unwrap(), None)
            .unwrap()
            .component,
        bytes
    );
}

#[test]
fn a_moved_tag_changes_nothing_for_a_locked_fetch() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = client(dir.path());
    let target = registry.reference("plugins/timer:stable");
    let first = component("first");
    let second = component("second");

    client.publish(&first, &oci(&target), None).unwrap();
    let fetched = client.fetch(&target.parse().unwrap(), None).unwrap();
    let lock = Lock {
        plugins: vec![locked("timer", &target, &fetched)],
    };
    let lock = Lock::parse(&lock.to_text()).unwrap();

    let moved = client.publish(&second, &oci(&target), None).unwrap();
    assert_ne!(Some(moved.manifest), fetched.manifest);
    // `update --dry-run` sees the tag now names another manifest ...
    assert_eq!(client.resolve(&oci(&target)).unwrap(), moved.manifest);
    // ... but a locked fetch, even with nothing cached, gets what the lock
    // says, by digest.
    let fresh = tempfile::tempdir().unwrap();
    let again = support::client(fresh.path())
        .fetch_locked(&lock.plugins[0], None)
        .unwrap();
    assert_eq!(again.component, first);
    assert_eq!(again.manifest, fetched.manifest);
}

#[test]
fn a_tampered_blob_fails_with_a_digest_error_and_writes_nothing() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let publisher = client(dir.path());
    let bytes = component("honest");
    let target = registry.reference("plugins/timer:1.0");
    let published = publisher.publish(&bytes, &oci(&target), None).unwrap();

    // Same length, different bytes: the size matches, the digest does not.
    let blob = registry.blob_path(&published.sha256);
    let mut tampered = std::fs::read(&blob).unwrap();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(&blob, &tampered).unwrap();

    let fresh = tempfile::tempdir().unwrap();
    let error = support::client(fresh.path())
        .fetch(&target.parse().unwrap(), None)
        .unwrap_err();
    assert!(matches!(error, Error::Digest { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(&published.sha256.to_string()), "{message}");
    assert!(message.contains("nothing was written"), "{message}");
    assert_eq!(
        files_under(&fresh.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );

    // Longer than the manifest says: refused as it streams in.
    tampered.extend_from_slice(b"more");
    std::fs::write(&blob, &tampered).unwrap();
    let error = support::client(fresh.path())
        .fetch(&target.parse().unwrap(), None)
        .unwrap_err();
    assert!(matches!(error, Error::Size { .. }), "{error}");
    assert_eq!(
        files_under(&fresh.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn a_tampered_cache_entry_is_fetched_again() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = client(dir.path());
    let bytes = component("cached");
    let target = registry.reference("plugins/timer:1.0");
    client.publish(&bytes, &oci(&target), None).unwrap();
    let fetched = client.fetch(&target.parse().unwrap(), None).unwrap();

    let entry = dir.path().join("cache/sha256").join(fetched.sha256.hex());
    std::fs::write(&entry, b"\0asm\x0d\x00\x01\x00evil").unwrap();
    let lock = locked("timer", &target, &fetched);
    let again = client.fetch_locked(&lock, None).unwrap();
    assert_eq!(again.component, bytes);
    assert_eq!(std::fs::read(&entry).unwrap(), bytes);
}

#[test]
fn artifacts_not_in_the_wasm_layout_are_refused() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = client(dir.path());
    let wasm = component("x");
    type Case<'a> = (
        &'a str,
        (&'a str, &'a [u8]),
        Vec<(&'a str, &'a [u8])>,
        &'a str,
    );
    let cases: [Case; 4] = [
        (
            "image-config:1",
            ("application/vnd.oci.image.config.v1+json", b"{}"),
            vec![("application/wasm", &wasm)],
            "application/vnd.oci.image.config.v1+json",
        ),
        (
            "octet-layer:1",
            (envhost_registry::CONFIG_MEDIA_TYPE, WASM_CONFIG.as_bytes()),
            vec![("application/octet-stream", &wasm)],
            "application/octet-stream",
        ),
        (
            "two-layers:1",
            (envhost_registry::CONFIG_MEDIA_TYPE, WASM_CONFIG.as_bytes()),
            vec![
                ("application/wasm", &wasm),
                ("application/wasm", b"\0asm\x0d\x00\x01\x00"),
            ],
            "2 layers",
        ),
        (
            "module-config:1",
            (
                envhost_registry::CONFIG_MEDIA_TYPE,
                br#"{"architecture":"wasm","os":"wasip1","layerDigests":[]}"#,
            ),
            vec![("application/wasm", &wasm)],
            "wasip1",
        ),
    ];
    for (repository, config, layers, expected) in cases {
        push_raw(&registry, repository, config, &layers);
        let error = client
            .fetch(&registry.reference(repository).parse().unwrap(), None)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{repository}: {error}");
    }
    assert_eq!(
        files_under(&dir.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn non_components_are_refused_at_the_layer() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = client(dir.path());

    // publish refuses them outright ...
    for (bytes, expected) in [
        (CORE_MODULE, "core WebAssembly module"),
        (&b"#!/bin/sh\necho hi\n"[..], "not WebAssembly"),
    ] {
        let error = client
            .publish(bytes, &oci(&registry.reference("bad/thing:1")), None)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{error}");
    }
    // ... and a fetch refuses what another tool pushed, from the layer's
    // first bytes.
    let mut random = vec![0x5au8; 4096];
    random[..4].copy_from_slice(b"RND!");
    for (repository, bytes, expected) in [
        ("module:1", CORE_MODULE, "core WebAssembly module"),
        ("random:1", &random[..], "not WebAssembly"),
    ] {
        push_raw(
            &registry,
            repository,
            (envhost_registry::CONFIG_MEDIA_TYPE, WASM_CONFIG.as_bytes()),
            &[("application/wasm", bytes)],
        );
        let error = client
            .fetch(&registry.reference(repository).parse().unwrap(), None)
            .unwrap_err();
        assert!(matches!(error, Error::NotAComponent { .. }), "{error}");
        assert!(error.to_string().contains(expected), "{error}");
    }
    assert_eq!(
        files_under(&dir.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn a_locked_fetch_works_offline_from_the_cache() {
    let Some(mut registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let client = client(dir.path());
    let bytes = component("offline");
    let target = registry.reference("plugins/timer:1.0");
    client.publish(&bytes, &oci(&target), None).unwrap();
    let fetched = client.fetch(&target.parse().unwrap(), None).unwrap();
    let lock = locked("timer", &target, &fetched);

    registry.stop();
    // The registry is gone; the cache has everything.
    assert_eq!(client.fetch_locked(&lock, None).unwrap().component, bytes);
    let offline = client_with(dir.path(), |o| o.offline = true);
    assert_eq!(offline.fetch_locked(&lock, None).unwrap().component, bytes);

    // With an empty cache: offline says so; online cannot reach the registry.
    let empty = tempfile::tempdir().unwrap();
    let error = client_with(empty.path(), |o| o.offline = true)
        .fetch_locked(&lock, None)
        .unwrap_err();
    assert!(matches!(error, Error::Offline { .. }), "{error}");
    let error = support::client(empty.path())
        .fetch_locked(&lock, None)
        .unwrap_err();
    assert!(matches!(error, Error::Network { .. }), "{error}");
    assert!(error.to_string().contains("could not reach"), "{error}");
}

#[test]
fn credentials_come_from_a_token_file_or_docker_config() {
    let Some(registry) = Registry::start_with(RegistrySettings {
        htpasswd: true,
        ..RegistrySettings::default()
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let target = registry.reference("private/timer:1.0");
    let bytes = component("private");

    let anonymous = client(dir.path());
    let error = anonymous.publish(&bytes, &oci(&target), None).unwrap_err();
    assert!(matches!(error, Error::Unauthorized { .. }), "{error}");
    assert!(error.to_string().contains("docker login"), "{error}");

    let token = dir.path().join("token");
    std::fs::write(&token, format!("{}:{}\n", support::USER, support::PASSWORD)).unwrap();
    let with_token = client_with(dir.path(), |o| {
        o.credentials = envhost_registry::Credentials::TokenFile(token.clone())
    });
    with_token.publish(&bytes, &oci(&target), None).unwrap();

    let docker = dir.path().join("docker");
    std::fs::create_dir(&docker).unwrap();
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        support::USER,
        support::PASSWORD
    ));
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#,
            registry.address
        ),
    )
    .unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let with_docker = client_with(fresh.path(), |o| {
        o.credentials = envhost_registry::Credentials::DockerConfig {
            dir: Some(docker.clone()),
        }
    });
    assert_eq!(
        with_docker
            .fetch(&target.parse().unwrap(), None)
            .unwrap()
            .component,
        bytes
    );

    // Wrong password: refused, with what to do. (A client reads each
    // registry's credential once, as a command starts using it.)
    std::fs::write(&token, format!("{}:wrong\n", support::USER)).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let with_wrong_token = client_with(fresh.path(), |o| {
        o.credentials = envhost_registry::Credentials::TokenFile(token.clone())
    });
    let error = with_wrong_token
        .fetch(&target.parse().unwrap(), None)
        .unwrap_err();
    assert!(matches!(error, Error::Unauthorized { .. }), "{error}");
}

#[test]
fn plain_http_downloads_are_refused_unless_loopback_or_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let hex = envhost_registry::Sha256::of(b"x").hex();
    let source: Source = format!("http://example.com/x.wasm#sha256={hex}")
        .parse()
        .unwrap();
    let error = client(dir.path()).fetch(&source, None).unwrap_err();
    assert!(matches!(error, Error::Insecure { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("--insecure-registry example.com"),
        "{error}"
    );
}

/// A host address of this machine that is not loopback, if it has one.
fn non_loopback_address() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    // No packet is sent: connecting a UDP socket only picks the route.
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

#[test]
fn a_non_loopback_registry_needs_https_or_insecure_registry() {
    let Some(host) = non_loopback_address() else {
        panic!("this test needs a non-loopback IPv4 address on this machine");
    };
    let Some(registry) = Registry::start_with(RegistrySettings {
        host: host.clone(),
        ..RegistrySettings::default()
    }) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let target = registry.reference("plugins/timer:1.0");
    let bytes = component("remote");

    // Plain HTTP is not tried: the client speaks TLS to a plain-HTTP server.
    let error = client(dir.path())
        .publish(&bytes, &oci(&target), None)
        .unwrap_err();
    assert!(matches!(error, Error::Network { .. }), "{error}");

    let insecure = client_with(dir.path(), |o| o.insecure_hosts = vec![host.clone()]);
    insecure.publish(&bytes, &oci(&target), None).unwrap();
    assert_eq!(
        insecure
            .fetch(&target.parse().unwrap(), None)
            .unwrap()
            .component,
        bytes
    );
}

#[test]
fn signatures_by_key_are_accepted_refused_and_required() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some((alice_key, alice_pub)) = support::key_pair(dir.path(), "alice") else {
        return;
    };
    let Some((mallory_key, _)) = support::key_pair(dir.path(), "mallory") else {
        return;
    };
    let client = client(dir.path());
    let trust = TrustRoot::public_good().unwrap();
    let alice = Signer::key_file(&alice_pub).unwrap();
    let check = SignatureCheck {
        signer: &alice,
        trust: &trust,
    };

    // Signed by alice: accepted, and the bundle's digest is reported.
    let signed = registry.reference("plugins/signed:1.0");
    let bytes = component("signed");
    let published = client
        .publish(
            &bytes,
            &oci(&signed),
            Some(&SigningKey::from_file(&alice_key).unwrap()),
        )
        .unwrap();
    assert_eq!(
        published.signature_tag,
        Some(signature_tag(&published.sha256))
    );
    let fetched = client
        .fetch(&signed.parse().unwrap(), Some(&check))
        .unwrap();
    assert!(fetched.signature.is_some());

    // Signed by mallory: refused, saying whose signature was expected.
    let forged = registry.reference("plugins/forged:1.0");
    let fresh = tempfile::tempdir().unwrap();
    client
        .publish(
            &component("forged"),
            &oci(&forged),
            Some(&SigningKey::from_file(&mallory_key).unwrap()),
        )
        .unwrap();
    let error = support::client(fresh.path())
        .fetch(&forged.parse().unwrap(), Some(&check))
        .unwrap_err();
    assert!(
        matches!(error, Error::Signature(SignatureError::Wrong { .. })),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("the key {}", alice_pub.display())),
        "{message}"
    );
    assert!(message.contains("another key"), "{message}");
    assert_eq!(
        files_under(&fresh.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );

    // Unsigned when a signature is required: refused as missing.
    let unsigned = registry.reference("plugins/unsigned:1.0");
    client
        .publish(&component("unsigned"), &oci(&unsigned), None)
        .unwrap();
    let error = support::client(fresh.path())
        .fetch(&unsigned.parse().unwrap(), Some(&check))
        .unwrap_err();
    assert!(
        matches!(error, Error::Signature(SignatureError::Missing { .. })),
        "{error}"
    );
    assert!(
        error.to_string().contains("no signature was found"),
        "{error}"
    );
    assert_eq!(
        files_under(&fresh.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );

    // A keyless requirement is not met by a key signature.
    let keyless = Signer::Keyless {
        identity: "alice@example.com".into(),
        issuer: "https://accounts.google.com".into(),
    };
    let error = client
        .fetch(
            &signed.parse().unwrap(),
            Some(&SignatureCheck {
                signer: &keyless,
                trust: &trust,
            }),
        )
        .unwrap_err();
    assert!(error.to_string().contains("was made with a key"), "{error}");

    // Mallory signing alice's component too: alice's signature still
    // verifies (one matching signature is enough), mallory's is kept beside.
    client
        .publish(
            &bytes,
            &oci(&signed),
            Some(&SigningKey::from_file(&mallory_key).unwrap()),
        )
        .unwrap();
    let again = support::client(fresh.path())
        .fetch(&signed.parse().unwrap(), Some(&check))
        .unwrap();
    assert_eq!(again.signature, fetched.signature);

    // A locked fetch verifies the signature again, from the cache, offline.
    let mut lock = locked("signed", &signed, &fetched);
    lock.signature = fetched.signature;
    drop(registry);
    let offline = client_with(dir.path(), |o| o.offline = true);
    assert_eq!(
        offline.fetch_locked(&lock, Some(&check)).unwrap().component,
        bytes
    );
    // And with a requirement the cached bundle does not meet, refuses.
    let (_, bob_pub) = support::key_pair(dir.path(), "bob").unwrap();
    let bob = Signer::key_file(&bob_pub).unwrap();
    let error = offline
        .fetch_locked(
            &lock,
            Some(&SignatureCheck {
                signer: &bob,
                trust: &trust,
            }),
        )
        .unwrap_err();
    assert!(
        matches!(error, Error::Signature(SignatureError::Wrong { .. })),
        "{error}"
    );
}

#[test]
fn signed_files_and_downloads_carry_their_bundle_beside_them() {
    let dir = tempfile::tempdir().unwrap();
    let Some((key, public)) = support::key_pair(dir.path(), "alice") else {
        return;
    };
    let bytes = component("local");
    let path = dir.path().join("local.wasm");
    std::fs::write(&path, &bytes).unwrap();
    let trust = TrustRoot::public_good().unwrap();
    let alice = Signer::key_file(&public).unwrap();
    let check = SignatureCheck {
        signer: &alice,
        trust: &trust,
    };
    let client = client(dir.path());
    let source = Source::Path(path.clone());
    let error = client.fetch(&source, Some(&check)).unwrap_err();
    assert!(
        error.to_string().contains("local.wasm.sigstore.json"),
        "{error}"
    );

    let bundle = SigningKey::from_file(&key)
        .unwrap()
        .sign(&envhost_registry::Sha256::of(&bytes))
        .unwrap();
    std::fs::write(dir.path().join("local.wasm.sigstore.json"), bundle).unwrap();
    let fetched = client.fetch(&source, Some(&check)).unwrap();
    assert_eq!(fetched.component, bytes);
    assert!(fetched.signature.is_some());
}

/// A hostile "registry" on 127.0.0.1 that answers every manifest request
/// with an endless body (declared with `length`, or not at all); returns
/// its address and a counter of the bytes it managed to send.
fn endless_manifest_server(
    length: Option<u64>,
) -> (
    String,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    // Never more than this, so a client that does not stop cannot make
    // the test run forever.
    const CAP: u64 = 256 << 20;
    let server = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        for _ in 0..4 {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let mut stream = stream;
            if !request_line.contains("/manifests/") {
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                );
                continue;
            }
            let header = match length {
                Some(length) => format!("HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"),
                None => "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nConnection: close\r\n\r\n".to_owned(),
            };
            if stream.write_all(header.as_bytes()).is_err() {
                continue;
            }
            let chunk = vec![b' '; 1 << 20];
            while counter.load(Ordering::Relaxed) < CAP {
                if stream.write_all(&chunk).is_err() {
                    break;
                }
                counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            return;
        }
    });
    (address, sent, server)
}

#[test]
fn an_endless_manifest_is_cut_off_at_the_bound() {
    for length in [None, Some(5u64 << 30)] {
        let (address, sent, server) = endless_manifest_server(length);
        let dir = tempfile::tempdir().unwrap();
        let error = client(dir.path())
            .fetch(
                &format!("oci://{address}/plugins/huge:1").parse().unwrap(),
                None,
            )
            .unwrap_err();
        assert!(matches!(error, Error::TooLarge { .. }), "{error}");
        assert!(error.to_string().contains("manifest"), "{error}");
        server.join().unwrap();
        let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
        // The client stopped reading at the 4 MiB bound (the server may
        // have had a few MiB in flight in socket buffers).
        assert!(sent < 64 << 20, "{length:?}: the server sent {sent} bytes");
    }
}

#[test]
fn downloads_are_checked_against_their_digest_and_signature() {
    let dir = tempfile::tempdir().unwrap();
    let Some((key, public)) = support::key_pair(dir.path(), "alice") else {
        return;
    };
    let bytes = component("downloaded");
    let sha256 = envhost_registry::Sha256::of(&bytes);
    let bundle = SigningKey::from_file(&key).unwrap().sign(&sha256).unwrap();
    let server = support::FileServer::start(vec![
        ("/x.wasm".to_owned(), bytes.clone()),
        ("/x.wasm.sigstore.json".to_owned(), bundle),
        ("/unsigned.wasm".to_owned(), bytes.clone()),
    ]);
    let url = |path: &str, digest: &envhost_registry::Sha256| -> Source {
        format!("http://{}/{path}#sha256={}", server.address, digest.hex())
            .parse()
            .unwrap()
    };
    let trust = TrustRoot::public_good().unwrap();
    let alice = Signer::key_file(&public).unwrap();
    let check = SignatureCheck {
        signer: &alice,
        trust: &trust,
    };

    // The digest in the address is what the bytes must hash to.
    let wrong = envhost_registry::Sha256::of(b"something else");
    let fresh = tempfile::tempdir().unwrap();
    let error = support::client(fresh.path())
        .fetch(&url("x.wasm", &wrong), None)
        .unwrap_err();
    assert!(matches!(error, Error::Digest { .. }), "{error}");
    assert_eq!(
        files_under(&fresh.path().join("cache")),
        Vec::<std::path::PathBuf>::new()
    );

    let fetched = client(dir.path())
        .fetch(&url("x.wasm", &sha256), Some(&check))
        .unwrap();
    assert_eq!(fetched.component, bytes);
    assert!(fetched.signature.is_some());

    let error = support::client(fresh.path())
        .fetch(&url("unsigned.wasm", &sha256), Some(&check))
        .unwrap_err();
    assert!(
        matches!(error, Error::Signature(SignatureError::Missing { .. })),
        "{error}"
    );
    assert!(
        error.to_string().contains("unsigned.wasm.sigstore.json"),
        "{error}"
    );

    let error = support::client(fresh.path())
        .fetch(&url("gone.wasm", &sha256), None)
        .unwrap_err();
    assert!(matches!(error, Error::NotFound { .. }), "{error}");

    // Once fetched, a locked install needs no server.
    drop(server);
    let lock = LockedPlugin {
        signature: fetched.signature,
        ..locked(
            "x",
            &format!("http://127.0.0.1:9/x.wasm#sha256={}", sha256.hex()),
            &fetched,
        )
    };
    let again = client_with(dir.path(), |o| o.offline = true)
        .fetch_locked(&lock, Some(&check))
        .unwrap();
    assert_eq!(again.component, bytes);
}
