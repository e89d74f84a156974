//! Channel connections: types, write-only secrets, settings, SSRF.

use serde_json::json;

use crate::support::*;

both_backends! {
    // Issue 32: the dashboard generates each type's form from this, and shows
    // the addresses to paste into the provider's console.
    async fn channel_types_give_each_form_its_settings_and_the_addresses_to_paste(backend) {
        let app = TestApp::spawn_with(backend, |s| s.public_url = Some("https://parley.example.com/".into())).await;
        let ws = app.workspace("Acme").await;
        let r = app.get(&ws.live, "/api/v1/channel-types").await;
        assert_eq!(r.status, 200, "{}", r.text);
        let types: Vec<&str> = r.body["items"].as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["api", "webchat", "voice", "sms", "whatsapp", "telegram", "email"]);
        let sms = r.body["items"].as_array().unwrap().iter().find(|t| t["type"] == "sms").unwrap();
        assert_eq!((sms["secret_settings"].clone(), sms["signs_traffic"].clone()), (json!(["auth_token"]), json!(false)));
        assert_eq!(sms["needed_settings"], json!(["account_sid", "auth_token"]));
        let telegram = r.body["items"].as_array().unwrap().iter().find(|t| t["type"] == "telegram").unwrap();
        assert_eq!(telegram["needed_settings"], json!(["bot_token"]), "{telegram}");
        let settings = sms["settings"]["properties"].as_object().unwrap();
        for name in ["account_sid", "auth_token", "from", "messaging_service_sid", "base_url"] {
            assert!(settings.contains_key(name), "{name}: {sms}");
        }
        assert_eq!(sms["settings"]["additionalProperties"], false);
        assert_eq!(sms["webhooks"][0]["url"], "https://parley.example.com/hooks/twilio/{public_id}/inbound");
        let api = r.body["items"].as_array().unwrap().iter().find(|t| t["type"] == "api").unwrap();
        assert_eq!((api["signs_traffic"].clone(), api["webhooks"][0]["url"].clone()),
            (json!(true), json!("https://parley.example.com/api/v1/channels/{id}/inbound")));
        let email = r.body["items"].as_array().unwrap().iter().find(|t| t["type"] == "email").unwrap();
        assert!(email["secret_settings"].as_array().unwrap().contains(&json!("smtp_password")), "{email}");
        assert_eq!(app.get("parley_live_nope", "/api/v1/channel-types").await.status, 401);
    }

    // The webchat's live preview: a page with only the widget, under a CSP
    // of its own; only for an existing, active webchat channel.
    async fn a_webchat_preview_page_holds_only_the_widget(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let chat = app.post(&ws.live, "/api/v1/channels", json!({"type": "webchat", "name": "Site"})).await.body;
        let public_id = chat["public_id"].as_str().unwrap().to_owned();
        let r = app.send(reqwest::Method::GET, &format!("/webchat/{public_id}/preview"), None, None, &[]).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.header("content-type").unwrap().starts_with("text/html"));
        let csp = r.header("content-security-policy").unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe-eval"), "{csp}");
        assert!(r.text.contains(&format!(r#"<script src="/webchat/widget.js" data-channel="{public_id}""#)), "{}", r.text);
        let missing = app.send(reqwest::Method::GET, "/webchat/wc_nothing/preview", None, None, &[]).await;
        assert_eq!(missing.status, 404);
        let api = app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "Backend", "config": {"url": "https://example.com/in"}})).await.body;
        let wrong_kind = app.send(reqwest::Method::GET, &format!("/webchat/{}/preview", api["public_id"].as_str().unwrap()), None, None, &[]).await;
        assert_eq!(wrong_kind.status, 404, "an api channel has no widget");
        app.patch(&ws.live, &format!("/api/v1/channels/{}", chat["id"]), json!({"status": "disabled"})).await;
        let disabled = app.send(reqwest::Method::GET, &format!("/webchat/{public_id}/preview"), None, None, &[]).await;
        assert_eq!(disabled.status, 403);
    }

    async fn an_api_channel_shows_its_signing_secret_once_and_never_its_secret_settings(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({
            "type": "api", "name": "Backend",
            "config": {"url": "http://127.0.0.1:9/outbound", "authorization": "Bearer top-secret-token"},
        })).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let ch = &r.body;
        assert!(ch["secret"].as_str().unwrap().starts_with("whsec_"));
        assert!(ch["address"].as_str().unwrap().starts_with("api_"));
        assert_eq!((ch["type"].clone(), ch["status"].clone()), (json!("api"), json!("active")));
        assert_eq!(ch["config"], json!({"url": "http://127.0.0.1:9/outbound"}));
        assert_eq!(ch["secrets_set"], json!(["authorization"]));
        assert!(!r.text.contains("top-secret-token"));
        let id = ch["id"].as_i64().unwrap();

        let got = app.get(&ws.live, &format!("/api/v1/channels/{id}")).await;
        assert_eq!(got.status, 200);
        assert!(got.body.get("secret").is_none());
        assert!(!got.text.contains("top-secret-token") && !got.text.contains("whsec_"));
        // At rest the secrets are sealed, not stored in the clear.
        let mut c = app.db.read().await.unwrap();
        let (sealed, signing): (String, String) = parley_store::fetch_one!(&mut c, sqlx::query_as("SELECT sealed_secrets, sealed_signing_secret FROM channels")).unwrap();
        drop(c);
        assert!(!sealed.contains("top-secret-token") && !signing.contains("whsec_"));

        // Settings change one by one; null removes a secret.
        let r = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"name": "Core", "status": "disabled", "config": {"authorization": null}})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!((r.body["name"].clone(), r.body["status"].clone(), r.body["secrets_set"].clone()), (json!("Core"), json!("disabled"), json!([])));
        assert_eq!(r.body["config"], json!({"url": "http://127.0.0.1:9/outbound"}));
        let r = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"authorization": "Token abc"}})).await;
        assert_eq!((r.body["secrets_set"].clone(), r.body["config"]["url"].clone()), (json!(["authorization"]), json!("http://127.0.0.1:9/outbound")));
    }

    async fn webchat_channels_and_the_list(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "webchat", "name": "Site", "config": {"allowed_origins": ["https://shop.example"], "greeting": "Hi!"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert!(r.body.get("secret").is_none());
        assert!(r.body["address"].as_str().unwrap().starts_with("wc_"));
        app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "Inbound only"})).await;
        let all = app.get(&ws.live, "/api/v1/channels").await.body;
        assert_eq!(all["total"], 2);
        assert_eq!(all["items"][0]["name"], "Inbound only");
        let webchat = app.get(&ws.live, "/api/v1/channels?type=webchat").await.body;
        assert_eq!((webchat["total"].clone(), webchat["items"][0]["config"]["greeting"].clone()), (json!(1), json!("Hi!")));
        assert_eq!(app.get(&ws.test, "/api/v1/channels").await.body["total"], 0);
        let id = webchat["items"][0]["id"].as_i64().unwrap();
        assert_eq!(app.delete(&ws.live, &format!("/api/v1/channels/{id}")).await.status, 204);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/channels/{id}")).await.body, json!({"detail": format!("Channel {id} not found")}));
    }

    async fn voice_channels_take_a_number_as_their_address_and_send_nothing(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let bad = app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "x", "config": {"number": "+1 415"}})).await;
        assert_eq!((bad.status, bad.body["detail"][0]["type"].clone()), (422, json!("value_error.voice_number")));
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "Main", "config": {"number": "+14155550100"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!((r.body["address"].clone(), r.body["config"].clone()), (json!("+14155550100"), json!({"number": "+14155550100"})));
        let id = r.body["id"].clone();
        // Test mode has its own numbers; the same number is free there.
        assert_eq!(app.post(&ws.test, "/api/v1/channels", json!({"type": "voice", "name": "T", "config": {"number": "+14155550100"}})).await.status, 201);
        let second = app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "Again", "config": {"number": "+14155550100"}})).await;
        assert_eq!((second.status, second.body["detail"].clone()), (409, json!("The number +14155550100 belongs to another voice channel")));
        // Changing the number moves the address; removing it falls back to the public id.
        let moved = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"number": "support"}})).await;
        assert_eq!(moved.body["address"], "support");
        let cleared = app.patch(&ws.live, &format!("/api/v1/channels/{id}"), json!({"config": {"number": null}})).await;
        assert!(cleared.body["address"].as_str().unwrap().starts_with("voice_"), "{}", cleared.text);
        assert_eq!(app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "Again", "config": {"number": "+14155550100"}})).await.status, 201, "the number is free again");
    }

    async fn bad_channels_are_422s(backend) {
        let app = TestApp::spawn_with(backend, |s| s.webhooks.allow_private_targets = false).await;
        let ws = app.workspace("Acme").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "fax", "name": "x"})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("value_error.enum")));
        assert_eq!(r.body["detail"][0]["msg"], "value is not a valid enumeration member; permitted: 'api', 'webchat', 'email', 'sms', 'whatsapp', 'telegram', 'voice'");
        // Email settings: the address, the security mode, the secret's length.
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "email", "name": "x", "config": {
            "address": "not an address", "smtp_security": "ssl3", "inbound_secret": "short"}})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let errors: Vec<(serde_json::Value, serde_json::Value)> = r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
        assert!(errors.contains(&(json!(["body", "config", "address"]), json!("value_error.email"))), "{errors:?}");
        assert!(errors.contains(&(json!(["body", "config", "smtp_security"]), json!("value_error.enum"))), "{errors:?}");
        assert!(errors.iter().any(|(loc, _)| loc == &json!(["body", "config", "inbound_secret"])), "{errors:?}");
        // Telegram settings: the token's form, the updates mode, the API root (SSRF).
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "telegram", "name": "x", "config": {
            "bot_token": "not-a-token", "updates": "carrier-pigeon", "base_url": "http://127.0.0.1:9"}})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let errors: Vec<(serde_json::Value, serde_json::Value)> = r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
        assert!(errors.contains(&(json!(["body", "config", "bot_token"]), json!("value_error.pattern"))), "{errors:?}");
        assert!(errors.contains(&(json!(["body", "config", "updates"]), json!("value_error.enum"))), "{errors:?}");
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "telegram", "name": "x", "config": {
            "bot_token": "123:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", "base_url": "http://127.0.0.1:9"}})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()),
            (422, json!(["body", "config", "base_url"]), json!("value_error.url.private")), "{}", r.text);
        // SMS settings are checked: the account SID's form, the sender's, and the provider URL (SSRF).
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "x", "config": {
            "account_sid": "AC123", "from": "4155550100"}})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        let errors: Vec<(serde_json::Value, serde_json::Value)> = r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
        assert!(errors.contains(&(json!(["body", "config", "account_sid"]), json!("value_error.string.too_short"))), "{errors:?}");
        assert!(errors.contains(&(json!(["body", "config", "from"]), json!("value_error.pattern"))), "{errors:?}");
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "sms", "name": "x", "config": {
            "account_sid": "AC00112233445566778899aabbccddeeff", "from": "+14155550100", "base_url": "http://10.0.0.7/"}})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()), (422, json!(["body", "config", "base_url"]), json!("value_error.url.private")), "{}", r.text);
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "", "config": {"colour": "red", "url": "ftp://x"}})).await;
        assert_eq!(r.status, 422);
        let errors: Vec<(serde_json::Value, serde_json::Value)> = r.body["detail"].as_array().unwrap().iter().map(|e| (e["loc"].clone(), e["type"].clone())).collect();
        assert!(errors.contains(&(json!(["body", "name"]), json!("value_error.string.too_short"))), "{errors:?}");
        assert!(errors.contains(&(json!(["body", "config", "colour"]), json!("value_error.extra"))), "{errors:?}");
        // An outbound URL on a private address is refused (SSRF), and nothing is created.
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "api", "name": "x", "config": {"url": "http://127.0.0.1:8080/"}})).await;
        assert_eq!((r.status, r.body["detail"][0]["loc"].clone(), r.body["detail"][0]["type"].clone()), (422, json!(["body", "config", "url"]), json!("value_error.url.private")));
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "webchat", "name": "x", "config": {"allowed_origins": "everyone"}})).await;
        assert_eq!((r.status, r.body["detail"][0]["type"].clone()), (422, json!("type_error.list")));
        assert_eq!(app.get(&ws.live, "/api/v1/channels").await.body["total"], 0);
    }
}
