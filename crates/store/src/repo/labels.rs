//! Labels and the conversations they are on. A conversation keeps the
//! sorted names of its labels in its own `labels` column (read with it at
//! no cost); `conversation_labels` is what filters use.

use parley_domain::conversation::Label;
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use sqlx::types::Json;

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLUMNS: &str = "id, name, color, description, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    name: String,
    color: String,
    description: Option<String>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<Row> for Label {
    fn from(r: Row) -> Label {
        Label {
            id: r.id,
            name: r.name,
            color: r.color,
            description: r.description,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// A label's fields as written.
#[derive(Debug, Clone)]
pub struct LabelFields {
    pub name: String,
    pub color: String,
    pub description: Option<String>,
}

/// Inserts a label; a name already taken in the scope (any case) is a
/// `UniqueViolation`.
pub async fn insert(c: &mut impl AsHandle, scope: Scope, fields: &LabelFields) -> StoreResult<Label> {
    let now = Timestamp::now();
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO labels (workspace_id, livemode, name, color, description, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING {COLUMNS}"
    ));
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(&fields.name)
            .bind(&fields.color)
            .bind(&fields.description)
            .bind(now)
    )?;
    Ok(row.into())
}

pub async fn update(c: &mut impl AsHandle, scope: Scope, id: i64, fields: &LabelFields) -> StoreResult<Option<Label>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE labels SET name = $4, color = $5, description = $6, updated_at = $7
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(id)
            .bind(&fields.name)
            .bind(&fields.color)
            .bind(&fields.description)
            .bind(Timestamp::now())
    )?;
    Ok(row.map(Label::from))
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<Label>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM labels WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    Ok(row.map(Label::from))
}

/// Label `id`, locked against a concurrent rename, deletion or use until
/// the transaction ends (PostgreSQL; SQLite has one writer). `share` lets
/// others that only use it hold it too.
pub async fn get_locked(tx: &mut crate::Tx, scope: Scope, id: i64, share: bool) -> StoreResult<Option<Label>> {
    let lock = match (tx.is_sole_writer(), share) {
        (true, _) => "",
        (false, true) => " FOR SHARE",
        (false, false) => " FOR UPDATE",
    };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM labels WHERE workspace_id = $1 AND livemode = $2 AND id = $3{lock}"
    ));
    let row: Option<Row> = fetch_optional!(tx, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    Ok(row.map(Label::from))
}

/// The label named `name` in any case.
pub async fn by_name(c: &mut impl AsHandle, scope: Scope, name: &str) -> StoreResult<Option<Label>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM labels WHERE workspace_id = $1 AND livemode = $2 AND lower(name) = lower($3)"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(name))?;
    Ok(row.map(Label::from))
}

/// A page of the scope's labels by name, and how many there are.
pub async fn page(c: &mut impl AsHandle, scope: Scope, page: Page) -> StoreResult<(Vec<Label>, i64)> {
    let total = count(c, scope).await?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM labels WHERE workspace_id = $1 AND livemode = $2 ORDER BY lower(name), id LIMIT $3 OFFSET $4"
    ));
    let rows: Vec<Row> = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(page.limit).bind(page.offset))?;
    Ok((rows.into_iter().map(Label::from).collect(), total))
}

/// How many labels the scope has.
pub async fn count(c: &mut impl AsHandle, scope: Scope) -> StoreResult<i64> {
    let (n,): (i64,) = fetch_one!(
        c,
        sqlx::query_as("SELECT COUNT(*) FROM labels WHERE workspace_id = $1 AND livemode = $2").bind_scope(scope)
    )?;
    Ok(n)
}

/// The conversations (in scope) label `id` is on.
pub async fn conversation_ids(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Vec<i64>> {
    let rows: Vec<(i64,)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT conversation_id FROM conversation_labels WHERE workspace_id = $1 AND livemode = $2 AND label_id = $3
             ORDER BY conversation_id"
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Deletes label `id` and takes it off every conversation (whose cached
/// names the caller then rebuilds with `refresh_names`).
pub async fn delete(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<bool> {
    execute!(
        c,
        sqlx::query("DELETE FROM conversation_labels WHERE workspace_id = $1 AND livemode = $2 AND label_id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    let n = execute!(
        c,
        sqlx::query("DELETE FROM labels WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    Ok(n > 0)
}

/// Puts exactly `label_ids` on conversation `conversation_id` (then
/// `refresh_names` stores their names with it).
pub async fn set_on_conversation(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
    label_ids: &[i64],
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "DELETE FROM conversation_labels WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3"
        )
        .bind_scope(scope)
        .bind(conversation_id)
    )?;
    for label_id in label_ids {
        execute!(
            c,
            sqlx::query(
                "INSERT INTO conversation_labels (workspace_id, livemode, conversation_id, label_id) VALUES ($1, $2, $3, $4)"
            )
            .bind_scope(scope)
            .bind(conversation_id)
            .bind(label_id)
        )?;
    }
    Ok(())
}

/// Rebuilds conversation `conversation_id`'s cached label names from
/// `conversation_labels` (after a label is set, renamed or deleted).
pub async fn refresh_names(c: &mut impl AsHandle, scope: Scope, conversation_id: i64) -> StoreResult<()> {
    let rows: Vec<(String,)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT l.name FROM conversation_labels cl JOIN labels l ON l.id = cl.label_id
             WHERE cl.workspace_id = $1 AND cl.livemode = $2 AND cl.conversation_id = $3"
        )
        .bind_scope(scope)
        .bind(conversation_id)
    )?;
    let mut names: Vec<String> = rows.into_iter().map(|(n,)| n).collect();
    names.sort_by_key(|n| n.to_lowercase());
    execute!(
        c,
        sqlx::query("UPDATE conversations SET labels = $4, updated_at = $5 WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(conversation_id)
            .bind(Json(names))
            .bind(Timestamp::now())
    )?;
    super::versions::bump(c, scope, super::conversations::VERSION_KEY).await
}
