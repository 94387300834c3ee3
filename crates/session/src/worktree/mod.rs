//! Git worktrees an agent works in alone: `isolation: "worktree"` of a subagent and
//! `--worktree NAME` of a session, laid out as Claude Code lays them out.
//!
//! A worktree named `NAME` is `<repository>/.claude/worktrees/NAME`, on a new branch
//! `worktree-NAME` started at the repository's `HEAD`; `.claude/worktrees/` is added to the
//! repository's `info/exclude`, so the main checkout's `git status` does not list it. When
//! the work is done, [`Worktree::finish`] keeps a worktree that has changes (uncommitted
//! files or commits of its own), naming its path and branch, and removes a clean one with its
//! branch. Settings' `WorktreeCreate` and `WorktreeRemove` hooks replace git (a repository of
//! another version control system): the create hook prints the new folder's path.
//!
//! git runs as the agent, outside the sandbox, so only in a trusted folder: a repository's
//! own configuration can name programs git runs while it checks files out (clean and smudge
//! filters). `core.fsmonitor` and git's hooks are off whatever the folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::hooks;

mod enter;

pub use enter::{Current, EnterWorktreeTool, Exit, ExitWorktreeTool, Target};

/// The longest a name may be, in bytes (Claude Code's limit).
pub const MAX_NAME_LEN: usize = 64;

/// The longest one git command may take before the operation fails.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Held while this process changes a repository's worktrees (git takes the same locks for
/// each, `index.lock` and the refs: parallel subagents' worktrees made at once would fail
/// on each other's).
static CHANGING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The folder, relative to the repository, that holds the worktrees.
pub const WORKTREES_DIR: &str = ".claude/worktrees";

/// Why a worktree could not be made, inspected or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorktreeError {
    /// The folder is not in a git repository (and no `WorktreeCreate` hook is configured).
    #[error(
        "{} is not in a git repository: a worktree needs one (run `git init` and commit, or configure a WorktreeCreate hook)",
        dir.display()
    )]
    NotARepository {
        /// The folder.
        dir: PathBuf,
    },
    /// The name breaks the rules.
    #[error(
        "invalid worktree name {name:?}: {why} (each /-separated part: letters, digits, '.', '_', '-'; at most {MAX_NAME_LEN} characters)"
    )]
    InvalidName {
        /// The name given.
        name: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The main checkout has changes the worktree would not have.
    #[error(
        "the main checkout has uncommitted changes a new worktree would not contain ({}); commit or stash them first, so the work in the worktree starts from them",
        list(files)
    )]
    Dirty {
        /// The changed files, as `git status --porcelain` names them.
        files: Vec<String>,
    },
    /// A worktree of that name, or its branch, exists already.
    #[error("{0}")]
    Exists(String),
    /// The folder is not trusted: git would run what the repository's configuration names.
    #[error(
        "worktrees are made only in a trusted folder: git runs outside the sandbox and would run the filters this repository's configuration names (trust it with --trust or the setting trustedFolders)"
    )]
    Untrusted,
    /// A git command failed.
    #[error("`git {command}` failed: {detail}")]
    Git {
        /// The command's arguments.
        command: String,
        /// Its stderr, or why it could not run.
        detail: String,
    },
    /// A `WorktreeCreate` hook did not give a usable folder.
    #[error("WorktreeCreate hook failed: {0}")]
    Hook(String),
    /// The agent is not working in a worktree.
    #[error("not working in a worktree: there is nothing to exit (EnterWorktree moves into one)")]
    NotEntered,
    /// A worktree to remove has work that would be lost.
    #[error(
        "the worktree {} has work that removing it would lose ({}{} commit(s) of its own); keep it, or remove it with discard_changes: true",
        path.display(),
        if changes.files.is_empty() { String::new() } else { format!("{}; ", list(&changes.files)) },
        changes.commits
    )]
    Unsaved {
        /// The worktree.
        path: PathBuf,
        /// What it has.
        changes: Changes,
    },
}

fn list(files: &[String]) -> String {
    let mut shown: Vec<&str> = files.iter().take(10).map(String::as_str).collect();
    if files.len() > shown.len() {
        shown.push("...");
    }
    format!("{} file(s): {}", files.len(), shown.join(", "))
}

