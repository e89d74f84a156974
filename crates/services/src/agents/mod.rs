//! Agents: create (from scratch or from a template), read, list, update with
//! the status machine, archive; their triggers; and the prompt preview.
//! The prompt blocks agents share live in [`prompt_blocks`]. What agents
//! read to answer is gathered by [`context`]; the runtime that answers is
//! another crate, reached through [`runtime`].

pub mod context;
pub mod prompt;
pub mod prompt_blocks;
pub mod routing;
pub mod runs;
pub mod runtime;
pub mod tools;

use std::collections::BTreeMap;

use parley_domain::Scope;
use parley_domain::agent::{
    Agent, AgentSpeech, AgentStatus, AgentTranscriber, AgentVoice, FirstMessageMode, HandoffPolicy, PatternType,
    TRIGGER_CHANNELS, Trigger, TriggerEvent, TurnDetection, is_language_tag,
};
use parley_domain::conversation::ConversationKind;
use parley_domain::event::EventType;
use parley_domain::ids::{AgentId, TriggerId};
use parley_domain::slug::slugify;
use parley_domain::validation::{
    FieldError, LocPart, ObjectReader, Page, Parsed, QueryReader, boolean, enum_value, integer, json_object, list_of,
    loc, number, object, one_of, parse_object, string,
};
use parley_store::repo::agents::{self as repo, AgentFields};
use parley_store::repo::triggers::{self as trigger_repo, TriggerFields};
use parley_store::repo::{events, prompt_blocks as block_repo, users};
use parley_store::{AsHandle, StoreError, Tx};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::billing;
use crate::{ServiceError, ServiceResult, Services, event_data, free_slug};

/// The filters lists take (and the version key their cache follows).
pub use parley_store::repo::agents::{AgentFilter, VERSION_KEY};

const NAME_MAX: usize = 200;
const TEXT_MAX: usize = 2_000;
const PROMPT_MAX: usize = 100_000;
const METADATA_MAX_BYTES: usize = 4_096;
const MAX_LIST_IDS: usize = 50;

/// Fields shared by create and update; each is optional. In an update, a
/// field that is absent stays as it is, and `null` clears a nullable field;
/// `null` for a field that cannot be empty is a 422.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentChanges {
    /// Up to 2,000 characters, or null.
    #[schema(value_type = Option<String>, nullable, max_length = 2000)]
    pub description: Option<Option<String>>,
    /// A configured text engine (`GET /api/v1/text-engines`). Default `builtin`.
    #[schema(nullable = false)]
    pub text_engine: Option<String>,
    /// 0–1000. When several agents match traffic, the highest wins. Default 0.
    #[schema(nullable = false, minimum = 0, maximum = 1000)]
    pub priority: Option<i64>,
    /// Whether other agents can be created from this one with `template_id`. Default false.
    #[schema(nullable = false)]
    pub is_template: Option<bool>,
    /// Up to 100,000 characters, used literally after the prompt blocks.
    #[schema(nullable = false, max_length = 100000)]
    pub system_prompt: Option<String>,
    /// What the agent says first on a call; 1–2,000 characters, or null.
    #[schema(value_type = Option<String>, nullable, min_length = 1, max_length = 2000)]
    pub first_message: Option<Option<String>>,
    /// A BCP 47 tag such as `en-US`. Default `en-US`.
    #[schema(nullable = false, min_length = 2, max_length = 35, pattern = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")]
    pub language: Option<String>,
    /// The voice on calls (replaces the whole object), or null for the
    /// server's default.
    #[schema(value_type = Option<AgentVoice>, nullable)]
    pub voice: Option<Option<AgentVoice>>,
    /// The speech-to-text engine on calls (replaces the whole object), or
    /// null for the server's default.
    #[schema(value_type = Option<AgentTranscriber>, nullable)]
    pub transcriber: Option<Option<AgentTranscriber>>,
    /// 0–5,000 ms of caller speech over the agent that interrupts it. Default 300.
    #[schema(nullable = false, minimum = 0, maximum = 5000)]
    pub interruption_threshold_ms: Option<i64>,
    /// When the agent says its first message on calls. Default `speak_first`.
    #[schema(nullable = false)]
    pub first_message_mode: Option<FirstMessageMode>,
    /// `wait_for_callee`: seconds of silence (1–30) before the agent speaks first after all. Default 3.
    #[schema(nullable = false, minimum = 1, maximum = 30)]
    pub first_message_wait_s: Option<i64>,
    /// How the caller's turn is judged over. Default `smart`.
    #[schema(nullable = false)]
    pub turn_detection: Option<TurnDetection>,
    /// 200–3,000 ms of caller silence that ends their turn under the
    /// `silence` rule (and `smart` without the server's models). Default 600.
    #[schema(nullable = false, minimum = 200, maximum = 3000)]
    pub end_of_turn_ms: Option<i64>,
    /// `smart`: the pause (100–1,000 ms) that ends the turn when the model
    /// is sure. Default 200.
    #[schema(nullable = false, minimum = 100, maximum = 1000)]
    pub end_of_turn_min_ms: Option<i64>,
    /// `smart`: the silence (300–5,000 ms) that ends the turn when the
    /// model is not sure; at least `end_of_turn_min_ms`. Default 2,000.
    #[schema(nullable = false, minimum = 300, maximum = 5000)]
    pub end_of_turn_max_ms: Option<i64>,
    /// Seconds of caller silence (1–600) before the agent prompts again, or null for never.
    #[schema(value_type = Option<i64>, nullable, minimum = 1, maximum = 600)]
    pub silence_reprompt_s: Option<Option<i64>>,
    /// Seconds of caller silence (1–3,600) before the agent hangs up, or null for never.
    #[schema(value_type = Option<i64>, nullable, minimum = 1, maximum = 3600)]
    pub silence_hangup_s: Option<Option<i64>>,
    /// Post-call analysis (replaces the whole object).
    #[schema(nullable = false)]
    pub analysis: Option<parley_domain::agent::AnalysisPlan>,
    /// Voicemail detection on outbound calls, or null for none.
    #[schema(value_type = Option<parley_domain::agent::Voicemail>, nullable)]
    pub voicemail: Option<Option<parley_domain::agent::Voicemail>>,
    /// Prompt blocks of this workspace and mode, in render order (at most 50, no repeats).
    #[schema(schema_with = parley_domain::schema::unique_ids_50)]
    pub prompt_block_ids: Option<Vec<i64>>,
    /// Knowledge collections of this workspace and mode (at most 50, no repeats).
    #[schema(schema_with = parley_domain::schema::unique_ids_50)]
    pub knowledge_collection_ids: Option<Vec<i64>>,
    /// Replaces the whole handoff policy.
    #[schema(nullable = false)]
    pub handoff: Option<HandoffPolicy>,
    /// A model name overriding the text engine's (1–200 characters), or null.
    #[schema(value_type = Option<String>, nullable, min_length = 1, max_length = 200)]
    pub model: Option<Option<String>>,
    /// The tools the model may call (at most 20, unique names). Replaces the
    /// whole list; an HTTP tool sent without `headers` keeps those of the
    /// agent's tool of the same name (`{}` removes them). Default
    /// `[{"type": "builtin", "name": "handoff_to_human"}]`.
    #[schema(nullable = false, max_items = 20)]
    pub tools: Option<Vec<tools::ToolInput>>,
    /// Milliseconds (0–60,000) a run waits for the conversation to be quiet
    /// before it answers, or null for the server's default.
    #[schema(value_type = Option<i64>, nullable, minimum = 0, maximum = 60000)]
    pub debounce_ms: Option<Option<i64>>,
    /// Free-form JSON object of at most 4 KiB serialised. Replaces the whole object.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub metadata: Option<Map<String, Value>>,
}

