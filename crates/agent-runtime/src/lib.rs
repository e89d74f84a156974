//! The agent runtime: an agent answering, whatever asked for it.
//!
//! - [`session`]: one turn — the engine's streamed answer with the tool
//!   loop ([`tools`]) — and how a turn is recorded on its run;
//! - [`runs`]: the `agent.run` job, an agent answering a conversation
//!   (queued by `parley_services::agents::routing`);
//! - [`playground`]: `POST /api/v1/agents/{id}/chat`;
//! - [`call_session`]: the agent's side of a call;
//! - [`analysis`]: post-call analysis (the `call.analyze` job).
//!
//! It sits above `parley-services`, which never depends on it: services
//! queue runs and place calls, and reach the runtime through the
//! [`AgentRuntime`] seam the server wires in ([`Runtime`]). The runtime
//! reads through `parley_services::agents::context`, writes through units
//! of work and the areas' operations (messages, handoffs, conversations),
//! and its tools act through a narrow [`host::ToolHost`].

pub mod analysis;
pub mod call_session;
pub mod host;
pub mod playground;
pub mod runs;
pub mod session;
pub mod tools;

use std::sync::Arc;

use parley_domain::Scope;
use parley_services::Services;
use parley_services::agents::runtime::AgentRuntime;
use parley_services::calls::CallAgent;
use parley_voice::session::AgentSession;

/// The runtime, as services reach it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Runtime;

impl AgentRuntime for Runtime {
    fn run_handler(&self, svc: &Services) -> Arc<dyn parley_jobs::Handler> {
        Arc::new(runs::Runner::new(svc.clone()))
    }

    fn call_session(&self, svc: &Services, scope: Scope, agent: CallAgent) -> Box<dyn AgentSession> {
        Box::new(call_session::CallSession::new(svc.clone(), scope, agent))
    }

    fn analysis_handlers(&self, svc: &Services) -> Vec<Arc<dyn parley_jobs::Handler>> {
        vec![Arc::new(analysis::Analyst::calls(svc.clone())), Arc::new(analysis::Analyst::conversations(svc.clone()))]
    }
}

/// An event's `data` (a resource that cannot be serialised is a bug).
pub(crate) fn event_data<T: serde::Serialize>(value: &T) -> parley_services::ServiceResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| parley_services::ServiceError::internal(e, "serialising an event's data"))
}
