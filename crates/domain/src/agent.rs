//! Agents, their status machine and their triggers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    /// `active | paused | archived`.
    AgentStatus {
        Active = "active",
        Paused = "paused",
        Archived = "archived",
    }
);

impl AgentStatus {
    /// The statuses an agent may be created with.
    pub const INITIAL: &'static [&'static str] = &["active", "paused"];

    /// The allowed moves: active↔paused, active|paused→archived, and
    /// archived→paused (restore). Staying put is always allowed.
    pub fn can_move_to(self, next: AgentStatus) -> bool {
        use AgentStatus::*;
        self == next
            || matches!(
                (self, next),
                (Active, Paused) | (Paused, Active) | (Active, Archived) | (Paused, Archived) | (Archived, Paused)
            )
    }
}

/// When an agent hands a conversation to a human on its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffPolicy {
    /// Inbound words that make the agent request a handoff (at most 50, each
    /// 1–100 characters). Default none.
    #[serde(default)]
    #[schema(schema_with = crate::schema::handoff_keywords)]
    pub keywords: Vec<String>,
    /// Hand off after this many agent turns (1–1000); `null` for never.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    pub max_turns: Option<i64>,
    /// The member of the workspace who should receive handoffs, if any.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub target_user_id: Option<i64>,
}

/// The agent's voice on calls: a configured text-to-speech engine
/// (`GET /api/v1/speech-engines`), a voice of it, and a speed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentVoice {
    /// A configured text-to-speech engine; `espeak` is built in.
    pub tts_engine: String,
    /// The engine's voice (1–100 characters): an espeak-ng voice (`en-us`),
    /// a Piper model (`en_US-joe-medium`), an OpenAI voice (`alloy`); `null`
    /// for the engine's own.
    #[schema(min_length = 1, max_length = 100)]
    pub voice_id: Option<String>,
    /// 0.25–4.0 times the engine's normal rate; `null` for 1.0.
    #[schema(minimum = 0.25, maximum = 4.0)]
    pub speed: Option<f64>,
}

string_enum!(
    /// When an agent greets on calls.
    FirstMessageMode {
        /// As soon as the call is answered; the callee's pick-up words
        /// ("Hello?") or noise cannot cut the greeting short. What they
        /// said is still transcribed, and answered after the greeting if
        /// it was more than a hello.
        SpeakFirst = "speak_first",
        /// After the callee's first words (their "Hello?"), or after
        /// `first_message_wait_s` of silence; then as `speak_first`.
        WaitForCallee = "wait_for_callee",
        /// As soon as the call is answered, and the callee can interrupt
        /// it like any other turn.
        Interruptible = "interruptible",
    }
);

string_enum!(
    /// How a caller's turn is judged over on calls.
    TurnDetection {
        /// Silero VAD hears speech; at each pause the Smart Turn model
        /// judges from the sound of the caller's last words whether they
        /// have finished: sure, the turn ends after `end_of_turn_min_ms`;
        /// not, at most after `end_of_turn_max_ms`. On a server without
        /// the models (`[speech.turn_detection]`), `silence`.
        Smart = "smart",
        /// WebRTC's VAD and a fixed silence of `end_of_turn_ms`.
        Silence = "silence",
    }
);

string_enum!(
    /// On a machine.
    VoicemailAction {
        /// Hang up at the verdict, saying nothing.
        HangUp = "hang_up",
        /// Say `message` once the beep has passed (or the machine has gone
        /// quiet), then hang up.
        LeaveMessage = "leave_message",
    }
);

string_enum!(
    /// On a call screener (default `respond`). A screener asks "say your
    /// name and why you are calling".
    ScreeningAction {
        /// The agent says its first message (who is calling and why) and
        /// goes on as with a person, who may pick up.
        Respond = "respond",
        /// Hang up, like `voicemail.action: hang_up`.
        HangUp = "hang_up",
    }
);

/// Answering-machine detection on outbound calls: the agent waits for the
/// callee's first words, judges whether a person or a machine answered,
/// and acts on a machine. The verdict is the call's `answered_by`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Voicemail {
    pub action: VoicemailAction,
    /// Said after the beep (required with `leave_message`).
    #[schema(min_length = 1, max_length = 1000)]
    pub message: Option<String>,
    /// Seconds to wait for a beep (default 30). Then the message is left anyway.
    #[schema(minimum = 1, maximum = 60)]
    #[serde(default = "Voicemail::default_beep_wait_s")]
    pub beep_wait_s: i64,
    #[serde(default = "Voicemail::default_on_screening")]
    pub on_screening: ScreeningAction,
}

