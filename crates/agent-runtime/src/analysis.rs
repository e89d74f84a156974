//! Post-call analysis (the `call.analyze` job; `conversation.analyze` for a
//! conversation on demand): once a call has ended, the agent's text engine
//! reads its transcript and answers the agent's
//! `analysis` plan through one tool, `submit_analysis` — a summary, the
//! call's facts in the plan's JSON Schema, a success evaluation against
//! its criteria. What the model extracted is checked against the schema
//! and refused (with where it broke it) rather than stored when it does
//! not fit: nothing is invented. The request is a run (`analysis`),
//! recorded and billed as every other; the result is the call's
//! `analysis` (`call.analyzed`).

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use futures::future::BoxFuture;
use parley_domain::agent::{Agent, AnalysisPlan, EngineKind, RunToolCall, RunTrigger};
use parley_domain::call::{Analysis, AnalysisStatus, Speaker, SuccessEvaluation, TranscriptSegment};
use parley_domain::conversation::{AuthorType, Message};
use parley_domain::{Scope, Timestamp};
use parley_engines::{ChatMessage, ChatRequest, EngineError, EngineEvent, TextEngine, ToolCall, ToolSpec};
use parley_jobs::{Job, Outcome, RetryPolicy};
use parley_services::calls::{ANALYZE, AnalyzeCall};
use parley_services::messaging::conversations::{self, AnalyzeConversation};
use parley_services::{ServiceError, ServiceResult, Services};
use parley_store::Tx;
use parley_store::repo::calls::{self as call_repo, CallRow};
use serde_json::{Map, Value, json};

use crate::session::{self, Thought, TurnEnd};

/// The one tool the model answers through.
const SUBMIT: &str = "submit_analysis";

/// The longest transcript sent, in characters (its start is kept: a
/// call's purpose is stated early).
const TRANSCRIPT_CHARS: usize = 60_000;

/// What is analysed: an ended call, or a conversation so far.
enum Subject {
    Call(CallRow),
    Conversation(i64),
}

impl Subject {
    /// Stores its analysis (and its event) in `tx`.
    async fn record(&self, tx: &mut Tx, scope: Scope, analysis: &Analysis) -> ServiceResult<()> {
        match self {
            Subject::Call(call) => parley_services::calls::record_analysis(tx, scope, call, analysis).await,
            Subject::Conversation(id) => conversations::record_analysis(tx, scope, *id, analysis).await,
        }
    }
}

/// What an analysis reads: the subject, its agent and its words.
struct Material {
    subject: Subject,
    agent: Agent,
    conversation_id: Option<i64>,
    call_id: Option<String>,
    /// "phone call" or "conversation", for the model.
    what: &'static str,
    /// One line per turn ("Caller: …"), oldest first.
    transcript: String,
    /// Whether the other party said anything.
    spoke: bool,
}

/// The most messages of a conversation an analysis reads (the latest).
const CONVERSATION_MESSAGES: i64 = 200;

/// The `call.analyze` and `conversation.analyze` job handler.
pub struct Analyst {
    svc: Services,
    kind: &'static str,
}

impl Analyst {
    /// Calls, after they end (and on demand).
    pub fn calls(svc: Services) -> Self {
        Self { svc, kind: ANALYZE }
    }

    /// Conversations, on demand.
    pub fn conversations(svc: Services) -> Self {
        Self { svc, kind: conversations::ANALYZE }
    }

