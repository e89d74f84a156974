//! Users and memberships. Users span workspaces, so these are not scoped;
//! callers check membership before acting in a workspace.

use parley_domain::Timestamp;
use parley_domain::user::{Member, Membership, Role, User};

use super::corrupt;
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    email: String,
    created_at: Timestamp,
}

impl From<Row> for User {
    fn from(r: Row) -> Self {
        User { id: r.id, email: r.email, created_at: r.created_at }
    }
}

/// Inserts a user; `None` if the (normalised) email is taken.
pub async fn insert(c: &mut impl AsHandle, email: &str, password_hash: &str) -> StoreResult<Option<User>> {
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(
            "INSERT INTO users (email, password_hash, created_at, updated_at) VALUES ($1, $2, $3, $3)
             ON CONFLICT (email) DO NOTHING RETURNING id, email, created_at",
        )
        .bind(email)
        .bind(password_hash)
        .bind(Timestamp::now())
    )?;
    Ok(row.map(Into::into))
}

pub async fn get(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<User>> {
    let row: Option<Row> =
        fetch_optional!(c, sqlx::query_as("SELECT id, email, created_at FROM users WHERE id = $1").bind(id))?;
    Ok(row.map(Into::into))
}

/// The user with `email` and their password hash, for login.
pub async fn find_credentials(c: &mut impl AsHandle, email: &str) -> StoreResult<Option<(User, String)>> {
    let row: Option<(i64, String, Timestamp, String)> = fetch_optional!(
        c,
        sqlx::query_as("SELECT id, email, created_at, password_hash FROM users WHERE email = $1").bind(email)
    )?;
    Ok(row.map(|(id, email, created_at, hash)| (User { id, email, created_at }, hash)))
}

/// Adds the user to a workspace, or changes their role there.
pub async fn set_membership(c: &mut impl AsHandle, user_id: i64, workspace_id: i64, role: Role) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO memberships (user_id, workspace_id, role, created_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT (user_id, workspace_id) DO UPDATE SET role = excluded.role",
        )
        .bind(user_id)
        .bind(workspace_id)
        .bind(role.as_str())
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// The user's role in a workspace, if they belong to it.
/// Removes a user from a workspace (their sessions and grants there stop
/// working at their next request).
pub async fn remove_membership(c: &mut impl AsHandle, user_id: i64, workspace_id: i64) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("DELETE FROM memberships WHERE user_id = $1 AND workspace_id = $2")
            .bind(user_id)
            .bind(workspace_id)
    )?;
    Ok(n == 1)
}

pub async fn role_in(c: &mut impl AsHandle, user_id: i64, workspace_id: i64) -> StoreResult<Option<Role>> {
    let row: Option<(String,)> = fetch_optional!(
        c,
        sqlx::query_as("SELECT role FROM memberships WHERE user_id = $1 AND workspace_id = $2")
            .bind(user_id)
            .bind(workspace_id)
    )?;
    row.map(|(r,)| Role::parse(&r).ok_or_else(|| corrupt("membership role", &r))).transpose()
}

/// Every workspace the user belongs to, oldest membership first.
pub async fn memberships(c: &mut impl AsHandle, user_id: i64) -> StoreResult<Vec<Membership>> {
    let rows: Vec<(i64, String, String)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT m.workspace_id, w.name, m.role FROM memberships m JOIN workspaces w ON w.id = m.workspace_id
             WHERE m.user_id = $1 ORDER BY m.workspace_id",
        )
        .bind(user_id)
    )?;
    rows.into_iter()
        .map(|(workspace_id, workspace_name, role)| {
            let role = Role::parse(&role).ok_or_else(|| corrupt("membership role", &role))?;
            Ok(Membership { workspace_id, workspace_name, role })
        })
        .collect()
}

/// The workspace's members, owners first, then by when they joined.
pub async fn members(c: &mut impl AsHandle, workspace_id: i64) -> StoreResult<Vec<Member>> {
    let rows: Vec<(i64, String, String, Timestamp)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT u.id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id
             WHERE m.workspace_id = $1
             ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 ELSE 2 END, m.created_at, u.id",
        )
        .bind(workspace_id)
    )?;
    rows.into_iter()
        .map(|(user_id, email, role, joined_at)| {
            let role = Role::parse(&role).ok_or_else(|| corrupt("membership role", &role))?;
            Ok(Member { user_id, email, role, joined_at })
        })
        .collect()
}

/// How many owners the workspace has, counted with its owners' rows
/// locked on PostgreSQL, so that two demotions cannot both leave "one".
pub async fn lock_owner_count(c: &mut impl AsHandle, workspace_id: i64) -> StoreResult<i64> {
    const SQL: &str = "SELECT user_id FROM memberships WHERE workspace_id = $1 AND role = 'owner'";
    // SQLite's writer is one connection in BEGIN IMMEDIATE: already exclusive.
    let rows: Vec<(i64,)> = match crate::AsHandle::handle(c) {
        crate::Handle::Sqlite(conn) => sqlx::query_as(SQL).bind(workspace_id).fetch_all(conn).await?,
        crate::Handle::Postgres(conn) => {
            sqlx::query_as(sqlx::AssertSqlSafe(format!("{SQL} FOR UPDATE"))).bind(workspace_id).fetch_all(conn).await?
        }
    };
    Ok(rows.len() as i64)
}

pub async fn find_by_email(c: &mut impl AsHandle, email: &str) -> StoreResult<Option<User>> {
    let row: Option<Row> =
        fetch_optional!(c, sqlx::query_as("SELECT id, email, created_at FROM users WHERE email = $1").bind(email))?;
    Ok(row.map(Into::into))
}

pub async fn set_password_hash(c: &mut impl AsHandle, user_id: i64, password_hash: &str) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query("UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1")
            .bind(user_id)
            .bind(password_hash)
            .bind(Timestamp::now())
    )?;
    Ok(n == 1)
}

pub async fn count(c: &mut impl AsHandle) -> StoreResult<i64> {
    let (n,): (i64,) = fetch_one!(c, sqlx::query_as("SELECT COUNT(*) FROM users"))?;
    Ok(n)
}

/// The user's role in the scope's workspace and the scope's change counters,
/// in one round trip; `None` if they do not belong to the workspace or the
/// session `session_id` (a refresh-token family) was revoked.
pub async fn session_role_and_versions(
    c: &mut impl AsHandle,
    user_id: i64,
    scope: parley_domain::Scope,
    session_id: &str,
) -> StoreResult<Option<(Role, super::versions::Snapshot)>> {
    let rows: Vec<(String, Option<String>, Option<i64>)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT m.role, v.resource, v.version FROM memberships m
             LEFT JOIN scope_versions v ON v.workspace_id = m.workspace_id AND v.livemode = $3
             WHERE m.user_id = $1 AND m.workspace_id = $2
               AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.family_id = $4 AND r.revoked_at IS NOT NULL)",
        )
        .bind(user_id)
        .bind_scope(scope)
        .bind(session_id)
    )?;
    let Some((role, _, _)) = rows.first() else { return Ok(None) };
    let role = Role::parse(role).ok_or_else(|| corrupt("membership role", role))?;
    let versions = super::versions::Snapshot::from_pairs(rows.iter().filter_map(|(_, r, v)| Some((r.clone()?, (*v)?))));
    Ok(Some((role, versions)))
}
