//! SQLite for sqlx, stepped on the caller's thread.
//!
//! sqlx's SQLite driver runs every statement on a worker thread of its own
//! connection: a channel round trip each, 50–80 µs on a busy machine and
//! most of a reply's cost (docs/research/write-path.md §4). The
//! repositories' queries are written once, with `sqlx::query`, for both
//! backends; this module is a sqlx [`Database`] over rusqlite so that those
//! same queries run here unchanged, each prepared once per connection and
//! stepped where it is awaited: microseconds of CPU, no thread switch. What
//! may wait — `BEGIN IMMEDIATE` behind another process's write lock, a
//! COMMIT's fsync — goes to the blocking pool (see `db.rs`).
//!
//! Values cross as SQLite's five storage classes ([`LiteValue`]); decoding
//! coerces as SQLite's own `sqlite3_value_*` functions (and sqlx's SQLite
//! driver) do, so a row reads the same through either.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use rusqlite::fallible_iterator::FallibleIterator;
use rusqlite::types::{ToSqlOutput, ValueRef as RawValue};
use sqlx::encode::IsNull;
use sqlx::error::{BoxDynError, DatabaseError, ErrorKind};
use sqlx::{Column, ColumnIndex, Database, Decode, Either, Encode, Error, Execute, Executor, SqlStr, Type, TypeInfo};

/// The database type: SQLite through rusqlite, in the caller's thread.
#[derive(Debug)]
pub struct Lite;

impl Database for Lite {
    type Connection = LiteConnection;
    type TransactionManager = LiteTransactionManager;
    type Row = LiteRow;
    type QueryResult = LiteQueryResult;
    type Column = LiteColumn;
    type TypeInfo = LiteTypeInfo;
    type Value = LiteValue;
    type ValueRef<'r> = &'r LiteValue;
    type Arguments = LiteArguments;
    type ArgumentBuffer = Vec<LiteValue>;
    type Statement = LiteStatement;

    const NAME: &'static str = "SQLite (inline)";
    const URL_SCHEMES: &'static [&'static str] = &["sqlite"];
}

/// A value as SQLite stores it.
#[derive(Debug, Clone, PartialEq)]
pub enum LiteValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl LiteValue {
    fn from_raw(raw: RawValue<'_>) -> Self {
        match raw {
            RawValue::Null => LiteValue::Null,
            RawValue::Integer(i) => LiteValue::Integer(i),
            RawValue::Real(f) => LiteValue::Real(f),
            RawValue::Text(t) => LiteValue::Text(String::from_utf8_lossy(t).into_owned()),
            RawValue::Blob(b) => LiteValue::Blob(b.to_vec()),
        }
    }

    fn kind(&self) -> LiteTypeInfo {
        LiteTypeInfo(match self {
            LiteValue::Null => "NULL",
            LiteValue::Integer(_) => "INTEGER",
            LiteValue::Real(_) => "REAL",
            LiteValue::Text(_) => "TEXT",
            LiteValue::Blob(_) => "BLOB",
        })
    }

    /// As `sqlite3_value_int64`: reals truncate, text parses its leading integer.
    fn as_i64(&self) -> i64 {
        match self {
            LiteValue::Null => 0,
            LiteValue::Integer(i) => *i,
            LiteValue::Real(f) => *f as i64,
            LiteValue::Text(t) => leading_number(t).and_then(|n| n.parse::<f64>().ok()).map_or(0, |f| f as i64),
            LiteValue::Blob(b) => {
                leading_number(&String::from_utf8_lossy(b)).and_then(|n| n.parse::<f64>().ok()).map_or(0, |f| f as i64)
            }
        }
    }

    /// As `sqlite3_value_double`.
    fn as_f64(&self) -> f64 {
        match self {
            LiteValue::Null => 0.0,
            LiteValue::Integer(i) => *i as f64,
            LiteValue::Real(f) => *f,
            LiteValue::Text(t) => leading_number(t).and_then(|n| n.parse().ok()).unwrap_or(0.0),
            LiteValue::Blob(b) => {
                leading_number(&String::from_utf8_lossy(b)).and_then(|n| n.parse().ok()).unwrap_or(0.0)
            }
        }
    }
}

/// The numeric prefix of `text` (after leading spaces), as SQLite reads one.
fn leading_number(text: &str) -> Option<&str> {
    let t = text.trim_start();
    let end = t
        .char_indices()
        .take_while(|(i, c)| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E') || (*i == 0 && matches!(c, '-' | '+')))
        .count();
    (end > 0).then(|| &t[..end])
}

impl rusqlite::ToSql for LiteValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            LiteValue::Null => RawValue::Null,
            LiteValue::Integer(i) => RawValue::Integer(*i),
            LiteValue::Real(f) => RawValue::Real(*f),
            LiteValue::Text(t) => RawValue::Text(t.as_bytes()),
            LiteValue::Blob(b) => RawValue::Blob(b),
        }))
    }
}

