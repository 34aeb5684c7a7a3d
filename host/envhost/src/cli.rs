//! The command line's definitions (clap): every verb, its flags and
//! their help, and how a session's flags become the runtime's plain
//! [`Settings`]. It must not run anything.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use envhost_core::text::{parse_duration, parse_size};
use envhost_process::DEFAULT_CAP_BYTES;
use envhost_runtime::{IsolationLevel, PluginSource, ProcessSettings, Settings};

use crate::plugin_args::PluginArgs;
use crate::tool_args;

/// Default time a command may run before it is interrupted: two minutes,
/// long enough for most builds and test runs, short enough that an agent
/// stuck on a command that never ends gets control back. Per command, the
/// `timeout_ms` field overrides it.
const DEFAULT_TIMEOUT_TEXT: &str = "120s";

/// Persistent environments for AI agents (bash, python, an editor and
/// WebAssembly plugins) over newline-delimited JSON.
#[derive(Parser)]
#[command(name = "envhost", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    Call(tool_args::CallArgs),
    /// Run session files (commands and their expected answers) against a
    /// plugin and print a diff for each answer that differs; --bless writes
    /// the answers into the files. Exits 1 if any session fails.
    Test(tool_args::TestArgs),
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
    New(tool_args::NewArgs),
    #[command(flatten)]
    Distribution(tool_args::Command),
}

#[derive(Args)]
pub(crate) struct HealthArgs {
    /// The project directory a session would serve.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub(crate) project: PathBuf,

    /// How long bash and python may each take to answer.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub(crate) timeout: Duration,

    /// The Python interpreter for the python environment [default: python3
    /// on PATH].
    #[arg(long, value_name = "PATH")]
    pub(crate) python: Option<PathBuf>,

    /// Load the project's plugins too (compiling those not in the cache);
    /// any refused plugin fails the check.
    #[arg(long)]
    pub(crate) plugins: bool,

    /// The grants file, as for `serve` [default: <project>/env/envhost.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) plugin_config: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) plugin_args: PluginArgs,

    #[command(flatten)]
    pub(crate) processes: ProcessArgs,
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) session: SessionArgs,
}

#[derive(Args)]
pub(crate) struct ReplArgs {
    /// Open each image a command produces (figures saved by python, PNG,
    /// JPEG, GIF and WebP files it wrote) with the desktop's viewer
    /// (xdg-open). Without xdg-open on PATH the REPL says so and prints
    /// the paths only.
    #[arg(long)]
    pub(crate) open_figures: bool,

    #[command(flatten)]
    pub(crate) session: SessionArgs,
}

#[derive(Args)]
pub(crate) struct McpArgs {
    /// Serve streamable HTTP at http://ADDRESS/mcp instead of stdio (e.g.
    /// 127.0.0.1:8765, or a port alone for loopback). Every request needs
    /// the bearer token; browser origins other than the server's own are
    /// refused (see docs/mcp.md).
    #[arg(long, value_name = "ADDRESS", value_parser = parse_address)]
    pub(crate) http: Option<SocketAddr>,

    /// With --http: the file holding the bearer token; created with a fresh
    /// token (readable by you only) when it does not exist [default: a fresh
    /// token, printed on stderr].
    #[arg(long, value_name = "FILE", requires = "http")]
    pub(crate) token_file: Option<PathBuf>,

    /// With --http: a browser origin allowed besides the server's own, as a
    /// browser sends it (e.g. http://localhost:6274). Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub(crate) allow_origin: Vec<String>,

    /// With --http: connections held at once, with or without the token;
    /// further ones wait until one closes [default: 256].
    #[arg(long, value_name = "N", requires = "http",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(crate) max_connections: Option<usize>,

