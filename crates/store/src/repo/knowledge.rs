//! Knowledge collections, their documents and passages.
//!
//! Retrieval reads what BM25 needs from either backend the same way: the
//! passages matching any of a question's words (FTS5 with the scope and
//! collections as tokens of a second column, or the GIN-indexed tsvector),
//! each word's document frequency among the collections' passages, and the
//! collections' passage and word counts. The service ranks.

use parley_domain::knowledge::{DocumentStatus, KnowledgeCollection, KnowledgeDocument};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};

use super::{Arg, Where};
use crate::repo::BindScope;
use crate::{AsHandle, Handle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

const COLLECTION_COLUMNS: &str = "id, name, description, document_count, passage_count, created_at, updated_at";
const DOCUMENT_COLUMNS: &str = "id, collection_id, title, source, content_type, status, error, passage_count, \
    bytes, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct CollectionRow {
    id: i64,
    name: String,
    description: Option<String>,
    document_count: i64,
    passage_count: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<CollectionRow> for KnowledgeCollection {
    fn from(r: CollectionRow) -> Self {
        KnowledgeCollection {
            id: r.id,
            name: r.name,
            description: r.description,
            document_count: r.document_count,
            passage_count: r.passage_count,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(sqlx::FromRow)]
struct DocumentRow {
    id: i64,
    collection_id: i64,
    title: String,
    source: Option<String>,
    content_type: String,
    status: DocumentStatus,
    error: Option<String>,
    passage_count: i64,
    bytes: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<DocumentRow> for KnowledgeDocument {
    fn from(r: DocumentRow) -> Self {
        KnowledgeDocument {
            id: r.id,
            collection_id: r.collection_id,
            title: r.title,
            source: r.source,
            content_type: r.content_type,
            status: r.status,
            error: r.error,
            passage_count: r.passage_count,
            bytes: r.bytes,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

pub async fn insert_collection(
    c: &mut impl AsHandle,
    scope: Scope,
    name: &str,
    description: Option<&str>,
) -> StoreResult<KnowledgeCollection> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO knowledge_collections (workspace_id, livemode, name, description, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $5) RETURNING {COLLECTION_COLUMNS}"
    ));
    let row: CollectionRow =
        fetch_one!(c, sqlx::query_as(sql).bind_scope(scope).bind(name).bind(description).bind(Timestamp::now()))?;
    Ok(row.into())
}

pub async fn get_collection(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<KnowledgeCollection>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLLECTION_COLUMNS} FROM knowledge_collections WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<CollectionRow> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    Ok(row.map(Into::into))
}

pub async fn list_collections(
    c: &mut impl AsHandle,
    scope: Scope,
    page: Page,
) -> StoreResult<(Vec<KnowledgeCollection>, i64)> {
    let w = Where::scoped(scope, "k");
    let columns = prefixed(COLLECTION_COLUMNS, "k");
    let (rows, total): (Vec<CollectionRow>, i64) =
        super::newest_page(c, "knowledge_collections k", &columns, &w, page).await?;
    Ok((rows.into_iter().map(Into::into).collect(), total))
}

pub async fn update_collection(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    name: &str,
    description: Option<&str>,
) -> StoreResult<Option<KnowledgeCollection>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE knowledge_collections SET name = $4, description = $5, updated_at = $6
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLLECTION_COLUMNS}"
    ));
    let row: Option<CollectionRow> = fetch_optional!(
        c,
        sqlx::query_as(sql).bind_scope(scope).bind(id).bind(name).bind(description).bind(Timestamp::now())
    )?;
    Ok(row.map(Into::into))
}

