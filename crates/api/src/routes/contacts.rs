//! `/api/v1/contacts`: contacts, merging and CSV import.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures::TryStreamExt;
use parley_domain::contact::{Contact, Origin};
use parley_domain::ids::ContactId;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::crm::contact_import::{self, ImportReport};
use parley_services::crm::contacts::ContactFilter;
use parley_services::crm::contacts::{self, ContactChanges, Discover, Discovery, MergeContacts};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts, create_contact))
        .routes(routes!(get_contact, update_contact, delete_contact))
        .routes(routes!(merge_contacts))
        .routes(routes!(import_contacts))
        .routes(routes!(discover_contacts))
}

impl FromBody for Discover {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        contacts::parse_discover(body)
    }
}

/// Addresses seen in conversations that belong to no contact.
///
/// With `{"create": true}` each gets a contact with `origin: discovered`
/// (or, for a phone or email some contact already has, that contact), and
/// its conversations are linked to it.
#[utoipa::path(
    post, path = "/api/v1/contacts/discover", tag = "Contacts",
    request_body = Discover,
    responses((status = 200, body = Discovery), (status = 422, body = ValidationErrorBody))
)]
async fn discover_contacts(
    auth: Auth,
    State(s): State<AppState>,
    body: JsonBody<Discover>,
) -> Result<Json<Discovery>, ApiError> {
    let scope = auth.scope();
    let create = body.value.create.unwrap_or(false);
    let config = s.services.config().clone();
    let found = s
        .services
        .transaction(async move |work| contacts::discover(work, scope, &config.contacts, create).await)
        .await?;
    Ok(Json(found))
}

/// A create body (the display name defaults to the email or phone).
pub struct NewContact(ContactChanges);
/// An update body.
pub struct ContactUpdate(ContactChanges);

impl FromBody for NewContact {
    fn from_body(body: Value, state: &AppState) -> Parsed<Self> {
        contacts::parse_create(body, state.services.config().contacts.default_region).map(NewContact)
    }
}

impl FromBody for ContactUpdate {
    fn from_body(body: Value, state: &AppState) -> Parsed<Self> {
        contacts::parse_update(body, state.services.config().contacts.default_region).map(ContactUpdate)
    }
}

impl FromBody for MergeContacts {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        contacts::parse_merge(body)
    }
}

impl FromQuery for ContactFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        contacts::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `contacts::parse_filter`
struct ContactListParams {
    /// Part of the name, email or phone number, case-insensitive (1–200
    /// characters). Digits match the phone whatever the format ("415 555"
    /// finds +14155550100).
    #[param(min_length = 1, max_length = 200)]
    q: Option<String>,
    /// Only contacts with this tag (1–50 characters).
    #[param(min_length = 1, max_length = 50)]
    tag: Option<String>,
    /// Only contacts of this origin.
    #[param(inline)]
    origin: Option<Origin>,
    /// Only contacts changed at or after this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    updated_since: Option<String>,
}

/// List contacts, newest first.
#[utoipa::path(
    get, path = "/api/v1/contacts", tag = "Contacts",
    params(PageParams, ContactListParams),
    responses((status = 200, body = Items<Contact>), (status = 422, body = ValidationErrorBody))
)]
async fn list_contacts(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<ContactFilter>,
) -> Result<Json<Items<Contact>>, ApiError> {
    let found = contacts::list(&s.services, auth.scope(), &q.filter, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Create a contact.
///
/// `phone` and `email` are normalised (E.164; lower-case with an IDNA
/// domain) and unique in the workspace and mode, as are identities: a
/// collision is a 409 naming the contact that has it.
#[utoipa::path(
    post, path = "/api/v1/contacts", tag = "Contacts",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; a retry replays the first response.")),
    request_body = parley_services::crm::contacts::CreateContact,
    responses(
        (status = 201, body = Contact),
        (status = 409, body = ErrorBody, example = json!({"detail": "Contact 12 already has the phone number +14155550100"})),
        (status = 422, body = ValidationErrorBody, description = "Including `value_error.phone` and `value_error.email`"),
    )
)]
async fn create_contact(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<NewContact>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let JsonBody { value: NewContact(changes), canonical } = body;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        contacts::create(work, scope, Origin::Manual, changes).await
    })
    .await
}

