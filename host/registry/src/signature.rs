//! Signatures over a component's own sha256 (the OCI layer digest), so a
//! signature holds however the component is packaged: the same `.wasm`
//! pushed again, with another config or to another registry, keeps it.
//!
//! A signature is a Sigstore bundle (`application/vnd.dev.sigstore.bundle.v0.3+json`)
//! whose message signature (or in-toto statement) covers the component's
//! bytes — the file `cosign sign-blob --bundle` writes for the `.wasm`. The
//! operator names who must have signed:
//!
//! - a public key (PEM, ECDSA P-256 as `cosign generate-key-pair` and
//!   `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`
//!   make): the signature must verify with that key. When the bundle
//!   carries transparency-log entries they are verified too, against the
//!   trust root; a bundle without them (`envhost publish --sign-key`, which
//!   works offline) is checked against the key alone.
//! - a keyless identity and issuer (Sigstore's Fulcio certificates): the
//!   certificate must chain to the trust root's Fulcio authority, carry
//!   the identity (its subject alternative name) and the OIDC issuer, and
//!   its use must be proven by the transparency log entry in the bundle
//!   (`sigstore-verify` does every step, offline).
//!
//! The trust root is pinned: the public-good Sigstore root compiled into
//! this build (from `sigstore-trust-root`), or a `trusted_root.json` the
//! operator names. Nothing here touches the network.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64_STANDARD;
use sigstore_verify::crypto::{KeyAlgorithm, KeyPair, VerificationKey};
use sigstore_verify::trust_root::{SIGSTORE_PRODUCTION_TRUSTED_ROOT, TrustedRoot};
use sigstore_verify::types::bundle::{
    MessageDigest, MessageSignature, PublicKeyIdentifier, SignatureContent, VerificationMaterial,
    VerificationMaterialContent,
};
use sigstore_verify::types::{Bundle, DerPublicKey, HashAlgorithm, MediaType, Sha256Hash};
use sigstore_verify::{PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

use crate::digest::Sha256;

/// The media type of a signature bundle, as a blob in a registry.
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// Bundles larger than this are refused (a keyless bundle with a
/// certificate and an inclusion proof is a few KiB).
pub const MAX_BUNDLE_SIZE: u64 = 1 << 20;

/// Who must have signed a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signer {
    /// The holder of this public key. `label` says where the key came
    /// from (a path, as the operator wrote it) for messages and the lock.
    Key {
        /// Where the key came from.
        label: String,
        /// The key, PEM.
        pem: String,
    },
    /// A Sigstore keyless identity: the certificate's subject alternative
    /// name (an e-mail address or a workflow URI) and the OIDC issuer that
    /// vouched for it.
    Keyless {
        /// The certificate's subject alternative name.
        identity: String,
        /// The OIDC issuer.
        issuer: String,
    },
}

impl Signer {
    /// Reads a PEM public key file.
    pub fn key_file(path: &Path) -> Result<Self, SignatureError> {
        let pem = std::fs::read_to_string(path).map_err(|e| SignatureError::Key {
            path: path.to_owned(),
            problem: format!("cannot read it: {e}"),
        })?;
        let signer = Signer::Key {
            label: path.display().to_string(),
            pem,
        };
        signer.public_key()?;
        Ok(signer)
    }

    fn public_key(&self) -> Result<DerPublicKey, SignatureError> {
        let Signer::Key { label, pem } = self else {
            unreachable!("only keys have a public key")
        };
        let key = DerPublicKey::from_pem(pem).map_err(|e| SignatureError::Key {
            path: PathBuf::from(label),
            problem: format!(
                "it is not a PEM public key ({e}); write the `-----BEGIN PUBLIC KEY-----` file `cosign generate-key-pair` or `openssl pkey -pubout` makes"
            ),
        })?;
        VerificationKey::from_spki(&key).map_err(|e| SignatureError::Key {
            path: PathBuf::from(label),
            problem: format!("it is not a key envhost can check signatures with ({e})"),
        })?;
        Ok(key)
    }
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signer::Key { label, .. } => write!(f, "the key {label}"),
            Signer::Keyless { identity, issuer } => write!(f, "{identity} (issuer {issuer})"),
        }
    }
}

/// The Sigstore trust root signatures are checked against.
pub struct TrustRoot {
    root: TrustedRoot,
    label: String,
}

impl TrustRoot {
    /// The public-good Sigstore root this build was compiled with.
    pub fn public_good() -> Result<Self, SignatureError> {
        let root = TrustedRoot::from_json(SIGSTORE_PRODUCTION_TRUSTED_ROOT).map_err(|e| {
            SignatureError::TrustRoot {
                label: "the built-in Sigstore root".to_owned(),
                problem: e.to_string(),
            }
        })?;
        Ok(TrustRoot {
            root,
            label: "the built-in public-good Sigstore root".to_owned(),
        })
    }

