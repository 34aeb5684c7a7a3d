//! What every fetch shares: the options, the HTTP client and the limits
//! its transfers run under, the authentication, the cache and the offline
//! switch, and the blobs checked so far. The OCI and download modules work
//! on a [`Session`]; [`crate::Client`] owns one and decides when what they
//! checked is written.

use std::time::Duration;

use crate::auth::{Access, AuthSettings, Authenticator};
use crate::cache::BlobCache;
use crate::credentials::Credentials;
use crate::digest::Sha256;
use crate::error::Error;
use crate::layout::WasmConfig;
use crate::reach::plain_http_allowed_for;
use crate::signature::{Signer, TrustRoot};
use crate::source::OciReference;
use crate::transfer::{self, Limits};

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
    /// Where registry credentials come from.
    pub credentials: Credentials,
    /// Hosts (`host` or `host:port`) reached over plain HTTP although they
    /// are not loopback.
    pub insecure_hosts: Vec<String>,
    /// Never use the network: fetch from the cache or fail.
    pub offline: bool,
    /// The largest component accepted, in bytes.
    pub max_component_size: u64,
    /// The stall timeout: the longest a transfer may go without a byte
    /// moving (connecting, waiting for an answer, between two pieces of
    /// it, or for the registry to take the next piece of an upload).
    pub stall_timeout: Duration,
    /// The deadline: the longest one transfer (one request and the whole
    /// of its answer) may take, however steadily its bytes come.
    pub deadline: Duration,
    /// Hosts (`host` or `host:port`) that may receive a registry's
    /// credentials when the registry names them as its auth realm (its
    /// token service), besides the registry's own host.
    pub auth_hosts: Vec<String>,
}

/// The stall timeout unless the caller says otherwise.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The deadline of one transfer unless the caller says otherwise: a
/// 256 MiB component at 512 KiB/s.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

impl Default for Options {
    fn default() -> Self {
        Options {
            cache: BlobCache::default_directory().map(BlobCache::new),
            credentials: Credentials::default(),
            insecure_hosts: Vec::new(),
            offline: false,
            max_component_size: DEFAULT_MAX_COMPONENT_SIZE,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            deadline: DEFAULT_DEADLINE,
            auth_hosts: Vec::new(),
        }
    }
}

/// A signature requirement and the root it is checked against.
pub struct SignatureCheck<'a> {
    /// Who must have signed.
    pub signer: &'a Signer,
    /// The root the signature is checked against.
    pub trust: &'a TrustRoot,
}

/// A component that passed every check.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The component's bytes.
    pub component: Vec<u8>,
    /// Their sha256.
    pub sha256: Sha256,
    /// Their length.
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

/// The options, the HTTP client and the authentication of one
/// [`crate::Client`].
pub(crate) struct Session {
    pub(crate) options: Options,
    pub(crate) http: reqwest::Client,
    auth: Authenticator,
}

/// Blobs checked in memory, written to the cache once everything passed.
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) blobs: Vec<(Sha256, Vec<u8>)>,
}

impl Session {
    pub(crate) fn new(options: Options) -> Result<Self, Error> {
        let insecure = options.insecure_hosts.clone();
        let http = transfer::http_client(options.stall_timeout, move |url| {
            plain_http_allowed_for(&insecure, url)
        })?;
        let auth = Authenticator::new(
            http.clone(),
            limits_of(&options),
            AuthSettings {
                credentials: options.credentials.clone(),
                insecure_hosts: options.insecure_hosts.clone(),
                auth_hosts: options.auth_hosts.clone(),
            },
        );
        Ok(Session {
            options,
            http,
            auth,
        })
    }

    /// The limits of every transfer.
    pub(crate) fn limits(&self) -> Limits {
        limits_of(&self.options)
    }

    /// The `Authorization` header for `access` to `reference`'s
    /// repository (for its registry's own address only), if one is needed
    /// and held.
    pub(crate) async fn authorization(
        &self,
        reference: &OciReference,
        access: Access,
        what: &str,
    ) -> Result<Option<http::HeaderValue>, Error> {
        self.auth
            .authorization(&reference.registry, &reference.repository, access, what)
            .await
    }

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
    pub(crate) fn commit(&self, pending: Pending) -> Vec<String> {
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

fn limits_of(options: &Options) -> Limits {
    Limits {
        stall: options.stall_timeout,
        deadline: options.deadline,
    }
}
