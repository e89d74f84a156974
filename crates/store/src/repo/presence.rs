//! Members' heartbeats: the last one and the status it gave.

use parley_domain::Timestamp;
use parley_domain::user::Availability;

use crate::{AsHandle, StoreResult, execute, fetch_all};

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
