//! Seed 002's registry cache: each registry's index as last fetched, and
//! the [`IndexCache`] each backend keeps it in.

use super::StoreError;
use chrono::{DateTime, Utc};

/// A registry's index as fetched, so that a search within its ttl asks
/// nobody and one the registry cannot answer still finds what it last
/// said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedIndex {
    pub url: String,
    pub body: String,
    pub fetched_at: DateTime<Utc>,
}

/// The registries' indexes as last fetched, by address; held as
/// `Arc<dyn IndexCache>` by `crate::registry`.
#[async_trait::async_trait]
pub trait IndexCache: Send + Sync + 'static {
    /// A registry's index as last fetched, if it ever was.
    async fn cached_index(&self, url: &str) -> Result<Option<CachedIndex>, StoreError>;

    /// Keeps a registry's index, replacing what was kept for its address.
    async fn cache_index(&self, index: CachedIndex) -> Result<(), StoreError>;
}
