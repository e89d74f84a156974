//! One agent turn, whatever asked for it (an inbound message's run, the
//! playground, a call): the engine's streamed answer, with the tool calls
//! it makes carried out and fed back, up to [`MAX_TOOL_ROUNDS`] rounds.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use parley_domain::Scope;
use parley_domain::agent::{Agent, AgentRun, RetrievalHit, RunStatus, RunToolCall, RunTrigger};
use parley_domain::event::EventType;
use parley_engines::{ChatMessage, ChatRequest, EngineError, EngineEvent, Passage, TextEngine, Usage};
use parley_store::Tx;
use parley_store::repo::agent_runs::{self as run_repo, NewRun, RunEnd};
use parley_store::repo::events;
use tokio::sync::mpsc::UnboundedSender;
use tracing::Instrument;

use parley_services::{ServiceResult, Services};

use crate::event_data;
use crate::host::ToolHost;
use crate::tools::{self, Place, Stop};

/// Rounds of tool calls per turn. A model still calling tools after the
/// last gets no more; a tool that ends the turn (a handoff, the end of the
/// conversation) ends the rounds, with one last request without tools for
/// the model's closing words if it had not said any.
pub const MAX_TOOL_ROUNDS: usize = 5;

/// What a turn starts from.
pub struct Turn<'a> {
    pub agent: &'a Agent,
    pub place: Place,
    /// The system prompt and the conversation's memory, oldest first.
    pub messages: Vec<ChatMessage>,
    pub passages: Vec<Passage>,
    /// Whether the call tools (`end_call`, `transfer_call`) are offered.
    pub on_call: bool,
}

/// What a turn produced.
#[derive(Debug, Default)]
pub struct Thought {
    /// The reply, trimmed (empty when the model only acted).
    pub text: String,
    pub usage: Usage,
    pub first_token_ms: Option<i64>,
    pub tool_calls: Vec<RunToolCall>,
    /// A tool call that ends the turn (a handoff, the end of the conversation).
    pub stop: Option<Stop>,
}

/// Runs a turn. Text deltas are sent to `deltas` as they come (the
/// playground's stream, a call's speech). An engine error ends the turn:
/// the caller retries or falls back.
pub async fn think(
    host: &dyn ToolHost,
    engine: &Arc<dyn TextEngine>,
    turn: Turn<'_>,
    deltas: Option<&UnboundedSender<String>>,
) -> Result<Thought, EngineError> {
    // OpenTelemetry's GenAI conventions: the run, its model calls and tool calls.
    let model = turn.agent.model.clone().unwrap_or_else(|| engine.model().to_owned());
    let provider = engine.kind().as_str();
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = %format_args!("invoke_agent {}", turn.agent.name),
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %turn.agent.id,
        gen_ai.agent.name = %turn.agent.name,
        gen_ai.provider.name = provider,
        gen_ai.request.model = %model,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        error.type = tracing::field::Empty,
        parley.agent_run.id = turn.place.run_id,
        parley.conversation.id = turn.place.conversation_id,
        parley.call.id = turn.place.call_id.as_deref(),
        workspace_id = turn.place.scope.workspace_id,
    );
    let thought = rounds(host, engine, turn, deltas, &model).instrument(span.clone()).await;
    match &thought {
        Ok(t) => {
            span.record("gen_ai.usage.input_tokens", t.usage.input_tokens as i64);
            span.record("gen_ai.usage.output_tokens", t.usage.output_tokens as i64);
        }
        Err(e) => {
            span.record("otel.status_code", "error");
            span.record("error.type", e.kind());
        }
    }
    thought
}

