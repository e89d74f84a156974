//! `GET /api/v1/search`: ranked full-text search with highlighted snippets.

use parley_domain::Scope;
use parley_domain::Timestamp;
use parley_domain::search::{self, Bm25, Query};
use parley_domain::validation::{FieldError, Page, QueryReader, loc};
use parley_store::repo::search::{self as repo, SearchFilter, Target};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{ServiceResult, Services};

/// Characters of text a snippet shows.
const SNIPPET_CHARS: usize = 160;

/// A parsed search request.
pub struct SearchRequest {
    pub query: Query,
    /// What is searched (`type`; `all` is all three).
    pub targets: Vec<Target>,
    pub filter: SearchFilter,
}

/// Reads `q`, `type` and the filters; `None` when `q` is missing or
/// malformed (the reader holds the 422s).
pub fn parse(q: &mut QueryReader) -> Option<SearchRequest> {
    let raw = q.string("q", 1, 500);
    let targets = match q.one_of("type", &["messages", "conversations", "contacts", "all"]).as_deref() {
        Some("messages") => vec![Target::Messages],
        Some("conversations") => vec![Target::Conversations],
        Some("contacts") => vec![Target::Contacts],
        _ => vec![Target::Messages, Target::Conversations, Target::Contacts],
    };
    let filter = SearchFilter {
        channel: q.one_of("channel", parley_domain::channel::ChannelType::ALL),
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
        Ok(query) => Some(SearchRequest { query, targets, filter }),
        Err(e) => {
            q.push_error(FieldError::new(loc(&["query", "q"]), "value_error.search_query", e.to_string()));
            None
        }
    }
}

/// One result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Hit {
    /// `message`, `conversation` or `contact`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The message's, conversation's or contact's id.
    pub id: i64,
    /// The message's conversation, the conversation itself; `null` for a contact.
    pub conversation_id: Option<i64>,
    /// The conversation's title (for a message, its conversation's); the contact's name.
    pub title: String,
    /// Up to 160 characters around the first match, HTML-escaped, matches in `<mark>…</mark>`.
    pub snippet: String,
    /// Relevance; higher is better (results come best first).
    pub score: f64,
    pub created_at: Timestamp,
}

/// Matches are counted up to this many, and no page reaches past it.
pub const MAX_RESULTS: i64 = 10_000;

/// Refuses a page that reaches past [`MAX_RESULTS`] (a 422 on `offset`).
pub fn check_window(page: Page) -> Result<(), parley_domain::validation::FieldError> {
    if page.offset.saturating_add(page.limit) > MAX_RESULTS {
        return Err(parley_domain::validation::FieldError::new(
            parley_domain::validation::loc(&["query", "offset"]),
            "value_error.search.window",
            format!("search results stop at {MAX_RESULTS}: offset + limit may not pass it; narrow the query"),
        ));
    }
    Ok(())
}
/// When more messages match, the newest this many are ranked by relevance
/// and the rest follow newest first.
pub const RANKED_WINDOW: i64 = 1_000;

/// How `total` relates to the number of matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TotalRelation {
    /// `total` is the number of matches.
    Eq,
    /// At least `total` (10,000) match; counting stopped there.
    Gte,
}

/// A page of hits and what is known of their number.
pub struct Found {
    pub hits: Vec<Hit>,
    pub total: i64,
    pub relation: TotalRelation,
}

