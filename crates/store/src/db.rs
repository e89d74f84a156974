use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::error::{StoreError, StoreResult};
use crate::sqlite::{LiteConnection, LitePool, ReadConn, WriteConn};

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Pool sizes and timeouts.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// PostgreSQL pool size.
    pub max_connections: u32,
    /// SQLite reader connections: how many reads (outside transactions)
    /// run at once; their statements run on the tasks that await them.
    pub sqlite_readers: u32,
    /// How long a request waits for SQLite's writer (or a reader) before
    /// it gets a 503: the writer is a queue, and a busy one is slow, not gone.
    pub acquire_timeout: Duration,
    /// How long a request waits for a PostgreSQL connection before it gets
    /// a 503: longer means an exhausted pool or a server that is down.
    pub postgres_acquire_timeout: Duration,
}

impl Default for DbOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            sqlite_readers: default_sqlite_readers(),
            acquire_timeout: Duration::from_secs(10),
            postgres_acquire_timeout: Duration::from_secs(3),
        }
    }
}

/// How long a request waits for PostgreSQL while it is known to be
/// unreachable (it failed to give a connection in the last
/// [`OUTAGE_MEMORY`]): the first requests of an outage wait the acquire
/// timeout, the rest are answered (503) almost at once, and each still
/// tries, so the first to get through ends the outage.
const OUTAGE_PROBE: Duration = Duration::from_millis(250);
const OUTAGE_MEMORY: Duration = Duration::from_secs(2);

/// Whether PostgreSQL is unreachable now, and since when (ms since the
/// epoch; 0: it is not).
#[derive(Debug, Default)]
struct Outage {
    since_ms: std::sync::atomic::AtomicI64,
    last_failure_ms: std::sync::atomic::AtomicI64,
}

impl Outage {
    fn now_ms() -> i64 {
        parley_domain::Timestamp::now().unix_micros() / 1000
    }

    fn recent(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.since_ms.load(Relaxed) != 0
            && Self::now_ms() - self.last_failure_ms.load(Relaxed) < OUTAGE_MEMORY.as_millis() as i64
    }

    fn failed(&self, error: &sqlx::Error) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = Self::now_ms();
        self.last_failure_ms.store(now, Relaxed);
        if self.since_ms.compare_exchange(0, now, Relaxed, Relaxed).is_ok() {
            tracing::error!(%error, "the database is unreachable; requests get 503 with Retry-After until it answers");
        }
    }

    fn ended(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let since = self.since_ms.swap(0, Relaxed);
        if since != 0 {
            let seconds = (Self::now_ms() - since) as f64 / 1000.0;
            tracing::warn!(seconds, "the database answers again");
        }
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

/// A database: SQLite (WAL, one writer, several readers) or PostgreSQL,
/// the bell its committed transactions ring for the job workers, and the
/// instance's metrics (every layer holds this handle, so it carries them).
#[derive(Clone, Debug)]
pub struct Db {
    pool: Pool,
    bell: JobBell,
    event_bell: EventBell,
    metrics: parley_telemetry::Metrics,
    outage: std::sync::Arc<Outage>,
}

/// The connections behind a [`Db`].
#[derive(Clone, Debug)]
pub enum Pool {
    /// SQLite through [`crate::sqlite`], and how sqlx's own driver opens
    /// the file to migrate it (shared: a `Db` is cloned per request, and a
    /// copy of the options is a dozen allocations).
    Sqlite {
        pool: LitePool,
        options: std::sync::Arc<SqliteConnectOptions>,
    },
    Postgres(PgPool),
}

/// Wakes the workers of a job kind when a transaction that queued a job of
/// that kind commits on this instance (other instances poll). A worker
/// woken by every commit would take the write lock to claim nothing after
/// most of them.
///
/// A worker may also take its kinds' jobs as they are queued: the job is
/// written already leased to it (when it is the first of its queue) and
/// handed to it after the commit, so it needs no claiming transaction, and
/// a job due later (a debounced agent run) starts on time rather than at
/// the next poll. If the process dies, the lease lapses as for any claim.
#[derive(Clone, Debug, Default)]
pub struct JobBell(std::sync::Arc<std::sync::RwLock<Vec<Subscriber>>>);

#[derive(Debug)]
struct Subscriber {
    kinds: Vec<String>,
    wake: tokio::sync::watch::Sender<u64>,
    taker: Option<Taker>,
}

/// A worker that takes the jobs of its kinds as they are queued.
#[derive(Debug, Clone)]
pub struct Taker {
    /// The worker's lease name.
    pub worker: std::sync::Arc<str>,
    pub lease: Duration,
    /// Where committed jobs go.
    pub jobs: tokio::sync::mpsc::UnboundedSender<crate::repo::jobs::JobRow>,
}

impl JobBell {
    /// A receiver that changes whenever a job of one of `kinds` is queued;
    /// with a `taker`, those jobs are also leased to it and sent to it.
    pub fn subscribe(&self, kinds: &[&str], taker: Option<Taker>) -> tokio::sync::watch::Receiver<u64> {
        let (wake, rx) = tokio::sync::watch::channel(0);
        let kinds = kinds.iter().map(|k| (*k).to_owned()).collect();
        let mut subscribers = self.0.write().unwrap_or_else(|p| p.into_inner());
        subscribers.retain(|s| !s.wake.is_closed());
        subscribers.push(Subscriber { kinds, wake, taker });
        rx
    }

    /// Wakes the subscribers of any of `kinds`.
    pub fn ring(&self, kinds: &[String]) {
        if kinds.is_empty() {
            return;
        }
        for s in self.0.read().unwrap_or_else(|p| p.into_inner()).iter() {
            if s.kinds.iter().any(|k| kinds.contains(k)) {
                s.wake.send_modify(|generation| *generation = generation.wrapping_add(1));
            }
        }
    }

    /// The live worker that takes jobs of `kind`, if one does here.
    pub(crate) fn taker(&self, kind: &str) -> Option<Taker> {
        let subscribers = self.0.read().unwrap_or_else(|p| p.into_inner());
        subscribers
            .iter()
            .filter(|s| !s.wake.is_closed() && s.kinds.iter().any(|k| k == kind))
            .find_map(|s| s.taker.clone().filter(|t| !t.jobs.is_closed()))
    }
}

/// What one committed transaction wrote to the event log: each event's
/// scope and id, in the order written.
pub type Written = [(parley_domain::Scope, String)];

/// Told, after each commit on this instance, which events the transaction
/// wrote, wherever it was opened (a service's unit of work or a job
/// worker's bookkeeping): the live stream hears of every change without
/// each writer having to remember to announce it.
#[derive(Clone, Default)]
pub struct EventBell(std::sync::Arc<std::sync::RwLock<Option<EventListener>>>);

type EventListener = std::sync::Arc<dyn Fn(&Written) + Send + Sync>;

impl std::fmt::Debug for EventBell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventBell")
    }
}

