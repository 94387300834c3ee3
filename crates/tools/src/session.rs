//! A session's tools and the state they share.

use std::fmt;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use dashmap::DashMap;
use executor::{Tool, Workspace};

use crate::permissions::rules::{Rule, RuleSet};
use crate::permissions::{PermissionConfig, PermissionGate, Prompter};
use crate::{Error, paths};

/// What a [`ToolSet`] is built from.
#[derive(Clone, Default)]
pub struct ToolSetConfig {
    /// The session's working directory and additional directories: the confinement roots.
    /// Tools confine to the workspace their [`executor::ToolContext`] carries; the gate uses
    /// this one. They are the same in a normal session.
    pub workspace: Arc<Workspace>,
    /// Mode and rules.
    pub permissions: PermissionConfig,
    /// The session's folder of persisted large tool results; always readable by Read, Grep
    /// and Glob, whatever the confinement. Must be absolute to take effect.
    pub tool_results_dir: Option<PathBuf>,
    /// More folders Read, Grep and Glob may read whatever the confinement (the user's skill
    /// folders, whose files a loaded skill names). Resolved when the set is built; relative
    /// or missing folders are ignored.
    pub readable: Vec<PathBuf>,
    /// Who answers "ask" verdicts; `None` is a headless session, where they are denied.
    pub prompter: Option<Arc<dyn Prompter>>,
    /// Decides questions before the prompter (or the headless refusal) sees them: Claude
    /// Code's PermissionRequest hooks. `None`: nothing does.
    pub pre_ask: Option<Arc<dyn crate::PreAsk>>,
    /// Extra environment variables for every Bash command (settings' `env`), on top of the
    /// variables of the process's own environment that commands receive
    /// ([`sandbox::env::PASSED_VARIABLES`]; nothing else of it is passed). Later pairs win over
    /// earlier ones; [`sandbox::env::AGENT_CREDENTIALS`] are removed even from here.
    pub env: Vec<(String, String)>,
    /// Variables of the process's environment that hold the agent's own keys beyond
    /// [`sandbox::env::AGENT_CREDENTIALS`] (each provider's `apiKeyEnv`): removed from the
    /// environment of a command the user types ([`crate::BashRun::UserShell`]), which gets
    /// the rest of the agent's environment. Other commands get only the passed variables.
    pub withheld_env: Vec<String>,
    /// Folders Write and Edit refuse whatever the mode and the rules (the agent's own
    /// settings). A path is refused when, as written or resolved (the shell's working
    /// directory, `~`, `..`, symbolic links), it lies under one of them as they are now
    /// (resolved again for every call: a folder later replaced by a link stays protected),
    /// ignoring case. Absolute paths only.
    pub protected: Vec<PathBuf>,
    /// Folder names whose contents Write and Edit refuse wherever they are (`.agent`: a
    /// nested one would be the settings of a session started there), ignoring case.
    pub protected_names: Vec<String>,
    /// How Bash commands are sandboxed.
    pub sandbox: SandboxConfig,
    /// Told of every file Write and Edit change, before and after (the session's
    /// checkpoints); `None` keeps no record.
    pub journal: Option<Arc<dyn crate::WriteJournal>>,
    /// The session's background tasks (shared with its subagents' tool sets); `None`: a
    /// registry of this tool set's own, whose output files go to the tool-results folder's
    /// `tasks/` (or the tool set's private folder) and whose tasks start directly.
    pub background: Option<crate::background::BackgroundTasks>,
    /// An editor's buffers that Read, Write and Edit go through for text files
    /// ([`crate::EditorFiles`]); `None`: the disk.
    pub editor: Option<Arc<dyn crate::EditorFiles>>,
}

