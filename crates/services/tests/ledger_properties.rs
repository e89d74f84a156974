//! Property test: random sequences of credits, agent charges, call holds,
//! call charges and test resets, each committed or rolled back at random,
//! never leave the books inconsistent. After every step the stored balance
//! equals both the sum of the ledger entries and a plain model of what
//! should have happened, the held amount equals the open holds, and a
//! refusal (402) happens exactly when the model says funds are short.

use std::collections::{BTreeMap, BTreeSet};

use parley_domain::{Mode, Scope};
use parley_services::ServiceError;
use parley_services::billing::{self, BillingConfig};
use parley_services::tenancy::workspaces;
use parley_store::repo::billing as ledger;
use parley_store::testing::TestDatabase;
use parley_store::{Db, DbOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

#[derive(Debug, Clone)]
enum Op {
    Credit(i64),
    CreateAgent(u8),
    HoldCall(u8),
    ReleaseCall(u8),
    EndCall(u8, i64),
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1i64..120).prop_map(Op::Credit),
        (0u8..6).prop_map(Op::CreateAgent),
        (0u8..4).prop_map(Op::HoldCall),
        (0u8..4).prop_map(Op::ReleaseCall),
        ((0u8..4), (0i64..200_000)).prop_map(|(c, ms)| Op::EndCall(c, ms)),
        Just(Op::Reset),
    ]
}

/// What the books should say.
#[derive(Debug, Default, Clone)]
struct Model {
    balance: i64,
    holds: BTreeMap<u8, i64>,
    charged_agents: BTreeSet<u8>,
    ended_calls: BTreeSet<u8>,
}

impl Model {
    fn held(&self) -> i64 {
        self.holds.values().sum()
    }
    fn available(&self) -> i64 {
        self.balance - self.held()
    }
}

fn config() -> BillingConfig {
    // Calls dear enough that holds often decide whether a charge fits.
    BillingConfig {
        agent_create_cents: 50,
        call_per_minute_cents: 30,
        initial_test_credit_cents: 200,
        initial_live_credit_cents: 0,
        low_balance_threshold_cents: 120,
    }
}

/// Applies `op` in one transaction (committed if `commit`), returning
/// whether the service refused it for lack of funds.
async fn apply(db: &Db, scope: Scope, op: &Op, commit: bool) -> Result<bool, TestCaseError> {
    let cfg = config();
    let mut tx = db.begin().await.map_err(|e| TestCaseError::fail(e.to_string()))?;
    let result = match op {
        Op::Credit(c) => billing::credit(&mut tx, scope, &cfg, *c, "credit").await.map(|_| ()),
        // The agent id stands in for a real agent: the charge key is what matters.
        Op::CreateAgent(a) => billing::charge_agent_creation(&mut tx, scope, &cfg, i64::from(*a)).await.map(|_| ()),
        Op::HoldCall(c) => billing::hold_for_call(&mut tx, scope, &cfg, &format!("call_{c}")).await,
        Op::ReleaseCall(c) => billing::release_call_hold(&mut tx, scope, &format!("call_{c}")).await,
        Op::EndCall(c, ms) => billing::charge_call(&mut tx, scope, &cfg, &format!("call_{c}"), *ms).await.map(|_| ()),
        Op::Reset => billing::reset_test_balance(&mut tx, scope, &cfg).await.map(|_| ()),
    };
    let refused = match result {
        Ok(()) => false,
        Err(ServiceError::PaymentRequired(_)) => true,
        Err(e) => return Err(TestCaseError::fail(format!("{op:?} failed: {e}"))),
    };
    if commit && !refused {
        tx.commit().await.map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    Ok(refused)
}

/// The model's prediction for `op`: whether it is refused, and the new model.
fn predict(m: &Model, op: &Op) -> (bool, Model) {
    let cfg = config();
    let mut next = m.clone();
    match op {
        Op::Credit(c) => next.balance += c,
        Op::CreateAgent(a) => {
            if !m.charged_agents.contains(a) {
                if m.available() < cfg.agent_create_cents {
                    return (true, next);
                }
                next.balance -= cfg.agent_create_cents;
                next.charged_agents.insert(*a);
            }
        }
        Op::HoldCall(c) => {
            if !m.holds.contains_key(c) {
                if m.available() < cfg.call_per_minute_cents {
                    return (true, next);
                }
                next.holds.insert(*c, cfg.call_per_minute_cents);
            }
        }
        Op::ReleaseCall(c) => {
            next.holds.remove(c);
        }
        Op::EndCall(c, ms) => {
            next.holds.remove(c);
            let cost = parley_domain::billing::call_cost_cents(*ms, cfg.call_per_minute_cents);
            if cost > 0 && !m.ended_calls.contains(c) {
                next.balance -= cost;
                next.ended_calls.insert(*c);
            }
        }
        Op::Reset => next.balance = cfg.initial_test_credit_cents,
    }
    (false, next)
}

async fn run_case(db: &Db, case: usize, ops: &[(Op, bool)]) -> Result<(), TestCaseError> {
    let scope = {
        let mut tx = db.begin().await.unwrap();
        let created =
            workspaces::create_workspace(&mut tx, &format!("case {case}"), false, &config(), 0).await.unwrap();
        tx.commit().await.unwrap();
        Scope::new(created.workspace.id, Mode::Test)
    };
    let mut model = Model { balance: config().initial_test_credit_cents, ..Model::default() };
    for (step, (op, commit)) in ops.iter().enumerate() {
        let (refused_expected, next) = predict(&model, op);
        let refused = apply(db, scope, op, *commit).await?;
        prop_assert_eq!(refused, refused_expected, "step {}: {:?}", step, op);
        if *commit && !refused {
            model = next;
        }
        let mut c = db.read().await.unwrap();
        let account = ledger::account(&mut c, scope).await.unwrap();
        prop_assert_eq!(account.balance_cents, model.balance, "step {}: {:?} balance", step, op);
        prop_assert_eq!(account.held_cents, model.held(), "step {}: {:?} held", step, op);
        let wrong = ledger::discrepancies(&mut c).await.unwrap();
        prop_assert!(wrong.is_empty(), "step {}: {:?} left {:?}", step, op, wrong);
        // Only a finished call may take the balance below what is held.
        let (entries, _) = ledger::list(&mut c, scope, &ledger::EntryFilter::default(), 200, 0).await.unwrap();
        let sum: i64 = entries.iter().map(|e| e.amount_cents).sum();
        prop_assert_eq!(sum, model.balance);
        if let Some(newest) = entries.first() {
            prop_assert_eq!(newest.balance_after_cents, model.balance);
        }
    }
    Ok(())
}

fn check(db_for: impl FnOnce(&tokio::runtime::Runtime) -> (TestDatabase, Db), cases: u32) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_database, db) = db_for(&rt);
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    let case = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&prop::collection::vec((op(), prop::bool::weighted(0.85)), 1..40), |ops| {
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            rt.block_on(run_case(&db, n, &ops))
        })
        .unwrap();
}

async fn open(database: TestDatabase) -> (TestDatabase, Db) {
    let db = Db::connect(&database.url, &DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    (database, db)
}

#[test]
fn the_books_stay_consistent_on_sqlite() {
    check(|rt| rt.block_on(open(TestDatabase::sqlite())), 96);
}

#[test]
fn the_books_stay_consistent_on_postgres() {
    check(|rt| rt.block_on(async { open(TestDatabase::postgres().await).await }), 24);
}
