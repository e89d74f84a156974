//! The openai engine against a local server that speaks OpenAI's documented
//! chat-completions wire format: streamed `chat.completion.chunk`s with
//! `choices[].delta`, tool-call deltas split across chunks, `usage` in the
//! last chunk, `[DONE]`; errors with `Retry-After`; a stalled stream. Each
//! test checks the requests Parley sent as well as what it made of the
//! answers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::HeaderMap;
use futures::StreamExt;
use parley_engines::openai::OpenAiEngine;
use parley_engines::{
    ChatMessage, ChatRequest, EngineError, EngineEvent, EngineSettings, OpenAiSettings, TextEngine, ToolCall, ToolSpec,
    Usage,
};
use serde_json::{Value, json};

/// What the server answers to one request.
enum Script {
    /// SSE `data:` payloads, then `[DONE]`; with `stall`, it stops after
    /// that many payloads and keeps the connection open.
    Stream {
        events: Vec<Value>,
        stall: Option<usize>,
    },
    Status {
        status: u16,
        retry_after: Option<u64>,
        body: Value,
    },
}

#[derive(Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone, Default)]
struct Server {
    scripts: Arc<Mutex<VecDeque<Script>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(scripts: Vec<Script>) -> (Server, String) {
        let server = Server { scripts: Arc::new(Mutex::new(scripts.into())), ..Server::default() };
        let state = server.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let state = state.clone();
            async move {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                state.seen.lock().unwrap().push(Seen {
                    path: parts.uri.path().to_owned(),
                    headers: parts.headers,
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                });
                let script = state.scripts.lock().unwrap().pop_front().expect("a scripted answer");
                answer(script)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (server, url)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn answer(script: Script) -> axum::response::Response {
    match script {
        Script::Status { status, retry_after, body } => {
            let mut r = axum::response::Response::builder().status(status).header("content-type", "application/json");
            if let Some(s) = retry_after {
                r = r.header("retry-after", s.to_string());
            }
            r.body(Body::from(body.to_string())).unwrap()
        }
        Script::Stream { events, stall } => {
            let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            if stall.is_none() {
                frames.push("data: [DONE]\n\n".to_owned());
            }
            let keep = stall.unwrap_or(frames.len());
            let sent = futures::stream::iter(frames.into_iter().take(keep).map(Ok::<_, std::convert::Infallible>));
            let body = if stall.is_some() {
                Body::from_stream(sent.chain(futures::stream::pending()))
            } else {
                Body::from_stream(sent)
            };
            axum::response::Response::builder().header("content-type", "text/event-stream").body(body).unwrap()
        }
    }
}

fn chunk(delta: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn engine(url: &str, patch: impl FnOnce(&mut OpenAiSettings)) -> OpenAiEngine {
    let EngineSettings::Openai(mut s) = EngineSettings::parse(
        "test",
        json!({"base_url": url, "api_key": "sk-test", "model": "gpt-test", "temperature": 0.2, "max_tokens": 300}),
    )
    .unwrap() else {
        unreachable!()
    };
    patch(&mut s);
    OpenAiEngine::new(s).unwrap()
}

async fn run(engine: &OpenAiEngine, request: ChatRequest) -> Vec<Result<EngineEvent, EngineError>> {
    engine.stream(request).collect().await
}

fn hello() -> ChatRequest {
    ChatRequest { messages: vec![ChatMessage::User("Hello".into())], ..ChatRequest::default() }
}

#[tokio::test]
async fn a_streamed_answer_yields_text_tool_calls_split_across_chunks_and_usage() {
    let (server, url) = Server::start(vec![Script::Stream {
        events: vec![
            chunk(json!({"role": "assistant", "content": ""})),
            chunk(json!({"content": "Let me "})),
            chunk(json!({"content": "check."})),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "lookup_contact", "arguments": ""}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"fie"}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ld\": \"email\"}"}},
                                        {"index": 1, "id": "call_b", "type": "function", "function": {"name": "search", "arguments": "{}"}}]})),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                   "choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}}),
        ],
        stall: None,
    }])
    .await;
    let engine = engine(&url, |_| {});
    let request = ChatRequest {
        model: Some("gpt-override".into()),
        messages: vec![
            ChatMessage::System("You are Ava.".into()),
            ChatMessage::User("Who am I?".into()),
            ChatMessage::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_0".into(),
                    name: "lookup_contact".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::Tool { call_id: "call_0".into(), content: "{\"name\": \"Ana\"}".into() },
        ],
        tools: vec![ToolSpec {
            name: "lookup_contact".into(),
            description: "Reads the contact".into(),
            parameters: json!({"type": "object", "properties": {"field": {"type": "string"}}}),
        }],
        passages: vec![],
    };
    let events: Vec<EngineEvent> = run(&engine, request).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        vec![
            EngineEvent::Delta("Let me ".into()),
            EngineEvent::Delta("check.".into()),
            EngineEvent::ToolCall(ToolCall {
                id: "call_a".into(),
                name: "lookup_contact".into(),
                arguments: "{\"field\": \"email\"}".into()
            }),
            EngineEvent::ToolCall(ToolCall { id: "call_b".into(), name: "search".into(), arguments: "{}".into() }),
            EngineEvent::Usage(Usage { input_tokens: 42, output_tokens: 7 }),
        ]
    );

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-test");
    assert!(seen[0].headers.get("openai-organization").is_none(), "no organisation header from the environment");
    assert_eq!(
        seen[0].body,
        json!({
            "model": "gpt-override",
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0.2,
            "max_tokens": 300,
            "messages": [
                {"role": "system", "content": "You are Ava."},
                {"role": "user", "content": "Who am I?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "lookup_contact", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_0", "content": "{\"name\": \"Ana\"}"},
            ],
            "tools": [{"type": "function", "function": {"name": "lookup_contact", "description": "Reads the contact",
                "parameters": {"type": "object", "properties": {"field": {"type": "string"}}}}}],
        })
    );
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    let rate_limited =
        json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
    let (server, url) = Server::start(vec![
        Script::Status { status: 429, retry_after: Some(1), body: rate_limited },
        Script::Stream { events: vec![chunk(json!({"content": "Hi"}))], stall: None },
    ])
    .await;
    let started = Instant::now();
    let events = run(&engine(&url, |_| {}), hello()).await;
    assert_eq!(events, vec![Ok(EngineEvent::Delta("Hi".into()))]);
    assert!(started.elapsed() >= Duration::from_secs(1), "Retry-After was not honoured: {:?}", started.elapsed());
    assert_eq!(server.seen().len(), 2);
    assert_eq!(server.seen()[0].body, server.seen()[1].body, "the retry sends the same request");
}

