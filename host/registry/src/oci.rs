//! The OCI distribution protocol: resolving a tag, fetching a manifest,
//! a config, a component or a signature bundle by digest, and pushing
//! them. Every request goes to the registry's own address with the
//! authorization `auth` gives for it, and runs under the transfer limits;
//! every byte received is checked here (against the digest asked for, the
//! size the manifest declares, the layout, a bound) and held in memory;
//! [`Client`](crate::Client) decides when it is written.
//!
//! oci-client was used for this until its authentication could not be
//! bounded: it sends a registry's credentials to whatever auth realm the
//! registry names, over plain HTTP too, and reads token and error answers
//! whole, on an HTTP client of its own that a caller cannot limit. The few
//! requests a Wasm artifact needs (the distribution specification's
//! `GET`/`HEAD` of manifests and blobs, a monolithic blob upload, a
//! manifest `PUT`) are made here instead.

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use reqwest::{StatusCode, Url};

use crate::auth::Access;
use crate::checked::read_checked;
use crate::digest::Sha256;
use crate::error::Error;
use crate::layout;
use crate::lock::LockedPlugin;
use crate::reach::{plain_http_allowed_for, registry_scheme};
use crate::session::{
    EMPTY_CONFIG, EMPTY_CONFIG_MEDIA_TYPE, Fetched, Pending, SIGNATURE_TAG_SUFFIX, Session,
    SignatureCheck,
};
use crate::signature::{self, BUNDLE_MEDIA_TYPE, MAX_BUNDLE_SIZE};
use crate::source::OciReference;
use crate::transfer::{self, Progress};

