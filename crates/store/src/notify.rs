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
    /// The next payload. After a lost connection the listener reconnects
    /// (and resubscribes) on its own; what was sent meanwhile is lost.
    pub async fn recv(&mut self) -> StoreResult<String> {
        Ok(self.0.recv().await?.payload().to_owned())
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
