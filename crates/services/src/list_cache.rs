//! A cache of serialised list pages (REST responses, MCP tool results), checked for freshness on every
//! request against the scope's change counter in the database
//! (`scope_versions`, read with the API key). A write on any instance bumps the counter in its own
//! transaction, so a cached page is never served after a write has been
//! acknowledged; the cache only saves re-reading and re-serialising an
//! unchanged page.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use bytes::Bytes;
use parley_domain::Scope;

use crate::Snapshot;

#[derive(Hash, PartialEq, Eq, Clone)]
struct Key {
    scope: Scope,
    resource: &'static str,
    query: String,
}

struct Entry {
    version: i64,
    body: Bytes,
    last_used: u64,
}

pub struct ListCache {
    capacity: usize,
    inner: Mutex<(HashMap<Key, Entry>, u64)>,
}

impl ListCache {
    pub fn new(capacity: usize) -> Self {
        Self { capacity, inner: Mutex::new((HashMap::new(), 0)) }
    }

    /// The cached page for `(scope, resource, query)` if the resource has
    /// not changed since it was built; otherwise builds it with `compute`
    /// and keeps it. `query` names the page (the REST query string, or a
    /// tool's arguments in a canonical form).
    ///
    /// `versions` must have been read before any of the data `compute` reads
    /// (the authenticating query reads it): a page built from newer data than
    /// its label is harmless, an older one would be stale.
    pub async fn page<F, Fut, E>(
        &self,
        versions: &Snapshot,
        scope: Scope,
        resource: &'static str,
        query: &str,
        compute: F,
    ) -> Result<Bytes, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<u8>, E>>,
    {
        if self.capacity == 0 {
            return Ok(compute().await?.into());
        }
        let version = versions.get(resource);
        let key = Key { scope, resource, query: query.to_owned() };
        if let Some(body) = self.lookup(&key, version) {
            return Ok(body);
        }
        let body = Bytes::from(compute().await?);
        self.store(key, version, body.clone());
        Ok(body)
    }

    fn lookup(&self, key: &Key, version: i64) -> Option<Bytes> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, tick) = &mut *guard;
        *tick += 1;
        let now = *tick;
        let entry = map.get_mut(key)?;
        if entry.version != version {
            return None;
        }
        entry.last_used = now;
        Some(entry.body.clone())
    }

    fn store(&self, key: Key, version: i64, body: Bytes) {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, tick) = &mut *guard;
        *tick += 1;
        if map.len() >= self.capacity && !map.contains_key(&key) {
            // Evict the least recently used entry; the map is small.
            if let Some(oldest) = map.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(key, Entry { version, body, last_used: *tick });
    }
}
