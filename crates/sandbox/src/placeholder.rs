//! Placeholders for absent protected paths (bubblewrap back end).
//!
//! A bind mount needs an existing mount point, so an absent protected path (`.claude`,
//! `.git/hooks`, `.mcp.json`) is reserved by creating an empty folder on the host and
//! mounting it read-only over itself in the sandbox: the command cannot create the real
//! thing. Always a folder, even for names of files: git does not see empty folders, so a
//! placeholder never ends up in a commit (`git add -A` while a command runs). The placeholder
//! is removed when the last command using it has ended (a count per path, shared by
//! concurrent commands of this process; removing a mount point in use would detach the mount
//! in the other sandbox), and only when still empty. A process killed with SIGKILL leaves
//! empty folders behind; [`sweep`] removes those that stand where a file belongs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
}

/// Placeholders this process created, with the number of commands using each.
static CREATED: Mutex<Option<HashMap<PathBuf, (Kind, usize)>>> = Mutex::new(None);

/// The placeholders one command holds.
#[derive(Debug, Default)]
pub(crate) struct Placeholders {
    held: Vec<PathBuf>,
}

impl Placeholders {
    /// Reserves `path` (absent): creates its first missing ancestor as a placeholder and
    /// returns that ancestor, the path to mount read-only. `None` when the parent folder is
    /// outside every root (nothing to protect there) or the path appeared meanwhile.
    pub(crate) fn reserve(&mut self, path: &Path) -> Result<PathBuf, Error> {
        let mut target = path.to_path_buf();
        while let Some(parent) = target.parent() {
            if parent.exists() {
                break;
            }
            target = parent.to_path_buf();
        }
        let kind = Kind::Dir;
        let mut created = CREATED.lock().unwrap_or_else(PoisonError::into_inner);
        let map = created.get_or_insert_with(HashMap::new);
        if let Some((_, count)) = map.get_mut(&target) {
            *count += 1;
            self.held.push(target.clone());
            return Ok(target);
        }
        let made = match kind {
            Kind::Dir => std::fs::create_dir(&target),
        };
        match made {
            Ok(()) => {
                map.insert(target.clone(), (kind, 1));
                self.held.push(target.clone());
                Ok(target)
            }
            // Created by someone else in the meantime: it exists, mount it as it is.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(target),
            Err(source) => Err(Error::Placeholder {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

/// Paths below a root where a file belongs: an empty folder there is a placeholder left
/// by a killed process.
const FILE_PLACES: [&str; 3] = [".mcp.json", ".git/config", ".git/config.worktree"];

/// Removes the placeholders a killed process left in `root` where a file belongs (an empty
/// folder named `.mcp.json`, `.git/config` or `.git/config.worktree` would break the
/// programs that read those files). Returns the folders removed.
pub fn sweep(root: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for place in FILE_PLACES {
        let path = root.join(place);
        let empty_dir = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir())
            && std::fs::read_dir(&path).is_ok_and(|mut entries| entries.next().is_none());
        if empty_dir && std::fs::remove_dir(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut created = CREATED.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(map) = created.as_mut() else {
            return;
        };
        for path in self.held.drain(..) {
            let Some((kind, count)) = map.get_mut(&path) else {
                continue;
            };
            *count -= 1;
            if *count > 0 {
                continue;
            }
            let kind = *kind;
            map.remove(&path);
            let removed = match kind {
                // Only when empty: a folder someone filled is theirs.
                Kind::Dir => std::fs::remove_dir(&path),
            };
            if let Err(error) = removed {
                tracing::debug!(path = %path.display(), %error, "placeholder kept");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_removes_only_empty_folders_where_files_belong() {
        let root = std::env::temp_dir().join(format!("sandbox-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(".mcp.json")).ok();
        std::fs::create_dir_all(root.join(".git/config")).ok();
        std::fs::create_dir_all(root.join(".git/config.worktree/x")).ok();
        std::fs::create_dir_all(root.join(".claude")).ok();
        let removed = sweep(&root);
        assert_eq!(
            removed,
            vec![root.join(".mcp.json"), root.join(".git/config")]
        );
        assert!(root.join(".git/config.worktree/x").exists());
        assert!(root.join(".claude").exists());
        let _ = std::fs::remove_dir_all(&root);
    }
}
