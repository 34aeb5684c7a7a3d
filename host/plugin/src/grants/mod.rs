//! What one plugin may do beyond the sandbox, resolved against the project
//! (its [`Grants`]), and how that compares with what it asked for (its
//! [`Request`]s).
//!
//! The operator's entry in `env/envhost.toml` (`config_file`) is checked
//! against the disk here: every granted directory must exist inside the
//! project (symlinks leading out are refused), is opened once, beneath the
//! project's own handle, and that handle is what every instance of the
//! plugin gets (so a folder later replaced by a symlink reaches nothing
//! new), and is shown to the plugin under `/` plus its relative path
//! (`data` is `/data`, `.` is `/`). No grant may hold the compiled-code
//! cache, and no writable one the plugin folder or the grants file
//! ([`Shielded`]). Programs are resolved on the
//! host's `PATH` when the plugin starts one, so a program installed later
//! works without a restart. Hosts a plugin may send HTTP requests to are
//! matched by `network`. This module decides what is granted and words
//! it; the sandbox enforces it, `interactive` runs the programs and
//! `http` sends the requests.

pub(crate) mod config_file;
pub(crate) mod network;
pub(crate) mod pins;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::grants::config_file::{ConfigError, ConfigFile, Located, Location, PluginEntry};
use crate::grants::network::{AllowedHost, Destination};
use envhost_core::text;
use envhost_process::{OutputLimits, find_program};

/// Most requests a plugin may make; a longer list refuses the plugin.
pub const MAX_REQUESTS: usize = 100;
/// Longest text in a request (a path, a name, a reason).
pub const MAX_REQUEST_TEXT: usize = 4 * 1024;

/// A project directory a plugin may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryGrant {
    /// As the operator wrote it, normalised (`data`, `.`).
    pub relative: String,
    /// The directory on the host (canonical, when the grants were read).
    pub host_path: PathBuf,
    /// The directory itself, opened then.
    pub handle: DirHandle,
    /// Where the plugin sees it: `/` + `relative` (`.` is `/`).
    pub guest_path: String,
    pub writable: bool,
}

/// A granted directory, opened (beneath the project) when the grants were
/// resolved; equal only to itself.
#[derive(Debug, Clone)]
pub struct DirHandle(Arc<std::fs::File>);

impl DirHandle {
    /// A new descriptor for the same directory, for one plugin instance.
    pub fn duplicate(&self) -> std::io::Result<std::fs::File> {
        self.0.try_clone()
    }
}

impl PartialEq for DirHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for DirHandle {}

/// Paths no grant may hold: `from_any` (the compiled-code cache, whose
/// entries the host runs as machine code) by any grant, `from_writing`
/// (the plugin folder, the grants file) by a writable one.
#[derive(Debug, Clone, Default)]
pub struct Shielded {
    pub from_any: Vec<PathBuf>,
    pub from_writing: Vec<PathBuf>,
}

/// Where a plugin's grants came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantSource {
    /// The config file as shown (`env/envhost.toml`).
    pub file: String,
    /// Where its `[plugins.NAME]` entry starts; `None` when it has none.
    pub entry: Option<Location>,
}

/// Everything one plugin is granted. The default grants nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    pub plugin: String,
    pub source: GrantSource,
    pub directories: Vec<DirectoryGrant>,
    /// Variable names, in the order granted.
    pub variables: Vec<String>,
    /// Programs as written (a name looked up on PATH, or an absolute path).
    pub programs: Vec<String>,
    /// Memory limit instead of the host's default.
    pub memory: Option<usize>,
    /// The most one command may run.
    pub time_limit: Option<Duration>,
    /// Where it may send HTTP requests (`allowed-hosts`).
    pub allowed_hosts: Vec<AllowedHost>,
    /// The sha256 the plugin's bytes must have, and where it was written.
    pub pin: Option<Located<String>>,
    /// Where granted programs run (the project) and where their long
    /// output is saved.
    pub project_dir: PathBuf,
    pub output_limits: OutputLimits,
}

