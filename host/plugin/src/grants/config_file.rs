//! The operator's plugin configuration file, `env/envhost.toml`: what each
//! plugin may do beyond the sandbox.
//!
//! ```toml
//! [plugins.sqlite]
//! programs = ["sqlite3"]          # may run sqlite3 interactively
//! read-only = ["data"]            # project directories it may read
//! read-write = ["scratch"]        # ... and read and write
//! variables = ["LANG"]            # host environment variables it may see
//! memory = "512MiB"               # instead of the host's default limit
//! time-limit = "30s"              # the most one command may run
//! allowed-hosts = ["https://api.github.com", "https://*.example.com"]  # outgoing HTTP
//! sha256 = "4be0…"                # refuse the plugin unless its bytes match
//! verify = { key = "keys/acme.pub" }  # `envhost add`/`install`: who signed it
//! ```
//!
//! `verify` names who must have signed the plugin: a public key file
//! (`{ key = "…" }`, relative to the project) or a Sigstore keyless
//! identity (`{ identity = "…", issuer = "…" }`, optionally with
//! `trusted-root = "…"`). The distribution commands check it before they
//! write anything; start-up does not (it never touches the network, and
//! the `sha256` pin holds the bytes that were verified).
//!
//! Nothing is granted by default. Every unknown key and every bad value is
//! an error naming the file, the line and column, the plugin and the key:
//! the file is parsed with `toml`'s spans and each entry is deserialized
//! with `deny_unknown_fields`. An error inside `[plugins.NAME]` concerns
//! that plugin only; an error outside any entry (bad TOML, an unknown
//! top-level key) concerns the whole file. This module only reads and
//! checks the text: it must not look at the file system beyond reading the
//! file (resolving directories and programs is `grants`).
//!
//! The file in `env/` is where commands can write, so it is read as a
//! hostile file ([`Origin::Project`]: not followed if a symlink, not waited
//! on if a FIFO, at most [`GRANTS_BOUND`]); a file the operator named
//! ([`Origin::Operator`]) may be a symlink, and is otherwise read alike.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use envhost_files::{Bound, FileRefusal, RefusalReason, untrusted};
use serde::Deserialize;
use toml::Spanned;

/// The most bytes of a grants file read.
pub const GRANTS_BOUND: Bound = Bound::new(1 << 20, "a grants file");

/// Where a grants file's path comes from, which decides whether a symlink
/// at it is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `env/envhost.toml`, where commands can write: never followed.
    Project,
    /// Named by the operator (`--plugin-config`, `--grants`): followed.
    Operator,
}

/// Why the grants file cannot be used, in words that follow its name.
#[derive(Debug, thiserror::Error)]
pub enum UnreadableGrantsFile {
    /// Reading it failed.
    #[error("the file cannot be read: {0}")]
    Io(std::io::Error),
    /// It is not a file the host reads (a symlink in env/, a FIFO, too large…).
    #[error("the file {0}")]
    Refused(RefusalReason),
    /// Its bytes are not text.
    #[error("the file is not valid UTF-8")]
    NotUtf8,
}

/// The text of the grants file at `path`; `Ok(None)` when there is none,
/// `Err` with the words (without the file's name) when it cannot be used.
pub fn read_text(path: &Path, origin: Origin) -> Result<Option<String>, UnreadableGrantsFile> {
    let opened = match origin {
        Origin::Project => untrusted::open_file(path),
        Origin::Operator => untrusted::open_named(path),
    };
    let bytes = match opened.and_then(|opened| opened.read(GRANTS_BOUND)) {
        Ok(bytes) => bytes,
        Err(FileRefusal {
            reason: RefusalReason::Missing,
            ..
        }) => return Ok(None),
        Err(FileRefusal {
            reason: RefusalReason::Io(err),
            ..
        }) => return Err(UnreadableGrantsFile::Io(err)),
        Err(refusal) => return Err(UnreadableGrantsFile::Refused(refusal.reason)),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| UnreadableGrantsFile::NotUtf8)
}

/// Why a value of a plugin's entry cannot be granted; the message says
/// what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadGrantValue(String);

impl From<String> for BadGrantValue {
    fn from(message: String) -> Self {
        BadGrantValue(message)
    }
}
use toml::de::{DeTable, DeValue, ValueDeserializer};

use crate::grants::network::AllowedHost;
use envhost_core::text::{parse_duration, parse_size};

