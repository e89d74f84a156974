//! Agent runs as records: the `agent.run` job's kind, payload and retry
//! schedule, the runtime's settings, and reading runs (`GET
//! /api/v1/agent-runs`). Routing queues runs (`routing::queue_answer`); the
//! agent runtime (`parley-agent-runtime`) carries them out: an inbound
//! message that an agent must answer queues a run (`queued`) and its job in
//! the message's own transaction, unless the conversation already has a
//! run waiting, so messages in quick succession are answered once; the job
//! waits for a quiet conversation, asks the engine, and writes the reply,
//! the run's figures and the job's completion in one transaction.

use std::time::Duration;

use parley_domain::Scope;
use parley_domain::agent::{AgentRun, RunStatus};
use parley_domain::ids::RunId;
use parley_store::repo::agent_runs as repo;
use serde::{Deserialize, Serialize};

use crate::{ServiceError, ServiceResult, Services};

pub const KIND: &str = "agent.run";

/// Seconds between a failed run's attempts (then it fails for good).
pub const RETRY_SCHEDULE_S: [u64; 4] = [2, 10, 30, 120];

/// How the runtime behaves.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// A run waits until the conversation has been quiet this long, so a
    /// burst of messages gets one answer.
    pub debounce: Duration,
    /// Tokens of conversation memory given to the model.
    pub memory_tokens: u64,
    /// Multiplies the retry schedule (tests shrink it).
    pub retry_scale: f64,
    /// What the agent says when it cannot answer (then a person is asked).
    pub fallback_message: String,
    /// Runs one instance carries out at once.
    pub concurrency: usize,
}

/// The default `fallback_message`.
pub const FALLBACK_MESSAGE: &str =
    "Sorry, I can't answer that right now. Someone from the team will get back to you here.";

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(1500),
            memory_tokens: 3000,
            retry_scale: 1.0,
            fallback_message: FALLBACK_MESSAGE.to_owned(),
            concurrency: 1024,
        }
    }
}

/// The `agent.run` job's payload: the run, and the conversation it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunJob {
    pub run_id: i64,
    pub conversation_id: i64,
}

impl parley_jobs::BackgroundJob for RunJob {
    const KIND: &'static str = KIND;
}

/// `GET /api/v1/agent-runs/{id}`.
pub async fn get(svc: &Services, scope: Scope, id: RunId) -> ServiceResult<AgentRun> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| ServiceError::not_found("Agent run", id))
}

pub use parley_store::repo::agent_runs::RunFilter;

/// `GET /api/v1/agent-runs`.
pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &RunFilter,
    page: parley_domain::validation::Page,
) -> ServiceResult<(Vec<AgentRun>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page).await?)
}

/// Reads the list's filters (`agent_id`, `conversation_id`, `call_id`, `status`).
pub fn parse_filter(q: &mut parley_domain::validation::QueryReader) -> RunFilter {
    RunFilter {
        agent_id: q.integer("agent_id", 1, i64::MAX),
        conversation_id: q.integer("conversation_id", 1, i64::MAX),
        call_id: q.string("call_id", 1, 64),
        status: q.enum_value::<RunStatus>("status"),
    }
}
