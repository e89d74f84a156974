//! Real voice through the API: `telephony.provider = "sip"` with SIPp as
//! the far end, whisper tiny.en (Wyoming) hearing the caller, espeak-ng
//! speaking for the agent, the agent runtime answering.

use std::time::Duration;

use parley_domain::Mode;
use parley_speech::local_servers::{LocalServer, recall, whisper};
use parley_voice::testing::{free_udp_port, sipp_callee_line, sipp_callee_saying, sipp_caller};
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
        s.metrics.token = Some(crate::metrics::TOKEN.into());
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

/// Where a stereo WAV's `channel` is loud, 20 ms frame by frame (ms).
fn loud_frames(wav: &[u8], channel: usize) -> Vec<i64> {
    let reader = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
    let side: Vec<f64> = reader
        .into_samples::<i16>()
        .map(Result::unwrap)
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|f| f64::from(f[channel]))
        .collect();
    side.chunks(160)
        .enumerate()
        .filter(|(_, f)| (f.iter().map(|x| x * x).sum::<f64>() / f.len() as f64).sqrt() > 300.0)
        .map(|(i, _)| i as i64 * 20)
        .collect()
}

async fn speak(text: &str) -> Vec<i16> {
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).expect("espeak-ng is installed");
    parley_speech::synthesise(&espeak, text).await
}

fn quiet(ms: usize) -> Vec<i16> {
    vec![0; ms * 8]
}

/// A call placed to a SIPp callee whose `line` starts as it picks up; the
/// call's id, and SIPp's run.
async fn call_line(
    app: &TestApp,
    key: &str,
    agent: &Value,
    line: &[i16],
    extra: Value,
) -> (String, std::process::Child) {
    let (port, media) = (free_udp_port(), free_udp_port());
    let sipp = sipp_callee_line(line, port, media);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut body = json!({"agent_id": agent["id"], "to": format!("sip:service@127.0.0.1:{port}")});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let r = place(app, key, body).await;
    assert_eq!(r.status, 201, "{}", r.text);
    (r.body["id"].as_str().unwrap().to_owned(), sipp)
}

async fn recording(app: &TestApp, key: &str, id: &str) -> Vec<u8> {
    let j = app.get(key, &format!("/api/v1/calls/{id}/recording?redirect=true")).await;
    assert_eq!(j.status, 200, "{}", j.text);
    app.client.get(j.body["url"].as_str().unwrap()).send().await.unwrap().bytes().await.unwrap().to_vec()
}

async fn transcript(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    app.get(key, &format!("/api/v1/calls/{id}/transcript")).await.body["segments"].as_array().unwrap().clone()
}

const VOICEMAIL: &str =
    "You have reached Alex Smith. I am not available right now. Please leave a message after the tone.";
const MESSAGE: &str = "Hi Alex, this is Ada from Acme. Your order is ready. Goodbye.";

