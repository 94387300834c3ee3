//! Subagents: the `Task` tool runs a nested loop (the seeds' agent definition, query source
//! `agent` or `fork`, fork context messages and per-agent max turns; 000_7dfda54faac69dcf.txt
//! 4.2 and 4.3 phase 5).
//!
//! A subagent is [`run_loop`] again, inside a tool call of its parent:
//!
//! - its own history: the prompt as its first user message, or, for `subagent_type:
//!   "fork"`, a copy of the parent's messages as its last request sent them ([`ForkPoint`])
//!   with the prompt added to the last user message, so it knows what the parent knows and
//!   its first request starts with the parent's cached prefix;
//! - its own system prompt, tools, model and max turns from its [`AgentDefinition`] (a fork:
//!   the parent's), and its own read-file state: the [`SubagentHost`] builds its
//!   collaborators, with the parent's permission rules, mode and sandbox, so a subagent can
//!   never do more than its parent;
//! - the parent's cancellation: the tool call's token, so aborting the parent aborts every
//!   subagent and their tools, and both histories stay paired.
//!
//! The tool_result is the subagent's final text (with a note when it stopped at its max
//! turns); its structured form is Claude Code's `AgentOutput` (`agentId`, `content`,
//! `totalToolUseCount`, `totalDurationMs`, `totalTokens`, `usage`, `status`, `prompt`). Every
//! event of the nested run goes to [`SubagentHost::event`] (usage for the session's totals,
//! stream-json lines with `parent_tool_use_id`, the subagent's transcript).
//!
//! Depth: the main agent is depth 0; the agents it starts are depth 1; a subagent whose
//! definition lists `Task` may start depth-2 agents, which never get the Task tool
//! ([`MAX_DEPTH`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use protocol::{ContentBlock, MessageParam, Role, ToolUseId, Usage};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::{Deps, LoopConfig, run_loop};
use crate::events::{LoopEvent, LoopOutcome, Terminal};

/// The turn limit of a subagent whose definition sets none (the seeds: "subagents usually
/// 200").
pub const DEFAULT_MAX_TURNS: u32 = 200;

/// The deepest agent: the main agent is 0, its subagents 1, theirs 2; an agent at this depth
/// never gets the Task tool.
pub const MAX_DEPTH: u32 = 2;

/// The most subagents that run at once at each depth (Claude Code runs at most 10 tools at
/// once); more Task calls wait for a place. One limit per depth, so an agent waiting for
/// its children never holds a place they need.
pub const MAX_PARALLEL: usize = 10;

/// The tool's name, as Claude Code called it until it was renamed `Agent` (accepted too).
pub const TASK_TOOL: &str = "Task";

/// The `subagent_type` that forks the calling agent.
pub const FORK: &str = "fork";

/// Where an agent definition comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentSource {
    /// Shipped with the agent.
    BuiltIn,
    /// A project's folder (`.agent/agents/`, `.claude/agents/`).
    Project,
    /// The user's folder (`~/.config/agent/agents/`, `~/.claude/agents/`).
    User,
}

/// An agent a Task call can start (Claude Code's agent file: frontmatter `name`,
/// `description`, `tools`, `model`, `maxTurns`, then the system prompt).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentDefinition {
    /// The `subagent_type` that selects it (`Explore`).
    pub name: String,
    /// When to use it, for the model (shown in the Task tool's description).
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// The tools it may use, by name (MCP tools too); `None`: all of its parent's. The Task
    /// tool only when listed here.
    pub tools: Option<Vec<String>>,
    /// Its model (an id or an alias the host resolves); `None`: the parent's.
    pub model: Option<String>,
    /// Its turn limit; `None`: [`DEFAULT_MAX_TURNS`].
    pub max_turns: Option<u32>,
    /// Where it comes from.
    pub source: AgentSource,
}

