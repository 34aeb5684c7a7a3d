//! Loading: the project's plugins found, checked with their grants, compiled
//! (or taken from the cache), instantiated and described, then handed over
//! as environments, with every refusal put in words.
//!
//! - `loader`: discovery and the load steps of one plugin;
//! - `names`: which names read alike;
//! - `compile`: compiling, bounded in time and memory;
//! - `cache` and `file_hashes`: compiled code kept across starts;
//! - `tiering`: baseline code first, optimised code in the background;
//! - `refusals`: why a plugin was refused, in words.
//!
//! It must not know the orchestrator: [`load`] returns what it loaded.

pub(crate) mod cache;
pub(crate) mod compile;
pub(crate) mod file_hashes;
pub(crate) mod loader;
pub(crate) mod names;
pub(crate) mod refusals;
pub(crate) mod tiering;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use envhost_core::{
    CancelFlag, EnvironmentKind, LoadFailure, LoadedEnvironment, NoticeSection, ScreenSection, text,
};
use envhost_process::OutputLimits;

use crate::environment::{PluginEnvironment, PluginParts};
use crate::grants::{self, config_file};
use crate::guest_io::LogSink;
use crate::limits;
use crate::load::refusals::Refusal;
use crate::sandbox::Sandbox;
use crate::settings::{PluginSettings, config_origin, config_path, plugin_dir};

/// The screen section that lists refused plugins. Not an identifier, so it
/// can never be an environment's name.
pub const REFUSED_SECTION: &str = "refused-plugins";

/// The screen section for problems with the plugin configuration that
/// refuse no plugin in particular (a broken file with no plugins, an entry
/// for a plugin that is not there).
pub const CONFIG_SECTION: &str = "plugin-config";

/// A plugin ready to register, and the file it came from.
pub struct Plugin {
    /// The environment, as the orchestrator registers it.
    pub environment: LoadedEnvironment,
    /// The `.wasm` file, for a refusal's sentence.
    pub file: PathBuf,
    /// The sha256 of the bytes it was built from: a watching host keeps
    /// it running while the file's content stays the same.
    pub sha256: String,
}

/// What loading the project's plugins gave: the plugins ready to register
/// ([`Plugins::take_loaded`]), and the refusals, to report with those of
/// registration ([`Plugins::refuse`]) once it is done ([`Plugins::finish`]).
pub struct Plugins {
    loaded: Vec<Plugin>,
    refused: Vec<Refusal>,
    config_problems: Vec<String>,
    config_shown: String,
    project_dir: PathBuf,
}

/// What to report about the plugins once they are registered.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Each refused plugin and the sentence that says why, by file name:
    /// for stderr and for an `environment_failed` event each.
    pub refused: Vec<LoadFailure>,
    /// Problems with the grants file that refuse no plugin in particular,
    /// for stderr.
    pub config_problems: Vec<String>,
    /// The screen sections that list the refusals and the problems.
    pub notices: Vec<NoticeSection>,
}

impl Plugins {
    /// The plugins that loaded, to register (once; later calls get none).
    pub fn take_loaded(&mut self) -> Vec<Plugin> {
        std::mem::take(&mut self.loaded)
    }

    /// Records that the loaded plugin `name` (from `file`) could not be
    /// registered: its name is taken.
    pub fn refuse(&mut self, name: &str, file: &Path, reason: String) {
        self.refused.push(Refusal::new(name, file, reason));
    }

    /// Every refusal in words, sorted by file, and the screen sections
    /// that show them.
    pub fn finish(mut self) -> LoadReport {
        self.refused.sort_by(|a, b| a.file.cmp(&b.file));
        let project_dir = Some(self.project_dir.as_path());
        let mut report = LoadReport {
            refused: self
                .refused
                .iter()
                .map(|refusal| LoadFailure {
                    name: refusal.plugin.clone(),
                    reason: refusal.sentence(project_dir),
                })
                .collect(),
            ..LoadReport::default()
        };
        if !self.refused.is_empty() {
            report.notices.push(NoticeSection {
                key: REFUSED_SECTION.to_owned(),
                section: refused_section(&self.refused, &self.project_dir),
            });
        }
        if !self.config_problems.is_empty() {
            let mut content = format!(
                "The plugin configuration ({}) has problems; fix them and restart the host:\n",
                self.config_shown
            );
            for problem in &self.config_problems {
                content.push_str(&format!("  - {problem}\n"));
            }
            let lines = content.lines().count();
            report.notices.push(NoticeSection {
                key: CONFIG_SECTION.to_owned(),
                section: ScreenSection::with_max_lines(content, lines.clamp(1, 20)),
            });
        }
        report.config_problems = self.config_problems;
        report
    }
}

