//! Object storage for files (message attachments, call recordings), through
//! `object_store`: the local filesystem by default, S3 with the `s3` feature.
//!
//! Files are never public. A reader gets a URL that expires: on local
//! storage it points at this server's download route (`/files/{key}`),
//! signed with an HMAC of the key, the content type and the expiry under a
//! key derived from the master key, so it cannot be altered or extended. On
//! S3, recordings' links are presigned URLs; attachments' are always this
//! server's (see [`Storage::present`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, PutPayload};
use parley_domain::Timestamp;
use sha2::Sha256;

/// Where files are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A directory of this server (`path`).
    Local,
    /// An S3 bucket (or an S3-compatible store at `endpoint`); credentials
    /// from the standard `AWS_*` environment variables.
    S3 { bucket: String, region: String, endpoint: Option<String>, allow_http: bool },
}

#[derive(Debug, Clone)]
pub struct StorageConfig {
    pub backend: Backend,
    /// Directory of the local store.
    pub path: PathBuf,
    /// How long a download URL works.
    pub url_ttl: Duration,
    /// Where clients reach this server (`http://host:port`), for URLs.
    pub public_url: String,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            backend: Backend::Local,
            path: PathBuf::from("./data/objects"),
            url_ttl: Duration::from_secs(3600),
            public_url: "http://127.0.0.1:8080".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("no such file")]
    NotFound,
    #[error("storage is unavailable: {0}")]
    Unavailable(String),
}

impl From<StorageError> for crate::ServiceError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::NotFound => crate::ServiceError::not_found("File", "requested"),
            StorageError::Unavailable(why) => {
                crate::ServiceError::Unavailable(format!("Storage is unavailable: {why}"))
            }
        }
    }
}

impl From<object_store::Error> for StorageError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => StorageError::NotFound,
            other => StorageError::Unavailable(other.to_string()),
        }
    }
}

/// A signed, expiring download URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedUrl {
    pub url: String,
    pub expires_at: Timestamp,
}

/// Part of a file, read for a download.
pub struct Download {
    pub bytes: Bytes,
    /// The byte range served, and the file's size.
    pub range: std::ops::Range<u64>,
    pub size: u64,
}

#[derive(Clone)]
pub struct Storage {
    /// `Err` when the store could not be opened: every use is then
    /// `Unavailable` (a 503), never a panic at start.
    store: Result<Arc<dyn ObjectStore>, String>,
    /// The S3 store again, as a URL signer (S3 only).
    #[cfg(feature = "s3")]
    s3: Option<Arc<object_store::aws::AmazonS3>>,
    signing_key: [u8; 32],
    config: StorageConfig,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("path", &self.config.path).finish_non_exhaustive()
    }
}

