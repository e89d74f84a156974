//! The agent runtime end to end: inbound messages routed to an agent that
//! answers on the same channel (through the builtin engine), once per
//! burst, recorded as runs; and silence when a person handles the
//! conversation.

use std::time::{Duration, Instant};

use parley_domain::Mode;
use serde_json::{Value, json};

use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::Receiver;
use crate::support::*;

/// An agent answering every message on every channel, without tools (the
/// builtin engine then answers without asking for a person).
pub(crate) async fn catch_all_agent(app: &TestApp, key: &str, name: &str) -> Value {
    catch_all_agent_with(app, key, json!({"name": name, "tools": []})).await
}

/// An agent created from `body`, answering every message on every channel.
pub(crate) async fn catch_all_agent_with(app: &TestApp, key: &str, body: Value) -> Value {
    let agent = app.create_agent(key, body).await;
    let r = app
        .post(
            key,
            &format!("/api/v1/agents/{}/triggers", agent["id"]),
            json!({"event": "message.received", "channel": "*"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    agent
}

/// Polls `check` every 50 ms until it gives a value (panics after 15 s,
/// naming `what`).
pub(crate) async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The conversation's outbound messages once some arrived and none more
/// came for `settle` (panics after 15 s without any).
pub(crate) async fn replies(app: &TestApp, key: &str, conversation: i64, settle: Duration) -> Vec<Value> {
    let outbound = || async {
        let page = app.get(key, &format!("/api/v1/conversations/{conversation}/messages?limit=100")).await.body;
        page["items"].as_array().unwrap().iter().filter(|m| m["direction"] == "outbound").cloned().collect::<Vec<_>>()
    };
    eventually("the agent never answered", || async { Some(outbound().await).filter(|o| !o.is_empty()) }).await;
    tokio::time::sleep(settle).await;
    outbound().await
}

/// A local chat-completions server: `answer(n)` answers its `n`th request
/// (from 0). Returns its `/v1` URL and how many requests it received.
async fn engine_server(
    answer: impl Fn(usize) -> axum::response::Response + Clone + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let (seen, answer) = (seen.clone(), answer.clone());
            async move { answer(seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst)) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, count)
}

/// A chat-completions server that refuses every request with `status`
/// (OpenAI's error shape).
async fn refusing_engine(status: u16) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use axum::response::IntoResponse;
    engine_server(move |_| {
        let body = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
        (axum::http::StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
    })
    .await
}

/// A chat-completions server streaming `text` in two chunks with usage (20
/// tokens in, 5 out); with `stall_first`, its first answer streams one chunk
/// and then stalls (the server asking is killed meanwhile).
async fn streaming_engine(
    text: &'static str,
    stall_first: bool,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use futures::StreamExt;
    engine_server(move |n| {
        let chunk = |delta: Value| {
            let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
            format!("data: {c}\n\n")
        };
        let (head, tail) = text.split_at(text.len() / 2);
        let usage = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
            "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}});
        let frames = vec![
            chunk(json!({"content": head})),
            chunk(json!({"content": tail})),
            format!("data: {usage}\n\n"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let stream = futures::stream::iter(frames.into_iter().map(Ok::<_, std::convert::Infallible>));
        let body = if n == 0 && stall_first {
            axum::body::Body::from_stream(stream.take(1).chain(futures::stream::pending()))
        } else {
            axum::body::Body::from_stream(stream)
        };
        axum::response::Response::builder().header("content-type", "text/event-stream").body(body).unwrap()
    })
    .await
}

/// A chat-completions server that streams `text` only after `delay`.
async fn slow_engine(text: &'static str, delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    engine_server(move |_| answer_once(text, tokio::time::sleep(delay))).await
}

/// A streamed answer of `text` in one chunk, sent once `ready` resolves.
fn answer_once(text: &'static str, ready: impl Future<Output = ()> + Send + 'static) -> axum::response::Response {
    let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
    let frames = format!("data: {chunk}\n\ndata: [DONE]\n\n");
    let later = futures::stream::once(async move {
        ready.await;
        Ok::<_, std::convert::Infallible>(frames)
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(later))
        .unwrap()
}

/// A chat-completions server that streams `text` once `gate` lets it
/// through (one permit per answer): answers held back and released together.
async fn gated_engine(
    text: &'static str,
    gate: std::sync::Arc<tokio::sync::Semaphore>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    engine_server(move |_| {
        let gate = gate.clone();
        answer_once(text, async move { gate.acquire().await.unwrap().forget() })
    })
    .await
}

/// A workspace with a member (Ana), a channel sending to a local receiver,
/// and an agent on the `openai` engine answering every message.
struct Desk {
    ws: Ws,
    ana: i64,
    rx: Receiver,
    ch: i64,
    secret: parley_events::signing::WebhookSecret,
}

impl Desk {
    async fn open(app: &TestApp) -> Desk {
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", "correct horse battery", ws.id, parley_domain::user::Role::Member).await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(app, &ws.live, &rx.url).await;
        catch_all_agent_with(app, &ws.live, json!({"name": "Ava", "text_engine": "openai", "tools": []})).await;
        Desk { ws, ana, rx, ch, secret }
    }
}

both_backends! {
    // Answers the engine gives at the same moment are written in shared
    // transactions (group commit; a few batches side by side on
    // PostgreSQL), each reply once and sent once; one whose conversation a
    // person took meanwhile is left out of its group alone.
    async fn replies_ready_together_are_written_together_each_once(backend) {
        const N: usize = 8;
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let (engine_url, requests) = gated_engine("On it", gate.clone()).await;
        let app = TestApp::spawn_with(backend, move |s| {
            s.agents.debounce_ms = 0;
            s.metrics.token = Some(crate::metrics::TOKEN.into());
            s.text_engines.insert("openai".into(), json!({"base_url": engine_url, "api_key": "sk-test", "model": "gpt-test", "max_retries": 0}));
        }).await;
        let Desk { ws, ana, rx, ch, secret } = Desk::open(&app).await;
        let mut conversations = Vec::new();
        for i in 0..N {
            let r = inbound(&app, ch, &secret, json!({"from": format!("user-{i}"), "text": "Hi", "external_id": format!("m-{i}")})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            conversations.push(r.body["conversation_id"].as_i64().unwrap());
        }
        eventually("the engine was asked for every answer", || async {
            (requests.load(std::sync::atomic::Ordering::SeqCst) == N).then_some(())
        }).await;
        // While the engine thinks, Ana takes the first conversation over.
        let h = app.post(&ws.live, &format!("/api/v1/conversations/{}/handoff", conversations[0]), json!({"to": "human", "reason": "Ana has it"})).await;
        assert_eq!(h.status, 201, "{}", h.text);
        let accepted = app.post(&ws.live, &format!("/api/v1/handoffs/{}/accept", h.body["id"]), json!({"user_id": ana})).await;
        assert_eq!(accepted.status, 200, "{}", accepted.text);

        gate.add_permits(N);
        let runs = eventually("every run ended", || async {
            let runs = app.get(&ws.live, "/api/v1/agent-runs?limit=100").await.body["items"].as_array().unwrap().clone();
            runs.iter().all(|r| r["status"] != "queued" && r["status"] != "running").then_some(runs)
        }).await;
        assert_eq!(runs.len(), N);
        for run in &runs {
            let taken = run["conversation_id"] == conversations[0];
            assert_eq!(run["status"], if taken { "canceled" } else { "completed" }, "{run}");
        }
        for (i, conversation) in conversations.iter().enumerate() {
            let page = app.get(&ws.live, &format!("/api/v1/conversations/{conversation}/messages")).await.body;
            let outbound: Vec<&Value> = page["items"].as_array().unwrap().iter().filter(|m| m["direction"] == "outbound").collect();
            assert_eq!(outbound.len(), usize::from(i > 0), "conversation {i}: {outbound:?}");
        }
        let delivered = eventually("every reply was delivered", || async {
            let got = rx.received();
            (got.len() >= N - 1).then_some(got)
        }).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(rx.received().len(), N - 1, "each reply is sent once: {delivered:?}");

        let text = crate::metrics::scrape(&app).await;
        let sum = crate::metrics::sample(&text, r#"parley_group_commit_writes_sum{kind="reply"}"#);
        let groups = crate::metrics::sample(&text, r#"parley_group_commit_writes_count{kind="reply"}"#).unwrap();
        assert_eq!(sum, Some((N - 1) as f64), "the taken-over answer is in no committed group");
        assert!(groups < (N - 1) as f64, "{N} answers released together went in {groups} transactions");
        let sent = crate::metrics::sample(&text, r#"parley_group_commit_writes_sum{kind="sent"}"#);
        assert_eq!(sent, Some((N - 1) as f64));
        crate::metrics::promtool_accepts(&text);
    }
}

both_backends! {
    async fn a_person_taking_over_while_the_engine_thinks_drops_the_agents_answer(backend) {
        let (engine_url, requests) = slow_engine("Too late", Duration::from_millis(1500)).await;
        let app = TestApp::spawn_with(backend, move |s| {
            s.agents.debounce_ms = 0;
            s.text_engines.insert("openai".into(), json!({"base_url": engine_url, "api_key": "sk-test", "model": "gpt-test", "max_retries": 0}));
        }).await;
        let Desk { ws, ana, rx, ch, secret } = Desk::open(&app).await;
        let r = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await;
        let conversation = r.body["conversation_id"].as_i64().unwrap();
        eventually("the engine was asked", || async { (requests.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(()) }).await;

        // While the engine thinks, Ana takes the conversation over.
        let h = app.post(&ws.live, &format!("/api/v1/conversations/{conversation}/handoff"), json!({"to": "human", "reason": "Ana has it"})).await;
        assert_eq!(h.status, 201, "{}", h.text);
        let accepted = app.post(&ws.live, &format!("/api/v1/handoffs/{}/accept", h.body["id"]), json!({"user_id": ana})).await;
        assert_eq!(accepted.status, 200, "{}", accepted.text);

        // The engine answers after the takeover: the answer is dropped, never sent.
        let run = eventually("the run ended", || async {
            let run = app.get(&ws.live, "/api/v1/agent-runs").await.body["items"][0].clone();
            (run["status"] != "queued" && run["status"] != "running").then_some(run)
        }).await;
        assert_eq!(run["status"], "canceled", "{run}");
        assert!(run["error"].as_str().unwrap().contains("took over"), "{run}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let page = app.get(&ws.live, &format!("/api/v1/conversations/{conversation}/messages")).await.body;
        let outbound: Vec<&Value> = page["items"].as_array().unwrap().iter().filter(|m| m["direction"] == "outbound").collect();
        assert!(outbound.is_empty(), "the agent's late answer was written: {outbound:?}");
        assert!(rx.received().is_empty(), "the provider was sent the late answer");
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    async fn an_agent_answers_a_burst_of_messages_once_on_the_same_channel(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 400).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let agent = catch_all_agent(&app, &ws.live, "Ava").await;

        let mut conversation = 0;
        for (n, text) in ["Hi", "I have a question", "about my order"].iter().enumerate() {
            let r = inbound(&app, ch, &secret, json!({"from": "user-1", "text": text, "external_id": format!("m-{n}")})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            conversation = r.body["conversation_id"].as_i64().unwrap();
        }
        let answered = replies(&app, &ws.live, conversation, Duration::from_millis(1200)).await;
        assert_eq!(answered.len(), 1, "one answer to the burst: {answered:?}");
        let reply = &answered[0];
        assert_eq!(reply["author"], json!({"type": "agent", "id": agent["id"]}));
        assert_eq!(reply["text"], parley_engines::builtin::NO_ANSWER, "the builtin engine, with no knowledge, asks for a person");

        // The reply left on the channel it came in on.
        eventually("the reply was never delivered", || async { (!rx.received().is_empty()).then_some(()) }).await;
        let sent: Value = serde_json::from_slice(&rx.received()[0].body).unwrap();
        assert_eq!((sent["data"]["text"].clone(), sent["data"]["to"].clone()), (reply["text"].clone(), json!("user-1")));

        // One run, completed, with its figures.
        let runs = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={conversation}")).await.body;
        assert_eq!(runs["total"], 1, "{runs}");
        let run = &runs["items"][0];
        assert_eq!((run["status"].clone(), run["trigger"].clone()), (json!("completed"), json!("message")));
        assert_eq!((run["engine"].clone(), run["model"].clone()), (json!("builtin"), json!("builtin")));
        assert_eq!((run["agent_id"].clone(), run["reply_message_id"].clone()), (agent["id"].clone(), reply["id"].clone()));
        assert!(run["input_tokens"].as_i64().unwrap() > 0 && run["output_tokens"].as_i64().unwrap() > 0, "{run}");
        assert!(run["total_ms"].as_i64().is_some() && run["completed_at"].is_string(), "{run}");
        let one = app.get(&ws.live, &format!("/api/v1/agent-runs/{}", run["id"])).await;
        assert_eq!(one.body, *run);
        let events = app.events(ws.id, Mode::Live, "agent.run.completed").await;
        assert_eq!((events.len(), events[0].data["id"].clone()), (1, run["id"].clone()));
        // Runs are scoped: test mode and filters see none of it.
        assert_eq!(app.get(&ws.test, "/api/v1/agent-runs").await.body["total"], 0);
        assert_eq!(app.get(&ws.test, &format!("/api/v1/agent-runs/{}", run["id"])).await.status, 404);
        assert_eq!(app.get(&ws.live, "/api/v1/agent-runs?status=failed").await.body["total"], 0);

        // A later message is answered again.
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hello?", "external_id": "m-9"})).await;
        eventually("the second message was never answered", || async {
            (app.get(&ws.live, "/api/v1/agent-runs?status=completed").await.body["total"] == 2).then_some(())
        })
        .await;
    }

    async fn no_agent_answers_while_a_person_handles_the_conversation(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 100).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        catch_all_agent(&app, &ws.live, "Ava").await;
        let first = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await;
        let conversation = first.body["conversation_id"].as_i64().unwrap();
        assert_eq!(replies(&app, &ws.live, conversation, Duration::from_millis(300)).await.len(), 1);
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{conversation}/handoff"), json!({"to": "human", "reason": "VIP"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Still there?", "external_id": "m-2"})).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(replies(&app, &ws.live, conversation, Duration::ZERO).await.len(), 1, "no answer while handed off");
        assert_eq!(app.get(&ws.live, "/api/v1/agent-runs").await.body["total"], 1, "no run was queued");
    }

    async fn messages_nobody_is_routed_to_get_no_answer(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 100).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let paused = catch_all_agent(&app, &ws.live, "Paused").await;
        app.patch(&ws.live, &format!("/api/v1/agents/{}", paused["id"]), json!({"status": "paused"})).await;
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await;
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(app.get(&ws.live, "/api/v1/agent-runs").await.body["total"], 0);
        assert!(rx.received().is_empty());
    }

    async fn a_failing_engine_ends_in_the_fallback_message_and_a_handoff_never_silence(backend) {
        let (engine_url, requests) = refusing_engine(401).await;
        let app = TestApp::spawn_with(backend, move |s| {
            s.agents.debounce_ms = 100;
            s.text_engines.insert("openai".into(), json!({"base_url": engine_url, "api_key": "sk-wrong", "model": "gpt-test", "max_retries": 0}));
        }).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "text_engine": "openai"})).await;
        app.post(&ws.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "message.received", "channel": "*"})).await;
        let r = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await;
        let conversation = r.body["conversation_id"].as_i64().unwrap();

        let answered = replies(&app, &ws.live, conversation, Duration::from_millis(300)).await;
        assert_eq!(answered.len(), 1, "{answered:?}");
        assert_eq!(answered[0]["text"], parley_services::agents::runs::FALLBACK_MESSAGE);
        assert_eq!(answered[0]["author"], json!({"type": "agent", "id": agent["id"]}));
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1, "a 401 is permanent: asked once");

        let run = &app.get(&ws.live, "/api/v1/agent-runs").await.body["items"][0];
        assert_eq!(run["status"], "failed");
        let error = run["error"].as_str().unwrap();
        assert!(error.contains("401") && error.contains("Incorrect API key"), "{error}");
        assert_eq!(app.events(ws.id, Mode::Live, "agent.run.failed").await.len(), 1);

        let handoffs = app.get(&ws.live, &format!("/api/v1/handoffs?conversation_id={conversation}")).await.body;
        assert_eq!(handoffs["total"], 1, "{handoffs}");
        assert_eq!((handoffs["items"][0]["to"].clone(), handoffs["items"][0]["requested_by"].clone()), (json!("human"), json!({"type": "agent", "id": agent["id"]})));
        assert!(handoffs["items"][0]["reason"].as_str().unwrap().starts_with("The agent could not answer: "));
        // Handed off, the agent is silent.
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hello?", "external_id": "m-2"})).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(replies(&app, &ws.live, conversation, Duration::ZERO).await.len(), 1);
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    async fn a_server_killed_mid_run_answers_once_after_restart(backend) {
        use std::sync::atomic::Ordering;
        let database = fresh_database(backend).await;
        let (engine_url, asked) = streaming_engine("Your order ships today.", true).await;
        let rx = Receiver::start().await;
        let env: Vec<(String, String)> = vec![
            ("PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS".into(), "true".into()),
            // A run's lease is the larger of these and twice the courier's
            // timeout (30 s by default): 6 s here.
            ("PARLEY_MESSAGES__LEASE_SECONDS".into(), "2".into()),
            ("PARLEY_MESSAGES__TIMEOUT_SECONDS".into(), "3".into()),
            ("PARLEY_MESSAGES__POLL_INTERVAL_MS".into(), "100".into()),
            ("PARLEY_AGENTS__DEBOUNCE_MS".into(), "50".into()),
            ("PARLEY_TEXT_ENGINES__MODEL__BASE_URL".into(), engine_url),
            ("PARLEY_TEXT_ENGINES__MODEL__MODEL".into(), "gpt-test".into()),
            ("PARLEY_TEXT_ENGINES__MODEL__IDLE_TIMEOUT_S".into(), "120".into()),
        ];
        let start = |url: String, env: Vec<(String, String)>| async move {
            tokio::task::spawn_blocking(move || {
                let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                crate::cli::start_server_with(&url, &env)
            })
            .await
            .unwrap()
        };
        let mut first = start(database.url.clone(), env.clone()).await;
        let base = format!("http://127.0.0.1:{}", first.port);
        let key = crate::cli::key_in(&first.banner, "live").unwrap();
        let client = reqwest::Client::new();
        let call = |method: reqwest::Method, path: String, body: Value| {
            let (client, key, base) = (client.clone(), key.clone(), base.clone());
            async move {
                let r = client.request(method, format!("{base}{path}")).header("X-API-Key", key).header("Idempotency-Key", ulid::Ulid::new().to_string()).json(&body).send().await.unwrap();
                assert!(r.status().is_success(), "{path}: {}", r.status());
                r.json::<Value>().await.unwrap()
            }
        };
        let channel = call(reqwest::Method::POST, "/api/v1/channels".into(), json!({"type": "api", "name": "Backend", "config": {"url": rx.url}})).await;
        let agent = call(reqwest::Method::POST, "/api/v1/agents".into(), json!({"name": "Ava", "text_engine": "model"})).await;
        call(reqwest::Method::POST, format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "message.received", "channel": "*"})).await;

        let secret = parley_events::signing::WebhookSecret::parse(channel["secret"].as_str().unwrap()).unwrap();
        let body = serde_json::to_vec(&json!({"from": "user-1", "text": "Where is my order?", "external_id": "m-1"})).unwrap();
        let ts = crate::conversations::now_s();
        let r = client
            .post(format!("{base}/api/v1/channels/{}/inbound", channel["id"]))
            .header("webhook-id", "msg_1")
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", secret.sign("msg_1", ts, &body))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let conversation = r.json::<Value>().await.unwrap()["conversation_id"].as_i64().unwrap();

        // The run is mid-stream: kill the server.
        eventually("the engine was never asked", || async { (asked.load(Ordering::SeqCst) > 0).then_some(()) }).await;
        std::process::Command::new("kill").args(["-KILL", &first.child.id().to_string()]).status().unwrap();
        let _ = first.child.wait();

        let second = start(database.url.clone(), env).await;
        // The dead server's lease on the run lapses first (6 s); the rest is margin for a busy machine.
        let got = rx.wait_for(1, Duration::from_secs(45)).await;
        assert_eq!(got[0].json()["data"]["text"], "Your order ships today.");
        // Settle, then count: one reply, one run, the engine asked twice.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(rx.received().len(), 1, "the reply was sent once");
        let base = format!("http://127.0.0.1:{}", second.port);
        let get = |path: String| {
            let (client, key, base) = (client.clone(), key.clone(), base.clone());
            async move { client.get(format!("{base}{path}")).header("X-API-Key", key).send().await.unwrap().json::<Value>().await.unwrap() }
        };
        let messages = get(format!("/api/v1/conversations/{conversation}/messages?limit=100")).await;
        let outbound: Vec<&Value> = messages["items"].as_array().unwrap().iter().filter(|m| m["direction"] == "outbound").collect();
        assert_eq!(outbound.len(), 1, "{messages}");
        let runs = get("/api/v1/agent-runs".into()).await;
        assert_eq!((runs["total"].clone(), runs["items"][0]["status"].clone()), (json!(1), json!("completed")), "{runs}");
        assert_eq!((runs["items"][0]["input_tokens"].clone(), runs["items"][0]["output_tokens"].clone()), (json!(20), json!(5)));
        assert_eq!(asked.load(Ordering::SeqCst), 2, "asked again after the restart, once");
    }

    async fn handoff_keywords_and_the_turn_limit_hand_the_conversation_to_a_person(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 100).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let agent = catch_all_agent(&app, &ws.live, "Ava").await;
        let r = app.patch(&ws.live, &format!("/api/v1/agents/{}", agent["id"]), json!({"handoff": {"keywords": ["refund", "speak to a human"], "max_turns": 2}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let wait_handoff = |conversation: i64| handoff_of(&app, ws.live.clone(), conversation);

        // A keyword: handed off at once, no answer.
        let c1 = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "I want to SPEAK TO A HUMAN please", "external_id": "k-1"})).await.body["conversation_id"].as_i64().unwrap();
        let h = wait_handoff(c1).await;
        assert_eq!((h["to"].clone(), h["status"].clone()), (json!("human"), json!("requested")));
        assert_eq!(h["reason"], "The contact wrote \"speak to a human\"");
        assert_eq!(h["requested_by"], json!({"type": "agent", "id": agent["id"]}));
        assert_eq!(replies_now(&app, &ws.live, c1).await, 0);
        let run = &app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={c1}")).await.body["items"][0];
        assert_eq!(run["status"], "canceled");
        assert_eq!(app.events(ws.id, Mode::Live, "handoff.requested").await.len(), 1);

        // The turn limit: two answers, then a person.
        let mut c2 = 0;
        for n in 0..3 {
            c2 = inbound(&app, ch, &secret, json!({"from": "user-2", "text": format!("question {n}"), "external_id": format!("t-{n}")})).await.body["conversation_id"].as_i64().unwrap();
            if n < 2 {
                eventually("a turn was never answered", || async { (replies_now(&app, &ws.live, c2).await > n).then_some(()) }).await;
            }
        }
        let h = wait_handoff(c2).await;
        assert_eq!(h["reason"], "The agent reached its limit of 2 turns");
        assert_eq!(replies_now(&app, &ws.live, c2).await, 2);
        let conversation = app.get(&ws.live, &format!("/api/v1/conversations/{c2}")).await.body;
        assert_ne!(conversation["handler"], "agent", "{conversation}");

        // Given back, each starts afresh: the keyword written before the
        // handoff and the turns before it are not a reason to hand off again.
        for (c, n) in [(c1, 0), (c2, 2)] {
            let r = app.post(&ws.live, &format!("/api/v1/conversations/{c}/give-back"), json!({"agent_id": agent["id"]})).await;
            assert_eq!(r.status, 200, "{}", r.text);
            let from = if c == c1 { "user-1" } else { "user-2" };
            inbound(&app, ch, &secret, json!({"from": from, "text": "One more thing", "external_id": format!("after-{c}")})).await;
            eventually("the agent given back never answered", || async { (replies_now(&app, &ws.live, c).await > n).then_some(()) }).await;
            assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{c}")).await.body["handler"], "agent");
        }
        assert_eq!(app.events(ws.id, Mode::Live, "handoff.requested").await.len(), 2, "no handoff again");
    }
}