impl Grants {
    /// Nothing granted (a plugin without an entry).
    pub fn none(plugin: &str, config_file: &str, project_dir: &Path, output: OutputLimits) -> Self {
        Grants {
            plugin: plugin.to_owned(),
            source: GrantSource {
                file: config_file.to_owned(),
                entry: None,
            },
            directories: Vec::new(),
            variables: Vec::new(),
            programs: Vec::new(),
            memory: None,
            time_limit: None,
            allowed_hosts: Vec::new(),
            pin: None,
            project_dir: project_dir.to_owned(),
            output_limits: output,
        }
    }

    /// Checks an entry against the project: directories must exist inside
    /// it, none may hold a `shielded` path (a plugin must not rewrite its
    /// own grants, replace itself or reach compiled code). Errors name the
    /// file, line, plugin and key.
    pub fn resolve(
        plugin: &str,
        config_file: &str,
        entry: &PluginEntry,
        project_dir: &Path,
        shielded: &Shielded,
        output: OutputLimits,
    ) -> Result<Self, ConfigError> {
        let mut grants = Grants::none(plugin, config_file, project_dir, output);
        grants.source.entry = entry.at;
        let project = project_dir.canonicalize().map_err(|err| ConfigError {
            file: config_file.to_owned(),
            at: entry.at,
            plugin: Some(plugin.to_owned()),
            key: None,
            message: format!(
                "the project directory {} cannot be resolved: {err}",
                project_dir.display()
            ),
        })?;
        let project_handle = std::fs::File::open(&project).map_err(|err| ConfigError {
            file: config_file.to_owned(),
            at: entry.at,
            plugin: Some(plugin.to_owned()),
            key: None,
            message: format!(
                "the project directory {} cannot be opened: {err}",
                project.display()
            ),
        })?;
        for (key, list, writable) in [
            ("read-only", &entry.read_only, false),
            ("read-write", &entry.read_write, true),
        ] {
            for dir in list {
                let error = |message| ConfigError {
                    file: config_file.to_owned(),
                    at: Some(dir.at),
                    plugin: Some(plugin.to_owned()),
                    key: Some(key.to_owned()),
                    message,
                };
                let granted = resolve_directory(&project, &project_handle, &dir.value, writable)
                    .map_err(|refused| error(refused.to_string()))?;
                // Checked on the merged grant: read-only here and
                // read-write elsewhere is read-write.
                let merged_writable = writable
                    || grants
                        .directories
                        .iter()
                        .any(|d| d.guest_path == granted.guest_path && d.writable);
                refuse_shielded(&granted, merged_writable, shielded)
                    .map_err(|refused| error(refused.to_string()))?;
                match grants
                    .directories
                    .iter_mut()
                    .find(|d| d.guest_path == granted.guest_path)
                {
                    // Listed as both: read-write wins.
                    Some(existing) => existing.writable |= granted.writable,
                    None => grants.directories.push(granted),
                }
            }
        }
        grants.variables = entry.variables.iter().map(|v| v.value.clone()).collect();
        grants.programs = entry.programs.iter().map(|p| p.value.clone()).collect();
        grants.memory = entry.memory.as_ref().map(|m| m.value);
        grants.time_limit = entry.time_limit.as_ref().map(|t| t.value);
        grants.allowed_hosts = entry
            .allowed_hosts
            .iter()
            .map(|h| h.value.clone())
            .collect();
        grants.pin = entry.sha256.clone();
        Ok(grants)
    }

    /// `env/envhost.toml [plugins.NAME]` (with its line when there is one).
    pub fn entry_name(&self) -> String {
        match self.source.entry {
            Some(at) => format!(
                "[plugins.{}] in {} (line {})",
                self.plugin, self.source.file, at.line
            ),
            None => format!("[plugins.{}] in {}", self.plugin, self.source.file),
        }
    }

    /// The host's variables the plugin may see: (name, value) for each
    /// granted name that is set.
    pub fn variable_values(&self) -> Vec<(String, String)> {
        self.variables
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
            .collect()
    }

