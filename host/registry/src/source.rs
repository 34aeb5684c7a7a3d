//! Where a plugin comes from, as an operator writes it on the command line
//! and in the lock file: `oci://host[:port]/repo:tag`,
//! `oci://host/repo@sha256:…`, `https://…/x.wasm#sha256=…` or a local path.
//!
//! Parsing only: nothing here touches the network or the file system.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use crate::digest::Sha256;

/// A plugin's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An artifact in an OCI registry.
    Oci(OciReference),
    /// A `.wasm` file on a web server, with the sha256 it must have.
    Url(UrlSource),
    /// A `.wasm` file on this machine.
    Path(PathBuf),
}

/// `oci://registry/repository[:tag][@sha256:…]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    /// `host` or `host:port` (IPv6 in brackets).
    pub registry: String,
    /// `path/to/repository`.
    pub repository: String,
    /// The tag, if one was named.
    pub tag: Option<String>,
    /// The manifest digest, if one was named.
    pub digest: Option<Sha256>,
}

/// `https://…#sha256=…` (or `http://` for a loopback or insecure host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlSource {
    /// The address without the `#sha256=` fragment.
    pub url: String,
    /// The sha256 the file must have.
    pub sha256: Sha256,
}

/// Why a source did not parse; the message says how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_text:?} is not a plugin source: {problem}")]
pub struct BadSource {
    /// The text given.
    pub source_text: String,
    /// What is wrong, and how to write it.
    pub problem: String,
}

/// What is wrong with one part of a source, and how to write it (the
/// `problem` of a [`BadSource`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct SourceProblem(String);

impl From<String> for SourceProblem {
    fn from(problem: String) -> Self {
        SourceProblem(problem)
    }
}

const FORMS: &str = "write oci://HOST[:PORT]/REPOSITORY:TAG, oci://HOST/REPOSITORY@sha256:DIGEST, https://HOST/PATH.wasm#sha256=DIGEST or a path to a .wasm file";

impl FromStr for Source {
    type Err = BadSource;

    fn from_str(text: &str) -> Result<Self, BadSource> {
        let bad = |problem: String| BadSource {
            source_text: text.to_owned(),
            problem,
        };
        if text.trim().is_empty() {
            return Err(bad(format!("it is empty; {FORMS}")));
        }
        if let Some(rest) = text.strip_prefix("oci://") {
            return OciReference::parse(rest)
                .map(Source::Oci)
                .map_err(|problem| bad(problem.0));
        }
        if text.starts_with("https://") || text.starts_with("http://") {
            return UrlSource::parse(text)
                .map(Source::Url)
                .map_err(|problem| bad(problem.0));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(bad(format!(
                "`{scheme}://` is not a source this host fetches from; {FORMS}"
            )));
        }
        Ok(Source::Path(PathBuf::from(text)))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Oci(reference) => write!(f, "{reference}"),
            Source::Url(url) => write!(f, "{}#sha256={}", url.url, url.sha256.hex()),
            Source::Path(path) => write!(f, "{}", path.display()),
        }
    }
}