    /// What job `job` analyses, read from the store (`None` once gone).
    async fn material(&self, scope: Scope, job: &Job) -> ServiceResult<Option<Material>> {
        if self.kind == ANALYZE {
            let due = job.read::<AnalyzeCall>().map_err(|e| ServiceError::invariant(e.to_string()))?;
            let found = parley_services::calls::analysis_context(&self.svc, scope, &due.call_id).await?;
            let Some((call, segments, Some(agent))) = found else { return Ok(None) };
            Ok(Some(Material {
                conversation_id: call.conversation_id,
                call_id: Some(call.public_id.clone()),
                subject: Subject::Call(call),
                agent,
                what: "phone call",
                spoke: segments.iter().any(|s| s.speaker == Speaker::Caller),
                transcript: call_transcript(&segments),
            }))
        } else {
            let due = job.read::<AnalyzeConversation>().map_err(|e| ServiceError::invariant(e.to_string()))?;
            let id = due.conversation_id;
            let found = conversations::analysis_context(&self.svc, scope, id, CONVERSATION_MESSAGES).await?;
            let Some((_, messages, Some(agent))) = found else { return Ok(None) };
            Ok(Some(Material {
                subject: Subject::Conversation(id),
                agent,
                conversation_id: Some(id),
                call_id: None,
                what: "conversation",
                spoke: messages.iter().any(|m| m.author.kind == AuthorType::Contact),
                transcript: conversation_transcript(&messages),
            }))
        }
    }
}

impl parley_jobs::Handler for Analyst {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn retry_policy(&self) -> RetryPolicy {
        // An engine that is down for a while: the analysis can wait.
        RetryPolicy::seconds(&[5, 30, 120, 600], self.svc.config().runtime.retry_scale)
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Some(scope) = job.scope else { return Outcome::Fail(format!("job {} has no scope", job.id)) };
            let analysed = async {
                match self.material(scope, job).await? {
                    Some(material) => analyse(&self.svc, scope, material).await,
                    None => Ok(Outcome::Done),
                }
            };
            match analysed.await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }

    /// The engine stayed down through every retry: the analysis says so.
    fn dead<'a>(&'a self, tx: &'a mut Tx, job: &'a Job, error: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let Some(scope) = job.scope else { return Ok(()) };
            let subject = if let Ok(due) = job.read::<AnalyzeCall>() {
                call_repo::get(tx, scope, &due.call_id).await?.map(Subject::Call)
            } else if let Ok(due) = job.read::<AnalyzeConversation>() {
                Some(Subject::Conversation(due.conversation_id))
            } else {
                None
            };
            if let Some(subject) = subject {
                subject.record(tx, scope, &failure(format!("The text engine failed: {error}"), None)).await?;
            }
            Ok(())
        })
    }
}

/// Analyses `m`; a transient engine error asks for a retry.
async fn analyse(svc: &Services, scope: Scope, m: Material) -> ServiceResult<Outcome> {
    let (agent, subject) = (&m.agent, &m.subject);
    let plan = &agent.speech.analysis;
    let engine = svc.config().text_engines.get(&agent.text_engine).cloned();
    let why_not = if !plan.wants_any() {
        Some("The agent's analysis plan asks for nothing")
    } else if !m.spoke {
        Some("The other party said nothing to analyse")
    } else if engine.as_ref().is_none_or(|e| e.kind() == EngineKind::Builtin) {
        Some("The agent's text engine is not a model (builtin): give it one to analyse")
    } else {
        None
    };
    let engine: Arc<dyn TextEngine> = match (why_not, engine) {
        (None, Some(engine)) => engine,
        (why, _) => {
            let refused = failure(why.unwrap_or("The agent's text engine is not configured").to_owned(), None);
            svc.transaction(async |work| subject.record(work, scope, &refused).await).await?;
            return Ok(Outcome::Done);
        }
    };
    let (run, model) = session::open_run(
        svc,
        scope,
        agent,
        engine.as_ref(),
        RunTrigger::Analysis,
        m.conversation_id,
        m.call_id.as_deref(),
    )
    .await?;
    if !session::funded(svc, scope, engine.as_ref()).await? {
        svc.transaction(async |work| {
            session::cancel_unfunded(work, scope, run.id).await?;
            subject.record(work, scope, &failure(session::NO_FUNDS.to_owned(), Some(run.id))).await
        })
        .await?;
        return Ok(Outcome::Done);
    }
    let started = Instant::now();
    let asked = ask(&engine, agent, m.what, &m.transcript).await;
    let analysis = match &asked {
        Ok((_, submitted)) => Some(read_answer(plan, submitted.as_ref(), run.id)),
        // Recorded as a failed run; the job asks again (a new run).
        Err(EngineError::Transient(_)) => None,
        Err(e) => Some(failure(format!("The text engine refused: {e}"), Some(run.id))),
    };
    let end = TurnEnd {
        run_id: run.id,
        engine: engine.as_ref(),
        model: &model,
        started,
        thought: asked.as_ref().map(|(thought, _)| thought),
        retrieval: &[],
        reply_message_id: None,
        what: Some("analysis"),
    };
    svc.transaction(async |work| {
        session::record(work, svc, scope, end).await?;
        match &analysis {
            Some(analysis) => subject.record(work, scope, analysis).await,
            None => Ok(()),
        }
    })
    .await?;
    Ok(match asked {
        Err(EngineError::Transient(error)) => Outcome::Retry { error, after: None },
        _ => Outcome::Done,
    })
}

