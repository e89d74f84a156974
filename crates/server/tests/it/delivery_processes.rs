//! Webhook delivery across real server processes: a crash mid-delivery, and
//! two instances sharing one PostgreSQL database.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::cli::{Server, key_in, start_server_with};
use crate::receiver::{Answer, Receiver};
use crate::support::*;

const ENV: &[(&str, &str)] = &[
    ("PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS", "true"),
    ("PARLEY_WEBHOOKS__RETRY_SCALE", "0.001"),
    ("PARLEY_WEBHOOKS__LEASE_SECONDS", "2"),
    ("PARLEY_WEBHOOKS__POLL_INTERVAL_MS", "100"),
    ("PARLEY_RATE_LIMIT__PER_SECOND", "100000"),
    ("PARLEY_RATE_LIMIT__BURST", "100000"),
];

async fn start(url: &str) -> Server {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || start_server_with(&url, ENV)).await.unwrap()
}

fn base(s: &Server) -> String {
    format!("http://127.0.0.1:{}", s.port)
}

async fn post(client: &reqwest::Client, url: String, key: &str, body: serde_json::Value) -> serde_json::Value {
    let r = client
        .post(url)
        .header("X-API-Key", key)
        .header("Idempotency-Key", ulid::Ulid::new().to_string())
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.json().await.unwrap()
}

both_backends! {
    async fn a_server_killed_mid_delivery_delivers_again_after_restart(backend) {
        let database = fresh_database(backend).await;
        let rx = Receiver::start().await;
        // The first request never gets an answer: the server dies waiting.
        rx.script(vec![Answer { delay: Duration::from_secs(60), ..Answer::status(200) }]);
        let mut first = start(&database.url).await;
        let key = key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        post(&client, format!("{}/api/v1/webhooks", base(&first)), &key, json!({"url": rx.url, "events": ["agent.created"]})).await;
        post(&client, format!("{}/api/v1/agents", base(&first)), &key, json!({"name": "Survives a crash"})).await;
        let in_flight = rx.wait_for(1, Duration::from_secs(10)).await;
        Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let _ = first.child.wait();
        let _second = start(&database.url).await;
        let got = rx.wait_for(2, Duration::from_secs(20)).await;
        assert_eq!(got[1].header("webhook-id"), in_flight[0].header("webhook-id"));
        assert_eq!(got[1].json()["data"]["name"], "Survives a crash");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_postgres_deliver_a_thousand_events_exactly_once() {
    let database = fresh_database(Backend::Postgres).await;
    let rx = Receiver::start().await;
    let one = start(&database.url).await;
    let two = start(&database.url).await;
    let key = key_in(&one.banner, "live").unwrap();
    let client = reqwest::Client::new();
    let hook = post(
        &client,
        format!("{}/api/v1/webhooks", base(&one)),
        &key,
        json!({"url": rx.url, "events": ["webhook.test"]}),
    )
    .await;
    let id = hook["id"].as_i64().unwrap();
    // 1,000 events, created through both instances, eight at a time.
    let bases = [base(&one), base(&two)];
    let jobs = (0..1000).map(|i| {
        let url = format!("{}/api/v1/webhooks/{id}/test", bases[i % 2]);
        let (client, key) = (client.clone(), key.clone());
        async move { post(&client, url, &key, json!({})).await }
    });
    let events: Vec<serde_json::Value> = futures::stream::iter(jobs).buffer_unordered(8).collect().await;
    assert_eq!(events.len(), 1000);
    rx.wait_for(1000, Duration::from_secs(120)).await;
    // Let any duplicate arrive before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for m in rx.received() {
        *seen.entry(m.header("webhook-id").to_owned()).or_default() += 1;
    }
    assert_eq!(seen.len(), 1000, "every event arrived");
    let dupes: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dupes.is_empty(), "delivered more than once: {dupes:?}");
    for e in &events {
        assert_eq!(seen.get(e["id"].as_str().unwrap()), Some(&1));
    }
}

use futures::StreamExt;