/// Checks a worktree name as Claude Code does: `/`-separated parts of ASCII letters,
/// digits, `.`, `_` and `-`, none empty, `.` or `..`, at most [`MAX_NAME_LEN`] bytes.
///
/// # Errors
///
/// [`WorktreeError::InvalidName`] naming the rule broken.
pub fn validate_name(name: &str) -> Result<(), WorktreeError> {
    let invalid = |why| {
        Err(WorktreeError::InvalidName {
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return invalid("it is too long");
    }
    for part in name.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return invalid("a part is empty, '.' or '..'");
        }
        if !part
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
        {
            return invalid("it has a character outside the allowed ones");
        }
        if part.ends_with(".lock")
            || part.starts_with(['-', '.'])
            || part.ends_with('.')
            || part.contains("..")
        {
            return invalid(
                "git refuses a part starting with '-' or '.', ending in '.' or '.lock', or holding '..'",
            );
        }
    }
    Ok(())
}

/// A name for a worktree nobody named: `wt-` and 8 random hex digits.
pub fn random_name() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("wt-{}", &id[..8])
}

/// A worktree an agent works in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worktree {
    /// Its name.
    pub name: String,
    /// Its folder (resolved).
    pub path: PathBuf,
    /// Its branch (`worktree-NAME`); `None` for one a hook made.
    pub branch: Option<String>,
    /// The repository's top folder (resolved); `None` for one a hook made.
    pub repository: Option<PathBuf>,
    /// The commit it started at; `None` for one a hook made.
    pub base: Option<String>,
    /// Whether this session made it: only such a worktree is ever removed (one entered by
    /// its path is the user's, kept whatever it holds).
    pub owned: bool,
}

/// What a worktree has that its start did not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Files changed, added or deleted and not committed (`git status --porcelain` lines).
    pub files: Vec<String>,
    /// Commits on its branch since it started.
    pub commits: u64,
}

impl Changes {
    /// Whether there is anything to keep.
    pub fn any(&self) -> bool {
        !self.files.is_empty() || self.commits > 0
    }
}

/// How a worktree ended ([`Worktree::finish`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It had changes and is kept.
    Kept(Changes),
    /// It was clean and is removed, with its branch.
    Removed,
}

/// How a worktree is made.
#[derive(Clone, Copy, Debug)]
pub struct Options<'a> {
    /// Whether the folder is trusted (git runs only then).
    pub trusted: bool,
    /// Whether a main checkout with uncommitted changes is accepted (the user's own
    /// `--worktree`, told); a model's request is refused, so nothing it expects is missing.
    pub allow_dirty: bool,
    /// The settings' hooks (`WorktreeCreate`, `WorktreeRemove`).
    pub hooks: Option<&'a hooks::Hooks>,
}