/// `POST /api/v1/agents`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Support Bot", "system_prompt": "Answer briefly.", "first_message": "Hi, how can I help?", "priority": 10, "handoff": {"keywords": ["human", "agent"], "max_turns": 8}}))]
pub struct CreateAgent {
    /// Copy every field of this template agent, then apply the fields given here.
    #[schema(nullable = false, minimum = 1)]
    pub template_id: Option<i64>,
    /// 1–200 characters. The slug is derived from it.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// `active` (default) or `paused`.
    #[schema(schema_with = parley_domain::schema::initial_agent_status)]
    pub status: Option<AgentStatus>,
    #[serde(flatten)]
    pub changes: AgentChanges,
}

/// `PATCH /api/v1/agents/{agent_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "paused", "description": "Answers billing questions"}))]
pub struct UpdateAgent {
    /// 1–200 characters. Changing it re-derives the slug.
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    pub name: Option<String>,
    /// Moves follow the status machine: active↔paused, active|paused→archived,
    /// archived→paused; any other move is a 409.
    #[schema(nullable = false)]
    pub status: Option<AgentStatus>,
    #[serde(flatten)]
    pub changes: AgentChanges,
}

/// The engines agents may name: text, speech-to-text, text-to-speech.
#[derive(Debug, Clone, Default)]
pub struct EngineNames {
    pub text: Vec<String>,
    pub stt: Vec<String>,
    pub tts: Vec<String>,
}

impl EngineNames {
    pub fn of(config: &crate::ServicesConfig) -> EngineNames {
        EngineNames {
            text: config.text_engines.names(),
            stt: config.speech.stt_names(),
            tts: config.speech.tts_names(),
        }
    }
}

pub fn parse_create(body: Value, engines: &EngineNames) -> Parsed<CreateAgent> {
    parse_object(body, loc(&["body"]), |r| {
        let template_id = r.optional("template_id", integer(1, i64::MAX));
        let name = r.required("name", string(1, NAME_MAX));
        let status = r.optional("status", |v, l| {
            one_of(AgentStatus::INITIAL)(v, l).map(|s| AgentStatus::parse(&s).expect("checked by one_of"))
        });
        let changes = read_changes(r, engines);
        Some(CreateAgent { template_id, name: name?, status, changes })
    })
}

