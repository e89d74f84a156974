//! Billing: balances, the ledger, credits, charges for agents and calls,
//! holds for calls in progress, starting balances and the low-balance event.
//!
//! Money only moves through [`post`], which appends a ledger entry and moves
//! the stored balance in the caller's transaction, and emits `balance.low`
//! when the balance crosses the threshold downward. Charges carry a key
//! (`agent_create:<id>`, `call:<id>`), so a retried charge never posts twice.

use parley_domain::billing::{Balance, Balances, EntryType, LedgerEntry, call_cost_cents};
use parley_domain::event::EventType;
use parley_domain::ids::WorkspaceId;
use parley_domain::validation::{Page, Parsed, QueryReader, integer, loc, parse_object, string};
use parley_domain::{Mode, Scope};
use parley_store::repo::billing::{self as repo, Account, Holding, NewEntry, Posting};
use parley_store::repo::events;
use parley_store::{AsHandle, Tx};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, event_data};

/// The filters lists take.
pub use parley_store::repo::billing::EntryFilter;

/// Prices and starting balances, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingConfig {
    /// Charged when an agent is created.
    pub agent_create_cents: i64,
    /// Calls are billed per started second at this rate per minute.
    pub call_per_minute_cents: i64,
    /// A new workspace's test balance, and what a test-mode reset restores.
    pub initial_test_credit_cents: i64,
    /// A new workspace's live balance.
    pub initial_live_credit_cents: i64,
    /// `balance.low` fires when the balance falls below this.
    pub low_balance_threshold_cents: i64,
}

impl Default for BillingConfig {
    fn default() -> Self {
        Self {
            agent_create_cents: 50,
            call_per_minute_cents: 5,
            initial_test_credit_cents: 10_000,
            initial_live_credit_cents: 0,
            low_balance_threshold_cents: 500,
        }
    }
}

/// The most one credit may add: 1,000,000.00 USD.
pub const MAX_CREDIT_CENTS: i64 = 100_000_000;

/// `POST /api/v1/billing/credits`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"amount_cents": 5000, "description": "Top-up"}))]
pub struct AddCredit {
    /// 1 to 100,000,000 cents.
    #[schema(minimum = 1, maximum = 100_000_000)]
    pub amount_cents: i64,
    /// 1–500 characters. Default "Credit".
    #[schema(nullable = false, min_length = 1, max_length = 500)]
    pub description: Option<String>,
}

pub fn parse_credit(body: serde_json::Value) -> Parsed<AddCredit> {
    parse_object(body, loc(&["body"]), |r| {
        let amount_cents = r.required("amount_cents", integer(1, MAX_CREDIT_CENTS));
        let description = r.optional("description", string(1, 500));
        Some(AddCredit { amount_cents: amount_cents?, description })
    })
}

pub fn parse_filter(q: &mut QueryReader) -> EntryFilter {
    EntryFilter {
        kind: q.enum_value::<EntryType>("type"),
        created_after: q.timestamp("created_after"),
        created_before: q.timestamp("created_before"),
    }
}

fn balance_of(scope: Scope, account: Account, config: &BillingConfig) -> Balance {
    Balance {
        currency: "USD",
        balance_cents: account.balance_cents,
        held_cents: account.held_cents,
        available_cents: account.available_cents(),
        low_balance_threshold_cents: config.low_balance_threshold_cents,
        mode: scope.mode,
    }
}

pub async fn balance(svc: &Services, scope: Scope) -> ServiceResult<Balance> {
    let mut c = svc.db.read().await?;
    let account = repo::account(&mut c, scope).await?;
    Ok(balance_of(scope, account, &svc.config.billing))
}

/// A workspace's balance in both modes, on one connection (for a
/// signed-in person, who may switch between them).
pub async fn balances(svc: &Services, workspace: WorkspaceId) -> ServiceResult<Balances> {
    let mut c = svc.db.read().await?;
    let (live, test) = (Scope::new(workspace.0, Mode::Live), Scope::new(workspace.0, Mode::Test));
    let live = balance_of(live, repo::account(&mut c, live).await?, &svc.config.billing);
    let test = balance_of(test, repo::account(&mut c, test).await?, &svc.config.billing);
    Ok(Balances { live, test })
}

pub async fn transactions(
    svc: &Services,
    scope: Scope,
    filter: &EntryFilter,
    page: Page,
) -> ServiceResult<(Vec<LedgerEntry>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page.limit, page.offset).await?)
}

