//! Agent triggers.

use parley_domain::agent::{PatternType, Trigger, TriggerEvent};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLUMNS: &str = "id, agent_id, event, channel, kind, pattern, pattern_type, enabled, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    agent_id: i64,
    event: TriggerEvent,
    channel: String,
    kind: Option<String>,
    pattern: Option<String>,
    pattern_type: PatternType,
    enabled: bool,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl TryFrom<Row> for Trigger {
    type Error = crate::StoreError;
    fn try_from(r: Row) -> Result<Self, Self::Error> {
        Ok(Trigger {
            id: r.id,
            agent_id: r.agent_id,
            event: r.event,
            channel: r.channel,
            kind: r.kind,
            pattern: r.pattern,
            pattern_type: r.pattern_type,
            enabled: r.enabled,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// Every writable field of a trigger.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerFields {
    pub event: TriggerEvent,
    pub channel: String,
    pub kind: Option<String>,
    pub pattern: Option<String>,
    pub pattern_type: PatternType,
    pub enabled: bool,
}

impl From<&Trigger> for TriggerFields {
    fn from(t: &Trigger) -> Self {
        TriggerFields {
            event: t.event,
            channel: t.channel.clone(),
            kind: t.kind.clone(),
            pattern: t.pattern.clone(),
            pattern_type: t.pattern_type,
            enabled: t.enabled,
        }
    }
}

/// Binds a trigger's fields in the order both writes number them.
macro_rules! bind_fields {
    ($q:expr, $f:expr) => {
        $q.bind($f.event.as_str())
            .bind(&$f.channel)
            .bind(&$f.kind)
            .bind(&$f.pattern)
            .bind($f.pattern_type.as_str())
            .bind($f.enabled)
    };
}

pub async fn insert(c: &mut impl AsHandle, scope: Scope, agent_id: i64, f: &TriggerFields) -> StoreResult<Trigger> {
    forget_routes(c);
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO agent_triggers (workspace_id, livemode, agent_id, event, channel, kind, pattern, pattern_type,
            enabled, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING {COLUMNS}"
    ));
    let row: Row =
        fetch_one!(c, bind_fields!(sqlx::query_as(sql).bind_scope(scope).bind(agent_id), f).bind(Timestamp::now()))?;
    row.try_into()
}

pub async fn update(
    c: &mut impl AsHandle,
    scope: Scope,
    agent_id: i64,
    id: i64,
    f: &TriggerFields,
) -> StoreResult<Option<Trigger>> {
    forget_routes(c);
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE agent_triggers SET event = $5, channel = $6, kind = $7, pattern = $8, pattern_type = $9, enabled = $10,
            updated_at = $11
         WHERE workspace_id = $1 AND livemode = $2 AND agent_id = $3 AND id = $4 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(
        c,
        bind_fields!(sqlx::query_as(sql).bind_scope(scope).bind(agent_id).bind(id), f).bind(Timestamp::now())
    )?;
    row.map(Trigger::try_from).transpose()
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, agent_id: i64, id: i64) -> StoreResult<Option<Trigger>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM agent_triggers WHERE workspace_id = $1 AND livemode = $2 AND agent_id = $3 AND id = $4"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(agent_id).bind(id))?;
    row.map(Trigger::try_from).transpose()
}

/// Deletes a trigger; returns whether it existed.
pub async fn delete(c: &mut impl AsHandle, scope: Scope, agent_id: i64, id: i64) -> StoreResult<bool> {
    forget_routes(c);
    let done = execute!(
        c,
        sqlx::query(
            "DELETE FROM agent_triggers WHERE workspace_id = $1 AND livemode = $2 AND agent_id = $3 AND id = $4",
        )
        .bind_scope(scope)
        .bind(agent_id)
        .bind(id)
    )?;
    Ok(done == 1)
}

/// An agent's triggers, oldest first, and their count.
pub async fn list(c: &mut impl AsHandle, scope: Scope, agent_id: i64, page: Page) -> StoreResult<(Vec<Trigger>, i64)> {
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM agent_triggers WHERE workspace_id = $1 AND livemode = $2 AND agent_id = $3",
        )
        .bind_scope(scope)
        .bind(agent_id)
    )?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM agent_triggers WHERE workspace_id = $1 AND livemode = $2 AND agent_id = $3
         ORDER BY id LIMIT $4 OFFSET $5"
    ));
    let rows: Vec<Row> =
        fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(agent_id).bind(page.limit).bind(page.offset))?;
    let items = rows.into_iter().map(Trigger::try_from).collect::<Result<_, _>>()?;
    Ok((items, total))
}

/// The enabled triggers for `event` of the scope's active, non-template
/// agents, in routing order: the agent's priority (highest first), then its
/// id, then the trigger's id.
pub async fn routable(c: &mut impl AsHandle, scope: Scope, event: TriggerEvent) -> StoreResult<Vec<Trigger>> {
    // A transaction reads them once: a group commit's messages are routed
    // with one statement, not one each. Agent and trigger writes forget them.
    if let Some(known) = c.route_memo().and_then(|m| m.triggers.get(&(scope, event))) {
        return Ok(known.clone());
    }
    let columns = COLUMNS.split(", ").map(|c| format!("t.{c}")).collect::<Vec<_>>().join(", ");
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {columns} FROM agent_triggers t
         JOIN agents a ON a.workspace_id = t.workspace_id AND a.livemode = t.livemode AND a.id = t.agent_id
         WHERE t.workspace_id = $1 AND t.livemode = $2 AND t.event = $3 AND t.enabled
           AND a.status = 'active' AND NOT a.is_template
         ORDER BY a.priority DESC, a.id, t.id"
    ));
    let rows: Vec<Row> = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(event.as_str()))?;
    let triggers = rows.into_iter().map(Trigger::try_from).collect::<StoreResult<Vec<_>>>()?;
    if let Some(memo) = c.route_memo() {
        memo.triggers.insert((scope, event), triggers.clone());
    }
    Ok(triggers)
}

/// Forgets the routable triggers a transaction has looked up (an agent or
/// a trigger changed).
pub(crate) fn forget_routes(c: &mut impl AsHandle) {
    if let Some(memo) = c.route_memo() {
        memo.clear();
    }
}
