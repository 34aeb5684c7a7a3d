//! Fetching and publishing: the only part of envhost that uses the network.
//!
//! Fetching follows one rule: a tag is read once, to learn the digest of
//! its manifest (the digest is computed here from the bytes received, not
//! taken from the registry's word), and everything after that — the
//! manifest, the config, the component, a signature bundle — is fetched by
//! digest and hashed while it streams in, against a size bound. Every blob
//! is held in memory until the whole chain (and the signature, when one is
//! required) has checked out; only then is anything written, to the blob
//! cache, and the caller gets the verified bytes to place.
//!
//! Plain HTTP is used for loopback registries (`localhost`, 127.0.0.0/8,
//! `::1`) and the hosts the operator lists as insecure; everything else is
//! HTTPS, checked against the system's certificate store.

use std::time::Duration;

use futures_util::StreamExt;
use oci_client::Reference;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;

use crate::cache::BlobCache;
use crate::credentials::Credentials;
use crate::digest::{Hasher, Sha256};
use crate::error::Error;
use crate::layout::{self, ComponentInfo, WasmConfig};
use crate::lock::LockedPlugin;
use crate::signature::{self, BUNDLE_MEDIA_TYPE, MAX_BUNDLE_SIZE, Signer, SigningKey, TrustRoot};
use crate::source::{OciReference, Source, UrlSource, is_loopback_host};

/// The largest component fetched unless the caller says otherwise: the
/// Python and JavaScript example plugins are 12-18 MB.
pub const DEFAULT_MAX_COMPONENT_SIZE: u64 = 256 << 20;

/// The tag suffix under which a component's signatures are kept, in the
/// component's repository: `sha256-<component hex>.sigstore`.
pub const SIGNATURE_TAG_SUFFIX: &str = ".sigstore";

/// The suffix of a signature bundle next to a downloaded or local file
/// (`x.wasm.sigstore.json`, the name `cosign sign-blob --bundle` and
/// sigstore-python use).
pub const BUNDLE_FILE_SUFFIX: &str = ".sigstore.json";

const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
const EMPTY_CONFIG: &[u8] = b"{}";

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where fetched blobs are kept; `None` keeps nothing (and nothing can
    /// be fetched offline).
    pub cache: Option<BlobCache>,
    pub credentials: Credentials,
    /// Hosts (`host` or `host:port`) reached over plain HTTP although they
    /// are not loopback.
    pub insecure_hosts: Vec<String>,
    /// Never use the network: fetch from the cache or fail.
    pub offline: bool,
    pub max_component_size: u64,
    /// Connecting, and waiting for the next bytes of an answer.
    pub timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache: BlobCache::default_directory().map(BlobCache::new),
            credentials: Credentials::default(),
            insecure_hosts: Vec::new(),
            offline: false,
            max_component_size: DEFAULT_MAX_COMPONENT_SIZE,
            timeout: Duration::from_secs(60),
        }
    }
}

/// A signature requirement and the root it is checked against.
pub struct SignatureCheck<'a> {
    pub signer: &'a Signer,
    pub trust: &'a TrustRoot,
}

/// A component that passed every check.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub component: Vec<u8>,
    pub sha256: Sha256,
    pub size: u64,
    /// The manifest the source resolved to (OCI sources).
    pub manifest: Option<Sha256>,
    /// The artifact's config (OCI sources).
    pub config: Option<WasmConfig>,
    /// The signature bundle that was verified, when one was required.
    pub signature: Option<Sha256>,
    /// Cache trouble that did not stop the fetch (a read-only cache
    /// folder, say), for the caller to show.
    pub warnings: Vec<String>,
}

/// What `publish` pushed.
#[derive(Debug, Clone)]
pub struct Published {
    pub reference: OciReference,
    pub manifest: Sha256,
    pub sha256: Sha256,
    pub size: u64,
    pub component: ComponentInfo,
    /// The tag holding the signatures, when the component was signed.
    pub signature_tag: Option<String>,
}

/// The registry client. It owns a small single-threaded async runtime, so
/// its callers stay synchronous.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    options: Options,
}

/// Blobs checked in memory, written to the cache once everything passed.
#[derive(Default)]
struct Pending {
    blobs: Vec<(Sha256, Vec<u8>)>,
}

