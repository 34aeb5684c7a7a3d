//! The `envhost` command line: parses arguments, builds the session's
//! configuration, observers and environments, runs a front end, and shuts
//! everything down. Errors here are `anyhow` and end the process with a
//! message; everything below is typed.

#![deny(missing_docs)]

use std::io::{self, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use envhost_core::text::{parse_duration, parse_size};
use envhost_core::{
    CancelFlag, ConsoleObserver, Event, EventBus, LoadedEnvironment, NoticeSection, Orchestrator,
    OrchestratorSettings, ScreenSection, TranscriptObserver, panic_message,
};
use envhost_files::{ProjectFiles, ProjectRoot};
use envhost_plugin::{self as plugin, CodeCache, DiscardSink, LogSink, PluginSettings, StderrSink};
use envhost_process::{
    DEFAULT_CAP_BYTES, SecretPolicy, configure_containment, install_reaper, terminate_descendants,
};
use envhost_protocol::DEFAULT_MAX_LINE_BYTES;

mod call;
mod distribution;
mod healthcheck;
mod new_project;
mod plugin_test;
mod repl;
mod serve;
mod session;
mod session_file;
mod signals;
mod stdout;
mod watch;

use crate::serve::StopReason;
use crate::signals::HostSignal;

/// Default time a command may run before it is interrupted: two minutes,
/// long enough for most builds and test runs, short enough that an agent
/// stuck on a command that never ends gets control back. Per command, the
/// `timeout_ms` field overrides it.
const DEFAULT_TIMEOUT_TEXT: &str = "120s";

/// Persistent environments for AI agents (bash, python, an editor and
/// WebAssembly plugins) over newline-delimited JSON.
#[derive(Parser)]
#[command(name = "envhost", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve an agent: NDJSON commands on stdin, one answer per line on stdout.
    Serve(ServeArgs),
    /// Try the environments by hand: `ENV: command` lines, readable output.
    Repl(ReplArgs),
    /// Serve MCP clients: each environment as a Model Context Protocol
    /// tool, on stdin/stdout, or over streamable HTTP with --http.
    Mcp(McpArgs),
    /// Check plugins (.wasm files) exactly as the host would load them, and
    /// show what they offer, verdict first; exits non-zero if any would be
    /// refused or its first screen fails. The
    /// plugins run while they are checked, with nothing granted unless
    /// --grants names the grants file to apply.
    Check(CheckArgs),
    /// Run commands against one plugin through the host's own path and print
    /// each answer, then its screen section, as a session file. Exits 1 if
    /// a command failed, 2 if the plugin was refused.
    Call(call::CallArgs),
    /// Run session files (commands and their expected answers) against a
    /// plugin and print a diff for each answer that differs; --bless writes
    /// the answers into the files. Exits 1 if any session fails.
    Test(plugin_test::TestArgs),
    /// Check that a session can be served here (for Docker HEALTHCHECK and
    /// Kubernetes probes): the project is readable, bash and python start
    /// and answer, and with --plugins every plugin loads. Exits 1 if not.
    Healthcheck(HealthArgs),
    /// Compile one plugin (stdin) to machine code (stdout): what the host
    /// runs in a separate, bounded process of its own binary.
    #[command(name = "compile-plugin", hide = true)]
    CompilePlugin {
        /// Baseline code (wasmtime's Winch), for a first start, instead
        /// of optimised code (Cranelift), which the cache keeps.
        #[arg(long)]
        baseline: bool,
    },
    /// Write a new plugin project: a small key-value environment in Rust,
    /// Python or JavaScript, with its SDK, the WIT, the toolchain pinned, a
    /// build script, a grants stub and a session test.
    New(new_project::NewArgs),
    #[command(flatten)]
    Distribution(distribution::Command),
}

#[derive(Args)]
struct HealthArgs {
    /// The project directory a session would serve.
    #[arg(long, value_name = "DIR", default_value = ".")]
    project: PathBuf,

    /// How long bash and python may each take to answer.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    timeout: Duration,

    /// The Python interpreter for the python environment [default: python3
    /// on PATH].
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,

    /// Load the project's plugins too (compiling those not in the cache);
    /// any refused plugin fails the check.
    #[arg(long)]
    plugins: bool,