/// The most signature bundles tried for one component.
pub(crate) const MAX_SIGNATURES_TRIED: usize = 16;

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

    /// GETs a manifest by tag or digest (`at`), streamed against
    /// [`layout::MAX_MANIFEST_SIZE`]; `Ok(None)` when the registry has none.
    pub(crate) async fn get_manifest(
        &self,
        reference: &OciReference,
        at: &str,
        what: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        let label = format!("the manifest of {what}");
        let url = self.registry_url(reference, &format!("manifests/{at}"), what)?;
        let authorization = self.authorization(reference, Access::Pull, what).await?;
        let registry = reference.registry.as_str();
        let label = label.as_str();
        transfer::limited(self.limits(), label, registry, |progress| async move {
            let request = self
                .http
                .get(url)
                .header(ACCEPT, ACCEPTED_MANIFESTS.join(", "));
            let response = send(request, authorization, &progress, label, registry).await?;
            let status = response.status();
            if status == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(refusal(response, &progress, what, registry).await);
            }
            if let Some(length) = response.content_length()
                && length > layout::MAX_MANIFEST_SIZE
            {
                return Err(Error::TooLarge {
                    what: label.to_owned(),
                    size: length,
                    limit: layout::MAX_MANIFEST_SIZE,
                });
            }
            read_checked(
                transfer::body(response, &progress),
                label,
                registry,
                None,
                layout::MAX_MANIFEST_SIZE,
                None,
                false,
            )
            .await
            .map(Some)
        })
        .await
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
        // enough. The refusal reports the last mismatch. A registry listing
        // thousands would make as many transfers: the first few are tried.
        let mut last_error = None;
        for descriptor in bundles.into_iter().take(MAX_SIGNATURES_TRIED) {
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
        self.pull_blob(pinned, digest, &label, None, MAX_BUNDLE_SIZE, false)
            .await
    }

    /// Streams a blob by digest from the registry, checking it as it
    /// arrives (see [`read_checked`]). A registry may redirect it to
    /// storage elsewhere; the authorization is not sent there.
    async fn pull_blob(
        &self,
        reference: &OciReference,
        digest: Sha256,
        label: &str,
        declared: Option<u64>,
        limit: u64,
        is_component: bool,
    ) -> Result<Vec<u8>, Error> {
        self.online(label, Some(&digest))?;
        let url = self.registry_url(reference, &format!("blobs/{digest}"), label)?;
        let authorization = self.authorization(reference, Access::Pull, label).await?;
        let registry = reference.registry.as_str();
        transfer::limited(self.limits(), label, registry, |progress| async move {
            let response = send(
                self.http.get(url),
                authorization,
                &progress,
                label,
                registry,
            )
            .await?;
            let status = response.status();
            if !status.is_success() {
                return Err(refusal(response, &progress, label, registry).await);
            }
            let bound = declared.unwrap_or(limit).min(limit);
            if let Some(length) = response.content_length()
                && length > bound
            {
                return Err(match declared {
                    Some(declared) if declared <= limit => Error::Size {
                        what: label.to_owned(),
                        expected: declared,
                        actual: length,
                    },
                    _ => Error::TooLarge {
                        what: label.to_owned(),
                        size: length,
                        limit,
                    },
                });
            }
            read_checked(
                transfer::body(response, &progress),
                label,
                registry,
                declared,
                limit,
                Some(digest),
                is_component,
            )
            .await
        })
        .await
    }

    /// Pushes a blob unless the repository has it: a monolithic upload
    /// (`POST` for an upload address, `PUT` of the bytes there).
    pub(crate) async fn push_blob(
        &self,
        target: &OciReference,
        bytes: &[u8],
        what: &str,
    ) -> Result<(), Error> {
        let digest = Sha256::of(bytes);
        let authorization = self.authorization(target, Access::Push, what).await?;
        let registry = target.registry.as_str();
        let exists_url = self.registry_url(target, &format!("blobs/{digest}"), what)?;
        let exists = transfer::limited(self.limits(), what, registry, |progress| {
            let authorization = authorization.clone();
            async move {
                let request = self.http.head(exists_url);
                let response = send(request, authorization, &progress, what, registry).await?;
                match response.status() {
                    status if status.is_success() => Ok(true),
                    StatusCode::NOT_FOUND => Ok(false),
                    _ => Err(refusal(response, &progress, what, registry).await),
                }
            }
        })
        .await?;
        if exists {
            return Ok(());
        }
        let start_url = self.registry_url(target, "blobs/uploads/", what)?;
        let location = transfer::limited(self.limits(), what, registry, |progress| {
            let authorization = authorization.clone();
            async move {
                let request = self.http.post(start_url).header(CONTENT_LENGTH, 0);
                let response = send(request, authorization, &progress, what, registry).await?;
                if !response.status().is_success() {
                    return Err(refusal(response, &progress, what, registry).await);
                }
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned);
                location.ok_or_else(|| Error::Registry {
                    what: what.to_owned(),
                    detail: format!(
                        "{registry} started an upload without saying where to send it (no Location header)"
                    ),
                })
            }
        })
        .await?;
        let upload_url = self.upload_url(target, &location, &digest, what)?;
        // An upload address elsewhere (a storage service) is not sent the
        // registry's authorization.
        let same_origin = self.registry_url(target, "", what)?.origin() == upload_url.origin();
        let upload_authorization = authorization.filter(|_| same_origin);
        let length = bytes.len();
        let bytes = Bytes::copy_from_slice(bytes);
        transfer::limited(self.limits(), what, registry, |progress| async move {
            let request = self
                .http
                .put(upload_url)
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(CONTENT_LENGTH, length)
                .body(transfer::upload(bytes, &progress));
            let response = send(request, upload_authorization, &progress, what, registry).await?;
            if !response.status().is_success() {
                return Err(refusal(response, &progress, what, registry).await);
            }
            Ok(())
        })
        .await
    }

    /// Pushes a manifest under `tag`.
    pub(crate) async fn push_manifest(
        &self,
        target: &OciReference,
        tag: &str,
        bytes: Vec<u8>,
        what: &str,
    ) -> Result<(), Error> {
        let url = self.registry_url(target, &format!("manifests/{tag}"), what)?;
        let authorization = self.authorization(target, Access::Push, what).await?;
        let registry = target.registry.as_str();
        let length = bytes.len();
        transfer::limited(self.limits(), what, registry, |progress| async move {
            let request = self
                .http
                .put(url)
                .header(CONTENT_TYPE, layout::MANIFEST_MEDIA_TYPE)
                .header(CONTENT_LENGTH, length)
                .body(transfer::upload(Bytes::from(bytes), &progress));
            let response = send(request, authorization, &progress, what, registry).await?;
            if !response.status().is_success() {
                return Err(refusal(response, &progress, what, registry).await);
            }
            Ok(())
        })
        .await
    }

    /// Adds `bundle` to the signatures kept for `component` in `target`'s
    /// repository; returns the tag.
    pub(crate) async fn push_signature(
        &self,
        target: &OciReference,
        component: &Sha256,
        bundle: Vec<u8>,
        what: &str,
    ) -> Result<String, Error> {
        let tag = signature_tag(component);
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
        self.push_blob(target, &bundle, what).await?;
        self.push_blob(target, EMPTY_CONFIG, what).await?;
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
        self.push_manifest(target, &tag, bytes, what).await?;
        Ok(tag)
    }

    /// `scheme://registry/v2/REPOSITORY/PATH`.
    fn registry_url(&self, reference: &OciReference, path: &str, what: &str) -> Result<Url, Error> {
        let scheme = registry_scheme(&self.options.insecure_hosts, &reference.registry);
        let text = if path.is_empty() {
            format!("{scheme}://{}/", reference.registry)
        } else {
            format!(
                "{scheme}://{}/v2/{}/{path}",
                reference.registry, reference.repository
            )
        };
        Url::parse(&text).map_err(|e| Error::Registry {
            what: what.to_owned(),
            detail: format!("{text} is not an address ({e})"),
        })
    }

    /// The address an upload's bytes go to: the registry's `Location`
    /// (relative to the registry, or absolute), with the blob's digest.
    fn upload_url(
        &self,
        target: &OciReference,
        location: &str,
        digest: &Sha256,
        what: &str,
    ) -> Result<Url, Error> {
        let base = self.registry_url(target, "", what)?;
        let mut url = base.join(location).map_err(|e| Error::Registry {
            what: what.to_owned(),
            detail: format!("the upload address {location:?} is not an address ({e})"),
        })?;
        match url.scheme() {
            "https" => {}
            "http" if plain_http_allowed_for(&self.options.insecure_hosts, &url) => {}
            "http" => {
                return Err(Error::Insecure {
                    what: format!("{what}: the upload address {url}"),
                    host: url.host_str().unwrap_or("").to_owned(),
                });
            }
            other => {
                return Err(Error::Registry {
                    what: what.to_owned(),
                    detail: format!("the upload address {url} is a {other}: address"),
                });
            }
        }
        url.query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        Ok(url)
    }
}

