//! Fresh, isolated databases for tests: a SQLite file in a temporary
//! directory, or a new PostgreSQL database created from an admin URL.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};

/// A database that exists for one test. PostgreSQL databases are dropped
/// when this is dropped; SQLite files go with their directory.
pub struct TestDatabase {
    pub url: String,
    pg_cleanup: Option<(String, String)>,
    _dir: Option<TempDir>,
}

/// The environment variable naming the PostgreSQL server used by tests.
pub const POSTGRES_ENV: &str = "PARLEY_TEST_POSTGRES_URL";

impl TestDatabase {
    pub fn sqlite() -> Self {
        let dir = TempDir::new();
        let url = format!("sqlite://{}/parley.db", dir.path.display());
        Self { url, pg_cleanup: None, _dir: Some(dir) }
    }

    /// Creates `parley_test_<uuid>` on the server named by `PARLEY_TEST_POSTGRES_URL`.
    /// Panics (failing the test) when the variable is unset or the server is
    /// unreachable: a PostgreSQL test never passes without PostgreSQL.
    pub async fn postgres() -> Self {
        let admin = std::env::var(POSTGRES_ENV).unwrap_or_else(|_| {
            panic!("{POSTGRES_ENV} is not set; the PostgreSQL variants of the tests need it (scripts/test sets it)")
        });
        let name = format!("parley_test_{}", uuid::Uuid::new_v4().simple());
        let opts = PgConnectOptions::from_str(&admin).expect("valid PARLEY_TEST_POSTGRES_URL");
        let mut conn = opts.connect().await.expect("connect to PostgreSQL for tests");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        conn.close().await.ok();
        let url = opts.database(&name).to_url_lossy().to_string();
        Self { url, pg_cleanup: Some((admin, name)), _dir: None }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some((admin, name)) = self.pg_cleanup.take() else { return };
        // Drop runs outside any async context guarantee: use a private runtime
        // on its own thread. Leftovers are also removed by scripts/test.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                        .execute(&mut conn)
                        .await;
                }
            });
        })
        .join();
    }
}

/// A temporary directory removed on drop (kept tiny to avoid a dependency).
pub struct TempDir {
    pub path: std::path::PathBuf,
}

impl TempDir {
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("parley-test-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self { path }
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs each story, an `async fn(TestDatabase)` in scope, as two tests: on
/// a fresh SQLite database and on a fresh PostgreSQL one.
#[macro_export]
macro_rules! on_both_backends {
    ($($story:ident),* $(,)?) => {$(
        mod $story {
            #[tokio::test]
            async fn sqlite() {
                super::$story($crate::testing::TestDatabase::sqlite()).await;
            }

            #[tokio::test]
            async fn postgres() {
                super::$story($crate::testing::TestDatabase::postgres().await).await;
            }
        }
    )*};
}
