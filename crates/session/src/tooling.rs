//! The built-in tools, the permission gate, and the file services context management uses.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use context::{FileSource, ResultStore};
use executor::{Tool, Workspace};
use protocol::ToolUseId;

/// Permission rules in Claude Code's syntax, from settings and flags.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Allowed without asking.
    pub allow: Vec<String>,
    /// Always asked (headless: refused).
    pub ask: Vec<String>,
    /// Refused.
    pub deny: Vec<String>,
}

/// The tools and the gate of a session.
pub struct Tooling {
    /// The tools the model may call.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The permission gate.
    pub permissions: Arc<tools::PermissionGate>,
    /// Which files the tools read changed on disk since.
    pub watch: tools::FileWatch,
}

/// A tool set's file watch as loop-core's attachment source: a `<system-reminder>` with the
/// diff of each file read earlier that changed on disk since.
#[derive(Debug)]
pub struct FileAttachments(pub tools::FileWatch);

impl FileAttachments {
    /// The reminders for what changed since the last call (blocking work off the async
    /// threads).
    pub async fn reminders(watch: tools::FileWatch) -> Vec<String> {
        tokio::task::spawn_blocking(move || watch.changes())
            .await
            .unwrap_or_default()
            .iter()
            .map(tools::FileChange::reminder)
            .collect()
    }
}

impl loop_core::AttachmentSource for FileAttachments {
    fn attachments<'a>(&'a self, _: loop_core::Batch<'a>) -> loop_core::AttachmentFuture<'a> {
        Box::pin(Self::reminders(self.0.clone()))
    }
}

/// L1's store: oversized tool results go to the session's `tool-results/` folder.
#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// Stores under `dir` (created on first use).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }
}

impl ResultStore for DirStore {
    fn persist(&mut self, tool_use_id: &ToolUseId, text: &str) -> Result<String, String> {
        crate::transcript::private_dir(&self.dir)
            .map_err(|error| format!("{}: {error}", self.dir.display()))?;
        // Ids come from the API; keep only safe characters in the file name.
        let name: String = tool_use_id
            .as_str()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = self.dir.join(format!("{name}.txt"));
        let written = {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut file| {
                    crate::transcript::private_file(&file)?;
                    file.write_all(text.as_bytes())
                })
        };
        written.map_err(|error| format!("{}: {error}", path.display()))?;
        Ok(path.to_string_lossy().into_owned())
    }
}

/// Current file contents for re-attachment after compaction, confined to the workspace.
#[derive(Debug)]
pub struct WorkspaceFiles {
    workspace: Arc<Workspace>,
}

impl WorkspaceFiles {
    /// Reads files of `workspace`.
    pub fn new(workspace: Arc<Workspace>) -> Self {
        Self { workspace }
    }

    fn inside(&self, path: &Path) -> bool {
        std::iter::once(&self.workspace.cwd)
            .chain(&self.workspace.additional_dirs)
            .any(|root| path.starts_with(root))
    }
}

impl FileSource for WorkspaceFiles {
    fn read(&self, path: &str) -> Option<String> {
        let path = self.workspace.cwd.join(path).canonicalize().ok()?;
        if !self.inside(&path) {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        // Binary files are not re-attached.
        String::from_utf8(bytes).ok()
    }
}

/// The tools and gate `recipe` describes in `mode`: the built-in tools confined to its
/// workspace, the mode and the `--allowedTools` / `--disallowedTools` rules. "Ask" verdicts
/// go to its prompter; without one (headless) they are denied with a message. Its `env` is
/// added to every Bash command's environment (settings' `env`), its `sandbox` says how Bash
/// commands are sandboxed, and its `journal` keeps every change of Write and Edit.
///
/// # Errors
///
/// [`tools::Error::InvalidRule`] when a permission rule does not parse.
pub fn build(
    recipe: &crate::subagents::Recipe,
    mode: tools::PermissionMode,
) -> Result<Tooling, tools::Error> {
    let workspace = &recipe.workspace;
    let rules = recipe.rules.clone();
    let default_mode = mode;
    let set = tools::ToolSet::new(tools::ToolSetConfig {
        workspace: Arc::clone(workspace),
        permissions: tools::PermissionConfig {
            default_mode,
            allow: rules.allow,
            ask: rules.ask,
            deny: rules.deny,
        },
        tool_results_dir: Some(recipe.results_dir.clone()),
        readable: crate::skills::readable(),
        prompter: recipe.prompter.clone(),
        pre_ask: (recipe.hooks.has(crate::hooks::Event::PermissionRequest)
            || recipe.hooks.has(crate::hooks::Event::Notification))
        .then(|| {
            Arc::new(crate::hooks::PermissionRequestHooks::new(
                recipe.hooks.clone(),
            )) as Arc<dyn tools::PreAsk>
        }),
        env: recipe.env.clone(),
        withheld_env: recipe.withheld_env.clone(),
        protected: crate::hooks::protected_dirs(&workspace.cwd),
        // `.git` too: a `.git` file or folder planted in a subfolder would be the repository
        // (its configuration, hooks, `gitdir`) of a session or a git command started there.
        protected_names: crate::hooks::PROTECTED_NAMES
            .iter()
            .chain(&[".git"])
            .map(|name| (*name).to_owned())
            .collect(),
        sandbox: recipe.sandbox.clone(),
        journal: recipe.journal.clone(),
        background: Some(recipe.background.clone()),
        editor: recipe.editor.clone(),
    })?;
    let permissions = set.gate();
    permissions.set_command_prelude(&recipe.prelude);
    let mut tools = set.tools();
    if let Some(web) = &recipe.web {
        tools.extend(web.tools(Arc::clone(&permissions)));
    }
    Ok(Tooling {
        tools,
        permissions,
        watch: set.file_watch(),
    })
}
