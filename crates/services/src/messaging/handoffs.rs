//! Handing conversations between agents and humans.
//!
//! A conversation's `handler` says who answers it: `agent`, `human`, or
//! `none` while a handoff to a human waits for someone to accept it. Agents
//! write only while the handler is `agent` ([`crate::messaging::messages::agent_may_reply`]).
//!
//! - To a human: requested (handler `none`) → accepted by a user (handler
//!   `human`, assigned to them) → completed (back to the agent, or the
//!   conversation closes). Either open state may be canceled (back to the agent).
//! - To an agent: done at once (requested and completed); that agent answers.

use parley_domain::Scope;
use parley_domain::conversation::{
    Author, Conversation, ConversationStatus, Handler, Handoff, HandoffStatus, HandoffTarget,
};
use parley_domain::event::EventType;
use parley_domain::ids::{ConversationId, HandoffId};
use parley_domain::user::NotificationKind;
use parley_domain::validation::{
    FieldError, Page, Parsed, QueryReader, boolean, integer, loc, one_of, parse_object, string,
};
use parley_store::Tx;
use parley_store::repo::conversations as conversation_repo;
use parley_store::repo::events;
use parley_store::repo::handoffs::{self as repo, NewHandoff};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::notifications;
use crate::{ServiceError, ServiceResult, Services, event_data};

/// The filters lists take.
pub use parley_store::repo::handoffs::HandoffFilter;

/// `POST /api/v1/conversations/{id}/handoff`.
#[derive(Debug, Clone)]
pub struct CreateHandoff {
    pub to: HandoffTarget,
    /// The agent to take over (required with `to: agent`).
    pub agent_id: Option<i64>,
    /// The user asked to take over (optional with `to: human`; anyone may accept).
    pub user_id: Option<i64>,
    pub reason: String,
    pub note: Option<String>,
}

impl utoipa::PartialSchema for CreateHandoff {
    /// To a human (optionally a named user) or to an agent (named).
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use parley_domain::schema::{string, string_enum};
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Type};
        let id = |what: &str| {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Int64)))
                .minimum(Some(1))
                .description(Some(what.to_owned()))
        };
        let shape = |to: &str, id_field: &str, id_required: bool, what: &str| {
            let o = ObjectBuilder::new()
                .schema_type(Type::Object)
                .title(Some(format!("to {to}")))
                .property("to", string_enum(&[to]))
                .required("to")
                .property(id_field, id(what))
                .property("reason", string(1, 500).description(Some("1–500 characters.")))
                .required("reason")
                .property("note", string(1, 2000).description(Some("1–2,000 characters, for whoever takes over.")))
                .additional_properties(Some(AdditionalProperties::FreeForm(false)));
            if id_required { o.required(id_field) } else { o }
        };
        OneOfBuilder::new()
            .examples([serde_json::json!({"to": "human", "reason": "The customer asked for a person", "note": "VIP"})])
            .item(shape("human", "user_id", false, "The member asked to take over; without it, anyone may accept."))
            .item(shape("agent", "agent_id", true, "The agent to take over (of this workspace and mode)."))
            .into()
    }
}

impl utoipa::ToSchema for CreateHandoff {}

pub fn parse_create(body: Value) -> Parsed<CreateHandoff> {
    parse_object(body, loc(&["body"]), |r| {
        let to = r.required("to", one_of(HandoffTarget::ALL)).and_then(|t| HandoffTarget::parse(&t));
        let agent_sent = r.contains("agent_id");
        let agent_id = r.optional("agent_id", integer(1, i64::MAX));
        let user_id = r.optional("user_id", integer(1, i64::MAX));
        let reason = r.required("reason", string(1, 500));
        let note = r.optional("note", string(1, 2000));
        match to {
            Some(HandoffTarget::Agent) if !agent_sent => {
                r.push_error(FieldError::missing(loc(&["body", "agent_id"])));
            }
            Some(HandoffTarget::Agent) if user_id.is_some() => r.push_error(FieldError::new(
                loc(&["body", "user_id"]),
                "value_error.handoff.target",
                "user_id goes with to: human",
            )),
            Some(HandoffTarget::Human) if agent_id.is_some() => r.push_error(FieldError::new(
                loc(&["body", "agent_id"]),
                "value_error.handoff.target",
                "agent_id goes with to: agent",
            )),
            _ => {}
        }
        Some(CreateHandoff { to: to?, agent_id, user_id, reason: reason?, note })
    })
}

