//! Idempotency records: `(workspace, mode, key)` → fingerprint and the stored response.
//!
//! A key is claimed in its own short transaction (so a concurrent duplicate
//! sees it as in progress), then completed in the same transaction as the
//! resource it created. A claim whose request failed is released, so a retry
//! runs again; a claim whose process died expires after its lease.

use parley_domain::{Scope, Timestamp};

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_optional};

/// The outcome of trying to claim a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This request owns the key and should run.
    Acquired,
    /// A request with the same fingerprint completed: replay its response.
    Replay { status: u16, body: String },
    /// The key was used with a different request.
    FingerprintMismatch,
    /// A request with this key is still running.
    InProgress,
}

#[derive(sqlx::FromRow)]
struct Row {
    fingerprint: String,
    response_status: Option<i32>,
    response_body: Option<String>,
    locked_until: Option<Timestamp>,
}

pub async fn claim(
    c: &mut impl AsHandle,
    scope: Scope,
    key: &str,
    fingerprint: &str,
    lease_s: i64,
) -> StoreResult<Claim> {
    let now = Timestamp::now();
    let lease = now.plus_seconds(lease_s);
    let inserted = execute!(
        c,
        sqlx::query(
            "INSERT INTO idempotency_keys (workspace_id, livemode, key, fingerprint, locked_until, created_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (workspace_id, livemode, key) DO NOTHING",
        )
        .bind_scope(scope)
        .bind(key)
        .bind(fingerprint)
        .bind(lease)
        .bind(now)
    )?;
    if inserted == 1 {
        return Ok(Claim::Acquired);
    }
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT fingerprint, response_status, response_body, locked_until FROM idempotency_keys
         WHERE workspace_id = $1 AND livemode = $2 AND key = $3",
        )
        .bind_scope(scope)
        .bind(key)
    )?;
    let Some(row) = row else {
        // Released between our insert and read: the caller may simply retry.
        return Ok(Claim::InProgress);
    };
    if row.fingerprint != fingerprint {
        return Ok(Claim::FingerprintMismatch);
    }
    if let (Some(status), Some(body)) = (row.response_status, row.response_body) {
        return Ok(Claim::Replay { status: status as u16, body });
    }
    if row.locked_until.is_some_and(|t| t < now) {
        // The owner died mid-request (its transaction rolled back): take over.
        let taken = execute!(
            c,
            sqlx::query(
                "UPDATE idempotency_keys SET locked_until = $4
             WHERE workspace_id = $1 AND livemode = $2 AND key = $3 AND response_status IS NULL AND locked_until < $5",
            )
            .bind_scope(scope)
            .bind(key)
            .bind(lease)
            .bind(now)
        )?;
        if taken == 1 {
            return Ok(Claim::Acquired);
        }
    }
    Ok(Claim::InProgress)
}

/// Stores the response; call in the transaction that creates the resource.
pub async fn complete(c: &mut impl AsHandle, scope: Scope, key: &str, status: u16, body: &str) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE idempotency_keys SET response_status = $4, response_body = $5, locked_until = NULL
         WHERE workspace_id = $1 AND livemode = $2 AND key = $3",
        )
        .bind_scope(scope)
        .bind(key)
        .bind(status as i32)
        .bind(body)
    )?;
    Ok(())
}

/// Forgets an unfinished claim, so that a retry runs again.
pub async fn release(c: &mut impl AsHandle, scope: Scope, key: &str) -> StoreResult<()> {
    execute!(c, sqlx::query(
        "DELETE FROM idempotency_keys WHERE workspace_id = $1 AND livemode = $2 AND key = $3 AND response_status IS NULL",
    )
    .bind_scope(scope)
    .bind(key))?;
    Ok(())
}

/// Deletes records created before `before`; returns how many.
pub async fn purge_created_before(c: &mut impl AsHandle, before: Timestamp) -> StoreResult<u64> {
    let done = execute!(c, sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1").bind(before))?;
    Ok(done)
}
