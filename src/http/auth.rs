//! The `Require` extractor: a handler states the role it needs in its
//! signature, `_: Require<need::Read>` or `auth: Require<need::Invoke>`
//! (whose [`Caller`] is then passed on as `requested_by`). The same role
//! appears in the handler's `#[utoipa::path(security(("bearer" =
//! ["invoke"])))]`, and a test checks the document against the server, so
//! the two cannot drift apart.

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
        Ok(Self {
            caller: caller(state, &parts.headers, N::ROLE)?,
            need: PhantomData,
        })
    }
}

/// The caller a request's token names, once it holds `role`: 401 without
/// a valid token, 403 with too low a role.
pub(super) fn caller(state: &AppState, headers: &HeaderMap, role: Role) -> Result<Caller, ApiError> {
    let authorization = headers.get_all(header::AUTHORIZATION);
    let caller = state
        .auth
        .authenticate(authorization.iter().map(HeaderValue::as_bytes))?;
    if let Some(name) = &caller.name {
        // The request's span was opened before anyone knew who asked.
        tracing::Span::current().record("caller", name.as_str());
    }
    caller.require(role)?;
    Ok(caller)
}
