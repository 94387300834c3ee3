//! The directory walk Glob and Grep share: ripgrep's walker with its ignore rules, run on
//! every core, each thread collecting into its own vector.
//!
//! Honoured: `.gitignore` (also outside a git repository, and in parent directories),
//! `.git/info/exclude`, the global git excludes file, `.ignore`. Hidden files and
//! directories are walked (ripgrep's `--hidden`: `.github/workflows/ci.yml` is a file like
//! any other); `.git` itself never is. Symbolic links are not followed, so a walk never
//! leaves the directory it was confined to.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use ignore::{DirEntry, WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

/// Threads a walk uses: every core, at most 12 (more only adds contention).
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(12))
}

/// A walker over `root` with the settings above; `ignored` also walks what the ignore files
/// leave out (to count what a search missed).
pub(crate) fn walker(root: &Path, ignored: bool) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .parents(!ignored)
        .ignore(!ignored)
        .git_ignore(!ignored)
        .git_global(!ignored)
        .git_exclude(!ignored)
        .require_git(false)
        .follow_links(false)
        .threads(threads())
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// Flushes a thread's results into the shared vector when the thread's visitor is dropped.
struct Local<T> {
    items: Vec<T>,
    sink: Arc<Mutex<Vec<T>>>,
}

impl<T> Drop for Local<T> {
    fn drop(&mut self) {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(&mut self.items);
    }
}

/// Walks `builder` in parallel. `make` builds one visitor per thread (holding that thread's
/// searcher and buffers); the visitor sees each regular file and pushes results. Stops
/// early when `cancel` fires. Unreadable entries are skipped.
pub(crate) fn collect<T, V, M>(builder: &WalkBuilder, cancel: &CancellationToken, make: M) -> Vec<T>
where
    T: Send,
    V: FnMut(&DirEntry, &mut Vec<T>) + Send,
    M: Fn() -> V,
{
    let sink = Arc::new(Mutex::new(Vec::new()));
    builder.build_parallel().run(|| {
        let mut visit = make();
        let mut local = Local {
            items: Vec::new(),
            sink: Arc::clone(&sink),
        };
        let cancel = cancel.clone();
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            if let Ok(entry) = entry
                && entry.file_type().is_some_and(|kind| kind.is_file())
            {
                visit(&entry, &mut local.items);
            }
            WalkState::Continue
        })
    });
    let mut items = sink.lock().unwrap_or_else(PoisonError::into_inner);
    std::mem::take(&mut *items)
}
