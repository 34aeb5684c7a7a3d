//! How plugins are run, as the command line sets it, and where a project's
//! plugins and their grants file are.

use std::path::{Path, PathBuf};

use crate::grants::config_file;
use crate::limits::{
    DEFAULT_MAX_PLUGIN_SIZE, DEFAULT_MAX_PLUGINS, DEFAULT_MEMORY_LIMIT, DEFAULT_OPEN_FILES,
};
use crate::load::cache::CodeCache;
use crate::load::compile::Compiler;

/// How plugins are run, from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSettings {
    /// Where compiled plugin code is kept between starts.
    pub cache: CodeCache,
    /// How plugins are compiled (bounded, in a copy of the binary, for
    /// `envhost`).
    pub compiler: Compiler,
    /// Bytes of memory each plugin instance may use (unless granted more).
    pub memory_limit: usize,
    /// Files each plugin may hold open at once (lowered when many plugins
    /// would take too much of the host's descriptor limit).
    pub open_files: usize,
    /// Most plugins loaded; the rest are refused.
    pub max_plugins: usize,
    /// Largest plugin file compiled, in bytes.
    pub max_size: u64,
    /// The grants file, when not the default (`env/envhost.toml` next to
    /// the plugins). `envhost check` grants nothing without one.
    pub config_file: Option<PathBuf>,
    /// Tiering (`load::tiering`): a plugin over this many bytes whose
    /// optimised code is not cached starts on baseline code while its
    /// optimised code is compiled in the background. `None`: never (the
    /// one-shot commands, which compile the optimised code at once).
    pub baseline_above: Option<u64>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            cache: CodeCache::default_directory()
                .map(CodeCache::Directory)
                .unwrap_or(CodeCache::Disabled),
            compiler: Compiler::InProcess,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            open_files: DEFAULT_OPEN_FILES,
            max_plugins: DEFAULT_MAX_PLUGINS,
            max_size: DEFAULT_MAX_PLUGIN_SIZE,
            config_file: None,
            baseline_above: None,
        }
    }
}

impl PluginSettings {
    /// Compiling in a copy of this very binary (`/proc/self/exe`, which
    /// must be the `envhost` binary), bounded by `cpu_time` and `memory`.
    pub fn compile_bounded(&mut self, cpu_time: std::time::Duration, memory: u64) {
        self.compiler = Compiler::Bounded {
            program: PathBuf::from("/proc/self/exe"),
            cpu_time,
            memory,
        };
    }
}

/// The grants file for plugins in `plugin_folder`, and how messages show it
/// (relative to `base` when inside it).
pub fn config_path(
    settings: &PluginSettings,
    plugin_folder: &Path,
    base: Option<&Path>,
) -> (PathBuf, String) {
    let path = settings
        .config_file
        .clone()
        .unwrap_or_else(|| plugin_folder.join(config_file::FILE_NAME));
    let shown = base
        .and_then(|base| path.strip_prefix(base).ok())
        .unwrap_or(&path)
        .display()
        .to_string();
    (path, shown)
}

/// Whether the grants file [`config_path`] names is the operator's
/// (`--plugin-config`, a symlink there is followed) or the one in `env/`
/// (where commands can write: never followed).
pub fn config_origin(settings: &PluginSettings) -> config_file::Origin {
    if settings.config_file.is_some() {
        config_file::Origin::Operator
    } else {
        config_file::Origin::Project
    }
}

/// `<project>/env`.
pub fn plugin_dir(project_dir: &Path) -> PathBuf {
    project_dir.join("env")
}
