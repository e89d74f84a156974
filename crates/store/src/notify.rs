//! PostgreSQL's LISTEN/NOTIFY, for signals between instances. With SQLite
//! there is one instance: nothing is sent, and there is nothing to hear.

use sqlx::postgres::PgListener;

use crate::{Db, Pool, StoreResult};

/// Sends `payload` to every instance listening on `channel` (PostgreSQL;
/// nothing on SQLite). Delivery is best effort: a listener that is
/// reconnecting misses it.
pub async fn notify(db: &Db, channel: &str, payload: &str) -> StoreResult<()> {
    if let Pool::Postgres(pool) = db.pool() {
        sqlx::query("SELECT pg_notify($1, $2)").bind(channel).bind(payload).execute(pool).await?;
    }
    Ok(())
}

/// A connection listening on one channel.
pub struct Listener(PgListener);

impl Listener {
    /// The next payload, or `None` when the connection was lost: the next
    /// call reconnects (and resubscribes), and what was sent meanwhile is
    /// lost, so the caller catches up another way.
    pub async fn recv(&mut self) -> StoreResult<Option<String>> {
        Ok(self.0.try_recv().await?.map(|n| n.payload().to_owned()))
    }
}

/// Listens on `channel`; `None` on SQLite.
pub async fn listen(db: &Db, channel: &str) -> StoreResult<Option<Listener>> {
    match db.pool() {
        Pool::Postgres(pool) => {
            let mut listener = PgListener::connect_with(pool).await?;
            listener.listen(channel).await?;
            Ok(Some(Listener(listener)))
        }
        Pool::Sqlite { .. } => Ok(None),
    }
}
