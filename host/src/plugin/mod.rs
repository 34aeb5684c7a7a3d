//! Ad-hoc environments as WebAssembly components ("plugins").
//!
//! A plugin is a component for the WIT world `envhost:environment/plugin`
//! (`wit/environment.wit`) saved as `<project>/env/NAME.wasm`. At start-up
//! [`load_project_plugins`] reads the operator's `env/envhost.toml`, finds
//! the plugins, type-checks each with its grants (pin, compile, link,
//! instantiate, describe, requests), registers the good ones as
//! environments and reports the refused ones (stderr, an event, a screen
//! section); `envhost check` ([`check`]) runs the same checks on one file.
//!
//! - [`bindings`]: the host side of the WIT, generated.
//! - [`config_file`]: `env/envhost.toml`, parsed with locations;
//!   [`grants`]: what each plugin may do, resolved, and compared with what
//!   it asks for.
//! - [`sandbox`]: engine, linker, store limits, WASI opened only as far as
//!   granted.
//! - [`interactive`]: the import that runs granted programs in a PTY.
//! - [`epoch`]: the clock thread behind per-call time limits.
//! - [`guest_io`]: plugins' stdout, stderr and log lines, bounded.
//! - [`cache`]: compiled code kept across starts.
//! - [`loader`]: discovery and the load steps; [`validate`]: refusals in
//!   words.
//! - [`instance`]: one live instance and its calls; [`failure`]: why a call
//!   failed.
//! - [`environment`]: a plugin as an `Environment` (help, restarts).
//! - [`check`]: the `envhost check` report.
//!
//! This module wires them together for `main`; it must not know the
//! protocol.

pub mod bindings;
pub mod cache;
pub mod check;
pub mod config_file;
pub mod environment;
pub mod epoch;
pub mod failure;
pub mod file_hashes;
pub mod grants;
pub mod guest_io;
pub mod instance;
pub mod interactive;
pub mod loader;
pub mod sandbox;
pub mod validate;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::environment::CancelFlag;
use crate::environment::ScreenSection;
use crate::events::EnvironmentKind;
use crate::orchestrator::{NoticeSection, Orchestrator};
use crate::output::capture::OutputLimits;

pub use cache::CodeCache;
pub use environment::{PluginEnvironment, PluginParts};
pub use guest_io::{DiscardSink, LogSink, StderrSink};
pub use sandbox::{DEFAULT_MEMORY_LIMIT, Sandbox, SandboxError};
pub use validate::Refusal;

/// The screen section that lists refused plugins. Not an identifier, so it
/// can never be an environment's name.
pub const REFUSED_SECTION: &str = "refused-plugins";

/// The screen section for problems with the plugin configuration that
/// refuse no plugin in particular (a broken file with no plugins, an entry
/// for a plugin that is not there).
pub const CONFIG_SECTION: &str = "plugin-config";

/// How plugins are run, from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSettings {
    pub cache: CodeCache,
    /// Bytes of memory each plugin instance may use (unless granted more).
    pub memory_limit: usize,
    /// The grants file, when not the default (`env/envhost.toml` next to
    /// the plugins).
    pub config_file: Option<PathBuf>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            cache: CodeCache::default_directory()
                .map(CodeCache::Directory)
                .unwrap_or(CodeCache::Disabled),
            memory_limit: DEFAULT_MEMORY_LIMIT,
            config_file: None,
        }
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

/// What loading the project's plugins did.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub loaded: Vec<String>,
    pub refused: Vec<Refusal>,
}

/// `<project>/env`.
pub fn plugin_dir(project_dir: &Path) -> PathBuf {
    project_dir.join("env")
}

