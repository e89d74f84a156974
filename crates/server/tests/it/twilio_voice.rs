//! Calls carried by Twilio (`telephony.provider = "twilio"`): a local
//! server speaks Twilio's REST `Calls` resource, and the tests play
//! Twilio's part on the webhooks (signed by the official `twilio` package's
//! `RequestValidator`) and on the Media Streams WebSocket (its documented
//! JSON frames, 20 ms of base64 μ-law at a time, in real time). Whisper
//! tiny.en hears the caller; the agent speaks espeak-ng.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use base64::Engine as _;
use futures::{SinkExt, StreamExt};
use parley_domain::Mode;
use parley_speech::local_servers::{LocalServer, recall, whisper};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Frame;

use crate::calls::{ended, place, wait_for};
use crate::support::*;

const ACCOUNT: &str = "AC0123456789abcdef0123456789abcdef";
const TOKEN: &str = "twilio-auth-token-for-tests";

/// A request Parley sent to the Twilio REST server.
#[derive(Debug, Clone)]
struct Sent {
    path: String,
    authorization: String,
    form: Vec<(String, String)>,
}

impl Sent {
    fn get(&self, name: &str) -> Vec<&str> {
        self.form.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }
}

type Log = Arc<Mutex<Vec<Sent>>>;

/// Twilio's REST API as far as calls use it: create (201 with the call's
/// sid, or Twilio's error document for its invalid test number) and update.
async fn twilio_rest() -> (String, Log) {
    use axum::routing::post;
    async fn record(log: &Log, path: String, headers: &HeaderMap, body: &str) -> Sent {
        let sent = Sent {
            path,
            authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
            form: serde_urlencoded::from_str(body).unwrap(),
        };
        log.lock().unwrap().push(sent.clone());
        sent
    }
    async fn create(
        State(log): State<Log>,
        Path(account): Path<String>,
        headers: HeaderMap,
        body: String,
    ) -> axum::response::Response {
        use axum::response::IntoResponse;
        let sent = record(&log, format!("/2010-04-01/Accounts/{account}/Calls.json"), &headers, &body).await;
        let to = sent.get("To")[0].to_owned();
        if to == "+15005550001" {
            let error = json!({"code": 21211, "message": format!("The 'To' number {to} is not a valid phone number."),
                "more_info": "https://www.twilio.com/docs/errors/21211", "status": 400});
            return (axum::http::StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
        }
        let sid = format!("CA{}", uuid().replace('-', ""));
        let call = json!({"sid": sid, "account_sid": account, "to": to, "from": sent.get("From")[0], "status": "queued", "direction": "outbound-api"});
        (axum::http::StatusCode::CREATED, axum::Json(call)).into_response()
    }
    async fn update(
        State(log): State<Log>,
        Path((account, call)): Path<(String, String)>,
        headers: HeaderMap,
        body: String,
    ) -> axum::Json<Value> {
        record(&log, format!("/2010-04-01/Accounts/{account}/Calls/{call}"), &headers, &body).await;
        axum::Json(json!({"sid": call.trim_end_matches(".json"), "status": "completed"}))
    }
    let log: Log = Arc::default();
    let app = axum::Router::new()
        .route("/2010-04-01/Accounts/{account}/Calls.json", post(create))
        .route("/2010-04-01/Accounts/{account}/Calls/{call}", post(update))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, log)
}

async fn twilio_app(backend: Backend, rest: &str, whisper: &LocalServer) -> TestApp {
    let stt = json!({"kind": "wyoming", "host": "127.0.0.1", "port": whisper.port});
    let rest = rest.to_owned();
    TestApp::spawn_with(backend, move |s| {
        s.telephony.provider = "twilio".into();
        s.telephony.twilio.account_sid = Some(ACCOUNT.into());
        s.telephony.twilio.auth_token = Some(TOKEN.into());
        s.telephony.twilio.base_url = rest;
        s.telephony.twilio.from = Some("+14155550100".into());
        s.speech.stt.insert("whisper".into(), stt);
        s.speech.default_stt = Some("whisper".into());
    })
    .await
}

