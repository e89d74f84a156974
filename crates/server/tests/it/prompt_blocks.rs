//! docs/api.md "Prompt blocks": CRUD, declared variables, versions, preview.

use parley_domain::Mode;
use serde_json::{Value, json};

use crate::support::*;

both_backends! {
    async fn blocks_are_created_listed_and_versioned(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Persona", "kind": "persona", "content": "You are {{agent_name}}.", "variables": ["agent_name"]})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let b = r.body;
        assert_eq!((b["slug"].clone(), b["version"].clone(), b["kind"].clone()), (json!("persona"), json!(1), json!("persona")));
        let path = format!("/api/v1/prompt-blocks/{}", b["id"]);
        let u = app.patch(&ws.live, &path, json!({"content": "You are {{agent_name}} from {{company}}.", "variables": ["agent_name", "company"]})).await;
        assert_eq!(u.status, 200, "{}", u.text);
        assert_eq!(u.body["version"], 2);
        // A no-op update is not a new version.
        assert_eq!(app.patch(&ws.live, &path, json!({"kind": "persona"})).await.body["version"], 2);
        let versions = app.get(&ws.live, &format!("{path}/versions")).await;
        assert_eq!(versions.body["total"], 2);
        assert_eq!(versions.body["items"][0]["version"], 2);
        assert_eq!(versions.body["items"][1]["content"], "You are {{agent_name}}.");
        let list = app.get(&ws.live, "/api/v1/prompt-blocks?kind=persona").await;
        assert_eq!(list.body["total"], 1);
        assert_eq!(app.get(&ws.live, "/api/v1/prompt-blocks?kind=greeting").await.body["total"], 0);
        let kinds: Vec<Value> = app.events(ws.id, Mode::Live, "prompt_block.updated").await.into_iter().map(|e| e.data["version"].clone()).collect();
        assert_eq!(kinds, vec![json!(2)]);
    }

    async fn every_placeholder_must_be_declared(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "G", "content": "Hi {{name}}, from {{city}}", "variables": ["name"]})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"][0]["loc"], json!(["body", "content"]));
        assert_eq!(r.body["detail"][0]["type"], "value_error.template");
        assert!(r.body["detail"][0]["msg"].as_str().unwrap().contains("{{city}}"));
        let r = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "G", "content": "Hi {{name", "variables": ["name", "1bad"]})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.faults()[0], (r#"["body","variables",1]"#.to_owned(), "value_error.variable_name".to_owned()));
        let r = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "G", "content": "Hi {{name", "variables": ["name"]})).await;
        assert_eq!(r.body["detail"][0]["type"], "value_error.template");
        // Removing a declared variable that content still uses is refused too.
        let ok = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "G", "content": "Hi {{name}}", "variables": ["name"]})).await;
        let r = app.patch(&ws.live, &format!("/api/v1/prompt-blocks/{}", ok.body["id"]), json!({"variables": []})).await;
        assert_eq!(r.status, 422);
    }

    async fn preview_renders_blocks_in_order_then_the_system_prompt(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let p = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Persona", "content": "You are {{agent_name}}.", "variables": ["agent_name"]})).await.body;
        let g = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Guard", "kind": "guardrail", "content": "Never share {{secret_kind}}."  , "variables": ["secret_kind"]})).await.body;
        let a = app.create_agent(&ws.live, json!({"name": "A", "prompt_block_ids": [g["id"], p["id"]], "system_prompt": "Answer briefly. {{literal}}"})).await;
        let path = format!("/api/v1/agents/{}/prompt/preview", a["id"]);
        let r = app.post(&ws.live, &path, json!({"variables": {"agent_name": "Ana", "secret_kind": "passwords", "unused": 3}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["prompt"], "Never share passwords.\n\nYou are Ana.\n\nAnswer briefly. {{literal}}");
        assert_eq!(r.body["blocks"], json!([{"id": g["id"], "slug": "guard", "version": 1}, {"id": p["id"], "slug": "persona", "version": 1}]));
        let r = app.post(&ws.live, &path, json!({"variables": {"agent_name": "Ana"}})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"], json!([{"loc": ["body", "variables", "secret_kind"], "msg": "field required", "type": "value_error.missing", "ctx": {"prompt_block": "guard"}}]));
        let r = app.post(&ws.live, &path, json!({"variables": {"agent_name": ["x"]}})).await;
        assert_eq!(r.status, 422);
    }

    async fn prompts_render_built_in_variables_and_dotted_names(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme Support").await;
        let b = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Who", "content": "You are {{agent.name}} at {{workspace.name}}; the customer is {{contact.display_name}}.", "variables": ["agent.name", "workspace.name", "contact.display_name"]})).await;
        assert_eq!(b.status, 201, "{}", b.text);
        let a = app.create_agent(&ws.live, json!({"name": "Ava", "prompt_block_ids": [b.body["id"]], "system_prompt": "Today is {{now}}. Order {{order.id}}. Keep {{unknown}}."})).await;
        let path = format!("/api/v1/agents/{}/prompt/preview", a["id"]);
        let r = app.post(&ws.live, &path, json!({"variables": {"contact.display_name": "Ana", "order.id": "A-17", "agent.name": "Not Ava"}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let prompt = r.body["prompt"].as_str().unwrap();
        let (first, second) = prompt.split_once("\n\n").unwrap();
        assert_eq!(first, "You are Ava at Acme Support; the customer is Ana.", "built-ins win over the caller's values");
        let now = second.strip_prefix("Today is ").unwrap().split_once(". Order").unwrap().0;
        assert!(parley_domain::Timestamp::parse_rfc3339(now).is_some(), "{now}");
        assert!(second.ends_with(". Order A-17. Keep {{unknown}}."), "{second}");
        // A built-in the preview has no value for (no conversation) is asked for.
        let r = app.post(&ws.live, &path, json!({})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"][0]["loc"], json!(["body", "variables", "contact.display_name"]));
        let bad = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Bad", "content": "x", "variables": ["contact..name"]})).await;
        assert_eq!(bad.faults()[0].1, "value_error.variable_name");
    }

    async fn a_block_in_use_cannot_be_deleted(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let b = app.post(&ws.live, "/api/v1/prompt-blocks", json!({"name": "Persona", "content": "Hi"})).await.body;
        let a = app.create_agent(&ws.live, json!({"name": "A", "prompt_block_ids": [b["id"]]})).await;
        let path = format!("/api/v1/prompt-blocks/{}", b["id"]);
        let r = app.delete(&ws.live, &path).await;
        assert_eq!(r.status, 409);
        assert!(r.body["detail"].as_str().unwrap().contains(&format!("agent(s) {}", a["id"])));
        app.patch(&ws.live, &format!("/api/v1/agents/{}", a["id"]), json!({"prompt_block_ids": []})).await;
        assert_eq!(app.delete(&ws.live, &path).await.status, 204);
        assert_eq!(app.get(&ws.live, &path).await.status, 404);
        assert_eq!(app.events(ws.id, Mode::Live, "prompt_block.deleted").await.len(), 1);
    }
}
