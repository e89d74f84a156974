//! SMS through a Twilio-compatible provider, end to end: a local server
//! speaks the Messages resource's wire format and records what Parley
//! sends; the tests play Twilio's part on the channel's webhooks, signed by
//! the official `twilio` package's `RequestValidator`.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::{Value, json};

use crate::runtime::{catch_all_agent_with, eventually, replies};
use crate::support::*;
use crate::twilio_voice::official_signature;

pub(crate) const ACCOUNT: &str = "AC00112233445566778899aabbccddeeff";
pub(crate) const TOKEN: &str = "sms-auth-token-for-tests";
/// The approved templates the Content API fake lists.
pub(crate) const TEMPLATE_1: &str = "HX0123456789abcdef0123456789abcdef";
const TEMPLATE_2: &str = "HXfedcba9876543210fedcba9876543210";

/// A message create request Parley sent.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    path: String,
    authorization: String,
    form: Vec<(String, String)>,
    sid: String,
}

impl Sent {
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

pub(crate) type Log = Arc<Mutex<Vec<Sent>>>;

/// The sid the next created message gets, when a test chooses it.
static NEXT_SID: Mutex<Option<String>> = Mutex::new(None);

/// The `Authorization` each storage request carried.
static STORAGE_AUTH: Mutex<Vec<Option<String>>> = Mutex::new(Vec::new());

/// A media file's bytes: a JPEG's signature and the sid.
fn media_bytes(sid: &str) -> Vec<u8> {
    let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xE0];
    bytes.extend_from_slice(sid.repeat(100).as_bytes());
    bytes
}

/// Whether a request carries the account's credentials (basic auth).
fn authenticated(headers: &HeaderMap) -> bool {
    let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT}:{TOKEN}")));
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(basic.as_str())
}

/// Twilio's answer to credentials that do not authenticate.
fn refused() -> (axum::http::StatusCode, axum::Json<Value>) {
    let error = json!({"code": 20003, "message": "Authenticate", "more_info": "https://www.twilio.com/docs/errors/20003", "status": 401});
    (axum::http::StatusCode::UNAUTHORIZED, axum::Json(error))
}

/// Twilio's Messages resource: 201 with the new message's sid.
pub(crate) async fn messages_server() -> (String, Log) {
    async fn create(
        State(log): State<Log>,
        Path(account): Path<String>,
        headers: HeaderMap,
        body: String,
    ) -> (axum::http::StatusCode, axum::Json<Value>) {
        if !authenticated(&headers) {
            return refused();
        }
        let form: Vec<(String, String)> = serde_urlencoded::from_str(&body).unwrap();
        let sid = NEXT_SID.lock().unwrap().take().unwrap_or_else(|| format!("SM{}", uuid().replace('-', "")));
        log.lock().unwrap().push(Sent {
            path: format!("/2010-04-01/Accounts/{account}/Messages.json"),
            authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
            form,
            sid: sid.clone(),
        });
        (axum::http::StatusCode::CREATED, axum::Json(json!({"sid": sid, "account_sid": account, "status": "queued"})))
    }
    /// The account resource, as credentials checks read it.
    async fn account(Path(account): Path<String>, headers: HeaderMap) -> (axum::http::StatusCode, axum::Json<Value>) {
        if !authenticated(&headers) {
            return refused();
        }
        let sid = account.trim_end_matches(".json");
        (
            axum::http::StatusCode::OK,
            axum::Json(json!({"sid": sid, "friendly_name": "Shop account", "status": "active"})),
        )
    }
    /// A message's media, as Twilio serves it: HTTP auth with the account's
    /// credentials, then a redirect to its storage on another host.
    async fn media(Path(sid): Path<String>, headers: HeaderMap) -> axum::response::Response {
        use axum::response::IntoResponse;
        if !authenticated(&headers) {
            return refused().into_response();
        }
        let host = headers.get("host").unwrap().to_str().unwrap();
        let port = host.rsplit(':').next().unwrap();
        axum::response::Redirect::temporary(&format!("http://localhost:{port}/storage/{sid}")).into_response()
    }
    async fn storage(Path(sid): Path<String>, headers: HeaderMap) -> axum::response::Response {
        use axum::response::IntoResponse;
        STORAGE_AUTH.lock().unwrap().push(headers.get("authorization").map(|v| v.to_str().unwrap().to_owned()));
        ([("content-type", "image/jpeg")], media_bytes(&sid)).into_response()
    }
    /// The Content API's templates with their approval (two pages), as
    /// `GET /v1/ContentAndApprovals` lists them.
    async fn contents(
        headers: HeaderMap,
        axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
    ) -> (axum::http::StatusCode, axum::Json<Value>) {
        if !authenticated(&headers) {
            return refused();
        }
        let host = headers.get("host").unwrap().to_str().unwrap();
        let item = |sid: &str, name: &str, body: &str, approval: Value| {
            json!({"sid": sid, "account_sid": ACCOUNT, "friendly_name": name, "language": "en",
                "variables": {"1": "Ana", "2": "1234"}, "types": {"twilio/text": {"body": body}},
                "approval_requests": approval, "date_created": "2026-01-02T10:00:00Z", "date_updated": "2026-01-02T10:00:00Z"})
        };
        let page = if q.get("PageToken").map(String::as_str) == Some("PT2") {
            json!({"contents": [item(TEMPLATE_2, "follow_up", "Hi {{1}}, anything else about order {{2}}?",
                    json!({"whatsapp": {"name": "follow_up", "category": "UTILITY", "status": "approved"}}))],
                "meta": {"page": 1, "page_size": 100, "next_page_url": null, "key": "contents"}})
        } else {
            json!({"contents": [
                    item(TEMPLATE_1, "order_shipped", "Hi {{1}}, your order {{2}} has shipped.",
                        json!({"name": "order_shipped", "category": "UTILITY", "content_type": "twilio/text", "status": "approved", "rejection_reason": ""})),
                    item("HX99999999999999999999999999999999", "not_yet", "Pending {{1}}",
                        json!({"name": "not_yet", "category": "MARKETING", "status": "pending"})),
                ],
                "meta": {"page": 0, "page_size": 100, "key": "contents",
                    "next_page_url": format!("http://{host}/v1/ContentAndApprovals?PageSize=100&Page=1&PageToken=PT2")}})
        };
        (axum::http::StatusCode::OK, axum::Json(page))
    }
    let log: Log = Arc::default();
    let app = axum::Router::new()
        .route("/v1/ContentAndApprovals", axum::routing::get(contents))
        .route("/2010-04-01/Accounts/{account}/Messages.json", axum::routing::post(create))
        .route("/2010-04-01/Accounts/{account}", axum::routing::get(account))
        .route(
            "/2010-04-01/Accounts/{account}/Messages/{message}/Media/{sid}",
            axum::routing::get(|Path((_, _, sid)): Path<(String, String, String)>, headers: HeaderMap| {
                media(Path(sid), headers)
            }),
        )
        .route("/storage/{sid}", axum::routing::get(storage))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, log)
}

