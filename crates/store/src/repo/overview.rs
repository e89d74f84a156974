//! The home page's figures: per-day aggregates since a start, each read
//! through a scoped `(workspace_id, livemode, created_at)` index, so a
//! window costs the rows in it, never the whole table.

use parley_domain::overview::FailingEndpoint;
use parley_domain::{Scope, Timestamp};

use crate::repo::BindScope;
use crate::{AsHandle, Handle, StoreResult, fetch_all, fetch_one};

/// The number of whole days between `$3` (the window's start) and
/// `column` (a row's `created_at`): SQLite keeps microseconds, PostgreSQL timestamps.
/// On PostgreSQL a binary search among the days' starts (`width_bucket`)
/// costs a third of `EXTRACT(EPOCH …)`'s numeric arithmetic per row, which
/// over a busy week's messages (~250,000 rows) was most of the page's time.
fn day_of(c: &mut impl AsHandle, column: &str) -> String {
    match c.handle() {
        Handle::Sqlite(_) => format!("(({column} - $3) / 86400000000)"),
        Handle::Postgres(_) => format!(
            "CAST(width_bucket({column}, ARRAY(SELECT $3 + n * INTERVAL '1 day' FROM generate_series(0, {MAX_DAYS}) n)) - 1 AS BIGINT)"
        ),
    }
}

/// The longest window a caller asks for (the usage page's 90 days); a row
/// after its end (another instance's clock) falls in its last day.
const MAX_DAYS: i64 = 91;

/// Calls per day: `(day, count, talk milliseconds)`.
pub async fn calls(c: &mut impl AsHandle, scope: Scope, since: Timestamp) -> StoreResult<Vec<(i64, i64, i64)>> {
    let day = day_of(c, "x.created_at");
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {day} AS day, COUNT(*), CAST(COALESCE(SUM(x.duration_ms), 0) AS BIGINT) FROM calls x
         WHERE x.workspace_id = $1 AND x.livemode = $2 AND x.created_at >= $3 GROUP BY 1"
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(since))?)
}

/// Messages per day: `(day, inbound, outbound)`.
///
/// From the quarter-hour counts the `messages_count` trigger keeps
/// (migrations 0048, 0049) when the window starts on a quarter hour, as it
/// does at midnight in every real time zone: a busy week is at most 672
/// buckets (plus the last minute's unfolded deltas on PostgreSQL) instead
/// of ~250,000 messages. Any other start counts the messages themselves.
pub async fn messages(c: &mut impl AsHandle, scope: Scope, since: Timestamp) -> StoreResult<Vec<(i64, i64, i64)>> {
    if since.unix_micros() % QUARTER_HOUR_MICROS != 0 {
        return count_messages(c, scope, since).await;
    }
    let day = day_of(c, "x.bucket_start");
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {day} AS day, CAST(SUM(x.inbound) AS BIGINT), CAST(SUM(x.outbound) AS BIGINT) FROM message_count_totals x
         WHERE x.workspace_id = $1 AND x.livemode = $2 AND x.bucket_start >= $3 GROUP BY 1"
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(since))?)
}

/// `message_counts`' bucket width.
const QUARTER_HOUR_MICROS: i64 = 900_000_000;

/// The advisory lock a fold holds (PostgreSQL): one instance folds at a time.
pub const FOLD_LOCK: i64 = 4_907_384_521;

