//! The tools an agent's model may call, carried out: Parley's own
//! (`handoff_to_human`, `end_conversation`, `lookup_contact`,
//! `update_contact`, `search`, `send_message`, and on calls `end_call` and
//! `transfer_call`) and custom HTTP tools, each offered only when the
//! agent lists it (configured by `parley_services::agents::tools`).
//!
//! Every call's arguments are checked against the tool's JSON Schema before
//! anything runs; a refusal or failure goes back to the model as the tool's
//! result (`{"error": …}`), so it can correct itself. Tools that read or
//! write the workspace act within the conversation's contact, never the
//! workspace at large, through the [`ToolHost`]: a contact cannot make the
//! agent search or change someone else. `handoff_to_human` and
//! `end_conversation` end the run; they are applied with the run's reply,
//! in its transaction.
//!
//! Tools with effects (`update_contact`, `send_message`, HTTP tools) commit
//! as they run, so a run retried after a crash may repeat them: HTTP tools
//! get the same `webhook-id` on a repeat, for the receiver to deduplicate.

use std::time::{Duration, Instant};

use parley_domain::Scope;
use parley_domain::agent::{Agent, AgentTool, BuiltinTool, HttpTool, RunToolCall};
use parley_domain::channel::ChannelType;
use parley_domain::ids::ContactId;
use parley_engines::{ToolCall, ToolSpec};
use serde_json::{Value, json};

use crate::host::ToolHost;

/// Bytes of an HTTP tool's reply kept (and given to the model).
const REPLY_LIMIT: usize = 64 * 1024;
/// Characters of a tool's result given to the model.
const RESULT_CHARS: usize = 16_000;

/// Where the tools act.
#[derive(Debug, Clone)]
pub struct Place {
    pub scope: Scope,
    pub run_id: i64,
    pub conversation_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub call_id: Option<String>,
    /// The call can be transferred (a browser's web call cannot).
    pub transferable: bool,
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
            "Transfer the call to a phone number or SIP address. Cold (the default): the caller is put through at \
             once. Warm: tell the caller to hold; you call the person, tell them the summary, then put the caller \
             through; if nobody answers you are back with the caller.",
            json!({"type": "object", "properties": {
                "to": {"type": "string", "minLength": 1, "maxLength": 200},
                "mode": {"type": "string", "enum": ["cold", "warm"]},
                "summary": {"type": "string", "minLength": 1, "maxLength": 1000,
                    "description": "Warm only: what you tell the person about the caller and their request"}},
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
    Transfer(parley_voice::session::Transfer),
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
pub async fn execute(host: &dyn ToolHost, agent: &Agent, place: &Place, call: &ToolCall) -> Executed {
    use tracing::Instrument;
    // OpenTelemetry's GenAI conventions; never the arguments or the result.
    let kind = match agent.tools.iter().find(|t| t.name() == call.name) {
        Some(AgentTool::Http(_)) => "extension",
        _ => "function",
    };
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = kind,
        error.type = tracing::field::Empty,
    );
    let executed = carry_out(host, agent, place, call).instrument(span.clone()).await;
    if executed.record.error.is_some() {
        span.record("otel.status_code", "error");
        span.record("error.type", "tool_error");
    }
    executed
}

async fn carry_out(host: &dyn ToolHost, agent: &Agent, place: &Place, call: &ToolCall) -> Executed {
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
                    AgentTool::Builtin { name } => builtin(host, place, *name, &arguments).await,
                    AgentTool::Http(h) => http(host, agent, place, h, call, &arguments).await.map(|v| (v, None)),
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
    let problems = schema_problems(schema, arguments)?;
    if problems.is_empty() { Ok(()) } else { Err(format!("invalid arguments: {}", problems.join("; "))) }
}

/// Where `value` breaks `schema` (at most five places, each with its JSON
/// pointer); an error if the schema does not compile.
pub fn schema_problems(schema: &Value, value: &Value) -> Result<Vec<String>, String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("the schema is invalid: {e}"))?;
    Ok(validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() { e.to_string() } else { format!("{at}: {e}") }
        })
        .collect())
}

type ToolResult = Result<(Value, Option<Stop>), String>;

/// `transfer_call`: only on a call that can be handed on (not a browser's);
/// a warm one with what to tell the person.
fn transfer(place: &Place, args: &Value) -> ToolResult {
    let text = |key: &str| args.get(key).and_then(Value::as_str);
    let to = text("to").unwrap_or_default();
    let warm = text("mode") == Some("warm");
    match &place.call_id {
        None => Err("there is no call to transfer".into()),
        Some(_) if !place.transferable => {
            Err("this is a web call: the caller is in a browser and cannot be transferred".into())
        }
        Some(_) if !transfer_target(to) => {
            Err("`to` must be a phone number in E.164 form (+14155550100) or a sip: URI".into())
        }
        Some(_) if warm && text("summary").is_none() => {
            Err("a warm transfer needs a `summary` to tell the person before the caller is put through".into())
        }
        Some(_) => {
            let summary = text("summary").filter(|_| warm).map(str::to_owned);
            let detail = if warm { "Calling them now; the caller holds." } else { "The caller is being put through." };
            let transfer = parley_voice::session::Transfer { to: to.to_owned(), summary };
            Ok((json!({"ok": true, "detail": detail}), Some(Stop::Transfer(transfer))))
        }
    }
}

