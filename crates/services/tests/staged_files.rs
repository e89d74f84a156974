//! A message's files, on SQLite and PostgreSQL: written to object storage
//! with no transaction open (an S3 PUT would otherwise hold SQLite's only
//! writer for its round trip), claimed by the message's transaction, and
//! removed when no message comes to name them — at once when the send
//! fails, by housekeeping after a crash.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions,
    PutPayload, PutResult,
};
use parley_domain::Scope;
use parley_services::Services;
use parley_services::files::{Storage, StorageConfig};
use parley_services::messaging::{channels, messages};
use parley_store::Db;
use parley_store::repo::staged_objects;
use parley_store::testing::TestDatabase;
use serde_json::json;

/// The local store, checking at each write that a write transaction can
/// be begun elsewhere meanwhile (so the caller holds none). SQLite is where
/// this bites and where the check can fail (one writer); on PostgreSQL a
/// second transaction always begins.
#[derive(Debug)]
struct Probe {
    inner: LocalFileSystem,
    db: Db,
    writable_during_put: Mutex<Vec<bool>>,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Probe({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Probe {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let free = support::writable(&self.db).await;
        self.writable_during_put.lock().unwrap().push(free);
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        self.inner.delete(location).await
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy(from, to).await
    }
    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        self.inner.copy_if_not_exists(from, to).await
    }
}

struct Setup {
    svc: Services,
    probe: Arc<Probe>,
    scope: Scope,
    channel_id: i64,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            let path = std::env::temp_dir().join(format!("parley-staged-{}", ulid_like()));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn ulid_like() -> String {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        format!("{nanos}-{}", std::process::id())
    }
}

async fn setup(database: &TestDatabase) -> Setup {
    let db = support::database(&database.url).await;
    let dir = tempdir::Dir::new();
    let probe = Arc::new(Probe {
        inner: LocalFileSystem::new_with_prefix(&dir.0).unwrap(),
        db: db.clone(),
        writable_during_put: Mutex::new(Vec::new()),
    });
    let config = StorageConfig { path: dir.0.clone(), ..StorageConfig::default() };
    let storage = Storage::over(probe.clone(), config, [9; 32]);
    let (svc, scope) = support::workspace(db, |svc| svc.with_storage(storage)).await;
    let input = channels::parse_create(
        json!({"type": "api", "name": "Backend", "config": {"url": "https://hooks.example.com/parley"}}),
    )
    .unwrap();
    let channel = svc.transaction(async |work| channels::create(work, &svc, scope, input).await).await.unwrap();
    Setup { svc, probe, scope, channel_id: channel.channel.id, _dir: dir }
}

fn with_file(mut body: serde_json::Value) -> messages::SendMessage {
    body["attachments"] = json!([{"filename": "receipt.txt", "content_type": "text/plain", "data": "aGVsbG8="}]);
    messages::parse_send(body).unwrap()
}

async fn staged(s: &Setup) -> Vec<String> {
    staged_objects::all(&mut s.probe.db.read().await.unwrap()).await.unwrap()
}

async fn a_messages_files_are_written_before_its_transaction_and_claimed_by_it(database: TestDatabase) {
    let s = setup(&database).await;
    let send = with_file(json!({"channel_id": s.channel_id, "to": "customer-1", "text": "Your receipt"}));
    let sent = messages::send_answered(&s.svc, s.scope, None, messages::Sender::Agent, send).await.unwrap();
    assert_eq!(sent.answer.status, 202, "{}", sent.answer.body);
    assert_eq!(*s.probe.writable_during_put.lock().unwrap(), vec![true], "a transaction was open while storing");
    let message: serde_json::Value = serde_json::from_str(&sent.answer.body).unwrap();
    let key = message["attachments"][0]["key"].as_str().map(str::to_owned);
    let url = message["attachments"][0]["url"].as_str().unwrap_or_default().to_owned();
    assert!(url.contains("/files/"), "the file is linked: {message}");
    assert!(staged(&s).await.is_empty(), "the message's transaction claims its files");
    // The file is there, whatever the message's JSON calls it.
    let stored = s.probe.inner.list(None);
    let stored: Vec<_> = futures::StreamExt::collect::<Vec<_>>(stored).await;
    assert_eq!(stored.len(), 1, "{key:?}");
}

async fn a_file_no_message_names_is_removed_at_once_or_by_housekeeping(database: TestDatabase) {
    let s = setup(&database).await;
    // The send fails after its file was stored: the file goes again.
    let send = with_file(json!({"conversation_id": 999_999, "text": "Nobody gets this"}));
    let refused = messages::send_answered(&s.svc, s.scope, None, messages::Sender::Agent, send).await.unwrap_err();
    assert!(matches!(refused, parley_services::ServiceError::NotFound { .. }), "{refused:?}");
    assert_eq!(*s.probe.writable_during_put.lock().unwrap(), vec![true]);
    assert!(staged(&s).await.is_empty());
    let left: Vec<_> = futures::StreamExt::collect::<Vec<_>>(s.probe.inner.list(None)).await;
    assert!(left.is_empty(), "a refused message left its file: {left:?}");

    // A process that died between storing a file and its message left both
    // the file and its staged row: housekeeping removes them after the grace.
    let now = parley_domain::Timestamp::now();
    let mut tx = s.probe.db.begin().await.unwrap();
    staged_objects::stage(&mut tx, "attachments/orphan.txt", now).await.unwrap();
    tx.commit().await.unwrap();
    s.svc.files().put("attachments/orphan.txt", "lost".into(), "text/plain").await.unwrap();
    let young = parley_services::files::sweep_staged(&s.svc, Duration::from_secs(3600), 100).await.unwrap();
    assert_eq!(young, 0, "a file within its grace is left for its transaction");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let swept = parley_services::files::sweep_staged(&s.svc, Duration::from_millis(10), 100).await.unwrap();
    assert_eq!(swept, 1);
    assert!(staged(&s).await.is_empty());
    let left: Vec<_> = futures::StreamExt::collect::<Vec<_>>(s.probe.inner.list(None)).await;
    assert!(left.is_empty(), "the orphan is still stored: {left:?}");
}

parley_store::on_both_backends!(
    a_messages_files_are_written_before_its_transaction_and_claimed_by_it,
    a_file_no_message_names_is_removed_at_once_or_by_housekeeping
);
