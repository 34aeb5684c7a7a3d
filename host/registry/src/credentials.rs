//! Registry credentials, from where people already keep them: a token file
//! the operator names (`--registry-token-file`), else docker's
//! `config.json` (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`, including the credential helpers it names),
//! else none. This module only reads; envhost never writes a credential
//! anywhere. Where a credential may be sent is `auth`'s to decide.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// Where credentials come from.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// docker's `config.json` in `dir` (`None`: `$DOCKER_CONFIG`, else
    /// `~/.docker`), when there is one; anonymous otherwise.
    DockerConfig {
        /// The folder holding `config.json`.
        dir: Option<PathBuf>,
    },
    /// A file holding `USER:TOKEN` (HTTP basic authentication, the form
    /// GitHub's and most registries' access tokens take) or a bare token
    /// (sent as a bearer token).
    TokenFile(PathBuf),
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials::DockerConfig { dir: None }
    }
}

/// One registry's credential. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Credential {
    /// A user and a password or access token (HTTP basic authentication).
    Basic {
        /// The user name.
        user: String,
        /// The password or access token.
        password: String,
    },
    /// A token sent as it is (`Authorization: Bearer TOKEN`).
    Bearer(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Basic { user, .. } => write!(f, "Basic({user}:…)"),
            Credential::Bearer(_) => write!(f, "Bearer(…)"),
        }
    }
}

impl Credentials {
    /// The credential for `registry` (`host[:port]`), if there is one.
    pub(crate) fn for_registry(&self, registry: &str) -> Result<Option<Credential>, Error> {
        match self {
            Credentials::TokenFile(path) => token_file(path).map(Some),
            Credentials::DockerConfig { dir } => docker_config(dir.as_deref(), registry),
        }
    }
}

fn token_file(path: &Path) -> Result<Credential, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io("reading the registry token file", path, e))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Error::Credentials {
            path: path.to_owned(),
            problem: "the file is empty; write USER:TOKEN or the token alone on its first line"
                .to_owned(),
        });
    }
    if token.lines().count() > 1 {
        return Err(Error::Credentials {
            path: path.to_owned(),
            problem:
                "the file has more than one line; write USER:TOKEN or the token alone on one line"
                    .to_owned(),
        });
    }
    Ok(match token.split_once(':') {
        Some((user, password)) => Credential::Basic {
            user: user.to_owned(),
            password: password.to_owned(),
        },
        None => Credential::Bearer(token.to_owned()),
    })
}

fn docker_config(dir: Option<&Path>, registry: &str) -> Result<Option<Credential>, Error> {
    let Some(dir) = dir.map(Path::to_owned).or_else(|| {
        std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))
    }) else {
        return Ok(None);
    };
    let path = dir.join("config.json");
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("reading docker's credentials", path, e)),
    };
    use docker_credential::{CredentialRetrievalError as E, DockerCredential};
    match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(Some(Credential::Basic { user, password }))
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(Error::Credentials {
            path,
            problem: format!(
                "the entry for {registry} is an identity token (an OAuth refresh token), which envhost does not exchange; pass --registry-token-file with USER:TOKEN instead"
            ),
        }),
        Err(E::NoCredentialConfigured) => Ok(None),
        Err(e) => Err(Error::Credentials {
            path,
            problem: format!(
                "{e}; fix the file (`docker login {registry}` rewrites it) or pass --registry-token-file"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "me:s3cret\n").unwrap();
        let basic = token_file(&path).unwrap();
        assert_eq!(
            basic,
            Credential::Basic {
                user: "me".into(),
                password: "s3cret".into()
            }
        );
        assert!(!format!("{basic:?}").contains("s3cret"));
        std::fs::write(&path, "abc.def\n").unwrap();
        let bearer = token_file(&path).unwrap();
        assert_eq!(bearer, Credential::Bearer("abc.def".into()));
        assert!(!format!("{bearer:?}").contains("abc.def"));
        std::fs::write(&path, "\n").unwrap();
        assert!(token_file(&path).unwrap_err().to_string().contains("empty"));
        std::fs::write(&path, "a\nb\n").unwrap();
        assert!(
            token_file(&path)
                .unwrap_err()
                .to_string()
                .contains("more than one line")
        );
        let missing = token_file(&dir.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("reading the registry token file"),
            "{missing}"
        );
    }
}
