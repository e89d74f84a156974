//! The job queue on SQLite and PostgreSQL: claims and queue order, lease
//! expiry, the retry schedule and the dead letter, a worker killed with
//! SIGKILL mid-job, and exactly-once effects with two worker processes.
//!
//! The multi-process tests run this test binary again as the worker
//! (`child_worker`, ignored unless a parent starts it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parley_domain::Timestamp;
use parley_jobs::{Enqueue, Handler, Job, Outcome, RetryPolicy, Worker, WorkerConfig};
use parley_store::repo::jobs as repo;
use parley_store::testing::TestDatabase;
use parley_store::{Db, DbOptions, Tx};
use serde_json::json;
use tokio::sync::watch;

async fn open(url: &str) -> Db {
    let db = Db::connect(url, &DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    db
}

async fn enqueue(db: &Db, job: Enqueue) -> i64 {
    let mut tx = db.begin().await.unwrap();
    let id = parley_jobs::enqueue(&mut tx, job).await.unwrap();
    tx.commit().await.unwrap();
    id
}

async fn claim(db: &Db, worker: &str, lease: Duration) -> Vec<i64> {
    let mut tx = db.begin().await.unwrap();
    let rows = repo::claim(&mut tx, &["test.work"], worker, Timestamp::now().plus_duration(lease), 10).await.unwrap();
    tx.commit().await.unwrap();
    rows.into_iter().map(|r| r.id).collect()
}

async fn pending(db: &Db, kind: &str) -> Vec<repo::JobRow> {
    let mut c = db.read().await.unwrap();
    repo::of_kind(&mut c, kind).await.unwrap().into_iter().filter(|j| j.status == "pending").collect()
}

async fn claims_lease_jobs_and_keep_queue_order(database: TestDatabase) {
    let url = &database.url;
    let db = open(url).await;
    let first = enqueue(&db, Enqueue::new("test.work", json!({"n": 1})).in_queue("conversation:1")).await;
    let second = enqueue(&db, Enqueue::new("test.work", json!({"n": 2})).in_queue("conversation:1")).await;
    let free = enqueue(&db, Enqueue::new("test.work", json!({"n": 3}))).await;
    let later = enqueue(&db, Enqueue::new("test.work", json!({})).at(Timestamp::now().plus_seconds(3600))).await;
    let _other_kind = enqueue(&db, Enqueue::new("test.other", json!({}))).await;

    // The head of the queue and the free job; not the second of the queue,
    // not the one due in an hour, not another kind.
    assert_eq!(claim(&db, "a", Duration::from_secs(60)).await, vec![first, free]);
    // Leased: nobody else gets them.
    assert_eq!(claim(&db, "b", Duration::from_secs(60)).await, Vec::<i64>::new());
    // Only the holder completes.
    let mut tx = db.begin().await.unwrap();
    assert!(!repo::complete(&mut tx, first, "b").await.unwrap());
    assert!(repo::complete(&mut tx, first, "a").await.unwrap());
    tx.commit().await.unwrap();
    // The queue moves on.
    assert_eq!(claim(&db, "b", Duration::from_secs(60)).await, vec![second]);
    let left: Vec<i64> = pending(&db, "test.work").await.iter().map(|j| j.id).collect();
    assert_eq!(left, vec![second, free, later]);
}

async fn a_lapsed_lease_lets_another_worker_take_the_job(database: TestDatabase) {
    let url = &database.url;
    let db = open(url).await;
    let id = enqueue(&db, Enqueue::new("test.work", json!({}))).await;
    assert_eq!(claim(&db, "a", Duration::from_millis(300)).await, vec![id]);
    assert!(claim(&db, "b", Duration::from_secs(60)).await.is_empty());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(claim(&db, "b", Duration::from_secs(60)).await, vec![id]);
    // The first worker lost it: it can neither complete nor retry it.
    let mut tx = db.begin().await.unwrap();
    assert!(!repo::complete(&mut tx, id, "a").await.unwrap());
    assert!(!repo::reschedule(&mut tx, id, "a", Timestamp::now(), Some("late")).await.unwrap());
    assert!(repo::complete(&mut tx, id, "b").await.unwrap());
    tx.commit().await.unwrap();
}

/// Fails every attempt, noting when each started; counts dead letters.
struct AlwaysFails {
    attempts: Mutex<Vec<(u32, Instant)>>,
    buried: Mutex<Vec<(i64, String)>>,
}

impl Handler for AlwaysFails {
    fn kind(&self) -> &'static str {
        "test.work"
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy { schedule: vec![Duration::from_millis(200), Duration::from_millis(500)] }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        self.attempts.lock().unwrap().push((job.attempt, Instant::now()));
        Box::pin(async move { Outcome::Retry { error: format!("refused on attempt {}", job.attempt), after: None } })
    }

    fn dead<'a>(&'a self, _tx: &'a mut Tx, job: &'a Job, error: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        self.buried.lock().unwrap().push((job.id, error.to_owned()));
        Box::pin(async { Ok(()) })
    }
}