impl sqlx::Value for LiteValue {
    type Database = Lite;

    fn as_ref(&self) -> &LiteValue {
        self
    }

    fn type_info(&self) -> Cow<'_, LiteTypeInfo> {
        Cow::Owned(self.kind())
    }

    fn is_null(&self) -> bool {
        matches!(self, LiteValue::Null)
    }
}

impl<'r> sqlx::ValueRef<'r> for &'r LiteValue {
    type Database = Lite;

    fn to_owned(&self) -> LiteValue {
        (*self).clone()
    }

    fn type_info(&self) -> Cow<'_, LiteTypeInfo> {
        Cow::Owned(self.kind())
    }

    fn is_null(&self) -> bool {
        matches!(self, LiteValue::Null)
    }
}

/// A storage class. Every Rust type accepts every class and coerces as
/// SQLite does, so type checks never refuse a value (as with sqlx's driver,
/// whose declared types SQLite does not enforce either).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteTypeInfo(&'static str);

impl std::fmt::Display for LiteTypeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl TypeInfo for LiteTypeInfo {
    fn is_null(&self) -> bool {
        self.0 == "NULL"
    }

    fn name(&self) -> &str {
        self.0
    }

    fn type_compatible(&self, _other: &Self) -> bool {
        true
    }
}

/// A result column.
#[derive(Debug, Clone)]
pub struct LiteColumn {
    ordinal: usize,
    name: Arc<str>,
    type_info: LiteTypeInfo,
}

impl Column for LiteColumn {
    type Database = Lite;

    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn type_info(&self) -> &LiteTypeInfo {
        &self.type_info
    }
}

/// A row, copied out of the statement as it was stepped.
pub struct LiteRow {
    columns: Arc<[LiteColumn]>,
    values: Vec<LiteValue>,
}

impl sqlx::Row for LiteRow {
    type Database = Lite;

    fn columns(&self) -> &[LiteColumn] {
        &self.columns
    }

    fn try_get_raw<I>(&self, index: I) -> Result<&LiteValue, Error>
    where
        I: ColumnIndex<Self>,
    {
        Ok(&self.values[index.index(self)?])
    }
}

fn column_index(columns: &[LiteColumn], name: &str) -> Result<usize, Error> {
    columns.iter().position(|c| &*c.name == name).ok_or_else(|| Error::ColumnNotFound(name.to_owned()))
}

fn column_at(columns: &[LiteColumn], index: usize) -> Result<usize, Error> {
    if index >= columns.len() {
        return Err(Error::ColumnIndexOutOfBounds { index, len: columns.len() });
    }
    Ok(index)
}

/// Column lookups by name and by position, for rows and statements alike.
macro_rules! column_index {
    ($($container:ty),*) => {$(
        impl ColumnIndex<$container> for &'_ str {
            fn index(&self, container: &$container) -> Result<usize, Error> {
                column_index(&container.columns, self)
            }
        }

        impl ColumnIndex<$container> for usize {
            fn index(&self, container: &$container) -> Result<usize, Error> {
                column_at(&container.columns, *self)
            }
        }
    )*};
}

column_index!(LiteRow, LiteStatement);

/// What a statement changed.
#[derive(Debug, Default, Clone, Copy)]
pub struct LiteQueryResult {
    rows_affected: u64,
    last_insert_rowid: i64,
}

impl LiteQueryResult {
    pub fn rows_affected(&self) -> u64 {
        self.rows_affected
    }

    pub fn last_insert_rowid(&self) -> i64 {
        self.last_insert_rowid
    }
}

impl Extend<LiteQueryResult> for LiteQueryResult {
    fn extend<T: IntoIterator<Item = LiteQueryResult>>(&mut self, iter: T) {
        for r in iter {
            self.rows_affected += r.rows_affected;
            self.last_insert_rowid = r.last_insert_rowid;
        }
    }
}

/// Bound values, `$N` taking the N-th.
#[derive(Debug, Default, Clone)]
pub struct LiteArguments(Vec<LiteValue>);

impl sqlx::Arguments for LiteArguments {
    type Database = Lite;

    fn reserve(&mut self, additional: usize, _size: usize) {
        self.0.reserve(additional);
    }

