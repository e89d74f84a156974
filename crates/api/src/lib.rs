//! Parley's HTTP API.
//!
//! Each resource group is a module under `routes` exposing
//! `fn router() -> OpenApiRouter<AppState>`; every route is registered
//! through `utoipa_axum::routes!`, so a route cannot exist without its
//! OpenAPI description. Extractors in `extract` parse requests into typed
//! values (or the 422 of docs/api.md), and `ApiError` is the one error type.

mod cache;
mod error;
pub mod extract;
pub mod listener;
mod middleware;
mod openapi;
pub mod ratelimit;
mod routes;
mod state;

use axum::Router;
pub use error::ApiError;
pub use middleware::RequestId;
pub use state::{ApiConfig, AppState, RateLimitConfig};

/// The OpenAPI document alone: what `/openapi.json` serves with these engines.
pub fn openapi(engines: &parley_services::agents::EngineNames) -> utoipa::openapi::OpenApi {
    openapi::with_engines(openapi::finish(routes::router().split_for_parts().1), engines)
}

/// `GET /metrics` alone and without a token, for a private address
/// (`metrics.listen`).
pub fn metrics_router(services: parley_services::Services) -> Router {
    routes::health::metrics_only(services)
}

/// Builds the whole HTTP application.
pub fn app(state: AppState) -> Router {
    app_with(state, |_| Router::new())
}

/// [`app`] with the routes `mount` makes from the OpenAPI document (the
/// MCP endpoint's tools come from it), behind the same request context,
/// panic guard and admission layer (identity and rate limits): the
/// admission layer leaves the caller's
/// `parley_services::tenancy::auth::Principal` in the request's extensions.
///
/// The router and its document are built once: building them runs every
/// route's and schema's generated code and allocates the whole document
/// (about 20 MB at its peak), which a server start pays only here.
pub fn app_with(state: AppState, mount: impl FnOnce(&serde_json::Value) -> Router) -> Router {
    let (api, doc) = routes::router().split_for_parts();
    let engines = parley_services::agents::EngineNames::of(state.services.config());
    let doc = openapi::with_engines(openapi::finish(doc), &engines);
    let json = serde_json::to_string(&doc).expect("the OpenAPI document serialises");
    drop(doc);
    let value: serde_json::Value = serde_json::from_str(&json).expect("the OpenAPI document reads back");
    let mounted = mount(&value);
    drop(value);
    api.merge(mounted.with_state(()))
        .layer(axum::Extension(routes::docs::OpenApiJson(json.into())))
        .fallback(middleware::not_found)
        .method_not_allowed_fallback(middleware::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), middleware::admit))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(middleware::panic_response))
        .layer(axum::middleware::from_fn_with_state(state.clone(), middleware::request_context))
        .with_state(state)
}
