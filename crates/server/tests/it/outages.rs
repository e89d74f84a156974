//! The database going away under a running instance: requests answer a
//! quick 503 with `Retry-After` (none hangs, none half-writes), readiness
//! says why, and the instance recovers by itself when the database is back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use crate::conversations::inbound;
use crate::runtime::{catch_all_agent_with, eventually, replies};
use crate::support::*;
use crate::tools::{Say, frames};

/// A TCP forwarder to PostgreSQL that can be cut — every connection
/// dropped, new ones refused, as when the server restarts — and restored
/// on the same port.
struct Cuttable {
    port: u16,
    target: String,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Cuttable {
    async fn start(target: &str) -> Cuttable {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let forwarder = Cuttable { port, target: target.to_owned(), tasks: Default::default() };
        forwarder.restore();
        forwarder
    }

    /// Listens again (and forwards) on the same port.
    fn restore(&self) {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(format!("127.0.0.1:{}", self.port).parse().unwrap()).unwrap();
        let listener = socket.listen(64).unwrap();
        let (target, tasks) = (self.target.clone(), self.tasks.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let target = target.clone();
                let forwarding = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                tasks.lock().unwrap().push(forwarding);
            }
        });
        self.tasks.lock().unwrap().push(accepting);
    }

    /// Drops every connection and the listener: connecting is refused.
    fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

/// A fresh PostgreSQL database reached through a [`Cuttable`]: its URL.
async fn behind_a_forwarder() -> (parley_store::testing::TestDatabase, Cuttable, String) {
    let database = fresh_database(Backend::Postgres).await;
    let mut url = url::Url::parse(&database.url).unwrap();
    let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let forwarder = Cuttable::start(&target).await;
    url.set_host(Some("127.0.0.1")).unwrap();
    url.set_port(Some(forwarder.port)).unwrap();
    (database, forwarder, url.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_answers_503_at_once_and_the_instance_recovers_without_half_writes() {
    let (database, forwarder, url) = behind_a_forwarder().await;
    let app = TestApp::serving(&url).await;
    let ws = app.workspace("Acme").await;
    let create = |key: &'static str| {
        let (app, ws) = (&app, &ws);
        async move { app.post_idem(&ws.live, "/api/v1/agents", key, json!({"name": "Ava"})).await }
    };
    assert_eq!(create("before").await.status, 201);
    let (channel, secret) = crate::conversations::api_channel(&app, &ws.live).await;

    forwarder.cut();
    let mut slowest_after_first = Duration::ZERO;
    for n in 0..8 {
        let asked = Instant::now();
        let r =
            create(["during-0", "during-1", "during-2", "during-3", "during-4", "during-5", "during-6", "during-7"][n])
                .await;
        let took = asked.elapsed();
        assert_eq!(r.status, 503, "{}", r.text);
        assert_eq!(r.body, json!({"detail": "The database is unavailable; retry shortly"}));
        assert_eq!(r.header("retry-after"), Some("5"));
        // The first waits for the pool (3 s at most); the rest are told at once.
        assert!(took < Duration::from_millis(3500), "request {n} took {took:?}");
        if n > 0 {
            slowest_after_first = slowest_after_first.max(took);
        }
    }
    assert!(slowest_after_first < Duration::from_secs(1), "{slowest_after_first:?}");
    // An inbound message (written in a group commit) is refused the same way.
    let r = inbound(&app, channel, &secret, json!({"from": "user-1", "text": "Hello?", "external_id": "m-1"})).await;
    assert_eq!((r.status, r.header("retry-after")), (503, Some("5")), "{}", r.text);
    assert_eq!(r.body, json!({"detail": "The database is unavailable; retry shortly"}));
    let r = app.send(Method::GET, "/api/v1/agents", Some(&ws.live), None, &[]).await;
    assert_eq!((r.status, r.header("retry-after")), (503, Some("5")));
    let asked = Instant::now();
    let r = app.send(Method::GET, "/readyz", None, None, &[]).await;
    assert_eq!(r.status, 503);
    assert!(r.body["detail"].as_str().unwrap().starts_with("The database is unavailable: "), "{}", r.text);
    assert!(asked.elapsed() < Duration::from_millis(2500));
    assert_eq!(
        app.send(Method::GET, "/healthz", None, None, &[]).await.status,
        200,
        "liveness never asks the database"
    );

    // Back: the same instance serves again, by itself.
    forwarder.restore();
    eventually("the instance never recovered", || async {
        (app.get(&ws.live, "/api/v1/agents").await.status == 200).then_some(())
    })
    .await;
    assert_eq!(app.send(Method::GET, "/readyz", None, None, &[]).await.status, 200);
    // Nothing refused was half-written: one agent, and a refused request
    // retried with its key now runs once.
    assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 1);
    assert_eq!(create("during-3").await.status, 201);
    assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 2);
    let direct = database.url.clone();
    let wrong = std::thread::spawn(move || ledger_discrepancies(&direct)).join().unwrap();
    assert!(wrong.is_empty(), "the balances agree with their ledgers: {wrong:?}");
    drop(app);
    drop(database);
}

