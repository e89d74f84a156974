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
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/{file}"),
    ("POST", "/api/v1/auth/login"),
    ("POST", "/api/v1/auth/refresh"),
    ("POST", "/api/v1/auth/logout"),
    ("GET", "/api/v1/auth/me"),
    ("POST", "/api/v1/auth/workspace"),
    ("POST", "/api/v1/auth/invitations/lookup"),
    ("POST", "/api/v1/auth/invitations/accept"),
    ("POST", "/api/v1/auth/password-reset"),
    ("GET", "/api/v1/event-types"),
    ("GET", "/api/v1/overview"),
    ("GET", "/api/v1/channel-types"),
    ("GET", "/api/v1/billing/usage"),
    ("POST", "/api/v1/demo"),
    ("GET", "/webchat/{public_id}/preview"),
    ("GET", "/api/v1/members"),
    ("PATCH", "/api/v1/members/{user_id}"),
    ("DELETE", "/api/v1/members/{user_id}"),
    ("GET", "/api/v1/invitations"),
    ("POST", "/api/v1/invitations"),
    ("DELETE", "/api/v1/invitations/{invitation_id}"),
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
    ("GET", "/api/v1/stream"),
    ("GET", "/api/v1/billing/balance"),
    ("GET", "/api/v1/billing/balances"),
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
    ("POST", "/api/v1/conversations/{conversation_id}/assign"),
    ("POST", "/api/v1/conversations/{conversation_id}/give-back"),
    ("GET", "/api/v1/conversations/{conversation_id}/notes"),
    ("POST", "/api/v1/conversations/{conversation_id}/notes"),
    ("PUT", "/api/v1/conversations/{conversation_id}/labels"),
    ("GET", "/api/v1/labels"),
    ("POST", "/api/v1/labels"),
    ("GET", "/api/v1/labels/{label_id}"),
    ("PATCH", "/api/v1/labels/{label_id}"),
    ("DELETE", "/api/v1/labels/{label_id}"),
    ("GET", "/api/v1/inbox/conversations"),
    ("GET", "/api/v1/presence"),
    ("GET", "/api/v1/notifications"),
    ("POST", "/api/v1/notifications/{notification_id}/read"),
    ("POST", "/api/v1/notifications/read-all"),
    ("POST", "/api/v1/presence"),
    ("GET", "/api/v1/canned-responses"),
    ("POST", "/api/v1/canned-responses"),
    ("GET", "/api/v1/canned-responses/{canned_response_id}"),
    ("PATCH", "/api/v1/canned-responses/{canned_response_id}"),
    ("DELETE", "/api/v1/canned-responses/{canned_response_id}"),
    ("GET", "/api/v1/inbox/summary"),
    ("POST", "/api/v1/conversations/bulk"),
    ("POST", "/api/v1/conversations/{conversation_id}/reply-preview"),
    ("GET", "/api/v1/channels/{channel_id}/templates"),
    ("GET", "/api/v1/handoffs"),
    ("GET", "/api/v1/handoffs/{handoff_id}"),
    ("POST", "/api/v1/handoffs/{handoff_id}/accept"),
    ("POST", "/api/v1/handoffs/{handoff_id}/complete"),
    ("POST", "/api/v1/handoffs/{handoff_id}/cancel"),
    ("GET", "/webchat/widget.js"),
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/.well-known/oauth-authorization-server"),
    ("GET", "/.well-known/openid-configuration"),
    ("POST", "/oauth/register"),
    ("GET", "/oauth/authorize"),
    ("POST", "/oauth/authorize"),
    ("POST", "/oauth/login"),
    ("POST", "/oauth/token"),
    ("POST", "/oauth/revoke"),
    ("GET", "/api/v1/oauth/grants"),
    ("GET", "/api/v1/speech-engines"),
    ("DELETE", "/api/v1/oauth/grants/{grant_id}"),
    ("GET", "/webchat/{public_id}"),
    ("GET", "/files/{key}"),
    ("POST", "/hooks/twilio/voice"),
    ("POST", "/hooks/twilio/status"),
    ("GET", "/hooks/twilio/media"),
    ("GET", "/calls/web"),
    ("POST", "/hooks/twilio/{public_id}/inbound"),
    ("POST", "/api/v1/channels/{channel_id}/check"),
    ("POST", "/hooks/twilio/{public_id}/status"),
    ("POST", "/hooks/telegram/{public_id}"),
    ("POST", "/hooks/email/{public_id}"),
    ("GET", "/api/v1/calls"),
    ("POST", "/api/v1/calls"),
    ("GET", "/api/v1/calls/{call_id}"),
    ("POST", "/api/v1/calls/{call_id}/hangup"),
    ("POST", "/api/v1/calls/{call_id}/analysis"),
    ("POST", "/api/v1/conversations/{conversation_id}/analysis"),
    ("GET", "/api/v1/conversations/{conversation_id}/analysis"),
    ("GET", "/api/v1/calls/{call_id}/transcript"),
    ("GET", "/api/v1/calls/{call_id}/recording"),
    ("GET", "/api/v1/calls/{call_id}/recording/waveform"),
    ("GET", "/api/v1/search"),
    ("GET", "/api/v1/agent-runs"),
    ("GET", "/api/v1/agent-runs/{run_id}"),
    ("POST", "/api/v1/agents/{agent_id}/chat"),
    ("GET", "/api/v1/knowledge-collections"),
    ("POST", "/api/v1/knowledge-collections"),
    ("GET", "/api/v1/knowledge-collections/{collection_id}"),
    ("PATCH", "/api/v1/knowledge-collections/{collection_id}"),
    ("DELETE", "/api/v1/knowledge-collections/{collection_id}"),
    ("GET", "/api/v1/knowledge-collections/{collection_id}/documents"),
    ("POST", "/api/v1/knowledge-collections/{collection_id}/documents"),
    ("GET", "/api/v1/knowledge-collections/{collection_id}/documents/{document_id}"),
    ("DELETE", "/api/v1/knowledge-collections/{collection_id}/documents/{document_id}"),
    ("GET", "/api/v1/knowledge-collections/{collection_id}/query"),
    ("GET", "/api/v1/text-engines"),
];

