//! Full-text search: syntax, folding, filters, snippets, ranking, scope.

use serde_json::json;

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
    let r = app.get(key, &format!("/api/v1/search?q={}{extra}", urlencode(q))).await;
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
        assert_eq!(texts(&app, &ws.live, "order", "&before=2100-01-01T00:00:00Z&type=messages").await.len(), 4);
        let page = app.get(&ws.live, "/api/v1/search?q=order&limit=2&offset=1").await.body;
        assert_eq!((page["total"].clone(), page["items"].as_array().unwrap().len(), page["limit"].clone(), page["offset"].clone()), (json!(4), 2, json!(2), json!(1)));

        // The hit's shape, and a snippet that cannot inject markup.
        let hit = app.get(&ws.live, "/api/v1/search?q=script").await.body["items"][0].clone();
        let mut keys: Vec<&str> = hit.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["conversation_id", "created_at", "id", "score", "snippet", "title", "type"]);
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
}
