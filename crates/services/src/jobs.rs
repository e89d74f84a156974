//! The job kinds services run, on one worker per instance (see `parley_jobs`).

use std::sync::Arc;

use crate::messaging::courier;
use crate::{Services, calls};

/// The worker for `message.send` (the courier), `call.watch` (the call
/// watchdog), `knowledge.document` (documents split into passages) and
/// `handoff.offer` (a waiting handoff offered again).
pub fn worker(svc: &Services) -> parley_jobs::Worker {
    parley_jobs::Worker::new(svc.db.clone(), courier::worker_config(&svc.config.courier))
        .handle(Arc::new(courier::Courier::new(svc.clone())))
        .handle(Arc::new(calls::Watchdog::new(svc.clone())))
        .handle(Arc::new(crate::knowledge::DocumentProcessor::new(svc.clone())))
        .handle(Arc::new(crate::messaging::offers::Reoffer::new(svc.clone())))
}

/// The worker for `agent.run` and `call.analyze` (the agent runtime's
/// handlers, if services were given one): runs mostly wait on their
/// engine, so they get their own, wider concurrency (`agents.concurrency`),
/// and never wait behind outbound messages (nor these behind them).
pub fn agent_worker(svc: &Services) -> parley_jobs::Worker {
    let config = parley_jobs::WorkerConfig {
        concurrency: svc.config.runtime.concurrency.max(1),
        ..courier::worker_config(&svc.config.courier)
    };
    svc.runtime_handlers().into_iter().fold(parley_jobs::Worker::new(svc.db.clone(), config), |w, h| w.handle(h))
}

/// The worker for `channel.poll` and `channel.register`: polls wait on the
/// provider (a long poll each), so they never hold the courier's slots.
pub fn channel_worker(svc: &Services) -> parley_jobs::Worker {
    let config = parley_jobs::WorkerConfig { concurrency: 256, ..courier::worker_config(&svc.config.courier) };
    parley_jobs::Worker::new(svc.db.clone(), config)
        .handle(Arc::new(crate::messaging::polling::Poller::new(svc.clone())))
        .handle(Arc::new(crate::messaging::polling::Registrar::new(svc.clone())))
}

/// Runs this instance's workers until `shutdown` turns true; new jobs wake
/// them after the commit that queued them.
pub async fn run(svc: Services, shutdown: tokio::sync::watch::Receiver<bool>) {
    let agents = Arc::new(agent_worker(&svc));
    let others = Arc::new(worker(&svc));
    let channels = Arc::new(channel_worker(&svc));
    tokio::join!(agents.run(shutdown.clone()), others.run(shutdown.clone()), channels.run(shutdown));
}

#[cfg(test)]
mod tests {
    use parley_jobs::BackgroundJob;
    use parley_store::repo::webhooks::DrainJob;
    use serde_json::{Value, json};

    use crate::agents::runs::RunJob;
    use crate::calls::{AnalyzeCall, Watch};
    use crate::knowledge::DocumentJob;
    use crate::messaging::conversations::AnalyzeConversation;
    use crate::messaging::courier::Send;
    use crate::messaging::offers::OfferJob;
    use crate::messaging::polling::{PollJob, Register};

    /// Each kind's name and payload as an earlier version stored them: a
    /// change here strands the jobs already waiting in a database.
    fn golden<J: BackgroundJob + PartialEq + std::fmt::Debug>(job: J, kind: &str, stored: Value) {
        assert_eq!(J::KIND, kind);
        assert_eq!(job.to_payload(), stored, "{kind}'s payload changed form");
        assert_eq!(serde_json::from_value::<J>(stored).unwrap(), job, "{kind} no longer reads its stored payload");
    }

    #[test]
    fn every_job_kind_keeps_its_stored_form() {
        golden(RunJob { run_id: 7, conversation_id: 3 }, "agent.run", json!({"run_id": 7, "conversation_id": 3}));
        golden(
            Send { message_id: 9, conversation_id: 3, channel_id: 2 },
            "message.send",
            json!({"message_id": 9, "conversation_id": 3, "channel_id": 2}),
        );
        golden(Watch { call_id: "call_01J".into() }, "call.watch", json!({"call_id": "call_01J"}));
        golden(
            DocumentJob { document_id: 5, collection_id: 4 },
            "knowledge.document",
            json!({"document_id": 5, "collection_id": 4}),
        );
        golden(Register { channel_id: 2 }, "channel.register", json!({"channel_id": 2}));
        golden(
            PollJob { channel_id: 2, cursor: Some("812".into()) },
            "channel.poll",
            json!({"channel_id": 2, "cursor": "812"}),
        );
        golden(PollJob { channel_id: 2, cursor: None }, "channel.poll", json!({"channel_id": 2, "cursor": null}));
        golden(DrainJob { endpoint_id: 11 }, "webhook.endpoint", json!({"endpoint_id": 11}));
        golden(OfferJob { handoff_id: 4 }, "handoff.offer", json!({"handoff_id": 4}));
        golden(AnalyzeCall { call_id: "call_01J".into() }, "call.analyze", json!({"call_id": "call_01J"}));
        golden(AnalyzeConversation { conversation_id: 3 }, "conversation.analyze", json!({"conversation_id": 3}));
    }
}
