//! One session: everything a run needs (model client, tools, gate, hooks, loop settings), the
//! history and its transcript. Headless runs take one turn; the interactive mode takes many,
//! each continuing the history the last one left.
//!
//! Nothing is written until the first turn starts: a run that fails while it is being set up
//! (bad settings, no API key) leaves no session file behind for `--continue` to pick.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use executor::{CanUseTool, Workspace};
use loop_core::{Deps, LoopConfig, LoopEvent, LoopOutcome, NoStopHook, StopHook, spawn_loop};
use protocol::MessageParam;
use provider::{
    AnthropicClient, ClientConfig, ConfigSource, EnvSource, HyperTransport, RecordingTransport,
    ReplayTransport, TokioSleeper, Transport,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::options::Options;
use crate::transcript::{self, Transcript};
use crate::{adapter, context_info, hooks, settings, subagents, tooling};

/// Shift+Tab: default → acceptEdits → plan → default, at once (a turn may be running: the
/// gate's next decisions, Bash's sandbox and the hooks' `permission_mode` follow, and the
/// subagents of later turns). bypassPermissions is left for default and never entered.
/// Returns the new mode.
pub fn cycle_mode(gate: &tools::PermissionGate) -> tools::PermissionMode {
    use tools::PermissionMode as Mode;
    let next = match gate.mode() {
        Mode::Default => Mode::AcceptEdits,
        Mode::AcceptEdits => Mode::Plan,
        _ => Mode::Default,
    };
    gate.set_mode(next);
    next
}

/// The subagents a Task call may start: the built-in ones, the user's and the project's
/// files, and those of a program driving the session.
fn subagents_of(
    options: &Options,
    cwd: &Path,
    trusted: bool,
) -> Arc<[loop_core::subagent::AgentDefinition]> {
    let mut agents = subagents::definitions(cwd, trusted, &options.notices);
    if let Some(host) = &options.host {
        host.add_agents(&mut agents);
    }
    agents.into()
}

/// What a session is opened from, read first: its folder, custom commands, Claude Code's
/// state, the folder's trust and the settings in force (with the hooks of a program
/// driving the session).
struct Loaded {
    cwd: PathBuf,
    commands: Vec<crate::commands::Command>,
    claude: crate::claude_code::State,
    folder_trust: FolderTrust,
    settings: settings::Settings,
    mcp_servers: Vec<mcp::config::Configured>,
}

impl Loaded {
    fn read(
        options: &Options,
        trust_asker: Option<&dyn crate::trust::TrustAsker>,
    ) -> anyhow::Result<Self> {
        let cwd = working_dir(options)?;
        let mut layers = settings::load(&cwd)?;
        if let Some(sources) = &options.setting_sources {
            settings::keep_sources(&mut layers, sources)?;
        }
        if let Some(extra) = &options.settings {
            layers.push(settings::flag_layer(extra)?);
        }
        let commands = crate::commands::discover(&cwd, &options.notices);
        // Claude Code's state, read once: the folders it trusts, the servers it starts.
        let claude = crate::claude_code::State::read(&|line| options.notices.say(line));
        let folder_trust = decide_trust(options, &cwd, &layers, &commands, trust_asker, &claude)?;
        let mut settings = trusted_settings(options, layers, folder_trust.trusted());
        if let Some(host) = &options.host {
            host.add_hooks(&mut settings.hooks);
        }
        let asked = (folder_trust, trust_asker);
        let mcp_servers = mcp_servers(options, &cwd, &settings, asked, &claude)?;
        Ok(Self {
            cwd,
            commands,
            claude,
            folder_trust,
            settings,
            mcp_servers,
        })
    }
}

/// Resolves a model name to its id, or says why it cannot ([`Session::model_resolver`]).
pub type ModelResolver = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// The default model when neither `--model`, `ANTHROPIC_MODEL` nor settings name one.
pub const DEFAULT_MODEL: &str = "claude-opus-4-8";

/// A configured session, ready for turns.
pub struct Session {
    /// The working directory, absolute and resolved.
    cwd: PathBuf,
    /// The session id (the transcript's file name without `.jsonl`).
    session_id: String,
    /// The model asked first.
    model: String,
    /// How Bash commands are sandboxed.
    sandbox: tools::SandboxConfig,
    /// Whether the folder is trusted (see `trust`).
    trusted: bool,
    /// The names of the tools the model may call.
    tool_names: Vec<String>,
    /// The custom slash commands (`.claude/commands/`, ...).
    commands: Vec<crate::commands::Command>,
    /// `--json-schema`: the structured output, as far as it got.
    structured: Option<crate::structured::Shared>,
    /// Where the API key came from (`system/init`'s `apiKeySource`).
    api_key_source: String,
    /// The skills (`.claude/skills/`, ...), found while the context is gathered.
    skills: Vec<tools::skills::Skill>,
    /// The agents the Task tool offers (built-in, the user's, a trusted project's).
    agents: Arc<[loop_core::subagent::AgentDefinition]>,
    /// The loop's settings for the next run (model, system prompt, limits, levels).
    config: LoopConfig,
    /// The model clients.
    llm: ModelClients,
    /// The tools, their gate and what they are built from.
    tooling: ToolState,
    /// The MCP servers.
    mcp: McpState,
    /// The history and where it is written.
    record: Record,
    /// What waits for the next request or prompt.
    pending: Pending,
    /// Where warnings and notes go.
    notices: crate::Notices,
}

/// The clients a session asks models through.
struct ModelClients {
    client: AnthropicClient,
    /// The `--fallback-model`, when it is another provider's.
    fallback: Option<adapter::Fallback>,
    /// The model's window is an assumption: the server is asked for it before the first
    /// turn.
    window_assumed: bool,
    /// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`, kept for a window that changes.
    compact_percent: Option<u8>,
    /// What a command's `model` is resolved and sized with: the settings' `models`, whether
    /// the provider is OpenAI-compatible, the settings' `env` (alias overrides), plan mode.
    settings: ModelSettings,
    /// Whether thinking is on for the next turn, as a front end's key switches it
    /// ([`Session::thinking_switch`]).
    thinking: Arc<std::sync::atomic::AtomicBool>,
}

/// The session's tools and what decides on their calls.
struct ToolState {
    tools: Vec<Arc<dyn executor::Tool>>,
    permissions: Arc<dyn CanUseTool>,
    stop_hook: Arc<dyn StopHook>,
    /// The permission gate under the hooks: a command's `allowed-tools` are granted there.
    gate: Arc<tools::PermissionGate>,
    /// What a subagent's tools and gate are built from.
    recipe: subagents::Recipe,
    /// Whether the Task tool is offered (no blanket rule denies `Task` or `Agent`).
    task_offered: bool,
    /// How many of `tools` are the built-in ones (a subagent gets fresh ones; the rest,
    /// MCP tools and Skill, are shared).
    builtin_tools: usize,
    /// Which files the session's tools read changed on disk since (attachments).
    watch: tools::FileWatch,
    /// Where oversized tool results go: the first session's `tool-results/` folder, for
    /// every session of this process (the tools may always read it).
    results_dir: PathBuf,
    /// `--max-budget-usd`, shared by the session's runs and their subagents.
    spend: Option<Arc<dyn loop_core::SpendGuard>>,
    /// The permission rules and where each came from (see [`Session::rules`]).
    rule_origins: Vec<(&'static str, String, String)>,
    workspace: Arc<Workspace>,
    hooks: hooks::Hooks,
    /// How long the prompt waits before the Notification hooks hear the agent is idle.
    idle_after: std::time::Duration,
    /// Where the terminal's notifications go (resolved for this terminal).
    notify: render::notify::Channel,
    /// The theme the settings name (`None`: the terminal decides).
    theme: Option<render::Theme>,
    /// The settings' `statusLine` command.
    status_line: Option<settings::StatusLineSettings>,
    /// Whether its failure was told.
    status_line_failed: Arc<std::sync::atomic::AtomicBool>,
    /// The worktree the main agent works in (EnterWorktree, `--worktree`).
    worktree: crate::worktree::Current,
}

/// The MCP servers: configured, started, and what their tools join the session with.
struct McpState {
    /// The servers to start (see `mcp_servers`).
    servers: Vec<mcp::config::Configured>,
    /// The servers, once started.
    pool: Option<Arc<mcp::Pool>>,
    /// `mcpStartupWaitMs` from the settings.
    wait: Option<u64>,
    /// Root certificates HTTPS MCP servers are trusted with beside the webpki roots.
    extra_roots_pem: Arc<[u8]>,
    /// Headless (no prompter): the first request waits for every MCP server, as there is
    /// no next prompt for a late server's tools to join.
    headless: bool,
    /// Servers whose failure was reported.
    reported_failures: std::collections::HashSet<String>,
    /// The program embedding the session, which serves its `sdk` servers.
    host: Option<Arc<dyn mcp::HostServers>>,
}

/// The history and its transcript.
struct Record {
    history: Vec<MessageParam>,
    /// What the context pipeline remembers of `history`, lent to each run and kept across
    /// prompts (its L1 decisions, microcompact's request count, compaction breaker).
    memory: context::ContextMemory,
    /// The last main request's parts, so `/compact` sends its summary as a fork of it and
    /// reads the history from the prompt cache; `None` when the history was replaced since.
    fork: Option<context::Fork>,
    /// This project's sessions folder.
    sessions: PathBuf,
    /// The transcript's file.
    path: PathBuf,
    transcript: Option<Transcript>,
    /// Where Write and Edit record their changes (checkpoints), writing into the transcript.
    journal: Arc<crate::checkpoints::Journal>,
    /// The workspace's snapshots around each turn that runs a tool (`None`: off,
    /// [`Options::no_snapshots`]).
    snapshots: Option<Arc<crate::snapshots::Turns>>,
    /// The user turns the session has begun (numbered from 1 in its file).
    turns: u64,
    /// The history came from another tool's transcript: it is copied into our own session
    /// file when the first turn starts.
    copy_history: bool,
    /// The user context saved in the resumed transcript (sent again as it was, never
    /// gathered again).
    saved_context: Option<String>,
    /// Whether the transcript holds the user context this session sends.
    context_saved: bool,
}

/// What waits for the next request or prompt.
struct Pending {
    /// Lines the user enters while a turn runs (interactive), sent with its next request.
    steering: Option<Steering>,
    /// What goes before the next prompt in its message: `!command` runs, `@file` reads
    /// (an image's as its image block).
    context: Vec<protocol::ContentBlock>,
    /// What the start-up gathering left for later (`git status` of a large repository).
    late: Arc<crate::prefetch::Late>,
    /// The start-up `git status`, started as the session opened ([`start_git_status`]),
    /// for the first gathering to take.
    status: Option<StartedStatus>,
    /// A title a hook gave the session (`sessionTitle`), to be written into the transcript
    /// with the next turn (Claude Code's `custom-title` entry).
    title: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("cwd", &self.cwd)
            .field("session_id", &self.session_id)
            .field("model", &self.model)
            .field("messages", &self.record.history.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Sets a session up from the arguments and the settings files; writes nothing.
    /// `prompter` answers calls that need approval (interactive); without one they are
    /// refused with a message (headless).
    ///
    /// # Errors
    ///
    /// Bad flags or settings (naming the flag or the file), no API key, an unreadable
    /// certificate or cassette, a session to resume that does not exist or does not load.
    pub fn open(
        options: &Options,
        prompter: Option<Arc<dyn tools::Prompter>>,
        trust_asker: Option<&dyn crate::trust::TrustAsker>,
    ) -> anyhow::Result<Self> {
        tracing::debug!(target: "timeline", "opening the session");
        let options = &*crate::control::hosted(options);
        // A program driving the session answers its questions, but it is no one at a
        // terminal: the session is headless.
        let prompter_absent = prompter.is_none();
        let prompter = prompter
            .or_else(|| options.host.as_ref()?.prompter())
            .filter(|_| !options.permissions.never_ask);
        let Loaded {
            cwd,
            commands,
            claude,
            folder_trust,
            settings,
            mcp_servers,
        } = Loaded::read(options, trust_asker)?;
        let folder_trusted = folder_trust.trusted();
        report_settings(&settings, &options.notices);
        let (provider_choice, named_model) = named_model(options, &settings)?;
        let openai = provider_choice.kind.is_openai();
        let (record, session_id, last_activity) = Record::open(options, &cwd, !prompter_absent)?;
        let (workspace, sandbox, status) =
            confinement(options, &settings, &cwd, folder_trusted, &record)?;
        let (client, extra_roots_pem, api_key_source) =
            model_client(options, &cwd, &settings, &provider_choice, false)
                .with_context(|| client_context(&settings))?;
        tracing::debug!(target: "timeline", "model client built");

        let mode = permission_mode(options, &settings)?;
        let model = if !openai {
            let lookup = |key: &str| setting_or_env(&settings.env, key);
            resolve_model(&named_model, mode == tools::PermissionMode::Plan, &lookup)
        } else {
            named_model
        };
        let web = web_tools(&settings, &client, &extra_roots_pem, openai)?;
        let (mut tooling, structured) = ToolState::build(
            (options, &settings, workspace),
            (&session_id, &record),
            mode,
            prompter,
            (sandbox.clone(), Some(web)),
        )?;
        tracing::debug!(target: "timeline", "tools built");
        let agents = subagents_of(options, &cwd, folder_trusted);

        let (info, window_assumed) = model_info(&model, &settings.models, openai)?;
        let compact_percent = autocompact_percent(&settings.env)?;
        let plan = mode == tools::PermissionMode::Plan;
        let (model_settings, thinking) =
            model_settings(options, &settings, openai, plan, compact_percent)?;
        let mut config = loop_config(
            options,
            &settings,
            (&model, &info),
            &model_settings,
            prompter_absent,
            structured.is_some(),
        )?;
        config.last_request = last_activity;
        let fallback_client = fallback(
            options,
            &settings,
            &cwd,
            &provider_choice,
            compact_percent,
            &mut config,
        )?;
        tooling.spend = limits(options, &settings, &mut config)?;

        let tool_names = tooling.offered_names();
        let mut session = Self {
            cwd,
            session_id,
            model,
            sandbox,
            trusted: folder_trusted,
            tool_names,
            commands,
            structured,
            api_key_source,
            skills: Vec::new(),
            agents,
            config,
            llm: ModelClients {
                client,
                fallback: fallback_client,
                window_assumed,
                compact_percent,
                thinking: Arc::new(std::sync::atomic::AtomicBool::new(thinking)),
                settings: model_settings,
            },
            tooling,
            mcp: McpState::new(
                mcp_servers,
                &settings,
                extra_roots_pem,
                (prompter_absent, options),
            ),
            record,
            pending: Pending {
                status,
                ..Pending::default()
            },
            notices: options.notices.clone(),
        };
        session.settle(&settings, &claude, options.host.as_ref())?;
        tracing::debug!(target: "timeline", "session open");
        Ok(session)
    }

    /// The last of [`Session::open`]: what needs the session whole (the model prompt hooks
    /// ask, the idle notification's wait, the resumed transcript's lock, the task list).
    ///
    /// # Errors
    ///
    /// A resumed transcript that cannot be opened.
    fn settle(
        &mut self,
        settings: &settings::Settings,
        claude: &crate::claude_code::State,
        host: Option<&crate::control::Host>,
    ) -> anyhow::Result<()> {
        self.tooling.idle_after = claude.idle_threshold();
        if let Some(host) = host {
            host.attach(self.tooling.hooks.env());
        }
        // Claude Code's `preferredNotifChannel`: settings first, then its global
        // configuration (where earlier versions kept it); a value it does not know is `auto`.
        let channel = settings
            .other
            .get("preferredNotifChannel")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .or_else(|| claude.notification_channel())
            .and_then(|value| render::notify::Channel::parse(&value))
            .unwrap_or_default();
        self.tooling.notify = channel.resolve(&|name| std::env::var(name).ok());
        // Claude Code's `theme`: settings first, then its global configuration (where
        // Claude Code keeps it); `auto` or none lets the terminal's background decide.
        self.tooling.theme = settings
            .other
            .get("theme")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .or_else(|| claude.theme())
            .and_then(|value| render::Theme::parse(&value));
        let _ = self
            .tooling
            .hooks
            .env()
            .model
            .set(Arc::new(adapter::ProviderHookModel::new(
                self.llm.client.clone(),
                fast_model(settings, &self.llm.settings, &self.model),
                {
                    let models = self.llm.settings.clone();
                    Arc::new(move |name: &str| {
                        models
                            .resolve(name)
                            .map_or_else(|_| name.to_owned(), |(id, _)| id)
                    })
                },
            )));
        if let Some(web) = &self.tooling.recipe.web {
            web.set_model(Arc::new(adapter::ProviderWebModel::new(
                self.llm.client.clone(),
                fast_model(settings, &self.llm.settings, &self.model),
                self.model.clone(),
            )));
        }
        let hooks = &self.tooling.hooks;
        if hooks.has_kind("agent") {
            let _ = hooks
                .env()
                .agent
                .set(Arc::new(crate::hook_agent::HookAgentRunner::new(
                    (self.llm.client.clone(), self.llm.fallback.clone()),
                    (
                        self.llm.settings.clone(),
                        fast_model(settings, &self.llm.settings, &self.model),
                    ),
                    &self.tooling.recipe,
                    &self.config,
                    self.tooling.spend.clone(),
                )));
        }
        // A resumed session of ours is locked from the start, not from its first turn: a
        // rewind (or another agent) must not change the file under a session that is open.
        if !self.record.copy_history && self.record.path.is_file() {
            self.transcript()?;
        }
        self.restore_todos();
        Ok(())
    }

    /// Gathers the user context (date, git status, memory files); call once before the
    /// first turn. `git status` runs the repository's configured programs (filters), so it
    /// runs in the read-only sandbox, or unsandboxed only in a trusted folder.
    pub async fn gather_context(&mut self) {
        // The window of a model nothing configured is asked of its server meanwhile.
        let probe = self.llm.window_assumed.then(|| {
            let client = self.llm.client.clone();
            let model = self.config.model.clone();
            async move { client.reported_context_window(&model).await }
        });
        let reported = async {
            match probe {
                Some(probe) => Some(probe.await),
                None => None,
            }
        };
        let (reported, ()) = tokio::join!(reported, self.gather_servers_and_context());
        if let Some(reported) = reported {
            self.settle_window(reported);
        }
        let source = if self.record.history.is_empty() {
            "startup"
        } else {
            "resume"
        };
        self.start_hooks(source).await;
    }

    /// Runs the SessionStart hooks with `source` (`startup`, `resume`, `clear`; `compact`
    /// runs with a compaction): what they give the model (`additionalContext`, or plain
    /// stdout) goes with the next prompt. [`Session::gather_context`] runs them for
    /// `startup` and `resume`; a front end runs them for `clear` after [`Session::clear`].
    pub async fn start_hooks(&mut self, source: &str) {
        let env_file = self.tooling.hooks.env().env_file.clone();
        let writers = [
            hooks::Event::SessionStart,
            hooks::Event::CwdChanged,
            hooks::Event::FileChanged,
        ]
        .iter()
        .any(|event| self.tooling.hooks.has(*event));
        if let Some(file) = env_file.as_ref().filter(|_| writers)
            && let Some(folder) = file.parent()
            && crate::transcript::private_dir(folder).is_ok()
        {
            // Empty for the hooks to fill, as Claude Code gives it them.
            let _ = std::fs::write(file, "");
        }
        let hooks = &self.tooling.hooks;
        if hooks.env().watch.get().is_none()
            && let Some(watch) = hooks::watch::FileWatcher::start(hooks, &self.cwd)
        {
            let _ = hooks.env().watch.set(watch);
        }
        let verdict = hooks
            .run(
                hooks::Event::SessionStart,
                &[source],
                serde_json::json!({"source": source, "model": self.model}),
            )
            .await;
        if let Some(watch) = hooks.env().watch.get() {
            watch.add(&verdict.watch_paths, &self.cwd);
        }
        self.pending.context.extend(
            verdict
                .context
                .iter()
                .map(|context| hook_context(hooks::Event::SessionStart, context)),
        );
        // Sent before the user's first prompt, in its message.
        self.pending
            .context
            .extend(verdict.initial_message.map(protocol::ContentBlock::text));
        if matches!(source, "startup" | "resume") && verdict.session_title.is_some() {
            self.pending.title = verdict.session_title;
        }
        if verdict.reload_skills {
            self.reload_skills().await;
        }
        // Only what this session's hooks wrote: a file an earlier session's hooks left is
        // not read when no SessionStart hook runs now (they were removed, the folder is no
        // longer trusted, hooks are off).
        let prelude = env_file
            .as_deref()
            .filter(|_| writers)
            .and_then(hooks::read_env_file)
            .unwrap_or_default();
        self.tooling.gate.set_command_prelude(&prelude);
        self.tooling.recipe.prelude = prelude;
    }

    /// Looks for the custom commands and skills again (a SessionStart hook's `reloadSkills`:
    /// it installed some): the slash commands, the Skill tool and, before the first request,
    /// the list of skills in the user context are the new ones.
    async fn reload_skills(&mut self) {
        let (cwd, notices) = (self.cwd.clone(), self.notices.clone());
        let found = tokio::task::spawn_blocking(move || {
            (
                crate::commands::discover(&cwd, &notices),
                crate::skills::discover(&cwd, &notices),
            )
        })
        .await;
        let Ok((commands, skills)) = found else {
            return;
        };
        self.commands = commands;
        let before = crate::skills::context_list(&self.skills);
        let after = crate::skills::context_list(&skills);
        if self.record.history.is_empty()
            && self.record.saved_context.is_none()
            && let Some(context) = &mut self.config.user_context
        {
            if !before.is_empty() && context.contains(&before) {
                *context = context.replacen(&before, &after, 1);
            } else {
                context.push_str(&after);
            }
        }
        self.skills = skills;
        self.tooling.tools.retain(|tool| tool.name() != "Skill");
        self.tool_names.retain(|name| name != "Skill");
        self.offer_skills();
    }

    /// The rows of the settings' `statusLine` command, as Claude Code shows them under the
    /// prompt: the command gets Claude Code's status JSON on stdin (the session's id,
    /// transcript, folder and mode, `model`, `workspace`, `version`, `output_style`, and what
    /// the front end counted: `counted`'s keys, such as `cost` and `context_window`), and each
    /// line it prints is a row (at most [`crate::STATUS_LINE_ROWS`], colours kept, other escape
    /// sequences dropped, `padding` spaces before each). `None` when there is no command or
    /// it failed (the first failure is told) or printed nothing; at most
    /// [`crate::STATUS_LINE_TIMEOUT`]. The work is the returned future, which owns what it needs: a
    /// front end runs it beside the prompt (a slow command must not hold the prompt up);
    /// `None` when there is no command.
    pub fn status_line(
        &self,
        counted: serde_json::Value,
    ) -> Option<impl std::future::Future<Output = Option<Vec<String>>> + Send + 'static> {
        Some(self.status_line_command()?.run(counted))
    }

    /// Where the terminal's notifications go: Claude Code's `preferredNotifChannel`
    /// (settings, else its global configuration; `auto` by default) resolved for the
    /// terminal this process runs in ([`render::notify::Channel::resolve`]).
    pub fn notification_channel(&self) -> render::notify::Channel {
        self.tooling.notify
    }

    /// The terminal's theme the settings name (Claude Code's `theme`: settings, else its
    /// global configuration); `None` lets the terminal's background decide.
    pub fn theme(&self) -> Option<render::Theme> {
        self.tooling.theme
    }

    /// The settings' `statusLine` command, to run as [`Session::status_line`] does while a
    /// turn holds the session (Claude Code refreshes it as the turn goes on); `None` when
    /// there is none.
    pub fn status_line_command(&self) -> Option<crate::StatusLine> {
        Some(crate::StatusLine {
            settings: self.tooling.status_line.clone()?,
            hooks: self.tooling.hooks.clone(),
            model: self.model.clone(),
            workspace: serde_json::json!({
                "current_dir": self.cwd,
                "project_dir": self.cwd,
                "added_dirs": self.tooling.workspace.additional_dirs,
            }),
            failed: Arc::clone(&self.tooling.status_line_failed),
            notices: self.notices.clone(),
        })
    }

    /// How long the prompt waits (Claude Code's `messageIdleNotifThresholdMs` in
    /// `~/.claude.json`, else [`IDLE_NOTIFICATION_AFTER`]) before a front end calls the
    /// function given with it, which tells the Notification hooks the agent waits for the
    /// user (`notification_type` `idle_prompt`, as Claude Code does): it starts them and
    /// returns at once.
    pub fn idle_notifier(&self) -> (std::time::Duration, impl Fn() + Send + Sync + 'static) {
        let hooks = self.tooling.hooks.clone();
        (self.tooling.idle_after, move || {
            hooks.spawn(
                hooks::Event::Notification,
                &["idle_prompt"],
                serde_json::json!({
                    "message": "agent is waiting for your input",
                    "notification_type": "idle_prompt",
                }),
            );
        })
    }

    /// Runs the SessionEnd hooks with `reason`, for at most
    /// [`hooks::SESSION_END_TIMEOUT`] unless they ask for more. A front end calls it when
    /// the user leaves (`prompt_input_exit`), before [`Session::clear`] (`clear`), and at
    /// the end of a headless run (`other`).
    pub async fn end(&mut self, reason: EndReason) {
        self.end_background().await;
        if let Some(snapshots) = &self.record.snapshots {
            snapshots.stop();
        }
        if let Some(sentence) = self.tooling.worktree.end().await {
            self.notices.say(&sentence);
        }
        self.tooling
            .hooks
            .run(
                hooks::Event::SessionEnd,
                &[reason.as_str()],
                serde_json::json!({"reason": reason.as_str()}),
            )
            .await;
    }

    /// Moves the main agent into worktree `name` of the session's repository before its first
    /// turn (the command line's `--worktree NAME`; uncommitted changes of the main checkout
    /// are told, not refused): `.claude/worktrees/NAME` on branch `worktree-NAME`, its files,
    /// shell and sandbox the agent's from then on, and the model told so in its context. At
    /// [`Session::end`] it is kept if it has changes, else removed.
    ///
    /// # Errors
    ///
    /// [`crate::worktree::WorktreeError`]: a bad name, no repository, an untrusted folder, a
    /// worktree or branch of that name already there.
    pub async fn enter_worktree(
        &mut self,
        name: &str,
    ) -> Result<crate::worktree::Worktree, crate::worktree::WorktreeError> {
        let name = if name.is_empty() {
            crate::worktree::random_name()
        } else {
            name.to_owned()
        };
        // git runs only where it may (see `worktree::create`).
        let uncommitted = if self.trusted {
            crate::worktree::uncommitted(&self.cwd).await
        } else {
            Vec::new()
        };
        if !uncommitted.is_empty() {
            self.notices.say(&format!(
                "the main checkout has {} uncommitted change(s) the worktree does not have (commit or stash them to take them along)",
                uncommitted.len()
            ));
        }
        let name = name.as_str();
        let worktree = self
            .tooling
            .worktree
            .enter(crate::worktree::Target::New(name.to_owned()), true)
            .await?;
        self.notices.say(&format!(
            "working in the worktree {}{}",
            worktree.path.display(),
            worktree.on_branch()
        ));
        if let Some(context) = &mut self.config.user_context {
            let to = format!(
                "{} (a git worktree of the repository at {}{})",
                worktree.path.display(),
                self.cwd.display(),
                worktree
                    .branch
                    .as_ref()
                    .map(|branch| format!(", on branch {branch}"))
                    .unwrap_or_default()
            );
            crate::context_info::move_working_directory(context, &self.cwd, &to);
        }
        Ok(worktree)
    }

    /// The session's background tasks (shells, monitors, background subagents): a front end
    /// lists them (`/tasks`), stops one, or listens to their starts and ends.
    pub fn background(&self) -> &tools::background::BackgroundTasks {
        &self.tooling.recipe.background
    }

    /// Sets the effort of the next requests (`/effort LEVEL`; `None`: back to the model's
    /// default), and returns [`Session::effort_report`].
    pub fn set_effort(&mut self, effort: Option<protocol::Effort>) -> String {
        self.follow_thinking_switch();
        self.llm.settings.reasoning.effort = effort;
        let reasoning = self.llm.settings.reasoning;
        reasoning.configure(&mut self.config, self.llm.settings.openai);
        self.effort_report()
    }

    /// Thinking on or off for the next turns, shared with a front end's key (Alt+T): each
    /// turn starts with what it holds.
    pub fn thinking_switch(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.llm.thinking)
    }

    /// Applies [`Session::thinking_switch`] to the next requests.
    fn follow_thinking_switch(&mut self) {
        let on = self.llm.thinking.load(std::sync::atomic::Ordering::Relaxed);
        if on != self.llm.settings.reasoning.thinking_on() {
            let reasoning = &mut self.llm.settings.reasoning;
            reasoning.thinking = Some(on);
            if on && reasoning.max_thinking_tokens == Some(0) {
                reasoning.max_thinking_tokens = None;
            }
            let reasoning = *reasoning;
            reasoning.configure(&mut self.config, self.llm.settings.openai);
        }
    }

    /// The effort and thinking of the next requests, in a line (`/effort`).
    pub fn effort_report(&mut self) -> String {
        self.follow_thinking_switch();
        self.llm.settings.reasoning.describe(&self.config)
    }

    /// Calls `wake` whenever something arrives for the model on its own (a background task
    /// ended by itself, an `asyncRewake` hook answered), for a front end whose session idles
    /// between prompts to start a turn for it ([`Session::take_arrivals`]). From a task's or
    /// hook's thread: `wake` must not block.
    pub fn on_arrival(&self, wake: impl Fn() + Send + Sync + 'static) {
        let wake: Arc<dyn Fn() + Send + Sync> = Arc::new(wake);
        let on_end = Arc::clone(&wake);
        self.background().listen(move |event| match event {
            tools::background::TaskEvent::Ended(task, _)
                if task.status() != tools::background::TaskStatus::Stopped =>
            {
                on_end();
            }
            tools::background::TaskEvent::Event(_) => on_end(),
            _ => {}
        });
        let _ = self.tooling.hooks.env().waker.set(wake);
    }

    /// What arrived for the model and was not sent yet (task notifications, monitors'
    /// events, `asyncRewake` hooks' feedback), taken: the prompt of a turn that tells it.
    /// Empty when nothing waits.
    pub fn take_arrivals(&self) -> Vec<String> {
        let mut arrived = self.background().notifications();
        arrived.extend(self.tooling.hooks.env().take_wake());
        arrived
    }

    /// Ends the background tasks still running: a headless run first waits for them, at
    /// most `AGENT_BACKGROUND_WAIT_MS` milliseconds ([`BACKGROUND_WAIT`] by default); each
    /// task stopped is named. [`Session::end`] does it; a front end calls it first when what
    /// the tasks report must come before its last words (stream-json's `result`).
    pub async fn end_background(&mut self) {
        let tasks = &self.tooling.recipe.background;
        if tasks.running() == 0 {
            return;
        }
        if self.mcp.headless {
            let wait = std::env::var("AGENT_BACKGROUND_WAIT_MS")
                .ok()
                .and_then(|value| value.trim().parse::<u64>().ok())
                .map_or(BACKGROUND_WAIT, std::time::Duration::from_millis);
            tasks.wait_all(wait).await;
        }
        for task in tasks.stop_all().await {
            self.notices.say(&format!(
                "stopped background task {} (`{}`, started {:.0} s before): the session ended",
                task.id(),
                render::printable(task.command(), false),
                task.elapsed().as_secs_f64()
            ));
        }
    }

    /// MCP servers and the user context, both part of [`Session::gather_context`].
    async fn gather_servers_and_context(&mut self) {
        // MCP servers connect while the context is gathered; the run waits for them at most
        // the grace period (`mcpStartupWaitMs`).
        if !self.mcp.servers.is_empty() {
            let limits =
                crate::mcp_config::mcp_limits(self.mcp.wait, self.mcp.headless, &self.notices);
            let options = mcp::Options {
                tool_timeout: limits.tool_timeout,
                extra_roots_pem: Arc::clone(&self.mcp.extra_roots_pem),
                guard: std::env::current_exe().ok(),
                // Untrusted, the user's own servers start where the folder cannot steer
                // them (`python3 -m NAME` would import its `NAME`).
                cwd: Some(if self.trusted {
                    self.cwd.clone()
                } else {
                    dirs::home_dir().unwrap_or_else(std::env::temp_dir)
                }),
                host: self.mcp.host.clone(),
                ..mcp::Options::new(self.record.sessions.join("mcp-logs"), limits.startup)
            };
            let pool = mcp::Pool::start(std::mem::take(&mut self.mcp.servers), &options);
            self.mcp.pool = Some(Arc::clone(&pool));
            let _ = self.tooling.hooks.env().mcp.set(Arc::clone(&pool));
            self.gather_user_context().await;
            pool.settle(limits.grace).await;
            self.join_mcp_tools();
            for (name, status) in pool.status() {
                if matches!(status, mcp::Status::Pending) {
                    self.notices.say(&format!(
                        "warning: MCP server {} is still starting after {} ms; its tools \
                         join at the next request (MCP_STARTUP_WAIT_MS waits longer)",
                        render::printable(&name, false),
                        limits.grace.as_millis()
                    ));
                }
            }
            return;
        }
        self.gather_user_context().await;
    }

    /// A model whose window nothing configured: the server's own figure (`reported`, from
    /// vLLM's `/v1/models`, llama.cpp's `/props`, Ollama's `/api/show`), else the
    /// assumption, with one warning.
    fn settle_window(&mut self, reported: Option<u64>) {
        self.llm.window_assumed = false;
        let model = &self.config.model;
        match reported {
            Some(window) => {
                tracing::info!(window, "the server reports the model's context window");
                set_window(
                    &mut self.config,
                    &window_info(window),
                    self.llm.compact_percent,
                );
                let reasoning = self.llm.settings.reasoning;
                reasoning.configure(&mut self.config, self.llm.settings.openai);
            }
            None if let Some(open) = context::open_models::lookup_open(model) => {
                self.notices.say(&format!(
                    "note: the server does not say the context window of {}: using its model card's {} tokens (a local server may serve less: set \"models\": {{\"{}\": {{\"contextWindow\": N}}}})",
                    render::printable(model, false),
                    open.context_window,
                    render::printable(model, false)
                ));
            }
            None => self.notices.say(&format!(
                "warning: the context window of {} is not known: assuming {ASSUMED_WINDOW} tokens (set it in settings: \"models\": {{\"{}\": {{\"contextWindow\": N, \"maxOutput\": N}}}})",
                render::printable(model, false),
                render::printable(model, false)
            )),
        }
    }

    /// What a response in `change` cost in USD, priced as the run's result prices it (the
    /// settings' prices first, for the model that answered, then the one asked); `None`
    /// for other changes and for a model priced nowhere.
    fn cost_of(&self, change: &loop_core::HistoryEvent) -> Option<f64> {
        let loop_core::HistoryEvent::Response(message) = change else {
            return None;
        };
        let overrides = self.price_overrides();
        crate::cost::prices(&overrides, &message.model, &self.model)
            .map(|prices| prices.cost(&message.usage))
    }

    /// The prices settings' `models` entries give, by model id: they win over the built-in
    /// table when the cost is reported.
    pub fn price_overrides(&self) -> Arc<BTreeMap<String, context::Prices>> {
        price_overrides(&self.llm.settings.models)
    }

    /// The custom command or skill `line` (`/name arguments`) invokes, when it names one;
    /// `None` for anything else (a task, a built-in command, a path). Of a command and a skill
    /// of the same name, the user's own wins over the project's, else the command. A project
    /// command's `allowed-tools` and `model` are dropped,
    /// with one warning, in an untrusted folder.
    pub fn expand_command(&self, line: &str) -> Option<Invocation> {
        let (name, arguments) = crate::commands::invocation(line)?;
        let command = self.commands.iter().find(|command| command.name == name);
        let skill = self.skills.iter().find(|skill| skill.name == name);
        // The user's own win over a project's; a command over a skill of the same scope.
        let command = command.filter(|command| {
            command.scope == "user" || skill.is_none_or(|skill| skill.scope != "user")
        });
        if let Some(command) = command {
            let applies = command.scope == "user" || self.trusted;
            if !applies && (!command.allowed_tools.is_empty() || command.model.is_some()) {
                self.notices.say(&format!(
                    "warning: /{}: allowed-tools and model of a project command are ignored: {} is not a trusted folder",
                    render::printable(name, false),
                    render::printable(&self.cwd.display().to_string(), false)
                ));
            }
            return Some(Invocation {
                name: name.to_owned(),
                prompt: command.expand(arguments),
                allowed_tools: if applies {
                    command.allowed_tools.clone()
                } else {
                    Vec::new()
                },
                model: command.model.clone().filter(|_| applies),
                arguments: arguments.to_owned(),
                source: command_source(command.scope),
            });
        }
        let skill = skill?;
        match tools::skills::load_prompt(skill, arguments) {
            Ok(prompt) => Some(Invocation {
                name: name.to_owned(),
                prompt,
                allowed_tools: Vec::new(),
                model: None,
                arguments: arguments.to_owned(),
                source: command_source(skill.scope),
            }),
            Err(reason) => {
                self.notices.say(&format!(
                    "warning: skill {}: {}",
                    render::printable(name, false),
                    render::printable(&reason, false)
                ));
                None
            }
        }
    }

    /// Runs the turn of a custom command or skill: [`Session::turn`] with its prompt, its
    /// `allowed-tools` granted and its `model` in use until the turn ends (the session's
    /// model and limits come back afterwards, whatever the outcome).
    ///
    /// # Errors
    ///
    /// An `allowed-tools` rule that does not parse or a `model` whose settings entry is
    /// invalid (nothing is sent then), and [`Session::turn`]'s errors.
    pub async fn invoke(
        &mut self,
        invocation: Invocation,
        observer: &mut dyn crate::Observer,
        cancel: CancellationToken,
    ) -> anyhow::Result<LoopOutcome> {
        if !invocation.name.is_empty() {
            self.expansion_hooks(&invocation).await?;
        }
        let _grant = if invocation.allowed_tools.is_empty() {
            None
        } else {
            Some(
                self.tooling
                    .gate
                    .grant_for_turn(&invocation.allowed_tools)
                    .with_context(|| format!("/{}: allowed-tools", invocation.name))?,
            )
        };
        let Some(model) = &invocation.model else {
            return self.turn(invocation.prompt, observer, cancel).await;
        };
        let (id, info) = self
            .llm
            .settings
            .resolve(model)
            .with_context(|| format!("/{}: model", invocation.name))?;
        let before = (
            self.config.model.clone(),
            self.config.output_cap,
            self.config.escalated_output_cap,
            self.config.context.levels,
        );
        self.llm.settings.apply(&mut self.config, id, &info);
        let outcome = self.turn(invocation.prompt, observer, cancel).await;
        (
            self.config.model,
            self.config.output_cap,
            self.config.escalated_output_cap,
            self.config.context.levels,
        ) = before;
        outcome
    }

    /// Adds the tools of MCP servers that connected since the last call (their tools join at
    /// the next turn of a session).
    pub fn join_mcp_tools(&mut self) {
        let Some(source) = self.mcp_tools() else {
            return;
        };
        use loop_core::ToolSource as _;
        for tool in source.tools() {
            if !self.tool_names.iter().any(|name| name == tool.name()) {
                self.tool_names.push(tool.name().to_owned());
                self.tooling.tools.push(tool);
            }
        }
        for (name, status) in source.pool.status() {
            if let mcp::Status::Failed(reason) = status
                && self.mcp.reported_failures.insert(name)
            {
                self.notices.say(&format!(
                    "warning: MCP server {}",
                    render::printable(&reason, false)
                ));
            }
        }
    }

    /// The one way MCP tools join the session, between turns ([`Session::join_mcp_tools`])
    /// and during a run (the loop's tool source): the tools the gate offers, behind the
    /// PostToolUse hooks. `None` before the servers are started.
    fn mcp_tools(&self) -> Option<McpTools> {
        Some(McpTools {
            pool: Arc::clone(self.mcp.pool.as_ref()?),
            hooks: self.tooling.hooks.clone(),
            gate: Arc::clone(&self.tooling.gate),
        })
    }

    /// The MCP servers and their state (`system/init`'s `mcp_servers`).
    pub fn mcp_status(&self) -> Vec<(String, &'static str)> {
        self.mcp.pool.as_ref().map_or_else(Vec::new, |pool| {
            pool.status()
                .into_iter()
                .map(|(name, status)| (name, status.as_str()))
                .collect()
        })
    }

    /// The user context and the skills, gathered at once ([`crate::prefetch`]): the memory
    /// files and the skills (which the first request needs) and `git status` (which gets a
    /// short grace, then follows with a later message); one after the other with
    /// `AGENT_NO_PREFETCH=1`. A resumed session sends the context it sent before: the same
    /// request prefix (the prompt cache), the same facts the conversation was built on.
    async fn gather_user_context(&mut self) {
        tracing::debug!(target: "timeline", "gathering the user context");
        let date = transcript::timestamp(std::time::SystemTime::now())[..10].to_owned();
        let resumed = self.record.saved_context.is_some();
        let (cwd, sandbox, trusted) = (self.cwd.clone(), self.sandbox.clone(), self.trusted);
        let started = self.pending.status.take();
        let status = async move {
            match started {
                _ if resumed => None,
                Some(started) => started.await.ok().flatten(),
                None => context_info::git_status_section(&cwd, &sandbox, trusted).await,
            }
        };
        let (memory_cwd, memory_notices) = (self.cwd.clone(), self.notices.clone());
        let memory = async move {
            tokio::task::spawn_blocking(move || {
                context_info::memory_section(&memory_cwd, &memory_notices)
            })
            .await
            .unwrap_or_default()
        };
        let (skills_cwd, notices) = (self.cwd.clone(), self.notices.clone());
        let skills = async move {
            let found = notices.clone();
            tokio::task::spawn_blocking(move || crate::skills::discover(&skills_cwd, &found))
                .await
                .unwrap_or_else(|error| {
                    notices.say(&format!("warning: skills were not read: {error}"));
                    Vec::new()
                })
        };
        let sequential = sequential_start();
        let ((memory, skills), status) = if sequential {
            let status = status.await;
            let memory = memory.await;
            ((memory, skills.await), status)
        } else {
            let (needed, status, late) = crate::prefetch::gather(
                async { tokio::join!(memory, skills) },
                status,
                crate::prefetch::GIT_STATUS_GRACE,
            )
            .await;
            self.pending.late = Arc::new(late);
            (needed, status)
        };
        let (memory, loaded) = memory;
        if !resumed && self.tooling.hooks.has(hooks::Event::InstructionsLoaded) {
            // All at once; their answers change nothing.
            futures_util::future::join_all(loaded.iter().map(|path| {
                self.tooling.hooks.run(
                    hooks::Event::InstructionsLoaded,
                    &["session_start"],
                    serde_json::json!({
                        "file_path": path,
                        "memory_type": context_info::memory_type(path),
                        "load_reason": "session_start",
                    }),
                )
            }))
            .await;
        }
        self.skills = skills;
        let context = match &self.record.saved_context {
            Some(saved) => saved.clone(),
            None => format!(
                "{}{}{memory}{}",
                context_info::facts(
                    &self.cwd,
                    &self.tooling.workspace.additional_dirs,
                    &self.config.model,
                    &date
                ),
                status.unwrap_or_default(),
                crate::skills::context_list(&self.skills)
            ),
        };
        self.config.user_context = Some(context);
        self.offer_skills();
        // The start-up is done: the read-only commands' sandbox starts beside the first
        // request rather than competing with it.
        self.tooling.gate.prestart_sandbox();
        tracing::debug!(target: "timeline", "user context gathered");
    }

    /// Offers the Skill tool with the skills found, when there are any and the rules let
    /// the model have it.
    fn offer_skills(&mut self) {
        if !self.skills.is_empty() && self.tooling.gate.offers("Skill", &[]) {
            let tool = Arc::new(tools::skills::SkillTool::new(self.skills.clone()));
            self.tool_names.push("Skill".to_owned());
            self.tooling
                .tools
                .push(hooks::ToolHooks::wrap(&self.tooling.hooks, tool));
        }
    }

    /// Whether this session has a transcript file (it is created by the first turn).
    pub fn has_transcript(&self) -> bool {
        self.record.transcript.is_some() || self.record.path.is_file()
    }

    /// The history so far.
    pub fn history(&self) -> &[MessageParam] {
        &self.record.history
    }

    /// Leaves this session's history behind and starts a new, empty session (the
    /// interactive `/clear`). The old session file stays where it is.
    pub fn clear(&mut self) {
        self.new_file();
        self.record.replace(Vec::new());
        self.pending.context.clear();
        self.restore_todos();
    }

    /// The model's task list now (a resumed session's as it left it).
    pub fn todos(&self) -> Vec<tools::todo::Task> {
        self.tooling.gate.todo_list().items()
    }

    /// The model's task list itself, to show it as it changes during a turn.
    pub fn todo_list(&self) -> tools::todo::TodoList {
        self.tooling.gate.todo_list()
    }

    /// Rebuilds the task list from the history (after it was replaced: resume, rewind,
    /// `/clear`): the successful calls of the list's tools, replayed in order.
    fn restore_todos(&self) {
        let history = &self.record.history;
        let list = self.tooling.gate.todo_list();
        list.clear();
        let succeeded: std::collections::HashSet<&protocol::ToolUseId> = history
            .iter()
            .flat_map(|message| message.content.iter())
            .filter_map(|block| match block {
                protocol::ContentBlock::ToolResult(result) if result.is_error != Some(true) => {
                    Some(&result.tool_use_id)
                }
                _ => None,
            })
            .collect();
        for tool_use in history
            .iter()
            .flat_map(|message| message.content.iter())
            .filter_map(protocol::ContentBlock::as_tool_use)
            .filter(|tool_use| tools::todo::changes_the_list(&tool_use.name))
            .filter(|tool_use| succeeded.contains(&tool_use.id))
        {
            list.replay(&tool_use.name, &tool_use.input);
        }
    }

    /// Goes on in a new session that begins with this one's history, as `--fork-session`
    /// starts one: a new id and transcript file, which gets the history when its first turn
    /// starts; the old file stays as it was. The context memory carries over (the same
    /// history, the same prompt-cache prefix).
    pub fn fork(&mut self) {
        self.new_file();
        self.record.copy_history = !self.record.history.is_empty();
    }

    /// The transcript file (written once the first turn starts).
    pub fn transcript_path(&self) -> &Path {
        &self.record.path
    }

    /// A new session id and transcript file, nothing written yet.
    fn new_file(&mut self) {
        self.session_id = uuid::Uuid::new_v4().to_string();
        self.record.path = self
            .record
            .sessions
            .join(format!("{}.jsonl", self.session_id));
        self.record.transcript = None;
        self.record.journal.detach();
        self.record.turns = 0;
        self.record.copy_history = false;
        self.record.context_saved = false;
        self.tooling
            .hooks
            .env()
            .set_session(self.session_id.clone(), self.record.path.clone());
    }

    /// The session's turns and rewinds as its file records them (`None` before its first
    /// turn).
    ///
    /// # Errors
    ///
    /// When the file cannot be read.
    pub fn timeline(&self) -> anyhow::Result<Option<crate::checkpoints::Timeline>> {
        if !self.has_transcript() {
            return Ok(None);
        }
        crate::checkpoints::Timeline::read(&self.record.path).map(Some)
    }

    /// Rewinds the session ([`crate::checkpoints::rewind`]); a rewound conversation is the
    /// history from now on.
    ///
    /// # Errors
    ///
    /// As [`crate::checkpoints::rewind`].
    pub fn rewind(
        &mut self,
        target: crate::checkpoints::Target,
        scope: Option<crate::checkpoints::Scope>,
        overwrite: &mut dyn FnMut(&[&crate::checkpoints::FilePlan]) -> crate::checkpoints::Decision,
    ) -> anyhow::Result<crate::checkpoints::Report> {
        let transcript = self.transcript()?.clone();
        let report = crate::checkpoints::rewind(&transcript, target, scope, overwrite)?;
        if let Some(event) = report.history_event() {
            self.record.apply(&event);
            self.restore_todos();
        }
        Ok(report)
    }

    /// Leaves this session for the earlier one in `path` (the interactive `/resume`): its
    /// history, id, turns and the user context it sent. The current session file stays.
    ///
    /// # Errors
    ///
    /// When the file does not load, or its session is in use by another agent.
    pub fn switch_to(&mut self, path: &Path) -> anyhow::Result<()> {
        let loaded = transcript::load(path)?;
        let id = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .filter(|stem| is_session_id(stem))
            .context("the file's name is not a session id")?
            .to_owned();
        // Taken before anything changes: another agent writing it refuses the switch.
        let transcript = Transcript::open(path.to_path_buf(), id.clone(), &self.cwd)?;
        transcript.set_entrypoint(if self.mcp.headless { "sdk-cli" } else { "cli" });
        self.session_id = id;
        self.record.path = path.to_path_buf();
        self.record.journal.attach(transcript.clone());
        self.record.transcript = Some(transcript);
        self.record.turns = loaded.turns;
        self.record.copy_history = false;
        self.record.replace(loaded.messages);
        self.record.context_saved = loaded.user_context.is_some();
        if let Some(context) = loaded.user_context {
            self.config.user_context = Some(context);
        }
        self.config.last_request = loaded.last_activity;
        self.tooling
            .hooks
            .env()
            .set_session(self.session_id.clone(), self.record.path.clone());
        self.restore_todos();
        Ok(())
    }

    /// The `/status` report: model, mode, folder and whether it is trusted, session,
    /// sandbox, MCP servers and tools, a line each (safe to print).
    pub fn status_report(&self) -> String {
        let servers = self.mcp_status();
        let connected = servers
            .iter()
            .filter(|(_, status)| *status == "connected")
            .count();
        format!(
            "Model: {}\nPermission mode: {}\nFolder: {} ({})\nSession: {}{}\nSandbox: {}\nMCP servers: {} ({} connected)\nTools: {}",
            render::printable(self.model(), false),
            self.mode_name(),
            render::printable(&self.cwd().to_string_lossy(), false),
            if self.trusted() {
                "trusted"
            } else {
                "not trusted: its hooks, env and allow rules are ignored"
            },
            self.session_id(),
            if self.has_transcript() {
                ""
            } else {
                " (nothing saved yet)"
            },
            self.sandbox().describe(),
            servers.len(),
            connected,
            self.tool_names().len(),
        )
    }

    /// The `/mcp` report: each MCP server with its status and tools, a line each (safe to
    /// print).
    pub fn mcp_report(&self) -> String {
        let servers = self.mcp_status();
        if servers.is_empty() {
            return "No MCP servers. Add one with `agent mcp add NAME -- COMMAND ARGS...`, or in .mcp.json (trusted folders).".to_owned();
        }
        let mut lines = Vec::new();
        for (name, status) in servers {
            let prefix = format!("{}__", mcp::server_prefix(&name));
            let tools: Vec<&str> = self
                .tool_names()
                .iter()
                .filter_map(|tool| tool.strip_prefix(&prefix))
                .collect();
            lines.push(format!(
                "{}: {status}{}",
                render::printable(&name, false),
                if tools.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", render::printable(&tools.join(", "), false))
                }
            ));
        }
        lines.join("\n")
    }

    /// The model's context window, in tokens.
    pub fn context_window(&self) -> u64 {
        self.config.context.levels.context_window.0
    }

    /// The history's size at which it is compacted (L3), in tokens.
    pub fn autocompact_at(&self) -> u64 {
        self.config.context.levels.autocompact_at.0
    }

    /// The permission mode in force, as Claude Code spells it.
    pub fn mode_name(&self) -> &'static str {
        self.tooling.gate.mode().as_str()
    }

    /// Runs a command the user typed (`!command`), with no question: as in the user's own
    /// shell (unsandboxed, their environment less the API keys), or in the sandbox an
    /// approved Bash call gets when the user's settings say `sandbox.userCommands:
    /// "sandboxed"`; a deny rule still refuses it. Its input and output go to the
    /// model with the next prompt, as Claude Code's bash mode sends them (`<bash-input>`,
    /// `<bash-stdout>`, `<bash-stderr>`). Returns the output as the Bash tool gives it and
    /// whether it failed.
    ///
    /// # Errors
    ///
    /// A deny rule refusing the command.
    pub async fn run_user_command(
        &mut self,
        command: &str,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(String, bool)> {
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = format!(
            "user_bash_{}",
            RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let tool = self
            .tooling
            .gate
            .user_command(&id, command)
            .map_err(|reason| anyhow::anyhow!("{reason}"))?;
        let mut context = executor::ToolContext::detached(
            id.as_str().into(),
            Arc::clone(&self.tooling.workspace),
        );
        context.cancel = cancel.child_token();
        let input = serde_json::json!({ "command": command });
        let (text, stdout, stderr, failed) = match tool.call(input, context).await {
            Ok(output) => {
                let text = output.content.text();
                let field = |name: &str| {
                    output
                        .structured
                        .as_ref()
                        .and_then(|structured| structured.get(name))
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                };
                let stdout = field("stdout").unwrap_or_else(|| text.clone());
                let stderr = field("stderr").unwrap_or_default();
                (text, stdout, stderr, output.is_error)
            }
            Err(error) => {
                let text = error.to_string();
                (text.clone(), String::new(), text, true)
            }
        };
        self.pending
            .context
            .push(protocol::ContentBlock::text(format!(
                "<bash-input>{}</bash-input>",
                neutralize_tags(command)
            )));
        self.pending
            .context
            .push(protocol::ContentBlock::text(format!(
                "<bash-stdout>{}</bash-stdout><bash-stderr>{}</bash-stderr>",
                neutralize_tags(&stdout),
                neutralize_tags(&stderr)
            )));
        Ok((text, failed))
    }

    /// Reads the files the prompt mentions (`@path`, `@"a path with spaces"`, relative to
    /// the working directory) with the Read tool, as the user's own reads (and attaches the
    /// MCP resources `@server:uri` names, their text in a reminder): each goes into
    /// the prompt's message as Claude Code sends one (a `<system-reminder>` saying the Read
    /// tool was called with the file, then one with its result), and counts as read, so an
    /// Edit of it may follow. A mention that is not a file is left as text. Returns a line
    /// for the screen per file attached or refused.
    pub async fn attach_mentions(&mut self, prompt: &str) -> Vec<String> {
        let mut notes = Vec::new();
        for mention in mentions(prompt) {
            let path = self.cwd.join(&mention);
            if !path.is_file() {
                if let Some(note) = self.attach_resource(&mention).await {
                    notes.push(note);
                }
                continue;
            }
            // A mention reads a file whole: a big one is the model's to read in parts (an
            // image is scaled to fit, so it may be larger).
            let size = path.metadata().map_or(0, |meta| meta.len());
            let image = is_image(&path);
            let limit = if image {
                tools::media::MAX_FILE_BYTES
            } else {
                MENTION_MAX_BYTES
            };
            if size > limit {
                notes.push(format!(
                    "@{mention}: not attached: {size} bytes (at most {limit}); ask the model to read the part you need"
                ));
                continue;
            }
            let path = path.to_string_lossy().into_owned();
            let tool = match self.tooling.gate.user_read(&path) {
                Ok(tool) => tool,
                Err(reason) => {
                    notes.push(format!("@{mention}: not attached: {reason}"));
                    continue;
                }
            };
            let input = serde_json::json!({ "file_path": path });
            let context = executor::ToolContext::detached(
                format!("user_read_{}", notes.len()).as_str().into(),
                Arc::clone(&self.tooling.workspace),
            );
            match tool.call(input.clone(), context).await {
                Ok(output) => {
                    let text = output.content.text();
                    self.pending
                        .context
                        .push(protocol::ContentBlock::text(format!(
                            "<system-reminder>\nCalled the Read tool with the following input: {input}\n</system-reminder>"
                        )));
                    self.pending
                        .context
                        .push(protocol::ContentBlock::text(format!(
                            "<system-reminder>\nResult of calling the Read tool: {}\n</system-reminder>",
                            serde_json::Value::String(neutralize_tags(&text))
                        )));
                    // An image's or a PDF's own block follows, as the model sees a pasted one.
                    if let protocol::ToolResultContent::Blocks(blocks) = output.content {
                        self.pending
                            .context
                            .extend(blocks.into_iter().filter(|block| {
                                matches!(
                                    block,
                                    protocol::ContentBlock::Image(_)
                                        | protocol::ContentBlock::Document(_)
                                )
                            }));
                    }
                    notes.push(format!("@{mention}: attached"));
                }
                Err(error) => notes.push(format!("@{mention}: not attached: {error}")),
            }
        }
        notes
    }

    /// `@server:uri` in a prompt: the MCP resource `uri` of the connected server `server`,
    /// attached as Claude Code attaches one (its text in a reminder, an image as itself).
    /// `None` when the mention names no connected server (it stays text); else a line for
    /// the screen.
    async fn attach_resource(&mut self, mention: &str) -> Option<String> {
        let (name, uri) = mention.split_once(':')?;
        let server = self
            .mcp
            .pool
            .as_ref()?
            .connected()
            .into_iter()
            .find(|server| server.name == name)?;
        if self
            .tooling
            .gate
            .denies_whole_server(&mcp::server_prefix(name))
        {
            return Some(format!(
                "@{mention}: not attached: a deny rule refuses the MCP server {}",
                render::printable(name, false)
            ));
        }
        let result = match server.read_resource(uri).await {
            Ok(result) => result,
            Err(error) => {
                return Some(format!(
                    "@{mention}: not attached: {}",
                    render::printable(&error, false)
                ));
            }
        };
        let output = mcp::resources::resource_output(&result);
        let protocol::ToolResultContent::Blocks(blocks) = output.content else {
            return None;
        };
        for block in blocks {
            match block {
                protocol::ContentBlock::Text(text) => {
                    self.pending
                        .context
                        .push(protocol::ContentBlock::text(format!(
                            "<system-reminder>\nThe user attached the MCP resource {name}:{uri}:\n{}\n</system-reminder>",
                            neutralize_tags(&text.text)
                        )));
                }
                image => self.pending.context.push(image),
            }
        }
        Some(format!("@{mention}: attached"))
    }

    /// An image file the user pasted into the prompt (`placeholder`, such as `[Image #1]`,
    /// stands for it in the text): attached to the prompt's message as the image itself,
    /// after a line naming it, wherever the file is (the user chose it; a model's read
    /// stays within the workspace). `path` may start with `~/`. Returns a line for the
    /// screen.
    pub fn attach_image_file(&mut self, placeholder: &str, path: &str) -> String {
        let file = match path.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME").map_or_else(
                || PathBuf::from(path),
                |home| PathBuf::from(home).join(rest),
            ),
            None => PathBuf::from(path),
        };
        match tools::media::read_file(&file) {
            Ok(output) => {
                self.pending
                    .context
                    .push(protocol::ContentBlock::text(format!(
                        "{placeholder} is the image file {}",
                        file.display()
                    )));
                if let protocol::ToolResultContent::Blocks(blocks) = output.content {
                    self.pending.context.extend(
                        blocks
                            .into_iter()
                            .filter(|block| matches!(block, protocol::ContentBlock::Image(_))),
                    );
                }
                format!("{placeholder}: attached {}", file.display())
            }
            Err(error) => format!("{placeholder}: not attached: {error}"),
        }
    }

    /// Where lines the user enters during a turn come from: each is sent with the turn's
    /// next request (after a tool batch), or, when the turn ends first, as the next prompt.
    pub fn set_steering(&mut self, steering: Steering) {
        self.pending.steering = Some(steering);
    }

    /// The tools named in `names` (those the session has) as an MCP server for another
    /// program to call (`agent mcp serve`), named `server` (name, version) in the
    /// handshake: each call decided as the model's are (the rules, the mode and the
    /// PreToolUse hooks; headless, what would be asked is refused with its reason) and run in
    /// the session's workspace and sandbox. The session's transcript is opened: what the
    /// tools change is checkpointed there, as in any session (`agent rewind` undoes it).
    ///
    /// # Errors
    ///
    /// The transcript cannot be created.
    pub fn tool_server(
        &mut self,
        names: &[&str],
        server: (&str, &str),
    ) -> anyhow::Result<mcp::serve::ToolServer> {
        self.transcript()?;
        let tools = self
            .tooling
            .tools
            .iter()
            .filter(|tool| names.contains(&tool.name()))
            .cloned()
            .collect();
        Ok(mcp::serve::ToolServer::new(
            tools,
            Arc::clone(&self.tooling.permissions),
            Arc::clone(&self.tooling.workspace),
            server,
        ))
    }

    /// The session's permission gate (its mode can be switched while a turn runs).
    pub fn permission_gate(&self) -> Arc<tools::PermissionGate> {
        Arc::clone(&self.tooling.gate)
    }

    /// The water levels of the model in use (window, autocompact and blocking levels).
    pub fn levels(&self) -> context::WaterLevels {
        self.config.context.levels
    }

    /// The permission rules in force, each with where it came from: `(kind, rule, origin)`,
    /// kind `allow`, `ask` or `deny`; origin a settings file or the flag.
    pub fn rules(&self) -> &[(&'static str, String, String)] {
        &self.tooling.rule_origins
    }

    /// Resolves a model name as [`Session::set_model`] would, without switching: the model
    /// id, or why the name does not resolve. Usable while a turn runs.
    pub fn model_resolver(&self) -> ModelResolver {
        let models = self.llm.settings.clone();
        Arc::new(move |name: &str| {
            models
                .resolve(name)
                .map(|(id, _)| id)
                .map_err(|error| format!("{error:#}"))
        })
    }

    /// What `/model` offers to choose from, as `(name, model id, what it is)`: Claude's
    /// aliases as this session resolves them (the `ANTHROPIC_DEFAULT_*_MODEL` variables
    /// apply), the models the settings' `models` names, and the model in use when it is none
    /// of those. An OpenAI-compatible provider has no aliases: its configured models and
    /// the one in use.
    pub fn model_choices(&self) -> Vec<(String, String, &'static str)> {
        self.llm.settings.choices(&self.model)
    }

    /// Switches the model for the next requests (`/model NAME`): resolved as `--model` is
    /// (aliases, the settings' `models`), with its window, output cap and water levels.
    /// Returns the model id.
    ///
    /// # Errors
    ///
    /// When the name does not resolve to a model of this provider.
    pub fn set_model(&mut self, name: &str) -> anyhow::Result<String> {
        let (id, info) = self.llm.settings.resolve(name)?;
        self.llm.settings.apply(&mut self.config, id.clone(), &info);
        self.model.clone_from(&id);
        Ok(id)
    }

    /// Compacts the history now (`/compact [FOCUS]`): the earlier part summarized by the
    /// session's model (with the user's `focus` added to the summary prompt), the recent
    /// messages kept, as L3 does at its threshold; persisted as a `manual` compaction.
    /// Returns the estimated tokens before and after.
    ///
    /// # Errors
    ///
    /// Nothing to compact (too short a history), the summary request failing, or the
    /// transcript not written.
    pub async fn compact(
        &mut self,
        focus: Option<String>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(u64, u64)> {
        let mut manager = context::ContextManager::new(self.config.context.clone());
        let summarizer = hooks::HookedSummarizer::wrap(
            Arc::new(
                adapter::ProviderSummarizer::new(self.llm.client.clone(), self.model.clone())
                    .with_focus(focus.clone()),
            ),
            &self.tooling.hooks,
            true,
            focus,
            &self.model,
        );
        let files = tooling::WorkspaceFiles::new(Arc::clone(&self.tooling.workspace));
        let mut messages = self.record.history.clone();
        let prepared = tokio::select! {
            biased;
            () = cancel.cancelled() => anyhow::bail!("interrupted; nothing was compacted"),
            prepared = manager.compact_now(
                &mut messages,
                context::Tokens::ZERO,
                summarizer.as_ref(),
                &files,
                self.record.fork.clone(),
            ) => prepared.map_err(|error| anyhow::anyhow!("{error}"))?,
        };
        let before = prepared
            .events
            .iter()
            .find_map(|event| match event {
                context::ContextEvent::Compacted { before, .. } => Some(before.0),
                _ => None,
            })
            .unwrap_or_default();
        let event = loop_core::HistoryEvent::Compacted {
            trigger: loop_core::CompactTrigger::Manual,
            pre_tokens: before,
            messages,
        };
        self.transcript()?
            .record(&event)
            .context("writing the compaction to the transcript")?;
        self.record.apply(&event);
        Ok((before, prepared.tokens.0))
    }

    /// The session id (the transcript's file name without `.jsonl`).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The model asked first (an id, aliases resolved).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// How Bash commands are sandboxed.
    pub fn sandbox(&self) -> &tools::SandboxConfig {
        &self.sandbox
    }

    /// Whether the folder is trusted (its project settings apply in full).
    pub fn trusted(&self) -> bool {
        self.trusted
    }

    /// The names of the tools the model may call.
    pub fn tool_names(&self) -> &[String] {
        &self.tool_names
    }

    /// The custom slash commands (`.claude/commands/`, ...).
    pub fn commands(&self) -> &[crate::commands::Command] {
        &self.commands
    }

    /// `--json-schema`'s structured output, as far as it got.
    pub fn structured(&self) -> Option<&crate::structured::Shared> {
        self.structured.as_ref()
    }

    /// Where the API key came from (`system/init`'s `apiKeySource`).
    pub fn api_key_source(&self) -> &str {
        &self.api_key_source
    }

    /// The skills, once the context is gathered.
    pub fn skills(&self) -> &[tools::skills::Skill] {
        &self.skills
    }

    /// The agents the Task tool offers.
    pub fn agents(&self) -> &[loop_core::subagent::AgentDefinition] {
        &self.agents
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The transcript, opened (and seeded with a foreign history) on first use.
    fn transcript(&mut self) -> anyhow::Result<&mut Transcript> {
        let transcript = match self.record.transcript.take() {
            Some(transcript) => transcript,
            None => {
                let transcript =
                    Transcript::open(self.record.path.clone(), self.session_id.clone(), &self.cwd)?;
                transcript.set_entrypoint(if self.mcp.headless { "sdk-cli" } else { "cli" });
                if !self.record.context_saved
                    && let Some(context) = &self.config.user_context
                {
                    transcript.append_user_context(context)?;
                    self.record.context_saved = true;
                }
                if std::mem::take(&mut self.record.copy_history) {
                    transcript.append_history(&self.record.history)?;
                }
                self.record.journal.attach(transcript.clone());
                transcript
            }
        };
        Ok(self.record.transcript.insert(transcript))
    }

    /// The loop's collaborators for one turn; subagents' events go to `subagent_events`.
    fn deps(&self, subagent_events: mpsc::UnboundedSender<subagents::SubagentEvent>) -> Deps {
        // The mode the user chose last (Shift+Tab, an approved plan) for this turn's subagents.
        let mut recipe = self.tooling.recipe.clone();
        recipe.mode = self.tooling.gate.mode();
        // In a worktree, so are the subagents (isolated ones get worktrees of their own).
        if let Some(entered) = self.tooling.gate.entered() {
            recipe.workspace = entered;
            recipe.journal = None;
            recipe.snapshots = None;
        }
        let host = subagents::Host::new(subagents::HostParts {
            recipe,
            client: self.llm.client.clone(),
            fallback: self.llm.fallback.clone(),
            models: self.llm.settings.clone(),
            definitions: Arc::clone(&self.agents),
            extra_tools: self.tooling.tools
                [self.tooling.builtin_tools.min(self.tooling.tools.len())..]
                .to_vec(),
            events: subagent_events,
            transcripts: self.record.path.with_extension("").join("subagents"),
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            trusted: self.trusted,
            skills_context: crate::skills::context_list(&self.skills),
            spend: self.tooling.spend.clone(),
        });
        let fork_point = Arc::new(loop_core::subagent::ForkPoint::new());
        let mut tools = self.tooling.tools.clone();
        if self.tooling.task_offered {
            tools.extend(host.task_tool(self.config.clone(), Arc::clone(&fork_point)));
        }
        Deps {
            model: Arc::new(
                adapter::ProviderModel::with_fallback(
                    self.llm.client.clone(),
                    self.llm.fallback.clone(),
                )
                .with_text_only(self.llm.settings.text_only.clone()),
            ),
            tools,
            permissions: Arc::clone(&self.tooling.permissions),
            summarizer: hooks::HookedSummarizer::wrap(
                Arc::new(adapter::ProviderSummarizer::new(
                    self.llm.client.clone(),
                    self.model.clone(),
                )),
                &self.tooling.hooks,
                false,
                None,
                &self.model,
            ),
            result_store: Box::new(tooling::DirStore::new(self.tooling.results_dir.clone())),
            files: Arc::new(tooling::WorkspaceFiles::new(Arc::clone(
                &self.tooling.workspace,
            ))),
            stop_hook: Arc::clone(&self.tooling.stop_hook),
            workspace: Arc::clone(&self.tooling.workspace),
            tool_source: self
                .mcp_tools()
                .map(|source| Arc::new(source) as Arc<dyn loop_core::ToolSource>),
            fork_point: Some(fork_point),
            attachments: Some(Arc::new(SessionAttachments {
                watch: self.tooling.watch.clone(),
                background: self.tooling.recipe.background.clone(),
                hooks: self.tooling.hooks.clone(),
                late: Arc::clone(&self.pending.late),
                steering: self.pending.steering.clone(),
            })),
            spend: self.tooling.spend.clone(),
        }
    }

    /// Sends `message` as a user would: a message of one text block naming a custom
    /// command or skill (`/name arguments`) runs it ([`Session::invoke`]), anything else is
    /// the next user message ([`Session::turn_message`]).
    ///
    /// # Errors
    ///
    /// As [`Session::invoke`] and [`Session::turn_message`].
    pub async fn send(
        &mut self,
        message: MessageParam,
        observer: &mut dyn crate::Observer,
        cancel: CancellationToken,
    ) -> anyhow::Result<LoopOutcome> {
        if let [protocol::ContentBlock::Text(text)] = message.content.as_slice()
            && let Some(invocation) = self.expand_command(&text.text)
        {
            return self.invoke(invocation, observer, cancel).await;
        }
        self.turn_message(message, observer, cancel).await
    }

    /// The names the user may type after `/` besides the built-in commands: the custom
    /// commands, then the skills (skills are slash commands too, as in Claude Code).
    pub fn slash_command_names(&self) -> Vec<String> {
        self.commands
            .iter()
            .map(|command| command.name.clone())
            .chain(self.skill_names())
            .collect()
    }

    /// The skills' names.
    pub fn skill_names(&self) -> Vec<String> {
        self.skills.iter().map(|skill| skill.name.clone()).collect()
    }

    /// Runs one turn: `prompt` as the next user message, then the loop until it ends. Every
    /// message is appended to the transcript as it completes; `observer` sees every event.
    /// The history afterwards is the one the loop left (valid even after an abort).
    ///
    /// # Errors
    ///
    /// When the transcript cannot be created or the loop task panicked (the history is then
    /// left as it was before the turn, plus the prompt). A transcript write failing in the
    /// middle of a turn is reported on stderr and the turn goes on.
    pub async fn turn(
        &mut self,
        prompt: String,
        observer: &mut dyn crate::Observer,
        cancel: CancellationToken,
    ) -> anyhow::Result<LoopOutcome> {
        self.turn_message(MessageParam::user_text(prompt), observer, cancel)
            .await
    }

    /// [`Session::turn`] with a user message of any content (text and images, from
    /// `--input-format stream-json`).
    ///
    /// # Errors
    ///
    /// As [`Session::turn`].
    pub async fn turn_message(
        &mut self,
        mut user: MessageParam,
        observer: &mut dyn crate::Observer,
        cancel: CancellationToken,
    ) -> anyhow::Result<LoopOutcome> {
        self.join_mcp_tools();
        self.follow_thinking_switch();
        // Ctrl-C while the hooks run stops them (their process groups are killed) and the
        // prompt is not sent.
        tokio::select! {
            biased;
            () = cancel.cancelled() => {
                return Err(PromptBlocked {
                    event: hooks::Event::UserPromptSubmit.name(),
                    reason: "interrupted while the hooks ran; the prompt was not sent".to_owned(),
                }
                .into());
            }
            checked = self.prompt_hooks(&mut user) => checked?,
        }
        // In plan mode the model is told so with each prompt, as Claude Code tells it: the
        // gate refuses changes either way, but a model that knows plans instead of trying.
        if self.tooling.gate.mode() == tools::PermissionMode::Plan {
            user.content
                .push(protocol::ContentBlock::text(PLAN_MODE_REMINDER.to_owned()));
        }
        self.begin_turn(user).await?;
        // A resumed history may end with a user message: merge, keep alternation.
        let mut repairs = Vec::new();
        let history =
            context::normalize_messages(std::mem::take(&mut self.record.history), &mut repairs);
        self.record.history = history.clone();

        let (subagent_sender, mut subagent_events) = mpsc::unbounded_channel();
        // A PermissionRequest hook may interrupt the turn (`interrupt: true`).
        let _interruptible = TurnSlot::fill(&self.tooling.hooks.env().turn, &cancel);
        let (handle, mut events) = spawn_loop(
            self.config.clone(),
            self.deps(subagent_sender),
            loop_core::History {
                messages: history,
                memory: self.record.memory.clone(),
            },
            cancel,
        );
        // Questions asked during the turn wait for the observer to draw what came before
        // them (the events are read first: `biased`).
        let (sync_sender, mut sync) = mpsc::unbounded_channel();
        observer.set_catch_up(Some(sync_sender));
        loop {
            tokio::select! {
                biased;
                event = events.recv() => {
                    let Some(event) = event else { break };
                    let cost = match &event {
                        LoopEvent::History(change) => self.cost_of(change),
                        _ => None,
                    };
                    let transcript = self.transcript()?;
                    // Only history events reach the transcript: what is saved is what the
                    // loop kept.
                    if let LoopEvent::History(change) = &event
                        && let Err(error) = transcript.record_priced(change, cost)
                    {
                        self.notices.say(&format!("transcript: {error:#}"));
                    }
                    observer.event(&event);
                }
                Some(event) = subagent_events.recv() => observer.subagent(&event),
                Some(done) = sync.recv() => {
                    observer.flush();
                    let _ = done.send(());
                }
            }
        }
        observer.set_catch_up(None);
        while let Ok(event) = subagent_events.try_recv() {
            observer.subagent(&event);
        }
        let mut outcome = handle.await.context("the agent loop panicked")?;
        self.record_turn_changes().await;
        if let loop_core::Terminal::ModelError(error) = &outcome.terminal {
            self.tooling
                .hooks
                .run(
                    hooks::Event::StopFailure,
                    &[],
                    serde_json::json!({
                        "error": stop_failure_kind(error),
                        "error_details": error.to_string(),
                    }),
                )
                .await;
        }
        self.record.history = std::mem::take(&mut outcome.messages);
        self.record.memory = outcome.memory.clone();
        self.record.fork = outcome.fork.clone();
        self.config.last_request = outcome.last_request.or(self.config.last_request);
        Ok(outcome)
    }
}

impl Session {
    /// What the turn's tools changed in the workspace, by its snapshots, into the transcript
    /// ([`crate::checkpoints::record_changes`]); a failure is said, never fatal.
    async fn record_turn_changes(&mut self) {
        let Some(snapshots) = self.record.snapshots.clone() else {
            return;
        };
        let changes = match snapshots.end().await {
            Ok(Some(changes)) => changes,
            Ok(None) => return,
            Err(error) => {
                self.notices.say(&format!("workspace snapshot: {error}"));
                return;
            }
        };
        let turn = self.record.turns;
        let journal = Arc::clone(&self.record.journal);
        let recorded = self.transcript().and_then(|transcript| {
            crate::checkpoints::record_changes(transcript, &journal, turn, &changes)
        });
        if let Err(error) = recorded {
            self.notices
                .say(&format!("recording the turn's changes: {error:#}"));
        }
    }

    /// The UserPromptSubmit hooks on `user` (its text as `prompt`): a block or a
    /// `continue: false` refuses it ([`PromptBlocked`]); their context joins it.
    ///
    /// # Errors
    ///
    /// [`PromptBlocked`] when a hook refused the prompt.
    /// Completes the prompt's message (what the user ran or attached since the last prompt
    /// first, files changed since after) and starts the turn in the transcript (a title a
    /// hook gave, the turn's marker, the message) and the history.
    ///
    /// # Errors
    ///
    /// When the transcript cannot be written.
    async fn begin_turn(&mut self, mut user: MessageParam) -> anyhow::Result<()> {
        // What the user ran (`!command`) or attached (`@file`) since the last prompt goes
        // first, as Claude Code sends it.
        if !self.pending.context.is_empty() {
            let mut content = std::mem::take(&mut self.pending.context);
            content.append(&mut user.content);
            user.content = content;
        }
        // Files read earlier that changed since (the user's editor between turns) are told
        // with the prompt: part of the new message, the cache prefix stays as it was.
        user.content.extend(
            SessionAttachments {
                watch: self.tooling.watch.clone(),
                background: self.tooling.recipe.background.clone(),
                hooks: self.tooling.hooks.clone(),
                late: Arc::clone(&self.pending.late),
                steering: None,
            }
            .reminders(serde_json::Value::Null)
            .await
            .into_iter()
            .map(protocol::ContentBlock::text),
        );
        // The turn begins in the file before its prompt: the point a rewind to the turn
        // before comes back to.
        let turn = self.record.turns + 1;
        let title = self.pending.title.take();
        let transcript = self.transcript()?;
        if let Some(title) = title {
            transcript.append_entry("custom-title", serde_json::json!({"customTitle": title}))?;
        }
        transcript.append_entry(
            "system",
            serde_json::json!({"subtype": crate::transcript::TURN_SUBTYPE, "turn": turn}),
        )?;
        transcript.append_param(&user)?;
        self.record.turns = turn;
        self.record.journal.begin_turn(turn);
        if let Some(snapshots) = &self.record.snapshots {
            snapshots.begin();
        }
        self.record.history.push(user);
        Ok(())
    }

    /// Runs the UserPromptExpansion hooks of a command or skill the user typed, matched
    /// against its name: a block or `continue: false` stops it before anything is sent;
    /// their context goes with its prompt.
    ///
    /// # Errors
    ///
    /// [`PromptBlocked`] when a hook refused the expansion.
    async fn expansion_hooks(&mut self, invocation: &Invocation) -> Result<(), PromptBlocked> {
        if !self.tooling.hooks.has(hooks::Event::UserPromptExpansion) {
            return Ok(());
        }
        let verdict = self
            .tooling
            .hooks
            .run(
                hooks::Event::UserPromptExpansion,
                &[&invocation.name],
                serde_json::json!({
                    "expansion_type": "slash_command",
                    "command_name": invocation.name,
                    "command_args": invocation.arguments,
                    "command_source": invocation.source,
                    "prompt": invocation.typed(),
                }),
            )
            .await;
        let refusals = verdict.refusals();
        if !refusals.is_empty() {
            return Err(PromptBlocked {
                event: hooks::Event::UserPromptExpansion.name(),
                reason: format!(
                    "{} (the prompt was: {})",
                    refusals.join("; "),
                    invocation.typed()
                ),
            });
        }
        self.pending.context.extend(
            verdict
                .context
                .iter()
                .map(|context| hook_context(hooks::Event::UserPromptExpansion, context)),
        );
        Ok(())
    }

    async fn prompt_hooks(&mut self, user: &mut MessageParam) -> Result<(), PromptBlocked> {
        if !self.tooling.hooks.has(hooks::Event::UserPromptSubmit) {
            return Ok(());
        }
        let prompt: Vec<&str> = user
            .content
            .iter()
            .filter_map(|block| match block {
                protocol::ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect();
        let verdict = self
            .tooling
            .hooks
            .run(
                hooks::Event::UserPromptSubmit,
                &[],
                serde_json::json!({"prompt": prompt.join("\n")}),
            )
            .await;
        let refusals = verdict.refusals();
        if !refusals.is_empty() {
            return Err(PromptBlocked {
                event: hooks::Event::UserPromptSubmit.name(),
                reason: refusals.join("\n"),
            });
        }
        user.content.extend(
            verdict
                .context
                .iter()
                .map(|context| hook_context(hooks::Event::UserPromptSubmit, context)),
        );
        if verdict.session_title.is_some() {
            self.pending.title = verdict.session_title;
        }
        Ok(())
    }
}

/// How long a headless run waits for its background tasks before it stops them: 30 s
/// (`AGENT_BACKGROUND_WAIT_MS` changes it).
pub const BACKGROUND_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the prompt waits before the Notification hooks hear that the agent waits for
/// the user: 60 s (Claude Code's `messageIdleNotifThresholdMs` default).
pub const IDLE_NOTIFICATION_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The name of the file SessionStart hooks get as `CLAUDE_ENV_FILE`, in the session's
/// folder.
const ENV_FILE: &str = "env-file.sh";

/// Why a session ends, as its SessionEnd hooks are told (`reason`, one of Claude Code's
/// `EXIT_REASONS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// `/clear` started a new session.
    Clear,
    /// The user left the interactive session (`/exit`, Ctrl-D, Ctrl-C twice).
    PromptInputExit,
    /// Anything else: a headless run ended.
    Other,
}

impl EndReason {
    /// The name hooks get: `clear`, `prompt_input_exit`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clear => "clear",
            Self::PromptInputExit => "prompt_input_exit",
            Self::Other => "other",
        }
    }
}

/// Holds the running turn's cancellation in a hook environment's slot
/// ([`hooks::HookEnv::turn`]) until dropped.
struct TurnSlot(Arc<std::sync::Mutex<Option<CancellationToken>>>);

impl TurnSlot {
    fn fill(
        slot: &Arc<std::sync::Mutex<Option<CancellationToken>>>,
        cancel: &CancellationToken,
    ) -> Self {
        *slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cancel.clone());
        Self(Arc::clone(slot))
    }
}

