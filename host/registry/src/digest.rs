//! SHA-256 content digests: the one way this crate names a blob.
//!
//! OCI writes a digest as `sha256:<64 lowercase hex>`; envhost's pins and
//! lock write the bare hex. Both forms parse; `Display` writes the OCI form
//! and [`Sha256::hex`] the bare one.

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;

/// The SHA-256 of some bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256([u8; 32]);

impl Sha256 {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Sha256(sha2::Sha256::digest(bytes).into())
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hexadecimal digits (the form of a pin in
    /// `env/envhost.toml`).
    pub fn hex(&self) -> String {
        use fmt::Write;
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            let _ = write!(out, "{byte:02x}");
        }
        out
    }

    /// Parses 64 hexadecimal digits (either case).
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Sha256(out))
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a digest did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{text:?} is not a sha256 digest: write `sha256:` followed by 64 hexadecimal digits (or the 64 digits alone)"
)]
pub struct BadDigest {
    /// The text that did not parse.
    pub text: String,
}

impl FromStr for Sha256 {
    type Err = BadDigest;

    /// Accepts `sha256:<hex>` and bare `<hex>`; other algorithms are refused
    /// (every digest this crate checks is computed with SHA-256).
    fn from_str(text: &str) -> Result<Self, BadDigest> {
        let hex = text.strip_prefix("sha256:").unwrap_or(text);
        Sha256::from_hex(hex).ok_or_else(|| BadDigest {
            text: text.to_owned(),
        })
    }
}

/// Hashes bytes as they stream past and counts them.
#[derive(Default)]
pub(crate) struct Hasher {
    inner: sha2::Sha256,
    len: u64,
}

impl Hasher {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
        self.len += bytes.len() as u64;
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn finish(self) -> Sha256 {
        Sha256(self.inner.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_parse_and_print() {
        let digest = Sha256::of(b"hello");
        let hex = digest.hex();
        assert_eq!(
            hex,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(hex.parse::<Sha256>(), Ok(digest));
        assert_eq!(format!("sha256:{hex}").parse::<Sha256>(), Ok(digest));
        assert_eq!(hex.to_uppercase().parse::<Sha256>(), Ok(digest));
        assert_eq!(digest.to_string(), format!("sha256:{hex}"));
    }

    #[test]
    fn other_text_is_refused() {
        for bad in ["", "sha256:", "sha512:00", "sha256:zz", &"0".repeat(63)] {
            assert!(bad.parse::<Sha256>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn streaming_hash_matches() {
        let mut hasher = Hasher::default();
        hasher.update(b"hel");
        hasher.update(b"lo");
        assert_eq!(hasher.len(), 5);
        assert_eq!(hasher.finish(), Sha256::of(b"hello"));
    }
}
