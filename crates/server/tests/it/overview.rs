//! Issue 32: `GET /api/v1/overview`, the dashboard home's figures: per day
//! in the reader's offset, scoped to the workspace and mode.

use parley_domain::{Mode, Scope, Timestamp};
use serde_json::{Value, json};

use crate::calls::{ended, place, wait_for};
use crate::runtime::eventually;
use crate::support::*;

/// The date `days_ago` days before now, `offset_minutes` east of UTC.
fn date(offset_minutes: i64, days_ago: i64) -> String {
    let offset = time::UtcOffset::from_whole_seconds((offset_minutes * 60) as i32).unwrap();
    (time::OffsetDateTime::now_utc().to_offset(offset).date() - time::Duration::days(days_ago)).to_string()
}

fn zero_day(d: &Value) -> bool {
    ["calls", "call_seconds", "messages_in", "messages_out", "agent_runs", "agent_runs_failed", "spend_cents"]
        .iter()
        .all(|k| d[k] == 0)
}

both_backends! {
    async fn the_overview_counts_each_day_in_the_readers_offset_and_scope(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "first_message": "Hi."})).await["id"].as_i64().unwrap();
        let r = place(&app, &ws.live, json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let call = wait_for(&app, &ws.live, r.body["id"].as_str().unwrap(), |c| ended(c) && c["recording"]["status"] == "available").await;
        let hook = app.post(&ws.live, "/api/v1/webhooks", json!({"url": "https://hooks.example.com/p", "events": ["*"]})).await;
        let hook_id = hook.body["id"].as_i64().unwrap();
        app.patch(&ws.live, &format!("/api/v1/webhooks/{hook_id}"), json!({"enabled": false})).await;

        // What the other endpoints say, to compare with.
        let conv = call["conversation_id"].as_i64().unwrap();
        let messages = app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages?limit=200")).await.body;
        let by = |dir: &str| messages["items"].as_array().unwrap().iter().filter(|m| m["direction"] == dir).count() as i64;
        let runs = app.get(&ws.live, "/api/v1/agent-runs?limit=200").await.body["total"].as_i64().unwrap();
        let balance = app.get(&ws.live, "/api/v1/billing/balance").await.body["balance_cents"].clone();
        let ledger = app.get(&ws.live, "/api/v1/billing/transactions?limit=200").await.body;
        let spend: i64 = ledger["items"].as_array().unwrap().iter()
            .filter(|e| e["type"] == "charge" || e["type"] == "refund")
            .map(|e| -e["amount_cents"].as_i64().unwrap())
            .sum();
        assert!(spend >= call["cost_cents"].as_i64().unwrap(), "{ledger}");

        let o = app.get(&ws.live, "/api/v1/overview?utc_offset_minutes=-300").await;
        assert_eq!(o.status, 200, "{}", o.text);
        let days = o.body["days"].as_array().unwrap();
        assert_eq!(days.len(), 7);
        let dates: Vec<String> = days.iter().map(|d| d["date"].as_str().unwrap().to_owned()).collect();
        let expected: Vec<String> = (0..7).rev().map(|ago| date(-300, ago)).collect();
        assert_eq!(dates, expected, "oldest first, ending today in UTC-5");
        let today = &days[6];
        assert_eq!(today["calls"], 1);
        assert_eq!(today["call_seconds"], call["duration_ms"].as_i64().unwrap() / 1000);
        assert_eq!(today["spend_cents"], spend);
        assert_eq!((today["messages_in"].as_i64().unwrap(), today["messages_out"].as_i64().unwrap()), (by("inbound"), by("outbound")));
        assert!(by("inbound") + by("outbound") > 0, "{messages}");
        assert_eq!(today["agent_runs"], runs);
        assert!(days[..6].iter().all(zero_day), "{days:?}");
        assert_eq!(o.body["balance_cents"], balance);
        assert_eq!(o.body["open_handoffs"], 0);
        let failing = o.body["failing_webhook_endpoints"].as_array().unwrap();
        assert_eq!((failing.len(), failing[0]["id"].clone(), failing[0]["status"].clone()), (1, json!(hook_id), json!("disabled")));
        assert_eq!(failing[0]["disabled_reason"], "Disabled by a user");

        // Usage by agent and day: the call's cost, on its agent, today.
        let usage = app.get(&ws.live, "/api/v1/billing/usage?utc_offset_minutes=-300").await;
        assert_eq!(usage.status, 200, "{}", usage.text);
        let udays = usage.body["days"].as_array().unwrap();
        assert_eq!((udays.len(), udays[29]["date"].clone()), (30, json!(date(-300, 0))));
        let cost = call["cost_cents"].as_i64().unwrap();
        assert!(cost > 0, "{call}");
        assert_eq!(udays[29]["total_cents"], cost);
        assert_eq!(udays[29]["agents"], json!([{"agent_id": agent, "cents": cost}]));
        assert!(udays[..29].iter().all(|d| d["total_cents"] == 0 && d["agents"] == json!([])));
        assert_eq!(app.get(&ws.test, "/api/v1/billing/usage").await.body["days"][29]["total_cents"], 0);
        assert_eq!(app.get(&ws.live, "/api/v1/billing/usage?days=91").await.status, 422);

        // The days follow the offset asked for: today at UTC+14 is another date than at UTC-12.
        let east = app.get(&ws.live, "/api/v1/overview?utc_offset_minutes=840&days=1").await.body;
        let west = app.get(&ws.live, "/api/v1/overview?utc_offset_minutes=-720&days=1").await.body;
        assert_eq!((east["days"][0]["date"].clone(), west["days"][0]["date"].clone()), (json!(date(840, 0)), json!(date(-720, 0))));
        assert_eq!((east["days"][0]["calls"].clone(), west["days"][0]["calls"].clone()), (json!(1), json!(1)));

        // Moved two days back, the call counts on that day; eight days back, not at all.
        let scope = Scope::new(ws.id, Mode::Live);
        for (ago, index) in [(2, Some(4)), (8, None)] {
            let mut tx = app.db.begin().await.unwrap();
            let then = Timestamp::now().plus_seconds(-ago * 86_400);
            parley_store::execute!(&mut tx, sqlx::query("UPDATE calls SET created_at = $1 WHERE workspace_id = $2 AND livemode = $3")
                .bind(then).bind(scope.workspace_id).bind(true)).unwrap();
            tx.commit().await.unwrap();
            let o = app.get(&ws.live, "/api/v1/overview").await.body;
            let calls: Vec<i64> = o["days"].as_array().unwrap().iter().map(|d| d["calls"].as_i64().unwrap()).collect();
            let mut want = vec![0; 7];
            if let Some(i) = index {
                want[i] = 1;
            }
            assert_eq!(calls, want, "{ago} days ago");
        }

        // The test mode and another workspace see none of it.
        for key in [&ws.test, &other.live] {
            let o = app.get(key, "/api/v1/overview").await.body;
            assert!(o["days"].as_array().unwrap().iter().all(zero_day), "{o}");
            assert_eq!(o["failing_webhook_endpoints"], json!([]));
            assert_eq!((o["voice_to_voice"].clone(), o["voice_to_voice_today"].clone()), (Value::Null, Value::Null));
        }

        // Out-of-range parameters are a 422 naming them.
        for (q, field) in [("days=0", "days"), ("days=32", "days"), ("utc_offset_minutes=900", "utc_offset_minutes"), ("days=x", "days")] {
            let r = app.get(&ws.live, &format!("/api/v1/overview?{q}")).await;
            assert_eq!(r.status, 422, "{q}: {}", r.text);
            assert_eq!(r.faults()[0].0, json!(["query", field]).to_string(), "{q}");
        }
    }
}

