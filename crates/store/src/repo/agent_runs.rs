//! Agent runs.

use parley_domain::agent::{AgentRun, RetrievalHit, RunStatus, RunToolCall, RunTrigger};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use sqlx::types::Json;

use super::{Arg, Where};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_one, fetch_optional};

const COLUMNS: &str = "id, agent_id, conversation_id, call_id, trigger, status, engine, model, input_tokens, \
    output_tokens, cost_cents, first_token_ms, total_ms, reply_message_id, tool_calls, retrieval, error, created_at, \
    completed_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    agent_id: i64,
    conversation_id: Option<i64>,
    call_id: Option<String>,
    trigger: RunTrigger,
    status: RunStatus,
    engine: String,
    model: String,
    input_tokens: i64,
    output_tokens: i64,
    cost_cents: i64,
    first_token_ms: Option<i64>,
    total_ms: Option<i64>,
    reply_message_id: Option<i64>,
    tool_calls: Json<Vec<RunToolCall>>,
    retrieval: Json<Vec<RetrievalHit>>,
    error: Option<String>,
    created_at: Timestamp,
    completed_at: Option<Timestamp>,
}

impl From<Row> for AgentRun {
    fn from(r: Row) -> Self {
        AgentRun {
            id: r.id,
            agent_id: r.agent_id,
            conversation_id: r.conversation_id,
            call_id: r.call_id,
            trigger: r.trigger,
            status: r.status,
            engine: r.engine,
            model: r.model,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cost_cents: r.cost_cents,
            first_token_ms: r.first_token_ms,
            total_ms: r.total_ms,
            reply_message_id: r.reply_message_id,
            tool_calls: r.tool_calls.0,
            retrieval: r.retrieval.0,
            error: r.error,
            created_at: r.created_at,
            completed_at: r.completed_at,
        }
    }
}

/// A run to queue.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub agent_id: i64,
    pub conversation_id: Option<i64>,
    pub call_id: Option<&'a str>,
    pub trigger: RunTrigger,
    pub engine: &'a str,
    pub model: &'a str,
}

pub async fn insert(c: &mut impl AsHandle, scope: Scope, n: &NewRun<'_>) -> StoreResult<AgentRun> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO agent_runs (workspace_id, livemode, agent_id, conversation_id, call_id, trigger, status, engine,
            model, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9) RETURNING {COLUMNS}"
    ));
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(n.agent_id)
            .bind(n.conversation_id)
            .bind(n.call_id)
            .bind(n.trigger.as_str())
            .bind(n.engine)
            .bind(n.model)
            .bind(Timestamp::now())
    )?;
    Ok(row.into())
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<AgentRun>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM agent_runs WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    Ok(row.map(Into::into))
}

/// The conversation's run still waiting to start, if any (new messages
/// join it instead of queuing another).
pub async fn queued_for_conversation(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
) -> StoreResult<Option<AgentRun>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM agent_runs
         WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3 AND status = 'queued'
         ORDER BY id LIMIT 1"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id))?;
    Ok(row.map(Into::into))
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunEnd<'a> {
    pub status: RunStatus,
    pub model: &'a str,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_cents: i64,
    pub first_token_ms: Option<i64>,
    pub total_ms: Option<i64>,
    pub reply_message_id: Option<i64>,
    pub tool_calls: &'a [RunToolCall],
    pub retrieval: &'a [RetrievalHit],
    pub error: Option<&'a str>,
}

impl<'a> RunEnd<'a> {
    /// An end with nothing measured (a cancellation, a failure before the engine answered).
    pub fn empty(model: &'a str) -> Self {
        RunEnd {
            status: RunStatus::Failed,
            model,
            input_tokens: 0,
            output_tokens: 0,
            cost_cents: 0,
            first_token_ms: None,
            total_ms: None,
            reply_message_id: None,
            tool_calls: &[],
            retrieval: &[],
            error: None,
        }
    }
}

/// Records how run `id` ended (keeping its model if `end.model` is empty),
/// and answers the run so ended; `None` if it had already ended. Counted in `parley_agent_runs_total`
/// (and its duration) when the transaction commits.
pub async fn finish(c: &mut crate::Tx, scope: Scope, id: i64, end: &RunEnd<'_>) -> StoreResult<Option<AgentRun>> {
    // RETURNING: the run's event needs the row (a re-read would be one more
    // statement in the reply's transaction).
    let sql = sqlx::AssertSqlSafe(format!(
            "UPDATE agent_runs SET status = $4, model = COALESCE(NULLIF($5, ''), model), input_tokens = $6, output_tokens = $7, cost_cents = $8,
                first_token_ms = $9, total_ms = $10, reply_message_id = $11, tool_calls = $12, retrieval = $13,
                error = $14, completed_at = $15
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status IN ('queued', 'running')
             RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(id)
            .bind(end.status.as_str())
            .bind(end.model)
            .bind(end.input_tokens)
            .bind(end.output_tokens)
            .bind(end.cost_cents)
            .bind(end.first_token_ms)
            .bind(end.total_ms)
            .bind(end.reply_message_id)
            .bind(Json(end.tool_calls))
            .bind(Json(end.retrieval))
            .bind(end.error)
            .bind(Timestamp::now())
    )?;
    if row.is_some() {
        let (outcome, total_ms) = (end.status.as_str(), end.total_ms);
        c.tally(move |m| {
            m.agent_runs.with_label_values(&[outcome]).inc();
            if let Some(ms) = total_ms {
                m.agent_run_duration.observe(ms as f64 / 1000.0);
            }
        });
    }
    Ok(row.map(Into::into))
}

/// Marks run `id` running (from queued).
pub async fn start(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE agent_runs SET status = 'running'
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status = 'queued'",
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    Ok(())
}

/// The list's filters.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub agent_id: Option<i64>,
    pub conversation_id: Option<i64>,
    /// `call_…`: the turns of one call.
    pub call_id: Option<String>,
    pub status: Option<RunStatus>,
}

/// Runs newest first, and how many match.
pub async fn list(c: &mut impl AsHandle, scope: Scope, f: &RunFilter, page: Page) -> StoreResult<(Vec<AgentRun>, i64)> {
    let mut w = Where::scoped(scope, "r");
    if let Some(id) = f.agent_id {
        w.and("r.agent_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = f.conversation_id {
        w.and("r.conversation_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = &f.call_id {
        w.and("r.call_id = ?", [Arg::Text(id.clone())]);
    }
    if let Some(s) = f.status {
        w.and("r.status = ?", [Arg::Text(s.as_str().to_owned())]);
    }
    let columns = COLUMNS.split(", ").map(|c| format!("r.{}", c.trim())).collect::<Vec<_>>().join(", ");
    let (rows, total): (Vec<Row>, i64) = super::newest_page(c, "agent_runs r", &columns, &w, page).await?;
    Ok((rows.into_iter().map(Into::into).collect(), total))
}
