//! Which paths the Landlock back end grants, and how: a pure function of the policy and the
//! file tree, so it can be tested without restricting anything.
//!
//! Landlock only grants: a rule on a folder covers everything beneath it. A folder holding a
//! path that must not get the same access (a hidden path among readable ones, a protected or
//! hidden path among writable ones) is therefore *split*: each of its entries is granted on
//! its own, except the excluded ones, recursively down to them. A split folder gets no
//! rights of its own for writing (nothing can be created or removed directly in it) and only
//! the right to list it for reading (the names below it, hidden ones included, can be
//! listed; their contents cannot be read). Symbolic links met while splitting are skipped:
//! a rule follows them and would grant their target.

use std::path::{Path, PathBuf};

use crate::{Policy, Profile};

/// The access one rule grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read files, list folders, execute.
    Read,
    /// List this folder (and folders below it) only.
    ListOnly,
    /// Everything: read, write, create, remove, rename.
    Write,
}

/// Devices every command may read and write.
const DEVICES_WRITABLE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// Devices every command may read. Not the rest of `/dev`: terminals (`/dev/pts/*`) would
/// show what the user types elsewhere, disks their raw contents.
const DEVICES_READABLE: &[&str] = &["/dev/random", "/dev/urandom"];
/// Read-only pseudo file systems (what `/proc/PID/...` shows of processes outside the
/// sandbox is further limited by Landlock's ptrace scoping).
const PSEUDO_READABLE: &[&str] = &["/proc", "/sys"];

/// One rule: a path, its access, and whether the path may be a symbolic link to follow
/// (configured paths such as `/bin -> usr/bin`; never an entry met while splitting).
pub(crate) type Rule = (PathBuf, Access, bool);

/// The rules for `policy`, in the order they are added.
pub(crate) fn rules(policy: &Policy) -> Vec<Rule> {
    let mut rules = Vec::new();
    let hidden = &policy.hidden;
    let readable = policy
        .readable_outside_roots()
        .map(PathBuf::as_path)
        .chain(PSEUDO_READABLE.iter().map(Path::new))
        .chain(DEVICES_READABLE.iter().map(Path::new));
    for path in readable {
        if path.exists() {
            grant(path, Access::Read, hidden, &mut rules, 0);
        }
    }
    rules.push((PathBuf::from("/dev"), Access::ListOnly, true));
    let mut unwritable: Vec<PathBuf> = policy.protected.clone();
    unwritable.extend(hidden.iter().cloned());
    for root in &policy.roots {
        grant(root, Access::Read, hidden, &mut rules, 0);
        if policy.profile == Profile::WorkspaceWrite {
            grant(root, Access::Write, &unwritable, &mut rules, 0);
        }
    }
    for device in DEVICES_WRITABLE {
        rules.push((PathBuf::from(device), Access::Write, true));
    }
    rules.push((policy.temp_dir.clone(), Access::Write, true));
    rules
}

/// Deepest split before giving up on an excluded path (it is then excluded with the whole
/// folder that holds it, which is stricter, never looser).
const MAX_SPLIT_DEPTH: usize = 32;

fn grant(path: &Path, access: Access, excluded: &[PathBuf], rules: &mut Vec<Rule>, depth: usize) {
    if excluded.iter().any(|e| e == path) {
        return;
    }
    // Only the paths the policy names may be links to follow; entries met while splitting
    // are opened without following, and skipped when they are links.
    let follow = depth == 0;
    let holds_excluded = excluded.iter().any(|e| e.starts_with(path));
    if !holds_excluded {
        rules.push((path.to_path_buf(), access, follow));
        return;
    }
    if depth >= MAX_SPLIT_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    if access == Access::Read {
        rules.push((path.to_path_buf(), Access::ListOnly, follow));
    }
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        grant(&entry.path(), access, excluded, rules, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_around_excluded_paths() {
        let dir = std::env::temp_dir().join(format!("sandbox-rules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).ok();
        std::fs::create_dir_all(dir.join(".git/objects")).ok();
        std::fs::write(dir.join(".git/config"), "").ok();
        std::fs::write(dir.join("README"), "").ok();
        std::fs::create_dir_all(dir.join("secrets")).ok();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc", dir.join("link")).ok();
        let policy = Policy {
            profile: Profile::WorkspaceWrite,
            roots: vec![dir.clone()],
            readable: Vec::new(),
            protected: vec![dir.join(".git/config"), dir.join(".claude")],
            hidden: vec![dir.join("secrets")],
            network: false,
            temp_dir: PathBuf::from("/tmp/x"),
            unlinked: Vec::new(),
        };
        let rules = rules(&policy);
        let has = |path: &Path, access| rules.iter().any(|(p, a, _)| p == path && *a == access);
        assert!(has(&dir, Access::ListOnly));
        assert!(has(&dir.join("src"), Access::Read));
        assert!(has(&dir.join("src"), Access::Write));
        assert!(has(&dir.join("README"), Access::Write));
        assert!(has(&dir.join(".git/objects"), Access::Write));
        assert!(
            !rules
                .iter()
                .any(|(p, _, _)| p.starts_with(dir.join("secrets")))
        );
        assert!(!rules.iter().any(|(p, _, _)| p == &dir.join(".git/config")));
        assert!(
            !rules
                .iter()
                .any(|(p, _, follow)| p == &dir.join("src") && *follow)
        );
        assert!(!rules.iter().any(|(p, _, _)| p.starts_with("/dev/pts")));
        assert!(!has(&dir, Access::Write));
        assert!(!has(&dir.join(".git"), Access::Write));
        assert!(!rules.iter().any(|(p, _, _)| p == &dir.join("link")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