pub fn parse_update(body: Value, engines: &EngineNames) -> Parsed<UpdateAgent> {
    parse_object(body, loc(&["body"]), |r| {
        let name = r.optional("name", string(1, NAME_MAX));
        let status = r.optional("status", enum_value::<AgentStatus>());
        Some(UpdateAgent { name, status, changes: read_changes(r, engines) })
    })
}

fn read_changes(r: &mut ObjectReader<'_>, engines: &EngineNames) -> AgentChanges {
    AgentChanges {
        description: r.nullable("description", string(0, TEXT_MAX)),
        text_engine: r.optional("text_engine", text_engine(&engines.text)),
        priority: r.optional("priority", integer(0, 1000)),
        is_template: r.optional("is_template", boolean()),
        system_prompt: r.optional("system_prompt", string(0, PROMPT_MAX)),
        first_message: r.nullable("first_message", string(1, TEXT_MAX)),
        language: r.optional("language", language()),
        voice: r.nullable("voice", agent_voice(&engines.tts)),
        transcriber: r.nullable("transcriber", agent_transcriber(&engines.stt)),
        interruption_threshold_ms: r.optional("interruption_threshold_ms", integer(0, 5_000)),
        first_message_mode: r.optional("first_message_mode", enum_value::<FirstMessageMode>()),
        first_message_wait_s: r.optional("first_message_wait_s", integer(1, 30)),
        turn_detection: r.optional("turn_detection", enum_value::<TurnDetection>()),
        end_of_turn_ms: r.optional("end_of_turn_ms", integer(200, 3_000)),
        end_of_turn_min_ms: r.optional("end_of_turn_min_ms", integer(100, 1_000)),
        end_of_turn_max_ms: r.optional("end_of_turn_max_ms", integer(300, 5_000)),
        silence_reprompt_s: r.nullable("silence_reprompt_s", integer(1, 600)),
        silence_hangup_s: r.nullable("silence_hangup_s", integer(1, 3_600)),
        voicemail: r.nullable("voicemail", voicemail()),
        analysis: r.optional("analysis", analysis_plan()),
        prompt_block_ids: r.optional("prompt_block_ids", unique_ids()),
        knowledge_collection_ids: r.optional("knowledge_collection_ids", unique_ids()),
        handoff: r.optional("handoff", handoff()),
        model: r.nullable("model", string(1, 200)),
        tools: r.optional("tools", tools::parse_tools()),
        debounce_ms: r.nullable("debounce_ms", integer(0, 60_000)),
        metadata: r.optional("metadata", json_object(METADATA_MAX_BYTES)),
    }
}

/// One of the configured engines' names.
fn text_engine(engines: &[String]) -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> + '_ {
    move |v, l| match v {
        Value::String(s) if engines.contains(&s) => Ok(s),
        Value::String(_) => {
            let permitted: Vec<&str> = engines.iter().map(String::as_str).collect();
            Err(vec![FieldError::not_enum(l.to_vec(), &permitted)])
        }
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "string")]),
    }
}

fn agent_voice(engines: &[String]) -> impl FnOnce(Value, &[LocPart]) -> Parsed<AgentVoice> + '_ {
    object(move |r| {
        let tts_engine = r.required("tts_engine", text_engine(engines));
        let voice_id = r.nullable("voice_id", string(1, 100));
        let speed = r.nullable("speed", number(0.25, 4.0));
        Some(AgentVoice { tts_engine: tts_engine?, voice_id: voice_id.flatten(), speed: speed.flatten() })
    })
}

fn agent_transcriber(engines: &[String]) -> impl FnOnce(Value, &[LocPart]) -> Parsed<AgentTranscriber> + '_ {
    object(move |r| {
        let stt_engine = r.required("stt_engine", text_engine(engines));
        let language = r.nullable("language", language());
        Some(AgentTranscriber { stt_engine: stt_engine?, language: language.flatten() })
    })
}

/// An agent's or a call's `voicemail`: `message` is required exactly when
/// the action leaves one.
pub fn voicemail() -> impl FnOnce(Value, &[LocPart]) -> Parsed<parley_domain::agent::Voicemail> {
    use parley_domain::agent::{ScreeningAction, Voicemail, VoicemailAction};
    object(|r| {
        let action = r.required("action", enum_value::<VoicemailAction>());
        let message = r.nullable("message", string(1, 1000)).flatten();
        let beep_wait_s = r.optional("beep_wait_s", integer(1, 60));
        let on_screening = r.optional("on_screening", enum_value::<ScreeningAction>());
        match (action, &message) {
            (Some(VoicemailAction::LeaveMessage), None) => r.push_error(FieldError::new(
                r.loc_of("message"),
                "value_error.voicemail.message",
                "required with leave_message: what the agent says after the beep",
            )),
            (Some(VoicemailAction::HangUp), Some(_)) => r.push_error(FieldError::new(
                r.loc_of("message"),
                "value_error.voicemail.message",
                "hang_up leaves no message: send null, or action leave_message",
            )),
            _ => {}
        }
        if r.has_errors() {
            return None;
        }
        Some(Voicemail {
            action: action?,
            message,
            beep_wait_s: beep_wait_s.unwrap_or(30),
            on_screening: on_screening.unwrap_or(ScreeningAction::Respond),
        })
    })
}

