//! The sandbox policy of one Bash command: what the session's workspace, rules and settings
//! say the command may read, write and reach.

use std::path::{Path, PathBuf};

use executor::Workspace;
use sandbox::{Policy, Profile};

use crate::paths;
use crate::session::Shared;

/// Entries walked to find the existing paths a deny rule's glob matches before giving up.
const MAX_WALK: usize = 50_000;

/// The policy for a command with `profile` in `workspace`.
///
/// - readable: [`sandbox::default_readable`], the roots, the tool-results folder;
/// - protected (read-only inside the roots): [`sandbox::protected_paths`] of every root, the
///   session's protected folders, and the existing paths `Edit` deny rules match;
/// - hidden: the existing paths `Read` deny rules match;
/// - network: only in workspace-write, and only when the settings allow it.
///
/// # Errors
///
/// A message naming the deny rule whose matches could not all be found (more than
/// [`MAX_WALK`] entries to look through): such a rule cannot be enforced by the sandbox.
pub(crate) fn policy(
    shared: &Shared,
    workspace: &Workspace,
    profile: Profile,
) -> Result<Policy, String> {
    let roots = paths::roots(workspace);
    let mut policy = Policy::new(profile, roots.clone(), shared.private.path().to_path_buf());
    if let Some(dir) = &shared.tool_results_dir {
        policy.readable.push(dir.clone());
    }
    policy.protected.extend(shared.protected_dirs());
    policy.network = profile == Profile::WorkspaceWrite && shared.sandbox.network;
    for rule in &shared.rules.deny {
        if let Some((globs, sources)) = rule.path_patterns("Read") {
            let found = matches(globs, sources).map_err(|walked| too_many(&rule.source, walked))?;
            policy.hidden.extend(found);
        } else if let Some((globs, sources)) = rule.path_patterns("Edit") {
            let found = matches(globs, sources).map_err(|walked| too_many(&rule.source, walked))?;
            policy.protected.extend(found);
        }
    }
    Ok(policy)
}

fn too_many(rule: &str, walked: usize) -> String {
    format!(
        "the deny rule `{rule}` could not be enforced in the sandbox: finding the paths it matches meant looking through more than {walked} files; write the rule with a folder prefix (such as `Read(./secrets/**)`)"
    )
}

/// The existing paths `globs` matches, looked for under the literal folder each source
/// pattern starts with. A matching folder is returned once, not its contents.
fn matches(globs: &globset::GlobSet, sources: &[String]) -> Result<Vec<PathBuf>, usize> {
    let mut found = Vec::new();
    let mut walked = 0;
    for source in sources {
        let start = literal_prefix(source);
        if std::fs::symlink_metadata(&start).is_err() {
            continue;
        }
        if start.as_os_str() == source.as_str() {
            found.push(start);
            continue;
        }
        let walk = ignore::WalkBuilder::new(&start)
            .standard_filters(false)
            .follow_links(false)
            .build();
        for entry in walk {
            walked += 1;
            if walked > MAX_WALK {
                return Err(MAX_WALK);
            }
            let Ok(entry) = entry else {
                continue;
            };
            if globs.is_match(entry.path()) {
                found.push(entry.path().to_path_buf());
            }
        }
    }
    // What a matching link points to is hidden too (`.env -> config/real.env`).
    let targets: Vec<PathBuf> = found
        .iter()
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_symlink()))
        .filter_map(|path| std::fs::canonicalize(path).ok())
        .collect();
    found.extend(targets);
    // Sorted, a folder comes before what it holds: keep only the outermost.
    found.sort();
    found.dedup();
    let mut outermost: Vec<PathBuf> = Vec::new();
    for path in found {
        if !outermost.last().is_some_and(|last| path.starts_with(last)) {
            outermost.push(path);
        }
    }
    Ok(outermost)
}

/// The folder a glob pattern starts with: the components before the first one holding a
/// glob character (`/w/secrets/**` -> `/w/secrets`); the whole path when it has none.
fn literal_prefix(pattern: &str) -> PathBuf {
    let mut prefix = PathBuf::from("/");
    for component in pattern.split('/').filter(|c| !c.is_empty()) {
        if component.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        prefix.push(component);
    }
    prefix
}

/// `text` quoted for a POSIX shell: `'...'`, with each `'` written as `'\''`.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Whether any of `paths` (as written, as resolved) lies under a path a sandboxed command
/// may not write in the roots ([`sandbox::protected_paths`]), ignoring case.
pub(crate) fn is_protected_in(roots: &[PathBuf], paths: &[PathBuf]) -> bool {
    let lower = |path: &Path| PathBuf::from(path.to_string_lossy().to_lowercase());
    let protected: Vec<PathBuf> = roots
        .iter()
        .flat_map(|root| sandbox::protected_paths(root))
        .map(|path| lower(&path))
        .collect();
    paths.iter().map(|path| lower(path)).any(|path| {
        protected
            .iter()
            .any(|protected| path.starts_with(protected))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal_prefix("/w/secrets/**"), Path::new("/w/secrets"));
        assert_eq!(literal_prefix("/w/**/.env"), Path::new("/w"));
        assert_eq!(literal_prefix("/w/a.txt"), Path::new("/w/a.txt"));
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