/// The file's name inside `env/`.
pub const FILE_NAME: &str = "envhost.toml";

/// The keys of a plugin's entry, in the order the documentation lists them.
pub const ENTRY_KEYS: [&str; 9] = [
    "read-only",
    "read-write",
    "variables",
    "programs",
    "memory",
    "time-limit",
    "allowed-hosts",
    "sha256",
    "verify",
];

/// Who must have signed a plugin (`verify = …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verify {
    /// The holder of this public key (a PEM file, relative to the project).
    Key {
        /// The key file as written.
        key: String,
    },
    /// A Sigstore keyless identity.
    Keyless {
        /// The certificate's subject (an e-mail address or a URI).
        identity: String,
        /// The OIDC issuer that vouched for it.
        issuer: String,
        /// A Sigstore `trusted_root.json` instead of the public-good root
        /// built into envhost, relative to the project.
        trusted_root: Option<String>,
    },
}

/// A place in the file, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub at: Location,
}

/// What went wrong in the file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as shown to the operator (e.g. `env/envhost.toml`).
    pub file: String,
    pub at: Option<Location>,
    /// The `[plugins.NAME]` entry concerned; `None` for the whole file.
    pub plugin: Option<String>,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(at) = self.at {
            write!(f, ":{}:{}", at.line, at.column)?;
        }
        f.write_str(": ")?;
        match (&self.plugin, &self.key) {
            (Some(plugin), Some(key)) => write!(f, "[plugins.{plugin}] `{key}`: ")?,
            (Some(plugin), None) => write!(f, "[plugins.{plugin}]: ")?,
            (None, Some(key)) => write!(f, "`{key}`: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

/// One plugin's entry, checked for form (not yet against the disk).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginEntry {
    /// Where `[plugins.NAME]` is.
    pub at: Option<Location>,
    pub read_only: Vec<Located<String>>,
    pub read_write: Vec<Located<String>>,
    pub variables: Vec<Located<String>>,
    pub programs: Vec<Located<String>>,
    pub memory: Option<Located<usize>>,
    pub time_limit: Option<Located<Duration>>,
    /// Where it may send HTTP requests, in canonical form.
    pub allowed_hosts: Vec<Located<AllowedHost>>,
    /// Lower-case hex.
    pub sha256: Option<Located<String>>,
    /// Who must have signed it.
    pub verify: Option<Located<Verify>>,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// `path` as shown in messages.
    pub shown: String,
    /// An error that makes the whole file unusable (no entry can be
    /// trusted): bad TOML, an unknown top-level key.
    pub file_error: Option<ConfigError>,
    /// Each plugin's entry, or what is wrong with it.
    pub entries: BTreeMap<String, Result<PluginEntry, ConfigError>>,
}

impl ConfigFile {
    /// A missing file is an empty configuration (nothing granted).
    pub fn empty(path: &Path, shown: &str) -> Self {
        ConfigFile {
            path: path.to_owned(),
            shown: shown.to_owned(),
            file_error: None,
            entries: BTreeMap::new(),
        }
    }

    /// Reads `path`; a missing file gives `None`.
    pub fn read(path: &Path, shown: &str, origin: Origin) -> Option<ConfigFile> {
        match read_text(path, origin) {
            Ok(None) => None,
            Ok(Some(text)) => Some(ConfigFile::parse(path, shown, &text)),
            Err(unreadable) => {
                let mut file = ConfigFile::empty(path, shown);
                file.file_error = Some(ConfigError {
                    file: shown.to_owned(),
                    at: None,
                    plugin: None,
                    key: None,
                    message: unreadable.to_string(),
                });
                Some(file)
            }
        }
    }

    /// Parses the text of the file.
    pub fn parse(path: &Path, shown: &str, text: &str) -> ConfigFile {
        let mut file = ConfigFile::empty(path, shown);
        let lines = LineIndex::new(text);
        let error = |span: Option<Range<usize>>, key: Option<&str>, message: String| ConfigError {
            file: shown.to_owned(),
            at: span.map(|s| lines.locate(s.start)),
            plugin: None,
            key: key.map(str::to_owned),
            message,
        };
        let root = match DeTable::parse(text) {
            Ok(root) => root.into_inner(),
            Err(err) => {
                file.file_error = Some(error(
                    err.span(),
                    None,
                    format!("this is not valid TOML: {}", err.message().trim()),
                ));
                return file;
            }
        };
        for (key, value) in root {
            let name = key.get_ref().as_ref();
            if name != "plugins" {
                file.file_error = Some(error(
                    Some(key.span()),
                    Some(name),
                    format!(
                        "unknown key; this file has one table, `plugins`, with an entry per plugin: [plugins.NAME] (did you mean [plugins.{}]?)",
                        nested_name(&value).unwrap_or("NAME")
                    ),
                ));
                return file;
            }
            let span = value.span();
            let DeValue::Table(plugins) = value.into_inner() else {
                file.file_error = Some(error(
                    Some(span),
                    Some("plugins"),
                    "must be a table of plugin entries, e.g. [plugins.sqlite]".to_owned(),
                ));
                return file;
            };
            for (plugin, entry) in plugins {
                let plugin_name = plugin.get_ref().to_string();
                let at = lines.locate(plugin.span().start);
                let parsed = parse_entry(&lines, shown, &plugin_name, at, entry);
                file.entries.insert(plugin_name, parsed);
            }
        }
        file
    }
}

/// `[plugin.sqlite]` written for `[plugins.sqlite]`: the inner name.
fn nested_name<'a>(value: &'a Spanned<DeValue<'_>>) -> Option<&'a str> {
    match value.get_ref() {
        DeValue::Table(table) => table.iter().next().map(|(k, _)| k.get_ref().as_ref()),
        _ => None,
    }
}

/// The entry as serde sees it: every key known, every value typed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawEntry {
    #[serde(default)]
    read_only: Vec<Spanned<String>>,
    #[serde(default)]
    read_write: Vec<Spanned<String>>,
    #[serde(default)]
    variables: Vec<Spanned<String>>,
    #[serde(default)]
    programs: Vec<Spanned<String>>,
    memory: Option<Spanned<SizeValue>>,
    time_limit: Option<Spanned<String>>,
    #[serde(default)]
    allowed_hosts: Vec<Spanned<String>>,
    sha256: Option<Spanned<String>>,
    verify: Option<Spanned<RawVerify>>,
}

