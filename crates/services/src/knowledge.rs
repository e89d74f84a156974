//! Knowledge collections: documents (JSON text or uploaded plain text,
//! Markdown, HTML and PDF) that a job extracts and splits into passages,
//! ranked by BM25 for the query endpoint and for agents, whose top passages
//! go into the prompt with their sources.
//!
//! An upload is kept in file storage, and the document and its
//! `knowledge.document` job are written in one transaction: an accepted
//! document is processed even if the server dies before it gets to it.
//!
//! Documents are untrusted files: their text is read in a child process
//! (`parley_extract::sandbox`) with limits on depth, text, memory and time,
//! outside any transaction; only the passages are written, in one short
//! transaction. A document past a limit ends `failed` with the reason.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::agent::RetrievalHit;
use parley_domain::event::EventType;
use parley_domain::ids::{CollectionId, DocumentId};
use parley_domain::knowledge::{self as domain, KnowledgeCollection, KnowledgeDocument, KnowledgeHit};
use parley_domain::search::Bm25;
use parley_domain::validation::{FieldError, Page, Parsed, QueryReader, loc, parse_object, string};
use parley_engines::Passage;
use parley_jobs::{Enqueue, Job, Outcome, RetryPolicy};
use parley_store::Tx;
use parley_store::repo::agents::{self as agent_repo, AgentFields, IdList};
use parley_store::repo::events;
use parley_store::repo::knowledge::{self as repo, NewDocument, NewPassage};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, event_data};

pub const KIND: &str = "knowledge.document";

/// The largest document accepted.
pub const MAX_DOCUMENT_BYTES: usize = 20 * 1024 * 1024;
/// The most text a document may have, in characters (JSON text past it is
/// a 422; a file whose text turns out longer ends `failed`).
pub const MAX_TEXT_CHARS: usize = parley_extract::MAX_TEXT_CHARS;
/// The most passages one document is split into.
pub const MAX_PASSAGES: usize = 2_000;
/// The content types documents may have.
pub const CONTENT_TYPES: &[&str] = &["text/plain", "text/markdown", "text/html", "application/pdf"];
/// Passages read from the index per question before ranking.
const CANDIDATES: i64 = 100;
/// Matches the index ranks itself to pick the candidates (see `rank`).
const RANKED_MATCHES: i64 = 2000;
/// Passages an agent gets per question.
pub const RETRIEVED_PASSAGES: usize = 3;

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Knowledge collection", id)
}

/// `POST /api/v1/knowledge-collections` (documentation; parsed as a
/// [`CollectionInput`] with `name` required).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Help center", "description": "Public FAQ and policies"}))]
pub struct NewCollectionInput {
    /// 1–200 characters.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// Up to 2,000 characters, or null.
    #[schema(value_type = Option<String>, nullable, max_length = 2000)]
    pub description: Option<Option<String>>,
}

/// `PATCH /api/v1/knowledge-collections/{id}` (and a parsed create).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Help center", "description": "Public FAQ and policies"}))]
pub struct CollectionInput {
    /// 1–200 characters.
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    pub name: Option<String>,
    /// Up to 2,000 characters, or null.
    #[schema(value_type = Option<String>, nullable, max_length = 2000)]
    pub description: Option<Option<String>>,
}

pub fn parse_collection(body: Value, create: bool) -> Parsed<CollectionInput> {
    parse_object(body, loc(&["body"]), |r| {
        let name = if create {
            r.required("name", string(1, 200)).map(Some)
        } else {
            Some(r.optional("name", string(1, 200)))
        };
        let description = r.nullable("description", string(0, 2000));
        Some(CollectionInput { name: name?, description })
    })
}

pub async fn create(tx: &mut Tx, scope: Scope, input: CollectionInput) -> ServiceResult<KnowledgeCollection> {
    let name = input.name.unwrap_or_default();
    Ok(repo::insert_collection(tx, scope, &name, input.description.flatten().as_deref()).await?)
}

pub async fn get(svc: &Services, scope: Scope, id: CollectionId) -> ServiceResult<KnowledgeCollection> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get_collection(&mut c, scope, id).await?.ok_or_else(|| not_found(id))
}

