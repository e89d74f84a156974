//! Agents.

use std::collections::BTreeMap;

use parley_domain::agent::{Agent, AgentSecrets, AgentSpeech, AgentStatus, AgentTool, HandoffPolicy};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use serde_json::{Map, Value};
use sqlx::types::Json;

use super::{Arg, Where, bind_args, like_contains, versions};
use crate::repo::BindScope;
use crate::{AsHandle, Handle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

// Unqualified: SQLite's RETURNING does not accept table-qualified names.
const COLUMNS: &str = "id, name, slug, description, text_engine, status, priority, is_template, \
    system_prompt, first_message, language, speech, prompt_block_ids, knowledge_collection_ids, \
    handoff, metadata, trigger_count, created_at, updated_at, model, tools, debounce_ms, tool_secret, tool_headers";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    name: String,
    slug: String,
    description: Option<String>,
    text_engine: String,
    status: AgentStatus,
    priority: i64,
    is_template: bool,
    system_prompt: String,
    first_message: Option<String>,
    language: String,
    speech: Json<AgentSpeech>,
    prompt_block_ids: Json<Vec<i64>>,
    knowledge_collection_ids: Json<Vec<i64>>,
    handoff: Json<HandoffPolicy>,
    metadata: Json<Map<String, Value>>,
    trigger_count: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
    model: Option<String>,
    tools: Json<Vec<AgentTool>>,
    debounce_ms: Option<i64>,
    tool_secret: Option<String>,
    tool_headers: Json<BTreeMap<String, String>>,
}

impl TryFrom<Row> for Agent {
    type Error = crate::StoreError;
    fn try_from(r: Row) -> Result<Self, Self::Error> {
        let status = r.status;
        Ok(Agent {
            id: r.id,
            name: r.name,
            slug: r.slug,
            description: r.description,
            text_engine: r.text_engine,
            status,
            priority: r.priority,
            trigger_count: r.trigger_count,
            knowledge_collection_count: r.knowledge_collection_ids.0.len() as i64,
            is_template: r.is_template,
            system_prompt: r.system_prompt,
            first_message: r.first_message,
            language: r.language,
            speech: r.speech.0,
            prompt_block_ids: r.prompt_block_ids.0,
            knowledge_collection_ids: r.knowledge_collection_ids.0,
            handoff: r.handoff.0,
            model: r.model,
            tools: r.tools.0,
            debounce_ms: r.debounce_ms,
            metadata: r.metadata.0,
            created_at: r.created_at,
            updated_at: r.updated_at,
            secrets: AgentSecrets { tool_secret: r.tool_secret, tool_headers: r.tool_headers.0 },
        })
    }
}

/// The `scope_versions` counter every agent write bumps (see [`versions`]).
pub const VERSION_KEY: &str = "agents";

/// Every writable field of an agent. Inserts and updates write all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFields {
    pub name: String,
    pub slug: String,
    pub description: Option<String>,
    pub text_engine: String,
    pub status: AgentStatus,
    pub priority: i64,
    pub is_template: bool,
    pub system_prompt: String,
    pub first_message: Option<String>,
    pub language: String,
    pub speech: AgentSpeech,
    pub prompt_block_ids: Vec<i64>,
    pub knowledge_collection_ids: Vec<i64>,
    pub handoff: HandoffPolicy,
    pub metadata: Map<String, Value>,
    pub model: Option<String>,
    pub tools: Vec<AgentTool>,
    pub debounce_ms: Option<i64>,
    pub secrets: AgentSecrets,
}

impl From<&Agent> for AgentFields {
    fn from(a: &Agent) -> Self {
        AgentFields {
            name: a.name.clone(),
            slug: a.slug.clone(),
            description: a.description.clone(),
            text_engine: a.text_engine.clone(),
            status: a.status,
            priority: a.priority,
            is_template: a.is_template,
            system_prompt: a.system_prompt.clone(),
            first_message: a.first_message.clone(),
            language: a.language.clone(),
            speech: a.speech.clone(),
            prompt_block_ids: a.prompt_block_ids.clone(),
            knowledge_collection_ids: a.knowledge_collection_ids.clone(),
            handoff: a.handoff.clone(),
            metadata: a.metadata.clone(),
            model: a.model.clone(),
            tools: a.tools.clone(),
            debounce_ms: a.debounce_ms,
            secrets: a.secrets.clone(),
        }
    }
}