    fn add<'t, T>(&mut self, value: T) -> Result<(), BoxDynError>
    where
        T: Encode<'t, Lite> + Type<Lite>,
    {
        let before = self.0.len();
        match value.encode(&mut self.0) {
            Ok(IsNull::Yes) => {
                self.0.truncate(before);
                self.0.push(LiteValue::Null);
            }
            Ok(IsNull::No) => {}
            Err(e) => {
                self.0.truncate(before);
                return Err(e);
            }
        }
        Ok(())
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl sqlx_core::database::HasStatementCache for Lite {}

impl sqlx::IntoArguments<Lite> for LiteArguments {
    fn into_arguments(self) -> LiteArguments {
        self
    }
}

/// A prepared statement's shape (the statement itself stays in its
/// connection's cache).
#[derive(Debug, Clone)]
pub struct LiteStatement {
    sql: SqlStr,
    columns: Arc<[LiteColumn]>,
    parameters: usize,
}

impl sqlx::Statement for LiteStatement {
    type Database = Lite;

    fn into_sql(self) -> SqlStr {
        self.sql
    }

    fn sql(&self) -> &SqlStr {
        &self.sql
    }

    fn parameters(&self) -> Option<Either<&[LiteTypeInfo], usize>> {
        Some(Either::Right(self.parameters))
    }

    fn columns(&self) -> &[LiteColumn] {
        &self.columns
    }

    sqlx_core::impl_statement_query!(LiteArguments);
}

/// A SQLite error, with its extended result code as the code.
#[derive(Debug)]
pub struct LiteError {
    code: i32,
    message: String,
}

impl std::fmt::Display for LiteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for LiteError {}

impl DatabaseError for LiteError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        use rusqlite::ffi;
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => ErrorKind::UniqueViolation,
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

/// Whether `e` is SQLite's "busy" (another connection holds the lock).
pub(crate) fn is_busy(e: &Error) -> bool {
    matches!(e, Error::Database(db) if db.code().is_some_and(|c| c.parse::<i32>().is_ok_and(|c| c & 0xff == rusqlite::ffi::SQLITE_BUSY)))
}

fn lite_error(e: rusqlite::Error) -> Error {
    match e {
        rusqlite::Error::SqliteFailure(f, message) => Error::Database(Box::new(LiteError {
            code: f.extended_code,
            message: message.unwrap_or_else(|| f.to_string()),
        })),
        other => Error::Protocol(other.to_string()),
    }
}

/// How a connection is opened.
#[derive(Debug, Clone)]
pub struct LiteConnectOptions {
    path: PathBuf,
    read_only: bool,
}

impl LiteConnectOptions {
    /// The database file at `path`, opened for writing (`read_only` false)
    /// or reading, with the server's settings (WAL, FULL sync, foreign keys).
    pub fn new(path: &Path, read_only: bool) -> Self {
        Self { path: path.to_owned(), read_only }
    }

    /// Opens the connection now (a file open and a few pragmas).
    pub fn open(&self) -> Result<LiteConnection, Error> {
        use rusqlite::OpenFlags;
        let flags = if self.read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = rusqlite::Connection::open_with_flags(&self.path, flags).map_err(lite_error)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(lite_error)?;
        // SQLite's default page cache is 2 MiB: too small for a server's
        // working set. Memory-mapped reads save a syscall per page miss.
        // FULL: a committed transaction survives power loss, not only a crash.
        let journal = if self.read_only { "" } else { "PRAGMA journal_mode = WAL;" };
        conn.execute_batch(&format!(
            "{journal} PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA cache_size = -16384; \
             PRAGMA mmap_size = 268435456;"
        ))
        .map_err(lite_error)?;
        // The repositories have a few hundred distinct statements.
        conn.set_prepared_statement_cache_capacity(512);
        Ok(LiteConnection { conn, columns: HashMap::new(), batches: Default::default(), depth: 0 })
    }
}

/// How long a statement waits for another process's lock (the CLI's
/// writes, a backup) before it fails.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

impl FromStr for LiteConnectOptions {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self, Error> {
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?;
        Ok(Self::new(options.get_filename(), false))
    }
}

impl sqlx::ConnectOptions for LiteConnectOptions {
    type Connection = LiteConnection;

    fn from_url(url: &sqlx_core::Url) -> Result<Self, Error> {
        Self::from_str(url.as_str())
    }

    async fn connect(&self) -> Result<LiteConnection, Error> {
        self.open()
    }

    fn log_statements(self, _level: log::LevelFilter) -> Self {
        self
    }

    fn log_slow_statements(self, _level: log::LevelFilter, _duration: Duration) -> Self {
        self
    }
}

/// One rusqlite connection and the shapes of the statements it has run.
pub struct LiteConnection {
    conn: rusqlite::Connection,
    /// Result columns by SQL text: each is named once, not per execution.
    columns: HashMap<Box<str>, Arc<[LiteColumn]>>,
    /// SQL texts that hold several statements, and those statements.
    batches: HashMap<Box<str>, Vec<Box<str>>>,
    /// Transactions and savepoints open through sqlx's `Transaction`.
    depth: usize,
}

impl std::fmt::Debug for LiteConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiteConnection").field("path", &self.conn.path()).finish()
    }
}

