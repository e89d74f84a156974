//! The durable job queue.
//!
//! - [`enqueue`] writes a job in the caller's transaction, so the job exists
//!   exactly when the change that calls for it does.
//! - A [`Worker`] claims due jobs of the kinds it has [`Handler`]s for, with
//!   a lease it renews while they run (`FOR UPDATE SKIP LOCKED` on
//!   PostgreSQL, so instances never claim the same job; SQLite has one
//!   writer). If the process dies, its leases lapse and any worker runs
//!   those jobs again: delivery is at least once.
//! - A handler answers [`Outcome::Done`] (or [`Outcome::Committed`] when it
//!   completed the job with its own writes), [`Outcome::Later`] (run again at a
//!   time, not a failure), [`Outcome::Retry`] (a failed attempt, retried on
//!   the kind's [`RetryPolicy`]) or [`Outcome::Fail`] (no point retrying).
//!   After the last attempt, or on `Fail`, the job is dead: kept with its
//!   error, and the handler's [`Handler::dead`] runs in the same
//!   transaction (a message is marked `failed`).
//! - Jobs of one `queue` run one at a time, in order.
//!
//! The table is read and written through `parley_store::repo::jobs`, which
//! tests use to see the queue.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parley_domain::{Scope, Timestamp};
pub use parley_store::repo::jobs::BackgroundJob;
use parley_store::repo::jobs::{self as repo, JobRow, NewJob};
use parley_store::{AsHandle, Db, StoreResult, Tx};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Attempts in a row cut off by their process dying after which a job is
/// buried instead of run again.
pub const MAX_INTERRUPTIONS: u32 = 3;

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct Enqueue {
    pub kind: &'static str,
    pub payload: Value,
    pub queue: Option<String>,
    /// The queue was born in the caller's transaction (see [`Enqueue::in_new_queue`]).
    pub queue_is_new: bool,
    pub scope: Option<Scope>,
    /// When it may run first (now by default).
    pub run_at: Option<Timestamp>,
}

impl Enqueue {
    pub fn new(kind: &'static str, payload: Value) -> Self {
        Self { kind, payload, queue: None, queue_is_new: false, scope: None, run_at: None }
    }

    /// A job of kind `J`.
    pub fn of<J: BackgroundJob>(job: &J) -> Self {
        Self::new(J::KIND, job.to_payload())
    }

    /// Runs after the earlier jobs of `queue`, one at a time.
    pub fn in_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Like [`Enqueue::in_queue`], for a queue named after something the
    /// caller's transaction created (a conversation opened in it): no other
    /// transaction can have queued in it, so the job can go straight to a
    /// worker here on PostgreSQL too, with no claim.
    pub fn in_new_queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self.queue_is_new = true;
        self
    }

    pub fn for_scope(mut self, scope: Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    pub fn at(mut self, run_at: Timestamp) -> Self {
        self.run_at = Some(run_at);
        self
    }
}

/// Enqueues a job in the caller's transaction; returns its id. Wake the
/// workers after the commit for it to run at once (they poll otherwise).
pub async fn enqueue(c: &mut impl AsHandle, job: Enqueue) -> StoreResult<i64> {
    repo::enqueue(
        c,
        NewJob {
            kind: job.kind,
            queue: job.queue,
            queue_is_new: job.queue_is_new,
            payload: job.payload,
            scope: job.scope,
            run_at: job.run_at.unwrap_or_else(Timestamp::now),
        },
    )
    .await
}

/// A claimed job, as its handler sees it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: i64,
    pub kind: String,
    pub payload: Value,
    pub scope: Option<Scope>,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Attempts cut off in a row before this one (the process running them
    /// died): one may have had effects it never recorded.
    pub interrupted: u32,
    /// The worker holding it: [`Job::complete`] checks it still does.
    worker: Arc<str>,
}

impl Job {
    /// Completes the job in `tx`, with the handler's own writes, so that the
    /// effect and the job's end commit together. False if this worker's
    /// lease lapsed and another worker took the job over (roll back then).
    pub async fn complete(&self, tx: &mut Tx) -> StoreResult<bool> {
        repo::complete(tx, self.id, &self.worker).await
    }

    /// The worker holding the job (for a handler that settles it itself).
    pub fn held_by(&self) -> &str {
        &self.worker
    }

