//! Conversations and inbound messages.
//!
//! Every channel hands inbound traffic to [`receive`]: it deduplicates by
//! the provider's message id, resolves the sender to a contact, finds the
//! open conversation for the channel connection and address (or opens one,
//! or reopens a snoozed or resolved one), stores the message and emits the
//! events, all in the caller's transaction.

use futures::future::BoxFuture;
use parley_connectors::{Consent, Inbound};
use parley_domain::Scope;
use parley_domain::agent::TriggerEvent;
use parley_domain::contact::Identity;
use parley_domain::conversation::{
    Author, AuthorType, Conversation, ConversationItem, ConversationKind, ConversationStatus, Direction, Handler,
    Message, MessageStatus,
};
use parley_domain::event::EventType;
use parley_domain::ids::ConversationId;
use parley_domain::validation::{
    FieldError, Page, Parsed, QueryReader, integer, loc, one_of, parse_object, string, timestamp,
};
use parley_store::Tx;
use parley_store::repo::channels::ChannelRow;
use parley_store::repo::conversations::{self as repo, ConversationChanges, NewConversation, NewMessage};
use parley_store::repo::events;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::agents::routing;
use crate::crm::contacts;
use crate::{ServiceError, ServiceResult, Services, Work, event_data};

/// The filters lists take (and the version key their cache follows).
pub use parley_store::repo::conversations::{ConversationFilter, VERSION_KEY};

/// What `receive` did.
pub struct Received {
    pub message: Message,
    /// False when the provider id was seen before (nothing was written).
    pub new: bool,
}

/// An inbound message waiting for its group commit.
#[derive(Clone)]
pub struct InboundJob {
    pub scope: Scope,
    pub channel: ChannelRow,
    pub inbound: Inbound,
    /// The message's files, already in object storage.
    pub attachments: Vec<parley_domain::conversation::Attachment>,
}

/// The order a batch of inbound messages runs in: by the conversation each
/// locks (its channel and sender, or group), so that batches side by side
/// on PostgreSQL lock conversations in one order and never deadlock.
/// Messages of one conversation keep their arrival order.
pub fn receive_lock_order(a: &InboundJob, b: &InboundJob) -> std::cmp::Ordering {
    fn key(j: &InboundJob) -> (i64, bool, i64, &str) {
        let sender = j.inbound.group.as_ref().map_or(j.inbound.from.as_str(), |g| g.address.as_str());
        (j.scope.workspace_id, j.scope.livemode(), j.channel.id, sender)
    }
    key(a).cmp(&key(b))
}

/// [`receive`] as a group-commit job (see [`crate::group_commit`]).
/// A new message wakes its conversation's live views once committed.
pub fn run_receive<'a>(
    work: &'a mut Work,
    svc: &'a Services,
    job: InboundJob,
) -> BoxFuture<'a, ServiceResult<Received>> {
    Box::pin(async move {
        let received = receive(work, svc, job.scope, &job.channel, job.inbound, &job.attachments).await?;
        if received.new {
            crate::messaging::messages::claim_attachments(work, &job.attachments).await?;
            work.conversation_changed(received.message.conversation_id);
        }
        Ok(received)
    })
}

/// Stores an inbound message in a group commit with others arriving at the
/// same time; answers once it is committed.
pub async fn receive_committed(svc: &Services, job: InboundJob) -> ServiceResult<Received> {
    svc.inbound.submit(svc, job).await
}