    /// A `trusted_root.json` (Sigstore's format: `cosign trusted-root
    /// create`, or a private instance's TUF repository).
    pub fn from_file(path: &Path) -> Result<Self, SignatureError> {
        let root = TrustedRoot::from_file(path).map_err(|e| SignatureError::TrustRoot {
            label: path.display().to_string(),
            problem: format!("{e}; give a Sigstore trusted_root.json"),
        })?;
        Ok(TrustRoot {
            root,
            label: path.display().to_string(),
        })
    }
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "{what} must be signed by {expected}, but no signature was found ({looked}); ask the publisher to sign it (`envhost publish --sign-key KEY`, or `cosign sign-blob --bundle`)"
    )]
    /// No signature where signatures are kept.
    Missing {
        /// The plugin.
        what: String,
        /// Who must have signed.
        expected: String,
        /// Where it was looked for.
        looked: String,
    },
    #[error("{what} must be signed by {expected}, but its signature {found}; nothing was written")]
    /// A signature that does not verify for the required signer.
    Wrong {
        /// The plugin.
        what: String,
        /// Who must have signed.
        expected: String,
        /// What the signature is, or why it fails.
        found: String,
    },
    #[error("the key {}: {problem}", path.display())]
    /// A key file that cannot be used.
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        problem: String,
    },
    #[error("the Sigstore trust root {label}: {problem}")]
    /// A trust root that cannot be used.
    TrustRoot {
        /// Which root.
        label: String,
        /// Why.
        problem: String,
    },
}

/// Checks that `bundle` is a signature by `signer` over the component whose
/// sha256 is `component`. `what` names the plugin in messages.
pub fn verify(
    signer: &Signer,
    trust: &TrustRoot,
    component: &Sha256,
    bundle: &[u8],
    what: &str,
) -> Result<(), SignatureError> {
    let wrong = |found: String| SignatureError::Wrong {
        what: what.to_owned(),
        expected: signer.to_string(),
        found,
    };
    let text = std::str::from_utf8(bundle)
        .map_err(|_| wrong("is not a Sigstore bundle (not UTF-8 text)".to_owned()))?;
    let bundle =
        Bundle::from_json(text).map_err(|e| wrong(format!("is not a Sigstore bundle ({e})")))?;
    if let Some(signed) = message_digest(&bundle)
        && signed != *component.as_bytes()
    {
        return Err(wrong(format!(
            "covers sha256 {}, not this component's {}",
            hex(&signed),
            component.hex()
        )));
    }
    let digest = Sha256Hash::new(*component.as_bytes());
    let verifier = Verifier::new(&trust.root).map_err(|e| SignatureError::TrustRoot {
        label: trust.label.clone(),
        problem: e.to_string(),
    })?;
    match signer {
        Signer::Key { .. } => {
            let key = signer.public_key()?;
            let VerificationMaterialContent::PublicKey(_) = &bundle.verification_material.content
            else {
                let who = bundle
                    .signing_certificate()
                    .and_then(|cert| sigstore_verify::crypto::parse_certificate_info(cert).ok())
                    .and_then(|info| info.identity.map(|identity| identity.to_string()))
                    .unwrap_or_else(|| "an unknown identity".to_owned());
                return Err(wrong(format!(
                    "was made keylessly by {who} (a Sigstore certificate), not with a key"
                )));
            };
            if bundle.verification_material.tlog_entries.is_empty() {
                verify_with_key_only(&key, &bundle, &digest)
                    .map_err(|refusal| wrong(refusal.to_string()))
            } else {
                verifier
                    .verify(digest, &bundle, &PublicKeyVerificationPolicy::new(key))
                    .map(drop)
                    .map_err(|e| wrong(format!("does not verify with that key: {e}")))
            }
        }
        Signer::Keyless { identity, issuer } => {
            if matches!(
                bundle.verification_material.content,
                VerificationMaterialContent::PublicKey(_)
            ) {
                return Err(wrong(
                    "was made with a key, not keylessly with a Sigstore certificate".to_owned(),
                ));
            }
            let policy = VerificationPolicy::new(identity.as_str(), issuer.as_str());
            verifier
                .verify(digest, &bundle, &policy)
                .map(drop)
                .map_err(|e| {
                    let signed_by = bundle
                        .signing_certificate()
                        .and_then(|cert| sigstore_verify::crypto::parse_certificate_info(cert).ok())
                        .map(|info| {
                            format!(
                                " (its certificate names {} and issuer {})",
                                info.identity
                                    .map_or_else(|| "no identity".to_owned(), |i| i.to_string()),
                                info.issuer.as_deref().unwrap_or("none")
                            )
                        })
                        .unwrap_or_default();
                    wrong(format!(
                        "does not verify against {}: {e}{signed_by}",
                        trust.label
                    ))
                })
        }
    }
}

