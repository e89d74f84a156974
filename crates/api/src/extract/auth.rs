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

/// The credential a request presents. `Authorization: Bearer parley_…` is an
/// API key too (what MCP clients send).
fn presented_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let api_key = headers.get("x-api-key");
    let bearer = headers.get(header::AUTHORIZATION);
    if api_key.is_some() && bearer.is_some() {
        return Err(ApiError::bad_request("Send either X-API-Key or Authorization, not both"));
    }
    if let Some(v) = api_key {
        return Ok(Some(v.to_str().unwrap_or_default().trim().to_owned()));
    }
    if let Some(v) = bearer {
        let v = v.to_str().unwrap_or_default().trim();
        let token = v
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim().to_owned())
            .unwrap_or_default();
        return Ok(Some(token));
    }
    Ok(None)
}

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(raw) = presented_key(&parts.headers)? else {
            return Err(ApiError::unauthorized("Missing API key"));
        };
        match auth::authenticate_api_key(&state.services.db, &raw).await? {
            Ok(principal) => {
                tracing::Span::current().record("workspace_id", principal.scope.workspace_id);
                Ok(Auth(principal))
            }
            Err(reason) => {
                let ip = parts
                    .extensions
                    .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                    .map(|c| c.0.ip().to_string())
                    .unwrap_or_default();
                tracing::info!(?reason, "API key refused");
                let d = state.auth_failures.check(&ip);
                if !d.allowed {
                    return Err(ApiError::RateLimited { retry_after_s: d.retry_after_s });
                }
                Err(ApiError::unauthorized("Invalid or revoked API key"))
            }
        }
    }
}
