//! Agents' tools end to end: a local chat-completions server (OpenAI's
//! streamed wire format, tool-call deltas split across chunks) scripts the
//! model's calls; the tests assert on what Parley sends the model and the
//! tools, and on what the tools did.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::{Answer, Receiver};
use crate::runtime::{catch_all_agent_with, eventually, replies};
use crate::support::*;

/// One scripted answer: text, or tool calls `(id, name, arguments JSON)`.
#[derive(Clone)]
pub(crate) enum Say {
    Text(&'static str),
    Calls(Vec<(&'static str, &'static str, String)>),
}

/// A chat-completions server answering request `n` with `script[n]` (the
/// last one after that), streamed; it keeps every request body.
pub(crate) struct ScriptedEngine {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl ScriptedEngine {
    pub(crate) async fn start(script: Vec<Say>) -> ScriptedEngine {
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let seen = requests.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                let (seen, script) = (seen.clone(), script.clone());
                async move {
                    let n = {
                        let mut all = seen.lock().unwrap();
                        all.push(body);
                        all.len() - 1
                    };
                    let say = script.get(n).or(script.last()).cloned().unwrap();
                    let body = axum::body::Body::from(frames(&say).concat());
                    axum::response::Response::builder().header("content-type", "text/event-stream").body(body).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        ScriptedEngine { url, requests }
    }

    pub(crate) fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

/// The SSE frames of one answer. Tool calls come as OpenAI streams them:
/// the id and name first, then the arguments in two fragments.
pub(crate) fn frames(say: &Say) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    match say {
        Say::Text(text) => out.push(chunk(json!({"content": text}), json!("stop"))),
        Say::Calls(calls) => {
            for (i, (id, name, args)) in calls.iter().enumerate() {
                let (head, tail) = args.split_at(args.len() / 2);
                out.push(chunk(
                    json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                out.push(chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": head}}]}), Value::Null));
                out.push(chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": tail}}]}), Value::Null));
            }
            out.push(chunk(json!({}), json!("tool_calls")));
        }
    }
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}});
    out.push(format!("data: {usage}\n\n"));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

/// An app whose `openai` engine is `engine`.
async fn app_with(backend: Backend, engine: &ScriptedEngine) -> TestApp {
    let url = engine.url.clone();
    TestApp::spawn_with(backend, move |s| {
        s.agents.debounce_ms = 100;
        s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test", "max_retries": 0}));
    })
    .await
}

fn book_table(url: &str) -> Value {
    json!({"type": "http", "name": "book_table", "description": "Books a table",
        "parameters": {"type": "object", "properties": {"day": {"type": "string", "enum": ["friday", "saturday"]}},
            "required": ["day"], "additionalProperties": false},
        "url": url, "headers": {"X-Api-Key": "k-123"}})
}

/// The messages of a request the engine received, by role.
fn by_role<'a>(request: &'a Value, role: &str) -> Vec<&'a Value> {
    request["messages"].as_array().unwrap().iter().filter(|m| m["role"] == role).collect()
}

both_backends! {
    async fn a_custom_http_tool_is_called_signed_and_its_result_reaches_the_model(backend) {
        let engine = ScriptedEngine::start(vec![
            Say::Calls(vec![("call_1", "book_table", json!({"day": "friday"}).to_string())]),
            Say::Text("Booked for Friday, confirmation T-42."),
            Say::Calls(vec![("call_2", "book_table", json!({"day": "saturday"}).to_string())]),
            Say::Text("Booked for Saturday."),
        ]).await;
        let app = app_with(backend, &engine).await;
        let ws = app.workspace("Acme").await;
        let tool = Receiver::start().await;
        tool.always(Answer { body: json!({"confirmation": "T-42"}).to_string(), ..Answer::status(200) });
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;

        let agent = catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "text_engine": "openai",
            "tools": [book_table(&tool.url)]})).await;
        let tool_secret = agent["tool_secret"].as_str().unwrap().to_owned();
        assert!(tool_secret.starts_with("whsec_"), "{agent}");
        assert_eq!(agent["tools"][0]["header_names"], json!(["X-Api-Key"]));
        assert!(!agent.to_string().contains("k-123"), "header values are write-only: {agent}");
        let shown = app.get(&ws.live, &format!("/api/v1/agents/{}", agent["id"])).await.body;
        assert!(shown.get("tool_secret").is_none() && !shown.to_string().contains("k-123"), "{shown}");

        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "A table on Friday please", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let answered = replies(&app, &ws.live, c, Duration::from_millis(200)).await;
        assert_eq!(answered.len(), 1);
        assert_eq!(answered[0]["text"], "Booked for Friday, confirmation T-42.");

