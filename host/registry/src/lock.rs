//! The lock file, `env/envhost.lock`: for every installed plugin, where it
//! came from and exactly which bytes were verified.
//!
//! ```toml
//! version = 1
//!
//! [[plugin]]
//! name = "timer"
//! source = "oci://ghcr.io/acme/timer:1.2"
//! manifest = "sha256:3b1f…"      # the tag's manifest when it was resolved
//! sha256 = "9c0e…"               # the component (the OCI layer, the pin)
//! size = 51234
//! world = "envhost:environment/plugin@0.1.0"
//! signer = { key = "keys/acme.pub" }
//! signature = "sha256:77aa…"     # the bundle that was verified
//! ```
//!
//! envhost writes this file (sorted by name, one layout, so a diff shows
//! exactly what changed) and reads it with line and column in every error.
//! This module only converts between text and [`Lock`]; it does not touch
//! the file system.

use std::ops::Range;

use envhost_core::EnvironmentName;
use serde::Deserialize;
use toml::Spanned;

use crate::digest::Sha256;
use crate::source::Source;

/// The file's name inside `env/`.
pub const FILE_NAME: &str = "envhost.lock";

/// The only format version so far.
pub const VERSION: u32 = 1;

/// The whole lock file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    /// One entry per plugin.
    pub plugins: Vec<LockedPlugin>,
}

/// One plugin's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedPlugin {
    /// The environment name, and the file `env/NAME.wasm`.
    pub name: String,
    /// Where it came from, as the operator wrote it.
    pub source: Source,
    /// The manifest the source resolved to (OCI sources only).
    pub manifest: Option<Sha256>,
    /// The component's bytes: the OCI layer digest and the pin in
    /// `env/envhost.toml`.
    pub sha256: Sha256,
    /// The component's size in bytes.
    pub size: u64,
    /// The WIT world the component targets, as the host recognised it.
    pub world: String,
    /// Who signed it, when a signature was required and verified.
    pub signer: Option<LockedSigner>,
    /// The digest of the signature bundle that was verified.
    pub signature: Option<Sha256>,
}

/// Who signed, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockedSigner {
    /// The public key file, as the operator named it.
    Key(String),
    /// A Sigstore keyless identity.
    Keyless {
        /// The certificate's subject (an e-mail address or a URI).
        identity: String,
        /// The OIDC issuer.
        issuer: String,
    },
}

