//! Webhook endpoints, the delivery outbox and the attempt log.
//!
//! The API-facing functions take a `Scope`. The dispatcher's functions work
//! on rows it has claimed under a lease, addressed by their own ids: the
//! worker serves every workspace, and no user input reaches those queries.

use parley_domain::event::EventType;
use parley_domain::validation::Page;
use parley_domain::webhook::{DeliveryAttempt, EndpointStatus, WebhookEndpoint};
use parley_domain::{Scope, Timestamp};
use serde_json::Value;
use sqlx::types::Json;

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLUMNS: &str = "id, workspace_id, livemode, url, description, events, status, disabled_reason, sealed_secret, \
    sealed_previous_secret, previous_secret_expires_at, failing_since, created_at, updated_at";

/// An endpoint with its sealed secrets (never returned by the API).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EndpointRow {
    pub id: i64,
    pub workspace_id: i64,
    pub livemode: bool,
    pub url: String,
    pub description: Option<String>,
    pub events: Json<Vec<String>>,
    pub status: EndpointStatus,
    pub disabled_reason: Option<String>,
    pub sealed_secret: String,
    pub sealed_previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<Timestamp>,
    pub failing_since: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl EndpointRow {
    pub fn to_api(&self) -> StoreResult<WebhookEndpoint> {
        Ok(WebhookEndpoint {
            id: self.id,
            url: self.url.clone(),
            events: self.events.0.clone(),
            description: self.description.clone(),
            status: self.status,
            disabled_reason: self.disabled_reason.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }

    /// The sealed secrets that sign right now: the current one, and the
    /// previous one until it expires.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&str> {
        let mut out = vec![self.sealed_secret.as_str()];
        if let (Some(prev), Some(until)) = (&self.sealed_previous_secret, self.previous_secret_expires_at)
            && until > now
        {
            out.push(prev);
        }
        out
    }
}

pub async fn insert_endpoint(
    c: &mut impl AsHandle,
    scope: Scope,
    url: &str,
    events: &[String],
    description: Option<&str>,
    sealed_secret: &str,
) -> StoreResult<EndpointRow> {
    forget_subscribers(c);
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO webhook_endpoints (workspace_id, livemode, url, description, events, status, sealed_secret, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $7) RETURNING {COLUMNS}"
    ));
    Ok(fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(url)
            .bind(description)
            .bind(Json(events))
            .bind(sealed_secret)
            .bind(Timestamp::now())
    )?)
}

pub async fn get_endpoint(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<EndpointRow>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM webhook_endpoints WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?)
}

pub async fn list_endpoints(c: &mut impl AsHandle, scope: Scope, page: Page) -> StoreResult<(Vec<EndpointRow>, i64)> {
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as("SELECT COUNT(*) FROM webhook_endpoints WHERE workspace_id = $1 AND livemode = $2")
            .bind_scope(scope)
    )?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM webhook_endpoints WHERE workspace_id = $1 AND livemode = $2
         ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4"
    ));
    let rows = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(page.limit).bind(page.offset))?;
    Ok((rows, total))
}

/// The fields a user can change.
pub struct EndpointChanges<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub description: Option<&'a str>,
    pub status: EndpointStatus,
    pub disabled_reason: Option<&'a str>,
}

pub async fn update_endpoint(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    ch: &EndpointChanges<'_>,
) -> StoreResult<Option<EndpointRow>> {
    forget_subscribers(c);
    if ch.status == EndpointStatus::Active {
        // Deliveries that waited while it was disabled go out again.
        ensure_drains(c, scope, &[id]).await?;
    }
    // Re-enabling forgets the failure streak.
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE webhook_endpoints SET url = $4, events = $5, description = $6, status = $7, disabled_reason = $8,
            failing_since = CASE WHEN $7 = 'active' THEN NULL ELSE failing_since END, updated_at = $9
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    Ok(fetch_optional!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(id)
            .bind(ch.url)
            .bind(Json(ch.events))
            .bind(ch.description)
            .bind(ch.status.as_str())
            .bind(ch.disabled_reason)
            .bind(Timestamp::now())
    )?)
}

