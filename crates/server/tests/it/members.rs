//! Issue 32: members, invitations and password resets — one-time links,
//! role rules enforced by the API, and the workspace's last owner kept.

use parley_domain::user::Role;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::parley;
use crate::support::*;

const PW: &str = "a long enough password";

/// The token in a one-time link (after its `#`).
fn token_of(url: &str) -> String {
    url.split_once('#').expect("the link carries its token in the fragment").1.to_owned()
}

async fn as_user(app: &TestApp, method: Method, path: &str, token: &str, body: Option<Value>) -> Resp {
    app.bearer(method, path, token, body).await
}

async fn post_anon(app: &TestApp, path: &str, body: Value) -> Resp {
    app.send(Method::POST, path, None, Some(body), &[]).await
}

both_backends! {
    async fn an_invitation_creates_an_account_once(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PW, ws.id, Role::Owner).await;
        let owner = app.token("ana@example.com", PW).await;
        let r = as_user(&app, Method::POST, "/api/v1/invitations", &owner, Some(json!({"email": " Sam@Example.com", "role": "member"}))).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!((r.body["email"].clone(), r.body["role"].clone()), (json!("sam@example.com"), json!("member")));
        let url = r.body["accept_url"].as_str().unwrap().to_owned();
        assert!(url.starts_with(&format!("{}/invitation#inv_", app.base)), "{url}");
        let token = token_of(&url);
        // Listed while it waits, without its link.
        let list = as_user(&app, Method::GET, "/api/v1/invitations", &owner, None).await;
        assert_eq!(list.body["total"], 1);
        assert!(list.body["items"][0].get("accept_url").is_none() && !list.text.contains(&token));
        // The accepting page learns what the link offers.
        let preview = post_anon(&app, "/api/v1/auth/invitations/lookup", json!({"token": token})).await;
        assert_eq!(preview.status, 200, "{}", preview.text);
        assert_eq!(
            (preview.body["workspace_name"].clone(), preview.body["email"].clone(), preview.body["account_exists"].clone()),
            (json!("Acme"), json!("sam@example.com"), json!(false))
        );
        // Bad input: every fault named, nothing used up.
        let short = post_anon(&app, "/api/v1/auth/invitations/accept", json!({"token": token, "password": "short"})).await;
        assert_eq!(short.status, 422);
        assert_eq!(short.faults()[0].0, r#"["body","password"]"#);
        let missing = post_anon(&app, "/api/v1/auth/invitations/accept", json!({"token": token})).await;
        assert_eq!((missing.status, missing.faults()[0].0.as_str()), (422, r#"["body","password"]"#));
        // Accepting signs the new member in to Acme.
        let accepted = post_anon(&app, "/api/v1/auth/invitations/accept", json!({"token": token, "password": PW})).await;
        assert_eq!(accepted.status, 200, "{}", accepted.text);
        assert_eq!((accepted.body["workspace_id"].clone(), accepted.body["mode"].clone()), (json!(ws.id), json!("live")));
        assert!(accepted.refresh_cookie().is_some());
        let sam = accepted.body["access_token"].as_str().unwrap().to_owned();
        let me = as_user(&app, Method::GET, "/api/v1/auth/me", &sam, None).await;
        assert_eq!(me.body["workspaces"], json!([{"workspace_id": ws.id, "workspace_name": "Acme", "role": "member"}]));
        assert_eq!(app.login("sam@example.com", PW).await.status, 200);
        // The link is used up.
        for (path, body) in [
            ("/api/v1/auth/invitations/lookup", json!({"token": token})),
            ("/api/v1/auth/invitations/accept", json!({"token": token, "password": PW})),
        ] {
            let again = post_anon(&app, path, body).await;
            assert_eq!((again.status, again.body.clone()), (404, json!({"detail": "Invitation link not found"})), "{path}");
        }
        assert_eq!(as_user(&app, Method::GET, "/api/v1/invitations", &owner, None).await.body["total"], 0);
        // An accepted invitation exists: revoking it says so.
        let id = r.body["id"].as_i64().unwrap();
        let revoke = as_user(&app, Method::DELETE, &format!("/api/v1/invitations/{id}"), &owner, None).await;
        assert_eq!((revoke.status, revoke.body["detail"].clone()), (409, json!(format!("Invitation {id} was accepted"))));
        let members = app.get(&ws.live, "/api/v1/members").await;
        let emails: Vec<&str> = members.body["items"].as_array().unwrap().iter().map(|m| m["email"].as_str().unwrap()).collect();
        assert_eq!(emails, ["ana@example.com", "sam@example.com"]);
        // A member is already one.
        let twice = as_user(&app, Method::POST, "/api/v1/invitations", &owner, Some(json!({"email": "sam@example.com", "role": "admin"}))).await;
        assert_eq!((twice.status, twice.body.clone()), (409, json!({"detail": "sam@example.com is already a member of this workspace"})));
        let bad = as_user(&app, Method::POST, "/api/v1/invitations", &owner, Some(json!({"email": "not an email", "role": "boss"}))).await;
        let faults: Vec<String> = bad.faults().into_iter().map(|f| f.0).collect();
        assert_eq!((bad.status, faults), (422, vec![r#"["body","email"]"#.to_owned(), r#"["body","role"]"#.to_owned()]));
    }

    async fn an_existing_account_accepts_with_its_own_password(backend) {
        let app = TestApp::spawn(backend).await;
        let a = app.workspace("Acme").await;
        let b = app.workspace("Beta").await;
        app.user("ana@example.com", PW, a.id, Role::Owner).await;
        app.user("bo@example.com", PW, b.id, Role::Owner).await;
        let bo = app.token("bo@example.com", PW).await;
        let r = as_user(&app, Method::POST, "/api/v1/invitations", &bo, Some(json!({"email": "ana@example.com", "role": "admin"}))).await;
        let token = token_of(r.body["accept_url"].as_str().unwrap());
        let preview = post_anon(&app, "/api/v1/auth/invitations/lookup", json!({"token": token})).await;
        assert_eq!(preview.body["account_exists"], true);
        // The link alone does not hand over the account.
        let wrong = post_anon(&app, "/api/v1/auth/invitations/accept", json!({"token": token, "password": "someone else's guess"})).await;
        assert_eq!((wrong.status, wrong.body.clone()), (401, json!({"detail": "Invalid email or password"})));
        let ok = post_anon(&app, "/api/v1/auth/invitations/accept", json!({"token": token, "password": PW})).await;
        assert_eq!((ok.status, ok.body["workspace_id"].clone()), (200, json!(b.id)), "{}", ok.text);
        let me = as_user(&app, Method::GET, "/api/v1/auth/me", ok.body["access_token"].as_str().unwrap(), None).await;
        let roles: Vec<(i64, String)> = me.body["workspaces"].as_array().unwrap().iter()
            .map(|w| (w["workspace_id"].as_i64().unwrap(), w["role"].as_str().unwrap().to_owned())).collect();
        assert_eq!(roles, vec![(a.id, "owner".to_owned()), (b.id, "admin".to_owned())]);
        // Removed from Beta: the keys she made there die with her access, and
        // her session carries on in Acme rather than ending.
        let in_b = ok.body["access_token"].as_str().unwrap().to_owned();
        let cookie = format!("parley_refresh={}", ok.refresh_cookie().unwrap());
        let key = as_user(&app, Method::POST, "/api/v1/api-keys", &in_b, Some(json!({"name": "Ana's", "mode": "live"}))).await;
        let key = key.body["key"].as_str().unwrap().to_owned();
        assert_eq!(app.get(&key, "/api/v1/agents").await.status, 200);
        let ana_id = me.body["user"]["id"].as_i64().unwrap();
        assert_eq!(as_user(&app, Method::DELETE, &format!("/api/v1/members/{ana_id}"), &bo, None).await.status, 204);
        assert_eq!(app.get(&key, "/api/v1/agents").await.status, 401, "a removed admin's key still works");
        assert_eq!(as_user(&app, Method::GET, "/api/v1/agents", &in_b, None).await.status, 401);
        let moved = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &cookie)]).await;
        assert_eq!((moved.status, moved.body["workspace_id"].clone()), (200, json!(a.id)), "{}", moved.text);
        // Another site's page cannot accept for someone.
        let r = as_user(&app, Method::POST, "/api/v1/invitations", &bo, Some(json!({"email": "cy@example.com", "role": "member"}))).await;
        let replaced = r.body["id"].as_i64().unwrap();
        let token = token_of(r.body["accept_url"].as_str().unwrap());
        let evil = app.send(Method::POST, "/api/v1/auth/invitations/accept", None, Some(json!({"token": token, "password": PW})), &[("Origin", "https://evil.example")]).await;
        assert_eq!(evil.status, 403);
        // A new invitation to the same email replaces the old link; a revoked one is dead.
        let again = as_user(&app, Method::POST, "/api/v1/invitations", &bo, Some(json!({"email": "cy@example.com", "role": "member"}))).await;
        let lookup = post_anon(&app, "/api/v1/auth/invitations/lookup", json!({"token": token})).await;
        assert_eq!(lookup.status, 404, "the replaced link still works");
        let id = again.body["id"].as_i64().unwrap();
        assert_eq!(as_user(&app, Method::DELETE, &format!("/api/v1/invitations/{id}"), &bo, None).await.status, 204);
        let token = token_of(again.body["accept_url"].as_str().unwrap());
        assert_eq!(post_anon(&app, "/api/v1/auth/invitations/lookup", json!({"token": token})).await.status, 404);
        // Revoking it again, or the one it replaced, says why not; an id the
        // workspace never had is a 404.
        let r = as_user(&app, Method::DELETE, &format!("/api/v1/invitations/{id}"), &bo, None).await;
        assert_eq!((r.status, r.body["detail"].clone()), (409, json!(format!("Invitation {id} was already revoked (or replaced by a newer one to the same email)"))));
        assert_eq!(as_user(&app, Method::DELETE, &format!("/api/v1/invitations/{replaced}"), &bo, None).await.status, 409);
        assert_eq!(as_user(&app, Method::DELETE, "/api/v1/invitations/999999", &bo, None).await.status, 404);
    }

    async fn roles_are_enforced_by_the_api_and_a_workspace_keeps_an_owner(backend) {
        let app = TestApp::spawn(backend).await;
        let a = app.workspace("Acme").await;
        let other = app.workspace("Other").await;
        let owner_id = app.user("ana@example.com", PW, a.id, Role::Owner).await;
        let admin_id = app.user("al@example.com", PW, a.id, Role::Admin).await;
        let member_id = app.user("mia@example.com", PW, a.id, Role::Member).await;
        let stranger = app.user("zed@example.com", PW, other.id, Role::Owner).await;
        let (owner, admin, member) = (
            app.token("ana@example.com", PW).await,
            app.token("al@example.com", PW).await,
            app.token("mia@example.com", PW).await,
        );
        let invite = |role: &str| json!({"email": "new@example.com", "role": role});
        // Members and API keys manage nothing; admins do not touch owners.
        assert_eq!(as_user(&app, Method::POST, "/api/v1/invitations", &member, Some(invite("member"))).await.status, 403);
        assert_eq!(as_user(&app, Method::GET, "/api/v1/invitations", &member, None).await.status, 403);
        assert_eq!(app.post(&a.live, "/api/v1/invitations", invite("member")).await.status, 403);
        let r = as_user(&app, Method::POST, "/api/v1/invitations", &admin, Some(invite("owner"))).await;
        assert_eq!((r.status, r.body.clone()), (403, json!({"detail": "Only owners can grant, change or remove the owner role"})));
        assert_eq!(as_user(&app, Method::POST, "/api/v1/invitations", &admin, Some(invite("admin"))).await.status, 201);
        let patch = |id: i64| format!("/api/v1/members/{id}");
        assert_eq!(as_user(&app, Method::PATCH, &patch(owner_id), &admin, Some(json!({"role": "member"}))).await.status, 403);
        assert_eq!(as_user(&app, Method::DELETE, &patch(owner_id), &admin, None).await.status, 403);
        assert_eq!(as_user(&app, Method::PATCH, &patch(admin_id), &member, Some(json!({"role": "member"}))).await.status, 403);
        // Everyone may see who is in the workspace.
        assert_eq!(as_user(&app, Method::GET, "/api/v1/members", &member, None).await.body["total"], 3);
        // The last owner stays.
        for r in [
            as_user(&app, Method::PATCH, &patch(owner_id), &owner, Some(json!({"role": "admin"}))).await,
            as_user(&app, Method::DELETE, &patch(owner_id), &owner, None).await,
        ] {
            assert_eq!((r.status, r.body.clone()), (409, json!({"detail": "This is the workspace's last owner: make someone else an owner first"})));
        }
        // Another workspace's user is no member here: the same 404 as nobody.
        for id in [stranger, 999_999] {
            let r = as_user(&app, Method::PATCH, &patch(id), &owner, Some(json!({"role": "admin"}))).await;
            assert_eq!((r.status, r.body.clone()), (404, json!({"detail": format!("Member {id} not found")})));
        }
        // Two owners demoting each other at once: one wins, one owner stays.
        let second = app.user("olga@example.com", PW, a.id, Role::Owner).await;
        let olga = app.token("olga@example.com", PW).await;
        let (olga_path, ana_path) = (patch(second), patch(owner_id));
        let (x, y) = tokio::join!(
            as_user(&app, Method::PATCH, &olga_path, &owner, Some(json!({"role": "admin"}))),
            as_user(&app, Method::PATCH, &ana_path, &olga, Some(json!({"role": "admin"}))),
        );
        let mut statuses = [x.status, y.status];
        statuses.sort();
        // The loser is refused as the last owner (409), or as an admin by then (403).
        assert!(statuses == [200, 409] || statuses == [200, 403], "{statuses:?}: {} / {}", x.text, y.text);
        let owners = app.get(&a.live, "/api/v1/members").await.body["items"].as_array().unwrap().iter().filter(|m| m["role"] == "owner").count();
        assert_eq!(owners, 1);
        // Put Ana back as the only owner for what follows.
        if x.status != 200 {
            assert_eq!(as_user(&app, Method::PATCH, &patch(owner_id), &olga, Some(json!({"role": "owner"}))).await.status, 200);
            let ana = app.token("ana@example.com", PW).await;
            assert_eq!(as_user(&app, Method::PATCH, &patch(second), &ana, Some(json!({"role": "admin"}))).await.status, 200);
        }
        let owner = app.token("ana@example.com", PW).await;
        // An owner promotes; then the old owner may step down.
        let r = as_user(&app, Method::PATCH, &patch(admin_id), &owner, Some(json!({"role": "owner"}))).await;
        assert_eq!((r.status, r.body["role"].clone()), (200, json!("owner")), "{}", r.text);
        assert_eq!(as_user(&app, Method::PATCH, &patch(owner_id), &owner, Some(json!({"role": "admin"}))).await.status, 200);
        // A removed member's session stops at its next request; members may leave.
        assert_eq!(as_user(&app, Method::GET, "/api/v1/agents", &member, None).await.status, 200);
        assert_eq!(as_user(&app, Method::DELETE, &patch(member_id), &member, None).await.status, 204);
        assert_eq!(as_user(&app, Method::GET, "/api/v1/agents", &member, None).await.status, 401);
        let bad = as_user(&app, Method::PATCH, &patch(admin_id), &admin, Some(json!({"role": "king", "x": 1}))).await;
        assert_eq!(bad.status, 422);
    }

    async fn a_reset_link_from_the_cli_sets_a_new_password_once(backend) {
        let app = TestApp::spawn(backend).await;
        let ws = app.workspace("Acme").await;
        app.user("ana@example.com", PW, ws.id, Role::Owner).await;
        let old_cookie = format!("parley_refresh={}", app.login("ana@example.com", PW).await.refresh_cookie().unwrap());
        let (code, out, err) = parley(&["user", "reset-password", "--email", "ANA@example.com"], &app.database_url);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out["email"], "ana@example.com");
        let token = token_of(out["reset_url"].as_str().unwrap());
        assert!(token.starts_with("pwr_"));
        let (code, _, err) = parley(&["user", "reset-password", "--email", "nobody@example.com"], &app.database_url);
        assert_eq!(code, 1);
        assert!(err.contains("not found"), "{err}");
        let short = post_anon(&app, "/api/v1/auth/password-reset", json!({"token": token, "password": "short"})).await;
        assert_eq!((short.status, short.faults()[0].0.as_str()), (422, r#"["body","password"]"#));
        let new_pw = "a brand new passphrase";
        let r = post_anon(&app, "/api/v1/auth/password-reset", json!({"token": token, "password": new_pw})).await;
        assert_eq!((r.status, r.body["workspace_id"].clone()), (200, json!(ws.id)), "{}", r.text);
        // Used once; the old password and the old session are over.
        let again = post_anon(&app, "/api/v1/auth/password-reset", json!({"token": token, "password": new_pw})).await;
        assert_eq!((again.status, again.body.clone()), (404, json!({"detail": "Password reset link not found"})));
        assert_eq!(app.login("ana@example.com", PW).await.status, 401);
        assert_eq!(app.login("ana@example.com", new_pw).await.status, 200);
        let refresh = app.send(Method::POST, "/api/v1/auth/refresh", None, None, &[("Cookie", &old_cookie)]).await;
        assert_eq!(refresh.status, 401);
        // The CLI's invitation is the API's.
        let (code, out, err) = parley(&["user", "invite", "--workspace", &ws.id.to_string(), "--email", "sam@example.com", "--role", "admin"], &app.database_url);
        assert_eq!(code, 0, "{err}");
        assert_eq!((out["role"].clone(), out["invited_by"].clone()), (json!("admin"), Value::Null));
        let preview = post_anon(&app, "/api/v1/auth/invitations/lookup", json!({"token": token_of(out["accept_url"].as_str().unwrap())})).await;
        assert_eq!(preview.body["role"], "admin");
        let (code, _, err) = parley(&["user", "invite", "--workspace", &ws.id.to_string(), "--email", "bad"], &app.database_url);
        assert_eq!(code, 1);
        assert!(err.contains("email"), "{err}");
    }
}

/// `parley openapi | head` closes the pipe early: the command stops quietly.
#[test]
fn a_closed_pipe_is_no_panic() {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_parley"))
        .arg("openapi")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is dropped here, as `head` exits.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
