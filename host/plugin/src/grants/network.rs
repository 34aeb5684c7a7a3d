//! Where a plugin may send HTTP requests: the operator's `allowed-hosts`
//! entries ([`AllowedHost`], Spin's syntax) and a request's destination
//! ([`Destination`]), both reduced to one canonical form so that matching
//! is plain equality.
//!
//! A grant is `scheme://host[:port]`: the scheme is required (`http` or
//! `https`), the port defaults to the scheme's (80, 443), the host is a
//! name, a dotted IPv4 address or a bracketed IPv6 address, and
//! `*.example.com` stands for every subdomain of `example.com` (not
//! `example.com` itself). Nothing else: no path, no user name, no `*`
//! scheme, host or port.
//!
//! Both sides are normalised the same way: lower case, one trailing dot
//! dropped (`api.github.com.` is `api.github.com` to DNS), IPv6 in its
//! shortest form, the port as a number. What cannot be read one way only is
//! refused: a user name (`evil@good`), an empty or zero port, empty labels,
//! characters DNS names do not have, and numeric hosts that are not a plain
//! dotted quad (`127.1`, `0x7f.0.0.1`, `2130706433`: C resolvers read them
//! as addresses, so a grant could not say which one it means). The host
//! connects to the canonical form it checked (`host::http`), so what was
//! checked is what is reached — up to DNS, which is not pinned: a granted
//! name that resolves to a private address is reached.
//!
//! This module only reads and compares text; it must not know HTTP
//! requests, the sandbox or the grants file.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a grant or a request's destination cannot be read one way only; the
/// message says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnreadableAddress(String);

impl From<String> for UnreadableAddress {
    fn from(message: String) -> Self {
        UnreadableAddress(message)
    }
}

impl From<&str> for UnreadableAddress {
    fn from(message: &str) -> Self {
        UnreadableAddress(message.to_owned())
    }
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn parse(text: &str) -> Option<Scheme> {
        match text.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A host in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A DNS name: lower case, no trailing dot.
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// Where a request goes, in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Destination {
    pub scheme: Scheme,
    pub host: Host,
    pub port: u16,
}

impl Destination {
    /// The destination of a request with `scheme` (`None`: `https`, as
    /// wasi:http's default) and `authority` as the plugin set them.
    pub fn of_request(
        scheme: Option<&str>,
        authority: &str,
    ) -> Result<Destination, UnreadableAddress> {
        let scheme = match scheme {
            None => Scheme::Https,
            Some(text) => Scheme::parse(text).ok_or_else(|| {
                format!("the scheme {text:?} is not supported (only http and https are)")
            })?,
        };
        if authority.is_empty() {
            return Err("the request names no host".to_owned().into());
        }
        let (host, port) = split_authority(authority)?;
        let port = match port {
            None => scheme.default_port(),
            Some(port) => parse_port(port)?,
        };
        Ok(Destination {
            scheme,
            host: parse_host(host)?,
            port,
        })
    }

    /// The authority to connect to and to send as `Host`: the host, and
    /// the port unless it is the scheme's.
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The grant that allows exactly this destination.
    pub fn grant(&self) -> AllowedHost {
        AllowedHost {
            scheme: self.scheme,
            host: HostPattern::Exact(self.host.clone()),
            port: self.port,
        }
    }
}

impl fmt::Display for Destination {
    /// With the port always written (`https://api.github.com:443`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

/// The host part of a grant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    Exact(Host),
    /// `*.example.com`: every name ending in `.example.com` (the string
    /// held is `example.com`).
    Subdomains(String),
}

/// One `allowed-hosts` entry, in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllowedHost {
    pub scheme: Scheme,
    pub host: HostPattern,
    pub port: u16,
}