/// Stores an inbound message on `channel` (see the module comment).
pub async fn receive(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    inbound: Inbound,
    attachments: &[parley_domain::conversation::Attachment],
) -> ServiceResult<Received> {
    if let Some(message) = repo::by_external_id(tx, scope, channel.id, Direction::Inbound, &inbound.external_id).await?
    {
        return Ok(Received { message, new: false });
    }
    let identity = sender_identity(svc, channel, &inbound)?;
    let sender_name = inbound.contact.as_ref().and_then(|c| c.display_name.as_deref());
    // In a group the conversation is the group's; the author is the member.
    // An email reply belongs to its thread's conversation while it is open
    // (an unverified sender's only to its own: headers are easy to forge).
    let own_ref = Opening::Direct { identity: &identity, sender_name: None }.channel_ref(channel);
    let thread = match repo::conversation_of_any(tx, scope, channel.id, &inbound.answers).await? {
        Some(id) => repo::get(tx, scope, id).await?.filter(|c| {
            c.status != ConversationStatus::Closed
                && c.unverified_sender == identity.unverified
                && (!identity.unverified || c.item.channel_ref == own_ref)
        }),
        None => None,
    };
    let (conversation, created, contact_id) = match &inbound.group {
        None if thread.is_some() => {
            let conversation = thread.expect("matched");
            let contact_id = conversation.contact_id;
            (conversation, false, contact_id)
        }
        None => {
            let (conversation, created) = find_or_open(tx, svc, scope, channel, &identity, sender_name).await?;
            let contact_id = conversation.contact_id;
            (conversation, created, contact_id)
        }
        Some(group) => {
            let member = contacts::resolve_address(tx, scope, &svc.config.contacts, &identity, sender_name).await?;
            let opening = Opening::Group { address: &group.address, title: &group.title };
            let (conversation, created) = find_or_open_as(tx, svc, scope, channel, &opening).await?;
            (conversation, created, member.map(|m| m.id))
        }
    };
    if !created && matches!(conversation.status, ConversationStatus::Snoozed | ConversationStatus::Resolved) {
        repo::set_status(tx, scope, conversation.item.id, ConversationStatus::Open).await?;
        let reopened =
            repo::get(tx, scope, conversation.item.id).await?.ok_or_else(|| not_found(conversation.item.id))?;
        events::append(tx, scope, EventType::ConversationUpdated, event_data(&reopened)?).await?;
    }
    let mut details = parley_connectors::connector(channel.kind).map(|c| c.details(&inbound.text)).unwrap_or_default();
    details.email = inbound.details.email.clone();
    let message = repo::insert_message(
        tx,
        scope,
        &NewMessage {
            conversation_id: conversation.item.id,
            channel_id: channel.id,
            direction: Direction::Inbound,
            author: Author { kind: AuthorType::Contact, id: contact_id },
            text: &inbound.text,
            status: MessageStatus::Received,
            external_id: Some(&inbound.external_id),
            attachments,
            details: &details,
        },
    )
    .await?;
    events::append(tx, scope, EventType::MessageReceived, event_data(&message)?).await?;
    // A keyword that stops or resumes messages is the provider's business
    // (it confirms to the sender), not a question for the agent.
    match inbound.consent {
        Some(Consent::OptOut(keyword)) => {
            repo::opt_out(tx, scope, channel.id, &conversation.item.channel_ref, keyword).await?;
            return Ok(Received { message, new: true });
        }
        Some(Consent::OptIn) => {
            repo::opt_in(tx, scope, channel.id, &conversation.item.channel_ref).await?;
            return Ok(Received { message, new: true });
        }
        None => {}
    }
    let traffic = routing::Traffic {
        event: TriggerEvent::MessageReceived,
        channel: channel.kind.as_str(),
        kind: conversation.item.kind,
        text: &inbound.text,
    };
    if let Some(agent_id) = routing::route(tx, scope, &conversation, traffic).await? {
        crate::agents::routing::queue_answer(tx, svc, scope, &conversation, created, agent_id).await?;
    }
    Ok(Received { message, new: true })
}

/// Who sent `inbound`, as a contact identity (unverified when the provider
/// did not vouch for it).
fn sender_identity(svc: &Services, channel: &ChannelRow, inbound: &Inbound) -> ServiceResult<Identity> {
    let mut identity = Identity::parse(channel.kind, &inbound.from, svc.config.contacts.default_region)
        .map_err(|(kind, msg)| ServiceError::Validation(vec![FieldError::new(loc(&["body", "from"]), kind, msg)]))?;
    identity.unverified = inbound.unverified_sender;
    Ok(identity)
}

/// Reads ahead for a group commit's batch of inbound messages, one
/// statement each for the whole batch (see `parley_store::Absences`):
/// which provider ids are new, which conversations are not open yet and
/// which senders are not contacts yet; [`receive`] then looks up only what
/// exists. A message whose sender cannot be read is left to `receive`.
pub fn look_ahead_receive<'a>(
    tx: &'a mut Tx,
    svc: &'a Services,
    jobs: Vec<&'a InboundJob>,
) -> BoxFuture<'a, parley_store::StoreResult<()>> {
    Box::pin(async move {
        let mut channels: Vec<(Scope, &ChannelRow, Vec<&InboundJob>)> = Vec::new();
        for job in jobs {
            match channels.iter_mut().find(|(scope, c, _)| *scope == job.scope && c.id == job.channel.id) {
                Some((_, _, batch)) => batch.push(job),
                None => channels.push((job.scope, &job.channel, vec![job])),
            }
        }
        for (scope, channel, batch) in channels {
            let ids: Vec<&str> = batch.iter().map(|j| j.inbound.external_id.as_str()).collect();
            repo::look_ahead_inbound(tx, scope, channel.id, &ids).await?;
            let mut refs = Vec::with_capacity(batch.len());
            let mut senders = Vec::with_capacity(batch.len());
            for job in &batch {
                let Ok(identity) = sender_identity(svc, channel, &job.inbound) else { continue };
                // Unverified senders are rare and always looked up.
                if identity.unverified {
                    continue;
                }
                refs.push(match &job.inbound.group {
                    Some(group) => Opening::Group { address: &group.address, title: &group.title }.channel_ref(channel),
                    None => Opening::Direct { identity: &identity, sender_name: None }.channel_ref(channel),
                });
                senders.push(identity);
            }
            let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
            repo::look_ahead_open(tx, scope, channel.id, &refs).await?;
            contacts::look_ahead_senders(tx, scope, &senders).await?;
        }
        Ok(())
    })
}

