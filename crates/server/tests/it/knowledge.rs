//! Knowledge collections end to end: documents as JSON, HTML and PDF
//! uploads processed into passages by a job, ranked by BM25 on both
//! backends, answered from by the builtin engine and given to models; and
//! the playground.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::Receiver;
use crate::runtime::{catch_all_agent_with, eventually, replies};
use crate::support::*;
use crate::tools::{Say, ScriptedEngine};

const HOURS: &str = "# Opening hours\n\nWe open at 9am and close at 6pm, Monday to Friday. \
    On Saturdays we open at 10am.\n\n# Returns\n\nYou can return any item within 30 days for a full refund, \
    with the receipt.";

const SHIPPING_HTML: &str = "<html><head><title>Shipping</title><script>var tracking = 1;</script></head>\
    <body><h1>Shipping</h1><p>Parcels ship <b>worldwide</b> within two working days.</p>\
    <p>Express delivery costs 15 euros.</p></body></html>";

/// A one-page PDF whose text is `line`, built with lopdf.
fn pdf(line: &str) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{Document, Object, Stream, dictionary};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {"Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    "Encoding" => "WinAnsiEncoding"});
    let resources_id = doc.add_object(dictionary! {"Font" => dictionary! {"F1" => font_id}});
    let content = Content {
        operations: vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 12.into()]),
            Operation::new("Td", vec![72.into(), 720.into()]),
            Operation::new("Tj", vec![Object::string_literal(line)]),
            Operation::new("ET", vec![]),
        ],
    };
    let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap()));
    let page_id = doc.add_object(dictionary! {"Type" => "Page", "Parent" => pages_id, "Contents" => content_id});
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {"Type" => "Pages", "Kids" => vec![page_id.into()], "Count" => 1,
        "Resources" => resources_id, "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()]}),
    );
    let catalog_id = doc.add_object(dictionary! {"Type" => "Catalog", "Pages" => pages_id});
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// Uploads `bytes` as the multipart `file`.
async fn upload(app: &TestApp, key: &str, collection: i64, name: &str, kind: &str, bytes: Vec<u8>) -> Resp {
    let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()).mime_str(kind).unwrap();
    let form = reqwest::multipart::Form::new().part("file", part);
    let r = app
        .client
        .post(app.url(&format!("/api/v1/knowledge-collections/{collection}/documents")))
        .header("X-API-Key", key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

/// The document once it is no longer processing.
async fn processed(app: &TestApp, key: &str, collection: i64, id: &Value) -> Value {
    eventually("the document was never processed", || async {
        let d = app.get(key, &format!("/api/v1/knowledge-collections/{collection}/documents/{id}")).await.body;
        (d["status"] != "processing").then_some(d)
    })
    .await
}

async fn collection(app: &TestApp, key: &str, name: &str) -> i64 {
    let r = app.post(key, "/api/v1/knowledge-collections", json!({"name": name})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_i64().unwrap()
}

async fn add_text(app: &TestApp, key: &str, collection: i64, title: &str, text: &str) -> Value {
    let r = app
        .post(
            key,
            &format!("/api/v1/knowledge-collections/{collection}/documents"),
            json!({"title": title, "text": text, "content_type": "text/markdown"}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    assert_eq!(r.body["status"], "processing");
    processed(app, key, collection, &r.body["id"]).await
}

both_backends! {
    async fn documents_become_ranked_passages_in_every_format(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let k = collection(&app, &ws.live, "Help center").await;

        let hours = add_text(&app, &ws.live, k, "Store policies", HOURS).await;
        assert_eq!((hours["status"].clone(), hours["passage_count"].clone()), (json!("ready"), json!(2)), "{hours}");
        assert_eq!(hours["bytes"], HOURS.len());

        let html = upload(&app, &ws.live, k, "shipping.html", "text/html", SHIPPING_HTML.as_bytes().to_vec()).await;
        assert_eq!(html.status, 202, "{}", html.text);
        assert_eq!((html.body["title"].clone(), html.body["source"].clone()), (json!("shipping.html"), json!("shipping.html")));
        let html = processed(&app, &ws.live, k, &html.body["id"]).await;
        assert_eq!(html["status"], "ready", "{html}");

        let pdf_doc = upload(&app, &ws.live, k, "warranty.pdf", "application/pdf", pdf("Every laptop carries a warranty of three years.")).await;
        assert_eq!(pdf_doc.status, 202, "{}", pdf_doc.text);
        let pdf_doc = processed(&app, &ws.live, k, &pdf_doc.body["id"]).await;
        assert_eq!((pdf_doc["status"].clone(), pdf_doc["title"].clone(), pdf_doc["content_type"].clone()), (json!("ready"), json!("warranty.pdf"), json!("application/pdf")), "{pdf_doc}");

        // A file that is not what it says fails, with why.
        let broken = upload(&app, &ws.live, k, "broken.pdf", "application/pdf", b"%PDF-1.4 not really".to_vec()).await;
        let broken = processed(&app, &ws.live, k, &broken.body["id"]).await;
        assert_eq!(broken["status"], "failed");
        assert!(broken["error"].as_str().unwrap().contains("PDF"), "{broken}");

        let coll = app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}")).await.body;
        assert_eq!((coll["document_count"].clone(), coll["passage_count"].clone()), (json!(4), json!(4)), "{coll}");

        // Queries rank the passage that answers best first, with its document.
        let q = |text: &str| {
            let path = format!("/api/v1/knowledge-collections/{k}/query?q={}", urlencode(text));
            let (app, key) = (&app, &ws.live);
            async move { app.get(key, &path).await }
        };
        let r = q("What time do you open on Saturday?").await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["items"][0]["document_id"], hours["id"]);
        assert!(r.body["items"][0]["text"].as_str().unwrap().starts_with("Opening hours"), "{}", r.body);
        assert!(r.body["items"][0]["score"].as_f64().unwrap() > 0.0);
        let r = q("Do you ship worldwide?").await;
        assert_eq!(r.body["items"][0]["title"], "shipping.html");
        assert!(r.body["items"][0]["text"].as_str().unwrap().contains("worldwide"), "{}", r.body);
        assert!(!r.body.to_string().contains("tracking"), "scripts are not text: {}", r.body);
        let r = q("how long is the warranty").await;
        assert_eq!(r.body["items"][0]["title"], "warranty.pdf", "{}", r.body);
        // A word in more passages tells less: a second document that
        // mentions it lowers the first one's score (counts are not stale).
        let alone = r.body["items"][0]["score"].as_f64().unwrap();
        add_text(&app, &ws.live, k, "Repairs", "Repairs outside the warranty are quoted before any work starts.").await;
        let r = q("how long is the warranty").await;
        assert_eq!(r.body["items"][0]["title"], "warranty.pdf", "{}", r.body);
        assert!(r.body["items"][0]["score"].as_f64().unwrap() < alone, "{alone} then {}", r.body);
        let r = q("refund receipt").await;
        let scores: Vec<f64> = r.body["items"].as_array().unwrap().iter().map(|i| i["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
        assert_eq!(q("zebra").await.body, json!({"items": [], "total": 0}));
        assert_eq!(q("what is it").await.body["total"], 0, "only common words: nothing to look up");

        // Deleting a document takes its passages out of the answers.
        let r = app.delete(&ws.live, &format!("/api/v1/knowledge-collections/{k}/documents/{}", html["id"])).await;
        assert_eq!(r.status, 204);
        assert_eq!(q("Do you ship worldwide?").await.body["total"], 0);
        let coll = app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}")).await.body;
        assert_eq!((coll["document_count"].clone(), coll["passage_count"].clone()), (json!(4), json!(4)));
        let docs = app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}/documents")).await.body;
        assert_eq!(docs["total"], 4);
    }

    async fn knowledge_is_scoped_and_bad_input_is_refused(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let k = collection(&app, &ws.live, "Help").await;
        let doc = add_text(&app, &ws.live, k, "Hours", HOURS).await;
        let paths = [
            format!("/api/v1/knowledge-collections/{k}"),
            format!("/api/v1/knowledge-collections/{k}/documents"),
            format!("/api/v1/knowledge-collections/{k}/documents/{}", doc["id"]),
            format!("/api/v1/knowledge-collections/{k}/query?q=open"),
        ];
        for key in [&other.live, &ws.test] {
            for path in &paths {
                let r = app.get(key, path).await;
                assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Knowledge collection {k} not found"))), "{path}");
            }
            let r = app.post(key, &format!("/api/v1/knowledge-collections/{k}/documents"), json!({"title": "x", "text": "y"})).await;
            assert_eq!(r.status, 404);
            assert_eq!(app.get(key, "/api/v1/knowledge-collections").await.body["total"], 0);
        }
        // An agent of another scope cannot list the collection.
        let r = app.post_idem(&ws.test, "/api/v1/agents", &uuid(), json!({"name": "Ava", "knowledge_collection_ids": [k]})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "knowledge_collection_ids", 0])), "{}", r.text);

        let r = app.post(&ws.live, "/api/v1/knowledge-collections", json!({})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "name"])));
        let r = app.post(&ws.live, &format!("/api/v1/knowledge-collections/{k}/documents"), json!({"title": "x", "text": "y", "content_type": "image/png"})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "content_type"])));
        let r = upload(&app, &ws.live, k, "photo.png", "image/png", vec![1, 2, 3]).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "file"])), "{}", r.text);
        let r = app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}/query")).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["query", "q"])), "{}", r.text);
        let r = app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}/query?q=open&limit=0")).await;
        assert_eq!(r.status, 422);
        let r = app.send(Method::POST, &format!("/api/v1/knowledge-collections/{k}/documents"), Some(&ws.live), None, &[("content-type", "multipart/form-data; boundary=x")]).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}/documents")).await.body["total"], 1, "nothing was added");
    }

    async fn agents_answer_from_their_collections(backend) {
        let engine = ScriptedEngine::start(vec![Say::Text("We open at 10am on Saturdays.")]).await;
        let url = engine.url.clone();
        let app = TestApp::spawn_with(backend, move |s| {
            s.agents.debounce_ms = 100;
            s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test"}));
        }).await;
        let ws = app.workspace("Acme").await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let k = collection(&app, &ws.live, "Help").await;
        add_text(&app, &ws.live, k, "Store policies", HOURS).await;

        // The builtin engine quotes the best passage with its source.
        let builtin = catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "knowledge_collection_ids": [k]})).await;
        assert_eq!(builtin["knowledge_collection_count"], 1);
        let c = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "When do you open on Saturday?", "external_id": "m-1"})).await.body["conversation_id"].as_i64().unwrap();
        let answered = replies(&app, &ws.live, c, Duration::from_millis(200)).await;
        let text = answered[0]["text"].as_str().unwrap();
        assert!(text.starts_with("From \"Store policies\": \"Opening hours We open at 9am"), "{text}");
        assert!(text.contains("On Saturdays we open at 10am."), "{text}");
        let run = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={c}")).await.body["items"][0].clone();
        // Only the passage that has the question's words is retrieved.
        assert_eq!(run["retrieval"].as_array().unwrap().len(), 1, "{run}");
        assert!(run["tool_calls"].as_array().unwrap().is_empty(), "it had an answer: no handoff");
        assert_eq!(app.get(&ws.live, &format!("/api/v1/handoffs?conversation_id={c}")).await.body["total"], 0);
        // The playground says which passages it was given, with their source.
        let tried = app.post(&ws.live, &format!("/api/v1/agents/{}/chat", builtin["id"]),
            json!({"messages": [{"role": "user", "content": "When do you open on Saturday?"}]})).await;
        assert_eq!(tried.status, 200, "{}", tried.text);
        let passages = tried.body["passages"].as_array().unwrap();
        assert_eq!((passages.len(), passages[0]["source"].clone()), (1, json!("Store policies")), "{}", tried.text);
        assert!(passages[0]["text"].as_str().unwrap().contains("On Saturdays we open at 10am.") && passages[0]["score"].as_f64().unwrap() > 0.0);

        // A model receives the passages, with their source, in its system prompt.
        let r = app.patch(&ws.live, &format!("/api/v1/agents/{}", builtin["id"]), json!({"text_engine": "openai", "system_prompt": "Be brief."})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        inbound(&app, ch, &secret, json!({"from": "user-1", "text": "And on Saturday?", "external_id": "m-2"})).await;
        eventually("the model was never asked", || async { (!engine.requests().is_empty()).then_some(()) }).await;
        let system = engine.requests()[0]["messages"][0].clone();
        assert_eq!(system["role"], "system");
        let prompt = system["content"].as_str().unwrap();
        assert!(prompt.starts_with("Be brief."), "{prompt}");
        assert!(prompt.contains("[Source: Store policies]\nOpening hours"), "{prompt}");

        // Deleting the collection detaches it from the agent.
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/knowledge-collections/{k}")).await.status, 204);
        let agent = app.get(&ws.live, &format!("/api/v1/agents/{}", builtin["id"])).await.body;
        assert_eq!((agent["knowledge_collection_ids"].clone(), agent["knowledge_collection_count"].clone()), (json!([]), json!(0)));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/knowledge-collections/{k}")).await.status, 404);
    }

    async fn the_playground_answers_without_touching_any_channel(backend) {
        let engine = ScriptedEngine::start(vec![
            Say::Calls(vec![("c1", "send_message", json!({"channel": "api", "text": "hi"}).to_string())]),
            Say::Text("Hello Ana, we open at 9am."),
        ]).await;
        let url = engine.url.clone();
        let app = TestApp::spawn_with(backend, move |s| {
            s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test"}));
        }).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "text_engine": "openai", "system_prompt": "Customer: {{name}}.",
            "tools": [{"type": "builtin", "name": "send_message"}]})).await;
        let path = format!("/api/v1/agents/{}/chat", agent["id"]);
        let body = json!({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "When do you open?"}], "variables": {"name": "Ana"}});
        let r = app.post(&ws.live, &path, body.clone()).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["message"], "Hello Ana, we open at 9am.");
        assert_eq!(r.body["tool_calls"][0]["result"]["dry_run"], true, "nothing was sent: {}", r.body);
        assert_eq!(r.body["passages"], json!([]), "the agent has no knowledge");
        let run = app.get(&ws.live, &format!("/api/v1/agent-runs/{}", r.body["run_id"])).await.body;
        assert_eq!((run["trigger"].clone(), run["status"].clone(), run["conversation_id"].clone()), (json!("playground"), json!("completed"), Value::Null));
        let asked = &engine.requests()[0];
        assert_eq!(asked["messages"][0], json!({"role": "system", "content": "Customer: Ana."}));
        assert_eq!(asked["messages"].as_array().unwrap().len(), 4);
        assert_eq!(app.get(&ws.live, "/api/v1/conversations").await.body["total"], 0, "no channel was touched");

        // Streamed: deltas, then the whole answer.
        let r = app.send(Method::POST, &path, Some(&ws.live), Some(body), &[("accept", "text/event-stream")]).await;
        assert_eq!(r.status, 200);
        assert!(r.header("content-type").unwrap().starts_with("text/event-stream"));
        let events: Vec<(String, Value)> = r.text.split("\n\n").filter(|f| !f.trim().is_empty()).map(|frame| {
            let mut kind = String::new();
            let mut data = Value::Null;
            for line in frame.lines() {
                if let Some(k) = line.strip_prefix("event: ").or(line.strip_prefix("event:")) { kind = k.trim().to_owned(); }
                if let Some(d) = line.strip_prefix("data: ").or(line.strip_prefix("data:")) { data = serde_json::from_str(d.trim()).unwrap(); }
            }
            (kind, data)
        }).collect();
        let deltas: String = events.iter().filter(|(k, _)| k == "delta").map(|(_, d)| d["text"].as_str().unwrap().to_owned()).collect();
        assert_eq!(deltas, "Hello Ana, we open at 9am.");
        let (last, done) = events.last().unwrap();
        assert_eq!((last.as_str(), done["message"].clone()), ("done", json!("Hello Ana, we open at 9am.")));

        // Refusals.
        let r = app.post(&ws.live, &path, json!({})).await;
        assert_eq!(r.status, 422);
        let r = app.post(&ws.live, &path, json!({"messages": [{"role": "assistant", "content": "Hi"}]})).await;
        assert_eq!(r.body["detail"][0]["loc"], json!(["body", "messages", 0, "role"]), "{}", r.text);
        let r = app.post(&ws.live, &path, json!({"conversation_id": 999})).await;
        assert_eq!(r.body["detail"][0]["loc"], json!(["body", "conversation_id"]), "{}", r.text);
        let r = app.post(&ws.test, &path, json!({"messages": [{"role": "user", "content": "Hi"}]})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Agent {} not found", agent["id"]))));
        let r = app.send(Method::POST, &path, Some(&ws.test), Some(json!({"messages": [{"role": "user", "content": "Hi"}]})), &[("accept", "text/event-stream")]).await;
        assert_eq!(r.status, 404, "a missing agent is a 404 before any stream");
    }
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}
