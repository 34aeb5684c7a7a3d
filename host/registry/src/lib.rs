//! Distributing envhost's WebAssembly plugins: fetching them from OCI
//! registries, HTTPS addresses and local files, verifying every byte (and,
//! when the operator asks, a signature) before anything is written,
//! caching what was verified, recording it in the lock file, and
//! publishing components for others to fetch.
//!
//! This crate owns the network and the formats of distribution (the CNCF
//! layout of a Wasm artifact, Sigstore bundles, `env/envhost.lock`). It
//! must not know the host's WIT contract, the grants file or the layout of
//! a project: the host checks a fetched component against its contract
//! and decides where to put it. Nothing here runs at the host's start-up;
//! a session never touches the network.

#![deny(missing_docs)]

mod auth;
mod cache;
mod checked;
mod client;
mod credentials;
mod digest;
mod download;
mod error;
mod layout;
mod lock;
mod oci;
mod reach;
mod session;
mod signature;
mod source;
mod transfer;

pub use cache::BlobCache;
pub use client::{Client, Published};
pub use credentials::Credentials;
pub use digest::{BadDigest, Sha256};
pub use error::Error;
pub use layout::{CONFIG_MEDIA_TYPE, ComponentInfo, WasmConfig};
pub use lock::{FILE_NAME as LOCK_FILE_NAME, Lock, LockError, LockedPlugin, LockedSigner};
pub use oci::signature_tag;
pub use session::{DEFAULT_DEADLINE, DEFAULT_STALL_TIMEOUT, Fetched, Options, SignatureCheck};
pub use signature::{SignatureError, Signer, SigningKey, TrustRoot, verify as verify_signature};
pub use source::{BadSource, OciReference, Source, UrlSource};