/// Makes worktree `name` for the repository holding `cwd` (see the module's documentation).
///
/// # Errors
///
/// [`WorktreeError`]: a bad name, no repository, an untrusted folder, a dirty main checkout
/// (unless `options.allow_dirty`), a worktree or branch of that name already there, a git
/// command or hook that failed.
pub async fn create(
    cwd: &Path,
    name: &str,
    options: Options<'_>,
) -> Result<Worktree, WorktreeError> {
    validate_name(name)?;
    if let Some(hooks) = options
        .hooks
        .filter(|hooks| hooks.has(hooks::Event::WorktreeCreate))
    {
        return create_by_hook(hooks, name).await;
    }
    if !options.trusted {
        return Err(WorktreeError::Untrusted);
    }
    let top = match git(cwd, &["rev-parse", "--show-toplevel"]).await {
        Ok(top) => PathBuf::from(top.trim()),
        Err(_) => {
            return Err(WorktreeError::NotARepository {
                dir: cwd.to_path_buf(),
            });
        }
    };
    let top = top.canonicalize().unwrap_or(top);
    let base = git(&top, &["rev-parse", "--verify", "HEAD"])
        .await
        .map_err(|_| WorktreeError::Git {
            command: "rev-parse HEAD".to_owned(),
            detail: "the repository has no commit yet: a worktree starts from one".to_owned(),
        })?
        .trim()
        .to_owned();
    if !options.allow_dirty {
        let files = status(&top, false).await?;
        if !files.is_empty() {
            return Err(WorktreeError::Dirty { files });
        }
    }
    let path = top.join(WORKTREES_DIR).join(name);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(WorktreeError::Exists(format!(
            "a worktree named {name:?} exists already at {}: choose another name",
            path.display()
        )));
    }
    let branch = format!("worktree-{name}");
    // Checked before anything is made: the folders on the way are real folders.
    folders_on_the_way(&top, name, false)?;
    if git(
        &top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .await
    .is_ok()
    {
        return Err(WorktreeError::Exists(format!(
            "the branch {branch} exists already (an earlier worktree's): choose another name, or delete it with `git branch -D {branch}`"
        )));
    }
    let _changing = CHANGING.lock().await;
    exclude(&top).await?;
    folders_on_the_way(&top, name, true)?;
    let target = path.to_string_lossy().into_owned();
    git(
        &top,
        &["worktree", "add", "--quiet", "-b", &branch, &target, &base],
    )
    .await?;
    let resolved = path.canonicalize().unwrap_or_else(|_| path.clone());
    if resolved != path {
        // What git just checked out there goes again, registration and branch with it.
        let _ = git(&top, &["worktree", "remove", "--force", &target]).await;
        let _ = git(&top, &["branch", "-D", "--quiet", &branch]).await;
        return Err(WorktreeError::Exists(format!(
            "the worktree was made at {}, not at {}: refusing to use it",
            resolved.display(),
            path.display()
        )));
    }
    Ok(Worktree {
        name: name.to_owned(),
        path,
        branch: Some(branch),
        repository: Some(top),
        base: Some(base),
        owned: true,
    })
}

/// Checks, and with `make` makes, the folders from `top` to where worktree `name` goes
/// (`.claude`, `worktrees`, and the parts of `name` before its last): each must be a real
/// folder, never a symbolic link, and none a worktree or repository (a `.git` in it). A
/// repository can commit `.claude/worktrees` as a link to its own `.git` or to any folder of
/// the user's: git would then make the worktree there, and the agent would work (and git
/// would later run) inside it; and a folder inside a worktree is its agent's to swap for a
/// link while git is at work.
///
/// # Errors
///
/// [`WorktreeError::Exists`] naming the link or file in the way, or why a folder could not
/// be made.
fn folders_on_the_way(top: &Path, name: &str, make: bool) -> Result<(), WorktreeError> {
    let mut parts: Vec<&str> = WORKTREES_DIR.split('/').collect();
    let name_parts: Vec<&str> = name.split('/').collect();
    parts.extend(&name_parts[..name_parts.len() - 1]);
    let mut dir = top.to_path_buf();
    for part in parts {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            // Inside a worktree, the folders are its agent's to change (a sandboxed command
            // could swap one for a link between this check and git's use of it).
            Ok(meta)
                if meta.file_type().is_dir()
                    && std::fs::symlink_metadata(dir.join(".git")).is_ok() =>
            {
                return Err(WorktreeError::Exists(format!(
                    "{} is a worktree (or a repository): a worktree is not made inside another",
                    dir.display()
                )));
            }
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => {
                return Err(WorktreeError::Exists(format!(
                    "{} is a symbolic link or a file, not a folder: refusing to make a worktree through it",
                    dir.display()
                )));
            }
            Err(_) if !make => {}
            Err(_) => std::fs::create_dir(&dir).map_err(|error| {
                WorktreeError::Exists(format!("making {}: {error}", dir.display()))
            })?,
        }
    }
    Ok(())
}

