use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use parley_services::auth::{self, Principal};

use crate::error::ApiError;
use crate::state::AppState;

/// The authenticated caller. Put it first among a handler's arguments, so
/// that a request without valid credentials gets its 401 before anything
/// else is looked at.
#[derive(Debug, Clone)]
pub struct Auth(pub Principal);

impl Auth {
    pub fn scope(&self) -> parley_domain::Scope {
        self.0.scope
    }
}

/// What a request presents: an API key (in `X-API-Key`, or as
/// `Authorization: Bearer parley_…`, which MCP clients send) or a dashboard
/// access token (`Authorization: Bearer <JWT>`).
enum Presented {
    ApiKey(String),
    AccessToken(String),
}

fn presented(headers: &HeaderMap) -> Result<Option<Presented>, ApiError> {
    Ok(presented_key(headers)?.map(|(raw, via_bearer)| {
        if via_bearer && !raw.starts_with("parley_") { Presented::AccessToken(raw) } else { Presented::ApiKey(raw) }
    }))
}

fn presented_key(headers: &HeaderMap) -> Result<Option<(String, bool)>, ApiError> {
    let api_key = headers.get("x-api-key");
    let bearer = headers.get(header::AUTHORIZATION);
    if api_key.is_some() && bearer.is_some() {
        return Err(ApiError::bad_request("Send either X-API-Key or Authorization, not both"));
    }
    if let Some(v) = api_key {
        return Ok(Some((v.to_str().unwrap_or_default().trim().to_owned(), false)));
    }
    if let Some(v) = bearer {
        let v = v.to_str().unwrap_or_default().trim();
        let token = v
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim().to_owned())
            .unwrap_or_default();
        return Ok(Some((token, true)));
    }
    Ok(None)
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(presented) = presented(&parts.headers)? else {
            return Err(ApiError::unauthorized("Missing API key"));
        };
        let outcome = match &presented {
            Presented::ApiKey(raw) => auth::authenticate_api_key(&state.services.db, raw).await?.ok(),
            Presented::AccessToken(token) => auth::authenticate_bearer(&state.services, token).await?,
        };
        if let Some(principal) = outcome {
            tracing::Span::current().record("workspace_id", principal.scope.workspace_id);
            return Ok(Auth(principal));
        }
        count_failure(state, &ClientIp::of(parts))?;
        Err(ApiError::unauthorized(match presented {
            Presented::ApiKey(_) => "Invalid or revoked API key",
            Presented::AccessToken(_) => "Invalid or expired access token",
        }))
    }
}

/// Counts a failed authentication against the caller's IP; past the limit
/// the answer is a 429 instead.
pub(crate) fn count_failure(state: &AppState, ip: &ClientIp) -> Result<(), ApiError> {
    let d = state.auth_failures.check(&ip.0);
    if d.allowed { Ok(()) } else { Err(ApiError::RateLimited { retry_after_s: d.retry_after_s }) }
}

/// The peer's IP address (empty if unknown), for per-IP limits.
pub struct ClientIp(pub String);

impl ClientIp {
    fn of(parts: &Parts) -> ClientIp {
        ClientIp(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip().to_string())
                .unwrap_or_default(),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientIp::of(parts))
    }
}
