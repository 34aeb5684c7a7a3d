//! The grants file as the distribution commands (`envhost add`, `install`,
//! `update`, `verify`, `remove`, `list`) use it: each plugin's `sha256`
//! pin, who must have signed it (`verify`), and a one-line summary of what
//! it is granted; and the file's text with one plugin's pin changed and
//! every other byte — comments, order, spacing — as the operator wrote it
//! (`toml_edit`).
//!
//! This module reads and rewrites text; writing the file is the caller's.
//! It never grants anything: a new entry holds a pin and nothing else.

use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, InlineTable, Item, Table, Value};

use crate::grants::config_file::{self, ConfigFile, PluginEntry, Verify};
use crate::settings::{PluginSettings, config_origin, config_path, plugin_dir};
use envhost_core::text;

/// Why the grants file cannot give the distribution commands its entries.
#[derive(Debug, thiserror::Error)]
pub enum GrantsFileError {
    /// The file is there but cannot be read.
    #[error("{shown}: {reason}")]
    Unreadable {
        /// The file as messages show it.
        shown: String,
        /// Why it cannot be read.
        reason: config_file::UnreadableGrantsFile,
    },
    /// The file, or one of its entries, has a mistake (names file, line and key).
    #[error("{0}")]
    Mistake(config_file::ConfigError),
}

/// Why one plugin's pin cannot be written into the grants file's text.
#[derive(Debug, thiserror::Error)]
pub enum PinEditError {
    /// The file is not TOML.
    #[error("it is not valid TOML ({0}); fix it by hand first")]
    NotToml(toml_edit::TomlError),
    /// `plugins` is not a table.
    #[error("its `plugins` is not a table of plugin entries; fix it by hand first")]
    PluginsNotATable,
    /// The plugin's entry is not a table.
    #[error("[plugins.{0}] is not a table; fix it by hand first")]
    EntryNotATable(String),
}

/// One plugin's entry, for the distribution commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedEntry {
    /// The plugin (`[plugins.NAME]`).
    pub name: String,
    /// Its `sha256` pin, lower-case hex.
    pub sha256: Option<String>,
    /// Who must have signed it.
    pub verify: Option<Verify>,
    /// What it is granted, one phrase each (`reads data`, `runs
    /// sqlite3`); empty when it is granted nothing.
    pub grants: Vec<String>,
}

/// A project's grants file.
#[derive(Debug, Clone)]
pub struct GrantsFile {
    /// Where it is.
    pub path: PathBuf,
    /// `path` as messages show it.
    pub shown: String,
    /// Its text; `None` when there is no file yet.
    pub text: Option<String>,
    /// Its entries, by name.
    pub entries: Vec<PinnedEntry>,
}