/// A lock file that does not parse; the message says where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct LockError {
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// What is wrong and what to do.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    version: Spanned<u32>,
    #[serde(default)]
    plugin: Vec<Spanned<RawPlugin>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlugin {
    name: Spanned<String>,
    source: Spanned<String>,
    #[serde(default)]
    manifest: Option<Spanned<String>>,
    sha256: Spanned<String>,
    size: u64,
    world: String,
    #[serde(default)]
    signer: Option<Spanned<RawSigner>>,
    #[serde(default)]
    signature: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSigner {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    identity: Option<String>,
    #[serde(default)]
    issuer: Option<String>,
}

impl Lock {
    /// Parses the text of a lock file.
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        let at = |span: Range<usize>, message: String| {
            let (line, column) = line_column(text, span.start);
            LockError {
                line,
                column,
                message,
            }
        };
        let raw: RawLock = toml::from_str(text).map_err(|e| {
            at(
                e.span().unwrap_or(0..0),
                format!(
                    "{}; the lock file is written by envhost: fix the line, or delete the file and run `envhost add` again",
                    e.message()
                ),
            )
        })?;
        if *raw.version.get_ref() != VERSION {
            return Err(at(
                raw.version.span(),
                format!(
                    "lock file version {} is not one this envhost reads ({VERSION}); use the envhost that wrote it",
                    raw.version.get_ref()
                ),
            ));
        }
        let mut plugins: Vec<LockedPlugin> = Vec::new();
        for entry in raw.plugin {
            let entry_span = entry.span();
            let raw = entry.into_inner();
            let name = raw.name.get_ref().clone();
            if !valid_name(&name) {
                return Err(at(
                    raw.name.span(),
                    format!(
                        "{name:?} is not a plugin name: an environment name is an identifier (a letter or `_`, then letters, digits or `_`)"
                    ),
                ));
            }
            if plugins.iter().any(|p| p.name == name) {
                return Err(at(entry_span, format!("plugin {name:?} is locked twice")));
            }
            let source: Source = raw
                .source
                .get_ref()
                .parse()
                .map_err(|e: crate::source::BadSource| at(raw.source.span(), e.to_string()))?;
            let digest = |field: &Spanned<String>| {
                field
                    .get_ref()
                    .parse::<Sha256>()
                    .map_err(|e| at(field.span(), e.to_string()))
            };
            let manifest = raw.manifest.as_ref().map(digest).transpose()?;
            let sha256 = digest(&raw.sha256)?;
            let signature = raw.signature.as_ref().map(digest).transpose()?;
            let signer = match raw.signer {
                None => None,
                Some(signer) => {
                    let span = signer.span();
                    Some(match signer.into_inner() {
                        RawSigner {
                            key: Some(key),
                            identity: None,
                            issuer: None,
                        } => LockedSigner::Key(key),
                        RawSigner {
                            key: None,
                            identity: Some(identity),
                            issuer: Some(issuer),
                        } => LockedSigner::Keyless { identity, issuer },
                        _ => {
                            return Err(at(
                                span,
                                "signer is { key = \"…\" } or { identity = \"…\", issuer = \"…\" }"
                                    .to_owned(),
                            ));
                        }
                    })
                }
            };
            plugins.push(LockedPlugin {
                name,
                source,
                manifest,
                sha256,
                size: raw.size,
                world: raw.world,
                signer,
                signature,
            });
        }
        Ok(Lock { plugins })
    }

    /// The text of the file: a header, then the entries sorted by name,
    /// each key in one fixed order.
    pub fn to_text(&self) -> String {
        let mut plugins: Vec<&LockedPlugin> = self.plugins.iter().collect();
        plugins.sort_by(|a, b| a.name.cmp(&b.name));
        let mut out = String::from(
            "# Written by envhost (`envhost add`, `update`, `remove`): the plugins in this\n\
             # folder, where each came from and the exact bytes that were verified.\n\
             # Commit it; `envhost install` makes env/ match it.\n",
        );
        out.push_str(&format!("version = {VERSION}\n"));
        for plugin in plugins {
            out.push_str("\n[[plugin]]\n");
            out.push_str(&format!("name = {}\n", quote(&plugin.name)));
            out.push_str(&format!("source = {}\n", quote(&plugin.source.to_string())));
            if let Some(manifest) = &plugin.manifest {
                out.push_str(&format!("manifest = {}\n", quote(&manifest.to_string())));
            }
            out.push_str(&format!("sha256 = {}\n", quote(&plugin.sha256.hex())));
            out.push_str(&format!("size = {}\n", plugin.size));
            out.push_str(&format!("world = {}\n", quote(&plugin.world)));
            match &plugin.signer {
                None => {}
                Some(LockedSigner::Key(key)) => {
                    out.push_str(&format!("signer = {{ key = {} }}\n", quote(key)));
                }
                Some(LockedSigner::Keyless { identity, issuer }) => out.push_str(&format!(
                    "signer = {{ identity = {}, issuer = {} }}\n",
                    quote(identity),
                    quote(issuer)
                )),
            }
            if let Some(signature) = &plugin.signature {
                out.push_str(&format!("signature = {}\n", quote(&signature.to_string())));
            }
        }
        out
    }

    /// The entry for `name`.
    pub fn get(&self, name: &str) -> Option<&LockedPlugin> {
        self.plugins.iter().find(|p| p.name == name)
    }

    /// Adds `plugin`, replacing an entry of the same name.
    pub fn insert(&mut self, plugin: LockedPlugin) {
        self.plugins.retain(|p| p.name != plugin.name);
        self.plugins.push(plugin);
    }

    /// Removes `name`'s entry; returns it if there was one.
    pub fn remove(&mut self, name: &str) -> Option<LockedPlugin> {
        let index = self.plugins.iter().position(|p| p.name == name)?;
        Some(self.plugins.remove(index))
    }
}

