//! What the benchmarks measure beneath the host's own path: a plugin's
//! exports called through the generated bindings on a bare store, nothing
//! of the host's (no help routing, no output capture), so that a benchmark
//! can print the host's overhead as a ratio against it.
//!
//! Not part of the crate's API (hidden from its documentation); the
//! benchmarks in `host/envhost/benches` are its only users.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use envhost_core::EnvironmentName;
use envhost_process::OutputLimits;
use wasmtime::Store;

use crate::exports::{Exports, PluginPre};
use crate::grants::Grants;
use crate::guest_io::GuestOutput;
use crate::limits::{CallBudget, DEFAULT_MEMORY_LIMIT, DEFAULT_OPEN_FILES};
use crate::load::cache::CodeCache;
use crate::load::loader::{self, Candidate};
use crate::sandbox::Sandbox;
use crate::settings::PluginSettings;
use crate::state::HostState;

/// Why a raw plugin could not be loaded or called.
#[derive(Debug, thiserror::Error)]
pub enum RawCallError {
    /// No sandbox for it.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// Its name is not an environment name.
    #[error(transparent)]
    Name(#[from] envhost_core::InvalidName),
    /// Loading refused it (the refusal's sentence).
    #[error("{0}")]
    Refused(String),
    /// Instantiating it or calling an export trapped or failed.
    #[error("{0}")]
    Call(wasmtime::Error),
}

/// A plugin loaded as the host loads it (nothing granted), whose exports
/// are then called directly.
pub struct RawPlugin {
    sandbox: Arc<Sandbox>,
    grants: Arc<Grants>,
    pre: PluginPre,
    store: Store<HostState>,
    exports: Exports,
}

impl RawPlugin {
    /// Loads `file` as the plugin `name` of the project `project`, its
    /// compiled code kept in `cache` (or compiled afresh without one), and
    /// makes an instance ready for calls.
    pub fn load(
        name: &str,
        file: &Path,
        project: &Path,
        cache: Option<&Path>,
    ) -> Result<RawPlugin, RawCallError> {
        Self::load_tiered(name, file, project, cache, None)
    }

    /// [`RawPlugin::load`] on baseline (Winch) code, as a session's first
    /// start of a large plugin runs it; `empty_cache` must hold no entry
    /// for it (a cached entry would be used instead).
    pub fn load_baseline(
        name: &str,
        file: &Path,
        project: &Path,
        empty_cache: &Path,
    ) -> Result<RawPlugin, RawCallError> {
        Self::load_tiered(name, file, project, Some(empty_cache), Some(0))
    }

    fn load_tiered(
        name: &str,
        file: &Path,
        project: &Path,
        cache: Option<&Path>,
        baseline_above: Option<u64>,
    ) -> Result<RawPlugin, RawCallError> {
        let sandbox = Arc::new(Sandbox::new(DEFAULT_MEMORY_LIMIT, DEFAULT_OPEN_FILES)?);
        let settings = PluginSettings {
            cache: cache.map_or(CodeCache::Disabled, |dir| {
                CodeCache::Directory(dir.to_owned())
            }),
            baseline_above,
            ..PluginSettings::default()
        };
        let candidate = Candidate {
            name: EnvironmentName::new(name)?,
            path: file.to_owned(),
        };
        let grants = Arc::new(Grants::none(
            name,
            "env/envhost.toml",
            project,
            OutputLimits::for_project(project),
        ));
        let loaded = loader::load(&sandbox, &settings, &candidate, &grants)
            .map_err(|refusal| RawCallError::Refused(refusal.sentence(None)))?;
        let (store, exports) = instantiate(&sandbox, &loaded.pre, &grants)?;
        Ok(RawPlugin {
            sandbox,
            grants,
            pre: loaded.pre,
            store,
            exports,
        })
    }

    /// A fresh instance, described: what a restart after a trap costs. The
    /// instance is dropped.
    pub fn instantiate_and_describe(&self) -> Result<(), RawCallError> {
        let (mut store, exports) = instantiate(&self.sandbox, &self.pre, &self.grants)?;
        exports
            .describe(&mut store)
            .map(drop)
            .map_err(RawCallError::Call)
    }

    /// `describe`, on the ready instance.
    pub fn describe(&mut self) -> Result<(), RawCallError> {
        self.exports
            .describe(&mut self.store)
            .map(drop)
            .map_err(RawCallError::Call)
    }

    /// `handle-command`: the output and whether it succeeded.
    pub fn handle_command(&mut self, command: &str) -> Result<(String, bool), RawCallError> {
        self.exports
            .handle_command(&mut self.store, command)
            .map(|answer| (answer.output, answer.success))
            .map_err(RawCallError::Call)
    }

    /// `get-screen`: the section's content.
    pub fn get_screen(&mut self) -> Result<String, RawCallError> {
        self.exports
            .get_screen(&mut self.store)
            .map(|section| section.content)
            .map_err(RawCallError::Call)
    }
}

fn instantiate(
    sandbox: &Sandbox,
    pre: &PluginPre,
    grants: &Arc<Grants>,
) -> Result<(Store<HostState>, Exports), RawCallError> {
    let mut store = sandbox.new_store(pre.instance_pre().engine(), GuestOutput::new(), grants);
    // Raw calls are not the host's: they run without its time limit.
    *store.data_mut().budget_mut() = CallBudget::starting_now(Duration::from_secs(3600), None);
    let (_, exports) = pre.instantiate(&mut store).map_err(RawCallError::Call)?;
    Ok((store, exports))
}
