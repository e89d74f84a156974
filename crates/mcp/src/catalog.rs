//! The tool catalog: each tool's input schema, built from the REST
//! operation it stands for (its parameters and body fields as arguments,
//! from the OpenAPI document, so a tool cannot drift from its route),
//! reading a call's arguments by where the operation takes them, the
//! workspace a call acts on, and the API's error bodies as tool errors.
//! The operations themselves are in [`crate::tools`].
//!
//! Tools are listed without `outputSchema`: the response schemas would
//! more than double what `tools/list` costs a model's context, for what
//! each result shows anyway (the REST answer of its operation, as
//! structured content and as JSON text). The input schemas are compacted
//! by [`crate::schema`].

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::idempotency::{IdempotencyKey, canonical_json, fingerprint};
use parley_domain::validation::{FieldError, LocPart, Page, Parsed, QueryReader, loc};
use parley_services::Snapshot;
use parley_services::list_cache::ListCache;
use parley_services::tenancy::auth::{Credential, Principal};
use parley_services::tenancy::reach;
use parley_services::{Answered, Idempotent, ServiceError, ServiceResult, Services};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::schema::{Resolver, brief};
use crate::tools::TOOLS;

/// What a tool's `run` gets: its arguments, sorted by where the REST
/// operation takes them.
pub struct Call {
    path: BTreeMap<String, String>,
    /// The query parameters, for the REST query parsers.
    pub(crate) query: QueryReader,
    /// The request body's fields (an object).
    body: Value,
    /// The `idempotency_key` argument, fingerprinted like the REST request.
    pub(crate) idem: Option<Idempotent>,
    pub(crate) errors: Vec<FieldError>,
    /// The list-page cache and the versions read with the credential, when
    /// the call acts on the credential's own scope (for another workspace
    /// those versions say nothing).
    pages: Option<(Arc<ListCache>, Snapshot)>,
    /// The arguments in canonical form, naming a cached page.
    canonical: String,
}

impl Call {
    /// A list page through the shared cache (see `ListCache`), or computed.
    pub(crate) async fn cached_page<F, Fut>(
        &self,
        scope: Scope,
        resource: &'static str,
        compute: F,
    ) -> ServiceResult<Value>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ServiceResult<Value>>,
    {
        let Some((lists, versions)) = &self.pages else { return compute().await };
        let name = format!("mcp:{}", self.canonical);
        let body = lists
            .page(versions, scope, resource, &name, || async {
                serde_json::to_vec(&compute().await?).map_err(|e| ServiceError::internal(e, "serialising a page"))
            })
            .await?;
        serde_json::from_slice(&body).map_err(|e| ServiceError::internal(e, "reading a cached page"))
    }
}

impl Call {
    /// A path parameter that is an integer id: not an integer is a 422 (as
    /// in a REST path); any integer goes on, so one that names nothing is
    /// the same 404 as over REST.
    pub(crate) fn id(&mut self, name: &str) -> i64 {
        match self.path.get(name).map(|v| parley_domain::validation::parse_integer_text(v)) {
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                self.errors.push(FieldError::wrong_type(loc(&["arguments", name]), "integer"));
                0
            }
            None => {
                self.errors.push(FieldError::missing(loc(&["arguments", name])));
                0
            }
        }
    }

    /// A path parameter that is text (`call_…`).
    pub(crate) fn text(&mut self, name: &str) -> String {
        match self.path.get(name) {
            Some(v) => v.clone(),
            None => {
                self.errors.push(FieldError::missing(loc(&["arguments", name])));
                String::new()
            }
        }
    }

    /// The body, parsed by the REST body parser (its locations moved from
    /// `body` to `arguments`).
    pub(crate) fn body<T>(&mut self, parse: impl FnOnce(Value) -> Parsed<T>) -> Option<T> {
        match parse(std::mem::take(&mut self.body)) {
            Ok(v) => Some(v),
            Err(errors) => {
                self.errors.extend(errors.into_iter().map(relocate));
                None
            }
        }
    }

    /// Ends reading: every fault at once, as a 422 would list them.
    pub(crate) fn finish(&mut self) -> ServiceResult<()> {
        let query = std::mem::replace(&mut self.query, QueryReader::new(Vec::new()));
        let mut errors = std::mem::take(&mut self.errors);
        if let Err(e) = query.finish() {
            errors.extend(e.into_iter().map(relocate));
        }
        if errors.is_empty() { Ok(()) } else { Err(ServiceError::Validation(errors)) }
    }
}

