//! docs/api.md "Errors" and "Pagination": shapes, statuses and never a leaking 500.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

both_backends! {
    async fn validation_reports_every_fault_at_once_and_rejects_unknown_fields(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k", json!({
            "priority": "high", "description": 7, "is_template": "yes", "language": "english language",
            "metadata": [], "handoff": {"keywords": [""], "max_turns": 0}, "role": "admin"
        })).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let faults = r.faults();
        for expected in [
            (r#"["body","name"]"#, "value_error.missing"),
            (r#"["body","priority"]"#, "type_error.integer"),
            (r#"["body","description"]"#, "type_error.string"),
            (r#"["body","is_template"]"#, "type_error.bool"),
            (r#"["body","language"]"#, "value_error.language"),
            (r#"["body","metadata"]"#, "type_error.dict"),
            (r#"["body","handoff","keywords",0]"#, "value_error.string.too_short"),
            (r#"["body","handoff","max_turns"]"#, "value_error.number.not_ge"),
            (r#"["body","role"]"#, "value_error.extra"),
        ] {
            assert!(faults.contains(&(expected.0.to_owned(), expected.1.to_owned())), "missing {expected:?} in {faults:?}");
        }
        let missing = r.body["detail"].as_array().unwrap().iter().find(|e| e["type"] == "value_error.missing").unwrap();
        assert_eq!(missing["msg"], "field required");
        // Nothing was written.
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0);
    }

    async fn too_short_and_enum_messages_follow_the_spec(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k", json!({"name": "", "text_engine": "gpt-9"})).await;
        assert_eq!(r.status, 422);
        let d = &r.body["detail"];
        assert_eq!(d[0]["msg"], "String should have at least 1 character");
        assert_eq!(d[0]["type"], "value_error.string.too_short");
        assert_eq!(d[1]["type"], "value_error.enum");
        assert_eq!(d[1]["msg"], "value is not a valid enumeration member; permitted: 'builtin'");
    }

    async fn invalid_json_is_a_422_jsondecode(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.client.post(app.url("/api/v1/agents")).header("X-API-Key", &ws.live)
            .header("Idempotency-Key", "k").header("content-type", "application/json")
            .body("{\"name\": ").send().await.unwrap();
        let r = Resp::from(r).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body, json!({"detail": [{"loc": ["body"], "msg": "Invalid JSON", "type": "value_error.jsondecode"}]}));
    }

    async fn bodies_over_one_mebibyte_are_413(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let big = json!({"name": "x", "system_prompt": "a".repeat(1024 * 1024 + 10)});
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k", big).await;
        assert_eq!(r.status, 413);
        assert!(r.body["detail"].as_str().unwrap().contains("1048576"));
        // Without a Content-Length (chunked), the limit still holds. The server
        // answers before reading everything, so write over raw TCP and read
        // the answer even if the rest of the upload is refused.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = app.base.trim_start_matches("http://").to_owned();
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nX-API-Key: {}\r\nIdempotency-Key: k2\r\nTransfer-Encoding: chunked\r\n\r\n",
            ws.live
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "a".repeat(64 * 1024));
        for _ in 0..20 {
            if conn.write_all(chunk.as_bytes()).await.is_err() {
                break;
            }
        }
        let mut response = vec![0u8; 512];
        let n = conn.read(&mut response).await.unwrap_or(0);
        let response = String::from_utf8_lossy(&response[..n]);
        assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    }

    async fn pagination_out_of_range_is_422_never_clamped(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        for (query, loc) in [("limit=201", "limit"), ("limit=0", "limit"), ("limit=-5", "limit"), ("offset=-1", "offset"), ("limit=ten", "limit")] {
            let r = app.get(&ws.live, &format!("/api/v1/agents?{query}")).await;
            assert_eq!(r.status, 422, "{query}");
            assert_eq!(r.body["detail"][0]["loc"], json!(["query", loc]), "{query}");
        }
        let r = app.get(&ws.live, "/api/v1/prompt-blocks?limit=200&offset=0").await;
        assert_eq!(r.status, 200);
        assert_eq!((r.body["limit"].clone(), r.body["offset"].clone()), (json!(200), json!(0)));
    }

    async fn unknown_routes_and_methods_answer_json(backend) {
        let app = TestApp::spawn(backend).await;
        let r = app.send(Method::GET, "/api/v1/nothing-here", None, None, &[]).await;
        assert_eq!(r.status, 404);
        assert_eq!(r.body, json!({"detail": "Not Found"}));
        let r = app.send(Method::PUT, "/healthz", None, None, &[]).await;
        assert_eq!(r.status, 405);
        assert_eq!(r.body, json!({"detail": "Method Not Allowed"}));
    }

    async fn every_response_carries_a_request_id(backend) {
        let app = TestApp::spawn(backend).await;
        for r in [
            app.send(Method::GET, "/healthz", None, None, &[]).await,
            app.send(Method::GET, "/api/v1/agents", None, None, &[]).await,
            app.send(Method::GET, "/nope", None, None, &[]).await,
        ] {
            assert!(r.header("x-request-id").is_some_and(|v| v.len() >= 10), "{:?}", r.headers);
        }
        let r = app.send(Method::GET, "/healthz", None, None, &[("X-Request-Id", "trace-abc.123")]).await;
        assert_eq!(r.header("x-request-id"), Some("trace-abc.123"));
        let r = app.send(Method::GET, "/healthz", None, None, &[("X-Request-Id", "bad id with spaces")]).await;
        assert_ne!(r.header("x-request-id"), Some("bad id with spaces"));
    }

    async fn an_internal_error_is_a_500_naming_only_the_request_id(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        // Break the database under the server.
        let mut tx = app.db.begin().await.unwrap();
        parley_store::execute!(&mut tx, sqlx::query("DROP TABLE agent_triggers")).unwrap();
        parley_store::execute!(&mut tx, sqlx::query("DROP TABLE agents")).unwrap();
        tx.commit().await.unwrap();
        let r = app.get(&ws.live, "/api/v1/agents").await;
        assert_eq!(r.status, 500);
        let id = r.header("x-request-id").unwrap().to_owned();
        assert_eq!(r.body, json!({"detail": "Internal server error", "request_id": id}));
        assert!(!r.text.to_lowercase().contains("agents"), "leaks internals: {}", r.text);
        let _: Value = r.body;
    }
}
