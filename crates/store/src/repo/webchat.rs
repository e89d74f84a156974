//! Webchat visitors.

use parley_domain::{Scope, Timestamp};

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_one, fetch_optional};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct VisitorRow {
    pub id: i64,
    pub public_id: String,
}

pub async fn insert(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    public_id: &str,
    token_hash: &str,
) -> StoreResult<VisitorRow> {
    let now = Timestamp::now();
    Ok(fetch_one!(
        c,
        sqlx::query_as(
            "INSERT INTO webchat_visitors (workspace_id, livemode, channel_id, public_id, token_hash, created_at, last_seen_at)
             VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id, public_id",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(public_id)
        .bind(token_hash)
        .bind(now)
    )?)
}

/// The channel's visitor holding the token with this hash; notes the visit.
pub async fn find_by_token(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    token_hash: &str,
) -> StoreResult<Option<VisitorRow>> {
    let found: Option<VisitorRow> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT id, public_id FROM webchat_visitors
             WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 AND token_hash = $4",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(token_hash)
    )?;
    if let Some(v) = &found {
        execute!(
            c,
            sqlx::query("UPDATE webchat_visitors SET last_seen_at = $2 WHERE id = $1")
                .bind(v.id)
                .bind(Timestamp::now())
        )?;
    }
    Ok(found)
}