/// `["query" | "body", …]` → `["arguments", …]`.
fn relocate(mut e: FieldError) -> FieldError {
    if let Some(first) = e.loc.first_mut() {
        *first = LocPart::from("arguments");
    }
    e
}

/// A tool's operation: the caller (its scope already the workspace the
/// call acts on) and the arguments.
pub(crate) type Run = for<'a> fn(&'a Services, Principal, Call) -> BoxFuture<'a, ServiceResult<Value>>;

/// One tool.
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    /// The REST operation it stands for.
    pub method: &'static str,
    pub path: &'static str,
    /// Reaches beyond Parley (places a call, sends a message).
    pub open_world: bool,
    /// Undoes or ends something for good though it is a POST (hanging up).
    pub irreversible: bool,
    /// Changes nothing though it is a POST (a prompt preview).
    pub reads_only: bool,
    pub(crate) run: Run,
}

/// A tool with its schemas, as listed.
pub struct Listed {
    pub spec: &'static ToolSpec,
    pub tool: Tool,
    /// Changes nothing: offered to read-only (`mcp:read`) grants.
    pub read_only: bool,
    /// The same with the optional `workspace_id` argument, for credentials
    /// that may switch workspace.
    pub switching: Tool,
    path_params: Vec<String>,
    query_params: Vec<String>,
    /// The body's fields; `None` when the body is not a plain object (then
    /// it is passed whole as the `body` argument).
    body_fields: Option<Vec<String>>,
    has_body: bool,
    takes_idempotency_key: bool,
}

/// Every tool, with schemas resolved from `openapi`.
pub struct Catalog {
    pub tools: Vec<Listed>,
    lists: Arc<ListCache>,
}

impl Catalog {
    /// Panics if a tool names an operation the document lacks (a test
    /// starts the server, so that cannot ship).
    pub fn new(openapi: &Value, lists: Arc<ListCache>) -> Self {
        Catalog { tools: TOOLS.iter().map(|spec| Listed::new(spec, openapi)).collect(), lists }
    }

    pub fn find(&self, name: &str) -> Option<&Listed> {
        self.tools.iter().find(|t| t.spec.name == name)
    }
}

/// Parameters many tools share, with the meaning they have everywhere:
/// the server's instructions ([`crate::INSTRUCTIONS`]) explain them once
/// instead of every tool's schema (a tenth of the list's weight).
const SHARED_PARAMETERS: &[(&str, &str)] =
    &[("limit", "Items per page, 1–200."), ("offset", "0-based start position.")];

impl Listed {
    fn new(spec: &'static ToolSpec, doc: &Value) -> Self {
        let op = &doc["paths"][spec.path][spec.method];
        assert!(op.is_object(), "MCP tool {} names {} {}, which the API lacks", spec.name, spec.method, spec.path);
        let mut schemas = Resolver::new(doc);
        let mut properties = Map::new();
        let mut required = Vec::new();
        let (mut path_params, mut query_params, mut takes_idempotency_key) = (Vec::new(), Vec::new(), false);
        for p in op["parameters"].as_array().into_iter().flatten() {
            let name = p["name"].as_str().unwrap_or_default().to_owned();
            match p["in"].as_str() {
                Some("path") => path_params.push(name.clone()),
                Some("query") => query_params.push(name.clone()),
                Some("header") if name.eq_ignore_ascii_case("idempotency-key") => {
                    takes_idempotency_key = true;
                    // Explained once, in the server's instructions.
                    properties.insert("idempotency_key".into(), schemas.resolve(&p["schema"]));
                    continue;
                }
                _ => continue,
            }
            // The parameter's description says what it does here; its
            // schema's, what values it takes (the enum says that too).
            let mut schema = schemas.resolve(&p["schema"]);
            if let Some(d) = p["description"].as_str().map(brief)
                && !d.is_empty()
                && !SHARED_PARAMETERS.contains(&(name.as_str(), d.as_str()))
            {
                schema["description"] = json!(d);
            }
            if p["required"] == true {
                required.push(json!(name));
            }
            properties.insert(name, schema);
        }
        let body = &op["requestBody"]["content"]["application/json"]["schema"];
        let has_body = body.is_object();
        let mut body_fields = None;
        if has_body {
            let body = schemas.resolve(body);
            match flat_fields(&body) {
                Some((fields, needed)) => {
                    body_fields = Some(fields.keys().cloned().collect());
                    properties.extend(fields);
                    required.extend(needed);
                }
                None => {
                    properties.insert("body".into(), body);
                    required.push(json!("body"));
                }
            }
        }
        let mut input = json!({"type": "object", "properties": properties, "additionalProperties": false});
        if !required.is_empty() {
            input["required"] = json!(required);
        }
        if let Some(defs) = schemas.defs() {
            input["$defs"] = Value::Object(defs);
        }
        let read_only = spec.method == "get" || spec.reads_only;
        let annotations = ToolAnnotations::new()
            .read_only(read_only)
            .destructive(matches!(spec.method, "delete" | "patch" | "put") || spec.irreversible)
            .idempotent(read_only || matches!(spec.method, "delete" | "patch" | "put"))
            .open_world(spec.open_world);
        let description = describe(op);
        let mut with_workspace = input.clone();
        with_workspace["properties"]["workspace_id"] = workspace_id_schema();
        let build = |input: Value| {
            Tool::new(spec.name, description.clone(), Arc::new(object(input)))
                .with_title(spec.title)
                .with_annotations(annotations.clone())
        };
        let (tool, switching) = (build(input), build(with_workspace));
        Listed {
            spec,
            tool,
            switching,
            read_only,
            path_params,
            query_params,
            body_fields,
            has_body,
            takes_idempotency_key,
        }
    }