/// Asks the engine; what it said, and the arguments it submitted (if it did).
async fn ask(
    engine: &Arc<dyn TextEngine>,
    agent: &Agent,
    what: &str,
    transcript: &str,
) -> Result<(Thought, Option<Value>), EngineError> {
    let plan = &agent.speech.analysis;
    let request = ChatRequest {
        model: agent.model.clone(),
        messages: vec![ChatMessage::System(instructions(agent, what, plan)), ChatMessage::User(transcript.to_owned())],
        tools: vec![ToolSpec {
            name: SUBMIT.to_owned(),
            description: "Submits the analysis.".to_owned(),
            parameters: submit_schema(plan),
        }],
        passages: Vec::new(),
    };
    let asked = Instant::now();
    let mut thought = Thought::default();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut stream = engine.stream(request);
    while let Some(event) = stream.next().await {
        match event? {
            EngineEvent::Delta(delta) => {
                thought.first_token_ms.get_or_insert(asked.elapsed().as_millis() as i64);
                thought.text.push_str(&delta);
            }
            EngineEvent::ToolCall(call) => calls.push(call),
            EngineEvent::Usage(u) => {
                thought.usage.input_tokens += u.input_tokens;
                thought.usage.output_tokens += u.output_tokens;
            }
        }
    }
    thought.text = thought.text.trim().to_owned();
    let submitted = calls
        .iter()
        .find(|c| c.name == SUBMIT)
        .map(|c| serde_json::from_str::<Value>(&c.arguments).unwrap_or_else(|_| Value::String(c.arguments.clone())));
    if let Some(arguments) = &submitted {
        let ms = asked.elapsed().as_millis() as i64;
        let record =
            RunToolCall { name: SUBMIT.to_owned(), arguments: arguments.clone(), result: None, error: None, ms };
        thought.tool_calls.push(record);
    }
    Ok((thought, submitted))
}

/// What the model is asked to do.
fn instructions(agent: &Agent, what: &str, plan: &AnalysisPlan) -> String {
    let mut asks = Vec::new();
    if plan.summary {
        asks.push(format!("`summary`: two or three sentences on what the {what} was about and how it went."));
    }
    if plan.schema.is_some() {
        asks.push(
            "`data`: the facts its schema asks for, as said in the call. Leave out what was not said; never guess."
                .to_owned(),
        );
    }
    if let Some(criteria) = &plan.success_criteria {
        asks.push(format!(
            "`success`: whether the {what} met these criteria (`result`), and why in one sentence (`reason`). \
             Criteria: {criteria}"
        ));
    }
    format!(
        "You analyse a {what} between {name}, an AI agent, and a customer. The user message is its \
         transcript. Call the tool {SUBMIT} exactly once, with:\n- {}",
        asks.join("\n- "),
        name = agent.name,
    )
}