/// A job whose outcome cannot be written (the database went away while it
/// ran) keeps its lease and records its outcome once the database is back:
/// here an agent run cut off mid-reply is retried and answers once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_off_by_an_outage_is_retried_once_the_database_is_back_and_answers_once() {
    let (database, forwarder, url) = behind_a_forwarder().await;
    // An engine that takes 1.5 s to answer, and says when it is asked.
    let (asked_tx, mut asked) = tokio::sync::mpsc::unbounded_channel::<()>();
    let engine = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let asked_tx = asked_tx.clone();
            async move {
                let _ = asked_tx.send(());
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let body = frames(&Say::Text("Your order ships today.")).concat();
                ([("content-type", "text/event-stream")], body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let engine_url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, engine).await.unwrap() });
    let app = TestApp::serving_with(&url, move |s| {
        s.agents.debounce_ms = 0;
        s.agents.retry_scale = 0.01;
        s.text_engines.insert("slow".into(), json!({"base_url": engine_url, "model": "m", "max_retries": 0}));
    })
    .await;
    let ws = app.workspace("Acme").await;
    let rx = crate::receiver::Receiver::start().await;
    let (channel, secret) = crate::messages::sending_channel(&app, &ws.live, &rx.url).await;
    catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "text_engine": "slow", "tools": []})).await;
    let r =
        inbound(&app, channel, &secret, json!({"from": "user-1", "text": "Where is my order?", "external_id": "m-1"}))
            .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let conversation = r.body["conversation_id"].as_i64().unwrap();

    // While the engine thinks, the database goes away; it answers into the
    // outage, and the run's failure cannot be written either (the first
    // write waits out the 3 s acquire timeout: the outage outlasts it).
    tokio::time::timeout(Duration::from_secs(15), asked.recv()).await.expect("the run asked its engine");
    forwarder.cut();
    tokio::time::sleep(Duration::from_secs(8)).await;
    forwarder.restore();

    eventually("the cut-off run was never retried", || async {
        (replies(&app, &ws.live, conversation, Duration::ZERO).await.len() == 1).then_some(())
    })
    .await;
    rx.wait_for(1, Duration::from_secs(15)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(replies(&app, &ws.live, conversation, Duration::ZERO).await.len(), 1, "answered once");
    assert_eq!(rx.received().len(), 1, "delivered once");
    drop(app);
    drop(database);
}

/// A call goes on through an outage: what it reports meanwhile waits and
/// is written once the database answers, and it ends recorded, not left
/// `in_progress` by an instance that gave up on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_goes_on_through_an_outage_and_is_recorded_when_the_database_is_back() {
    let (database, forwarder, url) = behind_a_forwarder().await;
    let app = TestApp::serving(&url).await;
    let ws = app.workspace("Acme").await;
    let agent = app.create_agent(&ws.test, json!({"name": "Ava", "first_message": "Hi, Ava here."})).await;
    let r = crate::calls::place(&app, &ws.test, json!({"agent_id": agent["id"], "to": "+14155550123"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.body["id"].as_str().unwrap().to_owned();
    crate::calls::wait_for(&app, &ws.test, &id, |c| c["status"] == "in_progress").await;
    // Longer than the pool's 3 s acquire timeout: the call's writes fail meanwhile.
    forwarder.cut();
    tokio::time::sleep(Duration::from_secs(5)).await;
    forwarder.restore();
    let call = crate::calls::wait_for(&app, &ws.test, &id, crate::calls::ended).await;
    assert_eq!(
        (call["status"].clone(), call["ended_reason"].clone()),
        (json!("completed"), json!("caller_hangup")),
        "{call}"
    );
    assert_eq!(call["recording"]["status"], "available", "{call}");
    let transcript = app.get(&ws.test, &format!("/api/v1/calls/{id}/transcript")).await.body;
    let caller = transcript["segments"].as_array().unwrap().iter().filter(|s| s["speaker"] == "caller").count();
    assert_eq!(
        caller,
        parley_voice::simulated::CALLER_LINES.len(),
        "every line the caller said was kept: {transcript}"
    );
    drop(app);
    drop(database);
}
