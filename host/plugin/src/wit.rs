//! The WIT contract as the host sees it: generated bindings, and the names
//! in them that messages quote, one module per version of `wit/` the host
//! accepts.
//!
//! [`since_v0_1_0`] (frozen) and [`since_v0_2_0`], which is `latest`: the
//! rest of the host speaks the latest types, and each older module adapts
//! its types to them, so that the host accepts plugins built against any
//! of them (the layout of Zed's extension host,
//! `wasm_host/wit/since_vX.rs`). A component's version is the one of the
//! `environment` interface it exports (Spin's way): [`Version::of_export`].
//! A new incompatible version gets its own `since_vX_Y_Z.rs`, becomes
//! `latest`, and the one before gains the conversions. A compatible one
//! (0.2.1: an optional export more) needs no module of its own: the
//! latest module generates from it, and wasmtime's semver-aware names find
//! an older plugin's exports (`…@0.2.0`) under the newer names.
//!
//! These modules generate and name; they must not call into plugins or
//! import anything else of this crate (`with:` maps WIT resources to types
//! of other crates).

pub(crate) mod since_v0_1_0;
pub(crate) mod since_v0_2_0;

pub(crate) use since_v0_2_0 as latest;

/// The package every version's interfaces belong to.
const PACKAGE: &str = "envhost:environment";

/// The interface every plugin exports, without its version.
pub const ENVIRONMENT_INTERFACE: &str = "envhost:environment/environment";

/// The functions of the `environment` interface, in the WIT's order (the
/// same in every version).
pub const EXPORTED_FUNCTIONS: [&str; 4] = ["describe", "handle-command", "get-screen", "shutdown"];

/// A version of the contract the host accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V0_1_0,
    V0_2_0,
    /// 0.2.0 and the optional `screen-changes` export.
    V0_2_1,
}

/// A version of the `environment` interface this host does not accept, as
/// the component wrote it (`(no version)` when it wrote none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnsupportedVersion(String);

impl From<&str> for UnsupportedVersion {
    fn from(written: &str) -> Self {
        UnsupportedVersion(written.to_owned())
    }
}

impl Version {
    /// Every version the host accepts, oldest first.
    pub const ALL: [Version; 3] = [Version::V0_1_0, Version::V0_2_0, Version::V0_2_1];

    /// The version authors target.
    pub const LATEST: Version = Version::V0_2_1;

