//! One way to open a write transaction in `parley-services`: a unit of
//! work (`Services::begin`, `transaction`, `write`; `Work::begin_on` before
//! there are services). A transaction opened on the database directly would
//! commit without the signals live views wait for (a call's transcript
//! lines once reached no listener that way) and without its after-commit
//! steps, so the sources may not do it anywhere but `unit.rs`.

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

#[test]
fn only_the_unit_of_work_opens_a_transaction() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 20, "the sources were not found under {}", root.display());
    let mut offenders = Vec::new();
    for file in &files {
        if file.ends_with("unit.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("db.begin()") {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(offenders.is_empty(), "transactions opened outside the unit of work:\n{}", offenders.join("\n"));
}
