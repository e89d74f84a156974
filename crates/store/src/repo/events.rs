//! The event log, written in the same transaction as the change it records.

use parley_domain::event::{Event, EventType, new_event_id};
use parley_domain::{Scope, Timestamp};
use serde_json::Value;
use sqlx::types::Json;

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

/// Appends an event of type `kind` whose `data` is the resource as the API
/// shows it, and queues it for every webhook endpoint subscribed to it, in
/// the caller's transaction: the change, its event and its deliveries
/// commit together or not at all. A transaction writes its events together
/// just before it commits (a group commit's three events a message are one
/// statement, not three).
pub async fn append(c: &mut impl AsHandle, scope: Scope, kind: EventType, data: Value) -> StoreResult<Event> {
    let event = Event { id: new_event_id(), kind, livemode: scope.livemode(), data, created_at: Timestamp::now() };
    if let Some(now) = c.defer_event(scope, event.clone()) {
        insert_all(c, &[(scope, now)]).await?;
        super::webhooks::fan_out(c, scope, &event.id, event.kind, event.created_at).await?;
        c.events_written(scope, std::slice::from_ref(&event.id));
    }
    Ok(event)
}

/// Writes `events`, in order, in as few statements as SQLite's limit on
/// bound parameters allows (6 a row).
pub(crate) async fn insert_all(c: &mut impl AsHandle, events: &[(Scope, Event)]) -> StoreResult<()> {
    for chunk in events.chunks(500) {
        crate::dispatch!(c, conn => {
            let mut q = sqlx::QueryBuilder::new("INSERT INTO events (id, workspace_id, livemode, type, data, created_at) ");
            q.push_values(chunk, |mut b, (scope, event)| {
                b.push_bind(event.id.as_str())
                    .push_bind(scope.workspace_id)
                    .push_bind(scope.livemode())
                    .push_bind(event.kind)
                    .push_bind(Json(&event.data))
                    .push_bind(event.created_at);
            });
            q.build().execute(conn).await.map(|_| ())
        })?;
    }
    Ok(())
}

/// A PostgreSQL transaction's flush as one statement: bumps `counters` (in
/// the order given, on `shard`), writes `events`, and returns the active
/// webhook endpoints of the scopes in `look_up` with the event types each
/// takes, by id.
pub(crate) async fn flush_postgres(
    conn: &mut sqlx::PgConnection,
    counters: &[(Scope, String)],
    shard: i16,
    events: &[(Scope, Event)],
    look_up: &[Scope],
) -> StoreResult<Vec<(Scope, (i64, Vec<String>))>> {
    let rows: Vec<(i64, bool, i64, Json<Vec<String>>)> = sqlx::query_as(
        "WITH bumped AS (
             INSERT INTO scope_versions (workspace_id, livemode, resource, shard, version)
             SELECT w, l, r, $4, 1 FROM UNNEST($1::bigint[], $2::boolean[], $3::text[]) WITH ORDINALITY AS b(w, l, r, n)
             ORDER BY n
             ON CONFLICT (workspace_id, livemode, resource, shard) DO UPDATE SET version = scope_versions.version + 1
         ), written AS (
             INSERT INTO events (id, workspace_id, livemode, type, data, created_at)
             SELECT * FROM UNNEST($5::text[], $6::bigint[], $7::boolean[], $8::text[], $9::jsonb[], $10::timestamptz[])
         )
         SELECT e.workspace_id, e.livemode, e.id, e.events FROM webhook_endpoints e
         JOIN UNNEST($11::bigint[], $12::boolean[]) AS s(w, l) ON e.workspace_id = s.w AND e.livemode = s.l
         WHERE e.status = 'active' ORDER BY e.id",
    )
    .bind(counters.iter().map(|(s, _)| s.workspace_id).collect::<Vec<_>>())
    .bind(counters.iter().map(|(s, _)| s.livemode()).collect::<Vec<_>>())
    .bind(counters.iter().map(|(_, r)| r.as_str()).collect::<Vec<_>>())
    .bind(shard)
    .bind(events.iter().map(|(_, e)| e.id.as_str()).collect::<Vec<_>>())
    .bind(events.iter().map(|(s, _)| s.workspace_id).collect::<Vec<_>>())
    .bind(events.iter().map(|(s, _)| s.livemode()).collect::<Vec<_>>())
    .bind(events.iter().map(|(_, e)| e.kind.as_str()).collect::<Vec<_>>())
    .bind(events.iter().map(|(_, e)| Json(&e.data)).collect::<Vec<_>>())
    .bind(events.iter().map(|(_, e)| e.created_at).collect::<Vec<_>>())
    .bind(look_up.iter().map(|s| s.workspace_id).collect::<Vec<_>>())
    .bind(look_up.iter().map(|s| s.livemode()).collect::<Vec<_>>())
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(workspace_id, livemode, id, takes)| {
            (Scope::new(workspace_id, parley_domain::Mode::from_livemode(livemode)), (id, takes.0))
        })
        .collect())
}

/// Appends one event of type `kind` per item of `data`, in order, and queues
/// them for subscribed endpoints: `append` for bulk writes (imports), in a
/// few statements instead of two per event.
pub async fn append_many(
    c: &mut impl AsHandle,
    scope: Scope,
    kind: EventType,
    data: Vec<Value>,
) -> StoreResult<Vec<String>> {
    let now = Timestamp::now();
    let livemode = scope.livemode();
    let events: Vec<(Scope, Event)> = data
        .into_iter()
        .map(|data| (scope, Event { id: new_event_id(), kind, livemode, data, created_at: now }))
        .collect();
    insert_all(c, &events).await?;
    let ids: Vec<String> = events.into_iter().map(|(_, e)| e.id).collect();
    super::webhooks::fan_out_many(c, scope, &ids, kind, now).await?;
    c.events_written(scope, &ids);
    Ok(ids)
}