impl AgentDefinition {
    /// The built-in agents: `general-purpose` (all of the parent's tools) and `Explore`
    /// (read-only tools, a prompt for searching a codebase).
    pub fn built_in() -> Vec<Self> {
        vec![
            Self {
                name: "general-purpose".to_owned(),
                description: "General-purpose agent for researching complex questions, searching for code, and executing multi-step tasks. Use it when a search may take several rounds, or to do a self-contained part of the work in its own context.".to_owned(),
                system_prompt: GENERAL_PURPOSE_PROMPT.to_owned(),
                tools: None,
                model: None,
                max_turns: None,
                source: AgentSource::BuiltIn,
            },
            Self {
                name: "Explore".to_owned(),
                description: "Fast read-only agent for exploring a codebase: finding files by pattern, searching code for keywords, answering questions about how the code works. Say how thorough it should be.".to_owned(),
                system_prompt: EXPLORE_PROMPT.to_owned(),
                tools: Some(vec!["Read".to_owned(), "Glob".to_owned(), "Grep".to_owned(), "Bash".to_owned()]),
                model: None,
                max_turns: None,
                source: AgentSource::BuiltIn,
            },
        ]
    }

    /// Whether it may use `tool` (the Task tool only when listed by name), before its
    /// parent's tools are taken into account ([`Spawn::allows`]).
    pub fn allows(&self, tool: &str) -> bool {
        match &self.tools {
            None => tool != TASK_TOOL,
            Some(tools) => tools.iter().any(|listed| listed == tool || listed == "*"),
        }
    }

    /// Whether this agent is read-only by definition (Explore): its Bash runs as in plan
    /// mode, whatever the parent's mode. By name, whatever its source: a user's or project's
    /// agent that takes the built-in's name keeps its restrictions.
    pub fn read_only(&self) -> bool {
        self.name == "Explore"
    }
}

const GENERAL_PURPOSE_PROMPT: &str = "You are an agent started by a coding agent to do one task on its behalf. Do what the task asks, using the tools available, and nothing more. When you are done, answer with a concise report of what you found or did: the parent agent sees only your final message, so put everything it needs there (file paths with line numbers, what changed, what is left).";

const EXPLORE_PROMPT: &str = "You are a read-only search agent started by a coding agent. Explore the codebase to answer the question you are given: find files with Glob, search contents with Grep, read what matters with Read, and use Bash only for commands that read (ls, git log, git show). Never change a file. Search broadly first, then narrow down; be as thorough as the task asks. Answer with a concise report: the files and line numbers that matter and what they show. The parent agent sees only your final message.";

/// The messages of the parent's last request, kept for forks: the engine writes them before
/// every request of a run whose [`Deps::fork_point`] is set.
#[derive(Debug, Default)]
pub struct ForkPoint {
    messages: Mutex<Arc<Vec<MessageParam>>>,
}

impl ForkPoint {
    /// An empty fork point.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the messages of the request about to be sent. Called before every request:
    /// only the messages that differ from the previous snapshot are copied (usually the two
    /// of the last turn), not the whole history; the whole is copied only while a fork still
    /// holds the previous snapshot.
    pub fn set(&self, messages: &[MessageParam]) {
        let mut snapshot = self.messages.lock().unwrap_or_else(PoisonError::into_inner);
        let same = snapshot
            .iter()
            .zip(messages)
            .take_while(|(kept, new)| kept == new)
            .count();
        if same == snapshot.len() && same == messages.len() {
            return;
        }
        let snapshot = Arc::make_mut(&mut snapshot);
        snapshot.truncate(same);
        snapshot.extend_from_slice(&messages[same..]);
    }

