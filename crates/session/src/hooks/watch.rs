//! Claude Code's FileChanged hooks: files to watch are the FileChanged matchers' names
//! (`.envrc|.env`, relative to the working directory, or absolute) and the `watchPaths`
//! SessionStart, CwdChanged and FileChanged hooks answer with; when one is changed, made or
//! removed, the FileChanged hooks run with `file_path` and `event` (`change`, `add`,
//! `unlink`), once it has been quiet for [`SETTLE`] (Claude Code 2.1.197 waits for writes
//! to finish the same way). What their hooks write to `CLAUDE_ENV_FILE` runs before the
//! model's next commands, as a SessionStart hook's does.
//!
//! The watching is the kernel's (inotify, through the `notify` crate) on each file's folder,
//! so a file that does not exist yet is seen when it appears.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify::Watcher as _;
use serde_json::json;

use super::{Event, Hooks};

/// How long a file must stay quiet after a change before its hooks run: 500 ms (Claude Code
/// 2.1.197's `awaitWriteFinish.stabilityThreshold`).
pub const SETTLE: Duration = Duration::from_millis(500);

/// The most files one session watches (each is a line of `watchPaths` a hook can grow).
pub const MAX_FILES: usize = 1000;

/// The files a session watches for its FileChanged hooks. Dropping it stops the watching.
#[derive(Clone)]
pub struct FileWatcher {
    state: Arc<Mutex<State>>,
    task: Arc<tokio::task::AbortHandle>,
}

struct State {
    watcher: notify::RecommendedWatcher,
    /// Each watched file, with whether it existed when last seen.
    files: BTreeMap<PathBuf, bool>,
    /// The folders the kernel watches (each watched file's).
    folders: BTreeSet<PathBuf>,
}

impl std::fmt::Debug for FileWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("FileWatcher")
            .field("files", &state.files.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        for folder in &self.folders {
            let _ = self.watcher.unwatch(folder);
        }
    }
}

impl FileWatcher {
    /// Starts watching for `hooks`' FileChanged hooks (on the tokio runtime): the matchers'
    /// files, relative to `cwd`. `None` when there are no FileChanged hooks or the kernel
    /// refuses to watch (told as a line).
    pub fn start(hooks: &Hooks, cwd: &Path) -> Option<Self> {
        if !hooks.has(Event::FileChanged) {
            return None;
        }
        // What changed, at most once a file (bounded by what is watched), and a wake-up.
        let changed: Changed = Arc::default();
        let seen = Arc::clone(&changed);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // A file opened or read (a `cat`, the workspace snapshots' git) is not changed.
            if let Ok(event) = event
                && !matches!(event.kind, notify::EventKind::Access(_))
            {
                let (paths, wake) = &*seen;
                paths
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(event.paths);
                wake.notify_one();
            }
        });
        let watcher = match watcher {
            Ok(watcher) => watcher,
            Err(error) => {
                hooks.env().notices.say(&format!(
                    "warning: FileChanged hooks cannot watch files: {error}"
                ));
                return None;
            }
        };
        let state = Arc::new(Mutex::new(State {
            watcher,
            files: BTreeMap::new(),
            folders: BTreeSet::new(),
        }));
        let task = tokio::spawn(settle_and_run(
            changed,
            Arc::downgrade(&state),
            hooks.clone(),
        ));
        let watch = Self {
            state,
            task: Arc::new(task.abort_handle()),
        };
        watch.add(&hooks.file_changed_names(), cwd);
        Some(watch)
    }

    /// Watches `paths` too (relative ones from `cwd`); a folder the kernel will not watch is
    /// skipped.
    pub fn add(&self, paths: &[String], cwd: &Path) {
        add_to(&self.state, paths, cwd);
    }

    /// The files watched now.
    pub fn files(&self) -> Vec<PathBuf> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.files.keys().cloned().collect()
    }
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        // The last clone stops the task (the watcher goes with the state).
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

/// The paths the kernel said changed, and the wake-up of [`settle_and_run`].
type Changed = Arc<(Mutex<BTreeSet<PathBuf>>, tokio::sync::Notify)>;

/// Waits until the watched files are quiet for [`SETTLE`], then runs the FileChanged hooks
/// for each that changed, one at a time, and watches what they name. What changes while
/// the hooks run is their own doing (a hook that touches the file it watches) and is not
/// told again.
async fn settle_and_run(changed: Changed, state: std::sync::Weak<Mutex<State>>, hooks: Hooks) {
    let (paths, wake) = &*changed;
    loop {
        wake.notified().await;
        // Quiet for SETTLE: every change meanwhile starts the wait again.
        while tokio::time::timeout(SETTLE, wake.notified()).await.is_ok() {}
        let batch = std::mem::take(&mut *paths.lock().unwrap_or_else(PoisonError::into_inner));
        let Some(state) = state.upgrade() else {
            return;
        };
        for path in &batch {
            if let Some(event) = what_happened(&state, path) {
                run_hooks(&hooks, &state, path, event).await;
            }
        }
        let mut pending = paths.lock().unwrap_or_else(PoisonError::into_inner);
        for path in &batch {
            if pending.remove(path) {
                // Seen as it is now, so the next change is told against it.
                let _ = what_happened(&state, path);
            }
        }
    }
}

/// `change`, `add` or `unlink` for the watched `path` now, recording whether it exists;
/// `None` when it neither exists nor did.
fn what_happened(state: &Mutex<State>, path: &Path) -> Option<&'static str> {
    let exists = path.exists();
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    // Another file of a watched folder: not watched.
    let existed = state.files.get_mut(path)?;
    let existed = std::mem::replace(existed, exists);
    match (existed, exists) {
        (true, true) => Some("change"),
        (false, true) => Some("add"),
        (true, false) => Some("unlink"),
        (false, false) => None,
    }
}

async fn run_hooks(hooks: &Hooks, state: &Arc<Mutex<State>>, path: &Path, event: &str) {
    let verdict = hooks
        .run(
            Event::FileChanged,
            &[],
            json!({"file_path": path, "event": event}),
        )
        .await;
    hooks.env().apply_env_file();
    add_to(state, &verdict.watch_paths, &hooks.env().cwd);
}

/// Adds `paths` (relative ones from `cwd`) to what `state` watches, at most [`MAX_FILES`]; a
/// folder the kernel will not watch is skipped.
fn add_to(state: &Mutex<State>, paths: &[String], cwd: &Path) {
    let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
    for path in paths {
        let path = cwd.join(path.trim());
        if state.files.contains_key(&path) || state.files.len() >= MAX_FILES {
            continue;
        }
        let Some(folder) = path.parent().map(Path::to_path_buf) else {
            continue;
        };
        if !state.folders.contains(&folder) {
            if let Err(error) = state
                .watcher
                .watch(&folder, notify::RecursiveMode::NonRecursive)
            {
                tracing::debug!(%error, folder = %folder.display(), "not watched");
                continue;
            }
            state.folders.insert(folder);
        }
        let exists = path.exists();
        state.files.insert(path, exists);
    }
}
