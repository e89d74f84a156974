//! Issue 31: regressions for the defects a second outside security pass
//! found (each failed before its fix). Knowledge documents here; the others
//! beside the features they test, named in the module docs there.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::runtime::eventually;
use crate::support::*;

/// A PDF with a correct cross-reference table; objects are numbered from 1
/// (1 the catalog, 2 the page tree, 3 the page).
pub fn raw_pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut s = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
    s.extend_from_slice(data);
    s.extend_from_slice(b"\nendstream");
    s
}

const CATALOG: &[u8] = b"<< /Type /Catalog /Pages 2 0 R >>";
const PAGES: &[u8] = b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>";
const FONT: &[u8] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>";

/// The reported file: a form XObject whose own resources name itself.
fn self_drawing_pdf() -> Vec<u8> {
    raw_pdf(&[
        CATALOG.to_vec(),
        PAGES.to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X0 5 0 R >> >> /Contents 4 0 R >>".to_vec(),
        stream("", b"/X0 Do"),
        stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /X0 5 0 R >> >>", b"/X0 Do"),
    ])
}

/// One small form holding a long line, drawn 5,000 times: 45 MB of text from 1 KB.
fn text_amplifier_pdf() -> Vec<u8> {
    let line = format!("BT /F1 12 Tf 72 700 Td ({}) Tj ET", "repeated words ".repeat(600));
    raw_pdf(&[
        CATALOG.to_vec(),
        PAGES.to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /T 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>".to_vec(),
        stream("", "/T Do ".repeat(5000).as_bytes()),
        stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10]", line.as_bytes()),
        FONT.to_vec(),
    ])
}

fn plain_pdf(text: &str) -> Vec<u8> {
    raw_pdf(&[
        CATALOG.to_vec(),
        PAGES.to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>".to_vec(),
        stream("", format!("BT /F1 12 Tf 72 700 Td ({text}) Tj ET").as_bytes()),
        FONT.to_vec(),
    ])
}

async fn upload(app: &TestApp, key: &str, collection: i64, name: &str, kind: &str, bytes: Vec<u8>) -> Resp {
    let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()).mime_str(kind).unwrap();
    let r = app
        .client
        .post(app.url(&format!("/api/v1/knowledge-collections/{collection}/documents")))
        .header("X-API-Key", key)
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    Resp::from(r).await
}

async fn processed(app: &TestApp, key: &str, collection: i64, doc: &Resp) -> Value {
    assert_eq!(doc.status, 202, "{}", doc.text);
    let id = doc.body["id"].clone();
    eventually("the document was never processed", || async {
        let d = app.get(key, &format!("/api/v1/knowledge-collections/{collection}/documents/{id}")).await.body;
        (d["status"] != "processing").then_some(d)
    })
    .await
}

