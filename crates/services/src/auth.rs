//! Who is calling: API keys today, user sessions later.

use parley_domain::api_key::{ApiKey, hash_key};
use parley_domain::{Mode, Scope, Timestamp};
use parley_store::Db;
use parley_store::repo::api_keys;
use parley_store::repo::versions::Snapshot;

use crate::ServiceResult;

/// An authenticated caller and the scope it may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub scope: Scope,
    pub credential: Credential,
    /// The scope's change counters when the request was authenticated; a
    /// cached list page built at these counters is still current.
    pub versions: Snapshot,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    ApiKey { key_id: i64, workspace_locked: bool },
}

/// Why a presented key was refused. Both give the same 401 text, so a caller
/// cannot tell a made-up key from a revoked one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRejection {
    Malformed,
    Unknown,
    Revoked,
    Expired,
}

/// `last_used_at` is written at most this often per key.
const LAST_USED_INTERVAL_S: i64 = 60;

/// Checks a presented API key against the database, on every request: no
/// cache, so a revocation takes effect on the very next request everywhere.
pub async fn authenticate_api_key(db: &Db, raw: &str) -> ServiceResult<Result<Principal, KeyRejection>> {
    // The checksum rejects typos and guesses without a database round trip.
    let Some(key) = ApiKey::parse(raw) else { return Ok(Err(KeyRejection::Malformed)) };
    let mut c = db.read().await?;
    let Some(found) = api_keys::find_for_auth(&mut c, &hash_key(key.expose())).await? else {
        return Ok(Err(KeyRejection::Unknown));
    };
    drop(c);
    let now = Timestamp::now();
    if found.revoked_at.is_some() {
        return Ok(Err(KeyRejection::Revoked));
    }
    if found.expires_at.is_some_and(|t| t <= now) {
        return Ok(Err(KeyRejection::Expired));
    }
    if found.livemode != key.mode().is_live() {
        // The stored mode and the prefix always agree; anything else is tampering.
        return Ok(Err(KeyRejection::Unknown));
    }
    if found.last_used_at.is_none_or(|t| t < now.plus_seconds(-LAST_USED_INTERVAL_S)) {
        // Off the request path: the write must not slow or fail the request.
        let db = db.clone();
        tokio::spawn(async move {
            let result = async {
                let mut tx = db.begin().await?;
                api_keys::touch_last_used(&mut tx, found.id, now, LAST_USED_INTERVAL_S).await?;
                tx.commit().await
            }
            .await;
            if let Err(e) = result {
                tracing::warn!(error = %e, key_id = found.id, "could not record API key use");
            }
        });
    }
    Ok(Ok(Principal {
        scope: Scope::new(found.workspace_id, Mode::from_livemode(found.livemode)),
        credential: Credential::ApiKey { key_id: found.id, workspace_locked: found.workspace_locked },
        versions: found.versions,
    }))
}