/// Loads `<project>/env/*.wasm` into the orchestrator. Refused plugins go
/// to stderr, to an `environment_failed` event, and to the
/// [`REFUSED_SECTION`] of the screen; every other environment still loads.
/// With no `*.wasm` files, no engine is even built. `log` receives what the
/// plugins write (stdout, stderr, log lines) from then on.
pub fn load_project_plugins(
    orchestrator: &mut Orchestrator,
    project_dir: &Path,
    settings: &PluginSettings,
    output_limits: &OutputLimits,
    cancel: &CancelFlag,
    log: Arc<dyn LogSink>,
) -> LoadReport {
    let mut report = LoadReport::default();
    let folder = plugin_dir(project_dir);
    let (config_path, config_shown) = config_path(settings, &folder, Some(project_dir));
    let config = config_file::ConfigFile::read(&config_path, &config_shown);
    let discovery = loader::discover(&folder);
    report.refused = discovery.refusals;
    let notices = config_notices(config.as_ref(), &discovery.candidates, &report.refused);
    let mut planned = Vec::new();
    let protected = [folder.clone(), config_path.clone()];
    for candidate in discovery.candidates {
        match grants::grants_for(
            config.as_ref(),
            candidate.name.as_str(),
            &config_shown,
            project_dir,
            &protected,
            output_limits.clone(),
        ) {
            Ok(granted) => planned.push((candidate, Arc::new(granted))),
            Err(problem) => report.refused.push(Refusal::new(
                candidate.name.as_str(),
                &candidate.path,
                problem,
            )),
        }
    }
    if !planned.is_empty() {
        match Sandbox::new(settings.memory_limit) {
            Err(err) => {
                for (candidate, _) in &planned {
                    report.refused.push(Refusal::new(
                        candidate.name.as_str(),
                        &candidate.path,
                        format!("plugins cannot run on this host: {err}"),
                    ));
                }
            }
            Ok(sandbox) => {
                let sandbox = Arc::new(sandbox);
                let results = loader::load_all(&sandbox, &settings.cache, &planned);
                for result in results {
                    match result {
                        Ok(loaded) => {
                            let name = loaded.name.clone();
                            let detail = load_detail(&loaded, project_dir);
                            for line in loaded.start_output.log_lines(name.as_str()) {
                                log.line(&line);
                            }
                            let powers = grants::screen_lines(&grants::compare(
                                &loaded.requests,
                                &loaded.grants,
                                sandbox.memory_limit(),
                            ));
                            let environment = PluginEnvironment::new(PluginParts {
                                name: name.to_string(),
                                sandbox: Arc::clone(&sandbox),
                                pre: loaded.pre,
                                instance: loaded.instance,
                                commands: loaded.description.commands,
                                grants: loaded.grants,
                                powers,
                                output_limits: output_limits.clone(),
                                log: Arc::clone(&log),
                                cancel: cancel.clone(),
                            });
                            match orchestrator.register(
                                name.clone(),
                                EnvironmentKind::Plugin,
                                Box::new(environment),
                                Some(detail),
                            ) {
                                Ok(()) => report.loaded.push(name.to_string()),
                                Err(err) => report.refused.push(Refusal::new(
                                    name.as_str(),
                                    &loaded.path,
                                    err.to_string(),
                                )),
                            }
                        }
                        Err(refusal) => report.refused.push(refusal),
                    }
                }
            }
        }
    }
    report.refused.sort_by(|a, b| a.file.cmp(&b.file));
    for refusal in &report.refused {
        let sentence = refusal.sentence(Some(project_dir));
        eprintln!("envhost: {sentence}");
        orchestrator.record_load_failure(&refusal.plugin, &sentence);
    }
    if !report.refused.is_empty() {
        orchestrator.add_notice(NoticeSection {
            key: REFUSED_SECTION.to_owned(),
            section: refused_section(&report.refused, project_dir),
        });
    }
    if !notices.is_empty() {
        for notice in &notices {
            eprintln!("envhost: {notice}");
        }
        let mut content = format!(
            "The plugin configuration ({config_shown}) has problems; fix them and restart the host:\n"
        );
        for notice in &notices {
            content.push_str(&format!("  - {notice}\n"));
        }
        let lines = content.lines().count();
        orchestrator.add_notice(NoticeSection {
            key: CONFIG_SECTION.to_owned(),
            section: ScreenSection::with_max_lines(content, lines.clamp(1, 20)),
        });
    }
    report
}

