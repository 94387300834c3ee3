//! Subagents of a session: agent definitions from the folders, and the host that builds each
//! subagent's collaborators for loop-core's Task tool ([`loop_core::subagent`]).
//!
//! Definitions, lowest precedence first (a later one of the same name wins, a project's over
//! the user's as in Claude Code): the built-in `general-purpose` and `Explore`, then
//! `~/.claude/agents/*.md`, `~/.config/agent/agents/*.md`, then `.claude/agents/*.md`,
//! `.agent/agents/*.md`. A project's definitions apply only in a trusted folder: an agent is a
//! system prompt and a tool list, which a cloned repository must not choose by itself. A
//! definition that takes a built-in agent's name replaces its prompt but keeps its limits: a
//! custom `Explore` gets Explore's read-only tools and plan mode, whatever it lists.
//!
//! A subagent gets a fresh tool set (its own read-file state) built like the session's: the
//! same mode, rules, sandbox, prompter and hooks, so it can never do more than its parent;
//! Explore runs in plan mode (its commands read-only). Its events reach the session's renderer
//! as [`SubagentEvent`]s, its history goes to `<session folder>/subagents/agent-<id>.jsonl`,
//! and SubagentStop hooks run when it would stop.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use executor::{CanUseTool, Tool, Workspace};
use loop_core::subagent::{
    AgentDefinition, AgentSource, ChildRun, ForkPoint, MAX_DEPTH, Spawn, SubagentHost, TASK_TOOL,
    TaskScope, TaskTool,
};
use loop_core::{Deps, LoopConfig, LoopEvent, LoopOutcome, NoStopHook, StopHook};
use protocol::{MessageParam, ToolUseId};
use provider::AnthropicClient;
use tokio::sync::mpsc;

use crate::session::ModelSettings;
use crate::settings::MAX_AGENT_BYTES;
use crate::transcript::Transcript;
use crate::{adapter, hooks, tooling};

/// The most agent files one folder gives (every agent's description goes into every
/// request, in the Task tool's description).
const MAX_AGENTS_PER_FOLDER: usize = 50;

/// Every agent a session offers: the built-in ones, the user's, and a trusted project's. The
/// definitions of an untrusted project are named in one warning and skipped; a file that
/// cannot be used is skipped with a warning naming it.
pub fn definitions(cwd: &Path, trusted: bool, notices: &crate::Notices) -> Vec<AgentDefinition> {
    let built_ins = AgentDefinition::built_in();
    let mut found: BTreeMap<String, AgentDefinition> = built_ins
        .iter()
        .map(|definition| (definition.name.clone(), definition.clone()))
        .collect();
    let mut folders: Vec<(PathBuf, AgentSource)> = Vec::new();
    if let Some(claude) = crate::claude_code::user_dir() {
        folders.push((claude.join("agents"), AgentSource::User));
    }
    if let Some(config) = dirs::config_dir() {
        folders.push((config.join("agent").join("agents"), AgentSource::User));
    }
    folders.push((cwd.join(".claude").join("agents"), AgentSource::Project));
    folders.push((cwd.join(".agent").join("agents"), AgentSource::Project));
    let boundary = std::fs::canonicalize(crate::settings::project_folder(cwd)).ok();
    let mut untrusted = Vec::new();
    for (folder, source) in folders {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        if source == AgentSource::Project {
            let inside = std::fs::canonicalize(&folder)
                .ok()
                .zip(boundary.as_ref())
                .is_some_and(|(real, boundary)| real.starts_with(boundary));
            if !inside {
                warn(
                    notices,
                    &format!(
                        "{} is skipped: it leads outside the project",
                        folder.display()
                    ),
                );
                continue;
            }
        }
        let mut files: Vec<PathBuf> = entries
            .flatten()
            // Regular files only, links not followed: a FIFO must not stall start-up.
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
            .collect();
        files.sort();
        if files.len() > MAX_AGENTS_PER_FOLDER {
            warn(
                notices,
                &format!(
                    "{}: {} agent files, only the first {MAX_AGENTS_PER_FOLDER} are read",
                    folder.display(),
                    files.len()
                ),
            );
            files.truncate(MAX_AGENTS_PER_FOLDER);
        }
        for path in files {
            if source == AgentSource::Project && !trusted {
                untrusted.push(path);
                continue;
            }
            match read(&path).and_then(|text| parse(&path, source.clone(), &text)) {
                Ok(mut definition) => {
                    if let Some(built_in) = built_ins
                        .iter()
                        .find(|built_in| built_in.name == definition.name)
                        && let Some(kept) = keep_limits(&mut definition, built_in)
                    {
                        warn(
                            notices,
                            &format!(
                                "agent {}: {} is a built-in agent's name, so it keeps that agent's limits: {kept}",
                                path.display(),
                                definition.name
                            ),
                        );
                    }
                    found.insert(definition.name.clone(), definition);
                }
                Err(reason) => warn(
                    notices,
                    &format!("agent {} is skipped: {reason}", path.display()),
                ),
            }
        }
    }
    if !untrusted.is_empty() {
        let mut names: Vec<String> = untrusted
            .iter()
            .take(10)
            .map(|path| path.display().to_string())
            .collect();
        if untrusted.len() > names.len() {
            names.push(format!("and {} more", untrusted.len() - names.len()));
        }
        warn(
            notices,
            &format!(
                "the project's agent definitions are ignored: {} is not a trusted folder ({})",
                cwd.display(),
                names.join(", ")
            ),
        );
    }
    found.into_values().collect()
}

