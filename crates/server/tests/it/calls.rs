//! Voice calls on the simulated provider: the lifecycle, magic numbers,
//! refusals, transcript, recording, billing and isolation.

use std::time::{Duration, Instant};

use parley_domain::Mode;
use serde_json::{Value, json};

use crate::support::*;

/// POSTs a call with a fresh Idempotency-Key.
pub(crate) async fn place(app: &TestApp, key: &str, body: Value) -> Resp {
    app.post_idem(key, "/api/v1/calls", &uuid(), body).await
}

/// Waits until the call reaches a terminal state (or `status`), up to 40 s.
pub(crate) async fn wait_for(app: &TestApp, key: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let call = app.get(key, &format!("/api/v1/calls/{id}")).await.body;
        if done(&call) {
            return call;
        }
        assert!(Instant::now() < deadline, "call {id} never got there: {call}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn ended(call: &Value) -> bool {
    matches!(call["status"].as_str(), Some("completed" | "busy" | "no_answer" | "failed" | "canceled"))
}

/// (channels, sample rate, bits, frames) of a WAV file.
fn wav_shape(bytes: &[u8]) -> (u16, u32, u16, usize) {
    assert_eq!((&bytes[0..4], &bytes[8..12]), (&b"RIFF"[..], &b"WAVE"[..]));
    let channels = u16::from_le_bytes([bytes[22], bytes[23]]);
    let rate = u32::from_le_bytes([bytes[24], bytes[25], bytes[26], bytes[27]]);
    let bits = u16::from_le_bytes([bytes[34], bytes[35]]);
    let data = bytes.windows(4).position(|w| w == b"data").unwrap();
    let len = u32::from_le_bytes([bytes[data + 4], bytes[data + 5], bytes[data + 6], bytes[data + 7]]) as usize;
    (channels, rate, bits, len / (channels as usize * bits as usize / 8))
}

both_backends! {
    async fn a_stopping_server_lets_calls_end_within_its_grace_then_hangs_up_the_rest_as_shutdown(backend) {
        let mut app = TestApp::spawn_with(backend, |s| {
            s.voice.shutdown_grace_seconds = 1;
            s.voice.ring_timeout_seconds = 60;
        })
        .await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.test, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        let mut ids = Vec::new();
        // Answered and talking; ringing until the ring timeout; ringing, then failed by the network.
        for (to, state) in [("+14155550123", "in_progress"), ("+15005550003", "ringing"), ("+15005550004", "ringing")] {
            let r = place(&app, &ws.test, json!({"agent_id": agent, "to": to})).await;
            assert_eq!(r.status, 201, "{}", r.text);
            let id = r.body["id"].as_str().unwrap().to_owned();
            wait_for(&app, &ws.test, &id, |c| c["status"] == state).await;
            ids.push(id);
        }
        let stopping = Instant::now();
        app.shut_down().await;
        let took = stopping.elapsed();
        assert!(took >= Duration::from_secs(1), "the calls had their grace: stopped after {took:?}");
        assert!(took < Duration::from_secs(8), "then were hung up, not waited for: stopped after {took:?}");

        // Read back by another instance: each ended and was recorded before the first one exited.
        let after = TestApp::serving(&app.database_url).await;
        let mut ended_as = Vec::new();
        for id in &ids {
            let call = after.get(&ws.test, &format!("/api/v1/calls/{id}")).await.body;
            ended_as.push((call["status"].clone(), call["ended_reason"].clone()));
            if call["answered_at"].is_string() {
                assert_eq!(call["recording"]["status"], "available", "{call}");
                assert!(call["duration_ms"].as_i64().unwrap() >= 1000, "{call}");
            }
        }
        assert_eq!(ended_as, [
            (json!("completed"), json!("shutdown")),
            (json!("canceled"), json!("shutdown")),
            (json!("failed"), json!("error")),
        ]);
        let completed = after.events(ws.id, Mode::Test, "call.completed").await;
        assert_eq!(completed.len(), 3, "one call.completed per call");
    }
}

both_backends! {
    async fn an_answered_call_runs_to_its_end_with_transcript_recording_and_one_charge(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "first_message": "Hi, Ava here."})).await["id"].as_i64().unwrap();
        let body = json!({"agent_id": agent, "to": "(415) 555-0100", "metadata": {"order": "A-1"}});
        let r = app.post_idem(&ws.live, "/api/v1/calls", "call-1", body.clone()).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("call_") && id.len() == 31, "{id}");
        assert_eq!((r.body["status"].clone(), r.body["to"].clone(), r.body["direction"].clone(), r.body["provider"].clone()), (json!("queued"), json!("+14155550100"), json!("outbound"), json!("simulated")));
        assert!(r.body["contact_id"].is_i64() && r.body["conversation_id"].is_i64());
        // Replays answer the same call; another body under the key is a 409.
        let again = app.post_idem(&ws.live, "/api/v1/calls", "call-1", body).await;
        assert_eq!((again.status, again.body["id"].clone()), (201, json!(id)));
        assert_eq!(app.post_idem(&ws.live, "/api/v1/calls", "call-1", json!({"agent_id": agent, "to": "+14155550199"})).await.status, 409);

        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!((call["status"].clone(), call["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")));
        for field in ["ringing_at", "answered_at", "ended_at"] {
            assert!(call[field].is_string(), "{field}: {call}");
        }
        let duration = call["duration_ms"].as_i64().unwrap();
        assert!(duration > 2000, "{call}");
        let cost = parley_domain::billing::call_cost_cents(duration, 5);
        assert_eq!(call["cost_cents"], cost);
        assert_eq!(call["recording"], json!({"status": "available", "duration_ms": duration, "format": "wav"}));
        assert_eq!(call["metadata"], json!({"order": "A-1"}));

        // The transcript, and the same words as messages of the call's conversation.
        let t = app.get(&ws.live, &format!("/api/v1/calls/{id}/transcript")).await.body;
        assert_eq!(t["call_id"], json!(id));
        let segments = t["segments"].as_array().unwrap();
        let speakers: Vec<&str> = segments.iter().map(|s| s["speaker"].as_str().unwrap()).collect();
        assert_eq!(speakers, ["agent", "caller", "agent", "caller", "agent"]);
        assert_eq!(segments[0]["text"], "Hi, Ava here.");
        for (i, s) in segments.iter().enumerate() {
            let mut keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort();
            assert_eq!(keys, ["end_ms", "index", "interrupted", "latency", "speaker", "start_ms", "text", "words"]);
            assert_eq!(s["index"], i);
            assert!(s["start_ms"].as_i64().unwrap() < s["end_ms"].as_i64().unwrap());
        }
        let conv = call["conversation_id"].as_i64().unwrap();
        let c = app.get(&ws.live, &format!("/api/v1/conversations/{conv}")).await.body;
        assert_eq!((c["kind"].clone(), c["channel"].clone(), c["status"].clone(), c["channel_ref"].clone()), (json!("call"), json!("voice"), json!("closed"), json!("voice:+14155550100")));
        let messages = app.get(&ws.live, &format!("/api/v1/conversations/{conv}/messages")).await.body;
        let texts: Vec<Value> = messages["items"].as_array().unwrap().iter().map(|m| m["text"].clone()).collect();
        let said: Vec<Value> = segments.iter().map(|s| s["text"].clone()).collect();
        assert_eq!(texts, said);

        // Charged once, and nothing left held.
        let charges = app.get(&ws.live, "/api/v1/billing/transactions?type=charge").await.body;
        let for_call: Vec<&Value> = charges["items"].as_array().unwrap().iter().filter(|e| e["resource_id"] == json!(id)).collect();
        assert_eq!(for_call.len(), usize::from(cost > 0), "{charges}");
        assert_eq!(app.get(&ws.live, "/api/v1/billing/balance").await.body["held_cents"], 0);
        for kind in ["call.queued", "call.ringing", "call.started", "call.completed", "call.transcript.ready", "call.recording.ready"] {
            assert_eq!(app.events(ws.id, Mode::Live, kind).await.len(), 1, "{kind}");
        }
        let completed = &app.events(ws.id, Mode::Live, "call.completed").await[0];
        assert_eq!((completed.data["status"].clone(), completed.data["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")));

        // The recording: a 307 to a signed link, or JSON; a stereo WAV as long as the call.
        let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        let r = no_redirects.get(app.url(&format!("/api/v1/calls/{id}/recording"))).header("X-API-Key", &ws.live).send().await.unwrap();
        assert_eq!(r.status(), 307);
        let location = r.headers()["location"].to_str().unwrap().to_owned();
        let wav = app.client.get(&location).send().await.unwrap();
        assert_eq!(wav.headers()["content-type"], "audio/wav");
        let bytes = wav.bytes().await.unwrap();
        let (channels, rate, bits, frames) = wav_shape(&bytes);
        assert_eq!((channels, rate, bits), (2, 8000, 16));
        assert_eq!(frames as i64 * 1000 / 8000, duration);
        let j = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording?redirect=true")).await;
        assert_eq!(j.status, 200);
        assert_eq!((j.body["content_type"].clone(), j.body["duration_ms"].clone()), (json!("audio/wav"), json!(duration)));
        assert!(j.body["url"].as_str().unwrap().contains("/files/") && j.body["expires_at"].is_string());
        assert_eq!(app.get(&ws.live, &format!("/api/v1/calls/{id}/recording?redirect=maybe")).await.status, 422);

        // Its waveform, computed from the file: the loudest sample per column
        // of each side, equal to what the WAV's own samples give.
        let w = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording/waveform?points=50")).await;
        assert_eq!((w.status, w.body["points"].clone(), w.body["duration_ms"].clone()), (200, json!(50), json!(duration)), "{}", w.text);
        let side = |k: &str| w.body[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect::<Vec<_>>();
        let samples: Vec<i16> = bytes[44..].chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
        for (k, channel) in [("caller", 0), ("agent", 1)] {
            let mut expected = vec![0_u64; 50];
            for (f, frame) in samples.chunks_exact(2).enumerate() {
                let col = f * 50 / frames as usize;
                expected[col] = expected[col].max((u64::from(frame[channel].unsigned_abs()) * 1000).div_ceil(32768));
            }
            assert_eq!(side(k), expected, "{k}");
            assert!(expected.iter().any(|&v| v > 0), "{k} is silent");
        }
        let default = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording/waveform")).await;
        assert_eq!((default.body["caller"].as_array().unwrap().len(), default.body["agent"].as_array().unwrap().len()), (1000, 1000));
        for bad in ["5", "4001", "many"] {
            let r = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording/waveform?points={bad}")).await;
            assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["query", "points"])), "{bad}");
        }

        // Ended calls stay ended.
        let r = app.post(&ws.live, &format!("/api/v1/calls/{id}/hangup"), json!({})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Call {id} has already ended (completed)"))));
        let list = app.get(&ws.live, &format!("/api/v1/calls?status=completed&agent_id={agent}&direction=outbound")).await.body;
        assert_eq!((list["total"].clone(), list["items"][0]["id"].clone()), (json!(1), json!(id)));
        assert_eq!(app.get(&ws.live, "/api/v1/calls?status=busy").await.body["total"], 0);
    }

    async fn magic_numbers_choose_each_outcome(backend) {
        let app = TestApp::spawn_with(backend, |s| s.voice.ring_timeout_seconds = 1).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        let balance = app.get(&ws.live, "/api/v1/billing/balance").await.body["balance_cents"].clone();

        // The provider fails: 502, the call stored as failed, nothing charged; replays say the same.
        let body = json!({"agent_id": agent, "to": "+15005550001"});
        let r = app.post_idem(&ws.live, "/api/v1/calls", "fail-1", body.clone()).await;
        assert_eq!(r.status, 502, "{}", r.text);
        let detail = r.body["detail"].as_str().unwrap().to_owned();
        assert!(detail.starts_with("The telephony provider could not place call call_"), "{detail}");
        let again = app.post_idem(&ws.live, "/api/v1/calls", "fail-1", body).await;
        assert_eq!((again.status, again.body["detail"].clone()), (502, json!(detail)));
        let failed = app.get(&ws.live, "/api/v1/calls?status=failed").await.body;
        assert_eq!(failed["total"], 1);
        assert_eq!((failed["items"][0]["ended_reason"].clone(), failed["items"][0]["cost_cents"].clone()), (json!("dial_failed"), json!(0)));

        let mut ids = Vec::new();
        for to in ["+15005550002", "+15005550003", "+15005550004"] {
            let r = place(&app, &ws.live, json!({"agent_id": agent, "to": to})).await;
            assert_eq!(r.status, 201, "{to}: {}", r.text);
            ids.push(r.body["id"].as_str().unwrap().to_owned());
        }
        let mut outcomes = Vec::new();
        for id in &ids {
            let call = wait_for(&app, &ws.live, id, ended).await;
            assert_eq!((call["duration_ms"].clone(), call["recording"]["status"].clone()), (json!(0), json!("absent")), "{call}");
            for path in [format!("/api/v1/calls/{id}/recording"), format!("/api/v1/calls/{id}/recording/waveform")] {
                let r = app.get(&ws.live, &path).await;
                assert_eq!((r.status, r.body["detail"].clone()), (404, json!(format!("Recording of call {id} not found"))));
            }
            outcomes.push((call["status"].clone(), call["ended_reason"].clone(), call["ringing_at"].is_string()));
        }
        assert_eq!(outcomes, [
            (json!("busy"), json!("busy"), false),
            (json!("no_answer"), json!("no_answer"), true),
            (json!("failed"), json!("error"), true),
        ]);
        // Date filters.
        assert_eq!(app.get(&ws.live, "/api/v1/calls?created_after=2100-01-01T00:00:00Z").await.body["total"], 0);
        assert_eq!(app.get(&ws.live, "/api/v1/calls?created_before=2100-01-01T00:00:00Z").await.body["total"], 4);
        assert_eq!(app.get(&ws.live, "/api/v1/calls?created_before=yesterday").await.status, 422);
        // None of them cost anything or left money held.
        let now = app.get(&ws.live, "/api/v1/billing/balance").await.body;
        assert_eq!((now["balance_cents"].clone(), now["held_cents"].clone()), (balance, json!(0)));
    }

    async fn call_creation_refuses_what_it_must(backend) {
        let app = TestApp::spawn_with(backend, |s| s.voice.max_concurrent_calls = 1).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        // No key: 400.
        let r = app.post(&ws.live, "/api/v1/calls", json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!(r.status, 400);
        // Bad input: 422 naming each field.
        for (body, loc, kind) in [
            (json!({"to": "+14155550100"}), json!(["body", "agent_id"]), "value_error.missing"),
            (json!({"agent_id": agent, "to": "not a number"}), json!(["body", "to"]), "value_error.phone"),
            (json!({"agent_id": agent, "to": "+14155550100", "max_duration_s": 9000}), json!(["body", "max_duration_s"]), "value_error.number.not_le"),
            (json!({"agent_id": 999999, "to": "+14155550100"}), json!(["body", "agent_id"]), "value_error.not_found"),
            (json!({"agent_id": agent, "to": "+14155550100", "contact_id": 999999}), json!(["body", "contact_id"]), "value_error.not_found"),
        ] {
            let r = place(&app, &ws.live, body.clone()).await;
            assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()), (422, loc, json!(kind)), "{body}: {}", r.text);
        }
        // At the concurrency limit: 429; once the call ends, calls go again.
        let first = place(&app, &ws.live, json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!(first.status, 201);
        let first_id = first.body["id"].as_str().unwrap().to_owned();
        let r = place(&app, &ws.live, json!({"agent_id": agent, "to": "+14155550101"})).await;
        assert_eq!(r.status, 429, "{}", r.text);
        wait_for(&app, &ws.live, &first_id, |c| c["status"] == "in_progress").await;
        let hung = app.post(&ws.live, &format!("/api/v1/calls/{first_id}/hangup"), json!({})).await;
        assert_eq!((hung.status, hung.body["status"].clone(), hung.body["ended_reason"].clone()), (200, json!("completed"), json!("agent_hangup")), "{}", hung.text);
        assert_eq!(place(&app, &ws.live, json!({"agent_id": agent, "to": "sip:ana@example.com"})).await.status, 201);

        // Below a minute of balance: 402, nothing stored. (52 cents: the
        // agent costs 50, leaving 2, under a minute at 5 cents.)
        let poor = app.workspace_with_credit("Poor", 52).await;
        let poor_agent = app.create_agent(&poor.live, json!({"name": "Bo"})).await["id"].as_i64().unwrap();
        let r = place(&app, &poor.live, json!({"agent_id": poor_agent, "to": "+14155550100"})).await;
        assert_eq!(r.status, 402, "{}", r.text);
        assert_eq!(app.get(&poor.live, "/api/v1/calls").await.body["total"], 0);
        assert_eq!(app.get(&poor.live, "/api/v1/conversations").await.body["total"], 0);
        assert_eq!(app.get(&poor.live, "/api/v1/billing/balance").await.body["held_cents"], 0);

        // Voice disabled: 403.
        let quiet = {
            let mut tx = app.db.begin().await.unwrap();
            let created = parley_services::tenancy::workspaces::create_workspace(&mut tx, "Quiet", false, &parley_services::billing::BillingConfig::default(), 10_000).await.unwrap();
            tx.commit().await.unwrap();
            created
        };
        let key = quiet.live_key.key.expose().to_owned();
        let agent = app.create_agent(&key, json!({"name": "Q"})).await["id"].as_i64().unwrap();
        let r = place(&app, &key, json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!((r.status, r.body["detail"].clone()), (403, json!(format!("Voice is not enabled for workspace {}", quiet.workspace.id))));
    }
}

