//! Per-scope change counters for cached reads.

use parley_domain::Scope;

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, fetch_all};

/// The change counters of one scope at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(Vec<(String, i64)>);

impl Snapshot {
    /// The counters from `(resource, version)` rows: a resource's shards
    /// (several rows) add up to its counter.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, i64)>) -> Self {
        let mut counters: Vec<(String, i64)> = Vec::new();
        for (resource, version) in pairs {
            match counters.iter_mut().find(|(r, _)| *r == resource) {
                Some((_, total)) => *total += version,
                None => counters.push((resource, version)),
            }
        }
        Snapshot(counters)
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
    Ok(Snapshot::from_pairs(rows))
}

/// Records a change to `resource` in `scope`; in a transaction, at its
/// commit (with its other bumps, in one statement).
pub async fn bump(c: &mut impl AsHandle, scope: Scope, resource: &str) -> StoreResult<()> {
    if c.defer_bump(scope, resource) {
        return Ok(());
    }
    bump_all(c, [(scope, resource.to_owned())]).await
}

/// How many rows a counter is split over on PostgreSQL. Each bump adds 1
/// to one of them, each instance's transactions in turn, and holds that
/// row's lock until its commit: writers in one workspace wait on each other
/// only when two commit on one shard at once. Readers sum the rows, at
/// most this many a resource. SQLite's single writer always bumps shard 0.
const SHARDS: usize = 8;

/// The shard the next PostgreSQL transaction bumps.
pub(crate) fn next_shard() -> i16 {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    (NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % SHARDS) as i16
}

/// `counters` once each, in one order, so that two PostgreSQL transactions
/// bumping the same counters lock their rows in the same order (no deadlock).
pub(crate) fn in_lock_order(counters: impl IntoIterator<Item = (Scope, String)>) -> Vec<(Scope, String)> {
    let mut counters: Vec<(Scope, String)> = counters.into_iter().collect();
    counters.sort_by(|a, b| (a.0.workspace_id, a.0.livemode(), &a.1).cmp(&(b.0.workspace_id, b.0.livemode(), &b.1)));
    counters.dedup();
    counters
}

/// Bumps every counter named, once each, in one statement, now (a
/// transaction's commit calls it for the bumps it kept; use [`bump`]).
pub async fn bump_all(c: &mut impl AsHandle, counters: impl IntoIterator<Item = (Scope, String)>) -> StoreResult<()> {
    let counters = in_lock_order(counters);
    if counters.is_empty() {
        return Ok(());
    }
    // One shard for all of a transaction's counters, so its locks follow
    // the sorted order above.
    let shard = if c.is_postgres() { next_shard() } else { 0 };
    crate::dispatch!(c, conn => {
        let mut q =
            sqlx::QueryBuilder::new("INSERT INTO scope_versions (workspace_id, livemode, resource, shard, version) ");
        q.push_values(&counters, |mut b, (scope, resource)| {
            b.push_bind(scope.workspace_id)
                .push_bind(scope.livemode())
                .push_bind(resource)
                .push_bind(shard)
                .push_bind(1_i64);
        });
        q.push(" ON CONFLICT (workspace_id, livemode, resource, shard) DO UPDATE SET version = scope_versions.version + 1");
        q.build().execute(conn).await.map(|r| r.rows_affected())
    })?;
    Ok(())
}
