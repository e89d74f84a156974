//! The tools an agent's model may call: Parley's own (`handoff_to_human`,
//! `end_conversation`, `lookup_contact`, `update_contact`, `search`,
//! `send_message`; `end_call` and `transfer_call` once calls can act on them) and custom HTTP
//! tools, each offered only when the agent lists it.
//!
//! Every call's arguments are checked against the tool's JSON Schema before
//! anything runs; a refusal or failure goes back to the model as the tool's
//! result (`{"error": …}`), so it can correct itself. Tools that read or
//! write the workspace act within the conversation's contact, never the
//! workspace at large: a contact cannot make the agent search or change
//! someone else. `handoff_to_human` and `end_conversation` end the run;
//! they are applied with the run's reply, in its transaction.
//!
//! Tools with effects (`update_contact`, `send_message`, HTTP tools) commit
//! as they run, so a run retried after a crash may repeat them: HTTP tools
//! get the same `webhook-id` on a repeat, for the receiver to deduplicate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parley_domain::Scope;
use parley_domain::agent::{Agent, AgentTool, BuiltinTool, HttpTool, RunToolCall};
use parley_domain::channel::ChannelType;
use parley_domain::crypto::SecretBox;
use parley_domain::validation::{FieldError, LocPart, Parsed, integer, list_of, object, string};
use parley_engines::{ToolCall, ToolSpec};
use parley_events::signing::WebhookSecret;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::messaging::messages::{self, Recipient, SendMessage, Sender};
use crate::{ServiceError, Services};

/// Tools per agent.
pub const MAX_TOOLS: usize = 20;
const MAX_HEADERS: usize = 10;
const DEFAULT_TIMEOUT_MS: i64 = 10_000;
/// Bytes of an HTTP tool's reply kept (and given to the model).
const REPLY_LIMIT: usize = 64 * 1024;
/// Characters of a tool's result given to the model.
const RESULT_CHARS: usize = 16_000;

/// A tool as written in a create or update: `{"type": "builtin", "name"}`
/// or an HTTP tool.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ToolInput {
    Builtin(BuiltinToolInput),
    Http(HttpToolInput),
}

/// `builtin`.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BuiltinKind {
    Builtin,
}

/// `http`.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HttpKind {
    Http,
}

/// One of Parley's tools.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuiltinToolInput {
    #[serde(rename = "type")]
    pub kind: BuiltinKind,
    pub name: BuiltinTool,
}

/// A tool of yours, called over HTTP.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpToolInput {
    #[serde(rename = "type")]
    pub kind: HttpKind,
    /// 1–64 letters, digits, `_` or `-`; not a built-in tool's name.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    /// What the tool does, for the model (1–1,000 characters).
    #[schema(min_length = 1, max_length = 1000)]
    pub description: String,
    /// A JSON Schema for the arguments object (at most 16 KiB).
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// An `http` or `https` URL; private addresses are refused unless the
    /// server allows them (`webhooks.allow_private_targets`).
    #[schema(format = "uri", min_length = 1, max_length = 2048)]
    pub url: String,
    /// 100–30,000; default 10,000.
    #[schema(nullable = false, minimum = 100, maximum = 30000)]
    pub timeout_ms: Option<i64>,
    /// Headers sent with each call (at most 10), e.g. an API key. Write-only:
    /// they are sealed and never shown again.
    #[schema(nullable = false, schema_with = parley_domain::schema::tool_headers)]
    pub headers: Option<BTreeMap<String, String>>,
}

/// Headers Parley sets itself.
const RESERVED_HEADERS: &[&str] =
    &["content-type", "content-length", "host", "webhook-id", "webhook-timestamp", "webhook-signature"];

/// Parses `tools`: at most [`MAX_TOOLS`], names unique.
pub fn parse_tools() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<ToolInput>> {
    |v, l| {
        let tools = list_of(MAX_TOOLS, |v, l| parse_tool(v, l))(v, l)?;
        let mut seen = std::collections::HashSet::new();
        let mut errors = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            if !seen.insert(input_name(t).to_owned()) {
                let mut at = l.to_vec();
                at.extend([LocPart::Index(i), LocPart::Key("name".into())]);
                errors.push(FieldError::new(at, "value_error.tool.duplicate", "another tool has this name"));
            }
        }
        if errors.is_empty() { Ok(tools) } else { Err(errors) }
    }
}

fn input_name(t: &ToolInput) -> &str {
    match t {
        ToolInput::Builtin(b) => b.name.as_str(),
        ToolInput::Http(h) => &h.name,
    }
}