impl Client {
    pub fn new(options: Options) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the network runtime", "", e))?;
        let insecure = options.insecure_hosts.clone();
        let http = reqwest::Client::builder()
            .connect_timeout(options.timeout)
            .read_timeout(options.timeout)
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                // A redirect may not drop TLS the operator did not waive.
                let url = attempt.url().clone();
                let host = url.host_str().unwrap_or("");
                if url.scheme() == "http" && !plain_http_allowed(&insecure, host, host) {
                    attempt.error(format!("redirected to plain HTTP ({url})"))
                } else if attempt.previous().len() >= 5 {
                    attempt.error("more than 5 redirects")
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .map_err(|e| Error::Network {
                what: "setting up HTTPS".to_owned(),
                host: String::new(),
                detail: e.to_string(),
            })?;
        Ok(Client {
            runtime,
            http,
            options,
        })
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The digest of the manifest a tag names now (one request). A
    /// reference that carries a digest is returned as it is.
    pub fn resolve(&self, reference: &OciReference) -> Result<Sha256, Error> {
        if let Some(digest) = reference.digest {
            return Ok(digest);
        }
        self.runtime.block_on(async {
            let (digest, _) = self.resolve_tag(reference).await?;
            Ok(digest)
        })
    }

    /// Fetches a source as `envhost add` does: a tag is resolved (once),
    /// everything else is fetched by digest and checked, and the signature
    /// is verified when `check` asks for one.
    pub fn fetch(&self, source: &Source, check: Option<&SignatureCheck>) -> Result<Fetched, Error> {
        self.runtime.block_on(async {
            let mut pending = Pending::default();
            let mut fetched = match source {
                Source::Oci(reference) => {
                    let what = reference.to_string();
                    let (manifest_digest, manifest_bytes) = match reference.digest {
                        Some(digest) => (digest, None),
                        None => {
                            let (digest, bytes) = self.resolve_tag(reference).await?;
                            (digest, Some(bytes))
                        }
                    };
                    let pinned = reference.with_digest(manifest_digest);
                    self.fetch_oci(&pinned, &what, manifest_bytes, None, check, &mut pending)
                        .await?
                }
                Source::Url(url) => {
                    self.fetch_url(url, url.sha256, check, None, &mut pending)
                        .await?
                }
                Source::Path(path) => self.fetch_path(path, None, check, &mut pending)?,
            };
            fetched.warnings = self.commit(pending);
            Ok(fetched)
        })
    }

    /// Fetches exactly what a lock entry names, as `envhost install`
    /// does: by digest only (a tag that moved since changes nothing), from
    /// the cache when it holds the bytes, else from the source.
    pub fn fetch_locked(
        &self,
        locked: &LockedPlugin,
        check: Option<&SignatureCheck>,
    ) -> Result<Fetched, Error> {
        self.runtime.block_on(async {
            let mut pending = Pending::default();
            let what = format!("plugin {} ({})", locked.name, locked.source);
            let mut fetched = match &locked.source {
                Source::Oci(reference) => {
                    let Some(manifest) = locked.manifest else {
                        return Err(Error::Layout {
                            what,
                            problem: "its lock entry has no manifest digest; run `envhost update` to resolve it again".to_owned(),
                        });
                    };
                    let pinned = reference.with_digest(manifest);
                    self.fetch_oci(&pinned, &what, None, Some(locked), check, &mut pending)
                        .await?
                }
                Source::Url(url) => {
                    self.fetch_url(url, locked.sha256, check, Some(locked), &mut pending)
                        .await?
                }
                Source::Path(path) => self.fetch_path(path, Some(locked), check, &mut pending)?,
            };
            if fetched.sha256 != locked.sha256 {
                return Err(Error::digest(what, &locked.sha256, &fetched.sha256));
            }
            fetched.warnings = self.commit(pending);
            Ok(fetched)
        })
    }

    /// Pushes a component in the CNCF layout under `target` (which names a
    /// tag), and, with `sign`, a signature over its sha256 under the tag
    /// `sha256-<hex>.sigstore` of the same repository (added to the
    /// signatures already there).
    pub fn publish(
        &self,
        component: &[u8],
        target: &OciReference,
        sign: Option<&SigningKey>,
    ) -> Result<Published, Error> {
        let what = target.to_string();
        let Some(tag) = &target.tag else {
            return Err(Error::Layout {
                what,
                problem: "publishing needs a tag to push to (oci://HOST/REPOSITORY:TAG)".to_owned(),
            });
        };
        if target.digest.is_some() {
            return Err(Error::Layout {
                what,
                problem: "a digest is computed when publishing; name only a tag".to_owned(),
            });
        }
        layout::check_component_preamble(component, &what)?;
        let info = layout::component_info(component).map_err(|e| Error::NotAComponent {
            what: what.clone(),
            found: format!("not a valid component ({e})"),
        })?;
        let sha256 = Sha256::of(component);
        let config = layout::config_for(&sha256, info.clone(), created_now());
        let config_bytes = serde_json::to_vec(&config).map_err(|e| Error::Layout {
            what: what.clone(),
            problem: e.to_string(),
        })?;
        let name = target.repository.rsplit('/').next().unwrap_or("component");
        let manifest = layout::manifest_for(&config_bytes, component, &format!("{name}.wasm"));
        let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| Error::Layout {
            what: what.clone(),
            problem: e.to_string(),
        })?;
        let manifest_digest = Sha256::of(&manifest_bytes);
        let bundle = sign.map(|key| key.sign(&sha256)).transpose()?;

        self.runtime.block_on(async {
            let (oci, auth) = self.connect(&target.registry).await?;
            let reference = Reference::with_tag(
                target.registry.clone(),
                target.repository.clone(),
                tag.clone(),
            );
            oci.auth(&reference, &auth, RegistryOperation::Push)
                .await
                .map_err(|e| self.oci_error(e, &what, &target.registry))?;
            self.push_blob(&oci, &reference, component, &what).await?;
            self.push_blob(&oci, &reference, &config_bytes, &what)
                .await?;
            self.push_manifest(&oci, &reference, manifest_bytes, &what)
                .await?;
            let signature_tag = match bundle {
                None => None,
                Some(bundle) => Some(
                    self.push_signature(&oci, target, &sha256, bundle, &what)
                        .await?,
                ),
            };
            Ok(Published {
                reference: target.with_digest(manifest_digest),
                manifest: manifest_digest,
                sha256,
                size: component.len() as u64,
                component: info,
                signature_tag,
            })
        })
    }