fn sign(key: &[u8; 32], object_key: &str, content_type: &str, expires: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(format!("{object_key}\n{content_type}\n{expires}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Percent-encodes one path segment of a URL.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Storage {
    /// Storage under `config.path` (created on first write); URLs are signed
    /// with `signing_key`.
    /// Opens the configured backend (see [`Storage::local`] for the local one).
    pub fn open(config: StorageConfig, signing_key: [u8; 32]) -> Self {
        match &config.backend {
            Backend::Local => Self::local(config, signing_key),
            #[cfg(feature = "s3")]
            Backend::S3 { bucket, region, endpoint, allow_http } => {
                let mut builder = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_allow_http(*allow_http);
                if let Some(endpoint) = endpoint {
                    builder = builder.with_endpoint(endpoint);
                }
                let s3 = builder.build().map(Arc::new).map_err(|e| format!("s3://{bucket}: {e}"));
                if let Err(e) = &s3 {
                    tracing::error!(error = %e, "object storage is unavailable");
                }
                Self { store: s3.clone().map(|s| s as Arc<dyn ObjectStore>), s3: s3.ok(), signing_key, config }
            }
            #[cfg(not(feature = "s3"))]
            Backend::S3 { .. } => Self {
                store: Err("this build has no S3 support (the default build has it)".into()),
                signing_key,
                config,
            },
        }
    }

    /// Storage under `config.path` (created if missing); URLs are signed
    /// with `signing_key`.
    pub fn local(config: StorageConfig, signing_key: [u8; 32]) -> Self {
        let store = parley_store::files::create_private_dir(&config.path)
            .map_err(|e| e.to_string())
            .and_then(|()| LocalFileSystem::new_with_prefix(&config.path).map_err(|e| e.to_string()))
            .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
            .map_err(|e| format!("{}: {e}", config.path.display()));
        if let Err(e) = &store {
            tracing::error!(error = %e, "object storage is unavailable");
        }
        Self {
            store,
            #[cfg(feature = "s3")]
            s3: None,
            signing_key,
            config,
        }
    }

    /// Storage over any object store (tests wrap the local one to watch
    /// when it is called); links are this server's signed ones.
    pub fn over(store: Arc<dyn ObjectStore>, config: StorageConfig, signing_key: [u8; 32]) -> Self {
        Self {
            store: Ok(store),
            #[cfg(feature = "s3")]
            s3: None,
            signing_key,
            config,
        }
    }

    fn store(&self) -> Result<&Arc<dyn ObjectStore>, StorageError> {
        self.store.as_ref().map_err(|e| StorageError::Unavailable(e.clone()))
    }

    pub fn url_ttl(&self) -> Duration {
        self.config.url_ttl
    }

    pub async fn put(&self, key: &str, bytes: Bytes, content_type: &str) -> Result<(), StorageError> {
        let mut options = object_store::PutOptions::default();
        // S3 serves the type with presigned downloads; the local store has no
        // attributes (its links carry the type instead).
        if self.config.backend != Backend::Local {
            options.attributes.insert(object_store::Attribute::ContentType, content_type.to_owned().into());
        }
        self.store()?.put_opts(&ObjectPath::from(key), PutPayload::from_bytes(bytes), options).await?;
        if self.config.backend == Backend::Local {
            self.make_private(key).map_err(|e| StorageError::Unavailable(format!("{key}: {e}")))?;
        }
        Ok(())
    }

    /// A private local directory for files written before they are stored
    /// (call recordings, as the call runs).
    pub fn spool(&self) -> std::io::Result<PathBuf> {
        let dir = self.config.path.join(".spool");
        parley_store::files::create_private_dir(&dir)?;
        Ok(dir)
    }

    /// Stores the local file at `path` under `key` without reading it into
    /// memory, and removes the local file: a rename on the local store, a
    /// multipart upload to object storage.
    pub async fn put_file(&self, key: &str, path: &std::path::Path, content_type: &str) -> Result<(), StorageError> {
        let store = self.store()?;
        if self.config.backend == Backend::Local {
            let dest = self.config.path.join(key);
            let moved = async {
                if let Some(parent) = dest.parent() {
                    tokio::fs::create_dir_all(parent).await?;
                }
                tokio::fs::rename(path, &dest).await
            }
            .await;
            moved
                .and_then(|()| self.make_private(key))
                .map_err(|e| StorageError::Unavailable(format!("{key}: {e}")))?;
            return Ok(());
        }
        let mut options = object_store::PutMultipartOptions::default();
        options.attributes.insert(object_store::Attribute::ContentType, content_type.to_owned().into());
        let upload = store.put_multipart_opts(&ObjectPath::from(key), options).await?;
        let mut writer = object_store::WriteMultipart::new(upload);
        let mut file =
            tokio::fs::File::open(path).await.map_err(|e| StorageError::Unavailable(format!("{key}: {e}")))?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut file, &mut buf)
                .await
                .map_err(|e| StorageError::Unavailable(format!("{key}: {e}")))?;
            if n == 0 {
                break;
            }
            writer.write(&buf[..n]);
        }
        writer.finish().await?;
        let _ = tokio::fs::remove_file(path).await;
        Ok(())
    }

    /// Gives a stored file mode 0600 and the directories object_store made
    /// for it mode 0700 (it creates them with the process's defaults).
    fn make_private(&self, key: &str) -> std::io::Result<()> {
        let root = &self.config.path;
        let file = root.join(key);
        parley_store::files::make_private(&file)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mut dir = file.parent();
            while let Some(d) = dir.filter(|d| d.starts_with(root) && *d != root.as_path()) {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
                dir = d.parent();
            }
        }
        Ok(())
    }

    /// The file's size; `NotFound` if it is not there.
    pub async fn size(&self, key: &str) -> Result<u64, StorageError> {
        Ok(self.store()?.head(&ObjectPath::from(key)).await?.size)
    }

    /// A download link for `key` that works until now + the configured
    /// lifetime: this server's signed route, or an S3 presigned URL.
    pub async fn link(&self, key: &str, content_type: &str) -> Result<SignedUrl, StorageError> {
        #[cfg(feature = "s3")]
        if let Some(s3) = &self.s3 {
            use object_store::signer::Signer;
            let url = s3.signed_url(http::Method::GET, &ObjectPath::from(key), self.config.url_ttl).await?;
            let expires_at = Timestamp::now().plus_seconds(self.config.url_ttl.as_secs() as i64);
            return Ok(SignedUrl { url: url.to_string(), expires_at });
        }
        self.store()?;
        Ok(self.signed_url(key, content_type))
    }

    /// A link to this server's download route for `key`.
    pub fn signed_url(&self, key: &str, content_type: &str) -> SignedUrl {
        let expires_at = Timestamp::now().plus_seconds(self.config.url_ttl.as_secs() as i64);
        let expires = expires_at.unix_micros() / 1_000_000;
        // One path segment: the key's slashes are encoded too.
        let url = format!(
            "{}/files/{}?type={}&expires={expires}&signature={}",
            self.config.public_url.trim_end_matches('/'),
            encode_segment(key),
            encode_segment(content_type),
            sign(&self.signing_key, key, content_type, expires)
        );
        SignedUrl { url, expires_at }
    }

    /// Whether a download request's signature and expiry hold.
    pub fn verify(&self, key: &str, content_type: &str, expires: i64, signature: &str) -> Result<(), &'static str> {
        let expected = sign(&self.signing_key, key, content_type, expires);
        // Compare in constant time.
        let same = expected.len() == signature.len()
            && expected.bytes().zip(signature.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if !same {
            return Err("the signature does not match");
        }
        if expires < Timestamp::now().unix_micros() / 1_000_000 {
            return Err("the link has expired");
        }
        Ok(())
    }

    /// Fills in the download links of a message's attachments: this
    /// server's signed links, whatever the backend. They are signed here
    /// with no network call (an S3 presigned link may first fetch
    /// credentials), so a message can be presented inside a transaction (its
    /// event, the answer an idempotency key keeps); the download route reads
    /// the file from whichever store holds it.
    pub fn present(&self, message: &mut parley_domain::conversation::Message) {
        for a in &mut message.attachments {
            let signed = self.signed_url(&a.key, &a.content_type);
            a.url = Some(signed.url);
            a.expires_at = Some(signed.expires_at);
        }
    }

    /// Removes `key`; a missing file is already removed.
    pub async fn delete(&self, key: &str) -> Result<(), StorageError> {
        match self.store()?.delete(&ObjectPath::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads `range` (`None`: all) of `key`.
    pub async fn read(&self, key: &str, range: Option<std::ops::Range<u64>>) -> Result<Download, StorageError> {
        let options = GetOptions { range: range.clone().map(GetRange::Bounded), ..GetOptions::default() };
        let result = self.store()?.get_opts(&ObjectPath::from(key), options).await?;
        let size = result.meta.size;
        let served = result.range.clone();
        let bytes = result.bytes().await?;
        Ok(Download { bytes, range: served, size })
    }
}

#[cfg(all(test, feature = "s3"))]
mod s3_tests {
    use super::*;

    #[tokio::test]
    async fn s3_links_are_presigned_and_expire() {
        // Signing needs no network: an endpoint nobody listens on will do.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
        }
        let config = StorageConfig {
            backend: Backend::S3 {
                bucket: "recordings".into(),
                region: "us-east-1".into(),
                endpoint: Some("http://127.0.0.1:9".into()),
                allow_http: true,
            },
            url_ttl: Duration::from_secs(600),
            ..StorageConfig::default()
        };
        let storage = Storage::open(config, [7; 32]);
        let link = storage.link("recordings/1/live/call_x.wav", "audio/wav").await.unwrap();
        assert!(link.url.starts_with("http://127.0.0.1:9/recordings/recordings/1/live/call_x.wav?"), "{}", link.url);
        for part in ["X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Expires=600", "X-Amz-Signature="] {
            assert!(link.url.contains(part), "{part} in {}", link.url);
        }
        let in_ten = Timestamp::now().plus_seconds(600).unix_micros();
        assert!((link.expires_at.unix_micros() - in_ten).abs() < 5_000_000);
    }
}

