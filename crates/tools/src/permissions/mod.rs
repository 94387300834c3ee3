//! The permission gate: Claude Code's modes and allow / ask / deny rules.
//!
//! [`PermissionGate::evaluate`] answers, for one call, with a [`Verdict`]; the
//! [`CanUseTool`] implementation turns `Ask` into a question to the [`Prompter`] or, when
//! there is none (headless), into a denial that says how to allow the call. Before either,
//! the tool validates the call ([`executor::Tool::validate`]: an Edit's text present once,
//! the file read first and unchanged): a call that cannot apply fails with the tool's own
//! error ([`PermissionDecision::Fail`]), unasked and not counted as refused.
//!
//! Order of decision, first match wins:
//!
//! 1. File tools: the path must pass the workspace confinement (whatever the mode).
//! 2. A deny rule matches (for Bash: any part of the command, also after the `cd`s before it
//!    in the line) -> Deny.
//! 3. Bash, while a Bash deny or ask rule exists: a line that cannot be split, a computed
//!    command name, code the splitter cannot see (`sh` reading stdin, `bash script.sh`,
//!    `python -c`) -> Ask.
//! 4. An ask rule matches -> Ask.
//! 5. Bash with `dangerouslyDisableSandbox: true` (and a sandbox) -> Ask; approved, it runs
//!    unsandboxed.
//! 6. Plan mode: file changes -> Deny; Bash -> Allow in the read-only sandbox (Ask without
//!    one).
//! 7. bypassPermissions -> Allow (Bash: workspace-write sandbox).
//! 8. Bash: every part allowed by an allow rule, or acceptEdits mode (with a sandbox) ->
//!    Allow in the workspace-write sandbox (unsandboxed when off); otherwise -> Allow in the
//!    read-only sandbox, or Ask when there is no sandbox.
//! 9. Other tools: read-only ones (Read, Glob, Grep) or an allow rule -> Allow; Edit and
//!    Write in acceptEdits mode -> Allow; otherwise -> Ask.
//!
//! A prefix or wildcard allow rule does not cover a command part that writes a file through
//! a redirection (`git status > out`) unless the mode is acceptEdits and the file is inside
//! the workspace, nor one with variables assigned before it (`GIT_EXTERNAL_DIFF=x git
//! diff`); an exact rule naming the whole text does.

pub(crate) mod always;
pub(crate) mod readonly;
pub(crate) mod rules;
pub(crate) mod shell;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use executor::{CanUseTool, PermissionDecision, PermissionFuture, Tool, ToolCall};
use serde_json::Value;

use crate::Error;
use crate::paths;
use crate::session::{Shared, TurnGrant};
pub use always::Always;
use rules::Rule;
use sandbox::Profile;
use shell::Part;

/// The approval mode of a session (`--permission-mode`, `permissions.defaultMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Reads run; anything else not allowed by a rule is asked.
    #[default]
    Default,
    /// Like `Default`, and Edit and Write run without asking (inside the workspace).
    AcceptEdits,
    /// Everything runs except what a deny or ask rule names; paths stay confined to the
    /// workspace.
    BypassPermissions,
    /// Only read-only calls run: the model plans, it does not change anything.
    Plan,
}

impl PermissionMode {
    /// The name used in settings and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::BypassPermissions => "bypassPermissions",
            Self::Plan => "plan",
        }
    }
}

/// The session's mode, switchable while it runs (Shift+Tab at the prompt, an approved
/// `ExitPlanMode`): every decision reads it when it is made. A subagent's gate may also
/// follow its session's mode ([`PermissionGate::follow_mode`]): it then decides in the
/// stricter of the two.
#[derive(Debug)]
pub(crate) struct ModeCell {
    own: Arc<std::sync::atomic::AtomicU8>,
    follow: std::sync::OnceLock<ModeHandle>,
}

/// A gate's mode as another gate can follow it (see [`PermissionGate::follow_mode`]).
#[derive(Clone, Debug)]
pub struct ModeHandle(Arc<std::sync::atomic::AtomicU8>);

impl ModeCell {
    pub(crate) fn new(mode: PermissionMode) -> Self {
        Self {
            own: Arc::new(std::sync::atomic::AtomicU8::new(code(mode))),
            follow: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn get(&self) -> PermissionMode {
        let own = decode(self.own.load(std::sync::atomic::Ordering::SeqCst));
        match self.follow.get() {
            Some(ModeHandle(followed)) => stricter(
                own,
                decode(followed.load(std::sync::atomic::Ordering::SeqCst)),
            ),
            None => own,
        }
    }

    pub(crate) fn set(&self, mode: PermissionMode) {
        self.own
            .store(code(mode), std::sync::atomic::Ordering::SeqCst);
    }
}

fn code(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::Default => 0,
        PermissionMode::AcceptEdits => 1,
        PermissionMode::BypassPermissions => 2,
        PermissionMode::Plan => 3,
    }
}

fn decode(code: u8) -> PermissionMode {
    match code {
        1 => PermissionMode::AcceptEdits,
        2 => PermissionMode::BypassPermissions,
        3 => PermissionMode::Plan,
        _ => PermissionMode::Default,
    }
}

/// The mode that lets less run: plan, then default, then acceptEdits, then
/// bypassPermissions.
fn stricter(a: PermissionMode, b: PermissionMode) -> PermissionMode {
    let rank = |mode| match mode {
        PermissionMode::Plan => 3,
        PermissionMode::Default => 2,
        PermissionMode::AcceptEdits => 1,
        PermissionMode::BypassPermissions => 0,
    };
    if rank(a) >= rank(b) { a } else { b }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PermissionMode {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self, Error> {
        match value {
            "default" => Ok(Self::Default),
            "acceptEdits" => Ok(Self::AcceptEdits),
            "bypassPermissions" => Ok(Self::BypassPermissions),
            "plan" => Ok(Self::Plan),
            _ => Err(Error::InvalidMode {
                value: value.to_owned(),
            }),
        }
    }
}

/// The `permissions` object of Claude Code's settings: a mode and three rule lists.
///
/// Deserializes from `{"defaultMode": "acceptEdits", "allow": [...], "ask": [...],
/// "deny": [...]}`; unknown keys (`additionalDirectories`, which belongs in the
/// [`executor::Workspace`]) are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PermissionConfig {
    /// The approval mode.
    pub default_mode: PermissionMode,
    /// Rules whose calls run without asking, such as `Bash(npm run test:*)`.
    pub allow: Vec<String>,
    /// Rules whose calls are always asked, even when an allow rule matches.
    pub ask: Vec<String>,
    /// Rules whose calls never run, whatever else matches.
    pub deny: Vec<String>,
}

/// What the rules and the mode say about one call, before anyone is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Run it.
    Allow,
    /// Run it only if the user agrees.
    Ask {
        /// Why approval is needed.
        reason: String,
    },
    /// Never run it.
    Deny {
        /// Why, for the model.
        reason: String,
    },
}

/// One question to the user.
#[derive(Clone, Debug)]
pub struct PermissionRequest<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// The tool_use id of the call (a program asked in the user's place names the call by
    /// it: the Agent SDK's `can_use_tool`).
    pub tool_use_id: &'a str,
    /// Its input.
    pub input: &'a Value,
    /// Why approval is needed.
    pub reason: &'a str,
    /// For Write and Edit, the change they would make, when it can be worked out (the file
    /// is readable text of at most [`ProposedChange::MAX_BYTES`] and the edit applies).
    pub change: Option<ProposedChange>,
    /// What an "always" answer grants for the rest of the session, when anything may be
    /// offered ([`Always`]); the prompter calls [`Always::grant`] when the user picks it.
    pub always: Option<Always>,
}

