//! Post-call analysis: after a call the agent's text engine (a local
//! server speaking OpenAI's chat-completions format) reads the transcript
//! and submits a summary, the facts of the agent's schema and a success
//! evaluation; what does not fit the schema is reported, not stored.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::calls::{ended, place, wait_for};
use crate::runtime::eventually;
use crate::support::*;
use crate::tools::{Say, frames};

/// An engine that answers call turns with text and analysis requests (the
/// ones offering `submit_analysis`) with `analysis`, or with an order id
/// of the wrong type once `invalid` is set; it keeps the requests.
struct Analyst {
    url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    invalid: Arc<AtomicBool>,
}

impl Analyst {
    async fn start() -> Analyst {
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let invalid = Arc::new(AtomicBool::new(false));
        let (seen, wrong) = (requests.clone(), invalid.clone());
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                let (seen, wrong) = (seen.clone(), wrong.clone());
                async move {
                    let analysing = body["tools"]
                        .as_array()
                        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "submit_analysis"));
                    seen.lock().unwrap().push(body);
                    let order_id = if wrong.load(Ordering::SeqCst) { json!(42) } else { json!("A-1") };
                    let say = if analysing {
                        let args = json!({"summary": "The caller asked about order A-1 and was told it ships tomorrow.",
                            "data": {"order_id": order_id, "callback": false},
                            "success": {"result": true, "reason": "The caller learned when the order ships."}});
                        Say::Calls(vec![("call_a", "submit_analysis", args.to_string())])
                    } else {
                        Say::Text("Your order ships tomorrow.")
                    };
                    let body = axum::body::Body::from(frames(&say).concat());
                    axum::response::Response::builder().header("content-type", "text/event-stream").body(body).unwrap()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Analyst { url, requests, invalid }
    }

    fn analysis_requests(&self) -> Vec<Value> {
        let all = self.requests.lock().unwrap();
        all.iter()
            .filter(|r| {
                r["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "submit_analysis"))
            })
            .cloned()
            .collect()
    }
}

