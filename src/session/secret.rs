//! A session is a capability: its start answers a secret, and a later
//! request on it (a turn, a response, its end, a call made in it) shows
//! that secret, unless a token of the session's own named caller made the
//! request. A process that learns a session's id (a tool reading its run
//! from `GET /runs/{id}`, say) cannot steer it: on a server without
//! tokens, every local process is the same caller.

use crate::invoke::SessionProof;
use crate::store::SessionRecord;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The header a request on a session shows its secret in.
pub const HEADER: &str = "skilld-session-secret";

/// A new session's secret, and what the store keeps of it.
pub(super) fn fresh() -> std::io::Result<(String, String)> {
    let secret = crate::local_secret::fresh()?;
    let kept = sha256(&secret);
    Ok((secret, kept))
}

fn sha256(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Why a request may not steer a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locked {
    /// It showed no secret.
    Missing,
    /// It showed another secret.
    Wrong,
    /// The session was made before sessions had secrets, by no named
    /// caller: nothing can show a right to it.
    Unkept,
}

impl Locked {
    pub fn says(self) -> &'static str {
        match self {
            Locked::Missing => {
                "it is steered with the secret its start answered (header Skilld-Session-Secret, or \
                 _meta \"skilld/session-secret\" over MCP), and this request showed none"
            }
            Locked::Wrong => "the secret this request showed is not the session's",
            Locked::Unkept => "it was started before sessions had secrets; start a new one",
        }
    }
}

/// Whether a request with `proof` may steer `record` (whose caller it
/// already is): a named caller's token is enough, else the secret.
pub(super) fn check(record: &SessionRecord, proof: &SessionProof) -> Result<(), Locked> {
    let secret = match proof {
        SessionProof::Within => return Ok(()),
        _ if record.caller.is_some() => return Ok(()),
        SessionProof::Secret(secret) => secret.as_deref().ok_or(Locked::Missing)?,
    };
    let kept = record.secret_sha256.as_deref().ok_or(Locked::Unkept)?;
    if bool::from(sha256(secret).as_bytes().ct_eq(kept.as_bytes())) {
        Ok(())
    } else {
        Err(Locked::Wrong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn record(caller: Option<&str>, kept: Option<String>) -> SessionRecord {
        SessionRecord {
            id: uuid::Uuid::now_v7(),
            caller: caller.map(str::to_owned),
            context: json!({}),
            turn: 0,
            state: json!({}),
            revision: 0,
            created_at: Utc::now(),
            updated_at: Utc::now(),
            expires_at: Utc::now(),
            secret_sha256: kept,
        }
    }

    #[test]
    fn only_the_secret_or_the_named_caller_opens_a_session() {
        let (secret, kept) = fresh().unwrap();
        let open = record(None, Some(kept.clone()));
        let shown = |s: Option<&str>| SessionProof::Secret(s.map(str::to_owned));
        assert_eq!(check(&open, &shown(Some(&secret))), Ok(()));
        assert_eq!(check(&open, &shown(None)), Err(Locked::Missing));
        assert_eq!(check(&open, &shown(Some(&kept))), Err(Locked::Wrong));
        assert_eq!(check(&open, &SessionProof::Within), Ok(()));
        assert_eq!(
            check(&record(None, None), &shown(Some(&secret))),
            Err(Locked::Unkept)
        );
        assert_eq!(check(&record(Some("alice"), Some(kept)), &shown(None)), Ok(()));
    }
}