        // The tool got the arguments, signed by the agent's secret, with its header.
        let calls = tool.received();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].header("x-api-key"), "k-123");
        crate::webhooks::verify_with_python(&calls[0], &tool_secret);
        let body = calls[0].json();
        assert_eq!((body["tool"].clone(), body["arguments"].clone()), (json!("book_table"), json!({"day": "friday"})));
        assert_eq!((body["agent_id"].clone(), body["conversation_id"].clone()), (agent["id"].clone(), json!(c)));

        // What Parley asked the model: the tool's schema, then its result.
        let requests = engine.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["model"], "gpt-test");
        assert_eq!(requests[0]["stream"], true);
        let tools = requests[0]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 1, "only the agent's tools are offered: {tools:?}");
        assert_eq!(tools[0]["type"], "function");
        assert_eq!(tools[0]["function"]["name"], "book_table");
        assert_eq!(tools[0]["function"]["parameters"]["required"], json!(["day"]));
        assert_eq!(by_role(&requests[0], "user").last().unwrap()["content"], "A table on Friday please");
        let assistant = by_role(&requests[1], "assistant");
        let call = &assistant.last().unwrap()["tool_calls"][0];
        assert_eq!((call["id"].clone(), call["function"]["name"].clone()), (json!("call_1"), json!("book_table")));
        assert_eq!(serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(), json!({"day": "friday"}));
        let result = by_role(&requests[1], "tool")[0];
        assert_eq!(result["tool_call_id"], "call_1");
        assert_eq!(serde_json::from_str::<Value>(result["content"].as_str().unwrap()).unwrap(), json!({"confirmation": "T-42"}));

        // The run shows the call, its arguments and result, and the summed usage.
        let run = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={c}")).await.body["items"][0].clone();
        assert_eq!(run["tool_calls"][0]["name"], "book_table");
        assert_eq!(run["tool_calls"][0]["arguments"], json!({"day": "friday"}));
        assert_eq!(run["tool_calls"][0]["result"], json!({"confirmation": "T-42"}));
        assert_eq!((run["input_tokens"].clone(), run["output_tokens"].clone()), (json!(20), json!(6)));

        // An editor sends the tools back as it read them (no header values):
        // the tool keeps its headers. `headers: {}` removes them.
        let mut edited = shown["tools"][0].clone();
        edited["description"] = json!("Books a table for the evening");
        edited.as_object_mut().unwrap().remove("header_names");
        let path = format!("/api/v1/agents/{}", agent["id"]);
        let r = app.patch(&ws.live, &path, json!({"tools": [edited.clone()]})).await;
        assert_eq!((r.status, r.body["tools"][0]["header_names"].clone()), (200, json!(["X-Api-Key"])), "{}", r.text);
        let tried = app.post(&ws.live, &format!("{path}/chat"), json!({"messages": [{"role": "user", "content": "Saturday?"}]})).await;
        assert_eq!((tried.status, tried.body["message"].clone()), (200, json!("Booked for Saturday.")), "{}", tried.text);
        let calls = tool.received();
        assert_eq!((calls.len(), calls[1].header("x-api-key")), (2, "k-123"));
        edited["headers"] = json!({});
        let r = app.patch(&ws.live, &path, json!({"tools": [edited]})).await;
        assert_eq!((r.status, r.body["tools"][0]["header_names"].clone()), (200, json!([])), "{}", r.text);
    }

    async fn invalid_arguments_and_slow_tools_are_refused_to_the_model_not_the_contact(backend) {
        let engine = ScriptedEngine::start(vec![
            Say::Calls(vec![("call_1", "book_table", json!({"day": "sunday"}).to_string())]),
            Say::Calls(vec![("call_2", "slow", json!({}).to_string())]),
            Say::Text("Sorry, booking is down right now."),
        ]).await;
        let app = app_with(backend, &engine).await;
        let ws = app.workspace("Acme").await;
        let tool = Receiver::start().await;
        tool.always(Answer { delay: Duration::from_secs(3), ..Answer::status(200) });
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let slow = json!({"type": "http", "name": "slow", "description": "Slow", "parameters": {"type": "object"},
            "url": tool.url, "timeout_ms": 300});
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "text_engine": "openai",
            "tools": [book_table(&tool.url), slow]})).await;
        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Sunday?", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let answered = replies(&app, &ws.live, c, Duration::from_millis(200)).await;
        assert_eq!(answered[0]["text"], "Sorry, booking is down right now.");

        let run = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={c}")).await.body["items"][0].clone();
        let calls = run["tool_calls"].as_array().unwrap();
        assert_eq!(calls.len(), 2, "{run}");
        let invalid = calls[0]["error"].as_str().unwrap();
        assert!(invalid.starts_with("invalid arguments") && invalid.contains("/day"), "{invalid}");
        assert!(calls[1]["error"].as_str().unwrap().contains("timed out"), "{}", calls[1]);
        // Invalid arguments never reached the tool; the slow tool was called once.
        assert_eq!(tool.received().len(), 1);
        assert_eq!(tool.received()[0].json()["tool"], "slow");
        // The model read both refusals as the tools' results.
        let requests = engine.requests();
        let first = by_role(&requests[1], "tool")[0]["content"].as_str().unwrap().to_owned();
        assert!(first.contains("invalid arguments"), "{first}");
        let second = by_role(&requests[2], "tool")[1]["content"].as_str().unwrap().to_owned();
        assert!(second.contains("timed out"), "{second}");
    }

    async fn builtin_tools_read_and_change_only_the_conversations_contact(backend) {
        let engine = ScriptedEngine::start(vec![
            Say::Calls(vec![
                ("c1", "lookup_contact", "{}".into()),
                ("c2", "update_contact", json!({"display_name": "Ana Silva"}).to_string()),
            ]),
            Say::Calls(vec![("c3", "search", json!({"query": "invoice"}).to_string())]),
            Say::Calls(vec![("c4", "send_message", json!({"channel": "api", "text": "Your invoice is on its way."}).to_string())]),
            Say::Calls(vec![("c5", "end_conversation", json!({"reason": "resolved"}).to_string())]),
            Say::Text("Glad I could help. Goodbye!"),
        ]).await;
        let app = app_with(backend, &engine).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        // Another contact's message mentions an invoice too: search must not find it.
        inbound(&app, ch, &secret, json!({"from": "user-2", "text": "My invoice is wrong", "external_id": "o-1"})).await;
        let tools: Vec<Value> = ["lookup_contact", "update_contact", "search", "send_message", "end_conversation"]
            .iter().map(|n| json!({"type": "builtin", "name": n})).collect();
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "text_engine": "openai", "tools": tools})).await;
        let first = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Where is my invoice?", "external_id": "m-1", "contact": {"display_name": "Ana"}})).await;
        let c = first.body["conversation_id"].as_i64().unwrap();

        let closed = eventually("the conversation was never closed", || async {
            let conv = app.get(&ws.live, &format!("/api/v1/conversations/{c}")).await.body;
            (conv["status"] == "closed").then_some(conv)
        }).await;
        let texts: Vec<Value> = replies(&app, &ws.live, c, Duration::from_millis(200)).await.iter().map(|m| m["text"].clone()).collect();
        assert_eq!(texts, vec![json!("Your invoice is on its way."), json!("Glad I could help. Goodbye!")]);
        let contact = app.get(&ws.live, &format!("/api/v1/contacts/{}", closed["contact_id"])).await.body;
        assert_eq!(contact["display_name"], "Ana Silva");

        let run = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={c}")).await.body["items"][0].clone();
        let calls = run["tool_calls"].as_array().unwrap();
        let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["lookup_contact", "update_contact", "search", "send_message", "end_conversation"]);
        assert!(calls.iter().all(|c| c["error"].is_null()), "{run}");
        assert_eq!((calls[0]["result"]["display_name"].clone(), calls[0]["result"]["id"].clone()), (json!("Ana"), closed["contact_id"].clone()));
        let hits = calls[2]["result"]["results"].as_array().unwrap();
        assert!(!hits.is_empty() && hits.iter().all(|h| h["conversation_id"] == json!(c)), "only this contact's data: {hits:?}");
        // Offered: the agent's five tools, none of the others.
        let offered: Vec<String> = engine.requests()[0]["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect();
        assert_eq!(offered, ["lookup_contact", "update_contact", "search", "send_message", "end_conversation"]);
        assert_eq!(engine.requests().len(), 5);
        // After end_conversation the model may only say goodbye: no tools offered.
        assert!(engine.requests()[4].get("tools").is_none_or(Value::is_null), "{}", engine.requests()[4]);
    }

    async fn the_builtin_engine_asks_for_a_person_through_its_handoff_tool(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 100).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        // The default tools: handoff_to_human only.
        let agent = catch_all_agent_with(&app, &ws.live, json!({"name": "Ava"})).await;
        assert_eq!(agent["tools"], json!([{"type": "builtin", "name": "handoff_to_human"}]));
        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Can I pay by card?", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let handoff = eventually("no handoff", || async {
            let h = app.get(&ws.live, &format!("/api/v1/handoffs?conversation_id={c}")).await.body;
            (h["total"] == 1).then(|| h["items"][0].clone())
        }).await;
        assert_eq!(handoff["reason"], "The agent found no answer in its knowledge");
        assert_eq!(handoff["requested_by"], json!({"type": "agent", "id": agent["id"]}));
        let answered = replies(&app, &ws.live, c, Duration::from_millis(200)).await;
        assert_eq!(answered.len(), 1);
        assert_eq!(answered[0]["text"], parley_engines::builtin::NO_ANSWER);
        // The agent stops answering.
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hello?", "external_id": "m-2"})).await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(replies(&app, &ws.live, c, Duration::ZERO).await.len(), 1);
    }
}

