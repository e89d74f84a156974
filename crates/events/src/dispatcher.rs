//! The webhook dispatcher: delivers queued events, retries, records.
//!
//! Queuing deliveries for an endpoint makes sure it has a drain job
//! (`webhook.endpoint`, see `parley_store::repo::webhooks`), run by the job
//! queue's worker (`parley_jobs`), which leases it to one instance at a
//! time (`FOR UPDATE SKIP LOCKED` on PostgreSQL). The drain delivers the
//! endpoint's due events one at a time in order and keeps going a little
//! while after its queue empties, so a steady stream of events costs no
//! claim per event; then it reschedules itself for the next retry, or ends
//! when nothing is pending. A recorder writes the attempts of every drain in
//! shared transactions. If the process dies, its leases lapse and any
//! instance (or the restarted one) delivers again what was not recorded,
//! with the same `webhook-id`: delivery is at least once, and an endpoint
//! is never served by two instances at once. Slow endpoints only hold up
//! their own queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parley_domain::Timestamp;
use parley_domain::crypto::SecretBox;
use parley_jobs::{Handler, Job, Outcome, RetryPolicy};
use parley_store::Db;
use parley_store::repo::webhooks::{self, AttemptOutcome, DueDelivery, EndpointRow};
use tokio::sync::{mpsc, oneshot, watch};

use crate::post;
use crate::signing::WebhookSecret;
use crate::ssrf;

/// One sender's attempts, waiting to be written.
struct Record {
    endpoint: EndpointRow,
    outcomes: Vec<AttemptOutcome>,
    disable: Option<String>,
    /// The write's outcome (a failure in words: one error serves a whole batch).
    done: oneshot::Sender<Result<(), String>>,
}

/// Seconds to wait after the 1st, 2nd, … failed attempt (before scaling).
pub const RETRY_SCHEDULE_S: [u64; 7] = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600];
/// An endpoint failing for this long (before scaling) is disabled.
pub const DISABLE_AFTER_S: u64 = 5 * 24 * 3600;
const EXCERPT_BYTES: usize = 1024;

#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// Multiplies the retry schedule and the 5-day disable window (e.g. 0.001 in tests).
    pub retry_scale: f64,
    /// How long a claimed endpoint stays ours without renewal.
    pub lease: Duration,
    /// How often to look for due work besides being woken by new events.
    pub poll_interval: Duration,
    pub request_timeout: Duration,
    /// Endpoints served at once by this instance.
    pub max_endpoints: usize,
    /// Deliveries fetched (and recorded) per round for one endpoint.
    pub batch: i64,
    pub allow_private_targets: bool,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        Self {
            retry_scale: 1.0,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(15),
            max_endpoints: 64,
            batch: 50,
            allow_private_targets: false,
        }
    }
}

pub struct Dispatcher {
    db: Db,
    secrets: SecretBox,
    client: reqwest::Client,
    config: DispatcherConfig,
    /// Bumped (by the API) when new deliveries may be due.
    wake: watch::Receiver<u64>,
    /// Attempts waiting to be written, from every drain.
    recorder: mpsc::Sender<Record>,
    recorder_rx: std::sync::Mutex<Option<mpsc::Receiver<Record>>>,
}

impl Dispatcher {
    pub fn new(db: Db, secrets: SecretBox, config: DispatcherConfig, wake: watch::Receiver<u64>) -> Self {
        let client = ssrf::http_client(config.allow_private_targets, config.request_timeout);
        let (recorder, recorder_rx) = mpsc::channel(1024);
        Self { db, secrets, client, config, wake, recorder, recorder_rx: std::sync::Mutex::new(Some(recorder_rx)) }
    }

    /// The worker that runs this dispatcher's drains (one per endpoint at a
    /// time, up to `max_endpoints` at once); starts the attempt recorder.
    pub fn worker(self: Arc<Self>) -> parley_jobs::Worker {
        if let Some(rx) = self.recorder_rx.lock().unwrap_or_else(|p| p.into_inner()).take() {
            tokio::spawn(Arc::clone(&self).record(rx));
        }
        let config = parley_jobs::WorkerConfig {
            lease: self.config.lease,
            poll_interval: self.config.poll_interval,
            concurrency: self.config.max_endpoints,
        };
        parley_jobs::Worker::new(self.db.clone(), config).handle(self)
    }

