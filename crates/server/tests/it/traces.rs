//! OpenTelemetry traces over OTLP/HTTP, received by a collector endpoint
//! in the test that decodes the protobuf with OpenTelemetry's own message
//! definitions (`opentelemetry-proto`): a span per request (continuing the
//! caller's `traceparent`), per job, per agent run with its model calls and
//! tool calls (GenAI semantic conventions), and per call turn with its
//! phases — carrying workspace and request ids, never the words.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;
use reqwest::Method;
use serde_json::{Value, json};

use crate::calls::{ended, place, wait_for};
use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::{Answer, Receiver};
use crate::runtime::{catch_all_agent_with, replies};
use crate::support::*;
use crate::tools::{Say, ScriptedEngine};

/// One received span, flattened.
#[derive(Debug, Clone)]
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    kind: i32,
    start_ns: u64,
    end_ns: u64,
    attributes: BTreeMap<String, Value>,
    resource: BTreeMap<String, Value>,
}

impl Span {
    fn attr(&self, key: &str) -> &Value {
        self.attributes.get(key).unwrap_or(&Value::Null)
    }

    fn ms(&self) -> i64 {
        ((self.end_ns - self.start_ns) / 1_000_000) as i64
    }
}

fn any(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Value {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => json!(s),
        Some(Any::IntValue(i)) => json!(i),
        Some(Any::BoolValue(b)) => json!(b),
        Some(Any::DoubleValue(d)) => json!(d),
        Some(Any::ArrayValue(a)) => Value::Array(a.values.iter().map(|v| any(Some(v))).collect()),
        other => json!(format!("{other:?}")),
    }
}

