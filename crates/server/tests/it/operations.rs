//! Health probes, the OpenAPI document, the docs page and rate limiting.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// Every route the router serves. A new route must be added here and to the
/// OpenAPI document; the test below checks both directions.
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("POST", "/api/v1/auth/login"),
    ("POST", "/api/v1/auth/refresh"),
    ("POST", "/api/v1/auth/logout"),
    ("GET", "/api/v1/auth/me"),
    ("POST", "/api/v1/auth/workspace"),
    ("GET", "/api/v1/api-keys"),
    ("POST", "/api/v1/api-keys"),
    ("GET", "/api/v1/api-keys/{key_id}"),
    ("PATCH", "/api/v1/api-keys/{key_id}"),
    ("DELETE", "/api/v1/api-keys/{key_id}"),
    ("GET", "/api/v1/agents"),
    ("POST", "/api/v1/agents"),
    ("GET", "/api/v1/agents/{agent_id}"),
    ("PATCH", "/api/v1/agents/{agent_id}"),
    ("DELETE", "/api/v1/agents/{agent_id}"),
    ("GET", "/api/v1/agents/{agent_id}/triggers"),
    ("POST", "/api/v1/agents/{agent_id}/triggers"),
    ("GET", "/api/v1/agents/{agent_id}/triggers/{trigger_id}"),
    ("PATCH", "/api/v1/agents/{agent_id}/triggers/{trigger_id}"),
    ("DELETE", "/api/v1/agents/{agent_id}/triggers/{trigger_id}"),
    ("POST", "/api/v1/agents/{agent_id}/prompt/preview"),
    ("GET", "/api/v1/prompt-blocks"),
    ("POST", "/api/v1/prompt-blocks"),
    ("GET", "/api/v1/prompt-blocks/{block_id}"),
    ("PATCH", "/api/v1/prompt-blocks/{block_id}"),
    ("DELETE", "/api/v1/prompt-blocks/{block_id}"),
    ("GET", "/api/v1/prompt-blocks/{block_id}/versions"),
    ("GET", "/api/v1/webhooks"),
    ("POST", "/api/v1/webhooks"),
    ("GET", "/api/v1/webhooks/{webhook_id}"),
    ("PATCH", "/api/v1/webhooks/{webhook_id}"),
    ("DELETE", "/api/v1/webhooks/{webhook_id}"),
    ("POST", "/api/v1/webhooks/{webhook_id}/rotate-secret"),
    ("POST", "/api/v1/webhooks/{webhook_id}/test"),
    ("GET", "/api/v1/webhooks/{webhook_id}/deliveries"),
    ("POST", "/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry"),
    ("GET", "/api/v1/events"),
    ("GET", "/api/v1/events/{event_id}"),
    ("GET", "/api/v1/billing/balance"),
    ("GET", "/api/v1/billing/transactions"),
    ("POST", "/api/v1/billing/credits"),
    ("POST", "/api/v1/billing/reset"),
    ("GET", "/api/v1/contacts"),
    ("POST", "/api/v1/contacts"),
    ("GET", "/api/v1/contacts/{contact_id}"),
    ("PATCH", "/api/v1/contacts/{contact_id}"),
    ("DELETE", "/api/v1/contacts/{contact_id}"),
    ("POST", "/api/v1/contacts/merge"),
    ("POST", "/api/v1/contacts/import"),
    ("GET", "/api/v1/channels"),
    ("POST", "/api/v1/channels"),
    ("GET", "/api/v1/channels/{channel_id}"),
    ("PATCH", "/api/v1/channels/{channel_id}"),
    ("DELETE", "/api/v1/channels/{channel_id}"),
    ("POST", "/api/v1/channels/{channel_id}/inbound"),
    ("POST", "/api/v1/contacts/discover"),
    ("GET", "/api/v1/conversations"),
    ("GET", "/api/v1/conversations/{conversation_id}"),
    ("PATCH", "/api/v1/conversations/{conversation_id}"),
    ("POST", "/api/v1/conversations/{conversation_id}/read"),
    ("GET", "/api/v1/conversations/{conversation_id}/messages"),
    ("POST", "/api/v1/channels/{channel_id}/status"),
    ("POST", "/api/v1/messages"),
    ("GET", "/api/v1/messages/{message_id}"),
    ("POST", "/api/v1/conversations/{conversation_id}/handoff"),
    ("GET", "/api/v1/handoffs"),
    ("GET", "/api/v1/handoffs/{handoff_id}"),
    ("POST", "/api/v1/handoffs/{handoff_id}/accept"),
    ("POST", "/api/v1/handoffs/{handoff_id}/complete"),
    ("POST", "/api/v1/handoffs/{handoff_id}/cancel"),
    ("GET", "/webchat/widget.js"),
    ("GET", "/webchat/{public_id}"),
    ("GET", "/files/{key}"),
    ("GET", "/api/v1/calls"),
    ("POST", "/api/v1/calls"),
    ("GET", "/api/v1/calls/{call_id}"),
    ("POST", "/api/v1/calls/{call_id}/hangup"),
    ("GET", "/api/v1/calls/{call_id}/transcript"),
    ("GET", "/api/v1/calls/{call_id}/recording"),
    ("GET", "/api/v1/search"),
];

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in ["get", "post", "put", "patch", "delete"] {
            if item.get(m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

both_backends! {
    async fn health_and_readiness_answer(backend) {
        let app = TestApp::spawn(backend).await;
        let r = app.send(Method::GET, "/healthz", None, None, &[]).await;
        assert_eq!((r.status, r.body.clone()), (200, json!({"status": "ok"})));
        let r = app.send(Method::GET, "/readyz", None, None, &[]).await;
        assert_eq!((r.status, r.body.clone()), (200, json!({"status": "ready"})));
        app.db.close().await;
        let r = app.send(Method::GET, "/readyz", None, None, &[]).await;
        assert_eq!(r.status, 503);
        assert_eq!(r.body, json!({"detail": "The database is unavailable"}));
    }

    async fn the_openapi_document_matches_the_router(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let doc = app.send(Method::GET, "/openapi.json", None, None, &[]).await.body;
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let expected: BTreeSet<(String, String)> = ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
        assert_eq!(documented(&doc), expected, "the OpenAPI document and the route list differ");
        // Every documented route is served: no generic 404 or 405 from the router.
        for (method, path) in &expected {
            let concrete = path.replace("{agent_id}", "1").replace("{trigger_id}", "1").replace("{block_id}", "1").replace("{key_id}", "1")
                .replace("{webhook_id}", "1")
                .replace("{delivery_id}", "1")
                .replace("{event_id}", "evt_x");
            let r = app.send(Method::from_bytes(method.as_bytes()).unwrap(), &concrete, Some(&ws.live), Some(json!({})), &[]).await;
            assert_ne!(r.body, json!({"detail": "Not Found"}), "{method} {path} is documented but not routed");
            assert_ne!(r.status, 405, "{method} {path} is documented but not routed");
        }
        // Authenticated operations document their shared errors.
        let op = &doc["paths"]["/api/v1/agents"]["post"];
        for code in ["201", "400", "401", "409", "413", "422", "429", "500"] {
            assert!(op["responses"].get(code).is_some(), "POST /api/v1/agents lacks {code}");
        }
        assert!(doc["components"]["securitySchemes"]["api_key"].is_object());
        assert!(doc["components"]["schemas"]["Agent"]["properties"]["knowledge_collection_count"].is_object());
    }

    async fn cached_lists_reflect_every_write_on_every_instance(backend) {
        let one = TestApp::spawn(backend).await;
        let two = one.sibling().await;
        let ws = one.workspace("A").await;
        for app in [&one, &two] {
            assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0);
        }
        let a = one.create_agent(&ws.live, json!({"name": "First"})).await;
        // The instance that did not see the write must not serve its cached page.
        assert_eq!(two.get(&ws.live, "/api/v1/agents").await.body["total"], 1);
        two.patch(&ws.live, &format!("/api/v1/agents/{}", a["id"]), json!({"name": "Renamed"})).await;
        assert_eq!(one.get(&ws.live, "/api/v1/agents").await.body["agents"][0]["name"], "Renamed");
        two.post(&ws.live, &format!("/api/v1/agents/{}/triggers", a["id"]), json!({"event": "call.inbound"})).await;
        assert_eq!(one.get(&ws.live, "/api/v1/agents").await.body["agents"][0]["trigger_count"], 1);
        // Pages of one query string are cached apart from another's, and per scope.
        assert_eq!(one.get(&ws.live, "/api/v1/agents?limit=1&offset=1").await.body["count"], 0);
        assert_eq!(one.get(&ws.test, "/api/v1/agents").await.body["total"], 0);
        let b = two.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "P", "content": "x"})).await.body;
        assert_eq!(one.get(&ws.live, "/api/v1/prompt-blocks").await.body["total"], 1);
        two.delete(&ws.live, &format!("/api/v1/prompt-blocks/{}", b["id"])).await;
        assert_eq!(one.get(&ws.live, "/api/v1/prompt-blocks").await.body["total"], 0);
    }

    async fn the_docs_page_is_served(backend) {
        let app = TestApp::spawn(backend).await;
        let r = app.send(Method::GET, "/docs", None, None, &[]).await;
        assert_eq!(r.status, 200);
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
        assert!(r.text.contains("/openapi.json"));
    }

    async fn rate_limits_answer_429_with_headers_on_every_response(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.rate_limit.per_second = 1.0;
            s.rate_limit.burst = 3;
        }).await;
        let ws = app.workspace("A").await;
        let mut remaining = Vec::new();
        for _ in 0..3 {
            let r = app.get(&ws.live, "/api/v1/agents").await;
            assert_eq!(r.status, 200);
            assert_eq!(r.header("ratelimit-policy"), Some("\"default\";q=3;w=3"));
            remaining.push(r.header("ratelimit").unwrap().to_owned());
        }
        assert!(remaining[0].starts_with("\"default\";r=2;t="), "{remaining:?}");
        assert!(remaining[2].starts_with("\"default\";r=0;t="), "{remaining:?}");
        let r = app.get(&ws.live, "/api/v1/agents").await;
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert_eq!(r.body, json!({"detail": "Rate limit exceeded, retry in 1 s"}));
        assert!(r.header("ratelimit-policy").is_some() && r.header("x-request-id").is_some());
        // Another key has its own quota.
        assert_eq!(app.get(&ws.test, "/api/v1/agents").await.status, 200);
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.status, 200);
    }
}
