//! Issue 15: regressions for the defects an outside security pass found.

use parley_domain::user::Role;
use reqwest::Method;
use serde_json::json;

use crate::support::*;

const PW: &str = "a long enough password";

both_backends! {
    async fn a_locked_out_ip_gets_429_even_with_the_right_password(backend) {
        let app = TestApp::spawn_with(backend, |s| s.rate_limit.auth_failures_per_minute = 2).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        assert_eq!(app.login("ana@example.com", "wrong-1").await.status, 401);
        assert_eq!(app.login("ana@example.com", "wrong-2").await.status, 401);
        // The limiter is consulted before the password: the right one is no
        // different from a wrong one now, so a 200 cannot reveal it.
        let r = app.login("ana@example.com", PW).await;
        assert_eq!(r.status, 429, "{}", r.text);
        assert!(r.header("retry-after").is_some());
        assert!(r.body.get("access_token").is_none());
        assert_eq!(app.login("ana@example.com", "wrong-3").await.status, 429);
    }

    async fn a_locked_out_account_gets_429_whatever_the_password(backend) {
        let app = TestApp::spawn_with(backend, |s| s.rate_limit.account_failures_per_hour = 2).await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        app.user("bo@example.com", PW, ws.id, Role::Member).await;
        assert_eq!(app.login("ana@example.com", "wrong-1").await.status, 401);
        // The account is the email however it is written.
        assert_eq!(app.login(" ANA@example.com", "wrong-2").await.status, 401);
        assert_eq!(app.login("ana@example.com", PW).await.status, 429);
        // Another account from the same IP is not affected.
        assert_eq!(app.login("bo@example.com", PW).await.status, 200);
    }

    async fn successful_logins_are_not_counted_as_failures(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.rate_limit.auth_failures_per_minute = 2;
            s.rate_limit.account_failures_per_hour = 2;
        })
        .await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Member).await;
        for _ in 0..5 {
            assert_eq!(app.login("ana@example.com", PW).await.status, 200);
        }
        assert_eq!(app.login("ana@example.com", "wrong").await.status, 401);
    }

    async fn one_key_has_one_quota_however_it_is_spelled(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.rate_limit.per_second = 0.01;
            s.rate_limit.burst = 4;
        })
        .await;
        let ws = app.workspace("A").await;
        let k = ws.live.as_str();
        let spellings = [
            ("X-API-Key", k.to_owned()),
            ("Authorization", format!("Bearer {k}")),
            ("Authorization", format!("bearer {k}")),
            ("Authorization", format!("Bearer  {k}")),
        ];
        for (name, value) in &spellings {
            let r = app.send(Method::GET, "/api/v1/agents", None, None, &[(name, value)]).await;
            assert_eq!(r.status, 200, "{name}: {value}");
        }
        for (name, value) in &spellings {
            let r = app.send(Method::GET, "/api/v1/agents", None, None, &[(name, value)]).await;
            assert_eq!(r.status, 429, "{name}: {value} got a fresh quota");
        }
        // Another key is another principal.
        let other = app.workspace("B").await;
        assert_eq!(app.get(&other.live, "/api/v1/agents").await.status, 200);
    }

    async fn junk_credentials_do_not_escape_the_per_ip_quota(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.rate_limit.per_second = 0.01;
            s.rate_limit.burst = 3;
        })
        .await;
        // An unauthenticated route: credential headers do not pick the bucket.
        for i in 0..3 {
            let junk = format!("junk-{i}");
            let r = app.send(Method::GET, "/webchat/widget.js", None, None, &[("X-API-Key", &junk)]).await;
            assert_eq!(r.status, 200);
        }
        let r = app.send(Method::GET, "/webchat/widget.js", None, None, &[("X-API-Key", "junk-3")]).await;
        assert_eq!(r.status, 429);
        // Failed authentication on the API counts against the same IP quota.
        let r = app.send(Method::GET, "/api/v1/agents", Some("parley_live_junk"), None, &[]).await;
        assert_eq!(r.status, 429);
    }

    async fn revoking_a_session_stops_its_access_tokens_on_every_instance(backend) {
        let app = TestApp::spawn(backend).await;
        let other_instance = app.sibling().await;
        let ws = app.workspace("A").await;
        app.user("ana@example.com", PW, ws.id, Role::Admin).await;
        // Logout.
        let login = app.login("ana@example.com", PW).await;
        let token = login.body["access_token"].as_str().unwrap().to_owned();
        let cookie = format!("parley_refresh={}", login.refresh_cookie().unwrap());
        assert_eq!(other_instance.bearer(Method::GET, "/api/v1/agents", &token, None).await.status, 200);
        assert_eq!(app.send(Method::POST, "/api/v1/auth/logout", None, None, &[("Cookie", &cookie)]).await.status, 204);
        for instance in [&app, &other_instance] {
            let r = instance.bearer(Method::GET, "/api/v1/agents", &token, None).await;
            assert_eq!(r.status, 401);
            assert_eq!(r.body, json!({"detail": "Invalid or expired access token"}));
        }
        // Refresh-token reuse revokes the session, and its access tokens with it.
        let login = app.login("ana@example.com", PW).await;
        let first_token = login.body["access_token"].as_str().unwrap().to_owned();
        let first = format!("parley_refresh={}", login.refresh_cookie().unwrap());
        let rotated = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &first)]).await;
        assert_eq!(rotated.status, 200);
        let second_token = rotated.body["access_token"].as_str().unwrap().to_owned();
        assert_eq!(app.bearer(Method::GET, "/api/v1/agents", &second_token, None).await.status, 200);
        assert_eq!(app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &first)]).await.status, 401);
        for token in [&first_token, &second_token] {
            assert_eq!(other_instance.bearer(Method::GET, "/api/v1/agents", token, None).await.status, 401);
        }
        // A session that was not revoked is untouched.
        let kept = app.token("ana@example.com", PW).await;
        assert_eq!(app.bearer(Method::GET, "/api/v1/agents", &kept, None).await.status, 200);
    }

    async fn duplicate_credential_headers_are_400(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let other = app.workspace("B").await;
        let bearer = format!("Bearer {}", ws.live);
        let cases: [&[(&str, &str)]; 4] = [
            &[("X-API-Key", &ws.live), ("X-API-Key", &other.live)],
            &[("X-API-Key", &ws.live), ("X-API-Key", &ws.live)],
            &[("Authorization", &bearer), ("Authorization", &bearer)],
            &[("X-API-Key", &ws.live), ("Authorization", &bearer)],
        ];
        for headers in cases {
            let r = app.send(Method::GET, "/api/v1/agents", None, None, headers).await;
            assert_eq!(r.status, 400, "{headers:?}: {}", r.text);
            assert!(r.body["detail"].as_str().is_some());
        }
    }
}
