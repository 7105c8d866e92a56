//! Archive signatures, in minisign's format (`RW…` keys, `.minisig`
//! files): the keys a server trusts, whether it requires a signature, and
//! checking one.
//!
//! What is signed is the skill's *canonical archive*: the bytes `skilld
//! package` writes and `GET /skills/{skill}/archive` serves
//! ([`super::archive::write_archive`], the same bytes for the same
//! content). The installer rewrites it from the staged, checked directory
//! and verifies the signature over that, so any zip of the same content
//! verifies, and what this server serves again is exactly what the
//! signature covers.

use super::InstallError;
use super::archive::write_archive;
use crate::catalog::installed::SignatureRecord;
use crate::setting::SettingError;
use base64::Engine;
use serde::Deserialize;
use std::io::{Read, Seek};
use std::path::Path;

/// Why a key or a signature is not usable. Each carries its sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A trusted key (as the config gives it) that is not a minisign key.
    #[error("{0}")]
    BadKey(String),
    /// A signature that is not a minisign signature.
    #[error("{0}")]
    Malformed(String),
    /// A signing key that cannot be made, opened or used.
    #[error("{0}")]
    Signing(String),
}

/// The longest `.minisig` taken: a real one is about 300 bytes, the
/// trusted comment being most of it.
pub const MAX_SIGNATURE_BYTES: usize = 4096;

/// A public key this server trusts to sign uploads.
#[derive(Clone)]
pub struct TrustedKey {
    id: String,
    key: minisign::PublicKey,
}

/// The id alone: the key is public, but the id is what people compare.
impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TrustedKey({})", self.id)
    }
}

impl PartialEq for TrustedKey {
    fn eq(&self, other: &Self) -> bool {
        self.key.to_bytes() == other.key.to_bytes()
    }
}

impl Eq for TrustedKey {}

/// The length of a public key in base64, the second line of a `.pub` file.
const KEY_B64_LEN: usize = 56;

impl TrustedKey {
    /// A key as the config gives it: the key itself (`RW…`, the second
    /// line of a `.pub` file), or the path of a `.pub` file.
    pub fn parse(spec: &str) -> Result<Self, SignatureError> {
        let spec = spec.trim();
        let bad = SignatureError::BadKey;
        if spec.len() == KEY_B64_LEN && spec.starts_with("RW") {
            return Self::from_base64(spec).map_err(|why| bad(format!("trusted key {spec}: {why}")));
        }
        let text = std::fs::read_to_string(spec).map_err(|e| {
            bad(format!(
                "trusted key '{spec}' is neither a minisign public key (RW…) nor a readable .pub file: {e}"
            ))
        })?;
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
            .unwrap_or_default();
        Self::from_base64(line).map_err(|why| bad(format!("trusted key file {spec}: {why}")))
    }

    /// The key, or why not as a phrase the caller puts after its name.
    fn from_base64(text: &str) -> Result<Self, &'static str> {
        let not_a_key = || "not a minisign public key (56 characters of base64, RW…)";
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| not_a_key())?;
        // Ed25519 ("Ed"), an 8-byte key id, a 32-byte key.
        if bytes.len() != 42 || !bytes.starts_with(b"Ed") {
            return Err(not_a_key());
        }
        let key = minisign::PublicKey::from_bytes(&bytes).map_err(|_| not_a_key())?;
        Ok(Self {
            id: key_id(key.keynum()),
            key,
        })
    }

    /// The key id, as `minisign` prints it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The key as a `.pub` file's second line.
    pub fn base64(&self) -> String {
        self.key.to_base64()
    }
}

/// A key id as `minisign` prints it: the 8 bytes as a little-endian
/// number, in 16 upper-case hex digits.
pub fn key_id(keynum: &[u8]) -> String {
    let mut le = [0u8; 8];
    for (to, from) in le.iter_mut().zip(keynum) {
        *to = *from;
    }
    format!("{:016X}", u64::from_le_bytes(le))
}

/// Which signatures an install takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignaturePolicy {
    /// The keys whose signatures are checked and recorded; none: a
    /// signature that comes is not checked.
    pub keys: Vec<TrustedKey>,
    /// An upload without a signature is refused (needs keys).
    pub required: bool,
}

/// `[signatures]` of the config file, with the flags of its keys already
/// over it (`docs/api.md`, "Installed skills", Signatures).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignaturesConfig {
    /// Minisign public keys (`RW…`) or `.pub` files whose signatures of
    /// uploads are checked and recorded.
    pub trusted_keys: Option<Vec<String>>,
    /// Uploads not signed by a trusted key are refused.
    pub required: Option<bool>,
}

