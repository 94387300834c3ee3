//! Grep over a generated ~50 MB tree (files_with_matches and content modes) and Glob over
//! 100,000 files, through the tools' real entry points (`Tool::call`).
//!
//! The trees are generated once under `$TMPDIR/agent-tools-bench-v1/` and reused (delete the
//! folder to regenerate). For ripgrep's numbers on the same trees:
//!
//! ```text
//! T=$TMPDIR/agent-tools-bench-v1
//! hyperfine -w 3 "rg -l XYZZY_NEEDLE $T/grep" "rg -n 'needle_[0-9]+' $T/grep" "rg --files -g '*.rs' $T/glob"
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use executor::{Tool, ToolContext, Workspace};
use serde_json::{Value, json};

/// Files of the grep tree, and their size: 2,500 x 20 KiB = 50 MB.
const GREP_DIRS: usize = 50;
const GREP_FILES_PER_DIR: usize = 50;
const GREP_FILE_BYTES: usize = 20 * 1024;
/// Files of the glob tree: 1,000 directories x 100 files.
const GLOB_DIRS: usize = 1_000;
const GLOB_FILES_PER_DIR: usize = 100;

const WORDS: [&str; 24] = [
    "let", "value", "config", "return", "error", "match", "struct", "impl", "self", "async",
    "await", "result", "option", "string", "vector", "buffer", "stream", "parse", "token",
    "window", "cursor", "layout", "render", "update",
];

/// A small deterministic generator (xorshift64*), so every run builds the same tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn bench_root() -> PathBuf {
    std::env::temp_dir().join("agent-tools-bench-v1")
}

/// Generates the trees unless a previous run completed them.
fn ensure_trees(root: &Path) {
    let done = root.join(".complete");
    if done.exists() {
        return;
    }
    let _ = fs::remove_dir_all(root);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let grep = root.join("grep");
    fs::create_dir_all(&grep).unwrap();
    // Ignored by both this crate's walker and ripgrep (`.ignore` needs no git repository).
    fs::write(grep.join(".ignore"), "*.tmp\n").unwrap();
    for dir in 0..GREP_DIRS {
        let dir_path = grep.join(format!("module_{dir:02}"));
        fs::create_dir_all(&dir_path).unwrap();
        for file in 0..GREP_FILES_PER_DIR {
            let mut text = String::with_capacity(GREP_FILE_BYTES + 128);
            let rare = rng.below(100) == 0;
            while text.len() < GREP_FILE_BYTES {
                let words = 4 + rng.below(8);
                for index in 0..words {
                    if index > 0 {
                        text.push(' ');
                    }
                    text.push_str(WORDS[rng.below(WORDS.len())]);
                }
                if rng.below(400) == 0 {
                    text.push_str(&format!(" needle_{}", rng.below(1000)));
                }
                if rare && rng.below(200) == 0 {
                    text.push_str(" XYZZY_NEEDLE");
                }
                text.push('\n');
            }
            fs::write(dir_path.join(format!("file_{file:02}.rs")), &text).unwrap();
            if file % 10 == 0 {
                fs::write(dir_path.join(format!("scratch_{file:02}.tmp")), &text).unwrap();
            }
        }
    }
    let glob = root.join("glob");
    let extensions = ["rs", "txt", "md", "json"];
    for dir in 0..GLOB_DIRS {
        let dir_path = glob.join(format!("d{:02}/d{dir:04}", dir % 32));
        fs::create_dir_all(&dir_path).unwrap();
        for file in 0..GLOB_FILES_PER_DIR {
            let extension = extensions[file % extensions.len()];
            fs::write(dir_path.join(format!("f{file:03}.{extension}")), b"").unwrap();
        }
    }
    fs::write(&done, b"").unwrap();
}

fn bench_search(c: &mut Criterion) {
    let root = bench_root();
    ensure_trees(&root);
    let workspace = Arc::new(Workspace {
        cwd: root.clone(),
        additional_dirs: Vec::new(),
    });
    let set = tools::builtin(Arc::clone(&workspace), tools::PermissionConfig::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let call = |tool: &Arc<dyn Tool>, input: &Value| {
        let context = ToolContext::detached("toolu_bench".into(), Arc::clone(&workspace));
        let output = runtime.block_on(tool.call(input.clone(), context)).unwrap();
        assert!(!output.is_error);
        black_box(output)
    };
    let grep = set.tool("Grep").unwrap();
    let glob = set.tool("Glob").unwrap();
    let grep_root = root.join("grep");
    let glob_root = root.join("glob");

    let mut group = c.benchmark_group("search");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(10));
    let files = json!({"pattern": "XYZZY_NEEDLE", "path": grep_root, "head_limit": 0});
    group.bench_function("grep_50mb_files_with_matches", |b| {
        b.iter(|| call(&grep, &files))
    });
    let content = json!({
        "pattern": "needle_[0-9]+", "path": grep_root, "output_mode": "content", "head_limit": 0
    });
    group.bench_function("grep_50mb_content", |b| b.iter(|| call(&grep, &content)));
    let pattern = json!({"pattern": "**/*.rs", "path": glob_root});
    group.bench_function("glob_100k_files", |b| b.iter(|| call(&glob, &pattern)));
    group.finish();
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