/// Why a signature does not check with the key alone, in words that follow
/// "the signature …".
#[derive(Debug, thiserror::Error)]
enum KeyOnlyRefusal {
    #[error(
        "is an attestation without a transparency-log entry; only plain signatures are checked with a key alone"
    )]
    Attestation,
    #[error("cannot be checked: {0}")]
    Unusable(String),
    #[error("was made with another key (it does not verify with this one)")]
    OtherKey,
}

/// A message signature checked with the key alone (no transparency log).
fn verify_with_key_only(
    key: &DerPublicKey,
    bundle: &Bundle,
    digest: &Sha256Hash,
) -> Result<(), KeyOnlyRefusal> {
    let SignatureContent::MessageSignature(signature) = &bundle.content else {
        return Err(KeyOnlyRefusal::Attestation);
    };
    let key =
        VerificationKey::from_spki(key).map_err(|e| KeyOnlyRefusal::Unusable(e.to_string()))?;
    key.verify_prehashed(digest.as_slice(), &signature.signature)
        .map_err(|_| KeyOnlyRefusal::OtherKey)
}

/// The sha256 a bundle says it covers, when it says so.
fn message_digest(bundle: &Bundle) -> Option<[u8; 32]> {
    match &bundle.content {
        SignatureContent::MessageSignature(signature) => {
            let digest = signature.message_digest.as_ref()?;
            if digest.algorithm != HashAlgorithm::Sha2256 {
                return None;
            }
            digest.digest.as_ref().try_into().ok()
        }
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A private key `publish --sign-key` signs with.
#[derive(Debug)]
pub struct SigningKey {
    pair: KeyPair,
    path: PathBuf,
}

impl SigningKey {
    /// Reads an unencrypted PKCS#8 PEM private key (`-----BEGIN PRIVATE
    /// KEY-----`, ECDSA P-256).
    pub fn from_file(path: &Path) -> Result<Self, SignatureError> {
        let problem = |problem: String| SignatureError::Key {
            path: path.to_owned(),
            problem,
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| problem(format!("cannot read it: {e}")))?;
        let der = pem_block(&text, "PRIVATE KEY").ok_or_else(|| {
            problem(if text.contains("ENCRYPTED") {
                "it is encrypted; envhost reads unencrypted PKCS#8 keys (`openssl pkcs8 -topk8 -nocrypt` converts one)".to_owned()
            } else {
                "it is not a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`); make one with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`".to_owned()
            })
        })?;
        let pair = KeyPair::from_pkcs8_der(&der)
            .map_err(|e| problem(format!("it is not an ECDSA P-256 private key ({e})")))?;
        if pair.algorithm() != KeyAlgorithm::EcdsaP256 {
            return Err(problem("only ECDSA P-256 keys sign plugins".to_owned()));
        }
        Ok(SigningKey {
            pair,
            path: path.to_owned(),
        })
    }

    /// A bundle signing the component whose sha256 is `component`: a
    /// message signature, the public key's hint, no transparency-log entry.
    pub fn sign(&self, component: &Sha256) -> Result<Vec<u8>, SignatureError> {
        let fail = |e: &dyn fmt::Display| SignatureError::Key {
            path: self.path.clone(),
            problem: format!("signing failed: {e}"),
        };
        let digest = Sha256Hash::new(*component.as_bytes());
        let signature = self.pair.sign_digest(&digest).map_err(|e| fail(&e))?;
        let public = self.pair.public_key_der().map_err(|e| fail(&e))?;
        // The hint names the key the way cosign does: the sha256 of its DER.
        let hint = BASE64_STANDARD.encode(Sha256::of(public.as_bytes()).as_bytes());
        let content = SignatureContent::MessageSignature(
            MessageSignature::new(signature).with_message_digest(MessageDigest::new(
                HashAlgorithm::Sha2256,
                component.as_bytes().to_vec().into(),
            )),
        );
        let material = VerificationMaterial::new(VerificationMaterialContent::PublicKey(
            PublicKeyIdentifier::new(hint),
        ));
        let bundle = Bundle::new(MediaType::Bundle0_3, material, content);
        bundle
            .to_json()
            .map(String::into_bytes)
            .map_err(|e| fail(&e))
    }
}

/// The DER inside the first PEM block labelled `label`.
fn pem_block(text: &str, label: &str) -> Option<Vec<u8>> {
    pem::parse_many(text)
        .ok()?
        .into_iter()
        .find(|block| block.tag() == label)
        .map(pem::Pem::into_contents)
}
