//! One POST to a user-given URL (signed JSON, or a provider's form): the SSRF check on the literal host
//! (the client's resolver checks resolved addresses), Standard Webhooks
//! headers, no redirects, and a bounded read of the reply. Webhook
//! deliveries and outbound channel messages both go through here.

use std::time::Duration;

use parley_domain::Timestamp;

use crate::signing::{WebhookSecret, signature_header};
use crate::ssrf;

/// What the receiver answered.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// The first bytes of the body (lossy UTF-8).
    pub body: String,
    /// `Retry-After` of a 429 or 503.
    pub retry_after: Option<Duration>,
}

impl Reply {
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Why a non-2xx reply failed, in words.
    pub fn error(&self) -> Option<String> {
        (!self.succeeded()).then(|| match self.status {
            300..=399 => format!("HTTP {}: redirects are not followed", self.status),
            s => format!("HTTP {s}"),
        })
    }
}

/// A signed JSON POST.
pub struct SignedPost<'a> {
    pub url: &'a str,
    /// Every secret whose signature to send (one, or two while rotating).
    pub secrets: &'a [WebhookSecret],
    /// `webhook-id`: the same on every attempt, so receivers can deduplicate.
    pub id: &'a str,
    pub body: Vec<u8>,
    /// Sent as `Authorization`, when set.
    pub authorization: Option<&'a str>,
    /// Further headers (an HTTP tool's own).
    pub headers: &'a [(String, String)],
    pub allow_private: bool,
    /// Bytes of the reply body kept.
    pub read_limit: usize,
}

/// Sends `post` with `client` (built by [`ssrf::http_client`]); `Err` says
/// why no reply came (refused target, connection, timeout).
pub async fn send(client: &reqwest::Client, timeout: Duration, post: SignedPost<'_>) -> Result<Reply, String> {
    let url = guarded(post.url, post.allow_private)?;
    let timestamp = Timestamp::now().unix_micros() / 1_000_000;
    let signature = signature_header(post.secrets, post.id, timestamp, &post.body);
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", post.id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature);
    if let Some(auth) = post.authorization {
        request = request.header("authorization", auth);
    }
    for (name, value) in post.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.body(post.body).send().await.map_err(|e| describe(&e, timeout))?;
    reply(response, post.read_limit).await
}

/// A form-encoded POST with basic auth, as REST providers (Twilio) take it.
pub struct FormPost<'a> {
    pub url: &'a str,
    /// User and password of HTTP basic auth.
    pub basic_auth: (&'a str, &'a str),
    pub form: &'a [(&'a str, &'a str)],
    pub allow_private: bool,
    /// Bytes of the reply body kept.
    pub read_limit: usize,
}

/// Sends `post` with `client` (built by [`ssrf::http_client`]), checked
/// against SSRF like [`send`]; `Err` says why no reply came.
pub async fn send_form(client: &reqwest::Client, timeout: Duration, post: FormPost<'_>) -> Result<Reply, String> {
    let url = guarded(post.url, post.allow_private)?;
    let (user, password) = post.basic_auth;
    let request = client.post(url).basic_auth(user, Some(password)).form(post.form);
    let response = request.send().await.map_err(|e| describe(&e, timeout))?;
    reply(response, post.read_limit).await
}

/// A GET with basic auth to a user-given URL (a provider's account
/// resource), checked against SSRF like [`send`].
pub async fn get_with_basic_auth(
    client: &reqwest::Client,
    timeout: Duration,
    url: &str,
    basic_auth: (&str, &str),
    allow_private: bool,
    read_limit: usize,
) -> Result<Reply, String> {
    let url = guarded(url, allow_private)?;
    let response =
        client.get(url).basic_auth(basic_auth.0, Some(basic_auth.1)).send().await.map_err(|e| describe(&e, timeout))?;
    reply(response, read_limit).await
}

/// A JSON POST to a user-given URL (a provider's API), checked against
/// SSRF like [`send`].
pub async fn post_json(
    client: &reqwest::Client,
    timeout: Duration,
    url: &str,
    body: &serde_json::Value,
    allow_private: bool,
    read_limit: usize,
) -> Result<Reply, String> {
    let url = guarded(url, allow_private)?;
    let response = client.post(url).json(body).send().await.map_err(|e| describe(&e, timeout))?;
    reply(response, read_limit).await
}

/// A file fetched whole.
#[derive(Debug, Clone)]
pub struct Download {
    pub status: u16,
    pub content_type: Option<String>,
    pub bytes: Vec<u8>,
}

/// Fetches a file from a user-given URL (a provider's media), checked
/// against SSRF like [`send`], with basic auth when given; a body over
/// `max_bytes` is an error, not a truncated file. Up to three redirects
/// are followed, each target checked again; credentials go only to the
/// first host (Twilio's media answers with a redirect to its storage).
pub async fn download(
    client: &reqwest::Client,
    timeout: Duration,
    url: &str,
    basic_auth: Option<(&str, &str)>,
    allow_private: bool,
    max_bytes: usize,
) -> Result<Download, String> {
    let first = guarded(url, allow_private)?;
    let mut url = first.clone();
    let mut redirects = 0;
    let mut response = loop {
        let mut request = client.get(url.clone());
        if let Some((user, password)) = basic_auth.filter(|_| url.origin() == first.origin()) {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await.map_err(|e| describe(&e, timeout))?;
        let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
        match location {
            Some(location) if response.status().is_redirection() && redirects < 3 => {
                let next = url.join(location).map_err(|_| "the redirect is not a URL".to_owned())?;
                url = guarded(next.as_str(), allow_private)?;
                redirects += 1;
            }
            _ => break response,
        }
    };
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or(v).trim().to_ascii_lowercase());
    if response.content_length().is_some_and(|n| n > max_bytes as u64) {
        return Err(format!("the file is over {max_bytes} bytes"));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e, timeout))? {
        if bytes.len() + chunk.len() > max_bytes {
            return Err(format!("the file is over {max_bytes} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Download { status, content_type, bytes })
}

/// The URL, if it is one Parley may call.
fn guarded(url: &str, allow_private: bool) -> Result<reqwest::Url, String> {
    let url = ssrf::parse_target(url).map_err(|e| format!("invalid URL: {e}"))?;
    ssrf::check_literal_host(&url, allow_private).map_err(|e| format!("refused: {e}"))?;
    Ok(url)
}

async fn reply(response: reqwest::Response, read_limit: usize) -> Result<Reply, String> {
    let status = response.status().as_u16();
    let retry_after = if status == 429 || status == 503 { retry_after(response.headers()) } else { None };
    let body = read_prefix(response, read_limit).await;
    Ok(Reply { status, body, retry_after })
}

fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("timed out after {} s", timeout.as_secs())
    } else if e.is_connect() {
        let mut cause = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            cause = s.to_string();
            source = s.source();
        }
        format!("could not connect: {cause}")
    } else {
        format!("request failed: {e}")
    }
}

/// `Retry-After` in seconds (an HTTP date is treated as "soon"), clamped to a day.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    let secs = v.parse::<u64>().unwrap_or(60);
    Some(Duration::from_secs(secs.clamp(1, 24 * 3600)))
}

/// The first `limit` bytes of the body, without reading the rest.
async fn read_prefix(mut response: reqwest::Response, limit: usize) -> String {
    let mut buf = Vec::new();
    while buf.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk),
            _ => break,
        }
    }
    buf.truncate(limit);
    String::from_utf8_lossy(&buf).into_owned()
}