    /// The messages of the last request.
    pub fn messages(&self) -> Arc<Vec<MessageParam>> {
        Arc::clone(&self.messages.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// One subagent being started: what the host needs to build it and to show its events.
#[derive(Clone, Debug)]
pub struct Spawn {
    /// Its id (`a` and 16 hex digits), for its transcript and the tool's result.
    pub agent_id: String,
    /// The Task tool_use that started it (`parent_tool_use_id` of its stream-json lines).
    pub parent_tool_use_id: ToolUseId,
    /// Its definition (for a fork: `fork`, with the parent's system prompt).
    pub definition: AgentDefinition,
    /// The Task call's `description`.
    pub description: String,
    /// Its depth (1 for an agent of the main agent).
    pub depth: u32,
    /// Whether it is a fork of its parent.
    pub fork: bool,
    /// The tools its parent may use, by name; `None`: the parent is the main agent. A
    /// subagent never gets a tool its parent does not have.
    pub parent_tools: Option<Vec<String>>,
    /// Its own copy of the files to work in (`isolation`), made by
    /// [`SubagentHost::isolate`] before it starts.
    pub isolation: Option<Isolation>,
}

/// How a subagent is kept apart from the files of the agents beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Its own git worktree (`isolation: "worktree"`): parallel agents editing the same
    /// file edit two copies on two branches.
    Worktree,
}

impl Spawn {
    /// Whether the subagent may use `tool`: its definition allows it and its parent has it.
    pub fn allows(&self, tool: &str) -> bool {
        self.definition.allows(tool)
            && self
                .parent_tools
                .as_ref()
                .is_none_or(|tools| tools.iter().any(|name| name == tool))
    }
}

/// A subagent's configuration and collaborators, from the host.
#[derive(Debug)]
pub struct ChildRun {
    /// Its settings: model, system prompt, limits (the Task tool sets the max turns when
    /// the host leaves them unset).
    pub config: LoopConfig,
    /// Its collaborators: the tools its definition allows, built fresh (own read-file
    /// state), with the parent's permission rules and sandbox.
    pub deps: Deps,
}

/// The future [`SubagentHost::starting`] returns.
pub type StartingFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Vec<String>> + Send + 'a>>;

/// The future [`SubagentHost::isolate`] and [`SubagentHost::release`] return.
pub type HostFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What the Task tool needs from the application.
pub trait SubagentHost: Send + Sync + 'static {
    /// The configuration and collaborators of `spawn`, given the parent's configuration
    /// (`parent`) and the subagent's first messages (`messages`, for its transcript). A host
    /// that cannot build it (an unknown model, a rule that does not parse) says why; the Task
    /// call then fails with that text.
    ///
    /// # Errors
    ///
    /// Why the subagent cannot start, for the model.
    fn start(
        &self,
        spawn: &Spawn,
        parent: &LoopConfig,
        messages: &[MessageParam],
    ) -> Result<ChildRun, String>;

    /// Context for `spawn`'s first message, gathered before it starts (Claude Code's
    /// SubagentStart hooks): each text is added as a text block to the last message of
    /// those it starts with when that is the user's. The default adds nothing.
    ///
    /// # Cancellation safety
    ///
    /// The future is dropped when the Task call is cancelled.
    fn starting<'a>(&'a self, spawn: &'a Spawn) -> StartingFuture<'a> {
        let _ = spawn;
        Box::pin(std::future::ready(Vec::new()))
    }

    /// One event of the subagent's run, in order.
    fn event(&self, spawn: &Spawn, event: &LoopEvent);

    /// Makes `spawn`'s own copy of the files ([`Spawn::isolation`]) before
    /// [`SubagentHost::start`] builds it there. The default refuses: the host cannot isolate.
    ///
    /// # Errors
    ///
    /// Why it cannot be isolated (not a repository, a dirty checkout), for the model.
    fn isolate<'a>(&'a self, spawn: &'a Spawn) -> HostFuture<'a, Result<(), String>> {
        let _ = spawn;
        Box::pin(std::future::ready(Err(
            "isolation is not available here; call Task without it".to_owned(),
        )))
    }

    /// What became of an isolated subagent's copy once its run ended (kept with its
    /// changes, or removed): a sentence added to its report. Called after
    /// [`SubagentHost::finished`], for isolated subagents only. The default says nothing.
    fn release<'a>(&'a self, spawn: &'a Spawn) -> HostFuture<'a, Option<String>> {
        let _ = spawn;
        Box::pin(std::future::ready(None))
    }

    /// The subagent's run ended (SubagentStop hooks, transcript closed).
    fn finished(&self, spawn: &Spawn, outcome: &LoopOutcome);

    /// Runs `spawn` in the background (`run_in_background`): `run` is the whole subagent,
    /// giving its report and whether it completed; `cancel` stops it. Returns the id the
    /// model stops it or reads it by. The default refuses: the host has no background
    /// tasks.
    ///
    /// # Errors
    ///
    /// Why it cannot run in the background, for the model.
    fn detach(
        &self,
        spawn: &Spawn,
        run: DetachedRun,
        cancel: CancellationToken,
    ) -> Result<String, String> {
        let _ = (spawn, run, cancel);
        Err(
            "subagents cannot run in the background here; call Task without run_in_background"
                .to_owned(),
        )
    }
}

/// A subagent run in the background ([`SubagentHost::detach`]): its report and whether it
/// completed.
pub type DetachedRun =
    std::pin::Pin<Box<dyn std::future::Future<Output = (String, bool)> + Send + 'static>>;

/// Where a [`TaskTool`] sits: what it offers and what its subagents inherit.
#[derive(Clone, Debug)]
pub struct TaskScope {
    /// The agents offered (`fork` is added when `fork_point` is given).
    pub definitions: Arc<[AgentDefinition]>,
    /// The configuration of the agent the tool belongs to.
    pub parent: LoopConfig,
    /// The depth of the subagents it starts (1 for the main agent's tool).
    pub depth: u32,
    /// The parent run's [`Deps::fork_point`], for `fork`.
    pub fork_point: Option<Arc<ForkPoint>>,
    /// The tools of the agent the tool belongs to; `None` for the main agent.
    pub parent_tools: Option<Vec<String>>,
    /// One place limit per depth ([`MAX_PARALLEL`] each), shared by every Task tool of a
    /// session turn ([`TaskScope::limits`]).
    pub running: Arc<[Arc<tokio::sync::Semaphore>]>,
}

impl TaskScope {
    /// The per-depth limits of a session turn: [`MAX_DEPTH`] semaphores of
    /// [`MAX_PARALLEL`] places.
    pub fn limits() -> Arc<[Arc<tokio::sync::Semaphore>]> {
        (0..MAX_DEPTH)
            .map(|_| Arc::new(tokio::sync::Semaphore::new(MAX_PARALLEL)))
            .collect()
    }
}

/// The `Task` tool (also called as `Agent`): starts a subagent and returns its final text.
pub struct TaskTool {
    host: Arc<dyn SubagentHost>,
    scope: TaskScope,
    schema: Value,
    description: String,
}

impl std::fmt::Debug for TaskTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskTool")
            .field("depth", &self.scope.depth)
            .field(
                "definitions",
                &self
                    .scope
                    .definitions
                    .iter()
                    .map(|d| &d.name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct TaskInput {
    description: String,
    prompt: String,
    #[serde(default)]
    subagent_type: Option<String>,
    /// Return at once; the report comes later ([`SubagentHost::detach`]).
    #[serde(default)]
    run_in_background: Option<bool>,
    /// `"worktree"`: its own git worktree ([`SubagentHost::isolate`]).
    #[serde(default)]
    isolation: Option<String>,
}

/// The longest agent description put in the Task tool's description, in characters.
const MAX_LISTED_DESCRIPTION: usize = 1024;

impl TaskTool {
    /// The Task tool of an agent, starting subagents as `scope` says.
    pub fn new(host: Arc<dyn SubagentHost>, scope: TaskScope) -> Self {
        let mut types: Vec<&str> = scope.definitions.iter().map(|d| d.name.as_str()).collect();
        if scope.fork_point.is_some() {
            types.push(FORK);
        }
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short (3-5 word) description of the task"},
                "prompt": {"type": "string", "description": "The task for the agent to perform"},
                "subagent_type": {
                    "type": "string",
                    "enum": types,
                    "description": "The type of specialized agent to use for this task"
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": "Return at once and go on with your own work; you are told the agent's report when it finishes"
                },
                "isolation": {
                    "type": "string",
                    "enum": ["worktree"],
                    "description": "\"worktree\": the agent works in its own git worktree (a copy of the repository on a new branch), so agents working in parallel never change the same files; the worktree is removed if the agent changed nothing, else its path and branch are in the report"
                }
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        });
        let mut description = String::from(
            "Launch a subagent to handle a self-contained task in its own context: it works with its own tools and returns one final report, which is all you see of its work. Several Task calls in one response run in parallel. Give each a complete, self-contained prompt (it does not see this conversation) and say what it should report back. Available agent types (subagent_type; general-purpose when omitted):\n",
        );
        for definition in scope.definitions.iter() {
            let tools = match &definition.tools {
                None => "all tools".to_owned(),
                Some(tools) => tools.join(", "),
            };
            let text: String = definition
                .description
                .trim()
                .chars()
                .take(MAX_LISTED_DESCRIPTION)
                .collect();
            description.push_str(&format!("- {}: {text} (Tools: {tools})\n", definition.name));
        }
        if scope.fork_point.is_some() {
            description.push_str(
                "- fork: a copy of yourself that starts with this whole conversation and your instructions; use it for a side task that needs what you already know.\n",
            );
        }
        description.push_str(
            "Not for what one or two tool calls do (reading a file you know, one search): do that yourself, it is faster and you keep what you learn.",
        );
        Self {
            host,
            scope,
            schema,
            description,
        }
    }
}

impl Tool for TaskTool {
    fn name(&self) -> &str {
        TASK_TOOL
    }

