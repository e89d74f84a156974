//! Canned responses: the team's saved replies.

use parley_domain::conversation::CannedResponse;
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};

use super::{Arg, Where, bind_args, like_contains};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLUMNS: &str = "id, short_code, content, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    short_code: String,
    content: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<Row> for CannedResponse {
    fn from(r: Row) -> CannedResponse {
        CannedResponse {
            id: r.id,
            short_code: r.short_code,
            content: r.content,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Inserts a response; a short code taken in the scope (any case) is a `UniqueViolation`.
pub async fn insert(
    c: &mut impl AsHandle,
    scope: Scope,
    short_code: &str,
    content: &str,
) -> StoreResult<CannedResponse> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO canned_responses (workspace_id, livemode, short_code, content, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $5) RETURNING {COLUMNS}"
    ));
    let row: Row =
        fetch_one!(c, sqlx::query_as(sql).bind_scope(scope).bind(short_code).bind(content).bind(Timestamp::now()))?;
    Ok(row.into())
}

pub async fn update(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    short_code: &str,
    content: &str,
) -> StoreResult<Option<CannedResponse>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE canned_responses SET short_code = $4, content = $5, updated_at = $6
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(sql).bind_scope(scope).bind(id).bind(short_code).bind(content).bind(Timestamp::now())
    )?;
    Ok(row.map(CannedResponse::from))
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<CannedResponse>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM canned_responses WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    Ok(row.map(CannedResponse::from))
}

/// The response whose short code is `code` in any case.
pub async fn by_code(c: &mut impl AsHandle, scope: Scope, code: &str) -> StoreResult<Option<CannedResponse>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM canned_responses WHERE workspace_id = $1 AND livemode = $2 AND lower(short_code) = lower($3)"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(code))?;
    Ok(row.map(CannedResponse::from))
}

pub async fn count(c: &mut impl AsHandle, scope: Scope) -> StoreResult<i64> {
    let (n,): (i64,) = fetch_one!(
        c,
        sqlx::query_as("SELECT COUNT(*) FROM canned_responses WHERE workspace_id = $1 AND livemode = $2")
            .bind_scope(scope)
    )?;
    Ok(n)
}

/// A page by short code; `q` keeps those whose short code or content
/// contains it (any case).
pub async fn page(
    c: &mut impl AsHandle,
    scope: Scope,
    q: Option<&str>,
    page: Page,
) -> StoreResult<(Vec<CannedResponse>, i64)> {
    let mut w = Where::scoped(scope, "r");
    if let Some(q) = q {
        let pattern = like_contains(q);
        w.and(
            "(lower(r.short_code) LIKE ? ESCAPE '\\' OR lower(r.content) LIKE ? ESCAPE '\\')",
            [Arg::Text(pattern.clone()), Arg::Text(pattern)],
        );
    }
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM canned_responses r{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM canned_responses r{} ORDER BY lower(r.short_code), r.id LIMIT ${n} OFFSET ${}",
        w.sql(),
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<Row> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    Ok((rows.into_iter().map(CannedResponse::from).collect(), total))
}

pub async fn delete(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("DELETE FROM canned_responses WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    Ok(n > 0)
}