    /// Sorts `raw` arguments by where the operation takes them; refuses
    /// unknown ones and values of the wrong JSON type.
    fn read(&self, raw: JsonObject) -> ServiceResult<Call> {
        let raw_copy = raw.clone();
        let mut errors = Vec::new();
        let (mut path, mut pairs, mut body, mut key) = (BTreeMap::new(), Vec::new(), Map::new(), None);
        for (name, value) in raw {
            let at = loc(&["arguments", &name]);
            let scalar = match &value {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            };
            if self.path_params.contains(&name) || self.query_params.contains(&name) {
                match (scalar, &value) {
                    (_, Value::Null) => {}
                    (Some(s), _) if self.path_params.contains(&name) => {
                        path.insert(name, s);
                    }
                    (Some(s), _) => pairs.push((name, s)),
                    (None, _) => errors.push(FieldError::wrong_type(at, "string")),
                }
            } else if name == "idempotency_key" && self.takes_idempotency_key {
                match value.as_str().and_then(IdempotencyKey::parse) {
                    Some(k) => key = Some(k),
                    None => errors.push(FieldError::new(
                        at,
                        "value_error.idempotency_key",
                        "1–255 printable ASCII characters",
                    )),
                }
            } else if name == "body" && self.has_body && self.body_fields.is_none() {
                body = match value {
                    Value::Object(m) => m,
                    _ => {
                        errors.push(FieldError::wrong_type(at, "object"));
                        Map::new()
                    }
                };
            } else if self.body_fields.as_ref().is_some_and(|f| f.contains(&name)) {
                body.insert(name, value);
            } else {
                errors.push(FieldError::extra(at));
            }
        }
        if !errors.is_empty() {
            return Err(ServiceError::Validation(errors));
        }
        let body = Value::Object(body);
        // As the REST request would be fingerprinted: the same key and
        // body through either door is the same request.
        let idem = key.map(|key| {
            let mut concrete = self.spec.path.to_owned();
            for (name, value) in &path {
                concrete = concrete.replace(&format!("{{{name}}}"), value);
            }
            let print = fingerprint(&self.spec.method.to_uppercase(), &concrete, &canonical_json(&body));
            Idempotent { key, fingerprint: print }
        });
        let canonical = String::from_utf8_lossy(&canonical_json(&Value::Object(raw_copy))).into_owned();
        Ok(Call { path, query: QueryReader::new(pairs), body, idem, errors: Vec::new(), pages: None, canonical })
    }
}