/// An agent's `analysis`: what post-call analysis draws from each call.
fn analysis_plan() -> impl FnOnce(Value, &[LocPart]) -> Parsed<parley_domain::agent::AnalysisPlan> {
    object(|r| {
        let summary = r.optional("summary", boolean());
        let schema = r.nullable("schema", tools::schema());
        let success_criteria = r.nullable("success_criteria", string(1, 2000));
        Some(parley_domain::agent::AnalysisPlan {
            summary: summary.unwrap_or(true),
            schema: schema.flatten(),
            success_criteria: success_criteria.flatten(),
        })
    })
}

fn language() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let s = string(2, 35)(v, l)?;
        if is_language_tag(&s) {
            Ok(s)
        } else {
            Err(vec![FieldError::new(l.to_vec(), "value_error.language", "not a BCP 47 language tag, e.g. en-US")])
        }
    }
}

fn unique_ids() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<i64>> {
    |v, l| {
        let ids = list_of(MAX_LIST_IDS, |v, l| integer(1, i64::MAX)(v, l))(v, l)?;
        let mut seen = std::collections::HashSet::new();
        if ids.iter().all(|id| seen.insert(*id)) {
            Ok(ids)
        } else {
            Err(vec![FieldError::new(l.to_vec(), "value_error.list.unique_items", "the list has duplicated items")])
        }
    }
}

fn handoff() -> impl FnOnce(Value, &[LocPart]) -> Parsed<HandoffPolicy> {
    object(|r| {
        let keywords = r.optional("keywords", list_of(MAX_LIST_IDS, |v, l| string(1, 100)(v, l)));
        let max_turns = r.nullable("max_turns", integer(1, 1000));
        let target_user_id = r.nullable("target_user_id", integer(1, i64::MAX));
        Some(HandoffPolicy {
            keywords: keywords.unwrap_or_default(),
            max_turns: max_turns.flatten(),
            target_user_id: target_user_id.flatten(),
        })
    })
}

/// `GET /api/v1/agents` filters.
pub fn parse_filter(q: &mut QueryReader) -> AgentFilter {
    AgentFilter {
        status: q.enum_value::<AgentStatus>("status"),
        is_template: q.boolean("is_template"),
        q: q.string("q", 1, NAME_MAX),
    }
}

fn defaults() -> AgentFields {
    AgentFields {
        name: String::new(),
        slug: String::new(),
        description: None,
        text_engine: "builtin".to_owned(),
        status: AgentStatus::Active,
        priority: 0,
        is_template: false,
        system_prompt: String::new(),
        first_message: None,
        language: "en-US".to_owned(),
        speech: AgentSpeech::default(),
        prompt_block_ids: Vec::new(),
        knowledge_collection_ids: Vec::new(),
        handoff: HandoffPolicy::default(),
        metadata: Map::new(),
        model: None,
        tools: vec![parley_domain::agent::AgentTool::Builtin {
            name: parley_domain::agent::BuiltinTool::HandoffToHuman,
        }],
        debounce_ms: None,
        secrets: Default::default(),
    }
}

/// Applies the changes; HTTP tools' headers are sealed with `sealer`.
fn apply(f: &mut AgentFields, c: AgentChanges, sealer: &parley_domain::crypto::SecretBox) {
    if let Some(v) = c.model {
        f.model = v;
    }
    if let Some(v) = c.debounce_ms {
        f.debounce_ms = v;
    }
    if let Some(v) = c.tools {
        (f.tools, f.secrets.tool_headers) = tools::store(v, sealer, (&f.tools, &f.secrets.tool_headers));
    }
    if let Some(v) = c.description {
        f.description = v;
    }
    if let Some(v) = c.text_engine {
        f.text_engine = v;
    }
    if let Some(v) = c.priority {
        f.priority = v;
    }
    if let Some(v) = c.is_template {
        f.is_template = v;
    }
    if let Some(v) = c.system_prompt {
        f.system_prompt = v;
    }
    if let Some(v) = c.first_message {
        f.first_message = v;
    }
    if let Some(v) = c.language {
        f.language = v;
    }
    if let Some(v) = c.voice {
        f.speech.voice = v;
    }
    if let Some(v) = c.transcriber {
        f.speech.transcriber = v;
    }
    if let Some(v) = c.interruption_threshold_ms {
        f.speech.interruption_threshold_ms = v;
    }
    if let Some(v) = c.first_message_mode {
        f.speech.first_message_mode = v;
    }
    if let Some(v) = c.first_message_wait_s {
        f.speech.first_message_wait_s = v;
    }
    if let Some(v) = c.turn_detection {
        f.speech.turn_detection = v;
    }
    if let Some(v) = c.end_of_turn_ms {
        f.speech.end_of_turn_ms = v;
    }
    if let Some(v) = c.end_of_turn_min_ms {
        f.speech.end_of_turn_min_ms = v;
    }
    if let Some(v) = c.end_of_turn_max_ms {
        f.speech.end_of_turn_max_ms = v;
    }
    if let Some(v) = c.silence_reprompt_s {
        f.speech.silence_reprompt_s = v;
    }
    if let Some(v) = c.silence_hangup_s {
        f.speech.silence_hangup_s = v;
    }
    if let Some(v) = c.voicemail {
        f.speech.voicemail = v;
    }
    if let Some(v) = c.analysis {
        f.speech.analysis = v;
    }
    if let Some(v) = c.prompt_block_ids {
        f.prompt_block_ids = v;
    }
    if let Some(v) = c.knowledge_collection_ids {
        f.knowledge_collection_ids = v;
    }
    if let Some(v) = c.handoff {
        f.handoff = v;
    }
    if let Some(v) = c.metadata {
        f.metadata = v;
    }
}