fn parse_tool(v: Value, l: &[LocPart]) -> Parsed<ToolInput> {
    let kind = v.get("type").and_then(Value::as_str).map(str::to_owned);
    match kind.as_deref() {
        Some("builtin") => object(|r| {
            r.required("type", string(1, 10));
            let name = r.required("name", parley_domain::validation::enum_value::<BuiltinTool>());
            Some(ToolInput::Builtin(BuiltinToolInput { kind: BuiltinKind::Builtin, name: name? }))
        })(v, l),
        Some("http") => object(|r| {
            r.required("type", string(1, 10));
            let name = r.required("name", tool_name());
            let description = r.required("description", string(1, 1000));
            let parameters = r.required("parameters", schema());
            let url = r.required("url", url());
            let timeout_ms = r.optional("timeout_ms", integer(100, 30_000));
            let headers = r.optional("headers", headers());
            Some(ToolInput::Http(HttpToolInput {
                kind: HttpKind::Http,
                name: name?,
                description: description?,
                parameters: parameters?,
                url: url?,
                timeout_ms,
                headers,
            }))
        })(v, l),
        _ => {
            let mut at = l.to_vec();
            at.push(LocPart::Key("type".into()));
            Err(vec![FieldError::not_enum(at, &["builtin", "http"])])
        }
    }
}

fn tool_name() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let s = string(1, 64)(v, l)?;
        if !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            Err(vec![FieldError::new(l.to_vec(), "value_error.tool.name", "use 1–64 letters, digits, _ or -")])
        } else if BuiltinTool::parse(&s).is_some() {
            Err(vec![FieldError::new(l.to_vec(), "value_error.tool.name", "a built-in tool has this name")])
        } else {
            Ok(s)
        }
    }
}

/// A JSON Schema for an arguments object: it must compile.
fn schema() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Value> {
    |v, l| {
        let err = |msg: String| Err(vec![FieldError::new(l.to_vec(), "value_error.json_schema", msg)]);
        if !v.is_object() {
            return Err(vec![FieldError::wrong_type(l.to_vec(), "object")]);
        }
        if v.to_string().len() > 16 * 1024 {
            return err("the schema is larger than 16 KiB".into());
        }
        if v.get("type").is_some_and(|t| t != "object") {
            return err("the arguments schema must have type \"object\"".into());
        }
        match jsonschema::validator_for(&v) {
            Ok(_) => Ok(v),
            Err(e) => err(format!("not a valid JSON Schema: {e}")),
        }
    }
}

fn url() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let s = string(1, 2048)(v, l)?;
        match parley_events::ssrf::parse_target(&s) {
            Ok(_) => Ok(s),
            Err(e) => Err(vec![FieldError::new(l.to_vec(), "value_error.url", e.to_string())]),
        }
    }
}

fn headers() -> impl FnOnce(Value, &[LocPart]) -> Parsed<BTreeMap<String, String>> {
    |v, l| {
        let Value::Object(map) = v else { return Err(vec![FieldError::wrong_type(l.to_vec(), "object")]) };
        if map.len() > MAX_HEADERS {
            return Err(vec![FieldError::new(l.to_vec(), "value_error.headers", "at most 10 headers")]);
        }
        let mut out = BTreeMap::new();
        let mut errors = Vec::new();
        for (name, value) in map {
            let mut at = l.to_vec();
            at.push(LocPart::Key(name.clone()));
            let valid_name = !name.is_empty()
                && name.len() <= 100
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
                && !RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str());
            if !valid_name {
                errors.push(FieldError::new(at, "value_error.header.name", "not a header name Parley may send"));
                continue;
            }
            match parley_domain::validation::header_value(1, 1000)(value, &at) {
                Ok(value) => {
                    out.insert(name, value);
                }
                Err(e) => errors.extend(e),
            }
        }
        if errors.is_empty() { Ok(out) } else { Err(errors) }
    }
}

