//! Each task's own checkout: a git worktree of a local repository, or a clone of a URL,
//! under the output folder; and what the task changed in it.

use std::path::{Path, PathBuf};

use super::{BatchError, Task};
use crate::worktree::git;

/// The checkout of `task` under `out` (`worktrees/ID`), made when it does not exist yet:
/// a detached worktree of the local repository at the task's ref (its HEAD by default),
/// or a clone of the URL checked out at the ref. Returns the folder and the commit it
/// started from.
///
/// # Errors
///
/// [`BatchError::Checkout`] with git's message.
pub(crate) async fn prepare(
    task: &Task,
    base: &Path,
    out: &Path,
) -> Result<(PathBuf, String), BatchError> {
    let dir = out.join("worktrees").join(&task.id);
    let failed = |error: crate::worktree::WorktreeError| BatchError::Checkout {
        id: task.id.clone(),
        why: error.to_string(),
    };
    if !dir.exists() {
        std::fs::create_dir_all(out.join("worktrees"))
            .map_err(|error| BatchError::io(out, error))?;
        let at = task.git_ref.as_deref().unwrap_or("HEAD");
        let target = dir.to_string_lossy().into_owned();
        if task.is_url() {
            git(out, &["clone", "--quiet", "--", &task.repo, &target])
                .await
                .map_err(failed)?;
            if task.git_ref.is_some() {
                git(&dir, &["checkout", "--quiet", "--detach", at])
                    .await
                    .map_err(failed)?;
            }
        } else {
            // One at a time: `git worktree add` takes the repository's locks, and two at
            // once in one repository can fail on them.
            static ADDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
            let _one = ADDING.lock().await;
            let repo = task.local_repo(base);
            if !repo.is_dir() {
                return Err(BatchError::Checkout {
                    id: task.id.clone(),
                    why: format!(
                        "the repository {} does not exist (a local repo is relative to the task file's folder)",
                        repo.display()
                    ),
                });
            }
            // A checkout of an earlier output folder that was removed is still registered.
            let _ = git(&repo, &["worktree", "prune"]).await;
            git(
                &repo,
                &["worktree", "add", "--quiet", "--detach", &target, at],
            )
            .await
            .map_err(failed)?;
        }
    }
    let start = git(&dir, &["rev-parse", "HEAD"]).await.map_err(failed)?;
    Ok((dir, start.trim().to_owned()))
}

/// Writes what the task changed in `dir` since `start` (new files included) to
/// `diffs/ID.diff` under `out`; its path.
///
/// # Errors
///
/// [`BatchError::Checkout`] with git's message, [`BatchError::Io`] when the file cannot be
/// written.
pub(crate) async fn diff(
    id: &str,
    dir: &Path,
    start: &str,
    out: &Path,
) -> Result<PathBuf, BatchError> {
    let failed = |error: crate::worktree::WorktreeError| BatchError::Checkout {
        id: id.to_owned(),
        why: error.to_string(),
    };
    // New files count: marked as intended, so `git diff` shows them.
    git(dir, &["add", "--all", "--intent-to-add"])
        .await
        .map_err(failed)?;
    let text = git(dir, &["diff", "--binary", start])
        .await
        .map_err(failed)?;
    let diffs = out.join("diffs");
    std::fs::create_dir_all(&diffs).map_err(|error| BatchError::io(&diffs, error))?;
    let path = diffs.join(format!("{id}.diff"));
    std::fs::write(&path, text).map_err(|error| BatchError::io(&path, error))?;
    Ok(path)
}
