//! Hooks with Claude Code's protocol (2.1.197): the settings' `hooks` run at the moments of
//! [`Event`], each hook getting the event as JSON on stdin (`BaseHookInput` and the event's
//! own fields, as `sdk.d.ts` of `@anthropic-ai/claude-agent-sdk` 0.3.197 defines them).
//!
//! A hook answers with its exit status and stdout ([`reply::read`]): exit 0 goes on, and its
//! stdout may hold a JSON answer (`continue`, `stopReason`, `decision`, `reason`,
//! `systemMessage`, `hookSpecificOutput`); exit 2 blocks with stderr as the reason; any
//! other exit is a failure told to the user that changes nothing. What a block means is the
//! event's: a PreToolUse block refuses the call, a Stop block makes the model go on, a
//! UserPromptSubmit block drops the prompt, a PreCompact block keeps the history as it is;
//! the events that cannot be blocked (SessionStart, SessionEnd, Notification, PostCompact,
//! SubagentStart) ignore it. The hooks an event matches run at the same time, an identical
//! command once; their answers are read in the settings' order.
//!
//! Hooks run with `bash -c` in the working directory, with `CLAUDE_PROJECT_DIR` set to it
//! and settings' `env` applied over the variables commands receive from the agent's
//! environment (`sandbox::env::PASSED_VARIABLES`: never its keys and tokens, and a `PATH`
//! without empty or relative entries); `bash` is the one found once outside the workspace.
//! See [`process`] for how a hook process is kept from outliving the agent. A hook that
//! fails or times out never ends the session.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use crate::settings::{HookCommand, HookMatcher};
use render::printable;

pub mod agent;
pub mod http;
mod lifecycle;
pub mod mcp_tool;
pub mod process;
pub mod prompt;
pub mod reply;
mod tasks;
mod tool_hooks;
pub mod watch;

pub use lifecycle::{CommandStopHook, HookedSummarizer};
pub use reply::{Permission, Reply, RequestDecision};
pub use tasks::TaskHooks;
pub(crate) use tool_hooks::settle;
pub use tool_hooks::{HookedGate, PermissionRequestHooks, ToolHooks};

/// The default timeout of a command hook: 600 s (Claude Code 2.1.197's `pp=600000`).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// SessionEnd hooks together get this long, unless one asks for more (2.1.197: 1500 ms).
pub const SESSION_END_TIMEOUT: Duration = Duration::from_millis(1500);

/// The most SessionEnd hooks together may ask for (2.1.197: 60 000 ms).
pub const SESSION_END_TIMEOUT_MAX: Duration = Duration::from_secs(60);

/// The variable that sets the SessionEnd hooks' time in milliseconds, as in Claude Code.
pub const SESSION_END_TIMEOUT_VARIABLE: &str = "CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS";

/// The hook events `agent` runs: those of Claude Code's that have a meaning here.
///
/// Claude Code's other events are accepted in settings and counted among the settings not
/// used (`PermissionDenied` (its auto mode), `Setup`, `TeammateIdle`, `Elicitation`,
/// `ElicitationResult`, `ConfigChange`, `MessageDisplay`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// A session starts: `source` is `startup`, `resume`, `clear` or `compact`. Context
    /// (plain stdout too) goes to the model with the next prompt.
    SessionStart,
    /// The session ends: `reason` (`clear`, `prompt_input_exit`, `other`). Bounded by
    /// [`SESSION_END_TIMEOUT`].
    SessionEnd,
    /// The user sent a prompt (`prompt`): a block drops it; context (plain stdout too) goes
    /// with it.
    UserPromptSubmit,
    /// Before a tool call's permission check: allow, ask, deny, a new input, context.
    PreToolUse,
    /// After a tool call succeeded (`tool_response`): feedback and context for the model, or
    /// a replaced result.
    PostToolUse,
    /// After a tool call failed (`error`, `is_interrupt`): feedback and context.
    PostToolUseFailure,
    /// Before the user is asked about a call (or, headless, before the refusal): allow or
    /// deny in their place.
    PermissionRequest,
    /// The agent needs the user (`notification_type` `permission_prompt`): a desktop
    /// notification, a sound. Nothing waits for it.
    Notification,
    /// The model wants to end the turn: a block makes it go on with the reason.
    Stop,
    /// A turn ended on an API error (`error`, `error_details`). Its answer is not read.
    StopFailure,
    /// A subagent starts (`agent_id`, `agent_type`): context goes to the subagent.
    SubagentStart,
    /// A subagent wants to end: as Stop, for the subagent.
    SubagentStop,
    /// Before a compaction (`trigger`, `custom_instructions`): a block keeps the history;
    /// stdout adds to the summary's instructions.
    PreCompact,
    /// After a compaction (`trigger`, `compact_summary`).
    PostCompact,
    /// Once after every call of a tool batch resolved, before the next request
    /// (`tool_calls`: each call's `tool_name`, `tool_input`, `tool_use_id` and, when it has
    /// one, `tool_response`): context and block reasons go with the batch's results.
    PostToolBatch,
    /// A command or skill the user typed expands into its prompt (`expansion_type`,
    /// `command_name`, `command_args`, `command_source`, `prompt` as typed): a block stops
    /// it; context goes with its prompt.
    UserPromptExpansion,
    /// The model made a task (TaskCreate: `task_id`, `task_subject`, `task_description`): a
    /// block takes it back, with the reason as the call's error.
    TaskCreated,
    /// The model marks a task completed (TaskUpdate): a block leaves it as it was, with the
    /// reason as the call's error.
    TaskCompleted,
    /// A memory file (`CLAUDE.md`, `AGENTS.md`, ...) went into the model's context
    /// (`file_path`, `memory_type`, `load_reason` `session_start`); matched against
    /// `load_reason`. Nothing waits for it.
    InstructionsLoaded,
    /// The shell's working directory changed (a Bash `cd`: `old_cwd`, `new_cwd`).
    /// `watchPaths` in the answer are watched for FileChanged; what the hooks write to
    /// `CLAUDE_ENV_FILE` runs before the next commands.
    CwdChanged,
    /// A watched file changed ([`watch`]: `file_path`, `event` `change`, `add` or `unlink`).
    /// `watchPaths` in the answer are watched too; what the hooks write to `CLAUDE_ENV_FILE`
    /// runs before the next commands.
    FileChanged,
    /// A worktree is wanted (`name`; [`crate::worktree`]): the hook makes it instead of git
    /// and prints its absolute path (or answers `hookSpecificOutput.worktreePath`).
    WorktreeCreate,
    /// A worktree a session or subagent is done with is to go (`worktree_path`): the hook
    /// removes it instead of git.
    WorktreeRemove,
}