/// The tools as stored, and each HTTP tool's headers sealed.
/// Replaces an agent's tools. An HTTP tool sent without `headers` keeps
/// the headers the agent's tool of that name had (they are write-only, so
/// an editor cannot send them back); `headers: {}` removes them.
pub(crate) fn store(
    inputs: Vec<ToolInput>,
    sealer: &SecretBox,
    before: (&[AgentTool], &BTreeMap<String, String>),
) -> (Vec<AgentTool>, BTreeMap<String, String>) {
    let (old_tools, old_sealed) = before;
    let mut sealed = BTreeMap::new();
    let tools = inputs
        .into_iter()
        .map(|t| match t {
            ToolInput::Builtin(b) => AgentTool::Builtin { name: b.name },
            ToolInput::Http(h) => {
                let kept = old_tools.iter().find_map(|t| match t {
                    AgentTool::Http(old) if old.name == h.name && h.headers.is_none() => {
                        Some((old.header_names.clone(), old_sealed.get(&old.name)?.clone()))
                    }
                    _ => None,
                });
                let header_names = match (kept, h.headers) {
                    (Some((names, seal)), _) => {
                        sealed.insert(h.name.clone(), seal);
                        names
                    }
                    (None, headers) => {
                        let headers = headers.unwrap_or_default();
                        if !headers.is_empty() {
                            let json = serde_json::to_vec(&headers).expect("a map of strings serialises");
                            sealed.insert(h.name.clone(), sealer.seal(&json));
                        }
                        headers.keys().cloned().collect()
                    }
                };
                AgentTool::Http(HttpTool {
                    header_names,
                    name: h.name,
                    description: h.description,
                    parameters: h.parameters,
                    url: h.url,
                    timeout_ms: h.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
                })
            }
        })
        .collect();
    (tools, sealed)
}

/// Refuses HTTP tool URLs that lead to private addresses (`localhost`,
/// names in /etc/hosts, private IPs), resolving their names, before any
/// transaction (DNS can be slow); each call's resolver checks again.
pub async fn prepare(svc: &Services, tools: Option<&[ToolInput]>) -> Result<(), ServiceError> {
    let mut errors = Vec::new();
    for (i, t) in tools.unwrap_or_default().iter().enumerate() {
        let ToolInput::Http(h) = t else { continue };
        let at = vec![
            LocPart::Key("body".into()),
            LocPart::Key("tools".into()),
            LocPart::Index(i),
            LocPart::Key("url".into()),
        ];
        if let Err(e) = crate::webhooks::check_url_at(svc, &h.url, at).await {
            errors.push(e);
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ServiceError::Validation(errors)) }
}

/// Refuses HTTP tool URLs on private addresses (by their literal host; the
/// call's resolver checks resolved addresses) unless the server allows them.
pub(crate) fn check_urls(svc: &Services, tools: &[ToolInput]) -> Result<(), ServiceError> {
    let mut errors = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        let ToolInput::Http(h) = t else { continue };
        let Ok(url) = parley_events::ssrf::parse_target(&h.url) else { continue };
        if let Err(e) = parley_events::ssrf::check_literal_host(&url, svc.config.webhooks_allow_private) {
            let at = vec![
                LocPart::Key("body".into()),
                LocPart::Key("tools".into()),
                LocPart::Index(i),
                LocPart::Key("url".into()),
            ];
            errors.push(FieldError::new(at, "value_error.url.private", e.to_string()));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ServiceError::Validation(errors)) }
}

/// Where the tools act.
#[derive(Debug, Clone)]
pub struct Place {
    pub scope: Scope,
    pub run_id: i64,
    pub conversation_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub call_id: Option<String>,
    /// The playground: tools that would change the workspace or reach the
    /// contact (`update_contact`, `send_message`) say what they would do
    /// instead; ending tools are reported, not applied.
    pub dry_run: bool,
}

/// The tools to offer the model: the agent's, without the call tools
/// outside a call.
pub fn specs(agent: &Agent, on_call: bool) -> Vec<ToolSpec> {
    agent
        .tools
        .iter()
        .filter_map(|t| match t {
            AgentTool::Builtin { name } => {
                let call_only = matches!(name, BuiltinTool::EndCall | BuiltinTool::TransferCall);
                (on_call || !call_only).then(|| builtin_spec(*name))
            }
            AgentTool::Http(h) => Some(ToolSpec {
                name: h.name.clone(),
                description: h.description.clone(),
                parameters: h.parameters.clone(),
            }),
        })
        .collect()
}