#[tokio::test]
async fn server_errors_that_outlast_the_retries_are_transient() {
    let down = || Script::Status { status: 500, retry_after: Some(0), body: json!({"error": {"message": "boom"}}) };
    let (server, url) = Server::start(vec![down(), down()]).await;
    let events = run(&engine(&url, |s| s.max_retries = 1), hello()).await;
    match &events[..] {
        [Err(EngineError::Transient(e))] => assert!(e.contains("500"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 2, "one try and one retry");
}

#[tokio::test]
async fn refused_credentials_are_permanent_and_not_retried() {
    let refused = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}});
    let (server, url) = Server::start(vec![Script::Status { status: 401, retry_after: None, body: refused }]).await;
    let events = run(&engine(&url, |_| {}), hello()).await;
    match &events[..] {
        [Err(EngineError::Permanent(e))] => assert!(e.contains("401") && e.contains("Incorrect API key"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn a_stalled_stream_fails_after_the_idle_timeout() {
    let (_server, url) = Server::start(vec![Script::Stream {
        events: vec![chunk(json!({"content": "Thinking"})), chunk(json!({"content": " more"}))],
        stall: Some(1),
    }])
    .await;
    let started = Instant::now();
    let events = run(&engine(&url, |s| s.idle_timeout = Duration::from_secs(1)), hello()).await;
    assert_eq!(events[0], Ok(EngineEvent::Delta("Thinking".into())));
    assert_eq!(events[1], Err(EngineError::Transient("the engine's stream stalled".into())));
    assert_eq!(events.len(), 2);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}
