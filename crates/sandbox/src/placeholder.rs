//! Placeholders for absent protected paths (bubblewrap back end).
//!
//! A bind mount needs an existing mount point, so an absent protected path (`.claude`,
//! `.mcp.json`, `.git` in a folder that is not a repository) is reserved by creating an empty
//! folder on the host and mounting it read-only over itself in the sandbox: the command
//! cannot create the real thing. Always a folder, even for names of files: git does not see
//! empty folders, so a placeholder never ends up in a commit (`git add -A` while a command
//! runs).
//!
//! Removing a placeholder that is still a mount point in another sandbox would detach that
//! mount there (the kernel allows removing another namespace's mount point), and that
//! sandbox could then create the real file. So every command holding a placeholder keeps a
//! shared `flock` on it, across processes (two agents in one workspace) and within one; the
//! placeholder is removed only by whoever gets the exclusive lock, and only while empty. A
//! command that finds the placeholder replaced after locking it starts over. A process killed
//! with SIGKILL releases its locks and leaves empty folders behind; [`sweep`] removes those
//! that stand where a file belongs.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::Error;

/// The placeholders one command holds, each locked shared.
#[derive(Debug, Default)]
pub(crate) struct Placeholders {
    held: Vec<(PathBuf, Flock<File>)>,
}

/// Attempts before giving up on a placeholder that keeps being replaced.
const ATTEMPTS: usize = 8;

impl Placeholders {
    /// Reserves `path` (absent): creates its first missing ancestor as an empty folder, locks
    /// it shared and returns it, the path to mount read-only. The ancestor is made where its
    /// existing parent really is (a committed symbolic link on the way is followed, never
    /// created through): `None` when that is outside every root in `roots`, where the
    /// command cannot write anyway and nothing is created.
    pub(crate) fn reserve(
        &mut self,
        path: &Path,
        roots: &[PathBuf],
    ) -> Result<Option<PathBuf>, Error> {
        let mut target = path.to_path_buf();
        let mut parent = None;
        while let Some(up) = target.parent() {
            if std::fs::symlink_metadata(up).is_ok() {
                parent = Some(up.to_path_buf());
                break;
            }
            target = up.to_path_buf();
        }
        let (Some(parent), Some(name)) = (parent, target.file_name()) else {
            return Ok(None);
        };
        let Ok(real_parent) = std::fs::canonicalize(&parent) else {
            return Ok(None);
        };
        if !roots.iter().any(|root| real_parent.starts_with(root)) {
            return Ok(None);
        }
        let target = real_parent.join(name);
        let fail = |source: std::io::Error| Error::Placeholder {
            path: path.to_path_buf(),
            source,
        };
        for _ in 0..ATTEMPTS {
            use std::os::unix::fs::DirBuilderExt as _;
            match std::fs::DirBuilder::new()
                .mode(PLACEHOLDER_MODE)
                .create(&target)
            {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(fail(error)),
            }
            let Ok(lock) = lock(&target, FlockArg::LockShared) else {
                continue; // removed between creating and opening it: again
            };
            // Still the folder we locked (not removed and recreated meanwhile)?
            let same = std::fs::symlink_metadata(&target).is_ok_and(|meta| {
                lock.metadata()
                    .is_ok_and(|locked| locked.ino() == meta.ino() && locked.dev() == meta.dev())
            });
            if same {
                self.held.push((target.clone(), lock));
                return Ok(Some(target));
            }
        }
        Err(fail(std::io::Error::other(
            "it kept being replaced while it was being reserved",
        )))
    }
}

/// Opens the folder at `path` (not following a link) and locks it.
fn lock(path: &Path, how: FlockArg) -> std::io::Result<Flock<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_NOFOLLOW).bits())
        .open(path)?;
    Flock::lock(file, how).map_err(|(_, errno)| std::io::Error::from(errno))
}

/// The mode placeholders are made with (`r-xr-xr-x`, which `mkdir` under any usual umask
/// never makes): only folders with it are ever removed, so a user's own empty `.git` stays.
const PLACEHOLDER_MODE: u32 = 0o555;

/// Whether `meta` is a placeholder's: a folder with [`PLACEHOLDER_MODE`].
pub(crate) fn is_placeholder(meta: &std::fs::Metadata) -> bool {
    meta.is_dir() && meta.mode() & 0o7777 == PLACEHOLDER_MODE
}