    /// The grants file, as for `serve` [default: <project>/env/envhost.toml].
    #[arg(long, value_name = "FILE")]
    plugin_config: Option<PathBuf>,

    #[command(flatten)]
    plugin_args: PluginArgs,

    #[command(flatten)]
    processes: ProcessArgs,
}

#[derive(Args)]
struct ServeArgs {
    /// Before each command, look for plugins rebuilt in env/ (a stat of
    /// each file) and swap each new build in, as start-up would load it;
    /// the command's answer says so, or why a new build was refused (the
    /// old one then keeps running). See docs/plugin-tools.md.
    #[arg(long)]
    watch: bool,

    #[command(flatten)]
    session: SessionArgs,
}

#[derive(Args)]
struct ReplArgs {
    /// Open each image a command produces (figures saved by python, PNG,
    /// JPEG, GIF and WebP files it wrote) with the desktop's viewer
    /// (xdg-open). Without xdg-open on PATH the REPL says so and prints
    /// the paths only.
    #[arg(long)]
    open_figures: bool,

    #[command(flatten)]
    session: SessionArgs,
}

#[derive(Args)]
struct McpArgs {
    /// Serve streamable HTTP at http://ADDRESS/mcp instead of stdio (e.g.
    /// 127.0.0.1:8765, or a port alone for loopback). Every request needs
    /// the bearer token; browser origins other than the server's own are
    /// refused (see docs/mcp.md).
    #[arg(long, value_name = "ADDRESS", value_parser = parse_address)]
    http: Option<SocketAddr>,

    /// With --http: the file holding the bearer token; created with a fresh
    /// token (readable by you only) when it does not exist [default: a fresh
    /// token, printed on stderr].
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,

    /// With --http: a browser origin allowed besides the server's own, as a
    /// browser sends it (e.g. http://localhost:6274). Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,

    /// With --http: connections held at once, with or without the token;
    /// further ones wait until one closes [default: 256].
    #[arg(long, value_name = "N", requires = "http",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections: Option<usize>,

    /// With --http: how long a connection may take to send a request's
    /// headers (from when it opens, or from the end of the previous
    /// answer), then its body; a silent or idle connection is closed after
    /// it [default: 10s].
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = parse_duration)]
    header_timeout: Option<Duration>,

    /// With --http: MCP sessions held at once; past it a new session gets
    /// 503 until one ends [default: 64].
    #[arg(long, value_name = "N", requires = "http",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_sessions: Option<usize>,

    /// With --http: a session that gets no request for this long ends
    /// [default: 30m].
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = parse_duration)]
    session_idle_timeout: Option<Duration>,

    /// Add structuredContent (environment, success, running, truncated,
    /// saved_output) to tool results. Off by default: some clients then
    /// show the model only that, without the output.
    #[arg(long)]
    structured_content: bool,

    #[command(flatten)]
    session: SessionArgs,
}

/// `--http`: `HOST:PORT`, or a port alone for 127.0.0.1.
fn parse_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    text.parse().map_err(|_| {
        format!("{text:?} is not an address: write IP:PORT (127.0.0.1:8765, [::1]:8765) or a port")
    })
}

#[derive(Args)]
struct CheckArgs {
    /// The plugin files, e.g. env/timer.wasm.
    #[arg(value_name = "FILE.wasm", required = true)]
    files: Vec<PathBuf>,

    /// The grants file to check the plugins with (directories, variables,
    /// programs, limits, sha256 pins), read as the host reads
    /// <project>/env/envhost.toml, the project being the folder above the
    /// plugin's. Without it nothing is granted, not even by an
    /// envhost.toml next to the plugin: a plugin runs while it is checked.
    #[arg(long, value_name = "FILE", alias = "plugin-config")]
    grants: Option<PathBuf>,

    #[command(flatten)]
    plugins: PluginArgs,
}

/// How plugins are run and checked.
#[derive(Args)]
pub(crate) struct PluginArgs {
    /// Where compiled plugin code is kept between starts (default:
    /// $XDG_CACHE_HOME/envhost/plugins or ~/.cache/envhost/plugins).
    #[arg(long, value_name = "DIR", conflicts_with = "no_plugin_cache")]
    plugin_cache: Option<PathBuf>,

