//! Shared helpers of the integration tests: finding the corpus and comparing JSON.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The test corpus: `$AGENT_CORPUS_DIR`, else `shared/corpus` beside an ancestor of this
/// crate. `None` (with a loud note on stderr) when it is missing outside CI; a panic in CI,
/// where a missing corpus must fail the run.
pub fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENT_CORPUS_DIR") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "AGENT_CORPUS_DIR={} is not a directory",
            dir.display()
        );
        return Some(dir);
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    for ancestor in manifest.ancestors() {
        let candidate = ancestor.join("shared").join("corpus");
        if candidate.join("MANIFEST.tsv").is_file() {
            return Some(candidate);
        }
    }
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!(
            "test corpus not found: set AGENT_CORPUS_DIR or put shared/corpus beside the workspace"
        );
    }
    eprintln!(
        "\n*** SKIPPED: test corpus not found (set AGENT_CORPUS_DIR or put shared/corpus beside the workspace) ***\n"
    );
    None
}

/// Files in `dir` whose names end with `suffix`, sorted.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|error| panic!("reading {}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file() && path.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// `value` without null-valued object fields, recursively (the expected files omit nulls).
pub fn drop_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key, drop_nulls(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}

/// The file name without its extension.
pub fn stem(path: &Path) -> String {
    path.file_name()
        .unwrap()
        .to_string_lossy()
        .rsplit_once('.')
        .map(|(stem, _)| stem.to_owned())
        .unwrap()
}

/// Reads a JSON file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("parsing {}: {error}", path.display()))
}