/// Installs a new secret, keeping the old one valid until `previous_until`.
pub async fn rotate_secret(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    sealed_new: &str,
    previous_until: Timestamp,
) -> StoreResult<Option<EndpointRow>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE webhook_endpoints SET sealed_previous_secret = sealed_secret, previous_secret_expires_at = $5,
            sealed_secret = $4, updated_at = $6
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    Ok(fetch_optional!(
        c,
        sqlx::query_as(sql).bind_scope(scope).bind(id).bind(sealed_new).bind(previous_until).bind(Timestamp::now())
    )?)
}

pub async fn delete_endpoint(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<bool> {
    forget_subscribers(c);
    for table in ["webhook_attempts", "webhook_deliveries"] {
        let sql = sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE workspace_id = $1 AND livemode = $2 AND endpoint_id = $3"
        ));
        execute!(c, sqlx::query(sql).bind_scope(scope).bind(id))?;
    }
    let n = execute!(
        c,
        sqlx::query("DELETE FROM webhook_endpoints WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    Ok(n == 1)
}

/// Queues `event` for every active endpoint of the scope subscribed to its
/// type (or to `*`). Called by `events::append`, inside its transaction.
pub(crate) async fn fan_out(
    c: &mut impl AsHandle,
    scope: Scope,
    event_id: &str,
    kind: EventType,
    now: Timestamp,
) -> StoreResult<u64> {
    fan_out_many(c, scope, std::slice::from_ref(&event_id.to_owned()), kind, now).await
}

/// The active endpoints of the scope subscribed to `kind` (or to `*`). A
/// transaction reads the scope's active endpoints once: a burst of events
/// (a group commit, an import) then queues with one statement each, or
/// none when nobody listens. Endpoint writes forget what it learnt.
async fn subscribers(c: &mut impl AsHandle, scope: Scope, kind: &str) -> StoreResult<Vec<i64>> {
    let takes = |events: &Vec<String>| events.iter().any(|e| e == kind || e == "*");
    if let Some(known) = c.subscriber_memo().and_then(|m| m.get(&scope)) {
        return Ok(known.iter().filter(|(_, events)| takes(events)).map(|(id, _)| *id).collect());
    }
    let rows: Vec<(i64, Json<Vec<String>>)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id, events FROM webhook_endpoints
             WHERE workspace_id = $1 AND livemode = $2 AND status = 'active' ORDER BY id"
        )
        .bind_scope(scope)
    )?;
    let endpoints: Vec<(i64, Vec<String>)> = rows.into_iter().map(|(id, events)| (id, events.0)).collect();
    let ids = endpoints.iter().filter(|(_, events)| takes(events)).map(|(id, _)| *id).collect();
    if let Some(memo) = c.subscriber_memo() {
        memo.insert(scope, endpoints);
    }
    Ok(ids)
}

/// Forgets the subscribers a transaction has looked up (endpoints changed).
fn forget_subscribers(c: &mut impl AsHandle) {
    if let Some(memo) = c.subscriber_memo() {
        memo.clear();
    }
}

/// `fan_out` for several events of one type, created at `now`, queued in
/// the order given.
pub(crate) async fn fan_out_many(
    c: &mut impl AsHandle,
    scope: Scope,
    event_ids: &[String],
    kind: EventType,
    now: Timestamp,
) -> StoreResult<u64> {
    let endpoints = subscribers(c, scope, kind.as_str()).await?;
    if endpoints.is_empty() {
        return Ok(0);
    }
    let pairs: Vec<(&str, i64)> =
        event_ids.iter().flat_map(|ev| endpoints.iter().map(move |ep| (ev.as_str(), *ep))).collect();
    let mut queued = 0;
    for chunk in pairs.chunks(500) {
        queued += crate::dispatch!(c, conn => {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO webhook_deliveries (workspace_id, livemode, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at) ",
            );
            q.push_values(chunk, |mut b, (event_id, endpoint_id)| {
                b.push_bind(scope.workspace_id)
                    .push_bind(scope.livemode())
                    .push_bind(*endpoint_id)
                    .push_bind(*event_id)
                    .push_bind(kind)
                    .push_bind("pending")
                    .push_bind(0_i32)
                    .push_bind(now)
                    .push_bind(now);
            });
            q.build().execute(conn).await.map(|r| r.rows_affected())
        })?;
    }
    ensure_drains(c, scope, &endpoints).await?;
    Ok(queued)
}