pub async fn list(svc: &Services, scope: Scope, page: Page) -> ServiceResult<(Vec<KnowledgeCollection>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list_collections(&mut c, scope, page).await?)
}

pub async fn update(
    tx: &mut Tx,
    scope: Scope,
    id: CollectionId,
    input: CollectionInput,
) -> ServiceResult<KnowledgeCollection> {
    let id = id.get();
    let current = repo::get_collection(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let name = input.name.unwrap_or(current.name);
    let description = input.description.unwrap_or(current.description);
    repo::update_collection(tx, scope, id, &name, description.as_deref()).await?.ok_or_else(|| not_found(id))
}

/// Deletes a collection, its documents and passages, and detaches it from
/// the agents that list it (`agent.updated` for each). Storage keys of its
/// documents are returned for removal after the commit.
pub async fn delete(tx: &mut Tx, scope: Scope, id: CollectionId) -> ServiceResult<Vec<String>> {
    let id = id.get();
    for agent_id in agent_repo::ids_listing(tx, scope, IdList::KnowledgeCollections, id).await? {
        let Some(agent) = agent_repo::get(tx, scope, agent_id, true).await? else { continue };
        let mut fields = AgentFields::from(&agent);
        fields.knowledge_collection_ids.retain(|c| *c != id);
        if let Some(updated) = agent_repo::update(tx, scope, agent_id, &fields).await? {
            events::append(tx, scope, EventType::AgentUpdated, event_data(&updated)?).await?;
        }
    }
    repo::delete_collection(tx, scope, id).await?.ok_or_else(|| not_found(id))
}

/// Removes stored files after the rows that named them are gone (a file
/// left behind by a failure here is only unreachable, never wrong).
pub async fn remove_files(svc: &Services, keys: Vec<String>) {
    for key in keys {
        if let Err(e) = svc.storage.delete(&key).await {
            tracing::warn!(error = %e, "could not remove a knowledge document's file");
        }
    }
}

/// A document to add, from JSON or an upload.
#[derive(Debug, Clone)]
pub struct NewContent {
    pub title: String,
    /// The uploaded file's name.
    pub source: Option<String>,
    pub content_type: String,
    pub bytes: Bytes,
}

/// `POST …/{id}/documents` as JSON.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"title": "Opening hours", "text": "# Opening hours\n\nWe open at 9am, Monday to Friday."}))]
pub struct TextDocument {
    /// 1–300 characters.
    #[schema(min_length = 1, max_length = 300)]
    pub title: String,
    /// The document's text (1 to 2,000,000 characters).
    #[schema(min_length = 1, max_length = 2000000)]
    pub text: String,
    /// `text/plain` (default), `text/markdown` or `text/html`.
    #[schema(nullable = false, schema_with = parley_domain::schema::text_document_type)]
    pub content_type: Option<String>,
}

pub fn parse_text_document(body: Value) -> Parsed<NewContent> {
    parse_object(body, loc(&["body"]), |r| {
        let title = r.required("title", string(1, 300));
        let text = r.required("text", string(1, MAX_TEXT_CHARS));
        let content_type = r.optional("content_type", parley_domain::validation::one_of(&CONTENT_TYPES[..3]));
        Some(NewContent {
            title: title?,
            source: None,
            content_type: content_type.unwrap_or_else(|| "text/plain".to_owned()),
            bytes: Bytes::from(text?),
        })
    })
}

/// Checks an upload: its type (from the part, else the file name) and
/// size; it is titled by its file name.
pub fn check_upload(
    file_name: Option<String>,
    content_type: Option<String>,
    bytes: Bytes,
) -> Result<NewContent, Vec<FieldError>> {
    let at = || loc(&["body", "file"]);
    let by_name = file_name.as_deref().and_then(|n| {
        let ext = n.rsplit('.').next()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" => "text/plain",
            "md" | "markdown" => "text/markdown",
            "html" | "htm" => "text/html",
            "pdf" => "application/pdf",
            _ => return None,
        })
    });
    let declared = content_type.map(|t| t.split(';').next().unwrap_or_default().trim().to_ascii_lowercase());
    let content_type = match declared.as_deref() {
        Some(t) if CONTENT_TYPES.contains(&t) => t.to_owned(),
        Some("application/octet-stream") | None => match by_name {
            Some(t) => t.to_owned(),
            None => return Err(vec![FieldError::not_enum(at(), CONTENT_TYPES)]),
        },
        Some(_) => return Err(vec![FieldError::not_enum(at(), CONTENT_TYPES)]),
    };
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(vec![FieldError::new(at(), "value_error.file.too_large", "the file is larger than 20 MiB")]);
    }
    // Text is known now: past the limit it is refused now, not failed later.
    if matches!(content_type.as_str(), "text/plain" | "text/markdown")
        && String::from_utf8_lossy(&bytes).chars().count() > MAX_TEXT_CHARS
    {
        let msg = format!(
            "the file's text is longer than {} characters; split it into smaller documents",
            parley_extract::group_digits(MAX_TEXT_CHARS)
        );
        return Err(vec![FieldError::new(at(), "value_error.file.too_long", msg)]);
    }
    let file_name = file_name.map(|n| parley_domain::validation::without_nul(&n));
    let title = file_name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| "Untitled".to_owned());
    let title: String = title.chars().take(300).collect();
    Ok(NewContent { title, source: file_name.map(|n| n.chars().take(300).collect()), content_type, bytes })
}

