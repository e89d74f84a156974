//! The tools an agent may be given, as configured: parsed, checked and
//! stored with the agent (HTTP tools' headers sealed). The agent runtime
//! (`parley-agent-runtime`'s `tools`) offers and carries them out.
//!
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

use parley_domain::agent::{Agent, AgentTool, BuiltinTool, HttpTool};
use parley_domain::crypto::SecretBox;
use parley_domain::validation::{FieldError, LocPart, Parsed, integer, list_of, object, string};
use parley_events::signing::WebhookSecret;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

use crate::{ServiceError, Services};

/// Tools per agent.
pub const MAX_TOOLS: usize = 20;
const MAX_HEADERS: usize = 10;
const DEFAULT_TIMEOUT_MS: i64 = 10_000;

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

/// A JSON Schema for an arguments object (a tool's, or what post-call
/// analysis extracts): it must compile.
pub(crate) fn schema() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Value> {
    |v, l| {
        let err = |msg: String| Err(vec![FieldError::new(l.to_vec(), "value_error.json_schema", msg)]);
        if !v.is_object() {
            return Err(vec![FieldError::wrong_type(l.to_vec(), "object")]);
        }
        if v.to_string().len() > 16 * 1024 {
            return err("the schema is larger than 16 KiB".into());
        }
        if v.get("type").is_some_and(|t| t != "object") {
            return err("the schema must have type \"object\"".into());
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

/// What signs and authenticates an agent's call to HTTP tool `tool`: the
/// agent's tool secret and the tool's own headers, unsealed (only the agent
/// runtime asks, as it makes the call).
pub fn open_credentials(
    svc: &Services,
    agent: &Agent,
    tool: &str,
) -> Result<(WebhookSecret, Vec<(String, String)>), &'static str> {
    let secrets = svc.keyring.secrets();
    let secret = agent
        .secrets
        .tool_secret
        .as_deref()
        .and_then(|s| secrets.open(s).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| WebhookSecret::parse(&s))
        .ok_or("the agent has no tool secret")?;
    let headers = match agent.secrets.tool_headers.get(tool) {
        Some(sealed) => {
            let bytes = secrets.open(sealed).map_err(|_| "the tool's headers cannot be opened")?;
            let map: BTreeMap<String, String> =
                serde_json::from_slice(&bytes).map_err(|_| "the tool's headers cannot be read")?;
            map.into_iter().collect()
        }
        None => Vec::new(),
    };
    Ok((secret, headers))
}

/// `body.tools.0.name`: a location as one dotted path.
pub fn loc_text(loc: &[LocPart]) -> String {
    let parts: Vec<String> = loc
        .iter()
        .map(|p| match p {
            LocPart::Key(k) => k.clone(),
            LocPart::Index(i) => i.to_string(),
        })
        .collect();
    parts.join(".")
}

#[cfg(test)]
mod tests {
    use parley_domain::validation::loc;
    use serde_json::json;

    use super::*;

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