impl Drop for TurnSlot {
    fn drop(&mut self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

/// A UserPromptSubmit hook refused the prompt: nothing was sent or recorded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a {event} hook blocked the prompt: {reason}")]
pub struct PromptBlocked {
    /// The event whose hook refused it: `UserPromptSubmit`, or `UserPromptExpansion` for a
    /// command or skill the user typed.
    pub event: &'static str,
    /// The hooks' reasons, one per line.
    pub reason: String,
}

/// What the model is told with each prompt in plan mode.
const PLAN_MODE_REMINDER: &str = "<system-reminder>\nPlan mode is on: the user wants a plan before anything changes. Read, search and run read-only commands to understand the task, but do not edit or write files, run commands that change anything, or commit. When the plan is ready, call ExitPlanMode with it; nothing is changed until the user approves it.\n</system-reminder>";

/// A hook's context for the model, as the text block Claude Code gives it.
fn hook_context(event: hooks::Event, context: &str) -> protocol::ContentBlock {
    protocol::ContentBlock::text(format!(
        "<system-reminder>\n{} hook additional context: {context}\n</system-reminder>",
        event.name()
    ))
}

/// The `error` of a StopFailure hook's input: Claude Code's `SDKAssistantMessageError`
/// kind of `error`.
fn stop_failure_kind(error: &loop_core::ModelError) -> &'static str {
    use loop_core::ModelError;
    let status = match error {
        ModelError::PromptTooLong(_) | ModelError::Image(_) => return "invalid_request",
        ModelError::Overloaded(_) => return "overloaded",
        ModelError::MaxTokensExhausted(_) => return "max_output_tokens",
        ModelError::Api(failure) => failure.status,
        _ => return "unknown",
    };
    match status {
        Some(401 | 403) => "authentication_failed",
        Some(402) => "billing_error",
        Some(404) => "model_not_found",
        Some(429) => "rate_limit",
        Some(529) => "overloaded",
        Some(400 | 413 | 422) => "invalid_request",
        Some(500..=599) => "server_error",
        _ => "unknown",
    }
}

impl Record {
    /// The history a session starts from (a new one, or the one `options` resume) and its
    /// transcript's place; also the session id and when its last request was answered.
    ///
    /// # Errors
    ///
    /// A session to resume that does not exist or does not load.
    fn open(
        options: &Options,
        cwd: &Path,
        interactive: bool,
    ) -> anyhow::Result<(Self, String, Option<std::time::SystemTime>)> {
        let sessions = transcript::project_dir(cwd)?;
        let shadow = sessions.join("shadow");
        let legacy = transcript::legacy_project_dir(cwd)?;
        let resumed = resume(options, &sessions, legacy.as_deref(), interactive)?;
        let record = Self {
            history: resumed.history,
            memory: context::ContextMemory::default(),
            fork: None,
            sessions,
            path: resumed.path,
            transcript: None,
            journal: Arc::default(),
            // A headless session (no one to ask: `-p`, the SDK's, `mcp serve`) snapshots
            // the workspace only when asked, as Claude Code's (`snapshots::headless_enabled`).
            snapshots: (!options.no_snapshots
                && (interactive || crate::snapshots::headless_enabled()))
            .then(|| Arc::new(crate::snapshots::Turns::new(&shadow, cwd))),
            turns: resumed.turns,
            copy_history: resumed.copy_history,
            // A copied history (a fork, another tool's transcript) starts a file of its own,
            // which gets the context when its first turn writes it.
            context_saved: resumed.user_context.is_some() && !resumed.copy_history,
            saved_context: resumed.user_context,
        };
        Ok((record, resumed.session_id, resumed.last_activity))
    }
}

impl Record {
    /// Applies a change the session makes to its history between runs (`/compact`, a
    /// rewind), as the loop applies its own and a transcript's replay applies both: one
    /// [`loop_core::HistoryEvent::apply`]. A history replaced whole is not the one the
    /// context memory is of: the memory starts afresh.
    fn apply(&mut self, event: &loop_core::HistoryEvent) {
        event.apply(&mut self.history);
        if matches!(
            event,
            loop_core::HistoryEvent::Compacted { .. } | loop_core::HistoryEvent::Rewound { .. }
        ) {
            self.memory = context::ContextMemory::default();
            self.fork = None;
        }
    }

