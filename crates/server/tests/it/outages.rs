//! The database going away under a running instance: requests answer a
//! quick 503 with `Retry-After` (none hangs, none half-writes), readiness
//! says why, and the instance recovers by itself when the database is back.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use crate::runtime::eventually;
use crate::support::*;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_answers_503_at_once_and_the_instance_recovers_without_half_writes() {
    let database = fresh_database(Backend::Postgres).await;
    let mut url = url::Url::parse(&database.url).unwrap();
    let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let forwarder = Cuttable::start(&target).await;
    url.set_host(Some("127.0.0.1")).unwrap();
    url.set_port(Some(forwarder.port)).unwrap();
    let app = TestApp::serving(url.as_str()).await;
    let ws = app.workspace("Acme").await;
    let create = |key: &'static str| {
        let (app, ws) = (&app, &ws);
        async move { app.post_idem(&ws.live, "/api/v1/agents", key, json!({"name": "Ava"})).await }
    };
    assert_eq!(create("before").await.status, 201);

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
