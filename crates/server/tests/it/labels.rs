//! Labels on conversations, canned responses, and the inbox's views,
//! filters and order.

use parley_domain::Mode;
use parley_domain::user::Role;
use reqwest::Method;
use serde_json::{Value, json};

use crate::conversations::inbound;
use crate::messages::sending_channel;
use crate::receiver::Receiver;
use crate::support::*;

const PW: &str = "correct horse battery";

fn ids(page: &Value) -> Vec<i64> {
    page["items"].as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect()
}

both_backends! {
    async fn labels_are_named_once_put_on_conversations_and_follow_renames(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("mia@example.com", PW, ws.id, Role::Member).await;
        let member = app.token("mia@example.com", PW).await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let conv = inbound(&app, ch, &secret, json!({"from": "user-1", "text": "Refund?", "external_id": "l-1"})).await.body["conversation_id"].as_i64().unwrap();

        let r = app.post(&ws.live, "/api/v1/labels", json!({"name": "billing", "color": "#1D4ED8", "description": "Invoices"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!((r.body["name"].clone(), r.body["color"].clone()), (json!("billing"), json!("#1d4ed8")));
        let billing = r.body["id"].as_i64().unwrap();
        // Without a colour one is chosen; names are unique whatever their case.
        let vip = app.post(&ws.live, "/api/v1/labels", json!({"name": "VIP"})).await;
        assert_eq!(vip.status, 201);
        assert!(vip.body["color"].as_str().unwrap().starts_with('#'));
        let r = app.post(&ws.live, "/api/v1/labels", json!({"name": "Billing"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!("A label named \"Billing\" already exists (names are unique whatever their case)")));
        // Bad names and colours are named at their field.
        let r = app.post(&ws.live, "/api/v1/labels", json!({"name": "two words", "color": "blue"})).await;
        let mut faults = r.faults();
        faults.sort();
        assert_eq!(faults, [(r#"["body","color"]"#.to_owned(), "value_error.color".to_owned()), (r#"["body","name"]"#.to_owned(), "value_error.word".to_owned())]);
        // Members use labels; only owners, admins and keys make them.
        let r = app.bearer(Method::POST, "/api/v1/labels", &member, Some(json!({"name": "mine"}))).await;
        assert_eq!((r.status, r.body["detail"].clone()), (403, json!("Only owners and admins can create, change or delete labels")));
        assert_eq!(app.bearer(Method::DELETE, &format!("/api/v1/labels/{billing}"), &member, None).await.status, 403);

        // Put on a conversation (any member may), sorted by name, with an event.
        let path = format!("/api/v1/conversations/{conv}/labels");
        let r = app.bearer(Method::PUT, &path, &member, Some(json!({"labels": ["vip", "billing"]}))).await;
        assert_eq!((r.status, r.body["labels"].clone()), (200, json!(["billing", "VIP"])), "{}", r.text);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["labels"], json!(["billing", "VIP"]));
        let updated = app.events(ws.id, Mode::Live, "conversation.updated").await;
        assert_eq!(updated[0].data["labels"], json!(["billing", "VIP"]), "newest first");
        // Unknown names are named at their place; a name twice is refused; nothing changed.
        let r = app.send(Method::PUT, &path, Some(&ws.live), Some(json!({"labels": ["billing", "nope"]})), &[]).await;
        assert_eq!(r.faults(), [(r#"["body","labels",1]"#.to_owned(), "value_error.not_found".to_owned())], "{}", r.text);
        let r = app.send(Method::PUT, &path, Some(&ws.live), Some(json!({"labels": ["vip", "VIP"]})), &[]).await;
        assert_eq!(r.faults(), [(r#"["body","labels"]"#.to_owned(), "value_error.list.unique_items".to_owned())]);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["labels"], json!(["billing", "VIP"]));

        // Members labelling at once, with a rename in the middle: every
        // request answers, and the names kept with the conversation are
        // exactly the labels filtering finds on it.
        let puts = (0..8).map(|i| {
            let (app, path, key) = (&app, &path, &ws.live);
            let set = if i % 2 == 0 { json!(["billing"]) } else { json!(["billing", "vip"]) };
            async move { app.send(Method::PUT, path, Some(key), Some(json!({"labels": set})), &[]).await.status }
        });
        // (A change of case only, so that every request still names it.)
        let vip_path = format!("/api/v1/labels/{}", vip.body["id"]);
        let rename = app.patch(&ws.live, &vip_path, json!({"name": "Vip"}));
        let (statuses, renamed) = tokio::join!(futures::future::join_all(puts), rename);
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        assert_eq!(renamed.status, 200, "{}", renamed.text);
        let kept = app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["labels"].clone();
        let mut found = Vec::new();
        for name in ["billing", "Vip"] {
            let hit = app.get(&ws.live, &format!("/api/v1/inbox/conversations?label={name}")).await.body["total"].clone();
            if hit == json!(1) {
                found.push(name);
            }
        }
        assert_eq!(kept, json!(found), "the kept names and the filter disagree");
        app.patch(&ws.live, &format!("/api/v1/labels/{}", vip.body["id"]), json!({"name": "VIP"})).await;
        app.send(Method::PUT, &path, Some(&ws.live), Some(json!({"labels": ["billing", "vip"]})), &[]).await;

        // A rename shows on the conversation; a deletion takes the label off.
        let r = app.patch(&ws.live, &format!("/api/v1/labels/{billing}"), json!({"name": "refunds"})).await;
        assert_eq!((r.status, r.body["name"].clone(), r.body["description"].clone()), (200, json!("refunds"), json!("Invoices")));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["labels"], json!(["refunds", "VIP"]));
        let r = app.patch(&ws.live, &format!("/api/v1/labels/{billing}"), json!({"name": "vip"})).await;
        assert_eq!(r.status, 409, "{}", r.text);
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/labels/{}", vip.body["id"])).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body["labels"], json!(["refunds"]));
        let list = app.get(&ws.live, "/api/v1/labels").await.body;
        assert_eq!((list["total"].clone(), list["items"][0]["name"].clone()), (json!(1), json!("refunds")));
        let mut counts = Vec::new();
        for kind in ["label.created", "label.updated", "label.deleted"] {
            counts.push(app.events(ws.id, Mode::Live, kind).await.len());
        }
        assert_eq!(counts, [2, 3, 1], "the refused rename wrote nothing");

        // Other scopes see no such label or conversation.
        let other = app.workspace("Other").await;
        for key in [&other.live, &ws.test] {
            assert_eq!(app.get(key, &format!("/api/v1/labels/{billing}")).await.status, 404);
            assert_eq!(app.patch(key, &format!("/api/v1/labels/{billing}"), json!({"color": "#000000"})).await.status, 404);
            assert_eq!(app.delete(key, &format!("/api/v1/labels/{billing}")).await.status, 404);
            let r = app.send(Method::PUT, &path, Some(key), Some(json!({"labels": []})), &[]).await;
            assert_eq!(r.status, 404);
        }
    }

    async fn the_inbox_shows_each_view_filtered_and_sorted(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        let token = app.token("ana@example.com", PW).await;
        let rx = Receiver::start().await;
        let (ch, secret) = sending_channel(&app, &ws.live, &rx.url).await;
        let mut convs = Vec::new();
        for (i, who) in ["user-1", "user-2", "user-3"].iter().enumerate() {
            let r = inbound(&app, ch, &secret, json!({"from": who, "text": format!("Hello {i}"), "external_id": format!("i-{i}")})).await;
            convs.push(r.body["conversation_id"].as_i64().unwrap());
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let [first, second, third] = convs[..] else { unreachable!() };
        // The second waits for a person; the third is Ana's; the first stays with its agent.
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{second}/handoff"), json!({"to": "human", "reason": "Asked for a person"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let handoff = r.body["id"].clone();
        let r = app.post(&ws.live, &format!("/api/v1/conversations/{third}/assign"), json!({"user_id": ana})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        app.post(&ws.live, "/api/v1/labels", json!({"name": "vip"})).await;
        app.send(Method::PUT, &format!("/api/v1/conversations/{first}/labels"), Some(&ws.live), Some(json!({"labels": ["vip"]})), &[]).await;

        let inbox = |query: &str| {
            let path = format!("/api/v1/inbox/conversations{query}");
            let (app, token) = (&app, &token);
            async move { app.bearer(Method::GET, &path, token, None).await }
        };
        // All, last activity first, each with its open handoff.
        let all = inbox("").await;
        assert_eq!(all.status, 200, "{}", all.text);
        assert_eq!(ids(&all.body), [third, second, first]);
        assert_eq!(all.body["items"][1]["handoff"]["id"], handoff);
        assert_eq!(all.body["items"][1]["handoff"]["status"], "requested");
        assert_eq!(all.body["items"][0]["handoff"], Value::Null);
        assert_eq!(all.body["items"][0]["assignee_user_id"], json!(ana));
        // Who has waited longest first.
        assert_eq!(ids(&inbox("?sort=waiting").await.body), [first, second, third]);
        assert_eq!(ids(&inbox("?view=mine").await.body), [third]);
        assert_eq!(ids(&inbox("?view=handoffs").await.body), [second]);
        assert_eq!(ids(&inbox("?label=VIP").await.body), [first]);
        assert_eq!(ids(&inbox("?label=nobody").await.body), Vec::<i64>::new());
        // Accepting moves it out of the handoffs view and into Ana's.
        let r = app.bearer(Method::POST, &format!("/api/v1/handoffs/{handoff}/accept"), &token, Some(json!({}))).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(ids(&inbox("?view=handoffs").await.body).is_empty());
        let mine = inbox("?view=mine").await.body;
        assert_eq!(ids(&mine), [third, second]);
        assert_eq!(mine["items"][1]["handoff"]["status"], "accepted");
        assert_eq!(ids(&inbox("?handler=human&status=open").await.body), [second]);

        let summary = app.bearer(Method::GET, "/api/v1/inbox/summary", &token, None).await;
        assert_eq!(summary.status, 200);
        assert_eq!((summary.body["all"].clone(), summary.body["mine"].clone(), summary.body["handoffs"].clone()), (json!(3), json!(2), json!(0)));
        assert_eq!(summary.body["unread_mine"], json!(2), "{}", summary.text);
        // An API key is nobody: no Mine.
        let r = app.get(&ws.live, "/api/v1/inbox/conversations?view=mine").await;
        assert_eq!(r.faults(), [(r#"["query","view"]"#.to_owned(), "value_error.view".to_owned())]);
        assert_eq!(app.get(&ws.live, "/api/v1/inbox/summary").await.body["mine"], Value::Null);
        let r = app.get(&ws.live, "/api/v1/inbox/conversations?view=everything&sort=oldest").await;
        assert_eq!(r.status, 422);
        // Another mode's inbox is empty.
        assert_eq!(app.get(&ws.test, "/api/v1/inbox/conversations").await.body["total"], 0);
    }

    async fn many_conversations_change_at_once_or_not_at_all(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let ana = app.user("ana@example.com", PW, ws.id, Role::Member).await;
        app.user("ben@example.com", PW, ws.id, Role::Admin).await;
        let ben = app.token("ben@example.com", PW).await;
        let ana_token = app.token("ana@example.com", PW).await;
        let (ch, secret) = crate::conversations::api_channel(&app, &ws.live).await;
        let mut convs = Vec::new();
        for i in 0..4 {
            let r = inbound(&app, ch, &secret, json!({"from": format!("b-{i}"), "text": "Hi", "external_id": format!("b-{i}")})).await;
            convs.push(r.body["conversation_id"].as_i64().unwrap());
        }
        let bulk = |body: Value| {
            let (app, ben) = (&app, ben.clone());
            async move { app.bearer(Method::POST, "/api/v1/conversations/bulk", &ben, Some(body)).await }
        };
        let status_of = |id: i64| {
            let (app, key) = (&app, ws.live.clone());
            async move { app.get(&key, &format!("/api/v1/conversations/{id}")).await.body }
        };
        let before = app.events(ws.id, Mode::Live, "conversation.updated").await.len();

        // Resolve two (a repeat counts once), in the order asked.
        let r = bulk(json!({"conversation_ids": [convs[1], convs[0], convs[1]], "status": "resolved"})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let got: Vec<(Value, Value)> = r.body["items"].as_array().unwrap().iter().map(|c| (c["id"].clone(), c["status"].clone())).collect();
        assert_eq!(got, [(json!(convs[1]), json!("resolved")), (json!(convs[0]), json!("resolved"))]);
        assert_eq!(app.events(ws.id, Mode::Live, "conversation.updated").await.len(), before + 2, "one event per conversation, as PATCH");
        // Assign two to Ana: she is told of each, as with one assignment.
        let r = bulk(json!({"conversation_ids": [convs[2], convs[3]], "assignee_user_id": ana})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.body["items"].as_array().unwrap().iter().all(|c| c["assignee_user_id"] == json!(ana)));
        let told = app.bearer(Method::GET, "/api/v1/notifications", &ana_token, None).await;
        assert_eq!(told.body["items"].as_array().unwrap().iter().filter(|n| n["kind"] == "assignment").count(), 2, "{}", told.text);

        // All or none: an unknown (or another workspace's) id is named by its place, and nothing changed.
        let other = app.workspace("Other").await;
        let (och, osecret) = crate::conversations::api_channel(&app, &other.live).await;
        let foreign = inbound(&app, och, &osecret, json!({"from": "x", "text": "Hi", "external_id": "x"})).await.body["conversation_id"].as_i64().unwrap();
        let r = bulk(json!({"conversation_ids": [convs[2], foreign, 999_999], "status": "snoozed", "snoozed_until": "2030-01-01T00:00:00Z"})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let mut faults = r.faults();
        faults.sort();
        assert_eq!(faults, [(r#"["body","conversation_ids",1]"#.to_owned(), "value_error.not_found".to_owned()), (r#"["body","conversation_ids",2]"#.to_owned(), "value_error.not_found".to_owned())]);
        assert_eq!(status_of(convs[2]).await["status"], "open");
        // A closed one: the 409 its own change gives, and the others stay as they were.
        app.patch(&ws.live, &format!("/api/v1/conversations/{}", convs[3]), json!({"status": "closed"})).await;
        let r = bulk(json!({"conversation_ids": [convs[2], convs[3]], "status": "resolved"})).await;
        assert_eq!(r.status, 409, "{}", r.text);
        assert_eq!(status_of(convs[2]).await["status"], "open", "a failed bulk change changed a conversation");
        // Snoozing needs its time, as PATCH does.
        let r = bulk(json!({"conversation_ids": [convs[2]], "status": "snoozed"})).await;
        assert_eq!((r.status, r.faults()), (422, vec![(r#"["body","snoozed_until"]"#.to_owned(), "value_error.missing".to_owned())]), "{}", r.text);

        // No change asked: none made, as PATCH with an empty body.
        let r = bulk(json!({"conversation_ids": [convs[2]]})).await;
        assert_eq!((r.status, r.body["items"][0]["status"].clone()), (200, json!("open")), "{}", r.text);

        // Bad shapes.
        for (body, loc, kind) in [
            (json!({"conversation_ids": [], "status": "resolved"}), r#"["body","conversation_ids"]"#, "value_error.list.min_items"),
            (json!({"conversation_ids": (1..=101).collect::<Vec<i64>>(), "status": "resolved"}), r#"["body","conversation_ids"]"#, "value_error.list.max_items"),
            (json!({"conversation_ids": [0], "status": "resolved"}), r#"["body","conversation_ids",0]"#, "value_error.number.not_ge"),
            (json!({"conversation_ids": [convs[2]], "assignee_user_id": 999_999}), r#"["body","assignee_user_id"]"#, "value_error.not_found"),
        ] {
            let r = bulk(body.clone()).await;
            assert_eq!((r.status, r.faults().first().cloned()), (422, Some((loc.to_owned(), kind.to_owned()))), "{body}: {}", r.text);
        }
    }

    async fn canned_responses_are_found_by_short_code_and_kept_by_admins(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("mia@example.com", PW, ws.id, Role::Member).await;
        let member = app.token("mia@example.com", PW).await;
        let content = "Hi {{contact.first_name}}, your refund is on its way.";
        let r = app.post(&ws.live, "/api/v1/canned-responses", json!({"short_code": "refund", "content": content})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_i64().unwrap();
        assert_eq!((r.body["short_code"].clone(), r.body["content"].clone()), (json!("refund"), json!(content)));
        app.post(&ws.live, "/api/v1/canned-responses", json!({"short_code": "hello", "content": "Hello! How can I help?"})).await;
        let r = app.post(&ws.live, "/api/v1/canned-responses", json!({"short_code": "REFUND", "content": "x"})).await;
        assert_eq!(r.status, 409, "{}", r.text);
        let r = app.post(&ws.live, "/api/v1/canned-responses", json!({"short_code": "/refund", "content": ""})).await;
        let mut faults = r.faults();
        faults.sort();
        assert_eq!(faults, [(r#"["body","content"]"#.to_owned(), "value_error.string.too_short".to_owned()), (r#"["body","short_code"]"#.to_owned(), "value_error.word".to_owned())]);

        // Members read and use them; only owners, admins and keys keep them.
        let list = app.bearer(Method::GET, "/api/v1/canned-responses", &member, None).await;
        assert_eq!(list.status, 200);
        let codes: Vec<&str> = list.body["items"].as_array().unwrap().iter().map(|c| c["short_code"].as_str().unwrap()).collect();
        assert_eq!(codes, ["hello", "refund"]);
        let found = app.get(&ws.live, "/api/v1/canned-responses?q=REF").await.body;
        assert_eq!((found["total"].clone(), found["items"][0]["id"].clone()), (json!(1), json!(id)));
        let r = app.bearer(Method::PATCH, &format!("/api/v1/canned-responses/{id}"), &member, Some(json!({"content": "mine now"}))).await;
        assert_eq!(r.status, 403);
        let r = app.patch(&ws.live, &format!("/api/v1/canned-responses/{id}"), json!({"short_code": "hello"})).await;
        assert_eq!(r.status, 409, "{}", r.text);
        let r = app.patch(&ws.live, &format!("/api/v1/canned-responses/{id}"), json!({"content": "The refund is on its way."})).await;
        assert_eq!((r.status, r.body["short_code"].clone(), r.body["content"].clone()), (200, json!("refund"), json!("The refund is on its way.")));
        let mut counts = Vec::new();
        for kind in ["canned_response.created", "canned_response.updated", "canned_response.deleted"] {
            counts.push(app.events(ws.id, Mode::Live, kind).await.len());
        }
        assert_eq!(counts, [2, 1, 0]);

        // Other scopes see none of it.
        let other = app.workspace("Other").await;
        for key in [&other.live, &ws.test] {
            assert_eq!(app.get(key, &format!("/api/v1/canned-responses/{id}")).await.status, 404);
            assert_eq!(app.delete(key, &format!("/api/v1/canned-responses/{id}")).await.status, 404);
            assert_eq!(app.get(key, "/api/v1/canned-responses").await.body["total"], 0);
        }
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/canned-responses/{id}")).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/canned-responses/{id}")).await.status, 404);
    }
}