fn fast() -> WorkerConfig {
    WorkerConfig { lease: Duration::from_secs(5), poll_interval: Duration::from_millis(50), concurrency: 4 }
}

async fn failures_follow_the_retry_schedule_then_the_job_is_dead(database: TestDatabase) {
    let url = &database.url;
    let db = open(url).await;
    let id = enqueue(&db, Enqueue::new("test.work", json!({}))).await;
    let handler = Arc::new(AlwaysFails { attempts: Mutex::default(), buried: Mutex::default() });
    let worker = Arc::new(Worker::new(db.clone(), fast()).handle(handler.clone()));
    let (stop, stopped) = watch::channel(false);
    let running = tokio::spawn(worker.run(stopped));
    let deadline = Instant::now() + Duration::from_secs(20);
    while handler.buried.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the job never died");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(true).unwrap();
    running.await.unwrap();

    let attempts = handler.attempts.lock().unwrap().clone();
    assert_eq!(attempts.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(attempts[1].1 - attempts[0].1 >= Duration::from_millis(200), "retried before the schedule said");
    assert!(attempts[2].1 - attempts[1].1 >= Duration::from_millis(500), "retried before the schedule said");
    assert_eq!(*handler.buried.lock().unwrap(), vec![(id, "refused on attempt 3".to_owned())]);
    let mut c = db.read().await.unwrap();
    let dead = repo::get(&mut c, id).await.unwrap().unwrap();
    assert_eq!((dead.status.as_str(), dead.attempts), ("dead", 3));
    assert_eq!(dead.last_error.as_deref(), Some("refused on attempt 3"));
    assert!(dead.dead_at.is_some() && dead.leased_by.is_none());
}

// ---- other processes --------------------------------------------------------

/// Completes `test.work` jobs, recording each run as a `test.ran` job in the
/// same transaction (so an effect exists exactly when its job completed),
/// or, in `hang` mode, never finishes one.
struct Records {
    db: Db,
    hang: bool,
}

impl Handler for Records {
    fn kind(&self) -> &'static str {
        "test.work"
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy { schedule: vec![Duration::from_millis(10); 5] }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            if self.hang {
                std::future::pending::<()>().await;
            }
            let recorded = async {
                let mut tx = self.db.begin().await?;
                parley_jobs::enqueue(&mut tx, Enqueue::new("test.ran", json!({"job": job.id}))).await?;
                if job.complete(&mut tx).await? {
                    tx.commit().await?;
                }
                Ok::<_, parley_store::StoreError>(())
            }
            .await;
            match recorded {
                Ok(()) => Outcome::Committed,
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }
}

/// Notes when each job started (by its payload's `n`), then takes
/// `sleep_ms` to finish.
struct Timed {
    started: Mutex<Vec<(i64, Instant)>>,
}

impl Handler for Timed {
    fn kind(&self) -> &'static str {
        "test.work"
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy { schedule: vec![] }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        self.started.lock().unwrap().push((job.payload["n"].as_i64().unwrap(), Instant::now()));
        let sleep = Duration::from_millis(job.payload["sleep_ms"].as_u64().unwrap_or(0));
        Box::pin(async move {
            tokio::time::sleep(sleep).await;
            Outcome::Done
        })
    }
}

impl Timed {
    fn start_of(&self, n: i64) -> Option<Instant> {
        self.started.lock().unwrap().iter().find(|(m, _)| *m == n).map(|(_, at)| *at)
    }