impl Event {
    /// Every event, in `sdk.d.ts`'s order.
    pub const ALL: [Self; 23] = [
        Self::PreToolUse,
        Self::PostToolUse,
        Self::PostToolUseFailure,
        Self::PostToolBatch,
        Self::Notification,
        Self::UserPromptSubmit,
        Self::UserPromptExpansion,
        Self::SessionStart,
        Self::SessionEnd,
        Self::Stop,
        Self::StopFailure,
        Self::SubagentStart,
        Self::SubagentStop,
        Self::PreCompact,
        Self::PostCompact,
        Self::PermissionRequest,
        Self::TaskCreated,
        Self::TaskCompleted,
        Self::WorktreeCreate,
        Self::WorktreeRemove,
        Self::InstructionsLoaded,
        Self::CwdChanged,
        Self::FileChanged,
    ];

    /// Its name in settings and in `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PostToolUseFailure => "PostToolUseFailure",
            Self::PermissionRequest => "PermissionRequest",
            Self::Notification => "Notification",
            Self::Stop => "Stop",
            Self::StopFailure => "StopFailure",
            Self::SubagentStart => "SubagentStart",
            Self::SubagentStop => "SubagentStop",
            Self::PreCompact => "PreCompact",
            Self::PostCompact => "PostCompact",
            Self::PostToolBatch => "PostToolBatch",
            Self::UserPromptExpansion => "UserPromptExpansion",
            Self::TaskCreated => "TaskCreated",
            Self::TaskCompleted => "TaskCompleted",
            Self::InstructionsLoaded => "InstructionsLoaded",
            Self::CwdChanged => "CwdChanged",
            Self::FileChanged => "FileChanged",
            Self::WorktreeCreate => "WorktreeCreate",
            Self::WorktreeRemove => "WorktreeRemove",
        }
    }

    /// The event named `name`, if `agent` runs it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.name() == name)
    }

    /// Whether its matchers are read (UserPromptSubmit, Stop and StopFailure hooks all run,
    /// whatever their matcher says, as in Claude Code).
    fn has_matchers(self) -> bool {
        !matches!(
            self,
            Self::UserPromptSubmit
                | Self::Stop
                | Self::StopFailure
                | Self::PostToolBatch
                | Self::TaskCreated
                | Self::TaskCompleted
                | Self::CwdChanged
                | Self::FileChanged
                | Self::WorktreeCreate
                | Self::WorktreeRemove
        )
    }

    /// Whether plain stdout of exit 0 is context for the model (PreCompact: instructions for
    /// the summary, as Claude Code adds them); it is shown nowhere for the other events.
    fn stdout_is_context(self) -> bool {
        matches!(
            self,
            Self::SessionStart
                | Self::UserPromptSubmit
                | Self::UserPromptExpansion
                | Self::PreCompact
        )
    }
}

/// What every hook of an event answered, together ([`Reply`] each, in the settings' order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// The first `continue: false`'s reason.
    pub end: Option<String>,
    /// Every block's reason.
    pub blocks: Vec<String>,
    /// The strongest `permissionDecision` (deny, then ask, then allow), with its reason.
    pub permission: Option<(Permission, Option<String>)>,
    /// A PermissionRequest decision: a deny wins over an allow.
    pub request: Option<RequestDecision>,
    /// The last `updatedInput`.
    pub updated_input: Option<Value>,
    /// The last `updatedToolOutput`.
    pub updated_output: Option<Value>,
    /// Every piece of context for the model.
    pub context: Vec<String>,
    /// The last `sessionTitle`.
    pub session_title: Option<String>,
    /// The last `initialUserMessage`.
    pub initial_message: Option<String>,
    /// Whether any hook asked for `reloadSkills`.
    pub reload_skills: bool,
    /// Every `watchPaths` entry (SessionStart, CwdChanged, FileChanged).
    pub watch_paths: Vec<String>,
    /// The first worktree folder a WorktreeCreate hook gave.
    pub worktree_path: Option<String>,
}

impl Verdict {
    fn gather(replies: impl IntoIterator<Item = Reply>) -> Self {
        let mut verdict = Self::default();
        for reply in replies {
            if verdict.end.is_none() {
                verdict.end = reply.end;
            }
            verdict.blocks.extend(reply.block);
            if let Some(permission) = reply.permission
                && verdict
                    .permission
                    .as_ref()
                    .is_none_or(|(held, _)| permission.0 > *held)
            {
                verdict.permission = Some(permission);
            }
            match (&verdict.request, reply.request) {
                (Some(RequestDecision::Deny { .. }), _) | (_, None) => {}
                (_, Some(request)) => verdict.request = Some(request),
            }
            if reply.updated_input.is_some() {
                verdict.updated_input = reply.updated_input;
            }
            if reply.updated_output.is_some() {
                verdict.updated_output = reply.updated_output;
            }
            verdict.context.extend(reply.context);
            if reply.session_title.is_some() {
                verdict.session_title = reply.session_title;
            }
            if reply.initial_message.is_some() {
                verdict.initial_message = reply.initial_message;
            }
            verdict.reload_skills |= reply.reload_skills;
            verdict.watch_paths.extend(reply.watch_paths);
            if verdict.worktree_path.is_none() {
                verdict.worktree_path = reply.worktree_path;
            }
        }
        verdict
    }

