//! Billing accounts, the append-only ledger and holds.
//!
//! Every change to an account first locks its row (`FOR UPDATE` on
//! PostgreSQL; SQLite's single writer already serialises), then reads,
//! decides and writes. So concurrent charges see each other's results, a
//! keyed entry is found by a retry instead of posted twice, and the stored
//! balance moves in the same transaction as the entry that explains it.

use parley_domain::billing::{EntryType, LedgerEntry};
use parley_domain::{Scope, Timestamp};

use super::{Arg, Where, bind_args};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

/// The change counter of ledger lists.
pub const VERSION_KEY: &str = "billing";

/// An account's money at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Account {
    pub balance_cents: i64,
    pub held_cents: i64,
}

impl Account {
    pub fn available_cents(&self) -> i64 {
        self.balance_cents - self.held_cents
    }
}

/// An entry to append.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    pub kind: EntryType,
    pub amount_cents: i64,
    pub description: &'a str,
    pub resource_type: Option<&'a str>,
    pub resource_id: Option<&'a str>,
    /// Posting twice with one key yields the first entry.
    pub key: Option<&'a str>,
    /// Refuse the entry if it would leave less than nothing available.
    pub require_funds: bool,
}

/// What an attempt to post gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posting {
    /// Appended; `before` is the balance it started from.
    Posted { entry: LedgerEntry, before: i64 },
    /// An entry with this key already exists; nothing changed.
    AlreadyPosted(LedgerEntry),
    /// `require_funds` and not enough available; nothing changed.
    Insufficient(Account),
}

/// What an attempt to hold gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    Held,
    /// A hold with this key already exists; nothing changed.
    AlreadyHeld,
    Insufficient(Account),
}

const ENTRY_COLUMNS: &str =
    "id, type, amount_cents, balance_after_cents, description, resource_type, resource_id, created_at";

#[derive(sqlx::FromRow)]
struct EntryRow {
    id: i64,
    #[sqlx(rename = "type")]
    kind: EntryType,
    amount_cents: i64,
    balance_after_cents: i64,
    description: String,
    resource_type: Option<String>,
    resource_id: Option<String>,
    created_at: Timestamp,
}

impl TryFrom<EntryRow> for LedgerEntry {
    type Error = crate::StoreError;

    fn try_from(r: EntryRow) -> Result<Self, Self::Error> {
        Ok(LedgerEntry {
            id: r.id,
            kind: r.kind,
            amount_cents: r.amount_cents,
            balance_after_cents: r.balance_after_cents,
            description: r.description,
            resource_type: r.resource_type,
            resource_id: r.resource_id,
            created_at: r.created_at,
        })
    }
}

/// Creates the scope's account with a zero balance, if it has none.
pub async fn open(c: &mut impl AsHandle, scope: Scope) -> StoreResult<()> {
    let now = Timestamp::now();
    execute!(
        c,
        sqlx::query(
            "INSERT INTO billing_accounts (workspace_id, livemode, balance_cents, held_cents, created_at, updated_at)
             VALUES ($1, $2, 0, 0, $3, $3) ON CONFLICT (workspace_id, livemode) DO NOTHING",
        )
        .bind_scope(scope)
        .bind(now)
    )?;
    Ok(())
}

/// The scope's account (zero if it has none yet), without locking.
pub async fn account(c: &mut impl AsHandle, scope: Scope) -> StoreResult<Account> {
    Ok(read_account(c, scope, false).await?.unwrap_or_default())
}

async fn read_account(c: &mut impl AsHandle, scope: Scope, lock: bool) -> StoreResult<Option<Account>> {
    let lock = if lock && c.is_postgres() { " FOR UPDATE" } else { "" };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT balance_cents, held_cents FROM billing_accounts WHERE workspace_id = $1 AND livemode = $2{lock}"
    ));
    let row: Option<(i64, i64)> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope))?;
    Ok(row.map(|(balance_cents, held_cents)| Account { balance_cents, held_cents }))
}

/// Locks the scope's account until the transaction ends, opening it if needed.
async fn lock_account(c: &mut impl AsHandle, scope: Scope) -> StoreResult<Account> {
    if let Some(a) = read_account(c, scope, true).await? {
        return Ok(a);
    }
    open(c, scope).await?;
    Ok(read_account(c, scope, true).await?.unwrap_or_default())
}

async fn entry_by_key(c: &mut impl AsHandle, scope: Scope, key: &str) -> StoreResult<Option<LedgerEntry>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE workspace_id = $1 AND livemode = $2 AND entry_key = $3"
    ));
    let row: Option<EntryRow> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(key))?;
    row.map(LedgerEntry::try_from).transpose()
}

/// Appends an entry and moves the balance with it. Call in a transaction.
pub async fn post(c: &mut impl AsHandle, scope: Scope, e: &NewEntry<'_>) -> StoreResult<Posting> {
    let account = lock_account(c, scope).await?;
    if let Some(key) = e.key
        && let Some(existing) = entry_by_key(c, scope, key).await?
    {
        return Ok(Posting::AlreadyPosted(existing));
    }
    if e.require_funds && account.available_cents() + e.amount_cents < 0 {
        return Ok(Posting::Insufficient(account));
    }
    let after = account.balance_cents + e.amount_cents;
    let now = Timestamp::now();
    execute!(
        c,
        sqlx::query(
            "UPDATE billing_accounts SET balance_cents = $3, updated_at = $4 WHERE workspace_id = $1 AND livemode = $2",
        )
        .bind_scope(scope)
        .bind(after)
        .bind(now)
    )?;
    let (id,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "INSERT INTO ledger_entries (workspace_id, livemode, type, amount_cents, balance_after_cents, description,
                                         resource_type, resource_id, entry_key, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
        )
        .bind_scope(scope)
        .bind(e.kind.as_str())
        .bind(e.amount_cents)
        .bind(after)
        .bind(e.description)
        .bind(e.resource_type)
        .bind(e.resource_id)
        .bind(e.key)
        .bind(now)
    )?;
    super::versions::bump(c, scope, VERSION_KEY).await?;
    let entry = LedgerEntry {
        id,
        kind: e.kind,
        amount_cents: e.amount_cents,
        balance_after_cents: after,
        description: e.description.to_owned(),
        resource_type: e.resource_type.map(str::to_owned),
        resource_id: e.resource_id.map(str::to_owned),
        created_at: now,
    };
    Ok(Posting::Posted { entry, before: account.balance_cents })
}

