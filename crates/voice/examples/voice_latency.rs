//! Voice-to-voice latency over SIP on loopback (bench/voice.sh runs it).
//!
//! SIPp answers Parley's call and speaks TURNS utterances (espeak-ng,
//! μ-law RTP from a pcap), one every GAP_MS; Parley hears each through
//! voice activity and whisper tiny.en (local Wyoming server), answers at
//! once (the builtin session: a model with no latency) and speaks through
//! the chosen voice (`espeak`, or `piper` on a local Wyoming server).
//! Turns end by the chosen rule: `silence` (WebRTC VAD and 600 ms of
//! silence) or `smart` (Silero VAD and Smart Turn v3.2, the models from
//! the pinned pipecat-ai wheel). Prints p50/p95 of each turn's latency steps.
//! With `web`, the caller is a browser's web call instead of SIPp: the
//! same line, 16 kHz PCM over the web transport's socket frames (in
//! process: the WebSocket's framing is left out), in real time.
//!
//! Usage: cargo run --release -p parley-voice --example voice_latency \
//!          --features testing -- [espeak|piper] [turns] [silence|smart] [sip|web]

use std::sync::Arc;
use std::time::Duration;

use parley_speech::local_servers;
use parley_voice::engine::{Options, Progress};
use parley_voice::provider::{Dial, Placed, Provider};
use parley_voice::session::BuiltinAgent;
use parley_voice::sip::{SipProvider, SipSettings};
use parley_voice::testing::{callee_line_scenario, free_udp_port, rtp_pcap, sipp_callee_within};

const PHRASES: [&str; 6] = [
    "hello, I would like to know where my order is",
    "please call me back tomorrow morning",
    "can you tell me when the store opens",
    "I would like to change my delivery address",
    "my package has not arrived yet",
    "thank you, that is all I needed",
];

/// Between the starts of two utterances: room for the answer.
const GAP_MS: usize = 8000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let voice_name = args.next().unwrap_or_else(|| "espeak".into());
    let turns: usize = args.next().and_then(|t| t.parse().ok()).unwrap_or(30);
    let rule = args.next().unwrap_or_else(|| "silence".into());
    let transport = args.next().unwrap_or_else(|| "sip".into());

    let whisper = local_servers::whisper();
    let piper = (voice_name == "piper").then(local_servers::piper);
    let voice: Arc<dyn parley_speech::Synthesiser> = match &piper {
        Some(server) => Arc::new(parley_speech::wyoming::WyomingSynthesiser {
            address: server.address(),
            voice: Some("en_US-joe-medium".into()),
        }),
        None => Arc::new(parley_speech::espeak::Espeak::new("en-us", 175).expect("espeak-ng is installed")),
    };

    // The caller's line: TURNS utterances, each starting GAP_MS after the last.
    let caller = parley_speech::espeak::Espeak::new("en-us", 160).expect("espeak-ng is installed");
    let mut line: Vec<i16> = Vec::new();
    for i in 0..turns {
        let start = (2000 + i * GAP_MS) * 8;
        line.resize(start, 0);
        line.extend(parley_speech::synthesise(&caller, PHRASES[i % PHRASES.len()]).await);
    }
    line.resize(line.len() + GAP_MS * 8, 0);
    let seconds = line.len() / 8000;
    let (placed, caller) = if transport == "web" { web_caller(line).await } else { sip_caller(&line).await };
    let mut options = Options::new(Duration::from_secs(seconds as u64 + 60), None);
    options.voice = voice;
    options.transcriber = Some(Arc::new(parley_speech::wyoming::WyomingTranscriber {
        address: whisper.address(),
        language: Some("en".into()),
    }));
    options.listening.live = true;
    if rule == "smart" {
        let settings = parley_speech::turns::SmartSettings::default();
        options.listening.smart = Some((settings, local_servers::turn_models()));
    }
    let agent = Box::new(BuiltinAgent { name: "Ada".into(), first_message: Some("Hi.".into()) });
    let (progress, mut reports) = tokio::sync::mpsc::channel::<Progress>(1024);
    tokio::spawn(async move { while reports.recv().await.is_some() {} });
    let (_hangup, hangup) = tokio::sync::oneshot::channel();
    eprintln!("{turns} turns, about {seconds} s of call…");
    let outcome = parley_voice::engine::run(placed, agent, options, progress, hangup).await;
    caller.await.expect("the caller ran");

    let latencies: Vec<_> = outcome.segments.iter().filter_map(|s| s.latency).collect();
    let heard = outcome.segments.iter().filter(|s| s.speaker == parley_domain::call::Speaker::Caller).count();
    println!(
        "voice: {voice_name}; turns end by: {rule}; over {transport}; caller turns heard: {heard} of {turns}; answered turns timed: {}",
        latencies.len()
    );
    let report = |name: &str, mut v: Vec<i64>| {
        v.sort_unstable();
        let at = |q: f64| v[(((v.len() as f64) * q).ceil() as usize).clamp(1, v.len()) - 1];
        println!("  {name:<20} p50 {:>5} ms   p95 {:>5} ms", at(0.5), at(0.95));
    };
    if latencies.is_empty() {
        println!("  no timed turns");
        return;
    }
    report("end of turn", latencies.iter().map(|l| l.end_of_turn_ms).collect());
    report("STT after it", latencies.iter().map(|l| l.stt_ms).collect());
    report("model first token", latencies.iter().map(|l| l.llm_first_token_ms).collect());
    report("TTS first audio", latencies.iter().map(|l| l.tts_first_audio_ms).collect());
    report("voice to voice", latencies.iter().map(|l| l.voice_to_voice_ms).collect());
}