    /// Compile plugins at every start instead of caching their code.
    #[arg(long)]
    no_plugin_cache: bool,

    /// Memory each plugin instance may use (e.g. 64MiB, 1GiB); a plugin
    /// that grows past it traps and is restarted.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value_t = plugin::DEFAULT_MEMORY_LIMIT)]
    plugin_memory: usize,

    /// Files each plugin may hold open at once; past it, opening one more
    /// fails. Lowered when many plugins would together hold more than half
    /// of the host's descriptor limit.
    #[arg(long, value_name = "N", default_value_t = plugin::DEFAULT_OPEN_FILES)]
    plugin_open_files: usize,

    /// Most plugins loaded from env/ (in name order); the rest are refused.
    /// Every plugin's section is in every response.
    #[arg(long, value_name = "N", default_value_t = plugin::DEFAULT_MAX_PLUGINS)]
    max_plugins: usize,

    /// Largest plugin file compiled (e.g. 32MiB); a larger one is refused
    /// before it is read.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = DEFAULT_MAX_PLUGIN_SIZE_TEXT)]
    plugin_max_size: usize,

    /// CPU time compiling one plugin may take (its threads together; twice
    /// that in wall-clock time); a plugin that takes longer is refused.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
          default_value = DEFAULT_COMPILE_TIME_TEXT)]
    plugin_compile_time: Duration,

    /// Memory compiling one plugin may use; a plugin that needs more is
    /// refused.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = DEFAULT_COMPILE_MEMORY_TEXT)]
    plugin_compile_memory: usize,

    /// In a session, a plugin larger than this (e.g. 1MiB; 1 for all) whose
    /// optimised code is not cached yet starts at once on baseline code
    /// (wasmtime's Winch) while its optimised code is compiled in the
    /// background for the cache. `check`, `call` and `test` compile
    /// optimised code at once.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = DEFAULT_BASELINE_ABOVE_TEXT)]
    plugin_baseline_above: usize,
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

#[derive(Args)]
struct SessionArgs {
    /// The project directory: where environments start and plugins are found.
    #[arg(long, value_name = "DIR", default_value = ".")]
    project: PathBuf,

    /// Default time a command may run before it is interrupted (e.g. 90s,
    /// 2m, 500ms). A command's own limit overrides it (`timeout_ms` over NDJSON,
    /// `timeout_seconds` over MCP).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
          default_value = DEFAULT_TIMEOUT_TEXT)]
    timeout: Duration,

    /// Make yielding the default: a command still running after DURATION
    /// (e.g. 10s) answers with its output so far and keeps running; the
    /// agent goes on with wait, input or interrupt. Such a command has no
    /// time limit unless it gives its own `timeout_ms`. A command's
    /// `yield_ms` overrides it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    yield_after: Option<Duration>,

    /// Largest output returned for one command (e.g. 65536, 128KiB, 1MiB);
    /// beyond it the head and tail are kept and the whole output is saved
    /// to a file under <project>/.envhost/output/.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value_t = DEFAULT_CAP_BYTES)]
    output_cap: usize,

    /// Largest file of saved output for one command (e.g. 64MiB, 1GiB);
    /// a runaway command's output beyond it is not saved (the response
    /// still shows its tail).
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = "256MiB")]
    output_file_limit: usize,

    /// Pass this environment variable to bash and python even though its
    /// name looks like a secret (*_API_KEY, *_TOKEN, ...). Repeatable.
    #[arg(long = "pass-env", value_name = "NAME")]
    pass_env: Vec<String>,

    /// Let the editor open and write files outside the project directory
    /// (paths with `..`, absolute paths, symlinks leading out).
    #[arg(long)]
    allow_outside_project: bool,

    /// The Python interpreter for the python environment: a path, or a
    /// command name looked up on PATH [default: python3 on PATH].
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,

    /// Append every event (commands, durations, timeouts, failures) to FILE
    /// as JSON lines with UTC timestamps.
    #[arg(long, value_name = "FILE")]
    transcript: Option<PathBuf>,

    #[command(flatten)]
    processes: ProcessArgs,

    /// Describe the session on stderr as it happens.
    #[arg(short, long)]
    verbose: bool,

    /// The file that grants plugins powers beyond the sandbox (directories,
    /// variables, programs, limits, sha256 pins) [default:
    /// <project>/env/envhost.toml]. Keep it outside the project to keep it
    /// out of the agent's reach.
    #[arg(long, value_name = "FILE")]
    plugin_config: Option<PathBuf>,

    /// Restore the session a previous host recorded in
    /// <project>/.envhost/session/ (bash's directory, variables,
    /// functions, aliases and options; the editor's views) before the
    /// first command; the first answer says what came back and what did
    /// not. Plugins start fresh.
    #[arg(long, conflicts_with = "no_session_state")]
    resume: bool,

    /// Do not record the session: nothing is written under
    /// <project>/.envhost/session/ and `--resume` has nothing to restore.
    #[arg(long)]
    no_session_state: bool,

    /// Most named instances of bash, and of python, open at once
    /// (`bash:NAME`, `python:NAME`); past it a new one is refused until
    /// one is closed.
    #[arg(long, value_name = "N", default_value_t = envhost_core::instance::DEFAULT_MAX_INSTANCES)]
    max_instances: usize,

    #[command(flatten)]
    plugins: PluginArgs,
}

