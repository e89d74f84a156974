//! `GET /files/{key}`: downloads through signed, expiring links (the URLs
//! `Storage::signed_url` hands out). No credential: the signature is the
//! permission. Supports one HTTP byte range.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parley_domain::validation::QueryReader;
use parley_services::files::StorageError;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{FromQuery, Params, PathText};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(download))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Signed {
    /// The file's content type, as signed.
    #[serde(rename = "type")]
    #[param(max_length = 255)]
    kind: Option<String>,
    /// Unix seconds after which the link stops working.
    expires: Option<i64>,
    #[param(max_length = 255)]
    signature: Option<String>,
}

impl FromQuery for Signed {
    fn from_query(q: &mut QueryReader) -> Self {
        Signed {
            kind: q.string("type", 0, 255),
            expires: q.integer("expires", i64::MIN, i64::MAX),
            signature: q.string("signature", 0, 255),
        }
    }
}

/// Types a browser may show in place; anything else downloads, so a file
/// someone uploaded can never run as a page of this origin.
fn inline(content_type: &str) -> bool {
    ["image/", "audio/", "video/"].iter().any(|p| content_type.starts_with(p))
        || matches!(content_type, "application/pdf" | "text/plain")
}

/// `Range: bytes=a-b` (one range) against a file of `size` bytes.
fn parse_range(headers: &HeaderMap, size: u64) -> Result<Option<std::ops::Range<u64>>, ()> {
    let Some(v) = headers.get(header::RANGE).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    let Some(spec) = v.trim().strip_prefix("bytes=") else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None); // several ranges: serve the whole file
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    let range = match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().map_err(|_| ())?;
            size.saturating_sub(n)..size
        }
        (start, "") => start.parse().map_err(|_| ())?..size,
        (start, end) => {
            let (start, end): (u64, u64) = (start.parse().map_err(|_| ())?, end.parse().map_err(|_| ())?);
            start..(end.saturating_add(1)).min(size)
        }
    };
    if range.start >= size || range.start >= range.end {
        return Err(());
    }
    Ok(Some(range))
}

/// Download a file through a signed link.
///
/// Links come from the API (message attachments, call recordings) and
/// expire (default 1 h, `storage.url_ttl_seconds`). `Range: bytes=…` gives a
/// 206 with that part.
#[utoipa::path(
    get, path = "/files/{key}", tag = "Files",
    params(("key" = String, Path, description = "The file's key, as in the link"), Signed),
    responses(
        (status = 200, description = "The file", content_type = "application/octet-stream"),
        (status = 206, description = "The requested range"),
        (status = 403, body = ErrorBody, description = "Missing or wrong signature, or the link has expired"),
        (status = 404, body = ErrorBody, description = "No such file"),
        (status = 416, body = ErrorBody, description = "The range is outside the file"),
        (status = 422, body = ValidationErrorBody, description = "A malformed key or query parameter"),
        (status = 503, body = ErrorBody, description = "Storage is unavailable"),
    )
)]
async fn download(
    State(s): State<AppState>,
    PathText(key): PathText,
    Params(signed): Params<Signed>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let storage = s.services.files();
    let forbidden = |why: &str| ApiError::Status(StatusCode::FORBIDDEN, format!("This link is not valid: {why}"));
    let (Some(kind), Some(expires), Some(signature)) = (signed.kind, signed.expires, signed.signature) else {
        return Err(forbidden("it is not signed"));
    };
    storage.verify(&key, &kind, expires, &signature).map_err(forbidden)?;
    let unavailable = |e: StorageError| match e {
        StorageError::NotFound => ApiError::Status(StatusCode::NOT_FOUND, "File not found".into()),
        StorageError::Unavailable(why) => {
            tracing::warn!(error = %why, "a download failed");
            ApiError::Status(StatusCode::SERVICE_UNAVAILABLE, "Storage is unavailable; try again later".into())
        }
    };
    let size = storage.size(&key).await.map_err(unavailable)?;
    let range = parse_range(&headers, size).map_err(|()| {
        ApiError::Status(StatusCode::RANGE_NOT_SATISFIABLE, format!("The range is outside the file ({size} bytes)"))
    })?;
    let partial = range.is_some();
    let got = storage.read(&key, range).await.map_err(unavailable)?;
    let mut response = got.bytes.into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&kind).unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=300"));
    // The signature is the permission, so any page holding the link may read it.
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    let disposition = if inline(&kind) { "inline" } else { "attachment" };
    h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static(disposition));
    if partial {
        let range = format!("bytes {}-{}/{}", got.range.start, got.range.end.saturating_sub(1), got.size);
        h.insert(header::CONTENT_RANGE, HeaderValue::from_str(&range).expect("digits are a valid header"));
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    Ok(response)
}
