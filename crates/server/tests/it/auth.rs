//! docs/api.md "Identity and scope": API keys, modes, revocation, 401s.

use parley_domain::Mode;
use parley_domain::api_key::ApiKey;
use reqwest::Method;
use serde_json::json;

use crate::support::*;

both_backends! {
    async fn a_missing_key_is_401_missing_api_key(backend) {
        let app = TestApp::spawn(backend).await;
        let r = app.send(Method::GET, "/api/v1/agents", None, None, &[]).await;
        assert_eq!(r.status, 401);
        assert_eq!(r.body, json!({"detail": "Missing API key"}));
    }

    async fn malformed_unknown_and_bad_checksum_keys_are_401(backend) {
        let app = TestApp::spawn(backend).await;
        let valid_but_unknown = ApiKey::generate(Mode::Live);
        let mut bad_checksum = valid_but_unknown.expose().to_owned();
        let last = bad_checksum.pop().unwrap();
        bad_checksum.push(if last == 'a' { 'b' } else { 'a' });
        for key in ["nonsense", "parley_live_short", bad_checksum.as_str(), valid_but_unknown.expose()] {
            let r = app.get(key, "/api/v1/agents").await;
            assert_eq!(r.status, 401, "{key}");
            assert_eq!(r.body, json!({"detail": "Invalid or revoked API key"}));
        }
    }

    async fn a_revoked_key_fails_on_the_very_next_request(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.status, 200);
        let mut tx = app.db.begin().await.unwrap();
        parley_services::tenancy::workspaces::revoke_key(&mut tx, parley_domain::ids::ApiKeyId(ws.live_key_id)).await.unwrap();
        tx.commit().await.unwrap();
        let r = app.get(&ws.live, "/api/v1/agents").await;
        assert_eq!(r.status, 401);
        assert_eq!(r.body, json!({"detail": "Invalid or revoked API key"}));
    }

    async fn an_expired_key_is_refused(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let mut tx = app.db.begin().await.unwrap();
        let key = parley_services::tenancy::workspaces::create_key(&mut tx, parley_services::tenancy::workspaces::NewKey {
            workspace_id: ws.id,
            mode: Mode::Live,
            name: "short-lived".into(),
            workspace_locked: false,
            created_by: None,
            expires_at: Some(parley_domain::Timestamp::now().plus_seconds(-1)),
        }).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(app.get(key.key.expose(), "/api/v1/agents").await.status, 401);
    }

    async fn bearer_api_keys_work_and_sending_both_credentials_is_400(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let bearer = format!("Bearer {}", ws.live);
        let r = app.send(Method::GET, "/api/v1/agents", None, None, &[("Authorization", &bearer)]).await;
        assert_eq!(r.status, 200);
        let r = app.send(Method::GET, "/api/v1/agents", Some(&ws.live), None, &[("Authorization", &bearer)]).await;
        assert_eq!(r.status, 400);
        assert!(r.body["detail"].as_str().unwrap().contains("not both"));
    }

    async fn live_and_test_keys_see_separate_datasets(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let live_agent = app.create_agent(&ws.live, json!({"name": "Live agent"})).await;
        let test_agent = app.create_agent(&ws.test, json!({"name": "Test agent"})).await;
        let live = app.get(&ws.live, "/api/v1/agents").await;
        let test = app.get(&ws.test, "/api/v1/agents").await;
        assert_eq!(live.body["agents"].as_array().unwrap().len(), 1);
        assert_eq!(live.body["agents"][0]["id"], live_agent["id"]);
        assert_eq!(test.body["agents"].as_array().unwrap().len(), 1);
        assert_eq!(test.body["agents"][0]["id"], test_agent["id"]);
        // The same slug exists once per mode.
        let again = app.create_agent(&ws.test, json!({"name": "Live agent"})).await;
        assert_eq!(again["slug"], "live-agent");
    }

    async fn last_used_at_is_recorded(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let mut c = app.db.read().await.unwrap();
        let before = parley_store::repo::api_keys::get(&mut c, ws.live_key_id).await.unwrap().unwrap();
        drop(c);
        assert!(before.last_used_at.is_none());
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.status, 200);
        let mut used = None;
        for _ in 0..50 {
            let mut c = app.db.read().await.unwrap();
            used = parley_store::repo::api_keys::get(&mut c, ws.live_key_id).await.unwrap().unwrap().last_used_at;
            if used.is_some() { break; }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(used.is_some(), "last_used_at was not recorded");
    }

    async fn repeated_failed_authentication_from_one_ip_is_limited(backend) {
        let app = TestApp::spawn_with(backend, |s| s.rate_limit.auth_failures_per_minute = 3).await;
        for _ in 0..3 {
            assert_eq!(app.get("parley_live_wrong", "/api/v1/agents").await.status, 401);
        }
        let r = app.get("parley_live_wrong", "/api/v1/agents").await;
        assert_eq!(r.status, 429);
        assert!(r.header("retry-after").is_some());
        assert!(r.body["detail"].as_str().unwrap().starts_with("Rate limit exceeded, retry in "));
    }
}
