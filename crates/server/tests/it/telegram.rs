//! Telegram end to end: a local server speaks the Bot API's documented JSON
//! (`getMe`, `setWebhook`, `deleteWebhook`, `getUpdates`, `sendMessage`,
//! `sendPhoto`, `sendDocument`, `getFile` and file downloads) and records
//! what Parley sends; the tests play Telegram's part on the webhook.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use serde_json::{Value, json};

use crate::runtime::{catch_all_agent_with, eventually};
use crate::support::*;

const TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

/// A Bot API call Parley made.
#[derive(Debug, Clone)]
struct Call {
    method: String,
    body: Value,
}

#[derive(Default)]
struct Bot {
    calls: Mutex<Vec<Call>>,
    /// Updates `getUpdates` hands out.
    updates: Mutex<VecDeque<Value>>,
    /// The token the fake accepts (changed to revoke Parley's).
    token: Mutex<String>,
    next_message_id: Mutex<i64>,
}

type Fake = Arc<Bot>;

impl Bot {
    fn calls(&self, method: &str) -> Vec<Value> {
        self.calls.lock().unwrap().iter().filter(|c| c.method == method).map(|c| c.body.clone()).collect()
    }
}

fn refused(code: u16, description: &str) -> (axum::http::StatusCode, axum::Json<Value>) {
    let body = json!({"ok": false, "error_code": code, "description": description});
    (axum::http::StatusCode::from_u16(code).unwrap(), axum::Json(body))
}

fn ok(result: Value) -> (axum::http::StatusCode, axum::Json<Value>) {
    (axum::http::StatusCode::OK, axum::Json(json!({"ok": true, "result": result})))
}