/// The change a Write or Edit call would make to one file, for the question to show as a
/// diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposedChange {
    /// The file, resolved as the tool would resolve it.
    pub path: PathBuf,
    /// Its text now (`None`: there is no file).
    pub before: Option<String>,
    /// Its text after the call.
    pub after: String,
}

impl ProposedChange {
    /// The largest file a preview reads: 1 MiB.
    pub const MAX_BYTES: u64 = 1 << 20;

    /// The change `call` (a Write or an Edit) would make in `shared`'s workspace.
    fn of(shared: &Shared, call: &ToolCall) -> Option<Self> {
        let raw = call.input.get("file_path")?.as_str()?;
        let path = shared.confine(&shared.current(), &call.name, raw).ok()?;
        let before = match std::fs::metadata(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => return None,
            // Never a FIFO (it would block) or a big file.
            Ok(meta) if !meta.is_file() || meta.len() > Self::MAX_BYTES => return None,
            Ok(_) => {
                let bytes = std::fs::read(&path).ok()?;
                Some(
                    crate::text::Encoding::of(&bytes)
                        .decode(&bytes)
                        .into_owned(),
                )
            }
        };
        let after = match call.name.as_str() {
            "Write" => call.input.get("content")?.as_str()?.to_owned(),
            "Edit" => crate::edit::preview(before.as_deref(), &call.input)?,
            _ => return None,
        };
        Some(Self {
            path,
            before,
            after,
        })
    }
}

/// Asks the user about calls that need approval (interactive sessions). Without one, the
/// session is headless and such calls are denied with a message.
pub trait Prompter: Send + Sync + 'static {
    /// Asks about one call.
    ///
    /// # Cancellation safety
    ///
    /// The future is dropped when the call is cancelled; it must not leave a prompt half
    /// answered in shared state.
    fn ask<'a>(&'a self, request: PermissionRequest<'a>) -> PermissionFuture<'a>;
}

/// Who gave a call another input ([`PermissionGate::decide_replaced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replacer {
    /// A [`PreAsk`] (PermissionRequest hooks), before anyone was asked.
    PreAsk,
    /// The one asked (the user, a program answering in their place).
    Asked,
}

/// How [`PermissionGate::rule_covers`] reads a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSense {
    /// As a deny rule: it covers a call when any part matches (more calls).
    Refusal,
    /// As an allow rule: it covers a call when every part matches (fewer calls).
    Allowance,
}

/// The future a [`PreAsk`] returns: a decision, or `None` to let the question go on.
pub type PreAskFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Option<PermissionDecision>> + Send + 'a>>;

/// Answers a question before anyone is asked (Claude Code's PermissionRequest hooks): in an
/// interactive session before the [`Prompter`], in a headless one before the refusal.
pub trait PreAsk: Send + Sync + 'static {
    /// Decides `request` (a call of `tool`), or returns `None` to let the user (or,
    /// headless, the refusal) decide. `interactive` tells which of the two comes next.
    ///
    /// # Cancellation safety
    ///
    /// As [`Prompter::ask`].
    fn answer<'a>(
        &'a self,
        request: &'a PermissionRequest<'a>,
        tool: &'a dyn Tool,
        interactive: bool,
    ) -> PreAskFuture<'a>;
}

/// The permission gate of a [`crate::ToolSet`]: implements [`CanUseTool`] with the session's
/// mode and rules.
#[derive(Clone)]
pub struct PermissionGate {
    pub(crate) shared: Arc<Shared>,
    prompter: Option<Arc<dyn Prompter>>,
    pre_ask: Option<Arc<dyn PreAsk>>,
}

impl fmt::Debug for PermissionGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermissionGate")
            .field("mode", &self.shared.mode.get())
            .field("interactive", &self.prompter.is_some())
            .finish_non_exhaustive()
    }
}

/// The tool input field holding the path a file tool works on.
fn path_field(tool: &str) -> &'static str {
    match tool {
        "Read" | "Write" | "Edit" => "file_path",
        "NotebookEdit" => "notebook_path",
        _ => "path",
    }
}

impl PermissionGate {
    pub(crate) fn new(
        shared: Arc<Shared>,
        prompter: Option<Arc<dyn Prompter>>,
        pre_ask: Option<Arc<dyn PreAsk>>,
    ) -> Self {
        Self {
            shared,
            prompter,
            pre_ask,
        }
    }

    /// Moves the agent's work into `workspace` (a worktree of the session's repository):
    /// from the next call on, paths resolve and are confined there, its shell starts there,
    /// its sandbox's roots are its folders, and Write, Edit and the sandbox protect
    /// `protected` (absolute folders, in place of the set's own) besides the protected names
    /// under its roots. The rules stay relative to the set's own folder.
    pub fn enter(&self, workspace: executor::Workspace, protected: Vec<std::path::PathBuf>) {
        let protected = protected
            .into_iter()
            .filter(|dir| dir.is_absolute())
            .collect();
        self.shared.enter(Some((Arc::new(workspace), protected)));
    }

    /// Back from [`PermissionGate::enter`] to the set's own workspace; its shell starts in
    /// its folder.
    pub fn leave(&self) {
        self.shared.enter(None);
    }

    /// The workspace the agent moved into with [`PermissionGate::enter`], if it did.
    pub fn entered(&self) -> Option<Arc<executor::Workspace>> {
        let current = self.shared.current();
        (!Arc::ptr_eq(&current, &self.shared.workspace)).then_some(current)
    }

    /// Where the next Bash command of this tool set starts: where the last one left its
    /// shell, while that is a folder inside the workspace, else the workspace's folder.
    pub fn shell_cwd(&self) -> std::path::PathBuf {
        self.shared.cwd(&self.shared.current())
    }

    /// The session's approval mode now.
    pub fn mode(&self) -> PermissionMode {
        self.shared.mode.get()
    }

    /// Switches the session's mode (the user's choice: Shift+Tab, or approving a plan); the
    /// next decision uses it, Bash's sandbox included.
    pub fn set_mode(&self, mode: PermissionMode) {
        self.shared.mode.set(mode);
    }

    /// `program` with `args`, started in `cwd` inside the session's sandbox with the
    /// workspace-write profile a model command approved there would get (the roots writable
    /// but their protected paths, the deny rules' paths hidden or read-only, the network only
    /// when the user's settings allow it). For commands the agent runs for the user in a
    /// folder it does not trust (the user's own hooks and status line), which the folder can
    /// steer (its `.git/config`, its scripts). `readable` are made readable too (the user's
    /// hook scripts). The [`sandbox::Prepared::guard`] must live until the process exits.
    ///
    /// # Errors
    ///
    /// A message when the session has no sandbox, or when the policy or the command cannot be
    /// built (a deny rule too wide to enforce, a path that is not absolute).
    pub fn confined_command(
        &self,
        program: &std::ffi::OsStr,
        args: &[std::ffi::OsString],
        cwd: &std::path::Path,
        readable: &[std::path::PathBuf],
    ) -> Result<sandbox::Prepared, String> {
        let Some(backend) = self
            .shared
            .sandbox
            .backend
            .clone()
            .filter(|_| self.shared.sandbox.is_active())
        else {
            return Err("there is no sandbox to run it in".into());
        };
        let mut policy = crate::sandboxing::policy(
            &self.shared,
            &self.shared.current(),
            sandbox::Profile::WorkspaceWrite,
        )?;
        // Each as it resolves now, and none inside the workspace (readable there anyway): a
        // path written through a link the folder controls must not mount what the link
        // points at.
        let roots = crate::paths::roots(&self.shared.current());
        policy.readable.extend(
            readable
                .iter()
                .filter_map(|path| std::fs::canonicalize(path).ok())
                .filter(|path| !crate::paths::is_under(path, &roots)),
        );
        sandbox::Sandbox::new(backend)
            .command(&policy, program, args, cwd)
            .map_err(|error| error.to_string())
    }