    /// Another history altogether (`/clear`, `/resume`): nothing of the old one is kept.
    fn replace(&mut self, messages: Vec<MessageParam>) {
        self.history = messages;
        self.memory = context::ContextMemory::default();
        self.fork = None;
    }
}

impl McpState {
    /// The servers to start, none started yet.
    fn new(
        servers: Vec<mcp::config::Configured>,
        settings: &settings::Settings,
        extra_roots_pem: Arc<[u8]>,
        (headless, options): (bool, &Options),
    ) -> Self {
        let host = options.host.clone();
        Self {
            servers,
            pool: None,
            wait: settings
                .other
                .get("mcpStartupWaitMs")
                .and_then(serde_json::Value::as_u64),
            extra_roots_pem,
            headless,
            reported_failures: std::collections::HashSet::new(),
            host: host.map(|host| Arc::new(host) as Arc<dyn mcp::HostServers>),
        }
    }
}

impl Default for Pending {
    fn default() -> Self {
        Self {
            steering: None,
            context: Vec::new(),
            late: Arc::new(crate::prefetch::Late::none()),
            status: None,
            title: None,
        }
    }
}

impl ToolState {
    /// The session's tools and gate, built from one recipe that every subagent's are built
    /// from too: the built-in tools confined to the workspace, the permission rules, the
    /// hooks around them, ExitPlanMode where a plan can be approved (interactive) or must be
    /// refused with how to go on (headless plan mode), and `--json-schema`'s tool. The
    /// dollar budget (`spend`) is set by the caller. Also returns the structured output, as
    /// it will be shared.
    ///
    /// # Errors
    ///
    /// A folder or rule that is not valid, or a schema that does not load, each named.
    fn build(
        (options, settings, workspace): (&Options, &settings::Settings, Arc<Workspace>),
        (session_id, record): (&str, &Record),
        mode: tools::PermissionMode,
        prompter: Option<Arc<dyn tools::Prompter>>,
        (sandbox, web): (tools::SandboxConfig, Option<Arc<crate::web::Web>>),
    ) -> anyhow::Result<(Self, Option<crate::structured::Shared>)> {
        let cwd = workspace.cwd.as_path();
        let results_dir = record.sessions.join(session_id).join("tool-results");
        let (rules, rule_origins) = permission_rules(options, settings, cwd);
        let env = command_env(settings);
        let no_hooks = BTreeMap::new();
        let mut hook_env = hook_env(&env, session_id, &record.path, cwd, mode, &options.notices);
        hook_env.http = hooks_transport(options, settings);
        hook_env.http_policy = settings.http_hook_policy();
        // Untrusted, the folder can steer the user's own commands: they run in the sandbox
        // (see `HookEnv::confined`), and what a SessionStart hook would leave for the model's
        // commands is not taken.
        hook_env.confined = !settings.project_trusted;
        hook_env.env_file = settings
            .project_trusted
            .then(|| record.sessions.join(session_id).join(ENV_FILE));
        let runnable = runnable_hooks(settings, &sandbox, &options.notices);
        let hooks = hooks::Hooks::new(
            hook_env,
            if settings.hooks_disabled() {
                &no_hooks
            } else {
                runnable.as_ref().unwrap_or(&settings.hooks)
            },
        );
        let mut recipe = subagents::Recipe {
            workspace: Arc::clone(&workspace),
            mode,
            rules,
            results_dir: results_dir.clone(),
            env,
            withheld_env: provider_key_variables(settings),
            sandbox,
            prompter,
            hooks: hooks.clone(),
            prelude: String::new(),
            journal: Some(Arc::clone(&record.journal) as Arc<dyn tools::WriteJournal>),
            snapshots: record.snapshots.clone(),
            session_mode: None,
            background: background_tasks(&results_dir, &options.notices),
            web,
            editor: options.editor_files.clone(),
        };
        let built = build_tools(&recipe, mode, settings)?;
        let _ = hooks.env().gate.set(Arc::clone(&built.permissions));
        recipe.session_mode = Some(built.permissions.mode_handle());
        let mut tools = built.tools.clone();
        // Never a subagent's ExitPlanMode, EnterPlanMode or AskUserQuestion: they come before
        // the count of built-in tools, which subagents get fresh from the recipe.
        if recipe.prompter.is_some() || mode == tools::PermissionMode::Plan {
            tools.push(recipe.wrap(built.permissions.exit_plan_mode_tool()));
        }
        // The user's own questions: headless, AskUserQuestion is not offered, and a call of it
        // is refused with a result that sends the model on with its own judgment.
        tools.push(
            recipe.wrap(
                built
                    .permissions
                    .ask_user_question_tool(recipe.prompter.is_some()),
            ),
        );
        if recipe.prompter.is_some() {
            tools.push(recipe.wrap(built.permissions.enter_plan_mode_tool()));
        }
        let worktree = crate::worktree::Current::new(
            Arc::clone(&built.permissions),
            hooks.clone(),
            settings.project_trusted,
            Arc::clone(&workspace),
        );
        let (enter, exit) = (
            crate::worktree::EnterWorktreeTool::new(worktree.clone()),
            crate::worktree::ExitWorktreeTool::new(worktree.clone()),
        );
        tools.extend([recipe.wrap(Arc::new(enter)), recipe.wrap(Arc::new(exit))]);
        let chosen = |name: &str| {
            options
                .tools
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == name))
        };
        tools.retain(|tool| offered(&built.permissions, tool.as_ref()) && chosen(tool.name()));
        let mut stop_hook: Arc<dyn StopHook> = if hooks.has(hooks::Event::Stop) {
            Arc::new(hooks::CommandStopHook::new(hooks.clone()))
        } else {
            Arc::new(NoStopHook)
        };
        let structured = structured_output(options, &recipe, &mut tools, &mut stop_hook)?;
        let state = Self {
            builtin_tools: tools.len(),
            task_offered: built.permissions.offers("Task", &["Agent"])
                && (chosen("Task") || chosen("Agent")),
            gate: Arc::clone(&built.permissions),
            watch: built.watch.clone(),
            permissions: Arc::clone(&built.gate),
            tools,
            stop_hook,
            recipe,
            results_dir,
            spend: None,
            rule_origins,
            workspace,
            hooks,
            status_line: settings.status_line.clone().filter(|status_line| {
                status_line.kind == "command" && !settings.hooks_disabled() && runnable.is_none()
            }),
            status_line_failed: Arc::default(),
            idle_after: IDLE_NOTIFICATION_AFTER,
            notify: render::notify::Channel::Disabled,
            theme: None,
            worktree,
        };
        Ok((state, structured))
    }

    /// The names of the tools the model is offered: the tools, then Task where offered.
    fn offered_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .filter(|tool| !tool.hidden())
            .map(|tool| tool.name().to_owned())
            .chain(
                self.task_offered
                    .then(|| loop_core::subagent::TASK_TOOL.to_owned()),
            )
            .collect()
    }
}

