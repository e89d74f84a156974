//! The `twilio` telephony provider: a Twilio number carries the call and
//! its audio comes over a Media Streams WebSocket, so no SIP trunk is
//! needed.
//!
//! - Outbound: `POST {base_url}/2010-04-01/Accounts/{sid}/Calls.json` with
//!   TwiML that connects the answered call to Parley's stream
//!   (`<Connect><Stream url="wss://…/hooks/twilio/media">`), a status
//!   callback (`/hooks/twilio/status`: ringing, and busy / no-answer /
//!   failed / canceled before an answer) and the ring timeout.
//! - Inbound: Twilio asks the number's voice webhook (`/hooks/twilio/voice`)
//!   what to do; Parley stores and routes the call, then answers with the
//!   same `<Connect><Stream>` TwiML, or `<Reject>`.
//! - Webhooks are checked against `X-Twilio-Signature` (HMAC-SHA1 over the
//!   URL and the sorted form parameters, keyed by the auth token) before
//!   anything else. The stream itself is matched to its call by a random
//!   one-time token the TwiML passes as a `<Parameter>`.
//! - The stream: Twilio's JSON frames (`connected`, `start`, `media` with
//!   base64 μ-law at 8 kHz, `dtmf`, `mark`, `stop`). Parley sends the
//!   agent's audio as `media` paced at 20 ms (so what has been sent is what
//!   has been heard, give or take Twilio's small buffer), a `mark` when a
//!   stretch of speech has all been sent (Twilio echoes it once played),
//!   and `clear` on barge-in, which drops what Twilio still holds.
//! - Hang-up and transfer update the live call through the REST API
//!   (`Status=completed`; TwiML `<Dial>` to the number or SIP URI). Media
//!   Streams cannot carry DTMF out, so sending digits is refused with a
//!   warning.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use parley_domain::twilio::signature_valid as twilio_signature_valid;

use crate::codec::{ulaw_decode, ulaw_encode};
use crate::provider::{
    Command, Dial, DialError, FarEnd, InboundCall, Outbox, Paced, Pcm, Placed, Provider, ProviderEvent, Refusal,
    Ringing, random_token,
};
use crate::speech::FRAME_SAMPLES;

/// The account and where Twilio reaches Parley.
#[derive(Clone)]
pub struct TwilioSettings {
    /// `AC…`.
    pub account_sid: String,
    /// Keys the REST API's basic auth and the webhook signatures. Secret.
    pub auth_token: String,
    /// The REST API's root (`https://api.twilio.com`; a local server in tests).
    pub base_url: String,
    /// Parley's public root as Twilio reaches it (`https://parley.example.com`):
    /// the webhooks' URLs, and the stream's (`wss://…`).
    pub public_url: String,
    /// The caller id of calls placed without their own `from`.
    pub from: Option<String>,
}

impl std::fmt::Debug for TwilioSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwilioSettings")
            .field("account_sid", &self.account_sid)
            .field("auth_token", &"<secret>")
            .field("base_url", &self.base_url)
            .field("public_url", &self.public_url)
            .field("from", &self.from)
            .finish()
    }
}

/// The routes Twilio calls, under the public URL.
pub const VOICE_HOOK: &str = "/hooks/twilio/voice";
pub const STATUS_HOOK: &str = "/hooks/twilio/status";
pub const MEDIA_STREAM: &str = "/hooks/twilio/media";

/// The `<Parameter>` that names a stream's call.
const STREAM_TOKEN: &str = "parley_stream";
/// How long Twilio has to open the stream once told to.
const STREAM_WAIT: Duration = Duration::from_secs(15);
/// How long Parley takes to decide on an inbound call (Twilio waits 15 s).
const DECISION_WAIT: Duration = Duration::from_secs(10);
/// How long a connected socket has to send its `start` frame.
const START_WAIT: Duration = Duration::from_secs(10);