impl OciReference {
    fn parse(rest: &str) -> Result<Self, SourceProblem> {
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(format!("it names no repository after the registry; {FORMS}").into());
        };
        check_registry(registry)?;
        let (path, digest) = match path.split_once('@') {
            Some((path, digest)) => {
                let digest = digest.strip_prefix("sha256:").ok_or_else(|| {
                    format!(
                        "the digest {digest:?} must start with `sha256:` (the only algorithm supported)"
                    )
                })?;
                let digest = Sha256::from_hex(digest).ok_or_else(|| {
                    format!(
                        "the digest after `@sha256:` must be 64 hexadecimal digits, not {digest:?}"
                    )
                })?;
                (path, Some(digest))
            }
            None => (path, None),
        };
        // A tag follows the last `:` after the last `/`.
        let last_segment_start = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last_segment_start..].rfind(':') {
            Some(i) => {
                let split = last_segment_start + i;
                (&path[..split], Some(&path[split + 1..]))
            }
            None => (path, None),
        };
        check_repository(repository)?;
        if let Some(tag) = tag {
            check_tag(tag)?;
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!(
                "name a version: add a tag (oci://{registry}/{repository}:1.0) or a digest (oci://{registry}/{repository}@sha256:…)"
            ).into());
        }
        Ok(OciReference {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            tag: tag.map(str::to_owned),
            digest,
        })
    }

    /// The same artifact pinned to `digest` (the tag kept for display).
    pub fn with_digest(&self, digest: Sha256) -> Self {
        OciReference {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// The registry's host name without the port (or brackets).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl UrlSource {
    fn parse(text: &str) -> Result<Self, SourceProblem> {
        let (url, fragment) = match text.split_once('#') {
            Some((url, fragment)) => (url, Some(fragment)),
            None => (text, None),
        };
        let Some(fragment) = fragment else {
            return Err(format!(
                "a download needs the sha256 it must have: append #sha256=<64 hex digits> ({url}#sha256=…; `sha256sum FILE` prints it)"
            ).into());
        };
        let Some(hex) = fragment.strip_prefix("sha256=") else {
            return Err(format!(
                "the part after `#` must be sha256=<64 hex digits>, not {fragment:?}"
            )
            .into());
        };
        let sha256 = Sha256::from_hex(hex).ok_or_else(|| {
            format!("the part after `#sha256=` must be 64 hexadecimal digits, not {hex:?}")
        })?;
        let after_scheme = url.split_once("://").map_or("", |(_, rest)| rest);
        let authority = after_scheme.split('/').next().unwrap_or("");
        if authority.is_empty() {
            return Err(format!("the address names no host; {FORMS}").into());
        }
        if authority.contains('@') {
            return Err(
                "the address carries a user name or password; give credentials with --registry-token-file instead, so they are not written into the lock file".to_owned().into(),
            );
        }
        check_registry(authority)?;
        Ok(UrlSource {
            url: url.to_owned(),
            sha256,
        })
    }

    /// The host name without the port (or brackets).
    pub fn host(&self) -> &str {
        let after_scheme = self.url.split_once("://").map_or("", |(_, rest)| rest);
        host_of(after_scheme.split('/').next().unwrap_or(""))
    }

    /// Whether the address is plain `http://`.
    pub fn is_plain_http(&self) -> bool {
        self.url.starts_with("http://")
    }
}

/// `host` of `host:port`, `[::1]` of `[::1]:port` without brackets.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// Whether `host` (a name or an address, no port) is this machine:
/// `localhost`, 127.0.0.0/8 or ::1. Plain HTTP is allowed to these only.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn check_registry(registry: &str) -> Result<(), SourceProblem> {
    let host = host_of(registry);
    let port = if registry.starts_with('[') {
        registry.split_once("]:").map(|(_, port)| port)
    } else {
        registry.split_once(':').map(|(_, port)| port)
    };
    let host_ok = !host.is_empty()
        && (host.parse::<IpAddr>().is_ok()
            || host.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }));
    if !host_ok {
        return Err(
            format!("{registry:?} is not a registry host (write HOST or HOST:PORT)").into(),
        );
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(format!("{port:?} is not a port number").into());
    }
    Ok(())
}

/// The distribution specification's repository grammar: lowercase
/// alphanumeric path components joined by `.`, `_`, `__` or dashes.
fn check_repository(repository: &str) -> Result<(), SourceProblem> {
    let component_ok = |component: &str| {
        let bytes = component.as_bytes();
        !bytes.is_empty()
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b"._-".contains(b))
    };
    if repository.is_empty() || !repository.split('/').all(component_ok) {
        return Err(format!(
            "{repository:?} is not a repository name: use lowercase letters, digits and . _ - between slashes"
        ).into());
    }
    Ok(())
}

