//! `envhost publish`: push a component, optionally signed, in the CNCF Wasm layout.

use envhost_registry::{SigningKey, Source};

use super::args::PublishArgs;
use super::error::{DistributionError, Result};
use super::network::client;

pub(super) fn publish(args: PublishArgs) -> Result<()> {
    let Source::Oci(target) = args.target.parse::<Source>()? else {
        return Err(DistributionError::NotARegistry {
            target: args.target,
        });
    };
    let bytes = std::fs::read(&args.file).map_err(|source| DistributionError::Read {
        path: args.file.clone(),
        source,
    })?;
    let key = args
        .sign_key
        .as_ref()
        .map(|path| SigningKey::from_file(path))
        .transpose()?;
    let client = client(Some(&args.network), false)?;
    let published = client.publish(&bytes, &target, key.as_ref())?;
    println!(
        "published {} as {} (component sha256 {}, {} bytes)",
        args.file.display(),
        published.reference,
        published.sha256.hex(),
        published.size
    );
    if let Some(tag) = &published.signature_tag {
        println!(
            "signed: the signature is at oci://{}/{}:{tag}",
            target.registry, target.repository
        );
    }
    Ok(())
}