/// How Bash commands are sandboxed (which profile each command gets:
/// [`PermissionGate::evaluate_bash`](crate::PermissionGate::evaluate_bash)).
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// The back end; `None` when the user turned the sandbox off (`--sandbox off`). With
    /// [`sandbox::Backend::Unavailable`] or `None`, commands allowed by a rule or the mode run
    /// unsandboxed and every other command is asked.
    pub backend: Option<sandbox::Backend>,
    /// Whether sandboxed commands may use the network in the workspace-write profile
    /// (setting `sandbox.network`); the read-only profile never has network.
    pub network: bool,
    /// Whether commands the user types (`!command`) run in the sandbox as an approved call
    /// would (setting `sandbox.userCommands: "sandboxed"`); by default they run as in the
    /// user's own shell ([`crate::BashRun::UserShell`]).
    pub user_commands: bool,
    /// This program's executable, when it runs the sandbox helper ([`sandbox::HELPER_ARG`]):
    /// then read-only commands under bubblewrap share one persistent sandbox
    /// ([`sandbox::Zygote`]) instead of starting one each; `None`: a sandbox per command.
    pub helper: Option<PathBuf>,
}

impl Default for SandboxConfig {
    /// The back end [`sandbox::Backend::detect`] finds without a Landlock helper (bubblewrap
    /// or nothing), no network.
    fn default() -> Self {
        Self {
            backend: Some(sandbox::Backend::detect(None)),
            network: false,
            user_commands: false,
            helper: None,
        }
    }
}

impl SandboxConfig {
    /// Whether commands run in a sandbox.
    pub fn is_active(&self) -> bool {
        self.backend
            .as_ref()
            .is_some_and(sandbox::Backend::is_available)
    }

    /// One line for `system/init` and the start-up note: `bwrap`, `landlock`, `off` (chosen),
    /// or `none` (nothing available).
    pub fn describe(&self) -> String {
        match &self.backend {
            None => "off".to_owned(),
            Some(backend) => backend.name().to_owned(),
        }
    }
}

impl fmt::Debug for ToolSetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolSetConfig")
            .field("workspace", &self.workspace)
            .field("permissions", &self.permissions)
            .field("tool_results_dir", &self.tool_results_dir)
            .field("readable", &self.readable)
            .field("interactive", &self.prompter.is_some())
            .field("pre_ask", &self.pre_ask.is_some())
            .field(
                "env",
                &self.env.iter().map(|(key, _)| key).collect::<Vec<_>>(),
            )
            .field("withheld_env", &self.withheld_env)
            .field("protected", &self.protected)
            .field("protected_names", &self.protected_names)
            .field("sandbox", &self.sandbox)
            .field("journal", &self.journal.is_some())
            .field("editor", &self.editor.is_some())
            .finish()
    }
}

/// The built-in tools of one session and their permission gate, sharing one read-file state
/// (for read-before-write) and one shell working directory.
///
/// Build one per session: two sessions must not share the read state.
#[derive(Clone)]
pub struct ToolSet {
    tools: Vec<Arc<dyn Tool>>,
    gate: Arc<PermissionGate>,
}

impl fmt::Debug for ToolSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|tool| tool.name()).collect();
        f.debug_struct("ToolSet")
            .field("tools", &names)
            .field("gate", &self.gate)
            .finish()
    }
}

