//! Real voice through the API: `telephony.provider = "sip"` with SIPp as
//! the far end, whisper tiny.en (Wyoming) hearing the caller, espeak-ng
//! speaking for the agent, the agent runtime answering.

use std::time::Duration;

use parley_domain::Mode;
use parley_speech::local_servers::{LocalServer, recall, whisper};
use parley_voice::testing::{free_udp_port, sipp_callee_saying, sipp_caller};
use serde_json::{Value, json};

use crate::calls::{ended, place, wait_for};
use crate::support::*;

/// A server whose live calls go through its SIP endpoint on `sip_port`
/// (which takes calls from 127.0.0.1), with `whisper` as every agent's ears.
async fn sip_app(backend: Backend, sip_port: u16, whisper: &LocalServer) -> TestApp {
    let stt = json!({"kind": "wyoming", "host": "127.0.0.1", "port": whisper.port});
    TestApp::spawn_with(backend, move |s| {
        s.telephony.provider = "sip".into();
        s.telephony.sip.bind = format!("127.0.0.1:{sip_port}");
        s.telephony.sip.trusted_addresses = vec!["127.0.0.1".into()];
        s.speech.stt.insert("whisper".into(), stt);
        s.speech.default_stt = Some("whisper".into());
    })
    .await
}

/// RMS of a stereo WAV's `channel` between two times.
pub(crate) fn loudness(wav: &[u8], channel: usize, from_ms: i64, to_ms: i64) -> f64 {
    let reader = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
    assert_eq!((reader.spec().channels, reader.spec().sample_rate), (2, 8000));
    let samples: Vec<i16> = reader.into_samples::<i16>().map(Result::unwrap).collect();
    let part: Vec<f64> = samples
        .chunks(2)
        .skip((from_ms * 8) as usize)
        .take(((to_ms - from_ms) * 8).max(0) as usize)
        .map(|f| f64::from(f[channel]))
        .collect();
    (part.iter().map(|x| x * x).sum::<f64>() / part.len().max(1) as f64).sqrt()
}

async fn transcript(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    app.get(key, &format!("/api/v1/calls/{id}/transcript")).await.body["segments"].as_array().unwrap().clone()
}