both_backends! {
    async fn a_priced_engine_charges_each_run_once_and_an_empty_balance_hands_off(backend) {
        let (engine_url, asked) = streaming_engine("Happy to help.", false).await;
        let app = TestApp::spawn_with(backend, move |s| {
            s.agents.debounce_ms = 100;
            s.text_engines.insert("paid".into(), json!({"base_url": engine_url, "model": "gpt-test",
                "pricing": {"input_per_1k_cents": 100, "output_per_1k_cents": 1000}}));
        }).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "text_engine": "paid"})).await;
        app.post(&ws.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "message.received", "channel": "*"})).await;
        let before = app.get(&ws.live, "/api/v1/billing/balance").await.body["balance_cents"].as_i64().unwrap();
        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let answered = replies(&app, &ws.live, c, Duration::from_millis(300)).await;
        assert_eq!(answered[0]["text"], "Happy to help.");
        let run = app.get(&ws.live, "/api/v1/agent-runs").await.body["items"][0].clone();
        // 20 tokens at 100 ¢/1k plus 5 at 1000 ¢/1k: 2 + 5 = 7 cents.
        assert_eq!((run["cost_cents"].clone(), run["model"].clone()), (json!(7), json!("gpt-test")));
        let after = app.get(&ws.live, "/api/v1/billing/balance").await.body["balance_cents"].as_i64().unwrap();
        assert_eq!(before - after, 7);
        let entries = app.get(&ws.live, "/api/v1/billing/transactions?limit=1").await.body;
        assert_eq!((entries["items"][0]["amount_cents"].clone(), entries["items"][0]["resource_type"].clone()), (json!(-7), json!("agent_run")));
        assert_eq!(entries["items"][0]["resource_id"], run["id"].to_string());

        // A workspace with nothing left: the agent hands off instead of asking the engine.
        let poor = app.workspace_with_credit("Poor", 50).await;
        let (pch, psecret) = sending_channel(&app, &poor.live, &rx.url).await;
        let pagent = app.create_agent(&poor.live, json!({"name": "Ava", "text_engine": "paid"})).await;
        app.post(&poor.live, &format!("/api/v1/agents/{}/triggers", pagent["id"]), json!({"event": "message.received", "channel": "*"})).await;
        assert_eq!(app.get(&poor.live, "/api/v1/billing/balance").await.body["available_cents"], 0);
        let pc = inbound(&app, pch, &psecret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let handoff = handoff_of(&app, poor.live.clone(), pc).await;
        assert_eq!(handoff["reason"], "The workspace's balance is empty");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1, "the engine was not asked for the empty workspace");
    }
}

