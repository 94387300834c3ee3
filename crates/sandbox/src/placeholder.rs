//! Placeholders for absent protected paths (bubblewrap back end).
//!
//! A bind mount needs an existing mount point, so an absent protected path (`.claude`,
//! `.git/hooks`) is reserved by creating an empty folder (or an empty file for names with a
//! dot-extension such as `.mcp.json`) on the host and mounting it read-only over itself in
//! the sandbox: the command cannot create the real thing. The placeholder is removed when the
//! last command using it has ended (a count per path, shared by concurrent commands of this
//! process; removing a mount point in use would detach the mount in the other sandbox), and
//! only when still empty. A process killed with SIGKILL leaves empty placeholders behind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
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
        let kind = if target == path && looks_like_file(path) {
            Kind::File
        } else {
            Kind::Dir
        };
        let mut created = CREATED.lock().unwrap_or_else(PoisonError::into_inner);
        let map = created.get_or_insert_with(HashMap::new);
        if let Some((_, count)) = map.get_mut(&target) {
            *count += 1;
            self.held.push(target.clone());
            return Ok(target);
        }
        let made = match kind {
            Kind::Dir => std::fs::create_dir(&target),
            Kind::File => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&target)
                .map(drop),
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

/// `.mcp.json`, `config`, `config.worktree`: names of files. Folders among the protected
/// names (`.agent`, `.claude`, `hooks`, `modules`) have no extension after a leading dot.
fn looks_like_file(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
        return false;
    };
    let stem = name.trim_start_matches('.');
    stem.contains('.') || name == "config" || name == ".git"
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
                Kind::File => match std::fs::symlink_metadata(&path) {
                    Ok(meta) if meta.is_file() && meta.len() == 0 => std::fs::remove_file(&path),
                    Ok(_) => Ok(()),
                    Err(error) => Err(error),
                },
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
    fn file_names() {
        assert!(looks_like_file(Path::new("/w/.mcp.json")));
        assert!(looks_like_file(Path::new("/w/.git/config")));
        assert!(looks_like_file(Path::new("/w/.git/config.worktree")));
        assert!(!looks_like_file(Path::new("/w/.claude")));
        assert!(!looks_like_file(Path::new("/w/.git/hooks")));
    }
}