/// `POST /api/v1/handoffs/{id}/accept`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"user_id": 1}))]
pub struct AcceptHandoff {
    /// The member taking over; defaults to the signed-in user (required with an API key).
    #[schema(nullable = false, minimum = 1)]
    pub user_id: Option<i64>,
}

pub fn parse_accept(body: Value) -> Parsed<AcceptHandoff> {
    parse_object(body, loc(&["body"]), |r| Some(AcceptHandoff { user_id: r.optional("user_id", integer(1, i64::MAX)) }))
}

/// `POST /api/v1/handoffs/{id}/complete`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"close": false}))]
pub struct CompleteHandoff {
    /// Close the conversation instead of returning it to the agent (default false).
    #[schema(nullable = false)]
    pub close: Option<bool>,
}

pub fn parse_complete(body: Value) -> Parsed<CompleteHandoff> {
    parse_object(body, loc(&["body"]), |r| Some(CompleteHandoff { close: r.optional("close", boolean()) }))
}

/// `POST /api/v1/conversations/{id}/assign`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"user_id": 1}))]
pub struct Assign {
    /// The member who owns the conversation now; null unassigns it.
    #[schema(minimum = 1, required = true)]
    pub user_id: Option<i64>,
}

pub fn parse_assign(body: Value) -> Parsed<Assign> {
    parse_object(body, loc(&["body"]), |r| {
        // Required, and null is a value (unassign): look before taking it.
        if !r.contains("user_id") {
            r.push_error(FieldError::missing(loc(&["body", "user_id"])));
        }
        let user_id = r.nullable("user_id", integer(1, i64::MAX));
        Some(Assign { user_id: user_id? })
    })
}

/// `POST /api/v1/conversations/{id}/give-back`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"agent_id": 1}))]
pub struct GiveBack {
    /// The agent that answers from now on; default: the conversation's agent.
    #[schema(nullable = false, minimum = 1)]
    pub agent_id: Option<i64>,
}

pub fn parse_give_back(body: Value) -> Parsed<GiveBack> {
    parse_object(body, loc(&["body"]), |r| Some(GiveBack { agent_id: r.optional("agent_id", integer(1, i64::MAX)) }))
}

pub fn parse_filter(q: &mut QueryReader) -> HandoffFilter {
    HandoffFilter {
        status: q.enum_value::<HandoffStatus>("status"),
        conversation_id: q.integer("conversation_id", 1, i64::MAX),
    }
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Handoff", id)
}

async fn conversation(tx: &mut Tx, scope: Scope, id: i64) -> ServiceResult<Conversation> {
    conversation_repo::get(tx, scope, id).await?.ok_or_else(|| ServiceError::not_found("Conversation", id))
}

/// Reads conversation `id`, locking it (PostgreSQL) for the rest of the
/// transaction. Every change of who handles a conversation locks it first,
/// before any handoff row, as an agent's reply does: one order, so two of
/// them cannot deadlock, and none writes back what another changed.
async fn conversation_locked(tx: &mut Tx, scope: Scope, id: i64) -> ServiceResult<Conversation> {
    conversation_repo::get_locked(tx, scope, id).await?.ok_or_else(|| ServiceError::not_found("Conversation", id))
}