/// Deletes a collection with its documents and passages; the documents'
/// storage keys, for the caller to remove the files.
pub async fn delete_collection(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<Vec<String>>> {
    let keys: Vec<(String,)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT storage_key FROM knowledge_documents WHERE workspace_id = $1 AND livemode = $2 AND collection_id = $3"
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    for table in ["knowledge_passages", "knowledge_documents"] {
        let sql = sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE workspace_id = $1 AND livemode = $2 AND collection_id = $3"
        ));
        execute!(c, sqlx::query(sql).bind_scope(scope).bind(id))?;
    }
    let done = execute!(
        c,
        sqlx::query("DELETE FROM knowledge_collections WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    Ok((done == 1).then(|| keys.into_iter().map(|(k,)| k).collect()))
}

/// A document to add (its content is already in file storage).
#[derive(Debug, Clone)]
pub struct NewDocument<'a> {
    pub collection_id: i64,
    pub title: &'a str,
    pub source: Option<&'a str>,
    pub content_type: &'a str,
    pub bytes: i64,
    pub storage_key: &'a str,
}

/// Inserts a document as `processing` and counts it in its collection.
pub async fn insert_document(
    c: &mut impl AsHandle,
    scope: Scope,
    d: &NewDocument<'_>,
) -> StoreResult<KnowledgeDocument> {
    let now = Timestamp::now();
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO knowledge_documents (workspace_id, livemode, collection_id, title, source, content_type, status,
            bytes, storage_key, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'processing', $7, $8, $9, $9) RETURNING {DOCUMENT_COLUMNS}"
    ));
    let row: DocumentRow = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(d.collection_id)
            .bind(d.title)
            .bind(d.source)
            .bind(d.content_type)
            .bind(d.bytes)
            .bind(d.storage_key)
            .bind(now)
    )?;
    adjust_collection(c, scope, d.collection_id, 1, 0, 0).await?;
    Ok(row.into())
}

async fn adjust_collection(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    documents: i64,
    passages: i64,
    words: i64,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE knowledge_collections SET document_count = document_count + $4,
                passage_count = passage_count + $5, word_count = word_count + $6, updated_at = $7
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
        )
        .bind_scope(scope)
        .bind(id)
        .bind(documents)
        .bind(passages)
        .bind(words)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Reads a document of collection `collection_id`.
pub async fn get_document(
    c: &mut impl AsHandle,
    scope: Scope,
    collection_id: i64,
    id: i64,
) -> StoreResult<Option<KnowledgeDocument>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {DOCUMENT_COLUMNS} FROM knowledge_documents
         WHERE workspace_id = $1 AND livemode = $2 AND collection_id = $3 AND id = $4"
    ));
    let row: Option<DocumentRow> =
        fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(collection_id).bind(id))?;
    Ok(row.map(Into::into))
}