impl Voicemail {
    fn default_beep_wait_s() -> i64 {
        30
    }

    fn default_on_screening() -> ScreeningAction {
        ScreeningAction::Respond
    }
}

/// What is drawn from each answered call once it ends, by the agent's
/// text engine (post-call analysis; billed as a run, `analysis`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AnalysisPlan {
    /// A summary of each call (default true).
    pub summary: bool,
    /// A JSON Schema (an object, up to 16 KiB) of the facts to extract. The
    /// model's answer is checked against it.
    #[schema(value_type = Option<Object>)]
    pub schema: Option<Value>,
    /// What makes a call a success.
    #[schema(min_length = 1, max_length = 2000)]
    pub success_criteria: Option<String>,
}

impl Default for AnalysisPlan {
    fn default() -> Self {
        AnalysisPlan { summary: true, schema: None, success_criteria: None }
    }
}

impl AnalysisPlan {
    /// Whether anything is asked for.
    pub fn wants_any(&self) -> bool {
        self.summary || self.schema.is_some() || self.success_criteria.is_some()
    }
}

/// How the agent hears callers: a configured speech-to-text engine and
/// the language it listens for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentTranscriber {
    /// A configured speech-to-text engine (`GET /api/v1/speech-engines`).
    pub stt_engine: String,
    /// A BCP 47 tag (`en`, `en-US`); `null` for the agent's `language`.
    #[schema(min_length = 2, max_length = 35)]
    pub language: Option<String>,
}

/// An agent's call settings, stored together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct AgentSpeech {
    /// `null` for the server's default voice (`speech.default_tts`).
    pub voice: Option<AgentVoice>,
    /// `null` for the server's default (`speech.default_stt`); without
    /// either, callers' speech on SIP and Twilio calls is `[inaudible]`.
    pub transcriber: Option<AgentTranscriber>,
    /// Caller speech over the agent for longer than this (0–5,000 ms)
    /// interrupts it; shorter sounds ("uh-huh") do not. Default 300.
    pub interruption_threshold_ms: i64,
    /// When the agent says its `first_message` on calls and whether the
    /// callee can talk over it. Default `speak_first`.
    pub first_message_mode: FirstMessageMode,
    /// `wait_for_callee`: seconds of silence (1–30) after which the agent
    /// speaks first after all. Default 3.
    pub first_message_wait_s: i64,
    /// How the caller's turn is judged over: `smart` (default) or `silence`.
    pub turn_detection: TurnDetection,
    /// Silence (200–3,000 ms) that ends the caller's turn under the
    /// `silence` rule, and under `smart` on a server without the turn
    /// models. Default 600.
    pub end_of_turn_ms: i64,
    /// `smart`: the pause (100–1,000 ms) after which the turn ends if the
    /// model is sure the caller has finished. Default 200.
    pub end_of_turn_min_ms: i64,
    /// `smart`: the silence (300–5,000 ms) that ends the turn when the
    /// model judges the caller has more to say. Default 2,000.
    pub end_of_turn_max_ms: i64,
    /// Seconds of caller silence (1–600) after which the agent prompts
    /// again; `null` for never.
    pub silence_reprompt_s: Option<i64>,
    /// Seconds of caller silence (1–3,600) after which the agent hangs
    /// up; `null` for never.
    pub silence_hangup_s: Option<i64>,
    /// Answering-machine detection on outbound phone calls; `null` (the
    /// default) for none: the agent greets as `first_message_mode` says.
    pub voicemail: Option<Voicemail>,
    /// Post-call analysis: a summary (default), extraction into a schema,
    /// a success evaluation.
    pub analysis: AnalysisPlan,
}

impl Default for AgentSpeech {
    fn default() -> Self {
        AgentSpeech {
            voice: None,
            transcriber: None,
            interruption_threshold_ms: 300,
            first_message_mode: FirstMessageMode::SpeakFirst,
            first_message_wait_s: 3,
            turn_detection: TurnDetection::Smart,
            end_of_turn_ms: 600,
            end_of_turn_min_ms: 200,
            end_of_turn_max_ms: 2000,
            silence_reprompt_s: None,
            silence_hangup_s: None,
            voicemail: None,
            analysis: AnalysisPlan::default(),
        }
    }
}