/// Folds the message-count deltas PostgreSQL's trigger appends into
/// `message_counts`, returning how many it folded (SQLite's trigger counts
/// in place: 0). One instance folds at a time (a transaction-scoped
/// advisory lock; the others skip), so the upserts never wait on each other;
/// the delete and the sums commit together, so readers count each message once.
pub async fn fold_message_counts(c: &mut impl AsHandle) -> StoreResult<u64> {
    let Handle::Postgres(conn) = c.handle() else { return Ok(0) };
    let ours: bool =
        sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)").bind(FOLD_LOCK).fetch_one(&mut *conn).await?;
    if !ours {
        return Ok(0);
    }
    let folded: i64 = sqlx::query_scalar(
        "WITH d AS (DELETE FROM message_count_deltas RETURNING workspace_id, livemode, bucket_start, inbound, outbound),
              s AS (INSERT INTO message_counts AS c (workspace_id, livemode, bucket_start, shard, inbound, outbound)
                    SELECT workspace_id, livemode, bucket_start, 0, SUM(inbound), SUM(outbound) FROM d
                    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                    ON CONFLICT (workspace_id, livemode, bucket_start, shard)
                    DO UPDATE SET inbound = c.inbound + EXCLUDED.inbound, outbound = c.outbound + EXCLUDED.outbound)
         SELECT COUNT(*) FROM d",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(folded as u64)
}

/// Messages per day, counted from the messages: one index range count per
/// day takes half the time of grouping every row by its day (measured on
/// 1M rows: PostgreSQL 17 against 35 ms, SQLite 22 against 49 ms).
async fn count_messages(c: &mut impl AsHandle, scope: Scope, since: Timestamp) -> StoreResult<Vec<(i64, i64, i64)>> {
    let sql = match c.handle() {
        Handle::Postgres(_) => format!(
            "SELECT CAST(d.n AS BIGINT), k.i, k.o FROM generate_series(0, {MAX_DAYS}) d(n), LATERAL (
               SELECT COUNT(*) FILTER (WHERE x.direction = 'inbound') AS i,
                      COUNT(*) FILTER (WHERE x.direction = 'outbound') AS o
               FROM messages x WHERE x.workspace_id = $1 AND x.livemode = $2
                 AND x.created_at >= $3 + d.n * INTERVAL '1 day' AND x.created_at < $3 + (d.n + 1) * INTERVAL '1 day'
             ) k WHERE k.i + k.o > 0"
        ),
        Handle::Sqlite(_) => {
            let count = |direction: &str| {
                format!(
                    "(SELECT COUNT(*) FROM messages x WHERE x.workspace_id = $1 AND x.livemode = $2
                       AND x.created_at >= $3 + d.n * 86400000000 AND x.created_at < $3 + (d.n + 1) * 86400000000
                       AND x.direction = '{direction}')"
                )
            };
            // Days with no message stay in (zeros): a filter on the counts
            // would make SQLite count each day twice.
            format!(
                "WITH RECURSIVE d(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM d WHERE n < {MAX_DAYS})
                 SELECT d.n, {}, {} FROM d",
                count("inbound"),
                count("outbound")
            )
        }
    };
    Ok(fetch_all!(c, sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind_scope(scope).bind(since))?)
}

/// Agent runs per day: `(day, runs, failed)`.
pub async fn agent_runs(c: &mut impl AsHandle, scope: Scope, since: Timestamp) -> StoreResult<Vec<(i64, i64, i64)>> {
    let day = day_of(c, "x.created_at");
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {day} AS day, COUNT(*), CAST(SUM(CASE WHEN x.status = 'failed' THEN 1 ELSE 0 END) AS BIGINT)
         FROM agent_runs x WHERE x.workspace_id = $1 AND x.livemode = $2 AND x.created_at >= $3 GROUP BY 1"
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(since))?)
}

/// Spend per day (charges less refunds): `(day, cents)`.
pub async fn spend(c: &mut impl AsHandle, scope: Scope, since: Timestamp) -> StoreResult<Vec<(i64, i64)>> {
    let day = day_of(c, "x.created_at");
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {day} AS day, CAST(COALESCE(SUM(-x.amount_cents), 0) AS BIGINT) FROM ledger_entries x
         WHERE x.workspace_id = $1 AND x.livemode = $2 AND x.created_at >= $3 AND x.type IN ('charge', 'refund')
         GROUP BY 1"
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(since))?)
}

