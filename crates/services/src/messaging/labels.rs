//! Labels a team puts on conversations (`/api/v1/labels`), and the labels
//! on one conversation. Names follow Chatwoot's rule (letters, digits, `-`
//! and `_`, no spaces) so a name is one word in a filter or a URL; they are
//! unique in a workspace and mode whatever their case.

use parley_domain::Scope;
use parley_domain::conversation::{Conversation, Label};
use parley_domain::event::EventType;
use parley_domain::ids::{ConversationId, LabelId};
use parley_domain::validation::{FieldError, LocPart, Page, Parsed, list_of, loc, parse_object, string};
use parley_store::repo::labels::LabelFields;
use parley_store::repo::{conversations as conversation_repo, events, labels as repo};
use parley_store::{StoreError, Tx};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, event_data};

/// At most this many labels in a workspace and mode.
pub const MAX_LABELS: i64 = 200;
/// At most this many labels on one conversation.
pub const MAX_PER_CONVERSATION: usize = 20;
pub const NAME_MAX: usize = 50;
pub const DESCRIPTION_MAX: usize = 200;
/// The colours given to labels created without one, in turn (each reads
/// with white text at WCAG AA).
const PALETTE: [&str; 8] = ["#1d4ed8", "#047857", "#b45309", "#b91c1c", "#6d28d9", "#0e7490", "#be185d", "#4b5563"];

/// `POST /api/v1/labels`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "billing", "color": "#1d4ed8", "description": "Invoices, refunds and plans"}))]
pub struct CreateLabel {
    /// 1–50 letters, digits, `-` or `_`; unique in the workspace and mode
    /// whatever its case.
    #[schema(min_length = 1, max_length = 50, pattern = r"^[A-Za-z0-9_-]+$")]
    pub name: String,
    /// `#rrggbb`; one of a palette in turn when left out or null.
    #[schema(nullable, pattern = r"^#[0-9A-Fa-f]{6}$")]
    pub color: Option<String>,
    /// Up to 200 characters, or null.
    #[schema(max_length = 200, nullable)]
    pub description: Option<String>,
}

/// `PATCH /api/v1/labels/{id}`: renaming a label renames it on every
/// conversation it is on.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"color": "#047857"}))]
pub struct UpdateLabel {
    #[schema(nullable = false, min_length = 1, max_length = 50, pattern = r"^[A-Za-z0-9_-]+$")]
    pub name: Option<String>,
    #[schema(nullable = false, pattern = r"^#[0-9A-Fa-f]{6}$")]
    pub color: Option<String>,
    #[schema(value_type = Option<String>, max_length = 200, nullable)]
    pub description: Option<Option<String>>,
}

/// `PUT /api/v1/conversations/{id}/labels`: the conversation's labels,
/// replacing those it had.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"labels": ["billing"]}))]
pub struct SetLabels {
    /// Names of existing labels (any case), at most 20, each once; `[]`
    /// takes every label off.
    #[schema(schema_with = parley_domain::schema::label_names)]
    pub labels: Vec<String>,
}

/// One word of 1–`max` letters, digits, `-` or `_` (a label's name, a
/// canned response's short code): typed in filters and after `/`.
pub(crate) fn word(max: usize) -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    move |v, l| {
        let s = string(1, max)(v, l)?;
        if s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            Ok(s)
        } else {
            Err(vec![FieldError::new(l.to_vec(), "value_error.word", "use letters, digits, - and _ only (no spaces)")])
        }
    }
}

fn name() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    word(NAME_MAX)
}

fn color() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let s = string(1, 7)(v, l)?;
        if s.len() == 7 && s.starts_with('#') && s[1..].bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(s.to_ascii_lowercase())
        } else {
            Err(vec![FieldError::new(l.to_vec(), "value_error.color", "use a colour like #1d4ed8")])
        }
    }
}

