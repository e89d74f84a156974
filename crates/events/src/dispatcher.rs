//! The webhook dispatcher: delivers queued events, retries, records.
//!
//! Each instance takes a lease on endpoints that have due deliveries (one
//! holder per endpoint, `FOR UPDATE SKIP LOCKED` on PostgreSQL) and runs one
//! sender per endpoint, which delivers its events one at a time in order and
//! keeps the lease a little while after its queue empties, so a steady
//! stream of events costs no claim and release per event. A recorder writes
//! the attempts of every sender in shared transactions. A keeper renews the
//! leases. If the process dies, its leases lapse and any instance (or the
//! restarted one) delivers again what was not recorded, with the same
//! `webhook-id`: delivery is at least once, and an endpoint is never served
//! by two instances at once. Slow endpoints only hold up their own queue.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parley_domain::Timestamp;
use parley_domain::crypto::SecretBox;
use parley_store::Db;
use parley_store::repo::webhooks::{self, AttemptOutcome, DueDelivery, EndpointRow};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::task::JoinSet;

use crate::post;
use crate::signing::WebhookSecret;
use crate::ssrf;

/// One sender's attempts, waiting to be written.
struct Record {
    endpoint: EndpointRow,
    outcomes: Vec<AttemptOutcome>,
    disable: Option<String>,
    done: oneshot::Sender<Result<(), parley_store::StoreError>>,
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
    /// Names this process's leases; new at every start.
    instance: String,
    /// Bumped (by the API) when new deliveries may be due.
    wake: watch::Receiver<u64>,
    /// Signalled when a sender gives its endpoint back.
    released: Notify,
    /// Attempts waiting to be written, from every sender.
    recorder: mpsc::Sender<Record>,
    recorder_rx: std::sync::Mutex<Option<mpsc::Receiver<Record>>>,
    /// Endpoints this instance is delivering to right now.
    active: std::sync::Mutex<HashSet<i64>>,
}

impl Dispatcher {
    pub fn new(db: Db, secrets: SecretBox, config: DispatcherConfig, wake: watch::Receiver<u64>) -> Self {
        let client = ssrf::http_client(config.allow_private_targets, config.request_timeout);
        let (recorder, recorder_rx) = mpsc::channel(1024);
        Self {
            db,
            secrets,
            client,
            config,
            instance: format!("dispatcher-{}", ulid::Ulid::new()),
            wake,
            released: Notify::new(),
            recorder,
            recorder_rx: std::sync::Mutex::new(Some(recorder_rx)),
            active: std::sync::Mutex::new(HashSet::new()),
        }
    }

    fn scaled(&self, seconds: u64) -> Duration {
        Duration::from_secs_f64((seconds as f64 * self.config.retry_scale).max(0.0))
    }

    fn lease_until(&self) -> Timestamp {
        Timestamp::from_datetime(Timestamp::now().as_datetime() + self.config.lease)
    }