/// Queues one event for one endpoint (the `webhook.test` event).
pub async fn enqueue(
    c: &mut impl AsHandle,
    scope: Scope,
    endpoint_id: i64,
    event_id: &str,
    kind: &str,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO webhook_deliveries (workspace_id, livemode, endpoint_id, event_id, event_type, status, attempts, next_attempt_at, created_at)
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6)",
        )
        .bind_scope(scope)
        .bind(endpoint_id)
        .bind(event_id)
        .bind(kind)
        .bind(Timestamp::now())
    )?;
    ensure_drains(c, scope, &[endpoint_id]).await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    id: i64,
    event_id: String,
    event_type: String,
    attempt: i64,
    status_code: Option<i64>,
    error: Option<String>,
    duration_ms: i64,
    response_body_excerpt: Option<String>,
    created_at: Timestamp,
    next_attempt_at: Option<Timestamp>,
}

/// An endpoint's attempts, newest first.
pub async fn list_attempts(
    c: &mut impl AsHandle,
    scope: Scope,
    endpoint_id: i64,
    page: Page,
) -> StoreResult<(Vec<DeliveryAttempt>, i64)> {
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM webhook_attempts WHERE workspace_id = $1 AND livemode = $2 AND endpoint_id = $3"
        )
        .bind_scope(scope)
        .bind(endpoint_id)
    )?;
    let rows: Vec<AttemptRow> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id, event_id, event_type, CAST(attempt AS BIGINT) AS attempt, CAST(status_code AS BIGINT) AS status_code,
                    error, duration_ms, response_body_excerpt, created_at, next_attempt_at
             FROM webhook_attempts WHERE workspace_id = $1 AND livemode = $2 AND endpoint_id = $3
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
        )
        .bind_scope(scope)
        .bind(endpoint_id)
        .bind(page.limit)
        .bind(page.offset)
    )?;
    let items = rows
        .into_iter()
        .map(|r| DeliveryAttempt {
            id: r.id,
            event_id: r.event_id,
            event_type: r.event_type,
            attempt: r.attempt,
            status_code: r.status_code,
            error: r.error,
            duration_ms: r.duration_ms,
            response_body_excerpt: r.response_body_excerpt,
            created_at: r.created_at,
            next_attempt_at: r.next_attempt_at,
        })
        .collect();
    Ok((items, total))
}

/// Makes the delivery an attempt belongs to due now (again, if it had
/// finished). Returns the delivery id, or `None` if no such attempt.
pub async fn retry_attempt(
    c: &mut impl AsHandle,
    scope: Scope,
    endpoint_id: i64,
    attempt_id: i64,
) -> StoreResult<Option<i64>> {
    let found: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT delivery_id FROM webhook_attempts WHERE workspace_id = $1 AND livemode = $2 AND endpoint_id = $3 AND id = $4",
        )
        .bind_scope(scope)
        .bind(endpoint_id)
        .bind(attempt_id)
    )?;
    let Some((delivery_id,)) = found else { return Ok(None) };
    execute!(
        c,
        sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $4
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(delivery_id)
        .bind(Timestamp::now())
    )?;
    ensure_drains(c, scope, &[endpoint_id]).await?;
    Ok(Some(delivery_id))
}

// ---- the dispatcher's side --------------------------------------------------

/// The job kind that delivers one endpoint's due deliveries, in order: at
/// most one is pending per endpoint (its queue), created whenever
/// deliveries are queued for an endpoint that has none.
pub const DRAIN_KIND: &str = "webhook.endpoint";

/// The `webhook.endpoint` job: deliver endpoint `endpoint_id`'s due
/// deliveries, in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DrainJob {
    pub endpoint_id: i64,
}

impl crate::repo::jobs::BackgroundJob for DrainJob {
    const KIND: &'static str = DRAIN_KIND;
}

fn drain_queue(endpoint_id: i64) -> String {
    format!("webhook:{endpoint_id}")
}

