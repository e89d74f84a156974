//! Text engines: the language models agents think with, behind one
//! streaming trait ([`TextEngine`]).
//!
//! - [`openai`]: any OpenAI-compatible chat-completions server (OpenAI,
//!   Azure OpenAI, Groq, Together, vLLM, llama.cpp, Ollama), streamed over
//!   SSE with tool calls and the final `usage`, through `async-openai`
//!   (retries on 429 and 5xx honouring `Retry-After`).
//! - [`builtin`]: offline and deterministic: it answers from the passages
//!   retrieved for the question, quoted with their source, and asks for a
//!   person when it finds none.
//!
//! Engines are configured by name ([`EngineSettings`], `[text_engines.NAME]`)
//! and collected in [`Engines`]; `builtin` is always there. An engine knows
//! nothing of agents or conversations: the runtime assembles the
//! [`ChatRequest`] and acts on the [`EngineEvent`]s.

pub mod builtin;
pub mod openai;
mod settings;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use serde::Serialize;

pub use parley_domain::agent::{EngineKind, TextEngineInfo};
pub use settings::{EngineSettings, OpenAiSettings, Pricing, SettingsError};

/// One message of the conversation the model sees.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    System(String),
    User(String),
    /// What the model said before, with the tools it called.
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result, answering the call with this id.
    Tool {
        call_id: String,
        content: String,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A tool call the model made; `arguments` is the JSON text it wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A passage retrieved from the agent's knowledge for this turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Passage {
    /// Where it comes from (a document's title or file name).
    pub source: String,
    pub text: String,
    pub score: f64,
}

/// What the runtime asks of an engine.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// Overrides the engine's model (an agent's `model`).
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// The passages retrieved for the last user message (already in the
    /// system prompt for models; the builtin engine answers from them).
    pub passages: Vec<Passage>,
}

/// Tokens used by one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// What an engine streams back, in order: text deltas, then the tool calls
/// (each complete), then the usage, then the end of the stream.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    Delta(String),
    ToolCall(ToolCall),
    Usage(Usage),
}

/// Why an engine gave no (complete) answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// Worth trying again later (rate limits and server errors that
    /// outlasted the engine's own retries, timeouts, a broken stream).
    #[error("{0}")]
    Transient(String),
    /// Will fail again as it stands (bad credentials, an unknown model, a
    /// request the server refuses).
    #[error("{0}")]
    Permanent(String),
}

impl EngineError {
    /// `transient` or `permanent` (a trace's `error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            EngineError::Transient(_) => "transient",
            EngineError::Permanent(_) => "permanent",
        }
    }
}

/// A stream of an engine's answer.
pub type EngineStream = BoxStream<'static, Result<EngineEvent, EngineError>>;

/// A language model.
pub trait TextEngine: Send + Sync {
    fn kind(&self) -> EngineKind;
    /// The model asked for when the request names none.
    fn model(&self) -> &str;
    /// What the engine charges per 1,000 tokens.
    fn pricing(&self) -> Pricing;
    /// Streams the answer to `request`. Dropping the stream cancels it.
    fn stream(&self, request: ChatRequest) -> EngineStream;
}

/// The configured engines by name; `builtin` is always among them.
#[derive(Clone)]
pub struct Engines {
    engines: BTreeMap<String, Arc<dyn TextEngine>>,
}

impl Engines {
    /// Builds the engines from their settings, adding `builtin`.
    pub fn from_settings(settings: &BTreeMap<String, EngineSettings>) -> Result<Engines, SettingsError> {
        let mut engines: BTreeMap<String, Arc<dyn TextEngine>> = BTreeMap::new();
        for (name, s) in settings {
            let engine: Arc<dyn TextEngine> = match s {
                EngineSettings::Builtin => Arc::new(builtin::BuiltinEngine),
                EngineSettings::Openai(o) => Arc::new(
                    openai::OpenAiEngine::new(o.clone())
                        .map_err(|e| SettingsError(format!("text_engines.{name}: {e}")))?,
                ),
            };
            engines.insert(name.clone(), engine);
        }
        engines.entry("builtin".to_owned()).or_insert_with(|| Arc::new(builtin::BuiltinEngine));
        Ok(Engines { engines })
    }

    /// Only `builtin`.
    pub fn builtin_only() -> Engines {
        Engines::from_settings(&BTreeMap::new()).expect("builtin needs no settings")
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn TextEngine>> {
        self.engines.get(name)
    }

    /// The engines' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.engines.keys().cloned().collect()
    }

    /// The engines as listed to users, sorted by name.
    pub fn list(&self) -> Vec<TextEngineInfo> {
        self.engines
            .iter()
            .map(|(name, e)| TextEngineInfo { name: name.clone(), kind: e.kind(), model: e.model().to_owned() })
            .collect()
    }
}

impl std::fmt::Debug for Engines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.list()).finish()
    }
}

/// A documented estimate of a text's tokens (about four characters each,
/// OpenAI's rule of thumb for English), for engines that report no usage.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}
