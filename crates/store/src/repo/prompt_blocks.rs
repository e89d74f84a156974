//! Prompt blocks and their saved versions.

use parley_domain::prompt::{BlockKind, PromptBlock, PromptBlockVersion};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use sqlx::types::Json;

use super::{Arg, Where, bind_args, like_contains, versions};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLUMNS: &str = "id, name, slug, kind, content, variables, version, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    name: String,
    slug: String,
    kind: BlockKind,
    content: String,
    variables: Json<Vec<String>>,
    version: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<Row> for PromptBlock {
    fn from(r: Row) -> Self {
        PromptBlock {
            id: r.id,
            name: r.name,
            slug: r.slug,
            kind: r.kind,
            content: r.content,
            variables: r.variables.0,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// The `scope_versions` counter every prompt block write bumps.
pub const VERSION_KEY: &str = "prompt_blocks";

/// Every writable field of a prompt block.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockFields {
    pub name: String,
    pub slug: String,
    pub kind: BlockKind,
    pub content: String,
    pub variables: Vec<String>,
}

/// Binds a block's fields in the order both writes number them.
macro_rules! bind_fields {
    ($q:expr, $f:expr) => {
        $q.bind(&$f.name).bind(&$f.slug).bind(&$f.kind).bind(&$f.content).bind(Json(&$f.variables))
    };
}

/// Inserts a block at version 1; `None` if the slug is taken.
pub async fn insert(c: &mut impl AsHandle, scope: Scope, f: &BlockFields) -> StoreResult<Option<PromptBlock>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO prompt_blocks (workspace_id, livemode, name, slug, kind, content, variables, version, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8)
         ON CONFLICT (workspace_id, livemode, slug) DO NOTHING RETURNING {COLUMNS}"
    ));
    let row: Option<Row> =
        fetch_optional!(c, bind_fields!(sqlx::query_as(sql).bind_scope(scope), f).bind(Timestamp::now()))?;
    if row.is_some() {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(row.map(Into::into))
}

/// Overwrites a block and bumps its version.
pub async fn update(c: &mut impl AsHandle, scope: Scope, id: i64, f: &BlockFields) -> StoreResult<Option<PromptBlock>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE prompt_blocks SET name = $4, slug = $5, kind = $6, content = $7, variables = $8,
            version = version + 1, updated_at = $9
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> =
        fetch_optional!(c, bind_fields!(sqlx::query_as(sql).bind_scope(scope).bind(id), f).bind(Timestamp::now()))?;
    if row.is_some() {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(row.map(Into::into))
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<PromptBlock>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM prompt_blocks WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    Ok(row.map(Into::into))
}

/// The blocks among `ids` that exist in the scope (in any order).
pub async fn get_many(c: &mut impl AsHandle, scope: Scope, ids: &[i64]) -> StoreResult<Vec<PromptBlock>> {
    let mut out = Vec::with_capacity(ids.len());
    // Agents list a handful of blocks; one indexed look-up each keeps the SQL
    // identical on both backends (no array binds).
    for &id in ids {
        if let Some(b) = get(c, scope, id).await? {
            out.push(b);
        }
    }
    Ok(out)
}

pub async fn delete(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<bool> {
    execute!(
        c,
        sqlx::query("DELETE FROM prompt_block_versions WHERE workspace_id = $1 AND livemode = $2 AND block_id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    let done = execute!(
        c,
        sqlx::query("DELETE FROM prompt_blocks WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    if done == 1 {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(done == 1)
}

/// Slugs in the scope equal to `base` or of the form `base-N`, except block `except_id`'s.
pub async fn slugs_like(
    c: &mut impl AsHandle,
    scope: Scope,
    base: &str,
    except_id: Option<i64>,
) -> StoreResult<Vec<String>> {
    super::slugs_like(c, "prompt_blocks", scope, base, except_id).await
}

#[derive(Debug, Clone, Default)]
pub struct BlockFilter {
    pub kind: Option<BlockKind>,
    pub q: Option<String>,
}

pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &BlockFilter,
    page: Page,
) -> StoreResult<(Vec<PromptBlock>, i64)> {
    let mut w = Where::scoped(scope, "b");
    if let Some(k) = &filter.kind {
        w.and("b.kind = ?", [Arg::Text(k.as_str().to_owned())]);
    }
    if let Some(q) = &filter.q {
        let p = like_contains(q);
        w.and("(LOWER(b.name) LIKE ? ESCAPE '\\' OR b.slug LIKE ? ESCAPE '\\')", [Arg::Text(p.clone()), Arg::Text(p)]);
    }
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM prompt_blocks b{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM prompt_blocks b{} ORDER BY b.created_at DESC, b.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<Row> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    Ok((rows.into_iter().map(Into::into).collect(), total))
}

/// Saves `block` as its own version row (called after every insert and update).
pub async fn save_version(c: &mut impl AsHandle, scope: Scope, block: &PromptBlock) -> StoreResult<()> {
    execute!(c, sqlx::query(
        "INSERT INTO prompt_block_versions (workspace_id, livemode, block_id, version, name, kind, content, variables, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind_scope(scope)
    .bind(block.id)
    .bind(block.version)
    .bind(&block.name)
    .bind(&block.kind)
    .bind(&block.content)
    .bind(Json(&block.variables))
    .bind(block.updated_at))?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct VersionRow {
    block_id: i64,
    version: i64,
    name: String,
    kind: BlockKind,
    content: String,
    variables: Json<Vec<String>>,
    created_at: Timestamp,
}

/// A block's versions, newest first.
pub async fn list_versions(
    c: &mut impl AsHandle,
    scope: Scope,
    block_id: i64,
    page: Page,
) -> StoreResult<(Vec<PromptBlockVersion>, i64)> {
    let (total,): (i64,) =
        fetch_one!(c, sqlx::query_as(
        "SELECT COUNT(*) FROM prompt_block_versions WHERE workspace_id = $1 AND livemode = $2 AND block_id = $3",
    )
    .bind_scope(scope)
    .bind(block_id))?;
    let rows: Vec<VersionRow> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT block_id, version, name, kind, content, variables, created_at FROM prompt_block_versions
         WHERE workspace_id = $1 AND livemode = $2 AND block_id = $3 ORDER BY version DESC LIMIT $4 OFFSET $5",
        )
        .bind_scope(scope)
        .bind(block_id)
        .bind(page.limit)
        .bind(page.offset)
    )?;
    let items = rows
        .into_iter()
        .map(|r| PromptBlockVersion {
            block_id: r.block_id,
            version: r.version,
            name: r.name,
            kind: r.kind,
            content: r.content,
            variables: r.variables.0,
            created_at: r.created_at,
        })
        .collect();
    Ok((items, total))
}
