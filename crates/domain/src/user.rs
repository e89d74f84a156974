//! Users, their roles in workspaces.

use serde::Serialize;
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    /// A user's role in a workspace.
    Role {
        Owner = "owner",
        Admin = "admin",
        Member = "member",
    }
);

impl Role {
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
