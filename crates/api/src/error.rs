//! The one error type of the HTTP layer, rendered in the shapes of docs/api.md ("Errors"):
//! `{"detail": "..."}` for simple errors and `{"detail": [{loc, msg, type}]}`
//! for 422s. Internal errors are logged with their cause and answered with
//! a generic 500 (the request id is added by the request-context layer).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parley_domain::validation::FieldError;
use parley_services::ServiceError;
use serde::Serialize;
use utoipa::ToSchema;

/// A simple error: 400, 401, 402, 403, 404, 409, 413, 429, 502, 503.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Human-readable explanation.
    #[schema(example = "Agent 42 not found")]
    pub detail: String,
}

/// A validation error (422): every faulty input at once.
#[derive(Debug, Serialize, ToSchema)]
pub struct ValidationErrorBody {
    pub detail: Vec<FieldError>,
}

/// A 500: the cause is logged, never returned.
#[derive(Debug, Serialize, ToSchema)]
pub struct InternalErrorBody {
    #[schema(example = "Internal server error")]
    pub detail: String,
    /// Quote this when reporting the problem; the server log has the cause.
    pub request_id: String,
}

#[derive(Debug)]
pub enum ApiError {
    Service(ServiceError),
    Status(StatusCode, String),
    Validation(Vec<FieldError>),
    /// 409 for a request whose idempotency key is still being processed.
    InProgress,
    RateLimited {
        retry_after_s: u64,
    },
    Internal(String),
}

impl ApiError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        ApiError::Status(StatusCode::BAD_REQUEST, detail.into())
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        ApiError::Status(StatusCode::UNAUTHORIZED, detail.into())
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        ApiError::Status(StatusCode::CONFLICT, detail.into())
    }

    pub fn payload_too_large(limit: usize) -> Self {
        ApiError::Status(StatusCode::PAYLOAD_TOO_LARGE, format!("Request body too large; the limit is {limit} bytes"))
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError::Service(e)
    }
}

impl From<Vec<FieldError>> for ApiError {
    fn from(errors: Vec<FieldError>) -> Self {
        ApiError::Validation(errors)
    }
}

pub(crate) fn detail(status: StatusCode, detail: impl Into<String>) -> Response {
    (status, axum::Json(ErrorBody { detail: detail.into() })).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Service(e) => {
                let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                match e {
                    ServiceError::NotFound { .. } => detail(status, e.to_string()),
                    ServiceError::Validation(errors) => ApiError::Validation(errors).into_response(),
                    ServiceError::Conflict(d)
                    | ServiceError::Unauthorized(d)
                    | ServiceError::Forbidden(d)
                    | ServiceError::BadRequest(d)
                    | ServiceError::PaymentRequired(d)
                    | ServiceError::BadGateway(d)
                    | ServiceError::TooManyRequests(d) => detail(status, d),
                    ServiceError::KeyInUse => ApiError::InProgress.into_response(),
                    ServiceError::Unavailable(d) => {
                        // What cannot serve now (the database, file storage) is usually back within seconds.
                        let mut r = detail(status, d);
                        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                        r
                    }
                    ServiceError::Store(e) => ApiError::Internal(e.to_string()).into_response(),
                    ServiceError::Internal(e) => ApiError::Internal(format!("{e:#}")).into_response(),
                }
            }
            ApiError::Status(status, d) => detail(status, d),
            ApiError::Validation(errors) => {
                (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(ValidationErrorBody { detail: errors })).into_response()
            }
            ApiError::InProgress => {
                let mut r = detail(
                    StatusCode::CONFLICT,
                    "A request with this Idempotency-Key is still in progress; retry shortly",
                );
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                r
            }
            ApiError::RateLimited { retry_after_s } => {
                let mut r =
                    detail(StatusCode::TOO_MANY_REQUESTS, format!("Rate limit exceeded, retry in {retry_after_s} s"));
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
                r
            }
            ApiError::Internal(cause) => {
                tracing::error!(error = %cause, "internal error");
                // The request-context layer rewrites every 500 body to include the request id.
                detail(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error")
            }
        }
    }
}
