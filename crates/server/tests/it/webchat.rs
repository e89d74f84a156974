//! The webchat channel over a real WebSocket client: visitors, messages
//! both ways, delivery and read receipts, resuming, origins.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parley_domain::Mode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::messages::wait_for_status;
use crate::support::*;

pub(crate) type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A webchat channel: (id, public id).
pub(crate) async fn webchat_channel(app: &TestApp, key: &str, config: Value) -> (i64, String) {
    let r = app.post(key, "/api/v1/channels", json!({"type": "webchat", "name": "Site", "config": config})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    (r.body["id"].as_i64().unwrap(), r.body["address"].as_str().unwrap().to_owned())
}

pub(crate) async fn open(app: &TestApp, public_id: &str, origin: &str) -> Result<Socket, u16> {
    let url = app.url(&format!("/webchat/{public_id}")).replacen("http", "ws", 1);
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("origin", origin.parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => Err(r.status().as_u16()),
        Err(e) => panic!("connect: {e}"),
    }
}

pub(crate) async fn send(socket: &mut Socket, frame: Value) {
    socket.send(Frame::Text(frame.to_string().into())).await.unwrap();
}

/// The next JSON frame (panics after 10 s).
pub(crate) async fn next(socket: &mut Socket) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), socket.next()).await.expect("a frame in time");
        if let Frame::Text(t) = frame.unwrap().unwrap() {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

/// The next frame of `kind`, skipping others.
pub(crate) async fn next_of(socket: &mut Socket, kind: &str) -> Value {
    loop {
        let f = next(socket).await;
        if f["type"] == kind {
            return f;
        }
    }
}

pub(crate) async fn hello(app: &TestApp, public_id: &str, token: Option<&str>) -> (Socket, Value) {
    let mut socket = open(app, public_id, "https://shop.example").await.expect("connected");
    send(&mut socket, json!({"type": "hello", "visitor_token": token})).await;
    let ready = next(&mut socket).await;
    assert_eq!(ready["type"], "ready", "{ready}");
    (socket, ready)
}

both_backends! {
    async fn a_visitor_chats_over_a_websocket_with_receipts_both_ways(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (_, public_id) = webchat_channel(&app, &ws.live, json!({"allowed_origins": ["https://shop.example"], "title": "Acme help", "greeting": "Hi! How can we help?"})).await;

        let (mut socket, ready) = hello(&app, &public_id, None).await;
        let visitor = ready["visitor_id"].as_str().unwrap().to_owned();
        let token = ready["visitor_token"].as_str().unwrap().to_owned();
        assert!(visitor.starts_with("v_") && token.starts_with("wvt_"));
        assert_eq!((ready["title"].clone(), ready["greeting"].clone(), ready["conversation_id"].clone(), ready["messages"].clone()), (json!("Acme help"), json!("Hi! How can we help?"), Value::Null, json!([])));

        // The visitor writes: acknowledged as stored, and the workspace sees it.
        send(&mut socket, json!({"type": "message", "text": "Where is my order?\n#123", "client_id": "c-1"})).await;
        let ack = next_of(&mut socket, "ack").await;
        assert_eq!((ack["client_id"].clone(), ack["message"]["direction"].clone(), ack["message"]["text"].clone()), (json!("c-1"), json!("inbound"), json!("Where is my order?\n#123")));
        let mine = ack["message"]["id"].as_i64().unwrap();
        let list = app.get(&ws.live, "/api/v1/conversations?channel=webchat").await.body;
        assert_eq!(list["total"], 1);
        let conv = list["items"][0]["id"].as_i64().unwrap();
        assert_eq!((list["items"][0]["channel_ref"].clone(), list["items"][0]["unread_count"].clone()), (json!(format!("webchat:{visitor}")), json!(1)));
        // A resend with the same client id is stored once.
        send(&mut socket, json!({"type": "message", "text": "Where is my order?\n#123", "client_id": "c-1"})).await;
        assert_eq!(next_of(&mut socket, "ack").await["message"]["id"], json!(mine));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body["total"], 1);

        // The workspace replies through the API; the visitor sees it and reports receipts.
        let reply = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conv, "text": "On its way!"})).await;
        assert_eq!(reply.status, 202, "{}", reply.text);
        let reply_id = reply.body["id"].as_i64().unwrap();
        let shown = next_of(&mut socket, "message").await;
        assert_eq!((shown["message"]["id"].clone(), shown["message"]["direction"].clone(), shown["message"]["text"].clone(), shown["message"]["author"].clone()), (json!(reply_id), json!("outbound"), json!("On its way!"), json!("agent")));
        send(&mut socket, json!({"type": "delivered", "message_id": reply_id})).await;
        wait_for_status(&app, &ws.live, reply_id, "delivered").await;
        send(&mut socket, json!({"type": "read", "message_id": reply_id})).await;
        wait_for_status(&app, &ws.live, reply_id, "read").await;
        assert_eq!(app.events(ws.id, Mode::Live, "message.read").await.len(), 1);
        // A visitor cannot touch messages that are not theirs.
        send(&mut socket, json!({"type": "read", "message_id": mine})).await;
        assert_eq!(next_of(&mut socket, "error").await["detail"], format!("Message {mine} not found"));

        // The workspace reads the conversation: the visitor gets a read receipt.
        assert_eq!(app.post(&ws.live, &format!("/api/v1/conversations/{conv}/read"), json!({})).await.status, 200);
        let receipt = next_of(&mut socket, "receipt").await;
        assert_eq!((receipt["message_id"].clone(), receipt["status"].clone()), (json!(mine), json!("read")));
        socket.close(None).await.unwrap();

        // Coming back with the token resumes the visitor and the conversation.
        let (mut again, ready) = hello(&app, &public_id, Some(&token)).await;
        assert_eq!((ready["visitor_id"].clone(), ready["visitor_token"].clone(), ready["conversation_id"].clone()), (json!(visitor), Value::Null, json!(conv)));
        let history: Vec<(Value, Value)> = ready["messages"].as_array().unwrap().iter().map(|m| (m["text"].clone(), m["read"].clone())).collect();
        assert_eq!(history, [(json!("Where is my order?\n#123"), json!(true)), (json!("On its way!"), json!(true))]);
        send(&mut again, json!({"type": "ping"})).await;
        assert_eq!(next(&mut again).await["type"], "pong");
        send(&mut again, json!({"type": "message", "text": ""})).await;
        assert_eq!(next(&mut again).await["type"], "error");
        send(&mut again, json!("not an object")).await;
        assert_eq!(next(&mut again).await["type"], "error");
        // An unknown token is a new visitor, not an error.
        let (_, fresh) = hello(&app, &public_id, Some("wvt_forged")).await;
        assert_ne!(fresh["visitor_id"], json!(visitor));
        assert!(fresh["visitor_token"].is_string());
    }

    async fn webchat_sockets_check_origin_channel_and_protocol(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (ch, public_id) = webchat_channel(&app, &ws.live, json!({"allowed_origins": ["https://shop.example"]})).await;
        assert_eq!(open(&app, &public_id, "https://evil.example").await.err(), Some(403));
        assert_eq!(open(&app, "wc_nope", "https://shop.example").await.err(), Some(404));
        // A plain GET is told to upgrade.
        let r = app.client.get(app.url(&format!("/webchat/{public_id}"))).header("origin", "https://shop.example").send().await.unwrap();
        assert_eq!(r.status(), 426);
        // An api channel's address is not a webchat.
        let api = app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "B"})).await.body;
        assert_eq!(open(&app, api["address"].as_str().unwrap(), "https://shop.example").await.err(), Some(404));
        // Disabled: refused.
        app.patch(&ws.live, &format!("/api/v1/channels/{ch}"), json!({"status": "disabled"})).await;
        assert_eq!(open(&app, &public_id, "https://shop.example").await.err(), Some(403));
        // No allowed_origins: any page may open it; a frame before hello is refused.
        let (_, open_id) = webchat_channel(&app, &ws.live, json!({})).await;
        let mut socket = open(&app, &open_id, "https://anywhere.example").await.unwrap();
        send(&mut socket, json!({"type": "message", "text": "hi"})).await;
        assert_eq!(next(&mut socket).await["type"], "error");

        // The widget is served as JavaScript to any page.
        let r = app.client.get(app.url("/webchat/widget.js")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "text/javascript; charset=utf-8");
        assert!(r.text().await.unwrap().contains("/webchat/"));
    }
}