/// Adds a document to collection `collection_id`: its content goes to file
/// storage, then the document (`processing`) and its job are written.
pub async fn add_document(
    svc: &Services,
    scope: Scope,
    collection_id: CollectionId,
    content: NewContent,
) -> ServiceResult<KnowledgeDocument> {
    let collection_id = collection_id.get();
    get(svc, scope, CollectionId(collection_id)).await?;
    let key = format!(
        "knowledge/{}/{}/{}",
        scope.workspace_id,
        if scope.livemode() { "live" } else { "test" },
        ulid::Ulid::new()
    );
    svc.storage.put(&key, content.bytes.clone(), &content.content_type).await?;
    let new = NewDocument {
        collection_id,
        title: &content.title,
        source: content.source.as_deref(),
        content_type: &content.content_type,
        bytes: content.bytes.len() as i64,
        storage_key: &key,
    };
    let written = svc
        .transaction(async |work| {
            // Deleted meanwhile: the same 404 as before.
            repo::get_collection(work, scope, collection_id).await?.ok_or_else(|| not_found(collection_id))?;
            let document = repo::insert_document(work, scope, &new).await?;
            let job = Enqueue::of(&DocumentJob { document_id: document.id, collection_id }).for_scope(scope);
            parley_jobs::enqueue(work, job).await?;
            Ok(document)
        })
        .await;
    if written.is_err() {
        remove_files(svc, vec![key]).await;
    }
    let document = written?;
    Ok(document)
}

fn document_not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Document", id)
}

pub async fn get_document(
    svc: &Services,
    scope: Scope,
    collection_id: CollectionId,
    id: DocumentId,
) -> ServiceResult<KnowledgeDocument> {
    let collection_id = collection_id.get();
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get_collection(&mut c, scope, collection_id).await?.ok_or_else(|| not_found(collection_id))?;
    repo::get_document(&mut c, scope, collection_id, id).await?.ok_or_else(|| document_not_found(id))
}

pub async fn list_documents(
    svc: &Services,
    scope: Scope,
    collection_id: CollectionId,
    page: Page,
) -> ServiceResult<(Vec<KnowledgeDocument>, i64)> {
    let collection_id = collection_id.get();
    let mut c = svc.db.read().await?;
    repo::get_collection(&mut c, scope, collection_id).await?.ok_or_else(|| not_found(collection_id))?;
    Ok(repo::list_documents(&mut c, scope, collection_id, page).await?)
}