    /// The program a plugin asked to start, if granted: the grant it
    /// matches and the path to run. `requested` may be the grant as written
    /// or the path it resolves to.
    pub fn program(&self, requested: &str) -> Result<(String, PathBuf), ProgramRefused> {
        for granted in &self.programs {
            let resolved = find_program(granted);
            let matches = requested == granted
                || resolved
                    .as_ref()
                    .is_ok_and(|path| Path::new(requested) == path.as_path());
            if matches {
                return resolved.map(|path| (granted.clone(), path)).map_err(|why| {
                    ProgramRefused::NotFound {
                        program: granted.clone(),
                        why: why.to_string(),
                    }
                });
            }
        }
        Err(ProgramRefused::NotGranted {
            requested: requested.to_owned(),
            granted: self.programs.clone(),
            entry: self.entry_name(),
        })
    }
}

impl Grants {
    /// Whether the plugin may send an HTTP request to `destination`; if
    /// not, what the operator would add to allow it.
    pub fn allows_request(&self, destination: &Destination) -> Result<(), NetworkRefused> {
        if self.allowed_hosts.iter().any(|g| g.allows(destination)) {
            return Ok(());
        }
        Err(NetworkRefused {
            plugin: self.plugin.clone(),
            file: self.source.file.clone(),
            has_entry: self.source.entry.is_some(),
            has_grants: !self.allowed_hosts.is_empty(),
            grant: destination.grant(),
        })
    }
}

/// A request to a host the plugin was not granted, and the grant that
/// would allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRefused {
    plugin: String,
    file: String,
    has_entry: bool,
    has_grants: bool,
    grant: AllowedHost,
}

impl fmt::Display for NetworkRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let NetworkRefused {
            plugin,
            file,
            grant,
            ..
        } = self;
        match (self.has_entry, self.has_grants) {
            (true, true) => write!(
                f,
                "not in its allowed-hosts; the operator can add \"{grant}\" to [plugins.{plugin}] allowed-hosts in {file}"
            ),
            (true, false) => write!(
                f,
                "it may send no HTTP requests; the operator can add allowed-hosts = [\"{grant}\"] to [plugins.{plugin}] in {file}"
            ),
            (false, _) => write!(
                f,
                "it may send no HTTP requests; the operator can add [plugins.{plugin}] with allowed-hosts = [\"{grant}\"] to {file}"
            ),
        }
    }
}

/// Why a plugin's grants cannot be read from the configuration file.
#[derive(Debug, thiserror::Error)]
pub enum GrantsRefused {
    /// The whole file is unusable: no entry can be trusted, pins included.
    #[error("the plugin configuration cannot be used, so no plugin loads until it is fixed: {0}")]
    FileUnusable(ConfigError),
    /// This plugin's entry has a mistake.
    #[error("its entry in the plugin configuration is invalid: {0}")]
    EntryInvalid(ConfigError),
}

/// Why a directory of `read-only` or `read-write` cannot be granted; the
/// message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UngrantableDirectory(String);

impl From<String> for UngrantableDirectory {
    fn from(message: String) -> Self {
        UngrantableDirectory(message)
    }
}

/// A plugin's grants from the configuration file (`None`: there is none),
/// or why the plugin must be refused: its entry is invalid, or the whole
/// file is (then no entry can be trusted, pins included).
pub fn grants_for(
    config: Option<&ConfigFile>,
    plugin: &str,
    shown_file: &str,
    project_dir: &Path,
    shielded: &Shielded,
    output: OutputLimits,
) -> Result<Grants, GrantsRefused> {
    let Some(config) = config else {
        return Ok(Grants::none(plugin, shown_file, project_dir, output));
    };
    if let Some(error) = &config.file_error {
        return Err(GrantsRefused::FileUnusable(error.clone()));
    }
    match config.entries.get(plugin) {
        None => Ok(Grants::none(plugin, &config.shown, project_dir, output)),
        Some(Err(error)) => Err(GrantsRefused::EntryInvalid(error.clone())),
        Some(Ok(entry)) => {
            Grants::resolve(plugin, &config.shown, entry, project_dir, shielded, output)
                .map_err(GrantsRefused::EntryInvalid)
        }
    }
}

