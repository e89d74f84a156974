//! The unit of work below the HTTP layer, on SQLite and PostgreSQL:
//! placing a call dials with no transaction open (on SQLite a transaction
//! holds the only writer, so another write during the dial would wait),
//! idempotent answers replay, and a dropped unit of work hangs up the call
//! it placed and leaves nothing behind; what a call writes as it runs
//! signals its conversation's live views.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::idempotency::IdempotencyKey;
use parley_services::calls::{self, CallRuntime};
use parley_services::{Idempotent, Services, agents};
use parley_store::Db;
use parley_store::testing::TestDatabase;
use parley_voice::provider::{Dial, DialError, Placed, Provider};
use parley_voice::simulated::Simulated;
use serde_json::{Value, json};

/// A provider that, while dialling, checks that a write transaction can be
/// begun elsewhere (so the caller holds none), then dials the simulated one.
struct Probe {
    db: Db,
    simulated: Simulated,
    writable_during_dial: Mutex<Vec<bool>>,
}

impl Provider for Probe {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn dial(&self, dial: Dial) -> BoxFuture<'_, Result<Placed, DialError>> {
        Box::pin(async move {
            let free = support::writable(&self.db).await;
            self.writable_during_dial.lock().unwrap().push(free);
            self.simulated.dial(dial).await
        })
    }
}

async fn setup(database: &TestDatabase) -> (Services, Arc<Probe>, Scope, i64) {
    let db = support::database(&database.url).await;
    let probe = Arc::new(Probe { db, simulated: Simulated::default(), writable_during_dial: Mutex::new(Vec::new()) });
    let calls = CallRuntime::new(probe.clone(), probe.clone());
    let (svc, scope) = support::workspace(probe.db.clone(), |svc| svc.with_call_runtime(calls)).await;
    let input = agents::parse_create(json!({"name": "Ava"}), &agents::EngineNames::of(svc.config())).unwrap();
    let agent = svc.transaction(async |work| agents::create(work, &svc, scope, input).await).await.unwrap();
    (svc, probe, scope, agent.agent.id)
}

fn call_to(agent_id: i64, to: &str) -> calls::CreateCall {
    calls::parse_create(json!({"agent_id": agent_id, "to": to, "max_duration_s": 10}), Default::default()).unwrap()
}

fn key(k: &str) -> Option<Idempotent> {
    Some(Idempotent { key: IdempotencyKey::parse(k).unwrap(), fingerprint: format!("fp-{k}") })
}

async fn placing_a_call_dials_outside_any_transaction_and_replays(database: TestDatabase) {
    let (svc, probe, scope, agent) = setup(&database).await;

    let placed = calls::place(&svc, scope, key("k1"), call_to(agent, "+14155550100")).await.unwrap();
    assert_eq!(placed.answer.status, 201);
    assert!(!placed.replayed);
    let call: Value = serde_json::from_str(&placed.answer.body).unwrap();
    assert_eq!(call["status"], "queued");
    assert_eq!(*probe.writable_during_dial.lock().unwrap(), vec![true], "a transaction was open while dialling");

    let again = calls::place(&svc, scope, key("k1"), call_to(agent, "+14155550100")).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.answer, placed.answer);
    assert_eq!(probe.writable_during_dial.lock().unwrap().len(), 1, "a replay must not dial");

    // A provider failure is an answer too (502, the call stored failed), replayed as such.
    let failed = calls::place(&svc, scope, key("k2"), call_to(agent, "+15005550001")).await.unwrap();
    assert_eq!(failed.answer.status, 502);
    let listed =
        calls::list(&svc, scope, &Default::default(), parley_domain::validation::Page { limit: 50, offset: 0 })
            .await
            .unwrap();
    let dial_failed: Vec<_> = listed.0.iter().filter(|c| c.to == "+15005550001").collect();
    assert_eq!(dial_failed.len(), 1);
    assert_eq!(serde_json::to_value(dial_failed[0]).unwrap()["ended_reason"], "dial_failed");
    let replayed = calls::place(&svc, scope, key("k2"), call_to(agent, "+15005550001")).await.unwrap();
    assert!(replayed.replayed);
    assert_eq!(replayed.answer, failed.answer);

    // The same key for another request is a conflict, not a replay.
    let mut other = key("k1").unwrap();
    other.fingerprint = "another request".into();
    let refused = calls::place(&svc, scope, Some(other), call_to(agent, "+14155550100")).await.unwrap_err();
    assert!(matches!(refused, parley_services::ServiceError::Conflict(_)), "{refused:?}");
}