/// Where the programs environments start run, and what bounds them.
#[derive(Args)]
pub(crate) struct ProcessArgs {
    /// Where commands run: `auto` (in namespaces of their own where the
    /// kernel allows it, else beside envhost behind the guard), `namespaces`
    /// (refuse to start without them) or `guard` (the fallback, on purpose).
    /// The first answer's screen says which is in force; see
    /// docs/security.md.
    #[arg(long, value_name = "LEVEL", value_enum, default_value = "auto")]
    isolation: IsolationArg,

    /// Most processes the session's programs may have at once (a fork bomb
    /// stops there), or `none`. Needs cgroups.
    #[arg(long, value_name = "N", value_parser = parse_process_limit,
          default_value_t = ProcessLimit(Some(envhost_process::DEFAULT_MAX_PROCESSES)))]
    max_processes: ProcessLimit,

    /// Most memory the session's programs may use together (e.g. 8GiB), or
    /// `none`; past it the kernel ends the biggest of them, never envhost.
    /// Needs cgroups [default: three quarters of the machine's memory].
    #[arg(long, value_name = "BYTES", value_parser = parse_memory_limit)]
    max_memory: Option<ProcessLimit>,

    /// Do not put each program an environment starts in a cgroup of its
    /// own, and set no session limits; contain them with process groups,
    /// sessions and a sweep of /proc only (what happens anyway where
    /// cgroups are unavailable).
    #[arg(long)]
    no_cgroups: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum IsolationArg {
    Auto,
    Namespaces,
    Guard,
}

/// A count or size limit, `None` for `none`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcessLimit(Option<u64>);

impl std::fmt::Display for ProcessLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(limit) => write!(f, "{limit}"),
            None => f.write_str("none"),
        }
    }
}

fn parse_process_limit(text: &str) -> Result<ProcessLimit, String> {
    if text == "none" {
        return Ok(ProcessLimit(None));
    }
    match text.parse::<u64>() {
        Ok(count) if count >= 16 => Ok(ProcessLimit(Some(count))),
        _ => Err(format!(
            "{text:?} is not a process limit: write a number of processes (16 or more) or `none`"
        )),
    }
}

fn parse_memory_limit(text: &str) -> Result<ProcessLimit, String> {
    if text == "none" {
        return Ok(ProcessLimit(None));
    }
    let bytes = parse_size(text).map_err(|why| why.to_string())?;
    if bytes < 64 << 20 {
        return Err(format!(
            "{text:?} is too little memory for a session: give 64MiB or more, or `none`"
        ));
    }
    Ok(ProcessLimit(Some(bytes as u64)))
}

impl ProcessArgs {
    /// [`ProcessArgs::start`] with every flag at its default (the author
    /// tools, which run a plugin as a session would).
    pub(crate) fn start_default() -> anyhow::Result<()> {
        ProcessArgs {
            isolation: IsolationArg::Auto,
            max_processes: ProcessLimit(Some(envhost_process::DEFAULT_MAX_PROCESSES)),
            max_memory: None,
            no_cgroups: false,
        }
        .start()
    }

