//! Money: ledger entries, balances and prices, always in integer cents.

use serde::Serialize;
use utoipa::ToSchema;

use crate::{Mode, Timestamp};

string_enum!(
    /// What a ledger entry records.
    EntryType {
        /// Money added (owner credit, starting balance).
        Credit = "credit",
        /// Money taken for a billed operation (agent creation, a call).
        Charge = "charge",
        /// Money given back for a charge.
        Refund = "refund",
        /// A correction, e.g. a test-mode reset.
        Adjustment = "adjustment",
    }
);

/// One ledger entry (a "transaction" in the API). Entries are never changed
/// or removed; the balance is the sum of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LedgerEntry {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Signed: positive adds to the balance, negative takes from it.
    pub amount_cents: i64,
    /// The balance right after this entry.
    pub balance_after_cents: i64,
    pub description: String,
    /// What the entry is for, e.g. `agent` or `call`, or null.
    pub resource_type: Option<String>,
    /// The id of that resource as the API shows it (a string, since call ids are), or null.
    pub resource_id: Option<String>,
    pub created_at: Timestamp,
}

/// `GET /api/v1/billing/balance`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Balance {
    /// Always `USD`.
    pub currency: &'static str,
    /// The sum of every ledger entry of this workspace and mode.
    pub balance_cents: i64,
    /// Held for calls in progress (one minute each); not yet charged.
    pub held_cents: i64,
    /// `balance_cents - held_cents`: what new charges can draw on.
    pub available_cents: i64,
    /// `balance.low` is emitted when the balance falls below this.
    pub low_balance_threshold_cents: i64,
    pub mode: Mode,
}

/// `GET /api/v1/billing/balances`: a workspace's balance in each mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Balances {
    pub live: Balance,
    pub test: Balance,
}

/// What a call of `duration_ms` costs: every started second is billed, and
/// the call's total is rounded up to a whole cent.
pub fn call_cost_cents(duration_ms: i64, per_minute_cents: i64) -> i64 {
    if duration_ms <= 0 || per_minute_cents <= 0 {
        return 0;
    }
    let seconds = (duration_ms + 999) / 1000;
    (seconds * per_minute_cents + 59) / 60
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_billed_per_started_second_rounded_up_per_call() {
        assert_eq!(call_cost_cents(0, 5), 0);
        assert_eq!(call_cost_cents(1, 5), 1); // one started second: 5/60 of a cent, rounded up
        assert_eq!(call_cost_cents(60_000, 5), 5);
        assert_eq!(call_cost_cents(60_001, 5), 6); // 61 s = 5.08 cents
        assert_eq!(call_cost_cents(119_000, 5), 10); // 119 s = 9.92 cents
        assert_eq!(call_cost_cents(120_000, 5), 10);
        assert_eq!(call_cost_cents(36_000_000, 7), 4200); // ten hours
        assert_eq!(call_cost_cents(30_000, 0), 0);
    }

    #[test]
    fn entry_types_round_trip() {
        for name in EntryType::ALL {
            assert_eq!(EntryType::parse(name).map(EntryType::as_str), Some(*name));
        }
        assert_eq!(EntryType::parse("gift"), None);
    }
}
