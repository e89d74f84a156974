//! Conversations and inbound messages.
//!
//! Every channel hands inbound traffic to [`receive`]: it deduplicates by
//! the provider's message id, resolves the sender to a contact, finds the
//! open conversation for the channel connection and address (or opens one,
//! or reopens a snoozed or resolved one), stores the message and emits the
//! events, all in the caller's transaction.

use parley_domain::Scope;
use parley_domain::contact::Identity;
use parley_domain::conversation::{
    Author, AuthorType, Conversation, ConversationItem, ConversationKind, ConversationStatus, Direction, Message,
    MessageStatus, preview,
};
use parley_domain::validation::{FieldError, Page, Parsed, QueryReader, loc, object, parse_object, string};
use parley_store::Tx;
use parley_store::repo::channels::ChannelRow;
use parley_store::repo::conversations::{self as repo, NewConversation, NewMessage};
use parley_store::repo::events;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, contacts, event_data};

/// A message arriving on a channel.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct Inbound {
    /// The sender's address on the channel (for the api channel, your id for the person).
    pub from: String,
    /// 1–10,000 characters.
    pub text: String,
    /// Your id for the message; a message sent twice with one id is stored once.
    pub external_id: String,
    /// What you know of the sender, used when Parley creates their contact.
    pub contact: Option<InboundContact>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct InboundContact {
    pub display_name: Option<String>,
}

pub fn parse_inbound(body: Value) -> Parsed<Inbound> {
    parse_object(body, loc(&["body"]), |r| {
        let from = r.required("from", string(1, 255));
        let text = r.required("text", string(1, 10_000));
        let external_id = r.required("external_id", string(1, 255));
        let contact = r.optional(
            "contact",
            object(|r| Some(InboundContact { display_name: r.optional("display_name", string(1, 200)) })),
        );
        Some(Inbound { from: from?, text: text?, external_id: external_id?, contact })
    })
}

/// What `receive` did.
pub struct Received {
    pub message: Message,
    /// False when the provider id was seen before (nothing was written).
    pub new: bool,
}

/// Stores an inbound message on `channel` (see the module comment).
pub async fn receive(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    inbound: Inbound,
) -> ServiceResult<Received> {
    if let Some(message) = repo::inbound_by_external_id(tx, scope, channel.id, &inbound.external_id).await? {
        return Ok(Received { message, new: false });
    }
    let config = &svc.config.contacts;
    let identity = Identity::parse(&channel.kind, &inbound.from, config.default_region)
        .map_err(|(kind, msg)| ServiceError::Validation(vec![FieldError::new(loc(&["body", "from"]), kind, msg)]))?;
    let channel_ref = format!("{}:{}", identity.channel, identity.address);
    let sender_name = inbound.contact.as_ref().and_then(|c| c.display_name.as_deref());
    let contact = contacts::resolve_address(tx, scope, config, &identity, sender_name).await?;

    let conversation = match repo::find_open(tx, scope, channel.id, &channel_ref).await? {
        Some(open) => {
            if matches!(open.status, ConversationStatus::Snoozed | ConversationStatus::Resolved) {
                repo::set_status(tx, scope, open.item.id, ConversationStatus::Open).await?;
            }
            open
        }
        None => {
            let title = contact.as_ref().map(|c| c.display_name.as_str()).or(sender_name).unwrap_or(&identity.address);
            let new = NewConversation {
                channel_id: channel.id,
                channel: &identity.channel,
                kind: ConversationKind::Direct,
                channel_ref: &channel_ref,
                title,
                contact_id: contact.as_ref().map(|c| c.id),
                sender_name,
            };
            let created = repo::insert(tx, scope, &new).await?;
            events::append(tx, scope, "conversation.created", event_data(&created)).await?;
            created
        }
    };
    let message = repo::insert_message(
        tx,
        scope,
        &NewMessage {
            conversation_id: conversation.item.id,
            channel_id: channel.id,
            direction: Direction::Inbound,
            author: Author { kind: AuthorType::Contact, id: contact.as_ref().map(|c| c.id) },
            text: &inbound.text,
            status: MessageStatus::Received,
            external_id: Some(&inbound.external_id),
        },
    )
    .await?;
    repo::record_inbound(tx, scope, conversation.item.id, message.created_at, &preview(&message.text)).await?;
    events::append(tx, scope, "message.received", event_data(&message)).await?;
    Ok(Received { message, new: true })
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Conversation", id)
}

pub async fn get(svc: &Services, scope: Scope, id: i64) -> ServiceResult<Conversation> {
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))
}

pub async fn list(svc: &Services, scope: Scope, page: Page) -> ServiceResult<(Vec<ConversationItem>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, page).await?)
}

/// `order=desc` lists a conversation's messages newest first.
pub fn parse_message_order(q: &mut QueryReader) -> bool {
    q.one_of("order", &["asc", "desc"]).is_some_and(|o| o == "desc")
}

pub async fn messages(
    svc: &Services,
    scope: Scope,
    id: i64,
    newest_first: bool,
    page: Page,
) -> ServiceResult<(Vec<Message>, i64)> {
    let mut c = svc.db.read().await?;
    if repo::get(&mut c, scope, id).await?.is_none() {
        return Err(not_found(id));
    }
    Ok(repo::messages(&mut c, scope, id, newest_first, page).await?)
}
