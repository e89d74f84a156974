//! Canned responses (`/api/v1/canned-responses`): the team's saved replies,
//! found in the composer by typing `/` and their short code. Their
//! `{{contact.*}}` placeholders are filled by whoever picks one (the
//! dashboard fills them from the conversation's contact).

use parley_domain::Scope;
use parley_domain::conversation::CannedResponse;
use parley_domain::event::EventType;
use parley_domain::ids::CannedResponseId;
use parley_domain::validation::{Page, Parsed, QueryReader, loc, parse_object, string};
use parley_store::repo::{canned_responses as repo, events};
use parley_store::{StoreError, Tx};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::labels::word;
use crate::{ServiceError, ServiceResult, Services, event_data};

/// At most this many per workspace and mode.
pub const MAX_RESPONSES: i64 = 200;
pub const SHORT_CODE_MAX: usize = 50;
pub const CONTENT_MAX: usize = 10_000;

/// `POST /api/v1/canned-responses`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"short_code": "refund", "content": "Hi {{contact.first_name}}, your refund is on its way: allow 3–5 days."}))]
pub struct CreateCannedResponse {
    /// 1–50 letters, digits, `-` or `_`; unique in the workspace and mode
    /// whatever its case.
    #[schema(min_length = 1, max_length = 50, pattern = r"^[A-Za-z0-9_-]+$")]
    pub short_code: String,
    /// 1–10,000 characters.
    #[schema(min_length = 1, max_length = 10000)]
    pub content: String,
}

/// `PATCH /api/v1/canned-responses/{id}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"content": "Hi {{contact.first_name}}, the refund is on its way."}))]
pub struct UpdateCannedResponse {
    #[schema(nullable = false, min_length = 1, max_length = 50, pattern = r"^[A-Za-z0-9_-]+$")]
    pub short_code: Option<String>,
    #[schema(nullable = false, min_length = 1, max_length = 10000)]
    pub content: Option<String>,
}

pub fn parse_create(body: Value) -> Parsed<CreateCannedResponse> {
    parse_object(body, loc(&["body"]), |r| {
        let short_code = r.required("short_code", word(SHORT_CODE_MAX));
        let content = r.required("content", string(1, CONTENT_MAX));
        Some(CreateCannedResponse { short_code: short_code?, content: content? })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdateCannedResponse> {
    parse_object(body, loc(&["body"]), |r| {
        Some(UpdateCannedResponse {
            short_code: r.optional("short_code", word(SHORT_CODE_MAX)),
            content: r.optional("content", string(1, CONTENT_MAX)),
        })
    })
}

/// `?q=`: short codes or content containing it.
pub struct CannedFilter {
    pub q: Option<String>,
}

pub fn parse_filter(q: &mut QueryReader) -> CannedFilter {
    CannedFilter { q: q.string("q", 1, 100) }
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Canned response", id)
}

fn code_taken(code: &str) -> ServiceError {
    ServiceError::Conflict(format!(
        "A canned response with short code {code:?} already exists (short codes are unique whatever their case)"
    ))
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &CannedFilter,
    page: Page,
) -> ServiceResult<(Vec<CannedResponse>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::page(&mut c, scope, filter.q.as_deref(), page).await?)
}

pub async fn get(svc: &Services, scope: Scope, id: CannedResponseId) -> ServiceResult<CannedResponse> {
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id.get()).await?.ok_or_else(|| not_found(id.get()))
}

pub async fn create(tx: &mut Tx, scope: Scope, input: CreateCannedResponse) -> ServiceResult<CannedResponse> {
    if repo::count(tx, scope).await? >= MAX_RESPONSES {
        return Err(ServiceError::Conflict(format!(
            "A workspace has at most {MAX_RESPONSES} canned responses per mode"
        )));
    }
    if repo::by_code(tx, scope, &input.short_code).await?.is_some() {
        return Err(code_taken(&input.short_code));
    }
    let saved = match repo::insert(tx, scope, &input.short_code, &input.content).await {
        Ok(saved) => saved,
        Err(StoreError::UniqueViolation) => return Err(code_taken(&input.short_code)),
        Err(e) => return Err(e.into()),
    };
    events::append(tx, scope, EventType::CannedResponseCreated, event_data(&saved)?).await?;
    Ok(saved)
}

pub async fn update(
    tx: &mut Tx,
    scope: Scope,
    id: CannedResponseId,
    input: UpdateCannedResponse,
) -> ServiceResult<CannedResponse> {
    let id = id.get();
    let current = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let short_code = input.short_code.unwrap_or(current.short_code);
    let content = input.content.unwrap_or(current.content);
    if repo::by_code(tx, scope, &short_code).await?.is_some_and(|other| other.id != id) {
        return Err(code_taken(&short_code));
    }
    let saved = match repo::update(tx, scope, id, &short_code, &content).await {
        Ok(saved) => saved.ok_or_else(|| not_found(id))?,
        Err(StoreError::UniqueViolation) => return Err(code_taken(&short_code)),
        Err(e) => return Err(e.into()),
    };
    events::append(tx, scope, EventType::CannedResponseUpdated, event_data(&saved)?).await?;
    Ok(saved)
}

pub async fn delete(tx: &mut Tx, scope: Scope, id: CannedResponseId) -> ServiceResult<()> {
    let id = id.get();
    let gone = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    repo::delete(tx, scope, id).await?;
    events::append(tx, scope, EventType::CannedResponseDeleted, event_data(&gone)?).await?;
    Ok(())
}