/// A call's transcript as the model reads it: one line per turn.
fn call_transcript(segments: &[TranscriptSegment]) -> String {
    lines(segments.iter().map(|s| {
        let who = match s.speaker {
            Speaker::Agent => "Agent",
            Speaker::Caller => "Caller",
            Speaker::Human => "Human agent",
        };
        let cut = if s.interrupted { " [interrupted]" } else { "" };
        format!("{who}: {}{cut}", s.text.trim())
    }))
}

/// A conversation's messages as the model reads them (system notices left out).
fn conversation_transcript(messages: &[Message]) -> String {
    lines(messages.iter().filter_map(|m| {
        let who = match m.author.kind {
            AuthorType::Contact => "Customer",
            AuthorType::Agent => "Agent",
            AuthorType::User => "Human agent",
            AuthorType::System => return None,
        };
        Some(format!("{who}: {}", m.text.trim()))
    }))
}

/// Lines joined, up to [`TRANSCRIPT_CHARS`].
fn lines(lines: impl Iterator<Item = String>) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&line);
        out.push('\n');
        if out.len() > TRANSCRIPT_CHARS {
            out.truncate(out.floor_char_boundary(TRANSCRIPT_CHARS));
            out.push_str("\n[the rest is left out]");
            break;
        }
    }
    out
}

/// The submit tool's arguments: what the plan asks for, all required.
fn submit_schema(plan: &AnalysisPlan) -> Value {
    let mut properties = Map::new();
    if plan.summary {
        properties.insert("summary".into(), json!({"type": "string"}));
    }
    if let Some(schema) = &plan.schema {
        properties.insert("data".into(), schema.clone());
    }
    if plan.success_criteria.is_some() {
        properties.insert(
            "success".into(),
            json!({"type": "object", "properties": {"result": {"type": "boolean"}, "reason": {"type": "string"}},
                   "required": ["result", "reason"]}),
        );
    }
    let required: Vec<&String> = properties.keys().collect();
    json!({"type": "object", "properties": properties, "required": required})
}

/// The analysis from the model's answer: each part it was asked for, as
/// far as it is well formed; extracted data only when valid against the
/// plan's schema.
fn read_answer(plan: &AnalysisPlan, submitted: Option<&Value>, run_id: i64) -> Analysis {
    let Some(Value::Object(answer)) = submitted else {
        let why = match submitted {
            None => "The model did not submit an analysis",
            Some(_) => "The model's analysis is not a JSON object",
        };
        return failure(why.to_owned(), Some(run_id));
    };
    let summary = answer.get("summary").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let (data, data_errors) = match (&plan.schema, answer.get("data")) {
        (None, _) => (None, Vec::new()),
        (Some(_), None) => (None, vec!["The model extracted no data".to_owned()]),
        (Some(schema), Some(data)) => match crate::tools::schema_problems(schema, data) {
            Ok(problems) if problems.is_empty() => (Some(data.clone()), Vec::new()),
            Ok(problems) => (None, problems),
            Err(e) => (None, vec![e]),
        },
    };
    let success = plan.success_criteria.as_ref().and_then(|_| {
        let s = answer.get("success")?;
        Some(SuccessEvaluation {
            result: s.get("result")?.as_bool()?,
            reason: s.get("reason").and_then(Value::as_str).unwrap_or_default().trim().to_owned(),
        })
    });
    Analysis {
        status: AnalysisStatus::Completed,
        summary: summary.map(str::to_owned),
        data,
        data_errors,
        success,
        error: None,
        run_id: Some(run_id),
        analyzed_at: Timestamp::now(),
    }
}

/// An analysis that could not be made, and why.
fn failure(error: String, run_id: Option<i64>) -> Analysis {
    Analysis {
        status: AnalysisStatus::Failed,
        summary: None,
        data: None,
        data_errors: Vec::new(),
        success: None,
        error: Some(error),
        run_id,
        analyzed_at: Timestamp::now(),
    }
}
