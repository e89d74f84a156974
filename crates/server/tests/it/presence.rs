//! Presence: members' availability from their heartbeat, and who is
//! viewing or typing on a conversation, told to the scope's live streams.

use std::time::Duration;

use parley_domain::user::Role;
use reqwest::Method;
use serde_json::{Value, json};

use crate::conversations::{api_channel, inbound};
use crate::stream::SseReader;
use crate::support::*;

const PW: &str = "correct horse battery";

both_backends! {
    async fn heartbeats_set_availability_and_tell_the_streams_who_is_typing(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let ben = app.user("ben@example.com", PW, ws.id, Role::Admin).await;
        let ana_token = app.token("ana@example.com", PW).await;
        let ben_token = app.token("ben@example.com", PW).await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let conv = inbound(&app, ch, &secret, json!({"from": "u-1", "text": "Hi", "external_id": "p-1"})).await.body["conversation_id"].as_i64().unwrap();

        // Ben watches the workspace; a stream that asked for messages only hears no presence.
        let bearer = format!("Bearer {ben_token}");
        let (_, mut ben_stream) = SseReader::open(&app, "", ("authorization", &bearer), None).await;
        let (_, mut messages_only) = SseReader::open(&app, "?types=message.*", ("x-api-key", &ws.live), None).await;

        let r = app.bearer(Method::POST, "/api/v1/presence", &ana_token, Some(json!({"status": "online", "conversation_id": conv, "activity": "typing"}))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!((r.body["user_id"].clone(), r.body["email"].clone(), r.body["activity"].clone()), (json!(ana), json!("ana@example.com"), json!("typing")));
        let seen = ben_stream.until("presence", Duration::from_secs(5), |d| d["user_id"] == json!(ana)).await;
        let frame = seen.last().unwrap();
        assert_eq!(frame.id, None, "presence is never replayed: no id");
        assert_eq!((frame.data["conversation_id"].clone(), frame.data["activity"].clone(), frame.data["status"].clone()), (json!(conv), json!("typing"), json!("online")));
        // Viewing is the default activity on a conversation; none without one.
        let r = app.bearer(Method::POST, "/api/v1/presence", &ana_token, Some(json!({"status": "away"}))).await;
        assert_eq!((r.body["conversation_id"].clone(), r.body["activity"].clone()), (Value::Null, Value::Null));
        assert!(messages_only.next(Duration::from_millis(500)).await.is_none(), "a stream of messages heard presence");

        // Availability: Ana away (her last beat), Ben offline (never beat).
        let list = app.get(&ws.live, "/api/v1/presence").await;
        assert_eq!(list.status, 200, "{}", list.text);
        let status_of = |id: i64| list.body["items"].as_array().unwrap().iter().find(|m| m["user_id"] == json!(id)).unwrap()["status"].clone();
        assert_eq!((status_of(ana), status_of(ben)), (json!("away"), json!("offline")));

        // Only members have a presence; other scopes' conversations are not found.
        let r = app.post(&ws.live, "/api/v1/presence", json!({"status": "online"})).await;
        assert_eq!(r.status, 403, "{}", r.text);
        let other = app.workspace("Other").await;
        let (och, osecret) = api_channel(&app, &other.live).await;
        let foreign = inbound(&app, och, &osecret, json!({"from": "u-2", "text": "Hi", "external_id": "p-2"})).await.body["conversation_id"].as_i64().unwrap();
        for id in [foreign, 999_999] {
            let r = app.bearer(Method::POST, "/api/v1/presence", &ana_token, Some(json!({"status": "online", "conversation_id": id}))).await;
            assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Conversation {id} not found"))));
        }
        let r = app.bearer(Method::POST, "/api/v1/presence", &ana_token, Some(json!({"status": "busy", "activity": "sleeping"}))).await;
        let mut faults = r.faults();
        faults.sort();
        assert_eq!(faults, [(r#"["body","activity"]"#.to_owned(), "value_error.enum".to_owned()), (r#"["body","status"]"#.to_owned(), "value_error.enum".to_owned())], "{}", r.text);
    }
}