    /// With --http: how long a connection may take to send a request's
    /// headers (from when it opens, or from the end of the previous
    /// answer), then its body; a silent or idle connection is closed after
    /// it [default: 10s].
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = parse_duration)]
    pub(crate) header_timeout: Option<Duration>,

    /// With --http: MCP sessions held at once; past it a new session gets
    /// 503 until one ends [default: 64].
    #[arg(long, value_name = "N", requires = "http",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(crate) max_sessions: Option<usize>,

    /// With --http: a session that gets no request for this long ends
    /// [default: 30m].
    #[arg(long, value_name = "DURATION", requires = "http", value_parser = parse_duration)]
    pub(crate) session_idle_timeout: Option<Duration>,

    /// Add structuredContent (environment, success, running, truncated,
    /// saved_output) to tool results. Off by default: some clients then
    /// show the model only that, without the output.
    #[arg(long)]
    pub(crate) structured_content: bool,

    #[command(flatten)]
    pub(crate) session: SessionArgs,
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
pub(crate) struct CheckArgs {
    /// The plugin files, e.g. env/timer.wasm.
    #[arg(value_name = "FILE.wasm", required = true)]
    pub(crate) files: Vec<PathBuf>,

    /// The grants file to check the plugins with (directories, variables,
    /// programs, limits, sha256 pins), read as the host reads
    /// <project>/env/envhost.toml, the project being the folder above the
    /// plugin's. Without it nothing is granted, not even by an
    /// envhost.toml next to the plugin: a plugin runs while it is checked.
    #[arg(long, value_name = "FILE", alias = "plugin-config")]
    pub(crate) grants: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) plugins: PluginArgs,
}

#[derive(Args)]
pub(crate) struct SessionArgs {
    /// The project directory: where environments start and plugins are found.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub(crate) project: PathBuf,

    /// Default time a command may run before it is interrupted (e.g. 90s,
    /// 2m, 500ms). A command's own limit overrides it (`timeout_ms` over NDJSON,
    /// `timeout_seconds` over MCP).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration,
          default_value = DEFAULT_TIMEOUT_TEXT)]
    pub(crate) timeout: Duration,

    /// Make yielding the default: a command still running after DURATION
    /// (e.g. 10s) answers with its output so far and keeps running; the
    /// agent goes on with wait, input or interrupt. Such a command has no
    /// time limit unless it gives its own `timeout_ms`. A command's
    /// `yield_ms` overrides it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) yield_after: Option<Duration>,

    /// Largest output returned for one command (e.g. 65536, 128KiB, 1MiB);
    /// beyond it the head and tail are kept and the whole output is saved
    /// to a file under <project>/.envhost/output/.
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value_t = DEFAULT_CAP_BYTES)]
    pub(crate) output_cap: usize,

    /// Largest file of saved output for one command (e.g. 64MiB, 1GiB);
    /// a runaway command's output beyond it is not saved (the response
    /// still shows its tail).
    #[arg(long, value_name = "BYTES", value_parser = parse_size,
          default_value = "256MiB")]
    pub(crate) output_file_limit: usize,

    /// Pass this environment variable to bash and python even though its
    /// name looks like a secret (*_API_KEY, *_TOKEN, ...). Repeatable.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub(crate) pass_env: Vec<String>,

    /// Let the editor open and write files outside the project directory
    /// (paths with `..`, absolute paths, symlinks leading out).
    #[arg(long)]
    pub(crate) allow_outside_project: bool,

    /// The Python interpreter for the python environment: a path, or a
    /// command name looked up on PATH [default: python3 on PATH].
    #[arg(long, value_name = "PATH")]
    pub(crate) python: Option<PathBuf>,

    /// Append every event (commands, durations, timeouts, failures) to FILE
    /// as JSON lines with UTC timestamps.
    #[arg(long, value_name = "FILE")]
    pub(crate) transcript: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) processes: ProcessArgs,

    /// Describe the session on stderr as it happens.
    #[arg(short, long)]
    pub(crate) verbose: bool,

    /// The file that grants plugins powers beyond the sandbox (directories,
    /// variables, programs, limits, sha256 pins) [default:
    /// <project>/env/envhost.toml]. Keep it outside the project to keep it
    /// out of the agent's reach.
    #[arg(long, value_name = "FILE")]
    pub(crate) plugin_config: Option<PathBuf>,

    /// Restore the session a previous host recorded in
    /// <project>/.envhost/session/ (bash's directory, variables,
    /// functions, aliases and options; the editor's views) before the
    /// first command; the first answer says what came back and what did
    /// not. Plugins start fresh.
    #[arg(long, conflicts_with = "no_session_state")]
    pub(crate) resume: bool,

    /// Do not record the session: nothing is written under
    /// <project>/.envhost/session/ and `--resume` has nothing to restore.
    #[arg(long)]
    pub(crate) no_session_state: bool,

    /// Most named instances of bash, and of python, open at once
    /// (`bash:NAME`, `python:NAME`); past it a new one is refused until
    /// one is closed.
    #[arg(long, value_name = "N", default_value_t = envhost_core::instance::DEFAULT_MAX_INSTANCES)]
    pub(crate) max_instances: usize,

    #[command(flatten)]
    pub(crate) plugins: PluginArgs,

    /// Before each command, look for plugins rebuilt in env/ (a stat of
    /// each file) and swap each new build in, as start-up would load it;
    /// the command's answer says so, or why a new build was refused (the
    /// old one then keeps running). Under every front end (MCP keeps the
    /// tool list it announced). See docs/plugin-tools.md.
    #[arg(long)]
    pub(crate) watch: bool,
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
    pub(crate) isolation: IsolationArg,

    /// Most processes the session's programs may have at once (a fork bomb
    /// stops there), or `none`. Needs cgroups.
    #[arg(long, value_name = "N", value_parser = parse_process_limit,
          default_value_t = ProcessLimit(Some(envhost_process::DEFAULT_MAX_PROCESSES)))]
    pub(crate) max_processes: ProcessLimit,

    /// Most memory the session's programs may use together (e.g. 8GiB), or
    /// `none`; past it the kernel ends the biggest of them, never envhost.
    /// Needs cgroups [default: three quarters of the machine's memory].
    #[arg(long, value_name = "BYTES", value_parser = parse_memory_limit)]
    pub(crate) max_memory: Option<ProcessLimit>,

    /// Do not put each program an environment starts in a cgroup of its
    /// own, and set no session limits; contain them with process groups,
    /// sessions and a sweep of /proc only (what happens anyway where
    /// cgroups are unavailable).
    #[arg(long)]
    pub(crate) no_cgroups: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum IsolationArg {
    Auto,
    Namespaces,
    Guard,
}