// ---- objects written ahead of their transaction ---------------------------
//
// A transaction never waits on object storage (an S3 PUT would hold
// SQLite's only writer for its round trip). Files a row will name are
// written first, each recorded as staged in a short transaction of its own
// before it is written; the transaction that names them claims them. A file
// whose transaction failed or never came is removed at once when the caller
// can, and by housekeeping otherwise (a crash in between).

/// How long a staged object may wait for its transaction before
/// housekeeping takes it for an orphan and removes it.
pub const STAGED_GRACE: Duration = Duration::from_secs(3600);

/// An object to write: its key, bytes and content type.
pub(crate) struct NewObject {
    pub key: String,
    pub bytes: Bytes,
    pub content_type: String,
}

/// Records `objects` as staged, then writes them, with no transaction
/// open. On failure the ones written are removed again.
pub(crate) async fn stage(svc: &crate::Services, objects: Vec<NewObject>) -> crate::ServiceResult<()> {
    if objects.is_empty() {
        return Ok(());
    }
    let now = Timestamp::now();
    svc.transaction(async |work| {
        for object in &objects {
            parley_store::repo::staged_objects::stage(work, &object.key, now).await?;
        }
        Ok(())
    })
    .await?;
    let keys: Vec<String> = objects.iter().map(|o| o.key.clone()).collect();
    for object in objects {
        if let Err(e) = svc.storage.put(&object.key, object.bytes, &object.content_type).await {
            discard(svc, keys).await;
            return Err(e.into());
        }
    }
    Ok(())
}