/// `verify = { … }` as serde sees it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawVerify {
    key: Option<String>,
    identity: Option<String>,
    issuer: Option<String>,
    trusted_root: Option<String>,
}

/// `memory = "512MiB"` or `memory = 536870912`.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a size such as \"512MiB\" or a number of bytes")]
enum SizeValue {
    Bytes(u64),
    Text(String),
}

fn parse_entry(
    lines: &LineIndex,
    shown: &str,
    plugin: &str,
    at: Location,
    entry: Spanned<DeValue<'_>>,
) -> Result<PluginEntry, ConfigError> {
    let place = EntryPlace {
        lines,
        shown,
        plugin,
        at,
    };
    let raw = place.deserialize(entry)?;
    Ok(PluginEntry {
        at: Some(at),
        read_only: place.strings("read-only", raw.read_only, check_directory)?,
        read_write: place.strings("read-write", raw.read_write, check_directory)?,
        variables: place.strings("variables", raw.variables, check_variable)?,
        programs: place.strings("programs", raw.programs, check_program)?,
        memory: raw.memory.map(|memory| place.memory(memory)).transpose()?,
        time_limit: raw
            .time_limit
            .map(|limit| place.time_limit(limit))
            .transpose()?,
        allowed_hosts: place.allowed_hosts(raw.allowed_hosts)?,
        sha256: raw.sha256.map(|pin| place.sha256(pin)).transpose()?,
        verify: raw.verify.map(|verify| place.verify(verify)).transpose()?,
    })
}

/// Where one plugin's entry is, for the errors and locations of its values.
struct EntryPlace<'a> {
    lines: &'a LineIndex<'a>,
    shown: &'a str,
    plugin: &'a str,
    at: Location,
}