/// A user of the workspace, or a 422 at `field`.
pub(super) async fn member(tx: &mut Tx, scope: Scope, user_id: i64, field: &str) -> ServiceResult<i64> {
    match parley_store::repo::users::role_in(tx, user_id, scope.workspace_id).await? {
        Some(_) => Ok(user_id),
        None => Err(ServiceError::Validation(vec![FieldError::not_found(
            loc(&["body", field]),
            &format!("User {user_id} in this workspace"),
        )])),
    }
}

/// Changes who handles conversation `id`; emits `conversation.updated`.
async fn hand_to(
    tx: &mut Tx,
    scope: Scope,
    current: &Conversation,
    handler: Handler,
    assignee: Option<i64>,
    agent_id: Option<i64>,
) -> ServiceResult<()> {
    let id = current.item.id;
    let updated = conversation_repo::set_handler(tx, scope, id, handler, assignee, agent_id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Conversation", id))?;
    events::append(tx, scope, EventType::ConversationUpdated, event_data(&updated)?).await?;
    Ok(())
}

async fn read(tx: &mut Tx, scope: Scope, id: i64) -> ServiceResult<Handoff> {
    repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))
}

async fn emit(tx: &mut Tx, scope: Scope, kind: EventType, id: i64) -> ServiceResult<Handoff> {
    let handoff = read(tx, scope, id).await?;
    events::append(tx, scope, kind, event_data(&handoff)?).await?;
    Ok(handoff)
}

/// Requests a handoff of conversation `conversation_id` (see the module comment).
pub async fn request(
    tx: &mut Tx,
    scope: Scope,
    conversation_id: ConversationId,
    requested_by: Author,
    input: CreateHandoff,
) -> ServiceResult<Handoff> {
    let conversation_id = conversation_id.get();
    let current = conversation_locked(tx, scope, conversation_id).await?;
    if current.status == ConversationStatus::Closed {
        return Err(ServiceError::Conflict(format!("Conversation {conversation_id} is closed")));
    }
    if let Some(open) = repo::open_for(tx, scope, conversation_id).await? {
        return Err(ServiceError::Conflict(format!(
            "Conversation {conversation_id} already has an open handoff ({}, {})",
            open.id,
            open.status.as_str()
        )));
    }
    let user_id = match input.user_id {
        Some(u) => Some(member(tx, scope, u, "user_id").await?),
        None => None,
    };
    if let Some(agent) = input.agent_id
        && parley_store::repo::agents::get(tx, scope, agent, false).await?.is_none()
    {
        return Err(ServiceError::Validation(vec![FieldError::not_found(
            loc(&["body", "agent_id"]),
            &format!("Agent {agent}"),
        )]));
    }
    let created = repo::insert(
        tx,
        scope,
        &NewHandoff {
            conversation_id,
            to: input.to,
            agent_id: input.agent_id,
            user_id,
            reason: &input.reason,
            note: input.note.as_deref(),
            requested_by: &requested_by,
        },
    )
    .await?;
    emit(tx, scope, EventType::HandoffRequested, created.id).await?;
    match input.to {
        HandoffTarget::Human => {
            // Until someone accepts, nobody answers: not the agent either.
            hand_to(tx, scope, &current, Handler::None, user_id, current.agent_id).await?;
            super::offers::offer(tx, scope, &created, &current.item.title).await?;
            read(tx, scope, created.id).await
        }
        HandoffTarget::Agent => {
            hand_to(tx, scope, &current, Handler::Agent, None, input.agent_id).await?;
            repo::transition(tx, scope, created.id, &[HandoffStatus::Requested], HandoffStatus::Completed, None)
                .await?;
            emit(tx, scope, EventType::HandoffCompleted, created.id).await
        }
    }
}