    /// The job as kind `J` (an error if it is another kind or its payload
    /// does not read as one).
    pub fn read<J: BackgroundJob>(&self) -> Result<J, String> {
        if self.kind != J::KIND {
            return Err(format!("job {} is a {}, not a {}", self.id, self.kind, J::KIND));
        }
        serde_json::from_value(self.payload.clone()).map_err(|e| format!("job {} has a bad payload: {e}", self.id))
    }
}

/// What a handler made of a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Finished: the worker completes the job.
    Done,
    /// Finished, and the handler completed the job with [`Job::complete`]
    /// in the transaction of its own writes (and signalled what changed).
    Committed,
    /// Not a failure: run again at this time (a watchdog checking later).
    Later(Timestamp),
    /// The attempt failed; retry on the kind's schedule, or sooner/later
    /// when the other side said when (`Retry-After`).
    Retry { error: String, after: Option<Duration> },
    /// Failed for good: dead at once.
    Fail(String),
}

/// When to retry a kind's failed attempts: after the 1st failure wait
/// `schedule[0]`, and so on; a job fails for good after `schedule.len() + 1`
/// attempts.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub schedule: Vec<Duration>,
}

impl RetryPolicy {
    /// A schedule in seconds, multiplied by `scale` (tests run it fast).
    pub fn seconds(schedule: &[u64], scale: f64) -> Self {
        let scale = scale.max(0.0);
        Self { schedule: schedule.iter().map(|s| Duration::from_secs_f64(*s as f64 * scale)).collect() }
    }

    /// The wait after failed attempt number `attempt` (1-based), or `None`
    /// when that was the last.
    pub fn wait_after(&self, attempt: u32) -> Option<Duration> {
        self.schedule.get(attempt.checked_sub(1)? as usize).copied()
    }

    pub fn max_attempts(&self) -> u32 {
        self.schedule.len() as u32 + 1
    }
}

/// Runs one kind of job.
pub trait Handler: Send + Sync + 'static {
    fn kind(&self) -> &'static str;

    fn retry_policy(&self) -> RetryPolicy;

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome>;

    /// The job died (its last attempt failed, or it failed for good): runs in
    /// the transaction that buries it. An error rolls the burial back (the
    /// job runs again after its lease) and is logged with its causes.
    fn dead<'a>(&'a self, _tx: &'a mut Tx, _job: &'a Job, _error: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// After a transaction of this job committed (notify live views).
    fn committed(&self, _job: &Job) {}
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// How long a claimed job stays this worker's without renewal.
    pub lease: Duration,
    /// How often to look for due jobs besides being woken.
    pub poll_interval: Duration,
    /// Jobs run at once by this worker.
    pub concurrency: usize,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self { lease: Duration::from_secs(60), poll_interval: Duration::from_secs(1), concurrency: 32 }
    }
}

/// Claims and runs jobs for its handlers until shut down.
pub struct Worker {
    db: Db,
    handlers: HashMap<&'static str, Arc<dyn Handler>>,
    kinds: Vec<&'static str>,
    config: WorkerConfig,
    /// Names this worker's leases; new at every start.
    id: Arc<str>,
}

impl Worker {
    pub fn new(db: Db, config: WorkerConfig) -> Self {
        Self {
            db,
            handlers: HashMap::new(),
            kinds: Vec::new(),
            config,
            id: Arc::from(format!("worker-{}", ulid::Ulid::new())),
        }
    }