/// Ids in the body must name resources of the caller's scope (422 otherwise).
/// A handoff target user named in the request must be a member of the
/// workspace (checked only when sent: a stored one who has since left does
/// not block unrelated changes).
async fn check_references(
    c: &mut impl AsHandle,
    scope: Scope,
    f: &AgentFields,
    target_user_sent: Option<i64>,
) -> ServiceResult<()> {
    let found = block_repo::get_many(c, scope, &f.prompt_block_ids).await?;
    let mut errors = Vec::new();
    for (i, id) in f.prompt_block_ids.iter().enumerate() {
        if !found.iter().any(|b| b.id == *id) {
            let mut l = loc(&["body", "prompt_block_ids"]);
            l.push(LocPart::Index(i));
            errors.push(FieldError::not_found(l, &format!("Prompt block {id}")));
        }
    }
    let collections = parley_store::repo::knowledge::existing(c, scope, &f.knowledge_collection_ids).await?;
    for (i, id) in f.knowledge_collection_ids.iter().enumerate() {
        if !collections.contains(id) {
            let mut l = loc(&["body", "knowledge_collection_ids"]);
            l.push(LocPart::Index(i));
            errors.push(FieldError::not_found(l, &format!("Knowledge collection {id}")));
        }
    }
    if let Some(user_id) = target_user_sent
        && users::role_in(c, user_id, scope.workspace_id).await?.is_none()
    {
        errors.push(FieldError::not_found(loc(&["body", "handoff", "target_user_id"]), &format!("User {user_id}")));
    }
    if errors.is_empty() { Ok(()) } else { Err(ServiceError::Validation(errors)) }
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Agent", id)
}

/// A new agent, with the secret its HTTP tool calls are signed with.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreatedAgent {
    #[serde(flatten)]
    pub agent: Agent,
    /// `whsec_…`: verify the Standard Webhooks signature of HTTP tool calls
    /// with it. Shown only now.
    pub tool_secret: String,
}

/// What a create or update checks before its transaction: that its HTTP
/// tools lead to public addresses (resolving their names takes a while).
pub async fn prepare(svc: &Services, changes: &AgentChanges) -> ServiceResult<()> {
    tools::prepare(svc, changes.tools.as_deref()).await
}

/// Creates an agent and charges for it in the same transaction: without the
/// funds it is a 402 and nothing is written.
pub async fn create(tx: &mut Tx, svc: &Services, scope: Scope, input: CreateAgent) -> ServiceResult<CreatedAgent> {
    let pricing = &svc.config.billing;
    let sealer = svc.keyring.secrets();
    if let Some(tools) = &input.changes.tools {
        tools::check_urls(svc, tools)?;
    }
    let mut fields = match input.template_id {
        Some(tid) => {
            let template = repo::get(tx, scope, tid, false).await?.filter(|a| a.is_template).ok_or_else(|| {
                ServiceError::Validation(vec![FieldError::not_found(
                    loc(&["body", "template_id"]),
                    &format!("Agent template {tid}"),
                )])
            })?;
            let mut f = AgentFields::from(&template);
            f.is_template = false;
            f.secrets.tool_secret = None;
            f.status = AgentStatus::Active;
            f
        }
        None => defaults(),
    };
    fields.name = input.name;
    if let Some(status) = input.status {
        fields.status = status;
    }
    let target_user_sent = input.changes.handoff.as_ref().and_then(|h| h.target_user_id);
    apply(&mut fields, input.changes, sealer);
    check_turn_silences(&fields)?;
    let tool_secret = parley_events::signing::WebhookSecret::generate().expose();
    fields.secrets.tool_secret = Some(sealer.seal(tool_secret.as_bytes()));
    check_references(tx, scope, &fields, target_user_sent).await?;

    let base = slugify(&fields.name);
    // On PostgreSQL a concurrent create may take the slug between our read and
    // our insert; the insert then yields None and we look again.
    for _ in 0..5 {
        let taken = repo::slugs_like(tx, scope, &base, None).await?;
        fields.slug = free_slug(&base, &taken);
        if let Some(agent) = repo::insert(tx, scope, &fields).await? {
            billing::charge_agent_creation(tx, scope, pricing, agent.id).await?;
            events::append(tx, scope, EventType::AgentCreated, event_data(&agent)?).await?;
            return Ok(CreatedAgent { agent, tool_secret });
        }
    }
    Err(ServiceError::Conflict("Could not choose a unique slug; retry the request".into()))
}

