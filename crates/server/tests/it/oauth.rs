//! OAuth 2.1 for the MCP endpoint: the official Python SDK's whole flow
//! with the consent page played by Chromium, and the protocol's refusals
//! spoken raw (PKCE, redirect URIs, resource binding, code and refresh
//! token reuse, revocation, grants, Client ID Metadata Documents).

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;

pub(crate) const PASSWORD: &str = "correct horse battery";

/// Runs tests/mcp_client/oauth_client.py (the SDK, and consent.mjs in
/// Chromium as the person who consents).
async fn sdk_flow(app: &TestApp, email: &str, options: &[&str], calls: &[(&str, Value)]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/oauth_client.py");
    let mut args = vec![script.to_owned(), app.url("/mcp"), email.to_owned(), PASSWORD.to_owned()];
    args.extend(options.iter().map(|o| (*o).to_owned()));
    for (tool, arguments) in calls {
        args.push((*tool).to_owned());
        args.push(arguments.to_string());
    }
    let out = tokio::process::Command::new("python3").args(&args).output().await.expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the OAuth client failed:\n{}",
        stderr.lines().rev().take(30).collect::<Vec<_>>().join("\n")
    );
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

/// A client that shows redirects instead of following them.
fn raw_client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn form(app: &TestApp, path: &str, fields: &[(&str, &str)], cookie: Option<&str>) -> Resp {
    let mut rb = raw_client().post(app.url(path)).form(fields);
    if let Some(c) = cookie {
        rb = rb.header("Cookie", c);
    }
    Resp::from(rb.send().await.unwrap()).await
}

async fn page(app: &TestApp, path_and_query: &str, cookie: Option<&str>) -> Resp {
    let mut rb = raw_client().get(app.url(path_and_query));
    if let Some(c) = cookie {
        rb = rb.header("Cookie", c);
    }
    Resp::from(rb.send().await.unwrap()).await
}

fn location(r: &Resp) -> String {
    r.header("location").unwrap_or_else(|| panic!("a redirect: {} {}", r.status, r.text)).to_owned()
}

fn query_of(url: &str) -> std::collections::HashMap<String, String> {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    serde_urlencoded::from_str::<Vec<(String, String)>>(query).unwrap().into_iter().collect()
}

/// A PKCE pair (RFC 7636 appendix B's example).
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:7777/callback";

/// Registers a public client; returns its id.
async fn register(app: &TestApp) -> String {
    let body = json!({"redirect_uris": [REDIRECT], "client_name": "Raw client", "token_endpoint_auth_method": "none"});
    let r = app.send(Method::POST, "/oauth/register", None, Some(body), &[]).await;
    assert_eq!(r.status, 201, "{}", r.text);
    r.body["client_id"].as_str().unwrap().to_owned()
}

/// The authorization request's query for `client_id`, with `extra` pairs
/// replacing the defaults.
fn authorize_query(app: &TestApp, client_id: &str, extra: &[(&str, &str)]) -> String {
    let resource = app.url("/mcp");
    let mut pairs: Vec<(&str, &str)> = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT),
        ("code_challenge", CHALLENGE),
        ("code_challenge_method", "S256"),
        ("state", "xyz"),
        ("scope", "mcp:read mcp:write"),
        ("resource", &resource),
    ];
    for (k, v) in extra {
        pairs.retain(|(name, _)| name != k);
        if !v.is_empty() {
            pairs.push((k, v));
        }
    }
    serde_urlencoded::to_string(&pairs).unwrap()
}

/// Signs in through the authorization page's form; returns the cookie.
async fn sign_in(app: &TestApp, email: &str, query: &str) -> String {
    let r = form(app, "/oauth/login", &[("email", email), ("password", PASSWORD), ("request", query)], None).await;
    assert_eq!(r.status, 303, "{}", r.text);
    assert_eq!(location(&r), format!("/oauth/authorize?{query}"));
    let set = r.header("set-cookie").expect("a sign-in cookie").to_owned();
    assert!(set.contains("HttpOnly") && set.contains("Path=/oauth") && set.contains("SameSite=Lax"), "{set}");
    set.split(';').next().unwrap().to_owned()
}