impl ToolSet {
    /// Builds the six tools (Read, Write, Edit, Glob, Grep, Bash) and the gate.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRule`] for the first rule that does not parse: a mistyped deny rule
    /// silently ignored would be a hole.
    pub fn new(config: ToolSetConfig) -> Result<Self, Error> {
        let base = paths::real_path(&config.workspace.cwd)?;
        let rules = RuleSet::parse(
            &config.permissions.allow,
            &config.permissions.ask,
            &config.permissions.deny,
            &base,
        )?;
        let tool_results_dir = config
            .tool_results_dir
            .as_deref()
            .filter(|dir| dir.is_absolute())
            .map(paths::real_path)
            .transpose()?;
        let private = sandbox::PrivateDir::create().map_err(|error| Error::PrivateDir {
            reason: error.to_string(),
        })?;
        let background = config.background.unwrap_or_else(|| {
            crate::background::BackgroundTasks::new(
                tool_results_dir
                    .clone()
                    .unwrap_or_else(|| private.path().to_path_buf())
                    .join("tasks"),
                Vec::new(),
            )
        });
        let shared = Arc::new(Shared {
            background: background.clone(),
            private,
            grants: DashMap::new(),
            turn_allow: RwLock::new(Vec::new()),
            next_grant: AtomicU64::new(0),
            session_allow: RwLock::new(Vec::new()),
            todos: crate::todo::TodoList::default(),
            sandbox: config.sandbox,
            journal: config.journal,
            editor: config.editor,
            workspace: Arc::clone(&config.workspace),
            mode: crate::permissions::ModeCell::new(config.permissions.default_mode),
            rules,
            tool_results_dir,
            readable: config
                .readable
                .iter()
                .filter(|dir| dir.is_absolute())
                .filter_map(|dir| paths::real_path(dir).ok())
                .collect(),
            entered: RwLock::new(None),
            read_state: DashMap::new(),
            snapshots: DashMap::new(),
            shell_cwd: Mutex::new(None),
            zygote: Mutex::new(None),
            env: config.env,
            prelude: RwLock::new(String::new()),
            withheld_env: config.withheld_env,
            protected: config
                .protected
                .into_iter()
                .filter(|dir| dir.is_absolute())
                .collect(),
            protected_names: config
                .protected_names
                .iter()
                .map(|name| name.to_lowercase())
                .collect(),
        });
        let tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(crate::read::ReadTool::new(Arc::clone(&shared))),
            Arc::new(crate::write::WriteTool::new(Arc::clone(&shared))),
            Arc::new(crate::edit::EditTool::new(Arc::clone(&shared))),
            Arc::new(crate::glob::GlobTool::new(Arc::clone(&shared))),
            Arc::new(crate::grep::GrepTool::new(Arc::clone(&shared))),
            Arc::new(crate::bash::BashTool::new(
                Arc::clone(&shared),
                config.prompter.clone(),
                config.pre_ask.clone(),
            )),
            Arc::new(crate::notebook::NotebookEditTool::new(Arc::clone(&shared))),
        ];
        let mut tools = tools;
        tools.extend(
            crate::todo::TaskTool::all(&shared.todos)
                .into_iter()
                .map(|tool| Arc::new(tool) as Arc<dyn Tool>),
        );
        tools.push(Arc::new(crate::background::TaskOutputTool::new(
            background.clone(),
        )));
        tools.push(Arc::new(crate::background::TaskStopTool::new(background)));
        tools.push(Arc::new(crate::background::MonitorTool::new(Arc::clone(
            &shared,
        ))));
        let gate = Arc::new(PermissionGate::new(shared, config.prompter, config.pre_ask));
        Ok(Self { tools, gate })
    }

    /// The tools, for [`executor::StreamingToolExecutor::new`] and the request's tool list.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.iter().find(|tool| tool.name() == name).cloned()
    }

    /// The permission gate, for [`executor::StreamingToolExecutor::new`].
    pub fn gate(&self) -> Arc<PermissionGate> {
        Arc::clone(&self.gate)
    }

    /// What tells which files the session has read changed on disk since
    /// ([`crate::FileWatch::changes`]).
    pub fn file_watch(&self) -> crate::FileWatch {
        crate::FileWatch::new(Arc::clone(&self.gate.shared))
    }
}

/// The tools of a headless session: [`ToolSet::new`] without a tool-results folder or a
/// prompter.
///
/// # Errors
///
/// [`Error::InvalidRule`] for a rule that does not parse.
pub fn builtin(workspace: Arc<Workspace>, permissions: PermissionConfig) -> Result<ToolSet, Error> {
    ToolSet::new(ToolSetConfig {
        workspace,
        permissions,
        ..ToolSetConfig::default()
    })
}

