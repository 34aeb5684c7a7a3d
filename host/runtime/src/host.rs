//! One assembly of a host for every front end: [`Host::start`] builds it
//! from [`Settings`] in the order that keeps it safe (containment before
//! any child, the watcher before the plugins load, the recorder after),
//! and [`Host::stop`] shuts it down and reaps every process.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use envhost_core::{
    CancelFlag, ConsoleObserver, Event, EventBus, LoadFailure, LoadedEnvironment, NoticeSection,
    Orchestrator, OrchestratorSettings, RegisterError, ScreenSection, TranscriptObserver,
};
use envhost_files::{ProjectFiles, ProjectRoot};
use envhost_plugin::{self as plugin, DiscardSink, LogSink, PluginFile, StderrSink};
use envhost_process::SecretPolicy;

use crate::containment::{contain, in_force, resolve_project, stop_descendants};
use crate::error::StartError;
use crate::reload::WatchedPlugins;
use crate::resume::record_session;
use crate::session::Identity;
use crate::settings::{PluginSource, Settings};
use crate::stopped::Stopped;
use crate::watch::Watcher;

/// A started host: its environments, ready for a front end.
pub struct Host {
    /// Shared: MCP serves it from several threads.
    orchestrator: Arc<Orchestrator>,
    cancel: CancelFlag,
    project: PathBuf,
    allow_outside_project: bool,
    yield_after: Option<Duration>,
    report: StartReport,
}

/// What a host loaded at start, for the healthcheck and the author tools
/// (a session shows the same on its screen).
#[derive(Debug, Default)]
pub struct StartReport {
    /// The plugins registered, by name.
    pub plugins: Vec<String>,
    /// The built-ins that could not start, each with the sentence that
    /// says why.
    pub unavailable: Vec<LoadFailure>,
    /// The plugins refused, each with the sentence that says why (also on
    /// stderr).
    pub refused: Vec<LoadFailure>,
    /// Problems with the grants file that refuse no plugin in particular.
    pub config_problems: Vec<String>,
    /// How long finding, compiling and loading the plugins took.
    pub plugins_took: Duration,
}

impl Host {
    /// Contains the processes to come, then builds the event bus, the
    /// built-in environments and the plugins, the recorder (restoring the
    /// session with `resume`) and, with `watch`, reload.
    pub fn start(settings: Settings) -> Result<Host, StartError> {
        let project = resolve_project(&settings.project)?;
        // Before any child exists, so that nothing it starts can escape.
        contain(&settings.processes)?;
        let environments = environment_settings(&settings, &project);
        let cancel = CancelFlag::new();
        // The transcript file exists once the bus has opened it.
        let bus = event_bus(&settings, &project)?;
        let mut orchestrator = Orchestrator::new(
            OrchestratorSettings {
                default_timeout: settings.timeout,
                yield_after: settings.yield_after,
                project_dir: Some(project.clone()),
                own_files: settings
                    .transcript
                    .iter()
                    .filter_map(|path| path.canonicalize().ok())
                    .collect(),
                max_instances: settings.max_instances,
            },
            bus,
            cancel.clone(),
        );
        if let Some(watch) = envhost_process::LimitWatch::new() {
            orchestrator.watch_host(Box::new(watch));
        }
        orchestrator.show_once(NoticeSection {
            key: "isolation".to_owned(),
            section: ScreenSection::with_max_lines(in_force(), 12),
        });
        let mut report = StartReport::default();
        if settings.builtins {
            register_builtins(&mut orchestrator, &environments, &mut report);
        }
        let started = Instant::now();
        let identity = match &settings.plugin_source {
            PluginSource::None => Identity::new(&project),
            PluginSource::Project => load_plugins(
                &mut orchestrator,
                &settings,
                &environments,
                &project,
                &cancel,
                &mut report,
            ),
            PluginSource::File { path, apply_grants } => {
                let file = PluginFile {
                    path,
                    apply_grants: *apply_grants,
                    sharing: 1,
                };
                load_one_plugin(
                    &orchestrator,
                    &file,
                    &settings,
                    &environments,
                    &cancel,
                    &mut report,
                );
                Identity::new(&project)
            }
        };
        report.plugins_took = started.elapsed();
        if settings.session_state {
            record_session(
                &mut orchestrator,
                identity,
                settings.resume,
                &report.plugins,
            );
        }
        Ok(Host {
            orchestrator: Arc::new(orchestrator),
            cancel,
            project,
            allow_outside_project: settings.allow_outside_project,
            yield_after: settings.yield_after,
            report,
        })
    }