/// A webhook Twilio sent that Parley does not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// A missing or wrong `X-Twilio-Signature`, or another account's request.
    #[error("the request is not signed by this Twilio account")]
    Unauthorized,
    #[error("{0}")]
    BadRequest(String),
}

/// The Twilio provider: the REST client, and the calls waiting for their
/// stream or their status.
pub struct TwilioProvider {
    settings: TwilioSettings,
    http: reqwest::Client,
    /// Calls told to open a stream, by the stream's token.
    awaiting: Mutex<HashMap<String, oneshot::Sender<Stream>>>,
    /// Placed calls not yet streaming, by CallSid: where their status goes.
    progress: Mutex<HashMap<String, mpsc::Sender<String>>>,
    inbound: mpsc::Sender<InboundCall>,
}

/// A connected media stream: Twilio's frames in, Parley's out.
pub struct Stream {
    stream_sid: String,
    from_twilio: mpsc::Receiver<String>,
    to_twilio: mpsc::Sender<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

/// The value of the form parameter `name`.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

impl TwilioProvider {
    /// The provider, and the inbound calls its voice webhook will receive.
    pub fn new(settings: TwilioSettings) -> Result<(Arc<TwilioProvider>, mpsc::Receiver<InboundCall>), String> {
        if settings.account_sid.is_empty() || settings.auth_token.is_empty() {
            return Err("telephony.twilio needs account_sid and auth_token".into());
        }
        if !(settings.public_url.starts_with("https://") || settings.public_url.starts_with("http://")) {
            return Err("telephony.twilio needs public_url, the http(s) root Twilio reaches Parley at".into());
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| format!("could not build the Twilio client: {e}"))?;
        let (inbound, calls) = mpsc::channel(64);
        let provider =
            TwilioProvider { settings, http, awaiting: Mutex::default(), progress: Mutex::default(), inbound };
        Ok((Arc::new(provider), calls))
    }

    fn public(&self, path: &str) -> String {
        format!("{}{path}", self.settings.public_url.trim_end_matches('/'))
    }

