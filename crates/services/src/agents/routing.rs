//! Routing: which agent answers inbound traffic.
//!
//! A conversation that has an agent keeps it. Otherwise the enabled
//! triggers of the workspace's active agents (templates never answer) are
//! tried in order, the agent's `priority` highest first, then the lowest
//! agent id; the first trigger that matches the traffic (its event; its
//! channel type or `*`; its conversation kind, if set; its keyword or
//! regular expression, if set) names the agent, which is written to the
//! conversation.
//!
//! An agent that should answer gets a run queued (`queue_answer`) with its
//! `agent.run` job, in the inbound message's transaction; the agent
//! runtime (`parley-agent-runtime`) carries the job out.

use std::time::Duration;

use parley_domain::agent::{Agent, AgentRun, AgentStatus, PatternType, RunTrigger, Trigger, TriggerEvent};
use parley_domain::conversation::{Conversation, ConversationKind, ConversationStatus, Handler};
use parley_domain::event::EventType;
use parley_domain::{Scope, Timestamp};
use parley_jobs::Enqueue;
use parley_store::Tx;
use parley_store::repo::agent_runs::{self as run_repo, NewRun};
use parley_store::repo::agents as agent_repo;
use parley_store::repo::{conversations, events, triggers};

use super::runs::{self, RuntimeConfig};
use crate::{ServiceResult, Services, event_data};

/// Inbound traffic to route.
#[derive(Debug, Clone, Copy)]
pub struct Traffic<'a> {
    pub event: TriggerEvent,
    /// The channel type (`api`, `webchat`, `voice`, …).
    pub channel: &'a str,
    pub kind: ConversationKind,
    /// The message's text (empty for a call).
    pub text: &'a str,
}

/// Whether `trigger` matches `traffic`.
pub fn matches(trigger: &Trigger, traffic: &Traffic<'_>) -> bool {
    trigger.enabled
        && trigger.event == traffic.event
        && (trigger.channel == "*" || trigger.channel == traffic.channel)
        && trigger.kind.as_deref().is_none_or(|k| k == traffic.kind.as_str())
        && match (&trigger.pattern, trigger.pattern_type) {
            (None, _) => true,
            (Some(keyword), PatternType::Keyword) => contains_word(traffic.text, keyword),
            // Patterns are checked when written; one that no longer compiles matches nothing.
            (Some(pattern), PatternType::Regex) => {
                regex::RegexBuilder::new(pattern).size_limit(1 << 20).build().is_ok_and(|re| re.is_match(traffic.text))
            }
        }
}

/// Whether `text` holds `keyword` as whole words, ignoring case.
pub fn contains_word(text: &str, keyword: &str) -> bool {
    let (text, keyword) = (text.to_lowercase(), keyword.trim().to_lowercase());
    if keyword.is_empty() {
        return false;
    }
    let is_word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(&keyword).any(|(at, found)| {
        !is_word(text[..at].chars().next_back()) && !is_word(text[at + found.len()..].chars().next())
    })
}

/// The agent of the first trigger (in routing order) that matches.
pub fn choose(triggers: &[Trigger], traffic: &Traffic<'_>) -> Option<i64> {
    triggers.iter().find(|t| matches(t, traffic)).map(|t| t.agent_id)
}

/// The agent that answers `traffic` on `conversation`: its own, or the
/// triggers' choice, written to the conversation (with a
/// `conversation.updated` event). `None` when no agent is set or matches.
pub async fn route(
    tx: &mut Tx,
    scope: Scope,
    conversation: &Conversation,
    traffic: Traffic<'_>,
) -> ServiceResult<Option<i64>> {
    if let Some(agent_id) = conversation.agent_id {
        return Ok(Some(agent_id));
    }
    let candidates = triggers::routable(tx, scope, traffic.event).await?;
    let Some(agent_id) = choose(&candidates, &traffic) else { return Ok(None) };
    let c = conversation;
    let routed =
        conversations::set_handler(tx, scope, c.item.id, c.handler, c.assignee_user_id, Some(agent_id)).await?;
    if let Some(routed) = routed {
        events::append(tx, scope, EventType::ConversationUpdated, event_data(&routed)?).await?;
    }
    Ok(Some(agent_id))
}