/// Loads `<project>/env/*.wasm`: the plugins that pass every check, ready
/// to register, and the refused ones, for stderr, an `environment_failed`
/// event each and the `refused-plugins` section of the screen (every other
/// environment still loads). With no `*.wasm` files, no engine is even
/// built. `log` receives what the plugins write (stdout, stderr, log lines)
/// from then on.
pub fn load(
    project_dir: &Path,
    settings: &PluginSettings,
    output_limits: &OutputLimits,
    cancel: &CancelFlag,
    log: Arc<dyn LogSink>,
) -> Plugins {
    let mut report = Plugins {
        loaded: Vec::new(),
        refused: Vec::new(),
        config_problems: Vec::new(),
        config_shown: String::new(),
        project_dir: project_dir.to_owned(),
    };
    let folder = plugin_dir(project_dir);
    let (config_path, config_shown) = config_path(settings, &folder, Some(project_dir));
    let config =
        config_file::ConfigFile::read(&config_path, &config_shown, config_origin(settings));
    let discovery = loader::discover(&folder, settings.max_plugins);
    report.refused = discovery.refusals;
    let notices = config_notices(config.as_ref(), &discovery.candidates, &report.refused);
    let mut planned = Vec::new();
    let shielded = grants::Shielded {
        from_any: settings.cache.directory().into_iter().collect(),
        from_writing: vec![folder.clone(), config_path.clone()],
    };
    for candidate in discovery.candidates {
        match grants::grants_for(
            config.as_ref(),
            candidate.name.as_str(),
            &config_shown,
            project_dir,
            &shielded,
            output_limits.clone(),
        ) {
            Ok(granted) => planned.push((candidate, Arc::new(granted))),
            Err(problem) => report.refused.push(Refusal::new(
                candidate.name.as_str(),
                &candidate.path,
                problem.to_string(),
            )),
        }
    }
    if !planned.is_empty() {
        let open_files = limits::open_files_per_plugin(settings.open_files, planned.len());
        match Sandbox::new(settings.memory_limit, open_files) {
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
                let results = loader::load_all(&sandbox, settings, &planned);
                for result in results {
                    match result {
                        Ok(loaded) => report.loaded.push(environment_of(
                            loaded,
                            &sandbox,
                            settings,
                            project_dir,
                            output_limits,
                            cancel,
                            &log,
                        )),
                        Err(refusal) => report.refused.push(refusal),
                    }
                }
            }
        }
    }
    report.config_problems = notices;
    report.config_shown = config_shown;
    report
}

/// The plugin `loaded` as an environment ready to register.
fn environment_of(
    loaded: loader::LoadedPlugin,
    sandbox: &Arc<Sandbox>,
    settings: &PluginSettings,
    project_dir: &Path,
    output_limits: &OutputLimits,
    cancel: &CancelFlag,
    log: &Arc<dyn LogSink>,
) -> Plugin {
    let name = loaded.name.clone();
    let detail = load_detail(&loaded, project_dir);
    for line in loaded.start_output.log_lines(name.as_str()) {
        log.line(&line);
    }
    let file = loaded.path.clone();
    let sha256 = loaded.sha256.clone();
    let environment = plugin_environment(
        loaded,
        sandbox,
        Some(settings),
        output_limits.clone(),
        log,
        cancel,
    );
    Plugin {
        environment: LoadedEnvironment {
            name,
            kind: EnvironmentKind::Plugin,
            environment: Box::new(environment),
            detail: Some(detail),
        },
        file,
        sha256,
    }
}