    /// The reasons of `continue: false` and of every block, in that order.
    pub fn refusals(&self) -> Vec<String> {
        self.end.iter().chain(&self.blocks).cloned().collect()
    }
}

/// Facts every hook event carries. Clones share the session part, so a new session (the
/// interactive `/clear`) reaches every hook at once.
#[derive(Clone)]
pub struct HookEnv {
    /// The session id and its transcript file.
    pub session: Arc<Mutex<(String, PathBuf)>>,
    /// The working directory (hooks run there).
    pub cwd: PathBuf,
    /// The permission mode's name at start.
    pub permission_mode: String,
    /// The session's gate once built: the mode hooks are told is the one in force when they
    /// run (the user may switch it: Shift+Tab, an approved plan).
    pub gate: Arc<std::sync::OnceLock<Arc<tools::PermissionGate>>>,
    /// Extra environment of every hook (settings' `env`).
    pub env: Vec<(String, String)>,
    /// The program that runs [`mcp::guard::guard_main`] (the agent binary): hooks start
    /// through it, in a session of their own and tied to the agent's life. `None` starts
    /// them directly in a process group of their own (tests of this module, whose binary has
    /// no guard).
    pub guard: Option<PathBuf>,
    /// Where a hook's failures are told (one that could not start, failed or timed out).
    pub notices: crate::Notices,
    /// What `http` hooks are sent with (the model's HTTPS stack: its roots and proxy);
    /// `None`: such hooks fail with a line.
    pub http: Option<Arc<dyn provider::Transport>>,
    /// The model `prompt` hooks ask, once the session's clients exist (unset: such hooks
    /// fail with a line).
    pub model: Arc<std::sync::OnceLock<Arc<dyn prompt::HookModel>>>,
    /// The agent `agent` hooks run, once the session's clients exist (unset: such hooks
    /// fail with a line).
    pub agent: Arc<std::sync::OnceLock<Arc<dyn agent::HookAgent>>>,
    /// The file SessionStart hooks get as `CLAUDE_ENV_FILE` (in the session's private
    /// folder); `None`: they get none.
    pub env_file: Option<PathBuf>,
    /// The session's MCP servers, once started (`mcp_tool` hooks call their tools).
    pub mcp: Arc<std::sync::OnceLock<Arc<mcp::Pool>>>,
    /// Claude Code's policy for `http` hooks: where they may go, what their headers carry.
    pub http_policy: crate::settings::HttpHookPolicy,
    /// The folder is not trusted: command hooks (the user's own: a project's need trust) and
    /// the status line run in the session's sandbox, as an approved model command would
    /// ([`tools::PermissionGate::confined_command`]), because the folder can steer them (a
    /// `git status` obeys its `.git/config`); with no sandbox they do not run.
    pub confined: bool,
    /// The session's FileChanged watcher, once started ([`watch::FileWatcher`]).
    pub watch: Arc<std::sync::OnceLock<watch::FileWatcher>>,
    /// What `asyncRewake` hooks said for the model (their exit 2's stderr), waiting for the
    /// session's next request.
    pub wake: Arc<Mutex<Vec<String>>>,
    /// Called when an `asyncRewake` hook left something for the model (an idle interactive
    /// session starts a turn for it: [`crate::Session::on_arrival`]).
    pub waker: Arc<std::sync::OnceLock<Arc<dyn Fn() + Send + Sync>>>,
    /// The running turn's cancellation, while one runs: a PermissionRequest hook's `deny`
    /// with `interrupt: true` stops the turn through it, as the user's interrupt does.
    pub turn: Arc<Mutex<Option<tokio_util::sync::CancellationToken>>>,
    /// The program embedding the session (the Agent SDK), once known: `callback` hooks,
    /// registered at its `initialize`, are its functions ([`HookCallbacks`]).
    pub host: Arc<std::sync::OnceLock<Arc<dyn HookCallbacks>>>,
}

/// The future of a [`HookCallbacks::call`]: the callback's answer (the JSON a command hook
/// prints), or why there is none.
pub type CallbackFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + 'a>>;

/// Hooks that are functions of the program embedding the session (the Agent SDK's hook
/// callbacks), called with the event's input as a command hook gets it on stdin.
pub trait HookCallbacks: Send + Sync {
    /// Calls the callback `callback_id` with `input` (about the call `tool_use_id`, for a
    /// tool's events).
    ///
    /// # Cancellation safety
    ///
    /// The future is dropped when the hook times out or its call is cancelled.
    fn call<'a>(
        &'a self,
        callback_id: &'a str,
        input: &'a Value,
        tool_use_id: Option<&'a str>,
    ) -> CallbackFuture<'a>;
}

impl std::fmt::Debug for HookEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookEnv")
            .field("cwd", &self.cwd)
            .field("permission_mode", &self.permission_mode)
            .field("guard", &self.guard)
            .field("http", &self.http.is_some())
            .field("confined", &self.confined)
            .finish_non_exhaustive()
    }
}

impl HookEnv {
    /// Makes what the hooks wrote to `CLAUDE_ENV_FILE` (`export` lines) the shell lines every
    /// model command of the session runs first ([`tools::PermissionGate::set_command_prelude`]);
    /// returns them (empty for none: see [`read_env_file`]).
    pub fn apply_env_file(&self) -> String {
        let prelude = self
            .env_file
            .as_deref()
            .and_then(read_env_file)
            .unwrap_or_default();
        if let Some(gate) = self.gate.get() {
            gate.set_command_prelude(&prelude);
        }
        prelude
    }

