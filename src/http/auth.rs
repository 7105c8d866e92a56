//! The `Require` extractor: a handler states the role it needs in its
//! signature, `_: Require<need::Read>` or `auth: Require<need::Invoke>`
//! (whose [`Caller`] is then passed on as `requested_by`). The same role
//! appears in the handler's `#[utoipa::path(security(("bearer" =
//! ["invoke"])))]`, and a test checks the document against the server, so
//! the two cannot drift apart.
//!
//! A server without tokens knows two callers: the anonymous one (`invoke`)
//! and the holder of its local secret (`admin`), who shows it as a bearer
//! token. Only as a bearer token: a cookie is sent to every port of the
//! host that set it (RFC 6265 has no port in a cookie's scope), so any
//! other listener on the machine would receive it and could replay it.

use super::AppState;
use super::kit::error::ApiError;
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
    let caller = state.auth.identify(&authorization(headers)).await?;
    if let Some(name) = &caller.name {
        // The request's span was opened before anyone knew who asked.
        tracing::Span::current().record("caller", name.as_str());
    }
    caller.require(role)?;
    Ok(caller)
}

/// Every `Authorization` value the request carried: the only place a
/// credential is read from.
fn authorization(headers: &HeaderMap) -> Vec<&[u8]> {
    headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Auth, AuthError};

    /// The old start link's cookie, with the right secret, names no one:
    /// the caller stays anonymous and may not decide.
    #[tokio::test]
    async fn a_cookie_is_no_way_in() {
        let auth = Auth::open_with_secret("local-0123").unwrap();
        let mut h = HeaderMap::new();
        for cookie in ["skilld-local-0123456789ab=local-0123", "local-0123"] {
            h.append(header::COOKIE, HeaderValue::from_static(cookie));
        }
        let caller = auth.identify(&authorization(&h)).await.unwrap();
        assert_eq!(caller, Caller::anonymous());
        assert_eq!(
            caller.require(Role::Approve),
            Err(AuthError::NeedsLocalSecret { need: Role::Approve })
        );
        h.append(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer local-0123"),
        );
        let caller = auth.identify(&authorization(&h)).await.unwrap();
        assert_eq!(caller, Caller::local());
    }
}