    fn aliases(&self) -> &[&str] {
        &["Agent"]
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// Subagents run in parallel; each one's own tools are admitted by its own executor.
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    /// Starting a subagent changes nothing by itself: every call it makes goes through its
    /// own gate with the parent's mode and rules (plan mode stays plan mode), so the call is
    /// allowed wherever reads are, as Claude Code allows it without a question.
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            if self.scope.depth > MAX_DEPTH {
                return Err(ToolError::InvalidInput(format!(
                    "subagents nest at most {MAX_DEPTH} deep; do this task yourself"
                )));
            }
            let input: TaskInput = serde_json::from_value(input).map_err(|error| {
                ToolError::InvalidInput(format!("invalid input for Task: {error}"))
            })?;
            let (definition, mut messages, fork) = self.agent(&input)?;
            let isolation = match input.isolation.as_deref() {
                None | Some("") => None,
                Some("worktree") => Some(Isolation::Worktree),
                Some(other) => {
                    return Err(ToolError::InvalidInput(format!(
                        "isolation {other:?} is not available; the one there is: \"worktree\""
                    )));
                }
            };
            let spawn = Spawn {
                agent_id: new_agent_id(),
                parent_tool_use_id: context.tool_use_id.clone(),
                definition,
                description: input.description,
                depth: self.scope.depth,
                fork,
                parent_tools: self.scope.parent_tools.clone(),
                isolation,
            };
            if input.run_in_background == Some(true) {
                return self.detach(spawn, messages, input.prompt).await;
            }
            // A place at this depth first (the call waits, cancellable, when all are taken).
            let limit = usize::try_from(self.scope.depth.saturating_sub(1)).unwrap_or(0);
            let _place = match self.scope.running.get(limit) {
                Some(running) => tokio::select! {
                    place = Arc::clone(running).acquire_owned() => place.ok(),
                    () = context.cancel.cancelled() => {
                        return Err(ToolError::Killed("interrupted before the subagent started".to_owned()));
                    }
                },
                None => None,
            };
            let context_texts = tokio::select! {
                texts = self.host.starting(&spawn) => texts,
                () = context.cancel.cancelled() => {
                    return Err(ToolError::Killed("interrupted before the subagent started".to_owned()));
                }
            };
            if let Some(last) = messages.last_mut().filter(|last| last.role == Role::User) {
                last.content
                    .extend(context_texts.into_iter().map(ContentBlock::text));
            }
            if spawn.isolation.is_some() {
                self.host
                    .isolate(&spawn)
                    .await
                    .map_err(ToolError::InvalidInput)?;
            }
            let ChildRun { mut config, deps } =
                match self.host.start(&spawn, &self.scope.parent, &messages) {
                    Ok(run) => run,
                    Err(error) => {
                        self.release(&spawn).await;
                        return Err(ToolError::InvalidInput(error));
                    }
                };
            // Its own limit, never more than its parent's (`--max-turns`).
            let max_turns = spawn
                .definition
                .max_turns
                .unwrap_or(DEFAULT_MAX_TURNS)
                .min(self.scope.parent.max_turns.unwrap_or(u32::MAX));
            config.max_turns = Some(config.max_turns.map_or(max_turns, |set| set.min(max_turns)));
            let started = Instant::now();
            let (sender, mut receiver) = mpsc::unbounded_channel();
            let run = run_loop(config, deps, messages, sender, context.cancel.clone());
            tokio::pin!(run);
            // Events are handed on as they come, so the host shows the subagent live.
            let outcome = loop {
                tokio::select! {
                    biased;
                    Some(event) = receiver.recv() => self.host.event(&spawn, &event),
                    outcome = &mut run => break outcome,
                }
            };
            while let Ok(event) = receiver.try_recv() {
                self.host.event(&spawn, &event);
            }
            self.host.finished(&spawn, &outcome);
            let note = self.release(&spawn).await;
            report(
                &spawn,
                &input.prompt,
                &outcome,
                max_turns,
                started,
                note.as_deref(),
            )
        })
    }
}