/// Deletes a document and its passages; its storage key.
pub async fn delete_document(
    tx: &mut Tx,
    scope: Scope,
    collection_id: CollectionId,
    id: DocumentId,
) -> ServiceResult<String> {
    let collection_id = collection_id.get();
    let id = id.get();
    repo::get_collection(tx, scope, collection_id).await?.ok_or_else(|| not_found(collection_id))?;
    repo::delete_document(tx, scope, collection_id, id).await?.ok_or_else(|| document_not_found(id))
}

/// `GET …/{id}/query` parameters.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    pub q: String,
    pub limit: i64,
}

pub fn parse_query(q: &mut QueryReader) -> Option<QueryRequest> {
    let text = q.string("q", 1, 500);
    let limit = q.integer("limit", 1, 50).unwrap_or(5);
    if text.is_none() && !q.has("q") {
        q.push_error(FieldError::missing(loc(&["query", "q"])));
    }
    Some(QueryRequest { q: text?, limit })
}

/// The passages of collection `id` ranked for `request.q`, and how many
/// were ranked (at most 100).
pub async fn query(
    svc: &Services,
    scope: Scope,
    id: CollectionId,
    request: &QueryRequest,
) -> ServiceResult<(Vec<KnowledgeHit>, i64)> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get_collection(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?;
    rank(&mut c, &svc.frequencies, scope, &[id], &request.q, request.limit as usize).await
}

/// What an agent retrieves for a question: the passages for the prompt
/// (and the builtin engine), and what the run records.
#[derive(Debug, Clone, Default)]
pub struct Retrieved {
    pub passages: Vec<Passage>,
    pub hits: Vec<RetrievalHit>,
}

/// The best passages of the agent's collections for `question`.
pub async fn retrieve(
    svc: &Services,
    scope: Scope,
    collection_ids: &[i64],
    question: Option<&str>,
) -> ServiceResult<Retrieved> {
    let Some(question) = question else { return Ok(Retrieved::default()) };
    if collection_ids.is_empty() {
        return Ok(Retrieved::default());
    }
    let mut c = svc.db.read().await?;
    let (hits, _) = rank(&mut c, &svc.frequencies, scope, collection_ids, question, RETRIEVED_PASSAGES).await?;
    Ok(Retrieved {
        passages: hits
            .iter()
            .map(|h| Passage { source: h.title.clone(), text: h.text.clone(), score: h.score })
            .collect(),
        hits: hits.iter().map(|h| RetrievalHit { passage_id: h.passage_id, score: h.score }).collect(),
    })
}

/// Each word's document frequency by collection version: counting them
/// (one index look-up per word and collection, the whole collection for a
/// common word) was most of a query's time, and they only change when a
/// document is added or removed, which moves the collection's version.
#[derive(Default)]
pub struct Frequencies(std::sync::Mutex<HashMap<(Scope, i64, i64), HashMap<String, i64>>>);

/// Collection versions, and words per version, kept before starting over.
const KEPT_VERSIONS: usize = 512;
const KEPT_WORDS: usize = 20_000;

impl Frequencies {
    fn get(&self, version: (Scope, i64, i64), terms: &[String]) -> Vec<Option<i64>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let words = kept.get(&version);
        terms.iter().map(|t| words.and_then(|w| w.get(t).copied())).collect()
    }

    fn put(&self, version: (Scope, i64, i64), terms: &[String], counts: &[i64]) {
        if terms.is_empty() {
            return;
        }
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= KEPT_VERSIONS && !kept.contains_key(&version) {
            kept.clear();
        }
        let words = kept.entry(version).or_default();
        if words.len() + terms.len() > KEPT_WORDS {
            words.clear();
        }
        words.extend(terms.iter().cloned().zip(counts.iter().copied()));
    }
}

