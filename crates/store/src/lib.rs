//! Storage for Parley: one `Db` over SQLite or PostgreSQL, and repositories
//! that take a [`Scope`](parley_domain::Scope) so no query can forget whose
//! data it touches.
//!
//! Queries are written once with `sqlx::query`, in SQL that both dialects
//! accept (`$N` placeholders on both), and run through
//! [`dispatch!`] (or its shorthands `execute!`, `fetch_one!`, …), which
//! expands the body once per backend. Only where the dialects really differ
//! (JSON containment, row locking, full-text search) does a repository
//! branch on [`Handle`]. PostgreSQL runs them with sqlx's driver; SQLite
//! with [`sqlite`], a sqlx driver over rusqlite that steps each statement
//! on the calling task instead of a worker thread. [`testing`] makes fresh databases of both kinds
//! for tests, and `on_both_backends!` runs a test story on each.

mod db;
mod error;
pub mod files;
pub mod notify;
pub mod repo;
pub mod sqlite;
pub mod testing;

pub use db::{
    Absences, Absent, AsHandle, Backend, Conn, Db, DbOptions, EventBell, Handle, JobBell, Pool, RouteMemo,
    SubscriberMemo, Taker, Tx, Written, default_sqlite_readers,
};
pub use error::{StoreError, StoreResult};

/// Runs `$q.execute(conn)` on either backend; yields the affected row count.
#[macro_export]
macro_rules! execute {
    ($c:expr, $q:expr) => {
        match $crate::AsHandle::handle($c) {
            $crate::Handle::Sqlite(conn) => ($q).execute(conn).await.map(|r| r.rows_affected()),
            $crate::Handle::Postgres(conn) => ($q).execute(conn).await.map(|r| r.rows_affected()),
        }
    };
}

/// Runs `$q.fetch_one(conn)` on either backend.
#[macro_export]
macro_rules! fetch_one {
    ($c:expr, $q:expr) => {
        $crate::dispatch!($c, conn => ($q).fetch_one(conn).await)
    };
}

/// Runs `$q.fetch_optional(conn)` on either backend.
#[macro_export]
macro_rules! fetch_optional {
    ($c:expr, $q:expr) => {
        $crate::dispatch!($c, conn => ($q).fetch_optional(conn).await)
    };
}

/// Runs `$q.fetch_all(conn)` on either backend.
#[macro_export]
macro_rules! fetch_all {
    ($c:expr, $q:expr) => {
        $crate::dispatch!($c, conn => ($q).fetch_all(conn).await)
    };
}

/// Runs `$body` with `$conn` bound to the backend's connection
/// (`&mut LiteConnection` or `&mut PgConnection`).
#[macro_export]
macro_rules! dispatch {
    ($c:expr, $conn:ident => $body:expr) => {
        match $crate::AsHandle::handle($c) {
            $crate::Handle::Sqlite($conn) => $body,
            $crate::Handle::Postgres($conn) => $body,
        }
    };
}
