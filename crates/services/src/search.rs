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

pub async fn search(svc: &Services, scope: Scope, request: &SearchRequest, page: Page) -> ServiceResult<Found> {
    let mut c = svc.db.read().await?;
    let resolved = repo::resolve(&mut c, scope, &request.filter).await?;
    // Each target's best `offset + limit`, merged by score, hold the page.
    let wanted = page.offset + page.limit;
    let (mut scored, mut counted, mut skipped) = (Vec::new(), 0, 0);
    // One target can skip the rows past its window that precede the page;
    // merged targets need all of them to place the page.
    let skip_tail = if request.targets.len() == 1 { (page.offset - RANKED_WINDOW).max(0) } else { 0 };
    for &target in &request.targets {
        let (hits, n, s) = rank(&mut c, target, &resolved, &request.query, wanted, skip_tail).await?;
        scored.extend(hits);
        counted += n.min(MAX_RESULTS + 1);
        skipped += s;
    }
    drop(c);
    if request.targets.len() > 1 {
        // Ranked matches by score, then the matches past a ranked window
        // newest first: the same order whatever page is asked for.
        scored.sort_by(|a, b| {
            a.past_window.cmp(&b.past_window).then_with(|| {
                if a.past_window {
                    (b.row.created_at, b.row.id).cmp(&(a.row.created_at, a.row.id))
                } else {
                    b.score.total_cmp(&a.score)
                }
            })
        });
    }
    let hits = scored
        .into_iter()
        .skip((page.offset - skipped) as usize)
        .take(page.limit as usize)
        .map(|Scored { score, target, row: r, .. }| Hit {
            kind: match target {
                Target::Messages => "message",
                Target::Conversations => "conversation",
                Target::Contacts => "contact",
            },
            id: r.id,
            conversation_id: r.conversation_id,
            title: r.title,
            snippet: search::snippet(&r.text, &request.query, SNIPPET_CHARS),
            score: (score * 1e6).round() / 1e6,
            created_at: r.created_at,
        })
        .collect();
    Ok(Found { hits, total: counted.min(MAX_RESULTS), relation: relation(counted) })
}

struct Scored {
    score: f64,
    target: Target,
    /// Past the ranked window: ordered newest first, not by score.
    past_window: bool,
    row: repo::Match,
}

/// The first `wanted` matches of `target` in result order but for
/// `skip_tail` past the ranked window (left unread, and returned as the
/// third value), scored; and how many match (counted up to `MAX_RESULTS + 1`).
///
/// Every match is ranked when there are at most `RANKED_WINDOW`; otherwise
/// the newest window is, and the matches past it follow newest first.
async fn rank(
    c: &mut parley_store::Conn,
    target: Target,
    resolved: &repo::Resolved,
    query: &Query,
    wanted: i64,
    skip_tail: i64,
) -> ServiceResult<(Vec<Scored>, i64, i64)> {
    let mut rows = repo::newest(c, target, resolved, query, 0, RANKED_WINDOW).await?;
    // A short window holds every match: its length is the count.
    let counted = if (rows.len() as i64) < RANKED_WINDOW {
        rows.len() as i64
    } else {
        repo::count(c, target, resolved, query, MAX_RESULTS + 1).await?
    };
    if counted == 0 {
        return Ok((Vec::new(), 0, 0));
    }
    let ranked = rows.len();
    if wanted > RANKED_WINDOW {
        // Past the window only the rows asked for are read.
        let from = RANKED_WINDOW + skip_tail;
        rows.extend(repo::newest(c, target, resolved, query, from, wanted - from).await?);
    }
    // Per-term document counts weigh the terms against each other; with
    // one term the query's own count is that term's.
    let doc_freqs = if query.include.len() == 1 {
        vec![counted]
    } else {
        let mut freqs = Vec::with_capacity(query.include.len());
        for term in &query.include {
            let single = Query { include: vec![term.clone()], exclude: Vec::new() };
            freqs.push(repo::count(c, target, resolved, &single, MAX_RESULTS + 1).await?);
        }
        freqs
    };
    let measured: Vec<(Vec<u32>, u32)> = rows.iter().map(|r| query.term_frequencies(&r.text)).collect();
    let avg_len = measured[..ranked].iter().map(|(_, len)| *len as f64).sum::<f64>() / ranked.max(1) as f64;
    let bm25 = Bm25::new(&doc_freqs, MAX_RESULTS, avg_len);
    let mut scored: Vec<Scored> = measured
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(i, ((tf, len), row))| Scored { score: bm25.score(tf, *len), target, past_window: i >= ranked, row })
        .collect();
    scored[..ranked].sort_by(|a, b| b.score.total_cmp(&a.score).then(b.row.id.cmp(&a.row.id)));
    Ok((scored, counted, skip_tail))
}

fn relation(counted: i64) -> TotalRelation {
    if counted > MAX_RESULTS { TotalRelation::Gte } else { TotalRelation::Eq }
}