    /// Runs until `shutdown` turns true, then lets in-flight deliveries finish
    /// (up to the request timeout) and hands its leases back.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let keeper = tokio::spawn(Arc::clone(&self).keep_leases());
        let records = self.recorder_rx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let recorder = records.map(|rx| tokio::spawn(Arc::clone(&self).record(rx)));
        let mut wake = self.wake.clone();
        let mut senders: JoinSet<()> = JoinSet::new();
        loop {
            while senders.try_join_next().is_some() {}
            let room = self.config.max_endpoints.saturating_sub(self.active().len());
            if room > 0 {
                match self.claim(room as i64).await {
                    Ok(ids) => {
                        for id in ids {
                            // A sender leaves `active` before it releases its lease,
                            // so a claimed endpoint never has a sender already.
                            if self.active().insert(id) {
                                let me = Arc::clone(&self);
                                senders.spawn(async move { me.serve_endpoint(id).await });
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not claim webhook endpoints"),
                }
            }
            tokio::select! {
                _ = woken(&mut wake) => {}
                _ = self.released.notified() => {}
                _ = tokio::time::sleep(self.config.poll_interval) => {}
                _ = shutdown.changed() => break,
            }
        }
        let _ =
            tokio::time::timeout(self.config.request_timeout, async { while senders.join_next().await.is_some() {} })
                .await;
        senders.abort_all();
        keeper.abort();
        if let Some(r) = recorder {
            r.abort();
        }
        let leftover: Vec<i64> = self.active().drain().collect();
        for id in leftover {
            let _ = self.release(id).await;
        }
    }

    fn active(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        self.active.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn claim(&self, limit: i64) -> Result<Vec<i64>, parley_store::StoreError> {
        let mut tx = self.db.begin().await?;
        let ids = webhooks::claim_endpoints(&mut tx, &self.instance, self.lease_until(), limit).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn release(&self, endpoint_id: i64) -> Result<(), parley_store::StoreError> {
        let mut tx = self.db.begin().await?;
        webhooks::release_endpoint(&mut tx, &self.instance, endpoint_id).await?;
        tx.commit().await
    }

    async fn keep_leases(self: Arc<Self>) {
        let every = (self.config.lease / 3).max(Duration::from_millis(100));
        loop {
            tokio::time::sleep(every).await;
            let renewed = async {
                let mut tx = self.db.begin().await?;
                webhooks::renew_leases(&mut tx, &self.instance, self.lease_until()).await?;
                tx.commit().await
            }
            .await;
            if let Err(e) = renewed {
                tracing::warn!(error = %e, "could not renew webhook leases");
            }
        }
    }

    /// Delivers an endpoint's due events in order until none is due.
    async fn serve_endpoint(&self, endpoint_id: i64) {
        let drained = self.drain(endpoint_id).await;
        self.active().remove(&endpoint_id);
        if let Err(e) = drained {
            tracing::warn!(error = %e, endpoint_id, "webhook delivery round failed; the lease will lapse and it will be retried");
            return;
        }
        if let Err(e) = self.release(endpoint_id).await {
            tracing::warn!(error = %e, endpoint_id, "could not release a webhook endpoint");
        }
        // Events may have arrived while we gave the lease back: look again.
        self.released.notify_one();
    }

    /// Delivers due events in order; once none is due, waits (holding the
    /// lease) for new events up to the poll interval, then returns.
    async fn drain(&self, endpoint_id: i64) -> Result<(), parley_store::StoreError> {
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
                return Err(parley_store::StoreError::Corrupt("the webhook recorder stopped".into()));
            }
            written.await.map_err(|_| parley_store::StoreError::Corrupt("the webhook recorder stopped".into()))??;
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
                let result = match &failure {
                    None => Ok(()),
                    Some(e) => {
                        Err(parley_store::StoreError::Corrupt(format!("recording webhook attempts failed: {e}")))
                    }
                };
                let _ = r.done.send(result);
            }
        }
    }

    fn failing_too_long(&self, endpoint: &EndpointRow) -> bool {
        let since = endpoint.failing_since.unwrap_or_else(Timestamp::now);
        let failing_for = Timestamp::now().unix_micros() - since.unix_micros();
        failing_for >= self.scaled(DISABLE_AFTER_S).as_micros() as i64
    }

    fn open_secrets(&self, endpoint: &EndpointRow) -> Result<Vec<WebhookSecret>, parley_store::StoreError> {
        endpoint
            .signing_secrets(Timestamp::now())
            .into_iter()
            .map(|sealed| {
                self.secrets
                    .open(sealed)
                    .ok()
                    .and_then(|raw| String::from_utf8(raw).ok())
                    .and_then(|s| WebhookSecret::parse(&s))
                    .ok_or_else(|| {
                        parley_store::StoreError::Corrupt(format!(
                            "webhook endpoint {} secret cannot be opened",
                            endpoint.id
                        ))
                    })
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
            allow_private: self.config.allow_private_targets,
            read_limit: EXCERPT_BYTES,
        };
        post::send(&self.client, self.config.request_timeout, request).await
    }
}

/// Resolves when the API signals new work; never, once the API is gone.
async fn woken(wake: &mut watch::Receiver<u64>) {
    if wake.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
