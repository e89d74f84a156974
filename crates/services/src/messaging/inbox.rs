//! The inbox: conversations as a team works them — by view (mine,
//! unassigned, handoffs waiting, all), filtered, sorted by last activity
//! or by who has waited longest, each with its open handoff.

use parley_domain::conversation::{
    Conversation, ConversationStatus, Handler, Handoff, InboxSortName as SortName, InboxViewName as ViewName,
};
use parley_domain::ids::ConversationId;
use parley_domain::validation::{
    FieldError, LocPart, Page, Parsed, QueryReader, enum_value, integer, list_of, loc, parse_object, timestamp,
};
use parley_domain::{Scope, Timestamp};
use parley_store::Tx;
use parley_store::repo::conversations::{self as repo, InboxCounts, InboxSort, InboxView};
use parley_store::repo::handoffs;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::conversations::UpdateConversation;
use super::handoffs::Assign;

use crate::{ServiceError, ServiceResult, Services};

/// The inbox's query, as parsed (the view needs the caller to resolve).
#[derive(Debug, Clone)]
pub struct InboxQuery {
    pub view: ViewName,
    pub status: Option<ConversationStatus>,
    pub channel: Option<String>,
    pub handler: Option<Handler>,
    pub agent_id: Option<i64>,
    pub assignee_user_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub label: Option<String>,
    pub sort: SortName,
}

pub fn parse_query(q: &mut QueryReader) -> InboxQuery {
    InboxQuery {
        view: q.enum_value::<ViewName>("view").unwrap_or(ViewName::All),
        status: q.enum_value::<ConversationStatus>("status"),
        channel: q.one_of("channel", parley_domain::channel::ChannelType::ALL),
        handler: q.enum_value::<Handler>("handler"),
        agent_id: q.integer("agent_id", 1, i64::MAX),
        assignee_user_id: q.integer("assignee_user_id", 1, i64::MAX),
        contact_id: q.integer("contact_id", 1, i64::MAX),
        label: q.string("label", 1, 50),
        sort: q.enum_value::<SortName>("sort").unwrap_or(SortName::Recent),
    }
}

/// A conversation in the inbox: the full conversation and its open
/// (requested or accepted) handoff, if any.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InboxConversation {
    #[serde(flatten)]
    pub conversation: Conversation,
    pub handoff: Option<Handoff>,
}

/// How many open conversations each view holds (handoffs: those whose
/// handoff waits), and the unread messages in the caller's own.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InboxSummary {
    pub all: i64,
    /// Null with an API key (it is nobody's).
    pub mine: Option<i64>,
    pub unassigned: i64,
    pub handoffs: i64,
    /// Unread inbound messages in the caller's open conversations.
    pub unread_mine: Option<i64>,
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    user_id: Option<i64>,
    query: &InboxQuery,
    page: Page,
) -> ServiceResult<(Vec<InboxConversation>, i64)> {
    let view = match query.view {
        ViewName::All => InboxView::All,
        ViewName::Unassigned => InboxView::Unassigned,
        ViewName::Handoffs => InboxView::Handoffs,
        ViewName::Mine => InboxView::Mine(user_id.ok_or_else(|| {
            ServiceError::Validation(vec![FieldError::new(
                loc(&["query", "view"]),
                "value_error.view",
                "view=mine needs a signed-in member (an API key is nobody's); use assignee_user_id",
            )])
        })?),
    };
    let filter = repo::InboxFilter {
        view,
        status: query.status,
        channel: query.channel.clone(),
        handler: query.handler,
        agent_id: query.agent_id,
        assignee_user_id: query.assignee_user_id,
        contact_id: query.contact_id,
        label: query.label.clone(),
        sort: match query.sort {
            SortName::Recent => InboxSort::Recent,
            SortName::Waiting => InboxSort::Waiting,
        },
    };
    let mut c = svc.db.read().await?;
    let (conversations, total) = repo::inbox(&mut c, scope, &filter, page).await?;
    let ids: Vec<i64> = conversations.iter().map(|c| c.item.id).collect();
    let mut open = handoffs::open_for_many(&mut c, scope, &ids).await?;
    let items = conversations
        .into_iter()
        .map(|conversation| {
            let at = open.iter().position(|h| h.conversation_id == conversation.item.id);
            InboxConversation { handoff: at.map(|i| open.swap_remove(i)), conversation }
        })
        .collect();
    Ok((items, total))
}

