//! Prompt blocks: templated prompt text, versioned on every change.

use parley_domain::Scope;
use parley_domain::event::EventType;
use parley_domain::ids::PromptBlockId;
use parley_domain::prompt::{BlockKind, PromptBlock, PromptBlockVersion, is_variable_name, placeholders};
use parley_domain::slug::slugify;
use parley_domain::validation::{
    FieldError, LocPart, Page, Parsed, QueryReader, enum_value, list_of, loc, parse_object, string,
};
use parley_store::Tx;
use parley_store::repo::prompt_blocks::{self as repo, BlockFields};
use parley_store::repo::{agents, events};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, event_data, free_slug};

/// The filters lists take (and the version key their cache follows).
pub use parley_store::repo::prompt_blocks::{BlockFilter, VERSION_KEY};

const NAME_MAX: usize = 200;
const CONTENT_MAX: usize = 100_000;
const MAX_VARIABLES: usize = 100;

/// `POST /api/v1/prompt-blocks`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Persona", "kind": "persona", "content": "You are {{agent_name}}.", "variables": ["agent_name"]}))]
pub struct CreatePromptBlock {
    /// 1–200 characters; the slug is derived from it.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// `persona`, `instruction`, `knowledge`, `guardrail`, `greeting` or `other` (default).
    #[schema(schema_with = parley_domain::schema::block_kind)]
    pub kind: Option<BlockKind>,
    /// 1–100,000 characters. Every `{{placeholder}}` must be declared in `variables`.
    #[schema(min_length = 1, max_length = 100000)]
    pub content: String,
    /// Variable names (`[A-Za-z_][A-Za-z0-9_]*`, up to 64 characters), at most 100, no repeats.
    #[schema(schema_with = parley_domain::schema::variable_names)]
    pub variables: Option<Vec<String>>,
}

/// `PATCH /api/v1/prompt-blocks/{block_id}`. Any change saves a new version.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"content": "You are {{agent_name}}, friendly and brief."}))]
pub struct UpdatePromptBlock {
    /// 1–200 characters.
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    pub name: Option<String>,
    #[schema(schema_with = parley_domain::schema::block_kind)]
    pub kind: Option<BlockKind>,
    /// 1–100,000 characters. Every `{{placeholder}}` must be declared in the
    /// block's variables (as updated).
    #[schema(nullable = false, min_length = 1, max_length = 100000)]
    pub content: Option<String>,
    /// Replaces the whole list.
    #[schema(schema_with = parley_domain::schema::variable_names)]
    pub variables: Option<Vec<String>>,
}

fn variables() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<String>> {
    |v, l| {
        let names = list_of(MAX_VARIABLES, |v, l| {
            let s = string(1, 64)(v, l)?;
            if is_variable_name(&s) {
                Ok(s)
            } else {
                Err(vec![FieldError::new(
                    l.to_vec(),
                    "value_error.variable_name",
                    "use words of letters, digits and underscores (not starting with a digit), joined by dots",
                )])
            }
        })(v, l)?;
        let mut seen = std::collections::HashSet::new();
        if names.iter().all(|n| seen.insert(n.clone())) {
            Ok(names)
        } else {
            Err(vec![FieldError::new(l.to_vec(), "value_error.list.unique_items", "the list has duplicated items")])
        }
    }
}