/// Tags: up to 128 of `[A-Za-z0-9_.-]`, not starting with `.` or `-`.
fn check_tag(tag: &str) -> Result<(), SourceProblem> {
    let bytes = tag.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(b));
    if !ok {
        return Err(format!(
            "{tag:?} is not a tag: up to 128 letters, digits, _ . -, not starting with . or -"
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    fn oci(text: &str) -> OciReference {
        match text.parse::<Source>() {
            Ok(Source::Oci(reference)) => reference,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn oci_forms() {
        let tagged = oci("oci://127.0.0.1:5000/plugins/timer:1.0");
        assert_eq!(tagged.registry, "127.0.0.1:5000");
        assert_eq!(tagged.repository, "plugins/timer");
        assert_eq!(tagged.tag.as_deref(), Some("1.0"));
        assert_eq!(tagged.digest, None);
        assert_eq!(tagged.host(), "127.0.0.1");

        let pinned = oci(&format!("oci://ghcr.io/acme/timer@sha256:{HEX}"));
        assert_eq!(pinned.registry, "ghcr.io");
        assert_eq!(pinned.tag, None);
        assert_eq!(pinned.digest.map(|d| d.hex()), Some(HEX.to_owned()));

        let both = oci(&format!("oci://localhost:5000/a/b/c:v2@sha256:{HEX}"));
        assert_eq!(both.repository, "a/b/c");
        assert_eq!(both.tag.as_deref(), Some("v2"));
        assert!(both.digest.is_some());

        let ipv6 = oci("oci://[::1]:5000/timer:latest");
        assert_eq!(ipv6.host(), "::1");

        for text in [
            "oci://127.0.0.1:5000/plugins/timer:1.0",
            &format!("oci://ghcr.io/acme/timer:v1@sha256:{HEX}"),
        ] {
            assert_eq!(text.parse::<Source>().unwrap().to_string(), *text);
        }
    }

    #[test]
    fn oci_mistakes_say_how_to_write_it() {
        for (text, hint) in [
            ("oci://ghcr.io/acme/timer", "name a version"),
            ("oci://ghcr.io", "names no repository"),
            ("oci://ghcr.io/Acme/timer:1", "not a repository name"),
            ("oci://ghcr.io/acme/timer:-x", "not a tag"),
            (
                "oci://ghcr.io/acme/timer@sha512:00",
                "must start with `sha256:`",
            ),
            (
                "oci://ghcr.io/acme/timer@sha256:00",
                "64 hexadecimal digits",
            ),
            ("oci://gh cr.io/acme/timer:1", "not a registry host"),
            ("oci://ghcr.io:http/acme/timer:1", "not a port number"),
        ] {
            let error = text.parse::<Source>().unwrap_err().to_string();
            assert!(error.contains(hint), "{text}: {error}");
        }
    }

    #[test]
    fn urls_need_a_digest() {
        let source: Source = format!("https://example.com/x.wasm#sha256={HEX}")
            .parse()
            .unwrap();
        let Source::Url(url) = &source else {
            panic!("{source:?}")
        };
        assert_eq!(url.url, "https://example.com/x.wasm");
        assert_eq!(url.host(), "example.com");
        assert!(!url.is_plain_http());
        assert_eq!(
            source.to_string(),
            format!("https://example.com/x.wasm#sha256={HEX}")
        );

        for (text, hint) in [
            ("https://example.com/x.wasm", "append #sha256="),
            ("https://example.com/x.wasm#md5=00", "must be sha256="),
            (
                "https://example.com/x.wasm#sha256=00",
                "64 hexadecimal digits",
            ),
            (
                &format!("https://u:p@example.com/x.wasm#sha256={HEX}"),
                "--registry-token-file",
            ),
            (
                "ftp://example.com/x.wasm",
                "not a source this host fetches from",
            ),
        ] {
            let error = text.parse::<Source>().unwrap_err().to_string();
            assert!(error.contains(hint), "{text}: {error}");
        }
    }

    #[test]
    fn anything_else_is_a_path() {
        assert_eq!(
            "plugins/timer.wasm".parse::<Source>(),
            Ok(Source::Path(PathBuf::from("plugins/timer.wasm")))
        );
    }

    #[test]
    fn loopback_hosts() {
        for host in ["localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "localhost.example.com", "::2"] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