pub fn parse_create(body: Value) -> Parsed<CreateLabel> {
    parse_object(body, loc(&["body"]), |r| {
        let name = r.required("name", name());
        let color = r.nullable("color", color()).flatten();
        let description = r.nullable("description", string(0, DESCRIPTION_MAX)).flatten();
        Some(CreateLabel { name: name?, color, description })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdateLabel> {
    parse_object(body, loc(&["body"]), |r| {
        Some(UpdateLabel {
            name: r.optional("name", name()),
            color: r.optional("color", color()),
            description: r.nullable("description", string(0, DESCRIPTION_MAX)),
        })
    })
}

pub fn parse_set(body: Value) -> Parsed<SetLabels> {
    parse_object(body, loc(&["body"]), |r| {
        let names = r.required("labels", list_of(MAX_PER_CONVERSATION, |v, l| name()(v, l)))?;
        let mut seen = std::collections::HashSet::new();
        if !names.iter().all(|n| seen.insert(n.to_lowercase())) {
            r.push_error(FieldError::new(
                r.loc_of("labels"),
                "value_error.list.unique_items",
                "the list has duplicated items",
            ));
            return None;
        }
        Some(SetLabels { labels: names })
    })
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Label", id)
}

fn name_taken(name: &str) -> ServiceError {
    ServiceError::Conflict(format!("A label named {name:?} already exists (names are unique whatever their case)"))
}

/// The scope's labels by name.
pub async fn list(svc: &Services, scope: Scope, page: Page) -> ServiceResult<(Vec<Label>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::page(&mut c, scope, page).await?)
}

pub async fn get(svc: &Services, scope: Scope, id: LabelId) -> ServiceResult<Label> {
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id.get()).await?.ok_or_else(|| not_found(id.get()))
}

pub async fn create(tx: &mut Tx, scope: Scope, input: CreateLabel) -> ServiceResult<Label> {
    let count = repo::count(tx, scope).await?;
    if count >= MAX_LABELS {
        return Err(ServiceError::Conflict(format!("A workspace has at most {MAX_LABELS} labels per mode")));
    }
    if repo::by_name(tx, scope, &input.name).await?.is_some() {
        return Err(name_taken(&input.name));
    }
    let color = input.color.unwrap_or_else(|| PALETTE[count as usize % PALETTE.len()].to_owned());
    let fields = LabelFields { name: input.name, color, description: input.description };
    let label = match repo::insert(tx, scope, &fields).await {
        Ok(label) => label,
        Err(StoreError::UniqueViolation) => return Err(name_taken(&fields.name)),
        Err(e) => return Err(e.into()),
    };
    events::append(tx, scope, EventType::LabelCreated, event_data(&label)?).await?;
    Ok(label)
}

pub async fn update(tx: &mut Tx, scope: Scope, id: LabelId, input: UpdateLabel) -> ServiceResult<Label> {
    let id = id.get();
    // Locked: a conversation being labelled meanwhile waits, then shows the new name.
    let current = repo::get_locked(tx, scope, id, false).await?.ok_or_else(|| not_found(id))?;
    let renamed = input.name.as_ref().is_some_and(|n| *n != current.name);
    if let Some(name) = input.name.as_ref().filter(|_| renamed)
        && repo::by_name(tx, scope, name).await?.is_some_and(|other| other.id != id)
    {
        return Err(name_taken(name));
    }
    let fields = LabelFields {
        name: input.name.unwrap_or(current.name),
        color: input.color.unwrap_or(current.color),
        description: input.description.unwrap_or(current.description),
    };
    let label = match repo::update(tx, scope, id, &fields).await {
        Ok(label) => label.ok_or_else(|| not_found(id))?,
        Err(StoreError::UniqueViolation) => return Err(name_taken(&fields.name)),
        Err(e) => return Err(e.into()),
    };
    if renamed {
        relabel(tx, scope, id).await?;
    }
    events::append(tx, scope, EventType::LabelUpdated, event_data(&label)?).await?;
    Ok(label)
}

/// Deletes a label and takes it off every conversation.
pub async fn delete(tx: &mut Tx, scope: Scope, id: LabelId) -> ServiceResult<()> {
    let id = id.get();
    let label = repo::get_locked(tx, scope, id, false).await?.ok_or_else(|| not_found(id))?;
    let on = repo::conversation_ids(tx, scope, id).await?;
    repo::delete(tx, scope, id).await?;
    for conversation_id in on {
        changed_labels(tx, scope, conversation_id).await?;
    }
    events::append(tx, scope, EventType::LabelDeleted, event_data(&label)?).await?;
    Ok(())
}

/// The conversations label `id` is on show its new name.
async fn relabel(tx: &mut Tx, scope: Scope, id: i64) -> ServiceResult<()> {
    for conversation_id in repo::conversation_ids(tx, scope, id).await? {
        changed_labels(tx, scope, conversation_id).await?;
    }
    Ok(())
}

/// Rebuilds a conversation's label names (stored with it, sorted) and
/// tells listeners it changed.
async fn changed_labels(tx: &mut Tx, scope: Scope, conversation_id: i64) -> ServiceResult<Conversation> {
    // The conversation is locked before its labels are read: on PostgreSQL a
    // rename reading them while a labelling of it is still open would
    // otherwise write back the names from before that labelling.
    conversation_repo::get_locked(tx, scope, conversation_id).await?;
    repo::refresh_names(tx, scope, conversation_id).await?;
    let updated = conversation_repo::get(tx, scope, conversation_id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Conversation", conversation_id))?;
    events::append(tx, scope, EventType::ConversationUpdated, event_data(&updated)?).await?;
    Ok(updated)
}

/// Puts exactly the labels named in `input` on conversation `id`; an
/// unknown name is a 422 at its place in the list.
pub async fn set_on_conversation(
    tx: &mut Tx,
    scope: Scope,
    id: ConversationId,
    input: SetLabels,
) -> ServiceResult<Conversation> {
    let id = id.get();
    if conversation_repo::get(tx, scope, id).await?.is_none() {
        return Err(ServiceError::not_found("Conversation", id));
    }
    // On PostgreSQL the labels used are held against a rename or deletion
    // until this commits, and then the conversation is locked: one labelling
    // of it at a time. Labels first, as a rename takes its label and then the
    // conversations it is on: one lock order, no deadlock.
    let mut ids = Vec::with_capacity(input.labels.len());
    let mut unknown = Vec::new();
    for (i, name) in input.labels.iter().enumerate() {
        let found = match repo::by_name(tx, scope, name).await? {
            Some(label) => repo::get_locked(tx, scope, label.id, true).await?,
            None => None,
        };
        match found {
            Some(label) => ids.push(label.id),
            None => unknown.push(FieldError::not_found(
                loc(&["body", "labels"]).into_iter().chain([LocPart::Index(i)]).collect(),
                &format!("Label {name:?}"),
            )),
        }
    }
    if !unknown.is_empty() {
        return Err(ServiceError::Validation(unknown));
    }
    let current = conversation_repo::get_locked(tx, scope, id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Conversation", id))?;
    let mut names: Vec<String> = input.labels.iter().map(|n| n.to_lowercase()).collect();
    names.sort();
    let mut had: Vec<String> = current.labels.iter().map(|n| n.to_lowercase()).collect();
    had.sort();
    if names == had {
        return Ok(current);
    }
    repo::set_on_conversation(tx, scope, id, &ids).await?;
    changed_labels(tx, scope, id).await
}
