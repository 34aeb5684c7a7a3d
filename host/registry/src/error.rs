//! Everything that can go wrong fetching, verifying or publishing a plugin.
//! Each message says what happened and what to do next; each refusal
//! happens before anything is written.

use std::path::PathBuf;

use crate::digest::Sha256;
use crate::signature::SignatureError;
use crate::source::BadSource;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Source(#[from] BadSource),

    #[error(
        "{what}: plain HTTP to {host} is refused (only loopback registries are reached without TLS); serve it over HTTPS, or pass --insecure-registry {host} if you trust every network between here and there"
    )]
    Insecure { what: String, host: String },

    #[error(
        "{what}: could not reach {host}: {detail}; check the address and your connection, or run `envhost install` to use what is already in the cache"
    )]
    Network {
        what: String,
        host: String,
        detail: String,
    },

    #[error(
        "{what}: {registry} refused the credentials ({detail}); log in with `docker login {registry}` (read from $DOCKER_CONFIG/config.json or ~/.docker/config.json) or pass --registry-token-file FILE"
    )]
    Unauthorized {
        what: String,
        registry: String,
        detail: String,
    },

    #[error(
        "{what}: not found ({detail}); check the repository and tag (`oras repo tags REGISTRY/REPOSITORY` lists the tags)"
    )]
    NotFound { what: String, detail: String },

    #[error("{what}: the registry answered with an error: {detail}")]
    Registry { what: String, detail: String },

    #[error(
        "{what}: the content's digest is {actual}, not the {expected} it was asked for: the bytes were changed in the registry's storage or on the way; nothing was written"
    )]
    Digest {
        what: String,
        expected: String,
        actual: String,
    },

    #[error(
        "{what}: it is {actual} bytes, not the {expected} its manifest says; nothing was written"
    )]
    Size {
        what: String,
        expected: u64,
        actual: u64,
    },

    #[error("{what} is larger than the {limit}-byte limit ({size} bytes); nothing was written")]
    TooLarge { what: String, size: u64, limit: u64 },

    #[error("{what} has media type {found:?}, not {expected:?}: {hint}")]
    MediaType {
        what: String,
        expected: String,
        found: String,
        hint: String,
    },

    #[error("{what} is not a WebAssembly component artifact: {problem}")]
    Layout { what: String, problem: String },

    #[error("{what} is {found}")]
    NotAComponent { what: String, found: String },

    #[error(
        "{what}: {reason}, and the network is off; run the command once with the network to fill the cache"
    )]
    Offline { what: String, reason: String },

    #[error("{action} {path}: {error}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },

    #[error("registry credentials in {path}: {problem}")]
    Credentials { path: PathBuf, problem: String },

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
