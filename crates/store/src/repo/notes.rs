//! Private notes on conversations.

use parley_domain::conversation::Note;
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use sqlx::types::Json;

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, fetch_all, fetch_one};

const COLUMNS: &str = "id, conversation_id, author_user_id, text, mentions, for_agent, created_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    conversation_id: i64,
    author_user_id: Option<i64>,
    text: String,
    mentions: Json<Vec<i64>>,
    for_agent: bool,
    created_at: Timestamp,
}

impl From<Row> for Note {
    fn from(r: Row) -> Note {
        Note {
            id: r.id,
            conversation_id: r.conversation_id,
            author_user_id: r.author_user_id,
            text: r.text,
            mentions: r.mentions.0,
            for_agent: r.for_agent,
            created_at: r.created_at,
        }
    }
}

pub async fn insert(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
    author_user_id: Option<i64>,
    text: &str,
    mentions: &[i64],
    for_agent: bool,
) -> StoreResult<Note> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO conversation_notes (workspace_id, livemode, conversation_id, author_user_id, text, mentions, for_agent, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {COLUMNS}"
    ));
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(conversation_id)
            .bind(author_user_id)
            .bind(text)
            .bind(Json(mentions))
            .bind(for_agent)
            .bind(Timestamp::now())
    )?;
    Ok(row.into())
}

/// A page of the conversation's notes, oldest first, and how many it has.
pub async fn page(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
    page: Page,
) -> StoreResult<(Vec<Note>, i64)> {
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM conversation_notes WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3"
        )
        .bind_scope(scope)
        .bind(conversation_id)
    )?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM conversation_notes WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3
         ORDER BY created_at, id LIMIT $4 OFFSET $5"
    ));
    let rows: Vec<Row> =
        fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id).bind(page.limit).bind(page.offset))?;
    Ok((rows.into_iter().map(Note::from).collect(), total))
}

/// The latest `limit` notes shared with the conversation's agent, oldest first.
pub async fn for_agent(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
    limit: i64,
) -> StoreResult<Vec<Note>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM (SELECT {COLUMNS} FROM conversation_notes
           WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3 AND for_agent
           ORDER BY created_at DESC, id DESC LIMIT $4) latest ORDER BY created_at, id"
    ));
    let rows: Vec<Row> = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id).bind(limit))?;
    Ok(rows.into_iter().map(Note::from).collect())
}
