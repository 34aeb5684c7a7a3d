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

use oci_client::Reference;
use oci_client::RegistryOperation;

use crate::cache::BlobCache;
use crate::credentials::Credentials;
use crate::digest::Sha256;
use crate::error::Error;
use crate::layout::{self, ComponentInfo, WasmConfig};
use crate::lock::LockedPlugin;
use crate::oci::plain_http_allowed;
use crate::signature::{Signer, SigningKey, TrustRoot};
use crate::source::{OciReference, Source};

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

pub(crate) const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
pub(crate) const EMPTY_CONFIG: &[u8] = b"{}";

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
    pub(crate) http: reqwest::Client,
    pub(crate) options: Options,
}

/// Blobs checked in memory, written to the cache once everything passed.
#[derive(Default)]
pub(crate) struct Pending {
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
                    self.fetch_oci(
                        &pinned,
                        manifest_digest,
                        &what,
                        manifest_bytes,
                        None,
                        check,
                        &mut pending,
                    )
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
                    self.fetch_oci(&pinned, manifest, &what, None, Some(locked), check, &mut pending)
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

    // --- the cache and the network switch -------------------------------

    pub(crate) fn cached(&self, digest: &Sha256, max_size: u64) -> Option<Vec<u8>> {
        // A cache that cannot be read is a cache miss: the network is the
        // source of truth and every byte from it is verified anyway.
        self.options
            .cache
            .as_ref()
            .and_then(|cache| cache.get(digest, max_size).ok().flatten())
    }

    /// Refuses when the network is off; `digest` is what was looked for
    /// in the cache (`None`: a tag, which only the registry can resolve).
    pub(crate) fn online(&self, what: &str, digest: Option<&Sha256>) -> Result<(), Error> {
        if !self.options.offline {
            return Ok(());
        }
        let reason = match (digest, &self.options.cache) {
            (None, _) => "a tag can only be resolved by its registry".to_owned(),
            (Some(digest), Some(cache)) => {
                format!("{digest} is not in the cache ({})", cache.dir().display())
            }
            (Some(digest), None) => format!("{digest} is needed and there is no cache"),
        };
        Err(Error::Offline {
            what: what.to_owned(),
            reason,
        })
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

impl Fetched {
    /// A component that came as a file (a download or a local path).
    pub(crate) fn file(component: Vec<u8>, sha256: Sha256, signature: Option<Sha256>) -> Self {
        Fetched {
            size: component.len() as u64,
            component,
            sha256,
            manifest: None,
            config: None,
            signature,
            warnings: Vec::new(),
        }
    }
}

impl Pending {
    pub(crate) fn add(&mut self, digest: Sha256, bytes: &[u8]) {
        if !self.blobs.iter().any(|(d, _)| *d == digest) {
            self.blobs.push((digest, bytes.to_vec()));
        }
    }
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
