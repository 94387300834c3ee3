//! The main agent in a worktree: EnterWorktree and ExitWorktree (shapes as Claude Code's
//! `EnterWorktreeInput`/`ExitWorktreeInput` in `sdk-tools.d.ts`), and `--worktree NAME`,
//! all through one [`Current`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Options, Worktree, WorktreeError};
use crate::hooks;

/// Which worktree to move into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A new one of this name ([`super::create`]).
    New(String),
    /// An existing one of the repository, at this path ([`super::existing`]).
    Existing(PathBuf),
}

/// What to do with the worktree on the way out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Leave it and its branch on disk.
    Keep,
    /// Delete it (and its `worktree-*` branch); refused when it has work, unless
    /// `discard_changes`.
    Remove {
        /// Lose its uncommitted files and commits.
        discard_changes: bool,
    },
}

/// The worktree the main agent works in, shared by EnterWorktree, ExitWorktree, the
/// command line's `--worktree` and the session's end. Moving in points the session's gate
/// there ([`tools::PermissionGate::enter`]): paths, the shell, the sandbox's roots and the
/// protected folders follow.
#[derive(Clone)]
pub struct Current {
    inner: Arc<Mutex<Option<Worktree>>>,
    gate: Arc<tools::PermissionGate>,
    hooks: hooks::Hooks,
    trusted: bool,
    /// The session's workspace (its folder is the repository's checkout the agent left).
    home: Arc<Workspace>,
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current")
            .field("worktree", &self.worktree())
            .finish_non_exhaustive()
    }
}

impl Current {
    /// Not in a worktree yet; `gate` is the main agent's, `home` the session's workspace.
    pub fn new(
        gate: Arc<tools::PermissionGate>,
        hooks: hooks::Hooks,
        trusted: bool,
        home: Arc<Workspace>,
    ) -> Self {
        Self {
            inner: Arc::default(),
            gate,
            hooks,
            trusted,
            home,
        }
    }

    /// The worktree the agent works in now.
    pub fn worktree(&self) -> Option<Worktree> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Moves the main agent into `target`. `allow_dirty`: a new worktree is made even when
    /// the main checkout has uncommitted changes (the user's `--worktree`).
    ///
    /// # Errors
    ///
    /// [`WorktreeError`]: already in one, or it could not be made or found.
    pub async fn enter(
        &self,
        target: Target,
        allow_dirty: bool,
    ) -> Result<Worktree, WorktreeError> {
        if let Some(worktree) = self.worktree() {
            return Err(WorktreeError::Exists(format!(
                "already working in the worktree {}: ExitWorktree first",
                worktree.path.display()
            )));
        }
        let worktree = match target {
            Target::New(name) => {
                let options = Options {
                    trusted: self.trusted,
                    allow_dirty,
                    hooks: Some(&self.hooks),
                };
                super::create(&self.home.cwd, &name, options).await?
            }
            Target::Existing(path) => super::existing(&self.home.cwd, &path, self.trusted).await?,
        };
        self.gate.enter(
            Workspace {
                cwd: worktree.path.clone(),
                additional_dirs: self.home.additional_dirs.clone(),
            },
            hooks::protected_dirs(&worktree.path),
        );
        *self.inner.lock().unwrap_or_else(PoisonError::into_inner) = Some(worktree.clone());
        Ok(worktree)
    }

    /// Moves the main agent back to the session's folder, keeping or removing the worktree.
    /// Returns the worktree and what became of it (`Some` changes: removed with them).
    ///
    /// # Errors
    ///
    /// [`WorktreeError::NotEntered`]; [`WorktreeError::Unsaved`] for a removal that would lose
    /// work (the agent stays in the worktree); a git or hook failure.
    pub async fn exit(
        &self,
        exit: Exit,
    ) -> Result<(Worktree, Option<super::Changes>), WorktreeError> {
        let Some(worktree) = self.worktree() else {
            return Err(WorktreeError::NotEntered);
        };
        let discarded = match exit {
            Exit::Keep => None,
            Exit::Remove { .. } if !worktree.owned => {
                return Err(WorktreeError::Exists(format!(
                    "the worktree {} was there before this session (entered by its path): it is not removed here; keep it",
                    worktree.path.display()
                )));
            }
            Exit::Remove { discard_changes } => {
                let changes = worktree.changes().await?;
                if changes.any() && !discard_changes {
                    return Err(WorktreeError::Unsaved {
                        path: worktree.path.clone(),
                        changes,
                    });
                }
                // Out of it before it goes: nothing runs in a folder being deleted.
                self.gate.leave();
                worktree.remove(Some(&self.hooks)).await?;
                Some(changes)
            }
        };
        self.gate.leave();
        *self.inner.lock().unwrap_or_else(PoisonError::into_inner) = None;
        Ok((worktree, discarded))
    }

    /// The session ends: a worktree still in use is kept when it has changes, else removed;
    /// a sentence for the user says which (`None`: none was in use).
    pub async fn end(&self) -> Option<String> {
        let worktree = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        self.gate.leave();
        Some(match worktree.finish(Some(&self.hooks)).await {
            Ok(ending) => worktree.describe(&ending),
            Err(error) => format!(
                "The worktree is kept at {}: {error}",
                worktree.path.display()
            ),
        })
    }
}

/// `EnterWorktree`.
#[derive(Debug)]
pub struct EnterWorktreeTool {
    current: Current,
    schema: Value,
}