/// A document's storage key (where its content waits for processing).
pub async fn storage_key(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<String>> {
    let row: Option<(String,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT storage_key FROM knowledge_documents WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    Ok(row.map(|(k,)| k))
}

pub async fn list_documents(
    c: &mut impl AsHandle,
    scope: Scope,
    collection_id: i64,
    page: Page,
) -> StoreResult<(Vec<KnowledgeDocument>, i64)> {
    let mut w = Where::scoped(scope, "d");
    w.and("d.collection_id = ?", [Arg::I64(collection_id)]);
    let columns = prefixed(DOCUMENT_COLUMNS, "d");
    let (rows, total): (Vec<DocumentRow>, i64) =
        super::newest_page(c, "knowledge_documents d", &columns, &w, page).await?;
    Ok((rows.into_iter().map(Into::into).collect(), total))
}

/// Deletes a document and its passages; its storage key.
pub async fn delete_document(
    c: &mut impl AsHandle,
    scope: Scope,
    collection_id: i64,
    id: i64,
) -> StoreResult<Option<String>> {
    let Some(key) = storage_key(c, scope, id).await? else { return Ok(None) };
    let Some(document) = get_document(c, scope, collection_id, id).await? else { return Ok(None) };
    let (words,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(words), 0) AS BIGINT) FROM knowledge_passages
             WHERE workspace_id = $1 AND livemode = $2 AND document_id = $3"
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    execute!(
        c,
        sqlx::query("DELETE FROM knowledge_passages WHERE workspace_id = $1 AND livemode = $2 AND document_id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    execute!(
        c,
        sqlx::query("DELETE FROM knowledge_documents WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    adjust_collection(c, scope, collection_id, -1, -document.passage_count, -words).await?;
    Ok(Some(key))
}

/// A passage to store: its text, its indexed words, and its length in words.
#[derive(Debug, Clone)]
pub struct NewPassage {
    pub text: String,
    pub terms: String,
    pub words: i64,
}

/// A processed document's passages.
pub async fn document_ready(
    c: &mut impl AsHandle,
    scope: Scope,
    document: &KnowledgeDocument,
    passages: &[NewPassage],
) -> StoreResult<bool> {
    let done = execute!(
        c,
        sqlx::query(
            "UPDATE knowledge_documents SET status = 'ready', passage_count = $4, updated_at = $5
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status = 'processing'"
        )
        .bind_scope(scope)
        .bind(document.id)
        .bind(passages.len() as i64)
        .bind(Timestamp::now())
    )?;
    if done == 0 {
        return Ok(false);
    }
    for (position, p) in passages.iter().enumerate() {
        execute!(
            c,
            sqlx::query(
                "INSERT INTO knowledge_passages (workspace_id, livemode, collection_id, document_id, position, text,
                    terms, words)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
            )
            .bind_scope(scope)
            .bind(document.collection_id)
            .bind(document.id)
            .bind(position as i64)
            .bind(&p.text)
            .bind(&p.terms)
            .bind(p.words)
        )?;
    }
    let words: i64 = passages.iter().map(|p| p.words).sum();
    adjust_collection(c, scope, document.collection_id, 0, passages.len() as i64, words).await?;
    Ok(true)
}

/// Marks a document `failed` with why.
pub async fn document_failed(c: &mut impl AsHandle, scope: Scope, id: i64, error: &str) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE knowledge_documents SET status = 'failed', error = $4, updated_at = $5
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND status = 'processing'"
        )
        .bind_scope(scope)
        .bind(id)
        .bind(error)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Which of `ids` are collections of the scope.
pub async fn existing(c: &mut impl AsHandle, scope: Scope, ids: &[i64]) -> StoreResult<Vec<i64>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT id FROM knowledge_collections WHERE workspace_id = $1 AND livemode = $2 AND id IN ({})",
        id_list(ids)
    ));
    let rows: Vec<(i64,)> = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope))?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// A collection's size, for BM25's averages, and its version (its
/// `updated_at` moves whenever a document is added or removed).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CollectionSize {
    pub id: i64,
    pub passage_count: i64,
    pub word_count: i64,
    pub updated_at: Timestamp,
}

/// The sizes of the collections `ids` (those of the scope).
pub async fn sizes(c: &mut impl AsHandle, scope: Scope, ids: &[i64]) -> StoreResult<Vec<CollectionSize>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT id, passage_count, word_count, updated_at FROM knowledge_collections
         WHERE workspace_id = $1 AND livemode = $2 AND id IN ({}) ORDER BY id",
        id_list(ids)
    ));
    Ok(fetch_all!(c, sqlx::query_as(sql).bind_scope(scope))?)
}

/// A passage that matched, with its document's title.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Candidate {
    pub id: i64,
    pub document_id: i64,
    pub title: String,
    pub text: String,
    /// The indexed words (for term frequencies).
    pub terms: String,
    pub words: i64,
}