/// Appends an entry; emits `balance.low` if it takes the balance below the
/// threshold. Returns the entry (the earlier one for a key already posted).
async fn post(tx: &mut Tx, scope: Scope, config: &BillingConfig, entry: NewEntry<'_>) -> ServiceResult<LedgerEntry> {
    match repo::post(tx, scope, &entry).await? {
        Posting::Posted { entry, before } => {
            let threshold = config.low_balance_threshold_cents;
            if before >= threshold && entry.balance_after_cents < threshold {
                let account = repo::account(tx, scope).await?;
                events::append(tx, scope, EventType::BalanceLow, event_data(&balance_of(scope, account, config))?)
                    .await?;
            }
            Ok(entry)
        }
        Posting::AlreadyPosted(entry) => Ok(entry),
        Posting::Insufficient(account) => Err(insufficient(account, -entry.amount_cents)),
    }
}

fn insufficient(account: Account, needed: i64) -> ServiceError {
    ServiceError::PaymentRequired(format!(
        "Insufficient balance: this needs {} cents and {} cents are available",
        needed,
        account.available_cents()
    ))
}

/// Adds money (an owner's credit, the CLI).
pub async fn credit(
    tx: &mut Tx,
    scope: Scope,
    config: &BillingConfig,
    amount_cents: i64,
    description: &str,
) -> ServiceResult<LedgerEntry> {
    if amount_cents <= 0 {
        return Err(ServiceError::BadRequest("A credit must be a positive number of cents".into()));
    }
    let entry = NewEntry {
        kind: EntryType::Credit,
        amount_cents,
        description,
        resource_type: None,
        resource_id: None,
        key: None,
        require_funds: false,
    };
    post(tx, scope, config, entry).await
}

/// Credits `scope`'s account from outside any request (the CLI): its own
/// unit of work; an unknown workspace is a 404.
pub async fn grant_credit(
    svc: &Services,
    scope: Scope,
    amount_cents: i64,
    description: &str,
) -> ServiceResult<LedgerEntry> {
    let mut work = svc.begin().await?;
    if parley_store::repo::workspaces::get(&mut work, scope.workspace_id).await?.is_none() {
        return Err(ServiceError::not_found("Workspace", scope.workspace_id));
    }
    let entry = credit(&mut work, scope, &svc.config.billing, amount_cents, description).await?;
    svc.commit(work).await?;
    Ok(entry)
}

/// Charges for creating `agent_id`, or refuses with 402 (the caller's
/// transaction then rolls back the agent too).
pub async fn charge_agent_creation(
    tx: &mut Tx,
    scope: Scope,
    config: &BillingConfig,
    agent_id: i64,
) -> ServiceResult<Option<LedgerEntry>> {
    if config.agent_create_cents <= 0 {
        return Ok(None);
    }
    let key = format!("agent_create:{agent_id}");
    let resource_id = agent_id.to_string();
    let entry = NewEntry {
        kind: EntryType::Charge,
        amount_cents: -config.agent_create_cents,
        description: "Agent creation",
        resource_type: Some("agent"),
        resource_id: Some(&resource_id),
        key: Some(&key),
        require_funds: true,
    };
    post(tx, scope, config, entry).await.map(Some)
}

/// Sets a test balance back to the configured starting amount with one
/// adjustment entry (the ledger is never rewritten). Test mode only.
pub async fn reset_test_balance(tx: &mut Tx, scope: Scope, config: &BillingConfig) -> ServiceResult<Balance> {
    if scope.mode != Mode::Test {
        return Err(ServiceError::Forbidden("Balances can only be reset in test mode; use a test key".into()));
    }
    let account = repo::account(tx, scope).await?;
    let difference = config.initial_test_credit_cents - account.balance_cents;
    if difference != 0 {
        let entry = NewEntry {
            kind: EntryType::Adjustment,
            amount_cents: difference,
            description: "Test balance reset",
            resource_type: None,
            resource_id: None,
            key: None,
            require_funds: false,
        };
        post(tx, scope, config, entry).await?;
    }
    Ok(balance_of(scope, repo::account(tx, scope).await?, config))
}

/// Opens a new workspace's two accounts with their starting credits
/// (ordinary ledger entries).
pub async fn open_accounts(
    tx: &mut Tx,
    workspace_id: i64,
    config: &BillingConfig,
    live_credit_cents: i64,
) -> ServiceResult<()> {
    for (mode, cents, description) in [
        (Mode::Test, config.initial_test_credit_cents, "Starting test balance"),
        (Mode::Live, live_credit_cents, "Starting credit"),
    ] {
        let scope = Scope::new(workspace_id, mode);
        repo::open(tx, scope).await?;
        if cents > 0 {
            let entry = NewEntry {
                kind: EntryType::Credit,
                amount_cents: cents,
                description,
                resource_type: None,
                resource_id: None,
                key: Some("starting_credit"),
                require_funds: false,
            };
            post(tx, scope, config, entry).await?;
        }
    }
    Ok(())
}