    fn scaled(&self, seconds: u64) -> Duration {
        Duration::from_secs_f64((seconds as f64 * self.config.retry_scale).max(0.0))
    }

    /// Drains the endpoint, then settles its job: due again at the next
    /// retry, or done when nothing is pending.
    async fn serve(&self, job: &Job) -> anyhow::Result<()> {
        let endpoint_id = job.read::<webhooks::DrainJob>().map_err(anyhow::Error::msg)?.endpoint_id;
        self.drain(endpoint_id).await?;
        let mut tx = self.db.begin().await?;
        webhooks::settle_drain(&mut tx, job.id, job.held_by(), endpoint_id).await?;
        Ok(tx.commit().await?)
    }

    /// Delivers due events in order; once none is due, waits (holding the
    /// lease) for new events up to the poll interval, then returns.
    async fn drain(&self, endpoint_id: i64) -> anyhow::Result<()> {
        let mut wake = self.wake.clone();
        let mut idle_since: Option<Instant> = None;
        loop {
            let (endpoint, due) = {
                let mut c = self.db.read().await?;
                let Some(endpoint) = webhooks::endpoint_for_dispatch(&mut c, endpoint_id).await? else { return Ok(()) };
                if endpoint.status != parley_domain::webhook::EndpointStatus::Active {
                    return Ok(());
                }
                let due = webhooks::due_deliveries(&mut c, endpoint_id, self.config.batch).await?;
                (endpoint, due)
            };
            if due.is_empty() {
                let idle = idle_since.get_or_insert_with(Instant::now).elapsed();
                let Some(left) = self.config.poll_interval.checked_sub(idle) else { return Ok(()) };
                // New events on this instance wake us at once; others' are polled.
                let _ = tokio::time::timeout(left.min(Duration::from_millis(250)), woken(&mut wake)).await;
                continue;
            }
            idle_since = None;
            let secrets = self.open_secrets(&endpoint)?;
            let mut outcomes = Vec::with_capacity(due.len());
            let mut disable = None;
            for delivery in &due {
                let (outcome, gone) = self.attempt(&endpoint, &secrets, delivery).await;
                let failed = !outcome.succeeded;
                outcomes.push(outcome);
                if gone {
                    disable = Some("The endpoint answered 410 Gone".to_owned());
                    break;
                }
                if failed && self.failing_too_long(&endpoint) {
                    disable = Some("Deliveries have failed for 5 days".to_owned());
                    break;
                }
            }
            let stop = disable.is_some();
            // Wait for the write: the next fetch must not see these deliveries as due.
            let (done, written) = oneshot::channel();
            if self.recorder.send(Record { endpoint, outcomes, disable, done }).await.is_err() {
                anyhow::bail!("the webhook attempt recorder stopped");
            }
            written
                .await
                .map_err(|_| anyhow::anyhow!("the webhook attempt recorder stopped"))?
                .map_err(|e| anyhow::anyhow!("recording webhook attempts failed: {e}"))?;
            if stop {
                return Ok(());
            }
        }
    }