/// The voice-to-voice milliseconds of every answered turn of the calls
/// placed since the start: `(day, ms)`.
///
/// Each call's segments are looked up by `call_segments_order`: as a plain
/// join PostgreSQL hashes every segment ever recorded (50,000 in the
/// dashboard benchmark against 11,000 in its week: 17 against 12 ms);
/// `OFFSET 0` keeps the lateral subquery from being flattened into it.
pub async fn turn_latencies(c: &mut impl AsHandle, scope: Scope, since: Timestamp) -> StoreResult<Vec<(i64, i64)>> {
    let day = day_of(c, "x.created_at");
    let sql = match c.handle() {
        Handle::Sqlite(_) => format!(
            "SELECT {day} AS day, CAST(json_extract(s.latency, '$.voice_to_voice_ms') AS INTEGER)
             FROM calls x JOIN call_segments s ON s.call_id = x.id
             WHERE x.workspace_id = $1 AND x.livemode = $2 AND x.created_at >= $3 AND s.latency IS NOT NULL"
        ),
        Handle::Postgres(_) => format!(
            "SELECT {day} AS day, t.v2v FROM calls x CROSS JOIN LATERAL (
               SELECT CAST(s.latency->>'voice_to_voice_ms' AS BIGINT) AS v2v FROM call_segments s
               WHERE s.call_id = x.id AND s.latency IS NOT NULL OFFSET 0
             ) t WHERE x.workspace_id = $1 AND x.livemode = $2 AND x.created_at >= $3"
        ),
    };
    let sql = sqlx::AssertSqlSafe(sql);
    let rows: Vec<(i64, Option<i64>)> = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(since))?;
    Ok(rows.into_iter().filter_map(|(d, ms)| Some((d, ms?))).collect())
}

/// Handoffs `requested` or `accepted`.
pub async fn open_handoffs(c: &mut impl AsHandle, scope: Scope) -> StoreResult<i64> {
    // The predicate is `handoffs_open`'s, so that partial index serves it.
    let (n,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM handoffs
             WHERE status IN ('requested', 'accepted') AND workspace_id = $1 AND livemode = $2"
        )
        .bind_scope(scope)
    )?;
    Ok(n)
}

/// Endpoints failing since their last success, or disabled; the longest
/// failing first.
pub async fn failing_endpoints(c: &mut impl AsHandle, scope: Scope, limit: i64) -> StoreResult<Vec<FailingEndpoint>> {
    let rows: Vec<(i64, String, String, Option<Timestamp>, Option<String>)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id, url, status, failing_since, disabled_reason FROM webhook_endpoints
             WHERE workspace_id = $1 AND livemode = $2 AND (failing_since IS NOT NULL OR status = 'disabled')
             ORDER BY CASE WHEN failing_since IS NULL THEN 1 ELSE 0 END, failing_since, id LIMIT $3"
        )
        .bind_scope(scope)
        .bind(limit)
    )?;
    Ok(rows
        .into_iter()
        .map(|(id, url, status, failing_since, disabled_reason)| FailingEndpoint {
            id,
            url,
            status,
            failing_since,
            disabled_reason,
        })
        .collect())
}

/// What agents cost per day: their runs' and their calls' cents, as
/// `(day, agent_id, cents)`.
pub async fn usage_by_agent(
    c: &mut impl AsHandle,
    scope: Scope,
    since: Timestamp,
) -> StoreResult<Vec<(i64, i64, i64)>> {
    let (runs, calls) = (day_of(c, "r.created_at"), day_of(c, "k.created_at"));
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT u.day, u.agent_id, CAST(SUM(u.cents) AS BIGINT) FROM (
           SELECT {runs} AS day, r.agent_id, r.cost_cents AS cents FROM agent_runs r
           WHERE r.workspace_id = $1 AND r.livemode = $2 AND r.created_at >= $3 AND r.cost_cents > 0
           UNION ALL
           SELECT {calls} AS day, k.agent_id, k.cost_cents AS cents FROM calls k
           WHERE k.workspace_id = $1 AND k.livemode = $2 AND k.created_at >= $3 AND k.cost_cents > 0
         ) u GROUP BY u.day, u.agent_id"
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(since))?)
}