/// Extra allow rules of one turn ([`PermissionGate::grant_for_turn`]); dropping it removes
/// them.
#[must_use = "the rules are removed when the grant drops"]
pub struct TurnGrant {
    shared: Arc<Shared>,
    id: u64,
}

impl fmt::Debug for TurnGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnGrant").field("id", &self.id).finish()
    }
}

impl Drop for TurnGrant {
    fn drop(&mut self) {
        self.shared
            .turn_allow
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

/// What a Read saw of a file: enough to tell later whether it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStamp {
    /// Hash of the whole content (std's SipHash; stable within a process, which is all a
    /// session needs).
    pub(crate) hash: u64,
    /// Length in bytes.
    pub(crate) len: u64,
    /// Modification time, when the file system reports one.
    pub(crate) modified: Option<SystemTime>,
}

/// Hashes content incrementally; equal bytes give equal hashes however they are split.
#[derive(Default)]
pub(crate) struct ContentHasher {
    hasher: std::collections::hash_map::DefaultHasher,
    len: u64,
}

impl ContentHasher {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.hasher.write(bytes);
        self.len += bytes.len() as u64;
    }

    pub(crate) fn stamp(&self, modified: Option<SystemTime>) -> FileStamp {
        FileStamp {
            hash: self.hasher.finish(),
            len: self.len,
            modified,
        }
    }
}

impl FileStamp {
    pub(crate) fn of(bytes: &[u8], modified: Option<SystemTime>) -> Self {
        let mut hasher = ContentHasher::default();
        hasher.update(bytes);
        hasher.stamp(modified)
    }

    /// Whether `bytes` is the content this stamp saw (modification times are not compared:
    /// a `touch` is not a change).
    pub(crate) fn same_content(&self, bytes: &[u8]) -> bool {
        let other = Self::of(bytes, None);
        other.len == self.len && other.hash == self.hash
    }
}

/// State shared by the tools and the gate of one session.
pub(crate) struct Shared {
    /// The workspace the set was built for (its rules are relative to its folder).
    pub(crate) workspace: Arc<Workspace>,
    /// The workspace the agent moved into ([`crate::PermissionGate::enter`]: a worktree),
    /// with the folders protected there; `None`: [`Shared::workspace`].
    entered: RwLock<Option<(Arc<Workspace>, Vec<PathBuf>)>>,
    pub(crate) mode: crate::permissions::ModeCell,
    pub(crate) rules: RuleSet,
    /// Resolved.
    pub(crate) tool_results_dir: Option<PathBuf>,
    /// Folders always readable (resolved).
    pub(crate) readable: Vec<PathBuf>,
    /// Resolved path -> what the last Read (or our own write) saw.
    pub(crate) read_state: DashMap<PathBuf, FileStamp>,
    /// Resolved path -> the whole content the last Read (or our own write) saw, for files of
    /// at most [`crate::watch::SNAPSHOT_BYTES`]: what a later change is compared with.
    pub(crate) snapshots: DashMap<PathBuf, Arc<[u8]>>,
    /// Where the last Bash command left its shell, when inside the workspace.
    shell_cwd: Mutex<Option<PathBuf>>,
    /// Extra environment of Bash commands.
    pub(crate) env: Vec<(String, String)>,
    /// Shell lines every model command runs first, in its shell (Claude Code's
    /// `CLAUDE_ENV_FILE`: what SessionStart hooks left there).
    pub(crate) prelude: RwLock<String>,
    /// What a command the user types does not get of the agent's environment.
    pub(crate) withheld_env: Vec<String>,
    /// Folders Write and Edit refuse (absolute, as configured).
    pub(crate) protected: Vec<PathBuf>,
    /// Folder names Write and Edit refuse anywhere (lowercase).
    pub(crate) protected_names: Vec<String>,
    /// How Bash commands are sandboxed.
    pub(crate) sandbox: SandboxConfig,
    /// The persistent sandbox of read-only commands ([`SandboxConfig::helper`]), started by
    /// the first one.
    zygote: Mutex<Option<Result<Arc<sandbox::Zygote>, ()>>>,
    /// Told of every change Write and Edit make.
    pub(crate) journal: Option<Arc<dyn crate::WriteJournal>>,
    /// The session's private folder: sandboxed commands' `TMPDIR`, and the files Bash's
    /// exit trap writes its final directory to.
    pub(crate) private: sandbox::PrivateDir,
    /// How each Bash call the gate let through must run, by tool_use id (taken by the call).
    pub(crate) grants: DashMap<String, crate::permissions::BashRun>,
    /// Allow rules of the running turn ([`PermissionGate::grant_for_turn`]), by grant.
    pub(crate) turn_allow: RwLock<Vec<(u64, Rule)>>,
    /// The id of the next turn grant.
    pub(crate) next_grant: AtomicU64,
    /// Allow rules granted by an "always" answer, for the rest of the session, with their
    /// text ([`crate::Always::grant`]).
    pub(crate) session_allow: RwLock<Vec<(String, Rule)>>,
    /// The todo list of this tool set (TodoWrite's).
    pub(crate) todos: crate::todo::TodoList,
    /// The background tasks Bash starts.
    pub(crate) background: crate::background::BackgroundTasks,
    /// The editor's buffers, when the files go through them.
    pub(crate) editor: Option<Arc<dyn crate::EditorFiles>>,
}