/// SIPp as the callee saying `line`; the placed call, and SIPp's end.
async fn sip_caller(line: &[i16]) -> (Placed, tokio::task::JoinHandle<()>) {
    let dir = std::env::temp_dir().join(format!("parley-voice-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("caller.pcap");
    rtp_pcap(&pcap, line);
    let seconds = line.len() / 8000;
    let scenario = callee_line_scenario(&pcap, seconds, &dir);
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut sipp = sipp_callee_within(&scenario, port, media, seconds as u64 + 60);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (sip, _) = SipProvider::start(SipSettings::local("127.0.0.1:0".parse().unwrap(), "bench")).await.unwrap();
    let dial = Dial {
        call_id: "bench".into(),
        from: None,
        to: format!("sip:service@127.0.0.1:{port}"),
        ring_timeout: Duration::from_secs(10),
    };
    let placed = sip.dial(dial).await.expect("SIPp answers");
    // The provider lives as long as the call.
    let done = tokio::task::spawn_blocking(move || {
        let _keep = sip;
        let _ = sipp.wait();
    });
    (placed, done)
}

/// A browser joining a web call and sending `line` as 16 kHz PCM, 20 ms
/// a frame in real time (3 s after joining, as SIPp does), reading what
/// the agent sends back; then it leaves.
async fn web_caller(line: Vec<i16>) -> (Placed, tokio::task::JoinHandle<()>) {
    use parley_voice::webcall::{Frame, Socket, Web, WebCalls};
    let calls = WebCalls::new();
    let web = Web(calls.clone());
    let dial = Dial { call_id: "bench".into(), from: None, to: "web".into(), ring_timeout: Duration::from_secs(10) };
    let placed = web.dial(dial).await.expect("a web call is placed");
    let token = placed.client_token.clone().expect("a web call has a token");
    let (up, from_browser) = tokio::sync::mpsc::channel(64);
    let (to_browser, mut down) = tokio::sync::mpsc::channel(1024);
    tokio::spawn(async move { calls.connect(Socket { from_browser, to_browser }).await });
    let done = tokio::spawn(async move {
        let _keep = web;
        let start = serde_json::json!({"type": "start", "token": token,
            "audio": {"encoding": "pcm_s16le", "sample_rate": 16000}});
        up.send(Frame::Text(start.to_string())).await.unwrap();
        tokio::spawn(async move { while down.recv().await.is_some() {} });
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        for frame in line.chunks(160) {
            tick.tick().await;
            // 8 kHz to 16 kHz: each sample, then the midpoint to the next.
            let mut bytes = Vec::with_capacity(frame.len() * 4);
            for (i, s) in frame.iter().enumerate() {
                let next = frame.get(i + 1).copied().unwrap_or(*s);
                for v in [*s, ((*s as i32 + next as i32) / 2) as i16] {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
            }
            if up.send(Frame::Audio(bytes)).await.is_err() {
                return;
            }
        }
        let _ = up.send(Frame::Text(serde_json::json!({"type": "end"}).to_string())).await;
    });
    (placed, done)
}