    /// A command the user typed (`!command` at the interactive prompt), asked no question
    /// (the user typed it), unless a deny rule names it. It runs as the user's own shell
    /// would ([`BashRun::UserShell`]: outside the sandbox, with the agent's environment less
    /// its credentials), or, when [`crate::SandboxConfig::user_commands`] says so, as an
    /// approved Bash call would (the sandbox the mode and rules give such a call,
    /// workspace-write outside plan mode). Returns the
    /// Bash tool to call with the tool_use id `id`.
    ///
    /// # Errors
    ///
    /// The reason, when a deny rule refuses the command or cannot be checked against it.
    pub fn user_command(&self, id: &str, command: &str) -> Result<Arc<dyn Tool>, String> {
        let input = serde_json::json!({ "command": command });
        let mode = self.shared.mode.get();
        let rules = &self.shared.rules;
        let ruled = rules.deny.iter().chain(&rules.ask).any(Rule::is_bash);
        let run = match self.bash_decision(&input, mode) {
            (Verdict::Deny { reason }, _) => return Err(reason),
            // Asked because a rule cannot be checked against it: not run unchecked.
            (Verdict::Ask { reason }, _) if ruled => {
                return Err(format!(
                    "{reason}; a command typed after `!` is not run when a deny or ask rule cannot be checked against it"
                ));
            }
            (_, _) if !self.shared.sandbox.user_commands => BashRun::UserShell,
            // In the sandbox, the user's own command may write the workspace, as an approved
            // call may; read-only while planning.
            (_, BashRun::Sandboxed(Profile::ReadOnly))
                if mode != PermissionMode::Plan && self.shared.sandbox.is_active() =>
            {
                BashRun::Sandboxed(Profile::WorkspaceWrite)
            }
            (_, run) => run,
        };
        self.shared.grants.insert(id.to_owned(), run);
        Ok(Arc::new(crate::bash::BashTool::new(
            Arc::clone(&self.shared),
            None,
            None,
        )))
    }

    /// Checks that `rule` parses as a permission rule (what a settings file may hold), paths
    /// relative to `base`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRule`] naming the rule and what is wrong.
    pub fn check_rule(rule: &str, base: &std::path::Path) -> Result<(), Error> {
        Rule::parse(rule, base).map(|_| ())
    }

    /// The session's Read tool for a file the user names (`@path` at the interactive
    /// prompt): the same read state as the model's Read (what it reads counts as read, so an
    /// Edit may follow), no hooks. Reading a file a deny rule names is refused.
    ///
    /// # Errors
    ///
    /// The reason, when a deny rule refuses reading `path`.
    pub fn user_read(&self, path: &str) -> Result<Arc<dyn Tool>, String> {
        let input = serde_json::json!({ "file_path": path });
        match self.file("Read", &input, self.shared.mode.get()) {
            Verdict::Deny { reason } => Err(reason),
            _ => Ok(Arc::new(crate::read::ReadTool::new(Arc::clone(
                &self.shared,
            )))),
        }
    }

    /// This gate's mode, for another gate to follow.
    pub fn mode_handle(&self) -> ModeHandle {
        ModeHandle(Arc::clone(&self.shared.mode.own))
    }

    /// Decides from now on in the stricter of this gate's mode and `session`'s (a
    /// subagent's gate following its session: a switch to plan mode reaches a subagent that
    /// is running). Once; later calls are ignored.
    pub fn follow_mode(&self, session: ModeHandle) {
        let _ = self.shared.mode.follow.set(session);
    }

    /// The `ExitPlanMode` tool of this session (Claude Code's name and input `{plan}`): in
    /// plan mode it is always asked about, the plan shown; approved, it switches the session
    /// to the mode the prompter wrote into its input's `mode` (`default` or `acceptEdits`;
    /// anything else is `default`). Headless, it is refused with how to rerun.
    pub fn exit_plan_mode_tool(&self) -> Arc<dyn Tool> {
        Arc::new(crate::plan::ExitPlanModeTool::new(Arc::clone(&self.shared)))
    }

    /// The `AskUserQuestion` tool of this session (Claude Code's name and input): always
    /// asked about, the prompter writing the user's answers into its input (see
    /// [`crate::ask`]); refused headless with a result that tells the model to go on.
    ///
    /// `offered`: whether requests list it (someone can answer: a terminal or a front end);
    /// when not, a call of it still gets the answer that sends the model on with its own
    /// judgment (Claude Code offers it in interactive sessions only).
    pub fn ask_user_question_tool(&self, offered: bool) -> Arc<dyn Tool> {
        Arc::new(crate::ask::AskUserQuestionTool::new(!offered))
    }

    /// The `EnterPlanMode` tool of this session: asked about outside plan mode; approved, it
    /// switches the session to plan mode.
    pub fn enter_plan_mode_tool(&self) -> Arc<dyn Tool> {
        Arc::new(crate::plan::EnterPlanModeTool::new(Arc::clone(
            &self.shared,
        )))
    }

