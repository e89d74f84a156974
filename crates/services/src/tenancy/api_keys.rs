//! API key management for signed-in owners and admins. Keys belong to a
//! workspace; each has a mode, so one list shows live and test keys.

use parley_domain::ids::ApiKeyId;
use parley_domain::validation::{
    FieldError, Page, Parsed, QueryReader, boolean, loc, one_of, parse_object, string, timestamp,
};
use parley_domain::workspace::ApiKeyInfo;
use parley_domain::{Mode, Timestamp};
use parley_store::Tx;
use parley_store::repo::api_keys as repo;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::tenancy::auth::Principal;
use crate::tenancy::workspaces::{CreatedKey, NewKey, create_key};
use crate::{ServiceError, ServiceResult, Services};

const WHAT: &str = "manage API keys";

/// `POST /api/v1/api-keys`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Production backend", "mode": "live", "workspace_locked": true}))]
pub struct CreateApiKey {
    /// 1–100 characters, e.g. "Production backend".
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
    /// `live` or `test`: which dataset the key reads and writes.
    pub mode: Mode,
    /// When true, the key's MCP sessions serve only this workspace. Default false.
    #[schema(nullable = false)]
    pub workspace_locked: Option<bool>,
    /// When the key stops working (RFC 3339, in the future). Default: never.
    #[schema(nullable = false)]
    pub expires_at: Option<Timestamp>,
}

/// `PATCH /api/v1/api-keys/{key_id}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Production backend (rotated)"}))]
pub struct UpdateApiKey {
    /// 1–100 characters.
    #[schema(nullable = false, min_length = 1, max_length = 100)]
    pub name: Option<String>,
    #[schema(nullable = false)]
    pub workspace_locked: Option<bool>,
}

pub fn parse_create(body: Value) -> Parsed<CreateApiKey> {
    parse_object(body, loc(&["body"]), |r| {
        let name = r.required("name", string(1, 100));
        let mode = r.required("mode", one_of(&["live", "test"]));
        let workspace_locked = r.optional("workspace_locked", boolean());
        let expires_at = r.optional("expires_at", timestamp());
        if let Some(t) = expires_at
            && t <= Timestamp::now()
        {
            r.push_error(FieldError::new(r.loc_of("expires_at"), "value_error.datetime.past", "must be in the future"));
        }
        Some(CreateApiKey { name: name?, mode: Mode::parse(&mode?)?, workspace_locked, expires_at })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdateApiKey> {
    parse_object(body, loc(&["body"]), |r| {
        Some(UpdateApiKey {
            name: r.optional("name", string(1, 100)),
            workspace_locked: r.optional("workspace_locked", boolean()),
        })
    })
}

/// List filter: `mode`.
pub fn parse_filter(q: &mut QueryReader) -> Option<Mode> {
    q.one_of("mode", &["live", "test"]).and_then(|m| Mode::parse(&m))
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("API key", id)
}

pub async fn list(
    svc: &Services,
    who: &Principal,
    mode: Option<Mode>,
    page: Page,
) -> ServiceResult<(Vec<ApiKeyInfo>, i64)> {
    who.require_administrator(WHAT)?;
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, who.scope.workspace_id, mode, page).await?)
}

pub async fn get(svc: &Services, who: &Principal, id: ApiKeyId) -> ServiceResult<ApiKeyInfo> {
    let id = id.get();
    who.require_administrator(WHAT)?;
    let mut c = svc.db.read().await?;
    repo::get(&mut c, id).await?.filter(|k| k.workspace_id == who.scope.workspace_id).ok_or_else(|| not_found(id))
}

pub async fn create(tx: &mut Tx, who: &Principal, input: CreateApiKey) -> ServiceResult<CreatedKey> {
    let (user_id, _) = who.require_administrator(WHAT)?;
    create_key(
        tx,
        NewKey {
            workspace_id: who.scope.workspace_id,
            mode: input.mode,
            name: input.name,
            workspace_locked: input.workspace_locked.unwrap_or(false),
            created_by: Some(user_id),
            expires_at: input.expires_at,
        },
    )
    .await
}

pub async fn update(tx: &mut Tx, who: &Principal, id: ApiKeyId, input: UpdateApiKey) -> ServiceResult<ApiKeyInfo> {
    let id = id.get();
    who.require_administrator(WHAT)?;
    repo::update(tx, who.scope.workspace_id, id, input.name.as_deref(), input.workspace_locked)
        .await?
        .ok_or_else(|| not_found(id))
}

/// Revokes a key of the caller's workspace; it fails on its very next use.
pub async fn revoke(tx: &mut Tx, who: &Principal, id: ApiKeyId) -> ServiceResult<ApiKeyInfo> {
    let id = id.get();
    who.require_administrator(WHAT)?;
    repo::revoke_in_workspace(tx, who.scope.workspace_id, id).await?.ok_or_else(|| not_found(id))
}