/// Why a plugin may not start a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramRefused {
    NotGranted {
        requested: String,
        granted: Vec<String>,
        entry: String,
    },
    /// Granted, but not on this machine.
    NotFound { program: String, why: String },
}

impl fmt::Display for ProgramRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgramRefused::NotGranted {
                requested,
                granted,
                entry,
            } => {
                write!(
                    f,
                    "the program `{requested}` is not granted to this plugin; "
                )?;
                if granted.is_empty() {
                    write!(f, "it may run no programs")?;
                } else {
                    write!(f, "it may run only {}", text::quoted_list(granted))?;
                }
                write!(f, ". The operator grants programs in `programs` of {entry}")
            }
            ProgramRefused::NotFound { program, why } => write!(
                f,
                "the program `{program}` is granted but cannot be run on this machine: {why}"
            ),
        }
    }
}

fn resolve_directory(
    project: &Path,
    project_handle: &std::fs::File,
    relative: &str,
    writable: bool,
) -> Result<DirectoryGrant, UngrantableDirectory> {
    let normalised: PathBuf = Path::new(relative)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    let host = project.join(&normalised);
    let canonical = host.canonicalize().map_err(|err| {
        if err.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{relative:?} does not exist in the project ({}); create the directory or remove it from the list",
                host.display()
            )
        } else {
            format!("{relative:?} cannot be used: {err}")
        }
    })?;
    if !canonical.starts_with(project) {
        return Err(format!(
            "{relative:?} leads outside the project (it resolves to {}); a plugin may only be granted directories inside the project",
            canonical.display()
        ).into());
    }
    if !canonical.is_dir() {
        return Err(format!("{relative:?} is not a directory").into());
    }
    // Opened beneath the project's handle: whatever happened to the path
    // since it was resolved, the handle cannot be outside the project.
    let beneath = if normalised.as_os_str().is_empty() {
        Path::new(".")
    } else {
        normalised.as_path()
    };
    let handle = cap_primitives::fs::open_dir(project_handle, beneath)
        .map_err(|err| format!("{relative:?} cannot be opened inside the project: {err}"))?;
    let shown = normalised.to_string_lossy().into_owned();
    let (relative, guest_path) = if shown.is_empty() {
        (".".to_owned(), "/".to_owned())
    } else {
        (shown.clone(), format!("/{shown}"))
    };
    Ok(DirectoryGrant {
        relative,
        host_path: canonical,
        handle: DirHandle(Arc::new(handle)),
        guest_path,
        writable,
    })
}

/// A grant holding a shielded path is refused.
fn refuse_shielded(
    granted: &DirectoryGrant,
    writable: bool,
    shielded: &Shielded,
) -> Result<(), UngrantableDirectory> {
    let holds = |path: &PathBuf| {
        let path = path.canonicalize().unwrap_or_else(|_| path.clone());
        path.starts_with(&granted.host_path).then_some(path)
    };
    if let Some(path) = shielded.from_any.iter().find_map(holds) {
        return Err(format!(
            "{:?} holds {}, the compiled-code cache: a plugin that could read or change compiled code could run code it was not reviewed for; grant a directory that does not contain it, or move the cache (--plugin-cache DIR)",
            granted.relative,
            path.display()
        ).into());
    }
    if !writable {
        return Ok(());
    }
    if let Some(path) = shielded.from_writing.iter().find_map(holds) {
        return Err(format!(
            "{:?} holds {}: a plugin that may write there could change its own grants or replace plugins; grant a directory that does not contain it",
            granted.relative,
            path.display()
        ).into());
    }
    Ok(())
}

/// One power, as requested by a plugin or granted by the operator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Power {
    ReadDirectory(String),
    WriteDirectory(String),
    Variable(String),
    Program(String),
    Memory(u64),
    /// Outgoing HTTP to destinations matching a pattern, in the grant's
    /// own syntax (`https://api.github.com`, `https://*.example.com:8443`).
    Network(String),
    TimeLimit(Duration),
}