/// Binds an agent's fields in the order both writes number them.
macro_rules! bind_fields {
    ($q:expr, $f:expr) => {
        $q.bind(&$f.name)
            .bind(&$f.slug)
            .bind(&$f.description)
            .bind(&$f.text_engine)
            .bind($f.status.as_str())
            .bind($f.priority)
            .bind($f.is_template)
            .bind(&$f.system_prompt)
            .bind(&$f.first_message)
            .bind(&$f.language)
            .bind(Json(&$f.speech))
            .bind(Json(&$f.prompt_block_ids))
            .bind(Json(&$f.knowledge_collection_ids))
            .bind(Json(&$f.handoff))
            .bind(Json(&$f.metadata))
            .bind(&$f.model)
            .bind(Json(&$f.tools))
            .bind($f.debounce_ms)
            .bind(&$f.secrets.tool_secret)
            .bind(Json(&$f.secrets.tool_headers))
    };
}

/// Inserts an agent; `None` if its slug is already taken in the scope.
pub async fn insert(c: &mut impl AsHandle, scope: Scope, f: &AgentFields) -> StoreResult<Option<Agent>> {
    super::triggers::forget_routes(c);
    let now = Timestamp::now();
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO agents (workspace_id, livemode, name, slug, description, text_engine, status, priority,
            is_template, system_prompt, first_message, language, speech, prompt_block_ids, knowledge_collection_ids,
            handoff, metadata, model, tools, debounce_ms, tool_secret, tool_headers, trigger_count, created_at,
            updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,
            $22, 0, $23, $23)
         ON CONFLICT (workspace_id, livemode, slug) DO NOTHING
         RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(c, bind_fields!(sqlx::query_as(sql).bind_scope(scope), f).bind(now))?;
    if row.is_some() {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    row.map(Agent::try_from).transpose()
}

/// Overwrites an agent's fields. The caller has chosen a free slug.
pub async fn update(c: &mut impl AsHandle, scope: Scope, id: i64, f: &AgentFields) -> StoreResult<Option<Agent>> {
    super::triggers::forget_routes(c);
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE agents SET name = $4, slug = $5, description = $6, text_engine = $7, status = $8, priority = $9,
            is_template = $10, system_prompt = $11, first_message = $12, language = $13, speech = $14,
            prompt_block_ids = $15, knowledge_collection_ids = $16, handoff = $17, metadata = $18, model = $19,
            tools = $20, debounce_ms = $21, tool_secret = $22, tool_headers = $23, updated_at = $24
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3
         RETURNING {COLUMNS}"
    ));
    let row: Option<Row> =
        fetch_optional!(c, bind_fields!(sqlx::query_as(sql).bind_scope(scope).bind(id), f).bind(Timestamp::now()))?;
    if row.is_some() {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    row.map(Agent::try_from).transpose()
}

/// Reads an agent. With `for_update`, PostgreSQL locks the row until the
/// transaction ends (SQLite's single writer already serialises writes).
pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64, for_update: bool) -> StoreResult<Option<Agent>> {
    let lock = if for_update && c.is_postgres() { " FOR UPDATE" } else { "" };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM agents a WHERE a.workspace_id = $1 AND a.livemode = $2 AND a.id = $3{lock}"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    row.map(Agent::try_from).transpose()
}

