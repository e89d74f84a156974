//! Inbound traffic on the api channel, conversations, messages, and the
//! contact discovery and merge that build on them.

use parley_domain::Mode;
use parley_events::signing::WebhookSecret;
use serde_json::{Value, json};

use crate::support::*;

/// An api channel: (id, its signing secret).
pub(crate) async fn api_channel(app: &TestApp, key: &str) -> (i64, WebhookSecret) {
    let r = app.post(key, "/api/v1/channels", json!({"type": "api", "name": "Backend"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    (r.body["id"].as_i64().unwrap(), WebhookSecret::parse(r.body["secret"].as_str().unwrap()).unwrap())
}

/// POSTs `body` to the channel's inbound route, signed with `secret` at `timestamp`.
pub(crate) async fn inbound_at(
    app: &TestApp,
    channel: i64,
    secret: &WebhookSecret,
    body: &Value,
    timestamp: i64,
) -> Resp {
    let bytes = serde_json::to_vec(body).unwrap();
    let msg_id = format!("msg_{}", uuid());
    let signature = secret.sign(&msg_id, timestamp, &bytes);
    let r = app
        .client
        .post(app.url(&format!("/api/v1/channels/{channel}/inbound")))
        .header("content-type", "application/json")
        .header("webhook-id", msg_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(bytes)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

pub(crate) fn now_s() -> i64 {
    parley_domain::Timestamp::now().unix_micros() / 1_000_000
}

pub(crate) async fn inbound(app: &TestApp, channel: i64, secret: &WebhookSecret, body: Value) -> Resp {
    inbound_at(app, channel, secret, &body, now_s()).await
}

both_backends! {
    async fn the_api_channel_takes_signed_messages_once_each(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let body = json!({"from": "user-42", "text": "Hello\n**there**", "external_id": "m-1", "contact": {"display_name": "Ana"}});

        // Refused: wrong secret, stale timestamp, no signature.
        let r = inbound(&app, ch, &WebhookSecret::generate(), body.clone()).await;
        assert_eq!((r.status, r.body["detail"].clone()), (401, json!("Invalid signature: no signature matches")));
        let r = inbound_at(&app, ch, &secret, &body, now_s() - 600).await;
        assert_eq!(r.status, 401, "{}", r.text);
        let r = app.client.post(app.url(&format!("/api/v1/channels/{ch}/inbound"))).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(app.get(&ws.live, "/api/v1/conversations").await.body["total"], 0);

        let first = inbound(&app, ch, &secret, body.clone()).await;
        assert_eq!(first.status, 201, "{}", first.text);
        assert_eq!((first.body["direction"].clone(), first.body["status"].clone(), first.body["external_id"].clone()), (json!("inbound"), json!("received"), json!("m-1")));
        assert_eq!(first.body["author"]["type"], "contact");
        // The same external_id again: stored once, answered with the first message.
        let again = inbound(&app, ch, &secret, body.clone()).await;
        assert_eq!((again.status, again.body["id"].clone()), (200, first.body["id"].clone()));

        let list = app.get(&ws.live, "/api/v1/conversations").await.body;
        assert_eq!(list["total"], 1);
        let item = &list["items"][0];
        let mut keys: Vec<&str> = item.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["channel", "channel_ref", "created_at", "id", "kind", "last_message_preview", "last_message_ts", "title", "unread_count"]);
        assert_eq!((item["channel"].clone(), item["kind"].clone(), item["channel_ref"].clone(), item["title"].clone()), (json!("api"), json!("direct"), json!("api:user-42"), json!("Ana")));
        assert_eq!((item["last_message_preview"].clone(), item["unread_count"].clone()), (json!("Hello\n**there**"), json!(1)));

        // A second message joins the same conversation.
        let long = "x".repeat(300);
        assert_eq!(inbound(&app, ch, &secret, json!({"from": "user-42", "text": long, "external_id": "m-2"})).await.status, 201);
        let id = item["id"].as_i64().unwrap();
        let conv = app.get(&ws.live, &format!("/api/v1/conversations/{id}")).await.body;
        assert_eq!((conv["unread_count"].clone(), conv["status"].clone(), conv["handler"].clone()), (json!(2), json!("open"), json!("agent")));
        assert_eq!(conv["last_message_preview"].as_str().unwrap().len(), 140);
        assert!(conv["waiting_since"].is_string());
        let contact_id = conv["contact_id"].as_i64().unwrap();
        let contact = app.get(&ws.live, &format!("/api/v1/contacts/{contact_id}")).await.body;
        assert_eq!((contact["origin"].clone(), contact["identities"].clone()), (json!("discovered"), json!([{"channel": "api", "address": "user-42"}])));
        let messages = app.get(&ws.live, &format!("/api/v1/conversations/{id}/messages")).await.body;
        let ids: Vec<&str> = messages["items"].as_array().unwrap().iter().map(|m| m["external_id"].as_str().unwrap()).collect();
        assert_eq!((messages["total"].clone(), ids), (json!(2), vec!["m-1", "m-2"]));
        let newest = app.get(&ws.live, &format!("/api/v1/conversations/{id}/messages?order=desc&limit=1")).await.body;
        assert_eq!(newest["items"][0]["external_id"], "m-2");
        assert_eq!(app.events(ws.id, Mode::Live, "message.received").await.len(), 2);
        assert_eq!(app.events(ws.id, Mode::Live, "conversation.created").await.len(), 1);

        // Other workspaces and modes see none of it.
        let other = app.workspace("Other").await;
        assert_eq!(app.get(&other.live, &format!("/api/v1/conversations/{id}")).await.body, json!({"detail": format!("Conversation {id} not found")}));
        assert_eq!(app.get(&ws.test, &format!("/api/v1/conversations/{id}/messages")).await.status, 404);
        assert_eq!(app.get(&ws.test, "/api/v1/conversations").await.body["total"], 0);

        // A channel with conversations cannot be deleted (they would lose
        // their channel); it can be disabled.
        let r = app.delete(&ws.live, &format!("/api/v1/channels/{ch}")).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Channel {ch} has conversations; disable it instead"))));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/channels/{ch}")).await.status, 200);
        // A disabled channel refuses signed traffic. A webchat channel has no
        // inbound route and unknown ids have no secret: both answer like a
        // wrong signature, so the route reveals nothing (see hardening.rs).
        app.patch(&ws.live, &format!("/api/v1/channels/{ch}"), json!({"status": "disabled"})).await;
        let r = inbound(&app, ch, &secret, json!({"from": "user-42", "text": "hi", "external_id": "m-3"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (403, json!(format!("Channel {ch} is disabled"))));
        let webchat = app.post(&ws.live, "/api/v1/channels", json!({"type": "webchat", "name": "Site"})).await.body["id"].as_i64().unwrap();
        for id in [webchat, 999_999] {
            let r = inbound(&app, id, &secret, json!({"from": "x", "text": "hi", "external_id": "1"})).await;
            assert_eq!((r.status, r.body["detail"].clone()), (401, json!("Invalid signature: no signature matches")));
        }
    }

    async fn discovery_lists_unknown_senders_and_creates_their_contacts(backend) {
        let app = TestApp::spawn_with(backend, |s| s.contacts.auto_create = false).await;
        let ws = app.workspace("Acme").await;
        let (a, secret_a) = api_channel(&app, &ws.live).await;
        let (b, secret_b) = api_channel(&app, &ws.live).await;
        inbound(&app, a, &secret_a, json!({"from": "ana", "text": "hi", "external_id": "1", "contact": {"display_name": "Ana L"}})).await;
        inbound(&app, b, &secret_b, json!({"from": "ana", "text": "hi again", "external_id": "1"})).await;
        inbound(&app, a, &secret_a, json!({"from": "bo", "text": "yo", "external_id": "2"})).await;
        let known = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Cy", "identities": [{"channel": "api", "address": "cy"}]})).await.body;
        inbound(&app, a, &secret_a, json!({"from": "cy", "text": "hello", "external_id": "3"})).await;

        let r = app.post(&ws.live, "/api/v1/contacts/discover", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["total"], 2);
        let items = r.body["items"].as_array().unwrap();
        let ana = items.iter().find(|i| i["address"] == "ana").unwrap();
        assert_eq!((ana["channel"].clone(), ana["display_name_guess"].clone(), ana["conversation_count"].clone()), (json!("api"), json!("Ana L"), json!(2)));
        assert!(ana["last_seen_at"].is_string() && ana.get("contact_id").is_none());
        assert_eq!(app.get(&ws.live, "/api/v1/contacts").await.body["total"], 1, "listing creates nothing");

        let r = app.post(&ws.live, "/api/v1/contacts/discover", json!({"create": true})).await;
        assert_eq!(r.body["total"], 2);
        let created = app.get(&ws.live, "/api/v1/contacts?origin=discovered").await.body;
        assert_eq!(created["total"], 2);
        let names: Vec<&str> = created["items"].as_array().unwrap().iter().map(|c| c["display_name"].as_str().unwrap()).collect();
        assert!(names.contains(&"Ana L") && names.contains(&"bo"), "{names:?}");
        assert_eq!(app.post(&ws.live, "/api/v1/contacts/discover", json!({})).await.body, json!({"items": [], "total": 0}));
        // The conversations now name their contacts; the known sender kept hers.
        let convs = app.get(&ws.live, "/api/v1/conversations").await.body;
        for c in convs["items"].as_array().unwrap() {
            let full = app.get(&ws.live, &format!("/api/v1/conversations/{}", c["id"])).await.body;
            assert!(full["contact_id"].is_i64(), "{full}");
            if c["channel_ref"] == "api:cy" {
                assert_eq!(full["contact_id"], known["id"]);
            }
        }
        let r = app.post(&ws.live, "/api/v1/contacts/discover", json!({"create": "yes"})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("type_error.bool")));
    }

    async fn merging_and_deleting_contacts_carry_their_conversations(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        inbound(&app, ch, &secret, json!({"from": "ana-1", "text": "hi", "external_id": "1"})).await;
        let conv = app.get(&ws.live, "/api/v1/conversations").await.body["items"][0]["id"].as_i64().unwrap();
        let duplicate = app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["contact_id"].as_i64().unwrap();
        let primary = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana"})).await.body["id"].as_i64().unwrap();
        let r = app.post(&ws.live, "/api/v1/contacts/merge", json!({"primary_id": primary, "duplicate_id": duplicate})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["identities"], json!([{"channel": "api", "address": "ana-1"}]));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["contact_id"], primary);
        // The next message from that address finds the primary.
        inbound(&app, ch, &secret, json!({"from": "ana-1", "text": "again", "external_id": "2"})).await;
        let messages = app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body;
        assert_eq!(messages["items"][1]["author"], json!({"type": "contact", "id": primary}));
        // Deleting the contact leaves the conversation, without a contact.
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/contacts/{primary}")).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["contact_id"], Value::Null);
        let mut c = app.db.read().await.unwrap();
        let (orphans,): (i64,) = parley_store::fetch_one!(&mut c, sqlx::query_as("SELECT COUNT(*) FROM conversations WHERE contact_id IS NOT NULL AND contact_id NOT IN (SELECT id FROM contacts)")).unwrap();
        assert_eq!(orphans, 0);
    }

    async fn status_rules_the_read_marker_and_filters(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let mut n = 0;
        let mut say = |from: &'static str| {
            n += 1;
            json!({"from": from, "text": format!("message {n}"), "external_id": format!("e-{n}")})
        };
        assert_eq!(inbound(&app, ch, &secret, say("ana")).await.status, 201);
        let id = app.get(&ws.live, "/api/v1/conversations").await.body["items"][0]["id"].as_i64().unwrap();
        let path = format!("/api/v1/conversations/{id}");

        // The read marker.
        let r = app.post(&ws.live, &format!("{path}/read"), json!({})).await;
        assert_eq!((r.status, r.body["unread_count"].clone()), (200, json!(0)));
        inbound(&app, ch, &secret, say("ana")).await;
        assert_eq!(app.get(&ws.live, &path).await.body["unread_count"], 1);

        // Resolved and snoozed conversations reopen on the next inbound message.
        let r = app.patch(&ws.live, &path, json!({"status": "resolved", "title": "Ana's order"})).await;
        assert_eq!((r.status, r.body["status"].clone(), r.body["title"].clone()), (200, json!("resolved"), json!("Ana's order")));
        inbound(&app, ch, &secret, say("ana")).await;
        assert_eq!(app.get(&ws.live, &path).await.body["status"], "open");
        let r = app.patch(&ws.live, &path, json!({"status": "snoozed"})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "snoozed_until"])));
        let r = app.patch(&ws.live, &path, json!({"status": "snoozed", "snoozed_until": "2030-01-01T09:00:00Z"})).await;
        assert_eq!((r.status, r.body["snoozed_until"].clone()), (200, json!("2030-01-01T09:00:00.000000Z")));
        inbound(&app, ch, &secret, say("ana")).await;
        let now = app.get(&ws.live, &path).await.body;
        assert_eq!((now["status"].clone(), now["snoozed_until"].clone()), (json!("open"), Value::Null));

        // An agent must exist in the scope.
        let r = app.patch(&ws.live, &path, json!({"agent_id": 999999})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "agent_id"])));
        let agent = app.create_agent(&ws.live, json!({"name": "Support"})).await["id"].as_i64().unwrap();
        assert_eq!(app.patch(&ws.live, &path, json!({"agent_id": agent})).await.body["agent_id"], agent);

        // Closed is final, and new traffic opens a new conversation.
        assert_eq!(app.patch(&ws.live, &path, json!({"status": "closed"})).await.status, 200);
        let r = app.patch(&ws.live, &path, json!({"status": "open"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Conversation {id} is closed; a closed conversation never reopens"))));
        inbound(&app, ch, &secret, say("ana")).await;
        inbound(&app, ch, &secret, say("bo")).await;
        let ids = |v: Value| -> Vec<i64> { v["items"].as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect() };
        assert_eq!(app.get(&ws.live, "/api/v1/conversations").await.body["total"], 3);
        assert_eq!(ids(app.get(&ws.live, "/api/v1/conversations?status=closed").await.body), vec![id]);
        assert_eq!(app.get(&ws.live, "/api/v1/conversations?status=open&channel=api&kind=direct&handler=agent").await.body["total"], 2);
        assert_eq!(ids(app.get(&ws.live, &format!("/api/v1/conversations?agent_id={agent}")).await.body), vec![id]);
        let ana = app.get(&ws.live, &path).await.body["contact_id"].as_i64().unwrap();
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations?contact_id={ana}")).await.body["total"], 2);
        assert_eq!(app.get(&ws.live, "/api/v1/conversations?channel=sms").await.body["total"], 0);
        let r = app.get(&ws.live, "/api/v1/conversations?status=gone&updated_since=later").await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"].as_array().unwrap().len(), 2);
        // Four changes by PATCH, two reopenings by inbound messages.
        assert_eq!(app.events(ws.id, Mode::Live, "conversation.updated").await.len(), 6);
        assert_eq!(app.patch(&ws.test, &path, json!({"title": "x"})).await.status, 404);
        assert_eq!(app.post(&ws.test, &format!("{path}/read"), json!({})).await.status, 404);
    }
}
