//! `envhost check FILE.wasm`: the plugin author's main tool.
//!
//! It validates a file exactly as the loader does at start-up (name, the
//! operator's configuration and pin, header, compile, link, instantiate,
//! describe, requests, help) and prints what it found — the environment
//! name, description, style, commands, the host imports it uses, what it
//! asks for and what it is granted, its size and hash, how it was compiled
//! — and the screen section the agent will first see, rendered by the same
//! code the host uses; or the refusal. The verdict and its reasons come
//! first, the details after. A plugin whose first screen fails (a trap —
//! a panic, an exception, a value of the wrong type — or a timeout) fails
//! the check although the host would load it: the agent's first look at it
//! would be an error. A first screen over its own max-lines or the host's
//! per-section cap, or holding control characters the host removes, is a
//! warning. It grants the plugin nothing unless
//! given a grants file (`--grants FILE`, read as the host reads
//! `env/envhost.toml`, the project being the folder above the plugin's):
//! the plugin runs while it is checked, and a bundle's own grants file is
//! not the reviewer's. (`envhost add` checks a fetched file with the
//! project's own grants file, the operator's, which would apply to it at
//! the next start anyway.) It also fills the compiled-code cache, so a
//! checked plugin starts fast.
//! This module renders reports; the checks are the loader's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::grants::config_file::{ConfigFile, Origin};
use crate::grants::{self, Grants, GrantsApplied};
use crate::guest_io::LogSink;
use crate::limits;
use crate::load::cache::CacheOutcome;
use crate::load::loader::{self, Candidate, LoadedPlugin};
use crate::sandbox::Sandbox;
use crate::settings::{PluginSettings, config_path};
use envhost_core::text;
use envhost_core::{CancelFlag, Environment, EnvironmentName};
use envhost_process::OutputLimits;

/// The verdict on one file, rendered.
pub struct CheckReport {
    /// Whether the host would load the file.
    pub ok: bool,
    /// The report, for stdout.
    pub text: String,
    /// The WIT world the component targets, when it loaded.
    pub world: Option<String>,
}

/// Checks one file. `log` receives what the plugin writes while starting.
pub fn check_file(path: &Path, settings: &PluginSettings, log: Arc<dyn LogSink>) -> CheckReport {
    // The name of a downloaded file may hold anything.
    let shown = crate::plugin_text::name(&path.to_string_lossy()).into_owned();
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let candidate = match loader::candidate(path) {
        Ok(Some(candidate)) => Some(candidate),
        Ok(None) => {
            notes.push(
                "its name starts with `_`, so the host skips it in env/ (rename it to load it)"
                    .to_owned(),
            );
            placeholder(path)
        }
        Err(refusal) => {
            problems.push(refusal.sentence(None));
            placeholder(path)
        }
    };
    let Some(candidate) = candidate else {
        return CheckReport {
            ok: false,
            text: format!("{shown}: cannot check a file without a name\n"),
            world: None,
        };
    };
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let project = folder.join("..");
    let (config_file, config_shown) = config_path(settings, folder, None);
    // A plugin under review runs with no grants unless the reviewer names
    // the file to apply: a downloaded bundle's own envhost.toml must not
    // grant its plugin `sh` while it is being checked.
    let (config, applied) = if settings.config_file.is_some() {
        read_grants(&config_file, &config_shown, Origin::Operator)
    } else {
        if config_file.is_file() {
            notes.push(format!(
                "{config_shown} was not applied: `envhost check` grants nothing unless told which grants file to apply; to check the plugin with those grants, pass --grants {config_shown}"
            ));
        }
        (None, GrantsApplied::NotGiven)
    };
    let place = Place {
        folder: folder.to_owned(),
        project,
        config_file,
        config_shown,
        config,
        applied,
    };
    check_candidate(&candidate, &place, problems, notes, false, settings, log)
}

/// The grants file, read, and whether it was found.
fn read_grants(
    config_file: &Path,
    config_shown: &str,
    origin: Origin,
) -> (Option<ConfigFile>, GrantsApplied) {
    let config = ConfigFile::read(config_file, config_shown, origin);
    let applied = if config.is_some() {
        GrantsApplied::Read
    } else {
        GrantsApplied::NotFound
    };
    (config, applied)
}