/// Problems in the configuration that no refusal reports: a broken file
/// when there is no plugin to refuse, and entries for plugins that are not
/// in env/ (a typo would leave the real plugin without its pin).
fn config_notices(
    config: Option<&config_file::ConfigFile>,
    candidates: &[loader::Candidate],
    refused: &[Refusal],
) -> Vec<String> {
    let Some(config) = config else {
        return Vec::new();
    };
    let mut notices = Vec::new();
    if let Some(error) = &config.file_error {
        if candidates.is_empty() {
            notices.push(format!("{error} (no plugin is loaded until it is fixed)"));
        }
        return notices;
    }
    for (name, entry) in &config.entries {
        let present = candidates.iter().any(|c| c.name.as_str() == name)
            || refused.iter().any(|r| r.plugin == *name);
        if !present {
            let at = match entry {
                Ok(entry) => entry
                    .at
                    .map(|at| format!(":{}", at.line))
                    .unwrap_or_default(),
                Err(error) => error
                    .at
                    .map(|at| format!(":{}", at.line))
                    .unwrap_or_default(),
            };
            notices.push(format!(
                "warning: {}{at}: [plugins.{name}] grants powers to `{name}`, but there is no {name}.wasm among the plugins; is the name misspelled?",
                config.shown
            ));
        }
    }
    notices
}

fn load_detail(loaded: &loader::LoadedPlugin, project_dir: &Path) -> String {
    let shown = loaded
        .path
        .strip_prefix(project_dir)
        .unwrap_or(&loaded.path)
        .display()
        .to_string();
    let how = match &loaded.compile {
        cache::CacheOutcome::Hit { .. } => "compiled code from the cache",
        cache::CacheOutcome::Compiled { saved: Ok(_) } => "compiled and cached",
        cache::CacheOutcome::Compiled { saved: Err(_) } => "compiled (not cached)",
        cache::CacheOutcome::CompiledUncached => "compiled (cache off)",
    };
    let style = match loaded.description.commands.len() {
        0 => "manual style".to_owned(),
        n => format!("{n} commands"),
    };
    format!(
        "{shown}, {}, {how} in {}, {style}",
        format_bytes(loaded.size),
        format_duration(loaded.compile_time)
    )
}

fn refused_section(refused: &[Refusal], project_dir: &Path) -> ScreenSection {
    let mut content = format!(
        "{} plugin{} in env/ could not be loaded (the other environments work). `envhost check env/NAME.wasm` explains more:\n",
        refused.len(),
        if refused.len() == 1 { "" } else { "s" }
    );
    for refusal in refused {
        content.push_str(&format!("  - {}\n", refusal.sentence(Some(project_dir))));
    }
    let lines = content.lines().count();
    ScreenSection::with_max_lines(content, lines.clamp(1, 40))
}

/// `1.5 s`, `300 ms`, `2.5 ms`, `42 µs`.
pub fn format_duration(duration: Duration) -> String {
    if duration < Duration::from_millis(1) {
        return format!("{} µs", duration.as_micros());
    }
    if duration < Duration::from_secs(1) {
        let ms = duration.as_secs_f64() * 1_000.0;
        return if ms < 10.0 {
            format!("{ms:.1} ms")
        } else {
            format!("{ms:.0} ms")
        };
    }
    let s = duration.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// `512 B`, `94.9 KiB`, `256 MiB`, `4.0 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for next in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    if value.fract() == 0.0 && value >= 10.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_read_naturally() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(94_908), "92.7 KiB");
        assert_eq!(format_bytes(256 << 20), "256 MiB");
        assert_eq!(format_bytes(4 << 30), "4.0 GiB");
        assert_eq!(format_duration(Duration::from_micros(42)), "42 µs");
        assert_eq!(format_duration(Duration::from_micros(2_500)), "2.5 ms");
        assert_eq!(format_duration(Duration::from_millis(300)), "300 ms");
        assert_eq!(format_duration(Duration::from_secs(120)), "120 s");
        assert_eq!(format_duration(Duration::from_millis(1_500)), "1.5 s");
    }

    #[test]
    fn the_refused_section_key_cannot_be_an_environment_name() {
        assert!(crate::environment::EnvironmentName::new(REFUSED_SECTION).is_err());
    }
}