impl fmt::Display for Power {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Power::ReadDirectory(dir) => write!(f, "read {}", shown_dir(dir)),
            Power::WriteDirectory(dir) => write!(f, "read and write {}", shown_dir(dir)),
            Power::Variable(name) => write!(f, "see the variable {name}"),
            Power::Program(program) => write!(f, "run {program}"),
            Power::Memory(bytes) => write!(f, "memory up to {}", text::bytes(*bytes)),
            Power::Network(pattern) => write!(f, "network {pattern}"),
            Power::TimeLimit(limit) => {
                write!(f, "commands stop after {}", text::duration(*limit))
            }
        }
    }
}

fn shown_dir(dir: &str) -> String {
    if dir == "." || dir.is_empty() {
        "the whole project".to_owned()
    } else {
        format!("{}/", dir.trim_end_matches('/'))
    }
}

/// A power a plugin asked for, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub power: Power,
    pub reason: String,
}

/// How a power stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Asked for and granted.
    Granted,
    /// Granted without being asked for.
    GrantedUnasked,
    /// Asked for, not granted: the plugin will be refused it.
    Refused,
}

/// One line of the comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerLine {
    pub power: Power,
    pub standing: Standing,
    /// The plugin's reason, for requested powers.
    pub reason: Option<String>,
}

/// Requests against grants, in a stable order: refused first (what the
/// operator may want to decide), then granted, then granted unasked.
pub fn compare(requests: &[Request], grants: &Grants, default_memory: usize) -> Vec<PowerLine> {
    let mut lines = Vec::new();
    let mut covered: BTreeSet<Power> = BTreeSet::new();
    for request in requests {
        // Directories as the operator writes them (`data/x`, not `/data/x/`).
        let power = match &request.power {
            Power::ReadDirectory(dir) => Power::ReadDirectory(normalise(dir)),
            Power::WriteDirectory(dir) => Power::WriteDirectory(normalise(dir)),
            // Hosts as the operator writes them; a request that is no
            // valid pattern stays as written (and is refused).
            Power::Network(pattern) => Power::Network(
                AllowedHost::parse(pattern).map_or_else(|_| pattern.clone(), |p| p.to_string()),
            ),
            other => other.clone(),
        };
        let satisfied_by = satisfying_grant(&power, grants, default_memory);
        if let Some(grant) = &satisfied_by {
            covered.insert(grant.clone());
        }
        lines.push(PowerLine {
            power,
            standing: if satisfied_by.is_some() {
                Standing::Granted
            } else {
                Standing::Refused
            },
            reason: Some(request.reason.trim().to_owned()).filter(|r| !r.is_empty()),
        });
    }
    for granted in granted_powers(grants) {
        if !covered.contains(&granted) && !lines.iter().any(|l| l.power == granted) {
            lines.push(PowerLine {
                power: granted,
                standing: Standing::GrantedUnasked,
                reason: None,
            });
        }
    }
    lines.sort_by_key(|line| match line.standing {
        Standing::Refused => 0,
        Standing::Granted => 1,
        Standing::GrantedUnasked => 2,
    });
    lines
}

/// Every grant as a power.
pub fn granted_powers(grants: &Grants) -> Vec<Power> {
    let mut powers = Vec::new();
    for dir in &grants.directories {
        powers.push(if dir.writable {
            Power::WriteDirectory(dir.relative.clone())
        } else {
            Power::ReadDirectory(dir.relative.clone())
        });
    }
    powers.extend(grants.programs.iter().cloned().map(Power::Program));
    powers.extend(grants.variables.iter().cloned().map(Power::Variable));
    powers.extend(
        grants
            .allowed_hosts
            .iter()
            .map(|host| Power::Network(host.to_string())),
    );
    if let Some(memory) = grants.memory {
        powers.push(Power::Memory(memory as u64));
    }
    if let Some(limit) = grants.time_limit {
        powers.push(Power::TimeLimit(limit));
    }
    powers
}