impl EntryPlace<'_> {
    /// An error at `span` (the entry's line without one) about `key`.
    fn error(&self, span: Option<Range<usize>>, key: Option<&str>, message: String) -> ConfigError {
        ConfigError {
            file: self.shown.to_owned(),
            at: Some(span.map(|s| self.lines.locate(s.start)).unwrap_or(self.at)),
            plugin: Some(self.plugin.to_owned()),
            key: key.map(str::to_owned),
            message,
        }
    }

    fn located<T>(&self, value: T, span: Range<usize>) -> Located<T> {
        Located {
            value,
            at: self.lines.locate(span.start),
        }
    }

    /// The entry as serde reads it; an unknown key is named with the keys
    /// there are.
    fn deserialize(&self, entry: Spanned<DeValue<'_>>) -> Result<RawEntry, ConfigError> {
        let plugin = self.plugin;
        let entry_span = entry.span();
        let keys: Vec<(String, Range<usize>, Range<usize>)> = match entry.get_ref() {
            DeValue::Table(table) => table
                .iter()
                .map(|(k, v)| (k.get_ref().to_string(), k.span(), v.span()))
                .collect(),
            _ => {
                return Err(self.error(
                    Some(entry_span),
                    None,
                    format!(
                        "must be a table of grants, e.g.\n[plugins.{plugin}]\nprograms = [\"sqlite3\"]"
                    ),
                ));
            }
        };
        RawEntry::deserialize(ValueDeserializer::from(entry)).map_err(|err| {
            let span = err.span();
            let key = span.as_ref().and_then(|span| {
                keys.iter()
                    .find(|(_, key, value)| overlaps(key, span) || overlaps(value, span))
                    .map(|(name, _, _)| name.as_str())
            });
            let message = err.message().trim().to_owned();
            let message = if message.starts_with("unknown field") {
                format!(
                    "{}; the keys of a plugin's entry are {}",
                    message.split(", expected").next().unwrap_or(&message),
                    ENTRY_KEYS.join(", ")
                )
            } else {
                message
            };
            self.error(span, key, message)
        })
    }

    /// A list of strings, each checked, duplicates dropped.
    fn strings(
        &self,
        key: &str,
        values: Vec<Spanned<String>>,
        check: fn(&str) -> Result<(), BadGrantValue>,
    ) -> Result<Vec<Located<String>>, ConfigError> {
        let mut seen: Vec<Located<String>> = Vec::new();
        for value in values {
            let span = value.span();
            let text = value.into_inner();
            check(&text)
                .map_err(|bad| self.error(Some(span.clone()), Some(key), bad.to_string()))?;
            if !seen.iter().any(|s| s.value == text) {
                seen.push(self.located(text, span));
            }
        }
        Ok(seen)
    }

    fn memory(&self, memory: Spanned<SizeValue>) -> Result<Located<usize>, ConfigError> {
        let span = memory.span();
        let bytes = match memory.into_inner() {
            SizeValue::Bytes(bytes) => usize::try_from(bytes)
                .ok()
                .filter(|b| *b > 0)
                .ok_or_else(|| format!("{bytes} bytes is not a usable memory limit")),
            SizeValue::Text(text) => parse_size(&text).map_err(|bad| bad.to_string()),
        }
        .map_err(|message| self.error(Some(span.clone()), Some("memory"), message))?;
        Ok(self.located(bytes, span))
    }

    fn time_limit(&self, limit: Spanned<String>) -> Result<Located<Duration>, ConfigError> {
        let span = limit.span();
        let duration = parse_duration(limit.get_ref())
            .map_err(|bad| self.error(Some(span.clone()), Some("time-limit"), bad.to_string()))?;
        Ok(self.located(duration, span))
    }

    fn allowed_hosts(
        &self,
        entries: Vec<Spanned<String>>,
    ) -> Result<Vec<Located<AllowedHost>>, ConfigError> {
        let mut allowed: Vec<Located<AllowedHost>> = Vec::new();
        for entry in entries {
            let span = entry.span();
            let host = AllowedHost::parse(entry.get_ref()).map_err(|unreadable| {
                self.error(
                    Some(span.clone()),
                    Some("allowed-hosts"),
                    unreadable.to_string(),
                )
            })?;
            if !allowed.iter().any(|seen| seen.value == host) {
                allowed.push(self.located(host, span));
            }
        }
        Ok(allowed)
    }

    fn sha256(&self, pin: Spanned<String>) -> Result<Located<String>, ConfigError> {
        let span = pin.span();
        let hex = pin.get_ref().trim().to_ascii_lowercase();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error(
                Some(span),
                Some("sha256"),
                format!(
                    "{:?} is not a sha256: write the 64 hexadecimal digits `envhost check` prints for the plugin",
                    pin.get_ref()
                ),
            ));
        }
        Ok(self.located(hex, span))
    }

    fn verify(&self, verify: Spanned<RawVerify>) -> Result<Located<Verify>, ConfigError> {
        let span = verify.span();
        let value = match verify.into_inner() {
            RawVerify {
                key: Some(key),
                identity: None,
                issuer: None,
                trusted_root: None,
            } if !key.trim().is_empty() => Verify::Key { key },
            RawVerify {
                key: None,
                identity: Some(identity),
                issuer: Some(issuer),
                trusted_root,
            } if !identity.trim().is_empty() && !issuer.trim().is_empty() => Verify::Keyless {
                identity,
                issuer,
                trusted_root,
            },
            _ => {
                return Err(self.error(
                    Some(span),
                    Some("verify"),
                    "write verify = { key = \"keys/publisher.pub\" } (a public key file) or verify = { identity = \"…\", issuer = \"https://…\" } (a Sigstore keyless signer)".to_owned(),
                ));
            }
        };
        Ok(self.located(value, span))
    }
}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end.max(b.start + 1) && b.start < a.end
}

