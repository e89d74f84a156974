//! The live stream's hubs: every committed event reaches a watcher once,
//! in commit order, and an event whose signal was lost still arrives (by
//! the hub's sweep), later but never missing.

use std::time::Duration;

use parley_domain::event::EventType;
use parley_store::repo::events;
use parley_store::testing::TestDatabase;
use serde_json::json;

mod support;

async fn next_ids(sub: &mut parley_services::live::Subscription, n: usize, wait: Duration) -> Vec<String> {
    let mut ids = Vec::new();
    let _ = tokio::time::timeout(wait, async {
        while ids.len() < n {
            match sub.events.recv().await {
                Ok(e) => match &*e {
                    parley_services::live::LiveEvent::Logged { id, .. } => ids.push(id.clone()),
                    parley_services::live::LiveEvent::Presence { .. } => {}
                },
                Err(e) => panic!("the watcher fell behind: {e}"),
            }
        }
    })
    .await;
    ids
}

async fn every_event_reaches_a_watcher_once_even_when_its_signal_is_lost(database: TestDatabase) {
    let db = support::database(&database.url).await;
    let (svc, scope) = support::workspace(db.clone(), |s| s).await;
    let mut sub = svc.watch(scope);
    let written = svc
        .transaction(async |work| {
            let mut ids = Vec::new();
            for n in 0..3 {
                ids.push(events::append(work, scope, EventType::ContactCreated, json!({"n": n})).await?.id);
            }
            Ok(ids)
        })
        .await
        .unwrap();
    assert_eq!(next_ids(&mut sub, 3, Duration::from_secs(2)).await, written, "at once, in order");

    // The announcement is lost (as a NOTIFY is while its listener reconnects).
    db.event_bell().listen(|_| {});
    let lost = svc
        .transaction(async |work| Ok(events::append(work, scope, EventType::ContactUpdated, json!({})).await?.id))
        .await
        .unwrap();
    // Another scope's event, its announcement lost too: the sweep must not
    // bring it here.
    let other = parley_domain::Scope::new(scope.workspace_id, parley_domain::Mode::Live);
    svc.transaction(async |work| Ok(events::append(work, other, EventType::ContactCreated, json!({})).await?.id))
        .await
        .unwrap();
    // The sweep (every 5 s) finds the lost one; waiting past the next sweep
    // shows it sends nothing twice, and nothing of the other scope.
    let got = next_ids(&mut sub, 2, Duration::from_secs(12)).await;
    assert_eq!(got, [lost], "the lost event arrives once, and nothing else");
}

parley_store::on_both_backends!(every_event_reaches_a_watcher_once_even_when_its_signal_is_lost);
