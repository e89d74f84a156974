//! What the services tests share.

use std::time::Duration;

use parley_store::Db;

/// Whether a write transaction can be begun on `db` now, waiting up to 3
/// s: false on SQLite while someone else holds its only writer (a caller
/// in a transaction). On PostgreSQL it always can.
pub async fn writable(db: &Db) -> bool {
    match tokio::time::timeout(Duration::from_secs(3), db.begin()).await {
        Ok(Ok(tx)) => {
            drop(tx);
            true
        }
        _ => false,
    }
}
