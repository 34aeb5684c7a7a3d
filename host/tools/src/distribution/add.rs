//! `envhost add`: fetch, verify and check one plugin, then write it, its pin and its lock entry.

use std::path::Path;

use envhost_core::EnvironmentName;
use envhost_plugin::{self as plugin, GrantsFile, Verify, VerifyChange};
use envhost_registry::{Fetched, Lock, LockedPlugin, Source};

use super::args::AddArgs;
use super::contract::check;
use super::error::{DistributionError, Result};
use super::network::{Requirement, client, print_warnings};
use super::project::{Changes, Project, with_pin};

pub(super) fn add(args: AddArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let source: Source = args.source.parse()?;
    let name = chosen_name(args.name.as_deref(), &source)?;
    let lock = project.lock()?;
    let grants = project.grants()?;
    if lock.get(&name).is_some() {
        return Err(DistributionError::AlreadyAdded { name });
    }
    let placement = Placement::of(&project, &name, source)?;
    if let Some(refusal) = plugin::reads_like_plugin(
        &name,
        project.plugin_names(&lock).iter().map(String::as_str),
    ) {
        return Err(DistributionError::Name(refusal));
    }
    // A requirement given on the command line is written into the grants
    // file; otherwise the one already there (if any) applies.
    let flagged = flagged_verify(
        &project.dir,
        args.verify_key.as_deref(),
        args.verify_identity.as_deref(),
        args.verify_issuer.as_deref(),
    )?;
    let verify = flagged
        .clone()
        .or_else(|| grants.entry(&name).and_then(|entry| entry.verify.clone()));
    let requirement = Requirement::optional(&project, verify.as_ref())?;

    let client = client(Some(&args.network), false)?;
    let fetched = client.fetch(
        &placement.fetch_from,
        requirement.as_ref().map(Requirement::check).as_ref(),
    )?;
    print_warnings(&fetched);
    let world = check(&project, &name, &fetched.component)?;

    let entry = LockedPlugin {
        name: name.clone(),
        source: placement.recorded,
        manifest: fetched.manifest,
        sha256: fetched.sha256,
        size: fetched.size,
        world,
        signer: verify.as_ref().map(Requirement::locked),
        signature: fetched.signature,
    };
    let verify_change = flagged.map_or(VerifyChange::Keep, VerifyChange::Set);
    let component = (!placement.adopting).then_some(fetched.component.as_slice());
    write_added(&project, lock, &grants, entry, component, &verify_change)?;
    report_added(&name, &fetched, requirement.as_ref(), &grants);
    Ok(())
}

/// The name a plugin is added under: `--name`, or one made from the
/// source. The loader's rule applies, so that what is added is what the
/// next start loads: an identifier, not a built-in's name nor one that
/// reads like it (one that reads like another plugin's is refused once the
/// project's plugins are known).
pub(super) fn chosen_name(given: Option<&str>, source: &Source) -> Result<String> {
    let name = match given {
        Some(name) => name.to_owned(),
        None => default_name(source)?,
    };
    plugin::plugin_name(&name).map_err(DistributionError::Name)?;
    Ok(name)
}

/// `NAME` from `…/NAME:tag`, `…/NAME.wasm`, with other characters as `_`.
pub(super) fn default_name(source: &Source) -> Result<String> {
    let raw = match source {
        Source::Oci(reference) => reference
            .repository
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned(),
        Source::Url(url) => url
            .url
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".wasm")
            .to_owned(),
        Source::Path(path) => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let name = EnvironmentName::suggested_by(&raw);
    if EnvironmentName::new(&name).is_err() {
        return Err(DistributionError::NoDefaultName {
            source_given: source.clone(),
        });
    }
    Ok(name)
}

/// Where an added plugin is fetched from and how the lock records its
/// source.
pub(super) struct Placement {
    /// The source to fetch (a path made absolute).
    pub(super) fetch_from: Source,
    /// The source as the lock records it (a path inside the project
    /// relative to it).
    pub(super) recorded: Source,
    /// The source is env/NAME.wasm itself: it is locked where it is, not
    /// copied.
    pub(super) adopting: bool,
}