/// Agent `id` as routing reads it: once a transaction (a group commit's
/// messages share it), remembered until an agent or trigger is written.
pub async fn get_for_routing(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<Agent>> {
    if let Some(known) = c.route_memo().and_then(|m| m.agents.get(&(scope, id))) {
        return Ok(known.clone());
    }
    let agent = get(c, scope, id, false).await?;
    if let Some(memo) = c.route_memo() {
        memo.agents.insert((scope, id), agent.clone());
    }
    Ok(agent)
}

/// Slugs in the scope equal to `base` or of the form `base-N`, except agent `except_id`'s.
pub async fn slugs_like(
    c: &mut impl AsHandle,
    scope: Scope,
    base: &str,
    except_id: Option<i64>,
) -> StoreResult<Vec<String>> {
    super::slugs_like(c, "agents", scope, base, except_id).await
}

/// List filters. Archived agents are listed only when asked for by status.
#[derive(Debug, Clone, Default)]
pub struct AgentFilter {
    pub status: Option<AgentStatus>,
    pub is_template: Option<bool>,
    /// Case-insensitive substring of the name, slug or description.
    pub q: Option<String>,
}

/// One page of agents, newest first, and the number matching the filter.
pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &AgentFilter,
    page: Page,
) -> StoreResult<(Vec<Agent>, i64)> {
    let mut w = Where::scoped(scope, "a");
    match filter.status {
        Some(s) => w.and("a.status = ?", [Arg::Text(s.as_str().to_owned())]),
        None => w.and("a.status <> 'archived'", []),
    };
    if let Some(t) = filter.is_template {
        w.and("a.is_template = ?", [Arg::Bool(t)]);
    }
    if let Some(q) = &filter.q {
        let p = like_contains(q);
        w.and(
            "(LOWER(a.name) LIKE ? ESCAPE '\\' OR a.slug LIKE ? ESCAPE '\\' OR LOWER(COALESCE(a.description, '')) LIKE ? ESCAPE '\\')",
            [Arg::Text(p.clone()), Arg::Text(p.clone()), Arg::Text(p)],
        );
    }
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM agents a{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM agents a{} ORDER BY a.created_at DESC, a.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<Row> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    let agents = rows.into_iter().map(Agent::try_from).collect::<Result<_, _>>()?;
    Ok((agents, total))
}

/// Adjusts the stored trigger count, in the transaction that adds or removes a trigger.
pub async fn add_trigger_count(c: &mut impl AsHandle, scope: Scope, id: i64, delta: i64) -> StoreResult<()> {
    super::triggers::forget_routes(c);
    execute!(
        c,
        sqlx::query(
            "UPDATE agents SET trigger_count = trigger_count + $4, updated_at = $5
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(delta)
        .bind(Timestamp::now())
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(())
}

/// An agent's list of ids of other resources.
#[derive(Debug, Clone, Copy)]
pub enum IdList {
    PromptBlocks,
    KnowledgeCollections,
}

impl IdList {
    fn column(self) -> &'static str {
        match self {
            IdList::PromptBlocks => "prompt_block_ids",
            IdList::KnowledgeCollections => "knowledge_collection_ids",
        }
    }
}

/// Ids of the agents (in scope) whose `list` holds `id`.
pub async fn ids_listing(c: &mut impl AsHandle, scope: Scope, list: IdList, id: i64) -> StoreResult<Vec<i64>> {
    let column = list.column();
    // JSON containment is the one place the dialects differ here.
    let rows: Vec<(i64,)> = match c.handle() {
        Handle::Sqlite(conn) => {
            let sql = sqlx::AssertSqlSafe(format!(
                "SELECT DISTINCT a.id FROM agents a, json_each(a.{column}) j
                 WHERE a.workspace_id = $1 AND a.livemode = $2 AND j.value = $3 ORDER BY a.id"
            ));
            sqlx::query_as(sql).bind_scope(scope).bind(id).fetch_all(conn).await?
        }
        Handle::Postgres(conn) => {
            let sql = sqlx::AssertSqlSafe(format!(
                "SELECT a.id FROM agents a
                 WHERE a.workspace_id = $1 AND a.livemode = $2 AND a.{column} @> jsonb_build_array($3::bigint)
                 ORDER BY a.id"
            ));
            sqlx::query_as(sql).bind_scope(scope).bind(id).fetch_all(conn).await?
        }
    };
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// The id of a non-archived agent with exactly this name, if any.
pub async fn id_by_name(c: &mut impl AsHandle, scope: Scope, name: &str) -> StoreResult<Option<i64>> {
    let row: Option<(i64,)> = crate::fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT id FROM agents WHERE workspace_id = $1 AND livemode = $2 AND name = $3 AND status <> 'archived' \
             ORDER BY id LIMIT 1"
        )
        .bind_scope(scope)
        .bind(name)
    )?;
    Ok(row.map(|(id,)| id))
}