    /// Starts the persistent sandbox of read-only commands now, on a thread of its own
    /// ([`crate::SandboxConfig::helper`]), so the first one does not wait for it; nothing
    /// without one. Meant for when the first request goes out: the model's answer takes far
    /// longer than the start, which then does not compete with the session's own start-up.
    pub fn prestart_sandbox(&self) {
        if self.shared.sandbox.helper.is_none() {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let _ = std::thread::Builder::new()
            .name("sandbox-prestart".into())
            .spawn(move || {
                let workspace = shared.effective(&shared.workspace);
                if let Ok(policy) =
                    crate::sandboxing::policy(&shared, &workspace, sandbox::Profile::ReadOnly)
                {
                    let _ = shared.zygote(&policy, &shared.cwd(&workspace));
                }
            });
    }

    /// This tool set's todo list (TodoWrite's), to show it or restore a resumed session's.
    pub fn todo_list(&self) -> crate::todo::TodoList {
        self.shared.todos.clone()
    }

    /// Decides on a call of `tool` with `input` by the rules and the mode (see the module
    /// docs), without asking anyone.
    pub fn evaluate(&self, tool: &dyn Tool, input: &Value) -> Verdict {
        self.evaluate_in(tool, input, self.shared.mode.get())
    }

    /// [`PermissionGate::evaluate`] as if the session's mode were `mode`.
    fn evaluate_in(&self, tool: &dyn Tool, input: &Value, mode: PermissionMode) -> Verdict {
        match tool.name() {
            "Bash" => self.bash(input, mode),
            crate::plan::EXIT_PLAN_MODE => self.exit_plan(mode),
            crate::ask::ASK_USER_QUESTION => {
                self.always_asked(crate::ask::ASK_USER_QUESTION, "the model has questions for you")
            }
            crate::plan::ENTER_PLAN_MODE if mode == PermissionMode::Plan => Verdict::Allow,
            crate::plan::ENTER_PLAN_MODE => self.always_asked(
                crate::plan::ENTER_PLAN_MODE,
                "the model asks to plan first: in plan mode it only reads, and changes nothing until you approve its plan",
            ),
            name @ ("Read" | "Glob" | "Grep" | "Write" | "Edit" | "NotebookEdit") => {
                self.file(name, input, mode)
            }
            WEB_FETCH => self.web_fetch(input, mode),
            WEB_SEARCH => self.web(WEB_SEARCH, None, mode),
            name => self.other(name, tool.aliases(), tool.is_read_only(input), mode),
        }
    }

    /// Whether `rule` (permission rule syntax, `Bash(git *)`, `Edit(src/**)`) covers the
    /// call of `tool` with `input` in this gate's workspace, read in `sense`: as a deny rule
    /// reads it (any part of a command, every wrapper stripped; also every call the
    /// workspace refuses) or as an allow rule does (every part of a command; also what is
    /// allowed without a rule, a read-only call). For Claude Code's hooks' `if`: a hook
    /// runs when its rule covers the call as a refusal, and its approval counts only where
    /// the rule covers the call as an allowance.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRule`] when `rule` does not parse.
    pub fn rule_covers(
        &self,
        rule: &str,
        tool: &dyn Tool,
        input: &Value,
        sense: RuleSense,
    ) -> Result<bool, Error> {
        let mut permissions = PermissionConfig {
            default_mode: PermissionMode::Default,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
        };
        match sense {
            RuleSense::Refusal => permissions.deny.push(rule.to_owned()),
            RuleSense::Allowance => permissions.allow.push(rule.to_owned()),
        }
        // No sandbox: a command is allowed by the rule or not at all.
        let set = crate::builtin(Arc::clone(&self.shared.workspace), permissions)?;
        let verdict = set.gate().evaluate_in(tool, input, PermissionMode::Default);
        Ok(match sense {
            RuleSense::Refusal => matches!(verdict, Verdict::Deny { .. }),
            RuleSense::Allowance => matches!(verdict, Verdict::Allow),
        })
    }

    pub(crate) fn rule_list(&self, verdict: RuleKind) -> &[Rule] {
        let rules = &self.shared.rules;
        match verdict {
            RuleKind::Ask => &rules.ask,
            RuleKind::Deny => &rules.deny,
        }
    }

    /// Whether a deny rule refuses every tool of the MCP server whose tools start with
    /// `prefix` (`mcp__kit`, as `mcp::server_prefix` gives it): then its resources are not
    /// read either (ListMcpResourcesTool, ReadMcpResourceTool, `@kit:uri`).
    pub fn denies_whole_server(&self, prefix: &str) -> bool {
        // A name no tool has, under the prefix: only a rule naming the server (`mcp__kit`),
        // its every tool (`mcp__kit__*`) or every server (`mcp__*`) matches it.
        !self.offers(&format!("{prefix}__*"), &[])
    }

    /// Whether the model is offered the tool `name` (Claude Code's other names for it in
    /// `aliases`): no deny rule covers every call of it (`Write`, `Bash(*)`, `mcp__server`
    /// for all of a server's tools), as Claude Code leaves such tools out of a request. A
    /// rule with a pattern (`Bash(rm:*)`) only refuses matching calls, so the tool is offered.
    pub fn offers(&self, name: &str, aliases: &[&str]) -> bool {
        !std::iter::once(name)
            .chain(aliases.iter().copied())
            .any(|name| {
                self.shared
                    .rules
                    .deny
                    .iter()
                    .any(|rule| rule.matches_tool(name))
            })
    }

    /// Extra allow rules while one turn runs (a custom command's `allowed-tools`), in the
    /// syntax of settings' `permissions.allow`; they apply until the returned guard drops.
    /// Deny and ask rules still win over them, and the mode still applies (plan mode stays
    /// plan mode).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRule`] for the first rule that does not parse (nothing is granted).
    pub fn grant_for_turn(&self, rules: &[String]) -> Result<TurnGrant, Error> {
        let base = paths::real_path(&self.shared.workspace.cwd)?;
        let parsed = rules
            .iter()
            .map(|rule| Rule::parse(rule, &base))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.shared.grant(parsed))
    }

    /// A tool whose every call is a question to the user: a deny rule refuses it, and no
    /// rule or mode skips the question.
    fn always_asked(&self, name: &str, reason: &str) -> Verdict {
        if let Some(rule) = self
            .rule_list(RuleKind::Deny)
            .iter()
            .find(|rule| rule.matches_tool(name))
        {
            return denied_by(name, rule);
        }
        Verdict::Ask {
            reason: reason.to_owned(),
        }
    }

    /// `ExitPlanMode`: a deny rule refuses it; in plan mode the user is always asked (no
    /// allow rule or mode skips the question: approving it changes the mode); outside plan
    /// mode it runs (and changes nothing).
    fn exit_plan(&self, mode: PermissionMode) -> Verdict {
        let name = crate::plan::EXIT_PLAN_MODE;
        if let Some(rule) = self
            .rule_list(RuleKind::Deny)
            .iter()
            .find(|rule| rule.matches_tool(name))
        {
            return denied_by(name, rule);
        }
        match mode {
            PermissionMode::Plan => Verdict::Ask {
                reason: "the plan needs your approval to leave plan mode".to_owned(),
            },
            _ => Verdict::Allow,
        }
    }

    /// A tool that is not a file tool or Bash; rules naming one of its `aliases` (Claude
    /// Code's other names for it) count as naming it.
    fn other(
        &self,
        name: &str,
        aliases: &[&str],
        read_only: bool,
        mode: PermissionMode,
    ) -> Verdict {
        let names = || std::iter::once(name).chain(aliases.iter().copied());
        let covers = |rule: &Rule| names().any(|name| rule.matches_tool(name));
        let find = |kind| self.rule_list(kind).iter().find(|rule| covers(rule));
        if let Some(rule) = find(RuleKind::Deny) {
            return denied_by(name, rule);
        }
        if let Some(rule) = find(RuleKind::Ask) {
            return asked_by(name, rule);
        }
        match mode {
            PermissionMode::Plan if !read_only => plan_denial(name),
            PermissionMode::BypassPermissions => Verdict::Allow,
            _ if read_only || self.shared.allows(covers) => Verdict::Allow,
            _ => Verdict::Ask {
                reason: format!("{name} needs approval"),
            },
        }
    }

    /// WebFetch: its URL must read ([`crate::web::FetchUrl`]); then as [`Self::web`] for
    /// its host.
    fn web_fetch(&self, input: &Value, mode: PermissionMode) -> Verdict {
        let url = input.get("url").and_then(Value::as_str).unwrap_or_default();
        match crate::web::FetchUrl::parse(url) {
            Ok(url) => self.web(WEB_FETCH, Some(&url.host), mode),
            Err(reason) => Verdict::Deny { reason },
        }
    }

    /// WebFetch of `host` or WebSearch: refused by a deny rule (of the tool, or for WebFetch
    /// of the host), asked by an ask rule, else allowed by an allow rule or
    /// bypassPermissions and asked otherwise, whatever the mode: neither changes a file, and
    /// both send what the model writes (a URL, a query) off the machine, so no mode short of
    /// bypassing permissions lets them go unasked.
    fn web(&self, name: &str, host: Option<&str>, mode: PermissionMode) -> Verdict {
        let covers = |rule: &Rule| {
            rule.matches_tool(name) || host.is_some_and(|host| rule.matches_host(host))
        };
        let find = |kind| self.rule_list(kind).iter().find(|rule| covers(rule));
        let subject = match host {
            Some(host) => format!("{name} of {host}"),
            None => name.to_owned(),
        };
        if let Some(rule) = find(RuleKind::Deny) {
            return denied_by(&subject, rule);
        }
        if let Some(rule) = find(RuleKind::Ask) {
            return asked_by(&subject, rule);
        }
        if mode == PermissionMode::BypassPermissions || self.shared.allows(covers) {
            return Verdict::Allow;
        }
        Verdict::Ask {
            reason: match host {
                Some(host) => format!("{subject} needs approval: it sends a request to {host}"),
                None => format!("{subject} needs approval: it sends the query to a search service"),
            },
        }
    }