/// Checks a file that is not in `env/` yet — one `envhost add` fetched —
/// as the plugin `name` of the project at `project`: with the grants the
/// project's grants file gives `name`, exactly as start-up would check
/// `env/NAME.wasm`, except for the entry's `sha256` pin, which is what
/// `add` is about to write.
pub fn check_as(
    path: &Path,
    name: &str,
    project: &Path,
    settings: &PluginSettings,
    log: Arc<dyn LogSink>,
) -> CheckReport {
    // The loader's rule: a name it would refuse in env/ is refused here.
    let name = match crate::load::names::plugin_name(name) {
        Ok(name) => name,
        Err(refusal) => {
            return CheckReport {
                ok: false,
                text: format!("{}: REFUSED: {refusal}\n", path.display()),
                world: None,
            };
        }
    };
    let folder = crate::settings::plugin_dir(project);
    let (config_file, config_shown) = config_path(settings, &folder, Some(project));
    let (config, applied) = read_grants(
        &config_file,
        &config_shown,
        crate::settings::config_origin(settings),
    );
    let place = Place {
        folder,
        project: project.to_owned(),
        config_file,
        config_shown,
        config,
        applied,
    };
    let candidate = Candidate {
        name,
        path: path.to_owned(),
    };
    check_candidate(
        &candidate,
        &place,
        Vec::new(),
        Vec::new(),
        true,
        settings,
        log,
    )
}

/// Where a checked plugin is taken to live.
struct Place {
    /// Its `env/` folder (protected from read-write grants).
    folder: PathBuf,
    project: PathBuf,
    config_file: PathBuf,
    config_shown: String,
    /// The grants file applied (`None`: nothing is granted), and why.
    config: Option<ConfigFile>,
    applied: GrantsApplied,
}

fn check_candidate(
    candidate: &Candidate,
    place: &Place,
    mut problems: Vec<String>,
    notes: Vec<String>,
    ignore_pin: bool,
    settings: &PluginSettings,
    log: Arc<dyn LogSink>,
) -> CheckReport {
    let path = &candidate.path;
    let shown = crate::plugin_text::name(&path.to_string_lossy()).into_owned();
    let open_files = limits::open_files_per_plugin(settings.open_files, 1);
    let sandbox = match Sandbox::new(settings.memory_limit, open_files) {
        Ok(sandbox) => Arc::new(sandbox),
        Err(err) => {
            return CheckReport {
                ok: false,
                text: format!("{shown}: cannot check: {err}\n"),
                world: None,
            };
        }
    };
    let mut grants = grants_checked(candidate, place, settings, &mut problems);
    if ignore_pin {
        grants.pin = None;
    }
    let loaded = loader::load(&sandbox, settings, candidate, &Arc::new(grants));
    let mut findings = Findings {
        problems,
        warnings: Vec::new(),
        notes,
        details: String::new(),
    };
    let mut world = None;
    // The verdict and its reasons come first; the details after them.
    let verdict = match loaded {
        Err(refusal) => {
            findings.problems.push(refusal.sentence(None));
            format!("{shown}: REFUSED\n")
        }
        Ok(loaded) => {
            world = Some(loaded.pre.world());
            let refused = !findings.problems.is_empty();
            findings
                .details
                .push_str(&describe_loaded(&loaded, settings, place.applied));
            let preview = screen_preview(loaded, &sandbox, &log);
            findings.details.push_str(&preview.text);
            findings.warnings.extend(preview.warnings);
            let screen_failed = preview.error.is_some();
            findings.problems.extend(preview.error);
            if refused {
                format!("{shown}: REFUSED (the component itself is valid)\n")
            } else if screen_failed {
                format!(
                    "{shown}: FAILED: it loads as the environment `{}`, but its first screen fails\n",
                    candidate.name
                )
            } else {
                format!(
                    "{shown}: OK, loads as the environment `{}`\n",
                    candidate.name
                )
            }
        }
    };
    CheckReport {
        ok: findings.problems.is_empty(),
        text: findings.report(verdict),
        world,
    }
}

