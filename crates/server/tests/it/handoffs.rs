//! Handoffs between agents and humans, and the rule that no agent writes
//! while a human handles (or is about to handle) a conversation.

use parley_domain::Mode;
use parley_domain::user::Role;
use reqwest::Method;
use serde_json::{Value, json};

use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::Receiver;
use crate::support::*;

struct Setup {
    app: TestApp,
    ws: Ws,
    conv: i64,
    agent: i64,
    user: i64,
    token: String,
    _rx: Receiver,
}

async fn setup(backend: Backend) -> Setup {
    let app = TestApp::spawn(backend).await;
    let ws = app.workspace("Acme").await;
    let user = app.user("ana@example.com", "correct horse battery", ws.id, Role::Member).await;
    let token = app.token("ana@example.com", "correct horse battery").await;
    let rx = Receiver::start().await;
    let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
    let r = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "I want a human", "external_id": "e1"})).await;
    let conv = r.body["conversation_id"].as_i64().unwrap();
    let agent = app.create_agent(&ws.live, json!({"name": "Support"})).await["id"].as_i64().unwrap();
    assert_eq!(
        app.patch(&ws.live, &format!("/api/v1/conversations/{conv}"), json!({"agent_id": agent})).await.status,
        200
    );
    Setup { app, ws, conv, agent, user, token, _rx: rx }
}

impl Setup {
    /// An agent's reply (API key): its status code.
    async fn agent_reply(&self) -> u16 {
        self.app
            .post(&self.ws.live, "/api/v1/messages", json!({"conversation_id": self.conv, "text": "Agent here"}))
            .await
            .status
    }

    async fn conversation(&self) -> Value {
        self.app.get(&self.ws.live, &format!("/api/v1/conversations/{}", self.conv)).await.body
    }

    async fn handoff(&self, body: Value) -> Resp {
        self.app.post(&self.ws.live, &format!("/api/v1/conversations/{}/handoff", self.conv), body).await
    }
}