/// Reserves `amount_cents` of the available balance under `key`.
pub async fn hold(c: &mut impl AsHandle, scope: Scope, key: &str, amount_cents: i64) -> StoreResult<Holding> {
    let account = lock_account(c, scope).await?;
    let existing: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT amount_cents FROM billing_holds WHERE workspace_id = $1 AND livemode = $2 AND hold_key = $3"
        )
        .bind_scope(scope)
        .bind(key)
    )?;
    if existing.is_some() {
        return Ok(Holding::AlreadyHeld);
    }
    if account.available_cents() < amount_cents {
        return Ok(Holding::Insufficient(account));
    }
    execute!(
        c,
        sqlx::query(
            "INSERT INTO billing_holds (workspace_id, livemode, hold_key, amount_cents, created_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind_scope(scope)
        .bind(key)
        .bind(amount_cents)
        .bind(Timestamp::now())
    )?;
    move_held(c, scope, amount_cents).await?;
    Ok(Holding::Held)
}

/// Gives back the hold `key`; returns its amount, or `None` if there was none.
pub async fn release(c: &mut impl AsHandle, scope: Scope, key: &str) -> StoreResult<Option<i64>> {
    lock_account(c, scope).await?;
    let released: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "DELETE FROM billing_holds WHERE workspace_id = $1 AND livemode = $2 AND hold_key = $3 RETURNING amount_cents",
        )
        .bind_scope(scope)
        .bind(key)
    )?;
    if let Some((amount,)) = released {
        move_held(c, scope, -amount).await?;
    }
    Ok(released.map(|(a,)| a))
}

async fn move_held(c: &mut impl AsHandle, scope: Scope, delta: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE billing_accounts SET held_cents = held_cents + $3, updated_at = $4
             WHERE workspace_id = $1 AND livemode = $2",
        )
        .bind_scope(scope)
        .bind(delta)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Filters of the ledger list.
#[derive(Debug, Clone, Default)]
pub struct EntryFilter {
    pub kind: Option<EntryType>,
    pub created_after: Option<Timestamp>,
    pub created_before: Option<Timestamp>,
}

/// Entries newest first, and how many match.
pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &EntryFilter,
    limit: i64,
    offset: i64,
) -> StoreResult<(Vec<LedgerEntry>, i64)> {
    let mut w = Where::scoped(scope, "e");
    if let Some(k) = filter.kind {
        w.and("e.type = ?", [Arg::Text(k.as_str().to_owned())]);
    }
    if let Some(t) = filter.created_after {
        w.and("e.created_at > ?", [Arg::Time(t)]);
    }
    if let Some(t) = filter.created_before {
        w.and("e.created_at < ?", [Arg::Time(t)]);
    }
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM ledger_entries e{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {ENTRY_COLUMNS} FROM ledger_entries e{} ORDER BY e.created_at DESC, e.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<EntryRow> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(limit).bind(offset))?;
    let entries = rows.into_iter().map(LedgerEntry::try_from).collect::<Result<_, _>>()?;
    Ok((entries, total))
}

/// An account whose stored figures disagree with its ledger or holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discrepancy {
    pub workspace_id: i64,
    pub livemode: bool,
    pub balance_cents: i64,
    pub ledger_sum_cents: i64,
    pub held_cents: i64,
    pub holds_sum_cents: i64,
}

/// Every account, of every workspace, whose balance is not the sum of its
/// entries or whose held amount is not the sum of its holds. Empty when
/// the books are right. (An operator check; not scoped on purpose.)
pub async fn discrepancies(c: &mut impl AsHandle) -> StoreResult<Vec<Discrepancy>> {
    let rows: Vec<(i64, bool, i64, i64, i64, i64)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT a.workspace_id, a.livemode, a.balance_cents,
                    CAST(COALESCE((SELECT SUM(e.amount_cents) FROM ledger_entries e
                                   WHERE e.workspace_id = a.workspace_id AND e.livemode = a.livemode), 0) AS BIGINT),
                    a.held_cents,
                    CAST(COALESCE((SELECT SUM(h.amount_cents) FROM billing_holds h
                                   WHERE h.workspace_id = a.workspace_id AND h.livemode = a.livemode), 0) AS BIGINT)
             FROM billing_accounts a ORDER BY a.workspace_id, a.livemode",
        )
    )?;
    Ok(rows
        .into_iter()
        .map(|(workspace_id, livemode, balance_cents, ledger_sum_cents, held_cents, holds_sum_cents)| Discrepancy {
            workspace_id,
            livemode,
            balance_cents,
            ledger_sum_cents,
            held_cents,
            holds_sum_cents,
        })
        .filter(|d| d.balance_cents != d.ledger_sum_cents || d.held_cents != d.holds_sum_cents)
        .collect())
}
