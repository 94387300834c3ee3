//! Path resolution: what file a path argument really names.
//!
//! [`resolve`] turns a path argument into the real path the kernel would use: relative paths
//! join the working directory, `~/` expands to `$HOME`, `.` and `..` are applied, and every
//! existing component that is a symbolic link is replaced by its target (recursively, so a
//! dangling link still resolves to where a write would land). Components that do not exist
//! yet are kept as written. The result has no `.` or `..` and no symbolic link among its
//! existing components, so a prefix check against the (equally resolved) workspace roots is
//! meaningful.
//!
//! `..` is applied to the resolved prefix, as the kernel does: `link/..` is the parent of the
//! link's target, not the directory holding the link.
//!
//! Not covered: a link swapped in between this check and the open that follows (a race the
//! model cannot win without a second process working against it).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::Error;

/// Symbolic links followed while resolving one path before giving up (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// Resolves a path argument against `cwd` (see the module docs).
///
/// # Errors
///
/// [`Error::NulByte`] for a NUL anywhere in `raw`; [`Error::NoWorkingDirectory`] for a relative
/// path when `cwd` is not absolute; [`Error::SymlinkLoop`] past 40 links.
pub(crate) fn resolve(raw: &str, cwd: &Path) -> Result<PathBuf, Error> {
    if raw.contains('\0') {
        return Err(Error::NulByte);
    }
    let expanded = expand_home(raw);
    let joined = if expanded.is_absolute() {
        expanded
    } else if cwd.is_absolute() {
        cwd.join(expanded)
    } else {
        return Err(Error::NoWorkingDirectory { path: expanded });
    };
    real_path(&joined)
}

/// A path argument as written: `~` expanded, joined to `cwd`, `.` and `..` applied to the
/// text alone (no link followed). Used next to [`resolve`] where refusing more is safe.
pub(crate) fn lexical(raw: &str, cwd: &Path) -> PathBuf {
    let expanded = expand_home(raw);
    let mut path = PathBuf::from("/");
    for part in parts(&cwd.join(expanded)) {
        match part {
            Part::Root => path = PathBuf::from("/"),
            Part::Parent => {
                path.pop();
            }
            Part::Name(name) => path.push(name),
        }
    }
    path
}

/// `~` and `~/...` name the home directory, as in a shell.
fn expand_home(raw: &str) -> PathBuf {
    let rest = match raw.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
        _ => return PathBuf::from(raw),
    };
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(rest),
        None => PathBuf::from(raw),
    }
}

enum Part {
    Root,
    Parent,
    Name(OsString),
}

fn parts(path: &Path) -> VecDeque<Part> {
    path.components()
        .filter_map(|component| match component {
            Component::RootDir | Component::Prefix(_) => Some(Part::Root),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(name) => Some(Part::Name(name.to_os_string())),
        })
        .collect()
}

/// Resolves an absolute path component by component, as the tools resolve their path
/// arguments: `.` and `..` applied, every existing symbolic link replaced by its target
/// (dangling ones included), components that do not exist yet kept as written. A relative
/// `path` is taken from `/`.
///
/// # Errors
///
/// [`Error::SymlinkLoop`] past 40 links.
pub fn real_path(path: &Path) -> Result<PathBuf, Error> {
    let mut pending = parts(path);
    let mut resolved = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        let name = match part {
            Part::Root => {
                resolved = PathBuf::from("/");
                continue;
            }
            Part::Parent => {
                resolved.pop();
                continue;
            }
            Part::Name(name) => name,
        };
        let next = resolved.join(&name);
        let is_link = std::fs::symlink_metadata(&next).is_ok_and(|meta| meta.is_symlink());
        if !is_link {
            resolved = next;
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(Error::SymlinkLoop {
                path: path.to_path_buf(),
            });
        }
        match std::fs::read_link(&next) {
            Ok(target) => {
                // The target replaces the link: relative targets continue from the link's
                // directory (`resolved`), absolute ones from the root (a Root part).
                let mut spliced = parts(&target);
                spliced.extend(pending.drain(..));
                pending = spliced;
            }
            // Unreadable link: keep it as a name; whatever opens it fails the same way.
            Err(_) => resolved = next,
        }
    }
    Ok(resolved)
}

/// The resolved workspace roots: the working directory and the additional directories.
/// Entries that are not absolute are dropped (they cannot confine anything).
pub(crate) fn roots(workspace: &executor::Workspace) -> Vec<PathBuf> {
    std::iter::once(&workspace.cwd)
        .chain(&workspace.additional_dirs)
        .filter(|dir| dir.is_absolute())
        .filter_map(|dir| real_path(dir).ok())
        .collect()
}

/// Whether `path` (resolved) lies under one of `roots` (component-wise: `/w2` is not under
/// `/w`).
pub(crate) fn is_under(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

/// The roots for an error message.
pub(crate) fn describe(roots: &[PathBuf]) -> String {
    if roots.is_empty() {
        return "none".to_owned();
    }
    roots
        .iter()
        .map(|root| root.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::testutil::TempDir;

    fn check(raw: &str, cwd: &Path, expected: &Path) {
        assert_eq!(resolve(raw, cwd).unwrap(), expected, "resolving {raw:?}");
    }

    #[test]
    fn dots_are_applied() {
        let dir = TempDir::new("paths-dots");
        let root = dir.real();
        std::fs::create_dir(root.join("sub")).unwrap();
        check("a.txt", &root, &root.join("a.txt"));
        check("./sub/../a.txt", &root, &root.join("a.txt"));
        check("sub/../../x", &root, &root.parent().unwrap().join("x"));
        check("missing/../b", &root, &root.join("b"));
        check("/../../etc", &root, Path::new("/etc"));
    }

    #[test]
    fn links_are_followed_including_dangling_ones() {
        let dir = TempDir::new("paths-links");
        let root = dir.real();
        let outside = TempDir::new("paths-links-outside");
        let out = outside.real();
        std::fs::create_dir(out.join("deep")).unwrap();
        std::os::unix::fs::symlink(out.join("deep"), root.join("link")).unwrap();
        std::os::unix::fs::symlink("../nowhere/file", root.join("dangling")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        check("link/x", &root, &out.join("deep/x"));
        // `..` after a link climbs from the target, as the kernel does.
        check("link/../y", &root, &out.join("y"));
        check(
            "dangling",
            &root,
            &root.parent().unwrap().join("nowhere/file"),
        );
        assert!(matches!(
            resolve("loop", &root),
            Err(Error::SymlinkLoop { .. })
        ));
    }

    #[test]
    fn nul_and_relative_without_cwd_are_refused() {
        assert_eq!(resolve("a\0b", Path::new("/")), Err(Error::NulByte));
        assert!(matches!(
            resolve("a", Path::new("")),
            Err(Error::NoWorkingDirectory { .. })
        ));
    }

    #[test]
    fn roots_are_prefixes_by_component() {
        let roots = vec![PathBuf::from("/w")];
        assert!(is_under(Path::new("/w"), &roots));
        assert!(is_under(Path::new("/w/a/b"), &roots));
        assert!(!is_under(Path::new("/w2/a"), &roots));
        assert!(!is_under(Path::new("/"), &roots));
    }
}