/// The workspace: `cwd` and the additional folders. The programs the agent runs itself
/// (bash, git, bwrap) are looked up outside its roots from here on, and the empty sandbox
/// placeholders a killed run left in them are removed.
///
/// # Errors
///
/// An additional folder that does not exist, naming where it was given.
fn workspace(
    options: &Options,
    settings: &settings::Settings,
    cwd: &Path,
) -> anyhow::Result<Arc<Workspace>> {
    let workspace = Workspace {
        cwd: cwd.to_path_buf(),
        additional_dirs: additional_dirs(options, settings, cwd)?,
    };
    let roots: Vec<PathBuf> = std::iter::once(&workspace.cwd)
        .chain(&workspace.additional_dirs)
        .cloned()
        .collect();
    tools::sandbox::env::fix_program_folders(&roots);
    for root in &roots {
        for removed in tools::sandbox::sweep_placeholders(root) {
            options.notices.say(&format!(
                "removed {}, an empty sandbox placeholder left by a killed run",
                removed.display()
            ));
        }
    }
    Ok(Arc::new(workspace))
}

/// The tools and gate `recipe` gives in `mode`.
///
/// # Errors
///
/// A rule that does not parse, naming the settings file or the flags it came from.
/// The start-up `git status` under way: its section of the user context, or `None`.
type StartedStatus = tokio::task::JoinHandle<Option<String>>;

/// The model's settings (the reasoning effort among them) and whether thinking starts on
/// (`--thinking`, else the effort's default).
///
/// # Errors
///
/// A reasoning effort that is not one, named.
fn model_settings(
    options: &Options,
    settings: &settings::Settings,
    openai: bool,
    plan: bool,
    compact_percent: Option<u8>,
) -> anyhow::Result<(ModelSettings, bool)> {
    let reasoning =
        crate::effort::ReasoningChoice::new(options.model.effort, &settings.other, &|key| {
            setting_or_env(&settings.env, key)
        })?;
    let model_settings = ModelSettings::new(settings, openai, plan, compact_percent, reasoning);
    let thinking =
        (options.model.thinking).unwrap_or_else(|| model_settings.reasoning.thinking_on());
    Ok((model_settings, thinking))
}

/// The workspace (from here on the programs the agent runs itself, the sandbox's and the
/// API key helper's among them, are looked up outside it), the sandbox, and the start-up
/// `git status` started in it ([`start_git_status`]).
///
/// # Errors
///
/// Bad folders or sandbox settings, named.
fn confinement(
    options: &Options,
    settings: &settings::Settings,
    cwd: &Path,
    trusted: bool,
    record: &Record,
) -> anyhow::Result<(Arc<Workspace>, tools::SandboxConfig, Option<StartedStatus>)> {
    let workspace = workspace(options, settings, cwd)?;
    let sandbox = sandbox_config(options, settings)?;
    let resumed = record.saved_context.is_some();
    let status = start_git_status(cwd, &sandbox, trusted, resumed);
    tracing::debug!(target: "timeline", "git status started");
    Ok((workspace, sandbox, status))
}

/// `AGENT_NO_PREFETCH=1`: the start-up gathering one source after the other, everything
/// waited for (the comparison `cargo xtask bench-cli` measures).
fn sequential_start() -> bool {
    std::env::var("AGENT_NO_PREFETCH").is_ok_and(|value| value == "1")
}

/// Starts the start-up `git status` now, on the runtime, beside the rest of the session's
/// opening: its sandbox is the slowest step of a start (about 10 ms with bubblewrap: the
/// policy's walk of `/etc`, the sandbox's namespaces and mounts, git itself), and it no
/// longer waits for the tools, the hooks and the transcript to be set up. `None` for a
/// resumed session (it sends the context it sent before), with `AGENT_NO_PREFETCH=1`, or
/// outside a runtime (the first gathering then runs it).
fn start_git_status(
    cwd: &Path,
    sandbox: &tools::SandboxConfig,
    trusted: bool,
    resumed: bool,
) -> Option<StartedStatus> {
    if resumed || sequential_start() {
        return None;
    }
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let (cwd, sandbox) = (cwd.to_path_buf(), sandbox.clone());
    // On a thread of its own at once: a task spawned from this worker would wait in its
    // local slot (which no other worker takes) until the opening yields, and the opening
    // does not yield.
    let on = runtime.clone();
    Some(runtime.spawn_blocking(move || {
        on.block_on(context_info::git_status_section(&cwd, &sandbox, trusted))
    }))
}

fn build_tools(
    recipe: &subagents::Recipe,
    mode: tools::PermissionMode,
    settings: &settings::Settings,
) -> anyhow::Result<subagents::Built> {
    recipe.build(mode).map_err(|error| match &error {
        tools::Error::InvalidRule { rule, .. } => match settings.rule_origin(rule) {
            Some(path) => anyhow::anyhow!("{}: invalid settings: {error}", path.display()),
            None => anyhow::anyhow!("--allowedTools/--disallowedTools: {error}"),
        },
        _ => anyhow::Error::new(error),
    })
}