impl GrantsFile {
    /// The entry for `name`.
    pub fn entry(&self, name: &str) -> Option<&PinnedEntry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// Reads the grants file of the project at `project` (the
/// `--plugin-config` file when the settings name one). A missing file has
/// no entries; a file or an entry with a mistake is an error that names
/// the file, line and key, since a pin that cannot be read cannot be kept.
pub fn grants_file(
    project: &Path,
    settings: &PluginSettings,
) -> Result<GrantsFile, GrantsFileError> {
    let (path, shown) = config_path(settings, &plugin_dir(project), Some(project));
    let text = config_file::read_text(&path, config_origin(settings)).map_err(|reason| {
        GrantsFileError::Unreadable {
            shown: shown.clone(),
            reason,
        }
    })?;
    let mut entries = Vec::new();
    if let Some(text) = &text {
        let file = ConfigFile::parse(&path, &shown, text);
        if let Some(error) = file.file_error {
            return Err(GrantsFileError::Mistake(error));
        }
        for (name, entry) in file.entries {
            let entry = entry.map_err(GrantsFileError::Mistake)?;
            entries.push(pinned(name, &entry));
        }
    }
    Ok(GrantsFile {
        path,
        shown,
        text,
        entries,
    })
}

fn pinned(name: String, entry: &PluginEntry) -> PinnedEntry {
    let list = |values: &[crate::grants::config_file::Located<String>]| {
        values
            .iter()
            .map(|v| v.value.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut grants = Vec::new();
    if !entry.read_only.is_empty() {
        grants.push(format!("reads {}", list(&entry.read_only)));
    }
    if !entry.read_write.is_empty() {
        grants.push(format!("writes {}", list(&entry.read_write)));
    }
    if !entry.variables.is_empty() {
        grants.push(format!("sees {}", list(&entry.variables)));
    }
    if !entry.programs.is_empty() {
        grants.push(format!("runs {}", list(&entry.programs)));
    }
    if let Some(memory) = &entry.memory {
        grants.push(format!("memory {}", text::bytes(memory.value as u64)));
    }
    if let Some(limit) = &entry.time_limit {
        grants.push(format!("time limit {}", text::duration(limit.value)));
    }
    PinnedEntry {
        name,
        sha256: entry.sha256.as_ref().map(|pin| pin.value.clone()),
        verify: entry.verify.as_ref().map(|v| v.value.clone()),
        grants,
    }
}

/// What to do with an entry's `verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyChange {
    /// Leave it as it is.
    Keep,
    /// Write this requirement.
    Set(Verify),
    /// Take it out.
    Remove,
}

/// `text` (the grants file; empty for a new one) with `name`'s `sha256`
/// pin set to `sha256` (or taken out) and its `verify` changed as asked.
/// Everything else stays as written; an entry left empty is removed, and a
/// new one holds only what is set here.
pub fn with_pin(
    text: &str,
    name: &str,
    sha256: Option<&str>,
    verify: &VerifyChange,
) -> Result<String, PinEditError> {
    let mut document: DocumentMut = text.parse().map_err(PinEditError::NotToml)?;
    let root = document.as_table_mut();
    if !root.contains_key("plugins") {
        let mut plugins = Table::new();
        plugins.set_implicit(true);
        root.insert("plugins", Item::Table(plugins));
    }
    let plugins = root
        .get_mut("plugins")
        .and_then(Item::as_table_like_mut)
        .ok_or(PinEditError::PluginsNotATable)?;
    if !plugins.contains_key(name) {
        if sha256.is_none() && !matches!(verify, VerifyChange::Set(_)) {
            return Ok(document.to_string());
        }
        plugins.insert(name, Item::Table(Table::new()));
    }
    let entry = plugins
        .get_mut(name)
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| PinEditError::EntryNotATable(name.to_owned()))?;
    match sha256 {
        Some(hex) => {
            entry.insert("sha256", Item::Value(Value::from(hex)));
        }
        None => {
            entry.remove("sha256");
        }
    }
    match verify {
        VerifyChange::Keep => {}
        VerifyChange::Remove => {
            entry.remove("verify");
        }
        VerifyChange::Set(requirement) => {
            let mut table = InlineTable::new();
            match requirement {
                Verify::Key { key } => {
                    table.insert("key", Value::from(key.as_str()));
                }
                Verify::Keyless {
                    identity,
                    issuer,
                    trusted_root,
                } => {
                    table.insert("identity", Value::from(identity.as_str()));
                    table.insert("issuer", Value::from(issuer.as_str()));
                    if let Some(root) = trusted_root {
                        table.insert("trusted-root", Value::from(root.as_str()));
                    }
                }
            }
            entry.insert("verify", Item::Value(Value::InlineTable(table)));
        }
    }
    if entry.is_empty() {
        plugins.remove(name);
    }
    Ok(document.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "4be0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0";
    const OTHER: &str = "0000000000000000000000000000000000000000000000000000000000000001";

    #[test]
    fn a_new_file_gets_an_entry_with_only_the_pin() {
        let text = with_pin("", "timer", Some(PIN), &VerifyChange::Keep).unwrap();
        assert_eq!(text, format!("[plugins.timer]\nsha256 = \"{PIN}\"\n"));
        let file = ConfigFile::parse(Path::new("x"), "x", &text);
        let entry = file.entries["timer"].as_ref().unwrap();
        assert_eq!(entry.sha256.as_ref().unwrap().value, PIN);
        assert!(entry.programs.is_empty() && entry.read_write.is_empty());
    }

    #[test]
    fn the_operators_comments_and_order_are_kept() {
        let text = format!(
            "# Grants for this project.\n\n[plugins.sqlite]   # the database\nprograms = [\"sqlite3\"]  # needed\nsha256 = \"{OTHER}\"\n\n# timer next\n[plugins.timer]\nread-only = [\"data\"]\n"
        );
        let changed = with_pin(&text, "sqlite", Some(PIN), &VerifyChange::Keep).unwrap();
        assert_eq!(changed, text.replace(OTHER, PIN));
        let added = with_pin(&text, "timer", Some(PIN), &VerifyChange::Keep).unwrap();
        assert_eq!(
            added,
            text.replace(
                "read-only = [\"data\"]\n",
                &format!("read-only = [\"data\"]\nsha256 = \"{PIN}\"\n")
            )
        );
    }

    #[test]
    fn verify_is_written_and_removed_and_empty_entries_go() {
        let key = VerifyChange::Set(Verify::Key {
            key: "keys/acme.pub".into(),
        });
        let text = with_pin("", "timer", Some(PIN), &key).unwrap();
        assert!(
            text.contains("verify = { key = \"keys/acme.pub\" }"),
            "{text}"
        );
        let file = ConfigFile::parse(Path::new("x"), "x", &text);
        assert_eq!(
            file.entries["timer"]
                .as_ref()
                .unwrap()
                .verify
                .as_ref()
                .unwrap()
                .value,
            Verify::Key {
                key: "keys/acme.pub".into()
            }
        );
        let removed = with_pin(&text, "timer", None, &VerifyChange::Remove).unwrap();
        assert!(!removed.contains("timer"), "{removed}");

        let keyless = VerifyChange::Set(Verify::Keyless {
            identity: "dev@example.com".into(),
            issuer: "https://accounts.example.com".into(),
            trusted_root: None,
        });
        let text = with_pin("", "calc", Some(PIN), &keyless).unwrap();
        let file = ConfigFile::parse(Path::new("x"), "x", &text);
        assert!(matches!(
            file.entries["calc"]
                .as_ref()
                .unwrap()
                .verify
                .as_ref()
                .unwrap()
                .value,
            Verify::Keyless { .. }
        ));
    }

    #[test]
    fn removing_a_pin_keeps_the_grants() {
        let text = format!("[plugins.sqlite]\nprograms = [\"sqlite3\"]\nsha256 = \"{PIN}\"\n");
        let removed = with_pin(&text, "sqlite", None, &VerifyChange::Remove).unwrap();
        assert_eq!(removed, "[plugins.sqlite]\nprograms = [\"sqlite3\"]\n");
        // Nothing to remove: the text is unchanged.
        assert_eq!(
            with_pin(&removed, "timer", None, &VerifyChange::Remove).unwrap(),
            removed
        );
    }

    #[test]
    fn summaries_name_each_grant() {
        let text = format!(
            "[plugins.sqlite]\nprograms = [\"sqlite3\"]\nread-only = [\"data\", \"docs\"]\nmemory = \"512MiB\"\nsha256 = \"{PIN}\"\n"
        );
        let file = ConfigFile::parse(Path::new("x"), "x", &text);
        let entry = pinned("sqlite".into(), file.entries["sqlite"].as_ref().unwrap());
        assert_eq!(entry.sha256.as_deref(), Some(PIN));
        assert_eq!(
            entry.grants,
            vec!["reads data, docs", "runs sqlite3", "memory 512 MiB"]
        );
    }

    #[test]
    fn a_broken_file_is_not_rewritten() {
        let error = with_pin("[plugins.timer\n", "timer", Some(PIN), &VerifyChange::Keep)
            .unwrap_err()
            .to_string();
        assert!(error.contains("not valid TOML"), "{error}");
    }
}