/// The conversation that is not closed on `channel` with `identity`, or a
/// new one (with the sender resolved to a contact, discovered if unknown);
/// true when it was opened now.
pub async fn find_or_open(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    identity: &Identity,
    sender_name: Option<&str>,
) -> ServiceResult<(Conversation, bool)> {
    find_or_open_as(tx, svc, scope, channel, &Opening::Direct { identity, sender_name }).await
}

/// What a conversation that is not open yet is opened as.
enum Opening<'a> {
    /// With one sender, resolved to a contact.
    Direct { identity: &'a Identity, sender_name: Option<&'a str> },
    /// A group chat (`kind: group`), titled by the group, with no contact:
    /// its members write in it.
    Group { address: &'a str, title: &'a str },
}

impl Opening<'_> {
    fn unverified_sender(&self) -> bool {
        matches!(self, Opening::Direct { identity, .. } if identity.unverified)
    }

    fn channel_ref(&self, channel: &ChannelRow) -> String {
        match self {
            Opening::Direct { identity, .. } => format!("{}:{}", identity.channel, identity.address),
            Opening::Group { address, .. } => format!("{}:{address}", channel.kind),
        }
    }
}

/// The conversation that is not closed on `channel` for `opening`, or a new
/// one; true when it was opened now.
async fn find_or_open_as(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    opening: &Opening<'_>,
) -> ServiceResult<(Conversation, bool)> {
    let channel_ref = opening.channel_ref(channel);
    let unverified = opening.unverified_sender();
    if let Some(open) = repo::find_open_for(tx, scope, channel.id, &channel_ref, unverified).await? {
        return Ok((open, false));
    }
    // Another transaction (another instance, or concurrent sends to a new
    // address) may open the same conversation or create the same contact
    // first: its row then wins, found once this attempt is undone. With a
    // single writer nothing can, and in a group commit the whole batch runs
    // again and finds the winner's row: then the savepoint's two statements
    // are saved.
    if tx.is_sole_writer() || tx.reruns_races() {
        return Ok((open_new(tx, svc, scope, channel, opening, &channel_ref).await?, true));
    }
    tx.savepoint("open_conversation").await?;
    match open_new(tx, svc, scope, channel, opening, &channel_ref).await {
        Ok(created) => {
            tx.release("open_conversation").await?;
            Ok((created, true))
        }
        Err(ServiceError::Store(parley_store::StoreError::UniqueViolation)) => {
            tx.rollback_to("open_conversation").await?;
            match repo::find_open_for(tx, scope, channel.id, &channel_ref, unverified).await? {
                Some(open) => Ok((open, false)),
                // The contact was the duplicate: it is found now.
                None => Ok((open_new(tx, svc, scope, channel, opening, &channel_ref).await?, true)),
            }
        }
        Err(e) => Err(e),
    }
}

async fn open_new(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    opening: &Opening<'_>,
    channel_ref: &str,
) -> ServiceResult<Conversation> {
    let (kind, channel_name, title, contact_id, sender_name) = match *opening {
        Opening::Direct { identity, sender_name } => {
            let contact = contacts::resolve_address(tx, scope, &svc.config.contacts, identity, sender_name).await?;
            let title = contact.as_ref().map(|c| c.display_name.as_str()).or(sender_name).unwrap_or(&identity.address);
            let title = title.to_owned();
            (ConversationKind::Direct, identity.channel.as_str(), title, contact.map(|c| c.id), sender_name)
        }
        Opening::Group { title, .. } => (ConversationKind::Group, channel.kind.as_str(), title.to_owned(), None, None),
    };
    let new = NewConversation {
        channel_id: channel.id,
        channel: channel_name,
        kind,
        channel_ref,
        title: &title,
        contact_id,
        sender_name,
        unverified_sender: opening.unverified_sender(),
    };
    let created = repo::insert(tx, scope, &new).await?;
    events::append(tx, scope, EventType::ConversationCreated, event_data(&created)?).await?;
    Ok(created)
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Conversation", id)
}