    /// What loaded at start and what was refused.
    pub fn report(&self) -> &StartReport {
        &self.report
    }

    /// The environments.
    pub fn orchestrator(&self) -> &Arc<Orchestrator> {
        &self.orchestrator
    }

    /// The host's cancel flag: set, it stops every command in progress.
    pub fn cancel(&self) -> &CancelFlag {
        &self.cancel
    }

    /// The project directory (canonical).
    pub fn project(&self) -> &Path {
        &self.project
    }

    /// `--yield-after`, for front ends whose default differs.
    pub fn yield_after(&self) -> Option<Duration> {
        self.yield_after
    }

    /// The project's files as the agent's file requests reach them.
    pub fn files(&self) -> ProjectFiles {
        ProjectFiles::new(ProjectRoot::new(
            self.project.clone(),
            self.allow_outside_project,
        ))
    }

    /// Shuts every environment down, reaps every process they left, and
    /// hands back why the host stopped.
    pub fn stop(self, stopped: Stopped) -> Stopped {
        self.orchestrator.shutdown(&stopped.describe());
        stop_descendants();
        stopped
    }
}

/// Registers an environment in the orchestrator.
pub fn register(
    orchestrator: &Orchestrator,
    loaded: LoadedEnvironment,
) -> Result<(), RegisterError> {
    let LoadedEnvironment {
        name,
        kind,
        environment,
        detail,
    } = loaded;
    orchestrator.register(name, kind, environment, detail)
}

fn environment_settings(settings: &Settings, project: &Path) -> envhost_envs::Settings {
    let mut config = envhost_envs::Settings::for_project(project.to_owned());
    config.output.cap_bytes = settings.output_cap;
    config.output.spill_limit_bytes = settings.output_file_limit;
    config.secrets = SecretPolicy::new(settings.pass_env.clone());
    config.allow_outside_project = settings.allow_outside_project;
    config.python = settings.python.clone();
    config.session_state = settings.session_state;
    config
}

/// The bus with the transcript and the console as asked, and the first
/// event on it.
fn event_bus(settings: &Settings, project: &Path) -> Result<EventBus, StartError> {
    let mut bus = EventBus::new();
    if let Some(path) = &settings.transcript {
        let observer = TranscriptObserver::open(path).map_err(|reason| StartError::Transcript {
            path: path.clone(),
            reason,
        })?;
        bus.subscribe(Box::new(observer));
    }
    if settings.verbose {
        bus.subscribe(Box::new(ConsoleObserver::new()));
    }
    bus.emit(Event::HostStarted {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        project: project.to_owned(),
        mode: settings.front_end.clone(),
    });
    Ok(bus)
}

