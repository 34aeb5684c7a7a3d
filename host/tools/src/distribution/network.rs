//! The registry client as the arguments configure it, the blob cache, and the signature a plugin
//! must carry.

use envhost_plugin::Verify;
use envhost_registry::{
    self as registry, BlobCache, Client, Credentials, Fetched, LockedSigner, SignatureCheck,
    Signer, TrustRoot,
};

use super::args::NetworkArgs;
use super::error::Result;
use super::project::Project;

pub(super) fn client(network: Option<&NetworkArgs>, offline: bool) -> Result<Client> {
    let mut options = registry::Options {
        offline,
        ..registry::Options::default()
    };
    if let Some(network) = network {
        if let Some(file) = &network.registry_token_file {
            options.credentials = Credentials::TokenFile(file.clone());
        }
        options.insecure_hosts = network.insecure_registry.clone();
        options.auth_hosts = network.registry_auth_host.clone();
        if let Some(stall) = network.registry_stall_timeout {
            options.stall_timeout = stall;
        }
        if let Some(deadline) = network.registry_deadline {
            options.deadline = deadline;
        }
    }
    Ok(Client::new(options)?)
}

/// A cache to read, even with no client (for `verify`).
pub(super) fn blob_cache() -> Option<BlobCache> {
    BlobCache::default_directory().map(BlobCache::new)
}

/// A `verify` requirement made ready to check.
pub(super) struct Requirement {
    pub(super) signer: Signer,
    pub(super) trust: TrustRoot,
}

impl Requirement {
    pub(super) fn for_project(project: &Project, verify: &Verify) -> Result<Requirement> {
        Ok(match verify {
            Verify::Key { key } => Requirement {
                signer: Signer::key_file(&project.dir.join(key))?,
                trust: TrustRoot::public_good()?,
            },
            Verify::Keyless {
                identity,
                issuer,
                trusted_root,
            } => Requirement {
                signer: Signer::Keyless {
                    identity: identity.clone(),
                    issuer: issuer.clone(),
                },
                trust: match trusted_root {
                    Some(root) => TrustRoot::from_file(&project.dir.join(root))?,
                    None => TrustRoot::public_good()?,
                },
            },
        })
    }

    /// The requirement `verify` makes, if any.
    pub(super) fn optional(
        project: &Project,
        verify: Option<&Verify>,
    ) -> Result<Option<Requirement>> {
        verify
            .map(|v| Requirement::for_project(project, v))
            .transpose()
    }

    pub(super) fn check(&self) -> SignatureCheck<'_> {
        SignatureCheck {
            signer: &self.signer,
            trust: &self.trust,
        }
    }

    pub(super) fn locked(verify: &Verify) -> LockedSigner {
        match verify {
            Verify::Key { key } => LockedSigner::Key(key.clone()),
            Verify::Keyless {
                identity, issuer, ..
            } => LockedSigner::Keyless {
                identity: identity.clone(),
                issuer: issuer.clone(),
            },
        }
    }
}

/// Shows the cache trouble that did not stop a fetch.
pub(super) fn print_warnings(fetched: &Fetched) {
    for warning in &fetched.warnings {
        eprintln!("envhost: warning: {warning}");
    }
}