impl TaskTool {
    /// The agent a call asks for: its definition, its first messages and whether it is a
    /// fork of the caller.
    fn agent(
        &self,
        input: &TaskInput,
    ) -> Result<(AgentDefinition, Vec<MessageParam>, bool), ToolError> {
        let kind = input
            .subagent_type
            .as_deref()
            .filter(|kind| !kind.is_empty())
            .unwrap_or("general-purpose");
        if kind == FORK {
            let Some(point) = &self.scope.fork_point else {
                return Err(ToolError::InvalidInput(
                    "subagent_type \"fork\" is not available here".to_owned(),
                ));
            };
            // A copy of the caller: its prompt, its tools (no more).
            let definition = AgentDefinition {
                name: FORK.to_owned(),
                description: "A fork of the calling agent".to_owned(),
                system_prompt: self.scope.parent.system.join("\n\n"),
                tools: self.scope.parent_tools.clone(),
                model: None,
                max_turns: None,
                source: AgentSource::BuiltIn,
            };
            Ok((
                definition,
                fork_messages(&point.messages(), &input.prompt),
                true,
            ))
        } else {
            let Some(definition) = self.scope.definitions.iter().find(|d| d.name == kind) else {
                let names: Vec<&str> = self
                    .scope
                    .definitions
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect();
                return Err(ToolError::InvalidInput(format!(
                    "unknown subagent_type {kind:?}; the types are: {}",
                    names.join(", ")
                )));
            };
            Ok((
                definition.clone(),
                vec![MessageParam::user_text(input.prompt.clone())],
                false,
            ))
        }
    }