/// Holds `definition`, a user's or project's agent that takes `built_in`'s name, to the
/// built-in's limits: its tools narrowed to the built-in's list (absent or `*`: exactly that
/// list), and the built-in's read-only mode, which [`AgentDefinition::read_only`] gives by
/// name. A custom `Explore` listing Write or Bash stays a read-only agent. What it loses, for
/// one warning; `None` when it asked for nothing beyond the built-in's limits.
fn keep_limits(definition: &mut AgentDefinition, built_in: &AgentDefinition) -> Option<String> {
    let allowed = built_in.tools.as_ref()?;
    let asked = definition.tools.clone();
    let (kept, dropped): (Vec<String>, Vec<String>) = match &asked {
        None => (allowed.clone(), vec!["all tools".to_owned()]),
        Some(listed) if listed.iter().any(|tool| tool == "*") => {
            (allowed.clone(), vec!["*".to_owned()])
        }
        Some(listed) => listed
            .iter()
            .cloned()
            .partition(|tool| allowed.contains(tool)),
    };
    definition.tools = Some(kept);
    let read_only = definition.read_only().then_some(", its commands read-only");
    (!dropped.is_empty()).then(|| {
        format!(
            "only {}{} ({} not given)",
            allowed.join(", "),
            read_only.unwrap_or_default(),
            dropped.join(", ")
        )
    })
}

fn warn(notices: &crate::Notices, message: &str) {
    notices.say(&format!("warning: {}", render::printable(message, false)));
}

