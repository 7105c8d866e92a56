//! What a verified token says about its bearer: its subject, and the
//! roles it grants, from the `skilld:<role>` scopes or a configured claim.

use serde_json::Value;

/// The prefix of skilld's scopes: `skilld:read`, `skilld:invoke`,
/// `skilld:approve`, `skilld:admin`.
pub const SCOPE_PREFIX: &str = "skilld:";

/// The scope that grants `role` (a role's name).
pub fn scope(role: &str) -> String {
    format!("{SCOPE_PREFIX}{role}")
}

/// The longest subject taken (OpenID Connect's limit).
const MAX_SUBJECT: usize = 255;

/// The token's `sub`, when it is one a run record and a log line can
/// carry: 1-255 characters, none of them blank or a control character.
pub(super) fn subject(claims: &Value) -> Result<&str, String> {
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .ok_or("the token has no 'sub' claim naming its subject")?;
    let plain = !sub.is_empty()
        && sub.len() <= MAX_SUBJECT
        && !sub.chars().any(|c| c.is_whitespace() || c.is_control());
    if plain {
        Ok(sub)
    } else {
        Err(format!(
            "the token's subject is empty, longer than {MAX_SUBJECT} bytes, or holds blanks or control characters"
        ))
    }
}

/// The role names the token grants (unknown ones too; the caller keeps
/// those it knows). With `roles_claim`, that claim's values (a dotted path
/// reaches into objects: `realm_access.roles`), `skilld:` prefixed or not;
/// else the `skilld:<role>` scopes of `scope` (space-separated) or `scp`
/// (a list, as some providers send).
pub(super) fn grants(claims: &Value, roles_claim: Option<&str>) -> Vec<String> {
    match roles_claim {
        Some(path) => {
            let found = path.split('.').try_fold(claims, |v, part| v.get(part));
            words(found)
                .map(|w| w.strip_prefix(SCOPE_PREFIX).unwrap_or(w).to_owned())
                .collect()
        }
        None => words(claims.get("scope"))
            .chain(words(claims.get("scp")))
            .filter_map(|w| w.strip_prefix(SCOPE_PREFIX))
            .map(str::to_owned)
            .collect(),
    }
}

/// A claim's words: a space-separated string, or a list of strings.
fn words(value: Option<&Value>) -> Box<dyn Iterator<Item = &str> + '_> {
    match value {
        Some(Value::String(s)) => Box::new(s.split_whitespace()),
        Some(Value::Array(items)) => Box::new(items.iter().filter_map(Value::as_str)),
        _ => Box::new(std::iter::empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_grant_roles() {
        let claims =
            json!({"scope": "openid skilld:read skilld:invoke other:admin", "scp": ["skilld:approve"]});
        assert_eq!(grants(&claims, None), ["read", "invoke", "approve"]);
        assert!(grants(&json!({"scope": "admin read"}), None).is_empty());
        assert!(grants(&json!({}), None).is_empty());
    }

    #[test]
    fn a_configured_claim_replaces_the_scopes() {
        let claims = json!({
            "scope": "skilld:admin",
            "realm_access": {"roles": ["skilld:invoke", "offline_access"]},
            "role": "approve",
        });
        assert_eq!(
            grants(&claims, Some("realm_access.roles")),
            ["invoke", "offline_access"]
        );
        assert_eq!(grants(&claims, Some("role")), ["approve"]);
        assert!(grants(&claims, Some("missing.path")).is_empty());
    }

    #[test]
    fn subjects_are_plain() {
        assert_eq!(subject(&json!({"sub": "agent"})).unwrap(), "agent");
        assert_eq!(
            subject(&json!({"sub": "alice@corp.example"})).unwrap(),
            "alice@corp.example"
        );
        for bad in [
            json!({}),
            json!({"sub": 7}),
            json!({"sub": ""}),
            json!({"sub": "a b"}),
            json!({"sub": "a\nb"}),
            json!({"sub": "x".repeat(256)}),
        ] {
            assert!(subject(&bad).is_err(), "{bad}");
        }
    }
}
