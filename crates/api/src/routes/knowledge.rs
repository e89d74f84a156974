//! `/api/v1/knowledge-collections`: documents agents answer from, and the
//! query that shows what an agent would retrieve.

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use parley_domain::ids::{CollectionId, DocumentId};
use parley_domain::knowledge::{KnowledgeCollection, KnowledgeDocument, KnowledgeHit};
use parley_domain::validation::{FieldError, Parsed, QueryReader, loc};
use parley_services::knowledge::{self, CollectionInput, NewContent, QueryRequest, TextDocument};
use serde::Serialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, NoFilter, Params, write};
use crate::middleware::read_body;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_collections, create_collection))
        .routes(routes!(get_collection, update_collection, delete_collection))
        .routes(routes!(list_documents, add_document))
        .routes(routes!(get_document, delete_document))
        .routes(routes!(query_collection))
}

/// A collection as created.
pub struct NewCollection(CollectionInput);
/// A collection's changes.
pub struct CollectionChanges(CollectionInput);

impl FromBody for NewCollection {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        knowledge::parse_collection(body, true).map(NewCollection)
    }
}

impl FromBody for CollectionChanges {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        knowledge::parse_collection(body, false).map(CollectionChanges)
    }
}

/// List knowledge collections, newest first.
#[utoipa::path(
    get, path = "/api/v1/knowledge-collections", tag = "Knowledge",
    params(PageParams),
    responses((status = 200, body = Items<KnowledgeCollection>), (status = 422, body = ValidationErrorBody))
)]
async fn list_collections(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<KnowledgeCollection>>, ApiError> {
    Ok(Json(Items::new(knowledge::list(&s.services, auth.scope(), q.page).await?, q.page)))
}

/// Create a knowledge collection.
#[utoipa::path(
    post, path = "/api/v1/knowledge-collections", tag = "Knowledge",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; retries with the same key replay the first response.")),
    request_body = knowledge::NewCollectionInput,
    responses((status = 201, body = KnowledgeCollection), (status = 422, body = ValidationErrorBody))
)]
async fn create_collection(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<NewCollection>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let JsonBody { value: NewCollection(input), canonical } = body;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        knowledge::create(work, scope, input).await
    })
    .await
}

/// Get a knowledge collection.
#[utoipa::path(
    get, path = "/api/v1/knowledge-collections/{collection_id}", tag = "Knowledge",
    params(("collection_id" = i64, Path)),
    responses((status = 200, body = KnowledgeCollection), (status = 404, body = ErrorBody, example = json!({"detail": "Knowledge collection 42 not found"})))
)]
async fn get_collection(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
) -> Result<Json<KnowledgeCollection>, ApiError> {
    let [id] = path.0;
    Ok(Json(knowledge::get(&s.services, auth.scope(), CollectionId(id)).await?))
}

/// Rename or describe a knowledge collection.
#[utoipa::path(
    patch, path = "/api/v1/knowledge-collections/{collection_id}", tag = "Knowledge",
    params(("collection_id" = i64, Path)),
    request_body = CollectionInput,
    responses((status = 200, body = KnowledgeCollection), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn update_collection(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<CollectionChanges>,
) -> Result<Json<KnowledgeCollection>, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    let CollectionChanges(input) = body.value;
    Ok(Json(
        s.services.transaction(async move |work| knowledge::update(work, scope, CollectionId(id), input).await).await?,
    ))
}

/// Delete a knowledge collection with its documents; agents that listed it
/// no longer do (each gets `agent.updated`).
#[utoipa::path(
    delete, path = "/api/v1/knowledge-collections/{collection_id}", tag = "Knowledge",
    params(("collection_id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody))
)]
async fn delete_collection(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    let keys = s.services.transaction(async move |work| knowledge::delete(work, scope, CollectionId(id)).await).await?;
    knowledge::remove_files(&s.services, keys).await;
    Ok(StatusCode::NO_CONTENT)
}

/// List a collection's documents, newest first.
#[utoipa::path(
    get, path = "/api/v1/knowledge-collections/{collection_id}/documents", tag = "Knowledge",
    params(("collection_id" = i64, Path), PageParams),
    responses((status = 200, body = Items<KnowledgeDocument>), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn list_documents(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<KnowledgeDocument>>, ApiError> {
    let [id] = path.0;
    Ok(Json(Items::new(knowledge::list_documents(&s.services, auth.scope(), CollectionId(id), q.page).await?, q.page)))
}

/// An upload: the file (titled by its name).
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documentation only; read by `DocumentBody`
struct UploadDocument {
    /// A `text/plain`, `text/markdown`, `text/html` or `application/pdf`
    /// file of at most 20 MiB (its type from the part, else its name).
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// A document's content, sent as JSON or as a multipart upload.
pub struct DocumentBody(NewContent);

/// Bytes a multipart upload may take beyond the file (boundaries, headers, title).
const MULTIPART_OVERHEAD: usize = 64 * 1024;

impl FromRequest<AppState> for DocumentBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let content_type =
            req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        if !content_type.to_ascii_lowercase().starts_with("multipart/form-data") {
            let JsonBody { value, .. } = JsonBody::<TextBody>::from_request(req, state).await?;
            return Ok(DocumentBody(value.0));
        }
        let boundary = multer::parse_boundary(&content_type)
            .map_err(|_| ApiError::bad_request("The multipart body has no boundary"))?;
        let limit = knowledge::MAX_DOCUMENT_BYTES + MULTIPART_OVERHEAD;
        let body = read_body(req.into_body(), limit).await?;
        let mut form =
            multer::Multipart::new(futures::stream::once(async move { Ok::<Bytes, std::io::Error>(body) }), boundary);
        let mut file = None;
        let malformed = |e: multer::Error| ApiError::bad_request(format!("The multipart body is malformed: {e}"));
        while let Some(field) = form.next_field().await.map_err(malformed)? {
            match field.name() {
                Some("file") => {
                    let name = field.file_name().map(str::to_owned);
                    let kind = field.content_type().map(|m| m.essence_str().to_owned());
                    file = Some((name, kind, field.bytes().await.map_err(malformed)?));
                }
                Some(other) => {
                    return Err(ApiError::Validation(vec![FieldError::extra(loc(&["body", other]))]));
                }
                None => return Err(ApiError::bad_request("A multipart part has no name")),
            }
        }
        let Some((name, kind, bytes)) = file else {
            return Err(ApiError::Validation(vec![FieldError::missing(loc(&["body", "file"]))]));
        };
        Ok(DocumentBody(knowledge::check_upload(name, kind, bytes)?))
    }
}

/// A document sent as JSON.
pub struct TextBody(NewContent);

impl FromBody for TextBody {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        knowledge::parse_text_document(body).map(TextBody)
    }
}