/// Loads the project's plugins into `orchestrator` (a plugin named like a
/// built-in is refused), with `watch` sets up reload, and returns the
/// session's identity (every plugin found, with its hash) and the names
/// of those registered.
fn load_plugins(
    orchestrator: &mut Orchestrator,
    settings: &Settings,
    environments: &envhost_envs::Settings,
    project: &Path,
    cancel: &CancelFlag,
    report: &mut StartReport,
) -> Identity {
    let log = plugin_log(settings);
    // Before the plugins load: a change made while they load is seen.
    let mut watcher = settings.watch.then(|| {
        Watcher::new(
            project,
            settings.plugins.clone(),
            environments.output.clone(),
            cancel.clone(),
            Arc::clone(&log),
        )
    });
    let mut plugins = plugin::load(
        project,
        &settings.plugins,
        &environments.output,
        cancel,
        log,
    );
    let mut identity = Identity::new(project);
    for loaded in plugins.take_loaded() {
        let name = loaded.environment.name.to_string();
        identity.add_plugin(&name, &loaded.file);
        match register(orchestrator, loaded.environment) {
            Ok(()) => {
                if let Some(watcher) = &mut watcher {
                    watcher.loaded_at_start(&name, &loaded.file, &loaded.sha256);
                }
                report.plugins.push(name);
            }
            Err(err) => plugins.refuse(&name, &loaded.file, err.to_string()),
        }
    }
    let finished = plugins.finish();
    for refused in finished.refused {
        refuse(orchestrator, refused, report);
    }
    for problem in finished.config_problems {
        eprintln!("envhost: {problem}");
        report.config_problems.push(problem);
    }
    for notice in finished.notices {
        orchestrator.add_notice(notice);
    }
    if let Some(watcher) = watcher {
        orchestrator.reload_before_commands(Box::new(WatchedPlugins(Mutex::new(watcher))));
    }
    identity
}

/// Loads one plugin file as [`load_plugins`] loads each of env/, and
/// nothing else (`envhost call` and `test`).
fn load_one_plugin(
    orchestrator: &Orchestrator,
    file: &PluginFile<'_>,
    settings: &Settings,
    environments: &envhost_envs::Settings,
    cancel: &CancelFlag,
    report: &mut StartReport,
) {
    let name = file
        .path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let loaded = plugin::load_file(
        file,
        &environments.project_dir,
        &settings.plugins,
        &environments.output,
        cancel,
        plugin_log(settings),
    );
    let failure = match loaded {
        Ok(loaded) => {
            let registered = loaded.environment.name.to_string();
            match register(orchestrator, loaded.environment) {
                Ok(()) => {
                    report.plugins.push(registered);
                    return;
                }
                Err(err) => LoadFailure {
                    name: registered,
                    reason: err.to_string(),
                },
            }
        }
        Err(reason) => LoadFailure { name, reason },
    };
    refuse(orchestrator, failure, report);
}

/// Where the plugins' own output goes.
fn plugin_log(settings: &Settings) -> Arc<dyn LogSink> {
    if settings.plugin_output_to_stderr {
        Arc::new(StderrSink)
    } else {
        Arc::new(DiscardSink)
    }
}

/// Bash, python and the editor, and the factories of their instances; a
/// built-in that cannot start is on the screen and in the report.
fn register_builtins(
    orchestrator: &mut Orchestrator,
    environments: &envhost_envs::Settings,
    report: &mut StartReport,
) {
    for builtin in envhost_envs::builtins(environments) {
        let failure = match builtin {
            Ok(loaded) => {
                let name = loaded.name.to_string();
                match register(orchestrator, loaded) {
                    Ok(()) => continue,
                    Err(err) => LoadFailure {
                        name,
                        reason: err.to_string(),
                    },
                }
            }
            Err(failure) => failure,
        };
        orchestrator.record_load_failure(&failure.name, &failure.reason);
        report.unavailable.push(failure);
    }
    for (kind, factory) in envhost_envs::instance_factories(environments) {
        // A kind that failed to load has no instances either.
        let _ = orchestrator.allow_instances(kind, factory);
    }
}

/// A plugin that will not run: on stderr, the screen and the report.
fn refuse(orchestrator: &Orchestrator, failure: LoadFailure, report: &mut StartReport) {
    eprintln!("envhost: {}", failure.reason);
    orchestrator.record_load_failure(&failure.name, &failure.reason);
    report.refused.push(failure);
}
