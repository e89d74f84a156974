//! Voice-to-voice latency over SIP on loopback (bench/voice.sh runs it).
//!
//! SIPp answers Parley's call and speaks TURNS utterances (espeak-ng,
//! μ-law RTP from a pcap), one every GAP_MS; Parley hears each through
//! voice activity and whisper tiny.en (local Wyoming server), answers at
//! once (the builtin session: a model with no latency) and speaks through
//! the chosen voice (`espeak`, or `piper` on a local Wyoming server).
//! Prints p50/p95 of each turn's latency steps.
//!
//! Usage: cargo run --release -p parley-voice --example voice_latency \
//!          --features testing -- [espeak|piper] [turns]

use std::sync::Arc;
use std::time::Duration;

use parley_speech::local_servers;
use parley_voice::engine::{Options, Progress};
use parley_voice::provider::{Dial, Provider};
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
    let dir = std::env::temp_dir().join(format!("parley-voice-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("caller.pcap");
    rtp_pcap(&pcap, &line);
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
    let mut options = Options::new(Duration::from_secs(seconds as u64 + 60), None);
    options.voice = voice;
    options.transcriber = Some(Arc::new(parley_speech::wyoming::WyomingTranscriber {
        address: whisper.address(),
        language: Some("en".into()),
    }));
    options.listening.live = true;
    let agent = Box::new(BuiltinAgent { name: "Ada".into(), first_message: Some("Hi.".into()) });
    let (progress, mut reports) = tokio::sync::mpsc::channel::<Progress>(1024);
    tokio::spawn(async move { while reports.recv().await.is_some() {} });
    let (_hangup, hangup) = tokio::sync::oneshot::channel();
    eprintln!("{turns} turns, about {seconds} s of call…");
    let outcome = parley_voice::engine::run(placed, agent, options, progress, hangup).await;
    let _ = sipp.wait();

    let latencies: Vec<_> = outcome.segments.iter().filter_map(|s| s.latency).collect();
    let heard = outcome.segments.iter().filter(|s| s.speaker == parley_domain::call::Speaker::Caller).count();
    println!("voice: {voice_name}; caller turns heard: {heard} of {turns}; answered turns timed: {}", latencies.len());
    let report = |name: &str, mut v: Vec<i64>| {
        v.sort_unstable();
        let at = |q: f64| v[(((v.len() as f64) * q).ceil() as usize).clamp(1, v.len()) - 1];
        println!("  {name:<20} p50 {:>5} ms   p95 {:>5} ms", at(0.5), at(0.95));
    };
    if latencies.is_empty() {
        println!("  no timed turns");
        return;
    }
    report("end of turn + STT", latencies.iter().map(|l| l.stt_ms).collect());
    report("model first token", latencies.iter().map(|l| l.llm_first_token_ms).collect());
    report("TTS first audio", latencies.iter().map(|l| l.tts_first_audio_ms).collect());
    report("voice to voice", latencies.iter().map(|l| l.voice_to_voice_ms).collect());
}