impl Shared {
    /// The persistent sandbox for `policy` (read-only, bubblewrap, with a helper): the one
    /// running when it enforces `policy`, else a new one (the old one ends when its last
    /// command does); `None` when there is none to have (the command then starts a sandbox
    /// of its own).
    pub(crate) fn zygote(
        &self,
        policy: &sandbox::Policy,
        cwd: &Path,
    ) -> Option<Arc<sandbox::Zygote>> {
        let helper = self.sandbox.helper.as_ref()?;
        let backend @ sandbox::Backend::Bubblewrap(_) = self.sandbox.backend.as_ref()? else {
            return None;
        };
        let mut slot = self.zygote.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref() {
            Some(Ok(zygote)) if zygote.serves(policy) => return Some(Arc::clone(zygote)),
            // It could not start here once: it will not the next time either.
            Some(Err(())) => return None,
            _ => {}
        }
        match sandbox::Sandbox::new(backend.clone()).zygote(policy, helper, cwd) {
            Ok(zygote) => {
                let zygote = Arc::new(zygote);
                *slot = Some(Ok(Arc::clone(&zygote)));
                Some(zygote)
            }
            Err(error) => {
                tracing::warn!(%error, "no persistent sandbox: a sandbox per command");
                *slot = Some(Err(()));
                None
            }
        }
    }

