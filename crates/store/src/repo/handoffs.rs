//! Handoffs between agents and humans.

use parley_domain::conversation::{Author, AuthorType, Handoff, HandoffStatus, HandoffTarget};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};

use super::{Arg, Where};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_one, fetch_optional};

const COLUMNS: &str = "id, conversation_id, target, agent_id, user_id, reason, note, status, requested_by, \
    requested_by_id, created_at, accepted_at, completed_at, canceled_at, updated_at, offered_user_id, offered_at, offers";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    conversation_id: i64,
    target: HandoffTarget,
    agent_id: Option<i64>,
    user_id: Option<i64>,
    reason: String,
    note: Option<String>,
    status: HandoffStatus,
    requested_by: AuthorType,
    requested_by_id: Option<i64>,
    created_at: Timestamp,
    accepted_at: Option<Timestamp>,
    completed_at: Option<Timestamp>,
    canceled_at: Option<Timestamp>,
    updated_at: Timestamp,
    offered_user_id: Option<i64>,
    offered_at: Option<Timestamp>,
    offers: i32,
}

impl TryFrom<Row> for Handoff {
    type Error = crate::StoreError;

    fn try_from(r: Row) -> Result<Self, Self::Error> {
        Ok(Handoff {
            id: r.id,
            conversation_id: r.conversation_id,
            to: r.target,
            agent_id: r.agent_id,
            user_id: r.user_id,
            reason: r.reason,
            note: r.note,
            status: r.status,
            requested_by: Author { kind: r.requested_by, id: r.requested_by_id },
            created_at: r.created_at,
            accepted_at: r.accepted_at,
            completed_at: r.completed_at,
            canceled_at: r.canceled_at,
            updated_at: r.updated_at,
            offered_user_id: r.offered_user_id,
            offered_at: r.offered_at,
            offers: i64::from(r.offers),
        })
    }
}

/// A handoff to record.
#[derive(Debug, Clone)]
pub struct NewHandoff<'a> {
    pub conversation_id: i64,
    pub to: HandoffTarget,
    pub agent_id: Option<i64>,
    pub user_id: Option<i64>,
    pub reason: &'a str,
    pub note: Option<&'a str>,
    pub requested_by: &'a Author,
}

pub async fn insert(c: &mut impl AsHandle, scope: Scope, h: &NewHandoff<'_>) -> StoreResult<Handoff> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO handoffs (workspace_id, livemode, conversation_id, target, agent_id, user_id, reason, note, status,
            requested_by, requested_by_id, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'requested', $9, $10, $11, $11) RETURNING {COLUMNS}"
    ));
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(h.conversation_id)
            .bind(h.to.as_str())
            .bind(h.agent_id)
            .bind(h.user_id)
            .bind(h.reason)
            .bind(h.note)
            .bind(h.requested_by.kind.as_str())
            .bind(h.requested_by.id)
            .bind(Timestamp::now())
    )?;
    row.try_into()
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<Handoff>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM handoffs WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    row.map(Handoff::try_from).transpose()
}

/// The conversation's open (requested or accepted) handoff.
pub async fn open_for(c: &mut impl AsHandle, scope: Scope, conversation_id: i64) -> StoreResult<Option<Handoff>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM handoffs WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3
           AND status IN ('requested', 'accepted')"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id))?;
    row.map(Handoff::try_from).transpose()
}

/// The open handoffs of the conversations `conversation_ids` (a page's worth).
pub async fn open_for_many(c: &mut impl AsHandle, scope: Scope, conversation_ids: &[i64]) -> StoreResult<Vec<Handoff>> {
    if conversation_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut w = super::Where::scoped(scope, "h");
    w.and("h.status IN ('requested', 'accepted')", []);
    let list = w.list(conversation_ids.iter().map(|id| super::Arg::I64(*id)));
    let sql =
        sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM handoffs h{} AND h.conversation_id IN ({list})", w.sql()));
    let rows: Vec<Row> = crate::fetch_all!(c, super::bind_args!(sqlx::query_as(sql), w.args))?;
    rows.into_iter().map(Handoff::try_from).collect()
}

/// Moves a handoff from one of `from` to `to`, stamping `<to>_at`; false
/// when it was not in one of `from` (a concurrent change won).
/// Records that requested handoff `id` was offered (again) at `at`, to
/// `user_id`, or to every member when none is available (`None`). False
/// when it is no longer requested.
pub async fn offered(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    user_id: Option<i64>,
    at: Timestamp,
) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE handoffs SET offered_user_id = $4, offered_at = $5, offers = offers + 1
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status = 'requested'"
        )
        .bind_scope(scope)
        .bind(id)
        .bind(user_id)
        .bind(at)
    )?;
    Ok(n > 0)
}

pub async fn transition(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    from: &[HandoffStatus],
    to: HandoffStatus,
    user_id: Option<i64>,
) -> StoreResult<bool> {
    let stamp = match to {
        HandoffStatus::Accepted => "accepted_at",
        HandoffStatus::Completed => "completed_at",
        HandoffStatus::Canceled => "canceled_at",
        HandoffStatus::Requested => return Ok(false),
    };
    let from: Vec<String> = from.iter().map(|s| format!("'{}'", s.as_str())).collect();
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE handoffs SET status = $4, {stamp} = $5, updated_at = $5, user_id = COALESCE($6, user_id)
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status IN ({})",
        from.join(", ")
    ));
    let n = execute!(
        c,
        sqlx::query(sql).bind_scope(scope).bind(id).bind(to.as_str()).bind(Timestamp::now()).bind(user_id)
    )?;
    Ok(n > 0)
}

#[derive(Debug, Clone, Default)]
pub struct HandoffFilter {
    pub status: Option<HandoffStatus>,
    pub conversation_id: Option<i64>,
}

/// Handoffs newest first, and how many match.
pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &HandoffFilter,
    page: Page,
) -> StoreResult<(Vec<Handoff>, i64)> {
    let mut w = Where::scoped(scope, "h");
    if let Some(s) = filter.status {
        w.and("h.status = ?", [Arg::Text(s.as_str().to_owned())]);
    }
    if let Some(id) = filter.conversation_id {
        w.and("h.conversation_id = ?", [Arg::I64(id)]);
    }
    let (rows, total): (Vec<Row>, i64) = super::newest_page(c, "handoffs h", COLUMNS, &w, page).await?;
    Ok((rows.into_iter().map(Handoff::try_from).collect::<Result<_, _>>()?, total))
}
