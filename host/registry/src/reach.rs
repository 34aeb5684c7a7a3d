//! How a host is reached: plain HTTP for loopback hosts (`localhost`,
//! 127.0.0.0/8, `::1`) and the hosts the operator lists as insecure,
//! HTTPS for everything else. Decisions only: nothing here sends anything,
//! and what may be sent where with credentials is `auth`'s to decide.

use crate::source::is_loopback_host;

/// `host` of a registry's `host:port` (an IPv6 address without brackets).
pub(crate) fn host_of_registry(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// Whether plain HTTP may be used for `host` (no port) / `authority`
/// (`host:port`).
pub(crate) fn plain_http_allowed(insecure: &[String], host: &str, authority: &str) -> bool {
    is_loopback_host(host) || insecure.iter().any(|h| h == host || h == authority)
}

/// Whether plain HTTP may be used for `url`'s host.
pub(crate) fn plain_http_allowed_for(insecure: &[String], url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or("");
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    plain_http_allowed(insecure, host.trim_matches(['[', ']']), &authority)
}

/// The scheme a registry (`host[:port]`) is reached with.
pub(crate) fn registry_scheme(insecure: &[String], registry: &str) -> &'static str {
    if plain_http_allowed(insecure, host_of_registry(registry), registry) {
        "http"
    } else {
        "https"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_listed_hosts_are_plain_http() {
        let insecure = vec!["10.0.0.5".to_owned(), "build.lan:5000".to_owned()];
        assert_eq!(registry_scheme(&insecure, "127.0.0.1:5000"), "http");
        assert_eq!(registry_scheme(&insecure, "[::1]:5000"), "http");
        assert_eq!(registry_scheme(&insecure, "localhost"), "http");
        assert_eq!(registry_scheme(&insecure, "10.0.0.5:443"), "http");
        assert_eq!(registry_scheme(&insecure, "build.lan:5000"), "http");
        assert_eq!(registry_scheme(&insecure, "build.lan:5001"), "https");
        assert_eq!(registry_scheme(&insecure, "ghcr.io"), "https");
        let url = reqwest::Url::parse("http://build.lan:5000/x").unwrap();
        assert!(plain_http_allowed_for(&insecure, &url));
        let url = reqwest::Url::parse("http://[::1]:9/x").unwrap();
        assert!(plain_http_allowed_for(&insecure, &url));
        let url = reqwest::Url::parse("http://build.lan/x").unwrap();
        assert!(!plain_http_allowed_for(&insecure, &url));
    }
}