/// An agent as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Agent {
    pub id: i64,
    pub name: String,
    /// Lower-case words joined by hyphens, unique in the workspace and mode.
    pub slug: String,
    pub description: Option<String>,
    /// The name of a configured text engine; `builtin` always exists.
    pub text_engine: String,
    pub status: AgentStatus,
    pub priority: i64,
    pub trigger_count: i64,
    pub knowledge_collection_count: i64,
    pub is_template: bool,
    pub system_prompt: String,
    pub first_message: Option<String>,
    /// BCP 47 language tag.
    pub language: String,
    /// How the agent speaks and listens on calls.
    #[serde(flatten)]
    pub speech: AgentSpeech,
    /// Prompt blocks rendered before `system_prompt`, in this order.
    pub prompt_block_ids: Vec<i64>,
    pub knowledge_collection_ids: Vec<i64>,
    pub handoff: HandoffPolicy,
    /// Overrides the text engine's model; `null` for the engine's.
    pub model: Option<String>,
    /// The tools the model may call.
    pub tools: Vec<AgentTool>,
    /// Milliseconds a run waits for the conversation to be quiet before it
    /// answers; `null` for the server's default (`agents.debounce_ms`).
    pub debounce_ms: Option<i64>,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Sealed secrets, never serialised.
    #[serde(skip)]
    pub secrets: AgentSecrets,
}

/// An agent's sealed secrets (`crypto::Sealer`): the `whsec_` secret its
/// HTTP tool calls are signed with, and each HTTP tool's headers (a sealed
/// JSON object per tool name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSecrets {
    pub tool_secret: Option<String>,
    pub tool_headers: std::collections::BTreeMap<String, String>,
}

string_enum!(
    /// The tools Parley provides; each is offered only when the agent lists it.
    BuiltinTool {
        /// Hands the conversation to a person (`reason`).
        HandoffToHuman = "handoff_to_human",
        /// Closes the conversation.
        EndConversation = "end_conversation",
        /// Ends the call the agent is on.
        EndCall = "end_call",
        /// Transfers the call the agent is on (`to`).
        TransferCall = "transfer_call",
        /// Reads the conversation's contact.
        LookupContact = "lookup_contact",
        /// Changes the contact's `display_name`, `email` or `phone`.
        UpdateContact = "update_contact",
        /// Searches the workspace's messages, conversations and contacts.
        Search = "search",
        /// Sends a message to the contact on another channel.
        SendMessage = "send_message",
    }
);

/// A tool an agent may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentTool {
    /// One of Parley's tools.
    Builtin { name: BuiltinTool },
    /// A tool of yours: Parley POSTs the arguments to `url`.
    Http(HttpTool),
}

impl AgentTool {
    pub fn name(&self) -> &str {
        match self {
            AgentTool::Builtin { name } => name.as_str(),
            AgentTool::Http(t) => &t.name,
        }
    }
}

/// A custom tool: the model's arguments (validated against `parameters`)
/// are POSTed to `url` as `{tool, arguments, conversation_id, agent_id,
/// call_id}`, signed with Standard Webhooks headers by the agent's
/// `tool_secret`; the JSON reply goes back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HttpTool {
    /// 1–64 letters, digits, `_` or `-`; unique among the agent's tools.
    pub name: String,
    /// What the tool does, for the model (up to 1,000 characters).
    pub description: String,
    /// JSON Schema of the arguments object.
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// An `http` or `https` URL.
    pub url: String,
    /// Milliseconds to wait for the reply (100–30,000; default 10,000).
    pub timeout_ms: i64,
    /// The names of the headers sent with each call (their values are
    /// write-only).
    pub header_names: Vec<String>,
}

string_enum!(
    /// What starts an agent: an inbound message or an inbound call.
    TriggerEvent {
        MessageReceived = "message.received",
        CallInbound = "call.inbound",
    }
);

string_enum!(
    /// How a trigger's `pattern` is matched against inbound text.
    PatternType {
        /// Matches when the text contains the keyword as a whole word, ignoring case.
        Keyword = "keyword",
        /// Matches when the regular expression finds a match.
        Regex = "regex",
    }
);

/// A trigger's channel: a channel type (`ChannelType::ALL`) or `*` for any.
pub const TRIGGER_CHANNELS: &[&str] = &["*", "api", "webchat", "email", "sms", "whatsapp", "telegram", "voice"];

