//! Issue 4: durable, signed, retried webhook delivery (Standard Webhooks).

use std::time::Duration;

use parley_domain::user::Role;
use parley_events::signing::{WebhookSecret, verify};
use reqwest::Method;
use serde_json::{Value, json};

use crate::receiver::{Answer, Receiver};
use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

/// Creates an endpoint; returns `(id, secret)`.
async fn endpoint(app: &TestApp, key: &str, url: &str, events: Value) -> (i64, String) {
    let r = app.post(key, "/api/v1/webhooks", json!({"url": url, "events": events})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    (r.body["id"].as_i64().unwrap(), r.body["secret"].as_str().unwrap().to_owned())
}

fn assert_signed(got: &crate::receiver::Received, secret: &str) {
    let secret = WebhookSecret::parse(secret).unwrap();
    let now: i64 = got.header("webhook-timestamp").parse().unwrap();
    verify(
        &secret,
        Some(got.header("webhook-id")),
        Some(got.header("webhook-timestamp")),
        Some(got.header("webhook-signature")),
        &got.body,
        now,
        300,
    )
    .expect("the signature verifies");
}

/// Verifies with the `standardwebhooks` package from PyPI, written by others.
pub(crate) fn verify_with_python(got: &crate::receiver::Received, secret: &str) {
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
msg = json.load(sys.stdin)
Webhook(msg["secret"]).verify(msg["body"], msg["headers"])
print("verified")
"#;
    let input = json!({
        "secret": secret,
        "body": String::from_utf8(got.body.to_vec()).unwrap(),
        "headers": {
            "webhook-id": got.header("webhook-id"),
            "webhook-timestamp": got.header("webhook-timestamp"),
            "webhook-signature": got.header("webhook-signature"),
        },
    });
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs (.ci/run installs standardwebhooks)");
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "standardwebhooks refused the signature: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "verified");
}

async fn attempts(app: &TestApp, key: &str, id: i64) -> Vec<Value> {
    app.get(key, &format!("/api/v1/webhooks/{id}/deliveries")).await.body["items"].as_array().unwrap().clone()
}

async fn wait_attempts(app: &TestApp, key: &str, id: i64, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let got = attempts(app, key, id).await;
        if got.len() >= n {
            return got;
        }
        assert!(std::time::Instant::now() < deadline, "expected {n} attempts, got {}", got.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

both_backends! {
    async fn endpoints_are_managed_and_secrets_shown_once(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post(&ws.live, "/api/v1/webhooks", json!({"url": "https://hooks.example.com/parley", "events": ["agent.created", "agent.updated"], "description": "CRM"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert!(r.body["secret"].as_str().unwrap().starts_with("whsec_"));
        assert_eq!((r.body["status"].clone(), r.body["disabled_reason"].clone()), (json!("active"), Value::Null));
        let id = r.body["id"].as_i64().unwrap();
        let got = app.get(&ws.live, &format!("/api/v1/webhooks/{id}")).await;
        assert!(got.body.get("secret").is_none());
        assert!(!app.get(&ws.live, "/api/v1/webhooks").await.text.contains("whsec_"));
        let p = app.patch(&ws.live, &format!("/api/v1/webhooks/{id}"), json!({"events": ["*"], "enabled": false, "description": null})).await;
        assert_eq!(p.status, 200, "{}", p.text);
        assert_eq!((p.body["events"].clone(), p.body["status"].clone(), p.body["disabled_reason"].clone()), (json!(["*"]), json!("disabled"), json!("Disabled by a user")));
        let p = app.patch(&ws.live, &format!("/api/v1/webhooks/{id}"), json!({"enabled": true})).await;
        assert_eq!((p.body["status"].clone(), p.body["disabled_reason"].clone()), (json!("active"), Value::Null));
        // Unknown event types are a 422 that lists the permitted ones.
        let bad = app.post(&ws.live, "/api/v1/webhooks", json!({"url": "https://x.example.com", "events": ["agent.created", "agent.exploded"]})).await;
        assert_eq!(bad.status, 422);
        assert_eq!(bad.body["detail"][0]["loc"], json!(["body", "events", 1]));
        assert!(bad.body["detail"][0]["msg"].as_str().unwrap().contains("'call.completed'"));
        let bad = app.post(&ws.live, "/api/v1/webhooks", json!({"url": "ftp://x.example.com", "events": []})).await;
        assert_eq!(bad.faults().iter().map(|f| f.1.clone()).collect::<Vec<_>>(), vec!["value_error.url", "value_error.list.min_items"]);
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/webhooks/{id}")).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/webhooks/{id}")).await.body, json!({"detail": format!("Webhook {id} not found")}));
        // Members cannot manage webhooks; owners can, with a Bearer token.
        app.user("mia@example.com", "password-123", ws.id, Role::Member).await;
        let member = app.token("mia@example.com", "password-123").await;
        assert_eq!(app.bearer(Method::GET, "/api/v1/webhooks", &member, None).await.status, 403);
        app.user("owen@example.com", "password-123", ws.id, Role::Owner).await;
        let owner = app.token("owen@example.com", "password-123").await;
        assert_eq!(app.bearer(Method::GET, "/api/v1/webhooks", &owner, None).await.status, 200);
    }

    async fn private_targets_are_refused_after_resolution(backend) {
        let app = TestApp::spawn_with(backend, |s| s.webhooks.allow_private_targets = false).await;
        let ws = app.workspace("A").await;
        // These only resolve (or parse) the address; nothing connects to them.
        for url in ["http://127.0.0.1/hook", "http://[::1]/hook", "http://[::ffff:127.0.0.1]/hook", "http://10.0.0.1/hook",
                    "http://169.254.169.254/latest/meta-data", "http://localhost:8080/hook", "http://2130706433/hook"] {
            let r = app.post(&ws.live, "/api/v1/webhooks", json!({"url": url, "events": ["*"]})).await;
            assert_eq!(r.status, 422, "{url}: {}", r.text);
            assert_eq!(r.body["detail"][0]["type"], "value_error.url.private", "{url}");
            assert!(r.body["detail"][0]["msg"].as_str().unwrap().contains("not a public address"), "{url}: {}", r.text);
        }
        assert_eq!(app.get(&ws.live, "/api/v1/webhooks").await.body["total"], 0);
    }

    async fn events_are_delivered_signed_with_the_resource_as_data(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        let (_, secret) = endpoint(&app, &ws.test, &rx.url, json!(["agent.created"])).await;
        let agent = app.create_agent(&ws.test, json!({"name": "Hooked"})).await;
        app.post(&ws.test, "/api/v1/prompt-blocks", json!({"name": "Not subscribed", "content": "x"})).await;
        let got = rx.wait_for(1, WAIT).await;
        let msg = &got[0];
        assert!(msg.header("webhook-id").starts_with("evt_"));
        assert!(msg.header("webhook-signature").starts_with("v1,"));
        let body = msg.json();
        assert_eq!(body["type"], "agent.created");
        let mut agent = agent.clone();
        assert!(agent.as_object_mut().unwrap().remove("tool_secret").is_some(), "the secret is in the create response only");
        assert_eq!(body["data"], agent);
        assert_eq!(body["livemode"], false);
        assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_signed(msg, &secret);
        verify_with_python(msg, &secret);
        // The webhook-id is the event's id.
        let event = app.get(&ws.test, &format!("/api/v1/events/{}", msg.header("webhook-id"))).await;
        assert_eq!((event.status, event.body["type"].clone(), event.body["data"].clone()), (200, json!("agent.created"), agent.clone()));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(rx.received().len(), 1, "prompt_block.created was not subscribed");
        let att = wait_attempts(&app, &ws.test, 1, 1).await;
        assert_eq!((att[0]["attempt"].clone(), att[0]["status_code"].clone(), att[0]["error"].clone()), (json!(1), json!(200), Value::Null));
        assert_eq!(att[0]["event_id"], msg.header("webhook-id"));
        assert_eq!(att[0]["response_body_excerpt"], "ok");
    }

    async fn failures_are_retried_with_the_same_webhook_id(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        rx.script(vec![Answer::status(500), Answer { status: 302, headers: vec![("location", "http://127.0.0.1:9/elsewhere".into())], ..Answer::status(302) }, Answer::status(200)]);
        let (id, _) = endpoint(&app, &ws.live, &rx.url, json!(["*"])).await;
        app.create_agent(&ws.live, json!({"name": "Retry me"})).await;
        let got = rx.wait_for(3, WAIT).await;
        assert!(got.iter().all(|m| m.header("webhook-id") == got[0].header("webhook-id")));
        let att = wait_attempts(&app, &ws.live, id, 3).await;
        // Newest first.
        let codes: Vec<Value> = att.iter().map(|a| a["status_code"].clone()).collect();
        assert_eq!(codes, vec![json!(200), json!(302), json!(500)]);
        assert_eq!(att[1]["error"], "HTTP 302: redirects are not followed");
        assert_eq!(att[2]["attempt"], 1);
        assert!(att[2]["next_attempt_at"].is_string(), "a failed attempt says when the next one is due");
        assert_eq!(att[0]["next_attempt_at"], Value::Null);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(rx.received().len(), 3, "a success ends the retries");
    }

    async fn a_410_disables_the_endpoint_and_retry_after_is_honoured(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        rx.script(vec![Answer { headers: vec![("retry-after", "1".into())], ..Answer::status(429) }, Answer::status(410)]);
        let (id, _) = endpoint(&app, &ws.live, &rx.url, json!(["*"])).await;
        app.create_agent(&ws.live, json!({"name": "A"})).await;
        let got = rx.wait_for(2, WAIT).await;
        let gap = got[1].at - got[0].at;
        assert!(gap >= Duration::from_millis(950), "Retry-After: 1 was not honoured ({gap:?})");
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let e = app.get(&ws.live, &format!("/api/v1/webhooks/{id}")).await.body;
            if e["status"] == "disabled" {
                assert_eq!(e["disabled_reason"], "The endpoint answered 410 Gone");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the endpoint was not disabled");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A disabled endpoint receives nothing more, and refuses test events.
        app.create_agent(&ws.live, json!({"name": "B"})).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(rx.received().len(), 2);
        assert_eq!(app.post(&ws.live, &format!("/api/v1/webhooks/{id}/test"), json!({})).await.status, 409);
    }

    async fn an_endpoint_failing_for_five_days_is_disabled(backend) {
        // At this scale five days last 4.3 s, and retries come within milliseconds.
        let app = TestApp::spawn_with(backend, |s| s.webhooks.retry_scale = 0.00001).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        rx.always(Answer::status(500));
        let (id, _) = endpoint(&app, &ws.live, &rx.url, json!(["webhook.test"])).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let e = app.get(&ws.live, &format!("/api/v1/webhooks/{id}")).await.body;
            if e["status"] == "disabled" {
                assert_eq!(e["disabled_reason"], "Deliveries have failed for 5 days");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "not disabled after 5 (scaled) days of failures");
            app.post(&ws.live, &format!("/api/v1/webhooks/{id}/test"), json!({})).await;
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        assert!(rx.received().len() >= 8);
    }

    async fn timeouts_are_failures(backend) {
        let app = TestApp::spawn_with(backend, |s| s.webhooks.timeout_seconds = 1).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        rx.script(vec![Answer { delay: Duration::from_secs(3), ..Answer::status(200) }]);
        let (id, _) = endpoint(&app, &ws.live, &rx.url, json!(["*"])).await;
        app.create_agent(&ws.live, json!({"name": "Slow"})).await;
        let att = wait_attempts(&app, &ws.live, id, 2).await;
        let first = att.last().unwrap();
        assert_eq!((first["status_code"].clone(), first["error"].clone()), (Value::Null, json!("timed out after 1 s")));
        assert_eq!(att[0]["status_code"], 200, "the retry succeeded");
    }

    async fn deliveries_to_one_endpoint_keep_event_order_and_a_slow_one_holds_up_no_other(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let slow = Receiver::start().await;
        slow.always(Answer { delay: Duration::from_secs(2), ..Answer::status(200) });
        let fast = Receiver::start().await;
        endpoint(&app, &ws.live, &slow.url, json!(["*"])).await;
        let (fast_id, _) = endpoint(&app, &ws.live, &fast.url, json!(["*"])).await;
        let started = std::time::Instant::now();
        let mut expected = Vec::new();
        for i in 0..20 {
            let a = app.create_agent(&ws.live, json!({"name": format!("Agent {i}")})).await;
            expected.push(a["id"].clone());
        }
        let got = fast.wait_for(20, WAIT).await;
        assert!(started.elapsed() < Duration::from_secs(5), "the fast endpoint waited for the slow one");
        let order: Vec<Value> = got.iter().map(|m| m.json()["data"]["id"].clone()).collect();
        assert_eq!(order, expected, "deliveries arrive in event order");
        assert!(slow.received().len() <= 3);
        let _ = fast_id;
    }

    async fn rotation_signs_with_both_secrets_for_a_day(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        let (id, old) = endpoint(&app, &ws.live, &rx.url, json!(["webhook.test"])).await;
        let r = app.post(&ws.live, &format!("/api/v1/webhooks/{id}/rotate-secret"), json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let new = r.body["secret"].as_str().unwrap().to_owned();
        assert_ne!(new, old);
        let t = app.post(&ws.live, &format!("/api/v1/webhooks/{id}/test"), json!({})).await;
        assert_eq!(t.status, 202);
        assert_eq!(t.body["type"], "webhook.test");
        let got = rx.wait_for(1, WAIT).await;
        let sigs = got[0].header("webhook-signature");
        assert_eq!(sigs.split(' ').count(), 2, "{sigs}");
        assert_eq!(got[0].json()["data"]["webhook_id"], id);
        assert_signed(&got[0], &old);
        assert_signed(&got[0], &new);
        verify_with_python(&got[0], &new);
        verify_with_python(&got[0], &old);
    }

    async fn a_delivery_can_be_retried_by_hand(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let rx = Receiver::start().await;
        let (id, _) = endpoint(&app, &ws.live, &rx.url, json!(["*"])).await;
        app.post(&ws.live, &format!("/api/v1/webhooks/{id}/test"), json!({})).await;
        let first = rx.wait_for(1, WAIT).await[0].clone();
        let att = wait_attempts(&app, &ws.live, id, 1).await;
        let r = app.post(&ws.live, &format!("/api/v1/webhooks/{id}/deliveries/{}/retry", att[0]["id"]), json!({})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let again = rx.wait_for(2, WAIT).await;
        assert_eq!(again[1].header("webhook-id"), first.header("webhook-id"));
        assert_eq!(wait_attempts(&app, &ws.live, id, 2).await[0]["attempt"], 2);
        let r = app.post(&ws.live, &format!("/api/v1/webhooks/{id}/deliveries/999999/retry"), json!({})).await;
        assert_eq!((r.status, r.body.clone()), (404, json!({"detail": "Delivery 999999 not found"})));
    }

    async fn the_event_log_is_listed_and_scoped(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let other = app.workspace("B").await;
        let a = app.create_agent(&ws.live, json!({"name": "A"})).await;
        app.patch(&ws.live, &format!("/api/v1/agents/{}", a["id"]), json!({"priority": 3})).await;
        let all = app.get(&ws.live, "/api/v1/events").await;
        assert_eq!(all.body["total"], 2);
        assert_eq!(all.body["items"][0]["type"], "agent.updated");
        let created = app.get(&ws.live, "/api/v1/events?type=agent.created").await;
        assert_eq!(created.body["total"], 1);
        let id = created.body["items"][0]["id"].as_str().unwrap().to_owned();
        assert_eq!(created.body["items"][0]["livemode"], true);
        for key in [&other.live, &ws.test] {
            let r = app.get(key, &format!("/api/v1/events/{id}")).await;
            assert_eq!((r.status, r.body.clone()), (404, json!({"detail": format!("Event {id} not found")})));
            assert_eq!(app.get(key, "/api/v1/events").await.body["total"], 0);
        }
    }
}

both_backends! {
    async fn every_event_type_is_listed_and_documented(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.get(&ws.live, "/api/v1/event-types").await;
        assert_eq!(r.status, 200);
        let listed: Vec<&str> = r.body["items"].as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap()).collect();
        assert_eq!(listed, parley_domain::event::EventType::ALL);
        assert!(r.body["items"].as_array().unwrap().iter().all(|t| t["description"].as_str().is_some_and(|d| d.ends_with('.'))));
        // docs/webhooks.md has a row for each, with the same words.
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/webhooks.md")).unwrap();
        for t in r.body["items"].as_array().unwrap() {
            let row = format!("| `{}` | {} |", t["type"].as_str().unwrap(), t["description"].as_str().unwrap());
            assert!(docs.contains(&row), "docs/webhooks.md lacks {row}");
        }
        assert_eq!(app.send(reqwest::Method::GET, "/api/v1/event-types", None, None, &[]).await.status, 401);
    }
}
