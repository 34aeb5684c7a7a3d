//! Who is sent a registry's credentials, and the token exchange of the
//! distribution specification.
//!
//! A registry says how it wants to be authenticated by answering
//! `GET /v2/` with `401` and a `WWW-Authenticate` challenge: `Basic` (send
//! the credentials with each request) or `Bearer realm="URL",service=…`
//! (ask the token service at URL for a token for one repository, then send
//! the token). Docker and oci-client send the registry's credentials to
//! whatever realm the registry names. Here they go only:
//!
//! - to the registry's own host, and to a realm on that host (any port) or
//!   on a host the operator names with `--registry-auth-host`;
//! - over HTTPS, or over plain HTTP to a loopback address: never in clear
//!   across a network, `--insecure-registry` or not. A token got with them
//!   stands in for them and goes to the registry under the same rule.
//!
//! A challenge that would send them elsewhere is refused with a sentence
//! naming both hosts and the flag, not answered anonymously: a registry
//! that names a stranger's realm is misconfigured or hostile, and an
//! anonymous retry would turn both into a puzzling "not found". With no
//! credentials held, any realm is asked for an anonymous token, as docker
//! does (nothing secret goes with it). A credential is never sent before a
//! challenge asks for it, and a token answer is read against
//! [`MAX_TOKEN_ANSWER`] as it arrives.
//!
//! This module knows challenges, credentials and tokens; it does not know
//! manifests, blobs or layouts.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use http::HeaderValue;
use reqwest::Url;

use crate::checked::read_checked;
use crate::credentials::{Credential, Credentials};
use crate::error::Error;
use crate::reach::{plain_http_allowed_for, registry_scheme};
use crate::source::is_loopback_host;
use crate::transfer::{self, Limits};

/// The largest token answer read (real ones are a few KiB).
pub(crate) const MAX_TOKEN_ANSWER: u64 = 1 << 20;

/// What a token is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// Reading a repository.
    Pull,
    /// Reading and writing it.
    Push,
}

impl Access {
    fn actions(self) -> &'static str {
        match self {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        }
    }
}

/// How a registry asked to be authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Challenge {
    /// It did not: `GET /v2/` was not refused (or named no scheme).
    Open,
    /// HTTP basic authentication.
    Basic,
    /// A token from the service at `realm`.
    Bearer {
        realm: String,
        service: Option<String>,
    },
}

/// Why a credential may not go to an address.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// Another host than the registry's, not allowed by the operator.
    OtherHost,
    /// Plain HTTP to a host that is not loopback.
    InClear,
}

/// The settings the authentication follows.
#[derive(Debug, Clone)]
pub(crate) struct AuthSettings {
    /// Where credentials come from.
    pub(crate) credentials: Credentials,
    /// Hosts reached over plain HTTP although they are not loopback.
    pub(crate) insecure_hosts: Vec<String>,
    /// Hosts that may receive credentials as an auth realm.
    pub(crate) auth_hosts: Vec<String>,
}

/// Answers registries' challenges for one client, remembering each
/// registry's challenge, credential and tokens for the client's life.
pub(crate) struct Authenticator {
    http: reqwest::Client,
    limits: Limits,
    settings: AuthSettings,
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    challenges: HashMap<String, Challenge>,
    credentials: HashMap<String, Option<Credential>>,
    authorizations: HashMap<(String, String, Access), HeaderValue>,
}

impl Authenticator {
    pub(crate) fn new(http: reqwest::Client, limits: Limits, settings: AuthSettings) -> Self {
        Authenticator {
            http,
            limits,
            settings,
            known: Mutex::new(Known::default()),
        }
    }