impl EventBell {
    /// Calls `listener` after every commit that wrote events (replacing any
    /// listener before it). It runs on the committing task: keep it short.
    pub fn listen(&self, listener: impl Fn(&Written) + Send + Sync + 'static) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(std::sync::Arc::new(listener));
    }

    fn ring(&self, written: &Written) {
        if written.is_empty() {
            return;
        }
        let listener = self.0.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(listener) = listener {
            listener(written);
        }
    }
}

impl Db {
    /// Connects to `url` (`sqlite://PATH` or `postgres://…`), creating a
    /// SQLite file and its directory if missing. Does not migrate.
    pub async fn connect(url: &str, opts: &DbOptions) -> StoreResult<Db> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)?;
            let pool = PgPoolOptions::new()
                .max_connections(opts.max_connections)
                .acquire_timeout(opts.postgres_acquire_timeout)
                .connect_with(options)
                .await?;
            return Ok(Db::new(Pool::Postgres(pool)));
        }
        if !url.starts_with("sqlite:") {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
            .busy_timeout(crate::sqlite::BUSY_TIMEOUT)
            .foreign_keys(true);
        let file = Path::new(options.get_filename()).to_owned();
        // In-memory databases are named `:memory:` or `file:…?mode=memory`:
        // each connection would have its own.
        if file.to_str().is_some_and(|f| f.contains(":memory:") || f.starts_with("file:"))
            || file.as_os_str().is_empty()
        {
            return Err(StoreError::Unsupported("SQLite in memory is not supported: name a database file"));
        }
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::files::create_private_dir(dir)?;
        }
        // SQLite gives its -wal and -shm files the database file's mode.
        crate::files::create_private_file(&file)?;
        let pool = LitePool::open(&file, opts.sqlite_readers, opts.acquire_timeout)?;
        Ok(Db::new(Pool::Sqlite { pool, options: std::sync::Arc::new(options) }))
    }

    fn new(pool: Pool) -> Db {
        Db {
            pool,
            bell: JobBell::default(),
            event_bell: EventBell::default(),
            metrics: Default::default(),
            outage: Default::default(),
        }
    }

    /// This instance's metrics.
    pub fn metrics(&self) -> &parley_telemetry::Metrics {
        &self.metrics
    }

    /// Sets `parley_db_connections` to the pools' state now (for a scrape).
    pub fn gauge_connections(&self) {
        let set = |pool: &str, size: u32, idle: usize| {
            let c = &self.metrics.db_connections;
            c.with_label_values(&[pool, "idle"]).set(idle as i64);
            c.with_label_values(&[pool, "busy"]).set(size.saturating_sub(idle as u32) as i64);
        };
        match &self.pool {
            Pool::Sqlite { pool, .. } => {
                let (size, idle) = pool.reader_counts();
                set("read", size, idle);
                set("write", 1, usize::from(pool.writer_idle()));
            }
            Pool::Postgres(pool) => set("read", pool.size(), pool.num_idle()),
        }
    }

    /// The connections.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Rung by committed transactions that queued jobs.
    pub fn bell(&self) -> &JobBell {
        &self.bell
    }

    /// Rung by committed transactions that wrote events.
    pub fn event_bell(&self) -> &EventBell {
        &self.event_bell
    }

    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite { .. } => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// Applies pending migrations. Safe to run from several processes at once.
    pub async fn migrate(&self) -> StoreResult<()> {
        match &self.pool {
            Pool::Sqlite { options, .. } => {
                // sqlx's migrator needs its own driver: one connection for it.
                let mut conn = sqlx::ConnectOptions::connect(&**options).await?;
                SQLITE_MIGRATIONS.run(&mut conn).await?;
                sqlx::Connection::close(conn).await?;
            }
            Pool::Postgres(pool) => {
                POSTGRES_MIGRATIONS.run(pool).await?;
                // Without autovacuum no table is ever analyzed, and a
                // statement planned while its table was small keeps a plan
                // that reads a workspace's every row through a tenant index
                // (docs/operations.md). Said at every start, once.
                let (autovacuum,): (String,) = sqlx::query_as("SHOW autovacuum").fetch_one(pool).await?;
                if autovacuum != "on" {
                    tracing::warn!(
                        "PostgreSQL runs with autovacuum off: tables are never analyzed and queries slow down as \
                         they grow; turn it on (ALTER SYSTEM SET autovacuum = on) or ANALYZE on a schedule"
                    );
                }
            }
        }
        Ok(())
    }

    /// A connection for reads outside a transaction.
    pub async fn read(&self) -> StoreResult<Conn> {
        let asked = std::time::Instant::now();
        let conn = match &self.pool {
            Pool::Sqlite { pool, .. } => Conn::Sqlite(pool.read().await?),
            Pool::Postgres(pool) => Conn::Postgres(self.reaching(pool.acquire()).await?),
        };
        self.metrics.db_acquire.with_label_values(&["read"]).observe(asked.elapsed().as_secs_f64());
        Ok(conn)
    }

    /// Starts a write transaction. On SQLite it is `BEGIN IMMEDIATE`, so it
    /// takes the write lock up front and never fails half-way on upgrade.
    pub async fn begin(&self) -> StoreResult<Tx> {
        let asked = std::time::Instant::now();
        let inner = match &self.pool {
            Pool::Sqlite { pool, .. } => TxInner::Sqlite(begin_immediate(pool.write().await?).await?),
            Pool::Postgres(pool) => TxInner::Postgres(self.reaching(pool.begin()).await?),
        };
        let waited = asked.elapsed();
        self.metrics.db_acquire.with_label_values(&["write"]).observe(waited.as_secs_f64());
        tracing::debug!(target: "parley_store::tx", waited_us = waited.as_micros() as u64, "begun");
        Ok(Tx::new(inner, self.bell.clone(), self.event_bell.clone(), self.metrics.clone()))
    }

    /// Runs `attempt` (a connection or a transaction from the PostgreSQL
    /// pool), briefly while an outage is known, noting whether the
    /// database is reachable.
    async fn reaching<T>(&self, attempt: impl Future<Output = Result<T, sqlx::Error>>) -> Result<T, sqlx::Error> {
        let result = if self.outage.recent() {
            tokio::time::timeout(OUTAGE_PROBE, attempt).await.unwrap_or(Err(sqlx::Error::PoolTimedOut))
        } else {
            attempt.await
        };
        match &result {
            Ok(_) => self.outage.ended(),
            Err(e) if crate::error::unreachable_database(e) => self.outage.failed(e),
            Err(_) => {}
        }
        result
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        let mut c = self.read().await?;
        crate::execute!(&mut c, sqlx::query("SELECT 1"))?;
        Ok(())
    }

    /// Checks that the database answers within `within`; if not, says why
    /// in words fit for anyone to read (no host, user or query).
    pub async fn readiness(&self, within: Duration) -> Result<(), &'static str> {
        let error = match tokio::time::timeout(within, self.ping()).await {
            Ok(Ok(())) => return Ok(()),
            Err(_) => return Err("it did not answer in time"),
            Ok(Err(StoreError::Database(e))) => e,
            Ok(Err(_)) => return Err("it could not be queried"),
        };
        Err(match error {
            sqlx::Error::PoolTimedOut => "no connection could be had in time",
            sqlx::Error::PoolClosed => "this instance has closed its connections (it is stopping)",
            sqlx::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => "the connection was refused",
            sqlx::Error::Io(_) => "the connection failed",
            sqlx::Error::Tls(_) => "the TLS handshake failed",
            sqlx::Error::Database(_) => "it answered with an error",
            _ => "it could not be queried",
        })
    }

    /// Writes a consistent copy of a SQLite database to `to` while it stays
    /// in use (`VACUUM INTO`: one read transaction, so writers go on and
    /// the copy is the database as of one commit, compacted), then checks
    /// the copy's integrity. The copy is written beside `to` and renamed
    /// into place, so `to` is never a half-written file. PostgreSQL has
    /// its own tools (`pg_dump`, base backups; docs/operations.md).
    pub async fn backup_to(&self, to: &Path) -> StoreResult<u64> {
        let Pool::Sqlite { pool, .. } = &self.pool else {
            return Err(StoreError::Unsupported(
                "`parley backup` copies SQLite databases; back PostgreSQL up with pg_dump (docs/operations.md)",
            ));
        };
        if to.exists() {
            return Err(StoreError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists; name a new file", to.display()),
            )));
        }
        let partial = to.with_extension(format!("partial-{}", std::process::id()));
        let _ = std::fs::remove_file(&partial);
        let target = partial.to_str().ok_or_else(|| {
            StoreError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the backup path is not UTF-8"))
        })?;
        let copied = async {
            // Seconds for a large database: in the blocking pool.
            let mut reader = pool.read().await?;
            let target = crate::sqlite::LiteValue::Text(target.to_owned());
            tokio::task::spawn_blocking(move || reader.execute_with("VACUUM INTO $1", &[target]))
                .await
                .map_err(|_| sqlx::Error::WorkerCrashed)??;
            // The copy is checked where it lies, before it takes the name.
            let copy = SqliteConnectOptions::new().filename(&partial).read_only(true);
            let mut conn = sqlx::ConnectOptions::connect(&copy).await?;
            let (verdict,): (String,) = sqlx::query_as("PRAGMA integrity_check").fetch_one(&mut conn).await?;
            sqlx::Connection::close(conn).await?;
            if verdict != "ok" {
                return Err(StoreError::Corrupt(format!("the copy failed its integrity check: {verdict}")));
            }
            std::fs::File::open(&partial)?.sync_all()?;
            std::fs::rename(&partial, to)?;
            Ok(std::fs::metadata(to)?.len())
        }
        .await;
        if copied.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        copied
    }

    /// Whether `close` was called (by any clone).
    pub fn is_closed(&self) -> bool {
        match &self.pool {
            Pool::Sqlite { pool, .. } => pool.is_closed(),
            Pool::Postgres(pool) => pool.is_closed(),
        }
    }

    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite { pool, .. } => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