/// Sends a request with `authorization` (the caller has decided it may go
/// to the request's address).
async fn send(
    request: reqwest::RequestBuilder,
    authorization: Option<http::HeaderValue>,
    progress: &Progress,
    what: &str,
    registry: &str,
) -> Result<reqwest::Response, Error> {
    let request = match authorization {
        Some(value) => request.header(AUTHORIZATION, value),
        None => request,
    };
    transfer::send(request, progress, what, registry).await
}

/// The error for an answer that is not a success, with the first part of
/// the registry's explanation (an OCI error list when it sent one).
async fn refusal(
    response: reqwest::Response,
    progress: &Progress,
    what: &str,
    registry: &str,
) -> Error {
    let status = response.status();
    let url = response.url().to_string();
    let explanation = transfer::explanation(response, progress).await;
    let codes = error_codes(&explanation);
    let detail = match (codes.is_empty(), explanation.is_empty()) {
        (false, _) => format!("{status} from {url}: {}", codes.join("; ")),
        (true, false) => format!("{status} from {url}: {explanation}"),
        (true, true) => format!("{status} from {url}"),
    };
    let what = what.to_owned();
    let not_found = [
        "MANIFEST_UNKNOWN",
        "BLOB_UNKNOWN",
        "NAME_UNKNOWN",
        "NOT_FOUND",
    ];
    match status.as_u16() {
        401 | 403 => Error::Unauthorized {
            what,
            registry: registry.to_owned(),
            detail,
        },
        404 => Error::NotFound { what, detail },
        _ if codes
            .iter()
            .any(|code| not_found.iter().any(|known| code.starts_with(known))) =>
        {
            Error::NotFound { what, detail }
        }
        _ => Error::Registry { what, detail },
    }
}

/// `CODE: message` of each error in an OCI error list
/// (`{"errors":[{"code":…,"message":…}]}`).
fn error_codes(text: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct List {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: String,
        #[serde(default)]
        message: String,
    }
    serde_json::from_str::<List>(text)
        .map(|list| {
            list.errors
                .into_iter()
                .map(|e| format!("{}: {}", e.code, e.message))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) const ACCEPTED_MANIFESTS: &[&str] = &[
    layout::MANIFEST_MEDIA_TYPE,
    layout::INDEX_MEDIA_TYPE,
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// The tag under which a component's signatures are kept in its
/// repository: `sha256-<hex>.sigstore`.
pub fn signature_tag(component: &Sha256) -> String {
    format!("sha256-{}{SIGNATURE_TAG_SUFFIX}", component.hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oci_error_lists_are_read() {
        assert_eq!(
            error_codes(r#"{"errors":[{"code":"DENIED","message":"no"},{"code":"X"}]}"#),
            vec!["DENIED: no".to_owned(), "X: ".to_owned()]
        );
        assert!(error_codes("<html>bad gateway</html>").is_empty());
    }
}