/// The candidate's grants from the place's grants file; when they cannot
/// be read, the refusal is a problem and it is checked with none.
fn grants_checked(
    candidate: &Candidate,
    place: &Place,
    settings: &PluginSettings,
    problems: &mut Vec<String>,
) -> Grants {
    let output_limits = OutputLimits::for_project(&place.project);
    let shielded = grants::Shielded {
        from_any: settings.cache.directory().into_iter().collect(),
        from_writing: vec![place.folder.clone(), place.config_file.clone()],
    };
    match grants::grants_for(
        place.config.as_ref(),
        candidate.name.as_str(),
        &place.config_shown,
        &place.project,
        &shielded,
        output_limits.clone(),
    ) {
        Ok(granted) => granted,
        Err(problem) => {
            problems.push(
                crate::load::refusals::Refusal::new(
                    candidate.name.as_str(),
                    &candidate.path,
                    problem.to_string(),
                )
                .sentence(None),
            );
            Grants::none(
                candidate.name.as_str(),
                &place.config_shown,
                &place.project,
                output_limits,
            )
        }
    }
}

/// What checking one plugin found, besides its verdict.
struct Findings {
    problems: Vec<String>,
    warnings: Vec<String>,
    notes: Vec<String>,
    details: String,
}

impl Findings {
    /// The report's text: the verdict, each problem, warning and note on a
    /// line of its own, then the details.
    fn report(&self, verdict: String) -> String {
        let mut text = verdict;
        for problem in &self.problems {
            text.push_str(&format!("error: {problem}\n"));
        }
        for warning in &self.warnings {
            text.push_str(&format!("warning: {warning}\n"));
        }
        for note in &self.notes {
            text.push_str(&format!("note: {note}\n"));
        }
        if !self.details.is_empty() {
            text.push('\n');
            text.push_str(&self.details);
        }
        text
    }
}

/// A name to check a badly named file under (its help fences use it):
/// the stem with every other character made `_`, prefixed when needed.
fn placeholder(path: &Path) -> Option<Candidate> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned = EnvironmentName::suggested_by(&stem);
    let name = EnvironmentName::new(&cleaned)
        .or_else(|_| EnvironmentName::new(&format!("env_{cleaned}")))
        .ok()?;
    Some(Candidate {
        name,
        path: path.to_owned(),
    })
}

fn describe_loaded(
    loaded: &LoadedPlugin,
    settings: &PluginSettings,
    applied: GrantsApplied,
) -> String {
    let mut text = String::new();
    let description = &loaded.description;
    let summary = if description.summary.is_empty() {
        "(none given)"
    } else {
        &description.summary
    };
    text.push_str(&format!("  description: {summary}\n"));
    if description.commands.is_empty() {
        text.push_str(
            "  style:       manual: it describes no commands, so it gets any text and owns its whole screen section\n",
        );
    } else {
        text.push_str(&format!(
            "  style:       declarative: {}; the host routes by first word and renders their help\n",
            text::counted(description.commands.len(), "command")
        ));
        text.push_str("  commands:\n");
        for spec in &description.commands {
            text.push_str(&format!(
                "    {} - {}{}\n",
                spec.signature.trim(),
                spec.short_description(),
                if spec.simple { " (simple)" } else { "" }
            ));
        }
    }
    text.push_str(&format!(
        "  contract:    envhost:environment@{} (world `{}`){}{}\n",
        loaded.pre.version().number(),
        loaded.pre.world(),
        if loaded.pre.has_state() {
            "; its state is kept across traps and restarts"
        } else {
            ""
        },
        if loaded.instance.screen_changes_only_when_called() {
            "; its screen is redrawn only after its own calls"
        } else {
            ""
        }
    ));
    text.push_str(&format!(
        "  host imports used ({}):\n",
        loaded.imports.len()
    ));
    for import in &loaded.imports {
        text.push_str(&format!("    {import}\n"));
    }
    text.push_str(&format!(
        "  size:        {} (sha256 {})\n",
        text::bytes(loaded.size),
        loaded.sha256
    ));
    let compiled = match &loaded.compile {
        CacheOutcome::Hit { path } => format!("loaded from the cache ({})", path.display()),
        CacheOutcome::Compiled {
            saved: Ok(path),
            rejected,
        } => format!(
            "compiled and cached ({}){}",
            path.display(),
            rejected
                .as_ref()
                .map(|why| format!("; the cached code was rejected: {why}"))
                .unwrap_or_default()
        ),
        CacheOutcome::Compiled {
            saved: Err(why), ..
        } => format!("compiled, not cached: {why}"),
        CacheOutcome::CompiledUncached => "compiled (the cache is off)".to_owned(),
        // `check` compiles optimised code at once (no `baseline_above`).
        CacheOutcome::Baseline { .. } => "compiled to baseline code".to_owned(),
    };
    text.push_str(&format!(
        "  code:        {compiled} in {}\n",
        text::duration(loaded.compile_time)
    ));
    let lines = grants::compare(&loaded.requests, &loaded.grants, settings.memory_limit);
    text.push_str(&grants::check_lines(&lines, &loaded.grants, applied));
    let memory = loaded.grants.memory.unwrap_or(settings.memory_limit);
    text.push_str(&format!(
        "  sandbox:     memory up to {}; no sockets; HTTP, files, variables and programs only as granted above\n",
        text::bytes(memory as u64)
    ));
    text
}