/// The examples of every JSON request body, by (method, path).
fn request_examples(doc: &Value) -> std::collections::BTreeMap<(String, String), Vec<Value>> {
    let resolve = |schema: &Value| {
        let mut s = schema.clone();
        while let Some(r) = s["$ref"].as_str().map(str::to_owned) {
            s = doc["components"]["schemas"][r.rsplit('/').next().unwrap()].clone();
        }
        s
    };
    let mut out = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            if schema.is_null() {
                continue;
            }
            let schema = resolve(schema);
            let mut found: Vec<Value> = schema["examples"].as_array().cloned().unwrap_or_default();
            if let Some(e) = schema.get("example") {
                found.push(e.clone());
            }
            if !found.is_empty() {
                out.insert((method.to_uppercase(), path.clone()), found);
            }
        }
    }
    out
}

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
        assert_eq!(r.body, json!({"detail": "The database is unavailable: this instance has closed its connections (it is stopping)"}));
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
                .replace("{grant_id}", "1")
                .replace("{user_id}", "1")
                .replace("{invitation_id}", "1")
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
        assert!(r.text.contains("<base href=\"/docs/\">") && r.text.contains("swagger-ui"), "{}", r.text);
        // It shares the dashboard's origin: scripts of its own only, never framed.
        let csp = r.header("content-security-policy").unwrap();
        assert!(csp.contains("script-src 'self';") && csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        let init = app.send(Method::GET, "/docs/swagger-initializer.js", None, None, &[]).await;
        assert_eq!(init.status, 200);
        assert!(init.text.contains("\"/openapi.json\""), "{}", init.text);
        // A pasted key is not kept in localStorage.
        assert!(!init.text.contains("\"persistAuthorization\": true") && !init.text.contains("\"persistAuthorization\":true"), "{}", init.text);
        for file in ["swagger-ui.css", "swagger-ui-bundle.js"] {
            let r = app.send(Method::GET, &format!("/docs/{file}"), None, None, &[]).await;
            assert_eq!(r.status, 200, "{file}");
            assert!(r.text.len() > 10_000, "{file} is {} bytes", r.text.len());
        }
        let r = app.send(Method::GET, "/docs/nope.js", None, None, &[]).await;
        assert_eq!((r.status, r.body.clone()), (404, json!({"detail": "File nope.js not found"})));
    }

    async fn every_documented_request_example_is_accepted(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let owner = app.user("owner@parley.local", "a long enough password", ws.id, parley_domain::user::Role::Owner).await;
        let token = app.token("owner@parley.local", "a long enough password").await;
        // The examples name ids 1 (and contact 2): the fixtures they refer to.
        assert_eq!((ws.id, owner), (1, 1));
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await;
        assert_eq!(agent["id"], 1);
        let rx = crate::receiver::Receiver::start().await;
        let (channel, secret) = crate::messages::sending_channel(&app, &ws.live, &rx.url).await;
        assert_eq!(channel, 1);
        let conversation = crate::messages::conversation_with(&app, channel, &secret, "user-1").await;
        assert_eq!(conversation, 1);
        let block = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Base", "content": "x"})).await;
        let trigger = app.post(&ws.live, "/api/v1/agents/1/triggers", json!({"event": "call.inbound"})).await;
        assert_eq!((block.body["id"].clone(), trigger.body["id"].clone()), (json!(1), json!(1)));

        let doc = app.send(Method::GET, "/openapi.json", None, None, &[]).await.body;
        let examples = request_examples(&doc);
        // Each operation with an example, in an order where each finds what it
        // needs: (method, documented path, path with ids, credential).
        enum Cred { Key, Session, Signed }
        let plan: &[(&str, &str, &str, Cred)] = &[
            ("POST", "/api/v1/auth/login", "/api/v1/auth/login", Cred::Key),
            ("POST", "/api/v1/api-keys", "/api/v1/api-keys", Cred::Session),
            ("POST", "/api/v1/invitations", "/api/v1/invitations", Cred::Session),
            ("POST", "/api/v1/billing/credits", "/api/v1/billing/credits", Cred::Session),
            ("POST", "/api/v1/agents", "/api/v1/agents", Cred::Key),
            ("PATCH", "/api/v1/agents/{agent_id}", "/api/v1/agents/2", Cred::Key),
            ("POST", "/api/v1/agents/{agent_id}/triggers", "/api/v1/agents/1/triggers", Cred::Key),
            ("PATCH", "/api/v1/agents/{agent_id}/triggers/{trigger_id}", "/api/v1/agents/1/triggers/1", Cred::Key),
            ("POST", "/api/v1/prompt-blocks", "/api/v1/prompt-blocks", Cred::Key),
            ("PATCH", "/api/v1/prompt-blocks/{block_id}", "/api/v1/prompt-blocks/2", Cred::Key),
            ("POST", "/api/v1/agents/{agent_id}/prompt/preview", "/api/v1/agents/1/prompt/preview", Cred::Key),
            ("POST", "/api/v1/agents/{agent_id}/chat", "/api/v1/agents/1/chat", Cred::Key),
            ("POST", "/api/v1/knowledge-collections", "/api/v1/knowledge-collections", Cred::Key),
            ("PATCH", "/api/v1/knowledge-collections/{collection_id}", "/api/v1/knowledge-collections/1", Cred::Key),
            ("POST", "/api/v1/knowledge-collections/{collection_id}/documents", "/api/v1/knowledge-collections/1/documents", Cred::Key),
            ("POST", "/api/v1/channels", "/api/v1/channels", Cred::Key),
            ("PATCH", "/api/v1/channels/{channel_id}", "/api/v1/channels/2", Cred::Key),
            ("POST", "/api/v1/channels/{channel_id}/inbound", "/api/v1/channels/1/inbound", Cred::Signed),
            ("POST", "/api/v1/contacts", "/api/v1/contacts", Cred::Key),
            ("PATCH", "/api/v1/contacts/{contact_id}", "/api/v1/contacts/1", Cred::Key),
            ("POST", "/api/v1/contacts/discover", "/api/v1/contacts/discover", Cred::Key),
            ("POST", "/api/v1/contacts/merge", "/api/v1/contacts/merge", Cred::Key),
            ("POST", "/api/v1/messages", "/api/v1/messages", Cred::Key),
            ("PATCH", "/api/v1/conversations/{conversation_id}", "/api/v1/conversations/1", Cred::Key),
            ("POST", "/api/v1/conversations/bulk", "/api/v1/conversations/bulk", Cred::Key),
            ("POST", "/api/v1/conversations/{conversation_id}/reply-preview", "/api/v1/conversations/1/reply-preview", Cred::Key),
            ("POST", "/api/v1/conversations/{conversation_id}/handoff", "/api/v1/conversations/1/handoff", Cred::Key),
            ("POST", "/api/v1/handoffs/{handoff_id}/accept", "/api/v1/handoffs/1/accept", Cred::Key),
            ("POST", "/api/v1/handoffs/{handoff_id}/complete", "/api/v1/handoffs/1/complete", Cred::Key),
            ("POST", "/api/v1/conversations/{conversation_id}/assign", "/api/v1/conversations/1/assign", Cred::Key),
            ("POST", "/api/v1/conversations/{conversation_id}/give-back", "/api/v1/conversations/1/give-back", Cred::Key),
            ("POST", "/api/v1/conversations/{conversation_id}/notes", "/api/v1/conversations/1/notes", Cred::Session),
            ("POST", "/api/v1/labels", "/api/v1/labels", Cred::Key),
            ("PATCH", "/api/v1/labels/{label_id}", "/api/v1/labels/1", Cred::Key),
            ("PUT", "/api/v1/conversations/{conversation_id}/labels", "/api/v1/conversations/1/labels", Cred::Key),
            ("POST", "/api/v1/canned-responses", "/api/v1/canned-responses", Cred::Key),
            ("POST", "/api/v1/presence", "/api/v1/presence", Cred::Session),
            ("PATCH", "/api/v1/canned-responses/{canned_response_id}", "/api/v1/canned-responses/1", Cred::Key),
            ("POST", "/api/v1/calls", "/api/v1/calls", Cred::Key),
            ("POST", "/api/v1/webhooks", "/api/v1/webhooks", Cred::Key),
            ("PATCH", "/api/v1/webhooks/{webhook_id}", "/api/v1/webhooks/1", Cred::Key),
            ("PATCH", "/api/v1/api-keys/{key_id}", "/api/v1/api-keys/3", Cred::Session),
            ("POST", "/api/v1/auth/workspace", "/api/v1/auth/workspace", Cred::Session),
        ];
        let planned: BTreeSet<(String, String)> = plan.iter().map(|(m, p, _, _)| (m.to_string(), p.to_string())).collect();
        let documented: BTreeSet<(String, String)> = examples.keys().cloned().collect();
        assert_eq!(planned, documented, "every documented example has a place in the plan, and only those");
        for (method, path, concrete, cred) in plan {
            for example in &examples[&(method.to_string(), path.to_string())] {
                let m = Method::from_bytes(method.as_bytes()).unwrap();
                let idem = uuid();
                let r = match cred {
                    Cred::Key => app.send(m, concrete, Some(&ws.live), Some(example.clone()), &[("Idempotency-Key", &idem)]).await,
                    Cred::Session => app.bearer(m, concrete, &token, Some(example.clone())).await,
                    Cred::Signed => crate::conversations::inbound(&app, 1, &secret, example.clone()).await,
                };
                assert!((200..300).contains(&r.status), "{method} {path} refused its own example {example}: {} {}", r.status, r.text);
            }
        }
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

/// Sends a request with a wrong key as if forwarded for `chain` (the
/// `X-Forwarded-For` a proxy would send), and gives its status.
async fn refused_as(app: &TestApp, chain: &str) -> u16 {
    app.send(Method::GET, "/api/v1/agents", Some("parley_live_wrong"), None, &[("x-forwarded-for", chain)]).await.status
}

/// Behind a trusted proxy (HAProxy adds `X-Forwarded-For`), per-IP limits
/// count each client apart; the header is believed only from a trusted
/// peer, and only its addresses the trusted proxies added: a client cannot
/// choose its bucket by writing one in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_ip_limits_count_the_forwarded_client_only_behind_a_trusted_proxy() {
    let limited = |s: &mut parley_server::Settings| s.rate_limit.auth_failures_per_minute = 2;
    let app = TestApp::spawn_with(Backend::Sqlite, move |s| {
        limited(s);
        s.proxy.trusted = vec!["127.0.0.0/8".into(), "10.1.0.2".into()];
    })
    .await;
    assert_eq!((refused_as(&app, "203.0.113.5").await, refused_as(&app, "203.0.113.5").await), (401, 401));
    assert_eq!(refused_as(&app, "203.0.113.5").await, 429, "the third failure of one client");
    // Another client behind the same proxy has its own quota…
    assert_eq!(refused_as(&app, "203.0.113.6").await, 401);
    // …and one that writes an address in is counted by the address the
    // proxy saw (the rightmost one not a trusted proxy's).
    assert_eq!(refused_as(&app, "198.51.100.77, 203.0.113.5").await, 429);
    assert_eq!(refused_as(&app, "203.0.113.6, 10.1.0.2").await, 401, "a trusted hop is skipped");
    assert_eq!(refused_as(&app, "203.0.113.6, 10.1.0.2").await, 429);

    // Without trusted proxies the header means nothing: one peer, one quota.
    let app = TestApp::spawn_with(Backend::Sqlite, limited).await;
    assert_eq!((refused_as(&app, "203.0.113.5").await, refused_as(&app, "203.0.113.6").await), (401, 401));
    assert_eq!(refused_as(&app, "203.0.113.7").await, 429);
}

