//! Web calls (`transport: web`): a browser talks to the agent over a
//! WebSocket. The tests play the browser's part as the dashboard's
//! AudioWorklet does: a `start` frame with the single-use token, then 20 ms
//! binary frames of 16 kHz PCM in real time, reading back the agent's 8 kHz
//! frames and its `mark`, `clear` and `end` control frames. Whisper tiny.en
//! hears the caller; the agent speaks espeak-ng.

use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use parley_speech::local_servers::{LocalServer, recall, whisper};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Frame;

use crate::calls::{ended, place, wait_for};
use crate::support::*;

/// A server whose calls hear with `whisper`.
pub(crate) async fn web_app(backend: Backend, whisper: &LocalServer) -> TestApp {
    let stt = json!({"kind": "wyoming", "host": "127.0.0.1", "port": whisper.port});
    TestApp::spawn_with(backend, move |s| {
        s.speech.stt.insert("whisper".into(), stt);
        s.speech.default_stt = Some("whisper".into());
    })
    .await
}

/// What the server sent down a web call's socket, timed from `ready`.
#[derive(Default, Debug)]
struct Heard {
    ready: Option<Value>,
    /// (ms, 20 ms of 8 kHz audio).
    audio: Vec<(i64, Vec<i16>)>,
    marks: Vec<i64>,
    clears: Vec<i64>,
    /// Text frames other than the above (`error`, `end`).
    other: Vec<Value>,
    closed: bool,
}

impl Heard {
    fn loud_between(&self, from: i64, to: i64) -> bool {
        self.audio.iter().any(|(ms, pcm)| *ms >= from && *ms < to && rms(pcm) > 500.0)
    }
}

fn rms(pcm: &[i16]) -> f64 {
    (pcm.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / pcm.len().max(1) as f64).sqrt()
}

fn socket_url(app: &TestApp, path: &str) -> String {
    app.url(path).replace("http://", "ws://")
}