pub async fn get(svc: &Services, scope: Scope, id: AgentId) -> ServiceResult<Agent> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    repo::get(&mut c, scope, id, false).await?.ok_or_else(|| not_found(id))
}

pub async fn list(svc: &Services, scope: Scope, filter: &AgentFilter, page: Page) -> ServiceResult<(Vec<Agent>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(repo::list(&mut c, scope, filter, page).await?)
}

pub async fn update(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    id: AgentId,
    input: UpdateAgent,
) -> ServiceResult<Agent> {
    let id = id.get();
    if let Some(tools) = &input.changes.tools {
        tools::check_urls(svc, tools)?;
    }
    let current = repo::get(tx, scope, id, true).await?.ok_or_else(|| not_found(id))?;
    if let Some(next) = input.status
        && !current.status.can_move_to(next)
    {
        return Err(ServiceError::Conflict(format!(
            "Agent {id} cannot move from {} to {}",
            current.status.as_str(),
            next.as_str()
        )));
    }
    let before = AgentFields::from(&current);
    let mut fields = before.clone();
    if let Some(status) = input.status {
        fields.status = status;
    }
    let target_user_sent = input.changes.handoff.as_ref().and_then(|h| h.target_user_id);
    apply(&mut fields, input.changes, svc.keyring.secrets());
    check_turn_silences(&fields)?;
    if let Some(name) = input.name
        && name != current.name
    {
        let base = slugify(&name);
        let taken = repo::slugs_like(tx, scope, &base, Some(id)).await?;
        fields.slug = free_slug(&base, &taken);
        fields.name = name;
    }
    if fields == before {
        return Ok(current);
    }
    check_references(tx, scope, &fields, target_user_sent).await?;
    let agent = match repo::update(tx, scope, id, &fields).await {
        Ok(a) => a.ok_or_else(|| not_found(id))?,
        Err(StoreError::UniqueViolation) => {
            return Err(ServiceError::Conflict("Another request took this slug; retry the request".into()));
        }
        Err(e) => return Err(e.into()),
    };
    events::append(tx, scope, EventType::AgentUpdated, event_data(&agent)?).await?;
    Ok(agent)
}

/// `DELETE` archives: the agent stops answering traffic and leaves the
/// default list, but its history stays. Archiving twice is harmless.
pub async fn archive(tx: &mut Tx, scope: Scope, id: AgentId) -> ServiceResult<Agent> {
    let id = id.get();
    let current = repo::get(tx, scope, id, true).await?.ok_or_else(|| not_found(id))?;
    if current.status == AgentStatus::Archived {
        return Ok(current);
    }
    let mut fields = AgentFields::from(&current);
    fields.status = AgentStatus::Archived;
    let agent = repo::update(tx, scope, id, &fields).await?.ok_or_else(|| not_found(id))?;
    events::append(tx, scope, EventType::AgentUpdated, event_data(&agent)?).await?;
    Ok(agent)
}

// ---- triggers ------------------------------------------------------------

/// `POST /api/v1/agents/{agent_id}/triggers`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"event": EventType::MessageReceived, "channel": "webchat", "pattern": "refund", "pattern_type": "keyword"}))]
pub struct CreateTrigger {
    /// `message.received` or `call.inbound`.
    pub event: TriggerEvent,
    /// A channel name or `*` (default) for every channel.
    #[schema(schema_with = parley_domain::schema::trigger_channel)]
    pub channel: Option<String>,
    /// `direct`, `group` or `call`; null (default) for any.
    #[schema(schema_with = parley_domain::schema::nullable_conversation_kind)]
    pub kind: Option<String>,
    /// A keyword or a regular expression (1–500 characters); null (default) matches everything.
    #[schema(nullable, min_length = 1, max_length = 500)]
    pub pattern: Option<String>,
    /// `keyword` (default) or `regex`. A regex must compile.
    #[schema(nullable = false)]
    pub pattern_type: Option<PatternType>,
    /// Default true.
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}

/// `PATCH /api/v1/agents/{agent_id}/triggers/{trigger_id}`: any field of a trigger.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": false}))]
pub struct UpdateTrigger {
    #[schema(nullable = false)]
    pub event: Option<TriggerEvent>,
    #[schema(schema_with = parley_domain::schema::trigger_channel)]
    pub channel: Option<String>,
    /// Null for any kind.
    #[schema(schema_with = parley_domain::schema::nullable_conversation_kind)]
    pub kind: Option<Option<String>>,
    /// 1–500 characters; null matches everything.
    #[schema(value_type = Option<String>, nullable, min_length = 1, max_length = 500)]
    pub pattern: Option<Option<String>>,
    #[schema(nullable = false)]
    pub pattern_type: Option<PatternType>,
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}

