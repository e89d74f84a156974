//! The `web` transport: a browser talks to the agent over a WebSocket, so
//! trying an agent needs no phone line.
//!
//! - `POST /api/v1/calls {"transport": "web"}` places the call: [`WebCalls`]
//!   mints a single-use token (160 random bits) and the call rings until a
//!   socket presents it, or `ring_timeout` passes (`no_answer`).
//! - The socket (`GET /calls/web`): its first frame is text, within
//!   [`START_WAIT`]: `{"type":"start","token":"…","audio":{"encoding":
//!   "pcm_s16le","sample_rate":16000}}`. The server answers `ready` (the
//!   call is answered) or `error` and closes. The token travels in the
//!   first message, never in a URL, so no proxy log or history keeps it.
//! - Audio: binary frames both ways, PCM 16-bit little-endian mono. Up at
//!   the rate `start` named (8–48 kHz; the browser's AudioWorklet sends
//!   16 kHz), resampled here to the engine's 8 kHz; down at 8 kHz, paced at
//!   20 ms like Twilio's media, so what has been sent is what has been
//!   heard give or take the browser's small jitter buffer.
//! - Control, text frames both ways: `mark` (a stretch of the agent's
//!   speech has all been sent), `clear` (barge-in: drop what is queued),
//!   `dtmf` (a keypad digit from the page), `end` (either side hangs up).
//! - A browser has nowhere to be transferred to: a transfer ends the call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::provider::{
    Command, Dial, DialError, FarEnd, Outbox, Paced, Pcm, Placed, Provider, ProviderEvent, SAMPLE_RATE, random_token,
};
use crate::speech::FRAME_SAMPLES;

/// Where browsers open a web call's socket, under Parley's root.
pub const SOCKET_PATH: &str = "/calls/web";

/// How long a connected socket has to send its `start` frame.
pub const START_WAIT: Duration = Duration::from_secs(10);

/// The sample rates a browser may send (its AudioContext's, or 16 kHz).
const INPUT_RATES: std::ops::RangeInclusive<u32> = 8_000..=48_000;

/// A frame on the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// JSON control.
    Text(String),
    /// PCM 16-bit little-endian mono.
    Audio(Vec<u8>),
}

/// An open socket as the provider sees it: the browser's frames in, ours out.
pub struct Socket {
    pub from_browser: mpsc::Receiver<Frame>,
    pub to_browser: mpsc::Sender<Frame>,
}

/// A socket that has presented its call's token.
struct Connected {
    socket: Socket,
    input_rate: u32,
}

/// The web transport: calls waiting for their browser, by token.
#[derive(Default)]
pub struct WebCalls {
    awaiting: Mutex<HashMap<String, oneshot::Sender<Connected>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a `start` frame is refused (sent as `error` before closing).
fn refusal(frame: &Value) -> Option<&'static str> {
    if frame["type"] != "start" {
        return Some("the first frame must be {\"type\":\"start\",\"token\":…}");
    }
    if !frame["token"].is_string() {
        return Some("start needs the call's token");
    }
    let audio = &frame["audio"];
    if !audio.is_null() && audio["encoding"].as_str().is_some_and(|e| e != "pcm_s16le") {
        return Some("audio.encoding must be pcm_s16le");
    }
    if !audio["sample_rate"].is_null()
        && !audio["sample_rate"].as_u64().is_some_and(|r| INPUT_RATES.contains(&(r.min(u32::MAX as u64) as u32)))
    {
        return Some("audio.sample_rate must be 8000 to 48000");
    }
    None
}

impl WebCalls {
    pub fn new() -> Arc<WebCalls> {
        Arc::new(WebCalls::default())
    }