/// A user takes a requested handoff: the conversation is theirs.
pub async fn accept(
    tx: &mut Tx,
    scope: Scope,
    id: HandoffId,
    signed_in_user: Option<i64>,
    input: AcceptHandoff,
) -> ServiceResult<Handoff> {
    let id = id.get();
    let handoff = read(tx, scope, id).await?;
    if handoff.status == HandoffStatus::Accepted {
        return Err(already_accepted(tx, &handoff).await);
    }
    if handoff.status != HandoffStatus::Requested {
        return Err(ServiceError::Conflict(format!(
            "Handoff {id} is {}; only a requested handoff can be accepted",
            handoff.status.as_str()
        )));
    }
    let user = input.user_id.or(signed_in_user).ok_or_else(|| {
        // Only a person is signed in; an API key must name who takes it.
        ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "user_id"]),
            "value_error.user.required_with_key",
            "user_id is required when an API key accepts a handoff",
        )])
    })?;
    let user = member(tx, scope, user, "user_id").await?;
    let current = conversation_locked(tx, scope, handoff.conversation_id).await?;
    if !repo::transition(tx, scope, id, &[HandoffStatus::Requested], HandoffStatus::Accepted, Some(user)).await? {
        // Someone else's accept committed first: say who has it.
        let now = read(tx, scope, id).await?;
        if now.status == HandoffStatus::Accepted {
            return Err(already_accepted(tx, &now).await);
        }
        return Err(ServiceError::Conflict(format!("Handoff {id} changed meanwhile; read it again")));
    }
    hand_to(tx, scope, &current, Handler::Human, Some(user), current.agent_id).await?;
    emit(tx, scope, EventType::HandoffAccepted, id).await
}

/// The 409 for accepting a handoff someone holds: it names them, so the
/// second person knows whom to talk to.
async fn already_accepted(tx: &mut Tx, handoff: &Handoff) -> ServiceError {
    let holder = match handoff.user_id {
        Some(user) => match parley_store::repo::users::get(tx, user).await {
            Ok(Some(u)) => format!("{} (user {user})", u.email),
            _ => format!("user {user}"),
        },
        None => "someone".to_owned(),
    };
    ServiceError::Conflict(format!("Handoff {} was already accepted by {holder}", handoff.id))
}

/// The human is done: the agent answers again, or the conversation closes.
pub async fn complete(tx: &mut Tx, scope: Scope, id: HandoffId, input: CompleteHandoff) -> ServiceResult<Handoff> {
    let id = id.get();
    let handoff = read(tx, scope, id).await?;
    if handoff.status != HandoffStatus::Accepted {
        return Err(ServiceError::Conflict(format!(
            "Handoff {id} is {}; only an accepted handoff can be completed{}",
            handoff.status.as_str(),
            if handoff.status == HandoffStatus::Requested { " (cancel it instead)" } else { "" }
        )));
    }
    let current = conversation_locked(tx, scope, handoff.conversation_id).await?;
    if !repo::transition(tx, scope, id, &[HandoffStatus::Accepted], HandoffStatus::Completed, None).await? {
        return Err(ServiceError::Conflict(format!("Handoff {id} changed meanwhile; read it again")));
    }
    if input.close.unwrap_or(false) {
        conversation_repo::set_status(tx, scope, current.item.id, ConversationStatus::Closed).await?;
        hand_to(tx, scope, &current, Handler::None, None, current.agent_id).await?;
    } else {
        hand_to(tx, scope, &current, Handler::Agent, None, current.agent_id).await?;
    }
    emit(tx, scope, EventType::HandoffCompleted, id).await
}

/// Withdraws an open handoff: the agent answers again.
pub async fn cancel(tx: &mut Tx, scope: Scope, id: HandoffId) -> ServiceResult<Handoff> {
    let id = id.get();
    let handoff = read(tx, scope, id).await?;
    let current = conversation_locked(tx, scope, handoff.conversation_id).await?;
    let open = [HandoffStatus::Requested, HandoffStatus::Accepted];
    if !open.contains(&handoff.status) || !repo::transition(tx, scope, id, &open, HandoffStatus::Canceled, None).await?
    {
        return Err(ServiceError::Conflict(format!(
            "Handoff {id} is {}; only a requested or accepted handoff can be canceled",
            handoff.status.as_str()
        )));
    }
    if current.status != ConversationStatus::Closed {
        hand_to(tx, scope, &current, Handler::Agent, None, current.agent_id).await?;
    }
    emit(tx, scope, EventType::HandoffCanceled, id).await
}