    /// Whether an allow rule of the settings or the flags names exactly `host`
    /// (`WebFetch(domain:localhost)`): then WebFetch may reach it even at a private or
    /// loopback address. Nothing else counts: not a rule for the whole tool or for
    /// subdomains (`*.dev.example`), and not what an "always" answer granted this session
    /// (approving a public host must not open the private network to it when its name later
    /// resolves there).
    pub fn allows_host(&self, host: &str) -> bool {
        self.shared
            .rules
            .allow
            .iter()
            .any(|rule| rule.names_host(host))
    }

    fn file(&self, name: &str, input: &Value, mode: PermissionMode) -> Verdict {
        let workspace = &self.shared.current();
        let raw = input.get(path_field(name)).and_then(Value::as_str);
        let path = match raw {
            _ if matches!(name, "Glob" | "Grep") => self.shared.search_root(workspace, name, raw),
            Some(raw) => self.shared.confine(workspace, name, raw),
            // A missing path fails the schema check before the gate is asked.
            None => return Verdict::Allow,
        };
        let path = match path {
            Ok(path) => path,
            Err(error) => {
                return Verdict::Deny {
                    reason: error.to_string(),
                };
            }
        };
        // Rules see the path as written too: a denied `.env` that is a link to
        // `config/real.env` stays denied.
        let written = raw.map(|raw| paths::lexical(raw, &self.shared.cwd(workspace)));
        let covers = |rule: &Rule| {
            rule.matches_tool(name)
                || rule.matches_path(name, &path)
                || written
                    .as_ref()
                    .is_some_and(|written| rule.matches_path(name, written))
        };
        let find = |kind| self.rule_list(kind).iter().find(|rule| covers(rule));
        let subject = format!("{name} on {}", path.display());
        if let Some(rule) = find(RuleKind::Deny) {
            return denied_by(&subject, rule);
        }
        if let Some(rule) = find(RuleKind::Ask) {
            return asked_by(&subject, rule);
        }
        let read_only = matches!(name, "Read" | "Glob" | "Grep");
        match mode {
            PermissionMode::Plan if !read_only => plan_denial(name),
            PermissionMode::BypassPermissions => Verdict::Allow,
            _ if read_only || self.shared.allows(covers) => Verdict::Allow,
            PermissionMode::AcceptEdits => Verdict::Allow,
            _ => Verdict::Ask {
                reason: format!("{subject} changes a file and needs approval"),
            },
        }
    }

    fn bash(&self, input: &Value, mode: PermissionMode) -> Verdict {
        self.bash_decision(input, mode).0
    }

    /// The verdict on a Bash call and how it runs when allowed (or, for `Ask`, when the user
    /// approves), by the session's mode. See the module docs for the order of decision.
    pub fn evaluate_bash(&self, input: &Value) -> (Verdict, BashRun) {
        self.bash_decision(input, self.shared.mode.get())
    }

    /// [`PermissionGate::evaluate_bash`] as if the session's mode were `mode`.
    pub(crate) fn bash_decision(&self, input: &Value, mode: PermissionMode) -> (Verdict, BashRun) {
        let Some(command) = input.get("command").and_then(Value::as_str) else {
            // The schema check answers first.
            return (Verdict::Allow, BashRun::Sandboxed(Profile::ReadOnly));
        };
        self.bash_rules(command, input, mode)
    }

    /// [`PermissionGate::bash_decision`] for a `command`: the rules, the mode and the
    /// sandbox.
    fn bash_rules(&self, command: &str, input: &Value, mode: PermissionMode) -> (Verdict, BashRun) {
        let sandboxed = self.shared.sandbox.is_active();
        let writable = if sandboxed {
            BashRun::Sandboxed(Profile::WorkspaceWrite)
        } else {
            BashRun::Unsandboxed
        };
        let unsandboxed_asked = sandboxed
            && input
                .get(DISABLE_SANDBOX_FIELD)
                .and_then(Value::as_bool)
                .unwrap_or(false);
        // What an approved question leads to: out of the sandbox when that was the question;
        // read-only while planning; otherwise what an allow rule would give.
        let approved = if unsandboxed_asked {
            BashRun::Unsandboxed
        } else if mode == PermissionMode::Plan && sandboxed {
            BashRun::Sandboxed(Profile::ReadOnly)
        } else {
            writable
        };
        let ask = |reason: String| (Verdict::Ask { reason }, approved);
        let deny = |verdict: Verdict| (verdict, approved);
        let analysis = match shell::analyze(command) {
            Ok(analysis) => Some(analysis),
            Err(error) => {
                let whole = [command.trim().to_owned()];
                if let Some(rule) = self
                    .rule_list(RuleKind::Deny)
                    .iter()
                    .find(|rule| rule.matches_command(&whole, true))
                {
                    return deny(denied_by("the command", rule));
                }
                let rules = &self.shared.rules;
                if let Some(rule) = rules.deny.iter().chain(&rules.ask).find(|r| r.is_bash()) {
                    return ask(format!(
                        "the command could not be checked part by part ({error}), so the rule `{}` cannot be checked",
                        rule.source
                    ));
                }
                None
            }
        };
        if let Some(analysis) = &analysis {
            // Where earlier `cd`s of the line moved the shell (`None`: somewhere computed).
            let mut cd: Option<PathBuf> = Some(PathBuf::new());
            for part in &analysis.parts {
                let mut forms = match_forms(part, true);
                match cd_form(part, cd.as_deref()) {
                    CdForm::Moved(dir) => cd = dir,
                    CdForm::Command(Some(form)) => forms.push(form),
                    CdForm::Command(None) => {}
                    CdForm::Unknown => {
                        if let Some(rule) =
                            self.rule_list(RuleKind::Deny).iter().find(|r| r.is_bash())
                        {
                            return ask(format!(
                                "`{}` runs a program by a relative path after a `cd` to a computed folder, so the rule `{}` cannot be checked",
                                part.raw, rule.source
                            ));
                        }
                    }
                }
                if let Some(rule) = self
                    .rule_list(RuleKind::Deny)
                    .iter()
                    .find(|rule| rule.matches_command(&forms, true))
                {
                    return deny(denied_by(&format!("the command `{}`", part.raw), rule));
                }
            }
            let rules = &self.shared.rules;
            if let Some(rule) = rules.deny.iter().chain(&rules.ask).find(|r| r.is_bash()) {
                if let Some(part) = analysis.parts.iter().find(|part| name_is_dynamic(part)) {
                    return ask(format!(
                        "the command name of `{}` is computed at run time, so the rule `{}` cannot be checked",
                        part.raw, rule.source
                    ));
                }
                if let Some(part) = analysis
                    .parts
                    .iter()
                    .find(|p| shell::runs_unseen_code(p) || shell::evaluates_code(p))
                {
                    return ask(format!(
                        "`{}` runs code the rule `{}` cannot be checked against",
                        part.raw, rule.source
                    ));
                }
            }
            for part in &analysis.parts {
                let forms = match_forms(part, true);
                if let Some(rule) = self
                    .rule_list(RuleKind::Ask)
                    .iter()
                    .find(|rule| rule.matches_command(&forms, true))
                {
                    return ask(asked_by_reason(
                        &format!("the command `{}`", part.raw),
                        rule,
                    ));
                }
            }
        }
        if unsandboxed_asked {
            return ask(
                "the command asks to run outside the sandbox (dangerouslyDisableSandbox), which always needs the user's approval".to_owned(),
            );
        }
        let allowed_by_rules = analysis.as_ref().is_some_and(|analysis| {
            analysis
                .parts
                .iter()
                .all(|part| self.part_unallowed(part).is_none())
        });
        match mode {
            PermissionMode::Plan if sandboxed => {
                (Verdict::Allow, BashRun::Sandboxed(Profile::ReadOnly))
            }
            PermissionMode::Plan => ask(
                "plan mode runs commands read-only, and no sandbox is available to enforce that"
                    .to_owned(),
            ),
            PermissionMode::BypassPermissions => (Verdict::Allow, writable),
            // acceptEdits lets commands write the workspace only where the kernel keeps them
            // there; without a sandbox it is the default mode for Bash.
            PermissionMode::AcceptEdits if sandboxed => (Verdict::Allow, writable),
            PermissionMode::Default | PermissionMode::AcceptEdits if allowed_by_rules => {
                (Verdict::Allow, writable)
            }
            PermissionMode::Default if sandboxed => {
                (Verdict::Allow, BashRun::Sandboxed(Profile::ReadOnly))
            }
            PermissionMode::Default | PermissionMode::AcceptEdits => {
                let unallowed: Vec<String> = analysis
                    .iter()
                    .flat_map(|analysis| &analysis.parts)
                    .filter_map(|part| self.part_unallowed(part))
                    .collect();
                let what = if unallowed.is_empty() {
                    "the command could not be checked part by part".to_owned()
                } else {
                    format!("no allow rule covers {}", unallowed.join(", "))
                };
                let why = if self.shared.sandbox.backend.is_none() {
                    "the sandbox is off, so it cannot run read-only"
                } else {
                    "no sandbox is available to run it read-only"
                };
                ask(format!("{what}, and {why}"))
            }
        }
    }

