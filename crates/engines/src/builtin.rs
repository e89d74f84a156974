//! The builtin engine: offline, deterministic, and useful without a model.
//!
//! It answers the last user message from the passages retrieved for it:
//! the best passage, quoted, with its source. With no passage it says it
//! will get a person and, when the agent may hand off, calls
//! `handoff_to_human`. Greetings (`first_message`) and handoff keywords are
//! the runtime's, so every engine honours them alike.

use futures::StreamExt;

use crate::{
    ChatMessage, ChatRequest, EngineEvent, EngineKind, EngineStream, Passage, Pricing, TextEngine, ToolCall, Usage,
    estimate_tokens,
};

/// The longest quote, in characters (cut at a sentence or word end).
const QUOTE_CHARS: usize = 600;

/// What the builtin engine says when it has no answer.
pub const NO_ANSWER: &str = "I'm not sure about that one. Let me get a person from the team to help you.";

pub struct BuiltinEngine;

impl TextEngine for BuiltinEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Builtin
    }
    fn model(&self) -> &str {
        "builtin"
    }
    fn pricing(&self) -> Pricing {
        Pricing::default()
    }
    fn stream(&self, request: ChatRequest) -> EngineStream {
        let events = answer(&request);
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }
}

/// The whole answer, as events.
fn answer(request: &ChatRequest) -> Vec<EngineEvent> {
    let input: u64 = request.messages.iter().map(|m| estimate_tokens(text_of(m))).sum();
    let mut events = Vec::new();
    let text = match best(&request.passages) {
        Some(p) => format!("From \"{}\": \"{}\"", p.source, quote(&p.text)),
        None => {
            if request.tools.iter().any(|t| t.name == "handoff_to_human") {
                events.push(EngineEvent::ToolCall(ToolCall {
                    id: "builtin_handoff".to_owned(),
                    name: "handoff_to_human".to_owned(),
                    arguments: serde_json::json!({"reason": "The agent found no answer in its knowledge"}).to_string(),
                }));
            }
            NO_ANSWER.to_owned()
        }
    };
    let output = estimate_tokens(&text);
    events.insert(0, EngineEvent::Delta(text));
    events.push(EngineEvent::Usage(Usage { input_tokens: input, output_tokens: output }));
    events
}

fn text_of(m: &ChatMessage) -> &str {
    match m {
        ChatMessage::System(t) | ChatMessage::User(t) => t,
        ChatMessage::Assistant { text, .. } => text,
        ChatMessage::Tool { content, .. } => content,
    }
}

/// The highest-scoring passage (the first of equals).
fn best(passages: &[Passage]) -> Option<&Passage> {
    passages.iter().fold(None, |best: Option<&Passage>, p| match best {
        Some(b) if b.score >= p.score => Some(b),
        _ => Some(p),
    })
}

/// The passage's text on one line, cut after a sentence (or else a word)
/// when it is long.
fn quote(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= QUOTE_CHARS {
        return flat;
    }
    let head: String = flat.chars().take(QUOTE_CHARS).collect();
    let cut = head.rfind(['.', '!', '?']).map(|i| i + 1).filter(|&i| i > QUOTE_CHARS / 3);
    match cut {
        Some(i) => head[..i].to_owned(),
        None => format!("{}…", head[..head.rfind(' ').unwrap_or(head.len())].trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::ToolSpec;

    fn ask(passages: Vec<Passage>, tools: Vec<ToolSpec>) -> Vec<EngineEvent> {
        let request = ChatRequest {
            messages: vec![ChatMessage::System("Be kind.".into()), ChatMessage::User("When do you open?".into())],
            passages,
            tools,
            ..ChatRequest::default()
        };
        futures::executor::block_on(BuiltinEngine.stream(request).map(Result::unwrap).collect())
    }

    fn passage(source: &str, text: &str, score: f64) -> Passage {
        Passage { source: source.into(), text: text.into(), score }
    }

    #[test]
    fn it_quotes_the_best_passage_with_its_source() {
        let events = ask(
            vec![
                passage("FAQ", "We ship worldwide.", 1.0),
                passage("Hours", "We open at 9am,\n Monday to Friday.", 2.5),
            ],
            vec![],
        );
        assert_eq!(events[0], EngineEvent::Delta("From \"Hours\": \"We open at 9am, Monday to Friday.\"".into()));
        assert!(matches!(events[1], EngineEvent::Usage(Usage { input_tokens: 7, output_tokens: 13 })), "{events:?}");
        assert_eq!(events.len(), 2, "no tool call when it has an answer");
    }

    #[test]
    fn without_an_answer_it_asks_for_a_person() {
        let handoff =
            ToolSpec { name: "handoff_to_human".into(), description: String::new(), parameters: serde_json::json!({}) };
        let events = ask(vec![], vec![handoff]);
        assert_eq!(events[0], EngineEvent::Delta(NO_ANSWER.into()));
        let EngineEvent::ToolCall(call) = &events[1] else { panic!("{events:?}") };
        assert_eq!(call.name, "handoff_to_human");
        // Without the tool it still says so, and calls nothing.
        let events = ask(vec![], vec![]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0], EngineEvent::Delta(NO_ANSWER.into()));
    }

    #[test]
    fn long_passages_are_cut_at_a_sentence() {
        let long = "First sentence here. ".repeat(60);
        let q = quote(&long);
        assert!(q.len() <= QUOTE_CHARS && q.ends_with('.'), "{q}");
        let words = "word ".repeat(300);
        let q = quote(&words);
        assert!(q.ends_with("word…") && q.chars().count() <= QUOTE_CHARS + 1, "{q}");
    }
}