/// Get a contact.
#[utoipa::path(
    get, path = "/api/v1/contacts/{contact_id}", tag = "Contacts",
    params(("contact_id" = i64, Path)),
    responses((status = 200, body = Contact), (status = 404, body = ErrorBody, example = json!({"detail": "Contact 42 not found"})))
)]
async fn get_contact(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Contact>, ApiError> {
    let [id] = path.0;
    Ok(Json(contacts::get(&s.services, auth.scope(), ContactId(id)).await?))
}

/// Update a contact. Absent fields stay; `null` clears; `identities`,
/// `tags` and `metadata` are replaced whole.
#[utoipa::path(
    patch, path = "/api/v1/contacts/{contact_id}", tag = "Contacts",
    params(("contact_id" = i64, Path)),
    request_body = ContactChanges,
    responses(
        (status = 200, body = Contact),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The phone, email or an identity belongs to another contact"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_contact(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<ContactUpdate>,
) -> Result<Json<Contact>, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    let ContactUpdate(changes) = body.value;
    Ok(Json(
        s.services.transaction(async move |work| contacts::update(work, scope, ContactId(id), changes).await).await?,
    ))
}

/// Delete a contact and its identities.
#[utoipa::path(
    delete, path = "/api/v1/contacts/{contact_id}", tag = "Contacts",
    params(("contact_id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody))
)]
async fn delete_contact(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    s.services.transaction(async move |work| contacts::delete(work, scope, ContactId(id)).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Merge a duplicate contact into a primary one, in one transaction.
///
/// The primary keeps its values and takes the duplicate's where it has
/// none; tags and metadata keys are combined; identities, conversations and
/// calls move to the primary; the duplicate is deleted. Emits
/// `contact.merged` `{primary_id, duplicate_id, contact}`.
#[utoipa::path(
    post, path = "/api/v1/contacts/merge", tag = "Contacts",
    request_body = MergeContacts,
    responses(
        (status = 200, body = Contact, description = "The primary after the merge"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn merge_contacts(
    auth: Auth,
    State(s): State<AppState>,
    body: JsonBody<MergeContacts>,
) -> Result<Json<Contact>, ApiError> {
    let scope = auth.scope();
    let input = body.value;
    Ok(Json(s.services.transaction(async move |work| contacts::merge(work, scope, input).await).await?))
}

/// The body of an import: CSV text in the `contacts-csv` format described
/// on the operation (a header row naming known columns, then data rows).
pub struct ContactsCsv;

impl utoipa::PartialSchema for ContactsCsv {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::Custom("contacts-csv".into())))
            .min_length(Some(1))
            .into()
    }
}

impl utoipa::ToSchema for ContactsCsv {}

/// Import contacts from CSV (`Content-Type: text/csv`).
///
/// A header row names the columns, from `display_name`, `phone`, `email`,
/// `notes` and `tags` (tags separated by `;`, `|` or `,`). Every row is
/// validated first: any bad row gives a 422 listing each one (`loc`
/// `["body", "rows", N, field]`, N counting data rows from 1) and nothing
/// is written. Rows that match a contact by phone or email update it (name
/// and notes replace, tags are added); the others create contacts with
/// `origin: import`. Up to 50,000 rows, streamed.
#[utoipa::path(
    post, path = "/api/v1/contacts/import", tag = "Contacts",
    request_body(content = ContactsCsv, content_type = "text/csv", description = "CSV with a header row"),
    responses(
        (status = 200, body = ImportReport),
        (status = 400, body = ErrorBody, description = "Not readable as CSV"),
        (status = 413, body = ErrorBody),
        (status = 415, body = ErrorBody, description = "The body is not text/csv"),
        (status = 422, body = ValidationErrorBody, description = "Bad rows or columns; nothing was written"),
    )
)]
async fn import_contacts(auth: Auth, State(s): State<AppState>, req: Request) -> Result<Json<ImportReport>, ApiError> {
    let is_csv = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("text/csv"));
    if !is_csv {
        return Err(ApiError::Status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Send the CSV with Content-Type: text/csv".into(),
        ));
    }
    let limit = s.config.max_import_bytes;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    // Stream the body into the CSV reader, noting if it outgrows the limit.
    let too_large = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&too_large);
    let body = axum::body::Body::new(http_body_util::Limited::new(req.into_body(), limit));
    let stream = body.into_data_stream().map_err(move |e| {
        let e = e.into_inner();
        if e.is::<http_body_util::LengthLimitError>() {
            flag.store(true, Ordering::Relaxed);
        }
        std::io::Error::other(e)
    });
    let result = contact_import::import(&s.services, auth.scope(), tokio_util::io::StreamReader::new(stream)).await;
    if too_large.load(Ordering::Relaxed) {
        return Err(ApiError::payload_too_large(limit));
    }
    Ok(Json(result?))
}
