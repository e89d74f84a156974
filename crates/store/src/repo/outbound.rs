//! The durable queue of outbound messages (see migration 0008).

use parley_domain::{Scope, Timestamp};

use crate::{AsHandle, Handle, StoreResult, execute, fetch_all};

/// A queued message whose turn has come, leased to one sender.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DueSend {
    pub message_id: i64,
    pub workspace_id: i64,
    pub livemode: bool,
    pub conversation_id: i64,
    pub channel_id: i64,
    /// Attempts made before this one.
    pub attempts: i32,
}

impl DueSend {
    pub fn scope(&self) -> Scope {
        Scope::new(self.workspace_id, parley_domain::Mode::from_livemode(self.livemode))
    }
}

/// Queues message `message_id` for its first attempt now.
pub async fn enqueue(
    c: &mut impl AsHandle,
    scope: Scope,
    message_id: i64,
    conversation_id: i64,
    channel_id: i64,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO outbound_queue (message_id, workspace_id, livemode, conversation_id, channel_id, next_attempt_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(message_id)
        .bind(scope.workspace_id)
        .bind(scope.livemode())
        .bind(conversation_id)
        .bind(channel_id)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Leases up to `limit` due messages to `instance` until `lease_until`: each
/// the oldest still queued in its conversation, so a conversation's
/// messages leave in order, and none leased by a live holder.
pub async fn claim(
    c: &mut impl AsHandle,
    instance: &str,
    lease_until: Timestamp,
    limit: i64,
) -> StoreResult<Vec<DueSend>> {
    let skip_locked = if matches!(c.handle(), Handle::Postgres(_)) { " FOR UPDATE SKIP LOCKED" } else { "" };
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE outbound_queue SET leased_by = $1, lease_until = $2
         WHERE message_id IN (
            SELECT q.message_id FROM outbound_queue q
            WHERE q.next_attempt_at <= $3 AND (q.lease_until IS NULL OR q.lease_until < $3)
              AND NOT EXISTS (SELECT 1 FROM outbound_queue e
                              WHERE e.conversation_id = q.conversation_id AND e.message_id < q.message_id)
            ORDER BY q.next_attempt_at, q.message_id LIMIT $4{skip_locked})
         RETURNING message_id, workspace_id, livemode, conversation_id, channel_id, attempts"
    ));
    let due: Vec<DueSend> =
        fetch_all!(c, sqlx::query_as(sql).bind(instance).bind(lease_until).bind(Timestamp::now()).bind(limit))?;
    Ok(due)
}

/// Takes a message off the queue (sent, or failed for good).
pub async fn remove(c: &mut impl AsHandle, message_id: i64) -> StoreResult<()> {
    execute!(c, sqlx::query("DELETE FROM outbound_queue WHERE message_id = $1").bind(message_id))?;
    Ok(())
}

/// Puts a message back for another attempt at `next_attempt_at`.
pub async fn reschedule(
    c: &mut impl AsHandle,
    message_id: i64,
    attempts: i32,
    next_attempt_at: Timestamp,
    error: &str,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE outbound_queue SET attempts = $2, next_attempt_at = $3, last_error = $4, leased_by = NULL,
                lease_until = NULL
             WHERE message_id = $1",
        )
        .bind(message_id)
        .bind(attempts)
        .bind(next_attempt_at)
        .bind(error)
    )?;
    Ok(())
}

/// How many messages wait in the queue (all workspaces): for tests and metrics.
pub async fn depth(c: &mut impl AsHandle) -> StoreResult<i64> {
    let row: (i64,) = crate::fetch_one!(c, sqlx::query_as("SELECT COUNT(*) FROM outbound_queue"))?;
    Ok(row.0)
}