/// The signature the official `twilio` package computes for a request.
pub(crate) fn official_signature(token: &str, url: &str, params: &[(&str, &str)]) -> String {
    use std::io::Write;
    let script = "import json, sys\nfrom twilio.request_validator import RequestValidator\n\
                  a = json.load(sys.stdin)\nprint(RequestValidator(a['token']).compute_signature(a['url'], a['params']))";
    let input = json!({"token": token, "url": url, "params": params.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()});
    let mut python = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    python.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let out = python.wait_with_output().unwrap();
    assert!(out.status.success(), "the twilio package is installed (pip install twilio)");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Posts a webhook form as Twilio does, with `signature` (None: unsigned).
async fn post_hook(app: &TestApp, path: &str, params: &[(&str, &str)], signature: Option<String>) -> reqwest::Response {
    let mut request = app.client.post(app.url(path)).form(params);
    if let Some(signature) = signature {
        request = request.header("X-Twilio-Signature", signature);
    }
    request.send().await.unwrap()
}

/// Posts a webhook form signed by the official validator.
async fn signed_hook(app: &TestApp, path: &str, params: &[(&str, &str)]) -> reqwest::Response {
    let signature = official_signature(TOKEN, &app.url(path), params);
    post_hook(app, path, params, Some(signature)).await
}

/// The stream URL and its token from `<Connect><Stream>` TwiML.
fn stream_of(twiml: &str) -> (String, String) {
    let attr = |after: &str, name: &str| {
        let from = twiml.find(after).unwrap_or_else(|| panic!("{after} in {twiml}")) + after.len();
        let rest = &twiml[from..];
        let start = rest.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        rest[start..start + rest[start..].find('"').unwrap()].to_owned()
    };
    (attr("<Stream", "url"), attr("<Parameter name=\"parley_stream\"", "value"))
}

/// What Parley sent down a stream, timed from the stream's start.
#[derive(Default, Debug)]
struct Received {
    /// (ms, 20 ms of audio).
    media: Vec<(i64, Vec<i16>)>,
    marks: Vec<(i64, String)>,
    clears: Vec<i64>,
    /// Parley closed the socket (it ended the call).
    closed: bool,
}

impl Received {
    /// Whether the agent's audio is loud in [from, to).
    fn loud_between(&self, from: i64, to: i64) -> bool {
        self.media.iter().any(|(ms, pcm)| *ms >= from && *ms < to && rms(pcm) > 500.0)
    }

    /// The agent was talking when the caller began at `speech_starts`; a
    /// `clear` came within 300 ms, and no agent audio until the caller
    /// stopped at `speech_ends`.
    fn assert_barged_in(&self, speech_starts: i64, speech_ends: i64) {
        assert!(self.loud_between(speech_starts - 1000, speech_starts), "the agent was speaking when the caller began");
        let cleared = *self.clears.first().unwrap_or_else(|| panic!("no clear: {:?}", self.clears));
        eprintln!("barge-in: clear sent {} ms after the caller began", cleared - speech_starts);
        assert!(
            cleared >= speech_starts && cleared - speech_starts <= 300,
            "clear at {cleared} ms, speech from {speech_starts} ms"
        );
        assert!(!self.loud_between(cleared + 40, speech_ends), "the agent is quiet while the caller talks");
    }
}

fn rms(pcm: &[i16]) -> f64 {
    (pcm.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / pcm.len().max(1) as f64).sqrt()
}

/// Plays Twilio on a media stream: `connected` and `start` (naming the call
/// by its token), then `caller` as 20 ms `media` frames in real time, each
/// key in `keys` as a `dtmf` frame at its time, then `stop` (the caller
/// hangs up). Returns early if Parley closes the stream.
async fn stream_as_twilio(url: &str, token: &str, call_sid: &str, caller: &[i16], keys: &[(i64, char)]) -> Received {
    let (socket, _) = tokio_tungstenite::connect_async(url).await.expect("the stream connects");
    let (mut out, mut incoming) = socket.split();
    let stream_sid = format!("MZ{}", uuid().replace('-', ""));
    let send = |v: Value| Frame::Text(v.to_string().into());
    out.send(send(json!({"event": "connected", "protocol": "Call", "version": "1.0.0"}))).await.unwrap();
    out.send(send(json!({"event": "start", "sequenceNumber": "1", "streamSid": stream_sid, "start": {
        "accountSid": ACCOUNT, "streamSid": stream_sid, "callSid": call_sid, "tracks": ["inbound"],
        "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        "customParameters": {"parley_stream": token}}})))
        .await
        .unwrap();
    let began = Instant::now();
    let mut received = Received::default();
    let mut clock = tokio::time::interval(Duration::from_millis(20));
    let frames: Vec<&[i16]> = caller.chunks(160).collect();
    let (mut next, mut sequence) = (0usize, 2u64);
    loop {
        tokio::select! {
            _ = clock.tick() => {
                let ms = next as i64 * 20;
                for (_, digit) in keys.iter().filter(|(at, _)| *at == ms) {
                    sequence += 1;
                    let dtmf = json!({"event": "dtmf", "streamSid": stream_sid, "sequenceNumber": sequence.to_string(),
                        "dtmf": {"track": "inbound_track", "digit": digit.to_string()}});
                    if out.send(send(dtmf)).await.is_err() {
                        received.closed = true;
                        return received;
                    }
                }
                let Some(frame) = frames.get(next) else { break };
                let payload: Vec<u8> = frame.iter().map(|s| parley_voice::codec::ulaw_encode(*s)).collect();
                sequence += 1;
                let media = json!({"event": "media", "sequenceNumber": sequence.to_string(), "streamSid": stream_sid,
                    "media": {"track": "inbound", "chunk": (next + 1).to_string(), "timestamp": ms.to_string(),
                              "payload": base64::engine::general_purpose::STANDARD.encode(payload)}});
                // A socket Parley closed ends the stream (read on the next turn).
                let _ = out.send(send(media)).await;
                next += 1;
            }
            frame = incoming.next() => {
                let ms = began.elapsed().as_millis() as i64;
                match frame {
                    Some(Ok(Frame::Text(text))) => {
                        let v: Value = serde_json::from_str(&text).unwrap();
                        assert_eq!(v["streamSid"], json!(stream_sid), "every frame names the stream: {v}");
                        match v["event"].as_str().unwrap() {
                            "media" => {
                                let bytes = base64::engine::general_purpose::STANDARD.decode(v["media"]["payload"].as_str().unwrap()).unwrap();
                                received.media.push((ms, bytes.iter().map(|b| parley_voice::codec::ulaw_decode(*b)).collect()));
                            }
                            "mark" => received.marks.push((ms, v["mark"]["name"].as_str().unwrap().to_owned())),
                            "clear" => received.clears.push(ms),
                            other => panic!("Parley sent a {other} frame: {v}"),
                        }
                    }
                    Some(Ok(Frame::Close(_))) | None | Some(Err(_)) => {
                        received.closed = true;
                        return received;
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
    }
    let stop = json!({"event": "stop", "sequenceNumber": (sequence + 1).to_string(), "streamSid": stream_sid,
        "stop": {"accountSid": ACCOUNT, "callSid": call_sid}});
    let _ = out.send(send(stop)).await;
    let _ = out.close().await;
    received
}

fn silence(ms: usize) -> Vec<i16> {
    vec![0; ms * 8]
}

async fn transcript(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    app.get(key, &format!("/api/v1/calls/{id}/transcript")).await.body["segments"].as_array().unwrap().clone()
}

both_backends! {
    async fn a_call_placed_through_twilio_streams_its_audio_and_a_barge_in_clears_twilios_buffer(backend) {
        let stt = whisper();
        let (rest, sent) = twilio_rest().await;
        let app = twilio_app(backend, &rest, &stt).await;
        let ws = app.workspace("Voice").await;
        let greeting = "Thanks for calling Parley, the self hosted platform for voice and chat agents. \
                        We can help you with bookings, orders, returns and anything else you need today.";
        let agent = app.create_agent(&ws.live, json!({"name": "Ada", "first_message": greeting, "first_message_mode": "interruptible", "interruption_threshold_ms": 200})).await;

        // Twilio refuses a number: its error reaches the caller (502) and nothing rings.
        let r = place(&app, &ws.live, json!({"agent_id": agent["id"], "to": "+15005550001"})).await;
        assert_eq!(r.status, 502, "{}", r.text);
        assert!(r.text.contains("21211") && r.text.contains("not a valid phone number"), "{}", r.text);

        let r = place(&app, &ws.live, json!({"agent_id": agent["id"], "to": "+14155550123"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["provider"], "twilio");
        let id = r.body["id"].as_str().unwrap().to_owned();
        // The Calls resource was asked to call, with TwiML that connects the stream.
        let created = sent.lock().unwrap().iter().rev().find(|s| s.path.ends_with("/Calls.json")).unwrap().clone();
        assert_eq!(created.path, format!("/2010-04-01/Accounts/{ACCOUNT}/Calls.json"));
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT}:{TOKEN}"));
        assert_eq!(created.authorization, format!("Basic {basic}"));
        assert_eq!((created.get("To"), created.get("From")), (vec!["+14155550123"], vec!["+14155550100"]));
        assert_eq!(created.get("StatusCallback"), vec![app.url("/hooks/twilio/status")]);
        assert_eq!(created.get("StatusCallbackEvent"), vec!["initiated", "ringing", "answered", "completed"]);
        assert_eq!(created.get("Timeout"), vec!["30"]);
        let (stream_url, token) = stream_of(created.get("Twiml")[0]);
        assert_eq!(stream_url, app.url("/hooks/twilio/media").replace("http://", "ws://"));
        let call = app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body;
        let call_sid = call["provider_call_id"].as_str().unwrap().to_owned();
        assert!(call_sid.starts_with("CA"), "{call}");

        // Status callbacks: an unsigned or forged one is refused and changes nothing; Twilio's moves the call to ringing.
        let ringing = [("AccountSid", ACCOUNT), ("CallSid", call_sid.as_str()), ("CallStatus", "ringing"), ("Direction", "outbound-api")];
        assert_eq!(post_hook(&app, "/hooks/twilio/status", &ringing, None).await.status(), 401);
        let forged = parley_domain::twilio::signature("another-token", &app.url("/hooks/twilio/status"), &ringing.map(|(k, v)| (k.to_owned(), v.to_owned())));
        assert_eq!(post_hook(&app, "/hooks/twilio/status", &ringing, Some(forged)).await.status(), 401);
        assert_eq!(app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body["status"], "queued");
        assert_eq!(signed_hook(&app, "/hooks/twilio/status", &ringing).await.status(), 204);
        wait_for(&app, &ws.live, &id, |c| c["status"] == "ringing").await;

        // A stream naming no awaited call is closed at once.
        let stray = stream_as_twilio(&stream_url, "not-a-token", &call_sid, &silence(3000), &[]).await;
        assert!(stray.closed && stray.media.is_empty(), "{stray:?}");

        // Answered: Twilio opens the stream. The caller listens 3 s, talks over the greeting, then waits for the answer.
        let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
        let said = "hello, I would like to know where my order is, please call me back tomorrow morning";
        let words = parley_speech::synthesise(&espeak, said).await;
        let mut caller = silence(3000);
        caller.extend_from_slice(&words);
        caller.extend(silence(8000));
        let speech_starts = caller.chunks(160).position(|f| rms(f) > 300.0).unwrap() as i64 * 20;
        let speech_ends = 3000 + (words.len() / 8) as i64;
        let heard = stream_as_twilio(&stream_url, &token, &call_sid, &caller, &[]).await;
        assert!(!heard.closed, "the caller hung up, not Parley");
        heard.assert_barged_in(speech_starts, speech_ends);
        // The agent answered once the caller stopped, and marked the end of its answer.
        assert!(heard.loud_between(speech_ends, speech_ends + 8000), "the agent answered");
        let answered_at = heard.media.iter().find(|(ms, pcm)| *ms > speech_ends && rms(pcm) > 500.0).unwrap().0;
        assert!(heard.marks.iter().any(|(ms, _)| *ms > answered_at), "a mark follows the answer: {:?}", heard.marks);

        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!((call["status"].clone(), call["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")), "{call}");
        let segments = transcript(&app, &ws.live, &id).await;
        let first = &segments[0];
        assert_eq!((first["speaker"].clone(), first["interrupted"].clone()), (json!("agent"), json!(true)), "{segments:#?}");
        let kept = first["text"].as_str().unwrap();
        assert!(greeting.starts_with(kept) && kept.len() < greeting.len() / 2, "trimmed to the words played: {kept:?}");
        let heard_text = segments.iter().find(|s| s["speaker"] == "caller").expect("the caller was heard")["text"].as_str().unwrap().to_owned();
        assert!(recall(said, &heard_text) >= 0.9, "whisper heard {heard_text:?} for {said:?}");
        assert!(segments.last().unwrap()["speaker"] == "agent" && segments.last().unwrap()["latency"].is_object(), "{segments:#?}");
        // The caller hung up (Twilio's stop), so Parley had nothing to end through the REST API.
        assert!(!sent.lock().unwrap().iter().any(|s| s.path.contains(&call_sid)), "{:?}", sent.lock().unwrap());
    }

    async fn a_call_to_a_twilio_number_is_signature_checked_routed_and_hears_keys(backend) {
        let stt = whisper();
        let (rest, sent) = twilio_rest().await;
        let app = twilio_app(backend, &rest, &stt).await;
        let ws = app.workspace("Voice").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "Main line", "config": {"number": "+14155550100"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let channel_id = r.body["id"].clone();
        let greeting = "Support, hello. Thanks for calling Parley, the self hosted platform for voice and chat agents. \
                        We can help you with bookings, orders, returns and anything else you need today.";
        let agent = app.create_agent(&ws.live, json!({"name": "Support", "first_message": greeting,
            "first_message_mode": "interruptible", "interruption_threshold_ms": 200, "silence_hangup_s": 4})).await;
        let t = app.post(&ws.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "call.inbound", "channel": "voice"})).await;
        assert_eq!(t.status, 201, "{}", t.text);

        let call_sid = format!("CA{}", uuid().replace('-', ""));
        let ringing = [("AccountSid", ACCOUNT), ("CallSid", call_sid.as_str()), ("From", "+14155550123"), ("To", "+14155550100"),
                       ("CallStatus", "ringing"), ("Direction", "inbound"), ("ApiVersion", "2010-04-01")];
        // Unsigned, wrongly signed, or another account's: 401, and nothing is stored.
        assert_eq!(post_hook(&app, "/hooks/twilio/voice", &ringing, None).await.status(), 401);
        assert_eq!(post_hook(&app, "/hooks/twilio/voice", &ringing, Some("c2lnbmF0dXJl".into())).await.status(), 401);
        let mut foreign = ringing;
        foreign[0].1 = "AC99999999999999999999999999999999";
        assert_eq!(signed_hook(&app, "/hooks/twilio/voice", &foreign).await.status(), 401);
        assert_eq!(app.get(&ws.live, "/api/v1/calls").await.body["total"], 0);
        // A number no channel has is rejected in TwiML.
        let mut unknown = ringing;
        unknown[3].1 = "+19995550000";
        let r = signed_hook(&app, "/hooks/twilio/voice", &unknown).await;
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().contains("<Reject reason=\"rejected\"/>"));
        assert_eq!(app.get(&ws.live, "/api/v1/calls").await.body["total"], 0);

        // Twilio's: the call is stored, routed, and connected to the stream.
        let r = signed_hook(&app, "/hooks/twilio/voice", &ringing).await;
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/xml"));
        let twiml = r.text().await.unwrap();
        assert!(twiml.starts_with("<?xml") && twiml.contains("<Response><Connect><Stream url="), "{twiml}");
        let (url, token) = stream_of(&twiml);
        // The caller listens 2 s, talks over the greeting, presses 4 and #
        // at 9 s, then stays silent until the agent hangs up (silence_hangup_s).
        let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
        let words = parley_speech::synthesise(&espeak, "wait, I have a question about my order").await;
        let mut caller = silence(2000);
        caller.extend_from_slice(&words);
        caller.resize(30_000 * 8, 0);
        let speech_starts = caller.chunks(160).position(|f| rms(f) > 300.0).unwrap() as i64 * 20;
        let speech_ends = 2000 + (words.len() / 8) as i64;
        let heard = stream_as_twilio(&url, &token, &call_sid, &caller, &[(9000, '4'), (9200, '#')]).await;
        heard.assert_barged_in(speech_starts, speech_ends);
        assert!(heard.closed, "the agent ended the call after the caller's silence");

        let list = app.get(&ws.live, "/api/v1/calls?direction=inbound").await.body;
        assert_eq!(list["total"], 1, "{list}");
        let id = list["items"][0]["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!((call["provider"].clone(), call["provider_call_id"].clone()), (json!("twilio"), json!(call_sid)));
        assert_eq!((call["from"].clone(), call["to"].clone(), call["channel_id"].clone()), (json!("+14155550123"), json!("+14155550100"), channel_id));
        assert_eq!((call["agent_id"].clone(), call["ended_reason"].clone()), (agent["id"].clone(), json!("agent_hangup")), "{call}");
        let segments = transcript(&app, &ws.live, &id).await;
        assert_eq!((segments[0]["speaker"].clone(), segments[0]["interrupted"].clone()), (json!("agent"), json!(true)), "{segments:#?}");
        assert!(segments[0]["text"].as_str().unwrap().starts_with("Support, hello."), "{segments:#?}");
        let keys = segments.iter().position(|s| s["text"] == "[pressed 4#]").unwrap_or_else(|| panic!("{segments:#?}"));
        assert!(segments[keys + 1..].iter().any(|s| s["speaker"] == "agent"), "the agent answered the keys: {segments:#?}");
        // Parley ended the call through the REST API.
        let ended_by = sent.lock().unwrap().iter().find(|s| s.path.contains(&call_sid)).cloned().expect("a Calls update");
        assert_eq!(ended_by.get("Status"), vec!["completed"]);
        assert_eq!(app.events(ws.id, Mode::Live, "call.completed").await.len(), 1);
    }
}

both_backends! {
    // Issue 31: replaying one signed voice webhook queued a call each time
    // (each holding a minute of balance and a slot, until a real caller
    // was turned away busy). A repeated CallSid is the call already taken,
    // answered with the same TwiML, on any instance.
    async fn a_replayed_voice_webhook_is_the_same_call_answered_with_the_same_twiml(backend) {
        let (rest, _) = twilio_rest().await;
        let configure = move |s: &mut parley_server::Settings| {
            s.telephony.provider = "twilio".into();
            s.telephony.twilio.account_sid = Some(ACCOUNT.into());
            s.telephony.twilio.auth_token = Some(TOKEN.into());
            s.telephony.twilio.base_url = rest.clone();
            s.voice.max_concurrent_calls = 3;
            // Behind one load balancer: Twilio signs the URL it calls.
            s.public_url = Some("https://parley.test".into());
        };
        let app = TestApp::spawn_with(backend, configure.clone()).await;
        let sibling = app.sibling_with(configure).await;
        let ws = app.workspace("Voice").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "Main line", "config": {"number": "+14155550100"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let agent = app.create_agent(&ws.live, json!({"name": "Support"})).await;
        app.post(&ws.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "call.inbound", "channel": "voice"})).await;
        let balance = app.get(&ws.live, "/api/v1/billing/balance").await.body;

        let call_sid = format!("CA{}", uuid().replace('-', ""));
        let ringing = [("AccountSid", ACCOUNT), ("CallSid", call_sid.as_str()), ("From", "+14155550123"),
                       ("To", "+14155550100"), ("CallStatus", "ringing"), ("Direction", "inbound"), ("ApiVersion", "2010-04-01")];
        let signature = official_signature(TOKEN, "https://parley.test/hooks/twilio/voice", &ringing);
        // Six at once, then six more, half of them at another instance.
        let mut answers = Vec::new();
        for round in 0..2 {
            let posts = (0..6).map(|n| {
                let target = if (n + round) % 2 == 0 { &app } else { &sibling };
                let (path, params, signature) = (target.url("/hooks/twilio/voice"), &ringing, signature.clone());
                async move {
                    let r = target.client.post(path).form(params).header("X-Twilio-Signature", signature).send().await.unwrap();
                    assert_eq!(r.status(), 200);
                    r.text().await.unwrap()
                }
            });
            answers.extend(futures::future::join_all(posts).await);
        }
        assert!(answers[0].contains("<Connect><Stream"), "{}", answers[0]);
        assert!(answers.iter().all(|a| *a == answers[0]), "every repeat gets the first answer: {answers:#?}");
        let calls = app.get(&ws.live, "/api/v1/calls?direction=inbound").await.body;
        assert_eq!(calls["total"], 1, "one CallSid, one call: {calls}");
        let held = app.get(&ws.live, "/api/v1/billing/balance").await.body;
        assert_eq!(held["balance_cents"], balance["balance_cents"]);

        // A real new caller is not turned away.
        let other_sid = format!("CA{}", uuid().replace('-', ""));
        let mut next = ringing;
        next[1].1 = other_sid.as_str();
        let signature = official_signature(TOKEN, "https://parley.test/hooks/twilio/voice", &next);
        let r = post_hook(&app, "/hooks/twilio/voice", &next, Some(signature)).await;
        let twiml = r.text().await.unwrap();
        assert!(twiml.contains("<Connect><Stream"), "{twiml}");
        assert_ne!(stream_of(&twiml).1, stream_of(&answers[0]).1, "each call its own stream token");
    }
}