/// Plugin names are environment names: the rule the host loads plugins
/// by, so that the file reads back every name `envhost add` accepts
/// (`données` as well as `timer`). Such a name holds no `/`, `.` or
/// control character, so `env/NAME.wasm` stays in `env/`.
pub fn valid_name(name: &str) -> bool {
    EnvironmentName::new(name).is_ok()
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Lock {
        Lock {
            plugins: vec![
                LockedPlugin {
                    name: "timer".into(),
                    source: "oci://127.0.0.1:5000/plugins/timer:1.0".parse().unwrap(),
                    manifest: Some(Sha256::of(b"manifest")),
                    sha256: Sha256::of(b"component"),
                    size: 9,
                    world: "envhost:environment/plugin@0.1.0".into(),
                    signer: Some(LockedSigner::Key("keys/a \"b\".pub".into())),
                    signature: Some(Sha256::of(b"bundle")),
                },
                LockedPlugin {
                    name: "calc".into(),
                    source: "plugins/calc.wasm".parse().unwrap(),
                    manifest: None,
                    sha256: Sha256::of(b"calc"),
                    size: 4,
                    world: "envhost:environment/plugin@0.1.0".into(),
                    signer: Some(LockedSigner::Keyless {
                        identity: "dev@example.com".into(),
                        issuer: "https://accounts.example.com".into(),
                    }),
                    signature: None,
                },
            ],
        }
    }

    #[test]
    fn round_trips_and_sorts() {
        let lock = sample();
        let text = lock.to_text();
        let parsed = Lock::parse(&text).unwrap();
        let mut sorted = lock.plugins.clone();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(parsed.plugins, sorted);
        // Deterministic: the same lock in any order writes the same text.
        let mut reversed = lock.clone();
        reversed.plugins.reverse();
        assert_eq!(reversed.to_text(), text);
        assert!(text.find("name = \"calc\"").unwrap() < text.find("name = \"timer\"").unwrap());
    }

    #[test]
    fn errors_name_line_and_column() {
        let text = sample().to_text();
        let cases = [
            (
                text.replace("size = 9", "size = \"nine\""),
                "size = \"nine\"",
                "invalid type",
            ),
            (
                text.replace("version = 1", "version = 7"),
                "version = 7",
                "version 7",
            ),
            (
                text.replace(&Sha256::of(b"component").hex(), "beef"),
                "sha256 = \"beef\"",
                "is not a sha256 digest",
            ),
            (text.replace("world =", "wrld ="), "wrld", "unknown field"),
            (
                text.replace("oci://127.0.0.1:5000/plugins/timer:1.0", "oci://x/y"),
                "source = \"oci://x/y\"",
                "name a version",
            ),
            (
                text.replace("name = \"calc\"", "name = \"timer\""),
                "[[plugin]]",
                "locked twice",
            ),
        ];
        for (bad, place, hint) in cases {
            let error = Lock::parse(&bad).unwrap_err();
            let line = bad.lines().position(|l| l.contains(place)).unwrap() + 1;
            assert!(error.message.contains(hint), "{hint}: {error}");
            // Errors point at the line of the offending key (or a line of
            // its entry, for whole-entry problems).
            assert!(
                error.line == line || (hint == "locked twice" && error.line >= line),
                "{hint}: expected line {line}, got {error}"
            );
            assert!(error.column >= 1);
        }
    }

    #[test]
    fn every_environment_name_round_trips_and_others_are_refused() {
        let mut lock = sample();
        for name in ["donn\u{e9}es", "\u{65e5}\u{672c}", "_x", "\u{3a9}mega2"] {
            let mut plugin = lock.plugins[0].clone();
            plugin.name = name.into();
            lock.insert(plugin);
        }
        let parsed = Lock::parse(&lock.to_text()).unwrap();
        for name in ["donn\u{e9}es", "\u{65e5}\u{672c}", "_x", "\u{3a9}mega2"] {
            assert!(parsed.get(name).is_some(), "{name}");
        }
        let text = sample().to_text();
        for bad in ["my-timer", "2fast", "../up", "a b", ""] {
            let error =
                Lock::parse(&text.replace("name = \"calc\"", &format!("name = {}", quote(bad))))
                    .unwrap_err();
            assert!(
                error.message.contains("is not a plugin name"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn an_empty_lock() {
        let lock = Lock::parse("version = 1\n").unwrap();
        assert!(lock.plugins.is_empty());
        assert_eq!(Lock::parse(&lock.to_text()).unwrap(), lock);
    }

    #[test]
    fn insert_replaces_and_remove_removes() {
        let mut lock = sample();
        let mut timer = lock.get("timer").unwrap().clone();
        timer.size = 10;
        lock.insert(timer);
        assert_eq!(lock.plugins.len(), 2);
        assert_eq!(lock.get("timer").unwrap().size, 10);
        assert!(lock.remove("timer").is_some());
        assert!(lock.remove("timer").is_none());
    }
}