/// Removes the folder at `path` if it is a placeholder ([`PLACEHOLDER_MODE`]), nobody holds
/// it and it is empty.
fn remove_if_unused(path: &Path) -> bool {
    let ours = std::fs::symlink_metadata(path)
        .is_ok_and(|meta| meta.is_dir() && meta.mode() & 0o7777 == PLACEHOLDER_MODE);
    if !ours {
        return false;
    }
    let Ok(lock) = lock(path, FlockArg::LockExclusiveNonblock) else {
        return false;
    };
    let empty = std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none());
    let removed = empty && std::fs::remove_dir(path).is_ok();
    drop(lock);
    removed
}

impl Placeholders {
    /// Whether it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Lets go of the placeholders without removing them (their sandbox may still be in
    /// use): the locks are released, the empty read-only folders stay.
    pub(crate) fn keep(&mut self) {
        self.held.clear();
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        for (path, lock) in self.held.drain(..) {
            // Let go of the shared lock first: the exclusive one is taken on a new open.
            drop(lock);
            if !remove_if_unused(&path) {
                tracing::debug!(path = %path.display(), "placeholder kept (in use or not empty)");
            }
        }
    }
}

/// Paths below a root where an empty folder can only be a placeholder left by a killed
/// process, and would break the programs that read them (`.mcp.json` is a file; an empty
/// `.git` is not a repository).
const FILE_PLACES: [&str; 2] = [".mcp.json", ".git"];

/// Removes the placeholders a killed process left in `root` where a file or a repository
/// belongs: an empty folder named `.mcp.json` or `.git` that no running command holds.
/// Returns the folders removed.
pub fn sweep(root: &Path) -> Vec<PathBuf> {
    FILE_PLACES
        .iter()
        .map(|place| root.join(place))
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()))
        .filter(|path| remove_if_unused(path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("sandbox-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).ok();
        root
    }

    #[test]
    fn sweep_removes_only_unheld_empty_folders_where_files_belong() {
        use std::os::unix::fs::DirBuilderExt as _;
        let root = scratch("sweep");
        // What a killed run leaves: an empty placeholder.
        std::fs::DirBuilder::new()
            .mode(PLACEHOLDER_MODE)
            .create(root.join(".mcp.json"))
            .ok();
        std::fs::create_dir_all(root.join(".git/objects")).ok();
        std::fs::create_dir_all(root.join(".claude")).ok();
        assert_eq!(sweep(&root), vec![root.join(".mcp.json")]);
        assert!(root.join(".git/objects").exists());
        assert!(root.join(".claude").exists());
        // A user's own empty `.git` (made with mkdir) is not ours: it stays.
        std::fs::remove_dir_all(root.join(".git")).ok();
        std::fs::create_dir(root.join(".git")).ok();
        assert!(sweep(&root).is_empty());
        assert!(root.join(".git").is_dir());
        std::fs::remove_dir(root.join(".git")).ok();
        // Held by a running command: kept.
        let mut held = Placeholders::default();
        let reserved = held
            .reserve(&root.join(".mcp.json"), std::slice::from_ref(&root))
            .ok();
        assert_eq!(reserved, Some(Some(root.join(".mcp.json"))));
        assert!(sweep(&root).is_empty());
        drop(held);
        assert!(!root.join(".mcp.json").exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_placeholder_stays_while_another_holder_uses_it() {
        let root = scratch("shared");
        let path = root.join(".claude");
        let mut first = Placeholders::default();
        let mut second = Placeholders::default();
        let roots = [root.clone()];
        assert!(first.reserve(&path, &roots).is_ok());
        assert!(second.reserve(&path, &roots).is_ok());
        drop(first);
        assert!(path.is_dir(), "removed while the second holder used it");
        drop(second);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn no_placeholder_is_made_through_a_link_to_outside_the_roots() {
        let base = scratch("through-link");
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).ok();
        std::fs::create_dir_all(&outside).ok();
        // A committed link `libs/a -> ../../outside` and a submodule path `libs/a/.git`.
        std::fs::create_dir_all(root.join("libs")).ok();
        std::os::unix::fs::symlink(&outside, root.join("libs/a")).ok();
        let mut held = Placeholders::default();
        let reserved = held.reserve(&root.join("libs/a/.git"), std::slice::from_ref(&root));
        assert!(matches!(reserved, Ok(None)), "{reserved:?}");
        assert!(
            std::fs::symlink_metadata(outside.join(".git")).is_err(),
            "created outside the workspace"
        );
        // A link that stays inside the root: the placeholder is made where it really is.
        std::fs::create_dir_all(root.join("vendor/b")).ok();
        std::os::unix::fs::symlink(root.join("vendor/b"), root.join("libs/b")).ok();
        let reserved = held.reserve(&root.join("libs/b/.git"), std::slice::from_ref(&root));
        assert_eq!(reserved.ok(), Some(Some(root.join("vendor/b/.git"))));
        drop(held);
        let _ = std::fs::remove_dir_all(&base);
    }
}
