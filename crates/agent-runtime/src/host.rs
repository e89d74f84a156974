//! What the tools reach outside the runtime, as narrow operations: the
//! conversation's contact (read, corrected as the contact asks), a search
//! within that contact, a message to them on another channel, and an HTTP
//! tool's credentials. [`Services`] is the host in the server; a test can
//! give another.

use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::agent::Agent;
use parley_domain::channel::ChannelType;
use parley_domain::ids::ContactId;
use parley_events::signing::WebhookSecret;
use parley_services::messaging::messages::{self, Recipient, SendMessage, Sender};
use parley_services::{ServiceError, Services, crm, search};
use parley_store::repo::search::{SearchFilter, Target};
use serde_json::{Value, json};

/// A tool's outcome for the model: a JSON result, or a refusal in words.
pub type HostResult = Result<Value, String>;
/// A [`HostResult`] to come.
pub type Pending<'a> = BoxFuture<'a, HostResult>;

/// The operations the tools use, each within one contact of one workspace.
pub trait ToolHost: Send + Sync {
    fn lookup_contact(&self, scope: Scope, contact_id: ContactId) -> Pending<'_>;
    /// `changes` as the model wrote them (checked against the tool's schema).
    fn update_contact(&self, scope: Scope, contact_id: ContactId, changes: Value) -> Pending<'_>;
    /// The contact's earlier messages and conversations matching `query`.
    fn search_contact(&self, scope: Scope, contact_id: ContactId, query: String) -> Pending<'_>;
    fn send_to_contact(&self, scope: Scope, contact_id: ContactId, channel: ChannelType, text: String) -> Pending<'_>;
    /// The agent's tool secret and HTTP tool `tool`'s headers.
    fn tool_credentials(&self, agent: &Agent, tool: &str) -> Result<(WebhookSecret, Vec<(String, String)>), String>;
    /// Whether HTTP tools may reach private addresses (development, tests).
    fn allow_private_urls(&self) -> bool;
}

impl ToolHost for Services {
    fn lookup_contact(&self, scope: Scope, contact_id: ContactId) -> Pending<'_> {
        Box::pin(async move {
            let contact = crm::contacts::get(self, scope, contact_id).await.map_err(|e| refusal(&e))?;
            serde_json::to_value(contact).map_err(|e| e.to_string())
        })
    }

    fn update_contact(&self, scope: Scope, contact_id: ContactId, changes: Value) -> Pending<'_> {
        Box::pin(async move {
            let region = self.config().contacts.default_region;
            let changes =
                crm::contacts::parse_update(changes, region).map_err(|e| refusal(&ServiceError::Validation(e)))?;
            let contact = self
                .transaction(async move |work| crm::contacts::update_as_contact(work, scope, contact_id, changes).await)
                .await
                .map_err(|e| refusal(&e))?;
            serde_json::to_value(contact).map_err(|e| e.to_string())
        })
    }

    fn search_contact(&self, scope: Scope, contact_id: ContactId, query: String) -> Pending<'_> {
        Box::pin(async move {
            let query = parley_domain::search::parse(&query).map_err(|e| e.to_string())?;
            let request = search::SearchRequest {
                query,
                targets: vec![Target::Messages, Target::Conversations],
                filter: SearchFilter { contact_id: Some(contact_id.get()), ..Default::default() },
            };
            let page = parley_domain::validation::Page { limit: 5, offset: 0 };
            let found = search::search(self, scope, &request, page).await.map_err(|e| refusal(&e))?;
            Ok(json!({"results": found.hits, "total": found.total}))
        })
    }

    fn send_to_contact(&self, scope: Scope, contact_id: ContactId, channel: ChannelType, text: String) -> Pending<'_> {
        Box::pin(async move {
            let send = SendMessage {
                conversation_id: None,
                channel_id: None,
                to: None,
                contact_id: Some(contact_id.get()),
                channel: Some(channel),
                text,
                attachments: None,
                template: None,
                subject: None,
                recipient: Recipient::ContactChannel { contact_id: contact_id.get(), channel },
            };
            let sent = self
                .transaction(async move |work| messages::send(work, self, scope, Sender::Agent, send, &[]).await)
                .await
                .map_err(|e| refusal(&e))?;
            Ok(json!({"ok": true, "message_id": sent.id, "conversation_id": sent.conversation_id}))
        })
    }

    fn tool_credentials(&self, agent: &Agent, tool: &str) -> Result<(WebhookSecret, Vec<(String, String)>), String> {
        parley_services::agents::tools::open_credentials(self, agent, tool).map_err(str::to_owned)
    }

    fn allow_private_urls(&self) -> bool {
        self.config().webhooks_allow_private
    }
}

/// A service refusal in the API's words.
fn refusal(e: &ServiceError) -> String {
    match e {
        ServiceError::Validation(errors) => errors
            .iter()
            .map(|f| format!("{}: {}", parley_services::agents::tools::loc_text(&f.loc), f.msg))
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}
