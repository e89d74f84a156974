//! Instance-wide settings (not workspace data).

use crate::{AsHandle, StoreResult, execute, fetch_optional};

/// Sets `key` only if it has no value yet; returns whether this call set it.
/// Used as a once-only latch (e.g. first-start bootstrap) across instances.
pub async fn set_if_absent(c: &mut impl AsHandle, key: &str, value: &str) -> StoreResult<bool> {
    let done = execute!(
        c,
        sqlx::query("INSERT INTO instance_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",)
            .bind(key)
            .bind(value)
    )?;
    Ok(done == 1)
}

pub async fn get(c: &mut impl AsHandle, key: &str) -> StoreResult<Option<String>> {
    let v: Option<(String,)> =
        fetch_optional!(c, sqlx::query_as("SELECT value FROM instance_settings WHERE key = $1").bind(key))?;
    Ok(v.map(|(v,)| v))
}
