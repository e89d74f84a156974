//! The agent on a call: an [`AgentSession`] of the runtime. Each thing the
//! caller says is a turn (`trigger: call_turn`): the agent's prompt with the
//! call's variables, the call so far as memory, knowledge retrieved for
//! the utterance, tools, and the engine's words streamed to the voice as
//! they come. Each turn is recorded as a run and billed like one.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;
use parley_domain::Scope;
use parley_domain::agent::RunTrigger;
use parley_engines::{ChatMessage, TextEngine};
use parley_voice::session::{AgentSession, Input, Output};
use tracing::Instrument;

use parley_services::calls::CallAgent;

use crate::session::{self, Turn};
use crate::tools::{Place, Stop};
use parley_services::{ServiceResult, Services};

/// The runtime's session on one call.
pub struct CallSession {
    svc: Services,
    scope: Scope,
    call: Arc<CallAgent>,
    memory: Arc<Mutex<Memory>>,
}

/// What was said so far, as the model reads it. A turn's reply joins it
/// when the model has finished; if the caller interrupted the turn first,
/// only the words they heard join it.
#[derive(Default)]
struct Memory {
    messages: Vec<ChatMessage>,
    /// The turn being answered, and whether its reply is in `messages`.
    turn: u64,
    written: bool,
    /// The words heard of turn `turn` when the caller interrupted it.
    heard: Option<String>,
}

impl Memory {
    fn lock(memory: &Mutex<Memory>) -> std::sync::MutexGuard<'_, Memory> {
        memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Turn `turn`'s reply, as far as the caller heard it.
    fn reply(&mut self, turn: u64, said: String) {
        if turn != self.turn {
            return;
        }
        let text = self.heard.take().unwrap_or(said);
        self.messages.push(ChatMessage::Assistant { text, tool_calls: vec![] });
        self.written = true;
    }

    /// The caller cut the current turn off after `played`.
    fn interrupted(&mut self, played: String) {
        if self.written {
            if let Some(ChatMessage::Assistant { text, .. }) = self.messages.last_mut() {
                *text = played;
            }
        } else {
            self.heard = Some(played);
        }
    }
}

impl CallSession {
    pub fn new(svc: Services, scope: Scope, call: CallAgent) -> Self {
        Self { svc, scope, call: Arc::new(call), memory: Arc::default() }
    }
}

/// What the agent says when the caller has been silent (`silence_reprompt_s`).
const REPROMPT: &str = "Are you still there?";

impl AgentSession for CallSession {
    fn greeting(&mut self) -> Option<String> {
        let greeting = self
            .call
            .first_message
            .clone()
            .unwrap_or_else(|| format!("Hello, this is {}. How can I help?", self.call.agent.name));
        let mut memory = Memory::lock(&self.memory);
        memory.turn += 1;
        let turn = memory.turn;
        memory.reply(turn, greeting.clone());
        Some(greeting)
    }

