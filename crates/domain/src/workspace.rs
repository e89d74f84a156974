//! Workspaces and their API keys.

use serde::Serialize;
use utoipa::ToSchema;

use crate::{Mode, Timestamp};

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Workspace {
    pub id: i64,
    pub name: String,
    pub voice_enabled: bool,
    pub created_at: Timestamp,
}

/// An API key's record: everything but the secret.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ApiKeyInfo {
    pub id: i64,
    pub workspace_id: i64,
    pub name: String,
    pub mode: Mode,
    pub workspace_locked: bool,
    /// The first 12 and last 4 characters of the key.
    pub hint: String,
    pub created_by: Option<i64>,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
}