/// Okapi BM25 over the collections: candidates from the index, document
/// frequencies and lengths from the store, scores here.
async fn rank(
    c: &mut parley_store::Conn,
    frequencies: &Frequencies,
    scope: Scope,
    ids: &[i64],
    question: &str,
    limit: usize,
) -> ServiceResult<(Vec<KnowledgeHit>, i64)> {
    let terms = domain::terms(question);
    if terms.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let sizes = repo::sizes(c, scope, ids).await?;
    let passages: i64 = sizes.iter().map(|s| s.passage_count).sum();
    let words: i64 = sizes.iter().map(|s| s.word_count).sum();
    let mut doc_freqs = vec![0_i64; terms.len()];
    for size in &sizes {
        let version = (scope, size.id, size.updated_at.unix_micros());
        let known = frequencies.get(version, &terms);
        let missing: Vec<String> =
            terms.iter().zip(&known).filter(|(_, k)| k.is_none()).map(|(t, _)| t.clone()).collect();
        let counted = repo::document_frequencies(c, scope, &[size.id], &missing).await?;
        frequencies.put(version, &missing, &counted);
        let mut counted = counted.into_iter();
        for (df, known) in doc_freqs.iter_mut().zip(known) {
            *df += known.or_else(|| counted.next()).unwrap_or(0);
        }
    }
    // Candidates are looked up by the words that tell passages apart: a word
    // in more than one passage in ten (and more than the candidates we
    // read) adds little to a score but makes the index rank a large share of
    // the collection. Scores count every word.
    let mut telling: Vec<String> = terms
        .iter()
        .zip(&doc_freqs)
        .filter(|(_, df)| **df > 0 && (**df <= CANDIDATES || **df * 10 <= passages))
        .map(|(t, _)| t.clone())
        .collect();
    let mut matches: i64 = terms.iter().zip(&doc_freqs).filter(|(t, _)| telling.contains(t)).map(|(_, df)| df).sum();
    if telling.is_empty() {
        let rarest = terms.iter().zip(&doc_freqs).filter(|(_, df)| **df > 0).min_by_key(|(_, df)| **df);
        telling.extend(rarest.map(|(t, _)| t.clone()));
        matches = rarest.map_or(0, |(_, df)| *df);
    }
    // Ranking every match of a word found nearly everywhere costs a scan of
    // the collection, and its scores barely differ (its IDF is close to
    // zero): past RANKED_MATCHES, any CANDIDATES of them are scored here.
    let ranked = matches <= RANKED_MATCHES;
    let candidates = repo::candidates(c, scope, ids, &telling, CANDIDATES, ranked).await?;
    if candidates.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let n = passages.max(candidates.len() as i64);
    let bm25 = Bm25::new(&doc_freqs, n, words as f64 / n.max(1) as f64);
    let total = candidates.len() as i64;
    let mut hits: Vec<KnowledgeHit> = candidates
        .into_iter()
        .map(|p| {
            let (tf, len) = domain::term_frequencies(&p.terms, &terms);
            let score = (bm25.score(&tf, len) * 1e4).round() / 1e4;
            KnowledgeHit { passage_id: p.id, document_id: p.document_id, title: p.title, text: p.text, score }
        })
        .filter(|h| h.score > 0.0)
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.passage_id.cmp(&b.passage_id)));
    hits.truncate(limit);
    Ok((hits, total))
}

/// How documents are read: in child processes, with these limits.
#[derive(Debug, Clone)]
pub struct KnowledgeConfig {
    pub reader: parley_extract::sandbox::Sandbox,
}

impl Default for KnowledgeConfig {
    fn default() -> Self {
        let program = std::env::current_exe().unwrap_or_else(|_| "parley".into());
        Self {
            reader: parley_extract::sandbox::Sandbox::new(
                program,
                MAX_TEXT_CHARS,
                parley_extract::TIME_LIMIT,
                1024 * 1024 * 1024,
                2,
            ),
        }
    }
}

/// A document's text: plain text and Markdown as they are (UTF-8, invalid
/// bytes replaced), here; HTML and PDF in the sandbox's child process.
async fn read_text(svc: &Services, content_type: &str, bytes: Bytes) -> Result<String, parley_extract::ExtractError> {
    match content_type {
        "text/plain" | "text/markdown" => {
            let content_type = content_type.to_owned();
            let limits = parley_extract::Limits::with(MAX_TEXT_CHARS, svc.config.knowledge.reader.time);
            tokio::task::spawn_blocking(move || parley_extract::document_text(&content_type, &bytes, limits))
                .await
                .unwrap_or_else(|_| Err(parley_extract::ExtractError::Crashed("the text reader stopped".into())))
        }
        _ => svc.config.knowledge.reader.document_text(content_type, bytes).await,
    }
}

