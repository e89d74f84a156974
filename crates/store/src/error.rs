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

pub type StoreResult<T> = Result<T, StoreError>;