impl Placement {
    /// Where the plugin `name` from `source` comes from. A file already at
    /// env/NAME.wasm that is not the source is refused: the lock does not
    /// name it, and adding would overwrite it.
    pub(super) fn of(project: &Project, name: &str, source: Source) -> Result<Placement> {
        let (fetch_from, recorded) = match source {
            Source::Path(path) => {
                let absolute = std::fs::canonicalize(&path)
                    .map_err(|source| DistributionError::PluginFile { path, source })?;
                let recorded = match absolute.strip_prefix(&project.dir) {
                    Ok(inside) => inside.to_owned(),
                    Err(_) => absolute.clone(),
                };
                (Source::Path(absolute), Source::Path(recorded))
            }
            other => (other.clone(), other),
        };
        let target = project.wasm(name);
        let adopting = matches!(&fetch_from, Source::Path(path) if *path == target);
        if target.exists() && !adopting {
            return Err(DistributionError::UnlockedFileInTheWay {
                shown: project.shown(&target).to_owned(),
                name: name.to_owned(),
            });
        }
        Ok(Placement {
            fetch_from,
            recorded,
            adopting,
        })
    }
}

/// The signature requirement given on the command line (`--verify-key`,
/// or `--verify-identity` with `--verify-issuer`), as the grants file
/// records it.
pub(super) fn flagged_verify(
    project: &Path,
    key: Option<&Path>,
    identity: Option<&str>,
    issuer: Option<&str>,
) -> Result<Option<Verify>> {
    Ok(match (key, identity, issuer) {
        (Some(key), _, _) => Some(Verify::Key {
            key: relative_to(project, key)?,
        }),
        (None, Some(identity), Some(issuer)) => Some(Verify::Keyless {
            identity: identity.to_owned(),
            issuer: issuer.to_owned(),
            trusted_root: None,
        }),
        _ => None,
    })
}

/// `path` as written into the grants file: relative to the project when it
/// is inside it.
pub(super) fn relative_to(project: &Path, path: &Path) -> Result<String> {
    let absolute = std::fs::canonicalize(path).map_err(|source| DistributionError::KeyFile {
        path: path.to_owned(),
        source,
    })?;
    Ok(absolute
        .strip_prefix(project)
        .unwrap_or(&absolute)
        .display()
        .to_string())
}

/// Writes what `add` fetched and checked, all or nothing: env/NAME.wasm
/// (`component`; `None` when the plugin is adopted where it is), its pin
/// in the grants file (granting nothing new; its `verify` changed as
/// `verify` says) and its entry in the lock.
pub(super) fn write_added(
    project: &Project,
    mut lock: Lock,
    grants: &GrantsFile,
    entry: LockedPlugin,
    component: Option<&[u8]>,
    verify: &VerifyChange,
) -> Result<()> {
    let pinned = with_pin(
        grants,
        grants.text.as_deref().unwrap_or(""),
        &entry.name,
        Some(&entry.sha256),
        verify,
    )?;
    let mut changes = Changes::default();
    if let Some(component) = component {
        changes.write(&project.wasm(&entry.name), component)?;
    }
    changes.write(&grants.path, pinned.as_bytes())?;
    lock.insert(entry);
    changes.write(&project.lock_path, lock.to_text().as_bytes())?;
    changes.commit()
}

pub(super) fn report_added(
    name: &str,
    fetched: &Fetched,
    requirement: Option<&Requirement>,
    grants: &GrantsFile,
) {
    println!(
        "added {name}: env/{name}.wasm, sha256 {} ({} bytes){}{}",
        fetched.sha256.hex(),
        fetched.size,
        fetched
            .manifest
            .map(|m| format!(", manifest {m}"))
            .unwrap_or_default(),
        requirement
            .map(|r| format!(", signed by {}", r.signer))
            .unwrap_or_default()
    );
    println!(
        "pinned in {} (nothing granted beyond what it already had); locked in env/envhost.lock",
        grants.shown
    );
}