/// The existing worktree at `path` of the repository holding `cwd`: it must be in that
/// checkout's `.claude/worktrees/` (reached through real folders) and one of those
/// `git worktree list` names. Its start is where its branch left the repository's `HEAD`,
/// so its commits count as its own. It is not [`Worktree::owned`]: it is never removed.
///
/// # Errors
///
/// [`WorktreeError::NotARepository`], [`WorktreeError::Untrusted`], or
/// [`WorktreeError::Exists`] saying the path is not one of the repository's worktrees.
pub async fn existing(cwd: &Path, path: &Path, trusted: bool) -> Result<Worktree, WorktreeError> {
    if !trusted {
        return Err(WorktreeError::Untrusted);
    }
    let top = git(cwd, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| WorktreeError::NotARepository {
            dir: cwd.to_path_buf(),
        })?;
    let top = PathBuf::from(top.trim());
    let top = top.canonicalize().unwrap_or(top);
    let written = cwd.join(path);
    let wanted = written.canonicalize().unwrap_or_else(|_| written.clone());
    // Only a worktree in this checkout's worktrees folder, reached through real folders: one
    // elsewhere (another checkout, the main one, a folder of the user's) is outside the
    // session's workspace, and entering it would widen what the agent may change.
    let home = top.join(WORKTREES_DIR);
    let inside = wanted
        .strip_prefix(&home)
        .ok()
        .map(|rest| rest.to_string_lossy().into_owned())
        .filter(|rest| !rest.is_empty());
    let Some(name) = inside.filter(|name| {
        folders_on_the_way(&top, name, false).is_ok()
            && std::fs::symlink_metadata(&wanted).is_ok_and(|meta| meta.is_dir())
    }) else {
        return Err(WorktreeError::Exists(format!(
            "{} is not in {}: only a worktree there can be entered",
            written.display(),
            home.display()
        )));
    };
    let list = git(&top, &["worktree", "list", "--porcelain"]).await?;
    let mut found = None;
    for entry in list.split("\n\n") {
        let mut dir = None;
        let mut branch = None;
        for line in entry.lines() {
            if let Some(rest) = line.strip_prefix("worktree ") {
                dir = Some(PathBuf::from(rest));
            } else if let Some(rest) = line.strip_prefix("branch refs/heads/") {
                branch = Some(rest.to_owned());
            }
        }
        if let Some(dir) = dir
            && dir.canonicalize().unwrap_or_else(|_| dir.clone()) == wanted
            && wanted != top
        {
            found = Some(branch);
        }
    }
    let Some(branch) = found else {
        return Err(WorktreeError::Exists(format!(
            "{} is not a worktree of the repository at {} (`git worktree list` names them)",
            wanted.display(),
            top.display()
        )));
    };
    let base = git(
        &wanted,
        &[
            "merge-base",
            "HEAD",
            git(&top, &["rev-parse", "HEAD"]).await?.trim(),
        ],
    )
    .await
    .ok()
    .map(|base| base.trim().to_owned());
    Ok(Worktree {
        name,
        path: wanted,
        branch,
        repository: Some(top),
        base,
        owned: false,
    })
}

/// A worktree a `WorktreeCreate` hook makes: the folder it names (stdout, or
/// `hookSpecificOutput.worktreePath`), which must exist.
async fn create_by_hook(hooks: &hooks::Hooks, name: &str) -> Result<Worktree, WorktreeError> {
    let verdict = hooks
        .run(
            hooks::Event::WorktreeCreate,
            &[],
            serde_json::json!({"name": name}),
        )
        .await;
    if let Some(reason) = verdict.blocks.first().or(verdict.end.as_ref()) {
        return Err(WorktreeError::Hook(reason.clone()));
    }
    let Some(path) = verdict.worktree_path else {
        return Err(WorktreeError::Hook(
            "it gave no worktree path (a command hook prints the path on stdout; an http hook answers hookSpecificOutput.worktreePath)".to_owned(),
        ));
    };
    let path = PathBuf::from(path.trim());
    if !path.is_absolute() || !path.is_dir() {
        return Err(WorktreeError::Hook(format!(
            "it named {}, which is not an existing absolute folder",
            path.display()
        )));
    }
    Ok(Worktree {
        name: name.to_owned(),
        path: path.canonicalize().unwrap_or(path),
        branch: None,
        repository: None,
        base: None,
        owned: true,
    })
}

