use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    /// A unique index refused the write.
    #[error("unique constraint violated")]
    UniqueViolation,
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    #[error("could not prepare the database directory: {0}")]
    Io(#[from] std::io::Error),
    /// The operation does not exist for this backend; the text says what to do.
    #[error("{0}")]
    Unsupported(&'static str),
    /// A stored value no longer parses: a bug or a manual edit.
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e.as_database_error() {
            Some(db) if db.is_unique_violation() => StoreError::UniqueViolation,
            _ => StoreError::Database(e),
        }
    }
}

impl StoreError {
    /// Whether the database could not be reached or is going away (as
    /// opposed to refusing a statement): the request may succeed later,
    /// elsewhere or after a restart.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Database(e) => unreachable_database(e),
            _ => false,
        }
    }

    /// Whether the write lost a race to a concurrent transaction: a unique
    /// key another one wrote first (committed while this one waited on
    /// it), a deadlock, or a serialization failure (SQLSTATE 40P01, 40001).
    /// Run again in a new transaction, the same work sees the winner's rows.
    pub fn lost_a_race(&self) -> bool {
        match self {
            StoreError::UniqueViolation => true,
            StoreError::Database(sqlx::Error::Database(db)) => {
                db.code().is_some_and(|c| matches!(c.as_ref(), "40P01" | "40001"))
            }
            _ => false,
        }
    }
}

/// Connection failures, a pool that could give no connection in time or
/// is closed, and PostgreSQL's connection exceptions (SQLSTATE class 08)
/// and shutdowns (57P01 admin, 57P02 crash, 57P03 cannot connect now).
pub(crate) fn unreachable_database(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|c| c.starts_with("08") || matches!(c.as_ref(), "57P01" | "57P02" | "57P03"))
        }
        _ => false,
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