impl LiteConnection {
    /// Runs `sql` (one statement or several) with `args`, keeping at most
    /// `limit` rows; each statement's changes follow its rows.
    fn run(
        &mut self,
        sql: &str,
        args: &[LiteValue],
        limit: usize,
    ) -> Result<Vec<Either<LiteQueryResult, LiteRow>>, Error> {
        self.run_as(sql, args, limit, true)
    }

    /// [`Self::run`], keeping the prepared statement for the next time
    /// (`persistent`) or not (SQL assembled per request, as search's).
    fn run_as(
        &mut self,
        sql: &str,
        args: &[LiteValue],
        limit: usize,
        persistent: bool,
    ) -> Result<Vec<Either<LiteQueryResult, LiteRow>>, Error> {
        let mut out = Vec::new();
        let LiteConnection { conn, columns, batches, .. } = self;
        if !persistent {
            let mut batch = rusqlite::Batch::new(conn, sql);
            while let Some(mut statement) = batch.next().map_err(lite_error)? {
                step(conn, &mut HashMap::new(), "", &mut statement, args, limit, &mut out)?;
            }
            return Ok(out);
        }
        if let Some(parts) = batches.get(sql) {
            for part in parts.iter() {
                let mut statement = conn.prepare_cached(part).map_err(lite_error)?;
                step(conn, columns, part, &mut statement, args, limit, &mut out)?;
            }
            return Ok(out);
        }
        match conn.prepare_cached(sql) {
            Ok(mut statement) => {
                step(conn, columns, sql, &mut statement, args, limit, &mut out)?;
                return Ok(out);
            }
            Err(rusqlite::Error::MultipleStatement) => {}
            Err(e) => return Err(lite_error(e)),
        }
        // Several statements in one call (a write and its bookkeeping):
        // split once, then each part is cached as a statement of its own.
        if let Some(parts) = split_statements(sql) {
            if batches.len() >= SHAPES_KEPT {
                batches.clear();
            }
            batches.insert(sql.into(), parts);
            return self.run_as(sql, args, limit, persistent);
        }
        let mut batch = rusqlite::Batch::new(conn, sql);
        while let Some(mut statement) = batch.next().map_err(lite_error)? {
            step(conn, &mut HashMap::new(), "", &mut statement, args, limit, &mut out)?;
        }
        Ok(out)
    }

    /// Runs `sql` without arguments or rows (transaction control).
    pub(crate) fn execute_raw(&mut self, sql: &str) -> Result<(), Error> {
        self.run(sql, &[], 0).map(drop)
    }

    /// Runs `sql` with `args`, reading no rows (for work done off the
    /// async runtime, in the blocking pool).
    pub(crate) fn execute_with(&mut self, sql: &str, args: &[LiteValue]) -> Result<(), Error> {
        self.run(sql, args, 0).map(drop)
    }

    /// Whether no transaction is open on this connection.
    pub(crate) fn is_autocommit(&self) -> bool {
        self.conn.is_autocommit()
    }

    /// Sets how long its statements wait for another connection's lock.
    pub(crate) fn set_busy_timeout(&self, timeout: Duration) -> Result<(), Error> {
        self.conn.busy_timeout(timeout).map_err(lite_error)
    }

    /// Runs a query now (the work behind every `Executor` method).
    fn execute_now<'q, E: Execute<'q, Lite>>(
        &mut self,
        mut query: E,
        limit: usize,
    ) -> Result<Vec<Either<LiteQueryResult, LiteRow>>, Error> {
        let arguments = query.take_arguments().map_err(Error::Encode)?;
        let persistent = query.persistent() && arguments.is_some();
        let sql = query.sql();
        let args = arguments.as_ref().map_or(&[][..], |a| &a.0[..]);
        // A statement not kept is one assembled per request (search's):
        // the kind that may scan for milliseconds. On a multi-threaded
        // runtime this worker's other tasks move to another thread
        // meanwhile; the rest are point reads and writes, microseconds.
        let scanning = !persistent
            && tokio::runtime::Handle::try_current()
                .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if scanning {
            tokio::task::block_in_place(|| self.run_as(sql.as_str(), args, limit, persistent))
        } else {
            self.run_as(sql.as_str(), args, limit, persistent)
        }
    }
}

/// `sql`'s statements, one text each (`None` if it cannot be split: then
/// it runs statement by statement, prepared each time). A statement ends
/// at the first `;` that SQLite's own tokenizer says completes it.
/// How many SQL texts a connection remembers the shape of before it starts
/// over: most are the repositories' fixed statements, but some SQL is
/// assembled per call (lists of ids, filters) and must not grow it forever.
const SHAPES_KEPT: usize = 1024;