    async fn wait_for(&self, n: i64) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(at) = self.start_of(n) {
                return at;
            }
            assert!(Instant::now() < deadline, "job {n} never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A job queued while a worker of its kind runs here is written leased to
/// that worker and handed to it at commit: it starts when due although the
/// worker would not poll for a minute, the next job of its queue still
/// waits for it, and a job held for later is given back when the worker stops.
async fn jobs_queued_here_are_handed_to_the_worker_and_start_when_due(database: TestDatabase) {
    let db = open(&database.url).await;
    let handler = Arc::new(Timed { started: Mutex::default() });
    let config =
        WorkerConfig { lease: Duration::from_secs(30), poll_interval: Duration::from_secs(60), concurrency: 4 };
    let worker = Arc::new(Worker::new(db.clone(), config).handle(handler.clone()));
    let worker_id = worker.id().to_owned();
    let (stop, stopped) = watch::channel(false);
    let running = tokio::spawn(Arc::clone(&worker).run(stopped));
    // Its first claim finds nothing; from then on it only hears the bell.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let queued_at = Instant::now();
    let due = Timestamp::now().plus_duration(Duration::from_millis(400));
    let debounced = enqueue(&db, Enqueue::new("test.work", json!({"n": 1})).at(due)).await;
    let row = { repo::get(&mut db.read().await.unwrap(), debounced).await.unwrap().unwrap() };
    assert_eq!(row.leased_by.as_deref(), Some(worker_id.as_str()), "queued leased to the worker here");
    let started = handler.wait_for(1).await;
    assert!(started - queued_at >= Duration::from_millis(390), "started before it was due");
    assert!(started - queued_at < Duration::from_secs(5), "started at a poll, not when due");

    // Queue order holds: the second of a queue is not handed over while
    // the first is pending, and runs once the first is done.
    // On PostgreSQL another transaction could queue in it unseen and
    // commit first: the job is left to a claim (read before the commit,
    // after which the worker claims it at once).
    let mut tx = db.begin().await.unwrap();
    let first = parley_jobs::enqueue(
        &mut tx,
        Enqueue::new("test.work", json!({"n": 2, "sleep_ms": 300})).in_queue("conversation:7"),
    )
    .await
    .unwrap();
    let row = repo::get(&mut tx, first).await.unwrap().unwrap();
    let handed = row.leased_by.is_some();
    tx.commit().await.unwrap();
    assert_eq!(handed, !database.url.starts_with("postgres"), "an existing queue's job is handed over on SQLite only");
    let second = enqueue(&db, Enqueue::new("test.work", json!({"n": 3})).in_queue("conversation:7")).await;
    let row = { repo::get(&mut db.read().await.unwrap(), second).await.unwrap().unwrap() };
    assert_eq!(row.leased_by, None, "the second of a queue waits unleased");
    let first_started = handler.wait_for(2).await;
    let second_started = handler.wait_for(3).await;
    assert!(second_started - first_started >= Duration::from_millis(300), "the queue's order was broken");

    // A queue born in the caller's transaction (named after a conversation
    // opened in it) has nobody ahead: handed over on PostgreSQL too.
    let fresh = enqueue(&db, Enqueue::new("test.work", json!({"n": 5})).in_new_queue("agent:8")).await;
    let row = { repo::get(&mut db.read().await.unwrap(), fresh).await.unwrap().unwrap() };
    assert_eq!(row.leased_by.as_deref(), Some(worker_id.as_str()), "a new queue's job leased to the worker here");
    handler.wait_for(5).await;

    // Held for an hour, given back at shutdown.
    let later = enqueue(&db, Enqueue::new("test.work", json!({"n": 4})).at(Timestamp::now().plus_seconds(3600))).await;
    stop.send(true).unwrap();
    running.await.unwrap();
    let row = { repo::get(&mut db.read().await.unwrap(), later).await.unwrap().unwrap() };
    assert_eq!((row.status.as_str(), row.leased_by), ("pending", None));
    assert!(handler.start_of(4).is_none());
}

const CHILD_DB: &str = "PARLEY_JOBS_TEST_CHILD_DB";
const CHILD_HANG: &str = "PARLEY_JOBS_TEST_CHILD_HANG";

/// The worker process of the tests below; does nothing unless one starts it.
#[tokio::test]
#[ignore = "a worker process the multi-process tests start"]
async fn child_worker() {
    let Ok(url) = std::env::var(CHILD_DB) else { return };
    let db = Db::connect(&url, &DbOptions::default()).await.unwrap();
    let hang = std::env::var(CHILD_HANG).is_ok();
    let config =
        WorkerConfig { lease: Duration::from_secs(1), poll_interval: Duration::from_millis(20), concurrency: 8 };
    let worker = Arc::new(Worker::new(db.clone(), config).handle(Arc::new(Records { db, hang })));
    let (_stop, stopped) = watch::channel(false);
    worker.run(stopped).await;
}

fn spawn_worker(url: &str, hang: bool) -> std::process::Child {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_worker", "--ignored", "--quiet"]).env(CHILD_DB, url);
    if hang {
        cmd.env(CHILD_HANG, "1");
    }
    cmd.stdout(std::process::Stdio::null()).spawn().expect("start a worker process")
}

async fn ran(db: &Db) -> Vec<i64> {
    let mut c = db.read().await.unwrap();
    let mut ids: Vec<i64> =
        repo::of_kind(&mut c, "test.ran").await.unwrap().iter().map(|j| j.payload.0["job"].as_i64().unwrap()).collect();
    ids.sort();
    ids
}

async fn a_job_of_a_killed_worker_runs_again_after_its_lease(database: TestDatabase) {
    let url = &database.url;
    let db = open(url).await;
    let id = enqueue(&db, Enqueue::new("test.work", json!({}))).await;
    let mut child = spawn_worker(url, true);
    let deadline = Instant::now() + Duration::from_secs(30);
    let holder = loop {
        let mut c = db.read().await.unwrap();
        if let Some(holder) = repo::get(&mut c, id).await.unwrap().unwrap().leased_by {
            break holder;
        }
        assert!(Instant::now() < deadline, "the worker process never claimed the job");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // A worker here takes it over once the dead one's lease lapses (1 s).
    let killed_at = Instant::now();
    let worker = Arc::new(Worker::new(db.clone(), fast()).handle(Arc::new(Records { db: db.clone(), hang: false })));
    let (stop, stopped) = watch::channel(false);
    let running = tokio::spawn(worker.run(stopped));
    while ran(&db).await != vec![id] {
        assert!(Instant::now() < deadline, "the job never ran again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    running.await.unwrap();
    assert!(killed_at.elapsed() < Duration::from_secs(10));
    assert!(holder.starts_with("worker-"));
    assert!(pending(&db, "test.work").await.is_empty());
}

/// A job whose run kills its process (issue 31: a PDF that overflowed the
/// stack was picked up again after every restart): each lease that lapsed
/// counts, and after three in a row the job is buried unrun.
async fn a_job_that_kills_its_process_is_buried_after_three_tries(database: TestDatabase) {
    let url = &database.url;
    let db = open(url).await;
    let id = enqueue(&db, Enqueue::new("test.work", json!({}))).await;
    // Three processes take the job and die with it (their leases lapse).
    for (n, dead) in ["dead-1", "dead-2", "dead-3"].iter().enumerate() {
        assert_eq!(claim(&db, dead, Duration::from_millis(150)).await, vec![id]);
        let mut c = db.read().await.unwrap();
        assert_eq!(repo::get(&mut c, id).await.unwrap().unwrap().interruptions, n as i32, "cut off so far");
        drop(c);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let handler = Arc::new(AlwaysFails { attempts: Mutex::default(), buried: Mutex::default() });
    let worker = Arc::new(Worker::new(db.clone(), fast()).handle(handler.clone()));
    let (stop, stopped) = watch::channel(false);
    let running = tokio::spawn(worker.run(stopped));
    let deadline = Instant::now() + Duration::from_secs(10);
    while handler.buried.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the job was never buried");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    running.await.unwrap();
    assert!(handler.attempts.lock().unwrap().is_empty(), "a job cut off three times is not run again");
    let buried = handler.buried.lock().unwrap().clone();
    assert_eq!(buried.len(), 1);
    assert!(buried[0].1.starts_with("stopped after 3 attempts in a row that did not finish"), "{}", buried[0].1);
    let mut c = db.read().await.unwrap();
    assert_eq!(repo::get(&mut c, id).await.unwrap().unwrap().status, "dead");
}

/// Succeeds at once; a kind with no retries (like the webhook drain).
struct OneShot {
    ran: Mutex<Vec<u32>>,
}

impl Handler for OneShot {
    fn kind(&self) -> &'static str {
        "test.work"
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy { schedule: Vec::new() }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        self.ran.lock().unwrap().push(job.interrupted);
        Box::pin(async { Outcome::Done })
    }
}

/// A cut-off is not a failed attempt: a kind with a single attempt, cut
/// off once (its process died), still runs, told it was interrupted.
async fn a_job_cut_off_once_runs_again_whatever_its_retries(database: TestDatabase) {
    let url = &database.url;
    let db = open(url).await;
    let id = enqueue(&db, Enqueue::new("test.work", json!({}))).await;
    assert_eq!(claim(&db, "dead", Duration::from_millis(150)).await, vec![id]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let handler = Arc::new(OneShot { ran: Mutex::default() });
    let worker = Arc::new(Worker::new(db.clone(), fast()).handle(handler.clone()));
    let (stop, stopped) = watch::channel(false);
    let running = tokio::spawn(worker.run(stopped));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pending(&db, "test.work").await.is_empty() {
        assert!(Instant::now() < deadline, "the job never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    running.await.unwrap();
    assert_eq!(*handler.ran.lock().unwrap(), vec![1], "ran once, knowing one attempt was cut off");
    let mut c = db.read().await.unwrap();
    assert!(repo::get(&mut c, id).await.unwrap().is_none(), "done, not buried");
}

parley_store::on_both_backends!(
    a_job_that_kills_its_process_is_buried_after_three_tries,
    a_job_cut_off_once_runs_again_whatever_its_retries,
    claims_lease_jobs_and_keep_queue_order,
    a_lapsed_lease_lets_another_worker_take_the_job,
    failures_follow_the_retry_schedule_then_the_job_is_dead,
    a_job_of_a_killed_worker_runs_again_after_its_lease,
    jobs_queued_here_are_handed_to_the_worker_and_start_when_due,
);

/// Two worker processes on one PostgreSQL database: every job's effect is
/// recorded exactly once (claims never overlap; effects commit with the
/// job's completion).
#[tokio::test]
async fn two_worker_processes_run_each_job_exactly_once_on_postgres() {
    let database = TestDatabase::postgres().await;
    let db = open(&database.url).await;
    let mut tx = db.begin().await.unwrap();
    for n in 0..400 {
        parley_jobs::enqueue(&mut tx, Enqueue::new("test.work", json!({"n": n}))).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut workers = [spawn_worker(&database.url, false), spawn_worker(&database.url, false)];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pending(&db, "test.work").await.is_empty() {
        assert!(Instant::now() < deadline, "the workers did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for w in &mut workers {
        w.kill().unwrap();
        w.wait().unwrap();
    }
    let ran = ran(&db).await;
    assert_eq!(ran.len(), 400, "some job ran twice or never");
    let mut distinct = ran.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 400, "a job's effect was recorded twice");
}

/// Two transactions queue into one queue and commit out of id order: the
/// later job is claimed first, and the earlier one, committed while it
/// runs, waits for it instead of running alongside (the webhook drains of
/// one endpoint must never overlap).
#[tokio::test]
async fn a_queue_with_a_running_job_gives_no_other_job_even_when_commits_land_out_of_order() {
    let database = TestDatabase::postgres().await;
    let db = open(&database.url).await;
    let mut slow = db.begin().await.unwrap();
    let earlier = parley_jobs::enqueue(&mut slow, Enqueue::new("test.work", json!({"n": 1})).in_queue("webhook:1"))
        .await
        .unwrap();
    let later = enqueue(&db, Enqueue::new("test.work", json!({"n": 2})).in_queue("webhook:1")).await;
    assert!(earlier < later);
    assert_eq!(claim(&db, "a", Duration::from_secs(60)).await, vec![later]);
    slow.commit().await.unwrap();
    assert_eq!(claim(&db, "b", Duration::from_secs(60)).await, Vec::<i64>::new(), "ran alongside a job of its queue");
    let mut tx = db.begin().await.unwrap();
    assert!(repo::complete(&mut tx, later, "a").await.unwrap());
    tx.commit().await.unwrap();
    assert_eq!(claim(&db, "b", Duration::from_secs(60)).await, vec![earlier]);
}