both_backends! {
    // One click in the dashboard: an agent answering from its knowledge, a
    // webchat, conversations it answers and a test call, in test mode only.
    async fn the_demo_seeds_a_living_test_mode_once(backend) {
        let app = TestApp::spawn_with(backend, |s| s.agents.debounce_ms = 100).await;
        let ws = app.workspace("Acme").await;
        let r = app.post(&ws.live, "/api/v1/demo", json!({})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (403, json!("The demo is made in test mode only: switch to test mode")));
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0, "live stays empty");

        let r = app.post(&ws.test, "/api/v1/demo", json!({})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let demo = r.body.clone();
        let agent = app.get(&ws.test, &format!("/api/v1/agents/{}", demo["agent_id"])).await.body;
        assert_eq!((agent["name"].clone(), agent["knowledge_collection_ids"].clone()), (json!("Ava (demo)"), json!([demo["knowledge_collection_id"]])));
        let chat = app.get(&ws.test, &format!("/api/v1/channels/{}", demo["webchat_channel_id"])).await.body;
        assert_eq!(chat["type"], "webchat");
        let listed = app.get(&ws.test, "/api/v1/conversations?channel=webchat").await.body;
        assert_eq!(listed["total"], 3, "{listed}");
        // The agent answers each visitor from its help center.
        let conversations = demo["conversation_ids"].as_array().unwrap().clone();
        assert_eq!(conversations.len(), 3);
        for c in &conversations {
            let answer = eventually("the demo's agent never answered", || async {
                let messages = app.get(&ws.test, &format!("/api/v1/conversations/{c}/messages")).await.body;
                messages["items"].as_array().unwrap().iter().find(|m| m["direction"] == "outbound").cloned()
            }).await;
            assert!(answer["text"].as_str().unwrap().contains("Help center"), "{answer}");
        }
        // The test call ends on the simulated line, recorded.
        let call_id = demo["call_id"].as_str().expect("the demo placed a call").to_owned();
        let call = wait_for(&app, &ws.test, &call_id, |c| ended(c) && c["recording"]["status"] == "available").await;
        assert_eq!((call["status"].clone(), call["provider"].clone()), (json!("completed"), json!("simulated")));

        // Once: a second seed is refused while the demo agent is there.
        let again = app.post(&ws.test, "/api/v1/demo", json!({})).await;
        assert_eq!(again.status, 409, "{}", again.text);
        assert_eq!(app.get(&ws.test, "/api/v1/agents").await.body["total"], 1);
    }
}

