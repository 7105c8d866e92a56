//! MCP logging: the level a client asks for. Before 2026-07-28 a session
//! sets it with `logging/setLevel`; from 2026-07-28 each request names its
//! own in `_meta` (`io.modelcontextprotocol/logLevel`), and
//! `logging/setLevel` is gone. A request without a level gets no log
//! notifications at all.
// MCP 2026-07-28 deprecates logging (SEP-2577) but still serves it.
#![expect(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577, and still part of the protocol"
)]

use rmcp::model::{LoggingLevel, ProtocolVersion, SetLevelRequestMethod};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use std::sync::{Arc, Mutex};

/// A handshake-era session's level, once its client set one.
#[derive(Debug, Clone, Default)]
pub(super) struct SessionLevel(Arc<Mutex<Option<LoggingLevel>>>);

impl SessionLevel {
    /// `logging/setLevel`: only in the handshake era.
    pub(super) fn set(&self, level: LoggingLevel, ctx: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
        if per_request(ctx) {
            return Err(ErrorData::method_not_found::<SetLevelRequestMethod>());
        }
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(level);
        Ok(())
    }

    /// The level of this request: its own `_meta` level, else (in the
    /// handshake era) the session's; `None` asks for no log at all.
    pub(super) fn of(&self, ctx: &RequestContext<RoleServer>) -> Option<LoggingLevel> {
        let own = ctx.meta.log_level();
        if per_request(ctx) {
            return own;
        }
        own.or(*self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// Whether the request is of 2026-07-28 or later, where the level is the
/// request's own.
fn per_request(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Severity, for comparing levels: debug is 0, emergency 7.
pub(super) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
