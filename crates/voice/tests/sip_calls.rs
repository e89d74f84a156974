//! The `sip` provider against a real SIP peer: SIPp (Debian's sip-tester)
//! as the callee, echoing the RTP it gets.

use std::process::{Command as Process, Stdio};
use std::time::Duration;

use parley_voice::provider::{Command, Dial, FarEnd, Provider, ProviderEvent};
use parley_voice::sip::{SipProvider, SipSettings};

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn provider() -> SipProvider {
    SipProvider::start(SipSettings {
        bind: "127.0.0.1:0".parse().unwrap(),
        trunk: None,
        from: "parley".into(),
        media_ip: "127.0.0.1".parse().unwrap(),
    })
    .await
    .unwrap()
}

/// Starts SIPp's built-in `uas` scenario (180, 200 with SDP, then waits
/// for BYE) for one call, echoing RTP.
fn sipp_uas(port: u16, media_port: u16) -> std::process::Child {
    Process::new("sipp")
        .args(["-sn", "uas", "-i", "127.0.0.1", "-p", &port.to_string(), "-mp", &media_port.to_string()])
        .args(["-rtp_echo", "-m", "1", "-timeout", "30s", "-timeout_error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sipp runs (apt-get install sip-tester; .ci/run installs it)")
}

fn loud(frame: &[i16]) -> bool {
    let energy: f64 = frame.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / frame.len() as f64;
    energy.sqrt() > 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_sipp_rings_is_answered_carries_audio_both_ways_and_hangs_up() {
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut sipp = sipp_uas(port, media);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sip = provider().await;
    let dial = Dial {
        call_id: "call_1".into(),
        from: None,
        to: format!("sip:service@127.0.0.1:{port}"),
        ring_timeout: Duration::from_secs(10),
    };
    let mut placed = sip.dial(dial).await.unwrap();
    let next = async |placed: &mut parley_voice::provider::Placed| {
        tokio::time::timeout(Duration::from_secs(10), placed.events.recv())
            .await
            .expect("an event in time")
            .expect("the call goes on")
    };
    assert_eq!(next(&mut placed).await, ProviderEvent::Ringing);
    assert_eq!(next(&mut placed).await, ProviderEvent::Answered);

    // One second of a 440 Hz tone goes out as RTP, paced at 20 ms, and comes back.
    let tone: Vec<i16> =
        (0..8000).map(|i| ((i as f32 * 440.0 * std::f32::consts::TAU / 8000.0).sin() * 10_000.0) as i16).collect();
    placed.commands.send(Command::Play(tone)).await.unwrap();
    let started = tokio::time::Instant::now();
    let (mut frames, mut loud_frames) = (0, 0);
    while started.elapsed() < Duration::from_secs(2) {
        if let ProviderEvent::Audio(frame) = next(&mut placed).await {
            assert_eq!(frame.len(), 160);
            frames += 1;
            if loud(&frame) {
                loud_frames += 1;
            }
        }
    }
    assert!(frames >= 80, "20 ms frames keep coming, echoed or silent: {frames}");
    assert!((45..=52).contains(&loud_frames), "the second of tone came back: {loud_frames} loud frames");

    placed.commands.send(Command::Hangup).await.unwrap();
    assert_eq!(next(&mut placed).await, ProviderEvent::Ended(FarEnd::HungUp));
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(status.success(), "SIPp saw a complete, successful call: {status:?}");
}

/// Runs one of tests/sipp's scenarios as the callee, for one call.
fn sipp_scenario(file: &str, port: u16, media_port: u16) -> std::process::Child {
    let scenario = format!("{}/tests/sipp/{file}", env!("CARGO_MANIFEST_DIR"));
    Process::new("sipp")
        .args(["-sf", &scenario, "-i", "127.0.0.1", "-p", &port.to_string(), "-mp", &media_port.to_string()])
        .args(["-m", "1", "-timeout", "30s", "-timeout_error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sipp runs")
}

async fn events_until_end(placed: &mut parley_voice::provider::Placed) -> Vec<ProviderEvent> {
    let mut seen = Vec::new();
    loop {
        let Ok(event) = tokio::time::timeout(Duration::from_secs(15), placed.events.recv()).await else {
            panic!("no event in time after {seen:?}");
        };
        match event {
            Some(ProviderEvent::Audio(_)) => {}
            Some(e @ ProviderEvent::Ended(_)) => {
                seen.push(e);
                return seen;
            }
            Some(e) => seen.push(e),
            None => return seen,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_callee_ends_the_call_as_busy_and_a_callee_bye_as_hung_up() {
    let sip = provider().await;
    for (scenario, expected) in [
        ("uas_busy.xml", vec![ProviderEvent::Ringing, ProviderEvent::Ended(FarEnd::Busy)]),
        ("uas_hangs_up.xml", vec![ProviderEvent::Answered, ProviderEvent::Ended(FarEnd::HungUp)]),
    ] {
        let (port, media) = (free_udp_port(), free_udp_port());
        let mut sipp = sipp_scenario(scenario, port, media);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let dial = Dial {
            call_id: "c".into(),
            from: None,
            to: format!("sip:service@127.0.0.1:{port}"),
            ring_timeout: Duration::from_secs(10),
        };
        let mut placed = sip.dial(dial).await.unwrap();
        assert_eq!(events_until_end(&mut placed).await, expected, "{scenario}");
        let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
        assert!(status.success(), "{scenario}: SIPp's side of the call went as scripted: {status:?}");
    }
}
