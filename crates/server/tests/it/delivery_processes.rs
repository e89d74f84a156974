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

const MESSAGE_ENV: &[(&str, &str)] = &[
    ("PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS", "true"),
    ("PARLEY_MESSAGES__RETRY_SCALE", "0.001"),
    ("PARLEY_MESSAGES__TIMEOUT_SECONDS", "1"),
    ("PARLEY_MESSAGES__LEASE_SECONDS", "2"),
    ("PARLEY_MESSAGES__POLL_INTERVAL_MS", "100"),
    ("PARLEY_RATE_LIMIT__PER_SECOND", "100000"),
    ("PARLEY_RATE_LIMIT__BURST", "100000"),
];

// Sends messages on an api channel of a server that is killed (-9) as soon
// as the last one is accepted, some mid-send and most still queued; after a
// restart every accepted message arrives, in order per conversation.
both_backends! {
    async fn messages_accepted_before_a_crash_are_all_sent_after_restart(backend) {
        let database = fresh_database(backend).await;
        let rx = Receiver::start().await;
        // Slow answers, so the crash finds sends in flight and a long queue.
        rx.always(Answer { delay: Duration::from_millis(200), ..Answer::status(200) });
        let url = database.url.clone();
        let mut first = tokio::task::spawn_blocking(move || start_server_with(&url, MESSAGE_ENV)).await.unwrap();
        let key = key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        let channel = post(&client, format!("{}/api/v1/channels", base(&first)), &key, json!({"type": "api", "name": "Backend", "config": {"url": rx.url}})).await;
        let ch = channel["id"].as_i64().unwrap();
        let mut accepted: Vec<(i64, i64)> = Vec::new(); // (conversation index, message id)
        // Ten rounds of one message per conversation: within a conversation,
        // each is accepted after the one before.
        for round in 0..10 {
            let sends = (0..6).map(|conv| {
                let (client, key, url) = (client.clone(), key.clone(), format!("{}/api/v1/messages", base(&first)));
                async move {
                    let body = json!({"channel_id": ch, "to": format!("user-{conv}"), "text": format!("m{round}")});
                    let m = post(&client, url, &key, body).await;
                    assert_eq!(m["status"], "queued");
                    (conv, m["id"].as_i64().unwrap())
                }
            });
            accepted.extend(futures::future::join_all(sends).await);
        }
        Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let _ = first.child.wait();
        let before_restart = rx.received().len();
        assert!(before_restart < 60, "the crash came before everything was sent ({before_restart})");

        let url = database.url.clone();
        let _second = tokio::task::spawn_blocking(move || start_server_with(&url, MESSAGE_ENV)).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let ids: std::collections::HashSet<String> = rx.received().iter().map(|m| m.header("webhook-id").to_owned()).collect();
            if accepted.iter().all(|(_, id)| ids.contains(&format!("msg_{id}"))) { break; }
            assert!(std::time::Instant::now() < deadline, "after restart, {} of 60 arrived", ids.len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Per conversation, first arrivals follow acceptance order.
        let arrivals: Vec<i64> = rx.received().iter().map(|m| m.json()["data"]["id"].as_i64().unwrap()).collect();
        for conv in 0..6 {
            let expected: Vec<i64> = accepted.iter().filter(|(c, _)| *c == conv).map(|(_, id)| *id).collect();
            let mut seen = Vec::new();
            for id in &arrivals {
                if expected.contains(id) && !seen.contains(id) { seen.push(*id); }
            }
            assert_eq!(seen, expected, "conversation {conv} out of order");
        }
    }
}

// A server killed (-9) mid-call: after a restart, the call it ran is ended
// as failed/error and charged for the time it ran, never left in progress.
both_backends! {
    async fn a_call_whose_server_died_ends_failed_and_charged(backend) {
        let database = fresh_database(backend).await;
        let env: &[(&str, &str)] = &[("PARLEY_VOICE__LEASE_SECONDS", "1"), ("PARLEY_RATE_LIMIT__PER_SECOND", "100000"), ("PARLEY_RATE_LIMIT__BURST", "100000")];
        let url = database.url.clone();
        let mut first = tokio::task::spawn_blocking(move || start_server_with(&url, env)).await.unwrap();
        let key = key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        let agent = post(&client, format!("{}/api/v1/agents", base(&first)), &key, json!({"name": "Ava"})).await;
        let call = post(&client, format!("{}/api/v1/calls", base(&first)), &key, json!({"agent_id": agent["id"], "to": "+14155550100"})).await;
        let id = call["id"].as_str().unwrap().to_owned();
        let get = |base: String| {
            let (client, key, id) = (client.clone(), key.clone(), id.clone());
            async move {
                client.get(format!("{base}/api/v1/calls/{id}")).header("X-API-Key", key).send().await.unwrap().json::<serde_json::Value>().await.unwrap()
            }
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while get(base(&first)).await["status"] != "in_progress" {
            assert!(std::time::Instant::now() < deadline, "never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let _ = first.child.wait();

        let url = database.url.clone();
        let second = tokio::task::spawn_blocking(move || start_server_with(&url, env)).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let ended = loop {
            let now = get(base(&second)).await;
            if now["status"] != "in_progress" { break now; }
            assert!(std::time::Instant::now() < deadline, "left in progress: {now}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!((ended["status"].clone(), ended["ended_reason"].clone()), (json!("failed"), json!("error")), "{ended}");
        let duration = ended["duration_ms"].as_i64().unwrap();
        assert!(duration >= 1000, "charged for the time it ran: {ended}");
        assert_eq!(ended["cost_cents"], parley_domain::billing::call_cost_cents(duration, 5));
        let balance = client.get(format!("{}/api/v1/billing/balance", base(&second))).header("X-API-Key", &key).send().await.unwrap().json::<serde_json::Value>().await.unwrap();
        assert_eq!(balance["held_cents"], 0, "the hold is released");
    }
}

// A server killed (-9) mid-call keeps the call's recording up to a few
// seconds before the kill: the spooled file is whole to its last write, and
// the instance that ends the call stores it as the call's recording.
both_backends! {
    async fn a_call_whose_server_died_keeps_its_recording_up_to_the_crash(backend) {
        let database = fresh_database(backend).await;
        let storage = std::env::temp_dir().join(format!("parley-spool-test-{}", ulid::Ulid::new()));
        let storage_path = storage.display().to_string();
        // A transcriber makes the simulated caller speak live audio (nobody
        // listens on its port: the speech is recorded, not understood).
        let unreachable = crate::cli::free_port().to_string();
        let env: Vec<(&str, &str)> = vec![
            ("PARLEY_VOICE__LEASE_SECONDS", "1"),
            ("PARLEY_STORAGE__PATH", &storage_path),
            ("PARLEY_SPEECH__STT__EARS__KIND", "wyoming"),
            ("PARLEY_SPEECH__STT__EARS__HOST", "127.0.0.1"),
            ("PARLEY_SPEECH__STT__EARS__PORT", &unreachable),
            ("PARLEY_SPEECH__DEFAULT_STT", "ears"),
        ];
        let env: Vec<(String, String)> = env.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        let start = |url: String, env: Vec<(String, String)>| async move {
            tokio::task::spawn_blocking(move || {
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                start_server_with(&url, &env)
            })
            .await
            .unwrap()
        };
        let mut first = start(database.url.clone(), env.clone()).await;
        let key = key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        let agent = post(&client, format!("{}/api/v1/agents", base(&first)), &key,
            json!({"name": "Ava", "first_message": "Hello, this is Ava from Parley. How can I help you today?"})).await;
        let call = post(&client, format!("{}/api/v1/calls", base(&first)), &key, json!({"agent_id": agent["id"], "to": "+14155550100"})).await;
        let id = call["id"].as_str().unwrap().to_owned();
        let get = |base: String, path: String| {
            let (client, key) = (client.clone(), key.clone());
            async move {
                client.get(format!("{base}{path}")).header("X-API-Key", key).send().await.unwrap().json::<serde_json::Value>().await.unwrap()
            }
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while get(base(&first), format!("/api/v1/calls/{id}")).await["status"] != "in_progress" {
            assert!(std::time::Instant::now() < deadline, "never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let answered = std::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(6000)).await;
        Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let ran_ms = answered.elapsed().as_millis() as i64;
        let _ = first.child.wait();

        let second = start(database.url.clone(), env).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let link = loop {
            let link = get(base(&second), format!("/api/v1/calls/{id}/recording?redirect=true")).await;
            if link["url"].is_string() { break link; }
            assert!(std::time::Instant::now() < deadline, "no recording: {link}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let ended = get(base(&second), format!("/api/v1/calls/{id}")).await;
        assert_eq!((ended["status"].clone(), ended["ended_reason"].clone()), (json!("failed"), json!("error")), "{ended}");
        // Up to its last write: at most the 2 s window and 1 s between writes
        // (plus start-up) before the kill.
        let recorded = link["duration_ms"].as_i64().unwrap();
        assert!(recorded >= ran_ms - 4000 && recorded <= ran_ms, "recorded {recorded} ms of {ran_ms} ms: {link}");
        let wav = client.get(link["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
        let reader = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
        assert_eq!((reader.spec().channels, reader.spec().sample_rate), (2, 8000));
        let samples: Vec<i16> = reader.into_samples::<i16>().map(Result::unwrap).collect();
        assert_eq!(samples.len() as i64 / 2, recorded * 8, "the header matches the audio");
        assert!(samples.chunks(2).any(|f| f[1].abs() > 1000), "the agent's greeting is on the right");
        let _ = std::fs::remove_dir_all(&storage);
    }
}

/// A Twilio Messages API: `POST Messages.json` as `mode` says, and `GET
/// Messages.json?To=…&From=…` listing what it took, newest first.
mod twilio_messages {
    use std::sync::atomic::{AtomicU8, Ordering};
    use std::sync::{Arc, Mutex};

    use axum::extract::{Query, State};
    use serde_json::{Value, json};

    /// What a `POST` does.
    pub const HANG: u8 = 0;
    /// Takes the message (it is sent), then never answers.
    pub const TAKE_AND_HANG: u8 = 1;
    pub const ANSWER: u8 = 2;

    #[derive(Default)]
    pub struct Provider {
        pub mode: AtomicU8,
        /// (sid, to, from, body, created) of each message taken.
        pub taken: Mutex<Vec<(String, String, String, String, time::OffsetDateTime)>>,
        pub posts: Mutex<usize>,
    }

    impl Provider {
        pub fn bodies(&self) -> Vec<String> {
            let mut b: Vec<String> = self.taken.lock().unwrap().iter().map(|t| t.3.clone()).collect();
            b.sort();
            b
        }
    }

    async fn create(State(p): State<Arc<Provider>>, body: String) -> (axum::http::StatusCode, axum::Json<Value>) {
        *p.posts.lock().unwrap() += 1;
        let mode = p.mode.load(Ordering::SeqCst);
        if mode == HANG {
            // Not answering: the request hangs until the client gives up or dies.
            std::future::pending::<()>().await;
        }
        let form: Vec<(String, String)> = serde_urlencoded::from_str(&body).unwrap();
        let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
        let sid = format!("SM{}", ulid::Ulid::new());
        let now = time::OffsetDateTime::now_utc();
        p.taken.lock().unwrap().push((sid.clone(), field("To"), field("From"), field("Body"), now));
        if mode == TAKE_AND_HANG {
            std::future::pending::<()>().await;
        }
        (axum::http::StatusCode::CREATED, axum::Json(json!({"sid": sid, "status": "queued"})))
    }

    async fn list(State(p): State<Arc<Provider>>, Query(q): Query<Vec<(String, String)>>) -> axum::Json<Value> {
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (to, from) = (get("To"), get("From"));
        let rfc2822 = time::format_description::well_known::Rfc2822;
        let mut messages: Vec<Value> = p
            .taken
            .lock()
            .unwrap()
            .iter()
            .filter(|m| to.as_ref().is_none_or(|t| *t == m.1) && from.as_ref().is_none_or(|f| *f == m.2))
            .map(|m| {
                json!({"sid": m.0, "to": m.1, "from": m.2, "body": m.3, "direction": "outbound-api",
                            "status": "sent", "date_created": m.4.format(&rfc2822).unwrap()})
            })
            .collect();
        messages.reverse();
        axum::Json(json!({"messages": messages, "page": 0, "page_size": 50}))
    }

    /// Starts it; its base URL.
    pub async fn start(provider: Arc<Provider>) -> String {
        let app = axum::Router::new()
            .route("/2010-04-01/Accounts/{account}/Messages.json", axum::routing::post(create).get(list))
            .with_state(provider);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }
}

/// Queues `n` SMS (`message {i}`) on a new sms channel of `server`; their ids.
async fn queue_sms(client: &reqwest::Client, server: &Server, key: &str, twilio: &str, n: usize) -> Vec<i64> {
    let channel = post(client, format!("{}/api/v1/channels", base(server)), key, json!({"type": "sms", "name": "SMS",
        "config": {"account_sid": format!("AC{}", "0".repeat(32)), "auth_token": "token", "from": "+14155550100", "base_url": twilio}})).await;
    let ch = channel["id"].as_i64().unwrap();
    let sends = (0..n).map(|i| {
        let (client, key, url) = (client.clone(), key.to_owned(), format!("{}/api/v1/messages", base(server)));
        async move {
            let body =
                json!({"channel_id": ch, "to": format!("+1415555{:04}", i % 10), "text": format!("message {i}")});
            post(&client, url, &key, body).await["id"].as_i64().unwrap()
        }
    });
    futures::future::join_all(sends).await
}

// SMS queued on a server killed (-9) while its provider is not answering:
// after a restart each message reaches the provider and is taken exactly
// once (the restarted courier looks for an earlier send first, finds none,
// and sends).
both_backends! {
    async fn sms_queued_before_a_crash_are_sent_exactly_once_after_restart(backend) {
        use std::sync::atomic::Ordering;
        let provider = std::sync::Arc::new(twilio_messages::Provider::default());
        let twilio = twilio_messages::start(provider.clone()).await;
        let database = fresh_database(backend).await;
        let url = database.url.clone();
        let mut first = tokio::task::spawn_blocking(move || start_server_with(&url, MESSAGE_ENV)).await.unwrap();
        let key = key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        let ids = queue_sms(&client, &first, &key, &twilio, 30).await;
        Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let _ = first.child.wait();
        assert!(provider.taken.lock().unwrap().is_empty(), "nothing was taken before the crash");

        provider.mode.store(twilio_messages::ANSWER, Ordering::SeqCst);
        let url = database.url.clone();
        let second = tokio::task::spawn_blocking(move || start_server_with(&url, MESSAGE_ENV)).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while provider.taken.lock().unwrap().len() < 30 {
            assert!(std::time::Instant::now() < deadline, "after restart, {} of 30 were sent", provider.taken.lock().unwrap().len());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Time for any duplicate to show.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut expected: Vec<String> = (0..30).map(|i| format!("message {i}")).collect();
        expected.sort();
        assert_eq!(provider.bodies(), expected, "each message taken exactly once");
        for id in ids {
            let m = client.get(format!("{}/api/v1/messages/{id}", base(&second))).header("X-API-Key", &key).send().await.unwrap();
            let m: serde_json::Value = m.json().await.unwrap();
            assert_eq!(m["status"], "sent", "{m}");
            assert!(m["external_id"].as_str().unwrap().starts_with("SM"), "{m}");
        }
    }

    // Issue 31: SMS the provider took just before the crash, whose answer
    // was never recorded, were all sent again after the restart. Now the
    // restarted courier finds each at the provider and records it as sent.
    async fn sms_taken_by_the_provider_before_a_crash_are_not_sent_again(backend) {
        use std::sync::atomic::Ordering;
        let provider = std::sync::Arc::new(twilio_messages::Provider::default());
        provider.mode.store(twilio_messages::TAKE_AND_HANG, Ordering::SeqCst);
        let twilio = twilio_messages::start(provider.clone()).await;
        let database = fresh_database(backend).await;
        let url = database.url.clone();
        let env: Vec<(&str, &str)> = MESSAGE_ENV.iter().copied().chain([("PARLEY_MESSAGES__TIMEOUT_SECONDS", "3")]).collect();
        let start_env = env.clone();
        let mut first = tokio::task::spawn_blocking(move || start_server_with(&url, &start_env)).await.unwrap();
        let key = key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        let ids = queue_sms(&client, &first, &key, &twilio, 8).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while provider.taken.lock().unwrap().len() < 8 {
            assert!(std::time::Instant::now() < deadline, "the provider took {} of 8", provider.taken.lock().unwrap().len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // All eight sends are in flight, taken, unanswered (for up to 3 s): kill.
        Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let _ = first.child.wait();

        provider.mode.store(twilio_messages::ANSWER, Ordering::SeqCst);
        let url = database.url.clone();
        let second = tokio::task::spawn_blocking(move || start_server_with(&url, &env)).await.unwrap();
        let taken: std::collections::HashMap<String, String> =
            provider.taken.lock().unwrap().iter().map(|t| (t.3.clone(), t.0.clone())).collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        for (i, id) in ids.iter().enumerate() {
            let m = loop {
                let m = client.get(format!("{}/api/v1/messages/{id}", base(&second))).header("X-API-Key", &key).send().await.unwrap();
                let m: serde_json::Value = m.json().await.unwrap();
                if m["status"] != "queued" {
                    break m;
                }
                assert!(std::time::Instant::now() < deadline, "message {id} is still queued");
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            assert_eq!(m["status"], "sent", "{m}");
            assert_eq!(m["external_id"], taken[&format!("message {i}")].as_str(), "the provider's own send: {m}");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(*provider.posts.lock().unwrap(), 8, "no message was posted twice");
        assert_eq!(provider.taken.lock().unwrap().len(), 8);
    }
}
