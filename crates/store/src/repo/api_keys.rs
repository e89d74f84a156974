//! API keys. Only the SHA-256 of a key is stored.

use parley_domain::workspace::ApiKeyInfo;
use parley_domain::{Mode, Timestamp};

use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLUMNS: &str = "id, workspace_id, livemode, name, workspace_locked, hint, created_by, created_at, last_used_at, expires_at, revoked_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    workspace_id: i64,
    livemode: bool,
    name: String,
    workspace_locked: bool,
    hint: String,
    created_by: Option<i64>,
    created_at: Timestamp,
    last_used_at: Option<Timestamp>,
    expires_at: Option<Timestamp>,
    revoked_at: Option<Timestamp>,
}

impl From<Row> for ApiKeyInfo {
    fn from(r: Row) -> Self {
        ApiKeyInfo {
            id: r.id,
            workspace_id: r.workspace_id,
            name: r.name,
            mode: Mode::from_livemode(r.livemode),
            workspace_locked: r.workspace_locked,
            hint: r.hint,
            created_by: r.created_by,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            expires_at: r.expires_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// What a new key record holds besides its owner.
pub struct NewApiKey<'a> {
    pub workspace_id: i64,
    pub mode: Mode,
    pub name: &'a str,
    pub key_hash: &'a str,
    pub hint: &'a str,
    pub workspace_locked: bool,
    pub created_by: Option<i64>,
    pub expires_at: Option<Timestamp>,
}

pub async fn insert(c: &mut impl AsHandle, k: &NewApiKey<'_>) -> StoreResult<ApiKeyInfo> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO api_keys (workspace_id, livemode, name, key_hash, hint, workspace_locked, created_by, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {COLUMNS}"
    ));
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind(k.workspace_id)
            .bind(k.mode.is_live())
            .bind(k.name)
            .bind(k.key_hash)
            .bind(k.hint)
            .bind(k.workspace_locked)
            .bind(k.created_by)
            .bind(Timestamp::now())
            .bind(k.expires_at)
    )?;
    Ok(row.into())
}

pub async fn get(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<ApiKeyInfo>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM api_keys WHERE id = $1"));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind(id))?;
    Ok(row.map(Into::into))
}

/// What authentication needs to know about a presented key.
#[derive(Debug, Clone)]
pub struct KeyForAuth {
    pub id: i64,
    pub workspace_id: i64,
    pub livemode: bool,
    pub workspace_locked: bool,
    pub last_used_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    /// The scope's change counters (see [`super::versions`]), read in the same
    /// round trip so that a cached list costs no further query.
    pub versions: super::versions::Snapshot,
}

#[derive(sqlx::FromRow)]
struct AuthRow {
    id: i64,
    workspace_id: i64,
    livemode: bool,
    workspace_locked: bool,
    last_used_at: Option<Timestamp>,
    expires_at: Option<Timestamp>,
    revoked_at: Option<Timestamp>,
    resource: Option<String>,
    version: Option<i64>,
}

/// Looks a key up by its hash. Read on every request, never cached, so a
/// revocation is seen by the very next request on every instance.
pub async fn find_for_auth(c: &mut impl AsHandle, key_hash: &str) -> StoreResult<Option<KeyForAuth>> {
    let rows: Vec<AuthRow> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT k.id, k.workspace_id, k.livemode, k.workspace_locked, k.last_used_at, k.expires_at, k.revoked_at,
                    v.resource, v.version
             FROM api_keys k
             LEFT JOIN scope_versions v ON v.workspace_id = k.workspace_id AND v.livemode = k.livemode
             WHERE k.key_hash = $1",
        )
        .bind(key_hash)
    )?;
    let Some(first) = rows.first() else { return Ok(None) };
    let versions =
        super::versions::Snapshot::from_pairs(rows.iter().filter_map(|r| Some((r.resource.clone()?, r.version?))));
    Ok(Some(KeyForAuth {
        id: first.id,
        workspace_id: first.workspace_id,
        livemode: first.livemode,
        workspace_locked: first.workspace_locked,
        last_used_at: first.last_used_at,
        expires_at: first.expires_at,
        revoked_at: first.revoked_at,
        versions,
    }))
}

/// Records a use, at most once per `min_interval_s` per key.
pub async fn touch_last_used(c: &mut impl AsHandle, id: i64, now: Timestamp, min_interval_s: i64) -> StoreResult<()> {
    let stale_before = now.plus_seconds(-min_interval_s);
    execute!(
        c,
        sqlx::query(
            "UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
        )
        .bind(id)
        .bind(now)
        .bind(stale_before)
    )?;
    Ok(())
}

/// Revokes a key (idempotently) and returns it; `None` if no such key.
pub async fn revoke(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<ApiKeyInfo>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind(id).bind(Timestamp::now()))?;
    Ok(row.map(Into::into))
}

/// A workspace's keys (both modes unless `mode` is given), newest first.
pub async fn list(
    c: &mut impl AsHandle,
    workspace_id: i64,
    mode: Option<Mode>,
    page: parley_domain::validation::Page,
) -> StoreResult<(Vec<ApiKeyInfo>, i64)> {
    let livemode = mode.map(Mode::is_live);
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as("SELECT COUNT(*) FROM api_keys WHERE workspace_id = $1 AND ($2 IS NULL OR livemode = $2)")
            .bind(workspace_id)
            .bind(livemode)
    )?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM api_keys WHERE workspace_id = $1 AND ($2 IS NULL OR livemode = $2)
         ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4"
    ));
    let rows: Vec<Row> =
        fetch_all!(c, sqlx::query_as(sql).bind(workspace_id).bind(livemode).bind(page.limit).bind(page.offset))?;
    Ok((rows.into_iter().map(Into::into).collect(), total))
}

/// Renames a key or changes `workspace_locked`; `None` if not in the workspace.
pub async fn update(
    c: &mut impl AsHandle,
    workspace_id: i64,
    id: i64,
    name: Option<&str>,
    workspace_locked: Option<bool>,
) -> StoreResult<Option<ApiKeyInfo>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE api_keys SET name = COALESCE($3, name), workspace_locked = COALESCE($4, workspace_locked)
         WHERE workspace_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> =
        fetch_optional!(c, sqlx::query_as(sql).bind(workspace_id).bind(id).bind(name).bind(workspace_locked))?;
    Ok(row.map(Into::into))
}

/// Revokes a key of `workspace_id` (idempotently); `None` if not in the workspace.
pub async fn revoke_in_workspace(c: &mut impl AsHandle, workspace_id: i64, id: i64) -> StoreResult<Option<ApiKeyInfo>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3) WHERE workspace_id = $1 AND id = $2 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind(workspace_id).bind(id).bind(Timestamp::now()))?;
    Ok(row.map(Into::into))
}

/// Revokes the keys a user created in a workspace (they were removed from
/// it: a key they copied must not outlive their access). Returns how many.
pub async fn revoke_created_by(c: &mut impl AsHandle, workspace_id: i64, user_id: i64) -> StoreResult<u64> {
    Ok(execute!(
        c,
        sqlx::query(
            "UPDATE api_keys SET revoked_at = $3 WHERE workspace_id = $1 AND created_by = $2 AND revoked_at IS NULL",
        )
        .bind(workspace_id)
        .bind(user_id)
        .bind(Timestamp::now())
    )?)
}
