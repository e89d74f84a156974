//! The media path under load (bench/voice_media.sh runs it): CALLS
//! concurrent SIP calls on one thread, each with RTP both ways, voice
//! activity detection and a stereo recording, but no speech engines.
//!
//! SIPp answers every call and plays a caller's line (espeak-ng speech,
//! 2 s on, 3 s off, as μ-law RTP from a pcap) for SECONDS, then hangs up.
//! Parley's side runs each call through the call engine: the caller's
//! turns are found by voice activity (without a transcriber they are
//! `[inaudible]`), the builtin agent answers each in the tone voice, and
//! both sides are recorded to a WAV file per call. Prints packets sent,
//! received and lost, how late packets went out against their 20 ms slots
//! (p50, p99, max), and the CPU time Parley's process used.
//!
//! Usage: target/release/examples/media_path [calls] [seconds]
//! (the runtime has one thread, and the process pins itself to core 0 and
//! SIPp to core 1).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parley_voice::engine::{Options, Progress};
use parley_voice::provider::{Dial, Provider};
use parley_voice::session::BuiltinAgent;
use parley_voice::sip::{SipProvider, SipSettings};
use parley_voice::testing::{callee_line_scenario, free_udp_port, rtp_pcap, sipp_callees};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let calls: u32 = args.next().and_then(|c| c.parse().ok()).unwrap_or(200);
    let seconds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(30);

    // The caller's line: 2 s of speech every 5 s.
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).expect("espeak-ng is installed");
    let phrase = parley_speech::synthesise(&espeak, "hello, I would like to know where my order is").await;
    let mut line: Vec<i16> = Vec::new();
    while line.len() < seconds * 8000 {
        let start = line.len();
        line.extend_from_slice(&phrase[..phrase.len().min(16_000)]);
        line.resize(start + 40_000, 0);
    }
    line.truncate(seconds * 8000);
    let dir = std::env::temp_dir().join(format!("parley-media-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("caller.pcap");
    rtp_pcap(&pcap, &line);
    let scenario = callee_line_scenario(&pcap, seconds, &dir);
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut sipp = sipp_callees(&scenario, port, media, calls, seconds as u64 + 120);
    // Parley on core 0 (its one thread), SIPp on core 1.
    pin(std::process::id(), 0);
    pin(sipp.id(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (sip, _) = SipProvider::start(SipSettings::local("127.0.0.1:0".parse().unwrap(), "bench")).await.unwrap();
    let sip = Arc::new(sip);
    let stats = sip.media_stats();
    eprintln!("{calls} calls of {seconds} s, dialled 50 a second…");
    let (began, cpu_began) = (Instant::now(), cpu_seconds());
    let mut running = Vec::new();
    for i in 0..calls {
        let (sip, dir) = (sip.clone(), dir.clone());
        running.push(tokio::spawn(async move {
            let dial = Dial {
                call_id: format!("bench-{i}"),
                from: None,
                to: format!("sip:service@127.0.0.1:{port}"),
                ring_timeout: Duration::from_secs(10),
            };
            let placed = sip.dial(dial).await.ok()?;
            let mut options =
                Options::new(Duration::from_secs(seconds as u64 + 60), Some(dir.join(format!("{i}.wav"))));
            options.listening.live = true;
            let agent = Box::new(BuiltinAgent { name: "Ada".into(), first_message: None });
            let (progress, mut reports) = tokio::sync::mpsc::channel::<Progress>(64);
            tokio::spawn(async move { while reports.recv().await.is_some() {} });
            let (_hangup, hangup) = tokio::sync::oneshot::channel();
            Some(parley_voice::engine::run(placed, agent, options, progress, hangup).await)
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut outcomes = Vec::new();
    for call in running {
        outcomes.extend(call.await.ok().flatten());
    }
    let (wall, cpu) = (began.elapsed().as_secs_f64(), cpu_seconds() - cpu_began);
    let _ = sipp.wait();

    let answered = outcomes.iter().filter(|o| o.duration_ms > 0).count();
    let recorded = outcomes.iter().filter(|o| o.recording.is_some()).count();
    let caller_turns: usize = outcomes
        .iter()
        .map(|o| o.segments.iter().filter(|s| s.speaker == parley_domain::call::Speaker::Caller).count())
        .sum();
    let (sent, received, lost) = (
        stats.packets_sent.load(Ordering::Relaxed),
        stats.packets_received.load(Ordering::Relaxed),
        stats.packets_lost.load(Ordering::Relaxed),
    );
    let expected = u64::from(calls) * (line.len() as u64 / 160);
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    println!("calls: {calls} placed, {answered} answered, {recorded} recorded; caller turns heard: {caller_turns}");
    println!(
        "RTP in: {received} received of {expected} SIPp sent ({:.3}% lost; {lost} skipped in sequence)",
        100.0 * (expected.saturating_sub(received)) as f64 / expected.max(1) as f64
    );
    println!(
        "RTP out: {sent} sent; lateness against the 20 ms slot p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(stats.send_lateness_quantile(0.5)),
        ms(stats.send_lateness_quantile(0.99)),
        ms(stats.send_lateness_quantile(1.0)),
    );
    println!("CPU: {cpu:.1} s over {wall:.1} s of calls ({:.0}% of one core)", 100.0 * cpu / wall);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Keeps every thread of process `pid` on `core` (util-linux's taskset).
fn pin(pid: u32, core: u32) {
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &core.to_string(), &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status();
    if !pinned.is_ok_and(|s| s.success()) {
        eprintln!("warning: could not pin process {pid} to core {core}");
    }
}

/// User and system CPU time of this process so far (Linux's /proc).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    let ticks = field(11) + field(12);
    ticks as f64 / 100.0
}