/// The environment of a plugin that loaded (its first instance running),
/// with the powers it asked for and was granted shown under its section.
pub(crate) fn plugin_environment(
    loaded: loader::LoadedPlugin,
    sandbox: &Arc<Sandbox>,
    settings: Option<&PluginSettings>,
    output_limits: OutputLimits,
    log: &Arc<dyn LogSink>,
    cancel: &CancelFlag,
) -> PluginEnvironment {
    let powers = grants::screen_lines(&grants::compare(
        &loaded.requests,
        &loaded.grants,
        sandbox.memory_limit(),
    ));
    let upgrade = tiering::Upgrade::default();
    if let (Some(pending), Some(settings)) = (loaded.pending, settings) {
        tiering::start(
            sandbox.background(),
            tiering::Job {
                name: loaded.name.to_string(),
                pending,
                cache: settings.cache.clone(),
                compiler: settings.compiler.clone(),
                optimised: sandbox.runtime(crate::sandbox::Tier::Optimised).clone(),
                upgrade: upgrade.clone(),
                log: Arc::clone(log),
            },
        );
    }
    PluginEnvironment::new(PluginParts {
        name: loaded.name.to_string(),
        sandbox: Arc::clone(sandbox),
        pre: loaded.pre,
        instance: loaded.instance,
        commands: loaded.description.commands,
        grants: loaded.grants,
        powers,
        output_limits,
        log: Arc::clone(log),
        cancel: cancel.clone(),
        upgrade,
    })
}

/// One plugin file to load on its own ([`load_file`]).
pub struct PluginFile<'a> {
    /// The `.wasm` file (anywhere: `envhost call` runs files outside env/);
    /// the environment is named after its stem, as in env/.
    pub path: &'a Path,
    /// Apply the grants file (`settings.config_file`, else
    /// `<project>/env/envhost.toml`) as a session does; `false`: nothing is
    /// granted.
    pub apply_grants: bool,
    /// How many plugins share the host's open-files budget with it.
    pub sharing: usize,
}

/// Loads one plugin file exactly as [`load`] loads each plugin of env/
/// (name, grants and pin, compile or cache, link, instantiate, describe,
/// requests), on a sandbox of its own: for `envhost call` and `envhost
/// test` (a watching host uses [`load_changed`], which also checks it
/// beside the plugins already loaded). The error is the refusal's sentence.
pub fn load_file(
    file: &PluginFile<'_>,
    project_dir: &Path,
    settings: &PluginSettings,
    output_limits: &OutputLimits,
    cancel: &CancelFlag,
    log: Arc<dyn LogSink>,
) -> Result<Plugin, String> {
    candidate_of(file.path)
        .and_then(|candidate| {
            load_candidate(
                &candidate,
                file,
                project_dir,
                settings,
                output_limits,
                cancel,
                log,
            )
        })
        .map_err(|refusal| refusal.sentence(Some(project_dir)))
}

/// Loads a plugin file of env/ that appeared or changed while a watching
/// host runs, with every check start-up applies ([`load`]): the name rules
/// (an identifier, not a built-in's or one that reads like it), beside the
/// plugins already loaded (`loaded`, by name: not one that reads like
/// theirs, and not past `--max-plugins` unless it replaces one of them),
/// then the size limit, grants and pin, compile or cache, link,
/// instantiate and describe. The error is the refusal's sentence, in the
/// words start-up uses.
pub fn load_changed(
    file: &PluginFile<'_>,
    loaded: &[String],
    project_dir: &Path,
    settings: &PluginSettings,
    output_limits: &OutputLimits,
    cancel: &CancelFlag,
    log: Arc<dyn LogSink>,
) -> Result<Plugin, String> {
    let in_words = |refusal: Refusal| refusal.sentence(Some(project_dir));
    let candidate = candidate_of(file.path).map_err(in_words)?;
    loader::admit(&candidate, loaded, settings.max_plugins).map_err(in_words)?;
    load_candidate(
        &candidate,
        file,
        project_dir,
        settings,
        output_limits,
        cancel,
        log,
    )
    .map_err(in_words)
}