both_backends! {
    async fn an_outbound_sip_call_tells_a_voicemail_from_a_person_and_leaves_the_message_after_the_beep(backend) {
        let stt = whisper();
        let sip_port = free_udp_port();
        let app = sip_app(backend, sip_port, &stt).await;
        let ws = app.workspace("Voice").await;
        let agent = app.create_agent(&ws.live, json!({"name": "Ada", "first_message": "Hi, this is Ada from Acme.",
            "voice": {"tts_engine": "espeak", "voice_id": "en-us"},
            "voicemail": {"action": "hang_up"}})).await;
        assert_eq!(agent["voicemail"], json!({"action": "hang_up", "message": null, "beep_wait_s": 30, "on_screening": "respond"}));

        // Two callees at once: an answering machine (its greeting, a 1 kHz
        // beep, then silence), called with a message to leave (the call's
        // setting over the agent's), and a person who says "Hello?" (the
        // agent's: a person is never hung up on).
        let mut machine = quiet(300);
        machine.extend(speak(VOICEMAIL).await);
        machine.extend(quiet(300));
        machine.extend((0..4000).map(|n| (16_384.0 * (std::f64::consts::TAU * 1000.0 * n as f64 / 8000.0).sin()) as i16));
        machine.extend(quiet(9000));
        let mut person = quiet(300);
        person.extend(speak("hello?").await);
        person.extend(quiet(7000));
        let leave = json!({"voicemail": {"action": "leave_message", "message": MESSAGE}});
        let (voicemail, mut sipp_machine) = call_line(&app, &ws.live, &agent, &machine, leave).await;
        let (human, mut sipp_person) = call_line(&app, &ws.live, &agent, &person, json!({})).await;

        let call = wait_for(&app, &ws.live, &voicemail, ended).await;
        assert_eq!((call["status"].clone(), call["ended_reason"].clone(), call["answered_by"].clone()),
            (json!("completed"), json!("voicemail"), json!("machine")), "{call}");
        let d = &call["machine_detection"];
        assert_eq!(d["message_left"], true, "{call}");
        assert!(["long_greeting", "max_words", "phrase"].contains(&d["cause"].as_str().unwrap()), "{d}");
        assert!(d["decided_ms"].as_i64().unwrap() < 4000, "decided within the first seconds: {d}");
        let beep_end = d["beep_end_ms"].as_i64().expect("the beep was heard");
        let segments = transcript(&app, &ws.live, &voicemail).await;
        let agent_said: Vec<&str> = segments.iter().filter(|s| s["speaker"] == "agent").map(|s| s["text"].as_str().unwrap()).collect();
        assert_eq!(agent_said, vec![MESSAGE], "the message, and no greeting: {segments:#?}");
        // In the recording the message starts after the beep's end, and the
        // agent's side is silent until then.
        let wav = recording(&app, &ws.live, &voicemail).await;
        let onset = *loud_frames(&wav, 1).first().expect("the agent spoke");
        let beep_heard = loud_frames(&wav, 0).into_iter().filter(|&t| t < onset).max().unwrap() + 20;
        assert!((beep_heard - beep_end).abs() <= 60, "beep end {beep_end} ms, in the recording {beep_heard}");
        assert!(onset >= beep_heard && onset <= beep_heard + 1500, "message at {onset} ms, beep over at {beep_heard}");
        assert!(loudness(&wav, 1, 0, beep_heard) < 50.0, "the agent did not talk over the greeting or the beep");
        assert!(tokio::task::spawn_blocking(move || sipp_machine.wait()).await.unwrap().unwrap().success());

        let call = wait_for(&app, &ws.live, &human, ended).await;
        assert_eq!((call["ended_reason"].clone(), call["answered_by"].clone(), call["machine_detection"]["cause"].clone()),
            (json!("caller_hangup"), json!("human"), json!("after_greeting_silence")), "{call}");
        let segments = transcript(&app, &ws.live, &human).await;
        let greeting = segments.iter().find(|s| s["speaker"] == "agent").expect("greeted");
        assert_eq!((greeting["text"].clone(), greeting["interrupted"].clone()), (json!("Hi, this is Ada from Acme."), json!(false)));
        let hello = segments.iter().find(|s| s["speaker"] == "caller").expect("the hello is written");
        assert!(greeting["start_ms"].as_i64() >= hello["end_ms"].as_i64().map(|e| e - 700), "greeted after the hello: {segments:#?}");
        assert!(greeting["start_ms"].as_i64().unwrap() < 3000, "{segments:#?}");
        assert!(tokio::task::spawn_blocking(move || sipp_person.wait()).await.unwrap().unwrap().success());

        // One machine event, for the machine.
        let events = app.get(&ws.live, "/api/v1/events?type=call.machine_detected").await.body;
        let items = events["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{events}");
        assert_eq!((items[0]["data"]["id"].clone(), items[0]["data"]["answered_by"].clone()), (json!(voicemail), json!("machine")));
    }

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
        // Each timed turn is in the instance's histograms, to the millisecond.
        let text = crate::metrics::scrape(&app).await;
        for (family, field) in [("voice_to_voice", "voice_to_voice_ms"), ("end_of_turn", "end_of_turn_ms")] {
            let total: f64 = segments.iter().filter_map(|s| s["latency"][field].as_i64()).sum::<i64>() as f64 / 1000.0;
            let series = |part: &str| crate::metrics::sample(&text, &format!("parley_call_{family}_seconds_{part}"));
            assert_eq!(series("count"), Some(2.0), "{text}");
            assert!((series("sum").unwrap() - total).abs() < 1e-6, "{family}: {:?} against {total}", series("sum"));
        }
        crate::metrics::promtool_accepts(&text);
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

/// Greetings over SIP (`first_message_mode`): a callee who talks as they
/// pick up never cuts the greeting, and `wait_for_callee` speaks after
/// their hello. One backend: nothing here is stored differently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sip_callee_talking_at_pick_up_gets_the_whole_greeting_and_wait_for_callee_waits_for_hello() {
    let stt = whisper();
    let sip_port = free_udp_port();
    let app = sip_app(Backend::Sqlite, sip_port, &stt).await;
    let ws = app.workspace("Voice").await;
    let greeting = "Thank you for calling Acme. How can I help you today?";
    let first = app.create_agent(&ws.live, json!({"name": "Ada", "first_message": greeting})).await;
    let waits = app
        .create_agent(
            &ws.live,
            json!({"name": "Bea", "first_message": "Hi, this is Bea from Acme.",
        "first_message_mode": "wait_for_callee", "first_message_wait_s": 5}),
        )
        .await;

    // (Whisper tiny.en hears this phrase whole from espeak-ng; "hello, is
    // this about my order" it hears as "Hello, it's my order.", measured.)
    let mut talks = speak("hello, I am calling about my order").await;
    talks.extend(quiet(9000));
    let mut hello = quiet(1500);
    hello.extend(speak("hello?").await);
    hello.extend(quiet(6000));
    let (talked_over, mut sipp_a) = call_line(&app, &ws.live, &first, &talks, json!({})).await;
    let (waited, mut sipp_b) = call_line(&app, &ws.live, &waits, &hello, json!({})).await;

    wait_for(&app, &ws.live, &talked_over, ended).await;
    let segments = transcript(&app, &ws.live, &talked_over).await;
    let g = segments.iter().find(|s| s["speaker"] == "agent").unwrap();
    assert_eq!((g["text"].as_str(), g["interrupted"].clone()), (Some(greeting), json!(false)), "{segments:#?}");
    assert!(
        segments.iter().all(|s| s["start_ms"].as_i64().unwrap() >= 0),
        "no segment before the answer: {segments:#?}"
    );
    let caller = segments.iter().find(|s| s["speaker"] == "caller").expect("the callee's words are written");
    assert!(recall("hello I am calling about my order", caller["text"].as_str().unwrap()) >= 0.6, "{caller}");
    assert!(
        segments.iter().filter(|s| s["speaker"] == "agent").count() >= 2,
        "their question was answered after the greeting: {segments:#?}"
    );
    // The recording has the whole greeting: the agent's side is loud to its end.
    let wav = recording(&app, &ws.live, &talked_over).await;
    let (gs, ge) = (g["start_ms"].as_i64().unwrap(), g["end_ms"].as_i64().unwrap());
    assert!(loudness(&wav, 1, ge - 600, ge - 100) > 300.0 && loudness(&wav, 1, gs + 100, gs + 600) > 300.0);
    assert!(tokio::task::spawn_blocking(move || sipp_a.wait()).await.unwrap().unwrap().success());

    wait_for(&app, &ws.live, &waited, ended).await;
    let segments = transcript(&app, &ws.live, &waited).await;
    assert_eq!(segments[0]["speaker"], "caller", "the callee spoke first: {segments:#?}");
    let g = segments.iter().find(|s| s["speaker"] == "agent").expect("greeted");
    assert_eq!(g["text"], "Hi, this is Bea from Acme.");
    let (hello_end, greeted) = (segments[0]["end_ms"].as_i64().unwrap(), g["start_ms"].as_i64().unwrap());
    assert!(
        greeted >= hello_end && greeted < 5000,
        "greeted at {greeted} ms, after the hello ({hello_end}) and before the wait's end: {segments:#?}"
    );
    assert!(tokio::task::spawn_blocking(move || sipp_b.wait()).await.unwrap().unwrap().success());
}