    /// Decides where programs run and what bounds them, and installs the
    /// reaper: before any program exists, so that nothing escapes.
    pub(crate) fn start(&self) -> anyhow::Result<()> {
        let defaults = envhost_process::Limits::default();
        let limits = envhost_process::Limits {
            processes: self.max_processes.0,
            memory: self.max_memory.map_or(defaults.memory, |memory| memory.0),
        };
        configure_containment(envhost_process::ContainmentSettings {
            cgroups: !self.no_cgroups,
            limits,
        });
        let request = match self.isolation {
            IsolationArg::Auto => envhost_process::IsolationRequest::Auto,
            IsolationArg::Namespaces => envhost_process::IsolationRequest::Namespaces,
            IsolationArg::Guard => envhost_process::IsolationRequest::Guard,
        };
        envhost_process::configure_isolation(request).map_err(anyhow::Error::msg)?;
        install_reaper();
        Ok(())
    }

    /// What is in force, for the first answer's screen and the healthcheck.
    pub(crate) fn in_force() -> String {
        format!(
            "{}\n{}",
            envhost_process::isolation().describe(),
            envhost_process::session_limits().describe()
        )
    }
}

enum Mode {
    Serve {
        watch: bool,
    },
    Repl {
        open_figures: bool,
    },
    Mcp {
        http: Option<envhost_mcp::HttpSettings>,
        structured_content: bool,
    },
}

fn main() -> ExitCode {
    // The session's namespace init is this binary under another name: it
    // must do nothing else (it never returns).
    if envhost_process::is_namespace_init() {
        envhost_process::namespace_init_main();
    }
    // SAFETY: first thing in main, while the process has one thread.
    unsafe { envhost_process::hide_secrets_from_proc_environ() };
    let cli = Cli::parse();
    let serving = matches!(cli.command, Command::Serve(_));
    if serving && let Err(err) = stdout::say_last_words_on_abort() {
        eprintln!("envhost: cannot prepare for an abort ({err})");
    }
    let result = match cli.command {
        Command::Serve(args) => run_session(Mode::Serve { watch: args.watch }, args.session),
        Command::Repl(args) => run_session(
            Mode::Repl {
                open_figures: args.open_figures,
            },
            args.session,
        ),
        Command::Mcp(args) => run_session(
            Mode::Mcp {
                http: args.http.map(|address| {
                    let default = envhost_mcp::HttpLimits::default();
                    envhost_mcp::HttpSettings {
                        address,
                        token_file: args.token_file,
                        allowed_origins: args.allow_origin,
                        limits: envhost_mcp::HttpLimits {
                            max_connections: args
                                .max_connections
                                .unwrap_or(default.max_connections),
                            header_timeout: args.header_timeout.unwrap_or(default.header_timeout),
                            max_sessions: args.max_sessions.unwrap_or(default.max_sessions),
                            session_idle_timeout: args
                                .session_idle_timeout
                                .unwrap_or(default.session_idle_timeout),
                        },
                    }
                }),
                structured_content: args.structured_content,
            },
            args.session,
        ),
        Command::Check(args) => run_check(args).map(|()| ExitCode::SUCCESS),
        Command::Distribution(command) => distribution::run(command).map(|()| ExitCode::SUCCESS),
        Command::Healthcheck(args) => return run_healthcheck(args),
        Command::Call(args) => return call::run(args),
        Command::Test(args) => return plugin_test::run(args),
        Command::CompilePlugin { baseline } => return plugin::serve_compile(baseline),
        Command::New(args) => new_project::run(&args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("envhost: {err:#}");
            if serving {
                // The agent reads stdout, maybe not stderr.
                stdout::last_words(&format!("envhost cannot serve: {err:#}"));
            }
            ExitCode::FAILURE
        }
    }
}