/// The conversation's one handoff, once there is one.
pub(crate) async fn handoff_of(app: &TestApp, key: String, conversation: i64) -> Value {
    eventually("no handoff was requested", || async {
        let h = app.get(&key, &format!("/api/v1/handoffs?conversation_id={conversation}")).await.body;
        (h["total"] == 1).then(|| h["items"][0].clone())
    })
    .await
}

/// How many outbound messages the conversation has now.
async fn replies_now(app: &TestApp, key: &str, conversation: i64) -> usize {
    let page = app.get(key, &format!("/api/v1/conversations/{conversation}/messages?limit=100")).await.body;
    page["items"].as_array().unwrap().iter().filter(|m| m["direction"] == "outbound").count()
}

both_backends! {
    async fn test_mode_traffic_is_answered_by_test_mode_agents_only(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 100).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let live_agent = catch_all_agent(&app, &ws.live, "Live Ava").await;
        let test_agent = catch_all_agent(&app, &ws.test, "Test Ava").await;
        let (ch, secret) = sending_channel(&app, &ws.test, &rx.url).await;
        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let answered = replies(&app, &ws.test, c, Duration::from_millis(300)).await;
        assert_eq!(answered.len(), 1);
        assert_eq!(answered[0]["author"], json!({"type": "agent", "id": test_agent["id"]}));
        let runs = app.get(&ws.test, "/api/v1/agent-runs").await.body;
        assert_eq!((runs["total"].clone(), runs["items"][0]["agent_id"].clone()), (json!(1), test_agent["id"].clone()));
        // Live sees none of it, and its agent never ran.
        assert_eq!(app.get(&ws.live, "/api/v1/agent-runs").await.body["total"], 0);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/agent-runs?agent_id={}", live_agent["id"])).await.body["total"], 0);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{c}")).await.status, 404);
        assert_eq!(app.events(ws.id, Mode::Live, "agent.run.completed").await.len(), 0);
        assert_eq!(app.events(ws.id, Mode::Test, "agent.run.completed").await.len(), 1);
    }
}