/// A directory as written: relative to the project, staying inside it.
fn check_directory(text: &str) -> Result<(), BadGrantValue> {
    let path = Path::new(text);
    if text.trim().is_empty() {
        return Err("an empty path; write a directory relative to the project, e.g. \"data\" (\".\" is the whole project)".to_owned().into());
    }
    if path.is_absolute() {
        return Err(format!(
            "{text:?} is absolute; write directories relative to the project (a plugin never sees anything outside it)"
        ).into());
    }
    if path
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "{text:?} goes up with `..`; a plugin may only be granted directories inside the project"
        ).into());
    }
    Ok(())
}

fn check_variable(text: &str) -> Result<(), BadGrantValue> {
    if text.is_empty() || text.contains(['=', '\0']) {
        return Err(format!("{text:?} is not a variable name (no `=`, not empty)").into());
    }
    Ok(())
}

fn check_program(text: &str) -> Result<(), BadGrantValue> {
    if text.trim().is_empty() || text.contains('\0') {
        return Err(
            "an empty program; write a name looked up on PATH (\"gdb\") or an absolute path"
                .to_owned()
                .into(),
        );
    }
    if text.contains('/') && !Path::new(text).is_absolute() {
        return Err(format!(
            "{text:?} is a relative path; write a name looked up on PATH (\"gdb\") or an absolute path (\"/usr/bin/gdb\")"
        ).into());
    }
    if text.chars().any(char::is_whitespace) && !text.contains('/') {
        return Err(format!(
            "{text:?} has spaces: write only the program; the plugin passes its arguments"
        )
        .into());
    }
    Ok(())
}