    /// Why no allow rule covers `part`, or `None` when one does.
    pub(crate) fn part_unallowed(&self, part: &Part) -> Option<String> {
        if part.carrier {
            return None;
        }
        let quoted = format!("`{}`", part.raw);
        // An exact rule naming the whole text, redirections included, always counts (and so
        // does a bare `Bash` rule).
        let raw = [part.raw.clone()];
        if self.shared.allows(|rule| rule.matches_command(&raw, false)) {
            return None;
        }
        if part.words.is_empty() {
            return Some(format!("{quoted} (it writes a file)"));
        }
        if part.assignments {
            return Some(format!(
                "{quoted} (variables assigned before a command change what it does)"
            ));
        }
        if shell::evaluates_code(part) {
            return Some(format!(
                "{quoted} (it evaluates text as code at run time: `${{x@P}}`, `$((x))`, `${{!x}}`, `[[ ]]`)"
            ));
        }
        if name_is_dynamic(part) {
            return Some(format!(
                "{quoted} (its command name is computed at run time)"
            ));
        }
        // Rules on the words cover a part that writes files only where such writes are
        // acceptable anyway.
        let writes_ok = self.redirect_writes_acceptable(part);
        let forms = match_forms(part, false);
        if writes_ok
            && self
                .shared
                .allows(|rule| rule.matches_command(&forms, true))
        {
            return None;
        }
        if writes_ok {
            Some(quoted)
        } else {
            Some(format!("{quoted} (it writes a file through a redirection)"))
        }
    }

    /// Whether the files `part` writes through redirections are acceptable without an exact
    /// rule: none, or acceptEdits mode with every target static and inside the workspace.
    fn redirect_writes_acceptable(&self, part: &Part) -> bool {
        let mut writes = part.redirects.iter().filter(|r| r.writes_file()).peekable();
        if writes.peek().is_none() {
            return true;
        }
        self.shared.mode.get() == PermissionMode::AcceptEdits
            && writes.all(|redirect| {
                !redirect.target.dynamic
                    && self
                        .shared
                        .confine(&self.shared.current(), "Write", &redirect.target.text)
                        .is_ok()
            })
    }
}

#[derive(Clone, Copy)]
pub(crate) enum RuleKind {
    Ask,
    Deny,
}

fn denied_by(subject: &str, rule: &Rule) -> Verdict {
    Verdict::Deny {
        reason: format!(
            "Permission to run {subject} has been denied by the rule `{}`",
            rule.source
        ),
    }
}

fn asked_by(subject: &str, rule: &Rule) -> Verdict {
    Verdict::Ask {
        reason: asked_by_reason(subject, rule),
    }
}

fn asked_by_reason(subject: &str, rule: &Rule) -> String {
    format!("the rule `{}` requires approval for {subject}", rule.source)
}

/// Whether the command name of `part` is only known at run time (`$x`, `$(echo rm)`,
/// `{rm,x}`, `$'\x72m'`), also behind wrappers such as `sudo` or `env`.
pub(crate) fn name_is_dynamic(part: &Part) -> bool {
    if part.carrier {
        return false;
    }
    let Some(first) = part.words.first() else {
        return false;
    };
    let computed = |word: &shell::Word| {
        word.dynamic
            || (word.glob && !matches!(word.text.as_str(), "[" | "[["))
            || word.text.contains(['{', '\\', '$'])
    };
    computed(first)
        || shell::strip_wrappers(&part.words, true)
            .first()
            .is_none_or(computed)
}

/// What a part means for the `cd`s of its line.
enum CdForm {
    /// A `cd`: the shell is now in this folder (relative to where the line started), or
    /// somewhere computed.
    Moved(Option<PathBuf>),
    /// A command; with the form its relative program path takes from where the line
    /// started (`cd bin && ./deploy x` -> `bin/deploy x`).
    Command(Option<String>),
    /// A command run by a relative path after a `cd` to a computed folder.
    Unknown,
}

fn cd_form(part: &Part, cd: Option<&Path>) -> CdForm {
    let Some(first) = part.words.first() else {
        return CdForm::Command(None);
    };
    if first.text == "cd" && !first.dynamic {
        let target = part.words.get(1).filter(|word| !word.text.starts_with('-'));
        let moved = match (cd, target) {
            (Some(dir), Some(word)) if !word.dynamic && !word.text.starts_with('~') => {
                Some(lexical_join(dir, &word.text))
            }
            _ => None,
        };
        return CdForm::Moved(moved);
    }
    let name = &first.text;
    let relative_program = name.contains('/') && !name.starts_with('/');
    match cd {
        _ if !relative_program => CdForm::Command(None),
        Some(dir) if dir.as_os_str().is_empty() => CdForm::Command(None),
        Some(dir) => {
            let mut form = lexical_join(dir, name).to_string_lossy().into_owned();
            for word in &part.words[1..] {
                form.push(' ');
                form.push_str(&word.text);
            }
            CdForm::Command(Some(form))
        }
        None => CdForm::Unknown,
    }
}

/// `base` joined with `path`, `.` and `..` applied without touching the file system (an
/// absolute `path` replaces `base`).
fn lexical_join(base: &Path, path: &str) -> PathBuf {
    let mut joined = if path.starts_with('/') {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if !joined.pop() {
                    joined.push("..");
                }
            }
            other => joined.push(other),
        }
    }
    joined
}

/// The input field with which a Bash call asks to run outside the sandbox, as Claude Code
/// names it. Such a call is always asked (refused headless).
pub const DISABLE_SANDBOX_FIELD: &str = "dangerouslyDisableSandbox";