/// Consents on the page (as a browser would post the form); returns the
/// redirect to the client.
async fn consent(app: &TestApp, cookie: &str, query: &str, choices: &[(&str, &str)]) -> Resp {
    let shown = page(app, &format!("/oauth/authorize?{query}"), Some(cookie)).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    let csrf =
        regex::Regex::new(r#"name="csrf" value="([0-9a-f]+)""#).unwrap().captures(&shown.text).expect("a csrf field")
            [1]
        .to_owned();
    let mut fields: Vec<(String, String)> = query_of(&format!("?{query}")).into_iter().collect();
    fields.push(("csrf".into(), csrf));
    fields.extend(choices.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    form(app, "/oauth/authorize", &borrowed, Some(cookie)).await
}

async fn exchange(app: &TestApp, client_id: &str, code: &str, verifier: &str) -> Resp {
    let resource = app.url("/mcp");
    let fields = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", REDIRECT),
        ("code_verifier", verifier),
        ("client_id", client_id),
        ("resource", &resource),
    ];
    form(app, "/oauth/token", &fields, None).await
}

async fn refresh(app: &TestApp, client_id: &str, token: &str) -> Resp {
    form(
        app,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", client_id)],
        None,
    )
    .await
}

/// `tools/list` at /mcp with `Authorization: Bearer token`.
async fn tools_with(app: &TestApp, token: &str) -> Resp {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    app.send(Method::POST, "/mcp", None, Some(body), &headers).await
}

/// A user of a fresh workspace, its id, and a code + tokens for a client.
struct Flow {
    ws: Ws,
    user_id: i64,
    client_id: String,
    tokens: Value,
}

async fn authorized(app: &TestApp, email: &str) -> Flow {
    let ws = app.workspace("Acme").await;
    let user_id = app.user(email, PASSWORD, ws.id, parley_domain::user::Role::Owner).await;
    let client_id = register(app).await;
    let query = authorize_query(app, &client_id, &[]);
    let cookie = sign_in(app, email, &query).await;
    let wid = ws.id.to_string();
    let r = consent(
        app,
        &cookie,
        &query,
        &[
            ("workspace_id", &wid),
            ("mode", "live"),
            ("workspace_locked", "on"),
            ("allow_write", "on"),
            ("decision", "allow"),
        ],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.text);
    let back = query_of(&location(&r));
    let r = exchange(app, &client_id, &back["code"], VERIFIER).await;
    assert_eq!(r.status, 200, "{}", r.text);
    Flow { ws, user_id, client_id, tokens: r.body }
}

/// An access token of an unlocked, read-write grant that the user `email`
/// (password [`PASSWORD`]) consented to in `workspace_id`.
pub(crate) async fn unlocked_grant(app: &TestApp, email: &str, workspace_id: i64) -> String {
    let client_id = register(app).await;
    let query = authorize_query(app, &client_id, &[]);
    let cookie = sign_in(app, email, &query).await;
    let wid = workspace_id.to_string();
    let choices = [("workspace_id", wid.as_str()), ("mode", "live"), ("allow_write", "on"), ("decision", "allow")];
    let r = consent(app, &cookie, &query, &choices).await;
    assert_eq!(r.status, 303, "{}", r.text);
    let r = exchange(app, &client_id, &query_of(&location(&r))["code"], VERIFIER).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.body["access_token"].as_str().unwrap().to_owned()
}

both_backends! {
    async fn the_python_sdk_signs_in_consents_in_chromium_and_calls_tools(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let ana = app.user("ana@example.com", PASSWORD, ws.id, parley_domain::user::Role::Owner).await;
        let mut tx = app.db.begin().await.unwrap();
        parley_store::repo::users::set_membership(&mut tx, ana, other.id, parley_domain::user::Role::Member).await.unwrap();
        tx.commit().await.unwrap();
        app.create_agent(&ws.live, json!({"name": "Ada"})).await;
        app.create_agent(&other.live, json!({"name": "Bea"})).await;

        // A public client, locked to Acme, allowed to write.
        let wid = ws.id.to_string();
        let seen = sdk_flow(&app, "ana@example.com", &["--auth-method", "none", "--workspace", &wid],
                            &[("list_agents", json!({})), ("create_agent", json!({"name": "Made over OAuth"}))]).await;
        let consent_text = seen["consent_text"].as_str().unwrap();
        assert!(consent_text.contains("Authorize Parley tests (Python SDK)"), "{consent_text}");
        assert!(consent_text.contains("ana@example.com"), "{consent_text}");
        assert!(regex::Regex::new(r"sent to 127\.0\.0\.1:\d+").unwrap().is_match(consent_text), "the redirect host is shown: {consent_text}");
        let authorization = &seen["authorizations"][0];
        assert_eq!(authorization["resource"], app.url("/mcp"), "the SDK found the resource in the metadata: {seen}");
        assert_eq!(authorization["code_challenge_method"], "S256");
        let calls = seen["calls"].as_array().unwrap();
        assert_eq!(calls[0]["structured"]["agents"][0]["name"], "Ada", "{seen}");
        assert_eq!(calls[1]["is_error"], false, "{seen}");
        assert!(seen["tools"]["create_agent"].is_object());
        assert!(seen["tools"]["list_workspaces"].is_null(), "a locked grant offers no switching");
        let access = seen["tokens"]["access_token"].as_str().unwrap();
        assert!(access.starts_with("pmcp_at_"), "{seen}");
        assert_eq!(seen["tokens"]["scope"], "mcp:read mcp:write");
        // The agent was created in Acme's live mode, as the user it acts for.
        let agents = app.get(&ws.live, "/api/v1/agents").await;
        assert!(agents.body["agents"].as_array().unwrap().iter().any(|a| a["name"] == "Made over OAuth"), "{}", agents.text);

        // The token is for /mcp only: the REST API refuses it.
        let r = app.bearer(Method::GET, "/api/v1/agents", access, None).await;
        assert_eq!(r.status, 401, "{}", r.text);
        assert!(r.text.contains("MCP endpoint"), "{}", r.text);

        // The grant is listed for its user, and revoking it ends the token at once.
        let session = app.token("ana@example.com", PASSWORD).await;
        let grants = app.bearer(Method::GET, "/api/v1/oauth/grants", &session, None).await;
        assert_eq!(grants.status, 200, "{}", grants.text);
        let grant = &grants.body["items"][0];
        assert_eq!(grant["client_name"], "Parley tests (Python SDK)");
        assert_eq!(grant["workspace_id"], ws.id);
        assert_eq!(grant["workspace_locked"], true);
        assert_eq!(grant["scope"], "mcp:read mcp:write");
        assert_eq!(tools_with(&app, access).await.status, 200);
        let by_key = app.send(Method::GET, "/api/v1/oauth/grants", Some(&ws.live), None, &[]).await;
        assert_eq!(by_key.status, 403, "grants are a signed-in user's: {}", by_key.text);
        let r = app.bearer(Method::DELETE, &format!("/api/v1/oauth/grants/{}", grant["id"]), &session, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let r = tools_with(&app, access).await;
        assert_eq!(r.status, 401, "{}", r.text);
        assert!(r.header("www-authenticate").unwrap().contains("invalid_token"));
        let again = app.bearer(Method::DELETE, &format!("/api/v1/oauth/grants/{}", grant["id"]), &session, None).await;
        assert_eq!(again.status, 404);

        // A read-only, unlocked grant (a confidential client this time):
        // only read-only tools, and the user's other workspace by id.
        let seen = sdk_flow(&app, "ana@example.com", &["--scope", "mcp:read", "--unlocked", "--era", "2026", "--workspace", &wid],
                            &[("list_agents", json!({"workspace_id": other.id})), ("create_agent", json!({"name": "No"}))]).await;
        assert_eq!(seen["tokens"]["scope"], "mcp:read", "{seen}");
        assert_eq!(seen["client_info"]["token_endpoint_auth_method"], "client_secret_basic", "{seen}");
        let tools = seen["tools"].as_object().unwrap();
        assert!(tools.contains_key("list_workspaces") && tools.contains_key("list_agents"));
        assert!(tools.values().all(|t| t["read_only"] == true), "read-only tools only: {seen}");
        let calls = seen["calls"].as_array().unwrap();
        assert_eq!(calls[0]["structured"]["agents"][0]["name"], "Bea", "{seen}");
        assert_eq!(calls[1]["is_error"], true);
        assert_eq!(calls[1]["structured"]["status"], 403, "{seen}");

        // Declining sends the client an access_denied with its state.
        let seen = sdk_flow(&app, "ana@example.com", &["--deny"], &[]).await;
        assert_eq!(seen["authorization_error"]["error"], "access_denied", "{seen}");
        assert_eq!(seen["authorization_error"]["iss"], app.base, "{seen}");
    }
}

both_backends! {
    async fn discovery_documents_and_the_401_challenge_lead_clients_to_the_server(backend) {
        let app = TestApp::spawn(backend).await;
        let r = app.send(Method::POST, "/mcp", None, Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})), &[]).await;
        assert_eq!(r.status, 401);
        let challenge = r.header("www-authenticate").unwrap();
        let metadata_url = app.url("/.well-known/oauth-protected-resource/mcp");
        assert!(challenge.starts_with("Bearer "), "{challenge}");
        assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
        for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
            let prm = app.send(Method::GET, path, None, None, &[]).await;
            assert_eq!(prm.status, 200, "{path}");
            assert_eq!(prm.body["resource"], app.url("/mcp"));
            assert_eq!(prm.body["authorization_servers"], json!([app.base]));
            assert_eq!(prm.body["scopes_supported"], json!(["mcp:read", "mcp:write"]));
            // Its documentation link is a page, not a 404.
            let docs_url = prm.body["resource_documentation"].as_str().unwrap();
            let docs = app.client.get(docs_url).send().await.unwrap();
            assert_eq!(docs.status(), 200, "{docs_url}");
            assert!(docs.headers()["content-type"].to_str().unwrap().starts_with("text/markdown"));
            assert!(docs.text().await.unwrap().starts_with("# The MCP endpoint"), "{docs_url}");
        }
        for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
            let meta = app.send(Method::GET, path, None, None, &[]).await;
            assert_eq!(meta.status, 200, "{path}");
            assert_eq!(meta.body["issuer"], app.base);
            assert_eq!(meta.body["authorization_endpoint"], app.url("/oauth/authorize"));
            assert_eq!(meta.body["token_endpoint"], app.url("/oauth/token"));
            assert_eq!(meta.body["registration_endpoint"], app.url("/oauth/register"));
            assert_eq!(meta.body["revocation_endpoint"], app.url("/oauth/revoke"));
            assert_eq!(meta.body["code_challenge_methods_supported"], json!(["S256"]));
            assert_eq!(meta.body["client_id_metadata_document_supported"], true);
            assert_eq!(meta.body["authorization_response_iss_parameter_supported"], true);
        }
        // A dashboard session token is not an MCP credential.
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PASSWORD, ws.id, parley_domain::user::Role::Owner).await;
        let session = app.token("ana@example.com", PASSWORD).await;
        let r = tools_with(&app, &session).await;
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").unwrap().contains("invalid_token"));
    }
}

