//! Objects written to storage ahead of the transaction that names them
//! (see migration 0034): staged, then claimed by that transaction; those
//! never claimed are swept.

use parley_domain::Timestamp;

use crate::{AsHandle, StoreResult, execute, fetch_all};

/// Records `key` as written but not yet named by any row.
pub async fn stage(c: &mut impl AsHandle, key: &str, now: Timestamp) -> StoreResult<()> {
    execute!(c, sqlx::query("INSERT INTO staged_objects (key, created_at) VALUES ($1, $2)").bind(key).bind(now))?;
    Ok(())
}

/// `key` is named by a row written in this transaction (or was removed): it
/// is no longer an orphan.
pub async fn claim(c: &mut impl AsHandle, key: &str) -> StoreResult<()> {
    execute!(c, sqlx::query("DELETE FROM staged_objects WHERE key = $1").bind(key))?;
    Ok(())
}

/// Keys staged before `before` and never claimed, oldest first.
pub async fn unclaimed_before(c: &mut impl AsHandle, before: Timestamp, limit: i64) -> StoreResult<Vec<String>> {
    let rows: Vec<(String,)> = fetch_all!(
        c,
        sqlx::query_as("SELECT key FROM staged_objects WHERE created_at < $1 ORDER BY created_at LIMIT $2")
            .bind(before)
            .bind(limit)
    )?;
    Ok(rows.into_iter().map(|(key,)| key).collect())
}

/// Every key staged and not claimed (tests).
pub async fn all(c: &mut impl AsHandle) -> StoreResult<Vec<String>> {
    let rows: Vec<(String,)> = fetch_all!(c, sqlx::query_as("SELECT key FROM staged_objects ORDER BY key"))?;
    Ok(rows.into_iter().map(|(key,)| key).collect())
}
