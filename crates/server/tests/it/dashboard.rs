//! Issue 32: the dashboard, driven in Debian's Chromium by the journeys in
//! `tests/browser/dashboard/` (sign-in and session, modes and workspaces,
//! keys, the member's limits, markup shown as text, a session that ends,
//! the keyboard), each page state checked with axe-core.

use parley_domain::{Mode, user::Role};
use parley_services::tenancy::workspaces::{self, NewKey};
use serde_json::json;

use crate::support::*;

const PW: &str = "a long enough password";
/// Access tokens this short make every journey renew its session a few
/// times, and the expiry journey see its end within seconds.
const ACCESS_TOKEN_TTL: i64 = 6;

async fn named_key(app: &TestApp, workspace_id: i64, mode: Mode, name: &str) {
    let mut tx = app.db.begin().await.unwrap();
    let key =
        NewKey { workspace_id, mode, name: name.into(), workspace_locked: false, created_by: None, expires_at: None };
    workspaces::create_key(&mut tx, key).await.unwrap();
    tx.commit().await.unwrap();
}

/// `PARLEY_JOURNEYS="agents calls"` runs only those (while working on a
/// page); the test then checks only what they reach.
fn only_journeys() -> Vec<String> {
    std::env::var("PARLEY_JOURNEYS").map(|v| v.split_whitespace().map(str::to_owned).collect()).unwrap_or_default()
}