fn run_session(mode: Mode, args: SessionArgs) -> anyhow::Result<ExitCode> {
    let project = resolve_project(&args.project)?;
    let mut config = envhost_envs::Settings::for_project(project.clone());
    config.output.cap_bytes = args.output_cap;
    config.output.spill_limit_bytes = args.output_file_limit as u64;
    config.secrets = SecretPolicy::new(args.pass_env);
    config.allow_outside_project = args.allow_outside_project;
    config.python = args.python;
    config.session_state = !args.no_session_state;

    // Before any child exists, so that nothing it starts can escape.
    args.processes.start()?;

    let mut bus = EventBus::new();
    let mut own_files = Vec::new();
    if let Some(path) = &args.transcript {
        let observer = TranscriptObserver::open(path)
            .with_context(|| format!("cannot open the transcript file {}", path.display()))?;
        bus.subscribe(Box::new(observer));
        // A transcript inside the project changes with every answer; it is
        // the host's file, not a command's.
        own_files.extend(path.canonicalize().ok());
    }
    if args.verbose {
        bus.subscribe(Box::new(ConsoleObserver::new()));
    }
    bus.emit(Event::HostStarted {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        project: project.clone(),
        mode: match mode {
            Mode::Serve { .. } => "serve",
            Mode::Repl { .. } => "repl",
            Mode::Mcp { http: None, .. } => "mcp",
            Mode::Mcp { http: Some(_), .. } => "mcp-http",
        }
        .to_owned(),
    });

    let cancel = CancelFlag::new();
    let mut orchestrator = Orchestrator::new(
        OrchestratorSettings {
            default_timeout: args.timeout,
            yield_after: args.yield_after,
            project_dir: Some(project.clone()),
            own_files,
            max_instances: args.max_instances,
        },
        bus,
        cancel.clone(),
    );
    if let Some(watch) = envhost_process::LimitWatch::new() {
        orchestrator.watch_host(Box::new(watch));
    }
    orchestrator.show_once(NoticeSection {
        key: "isolation".to_owned(),
        section: ScreenSection::with_max_lines(ProcessArgs::in_force(), 12),
    });
    for builtin in envhost_envs::builtins(&config) {
        match builtin {
            Ok(loaded) => {
                let name = loaded.name.to_string();
                if let Err(err) = register(&mut orchestrator, loaded) {
                    orchestrator.record_load_failure(&name, &err.to_string());
                }
            }
            Err(failure) => orchestrator.record_load_failure(&failure.name, &failure.reason),
        }
    }
    for (kind, factory) in envhost_envs::instance_factories(&config) {
        // A kind that failed to load has no instances either.
        let _ = orchestrator.allow_instances(kind, factory);
    }
    // Plugins' own output goes to stderr only where someone reads it: an
    // agent may never drain stderr, and a full pipe would block the host.
    let log: Arc<dyn LogSink> = match mode {
        Mode::Serve { .. } | Mode::Mcp { http: None, .. } if !args.verbose => Arc::new(DiscardSink),
        _ => Arc::new(StderrSink),
    };
    let mut plugin_settings = args.plugins.settings(args.plugin_config.clone());
    plugin_settings.baseline_above = Some(args.plugins.plugin_baseline_above as u64);
    // Before the plugins load: a change made while they load is seen.
    let mut watcher = matches!(mode, Mode::Serve { watch: true }).then(|| {
        watch::Watcher::new(
            &project,
            plugin_settings.clone(),
            config.output.clone(),
            cancel.clone(),
            Arc::clone(&log),
        )
    });
    let mut plugins = plugin::load(&project, &plugin_settings, &config.output, &cancel, log);
    let mut identity = session::Identity::new(&project);
    let mut plugin_names = Vec::new();
    for loaded in plugins.take_loaded() {
        // A plugin named like a built-in (env/bash.wasm) is refused here.
        let name = loaded.environment.name.to_string();
        identity.add_plugin(&name, &loaded.file);
        match register(&mut orchestrator, loaded.environment) {
            Ok(()) => {
                if let Some(watcher) = &mut watcher {
                    watcher.loaded_at_start(&name, &loaded.file, &loaded.sha256);
                }
                plugin_names.push(name);
            }
            Err(err) => plugins.refuse(&name, &loaded.file, err.to_string()),
        }
    }
    let report = plugins.finish();
    for refused in &report.refused {
        eprintln!("envhost: {}", refused.reason);
        orchestrator.record_load_failure(&refused.name, &refused.reason);
    }
    for problem in &report.config_problems {
        eprintln!("envhost: {problem}");
    }
    for notice in report.notices {
        orchestrator.add_notice(notice);
    }
    if !args.no_session_state {
        let store = session::SessionStore::new(identity);
        let words = args
            .resume
            .then(|| resume_session(&orchestrator, &store, &plugin_names));
        if !args.resume {
            store.clear();
        }
        match store.prepare() {
            Ok(()) => orchestrator.keep_states(Box::new(store)),
            Err(err) => eprintln!(
                "envhost: cannot create {} ({err}); the session is not recorded.",
                store.dir().display()
            ),
        }
        if let Some(words) = words {
            orchestrator.announce_once(NoticeSection {
                key: "session".to_owned(),
                section: ScreenSection::with_max_lines(words, 30),
            });
        }
    }
    let mut code = ExitCode::SUCCESS;
    let reason = match mode {
        Mode::Mcp {
            http,
            structured_content,
        } => {
            // Served from several threads, which share it.
            let orchestrator = Arc::new(orchestrator);
            let settings = envhost_mcp::Settings {
                yield_after: args.yield_after.unwrap_or(envhost_mcp::DEFAULT_YIELD_AFTER),
                structured_content,
                ..envhost_mcp::Settings::default()
            };
            let served = match http {
                None => {
                    envhost_mcp::serve_stdio(Arc::clone(&orchestrator), cancel.clone(), settings)
                }
                Some(http) => envhost_mcp::serve_http(
                    Arc::clone(&orchestrator),
                    cancel.clone(),
                    settings,
                    http,
                ),
            };
            let reason = match served {
                Ok(reason) => reason,
                Err(err) => {
                    stop_session(&orchestrator, &format!("the MCP server failed: {err}"));
                    return Err(err.into());
                }
            };
            stop_session(&orchestrator, &reason);
            return Ok(code);
        }
        Mode::Serve { .. } => {
            let mut files = ProjectFiles::new(ProjectRoot::new(
                project.clone(),
                args.allow_outside_project,
            ));
            let served = catch_unwind(AssertUnwindSafe(|| {
                serve::run_stdin(
                    &mut orchestrator,
                    watcher,
                    &mut files,
                    &cancel,
                    DEFAULT_MAX_LINE_BYTES,
                )
            }));
            match served {
                Ok(StopReason::Signal(HostSignal::Deadly(signal))) => {
                    stdout::last_words(&format!(
                        "envhost received {} and stops: it shuts every environment down (their \
                         state is lost) and ends every process they started. SIGTERM or the end \
                         of input stop it quietly.",
                        signal.as_str()
                    ));
                    code = ExitCode::from(128 + signal as u8);
                    format!("received {}", signal.as_str())
                }
                Ok(stop) => stop.describe(),
                Err(panic) => {
                    let message = panic_message(panic.as_ref());
                    stdout::last_words(&format!(
                        "envhost stops after an internal error (panic: {message}). It shuts every \
                         environment down (their state is lost); start it again to go on."
                    ));
                    code = ExitCode::from(101);
                    format!("internal error (panic: {message})")
                }
            }
        }
        Mode::Repl { open_figures } => {
            let input = Box::new(BufReader::with_capacity(64 * 1024, io::stdin()));
            let mut stdout = io::stdout().lock();
            let viewer = open_figures.then(repl::Viewer::find);
            repl::run(&orchestrator, &project, input, &mut stdout, &cancel, viewer)
        }
    };
    stop_session(&orchestrator, &reason);
    Ok(code)
}

