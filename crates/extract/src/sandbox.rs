//! The parent side of the sandbox: runs a document reader in a child
//! process (`parley extract-document`, [`crate::child`]) so that whatever a
//! parser does — overflow its stack, loop, allocate without end — ends that
//! child, not the server. The child runs with an empty environment (no
//! secrets), limits its own address space and CPU time, and is killed at
//! the wall-clock deadline; at most `concurrency` run at once.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::Semaphore;

use crate::child::{Request, decode};
use crate::{ExtractError, MAX_INFLATED_BYTES, group_digits};

/// How documents are read in child processes.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// The `parley` binary (the running one by default).
    pub program: PathBuf,
    pub max_chars: usize,
    pub time: Duration,
    pub memory_bytes: u64,
    permits: Arc<Semaphore>,
}

/// Bytes of stderr kept to explain a crash.
const STDERR_KEPT: usize = 4096;

impl Sandbox {
    pub fn new(program: PathBuf, max_chars: usize, time: Duration, memory_bytes: u64, concurrency: usize) -> Self {
        Self { program, max_chars, time, memory_bytes, permits: Arc::new(Semaphore::new(concurrency.max(1))) }
    }

    /// The text of a document of `content_type`, read in a child process.
    pub async fn document_text(&self, content_type: &str, bytes: bytes::Bytes) -> Result<String, ExtractError> {
        let _permit = self.permits.acquire().await.map_err(|_| ExtractError::Crashed("shutting down".into()))?;
        let request = Request {
            content_type: content_type.to_owned(),
            max_chars: self.max_chars,
            max_inflated_bytes: MAX_INFLATED_BYTES,
            time: self.time,
            memory_bytes: self.memory_bytes,
        };
        let mut child = Command::new(&self.program)
            .args(request.args())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                ExtractError::Unavailable(format!("could not start the reader {}: {e}", self.program.display()))
            })?;
        let started = std::time::Instant::now();
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        // Text is UTF-8 (up to 4 bytes a character) after a short header.
        let most = (self.max_chars as u64).saturating_mul(4).saturating_add(4096);
        let exchange = async {
            // Fed and drained on their own, so a child that stops reading or
            // keeps writing its errors cannot stall the answer.
            let feed = tokio::spawn(async move {
                // A child that stops reading (it failed early) closes the pipe.
                let _ = stdin.write_all(&bytes).await;
            });
            // All of it is read (a closed pipe would kill a talkative
            // child), the start kept.
            let errors = tokio::spawn(async move {
                let mut errors = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = stderr.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    let room = STDERR_KEPT.saturating_sub(errors.len());
                    errors.extend_from_slice(&chunk[..n.min(room)]);
                }
                errors
            });
            let mut answer = Vec::new();
            let read = (&mut stdout).take(most + 1).read_to_end(&mut answer).await;
            read.map_err(|e| ExtractError::Crashed(format!("could not read the reader's answer: {e}")))?;
            if answer.len() as u64 > most {
                // Still writing: no need to hear the rest.
                let _ = child.start_kill();
                return Err(ExtractError::TooLong { max_chars: self.max_chars });
            }
            let status = child.wait().await.map_err(|e| ExtractError::Crashed(e.to_string()))?;
            feed.abort();
            let errors = errors.await.unwrap_or_default();
            Ok::<_, ExtractError>((status, answer, errors))
        };
        // A little past the child's own deadline: it answers a time-out itself when it can.
        let (status, answer, errors) = match tokio::time::timeout(self.time + Duration::from_secs(2), exchange).await {
            Ok(done) => done?,
            Err(_) => return Err(ExtractError::TimedOut { seconds: self.time.as_secs().max(1) }),
        };
        if status.success() {
            return decode(&answer);
        }
        Err(self.died(status, &String::from_utf8_lossy(&errors), started.elapsed()))
    }

    /// What a child's death says (`ran`: how long it ran).
    fn died(&self, status: std::process::ExitStatus, stderr: &str, ran: Duration) -> ExtractError {
        use std::os::unix::process::ExitStatusExt;
        if stderr.contains("memory allocation of") || stderr.contains("capacity overflow") {
            return ExtractError::TooLarge(format!(
                "reading the document needed more than {} MiB of memory",
                group_digits((self.memory_bytes / (1024 * 1024)) as usize)
            ));
        }
        if stderr.contains("has overflowed its stack") {
            return ExtractError::TooDeep("the document nests too deeply to read".into());
        }
        match status.signal() {
            // RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one
            // (a SIGKILL sooner is the kernel's out-of-memory killer).
            Some(24) => ExtractError::TimedOut { seconds: self.time.as_secs().max(1) },
            Some(9) if ran >= self.time => ExtractError::TimedOut { seconds: self.time.as_secs().max(1) },
            Some(9) => ExtractError::TooLarge("reading the document was stopped by the system (out of memory)".into()),
            Some(signal) => ExtractError::Crashed(format!("the reader stopped with signal {signal}")),
            None => ExtractError::Crashed(format!(
                "the reader exited with status {}{}",
                status.code().unwrap_or(-1),
                stderr.lines().last().map(|l| format!(": {}", crate::cut(l, 300))).unwrap_or_default()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A stand-in reader: a shell script.
    fn script(body: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reader");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (dir, path)
    }

    fn sandbox(program: PathBuf, time: Duration) -> Sandbox {
        Sandbox::new(program, 1000, time, 1 << 30, 2)
    }

    async fn read(s: &Sandbox) -> Result<String, ExtractError> {
        s.document_text("text/plain", bytes::Bytes::from_static(b"hello")).await
    }

    #[tokio::test]
    async fn a_reader_that_crashes_fails_the_document_only() {
        let (_d, p) = script("cat >/dev/null; kill -SEGV $$");
        assert_eq!(
            read(&sandbox(p, Duration::from_secs(5))).await,
            Err(ExtractError::Crashed("the reader stopped with signal 11".into()))
        );
        let (_d, p) = script("cat >/dev/null; echo \"thread 'main' has overflowed its stack\" >&2; kill -ABRT $$");
        assert!(matches!(read(&sandbox(p, Duration::from_secs(5))).await, Err(ExtractError::TooDeep(_))));
        let (_d, p) = script("cat >/dev/null; echo 'memory allocation of 99999999 bytes failed' >&2; kill -ABRT $$");
        let e = read(&sandbox(p, Duration::from_secs(5))).await.unwrap_err();
        assert_eq!(e.to_string(), "reading the document needed more than 1,024 MiB of memory");
    }

    #[tokio::test]
    async fn a_reader_past_its_time_is_killed() {
        let (_d, p) = script("sleep 30");
        let started = std::time::Instant::now();
        assert_eq!(read(&sandbox(p, Duration::from_secs(1))).await, Err(ExtractError::TimedOut { seconds: 1 }));
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn answers_and_oversized_answers() {
        let (_d, p) = script("cat >/dev/null; printf 'ok\\nthe text'");
        assert_eq!(read(&sandbox(p, Duration::from_secs(5))).await, Ok("the text".into()));
        let (_d, p) = script("cat >/dev/null; printf 'ok\\n'; head -c 100000 /dev/zero");
        assert_eq!(read(&sandbox(p, Duration::from_secs(5))).await, Err(ExtractError::TooLong { max_chars: 1000 }));
        let missing = sandbox(PathBuf::from("/nonexistent/parley"), Duration::from_secs(5));
        assert!(matches!(read(&missing).await, Err(ExtractError::Unavailable(_))), "worth another try");
    }
}
