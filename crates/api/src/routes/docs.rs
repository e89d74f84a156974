//! The OpenAPI document, and the reference rendered from it by Swagger UI
//! (vendored: its files are embedded in the binary, nothing is fetched).

use std::sync::{Arc, LazyLock};

use axum::Extension;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::PathText;
use crate::state::AppState;

/// The serialised OpenAPI document, built once at start-up.
#[derive(Clone)]
pub struct OpenApiJson(pub Arc<str>);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(openapi_json)).routes(routes!(docs_page)).routes(routes!(docs_asset))
}

/// This document (OpenAPI 3.1).
#[utoipa::path(get, path = "/openapi.json", tag = "Operations", responses((status = 200, description = "The OpenAPI document", content_type = "application/json")))]
async fn openapi_json(Extension(doc): Extension<OpenApiJson>) -> Response {
    let mut r = doc.0.to_string().into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// Swagger UI's settings: the document above, request durations, the
/// try-it console and a filter. Credentials are not kept across reloads:
/// Swagger UI would keep a pasted key in localStorage, in plain text.
static CONFIG: LazyLock<Arc<utoipa_swagger_ui::Config<'static>>> = LazyLock::new(|| {
    Arc::new(
        utoipa_swagger_ui::Config::new(["/openapi.json"])
            .try_it_out_enabled(true)
            .display_request_duration(true)
            .filter(true)
            .persist_authorization(false)
            .default_models_expand_depth(1)
            .doc_expansion("list"),
    )
});

/// One of Swagger UI's files, with its type; `None` if there is no such file.
fn swagger_file(name: &str) -> Result<Option<(String, Vec<u8>)>, ApiError> {
    let file = utoipa_swagger_ui::serve(name, CONFIG.clone())
        .map_err(|e| ApiError::Internal(format!("Swagger UI file {name}: {e}")))?;
    Ok(file.map(|f| (f.content_type, f.bytes.into_owned())))
}

fn file_response(content_type: &str, bytes: Vec<u8>) -> Response {
    let mut r = bytes.into_response();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    let h = r.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // The reference shares the dashboard's origin (and its session cookie's
    // reach): the same walls, except the inline styles Swagger UI's React
    // components set.
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(DOCS_CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    r
}

/// The reference page's Content-Security-Policy: its own scripts only.
pub const DOCS_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                            img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'self'; \
                            form-action 'self'; frame-ancestors 'none'";

/// The API reference: descriptions, request and response schemas with
/// examples, and a console to try requests (Swagger UI).
#[utoipa::path(get, path = "/docs", tag = "Operations", responses((status = 200, description = "An HTML page", content_type = "text/html")))]
async fn docs_page() -> Result<Response, ApiError> {
    let (content_type, page) =
        swagger_file("index.html")?.ok_or_else(|| ApiError::Internal("Swagger UI has no index.html".into()))?;
    // The page names its files relatively; they live under /docs/.
    let page = String::from_utf8_lossy(&page).replacen("<head>", "<head>\n    <base href=\"/docs/\">", 1);
    Ok(file_response(&content_type, page.into_bytes()))
}

/// The guides in the repository's `docs/`, served as written (the MCP
/// metadata's `resource_documentation` points at `mcp.md`).
const GUIDES: &[(&str, &str)] = &[
    ("api.md", include_str!("../../../../docs/api.md")),
    ("channels.md", include_str!("../../../../docs/channels.md")),
    ("configuration.md", include_str!("../../../../docs/configuration.md")),
    ("mcp.md", include_str!("../../../../docs/mcp.md")),
    ("voice.md", include_str!("../../../../docs/voice.md")),
    ("webhooks.md", include_str!("../../../../docs/webhooks.md")),
];

/// A file of the reference page (scripts, styles, images), or one of the guides (`mcp.md`).
#[utoipa::path(
    get, path = "/docs/{file}", tag = "Operations",
    params(("file" = String, Path, description = "e.g. `swagger-ui.css`, or a guide: `mcp.md`, `webhooks.md`, `api.md`")),
    responses(
        (status = 200, description = "The file: a guide as `text/markdown`, Swagger UI's files as their types", content(
            (String = "text/markdown"), (String = "text/css"), (String = "application/javascript"),
            (String = "text/html"), (String = "image/png"), (String = "application/octet-stream")
        )),
        (status = 404, body = ErrorBody, description = "No such file"),
    )
)]
async fn docs_asset(PathText(file): PathText) -> Result<Response, ApiError> {
    if let Some((_, text)) = GUIDES.iter().find(|(name, _)| *name == file) {
        return Ok(file_response("text/markdown; charset=utf-8", text.as_bytes().to_vec()));
    }
    match swagger_file(&file)? {
        Some((content_type, bytes)) => Ok(file_response(&content_type, bytes)),
        None => Err(ApiError::Status(StatusCode::NOT_FOUND, format!("File {file} not found"))),
    }
}
