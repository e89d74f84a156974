//! The test harness: a server per test on a fresh database.

use std::net::SocketAddr;

use parley_domain::Mode;
use parley_server::Settings;
use parley_services::billing::BillingConfig;
use parley_services::tenancy::workspaces::{self, NewKey};
use parley_store::Db;
use parley_store::testing::TestDatabase;
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio::sync::oneshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Declares async tests that run on both backends:
/// `both_backends! { async fn name(backend) { … } }` gives `name::sqlite` and `name::postgres`.
macro_rules! both_backends {
    ($(async fn $name:ident($b:ident) $body:block)*) => {
        $(
            mod $name {
                #[allow(unused_imports)]
                use super::*;
                async fn run($b: $crate::support::Backend) $body
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() { run($crate::support::Backend::Sqlite).await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() { run($crate::support::Backend::Postgres).await }
            }
        )*
    };
}

pub async fn fresh_database(backend: Backend) -> TestDatabase {
    match backend {
        Backend::Sqlite => TestDatabase::sqlite(),
        Backend::Postgres => TestDatabase::postgres().await,
    }
}

/// Live credit of workspaces made by `TestApp::workspace`: enough that
/// tests about other things never meet a 402.
pub const TEST_LIVE_CREDIT_CENTS: i64 = 1_000_000;

/// One master key for every test instance, so siblings share JWT keys.
pub const TEST_MASTER_KEY: &str = "dGVzdC1tYXN0ZXIta2V5LWZvci1wYXJsZXktdGVzdHM=";

/// Settings for tests: limits high enough not to interfere.
pub fn test_settings(database_url: &str) -> Settings {
    let mut s = Settings::default();
    s.database_url = database_url.to_owned();
    s.secrets.master_key = Some(TEST_MASTER_KEY.to_owned());
    s.rate_limit.per_second = 1_000_000.0;
    s.rate_limit.burst = 1_000_000;
    s.rate_limit.auth_failures_per_minute = 1_000_000;
    s.shutdown_grace_seconds = 2;
    // Tests deliver webhooks to receivers on 127.0.0.1, fast.
    s.webhooks.allow_private_targets = true;
    s.webhooks.retry_scale = 0.001;
    s.webhooks.poll_interval_ms = 50;
    s.messages.retry_scale = 0.001;
    s.messages.poll_interval_ms = 50;
    // Knowledge documents are read by this build's binary, as in production.
    s.knowledge.reader_program = Some(env!("CARGO_BIN_EXE_parley").to_owned());
    // Each instance its own file store (siblings of one app share theirs).
    s.storage.path =
        std::env::temp_dir().join(format!("parley-test-objects-{}", ulid::Ulid::new())).display().to_string();
    s
}

pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub db: Db,
    pub database_url: String,
    stop: Option<oneshot::Sender<()>>,
    /// The server's task: it ends when the server has stopped.
    served: Option<tokio::task::JoinHandle<()>>,
    /// This instance's file store (removed with it).
    pub storage_path: std::path::PathBuf,
    // Dropped last: the database outlives the server. `None` for a sibling
    // instance serving another app's database.
    _database: Option<TestDatabase>,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> TestApp {
        Self::spawn_with(backend, |_| {}).await
    }

    pub async fn spawn_with(backend: Backend, configure: impl FnOnce(&mut Settings)) -> TestApp {
        let database = fresh_database(backend).await;
        Self::spawn_on(database, configure).await
    }

    /// Serves an existing database (e.g. one a CLI command wrote to).
    pub async fn spawn_on(database: TestDatabase, configure: impl FnOnce(&mut Settings)) -> TestApp {
        let mut app = Self::serve_url(&database.url, configure).await;
        app._database = Some(database);
        app
    }

    /// A server on a database no test owns (a restored copy, say): nothing
    /// is dropped or checked after it.
    pub async fn serving(url: &str) -> TestApp {
        Self::serve_url(url, |_| {}).await
    }

    /// A server on a database no test owns, configured by `configure`.
    pub async fn serving_with(url: &str, configure: impl FnOnce(&mut Settings)) -> TestApp {
        Self::serve_url(url, configure).await
    }

    /// A second instance on this app's database (several instances, one database).
    pub async fn sibling(&self) -> TestApp {
        Self::serve_url(&self.database_url, |_| {}).await
    }

    /// A second instance on this app's database, configured by `configure`.
    pub async fn sibling_with(&self, configure: impl FnOnce(&mut Settings)) -> TestApp {
        Self::serve_url(&self.database_url, configure).await
    }

    async fn serve_url(url: &str, configure: impl FnOnce(&mut Settings)) -> TestApp {
        let mut settings = test_settings(url);
        if std::env::var("PARLEY_TEST_LOG").is_ok() {
            let _ = parley_server::init_logging(&settings);
        }
        configure(&mut settings);
        let db = parley_server::open_database(&settings).await.expect("open test database");
        let storage_path = std::path::PathBuf::from(&settings.storage.path);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let serve_db = db.clone();
        let served = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            parley_server::serve(settings, serve_db, listener, shutdown).await.expect("server runs");
        });
        TestApp {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            db,
            database_url: url.to_owned(),
            stop: Some(stop),
            served: Some(served),
            storage_path,
            _database: None,
        }
    }

    /// Stops the server as SIGTERM would, and waits until it has stopped
    /// (its requests, jobs and calls drained, its database pool closed).
    pub async fn shut_down(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(served) = self.served.take() {
            served.await.expect("the server stopped cleanly");
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A new workspace with a live and a test key, TEST_LIVE_CREDIT_CENTS of
    /// live credit and the default test balance.
    pub async fn workspace(&self, name: &str) -> Ws {
        self.workspace_with_credit(name, TEST_LIVE_CREDIT_CENTS).await
    }

    /// A new workspace whose live balance starts at `live_cents`.
    pub async fn workspace_with_credit(&self, name: &str, live_cents: i64) -> Ws {
        let mut tx = self.db.begin().await.unwrap();
        let created =
            workspaces::create_workspace(&mut tx, name, true, &BillingConfig::default(), live_cents).await.unwrap();
        let test = workspaces::create_key(
            &mut tx,
            NewKey {
                workspace_id: created.workspace.id,
                mode: Mode::Test,
                name: "test".into(),
                workspace_locked: false,
                created_by: None,
                expires_at: None,
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        Ws {
            id: created.workspace.id,
            live: created.live_key.key.expose().to_owned(),
            live_key_id: created.live_key.info.id,
            test: test.key.expose().to_owned(),
        }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut rb = self.client.request(method, self.url(path));
        if let Some(k) = key {
            rb = rb.header("X-API-Key", k);
        }
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        Resp::from(rb.send().await.expect("request sent")).await
    }

    pub async fn get(&self, key: &str, path: &str) -> Resp {
        self.send(Method::GET, path, Some(key), None, &[]).await
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(key), Some(body), &[]).await
    }

    pub async fn post_idem(&self, key: &str, path: &str, idem: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(key), Some(body), &[("Idempotency-Key", idem)]).await
    }

    /// A request with `Authorization: Bearer <token>`.
    pub async fn bearer(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> Resp {
        let auth = format!("Bearer {token}");
        self.send(method, path, None, body, &[("Authorization", &auth)]).await
    }

    /// A user with `role` in `workspace_id`; returns its id.
    pub async fn user(&self, email: &str, password: &str, workspace_id: i64, role: parley_domain::user::Role) -> i64 {
        parley_services::tenancy::identity::create_user(&self.db, email, password, Some((workspace_id, role)))
            .await
            .unwrap()
            .id
    }

    /// Signs in; returns the login response (token in `body.access_token`).
    pub async fn login(&self, email: &str, password: &str) -> Resp {
        self.send(
            Method::POST,
            "/api/v1/auth/login",
            None,
            Some(serde_json::json!({"email": email, "password": password})),
            &[],
        )
        .await
    }

    /// Signs in and returns the access token.
    pub async fn token(&self, email: &str, password: &str) -> String {
        let r = self.login(email, password).await;
        assert_eq!(r.status, 200, "login: {}", r.text);
        r.body["access_token"].as_str().unwrap().to_owned()
    }

    pub async fn patch(&self, key: &str, path: &str, body: Value) -> Resp {
        self.send(Method::PATCH, path, Some(key), Some(body), &[]).await
    }

    pub async fn delete(&self, key: &str, path: &str) -> Resp {
        self.send(Method::DELETE, path, Some(key), None, &[]).await
    }

    /// Creates an agent (with a fresh idempotency key) and returns its JSON.
    pub async fn create_agent(&self, key: &str, body: Value) -> Value {
        let r = self.post_idem(key, "/api/v1/agents", &uuid(), body).await;
        assert_eq!(r.status, 201, "create agent: {}", r.text);
        r.body
    }

    /// Events of `kind` in the store for a scope, newest first.
    pub async fn events(&self, workspace_id: i64, mode: Mode, kind: &str) -> Vec<parley_domain::event::Event> {
        let mut c = self.db.read().await.unwrap();
        parley_store::repo::events::list(&mut c, parley_domain::Scope::new(workspace_id, mode), Some(kind), 1000)
            .await
            .unwrap()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = std::fs::remove_dir_all(&self.storage_path);
        // After every test, on the database it owns: the books must balance.
        if self._database.is_some() && !std::thread::panicking() {
            let url = self.database_url.clone();
            let wrong = std::thread::spawn(move || ledger_discrepancies(&url)).join().expect("ledger check ran");
            assert!(wrong.is_empty(), "after the test, balances disagree with their ledgers: {wrong:?}");
        }
    }
}

/// Why the server refuses to start with `toml` as its configuration file.
pub fn refused_configuration(toml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("parley.toml");
    std::fs::write(&config, toml).unwrap();
    parley_server::Settings::load(Some(&config)).expect_err("the configuration is refused").to_string()
}

/// Accounts whose stored balance or held amount is not the sum of their
/// ledger entries or holds, read on a connection of its own.
pub fn ledger_discrepancies(url: &str) -> Vec<parley_store::repo::billing::Discrepancy> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let db = Db::connect(url, &parley_store::DbOptions::default()).await.expect("connect for the ledger check");
        let mut c = db.read().await.unwrap();
        let wrong = parley_store::repo::billing::discrepancies(&mut c).await.unwrap();
        drop(c);
        db.close().await;
        wrong
    })
}

pub struct Ws {
    pub id: i64,
    pub live: String,
    pub live_key_id: i64,
    pub test: String,
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
    pub body: Value,
}

impl Resp {
    pub async fn from(r: reqwest::Response) -> Resp {
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp { status, headers, text, body }
    }

    /// The value of the refresh cookie this response sets.
    pub fn refresh_cookie(&self) -> Option<String> {
        let set = self.header("set-cookie")?;
        let first = set.split(';').next()?;
        first.strip_prefix("parley_refresh=").map(str::to_owned)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `(loc, type)` pairs of a 422.
    pub fn faults(&self) -> Vec<(String, String)> {
        self.body["detail"]
            .as_array()
            .map(|a| {
                a.iter().map(|e| (e["loc"].to_string(), e["type"].as_str().unwrap_or_default().to_owned())).collect()
            })
            .unwrap_or_default()
    }
}

pub fn uuid() -> String {
    ulid::Ulid::new().to_string()
}
