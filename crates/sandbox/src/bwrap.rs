//! The bubblewrap back end: a mount namespace built from the policy.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::placeholder::Placeholders;
use crate::{Error, Policy, Profile};

/// Finds `bwrap` and checks that it can build a sandbox here (user namespaces may be off,
/// or a container may forbid mounts).
pub(crate) fn probe() -> Result<PathBuf, String> {
    let path = find_on_path("bwrap").ok_or("bubblewrap (bwrap) is not installed")?;
    let output = Command::new(&path)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-net",
            "--new-session",
            "--die-with-parent",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match output {
        Ok(output) if output.status.success() => Ok(path),
        Ok(output) => Err(format!(
            "{} cannot start a sandbox here: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!("{} could not run: {error}", path.display())),
    }
}

/// `name` in an absolute `PATH` folder outside the workspace, or `/usr/bin`, `/bin`
/// ([`crate::env::resolve_program`]): bubblewrap runs outside every sandbox, so an empty or
/// relative `PATH` entry must not find the repository's own `bwrap`.
pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    crate::env::resolve_program(name).ok()
}

/// Descriptors opened for bubblewrap's `--ro-bind-fd`, each with the number it gets in
/// bubblewrap's process.
pub(crate) struct Descriptors {
    next: i32,
    mapped: Vec<(i32, OwnedFd)>,
}

impl Descriptors {
    /// None yet; the first gets the number `first`.
    pub(crate) fn new(first: i32) -> Self {
        Self {
            next: first,
            mapped: Vec::new(),
        }
    }

    /// Keeps `fd` and returns the number it gets in bubblewrap's process.
    pub(crate) fn add(&mut self, fd: OwnedFd) -> i32 {
        let number = self.next;
        self.next += 1;
        self.mapped.push((number, fd));
        number
    }

    /// The descriptors, by the number each gets.
    pub(crate) fn into_mapped(self) -> Vec<(i32, OwnedFd)> {
        self.mapped
    }
}

/// bubblewrap's arguments for `policy`, up to (not including) `--`; the folders of
/// [`Policy::unlinked`] are opened into `fds` and bound from there.
pub(crate) fn args(
    policy: &Policy,
    cwd: &Path,
    placeholders: &mut Placeholders,
    fds: &mut Descriptors,
) -> Result<Vec<OsString>, Error> {
    let mut args = Args::default();
    args.flag("--new-session");
    args.flag("--die-with-parent");
    // Root keeps every capability in a bubblewrap sandbox unless told otherwise, and with
    // CAP_SYS_ADMIN it could remount the read-only binds or unmount the hidden paths.
    args.two("--cap-drop", "ALL");
    args.flag("--unshare-pid");
    args.flag("--unshare-ipc");
    args.flag("--unshare-uts");
    if !policy.network {
        args.flag("--unshare-net");
    }
    args.two("--dev", "/dev");
    args.two("--proc", "/proc");
    // Root (even without capabilities) may write sysctls such as kernel.core_pattern, which
    // run a program as root outside every namespace: the whole of /proc is read-only.
    args.two("--remount-ro", "/proc");
    args.two("--tmpfs", "/tmp");
    let shown = shown_by_another(policy);
    let mut seen = std::collections::HashSet::new();
    for path in policy.readable_outside_roots() {
        if shown.contains(&path.as_path()) || !seen.insert(path) {
            continue; // shown by another bind, or already bound
        }
        if policy.unlinked.contains(path) {
            // Bound as it is now, reached without a link, or not at all.
            if let Some(fd) = crate::open_without_links(path) {
                let number = fds.add(fd);
                args.three("--ro-bind-fd", number.to_string(), path);
            }
            continue;
        }
        // `/bin -> usr/bin` on merged-/usr systems: recreate the link, do not bind its target
        // a second time.
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_symlink() && path.parent() == Some(Path::new("/")) => {
                if let Ok(target) = std::fs::read_link(path) {
                    args.three("--symlink", target, path);
                }
            }
            Ok(_) => args.three("--ro-bind", path, path),
            Err(_) => {}
        }
    }
    let writable = policy.profile == Profile::WorkspaceWrite;
    for root in &policy.roots {
        args.three(if writable { "--bind" } else { "--ro-bind" }, root, root);
    }
    args.three("--bind", &policy.temp_dir, &policy.temp_dir);
    if writable {
        // A folder holding a protected or hidden path could be renamed away with the mount
        // inside it, and a fresh `.git/config` created in its place: every such folder below
        // a root becomes a mount point of its own, which cannot be renamed or removed.
        for dir in pinned_folders(policy) {
            args.three("--bind", &dir, &dir);
        }
        let mut bound = std::collections::HashSet::new();
        for path in &policy.protected {
            if !policy.roots.iter().any(|root| path.starts_with(root)) {
                continue; // outside every writable root: read-only anyway
            }
            if !bound.insert(path) {
                continue; // named twice (a root's protected paths, and another source)
            }
            let existing = std::fs::symlink_metadata(path);
            if let Ok(meta) = &existing
                && meta.is_symlink()
            {
                return Err(Error::ProtectedLink(path.clone()));
            }
            // Another command's placeholder is held by this one too: otherwise its end would
            // remove it while this sandbox still mounts it (the bind then fails, or the mount
            // is detached here and the real path could be made).
            let theirs = existing
                .as_ref()
                .is_ok_and(crate::placeholder::is_placeholder);
            if existing.is_ok() && !theirs {
                args.three("--ro-bind", path, path);
            } else if let Some(target) = placeholders.reserve(path, &policy.roots)? {
                args.three("--ro-bind", &target, &target);
            }
        }
    }
    for path in &policy.hidden {
        let visible = policy
            .roots
            .iter()
            .chain(&policy.readable)
            .any(|shown| path.starts_with(shown));
        if !visible {
            continue; // nothing shows it: a mount would only make its folders appear
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => {
                args.two("--tmpfs", path);
                args.two("--remount-ro", path);
            }
            Ok(_) => args.three("--ro-bind", "/dev/null", path),
            Err(_) => {}
        }
    }
    args.two("--chdir", cwd);
    Ok(args.0)
}