fn split_statements(sql: &str) -> Option<Vec<Box<str>>> {
    let complete = |text: &str| -> Option<bool> {
        let text = std::ffi::CString::new(text).ok()?;
        // SAFETY: a NUL-terminated string that outlives the call; SQLite
        // only reads it.
        Some(unsafe { rusqlite::ffi::sqlite3_complete(text.as_ptr()) } != 0)
    };
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, _) in sql.match_indices(';') {
        if complete(&sql[start..=i])? {
            let part = sql[start..i].trim();
            if !part.is_empty() {
                parts.push(part.into());
            }
            start = i + 1;
        }
    }
    let rest = sql[start..].trim();
    if !rest.is_empty() {
        parts.push(rest.into());
    }
    (parts.len() > 1).then_some(parts)
}

/// A statement's result columns (their declared types are not kept:
/// values carry their storage class).
fn shape_of(statement: &rusqlite::Statement<'_>) -> Arc<[LiteColumn]> {
    statement
        .column_names()
        .into_iter()
        .enumerate()
        .map(|(ordinal, name)| LiteColumn { ordinal, name: name.into(), type_info: LiteTypeInfo("NULL") })
        .collect()
}

fn step(
    conn: &rusqlite::Connection,
    columns: &mut HashMap<Box<str>, Arc<[LiteColumn]>>,
    key: &str,
    statement: &mut rusqlite::Statement<'_>,
    args: &[LiteValue],
    limit: usize,
    out: &mut Vec<Either<LiteQueryResult, LiteRow>>,
) -> Result<(), Error> {
    // `$N` (and `?N`) take the N-th argument, however often and in
    // whatever order they appear (SQLite numbers named parameters by first
    // use); a bare `?` takes the next. Past the arguments: NULL.
    let mut next = 0;
    for i in 1..=statement.parameter_count() {
        let n = match statement.parameter_name(i) {
            Some(name) => name[1..]
                .parse::<usize>()
                .map_err(|_| Error::Protocol(format!("unsupported SQL parameter {name:?}: use $N")))?,
            None => {
                next += 1;
                next
            }
        };
        let value = args.get(n.wrapping_sub(1)).unwrap_or(&LiteValue::Null);
        statement.raw_bind_parameter(i, value).map_err(lite_error)?;
    }
    let shape = match columns.get(key) {
        Some(shape) => shape.clone(),
        None => {
            let shape = shape_of(statement);
            if columns.len() >= SHAPES_KEPT {
                columns.clear();
            }
            columns.insert(key.into(), shape.clone());
            shape
        }
    };
    let readonly = statement.readonly();
    let width = shape.len();
    let mut rows = statement.raw_query();
    let mut taken = 0;
    while taken < limit {
        let Some(row) = rows.next().map_err(lite_error)? else { break };
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(LiteValue::from_raw(row.get_ref(i).map_err(lite_error)?));
        }
        out.push(Either::Right(LiteRow { columns: shape.clone(), values }));
        taken += 1;
    }
    // A statement stopped early (the limit) is reset as it drops: a write
    // with RETURNING has made all its changes at its first step. Run with
    // no rows asked for, a statement still runs to its end.
    if limit == 0 {
        while rows.next().map_err(lite_error)?.is_some() {}
    }
    drop(rows);
    out.push(Either::Left(LiteQueryResult {
        rows_affected: if readonly { 0 } else { conn.changes() },
        last_insert_rowid: conn.last_insert_rowid(),
    }));
    Ok(())
}

impl<'c> Executor<'c> for &'c mut LiteConnection {
    type Database = Lite;

    fn fetch_many<'e, 'q, E>(self, query: E) -> BoxStream<'e, Result<Either<LiteQueryResult, LiteRow>, Error>>
    where
        'c: 'e,
        E: Execute<'q, Lite>,
        'q: 'e,
        E: 'q,
    {
        async move {
            // Statements that never wait would never yield: a long loop of
            // them would hold this worker thread. Tokio's budget makes them.
            tokio::task::coop::consume_budget().await;
            match self.execute_now(query, usize::MAX) {
                Ok(items) => futures::stream::iter(items.into_iter().map(Ok)).boxed(),
                Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
            }
        }
        .flatten_stream()
        .boxed()
    }

    fn fetch_optional<'e, 'q, E>(self, query: E) -> BoxFuture<'e, Result<Option<LiteRow>, Error>>
    where
        'c: 'e,
        E: Execute<'q, Lite>,
        'q: 'e,
        E: 'q,
    {
        async move {
            tokio::task::coop::consume_budget().await;
            let items = self.execute_now(query, 1)?;
            Ok(items.into_iter().find_map(|i| match i {
                Either::Right(row) => Some(row),
                Either::Left(_) => None,
            }))
        }
        .boxed()
    }

    fn prepare_with<'e>(self, sql: SqlStr, _parameters: &[LiteTypeInfo]) -> BoxFuture<'e, Result<LiteStatement, Error>>
    where
        'c: 'e,
    {
        async move {
            let statement = self.conn.prepare_cached(sql.as_str()).map_err(lite_error)?;
            let columns = shape_of(&statement);
            let parameters = statement.parameter_count();
            drop(statement);
            Ok(LiteStatement { sql, columns, parameters })
        }
        .boxed()
    }

    fn describe<'e>(self, _sql: SqlStr) -> BoxFuture<'e, Result<sqlx::Describe<Lite>, Error>>
    where
        'c: 'e,
    {
        async { Err(Error::Protocol("compile-time query checks do not use this driver".into())) }.boxed()
    }
}

