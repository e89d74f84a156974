//! Periodic housekeeping: what expires is purged so tables stay small.

use parley_domain::Timestamp;
use parley_store::repo;

use crate::{ServiceResult, Services};

/// How long things are kept.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Idempotency keys (hours).
    pub idempotency_hours: i64,
    /// Events and their delivery logs (days).
    pub event_days: i64,
}

/// What one pass purged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub idempotency_keys: u64,
    /// Message-count deltas folded into their quarter hours (PostgreSQL).
    pub message_count_deltas: u64,
    /// Files written for a row that never came (see `files::stage`).
    pub orphaned_files: usize,
}

/// Folds the message-count deltas (its own short transaction: readers
/// and writers never wait for it); purges idempotency keys, events and
/// delivery logs past their retention, signing keys retired a day ago (they signed no token still valid) and
/// OAuth codes and tokens expired a day ago, in one transaction; then
/// removes files staged for a row that never came (a crash between the
/// two), an hour on.
pub async fn purge(svc: &Services, retention: Retention) -> ServiceResult<Purged> {
    let now = Timestamp::now();
    let mut tx = svc.begin().await?;
    let message_count_deltas = repo::overview::fold_message_counts(&mut tx).await?;
    svc.commit(tx).await?;
    let mut tx = svc.begin().await?;
    let keys =
        repo::idempotency::purge_created_before(&mut tx, now.plus_seconds(-retention.idempotency_hours * 3600)).await?;
    repo::sessions::delete_signing_keys_retired_before(&mut tx, now.plus_seconds(-24 * 3600)).await?;
    // A day's grace: a refresh token presented again soon after it expired
    // still finds its row (and is refused as expired, not unknown).
    repo::oauth::purge_expired(&mut tx, now.plus_seconds(-24 * 3600)).await?;
    // Delivery reports no sent message claimed within a day never will.
    repo::conversations::purge_early_reports_before(&mut tx, now.plus_seconds(-24 * 3600)).await?;
    let events_before = now.plus_seconds(-retention.event_days * 24 * 3600);
    repo::webhooks::purge_created_before(&mut tx, events_before).await?;
    repo::events::purge_created_before(&mut tx, events_before).await?;
    svc.commit(tx).await?;
    let orphaned_files = crate::files::sweep_staged(svc, crate::files::STAGED_GRACE, 1000).await?;
    Ok(Purged { idempotency_keys: keys, message_count_deltas, orphaned_files })
}