/// The Bot API: `POST /bot<token>/<method>` with a JSON body.
async fn bot_api() -> (String, Fake) {
    async fn method(
        State(bot): State<Fake>,
        Path((bot_token, method)): Path<(String, String)>,
        body: String,
    ) -> (axum::http::StatusCode, axum::Json<Value>) {
        if bot_token.strip_prefix("bot") != Some(bot.token.lock().unwrap().as_str()) {
            return refused(401, "Unauthorized");
        }
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        bot.calls.lock().unwrap().push(Call { method: method.clone(), body: body.clone() });
        match method.as_str() {
            "getMe" => ok(json!({"id": 123456789, "is_bot": true, "first_name": "Shop", "username": "shop_bot"})),
            "setWebhook" | "deleteWebhook" => ok(json!(true)),
            "getUpdates" => {
                let offset = body["offset"].as_i64().unwrap_or(0);
                let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(2));
                let deadline = tokio::time::Instant::now() + wait;
                loop {
                    let found: Vec<Value> = {
                        let mut updates = bot.updates.lock().unwrap();
                        // Updates below the offset are confirmed: forgotten.
                        updates.retain(|u| u["update_id"].as_i64().unwrap() >= offset);
                        updates.iter().cloned().collect()
                    };
                    if !found.is_empty() || tokio::time::Instant::now() >= deadline {
                        return ok(json!(found));
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            "sendMessage" | "sendPhoto" | "sendDocument" => {
                if body["chat_id"] == "666" {
                    return refused(403, "Forbidden: bot was blocked by the user");
                }
                let id = {
                    let mut n = bot.next_message_id.lock().unwrap();
                    *n += 1;
                    *n
                };
                let chat: i64 = body["chat_id"].as_str().unwrap().parse().unwrap();
                ok(json!({"message_id": id, "date": 1_790_000_000, "chat": {"id": chat, "type": "private"}}))
            }
            "getFile" => {
                let file_id = body["file_id"].as_str().unwrap();
                ok(
                    json!({"file_id": file_id, "file_unique_id": "u1", "file_size": 12, "file_path": format!("photos/{file_id}.jpg")}),
                )
            }
            _ => refused(404, "Not Found: method not found"),
        }
    }
    async fn file(
        State(bot): State<Fake>,
        Path((bot_token, path)): Path<(String, String)>,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        if bot_token.strip_prefix("bot") != Some(bot.token.lock().unwrap().as_str()) {
            return refused(401, "Unauthorized").into_response();
        }
        file_bytes(&path).into_response()
    }
    let bot: Fake = Arc::default();
    *bot.token.lock().unwrap() = TOKEN.to_owned();
    *bot.next_message_id.lock().unwrap() = 9000;
    let app = axum::Router::new()
        .route("/{bot}/{method}", axum::routing::post(method))
        .route("/file/{bot}/{*path}", axum::routing::get(file))
        .with_state(bot.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, bot)
}

fn file_bytes(path: &str) -> Vec<u8> {
    format!("JPEG bytes of {path}").into_bytes()
}

/// A private message from user 111 (Ana Pérez).
fn private_update(update_id: i64, message_id: i64, text: &str) -> Value {
    json!({"update_id": update_id, "message": {"message_id": message_id, "date": 1_790_000_000,
        "from": {"id": 111, "is_bot": false, "first_name": "Ana", "last_name": "Pérez", "username": "ana_p", "language_code": "es"},
        "chat": {"id": 111, "type": "private", "first_name": "Ana", "last_name": "Pérez", "username": "ana_p"},
        "text": text}})
}

async fn post_update(app: &TestApp, public_id: &str, secret: Option<&str>, update: &Value) -> u16 {
    let mut request = app.client.post(app.url(&format!("/hooks/telegram/{public_id}"))).json(update);
    if let Some(secret) = secret {
        request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
    }
    request.send().await.unwrap().status().as_u16()
}

async fn public_id(app: &TestApp, ws: &Ws, id: i64) -> String {
    let mut c = app.db.read().await.unwrap();
    let scope = parley_domain::Scope::new(ws.id, parley_domain::Mode::Live);
    parley_store::repo::channels::get(&mut c, scope, id).await.unwrap().unwrap().public_id
}

async fn thread(app: &TestApp, key: &str, conversation: &Value) -> Vec<Value> {
    let page = app.get(key, &format!("/api/v1/conversations/{conversation}/messages?limit=100")).await.body;
    page["items"].as_array().unwrap().clone()
}

both_backends! {
    async fn a_telegram_bot_registers_its_webhook_answers_private_and_group_chats_and_fetches_photos(backend) {
        let (telegram, bot) = bot_api().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "telegram", "name": "Shop bot",
            "config": {"bot_token": TOKEN, "base_url": telegram}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert!(!r.text.contains(TOKEN), "the token is write-only: {}", r.text);
        assert_eq!(r.body["secrets_set"], json!(["bot_token"]));
        let id = r.body["id"].as_i64().unwrap();
        let public_id = public_id(&app, &ws, id).await;
        assert!(public_id.starts_with("tg_"), "{public_id}");

        // Created: Parley checks the token and registers its webhook with a secret token.
        let registered = eventually("setWebhook was called", || async { bot.calls("setWebhook").first().cloned() }).await;
        assert_eq!(registered["url"], app.url(&format!("/hooks/telegram/{public_id}")));
        let secret = registered["secret_token"].as_str().unwrap().to_owned();
        assert!(secret.len() >= 32 && secret.chars().all(|c| c.is_ascii_alphanumeric()), "{secret}");
        assert_eq!(bot.calls("getMe").len(), 1);
        catch_all_agent_with(&app, &ws.live, json!({"name": "Ava", "tools": []})).await;

        // Without the secret token, or with another: 401, nothing stored.
        let update = private_update(1000, 1, "Hola, where is my order?");
        assert_eq!(post_update(&app, &public_id, None, &update).await, 401);
        assert_eq!(post_update(&app, &public_id, Some("not-the-secret"), &update).await, 401);
        assert_eq!(post_update(&app, "tg_nosuchchannel", Some(&secret), &update).await, 401);
        assert_eq!(app.get(&ws.live, "/api/v1/conversations?channel=telegram").await.body["total"], 0);

        // Telegram's: stored once however often it comes.
        for _ in 0..2 {
            assert_eq!(post_update(&app, &public_id, Some(&secret), &update).await, 200);
        }
        let conversations = app.get(&ws.live, "/api/v1/conversations?channel=telegram").await.body;
        assert_eq!(conversations["total"], 1, "{conversations}");
        let conversation = conversations["items"][0].clone();
        assert_eq!((conversation["channel_ref"].clone(), conversation["kind"].clone()), (json!("telegram:111"), json!("direct")));
        let full = app.get(&ws.live, &format!("/api/v1/conversations/{}", conversation["id"])).await.body;
        let contact = app.get(&ws.live, &format!("/api/v1/contacts/{}", full["contact_id"])).await.body;
        assert_eq!(contact["display_name"], "Ana Pérez");
        assert_eq!(contact["identities"], json!([{"channel": "telegram", "address": "111"}]));
        let messages = thread(&app, &ws.live, &conversation["id"]).await;
        assert_eq!(messages[0]["external_id"], "111:1");

        // The agent answers through sendMessage, in HTML with everything escaped.
        let reply = eventually("the agent's reply was sent", || async { bot.calls("sendMessage").first().cloned() }).await;
        assert_eq!((reply["chat_id"].clone(), reply["parse_mode"].clone()), (json!("111"), json!("HTML")));
        let sent = eventually("the reply is sent", || async {
            let m = thread(&app, &ws.live, &conversation["id"]).await;
            m.iter().find(|m| m["direction"] == "outbound" && m["status"] == "sent").cloned()
        }).await;
        assert!(sent["external_id"].as_str().unwrap().starts_with("111:"), "{sent}");

        // Markup and a picture: one sendPhoto with the rendered caption and the file's signed link.
        let png = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b"\x89PNG fake");
        let r = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": conversation["id"],
            "text": "**Order 12** ships <today> & tomorrow", "attachments": [{"filename": "map.png", "content_type": "image/png", "data": png}]})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let photo = eventually("the photo was sent", || async { bot.calls("sendPhoto").first().cloned() }).await;
        assert_eq!(photo["caption"], "<b>Order 12</b> ships &lt;today&gt; &amp; tomorrow");
        let link = photo["photo"].as_str().unwrap();
        let got = app.client.get(link).send().await.unwrap().bytes().await.unwrap();
        assert_eq!(&got[..], b"\x89PNG fake", "the link Telegram fetches gives the file");

        // A photo from the contact: the largest size fetched with getFile.
        let photo_update = json!({"update_id": 1001, "message": {"message_id": 2, "date": 1_790_000_100,
            "from": {"id": 111, "is_bot": false, "first_name": "Ana"}, "chat": {"id": 111, "type": "private"},
            "caption": "the box arrived like this",
            "photo": [{"file_id": "small", "file_unique_id": "s1", "width": 90, "height": 90},
                      {"file_id": "large", "file_unique_id": "l1", "width": 1280, "height": 960}]}});
        assert_eq!(post_update(&app, &public_id, Some(&secret), &photo_update).await, 200);
        let messages = thread(&app, &ws.live, &conversation["id"]).await;
        let with_photo = messages.iter().find(|m| m["direction"] == "inbound" && m["external_id"] == "111:2").unwrap();
        assert_eq!(with_photo["text"], "the box arrived like this");
        assert_eq!(with_photo["attachments"][0]["filename"], "photo-l1.jpg", "{with_photo}");
        let url = with_photo["attachments"][0]["url"].as_str().unwrap();
        assert_eq!(app.client.get(url).send().await.unwrap().bytes().await.unwrap().to_vec(), file_bytes("photos/large.jpg"));
        assert_eq!(bot.calls("getFile"), vec![json!({"file_id": "large"})]);

        // An edit, and a member joining: acknowledged, nothing stored.
        let edit = json!({"update_id": 1002, "edited_message": {"message_id": 1, "date": 1, "edit_date": 2,
            "from": {"id": 111, "is_bot": false, "first_name": "Ana"}, "chat": {"id": 111, "type": "private"}, "text": "edited"}});
        assert_eq!(post_update(&app, &public_id, Some(&secret), &edit).await, 200);
        assert_eq!(thread(&app, &ws.live, &conversation["id"]).await.iter().filter(|m| m["direction"] == "inbound").count(), 2);
        // Not an update at all: 422.
        assert_eq!(post_update(&app, &public_id, Some(&secret), &json!({"hello": 1})).await, 422);

        // A group: the conversation is the group's; the member is a contact of their own.
        let group = json!({"update_id": 1003, "message": {"message_id": 7, "date": 1_790_000_200,
            "from": {"id": 222, "is_bot": false, "first_name": "Bob"},
            "chat": {"id": -1001234567890i64, "type": "supergroup", "title": "Shop fans"}, "text": "Any discounts today?"}});
        assert_eq!(post_update(&app, &public_id, Some(&secret), &group).await, 200);
        let groups = app.get(&ws.live, "/api/v1/conversations?kind=group").await.body;
        assert_eq!(groups["total"], 1, "{groups}");
        let g = &groups["items"][0];
        assert_eq!((g["title"].clone(), g["channel_ref"].clone()), (json!("Shop fans"), json!("telegram:-1001234567890")));
        let message = thread(&app, &ws.live, &g["id"]).await[0].clone();
        let bob = app.get(&ws.live, &format!("/api/v1/contacts/{}", message["author"]["id"])).await.body;
        assert_eq!((bob["display_name"].clone(), bob["identities"].clone()),
            (json!("Bob"), json!([{"channel": "telegram", "address": "222"}])), "{message}");
        let to_group = eventually("the agent answered in the group", || async {
            bot.calls("sendMessage").into_iter().find(|c| c["chat_id"] == "-1001234567890")
        }).await;
        assert_eq!(to_group["parse_mode"], "HTML");

        // A user who blocked the bot: that message fails (403), the channel stays active.
        let r = app.post(&ws.live, "/api/v1/messages", json!({"channel_id": id, "to": "666", "text": "Hello?"})).await;
        assert_eq!(r.status, 202, "{}", r.text);
        let failed = eventually("the send failed", || async {
            let m = app.get(&ws.live, &format!("/api/v1/messages/{}", r.body["id"])).await.body;
            (m["status"] == "failed").then_some(m)
        }).await;
        assert!(failed["error"].as_str().unwrap().contains("blocked"), "{failed}");
        assert_eq!(app.get(&ws.live, &format!("/api/v1/channels/{id}")).await.body["status"], "active");
    }

    async fn a_polling_telegram_channel_takes_updates_with_get_updates_and_stops_on_a_revoked_token(backend) {
        let (telegram, bot) = bot_api().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        bot.updates.lock().unwrap().push_back(private_update(500, 10, "Is anyone there?"));
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "telegram", "name": "Shop bot",
            "config": {"bot_token": TOKEN, "base_url": telegram, "updates": "polling"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_i64().unwrap();

        // The webhook is removed (Telegram refuses getUpdates while one is set), then updates are polled.
        let conversation = eventually("the polled message was stored", || async {
            let c = app.get(&ws.live, "/api/v1/conversations?channel=telegram").await.body;
            c["items"].as_array().unwrap().first().cloned()
        }).await;
        assert_eq!(bot.calls("deleteWebhook").len(), 1);
        assert!(bot.calls("setWebhook").is_empty());
        assert_eq!(thread(&app, &ws.live, &conversation["id"]).await[0]["text"], "Is anyone there?");
        // The next poll confirms it (offset = update_id + 1); a second update arrives in turn.
        bot.updates.lock().unwrap().push_back(private_update(501, 11, "Hello?"));
        eventually("the second update was stored", || async {
            (thread(&app, &ws.live, &conversation["id"]).await.len() >= 2).then_some(())
        }).await;
        eventually("the poll confirmed both", || async {
            bot.calls("getUpdates").iter().any(|c| c["offset"] == 502).then_some(())
        }).await;
        let inbound = thread(&app, &ws.live, &conversation["id"]).await.into_iter().filter(|m| m["direction"] == "inbound").count();
        assert_eq!(inbound, 2, "each update stored once");
        let polls = parley_store::repo::jobs::of_kind(&mut app.db.read().await.unwrap(), "channel.poll").await.unwrap();
        assert_eq!(polls.iter().filter(|j| j.status == "pending").count(), 1, "one poll chain");

        // The token is revoked: the channel goes to error and polling stops.
        *bot.token.lock().unwrap() = "999:revoked".to_owned();
        let channel = eventually("the channel went to error", || async {
            let c = app.get(&ws.live, &format!("/api/v1/channels/{id}")).await.body;
            (c["status"] == "error").then_some(c)
        }).await;
        assert!(channel["status_reason"].as_str().unwrap().contains("Unauthorized"), "{channel}");
        assert!(!channel["status_reason"].as_str().unwrap().contains(TOKEN), "the token never shows: {channel}");
        let polls = parley_store::repo::jobs::of_kind(&mut app.db.read().await.unwrap(), "channel.poll").await.unwrap();
        assert_eq!(polls.iter().filter(|j| j.status == "pending").count(), 0, "polling stopped");

        // A working token again, checked: active, and polling resumes.
        *bot.token.lock().unwrap() = TOKEN.to_owned();
        let r = app.post(&ws.live, &format!("/api/v1/channels/{id}/check"), json!({})).await;
        assert_eq!((r.body["ok"].clone(), r.body["channel"]["status"].clone()), (json!(true), json!("active")), "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().contains("@shop_bot"), "{}", r.text);
        bot.updates.lock().unwrap().push_back(private_update(502, 12, "Back again"));
        eventually("polling resumed", || async {
            (thread(&app, &ws.live, &conversation["id"]).await.iter().any(|m| m["text"] == "Back again")).then_some(())
        }).await;
    }
}

both_backends! {
    // Issue 31: a NUL in Telegram's text was a 500 on PostgreSQL.
    async fn a_nul_in_telegram_text_is_stored_as_a_replacement_character(backend) {
        let (telegram, bot) = bot_api().await;
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Shop").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "telegram", "name": "Shop bot",
            "config": {"bot_token": TOKEN, "base_url": telegram}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let public_id = public_id(&app, &ws, r.body["id"].as_i64().unwrap()).await;
        let registered = eventually("setWebhook was called", || async { bot.calls("setWebhook").first().cloned() }).await;
        let secret = registered["secret_token"].as_str().unwrap().to_owned();
        let update = private_update(2000, 7, "nul\u{0}here");
        assert_eq!(post_update(&app, &public_id, Some(&secret), &update).await, 200);
        let conversations = app.get(&ws.live, "/api/v1/conversations?channel=telegram").await.body;
        let messages = thread(&app, &ws.live, &conversations["items"][0]["id"]).await;
        assert_eq!(messages[0]["text"], "nul\u{fffd}here");
    }
}