impl AllowedHost {
    /// Reads an entry as the operator (or a plugin's request) wrote it;
    /// the error says what to write instead.
    pub fn parse(text: &str) -> Result<AllowedHost, UnreadableAddress> {
        let example = "write scheme://host[:port], e.g. \"https://api.github.com\", \"http://127.0.0.1:8080\" or \"https://*.example.com\"";
        if text.trim().is_empty() {
            return Err(format!("an empty entry; {example}").into());
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{text:?} has spaces or control characters; {example}").into());
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(format!(
                "{text:?} has no scheme; write \"https://{text}\" (or \"http://{text}\")"
            )
            .into());
        };
        let scheme =
            match Scheme::parse(scheme) {
                Some(scheme) => scheme,
                None if scheme == "*" => {
                    return Err(format!(
                    "{text:?}: the scheme must be written, http or https (list both to allow both)"
                ).into());
                }
                None => {
                    return Err(format!(
                    "{text:?}: the scheme {scheme:?} is not supported; plugins speak http and https"
                ).into());
                }
            };
        // A lone trailing slash is how URLs are often copied; it is no path.
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#']) {
            return Err(format!(
                "{text:?} has a path; a grant covers every path of a host: write only scheme://host[:port]"
            ).into());
        }
        if authority.is_empty() {
            return Err(format!("{text:?} has no host; {example}").into());
        }
        let (host, port) = split_authority(authority).map_err(|why| format!("{text:?}: {why}"))?;
        let port = match port {
            None => scheme.default_port(),
            Some("*") => {
                return Err(
                    format!("{text:?}: a port of `*` is not supported; list each port").into(),
                );
            }
            Some(port) => parse_port(port).map_err(|why| format!("{text:?}: {why}"))?,
        };
        let host = if host == "*" {
            return Err(format!(
                "{text:?}: a grant for every host is not supported; list the hosts, or their subdomains as \"{}://*.example.com\"",
                scheme.as_str()
            ).into());
        } else if let Some(parent) = host.strip_prefix("*.") {
            match parse_host(parent).map_err(|why| format!("{text:?}: {why}"))? {
                Host::Name(name) => HostPattern::Subdomains(name),
                Host::Ip(_) => {
                    return Err(format!(
                        "{text:?}: `*.` stands for subdomains of a name, not of an address"
                    )
                    .into());
                }
            }
        } else if host.contains('*') {
            return Err(format!(
                "{text:?}: `*` may only start a host, as `*.` (every subdomain), e.g. \"https://*.example.com\""
            ).into());
        } else {
            HostPattern::Exact(parse_host(host).map_err(|why| format!("{text:?}: {why}"))?)
        };
        Ok(AllowedHost { scheme, host, port })
    }

    /// Whether a request to `destination` is allowed by this entry.
    pub fn allows(&self, destination: &Destination) -> bool {
        self.scheme == destination.scheme
            && self.port == destination.port
            && match (&self.host, &destination.host) {
                (HostPattern::Exact(host), wanted) => host == wanted,
                (HostPattern::Subdomains(parent), Host::Name(name)) => is_subdomain(name, parent),
                (HostPattern::Subdomains(_), Host::Ip(_)) => false,
            }
    }

    /// Whether everything `other` allows, this entry allows too.
    pub fn covers(&self, other: &AllowedHost) -> bool {
        self.scheme == other.scheme
            && self.port == other.port
            && match (&self.host, &other.host) {
                (HostPattern::Exact(a), HostPattern::Exact(b)) => a == b,
                (HostPattern::Exact(_), HostPattern::Subdomains(_)) => false,
                (HostPattern::Subdomains(parent), HostPattern::Exact(Host::Name(name))) => {
                    is_subdomain(name, parent)
                }
                (HostPattern::Subdomains(_), HostPattern::Exact(Host::Ip(_))) => false,
                (HostPattern::Subdomains(parent), HostPattern::Subdomains(child)) => {
                    child == parent || is_subdomain(child, parent)
                }
            }
    }
}

impl fmt::Display for AllowedHost {
    /// As the operator writes it: the port only when it is not the
    /// scheme's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        match &self.host {
            HostPattern::Exact(host) => write!(f, "{host}")?,
            HostPattern::Subdomains(parent) => write!(f, "*.{parent}")?,
        }
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

fn is_subdomain(name: &str, parent: &str) -> bool {
    name.len() > parent.len() + 1
        && name.ends_with(parent)
        && name.as_bytes()[name.len() - parent.len() - 1] == b'.'
}

/// `host[:port]` or `[v6][:port]`, refusing a user name.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), UnreadableAddress> {
    if authority.contains('@') {
        return Err(
            "a user name or password in the host (`user@host`) is never allowed; send credentials in a header"
                .to_owned().into(),
        );
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Err(format!("{authority:?} opens `[` without closing it").into());
        };
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(|| {
                format!("{authority:?} has {after:?} after the address; write [address]:port")
            })?),
        };
        // Brackets back on, so that `parse_host` knows it is an address.
        let host = &authority[..inside.len() + 2];
        return Ok((host, port));
    }
    match authority.rsplit_once(':') {
        Some((host, _)) if host.contains(':') => Err(format!(
            "{authority:?}: an IPv6 address must be in brackets, e.g. [::1]:8080"
        )
        .into()),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((authority, None)),
    }
}

