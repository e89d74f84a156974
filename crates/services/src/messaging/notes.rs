//! Private notes on a conversation: what members write for each other
//! beside the thread. A note is its own resource, never a message: no
//! channel sends it, and no agent's prompt includes it unless a member
//! shares it with the agent (`for_agent`: guidance its next answers read).
//! `@ana@example.com` in the text mentions that member; the `note.created`
//! event names them, for whoever notifies.

use parley_domain::Scope;
use parley_domain::conversation::Note;
use parley_domain::event::EventType;
use parley_domain::ids::ConversationId;
use parley_domain::user::NotificationKind;
use parley_domain::validation::{Page, Parsed, boolean, loc, parse_object, string};
use parley_store::Tx;
use parley_store::repo::{conversations as conversation_repo, events, notes as repo, users};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::notifications;
use crate::{ServiceError, ServiceResult, Services, event_data};

/// At most this many characters in a note.
pub const MAX_TEXT: usize = 10_000;

/// `POST /api/v1/conversations/{id}/notes`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"text": "Refund approved; @owner@parley.local please confirm the amount."}))]
pub struct CreateNote {
    /// 1–10,000 characters, shown as text. `@` followed by a member's email
    /// address mentions them.
    #[schema(min_length = 1, max_length = 10000)]
    pub text: String,
    /// Share it with the conversation's agent (default false): its answers
    /// then read it as the team's guidance, never quoting it to the contact.
    #[serde(default)]
    pub for_agent: bool,
}

pub fn parse_create(body: Value) -> Parsed<CreateNote> {
    parse_object(body, loc(&["body"]), |r| {
        let text = r.required("text", string(1, MAX_TEXT));
        let for_agent = r.optional("for_agent", boolean()).unwrap_or(false);
        Some(CreateNote { text: text?, for_agent })
    })
}

/// The email addresses `text` @mentions, lowercased, in order, each once:
/// `@` at the start or after a space or opening punctuation, then an
/// address (trailing punctuation is not part of it).
pub fn mentioned_addresses(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut prev = ' ';
    for (i, ch) in text.char_indices() {
        if ch == '@' && (prev.is_whitespace() || "([{\"'".contains(prev)) {
            let rest = &text[i + 1..];
            let end = rest.find(|c: char| c.is_whitespace() || ",;:()[]{}<>\"'".contains(c)).unwrap_or(rest.len());
            let address = rest[..end].trim_end_matches(['.', '!', '?']).to_lowercase();
            if address.contains('@') && !found.contains(&address) {
                found.push(address);
            }
        }
        prev = ch;
    }
    found
}

/// Adds a note to conversation `id` by `author` (a member; none for an API
/// key); emits `note.created`.
pub async fn create(
    tx: &mut Tx,
    scope: Scope,
    id: ConversationId,
    author: Option<i64>,
    input: CreateNote,
) -> ServiceResult<Note> {
    let conversation = conversation_repo::get(tx, scope, id.get())
        .await?
        .ok_or_else(|| ServiceError::not_found("Conversation", id.get()))?;
    let addresses = mentioned_addresses(&input.text);
    let mentions: Vec<i64> = if addresses.is_empty() {
        Vec::new()
    } else {
        let members = users::members(tx, scope.workspace_id).await?;
        addresses
            .iter()
            .filter_map(|a| members.iter().find(|m| m.email.eq_ignore_ascii_case(a)).map(|m| m.user_id))
            .collect()
    };
    let note = repo::insert(tx, scope, conversation.item.id, author, &input.text, &mentions, input.for_agent).await?;
    if !mentions.is_empty() {
        let what = notifications::about(&conversation.item.title, id);
        let excerpt: String = input.text.chars().take(80).collect();
        let text = format!("You were mentioned in a note on {what}: “{excerpt}”");
        notifications::notify(tx, scope, &mentions, NotificationKind::Mention, conversation.item.id, author, &text)
            .await?;
    }
    events::append(tx, scope, EventType::NoteCreated, event_data(&note)?).await?;
    Ok(note)
}

/// A conversation's notes, oldest first.
pub async fn list(svc: &Services, scope: Scope, id: ConversationId, page: Page) -> ServiceResult<(Vec<Note>, i64)> {
    let mut c = svc.db.read().await?;
    if conversation_repo::get(&mut c, scope, id.get()).await?.is_none() {
        return Err(ServiceError::not_found("Conversation", id.get()));
    }
    Ok(repo::page(&mut c, scope, id.get(), page).await?)
}

#[cfg(test)]
mod tests {
    use super::mentioned_addresses;

    #[test]
    fn mentions_are_addresses_after_an_at_sign_at_a_word_start() {
        assert_eq!(
            mentioned_addresses("@Ana@Example.com, can you look? cc (@ben@example.com). @ana@example.com again"),
            ["ana@example.com", "ben@example.com"]
        );
        // An address alone, a bare handle or an @ inside a word mention nobody.
        assert!(mentioned_addresses("mail ana@example.com or @ana, x@y@z.com").is_empty());
        assert_eq!(mentioned_addresses("Thanks @mia@example.com!"), ["mia@example.com"]);
    }
}