both_backends! {
    async fn a_note_reaches_the_agent_only_when_shared_with_it(backend) {
        let engine = ScriptedEngine::start(vec![Say::Text("Hello! How can I help?"), Say::Text("Here is 10% off: SAVE10.")]).await;
        let app = app_with(backend, &engine).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "text_engine": "openai", "system_prompt": "You are Ava."})).await;
        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "n-1"})).await.body["conversation_id"].as_i64().unwrap();
        replies(&app, &ws.live, c, Duration::from_millis(100)).await;

        // One note for the team only, one shared with the agent.
        let private = app.post(&ws.live, &format!("/api/v1/conversations/{c}/notes"), json!({"text": "He was rude last time."})).await;
        assert_eq!((private.status, private.body["for_agent"].clone()), (201, json!(false)), "{}", private.text);
        let shared = app.post(&ws.live, &format!("/api/v1/conversations/{c}/notes"), json!({"text": "Offer code SAVE10 if he asks for a discount.", "for_agent": true})).await;
        assert_eq!((shared.status, shared.body["for_agent"].clone()), (201, json!(true)), "{}", shared.text);
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{c}/notes"), json!({"text": "x", "for_agent": "yes"})).await;
        assert_eq!((r.status, r.faults()), (422, vec![(r#"["body","for_agent"]"#.to_owned(), "type_error.bool".to_owned())]), "{}", r.text);

        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Any discount?", "external_id": "n-2"})).await;
        eventually("the agent answered again", || async { (engine.requests().len() >= 2).then_some(()) }).await;
        let requests = engine.requests();
        let system = |n: usize| by_role(&requests[n], "system").iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect::<String>();
        assert!(!system(0).contains("SAVE10"), "a note reached the agent before it was written: {}", system(0));
        assert!(system(1).contains("Notes from your team") && system(1).contains("Offer code SAVE10"), "the shared note did not reach the agent: {}", system(1));
        for request in &requests {
            assert!(!request.to_string().contains("rude last time"), "a private note reached the agent: {request}");
        }
        // Neither is ever a message on the channel.
        let sent: Vec<String> = rx.received().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
        assert!(sent.iter().all(|b| !b.contains("SAVE10 if he asks") && !b.contains("rude")), "{sent:?}");
    }
}

both_backends! {
async fn http_tools_on_private_addresses_are_refused_unless_allowed(backend) {
    let app = TestApp::spawn_with(backend, |s| {
        s.webhooks.allow_private_targets = false;
        s.agents.debounce_ms = 100;
    })
    .await;
    let ws = app.workspace("Acme").await;
    let r = app
        .post_idem(
            &ws.live,
            "/api/v1/agents",
            &uuid(),
            json!({"name": "Ava", "tools": [book_table("http://127.0.0.1:9/book")]}),
        )
        .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.body["detail"][0]["loc"], json!(["body", "tools", 0, "url"]));
    assert_eq!(r.body["detail"][0]["type"], "value_error.url.private");
    // Names are resolved on save too (issue 31): localhost, and any name
    // /etc/hosts maps to a private address; every fault reported at once.
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let local_name = hosts
        .lines()
        .filter_map(|l| l.split('#').next())
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let ip: std::net::IpAddr = words.next()?.parse().ok()?;
            ip.is_loopback().then(|| words.find(|w| *w != "localhost").map(str::to_owned)).flatten()
        })
        .next();
    let mut tools = vec![book_table("http://localhost:9/book")];
    if let Some(name) = &local_name {
        let mut named = book_table(&format!("http://{name}:9/book"));
        named["name"] = json!("book_elsewhere");
        tools.push(named);
    }
    let r = app.post_idem(&ws.live, "/api/v1/agents", &uuid(), json!({"name": "Ava", "tools": tools})).await;
    assert_eq!(r.status, 422, "{}", r.text);
    let faults: Vec<(Value, Value)> =
        r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
    let expected: Vec<(Value, Value)> = (0..tools.len())
        .map(|i| (json!(["body", "tools", i, "url"]), json!("value_error.url.private")))
        .collect();
    assert_eq!(faults, expected, "{} ({local_name:?})", r.text);
    assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0);

    // A name that resolved to a public address when saved and to a private
    // one when called (the agent's tool is rewritten in the database, as a
    // DNS change would) is refused when called, without reaching it.
    let tool = Receiver::start().await;
    let port = tool.url.rsplit(':').next().unwrap().split('/').next().unwrap().to_owned();
    let engine = ScriptedEngine::start(vec![
        Say::Calls(vec![("call_1", "book_table", json!({"day": "friday"}).to_string())]),
        Say::Text("I could not book it."),
    ])
    .await;
    let url = engine.url.clone();
    let app = TestApp::spawn_with(backend, move |s| {
        s.webhooks.allow_private_targets = false;
        s.agents.debounce_ms = 100;
        s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test"}));
    })
    .await;
    let ws = app.workspace("Acme").await;
    let body = json!({"name": "Ava", "text_engine": "openai", "tools": [book_table("https://example.com/book")]});
    let agent = app.create_agent(&ws.live, body).await;
    let mut tx = app.db.begin().await.unwrap();
    let moved = format!("http://localhost:{port}/book");
    match parley_store::AsHandle::handle(&mut tx) {
        parley_store::Handle::Sqlite(c) => {
            let rewrite = "UPDATE agents SET tools = replace(tools, 'https://example.com/book', $1)";
            sqlx::query(rewrite).bind(&moved).execute(c).await.unwrap();
        }
        parley_store::Handle::Postgres(c) => {
            let rewrite = "UPDATE agents SET tools = replace(tools::text, 'https://example.com/book', $1)::jsonb";
            sqlx::query(rewrite).bind(&moved).execute(c).await.unwrap();
        }
    };
    tx.commit().await.unwrap();
    // Asked in the playground: the tool runs there too.
    let r = app
        .post(
            &ws.live,
            &format!("/api/v1/agents/{}/chat", agent["id"]),
            json!({"messages": [{"role": "user", "content": "Friday"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body["message"], "I could not book it.");
    let error = r.body["tool_calls"][0]["error"].as_str().unwrap();
    assert!(error.contains("no public address"), "{error}");
    assert!(tool.received().is_empty(), "the private address was never reached");
}
}

#[tokio::test]
async fn tool_definitions_are_validated_where_they_are_written() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let ws = app.workspace("Acme").await;
    let bad = json!({"name": "Ava", "tools": [
        {"type": "builtin", "name": "teleport"},
        {"type": "http", "name": "search", "description": "x", "parameters": {"type": "object", "properties": {"a": {"type": 7}}}, "url": "ftp://x"},
        {"type": "http", "name": "ok_tool", "description": "x", "parameters": {"type": "object"}, "url": "https://example.com", "headers": {"Webhook-Signature": "x"}},
        {"type": "builtin", "name": "search"},
        {"type": "builtin", "name": "search"},
    ]});
    let r = app.post_idem(&ws.live, "/api/v1/agents", &uuid(), bad).await;
    assert_eq!(r.status, 422, "{}", r.text);
    let locs: Vec<String> = r.body["detail"].as_array().unwrap().iter().map(|e| e["loc"].to_string()).collect();
    for expected in [
        r#"["body","tools",0,"name"]"#,
        r#"["body","tools",1,"name"]"#,
        r#"["body","tools",1,"parameters"]"#,
        r#"["body","tools",1,"url"]"#,
        r#"["body","tools",2,"headers","Webhook-Signature"]"#,
    ] {
        assert!(locs.iter().any(|l| l == expected), "{expected} in {locs:?}");
    }
    let r = app.post_idem(&ws.live, "/api/v1/agents", &uuid(), json!({"name": "Ava", "tools": [{"type": "builtin", "name": "search"}, {"type": "builtin", "name": "search"}]})).await;
    assert_eq!(r.body["detail"][0]["loc"], json!(["body", "tools", 1, "name"]), "{}", r.text);
    assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0, "nothing was written");
}