/// [`think`]'s rounds: ask the model, carry out its tool calls, ask again.
async fn rounds(
    host: &dyn ToolHost,
    engine: &Arc<dyn TextEngine>,
    turn: Turn<'_>,
    deltas: Option<&UnboundedSender<String>>,
    model: &str,
) -> Result<Thought, EngineError> {
    let specs = tools::specs(turn.agent, turn.on_call);
    let mut messages = turn.messages;
    let mut thought = Thought::default();
    let asked = Instant::now();
    for round in 0..=MAX_TOOL_ROUNDS {
        // After a tool that ends the turn (unless the model already spoke),
        // and after the last round of tools, the model may only speak.
        if thought.stop.is_some() && !thought.text.is_empty() {
            break;
        }
        let closing = thought.stop.is_some() || round == MAX_TOOL_ROUNDS;
        let request = ChatRequest {
            model: turn.agent.model.clone(),
            messages: messages.clone(),
            tools: if closing { Vec::new() } else { specs.clone() },
            passages: turn.passages.clone(),
        };
        let chat = tracing::info_span!(
            "chat",
            otel.name = %format_args!("chat {model}"),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = engine.kind().as_str(),
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut usage = Usage::default();
        let streamed: Result<(), EngineError> = async {
            let mut stream = engine.stream(request);
            while let Some(event) = stream.next().await {
                match event? {
                    EngineEvent::Delta(delta) => {
                        thought.first_token_ms.get_or_insert(asked.elapsed().as_millis() as i64);
                        if let Some(out) = deltas {
                            let _ = out.send(delta.clone());
                        }
                        text.push_str(&delta);
                    }
                    EngineEvent::ToolCall(call) => calls.push(call),
                    EngineEvent::Usage(u) => {
                        usage.input_tokens += u.input_tokens;
                        usage.output_tokens += u.output_tokens;
                    }
                }
            }
            Ok(())
        }
        .instrument(chat.clone())
        .await;
        chat.record("gen_ai.usage.input_tokens", usage.input_tokens as i64);
        chat.record("gen_ai.usage.output_tokens", usage.output_tokens as i64);
        thought.usage.input_tokens += usage.input_tokens;
        thought.usage.output_tokens += usage.output_tokens;
        if let Err(e) = streamed {
            chat.record("otel.status_code", "error");
            chat.record("error.type", e.kind());
            return Err(e);
        }
        let said = text.trim();
        if !said.is_empty() {
            if !thought.text.is_empty() {
                thought.text.push_str("\n\n");
            }
            thought.text.push_str(said);
        }
        if calls.is_empty() || closing {
            break;
        }
        messages.push(ChatMessage::Assistant { text: text.clone(), tool_calls: calls.clone() });
        for call in &calls {
            let done = tools::execute(host, turn.agent, &turn.place, call).await;
            thought.tool_calls.push(done.record);
            messages.push(ChatMessage::Tool { call_id: call.id.clone(), content: done.content });
            if thought.stop.is_none() {
                thought.stop = done.stop;
            }
        }
    }
    Ok(thought)
}

/// Why a run was not asked of its engine when the money ran out.
pub const NO_FUNDS: &str = "The workspace's balance is empty";

/// Whether `engine` may be asked on the workspace's money: a free engine
/// always, a priced one while the balance lasts.
pub async fn funded(svc: &Services, scope: Scope, engine: &dyn TextEngine) -> ServiceResult<bool> {
    let priced = engine.pricing() != parley_engines::Pricing::default();
    Ok(!priced || parley_services::billing::run_funded(svc, scope).await?)
}

/// Opens a run (queued) of `agent` on `engine`, in a unit of work of its
/// own; and the model it asks (the agent's, else the engine's).
pub async fn open_run(
    svc: &Services,
    scope: Scope,
    agent: &Agent,
    engine: &dyn TextEngine,
    trigger: RunTrigger,
    conversation_id: Option<i64>,
    call_id: Option<&str>,
) -> ServiceResult<(AgentRun, String)> {
    let model = agent.model.clone().unwrap_or_else(|| engine.model().to_owned());
    let new_run =
        NewRun { agent_id: agent.id, conversation_id, call_id, trigger, engine: &agent.text_engine, model: &model };
    let run = svc.transaction(async |work| Ok(run_repo::insert(work, scope, &new_run).await?)).await?;
    Ok((run, model))
}

/// Ends a run its workspace could not pay for: canceled, with [`NO_FUNDS`].
pub async fn cancel_unfunded(tx: &mut Tx, scope: Scope, run_id: i64) -> ServiceResult<()> {
    let end = RunEnd { status: RunStatus::Canceled, error: Some(NO_FUNDS), ..RunEnd::empty("") };
    run_repo::finish(tx, scope, run_id, &end).await?;
    Ok(())
}

/// The run a turn is recorded on, when its reply is not sent as a message.
pub struct RunOf<'a> {
    pub scope: Scope,
    pub run_id: i64,
    pub model: &'a str,
    pub started: Instant,
    /// Named in the ledger entry (`playground`, `call turn`).
    pub what: &'static str,
}