both_backends! {
    // Issue 35: a warm transfer through the API, as a model asks for it. The
    // caller asks for a person; the model transfers warm to a desk that rings
    // and never answers: after the ring timeout the agent is back, and the
    // model is told why. It then transfers warm to a desk that answers (SIPp
    // echoing what it gets): the person hears the summary, then caller and
    // person are joined and the caller's words reach the desk and come back.
    // The call ends `transferred` to that desk; the transcript and the
    // recording keep the person.
    async fn a_warm_transfer_through_the_api_comes_back_when_nobody_answers_then_joins_the_person(backend) {
    use crate::tools::{Say, ScriptedEngine};
    let stt = whisper();
    let sip_port = free_udp_port();
    let (ringing_port, ringing_media) = (free_udp_port(), free_udp_port());
    let (desk_port, desk_media) = (free_udp_port(), free_udp_port());
    let (ringing, desk) = (format!("sip:desk@127.0.0.1:{ringing_port}"), format!("sip:desk@127.0.0.1:{desk_port}"));
    let summary = "I have Ana on the line, her parcel never arrived and she would like a refund.";
    let warm = |to: &str| json!({"to": to, "mode": "warm", "summary": summary}).to_string();
    // After a tool that ends its turn the model is asked once more, for
    // what to say first (here: the words before each transfer).
    let engine = ScriptedEngine::start(vec![
        Say::Calls(vec![("call_1", "transfer_call", warm(&ringing))]),
        Say::Text("Please hold."),
        Say::Calls(vec![("call_2", "transfer_call", warm(&desk))]),
        Say::Text("Let me try the other desk."),
        Say::Text("Is there anything else?"),
    ])
    .await;
    let (url, whisper_port) = (engine.url.clone(), stt.port);
    let app = TestApp::spawn_with(backend, move |s| {
        s.telephony.provider = "sip".into();
        s.telephony.sip.bind = format!("127.0.0.1:{sip_port}");
        s.telephony.sip.trusted_addresses = vec!["127.0.0.1".into()];
        s.speech.stt.insert("whisper".into(), json!({"kind": "wyoming", "host": "127.0.0.1", "port": whisper_port}));
        s.speech.default_stt = Some("whisper".into());
        s.text_engines.insert("openai".into(), json!({"base_url": url, "model": "gpt-test", "max_retries": 0}));
        s.voice.ring_timeout_seconds = 3;
    })
    .await;
    let ws = app.workspace("Voice").await;
    let agent = app
        .create_agent(
            &ws.live,
            json!({"name": "Ada", "first_message": "Hi, this is Ada.", "text_engine": "openai",
                "voice": {"tts_engine": "espeak", "voice_id": "en-us"},
                "tools": [{"type": "builtin", "name": "transfer_call"}]}),
        )
        .await;
    let mut ring_forever = parley_voice::testing::sipp_callee("uas_rings_forever.xml", ringing_port, ringing_media);
    let mut echoing = std::process::Command::new("sipp")
        .args(["-sn", "uas", "-i", "127.0.0.1", "-p", &desk_port.to_string(), "-mp", &desk_media.to_string()])
        .args(["-rtp_echo", "-m", "1", "-timeout", "60s", "-timeout_error"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The caller: quiet through the greeting, asks for a person, holds
    // through a missed transfer and the briefing, then talks to the desk.
    let later = "hello, are you there? my parcel never came";
    let mut line = quiet(2500);
    line.extend(speak("I would like to talk to a person, please").await);
    line.extend(quiet(14_000));
    line.extend(speak(later).await);
    line.extend(quiet(3000));
    let (id, mut caller) = call_line(&app, &ws.live, &agent, &line, json!({})).await;

    let call = wait_for(&app, &ws.live, &id, ended).await;
    let segments = transcript(&app, &ws.live, &id).await;
    assert_eq!(
        (call["status"].clone(), call["ended_reason"].clone(), call["transfer_to"].clone()),
        (json!("completed"), json!("transferred"), json!(desk)),
        "{call} {segments:#?}"
    );
    // The model was told the first desk did not answer, and tried the
    // second. (Counted once the post-call analysis, a job after the end,
    // has asked it too.)
    let analysed = |c: &Value| c["analysis"]["analyzed_at"].is_string();
    assert!(analysed(&wait_for(&app, &ws.live, &id, analysed).await));
    let requests = engine.requests();
    let told = requests[2]["messages"].as_array().unwrap().last().is_some_and(|m| {
        m["role"] == "user"
            && m["content"].as_str().is_some_and(|c| c.contains(&ringing) && c.contains("nobody answered"))
    });
    assert!(told, "{:#?}", requests[2]["messages"]);
    // Nothing asked after the second transfer but the post-call analysis.
    assert_eq!(requests.len(), 5, "{requests:#?}");
    assert_eq!(requests[4]["tools"][0]["function"]["name"], "submit_analysis", "{:#?}", requests[4]);
    // The summary was said once (to the desk that answered), and the desk's
    // line gave it back; then the caller's words went there and came back.
    let said = |speaker: &str, text: &str| {
        segments.iter().filter(|s| s["speaker"] == speaker && recall(text, s["text"].as_str().unwrap()) >= 0.6).count()
    };
    let briefings = segments.iter().filter(|s| s["speaker"] == "agent" && s["text"] == summary).count();
    assert_eq!(briefings, 1, "{segments:#?}");
    assert_eq!((said("human", summary), said("caller", later), said("human", later)), (1, 1, 1), "{segments:#?}");
    let back = segments.iter().rfind(|s| s["speaker"] == "human").unwrap();
    let (from, to) = (back["start_ms"].as_i64().unwrap(), back["end_ms"].as_i64().unwrap());
    let wav = crate::calls::wait_for(&app, &ws.live, &id, |c| c["recording"]["status"] == "available").await;
    assert_eq!(wav["recording"]["status"], "available");
    let wav = recording(&app, &ws.live, &id).await;
    assert!(loudness(&wav, 1, from, to) > 300.0, "the desk is on the recording's right channel");
    for (who, sipp) in [("caller", &mut caller), ("ringing desk", &mut ring_forever), ("desk", &mut echoing)] {
        let status = sipp.wait().unwrap();
        assert!(status.success(), "the {who}'s SIPp: {status:?}");
    }
}
}