/// `--json-schema`: a StructuredOutput tool among `tools` and a stop hook in front of
/// `stop_hook` that requires its call; the output as it will be shared.
///
/// # Errors
///
/// A schema that does not load.
fn structured_output(
    options: &Options,
    recipe: &subagents::Recipe,
    tools: &mut Vec<Arc<dyn executor::Tool>>,
    stop_hook: &mut Arc<dyn StopHook>,
) -> anyhow::Result<Option<crate::structured::Shared>> {
    let Some(schema) = &options.json_schema else {
        return Ok(None);
    };
    let schema = crate::structured::load_schema(schema)?;
    let shared = crate::structured::Shared::default();
    tools.push(
        recipe.wrap(Arc::new(crate::structured::StructuredOutputTool::new(
            schema,
            Arc::clone(&shared),
        ))),
    );
    *stop_hook = Arc::new(crate::structured::RequireOutput::new(
        Arc::clone(&shared),
        Arc::clone(stop_hook),
    ));
    Ok(Some(shared))
}

/// Where `choice` is and what it is authenticated with: an OpenAI-style server's URL and
/// key, a named Messages API server's, or Anthropic's with the settings' `apiKeyHelper`
/// when the environment has no key.
///
/// # Errors
///
/// A `CLAUDE_CODE_API_KEY_HELPER_TTL_MS` that is not a number.
fn endpoint(
    config: &mut ClientConfig,
    choice: &ProviderChoice,
    settings: &settings::Settings,
    cwd: &Path,
    notices: &crate::Notices,
) -> anyhow::Result<()> {
    let lookup = |key: &str| setting_or_env(&settings.env, key);
    if choice.kind.is_openai() {
        config.api = if choice.kind == settings::ProviderKind::OpenaiResponses {
            provider::Api::Responses
        } else {
            provider::Api::ChatCompletions(choice.options.clone())
        };
        config.betas.clear();
        config.base_url = choice
            .base_url
            .clone()
            .or_else(|| {
                lookup("OPENAI_BASE_URL")
                    .filter(|_| matches!(choice.name.as_str(), "openai" | "openai-responses"))
            })
            .unwrap_or_else(|| OPENAI_BASE_URL.to_owned())
            .trim_end_matches('/')
            .to_owned();
        let key_env = choice.key_env.as_deref().unwrap_or("OPENAI_API_KEY");
        config.auth = lookup(key_env).map_or(provider::Auth::None, provider::Auth::ApiKey);
    } else if choice.name != "anthropic" {
        // A named Messages API server: its own URL and key.
        if let Some(base_url) = &choice.base_url {
            config.base_url = base_url.trim_end_matches('/').to_owned();
        }
        if let Some(key_env) = &choice.key_env {
            config.auth = lookup(key_env).map_or(provider::Auth::None, provider::Auth::ApiKey);
        }
    } else if config.auth == provider::Auth::None
        && let Some(helper) = key_helper(settings, cwd, notices)?
    {
        // Claude Code's order: a key or token in the environment first, then the helper.
        config.auth = provider::Auth::Source(helper);
    }
    Ok(())
}