    /// [`SubagentHost::release`] of an isolated subagent.
    async fn release(&self, spawn: &Spawn) -> Option<String> {
        match spawn.isolation {
            Some(_) => self.host.release(spawn).await,
            None => None,
        }
    }

    /// Starts `spawn` on `messages` in the background through the host: the call returns
    /// the task's id at once; the report comes as the host tells it (a notification).
    async fn detach(
        &self,
        spawn: Spawn,
        mut messages: Vec<MessageParam>,
        prompt: String,
    ) -> Result<ToolOutput, ToolError> {
        let context_texts = self.host.starting(&spawn).await;
        if let Some(last) = messages.last_mut().filter(|last| last.role == Role::User) {
            last.content
                .extend(context_texts.into_iter().map(ContentBlock::text));
        }
        if spawn.isolation.is_some() {
            self.host
                .isolate(&spawn)
                .await
                .map_err(ToolError::InvalidInput)?;
        }
        let ChildRun { mut config, deps } =
            match self.host.start(&spawn, &self.scope.parent, &messages) {
                Ok(run) => run,
                Err(error) => {
                    self.release(&spawn).await;
                    return Err(ToolError::InvalidInput(error));
                }
            };
        let max_turns = spawn
            .definition
            .max_turns
            .unwrap_or(DEFAULT_MAX_TURNS)
            .min(self.scope.parent.max_turns.unwrap_or(u32::MAX));
        config.max_turns = Some(config.max_turns.map_or(max_turns, |set| set.min(max_turns)));
        // Its own: the turn that started it may end long before it does.
        let cancel = CancellationToken::new();
        let (host, running, stop) = (Arc::clone(&self.host), spawn.clone(), cancel.clone());
        let asked = prompt.clone();
        let run: DetachedRun = Box::pin(async move {
            let started = Instant::now();
            let (sender, mut receiver) = mpsc::unbounded_channel();
            let run = run_loop(config, deps, messages, sender, stop);
            tokio::pin!(run);
            let outcome = loop {
                tokio::select! {
                    biased;
                    Some(event) = receiver.recv() => host.event(&running, &event),
                    outcome = &mut run => break outcome,
                }
            };
            host.finished(&running, &outcome);
            let note = match running.isolation {
                Some(_) => host.release(&running).await,
                None => None,
            };
            let completed = outcome.terminal == Terminal::Completed;
            let text = match report(
                &running,
                &asked,
                &outcome,
                max_turns,
                started,
                note.as_deref(),
            ) {
                Ok(output) => output.content.text(),
                Err(error) => error.to_string(),
            };
            (text, completed)
        });
        let id = self
            .host
            .detach(&spawn, run, cancel)
            .map_err(ToolError::InvalidInput)?;
        Ok(ToolOutput::text(format!(
            "Agent \"{}\" started in the background with ID: {id}. It works on its own; you are told its report when it finishes (TaskOutput reads it, TaskStop stops it). Go on with other work meanwhile.",
            spawn.description
        ))
        .with_structured(json!({
            "isAsync": true,
            "status": "async_launched",
            "agentId": id,
            "description": spawn.description,
            "prompt": prompt,
        })))
    }
}