both_backends! {
    async fn recording_links_expire_and_lost_storage_is_a_503(backend) {
        let app = TestApp::spawn_with(backend, |s| s.storage.url_ttl_seconds = 1).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.test, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        // A test-mode call: the simulated provider, the test balance.
        let r = place(&app, &ws.test, json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        wait_for(&app, &ws.test, &id, |c| c["status"] == "in_progress").await;
        let hung = app.post(&ws.test, &format!("/api/v1/calls/{id}/hangup"), json!({})).await;
        assert_eq!(hung.body["ended_reason"], "agent_hangup");
        let call = wait_for(&app, &ws.test, &id, |c| c["recording"]["status"] == "available").await;
        assert!(call["duration_ms"].as_i64().unwrap() > 0);

        let link = app.get(&ws.test, &format!("/api/v1/calls/{id}/recording?redirect=true")).await.body;
        let url = link["url"].as_str().unwrap().to_owned();
        let got = app.client.get(&url).header("range", "bytes=0-43").send().await.unwrap();
        assert_eq!(got.status(), 206, "the link serves ranges");
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert_eq!(app.client.get(&url).send().await.unwrap().status(), 403, "the link expired");

        // The storage directory goes away: no dead link, a 503 with detail.
        let moved = app.storage_path.with_extension("moved");
        std::fs::rename(&app.storage_path, &moved).unwrap();
        for path in [format!("/api/v1/calls/{id}/recording"), format!("/api/v1/calls/{id}/recording?redirect=true")] {
            let r = app.get(&ws.test, &path).await;
            assert_eq!(r.status, 503, "{path}: {}", r.text);
            assert!(r.body["detail"].as_str().unwrap().starts_with(&format!("Recording storage cannot produce a URL for call {id}")));
        }
        let r = app.get(&ws.test, &format!("/api/v1/calls/{id}/recording/waveform")).await;
        assert_eq!(r.status, 503, "{}", r.text);
        assert!(r.body["detail"].as_str().unwrap().starts_with(&format!("The recording of call {id} cannot be read")), "{}", r.text);
        std::fs::rename(&moved, &app.storage_path).unwrap();
        assert_eq!(app.get(&ws.test, &format!("/api/v1/calls/{id}/recording?redirect=true")).await.status, 200);

        // Hanging up before the answer cancels the call; nothing is charged.
        let r = place(&app, &ws.test, json!({"agent_id": agent, "to": "+14155550101"})).await;
        let early = r.body["id"].as_str().unwrap().to_owned();
        let hung = app.post(&ws.test, &format!("/api/v1/calls/{early}/hangup"), json!({})).await;
        assert_eq!((hung.body["status"].clone(), hung.body["ended_reason"].clone(), hung.body["cost_cents"].clone()), (json!("canceled"), json!("canceled"), json!(0)), "{}", hung.text);
    }

    async fn calls_of_another_workspace_or_mode_answer_404_naming_the_call(backend) {
        let app = TestApp::spawn(backend).await;
        let owner = app.workspace("Owner").await;
        let stranger = app.workspace("Stranger").await;
        let agent = app.create_agent(&owner.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        let id = place(&app, &owner.live, json!({"agent_id": agent, "to": "+15005550002"})).await.body["id"].as_str().unwrap().to_owned();
        wait_for(&app, &owner.live, &id, ended).await;
        for key in [&stranger.live, &owner.test] {
            for (method, path) in [
                (reqwest::Method::GET, format!("/api/v1/calls/{id}")),
                (reqwest::Method::POST, format!("/api/v1/calls/{id}/hangup")),
                (reqwest::Method::GET, format!("/api/v1/calls/{id}/transcript")),
                (reqwest::Method::GET, format!("/api/v1/calls/{id}/recording")),
                (reqwest::Method::GET, format!("/api/v1/calls/{id}/recording/waveform")),
            ] {
                let r = app.send(method.clone(), &path, Some(key), None, &[]).await;
                assert_eq!((r.status, r.body.clone()), (404, json!({"detail": format!("Call {id} not found")})), "{method} {path}");
            }
            assert_eq!(app.get(key, "/api/v1/calls").await.body["total"], 0);
        }
        let missing = "call_01JD00000000000000000000AA";
        assert_eq!(app.get(&owner.live, &format!("/api/v1/calls/{missing}")).await.body, json!({"detail": format!("Call {missing} not found")}));
        // A stranger's agent cannot be used either.
        let r = place(&app, &stranger.live, json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone()), (422, json!(["body", "agent_id"])));
    }
}

both_backends! {
    async fn calls_join_contact_discovery_and_merges(backend) {
        let app = TestApp::spawn_with(backend, |s| s.contacts.auto_create = false).await;
        let ws = app.workspace("Acme").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ava"})).await["id"].as_i64().unwrap();
        let id = place(&app, &ws.live, json!({"agent_id": agent, "to": "+15005550002"})).await.body["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!(call["contact_id"], Value::Null);
        // The inbox finds a conversation's calls (and only in its own scope).
        let conversation = call["conversation_id"].as_i64().unwrap();
        let of = app.get(&ws.live, &format!("/api/v1/calls?conversation_id={conversation}")).await.body;
        assert_eq!((of["total"].clone(), of["items"][0]["id"].clone()), (json!(1), json!(id)));
        assert_eq!(app.get(&ws.test, &format!("/api/v1/calls?conversation_id={conversation}")).await.body["total"], 0);

        let found = app.post(&ws.live, "/api/v1/contacts/discover", json!({"create": false})).await.body;
        let items = found["items"].as_array().unwrap();
        assert!(items.iter().any(|i| i["channel"] == "voice" && i["address"] == "+15005550002"), "{found}");
        let created = app.post(&ws.live, "/api/v1/contacts/discover", json!({"create": true})).await.body;
        let contact = created["items"].as_array().unwrap().iter().find(|i| i["address"] == "+15005550002").unwrap()["contact_id"].as_i64().unwrap();
        assert_eq!(app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body["contact_id"], contact);

        // A merge moves the call to the primary contact; deleting it detaches the call.
        let primary = app.post(&ws.live, "/api/v1/contacts", json!({"display_name": "Ana"})).await.body["id"].as_i64().unwrap();
        let r = app.post(&ws.live, "/api/v1/contacts/merge", json!({"primary_id": primary, "duplicate_id": contact})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body["contact_id"], primary);
        // The contact's page lists their calls: the primary's, not the deleted duplicate's.
        let theirs = app.get(&ws.live, &format!("/api/v1/calls?contact_id={primary}")).await.body;
        assert_eq!((theirs["total"].clone(), theirs["items"][0]["id"].clone()), (json!(1), json!(id)));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/calls?contact_id={contact}")).await.body["total"], 0);
        assert_eq!(app.get(&ws.test, &format!("/api/v1/calls?contact_id={primary}")).await.body["total"], 0);
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/contacts/{primary}")).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body["contact_id"], Value::Null);
    }
}

both_backends! {
    async fn a_calls_agent_says_what_its_model_says_and_each_turn_is_a_run(backend) {
        use crate::tools::{Say, ScriptedEngine};
        let engine = ScriptedEngine::start(vec![Say::Text("Your order ships tomorrow."), Say::Text("Goodbye, Ana.")]).await;
        let url = engine.url.clone();
        let app = TestApp::spawn_with(backend, move |s| {
            s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test"}));
        }).await;
        let ws = app.workspace("Acme").await;
        // Post-call analysis off: only the turns ask the model here (analysis.rs tests it).
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "text_engine": "openai", "first_message": "Hi, Ava here.",
            "system_prompt": "You help {{customer}} with orders.", "analysis": {"summary": false}})).await["id"].as_i64().unwrap();
        let r = place(&app, &ws.live, json!({"agent_id": agent, "to": "+14155550100", "variables": {"customer": "Ana"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.live, &id, ended).await;
        let t = app.get(&ws.live, &format!("/api/v1/calls/{id}/transcript")).await.body;
        let agent_said: Vec<&str> = t["segments"].as_array().unwrap().iter().filter(|s| s["speaker"] == "agent").map(|s| s["text"].as_str().unwrap()).collect();
        assert_eq!(agent_said, ["Hi, Ava here.", "Your order ships tomorrow.", "Goodbye, Ana."]);

        // The model read the call's variables and the call so far.
        let requests = engine.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["messages"][0], json!({"role": "system", "content": "You help Ana with orders."}));
        assert_eq!(requests[0]["messages"][1], json!({"role": "assistant", "content": "Hi, Ava here."}));
        assert_eq!(requests[0]["messages"][2]["role"], "user");
        let second = requests[1]["messages"].as_array().unwrap();
        assert_eq!(second[3], json!({"role": "assistant", "content": "Your order ships tomorrow."}));
        assert_eq!(requests[0]["tools"][0]["function"]["name"], "handoff_to_human");

        // Each turn is a run of the call.
        let runs = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={}", call["conversation_id"])).await.body;
        assert_eq!(runs["total"], 2, "{runs}");
        for run in runs["items"].as_array().unwrap() {
            assert_eq!((run["trigger"].clone(), run["status"].clone(), run["model"].clone()), (json!("call_turn"), json!("completed"), json!("gpt-test")));
            assert_eq!(run["call_id"], json!(id), "{run}");
        }
        // The call's page finds the same runs by the call's id; another call has none.
        let by_call = app.get(&ws.live, &format!("/api/v1/agent-runs?call_id={id}")).await.body;
        assert_eq!(by_call["items"], runs["items"]);
        let other = place(&app, &ws.live, json!({"agent_id": agent, "to": "+15005550002"})).await;
        assert_eq!(other.status, 201, "{}", other.text);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/agent-runs?call_id={}", other.body["id"].as_str().unwrap())).await.body["total"], 0);
        assert_eq!(app.get(&ws.test, &format!("/api/v1/agent-runs?call_id={id}")).await.body["total"], 0, "the test mode sees none");
    }
}

both_backends! {
    async fn a_calls_agent_on_a_priced_engine_with_no_funds_left_says_the_fallback_and_asks_for_a_person(backend) {
        use crate::tools::{Say, ScriptedEngine};
        let engine = ScriptedEngine::start(vec![Say::Text("Never said.")]).await;
        let url = engine.url.clone();
        let app = TestApp::spawn_with(backend, move |s| {
            s.text_engines.insert("paid".into(), json!({"base_url": url, "model": "gpt-test",
                "pricing": {"input_per_1k_cents": 100, "output_per_1k_cents": 1000}}));
        }).await;
        // Enough for the agent (50) and the call's first-minute hold (5): nothing left for the model.
        let ws = app.workspace_with_credit("Poor", 55).await;
        // Post-call analysis off: the call's end returns the unused hold,
        // which an analysis would then spend.
        let agent = app.create_agent(&ws.live, json!({"name": "Ava", "text_engine": "paid", "analysis": {"summary": false}})).await["id"].as_i64().unwrap();
        let r = place(&app, &ws.live, json!({"agent_id": agent, "to": "+14155550100"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.live, &id, ended).await;

        assert!(engine.requests().is_empty(), "the engine was asked without funds");
        let t = app.get(&ws.live, &format!("/api/v1/calls/{id}/transcript")).await.body;
        let agent_said: Vec<&str> = t["segments"].as_array().unwrap().iter().filter(|s| s["speaker"] == "agent").map(|s| s["text"].as_str().unwrap()).collect();
        assert!(agent_said.len() >= 2, "{t}");
        assert!(agent_said[1..].iter().all(|s| s.starts_with("Sorry, I can't answer that right now")), "{agent_said:?}");
        let conversation = call["conversation_id"].as_i64().unwrap();
        let handoff = crate::runtime::handoff_of(&app, ws.live.clone(), conversation).await;
        assert_eq!(handoff["reason"], "The workspace's balance is empty");
        let runs = app.get(&ws.live, &format!("/api/v1/agent-runs?conversation_id={conversation}")).await.body;
        let run = &runs["items"][0];
        assert_eq!((run["trigger"].clone(), run["status"].clone(), run["error"].clone()), (json!("call_turn"), json!("canceled"), json!("The workspace's balance is empty")));
    }
}

both_backends! {
    async fn speech_engines_are_listed_without_their_addresses_or_keys(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.speech.stt.insert("whisper".into(), json!({"kind": "wyoming", "host": "10.1.2.3", "port": 10300, "language": "en"}));
            s.speech.tts.insert("nova".into(), json!({"kind": "openai", "base_url": "https://speech.example/v1",
                                                      "api_key": "sk-never-shown", "model": "tts-1", "voice": "nova"}));
        })
        .await;
        let ws = app.workspace("Acme").await;
        let r = app.get(&ws.live, "/api/v1/speech-engines").await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["total"], 3);
        assert_eq!(r.body["items"], json!([
            {"name": "whisper", "direction": "stt", "kind": "wyoming", "detail": "en"},
            {"name": "espeak", "direction": "tts", "kind": "espeak", "detail": "en-us"},
            {"name": "nova", "direction": "tts", "kind": "openai", "detail": "tts-1/nova"},
        ]));
        assert!(!r.text.contains("sk-never-shown") && !r.text.contains("10.1.2.3") && !r.text.contains("speech.example"));
        let page = app.get(&ws.live, "/api/v1/speech-engines?limit=1&offset=1").await;
        assert_eq!(page.body["items"][0]["name"], "espeak");
    }
}
