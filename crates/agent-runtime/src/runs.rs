//! Agent runs carried out: an agent answering a conversation, as the
//! durable `agent.run` job (queued by `parley_services::agents::routing`).
//!
//! An inbound message that an agent must answer queues a run (`queued`)
//! and its `agent.run` job in the message's own transaction, unless the
//! conversation already has a run waiting: messages that arrive in quick
//! succession are answered once. The job waits until the conversation has
//! been quiet for the debounce time, then builds the prompt (system prompt
//! and memory), streams the engine's answer, and writes the reply (queued
//! for its channel), the run's figures and the job's completion in one
//! transaction: a process killed mid-run answers once, after its lease
//! lapses. A failing engine is retried on the run schedule; after the last
//! attempt, or a permanent failure, the run is `failed`, and the contact is
//! never left in silence: the agent sends the fallback message and hands
//! the conversation to a person.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parley_domain::agent::RetrievalHit;
use parley_domain::agent::{AgentRun, AgentStatus, RunStatus};
use parley_domain::conversation::{Author, AuthorType, ConversationStatus, Direction, Handler, HandoffTarget};
use parley_domain::event::EventType;
use parley_domain::ids::ConversationId;
use parley_domain::{Scope, Timestamp};
use parley_engines::{ChatMessage, EngineError, TextEngine};
use parley_jobs::{Job, Outcome, RetryPolicy};
use parley_services::agents::runs::{KIND, RETRY_SCHEDULE_S, RunJob};
use parley_services::agents::{context, prompt, routing};
use parley_services::group_commit::GroupCommit;
use parley_services::messaging::conversations::{self, UpdateConversation};
use parley_services::messaging::handoffs::{self, CreateHandoff};
use parley_services::messaging::messages::{self, Recipient, SendMessage, Sender};
use parley_services::{ServiceError, ServiceResult, Services, Work};
use parley_store::Tx;
use parley_store::repo::agent_runs::{self as repo, RunEnd};
use parley_store::repo::{conversations as conversation_repo, events};

use crate::event_data;
use crate::session;
use crate::tools::Stop;

/// The `agent.run` job handler.
pub struct Runner {
    svc: Services,
    /// Replies, written in groups.
    replies: GroupCommit<Reply, Replied>,
}

impl Runner {
    pub fn new(svc: Services) -> Self {
        Self { svc, replies: GroupCommit::new("reply", write_reply) }
    }
}

impl parley_jobs::Handler for Runner {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn retry_policy(&self) -> RetryPolicy {
        let scale = self.svc.config().runtime.retry_scale;
        RetryPolicy { schedule: RETRY_SCHEDULE_S.iter().map(|s| Duration::from_secs_f64(*s as f64 * scale)).collect() }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match answer(self, job).await {
                Ok(outcome) => outcome,
                // The database: worth another try.
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }

    fn dead<'a>(&'a self, tx: &'a mut Tx, job: &'a Job, error: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let (Some(scope), Ok(due)) = (job.scope, job.read::<RunJob>()) else { return Ok(()) };
            let end = RunEnd { status: RunStatus::Failed, error: Some(error), ..RunEnd::empty("") };
            if let Some(run) = repo::finish(tx, scope, due.run_id, &end).await? {
                events::append(tx, scope, EventType::AgentRunFailed, event_data(&run)?).await?;
                fall_back(tx, &self.svc, scope, &run, error).await?;
            }
            Ok(())
        })
    }
}

