//! `GET /api/v1/search`: ranked full-text search with highlighted snippets.

use parley_domain::Scope;
use parley_domain::Timestamp;
use parley_domain::search::{self, Query};
use parley_domain::validation::{FieldError, Page, QueryReader, loc};
use parley_store::repo::search::{self as repo, SearchFilter};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{ServiceResult, Services};

/// Characters of text a snippet shows.
const SNIPPET_CHARS: usize = 160;

/// A parsed search request.
pub struct SearchRequest {
    pub query: Query,
    pub filter: SearchFilter,
}

/// Reads `q`, `type` and the filters; `None` when `q` is missing or
/// malformed (the reader holds the 422s).
pub fn parse(q: &mut QueryReader) -> Option<SearchRequest> {
    let raw = q.string("q", 1, 500);
    // Messages are what this version searches; `all` means them too.
    q.one_of("type", &["messages", "all"]);
    let filter = SearchFilter {
        channel: q.one_of("channel", parley_domain::contact::CHANNELS),
        conversation_id: q.integer("conversation_id", 1, i64::MAX),
        contact_id: q.integer("contact_id", 1, i64::MAX),
        after: q.timestamp("after"),
        before: q.timestamp("before"),
    };
    let Some(raw) = raw else {
        if !q.has("q") {
            q.push_error(FieldError::missing(loc(&["query", "q"])));
        }
        return None;
    };
    match search::parse(&raw) {
        Ok(query) => Some(SearchRequest { query, filter }),
        Err(e) => {
            q.push_error(FieldError::new(loc(&["query", "q"]), "value_error.search_query", e.to_string()));
            None
        }
    }
}

/// One result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Hit {
    /// `message`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: i64,
    pub conversation_id: i64,
    /// The conversation's title.
    pub title: String,
    /// Up to 160 characters around the first match, HTML-escaped, matches in `<mark>…</mark>`.
    pub snippet: String,
    /// Relevance; higher is better (results come best first).
    pub score: f64,
    pub created_at: Timestamp,
}

pub async fn search(
    svc: &Services,
    scope: Scope,
    request: &SearchRequest,
    page: Page,
) -> ServiceResult<(Vec<Hit>, i64)> {
    let mut c = svc.db.read().await?;
    let (rows, total) = repo::messages(&mut c, scope, &request.query, &request.filter, page).await?;
    let hits = rows
        .into_iter()
        .map(|r| Hit {
            kind: "message",
            id: r.id,
            conversation_id: r.conversation_id,
            title: r.title,
            snippet: search::snippet(&r.text, &request.query, SNIPPET_CHARS),
            score: (r.score * 1e6).round() / 1e6,
            created_at: r.created_at,
        })
        .collect();
    Ok((hits, total))
}
