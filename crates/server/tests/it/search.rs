//! Full-text search: syntax, folding, filters, snippets, ranking, scope.

use serde_json::json;

use crate::contacts::import;
use crate::conversations::{api_channel, inbound};
use crate::support::*;

const CORPUS: [(&str, &str); 5] = [
    ("user-a", "Where is my order? It was supposed to arrive Tuesday."),
    ("user-b", "The crème brûlée was delicious"),
    ("user-a", "Order #123 shipped; tracking number attached"),
    ("user-c", "<script>alert('x')</script> order now"),
    ("user-d", "Refund requested: damaged order, order, order"),
];

/// The texts of the hits for `q` (with extra query), in result order.
async fn texts(app: &TestApp, key: &str, q: &str, extra: &str) -> Vec<usize> {
    let r = app.get(key, &format!("/api/v1/search?q={}&type=messages{extra}", urlencode(q))).await;
    assert_eq!(r.status, 200, "{q}: {}", r.text);
    let ids: Vec<i64> = r.body["items"].as_array().unwrap().iter().map(|h| h["id"].as_i64().unwrap()).collect();
    assert_eq!(r.body["total"], ids.len(), "{q}");
    let mut out = Vec::new();
    for id in ids {
        let m = app.get(key, &format!("/api/v1/messages/{id}")).await.body;
        out.push(CORPUS.iter().position(|(_, t)| *t == m["text"]).unwrap() + 1);
    }
    out
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'*' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort();
    v
}

