//! A local webhook receiver: records what it gets and answers as told.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;

#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// How to answer one request.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub delay: Duration,
    pub body: String,
}

impl Answer {
    pub fn status(status: u16) -> Self {
        Answer { status, headers: Vec::new(), delay: Duration::ZERO, body: "ok".into() }
    }
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// Answers for the next requests, in order; afterwards `default`.
    script: VecDeque<Answer>,
    default: Option<Answer>,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let state: Arc<Mutex<State>> = Arc::default();
        let shared = state.clone();
        let app = axum::Router::new().route(
            "/{*path}",
            post(move |headers: HeaderMap, body: Bytes| {
                let shared = shared.clone();
                async move {
                    let answer = {
                        let mut s = shared.lock().unwrap();
                        s.received.push(Received { headers, body, at: Instant::now() });
                        s.script.pop_front().or_else(|| s.default.clone()).unwrap_or(Answer::status(200))
                    };
                    tokio::time::sleep(answer.delay).await;
                    let mut r = (StatusCode::from_u16(answer.status).unwrap(), answer.body).into_response();
                    for (k, v) in answer.headers {
                        r.headers_mut().insert(k, v.parse().unwrap());
                    }
                    r
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, state }
    }

    /// Answers the next requests with these, in order.
    pub fn script(&self, answers: Vec<Answer>) {
        self.state.lock().unwrap().script.extend(answers);
    }

    /// Answers every request (after the script) with this.
    pub fn always(&self, answer: Answer) {
        self.state.lock().unwrap().default = Some(answer);
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// Waits until at least `n` requests arrived (panics after `timeout`).
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "expected {n} webhook requests, got {}", got.len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