both_backends! {
    async fn a_call_placed_through_the_api_greets_hears_and_answers_a_sip_callee(backend) {
        let stt = whisper();
        let sip_port = free_udp_port();
        let app = sip_app(backend, sip_port, &stt).await;
        let ws = app.workspace("Voice").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ada", "first_message": "Hello, this is Ada.",
            "voice": {"tts_engine": "espeak", "voice_id": "en-us"}})).await;

        // SIPp answers, listens to the greeting, then says its line (espeak-ng, μ-law RTP) and hangs up.
        let said = "hello, I would like to know where my order is, please call me back tomorrow morning";
        let espeak = parley_speech::espeak::Espeak::new("en-us", 160).expect("espeak-ng is installed");
        let words = parley_speech::synthesise(&espeak, said).await;
        let (port, media) = (free_udp_port(), free_udp_port());
        let mut sipp = sipp_callee_saying(&words, port, media);
        tokio::time::sleep(Duration::from_millis(300)).await;

        let r = place(&app, &ws.live, json!({"agent_id": agent["id"], "to": format!("sip:service@127.0.0.1:{port}")})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["provider"], "sip");
        let id = r.body["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!((call["status"].clone(), call["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")), "{call}");
        let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
        assert!(status.success(), "SIPp's side went as scripted: {status:?}");

        let segments = transcript(&app, &ws.live, &id).await;
        assert_eq!(segments[0]["speaker"], "agent");
        assert_eq!(segments[0]["text"], "Hello, this is Ada.");
        let caller = segments.iter().find(|s| s["speaker"] == "caller").expect("the caller was heard");
        let heard = caller["text"].as_str().unwrap();
        assert!(recall(said, heard) >= 0.9, "whisper heard {heard:?} for {said:?}");
        let reply = segments.iter().rev().find(|s| s["speaker"] == "agent").unwrap();
        assert!(reply["index"].as_i64() > caller["index"].as_i64(), "the agent answered: {segments:#?}");
        // The answering turn's latency, and the call's over its turns.
        let latency = &reply["latency"];
        let v2v = latency["voice_to_voice_ms"].as_i64().unwrap_or_else(|| panic!("{reply}"));
        let steps: i64 = ["stt_ms", "llm_first_token_ms", "tts_first_audio_ms"].iter().map(|k| latency[*k].as_i64().unwrap()).sum();
        assert!(v2v >= steps && v2v < 5000, "{latency}");
        assert_eq!(caller["latency"], Value::Null);
        assert_eq!(caller["words"], json!([]), "whisper over Wyoming gives no word timings");
        let call = app.get(&ws.live, &format!("/api/v1/calls/{id}")).await.body;
        assert_eq!(call["latency"]["turns"], 1, "{call}");
        assert_eq!((call["latency"]["voice_to_voice_p50_ms"].as_i64(), call["latency"]["voice_to_voice_p95_ms"].as_i64()), (Some(v2v), Some(v2v)));
        let runs = app.get(&ws.live, &format!("/api/v1/agent-runs?agent_id={}", agent["id"])).await.body;
        assert!(runs["items"].as_array().unwrap().iter().any(|r| r["call_id"] == json!(id) && r["trigger"] == "call_turn"), "{runs}");

        // The recording: stereo, the caller on the left while they speak, the agent on the right while it greets.
        let j = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording?redirect=true")).await;
        assert_eq!(j.status, 200, "{}", j.text);
        let wav = app.client.get(j.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
        let (cs, ce) = (caller["start_ms"].as_i64().unwrap(), caller["end_ms"].as_i64().unwrap());
        assert!(loudness(&wav, 0, cs + 300, ce - 300) > 500.0, "caller speech on the left");
        let (gs, ge) = (segments[0]["start_ms"].as_i64().unwrap(), segments[0]["end_ms"].as_i64().unwrap());
        assert!(loudness(&wav, 1, gs + 100, ge - 100) > 500.0, "agent speech on the right");
        assert!(loudness(&wav, 1, cs + 300, ce - 300) < 100.0, "the agent is quiet while the caller talks");
    }

    async fn a_sip_callee_talking_over_the_greeting_stops_it_within_300_ms(backend) {
        let stt = whisper();
        let sip_port = free_udp_port();
        let app = sip_app(backend, sip_port, &stt).await;
        let ws = app.workspace("Voice").await;
        let greeting = "Thanks for calling Parley, the self hosted platform for voice and chat agents. \
                        We can help you with bookings, orders, returns and anything else you need today.";
        let agent = app.create_agent(&ws.live, json!({"name": "Ada", "first_message": greeting, "first_message_mode": "interruptible", "interruption_threshold_ms": 200})).await;
        // SIPp answers and, 3 s in, talks over the long greeting.
        let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
        let words = parley_speech::synthesise(&espeak, "wait, I have a question about my order").await;
        let (port, media) = (free_udp_port(), free_udp_port());
        let mut sipp = sipp_callee_saying(&words, port, media);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = place(&app, &ws.live, json!({"agent_id": agent["id"], "to": format!("sip:service@127.0.0.1:{port}")})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let id = r.body["id"].as_str().unwrap().to_owned();
        wait_for(&app, &ws.live, &id, ended).await;
        assert!(tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap().success());

        let segments = transcript(&app, &ws.live, &id).await;
        let first = &segments[0];
        assert_eq!((first["speaker"].clone(), first["interrupted"].clone()), (json!("agent"), json!(true)), "{segments:#?}");
        let kept = first["text"].as_str().unwrap();
        assert!(greeting.starts_with(kept) && kept.split_whitespace().count() < greeting.split_whitespace().count() * 2 / 3, "trimmed to the words played: {kept:?}");
        // From the recording (what was sent, cut where playback stopped):
        // the caller's speech starts on the left; the agent's audio on the
        // right stops within 300 ms of it.
        let j = app.get(&ws.live, &format!("/api/v1/calls/{id}/recording?redirect=true")).await;
        let wav = app.client.get(j.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap();
        let loud = |channel: usize, ms: i64| loudness(&wav, channel, ms, ms + 20) > 300.0;
        let caller_starts = (2000..8000).step_by(20).find(|ms| loud(0, *ms)).expect("the caller speaks");
        let agent_stops = (caller_starts..caller_starts + 3000).step_by(20).find(|ms| (0..10).all(|k| !loud(1, ms + k * 20))).expect("the agent stops");
        eprintln!("barge-in: the agent stopped {} ms after the caller began", agent_stops - caller_starts);
        assert!(agent_stops - caller_starts <= 300, "the agent stopped {} ms after the caller began", agent_stops - caller_starts);
        assert!(loudness(&wav, 1, caller_starts - 1000, caller_starts) > 300.0, "the agent was speaking when the caller began");
    }

    async fn a_test_mode_call_goes_through_the_speech_loop_when_an_engine_is_configured(backend) {
        let stt = whisper();
        let app = sip_app(backend, free_udp_port(), &stt).await;
        let ws = app.workspace("Voice").await;
        let agent = app.create_agent(&ws.test, json!({"name": "Ada", "first_message": "Hello, this is Ada."})).await;
        let r = place(&app, &ws.test, json!({"agent_id": agent["id"], "to": "+14155550123"})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.body["provider"], "simulated", "test keys never reach the telephone network");
        let id = r.body["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.test, &id, ended).await;
        assert_eq!((call["status"].clone(), call["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")), "{call}");
        // The simulated caller's lines were spoken (espeak-ng), heard by
        // whisper, and answered; the turns are timed like a real call's.
        let segments = transcript(&app, &ws.test, &id).await;
        let caller: Vec<&str> = segments.iter().filter(|s| s["speaker"] == "caller").map(|s| s["text"].as_str().unwrap()).collect();
        assert_eq!(caller.len(), parley_voice::simulated::CALLER_LINES.len(), "{segments:#?}");
        // Recognition accuracy is measured above (≥ 90% of a longer line);
        // whisper tiny.en hears these short espeak-ng lines less well, so
        // here they need only come through as the caller's words.
        let (said, heard) = (parley_voice::simulated::CALLER_LINES.join(" "), caller.join(" "));
        assert!(recall(&said, &heard) >= 0.5, "whisper heard {heard:?} for {said:?}");
        let timed = segments.iter().filter(|s| s["latency"].is_object()).count();
        let brief: Vec<String> = segments.iter().map(|s| format!("{} {}-{} {}", s["speaker"], s["start_ms"], s["end_ms"], s["text"])).collect();
        assert_eq!(timed, 2, "both caller lines were answered: {brief:#?}");
        assert_eq!(call["latency"]["turns"], 2);
    }

    async fn an_inbound_sip_call_is_routed_by_trigger_and_the_agent_hears_its_keys(backend) {
        let stt = whisper();
        let sip_port = free_udp_port();
        let app = sip_app(backend, sip_port, &stt).await;
        let ws = app.workspace("Voice").await;
        let r = app.post(&ws.live, "/api/v1/channels", json!({"type": "voice", "name": "Main line", "config": {"number": "+14155550100"}})).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let channel_id = r.body["id"].clone();
        assert_eq!(r.body["address"], "+14155550100");
        // Two agents: the voice trigger of the higher priority one wins.
        let sales = app.create_agent(&ws.live, json!({"name": "Sales", "priority": 1})).await;
        let support = app.create_agent(&ws.live, json!({"name": "Support", "priority": 5, "first_message": "Support, hello."})).await;
        for agent in [&sales, &support] {
            let t = app.post(&ws.live, &format!("/api/v1/agents/{}/triggers", agent["id"]), json!({"event": "call.inbound", "channel": "voice"})).await;
            assert_eq!(t.status, 201, "{}", t.text);
        }
        // Another workspace cannot claim the same live number.
        let other = app.workspace("Other").await;
        let taken = app.post(&other.live, "/api/v1/channels", json!({"type": "voice", "name": "Mine", "config": {"number": "+14155550100"}})).await;
        assert_eq!(taken.status, 409, "{}", taken.text);

        // SIPp calls the number (without its +, as trunks often do), presses 1, 2, # and hangs up.
        let mut sipp = sipp_caller("uac_presses_keys.xml", format!("127.0.0.1:{sip_port}").parse().unwrap(), "14155550100");
        let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
        assert!(status.success(), "SIPp's call was answered and went as scripted: {status:?}");

        let list = app.get(&ws.live, "/api/v1/calls?direction=inbound").await.body;
        assert_eq!(list["total"], 1, "{list}");
        let id = list["items"][0]["id"].as_str().unwrap().to_owned();
        let call = wait_for(&app, &ws.live, &id, ended).await;
        assert_eq!(call["agent_id"], support["id"]);
        assert_eq!((call["direction"].clone(), call["from"].clone(), call["to"].clone()), (json!("inbound"), json!("+14155550123"), json!("+14155550100")));
        assert_eq!((call["channel_id"].clone(), call["provider"].clone()), (channel_id, json!("sip")));
        assert_eq!((call["status"].clone(), call["ended_reason"].clone()), (json!("completed"), json!("caller_hangup")));
        let segments = transcript(&app, &ws.live, &id).await;
        assert_eq!(segments[0]["text"], "Support, hello.");
        let keys = segments.iter().position(|s| s["text"] == "[pressed 12#]").unwrap_or_else(|| panic!("{segments:#?}"));
        assert_eq!(segments[keys]["speaker"], "caller");
        assert!(segments[keys + 1..].iter().any(|s| s["speaker"] == "agent"), "the agent answered the keys: {segments:#?}");
        // The caller is a contact, the call has its conversation on the channel.
        let conversation = app.get(&ws.live, &format!("/api/v1/conversations/{}", call["conversation_id"])).await.body;
        assert_eq!((conversation["channel"].clone(), conversation["kind"].clone()), (json!("voice"), json!("call")));
        assert_eq!(conversation["agent_id"], support["id"]);
        assert!(call["contact_id"].is_i64());
        assert_eq!(app.events(ws.id, Mode::Live, "call.completed").await.len(), 1);

        // A number nobody has is refused (404): SIPp's scenario fails, and nothing is stored.
        let mut sipp = sipp_caller("uac_presses_keys.xml", format!("127.0.0.1:{sip_port}").parse().unwrap(), "+19995550000");
        let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
        assert!(!status.success());
        assert_eq!(app.get(&ws.live, "/api/v1/calls?direction=inbound").await.body["total"], 1);
    }
}
