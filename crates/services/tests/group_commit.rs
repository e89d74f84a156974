//! Group commit under a burst: more requests than one batch takes are all
//! answered, each after a commit that holds its write, and a failing one
//! fails alone.

use std::sync::Arc;

use futures::future::BoxFuture;
use parley_domain::crypto::SecretBox;
use parley_services::group_commit::GroupCommit;
use parley_services::{ServiceError, ServiceResult, Services, Work};
use parley_store::repo::workspaces;
use parley_store::testing::TestDatabase;
use parley_store::{Db, DbOptions};

mod support;

/// Creates workspace `n`; number 13 is refused.
fn create<'a>(tx: &'a mut Work, _svc: &'a Services, n: u32) -> BoxFuture<'a, ServiceResult<i64>> {
    Box::pin(async move {
        if n == 13 {
            return Err(ServiceError::Conflict("unlucky".into()));
        }
        Ok(workspaces::insert(tx, &format!("w{n}"), false).await?.id)
    })
}

/// Submits workspaces 0..n at once to a group committing `run`; each
/// answer with its number, once all came (within a minute).
async fn burst(
    database: &TestDatabase,
    run: parley_services::group_commit::Run<u32, i64>,
    n: u32,
) -> (Db, Vec<(u32, ServiceResult<i64>)>) {
    let db = Db::connect(&database.url, &DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    let svc = Services::new(db.clone(), support::config(), SecretBox::new([7; 32]));
    let group = Arc::new(GroupCommit::new("test", run));
    let submits = (0..n).map(|n| {
        let (group, svc) = (group.clone(), svc.clone());
        tokio::spawn(async move { (n, group.submit(&svc, n).await) })
    });
    let answers = tokio::time::timeout(std::time::Duration::from_secs(60), futures::future::join_all(submits))
        .await
        .expect("a request was never answered");
    (db, answers.into_iter().map(|a| a.unwrap()).collect())
}

async fn a_burst_larger_than_a_batch_is_all_committed_and_answered(database: TestDatabase) {
    let (db, answers) = burst(&database, create, 300).await;
    let mut created = 0;
    for (n, result) in answers {
        match result {
            Ok(id) => {
                created += 1;
                // Answered after the commit: a fresh reader sees it.
                let found = workspaces::get(&mut db.read().await.unwrap(), id).await.unwrap();
                assert_eq!(found.map(|w| w.name), Some(format!("w{n}")));
            }
            Err(e) => assert_eq!((n, e.to_string().contains("unlucky")), (13, true), "{e}"),
        }
    }
    assert_eq!(created, 299);
    assert_eq!(workspaces::count(&mut db.read().await.unwrap()).await.unwrap(), 299);
}

parley_store::on_both_backends!(a_burst_larger_than_a_batch_is_all_committed_and_answered);

static IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static MOST_IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Creates workspace `n`, slowly, counting how many such writes are under
/// way at once: jobs of one batch run one after another, so that is how
/// many batches are in flight.
fn create_slowly<'a>(tx: &'a mut Work, _svc: &'a Services, n: u32) -> BoxFuture<'a, ServiceResult<i64>> {
    use std::sync::atomic::Ordering::SeqCst;
    Box::pin(async move {
        let now = IN_FLIGHT.fetch_add(1, SeqCst) + 1;
        MOST_IN_FLIGHT.fetch_max(now, SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let id = workspaces::insert(tx, &format!("w{n}"), false).await;
        IN_FLIGHT.fetch_sub(1, SeqCst);
        Ok(id?.id)
    })
}

async fn batches_run_one_at_a_time_on_sqlite_and_a_few_side_by_side_on_postgres(database: TestDatabase) {
    let postgres = database.url.starts_with("postgres");
    let (db, answers) = burst(&database, create_slowly, 200).await;
    assert!(answers.iter().all(|(_, a)| a.is_ok()));
    assert_eq!(workspaces::count(&mut db.read().await.unwrap()).await.unwrap(), 200);
    let most = MOST_IN_FLIGHT.load(std::sync::atomic::Ordering::SeqCst);
    if postgres {
        assert!((2..=4).contains(&most), "{most} batches at once on PostgreSQL");
    } else {
        assert_eq!(most, 1, "batches at once on SQLite");
    }
}

parley_store::on_both_backends!(batches_run_one_at_a_time_on_sqlite_and_a_few_side_by_side_on_postgres);

/// Two writers of one label name: each reads it absent, meets the other,
/// then inserts (the read-then-write an inbound message makes for its
/// provider id, contact and conversation).
#[derive(Clone)]
struct SameName {
    scope: parley_domain::Scope,
    met: Arc<tokio::sync::Barrier>,
    passes: Arc<std::sync::atomic::AtomicUsize>,
}

fn label_once<'a>(tx: &'a mut Work, _svc: &'a Services, job: SameName) -> BoxFuture<'a, ServiceResult<i64>> {
    use parley_store::repo::labels;
    Box::pin(async move {
        if let Some(found) = labels::by_name(tx, job.scope, "Urgent").await? {
            return Ok(found.id);
        }
        // Only the first two passes meet. On SQLite the second cannot begin
        // while the first holds the writer, so the first goes on alone.
        if job.passes.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), job.met.wait()).await;
        }
        let fields = labels::LabelFields { name: "Urgent".into(), color: "#ff0000".into(), description: None };
        Ok(labels::insert(tx, job.scope, &fields).await?.id)
    })
}

async fn a_job_that_loses_a_race_to_a_unique_key_runs_again_and_finds_the_winner(database: TestDatabase) {
    let db = Db::connect(&database.url, &DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    let svc = Services::new(db.clone(), support::config(), SecretBox::new([7; 32]));
    let mut tx = db.begin().await.unwrap();
    let workspace = workspaces::insert(&mut tx, "w", false).await.unwrap();
    tx.commit().await.unwrap();
    let job = SameName {
        scope: parley_domain::Scope::new(workspace.id, parley_domain::Mode::Live),
        met: Arc::new(tokio::sync::Barrier::new(2)),
        passes: Default::default(),
    };
    // Two groups: two instances' writers (or two leaders of one), each
    // committing its own batch.
    let submits = (0..2).map(|_| {
        let (group, svc, job) = (GroupCommit::new("race", label_once), svc.clone(), job.clone());
        tokio::spawn(async move { group.submit(&svc, job).await })
    });
    let answers = tokio::time::timeout(std::time::Duration::from_secs(30), futures::future::join_all(submits))
        .await
        .expect("a request was never answered");
    let ids: Vec<i64> = answers.into_iter().map(|a| a.unwrap().expect("both are answered with the label")).collect();
    assert_eq!(ids[0], ids[1], "one label, the winner's");
    let labels = parley_store::repo::labels::count(&mut db.read().await.unwrap(), job.scope).await.unwrap();
    assert_eq!(labels, 1);
    let races = db.metrics().group_commit_races.with_label_values(&["race"]).get();
    if database.url.starts_with("postgres") {
        assert_eq!(races, 1, "both read the name absent, so one insert lost");
    } else {
        assert_eq!(races, 0, "SQLite has one writer: the second read found the first's label");
    }
}

parley_store::on_both_backends!(a_job_that_loses_a_race_to_a_unique_key_runs_again_and_finds_the_winner);