    /// `0.1.0`, `0.2.0`, `0.2.1`.
    pub fn number(self) -> &'static str {
        match self {
            Version::V0_1_0 => since_v0_1_0::VERSION,
            Version::V0_2_0 => since_v0_2_0::VERSION_0_2_0,
            Version::V0_2_1 => since_v0_2_0::VERSION,
        }
    }

    /// The version's WIT file, as the repository ships it.
    pub fn wit_source(self) -> &'static str {
        match self {
            Version::V0_1_0 => since_v0_1_0::WIT_SOURCE,
            Version::V0_2_0 => since_v0_2_0::WIT_SOURCE_0_2_0,
            Version::V0_2_1 => since_v0_2_0::WIT_SOURCE,
        }
    }

    /// Whether the version has the optional `state` export (0.2.0 on).
    pub fn has_state_interface(self) -> bool {
        self != Version::V0_1_0
    }

    /// The version's folder in the repository, for messages.
    pub fn wit_folder(self) -> String {
        format!("wit/v{}", self.number())
    }

    /// One of the version's interfaces (`logging`) or worlds (`plugin`) by
    /// its full name: `envhost:environment/logging@0.2.0`.
    pub fn name(self, item: &str) -> String {
        format!("{PACKAGE}/{item}@{}", self.number())
    }

    /// `envhost:environment/environment@0.2.0`.
    pub fn exported_interface(self) -> String {
        self.name("environment")
    }

    /// The world a plugin with these optional exports targets.
    pub fn world(self, capabilities: bool, state: bool) -> String {
        let world = match (capabilities, state) {
            (false, false) => "plugin",
            (true, false) => "plugin-with-capabilities",
            (false, true) => "plugin-with-state",
            (true, true) => "full-plugin",
        };
        self.name(world)
    }

    /// The version of the contract a component's export name belongs to,
    /// if it is an `environment` interface: `Ok` for a version the host
    /// accepts (any 0.1.x or 0.2.x, as semver and wasmtime's linker treat
    /// them; a 0.2.x newer than 0.2.1 is taken for 0.2.1, whose names
    /// wasmtime finds its exports under), `Err` with the version written
    /// for another one.
    pub fn of_export(name: &str) -> Option<Result<Version, UnsupportedVersion>> {
        let version = name.strip_prefix(ENVIRONMENT_INTERFACE)?;
        if version.is_empty() {
            return Some(Err("(no version)".into()));
        }
        let version = version.strip_prefix('@')?;
        let mut parts = version.split('.');
        Some(match (parts.next(), parts.next(), parts.next()) {
            (Some("0"), Some("1"), _) => Ok(Version::V0_1_0),
            (Some("0"), Some("2"), Some("0")) => Ok(Version::V0_2_0),
            (Some("0"), Some("2"), _) => Ok(Version::V0_2_1),
            _ => Err(version.into()),
        })
    }

    /// The accepted exports, for messages: `` `envhost:environment/environment@0.1.0` or `…@0.2.0` or `…@0.2.1` ``.
    pub fn accepted() -> String {
        Version::ALL
            .iter()
            .map(|v| format!("`{}`", v.exported_interface()))
            .collect::<Vec<_>>()
            .join(" or ")
    }

    /// The declaration of `function` in this version's WIT, e.g.
    /// `handle-command: func(command: string) -> command-response`.
    pub fn expected_signature(self, function: &str) -> Option<&'static str> {
        let prefix = format!("{function}: func");
        self.wit_source()
            .lines()
            .map(str::trim)
            .find(|line| line.starts_with(&prefix))
            .map(|line| line.trim_end_matches(';'))
    }

    /// The fields of a record of this version's WIT, as `name: type` pairs
    /// joined, e.g. `output: string, success: bool` for `command-response`.
    pub fn record_fields(self, record: &str) -> Option<String> {
        let header = format!("record {record} {{");
        let mut lines = self.wit_source().lines().map(str::trim);
        lines.find(|line| *line == header)?;
        let fields: Vec<&str> = lines
            .take_while(|line| *line != "}")
            .filter(|line| !line.starts_with("//") && !line.is_empty())
            .map(|line| line.trim_end_matches(','))
            .collect();
        Some(fields.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// componentize-py copies WIT doc comments into Python docstrings
    /// without escaping them, so a backslash sequence in a comment (say
    /// `\u{3}`) makes every Python plugin's build fail with a SyntaxError.
    #[test]
    fn wit_doc_comments_have_no_backslashes() {
        for version in Version::ALL {
            for (number, line) in version.wit_source().lines().enumerate() {
                assert!(
                    !(line.trim_start().starts_with("//") && line.contains('\\')),
                    "{} line {}: a backslash in a doc comment breaks componentize-py: {line}",
                    version.wit_folder(),
                    number + 1
                );
            }
        }
    }

    /// The sha256 of a released contract's text, in hex.
    fn sha256_hex(text: &str) -> String {
        use sha2::{Digest, Sha256};
        Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The released contract never changes: plugins built against it must
    /// load in every later host. Its text is pinned by its sha256.
    #[test]
    fn the_released_0_1_0_contract_never_changes() {
        assert_eq!(
            sha256_hex(since_v0_1_0::WIT_SOURCE),
            "b0e67cd0db9546482fc943f9e54cf73009c605dc97549808d7d011f7e3b89bc1",
            "wit/v0.1.0/environment.wit changed; it is frozen (add to a new version instead)"
        );
    }

    /// 0.2.0 is released too: 0.2.1 is its additions, in a folder of its
    /// own, so a plugin built against 0.2.0 keeps building and loading.
    #[test]
    fn the_released_0_2_0_contract_never_changes() {
        assert_eq!(
            sha256_hex(since_v0_2_0::WIT_SOURCE_0_2_0),
            "cb4ddb2dac5cf9172b9969225243805d6ccc1c00d7f8db0c68b778cf23b8f82b",
            "wit/v0.2.0/environment.wit changed; it is frozen (add to wit/v0.2.1 or a new version instead)"
        );
    }

    /// 0.2.1 is 0.2.0 and additions: every line of 0.2.0's interfaces and
    /// worlds is still there.
    #[test]
    fn the_0_2_1_contract_only_adds_to_0_2_0() {
        let newer: Vec<&str> = Version::V0_2_1
            .wit_source()
            .lines()
            .map(str::trim)
            .collect();
        for line in Version::V0_2_0.wit_source().lines().map(str::trim) {
            if line.is_empty() || line.starts_with("//") || line.starts_with("package ") {
                continue;
            }
            assert!(newer.contains(&line), "0.2.1 lost a line of 0.2.0: {line}");
        }
        assert_eq!(
            Version::V0_2_1.expected_signature("screen-changes"),
            Some("screen-changes: func() -> when")
        );
        assert_eq!(Version::V0_2_0.expected_signature("screen-changes"), None);
    }

    #[test]
    fn quotes_signatures_and_records_from_each_version() {
        for version in Version::ALL {
            assert_eq!(
                version.expected_signature("handle-command"),
                Some("handle-command: func(command: string) -> command-response")
            );
            assert_eq!(
                version.expected_signature("shutdown"),
                Some("shutdown: func()")
            );
            assert_eq!(version.expected_signature("nope"), None);
            assert_eq!(
                version.record_fields("command-response").as_deref(),
                Some("output: string, success: bool")
            );
            assert_eq!(
                version.record_fields("screen-section").as_deref(),
                Some("content: string, max-lines: u32")
            );
            for function in EXPORTED_FUNCTIONS {
                assert!(version.expected_signature(function).is_some(), "{function}");
            }
            assert!(version.wit_source().contains(&format!(
                "package envhost:environment@{};",
                version.number()
            )));
        }
        for version in [Version::V0_2_0, Version::V0_2_1] {
            assert_eq!(
                version.expected_signature("snapshot"),
                Some("snapshot: func() -> list<u8>")
            );
        }
        assert_eq!(Version::V0_1_0.expected_signature("snapshot"), None);
    }

    #[test]
    fn tells_versions_apart_by_the_exported_interface() {
        let of = Version::of_export;
        assert_eq!(
            of("envhost:environment/environment@0.1.0"),
            Some(Ok(Version::V0_1_0))
        );
        assert_eq!(
            of("envhost:environment/environment@0.1.3"),
            Some(Ok(Version::V0_1_0))
        );
        assert_eq!(
            of("envhost:environment/environment@0.2.0"),
            Some(Ok(Version::V0_2_0))
        );
        assert_eq!(
            of("envhost:environment/environment@0.2.1"),
            Some(Ok(Version::V0_2_1))
        );
        assert_eq!(
            of("envhost:environment/environment@0.2.7"),
            Some(Ok(Version::V0_2_1))
        );
        assert_eq!(
            of("envhost:environment/environment@0.3.0"),
            Some(Err("0.3.0".into()))
        );
        assert_eq!(
            of("envhost:environment/environment@1.0.0"),
            Some(Err("1.0.0".into()))
        );
        assert_eq!(
            of("envhost:environment/environment"),
            Some(Err("(no version)".into()))
        );
        assert_eq!(of("envhost:environment/capabilities@0.2.0"), None);
        assert_eq!(of("example:greeter/greet@1.0.0"), None);
        assert_eq!(
            Version::V0_2_0.world(true, true),
            "envhost:environment/full-plugin@0.2.0"
        );
        assert_eq!(
            Version::V0_2_1.world(true, true),
            "envhost:environment/full-plugin@0.2.1"
        );
        assert_eq!(
            Version::V0_1_0.world(false, false),
            "envhost:environment/plugin@0.1.0"
        );
    }
}
