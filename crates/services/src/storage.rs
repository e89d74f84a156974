//! Object storage for files (message attachments, later call recordings),
//! through `object_store`: the local filesystem by default.
//!
//! Files are never public. A reader gets a URL that expires: on local
//! storage it points at this server's download route (`/files/{key}`),
//! signed with an HMAC of the key, the content type and the expiry under a
//! key derived from the master key, so it cannot be altered or extended.

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

#[derive(Debug, Clone)]
pub struct StorageConfig {
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
    pub fn local(config: StorageConfig, signing_key: [u8; 32]) -> Self {
        let store = std::fs::create_dir_all(&config.path)
            .map_err(|e| e.to_string())
            .and_then(|()| LocalFileSystem::new_with_prefix(&config.path).map_err(|e| e.to_string()))
            .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
            .map_err(|e| format!("{}: {e}", config.path.display()));
        if let Err(e) = &store {
            tracing::error!(error = %e, "object storage is unavailable");
        }
        Self { store, signing_key, config }
    }

    fn store(&self) -> Result<&Arc<dyn ObjectStore>, StorageError> {
        self.store.as_ref().map_err(|e| StorageError::Unavailable(e.clone()))
    }

    pub fn url_ttl(&self) -> Duration {
        self.config.url_ttl
    }

    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), StorageError> {
        self.store()?.put(&ObjectPath::from(key), PutPayload::from_bytes(bytes)).await?;
        Ok(())
    }

    /// The file's size; `NotFound` if it is not there.
    pub async fn size(&self, key: &str) -> Result<u64, StorageError> {
        Ok(self.store()?.head(&ObjectPath::from(key)).await?.size)
    }

    /// A URL for `key` that works until now + the configured lifetime.
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

    /// Fills in the download links of a message's attachments.
    pub fn present(&self, message: &mut parley_domain::conversation::Message) {
        for a in &mut message.attachments {
            let signed = self.signed_url(&a.key, &a.content_type);
            a.url = Some(signed.url);
            a.expires_at = Some(signed.expires_at);
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
