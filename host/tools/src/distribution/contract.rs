//! Checking fetched bytes against the host's contract, as `envhost check` does.

use std::sync::Arc;

use envhost_plugin::{self as plugin, StderrSink};

use super::error::{DistributionError, Result};
use super::project::Project;

/// Checks fetched bytes as the plugin `name` of the project, printing the
/// report (what it offers, requests and is granted). Returns the world.
pub(super) fn check(project: &Project, name: &str, bytes: &[u8]) -> Result<String> {
    let dir = tempfile::Builder::new()
        .prefix("envhost-add-")
        .tempdir()
        .map_err(DistributionError::CheckFolder)?;
    let path = dir.path().join(format!("{name}.wasm"));
    std::fs::write(&path, bytes).map_err(|source| DistributionError::Write {
        path: path.clone(),
        source,
    })?;
    let report = plugin::check_as(
        &path,
        name,
        &project.dir,
        &project.settings,
        Arc::new(StderrSink),
    );
    let text = report
        .text
        .replace(&path.display().to_string(), &format!("env/{name}.wasm"));
    print!("{text}");
    match (report.ok, report.world) {
        (true, Some(world)) => Ok(world),
        _ => Err(DistributionError::Refused {
            name: name.to_owned(),
        }),
    }
}
