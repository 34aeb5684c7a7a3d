//! What a host is started with: a plain struct the binary fills from its
//! command line (this crate knows no flags).

use std::path::PathBuf;
use std::time::Duration;

use envhost_plugin::PluginSettings;

/// Everything [`Host::start`](crate::Host::start) needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The project directory: where environments start and plugins are
    /// found (resolved to a canonical path at start).
    pub project: PathBuf,
    /// The front end's name, for the `host_started` event ("serve",
    /// "repl", "mcp", "mcp-http", "call").
    pub front_end: String,
    /// The time a command may take when it does not say.
    pub timeout: Duration,
    /// Yield every command after this long unless it says otherwise.
    pub yield_after: Option<Duration>,
    /// Largest output returned for one command.
    pub output_cap: usize,
    /// Largest file of saved output for one command.
    pub output_file_limit: u64,
    /// Variables passed to bash and python although their names look like
    /// secrets.
    pub pass_env: Vec<String>,
    /// Let the editor reach outside the project.
    pub allow_outside_project: bool,
    /// The Python interpreter (`None`: python3 on PATH).
    pub python: Option<PathBuf>,
    /// Append every event to this file as JSON lines.
    pub transcript: Option<PathBuf>,
    /// Describe the session on stderr as it happens.
    pub verbose: bool,
    /// Start bash, python and the editor (the author tools run a plugin
    /// alone).
    pub builtins: bool,
    /// Which plugins to load.
    pub plugin_source: PluginSource,
    /// How plugins are found, granted, compiled and bounded.
    pub plugins: PluginSettings,
    /// Plugins' own output goes to stderr (else it is discarded: an agent
    /// may never drain stderr, and a full pipe would block the host).
    pub plugin_output_to_stderr: bool,
    /// Where programs run and what bounds them.
    pub processes: ProcessSettings,
    /// Record the session under `<project>/.envhost/session/`.
    pub session_state: bool,
    /// Restore the recorded session before the first command.
    pub resume: bool,
    /// Swap plugins rebuilt in env/ in before each command.
    pub watch: bool,
    /// Most named instances of bash, and of python, open at once.
    pub max_instances: usize,
}

impl Settings {
    /// A session of `front_end` in `project` with every other setting at
    /// its default and nothing recorded (the author tools and benches).
    pub fn new(project: PathBuf, front_end: &str, timeout: Duration) -> Settings {
        Settings {
            project,
            front_end: front_end.to_owned(),
            timeout,
            yield_after: None,
            output_cap: envhost_process::DEFAULT_CAP_BYTES,
            output_file_limit: envhost_process::DEFAULT_SPILL_LIMIT_BYTES,
            pass_env: Vec::new(),
            allow_outside_project: false,
            python: None,
            transcript: None,
            verbose: false,
            builtins: true,
            plugin_source: PluginSource::Project,
            plugins: PluginSettings::default(),
            plugin_output_to_stderr: true,
            processes: ProcessSettings::default(),
            session_state: false,
            resume: false,
            watch: false,
            max_instances: envhost_core::instance::DEFAULT_MAX_INSTANCES,
        }
    }
}

/// Which plugins a host loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// None at all.
    None,
    /// Those in `<project>/env/`, as a session does.
    Project,
    /// One file, wherever it is (`envhost call` and `test`), loaded as a
    /// session loads each of env/.
    File {
        /// The `.wasm` file; the environment is named after its stem.
        path: PathBuf,
        /// Apply the grants file (`PluginSettings::config_file`, else
        /// `<project>/env/envhost.toml`); `false`: nothing is granted.
        apply_grants: bool,
    },
}

/// Where commands run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// In namespaces of their own where the kernel allows it, else beside
    /// envhost behind the guard.
    #[default]
    Auto,
    /// Refuse to start without namespaces.
    Namespaces,
    /// Beside envhost behind the guard, on purpose.
    Guard,
}

/// Where the programs environments start run, and what bounds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessSettings {
    /// Where commands run.
    pub isolation: IsolationLevel,
    /// Most processes at once (`None`: no limit).
    pub max_processes: Option<u64>,
    /// Most memory together: `None` for the default (three quarters of the
    /// machine's), `Some(None)` for no limit.
    pub max_memory: Option<Option<u64>>,
    /// Put each program in a cgroup of its own and set the session limits.
    pub cgroups: bool,
}

impl Default for ProcessSettings {
    fn default() -> Self {
        ProcessSettings {
            isolation: IsolationLevel::Auto,
            max_processes: Some(envhost_process::DEFAULT_MAX_PROCESSES),
            max_memory: None,
            cgroups: true,
        }
    }
}