/// Runs the journeys `only` (all but those that need a server of their own
/// when empty) against `app` (or the server `config` names as its `base`)
/// and returns the runner's output lines; panics with the output when one
/// fails.
async fn journeys(app: &TestApp, config: serde_json::Value, only: &[String]) -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    // PARLEY_SCREENSHOTS=dir keeps the screenshots there, to look at them.
    let keep = std::env::var_os("PARLEY_SCREENSHOTS").map(std::path::PathBuf::from);
    let scratch = keep.clone().unwrap_or_else(std::env::temp_dir).join(format!("parley-dashboard-{}", uuid()));
    std::fs::create_dir_all(&scratch).unwrap();
    let mut config = config;
    if config.get("base").is_none() {
        config["base"] = json!(app.base);
    }
    config["screenshots"] = json!(scratch.display().to_string());
    let config_path = scratch.join("config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    let output = tokio::time::timeout(
        // Alone on this 2-core machine they take about 4 minutes; a loaded
        // one, more (nextest ends the test at 8).
        std::time::Duration::from_secs(420),
        tokio::process::Command::new("node")
            .arg(format!("{dir}/dashboard/journeys.mjs"))
            .arg(&config_path)
            .args(only)
            .current_dir(dir)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the journeys finished")
    .expect("node runs (see scripts/test for the browser tests' needs)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "screenshots in {}\n{stdout}\n{}",
        scratch.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    if !only.is_empty() {
        return stdout.lines().map(str::to_owned).collect();
    }
    // A rendered page compresses far worse than a blank one.
    for shot in [
        "sign-in.png",
        "api-keys.png",
        "test-mode.png",
        "members.png",
        "webhook.png",
        "call.png",
        "home.png",
        "playground.png",
    ] {
        let png = std::fs::read(scratch.join(shot)).expect("the screenshot was saved");
        assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "{shot}: {} bytes", png.len());
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    stdout.lines().map(str::to_owned).collect()
}

// The journeys drive the dashboard as people do; every API they call is
// tested on both backends by the API tests. They run once, on PostgreSQL
// (production's database, where the inbox's race is a real one): a second
// run on SQLite cost CI about three minutes of the machine to themselves.
// `PARLEY_JOURNEYS_BACKEND=sqlite` runs them on SQLite (as before a release).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_journeys_pass_in_chromium() {
    let backend = match std::env::var("PARLEY_JOURNEYS_BACKEND").as_deref() {
        Ok("sqlite") => Backend::Sqlite,
        _ => Backend::Postgres,
    };
    let app = TestApp::spawn_with(backend, |s| s.auth.access_token_ttl_seconds = ACCESS_TOKEN_TTL).await;
    let a = app.workspace("Acme").await;
    // A name is whatever its owner typed: shown as text, never markup.
    let b_name = r#"<img src=x onerror="window.__pwned=3">Beta"#;
    let b = app.workspace(b_name).await;
    // A workspace where nothing has happened, for the demo.
    let c = app.workspace("Gamma").await;
    named_key(&app, a.id, Mode::Test, "Acme staging").await;
    named_key(&app, b.id, Mode::Test, "Beta staging").await;
    let ana = app.user("ana@example.com", PW, a.id, Role::Owner).await;
    let mut tx = app.db.begin().await.unwrap();
    parley_store::repo::users::set_membership(&mut tx, ana, b.id, Role::Admin).await.unwrap();
    parley_store::repo::users::set_membership(&mut tx, ana, c.id, Role::Owner).await.unwrap();
    tx.commit().await.unwrap();
    app.user("mia@example.com", PW, a.id, Role::Member).await;
    // Rae forgot her password; an operator printed her a reset link.
    app.user("rae@example.com", PW, a.id, Role::Member).await;
    let (code, reset, err) =
        crate::cli::parley(&["user", "reset-password", "--email", "rae@example.com"], &app.database_url);
    assert_eq!(code, 0, "{err}");

    // An agent to call with in test mode, and calls the journeys must not see.
    let first_message = "Hi, this is Ava from Acme.";
    app.create_agent(&a.test, json!({"name": "Ava", "first_message": first_message})).await;
    let live_agent = app.create_agent(&a.live, json!({"name": "Live Ava"})).await["id"].as_i64().unwrap();
    let a_call = crate::calls::place(&app, &a.live, json!({"agent_id": live_agent, "to": "+14155550111"})).await;
    assert_eq!(a_call.status, 201, "{}", a_call.text);
    // The simulated line measures no latency: give the live call's agent
    // turns a breakdown, for its page's chart.
    let a_call_id = a_call.body["id"].as_str().unwrap().to_owned();
    crate::calls::wait_for(&app, &a.live, &a_call_id, |c| {
        crate::calls::ended(c) && c["recording"]["status"] == "available"
    })
    .await;
    let mut tx = app.db.begin().await.unwrap();
    let turn = parley_domain::call::TurnLatency {
        end_of_turn_ms: 200,
        stt_ms: 220,
        llm_first_token_ms: 310,
        tts_first_audio_ms: 180,
        voice_to_voice_ms: 990,
    };
    parley_store::execute!(&mut tx, sqlx::query(
        "UPDATE call_segments SET latency = $1 WHERE speaker = 'agent' AND idx > 0 AND call_id = (SELECT id FROM calls WHERE public_id = $2)")
        .bind(sqlx::types::Json(turn)).bind(&a_call_id)).unwrap();
    let overall = parley_domain::call::CallLatency { turns: 2, voice_to_voice_p50_ms: 990, voice_to_voice_p95_ms: 990 };
    parley_store::execute!(
        &mut tx,
        sqlx::query("UPDATE calls SET latency = $1 WHERE public_id = $2")
            .bind(sqlx::types::Json(overall))
            .bind(&a_call_id)
    )
    .unwrap();
    tx.commit().await.unwrap();
    app.create_agent(&a.live, json!({"name": "Kai"})).await;
    let b_agent = app.create_agent(&b.test, json!({"name": "Beta agent"})).await["id"].as_i64().unwrap();
    let b_call = crate::calls::place(&app, &b.test, json!({"agent_id": b_agent, "to": "+14155550122"})).await;
    assert_eq!(b_call.status, 201, "{}", b_call.text);

    // The inbox: a conversation whose contact asked for a person, on a
    // channel whose replies reach `receiver`; a label to put on it.
    let receiver = crate::receiver::Receiver::start().await;
    let (inbox_channel, inbox_secret) = crate::messages::sending_channel(&app, &a.live, &receiver.url).await;
    let lia = json!({"from": "lia-1", "text": "Can I talk to a person?", "external_id": "inbox-1", "contact": {"display_name": "Lia Moreau"}});
    let r = crate::conversations::inbound(&app, inbox_channel, &inbox_secret, lia).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let lia_conversation = r.body["conversation_id"].as_i64().unwrap();
    let r = app
        .post(
            &a.live,
            &format!("/api/v1/conversations/{lia_conversation}/handoff"),
            json!({"to": "human", "reason": "Asked for a person"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(app.post(&a.live, "/api/v1/labels", json!({"name": "vip"})).await.status, 201);
    let noah = json!({"from": "noah-1", "text": "Is my order shipped?", "external_id": "inbox-3", "contact": {"display_name": "Noah Park"}});
    let r = crate::conversations::inbound(&app, inbox_channel, &inbox_secret, noah).await;
    let noah_conversation = r.body["conversation_id"].as_i64().unwrap();
    // Two more, for changing many at once.
    for (who, name) in [("ola-1", "Ola Berg"), ("pia-1", "Pia Lund")] {
        let body = json!({"from": who, "text": "Hello?", "external_id": format!("inbox-{who}"), "contact": {"display_name": name}});
        assert_eq!(crate::conversations::inbound(&app, inbox_channel, &inbox_secret, body).await.status, 201);
    }

    // A Twilio-format server (its wire format from Twilio's documentation).
    let (twilio, sent) = crate::sms::messages_server().await;
    // An SMS conversation waiting for a person, on a channel of that server.
    let (_, sms_public) = crate::sms::twilio_channel(&app, &a, "sms", "+14155550188", &twilio).await;
    let sam = [
        ("MessageSid", "SM0000000000000000000000000000dash"),
        ("AccountSid", crate::sms::ACCOUNT),
        ("From", "+14155550177"),
        ("To", "+14155550188"),
        ("Body", "Where is my refund?"),
        ("NumMedia", "0"),
    ];
    let r =
        crate::sms::twilio_posts(&app, &format!("/hooks/twilio/{sms_public}/inbound"), &sam, crate::sms::TOKEN).await;
    assert_eq!(r.status(), 200);
    let sms_conversation =
        app.get(&a.live, "/api/v1/conversations?channel=sms").await.body["items"][0]["id"].as_i64().unwrap();
    assert_eq!(
        app.patch(&a.live, &format!("/api/v1/conversations/{sms_conversation}"), json!({"title": "Sam Ortiz"}))
            .await
            .status,
        200
    );
    let r = app
        .post(
            &a.live,
            &format!("/api/v1/conversations/{sms_conversation}/handoff"),
            json!({"to": "human", "reason": "Refund question"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    // A WhatsApp conversation the shop began with a template: the
    // contact has not written, so only a template may go.
    let r = app.post(&a.live, "/api/v1/channels", json!({"type": "whatsapp", "name": "WhatsApp", "config": {
        "account_sid": crate::sms::ACCOUNT, "auth_token": crate::sms::TOKEN, "from": "whatsapp:+14155550189", "base_url": twilio, "content_base_url": twilio}})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app
        .post(
            &a.live,
            "/api/v1/messages",
            json!({"channel_id": r.body["id"], "to": "+14155550166", "text": "Hi Wes, your order 1234 has shipped.",
        "template": {"content_sid": crate::sms::TEMPLATE_1, "variables": {"1": "Wes", "2": "1234"}}}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let whatsapp_conversation = r.body["conversation_id"].as_i64().unwrap();
    assert_eq!(
        app.patch(&a.live, &format!("/api/v1/conversations/{whatsapp_conversation}"), json!({"title": "Wes Park"}))
            .await
            .status,
        200
    );

    // Two members racing to accept one handoff.
    app.user("leo@example.com", PW, a.id, Role::Member).await;
    let uma = json!({"from": "uma-1", "text": "Anyone?", "external_id": "inbox-uma", "contact": {"display_name": "Uma Diaz"}});
    let uma_conversation =
        crate::conversations::inbound(&app, inbox_channel, &inbox_secret, uma).await.body["conversation_id"]
            .as_i64()
            .unwrap();
    let r = app
        .post(
            &a.live,
            &format!("/api/v1/conversations/{uma_conversation}/handoff"),
            json!({"to": "human", "reason": "Asked twice"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);

    // An email, quoting the shop's last one, on a channel that sends
    // through a real SMTP server (STARTTLS and AUTH); waiting for a person.
    let certs = crate::email::Certs::new();
    let smtp = crate::email::Smtp::start(&certs);
    let (_, email_public) = crate::email::email_channel(
        &app,
        &a.live,
        json!({
        "address": "support@shop.example", "from_name": "Acme Support",
        "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "smtp_security": "starttls",
        "smtp_username": "parley", "smtp_password": "smtp-pass", "tls_ca_pem": certs.ca_pem(),
        "inbound_secret": crate::email::SECRET}),
    )
    .await;
    let mail = "From: Eve Ng <eve@customer.example>\nTo: support@shop.example\nSubject: Broken zipper\n\
        Message-ID: <eve-1@customer.example>\nDate: Thu, 26 Nov 2026 09:00:00 +0000\nContent-Type: text/plain; charset=utf-8\n\n\
        Hello, the zipper broke on day two.\n\nOn Wed, Nov 25, 2026 at 9:00 AM Acme Support <support@shop.example> wrote:\n> Thanks for your order.\n";
    let bearer = format!("Bearer {}", crate::email::SECRET);
    assert_eq!(crate::email::post_mail(&app, &email_public, Some(&bearer), mail).await, 200);
    let email_conversation =
        app.get(&a.live, "/api/v1/conversations?channel=email").await.body["items"][0]["id"].as_i64().unwrap();
    let r = app
        .post(
            &a.live,
            &format!("/api/v1/conversations/{email_conversation}/handoff"),
            json!({"to": "human", "reason": "Damaged item"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);

    // The shop's own site, with the webchat widget: agent Wren answers
    // it (the builtin engine, no knowledge: it says it cannot) and hands
    // off when the visitor asks for a person.
    let wren = app
        .create_agent(
            &a.live,
            json!({"name": "Wren", "tools": [], "debounce_ms": 200, "handoff": {"keywords": ["person"]}}),
        )
        .await;
    let r = app
        .post(
            &a.live,
            &format!("/api/v1/agents/{}/triggers", wren["id"]),
            json!({"event": "message.received", "channel": "webchat"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shop = format!("http://{}", listener.local_addr().unwrap());
    let (_, webchat_public) =
        crate::webchat::webchat_channel(&app, &a.live, json!({"allowed_origins": [shop], "title": "Acme"})).await;
    let page = format!(
        "<!doctype html><html lang=en><head><title>Acme shop</title></head><body><main><h1>Acme shop</h1></main>\
         <script src=\"{}\" data-channel=\"{webchat_public}\" async></script></body></html>",
        app.url("/webchat/widget.js")
    );
    let site = axum::Router::new().route("/", axum::routing::get(move || async move { axum::response::Html(page) }));
    tokio::spawn(async move { axum::serve(listener, site).await.unwrap() });

    let lines = journeys(&app, json!({
        "receiver_url": receiver.url,
        "access_token_ttl": ACCESS_TOKEN_TTL,
        "owner": {"email": "ana@example.com", "password": PW},
        "member": {"email": "mia@example.com", "password": PW},
        "resetting": {"email": "rae@example.com", "password": PW},
        "reset_url": reset["reset_url"],
        "agent_name": "Ava",
        "first_message": first_message,
        "test_key": a.test,
        "live_key": a.live,
        "knowledge_agent": "Kai",
        "twilio": {"base_url": twilio, "account_sid": crate::sms::ACCOUNT, "auth_token": crate::sms::TOKEN},
        "calls": {"a": a_call.body["id"], "foreign": b_call.body["id"]},
        "second_member": {"email": "leo@example.com", "password": PW},
        "inbox": {"channel_id": inbox_channel, "secret": inbox_secret.expose(), "noah": noah_conversation, "sms": sms_conversation,
            "uma": uma_conversation, "email": email_conversation, "whatsapp": whatsapp_conversation},
        "webchat": {"page": shop, "agent_id": wren["id"], "agent_answer": parley_engines::builtin::NO_ANSWER},
        "workspaces": {
            "a": {"id": a.id, "name": "Acme", "live_key_id": a.live_key_id, "live_key_name": "Default live key", "test_key_name": "Acme staging"},
            "b": {"id": b.id, "name": b_name, "test_key_name": "Beta staging", "live_key": b.live},
            "c": {"id": c.id, "name": "Gamma"},
        },
    }), &only_journeys()).await;
    if !only_journeys().is_empty() {
        return;
    }
    let passed: Vec<&str> =
        lines.iter().filter_map(|l| l.strip_prefix("PASS ")).map(|l| l.split(' ').next().unwrap()).collect();
    let expected = [
        "sign-in",
        "keys",
        "modes",
        "member",
        "xss",
        "members",
        "member-list",
        "reset-password",
        "webhooks",
        "connected-apps",
        "agents",
        "knowledge",
        "contacts",
        "channels",
        "billing",
        "demo",
        "calls",
        "latency",
        "phone",
        "expiry",
        "keyboard",
        "inbox",
        "inbox-together",
        "inbox-sms",
        "inbox-webchat",
        "inbox-race",
        "inbox-email",
        "inbox-whatsapp",
    ];
    assert_eq!(passed.len(), expected.len(), "{lines:#?}");
    for journey in expected {
        assert!(passed.contains(&journey), "{journey} did not pass: {lines:#?}");
    }
    let axed: Vec<&str> = lines.iter().filter_map(|l| l.strip_prefix("AXE ")).collect();
    for state in [
        "sign-in",
        "sign-in with an error",
        "not found",
        "create key",
        "create key with an error",
        "new key",
        "revoke key",
        "test mode",
        "member without key access",
        "members",
        "invite with an error",
        "invitation link",
        "change role",
        "accept invitation",
        "members as a member",
        "reset password",
        "webhooks, none yet",
        "add endpoint with an error",
        "webhook endpoint",
        "connected apps, none",
        "calls, none yet",
        "place call with an error",
        "call page",
        "call page with latency",
        "home",
        "create agent with an error",
        "agent settings",
        "agent settings with an error",
        "playground",
        "knowledge, none yet",
        "collection",
        "contacts, none yet",
        "import with a bad row",
        "contact",
        "merge contacts",
        "channels, none yet",
        "connect sms with an error",
        "sms channel",
        "webchat channel",
        "webchat preview",
        "billing",
        "run",
        "home, quiet",
        "home with the demo",
        "contact with a chat",
        "agent triggers with an error",
        "inbox, nothing mine",
        "inbox, handoff waiting",
        "inbox, taken over",
        "inbox, given back",
        "inbox, two selected",
        "inbox settings",
        "inbox settings with an error",
        "inbox, two members",
        "notifications",
        "inbox, sms reply",
        "snooze",
        "inbox, webchat",
        "inbox, accepted by another",
        "inbox, email reply",
        "inbox, whatsapp template",
        "/ on a phone",
        "/agents on a phone",
        "/calls on a phone",
        "/calls/{id} on a phone",
        "/contacts on a phone",
        "/knowledge on a phone",
        "/channels on a phone",
        "/billing on a phone",
        "/runs on a phone",
        "/developers/api-keys on a phone",
        "/settings/members on a phone",
        "/developers/webhooks on a phone",
    ] {
        assert!(axed.contains(&state), "axe-core did not check {state}: {axed:?}");
    }
    // The inbox's reply reached the channel; its private note never did.
    let got = receiver.received();
    let bodies: Vec<String> = got.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    assert!(bodies.iter().any(|b| b.contains("Let me check")), "the reply was not sent: {bodies:?}");
    assert!(!bodies.iter().any(|b| b.contains("please approve")), "a private note was sent: {bodies:?}");
    // The SMS reply reached the Twilio-format server, to the contact, from the channel's number.
    let texts = sent.lock().unwrap().clone();
    let reply = texts
        .iter()
        .find(|m| m.get("Body").is_some_and(|b| b.starts_with("Hi Sam, your refund")))
        .expect("the SMS reply was not sent");
    assert_eq!((reply.get("To"), reply.get("From")), (Some("+14155550177"), Some("+14155550188")));
    // The template went to Twilio with the placeholders the member filled in.
    let template = texts
        .iter()
        .find(|m| m.get("ContentVariables").is_some_and(|v| v.contains("5678")))
        .expect("the template was not sent");
    assert_eq!(
        (template.get("ContentSid"), template.get("To")),
        (Some(crate::sms::TEMPLATE_1), Some("whatsapp:+14155550166"))
    );
    let variables: serde_json::Value = serde_json::from_str(template.get("ContentVariables").unwrap()).unwrap();
    assert_eq!(variables, json!({"1": "Wes", "2": "5678"}));
    // The email reply went out over SMTP in Eve's thread.
    let (raw, meta) = smtp.received().into_iter().next().expect("the email reply reached the SMTP server");
    assert_eq!((meta["tls"].clone(), meta["rcpt_tos"].clone()), (json!(true), json!(["eve@customer.example"])));
    let raw = String::from_utf8_lossy(&raw);
    for header in
        ["Subject: Re: Broken zipper", "In-Reply-To: <eve-1@customer.example>", "References: <eve-1@customer.example>"]
    {
        assert!(raw.contains(header), "{header} missing: {raw}");
    }
    // One of the two racing members has Uma's conversation; one handoff accepted.
    let uma = app.get(&a.live, &format!("/api/v1/conversations/{uma_conversation}")).await.body;
    assert_eq!(uma["handler"], "human");
    let handoffs = app.get(&a.live, &format!("/api/v1/handoffs?conversation_id={uma_conversation}")).await.body;
    assert_eq!(
        (handoffs["total"].clone(), handoffs["items"][0]["status"].clone()),
        (json!(1), json!("accepted")),
        "{handoffs}"
    );
    assert_eq!(handoffs["items"][0]["user_id"], uma["assignee_user_id"]);
    // The webchat: the agent spoke before the handoff and after the
    // give-back, never while Mia had it; Mia's reply came between.
    let chat = app.get(&a.live, "/api/v1/conversations?channel=webchat").await.body["items"][0]["id"].clone();
    let messages = app.get(&a.live, &format!("/api/v1/conversations/{chat}/messages?limit=100")).await.body;
    let said: Vec<(String, String)> = messages["items"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter(|m| m["direction"] == "outbound")
        .map(|m| (m["author"]["type"].as_str().unwrap().to_owned(), m["text"].as_str().unwrap().to_owned()))
        .collect();
    let answer = parley_engines::builtin::NO_ANSWER.to_owned();
    assert_eq!(
        said,
        [
            ("agent".to_owned(), answer.clone()),
            ("user".to_owned(), "Hi, Mia here. Yes, we ship to Norway.".to_owned()),
            ("agent".to_owned(), answer)
        ]
    );
    // The test event and its resend reached the receiver, signed.
    assert!(got.len() >= 3, "{} deliveries", got.len());
    assert!(got.iter().all(|r| r.header("webhook-signature").starts_with("v1,")), "unsigned delivery");
    // The revoked key stays revoked in the database, not only in the page.
    let token = app.token("ana@example.com", PW).await;
    let revoked = app.bearer(reqwest::Method::GET, "/api/v1/api-keys?mode=live&limit=100", &token, None).await;
    let ci = revoked.body["items"].as_array().unwrap().iter().find(|k| k["name"] == "CI deploy").cloned().unwrap();
    assert!(ci["revoked_at"].is_string(), "{ci}");
}

/// Lighthouse (npm `lighthouse@12.2.3`, mobile emulation, simulated
/// throttling) on Home, Agents and a call page, signed in, over the demo's
/// data: performance >= 90, accessibility >= 95, best practices >= 95, and
/// no run warning (a page that never settles). A page under target is
/// measured twice more and its median run of three decides (lighthouse.mjs:
/// one run varies with the machine's load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_scores_in_lighthouse() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let a = app.workspace("Acme").await;
    app.user("ana@example.com", PW, a.id, Role::Owner).await;
    let demo = app.post(&a.test, "/api/v1/demo", json!({})).await;
    assert_eq!(demo.status, 201, "{}", demo.text);
    let call = demo.body["call_id"].as_str().unwrap().to_owned();
    let ready = |c: &serde_json::Value| crate::calls::ended(c) && c["recording"]["status"] == "available";
    crate::calls::wait_for(&app, &a.test, &call, ready).await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser");
    let config = std::env::temp_dir().join(format!("parley-lighthouse-{}.json", uuid()));
    let pages = json!([["Home", "/"], ["Agents", "/agents"], ["call page", format!("/calls/{call}")]]);
    let body = json!({"base": app.base, "email": "ana@example.com", "password": PW, "pages": pages});
    std::fs::write(&config, body.to_string()).unwrap();
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        tokio::process::Command::new("node")
            .arg(format!("{dir}/dashboard/lighthouse.mjs"))
            .arg(&config)
            .current_dir(dir)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("Lighthouse finished")
    .expect("node runs (see scripts/test for the browser tests' needs)");
    let _ = std::fs::remove_file(&config);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The scores, for the log (nextest shows them with --success-output).
    println!("{stdout}");
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.lines().filter(|l| l.starts_with("lighthouse ")).count(), 3, "{stdout}");
}

/// A page load fetches a few dozen modules: they do not spend the IP's
/// request quota, which stays for the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboards_files_do_not_spend_the_rate_limit() {
    let app = TestApp::spawn_with(Backend::Sqlite, |s| {
        s.rate_limit.per_second = 1.0;
        s.rate_limit.burst = 3;
    })
    .await;
    for _ in 0..20 {
        let r = app.send(reqwest::Method::GET, "/assets/app.js", None, None, &[]).await;
        assert_eq!(r.status, 200);
    }
    let mut api = Vec::new();
    for _ in 0..5 {
        api.push(app.send(reqwest::Method::GET, "/api/v1/agents", Some("parley_live_nope"), None, &[]).await.status);
    }
    assert!(api.contains(&429), "the API's quota still holds: {api:?}");
}

/// Two instances on one PostgreSQL database, one of them a `parley serve`
/// process: messages accepted by the one show in a dashboard signed in on
/// the other within a second (the stream fed by PostgreSQL's signals).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_on_one_instance_reaches_a_dashboard_on_another_within_a_second() {
    let app = TestApp::spawn(Backend::Postgres).await;
    let ws = app.workspace("Acme").await;
    app.user("ana@example.com", PW, ws.id, Role::Owner).await;
    let receiver = crate::receiver::Receiver::start().await;
    let (channel, secret) = crate::messages::sending_channel(&app, &ws.live, &receiver.url).await;
    let first = json!({"from": "ivy-1", "text": "First, on instance A", "external_id": "instances-0", "contact": {"display_name": "Ivy Chen"}});
    let r = crate::conversations::inbound(&app, channel, &secret, first).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let url = app.database_url.clone();
    let other = tokio::task::spawn_blocking(move || crate::cli::start_server_with(&url, &[])).await.unwrap();
    let lines = journeys(&app, json!({
        "base": format!("http://127.0.0.1:{}", other.port),
        "owner": {"email": "ana@example.com", "password": PW},
        "instances": {"a_base": app.base, "channel_id": channel, "secret": secret.expose(), "conversation": r.body["conversation_id"]},
    }), &["instances".to_owned()]).await;
    let took = lines.iter().find_map(|l| l.strip_prefix("INSTANCES ")).expect("the journey printed its times");
    println!("instance A accepted → instance B's dashboard showed it (ms): {took}");
    assert!(lines.iter().any(|l| l.starts_with("PASS instances")), "{lines:#?}");
}

/// Issue 35: "Talk to this agent" on the agent's page places a web call in
/// Chromium, its fake microphone playing a caller (espeak-ng) who talks over
/// the agent's long greeting: the agent stops within 300 ms (the stereo
/// recording shows it), the browser drops what was queued, whisper tiny.en
/// hears the caller, and the agent answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_talks_to_an_agent_over_a_web_call_in_chromium() {
    let stt = parley_speech::local_servers::whisper();
    let app = crate::web_calls::web_app(Backend::Sqlite, &stt).await;
    let ws = app.workspace("Acme").await;
    app.user("ana@example.com", PW, ws.id, Role::Owner).await;
    let greeting = "Hello, this is Ava from Acme, the shop for everything you need at home. \
                    We can help you with orders, returns, deliveries, bookings and anything else you need today, \
                    so tell me what brings you here and I will do my best to help you quickly.";
    let body = json!({"name": "Ava", "first_message": greeting, "first_message_mode": "interruptible", "interruption_threshold_ms": 200});
    let agent = app.create_agent(&ws.live, body).await;

    // The caller: quiet for 6 s (the call starts, the greeting plays), then
    // talks over the greeting, then quiet. The file starts with the capture.
    let said = "hello, I would like to know where my order is, please call me back tomorrow morning";
    let wav = crate::web_calls::caller_wav(said, 6000, 20_000).await;

    let lines = journeys(
        &app,
        json!({
            "owner": {"email": "ana@example.com", "password": PW},
            "fake_microphone": wav.display().to_string(),
            "web_call": {"agent_id": agent["id"], "agent_name": "Ava", "greeting": greeting},
        }),
        &["web-call".to_owned()],
    )
    .await;
    let _ = std::fs::remove_file(&wav);
    assert!(lines.iter().any(|l| l.starts_with("PASS web-call")), "{lines:#?}");
    // The call is on record like any other: answered, ended by the browser, the caller heard.
    let calls = app.get(&ws.live, "/api/v1/calls").await.body;
    let call = &calls["items"][0];
    assert_eq!((call["provider"].clone(), call["status"].clone()), (json!("web"), json!("completed")), "{call}");
    let id = call["id"].as_str().unwrap();
    let segments = app.get(&ws.live, &format!("/api/v1/calls/{id}/transcript")).await.body["segments"].clone();
    let segments = segments.as_array().unwrap();
    assert_eq!(
        (segments[0]["speaker"].clone(), segments[0]["interrupted"].clone()),
        (json!("agent"), json!(true)),
        "{segments:#?}"
    );
    let heard =
        segments.iter().find(|s| s["speaker"] == "caller").expect("the caller was heard")["text"].as_str().unwrap();
    assert!(parley_speech::local_servers::recall(said, heard) >= 0.9, "whisper heard {heard:?} for {said:?}");
    // The stereo recording: the caller on the left from where they began,
    // the agent on the right until then, and quiet within 300 ms of it.
    let recording = crate::calls::wait_for(&app, &ws.live, id, |c| c["recording"]["status"] == "available").await;
    assert_eq!(recording["recording"]["status"], "available");
    let j = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording?redirect=true")).await;
    let wav = app.client.get(j.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
    let loud = |channel: usize, ms: i64| crate::voice::loudness(&wav, channel, ms, ms + 20) > 300.0;
    let caller_starts = (0..20_000).step_by(20).find(|ms| loud(0, *ms)).expect("the caller speaks on the left");
    let agent_stops = (caller_starts..caller_starts + 3000)
        .step_by(20)
        .find(|ms| (0..10).all(|k| !loud(1, ms + k * 20)))
        .expect("the agent stops on the right");
    println!(
        "web call barge-in (Chromium): the agent stopped {} ms after the caller began",
        agent_stops - caller_starts
    );
    assert!(
        crate::voice::loudness(&wav, 1, caller_starts - 1000, caller_starts) > 300.0,
        "the agent was greeting when the caller began"
    );
    assert!(
        agent_stops - caller_starts <= 300,
        "the agent stopped {} ms after the caller began",
        agent_stops - caller_starts
    );
}
