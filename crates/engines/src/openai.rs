//! Any OpenAI-compatible chat-completions server, streamed.
//!
//! The request is written in OpenAI's documented wire format (messages,
//! `tools` as functions, `stream_options.include_usage`) and sent through
//! `async-openai`'s bring-your-own-types calls, which add the base URL, the
//! key, SSE parsing and retries (429, 5xx and connection errors, honouring
//! `Retry-After`). This module turns the `chat.completion.chunk`s into
//! [`EngineEvent`]s: content deltas as they come, tool calls once their
//! argument fragments are complete, and the usage of the final chunk. A
//! stream that stalls or outlives the engine's timeout is an error.

use std::collections::BTreeMap;
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use async_openai::middleware::retry::OpenAIRetryLayer;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::{
    ChatMessage, ChatRequest, EngineError, EngineEvent, EngineKind, EngineStream, OpenAiSettings, Pricing, TextEngine,
    ToolCall, Usage,
};

pub struct OpenAiEngine {
    settings: OpenAiSettings,
    client: Client<OpenAIConfig>,
}

impl OpenAiEngine {
    pub fn new(settings: OpenAiSettings) -> Result<Self, String> {
        // Nothing from the process environment (OPENAI_ORG_ID, …) leaks in.
        let config = OpenAIConfig::new()
            .with_api_base(&settings.base_url)
            .with_api_key(settings.api_key.clone().unwrap_or_default())
            .with_org_id("")
            .with_project_id("");
        let http = reqwest013::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("the HTTP client cannot be built: {e}"))?;
        let service = tower::ServiceBuilder::new()
            .layer(OpenAIRetryLayer::new(settings.max_retries as usize))
            .service(ReqwestService::new(http));
        let client = Client::with_config(config).with_http_service(service);
        Ok(Self { settings, client })
    }

    /// The request body, in OpenAI's wire format.
    pub fn body(&self, request: &ChatRequest) -> Value {
        let model = request.model.as_deref().unwrap_or(&self.settings.model);
        let mut body = json!({
            "model": model,
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(t) = self.settings.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(m) = self.settings.max_tokens {
            body["max_tokens"] = json!(m);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        body
    }
}

fn wire_message(m: &ChatMessage) -> Value {
    match m {
        ChatMessage::System(text) => json!({"role": "system", "content": text}),
        ChatMessage::User(text) => json!({"role": "user", "content": text}),
        ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
            json!({"role": "assistant", "content": text})
        }
        ChatMessage::Assistant { text, tool_calls } => json!({
            "role": "assistant",
            "content": if text.is_empty() { Value::Null } else { json!(text) },
            "tool_calls": tool_calls.iter().map(|c| json!({
                "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments},
            })).collect::<Vec<_>>(),
        }),
        ChatMessage::Tool { call_id, content } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
    }
}

impl TextEngine for OpenAiEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Openai
    }
    fn model(&self) -> &str {
        &self.settings.model
    }
    fn pricing(&self) -> Pricing {
        self.settings.pricing
    }
    fn stream(&self, request: ChatRequest) -> EngineStream {
        let body = self.body(&request);
        let client = self.client.clone();
        let (timeout, idle) = (self.settings.timeout, self.settings.idle_timeout);
        let deadline = Instant::now() + timeout;
        let events = async_stream(move |tx: Sender| async move {
            let chat = client.chat();
            let opened = tokio::time::timeout_at(deadline, chat.create_stream_byot::<Value, Chunk>(body));
            let mut chunks = match opened.await {
                Err(_) => {
                    return tx.fail(EngineError::Transient(format!("no answer within {}s", timeout.as_secs()))).await;
                }
                Ok(Err(e)) => return tx.fail(classify(e)).await,
                Ok(Ok(chunks)) => chunks,
            };
            let mut calls = ToolCalls::default();
            let mut usage = None;
            loop {
                let next = tokio::time::timeout_at(deadline.min(Instant::now() + idle), chunks.next()).await;
                let chunk = match next {
                    Err(_) => {
                        return tx.fail(EngineError::Transient("the engine's stream stalled".to_owned())).await;
                    }
                    Ok(None) => break,
                    Ok(Some(Err(e))) => return tx.fail(classify(e)).await,
                    Ok(Some(Ok(chunk))) => chunk,
                };
                if let Some(u) = chunk.usage {
                    usage = Some(Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens });
                }
                for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
                    if let Some(text) = choice.delta.content.filter(|t| !t.is_empty())
                        && !tx.send(EngineEvent::Delta(text)).await
                    {
                        return;
                    }
                    for fragment in choice.delta.tool_calls.unwrap_or_default() {
                        calls.add(fragment);
                    }
                }
            }
            for call in calls.finish() {
                if !tx.send(EngineEvent::ToolCall(call)).await {
                    return;
                }
            }
            if let Some(usage) = usage {
                tx.send(EngineEvent::Usage(usage)).await;
            }
        });
        events.boxed()
    }
}

/// Errors as the runtime acts on them.
fn classify(e: OpenAIError) -> EngineError {
    match e {
        OpenAIError::ApiError(r) => {
            let status = r.status_code.as_u16();
            let said = format!("the engine answered {status}: {}", r.api_error.message.trim());
            if status == 408 || status == 409 || status == 429 || status >= 500 {
                EngineError::Transient(said)
            } else {
                EngineError::Permanent(said)
            }
        }
        OpenAIError::InvalidArgument(m) => EngineError::Permanent(m),
        other => EngineError::Transient(other.to_string()),
    }
}

/// One `chat.completion.chunk` (only what Parley reads).
#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Delta,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<ToolFragment>>,
}

#[derive(Debug, Deserialize)]
struct ToolFragment {
    index: u32,
    id: Option<String>,
    function: Option<FunctionFragment>,
}

#[derive(Debug, Deserialize)]
struct FunctionFragment {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// Tool calls assembled from fragments: the first fragment of each index
/// carries its id and name, later ones more of the arguments.
#[derive(Default)]
struct ToolCalls(BTreeMap<u32, ToolCall>);

impl ToolCalls {
    fn add(&mut self, f: ToolFragment) {
        let call = self.0.entry(f.index).or_insert_with(|| ToolCall {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Some(id) = f.id {
            call.id = id;
        }
        if let Some(function) = f.function {
            if let Some(name) = function.name {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn finish(self) -> impl Iterator<Item = ToolCall> {
        self.0.into_values().enumerate().map(|(n, mut call)| {
            if call.id.is_empty() {
                // Some servers leave ids out; the runtime needs one to answer.
                call.id = format!("call_{n}");
            }
            call
        })
    }
}

/// The sending half of [`async_stream`].
struct Sender(tokio::sync::mpsc::Sender<Result<EngineEvent, EngineError>>);

impl Sender {
    /// False once the stream was dropped (the caller cancelled).
    async fn send(&self, event: EngineEvent) -> bool {
        self.0.send(Ok(event)).await.is_ok()
    }

    async fn fail(&self, error: EngineError) {
        let _ = self.0.send(Err(error)).await;
    }
}

/// A stream fed by `producer`, which runs as a task until it returns or
/// the stream is dropped (dropping aborts it, which cancels the request).
fn async_stream<F>(
    producer: impl FnOnce(Sender) -> F,
) -> impl futures::Stream<Item = Result<EngineEvent, EngineError>> + Send + 'static
where
    F: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let task = tokio::spawn(producer(Sender(tx)));
    let guard = AbortOnDrop(task);
    futures::stream::unfold(
        (rx, guard),
        |(mut rx, guard)| async move { rx.recv().await.map(|item| (item, (rx, guard))) },
    )
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