impl SignaturesConfig {
    /// The trusted keys, each parsed (one that does not stops start-up),
    /// and whether a signature is required, which needs a key.
    pub fn resolve(self) -> Result<SignaturePolicy, SettingError> {
        let keys = self
            .trusted_keys
            .unwrap_or_default()
            .iter()
            .filter(|k| !k.trim().is_empty())
            .map(|k| {
                TrustedKey::parse(k)
                    .map_err(|why| SettingError::new("signatures.trusted_keys", why.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let required = self.required.unwrap_or(false);
        if required && keys.is_empty() {
            return Err(SettingError::new(
                "signatures.required",
                "signatures are required, but no key is trusted to check them: give --trusted-key \
                 (SKILLD_TRUSTED_KEYS, [signatures] trusted_keys)",
            ));
        }
        Ok(SignaturePolicy { keys, required })
    }
}

/// What came with an upload, screened before its archive is unpacked.
pub enum Presented {
    /// No signature, and none is required.
    Unsigned,
    /// A signature, but no key is trusted to check it with.
    Unchecked,
    /// A well-formed signature by a trusted key, to verify over the
    /// canonical archive.
    ByTrusted {
        minisig: String,
        signature: Box<minisign::SignatureBox>,
        key: TrustedKey,
    },
}

impl SignaturePolicy {
    /// Screens an upload's signature before anything is unpacked: refuses
    /// a missing one when required, and one that is malformed or made by
    /// a key not trusted here.
    pub fn screen(&self, minisig: Option<&str>) -> Result<Presented, InstallError> {
        let Some(minisig) = minisig else {
            return if self.required {
                Err(InstallError::SignatureRequired)
            } else {
                Ok(Presented::Unsigned)
            };
        };
        if self.keys.is_empty() {
            return Ok(Presented::Unchecked);
        }
        let signature = parse_minisig(minisig).map_err(|e| InstallError::BadSignature(e.to_string()))?;
        let signer = key_id(signature.keynum());
        let key = self
            .keys
            .iter()
            .find(|k| k.id == signer)
            .ok_or_else(|| {
                InstallError::BadSignature(format!(
                    "it was made by key {signer}, which is not among this server's trusted keys"
                ))
            })?
            .clone();
        Ok(Presented::ByTrusted {
            minisig: minisig.to_owned(),
            signature: Box::new(signature),
            key,
        })
    }
}

/// A `.minisig`'s text as a signature, every part checked for its size
/// first (the crate indexes into them).
fn parse_minisig(text: &str) -> Result<minisign::SignatureBox, SignatureError> {
    if text.len() > MAX_SIGNATURE_BYTES {
        return Err(SignatureError::Malformed(format!(
            "it is longer than any minisign signature ({MAX_SIGNATURE_BYTES} bytes at most)"
        )));
    }
    let lines: Vec<&str> = text.lines().collect();
    let malformed = |what: &str| SignatureError::Malformed(format!("it is not a minisign signature: {what}"));
    if lines.len() < 4 || lines[4..].iter().any(|l| !l.trim().is_empty()) {
        return Err(malformed(
            "a .minisig has four lines (comment, signature, trusted comment, its signature)",
        ));
    }
    let decoded = |line: &str| base64::engine::general_purpose::STANDARD.decode(line.trim());
    // "ED" (or "Ed", unhashed), the key id, the 64-byte signature.
    if !decoded(lines[1]).is_ok_and(|b| b.len() == 74) {
        return Err(malformed("its second line is not a signature"));
    }
    if !decoded(lines[3]).is_ok_and(|b| b.len() == 64) {
        return Err(malformed(
            "its fourth line is not the trusted comment's signature",
        ));
    }
    minisign::SignatureBox::from_string(text).map_err(|e| malformed(&e.to_string()))
}

/// A skill's canonical archive, written from its directory.
pub struct Canonical {
    pub file: std::fs::File,
    /// Lowercase hex SHA-256 of its bytes.
    pub sha256: String,
    /// How many files it holds.
    pub files: usize,
}

/// Writes the canonical archive of the skill at `dir` to an unnamed
/// temporary file (uploads may be large; memory stays flat).
pub fn canonical(dir: &Path) -> Result<Canonical, InstallError> {
    let written = write_archive(dir, tempfile::tempfile()?)
        .map_err(|e| InstallError::Io(format!("cannot write the canonical archive: {e}")))?;
    let mut file = written;
    let sha256 = super::archive::sha256_of(&mut file)?;
    let files = zip::ZipArchive::new(&mut file)
        .map_err(|e| InstallError::Io(format!("cannot read the canonical archive back: {e}")))?
        .len();
    file.rewind()?;
    Ok(Canonical { file, sha256, files })
}

impl Presented {
    /// Verifies a trusted key's signature over the canonical archive: the
    /// record to keep, or `None` when nothing was checked. `unpacked` is
    /// how many files the upload held: one the canonical archive leaves
    /// out (a version-control directory, one nested too deep) would be
    /// installed without any signature covering it.
    pub fn verify(
        &self,
        canonical: &mut Canonical,
        unpacked: usize,
    ) -> Result<Option<SignatureRecord>, InstallError> {
        let Presented::ByTrusted {
            minisig,
            signature,
            key,
        } = self
        else {
            return Ok(None);
        };
        let id = key.id();
        if unpacked != canonical.files {
            return Err(InstallError::BadSignature(format!(
                "the archive holds {} file(s) its canonical form leaves out (version-control \
                 directories, or deeper than 16 levels), which the signature by key {id} cannot cover",
                unpacked.saturating_sub(canonical.files)
            )));
        }
        canonical.file.rewind()?;
        let checked = minisign::verify(&key.key, signature, &mut canonical.file, true, false, true);
        canonical.file.rewind()?;
        checked.map_err(|_| {
            InstallError::BadSignature(format!(
                "the signature by key {id} does not verify over the skill's canonical archive: \
                 its content is not what was signed"
            ))
        })?;
        Ok(Some(SignatureRecord {
            minisig: minisig.clone(),
            key_id: id.to_owned(),
        }))
    }
}

/// A key to sign with: made by `skilld keygen` or `minisign -G`.
pub struct SigningKey {
    secret: minisign::SecretKey,
    public: minisign::PublicKey,
}

impl SigningKey {
    /// A new key pair, unencrypted.
    pub fn generate() -> Result<Self, SignatureError> {
        let pair = minisign::KeyPair::generate_unencrypted_keypair()
            .map_err(|e| SignatureError::Signing(format!("cannot make a key: {e}")))?;
        Ok(Self {
            secret: pair.sk,
            public: pair.pk,
        })
    }

    /// The secret key file `text`; an encrypted one is opened with
    /// `password`, never asked for on a terminal.
    pub fn read(text: &str, password: Option<String>) -> Result<Self, SignatureError> {
        let signing = SignatureError::Signing;
        let secret = match minisign::SecretKey::from_unencrypted_box(text.to_owned().into()) {
            Ok(secret) => secret,
            Err(plain) => match password {
                Some(password) => minisign::SecretKey::from_box(text.to_owned().into(), Some(password))
                    .map_err(|e| signing(format!("cannot open the secret key: {e}")))?,
                None => {
                    return Err(signing(format!(
                        "cannot read the secret key ({plain}); an encrypted key takes its password \
                         from SKILLD_SIGN_PASSWORD"
                    )));
                }
            },
        };
        let public = minisign::PublicKey::from_secret_key(&secret)
            .map_err(|e| signing(format!("cannot read the secret key: {e}")))?;
        Ok(Self { secret, public })
    }

    pub fn id(&self) -> String {
        key_id(self.public.keynum())
    }

    /// The public key, as a `.pub` file's second line.
    pub fn public_base64(&self) -> String {
        self.public.to_base64()
    }

    /// The `.pub` file, as `minisign -G` writes it.
    pub fn public_file(&self) -> String {
        format!(
            "untrusted comment: minisign public key {}\n{}\n",
            self.id(),
            self.public_base64()
        )
    }

    /// The secret key file, unencrypted.
    pub fn secret_file(&self) -> Result<String, SignatureError> {
        let comment = format!("minisign secret key {} (unencrypted)", self.id());
        self.secret
            .to_box(Some(&comment))
            .map(minisign::SecretKeyBox::into_string)
            .map_err(|e| SignatureError::Signing(format!("cannot write the secret key: {e}")))
    }

    /// Signs `data` (an archive named `file_name`) as `minisign -S`
    /// does: the `.minisig` file's text.
    pub fn sign(&self, data: impl Read, file_name: &str) -> Result<String, SignatureError> {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let trusted = format!("timestamp:{timestamp}\tfile:{file_name}\thashed");
        let untrusted = format!("signature from skilld package, key {}", self.id());
        minisign::sign(
            Some(&self.public),
            &self.secret,
            data,
            Some(&trusted),
            Some(&untrusted),
        )
        .map(minisign::SignatureBox::into_string)
        .map_err(|e| SignatureError::Signing(format!("cannot sign: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn policy(key: &SigningKey, required: bool) -> SignaturePolicy {
        SignaturePolicy {
            keys: vec![TrustedKey::parse(&key.public_base64()).unwrap()],
            required,
        }
    }

    fn canonical_of(bytes: &[u8]) -> Canonical {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, bytes).unwrap();
        Canonical {
            file,
            sha256: String::new(),
            files: 1,
        }
    }

    #[test]
    fn a_key_and_its_file_parse_to_the_same_trusted_key() {
        let key = SigningKey::generate().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pub");
        std::fs::write(&path, key.public_file()).unwrap();
        let from_text = TrustedKey::parse(&key.public_base64()).unwrap();
        let from_file = TrustedKey::parse(path.to_str().unwrap()).unwrap();
        assert_eq!(from_text, from_file);
        assert_eq!(from_text.id(), key.id());
        for bad in ["RW", "RWnotakey", "/no/such/key.pub", ""] {
            assert!(TrustedKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_signature_verifies_only_over_what_was_signed() {
        let key = SigningKey::generate().unwrap();
        let minisig = key.sign(Cursor::new(b"archive"), "a.zip").unwrap();
        let presented = policy(&key, true).screen(Some(&minisig)).unwrap();
        let record = presented.verify(&mut canonical_of(b"archive"), 1).unwrap();
        assert_eq!(record.map(|r| r.key_id), Some(key.id()));
        let err = presented.verify(&mut canonical_of(b"archivE"), 1).unwrap_err();
        assert!(
            matches!(&err, InstallError::BadSignature(why) if why.contains(&key.id())),
            "{err}"
        );
        let err = presented.verify(&mut canonical_of(b"archive"), 2).unwrap_err();
        assert!(matches!(err, InstallError::BadSignature(_)), "uncovered files");
    }

    #[test]
    fn missing_untrusted_and_garbled_signatures_are_refused_before_unpacking() {
        let (key, other) = (SigningKey::generate().unwrap(), SigningKey::generate().unwrap());
        assert!(matches!(
            policy(&key, true).screen(None),
            Err(InstallError::SignatureRequired)
        ));
        assert!(matches!(
            policy(&key, false).screen(None),
            Ok(Presented::Unsigned)
        ));
        let by_other = other.sign(Cursor::new(b"x"), "x.zip").unwrap();
        let err = policy(&key, false).screen(Some(&by_other)).err().unwrap();
        assert!(
            matches!(&err, InstallError::BadSignature(w) if w.contains(&other.id())),
            "{err}"
        );
        let good = key.sign(Cursor::new(b"x"), "x.zip").unwrap();
        let lines: Vec<&str> = good.lines().collect();
        let garbled = [
            "not a signature".to_owned(),
            format!("{}\n{}\n{}\n", lines[0], lines[1], lines[2]),
            format!("{}\n{}\n{}\nAAAA\n", lines[0], lines[1], lines[2]),
            format!("{}\nAAAA\n{}\n{}\n", lines[0], lines[2], lines[3]),
            "x".repeat(MAX_SIGNATURE_BYTES + 1),
        ];
        for text in garbled {
            let err = policy(&key, false).screen(Some(&text)).err().unwrap();
            assert!(matches!(err, InstallError::BadSignature(_)), "{text}");
        }
        let unchecked = SignaturePolicy::default().screen(Some("anything"));
        assert!(matches!(unchecked, Ok(Presented::Unchecked)));
    }

    #[test]
    fn a_key_file_round_trips_and_an_encrypted_one_needs_its_password() {
        let key = SigningKey::generate().unwrap();
        let again = SigningKey::read(&key.secret_file().unwrap(), None).unwrap();
        assert_eq!(again.id(), key.id());
        let pair = minisign::KeyPair::generate_encrypted_keypair(Some("pw".to_owned())).unwrap();
        let text = pair.sk.to_box(None).unwrap().into_string();
        let opened = SigningKey::read(&text, Some("pw".to_owned())).unwrap();
        assert_eq!(opened.id(), key_id(pair.pk.keynum()));
        let signed = opened.sign(Cursor::new(b"x"), "x.zip").unwrap();
        assert!(signed.contains("file:x.zip"), "{signed}");
        assert!(SigningKey::read(&text, Some("wrong".to_owned())).is_err());
        let err = SigningKey::read(&text, None).err().unwrap();
        assert!(
            matches!(&err, SignatureError::Signing(why) if why.contains("SKILLD_SIGN_PASSWORD")),
            "{err}"
        );
    }
}
