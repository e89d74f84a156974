//! Rules of this crate's shape that the compiler does not check, read from
//! its sources (docs/architecture.md says why):
//!
//! - one way to open a write transaction: a unit of work
//!   (`Services::begin`, `transaction`, `write`; `Work::begin_on` before
//!   there are services). A transaction opened on the database directly
//!   would commit without the signals live views wait for (a call's
//!   transcript lines once reached no listener that way) and without its
//!   after-commit steps, so the sources may not do it anywhere but `unit.rs`;
//! - the agent runtime is above this crate: services never name it, and the
//!   `agents` area never calls into `messaging` (messaging calls routing to
//!   queue a run; the runtime, above both, sends the reply), so there is no
//!   circle between the two.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Every `.rs` file under `src/` (or `src/<area>`).
fn files_under(area: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(area);
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(!files.is_empty(), "no sources under {}", root.display());
    files
}

/// `(file:line: text)` of each code line (comments aside) of `files` that `bad` says is one.
fn lines_where(files: &[PathBuf], bad: impl Fn(&Path, &str) -> bool) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if bad(file, code) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn only_the_unit_of_work_opens_a_transaction() {
    let files = files_under("");
    assert!(files.len() > 20, "the sources were not found");
    let offenders = lines_where(&files, |file, code| !file.ends_with("unit.rs") && code.contains("db.begin()"));
    assert!(offenders.is_empty(), "transactions opened outside the unit of work:\n{}", offenders.join("\n"));
}

#[test]
fn services_never_reach_up_to_the_runtime_and_agents_never_call_messaging() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("agent-runtime"), "parley-services depends on the agent runtime");
    let upward = lines_where(&files_under(""), |_, code| code.contains("parley_agent_runtime"));
    assert!(upward.is_empty(), "services name the runtime:\n{}", upward.join("\n"));
    let circle = lines_where(&files_under("agents"), |_, code| code.contains("messaging"));
    assert!(circle.is_empty(), "the agents area calls messaging:\n{}", circle.join("\n"));
}
