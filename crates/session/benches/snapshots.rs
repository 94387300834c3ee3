//! Workspace snapshots on a 10,000-file repository (100 folders x 100 files of 4 KiB, 40 MB):
//! what one turn that runs a tool costs (`session::snapshots`): the before-snapshot of an
//! unchanged workspace, and the after-snapshot with 10 files changed, their difference,
//! and their contents (what a turn's end does). The first snapshot (every file hashed once, per folder and for good) is
//! made before measuring.
//!
//! The tree is generated under `$TMPDIR/agent-snapshots-bench-v1/` and reused.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use session::snapshots::Shadow;

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;
const FILE_BYTES: usize = 4096;

/// The workspace, made once: `work/` with the files, `store/` the shadow store.
fn tree() -> PathBuf {
    let base = std::env::temp_dir().join("agent-snapshots-bench-v1");
    let work = base.join("work");
    if !work.join("done").is_file() {
        let _ = fs::remove_dir_all(&base);
        for dir in 0..DIRS {
            let folder = work.join(format!("src{dir:03}"));
            fs::create_dir_all(&folder).unwrap();
            for file in 0..FILES_PER_DIR {
                let line = format!("// file {dir}/{file}: some source text\n");
                let body = line.repeat(FILE_BYTES / line.len() + 1);
                fs::write(folder.join(format!("f{file:03}.rs")), &body[..FILE_BYTES]).unwrap();
            }
        }
        fs::write(work.join("done"), "").unwrap();
    }
    base
}

/// Rewrites 10 files, each with the round's number.
fn change(work: &Path, round: u64) {
    for n in 0..10 {
        let path = work.join(format!("src{:03}/f{:03}.rs", n * 7, n * 3));
        fs::write(path, format!("// changed in round {round}\n")).unwrap();
    }
}

fn snapshots(c: &mut Criterion) {
    let base = tree();
    let work = base.join("work");
    let shadow = Shadow::open(&base.join("store"), &work);
    black_box(shadow.snapshot().unwrap());
    let mut group = c.benchmark_group("snapshots_10k_files");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("unchanged", |b| {
        b.iter(|| black_box(shadow.snapshot().unwrap()));
    });
    let mut round = 0;
    group.bench_function("turn_with_10_files_changed", |b| {
        b.iter(|| {
            let before = shadow.snapshot().unwrap();
            round += 1;
            change(&work, round);
            let after = shadow.snapshot().unwrap();
            let changes = shadow.changes(&before.tree, &after.tree).unwrap();
            let blobs: Vec<&str> = changes
                .iter()
                .flat_map(|change| [change.before.as_deref(), change.after.as_deref()])
                .flatten()
                .collect();
            black_box(shadow.read_blobs(&blobs, u64::MAX).unwrap());
        });
    });
    group.finish();
}

criterion_group!(benches, snapshots);
criterion_main!(benches);
