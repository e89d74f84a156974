//! Presence (members' availability from their heartbeat, and who is
//! viewing or typing on a conversation, told to the scope's live streams)
//! and notifications (handoffs, mentions, assignments).

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

    async fn members_are_told_of_handoffs_mentions_and_assignments(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let ben = app.user("ben@example.com", PW, ws.id, Role::Admin).await;
        let ana_token = app.token("ana@example.com", PW).await;
        let ben_token = app.token("ben@example.com", PW).await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let body = json!({"from": "u-1", "text": "Hi", "external_id": "n-1", "contact": {"display_name": "Lia"}});
        let conv = inbound(&app, ch, &secret, body).await.body["conversation_id"].as_i64().unwrap();

        // A handoff to a person (from a key) tells every member.
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{conv}/handoff"), json!({"to": "human", "reason": "Wants a refund"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        // Ben assigns it to Ana (she is told), then Ana mentions Ben in a note.
        let r = app.bearer(Method::POST, &format!("/api/v1/conversations/{conv}/assign"), &ben_token, Some(json!({"user_id": ana}))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let r = app.bearer(Method::POST, &format!("/api/v1/conversations/{conv}/notes"), &ana_token, Some(json!({"text": "@ben@example.com can you approve?"}))).await;
        assert_eq!(r.status, 201, "{}", r.text);
        // Ana assigning it to herself again tells nobody.
        app.bearer(Method::POST, &format!("/api/v1/conversations/{conv}/assign"), &ana_token, Some(json!({"user_id": ana}))).await;

        let mine = |token: String, query: &'static str| {
            let app = &app;
            async move { app.bearer(Method::GET, &format!("/api/v1/notifications{query}"), &token, None).await }
        };
        let a = mine(ana_token.clone(), "").await;
        assert_eq!(a.status, 200, "{}", a.text);
        let kinds = |v: &Value| v["items"].as_array().unwrap().iter().map(|n| n["kind"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(kinds(&a.body), ["assignment", "handoff"], "newest first");
        assert_eq!((a.body["unread"].clone(), a.body["items"][0]["actor_user_id"].clone()), (json!(2), json!(ben)));
        assert_eq!(a.body["items"][0]["text"], "Lia was assigned to you");
        assert_eq!(a.body["items"][1]["text"], "Lia is waiting for a person: Wants a refund");
        let b = mine(ben_token.clone(), "").await;
        assert_eq!(kinds(&b.body), ["mention", "handoff"]);
        assert_eq!(b.body["items"][0]["text"], "You were mentioned in a note on Lia: “@ben@example.com can you approve?”");

        // Read one, then all; another member's notification is not found.
        let first = a.body["items"][0]["id"].as_i64().unwrap();
        assert_eq!(app.bearer(Method::POST, &format!("/api/v1/notifications/{first}/read"), &ana_token, None).await.status, 204);
        let unread = mine(ana_token.clone(), "?unread=true").await;
        assert_eq!((kinds(&unread.body), unread.body["unread"].clone(), unread.body["total"].clone()), (vec!["handoff".to_owned()], json!(1), json!(1)));
        let bens = b.body["items"][0]["id"].as_i64().unwrap();
        assert_eq!(app.bearer(Method::POST, &format!("/api/v1/notifications/{bens}/read"), &ana_token, None).await.status, 404);
        assert_eq!(app.bearer(Method::POST, "/api/v1/notifications/read-all", &ana_token, None).await.status, 204);
        assert_eq!(mine(ana_token.clone(), "").await.body["unread"], 0);
        assert_eq!(mine(ben_token.clone(), "").await.body["unread"], 2, "Ben's stay unread");
        // A key is nobody: no notifications.
        assert_eq!(app.get(&ws.live, "/api/v1/notifications").await.status, 403);
        // The test mode has its own.
        let switched = app.bearer(Method::POST, "/api/v1/auth/workspace", &ana_token, Some(json!({"workspace_id": ws.id, "mode": "test"}))).await;
        assert_eq!(switched.status, 200, "{}", switched.text);
        let test_token = switched.body["access_token"].as_str().unwrap().to_owned();
        assert_eq!(mine(test_token, "").await.body["total"], 0);
    }

    async fn handoffs_are_offered_to_available_members_in_turn_and_again_while_nobody_accepts(backend) {
        let app = TestApp::spawn_with(backend, |s| s.inbox.reoffer_seconds = 1).await;
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let ben = app.user("ben@example.com", PW, ws.id, Role::Member).await;
        let cy = app.user("cy@example.com", PW, ws.id, Role::Member).await;
        let tokens = [app.token("ana@example.com", PW).await, app.token("ben@example.com", PW).await, app.token("cy@example.com", PW).await];
        let beat = |who: usize, status: &'static str| {
            let (app, token) = (&app, tokens[who].clone());
            async move { assert_eq!(app.bearer(Method::POST, "/api/v1/presence", &token, Some(json!({"status": status}))).await.status, 200) }
        };
        beat(0, "online").await;
        beat(1, "online").await;
        beat(2, "away").await; // away is not available
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let mut convs = Vec::new();
        for i in 0..4 {
            let body = json!({"from": format!("u-{i}"), "text": "Hi", "external_id": format!("o-{i}"), "contact": {"display_name": format!("C{i}")}});
            convs.push(inbound(&app, ch, &secret, body).await.body["conversation_id"].as_i64().unwrap());
        }
        let hand = |conv: i64, body: Value| {
            let app = &app;
            let key = ws.live.clone();
            async move {
                let r = app.post(&key, &format!("/api/v1/conversations/{conv}/handoff"), body).await;
                assert_eq!(r.status, 201, "{}", r.text);
                r.body
            }
        };
        // Who holds a handoff notification about `conv`, and how many each.
        let told = |conv: i64| {
            let (app, tokens) = (&app, tokens.clone());
            async move {
                let mut counts = Vec::new();
                for token in tokens {
                    let r = app.bearer(Method::GET, "/api/v1/notifications?limit=200", &token, None).await;
                    counts.push(r.body["items"].as_array().unwrap().iter().filter(|n| n["kind"] == "handoff" && n["conversation_id"] == json!(conv)).count());
                }
                counts
            }
        };

        // Ana and Ben are online, neither offered anything yet: Ana (first by id), then Ben.
        let first = hand(convs[0], json!({"to": "human", "reason": "Refund"})).await;
        assert_eq!((first["offered_user_id"].clone(), first["offers"].clone()), (json!(ana), json!(1)), "{first}");
        let second = hand(convs[1], json!({"to": "human", "reason": "Refund"})).await;
        assert_eq!(second["offered_user_id"], json!(ben));
        assert_eq!((told(convs[0]).await, told(convs[1]).await), (vec![1, 0, 0], vec![0, 1, 0]), "only the member offered is told");
        // A handoff naming Cy is offered to her, though she is away.
        let named = hand(convs[2], json!({"to": "human", "user_id": cy, "reason": "Her customer"})).await;
        assert_eq!(named["offered_user_id"], json!(cy));
        let offered = app.events(ws.id, parley_domain::Mode::Live, "handoff.offered").await;
        assert_eq!(offered.len(), 3, "one handoff.offered per offer");

        // Nobody accepts within the second: each is offered again, to the other member.
        let h0 = first["id"].as_i64().unwrap();
        let reread = |id: i64| {
            let (app, key) = (&app, ws.live.clone());
            async move { app.get(&key, &format!("/api/v1/handoffs/{id}")).await.body }
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while reread(h0).await["offers"] != json!(2) {
            assert!(std::time::Instant::now() < deadline, "handoff {h0} was not offered again");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let again = reread(h0).await;
        assert_eq!(again["offered_user_id"], json!(ben), "the next member in turn: {again}");
        let ben_notes = app.bearer(Method::GET, "/api/v1/notifications", &tokens[1], None).await;
        assert!(ben_notes.body["items"].as_array().unwrap().iter().any(|n| n["text"] == "C0 is still waiting for a person: Refund"), "{}", ben_notes.text);
        let h2 = named["id"].as_i64().unwrap();
        while reread(h2).await["offers"] != json!(2) {
            assert!(std::time::Instant::now() < deadline, "the named member was not told again");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(told(convs[2]).await, vec![0, 0, 2]);

        // Accepted: never offered again.
        let r = app.bearer(Method::POST, &format!("/api/v1/handoffs/{h0}/accept"), &tokens[1], Some(json!({}))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let offers = reread(h0).await["offers"].clone();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(reread(h0).await["offers"], offers, "an accepted handoff was offered again");

        // Nobody online: everyone is told once, not every second after.
        beat(0, "offline").await;
        beat(1, "offline").await;
        let nobody = hand(convs[3], json!({"to": "human", "reason": "Late"})).await;
        assert_eq!((nobody["offered_user_id"].clone(), nobody["offers"].clone()), (Value::Null, json!(1)));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(told(convs[3]).await, vec![1, 1, 1]);
        assert_eq!(reread(nobody["id"].as_i64().unwrap()).await["offers"], json!(1));
        // Ana comes back: the waiting handoff is offered to her.
        beat(0, "online").await;
        let h3 = nobody["id"].as_i64().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while reread(h3).await["offered_user_id"] != json!(ana) {
            assert!(std::time::Instant::now() < deadline, "a member coming online was not offered the waiting handoff");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(told(convs[3]).await, vec![2, 1, 1]);
    }
}
