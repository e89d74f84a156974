//! The seed's rule 2: another workspace's (or mode's) resource answers 404,
//! byte for byte like a missing one, on every route that takes an id.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

both_backends! {
    async fn every_id_route_answers_404_across_workspaces_and_modes(backend) {
        let app = TestApp::spawn(backend).await;
        let owner = app.workspace("Owner").await;
        let stranger = app.workspace("Stranger").await;
        let block = app.post(&owner.live, "/api/v1/prompt-blocks", json!({"name": "Persona", "content": "Hi {{name}}", "variables": ["name"]})).await.body;
        let agent = app.create_agent(&owner.live, json!({"name": "Private", "prompt_block_ids": [block["id"]]})).await;
        let trigger = app.post(&owner.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "call.inbound"})).await.body;
        let (a, t, b) = (agent["id"].as_i64().unwrap(), trigger["id"].as_i64().unwrap(), block["id"].as_i64().unwrap());
        let contact = app.post(&owner.live, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "+14155550100"})).await.body;
        let other_contact = app.post(&owner.live, "/api/v1/contacts", json!({"display_name": "Bo"})).await.body;
        let (c, c2) = (contact["id"].as_i64().unwrap(), other_contact["id"].as_i64().unwrap());
        let channel = app.post(&owner.live, "/api/v1/channels", json!({"type": "webchat", "name": "Site"})).await.body;
        let ch = channel["id"].as_i64().unwrap();
        let (api, secret) = crate::conversations::api_channel(&app, &owner.live).await;
        let received = crate::conversations::inbound(&app, api, &secret, json!({"from": "u-1", "text": "Hi", "external_id": "e-1"})).await.body;
        let (conv, msg) = (received["conversation_id"].as_i64().unwrap(), received["id"].as_i64().unwrap());
        let rx = crate::receiver::Receiver::start().await;
        let hook = app.post(&owner.live, "/api/v1/webhooks", json!({"url": rx.url, "events": ["*"]})).await.body;
        let w = hook["id"].as_i64().unwrap();
        app.post(&owner.live, &format!("/api/v1/webhooks/{w}/test"), json!({})).await;
        rx.wait_for(1, std::time::Duration::from_secs(10)).await;
        let attempt = loop {
            let items = app.get(&owner.live, &format!("/api/v1/webhooks/{w}/deliveries")).await.body["items"].clone();
            if let Some(first) = items.get(0) { break first["id"].as_i64().unwrap(); }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        let event = app.get(&owner.live, "/api/v1/events?type=agent.created").await.body["items"][0]["id"].as_str().unwrap().to_owned();

        // (method, path, body, the 404 detail a missing resource would give)
        let routes: Vec<(Method, String, Option<Value>, String)> = vec![
            (Method::GET, format!("/api/v1/agents/{a}"), None, format!("Agent {a} not found")),
            (Method::PATCH, format!("/api/v1/agents/{a}"), Some(json!({"name": "Mine"})), format!("Agent {a} not found")),
            (Method::DELETE, format!("/api/v1/agents/{a}"), None, format!("Agent {a} not found")),
            (Method::GET, format!("/api/v1/agents/{a}/triggers"), None, format!("Agent {a} not found")),
            (Method::POST, format!("/api/v1/agents/{a}/triggers"), Some(json!({"event": "call.inbound"})), format!("Agent {a} not found")),
            (Method::GET, format!("/api/v1/agents/{a}/triggers/{t}"), None, format!("Agent {a} not found")),
            (Method::PATCH, format!("/api/v1/agents/{a}/triggers/{t}"), Some(json!({"enabled": false})), format!("Agent {a} not found")),
            (Method::DELETE, format!("/api/v1/agents/{a}/triggers/{t}"), None, format!("Agent {a} not found")),
            (Method::POST, format!("/api/v1/agents/{a}/prompt/preview"), Some(json!({"variables": {"name": "x"}})), format!("Agent {a} not found")),
            (Method::GET, format!("/api/v1/prompt-blocks/{b}"), None, format!("Prompt block {b} not found")),
            (Method::PATCH, format!("/api/v1/prompt-blocks/{b}"), Some(json!({"content": "Bye"})), format!("Prompt block {b} not found")),
            (Method::DELETE, format!("/api/v1/prompt-blocks/{b}"), None, format!("Prompt block {b} not found")),
            (Method::GET, format!("/api/v1/prompt-blocks/{b}/versions"), None, format!("Prompt block {b} not found")),
            (Method::GET, format!("/api/v1/webhooks/{w}"), None, format!("Webhook {w} not found")),
            (Method::PATCH, format!("/api/v1/webhooks/{w}"), Some(json!({"enabled": false})), format!("Webhook {w} not found")),
            (Method::DELETE, format!("/api/v1/webhooks/{w}"), None, format!("Webhook {w} not found")),
            (Method::POST, format!("/api/v1/webhooks/{w}/rotate-secret"), None, format!("Webhook {w} not found")),
            (Method::POST, format!("/api/v1/webhooks/{w}/test"), None, format!("Webhook {w} not found")),
            (Method::GET, format!("/api/v1/webhooks/{w}/deliveries"), None, format!("Webhook {w} not found")),
            (Method::POST, format!("/api/v1/webhooks/{w}/deliveries/{attempt}/retry"), None, format!("Webhook {w} not found")),
            (Method::GET, format!("/api/v1/events/{event}"), None, format!("Event {event} not found")),
            (Method::GET, format!("/api/v1/contacts/{c}"), None, format!("Contact {c} not found")),
            (Method::PATCH, format!("/api/v1/contacts/{c}"), Some(json!({"notes": "mine"})), format!("Contact {c} not found")),
            (Method::DELETE, format!("/api/v1/contacts/{c}"), None, format!("Contact {c} not found")),
            (Method::GET, format!("/api/v1/channels/{ch}"), None, format!("Channel {ch} not found")),
            (Method::PATCH, format!("/api/v1/channels/{ch}"), Some(json!({"name": "Mine"})), format!("Channel {ch} not found")),
            (Method::DELETE, format!("/api/v1/channels/{ch}"), None, format!("Channel {ch} not found")),
            (Method::GET, format!("/api/v1/conversations/{conv}"), None, format!("Conversation {conv} not found")),
            (Method::PATCH, format!("/api/v1/conversations/{conv}"), Some(json!({"status": "closed"})), format!("Conversation {conv} not found")),
            (Method::POST, format!("/api/v1/conversations/{conv}/read"), None, format!("Conversation {conv} not found")),
            (Method::GET, format!("/api/v1/conversations/{conv}/messages"), None, format!("Conversation {conv} not found")),
            (Method::POST, "/api/v1/messages".into(), Some(json!({"conversation_id": conv, "text": "Mine"})), format!("Conversation {conv} not found")),
            (Method::GET, format!("/api/v1/messages/{msg}"), None, format!("Message {msg} not found")),
            (Method::POST, "/api/v1/contacts/merge".into(), Some(json!({"primary_id": c, "duplicate_id": c2})), format!("Contact {c} not found")),
        ];
        for (method, path, body, detail) in &routes {
            for (who, key) in [("other workspace", &stranger.live), ("other mode", &owner.test)] {
                let r = app.send(method.clone(), path, Some(key), body.clone(), &[]).await;
                assert_eq!(r.status, 404, "{method} {path} as {who}: {}", r.text);
                assert_eq!(r.body, json!({"detail": detail}), "{method} {path} as {who}");
            }
        }
        // A missing id gives the same shape of answer.
        let r = app.get(&owner.live, "/api/v1/agents/999999").await;
        assert_eq!(r.body, json!({"detail": "Agent 999999 not found"}));
        let r = app.get(&owner.live, &format!("/api/v1/agents/{a}/triggers/999999")).await;
        assert_eq!(r.body, json!({"detail": "Trigger 999999 not found"}));

        // Nothing the strangers tried changed the owner's data.
        let now = app.get(&owner.live, &format!("/api/v1/agents/{a}")).await.body;
        assert_eq!(now["name"], "Private");
        assert_eq!(now["status"], "active");
        assert_eq!(now["trigger_count"], 1);
        assert_eq!(app.get(&owner.live, &format!("/api/v1/prompt-blocks/{b}")).await.body["version"], 1);
        let hook_now = app.get(&owner.live, &format!("/api/v1/webhooks/{w}")).await.body;
        assert_eq!((hook_now["status"].clone(), hook_now["updated_at"].clone()), (json!("active"), hook["updated_at"].clone()));
        assert_eq!(rx.received().len(), 1, "no stranger sent or retried a delivery");
        let contact_now = app.get(&owner.live, &format!("/api/v1/contacts/{c}")).await.body;
        assert_eq!(contact_now, contact);
        assert_eq!(app.get(&owner.live, &format!("/api/v1/contacts/{c2}")).await.status, 200);
        assert_eq!(app.get(&owner.live, &format!("/api/v1/channels/{ch}")).await.body, channel);
        let conv_now = app.get(&owner.live, &format!("/api/v1/conversations/{conv}")).await.body;
        assert_eq!((conv_now["status"].clone(), conv_now["unread_count"].clone()), (json!("open"), json!(1)));
        assert_eq!(app.get(&owner.live, &format!("/api/v1/conversations/{conv}/messages")).await.body["total"], 1);
        // And lists never show foreign rows.
        assert_eq!(app.get(&stranger.live, "/api/v1/contacts?q=ana").await.body["total"], 0);
        assert_eq!(app.get(&owner.test, "/api/v1/contacts").await.body["total"], 0);
        // Uniqueness is per workspace and mode: the same number is free elsewhere.
        assert_eq!(app.post(&stranger.live, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "+14155550100"})).await.status, 201);
        assert_eq!(app.post(&owner.test, "/api/v1/contacts", json!({"display_name": "Ana", "phone": "+14155550100"})).await.status, 201);
        assert_eq!(app.get(&stranger.live, "/api/v1/agents").await.body["total"], 0);
        assert_eq!(app.get(&owner.test, "/api/v1/prompt-blocks").await.body["total"], 0);
    }
}
