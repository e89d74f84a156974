use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgConnection, PgPool, Postgres, Sqlite, SqliteConnection, SqlitePool, Transaction};

use crate::error::{StoreError, StoreResult};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Pool sizes and timeouts.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// PostgreSQL pool size.
    pub max_connections: u32,
    /// SQLite reader connections. Each runs on its own thread; about one per
    /// core measured best (more threads cost more context switches).
    pub sqlite_readers: u32,
    pub acquire_timeout: Duration,
}

impl Default for DbOptions {
    fn default() -> Self {
        Self { max_connections: 16, sqlite_readers: default_sqlite_readers(), acquire_timeout: Duration::from_secs(10) }
    }
}

/// One reader per core, between 2 and 8.
pub fn default_sqlite_readers() -> u32 {
    std::thread::available_parallelism().map_or(2, |n| n.get() as u32).clamp(2, 8)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database: SQLite (WAL, one writer, several readers) or PostgreSQL.
#[derive(Clone, Debug)]
pub enum Db {
    Sqlite { read: SqlitePool, write: SqlitePool },
    Postgres(PgPool),
}

impl Db {
    /// Connects to `url` (`sqlite://PATH` or `postgres://…`), creating a
    /// SQLite file and its directory if missing. Does not migrate.
    pub async fn connect(url: &str, opts: &DbOptions) -> StoreResult<Db> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)?;
            let pool = PgPoolOptions::new()
                .max_connections(opts.max_connections)
                .acquire_timeout(opts.acquire_timeout)
                .connect_with(options)
                .await?;
            return Ok(Db::Postgres(pool));
        }
        if !url.starts_with("sqlite:") {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        }
        let base = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a committed transaction survives power loss, not only a crash.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            // SQLite's default page cache is 2 MiB: too small for a server's
            // working set. Memory-mapped reads save a syscall per page miss.
            .pragma("cache_size", "-16384")
            .pragma("mmap_size", "268435456")
            .foreign_keys(true);
        let file = Path::new(base.get_filename());
        // In-memory databases are named `:memory:` or `file:sqlx-in-memory-…`.
        let in_memory = file.to_str().is_some_and(|f| f.contains(":memory:") || f.starts_with("file:"));
        if !in_memory && !file.as_os_str().is_empty() {
            if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
                crate::files::create_private_dir(dir)?;
            }
            // SQLite gives its -wal and -shm files the database file's mode.
            crate::files::create_private_file(file)?;
        }
        // One writer: SQLite allows one write transaction at a time anyway, and
        // queueing in the pool is fairer and cheaper than busy-waiting.
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(opts.acquire_timeout)
            .connect_with(base.clone())
            .await?;
        let read = SqlitePoolOptions::new()
            .max_connections(opts.sqlite_readers.max(1))
            .acquire_timeout(opts.acquire_timeout)
            .connect_with(base.read_only(true))
            .await?;
        Ok(Db::Sqlite { read, write })
    }

    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite { .. } => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// Applies pending migrations. Safe to run from several processes at once.
    pub async fn migrate(&self) -> StoreResult<()> {
        match self {
            Db::Sqlite { write, .. } => SQLITE_MIGRATIONS.run(write).await?,
            Db::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await?,
        }
        Ok(())
    }

    /// A connection for reads outside a transaction.
    pub async fn read(&self) -> StoreResult<Conn> {
        Ok(match self {
            Db::Sqlite { read, .. } => Conn::Sqlite(read.acquire().await?),
            Db::Postgres(pool) => Conn::Postgres(pool.acquire().await?),
        })
    }

    /// Starts a write transaction. On SQLite it is `BEGIN IMMEDIATE`, so it
    /// takes the write lock up front and never fails half-way on upgrade.
    pub async fn begin(&self) -> StoreResult<Tx> {
        Ok(match self {
            Db::Sqlite { write, .. } => Tx::new(TxInner::Sqlite(write.begin_with("BEGIN IMMEDIATE").await?)),
            Db::Postgres(pool) => Tx::new(TxInner::Postgres(pool.begin().await?)),
        })
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        let mut c = self.read().await?;
        crate::execute!(&mut c, sqlx::query("SELECT 1"))?;
        Ok(())
    }

    /// Whether `close` was called (by any clone).
    pub fn is_closed(&self) -> bool {
        match self {
            Db::Sqlite { write, .. } => write.is_closed(),
            Db::Postgres(pool) => pool.is_closed(),
        }
    }

    pub async fn close(&self) {
        match self {
            Db::Sqlite { read, write } => {
                read.close().await;
                write.close().await;
            }
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// A pooled connection outside any transaction.
pub enum Conn {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

/// A write transaction. Dropping it without `commit` rolls back.
pub struct Tx {
    inner: TxInner,
    /// Change counters this transaction has already bumped (once is enough:
    /// all its changes become visible together at commit).
    bumped: std::collections::HashSet<(parley_domain::Scope, String)>,
    /// Webhook endpoints subscribed to each event type, as this transaction found them.
    subscribers: SubscriberMemo,
}

/// Endpoint ids by (scope, event type).
pub type SubscriberMemo = std::collections::HashMap<(parley_domain::Scope, String), Vec<i64>>;

enum TxInner {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Tx {
    /// Marks a point this transaction can roll back to (`name` is a fixed identifier).
    pub async fn savepoint(&mut self, name: &'static str) -> StoreResult<()> {
        self.run_raw(format!("SAVEPOINT {name}")).await
    }

    /// Forgets a savepoint, keeping what was done since.
    pub async fn release(&mut self, name: &'static str) -> StoreResult<()> {
        self.run_raw(format!("RELEASE SAVEPOINT {name}")).await
    }

    /// Undoes everything since the savepoint (which stays, released here).
    pub async fn rollback_to(&mut self, name: &'static str) -> StoreResult<()> {
        self.run_raw(format!("ROLLBACK TO SAVEPOINT {name}")).await?;
        self.release(name).await
    }

    async fn run_raw(&mut self, sql: String) -> StoreResult<()> {
        crate::execute!(self, sqlx::query(sqlx::AssertSqlSafe(sql)))?;
        Ok(())
    }

    fn new(inner: TxInner) -> Self {
        Tx { inner, bumped: Default::default(), subscribers: Default::default() }
    }

    pub async fn commit(self) -> StoreResult<()> {
        match self.inner {
            TxInner::Sqlite(t) => t.commit().await?,
            TxInner::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }
}

/// The backend connection behind a `Conn` or a `Tx`.
pub enum Handle<'a> {
    Sqlite(&'a mut SqliteConnection),
    Postgres(&'a mut PgConnection),
}

/// Anything a repository can run queries on.
pub trait AsHandle: Send {
    fn handle(&mut self) -> Handle<'_>;

    /// Whether `resource`'s change counter in `scope` still needs bumping
    /// here (false once a transaction has bumped it).
    fn needs_bump(&mut self, _scope: parley_domain::Scope, _resource: &str) -> bool {
        true
    }

    /// Where a transaction remembers webhook subscribers (none outside one).
    fn subscriber_memo(&mut self) -> Option<&mut SubscriberMemo> {
        None
    }
}

impl AsHandle for Conn {
    fn handle(&mut self) -> Handle<'_> {
        match self {
            Conn::Sqlite(c) => Handle::Sqlite(c),
            Conn::Postgres(c) => Handle::Postgres(c),
        }
    }
}

impl AsHandle for Tx {
    fn handle(&mut self) -> Handle<'_> {
        match &mut self.inner {
            TxInner::Sqlite(t) => Handle::Sqlite(t),
            TxInner::Postgres(t) => Handle::Postgres(t),
        }
    }

    fn needs_bump(&mut self, scope: parley_domain::Scope, resource: &str) -> bool {
        self.bumped.insert((scope, resource.to_owned()))
    }

    fn subscriber_memo(&mut self) -> Option<&mut SubscriberMemo> {
        Some(&mut self.subscribers)
    }
}