/// The grant that satisfies a request, if any.
fn satisfying_grant(power: &Power, grants: &Grants, default_memory: usize) -> Option<Power> {
    match power {
        Power::ReadDirectory(dir) | Power::WriteDirectory(dir) => {
            let wants_write = matches!(power, Power::WriteDirectory(_));
            let wanted = normalise(dir);
            grants
                .directories
                .iter()
                .filter(|g| g.writable || !wants_write)
                .find(|g| {
                    g.relative == "."
                        || wanted == g.relative
                        || wanted.starts_with(&format!("{}/", g.relative))
                })
                .map(|g| {
                    if g.writable {
                        Power::WriteDirectory(g.relative.clone())
                    } else {
                        Power::ReadDirectory(g.relative.clone())
                    }
                })
        }
        Power::Variable(name) => grants
            .variables
            .iter()
            .find(|v| *v == name)
            .map(|v| Power::Variable(v.clone())),
        Power::Program(program) => grants
            .programs
            .iter()
            .find(|g| {
                *g == program
                    || find_program(g)
                        .is_ok_and(|path| Path::new(program.as_str()) == path.as_path())
            })
            .map(|g| Power::Program(g.clone())),
        Power::Memory(bytes) => {
            let limit = grants.memory.unwrap_or(default_memory) as u64;
            // Without a memory grant the default limit suffices.
            let granted = Power::Memory(grants.memory.map_or(*bytes, |g| g as u64));
            (*bytes <= limit).then_some(granted)
        }
        Power::TimeLimit(_) => None,
        Power::Network(pattern) => {
            let wanted = AllowedHost::parse(pattern).ok()?;
            grants
                .allowed_hosts
                .iter()
                .find(|granted| granted.covers(&wanted))
                .map(|granted| Power::Network(granted.to_string()))
        }
    }
}

fn normalise(dir: &str) -> String {
    let path: PathBuf = Path::new(dir.trim_start_matches('/'))
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    let text = path.to_string_lossy().into_owned();
    if text.is_empty() {
        ".".to_owned()
    } else {
        text
    }
}

/// The lines a plugin's screen section gets (none when nothing is asked or
/// granted): what it may do, and what it asked for in vain.
pub fn screen_lines(lines: &[PowerLine]) -> Vec<String> {
    let join = |standings: &[Standing]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| standings.contains(&l.standing))
            .map(|l| l.power.to_string())
            .collect()
    };
    let mut out = Vec::new();
    let granted = join(&[Standing::Granted, Standing::GrantedUnasked]);
    if !granted.is_empty() {
        out.push(format!("Granted by the operator: {}", granted.join("; ")));
    }
    let refused = join(&[Standing::Refused]);
    if !refused.is_empty() {
        out.push(format!(
            "Asked for but not granted (those calls fail): {}",
            refused.join("; ")
        ));
    }
    out
}

/// Which grants file `envhost check` applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantsApplied {
    /// None was given (`--grants FILE`): nothing is granted.
    NotGiven,
    /// The file given does not exist.
    NotFound,
    /// The file given was read.
    Read,
}

