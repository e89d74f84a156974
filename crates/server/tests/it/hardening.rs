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
        let mut tx = app.db.begin().await.unwrap();
        let past_the_grace = parley_domain::Timestamp::now().plus_seconds(-31);
        parley_store::execute!(&mut tx, sqlx::query("UPDATE refresh_tokens SET rotated_at = $1 WHERE rotated_at IS NOT NULL").bind(past_the_grace))
            .unwrap();
        tx.commit().await.unwrap();
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

    async fn csv_import_faults_are_capped_and_wide_headers_refused(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        // 700,000 unknown columns: one fault, not 700,000.
        let mut header = String::from("display_name");
        for i in 0..700_000 {
            header.push_str(&format!(",c{i}"));
        }
        let r = crate::contacts::import(&app, &ws.live, format!("{header}\nAna\n")).await;
        assert_eq!(r.status, 422);
        assert!(r.text.len() < 1_000, "{} bytes", r.text.len());
        assert_eq!(r.faults(), [(r#"["body","header"]"#.to_owned(), "value_error.csv.too_many_columns".to_owned())]);
        // 40 unknown columns and 3,000 bad rows: 100 listed, the rest counted.
        let mut csv = String::from("phone");
        for i in 0..40 {
            csv.push_str(&format!(",x{i}"));
        }
        csv.push('\n');
        let r = crate::contacts::import(&app, &ws.live, csv).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"].as_array().unwrap().len(), 40);
        let mut csv = String::from("phone\n");
        for _ in 0..3_000 {
            csv.push_str("not a phone\n");
        }
        let r = crate::contacts::import(&app, &ws.live, csv).await;
        assert_eq!(r.status, 422);
        let detail = r.body["detail"].as_array().unwrap();
        assert_eq!(detail.len(), 101);
        assert_eq!(detail[99]["loc"], json!(["body", "rows", 100, "phone"]));
        assert_eq!(detail[100]["type"], "value_error.too_many_errors");
        assert_eq!(detail[100]["ctx"]["count"], 2_900);
        assert_eq!(app.get(&ws.live, "/api/v1/contacts").await.body["total"], 0);
    }

    async fn undecodable_path_ids_are_422_json_never_500(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        for (path, name) in [
            ("/api/v1/agents/%FF", "agent_id"),
            ("/api/v1/agents/%C3%28/triggers", "agent_id"),
            ("/api/v1/agents/1/triggers/%FF", "trigger_id"),
            ("/api/v1/calls/%FF", "call_id"),
            ("/api/v1/events/%FF", "event_id"),
            ("/api/v1/calls/%FF/transcript", "call_id"),
        ] {
            let r = app.get(&ws.live, path).await;
            assert_eq!(r.status, 422, "{path}: {}", r.text);
            assert_eq!(r.header("content-type"), Some("application/json"), "{path}");
            assert!(r.header("x-request-id").is_some());
            assert_eq!(r.body["detail"][0]["loc"], json!(["path", name]), "{path}");
        }
        // Routes without credentials too.
        for (path, name) in [("/files/%FF", "key"), ("/webchat/%FF", "public_id")] {
            let r = app.send(Method::GET, path, None, None, &[]).await;
            assert_eq!(r.status, 422, "{path}: {}", r.text);
            assert_eq!(r.body["detail"][0]["loc"], json!(["path", name]), "{path}");
        }
    }

    async fn every_error_is_json_with_a_request_id(backend) {
        let app = TestApp::spawn(backend).await;
        let r = app.send(Method::GET, "/files/x?expires=abc&type=text/plain&signature=s", None, None, &[]).await;
        assert_eq!(r.status, 422, "{}", r.text);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body["detail"][0]["loc"], json!(["query", "expires"]));
        // A header hyper itself cannot parse (DEL) gets the same JSON shape.
        for raw in [
            &b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Foo: a\x7fb\r\n\r\n"[..],
            b"GET /api/v1/agents HTTP/1.1\r\nHost: x\r\nX-API-Key: a\x01b\r\n\r\n",
        ] {
            let answer = raw_request(&app, raw).await;
            let (head, body) = answer.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with("HTTP/1.1 400 "), "{answer}");
            let head = head.to_ascii_lowercase();
            assert!(head.contains("content-type: application/json"), "{head}");
            assert!(head.contains("x-request-id: "), "{head}");
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert!(v["detail"].as_str().unwrap().contains("header"), "{body}");
        }
    }

    async fn a_search_offset_near_the_integer_limit_is_refused(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        for query in ["offset=9223372036854775708&limit=200", "offset=9223372036854775807", "offset=9999&limit=2"] {
            let r = app.get(&ws.live, &format!("/api/v1/search?q=hello&{query}")).await;
            assert_eq!(r.status, 422, "{query}: {}", r.text);
            assert_eq!(r.body["detail"][0]["loc"], json!(["query", "offset"]));
        }
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=hello&offset=9800&limit=200").await.status, 200);
    }

    async fn a_handoff_target_must_be_a_member_of_the_workspace(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let other = app.workspace("B").await;
        let member = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let outsider = app.user("bo@example.com", PW, other.id, Role::Owner).await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        let path = format!("/api/v1/agents/{agent}");
        for user in [outsider, 999_999] {
            let r = app.patch(&ws.live, &path, json!({"handoff": {"target_user_id": user}})).await;
            assert_eq!(r.status, 422, "{}", r.text);
            assert_eq!(r.faults(), [(r#"["body","handoff","target_user_id"]"#.to_owned(), "value_error.not_found".to_owned())]);
        }
        let r = app.post_idem(&ws.live, "/api/v1/agents", &uuid(), json!({"name": "Bo", "handoff": {"target_user_id": outsider}})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        assert_eq!(app.get(&ws.live, &path).await.body["handoff"]["target_user_id"], json!(null));
        let r = app.patch(&ws.live, &path, json!({"handoff": {"target_user_id": member}})).await;
        assert_eq!((r.status, r.body["handoff"]["target_user_id"].clone()), (200, json!(member)));
    }

    async fn unsigned_inbound_requests_learn_nothing_about_channels(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let other = app.workspace("B").await;
        let (api, _) = crate::conversations::api_channel(&app, &ws.live).await;
        let (webchat, _) = crate::webchat::webchat_channel(&app, &other.live, json!({})).await;
        let missing = api + webchat + 1000;
        let mut answers = Vec::new();
        for id in [api, webchat, missing] {
            for signed in [false, true] {
                let mut rb = app.client.post(app.url(&format!("/api/v1/channels/{id}/inbound"))).json(&json!({"from": "x", "text": "hi"}));
                if signed {
                    let now = crate::conversations::now_s().to_string();
                    rb = rb.header("webhook-id", "msg_1").header("webhook-timestamp", now).header("webhook-signature", "v1,Zm9yZ2Vk");
                }
                let r = Resp::from(rb.send().await.unwrap()).await;
                answers.push((signed, r.status, r.text));
            }
            let r = Resp::from(app.client.post(app.url(&format!("/api/v1/channels/{id}/status"))).json(&json!({})).send().await.unwrap()).await;
            answers.push((false, r.status, r.text));
        }
        for (signed, status, text) in &answers {
            assert_eq!(*status, 401, "{text}");
            let same = answers.iter().find(|(s, _, _)| s == signed).unwrap();
            assert_eq!(text, &same.2, "the answer depends on what the id names");
        }
    }

    async fn header_bound_channel_settings_refuse_control_characters(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        for bad in ["Bearer a\r\nX-Evil: 1", "Bearer a\nb", "Bearer \u{7f}"] {
            let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "B", "config": {"authorization": bad}})).await;
            assert_eq!(r.status, 422, "{}", r.text);
            assert_eq!(r.faults(), [(r#"["body","config","authorization"]"#.to_owned(), "value_error.header".to_owned())]);
        }
        let (id, _) = crate::conversations::api_channel(&app, &ws.live).await;
        let r = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"authorization": "Bearer x\r\n"}})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let r = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"authorization": "Bearer abc.def"}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }

    async fn a_413_closes_the_connection_and_the_client_carries_on(backend) {
        let app = TestApp::spawn_with(backend, |s| s.limits.max_body_bytes = 1024).await;
        let ws = app.workspace("A").await;
        let big = json!({"name": "x".repeat(200_000)});
        for _ in 0..5 {
            let r = app.post_idem(&ws.live, "/api/v1/agents", &uuid(), big.clone()).await;
            assert_eq!(r.status, 413, "{}", r.text);
            assert_eq!(r.header("connection"), Some("close"));
            assert!(r.header("x-request-id").is_some());
            // The same client (its pool) goes on working.
            assert_eq!(app.get(&ws.live, "/api/v1/agents").await.status, 200);
        }
        // A body that is read keeps the connection.
        let r = app.post_idem(&ws.live, "/api/v1/agents", &uuid(), json!({"name": "Ava"})).await;
        assert_eq!(r.status, 201);
        assert_eq!(r.header("connection"), None);
        // An early 401 leaves the body unread: close.
        let r = app.send(Method::POST, "/api/v1/agents", None, Some(json!({"name": "Ava"})), &[]).await;
        assert_eq!((r.status, r.header("connection")), (401, Some("close")));
    }

    async fn data_files_are_private_to_the_server_user(backend) {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        // Stored objects: an attachment.
        let rx = crate::receiver::Receiver::start().await;
        let (ch, secret) = crate::messages::sending_channel(&app, &ws.live, &rx.url).await;
        let conv = crate::messages::conversation_with(&app, ch, &secret, "user-1").await;
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x", "attachments": [
            {"filename": "a.txt", "content_type": "text/plain", "data": "aGk="}]})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!(mode(&app.storage_path), 0o700);
        let mut files = Vec::new();
        let mut dirs = vec![app.storage_path.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() { dirs.push(p) } else { files.push(p) }
            }
        }
        assert!(!files.is_empty());
        for f in &files {
            assert_eq!(mode(f), 0o600, "{}", f.display());
            let mut d = f.parent();
            while let Some(dir) = d.filter(|d| d.starts_with(&app.storage_path)) {
                assert_eq!(mode(dir), 0o700, "{}", dir.display());
                d = dir.parent();
            }
        }
        // The SQLite database, in a directory that did not exist.
        let dir = std::env::temp_dir().join(format!("parley-private-{}", uuid()));
        let url = format!("sqlite://{}/data/parley.db", dir.display());
        let db = parley_store::Db::connect(&url, &parley_store::DbOptions::default()).await.unwrap();
        db.migrate().await.unwrap();
        db.close().await;
        assert_eq!(mode(&dir.join("data")), 0o700);
        for f in ["parley.db", "parley.db-wal", "parley.db-shm"] {
            let p = dir.join("data").join(f);
            if p.exists() {
                assert_eq!(mode(&p), 0o600, "{f}");
            }
        }
        assert!(dir.join("data/parley.db").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    async fn extreme_numbers_in_json_metadata_are_stored_and_read_back(backend) {
        // PostgreSQL keeps jsonb numbers as numeric and prints them in full;
        // reading -1.79e308 back once failed (a 500) on PostgreSQL.
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        let metadata = json!({"max": -1.7976931348623155e308, "tiny": 9.404921347800748e-258, "big": 4.7675593434029704e16, "min": 5e-324});
        // The same numbers (PostgreSQL may write 4.7675593434029704e16 as an integer).
        let same = |got: &serde_json::Value| {
            ["max", "tiny", "big", "min"].iter().all(|k| got[k].as_f64() == metadata[k].as_f64())
        };
        let r = app.patch(&ws.live, &format!("/api/v1/agents/{agent}"), json!({"metadata": metadata})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(same(&r.body["metadata"]), "{}", r.body["metadata"]);
        assert!(same(&app.get(&ws.live, &format!("/api/v1/agents/{agent}")).await.body["metadata"]));
        let r = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana", "metadata": metadata})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_i64().unwrap();
        assert!(same(&app.get(&ws.live, &format!("/api/v1/contacts/{id}")).await.body["metadata"]));
    }

    async fn an_attachment_named_dot_dot_is_stored_like_any_other(backend) {
        use std::os::unix::fs::PermissionsExt;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let rx = crate::receiver::Receiver::start().await;
        let (ch, secret) = crate::messages::sending_channel(&app, &ws.live, &rx.url).await;
        let conv = crate::messages::conversation_with(&app, ch, &secret, "user-1").await;
        for name in ["..", ".", "..."] {
            let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x", "attachments": [
                {"filename": name, "content_type": "text/plain", "data": "aGk="}]})).await;
            assert_eq!(r.status, 202, "{name}: {}", r.text);
            assert_eq!(r.body["attachments"][0]["filename"], name);
            let url = r.body["attachments"][0]["url"].as_str().unwrap().to_owned();
            assert_eq!(app.client.get(&url).send().await.unwrap().text().await.unwrap(), "hi", "{name}");
        }
        // No directory of the store lost its mode to a name read as a path.
        let mut dirs = vec![app.storage_path.clone()];
        while let Some(d) = dirs.pop() {
            assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700, "{}", d.display());
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() { dirs.push(p) }
            }
        }
    }

    async fn credentials_sent_to_routes_that_take_none_are_not_failures(backend) {
        let app = TestApp::spawn_with(backend, |s| s.rate_limit.auth_failures_per_minute = 2).await;
        // A dashboard that sends its stale access token along with a refresh
        // or a sign-out is not guessing credentials.
        for path in ["/api/v1/auth/refresh", "/api/v1/auth/logout", "/api/v1/auth/refresh"] {
            let r = app.send(Method::POST, path, None, None, &[("Authorization", "Bearer expired.token.here")]).await;
            assert_ne!(r.status, 429, "{path}: {}", r.text);
        }
        let r = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("X-API-Key", "parley_live_junk")]).await;
        assert_eq!(r.status, 401);
        // On a route that takes credentials, the same junk counts.
        for _ in 0..2 {
            assert_eq!(app.get("parley_live_junk", "/api/v1/agents").await.status, 401);
        }
        assert_eq!(app.get("parley_live_junk", "/api/v1/agents").await.status, 429);
    }
}

/// Sends raw bytes on a new connection and returns everything answered.
async fn raw_request(app: &TestApp, bytes: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(5), socket.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}