/// A pooled connection outside any transaction.
pub enum Conn {
    Sqlite(ReadConn),
    Postgres(PoolConnection<Postgres>),
}

/// A write transaction. Dropping it without `commit` rolls back.
pub struct Tx {
    inner: TxInner,
    /// Change counters to bump at commit, once each (all its changes
    /// become visible together), in one statement.
    bumped: std::collections::HashSet<(parley_domain::Scope, String)>,
    /// Webhook endpoints subscribed to each event type, as this transaction found them.
    subscribers: SubscriberMemo,
    /// Routable triggers by scope and event, as this transaction found them.
    routes: RouteMemo,
    /// What a lookahead found absent (see [`Absences`]).
    absences: Absences,
    /// Kinds of the jobs it queued: their workers are woken after the commit.
    queued: Vec<String>,
    /// Jobs it leased to their workers as it queued them, handed over after the commit.
    taken: Vec<(Taker, crate::repo::jobs::JobRow)>,
    /// Events appended, written together (one statement) before the commit.
    events: Vec<(parley_domain::Scope, parley_domain::event::Event)>,
    /// Events written so far, announced on the event bell after the commit.
    written: Vec<(parley_domain::Scope, String)>,
    event_bell: EventBell,
    /// Open savepoints, innermost last, with what to restore on a rollback.
    marks: Vec<Mark>,
    bell: JobBell,
    begun: std::time::Instant,
    /// Metrics to count once it commits (a rolled-back run never ended).
    tallies: Vec<Tally>,
    metrics: parley_telemetry::Metrics,
    /// Statements sent so far, BEGIN included (each macro of `repo` asks
    /// for the handle once per statement).
    statements: u32,
    /// See [`Tx::rerun_on_race`].
    reruns_races: bool,
}

