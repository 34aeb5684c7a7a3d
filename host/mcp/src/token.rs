//! The bearer token every HTTP request must carry: read from the
//! operator's file, or made fresh (written to that file when it does not
//! exist yet, or printed on stderr), and compared in constant time.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::ServeError;

/// Shortest token accepted from a file: guessing it must stay hopeless.
const SHORTEST: usize = 16;

/// The token, and how the operator learns it.
pub(crate) struct BearerToken {
    token: String,
}

impl BearerToken {
    /// The token in `file` (made there when the file does not exist), or a
    /// fresh one printed on stderr when there is no file.
    pub(crate) fn obtain(file: Option<&Path>) -> Result<BearerToken, ServeError> {
        let Some(file) = file else {
            let token = fresh()?;
            eprintln!(
                "envhost: the bearer token for this server (send `Authorization: Bearer TOKEN`): {token}"
            );
            return Ok(BearerToken { token });
        };
        match fs::read_to_string(file) {
            Ok(text) => {
                let token = text.trim().to_owned();
                if token.len() < SHORTEST || token.chars().any(|c| !c.is_ascii_graphic()) {
                    return Err(ServeError::Token(format!(
                        "the token file {} must hold one token of at least {SHORTEST} printable ASCII characters; delete it and envhost writes a fresh one",
                        file.display()
                    )));
                }
                warn_if_readable_by_others(file);
                Ok(BearerToken { token })
            }
            Err(err) if err.kind() == ErrorKind::NotFound => {
                let token = fresh()?;
                write_new(file, &token).map_err(|err| {
                    ServeError::Token(format!(
                        "cannot write a new token to {}: {err}",
                        file.display()
                    ))
                })?;
                eprintln!(
                    "envhost: wrote a new bearer token to {} (readable by you only)",
                    file.display()
                );
                Ok(BearerToken { token })
            }
            Err(err) => Err(ServeError::Token(format!(
                "cannot read the token file {}: {err}",
                file.display()
            ))),
        }
    }

    /// Whether `authorization` (the header's value) is `Bearer` and this
    /// token. The comparison takes as long whatever the token sent.
    pub(crate) fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((scheme, sent)) = split_scheme(value) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            return false;
        }
        let expected = self.token.as_bytes();
        let differences = expected
            .iter()
            .zip(sent.iter().cycle())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        differences == 0 && sent.len() == expected.len()
    }
}

fn split_scheme(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = value.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    let sent = rest.trim_ascii();
    (!sent.is_empty()).then_some((scheme, sent))
}

/// 32 random bytes, in hexadecimal.
fn fresh() -> Result<String, ServeError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|err| ServeError::Token(format!("cannot make a random token: {err}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_new(file: &Path, token: &str) -> std::io::Result<()> {
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)?;
    writeln!(out, "{token}")
}

fn warn_if_readable_by_others(file: &Path) {
    if let Ok(meta) = fs::metadata(file)
        && meta.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "envhost: warning: the token file {} can be read by other users; `chmod 600` it",
            file.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> BearerToken {
        BearerToken {
            token: text.to_owned(),
        }
    }

    #[test]
    fn only_the_bearer_scheme_with_the_exact_token_passes() {
        let t = token("0123456789abcdef");
        assert!(t.accepts(Some(b"Bearer 0123456789abcdef")));
        assert!(t.accepts(Some(b"bearer  0123456789abcdef ")));
        for bad in [
            &b"Bearer 0123456789abcde"[..],
            b"Bearer 0123456789abcdef0",
            b"Bearer 0123456789abcdeF",
            b"Basic 0123456789abcdef",
            b"Bearer",
            b"Bearer ",
            b"0123456789abcdef",
        ] {
            assert!(!t.accepts(Some(bad)), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!t.accepts(None));
    }

    #[test]
    fn a_missing_file_gets_a_fresh_private_token_and_a_short_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let made = BearerToken::obtain(Some(&file)).unwrap();
        assert_eq!(made.token.len(), 64);
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let again = BearerToken::obtain(Some(&file)).unwrap();
        assert_eq!(again.token, made.token);
        fs::write(&file, "short\n").unwrap();
        let Err(ServeError::Token(message)) = BearerToken::obtain(Some(&file)) else {
            panic!("a short token must be refused");
        };
        assert!(message.contains("at least 16"), "{message}");
    }
}