pub fn parse_create(body: Value) -> Parsed<CreatePromptBlock> {
    parse_object(body, loc(&["body"]), |r| {
        let name = r.required("name", string(1, NAME_MAX));
        let kind = r.optional("kind", enum_value::<BlockKind>());
        let content = r.required("content", string(1, CONTENT_MAX));
        let variables = r.optional("variables", variables());
        Some(CreatePromptBlock { name: name?, kind, content: content?, variables })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdatePromptBlock> {
    parse_object(body, loc(&["body"]), |r| {
        Some(UpdatePromptBlock {
            name: r.optional("name", string(1, NAME_MAX)),
            kind: r.optional("kind", enum_value::<BlockKind>()),
            content: r.optional("content", string(1, CONTENT_MAX)),
            variables: r.optional("variables", variables()),
        })
    })
}

pub fn parse_filter(q: &mut QueryReader) -> BlockFilter {
    BlockFilter { kind: q.enum_value::<BlockKind>("kind"), q: q.string("q", 1, NAME_MAX) }
}

/// Every placeholder in `content` must be a declared variable.
fn check_template(content: &str, variables: &[String]) -> ServiceResult<()> {
    let at = loc(&["body", "content"]);
    let used = placeholders(content).map_err(|e| {
        ServiceError::Validation(vec![FieldError::new(at.clone(), "value_error.template", e.to_string())])
    })?;
    let undeclared: Vec<FieldError> = used
        .iter()
        .filter(|u| !variables.contains(u))
        .map(|u| {
            FieldError::new(
                at.clone(),
                "value_error.template",
                format!("placeholder {{{{{u}}}}} is not declared in variables"),
            )
            .with_ctx(serde_json::json!({ "variable": u }))
        })
        .collect();
    if undeclared.is_empty() { Ok(()) } else { Err(ServiceError::Validation(undeclared)) }
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Prompt block", id)
}

pub async fn create(tx: &mut Tx, scope: Scope, input: CreatePromptBlock) -> ServiceResult<PromptBlock> {
    let mut fields = BlockFields {
        name: input.name,
        slug: String::new(),
        kind: input.kind.unwrap_or(BlockKind::Other),
        content: input.content,
        variables: input.variables.unwrap_or_default(),
    };
    check_template(&fields.content, &fields.variables)?;
    let base = slugify(&fields.name);
    for _ in 0..5 {
        let taken = repo::slugs_like(tx, scope, &base, None).await?;
        fields.slug = free_slug(&base, &taken);
        if let Some(block) = repo::insert(tx, scope, &fields).await? {
            repo::save_version(tx, scope, &block).await?;
            events::append(tx, scope, EventType::PromptBlockCreated, event_data(&block)?).await?;
            return Ok(block);
        }
    }
    Err(ServiceError::Conflict("Could not choose a unique slug; retry the request".into()))
}

pub async fn get(svc: &Services, scope: Scope, id: PromptBlockId) -> ServiceResult<PromptBlock> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &BlockFilter,
    page: Page,
) -> ServiceResult<(Vec<PromptBlock>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page).await?)
}

pub async fn update(
    tx: &mut Tx,
    scope: Scope,
    id: PromptBlockId,
    input: UpdatePromptBlock,
) -> ServiceResult<PromptBlock> {
    let id = id.get();
    let current = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let mut fields = BlockFields {
        name: current.name.clone(),
        slug: current.slug.clone(),
        kind: input.kind.unwrap_or(current.kind),
        content: input.content.unwrap_or_else(|| current.content.clone()),
        variables: input.variables.unwrap_or_else(|| current.variables.clone()),
    };
    if let Some(name) = input.name
        && name != current.name
    {
        let base = slugify(&name);
        let taken = repo::slugs_like(tx, scope, &base, Some(id)).await?;
        fields.slug = free_slug(&base, &taken);
        fields.name = name;
    }
    check_template(&fields.content, &fields.variables)?;
    let unchanged = fields.name == current.name
        && fields.kind == current.kind
        && fields.content == current.content
        && fields.variables == current.variables;
    if unchanged {
        return Ok(current);
    }
    let block = match repo::update(tx, scope, id, &fields).await {
        Ok(b) => b.ok_or_else(|| not_found(id))?,
        Err(parley_store::StoreError::UniqueViolation) => {
            return Err(ServiceError::Conflict("Another request took this slug; retry the request".into()));
        }
        Err(e) => return Err(e.into()),
    };
    repo::save_version(tx, scope, &block).await?;
    events::append(tx, scope, EventType::PromptBlockUpdated, event_data(&block)?).await?;
    Ok(block)
}

/// Deletes a block and its versions. A block still listed by an agent is a
/// 409: removing it silently would change that agent's prompt.
pub async fn delete(tx: &mut Tx, scope: Scope, id: PromptBlockId) -> ServiceResult<()> {
    let id = id.get();
    let block = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let users = agents::ids_listing(tx, scope, agents::IdList::PromptBlocks, id).await?;
    if !users.is_empty() {
        let list = users.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        return Err(ServiceError::Conflict(format!(
            "Prompt block {id} is used by agent(s) {list}; remove it from their prompt_block_ids first"
        )));
    }
    repo::delete(tx, scope, id).await?;
    events::append(tx, scope, EventType::PromptBlockDeleted, event_data(&block)?).await?;
    Ok(())
}

pub async fn list_versions(
    svc: &Services,
    scope: Scope,
    id: PromptBlockId,
    page: Page,
) -> ServiceResult<(Vec<PromptBlockVersion>, i64)> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?;
    Ok(repo::list_versions(&mut c, scope, id, page).await?)
}
