//! Group commit: many requests' writes in one transaction.
//!
//! A commit costs a disk flush (about 0.2 ms on SQLite with
//! `synchronous=FULL`), and SQLite has one writer, so one transaction per
//! request caps a busy write path at a few hundred to a thousand requests a
//! second. Here requests queue their job; whoever holds the writer turn
//! (the leader) takes the oldest queued jobs (up to [`MAX_BATCH`]), runs
//! them in one transaction (a failing job is taken out and the rest run
//! again), commits once, and answers all of them; a request still queued
//! then leads the next batch. A request is answered only after the commit
//! that holds its write, so nothing acknowledged can be lost. With no
//! contention a batch is a single job and this costs nothing. On
//! PostgreSQL a few leaders run batches side by side (see
//! [`POSTGRES_LEADERS`]).
//!
//! A job that loses a race to another transaction (another batch or
//! instance wrote the same unique key first, or a deadlock) runs again,
//! with its batch, in a new transaction that sees the winner's rows (up to
//! [`RACE_RETRIES`] times): a webhook delivered twice at once is stored
//! once and both deliveries are answered.
//!
//! A kind of job may also read ahead for the whole batch (see
//! [`GroupCommit::with_look_ahead`]): what its jobs would each look up and
//! not find is then found missing in one statement for all of them.

use std::sync::Arc;

use futures::future::BoxFuture;
use parley_store::Tx;
use tokio::sync::oneshot;

use crate::{ServiceError, ServiceResult, Services, Work};

/// One kind of job: how to run it in a unit of work (what it signals goes
/// out once the batch commits).
pub type Run<J, R> = for<'a> fn(&'a mut Work, &'a Services, J) -> BoxFuture<'a, ServiceResult<R>>;

/// Reads ahead for a whole batch, once it is taken, what its jobs will
/// look up one by one (see `parley_store::Absences`).
pub type LookAhead<J> =
    for<'a> fn(&'a mut Tx, &'a Services, Vec<&'a J>) -> BoxFuture<'a, parley_store::StoreResult<()>>;

/// Orders a batch's jobs by the rows they lock (see
/// [`GroupCommit::with_lock_order`]).
pub type LockOrder<J> = fn(&J, &J) -> std::cmp::Ordering;

type Waiting<J, R> = (J, oneshot::Sender<ServiceResult<R>>);

/// Jobs in one transaction at most: a batch holds the writer while its jobs
/// run one after another, and the first of them waits for the last, so a
/// burst is committed in slices of a few milliseconds each.
const MAX_BATCH: usize = 32;

/// Times a job that lost a race runs again before its error is answered.
/// Once is enough for one race (the next transaction sees the winner);
/// two allows for a second race on another key in the same job.
const RACE_RETRIES: u8 = 2;

/// Batches in flight at once per instance on PostgreSQL. SQLite has one
/// writer, so a second batch would only wait for it; PostgreSQL runs
/// transactions side by side, and one batch at a time left its backends
/// waiting on the client ~90% of the time (docs/research/write-path.md §6).
/// Several instances already commit batches side by side; this is the same
/// within one. A few, not one per request: each batch is a connection the
/// agent runs and reads then cannot use.
const POSTGRES_LEADERS: usize = 4;

pub struct GroupCommit<J, R> {
    /// Its `kind` in `parley_group_commit_writes`.
    kind: &'static str,
    queue: std::sync::Mutex<Vec<Waiting<J, R>>>,
    /// A permit is held by each leader while it runs a batch: one on
    /// SQLite, [`POSTGRES_LEADERS`] on PostgreSQL (made at first use, when
    /// the backend is known).
    turn: std::sync::OnceLock<tokio::sync::Semaphore>,
    run: Run<J, R>,
    look_ahead: Option<LookAhead<J>>,
    lock_order: Option<LockOrder<J>>,
}

impl<J: Clone + Send + Sync + 'static, R: Send + 'static> GroupCommit<J, R> {
    /// Groups jobs that `run` writes; `kind` names them in the metrics.
    pub fn new(kind: &'static str, run: Run<J, R>) -> Self {
        Self {
            kind,
            queue: std::sync::Mutex::new(Vec::new()),
            turn: std::sync::OnceLock::new(),
            run,
            look_ahead: None,
            lock_order: None,
        }
    }

    fn steps(&self) -> Steps<J, R> {
        Steps { kind: self.kind, run: self.run, look_ahead: self.look_ahead }
    }

    /// Has each batch read ahead with `look_ahead` before its jobs run.
    pub fn with_look_ahead(self, look_ahead: LookAhead<J>) -> Self {
        Self { look_ahead: Some(look_ahead), ..self }
    }

    /// Has each batch run its jobs in `order` (a stable sort: equal jobs
    /// keep their arrival order). Batches on PostgreSQL run side by side;
    /// two that lock the same rows in opposite orders (conversation X then
    /// Y, and Y then X) deadlock, and PostgreSQL then aborts one of them.
    /// Ordered by the rows they lock, they wait for each other instead.
    pub fn with_lock_order(self, order: LockOrder<J>) -> Self {
        Self { lock_order: Some(order), ..self }
    }

