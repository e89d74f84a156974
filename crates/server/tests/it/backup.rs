//! `parley backup`: a consistent copy of a SQLite database taken while the
//! server writes to it, and restored by serving the copy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use sqlx::Connection;

use crate::cli::parley;
use crate::conversations::{api_channel, inbound};
use crate::support::*;

/// Counts rows of the copy with one query.
async fn count(url: &str, sql: &'static str) -> i64 {
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    let (n,): (i64,) = sqlx::query_as(sql).fetch_one(&mut conn).await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_under_load_is_consistent_and_serves_when_restored() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let ws = app.workspace("Acme").await;
    let (channel, secret) = api_channel(&app, &ws.live).await;

    // Four writers post inbound messages (each a message, its conversation
    // and contact, and its event, in one transaction) until told to stop.
    let (stop, acknowledged) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let app = Arc::new(app);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (app, secret, stop, acknowledged) = (app.clone(), secret.clone(), stop.clone(), acknowledged.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"from": format!("user-{w}-{}", n % 7), "text": format!("message {n}"), "external_id": format!("{w}-{n}")});
                    let r = inbound(&app, channel, &secret, body).await;
                    assert_eq!(r.status, 201, "{}", r.text);
                    acknowledged.fetch_add(1, Ordering::SeqCst);
                    n += 1;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;

    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("backup.db");
    let before = acknowledged.load(Ordering::SeqCst);
    let (database_url, to) = (app.database_url.clone(), copy.display().to_string());
    let (code, out, err) =
        tokio::task::spawn_blocking(move || parley(&["backup", "--to", &to], &database_url)).await.unwrap();
    let after = acknowledged.load(Ordering::SeqCst);
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (out["integrity"].clone(), out["backup"].clone()),
        (json!("ok"), json!(std::fs::canonicalize(&copy).unwrap().display().to_string()))
    );
    assert!(out["bytes"].as_u64().unwrap() > 0 && out["seconds"].is_f64(), "{out}");
    assert!(after > before, "the writers went on while the backup ran ({before} → {after})");

    // The copy holds every message acknowledged before the backup began,
    // none that was not acknowledged by its end, and each with its event:
    // one commit's state, never half of one.
    let url = format!("sqlite://{}", copy.display());
    let messages = count(&url, "SELECT COUNT(*) FROM messages WHERE direction = 'inbound'").await as usize;
    assert!((before..=after).contains(&messages), "{before} ≤ {messages} ≤ {after}");
    let events = count(&url, "SELECT COUNT(*) FROM events WHERE type = 'message.received'").await as usize;
    assert_eq!(events, messages, "every copied message has its event");
    let (code, report, err) = parley(&["billing", "verify"], &url);
    assert_eq!((code, report["consistent"].clone()), (0, json!(true)), "{err}");

    // Restored: a server on the copy serves the same workspace and key.
    let restored = TestApp::serving(&url).await;
    let conversations = restored.get(&ws.live, "/api/v1/conversations?limit=1").await;
    assert_eq!(conversations.status, 200, "{}", conversations.text);
    assert!(conversations.body["total"].as_i64().unwrap() > 0);
    let r = inbound(
        &restored,
        channel,
        &secret,
        json!({"from": "after-restore", "text": "hi", "external_id": "restored-1"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);

    // A backup never overwrites a file; PostgreSQL has its own tools.
    let (code, _, err) = parley(&["backup", "--to", &copy.display().to_string()], &app.database_url);
    assert_eq!(code, 1);
    assert!(err.contains("exists; name a new file"), "{err}");
    let postgres = std::env::var(parley_store::testing::POSTGRES_ENV).expect("the PostgreSQL test server is named");
    let (code, _, err) = parley(&["backup", "--to", &dir.path().join("pg.db").display().to_string()], &postgres);
    assert_eq!(code, 1);
    assert!(err.contains("pg_dump"), "{err}");
}
