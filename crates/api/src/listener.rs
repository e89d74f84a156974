//! The TCP listener the API is served on.
//!
//! It exists for one reason: requests that hyper cannot parse (a header
//! with a control character such as DEL, an oversized head, a malformed
//! request line) never reach the application. hyper answers them itself
//! with an empty `400`, `414` or `431`. [`JsonErrors`] recognises those
//! automatic answers on their way out and gives them the JSON body of docs/api.md
//! and an `X-Request-Id`, like every other error.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Accepts TCP connections and wraps each in [`JsonErrors`].
pub struct Listener(pub TcpListener);

impl axum::serve::Listener for Listener {
    type Io = JsonErrors<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((stream, addr)) => return (JsonErrors { inner: stream, pending: None, after_read: false }, addr),
                // A connection that failed before we took it concerns only its peer.
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::error!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// The peer's address, as `ConnectInfo<PeerAddr>` in request extensions.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, Listener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, Listener>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}

/// A connection whose automatic (bodiless) error answers from hyper are
/// rewritten as JSON errors.
pub struct JsonErrors<S> {
    inner: S,
    /// A rewritten answer still being written, and how much of it is out.
    pending: Option<(Vec<u8>, usize)>,
    /// Whether the peer sent bytes since the last write. hyper's automatic
    /// answer is the first thing written after the request it could not
    /// parse; a later write (a response body) is never looked at.
    after_read: bool,
}

/// The JSON version of hyper's automatic answer in `head`, if it is one:
/// status 400, 414 or 431, `connection: close`, `content-length: 0` and no
/// `x-request-id` (every answer of the application carries one).
fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    if head.len() > 1024 || !head.starts_with(b"HTTP/1.") || !head.ends_with(b"\r\n\r\n") {
        return None;
    }
    let text = std::str::from_utf8(head).ok()?;
    let status: u16 = text.get(9..12)?.parse().ok()?;
    if !matches!(status, 400 | 414 | 431) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n")
        || !lower.contains("\r\nconnection: close\r\n")
        || lower.contains("\r\nx-request-id:")
    {
        return None;
    }
    let detail = match status {
        400 => {
            "Bad request: the request line or a header could not be parsed (headers may not contain control characters)"
        }
        414 => "URI too long",
        _ => "Request header fields too large",
    };
    let body = serde_json::to_vec(&crate::error::ErrorBody { detail: detail.to_owned() }).ok()?;
    let mut lines = text.trim_end_matches("\r\n").split("\r\n");
    let mut out = String::with_capacity(head.len() + body.len() + 128);
    out.push_str(lines.next()?);
    out.push_str("\r\n");
    for line in lines.filter(|l| !l.to_ascii_lowercase().starts_with("content-length:")) {
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str(&format!(
        "content-type: application/json\r\nx-request-id: {}\r\ncontent-length: {}\r\n\r\n",
        ulid::Ulid::new(),
        body.len()
    ));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&body);
    Some(bytes)
}

impl<S: AsyncWrite + Unpin> JsonErrors<S> {
    /// Writes what is left of a rewritten answer; ready once it is all out.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            if *done == bytes.len() {
                self.pending = None;
                break;
            }
            let n = std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonErrors<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.after_read = true;
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_pending(cx))?;
        if std::mem::take(&mut self.after_read)
            && let Some(replacement) = rewrite(buf)
        {
            // hyper is told its bytes went out; the replacement goes in their
            // place, written by the next write, flush or shutdown.
            self.pending = Some((replacement, 0));
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.poll_pending(cx))?;
        // hyper's automatic answers are a head alone, in one slice.
        if std::mem::take(&mut self.after_read)
            && let [only] = bufs
            && let Some(replacement) = rewrite(only)
        {
            self.pending = Some((replacement, 0));
            return Poll::Ready(Ok(only.len()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_automatic_errors_become_json() {
        let head = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Mon, 23 Nov 2026 06:02:52 GMT\r\n\r\n";
        let out = String::from_utf8(rewrite(head).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n"));
        assert!(head.contains("\r\ncontent-type: application/json\r\n"));
        assert!(head.contains("\r\nx-request-id: "));
        assert!(head.contains("\r\ndate: "));
        assert!(head.ends_with(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(v["detail"].as_str().unwrap().starts_with("Bad request"));
    }

    #[test]
    fn application_answers_pass_unchanged() {
        for head in [
            &b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nx-request-id: 01J\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 20\r\nx-request-id: 1\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            b"{\"detail\": \"HTTP/1.1 400\"}",
        ] {
            assert!(rewrite(head).is_none(), "{}", String::from_utf8_lossy(head));
        }
    }

    #[tokio::test]
    async fn a_slow_peer_gets_the_rewritten_answer_once_and_only_after_a_request() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let head = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        // A 16-byte pipe: every write is partial or waits.
        let (near, mut far) = tokio::io::duplex(16);
        let mut conn = JsonErrors { inner: near, pending: None, after_read: false };
        far.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        let mut request = [0u8; 64];
        let n = conn.read(&mut request).await.unwrap();
        assert!(n > 0);
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            far.read_to_end(&mut out).await.unwrap();
            out
        });
        conn.write_all(head).await.unwrap();
        // A second write is not looked at: it is not the first after a read.
        conn.write_all(head).await.unwrap();
        conn.shutdown().await.unwrap();
        drop(conn);
        let out = String::from_utf8(reader.await.unwrap()).unwrap();
        assert_eq!(out.matches("x-request-id").count(), 1, "{out}");
        assert_eq!(out.matches("HTTP/1.1 400").count(), 2, "{out}");
        assert!(out.ends_with(std::str::from_utf8(head).unwrap()), "{out}");
    }
}
