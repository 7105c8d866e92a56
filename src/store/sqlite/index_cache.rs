//! The registry cache on SQLite (see `store::index_cache`).

use super::{SqliteStore, parse_time, time_text};
use crate::store::{CachedIndex, IndexCache, StoreError};
use sqlx::Row;

#[async_trait::async_trait]
impl IndexCache for SqliteStore {
    async fn cached_index(&self, url: &str) -> Result<Option<CachedIndex>, StoreError> {
        let row = sqlx::query("select body, fetched_at from registry_cache where url = ?")
            .bind(url)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            Ok(CachedIndex {
                url: url.to_owned(),
                body: row.try_get("body")?,
                fetched_at: parse_time(&row.try_get::<String, _>("fetched_at")?)?,
            })
        })
        .transpose()
    }

    async fn cache_index(&self, index: CachedIndex) -> Result<(), StoreError> {
        sqlx::query(
            "insert into registry_cache (url, body, fetched_at) values (?, ?, ?) \
             on conflict (url) do update set body = excluded.body, fetched_at = excluded.fetched_at",
        )
        .bind(&index.url)
        .bind(&index.body)
        .bind(time_text(index.fetched_at)?)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