// --- Calls ------------------------------------------------------------------
//
// A call checks for one minute of funds when it is created, holds that minute
// while it runs (so concurrent calls cannot overdraw by more than their last
// minute each), and is charged once, per started second, when it ends.

fn call_hold_key(call_id: &str) -> String {
    format!("call:{call_id}")
}

/// 402 unless one minute of calling is available.
pub async fn ensure_call_funds(c: &mut impl AsHandle, scope: Scope, config: &BillingConfig) -> ServiceResult<()> {
    let account = repo::account(c, scope).await?;
    if account.available_cents() < config.call_per_minute_cents {
        return Err(insufficient(account, config.call_per_minute_cents));
    }
    Ok(())
}

/// Reserves one minute of calling for `call_id`, or 402. Holding twice is harmless.
pub async fn hold_for_call(tx: &mut Tx, scope: Scope, config: &BillingConfig, call_id: &str) -> ServiceResult<()> {
    if config.call_per_minute_cents <= 0 {
        return Ok(());
    }
    match repo::hold(tx, scope, &call_hold_key(call_id), config.call_per_minute_cents).await? {
        Holding::Held | Holding::AlreadyHeld => Ok(()),
        Holding::Insufficient(account) => Err(insufficient(account, config.call_per_minute_cents)),
    }
}

/// Gives back a call's hold without charging (it never connected).
pub async fn release_call_hold(tx: &mut Tx, scope: Scope, call_id: &str) -> ServiceResult<()> {
    repo::release(tx, scope, &call_hold_key(call_id)).await?;
    Ok(())
}

/// Charges a finished call for `duration_ms` and releases its hold, exactly
/// once however often it is called. The call has happened, so the charge
/// posts even if it takes the balance below zero.
pub async fn charge_call(
    tx: &mut Tx,
    scope: Scope,
    config: &BillingConfig,
    call_id: &str,
    duration_ms: i64,
) -> ServiceResult<Option<LedgerEntry>> {
    let key = call_hold_key(call_id);
    repo::release(tx, scope, &key).await?;
    let cents = call_cost_cents(duration_ms, config.call_per_minute_cents);
    if cents == 0 {
        return Ok(None);
    }
    let seconds = (duration_ms + 999) / 1000;
    let description = format!("Call, {seconds} s");
    let entry = NewEntry {
        kind: EntryType::Charge,
        amount_cents: -cents,
        description: &description,
        resource_type: Some("call"),
        resource_id: Some(call_id),
        key: Some(&key),
        require_funds: false,
    };
    post(tx, scope, config, entry).await.map(Some)
}

pub use parley_store::repo::billing::Discrepancy;

/// Every account, of every workspace, whose balance is not the sum of its
/// entries or whose held amount is not the sum of its holds (`parley
/// billing verify`; an operator check, not scoped on purpose).
pub async fn discrepancies(svc: &Services) -> ServiceResult<Vec<Discrepancy>> {
    let mut c = svc.db.read().await?;
    Ok(repo::discrepancies(&mut c).await?)
}

// ---- agent runs ----------------------------------------------------------------
//
// A run of a priced engine needs some available balance to start; its
// tokens are charged once it has answered, exactly once (keyed by the run),
// even below zero: the model has already been paid for.

/// Whether a run of a priced engine may start (some balance is available).
pub async fn run_funded(svc: &crate::Services, scope: Scope) -> ServiceResult<bool> {
    Ok(repo::account(&mut svc.db.read().await?, scope).await?.available_cents() > 0)
}

/// Charges run `run_id` `cents` for its tokens, once however often it is called.
pub async fn charge_run(
    tx: &mut Tx,
    scope: Scope,
    config: &BillingConfig,
    run_id: i64,
    cents: i64,
    usage: &str,
) -> ServiceResult<Option<LedgerEntry>> {
    if cents <= 0 {
        return Ok(None);
    }
    let key = format!("agent_run:{run_id}");
    let id = run_id.to_string();
    let description = format!("Agent run, {usage}");
    let entry = NewEntry {
        kind: EntryType::Charge,
        amount_cents: -cents,
        description: &description,
        resource_type: Some("agent_run"),
        resource_id: Some(&id),
        key: Some(&key),
        require_funds: false,
    };
    post(tx, scope, config, entry).await.map(Some)
}
