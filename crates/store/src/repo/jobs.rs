//! The durable job queue's table (see migration 0015 and `crates/jobs`).
//!
//! Jobs are enqueued in the caller's transaction. `claim` leases due jobs
//! (`FOR UPDATE SKIP LOCKED` on PostgreSQL; SQLite has one writer), and
//! only the lease holder may complete, retry or bury a job, so a worker
//! whose lease lapsed cannot undo the work of the one that took over.

use parley_domain::{Mode, Scope, Timestamp};
use serde_json::Value;
use sqlx::types::Json;

use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_optional};

/// A kind of background job, by its payload's type. The payload's JSON is
/// a contract with jobs an earlier version queued and a later one runs (a
/// rolling upgrade, a restart with work waiting), so each kind keeps a
/// golden test of its form; `parley_jobs` enqueues and reads jobs by it.
pub trait BackgroundJob: serde::Serialize + serde::de::DeserializeOwned {
    /// The `kind` column.
    const KIND: &'static str;

    /// The payload as stored.
    fn to_payload(&self) -> Value {
        serde_json::to_value(self).expect("a job payload is plain data and always serialises")
    }
}

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct NewJob<'a> {
    pub kind: &'a str,
    /// Jobs of one queue run one at a time, in enqueue order.
    pub queue: Option<String>,
    /// `queue` was born in the caller's transaction: no job can be ahead
    /// of this one, on any instance.
    pub queue_is_new: bool,
    pub payload: Value,
    /// The workspace and mode it works for, if any (for inspection).
    pub scope: Option<Scope>,
    pub run_at: Timestamp,
}

/// A job as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobRow {
    pub id: i64,
    pub kind: String,
    pub queue: Option<String>,
    pub payload: Json<Value>,
    pub workspace_id: Option<i64>,
    pub livemode: Option<bool>,
    /// `pending` or `dead`.
    pub status: String,
    /// Attempts that failed before now.
    pub attempts: i32,
    /// Times in a row the job was claimed after its lease lapsed (its
    /// process died mid-run); reset when an attempt finishes.
    pub interruptions: i32,
    pub run_at: Timestamp,
    pub leased_by: Option<String>,
    pub lease_until: Option<Timestamp>,
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    pub dead_at: Option<Timestamp>,
}

impl JobRow {
    pub fn scope(&self) -> Option<Scope> {
        Some(Scope::new(self.workspace_id?, Mode::from_livemode(self.livemode?)))
    }
}

const COLUMNS: &str = "id, kind, queue, payload, workspace_id, livemode, status, attempts, run_at, leased_by, \
                       lease_until, last_error, created_at, dead_at, interruptions";

/// Enqueues `job` (in the caller's transaction); returns its id. When a
/// worker here takes jobs of its kind and the job is the first of its
/// queue, it is written leased to that worker and handed to it after the
/// commit (see [`crate::JobBell`]).
pub async fn enqueue(c: &mut impl AsHandle, job: NewJob<'_>) -> StoreResult<i64> {
    insert(c, job).await?.ok_or_else(|| sqlx::Error::RowNotFound.into())
}

/// Enqueues `job` unless a unique index says its queue already has one
/// (webhook drains: one per endpoint); then `None`. On PostgreSQL a
/// concurrent transaction queuing the same waits for this one and then
/// finds the job.
pub async fn enqueue_unless_queued(c: &mut impl AsHandle, job: NewJob<'_>) -> StoreResult<Option<i64>> {
    insert(c, job).await
}