/// Restores what `store` holds into the environments and says, in the
/// agent's words, what came back and what did not.
fn resume_session(
    orchestrator: &Orchestrator,
    store: &session::SessionStore,
    plugins: &[String],
) -> String {
    let mut lines = Vec::new();
    let mut saved_plugins = Vec::new();
    match store.load() {
        Err(reason) => {
            store.clear();
            lines.push(format!(
                "Session not resumed: {reason}. Every environment starts fresh (the saved state was removed)."
            ));
        }
        Ok(states) if states.is_empty() => lines.push(format!(
            "Session not resumed: nothing was saved in {}. Every environment starts fresh.",
            store.dir().display()
        )),
        Ok(states) => {
            lines.push(format!("Session resumed from {}:", store.dir().display()));
            saved_plugins.extend(states.iter().map(|(name, _)| name.clone()));
            let restored = orchestrator.restore_states(&states);
            for (name, result) in restored {
                match result {
                    Ok(words) => lines.push(format!("- {name}: {words}")),
                    Err(why) => {
                        store.forget(&name);
                        lines.push(format!("- {name}: not restored ({why}); it starts fresh."));
                    }
                }
            }
            for name in orchestrator.environment_names() {
                if !states.iter().any(|(saved, _)| saved == name)
                    && !plugins.iter().any(|plugin| plugin == name)
                {
                    lines.push(format!("- {name}: starts fresh (nothing of it was saved)."));
                }
            }
        }
    }
    for name in plugins.iter().filter(|name| !saved_plugins.contains(name)) {
        lines.push(format!(
            "- {name}: a plugin, restarted fresh (nothing of it was saved: only a plugin that exports `state` keeps its state across a restart)."
        ));
    }
    lines.join("\n")
}

