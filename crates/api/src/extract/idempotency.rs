use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parley_domain::Scope;
use parley_domain::idempotency::{IdempotencyKey, fingerprint};
use parley_domain::validation::{FieldError, loc};
use parley_services::{Answer, Answered, Idempotent, ServiceResult, Work};
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

impl Idempotency {
    /// The key (if sent) with the fingerprint of this request and `canonical_body`.
    pub fn for_body(self, canonical_body: &[u8]) -> Option<Idempotent> {
        let fingerprint = fingerprint(&self.method, &self.path, canonical_body);
        self.key.map(|key| Idempotent { key, fingerprint })
    }
}

/// The HTTP form of a service's answer: its status and JSON body, marked
/// `Idempotent-Replayed: true` when it replays an earlier request's.
pub fn answer_response(answered: Answered) -> Response {
    let status = StatusCode::from_u16(answered.answer.status).unwrap_or(StatusCode::OK);
    let mut r = (status, answered.answer.body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if answered.replayed {
        r.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    r
}

/// Runs a write in one unit of work ([`parley_services::Services::write`])
/// and answers `status` with its JSON; with an `Idempotency-Key`, a replay
/// answers the first response byte for byte.
pub async fn write<T: Serialize>(
    state: &AppState,
    scope: Scope,
    idem: Idempotency,
    canonical_body: &[u8],
    status: StatusCode,
    run: impl AsyncFnOnce(&mut Work) -> ServiceResult<T>,
) -> Result<Response, ApiError> {
    let answered = state
        .services
        .write(scope, idem.for_body(canonical_body), async move |work| Answer::json(status.as_u16(), &run(work).await?))
        .await?;
    Ok(answer_response(answered))
}