    /// The `Authorization` header for `access` to `repository` in
    /// `registry` (`host[:port]`), to send to the registry's own address
    /// only; `None` when the registry asks for none, or asks for a
    /// credential that is not held.
    pub(crate) async fn authorization(
        &self,
        registry: &str,
        repository: &str,
        access: Access,
        what: &str,
    ) -> Result<Option<HeaderValue>, Error> {
        let key = (registry.to_owned(), repository.to_owned(), access);
        if let Some(value) = self.known().authorizations.get(&key) {
            return Ok(Some(value.clone()));
        }
        let registry_url = registry_url(&self.settings.insecure_hosts, registry, what)?;
        let challenge = self.challenge(registry, &registry_url, what).await?;
        let credential = self.credential(registry)?;
        let value = match (challenge, credential) {
            (Challenge::Open, _) | (Challenge::Basic, None) => return Ok(None),
            (Challenge::Basic, Some(credential)) => {
                self.may_receive(registry, &registry_url, &registry_url, what)?;
                header(&credential, what)?
            }
            (Challenge::Bearer { .. }, Some(token @ Credential::Bearer(_))) => {
                self.may_receive(registry, &registry_url, &registry_url, what)?;
                header(&token, what)?
            }
            (Challenge::Bearer { realm, service }, credential) => {
                let realm = self.realm_url(&realm, what)?;
                if credential.is_some() {
                    self.may_receive(registry, &registry_url, &realm, what)?;
                    self.may_receive(registry, &registry_url, &registry_url, what)?;
                }
                if realm.scheme() == "http"
                    && !plain_http_allowed_for(&self.settings.insecure_hosts, &realm)
                {
                    return Err(Error::Insecure {
                        what: format!("{what}: the auth realm {realm}"),
                        host: realm.host_str().unwrap_or("").to_owned(),
                    });
                }
                let token = self
                    .token(
                        registry,
                        &realm,
                        service.as_deref(),
                        repository,
                        access,
                        credential.as_ref(),
                        what,
                    )
                    .await?;
                header(&Credential::Bearer(token), what)?
            }
        };
        self.known().authorizations.insert(key, value.clone());
        Ok(Some(value))
    }

    fn known(&self) -> MutexGuard<'_, Known> {
        // The map holds no invariant a panic elsewhere could break.
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn credential(&self, registry: &str) -> Result<Option<Credential>, Error> {
        if let Some(credential) = self.known().credentials.get(registry) {
            return Ok(credential.clone());
        }
        let credential = self.settings.credentials.for_registry(registry)?;
        self.known()
            .credentials
            .insert(registry.to_owned(), credential.clone());
        Ok(credential)
    }

    /// Asks the registry how it authenticates (`GET /v2/`), once.
    async fn challenge(
        &self,
        registry: &str,
        registry_url: &Url,
        what: &str,
    ) -> Result<Challenge, Error> {
        if let Some(challenge) = self.known().challenges.get(registry) {
            return Ok(challenge.clone());
        }
        let url = format!("{registry_url}v2/");
        let challenge = transfer::limited(self.limits, what, registry, |progress| async move {
            let response = transfer::send(self.http.get(&url), &progress, what, registry).await?;
            // The body is never read: dropping it closes the connection.
            Ok(if response.status() == reqwest::StatusCode::UNAUTHORIZED {
                parse_challenge(response.headers())
            } else {
                Challenge::Open
            })
        })
        .await?;
        self.known()
            .challenges
            .insert(registry.to_owned(), challenge.clone());
        Ok(challenge)
    }

    fn realm_url(&self, realm: &str, what: &str) -> Result<Url, Error> {
        match Url::parse(realm) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
                Ok(url)
            }
            _ => Err(Error::Registry {
                what: what.to_owned(),
                detail: format!(
                    "the registry names {realm:?} as its auth realm, which is not an http(s) address"
                ),
            }),
        }
    }

    fn may_receive(
        &self,
        registry: &str,
        registry_url: &Url,
        target: &Url,
        what: &str,
    ) -> Result<(), Error> {
        let host = target.host_str().unwrap_or("").to_owned();
        match credentials_may_go(registry_url, target, &self.settings.auth_hosts) {
            Ok(()) => Ok(()),
            Err(Refusal::OtherHost) => Err(Error::CredentialsElsewhere {
                what: what.to_owned(),
                registry: registry.to_owned(),
                realm: target.to_string(),
                realm_host: host,
            }),
            Err(Refusal::InClear) => Err(Error::CredentialsInClear {
                what: what.to_owned(),
                registry: registry.to_owned(),
                host,
            }),
        }
    }

    /// Asks the token service at `realm` for a token, with `credential`
    /// when there is one (the caller has checked it may go there).
    #[allow(clippy::too_many_arguments)]
    async fn token(
        &self,
        registry: &str,
        realm: &Url,
        service: Option<&str>,
        repository: &str,
        access: Access,
        credential: Option<&Credential>,
        what: &str,
    ) -> Result<String, Error> {
        let mut url = realm.clone();
        url.query_pairs_mut().append_pair(
            "scope",
            &format!("repository:{repository}:{}", access.actions()),
        );
        if let Some(service) = service {
            url.query_pairs_mut().append_pair("service", service);
        }
        let label = format!("{what}: the token answer of {realm}");
        let host = realm.host_str().unwrap_or("");
        let label = label.as_str();
        transfer::limited(self.limits, label, host, |progress| async move {
            let mut request = self
                .http
                .get(url)
                .header(http::header::ACCEPT, "application/json");
            match credential {
                Some(Credential::Basic { user, password }) => {
                    request = request.basic_auth(user, Some(password));
                }
                Some(Credential::Bearer(token)) => request = request.bearer_auth(token),
                None => {}
            }
            let response = transfer::send(request, &progress, label, host).await?;
            let status = response.status();
            if !status.is_success() {
                let explanation = transfer::explanation(response, &progress).await;
                return Err(Error::Unauthorized {
                    what: what.to_owned(),
                    registry: registry.to_owned(),
                    detail: with_explanation(
                        format!("the token service at {realm} answered {status}"),
                        &explanation,
                    ),
                });
            }
            if let Some(length) = response.content_length()
                && length > MAX_TOKEN_ANSWER
            {
                return Err(Error::TooLarge {
                    what: label.to_owned(),
                    size: length,
                    limit: MAX_TOKEN_ANSWER,
                });
            }
            let bytes = read_checked(
                transfer::body(response, &progress),
                label,
                host,
                None,
                MAX_TOKEN_ANSWER,
                None,
                false,
            )
            .await?;
            parse_token(&bytes).ok_or_else(|| Error::Registry {
                what: label.to_owned(),
                detail: "it holds no token (a JSON object with \"token\" or \"access_token\")"
                    .to_owned(),
            })
        })
        .await
    }
}