/// A body's fields as flat arguments, and those always required: an
/// object's properties; for an `allOf`, its parts' fields together; for a
/// `oneOf`/`anyOf` (a handoff to a human or to an agent) the union of the
/// variants' fields (a field whose schema differs between them takes any
/// of its schemas) and only the fields every variant requires. The REST
/// parser still checks the exact shape. `None` for any other shape
/// (a schema that contains itself, say).
fn flat_fields(body: &Value) -> Option<(Map<String, Value>, Vec<Value>)> {
    if let Some(fields) = body.get("properties").and_then(Value::as_object) {
        return Some((fields.clone(), body["required"].as_array().cloned().unwrap_or_default()));
    }
    let mut fields = Map::new();
    if let Some(parts) = body.get("allOf").and_then(Value::as_array) {
        let mut required = Vec::new();
        for part in parts {
            let (more, needed) = flat_fields(part)?;
            // Every part applies: a field keeps the first (fullest) schema.
            for (name, schema) in more {
                fields.entry(name).or_insert(schema);
            }
            required.extend(needed.into_iter().filter(|f| !required.contains(f)).collect::<Vec<_>>());
        }
        return Some((fields, required));
    }
    let variants = body.get("oneOf").or_else(|| body.get("anyOf"))?.as_array()?;
    let mut required: Option<Vec<Value>> = None;
    for variant in variants {
        let (more, needed) = flat_fields(variant)?;
        merge_fields(&mut fields, more);
        required = Some(match required {
            None => needed,
            Some(r) => r.into_iter().filter(|f| needed.contains(f)).collect(),
        });
    }
    Some((fields, required.unwrap_or_default()))
}

/// Adds `more` to `fields`; a field already there with another schema
/// takes either (schemas that differ only in their `enum` as one `enum`).
fn merge_fields(fields: &mut Map<String, Value>, more: Map<String, Value>) {
    for (name, schema) in more {
        match fields.get_mut(&name) {
            None => {
                fields.insert(name, schema);
            }
            Some(seen) if *seen == schema => {}
            Some(seen) => {
                let mut any = seen.get("anyOf").and_then(Value::as_array).cloned().unwrap_or(vec![seen.clone()]);
                match any.iter().enumerate().find_map(|(i, s)| enum_union(s, &schema).map(|u| (i, u))) {
                    Some((i, union)) => any[i] = union,
                    None if !any.contains(&schema) => any.push(schema),
                    None => {}
                }
                *seen = if any.len() == 1 { any.remove(0) } else { json!({ "anyOf": any }) };
            }
        }
    }
}

/// `a` taking `b`'s values too, when they differ in nothing but their `enum`.
fn enum_union(a: &Value, b: &Value) -> Option<Value> {
    let (Some(x), Some(y)) = (a.get("enum")?.as_array(), b.get("enum")?.as_array()) else { return None };
    let (mut p, mut q) = (a.as_object()?.clone(), b.as_object()?.clone());
    p.remove("enum");
    q.remove("enum");
    if p != q {
        return None;
    }
    let mut values = x.clone();
    values.extend(y.iter().filter(|v| !x.contains(v)).cloned());
    let mut union = a.clone();
    union["enum"] = Value::Array(values);
    Some(union)
}

/// What a tool does, in the operation's first sentence (its summary).
fn describe(op: &Value) -> String {
    [op["summary"].as_str(), op["description"].as_str()]
        .into_iter()
        .flatten()
        .map(brief)
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// `workspace_id`, on every tool of a credential that may switch: what it
/// means is said once, by `list_workspaces`.
fn workspace_id_schema() -> Value {
    json!({"type": "integer", "minimum": 1})
}

/// The tool that lists the workspaces an unlocked credential may act on.
pub const LIST_WORKSPACES: &str = "list_workspaces";

pub fn list_workspaces_tool() -> Tool {
    let input = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let annotations = ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false);
    Tool::new(
        LIST_WORKSPACES,
        "The workspaces this credential may act on: the credential's own, and those of the user who created \
         the key. Any tool's `workspace_id` argument acts on one of them instead of the credential's own, in the \
         same mode (live or test).",
        Arc::new(object(input)),
    )
    .with_title("List workspaces")
    .with_annotations(annotations)
}