    /// A socket a browser opened: its `start` frame names the call by its
    /// token, and the call then runs over it. Returns (and the socket
    /// closes) when the frame is late, malformed or names no call waiting.
    pub async fn connect(&self, mut socket: Socket) {
        let first = tokio::time::timeout(START_WAIT, async {
            loop {
                match socket.from_browser.recv().await? {
                    Frame::Text(text) => return Some(text),
                    // Audio before `start` has no call to go to.
                    Frame::Audio(_) => continue,
                }
            }
        })
        .await;
        let Ok(Some(text)) = first else { return };
        let error = |detail: &str| {
            let _ = socket.to_browser.try_send(Frame::Text(json!({"type": "error", "detail": detail}).to_string()));
        };
        let frame: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(why) = refusal(&frame) {
            return error(why);
        }
        let waiting = frame["token"].as_str().and_then(|t| lock(&self.awaiting).remove(t));
        let Some(call) = waiting else {
            return error("the token names no call waiting for its browser (used, expired or unknown)");
        };
        let input_rate = frame["audio"]["sample_rate"].as_u64().map_or(16_000, |r| r as u32);
        if let Err(Connected { socket, .. }) = call.send(Connected { socket, input_rate }) {
            let _ = socket.to_browser.try_send(Frame::Text(
                json!({"type": "error", "detail": "the call ended before its browser connected"}).to_string(),
            ));
        }
    }

    /// Rings until the browser connects, then carries the call.
    async fn ring(
        self: Arc<Self>,
        call_id: String,
        token: String,
        connected: oneshot::Receiver<Connected>,
        events: mpsc::Sender<ProviderEvent>,
        mut commands: mpsc::Receiver<Command>,
        ring_timeout: Duration,
    ) {
        let _ = events.send(ProviderEvent::Ringing).await;
        let deadline = tokio::time::sleep(ring_timeout);
        tokio::pin!(deadline, connected);
        let ended = loop {
            tokio::select! {
                socket = &mut connected => match socket {
                    Ok(Connected { socket, input_rate }) => {
                        let ready = json!({
                            "type": "ready",
                            "call_id": call_id,
                            "input": {"encoding": "pcm_s16le", "sample_rate": input_rate},
                            "output": {"encoding": "pcm_s16le", "sample_rate": SAMPLE_RATE, "frame_ms": 20},
                        });
                        let _ = socket.to_browser.send(Frame::Text(ready.to_string())).await;
                        let _ = events.send(ProviderEvent::Answered).await;
                        break talk(socket, input_rate, &events, &mut commands).await;
                    }
                    Err(_) => break FarEnd::Failed,
                },
                command = commands.recv() => match command {
                    Some(Command::Hangup) | None => break FarEnd::HungUp,
                    Some(_) => {} // nothing to play before the answer
                },
                _ = &mut deadline => break FarEnd::NoAnswer,
            }
        };
        lock(&self.awaiting).remove(&token);
        let _ = events.send(ProviderEvent::Ended(ended)).await;
    }
}

/// The answered call's audio, until the browser leaves or Parley ends it.
async fn talk(
    mut socket: Socket,
    input_rate: u32,
    events: &mpsc::Sender<ProviderEvent>,
    commands: &mut mpsc::Receiver<Command>,
) -> FarEnd {
    let text = |frame: Value| Frame::Text(frame.to_string());
    let mut outbox = Outbox::default();
    let mut resampler = parley_speech::resample::Resampler::new(input_rate, SAMPLE_RATE);
    // An odd byte left over from a frame, and the 8 kHz samples not yet framed.
    let mut odd: Option<u8> = None;
    let mut heard: Vec<i16> = Vec::with_capacity(FRAME_SAMPLES * 2);
    let mut clock = tokio::time::interval(Duration::from_millis(20));
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    loop {
        tokio::select! {
            _ = clock.tick() => match outbox.tick() {
                Some(Paced::Audio(frame)) => {
                    let bytes = frame.iter().flat_map(|s| s.to_le_bytes()).collect();
                    let _ = socket.to_browser.try_send(Frame::Audio(bytes));
                }
                Some(Paced::Mark(name)) => {
                    let _ = socket.to_browser.try_send(text(json!({"type": "mark", "name": name})));
                }
                None => {}
            },
            frame = socket.from_browser.recv() => match frame {
                None => return FarEnd::HungUp,
                Some(Frame::Audio(bytes)) => {
                    let samples = pcm_samples(&mut odd, &bytes);
                    heard.extend(resampler.push(&samples));
                    // The speech loop takes 20 ms frames.
                    while heard.len() >= FRAME_SAMPLES {
                        let frame: Pcm = heard.drain(..FRAME_SAMPLES).collect();
                        let _ = events.send(ProviderEvent::Audio(frame)).await;
                    }
                }
                Some(Frame::Text(t)) => {
                    let Ok(frame) = serde_json::from_str::<Value>(&t) else { continue };
                    match frame["type"].as_str() {
                        Some("dtmf") => {
                            let digit = frame["digit"].as_str().and_then(|d| d.chars().next());
                            if let Some(digit) = digit.filter(|d| d.is_ascii_digit() || "*#ABCD".contains(*d)) {
                                let _ = events.send(ProviderEvent::Dtmf(digit)).await;
                            }
                        }
                        Some("end") => return FarEnd::HungUp,
                        _ => {} // `mark` echoes, and what a later client may add
                    }
                }
            },
            command = commands.recv() => match command {
                Some(Command::Play(pcm)) => outbox.play(&pcm),
                Some(Command::StopPlayback) => {
                    outbox.clear();
                    let _ = socket.to_browser.try_send(text(json!({"type": "clear"})));
                }
                Some(Command::SendDtmf(_)) => tracing::warn!("a web call cannot send DTMF; the digits were not sent"),
                Some(Command::Transfer(to)) => {
                    tracing::warn!(to, "a web call cannot be transferred; it ends instead");
                    let _ = socket.to_browser.send(text(json!({"type": "end", "reason": "transfer_unsupported"}))).await;
                    return FarEnd::HungUp;
                }
                Some(Command::Hangup) | None => {
                    let _ = socket.to_browser.send(text(json!({"type": "end"}))).await;
                    return FarEnd::HungUp;
                }
            },
        }
    }
}