#[test]
fn a_trusted_proxy_that_is_not_an_address_is_refused_at_start() {
    let err = refused_configuration("[proxy]\ntrusted = [\"10.0.0.0/33\"]\n");
    assert!(err.contains("proxy.trusted: `10.0.0.0/33`"), "{err}");
}

/// The reference page in a real browser: Swagger UI renders the document
/// (title, every operation, markdown as HTML, request schemas) and its
/// console answers a request. A blank page, raw markdown or a missing
/// asset fails it; its screenshot must hold a rendered page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_renders_in_chromium() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    let shot = std::env::temp_dir().join(format!("parley-docs-{}.png", uuid()));
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(90),
        tokio::process::Command::new("node")
            .arg(format!("{dir}/docs.mjs"))
            .arg(&app.base)
            .arg(&shot)
            .current_dir(dir)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser finished")
    .expect("node runs (see scripts/test for the browser test's needs)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = stdout.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(lines, ["TITLE", "MARKDOWN", "OPERATIONS", "SCHEMA", "CONSOLE", "SCREENSHOT"]);
    // A rendered page compresses far worse than a blank one (a blank 1280×1600 PNG is a few KB).
    let png = std::fs::read(&shot).expect("the screenshot was saved");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 60_000, "screenshot of {} bytes", png.len());
    let _ = std::fs::remove_file(&shot);
}