fn builtin_spec(name: BuiltinTool) -> ToolSpec {
    let (description, parameters) = match name {
        BuiltinTool::HandoffToHuman => (
            "Hand the conversation to a person from the team, when you cannot help or the contact asks for a person.",
            json!({"type": "object", "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 500,
                "description": "Why a person should take over"}}, "required": ["reason"], "additionalProperties": false}),
        ),
        BuiltinTool::EndConversation => (
            "Close the conversation once the contact's request is fully resolved.",
            json!({"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}},
                "additionalProperties": false}),
        ),
        BuiltinTool::EndCall => (
            "Hang up the call once it is finished.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        BuiltinTool::TransferCall => (
            "Transfer the call to a phone number or SIP address.",
            json!({"type": "object", "properties": {"to": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["to"], "additionalProperties": false}),
        ),
        BuiltinTool::LookupContact => (
            "Read what is known about the contact you are talking to (name, email, phone, tags, metadata).",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        BuiltinTool::UpdateContact => (
            "Correct the contact's name, as the contact tells you; or switch their email or phone to another \
             address they have written from (never to one they only name).",
            json!({"type": "object", "properties": {
                "display_name": {"type": "string", "minLength": 1, "maxLength": 200},
                "email": {"type": "string", "minLength": 3, "maxLength": 254},
                "phone": {"type": "string", "minLength": 3, "maxLength": 40}},
                "minProperties": 1, "additionalProperties": false}),
        ),
        BuiltinTool::Search => (
            "Search this contact's earlier messages and conversations.",
            json!({"type": "object", "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500}},
                "required": ["query"], "additionalProperties": false}),
        ),
        BuiltinTool::SendMessage => (
            "Send the contact a message on another of their channels (e.g. a confirmation by email or SMS).",
            json!({"type": "object", "properties": {
                "channel": {"type": "string", "enum": ChannelType::ALL},
                "text": {"type": "string", "minLength": 1, "maxLength": 4000}},
                "required": ["channel", "text"], "additionalProperties": false}),
        ),
    };
    ToolSpec { name: name.as_str().to_owned(), description: description.to_owned(), parameters }
}

/// Where a call can be transferred: an E.164 number or a SIP URI.
fn transfer_target(to: &str) -> bool {
    let number =
        to.strip_prefix('+').is_some_and(|d| (8..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()));
    let sip =
        (to.starts_with("sip:") || to.starts_with("sips:")) && to.contains('@') && !to.contains(char::is_whitespace);
    number || sip
}

/// What a tool call ends the run with, applied with its reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    Handoff(String),
    EndConversation,
    EndCall,
    Transfer(String),
}

/// A tool call carried out: what the run records, what the model reads,
/// and whether it ends the run.
#[derive(Debug, Clone)]
pub struct Executed {
    pub record: RunToolCall,
    pub content: String,
    pub stop: Option<Stop>,
}

/// Carries out one tool call. Never fails: every refusal is the result.
pub async fn execute(svc: &Services, agent: &Agent, place: &Place, call: &ToolCall) -> Executed {
    let started = Instant::now();
    let arguments: Value = serde_json::from_str(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments })
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    let outcome = match agent.tools.iter().find(|t| t.name() == call.name) {
        None => Err(format!("there is no tool named {:?}", call.name)),
        Some(tool) => {
            let spec = match tool {
                AgentTool::Builtin { name } => builtin_spec(*name),
                AgentTool::Http(h) => {
                    ToolSpec { name: h.name.clone(), description: String::new(), parameters: h.parameters.clone() }
                }
            };
            match check_arguments(&spec.parameters, &arguments) {
                Err(e) => Err(e),
                Ok(()) => match tool {
                    AgentTool::Builtin { name } => builtin(svc, place, *name, &arguments).await,
                    AgentTool::Http(h) => http(svc, agent, place, h, call, &arguments).await.map(|v| (v, None)),
                },
            }
        }
    };
    let ms = started.elapsed().as_millis() as i64;
    let (result, error, stop) = match outcome {
        Ok((result, stop)) => (Some(result), None, stop),
        Err(e) => (None, Some(e), None),
    };
    let content = match (&result, &error) {
        (Some(r), _) => r.to_string().chars().take(RESULT_CHARS).collect(),
        (None, Some(e)) => json!({"error": e}).to_string(),
        (None, None) => "{}".to_owned(),
    };
    Executed { record: RunToolCall { name: call.name.clone(), arguments, result, error, ms }, content, stop }
}

/// Checks arguments against a tool's schema; the error lists what is wrong.
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), String> {
    if !arguments.is_object() {
        return Err("the arguments must be a JSON object".into());
    }
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("the tool's schema is invalid: {e}"))?;
    let problems: Vec<String> = validator
        .iter_errors(arguments)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
        })
        .collect();
    if problems.is_empty() { Ok(()) } else { Err(format!("invalid arguments: {}", problems.join("; "))) }
}

type ToolResult = Result<(Value, Option<Stop>), String>;