/// A count a transaction makes in the instance's metrics once it commits.
pub type Tally = Box<dyn FnOnce(&parley_telemetry::Metrics) + Send>;

/// What a transaction had noted in memory when a savepoint was made.
struct Mark {
    name: &'static str,
    events: usize,
    taken: usize,
    tallies: usize,
    bumped: std::collections::HashSet<(parley_domain::Scope, String)>,
}

/// A scope's active webhook endpoints: id and the event types each takes.
pub type SubscriberMemo = std::collections::HashMap<parley_domain::Scope, Vec<(i64, Vec<String>)>>;

/// Rows a transaction looked for ahead, in one statement for many, and did
/// not find: a group commit's lookahead (the inbound messages' provider
/// ids, conversations and senders of a whole batch), so that each job's
/// own lookup of a row that is not there needs no statement. Only
/// absences are kept, never rows (a row may change); every write that can
/// make one of these rows exist forgets its key (see the `repo` writers),
/// and a rollback to a savepoint forgets them all.
#[derive(Debug, Default)]
pub struct Absences(std::collections::HashSet<Absent>);

/// A row looked for and not found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Absent {
    /// An inbound message with this provider id on the channel.
    InboundMessage { scope: parley_domain::Scope, channel_id: i64, external_id: String },
    /// A conversation that is not closed on the channel with this `channel_ref`.
    OpenConversation { scope: parley_domain::Scope, channel_id: i64, channel_ref: String },
    /// A contact identity.
    Identity { scope: parley_domain::Scope, identity: parley_domain::contact::Identity },
    /// A contact with this normalized phone number.
    Phone { scope: parley_domain::Scope, phone: String },
    /// A contact with this normalized email address.
    Email { scope: parley_domain::Scope, email: String },
}

