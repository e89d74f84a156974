//! Private notes: kept with the team, never sent, naming who they mention.

use parley_domain::Mode;
use parley_domain::user::Role;
use reqwest::Method;
use serde_json::{Value, json};

use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::Receiver;
use crate::support::*;

const PW: &str = "correct horse battery";

both_backends! {
    async fn notes_stay_with_the_team_and_name_who_they_mention(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let ben = app.user("ben@example.com", PW, ws.id, Role::Admin).await;
        let token = app.token("ana@example.com", PW).await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Where is my refund?", "external_id": "n-1"})).await.body["conversation_id"].clone();
        let path = format!("/api/v1/conversations/{conv}/notes");

        // Ana writes a note mentioning Ben (and someone who is no member): kept as written.
        let text = "Refund approved? @Ben@example.com and @zed@example.com, see <b>the order</b>";
        let r = app.bearer(Method::POST, &path, &token, Some(json!({"text": text}))).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!((r.body["conversation_id"].clone(), r.body["author_user_id"].clone(), r.body["text"].clone(), r.body["mentions"].clone()), (conv.clone(), json!(ana), json!(text), json!([ben])));
        // With an API key there is no author.
        let r = app.post(&ws.live, &path, json!({"text": "Synced from the CRM"})).await;
        assert_eq!((r.status, r.body["author_user_id"].clone(), r.body["mentions"].clone()), (201, Value::Null, json!([])), "{}", r.text);

        let list = app.get(&ws.live, &path).await.body;
        assert_eq!(list["total"], 2);
        assert_eq!(list["items"][0]["text"], text, "oldest first");
        assert_eq!(list["items"][1]["text"], "Synced from the CRM");
        let events = app.events(ws.id, Mode::Live, "note.created").await;
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].data["mentions"], json!([ben]), "the event names who to tell");

        // Never sent, never a message: the provider heard nothing and the thread is unchanged.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(rx.received().is_empty(), "a note reached the provider");
        let thread = app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body;
        assert_eq!(thread["total"], 1, "{thread}");

        // Bad input, every fault named; other scopes see no such conversation.
        let r = app.post(&ws.live, &path, json!({"text": "", "pinned": true})).await;
        let mut faults = r.faults();
        faults.sort();
        assert_eq!(faults, [(r#"["body","pinned"]"#.to_owned(), "value_error.extra".to_owned()), (r#"["body","text"]"#.to_owned(), "value_error.string.too_short".to_owned())], "{}", r.text);
        assert_eq!(app.post(&ws.live, &path, json!({"text": "x".repeat(10_001)})).await.faults(), [(r#"["body","text"]"#.to_owned(), "value_error.string.too_long".to_owned())]);
        let other = app.workspace("Other").await;
        for key in [&other.live, &ws.test] {
            let r = app.post(key, &path, json!({"text": "Peek"})).await;
            assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Conversation {conv} not found"))));
            assert_eq!(app.get(key, &path).await.status, 404);
        }
        assert_eq!(app.get(&ws.live, "/api/v1/conversations/999999/notes").await.status, 404);
    }
}
