//! `envhost remove`: a plugin's file, pin and lock entry.

use envhost_plugin::VerifyChange;

use super::args::RemoveArgs;
use super::error::{DistributionError, Result};
use super::project::{Changes, Project, with_pin};

pub(super) fn remove(args: RemoveArgs) -> Result<()> {
    let project = Project::open(&args.project)?;
    let mut lock = project.lock()?;
    let grants = project.grants()?;
    let name = &args.name;
    let target = project.wasm(name);
    let locked = lock.remove(name);
    if locked.is_none() && !target.exists() {
        return Err(DistributionError::NoSuchPlugin { name: name.clone() });
    }
    let text = grants.text.clone().unwrap_or_default();
    let unpinned = with_pin(&grants, &text, name, None, &VerifyChange::Remove)?;
    let mut changes = Changes::default();
    changes.remove(&target);
    if grants.text.is_some() && unpinned != text {
        changes.write(&grants.path, unpinned.as_bytes())?;
    }
    if locked.is_some() {
        changes.write(&project.lock_path, lock.to_text().as_bytes())?;
    }
    changes.commit()?;
    println!(
        "removed {name}: env/{name}.wasm, its pin{}",
        if locked.is_some() {
            " and its lock entry"
        } else {
            ""
        }
    );
    Ok(())
}
