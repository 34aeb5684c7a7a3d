//! How plugins are run and checked: the flags `serve`, `check`, `call`,
//! `test`, `healthcheck` and the distribution commands share, and the
//! plugin crate's settings they make. It must not run anything.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use envhost_core::text::{parse_duration, parse_size};
use envhost_plugin::{self as plugin, CodeCache, PluginSettings};

/// How plugins are run and checked.
#[derive(Args)]
pub(crate) struct PluginArgs {
    /// Where compiled plugin code is kept between starts (default:
    /// $XDG_CACHE_HOME/envhost/plugins or ~/.cache/envhost/plugins).
    #[arg(long, value_name = "DIR", conflicts_with = "no_plugin_cache")]
    pub(crate) plugin_cache: Option<PathBuf>,

    /// Compile plugins at every start instead of caching their code.
    #[arg(long)]
    pub(crate) no_plugin_cache: bool,

    /// Memory each plugin instance may use (e.g. 64MiB, 1GiB); a plugin
    /// that grows past it traps and is restarted.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value_t = plugin::DEFAULT_MEMORY_LIMIT)]
    pub(crate) plugin_memory: usize,

    /// Files each plugin may hold open at once; past it, opening one more
    /// fails. Lowered when many plugins would together hold more than half
    /// of the host's descriptor limit.
    #[arg(long, value_name = "N", default_value_t = plugin::DEFAULT_OPEN_FILES)]
    pub(crate) plugin_open_files: usize,

    /// Most plugins loaded from env/ (in name order); the rest are refused.
    /// Every plugin's section is in every response.
    #[arg(long, value_name = "N", default_value_t = plugin::DEFAULT_MAX_PLUGINS)]
    pub(crate) max_plugins: usize,

    /// Largest plugin file compiled (e.g. 32MiB); a larger one is refused
    /// before it is read.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = DEFAULT_MAX_PLUGIN_SIZE_TEXT)]
    pub(crate) plugin_max_size: usize,

    /// CPU time compiling one plugin may take (its threads together; twice
    /// that in wall-clock time); a plugin that takes longer is refused.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
          default_value = DEFAULT_COMPILE_TIME_TEXT)]
    pub(crate) plugin_compile_time: Duration,

    /// Memory compiling one plugin may use; a plugin that needs more is
    /// refused.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = DEFAULT_COMPILE_MEMORY_TEXT)]
    pub(crate) plugin_compile_memory: usize,

    /// In a session, a plugin larger than this (e.g. 1MiB; 1 for all) whose
    /// optimised code is not cached yet starts at once on baseline code
    /// (wasmtime's Winch) while its optimised code is compiled in the
    /// background for the cache. `check`, `call` and `test` compile
    /// optimised code at once.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = DEFAULT_BASELINE_ABOVE_TEXT)]
    pub(crate) plugin_baseline_above: usize,
}

/// The defaults of the plugin limits, as the help shows them (a unit test
/// holds them equal to the plugin crate's).
const DEFAULT_MAX_PLUGIN_SIZE_TEXT: &str = "32MiB";
const DEFAULT_COMPILE_TIME_TEXT: &str = "120s";
const DEFAULT_COMPILE_MEMORY_TEXT: &str = "2GiB";
/// Cranelift compiles a plugin under this size in a fraction of a second.
const DEFAULT_BASELINE_ABOVE_TEXT: &str = "1MiB";

impl PluginArgs {
    /// The settings, with `grants` as the grants file (`None`: the
    /// default, <project>/env/envhost.toml, for a session; none at all for
    /// `check`).
    pub(crate) fn settings(&self, grants: Option<PathBuf>) -> PluginSettings {
        let cache = if self.no_plugin_cache {
            CodeCache::Disabled
        } else if let Some(dir) = &self.plugin_cache {
            CodeCache::Directory(dir.clone())
        } else {
            PluginSettings::default().cache
        };
        let mut settings = PluginSettings {
            cache,
            memory_limit: self.plugin_memory,
            open_files: self.plugin_open_files,
            max_plugins: self.max_plugins,
            max_size: self.plugin_max_size as u64,
            config_file: grants,
            ..PluginSettings::default()
        };
        // This binary is the compiler (`compile-plugin`).
        settings.compile_bounded(self.plugin_compile_time, self.plugin_compile_memory as u64);
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_limits_shown_are_the_defaults() {
        assert_eq!(
            parse_size(DEFAULT_MAX_PLUGIN_SIZE_TEXT),
            Ok(plugin::DEFAULT_MAX_PLUGIN_SIZE as usize)
        );
        assert_eq!(
            parse_duration(DEFAULT_COMPILE_TIME_TEXT),
            Ok(plugin::DEFAULT_COMPILE_TIME)
        );
        assert_eq!(
            parse_size(DEFAULT_COMPILE_MEMORY_TEXT),
            Ok(plugin::DEFAULT_COMPILE_MEMORY as usize)
        );
    }
}