    /// An `asyncRewake` hook that exited with 2: its stderr waits for the model's next
    /// request (and is shown now), as Claude Code wakes the model with it.
    fn rewake(&self, hook: &HookCommand, event: Event, exit: &process::Exit) {
        if !hook.async_rewake || exit.code != Some(2) {
            return;
        }
        let said = if exit.stderr.is_empty() {
            "blocked by a hook (exit 2)"
        } else {
            exit.stderr.as_str()
        };
        self.notices.say(&format!(
            "{} hook (in the background): {}",
            event.name(),
            printable(said, true)
        ));
        self.wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!(
                "<system-reminder>\n{} hook feedback (it ran in the background): {said}\n</system-reminder>",
                event.name()
            ));
        if let Some(waker) = self.waker.get() {
            waker();
        }
    }

    /// What `asyncRewake` hooks left for the model since last asked.
    pub fn take_wake(&self) -> Vec<String> {
        std::mem::take(&mut *self.wake.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Points every hook at a new session.
    pub fn set_session(&self, session_id: String, transcript_path: PathBuf) {
        *self.session.lock().unwrap_or_else(PoisonError::into_inner) =
            (session_id, transcript_path);
    }

    fn event(&self, name: &str, mut fields: Value) -> Value {
        let (session_id, transcript_path) = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut event = json!({
            "session_id": session_id,
            "transcript_path": transcript_path,
            "cwd": self.cwd,
            "permission_mode": self
                .gate
                .get()
                .map_or(self.permission_mode.as_str(), |gate| gate.mode().as_str()),
            "hook_event_name": name,
        });
        if let (Some(event), Some(fields)) = (event.as_object_mut(), fields.as_object_mut()) {
            event.append(fields);
        }
        event
    }
}

/// The hooks of a session: the settings' matchers by event, and what they run with. Cheap to
/// clone (the matchers are shared).
#[derive(Clone, Debug)]
pub struct Hooks {
    env: HookEnv,
    matchers: Arc<BTreeMap<Event, Vec<HookMatcher>>>,
    /// Inside a subagent: its `agent_id` and `agent_type`, in every event's input.
    agent: Option<(String, String)>,
    /// PreToolUse context waiting for its call's result.
    pending: tool_hooks::PendingContext,
    /// The `once` hooks that ran.
    ran_once: Arc<Mutex<HashSet<String>>>,
}

impl Hooks {
    /// The hooks of `configured` (settings' `hooks`, by event name) that `agent` runs.
    pub fn new(env: HookEnv, configured: &BTreeMap<String, Vec<HookMatcher>>) -> Self {
        let matchers = configured
            .iter()
            .filter_map(|(name, matchers)| Some((Event::from_name(name)?, matchers.clone())))
            .filter(|(_, matchers)| !matchers.is_empty())
            .collect();
        Self {
            env,
            matchers: Arc::new(matchers),
            agent: None,
            pending: tool_hooks::PendingContext::default(),
            ran_once: Arc::default(),
        }
    }

    /// What the hooks run with.
    pub fn env(&self) -> &HookEnv {
        &self.env
    }

    /// The longest any one hook of `events` may run (hooks of one event run at the same
    /// time); zero when there are none.
    pub fn longest(&self, events: &[Event]) -> Duration {
        events
            .iter()
            .filter_map(|event| self.matchers.get(event))
            .flatten()
            .flat_map(|matcher| &matcher.hooks)
            .filter(|hook| !hook.in_background())
            .map(|hook| hook.timeout().unwrap_or(COMMAND_TIMEOUT))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Whether any hook is configured for `event`.
    pub fn has(&self, event: Event) -> bool {
        self.matchers.contains_key(&event)
    }

    /// The files the FileChanged matchers name (`.envrc|.env`: each name, as written).
    pub fn file_changed_names(&self) -> Vec<String> {
        self.matchers
            .get(&Event::FileChanged)
            .into_iter()
            .flatten()
            .filter_map(|matcher| matcher.matcher.as_deref())
            .flat_map(|names| names.split('|'))
            .map(str::trim)
            .filter(|name| !name.is_empty() && *name != "*")
            .map(str::to_owned)
            .collect()
    }

    /// Whether any hook of any event is of the type `kind` (`agent`, `prompt`, ...).
    pub fn has_kind(&self, kind: &str) -> bool {
        self.matchers
            .values()
            .flatten()
            .flat_map(|matcher| &matcher.hooks)
            .any(|hook| hook.kind == kind)
    }

    /// These hooks as a subagent's: every event's input names it (`agent_id`,
    /// `agent_type`), as Claude Code's do for hooks that fire inside a subagent.
    #[must_use]
    pub fn in_subagent(&self, agent_id: &str, agent_type: &str) -> Self {
        Self {
            agent: Some((agent_id.to_owned(), agent_type.to_owned())),
            ..self.clone()
        }
    }

    /// The hooks of `event` whose matcher matches one of `subjects` (every hook when the
    /// event has no matchers or `subjects` is empty) and that can run here, an identical one
    /// once, a `once` hook only the first time.
    fn selected(&self, event: Event, subjects: &[&str]) -> Vec<&HookCommand> {
        let mut seen = HashSet::new();
        let ran_once = self.ran_once.lock().unwrap_or_else(PoisonError::into_inner);
        self.matchers
            .get(&event)
            .into_iter()
            .flatten()
            .filter(|matcher| {
                !event.has_matchers()
                    || subjects.is_empty()
                    || subjects.iter().any(|subject| matcher.matches(subject))
            })
            .flat_map(|matcher| &matcher.hooks)
            .filter(|hook| {
                (hook.command.is_some()
                    || hook.callback.is_some()
                    || hook.url.is_some()
                    || hook.prompt.is_some()
                    || hook.tool.is_some())
                    && hook.unsupported().is_none()
            })
            .filter(|hook| seen.insert(identity(hook)))
            .filter(|hook| !hook.once || !ran_once.contains(&once_key(event, hook)))
            .collect()
    }

    /// The input of `event`: the session's facts, the subagent's when inside one, and
    /// `fields`.
    pub fn input(&self, event: Event, fields: Value) -> Value {
        let mut input = self.env.event(event.name(), fields);
        if let (Some((id, kind)), Some(object)) = (&self.agent, input.as_object_mut()) {
            object.entry("agent_id").or_insert_with(|| json!(id));
            object.entry("agent_type").or_insert_with(|| json!(kind));
        }
        input
    }

    /// Runs the hooks of `event` that match one of `subjects` with `fields` added to the
    /// event's input, all at once, and gathers their answers. Their `systemMessage`s and
    /// failures are told to the user here.
    pub async fn run(&self, event: Event, subjects: &[&str], fields: Value) -> Verdict {
        self.run_about(event, subjects, None, fields).await
    }

    /// [`Hooks::run`] for an event about a call of `tool` with `input` (PreToolUse,
    /// PermissionRequest, PostToolUse, PostToolUseFailure): a hook with an `if` rule runs only
    /// when the rule covers the call as a refusal would (any part of a command), and what it
    /// approves counts only when the rule covers the call as an allowance would (every
    /// part): a hook scoped to `Bash(npm test*)` never approves `npm test && rm -rf ~`.
    pub async fn run_for_call(
        &self,
        event: Event,
        tool: &dyn executor::Tool,
        input: &Value,
        fields: Value,
    ) -> Verdict {
        let names: Vec<&str> = std::iter::once(tool.name())
            .chain(tool.aliases().iter().copied())
            .collect();
        self.run_about(event, &names, Some((tool, input)), fields)
            .await
    }

    async fn run_about(
        &self,
        event: Event,
        subjects: &[&str],
        call: Option<(&dyn executor::Tool, &Value)>,
        fields: Value,
    ) -> Verdict {
        let mut hooks = self.selected(event, subjects);
        if let Some((tool, input)) = call {
            hooks.retain(|hook| {
                self.covers(hook, tool, input, tools::RuleSense::Refusal) != Some(false)
            });
        }
        // A `once` hook is spent when it runs, not when its `if` kept it from running.
        {
            let mut ran_once = self.ran_once.lock().unwrap_or_else(PoisonError::into_inner);
            hooks.retain(|hook| !hook.once || ran_once.insert(once_key(event, hook)));
        }
        if hooks.is_empty() {
            return Verdict::default();
        }
        let event_input = self.input(event, fields);
        let limit = (event == Event::SessionEnd).then(|| session_end_limit(&hooks));
        let runs = hooks
            .iter()
            .map(|hook| self.run_one(event, hook, &event_input, limit));
        let mut replies = futures_util::future::join_all(runs).await;
        if let Some((tool, input)) = call {
            for (hook, reply) in hooks.iter().zip(&mut replies) {
                let approves = matches!(reply.permission, Some((Permission::Allow, _)))
                    || matches!(reply.request, Some(RequestDecision::Allow { .. }));
                if approves
                    && let Some(rule) = &hook.if_rule
                    && self.covers(hook, tool, input, tools::RuleSense::Allowance) != Some(true)
                {
                    self.env.notices.say(&format!(
                        "{} hook `{}`: its approval is ignored: the call is not within its `if` ({})",
                        event.name(),
                        printable(hook.command.as_deref().unwrap_or_default(), false),
                        printable(rule, false)
                    ));
                    if matches!(reply.permission, Some((Permission::Allow, _))) {
                        reply.permission = None;
                    }
                    if matches!(reply.request, Some(RequestDecision::Allow { .. })) {
                        reply.request = None;
                    }
                    reply.updated_input = None;
                }
            }
        }
        Verdict::gather(replies)
    }

    /// Whether `hook`'s `if` rule covers the call in `sense`: `None` when it has no rule,
    /// or the rule cannot be read (told; the hook then runs, and approves nothing).
    fn covers(
        &self,
        hook: &HookCommand,
        tool: &dyn executor::Tool,
        input: &Value,
        sense: tools::RuleSense,
    ) -> Option<bool> {
        let rule = hook.if_rule.as_deref()?;
        let gate = self.env.gate.get()?;
        match gate.rule_covers(rule, tool, input, sense) {
            Ok(covers) => Some(covers),
            Err(error) => {
                if sense == tools::RuleSense::Refusal {
                    self.env.notices.say(&format!(
                        "hook `{}`: its `if` {} is not a rule ({error}); the hook runs for every call and approves none",
                        printable(hook.command.as_deref().unwrap_or_default(), false),
                        printable(rule, false)
                    ));
                }
                None
            }
        }
    }

    /// Starts the hooks of `event` and returns at once (Notification: nothing waits for a
    /// desktop notification).
    pub fn spawn(&self, event: Event, subjects: &[&str], fields: Value) {
        if self.selected(event, subjects).is_empty() {
            return;
        }
        let hooks = self.clone();
        let subjects: Vec<String> = subjects.iter().map(|&subject| subject.to_owned()).collect();
        tokio::spawn(async move {
            let subjects: Vec<&str> = subjects.iter().map(String::as_str).collect();
            hooks.run(event, &subjects, fields).await;
        });
    }

    /// What a hook answered, once told: its problems and `systemMessage` as lines, its
    /// `terminalSequence` to the terminal; confined, what would widen is dropped from an
    /// answer the folder may have written (`from_folder`: every hook's but the embedding
    /// program's callbacks).
    fn received(&self, event: Event, command: &str, mut reply: Reply, from_folder: bool) -> Reply {
        // Confined, the answer may come from what the folder runs: it can refuse,
        // never approve. A callback's comes from the embedding program, never the folder.
        if self.env.confined && from_folder && reply.narrow() {
            self.env.notices.say(&failure(
                event,
                command,
                "approved or changed a call; that is ignored: the folder is not trusted, so what the hook answers may come from the folder (--trust or the setting trustedFolders honours it)",
            ));
        }
        for problem in &reply.problems {
            self.env
                .notices
                .say(&failure(event, command, &format!("answered {problem}")));
        }
        if let Some(message) = &reply.system_message {
            self.env.notices.say(&format!(
                "{} hook: {}",
                event.name(),
                printable(message, true)
            ));
        }
        if let Some(sequence) = &reply.terminal_sequence {
            self.env.notices.terminal(sequence);
        }
        reply
    }

    /// Runs one hook; a failure is told and answers nothing. `limit` bounds its time
    /// (SessionEnd).
    async fn run_one(
        &self,
        event: Event,
        hook: &HookCommand,
        input: &Value,
        limit: Option<Duration>,
    ) -> Reply {
        if let Some(id) = &hook.callback {
            return self.run_callback(event, id, hook, input).await;
        }
        let Some(command) = hook
            .command
            .as_deref()
            .or(hook.url.as_deref())
            .or(hook.prompt.as_deref())
            .or(hook.tool.as_deref())
        else {
            return Reply::default();
        };
        if hook.kind == "agent" {
            let timeout = hook.timeout().unwrap_or(agent::TIMEOUT);
            let transcript = self
                .env
                .session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .1
                .clone();
            let runner = self.env.agent.get().map(|runner| runner.as_ref());
            return match agent::run(runner, event, &transcript, hook, timeout, input).await {
                Ok(reply) => reply,
                Err(error) => {
                    self.env.notices.say(&failure(event, command, &error));
                    Reply::default()
                }
            };
        }
        if hook.kind == "prompt" {
            let timeout = hook.timeout().unwrap_or(prompt::TIMEOUT);
            let model = self.env.model.get().map(|model| model.as_ref());
            return match prompt::run(model, hook, timeout, input).await {
                Ok(reply) => reply,
                Err(error) => {
                    self.env.notices.say(&failure(event, command, &error));
                    Reply::default()
                }
            };
        }
        let timeout = match (hook.timeout(), limit) {
            (Some(asked), Some(limit)) => asked.min(limit),
            (asked, limit) => asked.or(limit).unwrap_or(COMMAND_TIMEOUT),
        };
        let launch = process::Launch {
            command: command.to_owned(),
            args: hook.args.clone(),
            env_file: matches!(
                event,
                Event::SessionStart | Event::CwdChanged | Event::FileChanged
            )
            .then(|| self.env.env_file.clone())
            .flatten(),
        };
        if hook.in_background() {
            let (env, input, hook) = (self.env.clone(), input.clone(), hook.clone());
            tokio::spawn(async move {
                let ran = if hook.kind == "http" {
                    http::run(&env, &hook, timeout, &input).await.map(drop)
                } else if hook.kind == "mcp_tool" {
                    mcp_tool::run(&env, &hook, timeout, &input).await.map(drop)
                } else {
                    process::run(&env, &launch, timeout, Some(&input))
                        .await
                        .map(|exit| env.rewake(&hook, event, &exit))
                };
                if let Err(error) = ran {
                    env.notices.say(&failure(event, &launch.command, &error));
                }
            });
            return Reply::default();
        }
        let ran = if hook.kind == "http" {
            http::run(&self.env, hook, timeout, input).await
        } else if hook.kind == "mcp_tool" {
            mcp_tool::run(&self.env, hook, timeout, input).await
        } else {
            process::run(&self.env, &launch, timeout, Some(input)).await
        };
        let said = match ran {
            Ok(exit) => reply::read(event, exit.code, &exit.stdout, &exit.stderr),
            Err(error) => Err(error),
        };
        match said {
            Ok(reply) => self.received(event, command, reply, true),
            Err(error) => {
                // Confined, the likely reason is the sandbox: say so, and how to lift it.
                let error = if self.env.confined {
                    format!("{error} ({CONFINED_HINT})")
                } else {
                    error
                };
                self.env.notices.say(&failure(event, command, &error));
                Reply::default()
            }
        }
    }
}

impl Hooks {
    /// Runs the embedding program's callback `id` ([`HookCallbacks`]) within the hook's
    /// timeout (600 s unless it gives one); its answer is read as a command hook's JSON.
    async fn run_callback(
        &self,
        event: Event,
        id: &str,
        hook: &HookCommand,
        input: &Value,
    ) -> Reply {
        let Some(host) = self.env.host.get() else {
            return Reply::default();
        };
        let timeout = hook.timeout().unwrap_or(COMMAND_TIMEOUT);
        let tool_use_id = input.get("tool_use_id").and_then(Value::as_str);
        let answer = match tokio::time::timeout(timeout, host.call(id, input, tool_use_id)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer within {} s", timeout.as_secs_f64())),
        };
        let read = answer.and_then(|answer| {
            // `{"async": true}`: the program goes on by itself; nothing is waited for.
            if answer.get("async") == Some(&Value::Bool(true)) {
                return Ok(Reply::default());
            }
            reply::read(event, Some(0), &answer.to_string(), "")
        });
        match read {
            Ok(reply) => self.received(event, CALLBACK, reply, false),
            Err(error) => {
                self.env.notices.say(&failure(event, CALLBACK, &error));
                Reply::default()
            }
        }
    }
}

/// How a callback hook is named in what is told about it.
const CALLBACK: &str = "(SDK callback)";

/// What a confined hook's failure or ignored approval adds: why, and how to lift it.
const CONFINED_HINT: &str = "it ran in the sandbox: the folder is not trusted, so it cannot write outside the workspace or reach the network; --trust or the setting trustedFolders runs your hooks as configured";

/// The most of `CLAUDE_ENV_FILE` read: 64 KiB.
const ENV_FILE_CAP: u64 = 64 * 1024;

/// What hooks left in `CLAUDE_ENV_FILE` (`export NAME=value` lines, as Claude Code's hooks
/// write them), for every model command to run first; `None` when it is empty, missing, not
/// a regular file, or larger than 64 KiB.
pub fn read_env_file(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > ENV_FILE_CAP {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The key a `once` hook is remembered by.
fn once_key(event: Event, hook: &HookCommand) -> String {
    format!("{}:{}", event.name(), identity(hook))
}

/// What makes two hooks the same one (run once when both match).
fn identity(hook: &HookCommand) -> String {
    json!([
        hook.command,
        hook.callback,
        hook.url,
        hook.prompt,
        hook.server,
        hook.tool,
        hook.input,
        hook.args,
        hook.timeout,
        hook.in_background(),
        hook.if_rule
    ])
    .to_string()
}

/// The line telling a hook's failure, its command and output with control and escape
/// sequences neutralised (a hook's output must not drive the terminal).
fn failure(event: Event, command: &str, error: &str) -> String {
    format!(
        "{} hook `{}` {}",
        event.name(),
        printable(command, false),
        printable(error, true)
    )
}

/// How long SessionEnd hooks may take together: [`SESSION_END_TIMEOUT_VARIABLE`] when set
/// to a positive number of milliseconds, else the longest `timeout` they ask for, between
/// [`SESSION_END_TIMEOUT`] and [`SESSION_END_TIMEOUT_MAX`] (Claude Code 2.1.197's rule).
fn session_end_limit(hooks: &[&HookCommand]) -> Duration {
    if let Some(millis) = std::env::var(SESSION_END_TIMEOUT_VARIABLE)
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .filter(|millis| *millis > 0)
    {
        return Duration::from_millis(millis);
    }
    let asked = hooks
        .iter()
        .filter_map(|hook| hook.timeout())
        .max()
        .unwrap_or(Duration::ZERO);
    asked.clamp(SESSION_END_TIMEOUT, SESSION_END_TIMEOUT_MAX)
}

/// The settings folders the agent reads: `.agent/` and `.claude/` in the working directory,
/// `agent/` in the user's config directory, `~/.claude/` and `~/.claude.json`, its
/// sessions (`agent/` in the user's data directory) and its cache (`agent/` in the user's
/// cache directory: the sandbox probe's record). No tool may change them: the
/// file tools refuse writes there after resolving the path exactly
/// (`tools::ToolSetConfig::protected`, which the permission gate reports as a denial), and
/// the OS sandbox keeps every command out of them (no command's text is read for them).
pub fn protected_dirs(cwd: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = PROTECTED_NAMES.iter().map(|name| cwd.join(name)).collect();
    dirs.extend(user_settings_dir());
    dirs.extend(claude_user_dir());
    // Claude Code's state: the folders it trusts and the MCP servers it starts carry over
    // (`crate::claude_code`), so a command that wrote it could trust a folder.
    dirs.extend(crate::claude_code::file());
    // Transcripts, checkpoints and persisted results: a rewind trusts what they say, so
    // nothing the model runs may write there (it matters when the workspace holds them,
    // a session started in the home folder).
    dirs.extend(dirs::data_dir().map(|data| data.join("agent")));
    // The sandbox back end the next start uses without probing (`sandbox::probe_cache`):
    // a command that wrote it could choose the back end for every later session.
    dirs.extend(dirs::cache_dir().map(|cache| cache.join("agent")));
    dirs
}

/// Folder names whose contents no file tool may change wherever they are: a nested one is
/// the settings of a session started there (`sub/.claude/settings.json`).
pub const PROTECTED_NAMES: [&str; 2] = [".agent", ".claude"];

/// Claude Code's user folder (`$CLAUDE_CONFIG_DIR`, else `~/.claude/`: its settings,
/// memory and commands apply here), and `~/.claude/` as well when that is elsewhere.
fn claude_user_dir() -> Vec<PathBuf> {
    crate::claude_code::user_dir()
        .into_iter()
        .chain(dirs::home_dir().map(|home| home.join(".claude")))
        .collect()
}

/// `agent/` in the user's config directory.
fn user_settings_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|config| config.join("agent"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn hooks(dir: &Path, notices: crate::Notices, configured: Value) -> Hooks {
        let env = HookEnv {
            notices,
            ..process::tests::env(dir)
        };
        let configured: BTreeMap<String, Vec<HookMatcher>> =
            serde_json::from_value(configured).unwrap();
        Hooks::new(env, &configured)
    }

    fn collect() -> (crate::Notices, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&lines);
        let notices = crate::Notices::new(move |line| kept.lock().unwrap().push(line.to_owned()));
        (notices, lines)
    }

    #[test]
    fn every_hook_sees_a_new_session() {
        let dir = std::env::temp_dir();
        let shared = process::tests::env(&dir);
        let held_by_a_hook = shared.clone();
        shared.set_session("second".into(), dir.join("second.jsonl"));
        let event = held_by_a_hook.event("Stop", json!({}));
        assert_eq!(event["session_id"], "second");
        assert_eq!(event["transcript_path"], json!(dir.join("second.jsonl")));
    }

    #[test]
    fn the_events_are_claude_codes() {
        for event in Event::ALL {
            assert_eq!(Event::from_name(event.name()), Some(event));
            assert!(crate::settings::HOOK_EVENTS.contains(&event.name()));
        }
        assert_eq!(Event::from_name("TeammateIdle"), None);
    }

    /// The hooks an event matches run at once (three 1-second sleeps take about one), an
    /// identical one once; answers are read in the settings' order; a failure is a line.
    #[tokio::test]
    async fn hooks_run_together_and_answer_in_order() {
        let dir = tempdir("together");
        let (notices, lines) = collect();
        let hooks = hooks(
            &dir,
            notices,
            json!({
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [
                        {"type": "command", "command": "sleep 1; echo ran >> count; echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\", \"additionalContext\": \"first\"}}'"},
                        {"type": "command", "command": "sleep 1; echo '{\"systemMessage\": \"careful\", \"hookSpecificOutput\": {\"permissionDecision\": \"ask\", \"additionalContext\": \"second\"}}'"},
                    ]},
                    {"matcher": "Ba.*", "hooks": [
                        {"type": "command", "command": "sleep 1; echo ran >> count; echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\", \"additionalContext\": \"first\"}}'"},
                        {"type": "command", "command": "sleep 1; exit 3"},
                    ]},
                    {"matcher": "Read", "hooks": [{"type": "command", "command": "echo never >> count"}]},
                ],
            }),
        );
        let started = std::time::Instant::now();
        let verdict = hooks
            .run(Event::PreToolUse, &["Bash"], json!({"tool_name": "Bash"}))
            .await;
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            verdict,
            Verdict {
                permission: Some((Permission::Ask, None)),
                context: vec!["first".into(), "second".into()],
                ..Verdict::default()
            }
        );
        assert_eq!(std::fs::read_to_string(dir.join("count")).unwrap(), "ran\n");
        // Told as each hook ends: in either order.
        let mut told = lines.lock().unwrap().clone();
        told.sort();
        assert_eq!(
            told,
            [
                "PreToolUse hook `sleep 1; exit 3` failed (exit status 3)",
                "PreToolUse hook: careful",
            ]
        );
    }

    /// What an event's matchers are matched against, and the events whose matchers are
    /// not read.
    #[tokio::test]
    async fn matchers_see_each_events_subject() {
        let dir = tempdir("subjects");
        let (notices, _) = collect();
        let hooks = hooks(
            &dir,
            notices,
            json!({
                "SessionStart": [{"matcher": "resume", "hooks": [{"type": "command", "command": "echo resumed"}]},
                                 {"matcher": "startup|clear", "hooks": [{"type": "command", "command": "echo fresh"}]}],
                "UserPromptSubmit": [{"matcher": "nothing matches this", "hooks": [{"type": "command", "command": "cat > input.json; echo seen"}]}],
            }),
        );
        let start = hooks
            .run(Event::SessionStart, &["clear"], json!({"source": "clear"}))
            .await;
        assert_eq!(start.context, ["fresh"]);
        let prompt = hooks
            .run(Event::UserPromptSubmit, &[], json!({"prompt": "hello"}))
            .await;
        assert_eq!(prompt.context, ["seen"]);
        let read = || -> Value {
            serde_json::from_str(&std::fs::read_to_string(dir.join("input.json")).unwrap()).unwrap()
        };
        let input = read();
        assert_eq!(input["hook_event_name"], "UserPromptSubmit");
        assert_eq!(input["prompt"], "hello");
        assert_eq!(input["session_id"], "s");
        assert!(input.get("agent_id").is_none());
        let inside = hooks.in_subagent("a1", "reviewer");
        inside
            .run(Event::UserPromptSubmit, &[], json!({"prompt": "x"}))
            .await;
        let input = read();
        assert_eq!(
            (input["agent_id"].as_str(), input["agent_type"].as_str()),
            (Some("a1"), Some("reviewer"))
        );
    }

    /// A `once` hook runs the first time only; an identical hook without `once` each time.
    #[tokio::test]
    async fn a_once_hook_runs_once() {
        let dir = tempdir("once");
        let (notices, _) = collect();
        let hooks = hooks(
            &dir,
            notices,
            json!({"UserPromptSubmit": [{"hooks": [
                {"type": "command", "command": "echo once >> ran", "once": true},
                {"type": "command", "command": "echo every >> ran"},
            ]}]}),
        );
        for _ in 0..3 {
            hooks
                .run(Event::UserPromptSubmit, &[], json!({"prompt": "x"}))
                .await;
        }
        let mut ran: Vec<String> = std::fs::read_to_string(dir.join("ran"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        ran.sort();
        assert_eq!(ran, ["every", "every", "every", "once"]);
    }

    /// SessionEnd hooks get 1.5 s together unless one asks for more; a hook that hangs is
    /// stopped and told about.
    #[tokio::test]
    async fn session_end_hooks_are_bounded() {
        let dir = tempdir("end");
        let (notices, lines) = collect();
        let hooks = hooks(
            &dir,
            notices,
            json!({"SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye > said; sleep 30"}]}]}),
        );
        let started = std::time::Instant::now();
        let verdict = hooks
            .run(Event::SessionEnd, &["other"], json!({"reason": "other"}))
            .await;
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1400) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert_eq!(verdict, Verdict::default());
        assert_eq!(std::fs::read_to_string(dir.join("said")).unwrap(), "bye\n");
        assert_eq!(
            lines.lock().unwrap().as_slice(),
            ["SessionEnd hook `echo bye > said; sleep 30` timed out after 1.5 s"]
        );
        let hook = |timeout: u64| -> HookCommand {
            serde_json::from_value(json!({"type": "command", "command": "x", "timeout": timeout}))
                .unwrap()
        };
        let (asked, long) = (hook(5), hook(600));
        assert_eq!(session_end_limit(&[&asked]), Duration::from_secs(5));
        assert_eq!(session_end_limit(&[&asked, &long]), SESSION_END_TIMEOUT_MAX);
    }

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("agent-hooks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