impl sqlx::Connection for LiteConnection {
    type Database = Lite;
    type Options = LiteConnectOptions;

    async fn close(self) -> Result<(), Error> {
        drop(self);
        Ok(())
    }

    async fn close_hard(self) -> Result<(), Error> {
        drop(self);
        Ok(())
    }

    async fn ping(&mut self) -> Result<(), Error> {
        self.execute_raw("SELECT 1")
    }

    fn begin(&mut self) -> impl Future<Output = Result<sqlx::Transaction<'_, Lite>, Error>> + Send + '_ {
        sqlx::Transaction::begin(self, None)
    }

    fn begin_with(
        &mut self,
        statement: impl sqlx::SqlSafeStr,
    ) -> impl Future<Output = Result<sqlx::Transaction<'_, Lite>, Error>> + Send + '_
    where
        Self: Sized,
    {
        sqlx::Transaction::begin(self, Some(statement.into_sql_str()))
    }

    fn cached_statements_size(&self) -> usize {
        self.columns.len()
    }

    async fn clear_cached_statements(&mut self) -> Result<(), Error> {
        self.conn.flush_prepared_statement_cache();
        self.columns.clear();
        Ok(())
    }

    fn shrink_buffers(&mut self) {}

    async fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn should_flush(&self) -> bool {
        false
    }
}

/// sqlx's transactions on this driver (the store's own `Tx` runs its
/// BEGIN and COMMIT itself; this is for `sqlx::Connection::begin`).
pub struct LiteTransactionManager;

impl sqlx_core::transaction::TransactionManager for LiteTransactionManager {
    type Database = Lite;

    async fn begin(conn: &mut LiteConnection, statement: Option<SqlStr>) -> Result<(), Error> {
        let sql = match (conn.depth, statement) {
            (0, Some(s)) => s.as_str().to_owned(),
            (0, None) => "BEGIN".to_owned(),
            (depth, _) => format!("SAVEPOINT sqlx_savepoint_{depth}"),
        };
        conn.execute_raw(&sql)?;
        conn.depth += 1;
        Ok(())
    }

    async fn commit(conn: &mut LiteConnection) -> Result<(), Error> {
        let sql = match conn.depth {
            0 => return Ok(()),
            1 => "COMMIT".to_owned(),
            depth => format!("RELEASE SAVEPOINT sqlx_savepoint_{}", depth - 1),
        };
        conn.execute_raw(&sql)?;
        conn.depth -= 1;
        Ok(())
    }

    async fn rollback(conn: &mut LiteConnection) -> Result<(), Error> {
        Self::start_rollback(conn);
        Ok(())
    }

    fn start_rollback(conn: &mut LiteConnection) {
        let sql = match conn.depth {
            0 => return,
            1 => "ROLLBACK".to_owned(),
            depth => format!("ROLLBACK TO SAVEPOINT sqlx_savepoint_{}", depth - 1),
        };
        let _ = conn.execute_raw(&sql);
        conn.depth -= 1;
    }

    fn get_transaction_depth(conn: &LiteConnection) -> usize {
        conn.depth
    }
}

// Types: what the repositories bind and read. Each encodes as the storage
// class sqlx's SQLite driver gives it, so both drivers read each other's rows.

macro_rules! lite_type {
    ($($ty:ty),*) => {$(
        impl Type<Lite> for $ty {
            fn type_info() -> LiteTypeInfo {
                LiteTypeInfo("ANY")
            }
            fn compatible(_ty: &LiteTypeInfo) -> bool {
                true
            }
        }
    )*};
}

lite_type!(i64, i32, i16, u32, bool, f64, f32, str, String, [u8], Vec<u8>, parley_domain::Timestamp);

sqlx_core::impl_encode_for_option!(Lite);

impl<T> Type<Lite> for sqlx::types::Json<T> {
    fn type_info() -> LiteTypeInfo {
        LiteTypeInfo("ANY")
    }
    fn compatible(_ty: &LiteTypeInfo) -> bool {
        true
    }
}

