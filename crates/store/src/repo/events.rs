//! The event log, written in the same transaction as the change it records.

use parley_domain::event::{Event, new_event_id};
use parley_domain::{Scope, Timestamp};
use serde_json::Value;
use sqlx::types::Json;

use crate::{AsHandle, StoreResult, execute, fetch_all};

/// Appends an event of type `kind` whose `data` is the resource as the API shows it.
pub async fn append(c: &mut impl AsHandle, scope: Scope, kind: &str, data: Value) -> StoreResult<Event> {
    let event = Event {
        id: new_event_id(),
        kind: kind.to_owned(),
        livemode: scope.livemode(),
        data,
        created_at: Timestamp::now(),
    };
    execute!(
        c,
        sqlx::query(
            "INSERT INTO events (id, workspace_id, livemode, type, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&event.id)
        .bind(scope.workspace_id)
        .bind(scope.livemode())
        .bind(&event.kind)
        .bind(Json(&event.data))
        .bind(event.created_at)
    )?;
    Ok(event)
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    livemode: bool,
    #[sqlx(rename = "type")]
    kind: String,
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
        .bind(scope.workspace_id)
        .bind(scope.livemode())
        .bind(kind)
        .bind(limit)
    )?;
    Ok(rows
        .into_iter()
        .map(|r| Event { id: r.id, kind: r.kind, livemode: r.livemode, data: r.data.0, created_at: r.created_at })
        .collect())
}
