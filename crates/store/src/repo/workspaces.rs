//! Workspaces: the tenants. Not scoped, since a workspace is the scope.

use parley_domain::Timestamp;
use parley_domain::workspace::Workspace;

use crate::{AsHandle, StoreResult, fetch_one, fetch_optional};

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    name: String,
    voice_enabled: bool,
    created_at: Timestamp,
}

impl From<Row> for Workspace {
    fn from(r: Row) -> Self {
        Workspace { id: r.id, name: r.name, voice_enabled: r.voice_enabled, created_at: r.created_at }
    }
}

pub async fn insert(c: &mut impl AsHandle, name: &str, voice_enabled: bool) -> StoreResult<Workspace> {
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(
            "INSERT INTO workspaces (name, voice_enabled, created_at) VALUES ($1, $2, $3)
         RETURNING id, name, voice_enabled, created_at",
        )
        .bind(name)
        .bind(voice_enabled)
        .bind(Timestamp::now())
    )?;
    Ok(row.into())
}

pub async fn get(c: &mut impl AsHandle, id: i64) -> StoreResult<Option<Workspace>> {
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as("SELECT id, name, voice_enabled, created_at FROM workspaces WHERE id = $1",).bind(id)
    )?;
    Ok(row.map(Into::into))
}

pub async fn count(c: &mut impl AsHandle) -> StoreResult<i64> {
    let (n,): (i64,) = fetch_one!(c, sqlx::query_as("SELECT COUNT(*) FROM workspaces"))?;
    Ok(n)
}
