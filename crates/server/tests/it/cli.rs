//! The `parley` binary: its JSON output, first start, and graceful shutdown.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;
use parley_store::testing::TestDatabase;

/// Runs a `parley` command; gives its exit code, JSON output and stderr.
pub fn parley(args: &[&str], database_url: &str) -> (i32, Value, String) {
    parley_with_env(args, database_url, &[])
}

pub fn parley_with_env(args: &[&str], database_url: &str, env: &[(&str, &str)]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(args)
        .arg("--database-url")
        .arg(database_url)
        .env("PARLEY_SECRETS__MASTER_KEY", TEST_MASTER_KEY)
        .envs(env.iter().copied())
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run parley");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap_or(-1), serde_json::from_str(&stdout).unwrap_or(Value::Null), stderr)
}

fn keys_of(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub struct Server {
    pub child: Child,
    pub port: u16,
    pub banner: String,
    /// Where its log goes; shown (warnings and errors) when a test fails.
    log: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let worrying: Vec<&str> = log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
            eprintln!("server on port {} logged {} warnings/errors (last 40):", self.port, worrying.len());
            for line in worrying.iter().rev().take(40).rev() {
                eprintln!("  {line}");
            }
        }
        if std::env::var_os("PARLEY_TEST_SERVER_LOGS").is_none() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Starts `parley serve` and waits until it answers `/healthz`.
pub fn start_server(database_url: &str) -> Server {
    start_server_with(database_url, &[])
}

/// Starts `parley serve` with extra environment variables.
pub fn start_server_with(database_url: &str, env: &[(&str, &str)]) -> Server {
    let port = free_port();
    let log = server_log(port);
    let mut child = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--database-url", database_url])
        .env("PARLEY_SECRETS__MASTER_KEY", TEST_MASTER_KEY)
        .envs(env.iter().copied())
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(File::create(&log).map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
        .env("NO_COLOR", "1")
        .spawn()
        .expect("spawn parley serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut banner = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            banner.push_str(&line);
            banner.push('\n');
            let _ = tx.send(banner.clone());
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            std::thread::sleep(Duration::from_millis(100));
            let banner = rx.try_iter().last().unwrap_or_default();
            return Server { child, port, banner, log };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("parley serve did not start");
}

/// The file a server started for a test logs to: in the directory named
/// by `PARLEY_TEST_SERVER_LOGS` (kept), or the temporary directory (removed
/// with the server).
fn server_log(port: u16) -> std::path::PathBuf {
    let dir = std::env::var_os("PARLEY_TEST_SERVER_LOGS").map_or_else(std::env::temp_dir, Into::into);
    dir.join(format!("parley-test-{port}-{}.log", std::process::id()))
}

pub fn key_in(banner: &str, mode: &str) -> Option<String> {
    let re = regex::Regex::new(&format!(r"parley_{mode}_[A-Za-z0-9]{{36}}")).unwrap();
    re.find(banner).map(|m| m.as_str().to_owned())
}

both_backends! {
    async fn workspace_and_key_commands_print_the_documented_json(backend) {
        let database = fresh_database(backend).await;
        let url = database.url.clone();
        let (code, ws, err) = tokio::task::spawn_blocking({ let url = url.clone(); move || parley(&["workspace", "create", "--name", "Acme", "--voice", "--create"], &url) }).await.unwrap();
        assert_eq!(code, 0, "{err}");
        assert_eq!(keys_of(&ws), vec!["api_key", "workspace"]);
        assert_eq!(keys_of(&ws["workspace"]), vec!["created_at", "id", "name", "voice_enabled"]);
        assert_eq!(keys_of(&ws["api_key"]), vec!["id", "key", "mode", "workspace_locked"]);
        assert_eq!((ws["workspace"]["name"].clone(), ws["workspace"]["voice_enabled"].clone()), (json!("Acme"), json!(true)));
        assert_eq!(ws["api_key"]["mode"], "live");
        let live = ws["api_key"]["key"].as_str().unwrap().to_owned();
        let wid = ws["workspace"]["id"].to_string();

        let (code, key, err) = tokio::task::spawn_blocking({ let url = url.clone(); let wid = wid.clone(); move || parley(&["key", "create", "--workspace", &wid, "--mode", "test", "--name", "CI", "--workspace-locked"], &url) }).await.unwrap();
        assert_eq!(code, 0, "{err}");
        assert!(key["key"].as_str().unwrap().starts_with("parley_test_"));
        assert_eq!((key["mode"].clone(), key["name"].clone(), key["workspace_locked"].clone()), (json!("test"), json!("CI"), json!(true)));
        assert!(key["hint"].as_str().unwrap().starts_with("parley_test_"));
        let test_key = key["key"].as_str().unwrap().to_owned();
        let test_key_id = key["id"].to_string();

        // The server on the same database accepts both keys…
        let app = TestApp::spawn_on(database, |_| {}).await;
        assert_eq!(app.get(&live, "/api/v1/agents").await.status, 200);
        assert_eq!(app.get(&test_key, "/api/v1/agents").await.status, 200);
        // …and refuses a key on the request right after the CLI revokes it.
        let (code, revoked, err) = tokio::task::spawn_blocking(move || parley(&["key", "revoke", &test_key_id], &url)).await.unwrap();
        assert_eq!(code, 0, "{err}");
        assert!(revoked["revoked_at"].is_string());
        assert_eq!(app.get(&test_key, "/api/v1/agents").await.status, 401);

        let (code, _, err) = tokio::task::spawn_blocking({ let url = app.database_url.clone(); move || parley(&["key", "revoke", "999999"], &url) }).await.unwrap();
        assert_eq!(code, 1);
        let err: Value = serde_json::from_str(err.trim()).unwrap();
        assert_eq!(err["error"], "API key 999999 not found");
    }

    async fn migrate_is_idempotent_and_prints_json(backend) {
        let database = fresh_database(backend).await;
        let url = database.url.clone();
        for _ in 0..2 {
            let url = url.clone();
            let (code, out, err) = tokio::task::spawn_blocking(move || parley(&["migrate", "--create"], &url)).await.unwrap();
            assert_eq!(code, 0, "{err}");
            assert_eq!(out, json!({"migrated": true}));
        }
    }

    async fn the_first_start_creates_a_default_workspace_and_prints_its_keys_once(backend) {
        let database = fresh_database(backend).await;
        let url = database.url.clone();
        let (banner, live, test) = tokio::task::spawn_blocking({ let url = url.clone(); move || {
            let server = start_server(&url);
            let live = key_in(&server.banner, "live").expect("live key printed");
            let test = key_in(&server.banner, "test").expect("test key printed");
            (server.banner.clone(), live, test)
        }}).await.unwrap();
        let login = regex::Regex::new(r"owner login: (\S+) / (\S+)").unwrap();
        let caps = login.captures(&banner).expect("owner login printed");
        let (email, password) = (caps[1].to_owned(), caps[2].to_owned());
        assert!(banner.contains("\"Default\""), "{banner}");
        let second = tokio::task::spawn_blocking({ let url = url.clone(); move || start_server(&url).banner.clone() }).await.unwrap();
        assert!(key_in(&second, "live").is_none(), "keys are printed only once: {second}");

        let app = TestApp::spawn_on(database, |_| {}).await;
        assert_eq!(app.get(&live, "/api/v1/agents").await.status, 200);
        assert_eq!(app.get(&test, "/api/v1/agents").await.status, 200);
        let mut c = app.db.read().await.unwrap();
        let ws = parley_store::repo::workspaces::get(&mut c, 1).await.unwrap().unwrap();
        assert_eq!((ws.name.as_str(), ws.voice_enabled), ("Default", true));
        drop(c);
        // The owner login works and owns the Default workspace.
        let token = app.token(&email, &password).await;
        let me = app.bearer(reqwest::Method::GET, "/api/v1/auth/me", &token, None).await;
        assert_eq!(me.body["workspaces"], json!([{"workspace_id": 1, "workspace_name": "Default", "role": "owner"}]));
        // The quick start creates an agent with the live key: 10.00 USD of live
        // credit covers it; the test balance starts at 100.00 USD.
        assert_eq!(app.get(&live, "/api/v1/billing/balance").await.body["balance_cents"], 1000);
        assert_eq!(app.get(&test, "/api/v1/billing/balance").await.body["balance_cents"], 10_000);
        app.create_agent(&live, json!({"name": "Quick start"})).await;
        assert_eq!(app.get(&live, "/api/v1/billing/balance").await.body["balance_cents"], 950);
    }
}

#[test]
fn commands_refuse_a_missing_sqlite_database_without_create() {
    let dir = std::env::temp_dir().join(format!("parley-cli-{}", uuid()));
    std::fs::create_dir_all(&dir).unwrap();
    // A relative path, as in the default `sqlite://./data/parley.db`.
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_parley"))
            .args(args)
            .args(["--database-url", "sqlite://./data/parley.db"])
            .env("PARLEY_SECRETS__MASTER_KEY", TEST_MASTER_KEY)
            .current_dir(&dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for args in
        [&["workspace", "create", "--name", "Acme"][..], &["key", "revoke", "1"], &["migrate"], &["billing", "verify"]]
    {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(1), "{args:?}");
        let err: Value = serde_json::from_str(err.trim()).unwrap();
        let absolute = dir.join("data/parley.db").canonicalize().unwrap_or(dir.join("./data/parley.db"));
        let message = err["error"].as_str().unwrap();
        assert!(message.contains("there is no database at /"), "{message}");
        assert!(message.contains("parley.db") && message.contains("--create"), "{message}");
        assert!(!absolute.exists(), "{args:?} created the database");
    }
    let (code, out, err) = run(&["workspace", "create", "--name", "Acme", "--create"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("parley_live_"));
    assert!(dir.join("data/parley.db").exists());
    let (code, _, err) = run(&["billing", "verify"]);
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn user_create_reads_the_password_from_stdin_and_prints_json() {
    let database = TestDatabase::sqlite();
    let (_, ws, _) = parley(&["workspace", "create", "--name", "Acme", "--create"], &database.url);
    let wid = ws["workspace"]["id"].to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args([
            "user",
            "create",
            "--email",
            " Ana@Example.com ",
            "--password-stdin",
            "--workspace",
            &wid,
            "--role",
            "admin",
        ])
        .args(["--database-url", &database.url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"correct horse battery\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["user"]["email"], "ana@example.com");
    assert_eq!(v["membership"], json!({"workspace_id": ws["workspace"]["id"], "role": "admin"}));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("correct horse"));
}

#[test]
fn sigterm_lets_an_in_flight_request_finish() {
    let database = TestDatabase::sqlite();
    let mut server = start_server(&database.url);
    let live = key_in(&server.banner, "live").unwrap();
    let body = r#"{"name":"Finished after SIGTERM"}"#;
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A first request on the same connection: once it is answered the
    // server holds the connection (however loaded the machine is), so the
    // SIGTERM below falls on a request it is reading, not on a connection
    // it has yet to accept.
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    read_response(&mut conn);
    let head = format!(
        "POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nX-API-Key: {live}\r\nIdempotency-Key: sig\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(&body.as_bytes()[..5]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    conn.write_all(&body.as_bytes()[5..]).unwrap();
    let response = read_response(&mut conn);
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    assert!(response.contains("Finished after SIGTERM"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(Instant::now() < deadline, "server did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One HTTP/1.1 response read off `conn` (its head and `Content-Length` body).
fn read_response(conn: &mut std::net::TcpStream) -> String {
    let mut reader = BufReader::new(conn);
    let mut response = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return response;
        }
        if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = n.trim().parse().unwrap();
        }
        response.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    response + &String::from_utf8_lossy(&body)
}

/// On PostgreSQL the start warns, once, when autovacuum is off (no table is
/// ever analyzed and plans go stale, docs/operations.md), and says nothing
/// when it is on: the same test holds on either server.
#[tokio::test]
async fn a_postgresql_without_autovacuum_is_named_once_in_the_log_at_start() {
    let database = TestDatabase::postgres().await;
    let pool = sqlx::PgPool::connect(&database.url).await.unwrap();
    let (autovacuum,): (String,) = sqlx::query_as("SHOW autovacuum").fetch_one(&pool).await.unwrap();
    pool.close().await;
    // Migrations, and the check, run before the server answers.
    let server = start_server(&database.url);
    let log = std::fs::read_to_string(&server.log).unwrap_or_default();
    let warnings = log.matches("PostgreSQL runs with autovacuum off").count();
    assert_eq!(warnings, usize::from(autovacuum != "on"), "autovacuum {autovacuum}:\n{log}");
}

#[test]
fn the_turn_models_load_at_start_and_a_missing_one_stops_it() {
    let paths = parley_speech::local_servers::turn_model_paths();
    let (runtime, vad, turn) = (
        paths.onnxruntime.display().to_string(),
        paths.silero_vad.display().to_string(),
        paths.smart_turn.display().to_string(),
    );
    // Configured and loadable: the log says which rule turns end by.
    let database = TestDatabase::sqlite();
    let server = start_server_with(
        &database.url,
        &[
            ("PARLEY_SPEECH__TURN_DETECTION__ONNXRUNTIME", &runtime),
            ("PARLEY_SPEECH__TURN_DETECTION__SILERO_VAD", &vad),
            ("PARLEY_SPEECH__TURN_DETECTION__SMART_TURN", &turn),
        ],
    );
    // The socket is bound before the models load: the line comes shortly after.
    let said = |log: &str| log.contains("turn detection: Silero VAD and Smart Turn v3.2");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut log = String::new();
    while !said(&log) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        log = std::fs::read_to_string(&server.log).unwrap_or_default();
    }
    assert!(said(&log), "{log}");
    drop(server);
    // A configured file that is not there stops start-up, naming it.
    let database = TestDatabase::sqlite();
    let out = Command::new(env!("CARGO_BIN_EXE_parley"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", &database.url])
        .env("PARLEY_SECRETS__MASTER_KEY", TEST_MASTER_KEY)
        .env("PARLEY_SPEECH__TURN_DETECTION__ONNXRUNTIME", &runtime)
        .env("PARLEY_SPEECH__TURN_DETECTION__SILERO_VAD", "/nonexistent/silero_vad.onnx")
        .env("PARLEY_SPEECH__TURN_DETECTION__SMART_TURN", &turn)
        .env("NO_COLOR", "1")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("parley runs");
    assert!(!out.status.success());
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("speech.turn_detection") && said.contains("/nonexistent/silero_vad.onnx"), "{said}");
}