/// Runs the tool named `name` for `principal`, in the workspace its
/// `workspace_id` argument names (if it may); `None` for an unknown tool.
/// A refusal comes back as the API's error body with its HTTP status,
/// for a result with `isError`.
pub async fn call(
    catalog: &Catalog,
    name: &str,
    svc: &Services,
    principal: &Principal,
    mut arguments: JsonObject,
) -> Option<Result<Value, Value>> {
    if name == LIST_WORKSPACES {
        return Some(list_workspaces(svc, principal, arguments).await.map_err(|e| refusal(&e)));
    }
    let tool = catalog.find(name)?;
    let outcome = async {
        if !tool.read_only && !may_write(principal) {
            return Err(ServiceError::Forbidden(format!(
                "This token was granted mcp:read only; {name} changes data and needs mcp:write"
            )));
        }
        let wanted = match arguments.remove("workspace_id") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_i64().filter(|n| *n >= 1) {
                Some(n) => Some(n),
                None => {
                    let at = loc(&["arguments", "workspace_id"]);
                    return Err(ServiceError::Validation(vec![FieldError::wrong_type(at, "integer")]));
                }
            },
        };
        // In another workspace the caller has the role it has there.
        let acting = reach::principal_for(svc, principal, wanted).await?;
        let mut call = tool.read(arguments)?;
        if acting.scope == principal.scope {
            call.pages = Some((Arc::clone(&catalog.lists), principal.versions.clone()));
        }
        (tool.spec.run)(svc, acting, call).await
    };
    Some(outcome.await.map_err(|e| refusal(&e)))
}

/// Whether the credential may use tools that change data: API keys and
/// OAuth grants with `mcp:write`.
pub fn may_write(principal: &Principal) -> bool {
    match principal.credential {
        Credential::OAuth { write, .. } => write,
        Credential::ApiKey { .. } | Credential::User { .. } => true,
    }
}

async fn list_workspaces(svc: &Services, principal: &Principal, arguments: JsonObject) -> ServiceResult<Value> {
    if let Some(name) = arguments.keys().next() {
        return Err(ServiceError::Validation(vec![FieldError::extra(loc(&["arguments", name]))]));
    }
    if !reach::may_switch(principal) {
        return Err(ServiceError::Forbidden(format!(
            "This credential is locked to workspace {}: it has no other workspace",
            principal.scope.workspace_id
        )));
    }
    let workspaces = reach::workspaces(svc, principal).await?;
    Ok(json!({"current": principal.scope.workspace_id, "workspaces": to_value(workspaces)?}))
}

/// The API's error body for `e`, with its HTTP status.
fn refusal(e: &ServiceError) -> Value {
    let detail = match e {
        ServiceError::Validation(errors) => json!(errors),
        ServiceError::KeyInUse => json!("A call with this idempotency_key is still in progress; retry shortly"),
        ServiceError::Store(_) | ServiceError::Internal(_) => {
            tracing::error!(error = %e, "an MCP tool failed");
            json!("Internal server error")
        }
        // The others' words are their display.
        other => json!(other.to_string()),
    };
    json!({ "status": e.http_status(), "detail": detail })
}

pub(crate) fn to_value<T: Serialize>(v: T) -> ServiceResult<Value> {
    serde_json::to_value(v).map_err(|e| ServiceError::internal(e, "serialising a tool's result"))
}

/// A list page as the REST API answers it.
pub(crate) fn items<T: Serialize>((items, total): (Vec<T>, i64), page: Page) -> ServiceResult<Value> {
    Ok(json!({"items": to_value(items)?, "total": total, "limit": page.limit, "offset": page.offset}))
}

/// A stored answer (an idempotent write): its JSON body.
pub(crate) fn answered(a: Answered) -> ServiceResult<Value> {
    serde_json::from_str(&a.answer.body).map_err(|e| ServiceError::internal(e, "reading a stored answer"))
}

pub(crate) fn engines(svc: &Services) -> parley_services::agents::EngineNames {
    parley_services::agents::EngineNames::of(svc.config())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_fields_merge_with_their_enums_as_one() {
        let body = json!({"oneOf": [
            {"type": "object", "required": ["type", "name"], "properties": {
                "type": {"type": "string", "enum": ["api"]}, "name": {"type": "string"},
                "config": {"type": "object", "properties": {"url": {"type": "string"}}}}},
            {"type": "object", "required": ["type"], "properties": {
                "type": {"type": "string", "enum": ["sms"]},
                "config": {"type": "object", "properties": {"from": {"type": "string"}}}}},
        ]});
        let (fields, required) = flat_fields(&body).unwrap();
        assert_eq!(fields["type"], json!({"type": "string", "enum": ["api", "sms"]}));
        assert_eq!(fields["name"], json!({"type": "string"}));
        assert_eq!(fields["config"]["anyOf"].as_array().unwrap().len(), 2, "{fields:?}");
        assert_eq!(required, [json!("type")], "only what every variant requires");
    }
}
