//! ONNX Runtime, loaded at run time from a configured `libonnxruntime`
//! (the one in PyPI's `onnxruntime` wheel works; Parley never downloads
//! it), and a small pool of sessions per model so concurrent calls do not
//! queue behind one another.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;

/// Why a model cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("ONNX Runtime could not be loaded from {path}: {reason}")]
    Runtime { path: PathBuf, reason: String },
    #[error("the model {path} could not be loaded: {reason}")]
    Load { path: PathBuf, reason: String },
    #[error("the model failed: {0}")]
    Run(String),
}

impl From<ort::Error> for ModelError {
    fn from(e: ort::Error) -> Self {
        ModelError::Run(e.to_string())
    }
}

/// The process's one ONNX Runtime environment (the library allows one),
/// and the library it came from.
static ENVIRONMENT: OnceLock<Result<(PathBuf, Environment), String>> = OnceLock::new();

/// Loads ONNX Runtime from `library` (once per process; later calls with
/// another path get the first one's).
pub fn runtime(library: &Path) -> Result<&'static Environment, ModelError> {
    let loaded = ENVIRONMENT.get_or_init(|| {
        let builder = ort::init_from(library).map_err(|e| e.to_string())?;
        let environment = builder.with_name("parley").build().map_err(|e| e.to_string())?;
        Ok((library.to_owned(), environment))
    });
    match loaded {
        Ok((_, environment)) => Ok(environment),
        Err(reason) => Err(ModelError::Runtime { path: library.to_owned(), reason: reason.clone() }),
    }
}

/// Sessions of one model, each used by one caller at a time.
pub struct Sessions {
    sessions: Vec<Mutex<Session>>,
    /// Which session a caller waits for when all are busy (round robin).
    next: AtomicUsize,
}

impl Sessions {
    /// Loads `model` `count` times, each session single-threaded (a call's
    /// inference is small; parallelism comes from calls using different
    /// sessions), with every graph optimisation.
    pub fn load(environment: &Environment, model: &Path, count: usize) -> Result<Sessions, ModelError> {
        let load = || -> Result<Session, ort::Error> {
            Session::builder(environment)?
                .with_optimization_level(GraphOptimizationLevel::All)?
                .with_intra_threads(1)?
                .with_inter_threads(1)?
                .commit_from_file(model)
        };
        let sessions = (0..count.max(1))
            .map(|_| load().map(Mutex::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ModelError::Load { path: model.to_owned(), reason: e.to_string() })?;
        Ok(Sessions { sessions, next: AtomicUsize::new(0) })
    }

    /// A free session, else (all busy) the next in turn, waited for.
    pub fn get(&self) -> MutexGuard<'_, Session> {
        for session in &self.sessions {
            if let Ok(guard) = session.try_lock() {
                return guard;
            }
        }
        let session = &self.sessions[self.next.fetch_add(1, Ordering::Relaxed) % self.sessions.len()];
        session.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One session per core, as many as can run at once.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
