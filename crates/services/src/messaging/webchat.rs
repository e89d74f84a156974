//! The webchat channel's visitor side: what the WebSocket at
//! `/webchat/{public_id}` does on behalf of a browser.
//!
//! A visitor says hello with the token their browser kept (or none, and is
//! given a new visitor id and token); writes messages, which arrive like
//! any inbound message (`webchat:<visitor id>`); and reports delivery and
//! read receipts for the replies they see. The socket shows them replies
//! once sent, and read receipts once the workspace reads the conversation.

use parley_domain::Scope;
use parley_domain::agent::TriggerEvent;
use parley_domain::channel::{ChannelStatus, ChannelType};
use parley_domain::conversation::{Conversation, ConversationKind, Direction, Message, MessageStatus};
use parley_domain::validation::Page;
use parley_store::repo::channels::{self as channel_repo, ChannelRow};
use parley_store::repo::conversations as conversation_repo;
use parley_store::repo::webchat as repo;
use rand::Rng;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::agents::routing::Traffic;
use crate::messaging::conversations::{InboundJob, receive_committed};
use crate::messaging::messages;
use crate::{ServiceError, ServiceResult, Services};

/// Messages a socket shows: the latest of the conversation.
pub const HISTORY: i64 = 100;

/// A webchat channel as its visitors see it.
#[derive(Debug, Clone)]
pub struct Webchat {
    pub scope: Scope,
    pub channel: ChannelRow,
}

/// The active webchat channel with this public id; 404 for any other.
pub async fn open(svc: &Services, public_id: &str) -> ServiceResult<Webchat> {
    let not_found = || ServiceError::not_found("Webchat", public_id);
    let mut c = svc.db.read().await?;
    let (scope, channel) = channel_repo::find_by_public_id(&mut c, public_id).await?.ok_or_else(not_found)?;
    if channel.kind != ChannelType::Webchat {
        return Err(not_found());
    }
    if channel.status != ChannelStatus::Active {
        return Err(ServiceError::Forbidden(format!("Webchat {public_id} is {}", channel.status)));
    }
    Ok(Webchat { scope, channel })
}

impl Webchat {
    /// The channel's public id (its address).
    pub fn public_id(&self) -> &str {
        &self.channel.public_id
    }

    /// Whether a page from `origin` may open the chat: any, unless
    /// `allowed_origins` lists some (and not `*`).
    pub fn origin_allowed(&self, origin: Option<&str>) -> bool {
        let Some(Value::Array(allowed)) = self.channel.config.0.get("allowed_origins") else { return true };
        if allowed.is_empty() || allowed.iter().any(|a| a == "*") {
            return true;
        }
        let Some(origin) = origin else { return false };
        allowed.iter().filter_map(Value::as_str).any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin))
    }

    fn setting(&self, name: &str) -> Option<String> {
        self.channel.config.0.get(name).and_then(Value::as_str).map(str::to_owned)
    }

    pub fn title(&self) -> String {
        self.setting("title").unwrap_or_else(|| self.channel.name.clone())
    }

    pub fn greeting(&self) -> Option<String> {
        self.setting("greeting")
    }

    /// Whether visitors may call (`calls: true`): off unless the channel says so.
    pub fn calls(&self) -> bool {
        self.channel.config.0.get("calls").and_then(Value::as_bool).unwrap_or(false)
    }
}

/// A visitor of one webchat channel.
#[derive(Debug, Clone)]
pub struct Visitor {
    pub id: i64,
    /// The visitor's address on the channel.
    pub public_id: String,
    /// The secret the browser keeps; only when the visitor is new.
    pub new_token: Option<String>,
}