/// Posts `params` to the channel hook at `path`, signed with `token` by the official validator.
pub(crate) async fn twilio_posts(app: &TestApp, path: &str, params: &[(&str, &str)], token: &str) -> reqwest::Response {
    let signature = official_signature(token, &app.url(path), params);
    app.client.post(app.url(path)).header("X-Twilio-Signature", signature).form(params).send().await.unwrap()
}

async fn message_count(app: &TestApp, key: &str) -> i64 {
    let conversations = app.get(key, "/api/v1/conversations?channel=sms").await.body;
    let mut n = 0;
    for c in conversations["items"].as_array().unwrap() {
        n += app.get(key, &format!("/api/v1/conversations/{}/messages", c["id"])).await.body["total"].as_i64().unwrap();
    }
    n
}

/// An sms or whatsapp channel on the fake provider: its id and public id.
pub(crate) async fn twilio_channel(app: &TestApp, ws: &Ws, kind: &str, from: &str, twilio: &str) -> (i64, String) {
    let r = app
        .post(
            &ws.live,
            "/api/v1/channels",
            json!({"type": kind, "name": kind, "config": {
        "account_sid": ACCOUNT, "auth_token": TOKEN, "from": from, "base_url": twilio}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.body["id"].as_i64().unwrap();
    let mut c = app.db.read().await.unwrap();
    let scope = parley_domain::Scope::new(ws.id, parley_domain::Mode::Live);
    (id, parley_store::repo::channels::get(&mut c, scope, id).await.unwrap().unwrap().public_id)
}

/// The conversation's messages, oldest first.
async fn thread(app: &TestApp, key: &str, conversation: &Value) -> Vec<Value> {
    let page = app.get(key, &format!("/api/v1/conversations/{}/messages?limit=100", conversation)).await.body;
    page["items"].as_array().unwrap().clone()
}

both_backends! {
    // Webhooks arriving together are stored in shared transactions that
    // look ahead for the whole batch: each number still gets one contact
    // (a known contact's number gains the identity, no duplicate) and one
    // conversation holding all its messages, and a repeated MessageSid in
    // the same burst is stored once.
    async fn a_burst_of_webhooks_makes_one_contact_and_one_conversation_a_number(backend) {
        let (twilio, _) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let (_, public_id) = twilio_channel(&app, &ws, "sms", "+14155550100", &twilio).await;
        let known = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Known", "phone": "+14155550900"})).await;
        assert_eq!(known.status, 201, "{}", known.text);
        let path = format!("/hooks/twilio/{public_id}/inbound");
        let numbers = ["+14155550900", "+14155550901", "+14155550902", "+14155550903", "+14155550904"];
        let mut forms = Vec::new();
        for (n, number) in numbers.iter().enumerate() {
            for m in 0..4 {
                let sid = format!("SM{n:016}{m:016}");
                forms.push(vec![("MessageSid".to_owned(), sid), ("AccountSid".to_owned(), ACCOUNT.to_owned()),
                    ("From".to_owned(), number.to_string()), ("To".to_owned(), "+14155550100".to_owned()),
                    ("Body".to_owned(), format!("Message {m}")), ("NumMedia".to_owned(), "0".to_owned())]);
            }
        }
        // Each number's first message twice.
        for n in 0..numbers.len() {
            forms.push(forms[n * 4].clone());
        }
        let signed: Vec<_> = forms.iter().map(|form| {
            let params: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            (official_signature(TOKEN, &app.url(&path), &params), form)
        }).collect();
        let posts = signed.iter().map(|(signature, form)| {
            app.client.post(app.url(&path)).header("X-Twilio-Signature", signature).form(form).send()
        });
        for r in futures::future::join_all(posts).await {
            assert_eq!(r.unwrap().status(), 200);
        }
        let conversations = app.get(&ws.live, "/api/v1/conversations?channel=sms&limit=100").await.body;
        assert_eq!(conversations["total"], 5, "{conversations}");
        for conversation in conversations["items"].as_array().unwrap() {
            assert_eq!(conversation["unread_count"], 4, "{conversation}");
            assert_eq!(thread(&app, &ws.live, &conversation["id"]).await.len(), 4);
        }
        let contacts = app.get(&ws.live, "/api/v1/contacts?limit=100").await.body;
        assert_eq!(contacts["total"], 5, "{contacts}");
        let known = app.get(&ws.live, &format!("/api/v1/contacts/{}", known.body["id"])).await.body;
        assert_eq!(known["identities"], json!([{"channel": "sms", "address": "+14155550900"}]), "{known}");
        assert_eq!(message_count(&app, &ws.live).await, 20);
    }

    // A provider that retries, or a load balancer that sends a webhook to
    // two instances, makes instances race to store the same message, and
    // new senders race to open the same contact and conversation: the
    // loser of each race finds the winner's row, answers 200 and stores
    // nothing twice.
    async fn the_same_webhooks_reaching_two_instances_at_once_are_each_stored_once(backend) {
        let (twilio, _) = messages_server().await;
        let one = TestApp::spawn(backend).await;
        let two = one.sibling().await;
        let ws = one.workspace("Shop").await;
        let (_, public_id) = twilio_channel(&one, &ws, "sms", "+14155550100", &twilio).await;
        let path = format!("/hooks/twilio/{public_id}/inbound");
        let mut posts = Vec::new();
        for n in 0..8 {
            for m in 0..3 {
                let form = [("MessageSid", format!("SM{n:016}{m:016}")), ("AccountSid", ACCOUNT.to_owned()),
                    ("From", format!("+1415555091{n}")), ("To", "+14155550100".to_owned()),
                    ("Body", format!("Message {m}")), ("NumMedia", "0".to_owned())];
                let params: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
                for app in [&one, &two] {
                    let url = app.url(&path);
                    let signature = official_signature(TOKEN, &url, &params);
                    posts.push(one.client.post(url).header("X-Twilio-Signature", signature).form(&form).send());
                }
            }
        }
        for r in futures::future::join_all(posts).await {
            let r = r.unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        }
        let conversations = one.get(&ws.live, "/api/v1/conversations?channel=sms&limit=100").await.body;
        assert_eq!(conversations["total"], 8, "{conversations}");
        for conversation in conversations["items"].as_array().unwrap() {
            assert_eq!(thread(&one, &ws.live, &conversation["id"]).await.len(), 3, "{conversation}");
        }
        assert_eq!(one.get(&ws.live, "/api/v1/contacts?limit=100").await.body["total"], 8);
        assert_eq!(message_count(&one, &ws.live).await, 24);
    }

    async fn an_sms_is_received_answered_sent_through_twilio_and_its_delivery_reported(backend) {
        let (twilio, sent) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "Support SMS", "config": {
            "account_sid": ACCOUNT, "auth_token": TOKEN, "from": "+14155550100", "base_url": twilio}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["address"], "+14155550100");
        assert_eq!(r.body["secrets_set"], json!(["auth_token"]));
        assert!(!r.text.contains(TOKEN), "the auth token is write-only: {}", r.text);
        let channel = app.get(&ws.live, &format!("/api/v1/channels/{}", r.body["id"])).await.body;
        assert!(channel["config"].get("auth_token").is_none());
        let public_id = {
            let mut c = app.db.read().await.unwrap();
            let row = parley_store::repo::channels::get(&mut c, parley_domain::Scope::new(ws.id, parley_domain::Mode::Live), r.body["id"].as_i64().unwrap()).await.unwrap().unwrap();
            row.public_id
        };
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "tools": []})).await;

        let inbound_path = format!("/hooks/twilio/{public_id}/inbound");
        let message = [("MessageSid", "SM0000000000000000000000000000aaaa"), ("AccountSid", ACCOUNT),
            ("From", "+14155550123"), ("To", "+14155550100"), ("Body", "Where is my order?"), ("NumMedia", "0")];
        // A wrong signature, another token's, or none: 401, nothing written.
        let r = app.client.post(app.url(&inbound_path)).header("X-Twilio-Signature", "bm90IGl0").form(&message).send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert_eq!(twilio_posts(&app, &inbound_path, &message, "another-token").await.status(), 401);
        assert_eq!(app.client.post(app.url(&inbound_path)).form(&message).send().await.unwrap().status(), 401);
        assert_eq!(twilio_posts(&app, "/hooks/twilio/sms_nosuchchannel/inbound", &message, TOKEN).await.status(), 401);
        // Another type's public id at a Twilio hook is no channel there: 401.
        let api = app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "Own system"})).await;
        let api_hook = format!("/hooks/twilio/{}/inbound", api.body["address"].as_str().unwrap());
        assert_eq!(twilio_posts(&app, &api_hook, &message, TOKEN).await.status(), 401);
        assert_eq!(message_count(&app, &ws.live).await, 0);

        // Twilio's: stored once however often it is repeated, answered with empty TwiML.
        for _ in 0..2 {
            let r = twilio_posts(&app, &inbound_path, &message, TOKEN).await;
            assert_eq!(r.status(), 200);
            assert!(r.text().await.unwrap().contains("<Response/>"));
        }
        let conversations = app.get(&ws.live, "/api/v1/conversations?channel=sms").await.body;
        assert_eq!(conversations["total"], 1, "{conversations}");
        let conversation = &conversations["items"][0];
        assert_eq!(conversation["channel_ref"], "sms:+14155550123");
        let full = app.get(&ws.live, &format!("/api/v1/conversations/{}", conversation["id"])).await.body;
        let contact = app.get(&ws.live, &format!("/api/v1/contacts/{}", full["contact_id"])).await.body;
        assert_eq!(contact["normalized_phone"], "+14155550123", "{contact}");
        assert_eq!(contact["identities"], json!([{"channel": "sms", "address": "+14155550123"}]));

        // The agent's answer goes out through the Messages resource.
        let out = replies(&app, &ws.live, conversation["id"].as_i64().unwrap(), std::time::Duration::from_millis(200)).await;
        let reply = eventually("the reply was sent", || async {
            let m = app.get(&ws.live, &format!("/api/v1/messages/{}", out[0]["id"])).await.body;
            (m["status"] == "sent").then_some(m)
        })
        .await;
        let request = sent.lock().unwrap().first().cloned().expect("Parley called the Messages resource");
        assert_eq!(request.path, format!("/2010-04-01/Accounts/{ACCOUNT}/Messages.json"));
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT}:{TOKEN}"));
        assert_eq!(request.authorization, format!("Basic {basic}"));
        assert_eq!((request.get("To"), request.get("From")), (Some("+14155550123"), Some("+14155550100")));
        assert_eq!(request.get("Body"), reply["text"].as_str());
        let status_path = format!("/hooks/twilio/{public_id}/status");
        assert_eq!(request.get("StatusCallback"), Some(app.url(&status_path).as_str()));
        assert_eq!(reply["external_id"], json!(request.sid));
        assert_eq!(message_count(&app, &ws.live).await, 2, "one inbound, one reply");

        // Delivery reports: delivered moves it on; a late `sent` does not move it back.
        for status in ["delivered", "sent"] {
            let report = [("MessageSid", request.sid.as_str()), ("AccountSid", ACCOUNT), ("MessageStatus", status)];
            assert_eq!(twilio_posts(&app, &status_path, &report, TOKEN).await.status(), 204);
        }
        let m = app.get(&ws.live, &format!("/api/v1/messages/{}", out[0]["id"])).await.body;
        assert_eq!(m["status"], "delivered", "{m}");
        // Longer than Twilio takes: refused up front, nothing queued.
        let long = "a".repeat(1601);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation["id"], "text": long})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()),
            (422, json!(["body", "text"]), json!("value_error.text.channel_limit")), "{}", r.text);
        assert_eq!(message_count(&app, &ws.live).await, 2);
        let forged = [("MessageSid", request.sid.as_str()), ("AccountSid", ACCOUNT), ("MessageStatus", "failed")];
        assert_eq!(twilio_posts(&app, &status_path, &forged, "another-token").await.status(), 401);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/messages/{}", out[0]["id"])).await.body["status"], "delivered");
    }

    async fn a_whatsapp_message_names_its_contact_and_the_reply_carries_the_whatsapp_prefix(backend) {
        let (twilio, sent) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "whatsapp", "name": "WhatsApp", "config": {
            "account_sid": ACCOUNT, "auth_token": TOKEN, "from": "whatsapp:+14155550100", "base_url": twilio}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!((r.body["address"].clone(), r.body["config"]["from"].clone()), (json!("+14155550100"), json!("+14155550100")));
        let public_id = {
            let mut c = app.db.read().await.unwrap();
            let scope = parley_domain::Scope::new(ws.id, parley_domain::Mode::Live);
            parley_store::repo::channels::get(&mut c, scope, r.body["id"].as_i64().unwrap()).await.unwrap().unwrap().public_id
        };
        assert!(public_id.starts_with("wa_"), "{public_id}");
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "tools": []})).await;
        let message = [("MessageSid", "SM0000000000000000000000000000bbbb"), ("AccountSid", ACCOUNT),
            ("From", "whatsapp:+14155550123"), ("To", "whatsapp:+14155550100"), ("Body", "Hola, do you ship to Spain?"),
            ("NumMedia", "0"), ("ProfileName", "Ana García"), ("WaId", "14155550123")];
        assert_eq!(twilio_posts(&app, &format!("/hooks/twilio/{public_id}/inbound"), &message, TOKEN).await.status(), 200);
        let conversations = app.get(&ws.live, "/api/v1/conversations?channel=whatsapp").await.body;
        assert_eq!(conversations["items"][0]["channel_ref"], "whatsapp:+14155550123", "{conversations}");
        let full = app.get(&ws.live, &format!("/api/v1/conversations/{}", conversations["items"][0]["id"])).await.body;
        let contact = app.get(&ws.live, &format!("/api/v1/contacts/{}", full["contact_id"])).await.body;
        assert_eq!(contact["display_name"], "Ana García", "the WhatsApp profile names the new contact");
        assert_eq!(contact["identities"], json!([{"channel": "whatsapp", "address": "+14155550123"}]));

        replies(&app, &ws.live, full["id"].as_i64().unwrap(), std::time::Duration::from_millis(200)).await;
        let request = eventually("the reply reached the provider", || async { sent.lock().unwrap().first().cloned() }).await;
        assert_eq!((request.get("To"), request.get("From")), (Some("whatsapp:+14155550123"), Some("whatsapp:+14155550100")));
    }

    async fn whatsapp_templates_are_listed_and_a_reply_is_previewed_as_its_channel_sends_it(backend) {
        let (twilio, _sent) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "whatsapp", "name": "WhatsApp", "config": {
            "account_sid": ACCOUNT, "auth_token": TOKEN, "from": "+14155550100", "base_url": twilio, "content_base_url": twilio}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let wa = r.body["id"].as_i64().unwrap();

        // The approved ones, from both pages; the pending one is left out.
        let r = app.get(&ws.live, &format!("/api/v1/channels/{wa}/templates")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let names: Vec<&str> = r.body["items"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!((names, r.body["total"].clone()), (vec!["order_shipped", "follow_up"], json!(2)));
        assert_eq!(r.body["items"][0], json!({"content_sid": TEMPLATE_1, "name": "order_shipped", "language": "en",
            "body": "Hi {{1}}, your order {{2}} has shipped.", "variables": {"1": "Ana", "2": "1234"}}));
        // Another workspace's channel is not found; an SMS channel has none; refused credentials are the provider's 502.
        let other = app.workspace("Other").await;
        assert_eq!(app.get(&other.live, &format!("/api/v1/channels/{wa}/templates")).await.status, 404);
        let sms = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "SMS", "config": {
            "account_sid": ACCOUNT, "auth_token": TOKEN, "from": "+14155550101", "base_url": twilio}})).await.body["id"].as_i64().unwrap();
        let r = app.get(&ws.live, &format!("/api/v1/channels/{sms}/templates")).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Channel {sms} is sms: only WhatsApp channels have templates"))));
        app.patch(&ws.live, &format!("/api/v1/channels/{wa}"), json!({"config": {"auth_token": "wrong"}})).await;
        let r = app.get(&ws.live, &format!("/api/v1/channels/{wa}/templates")).await;
        assert_eq!(r.status, 502, "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().contains("20003"), "{}", r.text);
        app.patch(&ws.live, &format!("/api/v1/channels/{wa}"), json!({"config": {"auth_token": TOKEN}})).await;

        // A WhatsApp conversation nobody wrote in: only a template may go.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": wa, "to": "+14155550123", "text": "Hi Ana, your order 1234 has shipped.",
            "template": {"content_sid": TEMPLATE_1, "variables": {"1": "Ana", "2": "1234"}}})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let conversation = r.body["conversation_id"].as_i64().unwrap();
        let preview = |id: i64, text: &str| {
            let (app, key, text) = (&app, ws.live.clone(), text.to_owned());
            async move { app.post(&key, &format!("/api/v1/conversations/{id}/reply-preview"), json!({"text": text})).await }
        };
        let p = preview(conversation, "Any news?").await;
        assert_eq!(p.status, 200, "{}", p.text);
        assert_eq!((p.body["channel"].clone(), p.body["template_required"].clone(), p.body["free_text_until"].clone()), (json!("whatsapp"), json!(true), Value::Null));

        // SMS: segments and encoding as the send counts them; too long is said, not sent.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": sms, "to": "+14155550124", "text": "Hello"})).await;
        let texting = r.body["conversation_id"].as_i64().unwrap();
        let p = preview(texting, &"a".repeat(161)).await;
        assert_eq!((p.body["segments"].clone(), p.body["refused"].clone(), p.body["html"].clone(), p.body["template_required"].clone()),
            (json!({"encoding": "GSM-7", "count": 2}), Value::Null, Value::Null, json!(false)), "{}", p.text);
        let p = preview(texting, "Thanks 🙂").await;
        assert_eq!(p.body["segments"], json!({"encoding": "UCS-2", "count": 1}));
        let p = preview(texting, &"a".repeat(1601)).await;
        assert!(p.body["refused"].as_str().is_some_and(|why| why.contains("1600")), "{}", p.text);
        // Nothing was stored or sent by previewing.
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{texting}/messages")).await.body["total"], 1);
        // Bad input; another workspace's conversation.
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{texting}/reply-preview"), json!({"text": "a".repeat(10_001)})).await;
        assert_eq!((r.status, r.faults()), (422, vec![(r#"["body","text"]"#.to_owned(), "value_error.string.too_long".to_owned())]));
        assert_eq!(app.post(&other.live, &format!("/api/v1/conversations/{texting}/reply-preview"), json!({"text": "x"})).await.status, 404);
    }

    async fn refused_credentials_put_the_channel_in_error_until_a_check_finds_them_working(backend) {
        let (twilio, _sent) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "SMS", "config": {
            "account_sid": ACCOUNT, "auth_token": "a-wrong-token", "from": "+14155550100", "base_url": twilio}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_i64().unwrap();

        // Checked: Twilio refuses the token; the channel goes to error with Twilio's words.
        let r = app.post(&ws.live, &format!("/api/v1/channels/{id}/check"), json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["ok"], false, "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().contains("20003"), "{}", r.text);
        let channel = app.get(&ws.live, &format!("/api/v1/channels/{id}")).await.body;
        assert_eq!(channel["status"], "error", "{channel}");
        assert!(channel["status_reason"].as_str().unwrap().contains("Authenticate"), "{channel}");

        // The right token, checked: active again, no reason.
        let r = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"auth_token": TOKEN}})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("error")), "a settings change alone does not clear the error");
        let r = app.post(&ws.live, &format!("/api/v1/channels/{id}/check"), json!({})).await;
        assert_eq!((r.body["ok"].clone(), r.body["channel"]["status"].clone(), r.body["channel"]["status_reason"].clone()),
            (json!(true), json!("active"), Value::Null), "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().contains("Shop account"), "{}", r.text);

        // A send Twilio refuses for the credentials fails the message and puts the channel in error again.
        let r = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"auth_token": "revoked-token"}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+14155550123", "text": "Your order shipped."})).await;
        assert_eq!(r.status, 202, "accepted, queued: {}", r.text);
        let message = eventually("the send failed", || async {
            let m = app.get(&ws.live, &format!("/api/v1/messages/{}", r.body["id"])).await.body;
            (m["status"] == "failed").then_some(m)
        })
        .await;
        assert!(message["error"].as_str().unwrap().contains("20003"), "{message}");
        let channel = app.get(&ws.live, &format!("/api/v1/channels/{id}")).await.body;
        assert_eq!(channel["status"], "error", "{channel}");
        // Another workspace's check of this channel is a 404.
        let other = app.workspace("Other").await;
        assert_eq!(app.post(&other.live, &format!("/api/v1/channels/{id}/check"), json!({})).await.status, 404);
    }

    async fn a_delivery_report_that_arrives_before_the_send_is_recorded_is_applied_when_it_is(backend) {
        let (twilio, _sent) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "SMS", "config": {
            "account_sid": ACCOUNT, "auth_token": TOKEN, "from": "+14155550100", "base_url": twilio}})).await;
        let id = r.body["id"].as_i64().unwrap();
        let public_id = {
            let mut c = app.db.read().await.unwrap();
            let scope = parley_domain::Scope::new(ws.id, parley_domain::Mode::Live);
            parley_store::repo::channels::get(&mut c, scope, id).await.unwrap().unwrap().public_id
        };
        // Twilio reports `delivered` for a sid Parley has not recorded yet: taken (204), kept.
        let sid = format!("SM{}", uuid().replace('-', ""));
        let report = [("MessageSid", sid.as_str()), ("AccountSid", ACCOUNT), ("MessageStatus", "delivered")];
        assert_eq!(twilio_posts(&app, &format!("/hooks/twilio/{public_id}/status"), &report, TOKEN).await.status(), 204);
        // Then the send that Twilio names with that sid is recorded: the report applies at once.
        *NEXT_SID.lock().unwrap() = Some(sid.clone());
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+14155550123", "text": "Your order shipped."})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let message = eventually("the message was sent", || async {
            let m = app.get(&ws.live, &format!("/api/v1/messages/{}", r.body["id"])).await.body;
            (m["external_id"] == json!(sid)).then_some(m)
        })
        .await;
        assert_eq!(message["status"], "delivered", "{message}");
        assert!(message["delivered_at"].is_string(), "{message}");
    }
    async fn sms_media_is_fetched_segments_are_counted_and_stop_and_start_are_honoured(backend) {
        let (twilio, sent) = messages_server().await;
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 50).await;
        let ws = app.workspace("Shop").await;
        let (id, public_id) = twilio_channel(&app, &ws, "sms", "+14155550100", &twilio).await;
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "tools": []})).await;
        let inbound_path = format!("/hooks/twilio/{public_id}/inbound");

        // A picture message: fetched with the account's credentials, through
        // Twilio's redirect (no credentials to the storage host), kept as an attachment.
        let media_url = format!("{twilio}/2010-04-01/Accounts/{ACCOUNT}/Messages/MM01/Media/ME0001");
        let message = [("MessageSid", "MM0000000000000000000000000000cccc"), ("AccountSid", ACCOUNT),
            ("From", "+14155550123"), ("To", "+14155550100"), ("Body", "Here is the damage"), ("NumMedia", "1"),
            ("MediaUrl0", media_url.as_str()), ("MediaContentType0", "image/jpeg")];
        assert_eq!(twilio_posts(&app, &inbound_path, &message, TOKEN).await.status(), 200);
        let conversation = app.get(&ws.live, "/api/v1/conversations?channel=sms").await.body["items"][0]["id"].clone();
        let first = thread(&app, &ws.live, &conversation).await[0].clone();
        assert_eq!(first["text"], "Here is the damage");
        let file = &first["attachments"][0];
        assert_eq!((file["filename"].clone(), file["content_type"].clone(), file["size"].clone()),
            (json!("media-1.jpg"), json!("image/jpeg"), json!(media_bytes("ME0001").len())), "{first}");
        let bytes = app.client.get(file["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
        assert_eq!(bytes.to_vec(), media_bytes("ME0001"), "the stored file is the provider's");
        assert_eq!(STORAGE_AUTH.lock().unwrap().clone(), vec![None], "the credentials never left Twilio's host");
        assert_eq!(first["segments"], json!({"encoding": "GSM-7", "count": 1}), "{first}");

        // Segments: a UCS-2 text of 71 characters takes two.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation, "text": "ж".repeat(71)})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!(r.body["segments"], json!({"encoding": "UCS-2", "count": 2}));
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation, "text": "a".repeat(161)})).await;
        assert_eq!(r.body["segments"], json!({"encoding": "GSM-7", "count": 2}));
        // Templates are WhatsApp's.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation, "text": "Hi",
            "template": {"content_sid": format!("HX{}", "0".repeat(32))}})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.template.channel")), "{}", r.text);

        // STOP: stored, not answered, and no more messages to the number.
        let outbound = |m: &Vec<Value>| m.iter().filter(|m| m["direction"] == "outbound").count();
        eventually("the agent answered the picture", || async { (outbound(&thread(&app, &ws.live, &conversation).await) >= 3).then_some(()) }).await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let before = outbound(&thread(&app, &ws.live, &conversation).await);
        let stop = [("MessageSid", "SM0000000000000000000000000000dddd"), ("AccountSid", ACCOUNT),
            ("From", "+14155550123"), ("To", "+14155550100"), ("Body", " Stop "), ("NumMedia", "0")];
        assert_eq!(twilio_posts(&app, &inbound_path, &stop, TOKEN).await.status(), 200);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation, "text": "Still there?"})).await;
        assert_eq!(r.status, 409, "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().contains("opted out"), "{}", r.text);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+1 415 555 0123", "text": "Hello?"})).await;
        assert_eq!(r.status, 409, "the number is opted out however it is written: {}", r.text);
        tokio::time::sleep(std::time::Duration::from_millis(800)).await;
        let messages = thread(&app, &ws.live, &conversation).await;
        assert_eq!(outbound(&messages), before, "the agent does not answer STOP: {messages:?}");
        assert_eq!(messages.last().unwrap()["text"], " Stop ");

        // START: messages flow again (and the agent is back).
        let start = [("MessageSid", "SM0000000000000000000000000000eeee"), ("AccountSid", ACCOUNT),
            ("From", "+14155550123"), ("To", "+14155550100"), ("Body", "START"), ("NumMedia", "0")];
        assert_eq!(twilio_posts(&app, &inbound_path, &start, TOKEN).await.status(), 200);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation, "text": "Welcome back"})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        eventually("the welcome went out", || async {
            sent.lock().unwrap().iter().any(|s| s.get("Body") == Some("Welcome back")).then_some(())
        }).await;
        // Another workspace's number that said STOP is not opted out here.
        let other = app.workspace("Other").await;
        let (other_id, _) = twilio_channel(&app, &other, "sms", "+14155550101", &twilio).await;
        let r = app.post(&other.live, "/api/v1/messages", json!({"channel_id": other_id, "to": "+14155550123", "text": "Hi"})).await;
        assert_eq!(r.status, 202, "{}", r.text);
    }

    async fn whatsapp_free_text_needs_the_24_hour_window_and_templates_go_out_as_content(backend) {
        let (twilio, sent) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let (id, public_id) = twilio_channel(&app, &ws, "whatsapp", "+14155550100", &twilio).await;

        // Nobody has written: free text is refused, nothing queued.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+14155550123", "text": "Your order shipped"})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()),
            (422, json!(["body", "template"]), json!("value_error.template.required")), "{}", r.text);
        assert!(r.text.contains("has never written"), "{}", r.text);
        // A template goes out as content: its SID and variables, no body.
        let sid = format!("HX{}", "ab".repeat(16));
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+14155550123",
            "text": "Hi Ana, your order 1234 has shipped.",
            "template": {"content_sid": sid, "variables": {"1": "Ana", "2": "1234"}}})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!(r.body["template"], json!({"content_sid": sid, "variables": {"1": "Ana", "2": "1234"}}));
        let request = eventually("the template reached the provider", || async { sent.lock().unwrap().first().cloned() }).await;
        assert_eq!(request.get("ContentSid"), Some(sid.as_str()));
        let variables: Value = serde_json::from_str(request.get("ContentVariables").unwrap()).unwrap();
        assert_eq!(variables, json!({"1": "Ana", "2": "1234"}));
        assert_eq!(request.get("Body"), None, "the provider renders the template");
        assert_eq!(request.get("To"), Some("whatsapp:+14155550123"));
        // Bad templates: 422 with the field.
        for (template, field) in [(json!({"content_sid": "HX12"}), "content_sid"), (json!({"content_sid": sid, "variables": {"1": 5}}), "variables")] {
            let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+14155550123", "text": "x", "template": template})).await;
            assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "template", field])), "{}", r.text);
        }

        // The contact writes: free text is fine for 24 hours.
        let message = [("MessageSid", "SM0000000000000000000000000000ffff"), ("AccountSid", ACCOUNT),
            ("From", "whatsapp:+14155550123"), ("To", "whatsapp:+14155550100"), ("Body", "Thanks! When will it arrive?"),
            ("NumMedia", "0")];
        assert_eq!(twilio_posts(&app, &format!("/hooks/twilio/{public_id}/inbound"), &message, TOKEN).await.status(), 200);
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "+14155550123", "text": "Tomorrow."})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        assert_eq!(r.body.get("segments"), None, "segments are SMS's");

        // 25 hours later (the contact's message moved back in time): closed again.
        let scope = parley_domain::Scope::new(ws.id, parley_domain::Mode::Live);
        let mut tx = app.db.begin().await.unwrap();
        let yesterday = parley_domain::Timestamp::now().plus_seconds(-25 * 3600);
        parley_store::execute!(&mut tx, sqlx::query("UPDATE messages SET created_at = $1 WHERE workspace_id = $2 AND direction = 'inbound'")
            .bind(yesterday).bind(scope.workspace_id)).unwrap();
        tx.commit().await.unwrap();
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": r.body["conversation_id"], "text": "Any news?"})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.template.required")), "{}", r.text);
        assert!(r.text.contains("has not written in the last 24 hours"), "{}", r.text);
    }
}

