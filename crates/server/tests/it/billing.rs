//! Billing: the ledger, balances, owner credits, the test reset, charges for
//! agents (402 and exactly-once) and the call holds. After every test the
//! harness also checks that each balance equals the sum of its entries.

use parley_domain::user::Role;
use parley_domain::{Mode, Scope};
use parley_services::billing::{self, BillingConfig};
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::parley_with_env;
use crate::support::*;

async fn balance(app: &TestApp, key: &str) -> i64 {
    let r = app.get(key, "/api/v1/billing/balance").await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["balance_cents"].as_i64().unwrap()
}

async fn entries(app: &TestApp, key: &str, query: &str) -> Value {
    let r = app.get(key, &format!("/api/v1/billing/transactions{query}")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body
}

/// Adds credit through the service, as the CLI does.
async fn credit(app: &TestApp, scope: Scope, cents: i64) {
    let mut tx = app.db.begin().await.unwrap();
    billing::credit(&mut tx, scope, &BillingConfig::default(), cents, "test credit").await.unwrap();
    tx.commit().await.unwrap();
}

both_backends! {
    async fn new_workspaces_start_with_test_and_live_balances_as_ledger_entries(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 300).await;
        let b = app.get(&ws.live, "/api/v1/billing/balance").await;
        assert_eq!(
            b.body,
            json!({"currency": "USD", "balance_cents": 300, "held_cents": 0, "available_cents": 300,
                   "low_balance_threshold_cents": 500, "mode": "live"})
        );
        assert_eq!(balance(&app, &ws.test).await, 10_000);
        let live = entries(&app, &ws.live, "").await;
        assert_eq!(live["total"], 1);
        let e = &live["items"][0];
        let mut fields: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort();
        assert_eq!(
            fields,
            ["amount_cents", "balance_after_cents", "created_at", "description", "id", "resource_id", "resource_type", "type"]
        );
        assert_eq!((e["type"].clone(), e["amount_cents"].clone(), e["balance_after_cents"].clone()), (json!("credit"), json!(300), json!(300)));
        let test = entries(&app, &ws.test, "").await;
        assert_eq!((test["total"].clone(), test["items"][0]["amount_cents"].clone()), (json!(1), json!(10_000)));

        // A workspace with no live credit has an empty live ledger and a zero balance.
        let poor = app.workspace_with_credit("Poor", 0).await;
        assert_eq!(balance(&app, &poor.live).await, 0);
        assert_eq!(entries(&app, &poor.live, "").await["total"], 0);
    }

    async fn a_402_writes_nothing(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Poor", 49).await;
        let hook = app.post(&ws.live, "/api/v1/webhooks", json!({"url": "http://127.0.0.1:9/h", "events": ["*"]})).await;
        assert_eq!(hook.status, 201, "{}", hook.text);

        let r = app.post_idem(&ws.live, "/api/v1/agents", "first", json!({"name": "Ana"})).await;
        assert_eq!(r.status, 402, "{}", r.text);
        assert_eq!(r.body["detail"], "Insufficient balance: this needs 50 cents and 49 cents are available");
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0);
        assert_eq!(entries(&app, &ws.live, "").await["total"], 1, "only the starting credit");
        assert_eq!(balance(&app, &ws.live).await, 49);
        assert!(app.events(ws.id, Mode::Live, "agent.created").await.is_empty());
        let mut c = app.db.read().await.unwrap();
        let (agents,): (i64,) = parley_store::fetch_one!(&mut c, sqlx::query_as("SELECT COUNT(*) FROM agents")).unwrap();
        let (queued,): (i64,) =
            parley_store::fetch_one!(&mut c, sqlx::query_as("SELECT COUNT(*) FROM webhook_deliveries")).unwrap();
        drop(c);
        assert_eq!((agents, queued), (0, 0));

        // The refusal was not stored under the key: after a credit the same key creates.
        credit(&app, Scope::new(ws.id, Mode::Live), 1).await;
        let r = app.post_idem(&ws.live, "/api/v1/agents", "first", json!({"name": "Ana"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(balance(&app, &ws.live).await, 0);
        let charge = &entries(&app, &ws.live, "?type=charge").await["items"][0];
        assert_eq!(
            (charge["amount_cents"].clone(), charge["resource_type"].clone(), charge["resource_id"].clone()),
            (json!(-50), json!("agent"), json!(r.body["id"].to_string()))
        );
    }

    async fn fifty_concurrent_creations_against_funds_for_ten_make_exactly_ten(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Ten", 500).await;
        let attempts = (0..50).map(|i| {
            let app = &app;
            let key = ws.live.clone();
            async move {
                app.post_idem(&key, "/api/v1/agents", &format!("agent-{i}"), json!({"name": format!("Agent {i}")}))
                    .await
                    .status
            }
        });
        let statuses = futures::future::join_all(attempts).await;
        let created = statuses.iter().filter(|s| **s == 201).count();
        let refused = statuses.iter().filter(|s| **s == 402).count();
        assert_eq!((created, refused), (10, 40), "{statuses:?}");
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 10);
        assert_eq!(entries(&app, &ws.live, "?type=charge").await["total"], 10);
        assert_eq!(balance(&app, &ws.live).await, 0);
        assert_eq!(app.events(ws.id, Mode::Live, "agent.created").await.len(), 10);
    }

    async fn an_idempotent_replay_never_charges_again(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 1_000).await;
        let first = app.post_idem(&ws.live, "/api/v1/agents", "same", json!({"name": "Ana"})).await;
        assert_eq!(first.status, 201);
        let replay = app.post_idem(&ws.live, "/api/v1/agents", "same", json!({"name": "Ana"})).await;
        assert_eq!(replay.status, 201);
        assert_eq!(replay.headers.get("Idempotent-Replayed").unwrap(), "true");
        assert_eq!(replay.body, first.body);
        // Two identical requests at once: one agent, one charge.
        let (a, b) = tokio::join!(
            app.post_idem(&ws.live, "/api/v1/agents", "race", json!({"name": "Bo"})),
            app.post_idem(&ws.live, "/api/v1/agents", "race", json!({"name": "Bo"})),
        );
        assert!(a.status == 201 || b.status == 201, "{} / {}", a.text, b.text);
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 2);
        assert_eq!(entries(&app, &ws.live, "?type=charge").await["total"], 2);
        assert_eq!(balance(&app, &ws.live).await, 900);
    }

    async fn only_a_signed_in_owner_adds_credit(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 0).await;
        app.user("owner@acme.test", "owner-password-1", ws.id, Role::Owner).await;
        app.user("admin@acme.test", "admin-password-1", ws.id, Role::Admin).await;
        app.user("member@acme.test", "member-password-1", ws.id, Role::Member).await;
        let body = json!({"amount_cents": 1234, "description": "Top-up"});
        for (email, password) in [("admin@acme.test", "admin-password-1"), ("member@acme.test", "member-password-1")] {
            let token = app.token(email, password).await;
            let r = app.bearer(Method::POST, "/api/v1/billing/credits", &token, Some(body.clone())).await;
            assert_eq!(r.status, 403, "{email}: {}", r.text);
            assert_eq!(r.body["detail"], "Only owners can add credit");
        }
        let r = app.post(&ws.live, "/api/v1/billing/credits", body.clone()).await;
        assert_eq!(r.status, 403, "{}", r.text);
        assert_eq!(balance(&app, &ws.live).await, 0);

        let owner = app.token("owner@acme.test", "owner-password-1").await;
        let r = app.bearer(Method::POST, "/api/v1/billing/credits", &owner, Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(
            (r.body["type"].clone(), r.body["amount_cents"].clone(), r.body["balance_after_cents"].clone(), r.body["description"].clone()),
            (json!("credit"), json!(1234), json!(1234), json!("Top-up"))
        );
        assert_eq!(balance(&app, &ws.live).await, 1234);
        // The owner reads the balance with the session too.
        let b = app.bearer(Method::GET, "/api/v1/billing/balance", &owner, None).await;
        assert_eq!(b.body["balance_cents"], 1234);

        // Bad amounts are 422s in the documented shape, all reported at once.
        let r = app.bearer(Method::POST, "/api/v1/billing/credits", &owner, Some(json!({"amount_cents": 0, "colour": "red"}))).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let types: Vec<&str> = r.body["detail"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["value_error.number.not_ge", "value_error.extra"]);
        let r = app.bearer(Method::POST, "/api/v1/billing/credits", &owner, Some(json!({"amount_cents": 12.5}))).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("type_error.integer")));
        assert_eq!(balance(&app, &ws.live).await, 1234);
    }

    async fn people_see_both_modes_balances_and_only_managers_reset_the_test_one(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 1_234).await;
        app.user("admin@acme.test", "admin-password-1", ws.id, Role::Admin).await;
        app.user("member@acme.test", "member-password-1", ws.id, Role::Member).await;
        let member = app.token("member@acme.test", "member-password-1").await;
        let both = app.bearer(Method::GET, "/api/v1/billing/balances", &member, None).await;
        assert_eq!(both.status, 200, "{}", both.text);
        assert_eq!(
            (both.body["live"]["balance_cents"].clone(), both.body["live"]["mode"].clone(), both.body["test"]["mode"].clone()),
            (json!(1234), json!("live"), json!("test"))
        );
        let start = both.body["test"]["balance_cents"].as_i64().unwrap();
        // Keys are bound to one mode: the other mode's balance is not theirs to read.
        for key in [&ws.live, &ws.test] {
            let r = app.get(key, "/api/v1/billing/balances").await;
            assert_eq!(r.status, 403, "{}", r.text);
        }
        // Spend some test money, then try the reset as each role, in test mode.
        app.create_agent(&ws.test, json!({"name": "Spender"})).await;
        let in_test = async |token: &str| {
            let body = json!({"workspace_id": ws.id, "mode": "test"});
            let r = app.bearer(Method::POST, "/api/v1/auth/workspace", token, Some(body)).await;
            assert_eq!(r.status, 200, "{}", r.text);
            r.body["access_token"].as_str().unwrap().to_owned()
        };
        let member_test = in_test(&member).await;
        let r = app.bearer(Method::POST, "/api/v1/billing/reset", &member_test, None).await;
        assert_eq!((r.status, r.body["detail"].clone()), (403, json!("Only owners and admins can reset the test balance")));
        let spent = app.bearer(Method::GET, "/api/v1/billing/balances", &member, None).await.body["test"]["balance_cents"].clone();
        assert_eq!(spent, json!(start - 50), "the refused reset changed the balance");
        let admin = in_test(&app.token("admin@acme.test", "admin-password-1").await).await;
        let r = app.bearer(Method::POST, "/api/v1/billing/reset", &admin, None).await;
        assert_eq!((r.status, r.body["balance_cents"].clone()), (200, json!(start)), "{}", r.text);
    }

    async fn the_ledger_is_listed_newest_first_with_filters(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 1_000).await;
        app.create_agent(&ws.live, json!({"name": "One"})).await;
        let cut = parley_domain::Timestamp::now().to_rfc3339();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        app.create_agent(&ws.live, json!({"name": "Two"})).await;
        let all = entries(&app, &ws.live, "").await;
        let amounts: Vec<i64> = all["items"].as_array().unwrap().iter().map(|e| e["amount_cents"].as_i64().unwrap()).collect();
        let after: Vec<i64> = all["items"].as_array().unwrap().iter().map(|e| e["balance_after_cents"].as_i64().unwrap()).collect();
        assert_eq!(amounts, [-50, -50, 1000]);
        assert_eq!(after, [900, 950, 1000]);
        assert_eq!((all["limit"].clone(), all["offset"].clone()), (json!(50), json!(0)));
        assert_eq!(entries(&app, &ws.live, "?type=charge").await["total"], 2);
        assert_eq!(entries(&app, &ws.live, "?type=credit").await["total"], 1);
        let later = entries(&app, &ws.live, &format!("?created_after={}", cut.replace('+', "%2B"))).await;
        assert_eq!(later["total"], 1);
        let earlier = entries(&app, &ws.live, &format!("?created_before={cut}")).await;
        assert_eq!(earlier["total"], 2);
        let page = entries(&app, &ws.live, "?limit=1&offset=1").await;
        assert_eq!((page["total"].clone(), page["items"][0]["amount_cents"].clone()), (json!(3), json!(-50)));

        let r = app.get(&ws.live, "/api/v1/billing/transactions?type=gift&created_after=yesterday").await;
        assert_eq!(r.status, 422, "{}", r.text);
        let locs: Vec<Value> = r.body["detail"].as_array().unwrap().iter().map(|e| e["loc"].clone()).collect();
        assert_eq!(locs, [json!(["query", "type"]), json!(["query", "created_after"])]);

        // Another workspace, and the other mode, see none of it.
        let other = app.workspace_with_credit("Other", 0).await;
        assert_eq!(entries(&app, &other.live, "").await["total"], 0);
        assert_eq!(entries(&app, &ws.test, "").await["total"], 1);
    }

    async fn a_test_balance_resets_in_test_mode_only(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 1_000).await;
        app.create_agent(&ws.test, json!({"name": "T"})).await;
        app.create_agent(&ws.live, json!({"name": "L"})).await;
        assert_eq!(balance(&app, &ws.test).await, 9_950);
        let r = app.post(&ws.live, "/api/v1/billing/reset", json!({})).await;
        assert_eq!(r.status, 403, "{}", r.text);
        assert_eq!(r.body["detail"], "Balances can only be reset in test mode; use a test key");
        assert_eq!(balance(&app, &ws.live).await, 950);

        let r = app.send(Method::POST, "/api/v1/billing/reset", Some(&ws.test), None, &[]).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!((r.body["balance_cents"].clone(), r.body["mode"].clone()), (json!(10_000), json!("test")));
        let newest = &entries(&app, &ws.test, "").await["items"][0];
        assert_eq!((newest["type"].clone(), newest["amount_cents"].clone()), (json!("adjustment"), json!(50)));
        // Nothing to undo: no entry.
        app.send(Method::POST, "/api/v1/billing/reset", Some(&ws.test), None, &[]).await;
        assert_eq!(entries(&app, &ws.test, "").await["total"], 3);
    }

    async fn balance_low_fires_once_per_downward_crossing(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 600).await;
        for name in ["a", "b", "c", "d"] {
            app.create_agent(&ws.live, json!({"name": name})).await; // 550, 500, 450 (crosses), 400
        }
        let low = app.events(ws.id, Mode::Live, "balance.low").await;
        assert_eq!(low.len(), 1);
        assert_eq!(low[0].data["balance_cents"], 450);
        assert_eq!(low[0].data["low_balance_threshold_cents"], 500);
        credit(&app, Scope::new(ws.id, Mode::Live), 200).await; // 600
        for name in ["e", "f", "g"] {
            app.create_agent(&ws.live, json!({"name": name})).await; // 550, 500, 450 (crosses again)
        }
        assert_eq!(app.events(ws.id, Mode::Live, "balance.low").await.len(), 2);
        assert!(app.events(ws.id, Mode::Test, "balance.low").await.is_empty());
    }

    async fn calls_hold_a_minute_and_are_charged_once_per_started_second(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace_with_credit("Acme", 12).await;
        let scope = Scope::new(ws.id, Mode::Live);
        let config = BillingConfig::default(); // 5 cents a minute
        let mut tx = app.db.begin().await.unwrap();
        billing::ensure_call_funds(&mut tx, scope, &config).await.unwrap();
        billing::hold_for_call(&mut tx, scope, &config, "call_a").await.unwrap();
        billing::hold_for_call(&mut tx, scope, &config, "call_a").await.unwrap(); // again: harmless
        billing::hold_for_call(&mut tx, scope, &config, "call_b").await.unwrap();
        tx.commit().await.unwrap();
        let b = app.get(&ws.live, "/api/v1/billing/balance").await.body;
        assert_eq!((b["balance_cents"].clone(), b["held_cents"].clone(), b["available_cents"].clone()), (json!(12), json!(10), json!(2)));

        // A third concurrent call cannot start: less than a minute is available.
        let mut tx = app.db.begin().await.unwrap();
        let refused = billing::hold_for_call(&mut tx, scope, &config, "call_c").await.unwrap_err();
        assert!(matches!(refused, parley_services::ServiceError::PaymentRequired(_)), "{refused:?}");
        assert!(billing::ensure_call_funds(&mut tx, scope, &config).await.is_err());
        drop(tx);

        // 61 s cost 6 cents (5.08 rounded up), charged once however often the end is reported.
        for _ in 0..3 {
            let mut tx = app.db.begin().await.unwrap();
            billing::charge_call(&mut tx, scope, &config, "call_a", 60_001).await.unwrap();
            tx.commit().await.unwrap();
        }
        // Call b never connected: its hold is released without a charge.
        let mut tx = app.db.begin().await.unwrap();
        billing::release_call_hold(&mut tx, scope, "call_b").await.unwrap();
        tx.commit().await.unwrap();
        let b = app.get(&ws.live, "/api/v1/billing/balance").await.body;
        assert_eq!((b["balance_cents"].clone(), b["held_cents"].clone()), (json!(6), json!(0)));
        let charges = entries(&app, &ws.live, "?type=charge").await;
        assert_eq!(charges["total"], 1);
        assert_eq!(
            (charges["items"][0]["resource_type"].clone(), charges["items"][0]["resource_id"].clone(), charges["items"][0]["amount_cents"].clone()),
            (json!("call"), json!("call_a"), json!(-6))
        );

        // A call that ran long is still charged in full when it ends.
        let mut tx = app.db.begin().await.unwrap();
        billing::hold_for_call(&mut tx, scope, &config, "call_d").await.unwrap();
        billing::charge_call(&mut tx, scope, &config, "call_d", 600_000).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(balance(&app, &ws.live).await, -44);
    }

    async fn the_ledger_is_append_only_in_the_database(backend) {
        let app = TestApp::spawn(backend).await;
        let _ws = app.workspace_with_credit("Acme", 100).await;
        let mut tx = app.db.begin().await.unwrap();
        let updated = parley_store::execute!(&mut tx, sqlx::query("UPDATE ledger_entries SET amount_cents = 1000000"));
        assert!(updated.is_err(), "an UPDATE of a ledger entry must fail");
        drop(tx);
        let mut tx = app.db.begin().await.unwrap();
        let deleted = parley_store::execute!(&mut tx, sqlx::query("DELETE FROM ledger_entries"));
        assert!(deleted.is_err(), "a DELETE of a ledger entry must fail");
    }

    async fn the_cli_credits_and_verifies(backend) {
        let database = fresh_database(backend).await;
        let url = database.url.clone();
        let run = |args: Vec<String>, env: Vec<(&'static str, &'static str)>| {
            let url = url.clone();
            tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                parley_with_env(&args, &url, &env)
            })
        };
        let args = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let (code, ws, err) = run(args("workspace create --name Acme --credit-cents 300 --create"), vec![]).await.unwrap();
        assert_eq!(code, 0, "{err}");
        let live = ws["api_key"]["key"].as_str().unwrap().to_owned();
        let wid = ws["workspace"]["id"].to_string();
        let (code, out, err) = run(args(&format!("billing credit --workspace {wid} --cents 700")), vec![]).await.unwrap();
        assert_eq!(code, 0, "{err}");
        assert_eq!((out["transaction"]["amount_cents"].clone(), out["transaction"]["balance_after_cents"].clone(), out["mode"].clone()), (json!(700), json!(1000), json!("live")));
        let (code, out, _) = run(args(&format!("billing credit --workspace {wid} --cents 5 --mode test")), vec![]).await.unwrap();
        assert_eq!((code, out["transaction"]["balance_after_cents"].clone()), (0, json!(10_005)));
        // The configured default live credit applies without the flag.
        let (code, other, err) =
            run(args("workspace create --name Other"), vec![("PARLEY_BILLING__INITIAL_LIVE_CREDIT_CENTS", "250")]).await.unwrap();
        assert_eq!(code, 0, "{err}");
        let other_live = other["api_key"]["key"].as_str().unwrap().to_owned();
        // Refusals: a bad amount, an unknown workspace.
        let (code, _, err) = run(args(&format!("billing credit --workspace {wid} --cents 0")), vec![]).await.unwrap();
        assert_eq!(code, 1, "{err}");
        let (code, _, err) = run(args("billing credit --workspace 999 --cents 5"), vec![]).await.unwrap();
        assert_eq!((code, err.contains("workspace 999 not found")), (1, true), "{err}");
        let (code, out, err) = run(args("billing verify"), vec![]).await.unwrap();
        assert_eq!((code, out["consistent"].clone()), (0, json!(true)), "{err}");

        let app = TestApp::spawn_on(database, |_| {}).await;
        assert_eq!(balance(&app, &live).await, 1000);
        assert_eq!(balance(&app, &other_live).await, 250);
    }
}
