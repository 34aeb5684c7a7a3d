//! `envhost list`: the locked plugins, one line each.

use envhost_registry::{LockedPlugin, OciReference, Source};

use super::args::ProjectArgs;
use super::error::Result;
use super::project::Project;

pub(super) fn list(args: ProjectArgs) -> Result<()> {
    let project = Project::open(&args)?;
    let lock = project.lock()?;
    let grants = project.grants()?;
    let mut rows: Vec<[String; 6]> = vec![[
        "NAME".into(),
        "SOURCE".into(),
        "VERSION".into(),
        "SHA256".into(),
        "WORLD".into(),
        "GRANTS".into(),
    ]];
    let mut sorted: Vec<&LockedPlugin> = lock.plugins.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for locked in sorted {
        let version = match &locked.source {
            Source::Oci(OciReference { tag: Some(tag), .. }) => tag.clone(),
            Source::Oci(OciReference {
                digest: Some(digest),
                ..
            }) => format!("@{}", short(&digest.hex())),
            _ => "-".to_owned(),
        };
        let granted = grants
            .entry(&locked.name)
            .map(|e| e.grants.join("; "))
            .filter(|g| !g.is_empty())
            .unwrap_or_else(|| "nothing".to_owned());
        rows.push([
            locked.name.clone(),
            locked.source.to_string(),
            version,
            short(&locked.sha256.hex()),
            locked.world.clone(),
            granted,
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        println!("{}", line.trim_end());
    }
    for name in project.unlocked(&lock) {
        println!("{name}: env/{name}.wasm, not locked (`envhost add env/{name}.wasm` locks it)");
    }
    Ok(())
}

pub(super) fn short(hex: &str) -> String {
    hex.chars().take(12).collect()
}