async fn insert(c: &mut impl AsHandle, job: NewJob<'_>) -> StoreResult<Option<i64>> {
    // Handed over when this instance's worker takes the kind and the job is
    // the first pending one of its queue, checked inside the INSERT (no
    // statement of its own). On PostgreSQL a queued job is always left to a
    // claim: a concurrent transaction may queue behind the same queue
    // unseen, commit first and be claimed elsewhere, and then two jobs of one
    // queue would run at once (locking the queue instead would make such
    // transactions wait on each other, in any order, and risk deadlocks).
    // SQLite has one writer. A queue born in this transaction has no one
    // ahead or behind unseen: handed over on both.
    let postgres = c.is_postgres();
    let taker = c.job_taker(job.kind).filter(|_| job.queue.is_none() || job.queue_is_new || !postgres);
    let (leased_by, lease_until) = match (&taker, &job.queue) {
        (Some(_), Some(_)) if !job.queue_is_new => (
            "CASE WHEN EXISTS (SELECT 1 FROM jobs WHERE queue = $2 AND status = 'pending') THEN NULL ELSE $8 END",
            "CASE WHEN EXISTS (SELECT 1 FROM jobs WHERE queue = $2 AND status = 'pending') THEN NULL ELSE $9 END",
        ),
        _ => ("$8", "$9"),
    };
    let now = Timestamp::now();
    let row: Option<JobRow> = fetch_optional!(
        c,
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO jobs (kind, queue, payload, workspace_id, livemode, run_at, created_at, leased_by, lease_until)
             VALUES ($1, $2, $3, $4, $5, $6, $7, {leased_by}, {lease_until}) ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
        )))
        .bind(job.kind)
        .bind(&job.queue)
        .bind(Json(&job.payload))
        .bind(job.scope.map(|s| s.workspace_id))
        .bind(job.scope.map(|s| s.livemode()))
        .bind(job.run_at)
        .bind(now)
        .bind(taker.as_ref().map(|t| t.worker.as_ref()))
        .bind(taker.as_ref().map(|t| now.plus_duration(t.lease)))
    )?;
    match (taker, row) {
        (Some(taker), Some(row)) if row.leased_by.is_some() => {
            // Its worker gets it after the commit: no need to wake it to claim.
            let id = row.id;
            c.hand_over(taker, row);
            Ok(Some(id))
        }
        (_, row) => {
            c.queued_job(job.kind);
            Ok(row.map(|r| r.id))
        }
    }
}

/// Whether any job of `kinds` is claimable now: a read, so a worker looks
/// before it takes the write lock to claim.
pub async fn any_claimable(c: &mut impl AsHandle, kinds: &[&str]) -> StoreResult<bool> {
    if kinds.is_empty() {
        return Ok(false);
    }
    let placeholders: Vec<String> = (0..kinds.len()).map(|i| format!("${}", i + 2)).collect();
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT 1 FROM jobs
         WHERE status = 'pending' AND run_at <= $1 AND (lease_until IS NULL OR lease_until < $1)
           AND kind IN ({kinds})
         LIMIT 1",
        kinds = placeholders.join(", "),
    ));
    let found: Option<(i32,)> = crate::dispatch!(c, conn => {
        let mut q = sqlx::query_as(sql).bind(Timestamp::now());
        for k in kinds {
            q = q.bind(*k);
        }
        q.fetch_optional(conn).await
    })?;
    Ok(found.is_some())
}

/// Leases up to `limit` due jobs of `kinds` to `worker` until `lease_until`:
/// pending, due, not leased by a live holder, first in their queue, and in
/// a queue with no other job under a live lease (on PostgreSQL transactions
/// may commit out of id order, so a later job can be running already).
///
/// A job still leased to another worker whose lease lapsed was cut off (its
/// process died, or stopped renewing): its `interruptions` go up, so a job
/// that kills its process is not run forever. A clean shutdown gives its
/// leases back instead, which does not count.
pub async fn claim(
    c: &mut impl AsHandle,
    kinds: &[&str],
    worker: &str,
    lease_until: Timestamp,
    limit: i64,
) -> StoreResult<Vec<JobRow>> {
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    let skip_locked = if c.is_postgres() { " FOR UPDATE SKIP LOCKED" } else { "" };
    // Kinds are the workers' own constants, bound as parameters all the same.
    let placeholders: Vec<String> = (0..kinds.len()).map(|i| format!("${}", i + 5)).collect();
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE jobs SET leased_by = $1, lease_until = $2,
            interruptions = interruptions + CASE WHEN leased_by IS NULL THEN 0 ELSE 1 END
         WHERE id IN (
            SELECT j.id FROM jobs j
            WHERE j.status = 'pending' AND j.run_at <= $3 AND (j.lease_until IS NULL OR j.lease_until < $3)
              AND j.kind IN ({kinds})
              AND (j.queue IS NULL OR NOT EXISTS (
                    SELECT 1 FROM jobs e WHERE e.queue = j.queue AND e.status = 'pending' AND e.id <> j.id
                      AND (e.id < j.id OR e.lease_until >= $3)))
            ORDER BY j.run_at, j.id LIMIT $4{skip_locked})
         RETURNING {COLUMNS}",
        kinds = placeholders.join(", "),
    ));
    crate::dispatch!(c, conn => {
        let mut q = sqlx::query_as(sql).bind(worker).bind(lease_until).bind(Timestamp::now()).bind(limit);
        for k in kinds {
            q = q.bind(*k);
        }
        q.fetch_all(conn).await
    })
    .map(|mut rows: Vec<JobRow>| {
        rows.sort_by_key(|r| (r.run_at, r.id));
        rows
    })
    .map_err(Into::into)
}