both_backends! {
    async fn search_finds_words_phrases_prefixes_and_exclusions_ranked_and_escaped(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let mut conversation_of = Vec::new();
        for (i, (from, text)) in CORPUS.iter().enumerate() {
            let r = inbound(&app, ch, &secret, json!({"from": from, "text": text, "external_id": format!("e{i}")})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            conversation_of.push(r.body["conversation_id"].as_i64().unwrap());
        }
        // Words must all match; phrases in order; exclusions; prefixes; case and accents folded.
        assert_eq!(sorted(texts(&app, &ws.live, "order", "").await), [1, 3, 4, 5]);
        assert_eq!(texts(&app, &ws.live, "ORDER tuesday", "").await, [1]);
        assert_eq!(texts(&app, &ws.live, "\"tracking number\"", "").await, [3]);
        assert!(texts(&app, &ws.live, "\"number tracking\"", "").await.is_empty());
        assert_eq!(sorted(texts(&app, &ws.live, "order -shipped -\"order now\"", "").await), [1, 5]);
        assert_eq!(texts(&app, &ws.live, "deli*", "").await, [2]);
        assert_eq!(texts(&app, &ws.live, "creme brulee", "").await, [2]);
        assert_eq!(texts(&app, &ws.live, "CRÈME", "").await, [2]);
        assert!(texts(&app, &ws.live, "nothing-like-this", "").await.is_empty());
        // Ranking: the message that says it three times comes first.
        assert_eq!(texts(&app, &ws.live, "order", "").await[0], 5);

        // Filters.
        let a = conversation_of[0];
        assert_eq!(sorted(texts(&app, &ws.live, "order", &format!("&conversation_id={a}")).await), [1, 3]);
        let contact = app.get(&ws.live, &format!("/api/v1/conversations/{a}")).await.body["contact_id"].as_i64().unwrap();
        assert_eq!(sorted(texts(&app, &ws.live, "order", &format!("&contact_id={contact}")).await), [1, 3]);
        assert_eq!(texts(&app, &ws.live, "order", "&channel=api").await.len(), 4);
        assert!(texts(&app, &ws.live, "order", "&channel=sms").await.is_empty());
        assert!(texts(&app, &ws.live, "order", "&after=2100-01-01T00:00:00Z").await.is_empty());
        assert_eq!(texts(&app, &ws.live, "order", "&before=2100-01-01T00:00:00Z").await.len(), 4);
        assert!(texts(&app, &ws.live, "order", "&before=2000-01-01T00:00:00Z").await.is_empty());
        let this_month = parley_domain::Timestamp::now().to_rfc3339()[..8].to_owned() + "01T00:00:00Z";
        assert_eq!(texts(&app, &ws.live, "order", &format!("&after={this_month}")).await.len(), 4);
        assert_eq!(texts(&app, &ws.live, "order", &format!("&after=2000-01-01T00:00:00Z&before={this_month}")).await.len(), 0);
        let page = app.get(&ws.live, "/api/v1/search?q=order&limit=2&offset=1").await.body;
        assert_eq!((page["total"].clone(), page["items"].as_array().unwrap().len(), page["limit"].clone(), page["offset"].clone()), (json!(4), 2, json!(2), json!(1)));
        assert_eq!(page["total_relation"], "eq");

        // The hit's shape, and a snippet that cannot inject markup.
        let hit = app.get(&ws.live, "/api/v1/search?q=script").await.body["items"][0].clone();
        let mut keys: Vec<&str> = hit.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["conversation_id", "created_at", "id", "score", "snippet", "title", "type"]);
        assert_eq!(hit["conversation_id"], conversation_of[3]);
        assert_eq!(hit["type"], "message");
        assert_eq!(hit["snippet"], "&lt;<mark>script</mark>&gt;alert(&#39;x&#39;)&lt;/<mark>script</mark>&gt; order now");
        assert!(hit["score"].as_f64().unwrap() > 0.0);
        let brulee = app.get(&ws.live, "/api/v1/search?q=brulee").await.body["items"][0]["snippet"].clone();
        assert_eq!(brulee, "The crème <mark>brûlée</mark> was delicious");

        // Malformed queries are 422s naming q.
        for q in ["%22unclosed", "-only", "*", "%20", ""] {
            let r = app.get(&ws.live, &format!("/api/v1/search?q={q}")).await;
            assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["query", "q"])), "{q}: {}", r.text);
        }
        let r = app.get(&ws.live, "/api/v1/search").await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.missing")));
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=x&type=calls").await.status, 422);
    }

    async fn search_never_crosses_workspaces_or_modes(backend) {
        let app = TestApp::spawn(backend).await;
        let a = app.workspace("A").await;
        let b = app.workspace("B").await;
        let (ch, secret) = api_channel(&app, &b.live).await;
        let r = inbound(&app, ch, &secret, json!({"from": "u", "text": "zebra crossing", "external_id": "z"})).await;
        assert_eq!(r.status, 201);
        let (own, own_secret) = api_channel(&app, &a.live).await;
        inbound(&app, own, &own_secret, json!({"from": "u", "text": "horse riding", "external_id": "h"})).await;
        for key in [&a.live, &a.test, &b.test] {
            let r = app.get(key, "/api/v1/search?q=zebra").await.body;
            assert_eq!((r["total"].clone(), r["items"].clone()), (json!(0), json!([])), "{r}");
        }
        assert_eq!(app.get(&b.live, "/api/v1/search?q=zebra").await.body["total"], 1);
        assert_eq!(app.get(&a.live, "/api/v1/search?q=zebra%20OR%20horse").await.body["total"], 0, "OR is a word, not an operator");
    }

    async fn search_finds_conversations_and_contacts_and_ranks_all_together(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let elodie = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Élodie Martin", "email": "elodie@example.com"})).await.body;
        let elodie_id = elodie["id"].as_i64().unwrap();
        app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Bruno Diaz", "phone": "+14155550123"})).await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let r = inbound(&app, ch, &secret, json!({"from": "visitor-9", "text": "Elodie asked about her refund", "external_id": "e1"})).await;
        let (conversation, message) = (r.body["conversation_id"].as_i64().unwrap(), r.body["id"].as_i64().unwrap());
        let r = app.patch(&ws.live, &format!("/api/v1/conversations/{conversation}"), json!({"title": "Refund for Élodie"})).await;
        assert_eq!(r.status, 200, "{}", r.text);

        // Contacts by name, email and phone; the snippet shows what matched.
        let r = app.get(&ws.live, "/api/v1/search?q=elodie&type=contacts").await.body;
        assert_eq!(r["total"], 1, "{r}");
        let hit = &r["items"][0];
        assert_eq!((hit["type"].clone(), hit["id"].clone(), hit["conversation_id"].clone(), hit["title"].clone()), (json!("contact"), json!(elodie_id), json!(null), json!("Élodie Martin")));
        assert_eq!(hit["snippet"], "<mark>Élodie</mark> Martin · <mark>elodie</mark>@example.com");
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=example&type=contacts").await.body["total"], 1);
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=14155550123&type=contacts").await.body["items"][0]["title"], "Bruno Diaz");
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=bru*&type=contacts").await.body["total"], 1);

        // Contact filters: the contact itself, its conversations, its identities' channels, its creation time.
        let of = |q: &str| format!("/api/v1/search?q=elodie&type=contacts{q}");
        for (filter, total) in [
            (format!("&contact_id={elodie_id}"), 1),
            (format!("&contact_id={}", elodie_id + 1), 0),
            (format!("&conversation_id={conversation}"), 0),
            ("&after=2100-01-01T00:00:00Z".to_owned(), 0),
            ("&before=2100-01-01T00:00:00Z".to_owned(), 1),
        ] {
            assert_eq!(app.get(&ws.live, &of(&filter)).await.body["total"], total, "{filter}");
        }
        let visitor = app.get(&ws.live, &format!("/api/v1/conversations/{conversation}")).await.body["contact_id"].clone();
        let name = app.get(&ws.live, &format!("/api/v1/contacts/{visitor}")).await.body["display_name"].as_str().unwrap().to_owned();
        let by_name = |extra: String| format!("/api/v1/search?q={}&type=contacts{extra}", urlencode(&name));
        assert_eq!(app.get(&ws.live, &by_name(format!("&conversation_id={conversation}"))).await.body["items"][0]["id"], visitor);
        assert_eq!(app.get(&ws.live, &by_name("&channel=api".into())).await.body["total"], 1);
        assert_eq!(app.get(&ws.live, &by_name("&channel=sms".into())).await.body["total"], 0);

        // Conversations by title (and address); a new title replaces the old in the index.
        let r = app.get(&ws.live, "/api/v1/search?q=refund&type=conversations").await.body;
        let hit = &r["items"][0];
        assert_eq!((r["total"].clone(), hit["type"].clone(), hit["id"].clone(), hit["conversation_id"].clone()), (json!(1), json!("conversation"), json!(conversation), json!(conversation)));
        assert_eq!(hit["snippet"], "<mark>Refund</mark> for Élodie · api:visitor-9");
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=visitor&type=conversations").await.body["total"], 1);
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=refund&type=conversations&channel=sms").await.body["total"], 0);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/search?q=refund&type=conversations&contact_id={elodie_id}")).await.body["total"], 0);

        // `all` (the default) ranks the three kinds together; `total` counts them all.
        let r = app.get(&ws.live, "/api/v1/search?q=elodie").await.body;
        assert_eq!(r["total"], 3, "{r}");
        let mut found: Vec<(String, i64)> = r["items"].as_array().unwrap().iter().map(|h| (h["type"].as_str().unwrap().to_owned(), h["id"].as_i64().unwrap())).collect();
        found.sort();
        assert_eq!(found, [("contact".to_owned(), elodie_id), ("conversation".to_owned(), conversation), ("message".to_owned(), message)]);
        let scores: Vec<f64> = r["items"].as_array().unwrap().iter().map(|h| h["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
        let second = app.get(&ws.live, "/api/v1/search?q=elodie&limit=1&offset=1").await.body;
        assert_eq!(second["items"][0], r["items"][1]);

        let r = app.patch(&ws.live, &format!("/api/v1/conversations/{conversation}"), json!({"title": "Billing question"})).await;
        assert_eq!(r.status, 200);
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=refund&type=conversations").await.body["total"], 0);
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=billing&type=conversations").await.body["total"], 1);
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/contacts/{elodie_id}")).await.status, 204);
        assert_eq!(app.get(&ws.live, "/api/v1/search?q=martin&type=contacts").await.body["total"], 0);

        // Nothing of this workspace is found from another, or in test mode.
        for key in [&other.live, &ws.test] {
            for q in ["bruno", "billing", "elodie", "visitor"] {
                assert_eq!(app.get(key, &format!("/api/v1/search?q={q}")).await.body["total"], 0, "{q}");
            }
        }
    }

    async fn search_counts_to_ten_thousand_and_ranks_the_newest_thousand(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        // 10,050 contacts named Zed; the oldest and the 1,001st newest say it
        // twice, the newest three times.
        let mut csv = String::from("display_name,email\n");
        for i in 0..10_050 {
            let name = match i {
                0 | 9_049 => "Zed Zed Old".to_owned(),
                10_049 => "Zed Zed Zed".to_owned(),
                _ => format!("Zed Person {i}"),
            };
            csv.push_str(&format!("{name},zed{i}@example.com\n"));
        }
        assert_eq!(import(&app, &ws.live, csv).await.status, 200);
        let r = app.get(&ws.live, "/api/v1/search?q=zed&type=contacts&limit=200").await.body;
        assert_eq!((r["total"].clone(), r["total_relation"].clone()), (json!(10_000), json!("gte")));
        let names: Vec<&str> = r["items"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap()).collect();
        assert_eq!(names[0], "Zed Zed Zed", "the best of the newest 1,000 comes first");
        assert!(!names.contains(&"Zed Zed Old"), "older matches are not ranked");
        // Past the ranked window, matches follow newest first.
        let tail = app.get(&ws.live, "/api/v1/search?q=zed&type=contacts&limit=3&offset=1000").await.body;
        let tail: Vec<&str> = tail["items"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap()).collect();
        assert_eq!(tail, ["Zed Zed Old", "Zed Person 9048", "Zed Person 9047"]);
        let last = app.get(&ws.live, "/api/v1/search?q=zed&type=contacts&limit=50&offset=9950").await;
        assert_eq!((last.status, last.body["items"].as_array().map(Vec::len)), (200, Some(50)));
        // With `all`, every kind's ranked window comes first, then the matches past them.
        let (ch, secret) = api_channel(&app, &ws.live).await;
        for i in 0..2 {
            inbound(&app, ch, &secret, json!({"from": "visitor", "text": format!("zed message {i}"), "external_id": format!("z{i}")})).await;
        }
        let r = app.get(&ws.live, "/api/v1/search?q=zed&limit=3&offset=1002").await.body;
        let tail: Vec<(&str, &str)> = r["items"].as_array().unwrap().iter().map(|h| (h["type"].as_str().unwrap(), h["title"].as_str().unwrap())).collect();
        assert_eq!(tail, [("contact", "Zed Zed Old"), ("contact", "Zed Person 9048"), ("contact", "Zed Person 9047")]);
        let ranked = app.get(&ws.live, "/api/v1/search?q=zed&limit=200").await.body;
        let messages = ranked["items"].as_array().unwrap().iter().filter(|h| h["type"] == "message").count();
        assert_eq!((messages, ranked["total"].clone()), (2, json!(10_000)));
        let r = app.get(&ws.live, "/api/v1/search?q=zed&limit=50&offset=9951").await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["query", "offset"])), "{}", r.text);
        // A narrower query is counted exactly.
        let r = app.get(&ws.live, "/api/v1/search?q=%22zed%20zed%22&type=contacts").await.body;
        assert_eq!((r["total"].clone(), r["total_relation"].clone()), (json!(3), json!("eq")));
    }
}