async fn a_dropped_unit_of_work_leaves_nothing(database: TestDatabase) {
    let (svc, _probe, scope, _agent) = setup(&database).await;
    let input = agents::parse_create(json!({"name": "Rolled back"}), &agents::EngineNames::of(svc.config())).unwrap();
    let mut work = svc.begin().await.unwrap();
    let agent = agents::create(&mut work, &svc, scope, input).await.unwrap().agent;
    drop(work);
    let gone = agents::get(&svc, scope, parley_domain::ids::AgentId(agent.id)).await.unwrap_err();
    assert!(matches!(gone, parley_services::ServiceError::NotFound { .. }), "{gone:?}");
}

/// A step a test registers, as any area would: what happened to it.
struct Step(&'static str, Arc<Mutex<Vec<String>>>);

impl parley_services::AfterCommit for Step {
    fn committed(self: Box<Self>, _svc: &Services) {
        self.1.lock().unwrap().push(format!("{} committed", self.0));
    }
    fn abandoned(self: Box<Self>) {
        self.1.lock().unwrap().push(format!("{} abandoned", self.0));
    }
}

async fn after_commit_steps_run_in_order_once_committed_or_are_abandoned(database: TestDatabase) {
    let (svc, _probe, _scope, _agent) = setup(&database).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut work = svc.begin().await.unwrap();
    work.after_commit(Step("a", seen.clone()));
    work.after_commit(Step("b", seen.clone()));
    assert!(seen.lock().unwrap().is_empty(), "a step ran before the commit");
    svc.commit(work).await.unwrap();
    let mut dropped = svc.begin().await.unwrap();
    dropped.after_commit(Step("c", seen.clone()));
    drop(dropped);
    assert_eq!(*seen.lock().unwrap(), ["a committed", "b committed", "c abandoned"]);
}

/// Every line of a call's transcript is a message of the call's
/// conversation, and each reaches the conversation's live views (a
/// webchat socket, the dashboard) as it is written, as the end of the call
/// does: they are written through the unit of work, which signals them.
async fn a_calls_transcript_lines_reach_its_conversations_listeners(database: TestDatabase) {
    let (svc, probe, scope, agent) = setup(&database).await;
    let mut signals = svc.subscribe_signals();
    let placed = calls::place(&svc, scope, None, call_to(agent, "+14155550100")).await.unwrap();
    let call: Value = serde_json::from_str(&placed.answer.body).unwrap();
    let id = call["id"].as_str().unwrap().to_owned();
    let conversation_id = call["conversation_id"].as_i64().expect("a call has a conversation");
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let now = calls::get(&svc, scope, &id).await.unwrap();
            if now.ended_at.is_some() {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the simulated call ended");
    assert_eq!(serde_json::to_value(&ended).unwrap()["status"], "completed", "{ended:?}");
    let mut c = probe.db.read().await.unwrap();
    let lines = parley_store::repo::conversations::recent_messages(&mut c, scope, conversation_id, 100).await.unwrap();
    assert!(lines.len() >= 2, "the simulated call has a transcript: {lines:?}");
    // The end's signal follows its commit: the call can read as ended a
    // moment before it is sent.
    let mut heard = 0;
    while heard <= lines.len()
        && let Ok(Ok(signal)) = tokio::time::timeout(Duration::from_secs(5), signals.recv()).await
    {
        if signal == (parley_services::signals::Signal::ConversationChanged { conversation_id }) {
            heard += 1;
        }
    }
    // One signal per line written, and one for the conversation closing with the call.
    assert!(heard > lines.len(), "{heard} signals for {} transcript lines and the end", lines.len());
}

parley_store::on_both_backends!(
    a_calls_transcript_lines_reach_its_conversations_listeners,
    placing_a_call_dials_outside_any_transaction_and_replays,
    a_dropped_unit_of_work_leaves_nothing,
    after_commit_steps_run_in_order_once_committed_or_are_abandoned
);
