//! Channel connections.

use parley_domain::channel::{Channel, ChannelStatus, ChannelType};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use serde_json::{Map, Value};
use sqlx::types::Json;

use super::versions;
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

pub const VERSION_KEY: &str = "channels";

const COLUMNS: &str = "id, type, name, public_id, address, status, config, secret_names, sealed_secrets, \
    sealed_signing_secret, status_reason, created_at, updated_at";

/// A stored channel, with its sealed secrets (for the services only).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChannelRow {
    pub id: i64,
    #[sqlx(rename = "type")]
    pub kind: ChannelType,
    pub name: String,
    pub public_id: String,
    pub address: String,
    pub status: ChannelStatus,
    pub config: Json<Map<String, Value>>,
    pub secret_names: Json<Vec<String>>,
    /// The secret settings as a JSON object, sealed.
    pub sealed_secrets: Option<String>,
    /// The `whsec_…` secret of an api channel, sealed.
    pub sealed_signing_secret: Option<String>,
    /// Why the channel is in `error`.
    pub status_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl ChannelRow {
    pub fn to_api(&self) -> StoreResult<Channel> {
        Ok(Channel {
            id: self.id,
            kind: self.kind,
            name: self.name.clone(),
            address: self.address.clone(),
            public_id: self.public_id.clone(),
            status: self.status,
            status_reason: self.status_reason.clone(),
            config: self.config.0.clone(),
            secrets_set: self.secret_names.0.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// Every writable field of a channel.
#[derive(Debug, Clone)]
pub struct ChannelFields {
    pub kind: ChannelType,
    pub name: String,
    pub public_id: String,
    pub address: String,
    pub status: ChannelStatus,
    pub config: Map<String, Value>,
    pub secret_names: Vec<String>,
    pub sealed_secrets: Option<String>,
    pub sealed_signing_secret: Option<String>,
    pub status_reason: Option<String>,
}

impl From<&ChannelRow> for ChannelFields {
    fn from(r: &ChannelRow) -> Self {
        ChannelFields {
            kind: r.kind,
            name: r.name.clone(),
            public_id: r.public_id.clone(),
            address: r.address.clone(),
            status: r.status,
            config: r.config.0.clone(),
            secret_names: r.secret_names.0.clone(),
            sealed_secrets: r.sealed_secrets.clone(),
            sealed_signing_secret: r.sealed_signing_secret.clone(),
            status_reason: r.status_reason.clone(),
        }
    }
}

/// Binds the fields a channel's writes share, in the order both number them.
macro_rules! bind_fields {
    ($q:expr, $f:expr) => {
        $q.bind(&$f.name)
            .bind(&$f.address)
            .bind($f.status.as_str())
            .bind(Json(&$f.config))
            .bind(Json(&$f.secret_names))
            .bind(&$f.sealed_secrets)
            .bind(&$f.sealed_signing_secret)
            .bind(&$f.status_reason)
    };
}

pub async fn insert(c: &mut impl AsHandle, scope: Scope, f: &ChannelFields) -> StoreResult<ChannelRow> {
    let now = Timestamp::now();
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO channels (workspace_id, livemode, type, public_id, name, address, status, config, secret_names,
            sealed_secrets, sealed_signing_secret, status_reason, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13) RETURNING {COLUMNS}"
    ));
    let row: ChannelRow = fetch_one!(
        c,
        bind_fields!(sqlx::query_as(sql).bind_scope(scope).bind(f.kind.as_str()).bind(&f.public_id), f).bind(now)
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(row)
}

pub async fn update(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    f: &ChannelFields,
) -> StoreResult<Option<ChannelRow>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE channels SET name = $4, address = $5, status = $6, config = $7, secret_names = $8, sealed_secrets = $9,
            sealed_signing_secret = $10, status_reason = $11, updated_at = $12
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    let row: Option<ChannelRow> =
        fetch_optional!(c, bind_fields!(sqlx::query_as(sql).bind_scope(scope).bind(id), f).bind(Timestamp::now()))?;
    if row.is_some() {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(row)
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<ChannelRow>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM channels WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?)
}

pub async fn delete(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("DELETE FROM channels WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    if n > 0 {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(n > 0)
}

/// The oldest active channel connection of a type.
pub async fn first_active_of_type(
    c: &mut impl AsHandle,
    scope: Scope,
    kind: ChannelType,
) -> StoreResult<Option<ChannelRow>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM channels WHERE workspace_id = $1 AND livemode = $2 AND type = $3 AND status = 'active'
         ORDER BY id LIMIT 1"
    ));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(kind))?)
}

/// Channels newest first, optionally of one type, and how many match.
pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    kind: Option<ChannelType>,
    page: Page,
) -> StoreResult<(Vec<ChannelRow>, i64)> {
    let kind = kind.map(ChannelType::as_str);
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM channels WHERE workspace_id = $1 AND livemode = $2 AND ($3 IS NULL OR type = $3)"
        )
        .bind_scope(scope)
        .bind(kind)
    )?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM channels WHERE workspace_id = $1 AND livemode = $2 AND ($3 IS NULL OR type = $3)
         ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5"
    ));
    let rows: Vec<ChannelRow> =
        fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(kind).bind(page.limit).bind(page.offset))?;
    Ok((rows, total))
}

/// A channel by id in any workspace, with its scope: for inbound traffic,
/// which proves its right to the channel by signature, not by API key.
pub async fn find_for_inbound(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<(Scope, ChannelRow)>> {
    owned_by(c, "id = $1", id).await
}

/// One channel found by a global key, with the scope that owns it.
async fn owned_by<'q, T>(c: &mut impl AsHandle, condition: &str, key: T) -> StoreResult<Option<(Scope, ChannelRow)>>
where
    T: 'q
        + Send
        + sqlx::Encode<'q, crate::sqlite::Lite>
        + sqlx::Type<crate::sqlite::Lite>
        + sqlx::Encode<'q, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>,
{
    #[derive(sqlx::FromRow)]
    struct Owned {
        workspace_id: i64,
        livemode: bool,
        #[sqlx(flatten)]
        row: ChannelRow,
    }
    let sql = sqlx::AssertSqlSafe(format!("SELECT workspace_id, livemode, {COLUMNS} FROM channels WHERE {condition}"));
    let found: Option<Owned> = fetch_optional!(c, sqlx::query_as(sql).bind(key))?;
    Ok(found.map(|o| (Scope::new(o.workspace_id, parley_domain::Mode::from_livemode(o.livemode)), o.row)))
}

/// The live voice channel with `number` as its address, in any workspace,
/// with its scope (inbound calls; numbers are unique among them).
pub async fn find_voice_number(c: &mut impl AsHandle, number: &str) -> StoreResult<Option<(Scope, ChannelRow)>> {
    owned_by(c, "type = 'voice' AND livemode = TRUE AND address = $1 ORDER BY id LIMIT 1", number).await
}

/// A channel by its public id (webchat), in any workspace, with its scope.
pub async fn find_by_public_id(c: &mut impl AsHandle, public_id: &str) -> StoreResult<Option<(Scope, ChannelRow)>> {
    owned_by(c, "public_id = $1", public_id).await
}