impl Absences {
    pub fn note(&mut self, absent: Absent) {
        self.0.insert(absent);
    }

    pub fn contains(&self, absent: &Absent) -> bool {
        self.0.contains(absent)
    }

    pub fn forget(&mut self, absent: &Absent) {
        self.0.remove(absent);
    }

    /// Forgets what matches `keep_if` false (a write whose rows are not
    /// known one by one).
    pub fn retain(&mut self, keep_if: impl Fn(&Absent) -> bool) {
        self.0.retain(|a| keep_if(a));
    }
}

/// Whether `c` (a transaction) knows `absent`'s row is not there.
pub(crate) fn known_absent(c: &mut impl AsHandle, absent: &Absent) -> bool {
    c.absences().is_some_and(|a| a.contains(absent))
}

/// Notes that `absent`'s row is not there (a lookahead found it missing).
pub(crate) fn note_absent(c: &mut impl AsHandle, absent: Absent) {
    if let Some(a) = c.absences() {
        a.note(absent);
    }
}

/// Forgets that `absent`'s row was not there (it was written now).
pub(crate) fn forget_absent(c: &mut impl AsHandle, absent: &Absent) {
    if let Some(a) = c.absences() {
        a.forget(absent);
    }
}

/// What a transaction has read for routing: a scope's routable triggers
/// per event (`repo::triggers::routable`) and the agents routing answered
/// with (`repo::agents::get_for_routing`), so a group commit's messages cost
/// one statement each, not one per message. Agent and trigger writes forget it.
#[derive(Debug, Default)]
pub struct RouteMemo {
    pub(crate) triggers: std::collections::HashMap<
        (parley_domain::Scope, parley_domain::agent::TriggerEvent),
        Vec<parley_domain::agent::Trigger>,
    >,
    pub(crate) agents: std::collections::HashMap<(parley_domain::Scope, i64), Option<parley_domain::agent::Agent>>,
}

impl RouteMemo {
    pub(crate) fn clear(&mut self) {
        self.triggers.clear();
        self.agents.clear();
    }
}

