//! Sending messages: the three ways to address one, the durable queue and
//! its retries against a real local receiver, signed delivery, status
//! reports that only move forward, and idempotent sends.

use std::time::{Duration, Instant};

use parley_domain::Mode;
use parley_events::signing::WebhookSecret;
use serde_json::{Value, json};

use crate::conversations::{api_channel, inbound, now_s};
use crate::receiver::{Answer, Receiver};
use crate::support::*;

/// An api channel that sends to `url`: (id, its signing secret).
pub(crate) async fn sending_channel(app: &TestApp, key: &str, url: &str) -> (i64, WebhookSecret) {
    let (id, secret) = api_channel(app, key).await;
    let r = app.patch(key, &format!("/api/v1/channels/{id}"), json!({"config": {"url": url}})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    (id, secret)
}

/// Waits until message `id` has `status` (panics after 10 s).
pub(crate) async fn wait_for_status(app: &TestApp, key: &str, id: i64, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = app.get(key, &format!("/api/v1/messages/{id}")).await.body;
        if m["status"] == status {
            return m;
        }
        assert!(Instant::now() < deadline, "message {id} never reached {status}: {m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A conversation on `channel` with `from` (an inbound message opens it).
pub(crate) async fn conversation_with(app: &TestApp, channel: i64, secret: &WebhookSecret, from: &str) -> i64 {
    let r = inbound(app, channel, secret, json!({"from": from, "text": "Hi", "external_id": uuid()})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["conversation_id"].as_i64().unwrap()
}

/// POSTs a signed delivery report to the channel.
async fn report(app: &TestApp, channel: i64, secret: &WebhookSecret, body: Value) -> Resp {
    let bytes = serde_json::to_vec(&body).unwrap();
    let id = format!("msg_{}", uuid());
    let ts = now_s();
    let r = app
        .client
        .post(app.url(&format!("/api/v1/channels/{channel}/status")))
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", secret.sign(&id, ts, &bytes))
        .body(bytes)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

both_backends! {
    async fn an_api_channel_message_is_signed_and_retried_until_the_receiver_accepts(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        rx.script(vec![
            Answer::status(503),
            Answer { body: "boom".into(), ..Answer::status(500) },
            Answer { body: r#"{"external_id": "ext-1"}"#.into(), ..Answer::status(200) },
        ]);
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = conversation_with(&app, ch, &secret, "user-42").await;

        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "Hello **there**"})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!((r.body["status"].clone(), r.body["direction"].clone()), (json!("queued"), json!("outbound")));
        assert_eq!(r.body["author"], json!({"type": "agent", "id": null}));
        let id = r.body["id"].as_i64().unwrap();

        let got = rx.wait_for(3, Duration::from_secs(10)).await;
        let sent = wait_for_status(&app, &ws.live, id, "sent").await;
        assert_eq!(sent["external_id"], "ext-1");
        assert!(sent["sent_at"].is_string());
        // Every attempt carries the same webhook-id and a valid signature.
        for attempt in &got {
            assert_eq!(attempt.header("webhook-id"), format!("msg_{id}"));
            let ts: i64 = attempt.header("webhook-timestamp").parse().unwrap();
            assert!(attempt.header("webhook-signature").split(' ').any(|s| s == secret.sign(&format!("msg_{id}"), ts, &attempt.body)));
        }
        let body = got[2].json();
        assert_eq!((body["type"].clone(), body["livemode"].clone()), (json!("message"), json!(true)));
        assert_eq!((body["data"]["id"].clone(), body["data"]["to"].clone(), body["data"]["text"].clone()), (json!(id), json!("user-42"), json!("Hello **there**")));
        assert_eq!(rx.received().len(), 3, "nothing sent after success");

        // The conversation shows the reply and nobody waits any more.
        let c = app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body;
        assert_eq!((c["last_message_preview"].clone(), c["waiting_since"].clone()), (json!("Hello **there**"), Value::Null));
        let events = app.events(ws.id, Mode::Live, "message.sent").await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data["external_id"], "ext-1");

        // Delivery reports move the status forward only.
        let r = report(&app, ch, &secret, json!({"external_id": "ext-1", "status": "delivered"})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("delivered")), "{}", r.text);
        let r = report(&app, ch, &secret, json!({"external_id": "ext-1", "status": "sent"})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("delivered")));
        let r = report(&app, ch, &secret, json!({"external_id": "ext-1", "status": "failed"})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("delivered")));
        let r = report(&app, ch, &secret, json!({"external_id": "ext-1", "status": "read"})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("read")));
        assert!(r.body["read_at"].is_string() && r.body["delivered_at"].is_string());
        assert_eq!(app.events(ws.id, Mode::Live, "message.delivered").await.len(), 1);
        assert_eq!(app.events(ws.id, Mode::Live, "message.read").await.len(), 1);
        assert_eq!(app.events(ws.id, Mode::Live, "message.failed").await.len(), 0);

        // Reports must be signed, name a known message and a known status.
        let r = report(&app, ch, &WebhookSecret::generate(), json!({"external_id": "ext-1", "status": "read"})).await;
        assert_eq!(r.status, 401);
        let r = report(&app, ch, &secret, json!({"external_id": "nope", "status": "read"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Message with external_id nope on channel {ch} not found"))));
        let r = report(&app, ch, &secret, json!({"external_id": "ext-1", "status": "queued"})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "status"])));
    }

    async fn a_refused_message_fails_with_the_reason(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        rx.always(Answer::status(400));
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = conversation_with(&app, ch, &secret, "user-1").await;
        let id = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x"})).await.body["id"].as_i64().unwrap();
        let failed = wait_for_status(&app, &ws.live, id, "failed").await;
        assert_eq!(failed["error"], "HTTP 400: ok (after 1 attempt)", "the receiver's words are kept");
        assert_eq!(rx.received().len(), 1, "a 400 is not retried");
        let events = app.events(ws.id, Mode::Live, "message.failed").await;
        assert_eq!((events.len(), events[0].data["id"].clone()), (1, json!(id)));

        // A receiver that never recovers: retried on the schedule, then failed.
        let rx2 = Receiver::start().await;
        rx2.always(Answer::status(503));
        let (ch2, secret2) = sending_channel(&app, &ws.live, &rx2.url).await;
        let conv2 = conversation_with(&app, ch2, &secret2, "user-2").await;
        let id2 = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv2, "text": "y"})).await.body["id"].as_i64().unwrap();
        let deadline = Instant::now() + Duration::from_secs(90);
        let failed = loop {
            let m = app.get(&ws.live, &format!("/api/v1/messages/{id2}")).await.body;
            if m["status"] == "failed" { break m; }
            assert!(Instant::now() < deadline, "never failed: {m}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(failed["error"], "HTTP 503: ok (after 8 attempts)");
        assert_eq!(rx2.received().len(), 8);
    }

    async fn messages_are_addressed_three_ways_and_refused_where_they_cannot_go(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;

        // channel_id + to opens the conversation (and discovers the contact).
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": ch, "to": "user-7", "text": "Welcome"})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let conv = r.body["conversation_id"].as_i64().unwrap();
        let c = app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body;
        assert_eq!(c["channel_ref"], "api:user-7");
        let contact = c["contact_id"].as_i64().unwrap();
        // The contact's reply lands in the same conversation.
        assert_eq!(conversation_with(&app, ch, &secret, "user-7").await, conv);

        // contact_id + channel finds their open conversation.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"contact_id": contact, "channel": "api", "text": "Again"})).await;
        assert_eq!((r.status, r.body["conversation_id"].clone()), (202, json!(conv)), "{}", r.text);
        rx.wait_for(2, Duration::from_secs(10)).await;
        // Messages of one conversation leave in the order they were accepted.
        let texts: Vec<Value> = rx.received().iter().map(|m| m.json()["data"]["text"].clone()).collect();
        assert_eq!(texts, [json!("Welcome"), json!("Again")]);

        // Exactly one way of addressing.
        for body in [
            json!({"text": "x"}),
            json!({"conversation_id": conv, "channel_id": ch, "to": "u", "text": "x"}),
            json!({"channel_id": ch, "text": "x"}),
            json!({"contact_id": contact, "text": "x"}),
        ] {
            let r = app.post(&ws.live, "/api/v1/messages", body.clone()).await;
            assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.message.recipient")), "{body}");
        }
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "text"])));
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": ""})).await;
        assert_eq!(r.status, 422);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": 999999, "text": "x"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (404, json!("Conversation 999999 not found")));
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": 999999, "to": "u", "text": "x"})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "channel_id"])));
        let r = app.post(&ws.live, "/api/v1/messages", json!({"contact_id": contact, "channel": "sms", "text": "x"})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.contact.no_address")));

        // A channel without a url cannot send; a disabled one neither; a closed conversation is final.
        let (quiet, quiet_secret) = api_channel(&app, &ws.live).await;
        let quiet_conv = conversation_with(&app, quiet, &quiet_secret, "user-9").await;
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": quiet_conv, "text": "x"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Channel {quiet} cannot send: it has no `url` to send to (set config.url)"))));
        assert_eq!(app.patch(&ws.live, &format!("/api/v1/channels/{ch}"), json!({"status": "disabled"})).await.status, 200);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Channel {ch} is disabled; it cannot send"))));
        assert_eq!(app.patch(&ws.live, &format!("/api/v1/conversations/{quiet_conv}"), json!({"status": "closed"})).await.status, 200);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": quiet_conv, "text": "x"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Conversation {quiet_conv} is closed; start a new one"))));

        // Nothing refused was stored.
        let all = app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body;
        assert_eq!(all["total"], 3);
    }

    async fn a_send_with_an_idempotency_key_is_queued_once(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = conversation_with(&app, ch, &secret, "user-1").await;
        let body = json!({"conversation_id": conv, "text": "Once"});
        let first = app.post_idem(&ws.live, "/api/v1/messages", "send-1", body.clone()).await;
        let again = app.post_idem(&ws.live, "/api/v1/messages", "send-1", body.clone()).await;
        assert_eq!((first.status, again.status), (202, 202));
        assert_eq!(first.body, again.body);
        assert_eq!(again.headers["idempotent-replayed"], "true");
        let other = app.post_idem(&ws.live, "/api/v1/messages", "send-1", json!({"conversation_id": conv, "text": "Twice"})).await;
        assert_eq!(other.status, 409);
        wait_for_status(&app, &ws.live, first.body["id"].as_i64().unwrap(), "sent").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(rx.received().len(), 1);
    }

    async fn a_signed_in_user_writes_as_themselves(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let user = app.user("ana@example.com", "correct horse battery", ws.id, parley_domain::user::Role::Member).await;
        let token = app.token("ana@example.com", "correct horse battery").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = conversation_with(&app, ch, &secret, "user-1").await;
        let r = app.bearer(reqwest::Method::POST, "/api/v1/messages", &token, Some(json!({"conversation_id": conv, "text": "Ana here"}))).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!(r.body["author"], json!({"type": "user", "id": user}));
        let delivered = rx.wait_for(1, Duration::from_secs(10)).await;
        assert_eq!(delivered[0].json()["data"]["author"], json!({"type": "user", "id": user}));
    }
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n0123456789abcdef";

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