both_backends! {
    // Issue 31: a NUL in a provider's text was a 500 on PostgreSQL (and the
    // message lost); both backends store it as U+FFFD.
    async fn a_nul_in_twilio_text_is_stored_as_a_replacement_character(backend) {
        let (twilio, _) = messages_server().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let (_, public_id) = twilio_channel(&app, &ws, "whatsapp", "whatsapp:+14155550100", &twilio).await;
        let params = [("MessageSid", "SM00000000000000000000000000000nul"), ("AccountSid", ACCOUNT),
            ("From", "whatsapp:+14155550177"), ("To", "whatsapp:+14155550100"), ("Body", "before\u{0}after"),
            ("ProfileName", "Ana\u{0}Nul"), ("NumMedia", "0")];
        let r = twilio_posts(&app, &format!("/hooks/twilio/{public_id}/inbound"), &params, TOKEN).await;
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        let conversations = app.get(&ws.live, "/api/v1/conversations?channel=whatsapp").await.body;
        let messages = thread(&app, &ws.live, &conversations["items"][0]["id"]).await;
        assert_eq!(messages[0]["text"], "before\u{fffd}after");
        let full = app.get(&ws.live, &format!("/api/v1/conversations/{}", conversations["items"][0]["id"])).await.body;
        let contact = app.get(&ws.live, &format!("/api/v1/contacts/{}", full["contact_id"])).await.body;
        assert_eq!(contact["display_name"], "Ana\u{fffd}Nul");
    }
}