    /// Whether an allow rule, of the settings, of the session or of the running turn,
    /// satisfies `covers`.
    pub(crate) fn allows(&self, covers: impl Fn(&Rule) -> bool) -> bool {
        self.rules.allow.iter().any(&covers)
            || self
                .session_allow
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|(_, rule)| covers(rule))
            || self
                .turn_allow
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|(_, rule)| covers(rule))
    }

    /// Adds `rules` to the running turn's allow rules until the guard drops.
    pub(crate) fn grant(self: &Arc<Self>, rules: Vec<Rule>) -> TurnGrant {
        let id = self.next_grant.fetch_add(1, Ordering::Relaxed);
        self.turn_allow
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(rules.into_iter().map(|rule| (id, rule)));
        TurnGrant {
            shared: Arc::clone(self),
            id,
        }
    }
    /// Where the agent works now: the workspace it moved into, else the set's own.
    pub(crate) fn current(&self) -> Arc<Workspace> {
        self.entered
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or_else(
                || Arc::clone(&self.workspace),
                |(entered, _)| Arc::clone(entered),
            )
    }

    /// The workspace a call works in: the one the agent moved into, else `given` (its
    /// [`executor::ToolContext`]'s).
    pub(crate) fn effective(&self, given: &Arc<Workspace>) -> Arc<Workspace> {
        self.entered
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or_else(|| Arc::clone(given), |(entered, _)| Arc::clone(entered))
    }

    /// The folders Write, Edit and the sandbox protect where the agent works now.
    pub(crate) fn protected_dirs(&self) -> Vec<PathBuf> {
        self.entered
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or_else(
                || self.protected.clone(),
                |(_, protected)| protected.clone(),
            )
    }

    /// Moves the agent into `workspace` with `protected` (`None`: back to the set's own);
    /// its shell starts in the new folder.
    pub(crate) fn enter(&self, entered: Option<(Arc<Workspace>, Vec<PathBuf>)>) {
        *self.entered.write().unwrap_or_else(PoisonError::into_inner) = entered;
        self.set_shell_cwd(None);
    }

    /// The session's working directory: where the last Bash command `cd`'d to, if that is
    /// still a directory inside the workspace, else the workspace's.
    pub(crate) fn cwd(&self, workspace: &Workspace) -> PathBuf {
        let remembered = self
            .shell_cwd
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Resolved again on every use: a folder swapped for a link to somewhere else since the
        // command that went there is not followed out of the workspace.
        if let Some(dir) = remembered.and_then(|dir| paths::real_path(&dir).ok())
            && paths::is_under(&dir, &paths::roots(workspace))
            && dir.is_dir()
        {
            return dir;
        }
        paths::real_path(&workspace.cwd)
            .ok()
            .filter(|_| workspace.cwd.is_absolute())
            .unwrap_or_else(|| workspace.cwd.clone())
    }

    /// Remembers where a Bash command left its shell.
    pub(crate) fn set_shell_cwd(&self, dir: Option<PathBuf>) {
        *self
            .shell_cwd
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = dir;
    }

    /// Resolves `raw` against the session's working directory and checks the confinement
    /// for `tool`.
    ///
    /// # Errors
    ///
    /// [`Error::NulByte`], [`Error::OutsideWorkspace`], [`Error::SymlinkLoop`],
    /// [`Error::NoWorkingDirectory`].
    pub(crate) fn confine(
        &self,
        workspace: &Workspace,
        tool: &str,
        raw: &str,
    ) -> Result<PathBuf, Error> {
        let cwd = self.cwd(workspace);
        let path = paths::resolve(raw, &cwd)?;
        if matches!(tool, "Write" | "Edit" | "NotebookEdit")
            && self.is_protected(workspace, raw, &cwd, &path)
        {
            return Err(Error::Protected { path });
        }
        self.check_confined(workspace, tool, &path)?;
        Ok(path)
    }

    /// Whether a write to `raw` (resolved: `path`) would land in a protected folder: the
    /// path as written and as resolved, against each folder as written and as it resolves
    /// now, ignoring case; or any folder of it below the workspace root named like a
    /// protected name (a workspace that itself lives under such a name stays usable).
    fn is_protected(&self, workspace: &Workspace, raw: &str, cwd: &Path, path: &Path) -> bool {
        let lower = |path: &Path| PathBuf::from(path.to_string_lossy().to_lowercase());
        let written = lower(&paths::lexical(raw, cwd));
        let resolved = lower(path);
        let roots: Vec<PathBuf> = paths::roots(workspace)
            .iter()
            .map(|root| lower(root))
            .collect();
        let named = [&written, &resolved].iter().any(|candidate| {
            let inside = roots
                .iter()
                .filter_map(|root| candidate.strip_prefix(root).ok())
                .min_by_key(|rest| rest.components().count())
                .unwrap_or(candidate.as_path());
            inside.components().any(|part| {
                self.protected_names
                    .iter()
                    .any(|name| part.as_os_str() == name.as_str())
            })
        });
        let real_roots = paths::roots(workspace);
        let sandbox_protected = crate::sandboxing::is_protected_in(
            &real_roots,
            &[paths::lexical(raw, cwd), path.to_path_buf()],
        );
        named
            || sandbox_protected
            || self.protected_dirs().iter().any(|dir| {
                let now = paths::real_path(dir).unwrap_or_else(|_| dir.clone());
                [lower(dir), lower(&now)]
                    .iter()
                    .any(|dir| written.starts_with(dir) || resolved.starts_with(dir))
            })
    }

    /// Checks that `path` (resolved) is inside the workspace roots, or in the tool-results
    /// folder for the reading tools, or under a directory an allow rule opens to `tool`.
    ///
    /// # Errors
    ///
    /// [`Error::OutsideWorkspace`].
    /// Where a Glob or Grep searches: its `path` argument confined like any path, else the
    /// session's working directory (which must itself be inside the workspace).
    ///
    /// # Errors
    ///
    /// As [`Shared::confine`] and [`Shared::check_confined`].
    pub(crate) fn search_root(
        &self,
        workspace: &Workspace,
        tool: &str,
        path: Option<&str>,
    ) -> Result<PathBuf, Error> {
        match path {
            Some(path) => self.confine(workspace, tool, path),
            None => {
                let cwd = self.cwd(workspace);
                self.check_confined(workspace, tool, &cwd)?;
                Ok(cwd)
            }
        }
    }

    pub(crate) fn check_confined(
        &self,
        workspace: &Workspace,
        tool: &str,
        path: &Path,
    ) -> Result<(), Error> {
        let roots = paths::roots(workspace);
        if paths::is_under(path, &roots) {
            return Ok(());
        }
        let reads = matches!(tool, "Read" | "Grep" | "Glob");
        if reads
            && self
                .tool_results_dir
                .iter()
                .chain(&self.readable)
                .any(|dir| path.starts_with(dir))
        {
            return Ok(());
        }
        if self.allows(|rule| rule.matches_path(tool, path)) {
            return Ok(());
        }
        Err(Error::OutsideWorkspace {
            path: path.to_path_buf(),
            roots: paths::describe(&roots),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Every description the tool set offers reads as prose: no runs of spaces or line
    /// breaks left by a broken string continuation, no control characters, a full stop at
    /// the end, and short enough that the tool list stays a small part of the prefix.
    #[test]
    fn tool_descriptions_are_clean_sentences() {
        let dir = crate::testutil::TempDir::new("descriptions");
        let workspace = Arc::new(Workspace {
            cwd: dir.real(),
            additional_dirs: Vec::new(),
        });
        let set = builtin(workspace, PermissionConfig::default()).unwrap();
        let gate = set.gate();
        let mut tools = set.tools();
        tools.extend([
            gate.exit_plan_mode_tool(),
            gate.enter_plan_mode_tool(),
            gate.ask_user_question_tool(true),
        ]);
        assert_eq!(tools.len(), 18);
        let mut problems = Vec::new();
        let mut check = |ok: bool, problem: String| {
            if !ok {
                problems.push(problem);
            }
        };
        for tool in &tools {
            let name = tool.name();
            let description = tool.description();
            check(
                (150..=4000).contains(&description.len()),
                format!("{name}: {} characters", description.len()),
            );
            check(
                !description.contains("  "),
                format!("{name}: a run of spaces"),
            );
            check(
                !description.chars().any(char::is_control),
                format!("{name}: a control character"),
            );
            check(
                description.ends_with('.') || description.ends_with(".)"),
                format!("{name}: no full stop at the end"),
            );
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn hashing_does_not_depend_on_chunking() {
        let content: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = FileStamp::of(&content, None);
        for chunk in [1, 7, 64, 4096] {
            let mut hasher = ContentHasher::default();
            for piece in content.chunks(chunk) {
                hasher.update(piece);
            }
            assert_eq!(hasher.stamp(None), whole, "chunks of {chunk}");
        }
        assert!(whole.same_content(&content));
        assert!(!whole.same_content(&content[1..]));
    }
}