/// The block `envhost check` prints.
pub fn check_lines(lines: &[PowerLine], grants: &Grants, applied: GrantsApplied) -> String {
    let mut text = String::new();
    let source = if applied == GrantsApplied::NotGiven {
        "nothing is granted: no grants file was given (--grants FILE applies one)".to_owned()
    } else if applied == GrantsApplied::NotFound {
        format!("no {} found: nothing is granted", grants.source.file)
    } else if grants.source.entry.is_some() {
        format!("grants from {}", grants.entry_name())
    } else {
        format!(
            "{} has no [plugins.{}] entry: nothing is granted",
            grants.source.file, grants.plugin
        )
    };
    text.push_str(&format!("  powers:      {source}\n"));
    if lines.is_empty() {
        text.push_str("    (it asks for nothing and is granted nothing)\n");
    }
    for line in lines {
        let standing = match line.standing {
            Standing::Granted => "requested, granted",
            Standing::GrantedUnasked => "granted (not requested)",
            Standing::Refused => "requested, NOT granted",
        };
        let detail = match (&line.power, line.standing) {
            (Power::Program(program), Standing::Granted | Standing::GrantedUnasked) => {
                match find_program(program) {
                    Ok(path) => format!(" ({})", path.display()),
                    Err(_) => " (not found on this machine)".to_owned(),
                }
            }
            _ => String::new(),
        };
        let reason = line
            .reason
            .as_ref()
            .map(|r| format!(" - \"{r}\""))
            .unwrap_or_default();
        text.push_str(&format!(
            "    {:<24} {}{detail}{reason}\n",
            standing, line.power
        ));
    }
    if let Some(pin) = &grants.pin {
        text.push_str(&format!(
            "  pin:         sha256 {} (line {} of {})\n",
            pin.value, pin.at.line, grants.source.file
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::config_file::ConfigFile;

    fn grants_for(project: &Path, text: &str) -> Result<Grants, ConfigError> {
        grants_with_cache(project, text, Path::new("/nonexistent/envhost-cache"))
    }

    fn grants_with_cache(project: &Path, text: &str, cache: &Path) -> Result<Grants, ConfigError> {
        let file = ConfigFile::parse(&project.join("env/envhost.toml"), "env/envhost.toml", text);
        let entry = file.entries["p"].clone()?;
        Grants::resolve(
            "p",
            "env/envhost.toml",
            &entry,
            project,
            &Shielded {
                from_any: vec![cache.to_owned()],
                from_writing: vec![project.join("env"), project.join("env/envhost.toml")],
            },
            OutputLimits::for_project(project),
        )
    }

    #[test]
    fn directories_must_exist_inside_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path();
        std::fs::create_dir_all(project.join("data/sub")).unwrap();
        std::os::unix::fs::symlink("/etc", project.join("escape")).unwrap();
        let grants = grants_for(
            project,
            "[plugins.p]\nread-only = [\"data\", \"./data/sub/\", \".\"]\nread-write = [\"data/sub\"]\n",
        )
        .unwrap();
        let shown: Vec<(&str, &str, bool)> = grants
            .directories
            .iter()
            .map(|d| (d.relative.as_str(), d.guest_path.as_str(), d.writable))
            .collect();
        assert_eq!(
            shown,
            [
                ("data", "/data", false),
                ("data/sub", "/data/sub", true),
                (".", "/", false)
            ]
        );
        let escape = grants_for(project, "[plugins.p]\nread-only = [\"escape\"]\n").unwrap_err();
        assert!(
            escape.to_string().starts_with("env/envhost.toml:2:14: [plugins.p] `read-only`: \"escape\" leads outside the project"),
            "{escape}"
        );
        let missing = grants_for(project, "[plugins.p]\nread-write = [\"nope\"]\n").unwrap_err();
        std::fs::create_dir_all(project.join("env")).unwrap();
        let own = grants_for(project, "[plugins.p]\nread-write = [\".\"]\n").unwrap_err();
        assert!(own.message.contains("could change its own grants"), "{own}");
        assert!(grants_for(project, "[plugins.p]\nread-only = [\".\"]\n").is_ok());
        // No grant, not even a read-only one, may hold the code cache
        // (whether or not the host has created it yet).
        let cache = grants_with_cache(
            project,
            "[plugins.p]\nread-only = [\"data\"]\n",
            &project.join("data/sub/cache"),
        )
        .unwrap_err();
        assert!(cache.message.contains("the compiled-code cache"), "{cache}");
        assert!(
            missing.message.contains("does not exist in the project"),
            "{missing}"
        );
    }

    #[test]
    fn programs_match_by_name_or_resolved_path() {
        let dir = tempfile::tempdir().unwrap();
        let grants = grants_for(
            dir.path(),
            "[plugins.p]\nprograms = [\"sh\", \"no-such-program-xyz\"]\n",
        )
        .unwrap();
        let (granted, path) = grants.program("sh").unwrap();
        assert_eq!(granted, "sh");
        assert!(path.is_absolute());
        assert_eq!(grants.program(path.to_str().unwrap()).unwrap().0, "sh");
        let refused = grants.program("bash").unwrap_err().to_string();
        assert_eq!(
            refused,
            "the program `bash` is not granted to this plugin; it may run only `sh`, `no-such-program-xyz`. The operator grants programs in `programs` of [plugins.p] in env/envhost.toml (line 1)"
        );
        let missing = grants
            .program("no-such-program-xyz")
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("is granted but cannot be run on this machine"),
            "{missing}"
        );
        let none = Grants::none(
            "q",
            "env/envhost.toml",
            dir.path(),
            OutputLimits::for_project(dir.path()),
        );
        assert!(
            none.program("sh")
                .unwrap_err()
                .to_string()
                .contains("it may run no programs")
        );
    }

    #[test]
    fn requests_are_compared_with_grants() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data/out")).unwrap();
        let grants = grants_for(
            dir.path(),
            "[plugins.p]\nread-only = [\"data\"]\nread-write = [\"data/out\"]\nprograms = [\"sh\"]\nvariables = [\"LANG\"]\n",
        )
        .unwrap();
        let request = |power: Power| Request {
            power,
            reason: "because".into(),
        };
        let lines = compare(
            &[
                request(Power::ReadDirectory("data/in".into())),
                request(Power::WriteDirectory("data".into())),
                request(Power::WriteDirectory("/data/out/x".into())),
                request(Power::Program("sh".into())),
                request(Power::Variable("HOME".into())),
                request(Power::Memory(1 << 20)),
                request(Power::Memory(1 << 40)),
            ],
            &grants,
            256 << 20,
        );
        let summary: Vec<(String, Standing)> = lines
            .iter()
            .map(|l| (l.power.to_string(), l.standing))
            .collect();
        assert_eq!(
            summary,
            [
                ("read and write data/".to_owned(), Standing::Refused),
                ("see the variable HOME".to_owned(), Standing::Refused),
                ("memory up to 1.0 TiB".to_owned(), Standing::Refused),
                ("read data/in/".to_owned(), Standing::Granted),
                ("read and write data/out/x/".to_owned(), Standing::Granted),
                ("run sh".to_owned(), Standing::Granted),
                ("memory up to 1.0 MiB".to_owned(), Standing::Granted),
                ("see the variable LANG".to_owned(), Standing::GrantedUnasked),
            ]
        );
        assert_eq!(
            screen_lines(&lines),
            [
                "Granted by the operator: read data/in/; read and write data/out/x/; run sh; memory up to 1.0 MiB; see the variable LANG",
                "Asked for but not granted (those calls fail): read and write data/; see the variable HOME; memory up to 1.0 TiB",
            ]
        );
        let network = grants_for(
            dir.path(),
            "[plugins.p]\nallowed-hosts = [\"https://*.github.com\", \"http://127.0.0.1:8080\"]\n",
        )
        .unwrap();
        let lines = compare(
            &[
                request(Power::Network("HTTPS://API.GITHUB.COM".into())),
                request(Power::Network("https://github.com".into())),
                request(Power::Network("api.github.com".into())),
            ],
            &network,
            256 << 20,
        );
        assert_eq!(
            screen_lines(&lines),
            [
                "Granted by the operator: network https://api.github.com; network http://127.0.0.1:8080",
                "Asked for but not granted (those calls fail): network https://github.com; network api.github.com",
            ]
        );
        let destination = |s: &str, a: &str| Destination::of_request(Some(s), a).unwrap();
        assert!(
            network
                .allows_request(&destination("https", "a.github.com"))
                .is_ok()
        );
        assert_eq!(
            network
                .allows_request(&destination("https", "github.com"))
                .unwrap_err()
                .to_string(),
            "not in its allowed-hosts; the operator can add \"https://github.com\" to [plugins.p] allowed-hosts in env/envhost.toml"
        );
        assert!(
            screen_lines(&compare(
                &[],
                &Grants::none("p", "f", dir.path(), OutputLimits::for_project(dir.path())),
                1
            ))
            .is_empty()
        );
    }
}
