//! `envhost verify`: re-hash every plugin against its pin and the lock, with no network.

use envhost_registry::{self as registry};

use super::args::ProjectArgs;
use super::error::{DistributionError, Result};
use super::network::{Requirement, blob_cache};
use super::project::Project;

pub(super) fn verify(args: ProjectArgs) -> Result<()> {
    let project = Project::open(&args)?;
    let lock = project.existing_lock()?;
    let grants = project.grants()?;
    let cache = blob_cache();
    let mut problems: Vec<String> = Vec::new();
    for locked in &lock.plugins {
        let name = &locked.name;
        let Some(bytes) = project.plugin_bytes(name)? else {
            problems.push(format!("env/{name}.wasm is missing"));
            continue;
        };
        let sha = registry::Sha256::of(&bytes);
        let mut ok = true;
        if sha != locked.sha256 {
            problems.push(format!(
                "env/{name}.wasm has sha256 {}, the lock says {}",
                sha.hex(),
                locked.sha256.hex()
            ));
            ok = false;
        }
        let entry = grants.entry(name);
        match entry.and_then(|e| e.sha256.as_deref()) {
            Some(pin) if pin == sha.hex() => {}
            Some(pin) => {
                problems.push(format!(
                    "env/{name}.wasm has sha256 {}, its pin in {} is {pin}",
                    sha.hex(),
                    grants.shown
                ));
                ok = false;
            }
            None => {
                problems.push(format!("{name} has no pin in {}", grants.shown));
                ok = false;
            }
        }
        let mut signed = String::new();
        if let Some(verify) = entry.and_then(|e| e.verify.as_ref()) {
            let requirement = Requirement::for_project(&project, verify)?;
            let bundle = locked
                .signature
                .and_then(|digest| cache.as_ref()?.get(&digest, 1 << 20).ok().flatten());
            match bundle {
                Some(bundle) => {
                    match registry::verify_signature(
                        &requirement.signer,
                        &requirement.trust,
                        &sha,
                        &bundle,
                        &format!("plugin {name}"),
                    ) {
                        Ok(()) => signed = format!(", signed by {}", requirement.signer),
                        Err(e) => {
                            problems.push(e.to_string());
                            ok = false;
                        }
                    }
                }
                None => {
                    problems.push(format!(
                        "plugin {name} must be signed by {}, and the signature verified when it was installed is not in the cache; `envhost install` after deleting env/{name}.wasm fetches and checks it again",
                        requirement.signer
                    ));
                    ok = false;
                }
            }
        }
        if ok {
            println!("{name}: ok (sha256 {}{signed})", sha.hex());
        }
    }
    for name in project.unlocked(&lock) {
        problems.push(format!(
            "env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    for problem in &problems {
        eprintln!("  {problem}");
    }
    Err(DistributionError::Unverified {
        differences: problems.len(),
    })
}
