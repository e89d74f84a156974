//! The seam to the agent runtime (`parley-agent-runtime`, a crate above
//! this one): services queue runs (`routing::queue_answer`) and place calls,
//! the runtime carries them out. The server hands its runtime to
//! [`Services::with_agent_runtime`]; without one (this crate's own tests)
//! `agent.run` jobs wait unclaimed and a call's agent is the voice engine's
//! scripted [`BuiltinAgent`], which greets and acknowledges.

use std::sync::Arc;

use parley_domain::Scope;
use parley_voice::session::{AgentSession, BuiltinAgent};

use crate::Services;
use crate::calls::CallAgent;

/// What the agent runtime carries out for services.
pub trait AgentRuntime: Send + Sync {
    /// The `agent.run` job handler (an agent answering a conversation).
    fn run_handler(&self, svc: &Services) -> Arc<dyn parley_jobs::Handler>;
    /// The agent's side of a call that has been placed.
    fn call_session(&self, svc: &Services, scope: Scope, agent: CallAgent) -> Box<dyn AgentSession>;
    /// The `call.analyze` and `conversation.analyze` job handlers.
    fn analysis_handlers(&self, svc: &Services) -> Vec<Arc<dyn parley_jobs::Handler>>;
}

impl Services {
    /// The same use cases, with agents run by `runtime`.
    pub fn with_agent_runtime(mut self, runtime: Arc<dyn AgentRuntime>) -> Self {
        self.agent_runtime = Some(runtime);
        self
    }

    /// The agent's side of a placed call.
    pub(crate) fn call_session(&self, scope: Scope, agent: CallAgent) -> Box<dyn AgentSession> {
        match &self.agent_runtime {
            Some(runtime) => runtime.call_session(self, scope, agent),
            None => Box::new(BuiltinAgent { name: agent.agent.name.clone(), first_message: agent.first_message }),
        }
    }

    /// The `agent.run` and analysis handlers, if a runtime was given.
    pub(crate) fn runtime_handlers(&self) -> Vec<Arc<dyn parley_jobs::Handler>> {
        match &self.agent_runtime {
            Some(runtime) => [vec![runtime.run_handler(self)], runtime.analysis_handlers(self)].concat(),
            None => Vec::new(),
        }
    }
}
