//! Several instances on one PostgreSQL database: shared rate limits through
//! Redis, and signals between instances (hang-ups, webchat replies).

use std::time::{Duration, Instant};

use parley_store::testing::TestDatabase;
use serde_json::json;

use crate::cli::{key_in, start_server_with};
use crate::support::*;

/// The local Redis every CI machine runs (never skipped: without it the
/// shared-limit test fails).
const REDIS: &str = "redis://127.0.0.1:6379/0";

/// Answers of `n` requests to `/api/v1/agents` with `key`, alternating
/// between the two servers.
async fn statuses(ports: [u16; 2], key: &str, n: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let mut out = Vec::new();
    for i in 0..n {
        let r = client
            .get(format!("http://127.0.0.1:{}/api/v1/agents", ports[i % 2]))
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap();
        out.push(r.status().as_u16());
    }
    out
}

/// Two `parley serve` processes on one PostgreSQL database, with `env`.
async fn two_servers(env: &[(&str, &str)]) -> (TestDatabase, crate::cli::Server, crate::cli::Server, String) {
    let database = TestDatabase::postgres().await;
    let (url, env): (String, Vec<(String, String)>) =
        (database.url.clone(), env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    let (one, two) = tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        // The first creates the Default workspace (and prints its key); then the second.
        let one = start_server_with(&url, &env);
        let two = start_server_with(&url, &env);
        (one, two)
    })
    .await
    .unwrap();
    let key = key_in(&one.banner, "live").expect("the first start prints a live key");
    (database, one, two, key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_hold_across_instances_with_redis() {
    let prefix = format!("parley-test-{}", uuid());
    let limits = [
        ("PARLEY_RATE_LIMIT__PER_SECOND", "0.01"),
        ("PARLEY_RATE_LIMIT__BURST", "6"),
        ("PARLEY_RATE_LIMIT__AUTH_FAILURES_PER_MINUTE", "2"),
    ];
    let mut shared = limits.to_vec();
    shared.extend([("PARLEY_RATE_LIMIT__REDIS_URL", REDIS), ("PARLEY_RATE_LIMIT__REDIS_KEY_PREFIX", prefix.as_str())]);
    let (_db, one, two, key) = two_servers(&shared).await;
    // One quota of 6 for the key, whichever instance answers.
    let got = statuses([one.port, two.port], &key, 8).await;
    assert_eq!(got, [200, 200, 200, 200, 200, 200, 429, 429], "the quota was not shared");
    // Failed sign-ins are counted across instances too.
    let client = reqwest::Client::new();
    let login = |port: u16| {
        client
            .post(format!("http://127.0.0.1:{port}/api/v1/auth/login"))
            .json(&json!({"email": "owner@parley.local", "password": "wrong password"}))
            .send()
    };
    assert_eq!(login(one.port).await.unwrap().status(), 401);
    assert_eq!(login(two.port).await.unwrap().status(), 401);
    assert_eq!(login(one.port).await.unwrap().status(), 429);
    assert_eq!(login(two.port).await.unwrap().status(), 429);

    // Without Redis each instance counts alone: the same traffic gets twice the quota.
    let (_db, one, two, key) = two_servers(&limits).await;
    let got = statuses([one.port, two.port], &key, 14).await;
    assert_eq!(got.iter().filter(|s| **s == 200).count(), 12, "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_instance_hangs_up_any_call() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let other = app.sibling().await;
    let ws = app.workspace("Acme").await;
    let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
    let r =
        crate::calls::place(&app, &ws.live, json!({"agent_id": agent, "to": "+14155550100", "max_duration_s": 600}))
            .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.body["id"].as_str().unwrap().to_owned();
    crate::calls::wait_for(&app, &ws.live, &id, |c| c["status"] == "in_progress").await;
    // The instance that did not place it hangs it up.
    let started = Instant::now();
    let r = other.post(&ws.live, &format!("/api/v1/calls/{id}/hangup"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!((r.body["status"].clone(), r.body["ended_reason"].clone()), (json!("completed"), json!("agent_hangup")));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    // Once ended, any instance answers 409.
    assert_eq!(app.post(&ws.live, &format!("/api/v1/calls/{id}/hangup"), json!({})).await.status, 409);
    // Another workspace cannot reach it from either instance.
    let stranger = app.workspace("Other").await;
    assert_eq!(other.post(&stranger.live, &format!("/api/v1/calls/{id}/hangup"), json!({})).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webchat_visitors_hear_replies_sent_on_another_instance_at_once() {
    // The visitor's instance neither polls its sockets' conversations nor
    // looks for messages to send: only a signal from the other instance,
    // which writes and sends the reply, can bring it in time.
    let app = TestApp::spawn_with(Backend::Postgres, |s| {
        s.webchat.poll_interval_ms = 600_000;
        s.messages.poll_interval_ms = 600_000;
    })
    .await;
    let other = app.sibling().await;
    let ws = app.workspace("Acme").await;
    let (_, public_id) = crate::webchat::webchat_channel(&app, &ws.live, json!({})).await;
    let (mut socket, _) = crate::webchat::hello(&app, &public_id, None).await;
    crate::webchat::send(&mut socket, json!({"type": "message", "text": "Anyone there?", "client_id": "c-1"})).await;
    crate::webchat::next_of(&mut socket, "ack").await;
    let list = app.get(&ws.live, "/api/v1/conversations?channel=webchat").await.body;
    let conv = list["items"][0]["id"].as_i64().unwrap();
    // The reply is written, and sent, by the other instance.
    let reply = other.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "Yes, here!"})).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let started = Instant::now();
    let shown = crate::webchat::next_of(&mut socket, "message").await;
    assert_eq!(
        (shown["message"]["id"].clone(), shown["message"]["text"].clone()),
        (reply.body["id"].clone(), json!("Yes, here!"))
    );
    assert!(started.elapsed() < Duration::from_secs(5), "the reply took {:?}", started.elapsed());
}

/// Under a stream of commits an instance tells the others in at most one
/// NOTIFY per 10 ms (each NOTIFY commits under a lock every notifying
/// transaction of the cluster shares and wakes every listener), and every
/// commit's signal gets there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_to_other_instances_are_paced_and_all_arrive() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let ws = app.workspace("Acme").await;
    let mut listener = sqlx::postgres::PgListener::connect(&app.database_url).await.unwrap();
    listener.listen("parley_signals").await.unwrap();
    // Four writers, 80 contacts: commits come closer together than 10 ms.
    let started = Instant::now();
    let writers = (0..4).map(|w| {
        let (app, ws) = (&app, &ws);
        async move {
            for i in 0..20 {
                let r = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": format!("C{w}-{i}")})).await;
                assert_eq!(r.status, 201, "{}", r.text);
            }
        }
    });
    futures::future::join_all(writers).await;
    let writing = started.elapsed();
    let events = app.get(&ws.live, "/api/v1/events?type=contact.created&limit=100").await.body;
    let expected: std::collections::HashSet<String> =
        events["items"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(expected.len(), 80);
    let (mut notifications, mut named) = (0, std::collections::HashSet::new());
    while !expected.is_subset(&named) {
        let note = tokio::time::timeout(Duration::from_secs(5), listener.recv())
            .await
            .unwrap_or_else(|_| {
                let missing = expected.difference(&named).count();
                panic!("{missing} of 80 events not signalled after {notifications} notifications")
            })
            .unwrap();
        notifications += 1;
        let signals: Vec<serde_json::Value> = serde_json::from_str(note.payload()).unwrap();
        for signal in signals.iter().filter(|s| s["kind"] == "events_written" && s["workspace_id"] == ws.id) {
            named.extend(signal["ids"].as_array().unwrap().iter().map(|id| id.as_str().unwrap().to_owned()));
        }
    }
    // One per 10 ms while writing, the last commits' after it, and one
    // still due from the workspace's setup.
    let most = (writing.as_millis() / 10) as usize + 3;
    assert!(
        notifications <= most,
        "{notifications} notifications for 80 commits in {writing:?}: at most one per 10 ms ({most})"
    );
}