/// The settings' `apiKeyHelper` as a key source, when one applies (a project's only in a
/// trusted folder: [`settings::Layer::applied`]).
///
/// # Errors
///
/// A `CLAUDE_CODE_API_KEY_HELPER_TTL_MS` that is not a number of milliseconds.
fn key_helper(
    settings: &settings::Settings,
    cwd: &Path,
    notices: &crate::Notices,
) -> anyhow::Result<Option<Arc<dyn provider::KeySource>>> {
    let Some(command) = &settings.api_key_helper else {
        return Ok(None);
    };
    let ttl = crate::key_helper::KeyHelper::ttl(
        setting_or_env(&settings.env, crate::key_helper::TTL_VARIABLE).as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    // A hook's environment; no session yet. In a folder the agent does not trust, the
    // helper runs in the user's home folder, where the project cannot steer it (it needs the
    // network and the user's credentials, so not the sandbox).
    let home = dirs::home_dir().filter(|_| !settings.project_trusted);
    let env = hook_env(
        &command_env(settings),
        "",
        Path::new(""),
        home.as_deref().unwrap_or(cwd),
        tools::PermissionMode::Default,
        notices,
    );
    Ok(Some(Arc::new(crate::key_helper::KeyHelper::new(
        command.clone(),
        env,
        ttl,
    ))))
}

/// The session's background tasks: their output files in `results_dir/tasks`, each started
/// through this binary's guard (it ends with the agent, SIGKILL included), each end told
/// through `notices` as it happens.
fn background_tasks(
    results_dir: &Path,
    notices: &crate::Notices,
) -> tools::background::BackgroundTasks {
    let wrapper = std::env::current_exe()
        .map(|exe| {
            vec![
                exe.into_os_string(),
                mcp::guard::GUARD_ARG.into(),
                mcp::guard::NEW_SESSION_FLAG.into(),
                std::process::id().to_string().into(),
            ]
        })
        .unwrap_or_default();
    let tasks = tools::background::BackgroundTasks::new(results_dir.join("tasks"), wrapper);
    let notices = notices.clone();
    // Its end, unless it was stopped (who stopped it says so: TaskStop's result, the
    // session's end).
    tasks.listen(move |event| {
        if let tools::background::TaskEvent::Ended(task, line) = event
            && task.status() != tools::background::TaskStatus::Stopped
        {
            notices.say(line);
        }
    });
    tasks
}

/// The hooks that can run when the folder is not trusted and there is no sandbox: the user's
/// own command hooks and status line would run where the folder can steer them (a `git
/// status` obeys its `.git/config`), so they do not run, and one line says so; `None` when
/// they run (trusted, or confined to the sandbox: `HookEnv::confined`). Hooks of the other
/// types (http, prompt, mcp_tool) start nothing here and stay.
fn runnable_hooks(
    settings: &settings::Settings,
    sandbox: &tools::SandboxConfig,
    notices: &crate::Notices,
) -> Option<BTreeMap<String, Vec<settings::HookMatcher>>> {
    if settings.project_trusted || settings.hooks_disabled() {
        return None;
    }
    if sandbox.is_active() {
        let commands = settings
            .hooks
            .values()
            .flatten()
            .flat_map(|matcher| &matcher.hooks)
            .filter(|hook| hook.command.is_some())
            .count();
        if commands > 0 {
            notices.say(&format!(
                "note: {commands} command hook{} of yours run{} in the sandbox here: the folder is not trusted, so they cannot write outside the workspace or reach the network, and their approvals are ignored (--trust or the setting trustedFolders runs them as configured)",
                if commands == 1 { "" } else { "s" },
                if commands == 1 { "s" } else { "" },
            ));
        }
        return None;
    }
    let mut kept = settings.hooks.clone();
    let mut skipped = 0;
    for matcher in kept.values_mut().flatten() {
        let before = matcher.hooks.len();
        matcher.hooks.retain(|hook| hook.command.is_none());
        skipped += before - matcher.hooks.len();
    }
    let status_line = settings
        .status_line
        .as_ref()
        .is_some_and(|status_line| status_line.kind == "command");
    if skipped > 0 || status_line {
        let what = match (skipped, status_line) {
            (0, _) => "the statusLine does".to_owned(),
            (1, false) => "1 command hook does".to_owned(),
            (count, false) => format!("{count} command hooks do"),
            (1, true) => "1 command hook and the statusLine do".to_owned(),
            (count, true) => format!("{count} command hooks and the statusLine do"),
        };
        notices.say(&format!(
            "warning: {what} not run here: the folder is not trusted and there is no sandbox to confine them (the folder can steer them: a `git status` obeys its .git/config); --trust runs them"
        ));
    }
    Some(kept)
}

/// What hooks are told of the session (its id and transcript, folder, mode) and run with.
fn hook_env(
    env: &[(String, String)],
    session_id: &str,
    transcript: &Path,
    cwd: &Path,
    mode: tools::PermissionMode,
    notices: &crate::Notices,
) -> hooks::HookEnv {
    hooks::HookEnv {
        notices: notices.clone(),
        env: env.to_vec(),
        session: Arc::new(std::sync::Mutex::new((
            session_id.to_owned(),
            transcript.to_path_buf(),
        ))),
        cwd: cwd.to_path_buf(),
        permission_mode: mode.as_str().to_owned(),
        gate: Arc::default(),
        // Hooks start through this binary, which ties them to the agent's life.
        guard: std::env::current_exe().ok(),
        http: None,
        model: Arc::default(),
        agent: Arc::default(),
        env_file: None,
        mcp: Arc::default(),
        http_policy: settings::HttpHookPolicy::default(),
        confined: false,
        turn: Arc::default(),
        watch: Arc::default(),
        wake: Arc::default(),
        waker: Arc::default(),
        host: Arc::default(),
    }
}

/// The web tools' shared part ([`crate::web::setup`]): pages answered by a small model when
/// one is named or the provider is Anthropic's (Claude Code's haiku); searches where the
/// provider runs them (the Messages API's server tool, the Responses API's).
///
/// # Errors
///
/// A limit's variable, `NODE_EXTRA_CA_CERTS` or a proxy URL that is not valid, named.
fn web_tools(
    settings: &settings::Settings,
    client: &AnthropicClient,
    extra_roots_pem: &[u8],
    openai: bool,
) -> anyhow::Result<Arc<crate::web::Web>> {
    let source = SettingsEnv {
        settings: &settings.env,
        base_url_flag: false,
    };
    let small = !openai
        || settings.other.contains_key("smallFastModel")
        || source.get("ANTHROPIC_SMALL_FAST_MODEL").is_some();
    let search = matches!(
        client.config().api,
        provider::Api::Messages | provider::Api::Responses
    );
    crate::web::setup(&source, extra_roots_pem, small, search)
}

/// What `http` hooks are sent with, when the settings have any: the model's HTTPS stack
/// (`--ca-cert` or `SSL_CERT_FILE` beside the webpki roots, `HTTPS_PROXY` and `NO_PROXY`),
/// never to a private or link-local address ([`provider::Reach::Public`]). One that cannot be
/// set up is told; its hooks then fail with a line each.
fn hooks_transport(
    options: &Options,
    settings: &settings::Settings,
) -> Option<Arc<dyn provider::Transport>> {
    let any = settings
        .hooks
        .values()
        .flatten()
        .flat_map(|matcher| &matcher.hooks)
        .any(|hook| hook.kind == "http");
    if !any {
        return None;
    }
    let source = SettingsEnv {
        settings: &settings.env,
        base_url_flag: false,
    };
    let roots = match options
        .model
        .ca_cert
        .clone()
        .or_else(|| source.get("SSL_CERT_FILE").map(PathBuf::from))
    {
        Some(path) => match std::fs::read(&path) {
            Ok(pem) => pem,
            Err(error) => {
                options.notices.say(&format!(
                    "warning: http hooks cannot be sent: {}: {error}",
                    path.display()
                ));
                return None;
            }
        },
        None => Vec::new(),
    };
    let proxy = provider::ProxyConfig::from_source(&source);
    // Never to a private or link-local address (a cloud's metadata service), as Claude Code
    // refuses them; loopback is the user's own.
    match provider::HyperTransport::with_reach(&roots, &proxy, provider::Reach::Public) {
        Ok(transport) => Some(Arc::new(transport)),
        Err(error) => {
            options
                .notices
                .say(&format!("warning: http hooks cannot be sent: {error}"));
            None
        }
    }
}

/// The loop's settings for `model` (its id and what is known of it): its window and
/// levels, MCP results' size limit, the background summaries, the system prompt.
///
/// # Errors
///
/// A settings `env` value that is not a number where one is needed, naming it.
fn loop_config(
    options: &Options,
    settings: &settings::Settings,
    (model, info): (&str, &context::ModelInfo),
    model_settings: &ModelSettings,
    headless: bool,
    structured: bool,
) -> anyhow::Result<LoopConfig> {
    let mut config = LoopConfig::for_model_info(model, info);
    set_window(&mut config, info, model_settings.compact_percent);
    model_settings
        .reasoning
        .configure(&mut config, model_settings.openai);
    config.context.budget.tool_limits = vec![context::ToolLimit {
        name_prefix: "mcp__".to_owned(),
        chars: mcp_output_chars(&settings.env)?,
    }];
    config.summaries = summaries(
        settings,
        model_settings,
        model,
        headless,
        options.cassette.replay.is_some(),
    );
    config.system = vec![system_prompt(
        options,
        structured,
        output_style(settings, &working_dir(options)?, &options.notices).as_ref(),
    )];
    Ok(config)
}

/// The output style the settings name (`outputStyle`), when it is not `default`; one that
/// is not found is warned about and the built-in prompt is used.
fn output_style(
    settings: &settings::Settings,
    cwd: &Path,
    notices: &crate::Notices,
) -> Option<crate::output_styles::OutputStyle> {
    let name = settings
        .output_style
        .as_deref()
        .filter(|name| !name.eq_ignore_ascii_case(crate::output_styles::DEFAULT))?;
    let styles = crate::output_styles::discover(cwd, &settings::project_folder(cwd), notices);
    let found = crate::output_styles::find(&styles, name).cloned();
    if found.is_none() {
        let names: Vec<&str> = styles.iter().map(|style| style.name.as_str()).collect();
        notices.say(&format!(
            "warning: outputStyle {:?} is not an output style here (there are: {}); the default is used",
            render::printable(name, false),
            render::printable(&names.join(", "), false)
        ));
    }
    found
}

/// The settings' `env` for commands and hooks.
///
/// Settings' `env` applies to the whole session, as in Claude Code: the API client's
/// configuration (ANTHROPIC_BASE_URL, ...), every Bash command and every hook; it wins
/// over the process environment, of which commands and hooks get only an allow-list
/// (`sandbox::env`). The variables model keys are read from stay the client's: the
/// Anthropic and OpenAI ones (`sandbox::env::AGENT_CREDENTIALS`, withheld by every
/// command's start) and each provider entry's `apiKeyEnv`, withheld here.
fn command_env(settings: &settings::Settings) -> Vec<(String, String)> {
    let provider_keys = provider_key_variables(settings);
    settings
        .env
        .iter()
        .filter(|(key, _)| !provider_keys.contains(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

/// The variables the providers' keys are read from (each provider entry's `apiKeyEnv`).
fn provider_key_variables(settings: &settings::Settings) -> Vec<String> {
    settings
        .providers
        .values()
        .filter_map(|entry| entry.api_key_env.clone())
        .collect()
}

/// The provider and the model as named (`--model`, else settings' `model`, else
/// [`DEFAULT_MODEL`]), before aliases are resolved; warns of a `NAME/model` whose NAME is not
/// a provider.
///
/// # Errors
///
/// An unknown provider, or an OpenAI-compatible one with no model named.
fn named_model(
    options: &Options,
    settings: &settings::Settings,
) -> anyhow::Result<(ProviderChoice, String)> {
    let (provider_choice, named_model) = choose_provider(
        options.model.provider.as_deref(),
        options
            .model
            .model
            .clone()
            .or_else(|| settings.model.clone())
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        &settings.providers,
    )?;
    let openai = provider_choice.kind.is_openai();
    if openai && named_model == DEFAULT_MODEL {
        bail!(
            "the {} provider needs a model: name one with --model (or settings' \"model\"); the default {DEFAULT_MODEL} is Anthropic's",
            provider_choice.name
        );
    }
    if !openai && let Some((prefix, _)) = named_model.split_once('/') {
        options.notices.say(&format!(
            "warning: model {}: {} is not a provider (anthropic, openai, or an entry of settings' \"providers\"), so the whole name goes to the {} server as the model id",
            render::printable(&named_model, false),
            render::printable(prefix, false),
            provider_choice.name
        ));
    }
    Ok((provider_choice, named_model))
}

/// What a client that cannot be configured is reported with: the files whose `env` set
/// `ANTHROPIC_*` variables, when any did.
fn client_context(settings: &settings::Settings) -> String {
    // Name the file when settings' env took part in the client's configuration.
    let files: Vec<String> = settings
        .applied_layers()
        .filter(|(_, layer)| layer.env.keys().any(|key| key.starts_with("ANTHROPIC_")))
        .map(|(path, _)| path.display().to_string())
        .collect();
    if files.is_empty() {
        "configuring the API client".to_owned()
    } else {
        format!(
            "configuring the API client (with ANTHROPIC_* variables from the env of {})",
            files.join(", ")
        )
    }
}

/// The permission mode: the caller's, else settings' `defaultMode` (Claude Code's
/// `dontAsk` and `auto` read as default, with a warning), else default.
///
/// # Errors
///
/// A `defaultMode` that is no mode, naming its file.
fn permission_mode(
    options: &Options,
    settings: &settings::Settings,
) -> anyhow::Result<tools::PermissionMode> {
    Ok(match (options.permissions.mode, settings.permissions.default_mode.as_deref()) {
        (Some(mode), _) => mode,
        // Claude Code's other modes: asking is the stricter answer to both.
        (None, Some(name @ ("dontAsk" | "auto"))) => {
            options.notices.say(&format!(
                "warning: {}: permissions.defaultMode {name:?} (a Claude Code mode) is not supported by agent: default is used (calls without a rule are asked, or refused headless)",
                settings
                    .default_mode_origin()
                    .map_or_else(|| "settings".into(), |path| path.display().to_string())
            ));
            tools::PermissionMode::Default
        }
        (None, Some(name)) => name.parse::<tools::PermissionMode>().ok().with_context(|| {
            format!(
                "{}: invalid settings: permissions.defaultMode {name:?} is not default, acceptEdits, bypassPermissions or plan",
                settings
                    .default_mode_origin()
                    .map_or_else(|| "settings".into(), |path| path.display().to_string())
            )
        })?,
        (None, None) => tools::PermissionMode::Default,
    })
}

/// The folders besides `cwd` the tools may use: settings' `additionalDirectories` (a
/// user file's `~/` is the home folder; its relative entries are skipped with a warning),
/// then the caller's.
///
/// # Errors
///
/// An `--add-dir` folder that does not exist (a settings entry's is skipped with a warning).
fn additional_dirs(
    options: &Options,
    settings: &settings::Settings,
    cwd: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut additional_dirs = Vec::new();
    for layer in &settings.layers {
        let applied = layer.applied(settings.project_trusted);
        for dir in &applied.permissions.additional_directories {
            // The user's own file names folders of the user's: `~/` is their home, and
            // a relative entry would be resolved inside each project (whose links the
            // project chooses), so it is skipped.
            let dir = match (layer.scope, dir.strip_prefix("~")) {
                (settings::Scope::User, Ok(rest)) => match dirs::home_dir() {
                    Some(home) => home.join(rest),
                    None => dir.clone(),
                },
                (settings::Scope::User, Err(_)) if dir.is_relative() => {
                    options.notices.say(&format!(
                        "warning: {}: permissions.additionalDirectories entry {} is relative: it is skipped (write it absolute, or ~/...)",
                        layer.path.display(),
                        render::printable(&dir.to_string_lossy(), false)
                    ));
                    continue;
                }
                _ => dir.clone(),
            };
            // A folder that is not there (another machine's path, a folder removed) is
            // skipped with a warning, as Claude Code goes on; `--add-dir` stays an error.
            match absolute_dir(cwd, &dir) {
                Ok(dir) => additional_dirs.push(dir),
                Err(error) => options.notices.say(&format!(
                    "warning: {}: permissions.additionalDirectories entry skipped: {}",
                    layer.path.display(),
                    render::printable(&format!("{error:#}"), false)
                )),
            }
        }
    }
    for dir in &options.permissions.add_dirs {
        additional_dirs.push(absolute_dir(cwd, dir).context("--add-dir")?);
    }
    Ok(additional_dirs)
}

/// The permission rules (settings' then the caller's) and where each came from. An allow
/// rule a settings file holds that does not parse is left out with a warning (the session
/// only asks more); a bad deny or ask rule stops the start when the gate is built, as
/// leaving it out would let run what the user meant to stop.
fn permission_rules(
    options: &Options,
    settings: &settings::Settings,
    cwd: &Path,
) -> (tooling::Rules, Vec<(&'static str, String, String)>) {
    let allow = settings
        .permissions
        .allow
        .iter()
        .filter(|rule| match tools::PermissionGate::check_rule(rule, cwd) {
            Ok(()) => true,
            Err(error) => {
                let origin = settings
                    .rule_origin(rule)
                    .map_or_else(|| "settings".to_owned(), |path| path.display().to_string());
                options.notices.say(&format!(
                    "warning: {origin}: permissions.allow: {error}; the rule is ignored"
                ));
                false
            }
        })
        .cloned()
        .collect();
    let mut rules = tooling::Rules {
        allow,
        ask: settings.permissions.ask.clone(),
        deny: settings.permissions.deny.clone(),
    };
    rules
        .allow
        .extend(options.permissions.allowed_tools.iter().cloned());
    rules
        .deny
        .extend(options.permissions.disallowed_tools.iter().cloned());
    let mut rule_origins = Vec::new();
    for (kind, list) in [
        ("allow", &rules.allow),
        ("ask", &rules.ask),
        ("deny", &rules.deny),
    ] {
        for rule in list {
            let origin = settings.rule_origin(rule).map_or_else(
                || match kind {
                    "deny" => "--disallowedTools".to_owned(),
                    _ => "--allowedTools".to_owned(),
                },
                |path| path.display().to_string(),
            );
            rule_origins.push((kind, rule.clone(), origin));
        }
    }
    (rules, rule_origins)
}

/// `--fallback-model`: its id, window and output cap in `config`, and a client of its own
/// when another provider serves it (`openai/gpt-5`, `ollama/qwen3-coder`: the adapter sends
/// the fallback model's requests there).
///
/// # Errors
///
/// An unknown provider or model entry, or a client that cannot be configured.
fn fallback(
    options: &Options,
    settings: &settings::Settings,
    cwd: &Path,
    provider_choice: &ProviderChoice,
    compact_percent: Option<u8>,
    config: &mut LoopConfig,
) -> anyhow::Result<Option<adapter::Fallback>> {
    let mut fallback_client = None;
    if let Some(named) = &options.model.fallback_model {
        let (choice, id) = choose_provider(None, named.clone(), &settings.providers)?;
        let id = if choice.kind == settings::ProviderKind::Anthropic {
            resolve_model(&id, false, &|key: &str| setting_or_env(&settings.env, key))
        } else {
            id
        };
        if choice.name != provider_choice.name && options.cassette.replay.is_none() {
            let (client, _, _) = model_client(options, cwd, settings, &choice, true)
                .with_context(|| format!("--fallback-model {named}"))?;
            fallback_client = Some(adapter::Fallback {
                model: id.clone(),
                client,
            });
        }
        // Any fallback asks for what it can give, whichever provider serves it.
        let (info, _) = model_info(&id, &settings.models, choice.kind.is_openai())?;
        config.fallback_output_cap =
            Some(u32::try_from(info.default_output_cap.0).unwrap_or(u32::MAX));
        config.fallback_levels = Some(context::WaterLevels::with_overrides(
            info.context_window,
            info.max_output,
            context::LevelOverrides {
                autocompact_percent: compact_percent,
                autocompact_disabled: false,
            },
        ));
        config.fallback_model = Some(id);
    }
    Ok(fallback_client)
}

/// The run's limits in `config` (turns, output-token budget) and the dollar budget's guard.
///
/// # Errors
///
/// A budget that is not a positive number.
fn limits(
    options: &Options,
    settings: &settings::Settings,
    config: &mut LoopConfig,
) -> anyhow::Result<Option<Arc<dyn loop_core::SpendGuard>>> {
    config.max_turns = options.limits.max_turns;
    if options.limits.max_tokens_budget == Some(0) {
        bail!("--max-tokens-budget must be a positive number of output tokens");
    }
    config.token_budget = options.limits.max_tokens_budget;
    Ok(match options.limits.max_budget_usd {
        None => None,
        Some(limit) if limit.is_finite() && limit > 0.0 => {
            Some(Arc::new(crate::budget::DollarBudget::new(
                limit,
                price_overrides(&settings.models),
                options.notices.clone(),
            )))
        }
        Some(limit) => {
            bail!("--max-budget-usd must be a positive number of US dollars, got {limit}")
        }
    })
}

/// The system prompt: the caller's or the built-in one (with `style` applied), the caller's
/// addition, and the structured output's instruction when `structured`.
fn system_prompt(
    options: &Options,
    structured: bool,
    style: Option<&crate::output_styles::OutputStyle>,
) -> String {
    let mut system = options
        .system_prompt
        .clone()
        .unwrap_or_else(|| context_info::system_prompt_with(style));
    if let Some(extra) = &options.append_system_prompt {
        system.push_str("\n\n");
        system.push_str(extra);
    }
    if structured {
        system.push_str("\n\n");
        system.push_str(crate::structured::INSTRUCTION);
    }
    system
}

/// The prices settings' `models` entries give, by model id.
fn price_overrides(
    models: &BTreeMap<String, settings::ModelSettings>,
) -> Arc<BTreeMap<String, context::Prices>> {
    Arc::new(
        models
            .iter()
            .filter_map(|(id, entry)| Some((id.clone(), entry.prices?.to_prices())))
            .collect(),
    )
}

/// What the session tells the model with the next message (attachments): a late
/// `git status` once it is ready, and the files read earlier that changed on disk since.
struct SessionAttachments {
    watch: tools::FileWatch,
    background: tools::background::BackgroundTasks,
    /// The session's hooks: PostToolBatch runs here, and what `asyncRewake` hooks left for
    /// the model is taken here.
    hooks: hooks::Hooks,
    late: Arc<crate::prefetch::Late>,
    steering: Option<Steering>,
}

/// The largest file an `@path` mention attaches, in bytes (256 KiB).
const MENTION_MAX_BYTES: u64 = 256 * 1024;

/// Whether the file at `path` starts as an image the model can see (PNG, JPEG, GIF, WebP).
fn is_image(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 32];
    std::fs::File::open(path)
        .and_then(|mut file| file.read(&mut head))
        .is_ok_and(|read| tools::media::is_image(&head[..read]))
}

/// `text` from a file or a command, with the tags the session frames such text in
/// (`<system-reminder>`, `<bash-stdout>`, ...) made inert (`&lt;` for their `<`): a file
/// cannot close the frame it sits in and open a note that looks like the user's.
fn neutralize_tags(text: &str) -> String {
    const TAGS: [&str; 4] = [
        "system-reminder",
        "bash-input",
        "bash-stdout",
        "bash-stderr",
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let name = after.strip_prefix('/').unwrap_or(after);
        if TAGS.iter().any(|tag| name.starts_with(tag)) {
            out.push_str("&lt;");
        } else {
            out.push('<');
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The paths a prompt mentions: `@path` at the start or after a space (trailing `,`, `.`,
/// `;`, `:`, `)`, `?`, `!` left out), or `@"path with spaces"`; in order, each once.
pub fn mentions(prompt: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = prompt;
    let mut at_start = true;
    while let Some(at) = rest.find('@') {
        let before_ok = if at == 0 {
            at_start
        } else {
            rest[..at].ends_with(char::is_whitespace)
        };
        let after = &rest[at + 1..];
        at_start = false;
        if !before_ok {
            rest = after;
            continue;
        }
        let (mention, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (quoted[..end].to_owned(), &quoted[end + 1..]),
                None => (String::new(), quoted),
            }
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            let word = after[..end].trim_end_matches([',', '.', ';', ':', ')', '?', '!']);
            (word.to_owned(), &after[end..])
        };
        if !mention.is_empty() && !found.contains(&mention) {
            found.push(mention);
        }
        rest = next;
    }
    found
}

/// Where the lines the user enters while a turn runs come from (the interactive terminal's
/// queue): taken at the seeds' "next state" phase, before the next request of the turn.
pub type Steering = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// A line the user entered while the turn ran, as the model gets it with the next request.
fn steering_note(line: &str) -> String {
    format!(
        "<system-reminder>\nThe user sent the following message:\n{line}\n\nPlease address this message and continue with your tasks.\n</system-reminder>"
    )
}

impl SessionAttachments {
    /// The notes for the next request; `batch` is the PostToolBatch hooks' `tool_calls`
    /// (`Null`: no batch).
    async fn reminders(self, batch: serde_json::Value) -> Vec<String> {
        let mut notes: Vec<String> = self
            .late
            .take_ready()
            .map(|status| crate::prefetch::late_git_status(&status))
            .into_iter()
            .collect();
        notes.extend(tooling::FileAttachments::reminders(self.watch).await);
        if let Some(steering) = &self.steering {
            notes.extend(steering().iter().map(|line| steering_note(line)));
        }
        // Background tasks that ended since: Claude Code's task notifications.
        notes.extend(self.background.notifications());
        notes.extend(self.hooks.env().take_wake());
        if !batch.is_null() {
            let verdict = self
                .hooks
                .run(
                    hooks::Event::PostToolBatch,
                    &[],
                    serde_json::json!({ "tool_calls": batch }),
                )
                .await;
            let mut feedback = verdict.refusals();
            feedback.extend(verdict.context);
            if !feedback.is_empty() {
                notes.push(format!(
                    "<system-reminder>\nPostToolBatch hook additional context: {}\n</system-reminder>",
                    feedback.join("\n")
                ));
            }
        }
        notes
    }
}

/// The `tool_calls` of a PostToolBatch hook's input: each call of `batch` in the model's
/// order, with its result's structured form (Claude Code's shape, where the tool gives one)
/// or text.
fn batch_calls(batch: loop_core::Batch<'_>) -> serde_json::Value {
    batch
        .calls()
        .map(|(call, done)| {
            let mut entry = serde_json::json!({
                "tool_name": call.name,
                "tool_input": call.input,
                "tool_use_id": call.id,
            });
            if let (Some(done), Some(object)) = (done, entry.as_object_mut()) {
                object.insert(
                    "tool_response".into(),
                    done.structured
                        .clone()
                        .unwrap_or_else(|| serde_json::Value::String(done.result.content.text())),
                );
            }
            entry
        })
        .collect()
}

impl loop_core::AttachmentSource for SessionAttachments {
    fn attachments<'a>(&'a self, batch: loop_core::Batch<'a>) -> loop_core::AttachmentFuture<'a> {
        let calls = if self.hooks.has(hooks::Event::PostToolBatch) {
            batch_calls(batch)
        } else {
            serde_json::Value::Null
        };
        Box::pin(
            Self {
                watch: self.watch.clone(),
                background: self.background.clone(),
                hooks: self.hooks.clone(),
                late: Arc::clone(&self.late),
                steering: self.steering.clone(),
            }
            .reminders(calls),
        )
    }
}

/// The settings of a session from `layers`, as `trusted` allows: untrusted, a project's
/// model of another provider is ignored too (named in the untrusted folder's warning), and
/// the user's own model applies.
fn trusted_settings(
    options: &Options,
    layers: Vec<settings::Layer>,
    trusted: bool,
) -> settings::Settings {
    let mut settings = settings::Settings::merged(layers, trusted);
    if !trusted
        && let Some(foreign) = foreign_model(
            options.model.model.as_deref(),
            options.model.provider.as_deref(),
            &settings.layers,
        )
    {
        settings.model = foreign.user_model;
    }
    settings
}

/// What the session in `cwd` reads that needs trust ([`crate::trust::items`]), and a project
/// model of another provider than the user's own choice: it would move the conversation and
/// the user's key there, so it needs trust and is part of a trusted folder's fingerprint.
fn trust_items(
    options: &Options,
    cwd: &Path,
    layers: &[settings::Layer],
    commands: &[crate::commands::Command],
) -> Vec<crate::trust::Item> {
    let mut items = crate::trust::items(cwd, layers, commands);
    if let Some(foreign) = foreign_model(
        options.model.model.as_deref(),
        options.model.provider.as_deref(),
        layers,
    ) {
        let file = foreign.file.strip_prefix(cwd).unwrap_or(&foreign.file);
        items.push(crate::trust::Item::new(
            &file.to_string_lossy(),
            &format!(
                "model: {} (it goes to the {} provider, not {})",
                foreign.model, foreign.provider, foreign.user_provider
            ),
            &settings::canonical_json(
                &serde_json::json!({"model": foreign.model, "provider": foreign.provider}),
            ),
        ));
    }
    items
}

/// Whether the folder is trusted (see `trust`): without a question by `--trust`,
/// `AGENT_TRUST`, the user's `trustedFolders` or a remembered answer, as long as what the
/// session reads that needs trust is what was recorded when it was trusted (a folder trusted
/// without a record yet is recorded now, with a note); otherwise, when its settings configure
/// something that needs trust, asked through `asker` when the front end has one (the
/// question shows what changed, for a trusted folder) or, without one (headless), untrusted
/// with one warning listing what is ignored; otherwise untrusted without a word (it then
/// matters only where there is no sandbox: see `Session::gather_context`).
/// Whether a folder is trusted, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FolderTrust {
    /// Not trusted.
    No,
    /// Trusted by the user's answer to our question (which listed the project's `.mcp.json`
    /// servers), a setting, the flag or the variable: its `.mcp.json` servers no setting
    /// named are approved with it.
    Asked,
    /// Trusted by Claude Code's trust dialog, which did not list the `.mcp.json` servers:
    /// each one no setting approved is asked about (headless: not started), as Claude Code
    /// asks.
    ByClaudeCode,
}

impl FolderTrust {
    fn by(source: &crate::trust::Source) -> Self {
        match source {
            crate::trust::Source::ClaudeCode(_) => Self::ByClaudeCode,
            _ => Self::Asked,
        }
    }

    fn trusted(self) -> bool {
        self != Self::No
    }
}

fn decide_trust(
    options: &Options,
    cwd: &Path,
    layers: &[settings::Layer],
    commands: &[crate::commands::Command],
    asker: Option<&dyn crate::trust::TrustAsker>,
    claude: &crate::claude_code::State,
) -> anyhow::Result<FolderTrust> {
    use crate::trust::Standing;
    let folder = crate::settings::project_folder(cwd);
    let user = settings::agent_user_layer(layers);
    let (entries, settings_file) = match user {
        Some(layer) => (
            layer.settings.trusted_folders.as_slice(),
            layer.path.clone(),
        ),
        None => (&[][..], settings::user_settings_file().unwrap_or_default()),
    };
    let items = trust_items(options, cwd, layers, commands);
    let shown_folder = render::printable(&folder.to_string_lossy(), false);
    let grants = crate::trust::Grants {
        flag: options.trust,
        setting_entries: entries,
        settings_file: &settings_file,
        claude,
    };
    let change = match crate::trust::standing(&folder, cwd, &grants, &items, &options.notices)? {
        Standing::Trusted(source) => {
            // `--trust` and `AGENT_TRUST` record nothing.
            if matches!(
                source,
                crate::trust::Source::Setting(_)
                    | crate::trust::Source::Remembered(_)
                    | crate::trust::Source::ClaudeCode(_)
            ) && let Err(error) = crate::trust::record_narrowing(cwd, &items)
            {
                options.notices.say(&format!(
                    "warning: the deny and ask rules of {shown_folder} could not be recorded, so taking one out will not be noticed: {error:#}"
                ));
            }
            return Ok(FolderTrust::by(&source));
        }
        Standing::Unrecorded(source) => {
            match crate::trust::adopt(&folder, cwd, &items) {
                Ok(adopted) => options.notices.say(&format!(
                    "note: {shown_folder} is trusted by {}; its configuration ({} configured folder{}) is now recorded in {}: a change to its hooks, MCP servers, env or allow rules will ask before it applies{}",
                    crate::trust::describe(&source),
                    adopted.folders,
                    if adopted.folders == 1 { "" } else { "s" },
                    adopted.file.display(),
                    if adopted.complete {
                        ""
                    } else {
                        " (the folder is too large to look at whole: a configured folder not recorded asks when a session starts in it)"
                    }
                )),
                Err(error) => options.notices.say(&format!(
                    "warning: {shown_folder} is trusted by {}, but its configuration could not be recorded, so a change to it will not be noticed: {error:#}",
                    crate::trust::describe(&source)
                )),
            }
            return Ok(FolderTrust::by(&source));
        }
        Standing::Changed(change) => Some(change),
        Standing::Untrusted => None,
    };
    // Deny and ask rules need no trust: only what widens is asked about or ignored.
    let parts: Vec<String> = items
        .iter()
        .filter(|item| !item.narrows())
        .map(|item| item.shown.clone())
        .collect();
    // Nothing of the folder's needs trust: the user's own commands, which it can steer, are
    // what the question is about (as Claude Code asks about every folder); untrusted, they
    // run in the sandbox, so headless runs go on without a word.
    let own = own_commands(layers);
    if parts.is_empty() && change.is_none() && (own.is_empty() || asker.is_none()) {
        return Ok(FolderTrust::No);
    }
    if let Some(asker) = asker {
        let question = Question {
            folder: &folder,
            cwd,
            change: change.as_ref(),
            parts: &parts,
            own: &own,
        };
        match question.ask(asker) {
            crate::trust::TrustAnswer::Always => {
                match crate::trust::remember(&folder, cwd, &items) {
                    Ok(file) => options.notices.say(&format!(
                        "trusted {shown_folder} (remembered in {})",
                        file.display()
                    )),
                    Err(error) => options.notices.say(&format!(
                        "warning: trusted for this session only: {error:#}"
                    )),
                }
                return Ok(FolderTrust::Asked);
            }
            crate::trust::TrustAnswer::Once => return Ok(FolderTrust::Asked),
            // Only the user's own commands were asked about: they run in the sandbox.
            crate::trust::TrustAnswer::No if parts.is_empty() && change.is_none() => {
                return Ok(FolderTrust::No);
            }
            crate::trust::TrustAnswer::No => {}
        }
    }
    let warning = match &change {
        Some(change) => crate::trust::changed_warning(&folder, cwd, change),
        None => crate::trust::untrusted_warning(&folder, &parts),
    };
    options.notices.say(&format!("warning: {warning}"));
    Ok(FolderTrust::No)
}

/// The trust question about a folder that is not trusted: what changed since it was, else
/// what its settings configure, else the user's own commands it can steer.
struct Question<'a> {
    folder: &'a Path,
    cwd: &'a Path,
    change: Option<&'a crate::trust::Change>,
    parts: &'a [String],
    own: &'a [String],
}

impl Question<'_> {
    fn ask(&self, asker: &dyn crate::trust::TrustAsker) -> crate::trust::TrustAnswer {
        if let Some(change) = self.change {
            let heading = crate::trust::changed_heading(self.folder, self.cwd, change);
            let mut chars = heading.chars();
            let heading: String = chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect())
                .unwrap_or_default();
            return asker.ask(&format!("{heading}:"), &crate::trust::change_lines(change));
        }
        if self.parts.is_empty() {
            let heading = format!(
                "{} is not a trusted folder. Your own settings run commands in it, which the folder can steer (a `git status` obeys its .git/config); untrusted, they run in the sandbox:",
                render::printable(&self.folder.to_string_lossy(), false)
            );
            return asker.ask(&heading, self.own);
        }
        asker.ask(&crate::trust::untrusted_heading(self.folder), self.parts)
    }
}

/// The commands the user's own settings run in every folder (command hooks and the
/// status line), one line each for the trust question (at most [`OWN_COMMANDS_SHOWN`], then
/// how many more).
fn own_commands(layers: &[settings::Layer]) -> Vec<String> {
    let mut lines = Vec::new();
    let user = layers
        .iter()
        .filter(|layer| layer.scope == settings::Scope::User);
    if user.clone().any(|layer| {
        layer.settings.other.get("disableAllHooks") == Some(&serde_json::Value::Bool(true))
    }) {
        return lines;
    }
    for layer in user {
        for (event, matchers) in &layer.settings.hooks {
            for hook in matchers.iter().flat_map(|matcher| &matcher.hooks) {
                if let Some(command) = &hook.command {
                    lines.push(format!(
                        "hooks.{event}: {}",
                        render::printable(command, false)
                    ));
                }
            }
        }
        if let Some(status_line) = layer
            .settings
            .status_line
            .as_ref()
            .filter(|status_line| status_line.kind == "command")
        {
            lines.push(format!(
                "statusLine: {}",
                render::printable(&status_line.command, false)
            ));
        }
    }
    if lines.len() > OWN_COMMANDS_SHOWN {
        let more = lines.len() - OWN_COMMANDS_SHOWN + 1;
        lines.truncate(OWN_COMMANDS_SHOWN - 1);
        lines.push(format!("and {more} more"));
    }
    lines
}

/// How many of the user's own commands the trust question lists.
const OWN_COMMANDS_SHOWN: usize = 6;

/// The working directory, made absolute and resolved.
fn working_dir(options: &Options) -> anyhow::Result<PathBuf> {
    let dir = match &options.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let resolved = dir
        .canonicalize()
        .with_context(|| format!("working directory {}", dir.display()))?;
    if !resolved.is_dir() {
        bail!("working directory {}: not a directory", dir.display());
    }
    // Refused up front: every tool would fail in a folder that cannot be listed.
    if let Err(error) = std::fs::read_dir(&resolved) {
        bail!(
            "working directory {}: cannot be read ({error})",
            dir.display()
        );
    }
    Ok(resolved)
}

/// `dir` resolved against `cwd`; it must exist and be a directory.
fn absolute_dir(cwd: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let joined = cwd.join(dir);
    let resolved = joined
        .canonicalize()
        .with_context(|| format!("directory {}", joined.display()))?;
    if !resolved.is_dir() {
        bail!("{}: not a directory", joined.display());
    }
    if resolved.parent().is_none() {
        bail!(
            "{}: the root of the file system cannot be a workspace folder (every file would be readable and writable); name the folders the task needs",
            joined.display()
        );
    }
    Ok(resolved)
}

/// The model id for a name as Claude Code 2.1.197 resolves its aliases: `opus`
/// (`ANTHROPIC_DEFAULT_OPUS_MODEL`, else `claude-opus-4-8`), `sonnet`
/// (`ANTHROPIC_DEFAULT_SONNET_MODEL`, else `claude-sonnet-5`), `haiku`
/// (`ANTHROPIC_DEFAULT_HAIKU_MODEL`, else `claude-haiku-4-5-20251001`), and `opusplan`: the
/// opus model when the session starts in plan mode, the sonnet model otherwise. Any other
/// name is a model id and stays as it is.
pub fn resolve_model(name: &str, plan: bool, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let alias = |variable: &str, default: &str| lookup(variable).unwrap_or_else(|| default.into());
    let opus = || alias("ANTHROPIC_DEFAULT_OPUS_MODEL", "claude-opus-4-8");
    let sonnet = || alias("ANTHROPIC_DEFAULT_SONNET_MODEL", "claude-sonnet-5");
    // `opus[1m]`: the alias's model with the 1M-token window (Claude Code's spelling).
    let name = name.trim();
    let (base, long) = match name
        .strip_suffix("[1m]")
        .or_else(|| name.strip_suffix("[1M]"))
    {
        Some(base) => (base, true),
        None => (name, false),
    };
    let lower = base.to_ascii_lowercase();
    let resolved = match lower.as_str() {
        "opus" | "best" => opus(),
        "sonnet" => sonnet(),
        "haiku" => alias("ANTHROPIC_DEFAULT_HAIKU_MODEL", "claude-haiku-4-5-20251001"),
        "opusplan" if plan => opus(),
        "opusplan" => sonnet(),
        // Claude ids are lowercase; a gateway's own ids keep their case.
        id if id.starts_with("claude-") => lower.clone(),
        _ => base.to_owned(),
    };
    if long && !resolved.ends_with("[1m]") {
        format!("{resolved}[1m]")
    } else {
        resolved
    }
}

/// The window a model of an OpenAI-compatible server is assumed to have when nothing says
/// otherwise: small enough for most local models, so compaction comes early rather than a
/// prompt the server refuses.
const ASSUMED_WINDOW: u64 = 32_768;

/// The limits of `model`: the settings' `models` entry (`{"ID": {"contextWindow": N,
/// "maxOutput": N}}`), else the built-in table, else, for an OpenAI-compatible server, an
/// assumed [`ASSUMED_WINDOW`]-token window (with one warning saying how to set it).
///
/// # Errors
///
/// A `models` entry with a zero, naming the key.
fn model_info(
    model: &str,
    models: &BTreeMap<String, settings::ModelSettings>,
    openai: bool,
) -> anyhow::Result<(context::ModelInfo, bool)> {
    let (table, known) = context::lookup(model);
    if let Some(entry) = models.get(model) {
        for (key, value) in [
            ("contextWindow", entry.context_window),
            ("maxOutput", entry.max_output),
        ] {
            if value == Some(0) {
                bail!("invalid settings: models.{model}.{key} must be a positive number of tokens");
            }
        }
        if let Some(key) = entry.prices.and_then(|prices| prices.invalid()) {
            bail!(
                "invalid settings: models.{model}.prices.{key} must be a number of US dollars per million tokens, 0 or more"
            );
        }
        let window = entry.context_window.unwrap_or(if known {
            table.context_window.0
        } else {
            ASSUMED_WINDOW
        });
        let max_output = entry
            .max_output
            .unwrap_or(table.max_output.0)
            .min(window / 2);
        return Ok((
            context::ModelInfo {
                id: "settings",
                context_window: context::Tokens(window),
                max_output: context::Tokens(max_output),
                default_output_cap: context::Tokens(max_output.min(table.default_output_cap.0)),
                escalated_output_cap: context::Tokens(max_output),
                prices: entry
                    .prices
                    .map(settings::ModelPrices::to_prices)
                    .or(table.prices.filter(|_| known)),
            },
            false,
        ));
    }
    if known || !openai {
        return Ok((table, false));
    }
    // An open model of the data table: its native window until the server says what it
    // serves (Ollama's can be far smaller), its vendor's prices.
    if let Some(open) = context::open_models::lookup_open(model) {
        return Ok((open.info(), true));
    }
    Ok((window_info(ASSUMED_WINDOW), true))
}

/// The limits of a model known only by its window: the output capped at 8,192 tokens (a
/// quarter of a small window).
fn window_info(window: u64) -> context::ModelInfo {
    let max_output = (window / 4).min(8_192);
    context::ModelInfo {
        id: "assumed",
        context_window: context::Tokens(window),
        max_output: context::Tokens(max_output),
        default_output_cap: context::Tokens(max_output),
        escalated_output_cap: context::Tokens(max_output),
        prices: None,
    }
}

/// Applies `info`'s window and output caps to `config` (with the autocompact percentage).
fn set_window(config: &mut LoopConfig, info: &context::ModelInfo, compact_percent: Option<u8>) {
    config.output_cap = u32::try_from(info.default_output_cap.0).unwrap_or(u32::MAX);
    config.escalated_output_cap = u32::try_from(info.escalated_output_cap.0).unwrap_or(u32::MAX);
    config.context.levels = context::WaterLevels::with_overrides(
        info.context_window,
        info.max_output,
        context::LevelOverrides {
            autocompact_percent: compact_percent,
            autocompact_disabled: false,
        },
    );
}

/// What another model of the session's provider is resolved and sized with (a custom
/// command's `model`, a subagent's).
#[derive(Clone, Debug)]
pub(crate) struct ModelSettings {
    models: BTreeMap<String, settings::ModelSettings>,
    /// The models sent notes in place of images and documents (shared: one the server
    /// refused an image for stays so in every turn and subagent).
    pub(crate) text_only: adapter::TextOnlyModels,
    openai: bool,
    env: BTreeMap<String, String>,
    plan: bool,
    /// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`.
    compact_percent: Option<u8>,
    /// Thinking and effort as chosen.
    pub(crate) reasoning: crate::effort::ReasoningChoice,
}

impl ModelSettings {
    /// From the session's settings (`models` and `env`), the provider's kind, plan mode and
    /// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`.
    fn new(
        settings: &settings::Settings,
        openai: bool,
        plan: bool,
        compact_percent: Option<u8>,
        reasoning: crate::effort::ReasoningChoice,
    ) -> Self {
        Self {
            text_only: adapter::TextOnlyModels::new(
                settings
                    .models
                    .iter()
                    .filter(|(_, entry)| entry.vision == Some(false))
                    .map(|(id, _)| id.clone()),
            ),
            models: settings.models.clone(),
            openai,
            env: settings.env.clone(),
            plan,
            compact_percent,
            reasoning,
        }
    }

    /// The id `name` resolves to (Claude Code's aliases on the Anthropic provider) and its
    /// limits.
    ///
    /// # Errors
    ///
    /// A `models` entry that is invalid.
    pub(crate) fn resolve(&self, name: &str) -> anyhow::Result<(String, context::ModelInfo)> {
        let id = if self.openai {
            name.to_owned()
        } else {
            resolve_model(name, self.plan, &|key: &str| setting_or_env(&self.env, key))
        };
        let (info, _) = model_info(&id, &self.models, self.openai)?;
        Ok((id, info))
    }

    /// See [`Session::model_choices`]; `current` is the model in use.
    fn choices(&self, current: &str) -> Vec<(String, String, &'static str)> {
        const ALIASES: [(&str, &str); 6] = [
            ("opus", "the most capable"),
            ("sonnet", "capable and fast: the everyday model"),
            ("haiku", "the fastest and cheapest"),
            ("opusplan", "opus in plan mode, sonnet otherwise"),
            ("sonnet[1m]", "sonnet with the 1M-token window"),
            ("opus[1m]", "opus with the 1M-token window"),
        ];
        let mut choices: Vec<(String, String, &'static str)> = Vec::new();
        if !self.openai {
            for (alias, what) in ALIASES {
                let id = resolve_model(alias, self.plan, &|key: &str| {
                    setting_or_env(&self.env, key)
                });
                choices.push((alias.to_owned(), id, what));
            }
        }
        for id in self.models.keys() {
            if !choices.iter().any(|(name, _, _)| name == id) {
                choices.push((id.clone(), id.clone(), "configured in settings (models)"));
            }
        }
        if !choices
            .iter()
            .any(|(name, id, _)| id == current || name == current)
        {
            choices.insert(0, (current.to_owned(), current.to_owned(), "in use"));
        }
        choices
    }

    /// `config` switched to `id` with `info`'s window and output caps.
    pub(crate) fn apply(&self, config: &mut LoopConfig, id: String, info: &context::ModelInfo) {
        config.model = id;
        set_window(config, info, self.compact_percent);
        self.reasoning.configure(config, self.openai);
    }
}

/// A custom command or a skill the user invoked by name (`/name arguments`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// The name, without the slash.
    pub name: String,
    /// The prompt it expands to.
    pub prompt: String,
    /// Allow rules while its turn runs (a trusted command's `allowed-tools`).
    pub allowed_tools: Vec<String>,
    /// The model of its turn (a trusted command's `model`), as written.
    pub model: Option<String>,
    /// The arguments as typed after the name.
    pub arguments: String,
    /// Where it comes from, as Claude Code's UserPromptExpansion hooks are told
    /// (`command_source`): `userSettings` or `projectSettings`; empty for a plain task.
    pub source: &'static str,
}

impl Invocation {
    /// A plain task: its text as the prompt, nothing granted, the session's model.
    pub fn task(prompt: String) -> Self {
        Self {
            name: String::new(),
            prompt,
            allowed_tools: Vec::new(),
            model: None,
            arguments: String::new(),
            source: "",
        }
    }

    /// The line as the user typed it: `/name arguments`.
    pub fn typed(&self) -> String {
        if self.arguments.is_empty() {
            format!("/{}", self.name)
        } else {
            format!("/{} {}", self.name, self.arguments)
        }
    }
}

/// Claude Code's `command_source` of a command or skill of `scope` (`user`, `project`).
fn command_source(scope: &str) -> &'static str {
    if scope == "user" {
        "userSettings"
    } else {
        "projectSettings"
    }
}

/// The background summaries of a session ([`loop_core::background`]): on in an interactive
/// session, headless only with the setting `progressSummaries: true`; never with
/// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` or `AGENT_DISABLE_BACKGROUND_REQUESTS=1`, nor
/// against a `--replay` cassette (a replay answers requests in recorded order, and background
/// requests have no fixed place in it). The fast model is the setting `smallFastModel`, else
/// `ANTHROPIC_SMALL_FAST_MODEL`, else Claude Code's `haiku` on the Anthropic provider and the
/// session's own model on another. `AGENT_PROGRESS_INTERVAL_MS` changes the 30 s interval.
fn summaries(
    settings: &settings::Settings,
    models: &ModelSettings,
    model: &str,
    headless: bool,
    replay: bool,
) -> Option<loop_core::background::SummaryConfig> {
    let flag = |key: &str| setting_or_env(&settings.env, key).is_some_and(|value| value == "1");
    if flag("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")
        || flag("AGENT_DISABLE_BACKGROUND_REQUESTS")
        || replay
    {
        return None;
    }
    let wanted = settings
        .other
        .get("progressSummaries")
        .and_then(serde_json::Value::as_bool);
    if !wanted.unwrap_or(!headless) {
        return None;
    }
    let fast = fast_model(settings, models, model);
    let every = setting_or_env(&settings.env, "AGENT_PROGRESS_INTERVAL_MS")
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(
            loop_core::background::PROGRESS_INTERVAL,
            std::time::Duration::from_millis,
        );
    Some(loop_core::background::SummaryConfig {
        model: fast,
        progress_every: Some(every),
        tool_use: true,
    })
}

/// The small fast model: the setting `smallFastModel`, else `ANTHROPIC_SMALL_FAST_MODEL`,
/// else Claude Code's `haiku` on the Anthropic provider and `model` on another.
fn fast_model(settings: &settings::Settings, models: &ModelSettings, model: &str) -> String {
    let named = settings
        .other
        .get("smallFastModel")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .or_else(|| setting_or_env(&settings.env, "ANTHROPIC_SMALL_FAST_MODEL"));
    match named {
        Some(name) => models.resolve(&name).map(|(id, _)| id).unwrap_or(name),
        None if models.openai => model.to_owned(),
        None => models
            .resolve("haiku")
            .map_or_else(|_| model.to_owned(), |(id, _)| id),
    }
}

/// The model server a session talks to (see [`choose_provider`]).
#[derive(Clone, Debug, PartialEq)]
struct ProviderChoice {
    /// `anthropic`, `openai`, or a `providers` entry's name.
    name: String,
    kind: settings::ProviderKind,
    base_url: Option<String>,
    /// The variable holding the key, when not the kind's default.
    key_env: Option<String>,
    options: provider::chat::ChatOptions,
    /// The `maxTokensField` the entry set, if it did.
    max_tokens_field: Option<provider::chat::MaxTokensField>,
}

/// The provider and the model id: `--provider NAME` (`anthropic`, `openai` or a
/// `providers` entry), or a model written `NAME/model` where NAME is one of those (any other
/// `/` belongs to the model id: OpenRouter's ids hold one), else `anthropic`.
///
/// # Errors
///
/// An unknown `--provider`, or an entry with a bad `reasoningReplay` or `maxTokensField`.
fn choose_provider(
    flag: Option<&str>,
    model: String,
    providers: &BTreeMap<String, settings::ProviderSettings>,
) -> anyhow::Result<(ProviderChoice, String)> {
    let (name, model) = provider_name(flag, model, providers);
    let choice = match (name.as_str(), providers.get(&name)) {
        (_, Some(entry)) => {
            let reasoning_replay = match entry.reasoning_replay.as_deref() {
                None | Some("none") => provider::chat::ReasoningReplay::None,
                Some("reasoning_content") => provider::chat::ReasoningReplay::ReasoningContent,
                Some("reasoning") => provider::chat::ReasoningReplay::Reasoning,
                Some(other) => bail!(
                    "invalid settings: providers.{name}.reasoningReplay {other:?} is not none, reasoning_content or reasoning"
                ),
            };
            let max_tokens_field = match entry.max_tokens_field.as_deref() {
                None => None,
                Some("max_tokens") => Some(provider::chat::MaxTokensField::MaxTokens),
                Some("max_completion_tokens") => {
                    Some(provider::chat::MaxTokensField::MaxCompletionTokens)
                }
                Some(other) => bail!(
                    "invalid settings: providers.{name}.maxTokensField {other:?} is not max_tokens or max_completion_tokens"
                ),
            };
            ProviderChoice {
                name: name.clone(),
                kind: entry.kind,
                base_url: entry.base_url.clone(),
                key_env: entry.api_key_env.clone(),
                options: provider::chat::ChatOptions {
                    reasoning_replay,
                    max_tokens_field: max_tokens_field.unwrap_or_default(),
                },
                max_tokens_field,
            }
        }
        ("anthropic" | "openai" | "openai-responses", None) => ProviderChoice {
            name: name.clone(),
            kind: match name.as_str() {
                "openai" => settings::ProviderKind::Openai,
                "openai-responses" => settings::ProviderKind::OpenaiResponses,
                _ => settings::ProviderKind::Anthropic,
            },
            base_url: None,
            key_env: None,
            options: provider::chat::ChatOptions::default(),
            max_tokens_field: None,
        },
        (other, None) => {
            let mut names: Vec<&str> = vec!["anthropic", "openai", "openai-responses"];
            names.extend(providers.keys().map(String::as_str));
            bail!(
                "--provider {other:?} is not one of {} (add it to settings' \"providers\")",
                names.join(", ")
            );
        }
    };
    Ok((choice, model))
}

/// The name of the provider `model` goes to and the model id it is sent as (see
/// [`choose_provider`]): a `NAME/` prefix naming a provider (and agreeing with `flag`), else
/// `flag`, else `anthropic`.
fn provider_name(
    flag: Option<&str>,
    model: String,
    providers: &BTreeMap<String, settings::ProviderSettings>,
) -> (String, String) {
    let known = |name: &str| {
        matches!(name, "anthropic" | "openai" | "openai-responses") || providers.contains_key(name)
    };
    match model.split_once('/') {
        Some((prefix, rest))
            if known(prefix) && flag.is_none_or(|flag| flag == prefix) && !rest.is_empty() =>
        {
            (prefix.to_owned(), rest.to_owned())
        }
        _ => (flag.unwrap_or("anthropic").to_owned(), model),
    }
}

/// A project file's `model` that would take the conversation, and the key, to another
/// provider than the user's own choice would (`--provider`, `--model`/`ANTHROPIC_MODEL`, the
/// user's settings files, else the default).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ForeignModel {
    /// The project file that set it.
    file: PathBuf,
    /// The model as written.
    model: String,
    /// The provider it would go to.
    provider: String,
    /// The provider of the user's own choice.
    user_provider: String,
    /// The user's own `model` setting, used instead.
    user_model: Option<String>,
}

/// The project's `model` of `layers` when it routes to another provider than the user's own
/// choice (see [`ForeignModel`]), given `--model` (or `ANTHROPIC_MODEL`) and `--provider`;
/// `None` when `--model` decides, when the model in effect is
/// the user's, or when both go to the same provider. Only the user's `providers` count: a
/// project's apply in a trusted folder only, where this check does not apply.
fn foreign_model(
    model_flag: Option<&str>,
    provider_flag: Option<&str>,
    layers: &[settings::Layer],
) -> Option<ForeignModel> {
    if model_flag.is_some() {
        return None;
    }
    let last = layers
        .iter()
        .rev()
        .find(|layer| layer.settings.model.is_some())?;
    if last.scope != settings::Scope::Project {
        return None;
    }
    let user_layers = || {
        layers
            .iter()
            .filter(|layer| layer.scope == settings::Scope::User)
    };
    let providers: BTreeMap<String, settings::ProviderSettings> = user_layers()
        .flat_map(|layer| layer.settings.providers.clone())
        .collect();
    let user_model = user_layers()
        .filter_map(|layer| layer.settings.model.clone())
        .next_back();
    let flag = provider_flag;
    let model = last.settings.model.clone()?;
    let (provider, _) = provider_name(flag, model.clone(), &providers);
    let (user_provider, _) = provider_name(
        flag,
        user_model
            .clone()
            .unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        &providers,
    );
    (provider != user_provider).then(|| ForeignModel {
        file: last.path.clone(),
        model,
        provider,
        user_provider,
        user_model,
    })
}

/// OpenAI's API, the default base URL of `--provider openai`.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The model client (network, recording or replay), and the extra root certificates it
/// trusts (`--ca-cert`, `SSL_CERT_FILE`), which HTTPS MCP servers trust too.
///
/// `fallback`: the client of a `--fallback-model` of another provider: `--base-url` (the
/// primary server's) does not apply to it, and it has no fallback of its own.
fn model_client(
    options: &Options,
    cwd: &Path,
    settings: &settings::Settings,
    choice: &ProviderChoice,
    fallback: bool,
) -> anyhow::Result<(AnthropicClient, Arc<[u8]>, String)> {
    let settings_env = &settings.env;
    let base_url_flag = options.model.base_url.as_ref().filter(|_| !fallback);
    let mut config = ClientConfig::from_source(&SettingsEnv {
        settings: settings_env,
        base_url_flag: base_url_flag.is_some(),
    })?;
    let openai = choice.kind.is_openai();
    config.rate_gate.clone_from(&options.model.rate_gate);
    endpoint(&mut config, choice, settings, cwd, &options.notices)?;
    if let Some(base_url) = base_url_flag {
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            bail!("--base-url must start with http:// or https://, got {base_url:?}");
        }
        config.base_url = base_url.trim_end_matches('/').to_owned();
    }
    if openai
        && choice.max_tokens_field.is_none()
        && let provider::Api::ChatCompletions(options) = &mut config.api
        && config.base_url.starts_with(OPENAI_BASE_URL)
    {
        // OpenAI's own reasoning models refuse `max_tokens`.
        options.max_tokens_field = provider::chat::MaxTokensField::MaxCompletionTokens;
    }
    let needs_key = options.cassette.replay.is_none() && !options.tools_only;
    if openai
        && needs_key
        && config.auth == provider::Auth::None
        && config.base_url == OPENAI_BASE_URL
    {
        bail!(
            "no API key: set OPENAI_API_KEY, or point --base-url (OPENAI_BASE_URL) at an OpenAI-compatible server (a local one needs no key)"
        );
    }
    if let Some(path) = &options.model.ca_cert {
        config.extra_roots_pem =
            std::fs::read(path).with_context(|| format!("--ca-cert {}", path.display()))?;
    }
    config.fallback_model = options.model.fallback_model.is_some() && !fallback;
    if !openai
        && needs_key
        && config.auth == provider::Auth::None
        && config.base_url == provider::DEFAULT_BASE_URL
    {
        bail!(
            "no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN for a gateway), or point --base-url at a local gateway or `testkit serve`"
        );
    }
    let workspace = Some(cwd.to_string_lossy().into_owned());
    config.workspace_root = workspace.clone();
    let transport: Arc<dyn Transport> = if let Some(path) = &options.cassette.replay {
        Arc::new(ReplayTransport::open(
            path,
            workspace,
            options.cassette.lenient,
        )?)
    } else {
        match (&options.cassette.record, &options.model.transports) {
            (Some(path), _) => Arc::new(RecordingTransport::new(
                HyperTransport::with_proxy(&config.extra_roots_pem, &config.proxy)?,
                path,
                workspace,
            )?),
            (None, Some(pool)) => pool.get(&config.extra_roots_pem, &config.proxy)?,
            (None, None) => Arc::new(HyperTransport::with_proxy(
                &config.extra_roots_pem,
                &config.proxy,
            )?),
        }
    };
    let extra_roots_pem = Arc::from(config.extra_roots_pem.as_slice());
    // Claude Code's `apiKeySource`: the variable an API key came from; `none` for a bearer
    // token or no key.
    let api_key_source = match &config.auth {
        provider::Auth::ApiKey(_) if openai => choice
            .key_env
            .clone()
            .unwrap_or_else(|| "OPENAI_API_KEY".to_owned()),
        provider::Auth::ApiKey(_) => choice
            .key_env
            .clone()
            .unwrap_or_else(|| "ANTHROPIC_API_KEY".to_owned()),
        provider::Auth::Source(_) => "apiKeyHelper".to_owned(),
        provider::Auth::Bearer(_) | provider::Auth::None => "none".to_owned(),
    };
    Ok((
        AnthropicClient::with_transport(config, transport, Arc::new(TokioSleeper))?,
        extra_roots_pem,
        api_key_source,
    ))
}

