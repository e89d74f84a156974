//! The agent's side of a conversation, as a stream: the seam between the
//! channels (a call's engine, a chat) and the agent runtime.
//!
//! A session receives what happens ([`Input`]: the user said something, is
//! speaking, a tool answered, nothing happened for a while) and answers
//! with a stream of [`Output`]s: text as it is produced, tool calls, and
//! the end of the turn. Dropping the stream cancels the turn mid-way (the
//! caller talked over the agent: barge-in); the session then knows only
//! what was delivered before.
//!
//! The builtin session answers deterministically, so calls and chats work
//! offline and tests can assert on what was said. Model-backed sessions
//! (the agent runtime) implement the same trait.

use futures::stream::{self, BoxStream, StreamExt};
use serde_json::Value;

/// Something the agent should react to.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A finished user utterance (a transcript, a chat message).
    UserSaid(String),
    /// The user talked over the agent (voice): its turn stopped, and the
    /// caller heard only `played` of it.
    Interrupted { played: String },
    /// The caller pressed keys (DTMF), in order.
    Keys(String),
    /// The answer to a tool call the session asked for.
    ToolResult { call_id: String, output: Value },
    /// Nobody said anything for the configured silence.
    Timeout,
    /// A warm transfer did not reach the person (`why`: no answer, busy,
    /// hung up before the caller was joined, failed): the agent is back
    /// with the caller and should say so.
    TransferFailed { to: String, why: String },
}

/// Where a call is handed on (the `transfer_call` tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// E.164 number or SIP URI.
    pub to: String,
    /// Warm: what the agent tells the person before joining the caller.
    /// `None`: cold (the call is referred and the agent leaves at once).
    pub summary: Option<String>,
}

/// What the agent produces during a turn, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// More of the reply's text (to be spoken or sent as it comes).
    TextDelta(String),
    /// The agent wants a tool run; its result comes back as [`Input::ToolResult`].
    ToolCall { call_id: String, name: String, arguments: Value },
    /// Hang up once what was said has been heard (the `end_call` tool).
    EndCall,
    /// Hand the call on once what was said has been heard (the
    /// `transfer_call` tool).
    Transfer(Transfer),
    /// The turn is over.
    EndOfTurn,
}

/// One agent in one conversation.
pub trait AgentSession: Send {
    /// What the agent says first, if anything (a call's greeting).
    fn greeting(&mut self) -> Option<String>;

    /// Reacts to `input`. The stream ends with [`Output::EndOfTurn`];
    /// dropping it earlier cancels the turn.
    fn respond(&mut self, input: Input) -> BoxStream<'static, Output>;
}

/// Collects a turn's text (for channels that send whole messages).
pub async fn reply_text(turn: BoxStream<'static, Output>) -> String {
    turn.filter_map(|o| async move {
        match o {
            Output::TextDelta(t) => Some(t),
            _ => None,
        }
    })
    .collect::<Vec<String>>()
    .await
    .concat()
}

/// The builtin session: greets with the first message (or a default) and
/// acknowledges what it hears, word by word.
#[derive(Debug, Clone)]
pub struct BuiltinAgent {
    pub name: String,
    pub first_message: Option<String>,
}

impl BuiltinAgent {
    fn answer(heard: &str) -> Option<String> {
        let heard = heard.trim().trim_end_matches(['.', '!', '?']);
        if heard.to_lowercase().contains("bye") {
            return Some("Thank you for calling. Goodbye.".to_owned());
        }
        Some(format!("I understand: {heard}."))
    }
}

impl AgentSession for BuiltinAgent {
    fn greeting(&mut self) -> Option<String> {
        Some(self.first_message.clone().unwrap_or_else(|| format!("Hello, this is {}. How can I help?", self.name)))
    }

    fn respond(&mut self, input: Input) -> BoxStream<'static, Output> {
        let reply = match input {
            Input::UserSaid(text) => Self::answer(&text),
            Input::Keys(keys) => Some(format!("You pressed {keys}.")),
            Input::Timeout => Some("Are you still there?".to_owned()),
            Input::TransferFailed { .. } => Some("I could not reach them, sorry. I am still here.".to_owned()),
            Input::Interrupted { .. } | Input::ToolResult { .. } => None,
        };
        // Stream the reply as a model would: a word (with its space) at a time.
        let deltas: Vec<Output> = reply
            .map(|r| r.split_inclusive(' ').map(|w| Output::TextDelta(w.to_owned())).collect())
            .unwrap_or_default();
        stream::iter(deltas).chain(stream::once(async { Output::EndOfTurn })).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_builtin_session_streams_its_reply_and_ends_the_turn() {
        let mut agent = BuiltinAgent { name: "Ava".into(), first_message: None };
        assert_eq!(agent.greeting().as_deref(), Some("Hello, this is Ava. How can I help?"));
        let outputs: Vec<Output> = agent.respond(Input::UserSaid("Where is my order?".into())).collect().await;
        assert_eq!(outputs.last(), Some(&Output::EndOfTurn));
        assert!(outputs.iter().filter(|o| matches!(o, Output::TextDelta(_))).count() > 1, "not streamed: {outputs:?}");
        let text = reply_text(agent.respond(Input::UserSaid("Where is my order?".into()))).await;
        assert_eq!(text, "I understand: Where is my order.");
        // An interruption gets no reply, only the end of the turn.
        let outputs: Vec<Output> = agent.respond(Input::Interrupted { played: "Hello".into() }).collect().await;
        assert_eq!(outputs, vec![Output::EndOfTurn]);
    }
}
