//! `GET /api/v1/search`.

use axum::Json;
use axum::extract::State;
use parley_domain::validation::QueryReader;
use parley_services::search::{self, Hit, SearchRequest, TotalRelation};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Pagination of search: results stop at 10,000.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `ListQuery`
struct SearchPageParams {
    /// Items per page, 1–200. Default 50.
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
    /// 0-based start position, at most 9,999; `offset + limit` may not pass
    /// 10,000 (a 422 at `query.offset`).
    #[param(minimum = 0, maximum = 9999, default = 0)]
    offset: Option<i64>,
}
use crate::error::{ApiError, ValidationErrorBody};
use crate::extract::{Auth, FromQuery, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(search_all))
}

/// The parsed request, or `None` when the query reader holds its 422s.
pub struct Search(Option<SearchRequest>);

impl FromQuery for Search {
    fn from_query(q: &mut QueryReader) -> Self {
        Search(search::parse(q))
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `search::parse`
struct SearchParams {
    /// Words (all must match), `"exact phrase"`, `-exclude`, `prefix*`;
    /// case- and accent-insensitive; 1–500 characters. Malformed (an
    /// unclosed quote, only exclusions, a lone `*`, nothing to search) is a 422.
    #[param(format = "search-query", min_length = 1, max_length = 500)]
    q: String,
    /// `messages`, `conversations`, `contacts` or `all` (default: the three
    /// ranked together).
    #[param(rename = "type", schema_with = parley_domain::schema::search_type)]
    kind: Option<String>,
    /// The conversation's channel (for contacts, an identity on it).
    #[param(schema_with = parley_domain::schema::channel)]
    channel: Option<String>,
    #[param(minimum = 1)]
    conversation_id: Option<i64>,
    #[param(minimum = 1)]
    contact_id: Option<i64>,
    /// RFC 3339: created at or after it.
    #[param(value_type = Option<String>, format = DateTime)]
    after: Option<String>,
    /// RFC 3339: created before it.
    #[param(value_type = Option<String>, format = DateTime)]
    before: Option<String>,
}

/// The items envelope, with how `total` relates to the number of matches.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResults {
    /// Best match first.
    pub items: Vec<Hit>,
    /// Matches of the query in the key's workspace and mode, counted up to 10,000.
    pub total: i64,
    /// `eq`: `total` is exact; `gte`: more than 10,000 match.
    pub total_relation: TotalRelation,
    pub limit: i64,
    pub offset: i64,
}

/// Search messages, conversations and contacts: ranked best first, with snippets.
///
/// Each item is `{type: "message"|"conversation"|"contact", id,
/// conversation_id, title, snippet, score, created_at}`; the snippet is
/// HTML-escaped with matches in `<mark>…</mark>`. A write is searchable as
/// soon as its response was sent. Only the workspace and mode of the key are
/// searched, `total` included.
///
/// Ranking is BM25. When more than 1,000 of a kind match, its newest 1,000
/// are ranked; all ranked results come first, then the other matches newest
/// first (messages, conversations, contacts). Matches are counted
/// up to 10,000 (`total_relation: gte` beyond), and `offset + limit` may not
/// pass 10,000 (422): narrow the query or add filters.
#[utoipa::path(
    get, path = "/api/v1/search", tag = "Search",
    params(SearchPageParams, SearchParams),
    responses((status = 200, body = SearchResults), (status = 422, body = ValidationErrorBody))
)]
async fn search_all(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<Search>,
) -> Result<Json<SearchResults>, ApiError> {
    // The reader reported why the request is missing; this cannot be reached without it.
    let Some(request) = q.filter.0 else { return Err(ApiError::bad_request("Invalid search query")) };
    search::check_window(q.page).map_err(|e| ApiError::Validation(vec![e]))?;
    let found = search::search(&s.services, auth.scope(), &request, q.page).await?;
    Ok(Json(SearchResults {
        items: found.hits,
        total: found.total,
        total_relation: found.relation,
        limit: q.page.limit,
        offset: q.page.offset,
    }))
}