/// A rule that routes inbound traffic to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Trigger {
    pub id: i64,
    pub agent_id: i64,
    pub event: TriggerEvent,
    /// A channel name, or `*` for every channel.
    pub channel: String,
    /// Restricts the trigger to one conversation kind.
    pub kind: Option<String>,
    pub pattern: Option<String>,
    pub pattern_type: PatternType,
    pub enabled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A BCP 47 tag in its common shape: a 2–3 letter language, then subtags.
pub fn is_language_tag(s: &str) -> bool {
    let mut parts = s.split('-');
    let Some(lang) = parts.next() else { return false };
    (2..=3).contains(&lang.len())
        && lang.bytes().all(|b| b.is_ascii_alphabetic())
        && parts.all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use AgentStatus::*;

    #[test]
    fn trigger_channels_are_any_and_every_channel_type() {
        assert_eq!(TRIGGER_CHANNELS[0], "*");
        assert_eq!(&TRIGGER_CHANNELS[1..], crate::channel::ChannelType::ALL);
    }

    #[test]
    fn status_moves_follow_the_spec() {
        let allowed = [(Active, Paused), (Paused, Active), (Active, Archived), (Paused, Archived), (Archived, Paused)];
        for from in [Active, Paused, Archived] {
            for to in [Active, Paused, Archived] {
                let expected = from == to || allowed.contains(&(from, to));
                assert_eq!(from.can_move_to(to), expected, "{from:?} → {to:?}");
            }
        }
        assert!(!Archived.can_move_to(Active));
    }

    #[test]
    fn language_tags() {
        for ok in ["en", "en-US", "pt-BR", "zh-Hant-TW", "es-419"] {
            assert!(is_language_tag(ok), "{ok}");
        }
        for bad in ["", "e", "english-language-tag-x", "en_US", "en-", "12-US"] {
            assert!(!is_language_tag(bad), "{bad}");
        }
    }
}

string_enum!(
    /// How a text engine is reached: any OpenAI-compatible chat-completions
    /// server, or the offline builtin engine.
    EngineKind { Openai = "openai", Builtin = "builtin" }
);

/// A configured text engine, as listed by `GET /api/v1/text-engines`
/// (never its secrets).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(example = json!({"name": "openai", "kind": "openai", "model": "gpt-4o-mini"}))]
pub struct TextEngineInfo {
    /// What agents name in `text_engine`.
    pub name: String,
    pub kind: EngineKind,
    /// The model asked for unless an agent names its own (`builtin` for the builtin engine).
    pub model: String,
}

string_enum!(
    /// What started a run.
    RunTrigger {
        Message = "message",
        CallTurn = "call_turn",
        Playground = "playground",
        /// An analysis: a call's after it ends, a conversation's on demand.
        Analysis = "analysis",
    }
);

string_enum!(
    /// queued → running → completed | failed; canceled when it no longer
    /// should answer (a person took over, the agent stopped).
    RunStatus { Queued = "queued", Running = "running", Completed = "completed", Failed = "failed", Canceled = "canceled" }
);

/// A tool the model called during a run (secrets redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunToolCall {
    pub name: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
    #[schema(value_type = Object)]
    pub result: Option<Value>,
    pub error: Option<String>,
    pub ms: i64,
}

/// A knowledge passage a run retrieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RetrievalHit {
    pub passage_id: i64,
    pub score: f64,
}

/// One answer an agent gave, or tried to give.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct AgentRun {
    pub id: i64,
    pub agent_id: i64,
    pub conversation_id: Option<i64>,
    /// The call (`call_…`) of a `call_turn` run.
    pub call_id: Option<String>,
    pub trigger: RunTrigger,
    pub status: RunStatus,
    /// The text engine's name.
    pub engine: String,
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_cents: i64,
    /// Milliseconds from the engine request to its first token.
    pub first_token_ms: Option<i64>,
    /// Milliseconds from the start of the run to its end.
    pub total_ms: Option<i64>,
    /// The message the run wrote.
    pub reply_message_id: Option<i64>,
    pub tool_calls: Vec<RunToolCall>,
    pub retrieval: Vec<RetrievalHit>,
    pub error: Option<String>,
    pub created_at: Timestamp,
    pub completed_at: Option<Timestamp>,
}
