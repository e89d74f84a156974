//! Prompt assembly: the system prompt (the agent's prompt blocks in order,
//! then its `system_prompt`, rendered with variables) and the
//! conversation's memory within a token budget. The preview and a live run
//! use the same functions, so the preview shows what the model sees.

use std::collections::BTreeMap;

use parley_domain::Timestamp;
use parley_domain::agent::Agent;
use parley_domain::contact::Contact;
use parley_domain::conversation::{AuthorType, Conversation, Direction, Message};
use parley_domain::prompt::{PromptBlock, RenderError, render};
use parley_domain::validation::{FieldError, LocPart};
use parley_engines::{ChatMessage, estimate_tokens};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult};

/// A block that went into a rendered prompt, at the version used.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BlockRef {
    pub id: i64,
    pub slug: String,
    pub version: i64,
}

/// A rendered system prompt and the blocks in it.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub prompt: String,
    pub blocks: Vec<BlockRef>,
}

/// What a block's variable without a value does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// A 422 naming each (the preview: the caller is there to fix it).
    Refuse,
    /// Renders as nothing (a live run must answer anyway).
    Empty,
}

/// What the built-in variables are read from.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub agent: &'a Agent,
    pub workspace_name: &'a str,
    pub conversation: Option<&'a Conversation>,
    pub contact: Option<&'a Contact>,
    pub now: Timestamp,
}

/// The built-in variables: `agent.name`, `workspace.name`, `now`, and with
/// a conversation `channel` and `conversation.title`, and with a contact
/// `contact.id`, `contact.display_name`, `contact.email`, `contact.phone`,
/// `contact.notes`, `contact.tags` (comma-separated) and
/// `contact.metadata.KEY` for each scalar metadata value.
pub fn builtin_variables(ctx: Context<'_>) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    let mut set = |k: &str, v: String| {
        vars.insert(k.to_owned(), v);
    };
    set("agent.name", ctx.agent.name.clone());
    set("workspace.name", ctx.workspace_name.to_owned());
    set("now", ctx.now.to_rfc3339());
    if let Some(c) = ctx.conversation {
        set("channel", c.item.channel.clone());
        set("conversation.title", c.item.title.clone());
    }
    if let Some(c) = ctx.contact {
        set("contact.id", c.id.to_string());
        set("contact.display_name", c.display_name.clone());
        set("contact.email", c.normalized_email.clone().unwrap_or_default());
        set("contact.phone", c.normalized_phone.clone().unwrap_or_default());
        set("contact.notes", c.notes.clone().unwrap_or_default());
        set("contact.tags", c.tags.join(", "));
        for (k, v) in &c.metadata {
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => continue,
            };
            set(&format!("contact.metadata.{k}"), text);
        }
    }
    vars
}

/// Joins the built-ins with the caller's values (call `variables`, message
/// metadata, the preview's body); built-ins win where both name one.
pub fn variables(builtins: BTreeMap<String, String>, caller: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut vars = caller.clone();
    vars.extend(builtins);
    vars
}

/// The system prompt: `blocks` in the agent's order, then its
/// `system_prompt`, each rendered with `vars`. The `system_prompt` is free
/// text: a placeholder with no value, or text that is not a template (a
/// stray `{{`), is kept as written.
pub fn system_prompt(
    agent: &Agent,
    blocks: &[PromptBlock],
    vars: &BTreeMap<String, String>,
    missing: Missing,
) -> ServiceResult<Rendered> {
    let mut parts = Vec::new();
    let mut used = Vec::new();
    let mut absent: Vec<(String, String)> = Vec::new();
    for id in &agent.prompt_block_ids {
        let Some(block) = blocks.iter().find(|b| b.id == *id) else { continue };
        match render(&block.content, vars) {
            Ok(text) => parts.push(text),
            Err(RenderError::Missing(names)) => {
                for n in &names {
                    if !absent.iter().any(|(m, _)| m == n) {
                        absent.push((n.clone(), block.slug.clone()));
                    }
                }
                parts.push(render(&block.content, &with_empty(vars, &names)).unwrap_or_default());
            }
            // Stored content was validated on write; a fault here is data corruption.
            Err(RenderError::Template(e)) => {
                return Err(parley_store::StoreError::Corrupt(format!("prompt block {}: {e}", block.id)).into());
            }
        }
        used.push(BlockRef { id: block.id, slug: block.slug.clone(), version: block.version });
    }
    if missing == Missing::Refuse && !absent.is_empty() {
        return Err(ServiceError::Validation(
            absent
                .into_iter()
                .map(|(name, slug)| {
                    FieldError::missing(vec!["body".into(), "variables".into(), LocPart::Key(name)])
                        .with_ctx(serde_json::json!({ "prompt_block": slug }))
                })
                .collect(),
        ));
    }
    if !agent.system_prompt.is_empty() {
        let text = match render(&agent.system_prompt, vars) {
            Ok(text) => text,
            Err(RenderError::Missing(names)) => {
                let mut kept = vars.clone();
                for n in names {
                    kept.insert(n.clone(), format!("{{{{{n}}}}}"));
                }
                render(&agent.system_prompt, &kept).unwrap_or_else(|_| agent.system_prompt.clone())
            }
            Err(RenderError::Template(_)) => agent.system_prompt.clone(),
        };
        parts.push(text);
    }
    Ok(Rendered { prompt: parts.join("\n\n"), blocks: used })
}

