//! Members' heartbeats: the last one and the status it gave.

use parley_domain::Timestamp;
use parley_domain::user::Availability;

use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_optional};

/// Records member `user_id`'s heartbeat in the workspace.
pub async fn beat(
    c: &mut impl AsHandle,
    workspace_id: i64,
    user_id: i64,
    status: Availability,
    at: Timestamp,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO member_presence (workspace_id, user_id, status, last_seen_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (workspace_id, user_id) DO UPDATE SET status = excluded.status, last_seen_at = excluded.last_seen_at"
        )
        .bind(workspace_id)
        .bind(user_id)
        .bind(status)
        .bind(at)
    )?;
    Ok(())
}

/// Every heartbeat recorded in the workspace: `(user_id, status, last_seen_at)`.
pub async fn all(c: &mut impl AsHandle, workspace_id: i64) -> StoreResult<Vec<(i64, Availability, Timestamp)>> {
    fetch_all!(
        c,
        sqlx::query_as("SELECT user_id, status, last_seen_at FROM member_presence WHERE workspace_id = $1")
            .bind(workspace_id)
    )
    .map_err(Into::into)
}

/// The available member (online since `fresh_since`, still a member) who
/// was offered a handoff longest ago, or never: round-robin. `skip` (the
/// member offered last time) is passed over while anyone else is available.
pub async fn next_available(
    c: &mut impl AsHandle,
    workspace_id: i64,
    fresh_since: Timestamp,
    skip: Option<i64>,
) -> StoreResult<Option<i64>> {
    let row: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT p.user_id FROM member_presence p
               JOIN memberships m ON m.workspace_id = p.workspace_id AND m.user_id = p.user_id
             WHERE p.workspace_id = $1 AND p.status = 'online' AND p.last_seen_at >= $2
             ORDER BY CASE WHEN p.user_id = $3 THEN 1 ELSE 0 END, p.last_offered_at ASC NULLS FIRST, p.user_id
             LIMIT 1"
        )
        .bind(workspace_id)
        .bind(fresh_since)
        .bind(skip.unwrap_or(0))
    )?;
    Ok(row.map(|(u,)| u))
}

/// Member `user_id` was just offered a handoff: last in the turn.
pub async fn offered(c: &mut impl AsHandle, workspace_id: i64, user_id: i64, at: Timestamp) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("UPDATE member_presence SET last_offered_at = $3 WHERE workspace_id = $1 AND user_id = $2")
            .bind(workspace_id)
            .bind(user_id)
            .bind(at)
    )?;
    Ok(())
}
