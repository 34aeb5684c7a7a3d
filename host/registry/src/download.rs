//! Plugins from `https://` addresses and local files, and the streaming
//! check every download goes through (size bound, component preamble,
//! sha256 as the bytes arrive), under the transfer limits.

use crate::checked::{read_checked, read_file};
use crate::digest::Sha256;
use crate::error::Error;
use crate::layout;
use crate::lock::LockedPlugin;
use crate::reach::plain_http_allowed;
use crate::session::{BUNDLE_FILE_SUFFIX, Fetched, Pending, Session, SignatureCheck};
use crate::signature::{self, MAX_BUNDLE_SIZE};
use crate::source::UrlSource;
use crate::transfer;

impl Session {
    pub(crate) async fn fetch_url(
        &self,
        url: &UrlSource,
        expected: Sha256,
        check: Option<&SignatureCheck<'_>>,
        locked: Option<&LockedPlugin>,
        pending: &mut Pending,
    ) -> Result<Fetched, Error> {
        let what = url.url.clone();
        let component = match self.cached(&expected, self.options.max_component_size) {
            Some(bytes) => bytes,
            None => {
                let bytes = self
                    .download(
                        url,
                        &url.url,
                        self.options.max_component_size,
                        Some(expected),
                        true,
                    )
                    .await?
                    .ok_or_else(|| Error::NotFound {
                        what: what.clone(),
                        detail: "404".to_owned(),
                    })?;
                pending.add(expected, &bytes);
                bytes
            }
        };
        let signature = match check {
            None => None,
            Some(check) => {
                let bundle_url = format!("{}{BUNDLE_FILE_SUFFIX}", url.url);
                let known = locked.and_then(|l| l.signature);
                let cached = known.and_then(|d| self.cached(&d, MAX_BUNDLE_SIZE));
                let bundle = match cached {
                    Some(bundle) => bundle,
                    None => self
                        .download(url, &bundle_url, MAX_BUNDLE_SIZE, known, false)
                        .await?
                        .ok_or_else(|| signature::SignatureError::Missing {
                            what: what.clone(),
                            expected: check.signer.to_string(),
                            looked: format!("nothing at {bundle_url}"),
                        })?,
                };
                signature::verify(check.signer, check.trust, &expected, &bundle, &what)?;
                let digest = Sha256::of(&bundle);
                pending.add(digest, &bundle);
                Some(digest)
            }
        };
        Ok(Fetched::file(component, expected, signature))
    }

    /// GETs `address` (on `source`'s host); `Ok(None)` on 404.
    pub(crate) async fn download(
        &self,
        source: &UrlSource,
        address: &str,
        limit: u64,
        expected: Option<Sha256>,
        is_component: bool,
    ) -> Result<Option<Vec<u8>>, Error> {
        let host = source.host();
        let digest = expected.unwrap_or(source.sha256);
        self.online(address, Some(&digest))?;
        let authority = address
            .split_once("://")
            .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
        if source.is_plain_http()
            && !plain_http_allowed(&self.options.insecure_hosts, host, authority)
        {
            return Err(Error::Insecure {
                what: address.to_owned(),
                host: host.to_owned(),
            });
        }
        transfer::limited(self.limits(), address, host, |progress| async move {
            let response = transfer::send(self.http.get(address), &progress, address, host).await?;
            match response.status() {
                reqwest::StatusCode::NOT_FOUND => return Ok(None),
                status if !status.is_success() => {
                    let explanation = transfer::explanation(response, &progress).await;
                    let detail = if explanation.is_empty() {
                        status.to_string()
                    } else {
                        format!("{status}: {explanation}")
                    };
                    return Err(match status.as_u16() {
                        401 | 403 => Error::Unauthorized {
                            what: address.to_owned(),
                            registry: host.to_owned(),
                            detail,
                        },
                        _ => Error::Registry {
                            what: address.to_owned(),
                            detail,
                        },
                    });
                }
                _ => {}
            }
            if let Some(length) = response.content_length()
                && length > limit
            {
                return Err(Error::TooLarge {
                    what: address.to_owned(),
                    size: length,
                    limit,
                });
            }
            read_checked(
                transfer::body(response, &progress),
                address,
                host,
                None,
                limit,
                expected,
                is_component,
            )
            .await
            .map(Some)
        })
        .await
    }

    pub(crate) fn fetch_path(
        &self,
        path: &std::path::Path,
        locked: Option<&LockedPlugin>,
        check: Option<&SignatureCheck>,
        pending: &mut Pending,
    ) -> Result<Fetched, Error> {
        let what = path.display().to_string();
        let component = read_file(path, self.options.max_component_size, &what)?;
        layout::check_component_preamble(&component, &what)?;
        let sha256 = Sha256::of(&component);
        if let Some(locked) = locked
            && locked.sha256 != sha256
        {
            return Err(Error::digest(what, &locked.sha256, &sha256));
        }
        let signature = match check {
            None => None,
            Some(check) => {
                let mut bundle_path = path.as_os_str().to_owned();
                bundle_path.push(BUNDLE_FILE_SUFFIX);
                let bundle_path = std::path::PathBuf::from(bundle_path);
                if !bundle_path.exists() {
                    return Err(signature::SignatureError::Missing {
                        what,
                        expected: check.signer.to_string(),
                        looked: format!("no file {}", bundle_path.display()),
                    }
                    .into());
                }
                let bundle = read_file(&bundle_path, MAX_BUNDLE_SIZE, &what)?;
                signature::verify(check.signer, check.trust, &sha256, &bundle, &what)?;
                let digest = Sha256::of(&bundle);
                pending.add(digest, &bundle);
                Some(digest)
            }
        };
        Ok(Fetched::file(component, sha256, signature))
    }
}