pub fn parse_create_trigger(body: Value) -> Parsed<CreateTrigger> {
    parse_object(body, loc(&["body"]), |r| {
        // Read every field before `?`, so that all faults are reported.
        let event = r.required("event", enum_value::<TriggerEvent>());
        let channel = r.optional("channel", one_of(TRIGGER_CHANNELS));
        let kind = r.nullable("kind", one_of(ConversationKind::ALL)).flatten();
        let pattern = r.nullable("pattern", string(1, 500)).flatten();
        let pattern_type = r.optional("pattern_type", enum_value::<PatternType>());
        let enabled = r.optional("enabled", boolean());
        Some(CreateTrigger { event: event?, channel, kind, pattern, pattern_type, enabled })
    })
}

pub fn parse_update_trigger(body: Value) -> Parsed<UpdateTrigger> {
    parse_object(body, loc(&["body"]), |r| {
        Some(UpdateTrigger {
            event: r.optional("event", enum_value::<TriggerEvent>()),
            channel: r.optional("channel", one_of(TRIGGER_CHANNELS)),
            kind: r.nullable("kind", one_of(ConversationKind::ALL)),
            pattern: r.nullable("pattern", string(1, 500)),
            pattern_type: r.optional("pattern_type", enum_value::<PatternType>()),
            enabled: r.optional("enabled", boolean()),
        })
    })
}

/// The smart rule's cap is no shorter than its short silence; checked
/// against the merged agent.
fn check_turn_silences(f: &AgentFields) -> ServiceResult<()> {
    if f.speech.end_of_turn_max_ms < f.speech.end_of_turn_min_ms {
        return Err(ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "end_of_turn_max_ms"]),
            "value_error.turn.max_below_min",
            format!("must be at least end_of_turn_min_ms ({} ms)", f.speech.end_of_turn_min_ms),
        )]));
    }
    Ok(())
}

/// A regex pattern must compile; checked against the merged trigger.
fn check_pattern(f: &TriggerFields) -> ServiceResult<()> {
    if let (PatternType::Regex, Some(p)) = (f.pattern_type, &f.pattern)
        && let Err(e) = regex::RegexBuilder::new(p).size_limit(1 << 20).build()
    {
        return Err(ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "pattern"]),
            "value_error.regex",
            format!("invalid regular expression: {e}"),
        )]));
    }
    Ok(())
}

pub(crate) async fn require_agent(c: &mut impl AsHandle, scope: Scope, agent_id: i64) -> ServiceResult<Agent> {
    repo::get(c, scope, agent_id, false).await?.ok_or_else(|| not_found(agent_id))
}

fn trigger_not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Trigger", id)
}

/// Emits `agent.updated` after a trigger change (its `trigger_count` moved).
async fn touch_agent(tx: &mut Tx, scope: Scope, agent_id: i64, delta: i64) -> ServiceResult<()> {
    repo::add_trigger_count(tx, scope, agent_id, delta).await?;
    let agent = require_agent(tx, scope, agent_id).await?;
    events::append(tx, scope, EventType::AgentUpdated, event_data(&agent)?).await?;
    Ok(())
}

pub async fn create_trigger(
    tx: &mut Tx,
    scope: Scope,
    agent_id: AgentId,
    input: CreateTrigger,
) -> ServiceResult<Trigger> {
    let agent_id = agent_id.get();
    require_agent(tx, scope, agent_id).await?;
    let fields = TriggerFields {
        event: input.event,
        channel: input.channel.unwrap_or_else(|| "*".to_owned()),
        kind: input.kind,
        pattern: input.pattern,
        pattern_type: input.pattern_type.unwrap_or(PatternType::Keyword),
        enabled: input.enabled.unwrap_or(true),
    };
    check_pattern(&fields)?;
    let trigger = trigger_repo::insert(tx, scope, agent_id, &fields).await?;
    touch_agent(tx, scope, agent_id, 1).await?;
    Ok(trigger)
}

pub async fn get_trigger(svc: &Services, scope: Scope, agent_id: AgentId, id: TriggerId) -> ServiceResult<Trigger> {
    let agent_id = agent_id.get();
    let id = id.get();
    let mut c = svc.db.read().await?;
    require_agent(&mut c, scope, agent_id).await?;
    trigger_repo::get(&mut c, scope, agent_id, id).await?.ok_or_else(|| trigger_not_found(id))
}

pub async fn list_triggers(
    svc: &Services,
    scope: Scope,
    agent_id: AgentId,
    page: Page,
) -> ServiceResult<(Vec<Trigger>, i64)> {
    let agent_id = agent_id.get();
    let mut c = svc.db.read().await?;
    require_agent(&mut c, scope, agent_id).await?;
    Ok(trigger_repo::list(&mut c, scope, agent_id, page).await?)
}