async fn builtin(svc: &Services, place: &Place, name: BuiltinTool, args: &Value) -> ToolResult {
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    match name {
        BuiltinTool::HandoffToHuman => Ok((
            json!({"ok": true, "detail": "A person will take over the conversation."}),
            Some(Stop::Handoff(text("reason"))),
        )),
        BuiltinTool::EndConversation => {
            Ok((json!({"ok": true, "detail": "The conversation will be closed."}), Some(Stop::EndConversation)))
        }
        BuiltinTool::EndCall => match &place.call_id {
            Some(_) => Ok((json!({"ok": true}), Some(Stop::EndCall))),
            None => Err("there is no call to end".into()),
        },
        BuiltinTool::TransferCall => match &place.call_id {
            Some(_) if transfer_target(&text("to")) => Ok((json!({"ok": true}), Some(Stop::Transfer(text("to"))))),
            Some(_) => Err("`to` must be a phone number in E.164 form (+14155550100) or a sip: URI".into()),
            None => Err("there is no call to transfer".into()),
        },
        BuiltinTool::LookupContact => {
            let id = place.contact_id.ok_or("the conversation has no contact")?;
            let contact = crate::crm::contacts::get(svc, place.scope, id).await.map_err(|e| refusal(&e))?;
            Ok((serde_json::to_value(contact).map_err(|e| e.to_string())?, None))
        }
        BuiltinTool::UpdateContact | BuiltinTool::SendMessage if place.dry_run => {
            Ok((json!({"ok": true, "dry_run": true, "detail": "Not carried out: this is the playground."}), None))
        }
        BuiltinTool::UpdateContact => {
            let id = place.contact_id.ok_or("the conversation has no contact")?;
            let region = svc.config.contacts.default_region;
            let changes = crate::crm::contacts::parse_update(args.clone(), region)
                .map_err(|e| refusal(&ServiceError::Validation(e)))?;
            let scope = place.scope;
            let contact = svc
                .transaction(async move |work| crate::crm::contacts::update_as_contact(work, scope, id, changes).await)
                .await
                .map_err(|e| refusal(&e))?;
            Ok((serde_json::to_value(contact).map_err(|e| e.to_string())?, None))
        }
        BuiltinTool::Search => {
            let id = place.contact_id.ok_or("the conversation has no contact")?;
            let query = parley_domain::search::parse(&text("query")).map_err(|e| e.to_string())?;
            let request = crate::search::SearchRequest {
                query,
                targets: vec![
                    parley_store::repo::search::Target::Messages,
                    parley_store::repo::search::Target::Conversations,
                ],
                filter: parley_store::repo::search::SearchFilter { contact_id: Some(id), ..Default::default() },
            };
            let page = parley_domain::validation::Page { limit: 5, offset: 0 };
            let found = crate::search::search(svc, place.scope, &request, page).await.map_err(|e| refusal(&e))?;
            Ok((json!({"results": found.hits, "total": found.total}), None))
        }
        BuiltinTool::SendMessage => {
            let contact_id = place.contact_id.ok_or("the conversation has no contact")?;
            let channel = ChannelType::parse(&text("channel")).ok_or("unknown channel")?;
            let send = SendMessage {
                conversation_id: None,
                channel_id: None,
                to: None,
                contact_id: Some(contact_id),
                channel: Some(channel),
                text: text("text"),
                attachments: None,
                template: None,
                subject: None,
                recipient: Recipient::ContactChannel { contact_id, channel },
            };
            let scope = place.scope;
            let sent = svc
                .transaction(async move |work| messages::send(work, svc, scope, Sender::Agent, send).await)
                .await
                .map_err(|e| refusal(&e))?;
            Ok((json!({"ok": true, "message_id": sent.id, "conversation_id": sent.conversation_id}), None))
        }
    }
}

/// A service refusal in the API's words.
fn refusal(e: &ServiceError) -> String {
    match e {
        ServiceError::Validation(errors) => {
            errors.iter().map(|f| format!("{}: {}", loc_text(&f.loc), f.msg)).collect::<Vec<_>>().join("; ")
        }
        other => other.to_string(),
    }
}

/// `body.tools.0.name`: a location as one dotted path.
fn loc_text(loc: &[LocPart]) -> String {
    let parts: Vec<String> = loc
        .iter()
        .map(|p| match p {
            LocPart::Key(k) => k.clone(),
            LocPart::Index(i) => i.to_string(),
        })
        .collect();
    parts.join(".")
}