/// The readable paths another readable path already shows as they are: those inside another
/// one that is bound plainly (`--ro-bind`, which bubblewrap makes recursive, submounts
/// included), when neither has a link in it, so the nested path reads the same through its
/// ancestor's bind. Binding it again only costs bubblewrap a mount and a read of the mount
/// table: with the exact repeats [`args`] skips, about 2 ms a call for the dozen a usual
/// `PATH` makes. A path bound as it is now through a descriptor ([`Policy::unlinked`]) shows
/// nothing for this.
fn shown_by_another(policy: &Policy) -> std::collections::HashSet<&Path> {
    let plain: Vec<&Path> = policy
        .readable_outside_roots()
        .filter(|path| !policy.unlinked.contains(*path))
        // No link anywhere in it (so none in its ancestors either), and it exists.
        .filter(|path| std::fs::canonicalize(path).is_ok_and(|real| real == **path))
        .map(PathBuf::as_path)
        .collect();
    plain
        .iter()
        .filter(|path| {
            plain
                .iter()
                .any(|other| other != *path && path.starts_with(other))
        })
        .copied()
        .collect()
}

/// The existing real folders strictly between a root and each protected or hidden path in
/// it, outermost first.
fn pinned_folders(policy: &Policy) -> Vec<PathBuf> {
    let mut pinned: Vec<PathBuf> = Vec::new();
    for path in policy.protected.iter().chain(&policy.hidden) {
        let Some(root) = policy.roots.iter().find(|root| path.starts_with(root)) else {
            continue;
        };
        let mut ancestors: Vec<&Path> = path
            .ancestors()
            .skip(1)
            .take_while(|dir| dir.starts_with(root) && *dir != root.as_path())
            .collect();
        ancestors.reverse();
        for dir in ancestors {
            let real_dir = std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir());
            if real_dir && !pinned.iter().any(|p| p == dir) {
                pinned.push(dir.to_path_buf());
            }
        }
    }
    pinned.sort_by_key(|dir| dir.components().count());
    pinned
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flag(&mut self, flag: &str) {
        self.0.push(flag.into());
    }

    fn two(&mut self, flag: &str, value: impl AsRef<std::ffi::OsStr>) {
        self.0.push(flag.into());
        self.0.push(value.as_ref().to_owned());
    }

    fn three(
        &mut self,
        flag: &str,
        first: impl AsRef<std::ffi::OsStr>,
        second: impl AsRef<std::ffi::OsStr>,
    ) {
        self.0.push(flag.into());
        self.0.push(first.as_ref().to_owned());
        self.0.push(second.as_ref().to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many times `args` bind `path` read-only onto itself.
    fn binds(args: &[OsString], path: &Path) -> usize {
        args.windows(3)
            .filter(|w| w[0] == "--ro-bind" && w[1] == path.as_os_str() && w[2] == path.as_os_str())
            .count()
    }

    #[test]
    fn a_path_another_bind_shows_is_bound_once_or_not_at_all() {
        let base = std::env::temp_dir().join(format!("bwrap-args-{}", std::process::id()));
        let (tools, elsewhere, root) =
            (base.join("tools"), base.join("elsewhere"), base.join("ws"));
        for dir in [tools.join("bin"), elsewhere.join("bin"), root.join(".git")] {
            std::fs::create_dir_all(&dir).unwrap_or_else(|error| panic!("{error}"));
        }
        // A link inside a bound folder to a folder outside it: its target is not shown by
        // the folder's bind, so a path through the link keeps its own.
        std::os::unix::fs::symlink(&elsewhere, tools.join("link"))
            .unwrap_or_else(|error| panic!("{error}"));
        let through_link = tools.join("link/bin");
        let policy = Policy {
            profile: Profile::WorkspaceWrite,
            roots: vec![root.clone()],
            readable: vec![
                tools.join("bin"),
                tools.clone(),
                tools.join("bin"),
                through_link.clone(),
                base.join("absent"),
            ],
            protected: vec![root.join(".git"), root.join(".git")],
            temp_dir: base.join("tmp"),
            ..Policy::default()
        };
        let mut placeholders = Placeholders::default();
        let mut fds = Descriptors::new(4);
        let args = args(&policy, &root, &mut placeholders, &mut fds)
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(binds(&args, &tools), 1);
        assert_eq!(
            binds(&args, &tools.join("bin")),
            0,
            "shown by {}",
            tools.display()
        );
        assert_eq!(
            binds(&args, &through_link),
            1,
            "a path through a link keeps its bind"
        );
        assert_eq!(
            binds(&args, &root.join(".git")),
            1,
            "a protected path named twice"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