both_backends! {
    async fn attachments_are_stored_and_served_through_signed_expiring_links(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = conversation_with(&app, ch, &secret, "user-1").await;
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "Your invoice", "attachments": [
            {"filename": "logo.png", "content_type": "image/png", "data": b64(PNG)},
            {"filename": "../../page.html", "content_type": "Text/HTML", "data": b64(b"<script>alert(1)</script>")},
        ]})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let files = r.body["attachments"].as_array().unwrap().clone();
        assert_eq!(files.len(), 2);
        let mut keys: Vec<&str> = files[0].as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["content_type", "expires_at", "filename", "size", "url"], "no storage key is shown");
        assert_eq!((files[0]["size"].clone(), files[1]["content_type"].clone(), files[1]["filename"].clone()), (json!(PNG.len()), json!("text/html"), json!("../../page.html")));

        // The link serves the file, whole or in part, with no credential.
        let png_url = files[0]["url"].as_str().unwrap().to_owned();
        assert!(png_url.starts_with(&app.base), "{png_url}");
        let got = app.client.get(&png_url).send().await.unwrap();
        assert_eq!((got.status().as_u16(), got.headers()["content-type"].to_str().unwrap(), got.headers()["content-disposition"].to_str().unwrap()), (200, "image/png", "inline"));
        assert_eq!(&got.bytes().await.unwrap()[..], PNG);
        let part = app.client.get(&png_url).header("range", "bytes=2-5").send().await.unwrap();
        assert_eq!((part.status().as_u16(), part.headers()["content-range"].to_str().unwrap().to_owned()), (206, format!("bytes 2-5/{}", PNG.len())));
        assert_eq!(&part.bytes().await.unwrap()[..], &PNG[2..6]);
        let tail = app.client.get(&png_url).header("range", "bytes=-4").send().await.unwrap();
        assert_eq!(&tail.bytes().await.unwrap()[..], &PNG[PNG.len() - 4..]);
        assert_eq!(app.client.get(&png_url).header("range", "bytes=999-").send().await.unwrap().status(), 416);
        // Uploaded markup downloads, sandboxed; it never renders as a page of this origin.
        let html = app.client.get(files[1]["url"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(html.headers()["content-disposition"], "attachment");
        assert_eq!(html.headers()["content-security-policy"], "sandbox");
        assert_eq!(html.headers()["x-content-type-options"], "nosniff");

        // Links cannot be altered.
        for (from, to) in [("signature=", "signature=0"), ("type=image%2Fpng", "type=text%2Fhtml"), ("expires=", "expires=9")] {
            let forged = png_url.replacen(from, to, 1);
            let r = app.client.get(&forged).send().await.unwrap();
            assert_eq!(r.status(), 403, "{forged}");
        }
        let unsigned = png_url.split('?').next().unwrap().to_owned();
        assert_eq!(app.client.get(&unsigned).send().await.unwrap().status(), 403);

        // Readers of the message get fresh links; so does the receiving system.
        let again = app.get(&ws.live, &format!("/api/v1/messages/{}", r.body["id"])).await.body;
        assert_eq!(again["attachments"][0]["filename"], "logo.png");
        assert!(again["attachments"][0]["url"].is_string());
        let delivered = rx.wait_for(1, Duration::from_secs(10)).await;
        let sent_url = delivered[0].json()["data"]["attachments"][0]["url"].as_str().unwrap().to_owned();
        assert_eq!(&app.client.get(&sent_url).send().await.unwrap().bytes().await.unwrap()[..], PNG);

        // Bad files are 422s, nothing queued.
        for (attachments, kind) in [
            (json!([{"filename": "a", "content_type": "image/png", "data": "***"}]), "value_error.base64"),
            (json!([{"filename": "a", "content_type": "png", "data": b64(PNG)}]), "value_error.content_type"),
            (json!([{"filename": "a", "content_type": "image/png"}]), "value_error.missing"),
            (json!((0..11).map(|_| json!({"filename": "a", "content_type": "image/png", "data": b64(PNG)})).collect::<Vec<_>>()), "value_error.list.max_items"),
        ] {
            let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x", "attachments": attachments})).await;
            assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!(kind)), "{}", r.text);
        }
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body["total"], 2);
    }

    async fn download_links_expire_and_storage_outages_are_503s(backend) {
        let app = TestApp::spawn_with(backend, |s| s.storage.url_ttl_seconds = 1).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = conversation_with(&app, ch, &secret, "user-1").await;
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x", "attachments": [{"filename": "a.png", "content_type": "image/png", "data": b64(PNG)}]})).await;
        let url = r.body["attachments"][0]["url"].as_str().unwrap().to_owned();
        assert_eq!(app.client.get(&url).send().await.unwrap().status(), 200);
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let expired = app.client.get(&url).send().await.unwrap();
        assert_eq!(expired.status(), 403);
        assert_eq!(expired.json::<Value>().await.unwrap()["detail"], "This link is not valid: the link has expired");
        // A fresh read signs a fresh link.
        let fresh = app.get(&ws.live, &format!("/api/v1/messages/{}", r.body["id"])).await.body["attachments"][0]["url"].as_str().unwrap().to_owned();
        assert_eq!(app.client.get(&fresh).send().await.unwrap().status(), 200);
        // The file is gone from storage: 404, not a dead link answered 200.
        std::fs::remove_dir_all(&app.storage_path).unwrap();
        assert_eq!(app.client.get(&fresh).send().await.unwrap().status(), 404);

        // Storage that cannot be opened: sending a file is a 503, and nothing is stored.
        let broken = TestApp::spawn_with(backend, |s| s.storage.path = "/proc/parley-no-such-store".into()).await;
        let ws = broken.workspace("Acme").await;
        let (ch, secret) = sending_channel(&broken, &ws.live, &rx.url).await;
        let conv = conversation_with(&broken, ch, &secret, "user-1").await;
        let r = broken.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x", "attachments": [{"filename": "a.png", "content_type": "image/png", "data": b64(PNG)}]})).await;
        assert_eq!(r.status, 503, "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().starts_with("Storage is unavailable"));
        assert_eq!(broken.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body["total"], 1);
        // Messages without files still go.
        assert_eq!(broken.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "x"})).await.status, 202);
    }
}