both_backends! {
    async fn registration_and_authorization_refuse_what_the_rfcs_forbid(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PASSWORD, ws.id, parley_domain::user::Role::Owner).await;

        for (uris, error) in [
            (json!(["http://evil.example/cb"]), "invalid_redirect_uri"),
            (json!(["javascript:alert(1)"]), "invalid_redirect_uri"),
            (json!([]), "invalid_redirect_uri"),
        ] {
            let r = app.send(Method::POST, "/oauth/register", None, Some(json!({"redirect_uris": uris})), &[]).await;
            assert_eq!((r.status, r.body["error"].as_str()), (400, Some(error)), "{uris}: {}", r.text);
        }
        let r = app.send(Method::POST, "/oauth/register", None, Some(json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"})), &[]).await;
        assert_eq!(r.body["error"], "invalid_client_metadata");
        let client_id = register(&app).await;

        // An unknown client or a foreign redirect URI: shown, never redirected.
        for query in [
            authorize_query(&app, "pmcp_client_unknown", &[]),
            authorize_query(&app, &client_id, &[("redirect_uri", "http://127.0.0.1:7777/elsewhere")]),
            authorize_query(&app, &client_id, &[("redirect_uri", "https://evil.example/callback")]),
        ] {
            let r = page(&app, &format!("/oauth/authorize?{query}"), None).await;
            assert_eq!(r.status, 400, "{query}: {}", r.text);
            assert!(r.header("location").is_none());
            assert!(r.text.contains("role=\"alert\""), "{}", r.text);
        }
        // A loopback redirect may use another port (RFC 8252 §7.3).
        let other_port = authorize_query(&app, &client_id, &[("redirect_uri", "http://127.0.0.1:51515/callback")]);
        let r = page(&app, &format!("/oauth/authorize?{other_port}"), None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.text.contains("Sign in to Parley") && r.text.contains("Raw client"), "{}", r.text);
        assert_eq!(r.header("x-frame-options"), Some("DENY"));

        // Other faults go back to the client, with state and iss.
        for (extra, error) in [
            (vec![("code_challenge", ""), ("code_challenge_method", "")], "invalid_request"),
            (vec![("code_challenge_method", "plain")], "invalid_request"),
            (vec![("response_type", "token")], "unsupported_response_type"),
            (vec![("scope", "admin")], "invalid_scope"),
            (vec![("resource", "https://api.example/")], "invalid_target"),
        ] {
            let query = authorize_query(&app, &client_id, &extra);
            let r = page(&app, &format!("/oauth/authorize?{query}"), None).await;
            assert_eq!(r.status, 303, "{extra:?}: {}", r.text);
            let to = location(&r);
            assert!(to.starts_with(REDIRECT), "{to}");
            let q = query_of(&to);
            assert_eq!(q["error"], error, "{extra:?}");
            assert_eq!(q["state"], "xyz");
            assert_eq!(q["iss"], app.base);
        }

        // Wrong password: the form again, with the reason.
        let query = authorize_query(&app, &client_id, &[]);
        let r = form(&app, "/oauth/login", &[("email", "ana@example.com"), ("password", "wrong password!"), ("request", &query)], None).await;
        assert_eq!(r.status, 401);
        assert!(r.text.contains("Invalid email or password") && r.header("set-cookie").is_none(), "{}", r.text);
        // A form posted from another site is refused.
        let mut rb = raw_client().post(app.url("/oauth/login")).form(&[("email", "ana@example.com"), ("password", PASSWORD), ("request", &query)]);
        rb = rb.header("Origin", "https://evil.example");
        assert_eq!(rb.send().await.unwrap().status(), 403);

        let cookie = sign_in(&app, "ana@example.com", &query).await;
        let shown = page(&app, &format!("/oauth/authorize?{query}"), Some(&cookie)).await;
        assert!(shown.text.contains("Authorize Raw client") && shown.text.contains("127.0.0.1:7777"), "{}", shown.text);
        // A forged consent (no or a wrong csrf value) is refused.
        let wid = ws.id.to_string();
        let mut fields: Vec<(String, String)> = query_of(&format!("?{query}")).into_iter().collect();
        fields.extend([("csrf", "00"), ("workspace_id", wid.as_str()), ("mode", "live"), ("decision", "allow")].map(|(k, v)| (k.to_owned(), v.to_owned())));
        let borrowed: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let r = form(&app, "/oauth/authorize", &borrowed, Some(&cookie)).await;
        assert_eq!(r.status, 403, "{}", r.text);
        // A workspace the user is not in is refused too.
        let foreign = app.workspace("Foreign").await.id.to_string();
        let r = consent(&app, &cookie, &query, &[("workspace_id", &foreign), ("mode", "live"), ("decision", "allow")]).await;
        assert_eq!(r.status, 403, "{}", r.text);
        // Deny.
        let r = consent(&app, &cookie, &query, &[("workspace_id", &wid), ("mode", "live"), ("decision", "deny")]).await;
        let q = query_of(&location(&r));
        assert_eq!((q["error"].as_str(), q["state"].as_str()), ("access_denied", "xyz"));
    }
}

both_backends! {
    async fn codes_and_refresh_tokens_are_single_use_pkce_bound_and_resource_bound(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PASSWORD, ws.id, parley_domain::user::Role::Owner).await;
        let client_id = register(&app).await;
        let query = authorize_query(&app, &client_id, &[]);
        let cookie = sign_in(&app, "ana@example.com", &query).await;
        let wid = ws.id.to_string();
        let allow = [("workspace_id", wid.as_str()), ("mode", "live"), ("workspace_locked", "on"), ("allow_write", "on"), ("decision", "allow")];
        let code_for = async |query: &str| {
            let r = consent(&app, &cookie, query, &allow).await;
            assert_eq!(r.status, 303, "{}", r.text);
            let q = query_of(&location(&r));
            assert_eq!((q["state"].as_str(), q["iss"].as_str()), ("xyz", app.base.as_str()));
            q["code"].clone()
        };

        // A wrong verifier fails, and burns the code.
        let code = code_for(&query).await;
        let r = exchange(&app, &client_id, &code, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXx").await;
        assert_eq!((r.status, r.body["error"].as_str()), (400, Some("invalid_grant")), "{}", r.text);
        assert_eq!(r.header("cache-control"), Some("no-store"));
        // Another resource is refused.
        let code = code_for(&query).await;
        let fields = [("grant_type", "authorization_code"), ("code", code.as_str()), ("code_verifier", VERIFIER),
                      ("client_id", client_id.as_str()), ("resource", "https://api.example/")];
        let r = form(&app, "/oauth/token", &fields, None).await;
        assert_eq!(r.body["error"], "invalid_target", "{}", r.text);
        // Another client cannot use the code.
        let thief = register(&app).await;
        let code = code_for(&query).await;
        let r = exchange(&app, &thief, &code, VERIFIER).await;
        assert_eq!(r.body["error"], "invalid_grant", "{}", r.text);

        // The right one works, once; its second use revokes what it gave.
        let code = code_for(&query).await;
        let r = exchange(&app, &client_id, &code, VERIFIER).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.body["token_type"], "Bearer");
        assert_eq!(r.body["expires_in"], 3600);
        let first = r.body["access_token"].as_str().unwrap().to_owned();
        assert_eq!(tools_with(&app, &first).await.status, 200);
        let r = exchange(&app, &client_id, &code, VERIFIER).await;
        assert_eq!(r.body["error"], "invalid_grant");
        assert_eq!(tools_with(&app, &first).await.status, 401, "a replayed code revokes its grant");

        // Refresh tokens rotate; a rotated one presented again revokes the grant.
        let code = code_for(&query).await;
        let tokens = exchange(&app, &client_id, &code, VERIFIER).await.body;
        let old_refresh = tokens["refresh_token"].as_str().unwrap();
        let r = refresh(&app, &client_id, old_refresh).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let new_access = r.body["access_token"].as_str().unwrap().to_owned();
        let new_refresh = r.body["refresh_token"].as_str().unwrap().to_owned();
        assert_ne!(new_refresh, old_refresh);
        assert_eq!(tools_with(&app, &new_access).await.status, 200);
        // Narrowing on refresh is allowed, widening is not.
        let r = form(&app, "/oauth/token", &[("grant_type", "refresh_token"), ("refresh_token", &new_refresh), ("client_id", &client_id), ("scope", "mcp:read")], None).await;
        assert_eq!(r.body["scope"], "mcp:read", "{}", r.text);
        let read_only = r.body["access_token"].as_str().unwrap().to_owned();
        let narrowed = r.body["refresh_token"].as_str().unwrap().to_owned();
        let listed = tools_with(&app, &read_only).await;
        let names: Vec<&str> = listed.body["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"list_agents") && !names.contains(&"create_agent"), "{names:?}");
        let r = form(&app, "/oauth/token", &[("grant_type", "refresh_token"), ("refresh_token", &narrowed), ("client_id", &client_id), ("scope", "mcp:read mcp:write")], None).await;
        assert_eq!(r.body["error"], "invalid_scope", "{}", r.text);
        let r = refresh(&app, &client_id, old_refresh).await;
        assert_eq!(r.body["error"], "invalid_grant", "{}", r.text);
        assert!(r.body["error_description"].as_str().unwrap().contains("reuse"));
        assert_eq!(tools_with(&app, &new_access).await.status, 401, "reuse revokes the whole grant");
        assert_eq!(refresh(&app, &client_id, &narrowed).await.body["error"], "invalid_grant");

        // RFC 7009: revoking a refresh token ends its grant; unknown tokens are a 200.
        let flow = {
            let code = code_for(&query).await;
            exchange(&app, &client_id, &code, VERIFIER).await.body
        };
        let access = flow["access_token"].as_str().unwrap();
        let r = form(&app, "/oauth/revoke", &[("token", "pmcp_rt_nothing"), ("client_id", &client_id)], None).await;
        assert_eq!(r.status, 200);
        let r = form(&app, "/oauth/revoke", &[("token", flow["refresh_token"].as_str().unwrap()), ("client_id", &thief)], None).await;
        assert_eq!(r.status, 200);
        assert_eq!(tools_with(&app, access).await.status, 200, "another client's revocation changes nothing");
        let r = form(&app, "/oauth/revoke", &[("token", flow["refresh_token"].as_str().unwrap()), ("client_id", &client_id)], None).await;
        assert_eq!(r.status, 200);
        assert_eq!(tools_with(&app, access).await.status, 401);

        // Leaving the workspace ends the grant's use at once.
        let flow = authorized(&app, "bo@example.com").await;
        let access = flow.tokens["access_token"].as_str().unwrap();
        assert_eq!(tools_with(&app, access).await.status, 200);
        let mut tx = app.db.begin().await.unwrap();
        assert!(parley_store::repo::users::remove_membership(&mut tx, flow.user_id, flow.ws.id).await.unwrap());
        tx.commit().await.unwrap();
        assert_eq!(tools_with(&app, access).await.status, 401);
        let r = refresh(&app, &flow.client_id, flow.tokens["refresh_token"].as_str().unwrap()).await;
        assert_eq!(r.body["error"], "invalid_grant", "{}", r.text);
    }
}

both_backends! {
    async fn access_tokens_expire(backend) {
        let app = TestApp::spawn_with(backend, |s| s.mcp.access_token_ttl_seconds = 1).await;
        let flow = authorized(&app, "ana@example.com").await;
        let access = flow.tokens["access_token"].as_str().unwrap();
        assert_eq!(tools_with(&app, access).await.status, 200);
        tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
        let r = tools_with(&app, access).await;
        assert_eq!(r.status, 401);
        assert!(r.header("www-authenticate").unwrap().contains("invalid_token"));
        let r = refresh(&app, &flow.client_id, flow.tokens["refresh_token"].as_str().unwrap()).await;
        assert_eq!(r.status, 200, "the refresh token outlives the access token: {}", r.text);
    }
}

/// Serves `document` at `http://127.0.0.1:PORT/client.json`; returns the URL.
async fn metadata_server(document: impl Fn(&str) -> Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/client.json", listener.local_addr().unwrap());
    let body = document(&url);
    let router = axum::Router::new().route(
        "/client.json",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([("Cache-Control", "max-age=600")], axum::Json(body)) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

both_backends! {
    async fn a_client_id_metadata_document_names_the_client(backend) {
        let app = TestApp::spawn_with(backend, |s| s.mcp.allow_private_client_metadata = true).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PASSWORD, ws.id, parley_domain::user::Role::Owner).await;
        let good = metadata_server(|url| json!({"client_id": url, "client_name": "Documented client",
            "redirect_uris": ["http://127.0.0.1/callback"], "token_endpoint_auth_method": "none"})).await;
        let liar = metadata_server(|_| json!({"client_id": "https://someone.else/client.json", "client_name": "Liar",
            "redirect_uris": [REDIRECT]})).await;

        // The SDK uses the document's URL as its client id: no registration.
        let seen = sdk_flow(&app, "ana@example.com", &["--client-metadata-url", &good], &[("list_agents", json!({}))]).await;
        assert!(seen["consent_text"].as_str().unwrap().contains("Authorize Documented client"), "{seen}");
        assert!(seen["consent_text"].as_str().unwrap().contains("identity is published at"), "{seen}");
        assert_eq!(seen["authorizations"][0]["client_id"], good.as_str());
        assert!(!seen["oauth_requests"].as_array().unwrap().iter().any(|r| r["url"].as_str().unwrap().ends_with("/oauth/register")), "{seen}");
        assert_eq!(seen["calls"][0]["is_error"], false, "{seen}");

        // A document whose client_id is not its own URL is refused.
        let query = authorize_query(&app, &liar, &[]);
        let r = page(&app, &format!("/oauth/authorize?{query}"), None).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert!(r.text.contains("client_id is not the document"), "{}", r.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_metadata_documents_at_private_addresses_are_refused_by_default() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let doc = metadata_server(|url| json!({"client_id": url, "redirect_uris": [REDIRECT]})).await;
    let query = authorize_query(&app, &doc, &[]);
    let r = page(&app, &format!("/oauth/authorize?{query}"), None).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("https"), "plain http is refused first: {}", r.text);
    let https_private = "https://127.0.0.1:9/client.json";
    let query = authorize_query(&app, https_private, &[]);
    let r = page(&app, &format!("/oauth/authorize?{query}"), None).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("127.0.0.1"), "the private address is named: {}", r.text);
}

both_backends! {
    // Issue 31: redirect URIs with schemes a browser or the system acts on
    // were registered; the sign-in cookie was a dashboard refresh token;
    // framing headers are on every answer of the authorization server.
    async fn the_authorization_server_keeps_its_sign_in_and_pages_to_itself(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PASSWORD, ws.id, parley_domain::user::Role::Owner).await;
        for uri in ["view-source:https://evil.example/", "jar:https://evil.example/x.jar!/", "ms-settings:privacy", "myapp:/cb"] {
            let body = json!({"redirect_uris": [uri], "client_name": "Odd", "token_endpoint_auth_method": "none"});
            let r = app.send(Method::POST, "/oauth/register", None, Some(body), &[]).await;
            assert_eq!((r.status, r.body["error"].clone()), (400, json!("invalid_redirect_uri")), "{uri}: {}", r.text);
        }
        for uri in ["com.example.app:/oauth", "cursor://anysphere.cursor-retrieval/oauth/callback"] {
            let body = json!({"redirect_uris": [uri], "client_name": "App", "token_endpoint_auth_method": "none"});
            assert_eq!(app.send(Method::POST, "/oauth/register", None, Some(body), &[]).await.status, 201, "{uri}");
        }

        let client_id = register(&app).await;
        let query = authorize_query(&app, &client_id, &[]);
        let framed = |r: &Resp, what: &str| {
            assert_eq!(r.header("x-frame-options"), Some("DENY"), "{what}");
            assert!(r.header("content-security-policy").is_some_and(|c| c.contains("frame-ancestors 'none'")), "{what}");
        };
        framed(&page(&app, &format!("/oauth/authorize?{query}"), None).await, "the sign-in page");
        let wrong = form(&app, "/oauth/login", &[("email", "ana@example.com"), ("password", "wrong"), ("request", &query)], None).await;
        assert_eq!(wrong.status, 401);
        framed(&wrong, "a failed sign-in");
        let signed = form(&app, "/oauth/login", &[("email", "ana@example.com"), ("password", PASSWORD), ("request", &query)], None).await;
        assert_eq!(signed.status, 303);
        framed(&signed, "the sign-in's redirect");
        let cookie = sign_in(&app, "ana@example.com", &query).await;
        framed(&page(&app, &format!("/oauth/authorize?{query}"), Some(&cookie)).await, "the consent page");
        framed(&page(&app, "/oauth/authorize?client_id=nobody", None).await, "a refusal");

        // The sign-in cookie is good for these pages only: the dashboard's
        // refresh refuses it, and a dashboard session does not sign these pages in.
        let token = cookie.split_once('=').unwrap().1.to_owned();
        let r = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &format!("parley_refresh={token}"))]).await;
        assert_eq!(r.status, 401, "{}", r.text);
        let login = app.login("ana@example.com", PASSWORD).await;
        let dashboard = login.header("set-cookie").unwrap().split(';').next().unwrap().split_once('=').unwrap().1.to_owned();
        let r = page(&app, &format!("/oauth/authorize?{query}"), Some(&format!("parley_oauth_session={dashboard}"))).await;
        assert!(r.text.contains("Sign in to Parley"), "a dashboard session is not an OAuth sign-in: {}", r.text);
        // It still signs in the consent page it was made for.
        assert!(page(&app, &format!("/oauth/authorize?{query}"), Some(&cookie)).await.text.contains("name=\"csrf\""));
    }
}
