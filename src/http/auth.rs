//! The `Require` extractor: a handler states the role it needs in its
//! signature, `_: Require<need::Read>` or `auth: Require<need::Invoke>`
//! (whose [`Caller`] is then passed on as `requested_by`). The same role
//! appears in the handler's `#[utoipa::path(security(("bearer" =
//! ["invoke"])))]`, and a test checks the document against the server, so
//! the two cannot drift apart.
//!
//! A server without tokens knows two callers: the anonymous one (`invoke`)
//! and the holder of its local secret (`admin`), who shows it as a bearer
//! token or in the cookie the `/ui?secret=` link set ([`COOKIE_PREFIX`]).

use super::AppState;
use super::error::ApiError;
use crate::auth::{Caller, Role};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use std::marker::PhantomData;

/// A role a route needs, as a type, so the handler's signature says it.
pub trait Need: Send + Sync + 'static {
    const ROLE: Role;
    /// What a caller of a server without tokens needs instead: the
    /// anonymous caller is any process of the machine, a tool's too.
    const OPEN_ROLE: Role = Self::ROLE;
}

/// Marker types for [`Require`].
pub mod need {
    use super::{Need, Role};

    /// List and export.
    pub struct Read;
    /// Invoke tools and read runs.
    pub struct Invoke;
    /// Decide approvals, revoke grants.
    pub struct Approve;
    /// Install, remove, reload.
    pub struct Admin;
    /// Read approvals and grants: `invoke` with tokens (an agent follows
    /// its calls); without them, the local secret, since they show every
    /// caller's arguments to whoever asks.
    pub struct Inbox;

    impl Need for Read {
        const ROLE: Role = Role::Read;
    }
    impl Need for Invoke {
        const ROLE: Role = Role::Invoke;
    }
    impl Need for Approve {
        const ROLE: Role = Role::Approve;
    }
    impl Need for Admin {
        const ROLE: Role = Role::Admin;
    }
    impl Need for Inbox {
        const ROLE: Role = Role::Invoke;
        const OPEN_ROLE: Role = Role::Approve;
    }
}

/// The local secret's cookie is this, then [`crate::auth::Auth::local_id`].
pub const COOKIE_PREFIX: &str = "skilld-local-";

/// Extractor: the caller, once it is known to hold role `N` (401 without
/// a valid token, 403 with too low a role). Put it first among the
/// handler's arguments, so that an unauthenticated request learns nothing
/// from a 400 or 404 about paths and bodies it may not touch.
pub struct Require<N: Need> {
    pub caller: Caller,
    need: PhantomData<N>,
}

impl<N: Need> std::ops::Deref for Require<N> {
    type Target = Caller;

    fn deref(&self) -> &Caller {
        &self.caller
    }
}

impl<N: Need> FromRequestParts<AppState> for Require<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let role = if state.auth.is_open() {
            N::OPEN_ROLE
        } else {
            N::ROLE
        };
        Ok(Self {
            caller: caller(state, &parts.headers, role).await?,
            need: PhantomData,
        })
    }
}

/// The caller a request's token (static or OAuth) or local secret names,
/// once it holds `role`: 401 without a valid token or the secret, 403
/// with too low a role.
pub(super) async fn caller(state: &AppState, headers: &HeaderMap, role: Role) -> Result<Caller, ApiError> {
    let authorization: Vec<&[u8]> = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    let cookie = state
        .auth
        .local_id()
        .and_then(|id| cookie(headers, &format!("{COOKIE_PREFIX}{id}")));
    let caller = state.auth.identify(&authorization, cookie).await?;
    if let Some(name) = &caller.name {
        // The request's span was opened before anyone knew who asked.
        tracing::Span::current().record("caller", name.as_str());
    }
    caller.require(role)?;
    Ok(caller)
}

/// The value of cookie `name`, from any `Cookie` header.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name_in_any_header() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; skilld-local-x=s3cret"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&h, "skilld-local-x"), Some("s3cret"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "skilld-local-"), None);
        assert_eq!(cookie(&HeaderMap::new(), "a"), None);
    }
}