impl EnterWorktreeTool {
    /// The tool, moving through `current`.
    pub fn new(current: Current) -> Self {
        Self {
            current,
            schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Name of a new worktree: /-separated parts of letters, digits, '.', '_' and '-', at most 64 characters; a random one when omitted. Not with path."},
                    "path": {"type": "string", "description": "Path of an existing worktree of this repository (one `git worktree list` names) to move into instead. Not with name."}
                },
                "additionalProperties": false
            }),
        }
    }
}

#[derive(Deserialize)]
struct EnterInput {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    path: Option<String>,
}

impl Tool for EnterWorktreeTool {
    fn name(&self) -> &str {
        "EnterWorktree"
    }

    fn description(&self) -> &str {
        "Move your work into a git worktree: a separate checkout of this repository on its own branch (.claude/worktrees/NAME, branch worktree-NAME, from HEAD), apart from the main checkout and other agents. Relative paths, your shell and the sandbox are then in it. ExitWorktree leaves it; at the session's end it is kept if changed, else removed. Needs a main checkout without uncommitted changes."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// Moving into an isolated copy changes none of the user's files.
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: EnterInput = serde_json::from_value(input).map_err(|error| {
                ToolError::InvalidInput(format!("invalid input for EnterWorktree: {error}"))
            })?;
            let target = match (input.name, input.path) {
                (Some(_), Some(_)) => {
                    return Err(ToolError::InvalidInput(
                        "give name or path, not both".to_owned(),
                    ));
                }
                (None, Some(path)) => Target::Existing(PathBuf::from(path)),
                (Some(name), None) => Target::New(name),
                (None, None) => Target::New(super::random_name()),
            };
            let worktree = self
                .current
                .enter(target, false)
                .await
                .map_err(|error| ToolError::InvalidInput(error.to_string()))?;
            let message = format!(
                "Switched to the worktree at {}{}. Relative paths, your shell and the sandbox are there now; the main checkout at {} is outside your workspace until ExitWorktree.",
                worktree.path.display(),
                worktree.on_branch(),
                self.current.home.cwd.display()
            );
            Ok(ToolOutput::text(message.clone()).with_structured(json!({
                "worktreePath": worktree.path,
                "worktreeBranch": worktree.branch,
                "message": message,
            })))
        })
    }
}

/// `ExitWorktree`.
#[derive(Debug)]
pub struct ExitWorktreeTool {
    current: Current,
    schema: Value,
}

impl ExitWorktreeTool {
    /// The tool, moving through `current`.
    pub fn new(current: Current) -> Self {
        Self {
            current,
            schema: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["keep", "remove"], "description": "\"keep\" leaves the worktree and its branch on disk; \"remove\" deletes both"},
                    "discard_changes": {"type": "boolean", "description": "Required true to remove a worktree with uncommitted files or commits of its own; without it the removal is refused and they are listed"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        }
    }
}

#[derive(Deserialize)]
struct ExitInput {
    action: String,
    #[serde(default)]
    discard_changes: Option<bool>,
}

impl Tool for ExitWorktreeTool {
    fn name(&self) -> &str {
        "ExitWorktree"
    }

    fn description(&self) -> &str {
        "Leave the worktree EnterWorktree moved you into, back to the main checkout: \"keep\" leaves it and its branch on disk (tell the user where), \"remove\" deletes both (refused when it has uncommitted files or commits of its own, unless discard_changes)."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// Keeping changes nothing; removing deletes files.
    fn is_read_only(&self, input: &Value) -> bool {
        input.get("action").and_then(Value::as_str) == Some("keep")
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: ExitInput = serde_json::from_value(input).map_err(|error| {
                ToolError::InvalidInput(format!("invalid input for ExitWorktree: {error}"))
            })?;
            let exit = match input.action.as_str() {
                "keep" => Exit::Keep,
                "remove" => Exit::Remove {
                    discard_changes: input.discard_changes == Some(true),
                },
                other => {
                    return Err(ToolError::InvalidInput(format!(
                        "action {other:?}: it is \"keep\" or \"remove\""
                    )));
                }
            };
            let (worktree, discarded) = self
                .current
                .exit(exit)
                .await
                .map_err(|error| ToolError::InvalidInput(error.to_string()))?;
            let branch = worktree
                .branch
                .as_ref()
                .map(|branch| format!(" (branch {branch})"))
                .unwrap_or_default();
            let message = match (&exit, &discarded) {
                (Exit::Keep, _) => format!(
                    "Back in {}. The worktree is kept at {}{branch}.",
                    self.current.home.cwd.display(),
                    worktree.path.display()
                ),
                (Exit::Remove { .. }, Some(changes)) if changes.any() => format!(
                    "Back in {}. The worktree {} is removed; {} uncommitted file(s) and {} commit(s) were discarded.",
                    self.current.home.cwd.display(),
                    worktree.path.display(),
                    changes.files.len(),
                    changes.commits
                ),
                (Exit::Remove { .. }, _) => format!(
                    "Back in {}. The worktree {} is removed.",
                    self.current.home.cwd.display(),
                    worktree.path.display()
                ),
            };
            let mut structured = json!({
                "action": input.action,
                "originalCwd": self.current.home.cwd,
                "worktreePath": worktree.path,
                "worktreeBranch": worktree.branch,
                "message": message,
            });
            if let Some(changes) = discarded.filter(super::Changes::any) {
                structured["discardedFiles"] = json!(changes.files.len());
                structured["discardedCommits"] = json!(changes.commits);
            }
            Ok(ToolOutput::text(message).with_structured(structured))
        })
    }
}