    // --- OCI ------------------------------------------------------------

    /// Reads a tag's manifest once; its digest is the hash of the bytes.
    async fn resolve_tag(&self, reference: &OciReference) -> Result<(Sha256, Vec<u8>), Error> {
        let what = reference.to_string();
        let Some(tag) = &reference.tag else {
            unreachable!("a reference without a digest has a tag (checked when parsed)")
        };
        self.online(&what, &Sha256::of(b""))?;
        let (oci, auth) = self.connect(&reference.registry).await?;
        let image = Reference::with_tag(
            reference.registry.clone(),
            reference.repository.clone(),
            tag.clone(),
        );
        let (bytes, _) = oci
            .pull_manifest_raw(&image, &auth, ACCEPTED_MANIFESTS)
            .await
            .map_err(|e| self.oci_error(e, &what, &reference.registry))?;
        if bytes.len() as u64 > layout::MAX_MANIFEST_SIZE {
            return Err(Error::TooLarge {
                what: format!("the manifest of {what}"),
                size: bytes.len() as u64,
                limit: layout::MAX_MANIFEST_SIZE,
            });
        }
        Ok((Sha256::of(&bytes), bytes.to_vec()))
    }

    /// The manifest with this digest: from `known` (the bytes the tag
    /// resolved to), the cache, or the registry, checked against it.
    async fn manifest(
        &self,
        reference: &OciReference,
        digest: Sha256,
        known: Option<Vec<u8>>,
        what: &str,
        pending: &mut Pending,
    ) -> Result<Vec<u8>, Error> {
        if let Some(bytes) = known {
            pending.add(digest, &bytes);
            return Ok(bytes);
        }
        if let Some(bytes) = self.cached(&digest, layout::MAX_MANIFEST_SIZE) {
            return Ok(bytes);
        }
        self.online(what, &digest)?;
        let (oci, auth) = self.connect(&reference.registry).await?;
        let image = Reference::with_digest(
            reference.registry.clone(),
            reference.repository.clone(),
            digest.to_string(),
        );
        let bytes = match oci
            .pull_manifest_raw(&image, &auth, ACCEPTED_MANIFESTS)
            .await
        {
            Ok((bytes, _)) => bytes.to_vec(),
            // oci-client checks the bytes against the digest it asked for;
            // say it the way every other digest failure is said.
            Err(OciDistributionError::DigestError(e)) => {
                return Err(reported_digest_error(
                    &e.to_string(),
                    &format!("the manifest of {what}"),
                ));
            }
            Err(e) => return Err(self.oci_error(e, what, &reference.registry)),
        };
        let actual = Sha256::of(&bytes);
        if actual != digest {
            return Err(Error::digest(
                format!("the manifest of {what}"),
                &digest,
                &actual,
            ));
        }
        if bytes.len() as u64 > layout::MAX_MANIFEST_SIZE {
            return Err(Error::TooLarge {
                what: format!("the manifest of {what}"),
                size: bytes.len() as u64,
                limit: layout::MAX_MANIFEST_SIZE,
            });
        }
        pending.add(digest, &bytes);
        Ok(bytes)
    }