/// An agent (`body`) that answers every webchat message.
async fn webchat_agent(app: &TestApp, key: &str, body: Value) -> Value {
    let agent = app.create_agent(key, body).await;
    let r = app
        .post(
            key,
            &format!("/api/v1/agents/{}/triggers", agent["id"]),
            json!({"event": "message.received", "channel": "webchat"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    agent
}

/// A shop's own origin (another port of 127.0.0.1), for its page.
async fn shop_origin() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    (listener, origin)
}

/// Serves the shop's page, which includes the widget of webchat `public_id`.
fn serve_shop(listener: tokio::net::TcpListener, app: &TestApp, public_id: &str) {
    let html = format!(
        "<!doctype html><html><head><title>Shop</title></head><body><h1>Shop</h1>\
         <script src=\"{}\" data-channel=\"{public_id}\" async></script></body></html>",
        app.url("/webchat/widget.js")
    );
    let page = axum::Router::new().route("/", axum::routing::get(move || async move { axum::response::Html(html) }));
    tokio::spawn(async move { axum::serve(listener, page).await.unwrap() });
}

/// The widget in a real browser: a page on another origin includes it with
/// one script tag, the visitor sends a message, and sees the answer of the
/// agent (the builtin engine, from a knowledge collection) and the reply
/// the workspace sends through the API (`scripts/test` installs Chromium's
/// driver library; the test fails, never skips, without them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_widget_in_chromium_sends_and_shows_the_agents_answer_and_the_reply_sent_through_the_api() {
    let app = TestApp::spawn_with(Backend::Sqlite, |s| s.agents.debounce_ms = 100).await;
    let ws = app.workspace("Acme").await;
    // An agent that answers every webchat message from its knowledge.
    let k =
        app.post(&ws.live, "/api/v1/knowledge-collections", json!({"name": "Site"})).await.body["id"].as_i64().unwrap();
    let r = app
        .post(
            &ws.live,
            &format!("/api/v1/knowledge-collections/{k}/documents"),
            json!({"title": "Welcome", "text": "Hello from Acme! We open at 9am every day."}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    webchat_agent(&app, &ws.live, json!({"name": "Ava", "tools": [], "knowledge_collection_ids": [k]})).await;
    // The customer's page, on its own origin.
    let (listener, page_origin) = shop_origin().await;
    let (_, public_id) =
        webchat_channel(&app, &ws.live, json!({"allowed_origins": [page_origin], "title": "Acme"})).await;
    serve_shop(listener, &app, &public_id);

    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    let reply_text = "Thanks <b>for</b> writing!";
    let mut browser = tokio::process::Command::new("node")
        .arg(format!("{dir}/widget.mjs"))
        .arg(format!("{page_origin}/"))
        .arg(reply_text)
        .arg("We open at 9am every day.")
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (see scripts/test for the browser test's needs)");

    // The visitor's message arrives; the workspace answers it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let conv = loop {
        let list = app.get(&ws.live, "/api/v1/conversations?channel=webchat").await.body;
        if let Some(id) = list["items"][0]["id"].as_i64() {
            let messages = app.get(&ws.live, &format!("/api/v1/conversations/{id}/messages")).await.body;
            if messages["items"][0]["text"] == "Hello from the browser" {
                break id;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the browser's message never arrived");
        if let Ok(Some(status)) = browser.try_wait() {
            panic!("the browser script ended early: {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let receipt = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode("Paid in full")
    };
    let reply = app
        .post(
            &ws.live,
            "/api/v1/messages",
            json!({"conversation_id": conv, "text": reply_text,
            "attachments": [{"filename": "receipt.txt", "content_type": "text/plain", "data": receipt}]}),
        )
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let output = tokio::time::timeout(Duration::from_secs(60), browser.wait_with_output())
        .await
        .expect("the browser finished")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "browser script failed: {stdout}");
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["SENT", "AGENT", "REPLY"]);
    // The panel was open: the widget reported the reply read.
    wait_for_status(&app, &ws.live, reply.body["id"].as_i64().unwrap(), "read").await;
}

both_backends! {
    async fn a_visitor_asks_for_a_web_call_only_where_the_channel_offers_calls(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        // Calls are off by default: `ready` says so and a `call` is refused.
        let (_, quiet) = webchat_channel(&app, &ws.live, json!({"allowed_origins": ["https://shop.example"]})).await;
        let (mut socket, ready) = hello(&app, &quiet, None).await;
        assert_eq!(ready["calls"], false);
        send(&mut socket, json!({"type": "call"})).await;
        let refused = next_of(&mut socket, "error").await;
        assert!(refused["detail"].as_str().unwrap().contains("does not offer calls"), "{refused}");
        // A bad setting is a 422 naming it.
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "webchat", "name": "Bad", "config": {"calls": "yes"}})).await;
        assert_eq!(r.status, 422, "{}", r.text);

        // Offered, but no agent answers the chat: nobody to call.
        let (_, public_id) = webchat_channel(&app, &ws.live, json!({"allowed_origins": ["https://shop.example"], "calls": true})).await;
        let (mut socket, ready) = hello(&app, &public_id, None).await;
        assert_eq!(ready["calls"], true);
        send(&mut socket, json!({"type": "call"})).await;
        let refused = next_of(&mut socket, "error").await;
        assert!(refused["detail"].as_str().unwrap().contains("No agent answers this chat"), "{refused}");

        // With the agent that answers webchat messages: a web call, joined by its token.
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await;
        let r = app.post(&ws.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "message.received", "channel": "webchat"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let (mut socket, visitor) = hello(&app, &public_id, None).await;
        send(&mut socket, json!({"type": "call"})).await;
        let call = next_of(&mut socket, "call").await;
        assert_eq!(call["url"], "/calls/web", "{call}");
        assert_eq!(call["token"].as_str().unwrap().len(), 40, "{call}");
        let id = call["call_id"].as_str().unwrap().to_owned();
        let placed = app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body;
        assert_eq!((placed["provider"].clone(), placed["agent_id"].clone()), (json!("web"), agent["id"].clone()), "{placed}");
        assert_eq!(placed["metadata"]["webchat_visitor"], visitor["visitor_id"], "{placed}");
        // Asking again at once is refused: one call at a time per socket.
        send(&mut socket, json!({"type": "call"})).await;
        let again = next_of(&mut socket, "error").await;
        assert!(again["detail"].as_str().unwrap().contains("wait a moment"), "{again}");
        app.post(&ws.live, &format!("/api/v1/calls/{id}/hangup"), json!({})).await;
    }
}

/// A visitor calls from the widget on a shop's page in Chromium (its fake
/// microphone playing an espeak-ng caller): the audio module and worklets
/// come from Parley's origin, the agent greets, whisper tiny.en hears the
/// caller, the agent answers, and hanging up in the widget ends the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_calls_the_agent_from_the_widget_in_chromium() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let stt = parley_speech::local_servers::whisper();
    let app = crate::web_calls::web_app(Backend::Sqlite, &stt).await;
    let ws = app.workspace("Acme").await;
    webchat_agent(&app, &ws.live, json!({"name": "Ava", "first_message": "Hello, this is Ava from Acme."})).await;
    let (listener, page_origin) = shop_origin().await;
    let (_, public_id) =
        webchat_channel(&app, &ws.live, json!({"allowed_origins": [page_origin], "calls": true})).await;
    serve_shop(listener, &app, &public_id);

    // The caller: quiet through the greeting, then their question.
    let said = "hello, I would like to know where my order is, please call me back tomorrow morning";
    let wav = crate::web_calls::caller_wav(said, 7000, 30_000).await;

    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    let mut browser = tokio::process::Command::new("node")
        .arg(format!("{dir}/widget_call.mjs"))
        .arg(format!("{page_origin}/"))
        .arg(&wav)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (see scripts/test for the browser tests' needs)");
    let mut said_lines = tokio::io::BufReader::new(browser.stdout.take().unwrap()).lines();
    let talking =
        tokio::time::timeout(Duration::from_secs(60), said_lines.next_line()).await.expect("the call started");
    assert_eq!(talking.unwrap().as_deref(), Some("TALKING"));
    // The caller is heard and answered, live.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (id, segments) = loop {
        let calls = app.get(&ws.live, "/api/v1/calls").await.body;
        if let Some(id) = calls["items"][0]["id"].as_str() {
            let segments = app.get(&ws.live, &format!("/api/v1/calls/{id}/transcript")).await.body["segments"].clone();
            let list = segments.as_array().cloned().unwrap_or_default();
            let heard = list.iter().position(|s| s["speaker"] == "caller");
            if heard.is_some_and(|at| list[at + 1..].iter().any(|s| s["speaker"] == "agent")) {
                break (id.to_owned(), list);
            }
        }
        assert!(std::time::Instant::now() < deadline, "the caller was never heard and answered");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut stdin = browser.stdin.take().unwrap();
    stdin.write_all(b"HANGUP\n").await.unwrap();
    let ended =
        tokio::time::timeout(Duration::from_secs(30), said_lines.next_line()).await.expect("the widget hung up");
    assert_eq!(ended.unwrap().as_deref(), Some("ENDED"));
    let status = tokio::time::timeout(Duration::from_secs(30), browser.wait()).await.unwrap().unwrap();
    assert!(status.success());
    let _ = std::fs::remove_file(&wav);
    let heard = segments.iter().find(|s| s["speaker"] == "caller").unwrap()["text"].as_str().unwrap().to_owned();
    assert!(parley_speech::local_servers::recall(said, &heard) >= 0.9, "whisper heard {heard:?} for {said:?}");
    let call = crate::calls::wait_for(&app, &ws.live, &id, crate::calls::ended).await;
    assert_eq!(
        (call["provider"].clone(), call["status"].clone(), call["ended_reason"].clone()),
        (json!("web"), json!("completed"), json!("caller_hangup")),
        "{call}"
    );
}