pub async fn get(svc: &Services, scope: Scope, id: ConversationId) -> ServiceResult<Conversation> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))
}

/// The job kind of a conversation's analysis on demand.
pub const ANALYZE: &str = "conversation.analyze";

#[derive(Debug, PartialEq, serde::Serialize, Deserialize)]
pub struct AnalyzeConversation {
    pub conversation_id: i64,
}

impl parley_jobs::BackgroundJob for AnalyzeConversation {
    const KIND: &'static str = ANALYZE;
}

/// `POST /api/v1/conversations/{id}/analysis`: the conversation's agent
/// analyses it as a call is after its end (its `analysis` plan over the
/// messages so far); 409 without an agent. Answers the conversation; the
/// analysis is read at `GET …/analysis` once done (`conversation.analyzed`).
pub async fn analyze(svc: &Services, scope: Scope, id: ConversationId) -> ServiceResult<Conversation> {
    let id = id.get();
    svc.transaction(async |work| {
        let conversation = repo::get(work, scope, id).await?.ok_or_else(|| not_found(id))?;
        if conversation.agent_id.is_none() {
            return Err(ServiceError::Conflict(format!("Conversation {id} has no agent to analyse it")));
        }
        let job = parley_jobs::Enqueue::of(&AnalyzeConversation { conversation_id: id }).for_scope(scope);
        parley_jobs::enqueue(work, job).await?;
        Ok(conversation)
    })
    .await
}

/// `GET /api/v1/conversations/{id}/analysis`: its latest analysis; 404
/// before the first.
pub async fn analysis(
    svc: &Services,
    scope: Scope,
    id: ConversationId,
) -> ServiceResult<parley_domain::call::Analysis> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?;
    repo::analysis(&mut c, scope, id).await?.ok_or_else(|| ServiceError::not_found("Analysis of conversation", id))
}

/// What a conversation's analysis reads: the conversation, its messages
/// (the latest `limit`, oldest first) and its agent.
pub async fn analysis_context(
    svc: &Services,
    scope: Scope,
    id: i64,
    limit: i64,
) -> ServiceResult<Option<(Conversation, Vec<parley_domain::conversation::Message>, Option<parley_domain::agent::Agent>)>>
{
    let mut c = svc.db.read().await?;
    let Some(conversation) = repo::get(&mut c, scope, id).await? else { return Ok(None) };
    let messages = repo::recent_messages(&mut c, scope, id, limit).await?;
    let agent = match conversation.agent_id {
        Some(agent_id) => parley_store::repo::agents::get(&mut c, scope, agent_id, false).await?,
        None => None,
    };
    Ok(Some((conversation, messages, agent)))
}

/// Stores a conversation's analysis and tells subscribers (`conversation.analyzed`).
pub async fn record_analysis(
    tx: &mut Tx,
    scope: Scope,
    id: i64,
    analysis: &parley_domain::call::Analysis,
) -> ServiceResult<()> {
    repo::set_analysis(tx, scope, id, analysis).await?;
    let data = serde_json::json!({"conversation_id": id, "analysis": analysis});
    events::append(tx, scope, EventType::ConversationAnalyzed, data).await?;
    Ok(())
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &ConversationFilter,
    page: Page,
) -> ServiceResult<(Vec<ConversationItem>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page).await?)
}

pub fn parse_filter(q: &mut QueryReader) -> ConversationFilter {
    ConversationFilter {
        channel: q.one_of("channel", parley_domain::channel::ChannelType::ALL),
        kind: q.enum_value::<ConversationKind>("kind"),
        status: q.enum_value::<ConversationStatus>("status"),
        contact_id: q.integer("contact_id", 1, i64::MAX),
        agent_id: q.integer("agent_id", 1, i64::MAX),
        handler: q.enum_value::<Handler>("handler"),
        updated_since: q.timestamp("updated_since"),
    }
}