/// The client's configuration source: settings' `env`, then the process environment.
struct SettingsEnv<'a> {
    settings: &'a BTreeMap<String, String>,
    /// `--base-url` given: the variable is not read at all (a bad value must not fail a run
    /// that does not use it).
    base_url_flag: bool,
}

impl ConfigSource for SettingsEnv<'_> {
    fn get(&self, key: &str) -> Option<String> {
        if self.base_url_flag && key == "ANTHROPIC_BASE_URL" {
            return None;
        }
        match self.settings.get(key) {
            Some(value) if !value.is_empty() => Some(value.clone()),
            _ => EnvSource.get(key),
        }
    }
}

/// Whether `gate` offers `tool` to the model (no deny rule covers all of its calls).
fn offered(gate: &tools::PermissionGate, tool: &dyn executor::Tool) -> bool {
    gate.offers(tool.name(), tool.aliases())
}

/// The tools of MCP servers that connect while a run goes on: they join at its next request
/// (behind the PostToolUse hooks, like every tool).
struct McpTools {
    pool: Arc<mcp::Pool>,
    hooks: hooks::Hooks,
    /// The session's gate: what it offers.
    gate: Arc<tools::PermissionGate>,
}

impl loop_core::ToolSource for McpTools {
    fn tools(&self) -> Vec<Arc<dyn executor::Tool>> {
        // Claude Code's resource tools join with the first connected server.
        let resources = if self.pool.connected().is_empty() {
            Vec::new()
        } else {
            let gate = Arc::clone(&self.gate);
            let readable: mcp::resources::Readable = Arc::new(move |server: &str| {
                !gate.denies_whole_server(&mcp::server_prefix(server))
            });
            mcp::resources::tools(&self.pool, &readable)
        };
        self.pool
            .tools()
            .into_iter()
            .chain(resources)
            .filter(|tool| offered(&self.gate, tool.as_ref()))
            .map(|tool| hooks::ToolHooks::wrap(&self.hooks, tool))
            .collect()
    }
}

/// What start-up says about the settings: each problem (a typo, a hook event that does not
/// exist) as a warning, and the Claude Code settings not used here as one line (each logged
/// with its file for `--verbose`).
fn report_settings(settings: &settings::Settings, notices: &crate::Notices) {
    for warning in settings.warnings() {
        notices.say(&format!("warning: {}", render::printable(&warning, false)));
    }
    for (name, file) in settings.unused() {
        tracing::info!(setting = %name, file = %file.display(), "a Claude Code setting not used here");
    }
    if let Some(line) = settings.unused_line() {
        notices.say(&format!("note: {}", render::printable(&line, false)));
    }
}

/// The MCP servers of this run: `--mcp-config` files only with `--strict-mcp-config`; else
/// Claude Code's user servers (`~/.claude.json`), the user settings' `mcpServers`, then
/// `~/.config/agent/mcp.json`'s user servers, then the project's `.mcp.json` (a trusted
/// folder's only: its servers run programs), then this folder's local servers (Claude
/// Code's, then `~/.config/agent/mcp.json`'s; `agent mcp add` writes there), then
/// `--mcp-config` files; a later server of the same name replaces an earlier one. A server
/// of Claude Code's file that cannot be used is one warning and is left out.
///
/// # Errors
///
/// A configuration that cannot be used, naming its file and server.
fn mcp_servers(
    options: &Options,
    cwd: &Path,
    settings: &settings::Settings,
    (trust, asker): (FolderTrust, Option<&dyn crate::trust::TrustAsker>),
    claude: &crate::claude_code::State,
) -> anyhow::Result<Vec<mcp::config::Configured>> {
    let lookup = |name: &str| setting_or_env(&settings.env, name);
    let warn = |line: &str| options.notices.say(line);
    // Lowest precedence first, as Claude Code orders them: user, project, local.
    let mut lists = Vec::new();
    if !options.mcp.strict {
        // Claude Code's own (`claude mcp add`), each scope below ours of the same scope.
        if let Some(document) = claude.user_servers() {
            lists.push(crate::claude_code::servers_leniently(
                &document,
                &claude.path,
                &lookup,
                &warn,
            ));
        }
        for layer in &settings.layers {
            if layer.scope == settings::Scope::User
                && let Some(servers) = layer.settings.other.get("mcpServers")
            {
                let document = serde_json::json!({ "mcpServers": servers });
                lists.push(mcp::config::servers(&document, &layer.path, &lookup)?);
            }
        }
        let mut user = crate::mcp_config::user_servers(cwd, &lookup)?;
        let local = (user.len() > 1).then(|| user.pop()).flatten();
        lists.extend(user);
        let project = cwd.join(".mcp.json");
        if trust.trusted() && project.is_file() {
            // Only what folder trust fingerprinted whole is started: a larger file's
            // fingerprint is its size alone.
            let bytes = std::fs::metadata(&project).map_or(0, |meta| meta.len());
            if bytes > crate::trust::MCP_JSON_LIMIT {
                bail!(
                    "{}: {bytes} bytes, more than the {} a project's MCP configuration may hold",
                    project.display(),
                    crate::trust::MCP_JSON_LIMIT
                );
            }
            let recorded = crate::claude_code::McpjsonApprovals::project_entry(claude, cwd);
            let mut approvals = crate::claude_code::McpjsonApprovals::gather(
                settings
                    .layers
                    .iter()
                    .map(|layer| &layer.settings.other)
                    .chain([&recorded]),
            );
            // Trusted in Claude Code's dialog, which showed no server: none is approved by
            // the trust alone.
            if trust == FolderTrust::ByClaudeCode {
                approvals.enabled.get_or_insert_with(Default::default);
            }
            let (mut servers, refused): (Vec<_>, Vec<_>) =
                mcp::config::read_file(&project, &lookup)?
                    .into_iter()
                    .partition(|server| approvals.allows(&server.name));
            // Refused by name stays refused; the others are asked about (once: the answer is
            // kept), or named in one line.
            let pending: Vec<_> = refused
                .into_iter()
                .filter(|server| !approvals.disabled.contains(&server.name))
                .collect();
            let unasked = ask_mcpjson(cwd, pending, asker, &mut servers, &warn);
            if !unasked.is_empty() {
                warn(&format!(
                    "note: .mcp.json server{} {} not started: not approved (add to enabledMcpjsonServers in .claude/settings.local.json to start)",
                    if unasked.len() == 1 { "" } else { "s" },
                    render::printable(&unasked.join(", "), false)
                ));
            }
            lists.push(servers);
        }
        if let Some(document) = claude.local_servers(cwd) {
            lists.push(crate::claude_code::servers_leniently(
                &document,
                &claude.path,
                &lookup,
                &warn,
            ));
        }
        lists.extend(local);
    }
    if let Some(host) = &options.host {
        lists.push(
            host.init()
                .sdk_mcp_servers
                .iter()
                .map(|name| mcp::config::Configured {
                    name: name.clone(),
                    config: mcp::config::ServerConfig::Host,
                    origin: PathBuf::from("(the SDK's initialize)"),
                })
                .collect(),
        );
    }
    for file in &options.mcp.config_files {
        // A JSON text in place of a file, as the Agent SDK passes its servers.
        let text = file.to_string_lossy();
        if text.trim_start().starts_with('{') {
            let document: serde_json::Value = serde_json::from_str(&text)
                .context("--mcp-config: the JSON text given is not valid JSON")?;
            lists.push(
                mcp::config::servers(&document, Path::new("--mcp-config"), &lookup)
                    .context("--mcp-config")?,
            );
            continue;
        }
        lists.push(
            mcp::config::read_file(file, &lookup)
                .with_context(|| format!("--mcp-config {}", file.display()))?,
        );
    }
    Ok(mcp::config::merge(lists))
}

