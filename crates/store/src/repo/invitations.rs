//! Invitations to a workspace and password resets: one-time links whose
//! token is stored only as SHA-256. "Taking" a link marks it used with a
//! compare-and-set, so two requests racing with one link cannot both win.

use parley_domain::Timestamp;
use parley_domain::user::{Invitation, Role};

use super::corrupt;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_optional};

const COLUMNS: &str = "id, workspace_id, email, role, invited_by, created_at, expires_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    workspace_id: i64,
    email: String,
    role: String,
    invited_by: Option<i64>,
    created_at: Timestamp,
    expires_at: Timestamp,
}

impl TryFrom<Row> for Invitation {
    type Error = crate::StoreError;
    fn try_from(r: Row) -> Result<Self, Self::Error> {
        let role = Role::parse(&r.role).ok_or_else(|| corrupt("invitation role", &r.role))?;
        Ok(Invitation {
            id: r.id,
            workspace_id: r.workspace_id,
            email: r.email,
            role,
            invited_by: r.invited_by,
            created_at: r.created_at,
            expires_at: r.expires_at,
        })
    }
}

pub struct NewInvitation<'a> {
    pub workspace_id: i64,
    pub email: &'a str,
    pub role: Role,
    pub token_hash: &'a str,
    pub invited_by: Option<i64>,
    pub expires_at: Timestamp,
}

pub async fn insert(c: &mut impl AsHandle, i: &NewInvitation<'_>) -> StoreResult<Invitation> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO invitations (workspace_id, email, role, token_hash, invited_by, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    ));
    let row: Row = crate::fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind(i.workspace_id)
            .bind(i.email)
            .bind(i.role.as_str())
            .bind(i.token_hash)
            .bind(i.invited_by)
            .bind(Timestamp::now())
            .bind(i.expires_at)
    )?;
    row.try_into()
}

/// The workspace's invitations still waiting (not accepted, revoked or lapsed), newest first.
pub async fn pending(c: &mut impl AsHandle, workspace_id: i64) -> StoreResult<Vec<Invitation>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM invitations
         WHERE workspace_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2
         ORDER BY id DESC LIMIT 500"
    ));
    let rows: Vec<Row> = fetch_all!(c, sqlx::query_as(sql).bind(workspace_id).bind(Timestamp::now()))?;
    rows.into_iter().map(TryInto::try_into).collect()
}

/// Revokes the workspace's waiting invitations to `email` (a new one replaces them).
pub async fn revoke_pending_for(c: &mut impl AsHandle, workspace_id: i64, email: &str) -> StoreResult<u64> {
    Ok(execute!(
        c,
        sqlx::query(
            "UPDATE invitations SET revoked_at = $3
             WHERE workspace_id = $1 AND email = $2 AND accepted_at IS NULL AND revoked_at IS NULL",
        )
        .bind(workspace_id)
        .bind(email)
        .bind(Timestamp::now())
    )?)
}

/// Revokes one waiting invitation of the workspace; `None` if there is none by that id.
pub async fn revoke(c: &mut impl AsHandle, workspace_id: i64, id: i64) -> StoreResult<Option<Invitation>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE invitations SET revoked_at = $3
         WHERE workspace_id = $1 AND id = $2 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $3
         RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind(workspace_id).bind(id).bind(Timestamp::now()))?;
    row.map(TryInto::try_into).transpose()
}

/// Why an invitation of the workspace is no longer waiting, if it exists
/// (asked once `revoke` found it not waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Accepted,
    Revoked,
    Expired,
}

pub async fn ended(c: &mut impl AsHandle, workspace_id: i64, id: i64) -> StoreResult<Option<Ended>> {
    let sql = "SELECT accepted_at IS NOT NULL, revoked_at IS NOT NULL FROM invitations
         WHERE workspace_id = $1 AND id = $2";
    let row: Option<(bool, bool)> = fetch_optional!(c, sqlx::query_as(sql).bind(workspace_id).bind(id))?;
    // Neither accepted nor revoked, and not waiting: its time ran out.
    Ok(row.map(|(accepted, revoked)| match (accepted, revoked) {
        (true, _) => Ended::Accepted,
        (_, true) => Ended::Revoked,
        _ => Ended::Expired,
    }))
}

/// The waiting invitation a link's token belongs to, with its workspace's name.
pub async fn find_pending(c: &mut impl AsHandle, token_hash: &str) -> StoreResult<Option<(Invitation, String)>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT i.id, i.workspace_id, i.email, i.role, i.invited_by, i.created_at, i.expires_at, w.name
         FROM invitations i JOIN workspaces w ON w.id = i.workspace_id
         WHERE i.token_hash = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > $2"
    ));
    let row: Option<(i64, i64, String, String, Option<i64>, Timestamp, Timestamp, String)> =
        fetch_optional!(c, sqlx::query_as(sql).bind(token_hash).bind(Timestamp::now()))?;
    row.map(|(id, workspace_id, email, role, invited_by, created_at, expires_at, name)| {
        Row { id, workspace_id, email, role, invited_by, created_at, expires_at }.try_into().map(|i| (i, name))
    })
    .transpose()
}

/// Marks an invitation accepted; false if it was accepted or revoked meanwhile.
pub async fn mark_accepted(c: &mut impl AsHandle, id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE invitations SET accepted_at = $2 WHERE id = $1 AND accepted_at IS NULL AND revoked_at IS NULL"
        )
        .bind(id)
        .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

/// A new password-reset link for a user; earlier unused ones stop working.
pub async fn insert_reset(
    c: &mut impl AsHandle,
    user_id: i64,
    token_hash: &str,
    expires_at: Timestamp,
) -> StoreResult<()> {
    let now = Timestamp::now();
    execute!(
        c,
        sqlx::query("UPDATE password_resets SET used_at = $2 WHERE user_id = $1 AND used_at IS NULL")
            .bind(user_id)
            .bind(now)
    )?;
    execute!(
        c,
        sqlx::query(
            "INSERT INTO password_resets (user_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, $4)"
        )
        .bind(user_id)
        .bind(token_hash)
        .bind(now)
        .bind(expires_at)
    )?;
    Ok(())
}

/// Whether a reset link is valid and unused (read only; `take_reset` uses it).
pub async fn reset_is_valid(c: &mut impl AsHandle, token_hash: &str) -> StoreResult<bool> {
    let row: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as("SELECT id FROM password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2")
            .bind(token_hash)
            .bind(Timestamp::now())
    )?;
    Ok(row.is_some())
}

/// Uses a reset link: the user it belongs to, if it was valid and unused
/// (it is used up by this call).
pub async fn take_reset(c: &mut impl AsHandle, token_hash: &str) -> StoreResult<Option<i64>> {
    let row: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "UPDATE password_resets SET used_at = $2
             WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 RETURNING user_id",
        )
        .bind(token_hash)
        .bind(Timestamp::now())
    )?;
    Ok(row.map(|(id,)| id))
}
