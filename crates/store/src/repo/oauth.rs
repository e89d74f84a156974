//! OAuth clients, grants, codes and tokens. Secrets (client secrets, codes,
//! tokens) are stored as SHA-256 only.

use parley_domain::oauth::OAuthGrant;
use parley_domain::user::Role;
use parley_domain::{Mode, Scope, Timestamp};

use super::versions::Snapshot;
use crate::repo::BindScope;
use crate::{AsHandle, StoreError, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

/// A client as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Client {
    pub client_id: String,
    pub client_name: String,
    pub client_uri: Option<String>,
    /// A JSON array of strings.
    pub redirect_uris: String,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub auth_method: String,
    pub secret_hash: Option<String>,
    /// `registered` (RFC 7591) or `metadata_document`.
    pub source: String,
    pub created_at: Timestamp,
    /// A metadata document's cache lifetime.
    pub expires_at: Option<Timestamp>,
}

impl Client {
    pub fn redirect_uris(&self) -> Vec<String> {
        serde_json::from_str(&self.redirect_uris).unwrap_or_default()
    }
}

const CLIENT_COLUMNS: &str =
    "client_id, client_name, client_uri, redirect_uris, auth_method, secret_hash, source, created_at, expires_at";

pub async fn find_client(c: &mut impl AsHandle, client_id: &str) -> StoreResult<Option<Client>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {CLIENT_COLUMNS} FROM oauth_clients WHERE client_id = $1"));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind(client_id))?)
}

/// Inserts a client, or replaces a cached metadata document's copy.
pub async fn upsert_client(c: &mut impl AsHandle, client: &Client) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, client_name, client_uri, redirect_uris, auth_method, secret_hash,
                                        source, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (client_id) DO UPDATE SET client_name = excluded.client_name,
                client_uri = excluded.client_uri, redirect_uris = excluded.redirect_uris,
                auth_method = excluded.auth_method, secret_hash = excluded.secret_hash,
                expires_at = excluded.expires_at",
        )
        .bind(&client.client_id)
        .bind(&client.client_name)
        .bind(&client.client_uri)
        .bind(&client.redirect_uris)
        .bind(&client.auth_method)
        .bind(&client.secret_hash)
        .bind(&client.source)
        .bind(client.created_at)
        .bind(client.expires_at)
    )?;
    Ok(())
}

/// A grant as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Grant {
    pub id: i64,
    pub user_id: i64,
    pub client_id: String,
    pub client_name: String,
    pub workspace_id: i64,
    pub livemode: bool,
    pub workspace_locked: bool,
    pub scope: String,
    pub resource: String,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}

impl Grant {
    pub fn scope(&self) -> Scope {
        Scope::new(self.workspace_id, Mode::from_livemode(self.livemode))
    }
}

impl From<Grant> for OAuthGrant {
    fn from(g: Grant) -> Self {
        OAuthGrant {
            id: g.id,
            client_id: g.client_id,
            client_name: g.client_name,
            workspace_id: g.workspace_id,
            mode: Mode::from_livemode(g.livemode),
            workspace_locked: g.workspace_locked,
            scope: g.scope,
            created_at: g.created_at,
            last_used_at: g.last_used_at,
        }
    }
}

const GRANT_COLUMNS: &str = "id, user_id, client_id, client_name, workspace_id, livemode, workspace_locked, scope, \
                             resource, created_at, last_used_at, revoked_at";

/// What a new grant holds.
pub struct NewGrant<'a> {
    pub user_id: i64,
    pub client_id: &'a str,
    pub client_name: &'a str,
    pub scope: Scope,
    pub workspace_locked: bool,
    pub scopes: &'a str,
    pub resource: &'a str,
}

pub async fn insert_grant(c: &mut impl AsHandle, g: &NewGrant<'_>) -> StoreResult<i64> {
    let (id,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "INSERT INTO oauth_grants (user_id, client_id, client_name, workspace_id, livemode, workspace_locked,
                                       scope, resource, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        )
        .bind(g.user_id)
        .bind(g.client_id)
        .bind(g.client_name)
        .bind_scope(g.scope)
        .bind(g.workspace_locked)
        .bind(g.scopes)
        .bind(g.resource)
        .bind(Timestamp::now())
    )?;
    Ok(id)
}

pub async fn get_grant(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<Grant>> {
    let sql = sqlx::AssertSqlSafe(format!("SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE id = $1"));
    Ok(fetch_optional!(c, sqlx::query_as(sql).bind(id))?)
}

/// A user's live grants, newest first.
pub async fn grants_of(c: &mut impl AsHandle, user_id: i64) -> StoreResult<Vec<Grant>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {GRANT_COLUMNS} FROM oauth_grants WHERE user_id = $1 AND revoked_at IS NULL ORDER BY id DESC"
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind(user_id))?)
}

/// Revokes a grant (idempotently); false if it was already revoked.
pub async fn revoke_grant(c: &mut impl AsHandle, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("UPDATE oauth_grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
            .bind(id)
            .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

pub async fn touch_grant(c: &mut impl AsHandle, id: i64, now: Timestamp, min_interval_s: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE oauth_grants SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
        )
        .bind(id)
        .bind(now)
        .bind(now.plus_seconds(-min_interval_s))
    )?;
    Ok(())
}

/// An authorization code as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Code {
    pub id: i64,
    pub grant_id: i64,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub expires_at: Timestamp,
    pub used_at: Option<Timestamp>,
}