impl Worktree {
    /// What it has that its start did not. A hook's worktree that git does not know counts
    /// as changed (nothing says it is not).
    ///
    /// # Errors
    ///
    /// [`WorktreeError::Git`] when git cannot tell.
    pub async fn changes(&self) -> Result<Changes, WorktreeError> {
        let Some(base) = &self.base else {
            return Ok(match status(&self.path, true).await {
                Ok(files) => Changes { files, commits: 0 },
                Err(_) => Changes {
                    files: vec!["(not a git worktree: its changes are unknown)".to_owned()],
                    commits: 0,
                },
            });
        };
        let mut files = status(&self.path, true).await?;
        files.extend(submodule_folders(&self.path).await?);
        // Its own branch's commits too: HEAD may be on another branch by now, and the
        // removal deletes this one.
        let mut range = vec![
            "rev-list".to_owned(),
            "--count".to_owned(),
            "HEAD".to_owned(),
        ];
        if let Some(branch) = &self.branch {
            let reference = format!("refs/heads/{branch}");
            if git(
                &self.path,
                &["rev-parse", "--verify", "--quiet", &reference],
            )
            .await
            .is_ok()
            {
                range.push(reference);
            }
        }
        range.push(format!("^{base}"));
        let range: Vec<&str> = range.iter().map(String::as_str).collect();
        let commits = git(&self.path, &range).await?.trim().parse().unwrap_or(0);
        Ok(Changes { files, commits })
    }

    /// Removes it, whatever it holds, with its branch when that is one made for it
    /// (`worktree-*`); `WorktreeRemove` hooks instead, when configured.
    ///
    /// # Errors
    ///
    /// [`WorktreeError::Git`] when git could not remove it.
    pub async fn remove(&self, hooks: Option<&hooks::Hooks>) -> Result<(), WorktreeError> {
        if let Some(hooks) = hooks.filter(|hooks| hooks.has(hooks::Event::WorktreeRemove)) {
            let path = self.path.to_string_lossy().into_owned();
            let verdict = hooks
                .run(
                    hooks::Event::WorktreeRemove,
                    &[],
                    serde_json::json!({"worktree_path": path}),
                )
                .await;
            return match verdict.blocks.first() {
                Some(reason) => Err(WorktreeError::Hook(reason.clone())),
                None => Ok(()),
            };
        }
        let (Some(top), Some(branch)) = (&self.repository, &self.branch) else {
            return Ok(());
        };
        let target = self.path.to_string_lossy().into_owned();
        let _changing = CHANGING.lock().await;
        git(top, &["worktree", "remove", "--force", &target]).await?;
        // Only a branch made for a worktree: an existing worktree's own branch is the user's.
        if branch.starts_with("worktree-") {
            git(top, &["branch", "-D", "--quiet", branch]).await?;
        }
        Ok(())
    }

    /// The end of the work: kept when it has changes or this session did not make it, else
    /// removed with its branch.
    ///
    /// # Errors
    ///
    /// As [`Worktree::changes`] and [`Worktree::remove`]; the worktree is kept then.
    pub async fn finish(&self, hooks: Option<&hooks::Hooks>) -> Result<Ending, WorktreeError> {
        let changes = self.changes().await?;
        let removable = self.repository.is_some()
            || hooks.is_some_and(|hooks| hooks.has(hooks::Event::WorktreeRemove));
        if changes.any() || !self.owned || !removable {
            return Ok(Ending::Kept(changes));
        }
        self.remove(hooks).await?;
        Ok(Ending::Removed)
    }

    /// ` on branch NAME`, or nothing for a worktree without a branch (a hook's).
    pub fn on_branch(&self) -> String {
        self.branch
            .as_ref()
            .map(|branch| format!(" on branch {branch}"))
            .unwrap_or_default()
    }

    /// A sentence for the model or the user about `ending`.
    pub fn describe(&self, ending: &Ending) -> String {
        match ending {
            Ending::Removed => format!(
                "The worktree {} had no changes and was removed.",
                self.path.display()
            ),
            Ending::Kept(changes) => {
                let mut what = Vec::new();
                if !changes.files.is_empty() {
                    what.push(format!("{} uncommitted file(s)", changes.files.len()));
                }
                if changes.commits > 0 {
                    what.push(format!("{} commit(s)", changes.commits));
                }
                if what.is_empty() {
                    what.push(if self.owned {
                        "nothing new (a WorktreeCreate hook made it, and no WorktreeRemove hook removes it)".to_owned()
                    } else {
                        "nothing new (it was there before this session)".to_owned()
                    });
                }
                format!(
                    "The worktree is kept at {}{} with {}.",
                    self.path.display(),
                    self.on_branch(),
                    what.join(" and ")
                )
            }
        }
    }
}

