//! Users, their roles in workspaces.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Timestamp;

/// A user's role in a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Member,
}

impl Role {
    pub const ALL: &'static [&'static str] = &["owner", "admin", "member"];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }

    /// Owners and admins manage API keys and webhooks.
    pub fn can_administer(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct User {
    pub id: i64,
    pub email: String,
    pub created_at: Timestamp,
}

/// A workspace a user belongs to, with their role there.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Membership {
    pub workspace_id: i64,
    pub workspace_name: String,
    pub role: Role,
}