enum TxInner {
    Sqlite(WriteConn),
    Postgres(Transaction<'static, Postgres>),
}

impl Tx {
    /// Whether this transaction's backend lets no other transaction write
    /// while it is open (SQLite's single writer): then what it read is
    /// still true when it writes, and nothing can race it to a unique key.
    pub fn is_sole_writer(&self) -> bool {
        matches!(self.inner, TxInner::Sqlite(_))
    }

    /// Says that whoever runs this transaction runs all of it again, in a
    /// new one, when a write loses a race (a unique key another transaction
    /// committed first, a deadlock): a writer then needs no savepoint of its
    /// own to recover from one (see `group_commit`).
    pub fn rerun_on_race(&mut self) {
        self.reruns_races = true;
    }

    /// Whether a lost race reruns the whole transaction ([`Tx::rerun_on_race`]).
    pub fn reruns_races(&self) -> bool {
        self.reruns_races
    }

    /// Marks a point this transaction can roll back to (`name` is a fixed identifier).
    pub async fn savepoint(&mut self, name: &'static str) -> StoreResult<()> {
        self.run_raw(format!("SAVEPOINT {name}")).await?;
        let mark = Mark {
            name,
            events: self.events.len(),
            taken: self.taken.len(),
            tallies: self.tallies.len(),
            bumped: self.bumped.clone(),
        };
        self.marks.push(mark);
        Ok(())
    }

    /// Forgets a savepoint, keeping what was done since.
    pub async fn release(&mut self, name: &'static str) -> StoreResult<()> {
        self.run_raw(format!("RELEASE SAVEPOINT {name}")).await?;
        // Releasing a savepoint releases the ones made after it too.
        if let Some(at) = self.marks.iter().rposition(|m| m.name == name) {
            self.marks.truncate(at);
        }
        Ok(())
    }

    /// Undoes everything since the savepoint (which stays, released here),
    /// in the database and in what this transaction noted: the events it
    /// appended, the jobs it would hand over and the counters it bumped.
    pub async fn rollback_to(&mut self, name: &'static str) -> StoreResult<()> {
        self.run_raw(format!("ROLLBACK TO SAVEPOINT {name}")).await?;
        if let Some(mark) = self.marks.iter().rev().find(|m| m.name == name) {
            self.events.truncate(mark.events);
            self.taken.truncate(mark.taken);
            self.tallies.truncate(mark.tallies);
            self.bumped = mark.bumped.clone();
        }
        // What it remembered may have been read from the undone writes.
        self.subscribers.clear();
        self.routes.clear();
        self.absences = Absences::default();
        self.release(name).await
    }

    /// Writes the events appended so far (one statement for all of them)
    /// and queues them for their subscribers, and bumps the change
    /// counters of what it changed (one more; on PostgreSQL the counters,
    /// events and subscriber look-up are one statement together).
    async fn flush(&mut self) -> StoreResult<()> {
        let bumped = std::mem::take(&mut self.bumped);
        let mut events = std::mem::take(&mut self.events);
        // Stamped as they are written, just before the commit: an event's
        // time is then close to when readers can see it (the live stream's
        // replay relies on the gap being short); a microsecond apart, so
        // they keep the order they were appended in.
        let now = parley_domain::Timestamp::now();
        for (i, (_, event)) in events.iter_mut().enumerate() {
            event.created_at = now.plus_duration(Duration::from_micros(i as u64));
        }
        if matches!(self.inner, TxInner::Postgres(_)) && (!bumped.is_empty() || !events.is_empty()) {
            self.flush_postgres(bumped, &events).await?;
        } else {
            crate::repo::versions::bump_all(self, bumped).await?;
            crate::repo::events::insert_all(self, &events).await?;
        }
        self.fan_out(events).await
    }

    /// On PostgreSQL the counters, the events and the look-up of their
    /// scopes' webhook subscribers go in one statement: each statement is
    /// a round trip and a server wake-up, most of a reply's cost there.
    async fn flush_postgres(
        &mut self,
        bumped: std::collections::HashSet<(parley_domain::Scope, String)>,
        events: &[(parley_domain::Scope, parley_domain::event::Event)],
    ) -> StoreResult<()> {
        let mut look_up: Vec<parley_domain::Scope> =
            events.iter().map(|(scope, _)| *scope).filter(|scope| !self.subscribers.contains_key(scope)).collect();
        look_up.sort_by_key(|s| (s.workspace_id, s.livemode()));
        look_up.dedup();
        let counters = crate::repo::versions::in_lock_order(bumped);
        let shard = crate::repo::versions::next_shard();
        let Handle::Postgres(conn) = self.handle() else { unreachable!("a PostgreSQL transaction") };
        let mut found = crate::repo::events::flush_postgres(conn, &counters, shard, events, &look_up).await?;
        for scope in look_up {
            let (theirs, rest) = found.into_iter().partition(|(s, _)| *s == scope);
            found = rest;
            let endpoints = theirs.into_iter().map(|(_, endpoint)| endpoint).collect();
            self.subscribers.insert(scope, endpoints);
        }
        Ok(())
    }