/// Splits a document's text into passages with their index terms (on a
/// blocking thread: linear, but a long document takes a while).
async fn passages_of(text: String) -> Result<Vec<NewPassage>, String> {
    let split = tokio::task::spawn_blocking(move || {
        // Stored the same on both databases (PostgreSQL refuses NUL).
        let text = parley_domain::validation::without_nul(&text);
        domain::split(&text)
            .into_iter()
            .map(|text| {
                let terms = domain::index_words(&text);
                let words = terms.split(' ').filter(|w| !w.is_empty()).count() as i64;
                NewPassage { text, terms, words }
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|_| "could not split the document into passages".to_owned())?;
    if split.is_empty() {
        return Err("the document has no text".into());
    }
    if split.len() > MAX_PASSAGES {
        return Err(format!(
            "the document makes more than {} passages; split it into smaller documents",
            parley_extract::group_digits(MAX_PASSAGES)
        ));
    }
    Ok(split)
}

/// The `knowledge.document` job handler: extracts, splits and indexes.
pub struct DocumentProcessor {
    svc: Services,
}

impl DocumentProcessor {
    pub fn new(svc: Services) -> Self {
        Self { svc }
    }
}

/// The `knowledge.document` job: split document `document_id` into passages.
#[derive(Debug, PartialEq, serde::Serialize, Deserialize)]
pub(crate) struct DocumentJob {
    pub(crate) document_id: i64,
    pub(crate) collection_id: i64,
}

impl parley_jobs::BackgroundJob for DocumentJob {
    const KIND: &'static str = KIND;
}

impl parley_jobs::Handler for DocumentProcessor {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy { schedule: [2, 10, 60].iter().map(|s| Duration::from_secs(*s)).collect() }
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match process(&self.svc, job).await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }

    fn dead<'a>(&'a self, tx: &'a mut Tx, job: &'a Job, error: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            if let (Some(scope), Ok(due)) = (job.scope, job.read::<DocumentJob>()) {
                repo::document_failed(tx, scope, due.document_id, error).await?;
            }
            Ok(())
        })
    }
}

async fn process(svc: &Services, job: &Job) -> ServiceResult<Outcome> {
    let Some(scope) = job.scope else { return Ok(Outcome::Fail("the job has no scope".into())) };
    let due = match job.read::<DocumentJob>() {
        Ok(due) => due,
        Err(e) => return Ok(Outcome::Fail(e)),
    };
    let (document, key) = {
        let mut c = svc.db.read().await?;
        let document = repo::get_document(&mut c, scope, due.collection_id, due.document_id).await?;
        let key = repo::storage_key(&mut c, scope, due.document_id).await?;
        match (document, key) {
            (Some(d), Some(k)) => (d, k),
            // Deleted before it was processed.
            _ => return Ok(Outcome::Done),
        }
    };
    if document.status != domain::DocumentStatus::Processing {
        return Ok(Outcome::Done);
    }
    let bytes = match svc.storage.read(&key, None).await {
        Ok(download) => download.bytes,
        Err(e) => return Ok(Outcome::Retry { error: format!("could not read the document: {e}"), after: None }),
    };
    // Read and split before the transaction: a slow or hostile document
    // holds no lock (on SQLite, the one writer) while it is read.
    let passages = match read_text(svc, &document.content_type, bytes).await {
        Ok(text) => passages_of(text).await,
        // No reader could start (a full process table): not the document's fault.
        Err(e @ parley_extract::ExtractError::Unavailable(_)) => {
            return Ok(Outcome::Retry { error: e.to_string(), after: None });
        }
        Err(e) => Err(e.to_string()),
    };
    let mut work = svc.begin().await?;
    match passages {
        Ok(passages) => {
            repo::document_ready(&mut work, scope, &document, &passages).await?;
        }
        Err(e) => repo::document_failed(&mut work, scope, document.id, &e).await?,
    }
    if job.complete(&mut work).await? {
        svc.commit(work).await?;
    }
    Ok(Outcome::Committed)
}
