//! Helpers for tests and benchmarks that drive Parley's SIP side with
//! SIPp: its scenarios, and caller audio as a pcap SIPp plays. Behind the
//! `testing` feature.

use std::process::{Child, Command, Stdio};

/// Writes `pcm` as a pcap of μ-law RTP packets, 20 ms apart (Ethernet,
/// IPv4, UDP), which SIPp's `play_pcap_audio` plays to the far end.
pub fn rtp_pcap(path: &std::path::Path, pcm: &[i16]) {
    let mut out = Vec::new();
    // pcap global header: magic, v2.4, GMT, accuracy, snaplen, Ethernet.
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65_535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, frame) in pcm.chunks(160).enumerate() {
        let mut frame = frame.to_vec();
        frame.resize(160, 0);
        let rtp = crate::rtp::Packet {
            payload_type: 0,
            marker: i == 0,
            sequence: i as u16,
            timestamp: (i * 160) as u32,
            ssrc: 0x5151,
            payload: crate::codec::G711::Pcmu.encode(&frame),
        }
        .to_bytes();
        let udp_len = 8 + rtp.len();
        let ip_len = 20 + udp_len;
        let mut packet = vec![0u8; 12];
        packet.extend_from_slice(&[0x08, 0x00]); // IPv4
        packet.extend_from_slice(&[0x45, 0]);
        packet.extend_from_slice(&(ip_len as u16).to_be_bytes());
        packet.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
        packet.extend_from_slice(&6000u16.to_be_bytes());
        packet.extend_from_slice(&6002u16.to_be_bytes());
        packet.extend_from_slice(&(udp_len as u16).to_be_bytes());
        packet.extend_from_slice(&[0, 0]);
        packet.extend_from_slice(&rtp);
        let micros = i as u64 * 20_000;
        out.extend_from_slice(&((micros / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((micros % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(packet.len() as u32).to_le_bytes());
        out.extend_from_slice(&(packet.len() as u32).to_le_bytes());
        out.extend_from_slice(&packet);
    }
    std::fs::write(path, out).expect("the pcap is written");
}

/// A free UDP port on 127.0.0.1 (for SIPp's signalling and media).
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").expect("a free port").local_addr().expect("bound").port()
}

/// Runs a caller scenario (`file` in the voice crate's tests/sipp, or a
/// path) against `parley`'s SIP address, dialling `service`, for one call.
pub fn sipp_caller(scenario: &str, parley: std::net::SocketAddr, service: &str) -> Child {
    Command::new("sipp")
        .arg(parley.to_string())
        .args(["-sf", &scenario_path(scenario), "-i", "127.0.0.1", "-p", &free_udp_port().to_string()])
        .args(["-mp", &free_udp_port().to_string(), "-s", service, "-m", "1", "-timeout", "40s", "-timeout_error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sipp runs (apt-get install sip-tester; .ci/run installs it)")
}

/// Runs a callee scenario on 127.0.0.1:`port` (media on `media_port`),
/// for one call of at most 40 s.
pub fn sipp_callee(scenario: &str, port: u16, media_port: u16) -> Child {
    sipp_callee_within(scenario, port, media_port, 40)
}

/// [`sipp_callee`] for a call of at most `seconds`.
pub fn sipp_callee_within(scenario: &str, port: u16, media_port: u16, seconds: u64) -> Child {
    sipp_callees(scenario, port, media_port, 1, seconds)
}

/// A callee scenario taking `calls` calls (at once, if they come so), all
/// done within `seconds`.
pub fn sipp_callees(scenario: &str, port: u16, media_port: u16, calls: u32, seconds: u64) -> Child {
    Command::new("sipp")
        .args(["-sf", &scenario_path(scenario), "-i", "127.0.0.1", "-p", &port.to_string()])
        .args(["-mp", &media_port.to_string(), "-m", &calls.to_string(), "-l", &calls.to_string()])
        .args(["-timeout", &format!("{seconds}s"), "-timeout_error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sipp runs (apt-get install sip-tester; .ci/run installs it)")
}

/// A scenario of tests/sipp by file name, or a path as given.
pub fn scenario_path(scenario: &str) -> String {
    if scenario.contains('/') {
        scenario.to_owned()
    } else {
        format!("{}/tests/sipp/{scenario}", env!("CARGO_MANIFEST_DIR"))
    }
}

/// A callee that answers, listens 3 s, says `speech` (8 kHz, as μ-law RTP
/// from a pcap) and hangs up 9 s later (tests/sipp/uas_caller_speaks.xml);
/// its files go in a new directory under the system's temporary one.
pub fn sipp_callee_saying(speech: &[i16], port: u16, media_port: u16) -> Child {
    let dir = std::env::temp_dir().join(format!("parley-sipp-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let pcap = dir.join("caller.pcap");
    rtp_pcap(&pcap, speech);
    sipp_callee(&scenario_with_pcap("uas_caller_speaks.xml", &pcap, &dir), port, media_port)
}

/// A callee whose line (`line`, 8 kHz) starts as it picks up, and which
/// takes Parley's hang-up at any time, or hangs up itself once the line
/// has played (tests/sipp/uas_line.xml); its files go in a new directory
/// under the system's temporary one.
pub fn sipp_callee_line(line: &[i16], port: u16, media_port: u16) -> Child {
    let dir = std::env::temp_dir().join(format!("parley-sipp-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let pcap = dir.join("line.pcap");
    rtp_pcap(&pcap, line);
    let path = scenario_with_pcap("uas_line.xml", &pcap, &dir);
    let line_ms = line.len() / 8 + 500;
    let text = std::fs::read_to_string(&path).expect("just written");
    std::fs::write(&path, text.replace("LINE_MS", &line_ms.to_string())).expect("written");
    sipp_callee_within(&path, port, media_port, (line_ms / 1000 + 20) as u64)
}

/// A callee that answers, plays `pcap` (a caller's line `seconds` long)
/// 3 s later, and hangs up when it is over; written in `dir`.
pub fn callee_line_scenario(pcap: &std::path::Path, seconds: usize, dir: &std::path::Path) -> String {
    let path = scenario_with_pcap("uas_caller_speaks.xml", pcap, dir);
    let text = std::fs::read_to_string(&path).expect("just written");
    let paused =
        text.replace("<pause milliseconds=\"9000\" />", &format!("<pause milliseconds=\"{}\" />", seconds * 1000));
    std::fs::write(&path, paused).expect("written");
    path
}

/// A scenario of tests/sipp with `CALLER_PCAP` replaced by `pcap`, written
/// beside it in `dir`.
pub fn scenario_with_pcap(scenario: &str, pcap: &std::path::Path, dir: &std::path::Path) -> String {
    let template = std::fs::read_to_string(scenario_path(scenario)).expect("the scenario exists");
    let path = dir.join(scenario);
    std::fs::write(&path, template.replace("CALLER_PCAP", &pcap.display().to_string())).expect("written");
    path.display().to_string()
}
