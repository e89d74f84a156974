//! `GET /api/v1/stream`: the event log live, scoped, filtered, resumable,
//! and across instances.

use std::time::{Duration, Instant};

use futures::StreamExt;
use parley_domain::user::Role;
use serde_json::{Value, json};

use crate::conversations::{api_channel, inbound};
use crate::support::*;

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub(crate) struct Sse {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

/// A stream being read, one event at a time.
pub(crate) struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
}

impl SseReader {
    /// Opens the stream with the `X-API-Key` or Bearer credential `auth`
    /// (a header pair) and reads up to its `ready` event: (the events
    /// before it, the reader).
    pub(crate) async fn open(
        app: &TestApp,
        query: &str,
        auth: (&str, &str),
        last_event_id: Option<&str>,
    ) -> (Vec<Sse>, SseReader) {
        let mut rb = app
            .client
            .get(app.url(&format!("/api/v1/stream{query}")))
            .header("accept", "text/event-stream")
            .header(auth.0, auth.1);
        if let Some(id) = last_event_id {
            rb = rb.header("last-event-id", id);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        assert_eq!(r.headers()["cache-control"], "no-cache");
        let mut reader = SseReader { body: r.bytes_stream().boxed(), buf: String::new() };
        let mut before = Vec::new();
        loop {
            let e = reader.next(Duration::from_secs(10)).await.expect("the stream says ready");
            if e.event == "ready" {
                assert_eq!(e.data["replayed"], json!(before.iter().filter(|e: &&Sse| e.id.is_some()).count()));
                return (before, reader);
            }
            before.push(e);
        }
    }

    /// The next event within `wait` (comments skipped), or `None`.
    pub(crate) async fn next(&mut self, wait: Duration) -> Option<Sse> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, "message".to_owned(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim_start().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim_start().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a comment or the retry hint
                }
                return Some(Sse { id, event, data: serde_json::from_str(&data).expect("data is JSON") });
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await.ok()??.ok()?;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Events until one of type `kind` whose data passes `matches`, within `wait`.
    pub(crate) async fn until(&mut self, kind: &str, wait: Duration, matches: impl Fn(&Value) -> bool) -> Vec<Sse> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        while let Some(e) = self.next(deadline.saturating_duration_since(Instant::now())).await {
            let done = e.event == kind && matches(&e.data);
            seen.push(e);
            if done {
                return seen;
            }
        }
        panic!("no {kind} within {wait:?}; saw {:?}", seen.iter().map(|e| &e.event).collect::<Vec<_>>());
    }
}

fn key(k: &str) -> (&'static str, &str) {
    ("x-api-key", k)
}

fn text_of(e: &Sse) -> Option<&str> {
    e.data["data"]["text"].as_str()
}