/// `PATCH /api/v1/conversations/{id}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "resolved"}))]
pub struct UpdateConversation {
    /// 1–200 characters.
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    pub title: Option<String>,
    /// Any status but from `closed`, which is final (409). `snoozed` needs
    /// `snoozed_until`; leaving `snoozed` forgets it.
    #[schema(nullable = false)]
    pub status: Option<ConversationStatus>,
    /// When a snoozed conversation wakes (RFC 3339; it also reopens on the
    /// contact's next message), or null.
    #[schema(value_type = Option<String>, format = DateTime, nullable)]
    pub snoozed_until: Option<Option<parley_domain::Timestamp>>,
    /// The agent that answers it (of this workspace and mode), or null.
    #[schema(value_type = Option<i64>, nullable, minimum = 1)]
    pub agent_id: Option<Option<i64>>,
}

pub fn parse_update(body: Value) -> Parsed<UpdateConversation> {
    parse_object(body, loc(&["body"]), |r| {
        let title = r.optional("title", string(1, 200));
        let status = r.optional("status", one_of(ConversationStatus::ALL)).and_then(|s| ConversationStatus::parse(&s));
        let snoozed_until = r.nullable("snoozed_until", timestamp());
        let agent_id = r.nullable("agent_id", integer(1, i64::MAX));
        Some(UpdateConversation { title, status, snoozed_until, agent_id })
    })
}

/// Applies a user's changes under the status rules; emits `conversation.updated`.
pub async fn update(
    tx: &mut Tx,
    scope: Scope,
    id: ConversationId,
    input: UpdateConversation,
) -> ServiceResult<Conversation> {
    let id = id.get();
    let current = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    if current.status == ConversationStatus::Closed {
        return Err(ServiceError::Conflict(format!(
            "Conversation {id} is closed; a closed conversation never reopens"
        )));
    }
    let status = input.status.unwrap_or(current.status);
    let snoozed_until = match (status, input.snoozed_until) {
        (ConversationStatus::Snoozed, Some(Some(until))) => Some(until),
        (ConversationStatus::Snoozed, None) if current.snoozed_until.is_some() => current.snoozed_until,
        (ConversationStatus::Snoozed, _) => {
            return Err(ServiceError::Validation(vec![FieldError::missing(loc(&["body", "snoozed_until"]))]));
        }
        (_, Some(Some(_))) => {
            return Err(ServiceError::Validation(vec![FieldError::new(
                loc(&["body", "snoozed_until"]),
                "value_error.conversation.not_snoozed",
                "snoozed_until goes with status snoozed",
            )]));
        }
        _ => None,
    };
    let agent_id = match input.agent_id {
        Some(Some(agent)) => {
            if parley_store::repo::agents::get(tx, scope, agent, false).await?.is_none() {
                return Err(ServiceError::Validation(vec![FieldError::not_found(
                    loc(&["body", "agent_id"]),
                    &format!("Agent {agent}"),
                )]));
            }
            Some(agent)
        }
        Some(None) => None,
        None => current.agent_id,
    };
    let changes = ConversationChanges {
        title: input.title.unwrap_or_else(|| current.item.title.clone()),
        status,
        snoozed_until,
        agent_id,
    };
    repo::update(tx, scope, id, &changes).await?;
    let updated = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    events::append(tx, scope, EventType::ConversationUpdated, event_data(&updated)?).await?;
    Ok(updated)
}

/// Marks everything in the conversation read: `unread_count` goes to 0.
/// Marks a conversation read; a webchat visitor sees the read receipt.
pub async fn mark_read(work: &mut Work, scope: Scope, id: ConversationId) -> ServiceResult<Conversation> {
    let id = id.get();
    if repo::get(work, scope, id).await?.is_none() {
        return Err(not_found(id));
    }
    repo::mark_read(work, scope, id).await?;
    repo::mark_inbound_read(work, scope, id).await?;
    work.conversation_changed(id);
    repo::get(work, scope, id).await?.ok_or_else(|| not_found(id))
}

/// `order=desc` lists a conversation's messages newest first.
pub fn parse_message_order(q: &mut QueryReader) -> bool {
    q.one_of("order", &["asc", "desc"]).is_some_and(|o| o == "desc")
}

pub async fn messages(
    svc: &Services,
    scope: Scope,
    id: ConversationId,
    newest_first: bool,
    page: Page,
) -> ServiceResult<(Vec<Message>, i64)> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    if repo::get(&mut c, scope, id).await?.is_none() {
        return Err(not_found(id));
    }
    let (mut messages, total) = repo::messages(&mut c, scope, id, newest_first, page).await?;
    for m in &mut messages {
        svc.storage.present(m);
    }
    Ok((messages, total))
}
