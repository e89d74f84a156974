//! The playground: `POST /api/v1/agents/{id}/chat` asks an agent what it
//! would answer, without touching any channel. The conversation is given
//! as messages, or read from an existing conversation (which is not
//! changed). It is a run like any other (`trigger: playground`): recorded,
//! retrieved from the agent's knowledge, with its tools (those that would
//! reach the contact or change the workspace only say what they would do),
//! and billed when the engine is priced.

use std::collections::BTreeMap;
use std::time::Instant;

use parley_domain::Scope;
use parley_domain::agent::{AgentStatus, RunToolCall, RunTrigger};
use parley_domain::ids::AgentId;
use parley_domain::validation::{
    FieldError, LocPart, Parsed, integer, list_of, loc, object, one_of, parse_object, string,
};
use parley_engines::{ChatMessage, EngineError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use utoipa::ToSchema;

use parley_services::agents::{context, prompt};
use parley_services::{ServiceError, ServiceResult, Services};

use crate::session::{self, Turn};
use crate::tools::{Place, Stop};

const MAX_MESSAGES: usize = 100;

/// One message of a playground conversation.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaygroundMessage {
    /// `user` (the contact) or `assistant` (the agent).
    #[schema(schema_with = parley_domain::schema::chat_role)]
    pub role: String,
    /// 1–10,000 characters.
    #[schema(min_length = 1, max_length = 10000)]
    pub content: String,
}

/// `POST /api/v1/agents/{agent_id}/chat`: `messages` or `conversation_id`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"messages": [{"role": "user", "content": "When do you open?"}], "variables": {"plan": "pro"}}))]
pub struct ChatRequest {
    /// The conversation so far, oldest first, ending with the user's turn
    /// (1–100).
    #[schema(nullable = false, min_items = 1, max_items = 100)]
    pub messages: Option<Vec<PlaygroundMessage>>,
    /// Answer this conversation's latest message instead (nothing is sent).
    #[schema(nullable = false, minimum = 1)]
    pub conversation_id: Option<i64>,
    /// Values for the prompt's `{{variables}}` (strings, numbers or booleans).
    #[serde(default)]
    #[schema(schema_with = parley_domain::schema::variable_values)]
    pub variables: BTreeMap<String, String>,
}

pub fn parse_chat(body: Value) -> Parsed<ChatRequest> {
    parse_object(body, loc(&["body"]), |r| {
        let messages = r.optional("messages", list_of(MAX_MESSAGES, |v, l| message()(v, l)));
        let conversation_id = r.optional("conversation_id", integer(1, i64::MAX));
        let variables = r.optional("variables", parley_services::agents::variable_values()).unwrap_or_default();
        match (&messages, conversation_id) {
            (None, None) => r.push_error(FieldError::new(
                loc(&["body"]),
                "value_error.chat.missing",
                "send messages or conversation_id",
            )),
            (Some(_), Some(_)) => r.push_error(FieldError::new(
                r.loc_of("conversation_id"),
                "value_error.chat.both",
                "send messages or conversation_id, not both",
            )),
            (Some(m), None) if m.is_empty() => {
                r.push_error(FieldError::list_too_short(r.loc_of("messages"), 1));
            }
            (Some(m), None) if m.last().is_some_and(|m| m.role != "user") => {
                let mut at = r.loc_of("messages");
                at.extend([LocPart::Index(m.len() - 1), LocPart::Key("role".into())]);
                r.push_error(FieldError::new(at, "value_error.chat.last", "the last message must be the user's"));
            }
            _ => {}
        }
        Some(ChatRequest { messages, conversation_id, variables })
    })
}

fn message() -> impl FnOnce(Value, &[LocPart]) -> Parsed<PlaygroundMessage> {
    object(|r| {
        let role = r.required("role", one_of(&["user", "assistant"]));
        let content = r.required("content", string(1, 10_000));
        Some(PlaygroundMessage { role: role?, content: content? })
    })
}

/// What the agent answered.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChatAnswer {
    /// The agent's reply (empty when it only acted, e.g. handed off).
    pub message: String,
    /// The run that recorded it (`GET /api/v1/agent-runs/{id}`).
    pub run_id: i64,
    /// The tools the agent called, with their results.
    pub tool_calls: Vec<RunToolCall>,
    /// `handoff_to_human`'s reason, when the agent would hand off.
    pub handoff: Option<String>,
    /// Whether the agent would end the conversation.
    pub end_conversation: bool,
    /// The knowledge passages the agent was given for this answer, best
    /// first (empty without knowledge collections or a match).
    pub passages: Vec<RetrievedPassage>,
}