/// Appends an event now, without queueing it anywhere (the caller routes it).
pub async fn insert(c: &mut impl AsHandle, scope: Scope, kind: EventType, data: Value) -> StoreResult<Event> {
    let event = Event { id: new_event_id(), kind, livemode: scope.livemode(), data, created_at: Timestamp::now() };
    insert_all(c, std::slice::from_ref(&(scope, event.clone()))).await?;
    c.events_written(scope, std::slice::from_ref(&event.id));
    Ok(event)
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    livemode: bool,
    #[sqlx(rename = "type")]
    kind: EventType,
    data: Json<Value>,
    created_at: Timestamp,
}

/// The newest events first, optionally of one type.
pub async fn list(c: &mut impl AsHandle, scope: Scope, kind: Option<&str>, limit: i64) -> StoreResult<Vec<Event>> {
    let rows: Vec<Row> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id, livemode, type, data, created_at FROM events
         WHERE workspace_id = $1 AND livemode = $2 AND ($3 IS NULL OR type = $3)
         ORDER BY created_at DESC, id DESC LIMIT $4",
        )
        .bind_scope(scope)
        .bind(kind)
        .bind(limit)
    )?;
    Ok(rows
        .into_iter()
        .map(|r| Event { id: r.id, kind: r.kind, livemode: r.livemode, data: r.data.0, created_at: r.created_at })
        .collect())
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: &str) -> StoreResult<Option<Event>> {
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT id, livemode, type, data, created_at FROM events WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    Ok(row.map(|r| Event { id: r.id, kind: r.kind, livemode: r.livemode, data: r.data.0, created_at: r.created_at }))
}

/// A page of events, newest first, optionally of one type.
pub async fn page(
    c: &mut impl AsHandle,
    scope: Scope,
    kind: Option<&str>,
    page: parley_domain::validation::Page,
) -> StoreResult<(Vec<Event>, i64)> {
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM events WHERE workspace_id = $1 AND livemode = $2 AND ($3 IS NULL OR type = $3)"
        )
        .bind_scope(scope)
        .bind(kind)
    )?;
    let rows: Vec<Row> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id, livemode, type, data, created_at FROM events
             WHERE workspace_id = $1 AND livemode = $2 AND ($3 IS NULL OR type = $3)
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
        )
        .bind_scope(scope)
        .bind(kind)
        .bind(page.limit)
        .bind(page.offset)
    )?;
    let items = rows
        .into_iter()
        .map(|r| Event { id: r.id, kind: r.kind, livemode: r.livemode, data: r.data.0, created_at: r.created_at })
        .collect();
    Ok((items, total))
}

impl From<Row> for Event {
    fn from(r: Row) -> Event {
        Event { id: r.id, kind: r.kind, livemode: r.livemode, data: r.data.0, created_at: r.created_at }
    }
}

/// The events among `ids` in `scope`, oldest first (ids from elsewhere are
/// skipped, as are ids not written or already purged).
pub async fn by_ids(c: &mut impl AsHandle, scope: Scope, ids: &[String]) -> StoreResult<Vec<Event>> {
    let mut found = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let rows: Vec<Row> = crate::dispatch!(c, conn => {
            let mut q = sqlx::QueryBuilder::new("SELECT id, livemode, type, data, created_at FROM events WHERE workspace_id = ");
            q.push_bind(scope.workspace_id).push(" AND livemode = ").push_bind(scope.livemode()).push(" AND id IN (");
            let mut list = q.separated(", ");
            for id in chunk {
                list.push_bind(id.as_str());
            }
            q.push(")");
            q.build_query_as().fetch_all(&mut *conn).await
        })?;
        found.extend(rows.into_iter().map(Event::from));
    }
    found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(found)
}

/// The ids of the events created at or after `since` in `scope`, oldest
/// first, at most `limit` (a catch-up sweep reads ids before rows).
pub async fn ids_since(c: &mut impl AsHandle, scope: Scope, since: Timestamp, limit: i64) -> StoreResult<Vec<String>> {
    let rows: Vec<(String,)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id FROM events WHERE workspace_id = $1 AND livemode = $2 AND created_at >= $3
             ORDER BY created_at, id LIMIT $4",
        )
        .bind_scope(scope)
        .bind(since)
        .bind(limit)
    )?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// The events created at or after `since` in `scope`, oldest first, at
/// most `limit` (a stream's replay after a reconnect).
pub async fn since(c: &mut impl AsHandle, scope: Scope, since: Timestamp, limit: i64) -> StoreResult<Vec<Event>> {
    let rows: Vec<Row> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT id, livemode, type, data, created_at FROM events
             WHERE workspace_id = $1 AND livemode = $2 AND created_at >= $3
             ORDER BY created_at, id LIMIT $4",
        )
        .bind_scope(scope)
        .bind(since)
        .bind(limit)
    )?;
    Ok(rows.into_iter().map(Event::from).collect())
}

/// Deletes events created before `before` (kept 30 days).
pub async fn purge_created_before(c: &mut impl AsHandle, before: Timestamp) -> StoreResult<u64> {
    Ok(execute!(c, sqlx::query("DELETE FROM events WHERE created_at < $1").bind(before))?)
}