    /// Queues the written `events` for their subscribers.
    async fn fan_out(&mut self, events: Vec<(parley_domain::Scope, parley_domain::event::Event)>) -> StoreResult<()> {
        for (scope, event) in &events {
            crate::repo::webhooks::fan_out(self, *scope, &event.id, event.kind, event.created_at).await?;
        }
        self.written.extend(events.into_iter().map(|(scope, event)| (scope, event.id)));
        Ok(())
    }

    async fn run_raw(&mut self, sql: String) -> StoreResult<()> {
        crate::execute!(self, sqlx::query(sqlx::AssertSqlSafe(sql)))?;
        Ok(())
    }

    /// Counts `tally` in the instance's metrics if (once) this transaction commits.
    pub fn tally(&mut self, tally: impl FnOnce(&parley_telemetry::Metrics) + Send + 'static) {
        self.tallies.push(Box::new(tally));
    }

    fn new(inner: TxInner, bell: JobBell, event_bell: EventBell, metrics: parley_telemetry::Metrics) -> Self {
        Tx {
            tallies: Vec::new(),
            metrics,
            statements: 1,
            reruns_races: false,
            inner,
            bumped: Default::default(),
            subscribers: Default::default(),
            routes: Default::default(),
            absences: Default::default(),
            queued: Vec::new(),
            taken: Vec::new(),
            events: Vec::new(),
            written: Vec::new(),
            event_bell,
            marks: Vec::new(),
            bell,
            begun: std::time::Instant::now(),
        }
    }

