//! Typed ids for the resources whose ids travel together, so that passing
//! a trigger's id where an agent's is expected is a compile error. They
//! wrap the stored integer; the store keeps plain `i64` columns.

macro_rules! typed_id {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl $name {
            /// The stored integer.
            pub fn get(self) -> i64 {
                self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}

typed_id!(
    /// An agent's id.
    AgentId,
    /// A trigger's id (unique across agents).
    TriggerId,
    /// A conversation's id.
    ConversationId,
    /// A handoff's id.
    HandoffId,
    /// A conversation label's id.
    LabelId,
    /// A canned response's id.
    CannedResponseId,
    /// A webhook endpoint's id.
    EndpointId,
    /// A webhook delivery attempt's id.
    AttemptId,
    /// A channel's id.
    ChannelId,
    /// A contact's id.
    ContactId,
    /// A message's id.
    MessageId,
    /// An agent run's id.
    RunId,
    /// A prompt block's id.
    PromptBlockId,
    /// A knowledge collection's id.
    CollectionId,
    /// A knowledge document's id.
    DocumentId,
    /// A user's id (a person who signs in).
    UserId,
    /// A workspace's id.
    WorkspaceId,
    /// An API key's id.
    ApiKeyId,
    /// An invitation's id.
    InvitationId,
    /// An OAuth grant's id (an MCP client's access).
    GrantId,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_serialise_as_their_integer() {
        assert_eq!(serde_json::to_string(&AgentId(42)).unwrap(), "42");
        assert_eq!(serde_json::from_str::<TriggerId>("7").unwrap(), TriggerId(7));
        assert_eq!(AgentId(3).to_string(), "3");
    }
}
