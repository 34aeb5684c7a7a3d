//! The OCI distribution protocol, through oci-client: resolving a tag,
//! fetching a manifest, a config, a component or a signature bundle by
//! digest, and pushing them. Every byte received is checked here (against
//! the digest asked for, the size the manifest declares, the layout) and
//! held in memory; [`Client`] decides when it is written.

use futures_util::StreamExt as _;
use oci_client::Reference;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;

use crate::checked::{network_error, read_checked};
use crate::digest::Sha256;
use crate::error::Error;
use crate::layout;
use crate::lock::LockedPlugin;
use crate::session::{
    EMPTY_CONFIG, EMPTY_CONFIG_MEDIA_TYPE, Fetched, Pending, SIGNATURE_TAG_SUFFIX, Session,
    SignatureCheck, host_of_registry, plain_http_allowed,
};
use crate::signature::{self, BUNDLE_MEDIA_TYPE, MAX_BUNDLE_SIZE};
use crate::source::OciReference;

impl Session {
    /// Reads a tag's manifest once; its digest is the hash of the bytes.
    pub(crate) async fn resolve_tag(
        &self,
        reference: &OciReference,
    ) -> Result<(Sha256, Vec<u8>), Error> {
        let what = reference.to_string();
        let Some(tag) = &reference.tag else {
            unreachable!("a reference without a digest has a tag (checked when parsed)")
        };
        self.online(&what, None)?;
        let bytes = self
            .get_manifest(reference, tag, &what)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: what.clone(),
                detail: format!(
                    "the registry has no tag {tag:?} in {}",
                    reference.repository
                ),
            })?;
        Ok((Sha256::of(&bytes), bytes))
    }

    /// GETs a manifest by tag or digest (`at`); `Ok(None)` when the
    /// registry has none. oci-client reads a manifest whole, however large
    /// the registry makes it, so manifests are read here, streamed against
    /// [`layout::MAX_MANIFEST_SIZE`], with oci-client's token for the
    /// repository.
    pub(crate) async fn get_manifest(
        &self,
        reference: &OciReference,
        at: &str,
        what: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        let label = format!("the manifest of {what}");
        let (oci, auth) = self.connect(&reference.registry).await?;
        let image = Reference::with_tag(
            reference.registry.clone(),
            reference.repository.clone(),
            "latest".to_owned(),
        );
        let token = oci
            .auth(&image, &auth, RegistryOperation::Pull)
            .await
            .map_err(|e| self.oci_error(e, what, &reference.registry))?;
        let registry = image.resolve_registry();
        let scheme = if plain_http_allowed(
            &self.options.insecure_hosts,
            host_of_registry(registry),
            registry,
        ) {
            "http"
        } else {
            "https"
        };
        let url = format!(
            "{scheme}://{registry}/v2/{}/manifests/{at}",
            reference.repository
        );
        let mut request = self
            .http
            .get(&url)
            .header(http::header::ACCEPT, ACCEPTED_MANIFESTS.join(", "));
        request = match (token, &auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, RegistryAuth::Bearer(token)) => request.bearer_auth(token),
            (None, RegistryAuth::Anonymous) => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| network_error(what, &reference.registry, &e))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let detail = format!("{status} from {url}");
            return Err(match status.as_u16() {
                401 | 403 => Error::Unauthorized {
                    what: what.to_owned(),
                    registry: reference.registry.clone(),
                    detail,
                },
                _ => Error::Registry {
                    what: what.to_owned(),
                    detail,
                },
            });
        }
        if let Some(length) = response.content_length()
            && length > layout::MAX_MANIFEST_SIZE
        {
            return Err(Error::TooLarge {
                what: label,
                size: length,
                limit: layout::MAX_MANIFEST_SIZE,
            });
        }
        let stream = response
            .bytes_stream()
            .map(|chunk| chunk.map_err(std::io::Error::other));
        read_checked(
            Box::pin(stream),
            &label,
            &reference.registry,
            None,
            layout::MAX_MANIFEST_SIZE,
            None,
            false,
        )
        .await
        .map(Some)
    }

    /// The manifest with this digest: from `known` (the bytes the tag
    /// resolved to), the cache, or the registry, checked against it.
    pub(crate) async fn manifest(
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
        self.online(what, Some(&digest))?;
        let bytes = self
            .get_manifest(reference, &digest.to_string(), what)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: what.to_owned(),
                detail: format!("the registry has no manifest {digest}"),
            })?;
        let actual = Sha256::of(&bytes);
        if actual != digest {
            return Err(Error::digest(
                format!("the manifest of {what}"),
                &digest,
                &actual,
            ));
        }
        pending.add(digest, &bytes);
        Ok(bytes)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn fetch_oci(
        &self,
        pinned: &OciReference,
        manifest_digest: Sha256,
        what: &str,
        manifest_bytes: Option<Vec<u8>>,
        locked: Option<&LockedPlugin>,
        check: Option<&SignatureCheck<'_>>,
        pending: &mut Pending,
    ) -> Result<Fetched, Error> {
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
                    return Err(Error::Layout {
                        what: what.to_owned(),
                        problem: format!(
                            "its manifest {manifest_digest} holds the component {}, but the lock says {}: the lock file was changed by hand; run `envhost update {}` to resolve the source again",
                            checked.layer_digest, locked.sha256, locked.name
                        ),
                    });
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
    pub(crate) async fn blob(
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
        let bytes = self
            .pull_blob(
                reference,
                &descriptor.media_type,
                digest,
                &label,
                Some(descriptor.size),
                descriptor.size,
                is_component,
            )
            .await?;
        pending.add(digest, &bytes);
        Ok(bytes)
    }

    /// Finds and verifies a signature over `component` kept in the
    /// component's repository; returns the digest of the bundle that
    /// verified.
    pub(crate) async fn oci_signature(
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
        self.online(&looked, None)?;
        let Some(manifest) = self.get_manifest(pinned, &tag, &looked).await? else {
            return Err(signature::SignatureError::Missing {
                what: what.to_owned(),
                expected: check.signer.to_string(),
                looked: format!("nothing at {looked}"),
            }
            .into());
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

    pub(crate) async fn bundle_blob(
        &self,
        pinned: &OciReference,
        descriptor: &layout::Descriptor,
        digest: Sha256,
        what: &str,
    ) -> Result<Vec<u8>, Error> {
        let label = format!("the signature of {what}");
        if descriptor.size > MAX_BUNDLE_SIZE {
            return Err(Error::TooLarge {
                what: label,
                size: descriptor.size,
                limit: MAX_BUNDLE_SIZE,
            });
        }
        self.pull_blob(
            pinned,
            &descriptor.media_type,
            digest,
            &label,
            None,
            MAX_BUNDLE_SIZE,
            false,
        )
        .await
    }

    /// Streams a blob by digest from the registry, checking it as it
    /// arrives (see [`read_checked`]).
    #[allow(clippy::too_many_arguments)]
    async fn pull_blob(
        &self,
        reference: &OciReference,
        media_type: &str,
        digest: Sha256,
        label: &str,
        declared: Option<u64>,
        limit: u64,
        is_component: bool,
    ) -> Result<Vec<u8>, Error> {
        self.online(label, Some(&digest))?;
        let (oci, _) = self.connect(&reference.registry).await?;
        let image = Reference::with_digest(
            reference.registry.clone(),
            reference.repository.clone(),
            digest.to_string(),
        );
        let descriptor = OciDescriptor {
            media_type: media_type.to_owned(),
            digest: digest.to_string(),
            size: declared.unwrap_or(0) as i64,
            ..Default::default()
        };
        let stream = oci
            .pull_blob_stream(&image, &descriptor)
            .await
            .map_err(|e| self.oci_error(e, label, &reference.registry))?;
        read_checked(
            stream.stream,
            label,
            &reference.registry,
            declared,
            limit,
            Some(digest),
            is_component,
        )
        .await
    }

    pub(crate) async fn push_blob(
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

    pub(crate) async fn push_manifest(
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
    pub(crate) async fn push_signature(
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
        let existing = self.get_manifest(target, &tag, what).await?;
        let mut layers: Vec<layout::Descriptor> = existing
            .and_then(|bytes| serde_json::from_slice::<layout::Manifest>(&bytes).ok())
            .map(|manifest| manifest.layers)
            .unwrap_or_default()
            .into_iter()
            .filter(|layer| layer.media_type == BUNDLE_MEDIA_TYPE)
            .collect();
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
    pub(crate) async fn connect(
        &self,
        registry: &str,
    ) -> Result<(oci_client::Client, RegistryAuth), Error> {
        let oci = self.oci_for(registry);
        let auth = self.credentials(registry)?;
        oci.store_auth_if_needed(registry, &auth).await;
        Ok((oci, auth))
    }

    pub(crate) fn oci_for(&self, registry: &str) -> oci_client::Client {
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
            connect_timeout: Some(self.options.stall_timeout),
            read_timeout: Some(self.options.stall_timeout),
            user_agent: concat!("envhost/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        })
    }

    pub(crate) fn credentials(&self, registry: &str) -> Result<RegistryAuth, Error> {
        self.options.credentials.auth_for(registry)
    }

    pub(crate) fn oci_error(
        &self,
        error: OciDistributionError,
        what: &str,
        registry: &str,
    ) -> Error {
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
}

pub(crate) const ACCEPTED_MANIFESTS: &[&str] = &[
    layout::MANIFEST_MEDIA_TYPE,
    layout::INDEX_MEDIA_TYPE,
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// oci-client's digest failure ("Invalid digest. Expected X, got Y") in
/// this crate's words.
pub(crate) fn reported_digest_error(message: &str, what: &str) -> Error {
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
/// The tag under which a component's signatures are kept in its
/// repository: `sha256-<hex>.sigstore`.
pub fn signature_tag(component: &Sha256) -> String {
    format!("sha256-{}{SIGNATURE_TAG_SUFFIX}", component.hex())
}