/// Queues the answer of agent `agent_id` to the conversation's newest
/// message, in the caller's transaction, if the agent should answer: the
/// conversation is the agent's (not a person's), the agent is active, and
/// no run is already waiting to answer it. `opened_here`: the conversation
/// was opened in this transaction, so no run can be waiting yet (nothing
/// to read).
pub async fn queue_answer(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    conversation: &Conversation,
    opened_here: bool,
    agent_id: i64,
) -> ServiceResult<Option<AgentRun>> {
    if conversation.handler != Handler::Agent || conversation.status == ConversationStatus::Closed {
        return Ok(None);
    }
    let Some(agent) = agent_repo::get_for_routing(tx, scope, agent_id).await? else { return Ok(None) };
    if agent.status != AgentStatus::Active || agent.is_template {
        return Ok(None);
    }
    let conversation_id = conversation.item.id;
    if !opened_here && run_repo::queued_for_conversation(tx, scope, conversation_id).await?.is_some() {
        return Ok(None);
    }
    let model = match &agent.model {
        Some(model) => model.clone(),
        None => svc.config.text_engines.get(&agent.text_engine).map(|e| e.model().to_owned()).unwrap_or_default(),
    };
    let run = run_repo::insert(
        tx,
        scope,
        &NewRun {
            agent_id,
            conversation_id: Some(conversation_id),
            call_id: None,
            trigger: RunTrigger::Message,
            engine: &agent.text_engine,
            model: &model,
        },
    )
    .await?;
    let at = Timestamp::now().plus_duration(debounce(&svc.config.runtime, &agent));
    let job = Enqueue::of(&runs::RunJob { run_id: run.id, conversation_id });
    let queue = format!("agent:{conversation_id}");
    let job = if opened_here { job.in_new_queue(queue) } else { job.in_queue(queue) }.for_scope(scope).at(at);
    parley_jobs::enqueue(tx, job).await?;
    Ok(Some(run))
}

/// How long the agent waits for a quiet conversation.
pub fn debounce(config: &RuntimeConfig, agent: &Agent) -> Duration {
    agent.debounce_ms.map_or(config.debounce, |ms| Duration::from_millis(ms as u64))
}

#[cfg(test)]
mod tests {
    use parley_domain::Timestamp;

    use super::*;

    fn trigger(agent_id: i64, channel: &str, pattern: Option<(&str, PatternType)>) -> Trigger {
        Trigger {
            id: agent_id * 10,
            agent_id,
            event: TriggerEvent::MessageReceived,
            channel: channel.to_owned(),
            kind: None,
            pattern: pattern.map(|(p, _)| p.to_owned()),
            pattern_type: pattern.map_or(PatternType::Keyword, |(_, t)| t),
            enabled: true,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
        }
    }

    fn message(channel: &str, text: &'static str) -> Traffic<'static> {
        let channel: &'static str = Box::leak(channel.to_owned().into_boxed_str());
        Traffic { event: TriggerEvent::MessageReceived, channel, kind: ConversationKind::Direct, text }
    }

    #[test]
    fn keywords_match_whole_words_ignoring_case() {
        let t = trigger(1, "*", Some(("refund", PatternType::Keyword)));
        assert!(matches(&t, &message("api", "I want a REFUND now")));
        assert!(matches(&t, &message("api", "refund?")));
        assert!(!matches(&t, &message("api", "refunded already")));
        assert!(!matches(&t, &message("api", "hello")));
        let phrase = trigger(1, "*", Some(("order status", PatternType::Keyword)));
        assert!(matches(&phrase, &message("api", "What's my Order Status, please")));
    }

    #[test]
    fn channel_kind_event_regex_and_enabled_all_count() {
        let webchat_only = trigger(1, "webchat", None);
        assert!(matches(&webchat_only, &message("webchat", "hi")));
        assert!(!matches(&webchat_only, &message("api", "hi")));
        let mut groups = trigger(1, "*", None);
        groups.kind = Some("group".into());
        assert!(!matches(&groups, &message("api", "hi")));
        let mut calls = trigger(1, "*", None);
        calls.event = TriggerEvent::CallInbound;
        assert!(!matches(&calls, &message("api", "hi")));
        let mut off = trigger(1, "*", None);
        off.enabled = false;
        assert!(!matches(&off, &message("api", "hi")));
        let re = trigger(1, "*", Some((r"order #\d{4}", PatternType::Regex)));
        assert!(matches(&re, &message("api", "about order #1234")));
        assert!(!matches(&re, &message("api", "about order #12")));
    }

    #[test]
    fn the_first_match_in_routing_order_wins() {
        // Given in routing order (priority, then agent id): a keyword agent first, a catch-all after.
        let triggers = vec![trigger(7, "*", Some(("billing", PatternType::Keyword))), trigger(3, "*", None)];
        assert_eq!(choose(&triggers, &message("api", "a billing question")), Some(7));
        assert_eq!(choose(&triggers, &message("api", "anything else")), Some(3));
        assert_eq!(choose(&triggers[..1], &message("api", "anything else")), None);
    }
}