    /// Writes senders' attempts, several senders' at a time in one transaction.
    async fn record(self: Arc<Self>, mut rx: mpsc::Receiver<Record>) {
        let mut batch = Vec::new();
        while let Some(first) = rx.recv().await {
            batch.push(first);
            while batch.len() < 64 {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            let written = async {
                let mut tx = self.db.begin().await?;
                for r in &batch {
                    webhooks::record_attempts(&mut tx, &r.endpoint, &r.outcomes, r.disable.as_deref()).await?;
                }
                tx.commit().await
            }
            .await;
            let failure = written.err().map(|e| e.to_string());
            for r in batch.drain(..) {
                let _ = r.done.send(failure.clone().map_or(Ok(()), Err));
            }
        }
    }

    fn failing_too_long(&self, endpoint: &EndpointRow) -> bool {
        let since = endpoint.failing_since.unwrap_or_else(Timestamp::now);
        let failing_for = Timestamp::now().unix_micros() - since.unix_micros();
        failing_for >= self.scaled(DISABLE_AFTER_S).as_micros() as i64
    }

    fn open_secrets(&self, endpoint: &EndpointRow) -> anyhow::Result<Vec<WebhookSecret>> {
        endpoint
            .signing_secrets(Timestamp::now())
            .into_iter()
            .map(|sealed| {
                self.secrets
                    .open(sealed)
                    .ok()
                    .and_then(|raw| String::from_utf8(raw).ok())
                    .and_then(|s| WebhookSecret::parse(&s))
                    .ok_or_else(|| anyhow::anyhow!("webhook endpoint {}'s secret cannot be opened", endpoint.id))
            })
            .collect()
    }

    /// One HTTP attempt. Returns its outcome and whether the endpoint said 410.
    async fn attempt(
        &self,
        endpoint: &EndpointRow,
        secrets: &[WebhookSecret],
        d: &DueDelivery,
    ) -> (AttemptOutcome, bool) {
        let attempt = d.attempts + 1;
        let body = serde_json::to_vec(&serde_json::json!({
            "type": d.event_type,
            "timestamp": d.event_created_at,
            "livemode": d.livemode,
            "data": d.data.0,
        }))
        .unwrap_or_default();
        let started = Instant::now();
        let sent = self.post(endpoint, secrets, &d.event_id, body).await;
        let duration_ms = started.elapsed().as_millis() as i64;
        let at = Timestamp::now();
        let (status_code, error, excerpt, retry_after) = match sent {
            Ok(reply) => (Some(i64::from(reply.status)), reply.error(), Some(reply.body), reply.retry_after),
            Err(e) => (None, Some(e), None, None),
        };
        let succeeded = error.is_none();
        let counted = if succeeded { "delivered" } else { "failed" };
        self.db.metrics().webhook_attempts.with_label_values(&[counted]).inc();
        let gone = status_code == Some(410);
        let next_attempt_at = if succeeded || gone || attempt as usize > RETRY_SCHEDULE_S.len() {
            None
        } else {
            let wait = retry_after.unwrap_or_else(|| self.scaled(RETRY_SCHEDULE_S[attempt as usize - 1]));
            Some(Timestamp::from_datetime(at.as_datetime() + wait))
        };
        let outcome = AttemptOutcome {
            delivery_id: d.id,
            event_id: d.event_id.clone(),
            event_type: d.event_type.clone(),
            attempt,
            status_code,
            error,
            duration_ms,
            response_body_excerpt: excerpt,
            at,
            next_attempt_at,
            succeeded,
        };
        (outcome, gone)
    }

    /// Sends one signed request; returns the status, the start of the answer,
    /// and a `Retry-After` (on 429 and 503) to honour.
    async fn post(
        &self,
        endpoint: &EndpointRow,
        secrets: &[WebhookSecret],
        event_id: &str,
        body: Vec<u8>,
    ) -> Result<post::Reply, String> {
        let request = post::SignedPost {
            url: &endpoint.url,
            secrets,
            id: event_id,
            body,
            authorization: None,
            headers: &[],
            allow_private: self.config.allow_private_targets,
            read_limit: EXCERPT_BYTES,
        };
        post::send(&self.client, self.config.request_timeout, request).await
    }
}

impl Handler for Dispatcher {
    fn kind(&self) -> &'static str {
        webhooks::DRAIN_KIND
    }

    fn retry_policy(&self) -> RetryPolicy {
        // Deliveries keep their own schedule (RETRY_SCHEDULE_S); a drain
        // that fails (the database) is simply run again later.
        RetryPolicy { schedule: Vec::new() }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match self.serve(job).await {
                Ok(()) => Outcome::Committed,
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        job = job.id,
                        "webhook delivery round failed; it runs again shortly"
                    );
                    Outcome::Later(Timestamp::now().plus_duration(self.config.poll_interval))
                }
            }
        })
    }
}

/// Resolves when the API signals new work; never, once the API is gone.
async fn woken(wake: &mut watch::Receiver<u64>) {
    if wake.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
