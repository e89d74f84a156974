//! The agent's side of a call: what it says first and how it answers. The
//! agent runtime (text engines, tools) implements this; the builtin one
//! answers deterministically, so calls work offline and tests can assert
//! on what was said.

/// One agent in one call.
pub trait AgentTurns: Send {
    /// What the agent says when the call is answered, if anything.
    fn greeting(&mut self) -> Option<String>;
    /// The agent's answer to what the caller said (`None`: stay silent).
    fn reply(&mut self, heard: &str) -> Option<String>;
}

/// The builtin agent: greets with the call's `first_message` (or a default)
/// and acknowledges what it hears.
#[derive(Debug, Clone)]
pub struct BuiltinAgent {
    pub name: String,
    pub first_message: Option<String>,
}

impl AgentTurns for BuiltinAgent {
    fn greeting(&mut self) -> Option<String> {
        Some(self.first_message.clone().unwrap_or_else(|| format!("Hello, this is {}. How can I help?", self.name)))
    }

    fn reply(&mut self, heard: &str) -> Option<String> {
        let heard = heard.trim().trim_end_matches(['.', '!', '?']);
        if heard.to_lowercase().contains("bye") {
            return Some("Thank you for calling. Goodbye.".to_owned());
        }
        Some(format!("I understand: {heard}."))
    }
}