/// A count or size limit, `None` for `none`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcessLimit(pub(crate) Option<u64>);

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
    /// The runtime's settings for these flags.
    pub(crate) fn settings(&self) -> ProcessSettings {
        ProcessSettings {
            isolation: match self.isolation {
                IsolationArg::Auto => IsolationLevel::Auto,
                IsolationArg::Namespaces => IsolationLevel::Namespaces,
                IsolationArg::Guard => IsolationLevel::Guard,
            },
            max_processes: self.max_processes.0,
            max_memory: self.max_memory.map(|memory| memory.0),
            cgroups: !self.no_cgroups,
        }
    }
}

impl SessionArgs {
    /// The runtime's settings for a session of `front_end` (its name in the
    /// `host_started` event); the front end then sets what is its own.
    pub(crate) fn settings(&self, front_end: &str) -> Settings {
        let mut plugins = self.plugins.settings(self.plugin_config.clone());
        plugins.baseline_above = Some(self.plugins.plugin_baseline_above as u64);
        Settings {
            project: self.project.clone(),
            front_end: front_end.to_owned(),
            timeout: self.timeout,
            yield_after: self.yield_after,
            output_cap: self.output_cap,
            output_file_limit: self.output_file_limit as u64,
            pass_env: self.pass_env.clone(),
            allow_outside_project: self.allow_outside_project,
            python: self.python.clone(),
            transcript: self.transcript.clone(),
            verbose: self.verbose,
            builtins: true,
            plugin_source: PluginSource::Project,
            plugins,
            plugin_output_to_stderr: true,
            processes: self.processes.settings(),
            session_state: !self.no_session_state,
            resume: self.resume,
            watch: self.watch,
            max_instances: self.max_instances,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_timeout_reads_as_two_minutes() {
        assert_eq!(
            parse_duration(DEFAULT_TIMEOUT_TEXT),
            Ok(Duration::from_secs(120))
        );
    }
}