pub async fn insert_code(
    c: &mut impl AsHandle,
    code_hash: &str,
    grant_id: i64,
    redirect_uri: &str,
    code_challenge: &str,
    expires_at: Timestamp,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(code_hash)
        .bind(grant_id)
        .bind(redirect_uri)
        .bind(code_challenge)
        .bind(expires_at)
    )?;
    Ok(())
}

pub async fn find_code(c: &mut impl AsHandle, code_hash: &str) -> StoreResult<Option<Code>> {
    Ok(fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT id, grant_id, redirect_uri, code_challenge, expires_at, used_at FROM oauth_codes WHERE code_hash = $1"
        )
        .bind(code_hash)
    )?)
}

/// Marks a code used; false if another request used it first.
pub async fn use_code(c: &mut impl AsHandle, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("UPDATE oauth_codes SET used_at = $2 WHERE id = $1 AND used_at IS NULL")
            .bind(id)
            .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

/// `access` or `refresh`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Access,
    Refresh,
}

impl TokenKind {
    fn as_str(self) -> &'static str {
        match self {
            TokenKind::Access => "access",
            TokenKind::Refresh => "refresh",
        }
    }
}

pub async fn insert_token(
    c: &mut impl AsHandle,
    token_hash: &str,
    grant_id: i64,
    kind: TokenKind,
    scope: &str,
    expires_at: Timestamp,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO oauth_tokens (token_hash, grant_id, kind, scope, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(token_hash)
        .bind(grant_id)
        .bind(kind.as_str())
        .bind(scope)
        .bind(Timestamp::now())
        .bind(expires_at)
    )?;
    Ok(())
}

/// A token with its grant.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Token {
    pub id: i64,
    pub grant_id: i64,
    pub scope: String,
    pub expires_at: Timestamp,
    pub rotated_at: Option<Timestamp>,
    pub client_id: String,
    pub grant_revoked_at: Option<Timestamp>,
}

pub async fn find_token(c: &mut impl AsHandle, token_hash: &str, kind: TokenKind) -> StoreResult<Option<Token>> {
    Ok(fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT t.id, t.grant_id, t.scope, t.expires_at, t.rotated_at, g.client_id, g.revoked_at AS grant_revoked_at
             FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
             WHERE t.token_hash = $1 AND t.kind = $2",
        )
        .bind(token_hash)
        .bind(kind.as_str())
    )?)
}

/// Marks a refresh token used; false if another request rotated it first.
pub async fn rotate_token(c: &mut impl AsHandle, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("UPDATE oauth_tokens SET rotated_at = $2 WHERE id = $1 AND rotated_at IS NULL")
            .bind(id)
            .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

/// Ends one token (RFC 7009 revocation of an access token): it expires now.
pub async fn expire_token(c: &mut impl AsHandle, id: i64) -> StoreResult<()> {
    execute!(c, sqlx::query("UPDATE oauth_tokens SET expires_at = $2 WHERE id = $1").bind(id).bind(Timestamp::now()))?;
    Ok(())
}

/// What an access token proves, read in one query: its grant (not
/// revoked), the user's current role in the grant's workspace (so leaving
/// the workspace ends the grant's use at once) and the scope's versions.
#[derive(Debug, Clone)]
pub struct AccessGrant {
    pub grant_id: i64,
    pub user_id: i64,
    pub scope: Scope,
    pub workspace_locked: bool,
    pub scopes: String,
    pub expires_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub role: Role,
    pub versions: Snapshot,
}

pub async fn authenticate_access(c: &mut impl AsHandle, token_hash: &str) -> StoreResult<Option<AccessGrant>> {
    #[allow(clippy::type_complexity)]
    let rows: Vec<(
        i64,
        i64,
        i64,
        bool,
        bool,
        String,
        Timestamp,
        Option<Timestamp>,
        String,
        Option<String>,
        Option<i64>,
    )> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT g.id, g.user_id, g.workspace_id, g.livemode, g.workspace_locked, t.scope, t.expires_at,
                        g.last_used_at, m.role, v.resource, v.version
                 FROM oauth_tokens t
                 JOIN oauth_grants g ON g.id = t.grant_id AND g.revoked_at IS NULL
                 JOIN memberships m ON m.user_id = g.user_id AND m.workspace_id = g.workspace_id
                 LEFT JOIN scope_versions v ON v.workspace_id = g.workspace_id AND v.livemode = g.livemode
                 WHERE t.token_hash = $1 AND t.kind = 'access'",
        )
        .bind(token_hash)
    )?;
    let Some(first) = rows.first() else { return Ok(None) };
    let role = Role::parse(&first.8).ok_or_else(|| StoreError::Corrupt(format!("membership role {:?}", first.8)))?;
    let versions = Snapshot::from_pairs(rows.iter().filter_map(|r| Some((r.9.clone()?, r.10?))));
    Ok(Some(AccessGrant {
        grant_id: first.0,
        user_id: first.1,
        scope: Scope::new(first.2, Mode::from_livemode(first.3)),
        workspace_locked: first.4,
        scopes: first.5.clone(),
        expires_at: first.6,
        last_used_at: first.7,
        role,
        versions,
    }))
}

/// Drops codes and tokens that expired before `before` (housekeeping).
pub async fn purge_expired(c: &mut impl AsHandle, before: Timestamp) -> StoreResult<u64> {
    let codes = execute!(c, sqlx::query("DELETE FROM oauth_codes WHERE expires_at < $1").bind(before))?;
    let tokens = execute!(c, sqlx::query("DELETE FROM oauth_tokens WHERE expires_at < $1").bind(before))?;
    Ok(codes + tokens)
}