/// How an allowed Bash call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BashRun {
    /// In the sandbox, with this profile.
    Sandboxed(Profile),
    /// Outside any sandbox (sandbox off or unavailable, or approved
    /// `dangerouslyDisableSandbox`), with the passed variables of the agent's environment
    /// only (`sandbox::env::reset`).
    Unsandboxed,
    /// A command the user typed ([`PermissionGate::user_command`]): outside any sandbox, with
    /// the agent's whole environment less its credentials (`sandbox::env::AGENT_CREDENTIALS`)
    /// and with the settings' `env`, as in the user's own shell.
    UserShell,
}

fn plan_denial(name: &str) -> Verdict {
    Verdict::Deny {
        reason: format!(
            "{name} is not available in plan mode: only read-only tools run while planning. Present the plan instead of carrying it out"
        ),
    }
}

/// The textual forms of a part that rules are matched against: the source text, the words
/// (quotes removed), the words without transparent wrappers (`timeout 5 npm test` ->
/// `npm test`). With `for_refusal`, also without every wrapper (`sudo`, `env`, `xargs`, ...)
/// and with the command's directory dropped (`/bin/rm` -> `rm`): more forms only ever make
/// deny and ask rules match more.
pub(crate) fn match_forms(part: &Part, for_refusal: bool) -> Vec<String> {
    let mut forms = vec![part.raw.clone(), Part::joined(&part.words)];
    let transparent = shell::strip_wrappers(&part.words, false);
    forms.push(Part::joined(transparent));
    if for_refusal {
        let all = shell::strip_wrappers(&part.words, true);
        forms.push(Part::joined(all));
        let mut candidates: Vec<&[shell::Word]> = vec![&part.words[..], transparent, all];
        // Behind a wrapper, whatever its options: every later word may be the command
        // (`nice --adjustment 5 rm x`, `timeout --signal KILL 5 rm x`). More forms only
        // make refusals match more.
        if part
            .words
            .first()
            .is_some_and(|first| shell::is_wrapper(shell::basename(&first.text)))
        {
            candidates.extend((1..part.words.len()).map(|start| &part.words[start..]));
        }
        for words in candidates {
            if let Some((first, rest)) = words.split_first() {
                let name = shell::basename(&first.text);
                let mut form = name.to_owned();
                for word in rest {
                    form.push(' ');
                    form.push_str(&word.text);
                }
                forms.push(Part::joined(words));
                forms.push(form);
            }
        }
    }
    forms.sort();
    forms.dedup();
    forms
}

/// What a PreToolUse hook said about a call, for [`PermissionGate::check_with_hook`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HookDecision {
    /// Run it without asking (`permissionDecision: "allow"`).
    Allow,
    /// Ask the user even if the rules allow it (`permissionDecision: "ask"`).
    Ask,
}

impl PermissionGate {
    /// Decides on a call a PreToolUse hook has answered, as Claude Code does: `Allow` counts
    /// like bypassPermissions for this one call, so deny and ask rules, plan mode and the
    /// workspace still apply (and a command that cannot be checked against the rules is
    /// asked); `Ask` asks even when the rules would allow the call (headless: refused).
    pub fn check_with_hook<'a>(
        &'a self,
        call: &'a ToolCall,
        tool: &'a dyn Tool,
        hook: HookDecision,
    ) -> PermissionFuture<'a> {
        Box::pin(async move {
            match hook {
                HookDecision::Allow => {
                    let mode = match self.shared.mode.get() {
                        PermissionMode::Plan => PermissionMode::Plan,
                        _ => PermissionMode::BypassPermissions,
                    };
                    self.decide_call(call, tool, mode, None).await
                }
                HookDecision::Ask => {
                    let reason = "a PreToolUse hook asks for approval".to_owned();
                    self.decide_call(call, tool, self.shared.mode.get(), Some(reason))
                        .await
                }
            }
        })
    }

    /// Evaluates `call` as if the session's mode were `mode` (asking even an allowed call
    /// when `force_ask` gives a reason), asks when needed, and records how an allowed Bash
    /// call runs for the tool to find.
    async fn decide(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        mode: PermissionMode,
        force_ask: Option<String>,
    ) -> PermissionDecision {
        let (verdict, run) = if tool.name() == "Bash" {
            let (verdict, run) = self.bash_decision(&call.input, mode);
            (verdict, Some(run))
        } else {
            (self.evaluate_in(tool, &call.input, mode), None)
        };
        let verdict = match (verdict, force_ask) {
            (Verdict::Deny { reason }, _) => Verdict::Deny { reason },
            (_, Some(reason)) => Verdict::Ask { reason },
            (verdict, None) => verdict,
        };
        let decision = match verdict {
            Verdict::Allow => PermissionDecision::allow(),
            Verdict::Deny { reason } => {
                tracing::debug!(tool = %call.name, %reason, "permission denied");
                PermissionDecision::deny(reason)
            }
            Verdict::Ask { reason } => {
                // A call that cannot do its job fails now, unasked.
                let context =
                    executor::ToolContext::detached(call.id.clone(), self.shared.current());
                match tool.validate(&call.input, &context).await {
                    Ok(()) => match self.pre_ask(call, tool, &reason).await {
                        // A PreAsk gave another input: that input is what is decided on.
                        Some(PermissionDecision::Allow {
                            updated_input: Some(input),
                        }) => {
                            return self.decide_replaced(
                                call,
                                tool,
                                (mode, Replacer::PreAsk),
                                input,
                            );
                        }
                        Some(decision) => decision,
                        None => match self.ask(call, reason).await {
                            // The one asked approved another input (a program asked in the
                            // user's place may rewrite it): that input is what runs.
                            PermissionDecision::Allow {
                                updated_input: Some(input),
                            } => {
                                return self.decide_replaced(
                                    call,
                                    tool,
                                    (mode, Replacer::Asked),
                                    input,
                                );
                            }
                            decision => decision,
                        },
                    },
                    Err(error) => PermissionDecision::Fail { error },
                }
            }
        };
        if let (PermissionDecision::Allow { .. }, Some(run)) = (&decision, run) {
            self.shared.grants.insert(call.id.as_str().to_owned(), run);
        }
        decision
    }

    /// The decision on `call` with another input, allowed by `by`: the input must fit the
    /// tool's schema and no deny rule may match it in `mode`; an allowed Bash command runs as
    /// the rules decide for the new command. An ask the new input would meet refuses it when
    /// a [`PreAsk`] gave it (as Claude Code refuses a PermissionRequest hook's `updatedInput`
    /// that a deny or ask rule matches); the one asked has just answered it.
    fn decide_replaced(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        (mode, by): (PermissionMode, Replacer),
        input: Value,
    ) -> PermissionDecision {
        let who = match by {
            Replacer::PreAsk => "a permission hook gave",
            Replacer::Asked => "approved in its place",
        };
        let problems = executor::schema::validate(tool.input_schema(), &input);
        if !problems.is_empty() {
            return PermissionDecision::deny(format!(
                "the input {who} is not a valid input of {}: {}",
                tool.name(),
                problems.join("; ")
            ));
        }
        let (verdict, run) = if tool.name() == "Bash" {
            let (verdict, run) = self.bash_decision(&input, mode);
            (verdict, Some(run))
        } else {
            (self.evaluate_in(tool, &input, mode), None)
        };
        match (verdict, by) {
            (Verdict::Deny { reason }, _) => return PermissionDecision::deny(reason),
            (Verdict::Ask { reason }, Replacer::PreAsk) => {
                return PermissionDecision::deny(format!(
                    "the input {who} needs approval itself ({reason}), so it was not run"
                ));
            }
            (Verdict::Allow | Verdict::Ask { .. }, _) => {}
        }
        if let Some(run) = run {
            self.shared.grants.insert(call.id.as_str().to_owned(), run);
        }
        PermissionDecision::Allow {
            updated_input: Some(input),
        }
    }

    /// The [`PreAsk`]'s decision on `call`, if there is one and it decides.
    async fn pre_ask(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        reason: &str,
    ) -> Option<PermissionDecision> {
        let pre_ask = self.pre_ask.as_ref()?;
        let request = PermissionRequest {
            tool: &call.name,
            tool_use_id: call.id.as_str(),
            input: &call.input,
            reason,
            change: None,
            always: None,
        };
        pre_ask
            .answer(&request, tool, self.prompter.is_some())
            .await
    }

    /// Asks the prompter, or refuses with a message when there is none (headless).
    async fn ask(&self, call: &ToolCall, reason: String) -> PermissionDecision {
        let change = (self.prompter.is_some() && matches!(call.name.as_str(), "Write" | "Edit"))
            .then(|| ProposedChange::of(&self.shared, call))
            .flatten();
        let request = PermissionRequest {
            tool: &call.name,
            tool_use_id: call.id.as_str(),
            input: &call.input,
            reason: &reason,
            change,
            always: self.always_for(&call.name, &call.input),
        };
        match &self.prompter {
            Some(prompter) => prompter.ask(request).await,
            None => {
                tracing::debug!(tool = %call.name, %reason, "approval needed, headless");
                PermissionDecision::deny(self.headless_denial(&call.name, &reason, &call.input))
            }
        }
    }
}

