//! The job kinds services run, on one worker per instance (see `parley_jobs`).

use std::sync::Arc;

use crate::messaging::courier;
use crate::{Services, calls};

/// The worker for `message.send` (the courier), `call.watch` (the call
/// watchdog) and `knowledge.document` (documents split into passages).
pub fn worker(svc: &Services) -> parley_jobs::Worker {
    parley_jobs::Worker::new(svc.db.clone(), courier::worker_config(&svc.config.courier))
        .handle(Arc::new(courier::Courier::new(svc.clone())))
        .handle(Arc::new(calls::Watchdog::new(svc.clone())))
        .handle(Arc::new(crate::knowledge::DocumentProcessor::new(svc.clone())))
}

/// The worker for `agent.run`: runs mostly wait on their engine, so they
/// get their own, wider concurrency (`agents.concurrency`), and never wait
/// behind outbound messages (nor these behind them).
pub fn agent_worker(svc: &Services) -> parley_jobs::Worker {
    let config = parley_jobs::WorkerConfig {
        concurrency: svc.config.runtime.concurrency.max(1),
        ..courier::worker_config(&svc.config.courier)
    };
    parley_jobs::Worker::new(svc.db.clone(), config).handle(Arc::new(crate::agents::runs::Runner::new(svc.clone())))
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
