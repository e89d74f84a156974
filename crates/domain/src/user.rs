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

/// A user's membership as the workspace's member list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Member {
    pub user_id: i64,
    pub email: String,
    pub role: Role,
    /// When they joined this workspace.
    pub joined_at: Timestamp,
}

/// An invitation to join a workspace, waiting for its link to be used.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Invitation {
    pub id: i64,
    pub workspace_id: i64,
    /// Who was invited: the account the link creates or joins.
    pub email: String,
    /// The role they get on accepting.
    pub role: Role,
    /// The user who sent it (null when made with the CLI).
    pub invited_by: Option<i64>,
    pub created_at: Timestamp,
    /// The link stops working at this time.
    pub expires_at: Timestamp,
}

string_enum!(
    /// A member's availability: `online` or `away` while their dashboard's
    /// heartbeat beats, `offline` once it stops.
    Availability { Online = "online", Away = "away", Offline = "offline" }
);
string_enum!(
    /// What a member is doing on a conversation, for the others to see.
    Activity { Viewing = "viewing", Typing = "typing" }
);

/// A member's availability in the workspace (`GET /api/v1/presence`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MemberPresence {
    pub user_id: i64,
    pub email: String,
    pub status: Availability,
    /// The last heartbeat; null if there never was one.
    pub last_seen_at: Option<Timestamp>,
}

string_enum!(
    /// Why a member is told: a handoff waits for a person, a note mentions
    /// them, a conversation was assigned to them.
    NotificationKind { Handoff = "handoff", Mention = "mention", Assignment = "assignment" }
);

/// Something a member is told (`GET /api/v1/notifications`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Notification {
    pub id: i64,
    pub kind: NotificationKind,
    pub conversation_id: i64,
    /// The member whose action it was; null for an agent or an API key.
    pub actor_user_id: Option<i64>,
    /// What happened, in a sentence.
    pub text: String,
    pub read_at: Option<Timestamp>,
    pub created_at: Timestamp,
}