/// The first screen, as the agent would see it, and what is wrong with it.
struct Preview {
    text: String,
    /// Why the first screen fails (a trap, including text the plugin could
    /// not hand over, or a timeout): the plugin fails the check.
    error: Option<String>,
    /// Content the host cuts (over its `max_lines`, over the host's cap)
    /// or cleans (control characters).
    warnings: Vec<String>,
}

fn screen_preview(
    mut loaded: LoadedPlugin,
    sandbox: &Arc<Sandbox>,
    log: &Arc<dyn LogSink>,
) -> Preview {
    let name = loaded.name.to_string();
    let mut preview = Preview {
        text: String::from("\nIts screen section, as the agent first sees it:\n"),
        error: None,
        warnings: Vec::new(),
    };
    // The plugin's own section first, before the host cuts or cleans it:
    // that is what its author must hear about.
    let cancel = CancelFlag::new();
    let called = loaded.instance.screen(sandbox, &cancel);
    for line in called.output.log_lines(&name) {
        log.line(&line);
    }
    match called.result {
        Err(failure) => {
            let cause = failure.cause;
            preview.error = Some(format!(
                "its first screen fails: {cause}; the agent would see an error in its section and lose its state (get-screen must answer within {})",
                text::duration(limits::SCREEN_LIMIT)
            ));
            preview
                .text
                .push_str(&format!("  [Error getting screen from {name}: {cause}]\n"));
            // The instance is dead; it is dropped, not called again.
            return preview;
        }
        Ok(section) => {
            // Safe (the host cleans it), but not what its author wrote.
            if crate::plugin_text::block(&section.content) != section.content {
                preview.warnings.push(
                    "its first screen is not plain text: it holds control characters (terminal escapes, bidirectional controls) that the host removes before the agent sees it; write plain text (lines and tabs)".to_owned(),
                );
            }
            let lines = section.content.lines().count();
            let max_lines = section.max_lines.max(1) as usize;
            if lines > max_lines {
                preview.warnings.push(format!(
                    "its first screen has {lines} lines, over its max-lines of {max_lines}: the agent sees the first {} and a line saying the rest was cut; raise max-lines or show less",
                    max_lines - 1
                ));
            }
            if section.content.len() > crate::environment::SCREEN_BYTES_LIMIT {
                preview.warnings.push(format!(
                    "its first screen is {}, over the host's cap of {} per section: the rest is cut",
                    text::bytes(section.content.len() as u64),
                    text::bytes(crate::environment::SCREEN_BYTES_LIMIT as u64)
                ));
            }
        }
    }
    // No settings: `check` starts no background compilation.
    let mut environment = crate::load::plugin_environment(
        loaded,
        sandbox,
        None,
        OutputLimits::for_project(&PathBuf::from(".")),
        log,
        &cancel,
    );
    match environment.screen() {
        Ok(section) => {
            let content = envhost_core::truncate_lines(&section.content, section.max_lines);
            for line in content.lines() {
                if line.is_empty() {
                    preview.text.push_str("  |\n");
                } else {
                    preview.text.push_str(&format!("  | {line}\n"));
                }
            }
            preview
                .text
                .push_str(&format!("  (max_lines {})\n", section.max_lines));
        }
        Err(err) => {
            // The first call answered; a second that fails is a screen that
            // fails too.
            preview
                .error
                .get_or_insert_with(|| format!("its screen fails: {err}"));
            preview
                .text
                .push_str(&format!("  [Error getting screen from {name}: {err}]\n"));
        }
    }
    environment.shutdown();
    preview
}
