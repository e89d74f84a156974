//! The job kinds services run, on one worker per instance (see `parley_jobs`).

use std::sync::Arc;

use crate::messaging::courier;
use crate::{Services, calls};

/// A worker for every job kind of this version: `message.send` (the
/// courier), `call.watch` (the call watchdog), `agent.run` (agents
/// answering) and `knowledge.document` (documents split into passages).
pub fn worker(svc: &Services) -> parley_jobs::Worker {
    parley_jobs::Worker::new(svc.db.clone(), courier::worker_config(&svc.config.courier))
        .handle(Arc::new(courier::Courier::new(svc.clone())))
        .handle(Arc::new(calls::Watchdog::new(svc.clone())))
        .handle(Arc::new(crate::agents::runs::Runner::new(svc.clone())))
        .handle(Arc::new(crate::knowledge::DocumentProcessor::new(svc.clone())))
}

/// Runs this instance's worker until `shutdown` turns true; new jobs wake it
/// after each commit.
pub async fn run(svc: Services, shutdown: tokio::sync::watch::Receiver<bool>) {
    let worker = Arc::new(worker(&svc));
    worker.run(svc.outbox.subscribe(), shutdown).await;
}