/// Makes sure each endpoint has a pending drain job (in the caller's
/// transaction, after queuing deliveries). On PostgreSQL an existing job is
/// share-locked until commit, so a drain that is finishing waits for these
/// deliveries to commit and then sees them (see [`settle_drain`]).
async fn ensure_drains(c: &mut impl AsHandle, scope: Scope, endpoint_ids: &[i64]) -> StoreResult<()> {
    if endpoint_ids.is_empty() {
        return Ok(());
    }
    // A running drain waits for new deliveries on this bell too.
    c.queued_job(DRAIN_KIND);
    // Drains are created in one order by every transaction (one waits for
    // another that is creating the same drain: never in a cycle).
    let mut endpoint_ids = endpoint_ids.to_vec();
    endpoint_ids.sort_unstable();
    endpoint_ids.dedup();
    let lock = if c.is_postgres() { " FOR SHARE" } else { "" };
    let queues: Vec<String> = endpoint_ids.iter().map(|id| drain_queue(*id)).collect();
    let now = Timestamp::now();
    // A drain waiting for a retry hours away runs now for the new delivery.
    crate::dispatch!(c, conn => {
        let mut q = sqlx::QueryBuilder::new("UPDATE jobs SET run_at = ");
        q.push_bind(now).push(" WHERE kind = ").push_bind(DRAIN_KIND);
        q.push(" AND status = 'pending' AND run_at > ").push_bind(now).push(" AND queue IN (");
        let mut list = q.separated(", ");
        for queue in &queues {
            list.push_bind(queue.as_str());
        }
        list.push_unseparated(")");
        q.build().execute(conn).await.map(|_| ())
    })?;
    let existing: Vec<(Option<String>,)> = crate::dispatch!(c, conn => {
        let mut q = sqlx::QueryBuilder::new("SELECT queue FROM jobs WHERE kind = ");
        q.push_bind(DRAIN_KIND).push(" AND status = 'pending' AND queue IN (");
        let mut list = q.separated(", ");
        for queue in &queues {
            list.push_bind(queue.as_str());
        }
        list.push_unseparated(")");
        q.push(lock);
        q.build_query_as().fetch_all(conn).await
    })?;
    for (id, queue) in endpoint_ids.iter().zip(queues) {
        if existing.iter().any(|(q,)| q.as_deref() == Some(queue.as_str())) {
            continue;
        }
        let job = crate::repo::jobs::NewJob {
            kind: DRAIN_KIND,
            queue: Some(queue),
            queue_is_new: false,
            payload: crate::repo::jobs::BackgroundJob::to_payload(&DrainJob { endpoint_id: *id }),
            scope: Some(scope),
            run_at: now,
        };
        crate::repo::jobs::enqueue_unless_queued(c, job).await?;
    }
    Ok(())
}

/// Ends or reschedules drain job `job_id` (held by `worker`) once its
/// endpoint has nothing due: it stays, due when the next retry is, while
/// the endpoint has pending deliveries, and is removed otherwise. The job
/// row is locked first, so deliveries queued meanwhile (which share-lock
/// it) have committed and are seen. False if the worker lost the job.
pub async fn settle_drain(c: &mut impl AsHandle, job_id: i64, worker: &str, endpoint_id: i64) -> StoreResult<bool> {
    let lock = if c.is_postgres() { " FOR UPDATE" } else { "" };
    let held: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM jobs WHERE id = $1 AND leased_by = $2 AND status = 'pending'{lock}"
        )))
        .bind(job_id)
        .bind(worker)
    )?;
    if held.is_none() {
        return Ok(false);
    }
    let next: Option<(Timestamp,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT d.next_attempt_at FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
             WHERE d.endpoint_id = $1 AND d.status = 'pending' AND e.status = 'active'
             ORDER BY d.next_attempt_at LIMIT 1",
        )
        .bind(endpoint_id)
    )?;
    match next {
        Some((at,)) => crate::repo::jobs::reschedule(c, job_id, worker, at, None).await,
        None => crate::repo::jobs::complete(c, job_id, worker).await,
    }
}

/// An endpoint being drained.
pub async fn endpoint_for_dispatch(c: &mut impl AsHandle, endpoint_id: i64) -> StoreResult<Option<EndpointRow>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM webhook_endpoints WHERE id = $1"));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind(endpoint_id))?)
}

/// A delivery due now, with the event it carries.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DueDelivery {
    pub id: i64,
    pub event_id: String,
    pub event_type: String,
    pub attempts: i64,
    pub livemode: bool,
    pub data: Json<Value>,
    pub event_created_at: Timestamp,
}