fn read(path: &Path) -> Result<String, String> {
    let size = std::fs::metadata(path)
        .map_err(|error| error.to_string())?
        .len();
    if size > MAX_AGENT_BYTES {
        return Err(format!(
            "{size} bytes is more than an agent file may be ({MAX_AGENT_BYTES})"
        ));
    }
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// An agent file in Claude Code's format: frontmatter `name` (else the file's name),
/// `description` (required), `tools` (a comma-separated list; absent: all of the parent's),
/// `model` (`inherit`, an alias or an id), `maxTurns`, then the system prompt.
///
/// # Errors
///
/// What is missing or wrong, naming the key.
pub fn parse(path: &Path, source: AgentSource, text: &str) -> Result<AgentDefinition, String> {
    let (fields, body) = tools::prompt::split_frontmatter(text);
    if fields.is_empty() {
        return Err(
            "it has no frontmatter (a `---` block with at least `description:`, then the system prompt)"
                .to_owned(),
        );
    }
    let name = fields
        .get("name")
        .filter(|name| !name.is_empty())
        .cloned()
        .or_else(|| {
            path.file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    if name.is_empty()
        || name.len() > 64
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/')
        || name == loop_core::subagent::FORK
    {
        return Err(format!("the name {name:?} is not an agent name"));
    }
    let description = fields
        .get("description")
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .ok_or("the frontmatter has no description (when should it be used?)")?;
    let tools = fields
        .get("tools")
        .map(|list| tools::prompt::split_tool_list(list));
    let model = fields
        .get("model")
        .filter(|model| !model.is_empty() && model.as_str() != "inherit")
        .cloned();
    let max_turns = match fields.get("maxTurns") {
        None => None,
        Some(text) => Some(
            text.parse::<u32>()
                .ok()
                .filter(|turns| *turns > 0)
                .ok_or_else(|| format!("maxTurns {text:?} is not a positive number"))?,
        ),
    };
    let system_prompt = body.trim().to_owned();
    if system_prompt.is_empty() {
        return Err("the file has no system prompt after its frontmatter".to_owned());
    }
    Ok(AgentDefinition {
        name,
        description,
        system_prompt,
        tools,
        model,
        max_turns,
        source,
    })
}

/// One event of a subagent's run, for the session's renderer.
#[derive(Clone, Debug)]
pub struct SubagentEvent {
    /// The subagent's id.
    pub agent_id: String,
    /// The Task tool_use that started it.
    pub parent_tool_use_id: ToolUseId,
    /// The Task call's description.
    pub description: String,
    /// The event.
    pub event: LoopEvent,
}

/// What a subagent's tools and gate are built from: the session's own recipe.
#[derive(Clone)]
pub struct Recipe {
    /// The workspace.
    pub workspace: Arc<Workspace>,
    /// The session's permission mode.
    pub mode: tools::PermissionMode,
    /// The session's rules (settings and flags).
    pub rules: tooling::Rules,
    /// Where oversized results go.
    pub results_dir: PathBuf,
    /// Settings' `env` for Bash.
    pub env: Vec<(String, String)>,
    /// The variables holding provider keys (`apiKeyEnv`), kept from commands the user types.
    pub withheld_env: Vec<String>,
    /// The sandbox.
    pub sandbox: tools::SandboxConfig,
    /// Who answers questions (interactive), shared with the session.
    pub prompter: Option<Arc<dyn tools::Prompter>>,
    /// The settings' hooks.
    pub hooks: hooks::Hooks,
    /// Shell lines every model command runs first (what SessionStart hooks wrote to
    /// `CLAUDE_ENV_FILE`).
    pub prelude: String,
    /// Where Write and Edit record their changes (the session's checkpoints, shared by
    /// every subagent: a rewind undoes theirs too).
    pub journal: Option<Arc<dyn tools::WriteJournal>>,
    /// The session's workspace snapshots: every tool call, a subagent's too, waits for the
    /// turn's before-snapshot.
    pub snapshots: Option<Arc<crate::snapshots::Turns>>,
    /// The session's mode, which every subagent's gate follows (the stricter of the two
    /// decides): Shift+Tab to plan reaches a running subagent. `None` before the session's
    /// gate exists.
    pub session_mode: Option<tools::ModeHandle>,
    /// The session's background tasks: a subagent's are the session's too.
    pub background: tools::background::BackgroundTasks,
    /// The web tools' shared part (`None`: WebFetch and WebSearch are not offered).
    pub web: Option<Arc<crate::web::Web>>,
    /// An editor's buffers that Read, Write and Edit go through (`agent acp`), shared by
    /// every subagent.
    pub editor: Option<Arc<dyn tools::EditorFiles>>,
}

/// A tool set built from a [`Recipe`].
pub struct Built {
    /// The tools, wrapped in the PostToolUse hooks.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The gate in front of them: the PreToolUse hooks, the settings guard, the rules.
    pub gate: Arc<dyn CanUseTool>,
    /// The rules' gate itself (turn grants are made there).
    pub permissions: Arc<tools::PermissionGate>,
    /// Which files these tools read changed on disk since.
    pub watch: tools::FileWatch,
}

impl Recipe {
    /// A fresh tool set (its own read-file state) and its gate, wrapped in the hooks: the
    /// session's own, and each subagent's. `mode` replaces the recipe's, except that plan
    /// mode is never replaced by a laxer one.
    ///
    /// # Errors
    ///
    /// [`tools::Error::InvalidRule`] for a rule that does not parse.
    pub fn build(&self, mode: tools::PermissionMode) -> Result<Built, tools::Error> {
        let mode = if self.mode == tools::PermissionMode::Plan {
            tools::PermissionMode::Plan
        } else {
            mode
        };
        let built = tooling::build(self, mode)?;
        let gate: Arc<dyn CanUseTool> = if self.hooks.has(hooks::Event::PreToolUse) {
            Arc::new(hooks::HookedGate::new(
                self.hooks.clone(),
                built.permissions.clone(),
            ))
        } else {
            built.permissions.clone()
        };
        let gate: Arc<dyn CanUseTool> = match &self.snapshots {
            Some(turns) => Arc::new(crate::snapshots::Gate::new(gate, Arc::clone(turns))),
            None => gate,
        };
        let list = built.permissions.todo_list();
        let tools = built
            .tools
            .into_iter()
            .map(|tool| self.wrap(hooks::TaskHooks::wrap(&self.hooks, tool, &list)))
            .collect();
        Ok(Built {
            tools,
            gate,
            permissions: built.permissions,
            watch: built.watch,
        })
    }

    /// `tool` wrapped in the PostToolUse hooks.
    pub fn wrap(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        hooks::ToolHooks::wrap(&self.hooks, tool)
    }
}

/// The session's subagent host for one turn.
pub struct Host {
    recipe: Recipe,
    client: AnthropicClient,
    fallback: Option<adapter::Fallback>,
    models: ModelSettings,
    definitions: Arc<[AgentDefinition]>,
    /// Tools a subagent may be given besides the built-in ones (MCP tools, Skill).
    extra_tools: Vec<Arc<dyn Tool>>,
    events: mpsc::UnboundedSender<SubagentEvent>,
    /// `<session folder>/subagents`.
    transcripts: PathBuf,
    session_id: String,
    cwd: PathBuf,
    /// Whether the folder is trusted (worktrees are made only then).
    trusted: bool,
    open: Mutex<HashMap<String, Transcript>>,
    /// The worktrees of isolated subagents, by agent id, from [`SubagentHost::isolate`] to
    /// [`SubagentHost::release`].
    worktrees: Mutex<HashMap<String, crate::worktree::Worktree>>,
    /// The per-depth limits on subagents running at once.
    running: Arc<[Arc<tokio::sync::Semaphore>]>,
    /// The part of the user context that lists the skills: left out for a subagent without
    /// the Skill tool.
    skills_context: String,
    /// The session's spending limit.
    spend: Option<Arc<dyn loop_core::SpendGuard>>,
    me: Weak<Host>,
}

/// What a [`Host`] is made of.
pub struct HostParts {
    /// The session's recipe.
    pub recipe: Recipe,
    /// The model client.
    pub client: AnthropicClient,
    /// The fallback model's client, when another provider's.
    pub fallback: Option<adapter::Fallback>,
    /// How another model is resolved and sized.
    pub models: ModelSettings,
    /// The agents offered.
    pub definitions: Arc<[AgentDefinition]>,
    /// MCP tools and Skill, as the session has them now.
    pub extra_tools: Vec<Arc<dyn Tool>>,
    /// Where events go.
    pub events: mpsc::UnboundedSender<SubagentEvent>,
    /// `<session folder>/subagents`.
    pub transcripts: PathBuf,
    /// The session's id (its subagents' transcripts carry it).
    pub session_id: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// Whether the folder is trusted (worktrees are made only then).
    pub trusted: bool,
    /// The skills' part of the user context.
    pub skills_context: String,
    /// The session's spending limit, which subagents spend from too.
    pub spend: Option<Arc<dyn loop_core::SpendGuard>>,
}

impl Host {
    /// A host for one turn of a session.
    pub fn new(parts: HostParts) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            recipe: parts.recipe,
            client: parts.client,
            fallback: parts.fallback,
            models: parts.models,
            definitions: parts.definitions,
            extra_tools: parts.extra_tools,
            events: parts.events,
            transcripts: parts.transcripts,
            session_id: parts.session_id,
            cwd: parts.cwd,
            trusted: parts.trusted,
            open: Mutex::new(HashMap::new()),
            worktrees: Mutex::new(HashMap::new()),
            running: TaskScope::limits(),
            skills_context: parts.skills_context,
            spend: parts.spend,
            me: me.clone(),
        })
    }

    /// The main agent's Task tool (its subagents are at depth 1), forking from `fork_point`.
    pub fn task_tool(
        &self,
        parent: LoopConfig,
        fork_point: Arc<ForkPoint>,
    ) -> Option<Arc<dyn Tool>> {
        let host: Arc<dyn SubagentHost> = self.me.upgrade()?;
        Some(self.recipe.wrap(Arc::new(TaskTool::new(
            host,
            TaskScope {
                definitions: Arc::clone(&self.definitions),
                parent,
                depth: 1,
                fork_point: Some(fork_point),
                parent_tools: None,
                running: Arc::clone(&self.running),
            },
        ))))
    }

    fn transcript_path(&self, agent_id: &str) -> PathBuf {
        self.transcripts.join(format!("agent-{agent_id}.jsonl"))
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("definitions", &self.definitions.len())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// The loop settings of a subagent: the parent's, without its turn limit, background
    /// summaries and output-token budget; a new conversation (not a fork) gets its
    /// definition's system prompt and model, and no warm cache.
    fn child_config(&self, spawn: &Spawn, parent: &LoopConfig) -> Result<LoopConfig, String> {
        let definition = &spawn.definition;
        let mut config = parent.clone();
        config.max_turns = None;
        // Background summaries are the session's, not each subagent's (their cost would
        // multiply with every agent running).
        config.summaries = None;
        // The output-token budget is the main agent's task, not each subagent's.
        config.token_budget = None;
        if !spawn.fork {
            config.system = vec![definition.system_prompt.clone()];
            // A new conversation: nothing of the parent's cache is warm for it.
            config.last_request = None;
            if let Some(model) = &definition.model {
                let (id, info) = self.models.resolve(model).map_err(|error| {
                    format!("agent {}: model {model}: {error:#}", definition.name)
                })?;
                self.models.apply(&mut config, id, &info);
            }
        }
        Ok(config)
    }

    /// Opens the subagent's transcript with `messages` in it and keeps it open; returns its
    /// path (a transcript that cannot be opened is warned about: the subagent runs anyway).
    fn open_transcript(&self, spawn: &Spawn, messages: &[MessageParam]) -> PathBuf {
        let transcript_path = self.transcript_path(&spawn.agent_id);
        match Transcript::open(transcript_path.clone(), self.session_id.clone(), &self.cwd)
            .and_then(|transcript| {
                transcript.append_history(messages)?;
                Ok(transcript)
            }) {
            Ok(transcript) => {
                self.open
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(spawn.agent_id.clone(), transcript);
            }
            Err(error) => warn(
                &self.recipe.hooks.env().notices,
                &format!("subagent transcript: {error:#}"),
            ),
        }
        transcript_path
    }
}

impl SubagentHost for Host {
    fn start(
        &self,
        spawn: &Spawn,
        parent: &LoopConfig,
        messages: &[MessageParam],
    ) -> Result<ChildRun, String> {
        let definition = &spawn.definition;
        let mut config = self.child_config(spawn, parent)?;
        let mode = if definition.read_only() {
            tools::PermissionMode::Plan
        } else {
            self.recipe.mode
        };
        // Its hooks name it in every event's input (`agent_id`, `agent_type`).
        let mut recipe = Recipe {
            hooks: self
                .recipe
                .hooks
                .in_subagent(&spawn.agent_id, &definition.name),
            ..self.recipe.clone()
        };
        let worktree = self
            .worktrees
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&spawn.agent_id)
            .cloned();
        if let Some(worktree) = &worktree {
            self.move_into(worktree, &mut recipe, &mut config);
        }
        let Built {
            tools,
            gate,
            watch,
            permissions,
        } = recipe.build(mode).map_err(|error| error.to_string())?;
        if let Some(session) = &self.recipe.session_mode {
            permissions.follow_mode(session.clone());
        }
        // Its definition's tools, never one its parent does not have.
        let mut tools: Vec<Arc<dyn Tool>> = tools
            .into_iter()
            .chain(self.extra_tools.iter().cloned())
            .filter(|tool| {
                spawn.allows(tool.name()) && permissions.offers(tool.name(), tool.aliases())
            })
            .collect();
        if !tools.iter().any(|tool| tool.name() == "Skill")
            && let Some(context) = &mut config.user_context
            && !self.skills_context.is_empty()
        {
            *context = context.replace(&self.skills_context, "");
        }
        let fork_point = Arc::new(ForkPoint::new());
        let nested = spawn.depth < MAX_DEPTH
            && spawn.allows(TASK_TOOL)
            && permissions.offers(TASK_TOOL, &["Agent"]);
        if nested && let Some(host) = self.me.upgrade() {
            let mut names: Vec<String> = tools.iter().map(|tool| tool.name().to_owned()).collect();
            names.push(TASK_TOOL.to_owned());
            tools.push(self.recipe.wrap(Arc::new(TaskTool::new(
                host as Arc<dyn SubagentHost>,
                TaskScope {
                    definitions: Arc::clone(&self.definitions),
                    parent: config.clone(),
                    depth: spawn.depth + 1,
                    fork_point: Some(Arc::clone(&fork_point)),
                    parent_tools: Some(names),
                    running: Arc::clone(&self.running),
                },
            ))));
        }
        let transcript_path = self.open_transcript(spawn, messages);
        let stop_hook: Arc<dyn StopHook> = if self.recipe.hooks.has(hooks::Event::SubagentStop) {
            Arc::new(hooks::CommandStopHook::subagent(
                recipe.hooks.clone(),
                &spawn.agent_id,
                &definition.name,
                &transcript_path,
            ))
        } else {
            Arc::new(NoStopHook)
        };
        let deps = Deps {
            model: Arc::new(
                adapter::ProviderModel::with_fallback(self.client.clone(), self.fallback.clone())
                    .with_text_only(self.models.text_only.clone()),
            ),
            tools,
            permissions: gate,
            summarizer: hooks::HookedSummarizer::wrap(
                Arc::new(adapter::ProviderSummarizer::new(
                    self.client.clone(),
                    config.model.clone(),
                )),
                &recipe.hooks,
                false,
                None,
                &config.model,
            ),
            // Its own folder: ids a model chooses cannot overwrite another agent's results.
            result_store: Box::new(tooling::DirStore::new(
                self.recipe.results_dir.join(&spawn.agent_id),
            )),
            files: Arc::new(tooling::WorkspaceFiles::new(Arc::clone(&recipe.workspace))),
            stop_hook,
            workspace: Arc::clone(&recipe.workspace),
            tool_source: None,
            fork_point: nested.then_some(fork_point),
            attachments: Some(Arc::new(tooling::FileAttachments(watch))),
            spend: self.spend.clone(),
        };
        Ok(ChildRun { config, deps })
    }

    fn starting<'a>(&'a self, spawn: &'a Spawn) -> loop_core::subagent::StartingFuture<'a> {
        Box::pin(async move {
            let name = spawn.definition.name.as_str();
            self.recipe
                .hooks
                .in_subagent(&spawn.agent_id, name)
                .run(
                    hooks::Event::SubagentStart,
                    &[name],
                    serde_json::json!({"agent_id": spawn.agent_id, "agent_type": name}),
                )
                .await
                .context
        })
    }

    fn event(&self, spawn: &Spawn, event: &LoopEvent) {
        if let LoopEvent::History(change) = event
            && let Some(transcript) = self
                .open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(&spawn.agent_id)
            && let Err(error) = transcript.record(change)
        {
            warn(
                &self.recipe.hooks.env().notices,
                &format!("subagent transcript: {error:#}"),
            );
        }
        // Deltas are for a live view of the main agent's text only.
        if matches!(
            event,
            LoopEvent::Stream(protocol::StreamEvent::ContentBlockDelta { .. })
                | LoopEvent::PartialAssistant(_)
                | LoopEvent::History(_)
        ) {
            return;
        }
        let _ = self.events.send(SubagentEvent {
            agent_id: spawn.agent_id.clone(),
            parent_tool_use_id: spawn.parent_tool_use_id.clone(),
            description: spawn.description.clone(),
            event: event.clone(),
        });
    }

    /// A background subagent is one of the session's background tasks: its report is told
    /// with the next request, TaskOutput reads it, TaskStop and the session's end stop it.
    fn detach(
        &self,
        spawn: &Spawn,
        run: loop_core::subagent::DetachedRun,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<String, String> {
        self.recipe
            .background
            .start_agent(
                spawn.description.clone(),
                format!("{} agent: {}", spawn.definition.name, spawn.description),
                Some(spawn.parent_tool_use_id.to_string()),
                run,
                cancel,
            )
            .map(|task| task.id().to_owned())
            .map_err(|error| error.to_string())
    }

    fn finished(&self, spawn: &Spawn, _outcome: &LoopOutcome) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&spawn.agent_id);
    }

    /// `isolation: "worktree"`: `.claude/worktrees/agent-<id>` on branch
    /// `worktree-agent-<id>` ([`crate::worktree`]).
    fn isolate<'a>(
        &'a self,
        spawn: &'a Spawn,
    ) -> loop_core::subagent::HostFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let name = format!("agent-{}", spawn.agent_id);
            let options = crate::worktree::Options {
                trusted: self.trusted,
                allow_dirty: false,
                hooks: Some(&self.recipe.hooks),
            };
            let worktree = crate::worktree::create(&self.cwd, &name, options)
                .await
                .map_err(|error| format!("isolation \"worktree\": {error}"))?;
            self.worktrees
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(spawn.agent_id.clone(), worktree);
            Ok(())
        })
    }

    /// The worktree is kept when the subagent changed something in it, else removed.
    fn release<'a>(
        &'a self,
        spawn: &'a Spawn,
    ) -> loop_core::subagent::HostFuture<'a, Option<String>> {
        Box::pin(async move {
            let worktree = self
                .worktrees
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&spawn.agent_id)?;
            Some(match worktree.finish(Some(&self.recipe.hooks)).await {
                Ok(ending) => worktree.describe(&ending),
                Err(error) => format!(
                    "The worktree is kept at {}: {error}",
                    worktree.path.display()
                ),
            })
        })
    }
}

