//! Per-scope change counters for cached reads.

use parley_domain::Scope;

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all};

/// The change counters of one scope at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(Vec<(String, i64)>);

impl Snapshot {
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, i64)>) -> Self {
        Snapshot(pairs.into_iter().collect())
    }

    /// The counter of `resource` (0 before its first change).
    pub fn get(&self, resource: &str) -> i64 {
        self.0.iter().find(|(r, _)| r == resource).map_or(0, |(_, v)| *v)
    }
}

/// Every counter of `scope`.
pub async fn snapshot(c: &mut impl AsHandle, scope: Scope) -> StoreResult<Snapshot> {
    let rows: Vec<(String, i64)> = fetch_all!(
        c,
        sqlx::query_as("SELECT resource, version FROM scope_versions WHERE workspace_id = $1 AND livemode = $2")
            .bind_scope(scope)
    )?;
    Ok(Snapshot(rows))
}

/// Records a change to `resource` in `scope`; call in the writing transaction.
pub async fn bump(c: &mut impl AsHandle, scope: Scope, resource: &str) -> StoreResult<()> {
    if !c.needs_bump(scope, resource) {
        return Ok(());
    }
    execute!(
        c,
        sqlx::query(
            "INSERT INTO scope_versions (workspace_id, livemode, resource, version) VALUES ($1, $2, $3, 1)
             ON CONFLICT (workspace_id, livemode, resource) DO UPDATE SET version = scope_versions.version + 1",
        )
        .bind_scope(scope)
        .bind(resource)
    )?;
    Ok(())
}