/// The fork's history: the parent's last request's messages, with the prompt added to the
/// last user message (a request alternates roles: the parent's request ends with one), so
/// every earlier message is the same, byte for byte.
fn fork_messages(parent: &[MessageParam], prompt: &str) -> Vec<MessageParam> {
    let directive = format!(
        "<fork>\nYou are a fork of the agent whose conversation is above. Do not continue its work: do only this task, then answer with a concise report of what you found or did (the agent that forked you sees only your final message).\n\n{prompt}\n</fork>"
    );
    let mut messages = parent.to_vec();
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(ContentBlock::text(directive)),
        _ => messages.push(MessageParam::user_text(directive)),
    }
    messages
}

/// `a` and 16 random hex digits.
fn new_agent_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("a{}", &id[..16])
}

/// The tool's output for a finished subagent.
fn report(
    spawn: &Spawn,
    prompt: &str,
    outcome: &LoopOutcome,
    max_turns: u32,
    started: Instant,
    note: Option<&str>,
) -> Result<ToolOutput, ToolError> {
    // What became of its isolated copy, after whatever else is said.
    let noted = |text: String| match note {
        Some(note) => format!("{text}\n\n[{note}]"),
        None => text,
    };
    let mut text = outcome.result.trim().to_owned();
    match &outcome.terminal {
        Terminal::Completed => {}
        Terminal::MaxTurns => {
            if text.is_empty() {
                text = "(no final text)".to_owned();
            }
            let turns = if max_turns == 1 { "turn" } else { "turns" };
            text.push_str(&format!(
                "\n\n[The subagent stopped at its limit of {max_turns} {turns} before finishing; the text above is what it had.]"
            ));
        }
        Terminal::AbortedStreaming | Terminal::AbortedTools => {
            return Err(ToolError::Killed(noted(
                "the subagent was interrupted".to_owned(),
            )));
        }
        other => {
            return Ok(ToolOutput::error(noted(format!(
                "The subagent stopped: {other}.{}",
                if text.is_empty() {
                    String::new()
                } else {
                    format!(" Its last text:\n{text}")
                }
            ))));
        }
    }
    let text = noted(text);
    let tool_uses: usize = outcome
        .messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| &message.content)
        .filter(|block| matches!(block, ContentBlock::ToolUse(_)))
        .count();
    let usage: &Usage = &outcome.usage;
    let total = usage.input_tokens
        + usage.output_tokens
        + usage.cache_creation_input_tokens.unwrap_or(0)
        + usage.cache_read_input_tokens.unwrap_or(0);
    let structured = json!({
        "agentId": spawn.agent_id,
        "agentType": spawn.definition.name,
        "content": [{"type": "text", "text": text}],
        "totalToolUseCount": tool_uses,
        "totalDurationMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "totalTokens": total,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
        },
        "status": "completed",
        "prompt": prompt,
    });
    Ok(ToolOutput::text(text).with_structured(structured))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fork point copies only what changed, and never changes a snapshot a fork holds.
    #[test]
    fn the_fork_point_holds_exactly_the_last_request() {
        let text = |n: usize| MessageParam::user_text(format!("message {n}"));
        let point = ForkPoint::new();
        let first: Vec<MessageParam> = (0..4).map(text).collect();
        point.set(&first);
        assert_eq!(*point.messages(), first);
        // Two appended, as after a turn.
        let mut second = first.clone();
        second.extend([text(4), text(5)]);
        point.set(&second);
        assert_eq!(*point.messages(), second);
        // One changed in the middle (a microcompact) and the tail shorter (a compaction).
        let held = point.messages();
        let mut third = second.clone();
        third[1] = MessageParam::user_text("[Old tool result cleared]");
        third.truncate(3);
        point.set(&third);
        assert_eq!(*point.messages(), third);
        assert_eq!(*held, second, "a fork's snapshot stays as it was");
        // The same messages again: nothing to do, the snapshot is the same one.
        let before = point.messages();
        point.set(&third);
        assert!(Arc::ptr_eq(&before, &point.messages()));
        point.set(&[]);
        assert!(point.messages().is_empty());
    }

    #[test]
    fn definitions_allow_tools_and_task_only_when_listed() {
        let [general, explore] = <[AgentDefinition; 2]>::try_from(AgentDefinition::built_in())
            .unwrap_or_else(|_| unreachable!("two built-in agents"));
        assert!(general.allows("Write") && !general.allows(TASK_TOOL));
        assert!(explore.allows("Grep") && !explore.allows("Write") && explore.read_only());
        let nesting = AgentDefinition {
            tools: Some(vec!["Read".into(), TASK_TOOL.into()]),
            ..general
        };
        assert!(nesting.allows(TASK_TOOL) && !nesting.allows("Bash"));
    }

    #[test]
    fn a_fork_keeps_every_message_and_adds_the_task_to_the_last() {
        let parent = vec![
            MessageParam::user_text("fix it"),
            MessageParam {
                role: Role::Assistant,
                content: vec![ContentBlock::text("looking")],
            },
            MessageParam::user_text("go on"),
        ];
        let fork = fork_messages(&parent, "check the tests");
        assert_eq!(fork[..2], parent[..2]);
        assert_eq!(fork[2].content[0], parent[2].content[0]);
        assert_eq!(fork[2].content.len(), 2);
        assert!(format!("{:?}", fork[2].content[1]).contains("check the tests"));
        assert_eq!(fork_messages(&[], "x").len(), 1);
        let id = new_agent_id();
        assert!(id.len() == 17 && id.starts_with('a'), "{id}");
    }
}
