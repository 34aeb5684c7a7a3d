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
//! HTTPS, checked against the system's certificate store. Credentials go
//! where `auth` allows, and every transfer runs under the stall timeout
//! and the deadline of [`Options`].

use std::time::Duration;

use crate::digest::Sha256;
use crate::error::Error;
use crate::layout::{self, ComponentInfo};
use crate::lock::LockedPlugin;
use crate::session::{Fetched, Options, Pending, Session, SignatureCheck};
use crate::signature::SigningKey;
use crate::source::{OciReference, Source};

/// The registry client. It owns a small single-threaded async runtime, so
/// its callers stay synchronous.
pub struct Client {
    runtime: tokio::runtime::Runtime,
    session: Session,
}

/// What `publish` pushed.
#[derive(Debug, Clone)]
pub struct Published {
    /// Where it went, with the manifest digest.
    pub reference: OciReference,
    /// The manifest pushed.
    pub manifest: Sha256,
    /// The component (the layer).
    pub sha256: Sha256,
    /// The component's size in bytes.
    pub size: u64,
    /// What the config says the component imports and exports.
    pub component: ComponentInfo,
    /// The tag holding the signatures, when the component was signed.
    pub signature_tag: Option<String>,
}

impl Client {
    /// A client with these options (no network is used until asked).
    pub fn new(options: Options) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the network runtime", "", e))?;
        Ok(Client {
            runtime,
            session: Session::new(options)?,
        })
    }

    /// The digest of the manifest a tag names now (one request). A
    /// reference that carries a digest is returned as it is.
    pub fn resolve(&self, reference: &OciReference) -> Result<Sha256, Error> {
        if let Some(digest) = reference.digest {
            return Ok(digest);
        }
        self.runtime.block_on(async {
            let (digest, _) = self.session.resolve_tag(reference).await?;
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
                            let (digest, bytes) = self.session.resolve_tag(reference).await?;
                            (digest, Some(bytes))
                        }
                    };
                    let pinned = reference.with_digest(manifest_digest);
                    self.session
                        .fetch_oci(
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
                    self.session
                        .fetch_url(url, url.sha256, check, None, &mut pending)
                        .await?
                }
                Source::Path(path) => self.session.fetch_path(path, None, check, &mut pending)?,
            };
            fetched.warnings = self.session.commit(pending);
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
                    self.session.fetch_oci(&pinned, manifest, &what, None, Some(locked), check, &mut pending)
                        .await?
                }
                Source::Url(url) => {
                    self.session.fetch_url(url, locked.sha256, check, Some(locked), &mut pending)
                        .await?
                }
                Source::Path(path) => self.session.fetch_path(path, Some(locked), check, &mut pending)?,
            };
            if fetched.sha256 != locked.sha256 {
                return Err(Error::digest(what, &locked.sha256, &fetched.sha256));
            }
            fetched.warnings = self.session.commit(pending);
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
            self.session.push_blob(target, component, &what).await?;
            self.session.push_blob(target, &config_bytes, &what).await?;
            self.session
                .push_manifest(target, tag, manifest_bytes, &what)
                .await?;
            let signature_tag = match bundle {
                None => None,
                Some(bundle) => Some(
                    self.session
                        .push_signature(target, &sha256, bundle, &what)
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
