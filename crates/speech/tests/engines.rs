//! The speech engines' clients against real servers: Wyoming's
//! faster-whisper (whisper tiny.en) and Piper (en_US-joe-medium) from PyPI,
//! started here on free ports; and an OpenAI-compatible audio server
//! written from OpenAI's documented format, which also checks what Parley
//! sends.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use parley_speech::espeak::Espeak;
use parley_speech::openai::{OpenAiAudio, OpenAiSynthesiser, OpenAiTranscriber};
use parley_speech::vad::{SpeechDetector, TurnSettings, VoiceEvent};
use parley_speech::wyoming::{WyomingSynthesiser, WyomingTranscriber};
use parley_speech::{Transcriber, synthesise};

use parley_speech::local_servers::{piper, recall, whisper};

fn speech_seconds(pcm: &[i16]) -> f64 {
    let mut vad = SpeechDetector::new(TurnSettings::default());
    let mut events = vad.push(pcm);
    events.extend(vad.push(&vec![0; 8000]));
    events
        .iter()
        .map(|e| match e {
            VoiceEvent::Ended { from_ms, to_ms } => (to_ms - from_ms) as f64 / 1000.0,
            VoiceEvent::Started { .. } => 0.0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wyoming_whisper_transcribes_telephone_speech_and_piper_speaks() {
    let (stt, tts) = (whisper(), piper());
    let transcriber = WyomingTranscriber { address: stt.address(), language: Some("en".into()) };

    // A caller's words (espeak-ng at 8 kHz, as a phone line carries them).
    let said = "please call me back tomorrow morning about my order";
    let caller = synthesise(&Espeak::new("en-us", 160).unwrap(), said).await;
    let started = Instant::now();
    let heard = transcriber.transcribe(&caller).await.unwrap();
    assert!(recall(said, &heard) >= 0.9, "heard {heard:?} for {said:?}");
    eprintln!("whisper tiny.en: {:?} for {:.1} s of audio", started.elapsed(), caller.len() as f64 / 8000.0);

    // The same through the streaming seam: frames in, one final transcript out.
    let (audio, mut text) = Transcriber::start(&transcriber);
    for frame in caller.chunks(160) {
        audio.send(frame.to_vec()).await.unwrap();
    }
    drop(audio);
    let final_text = text.recv().await.unwrap();
    assert!(final_text.is_final && recall(said, &final_text.text) >= 0.9, "{final_text:?}");

    // Piper speaks two sentences, resampled to 8 kHz, and whisper hears them.
    let voice = WyomingSynthesiser { address: tts.address(), voice: Some("en_US-joe-medium".into()) };
    let reply = "Hello, this is Parley. Your order ships on Monday.";
    let started = Instant::now();
    let audio = synthesise(&voice, reply).await;
    let seconds = audio.len() as f64 / 8000.0;
    assert!((2.0..8.0).contains(&seconds), "{seconds} s");
    assert!(speech_seconds(&audio) > 1.5, "the VAD hears Piper's speech");
    eprintln!("piper: {seconds:.1} s of audio in {:?}", started.elapsed());
    let back = transcriber.transcribe(&audio).await.unwrap();
    assert!(recall(reply, &back) >= 0.8, "whisper heard {back:?} for Piper's {reply:?}");
}

/// What the fake OpenAI server saw.
/// A request's `Authorization` header, and its multipart fields.
type Upload = (Option<String>, Vec<(String, Vec<u8>)>);

#[derive(Default, Debug)]
struct Seen {
    transcriptions: Vec<Upload>,
    speech: Vec<(Option<String>, serde_json::Value)>,
    fail_next: u32,
}

/// A server speaking OpenAI's documented audio API: multipart
/// transcriptions answered `{"text"}`, and `response_format: "pcm"` speech
/// streamed as 24 kHz 16-bit little-endian mono, in odd-sized chunks.
async fn fake_openai() -> (String, Arc<Mutex<Seen>>) {
    use axum::extract::{Multipart, State};
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    let seen = Arc::new(Mutex::new(Seen::default()));
    async fn transcriptions(
        State(seen): State<Arc<Mutex<Seen>>>,
        headers: HeaderMap,
        mut form: Multipart,
    ) -> axum::response::Response {
        let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned());
        let mut parts = Vec::new();
        while let Some(field) = form.next_field().await.unwrap() {
            let name = field.name().unwrap().to_owned();
            parts.push((name, field.bytes().await.unwrap().to_vec()));
        }
        let mut seen = seen.lock().unwrap();
        if seen.fail_next > 0 {
            seen.fail_next -= 1;
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "0")],
                axum::Json(serde_json::json!({"error": {"message": "slow down"}})),
            )
                .into_response();
        }
        let verbose = parts.iter().any(|(n, v)| n == "response_format" && v == b"verbose_json");
        seen.transcriptions.push((auth, parts));
        if !verbose {
            return axum::Json(serde_json::json!({"text": " I would like to book a table. "})).into_response();
        }
        // verbose_json as OpenAI documents it (seconds), with word granularity.
        let timed = [
            ("I", 0.12, 0.24),
            ("would", 0.24, 0.41),
            ("like", 0.41, 0.6),
            ("to", 0.6, 0.68),
            ("book", 0.68, 0.9),
            ("a", 0.9, 0.98),
            ("table", 0.98, 1.32),
        ];
        let words: Vec<serde_json::Value> =
            timed.iter().map(|(w, s, e)| serde_json::json!({"word": w, "start": s, "end": e})).collect();
        axum::Json(serde_json::json!({"task": "transcribe", "language": "english", "duration": 1.0,
            "text": " I would like to book a table. ", "words": words}))
        .into_response()
    }
    async fn speech(
        State(seen): State<Arc<Mutex<Seen>>>,
        headers: HeaderMap,
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> axum::response::Response {
        let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned());
        seen.lock().unwrap().speech.push((auth, body));
        // 0.5 s of a 300 Hz tone at 24 kHz, in chunks of 333 bytes.
        let pcm: Vec<u8> = (0..12_000)
            .flat_map(|i| (((i as f32 * 300.0 * std::f32::consts::TAU / 24_000.0).sin() * 9000.0) as i16).to_le_bytes())
            .collect();
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = pcm.chunks(333).map(|c| Ok(c.to_vec())).collect();
        axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response()
    }
    let app = axum::Router::new()
        .route("/v1/audio/transcriptions", axum::routing::post(transcriptions))
        .route("/v1/audio/speech", axum::routing::post(speech))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