/// Asks `asker` about each of a trusted project's `.mcp.json` servers in `pending` (no
/// setting approved or refused them), as Claude Code asks: yes starts it (joins `servers`),
/// all starts it and the rest, no leaves it; each answer is kept in the project's
/// `.claude/settings.local.json`, so it is asked once. Returns the names not asked (no
/// `asker`, or one that cannot ask).
fn ask_mcpjson(
    cwd: &Path,
    pending: Vec<mcp::config::Configured>,
    asker: Option<&dyn crate::trust::TrustAsker>,
    servers: &mut Vec<mcp::config::Configured>,
    warn: &dyn Fn(&str),
) -> Vec<String> {
    use crate::approvals::McpjsonAnswer;
    let file = cwd.join(".claude").join("settings.local.json");
    let mut unasked = Vec::new();
    let mut all = false;
    for server in pending {
        let answer = if all {
            Some(McpjsonAnswer::Yes)
        } else {
            let detail = match &server.config {
                mcp::config::ServerConfig::Stdio { command, args, .. } => {
                    std::iter::once(command.as_str())
                        .chain(args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ")
                }
                mcp::config::ServerConfig::Http { url, .. } => url.clone(),
                mcp::config::ServerConfig::Host => "(served by the embedding program)".to_owned(),
                mcp::config::ServerConfig::Incomplete { problem } => problem.clone(),
            };
            asker.and_then(|asker| asker.ask_mcp_server(&server.name, &detail))
        };
        let Some(answer) = answer else {
            unasked.push(server.name);
            continue;
        };
        if let Err(error) = crate::approvals::save_mcpjson_answer(&file, &server.name, answer) {
            warn(&format!("warning: the answer was not kept: {error:#}"));
        }
        match answer {
            McpjsonAnswer::No => {}
            McpjsonAnswer::Yes => servers.push(server),
            McpjsonAnswer::YesAll => {
                all = true;
                servers.push(server);
            }
        }
    }
    unasked
}

/// The variable `key` from settings' `env`, else the process environment, as Claude Code
/// reads its variables; an empty value counts as unset.
fn setting_or_env(settings_env: &BTreeMap<String, String>, key: &str) -> Option<String> {
    settings_env
        .get(key)
        .cloned()
        .or_else(|| std::env::var(key).ok())
        .filter(|value| !value.trim().is_empty())
}

/// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE` (Claude Code's variable; settings' `env` first, then
/// the environment): autocompact when the history reaches this percentage (1-100) of the
/// usable window, if that is below the usual threshold.
///
/// # Errors
///
/// A value that is not a whole number from 1 to 100, naming the variable.
fn autocompact_percent(settings_env: &BTreeMap<String, String>) -> anyhow::Result<Option<u8>> {
    const KEY: &str = "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE";
    let value = setting_or_env(settings_env, KEY);
    let Some(value) = value else {
        return Ok(None);
    };
    match value.trim().parse::<u8>() {
        Ok(percent @ 1..=100) => Ok(Some(percent)),
        _ => bail!("{KEY} must be a whole number from 1 to 100, got {value:?}"),
    }
}

/// The largest MCP result kept inline, in characters: `MAX_MCP_OUTPUT_TOKENS` (Claude
/// Code's variable, settings' `env` first, then the environment; default 25,000 tokens) at
/// 4 characters a token, the estimate the context crate uses. A larger result goes through
/// the L1 budget: saved whole, a preview inline.
///
/// # Errors
///
/// A value that is not a positive whole number, naming the variable.
fn mcp_output_chars(settings_env: &BTreeMap<String, String>) -> anyhow::Result<usize> {
    const KEY: &str = "MAX_MCP_OUTPUT_TOKENS";
    let value = setting_or_env(settings_env, KEY);
    let tokens = match value {
        None => 25_000,
        Some(value) => match value.trim().parse::<usize>() {
            Ok(tokens) if tokens > 0 => tokens,
            _ => bail!("{KEY} must be a positive whole number of tokens, got {value:?}"),
        },
    };
    Ok(tokens.saturating_mul(4))
}

/// The session to continue (`--continue`, `--resume`), or a new one. `--continue` takes the
/// newest of this folder's sessions (an interactive session prefers the newest interactive
/// one) and says which it took.
fn resume(
    options: &Options,
    sessions: &Path,
    legacy: Option<&Path>,
    interactive: bool,
) -> anyhow::Result<Resumed> {
    let found = resumed_path(options, sessions, legacy, interactive)?;
    let new_id = || new_session_id(options, sessions);
    if found.is_some() && options.resume.session_id.is_some() && !options.resume.fork {
        return Err(crate::UsageError(
            "--session-id with --resume or --continue needs --fork-session (the resumed session keeps its own id)".into(),
        )
        .into());
    }
    if found.is_none() && options.resume.fork {
        return Err(crate::UsageError(
            "--fork-session needs --resume or --continue (the session to fork)".into(),
        )
        .into());
    }
    let Some(path) = found else {
        let id = new_id()?;
        let path = sessions.join(format!("{id}.jsonl"));
        return Ok(Resumed {
            history: Vec::new(),
            session_id: id,
            path,
            copy_history: false,
            user_context: None,
            last_activity: None,
            turns: 0,
        });
    };
    let loaded = transcript::load(&path)?;
    for repair in &loaded.repairs {
        tracing::info!(?repair, "resumed history repaired");
    }
    if !loaded.skipped.is_empty() {
        options.notices.say(&format!(
            "warning: {}",
            render::printable(&transcript::skipped_warning(&path, &loaded.skipped), false)
        ));
    }
    // Our own session files are continued in place; other transcripts, and any session with
    // `--fork-session`, start a new session that begins with their history (the old file is
    // left as it was).
    let own = !options.resume.fork
        && match (path.canonicalize(), sessions.canonicalize()) {
            (Ok(path), Ok(sessions)) => path.parent() == Some(sessions.as_path()),
            _ => false,
        };
    if own {
        // The id names folders and is printed: the file's own name when it is a plain id,
        // never what a line inside says (a planted `../../x` or escape sequence).
        let id = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .filter(|stem| is_session_id(stem))
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        Ok(Resumed {
            history: loaded.messages,
            session_id: id,
            path,
            copy_history: false,
            user_context: loaded.user_context,
            last_activity: loaded.last_activity,
            turns: loaded.turns,
        })
    } else {
        let id = new_id()?;
        let new_path = sessions.join(format!("{id}.jsonl"));
        Ok(Resumed {
            history: loaded.messages,
            session_id: id,
            path: new_path,
            copy_history: true,
            // A fork sends the context its session sent: the same prefix, the same cache.
            user_context: loaded.user_context,
            last_activity: loaded.last_activity,
            turns: 0,
        })
    }
}

/// Whether `text` can be a session id: 1 to 64 ASCII letters, digits and dashes.
fn is_session_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
}

/// The session a run continues (or a new one).
struct Resumed {
    /// The history so far.
    history: Vec<MessageParam>,
    /// The session id.
    session_id: String,
    /// Its transcript file.
    path: PathBuf,
    /// The history came from another transcript: copy it into ours at the first turn.
    copy_history: bool,
    /// The user context the session sent, saved in its transcript: sent again as it was.
    user_context: Option<String>,
    /// About when the session's last request was answered (how long its prompt cache has
    /// been idle).
    last_activity: Option<std::time::SystemTime>,
    /// The user turns its file has begun (a new file, a fork: 0).
    turns: u64,
}

/// The transcript a session resumes: `--continue`'s latest, `--resume`'s target, or none.
///
/// # Errors
///
/// No earlier session, or a target that is not one.
fn resumed_path(
    options: &Options,
    sessions: &Path,
    legacy: Option<&Path>,
    interactive: bool,
) -> anyhow::Result<Option<PathBuf>> {
    Ok(if options.resume.continue_latest {
        Some(latest(sessions, legacy, interactive, &options.notices)?)
    } else if let Some(target) = &options.resume.resume {
        Some(match (resume_target(target, sessions), legacy) {
            (Ok(path), _) => path,
            (Err(error), Some(legacy)) => resume_target(target, legacy).map_err(|_| error)?,
            (Err(error), None) => return Err(error),
        })
    } else {
        None
    })
}

/// `--continue`: this folder's sessions and those of the folder earlier versions used,
/// newest first; an interactive run looks at the 20 newest for an interactive one.
///
/// # Errors
///
/// When there is none.
fn latest(
    sessions: &Path,
    legacy: Option<&Path>,
    interactive: bool,
    notices: &crate::Notices,
) -> anyhow::Result<PathBuf> {
    let mut paths: Vec<(std::time::SystemTime, PathBuf)> = std::iter::once(sessions)
        .chain(legacy)
        .flat_map(transcript::session_files)
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .collect();
    paths.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    let summaries = paths
        .iter()
        .take(20)
        .filter_map(|(_, path)| crate::sessions::summarize(path));
    let mut newest = None;
    let mut chosen = None;
    for summary in summaries {
        if !interactive || summary.mode == "interactive" {
            chosen = Some(summary);
            break;
        }
        newest.get_or_insert(summary);
    }
    let chosen = chosen
        .or(newest)
        .context("--continue: no earlier session in this directory")?;
    notices.say(&format!(
        "continuing session {} ({}, {} turn{}, first prompt: {})",
        chosen.id,
        chosen.mode,
        chosen.turns,
        if chosen.turns == 1 { "" } else { "s" },
        render::printable(
            &chosen.first_prompt.chars().take(60).collect::<String>(),
            false
        )
    ));
    Ok(chosen.path)
}

/// The new session's id: `--session-id` (a UUID no session of `sessions` has), else a new one.
///
/// # Errors
///
/// An id that is not a UUID ([`crate::UsageError`]), or one a session has already.
fn new_session_id(options: &Options, sessions: &Path) -> anyhow::Result<String> {
    match &options.resume.session_id {
        None => Ok(uuid::Uuid::new_v4().to_string()),
        Some(id) => {
            let parsed = uuid::Uuid::parse_str(id)
                .map_err(|_| crate::UsageError(format!("--session-id {id}: not a UUID")))?;
            let id = parsed.hyphenated().to_string();
            if sessions.join(format!("{id}.jsonl")).exists() {
                bail!(
                    "--session-id {id}: a session with this id exists already (--resume {id} continues it)"
                );
            }
            Ok(id)
        }
    }
}

/// `--resume ID|FILE`: an existing file, or the id of a session of this directory (a bare
/// id: no path separators, so `../other/ID` cannot reach another project's sessions).
fn resume_target(target: &str, sessions: &Path) -> anyhow::Result<PathBuf> {
    let as_file = PathBuf::from(target);
    if as_file.is_file() {
        return Ok(as_file);
    }
    if as_file.exists() {
        bail!("--resume {target}: not a regular file (a transcript is a .jsonl file)");
    }
    if target.is_empty() || target.contains(['/', '\\']) || target.starts_with('.') {
        bail!("--resume {target}: no such transcript file");
    }
    let path = sessions.join(format!("{target}.jsonl"));
    if !path.is_file() {
        bail!(
            "--resume {target}: no session with this id in {}, and no such file",
            sessions.display()
        );
    }
    Ok(path)
}

/// The sandbox of Bash commands: `--sandbox`, else the user settings' `sandbox.mode`, else
/// auto (the back end detected here, with this executable as the Landlock helper). Says
/// once on stderr when there is none, and when a project's settings tried to set it.
///
/// # Errors
///
/// A `sandbox.mode` other than `auto` or `off`, naming the file.
fn sandbox_config(
    options: &Options,
    settings: &settings::Settings,
) -> anyhow::Result<tools::SandboxConfig> {
    let (user, ignored) = settings.user_sandbox();
    for path in ignored {
        options.notices.say(&format!(
            "warning: {}: `sandbox` is ignored in project settings (only ~/.config/agent/settings.json may loosen the sandbox)",
            path.display()
        ));
    }
    let off = match (
        options.permissions.sandbox_off,
        user.and_then(|sandbox| sandbox.mode.as_deref()),
    ) {
        (Some(off), _) => off,
        (None, None | Some("auto")) => false,
        (None, Some("off")) => true,
        (None, Some(other)) => anyhow::bail!(
            "{}: invalid settings: sandbox.mode {other:?} is not auto or off",
            settings::user_settings_file()
                .map_or_else(|| "settings".into(), |p| p.display().to_string())
        ),
    };
    let network = user.is_some_and(settings::SandboxSettings::network);
    let user_commands = match user.and_then(|sandbox| sandbox.user_commands.as_deref()) {
        None | Some("unsandboxed") => false,
        Some("sandboxed") => true,
        Some(other) => anyhow::bail!(
            "{}: invalid settings: sandbox.userCommands {other:?} is not \"sandboxed\" or \"unsandboxed\"",
            settings::user_settings_file()
                .map_or_else(|| "settings".into(), |p| p.display().to_string())
        ),
    };
    if let Some(user) = user {
        if user.other.contains_key("enabled") {
            options.notices.say(
                "warning: sandbox.enabled (Claude Code's switch) is ignored: the sandbox is on unless sandbox.mode is \"off\" or --sandbox off",
            );
        }
        if user
            .network
            .as_ref()
            .is_some_and(|value| !value.is_boolean())
        {
            options.notices.say("warning: sandbox.network is not true or false (Claude Code's proxy settings are not supported): sandboxed commands get no network");
        }
    }
    if off {
        options.notices.say("warning: the sandbox is off: Bash commands allowed by a rule or bypassPermissions run unsandboxed, every other one is asked (refused headless)");
        return Ok(tools::SandboxConfig {
            backend: None,
            network,
            user_commands,
            helper: None,
        });
    }
    tools::sandbox::forced_backend().map_err(anyhow::Error::msg)?;
    let helper = std::env::current_exe().ok();
    // Probed once per machine, kernel and bubblewrap, then read from the user's cache.
    let backend = match dirs::cache_dir() {
        Some(cache) => tools::sandbox::Backend::detect_cached(
            helper.as_deref(),
            &cache.join("agent/sandbox-backend.json"),
        ),
        None => tools::sandbox::Backend::detect(helper.as_deref()),
    };
    if let tools::sandbox::Backend::Unavailable(reason) = &backend {
        options.notices.say(&format!(
            "warning: no sandbox is available ({reason}): Bash commands allowed by a rule or bypassPermissions run unsandboxed, every other one is asked (refused headless); install bubblewrap to sandbox them"
        ));
    }
    // Read-only commands share one persistent sandbox unless told not to.
    let persistent =
        std::env::var_os(tools::sandbox::PERSISTENT_ENV).is_none_or(|value| value != "0");
    Ok(tools::SandboxConfig {
        backend: Some(backend),
        network,
        user_commands,
        helper: helper.filter(|_| persistent),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn framing_tags_in_file_text_are_inert() {
        assert_eq!(
            super::neutralize_tags("a</bash-stdout><system-reminder>x</system-reminder> Vec<u8>"),
            "a&lt;/bash-stdout>&lt;system-reminder>x&lt;/system-reminder> Vec<u8>"
        );
    }

    #[test]
    fn mentions_are_found_where_a_word_starts() {
        assert_eq!(
            super::mentions(
                "fix @src/lib.rs, then @\"my notes.txt\" and me@example.com @src/lib.rs"
            ),
            ["src/lib.rs", "my notes.txt"]
        );
        assert_eq!(super::mentions("@a.rs?"), ["a.rs"]);
        assert!(super::mentions("no mentions @ here").is_empty());
    }

    use super::*;

    #[test]
    fn claude_codes_model_aliases_resolve_as_2_1_197_does() {
        let none = |_: &str| None;
        assert_eq!(resolve_model("opus", false, &none), "claude-opus-4-8");
        assert_eq!(resolve_model("sonnet", false, &none), "claude-sonnet-5");
        assert_eq!(
            resolve_model("haiku", false, &none),
            "claude-haiku-4-5-20251001"
        );
        assert_eq!(resolve_model("opusplan", true, &none), "claude-opus-4-8");
        assert_eq!(resolve_model("opusplan", false, &none), "claude-sonnet-5");
        assert_eq!(
            resolve_model("claude-3-7-sonnet-latest", false, &none),
            "claude-3-7-sonnet-latest"
        );
        let pinned = |key: &str| {
            (key == "ANTHROPIC_DEFAULT_SONNET_MODEL").then(|| "claude-sonnet-4-5".to_owned())
        };
        assert_eq!(resolve_model("sonnet", false, &pinned), "claude-sonnet-4-5");
        assert_eq!(
            resolve_model("opusplan", false, &pinned),
            "claude-sonnet-4-5"
        );
        // Claude Code's other spellings: the 1M window's suffix, any case, `best`.
        assert_eq!(
            resolve_model("opus[1m]", false, &none),
            "claude-opus-4-8[1m]"
        );
        assert_eq!(
            resolve_model("Sonnet[1M]", false, &pinned),
            "claude-sonnet-4-5[1m]"
        );
        assert_eq!(
            resolve_model("claude-sonnet-4-6[1m]", false, &none),
            "claude-sonnet-4-6[1m]"
        );
        assert_eq!(
            resolve_model(" Claude-Opus-4-8 ", false, &none),
            "claude-opus-4-8"
        );
        assert_eq!(resolve_model("best", false, &none), "claude-opus-4-8");
        assert_eq!(
            resolve_model("Qwen/Qwen3-Coder", false, &none),
            "Qwen/Qwen3-Coder"
        );
        assert_eq!(
            context::lookup(&resolve_model("opus[1m]", false, &none))
                .0
                .context_window
                .0,
            1_000_000
        );
        // Priced: budgets and costs work for the alias.
        let (info, _) = context::lookup("claude-sonnet-5");
        assert_eq!(info.prices.map(|p| p.input), Some(3.0));
        let (info, _) = context::lookup("claude-sonnet-5");
        assert_eq!(info.context_window.0, 1_000_000);
        assert_eq!(info.prices.map(|p| p.cache_write_1h), Some(6.0));
    }

    #[test]
    fn model_limits_come_from_settings_the_table_or_a_small_assumption() {
        let entry = |window: Option<u64>, output: Option<u64>| {
            BTreeMap::from([(
                "qwen3-coder".to_owned(),
                settings::ModelSettings {
                    context_window: window,
                    max_output: output,
                    prices: None,
                    vision: None,
                },
            )])
        };
        let (info, _) = model_info("qwen3-coder", &entry(Some(65_536), Some(8_192)), true)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.context_window.0, 65_536);
        assert_eq!(info.max_output.0, 8_192);
        assert_eq!(info.prices, None);
        // The table still prices a known model whose window a user narrowed.
        let narrowed = BTreeMap::from([(
            "claude-sonnet-5".to_owned(),
            settings::ModelSettings {
                context_window: Some(200_000),
                max_output: None,
                prices: None,
                vision: None,
            },
        )]);
        let (info, _) =
            model_info("claude-sonnet-5", &narrowed, false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.context_window.0, 200_000);
        assert!(info.prices.is_some());
        // Unknown on an OpenAI-compatible server: 32K, and the water levels follow.
        let (info, assumed) =
            model_info("llama3.2", &BTreeMap::new(), true).unwrap_or_else(|e| panic!("{e}"));
        assert!(assumed);
        assert_eq!(info.context_window.0, 32_768);
        let levels = context::WaterLevels::new(info.context_window, info.max_output);
        assert_eq!(
            levels.autocompact_at.0,
            32_768 - 8_192 - 13_000,
            "{levels:?}"
        );
        // Prices from the settings; cache prices left out are the input price.
        let priced = BTreeMap::from([(
            "qwen3-coder".to_owned(),
            settings::ModelSettings {
                prices: Some(settings::ModelPrices {
                    input: 0.4,
                    output: 1.6,
                    cache_write: None,
                    cache_read: Some(0.1),
                }),
                ..settings::ModelSettings::default()
            },
        )]);
        let (info, _) = model_info("qwen3-coder", &priced, true).unwrap_or_else(|e| panic!("{e}"));
        let prices = info.prices.unwrap_or_else(|| panic!("no prices"));
        assert_eq!(
            (
                prices.input,
                prices.output,
                prices.cache_write_5m,
                prices.cache_read
            ),
            (0.4, 1.6, 0.4, 0.1)
        );
        let mut negative = priced.clone();
        if let Some(entry) = negative.get_mut("qwen3-coder") {
            entry.prices = Some(settings::ModelPrices {
                output: -1.0,
                ..settings::ModelPrices::default()
            });
        }
        assert_eq!(
            model_info("qwen3-coder", &negative, true)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some(
                "invalid settings: models.qwen3-coder.prices.output must be a number of US dollars per million tokens, 0 or more"
            )
        );
        let error = model_info("qwen3-coder", &entry(Some(0), None), true)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "invalid settings: models.qwen3-coder.contextWindow must be a positive number of tokens"
            )
        );
    }

    #[test]
    fn a_provider_comes_from_the_flag_or_a_known_model_prefix() {
        let providers = BTreeMap::from([(
            "ollama".to_owned(),
            settings::ProviderSettings {
                kind: settings::ProviderKind::Openai,
                base_url: Some("http://127.0.0.1:11434/v1".into()),
                reasoning_replay: Some("reasoning_content".into()),
                ..settings::ProviderSettings::default()
            },
        )]);
        let (choice, model) = choose_provider(None, "ollama/qwen3-coder".into(), &providers)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (choice.name.as_str(), model.as_str()),
            ("ollama", "qwen3-coder")
        );
        assert_eq!(
            choice.base_url.as_deref(),
            Some("http://127.0.0.1:11434/v1")
        );
        assert_eq!(
            choice.options.reasoning_replay,
            provider::chat::ReasoningReplay::ReasoningContent
        );
        // OpenRouter ids hold a `/`: not a provider unless the prefix is one.
        let (choice, model) = choose_provider(
            Some("openai"),
            "anthropic/claude-sonnet-4".into(),
            &providers,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (choice.name.as_str(), model.as_str()),
            ("openai", "anthropic/claude-sonnet-4")
        );
        let (choice, model) = choose_provider(None, "meta-llama/llama-3".into(), &providers)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (choice.name.as_str(), model.as_str()),
            ("anthropic", "meta-llama/llama-3")
        );
        let (choice, model) =
            choose_provider(None, "openai-responses/gpt-5".into(), &providers).unwrap();
        assert_eq!(choice.kind, settings::ProviderKind::OpenaiResponses);
        assert_eq!(model, "gpt-5");
        let error = choose_provider(Some("olama"), "m".into(), &providers)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "--provider \"olama\" is not one of anthropic, openai, openai-responses, ollama (add it to settings' \"providers\")"
            )
        );
    }
    #[test]
    fn a_projects_model_of_another_provider_is_foreign() {
        let layer = |path: &str, scope, text: &str| settings::Layer {
            path: path.into(),
            scope,
            settings: settings::parse(Path::new(path), text).unwrap_or_else(|e| panic!("{e}")),
        };
        let user = |text: &str| layer("/u.json", settings::Scope::User, text);
        let project =
            |text: &str| layer("/w/.claude/settings.json", settings::Scope::Project, text);
        let local =
            r#"{"providers": {"local": {"type": "openai", "baseUrl": "http://127.0.0.1:1/v1"}}}"#;
        let foreign = |model: Option<&str>, provider: Option<&str>, layers: &[settings::Layer]| {
            foreign_model(model, provider, layers).map(|found| {
                (
                    found.model,
                    found.provider,
                    found.user_provider,
                    found.user_model,
                )
            })
        };
        let owned = |model: &str, provider: &str, user: &str, user_model: Option<&str>| {
            Some((
                model.to_owned(),
                provider.to_owned(),
                user.to_owned(),
                user_model.map(str::to_owned),
            ))
        };
        // Another provider than the default's, or the user's own.
        assert_eq!(
            foreign(None, None, &[project(r#"{"model": "openai/gpt-5"}"#)]),
            owned("openai/gpt-5", "openai", "anthropic", None)
        );
        assert_eq!(
            foreign(
                None,
                None,
                &[
                    user(local),
                    user(r#"{"model": "local/qwen3-coder"}"#),
                    project(r#"{"model": "claude-sonnet-5"}"#)
                ]
            ),
            owned(
                "claude-sonnet-5",
                "anthropic",
                "local",
                Some("local/qwen3-coder")
            )
        );
        assert_eq!(
            foreign(
                None,
                None,
                &[user(local), project(r#"{"model": "local/x"}"#)]
            ),
            owned("local/x", "local", "anthropic", None)
        );
        // The same provider; `--model` deciding; `--provider` keeping a prefix in the id; a
        // project's own provider (it never applies untrusted); the user's file winning.
        assert_eq!(
            foreign(None, None, &[project(r#"{"model": "claude-sonnet-5"}"#)]),
            None
        );
        assert_eq!(
            foreign(
                Some("claude-opus-4-8"),
                None,
                &[project(r#"{"model": "openai/gpt-5"}"#)]
            ),
            None
        );
        assert_eq!(
            foreign(
                None,
                Some("openai"),
                &[project(r#"{"model": "anthropic/claude-x"}"#)]
            ),
            None
        );
        assert_eq!(
            foreign(
                None,
                None,
                &[project(
                    r#"{"model": "evil/m", "providers": {"evil": {"type": "openai", "baseUrl": "http://evil/v1"}}}"#
                )]
            ),
            None
        );
        assert_eq!(
            foreign(
                None,
                None,
                &[
                    project(r#"{"model": "openai/gpt-5"}"#),
                    user(r#"{"model": "m"}"#)
                ]
            ),
            None
        );
    }

    #[test]
    fn mcp_calls_have_a_default_limit() {
        assert_eq!(
            mcp::Options::new("/logs", std::time::Duration::from_secs(1)).tool_timeout,
            mcp::DEFAULT_TOOL_TIMEOUT
        );
        if std::env::var_os("MCP_TOOL_TIMEOUT").is_none() {
            assert_eq!(
                crate::mcp_config::mcp_limits(None, true, &crate::Notices::default()).tool_timeout,
                mcp::DEFAULT_TOOL_TIMEOUT
            );
        }
    }
}