/// In the transaction whose row names `key`: it is no longer an orphan.
pub(crate) async fn claim(tx: &mut parley_store::Tx, key: &str) -> crate::ServiceResult<()> {
    Ok(parley_store::repo::staged_objects::claim(tx, key).await?)
}

/// Removes staged objects no row will name (their transaction failed, or
/// the request was already answered). Best effort: what is left is swept.
pub(crate) async fn discard(svc: &crate::Services, keys: Vec<String>) {
    for key in keys {
        if let Err(e) = svc.storage.delete(&key).await {
            tracing::warn!(key = %key, error = %e, "could not remove an orphaned file; housekeeping will");
            continue;
        }
        let forgotten =
            svc.transaction(async |work| Ok(parley_store::repo::staged_objects::claim(work, &key).await?)).await;
        if let Err(e) = forgotten {
            tracing::warn!(key = %key, error = %e, "could not forget a removed file");
        }
    }
}

/// Removes objects staged more than `grace` ago that no transaction
/// claimed (a process died between writing a file and its row), up to
/// `limit` of them; how many.
pub async fn sweep_staged(svc: &crate::Services, grace: Duration, limit: i64) -> crate::ServiceResult<usize> {
    let before = Timestamp::now().plus_seconds(-(grace.as_secs() as i64));
    let keys = parley_store::repo::staged_objects::unclaimed_before(&mut svc.db.read().await?, before, limit).await?;
    let n = keys.len();
    discard(svc, keys).await;
    Ok(n)
}