    #[allow(clippy::too_many_arguments)]
    async fn fetch_oci(
        &self,
        pinned: &OciReference,
        what: &str,
        manifest_bytes: Option<Vec<u8>>,
        locked: Option<&LockedPlugin>,
        check: Option<&SignatureCheck<'_>>,
        pending: &mut Pending,
    ) -> Result<Fetched, Error> {
        let manifest_digest = pinned.digest.expect("pinned references carry a digest");
        // With a lock entry whose component is cached intact, nothing else
        // is needed: the lock is what was verified when it was written.
        let cached_component =
            locked.and_then(|l| self.cached(&l.sha256, self.options.max_component_size));
        let (component, config) = match cached_component {
            Some(component) => (component, None),
            None => {
                let manifest = self
                    .manifest(pinned, manifest_digest, manifest_bytes, what, pending)
                    .await?;
                let checked =
                    layout::check_manifest(&manifest, what, self.options.max_component_size)?;
                if let Some(locked) = locked
                    && checked.layer_digest != locked.sha256
                {
                    return Err(Error::digest(
                        format!("the component {what}'s manifest names"),
                        &locked.sha256,
                        &checked.layer_digest,
                    ));
                }
                let config_bytes = self
                    .blob(
                        pinned,
                        &checked.config,
                        checked.config_digest,
                        false,
                        what,
                        pending,
                    )
                    .await?;
                let config = layout::check_config(&config_bytes, what, &checked.layer_digest)?;
                let component = self
                    .blob(
                        pinned,
                        &checked.layer,
                        checked.layer_digest,
                        true,
                        what,
                        pending,
                    )
                    .await?;
                (component, Some(config))
            }
        };
        let sha256 = Sha256::of(&component);
        layout::check_component_preamble(&component, what)?;
        let signature = match check {
            None => None,
            Some(check) => {
                let known = locked.and_then(|l| l.signature);
                Some(
                    self.oci_signature(pinned, &sha256, known, check, what, pending)
                        .await?,
                )
            }
        };
        pending.add(sha256, &component);
        Ok(Fetched {
            size: component.len() as u64,
            component,
            sha256,
            manifest: Some(manifest_digest),
            config,
            signature,
            warnings: Vec::new(),
        })
    }

    /// A blob by digest: from the cache, else streamed from the registry
    /// and checked (size against the descriptor, sha256, and for the
    /// component, its first bytes) as it arrives.
    async fn blob(
        &self,
        reference: &OciReference,
        descriptor: &layout::Descriptor,
        digest: Sha256,
        is_component: bool,
        what: &str,
        pending: &mut Pending,
    ) -> Result<Vec<u8>, Error> {
        let role = if is_component { "component" } else { "config" };
        let label = format!("the {role} of {what}");
        if let Some(bytes) = self.cached(&digest, descriptor.size) {
            return Ok(bytes);
        }
        self.online(&label, &digest)?;
        let (oci, _) = self.connect(&reference.registry).await?;
        let image = Reference::with_digest(
            reference.registry.clone(),
            reference.repository.clone(),
            digest.to_string(),
        );
        let oci_descriptor = OciDescriptor {
            media_type: descriptor.media_type.clone(),
            digest: digest.to_string(),
            size: descriptor.size as i64,
            ..Default::default()
        };
        let stream = oci
            .pull_blob_stream(&image, &oci_descriptor)
            .await
            .map_err(|e| self.oci_error(e, &label, &reference.registry))?;
        let bytes = read_checked(
            stream.stream,
            &label,
            &reference.registry,
            Some(descriptor.size),
            descriptor.size,
            Some(digest),
            is_component,
        )
        .await?;
        pending.add(digest, &bytes);
        Ok(bytes)
    }

