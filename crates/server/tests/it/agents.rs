//! docs/api.md "Agents": fields, slugs, status machine, templates, engines,
//! triggers, filters and events.

use parley_domain::Mode;
use serde_json::{Value, json};

use crate::support::*;

both_backends! {
    async fn create_returns_201_with_every_field_and_defaults(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k1", json!({"name": "Support Bot"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let a = &r.body;
        assert!(a["id"].is_i64());
        assert_eq!(a["name"], "Support Bot");
        assert_eq!(a["slug"], "support-bot");
        assert_eq!(a["description"], Value::Null);
        assert_eq!(a["text_engine"], "builtin");
        assert_eq!(a["status"], "active");
        assert_eq!(a["priority"], 0);
        assert_eq!(a["trigger_count"], 0);
        assert_eq!(a["knowledge_collection_count"], 0);
        assert_eq!(a["is_template"], false);
        assert_eq!(a["language"], "en-US");
        assert_eq!(a["prompt_block_ids"], json!([]));
        assert_eq!(a["handoff"], json!({"keywords": [], "max_turns": null, "target_user_id": null}));
        assert_eq!(a["metadata"], json!({}));
        assert_eq!((a["model"].clone(), a["debounce_ms"].clone()), (Value::Null, Value::Null));
        assert_eq!(a["tools"], json!([{"type": "builtin", "name": "handoff_to_human"}]));
        assert_eq!((a["voice"].clone(), a["transcriber"].clone()), (Value::Null, Value::Null));
        assert_eq!((a["interruption_threshold_ms"].as_i64(), a["end_of_turn_ms"].as_i64()), (Some(300), Some(600)));
        assert_eq!((a["silence_reprompt_s"].clone(), a["silence_hangup_s"].clone()), (Value::Null, Value::Null));
        assert!(a["created_at"].as_str().unwrap().ends_with('Z'));
        // The tool secret is shown once, at creation.
        let mut a = a.clone();
        let secret = a.as_object_mut().unwrap().remove("tool_secret").unwrap();
        assert!(secret.as_str().unwrap().starts_with("whsec_"), "{secret}");
        let got = app.get(&ws.live, &format!("/api/v1/agents/{}", a["id"])).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body, a);
    }

    async fn slugs_are_derived_from_the_name_and_unique(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let slugs: Vec<Value> = futures::future::join_all((0..3).map(|_| app.create_agent(&ws.live, json!({"name": "Sales Agent!"}))))
            .await.into_iter().map(|a| a["slug"].clone()).collect();
        let mut sorted: Vec<String> = slugs.iter().map(|s| s.as_str().unwrap().to_owned()).collect();
        sorted.sort();
        assert_eq!(sorted, vec!["sales-agent", "sales-agent-2", "sales-agent-3"]);
        let renamed = app.patch(&ws.live, &format!("/api/v1/agents/{}", 1), json!({"name": "Réception Zürich"})).await;
        assert_eq!(renamed.status, 200);
        assert_eq!(renamed.body["slug"], "reception-zurich");
    }

    async fn list_uses_the_agents_envelope_newest_first_with_filters(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let a1 = app.create_agent(&ws.live, json!({"name": "Alpha", "description": "billing helper"})).await;
        let a2 = app.create_agent(&ws.live, json!({"name": "Beta", "is_template": true})).await;
        let a3 = app.create_agent(&ws.live, json!({"name": "Gamma", "status": "paused"})).await;
        let r = app.get(&ws.live, "/api/v1/agents").await;
        assert_eq!(r.status, 200);
        let keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 3);
        assert_eq!((r.body["total"].clone(), r.body["count"].clone()), (json!(3), json!(3)));
        let ids: Vec<Value> = r.body["agents"].as_array().unwrap().iter().map(|a| a["id"].clone()).collect();
        assert_eq!(ids, vec![a3["id"].clone(), a2["id"].clone(), a1["id"].clone()]);

        let page = app.get(&ws.live, "/api/v1/agents?limit=2&offset=2").await;
        assert_eq!((page.body["total"].clone(), page.body["count"].clone()), (json!(3), json!(1)));
        assert_eq!(page.body["agents"][0]["id"], a1["id"]);

        assert_eq!(app.get(&ws.live, "/api/v1/agents?status=paused").await.body["agents"][0]["id"], a3["id"]);
        assert_eq!(app.get(&ws.live, "/api/v1/agents?is_template=true").await.body["total"], 1);
        assert_eq!(app.get(&ws.live, "/api/v1/agents?is_template=false").await.body["total"], 2);
        let q = app.get(&ws.live, "/api/v1/agents?q=BILLING").await;
        assert_eq!((q.body["total"].clone(), q.body["agents"][0]["id"].clone()), (json!(1), a1["id"].clone()));
        assert_eq!(app.get(&ws.live, "/api/v1/agents?q=100%25").await.body["total"], 0);
        let bad = app.get(&ws.live, "/api/v1/agents?status=deleted").await;
        assert_eq!(bad.status, 422);
        assert_eq!(bad.body["detail"][0]["type"], "value_error.enum");
    }

    async fn status_follows_its_state_machine_and_delete_archives(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let a = app.create_agent(&ws.live, json!({"name": "Agent"})).await;
        let path = format!("/api/v1/agents/{}", a["id"]);
        assert_eq!(app.patch(&ws.live, &path, json!({"status": "paused"})).await.body["status"], "paused");
        assert_eq!(app.patch(&ws.live, &path, json!({"status": "active"})).await.body["status"], "active");
        let del = app.delete(&ws.live, &path).await;
        assert_eq!(del.status, 204);
        assert_eq!(del.text, "");
        assert_eq!(app.get(&ws.live, &path).await.body["status"], "archived");
        // Archived agents leave the default list, but can be listed explicitly.
        assert_eq!(app.get(&ws.live, "/api/v1/agents").await.body["total"], 0);
        assert_eq!(app.get(&ws.live, "/api/v1/agents?status=archived").await.body["total"], 1);
        // archived → active is forbidden; archived → paused restores.
        let r = app.patch(&ws.live, &path, json!({"status": "active"})).await;
        assert_eq!(r.status, 409);
        assert_eq!(r.body, json!({"detail": format!("Agent {} cannot move from archived to active", a["id"])}));
        assert_eq!(app.delete(&ws.live, &path).await.status, 204, "archiving twice is harmless");
        assert_eq!(app.patch(&ws.live, &path, json!({"status": "paused"})).await.body["status"], "paused");
    }

    async fn patch_changes_only_given_fields_and_null_clears(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let a = app.create_agent(&ws.live, json!({"name": "Agent", "description": "d", "voice": {"tts_engine": "espeak", "voice_id": "en-us"}, "priority": 5, "metadata": {"team": "x"}})).await;
        let path = format!("/api/v1/agents/{}", a["id"]);
        let r = app.patch(&ws.live, &path, json!({"description": null, "priority": 7, "handoff": {"keywords": ["human"], "max_turns": 3}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["description"], Value::Null);
        assert_eq!(r.body["priority"], 7);
        assert_eq!(r.body["voice"], json!({"tts_engine": "espeak", "voice_id": "en-us", "speed": null}));
        assert_eq!(r.body["metadata"], json!({"team": "x"}));
        assert_eq!(r.body["handoff"], json!({"keywords": ["human"], "max_turns": 3, "target_user_id": null}));
        let bad = app.patch(&ws.live, &path, json!({"name": null, "slug": "mine"})).await;
        assert_eq!(bad.status, 422);
        assert_eq!(bad.faults(), vec![
            (r#"["body","name"]"#.to_owned(), "type_error.none.not_allowed".to_owned()),
            (r#"["body","slug"]"#.to_owned(), "value_error.extra".to_owned()),
        ]);
        let big = app.patch(&ws.live, &path, json!({"metadata": {"blob": "x".repeat(5000)}})).await;
        assert_eq!(big.status, 422);
        assert_eq!(big.body["detail"][0]["type"], "value_error.object.too_large");
    }

    async fn templates_are_instantiated_with_template_id(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let t = app.create_agent(&ws.live, json!({"name": "Receptionist", "is_template": true, "system_prompt": "Be kind.", "priority": 9, "metadata": {"k": 1}})).await;
        let a = app.create_agent(&ws.live, json!({"template_id": t["id"], "name": "Front desk", "priority": 3})).await;
        assert_eq!(a["is_template"], false);
        assert_eq!(a["system_prompt"], "Be kind.");
        assert_eq!(a["priority"], 3);
        assert_eq!(a["metadata"], json!({"k": 1}));
        assert_eq!(a["slug"], "front-desk");
        // Only templates can be instantiated; another workspace's template is unknown.
        let r = app.post_idem(&ws.live, "/api/v1/agents", "x1", json!({"template_id": a["id"], "name": "n"})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"][0]["loc"], json!(["body", "template_id"]));
        let other = app.workspace("B").await;
        let r = app.post_idem(&other.live, "/api/v1/agents", "x2", json!({"template_id": t["id"], "name": "n"})).await;
        assert_eq!(r.status, 422);
    }

    async fn text_engines_are_validated_against_the_configuration(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.text_engines.insert("openai".into(), json!({"base_url": "http://127.0.0.1:9/v1", "model": "gpt-4o-mini"}));
        }).await;
        let ws = app.workspace("A").await;
        let a = app.create_agent(&ws.live, json!({"name": "A", "text_engine": "openai"})).await;
        assert_eq!(a["text_engine"], "openai");
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k", json!({"name": "B", "text_engine": "claude"})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.body["detail"][0]["msg"], "value is not a valid enumeration member; permitted: 'builtin', 'openai'");
    }

    async fn speech_settings_name_configured_engines_and_stay_in_range(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.speech.stt.insert("whisper".into(), json!({"kind": "wyoming", "host": "127.0.0.1", "port": 10300}));
        }).await;
        let ws = app.workspace("A").await;
        let body = json!({"name": "Caller", "voice": {"tts_engine": "espeak", "voice_id": "en-gb", "speed": 1.25},
            "transcriber": {"stt_engine": "whisper", "language": "en"}, "interruption_threshold_ms": 500, "end_of_turn_ms": 450,
            "silence_reprompt_s": 8, "silence_hangup_s": 30});
        let a = app.create_agent(&ws.live, body).await;
        assert_eq!(a["voice"], json!({"tts_engine": "espeak", "voice_id": "en-gb", "speed": 1.25}));
        assert_eq!(a["transcriber"], json!({"stt_engine": "whisper", "language": "en"}));
        assert_eq!(a["end_of_turn_ms"], 450);
        assert_eq!((a["interruption_threshold_ms"].as_i64(), a["silence_reprompt_s"].as_i64(), a["silence_hangup_s"].as_i64()), (Some(500), Some(8), Some(30)));
        let path = format!("/api/v1/agents/{}", a["id"]);
        // Null returns a field to the server's default; the rest stays.
        let r = app.patch(&ws.live, &path, json!({"transcriber": null, "silence_hangup_s": null})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!((r.body["transcriber"].clone(), r.body["silence_hangup_s"].clone()), (Value::Null, Value::Null));
        assert_eq!(r.body["voice"]["voice_id"], "en-gb");
        assert_eq!(r.body["silence_reprompt_s"], 8);
        let bad = app.patch(&ws.live, &path, json!({"voice": {"tts_engine": "polly", "speed": 9},
            "transcriber": {"language": "english!"}, "interruption_threshold_ms": -1, "end_of_turn_ms": 100, "silence_reprompt_s": 0})).await;
        assert_eq!(bad.status, 422, "{}", bad.text);
        assert_eq!(bad.faults(), vec![
            (r#"["body","voice","tts_engine"]"#.to_owned(), "value_error.enum".to_owned()),
            (r#"["body","voice","speed"]"#.to_owned(), "value_error.number.not_le".to_owned()),
            (r#"["body","transcriber","stt_engine"]"#.to_owned(), "value_error.missing".to_owned()),
            (r#"["body","transcriber","language"]"#.to_owned(), "value_error.language".to_owned()),
            (r#"["body","interruption_threshold_ms"]"#.to_owned(), "value_error.number.not_ge".to_owned()),
            (r#"["body","end_of_turn_ms"]"#.to_owned(), "value_error.number.not_ge".to_owned()),
            (r#"["body","silence_reprompt_s"]"#.to_owned(), "value_error.number.not_ge".to_owned()),
        ]);
        assert_eq!(app.get(&ws.live, &path).await.body["silence_reprompt_s"], 8, "nothing of a refused change is written");
        // Greeting and turn detection: defaults, changes, and the smart rule's
        // cap checked against its short silence on the merged agent.
        assert_eq!((a["first_message_mode"].as_str(), a["first_message_wait_s"].as_i64()), (Some("speak_first"), Some(3)));
        assert_eq!((a["turn_detection"].as_str(), a["end_of_turn_min_ms"].as_i64(), a["end_of_turn_max_ms"].as_i64()), (Some("smart"), Some(200), Some(2000)));
        let r = app.patch(&ws.live, &path, json!({"first_message_mode": "wait_for_callee", "first_message_wait_s": 5,
            "turn_detection": "silence", "end_of_turn_min_ms": 300, "end_of_turn_max_ms": 1500})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!((r.body["first_message_mode"].as_str(), r.body["turn_detection"].as_str(), r.body["end_of_turn_max_ms"].as_i64()), (Some("wait_for_callee"), Some("silence"), Some(1500)));
        let bad = app.patch(&ws.live, &path, json!({"end_of_turn_min_ms": 800, "end_of_turn_max_ms": 500})).await;
        assert_eq!(bad.status, 422, "{}", bad.text);
        assert_eq!(bad.faults(), vec![(r#"["body","end_of_turn_max_ms"]"#.to_owned(), "value_error.turn.max_below_min".to_owned())]);
        let bad = app.patch(&ws.live, &path, json!({"first_message_mode": "later", "first_message_wait_s": 0, "end_of_turn_max_ms": 9000})).await;
        assert_eq!(bad.faults(), vec![
            (r#"["body","first_message_mode"]"#.to_owned(), "value_error.enum".to_owned()),
            (r#"["body","first_message_wait_s"]"#.to_owned(), "value_error.number.not_ge".to_owned()),
            (r#"["body","end_of_turn_max_ms"]"#.to_owned(), "value_error.number.not_le".to_owned()),
        ]);
        // Answering-machine detection: off by default; a message exactly
        // when one is left; null turns it off again.
        assert_eq!(a["voicemail"], Value::Null);
        let r = app.patch(&ws.live, &path, json!({"voicemail": {"action": "leave_message", "message": "Call us back.", "beep_wait_s": 12, "on_screening": "hang_up"}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["voicemail"], json!({"action": "leave_message", "message": "Call us back.", "beep_wait_s": 12, "on_screening": "hang_up"}));
        let bad = app.patch(&ws.live, &path, json!({"voicemail": {"action": "leave_message"}})).await;
        assert_eq!(bad.faults(), vec![(r#"["body","voicemail","message"]"#.to_owned(), "value_error.voicemail.message".to_owned())]);
        let bad = app.patch(&ws.live, &path, json!({"voicemail": {"action": "hang_up", "message": "Hi", "beep_wait_s": 61, "extra": 1}})).await;
        let mut faults = bad.faults();
        faults.sort();
        assert_eq!(faults, vec![
            (r#"["body","voicemail","beep_wait_s"]"#.to_owned(), "value_error.number.not_le".to_owned()),
            (r#"["body","voicemail","extra"]"#.to_owned(), "value_error.extra".to_owned()),
            (r#"["body","voicemail","message"]"#.to_owned(), "value_error.voicemail.message".to_owned()),
        ]);
        assert_eq!(app.get(&ws.live, &path).await.body["voicemail"]["message"], "Call us back.", "nothing of a refused change is written");
        let r = app.patch(&ws.live, &path, json!({"voicemail": null})).await;
        assert_eq!(r.body["voicemail"], Value::Null);
        // Post-call analysis: a summary by default; the schema must compile
        // and describe an object.
        assert_eq!(a["analysis"], json!({"summary": true, "schema": null, "success_criteria": null}));
        let r = app.patch(&ws.live, &path, json!({"analysis": {"summary": false, "success_criteria": "Booked a table."}})).await;
        assert_eq!(r.body["analysis"], json!({"summary": false, "schema": null, "success_criteria": "Booked a table."}), "{}", r.text);
        let bad = app.patch(&ws.live, &path, json!({"analysis": {"schema": {"type": "string"}, "success_criteria": ""}})).await;
        assert_eq!(bad.faults(), vec![
            (r#"["body","analysis","schema"]"#.to_owned(), "value_error.json_schema".to_owned()),
            (r#"["body","analysis","success_criteria"]"#.to_owned(), "value_error.string.too_short".to_owned()),
        ]);
        // The OpenAPI document lists the configured engines as the values.
        let doc = app.send(reqwest::Method::GET, "/openapi.json", None, None, &[]).await.body;
        assert_eq!(doc["components"]["schemas"]["AgentVoice"]["properties"]["tts_engine"]["enum"], json!(["espeak"]));
        assert_eq!(doc["components"]["schemas"]["AgentTranscriber"]["properties"]["stt_engine"]["enum"], json!(["whisper"]));
    }

    async fn inbound_messages_are_routed_by_triggers_in_priority_order(backend) {
        use crate::conversations::{api_channel, inbound};
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let (ch, secret) = api_channel(&app, &ws.live).await;
        let general = app.create_agent(&ws.live, json!({"name": "General", "priority": 1})).await;
        let billing = app.create_agent(&ws.live, json!({"name": "Billing", "priority": 5})).await;
        let paused = app.create_agent(&ws.live, json!({"name": "Paused", "priority": 9})).await;
        let webchat = app.create_agent(&ws.live, json!({"name": "Webchat", "priority": 9})).await;
        let trigger = |agent: &Value, body: Value| {
            let (app, key, id) = (&app, ws.live.clone(), agent["id"].clone());
            async move {
                let r = app.post(&key, &format!("/api/v1/agents/{id}/triggers"), body).await;
                assert_eq!(r.status, 201, "{}", r.text);
            }
        };
        trigger(&general, json!({"event": "message.received", "channel": "*"})).await;
        trigger(&billing, json!({"event": "message.received", "channel": "api", "pattern": "invoice", "pattern_type": "keyword"})).await;
        trigger(&paused, json!({"event": "message.received", "channel": "*"})).await;
        trigger(&webchat, json!({"event": "message.received", "channel": "webchat"})).await;
        app.patch(&ws.live, &format!("/api/v1/agents/{}", paused["id"]), json!({"status": "paused"})).await;

        let conversation_of = |r: crate::support::Resp| r.body["conversation_id"].as_i64().unwrap();
        let c1 = conversation_of(inbound(&app, ch, &secret, json!({"from": "u-1", "text": "Where is my INVOICE?", "external_id": "m-1"})).await);
        let c2 = conversation_of(inbound(&app, ch, &secret, json!({"from": "u-2", "text": "Hello there", "external_id": "m-2"})).await);
        let agent_of = |id: i64| {
            let app = &app;
            let key = ws.live.clone();
            async move { app.get(&key, &format!("/api/v1/conversations/{id}")).await.body["agent_id"].clone() }
        };
        assert_eq!(agent_of(c1).await, billing["id"], "the keyword agent has the higher priority");
        assert_eq!(agent_of(c2).await, general["id"], "paused agents and other channels' triggers are skipped");
        // A routed conversation keeps its agent.
        inbound(&app, ch, &secret, json!({"from": "u-2", "text": "and my invoice?", "external_id": "m-3"})).await;
        assert_eq!(agent_of(c2).await, general["id"]);
        let updated = app.events(ws.id, Mode::Live, "conversation.updated").await;
        assert_eq!(updated.len(), 2, "one conversation.updated per routing");
        // Test mode has its own agents: none there, so nothing is routed.
        let (tch, tsecret) = api_channel(&app, &ws.test).await;
        let t = conversation_of(inbound(&app, tch, &tsecret, json!({"from": "u-1", "text": "invoice", "external_id": "m-1"})).await);
        assert_eq!(app.get(&ws.test, &format!("/api/v1/conversations/{t}")).await.body["agent_id"], Value::Null);
    }

    async fn the_text_engine_list_names_kinds_and_models_but_never_secrets(backend) {
        let app = TestApp::spawn_with(backend, |s| {
            s.text_engines.insert("groq".into(), json!({"base_url": "http://127.0.0.1:9/openai/v1", "api_key": "gsk_do_not_show", "model": "llama-3.1-8b"}));
            s.text_engines.insert("offline".into(), json!({"kind": "builtin"}));
        }).await;
        let ws = app.workspace("A").await;
        let r = app.get(&ws.live, "/api/v1/text-engines").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, json!({"items": [
            {"name": "builtin", "kind": "builtin", "model": "builtin"},
            {"name": "groq", "kind": "openai", "model": "llama-3.1-8b"},
            {"name": "offline", "kind": "builtin", "model": "builtin"},
        ], "total": 3, "limit": 50, "offset": 0}));
        let page = app.get(&ws.test, "/api/v1/text-engines?limit=1&offset=1").await;
        assert_eq!((page.body["items"][0]["name"].clone(), page.body["total"].clone()), (json!("groq"), json!(3)));
        let raw = app.client.get(app.url("/api/v1/text-engines")).send().await.unwrap();
        assert_eq!(raw.status(), 401);
        let everything = app.get(&ws.live, "/api/v1/text-engines").await.body.to_string();
        assert!(!everything.contains("gsk_") && !everything.contains("127.0.0.1"), "{everything}");
    }

    async fn references_to_missing_prompt_blocks_or_collections_are_422(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let r = app.post_idem(&ws.live, "/api/v1/agents", "k", json!({"name": "A", "prompt_block_ids": [404], "knowledge_collection_ids": [1]})).await;
        assert_eq!(r.status, 422);
        assert_eq!(r.faults(), vec![
            (r#"["body","prompt_block_ids",0]"#.to_owned(), "value_error.not_found".to_owned()),
            (r#"["body","knowledge_collection_ids",0]"#.to_owned(), "value_error.not_found".to_owned()),
        ]);
        let dup = app.post_idem(&ws.live, "/api/v1/agents", "k2", json!({"name": "A", "prompt_block_ids": [1, 1]})).await;
        assert_eq!(dup.body["detail"][0]["type"], "value_error.list.unique_items");
    }

    async fn triggers_are_a_sub_resource_counted_by_trigger_count(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let a = app.create_agent(&ws.live, json!({"name": "A"})).await;
        let base = format!("/api/v1/agents/{}/triggers", a["id"]);
        let t1 = app.post(&ws.live, &base, json!({"event": "message.received", "channel": "sms", "pattern": "refund"})).await;
        assert_eq!(t1.status, 201, "{}", t1.text);
        assert_eq!(t1.body["pattern_type"], "keyword");
        assert_eq!(t1.body["enabled"], true);
        assert_eq!(t1.body["kind"], Value::Null);
        let t2 = app.post(&ws.live, &base, json!({"event": "call.inbound"})).await;
        assert_eq!(t2.body["channel"], "*");
        assert_eq!(app.get(&ws.live, &format!("/api/v1/agents/{}", a["id"])).await.body["trigger_count"], 2);

        let list = app.get(&ws.live, &base).await;
        assert_eq!((list.body["total"].clone(), list.body["limit"].clone(), list.body["offset"].clone()), (json!(2), json!(50), json!(0)));
        assert_eq!(list.body["items"][0]["id"], t1.body["id"]);

        let one = format!("{base}/{}", t1.body["id"]);
        let p = app.patch(&ws.live, &one, json!({"enabled": false, "pattern": "^refund\\s+\\d+$", "pattern_type": "regex"})).await;
        assert_eq!(p.status, 200, "{}", p.text);
        assert_eq!(p.body["enabled"], false);
        let bad = app.patch(&ws.live, &one, json!({"pattern": "(unclosed"})).await;
        assert_eq!(bad.status, 422);
        assert_eq!(bad.body["detail"][0]["type"], "value_error.regex");
        let bad = app.post(&ws.live, &base, json!({"event": "sms.sent", "channel": "fax"})).await;
        assert_eq!(bad.faults(), vec![
            (r#"["body","event"]"#.to_owned(), "value_error.enum".to_owned()),
            (r#"["body","channel"]"#.to_owned(), "value_error.enum".to_owned()),
        ]);

        assert_eq!(app.delete(&ws.live, &one).await.status, 204);
        assert_eq!(app.get(&ws.live, &one).await.body, json!({"detail": format!("Trigger {} not found", t1.body["id"])}));
        assert_eq!(app.get(&ws.live, &format!("/api/v1/agents/{}", a["id"])).await.body["trigger_count"], 1);
        assert_eq!(app.get(&ws.live, "/api/v1/agents/999999/triggers").await.body, json!({"detail": "Agent 999999 not found"}));
    }

    async fn every_change_writes_an_event_with_the_resource(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("A").await;
        let a = app.create_agent(&ws.test, json!({"name": "A"})).await;
        app.patch(&ws.test, &format!("/api/v1/agents/{}", a["id"]), json!({"priority": 2})).await;
        let created = app.events(ws.id, Mode::Test, "agent.created").await;
        assert_eq!(created.len(), 1);
        assert!(created[0].id.starts_with("evt_") && created[0].id.len() == 30);
        assert!(!created[0].livemode);
        // The event carries the agent; its tool secret is shown only to the creator.
        let mut shown = a.clone();
        assert!(shown.as_object_mut().unwrap().remove("tool_secret").is_some());
        assert_eq!(created[0].data, shown);
        let updated = app.events(ws.id, Mode::Test, "agent.updated").await;
        assert_eq!(updated.len(), 1);
        assert_eq!(updated[0].data["priority"], 2);
        // Nothing leaked into the live dataset.
        assert!(app.events(ws.id, Mode::Live, "agent.created").await.is_empty());
        // A no-op update writes no event.
        app.patch(&ws.test, &format!("/api/v1/agents/{}", a["id"]), json!({"priority": 2})).await;
        assert_eq!(app.events(ws.id, Mode::Test, "agent.updated").await.len(), 1);
    }
}

#[test]
fn a_text_engine_with_bad_settings_stops_the_server_from_starting() {
    let dir = std::env::temp_dir().join(format!("parley-engines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("parley.toml");
    std::fs::write(&file, "[text_engines.groq]\nbase_url = \"https://api.groq.com/openai/v1\"\n").unwrap();
    let err = parley_server::config::Settings::load(Some(&file)).unwrap_err();
    assert_eq!(err.to_string(), "text_engines.groq: `model` is required");
    std::fs::write(&file, "[text_engines.groq]\nbase_url = \"https://api.groq.com/openai/v1\"\nmodel = \"llama\"\n")
        .unwrap();
    let settings = parley_server::config::Settings::load(Some(&file)).unwrap();
    assert_eq!(settings.services_config().text_engines.names(), vec!["builtin", "groq"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