pub async fn summary(svc: &Services, scope: Scope, user_id: Option<i64>) -> ServiceResult<InboxSummary> {
    let mut c = svc.db.read().await?;
    let InboxCounts { all, mine, unassigned, handoffs, unread_mine } =
        repo::inbox_counts(&mut c, scope, user_id).await?;
    let signed_in = user_id.is_some();
    Ok(InboxSummary {
        all,
        mine: signed_in.then_some(mine),
        unassigned,
        handoffs,
        unread_mine: signed_in.then_some(unread_mine),
    })
}

/// The most conversations one bulk change takes (the inbox's page is 50).
pub const BULK_MAX: usize = 100;

/// `POST /api/v1/conversations/bulk`: one change to many conversations
/// (neither field: none, as `PATCH` with an empty body).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"conversation_ids": [1], "status": "resolved"}))]
pub struct BulkUpdate {
    /// 1–100 conversations of this workspace and mode (a repeat counts once).
    #[schema(schema_with = parley_domain::schema::bulk_ids)]
    pub conversation_ids: Vec<i64>,
    /// The status each gets, under `PATCH /conversations/{id}`'s rules.
    #[schema(nullable = false)]
    pub status: Option<ConversationStatus>,
    /// With `status: snoozed`: when they wake (RFC 3339).
    #[schema(value_type = Option<String>, format = DateTime, nullable = false)]
    pub snoozed_until: Option<Timestamp>,
    /// The member each is assigned to (as `POST /conversations/{id}/assign`), or null to unassign.
    #[schema(value_type = Option<i64>, nullable, minimum = 1)]
    pub assignee_user_id: Option<Option<i64>>,
}

pub fn parse_bulk(body: Value) -> Parsed<BulkUpdate> {
    parse_object(body, loc(&["body"]), |r| {
        let ids = r.required("conversation_ids", list_of(BULK_MAX, |v, l| integer(1, i64::MAX)(v, l)));
        if ids.as_ref().is_some_and(Vec::is_empty) {
            r.push_error(FieldError::list_too_short(loc(&["body", "conversation_ids"]), 1));
        }
        let status = r.optional("status", enum_value::<ConversationStatus>());
        let snoozed_until = r.optional("snoozed_until", timestamp());
        let assignee_user_id = r.nullable("assignee_user_id", integer(1, i64::MAX));
        Some(BulkUpdate { conversation_ids: ids?, status, snoozed_until, assignee_user_id })
    })
}

/// The conversations a bulk change left, in the order asked.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BulkUpdated {
    pub items: Vec<Conversation>,
}

/// Applies one change to each conversation, all or none, each exactly as
/// its single operation would (events, notifications): a status as
/// `PATCH`, an assignee as `assign`. An unknown id is a 422 naming its
/// place in the list; a closed one the 409 its single change would give.
pub async fn bulk(tx: &mut Tx, scope: Scope, actor: Option<i64>, input: BulkUpdate) -> ServiceResult<BulkUpdated> {
    let mut ids = Vec::with_capacity(input.conversation_ids.len());
    for id in &input.conversation_ids {
        if !ids.contains(id) {
            ids.push(*id);
        }
    }
    let mut missing = Vec::new();
    for (i, id) in input.conversation_ids.iter().enumerate() {
        if repo::get(tx, scope, *id).await?.is_none() {
            missing.push(FieldError::not_found(
                vec![LocPart::from("body"), LocPart::from("conversation_ids"), LocPart::from(i)],
                &format!("Conversation {id}"),
            ));
        }
    }
    if let Some(Some(user)) = input.assignee_user_id
        && let Err(e) = super::handoffs::member(tx, scope, user, "assignee_user_id").await
    {
        match e {
            ServiceError::Validation(faults) => missing.extend(faults),
            other => return Err(other),
        }
    }
    if !missing.is_empty() {
        return Err(ServiceError::Validation(missing));
    }
    // Each conversation is locked as it is changed: in id order, so two bulk
    // changes over the same conversations never wait on each other in a circle.
    let mut order = ids.clone();
    order.sort_unstable();
    for id in order {
        let id = ConversationId(id);
        if let Some(status) = input.status {
            let change = UpdateConversation {
                status: Some(status),
                snoozed_until: input.snoozed_until.map(Some),
                ..UpdateConversation::default()
            };
            super::conversations::update(tx, scope, id, change).await?;
        }
        if let Some(user_id) = input.assignee_user_id {
            super::handoffs::assign(tx, scope, id, actor, Assign { user_id }).await?;
        }
    }
    let mut items = Vec::with_capacity(ids.len());
    for id in ids {
        items.push(repo::get(tx, scope, id).await?.ok_or_else(|| ServiceError::not_found("Conversation", id))?);
    }
    Ok(BulkUpdated { items })
}