/// Plays the browser: `start` (whatever `start` is), then `caller` (16 kHz)
/// as 640-byte frames every 20 ms, then `end` unless the server ended the
/// call first. Returns when the socket closes or the audio is all sent.
async fn talk_as_browser(url: &str, start: Value, caller: &[i16]) -> Heard {
    let (socket, _) = tokio_tungstenite::connect_async(url).await.expect("the socket connects");
    let (mut out, mut incoming) = socket.split();
    out.send(Frame::Text(start.to_string().into())).await.unwrap();
    let mut heard = Heard::default();
    let mut began = Instant::now();
    let frames: Vec<Vec<u8>> = caller.chunks(320).map(|f| f.iter().flat_map(|s| s.to_le_bytes()).collect()).collect();
    let mut next = 0;
    let mut clock = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            _ = clock.tick(), if heard.ready.is_some() => {
                let Some(frame) = frames.get(next) else { break };
                let _ = out.send(Frame::Binary(frame.clone().into())).await;
                next += 1;
            }
            frame = incoming.next() => {
                let ms = began.elapsed().as_millis() as i64;
                match frame {
                    Some(Ok(Frame::Binary(bytes))) => {
                        assert_eq!(bytes.len(), 320, "20 ms of 8 kHz PCM16 per frame");
                        heard.audio.push((ms, bytes.chunks_exact(2).map(|p| i16::from_le_bytes([p[0], p[1]])).collect()));
                    }
                    Some(Ok(Frame::Text(text))) => {
                        let v: Value = serde_json::from_str(&text).unwrap();
                        match v["type"].as_str().unwrap() {
                            "ready" => {
                                began = Instant::now();
                                heard.ready = Some(v);
                            }
                            "mark" => heard.marks.push(ms),
                            "clear" => heard.clears.push(ms),
                            _ => heard.other.push(v),
                        }
                    }
                    Some(Ok(Frame::Close(_))) | None | Some(Err(_)) => {
                        heard.closed = true;
                        return heard;
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
    }
    let _ = out.send(Frame::Text(json!({"type": "end"}).to_string().into())).await;
    let _ = out.close().await;
    heard
}

/// A WAV as Chromium's fake microphone reads it (16 kHz mono PCM16):
/// `lead_ms` of silence, espeak-ng saying `said`, then `tail_ms` of silence.
pub(crate) async fn caller_wav(said: &str, lead_ms: usize, tail_ms: usize) -> std::path::PathBuf {
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
    let words = parley_speech::synthesise(&espeak, said).await;
    let mut caller = silence(lead_ms);
    caller.extend(parley_speech::resample::resample(&words, 8000, 16000));
    caller.extend(silence(tail_ms));
    let wav = std::env::temp_dir().join(format!("parley-web-caller-{}.wav", uuid()));
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut writer = hound::WavWriter::create(&wav, spec).unwrap();
    for s in caller {
        writer.write_sample(s).unwrap();
    }
    writer.finalize().unwrap();
    wav
}

fn start(token: &str) -> Value {
    json!({"type": "start", "token": token, "audio": {"encoding": "pcm_s16le", "sample_rate": 16000}})
}

fn silence(ms: usize) -> Vec<i16> {
    vec![0; ms * 16]
}

both_backends! {
    async fn a_browser_talks_to_an_agent_over_a_web_call_with_barge_in_transcript_and_recording(backend) {
        let stt = whisper();
        let app = web_app(backend, &stt).await;
        let ws = app.workspace("Web").await;
        let greeting = "Thanks for calling Parley, the self hosted platform for voice and chat agents. \
                        We can help you with bookings, orders, returns and anything else you need today.";
        let agent = app.create_agent(&ws.test, json!({"name": "Ada", "first_message": greeting, "first_message_mode": "interruptible", "interruption_threshold_ms": 200})).await;

        // A web call has no `to`; a phone call needs one.
        let r = place(&app, &ws.test, json!({"agent_id": agent["id"], "transport": "web", "to": "+14155550100"})).await;
        assert_eq!(r.status, 422, "{}", r.text);
        assert_eq!(r.faults(), vec![(r#"["body","to"]"#.to_owned(), "value_error.call.transport".to_owned())]);
        let r = place(&app, &ws.test, json!({"agent_id": agent["id"]})).await;
        assert_eq!(r.faults(), vec![(r#"["body","to"]"#.to_owned(), "value_error.call.transport".to_owned())]);
        let r = place(&app, &ws.test, json!({"agent_id": agent["id"], "transport": "fax"})).await;
        assert_eq!(r.status, 422, "{}", r.text);

        let r = place(&app, &ws.test, json!({"agent_id": agent["id"], "transport": "web"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!((r.body["provider"].clone(), r.body["to"].clone()), (json!("web"), json!("web")), "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        assert_eq!(r.body["web"]["url"], "/calls/web");
        let token = r.body["web"]["token"].as_str().unwrap().to_owned();
        assert!(token.len() == 40 && token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
        // The token is shown to whoever placed the call, never again on the call.
        let call = wait_for(&app, &ws.test, &id, |c| c["status"] == "ringing").await;
        assert!(call.get("web").is_none() && !call.to_string().contains(&token), "{call}");

        // A socket with a wrong token, or without `start`, is told why and closed.
        let url = socket_url(&app, "/calls/web");
        let stray = talk_as_browser(&url, start("0123456789abcdef0123456789abcdef01234567"), &silence(2000)).await;
        assert!(stray.closed && stray.ready.is_none() && stray.audio.is_empty(), "{stray:?}");
        assert_eq!(stray.other[0]["type"], "error", "{stray:?}");
        let rude = talk_as_browser(&url, json!({"type": "hello", "token": token}), &silence(2000)).await;
        assert!(rude.closed && rude.ready.is_none() && rude.other[0]["type"] == "error", "{rude:?}");
        // Neither used the call's token up.
        assert_eq!(app.get(&ws.test, &format!("/api/v1/calls/{id}")).await.body["status"], "ringing");

        // The browser joins: it listens 3 s, talks over the greeting, then waits for the answer.
        let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
        let said = "hello, I would like to know where my order is, please call me back tomorrow morning";
        let words = parley_speech::resample::resample(&parley_speech::synthesise(&espeak, said).await, 8000, 16000);
        let mut caller = silence(3000);
        caller.extend_from_slice(&words);
        caller.extend(silence(12_000));
        let speech_starts = caller.chunks(320).position(|f| rms(f) > 300.0).unwrap() as i64 * 20;
        let speech_ends = 3000 + (words.len() / 16) as i64;
        let heard = talk_as_browser(&url, start(&token), &caller).await;
        let ready = heard.ready.clone().expect("the server said ready");
        assert_eq!(ready["call_id"], json!(id), "{ready}");
        assert_eq!(ready["output"], json!({"encoding": "pcm_s16le", "sample_rate": 8000, "frame_ms": 20}));
        assert!(!heard.closed, "the browser hung up, not Parley: {heard:?}");
        // Barge-in: the agent was speaking, `clear` came within 300 ms, then quiet until the caller stopped.
        assert!(heard.loud_between(speech_starts - 1000, speech_starts), "the agent was greeting when the caller began");
        let cleared = *heard.clears.first().unwrap_or_else(|| panic!("no clear: {heard:?}"));
        eprintln!("web call barge-in: clear {} ms after the caller began", cleared - speech_starts);
        assert!(cleared >= speech_starts && cleared - speech_starts <= 300, "clear at {cleared} ms, speech from {speech_starts} ms");
        assert!(!heard.loud_between(cleared + 40, speech_ends), "the agent is quiet while the caller talks");
        assert!(heard.loud_between(speech_ends, speech_ends + 8000), "the agent answered");
        let answered_at = heard.audio.iter().find(|(ms, pcm)| *ms > speech_ends && rms(pcm) > 500.0).unwrap().0;
        assert!(heard.marks.iter().any(|ms| *ms > answered_at), "a mark follows the answer: {:?}", heard.marks);

        // The browser said `end`: the call is over, recorded, transcribed and charged (the test balance) like any other.
        let call = wait_for(&app, &ws.test, &id, ended).await;
        assert_eq!((call["status"].clone(), call["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")), "{call}");
        assert!(call["cost_cents"].as_i64().unwrap() > 0, "{call}");
        assert!(call["latency"]["turns"].as_i64().unwrap_or(0) >= 1, "{call}");
        let segments = app.get(&ws.test, &format!("/api/v1/calls/{id}/transcript")).await.body["segments"].as_array().unwrap().clone();
        let first = &segments[0];
        assert_eq!((first["speaker"].clone(), first["interrupted"].clone()), (json!("agent"), json!(true)), "{segments:#?}");
        let caller_text = segments.iter().find(|s| s["speaker"] == "caller").expect("the caller was heard")["text"].as_str().unwrap().to_owned();
        assert!(recall(said, &caller_text) >= 0.9, "whisper heard {caller_text:?} for {said:?}");
        let recording = wait_for(&app, &ws.test, &id, |c| c["recording"]["status"] == "available").await;
        assert!(recording["recording"]["duration_ms"].as_i64().unwrap() >= speech_ends, "{recording}");
        let wave = app.get(&ws.test, &format!("/api/v1/calls/{id}/recording/waveform?points=50")).await;
        assert_eq!(wave.status, 200, "{}", wave.text);

        // The token joined once: a second socket with it is refused.
        let again = talk_as_browser(&url, start(&token), &silence(1000)).await;
        assert!(again.ready.is_none() && again.other[0]["type"] == "error", "{again:?}");
    }

    async fn a_web_call_nobody_joins_is_not_answered_and_another_workspace_cannot_join_it(backend) {
        let app = TestApp::spawn_with(backend, |s| s.voice.ring_timeout_seconds = 2).await;
        let ws = app.workspace("Web").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ada"})).await;
        let r = place(&app, &ws.live, json!({"agent_id": agent["id"], "transport": "web", "record": false})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        let other = app.workspace("Other").await;
        assert_eq!(app.get(&other.live, &format!("/api/v1/calls/{id}")).await.status, 404);
        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!((call["status"].clone(), call["cost_cents"].clone()), (json!("no_answer"), json!(0)), "{call}");
        // Its token expired with the ringing.
        let token = r.body["web"]["token"].as_str().unwrap();
        let late = talk_as_browser(&socket_url(&app, "/calls/web"), start(token), &silence(500)).await;
        assert!(late.ready.is_none() && late.other[0]["type"] == "error", "{late:?}");
        // A plain GET is told to upgrade.
        let plain = app.get(&ws.live, "/calls/web").await;
        assert_eq!(plain.status, 426, "{}", plain.text);
    }
}