/// The page of results, in this order: every target's ranked window merged
/// by score (best first), then the matches past the windows, newest first,
/// messages before conversations before contacts. Each page reads only its
/// own rows past the windows.
pub async fn search(svc: &Services, scope: Scope, request: &SearchRequest, page: Page) -> ServiceResult<Found> {
    let query = &request.query;
    let mut c = svc.db.read().await?;
    let resolved = repo::resolve(&mut c, scope, &request.filter).await?;
    let mut windows = Vec::with_capacity(request.targets.len());
    for &target in &request.targets {
        windows.push(rank_window(&mut c, target, &resolved, query).await?);
    }
    // Stable: equal scores keep the targets' order, and each window's.
    let mut ranked: Vec<Scored> = windows.iter_mut().flat_map(|w| std::mem::take(&mut w.scored)).collect();
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
    let ranked_len = ranked.len() as i64;
    let mut hits: Vec<Scored> = ranked.into_iter().skip(page.offset as usize).take(page.limit as usize).collect();
    // Past the windows: the tails, one target after another.
    let mut need = page.limit - hits.len() as i64;
    let mut skip = (page.offset - ranked_len).max(0);
    for w in &windows {
        if need == 0 {
            break;
        }
        let tail = w.counted.min(MAX_RESULTS) - w.len;
        if skip >= tail {
            skip -= tail;
            continue;
        }
        let rows = repo::newest(&mut c, w.target, &resolved, query, w.len + skip, need.min(tail - skip)).await?;
        need -= rows.len() as i64;
        skip = 0;
        hits.extend(rows.into_iter().map(|row| w.score(query, row)));
    }
    drop(c);
    let counted: i64 = windows.iter().map(|w| w.counted).sum();
    let hits = hits
        .into_iter()
        .map(|Scored { score, target, row: r }| Hit {
            kind: match target {
                Target::Messages => "message",
                Target::Conversations => "conversation",
                Target::Contacts => "contact",
            },
            id: r.id,
            conversation_id: r.conversation_id,
            title: r.title,
            snippet: search::snippet(&r.text, query, SNIPPET_CHARS),
            score: (score * 1e6).round() / 1e6,
            created_at: r.created_at,
        })
        .collect();
    Ok(Found { hits, total: counted.min(MAX_RESULTS), relation: relation(counted) })
}

struct Scored {
    score: f64,
    target: Target,
    row: repo::Match,
}

/// One target's ranked window and what scores the rows past it.
struct Window {
    target: Target,
    /// Best first (ties: newest first); emptied when merged.
    scored: Vec<Scored>,
    /// The window's length.
    len: i64,
    /// Matches, counted up to `MAX_RESULTS + 1`.
    counted: i64,
    bm25: Bm25,
}

impl Window {
    fn score(&self, query: &Query, row: repo::Match) -> Scored {
        let (tf, len) = query.term_frequencies(&row.text);
        Scored { score: self.bm25.score(&tf, len), target: self.target, row }
    }
}

/// The newest `RANKED_WINDOW` matches of `target`, ranked by BM25 (every
/// match, when there are no more).
async fn rank_window(
    c: &mut parley_store::Conn,
    target: Target,
    resolved: &repo::Resolved,
    query: &Query,
) -> ServiceResult<Window> {
    let rows = repo::newest(c, target, resolved, query, 0, RANKED_WINDOW).await?;
    let len = rows.len() as i64;
    // A short window holds every match: its length is the count.
    let counted =
        if len < RANKED_WINDOW { len } else { repo::count(c, target, resolved, query, MAX_RESULTS + 1).await? };
    // Per-term document counts weigh the terms against each other; with
    // one term the query's own count is that term's.
    let doc_freqs = if query.include.len() == 1 || counted == 0 {
        vec![counted; query.include.len()]
    } else {
        let mut freqs = Vec::with_capacity(query.include.len());
        for term in &query.include {
            let single = Query { include: vec![term.clone()], exclude: Vec::new() };
            freqs.push(repo::count(c, target, resolved, &single, MAX_RESULTS + 1).await?);
        }
        freqs
    };
    let measured: Vec<(Vec<u32>, u32)> = rows.iter().map(|r| query.term_frequencies(&r.text)).collect();
    let avg_len = measured.iter().map(|(_, len)| *len as f64).sum::<f64>() / measured.len().max(1) as f64;
    let bm25 = Bm25::new(&doc_freqs, MAX_RESULTS, avg_len);
    let mut scored: Vec<Scored> =
        measured.iter().zip(rows).map(|((tf, len), row)| Scored { score: bm25.score(tf, *len), target, row }).collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.row.id.cmp(&a.row.id)));
    Ok(Window { target, scored, len, counted, bm25 })
}

fn relation(counted: i64) -> TotalRelation {
    if counted > MAX_RESULTS { TotalRelation::Gte } else { TotalRelation::Eq }
}