/// Up to `limit` passages of the collections matching any of `terms`
/// (folded words): best first by the backend's own ranking if `ranked`,
/// else the first the index finds (cheap however many match).
pub async fn candidates(
    c: &mut impl AsHandle,
    scope: Scope,
    ids: &[i64],
    terms: &[String],
    limit: i64,
    ranked: bool,
) -> StoreResult<Vec<Candidate>> {
    if ids.is_empty() || terms.is_empty() {
        return Ok(Vec::new());
    }
    let rows = match c.handle() {
        Handle::Sqlite(conn) => {
            let order = if ranked { "rank" } else { "rowid" };
            let sql = sqlx::AssertSqlSafe(format!(
                "SELECT p.id, p.document_id, d.title, p.text, p.terms, p.words
                 FROM (SELECT rowid AS id, {order} AS position FROM knowledge_passages_fts
                       WHERE knowledge_passages_fts MATCH $1 ORDER BY {order} LIMIT $2) m
                 JOIN knowledge_passages p ON p.id = m.id
                 JOIN knowledge_documents d ON d.id = p.document_id
                 ORDER BY m.position",
            ));
            let expr = format!("{} AND terms : ({})", fts_scope(scope, ids), fts_words(terms, " OR "));
            sqlx::query_as(sql).bind(expr).bind(limit).fetch_all(conn).await?
        }
        Handle::Postgres(conn) => {
            let sql = sqlx::AssertSqlSafe(format!(
                "SELECT p.id, p.document_id, d.title, p.text, p.terms, p.words
                 FROM knowledge_passages p JOIN knowledge_documents d ON d.id = p.document_id
                 WHERE p.workspace_id = $1 AND p.livemode = $2 AND p.collection_id IN ({})
                   AND p.search @@ to_tsquery('simple', $3)
                 ORDER BY {order} LIMIT $4",
                id_list(ids),
                order = if ranked { "ts_rank(p.search, to_tsquery('simple', $3)) DESC, p.id" } else { "p.id" },
            ));
            sqlx::query_as(sql).bind_scope(scope).bind(ts_words(terms, " | ")).bind(limit).fetch_all(conn).await?
        }
    };
    Ok(rows)
}

/// For each term, the collections' passages containing it.
pub async fn document_frequencies(
    c: &mut impl AsHandle,
    scope: Scope,
    ids: &[i64],
    terms: &[String],
) -> StoreResult<Vec<i64>> {
    let mut out = Vec::with_capacity(terms.len());
    for term in terms {
        let term = std::slice::from_ref(term);
        let (n,): (i64,) = match c.handle() {
            Handle::Sqlite(conn) => {
                let expr = format!("{} AND terms : ({})", fts_scope(scope, ids), fts_words(term, ""));
                sqlx::query_as("SELECT COUNT(*) FROM knowledge_passages_fts WHERE knowledge_passages_fts MATCH $1")
                    .bind(expr)
                    .fetch_one(conn)
                    .await?
            }
            Handle::Postgres(conn) => {
                let sql = sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM knowledge_passages
                     WHERE workspace_id = $1 AND livemode = $2 AND collection_id IN ({})
                       AND search @@ to_tsquery('simple', $3)",
                    id_list(ids)
                ));
                sqlx::query_as(sql).bind_scope(scope).bind(ts_words(term, "")).fetch_one(conn).await?
            }
        };
        out.push(n);
    }
    Ok(out)
}

/// `1, 2, 3`: ids are integers, so the list is safe to splice.
fn id_list(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// The FTS5 scope and collection filter on the `search_tags` column.
fn fts_scope(scope: Scope, ids: &[i64]) -> String {
    let collections: Vec<String> = ids.iter().map(|id| format!("\"c{id}\"")).collect();
    format!(
        "search_tags : (\"s{}x{}\" AND ({}))",
        scope.workspace_id,
        scope.livemode() as i64,
        collections.join(" OR ")
    )
}

/// Terms (letters and digits only, by construction) quoted for FTS5.
fn fts_words(terms: &[String], join: &str) -> String {
    terms.iter().map(|t| format!("\"{}\"", t.replace('"', ""))).collect::<Vec<_>>().join(join)
}

/// Terms as a PostgreSQL tsquery.
fn ts_words(terms: &[String], join: &str) -> String {
    terms.iter().map(|t| format!("'{}'", t.replace('\'', ""))).collect::<Vec<_>>().join(join)
}

fn prefixed(columns: &str, alias: &str) -> String {
    columns.split(", ").map(|c| format!("{alias}.{}", c.trim())).collect::<Vec<_>>().join(", ")
}
