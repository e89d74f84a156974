use axum::extract::{FromRequest, Request};
use axum::http::header;
use parley_domain::validation::{FieldError, Parsed};
use serde_json::Value;

use crate::error::ApiError;
use crate::middleware::read_body;
use crate::state::AppState;

/// A request body type: how to parse it from JSON (all faults at once).
pub trait FromBody: Sized {
    fn from_body(body: Value, state: &AppState) -> Parsed<Self>;
}

/// A parsed JSON body, with the canonical form of what was sent (sorted
/// keys, no whitespace) for idempotency fingerprints.
pub struct JsonBody<T> {
    pub value: T,
    pub canonical: Vec<u8>,
}

impl<T: FromBody> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let limit = state.config.max_body_bytes;
        let declared =
            req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(ApiError::payload_too_large(limit));
        }
        let bytes = read_body(req.into_body(), limit).await?;
        // An empty body is an empty object, so that "field required" names
        // what is missing instead of a bare JSON error.
        let value: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Object(Default::default())
        } else {
            serde_json::from_slice(&bytes).map_err(|_| ApiError::Validation(vec![FieldError::invalid_json()]))?
        };
        let canonical = parley_domain::idempotency::canonical_json(&value);
        let value = T::from_body(value, state)?;
        Ok(JsonBody { value, canonical })
    }
}