    /// Finds and verifies a signature over `component` kept in the
    /// component's repository; returns the digest of the bundle that
    /// verified.
    async fn oci_signature(
        &self,
        pinned: &OciReference,
        component: &Sha256,
        known: Option<Sha256>,
        check: &SignatureCheck<'_>,
        what: &str,
        pending: &mut Pending,
    ) -> Result<Sha256, Error> {
        // The bundle the lock names, by digest (cache first).
        if let Some(digest) = known {
            let bundle = match self.cached(&digest, MAX_BUNDLE_SIZE) {
                Some(bundle) => bundle,
                None => {
                    let descriptor = layout::Descriptor {
                        media_type: BUNDLE_MEDIA_TYPE.to_owned(),
                        digest: digest.to_string(),
                        size: MAX_BUNDLE_SIZE,
                        annotations: None,
                    };
                    let bytes = self.bundle_blob(pinned, &descriptor, digest, what).await?;
                    pending.add(digest, &bytes);
                    bytes
                }
            };
            signature::verify(check.signer, check.trust, component, &bundle, what)?;
            return Ok(digest);
        }
        let tag = signature_tag(component);
        let looked = format!("oci://{}/{}:{tag}", pinned.registry, pinned.repository);
        self.online(&looked, component)?;
        let (oci, auth) = self.connect(&pinned.registry).await?;
        let image = Reference::with_tag(pinned.registry.clone(), pinned.repository.clone(), tag);
        let manifest = match oci
            .pull_manifest_raw(&image, &auth, ACCEPTED_MANIFESTS)
            .await
        {
            Ok((bytes, _)) => bytes,
            Err(e) => {
                return match self.oci_error(e, &looked, &pinned.registry) {
                    Error::NotFound { .. } => Err(signature::SignatureError::Missing {
                        what: what.to_owned(),
                        expected: check.signer.to_string(),
                        looked: format!("nothing at {looked}"),
                    }
                    .into()),
                    other => Err(other),
                };
            }
        };
        let manifest: layout::Manifest =
            serde_json::from_slice(&manifest).map_err(|e| Error::Layout {
                what: looked.clone(),
                problem: format!("the signature manifest is not an OCI image manifest ({e})"),
            })?;
        let bundles: Vec<&layout::Descriptor> = manifest
            .layers
            .iter()
            .filter(|layer| layer.media_type == BUNDLE_MEDIA_TYPE)
            .collect();
        if bundles.is_empty() {
            return Err(signature::SignatureError::Missing {
                what: what.to_owned(),
                expected: check.signer.to_string(),
                looked: format!("{looked} holds no {BUNDLE_MEDIA_TYPE} layer"),
            }
            .into());
        }
        // Several publishers may have signed; one matching signature is
        // enough. The refusal reports the last mismatch.
        let mut last_error = None;
        for descriptor in bundles {
            let Ok(digest) = descriptor.digest.parse::<Sha256>() else {
                continue;
            };
            let bytes = self.bundle_blob(pinned, descriptor, digest, what).await?;
            match signature::verify(check.signer, check.trust, component, &bytes, what) {
                Ok(()) => {
                    pending.add(digest, &bytes);
                    return Ok(digest);
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error
            .expect("at least one bundle was tried or skipped")
            .into())
    }

    async fn bundle_blob(
        &self,
        pinned: &OciReference,
        descriptor: &layout::Descriptor,
        digest: Sha256,
        what: &str,
    ) -> Result<Vec<u8>, Error> {
        let label = format!("the signature of {what}");
        self.online(&label, &digest)?;
        if descriptor.size > MAX_BUNDLE_SIZE {
            return Err(Error::TooLarge {
                what: label,
                size: descriptor.size,
                limit: MAX_BUNDLE_SIZE,
            });
        }
        let (oci, _) = self.connect(&pinned.registry).await?;
        let image = Reference::with_digest(
            pinned.registry.clone(),
            pinned.repository.clone(),
            digest.to_string(),
        );
        let oci_descriptor = OciDescriptor {
            media_type: descriptor.media_type.clone(),
            digest: digest.to_string(),
            size: descriptor.size as i64,
            ..Default::default()
        };
        let stream = oci
            .pull_blob_stream(&image, &oci_descriptor)
            .await
            .map_err(|e| self.oci_error(e, &label, &pinned.registry))?;
        read_checked(
            stream.stream,
            &label,
            &pinned.registry,
            None,
            MAX_BUNDLE_SIZE,
            Some(digest),
            false,
        )
        .await
    }

    async fn push_blob(
        &self,
        oci: &oci_client::Client,
        reference: &Reference,
        bytes: &[u8],
        what: &str,
    ) -> Result<(), Error> {
        let digest = Sha256::of(bytes).to_string();
        let exists = oci
            .blob_exists(reference, &digest)
            .await
            .map_err(|e| self.oci_error(e, what, reference.registry()))?;
        if !exists {
            oci.push_blob(reference, bytes.to_vec(), &digest)
                .await
                .map_err(|e| self.oci_error(e, what, reference.registry()))?;
        }
        Ok(())
    }

    async fn push_manifest(
        &self,
        oci: &oci_client::Client,
        reference: &Reference,
        bytes: Vec<u8>,
        what: &str,
    ) -> Result<(), Error> {
        oci.push_manifest_raw(
            reference,
            bytes,
            http::HeaderValue::from_static(layout::MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| self.oci_error(e, what, reference.registry()))?;
        Ok(())
    }

    /// Adds `bundle` to the signatures kept for `component` in `target`'s
    /// repository; returns the tag.
    async fn push_signature(
        &self,
        oci: &oci_client::Client,
        target: &OciReference,
        component: &Sha256,
        bundle: Vec<u8>,
        what: &str,
    ) -> Result<String, Error> {
        let tag = signature_tag(component);
        let reference = Reference::with_tag(
            target.registry.clone(),
            target.repository.clone(),
            tag.clone(),
        );
        let auth = self.credentials(&target.registry)?;
        let mut layers = match oci
            .pull_manifest_raw(&reference, &auth, ACCEPTED_MANIFESTS)
            .await
        {
            Ok((bytes, _)) => serde_json::from_slice::<layout::Manifest>(&bytes)
                .map(|m| m.layers)
                .unwrap_or_default()
                .into_iter()
                .filter(|layer| layer.media_type == BUNDLE_MEDIA_TYPE)
                .collect(),
            Err(e) => match self.oci_error(e, what, &target.registry) {
                Error::NotFound { .. } => Vec::new(),
                other => return Err(other),
            },
        };
        let bundle_digest = Sha256::of(&bundle);
        if !layers.iter().any(|l| l.digest == bundle_digest.to_string()) {
            layers.push(layout::Descriptor {
                media_type: BUNDLE_MEDIA_TYPE.to_owned(),
                digest: bundle_digest.to_string(),
                size: bundle.len() as u64,
                annotations: None,
            });
        }
        self.push_blob(oci, &reference, &bundle, what).await?;
        self.push_blob(oci, &reference, EMPTY_CONFIG, what).await?;
        let manifest = layout::Manifest {
            schema_version: 2,
            media_type: Some(layout::MANIFEST_MEDIA_TYPE.to_owned()),
            artifact_type: Some(BUNDLE_MEDIA_TYPE.to_owned()),
            config: layout::Descriptor {
                media_type: EMPTY_CONFIG_MEDIA_TYPE.to_owned(),
                digest: Sha256::of(EMPTY_CONFIG).to_string(),
                size: EMPTY_CONFIG.len() as u64,
                annotations: None,
            },
            layers,
            annotations: None,
        };
        let bytes = serde_json::to_vec(&manifest).map_err(|e| Error::Layout {
            what: what.to_owned(),
            problem: e.to_string(),
        })?;
        self.push_manifest(oci, &reference, bytes, what).await?;
        Ok(tag)
    }

    /// A protocol client for `registry`, holding its credentials (oci-client
    /// asks for a token per operation as it needs one).
    async fn connect(&self, registry: &str) -> Result<(oci_client::Client, RegistryAuth), Error> {
        let oci = self.oci_for(registry);
        let auth = self.credentials(registry)?;
        oci.store_auth_if_needed(registry, &auth).await;
        Ok((oci, auth))
    }

    fn oci_for(&self, registry: &str) -> oci_client::Client {
        let host = host_of_registry(registry);
        let protocol = if plain_http_allowed(&self.options.insecure_hosts, host, registry) {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        };
        oci_client::Client::new(ClientConfig {
            protocol,
            // An index is refused, never resolved to some platform's image.
            platform_resolver: None,
            connect_timeout: Some(self.options.timeout),
            read_timeout: Some(self.options.timeout),
            user_agent: concat!("envhost/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        })
    }

    fn credentials(&self, registry: &str) -> Result<RegistryAuth, Error> {
        self.options.credentials.auth_for(registry)
    }

    fn oci_error(&self, error: OciDistributionError, what: &str, registry: &str) -> Error {
        let what = what.to_owned();
        let registry = registry.to_owned();
        match error {
            OciDistributionError::UnauthorizedError { url } => Error::Unauthorized {
                what,
                registry,
                detail: format!("401 from {url}"),
            },
            OciDistributionError::AuthenticationFailure(detail) => Error::Unauthorized {
                what,
                registry,
                detail,
            },
            OciDistributionError::ServerError { code, url, message } => match code {
                401 | 403 => Error::Unauthorized {
                    what,
                    registry,
                    detail: format!("{code} from {url}: {message}"),
                },
                404 => Error::NotFound {
                    what,
                    detail: format!("404 from {url}"),
                },
                _ => Error::Registry {
                    what,
                    detail: format!("{code} from {url}: {message}"),
                },
            },
            OciDistributionError::RegistryError { envelope, url } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                let detail = format!("{envelope} ({url})");
                if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    Error::NotFound { what, detail }
                } else if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    Error::Unauthorized {
                        what,
                        registry,
                        detail,
                    }
                } else {
                    Error::Registry { what, detail }
                }
            }
            OciDistributionError::RequestError(e) => network_error(&what, &registry, &e),
            OciDistributionError::DigestError(e) => reported_digest_error(&e.to_string(), &what),
            other => Error::Registry {
                what,
                detail: other.to_string(),
            },
        }
    }

    // --- URLs and files -----------------------------------------------------

    async fn fetch_url(
        &self,
        url: &UrlSource,
        expected: Sha256,
        check: Option<&SignatureCheck<'_>>,
        locked: Option<&LockedPlugin>,
        pending: &mut Pending,
    ) -> Result<Fetched, Error> {
        let what = url.url.clone();
        let component = match self.cached(&expected, self.options.max_component_size) {
            Some(bytes) => bytes,
            None => {
                let bytes = self
                    .download(
                        url,
                        &url.url,
                        self.options.max_component_size,
                        Some(expected),
                        true,
                    )
                    .await?
                    .ok_or_else(|| Error::NotFound {
                        what: what.clone(),
                        detail: "404".to_owned(),
                    })?;
                pending.add(expected, &bytes);
                bytes
            }
        };
        let signature = match check {
            None => None,
            Some(check) => {
                let bundle_url = format!("{}{BUNDLE_FILE_SUFFIX}", url.url);
                let known = locked.and_then(|l| l.signature);
                let cached = known.and_then(|d| self.cached(&d, MAX_BUNDLE_SIZE));
                let bundle = match cached {
                    Some(bundle) => bundle,
                    None => self
                        .download(url, &bundle_url, MAX_BUNDLE_SIZE, known, false)
                        .await?
                        .ok_or_else(|| signature::SignatureError::Missing {
                            what: what.clone(),
                            expected: check.signer.to_string(),
                            looked: format!("nothing at {bundle_url}"),
                        })?,
                };
                signature::verify(check.signer, check.trust, &expected, &bundle, &what)?;
                let digest = Sha256::of(&bundle);
                pending.add(digest, &bundle);
                Some(digest)
            }
        };
        Ok(Fetched {
            size: component.len() as u64,
            component,
            sha256: expected,
            manifest: None,
            config: None,
            signature,
            warnings: Vec::new(),
        })
    }

    /// GETs `address` (on `source`'s host); `Ok(None)` on 404.
    async fn download(
        &self,
        source: &UrlSource,
        address: &str,
        limit: u64,
        expected: Option<Sha256>,
        is_component: bool,
    ) -> Result<Option<Vec<u8>>, Error> {
        let host = source.host();
        let digest = expected.unwrap_or(source.sha256);
        self.online(address, &digest)?;
        let authority = address
            .split_once("://")
            .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
        if source.is_plain_http()
            && !plain_http_allowed(&self.options.insecure_hosts, host, authority)
        {
            return Err(Error::Insecure {
                what: address.to_owned(),
                host: host.to_owned(),
            });
        }
        let response = self
            .http
            .get(address)
            .send()
            .await
            .map_err(|e| network_error(address, host, &e))?;
        match response.status() {
            reqwest::StatusCode::NOT_FOUND => return Ok(None),
            status if !status.is_success() => {
                return Err(match status.as_u16() {
                    401 | 403 => Error::Unauthorized {
                        what: address.to_owned(),
                        registry: host.to_owned(),
                        detail: status.to_string(),
                    },
                    _ => Error::Registry {
                        what: address.to_owned(),
                        detail: status.to_string(),
                    },
                });
            }
            _ => {}
        }
        if let Some(length) = response.content_length()
            && length > limit
        {
            return Err(Error::TooLarge {
                what: address.to_owned(),
                size: length,
                limit,
            });
        }
        let stream = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(std::io::Error::other));
        read_checked(
            Box::pin(stream),
            address,
            host,
            None,
            limit,
            expected,
            is_component,
        )
        .await
        .map(Some)
    }

    fn fetch_path(
        &self,
        path: &std::path::Path,
        locked: Option<&LockedPlugin>,
        check: Option<&SignatureCheck>,
        pending: &mut Pending,
    ) -> Result<Fetched, Error> {
        let what = path.display().to_string();
        let component = read_file(path, self.options.max_component_size, &what)?;
        layout::check_component_preamble(&component, &what)?;
        let sha256 = Sha256::of(&component);
        if let Some(locked) = locked
            && locked.sha256 != sha256
        {
            return Err(Error::digest(what, &locked.sha256, &sha256));
        }
        let signature = match check {
            None => None,
            Some(check) => {
                let mut bundle_path = path.as_os_str().to_owned();
                bundle_path.push(BUNDLE_FILE_SUFFIX);
                let bundle_path = std::path::PathBuf::from(bundle_path);
                if !bundle_path.exists() {
                    return Err(signature::SignatureError::Missing {
                        what,
                        expected: check.signer.to_string(),
                        looked: format!("no file {}", bundle_path.display()),
                    }
                    .into());
                }
                let bundle = read_file(&bundle_path, MAX_BUNDLE_SIZE, &what)?;
                signature::verify(check.signer, check.trust, &sha256, &bundle, &what)?;
                let digest = Sha256::of(&bundle);
                pending.add(digest, &bundle);
                Some(digest)
            }
        };
        Ok(Fetched {
            size: component.len() as u64,
            component,
            sha256,
            manifest: None,
            config: None,
            signature,
            warnings: Vec::new(),
        })
    }

    // --- the cache and the network switch -------------------------------

    fn cached(&self, digest: &Sha256, max_size: u64) -> Option<Vec<u8>> {
        // A cache that cannot be read is a cache miss: the network is the
        // source of truth and every byte from it is verified anyway.
        self.options
            .cache
            .as_ref()
            .and_then(|cache| cache.get(digest, max_size).ok().flatten())
    }

    fn online(&self, what: &str, digest: &Sha256) -> Result<(), Error> {
        if self.options.offline {
            return Err(Error::Offline {
                what: what.to_owned(),
                digest: *digest,
                cache: self
                    .options
                    .cache
                    .as_ref()
                    .map(|c| c.dir().to_owned())
                    .unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// Writes what passed every check to the cache.
    fn commit(&self, pending: Pending) -> Vec<String> {
        let Some(cache) = &self.options.cache else {
            return Vec::new();
        };
        let mut warnings = Vec::new();
        for (digest, bytes) in pending.blobs {
            if let Err(e) = cache.put(&digest, &bytes) {
                warnings.push(format!("could not keep {digest} in the cache: {e}"));
            }
        }
        warnings
    }
}

impl Pending {
    fn add(&mut self, digest: Sha256, bytes: &[u8]) {
        if !self.blobs.iter().any(|(d, _)| *d == digest) {
            self.blobs.push((digest, bytes.to_vec()));
        }
    }
}

const ACCEPTED_MANIFESTS: &[&str] = &[
    layout::MANIFEST_MEDIA_TYPE,
    layout::INDEX_MEDIA_TYPE,
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Reads a stream into memory, checking as the bytes arrive: never more
/// than `limit` (or the `declared` size), the component preamble as soon as
/// 8 bytes are in, and at the end the exact size and the sha256.
async fn read_checked(
    mut stream: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send>,
    >,
    what: &str,
    host: &str,
    declared: Option<u64>,
    limit: u64,
    expected: Option<Sha256>,
    is_component: bool,
) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
    let mut hasher = Hasher::default();
    let mut preamble_checked = !is_component;
    let bound = declared.unwrap_or(limit).min(limit);
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                // oci-client's own digest check fails the stream's last
                // read; ours says it with both digests.
                if let (Some(expected), Some(declared)) = (expected, declared)
                    && hasher.len() == declared
                {
                    let actual = hasher.finish();
                    if actual != expected {
                        return Err(Error::digest(what.to_owned(), &expected, &actual));
                    }
                }
                return Err(Error::Network {
                    what: what.to_owned(),
                    host: host.to_owned(),
                    detail: e.to_string(),
                });
            }
        };
        if hasher.len() + chunk.len() as u64 > bound {
            return Err(match declared {
                Some(declared) if declared <= limit => Error::Size {
                    what: what.to_owned(),
                    expected: declared,
                    actual: hasher.len() + chunk.len() as u64,
                },
                _ => Error::TooLarge {
                    what: what.to_owned(),
                    size: hasher.len() + chunk.len() as u64,
                    limit,
                },
            });
        }
        hasher.update(&chunk);
        bytes.extend_from_slice(&chunk);
        if !preamble_checked && bytes.len() >= 8 {
            layout::check_component_preamble(&bytes, what)?;
            preamble_checked = true;
        }
    }
    if let Some(declared) = declared
        && hasher.len() != declared
    {
        return Err(Error::Size {
            what: what.to_owned(),
            expected: declared,
            actual: hasher.len(),
        });
    }
    if !preamble_checked {
        layout::check_component_preamble(&bytes, what)?;
    }
    let actual = hasher.finish();
    if let Some(expected) = expected
        && actual != expected
    {
        return Err(Error::digest(what.to_owned(), &expected, &actual));
    }
    Ok(bytes)
}

/// oci-client's digest failure ("Invalid digest. Expected X, got Y") in
/// this crate's words.
fn reported_digest_error(message: &str, what: &str) -> Error {
    let expected = message
        .split("Expected ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or("the digest asked for");
    let actual = message.rsplit("got ").next().unwrap_or("another digest");
    Error::Digest {
        what: what.to_owned(),
        expected: expected.to_owned(),
        actual: actual.to_owned(),
    }
}

fn read_file(path: &std::path::Path, limit: u64, what: &str) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| Error::io("reading", path, e))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("reading", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(Error::TooLarge {
            what: what.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

fn network_error(what: &str, host: &str, error: &reqwest::Error) -> Error {
    use std::error::Error as _;
    // oci-client reports some refusals (a HEAD for a blob, say) as
    // request errors carrying the status.
    match error.status().map(|s| s.as_u16()) {
        Some(401 | 403) => {
            return Error::Unauthorized {
                what: what.to_owned(),
                registry: host.to_owned(),
                detail: error.to_string(),
            };
        }
        Some(404) => {
            return Error::NotFound {
                what: what.to_owned(),
                detail: error.to_string(),
            };
        }
        Some(_) => {
            return Error::Registry {
                what: what.to_owned(),
                detail: error.to_string(),
            };
        }
        None => {}
    }
    let mut detail = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    Error::Network {
        what: what.to_owned(),
        host: host.to_owned(),
        detail,
    }
}

fn host_of_registry(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// Whether plain HTTP may be used for `host` (no port) / `authority`
/// (`host:port`).
fn plain_http_allowed(insecure: &[String], host: &str, authority: &str) -> bool {
    is_loopback_host(host) || insecure.iter().any(|h| h == host || h == authority)
}

/// The tag of the signatures over a component.
pub fn signature_tag(component: &Sha256) -> String {
    format!("sha256-{}{SIGNATURE_TAG_SUFFIX}", component.hex())
}

/// `created` for a published config: `SOURCE_DATE_EPOCH` when set (so a
/// rebuild publishes the same manifest digest), else now.
fn created_now() -> String {
    let time = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|secs| std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap_or_else(std::time::SystemTime::now);
    humantime::format_rfc3339_seconds(time).to_string()
}