fn parse_port(port: &str) -> Result<u16, UnreadableAddress> {
    if port.is_empty() {
        return Err(
            "an empty port after `:`; write the number or leave out the `:`"
                .to_owned()
                .into(),
        );
    }
    // Digits only: `u16::from_str` would also take a `+`.
    match port.parse::<u16>() {
        Ok(number) if number > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(number),
        _ => Err(format!("{port:?} is not a port (1 to 65535)").into()),
    }
}

/// A host in canonical form, or why it cannot be read one way only.
fn parse_host(host: &str) -> Result<Host, UnreadableAddress> {
    if let Some(inside) = host.strip_prefix('[') {
        let inside = inside.strip_suffix(']').unwrap_or(inside);
        return inside
            .parse::<Ipv6Addr>()
            .map(|ip| Host::Ip(IpAddr::V6(ip)))
            .map_err(|_| {
                format!("[{inside}] is not an IPv6 address (zone names are not supported)").into()
            });
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    let lower = host.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() {
        return Err("the host is empty".to_owned().into());
    }
    if !name.is_ascii() {
        return Err(
            format!("{host:?} is not ASCII; write an international name in its xn-- form").into(),
        );
    }
    if name.len() > 253 {
        return Err("the host name is longer than DNS allows (253 characters)"
            .to_owned()
            .into());
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(format!("{host:?} has an empty label (`..`, or a leading dot)").into());
        }
        if label.len() > 63 {
            return Err(format!("{host:?} has a label longer than 63 characters").into());
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "{host:?} has characters a host name does not have (letters, digits, `-`, `_` and dots only)"
            ).into());
        }
    }
    // What C resolvers (inet_aton) would read as an address: `127.1`,
    // `0x7f.1`, `2130706433`, `010.0.0.1` (octal).
    let numeric = |label: &&str| {
        label.bytes().all(|b| b.is_ascii_digit())
            || label
                .strip_prefix("0x")
                .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if labels.last().is_some_and(numeric) {
        return Err(format!(
            "{host:?} is neither a host name nor a dotted IPv4 address (a.b.c.d, without leading zeros)"
        ).into());
    }
    Ok(Host::Name(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(text: &str) -> AllowedHost {
        AllowedHost::parse(text).unwrap_or_else(|why| panic!("{text}: {why}"))
    }

    fn to(scheme: Option<&str>, authority: &str) -> Result<Destination, UnreadableAddress> {
        Destination::of_request(scheme, authority)
    }

    #[test]
    fn grants_read_in_canonical_form() {
        let cases = [
            ("https://api.github.com", "https://api.github.com"),
            ("HTTPS://API.GitHub.COM.", "https://api.github.com"),
            ("https://api.github.com/", "https://api.github.com"),
            ("https://api.github.com:443", "https://api.github.com"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://[0:0:0:0:0:0:0:1]:80", "http://[::1]"),
            ("https://*.Example.com", "https://*.example.com"),
            ("https://*.example.com:8443", "https://*.example.com:8443"),
            ("http://localhost:03000", "http://localhost:3000"),
        ];
        for (written, canonical) in cases {
            assert_eq!(grant(written).to_string(), canonical, "{written}");
        }
    }

    #[test]
    fn malformed_grants_say_what_to_write() {
        let cases = [
            (
                "api.github.com",
                "has no scheme; write \"https://api.github.com\"",
            ),
            ("ftp://example.com", "is not supported"),
            ("*://example.com", "the scheme must be written"),
            ("https://example.com/repos", "has a path"),
            ("https://example.com?x", "has a path"),
            ("https://user@example.com", "user name"),
            ("https://example.com:*", "port of `*`"),
            ("https://example.com:0", "not a port"),
            ("https://example.com:65536", "not a port"),
            ("https://example.com:", "empty port"),
            ("https://example.com:http", "not a port"),
            ("https://*", "every host is not supported"),
            ("https://a.*.example.com", "`*` may only start a host"),
            ("https://*example.com", "`*` may only start a host"),
            ("https://*.127.0.0.1", "not of an address"),
            ("https://127.1", "neither a host name nor a dotted IPv4"),
            (
                "https://0x7f.0.0.1",
                "neither a host name nor a dotted IPv4",
            ),
            (
                "https://2130706433",
                "neither a host name nor a dotted IPv4",
            ),
            ("https://010.0.0.1", "neither a host name nor a dotted IPv4"),
            ("https://a..b", "empty label"),
            ("https://.example.com", "empty label"),
            ("https://ex ample.com", "spaces"),
            (
                "https://exa%6dple.com",
                "characters a host name does not have",
            ),
            ("https://bücher.de", "xn--"),
            ("https://::1", "must be in brackets"),
            ("https://[::1", "without closing"),
            ("https://[fe80::1%eth0]", "not an IPv6 address"),
            ("https://[::1]x", "after the address"),
            ("", "an empty entry"),
        ];
        for (written, expected) in cases {
            let why = AllowedHost::parse(written).expect_err(written).to_string();
            assert!(why.contains(expected), "{written:?}: {why}");
        }
    }

    #[test]
    fn destinations_are_normalised_or_refused() {
        let d = to(Some("HTTP"), "Example.COM.:0080").unwrap();
        assert_eq!(d.to_string(), "http://example.com:80");
        assert_eq!(d.authority(), "example.com");
        assert_eq!(
            to(None, "example.com").unwrap().to_string(),
            "https://example.com:443"
        );
        assert_eq!(
            to(Some("http"), "[::1]:8080").unwrap().authority(),
            "[::1]:8080"
        );
        for (scheme, authority) in [
            (Some("http"), "user:pw@example.com"),
            (Some("http"), "example.com:"),
            (Some("http"), "example.com:99999"),
            (Some("http"), "example.com:-1"),
            (Some("http"), "127.1"),
            (Some("http"), "0177.0.0.1"),
            (Some("http"), "2130706433:80"),
            (Some("http"), ""),
            (Some("http"), "a..b"),
            (Some("http"), "example.com.."),
            (Some("http"), "*.example.com"),
            (Some("ftp"), "example.com"),
            (Some("http"), "evil.com\0.example.com"),
            (Some("http"), "evil.com#.example.com"),
        ] {
            assert!(to(scheme, authority).is_err(), "{scheme:?} {authority:?}");
        }
    }

    #[test]
    fn grants_allow_exactly_their_destinations() {
        let exact = grant("https://api.github.com");
        let wild = grant("https://*.example.com");
        let local = grant("http://127.0.0.1:8080");
        let six = grant("http://[::1]:8080");
        let allows = |g: &AllowedHost, scheme: &str, authority: &str| {
            g.allows(&to(Some(scheme), authority).unwrap())
        };
        assert!(allows(&exact, "https", "api.github.com"));
        assert!(allows(&exact, "https", "API.GITHUB.COM.:443"));
        assert!(!allows(&exact, "http", "api.github.com"), "scheme");
        assert!(!allows(&exact, "https", "api.github.com:8443"), "port");
        assert!(!allows(&exact, "https", "github.com"));
        assert!(!allows(&exact, "https", "evil.api.github.com"));
        assert!(!allows(&exact, "https", "api.github.com.evil.com"));
        assert!(allows(&wild, "https", "a.example.com"));
        assert!(allows(&wild, "https", "a.b.example.com"));
        assert!(!allows(&wild, "https", "example.com"), "not the apex");
        assert!(!allows(&wild, "https", "badexample.com"));
        assert!(!allows(&wild, "https", "example.com.evil.org"));
        assert!(allows(&local, "http", "127.0.0.1:8080"));
        assert!(!allows(&local, "http", "127.0.0.1:8081"));
        assert!(!allows(&local, "http", "127.0.0.2:8080"));
        assert!(!allows(&local, "http", "localhost:8080"));
        assert!(!allows(&local, "http", "[::ffff:127.0.0.1]:8080"));
        assert!(allows(&six, "http", "[0::1]:8080"));
        assert!(!allows(&six, "http", "127.0.0.1:8080"));
    }

    #[test]
    fn wider_grants_cover_narrower_requests() {
        let wild = grant("https://*.example.com");
        assert!(wild.covers(&grant("https://a.example.com")));
        assert!(wild.covers(&grant("https://*.a.example.com")));
        assert!(wild.covers(&grant("https://*.example.com")));
        assert!(!wild.covers(&grant("https://example.com")));
        assert!(!wild.covers(&grant("http://a.example.com")));
        assert!(!grant("https://a.example.com").covers(&wild));
        assert!(grant("https://x.org:443").covers(&grant("https://x.org")));
    }
}