/// Shuts every environment down and reaps every process they left.
fn stop_session(orchestrator: &Orchestrator, reason: &str) {
    orchestrator.shutdown(reason);
    let report = terminate_descendants(Duration::from_secs(2));
    if !report.survivors.is_empty() {
        eprintln!(
            "envhost: {} process(es) could not be stopped: {:?}",
            report.survivors.len(),
            report.survivors
        );
    }
}

/// `envhost check`: one report per file on stdout; failure if any file
/// would be refused.
fn run_check(args: CheckArgs) -> anyhow::Result<()> {
    let settings = args.plugins.settings(args.grants.clone());
    let log: Arc<dyn LogSink> = Arc::new(StderrSink);
    let mut refused = 0;
    let mut stdout = io::stdout().lock();
    for (index, file) in args.files.iter().enumerate() {
        let report = plugin::check_file(file, &settings, Arc::clone(&log));
        if index > 0 {
            writeln!(stdout)?;
        }
        stdout.write_all(report.text.as_bytes())?;
        stdout.flush()?;
        if !report.ok {
            refused += 1;
        }
    }
    if refused > 0 {
        bail!(
            "{refused} of {} plugin file{} failed the check",
            args.files.len(),
            if args.files.len() == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

/// `envhost healthcheck`: the report on stdout, exit status 1 if unhealthy.
fn run_healthcheck(args: HealthArgs) -> ExitCode {
    let mut stdout = io::stdout().lock();
    let project = match resolve_project(&args.project) {
        Ok(project) => project,
        Err(err) => {
            let _ = writeln!(stdout, "FAIL {err:#}\nunhealthy");
            return ExitCode::FAILURE;
        }
    };
    if let Err(err) = args.processes.start() {
        let _ = writeln!(stdout, "FAIL {err:#}\nunhealthy");
        return ExitCode::FAILURE;
    }
    let mut settings = envhost_envs::Settings::for_project(project);
    settings.python = args.python;
    let checks = healthcheck::Checks {
        settings,
        timeout: args.timeout,
        plugins: args
            .plugins
            .then(|| args.plugin_args.settings(args.plugin_config.clone())),
    };
    match healthcheck::run(checks, &mut stdout) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("envhost: cannot write the report: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Registers an environment in the orchestrator.
fn register(
    orchestrator: &mut Orchestrator,
    loaded: LoadedEnvironment,
) -> Result<(), envhost_core::RegisterError> {
    let LoadedEnvironment {
        name,
        kind,
        environment,
        detail,
    } = loaded;
    orchestrator.register(name, kind, environment, detail)
}

pub(crate) fn resolve_project(path: &Path) -> anyhow::Result<PathBuf> {
    let resolved = path
        .canonicalize()
        .with_context(|| format!("the project directory {} cannot be used", path.display()))?;
    if !resolved.is_dir() {
        bail!(
            "the project path {} is not a directory; pass --project DIR",
            resolved.display()
        );
    }
    Ok(resolved)
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

    #[test]
    fn the_default_timeout_reads_as_two_minutes() {
        assert_eq!(
            parse_duration(DEFAULT_TIMEOUT_TEXT),
            Ok(Duration::from_secs(120))
        );
    }
}
