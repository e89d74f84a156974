//! The REST side of the list cache (`parley_services::list_cache`): a
//! cached page answered as a JSON response.

use std::future::Future;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use parley_domain::Scope;
use parley_services::Snapshot;
pub use parley_services::list_cache::ListCache;

use crate::error::ApiError;

/// Answers with the cached page (see [`ListCache::page`]).
pub async fn respond<F, Fut>(
    lists: &ListCache,
    versions: &Snapshot,
    scope: Scope,
    resource: &'static str,
    query: &str,
    compute: F,
) -> Result<Response, ApiError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Vec<u8>, ApiError>>,
{
    let body = lists.page(versions, scope, resource, query, compute).await?;
    let mut r = body.into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(r)
}