    /// TwiML connecting the call to Parley's stream, which presents `token`.
    fn connect_twiml(&self, token: &str) -> String {
        let root = self.settings.public_url.trim_end_matches('/');
        let ws = match root.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => format!("ws://{}", root.trim_start_matches("http://")),
        };
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Connect><Stream url=\"{}\"><Parameter name=\"{STREAM_TOKEN}\" value=\"{token}\"/></Stream></Connect></Response>",
            xml_escape(&format!("{ws}{MEDIA_STREAM}"))
        )
    }

    /// Checks a webhook: signed by this account's token over the URL Twilio
    /// requested (`path_and_query` under the public URL), and for this account.
    fn authenticate(
        &self,
        path_and_query: &str,
        signature: Option<&str>,
        params: &[(String, String)],
    ) -> Result<(), HookError> {
        let url = self.public(path_and_query);
        let signed = signature.is_some_and(|s| twilio_signature_valid(&self.settings.auth_token, &url, params, s));
        if !signed || param(params, "AccountSid").is_some_and(|a| a != self.settings.account_sid) {
            return Err(HookError::Unauthorized);
        }
        Ok(())
    }

    /// The number's voice webhook: a call is ringing. Answers with the TwiML
    /// that connects its stream, or rejects it (`busy` at the call limit).
    pub async fn incoming_call(
        self: &Arc<Self>,
        path_and_query: &str,
        signature: Option<&str>,
        params: &[(String, String)],
    ) -> Result<String, HookError> {
        self.authenticate(path_and_query, signature, params)?;
        let field = |name: &str| {
            // Signed as sent; stored without NUL (see `without_nul`).
            param(params, name)
                .filter(|v| !v.is_empty())
                .map(parley_domain::validation::without_nul)
                .ok_or_else(|| HookError::BadRequest(format!("the form has no {name}")))
        };
        let (call_sid, from, to) = (field("CallSid")?, field("From")?, field("To")?);
        let (decide, decided) = oneshot::channel();
        let line = TwilioRinging { provider: self.clone(), decide, call_sid: call_sid.clone() };
        // What a repeat of this request is answered: what its first got.
        let taken = self.connect_twiml(&self.stream_token(&call_sid));
        let call = InboundCall::new("twilio", from, to, call_sid, Box::new(line));
        let reject = |reason: &str| {
            format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Reject reason=\"{reason}\"/></Response>")
        };
        if self.inbound.send(call).await.is_err() {
            return Ok(reject("rejected"));
        }
        Ok(match tokio::time::timeout(DECISION_WAIT, decided).await {
            Ok(Ok(Decision::Answer(token))) => self.connect_twiml(&token),
            Ok(Ok(Decision::Refuse(Refusal::Busy))) => reject("busy"),
            // The call this CallSid names is taken: what its first request got.
            Ok(Ok(Decision::Refuse(Refusal::Repeated))) => taken,
            _ => reject("rejected"),
        })
    }

    /// A status callback for a placed call (`ringing`, `busy`, …).
    pub fn call_status(
        &self,
        path_and_query: &str,
        signature: Option<&str>,
        params: &[(String, String)],
    ) -> Result<(), HookError> {
        self.authenticate(path_and_query, signature, params)?;
        let (Some(sid), Some(status)) = (param(params, "CallSid"), param(params, "CallStatus")) else {
            return Err(HookError::BadRequest("the form needs CallSid and CallStatus".into()));
        };
        if let Some(line) = lock(&self.progress).get(sid) {
            let _ = line.try_send(status.to_owned());
        }
        Ok(())
    }

    /// A media stream Twilio opened: its frames until `start`, which names
    /// the call by its token; then the call's media runs over it. Returns
    /// (closing the socket) when no call awaits that token.
    pub async fn stream(&self, mut from_twilio: mpsc::Receiver<String>, to_twilio: mpsc::Sender<String>) {
        let started = tokio::time::timeout(START_WAIT, async {
            while let Some(text) = from_twilio.recv().await {
                let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                if frame["event"] == "start" {
                    return Some(frame);
                }
            }
            None
        })
        .await;
        let Ok(Some(start)) = started else { return };
        let token = start["start"]["customParameters"][STREAM_TOKEN].as_str().unwrap_or_default();
        let stream_sid = start["start"]["streamSid"].as_str().or(start["streamSid"].as_str()).unwrap_or_default();
        let Some(call) = lock(&self.awaiting).remove(token) else {
            tracing::warn!("a Twilio media stream named no call Parley awaits; closing it");
            return;
        };
        let stream = Stream { stream_sid: stream_sid.to_owned(), from_twilio, to_twilio };
        let _ = call.send(stream);
    }

    /// Expects a stream presenting a new token; the receiver gets it.
    fn await_stream(&self) -> (String, oneshot::Receiver<Stream>) {
        self.await_stream_with(random_token())
    }

    fn await_stream_with(&self, token: String) -> (String, oneshot::Receiver<Stream>) {
        let (tx, rx) = oneshot::channel();
        lock(&self.awaiting).insert(token.clone(), tx);
        (token, rx)
    }

    /// An inbound call's stream token: derived from its CallSid with the
    /// auth token, so a repeat of the voice webhook gets the very TwiML the
    /// first request got, from any instance, without it being stored.
    fn stream_token(&self, call_sid: &str) -> String {
        parley_domain::twilio::stream_token(&self.settings.auth_token, call_sid)
    }

    /// `POST …/Calls/{sid}.json` with `form`: ends or redirects a live call.
    async fn update(&self, call_sid: &str, form: &[(&str, &str)]) {
        let url = format!(
            "{}/2010-04-01/Accounts/{}/Calls/{call_sid}.json",
            self.settings.base_url.trim_end_matches('/'),
            self.settings.account_sid
        );
        let sent = self
            .http
            .post(url)
            .basic_auth(&self.settings.account_sid, Some(&self.settings.auth_token))
            .form(form)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                tracing::warn!(call_sid, %status, body, "Twilio refused to update the call")
            }
            Err(e) => tracing::warn!(call_sid, error = %e, "could not reach Twilio to update the call"),
        }
    }

    /// Runs a placed call: ringing until its stream opens (answered) or its
    /// status says it never will.
    async fn ring_out(
        self: Arc<Self>,
        call_sid: String,
        token: String,
        stream: oneshot::Receiver<Stream>,
        mut progress: mpsc::Receiver<String>,
        events: mpsc::Sender<ProviderEvent>,
        mut commands: mpsc::Receiver<Command>,
        ring_timeout: Duration,
    ) {
        // Twilio ends the ringing itself after `Timeout`; this is the backstop.
        let deadline = tokio::time::sleep(ring_timeout + STREAM_WAIT);
        tokio::pin!(deadline, stream);
        let mut rang = false;
        let ended = loop {
            tokio::select! {
                connected = &mut stream => match connected {
                    Ok(stream) => {
                        lock(&self.progress).remove(&call_sid);
                        let _ = events.send(ProviderEvent::Answered).await;
                        break self.talk(&call_sid, stream, &events, &mut commands).await;
                    }
                    Err(_) => break FarEnd::Failed,
                },
                Some(status) = progress.recv() => match status.as_str() {
                    "ringing" if !rang => {
                        rang = true;
                        let _ = events.send(ProviderEvent::Ringing).await;
                    }
                    "busy" => break FarEnd::Busy,
                    "no-answer" | "canceled" => break FarEnd::NoAnswer,
                    "failed" => break FarEnd::Failed,
                    // Answered, but the stream never opened (or ended at once).
                    "completed" => break FarEnd::Failed,
                    _ => {}
                },
                command = commands.recv() => match command {
                    Some(Command::Hangup) | None => {
                        self.update(&call_sid, &[("Status", "canceled")]).await;
                        break FarEnd::HungUp;
                    }
                    Some(_) => {} // nothing to play before the answer
                },
                _ = &mut deadline => {
                    self.update(&call_sid, &[("Status", "canceled")]).await;
                    break FarEnd::NoAnswer;
                }
            }
        };
        lock(&self.progress).remove(&call_sid);
        lock(&self.awaiting).remove(&token);
        let _ = events.send(ProviderEvent::Ended(ended)).await;
    }

    /// The answered call's media, until the stream stops or Parley ends it.
    async fn talk(
        &self,
        call_sid: &str,
        mut stream: Stream,
        events: &mpsc::Sender<ProviderEvent>,
        commands: &mut mpsc::Receiver<Command>,
    ) -> FarEnd {
        let sid = stream.stream_sid.clone();
        let mut outbox = Outbox::default();
        let mut heard: Vec<i16> = Vec::with_capacity(FRAME_SAMPLES * 2);
        let mut clock = tokio::time::interval(Duration::from_millis(20));
        clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let send = |frame: Value| stream.to_twilio.try_send(frame.to_string());
        loop {
            tokio::select! {
                _ = clock.tick() => match outbox.tick() {
                    Some(Paced::Audio(frame)) => {
                        let payload: Vec<u8> = frame.iter().map(|s| ulaw_encode(*s)).collect();
                        let payload = base64::engine::general_purpose::STANDARD.encode(payload);
                        let _ = send(json!({"event": "media", "streamSid": sid, "media": {"payload": payload}}));
                    }
                    Some(Paced::Mark(name)) => {
                        let _ = send(json!({"event": "mark", "streamSid": sid, "mark": {"name": name}}));
                    }
                    None => {}
                },
                text = stream.from_twilio.recv() => {
                    let Some(text) = text else { return FarEnd::HungUp };
                    let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                    match frame["event"].as_str() {
                        Some("media") if frame["media"]["track"].as_str().is_none_or(|t| t.starts_with("inbound")) => {
                            let payload = frame["media"]["payload"].as_str().unwrap_or_default();
                            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(payload) else { continue };
                            heard.extend(bytes.iter().map(|b| ulaw_decode(*b)));
                            // The speech loop takes 20 ms frames.
                            while heard.len() >= FRAME_SAMPLES {
                                let frame: Pcm = heard.drain(..FRAME_SAMPLES).collect();
                                let _ = events.send(ProviderEvent::Audio(frame)).await;
                            }
                        }
                        Some("dtmf") => {
                            if let Some(digit) = frame["dtmf"]["digit"].as_str().and_then(|d| d.chars().next()) {
                                let _ = events.send(ProviderEvent::Dtmf(digit)).await;
                            }
                        }
                        Some("mark") => tracing::trace!(call_sid, mark = %frame["mark"]["name"], "Twilio played up to a mark"),
                        Some("stop") => return FarEnd::HungUp,
                        _ => {}
                    }
                }
                command = commands.recv() => match command {
                    Some(Command::Play(pcm)) => outbox.play(&pcm),
                    Some(Command::StopPlayback) => {
                        outbox.clear();
                        // Twilio drops what it still holds (and echoes its pending marks).
                        let _ = send(json!({"event": "clear", "streamSid": sid}));
                    }
                    Some(Command::SendDtmf(_)) => {
                        tracing::warn!(call_sid, "Twilio media streams cannot send DTMF; the digits were not sent");
                    }
                    Some(Command::Transfer(to)) => {
                        let target = if to.starts_with("sip:") || to.starts_with("sips:") {
                            format!("<Sip>{}</Sip>", xml_escape(&to))
                        } else {
                            format!("<Number>{}</Number>", xml_escape(&to))
                        };
                        let twiml = format!("<Response><Dial>{target}</Dial></Response>");
                        self.update(call_sid, &[("Twiml", twiml.as_str())]).await;
                        return FarEnd::HungUp;
                    }
                    Some(Command::Hangup) | None => {
                        self.update(call_sid, &[("Status", "completed")]).await;
                        return FarEnd::HungUp;
                    }
                },
            }
        }
    }
}