pub async fn update_trigger(
    tx: &mut Tx,
    scope: Scope,
    agent_id: AgentId,
    id: TriggerId,
    input: UpdateTrigger,
) -> ServiceResult<Trigger> {
    let agent_id = agent_id.get();
    let id = id.get();
    require_agent(tx, scope, agent_id).await?;
    let current = trigger_repo::get(tx, scope, agent_id, id).await?.ok_or_else(|| trigger_not_found(id))?;
    let mut f = TriggerFields::from(&current);
    if let Some(v) = input.event {
        f.event = v;
    }
    if let Some(v) = input.channel {
        f.channel = v;
    }
    if let Some(v) = input.kind {
        f.kind = v;
    }
    if let Some(v) = input.pattern {
        f.pattern = v;
    }
    if let Some(v) = input.pattern_type {
        f.pattern_type = v;
    }
    if let Some(v) = input.enabled {
        f.enabled = v;
    }
    check_pattern(&f)?;
    if f == TriggerFields::from(&current) {
        return Ok(current);
    }
    let trigger = trigger_repo::update(tx, scope, agent_id, id, &f).await?.ok_or_else(|| trigger_not_found(id))?;
    touch_agent(tx, scope, agent_id, 0).await?;
    Ok(trigger)
}

pub async fn delete_trigger(tx: &mut Tx, scope: Scope, agent_id: AgentId, id: TriggerId) -> ServiceResult<()> {
    let agent_id = agent_id.get();
    let id = id.get();
    require_agent(tx, scope, agent_id).await?;
    if !trigger_repo::delete(tx, scope, agent_id, id).await? {
        return Err(trigger_not_found(id));
    }
    touch_agent(tx, scope, agent_id, -1).await
}

// ---- prompt preview --------------------------------------------------------

/// `POST /api/v1/agents/{agent_id}/prompt/preview`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"variables": {"agent_name": "Ana"}}))]
pub struct PromptPreviewRequest {
    /// Values for the blocks' `{{variables}}`: strings, numbers or booleans
    /// (at most 64 KiB serialised).
    #[serde(default)]
    #[schema(schema_with = parley_domain::schema::variable_values)]
    pub variables: BTreeMap<String, String>,
}

/// The rendered system prompt: the agent's prompt blocks in order, then its `system_prompt`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PromptPreview {
    pub agent_id: i64,
    pub prompt: String,
    pub blocks: Vec<prompt::BlockRef>,
}

pub fn parse_preview(body: Value) -> Parsed<PromptPreviewRequest> {
    parse_object(body, loc(&["body"]), |r| {
        let vars = r.optional("variables", variable_values());
        Some(PromptPreviewRequest { variables: vars.unwrap_or_default() })
    })
}

/// `variables`: an object of strings, numbers or booleans (at most 64 KiB),
/// each as text.
pub fn variable_values() -> impl FnOnce(Value, &[LocPart]) -> Parsed<BTreeMap<String, String>> {
    |v, l| {
        let map = json_object(64 * 1024)(v, l)?;
        let mut out = BTreeMap::new();
        let mut errors = Vec::new();
        for (k, v) in map {
            let mut at = l.to_vec();
            at.push(LocPart::Key(k.clone()));
            match v {
                Value::String(s) => {
                    out.insert(k, s);
                }
                Value::Number(n) => {
                    out.insert(k, n.to_string());
                }
                Value::Bool(b) => {
                    out.insert(k, b.to_string());
                }
                _ => errors.push(FieldError::wrong_type(at, "string")),
            }
        }
        if errors.is_empty() { Ok(out) } else { Err(errors) }
    }
}

/// Renders the agent's system prompt as a run would, with the built-in
/// variables a preview has (`agent.name`, `workspace.name`, `now`) and the
/// caller's; a block's variable without a value is a 422.
pub async fn preview_prompt(
    svc: &Services,
    scope: Scope,
    agent_id: AgentId,
    req: PromptPreviewRequest,
) -> ServiceResult<PromptPreview> {
    let agent_id = agent_id.get();
    let mut c = svc.db.read().await?;
    let agent = require_agent(&mut c, scope, agent_id).await?;
    let blocks = block_repo::get_many(&mut c, scope, &agent.prompt_block_ids).await?;
    let workspace = parley_store::repo::workspaces::get(&mut c, scope.workspace_id).await?.ok_or_else(|| {
        ServiceError::invariant(format!("workspace {} of a valid credential is gone", scope.workspace_id))
    })?;
    let context = prompt::Context {
        agent: &agent,
        workspace_name: &workspace.name,
        conversation: None,
        contact: None,
        now: parley_domain::Timestamp::now(),
    };
    let vars = prompt::variables(prompt::builtin_variables(context), &req.variables);
    let rendered = prompt::system_prompt(&agent, &blocks, &vars, prompt::Missing::Refuse)?;
    Ok(PromptPreview { agent_id, prompt: rendered.prompt, blocks: rendered.blocks })
}

/// The configured text engines (`GET /api/v1/text-engines`), by name; no secrets.
pub fn text_engines(svc: &Services, page: Page) -> (Vec<parley_domain::agent::TextEngineInfo>, i64) {
    let all = svc.config.text_engines.list();
    let total = all.len() as i64;
    (all.into_iter().skip(page.offset as usize).take(page.limit as usize).collect(), total)
}