both_backends! {
    // Messages per day come from quarter-hour counts kept by a trigger when
    // the reader's midnight is on a quarter hour (UTC+05:45 here), and are
    // counted from the messages otherwise (UTC+05:46): both put each
    // message on its day in that offset, and both see one scope only.
    // On PostgreSQL the counts are deltas until housekeeping folds them:
    // the same before and after the fold.
    async fn messages_per_day_are_the_same_from_the_quarter_hour_counts_and_from_the_messages(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let (channel, secret) = crate::conversations::api_channel(&app, &ws.live).await;
        let r = crate::conversations::inbound(&app, channel, &secret, json!({"from": "user-1", "text": "Hi", "external_id": "m-1"})).await;
        assert_eq!(r.status, 201, "{}", r.text);

        // Around the midnight two days ago at UTC+05:45 (a minute after
        // UTC+05:46's), in both directions, plus one in test mode and one
        // older than the window.
        let nepal = time::UtcOffset::from_whole_seconds(345 * 60).unwrap();
        let midnight = time::OffsetDateTime::now_utc().to_offset(nepal).date().midnight().assume_offset(nepal) - time::Duration::days(2);
        let at = |minutes: i64| Timestamp::from_datetime(midnight + time::Duration::minutes(minutes));
        let mut written = vec![(Timestamp::now(), "inbound", true)];
        for (minutes, direction) in [(-1, "inbound"), (-1, "outbound"), (0, "inbound"), (14, "outbound"), (15, "outbound"), (1439, "inbound"), (1440, "outbound")] {
            written.push((at(minutes), direction, true));
        }
        written.push((at(30), "inbound", false));
        written.push((at(-6 * 1440), "inbound", true));
        for (instant, direction, live) in &written[1..] {
            let mut tx = app.db.begin().await.unwrap();
            parley_store::execute!(&mut tx, sqlx::query(
                "INSERT INTO messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, text, status, created_at)
                 SELECT workspace_id, $2, conversation_id, channel_id, $3, author_type, text, status, $4 FROM messages WHERE workspace_id = $1 AND id = (SELECT MIN(id) FROM messages WHERE workspace_id = $1)")
                .bind(ws.id).bind(*live).bind(*direction).bind(*instant)).unwrap();
            tx.commit().await.unwrap();
        }

        for folded in [false, true] {
            // Housekeeping folds too (at start, then each minute): each step
            // below takes the fold's lock first so that none races it.
            if folded && app.database_url.starts_with("postgres") {
                // One instance folds at a time: while another holds the
                // fold's lock, a fold skips and leaves every delta.
                let mut other = app.db.begin().await.unwrap();
                parley_store::execute!(&mut other, sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(parley_store::repo::overview::FOLD_LOCK)).unwrap();
                let unfolded = deltas(&mut other).await;
                let mut tx = app.db.begin().await.unwrap();
                assert_eq!(parley_store::repo::overview::fold_message_counts(&mut tx).await.unwrap(), 0);
                tx.commit().await.unwrap();
                assert_eq!(deltas(&mut other).await, unfolded);
                other.commit().await.unwrap();
            }
            if folded {
                let mut tx = app.db.begin().await.unwrap();
                if app.database_url.starts_with("postgres") {
                    parley_store::execute!(&mut tx, sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(parley_store::repo::overview::FOLD_LOCK)).unwrap();
                    // Each message is counted once: in a delta or in a folded count.
                    let (counted, messages): (i64, i64) = parley_store::fetch_one!(&mut tx, sqlx::query_as(
                        "SELECT (SELECT CAST(COALESCE(SUM(inbound + outbound), 0) AS BIGINT) FROM message_count_deltas)
                              + (SELECT CAST(COALESCE(SUM(inbound + outbound), 0) AS BIGINT) FROM message_counts),
                                (SELECT COUNT(*) FROM messages)")).unwrap();
                    assert_eq!(counted, messages, "each message is counted once, folded or not");
                }
                let unfolded = deltas(&mut tx).await;
                let n = parley_store::repo::overview::fold_message_counts(&mut tx).await.unwrap();
                assert_eq!(n, unfolded, "every delta is folded once");
                tx.commit().await.unwrap();
                let mut tx = app.db.begin().await.unwrap();
                assert_eq!(deltas(&mut tx).await, 0);
                tx.commit().await.unwrap();
            }
            for offset in [345, 346] {
                let o = app.get(&ws.live, &format!("/api/v1/overview?days=5&utc_offset_minutes={offset}")).await;
                assert_eq!(o.status, 200, "{}", o.text);
                let got: Vec<(i64, i64)> = o.body["days"].as_array().unwrap().iter()
                    .map(|d| (d["messages_in"].as_i64().unwrap(), d["messages_out"].as_i64().unwrap())).collect();
                let dates: Vec<String> = (0..5).rev().map(|ago| date(offset, ago)).collect();
                let zone = time::UtcOffset::from_whole_seconds((offset * 60) as i32).unwrap();
                let mut want = vec![(0, 0); 5];
                for (instant, direction, live) in &written {
                    let day = instant.as_datetime().to_offset(zone).date().to_string();
                    if let (true, Some(i)) = (*live, dates.iter().position(|d| *d == day)) {
                        if *direction == "inbound" { want[i].0 += 1 } else { want[i].1 += 1 }
                    }
                }
                assert_eq!(got, want, "UTC+{offset} minutes, days {dates:?}, folded {folded}");
                assert_ne!(want[1], want[2], "the day boundaries split the messages");
            }
        }
        let test = app.get(&ws.test, "/api/v1/overview?days=5&utc_offset_minutes=345").await.body;
        assert_eq!(test["days"][2]["messages_in"], 1, "test mode counts its own message only: {test}");
    }
}

/// Message-count deltas not yet folded (PostgreSQL; SQLite counts in place).
async fn deltas(tx: &mut parley_store::Tx) -> u64 {
    if !matches!(parley_store::AsHandle::handle(tx), parley_store::Handle::Postgres(_)) {
        return 0;
    }
    let n: i64 = parley_store::fetch_one!(tx, sqlx::query_scalar("SELECT COUNT(*) FROM message_count_deltas")).unwrap();
    n as u64
}