/// POSTs the call to the tool's URL, signed by the agent's tool secret.
async fn http(
    svc: &Services,
    agent: &Agent,
    place: &Place,
    tool: &HttpTool,
    call: &ToolCall,
    arguments: &Value,
) -> Result<Value, String> {
    let secrets = svc.keyring.secrets();
    let secret = agent
        .secrets
        .tool_secret
        .as_deref()
        .and_then(|s| secrets.open(s).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| WebhookSecret::parse(&s))
        .ok_or("the agent has no tool secret")?;
    let headers: Vec<(String, String)> = match agent.secrets.tool_headers.get(&tool.name) {
        Some(sealed) => {
            let bytes = secrets.open(sealed).map_err(|_| "the tool's headers cannot be opened")?;
            let map: BTreeMap<String, String> =
                serde_json::from_slice(&bytes).map_err(|_| "the tool's headers cannot be read")?;
            map.into_iter().collect()
        }
        None => Vec::new(),
    };
    let body = json!({
        "tool": tool.name,
        "arguments": arguments,
        "agent_id": agent.id,
        "conversation_id": place.conversation_id,
        "call_id": place.call_id,
        "run_id": place.run_id,
    });
    let id = format!("run_{}_{}", place.run_id, sanitize(&call.id));
    let timeout = Duration::from_millis(tool.timeout_ms as u64);
    let client = parley_events::ssrf::http_client(svc.config.webhooks_allow_private, timeout);
    let post = parley_events::post::SignedPost {
        url: &tool.url,
        secrets: std::slice::from_ref(&secret),
        id: &id,
        body: serde_json::to_vec(&body).map_err(|e| e.to_string())?,
        authorization: None,
        headers: &headers,
        allow_private: svc.config.webhooks_allow_private,
        read_limit: REPLY_LIMIT,
    };
    let reply = parley_events::post::send(&client, timeout, post).await?;
    if let Some(error) = reply.error() {
        let detail: String = reply.body.chars().take(500).collect();
        return Err(if detail.is_empty() { error } else { format!("{error}: {detail}") });
    }
    Ok(serde_json::from_str(&reply.body).unwrap_or(Value::String(reply.body)))
}

/// A model's call id as a header-safe token.
fn sanitize(id: &str) -> String {
    id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').take(64).collect()
}

#[cfg(test)]
mod tests {
    use parley_domain::validation::loc;

    use super::*;

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let schema = builtin_spec(BuiltinTool::SendMessage).parameters;
        assert!(check_arguments(&schema, &json!({"channel": "sms", "text": "Hi"})).is_ok());
        let e = check_arguments(&schema, &json!({"channel": "fax", "text": "Hi"})).unwrap_err();
        assert!(e.contains("/channel"), "{e}");
        let e = check_arguments(&schema, &json!({"text": "Hi"})).unwrap_err();
        assert!(e.contains("channel"), "{e}");
        assert!(check_arguments(&schema, &json!("Hi")).is_err());
        // update_contact changes only the allowed fields, and at least one.
        let schema = builtin_spec(BuiltinTool::UpdateContact).parameters;
        assert!(check_arguments(&schema, &json!({"email": "ana@example.com"})).is_ok());
        assert!(check_arguments(&schema, &json!({"tags": ["vip"]})).is_err());
        assert!(check_arguments(&schema, &json!({})).is_err());
    }

    #[test]
    fn tools_parse_with_their_errors_located() {
        let ok = parse_tools()(
            json!([{"type": "builtin", "name": "search"}, {"type": "http", "name": "book", "description": "Books",
                "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
                "url": "https://example.com/book", "headers": {"X-Key": "k"}}]),
            &loc(&["body", "tools"]),
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        let errors = parse_tools()(
            json!([{"type": "builtin", "name": "fly"}, {"type": "http", "name": "search", "description": "x",
                "parameters": {"type": "string"}, "url": "ftp://x", "headers": {"Host": "x"}}, {"type": "mcp"}]),
            &loc(&["body", "tools"]),
        )
        .unwrap_err();
        let locs: Vec<String> = errors.iter().map(|e| loc_text(&e.loc)).collect();
        for expected in [
            "body.tools.0.name",
            "body.tools.1.name",
            "body.tools.1.parameters",
            "body.tools.1.url",
            "body.tools.1.headers.Host",
            "body.tools.2.type",
        ] {
            assert!(locs.iter().any(|l| l == expected), "{expected} in {locs:?}");
        }
    }
}
