//! Everything that can go wrong fetching, verifying or publishing a plugin.
//! Each message says what happened and what to do next; each refusal
//! happens before anything is written.

use std::path::PathBuf;

use crate::digest::Sha256;
use crate::signature::SignatureError;
use crate::source::BadSource;

/// Why a fetch, a publish or a check failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source that does not parse.
    #[error(transparent)]
    Source(#[from] BadSource),

    /// Plain HTTP to a host that is neither loopback nor listed insecure.
    #[error(
        "{what}: plain HTTP to {host} is refused (only loopback registries are reached without TLS); serve it over HTTPS, or pass --insecure-registry {host} if you trust every network between here and there"
    )]
    Insecure {
        /// What was being fetched or published.
        what: String,
        /// The host, as addressed.
        host: String,
    },

    /// The host could not be reached, or the connection failed.
    #[error(
        "{what}: could not reach {host}: {detail}; check the address and your connection (`envhost install --offline` installs from the cache alone)"
    )]
    Network {
        /// What was being fetched or published.
        what: String,
        /// The host, as addressed.
        host: String,
        /// What the other side said.
        detail: String,
    },

    /// A transfer in which no byte moved for the stall timeout.
    #[error(
        "{what}: {host} sent nothing for {}; the registry or the network is stuck; try again later, or allow longer with --registry-stall-timeout",
        humantime::format_duration(*.limit)
    )]
    Stalled {
        /// What was being fetched or published.
        what: String,
        /// The host, as addressed.
        host: String,
        /// The stall timeout.
        limit: std::time::Duration,
    },

    /// A transfer that did not finish by its deadline.
    #[error(
        "{what}: the transfer with {host} did not finish within {}, however steadily it went; a registry that sends slowly is cut off there; try again later, or allow longer with --registry-deadline",
        humantime::format_duration(*.limit)
    )]
    Deadline {
        /// What was being fetched or published.
        what: String,
        /// The host, as addressed.
        host: String,
        /// The deadline.
        limit: std::time::Duration,
    },

    /// A registry named an auth realm on another host, and envhost holds
    /// credentials for the registry.
    #[error(
        "{what}: {registry} asks for its credentials to be sent to {realm}, on another host ({realm_host}); envhost sends a registry's credentials only to the registry's own host; if {realm_host} is {registry}'s token service, pass --registry-auth-host {realm_host}"
    )]
    CredentialsElsewhere {
        /// What was being fetched or published.
        what: String,
        /// The registry (`host[:port]`).
        registry: String,
        /// The auth realm's address, as the registry gave it.
        realm: String,
        /// The realm's host.
        realm_host: String,
    },

    /// Credentials that would go over plain HTTP to a host that is not
    /// this machine.
    #[error(
        "{what}: the credentials for {registry} would go to {host} over plain HTTP, and {host} is not a loopback address; envhost sends credentials without TLS only to this machine; serve {host} over HTTPS, or fetch from it without credentials"
    )]
    CredentialsInClear {
        /// What was being fetched or published.
        what: String,
        /// The registry (`host[:port]`).
        registry: String,
        /// The host the credentials would have gone to.
        host: String,
    },

    /// The registry refused the credentials (or their absence).
    #[error(
        "{what}: {registry} refused the credentials ({detail}); log in with `docker login {registry}` (read from $DOCKER_CONFIG/config.json or ~/.docker/config.json) or pass --registry-token-file FILE"
    )]
    Unauthorized {
        /// What was being fetched or published.
        what: String,
        /// The registry (`host[:port]`).
        registry: String,
        /// What the other side said.
        detail: String,
    },

    /// No such repository, tag, manifest or blob.
    #[error(
        "{what}: not found ({detail}); check the repository and tag (`oras repo tags REGISTRY/REPOSITORY` lists the tags)"
    )]
    NotFound {
        /// What was being fetched or published.
        what: String,
        /// What the other side said.
        detail: String,
    },

    /// Another error from the registry.
    #[error("{what}: the registry answered with an error: {detail}")]
    Registry {
        /// What was being fetched or published.
        what: String,
        /// What the other side said.
        detail: String,
    },

    /// Bytes that do not hash to the digest they were asked for.
    #[error(
        "{what}: the content's digest is {actual}, not the {expected} it was asked for: the bytes were changed in the registry's storage or on the way; nothing was written"
    )]
    Digest {
        /// What was being fetched or published.
        what: String,
        /// What was expected.
        expected: String,
        /// What was found.
        actual: String,
    },

    /// A blob of another size than its manifest declares.
    #[error(
        "{what}: it is {actual} bytes, not the {expected} its manifest says; nothing was written"
    )]
    Size {
        /// What was being fetched or published.
        what: String,
        /// What was expected.
        expected: u64,
        /// What was found.
        actual: u64,
    },

    /// More bytes than the bound allows.
    #[error("{what} is larger than the {limit}-byte limit ({size} bytes); nothing was written")]
    TooLarge {
        /// What was being fetched or published.
        what: String,
        /// The size found or declared, in bytes.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },

    /// A manifest, config or layer of another media type than the layout's.
    #[error("{what} has media type {found:?}, not {expected:?}: {hint}")]
    MediaType {
        /// What was being fetched or published.
        what: String,
        /// What was expected.
        expected: String,
        /// What it is.
        found: String,
        /// What to do.
        hint: String,
    },

    /// An artifact that is not in the CNCF Wasm layout.
    #[error("{what} is not a WebAssembly component artifact: {problem}")]
    Layout {
        /// What was being fetched or published.
        what: String,
        /// What is wrong.
        problem: String,
    },

    /// A layer that is not a WebAssembly component.
    #[error("{what} is {found}")]
    NotAComponent {
        /// What was being fetched or published.
        what: String,
        /// What it is.
        found: String,
    },

    /// The network is needed and off.
    #[error(
        "{what}: {reason}, and the network is off; run the command once with the network to fill the cache"
    )]
    Offline {
        /// What was being fetched or published.
        what: String,
        /// What needed the network.
        reason: String,
    },

    /// A file could not be read or written.
    #[error("{action} {path}: {error}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        error: std::io::Error,
    },

    /// A credentials file that cannot be used.
    #[error("registry credentials in {path}: {problem}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },

    /// A signature that is missing or wrong.
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

impl Error {
    pub(crate) fn digest(what: impl Into<String>, expected: &Sha256, actual: &Sha256) -> Self {
        Error::Digest {
            what: what.into(),
            expected: expected.to_string(),
            actual: actual.to_string(),
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        error: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            error,
        }
    }
}