    fn respond(&mut self, input: Input) -> BoxStream<'static, Output> {
        let end = || futures::stream::once(async { Output::EndOfTurn }).boxed();
        let heard = match input {
            Input::UserSaid(text) => text,
            Input::Keys(keys) => format!("[The caller pressed {keys} on the phone's keypad]"),
            Input::TransferFailed { to, why } => format!(
                "[Your warm transfer to {to} did not go through: {why}. You are back with the caller: \
                 tell them, and offer what else you can do]"
            ),
            Input::Timeout => {
                let mut memory = Memory::lock(&self.memory);
                memory.turn += 1;
                let turn = memory.turn;
                memory.reply(turn, REPROMPT.to_owned());
                return futures::stream::iter([Output::TextDelta(REPROMPT.to_owned()), Output::EndOfTurn]).boxed();
            }
            Input::Interrupted { played } => {
                Memory::lock(&self.memory).interrupted(played);
                return end();
            }
            // Tools run inside the turn.
            Input::ToolResult { .. } => return end(),
        };
        let this_turn = {
            let mut memory = Memory::lock(&self.memory);
            memory.messages.push(ChatMessage::User(heard.clone()));
            memory.turn += 1;
            memory.written = false;
            memory.heard = None;
            memory.turn
        };
        let (deltas, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let (act_tx, act_rx) = tokio::sync::oneshot::channel::<Option<Output>>();
        let (svc, scope, call, memory) = (self.svc.clone(), self.scope, self.call.clone(), self.memory.clone());
        // In the call's span: the turn's run is in the call's trace.
        tokio::spawn(
            async move {
                let (said, stop) = match turn(&svc, scope, &call, &memory, &heard, &deltas).await {
                    Ok(done) => done,
                    Err(e) => {
                        tracing::error!(error = %e, "a call's agent turn could not be recorded");
                        (String::new(), None)
                    }
                };
                // A turn that produced nothing says the fallback, so the caller is never met with silence.
                let said = if said.is_empty() && stop.is_none() {
                    let fallback = svc.config().runtime.fallback_message.clone();
                    let _ = deltas.send(fallback.clone());
                    fallback
                } else {
                    said
                };
                Memory::lock(&memory).reply(this_turn, said);
                let action = match stop {
                    Some(Stop::EndCall) => Some(Output::EndCall),
                    Some(Stop::Transfer(to)) => Some(Output::Transfer(to)),
                    _ => None,
                };
                let _ = act_tx.send(action);
            }
            .in_current_span(),
        );
        let deltas =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|t| (Output::TextDelta(t), rx)) });
        let action = futures::stream::once(async move { act_rx.await.ok().flatten() }).filter_map(|a| async { a });
        deltas.chain(action).chain(futures::stream::once(async { Output::EndOfTurn })).boxed()
    }
}

/// One turn: asks the engine, records the run; what the agent said.
async fn turn(
    svc: &Services,
    scope: Scope,
    call: &CallAgent,
    memory: &Mutex<Memory>,
    heard: &str,
    deltas: &tokio::sync::mpsc::UnboundedSender<String>,
) -> ServiceResult<(String, Option<Stop>)> {
    let started = Instant::now();
    let agent = &call.agent;
    let Some(engine) = svc.config().text_engines.get(&agent.text_engine).cloned() else {
        return Ok((String::new(), None));
    };
    let engine: Arc<dyn TextEngine> = engine;
    let (run, model) = session::open_run(
        svc,
        scope,
        agent,
        engine.as_ref(),
        RunTrigger::CallTurn,
        call.conversation_id,
        Some(&call.call_id),
    )
    .await?;
    if !session::funded(svc, scope, engine.as_ref()).await? {
        // As for a message: no engine without funds, and a person is asked
        // (the handoff is recorded while the call goes on). The caller
        // hears the fallback message.
        let mut work = svc.begin().await?;
        session::cancel_unfunded(&mut work, scope, run.id).await?;
        if let Some(conversation_id) = call.conversation_id {
            crate::runs::request_handoff(&mut work, scope, agent, conversation_id, session::NO_FUNDS).await?;
            work.conversation_changed(conversation_id);
        }
        svc.commit(work).await?;
        return Ok((String::new(), None));
    }
    let knowledge =
        parley_services::knowledge::retrieve(svc, scope, &agent.knowledge_collection_ids, Some(heard)).await?;
    let mut messages = Vec::new();
    let system = parley_services::agents::prompt::with_passages(call.system.clone(), &knowledge.passages);
    if !system.is_empty() {
        messages.push(ChatMessage::System(system));
    }
    messages.extend(Memory::lock(memory).messages.iter().cloned());
    let place = Place {
        scope,
        run_id: run.id,
        conversation_id: call.conversation_id,
        contact_id: call.contact_id,
        call_id: Some(call.call_id.clone()),
        transferable: call.transferable,
        dry_run: false,
    };
    let turn = Turn { agent, place, messages, passages: knowledge.passages, on_call: true };
    let run = session::RunOf { scope, run_id: run.id, model: &model, started, what: "call turn" };
    let thought = session::think_and_record(svc, &engine, turn, Some(deltas), run, &knowledge.hits).await?;
    Ok(thought.map(|t| (t.text, t.stop)).unwrap_or_default())
}