/// What Parley decided about a ringing Twilio call.
enum Decision {
    /// Connect the stream that presents this token.
    Answer(String),
    Refuse(Refusal),
}

/// An inbound Twilio call waiting for the voice webhook's answer.
struct TwilioRinging {
    provider: Arc<TwilioProvider>,
    decide: oneshot::Sender<Decision>,
    call_sid: String,
}

impl Ringing for TwilioRinging {
    /// Tells the webhook to connect the stream, then waits for Twilio to open it.
    fn answer(self: Box<Self>) -> BoxFuture<'static, Result<Placed, DialError>> {
        let TwilioRinging { provider, decide, call_sid } = *self;
        Box::pin(async move {
            let (token, stream) = provider.await_stream_with(provider.stream_token(&call_sid));
            if decide.send(Decision::Answer(token.clone())).is_err() {
                lock(&provider.awaiting).remove(&token);
                return Err(DialError("Twilio stopped waiting for the answer".into()));
            }
            let stream = match tokio::time::timeout(STREAM_WAIT, stream).await {
                Ok(Ok(stream)) => stream,
                _ => {
                    lock(&provider.awaiting).remove(&token);
                    return Err(DialError("Twilio did not open the media stream".into()));
                }
            };
            let (events_tx, events) = mpsc::channel(256);
            let (commands, mut commands_rx) = mpsc::channel(1024);
            let sid = call_sid.clone();
            tokio::spawn(async move {
                let _ = events_tx.send(ProviderEvent::Answered).await;
                let ended = provider.talk(&sid, stream, &events_tx, &mut commands_rx).await;
                let _ = events_tx.send(ProviderEvent::Ended(ended)).await;
            });
            Ok(Placed { provider_call_id: call_sid, events, commands, client_token: None })
        })
    }

    fn refuse(self: Box<Self>, why: Refusal) {
        let _ = self.decide.send(Decision::Refuse(why));
    }
}