/// `scheme://registry/`.
fn registry_url(insecure: &[String], registry: &str, what: &str) -> Result<Url, Error> {
    let scheme = registry_scheme(insecure, registry);
    Url::parse(&format!("{scheme}://{registry}/")).map_err(|e| Error::Registry {
        what: what.to_owned(),
        detail: format!("{registry} is not a registry address ({e})"),
    })
}

/// The rule of this module: a credential for the registry at
/// `registry_url` may go to `target` when `target` is on the registry's
/// host or on a host in `auth_hosts` (`host` or `host:port`), and is
/// reached over HTTPS or is loopback.
fn credentials_may_go(
    registry_url: &Url,
    target: &Url,
    auth_hosts: &[String],
) -> Result<(), Refusal> {
    let host = target.host_str().unwrap_or("");
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let authority = match target.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let allowed = auth_hosts.iter().any(|allowed| {
        let allowed = allowed.trim();
        allowed.eq_ignore_ascii_case(host)
            || allowed.eq_ignore_ascii_case(bare_host)
            || allowed.eq_ignore_ascii_case(&authority)
    });
    if target.host() != registry_url.host() && !allowed {
        return Err(Refusal::OtherHost);
    }
    if target.scheme() != "https" && !is_loopback_host(bare_host) {
        return Err(Refusal::InClear);
    }
    Ok(())
}

/// The challenge in a `401`'s `WWW-Authenticate` headers: a bearer
/// challenge with a realm if there is one, else basic.
fn parse_challenge(headers: &http::HeaderMap) -> Challenge {
    let mut basic = false;
    for value in headers.get_all(http::header::WWW_AUTHENTICATE) {
        let Ok(text) = value.to_str() else {
            continue;
        };
        let Ok(challenges) = http_auth::parse_challenges(text) else {
            continue;
        };
        for challenge in challenges {
            if challenge.scheme.eq_ignore_ascii_case("bearer") {
                let param = |name: &str| {
                    challenge
                        .params
                        .iter()
                        .find(|(key, _)| key.eq_ignore_ascii_case(name))
                        .map(|(_, value)| value.to_unescaped())
                };
                if let Some(realm) = param("realm") {
                    return Challenge::Bearer {
                        realm,
                        service: param("service"),
                    };
                }
            } else if challenge.scheme.eq_ignore_ascii_case("basic") {
                basic = true;
            }
        }
    }
    if basic {
        Challenge::Basic
    } else {
        Challenge::Open
    }
}

fn parse_token(bytes: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(bytes).ok()?;
    answer
        .token
        .or(answer.access_token)
        .filter(|token| !token.is_empty())
}