async fn collection(app: &TestApp, key: &str) -> i64 {
    let r = app.post(key, "/api/v1/knowledge-collections", json!({"name": "Help"})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["id"].as_i64().unwrap()
}

both_backends! {
    async fn a_pdf_that_draws_itself_fails_its_document_and_the_server_stays_up(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        // A test-mode key is enough to upload.
        let k = collection(&app, &ws.test).await;
        let bomb = self_drawing_pdf();
        assert!(bomb.len() < 745, "{} bytes", bomb.len());
        let doc = processed(&app, &ws.test, k, &upload(&app, &ws.test, k, "x.pdf", "application/pdf", bomb).await).await;
        assert_eq!(doc["status"], "failed", "{doc}");
        assert_eq!(doc["error"], "the PDF has a drawing (form XObject) that draws itself");
        // The server is up, its job is finished (not waiting to crash it again).
        assert_eq!(app.send(reqwest::Method::GET, "/readyz", None, None, &[]).await.status, 200);
        let mut c = app.db.read().await.unwrap();
        let jobs = parley_store::repo::jobs::of_kind(&mut c, "knowledge.document").await.unwrap();
        assert!(jobs.is_empty(), "{jobs:?}");
        drop(c);
        let good = upload(&app, &ws.test, k, "ok.pdf", "application/pdf", plain_pdf("We open at nine")).await;
        let good = processed(&app, &ws.test, k, &good).await;
        assert_eq!((good["status"].clone(), good["passage_count"].clone()), (json!("ready"), json!(1)), "{good}");
    }

    async fn hostile_documents_end_within_the_limits(backend) {
        let app = TestApp::spawn_with(backend, |s| s.limits.max_body_bytes = 4 * 1024 * 1024).await;
        let ws = app.workspace("Acme").await;
        let k = collection(&app, &ws.live).await;
        let started = Instant::now();
        // Nesting costs nothing: linear, no tree.
        let deep = format!("{}deep{}", "<div>".repeat(60_000), "</div>".repeat(60_000));
        let doc = processed(&app, &ws.live, k, &upload(&app, &ws.live, k, "deep.html", "text/html", deep.into_bytes()).await).await;
        assert_eq!((doc["status"].clone(), doc["passage_count"].clone()), (json!("ready"), json!(1)), "{doc}");
        let bold = format!("{}bold", "<b>".repeat(200_000));
        let doc = processed(&app, &ws.live, k, &upload(&app, &ws.live, k, "b.html", "text/html", bold.into_bytes()).await).await;
        assert_eq!(doc["status"], "ready", "{doc}");
        // 100,000 cells: a few hundred passages, not 600,000.
        let table = format!("<table><tr>{}</tr></table>", "<td>cell</td>".repeat(100_000));
        let doc = processed(&app, &ws.live, k, &upload(&app, &ws.live, k, "t.html", "text/html", table.into_bytes()).await).await;
        assert_eq!(doc["status"], "ready", "{doc}");
        assert!(doc["passage_count"].as_i64().unwrap() <= 2000, "{doc}");
        assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
        // 1 KB of PDF drawing a line 5,000 times: refused at the text limit.
        let doc = processed(&app, &ws.live, k, &upload(&app, &ws.live, k, "a.pdf", "application/pdf", text_amplifier_pdf()).await).await;
        assert_eq!(doc["status"], "failed");
        assert_eq!(doc["error"], "the document's text is longer than 2,000,000 characters; split it into smaller documents");
        // NUL in a document's text is stored as U+FFFD on both databases.
        let doc = processed(&app, &ws.live, k, &upload(&app, &ws.live, k, "nul.txt", "text/plain", b"before\0after".to_vec()).await).await;
        assert_eq!(doc["status"], "ready", "{doc}");
        // Text known up front is refused up front.
        let long = "word ".repeat(400_001);
        let r = app.post(&ws.live, &format!("/api/v1/knowledge-collections/{k}/documents"), json!({"title": "Long", "text": long})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()), (422, json!(["body", "text"]), json!("value_error.string.too_long")), "{}", r.text);
        let r = upload(&app, &ws.live, k, "long.txt", "text/plain", long.into_bytes()).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.file.too_long")), "{}", r.text);
        assert_eq!(r.body["detail"][0]["msg"], "the file's text is longer than 2,000,000 characters; split it into smaller documents");
    }

    async fn documents_are_read_outside_any_transaction(backend) {
        // A reader that takes 4 s: meanwhile nothing may wait on the document.
        let dir = tempfile::tempdir().unwrap();
        let reader = dir.path().join("slow-reader");
        std::fs::write(&reader, "#!/bin/sh\ncat >/dev/null\nsleep 4\nprintf 'ok\\nSlow but sure.'\n").unwrap();
        std::fs::set_permissions(&reader, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let program = reader.display().to_string();
        let app = TestApp::spawn_with(backend, move |s| s.knowledge.reader_program = Some(program)).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let k = collection(&app, &ws.live).await;
        let doc = upload(&app, &ws.live, k, "slow.pdf", "application/pdf", plain_pdf("x")).await;
        assert_eq!(doc.status, 202);
        tokio::time::sleep(Duration::from_millis(500)).await;
        for n in 0..3 {
            let started = Instant::now();
            let r = app.post(&other.live, "/api/v1/contacts", json!({"display_name": format!("Ana {n}")})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            assert!(started.elapsed() < Duration::from_millis(1500), "a write waited {:?} on a document", started.elapsed());
            if backend == Backend::Postgres {
                let idle: Vec<(i32,)> = sqlx::query_as(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'",
                )
                .fetch_all(&sqlx::PgPool::connect(&app.database_url).await.unwrap())
                .await
                .unwrap();
                assert!(idle.is_empty(), "a transaction is held open while a document is read: {idle:?}");
            }
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        let doc = processed(&app, &ws.live, k, &doc).await;
        assert_eq!(doc["status"], "ready", "{doc}");
    }
}

/// A tool call with `Authorization: Bearer <token>` (an OAuth access token).
async fn call_with_token(app: &TestApp, token: &str, tool: &str, arguments: Value) -> Value {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let r = app.send(reqwest::Method::POST, "/mcp", None, Some(body), &headers).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["result"].clone()
}

/// Every role-gated operation MCP offers, on workspace `ws`'s endpoint
/// `webhook` and its delivery `delivery`: (tool, arguments, REST method, path, body).
fn webhook_operations(
    ws: i64,
    webhook: i64,
    delivery: i64,
) -> Vec<(&'static str, Value, reqwest::Method, String, Option<Value>)> {
    use reqwest::Method;
    let url = "http://127.0.0.1:9/hook";
    let at = |p: &str| format!("/api/v1/webhooks{p}");
    vec![
        ("list_webhooks", json!({"workspace_id": ws}), Method::GET, at(""), None),
        (
            "get_webhook",
            json!({"workspace_id": ws, "webhook_id": webhook}),
            Method::GET,
            at(&format!("/{webhook}")),
            None,
        ),
        (
            "create_webhook",
            json!({"workspace_id": ws, "url": url, "events": ["*"]}),
            Method::POST,
            at(""),
            Some(json!({"url": url, "events": ["*"]})),
        ),
        (
            "update_webhook",
            json!({"workspace_id": ws, "webhook_id": webhook, "description": "mine now"}),
            Method::PATCH,
            at(&format!("/{webhook}")),
            Some(json!({"description": "mine now"})),
        ),
        (
            "rotate_webhook_secret",
            json!({"workspace_id": ws, "webhook_id": webhook}),
            Method::POST,
            at(&format!("/{webhook}/rotate-secret")),
            None,
        ),
        (
            "send_test_event",
            json!({"workspace_id": ws, "webhook_id": webhook}),
            Method::POST,
            at(&format!("/{webhook}/test")),
            None,
        ),
        (
            "list_webhook_deliveries",
            json!({"workspace_id": ws, "webhook_id": webhook}),
            Method::GET,
            at(&format!("/{webhook}/deliveries")),
            None,
        ),
        (
            "retry_webhook_delivery",
            json!({"workspace_id": ws, "webhook_id": webhook, "delivery_id": delivery}),
            Method::POST,
            at(&format!("/{webhook}/deliveries/{delivery}/retry")),
            None,
        ),
        (
            "delete_webhook",
            json!({"workspace_id": ws, "webhook_id": webhook}),
            Method::DELETE,
            at(&format!("/{webhook}")),
            None,
        ),
    ]
}

both_backends! {
    async fn a_member_cannot_manage_another_workspaces_webhooks_through_mcp_or_rest(backend) {
        use parley_domain::user::Role;
        use crate::oauth::PASSWORD;
        let app = TestApp::spawn(backend).await;
        let (a, b, c) = (app.workspace("A").await, app.workspace("B").await, app.workspace("C").await);
        // Ana owns A and is a member of B; Bo owns C and is an admin of B.
        let ana = app.user("ana@example.com", PASSWORD, a.id, Role::Owner).await;
        let bo = app.user("bo@example.com", PASSWORD, c.id, Role::Owner).await;
        let mut tx = app.db.begin().await.unwrap();
        parley_store::repo::users::set_membership(&mut tx, ana, b.id, Role::Member).await.unwrap();
        parley_store::repo::users::set_membership(&mut tx, bo, b.id, Role::Admin).await.unwrap();
        tx.commit().await.unwrap();
        // B's endpoint, with one delivery.
        let hook = app.post(&b.live, "/api/v1/webhooks", json!({"url": "http://127.0.0.1:9/b", "events": ["*"]})).await;
        assert_eq!(hook.status, 201, "{}", hook.text);
        let webhook = hook.body["id"].as_i64().unwrap();
        assert_eq!(app.post(&b.live, &format!("/api/v1/webhooks/{webhook}/test"), json!({})).await.status, 202);
        let delivery = eventually("the test event was never attempted", || async {
            app.get(&b.live, &format!("/api/v1/webhooks/{webhook}/deliveries")).await.body["items"][0]["id"].as_i64()
        })
        .await;

        let ana_session = app.token("ana@example.com", PASSWORD).await;
        let ana_key = crate::mcp::key_of_user(&app, &ana_session, false).await;
        let ana_grant = crate::oauth::unlocked_grant(&app, "ana@example.com", a.id).await;
        let switched = app.bearer(reqwest::Method::POST, "/api/v1/auth/workspace", &ana_session, Some(json!({"workspace_id": b.id}))).await;
        assert_eq!(switched.status, 200, "{}", switched.text);
        let ana_in_b = switched.body["access_token"].as_str().unwrap().to_owned();
        let refused = json!("Only owners and admins can manage webhooks");
        for (tool, arguments, method, path, body) in webhook_operations(b.id, webhook, delivery) {
            let by_key = crate::mcp::call(&app, &ana_key, tool, arguments.clone()).await;
            assert_eq!((by_key["isError"].clone(), by_key["structuredContent"]["status"].clone(), by_key["structuredContent"]["detail"].clone()), (json!(true), json!(403), refused.clone()), "{tool} with Ana's key in B: {by_key}");
            let by_grant = call_with_token(&app, &ana_grant, tool, arguments).await;
            assert_eq!((by_grant["structuredContent"]["status"].clone(), by_grant["structuredContent"]["detail"].clone()), (json!(403), refused.clone()), "{tool} with Ana's grant in B: {by_grant}");
            let rest = app.bearer(method, &path, &ana_in_b, body).await;
            assert_eq!((rest.status, rest.body["detail"].clone()), (403, refused.clone()), "{path} with Ana's session in B");
        }
        // Nothing changed in B.
        let after = app.get(&b.live, &format!("/api/v1/webhooks/{webhook}")).await;
        assert_eq!((after.status, after.body["description"].clone()), (200, hook.body["description"].clone()));
        assert_eq!(app.get(&b.live, "/api/v1/webhooks").await.body["total"], 1);

        // The same key in its own workspace has its full powers…
        let own = crate::mcp::call(&app, &ana_key, "create_webhook", json!({"url": "http://127.0.0.1:9/a", "events": ["*"]})).await;
        assert_eq!(own["isError"], false, "{own}");
        // …and a key whose creator is an admin of B manages B's endpoints.
        let bo_session = app.token("bo@example.com", PASSWORD).await;
        let bo_key = crate::mcp::key_of_user(&app, &bo_session, false).await;
        let r = crate::mcp::call(&app, &bo_key, "update_webhook", json!({"workspace_id": b.id, "webhook_id": webhook, "description": "by an admin"})).await;
        assert_eq!((r["isError"].clone(), r["structuredContent"]["description"].clone()), (json!(false), json!("by an admin")), "{r}");
        let r = crate::mcp::call(&app, &bo_key, "rotate_webhook_secret", json!({"workspace_id": b.id, "webhook_id": webhook})).await;
        assert_eq!(r["isError"], false, "{r}");
    }
}

both_backends! {
    // Issue 31: an unknown public id and a wrong signature answered 401 in
    // different words (telling a channel that exists from one that does
    // not), and wrong webhook secrets were not counted against the IP.
    async fn hook_refusals_say_the_same_words_and_count_against_the_ip(backend) {
        let app = TestApp::spawn_with(backend, |s| s.rate_limit.auth_failures_per_minute = 4).await;
        let ws = app.workspace("Shop").await;
        let sms = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "SMS", "config": {
            "account_sid": format!("AC{}", "0".repeat(32)), "auth_token": "token", "from": "+14155550100",
            "base_url": "http://127.0.0.1:9"}})).await;
        assert_eq!(sms.status, 201, "{}", sms.text);
        let email = app.post(&ws.live, "/api/v1/channels", json!({"type": "email", "name": "Mail", "config": {
            "address": "support@shop.example", "smtp_host": "127.0.0.1", "inbound_secret": "s".repeat(32)}})).await;
        let public = |r: &Resp| r.body["public_id"].as_str().unwrap().to_owned();
        let (sms_id, email_id) = (public(&sms), public(&email));
        let post = |path: String, headers: Vec<(&'static str, &'static str)>| {
            let app = &app;
            async move {
                let mut r = app.client.post(app.url(&path)).body("From=%2B14155550111&Body=hi&MessageSid=SM1");
                for (k, v) in headers {
                    r = r.header(k, v);
                }
                let r = r.send().await.unwrap();
                (r.status().as_u16(), r.json::<Value>().await.unwrap()["detail"].clone())
            }
        };
        let form = ("content-type", "application/x-www-form-urlencoded");
        let pairs = [
            (format!("/hooks/twilio/{sms_id}/inbound"), "/hooks/twilio/sms_nosuchchannel/inbound".to_owned(), vec![form, ("x-twilio-signature", "c2lnbmF0dXJl")]),
            (format!("/hooks/email/{email_id}"), "/hooks/email/em_nosuchchannel".to_owned(), vec![("authorization", "Bearer wrong-wrong-wrong-wrong-wrong")]),
        ];
        let mut refusals = 0;
        for (real, unknown, headers) in pairs {
            let wrong = post(real, headers.clone()).await;
            let missing = post(unknown, headers).await;
            assert_eq!(wrong.0, 401);
            assert_eq!(wrong, missing, "one answer whether the channel exists or not");
            refusals += 2;
        }
        assert_eq!(refusals, 4);
        // The IP used its 4 failures a minute: a further refusal is a 429…
        let wrong = post(format!("/hooks/email/{email_id}"), vec![("authorization", "Bearer wrong-wrong-wrong-wrong-wrong")]).await;
        assert_eq!(wrong.0, 429, "{wrong:?}");
        // …but an authentic request from it still goes through: providers
        // post every tenant's traffic from a few shared addresses.
        let secret = format!("Bearer {}", "s".repeat(32));
        let r = app.client.post(app.url(&format!("/hooks/email/{email_id}"))).header("authorization", secret)
            .header("content-type", "message/rfc822")
            .body("From: a@b.example\r\nMessage-ID: <x@b.example>\r\n\r\nhi").send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
}
