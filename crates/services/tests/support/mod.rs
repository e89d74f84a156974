//! What the services tests share (each test binary uses some of it).
#![allow(dead_code)]

use std::time::Duration;

use parley_store::Db;

/// Whether a write transaction can be begun on `db` now, waiting up to 3
/// s: false on SQLite while someone else holds its only writer (a caller
/// in a transaction). On PostgreSQL it always can.
pub async fn writable(db: &Db) -> bool {
    match tokio::time::timeout(Duration::from_secs(3), db.begin()).await {
        Ok(Ok(tx)) => {
            drop(tx);
            true
        }
        _ => false,
    }
}

/// A migrated database on `url`.
pub async fn database(url: &str) -> Db {
    let db = Db::connect(url, &parley_store::DbOptions::default()).await.unwrap();
    db.migrate().await.unwrap();
    db
}

/// Services over `db` (as `wire` finishes them) and a new workspace "Acme"
/// with some credit; the scope is its test mode.
pub async fn workspace(
    db: Db,
    wire: impl FnOnce(parley_services::Services) -> parley_services::Services,
) -> (parley_services::Services, parley_domain::Scope) {
    let config = config();
    let svc = wire(parley_services::Services::new(db, config, parley_domain::crypto::SecretBox::new([7; 32])));
    let billing = svc.config().billing.clone();
    let created = svc
        .transaction(async |work| {
            parley_services::tenancy::workspaces::create_workspace(work, "Acme", true, &billing, 10_000).await
        })
        .await
        .unwrap();
    (svc, parley_domain::Scope::new(created.workspace.id, parley_domain::Mode::Test))
}

/// The default configuration, with files (recordings) kept in a scratch
/// directory rather than the source tree.
pub fn config() -> parley_services::ServicesConfig {
    let mut config = parley_services::ServicesConfig::default();
    config.storage.path = std::env::temp_dir().join(format!("parley-services-test-{}", std::process::id()));
    config
}