both_backends! {
    async fn the_stream_sends_the_workspaces_changes_as_they_commit_and_resumes_after_a_reconnect(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Stream").await;
        let other = app.workspace("Elsewhere").await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let (other_ch, other_secret) = api_channel(&app, &other.live).await;

        let (before, mut all) = SseReader::open(&app, "", key(&ws.live), None).await;
        assert!(before.is_empty(), "a new stream replays nothing: {before:?}");
        let (_, mut messages) = SseReader::open(&app, "?types=message.*", key(&ws.live), None).await;
        let (_, mut test_mode) = SseReader::open(&app, "", key(&ws.test), None).await;
        let (_, mut foreign) = SseReader::open(&app, "", key(&other.live), None).await;

        let r = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Where is my order?", "external_id": "s-1"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let got = all.until("message.received", Duration::from_secs(5), |d| d["data"]["text"] == "Where is my order?").await;
        let kinds: Vec<&str> = got.iter().map(|e| e.event.as_str()).collect();
        assert!(kinds.contains(&"contact.created") && kinds.contains(&"conversation.created"), "{kinds:?}");
        for e in &got {
            // Each frame is the logged event: its id, its type, the resource.
            let id = e.id.as_deref().expect("every change has an id");
            assert_eq!((e.data["id"].as_str(), e.data["type"].as_str(), &e.data["livemode"]), (Some(id), Some(e.event.as_str()), &json!(true)));
            let logged = app.get(&ws.live, &format!("/api/v1/events/{id}")).await;
            assert_eq!(logged.body, e.data, "the stream sends the event as the log has it");
        }
        // The filtered stream has the message and nothing but messages.
        let only = messages.until("message.received", Duration::from_secs(5), |_| true).await;
        assert!(only.iter().all(|e| e.event.starts_with("message.")), "{:?}", only.iter().map(|e| &e.event).collect::<Vec<_>>());

        // Another workspace and the other mode hear nothing of it.
        let r = inbound(&app, other_ch, &other_secret, json!({"from": "user-9", "text": "Elsewhere", "external_id": "o-1"})).await;
        assert_eq!(r.status, 201);
        let theirs = foreign.until("message.received", Duration::from_secs(5), |_| true).await;
        assert!(theirs.iter().all(|e| text_of(e) != Some("Where is my order?")));
        assert!(test_mode.next(Duration::from_millis(300)).await.is_none(), "the test-mode stream got a live event");

        // Disconnected: two messages arrive meanwhile; the reconnect names the last event seen.
        let last = got.last().unwrap().id.clone().unwrap();
        drop(all);
        for (i, text) in ["Second", "Third"].iter().enumerate() {
            let r = inbound(&app, ch, &secret, json!({"from": "user-1", "text": text, "external_id": format!("s-{}", i + 2)})).await;
            assert_eq!(r.status, 201);
        }
        let (replayed, mut resumed) = SseReader::open(&app, "", key(&ws.live), Some(&last)).await;
        let texts: Vec<&str> = replayed.iter().filter(|e| e.event == "message.received").filter_map(text_of).collect();
        assert_eq!(texts, ["Second", "Third"], "the missed messages come first, in order");
        assert!(replayed.iter().all(|e| e.id.as_deref() != Some(last.as_str())), "the named event is not sent again");
        assert!(replayed.iter().all(|e| text_of(e) != Some("Elsewhere")));
        // And it is live again.
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Fourth", "external_id": "s-4"})).await;
        let fourth = resumed.until("message.received", Duration::from_secs(5), |d| d["data"]["text"] == "Fourth").await;
        drop(resumed);

        // More than a replay sends followed (an import's 1,000 events): reload, never a cut-short replay.
        let scope = parley_domain::Scope::new(ws.id, parley_domain::Mode::Live);
        let mut tx = app.db.begin().await.unwrap();
        let many = (0..1000).map(|n| json!({"n": n})).collect();
        parley_store::repo::events::append_many(&mut tx, scope, parley_domain::event::EventType::ContactUpdated, many).await.unwrap();
        tx.commit().await.unwrap();
        let (first, _) = SseReader::open(&app, "", key(&ws.live), fourth.last().unwrap().id.as_deref()).await;
        assert_eq!(first.len(), 1, "{:?}", first.iter().map(|e| &e.event).collect::<Vec<_>>());
        assert_eq!((first[0].event.as_str(), &first[0].data), ("reset", &json!({"reason": "too_many"})));

        // An id it cannot resume from (unknown, or another workspace's) says to reload, identically.
        let foreign_id = app.events(other.id, parley_domain::Mode::Live, "message.received").await[0].id.clone();
        let too_long = format!("evt_{}", "X".repeat(300));
        for id in ["evt_01JUNKJUNKJUNKJUNKJUNKJUNK", foreign_id.as_str(), too_long.as_str()] {
            let (first, _) = SseReader::open(&app, "", key(&ws.live), Some(id)).await;
            assert_eq!(first.len(), 1, "{first:?}");
            assert_eq!((first[0].event.as_str(), &first[0].data, first[0].id.is_none()), ("reset", &json!({"reason": "unknown_event"}), true));
        }
    }

    async fn the_stream_refuses_what_it_cannot_serve_and_members_see_no_webhook_tests(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Stream rules").await;
        let r = app.get(&ws.live, "/api/v1/stream").await;
        assert_eq!((r.status, r.body["detail"].clone()), (406, json!("This is a Server-Sent Events stream: send Accept: text/event-stream")));
        let accept = [("accept", "text/event-stream")];
        let r = app.send(reqwest::Method::GET, "/api/v1/stream?types=message.*,nope,agent.", Some(&ws.live), None, &accept).await;
        assert_eq!(r.status, 422, "{}", r.text);
        assert_eq!(r.faults().len(), 2, "{}", r.text);
        assert!(r.faults().iter().all(|(loc, _)| loc == r#"["query","types"]"#), "{}", r.text);
        let r = app.send(reqwest::Method::GET, "/api/v1/stream", None, None, &accept).await;
        assert_eq!((r.status, r.body["detail"].clone()), (401, json!("Missing API key")));
        // At most 20 open streams per credential; closing one frees its place.
        let mut open = Vec::new();
        for _ in 0..20 {
            open.push(SseReader::open(&app, "", key(&ws.test), None).await.1);
        }
        let r = app.send(reqwest::Method::GET, "/api/v1/stream", Some(&ws.test), None, &accept).await;
        assert_eq!((r.status, r.body["detail"].clone()), (429, json!("This credential has 20 streams open already; close one first")));
        open.pop();
        let closed = Instant::now();
        loop {
            let r = app.client.get(app.url("/api/v1/stream")).header("accept", "text/event-stream").header("x-api-key", &ws.test).send().await.unwrap();
            if r.status() == 200 {
                break;
            }
            assert!(closed.elapsed() < Duration::from_secs(20), "the closed stream's place was never freed");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(open);

        // A member and an admin, each signed in; the admin tests a webhook.
        app.user("admin@stream.test", "a long admin password", ws.id, Role::Admin).await;
        app.user("member@stream.test", "a long member password", ws.id, Role::Member).await;
        let admin = app.token("admin@stream.test", "a long admin password").await;
        let member = app.token("member@stream.test", "a long member password").await;
        let (admin_auth, member_auth) = (format!("Bearer {admin}"), format!("Bearer {member}"));
        let (_, mut admins) = SseReader::open(&app, "", ("authorization", &admin_auth), None).await;
        let (_, mut members) = SseReader::open(&app, "", ("authorization", &member_auth), None).await;
        let receiver = crate::receiver::Receiver::start().await;
        let hook = app.bearer(reqwest::Method::POST, "/api/v1/webhooks", &admin, Some(json!({"url": receiver.url.clone(), "events": ["*"]}))).await;
        assert_eq!(hook.status, 201, "{}", hook.text);
        let r = app.bearer(reqwest::Method::POST, &format!("/api/v1/webhooks/{}/test", hook.body["id"]), &admin, None).await;
        assert!(r.status < 300, "{}", r.text);
        admins.until("webhook.test", Duration::from_secs(5), |_| true).await;
        // The member is sent the next change, and never the test.
        let (ch, secret) = api_channel(&app, &ws.live).await;
        inbound(&app, ch, &secret, json!({"from": "user-2", "text": "Hello", "external_id": "m-1"})).await;
        let seen = members.until("message.received", Duration::from_secs(5), |_| true).await;
        assert!(seen.iter().all(|e| e.event != "webhook.test"), "{:?}", seen.iter().map(|e| &e.event).collect::<Vec<_>>());
    }
}

/// Two instances on one PostgreSQL database: a message arriving on one
/// reaches a stream connected to the other within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_one_instance_reaches_a_stream_on_another() {
    let one = TestApp::spawn(Backend::Postgres).await;
    let two = one.sibling().await;
    let ws = one.workspace("Two instances").await;
    let (ch, secret) = api_channel(&one, &ws.live).await;
    let (_, mut on_two) = SseReader::open(&two, "?types=message.received", key(&ws.live), None).await;
    for i in 0..3 {
        let text = format!("Across {i}");
        let sent = Instant::now();
        let r =
            inbound(&one, ch, &secret, json!({"from": "user-3", "text": text, "external_id": format!("x-{i}")})).await;
        assert_eq!(r.status, 201);
        on_two.until("message.received", Duration::from_secs(5), |d| d["data"]["text"] == text.as_str()).await;
        let took = sent.elapsed();
        assert!(took < Duration::from_secs(1), "message {i} took {took:?} to reach the other instance's stream");
    }
}