impl CanUseTool for PermissionGate {
    fn check<'a>(&'a self, call: &'a ToolCall, tool: &'a dyn Tool) -> PermissionFuture<'a> {
        Box::pin(self.decide_call(call, tool, self.shared.mode.get(), None))
    }
}

impl PermissionGate {
    /// [`PermissionGate::decide`], with the model's own `mode` taken out of an ExitPlanMode
    /// call first: the mode plan mode is left for is the approver's choice (the prompter
    /// writes it into the input it approves), never the model's; approved as it was, the
    /// call runs without one (default mode).
    async fn decide_call(
        &self,
        call: &ToolCall,
        tool: &dyn Tool,
        mode: PermissionMode,
        force_ask: Option<String>,
    ) -> PermissionDecision {
        if call.name != crate::plan::EXIT_PLAN_MODE || call.input.get("mode").is_none() {
            return self.decide(call, tool, mode, force_ask).await;
        }
        let mut stripped = call.clone();
        if let Some(object) = stripped.input.as_object_mut() {
            object.remove("mode");
        }
        match self.decide(&stripped, tool, mode, force_ask).await {
            PermissionDecision::Allow {
                updated_input: None,
            } => PermissionDecision::Allow {
                updated_input: Some(stripped.input),
            },
            decision => decision,
        }
    }
}

impl PermissionGate {
    /// The denial a headless session gives for a call that needs approval (the executor
    /// puts "Permission to use TOOL was denied: " in front), with what would let it run: for
    /// Bash, a rule naming the first part no rule allows, or the way out of the sandbox.
    fn headless_denial(&self, tool: &str, reason: &str, input: &Value) -> String {
        let headless =
            "This session cannot ask the user (headless), so calls that need approval are refused";
        if tool == crate::ask::ASK_USER_QUESTION {
            return crate::ask::HEADLESS_ANSWER.to_owned();
        }
        if tool == crate::plan::ENTER_PLAN_MODE {
            return "this session cannot ask the user (headless), so it cannot switch to plan mode; go on with the task, planning as you go".to_owned();
        }
        if tool == crate::plan::EXIT_PLAN_MODE {
            return format!(
                "{reason}, and this session cannot ask the user (headless). Give the plan as your final answer instead; to carry it out, the user can run again with --permission-mode default or acceptEdits"
            );
        }
        // A mode is suggested only when it would change the answer and is not on already.
        let mode_now = self.shared.mode.get();
        if tool == WEB_FETCH {
            let host = input
                .get("url")
                .and_then(Value::as_str)
                .and_then(|url| crate::web::FetchUrl::parse(url).ok())
                .map_or_else(|| "example.com".to_owned(), |url| url.host);
            return format!(
                "{reason}. {headless}; allow it with --allowedTools `WebFetch(domain:{host})` (or the same rule in permissions.allow of your settings)"
            );
        }
        if tool != "Bash" {
            let mode = match mode_now {
                PermissionMode::Default if matches!(tool, "Write" | "Edit" | "NotebookEdit") => {
                    " or run with --permission-mode acceptEdits"
                }
                PermissionMode::Default | PermissionMode::AcceptEdits => {
                    " or run with --permission-mode bypassPermissions"
                }
                _ => "",
            };
            return format!(
                "{reason}. {headless}; allow it with --allowedTools `{tool}` (or the same rule in permissions.allow of your settings),{mode}"
            );
        }
        if input.get(DISABLE_SANDBOX_FIELD).and_then(Value::as_bool) == Some(true)
            && self.shared.sandbox.is_active()
        {
            return format!(
                "{reason}. {headless}. Run the command inside the sandbox instead, or the user can start an interactive session (to approve it) or turn the sandbox off with --sandbox off"
            );
        }
        let command = input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let example = shell::analyze(command)
            .ok()
            .and_then(|analysis| {
                analysis
                    .parts
                    .iter()
                    .find(|part| self.part_unallowed(part).is_some())
                    .and_then(rule_example)
            })
            .unwrap_or_else(|| "Bash(npm run test:*)".to_owned());
        let mode = if mode_now == PermissionMode::BypassPermissions {
            ""
        } else {
            ", or run with --permission-mode bypassPermissions"
        };
        format!(
            "{reason}. {headless}; allow it with --allowedTools `{example}` (or the same rule in permissions.allow of your settings){mode}"
        )
    }
}

/// The web tools' names (Claude Code's).
pub(crate) const WEB_FETCH: &str = "WebFetch";
/// See [`WEB_FETCH`].
pub(crate) const WEB_SEARCH: &str = "WebSearch";

/// Whether `word` is a plain program name or path: letters, digits and `._+/@-`, at least
/// one of them a letter or digit.
pub(crate) fn plain_word(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_alphanumeric())
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '/' | '@' | '-'))
}

/// A prefix rule for `part`: its command and, when the next word looks like a subcommand
/// (`git push`, `npm run`), that word too.
pub(crate) fn rule_example(part: &Part) -> Option<String> {
    let words = shell::strip_wrappers(&part.words, false);
    // A plain program name: never an empty or blank one (`'' x` would make `Bash(:*)`, a
    // rule for every command) nor one with characters rules give a meaning to.
    let first = words
        .first()
        .filter(|word| !word.dynamic && plain_word(&word.text))?;
    // An interpreter running a module (`python3 -m unittest`): the module is the command.
    if let (Some(flag), Some(module)) = (words.get(1), words.get(2))
        && flag.text == "-m"
        && !module.dynamic
        && !module.text.is_empty()
        && module
            .text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Some(format!("Bash({} -m {}:*)", first.text, module.text));
    }
    let subcommand = words.get(1).filter(|word| {
        !word.dynamic
            && !word.text.is_empty()
            && word
                .text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !word.text.starts_with('-')
    });
    Some(match subcommand {
        Some(sub) => format!("Bash({} {}:*)", first.text, sub.text),
        None => format!("Bash({}:*)", first.text),
    })
}