async fn builtin(host: &dyn ToolHost, place: &Place, name: BuiltinTool, args: &Value) -> ToolResult {
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let contact = || place.contact_id.map(ContactId).ok_or("the conversation has no contact");
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
        BuiltinTool::TransferCall => transfer(place, args),
        BuiltinTool::LookupContact => Ok((host.lookup_contact(place.scope, contact()?).await?, None)),
        BuiltinTool::UpdateContact | BuiltinTool::SendMessage if place.dry_run => {
            Ok((json!({"ok": true, "dry_run": true, "detail": "Not carried out: this is the playground."}), None))
        }
        BuiltinTool::UpdateContact => Ok((host.update_contact(place.scope, contact()?, args.clone()).await?, None)),
        BuiltinTool::Search => Ok((host.search_contact(place.scope, contact()?, text("query")).await?, None)),
        BuiltinTool::SendMessage => {
            let channel = ChannelType::parse(&text("channel")).ok_or("unknown channel")?;
            Ok((host.send_to_contact(place.scope, contact()?, channel, text("text")).await?, None))
        }
    }
}

/// POSTs the call to the tool's URL, signed by the agent's tool secret.
async fn http(
    host: &dyn ToolHost,
    agent: &Agent,
    place: &Place,
    tool: &HttpTool,
    call: &ToolCall,
    arguments: &Value,
) -> Result<Value, String> {
    let (secret, headers) = host.tool_credentials(agent, &tool.name)?;
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
    let client = parley_events::ssrf::http_client(host.allow_private_urls(), timeout);
    let post = parley_events::post::SignedPost {
        url: &tool.url,
        secrets: std::slice::from_ref(&secret),
        id: &id,
        body: serde_json::to_vec(&body).map_err(|e| e.to_string())?,
        authorization: None,
        headers: &headers,
        allow_private: host.allow_private_urls(),
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
    use super::*;

    #[test]
    fn a_web_call_is_never_transferred_and_a_phone_call_is() {
        let scope = parley_domain::Scope { workspace_id: 1, mode: parley_domain::Mode::Live };
        let place = |transferable| Place {
            scope,
            run_id: 1,
            conversation_id: None,
            contact_id: None,
            call_id: Some("call_1".into()),
            transferable,
            dry_run: false,
        };
        let to = json!({"to": "+14155550100"});
        let web = transfer(&place(false), &to).unwrap_err();
        assert!(web.contains("web call"), "{web}");
        let (_, stop) = transfer(&place(true), &to).unwrap();
        let cold = parley_voice::session::Transfer { to: "+14155550100".into(), summary: None };
        assert_eq!(stop, Some(Stop::Transfer(cold)));
        assert!(transfer(&place(true), &json!({"to": "nowhere"})).is_err());
    }

    #[test]
    fn a_warm_transfer_carries_its_summary_and_needs_one() {
        let place = Place {
            scope: parley_domain::Scope { workspace_id: 1, mode: parley_domain::Mode::Live },
            run_id: 1,
            conversation_id: None,
            contact_id: None,
            call_id: Some("call_1".into()),
            transferable: true,
            dry_run: false,
        };
        let said = "Ana wants a refund for order 123.";
        let warm = json!({"to": "sip:desk@example.com", "mode": "warm", "summary": said});
        let schema = builtin_spec(BuiltinTool::TransferCall).parameters;
        assert!(check_arguments(&schema, &warm).is_ok());
        let (_, stop) = transfer(&place, &warm).unwrap();
        let expected =
            parley_voice::session::Transfer { to: "sip:desk@example.com".into(), summary: Some(said.into()) };
        assert_eq!(stop, Some(Stop::Transfer(expected)));
        let e = transfer(&place, &json!({"to": "sip:desk@example.com", "mode": "warm"})).unwrap_err();
        assert!(e.contains("summary"), "{e}");
        // A summary on a cold transfer is not said to anyone.
        let cold = json!({"to": "sip:desk@example.com", "summary": said});
        assert!(matches!(transfer(&place, &cold).unwrap().1, Some(Stop::Transfer(t)) if t.summary.is_none()));
        assert!(check_arguments(&schema, &json!({"to": "+14155550100", "mode": "lukewarm"})).is_err());
    }

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
}
