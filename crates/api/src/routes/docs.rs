//! The OpenAPI document and a readable page rendered from it.

use std::sync::Arc;

use axum::Extension;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::AppState;

/// The serialised OpenAPI document, built once at start-up.
#[derive(Clone)]
pub struct OpenApiJson(pub Arc<str>);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(openapi_json)).routes(routes!(docs_page))
}

/// This document (OpenAPI 3.1).
#[utoipa::path(get, path = "/openapi.json", tag = "Operations", responses((status = 200, description = "The OpenAPI document", content_type = "application/json")))]
async fn openapi_json(Extension(doc): Extension<OpenApiJson>) -> Response {
    let mut r = doc.0.to_string().into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The API reference, rendered in the browser from `/openapi.json`.
#[utoipa::path(get, path = "/docs", tag = "Operations", responses((status = 200, description = "An HTML page", content_type = "text/html")))]
async fn docs_page() -> Html<&'static str> {
    Html(include_str!("docs.html"))
}