/// After a failed run: the fallback message and a handoff to a person, if
/// the conversation is still the agent's. Refusals (a channel that cannot
/// send, a handoff already open) leave the other step standing.
async fn fall_back(tx: &mut Tx, svc: &Services, scope: Scope, run: &AgentRun, error: &str) -> ServiceResult<()> {
    let Some(conversation_id) = run.conversation_id else { return Ok(()) };
    let Some(conversation) = conversation_repo::get(tx, scope, conversation_id).await? else { return Ok(()) };
    if conversation.handler != Handler::Agent || conversation.status == ConversationStatus::Closed {
        return Ok(());
    }
    let send = into_conversation(conversation_id, svc.config().runtime.fallback_message.clone());
    match messages::send(tx, svc, scope, Sender::Agent, send, &[]).await {
        Ok(_) | Err(ServiceError::Conflict(_)) => {}
        Err(e) => return Err(e),
    }
    let handoff = CreateHandoff {
        to: HandoffTarget::Human,
        agent_id: None,
        user_id: None,
        reason: format!("The agent could not answer: {}", error.chars().take(400).collect::<String>()),
        note: None,
    };
    let by = Author { kind: AuthorType::Agent, id: Some(run.agent_id) };
    match handoffs::request(tx, scope, ConversationId(conversation_id), by, handoff).await {
        Ok(_) | Err(ServiceError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The agent's `text`, sent into the conversation on its own channel.
fn into_conversation(conversation_id: i64, text: String) -> SendMessage {
    SendMessage {
        conversation_id: Some(conversation_id),
        channel_id: None,
        to: None,
        contact_id: None,
        channel: None,
        text,
        attachments: None,
        template: None,
        subject: None,
        recipient: Recipient::Conversation(conversation_id),
    }
}

/// Runs one job: waits out the debounce, checks the agent should still
/// answer, asks the engine, and writes the answer.
async fn answer(runner: &Runner, job: &Job) -> ServiceResult<Outcome> {
    let svc = &runner.svc;
    let started = Instant::now();
    let Some(scope) = job.scope else { return Ok(Outcome::Fail("the job has no scope".into())) };
    let due = match job.read::<RunJob>() {
        Ok(due) => due,
        Err(e) => return Ok(Outcome::Fail(e)),
    };
    let Some((run, agent, context)) = context::for_run(svc, scope, &due).await? else {
        return Ok(Outcome::Fail("the run or its conversation is gone".into()));
    };
    let context::AnswerContext { conversation, history, contact, workspace_name, blocks, team_notes, handed_off_at } =
        context;
    let Some(conversation) = conversation else { return Ok(Outcome::Fail("the run's conversation is gone".into())) };
    if !matches!(run.status, RunStatus::Queued | RunStatus::Running) {
        // Recorded by an earlier holder that died before completing the job.
        return Ok(Outcome::Done);
    }
    // Wait until the conversation has been quiet for the debounce time.
    let debounce =
        agent.as_ref().map_or(svc.config().runtime.debounce, |a| routing::debounce(&svc.config().runtime, a));
    if let Some(last) = history.iter().rev().find(|m| m.direction == Direction::Inbound)
        && let quiet_at = last.created_at.plus_duration(debounce)
        && quiet_at > Timestamp::now()
    {
        return Ok(Outcome::Later(quiet_at));
    }
    let agent = match agent {
        Some(a) if a.status == AgentStatus::Active && !a.is_template => a,
        _ => return cancel(svc, job, scope, &run, "the agent no longer answers").await,
    };
    if conversation.handler != Handler::Agent || conversation.status == ConversationStatus::Closed {
        return cancel(svc, job, scope, &run, "a person handles the conversation").await;
    }
    if let Some(reason) = handoff_due(&agent, &history, handed_off_at) {
        return hand_off(svc, job, scope, &run, &agent, &reason).await;
    }
    let Some(engine) = svc.config().text_engines.get(&agent.text_engine) else {
        return Ok(Outcome::Fail(format!("text engine {:?} is not configured", agent.text_engine)));
    };
    let engine = &engine.clone();
    if !crate::session::funded(svc, scope, engine.as_ref()).await? {
        return hand_off(svc, job, scope, &run, &agent, crate::session::NO_FUNDS).await;
    }
    let context = prompt::Context {
        agent: &agent,
        workspace_name: &workspace_name,
        conversation: Some(&conversation),
        contact: contact.as_ref(),
        now: Timestamp::now(),
    };
    let vars = prompt::variables(prompt::builtin_variables(context), &Default::default());
    let system = prompt::system_prompt(&agent, &blocks, &vars, prompt::Missing::Empty)?;
    let question = history.iter().rev().find(|m| m.direction == Direction::Inbound).map(|m| m.text.as_str());
    let knowledge = parley_services::knowledge::retrieve(svc, scope, &agent.knowledge_collection_ids, question).await?;
    let mut messages = Vec::new();
    let system = prompt::with_team_notes(prompt::with_passages(system.prompt, &knowledge.passages), &team_notes);
    if !system.is_empty() {
        messages.push(ChatMessage::System(system));
    }
    messages.extend(prompt::memory(&history, svc.config().runtime.memory_tokens));
    let place = crate::tools::Place {
        scope,
        run_id: run.id,
        conversation_id: Some(conversation.item.id),
        contact_id: conversation.contact_id,
        call_id: None,
        transferable: false,
        dry_run: false,
    };
    let turn = session::Turn { agent: &agent, place, messages, passages: knowledge.passages, on_call: false };
    let thought = match session::think(svc, engine, turn, None).await {
        Ok(thought) => thought,
        Err(EngineError::Transient(e)) => return Ok(Outcome::Retry { error: e, after: None }),
        Err(EngineError::Permanent(e)) => return Ok(Outcome::Fail(e)),
    };
    if thought.text.is_empty() && thought.stop.is_none() {
        return Ok(Outcome::Retry { error: "the engine gave an empty answer".into(), after: None });
    }

    let reply = Reply(Arc::new(ReplyParts {
        scope,
        job: job.clone(),
        agent,
        conversation_id: conversation.item.id,
        run_id: run.id,
        engine: engine.clone(),
        started,
        thought,
        retrieval: knowledge.hits,
    }));
    match runner.replies.submit(svc, reply).await {
        // Written, or another instance took the job over: it answers.
        Ok(Replied::Written | Replied::LeaseLost) => Ok(Outcome::Committed),
        Err(ServiceError::Conflict(why)) => {
            // A person took over while the engine was thinking: the
            // answer is dropped, never sent. Otherwise the channel
            // cannot send.
            let now = conversations::get(svc, scope, ConversationId(conversation.item.id)).await?;
            if now.handler != Handler::Agent {
                return cancel(svc, job, scope, &run, "a person took over the conversation before the answer was sent")
                    .await;
            }
            Ok(Outcome::Fail(why))
        }
        Err(e) => Err(e),
    }
}

/// An answer ready to be written with its run's figures and its job's
/// completion, in a group commit with the other replies ready at the same
/// time (see `parley_services::group_commit`): one transaction and one
/// flush for the group.
#[derive(Clone)]
struct Reply(Arc<ReplyParts>);

struct ReplyParts {
    scope: Scope,
    job: Job,
    agent: parley_domain::agent::Agent,
    conversation_id: i64,
    run_id: i64,
    engine: Arc<dyn TextEngine>,
    started: Instant,
    thought: session::Thought,
    retrieval: Vec<RetrievalHit>,
}

/// What became of a reply in its group.
enum Replied {
    Written,
    /// This worker's lease lapsed and another took the job over: nothing
    /// was written; the other answers.
    LeaseLost,
}

/// Writes one reply: the message (queued for its channel), what the turn
/// ended with, the run's figures and the job's completion. A conflict (a
/// person took the conversation over) takes this reply out of its group.
fn write_reply<'a>(work: &'a mut Work, svc: &'a Services, reply: Reply) -> BoxFuture<'a, ServiceResult<Replied>> {
    Box::pin(async move {
        let r = &*reply.0;
        // First: nothing else is written unless this worker still holds the job.
        if !r.job.complete(work).await? {
            return Ok(Replied::LeaseLost);
        }
        let conversation_id = r.conversation_id;
        let mut reply_id = None;
        if !r.thought.text.is_empty() {
            let send = into_conversation(conversation_id, r.thought.text.chars().take(10_000).collect());
            reply_id = Some(messages::send(work, svc, r.scope, Sender::Agent, send, &[]).await?.id);
        }
        match &r.thought.stop {
            Some(Stop::Handoff(reason)) => request_handoff(work, r.scope, &r.agent, conversation_id, reason).await?,
            Some(Stop::EndConversation) => {
                let close = UpdateConversation { status: Some(ConversationStatus::Closed), ..Default::default() };
                match conversations::update(work, r.scope, ConversationId(conversation_id), close).await {
                    Ok(_) | Err(ServiceError::Conflict(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            // Call tools are not offered outside calls.
            Some(Stop::EndCall | Stop::Transfer(_)) | None => {}
        }
        let end = session::TurnEnd {
            run_id: r.run_id,
            engine: r.engine.as_ref(),
            model: r.agent.model.as_deref().unwrap_or(r.engine.model()),
            started: r.started,
            thought: Ok(&r.thought),
            retrieval: &r.retrieval,
            reply_message_id: reply_id,
            what: None,
        };
        session::record(work, svc, r.scope, end).await?;
        work.conversation_changed(conversation_id);
        Ok(Replied::Written)
    })
}

/// Hands the conversation to a person as `POST /conversations/{id}/handoff`
/// does (events included); one already open stands.
pub(crate) async fn request_handoff(
    tx: &mut Tx,
    scope: Scope,
    agent: &parley_domain::agent::Agent,
    conversation_id: i64,
    reason: &str,
) -> ServiceResult<()> {
    let handoff = CreateHandoff {
        to: HandoffTarget::Human,
        agent_id: None,
        user_id: agent.handoff.target_user_id,
        reason: if reason.trim().is_empty() { "The agent asked for a person".to_owned() } else { reason.to_owned() },
        note: None,
    };
    let by = Author { kind: AuthorType::Agent, id: Some(agent.id) };
    match handoffs::request(tx, scope, ConversationId(conversation_id), by, handoff).await {
        Ok(_) | Err(ServiceError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Why the agent should hand the conversation to a person instead of
/// answering: a handoff keyword in what the contact wrote since the agent
/// last spoke, or the agent's turn limit reached. Only what came after the
/// last handoff counts: a conversation given back starts afresh.
fn handoff_due(
    agent: &parley_domain::agent::Agent,
    history: &[parley_domain::conversation::Message],
    handed_off_at: Option<Timestamp>,
) -> Option<String> {
    let policy = &agent.handoff;
    let since_handoff = history.iter().filter(|m| handed_off_at.is_none_or(|at| m.created_at > at));
    let since_reply = since_handoff
        .clone()
        .rev()
        .take_while(|m| !(m.direction == Direction::Outbound && m.author.kind == AuthorType::Agent))
        .filter(|m| m.direction == Direction::Inbound);
    for message in since_reply {
        if let Some(word) = policy.keywords.iter().find(|k| routing::contains_word(&message.text, k)) {
            return Some(format!("The contact wrote \"{word}\""));
        }
    }
    let turns =
        since_handoff.filter(|m| m.direction == Direction::Outbound && m.author.kind == AuthorType::Agent).count();
    match policy.max_turns {
        Some(max) if turns as i64 >= max => Some(format!("The agent reached its limit of {max} turns")),
        _ => None,
    }
}

/// Ends the run with a handoff to a person (as `POST
/// /conversations/{id}/handoff` does, events included), with the job.
async fn hand_off(
    svc: &Services,
    job: &Job,
    scope: Scope,
    run: &AgentRun,
    agent: &parley_domain::agent::Agent,
    reason: &str,
) -> ServiceResult<Outcome> {
    let mut work = svc.begin().await?;
    let Some(conversation_id) = run.conversation_id else {
        return Ok(Outcome::Fail("the run has no conversation".into()));
    };
    request_handoff(&mut work, scope, agent, conversation_id, reason).await?;
    let why = format!("Handed to a person: {reason}");
    repo::finish(
        &mut work,
        scope,
        run.id,
        &RunEnd { status: RunStatus::Canceled, error: Some(&why), ..RunEnd::empty("") },
    )
    .await?;
    if job.complete(&mut work).await? {
        work.conversation_changed(conversation_id);
        svc.commit(work).await?;
    }
    Ok(Outcome::Committed)
}

/// Ends the run as canceled, with the job.
async fn cancel(svc: &Services, job: &Job, scope: Scope, run: &AgentRun, why: &str) -> ServiceResult<Outcome> {
    let mut work = svc.begin().await?;
    repo::finish(
        &mut work,
        scope,
        run.id,
        &RunEnd { status: RunStatus::Canceled, error: Some(why), ..RunEnd::empty("") },
    )
    .await?;
    if job.complete(&mut work).await? {
        svc.commit(work).await?;
    }
    Ok(Outcome::Committed)
}