/// The header value for a credential, marked sensitive (never logged or
/// indexed by HTTP/2's header compression).
fn header(credential: &Credential, what: &str) -> Result<HeaderValue, Error> {
    let text = match credential {
        Credential::Basic { user, password } => {
            use base64::Engine as _;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        }
        Credential::Bearer(token) => format!("Bearer {token}"),
    };
    let mut value = HeaderValue::from_str(&text).map_err(|_| Error::Registry {
        what: what.to_owned(),
        detail: "the credential or token holds characters an HTTP header cannot carry".to_owned(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

fn with_explanation(detail: String, explanation: &str) -> String {
    if explanation.is_empty() {
        detail
    } else {
        format!("{detail}: {explanation}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn credentials_stay_with_their_registry() {
        let registry = url("https://registry.example:5000/");
        let none: &[String] = &[];
        // The registry itself, and a realm on its host on any port.
        for target in [
            "https://registry.example:5000/v2/",
            "https://registry.example/token",
            "https://REGISTRY.example:8443/token",
        ] {
            assert_eq!(credentials_may_go(&registry, &url(target), none), Ok(()));
        }
        // Another host, a subdomain, a look-alike.
        for target in [
            "https://auth.example/token",
            "https://auth.registry.example/token",
            "https://registry.example.evil/token",
        ] {
            assert_eq!(
                credentials_may_go(&registry, &url(target), none),
                Err(Refusal::OtherHost),
                "{target}"
            );
        }
        let allowed = ["auth.example".to_owned(), "tokens.example:8443".to_owned()];
        assert_eq!(
            credentials_may_go(&registry, &url("https://auth.example/token"), &allowed),
            Ok(())
        );
        assert_eq!(
            credentials_may_go(&registry, &url("https://tokens.example:8443/t"), &allowed),
            Ok(())
        );
        assert_eq!(
            credentials_may_go(&registry, &url("https://tokens.example/t"), &allowed),
            Err(Refusal::OtherHost)
        );
        // Plain HTTP only to loopback, allowed host or not.
        assert_eq!(
            credentials_may_go(&registry, &url("http://registry.example/token"), none),
            Err(Refusal::InClear)
        );
        assert_eq!(
            credentials_may_go(&registry, &url("http://auth.example/token"), &allowed),
            Err(Refusal::InClear)
        );
        let loopback = url("http://127.0.0.1:5000/");
        assert_eq!(
            credentials_may_go(&loopback, &url("http://127.0.0.1:9/token"), none),
            Ok(())
        );
        // 127.0.0.2 is loopback, but another host.
        assert_eq!(
            credentials_may_go(&loopback, &url("http://127.0.0.2:9/token"), none),
            Err(Refusal::OtherHost)
        );
        let ipv6 = url("http://[::1]:5000/");
        assert_eq!(
            credentials_may_go(&ipv6, &url("http://[::1]:9/token"), none),
            Ok(())
        );
        let insecure = url("http://10.1.2.3:5000/");
        assert_eq!(
            credentials_may_go(&insecure, &insecure, none),
            Err(Refusal::InClear)
        );
    }

    #[test]
    fn challenges() {
        let headers = |values: &[&str]| {
            let mut map = http::HeaderMap::new();
            for value in values {
                map.append(
                    http::header::WWW_AUTHENTICATE,
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            map
        };
        assert_eq!(
            parse_challenge(&headers(&[
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a:pull""#
            ])),
            Challenge::Bearer {
                realm: "https://auth.example/token".to_owned(),
                service: Some("registry.example".to_owned()),
            }
        );
        assert_eq!(
            parse_challenge(&headers(&[r#"Basic realm="Registry Realm""#])),
            Challenge::Basic
        );
        assert_eq!(
            parse_challenge(&headers(&[
                r#"Basic realm="x""#,
                r#"bearer REALM="https://a/t""#
            ])),
            Challenge::Bearer {
                realm: "https://a/t".to_owned(),
                service: None,
            }
        );
        assert_eq!(parse_challenge(&headers(&["Negotiate"])), Challenge::Open);
        assert_eq!(parse_challenge(&headers(&["Bearer"])), Challenge::Open);
        assert_eq!(parse_challenge(&headers(&[])), Challenge::Open);
    }

    #[test]
    fn token_answers() {
        assert_eq!(parse_token(br#"{"token":"a"}"#).as_deref(), Some("a"));
        assert_eq!(
            parse_token(br#"{"access_token":"b","expires_in":300}"#).as_deref(),
            Some("b")
        );
        assert_eq!(parse_token(br#"{"token":""}"#), None);
        assert_eq!(parse_token(b"   "), None);
        let error = header(&Credential::Bearer("a\nb".to_owned()), "x").unwrap_err();
        assert!(error.to_string().contains("HTTP header"), "{error}");
        assert!(
            header(&Credential::Bearer("t".to_owned()), "x")
                .unwrap()
                .is_sensitive()
        );
    }
}