/// Byte offsets to line and column.
struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    fn new(text: &'a str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, starts }
    }

    fn locate(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&start| start <= offset) - 1;
        let start = self.starts[line];
        let column = self
            .text
            .get(start..offset)
            .map_or(1, |before| before.chars().count() + 1);
        Location {
            line: line + 1,
            column,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ConfigFile {
        ConfigFile::parse(Path::new("/p/env/envhost.toml"), "env/envhost.toml", text)
    }

    #[test]
    fn a_full_entry_parses_with_locations() {
        let file = parse(
            "# grants\n[plugins.sqlite]\nprograms = [\"sqlite3\", \"/usr/bin/gdb\"]\nread-only = [\"data\", \"data\"]\nread-write = [\"out\"]\nvariables = [\"LANG\"]\nmemory = \"512MiB\"\ntime-limit = \"30s\"\nsha256 = \"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"\n\n[plugins.timer]\n",
        );
        assert_eq!(file.file_error, None);
        let sqlite = file.entries["sqlite"].as_ref().unwrap();
        assert_eq!(
            sqlite.at,
            Some(Location {
                line: 2,
                column: 10
            })
        );
        assert_eq!(sqlite.programs.len(), 2);
        assert_eq!(sqlite.programs[1].value, "/usr/bin/gdb");
        assert_eq!(
            sqlite.programs[1].at,
            Location {
                line: 3,
                column: 24
            }
        );
        assert_eq!(sqlite.read_only.len(), 1, "duplicates are merged");
        assert_eq!(sqlite.memory.as_ref().unwrap().value, 512 << 20);
        assert_eq!(
            sqlite.time_limit.as_ref().unwrap().value,
            Duration::from_secs(30)
        );
        assert!(
            sqlite
                .sha256
                .as_ref()
                .unwrap()
                .value
                .starts_with("abcdef0123")
        );
        assert_eq!(file.entries["timer"].as_ref().unwrap().programs, Vec::new());
    }

    #[test]
    fn unknown_keys_name_file_line_plugin_and_key() {
        let file = parse(
            "[plugins.sqlite]\nprograms = [\"sqlite3\"]\nreed-only = [\"data\"]\n\n[plugins.ok]\n",
        );
        let err = file.entries["sqlite"].as_ref().unwrap_err();
        assert_eq!(
            err.to_string(),
            "env/envhost.toml:3:1: [plugins.sqlite] `reed-only`: unknown field `reed-only`; the keys of a plugin's entry are read-only, read-write, variables, programs, memory, time-limit, allowed-hosts, sha256, verify"
        );
        assert!(file.entries["ok"].is_ok(), "other entries are unaffected");
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            ("memory = \"lots\"", "`memory`: \"lots\" is not a size"),
            ("memory = -1", "`memory`: "),
            ("time-limit = \"soon\"", "`time-limit`: "),
            (
                "programs = \"gdb\"",
                "`programs`: invalid type: string \"gdb\", expected a sequence",
            ),
            (
                "programs = [\"bin/gdb\"]",
                "`programs`: \"bin/gdb\" is a relative path",
            ),
            (
                "read-only = [\"../etc\"]",
                "`read-only`: \"../etc\" goes up with `..`",
            ),
            (
                "read-write = [\"/etc\"]",
                "`read-write`: \"/etc\" is absolute",
            ),
            (
                "variables = [\"A=B\"]",
                "`variables`: \"A=B\" is not a variable name",
            ),
            ("sha256 = \"abc\"", "`sha256`: \"abc\" is not a sha256"),
            (
                "allowed-hosts = [\"api.github.com\"]",
                "`allowed-hosts`: \"api.github.com\" has no scheme; write \"https://api.github.com\"",
            ),
            (
                "allowed-hosts = \"https://x.org\"",
                "`allowed-hosts`: invalid type: string",
            ),
        ];
        for (line, expected) in cases {
            let file = parse(&format!("[plugins.p]\n{line}\n"));
            let err = file.entries["p"].as_ref().unwrap_err().to_string();
            assert!(
                err.starts_with("env/envhost.toml:2:") && err.contains(expected),
                "{line}: {err}"
            );
        }
    }

    #[test]
    fn allowed_hosts_are_read_canonical_with_their_places() {
        let file = parse(
            "[plugins.kv]\nallowed-hosts = [\"https://api.github.com\", \"HTTPS://API.GITHUB.COM.\", \"http://127.0.0.1:8080\"]\n[plugins.bad]\nallowed-hosts = [\"https://ok.org\", \"https://evil.org/path\"]\n",
        );
        let kv = file.entries["kv"].as_ref().unwrap();
        let shown: Vec<String> = kv
            .allowed_hosts
            .iter()
            .map(|h| h.value.to_string())
            .collect();
        assert_eq!(shown, ["https://api.github.com", "http://127.0.0.1:8080"]);
        assert_eq!(
            kv.allowed_hosts[1].at,
            Location {
                line: 2,
                column: 71
            }
        );
        let err = file.entries["bad"].as_ref().unwrap_err().to_string();
        assert!(
            err.starts_with("env/envhost.toml:4:36: [plugins.bad] `allowed-hosts`: \"https://evil.org/path\" has a path"),
            "{err}"
        );
    }

    #[test]
    fn file_level_errors_concern_every_plugin() {
        let syntax = parse("[plugins.sqlite]\nprograms = [\"sqlite3\"\n");
        let err = syntax.file_error.unwrap().to_string();
        assert!(
            err.starts_with("env/envhost.toml:2:") && err.contains("this is not valid TOML"),
            "{err}"
        );
        let typo = parse("[plugin.sqlite]\nprograms = [\"sqlite3\"]\n");
        let err = typo.file_error.unwrap().to_string();
        assert!(
            err.starts_with("env/envhost.toml:1:2: `plugin`: unknown key")
                && err.contains("did you mean [plugins.sqlite]?"),
            "{err}"
        );
        let not_table = parse("plugins = 3\n");
        assert!(not_table.file_error.is_some());
    }

    #[test]
    fn an_entry_that_is_not_a_table_is_an_error() {
        let file = parse("[plugins]\nsqlite = \"yes\"\n");
        let err = file.entries["sqlite"].as_ref().unwrap_err().to_string();
        assert!(err.starts_with("env/envhost.toml:2:"), "{err}");
        assert!(err.contains("must be a table of grants"), "{err}");
    }
}