/// A knowledge passage an answer was given.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct RetrievedPassage {
    /// The document's title or file name.
    pub source: String,
    pub text: String,
    /// The ranking score (higher is closer).
    pub score: f64,
}

/// Asks the agent; deltas of its reply go to `deltas` as they come.
pub async fn chat(
    svc: &Services,
    scope: Scope,
    agent_id: AgentId,
    request: ChatRequest,
    deltas: Option<UnboundedSender<String>>,
) -> ServiceResult<ChatAnswer> {
    let started = Instant::now();
    let (agent, context) = context::for_playground(svc, scope, agent_id, request.conversation_id).await?;
    let agent_id = agent_id.get();
    let context::AnswerContext { conversation, history, contact, workspace_name, blocks, team_notes, .. } = context;
    if agent.status == AgentStatus::Archived {
        return Err(ServiceError::Conflict(format!("Agent {agent_id} is archived; restore it to try it")));
    }
    let engine = svc.config().text_engines.get(&agent.text_engine).cloned().ok_or_else(|| {
        ServiceError::Conflict(format!("The agent's text engine {:?} is not configured", agent.text_engine))
    })?;
    if !session::funded(svc, scope, engine.as_ref()).await? {
        return Err(ServiceError::PaymentRequired("The balance is empty; add credits to run this engine".into()));
    }

    let context = prompt::Context {
        agent: &agent,
        workspace_name: &workspace_name,
        conversation: conversation.as_ref(),
        contact: contact.as_ref(),
        now: parley_domain::Timestamp::now(),
    };
    let vars = prompt::variables(prompt::builtin_variables(context), &request.variables);
    let system = prompt::system_prompt(&agent, &blocks, &vars, prompt::Missing::Empty)?;
    let memory: Vec<ChatMessage> = match &request.messages {
        Some(messages) => messages
            .iter()
            .map(|m| match m.role.as_str() {
                "user" => ChatMessage::User(m.content.clone()),
                _ => ChatMessage::Assistant { text: m.content.clone(), tool_calls: Vec::new() },
            })
            .collect(),
        None => prompt::memory(&history, svc.config().runtime.memory_tokens),
    };
    let question = memory.iter().rev().find_map(|m| match m {
        ChatMessage::User(text) => Some(text.clone()),
        _ => None,
    });
    let knowledge =
        parley_services::knowledge::retrieve(svc, scope, &agent.knowledge_collection_ids, question.as_deref()).await?;
    let mut messages = Vec::new();
    let system = prompt::with_team_notes(prompt::with_passages(system.prompt, &knowledge.passages), &team_notes);
    if !system.is_empty() {
        messages.push(ChatMessage::System(system));
    }
    messages.extend(memory);

    let conversation_id = conversation.as_ref().map(|c| c.item.id);
    let (run, model) =
        session::open_run(svc, scope, &agent, engine.as_ref(), RunTrigger::Playground, conversation_id, None).await?;
    let place = Place {
        scope,
        run_id: run.id,
        conversation_id,
        contact_id: conversation.as_ref().and_then(|c| c.contact_id),
        call_id: None,
        transferable: false,
        dry_run: true,
    };
    let passages = knowledge
        .passages
        .iter()
        .map(|p| RetrievedPassage { source: p.source.clone(), text: p.text.clone(), score: p.score })
        .collect();
    let turn = Turn { agent: &agent, place, messages, passages: knowledge.passages, on_call: false };
    let run_id = run.id;
    let run = session::RunOf { scope, run_id, model: &model, started, what: "playground" };
    let thought = session::think_and_record(svc, &engine, turn, deltas.as_ref(), run, &knowledge.hits).await?;
    match thought {
        Ok(thought) => Ok(ChatAnswer {
            message: thought.text,
            run_id,
            handoff: match &thought.stop {
                Some(Stop::Handoff(reason)) => Some(reason.clone()),
                _ => None,
            },
            end_conversation: thought.stop == Some(Stop::EndConversation),
            tool_calls: thought.tool_calls,
            passages,
        }),
        Err(EngineError::Transient(e) | EngineError::Permanent(e)) => {
            Err(ServiceError::Unavailable(format!("The text engine failed: {e}")))
        }
    }
}
