//! `envhost install`: make env/ and the pins match the lock (`--frozen`: only say where they
//! differ).

use envhost_core::text::counted;
use envhost_plugin::{GrantsFile, VerifyChange};
use envhost_registry::{Client, Lock, LockedPlugin};

use super::args::InstallArgs;
use super::contract::check;
use super::error::{DistributionError, Result};
use super::network::{Requirement, client, print_warnings};
use super::project::{Changes, Project, with_pin};

pub(super) fn install(args: InstallArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let lock = project.existing_lock()?;
    let grants = project.grants()?;
    let drift = Drift::between(&project, &lock, &grants)?;
    let unlocked = project.unlocked(&lock);
    if args.frozen {
        return frozen(&lock, drift.differences, &unlocked);
    }
    let mut changes = Changes::default();
    let client = client(Some(&args.network), args.offline)?;
    stage_locked_files(&mut changes, &client, &project, &grants, &drift.to_fetch)?;
    stage_locked_pins(&mut changes, &grants, &drift.to_pin)?;
    changes.commit()?;
    for name in &unlocked {
        eprintln!(
            "envhost: note: env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        );
    }
    println!(
        "installed: {} in the lock, {} written, {} set",
        counted(lock.plugins.len(), "plugin"),
        drift.to_fetch.len(),
        counted(drift.to_pin.len(), "pin")
    );
    Ok(())
}

/// How env/ and the pins differ from the lock.
pub(super) struct Drift<'lock> {
    /// Each difference, in words.
    pub(super) differences: Vec<String>,
    /// The plugins whose file is missing or has other bytes.
    pub(super) to_fetch: Vec<&'lock LockedPlugin>,
    /// The plugins whose pin is missing or another.
    pub(super) to_pin: Vec<&'lock LockedPlugin>,
}

impl<'lock> Drift<'lock> {
    pub(super) fn between(
        project: &Project,
        lock: &'lock Lock,
        grants: &GrantsFile,
    ) -> Result<Self> {
        let mut drift = Drift {
            differences: Vec::new(),
            to_fetch: Vec::new(),
            to_pin: Vec::new(),
        };
        for locked in &lock.plugins {
            let name = &locked.name;
            match project.installed(name)? {
                Some(sha) if sha == locked.sha256 => {}
                Some(sha) => {
                    drift.differences.push(format!(
                        "env/{name}.wasm has sha256 {}, the lock says {}",
                        sha.hex(),
                        locked.sha256.hex()
                    ));
                    drift.to_fetch.push(locked);
                }
                None => {
                    drift
                        .differences
                        .push(format!("env/{name}.wasm is missing"));
                    drift.to_fetch.push(locked);
                }
            }
            let pin = grants.entry(name).and_then(|e| e.sha256.as_deref());
            if pin != Some(locked.sha256.hex().as_str()) {
                drift.differences.push(match pin {
                    Some(pin) => format!(
                        "the pin of {name} in {} is {pin}, the lock says {}",
                        grants.shown,
                        locked.sha256.hex()
                    ),
                    None => format!("{name} has no pin in {}", grants.shown),
                });
                drift.to_pin.push(locked);
            }
        }
        Ok(drift)
    }
}

/// `install --frozen`: says so when env/ and the pins are as the lock says
/// and every plugin in env/ is locked; otherwise prints each difference and
/// fails. Changes nothing.
pub(super) fn frozen(lock: &Lock, mut differences: Vec<String>, unlocked: &[String]) -> Result<()> {
    for name in unlocked {
        differences.push(format!(
            "env/{name}.wasm is not in the lock (`envhost add env/{name}.wasm` locks it)"
        ));
    }
    if differences.is_empty() {
        println!(
            "env/ matches env/envhost.lock: {}, each pinned",
            counted(lock.plugins.len(), "plugin")
        );
        return Ok(());
    }
    for difference in &differences {
        eprintln!("  {difference}");
    }
    Err(DistributionError::NotAsLocked {
        differences: differences.len(),
    })
}

/// Fetches each plugin of `to_fetch` by its locked digest (from the cache
/// when it has the bytes), checks it as the host would load it, and
/// stages env/NAME.wasm.
pub(super) fn stage_locked_files(
    changes: &mut Changes,
    client: &Client,
    project: &Project,
    grants: &GrantsFile,
    to_fetch: &[&LockedPlugin],
) -> Result<()> {
    for locked in to_fetch {
        let name = &locked.name;
        let verify = grants.entry(name).and_then(|e| e.verify.as_ref());
        let requirement = Requirement::optional(project, verify)?;
        let fetched = client
            .fetch_locked(
                &project.resolved(locked),
                requirement.as_ref().map(Requirement::check).as_ref(),
            )
            .map_err(|source| DistributionError::Install {
                name: name.clone(),
                source: Box::new(source),
            })?;
        print_warnings(&fetched);
        check(project, name, &fetched.component)?;
        changes.write(&project.wasm(name), &fetched.component)?;
    }
    Ok(())
}

/// Stages the grants file with each plugin of `to_pin` pinned to its
/// locked sha256 (its grants and `verify` kept).
pub(super) fn stage_locked_pins(
    changes: &mut Changes,
    grants: &GrantsFile,
    to_pin: &[&LockedPlugin],
) -> Result<()> {
    if to_pin.is_empty() {
        return Ok(());
    }
    let mut text = grants.text.clone().unwrap_or_default();
    for locked in to_pin {
        text = with_pin(
            grants,
            &text,
            &locked.name,
            Some(&locked.sha256),
            &VerifyChange::Keep,
        )?;
    }
    changes.write(&grants.path, text.as_bytes())
}
