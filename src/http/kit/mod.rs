//! The HTTP plumbing every resource shares, apart from the resources:
//! extractors, the web guard, connections, CORS, query strings, and the
//! one place errors become problem+json.

pub(crate) mod conn;
pub(crate) mod cors;
pub mod error;
pub(crate) mod extract;
pub mod guard;
pub(crate) mod query;