both_backends! {
    async fn a_conversation_is_analysed_on_demand_with_its_agents_plan(backend) {
        use crate::conversations::inbound;
        use crate::messages::sending_channel;
        use crate::receiver::{Answer, Receiver};
        let engine = Analyst::start().await;
        let url = engine.url.clone();
        let app = TestApp::spawn_with(backend, move |s| {
            s.agents.debounce_ms = 100;
            s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test", "max_retries": 0}));
        }).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        rx.always(Answer::status(200));
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        // A conversation nobody's agent answers cannot be analysed (409).
        assert_eq!(inbound(&app, ch, &secret, json!({"from": "lia", "text": "Hello?", "external_id": "a-1"})).await.status, 201);
        let lone = app.get(&ws.live, "/api/v1/conversations").await.body["items"][0]["id"].as_i64().unwrap();
        assert_eq!(app.post(&ws.live, &format!("/api/v1/conversations/{lone}/analysis"), json!({})).await.status, 409);

        let schema = json!({"type": "object", "properties": {"order_id": {"type": "string"}, "callback": {"type": "boolean"}}});
        crate::runtime::catch_all_agent_with(&app, &ws.live, json!({"name": "Ada", "text_engine": "openai", "tools": [],
            "analysis": {"schema": schema, "success_criteria": "The customer learned when their order ships."}})).await;
        assert_eq!(inbound(&app, ch, &secret, json!({"from": "mo", "text": "Where is order A-1?", "external_id": "b-1"})).await.status, 201);
        let id = eventually("the agent's answer", || {
            let (app, key) = (&app, ws.live.clone());
            async move {
                let items = app.get(&key, "/api/v1/conversations?limit=10").await.body["items"].clone();
                let c = items.as_array().unwrap().iter().find(|c| c["channel_ref"] == "api:mo").cloned()?;
                let id = c["id"].as_i64().unwrap();
                let m = app.get(&key, &format!("/api/v1/conversations/{id}/messages")).await.body;
                (m["total"] == 2).then_some(id)
            }
        }).await;
        let path = format!("/api/v1/conversations/{id}/analysis");
        assert_eq!(app.get(&ws.live, &path).await.body, json!({"detail": format!("Analysis of conversation {id} not found")}));
        let r = app.post(&ws.live, &path, json!({})).await;
        assert_eq!((r.status, r.body["id"].as_i64()), (202, Some(id)), "{}", r.text);
        let a = eventually("the analysis", || {
            let (app, key, path) = (&app, ws.live.clone(), path.clone());
            async move {
                let r = app.get(&key, &path).await;
                (r.status == 200).then_some(r.body)
            }
        }).await;
        assert_eq!((a["status"].as_str(), a["data"].clone()), (Some("completed"), json!({"order_id": "A-1", "callback": false})), "{a}");
        let asked = engine.analysis_requests();
        let transcript = asked[0]["messages"][1]["content"].as_str().unwrap();
        assert!(transcript.starts_with("Customer: Where is order A-1?\nAgent: Your order ships tomorrow."), "{transcript}");
        let events = app.get(&ws.live, "/api/v1/events?type=conversation.analyzed").await.body;
        assert_eq!(events["items"][0]["data"]["conversation_id"], json!(id), "{events}");
        // Another workspace sees none of it.
        let other = app.workspace("Other").await;
        assert_eq!(app.get(&other.live, &path).await.status, 404);
        assert_eq!(app.post(&other.live, &path, json!({})).await.status, 404);
    }

    async fn a_call_is_analysed_into_the_agents_schema_and_an_invalid_extraction_is_reported(backend) {
        let engine = Analyst::start().await;
        let url = engine.url.clone();
        let app = TestApp::spawn_with(backend, move |s| {
            s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test", "max_retries": 0,
                "pricing": {"input_per_1k_cents": 100.0, "output_per_1k_cents": 100.0}}));
        }).await;
        let ws = app.workspace("Acme").await;
        let schema = json!({"type": "object", "properties": {"order_id": {"type": "string"}, "callback": {"type": "boolean"}},
            "required": ["order_id"], "additionalProperties": false});
        let agent = app.create_agent(&ws.test, json!({"name": "Ada", "text_engine": "openai",
            "analysis": {"schema": schema, "success_criteria": "The caller learned when their order ships."}})).await;
        assert_eq!(agent["analysis"]["summary"], true, "a summary unless turned off: {agent}");

        // A builtin agent's call at the same time (the calls take ~10 s each).
        let plain = app.create_agent(&ws.test, json!({"name": "Plain"})).await;
        let r = place(&app, &ws.test, json!({"agent_id": plain["id"], "to": "+14155550124"})).await;
        let plain_call = r.body["id"].as_str().unwrap().to_owned();
        let r = place(&app, &ws.test, json!({"agent_id": agent["id"], "to": "+14155550123"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        // Not before the call has ended.
        let early = app.post(&ws.test, &format!("/api/v1/calls/{id}/analysis"), json!({})).await;
        assert_eq!(early.status, 409, "{}", early.text);
        wait_for(&app, &ws.test, &id, ended).await;
        let call = eventually("the call's analysis", || {
            let (app, key, id) = (&app, ws.test.clone(), id.clone());
            async move {
                let call = app.get(&key, &format!("/api/v1/calls/{id}")).await.body;
                call["analysis"].is_object().then_some(call)
            }
        }).await;
        let a = &call["analysis"];
        assert_eq!(a["status"], "completed", "{a}");
        assert_eq!(a["summary"], "The caller asked about order A-1 and was told it ships tomorrow.");
        assert_eq!(a["data"], json!({"order_id": "A-1", "callback": false}));
        assert_eq!(a["data_errors"], json!([]));
        assert_eq!(a["success"], json!({"result": true, "reason": "The caller learned when the order ships."}));

        // What the engine was asked: the transcript, and the agent's schema as the tool's `data`.
        let asked = engine.analysis_requests();
        assert_eq!(asked.len(), 1);
        let tool = &asked[0]["tools"][0]["function"]["parameters"];
        assert_eq!(tool["properties"]["data"], schema);
        assert_eq!(tool["required"], json!(["data", "success", "summary"]));
        let transcript = asked[0]["messages"][1]["content"].as_str().unwrap();
        assert!(transcript.contains("Caller: Hi, I am calling about my order."), "{transcript}");
        assert!(transcript.contains("Agent: Your order ships tomorrow."), "{transcript}");
        assert!(asked[0]["messages"][0]["content"].as_str().unwrap().contains("The caller learned when their order ships."));

        // Billed as a run of its own.
        let run_id = a["run_id"].as_i64().unwrap();
        let run = app.get(&ws.test, &format!("/api/v1/agent-runs/{run_id}")).await.body;
        assert_eq!((run["trigger"].as_str(), run["status"].as_str(), run["call_id"].as_str()), (Some("analysis"), Some("completed"), Some(id.as_str())), "{run}");
        // 10 tokens in and 3 out at a dollar per 1,000: 1.3 cents, rounded up.
        assert_eq!((run["input_tokens"].as_i64(), run["cost_cents"].as_i64()), (Some(10), Some(2)), "{run}");
        let events = app.get(&ws.test, "/api/v1/events?type=call.analyzed").await.body;
        assert_eq!(events["items"].as_array().unwrap().len(), 1, "{events}");
        assert_eq!(events["items"][0]["data"]["analysis"]["summary"], a["summary"]);

        // On demand, with a model that breaks the schema: reported, nothing invented.
        engine.invalid.store(true, Ordering::SeqCst);
        let r = app.post(&ws.test, &format!("/api/v1/calls/{id}/analysis"), json!({})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let call = eventually("the second analysis", || {
            let (app, key, id) = (&app, ws.test.clone(), id.clone());
            async move {
                let call = app.get(&key, &format!("/api/v1/calls/{id}")).await.body;
                (call["analysis"]["run_id"] != json!(run_id)).then_some(call)
            }
        }).await;
        let a = &call["analysis"];
        assert_eq!((a["status"].as_str(), a["data"].clone()), (Some("completed"), Value::Null), "{a}");
        let errors = a["data_errors"].as_array().unwrap();
        assert!(errors.iter().any(|e| e.as_str().unwrap().starts_with("/order_id:")), "{a}");
        assert_eq!(a["success"]["result"], true, "the rest of the answer stands");

        // Another workspace's call is not found; a builtin agent's call says why it was not analysed.
        let other = app.workspace("Other").await;
        assert_eq!(app.post(&other.test, &format!("/api/v1/calls/{id}/analysis"), json!({})).await.status, 404);
        wait_for(&app, &ws.test, &plain_call, ended).await;
        assert_eq!(app.get(&ws.test, &format!("/api/v1/calls/{plain_call}")).await.body["analysis"], Value::Null, "builtin agents' calls are not analysed on their own");
        assert_eq!(app.post(&ws.test, &format!("/api/v1/calls/{plain_call}/analysis"), json!({})).await.status, 202);
        let refused = eventually("the refusal", || {
            let (app, key, id) = (&app, ws.test.clone(), plain_call.clone());
            async move {
                let call = app.get(&key, &format!("/api/v1/calls/{id}")).await.body;
                call["analysis"].is_object().then(|| call["analysis"].clone())
            }
        }).await;
        assert_eq!(refused["status"], "failed");
        assert!(refused["error"].as_str().unwrap().contains("not a model"), "{refused}");
    }
}