/// The endpoint's due deliveries in event order.
pub async fn due_deliveries(c: &mut impl AsHandle, endpoint_id: i64, limit: i64) -> StoreResult<Vec<DueDelivery>> {
    Ok(fetch_all!(
        c,
        sqlx::query_as(
            "SELECT d.id, d.event_id, d.event_type, CAST(d.attempts AS BIGINT) AS attempts, d.livemode, ev.data,
                    ev.created_at AS event_created_at
             FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
             WHERE d.endpoint_id = $1 AND d.status = 'pending' AND d.next_attempt_at <= $2
             ORDER BY d.id LIMIT $3",
        )
        .bind(endpoint_id)
        .bind(Timestamp::now())
        .bind(limit)
    )?)
}

/// What happened to one delivery attempt, to be recorded.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub delivery_id: i64,
    pub event_id: String,
    pub event_type: String,
    /// 1-based number of this attempt.
    pub attempt: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub response_body_excerpt: Option<String>,
    pub at: Timestamp,
    /// `Some` to retry then; `None` when the delivery is finished.
    pub next_attempt_at: Option<Timestamp>,
    pub succeeded: bool,
}

/// Records a batch of attempts of one endpoint, and what they mean for it:
/// a success ends its failure streak; `disable` turns it off with a reason.
pub async fn record_attempts(
    c: &mut impl AsHandle,
    endpoint: &EndpointRow,
    outcomes: &[AttemptOutcome],
    disable: Option<&str>,
) -> StoreResult<()> {
    for o in outcomes {
        let status = match (o.succeeded, o.next_attempt_at) {
            (true, _) => "succeeded",
            (false, Some(_)) => "pending",
            (false, None) => "failed",
        };
        execute!(
            c,
            sqlx::query(
                "UPDATE webhook_deliveries SET status = $2, attempts = $3, next_attempt_at = COALESCE($4, next_attempt_at)
                 WHERE id = $1",
            )
            .bind(o.delivery_id)
            .bind(status)
            .bind(o.attempt as i32)
            .bind(o.next_attempt_at)
        )?;
        execute!(
            c,
            sqlx::query(
                "INSERT INTO webhook_attempts (workspace_id, livemode, endpoint_id, delivery_id, event_id, event_type, attempt,
                    status_code, error, duration_ms, response_body_excerpt, next_attempt_at, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            )
            .bind(endpoint.workspace_id)
            .bind(endpoint.livemode)
            .bind(endpoint.id)
            .bind(o.delivery_id)
            .bind(&o.event_id)
            .bind(&o.event_type)
            .bind(o.attempt as i32)
            .bind(o.status_code.map(|s| s as i32))
            .bind(&o.error)
            .bind(o.duration_ms)
            .bind(&o.response_body_excerpt)
            .bind(o.next_attempt_at)
            .bind(o.at)
        )?;
    }
    // The streak follows the latest attempt: a success clears it, a failure
    // starts it if none is running.
    if let Some(last) = outcomes.last() {
        let failing_since = if last.succeeded { None } else { Some(endpoint.failing_since.unwrap_or(last.at)) };
        execute!(
            c,
            sqlx::query("UPDATE webhook_endpoints SET failing_since = $2 WHERE id = $1")
                .bind(endpoint.id)
                .bind(failing_since)
        )?;
    }
    if let Some(reason) = disable {
        forget_subscribers(c);
        execute!(
            c,
            sqlx::query(
                "UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $2, updated_at = $3 WHERE id = $1",
            )
            .bind(endpoint.id)
            .bind(reason)
            .bind(Timestamp::now())
        )?;
    }
    Ok(())
}

/// Deletes deliveries and attempts created before `before` (retention).
pub async fn purge_created_before(c: &mut impl AsHandle, before: Timestamp) -> StoreResult<u64> {
    let a = execute!(c, sqlx::query("DELETE FROM webhook_attempts WHERE created_at < $1").bind(before))?;
    let d = execute!(
        c,
        sqlx::query("DELETE FROM webhook_deliveries WHERE created_at < $1 AND status <> 'pending'").bind(before)
    )?;
    Ok(a + d)
}

/// Deliveries waiting to be made (every endpoint, workspace and mode), and
/// when the oldest was created: for the metrics.
pub async fn backlog(c: &mut impl AsHandle) -> StoreResult<(i64, Option<Timestamp>)> {
    Ok(fetch_one!(
        c,
        sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM webhook_deliveries WHERE status = 'pending'")
    )?)
}