#[tokio::test]
async fn openai_compatible_audio_requests_follow_the_documented_format() {
    let (base, seen) = fake_openai().await;
    let server = OpenAiAudio::new(&base, Some("sk-test-secret".into()), Duration::from_secs(10));
    assert!(!format!("{server:?}").contains("sk-test"), "the key is never printed");

    // Transcription: one 429 (retried after Retry-After), then the answer.
    seen.lock().unwrap().fail_next = 1;
    let stt = OpenAiTranscriber {
        server: server.clone(),
        model: "whisper-1".into(),
        language: Some("en".into()),
        word_timestamps: true,
    };
    let utterance = vec![1000i16; 8000]; // one second at 8 kHz
    let transcript = stt.transcript(&utterance).await.unwrap();
    assert_eq!(transcript.text, "I would like to book a table.");
    // Word timings in seconds become milliseconds from the utterance's start.
    assert_eq!(transcript.words.len(), 7);
    assert_eq!(transcript.words[0], parley_speech::TimedWord { word: "I".into(), start_ms: 120, end_ms: 240 });
    assert_eq!(transcript.words[6], parley_speech::TimedWord { word: "table".into(), start_ms: 980, end_ms: 1320 });
    let (auth, parts) = seen.lock().unwrap().transcriptions[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-secret"));
    let field = |name: &str| {
        parts.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {name} field"))
    };
    assert_eq!(field("model"), b"whisper-1");
    assert_eq!(field("language"), b"en");
    assert_eq!(field("response_format"), b"verbose_json");
    assert_eq!(field("timestamp_granularities[]"), b"word");
    let file = field("file");
    assert_eq!(&file[..4], b"RIFF");
    assert_eq!(&file[8..12], b"WAVE");
    assert_eq!(u32::from_le_bytes(file[24..28].try_into().unwrap()), 16_000, "uploaded at 16 kHz");
    assert_eq!(file.len(), 44 + 16_000 * 2, "one second of 16-bit mono");

    // Speech: streamed PCM at 24 kHz becomes 8 kHz frames.
    let tts = OpenAiSynthesiser { server, model: "tts-1".into(), voice: "alloy".into(), speed: 1.0 };
    let audio = synthesise(&tts, "Your table is booked.").await;
    assert_eq!(audio.len(), 4000, "0.5 s at 8 kHz");
    let (auth, body) = seen.lock().unwrap().speech[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer sk-test-secret"));
    assert_eq!(body["model"], "tts-1");
    assert_eq!(body["voice"], "alloy");
    assert_eq!(body["input"], "Your table is booked.");
    assert_eq!(body["response_format"], "pcm");
}
