//! Registry credentials, from where people already keep them: a token file
//! the operator names (`--registry-token-file`), else docker's
//! `config.json` (`$DOCKER_CONFIG/config.json`, else
//! `~/.docker/config.json`, including the credential helpers it names),
//! else none. This module only reads; envhost never writes a credential
//! anywhere.

use std::path::{Path, PathBuf};

use oci_client::secrets::RegistryAuth;

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

impl Credentials {
    /// The authentication to use for `registry` (`host[:port]`).
    pub(crate) fn auth_for(&self, registry: &str) -> Result<RegistryAuth, Error> {
        match self {
            Credentials::TokenFile(path) => token_file(path),
            Credentials::DockerConfig { dir } => docker_config(dir.as_deref(), registry),
        }
    }
}

fn token_file(path: &Path) -> Result<RegistryAuth, Error> {
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
        Some((user, password)) => RegistryAuth::Basic(user.to_owned(), password.to_owned()),
        None => RegistryAuth::Bearer(token.to_owned()),
    })
}

fn docker_config(dir: Option<&Path>, registry: &str) -> Result<RegistryAuth, Error> {
    let Some(dir) = dir.map(Path::to_owned).or_else(|| {
        std::env::var_os("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))
    }) else {
        return Ok(RegistryAuth::Anonymous);
    };
    let path = dir.join("config.json");
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryAuth::Anonymous),
        Err(e) => return Err(Error::io("reading docker's credentials", path, e)),
    };
    use docker_credential::{CredentialRetrievalError as E, DockerCredential};
    match docker_credential::get_credential_from_reader(std::io::BufReader::new(file), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(DockerCredential::IdentityToken(_)) => Err(Error::Credentials {
            path,
            problem: format!(
                "the entry for {registry} is an identity token (an OAuth refresh token), which envhost does not exchange; pass --registry-token-file with USER:TOKEN instead"
            ),
        }),
        Err(E::NoCredentialConfigured) => Ok(RegistryAuth::Anonymous),
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
        assert_eq!(
            token_file(&path).unwrap(),
            RegistryAuth::Basic("me".into(), "s3cret".into())
        );
        std::fs::write(&path, "abc.def\n").unwrap();
        assert_eq!(
            token_file(&path).unwrap(),
            RegistryAuth::Bearer("abc.def".into())
        );
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