fn with_empty(vars: &BTreeMap<String, String>, names: &[String]) -> BTreeMap<String, String> {
    let mut all = vars.clone();
    for n in names {
        all.entry(n.clone()).or_default();
    }
    all
}

/// The conversation's memory: its latest messages (given oldest first),
/// as many as fit in `budget` tokens, oldest first. Contacts' messages are
/// the user's; the agent's and team members' are the assistant's; system
/// notes are left out. Tokens are estimated (about four characters each,
/// see `parley_engines::estimate_tokens`); the newest message is kept even
/// when it alone is over the budget.
pub fn memory(messages: &[Message], budget: u64) -> Vec<ChatMessage> {
    let mut kept = Vec::new();
    let mut used = 0;
    for m in messages.iter().rev() {
        let turn = match (m.direction, m.author.kind) {
            (_, AuthorType::System) => continue,
            (Direction::Inbound, _) => ChatMessage::User(m.text.clone()),
            (Direction::Outbound, _) => ChatMessage::Assistant { text: m.text.clone(), tool_calls: Vec::new() },
        };
        let cost = estimate_tokens(&m.text) + 4;
        if !kept.is_empty() && used + cost > budget {
            break;
        }
        used += cost;
        kept.push(turn);
    }
    kept.reverse();
    kept
}

/// The system prompt followed by the passages retrieved for the question,
/// each with its source, for the model to answer from.
pub fn with_passages(system: String, passages: &[parley_engines::Passage]) -> String {
    if passages.is_empty() {
        return system;
    }
    let mut out = system;
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str("Use these passages from the knowledge base when they answer the question, and name their source:");
    for p in passages {
        out.push_str(&format!("\n\n[Source: {}]\n{}", p.source, p.text.trim()));
    }
    out
}

/// The most the team's shared notes add to a prompt, in estimated tokens:
/// one note at its longest (10,000 characters) fits; a chatty team's older
/// notes give way to the newer ones rather than crowd out the conversation.
pub const TEAM_NOTES_TOKENS: u64 = 2_500;

/// `system` with the notes the team shared with the agent (given oldest
/// first; the newest that fit in [`TEAM_NOTES_TOKENS`], in order):
/// guidance for it, never words of the contact's, never to be repeated to
/// them.
pub fn with_team_notes(system: String, notes: &[parley_domain::conversation::Note]) -> String {
    let mut kept = Vec::new();
    let mut used = 0;
    for note in notes.iter().rev() {
        let text = note.text.trim();
        let cost = estimate_tokens(text);
        if !kept.is_empty() && used + cost > TEAM_NOTES_TOKENS {
            break;
        }
        used += cost;
        kept.push(text);
    }
    if kept.is_empty() {
        return system;
    }
    let mut out = system;
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(
        "Notes from your team about this conversation (guidance for you, not from the contact; never quote or mention them to the contact):",
    );
    for text in kept.iter().rev() {
        out.push_str("\n- ");
        out.push_str(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use parley_domain::conversation::Author;

    use super::*;

    fn message(direction: Direction, kind: AuthorType, text: &str) -> Message {
        let mut m = parley_connectors::conformance::sample_message();
        (m.direction, m.author, m.text) = (direction, Author { kind, id: None }, text.to_owned());
        m
    }

    #[test]
    fn team_notes_keep_the_newest_that_fit_their_budget_in_order() {
        let note = |id: i64, text: String| parley_domain::conversation::Note {
            id,
            conversation_id: 1,
            author_user_id: Some(1),
            text,
            mentions: Vec::new(),
            for_agent: true,
            created_at: parley_domain::Timestamp::now(),
        };
        assert_eq!(with_team_notes("Be kind.".into(), &[]), "Be kind.");
        // Four notes of 1,000 tokens: the newest two fit, oldest first.
        let notes: Vec<_> = (0..4).map(|i| note(i, format!("{i}{}", "x".repeat(3_999)))).collect();
        let out = with_team_notes("Be kind.".into(), &notes);
        let kept: Vec<char> =
            out.lines().filter_map(|l| l.strip_prefix("- ")).map(|l| l.chars().next().unwrap()).collect();
        assert_eq!(kept, ['2', '3'], "{}", &out[..200]);
        assert!(out.starts_with("Be kind.\n\nNotes from your team"));
        // One note over the budget on its own is still given.
        let out = with_team_notes(String::new(), &[note(9, "y".repeat(12_000))]);
        assert!(out.starts_with("Notes from your team") && out.ends_with(&"y".repeat(12_000)));
    }

    #[test]
    fn memory_keeps_the_newest_turns_that_fit_the_budget_in_order() {
        let history = vec![
            message(Direction::Inbound, AuthorType::Contact, &"old ".repeat(100)),
            message(Direction::Outbound, AuthorType::Agent, "Hello!"),
            message(Direction::Outbound, AuthorType::System, "Handed to Ana"),
            message(Direction::Outbound, AuthorType::User, "Ana here."),
            message(Direction::Inbound, AuthorType::Contact, "Where is my order?"),
        ];
        let kept = memory(&history, 40);
        assert_eq!(
            kept,
            vec![
                ChatMessage::Assistant { text: "Hello!".into(), tool_calls: vec![] },
                ChatMessage::Assistant { text: "Ana here.".into(), tool_calls: vec![] },
                ChatMessage::User("Where is my order?".into()),
            ]
        );
        assert_eq!(memory(&history, 1), vec![ChatMessage::User("Where is my order?".into())], "the newest is kept");
        assert_eq!(memory(&history, 10_000).len(), 4, "everything but the system note");
    }
}