macro_rules! lite_integer {
    ($($ty:ty),*) => {$(
        impl Encode<'_, Lite> for $ty {
            fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
                buf.push(LiteValue::Integer(i64::from(*self)));
                Ok(IsNull::No)
            }
        }
        impl Decode<'_, Lite> for $ty {
            fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
                Ok(<$ty>::try_from(value.as_i64())?)
            }
        }
    )*};
}

lite_integer!(i64, i32, i16, u32);

impl Encode<'_, Lite> for bool {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Integer(i64::from(*self)));
        Ok(IsNull::No)
    }
}

impl Decode<'_, Lite> for bool {
    fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
        Ok(value.as_i64() != 0)
    }
}

impl Encode<'_, Lite> for f64 {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Real(*self));
        Ok(IsNull::No)
    }
}

impl Decode<'_, Lite> for f64 {
    fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
        Ok(value.as_f64())
    }
}

impl Encode<'_, Lite> for f32 {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Real(f64::from(*self)));
        Ok(IsNull::No)
    }
}

impl Decode<'_, Lite> for f32 {
    fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
        Ok(value.as_f64() as f32)
    }
}

impl Encode<'_, Lite> for &'_ str {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Text((*self).to_owned()));
        Ok(IsNull::No)
    }
}

impl Encode<'_, Lite> for String {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Text(self.clone()));
        Ok(IsNull::No)
    }

    fn encode(self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Text(self));
        Ok(IsNull::No)
    }
}

/// As `sqlite3_value_text`: numbers print, blobs read as UTF-8.
fn text_of(value: &LiteValue) -> Result<Cow<'_, str>, BoxDynError> {
    Ok(match value {
        LiteValue::Null => Cow::Borrowed(""),
        LiteValue::Integer(i) => Cow::Owned(i.to_string()),
        LiteValue::Real(f) => Cow::Owned(f.to_string()),
        LiteValue::Text(t) => Cow::Borrowed(t),
        LiteValue::Blob(b) => Cow::Borrowed(std::str::from_utf8(b)?),
    })
}

impl<'r> Decode<'r, Lite> for &'r str {
    fn decode(value: &'r LiteValue) -> Result<Self, BoxDynError> {
        match text_of(value)? {
            Cow::Borrowed(s) => Ok(s),
            Cow::Owned(_) => Err(format!("a {} value is not text", value.kind()).into()),
        }
    }
}

impl Decode<'_, Lite> for String {
    fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
        Ok(text_of(value)?.into_owned())
    }
}

impl Encode<'_, Lite> for &'_ [u8] {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Blob(self.to_vec()));
        Ok(IsNull::No)
    }
}

impl Encode<'_, Lite> for Vec<u8> {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Blob(self.clone()));
        Ok(IsNull::No)
    }
}

impl Decode<'_, Lite> for Vec<u8> {
    fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
        Ok(match value {
            LiteValue::Blob(b) => b.clone(),
            LiteValue::Text(t) => t.as_bytes().to_vec(),
            other => text_of(other)?.as_bytes().to_vec(),
        })
    }
}

/// JSON is TEXT, as sqlx's SQLite driver writes it.
impl<T: serde::Serialize> Encode<'_, Lite> for sqlx::types::Json<T> {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Text(serde_json::to_string(&self.0)?));
        Ok(IsNull::No)
    }
}

impl<'r, T: serde::Deserialize<'r>> Decode<'r, Lite> for sqlx::types::Json<T> {
    fn decode(value: &'r LiteValue) -> Result<Self, BoxDynError> {
        let text: &'r str = match value {
            LiteValue::Text(t) => t,
            LiteValue::Blob(b) => std::str::from_utf8(b)?,
            other => return Err(format!("a {} value is not JSON text", other.kind()).into()),
        };
        Ok(sqlx::types::Json(serde_json::from_str(text)?))
    }
}

/// Timestamps are INTEGER microseconds (as `parley_domain::time` writes them for sqlx's SQLite).
impl Encode<'_, Lite> for parley_domain::Timestamp {
    fn encode_by_ref(&self, buf: &mut Vec<LiteValue>) -> Result<IsNull, BoxDynError> {
        buf.push(LiteValue::Integer(self.unix_micros()));
        Ok(IsNull::No)
    }
}

impl Decode<'_, Lite> for parley_domain::Timestamp {
    fn decode(value: &LiteValue) -> Result<Self, BoxDynError> {
        parley_domain::Timestamp::from_unix_micros(value.as_i64()).ok_or_else(|| "timestamp out of range".into())
    }
}

