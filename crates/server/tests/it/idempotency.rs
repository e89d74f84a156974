//! docs/api.md "Idempotency".

use parley_domain::idempotency::{canonical_json, fingerprint};
use parley_domain::{Mode, Scope, Timestamp};
use parley_store::repo::idempotency::{self, Claim};
use reqwest::Method;
use serde_json::json;

use crate::support::*;

both_backends! {
    async fn a_missing_key_on_agent_creation_is_400(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post(&ws.live, "/api/v1/agents", json!({"name": "A"})).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.body, json!({"detail": "The Idempotency-Key header is required for this request"}));
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0);
        let r = app.post_idem(&ws.live, "/api/v1/agents", &"k".repeat(256), json!({"name": "A"})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"][0]["loc"], json!(["header", "Idempotency-Key"]));
    }

    async fn a_replay_returns_the_same_status_and_bytes(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let first = app.post_idem(&ws.live, "/api/v1/agents", "order-1", json!({"name": "A", "priority": 1})).await;
        assert_eq!(first.status, 201);
        assert!(first.header("idempotent-replayed").is_none());
        // Same body with keys in another order and quoted key: still the same request.
        let again = app.send(Method::POST, "/api/v1/agents", Some(&ws.live), Some(json!({"priority": 1, "name": "A"})), &[("Idempotency-Key", "\"order-1\"")]).await;
        assert_eq!(again.status, 201);
        assert_eq!(again.text, first.text);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 1);
    }

    async fn the_same_key_with_another_body_is_409(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        assert_eq!(app.post_idem(&ws.live, "/api/v1/agents", "k", json!({"name": "A"})).await.status, 201);
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k", json!({"name": "B"})).await;
        assert_eq!(r.status, 409);
        assert!(r.body["detail"].as_str().unwrap().contains("different request"));
        // The same key on another route is another request too.
        let r = app.post_idem(&ws.live, "/api/v1/prompt-blocks", "k", json!({"name": "A", "content": "x"})).await;
        assert_eq!(r.status, 409);
    }

    async fn a_key_still_in_progress_is_409_with_retry_after(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let body = json!({"name": "A"});
        let fp = fingerprint("POST", "/api/v1/agents", &canonical_json(&body));
        let scope = Scope::new(ws.id, Mode::Live);
        let mut tx = app.db.begin().await.unwrap();
        assert_eq!(idempotency::claim(&mut tx, scope, "busy", &fp, 60).await.unwrap(), Claim::Acquired);
        tx.commit().await.unwrap();
        let r = app.post_idem(&ws.live, "/api/v1/agents", "busy", body).await;
        assert_eq!(r.status, 409);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(r.body["detail"].as_str().unwrap().contains("in progress"));
    }

    async fn twenty_concurrent_identical_requests_create_exactly_one_agent(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let requests = (0..20).map(|_| app.post_idem(&ws.live, "/api/v1/agents", "same", json!({"name": "Once"})));
        let responses = futures::future::join_all(requests).await;
        let created: Vec<&Resp> = responses.iter().filter(|r| r.status == 201).collect();
        assert!(!created.is_empty());
        for r in &responses {
            assert!(r.status == 201 || (r.status == 409 && r.header("retry-after") == Some("1")), "{} {}", r.status, r.text);
        }
        assert!(created.iter().all(|r| r.text == created[0].text), "every success is the same response");
        let list = app.get(&ws.live, "/api/v1/agents").await;
        assert_eq!(list.body["total"], 1);
        assert_eq!(app.events(ws.id, Mode::Live, "agent.created").await.len(), 1);
    }

    async fn a_failed_request_stores_nothing_so_a_retry_runs_again(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        // Passes body validation, then fails in the service (unknown prompt block 1).
        let body = json!({"name": "A", "prompt_block_ids": [1]});
        let r = app.post_idem(&ws.live, "/api/v1/agents", "retry-me", body.clone()).await;
        assert_eq!(r.status, 422);
        let block = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Persona", "content": "Hi"})).await;
        assert_eq!(block.body["id"], 1);
        let r = app.post_idem(&ws.live, "/api/v1/agents", "retry-me", body).await;
        assert_eq!(r.status, 201, "{}", r.text);
    }

    async fn keys_are_scoped_to_workspace_and_mode(backend) {
        let app = TestApp::spawn(backend).await;
        let a = app.workspace("A").await;
        let b = app.workspace("B").await;
        let ra = app.post_idem(&a.live, "/api/v1/agents", "shared", json!({"name": "A"})).await;
        let rt = app.post_idem(&a.test, "/api/v1/agents", "shared", json!({"name": "A"})).await;
        let rb = app.post_idem(&b.live, "/api/v1/agents", "shared", json!({"name": "B"})).await;
        assert_eq!((ra.status, rt.status, rb.status), (201, 201, 201));
        assert!(rt.header("idempotent-replayed").is_none());
        assert!(rb.header("idempotent-replayed").is_none());
    }

    async fn keys_are_kept_for_the_retention_period_then_purged(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        assert_eq!(app.post_idem(&ws.live, "/api/v1/agents", "old", json!({"name": "A"})).await.status, 201);
        let mut tx = app.db.begin().await.unwrap();
        // What the hourly purge does with a 24 h retention: keeps a fresh key…
        let kept = idempotency::purge_created_before(&mut tx, Timestamp::now().plus_seconds(-24 * 3600)).await.unwrap();
        assert_eq!(kept, 0);
        // …and removes it once it is older than the cut-off.
        let purged = idempotency::purge_created_before(&mut tx, Timestamp::now().plus_seconds(1)).await.unwrap();
        assert_eq!(purged, 1);
        tx.commit().await.unwrap();
        let r = app.post_idem(&ws.live, "/api/v1/agents", "old", json!({"name": "A"})).await;
        assert_eq!(r.status, 201);
        assert!(r.header("idempotent-replayed").is_none());
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 2);
    }
}
