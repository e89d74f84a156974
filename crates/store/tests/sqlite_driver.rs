//! The SQLite driver (`parley_store::sqlite`): what the repositories rely
//! on from it beyond what the both-backend stories show — parameters by
//! number, several statements in one call, errors by kind, a transaction
//! rolled back when dropped, and a wait for another process's write lock
//! that does not stall the runtime.

use std::time::Duration;

use parley_domain::Timestamp;
use parley_store::testing::TestDatabase;
use parley_store::{Db, DbOptions, StoreError};

async fn open() -> (TestDatabase, Db) {
    let database = TestDatabase::sqlite();
    let db = Db::connect(&database.url, &DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    let mut tx = db.begin().await.unwrap();
    parley_store::execute!(
        &mut tx,
        sqlx::query("CREATE TABLE scratch (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, note TEXT)")
    )
    .unwrap();
    tx.commit().await.unwrap();
    (database, db)
}

fn path_of(database: &TestDatabase) -> &str {
    database.url.strip_prefix("sqlite://").unwrap()
}

#[tokio::test]
async fn parameters_bind_by_number_however_often_and_in_any_order() {
    let (_database, db) = open().await;
    let mut c = db.read().await.unwrap();
    let row: (String, i64, String, Option<i64>) =
        parley_store::fetch_one!(&mut c, sqlx::query_as("SELECT $2, $1, $2 || $2, $3").bind(7_i64).bind("a")).unwrap();
    // `$3` has no value: NULL, as with sqlx's own driver.
    assert_eq!(row, ("a".to_owned(), 7, "aa".to_owned(), None));
}

#[tokio::test]
async fn values_read_back_as_they_were_written() {
    let (_database, db) = open().await;
    let mut c = db.read().await.unwrap();
    let at = Timestamp::from_unix_micros(1_764_000_000_123_456).unwrap();
    let json = serde_json::json!({"a": [1, 2.5, "three"]});
    let row: (Timestamp, bool, f64, Option<String>, sqlx::types::Json<serde_json::Value>, Vec<u8>) =
        parley_store::fetch_one!(
            &mut c,
            sqlx::query_as("SELECT $1, $2, $3, $4, $5, $6")
                .bind(at)
                .bind(true)
                .bind(2.5_f64)
                .bind(None::<String>)
                .bind(sqlx::types::Json(&json))
                .bind(vec![0_u8, 255])
        )
        .unwrap();
    assert_eq!(row.0, at);
    assert!(row.1);
    assert_eq!(row.2, 2.5);
    assert_eq!(row.3, None);
    assert_eq!(row.4.0, json);
    assert_eq!(row.5, vec![0, 255]);
    // SQLite's own coercions, as `sqlite3_value_*` make them.
    let (n, text): (i64, String) = parley_store::fetch_one!(&mut c, sqlx::query_as("SELECT '42abc', 12")).unwrap();
    assert_eq!((n, text), (42, "12".to_owned()));
}

#[tokio::test]
async fn several_statements_in_one_call_run_in_order_with_their_parameters() {
    let (_database, db) = open().await;
    let mut tx = db.begin().await.unwrap();
    // A `;` inside a string does not end a statement.
    let sql = "INSERT INTO scratch (name) VALUES ($1 || ';x') RETURNING id, name;\n\
               INSERT INTO scratch (name, note) VALUES ($2, 'after ' || last_insert_rowid() || ';')";
    // Twice: the first call splits the text, the second runs the parts kept.
    for (first, second, id) in [("a", "b", 1), ("c", "d", 3)] {
        let rows: Vec<(i64, String)> =
            parley_store::fetch_all!(&mut tx, sqlx::query_as(sql).bind(first).bind(second)).unwrap();
        assert_eq!(rows, vec![(id, format!("{first};x"))]);
        let (note,): (String,) =
            parley_store::fetch_one!(&mut tx, sqlx::query_as("SELECT note FROM scratch WHERE name = $1").bind(second))
                .unwrap();
        assert_eq!(note, format!("after {id};"), "the second statement saw the first one's row id");
    }
    // A failing first statement stops the call: the second does not run.
    let refused = parley_store::fetch_all!(&mut tx, sqlx::query_as::<_, (i64, String)>(sql).bind("a").bind("e"));
    assert!(refused.is_err());
    let (n,): (i64,) = parley_store::fetch_one!(&mut tx, sqlx::query_as("SELECT COUNT(*) FROM scratch")).unwrap();
    assert_eq!(n, 4);
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_unique_violation_is_reported_as_one_and_the_transaction_goes_on() {
    let (_database, db) = open().await;
    let mut tx = db.begin().await.unwrap();
    let insert = "INSERT INTO scratch (name) VALUES ($1)";
    parley_store::execute!(&mut tx, sqlx::query(insert).bind("x")).unwrap();
    let again: Result<u64, StoreError> =
        parley_store::execute!(&mut tx, sqlx::query(insert).bind("x")).map_err(Into::into);
    assert!(matches!(again, Err(StoreError::UniqueViolation)), "{again:?}");
    let missing: Result<u64, StoreError> =
        parley_store::execute!(&mut tx, sqlx::query("INSERT INTO scratch (note) VALUES ('no name')"))
            .map_err(Into::into);
    assert!(matches!(missing, Err(StoreError::Database(_))), "{missing:?}");
    let changed = parley_store::execute!(&mut tx, sqlx::query("UPDATE scratch SET note = 'n'")).unwrap();
    assert_eq!(changed, 1, "the row count of the write");
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_dropped_transaction_is_rolled_back_and_the_writer_is_free() {
    let (_database, db) = open().await;
    {
        let mut tx = db.begin().await.unwrap();
        parley_store::execute!(&mut tx, sqlx::query("INSERT INTO scratch (name) VALUES ('gone')")).unwrap();
    }
    let mut tx = tokio::time::timeout(Duration::from_secs(1), db.begin()).await.expect("the writer is free").unwrap();
    let (n,): (i64,) = parley_store::fetch_one!(&mut tx, sqlx::query_as("SELECT COUNT(*) FROM scratch")).unwrap();
    assert_eq!(n, 0);
    parley_store::execute!(&mut tx, sqlx::query("INSERT INTO scratch (name) VALUES ('kept')")).unwrap();
    tx.commit().await.unwrap();
    // A reader sees what was committed.
    let mut c = db.read().await.unwrap();
    let names: Vec<(String,)> = parley_store::fetch_all!(&mut c, sqlx::query_as("SELECT name FROM scratch")).unwrap();
    assert_eq!(names, vec![("kept".to_owned(),)]);
}

/// Another process (here a second connection) holds the write lock: the
/// transaction waits for it, and the runtime's other tasks go on meanwhile
/// (a current-thread runtime: a wait on its one thread would stop them).
#[tokio::test(flavor = "current_thread")]
async fn a_transaction_waits_for_another_writer_without_stalling_the_runtime() {
    let (database, db) = open().await;
    let other = rusqlite::Connection::open(path_of(&database)).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; INSERT INTO scratch (name) VALUES ('other')").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        other.execute_batch("COMMIT").unwrap();
    });
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let asked = std::time::Instant::now();
    let mut tx = db.begin().await.unwrap();
    let waited = asked.elapsed();
    ticker.abort();
    release.join().unwrap();
    assert!(waited >= Duration::from_millis(300), "it waited for the other writer ({waited:?})");
    let ticks = ticks.load(std::sync::atomic::Ordering::Relaxed);
    assert!(ticks >= 10, "the runtime went on while it waited ({ticks} ticks in {waited:?})");
    let (n,): (i64,) = parley_store::fetch_one!(&mut tx, sqlx::query_as("SELECT COUNT(*) FROM scratch")).unwrap();
    assert_eq!(n, 1, "it sees the other writer's row");
    tx.commit().await.unwrap();
}

/// After `close`, the database file alone holds every committed write:
/// the write-ahead log was copied into it (someone copying `parley.db`
/// after a stop copies the whole database).
#[tokio::test]
async fn after_close_the_database_file_alone_holds_every_write() {
    let (database, db) = open().await;
    let mut tx = db.begin().await.unwrap();
    for i in 0..100 {
        parley_store::execute!(&mut tx, sqlx::query("INSERT INTO scratch (name) VALUES ($1)").bind(format!("n{i}")))
            .unwrap();
    }
    tx.commit().await.unwrap();
    let path = std::path::PathBuf::from(path_of(&database));
    db.close().await;
    let copy = parley_store::testing::TempDir::new();
    let alone = copy.path.join("alone.db");
    std::fs::copy(&path, &alone).unwrap();
    let conn = rusqlite::Connection::open(&alone).unwrap();
    let n: i64 = conn.query_row("SELECT COUNT(*) FROM scratch", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 100);
}
