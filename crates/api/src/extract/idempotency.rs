use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::idempotency::{IdempotencyKey, fingerprint};
use parley_domain::validation::{FieldError, loc};
use parley_services::ServiceResult;
use parley_store::Tx;
use parley_store::repo::idempotency::{self as repo, Claim};
use serde::Serialize;

use crate::error::ApiError;
use crate::state::AppState;

/// The `Idempotency-Key` header (if sent) and what identifies the request.
pub struct Idempotency {
    key: Option<IdempotencyKey>,
    method: String,
    path: String,
}

/// `Idempotency` for operations that cost money: a missing key is a 400,
/// checked before the body is read.
pub struct RequiredIdempotency(pub Idempotency);

impl FromRequestParts<AppState> for RequiredIdempotency {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let idem = Idempotency::from_request_parts(parts, state).await?;
        if idem.key.is_none() {
            return Err(ApiError::bad_request("The Idempotency-Key header is required for this request"));
        }
        Ok(RequiredIdempotency(idem))
    }
}

impl FromRequestParts<AppState> for Idempotency {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        let key = match parts.headers.get("idempotency-key") {
            None => None,
            Some(v) => Some(v.to_str().ok().and_then(IdempotencyKey::parse).ok_or_else(|| {
                ApiError::Validation(vec![FieldError::new(
                    loc(&["header", "Idempotency-Key"]),
                    "value_error.idempotency_key",
                    "must be 1 to 255 printable ASCII characters",
                )])
            })?),
        };
        Ok(Idempotency { key, method: parts.method.to_string(), path: parts.uri.path().to_owned() })
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// Runs a write in one transaction and answers `status` with its JSON.
///
/// With an `Idempotency-Key`, the key is claimed first (a concurrent twin
/// gets a 409 with `Retry-After`), the stored response is written in the
/// same transaction as the change, and a later request with the same key
/// and body gets that response replayed byte for byte with
/// `Idempotent-Replayed: true`. A failed write stores nothing, so a retry
/// runs again; the same key with a different body is a 409.
pub async fn write<T, F>(
    state: &AppState,
    scope: Scope,
    idem: Idempotency,
    canonical_body: &[u8],
    status: StatusCode,
    run: F,
) -> Result<Response, ApiError>
where
    T: Serialize + Send + 'static,
    F: for<'t> FnOnce(&'t mut Tx) -> BoxFuture<'t, ServiceResult<T>> + Send + 'static,
{
    write_answer(state, scope, idem, canonical_body, move |tx| {
        Box::pin(async move {
            let value = run(tx).await?;
            let body = serde_json::to_string(&value)
                .map_err(|e| parley_store::StoreError::Corrupt(format!("could not serialise a response: {e}")))?;
            Ok((status, body))
        })
    })
    .await
}

/// [`write`] for a write whose status depends on its outcome: `run` answers
/// the status and the JSON body, both kept for replays (a call whose
/// provider failed answers 502 on every replay, as the first time).
pub async fn write_answer<F>(
    state: &AppState,
    scope: Scope,
    idem: Idempotency,
    canonical_body: &[u8],
    run: F,
) -> Result<Response, ApiError>
where
    F: for<'t> FnOnce(&'t mut Tx) -> BoxFuture<'t, ServiceResult<(StatusCode, String)>>,
{
    let db = &state.services.db;
    let Some(key) = idem.key else {
        let mut tx = db.begin().await?;
        let (status, body) = run(&mut tx).await?;
        tx.commit().await?;
        state.services.wake_outbox();
        return Ok(json_response(status, body.into_bytes()));
    };
    let key = key.as_str();
    let fp = fingerprint(&idem.method, &idem.path, canonical_body);
    let claim = {
        let mut tx = db.begin().await?;
        let claim = repo::claim(&mut tx, scope, key, &fp, state.config.idempotency_lease_s).await?;
        tx.commit().await?;
        claim
    };
    match claim {
        Claim::Acquired => {}
        Claim::Replay { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let mut r = json_response(status, body.into_bytes());
            r.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            return Ok(r);
        }
        Claim::FingerprintMismatch => {
            return Err(ApiError::conflict(
                "This Idempotency-Key was already used with a different request; use a new key",
            ));
        }
        Claim::InProgress => return Err(ApiError::InProgress),
    }
    let outcome: Result<(StatusCode, Vec<u8>), ApiError> = async {
        let mut tx = db.begin().await?;
        let (status, body) = run(&mut tx).await?;
        repo::complete(&mut tx, scope, key, status.as_u16(), &body).await?;
        tx.commit().await?;
        state.services.wake_outbox();
        Ok((status, body.into_bytes()))
    }
    .await;
    match outcome {
        Ok((status, body)) => Ok(json_response(status, body)),
        Err(e) => {
            let released = async {
                let mut tx = db.begin().await?;
                repo::release(&mut tx, scope, key).await?;
                tx.commit().await
            }
            .await;
            if let Err(re) = released {
                // The lease expires on its own; until then retries get a 409.
                tracing::warn!(error = %re, "could not release an idempotency key");
            }
            Err(e)
        }
    }
}

/// Runs a write that takes no idempotency key (PATCH, DELETE) in one transaction.
pub async fn transaction<T, F>(state: &AppState, run: F) -> Result<T, ApiError>
where
    F: for<'t> FnOnce(&'t mut Tx) -> BoxFuture<'t, ServiceResult<T>>,
{
    let mut tx = state.services.db.begin().await?;
    let value = run(&mut tx).await?;
    tx.commit().await?;
    // The write may have queued webhook deliveries.
    state.services.wake_outbox();
    Ok(value)
}