/// A turn whose reply is not a message (the playground's answer, a call's
/// speech): [`think`], then [`record`] it on its run in a unit of work of
/// its own. An engine error is recorded too, and given back.
pub async fn think_and_record(
    svc: &Services,
    engine: &Arc<dyn TextEngine>,
    turn: Turn<'_>,
    deltas: Option<&UnboundedSender<String>>,
    run: RunOf<'_>,
    retrieval: &[RetrievalHit],
) -> ServiceResult<Result<Thought, EngineError>> {
    let thought = think(svc, engine, turn, deltas).await;
    let end = TurnEnd {
        run_id: run.run_id,
        engine: engine.as_ref(),
        model: run.model,
        started: run.started,
        thought: thought.as_ref(),
        retrieval,
        reply_message_id: None,
        what: Some(run.what),
    };
    svc.transaction(async |work| record(work, svc, run.scope, end).await).await?;
    Ok(thought)
}

/// How a turn ended, for its run.
pub struct TurnEnd<'a> {
    pub run_id: i64,
    pub engine: &'a dyn TextEngine,
    pub model: &'a str,
    pub started: Instant,
    pub thought: Result<&'a Thought, &'a EngineError>,
    pub retrieval: &'a [RetrievalHit],
    pub reply_message_id: Option<i64>,
    /// Named in the ledger entry (`playground`, `call turn`), if anything.
    pub what: Option<&'a str>,
}

/// Records a turn in its run's transaction: its figures (or its error),
/// the charge for its tokens (once per run), and `agent.run.completed` or
/// `agent.run.failed`.
pub async fn record(tx: &mut Tx, svc: &Services, scope: Scope, end: TurnEnd<'_>) -> ServiceResult<()> {
    let total_ms = Some(end.started.elapsed().as_millis() as i64);
    let (kind, finished) = match end.thought {
        Ok(thought) => {
            let usage = thought.usage;
            let figures = RunEnd {
                status: RunStatus::Completed,
                model: end.model,
                input_tokens: usage.input_tokens as i64,
                output_tokens: usage.output_tokens as i64,
                cost_cents: end.engine.pricing().cost_cents(usage),
                first_token_ms: thought.first_token_ms,
                total_ms,
                reply_message_id: end.reply_message_id,
                tool_calls: &thought.tool_calls,
                retrieval: end.retrieval,
                error: None,
            };
            let finished = run_repo::finish(tx, scope, end.run_id, &figures).await?;
            let mut tokens = format!("{} tokens in, {} out", usage.input_tokens, usage.output_tokens);
            if let Some(what) = end.what {
                tokens.push_str(&format!(" ({what})"));
            }
            parley_services::billing::charge_run(
                tx,
                scope,
                &svc.config().billing,
                end.run_id,
                figures.cost_cents,
                &tokens,
            )
            .await?;
            (EventType::AgentRunCompleted, finished)
        }
        Err(e) => {
            let error = e.to_string();
            let figures = RunEnd { status: RunStatus::Failed, total_ms, error: Some(&error), ..RunEnd::empty("") };
            (EventType::AgentRunFailed, run_repo::finish(tx, scope, end.run_id, &figures).await?)
        }
    };
    // A run ended already (by an earlier holder) is read as it is.
    let done = match finished {
        Some(run) => Some(run),
        None => run_repo::get(tx, scope, end.run_id).await?,
    };
    if let Some(done) = done {
        events::append(tx, scope, kind, event_data(&done)?).await?;
    }
    Ok(())
}
