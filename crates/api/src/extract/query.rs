use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use parley_domain::validation::{Page, QueryReader};

use crate::error::ApiError;
use crate::state::AppState;

/// A list endpoint's filters, read from the query string.
pub trait FromQuery: Sized {
    fn from_query(q: &mut QueryReader) -> Self;
}

/// For lists without filters.
pub struct NoFilter;

impl FromQuery for NoFilter {
    fn from_query(_: &mut QueryReader) -> Self {
        NoFilter
    }
}

/// The request's query string, decoded.
fn reader(parts: &Parts) -> Result<QueryReader, ApiError> {
    let raw = parts.uri.query().unwrap_or("");
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw)
        .map_err(|_| ApiError::bad_request("The query string is not valid URL encoding"))?;
    Ok(QueryReader::new(pairs))
}

/// `limit`, `offset` and the filters `F`, every fault reported at once.
pub struct ListQuery<F> {
    pub page: Page,
    pub filter: F,
}

impl<F: FromQuery + Send> FromRequestParts<AppState> for ListQuery<F> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        let mut q = reader(parts)?;
        let page = Page::read(&mut q);
        let filter = F::from_query(&mut q);
        q.finish()?;
        Ok(ListQuery { page, filter })
    }
}

/// Query parameters of a route that is not a list (no `limit`/`offset`).
pub struct Params<F>(pub F);

impl<F: FromQuery + Send> FromRequestParts<AppState> for Params<F> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Self::Rejection> {
        let mut q = reader(parts)?;
        let params = F::from_query(&mut q);
        q.finish()?;
        Ok(Params(params))
    }
}
