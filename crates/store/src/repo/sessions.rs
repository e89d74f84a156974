//! JWT signing keys and refresh tokens.

use parley_domain::{Mode, Scope, Timestamp};

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_optional};

/// A signing key as stored: its secret is sealed with the master key.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredSigningKey {
    pub kid: String,
    pub sealed_secret: String,
    pub created_at: Timestamp,
    pub retired_at: Option<Timestamp>,
}

pub async fn insert_signing_key(c: &mut impl AsHandle, kid: &str, sealed_secret: &str) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("INSERT INTO signing_keys (kid, sealed_secret, created_at) VALUES ($1, $2, $3)")
            .bind(kid)
            .bind(sealed_secret)
            .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Every key still usable for verification, newest first.
pub async fn signing_keys(c: &mut impl AsHandle) -> StoreResult<Vec<StoredSigningKey>> {
    Ok(fetch_all!(
        c,
        sqlx::query_as(
            "SELECT kid, sealed_secret, created_at, retired_at FROM signing_keys ORDER BY created_at DESC, kid DESC"
        )
    )?)
}

/// Marks every active key except `kid` retired (they keep verifying).
pub async fn retire_signing_keys_except(c: &mut impl AsHandle, kid: &str) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("UPDATE signing_keys SET retired_at = $2 WHERE kid <> $1 AND retired_at IS NULL")
            .bind(kid)
            .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Deletes keys retired before `before`: no token they signed is still valid.
pub async fn delete_signing_keys_retired_before(c: &mut impl AsHandle, before: Timestamp) -> StoreResult<u64> {
    Ok(execute!(c, sqlx::query("DELETE FROM signing_keys WHERE retired_at < $1").bind(before))?)
}

/// A refresh token's record.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefreshToken {
    pub id: i64,
    pub family_id: String,
    pub user_id: i64,
    pub workspace_id: i64,
    pub livemode: bool,
    pub expires_at: Timestamp,
    pub rotated_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    /// `dashboard` or `oauth_sign_in` (migration 0030).
    pub purpose: String,
}

impl RefreshToken {
    pub fn scope(&self) -> Scope {
        Scope::new(self.workspace_id, Mode::from_livemode(self.livemode))
    }
}

pub async fn insert_refresh_token(
    c: &mut impl AsHandle,
    token_hash: &str,
    family_id: &str,
    user_id: i64,
    scope: Scope,
    expires_at: Timestamp,
    purpose: &str,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO refresh_tokens (token_hash, family_id, user_id, workspace_id, livemode, created_at, expires_at,
                purpose)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(token_hash)
        .bind(family_id)
        .bind(user_id)
        .bind_scope(scope)
        .bind(Timestamp::now())
        .bind(expires_at)
        .bind(purpose)
    )?;
    Ok(())
}

pub async fn find_refresh_token(c: &mut impl AsHandle, token_hash: &str) -> StoreResult<Option<RefreshToken>> {
    Ok(fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT id, family_id, user_id, workspace_id, livemode, expires_at, rotated_at, revoked_at, purpose
             FROM refresh_tokens WHERE token_hash = $1",
        )
        .bind(token_hash)
    )?)
}

/// Marks a token used; false if another request rotated it first.
pub async fn mark_rotated(c: &mut impl AsHandle, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("UPDATE refresh_tokens SET rotated_at = $2 WHERE id = $1 AND rotated_at IS NULL")
            .bind(id)
            .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

/// Revokes every token of a family (logout, or reuse detected).
pub async fn revoke_family(c: &mut impl AsHandle, family_id: &str) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("UPDATE refresh_tokens SET revoked_at = $2 WHERE family_id = $1 AND revoked_at IS NULL")
            .bind(family_id)
            .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Revokes every session of a user (their password changed): their access
/// tokens are refused at the next request, their refresh tokens at once.
pub async fn revoke_user(c: &mut impl AsHandle, user_id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("UPDATE refresh_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL")
            .bind(user_id)
            .bind(Timestamp::now())
    )?;
    Ok(())
}