/// Add a document to a collection.
///
/// Send JSON (`{title, text, content_type}`, within the request size limit)
/// or a multipart upload (`file`, titled by its name) of plain text,
/// Markdown, HTML or PDF up to 20 MiB. The document is `processing` until a
/// job has extracted its text and split it into passages (`ready`), or
/// `failed` with the reason.
#[utoipa::path(
    post, path = "/api/v1/knowledge-collections/{collection_id}/documents", tag = "Knowledge",
    params(("collection_id" = i64, Path)),
    request_body(content(
        (TextDocument = "application/json"),
        (UploadDocument = "multipart/form-data",
            encoding(("file" = (content_type = "text/plain, text/markdown, text/html, application/pdf")))),
    )),
    responses(
        (status = 202, body = KnowledgeDocument, description = "Accepted; processing"),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn add_document(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: DocumentBody,
) -> Result<(StatusCode, Json<KnowledgeDocument>), ApiError> {
    let [id] = path.0;
    let document = knowledge::add_document(&s.services, auth.scope(), CollectionId(id), body.0).await?;
    Ok((StatusCode::ACCEPTED, Json(document)))
}

/// Get a document.
#[utoipa::path(
    get, path = "/api/v1/knowledge-collections/{collection_id}/documents/{document_id}", tag = "Knowledge",
    params(("collection_id" = i64, Path), ("document_id" = i64, Path)),
    responses((status = 200, body = KnowledgeDocument), (status = 404, body = ErrorBody))
)]
async fn get_document(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<2>,
) -> Result<Json<KnowledgeDocument>, ApiError> {
    let [collection_id, id] = path.0;
    Ok(Json(knowledge::get_document(&s.services, auth.scope(), CollectionId(collection_id), DocumentId(id)).await?))
}

/// Delete a document and its passages.
#[utoipa::path(
    delete, path = "/api/v1/knowledge-collections/{collection_id}/documents/{document_id}", tag = "Knowledge",
    params(("collection_id" = i64, Path), ("document_id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody))
)]
async fn delete_document(auth: Auth, State(s): State<AppState>, path: Ids<2>) -> Result<StatusCode, ApiError> {
    let [collection_id, id] = path.0;
    let scope = auth.scope();
    let key = s
        .services
        .transaction(async move |work| {
            knowledge::delete_document(work, scope, CollectionId(collection_id), DocumentId(id)).await
        })
        .await?;
    knowledge::remove_files(&s.services, vec![key]).await;
    Ok(StatusCode::NO_CONTENT)
}

pub struct Query(Option<QueryRequest>);

impl FromQuery for Query {
    fn from_query(q: &mut QueryReader) -> Self {
        Query(knowledge::parse_query(q))
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `knowledge::parse_query`
struct QueryParams {
    /// The question, as an agent would receive it (1–500 characters).
    #[param(min_length = 1, max_length = 500)]
    q: String,
    #[param(minimum = 1, maximum = 50, default = 5)]
    limit: Option<i64>,
}

/// The passages ranked for a question.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryResults {
    pub items: Vec<KnowledgeHit>,
    /// Passages ranked: those with the question's telling words (at most 100).
    pub total: i64,
}

/// Query a collection: the passages an agent would retrieve.
///
/// The question's words (without common words such as "the" or "what")
/// are looked up, and the passages containing any of them ranked by BM25,
/// best first.
#[utoipa::path(
    get, path = "/api/v1/knowledge-collections/{collection_id}/query", tag = "Knowledge",
    params(("collection_id" = i64, Path), QueryParams),
    responses((status = 200, body = QueryResults), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn query_collection(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    params: Params<Query>,
) -> Result<Json<QueryResults>, ApiError> {
    let [id] = path.0;
    let Some(request) = params.0.0 else {
        return Err(ApiError::Validation(vec![FieldError::missing(loc(&["query", "q"]))]));
    };
    let (items, total) = knowledge::query(&s.services, auth.scope(), CollectionId(id), &request).await?;
    Ok(Json(QueryResults { items, total }))
}