fn attributes(kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> BTreeMap<String, Value> {
    kvs.iter().map(|kv| (kv.key.clone(), any(kv.value.as_ref()))).collect()
}

/// An OTLP/HTTP traces endpoint (`POST /v1/traces`, protobuf).
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    /// Every request body as received, to search for what must not be there.
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Collector {
    async fn start() -> Collector {
        let (spans, raw): (Arc<Mutex<Vec<Span>>>, Arc<Mutex<Vec<u8>>>) = Default::default();
        let (keep, keep_raw) = (spans.clone(), raw.clone());
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (keep, keep_raw) = (keep.clone(), keep_raw.clone());
                async move {
                    assert_eq!(headers["content-type"], "application/x-protobuf");
                    assert_eq!(headers["x-collector-key"], "collector-secret", "configured headers are sent");
                    keep_raw.lock().unwrap().extend_from_slice(&body);
                    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP ExportTraceServiceRequest");
                    for rs in request.resource_spans {
                        let resource = attributes(rs.resource.as_ref().map(|r| &r.attributes[..]).unwrap_or_default());
                        for s in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                            keep.lock().unwrap().push(Span {
                                trace: hex(&s.trace_id),
                                id: hex(&s.span_id),
                                parent: hex(&s.parent_span_id),
                                name: s.name,
                                kind: s.kind,
                                start_ns: s.start_time_unix_nano,
                                end_ns: s.end_time_unix_nano,
                                attributes: attributes(&s.attributes),
                                resource: resource.clone(),
                            });
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        ExportTraceServiceResponse { partial_success: None }.encode_to_vec(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Collector { url, spans, raw }
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    fn named(&self, name: &str) -> Vec<Span> {
        self.spans().into_iter().filter(|s| s.name == name).collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn requests_jobs_agent_runs_and_call_turns_are_traced_over_otlp_without_their_words() {
    let collector = Collector::start().await;
    // The process's logging, as `parley serve` sets it up, sending traces.
    let mut settings = parley_server::Settings::default();
    settings.traces.endpoint = Some(collector.url.clone());
    settings.traces.headers.insert("x-collector-key".into(), "collector-secret".into());
    let logging = parley_server::init_logging(&settings).expect("traces configured");

    let stt = parley_speech::local_servers::whisper();
    let engine = ScriptedEngine::start(vec![
        Say::Calls(vec![("call_1", "book_table", json!({"day": "friday"}).to_string())]),
        Say::Text("Booked for Friday, confirmation T-42."),
    ])
    .await;
    let (engine_url, stt_port) = (engine.url.clone(), stt.port);
    let app = TestApp::spawn_with(Backend::Sqlite, move |s| {
        s.agents.debounce_ms = 100;
        s.text_engines.insert("openai".into(), json!({"base_url": engine_url, "model": "gpt-test", "max_retries": 0}));
        s.speech.stt.insert("whisper".into(), json!({"kind": "wyoming", "host": "127.0.0.1", "port": stt_port}));
        s.speech.default_stt = Some("whisper".into());
    })
    .await;
    let ws = app.workspace("Acme").await;

    // A request continuing the caller's trace.
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let r =
        app.send(Method::GET, "/api/v1/agents?limit=5", Some(&ws.live), None, &[("traceparent", &traceparent)]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let request_id = r.header("x-request-id").unwrap().to_owned();

    // An inbound message answered by an agent that calls a tool.
    let tool = Receiver::start().await;
    tool.always(Answer { body: json!({"confirmation": "T-42"}).to_string(), ..Answer::status(200) });
    let rx = Receiver::start().await;
    let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
    let agent = catch_all_agent_with(
        &app,
        &ws.live,
        json!({"name": "Ava", "text_engine": "openai",
        "tools": [{"type": "http", "name": "book_table", "description": "Books a table",
            "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]},
            "url": tool.url, "headers": {"X-Api-Key": "tool-header-secret"}}]}),
    )
    .await;
    let words = "Please book Friday, my card is 4242 4242";
    let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": words, "external_id": "m-1"})).await.body["conversation_id"]
        .as_i64()
        .unwrap();
    assert_eq!(replies(&app, &ws.live, c, std::time::Duration::ZERO).await.len(), 1);

    // A test-mode call through the speech loop: two timed turns.
    let voice_agent = app.create_agent(&ws.test, json!({"name": "Ada", "first_message": "Hello, this is Ada."})).await;
    let placed = place(&app, &ws.test, json!({"agent_id": voice_agent["id"], "to": "+14155550123"})).await;
    assert_eq!(placed.status, 201, "{}", placed.text);
    let call_id = placed.body["id"].as_str().unwrap().to_owned();
    wait_for(&app, &ws.test, &call_id, ended).await;
    let transcript = app.get(&ws.test, &format!("/api/v1/calls/{call_id}/transcript")).await.body;
    let timed: Vec<Value> =
        transcript["segments"].as_array().unwrap().iter().filter(|s| s["latency"].is_object()).cloned().collect();
    assert_eq!(timed.len(), 2, "{transcript}");

    let exporting = logging.clone();
    tokio::task::spawn_blocking(move || exporting.flush_traces()).await.unwrap();

    // The request: a server span in the caller's trace, named by its route.
    let request = collector
        .named("GET /api/v1/agents")
        .into_iter()
        .find(|s| s.attr("request_id") == &json!(request_id))
        .unwrap_or_else(|| panic!("no request span: {:#?}", collector.spans()));
    assert_eq!((request.trace.as_str(), request.parent.as_str()), (TRACE_ID, CALLER_SPAN));
    assert_eq!(request.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(request.attr("http.route"), &json!("/api/v1/agents"));
    assert_eq!(request.attr("http.request.method"), &json!("GET"));
    assert_eq!(request.attr("http.response.status_code"), &json!(200));
    assert_eq!(request.attr("workspace_id"), &json!(ws.id));
    assert_eq!(request.resource["service.name"], json!("parley"));

    // The agent's run: its job, the run, two model calls and the tool call, one trace.
    let run =
        collector.named("invoke_agent Ava").pop().unwrap_or_else(|| panic!("no run span: {:#?}", collector.spans()));
    assert_eq!(run.attr("gen_ai.operation.name"), &json!("invoke_agent"));
    assert_eq!(run.attr("gen_ai.agent.id"), &json!(agent["id"].as_i64().unwrap().to_string()));
    assert_eq!(run.attr("gen_ai.request.model"), &json!("gpt-test"));
    assert_eq!(run.attr("gen_ai.provider.name"), &json!("openai"));
    assert_eq!(
        (run.attr("gen_ai.usage.input_tokens"), run.attr("gen_ai.usage.output_tokens")),
        (&json!(20), &json!(6))
    );
    assert_eq!(run.attr("workspace_id"), &json!(ws.id));
    let job = collector.spans().into_iter().find(|s| s.id == run.parent).expect("the run's parent span");
    assert_eq!(job.name, "job agent.run");
    assert_eq!((job.attr("job.kind"), job.attr("job.outcome")), (&json!("agent.run"), &json!("done")));
    assert_eq!(job.attr("workspace_id"), &json!(ws.id));
    let chats: Vec<Span> = collector.named("chat gpt-test").into_iter().filter(|s| s.parent == run.id).collect();
    assert_eq!(chats.len(), 2, "{chats:#?}");
    for chat in &chats {
        assert_eq!(chat.kind, 3, "SPAN_KIND_CLIENT");
        assert_eq!(chat.trace, run.trace);
        assert_eq!(chat.attr("gen_ai.operation.name"), &json!("chat"));
        assert_eq!(
            (chat.attr("gen_ai.usage.input_tokens"), chat.attr("gen_ai.usage.output_tokens")),
            (&json!(10), &json!(3))
        );
    }
    let tool_span = collector.named("execute_tool book_table").pop().expect("a tool span");
    assert_eq!(tool_span.parent, run.id);
    assert_eq!(tool_span.attr("gen_ai.operation.name"), &json!("execute_tool"));
    assert_eq!(tool_span.attr("gen_ai.tool.call.id"), &json!("call_1"));
    assert_eq!(tool_span.attr("gen_ai.tool.type"), &json!("extension"), "an HTTP tool runs on the agent's side");
    assert!(
        chats[0].end_ns <= tool_span.start_ns && tool_span.end_ns <= chats[1].start_ns,
        "model, tool, model in order"
    );

    // The call's turns: children of the call's span, their phases timed as the transcript says.
    let call =
        collector.named("call").into_iter().find(|s| s.attr("parley.call.id") == &json!(call_id)).expect("a call span");
    assert_eq!(call.attr("workspace_id"), &json!(ws.id));
    let turns: Vec<Span> = collector.named("call.turn").into_iter().filter(|s| s.parent == call.id).collect();
    assert_eq!(turns.len(), 2, "{:#?}", collector.spans());
    for (turn, segment) in turns.iter().zip(&timed) {
        let latency = &segment["latency"];
        assert_eq!(turn.ms(), latency["voice_to_voice_ms"].as_i64().unwrap(), "{turn:?} {latency}");
        assert_eq!(turn.attr("parley.call.id"), &json!(call_id));
        let phase = |name: &str| {
            collector
                .spans()
                .into_iter()
                .find(|s| s.parent == turn.id && s.name == name)
                .unwrap_or_else(|| panic!("no {name}"))
        };
        for (name, field) in [
            ("end_of_turn", "end_of_turn_ms"),
            ("stt", "stt_ms"),
            ("llm.first_token", "llm_first_token_ms"),
            ("tts.first_audio", "tts_first_audio_ms"),
        ] {
            assert_eq!(phase(name).ms(), latency[field].as_i64().unwrap(), "{name}: {latency}");
        }
        assert_eq!(phase("end_of_turn").start_ns, turn.start_ns);
    }
    // Runs during the call are in the call's trace too.
    assert!(collector.named("invoke_agent Ada").iter().any(|s| s.trace == call.trace));

    // Never the words, the reply, a tool's header, or the keys.
    let raw = String::from_utf8_lossy(&collector.raw.lock().unwrap()).into_owned();
    for secret in [words, "4242", "Booked for Friday", "tool-header-secret", &ws.live, &ws.test, "Hello, this is Ada"] {
        assert!(!raw.contains(secret), "{secret:?} reached the collector");
    }
    for line in parley_voice::simulated::CALLER_LINES {
        assert!(!raw.contains(line), "the caller's words reached the collector");
    }
}

#[test]
fn trace_settings_that_cannot_work_are_refused_at_start_naming_the_setting() {
    for (toml, says) in [
        ("[traces]\nendpoint = \"127.0.0.1:4318\"\n", "traces.endpoint"),
        (
            "[traces]\nendpoint = \"grpc://127.0.0.1:4317\"\n",
            "traces.endpoint: use the collector's http:// or https:// address",
        ),
        ("[traces]\nendpoint = \"http://127.0.0.1:4318\"\nsample_ratio = 1.5\n", "traces.sample_ratio"),
        ("[traces]\nendpoint = \"http://127.0.0.1:4318\"\nservice_name = \" \"\n", "traces.service_name"),
        (
            "[traces]\nendpoint = \"http://127.0.0.1:4318\"\n[traces.headers]\n\"x key\" = \"v\"\n",
            "traces.headers: `x key` is not a header name",
        ),
        (
            "[traces]\nendpoint = \"http://127.0.0.1:4318\"\n[traces.headers]\nx-key = \"line\\nbreak\"\n",
            "traces.headers.x-key: the value has characters",
        ),
    ] {
        let err = refused_configuration(toml);
        assert!(err.contains(says), "{toml}: {err}");
    }
    // Headers (a collector's key) are never in the settings' debug form.
    let mut settings = parley_server::Settings::default();
    settings.traces.headers.insert("authorization".into(), "Bearer collector-key".into());
    assert!(!format!("{settings:?}").contains("collector-key"));
}