/// The sha256 of the plugin file at `path`, read as loading reads it (no
/// symlink followed, at most the size limit); `None` when it cannot be
/// read (loading it says why).
pub fn file_sha256(path: &Path, settings: &PluginSettings) -> Option<String> {
    loader::file_sha256(path, settings.max_size)
}

/// The candidate for `path`, or the refusal of its name.
fn candidate_of(path: &Path) -> Result<loader::Candidate, Refusal> {
    match loader::candidate(path) {
        Ok(Some(candidate)) => Ok(candidate),
        Ok(None) => Err(Refusal::new(
            &path.to_string_lossy(),
            path,
            "its name starts with `_`, so the host skips it in env/; rename it to load it",
        )),
        Err(refusal) => Err(refusal),
    }
}

/// The load steps of one plugin once its name is admitted.
fn load_candidate(
    candidate: &loader::Candidate,
    file: &PluginFile<'_>,
    project_dir: &Path,
    settings: &PluginSettings,
    output_limits: &OutputLimits,
    cancel: &CancelFlag,
    log: Arc<dyn LogSink>,
) -> Result<Plugin, Refusal> {
    let name = candidate.name.clone();
    let refuse = |problem: String| Refusal::new(name.as_str(), file.path, problem);
    let folder = plugin_dir(project_dir);
    let (config_path, config_shown) = config_path(settings, &folder, Some(project_dir));
    let config = if file.apply_grants {
        config_file::ConfigFile::read(&config_path, &config_shown, config_origin(settings))
    } else {
        None
    };
    let shielded = grants::Shielded {
        from_any: settings.cache.directory().into_iter().collect(),
        from_writing: vec![folder, config_path],
    };
    let granted = grants::grants_for(
        config.as_ref(),
        name.as_str(),
        &config_shown,
        project_dir,
        &shielded,
        output_limits.clone(),
    )
    .map_err(|refused| refuse(refused.to_string()))?;
    let open_files = limits::open_files_per_plugin(settings.open_files, file.sharing.max(1));
    let sandbox = Sandbox::new(settings.memory_limit, open_files)
        .map_err(|err| refuse(format!("plugins cannot run on this host: {err}")))?;
    let sandbox = Arc::new(sandbox);
    let loaded = loader::load(&sandbox, settings, candidate, &Arc::new(granted))?;
    Ok(environment_of(
        loaded,
        &sandbox,
        settings,
        project_dir,
        output_limits,
        cancel,
        &log,
    ))
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
        cache::CacheOutcome::Hit { .. } => "compiled code from the cache".to_owned(),
        cache::CacheOutcome::Compiled { saved, rejected } => {
            let mut how = if saved.is_ok() {
                "compiled and cached".to_owned()
            } else {
                "compiled (not cached)".to_owned()
            };
            if let Some(why) = rejected {
                how.push_str(&format!(" (the cached code was rejected: {why})"));
            }
            how
        }
        cache::CacheOutcome::CompiledUncached => "compiled (cache off)".to_owned(),
        cache::CacheOutcome::Baseline { rejected } => {
            let mut how =
                "baseline code (optimised code compiling in the background for the cache)"
                    .to_owned();
            if let Some(why) = rejected {
                how.push_str(&format!(" (the cached code was rejected: {why})"));
            }
            how
        }
    };
    let style = match loaded.description.commands.len() {
        0 => "manual style".to_owned(),
        n => format!("{n} commands"),
    };
    format!(
        "{shown}, {}, {how} in {}, {style}",
        text::bytes(loaded.size),
        text::duration(loaded.compile_time)
    )
}

fn refused_section(refused: &[Refusal], project_dir: &Path) -> ScreenSection {
    let mut content = format!(
        "{} in env/ could not be loaded (the other environments work). `envhost check env/NAME.wasm` explains more:\n",
        text::counted(refused.len(), "plugin")
    );
    for refusal in refused {
        content.push_str(&format!("  - {}\n", refusal.sentence(Some(project_dir))));
    }
    let lines = content.lines().count();
    ScreenSection::with_max_lines(content, lines.clamp(1, 40))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refused_section_key_cannot_be_an_environment_name() {
        assert!(envhost_core::EnvironmentName::new(REFUSED_SECTION).is_err());
    }
}