/// A provider handle the engine can hold (`Provider` is implemented on the
/// shared provider, which the webhooks also reach).
pub struct Twilio(pub Arc<TwilioProvider>);

impl Provider for Twilio {
    fn name(&self) -> &'static str {
        "twilio"
    }

    fn streams_audio(&self) -> bool {
        true
    }

    fn dial(&self, dial: Dial) -> BoxFuture<'_, Result<Placed, DialError>> {
        let provider = self.0.clone();
        Box::pin(async move {
            let settings = &provider.settings;
            let from =
                dial.from.clone().or_else(|| settings.from.clone()).ok_or_else(|| {
                    DialError("no caller id: give the call a `from` or set telephony.twilio.from".into())
                })?;
            let (token, stream) = provider.await_stream();
            let twiml = provider.connect_twiml(&token);
            let status_url = provider.public(STATUS_HOOK);
            let timeout = dial.ring_timeout.as_secs().clamp(5, 600).to_string();
            let form = [
                ("To", dial.to.as_str()),
                ("From", from.as_str()),
                ("Twiml", twiml.as_str()),
                ("StatusCallback", status_url.as_str()),
                ("StatusCallbackMethod", "POST"),
                ("StatusCallbackEvent", "initiated"),
                ("StatusCallbackEvent", "ringing"),
                ("StatusCallbackEvent", "answered"),
                ("StatusCallbackEvent", "completed"),
                ("Timeout", timeout.as_str()),
            ];
            let url = format!(
                "{}/2010-04-01/Accounts/{}/Calls.json",
                settings.base_url.trim_end_matches('/'),
                settings.account_sid
            );
            let created = provider
                .http
                .post(url)
                .basic_auth(&settings.account_sid, Some(&settings.auth_token))
                .form(&form)
                .send()
                .await;
            let refused = |e: String| {
                lock(&provider.awaiting).remove(&token);
                DialError(e)
            };
            let response = created.map_err(|e| refused(format!("could not reach Twilio: {e}")))?;
            let status = response.status();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if !status.is_success() {
                // Twilio's errors: {"code": 21211, "message": "…", "more_info": "…", "status": 400}.
                let message = body["message"].as_str().unwrap_or("no message");
                return Err(refused(format!("Twilio refused the call ({status}, code {}): {message}", body["code"])));
            }
            let Some(call_sid) = body["sid"].as_str().map(str::to_owned) else {
                return Err(refused("Twilio's answer names no call sid".into()));
            };
            let (progress_tx, progress) = mpsc::channel(16);
            lock(&provider.progress).insert(call_sid.clone(), progress_tx);
            let (events_tx, events) = mpsc::channel(256);
            let (commands, commands_rx) = mpsc::channel(1024);
            tokio::spawn(provider.clone().ring_out(
                call_sid.clone(),
                token,
                stream,
                progress,
                events_tx,
                commands_rx,
                dial.ring_timeout,
            ));
            Ok(Placed { provider_call_id: call_sid, events, commands, client_token: None })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_twiml_follows_the_public_scheme() {
        let settings = TwilioSettings {
            account_sid: "AC1".into(),
            auth_token: "t".into(),
            base_url: "http://127.0.0.1:1".into(),
            public_url: "https://parley.example.com/".into(),
            from: None,
        };
        let (provider, _calls) = TwilioProvider::new(settings).unwrap();
        let twiml = provider.connect_twiml("abc");
        assert!(twiml.contains("<Connect><Stream url=\"wss://parley.example.com/hooks/twilio/media\">"), "{twiml}");
        assert!(twiml.contains("<Parameter name=\"parley_stream\" value=\"abc\"/>"), "{twiml}");
    }
}