/// Little-endian 16-bit samples from `bytes`, carrying an odd byte over to
/// the next frame (frames need not split on sample boundaries).
fn pcm_samples(odd: &mut Option<u8>, bytes: &[u8]) -> Vec<i16> {
    let mut joined;
    let bytes = match odd.take() {
        Some(first) => {
            joined = Vec::with_capacity(bytes.len() + 1);
            joined.push(first);
            joined.extend_from_slice(bytes);
            &joined[..]
        }
        None => bytes,
    };
    let pairs = bytes.chunks_exact(2);
    *odd = pairs.remainder().first().copied();
    pairs.map(|p| i16::from_le_bytes([p[0], p[1]])).collect()
}

/// A provider handle the engine holds.
pub struct Web(pub Arc<WebCalls>);

impl Provider for Web {
    fn name(&self) -> &'static str {
        "web"
    }

    fn streams_audio(&self) -> bool {
        true
    }

    fn dial(&self, dial: Dial) -> BoxFuture<'_, Result<Placed, DialError>> {
        let calls = self.0.clone();
        Box::pin(async move {
            let token = random_token();
            let (tx, connected) = oneshot::channel();
            lock(&calls.awaiting).insert(token.clone(), tx);
            let (events_tx, events) = mpsc::channel(256);
            let (commands, commands_rx) = mpsc::channel(1024);
            tokio::spawn(calls.clone().ring(
                dial.call_id.clone(),
                token.clone(),
                connected,
                events_tx,
                commands_rx,
                dial.ring_timeout,
            ));
            Ok(Placed {
                provider_call_id: format!("web_{}", dial.call_id.trim_start_matches("call_")),
                events,
                commands,
                client_token: Some(token),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_split_across_frames_are_joined() {
        let mut odd = None;
        let a = pcm_samples(&mut odd, &[0x01, 0x00, 0x34]);
        assert_eq!(a, vec![1]);
        assert_eq!(odd, Some(0x34));
        let b = pcm_samples(&mut odd, &[0x12, 0xff, 0xff]);
        assert_eq!(b, vec![0x1234, -1]);
        assert_eq!(odd, None);
    }

    #[test]
    fn a_start_frame_is_checked_before_any_call_is_looked_up() {
        let ok = json!({"type": "start", "token": "t", "audio": {"encoding": "pcm_s16le", "sample_rate": 16000}});
        assert_eq!(refusal(&ok), None);
        assert_eq!(refusal(&json!({"type": "start", "token": "t"})), None);
        assert!(refusal(&json!({"type": "hello", "token": "t"})).is_some());
        assert!(refusal(&json!({"type": "start"})).is_some());
        assert!(refusal(&json!({"type": "start", "token": "t", "audio": {"encoding": "opus"}})).is_some());
        assert!(refusal(&json!({"type": "start", "token": "t", "audio": {"sample_rate": 96000}})).is_some());
        assert!(refusal(&json!({"type": "start", "token": "t", "audio": {"sample_rate": -1}})).is_some());
    }
}