    /// The oldest queued jobs, at most [`MAX_BATCH`], in the lock order.
    fn take_batch(&self) -> Vec<Waiting<J, R>> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let n = queue.len().min(MAX_BATCH);
        let mut batch: Vec<_> = queue.drain(..n).collect();
        if let Some(order) = self.lock_order {
            batch.sort_by(|(a, _), (b, _)| order(a, b));
        }
        batch
    }

    /// Runs `job` (with whatever else is queued) and answers after its commit.
    pub async fn submit(&self, svc: &Services, job: J) -> ServiceResult<R> {
        let (reply, mut answer) = oneshot::channel();
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push((job, reply));
        let turns = self.turn.get_or_init(|| {
            let leaders = match svc.db.backend() {
                parley_store::Backend::Sqlite => 1,
                parley_store::Backend::Postgres => POSTGRES_LEADERS,
            };
            tokio::sync::Semaphore::new(leaders)
        });
        loop {
            let turn = turns.acquire().await.map_err(|_| lost())?;
            match answer.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Closed) => return Err(lost()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            // Not answered yet: this job is still queued, or (with several
            // leaders) in a batch another leader is running. Lead a batch
            // of what is queued; with nothing left, ours is running: wait
            // for its answer. (With one leader a taken job is answered
            // before its taker gives the turn up, so the queue holds it.)
            let jobs = self.take_batch();
            if jobs.is_empty() {
                drop(turn);
                return answer.await.unwrap_or_else(|_| Err(lost()));
            }
            // In a task of its own, so a caller that goes away (a dropped
            // connection) cannot abandon the others' writes half-way.
            let (svc, steps) = (svc.clone(), self.steps());
            let _ = tokio::spawn(run_batch(svc, steps, jobs)).await;
            drop(turn);
        }
    }
}

fn lost() -> ServiceError {
    ServiceError::invariant("a grouped write was abandoned before it ran")
}

/// The one transaction failure that every job of a group shares.
#[derive(Debug, thiserror::Error)]
#[error("the grouped transaction failed")]
struct GroupFailed(#[source] Arc<ServiceError>);

/// Runs the jobs in one transaction. Optimistically, without a savepoint
/// each (two statements saved per job): when a job fails, the transaction
/// is rolled back, that job gets its error, and the others run again (a
/// job that lost a race runs again with them, see [`RACE_RETRIES`]).
async fn run_batch<J: Clone + Sync, R>(svc: Services, steps: Steps<J, R>, mut jobs: Vec<Waiting<J, R>>) {
    let mut retries = vec![0u8; jobs.len()];
    while !jobs.is_empty() {
        match attempt(&svc, steps, &jobs).await {
            Ok(results) => {
                for ((_, reply), result) in jobs.into_iter().zip(results) {
                    let _ = reply.send(Ok(result));
                }
                return;
            }
            Err(Failure::Job(i, e)) if lost_a_race(&e) && retries[i] < RACE_RETRIES => {
                retries[i] += 1;
                tracing::debug!(kind = steps.kind, error = %e, "a grouped write lost a race; running it again");
                svc.db.metrics().group_commit_races.with_label_values(&[steps.kind]).inc();
            }
            Err(Failure::Job(i, e)) => {
                retries.remove(i);
                let (_, reply) = jobs.remove(i);
                let _ = reply.send(Err(e));
            }
            Err(Failure::Transaction(e)) => {
                let shared = Arc::new(e);
                for (_, reply) in jobs {
                    // An outage stays one (503 with Retry-After), not an internal error.
                    let each = match shared.as_ref() {
                        ServiceError::Unavailable(why) => ServiceError::Unavailable(why.clone()),
                        _ => ServiceError::Internal(GroupFailed(shared.clone()).into()),
                    };
                    let _ = reply.send(Err(each));
                }
                return;
            }
        }
    }
}

fn lost_a_race(e: &ServiceError) -> bool {
    matches!(e, ServiceError::Store(store) if store.lost_a_race())
}

enum Failure {
    /// Job `i` failed (its own refusal or error); the others may succeed.
    Job(usize, ServiceError),
    /// Beginning, reading ahead or committing failed: nobody's write was kept.
    Transaction(ServiceError),
}

/// What a batch does: read ahead (if the kind of job does), then run each job.
struct Steps<J, R> {
    kind: &'static str,
    run: Run<J, R>,
    look_ahead: Option<LookAhead<J>>,
}

impl<J, R> Clone for Steps<J, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<J, R> Copy for Steps<J, R> {}

async fn attempt<J: Clone + Sync, R>(
    svc: &Services,
    steps: Steps<J, R>,
    jobs: &[Waiting<J, R>],
) -> Result<Vec<R>, Failure> {
    let mut work = svc.begin().await.map_err(Failure::Transaction)?;
    work.rerun_on_race();
    if let Some(look_ahead) = steps.look_ahead {
        look_ahead(&mut work, svc, jobs.iter().map(|(job, _)| job).collect())
            .await
            .map_err(|e| Failure::Transaction(e.into()))?;
    }
    let mut results = Vec::with_capacity(jobs.len());
    for (i, (job, _)) in jobs.iter().enumerate() {
        results.push((steps.run)(&mut work, svc, job.clone()).await.map_err(|e| Failure::Job(i, e))?);
    }
    svc.commit(work).await.map_err(Failure::Transaction)?;
    svc.db.metrics().group_commit_writes.with_label_values(&[steps.kind]).observe(jobs.len() as f64);
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing<'a>(_: &'a mut Work, _: &'a Services, _: (u32, u32)) -> BoxFuture<'a, ServiceResult<()>> {
        Box::pin(async { Ok(()) })
    }

    #[test]
    fn a_batch_runs_in_the_lock_order_and_equal_jobs_in_arrival_order() {
        let group = GroupCommit::new("test", nothing).with_lock_order(|a: &(u32, u32), b| a.0.cmp(&b.0));
        // (row it locks, arrival)
        for job in [(2, 0), (1, 1), (2, 2), (0, 3), (1, 4)] {
            group.queue.lock().unwrap().push((job, oneshot::channel().0));
        }
        let taken: Vec<(u32, u32)> = group.take_batch().into_iter().map(|(job, _)| job).collect();
        assert_eq!(taken, [(0, 3), (1, 1), (1, 4), (2, 0), (2, 2)]);
    }
}