/// Gives conversation `id` to a member (or to nobody): who owns it on the
/// team. Who answers (`handler`) does not change: a person takes over by
/// accepting a handoff. Emits `conversation.updated`.
/// `actor` is the signed-in member who assigns (none for an API key): the
/// assignee is notified unless they assigned themselves.
pub async fn assign(
    tx: &mut Tx,
    scope: Scope,
    id: ConversationId,
    actor: Option<i64>,
    input: Assign,
) -> ServiceResult<Conversation> {
    let current = conversation_locked(tx, scope, id.get()).await?;
    if current.status == ConversationStatus::Closed {
        return Err(ServiceError::Conflict(format!("Conversation {} is closed", current.item.id)));
    }
    let user = match input.user_id {
        Some(u) => Some(member(tx, scope, u, "user_id").await?),
        None => None,
    };
    hand_to(tx, scope, &current, current.handler, user, current.agent_id).await?;
    if let Some(user) = user.filter(|u| current.assignee_user_id != Some(*u)) {
        let text = format!("{} was assigned to you", notifications::about(&current.item.title, id));
        notifications::notify(tx, scope, &[user], NotificationKind::Assignment, current.item.id, actor, &text).await?;
    }
    conversation(tx, scope, current.item.id).await
}

/// Gives conversation `id` back to an agent: it answers the next message.
/// An open handoff ends with it (an accepted one completes, a waiting one
/// is canceled). Emits `conversation.updated` and the handoff's event.
pub async fn give_back(tx: &mut Tx, scope: Scope, id: ConversationId, input: GiveBack) -> ServiceResult<Conversation> {
    let current = conversation_locked(tx, scope, id.get()).await?;
    let id = current.item.id;
    if current.status == ConversationStatus::Closed {
        return Err(ServiceError::Conflict(format!("Conversation {id} is closed")));
    }
    let Some(agent) = input.agent_id.or(current.agent_id) else {
        return Err(ServiceError::Conflict(format!("Conversation {id} has no agent yet; name one with agent_id")));
    };
    match parley_store::repo::agents::get(tx, scope, agent, false).await? {
        Some(a) if a.is_template => {
            return Err(ServiceError::Conflict(format!("Agent {agent} is a template; name an agent that answers")));
        }
        Some(a) if a.status == parley_domain::agent::AgentStatus::Active => {}
        Some(_) => return Err(ServiceError::Conflict(format!("Agent {agent} is not active; name an active agent"))),
        None => {
            return Err(ServiceError::Validation(vec![FieldError::not_found(
                loc(&["body", "agent_id"]),
                &format!("Agent {agent}"),
            )]));
        }
    }
    if let Some(open) = repo::open_for(tx, scope, id).await? {
        let (to, kind) = match open.status {
            HandoffStatus::Accepted => (HandoffStatus::Completed, EventType::HandoffCompleted),
            _ => (HandoffStatus::Canceled, EventType::HandoffCanceled),
        };
        if !repo::transition(tx, scope, open.id, &[open.status], to, None).await? {
            return Err(ServiceError::Conflict(format!("Handoff {} changed meanwhile; read it again", open.id)));
        }
        emit(tx, scope, kind, open.id).await?;
    }
    hand_to(tx, scope, &current, Handler::Agent, None, Some(agent)).await?;
    conversation(tx, scope, id).await
}

pub async fn get(svc: &Services, scope: Scope, id: HandoffId) -> ServiceResult<Handoff> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &HandoffFilter,
    page: Page,
) -> ServiceResult<(Vec<Handoff>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page).await?)
}