    pub fn handle(mut self, handler: Arc<dyn Handler>) -> Self {
        self.kinds.push(handler.kind());
        self.handlers.insert(handler.kind(), handler);
        self
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    fn lease_until(&self) -> Timestamp {
        Timestamp::now().plus_duration(self.config.lease)
    }

    /// Runs until `shutdown` turns true (or its sender is dropped), woken
    /// early whenever a transaction that queued a job of its kinds commits
    /// on this instance; then lets running jobs finish (up to the lease) and
    /// gives the leases of the others back.
    ///
    /// Jobs queued on this instance come to it already leased (see
    /// `parley_store::JobBell`) and start when due; the others it claims.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let (handed, mut taken) = tokio::sync::mpsc::unbounded_channel();
        let taker = parley_store::Taker { worker: Arc::clone(&self.id), lease: self.config.lease, jobs: handed };
        let mut wake = self.db.bell().subscribe(&self.kinds, Some(taker));
        let keeper = tokio::spawn(Arc::clone(&self).keep_leases());
        let mut running: JoinSet<()> = JoinSet::new();
        // Handed-over jobs waiting for their time or for room, by due time.
        let mut held: BTreeMap<(Timestamp, i64), JobRow> = BTreeMap::new();
        loop {
            while running.try_join_next().is_some() {}
            while let Ok(row) = taken.try_recv() {
                held.insert((row.run_at, row.id), row);
            }
            let now = Timestamp::now();
            while running.len() < self.config.concurrency
                && let Some(entry) = held.first_entry()
                && entry.key().0 <= now
            {
                let me = Arc::clone(&self);
                let row = entry.remove();
                running.spawn(async move { me.run_one(row).await });
            }
            let room = self.config.concurrency.saturating_sub(running.len());
            let mut claimed_full = false;
            if room > 0 {
                match self.claim(room as i64).await {
                    Ok(jobs) => {
                        claimed_full = jobs.len() == room;
                        for row in jobs {
                            let me = Arc::clone(&self);
                            running.spawn(async move { me.run_one(row).await });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not claim jobs"),
                }
            }
            if claimed_full && running.len() < self.config.concurrency {
                continue;
            }
            // Full: a finished job wakes the loop to start the next.
            let next_held = held
                .first_key_value()
                .filter(|_| running.len() < self.config.concurrency)
                .map(|((at, _), _)| until(*at));
            let nap = next_held.map_or(self.config.poll_interval, |d| d.min(self.config.poll_interval));
            tokio::select! {
                changed = wake.changed() => if changed.is_err() { wake = watch::channel(0).1 },
                Some(row) = taken.recv() => { held.insert((row.run_at, row.id), row); }
                // A finished job may let the next of its queue go.
                Some(_) = running.join_next(), if !running.is_empty() => {}
                _ = tokio::time::sleep(nap) => {}
                stop = shutdown.changed() => if stop.is_err() || *shutdown.borrow() { break },
            }
        }
        let _ = tokio::time::timeout(self.config.lease, async { while running.join_next().await.is_some() {} }).await;
        running.abort_all();
        keeper.abort();
        // Held jobs are given back with the rest.
        let released = async {
            let mut tx = self.db.begin().await?;
            repo::release_all(&mut tx, &self.id).await?;
            tx.commit().await
        }
        .await;
        if let Err(e) = released {
            tracing::warn!(error = %e, "could not give job leases back; they will lapse");
        }
    }

    async fn claim(&self, limit: i64) -> StoreResult<Vec<JobRow>> {
        if self.db.backend() == parley_store::Backend::Postgres {
            // One statement, atomic alone (its rows locked, others' skipped),
            // as cheap as a look when nothing is due: no look first and no
            // BEGIN/COMMIT around it, one round trip instead of four.
            return repo::claim(&mut self.db.read().await?, &self.kinds, &self.id, self.lease_until(), limit).await;
        }
        // Most wake-ups find nothing new: look before taking SQLite's write lock.
        if !repo::any_claimable(&mut self.db.read().await?, &self.kinds).await? {
            return Ok(Vec::new());
        }
        let mut tx = self.db.begin().await?;
        let jobs = repo::claim(&mut tx, &self.kinds, &self.id, self.lease_until(), limit).await?;
        tx.commit().await?;
        Ok(jobs)
    }

    async fn keep_leases(self: Arc<Self>) {
        let every = (self.config.lease / 3).max(Duration::from_millis(50));
        loop {
            tokio::time::sleep(every).await;
            let renewed = async {
                let mut tx = self.db.begin().await?;
                repo::renew(&mut tx, &self.id, self.lease_until()).await?;
                tx.commit().await
            }
            .await;
            if let Err(e) = renewed {
                tracing::warn!(error = %e, "could not renew job leases");
            }
        }
    }

    async fn run_one(&self, row: JobRow) {
        let Some(handler) = self.handlers.get(row.kind.as_str()).cloned() else { return };
        let started = std::time::Instant::now();
        let job = Job {
            id: row.id,
            kind: row.kind.clone(),
            scope: row.scope(),
            payload: row.payload.0,
            attempt: row.attempts.max(0) as u32 + 1,
            interrupted: row.interruptions.max(0) as u32,
            worker: Arc::clone(&self.id),
        };
        let span = tracing::info_span!(
            "job",
            otel.name = %format_args!("job {}", job.kind),
            job.id = job.id,
            job.kind = %job.kind,
            job.attempt = i64::from(job.attempt),
            job.outcome = tracing::field::Empty,
            workspace_id = job.scope.map(|s| s.workspace_id),
        );
        // A job whose runs keep killing their process (see `repo::claim`)
        // is buried unrun, whatever its kind's retry schedule.
        let outcome = if job.interrupted >= MAX_INTERRUPTIONS {
            Outcome::Fail(format!(
                "stopped after {} attempts in a row that did not finish (the process running it stopped){}",
                job.interrupted,
                row.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default()
            ))
        } else {
            use tracing::Instrument;
            handler.run(&job).instrument(span.clone()).await
        };
        let metrics = self.db.metrics();
        metrics.job_duration.with_label_values(&[&job.kind]).observe(started.elapsed().as_secs_f64());
        let counted = match &outcome {
            Outcome::Committed | Outcome::Done => "done",
            Outcome::Later(_) => "later",
            Outcome::Retry { .. } if handler.retry_policy().wait_after(job.attempt).is_some() => "retry",
            Outcome::Retry { .. } | Outcome::Fail(_) => "failed",
        };
        metrics.job_runs.with_label_values(&[&job.kind, counted]).inc();
        span.record("job.outcome", counted);
        self.settle_until_recorded(handler.as_ref(), &job, outcome).await;
    }

    /// Writes what became of a job, again and again while it cannot (the
    /// database is down): the job stays this worker's meanwhile — its lease
    /// is renewed with the others, so nobody runs it twice — and its outcome
    /// is recorded once the database answers. A worker that stops first
    /// hands the job back with its other leases.
    async fn settle_until_recorded(&self, handler: &dyn Handler, job: &Job, outcome: Outcome) {
        let mut wait = Duration::from_millis(250);
        let mut failures = 0u32;
        loop {
            match self.settle(handler, job, outcome.clone()).await {
                Ok(()) if failures > 0 => {
                    tracing::info!(job = job.id, kind = %job.kind, failures, "recorded a job's outcome after all");
                    return;
                }
                Ok(()) => return,
                Err(e) => {
                    // Said once, then once a minute (every 12th try at 5 s).
                    if failures % 12 == 0 {
                        tracing::warn!(job = job.id, kind = %job.kind, error = format!("{e:#}"),
                            "could not record a job's outcome; trying again");
                    }
                    failures += 1;
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Writes what became of a job.
    async fn settle(&self, handler: &dyn Handler, job: &Job, outcome: Outcome) -> anyhow::Result<()> {
        if outcome == Outcome::Committed {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        match outcome {
            Outcome::Committed => {}
            Outcome::Done => {
                repo::complete(&mut tx, job.id, &self.id).await?;
            }
            Outcome::Later(at) => {
                repo::reschedule(&mut tx, job.id, &self.id, at, None).await?;
            }
            Outcome::Retry { error, after } => match handler.retry_policy().wait_after(job.attempt) {
                Some(wait) => {
                    let at = Timestamp::now().plus_duration(after.unwrap_or(wait));
                    tracing::info!(job = job.id, kind = %job.kind, attempt = job.attempt, %error, "job failed; will retry");
                    repo::reschedule(&mut tx, job.id, &self.id, at, Some(&error)).await?;
                }
                None => self.bury(&mut tx, handler, job, &error).await?,
            },
            Outcome::Fail(error) => self.bury(&mut tx, handler, job, &error).await?,
        }
        tx.commit().await?;
        handler.committed(job);
        Ok(())
    }

    async fn bury(&self, tx: &mut Tx, handler: &dyn Handler, job: &Job, error: &str) -> anyhow::Result<()> {
        tracing::warn!(job = job.id, kind = %job.kind, attempt = job.attempt, %error, "job failed for good");
        if repo::bury(tx, job.id, &self.id, error).await? {
            handler.dead(tx, job, error).await?;
        }
        Ok(())
    }
}

/// The time from now until `at` (zero once it is past).
fn until(at: Timestamp) -> Duration {
    Duration::from_micros((at.unix_micros() - Timestamp::now().unix_micros()).max(0) as u64)
}