impl Host {
    /// Points a subagent's recipe and settings at `worktree`: its workspace (the worktree,
    /// with the session's other folders; the sandbox shows its commands the repository's git
    /// folder, which the worktree's `.git` file names), nothing recorded for rewind (the
    /// worktree is its own), and a word in its prompt.
    fn move_into(
        &self,
        worktree: &crate::worktree::Worktree,
        recipe: &mut Recipe,
        config: &mut LoopConfig,
    ) {
        recipe.workspace = Arc::new(Workspace {
            cwd: worktree.path.clone(),
            additional_dirs: self.recipe.workspace.additional_dirs.clone(),
        });
        recipe.journal = None;
        if let Some(context) = &mut config.user_context {
            let to = worktree.path.display().to_string();
            crate::context_info::move_working_directory(context, &self.cwd, &to);
        }
        config.system.push(format!(
            "You are working in an isolated git worktree at {}{}: your own copy of the repository at {}, where other agents may be working at the same time. Read and change files only in the worktree (relative paths resolve there); the repository's own folder is outside your workspace.",
            worktree.path.display(),
            worktree
                .branch
                .as_ref()
                .map(|branch| format!(" (branch {branch})"))
                .unwrap_or_default(),
            self.cwd.display(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_files_parse_as_claude_code_writes_them() {
        let definition = parse(
            Path::new("/p/.claude/agents/reviewer.md"),
            AgentSource::Project,
            "---\nname: code-reviewer\ndescription: Reviews diffs. Use after changes.\ntools: Read, Grep, Glob\nmodel: haiku\nmaxTurns: 12\n---\nYou review code.\n",
        )
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(definition.name, "code-reviewer");
        assert_eq!(
            definition.tools.as_deref(),
            Some(&["Read".to_owned(), "Grep".to_owned(), "Glob".to_owned()][..])
        );
        assert_eq!(definition.model.as_deref(), Some("haiku"));
        assert_eq!(definition.max_turns, Some(12));
        assert_eq!(definition.system_prompt, "You review code.");
        let inherit = parse(
            Path::new("/a/helper.md"),
            AgentSource::User,
            "---\ndescription: Helps\nmodel: inherit\n---\nHelp.",
        )
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!((inherit.name.as_str(), inherit.model), ("helper", None));
        for (text, error) in [
            ("---\nname: x\n---\nbody", "no description"),
            (
                "---\ndescription: d\nmaxTurns: 0\n---\nbody",
                "maxTurns \"0\"",
            ),
            (
                "---\nname: fork\ndescription: d\n---\nbody",
                "not an agent name",
            ),
            ("---\ndescription: d\n---\n", "no system prompt"),
        ] {
            let got = parse(Path::new("/a/x.md"), AgentSource::User, text)
                .err()
                .unwrap_or_default();
            assert!(got.contains(error), "{text:?}: {got}");
        }
    }

    #[test]
    fn an_agent_taking_a_built_in_name_keeps_its_limits() {
        let built_ins = AgentDefinition::built_in();
        let explore = built_ins
            .iter()
            .find(|agent| agent.name == "Explore")
            .unwrap_or_else(|| panic!("no Explore"));
        let general = built_ins
            .iter()
            .find(|agent| agent.name == "general-purpose")
            .unwrap_or_else(|| panic!("no general-purpose"));
        let custom = |tools: &str| {
            parse(
                Path::new("/p/.claude/agents/Explore.md"),
                AgentSource::Project,
                &format!("---\nname: Explore\ndescription: d\n{tools}---\nWrite everything.\n"),
            )
            .unwrap_or_else(|error| panic!("{error}"))
        };
        let mut listed = custom("tools: Read, Write, Bash, Edit\n");
        let kept = keep_limits(&mut listed, explore);
        assert_eq!(
            listed.tools.as_deref(),
            Some(&["Read".to_owned(), "Bash".to_owned()][..])
        );
        assert_eq!(
            kept.as_deref(),
            Some("only Read, Glob, Grep, Bash, its commands read-only (Write, Edit not given)")
        );
        assert!(listed.read_only() && !listed.allows("Write"));
        assert_eq!(listed.system_prompt, "Write everything.");
        // No list, or `*`: the built-in's list.
        for tools in ["", "tools: *\n"] {
            let mut all = custom(tools);
            assert!(keep_limits(&mut all, explore).is_some());
            assert_eq!(all.tools, explore.tools, "{tools:?}");
        }
        // Within the limits: nothing to say.
        let mut narrow = custom("tools: Grep\n");
        assert_eq!(keep_limits(&mut narrow, explore), None);
        // general-purpose has no limits to keep.
        let mut general_like = custom("tools: Write\n");
        general_like.name = "general-purpose".into();
        assert_eq!(keep_limits(&mut general_like, general), None);
        assert!(general_like.allows("Write") && !general_like.read_only());
    }
}