/// The submodule paths of the worktree at `dir` that hold something: git's status does not
/// look inside submodules (their configuration is the agent's to write), and a fresh
/// worktree leaves them empty folders, so anything there (files, a repository, a file in
/// the folder's place) is work. From the index (`git ls-files --stage`), which reads no
/// submodule.
async fn submodule_folders(dir: &Path) -> Result<Vec<String>, WorktreeError> {
    let listed = git(dir, &["ls-files", "--stage", "-z"]).await?;
    Ok(listed
        .split('\0')
        .filter_map(|entry| {
            let (meta, path) = entry.split_once('\t')?;
            meta.starts_with("160000 ").then_some(path)
        })
        .filter(|path| {
            let folder = dir.join(path);
            match std::fs::symlink_metadata(&folder) {
                Err(_) => false,
                Ok(meta) if meta.is_dir() => {
                    std::fs::read_dir(&folder).map_or(true, |mut entries| entries.next().is_some())
                }
                Ok(_) => true,
            }
        })
        .map(|path| format!("S  {path} (a submodule's folder, with something in it)"))
        .collect())
}

/// The main checkout's uncommitted changes to tracked files (`git status --porcelain`
/// lines) of the repository holding `cwd`; none when git cannot tell.
pub async fn uncommitted(cwd: &Path) -> Vec<String> {
    status(cwd, false).await.unwrap_or_default()
}

/// `git status --porcelain` of `dir`: tracked files only, or (`everything`) untracked and
/// ignored ones too (`!!` lines: a `.env` or `build/` the agent made is work a removal would
/// lose). Submodules are never entered: a nested repository's configuration, which a
/// sandboxed command can write, would name the programs git runs there.
async fn status(dir: &Path, everything: bool) -> Result<Vec<String>, WorktreeError> {
    let args: &[&str] = if everything {
        &["--untracked-files=normal", "--ignored=matching"]
    } else {
        &["--untracked-files=no"]
    };
    let mut command = vec!["status", "--porcelain", "--ignore-submodules=all"];
    command.extend_from_slice(args);
    Ok(git(dir, &command)
        .await?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

/// Adds `/.claude/worktrees/` to the repository's `info/exclude` unless a line says it.
async fn exclude(top: &Path) -> Result<(), WorktreeError> {
    let common = git(top, &["rev-parse", "--git-common-dir"]).await?;
    let common = top.join(common.trim());
    let info = common.join("info");
    let file = info.join("exclude");
    let line = format!("/{WORKTREES_DIR}/");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    if text.lines().any(|existing| existing.trim() == line) {
        return Ok(());
    }
    let io = |error: std::io::Error| WorktreeError::Git {
        command: "info/exclude".to_owned(),
        detail: format!("{}: {error}", file.display()),
    };
    std::fs::create_dir_all(&info).map_err(io)?;
    let separator = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    std::fs::write(&file, format!("{text}{separator}{line}\n")).map_err(io)
}

/// Runs git in `dir` with `args` (hooks and `core.fsmonitor` off, the allow-listed
/// environment); its stdout.
pub(crate) async fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let failed = |detail: String| WorktreeError::Git {
        command: args.join(" "),
        detail,
    };
    let program = tools::sandbox::env::resolve_program("git")
        .map_err(|error| failed(format!("git not found: {error}")))?;
    let mut command = std::process::Command::new(program);
    command
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .current_dir(dir);
    tools::sandbox::env::reset(
        &mut command,
        tools::sandbox::env::Confinement::Unsandboxed,
        &[],
    );
    let output = tokio::time::timeout(
        GIT_TIMEOUT,
        tokio::process::Command::from(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| failed(format!("took longer than {} s", GIT_TIMEOUT.as_secs())))?
    .map_err(|error| failed(error.to_string()))?;
    if !output.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_claude_codes_rules() {
        for good in ["fix-bug", "team/feature_2", "v1.2"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("a/../b", "'..'"),
            ("has space", "character"),
            ("x/", "empty"),
            ("-rf", "'-'"),
            ("name.lock", ".lock"),
            ("a..b", "'..'"),
            (".hidden", "'.'"),
            ("end.", "'.'"),
            (&"x".repeat(65), "too long"),
        ] {
            let error = validate_name(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains(why), "{bad:?}: {error}");
        }
    }
}
