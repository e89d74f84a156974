//! The turn models run in Rust as pipecat runs them in Python: the same
//! Whisper features, the same Smart Turn probability, the same Silero
//! speech probabilities (checked against pipecat 1.14.0's own feature code
//! and onnxruntime's Python API on the same audio).

use std::process::Command;

use parley_speech::espeak::Espeak;
use parley_speech::local_servers::{turn_model_paths, turn_models};
use parley_speech::silero::SileroStream;
use parley_speech::smart_turn::Features;
use parley_speech::synthesise;

/// Runs `script` with the audio (f32, little-endian) in a file as argv[1]
/// and `mode` as argv[2]; it prints f32 values, one per line.
fn python(script: &str, mode: &str, audio: &[f32]) -> Vec<f32> {
    let dir = std::env::temp_dir().join(format!("parley-turn-models-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("audio-{}.f32", audio.len()));
    std::fs::write(&path, audio.iter().flat_map(|s| s.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    let paths = turn_model_paths();
    let out = Command::new("python3")
        .args(["-c", script, path.to_str().unwrap(), mode])
        .env("SILERO", &paths.silero_vad)
        .env("SMART_TURN", &paths.smart_turn)
        // pipecat's own feature code, loaded by path (not its package, which needs more).
        .env("FEATURES", paths.smart_turn.parent().unwrap().parent().unwrap().join("_whisper_features.py"))
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| l.trim().parse().unwrap()).collect()
}

async fn sentence(text: &str) -> Vec<i16> {
    synthesise(&Espeak::new("en-us", 160).unwrap(), text).await
}

fn wide(pcm: &[i16]) -> Vec<f32> {
    parley_speech::resample::resample(pcm, 8000, 16000).iter().map(|s| f32::from(*s) / 32768.0).collect()
}

/// pipecat's features of the audio (its last 8 s, zeros in front), then
/// either the features themselves or Smart Turn's answer to them.
const PIPECAT_SMART_TURN: &str = r#"
import os, sys, numpy as np, onnxruntime as ort
import importlib.util as u
spec = u.spec_from_file_location("whisper_features", os.environ["FEATURES"])
m = u.module_from_spec(spec); spec.loader.exec_module(m)
a = np.fromfile(sys.argv[1], dtype="<f4")
a = a[-128000:]
a = np.pad(a, (128000 - len(a), 0))
f = m.compute_whisper_log_mel_features(a, do_normalize=True)
if sys.argv[2] == "features":
    print("\n".join(repr(float(v)) for v in f.reshape(-1)))
else:
    s = ort.InferenceSession(os.environ["SMART_TURN"], providers=["CPUExecutionProvider"])
    print(float(s.run(None, {"input_features": f[None].astype(np.float32)})[0][0][0]))
"#;

const ORT_SILERO_8K: &str = r#"
import os, sys, numpy as np, onnxruntime as ort
a = np.fromfile(sys.argv[1], dtype="<f4")
s = ort.InferenceSession(os.environ["SILERO"], providers=["CPUExecutionProvider"])
state, context = np.zeros((2, 1, 128), np.float32), np.zeros((1, 32), np.float32)
for i in range(0, len(a) - 255, 256):
    x = np.concatenate([context, a[None, i:i + 256]], axis=1)
    out, state = s.run(None, {"input": x, "state": state, "sr": np.array(8000, dtype=np.int64)})
    context = x[:, -32:]
    print(float(out[0][0]))
"#;

#[tokio::test]
async fn whisper_features_match_pipecats() {
    let audio = wide(&sentence("Please turn off the lights.").await);
    let ours = Features::new().compute(&audio);
    let theirs = python(PIPECAT_SMART_TURN, "features", &audio);
    assert_eq!(ours.len(), theirs.len());
    let worst = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-4, "largest difference {worst}");
}

#[tokio::test]
async fn smart_turn_answers_as_onnxruntime_in_python_does() {
    let models = turn_models();
    for text in ["Please turn off the lights.", "Can you tell me about the"] {
        let mut audio = vec![0.0; 8000];
        audio.extend(wide(&sentence(text).await));
        audio.extend(vec![0.0; 3200]);
        let ours = models.turn.probability(&audio).unwrap();
        let theirs = python(PIPECAT_SMART_TURN, "probability", &audio)[0];
        // The output is quantised (steps of ~0.04 in logit): at most a step apart.
        let logit = |p: f32| (p / (1.0 - p)).ln();
        assert!((logit(ours) - logit(theirs)).abs() <= 0.04, "{text}: {ours} vs {theirs}");
    }
}

#[tokio::test]
async fn silero_hears_speech_as_onnxruntime_in_python_does() {
    let models = turn_models();
    let mut pcm = vec![0i16; 4000];
    pcm.extend(sentence("I would like to book a table for two").await);
    pcm.extend(vec![0i16; 4000]);
    let mut stream = SileroStream::new(models.vad.clone());
    // The stream resets its state only after long quiet: never here.
    let ours: Vec<f32> = pcm.chunks(160).flat_map(|f| stream.push(f, false)).collect();
    let theirs =
        python(ORT_SILERO_8K, "probabilities", &pcm.iter().map(|s| f32::from(*s) / 32768.0).collect::<Vec<_>>());
    assert_eq!(ours.len(), theirs.len());
    let worst = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst < 1e-4, "largest difference {worst}");
    assert!(ours.iter().filter(|p| **p > 0.5).count() > ours.len() / 3, "most of it is speech");
}
