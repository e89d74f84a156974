//! Issue 3: users, sessions with short-lived JWTs, roles, and API key management.

use std::time::{Duration, Instant};

use parley_domain::user::Role;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

const PW: &str = "a long enough password";

both_backends! {
    async fn login_returns_a_bearer_token_and_a_strict_http_only_refresh_cookie(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Owner).await;
        let r = app.login(" ANA@example.com", PW).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let mut keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, vec!["access_token", "expires_in", "mode", "token_type", "workspace_id"]);
        assert_eq!((r.body["token_type"].clone(), r.body["expires_in"].clone(), r.body["workspace_id"].clone()), (json!("bearer"), json!(900), json!(ws.id)));
        assert_eq!(r.body["mode"], "live");
        let cookie = r.header("set-cookie").unwrap();
        for part in ["parley_refresh=rt_", "HttpOnly", "SameSite=Strict", "Path=/api/v1/auth"] {
            assert!(cookie.contains(part), "{cookie}");
        }
        let token = r.body["access_token"].as_str().unwrap();
        assert_eq!(token.split('.').count(), 3);
        // The token works on resource routes, scoped like a live key.
        app.create_agent(&ws.live, json!({"name": "Live"})).await;
        let agents = app.bearer(Method::GET, "/api/v1/agents", token, None).await;
        assert_eq!((agents.status, agents.body["total"].clone()), (200, json!(1)));
        let me = app.bearer(Method::GET, "/api/v1/auth/me", token, None).await;
        assert_eq!(me.body["user"]["email"], "ana@example.com");
        assert_eq!(me.body["workspaces"], json!([{"workspace_id": ws.id, "workspace_name": "A", "role": "owner"}]));
        assert_eq!((me.body["workspace_id"].clone(), me.body["mode"].clone()), (json!(ws.id), json!("live")));
        // Sending both a token and a key is a 400.
        let auth = format!("Bearer {token}");
        let both = app.send(Method::GET, "/api/v1/agents", Some(&ws.live), None, &[("Authorization", &auth)]).await;
        assert_eq!(both.status, 400);
        // /me is for users.
        assert_eq!(app.get(&ws.live, "/api/v1/auth/me").await.status, 403);
    }

    async fn wrong_credentials_get_the_same_401_and_take_the_same_time(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        // Warm up (the dummy hash is computed once).
        app.login("nobody@example.com", "x").await;
        let mut unknown = Vec::new();
        let mut wrong = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let a = app.login("nobody@example.com", PW).await;
            unknown.push(t.elapsed());
            let t = Instant::now();
            let b = app.login("ana@example.com", "not the password").await;
            wrong.push(t.elapsed());
            assert_eq!((a.status, b.status), (401, 401));
            assert_eq!(a.text, b.text);
            assert_eq!(a.body, json!({"detail": "Invalid email or password"}));
        }
        unknown.sort();
        wrong.sort();
        let (u, w) = (unknown[2].as_secs_f64(), wrong[2].as_secs_f64());
        assert!(u / w > 0.5 && u / w < 2.0, "median unknown-email {u:.4}s vs wrong-password {w:.4}s");
        let r = app.login("not an email", PW).await;
        assert_eq!(r.status, 401);
    }

    async fn refresh_rotates_and_reusing_a_rotated_token_after_the_grace_revokes_the_family(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Admin).await;
        let first = app.login("ana@example.com", PW).await.refresh_cookie().unwrap();
        let refresh = |cookie: String| {
            let app = &app;
            async move {
                let c = format!("parley_refresh={cookie}");
                app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &c)]).await
            }
        };
        let r = refresh(first.clone()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let second = r.refresh_cookie().unwrap();
        assert_ne!(second, first);
        assert_eq!(app.bearer(Method::GET, "/api/v1/agents", r.body["access_token"].as_str().unwrap(), None).await.status, 200);
        // Presented again within the grace (its answer lost: a tab closed
        // mid-refresh), the first token still renews the session.
        let lost = refresh(first.clone()).await;
        assert_eq!(lost.status, 200, "{}", lost.text);
        let third = lost.refresh_cookie().unwrap();
        assert_eq!(lost.body["workspace_id"], json!(ws.id));
        // Past the grace, replaying it is reuse: 401, and the whole family dies.
        let mut tx = app.db.begin().await.unwrap();
        let past = parley_domain::Timestamp::now().plus_seconds(-31);
        parley_store::execute!(&mut tx, sqlx::query("UPDATE refresh_tokens SET rotated_at = $1 WHERE rotated_at IS NOT NULL").bind(past))
            .unwrap();
        tx.commit().await.unwrap();
        let reuse = refresh(first).await;
        assert_eq!(reuse.status, 401);
        assert_eq!(reuse.body, json!({"detail": "Refresh token reuse detected; sign in again"}));
        assert_eq!(refresh(second).await.status, 401);
        assert_eq!(refresh(third).await.status, 401);
        // No cookie at all.
        assert_eq!(app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[]).await.status, 401);
    }

    async fn logout_revokes_the_refresh_token_and_clears_the_cookie(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let cookie = format!("parley_refresh={}", app.login("ana@example.com", PW).await.refresh_cookie().unwrap());
        let out = app.send(Method::POST, "/api/v1/auth/logout", None, None, &[("Cookie", &cookie)]).await;
        assert_eq!(out.status, 204);
        assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
        assert_eq!(app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &cookie)]).await.status, 401);
    }

    async fn sign_in_routes_refuse_another_sites_origin(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let cookie = format!("parley_refresh={}", app.login("ana@example.com", PW).await.refresh_cookie().unwrap());
        let evil = [("Origin", "https://evil.example"), ("Cookie", cookie.as_str())];
        let login = json!({"email": "ana@example.com", "password": PW});
        for (path, body) in [("/api/v1/auth/refresh", None), ("/api/v1/auth/logout", None), ("/api/v1/auth/login", Some(login.clone()))] {
            let r = app.send(Method::POST, path, None, body, &evil).await;
            assert_eq!(r.status, 403, "{path}: {}", r.text);
            assert_eq!(r.body, json!({"detail": "Origin https://evil.example may not use this server's sign-in"}));
            assert!(r.header("set-cookie").is_none(), "{path}");
        }
        // The session survived the refused logout; the page's own origin
        // (the Host it was served from) refreshes, and so does a script
        // that sends no Origin.
        let host = app.base.trim_start_matches("http://").to_owned();
        let own = format!("http://{host}");
        let r = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Origin", &own), ("Cookie", &cookie)]).await;
        assert_eq!((r.status, r.body["mode"].clone()), (200, json!("live")), "{}", r.text);
        let next = format!("parley_refresh={}", r.refresh_cookie().unwrap());
        let r = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &next)]).await;
        assert_eq!(r.status, 200, "{}", r.text);
        // An origin on the same host but another port is another site's.
        let other_port = format!("http://{}:1", host.split(':').next().unwrap());
        let r = app.send(Method::POST, "/api/v1/auth/login", None, Some(login), &[("Origin", &other_port)]).await;
        assert_eq!(r.status, 403);
    }

    async fn access_tokens_expire(backend) {
        let app = TestApp::spawn_with(backend, |s| s.auth.access_token_ttl_seconds = 1).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let token = app.token("ana@example.com", PW).await;
        assert_eq!(app.bearer(Method::GET, "/api/v1/agents", &token, None).await.status, 200);
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let r = app.bearer(Method::GET, "/api/v1/agents", &token, None).await;
        assert_eq!(r.status, 401);
        assert_eq!(r.body, json!({"detail": "Invalid or expired access token"}));
    }

    async fn tampered_foreign_and_wrong_audience_tokens_are_401(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let other = app.workspace("B").await;
        app.user("ana@example.com", PW, ws.id, Role::Owner).await;
        let token = app.token("ana@example.com", PW).await;
        let parts: Vec<&str> = token.split('.').collect();
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        // Point the claims at workspace B, keep the signature.
        let mut claims: Value = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        claims["wid"] = json!(other.id);
        let forged = format!("{}.{}.{}", parts[0], b64.encode(serde_json::to_vec(&claims).unwrap()), parts[2]);
        // The same claims for another audience, signed with a key we made up.
        let kid = parley_domain::jwt::key_id(&token).unwrap();
        let mut aud: parley_domain::jwt::Claims = serde_json::from_slice(&b64.decode(parts[1]).unwrap()).unwrap();
        aud.aud = "mcp".into();
        let wrong_key = parley_domain::jwt::sign(&aud, &kid, b"guessed secret");
        let none = format!("{}.{}.", b64.encode(format!(r#"{{"alg":"none","kid":"{kid}"}}"#)), parts[1]);
        for bad in [forged.as_str(), wrong_key.as_str(), none.as_str(), "not.a.jwt", "x"] {
            let r = app.bearer(Method::GET, "/api/v1/agents", bad, None).await;
            assert_eq!(r.status, 401, "{bad}");
            assert_eq!(r.body, json!({"detail": "Invalid or expired access token"}));
        }
        assert_eq!(app.bearer(Method::GET, "/api/v1/agents", &token, None).await.status, 200);
    }

    async fn members_and_api_keys_cannot_manage_keys(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("mia@example.com", PW, ws.id, Role::Member).await;
        let member = app.token("mia@example.com", PW).await;
        for (method, path) in [(Method::GET, "/api/v1/api-keys"), (Method::POST, "/api/v1/api-keys"), (Method::DELETE, "/api/v1/api-keys/1")] {
            let r = app.bearer(method.clone(), path, &member, Some(json!({"name": "k", "mode": "live"}))).await;
            assert_eq!(r.status, 403, "{method} {path}");
            assert_eq!(r.body, json!({"detail": "Only owners and admins can manage API keys"}));
            let r = app.send(method.clone(), path, Some(&ws.live), Some(json!({"name": "k", "mode": "live"})), &[]).await;
            assert_eq!(r.status, 403, "{method} {path} with an API key");
            assert!(r.body["detail"].as_str().unwrap().starts_with("API keys cannot manage API keys"));
        }
    }

    async fn owners_create_list_rename_and_revoke_keys(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let owner_id = app.user("owen@example.com", PW, ws.id, Role::Owner).await;
        let token = app.token("owen@example.com", PW).await;
        let r = app.bearer(Method::POST, "/api/v1/api-keys", &token, Some(json!({"name": "Backend", "mode": "test", "workspace_locked": true}))).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let key = r.body["key"].as_str().unwrap().to_owned();
        assert!(key.starts_with("parley_test_"));
        assert_eq!((r.body["created_by"].clone(), r.body["workspace_locked"].clone(), r.body["mode"].clone()), (json!(owner_id), json!(true), json!("test")));
        let id = r.body["id"].as_i64().unwrap();
        // The new key works, and only sees test data.
        assert_eq!(app.get(&key, "/api/v1/agents").await.status, 200);
        let list = app.bearer(Method::GET, "/api/v1/api-keys", &token, None).await;
        assert_eq!(list.body["total"], 3, "the workspace's live and test keys and the new one");
        assert!(!list.text.contains(&key[12..]), "the list never shows a secret");
        assert_eq!(app.bearer(Method::GET, "/api/v1/api-keys?mode=test", &token, None).await.body["total"], 2);
        let p = app.bearer(Method::PATCH, &format!("/api/v1/api-keys/{id}"), &token, Some(json!({"name": "Renamed", "workspace_locked": false}))).await;
        assert_eq!((p.body["name"].clone(), p.body["workspace_locked"].clone()), (json!("Renamed"), json!(false)));
        let bad = app.bearer(Method::POST, "/api/v1/api-keys", &token, Some(json!({"name": "", "mode": "prod", "expires_at": "2001-01-01T00:00:00Z"}))).await;
        assert_eq!(bad.status, 422);
        assert_eq!(bad.faults().len(), 3);
        // Revoke: the key fails on its very next use.
        assert_eq!(app.bearer(Method::DELETE, &format!("/api/v1/api-keys/{id}"), &token, None).await.status, 204);
        assert_eq!(app.get(&key, "/api/v1/agents").await.status, 401);
        assert!(app.bearer(Method::GET, &format!("/api/v1/api-keys/{id}"), &token, None).await.body["revoked_at"].is_string());
        // Another workspace's key is a 404, like a missing one.
        let other = app.workspace("B").await;
        for path in [format!("/api/v1/api-keys/{}", other.live_key_id), "/api/v1/api-keys/999999".to_owned()] {
            let id = path.rsplit('/').next().unwrap();
            let r = app.bearer(Method::DELETE, &path, &token, None).await;
            assert_eq!((r.status, r.body.clone()), (404, json!({"detail": format!("API key {id} not found")})));
        }
        assert_eq!(app.get(&other.live, "/api/v1/agents").await.status, 200, "B's key still works");
    }

    async fn switching_workspace_only_to_the_users_own(backend) {
        let app = TestApp::spawn(backend).await;
        let a = app.workspace("A").await;
        let b = app.workspace("B").await;
        let c = app.workspace("C").await;
        let uid = app.user("ana@example.com", PW, a.id, Role::Owner).await;
        let mut tx = app.db.begin().await.unwrap();
        parley_store::repo::users::set_membership(&mut tx, uid, b.id, Role::Member).await.unwrap();
        tx.commit().await.unwrap();
        app.create_agent(&b.test, json!({"name": "B test agent"})).await;
        let token = app.token("ana@example.com", PW).await;
        let r = app.bearer(Method::POST, "/api/v1/auth/workspace", &token, Some(json!({"workspace_id": b.id, "mode": "test"}))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["workspace_id"], b.id);
        assert!(r.refresh_cookie().is_some());
        let in_b = r.body["access_token"].as_str().unwrap();
        let agents = app.bearer(Method::GET, "/api/v1/agents", in_b, None).await;
        assert_eq!(agents.body["agents"][0]["name"], "B test agent");
        // A member of B cannot manage B's keys.
        assert_eq!(app.bearer(Method::GET, "/api/v1/api-keys", in_b, None).await.status, 403);
        // C is not hers: 404, as if it did not exist.
        for wid in [c.id, 999999] {
            let r = app.bearer(Method::POST, "/api/v1/auth/workspace", &token, Some(json!({"workspace_id": wid}))).await;
            assert_eq!((r.status, r.body.clone()), (404, json!({"detail": format!("Workspace {wid} not found")})));
        }
    }

    async fn signing_keys_rotate_without_logging_anyone_out(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let before = app.token("ana@example.com", PW).await;
        let other_instance = app.sibling().await;
        let services = parley_server::services(&test_settings(&app.database_url), app.db.clone()).await.unwrap();
        let new_kid = parley_services::tenancy::identity::rotate_signing_key(&services).await.unwrap();
        // The old token still works; tokens signed after the rotation carry
        // the new kid, and an instance that has not seen it yet reloads.
        assert_eq!(app.bearer(Method::GET, "/api/v1/agents", &before, None).await.status, 200);
        assert_ne!(parley_domain::jwt::key_id(&before).unwrap(), new_kid);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let fresh = parley_services::tenancy::identity::login(&services, "ana@example.com", PW).await.unwrap().access_token;
        assert_eq!(parley_domain::jwt::key_id(&fresh).unwrap(), new_kid);
        for token in [&before, &fresh] {
            assert_eq!(other_instance.bearer(Method::GET, "/api/v1/agents", token, None).await.status, 200);
        }
    }

    async fn failed_logins_are_rate_limited_per_ip(backend) {
        let app = TestApp::spawn_with(backend, |s| s.rate_limit.auth_failures_per_minute = 2).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        assert_eq!(app.login("ana@example.com", "wrong-1").await.status, 401);
        assert_eq!(app.login("ana@example.com", "wrong-2").await.status, 401);
        let r = app.login("ana@example.com", "wrong-3").await;
        assert_eq!(r.status, 429);
        assert!(r.header("retry-after").is_some());
    }
}
