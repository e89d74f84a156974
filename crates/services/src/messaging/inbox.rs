//! The inbox: conversations as a team works them — by view (mine,
//! unassigned, handoffs waiting, all), filtered, sorted by last activity
//! or by who has waited longest, each with its open handoff.

use parley_domain::Scope;
use parley_domain::conversation::{
    Conversation, ConversationStatus, Handler, Handoff, InboxSortName as SortName, InboxViewName as ViewName,
};
use parley_domain::validation::{FieldError, Page, QueryReader, loc};
use parley_store::repo::conversations::{self as repo, InboxCounts, InboxSort, InboxView};
use parley_store::repo::handoffs;
use serde::Serialize;
use utoipa::ToSchema;

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