/// Extends the leases `worker` still holds; returns how many.
pub async fn renew(c: &mut impl AsHandle, worker: &str, lease_until: Timestamp) -> StoreResult<u64> {
    Ok(execute!(
        c,
        sqlx::query("UPDATE jobs SET lease_until = $2 WHERE leased_by = $1 AND status = 'pending'")
            .bind(worker)
            .bind(lease_until)
    )?)
}

/// Removes a job `worker` holds (done). False if it no longer holds it.
pub async fn complete(c: &mut impl AsHandle, id: i64, worker: &str) -> StoreResult<bool> {
    let n = execute!(c, sqlx::query("DELETE FROM jobs WHERE id = $1 AND leased_by = $2").bind(id).bind(worker))?;
    Ok(n == 1)
}

/// Gives a held job back to run at `run_at`. `failed` counts the attempt
/// (a retry); a job that only asks to run again later does not.
pub async fn reschedule(
    c: &mut impl AsHandle,
    id: i64,
    worker: &str,
    run_at: Timestamp,
    failed: Option<&str>,
) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE jobs SET run_at = $3, leased_by = NULL, lease_until = NULL, interruptions = 0,
                attempts = attempts + CASE WHEN $4 THEN 1 ELSE 0 END, last_error = COALESCE($5, last_error)
             WHERE id = $1 AND leased_by = $2 AND status = 'pending'",
        )
        .bind(id)
        .bind(worker)
        .bind(run_at)
        .bind(failed.is_some())
        .bind(failed)
    )?;
    Ok(n == 1)
}

/// Dead-letters a held job after its last attempt, keeping the error.
pub async fn bury(c: &mut impl AsHandle, id: i64, worker: &str, error: &str) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE jobs SET status = 'dead', attempts = attempts + 1, last_error = $3, dead_at = $4,
                leased_by = NULL, lease_until = NULL
             WHERE id = $1 AND leased_by = $2 AND status = 'pending'",
        )
        .bind(id)
        .bind(worker)
        .bind(error)
        .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

/// Gives back every lease `worker` holds (a clean shutdown), due at once.
pub async fn release_all(c: &mut impl AsHandle, worker: &str) -> StoreResult<u64> {
    Ok(execute!(
        c,
        sqlx::query("UPDATE jobs SET leased_by = NULL, lease_until = NULL WHERE leased_by = $1").bind(worker)
    )?)
}

/// One job, whatever its state (tests, inspection).
pub async fn get(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<JobRow>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM jobs WHERE id = $1"));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind(id))?)
}

/// The jobs of `kind` in enqueue order, dead ones included (tests, inspection).
pub async fn of_kind(c: &mut impl AsHandle, kind: &str) -> StoreResult<Vec<JobRow>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM jobs WHERE kind = $1 ORDER BY id"));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind(kind))?)
}

/// The pending jobs of one kind, for the metrics.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KindDepth {
    pub kind: String,
    /// Not under a live lease (due or not).
    pub queued: i64,
    /// Under a live lease.
    pub running: i64,
    /// The earliest `run_at` among the due, unleased ones.
    pub oldest_due: Option<Timestamp>,
}

/// The queue's depth by kind at `now` (dead jobs are not counted): one
/// pass over the pending jobs (`jobs_due` covers them).
pub async fn depths(c: &mut impl AsHandle, now: Timestamp) -> StoreResult<Vec<KindDepth>> {
    Ok(fetch_all!(
        c,
        sqlx::query_as(
            "SELECT kind,
                CAST(SUM(CASE WHEN lease_until IS NULL OR lease_until < $1 THEN 1 ELSE 0 END) AS BIGINT) AS queued,
                CAST(SUM(CASE WHEN lease_until >= $1 THEN 1 ELSE 0 END) AS BIGINT) AS running,
                MIN(CASE WHEN (lease_until IS NULL OR lease_until < $1) AND run_at <= $1 THEN run_at END) AS oldest_due
             FROM jobs WHERE status = 'pending' GROUP BY kind ORDER BY kind",
        )
        .bind(now)
    )?)
}