both_backends! {
    async fn a_handoff_to_a_human_stops_agent_replies_until_it_completes(backend) {
        let s = setup(backend).await;
        let (app, ws) = (&s.app, &s.ws);
        assert_eq!(s.agent_reply().await, 202);
        assert_eq!(s.conversation().await["handler"], "agent");

        let r = s.handoff(json!({"to": "human", "reason": "Customer asked for a person", "note": "VIP"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let h = r.body["id"].as_i64().unwrap();
        assert_eq!((r.body["status"].clone(), r.body["to"].clone(), r.body["requested_by"].clone()), (json!("requested"), json!("human"), json!({"type": "system", "id": null})));
        // Waiting for a human: nobody's agent writes.
        assert_eq!(s.conversation().await["handler"], "none");
        let refused = app.post(&ws.live, "/api/v1/messages", json!({"conversation_id": s.conv, "text": "Agent here"})).await;
        assert_eq!(refused.status, 409);
        assert!(refused.body["detail"].as_str().unwrap().contains("handled by a human"), "{}", refused.text);
        // One open handoff per conversation.
        assert_eq!(s.handoff(json!({"to": "human", "reason": "again"})).await.status, 409);

        // Ana accepts with her session (no user_id needed).
        let r = app.bearer(Method::POST, &format!("/api/v1/handoffs/{h}/accept"), &s.token, Some(json!({}))).await;
        assert_eq!((r.status, r.body["status"].clone(), r.body["user_id"].clone()), (200, json!("accepted"), json!(s.user)), "{}", r.text);
        assert!(r.body["accepted_at"].is_string());
        let c = s.conversation().await;
        assert_eq!((c["handler"].clone(), c["assignee_user_id"].clone()), (json!("human"), json!(s.user)));
        assert_eq!(s.agent_reply().await, 409);
        let mine = app.bearer(Method::POST, "/api/v1/messages", &s.token, Some(json!({"conversation_id": s.conv, "text": "Ana here"}))).await;
        assert_eq!((mine.status, mine.body["author"].clone()), (202, json!({"type": "user", "id": s.user})));
        // Accepting it again says who holds it.
        let again = app.bearer(Method::POST, &format!("/api/v1/handoffs/{h}/accept"), &s.token, Some(json!({}))).await;
        assert_eq!((again.status, again.body["detail"].clone()), (409, json!(format!("Handoff {h} was already accepted by ana@example.com (user {})", s.user))));

        let r = app.post(&ws.live, &format!("/api/v1/handoffs/{h}/complete"), json!({})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("completed")), "{}", r.text);
        let c = s.conversation().await;
        assert_eq!((c["handler"].clone(), c["assignee_user_id"].clone(), c["agent_id"].clone(), c["status"].clone()), (json!("agent"), Value::Null, json!(s.agent), json!("open")));
        assert_eq!(s.agent_reply().await, 202);
        assert_eq!(app.post(&ws.live, &format!("/api/v1/handoffs/{h}/cancel"), json!({})).await.status, 409);

        for kind in ["handoff.requested", "handoff.accepted", "handoff.completed"] {
            let events = app.events(ws.id, Mode::Live, kind).await;
            assert_eq!((events.len(), events[0].data["id"].clone()), (1, json!(h)), "{kind}");
        }
        let list = app.get(&ws.live, &format!("/api/v1/handoffs?conversation_id={}&status=completed", s.conv)).await.body;
        assert_eq!((list["total"].clone(), list["items"][0]["id"].clone()), (json!(1), json!(h)));
        assert_eq!(app.get(&ws.live, "/api/v1/handoffs?status=requested").await.body["total"], 0);
    }

    async fn two_people_accepting_one_handoff_one_wins_and_the_other_is_told_who(backend) {
        let s = setup(backend).await;
        let app = &s.app;
        let ben = app.user("ben@example.com", "another long password", s.ws.id, Role::Member).await;
        let ben_token = app.token("ben@example.com", "another long password").await;
        for round in 0..3 {
            let r = s.handoff(json!({"to": "human", "reason": format!("round {round}")})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            let path = format!("/api/v1/handoffs/{}/accept", r.body["id"]);
            let (a, b) = tokio::join!(
                app.bearer(Method::POST, &path, &s.token, Some(json!({}))),
                app.bearer(Method::POST, &path, &ben_token, Some(json!({}))),
            );
            let (winner, loser, who) = match (a.status, b.status) {
                (200, 409) => (a, b, format!("ana@example.com (user {})", s.user)),
                (409, 200) => (b, a, format!("ben@example.com (user {ben})")),
                other => panic!("round {round}: exactly one accept wins, got {other:?}: {} / {}", a.text, b.text),
            };
            assert_eq!(loser.body["detail"], json!(format!("Handoff {} was already accepted by {who}", winner.body["id"])));
            assert_eq!(s.conversation().await["assignee_user_id"], winner.body["user_id"]);
            let done = app.post(&s.ws.live, &format!("/api/v1/handoffs/{}/complete", winner.body["id"]), json!({})).await;
            assert_eq!(done.status, 200, "{}", done.text);
        }
        assert_eq!(app.events(s.ws.id, Mode::Live, "handoff.accepted").await.len(), 3, "one acceptance each");
    }

    async fn conversations_are_assigned_to_members_and_given_back_to_agents(backend) {
        let s = setup(backend).await;
        let (app, ws) = (&s.app, &s.ws);
        let (assign_path, give_back_path) = (format!("/api/v1/conversations/{}/assign", s.conv), format!("/api/v1/conversations/{}/give-back", s.conv));
        let assign = |body: Value| app.post(&ws.live, &assign_path, body);
        let give_back = |body: Value| app.post(&ws.live, &give_back_path, body);

        // Assignment names the owner and leaves the agent answering.
        let r = assign(json!({"user_id": s.user})).await;
        assert_eq!((r.status, r.body["assignee_user_id"].clone(), r.body["handler"].clone()), (200, json!(s.user), json!("agent")), "{}", r.text);
        assert_eq!(s.agent_reply().await, 202);
        assert_eq!(assign(json!({"user_id": null})).await.body["assignee_user_id"], Value::Null);
        let updates = app.events(ws.id, Mode::Live, "conversation.updated").await;
        assert_eq!(updates[0].data["assignee_user_id"], Value::Null, "each assignment is an event");
        assert_eq!(updates[1].data["assignee_user_id"], json!(s.user));
        // Bad input, named at its field; a foreign conversation is missing.
        assert_eq!(assign(json!({})).await.faults(), [(r#"["body","user_id"]"#.to_owned(), "value_error.missing".to_owned())]);
        assert_eq!(assign(json!({"user_id": 999_999})).await.status, 422);
        let other = app.workspace("Other").await;
        let r = app.post(&other.live, &format!("/api/v1/conversations/{}/assign", s.conv), json!({"user_id": null})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Conversation {} not found", s.conv))));

        // A person took over; giving it back completes the handoff and the agent answers again.
        let h = s.handoff(json!({"to": "human", "reason": "asked for a person"})).await.body["id"].clone();
        assert_eq!(app.bearer(Method::POST, &format!("/api/v1/handoffs/{h}/accept"), &s.token, Some(json!({}))).await.status, 200);
        assert_eq!(s.agent_reply().await, 409);
        let r = give_back(json!({})).await;
        assert_eq!((r.status, r.body["handler"].clone(), r.body["assignee_user_id"].clone(), r.body["agent_id"].clone()), (200, json!("agent"), Value::Null, json!(s.agent)), "{}", r.text);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/handoffs/{h}")).await.body["status"], "completed");
        assert_eq!(s.agent_reply().await, 202);

        // A handoff still waiting is canceled; another agent can be named.
        let second = app.create_agent(&ws.live, json!({"name": "Billing"})).await["id"].clone();
        let h = s.handoff(json!({"to": "human", "reason": "again"})).await.body["id"].clone();
        let r = give_back(json!({"agent_id": second})).await;
        assert_eq!((r.status, r.body["agent_id"].clone()), (200, second.clone()), "{}", r.text);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/handoffs/{h}")).await.body["status"], "canceled");
        assert_eq!(app.events(ws.id, Mode::Live, "handoff.canceled").await.len(), 1);
        let r = give_back(json!({"agent_id": 999_999})).await;
        assert_eq!(r.faults(), [(r#"["body","agent_id"]"#.to_owned(), "value_error.not_found".to_owned())], "{}", r.text);
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/agents/{second}")).await.status, 204);
        assert_eq!(give_back(json!({"agent_id": second})).await.status, 409);

        // A conversation no agent ever had needs one named.
        let (ch, secret) = crate::conversations::api_channel(app, &ws.live).await;
        let lone = inbound(app, ch, &secret, json!({"from": "user-7", "text": "Anyone?", "external_id": "lone-1"})).await.body["conversation_id"].clone();
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{lone}/give-back"), json!({})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Conversation {lone} has no agent yet; name one with agent_id"))));
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{lone}/give-back"), json!({"agent_id": s.agent})).await;
        assert_eq!((r.status, r.body["agent_id"].clone()), (200, json!(s.agent)), "{}", r.text);

        // Closed is final.
        assert_eq!(app.patch(&ws.live, &format!("/api/v1/conversations/{}", s.conv), json!({"status": "closed"})).await.status, 200);
        assert_eq!(assign(json!({"user_id": s.user})).await.status, 409);
        assert_eq!(give_back(json!({})).await.status, 409);
    }

    async fn handoffs_cancel_close_and_go_to_agents(backend) {
        let s = setup(backend).await;
        let (app, ws) = (&s.app, &s.ws);
        // Canceled: the agent answers again.
        let h = s.handoff(json!({"to": "human", "reason": "r"})).await.body["id"].as_i64().unwrap();
        let r = app.post(&ws.live, &format!("/api/v1/handoffs/{h}/cancel"), json!({})).await;
        assert_eq!((r.status, r.body["status"].clone()), (200, json!("canceled")));
        assert_eq!(s.conversation().await["handler"], "agent");
        assert_eq!(app.events(ws.id, Mode::Live, "handoff.canceled").await.len(), 1);

        // To another agent: at once.
        let other = app.create_agent(&ws.live, json!({"name": "Billing"})).await["id"].as_i64().unwrap();
        let r = s.handoff(json!({"to": "agent", "agent_id": other, "reason": "billing question"})).await;
        assert_eq!((r.status, r.body["status"].clone(), r.body["agent_id"].clone()), (201, json!("completed"), json!(other)), "{}", r.text);
        let c = s.conversation().await;
        assert_eq!((c["handler"].clone(), c["agent_id"].clone()), (json!("agent"), json!(other)));

        // A requested handoff cannot complete; an API key accepts for a named user.
        let h = s.handoff(json!({"to": "human", "user_id": s.user, "reason": "r"})).await.body["id"].as_i64().unwrap();
        let r = app.post(&ws.live, &format!("/api/v1/handoffs/{h}/complete"), json!({})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Handoff {h} is requested; only an accepted handoff can be completed (cancel it instead)"))));
        let r = app.post(&ws.live, &format!("/api/v1/handoffs/{h}/accept"), json!({})).await;
        let error = &r.body["detail"][0];
        assert_eq!((r.status, error["loc"].clone(), error["type"].clone()), (422, json!(["body", "user_id"]), json!("value_error.user.required_with_key")));
        let stranger = app.user("bo@example.com", "correct horse battery", app.workspace("Other").await.id, Role::Member).await;
        let r = app.post(&ws.live, &format!("/api/v1/handoffs/{h}/accept"), json!({"user_id": stranger})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.not_found")));
        assert_eq!(app.post(&ws.live, &format!("/api/v1/handoffs/{h}/accept"), json!({"user_id": s.user})).await.status, 200);
        // Completed with close: the conversation is closed for good.
        let r = app.post(&ws.live, &format!("/api/v1/handoffs/{h}/complete"), json!({"close": true})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let c = s.conversation().await;
        assert_eq!((c["status"].clone(), c["handler"].clone()), (json!("closed"), json!("none")));
        assert_eq!(s.handoff(json!({"to": "human", "reason": "r"})).await.status, 409);
    }

    async fn handoff_requests_are_validated(backend) {
        let s = setup(backend).await;
        let cases = [
            (json!({"reason": "r"}), json!(["body", "to"])),
            (json!({"to": "robot", "reason": "r"}), json!(["body", "to"])),
            (json!({"to": "human"}), json!(["body", "reason"])),
            (json!({"to": "agent", "reason": "r"}), json!(["body", "agent_id"])),
            (json!({"to": "agent", "agent_id": 999999, "reason": "r"}), json!(["body", "agent_id"])),
            (json!({"to": "human", "agent_id": s.agent, "reason": "r"}), json!(["body", "agent_id"])),
            (json!({"to": "human", "user_id": 999999, "reason": "r"}), json!(["body", "user_id"])),
        ];
        for (body, loc) in cases {
            let r = s.handoff(body.clone()).await;
            assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, loc), "{body}: {}", r.text);
        }
        assert_eq!(s.app.get(&s.ws.live, "/api/v1/handoffs").await.body["total"], 0, "nothing refused was stored");
        assert_eq!(s.conversation().await["handler"], "agent");
        let r = s.app.post(&s.ws.live, "/api/v1/conversations/999999/handoff", json!({"to": "human", "reason": "r"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (404, json!("Conversation 999999 not found")));
        // Another workspace or mode sees nothing.
        let h = s.handoff(json!({"to": "human", "reason": "r"})).await.body["id"].as_i64().unwrap();
        let stranger = s.app.workspace("Stranger").await;
        for key in [&stranger.live, &s.ws.test] {
            for (method, path, body) in [
                (Method::GET, format!("/api/v1/handoffs/{h}"), None),
                (Method::POST, format!("/api/v1/handoffs/{h}/accept"), Some(json!({"user_id": s.user}))),
                (Method::POST, format!("/api/v1/handoffs/{h}/complete"), Some(json!({}))),
                (Method::POST, format!("/api/v1/handoffs/{h}/cancel"), None),
            ] {
                let r = s.app.send(method.clone(), &path, Some(key), body, &[]).await;
                assert_eq!((r.status, r.body.clone()), (404, json!({"detail": format!("Handoff {h} not found")})), "{method} {path}");
            }
            let r = s.app.post(key, &format!("/api/v1/conversations/{}/handoff", s.conv), json!({"to": "human", "reason": "r"})).await;
            assert_eq!(r.status, 404);
            assert_eq!(s.app.get(key, "/api/v1/handoffs").await.body["total"], 0);
        }
        assert_eq!(s.app.get(&s.ws.live, &format!("/api/v1/handoffs/{h}")).await.body["status"], "requested");
    }
}