/// SQLite's connections: one writer behind a fair queue (SQLite allows one
/// write transaction at a time anyway, and waiting in line is cheaper than
/// busy-waiting) and a few readers.
#[derive(Clone)]
pub struct LitePool {
    writer: Arc<tokio::sync::Mutex<LiteConnection>>,
    readers: Arc<Readers>,
    acquire_timeout: Duration,
}

impl std::fmt::Debug for LitePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LitePool").field("readers", &self.readers.size).finish()
    }
}

struct Readers {
    idle: std::sync::Mutex<Vec<LiteConnection>>,
    permits: Arc<tokio::sync::Semaphore>,
    size: u32,
}

impl LitePool {
    /// Opens the writer (which makes the file a WAL database) and `readers` readers.
    pub fn open(path: &Path, readers: u32, acquire_timeout: Duration) -> Result<Self, Error> {
        let writer = LiteConnectOptions::new(path, false).open()?;
        // The writer never waits for a lock on a tokio thread: a BEGIN that
        // finds another process writing waits in the blocking pool (`Db::begin`).
        writer.set_busy_timeout(Duration::ZERO)?;
        let size = readers.max(1);
        let idle = (0..size).map(|_| LiteConnectOptions::new(path, true).open()).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            readers: Arc::new(Readers {
                idle: std::sync::Mutex::new(idle),
                permits: Arc::new(tokio::sync::Semaphore::new(size as usize)),
                size,
            }),
            acquire_timeout,
        })
    }

    /// The writer, once the transactions before it are done.
    pub async fn write(&self) -> Result<WriteConn, Error> {
        if self.is_closed() {
            return Err(Error::PoolClosed);
        }
        let guard = tokio::time::timeout(self.acquire_timeout, self.writer.clone().lock_owned())
            .await
            .map_err(|_| Error::PoolTimedOut)?;
        Ok(WriteConn(guard))
    }

    /// A reader.
    pub async fn read(&self) -> Result<ReadConn, Error> {
        let permit = tokio::time::timeout(self.acquire_timeout, self.readers.permits.clone().acquire_owned())
            .await
            .map_err(|_| Error::PoolTimedOut)?
            .map_err(|_| Error::PoolClosed)?;
        let conn = self.readers.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = conn.ok_or(Error::PoolClosed)?;
        Ok(ReadConn { conn: Some(conn), readers: self.readers.clone(), _permit: permit })
    }

    /// Readers: how many, and how many are idle.
    pub fn reader_counts(&self) -> (u32, usize) {
        (self.readers.size, self.readers.permits.available_permits())
    }

    /// Whether the writer is idle now.
    pub fn writer_idle(&self) -> bool {
        self.writer.try_lock().is_ok()
    }

    /// Refuses new work; idle readers close now, busy ones as they are
    /// given back. Then, once the writer is free (at most the acquire
    /// timeout), copies the write-ahead log into the database file, so
    /// that the file alone is the whole database after a stop.
    pub async fn close(&self) {
        self.readers.permits.close();
        self.readers.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let Ok(mut writer) = tokio::time::timeout(self.acquire_timeout, self.writer.lock()).await else {
            tracing::warn!("the SQLite writer was still busy at close; its log is checkpointed at the next start");
            return;
        };
        if let Err(error) = writer.execute_raw("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!(%error, "could not checkpoint the SQLite log at close");
        }
    }

    pub fn is_closed(&self) -> bool {
        self.readers.permits.is_closed()
    }
}

/// A reader, given back to its pool on drop.
pub struct ReadConn {
    conn: Option<LiteConnection>,
    readers: Arc<Readers>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl std::ops::Deref for ReadConn {
    type Target = LiteConnection;
    fn deref(&self) -> &LiteConnection {
        self.conn.as_ref().expect("a reader until dropped")
    }
}

impl std::ops::DerefMut for ReadConn {
    fn deref_mut(&mut self) -> &mut LiteConnection {
        self.conn.as_mut().expect("a reader until dropped")
    }
}

impl Drop for ReadConn {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && !self.readers.permits.is_closed()
        {
            self.readers.idle.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        }
    }
}

/// The writer, held. A transaction left open (a dropped `Tx`, an error or
/// a panic mid-way) is rolled back as it is given back.
pub struct WriteConn(tokio::sync::OwnedMutexGuard<LiteConnection>);

impl std::ops::Deref for WriteConn {
    type Target = LiteConnection;
    fn deref(&self) -> &LiteConnection {
        &self.0
    }
}

impl std::ops::DerefMut for WriteConn {
    fn deref_mut(&mut self) -> &mut LiteConnection {
        &mut self.0
    }
}

impl Drop for WriteConn {
    fn drop(&mut self) {
        if !self.0.is_autocommit()
            && let Err(error) = self.0.execute_raw("ROLLBACK")
        {
            tracing::error!(%error, "could not roll back an abandoned SQLite transaction");
        }
    }
}