fn random(n: usize) -> String {
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    (0..n).map(|_| BASE62[rng.random_range(0..BASE62.len())] as char).collect()
}

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The visitor holding `token`, or a new one (an unknown token, perhaps
/// from a cleared database, starts afresh rather than failing).
pub async fn hello(svc: &Services, chat: &Webchat, token: Option<&str>) -> ServiceResult<Visitor> {
    let mut tx = svc.begin().await?;
    if let Some(token) = token.filter(|t| t.len() <= 200)
        && let Some(v) = repo::find_by_token(&mut tx, chat.scope, chat.channel.id, &token_hash(token)).await?
    {
        svc.commit(tx).await?;
        return Ok(Visitor { id: v.id, public_id: v.public_id, new_token: None });
    }
    let token = format!("wvt_{}", random(40));
    let v =
        repo::insert(&mut tx, chat.scope, chat.channel.id, &format!("v_{}", random(20)), &token_hash(&token)).await?;
    svc.commit(tx).await?;
    Ok(Visitor { id: v.id, public_id: v.public_id, new_token: Some(token) })
}

fn channel_ref(visitor: &Visitor) -> String {
    format!("webchat:{}", visitor.public_id)
}

/// The visitor's conversation that is not closed, if any.
pub async fn conversation(svc: &Services, chat: &Webchat, visitor: &Visitor) -> ServiceResult<Option<Conversation>> {
    let mut c = svc.db.read().await?;
    Ok(conversation_repo::find_open(&mut c, chat.scope, chat.channel.id, &channel_ref(visitor)).await?)
}

/// How a visitor joins the web call they asked for.
#[derive(Debug, Clone)]
pub struct VisitorCall {
    pub call_id: String,
    pub join: parley_domain::call::WebCallJoin,
}

/// A web call from the visitor to the agent that answers their chat (the
/// conversation's agent, else the one the triggers pick for a webchat
/// message), with their contact when they have one. 403 when the channel
/// does not offer calls; 422 when no agent answers it.
pub async fn call(svc: &Services, chat: &Webchat, visitor: &Visitor) -> ServiceResult<VisitorCall> {
    if !chat.calls() {
        return Err(ServiceError::Forbidden(format!("Webchat {} does not offer calls", chat.public_id())));
    }
    let open = conversation(svc, chat, visitor).await?;
    let agent_id = match open.as_ref().and_then(|c| c.agent_id) {
        Some(id) => Some(id),
        None => {
            let mut c = svc.db.read().await?;
            let triggers =
                parley_store::repo::triggers::routable(&mut c, chat.scope, TriggerEvent::MessageReceived).await?;
            let traffic = Traffic {
                event: TriggerEvent::MessageReceived,
                channel: "webchat",
                kind: ConversationKind::Direct,
                text: "",
            };
            crate::agents::routing::choose(&triggers, &traffic)
        }
    };
    let agent_id = agent_id.ok_or_else(|| {
        ServiceError::Validation(vec![parley_domain::validation::FieldError::new(
            vec![],
            "value_error.not_found",
            "No agent answers this chat, so there is nobody to call",
        )])
    })?;
    let mut metadata = serde_json::Map::new();
    metadata.insert("webchat_visitor".into(), Value::String(visitor.public_id.clone()));
    let input = crate::calls::CreateCall {
        agent_id,
        transport: Some(parley_domain::call::CallTransport::Web),
        to: None,
        from: None,
        contact_id: open.and_then(|c| c.contact_id),
        first_message: None,
        variables: None,
        max_duration_s: None,
        record: None,
        metadata: Some(metadata),
        voicemail: None,
    };
    let placed = crate::calls::place(svc, chat.scope, None, input).await?;
    let body: Value = serde_json::from_str(&placed.answer.body).unwrap_or(Value::Null);
    if placed.answer.status != 201 {
        let detail = body["detail"].as_str().unwrap_or("The call could not be placed").to_owned();
        return Err(ServiceError::BadGateway(detail));
    }
    let join = serde_json::from_value(body["web"].clone())
        .map_err(|e| ServiceError::invariant(format!("a placed web call has no join: {e}")))?;
    Ok(VisitorCall { call_id: body["id"].as_str().unwrap_or_default().to_owned(), join })
}

/// The latest messages of a conversation, oldest first.
pub async fn history(svc: &Services, chat: &Webchat, conversation_id: i64) -> ServiceResult<Vec<Message>> {
    let mut c = svc.db.read().await?;
    let page = Page { limit: HISTORY, offset: 0 };
    let (mut newest_first, _) = conversation_repo::messages(&mut c, chat.scope, conversation_id, true, page).await?;
    newest_first.reverse();
    Ok(newest_first)
}

/// Stores what the visitor wrote; `client_id` deduplicates a resend.
pub async fn say(
    svc: &Services,
    chat: &Webchat,
    visitor: &Visitor,
    text: String,
    client_id: Option<String>,
) -> ServiceResult<Message> {
    // The same checks as any inbound message.
    let inbound = parley_connectors::Inbound::parse(json!({
        "from": visitor.public_id,
        "text": text,
        "external_id": client_id.unwrap_or_else(|| format!("wc_{}", ulid::Ulid::new())),
    }))?;
    let job = InboundJob { scope: chat.scope, channel: chat.channel.clone(), inbound, attachments: Vec::new() };
    Ok(receive_committed(svc, job).await?.message)
}

/// The visitor saw (`delivered`) or read (`read`) reply `message_id`.
pub async fn receipt(
    svc: &Services,
    chat: &Webchat,
    visitor: &Visitor,
    message_id: i64,
    status: MessageStatus,
) -> ServiceResult<Message> {
    let mut work = svc.begin().await?;
    let message = conversation_repo::get_message(&mut work, chat.scope, message_id)
        .await?
        .filter(|m| m.direction == Direction::Outbound)
        .ok_or_else(|| ServiceError::not_found("Message", message_id))?;
    let theirs = conversation_repo::get(&mut work, chat.scope, message.conversation_id)
        .await?
        .is_some_and(|c| c.channel_id == chat.channel.id && c.item.channel_ref == channel_ref(visitor));
    if !theirs {
        return Err(ServiceError::not_found("Message", message_id));
    }
    let message = messages::advance(&mut work, &svc.storage, chat.scope, message_id, status, None, None).await?;
    svc.commit(work).await?;

    Ok(message)
}

/// A message as a visitor sees it: no user or agent ids.
pub async fn for_visitor(svc: &Services, m: &Message) -> Value {
    let mut m = m.clone();
    svc.storage.present(&mut m);
    let attachments: Vec<Value> = m
        .attachments
        .iter()
        .map(|a| json!({"filename": a.filename, "content_type": a.content_type, "size": a.size, "url": a.url}))
        .collect();
    json!({
        "attachments": attachments,
        "id": m.id,
        "direction": m.direction,
        "author": m.author.kind,
        "text": m.text,
        "status": m.status,
        "created_at": m.created_at,
        "read": m.read_at.is_some(),
    })
}

/// Whether the visitor should see a message yet: everything they wrote,
/// and replies once sent.
pub fn visible(m: &Message) -> bool {
    m.direction == Direction::Inbound || !matches!(m.status, MessageStatus::Queued | MessageStatus::Failed)
}
