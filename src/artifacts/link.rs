//! Links to this server's artifacts that work without a token until they
//! expire: `/runs/{id}/files/{path}?expires=T&signature=S`, where `S` is
//! an HMAC-SHA256 of the run, the path and `T` under a key made once and
//! kept in the data directory (0600, like the local secret). Each instance
//! has its own key, as it has its own disk.

use hmac::{KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use uuid::Uuid;

/// The file of the data directory that holds the key.
pub const KEY_FILE: &str = "artifact-link-key";

/// What a path segment keeps unescaped in a link: RFC 3986's unreserved
/// characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Why a link was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// Its signature does not match (or `expires` or `signature` is
    /// missing or malformed).
    Bad,
    /// It was signed, and its time has passed.
    Expired,
}

/// The key that signs this server's links, ready to sign.
pub struct Key(HmacSha256);

impl Key {
    /// The key kept in `data_dir`, made there first if there is none.
    pub fn load_or_create(data_dir: &std::path::Path) -> std::io::Result<Self> {
        Self::from_secret(&crate::local_secret::load_or_create_named(data_dir, KEY_FILE)?)
    }

    /// A key of this process alone, for when none can be kept: its links
    /// stop working when the process does.
    pub fn ephemeral() -> std::io::Result<Self> {
        Self::from_secret(&crate::local_secret::fresh()?)
    }

    fn from_secret(secret: &str) -> std::io::Result<Self> {
        <HmacSha256 as KeyInit>::new_from_slice(secret.as_bytes())
            .map(Self)
            .map_err(std::io::Error::other)
    }

    /// The link to file `path` of run `id`, working until `expires` (Unix
    /// seconds).
    pub fn link(&self, id: Uuid, path: &str, expires: i64) -> String {
        let encoded: Vec<String> = path
            .split('/')
            .map(|segment| utf8_percent_encode(segment, SEGMENT).to_string())
            .collect();
        let signature = hex::encode(self.mac(id, path, expires).finalize().into_bytes());
        format!(
            "/runs/{id}/files/{}?expires={expires}&signature={signature}",
            encoded.join("/")
        )
    }

    /// Checks a link's `expires` and `signature` for file `path` of run
    /// `id` at Unix time `now`. The signature is compared in constant time.
    pub fn verify(
        &self,
        id: Uuid,
        path: &str,
        expires: Option<&str>,
        signature: Option<&str>,
        now: i64,
    ) -> Result<(), LinkError> {
        let expires: i64 = expires.and_then(|e| e.parse().ok()).ok_or(LinkError::Bad)?;
        let signature = signature
            .and_then(|s| hex::decode(s).ok())
            .ok_or(LinkError::Bad)?;
        self.mac(id, path, expires)
            .verify_slice(&signature)
            .map_err(|_| LinkError::Bad)?;
        if expires <= now {
            return Err(LinkError::Expired);
        }
        Ok(())
    }

    fn mac(&self, id: Uuid, path: &str, expires: i64) -> HmacSha256 {
        let mut mac = self.0.clone();
        // NUL separates the parts: none of them can hold one.
        mac.update(format!("skilld-artifact\0{id}\0{path}\0{expires}").as_bytes());
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(link: &str) -> (String, String, String) {
        let (path, query) = link.split_once('?').unwrap();
        let mut expires = String::new();
        let mut signature = String::new();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "expires" => expires = v.into_owned(),
                "signature" => signature = v.into_owned(),
                _ => panic!("{k}"),
            }
        }
        (path.to_owned(), expires, signature)
    }

    #[test]
    fn a_link_verifies_for_its_file_until_it_expires() {
        let key = Key::ephemeral().unwrap();
        let id = Uuid::now_v7();
        let link = key.link(id, "deep/a b%.txt", 1_000);
        let (path, expires, signature) = parts(&link);
        assert_eq!(path, format!("/runs/{id}/files/deep/a%20b%25.txt"));
        let check = |id, path: &str, expires: &str, signature: &str, now| {
            key.verify(id, path, Some(expires), Some(signature), now)
        };
        assert_eq!(check(id, "deep/a b%.txt", &expires, &signature, 999), Ok(()));
        assert_eq!(
            check(id, "deep/a b%.txt", &expires, &signature, 1_000),
            Err(LinkError::Expired)
        );
        // Another file, run, time or key: refused.
        assert_eq!(
            check(id, "deep/other.txt", &expires, &signature, 0),
            Err(LinkError::Bad)
        );
        assert_eq!(
            check(Uuid::now_v7(), "deep/a b%.txt", &expires, &signature, 0),
            Err(LinkError::Bad)
        );
        assert_eq!(
            check(id, "deep/a b%.txt", "2000", &signature, 0),
            Err(LinkError::Bad)
        );
        assert_eq!(
            Key::ephemeral()
                .unwrap()
                .verify(id, "deep/a b%.txt", Some(&expires), Some(&signature), 0),
            Err(LinkError::Bad)
        );
        for (e, s) in [
            (None, Some(signature.as_str())),
            (Some("1000"), None),
            (Some("x"), Some("zz")),
        ] {
            assert_eq!(key.verify(id, "deep/a b%.txt", e, s, 0), Err(LinkError::Bad));
        }
    }

    #[test]
    fn the_key_is_made_once_and_private() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            Key::load_or_create(dir.path()).unwrap(),
            Key::load_or_create(dir.path()).unwrap(),
        );
        let id = Uuid::now_v7();
        assert_eq!(a.link(id, "x", 5), b.link(id, "x", 5));
        let meta = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
    }
}
