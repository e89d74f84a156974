//! What an agent reads to answer a conversation, on one connection: the
//! agent, the conversation and its recent messages, the contact, the
//! workspace's name and the agent's prompt blocks. The agent runtime reads
//! through here (it has no database handle of its own).

use parley_domain::agent::{Agent, AgentRun};
use parley_domain::contact::Contact;
use parley_domain::conversation::{Conversation, Message, Note};
use parley_domain::ids::AgentId;
use parley_domain::prompt::PromptBlock;
use parley_domain::validation::{FieldError, loc};
use parley_domain::{Scope, Timestamp};
use parley_store::Conn;
use parley_store::repo::{agent_runs, agents, contacts, conversations, notes, prompt_blocks, workspaces};

use super::runs::RunJob;
use crate::{ServiceError, ServiceResult, Services};

/// Messages of memory read (the prompt keeps what fits its token budget).
const HISTORY: i64 = 100;

/// The most shared notes an answer reads (the latest).
const TEAM_NOTES: i64 = 20;

/// What an answer is built from.
#[derive(Debug, Clone, Default)]
pub struct AnswerContext {
    pub conversation: Option<Conversation>,
    /// The conversation's latest messages, oldest first.
    pub history: Vec<Message>,
    pub contact: Option<Contact>,
    pub workspace_name: String,
    /// The agent's prompt blocks, in its order.
    pub blocks: Vec<PromptBlock>,
    /// The notes members shared with the agent (the latest, oldest first).
    pub team_notes: Vec<Note>,
    /// When the conversation was last handed off: what the contact wrote
    /// before it was a person's to deal with, not a reason to hand off again.
    pub handed_off_at: Option<Timestamp>,
}

/// A queued run, its agent (if it still exists) and what it answers from;
/// `None` when the run or its conversation is gone.
pub async fn for_run(
    svc: &Services,
    scope: Scope,
    due: &RunJob,
) -> ServiceResult<Option<(AgentRun, Option<Agent>, AnswerContext)>> {
    let mut c = svc.db.read().await?;
    let run = agent_runs::get(&mut c, scope, due.run_id).await?;
    let conversation = conversations::get(&mut c, scope, due.conversation_id).await?;
    let (Some(run), Some(conversation)) = (run, conversation) else { return Ok(None) };
    let agent = agents::get(&mut c, scope, run.agent_id, false).await?;
    let context = read(&mut c, scope, agent.as_ref(), Some(conversation)).await?;
    Ok(Some((run, agent, context)))
}

/// The playground: the agent (a 404 if it is not this workspace's) and,
/// when asked, an existing conversation to answer (a 422 naming
/// `conversation_id` if there is none).
pub async fn for_playground(
    svc: &Services,
    scope: Scope,
    agent_id: AgentId,
    conversation_id: Option<i64>,
) -> ServiceResult<(Agent, AnswerContext)> {
    let agent_id = agent_id.get();
    let mut c = svc.db.read().await?;
    let agent = super::require_agent(&mut c, scope, agent_id).await?;
    let conversation = match conversation_id {
        Some(id) => Some(conversations::get(&mut c, scope, id).await?.ok_or_else(|| {
            ServiceError::Validation(vec![FieldError::not_found(
                loc(&["body", "conversation_id"]),
                &format!("Conversation {id}"),
            )])
        })?),
        None => None,
    };
    let context = read(&mut c, scope, Some(&agent), conversation).await?;
    Ok((agent, context))
}

async fn read(
    c: &mut Conn,
    scope: Scope,
    agent: Option<&Agent>,
    conversation: Option<Conversation>,
) -> ServiceResult<AnswerContext> {
    let history = match &conversation {
        Some(conversation) => conversations::recent_messages(c, scope, conversation.item.id, HISTORY).await?,
        None => Vec::new(),
    };
    let contact = match conversation.as_ref().and_then(|c| c.contact_id) {
        Some(id) => contacts::get(c, scope, id, false).await?,
        None => None,
    };
    let facts = match &conversation {
        Some(conversation) => conversations::answer_facts(c, scope, conversation.item.id).await?,
        None => conversations::AnswerFacts {
            workspace_name: workspaces::get(c, scope.workspace_id).await?.map(|w| w.name).unwrap_or_default(),
            ..Default::default()
        },
    };
    let blocks = match agent {
        Some(agent) => prompt_blocks::get_many(c, scope, &agent.prompt_block_ids).await?,
        None => Vec::new(),
    };
    let team_notes = match &conversation {
        Some(conversation) if facts.has_agent_notes => {
            notes::for_agent(c, scope, conversation.item.id, TEAM_NOTES).await?
        }
        _ => Vec::new(),
    };
    Ok(AnswerContext {
        conversation,
        history,
        contact,
        workspace_name: facts.workspace_name,
        blocks,
        team_notes,
        handed_off_at: facts.handed_off_at,
    })
}