    /// Writes its events, commits, then wakes the workers of the jobs it queued.
    pub async fn commit(mut self) -> StoreResult<()> {
        self.flush().await?;
        match self.inner {
            TxInner::Sqlite(w) => commit(w).await?,
            TxInner::Postgres(t) => t.commit().await?,
        }
        let statements = self.statements + 1;
        self.metrics.db_transaction_statements.observe(f64::from(statements));
        tracing::debug!(
            target: "parley_store::tx",
            held_us = self.begun.elapsed().as_micros() as u64,
            statements,
            "committed"
        );
        self.bell.ring(&self.queued);
        self.event_bell.ring(&self.written);
        for (taker, job) in self.taken {
            // A worker that stopped meanwhile lets the lease lapse.
            let _ = taker.jobs.send(job);
        }
        for tally in self.tallies {
            tally(&self.metrics);
        }
        Ok(())
    }
}

/// `BEGIN IMMEDIATE` on the writer: at once, as nothing else in this
/// process writes; if another process holds the write lock (the CLI),
/// waiting for it up to the busy timeout in the blocking pool.
async fn begin_immediate(mut w: WriteConn) -> Result<WriteConn, sqlx::Error> {
    // A rollback that failed as the writer was given back left its
    // transaction open: end it, or no BEGIN would ever succeed again.
    if !w.is_autocommit() {
        w.execute_raw("ROLLBACK")?;
    }
    match w.execute_raw("BEGIN IMMEDIATE") {
        Ok(()) => Ok(w),
        Err(e) if crate::sqlite::is_busy(&e) => tokio::task::spawn_blocking(move || {
            w.set_busy_timeout(crate::sqlite::BUSY_TIMEOUT)?;
            let begun = w.execute_raw("BEGIN IMMEDIATE");
            w.set_busy_timeout(Duration::ZERO)?;
            begun.map(|()| w)
        })
        .await
        .map_err(|_| sqlx::Error::WorkerCrashed)?,
        Err(e) => Err(e),
    }
}

/// `COMMIT` on the writer, in the blocking pool: it waits for the disk
/// (synchronous = FULL), and, where the file system cannot keep a WAL and
/// SQLite fell back to a rollback journal, for readers to finish (the busy
/// timeout). A failed commit is rolled back as `w` drops.
async fn commit(mut w: WriteConn) -> Result<(), sqlx::Error> {
    tokio::task::spawn_blocking(move || {
        w.set_busy_timeout(crate::sqlite::BUSY_TIMEOUT)?;
        let committed = w.execute_raw("COMMIT");
        // The commit's outcome is the answer: a write that committed must
        // never be reported failed (the caller would do it again).
        if let Err(e) = w.set_busy_timeout(Duration::ZERO) {
            tracing::warn!(error = %e, "could not restore the writer's busy timeout");
        }
        committed
    })
    .await
    .map_err(|_| sqlx::Error::WorkerCrashed)?
}

/// The backend connection behind a `Conn` or a `Tx`.
pub enum Handle<'a> {
    Sqlite(&'a mut LiteConnection),
    Postgres(&'a mut PgConnection),
}

/// Anything a repository can run queries on.
pub trait AsHandle: Send {
    fn handle(&mut self) -> Handle<'_>;

    /// Whether this runs on PostgreSQL. Asking sends nothing, so unlike
    /// [`AsHandle::handle`] it does not count as a statement.
    fn is_postgres(&mut self) -> bool;

    /// Keeps the bump of `resource`'s change counter in `scope` to write at
    /// the commit, once (a transaction does: true), or says to write it now.
    fn defer_bump(&mut self, _scope: parley_domain::Scope, _resource: &str) -> bool {
        false
    }

    /// Where a transaction remembers webhook subscribers (none outside one).
    fn subscriber_memo(&mut self) -> Option<&mut SubscriberMemo> {
        None
    }

    /// Where a transaction remembers routable triggers (none outside one).
    fn route_memo(&mut self) -> Option<&mut RouteMemo> {
        None
    }

    /// What a transaction's lookahead found absent (none outside one).
    fn absences(&mut self) -> Option<&mut Absences> {
        None
    }

    /// Notes that a job of `kind` was queued here: a transaction wakes its
    /// workers once it commits (outside one, they find it when they poll).
    fn queued_job(&mut self, _kind: &str) {}

    /// The worker here that takes jobs of `kind` as they are queued (only
    /// in a transaction, which hands them over once it commits).
    fn job_taker(&mut self, _kind: &str) -> Option<Taker> {
        None
    }

    /// Hands `job`, leased to `taker`, to it after the commit.
    fn hand_over(&mut self, _taker: Taker, _job: crate::repo::jobs::JobRow) {}

    /// Keeps `event` to write with the others at the commit (a transaction
    /// does), or gives it back to be written now.
    fn defer_event(
        &mut self,
        _scope: parley_domain::Scope,
        event: parley_domain::event::Event,
    ) -> Option<parley_domain::event::Event> {
        Some(event)
    }

    /// Notes events written now (not deferred), to announce after the
    /// commit (a transaction does; outside one nobody is told).
    fn events_written(&mut self, _scope: parley_domain::Scope, _ids: &[String]) {}
}

impl AsHandle for Conn {
    fn handle(&mut self) -> Handle<'_> {
        match self {
            Conn::Sqlite(c) => Handle::Sqlite(c),
            Conn::Postgres(c) => Handle::Postgres(c),
        }
    }

    fn is_postgres(&mut self) -> bool {
        matches!(self, Conn::Postgres(_))
    }
}

impl AsHandle for Tx {
    fn handle(&mut self) -> Handle<'_> {
        self.statements += 1;
        match &mut self.inner {
            TxInner::Sqlite(w) => Handle::Sqlite(w),
            TxInner::Postgres(t) => Handle::Postgres(t),
        }
    }

    fn is_postgres(&mut self) -> bool {
        matches!(self.inner, TxInner::Postgres(_))
    }

    fn defer_bump(&mut self, scope: parley_domain::Scope, resource: &str) -> bool {
        self.bumped.insert((scope, resource.to_owned()));
        true
    }

    fn subscriber_memo(&mut self) -> Option<&mut SubscriberMemo> {
        Some(&mut self.subscribers)
    }

    fn route_memo(&mut self) -> Option<&mut RouteMemo> {
        Some(&mut self.routes)
    }

    fn absences(&mut self) -> Option<&mut Absences> {
        Some(&mut self.absences)
    }

    fn queued_job(&mut self, kind: &str) {
        if !self.queued.iter().any(|k| k == kind) {
            self.queued.push(kind.to_owned());
        }
    }

    fn job_taker(&mut self, kind: &str) -> Option<Taker> {
        self.bell.taker(kind)
    }

    fn hand_over(&mut self, taker: Taker, job: crate::repo::jobs::JobRow) {
        self.taken.push((taker, job));
    }

    fn defer_event(
        &mut self,
        scope: parley_domain::Scope,
        event: parley_domain::event::Event,
    ) -> Option<parley_domain::event::Event> {
        self.events.push((scope, event));
        None
    }

    fn events_written(&mut self, scope: parley_domain::Scope, ids: &[String]) {
        self.written.extend(ids.iter().map(|id| (scope, id.clone())));
    }
}
