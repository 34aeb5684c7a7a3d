//! `envhost update`: install what the locked plugins' tags name now.

use std::path::Path;

use envhost_core::text::counted;
use envhost_plugin::{GrantsFile, VerifyChange};
use envhost_registry::{self as registry, Client, Lock, LockedPlugin, OciReference, Source};

use super::args::UpdateArgs;
use super::contract::check;
use super::error::{DistributionError, Result};
use super::network::{Requirement, client, print_warnings};
use super::project::{Changes, Project, with_pin};

pub(super) fn update(args: UpdateArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let mut lock = project.existing_lock()?;
    let grants = project.grants()?;
    let entries = to_update(&lock, args.name.as_deref())?;
    let client = client(Some(&args.network), false)?;
    let mut changes = Changes::default();
    let mut text = grants.text.clone().unwrap_or_default();
    let mut moved = 0;
    for locked in entries {
        let Some(newer) = newer_source(&client, &project, &locked)? else {
            continue;
        };
        moved += 1;
        if args.dry_run {
            continue;
        }
        let updated = stage_newer(&mut changes, &client, &project, &grants, &locked, newer)?;
        text = with_pin(
            &grants,
            &text,
            &updated.name,
            Some(&updated.sha256),
            &VerifyChange::Keep,
        )?;
        lock.insert(updated);
    }
    if args.dry_run {
        println!(
            "{} would change; nothing was written (run `envhost update` to install)",
            counted(moved, "plugin")
        );
        return Ok(());
    }
    if moved > 0 {
        changes.write(&grants.path, text.as_bytes())?;
        changes.write(&project.lock_path, lock.to_text().as_bytes())?;
        changes.commit()?;
    }
    println!("{} updated", counted(moved, "plugin"));
    Ok(())
}

/// The locked plugins `update` looks at: the one named, or all.
pub(super) fn to_update(lock: &Lock, name: Option<&str>) -> Result<Vec<LockedPlugin>> {
    if let Some(name) = name
        && lock.get(name).is_none()
    {
        return Err(DistributionError::NotInLock {
            name: name.to_owned(),
        });
    }
    Ok(lock
        .plugins
        .iter()
        .filter(|p| name.is_none_or(|n| n == p.name))
        .cloned()
        .collect())
}

/// Where a locked plugin's newer bytes are.
pub(super) struct Newer {
    /// The source to fetch them from (a tag resolved to its digest).
    pub(super) fetch_from: Source,
    /// The manifest the tag names now (a tag's source).
    pub(super) manifest: Option<registry::Sha256>,
}

/// What a locked plugin's source names now, when it is not what is
/// locked; prints what it found either way. A source pinned by its digest
/// never moves.
pub(super) fn newer_source(
    client: &Client,
    project: &Project,
    locked: &LockedPlugin,
) -> Result<Option<Newer>> {
    match &locked.source {
        Source::Oci(reference) if reference.digest.is_none() => {
            moved_tag(client, reference, locked)
        }
        Source::Path(path) => changed_file(project, path, locked),
        _ => {
            println!(
                "{}: {} is pinned by its digest; nothing to update",
                locked.name, locked.source
            );
            Ok(None)
        }
    }
}

/// The manifest an OCI tag names now, when it is not the locked one.
pub(super) fn moved_tag(
    client: &Client,
    reference: &OciReference,
    locked: &LockedPlugin,
) -> Result<Option<Newer>> {
    let name = &locked.name;
    let now = client.resolve(reference)?;
    if Some(now) == locked.manifest {
        println!("{name}: {} still names {now}", locked.source);
        return Ok(None);
    }
    println!(
        "{name}: {} now names {now} (locked: {})",
        locked.source,
        locked
            .manifest
            .map(|m| m.to_string())
            .unwrap_or_else(|| "none".to_owned())
    );
    Ok(Some(Newer {
        fetch_from: Source::Oci(reference.with_digest(now)),
        manifest: Some(now),
    }))
}

/// A path source whose bytes are no longer the locked ones.
pub(super) fn changed_file(
    project: &Project,
    path: &Path,
    locked: &LockedPlugin,
) -> Result<Option<Newer>> {
    let name = &locked.name;
    let path = project.source_path(path);
    let bytes = std::fs::read(&path).map_err(|source| DistributionError::ReadSource {
        name: name.clone(),
        path: path.clone(),
        source,
    })?;
    let now = registry::Sha256::of(&bytes);
    if now == locked.sha256 {
        println!("{name}: {} is unchanged", locked.source);
        return Ok(None);
    }
    println!(
        "{name}: {} now has sha256 {} (locked: {})",
        locked.source,
        now.hex(),
        locked.sha256.hex()
    );
    Ok(Some(Newer {
        fetch_from: Source::Path(path),
        manifest: None,
    }))
}

/// Fetches a locked plugin's newer bytes, checks them as the host would
/// load them, stages env/NAME.wasm, and returns the plugin's new lock
/// entry.
pub(super) fn stage_newer(
    changes: &mut Changes,
    client: &Client,
    project: &Project,
    grants: &GrantsFile,
    locked: &LockedPlugin,
    newer: Newer,
) -> Result<LockedPlugin> {
    let name = &locked.name;
    let verify = grants.entry(name).and_then(|e| e.verify.clone());
    let requirement = Requirement::optional(project, verify.as_ref())?;
    let fetched = client.fetch(
        &newer.fetch_from,
        requirement.as_ref().map(Requirement::check).as_ref(),
    )?;
    print_warnings(&fetched);
    let world = check(project, name, &fetched.component)?;
    changes.write(&project.wasm(name), &fetched.component)?;
    Ok(LockedPlugin {
        manifest: newer.manifest.or(fetched.manifest),
        sha256: fetched.sha256,
        size: fetched.size,
        world,
        signer: verify.as_ref().map(Requirement::locked),
        signature: fetched.signature,
        ..locked.clone()
    })
}
