//! The loop's driver: the six phases in order, one [`State`] value replaced at each turn of
//! the loop, the next step decided by [`decide`].

use std::sync::Arc;

use context::{
    ContextConfig, ContextEvent, ContextManager, ContextMemory, FileSource, ResultStore, Services,
    Summarizer, Tokens,
};
use executor::{CanUseTool, CompletedTool, ExecutorConfig, Tool, Workspace};
use protocol::{
    CacheControl, ContentBlock, MessageParam, Role, SystemBlock, ThinkingConfig, ToolDefinition,
    Usage,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::call::{Aborted, CallEnd, Responded, call_model};
use crate::events::{CompactTrigger, HistoryEvent, LoopEvent, LoopOutcome, Terminal, Transition};
use crate::hooks::{StopDecision, StopHook, StopHookInput};
use crate::model::{ModelClient, ModelError};
use crate::request::ModelRequest;
use crate::state::{Limits, Outcome, Response, State, Step, decide};

/// A request's model, `max_tokens`, thinking and effort.
type LastSent = (
    String,
    u32,
    Option<protocol::ThinkingConfig>,
    Option<protocol::Effort>,
);

/// The anchor and moving message breakpoints a request was sent with.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SentBreakpoints {
    anchor: Option<crate::BlockAt>,
    moving: Option<crate::BlockAt>,
    /// Every message breakpoint it had (a fork of it repeats them).
    all: Vec<crate::BlockAt>,
}

/// The last block before `at` that can carry a cache breakpoint (not thinking), `None` when
/// there is none.
fn block_before(messages: &[MessageParam], at: crate::BlockAt) -> Option<crate::BlockAt> {
    let (message, block) = at;
    (0..=message.min(messages.len().checked_sub(1)?))
        .rev()
        .flat_map(|index| {
            let end = if index == message {
                block
            } else {
                messages[index].content.len()
            };
            (0..end.min(messages[index].content.len()))
                .rev()
                .map(move |block| (index, block))
        })
        .find(|&(index, block)| messages[index].content[block].can_carry_cache_control())
}

/// The user message that asks the model to go on after a max_tokens cut.
pub const RESUME_PROMPT: &str = "Output token limit hit. Resume directly where you stopped, without apology or recap. If you were in the middle of a tool call, split the work into smaller steps.";

/// The user message that follows what the model had said when the user stopped it mid-answer
/// (Esc, Ctrl-C), as Claude Code writes it.
pub const INTERRUPTED_MARKER: &str = "[Request interrupted by user]";

/// The user message that follows the tool results of calls the user stopped (Esc, Ctrl-C,
/// or declining a question that stops the turn), as Claude Code writes it.
pub const INTERRUPTED_FOR_TOOL_USE_MARKER: &str = "[Request interrupted by user for tool use]";

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// The model to ask.
    pub model: String,
    /// The model to switch to when the first stays overloaded.
    pub fallback_model: Option<String>,
    /// The fallback model's own output cap: requests after the switch ask for at most this
    /// many tokens (a smaller model refuses more).
    pub fallback_output_cap: Option<u32>,
    /// Background summaries by the fast model (progress, tool batches); `None`: none.
    pub summaries: Option<crate::background::SummaryConfig>,
    /// The output-token budget (the seeds' token budget, 003_5d025cefc799750b.txt): while
    /// it is not used up, a model that stops is nudged to go on; the run ends when it is used
    /// up or when three nudges in a row each bring fewer than 500 output tokens
    /// (`state::DIMINISHING_TOKENS`). `None`: no budget.
    pub token_budget: Option<u64>,
    /// The fallback model's water levels: after the switch, compaction follows its window
    /// (a 32K-token local model compacts at its own threshold). `None`: the first model's.
    pub fallback_levels: Option<context::WaterLevels>,
    /// End with MaxTurns when turn count + 1 would exceed this.
    pub max_turns: Option<u32>,
    /// `max_tokens` of each request.
    pub output_cap: u32,
    /// The cap of the one escalated retry after max_tokens (the model's max output).
    pub escalated_output_cap: u32,
    /// System prompt blocks, static (byte-stable for prompt caching); the last is cached.
    pub system: Vec<String>,
    /// User context (memory files, environment facts), sent as the first text block of the
    /// first user message inside `<system-reminder>`.
    pub user_context: Option<String>,
    /// Extended thinking.
    pub thinking: Option<ThinkingConfig>,
    /// How much effort the model puts in (`output_config.effort`); `None`: the API's default.
    pub effort: Option<protocol::Effort>,
    /// max_tokens recoveries in a row before giving up (3).
    pub max_tokens_recoveries: u32,
    /// Stop-hook blocks honoured per run (8, as in Claude Code).
    pub stop_hook_cap: u32,
    /// Identical consecutive calls after which a corrective note is added (3).
    pub repeat_note_at: u32,
    /// Identical consecutive calls at which the call is refused and the run ends (5).
    pub repeat_stop_at: u32,
    /// Context management.
    pub context: ContextConfig,
    /// When this session's previous request was sent (an earlier run, or the transcript of
    /// a resumed session): how long the prompt cache has been idle. `None`: no request yet,
    /// or unknown.
    pub last_request: Option<std::time::SystemTime>,
    /// Tool execution.
    pub executor: ExecutorConfig,
}

impl LoopConfig {
    /// Defaults for `model`, taking its window and caps from the model table.
    pub fn for_model(model: &str) -> Self {
        Self::for_model_info(model, &context::lookup(model).0)
    }

    /// Defaults for `model` with the limits of `info` (a model the table does not know: its
    /// window and output caps from the user's settings or the server).
    pub fn for_model_info(model: &str, info: &context::ModelInfo) -> Self {
        Self {
            model: model.to_owned(),
            fallback_model: None,
            fallback_output_cap: None,
            fallback_levels: None,
            summaries: None,
            token_budget: None,
            max_turns: None,
            output_cap: u32::try_from(info.default_output_cap.0).unwrap_or(u32::MAX),
            escalated_output_cap: u32::try_from(info.escalated_output_cap.0).unwrap_or(u32::MAX),
            system: Vec::new(),
            user_context: None,
            thinking: None,
            effort: None,
            max_tokens_recoveries: 3,
            stop_hook_cap: 8,
            repeat_note_at: 3,
            repeat_stop_at: 5,
            context: ContextConfig::for_model(info.context_window, info.max_output),
            last_request: None,
            executor: ExecutorConfig::default(),
        }
    }
}

/// Everything the loop touches outside itself, injected as one value.
pub struct Deps {
    /// The model.
    pub model: Arc<dyn ModelClient>,
    /// The tools.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The permission gate.
    pub permissions: Arc<dyn CanUseTool>,
    /// The model call that writes compaction summaries.
    pub summarizer: Arc<dyn Summarizer>,
    /// Where oversized tool results go.
    pub result_store: Box<dyn ResultStore>,
    /// Current file contents for re-attachment after compaction.
    pub files: Arc<dyn FileSource>,
    /// Stop hooks.
    pub stop_hook: Arc<dyn StopHook>,
    /// Where tools act.
    pub workspace: Arc<Workspace>,
    /// Tools that may join during the run (MCP servers that connect late or change their
    /// list), asked before every request; `None`: the tools are fixed.
    pub tool_source: Option<Arc<dyn ToolSource>>,
    /// Where the messages of each request are kept for forks (the Task tool's
    /// `subagent_type: "fork"`); `None`: nothing is kept.
    pub fork_point: Option<Arc<crate::subagent::ForkPoint>>,
    /// Notes on what changed outside the model's view while its tools ran (files it read,
    /// changed on disk by other means), added to the tool results that go on to the next
    /// request; `None`: none.
    pub attachments: Option<Arc<dyn AttachmentSource>>,
    /// A spending limit, told every response's usage and asked before every request
    /// (shared by a session's subagents); `None`: no limit.
    pub spend: Option<Arc<dyn SpendGuard>>,
}

/// A spending limit (`--max-budget-usd`): the loop tells it each response's usage, with the
/// model that answered, and asks it before each request whether the limit is reached.
pub trait SpendGuard: Send + Sync {
    /// Counts a response that used `usage`: `answered` is the model name it came with,
    /// `asked` the one the request named (a server may answer with another name, such as a
    /// dated version).
    fn spend(&self, answered: &str, asked: &str, usage: &Usage);

    /// Why no more request may be sent (what was spent of what limit), or `None`.
    fn exceeded(&self) -> Option<String>;
}

/// The future of [`AttachmentSource::attachments`].
pub type AttachmentFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Vec<String>> + Send + 'a>>;

/// The seeds' attachments (003_5d025cefc799750b.txt, the "next state" phase): text blocks
/// the loop adds to the user message that carries a tool batch's results when the run goes
/// on to another request. Being part of that new message, they leave every earlier message,
/// and so the prompt cache's prefix, unchanged.
pub trait AttachmentSource: Send + Sync {
    /// The notes for the next request (each a `<system-reminder>` text), once: what they
    /// report is considered seen. `batch` is the tool batch whose results they join (for
    /// notes about the batch itself, such as Claude Code's PostToolBatch hooks).
    fn attachments<'a>(&'a self, batch: Batch<'a>) -> AttachmentFuture<'a>;
}

/// A tool batch whose results go to the next request: the response that asked for the calls,
/// and their results in completion order.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    /// The response (its tool_use blocks are the calls, in the model's order).
    pub response: &'a protocol::Message,
    /// The calls' results, in completion order.
    pub results: &'a [CompletedTool],
}

impl<'a> Batch<'a> {
    /// Each call in the model's order, with its result when it has one (a call whose result
    /// was not kept has none).
    pub fn calls(
        self,
    ) -> impl Iterator<Item = (&'a protocol::ToolUseBlock, Option<&'a CompletedTool>)> {
        self.response
            .content
            .iter()
            .filter_map(ContentBlock::as_tool_use)
            .map(move |call| {
                let result = self
                    .results
                    .iter()
                    .find(|result| result.result.tool_use_id == call.id);
                (call, result)
            })
    }
}

/// Tools that may change while a run goes on: the seeds' "next state" phase refreshes the
/// tool list, so a server that connected since becomes usable at the next request.
pub trait ToolSource: Send + Sync {
    /// The tools to offer besides [`Deps::tools`] now (all of them, not only new ones). A
    /// name already in [`Deps::tools`] is ignored.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps")
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|tool| tool.name())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// A history to run the loop on: its messages, ending with the user's new message, and what
/// the context pipeline remembers of them (an earlier run's [`LoopOutcome::memory`]; a plain
/// `Vec<MessageParam>` starts from nothing remembered).
#[derive(Clone, Debug, Default)]
pub struct History {
    /// The messages.
    pub messages: Vec<MessageParam>,
    /// The context pipeline's memory of them.
    pub memory: ContextMemory,
}

impl From<Vec<MessageParam>> for History {
    fn from(messages: Vec<MessageParam>) -> Self {
        Self {
            messages,
            memory: ContextMemory::default(),
        }
    }
}

/// Runs the loop on a new task; returns its handle and the event stream.
pub fn spawn_loop(
    config: LoopConfig,
    deps: Deps,
    history: impl Into<History>,
    cancel: CancellationToken,
) -> (
    tokio::task::JoinHandle<LoopOutcome>,
    mpsc::UnboundedReceiver<LoopEvent>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let history: History = history.into();
    let handle = tokio::spawn(run_loop(config, deps, history, sender, cancel));
    (handle, receiver)
}

/// Runs the loop until a terminal reason. `history` is the history so far, ending with the
/// user's new message (see [`History`]). Events go to `events` (a closed receiver is fine).
///
/// # Cancellation safety
///
/// Use `cancel`, not dropping the future, to stop a run: cancelling ends it with
/// AbortedStreaming or AbortedTools and a history that passes the pairing validator. Dropping
/// the future stops everything too (tools are cancelled) but returns no history.
pub async fn run_loop(
    config: LoopConfig,
    mut deps: Deps,
    history: impl Into<History>,
    events: mpsc::UnboundedSender<LoopEvent>,
    cancel: CancellationToken,
) -> LoopOutcome {
    let History { messages, memory } = history.into();
    let mut run = Run::new(&config, &mut deps, events, cancel, memory);
    let mut state = State::new(messages, &config.model);
    let terminal = loop {
        let span = tracing::info_span!(
            "turn",
            turn = state.run.turn,
            transition = state.transition.map_or("start", Transition::as_str),
        );
        match run.turn(state).instrument(span).await {
            Next::Continue(next) => state = next,
            Next::Stop(terminal, last) => {
                state = last;
                break terminal;
            }
        }
    };
    run.finish(terminal, state)
}

/// Where one pass through the phases leaves the loop.
enum Next {
    /// Go around with this state.
    Continue(State),
    /// End the run with this terminal reason and final state.
    Stop(Terminal, State),
}

/// One run: its configuration, collaborators, and what it has counted so far.
struct Run<'a> {
    config: &'a LoopConfig,
    deps: &'a mut Deps,
    events: mpsc::UnboundedSender<LoopEvent>,
    cancel: CancellationToken,
    limits: Limits,
    manager: ContextManager,
    tools: Vec<ToolDefinition>,
    system: Vec<SystemBlock>,
    /// Tokens of what every request sends besides the messages.
    overhead: Tokens,
    /// The text of the last response of this run (not of a resumed history).
    last_text: String,
    usage: Usage,
    requests: u32,
    /// When the last request was sent.
    last_request: Option<std::time::SystemTime>,
    /// The anchor and moving message breakpoints of the last request (see
    /// [`Engine::breakpoints`]); `None` after a compaction.
    sent_breakpoints: Option<SentBreakpoints>,
    /// The last request's model, `max_tokens`, thinking and effort.
    last_sent: Option<LastSent>,
    /// How many of `deps.tools` are the run's own (the rest came from the tool source).
    own_tools: usize,
    /// The messages of the last request, for forks and the progress summary.
    snapshot: Option<Arc<crate::subagent::ForkPoint>>,
    /// Cancels the background summaries when the run ends (a child of `cancel`).
    background: CancellationToken,
    /// Cancels `background` when the run is dropped, even without reaching `finish` (the
    /// run's future dropped): no summary outlives its run.
    _background_guard: tokio_util::sync::DropGuard,
    /// Tool batch summaries still being written (the seeds' pending tool-use summary):
    /// each reported after the first model call that ends once it is done.
    pending_summaries: Vec<tokio::task::JoinHandle<Option<LoopEvent>>>,
}

impl<'a> Run<'a> {
    fn new(
        config: &'a LoopConfig,
        deps: &'a mut Deps,
        events: mpsc::UnboundedSender<LoopEvent>,
        cancel: CancellationToken,
        memory: ContextMemory,
    ) -> Self {
        let manager = ContextManager::new(config.context.clone()).with_memory(memory);
        let own_tools = deps.tools.len();
        let background = cancel.child_token();
        let progress = config
            .summaries
            .as_ref()
            .and_then(|summaries| Some((summaries.model.clone(), summaries.progress_every?)));
        let snapshot = deps.fork_point.clone().or_else(|| {
            progress
                .is_some()
                .then(|| Arc::new(crate::subagent::ForkPoint::new()))
        });
        if let (Some((fast, every)), Some(snapshot)) = (progress, &snapshot) {
            tokio::spawn(crate::background::progress(
                Arc::clone(&deps.model),
                fast,
                every,
                Arc::clone(snapshot),
                events.clone(),
                background.clone(),
            ));
        }
        let tools = definitions(&deps.tools);
        let overhead = overhead(config, &manager, &tools);
        Self {
            config,
            deps,
            events,
            cancel,
            limits: Limits {
                output_cap: config.output_cap,
                escalated_output_cap: config.escalated_output_cap,
                max_tokens_recoveries: config.max_tokens_recoveries,
                stop_hook_cap: config.stop_hook_cap,
                max_turns: config.max_turns,
                fallback_model: config.fallback_model.clone(),
                fallback_output_cap: config.fallback_output_cap,
                token_budget: config.token_budget,
            },
            manager,
            tools,
            system: system_blocks(config),
            overhead,
            last_text: String::new(),
            usage: Usage::default(),
            requests: 0,
            last_request: config.last_request,
            sent_breakpoints: None,
            last_sent: None,
            own_tools,
            snapshot,
            _background_guard: background.clone().drop_guard(),
            background,
            pending_summaries: Vec::new(),
        }
    }

    fn emit(&self, event: LoopEvent) {
        // The caller may have stopped listening; the run goes on.
        let _ = self.events.send(event);
    }

    /// Appends `message` to the history: the one place (with [`Run::append_response`] and
    /// [`Run::compacted`]) the history changes, each change reported as a history event.
    fn append(&self, state: &mut State, message: MessageParam) {
        self.emit(LoopEvent::History(HistoryEvent::Appended(message.clone())));
        state.messages.push(message);
    }

    /// Appends a completed response whole; `reported`: its history event went out when it
    /// completed (see [`crate::call::committed`]).
    fn append_response(&self, state: &mut State, message: &protocol::Message, reported: bool) {
        if !reported {
            self.emit(LoopEvent::History(HistoryEvent::Response(Box::new(
                message.clone(),
            ))));
        }
        state.messages.push(message.to_param());
    }

    /// Reports the tool results L1 and L2 rewrote (named by `events`) with their new content.
    fn rewritten(&self, state: &State, events: &[ContextEvent]) {
        let mut ids: Vec<&protocol::ToolUseId> = Vec::new();
        for event in events {
            match event {
                ContextEvent::Persisted { tool_use_id, .. } => ids.push(tool_use_id),
                ContextEvent::Microcompacted { tool_use_ids, .. } => ids.extend(tool_use_ids),
                ContextEvent::PersistFailed { .. }
                | ContextEvent::Compacted { .. }
                | ContextEvent::CompactFailed { .. } => {}
            }
        }
        if ids.is_empty() {
            return;
        }
        let results: Vec<_> = state
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .filter_map(|block| match block {
                ContentBlock::ToolResult(result) if ids.contains(&&result.tool_use_id) => {
                    Some((result.tool_use_id.clone(), result.content.clone()))
                }
                _ => None,
            })
            .collect();
        self.emit(LoopEvent::History(HistoryEvent::Rewritten(results)));
    }

    /// Reports that compaction replaced the history (`events` are the compaction's own).
    fn compacted(&self, state: &State, events: &[ContextEvent], trigger: CompactTrigger) {
        let pre_tokens = events.iter().find_map(|event| match event {
            ContextEvent::Compacted { before, .. } => Some(before.0),
            _ => None,
        });
        if let Some(pre_tokens) = pre_tokens {
            self.emit(LoopEvent::History(HistoryEvent::Compacted {
                trigger,
                pre_tokens,
                messages: state.messages.clone(),
            }));
        }
    }

    /// Counts a response's usage (`answered`: the model name it came with; `asked`: the one
    /// the request named).
    fn count(&mut self, answered: &str, asked: &str, usage: &Usage) {
        self.emit(LoopEvent::Usage(usage.clone()));
        self.usage.accumulate(usage);
        if let Some(spend) = &self.deps.spend {
            spend.spend(answered, asked, usage);
        }
    }

    /// The tool source's tools join (or leave) before a request: the tool list and the
    /// fixed overhead follow.
    fn refresh_tools(&mut self) {
        let Some(source) = &self.deps.tool_source else {
            return;
        };
        let mut extra = source.tools();
        let own: Vec<String> = self.deps.tools[..self.own_tools]
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect();
        extra.retain(|tool| !own.iter().any(|name| name == tool.name()));
        let current: Vec<&str> = self.deps.tools[self.own_tools..]
            .iter()
            .map(|tool| tool.name())
            .collect();
        let fresh: Vec<&str> = extra.iter().map(|tool| tool.name()).collect();
        if current == fresh {
            return;
        }
        tracing::info!(before = ?current, after = ?fresh, "the tool list changed");
        self.deps.tools.truncate(self.own_tools);
        self.deps.tools.extend(extra);
        self.tools = definitions(&self.deps.tools);
        self.overhead = overhead(self.config, &self.manager, &self.tools);
    }

    /// One pass: phase 1, phase 2 (with 4), then the steps [`decide`] names.
    async fn turn(&mut self, mut state: State) -> Next {
        if let Some(transition) = state.transition {
            self.emit(LoopEvent::Transition(transition));
        }
        self.refresh_tools();
        if self.cancel.is_cancelled() {
            return Next::Stop(Terminal::AbortedStreaming, state);
        }
        if let Some(reason) = self.deps.spend.as_ref().and_then(|spend| spend.exceeded()) {
            return Next::Stop(Terminal::MaxBudget(reason), state);
        }
        if let Err(terminal) = self.preprocess(&mut state).await {
            return Next::Stop(terminal, state);
        }
        match self.call(&state).await {
            CallEnd::Aborted(aborted) => {
                let during_tools = aborted.during_tools;
                self.keep_aborted(&mut state, *aborted);
                self.settle(state, Outcome::Aborted { during_tools }, None)
                    .await
            }
            CallEnd::Failed(error) => self.settle(state, Outcome::Failed(&error), None).await,
            CallEnd::Done(responded) => {
                self.count(
                    &responded.message.model,
                    &state.run.model,
                    &responded.message.usage,
                );
                state.run.output_tokens += responded.message.usage.output_tokens;
                self.last_text = responded.message.text();
                let response = Response {
                    max_tokens: responded.message.stop_reason
                        == Some(protocol::StopReason::MaxTokens),
                    nothing_ran: responded.results.iter().all(|result| !result.outcome.ran()),
                    tool_uses: responded
                        .message
                        .content
                        .iter()
                        .any(|block| block.as_tool_use().is_some()),
                    repeat_stop: responded.repeat_stop,
                    incomplete: (responded.message.stop_reason.as_ref())
                        .is_some_and(crate::call::incomplete),
                };
                self.settle(state, Outcome::Responded(response), Some(*responded))
                    .await
            }
        }
    }

    /// Phase 1: L1, L2, levels, L3. `Err` ends the run.
    async fn preprocess(&mut self, state: &mut State) -> Result<(), Terminal> {
        let max_tokens = state.output_cap(&self.limits);
        let (thinking, effort) = self.reasoning(state, max_tokens);
        let main = context::MainRequest {
            model: &state.run.model,
            max_tokens,
            system: &self.system,
            tools: &self.tools,
            user_context: self.config.user_context.as_deref(),
            thinking,
            effort,
            previous_breakpoints: self
                .sent_breakpoints
                .as_ref()
                .map_or(&[], |sent| sent.all.as_slice()),
        };
        let services = Services {
            store: self.deps.result_store.as_mut(),
            summarizer: self.deps.summarizer.as_ref(),
            files: self.deps.files.as_ref(),
            main: Some(main),
        };
        let last = state
            .last_usage
            .as_ref()
            .map(|(usage, covered)| (usage, *covered));
        let idle = self
            .last_request
            .and_then(|at| std::time::SystemTime::now().duration_since(at).ok());
        let prepared = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(Terminal::AbortedStreaming),
            prepared = self.manager.preprocess(&mut state.messages, self.overhead, last, idle, services) => prepared,
        };
        self.rewritten(state, &prepared.events);
        let compacted = prepared
            .events
            .iter()
            .any(|event| matches!(event, ContextEvent::Compacted { .. }));
        for event in &prepared.events {
            self.emit(LoopEvent::Context(event.clone()));
        }
        if compacted {
            state.last_usage = None;
            self.compacted(state, &prepared.events, CompactTrigger::Auto);
            self.sent_breakpoints = None;
            self.emit(LoopEvent::Transition(Transition::Compacted));
        }
        match prepared.blocked {
            Some(reason) => Err(Terminal::BlockingLimit(reason.to_string())),
            None => Ok(()),
        }
    }

    /// The message breakpoints of the next request over `messages`, and remembers them:
    ///
    /// - the **moving** one on the last block of the last user message (the prefix the next
    ///   request reads);
    /// - an **anchor** on the last block before the first one microcompact's next batch would
    ///   change ([`context::first_rewrite`]): it is in every request, so its cache entry stays
    ///   warm, and when a batch clears, everything before it is still read
    ///   ([`context::economics`] counts on it);
    /// - the previous request's **moving** one, so a turn that adds more than the API's
    ///   20-block lookback (many parallel tool calls) still finds its entry; or, in the
    ///   request after a batch moved the anchor, the previous **anchor**, which is the prefix
    ///   that request can read.
    ///
    /// With the system prompt's, at most the API's four.
    fn breakpoints(&mut self, messages: &[MessageParam]) -> Vec<crate::BlockAt> {
        let moving = crate::request::moving_breakpoint(messages);
        let anchor = context::first_rewrite(messages, &self.manager.config().microcompact)
            .and_then(|first| block_before(messages, first));
        let mut planned: Vec<crate::BlockAt> = Vec::with_capacity(3);
        match &self.sent_breakpoints {
            Some(sent) if sent.anchor != anchor => planned.extend(sent.anchor),
            Some(sent) => planned.extend(sent.moving),
            None => {}
        }
        planned.extend(anchor);
        planned.extend(moving);
        self.sent_breakpoints = Some(SentBreakpoints {
            anchor,
            moving,
            all: planned.clone(),
        });
        planned
    }

    /// The request's thinking and effort. A budget stays below the cap, which the recovery
    /// paths move. The fallback model may not think as the configured one does (adaptive
    /// thinking on a model that takes only budgets is refused): it answers without thinking
    /// or effort.
    fn reasoning(
        &self,
        state: &State,
        max_tokens: u32,
    ) -> (Option<protocol::ThinkingConfig>, Option<protocol::Effort>) {
        let configured = state.run.model == self.config.model;
        let thinking = self
            .config
            .thinking
            .filter(|_| configured)
            .and_then(|thinking| thinking.fit(max_tokens));
        (thinking, self.config.effort.filter(|_| configured))
    }

    /// Phase 2: the request, streamed; tools start as their blocks complete (phase 4).
    async fn call(&mut self, state: &State) -> CallEnd {
        let max_tokens = state.output_cap(&self.limits);
        let (thinking, effort) = self.reasoning(state, max_tokens);
        let breakpoints = self.breakpoints(&state.messages);
        let request = ModelRequest {
            model: &state.run.model,
            max_tokens,
            system: &self.system,
            tools: &self.tools,
            messages: &state.messages,
            user_context: self.config.user_context.as_deref(),
            thinking,
            effort,
            breakpoints: Some(&breakpoints),
        };
        self.last_sent = Some((state.run.model.clone(), max_tokens, thinking, effort));
        if let Some(point) = &self.snapshot {
            point.set(&state.messages);
        }
        self.requests += 1;
        self.last_request = Some(std::time::SystemTime::now());
        self.emit(LoopEvent::Request {
            turn: state.run.turn,
            request: self.requests,
            model: state.run.model.clone(),
        });
        let span = tracing::info_span!("request", number = self.requests, model = %state.run.model);
        let emit = |event| self.emit(event);
        let end = call_model(
            self.config,
            self.deps,
            &state.repeats,
            &request,
            &self.cancel,
            &emit,
        )
        .instrument(span)
        .await;
        self.report_summaries().await;
        end
    }

    /// Reports the batch summaries that are done (written while the last call ran); the
    /// others stay pending. Never waits for one.
    async fn report_summaries(&mut self) {
        let (done, pending): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_summaries)
            .into_iter()
            .partition(tokio::task::JoinHandle::is_finished);
        self.pending_summaries = pending;
        for handle in done {
            if let Ok(Some(event)) = handle.await {
                self.emit(event);
            }
        }
    }

    /// Starts the summary of the batch that ends `state`'s history (its tool_uses and their
    /// results), when tool-use summaries are on.
    fn summarize_batch(&mut self, state: &State) {
        let Some(summaries) = self.config.summaries.as_ref().filter(|s| s.tool_use) else {
            return;
        };
        let batch = state.messages[state.messages.len().saturating_sub(2)..].to_vec();
        self.pending_summaries
            .push(tokio::spawn(crate::background::tool_use(
                Arc::clone(&self.deps.model),
                summaries.model.clone(),
                batch,
                self.background.clone(),
            )));
    }

    /// Keeps what an aborted call leaves: the response if it completed, else its completed
    /// blocks and the text streaming when it stopped, with the results of the tools that
    /// ran; then Claude Code's interruption marker as a user message
    /// ([`INTERRUPTED_MARKER`], [`INTERRUPTED_FOR_TOOL_USE_MARKER`] when tools were running),
    /// so the model knows the user stopped it and the next prompt reads as theirs.
    fn keep_aborted(&mut self, state: &mut State, aborted: Aborted) {
        let marker = protocol::ContentBlock::text(if aborted.during_tools {
            INTERRUPTED_FOR_TOOL_USE_MARKER
        } else {
            INTERRUPTED_MARKER
        });
        // A response cut short was billed for what it had used.
        if let Some(usage) = &aborted.partial_usage {
            let model = state.run.model.clone();
            self.count(&model, &model, usage);
        }
        let assistant = match aborted.message {
            // The response had completed (and was reported): keep it whole, and count what
            // it cost.
            Some(message) => {
                let asked = state.run.model.clone();
                self.count(&message.model, &asked, &message.usage);
                self.last_text = message.text();
                self.append_response(state, &message, aborted.reported);
                None
            }
            None if !aborted.blocks.is_empty() => {
                let mut blocks = aborted.blocks;
                blocks.sort_by_key(|block| block.index);
                let partial = MessageParam {
                    role: Role::Assistant,
                    content: blocks.into_iter().map(|block| block.block).collect(),
                };
                self.emit(LoopEvent::PartialAssistant(partial.clone()));
                Some(partial)
            }
            None => None,
        };
        if let Some(assistant) = assistant {
            self.append(state, assistant);
        }
        // The marker follows the results in their message (one user message, as the API
        // wants), or comes alone.
        let mut user = if aborted.results.is_empty() {
            MessageParam {
                role: Role::User,
                content: Vec::new(),
            }
        } else {
            let results = results_message(&aborted.results, &[]);
            self.emit(LoopEvent::ToolResults(results.clone()));
            results
        };
        user.content.push(marker);
        self.append(state, user);
    }

    /// Phases 3, 5 and 6: decides on `outcome`, carries out the steps that are effects
    /// (a reactive compaction, the stop hooks; each decided again on its own outcome), and
    /// ends with the next state or the end of the run.
    async fn settle(
        &mut self,
        mut state: State,
        outcome: Outcome<'_>,
        responded: Option<Responded>,
    ) -> Next {
        let mut step = decide(&state, &self.limits, outcome);
        if let Some(responded) = &responded {
            // What changed while the tools ran goes with their results to the next request.
            let goes_on = matches!(
                step,
                Step::Continue(Transition::NextTurn | Transition::MaxTokensRecovery)
            ) && !responded.results.is_empty();
            let attachments = match &self.deps.attachments {
                Some(source) if goes_on => tokio::select! {
                    notes = source.attachments(Batch {
                        response: &responded.message,
                        results: &responded.results,
                    }) => notes,
                    // An abort does not wait for them (the next request is not sent).
                    () = self.cancel.cancelled() => Vec::new(),
                },
                _ => Vec::new(),
            };
            self.keep_response(&mut state, responded, &step, attachments);
            if goes_on {
                self.summarize_batch(&state);
            }
        }
        loop {
            step = match step {
                Step::ReactiveCompact => {
                    let Some(succeeded) = self.reactive_compact(&mut state).await else {
                        return Next::Stop(Terminal::AbortedStreaming, state);
                    };
                    decide(&state, &self.limits, Outcome::Compacted { succeeded })
                }
                Step::RunStopHooks => {
                    let Some(answer) = self.stop_hooks(&state, responded.as_ref()).await else {
                        return Next::Stop(Terminal::AbortedStreaming, state);
                    };
                    let next = decide(&state, &self.limits, Outcome::StopHooks(&answer));
                    if let (Step::Continue(_), StopDecision::Block { reasons }) = (&next, &answer) {
                        let feedback = MessageParam::user_text(format!(
                            "Stop hook feedback:\n{}",
                            reasons.join("\n")
                        ));
                        self.emit(LoopEvent::UserMessage(feedback.clone()));
                        self.append(&mut state, feedback);
                    }
                    if next == Step::Continue(Transition::TokenBudgetContinuation) {
                        let nudge = MessageParam::user_text(budget_nudge(
                            state.run.output_tokens,
                            self.limits.token_budget.unwrap_or_default(),
                        ));
                        self.emit(LoopEvent::UserMessage(nudge.clone()));
                        self.append(&mut state, nudge);
                    }
                    next
                }
                Step::Continue(transition) => {
                    if transition == Transition::FallbackModel
                        && let Some(levels) = self.config.fallback_levels
                    {
                        self.manager.set_levels(levels);
                    }
                    let (usage, repeats) = responded
                        .map(|responded| (responded.message.usage, responded.repeats))
                        .unwrap_or_default();
                    return Next::Continue(state.next(transition, &self.limits, &usage, repeats));
                }
                Step::Stop(terminal) => return Next::Stop(terminal, state),
            };
        }
    }

    /// Keeps a completed response in the history, with the user message that answers it,
    /// as `step` requires: dropped for an escalation (the same request goes again); with its
    /// results, any corrective notes and the resume prompt for a recovery; alone before the
    /// stop hooks (with its calls' results when it ended incomplete); with its results
    /// otherwise.
    fn keep_response(
        &self,
        state: &mut State,
        responded: &Responded,
        step: &Step,
        attachments: Vec<String>,
    ) {
        let tool_uses = responded
            .message
            .content
            .iter()
            .any(|block| block.as_tool_use().is_some());
        let answer = match step {
            Step::Continue(Transition::MaxTokensEscalation) => return,
            Step::Continue(Transition::MaxTokensRecovery) => {
                let mut answer = results_message(&responded.results, &responded.repeat_notes);
                answer.content.push(ContentBlock::text(RESUME_PROMPT));
                Some(answer)
            }
            Step::Stop(Terminal::ModelError(ModelError::MaxTokensExhausted(_))) => {
                tool_uses.then(|| results_message(&responded.results, &[]))
            }
            // A response ended incomplete has its calls answered as not run.
            Step::RunStopHooks => tool_uses.then(|| results_message(&responded.results, &[])),
            _ => Some(results_message(&responded.results, &responded.repeat_notes)),
        };
        self.append_response(state, &responded.message, responded.reported);
        if let Some(mut answer) = answer {
            answer
                .content
                .extend(attachments.into_iter().map(ContentBlock::text));
            self.emit(LoopEvent::ToolResults(answer.clone()));
            self.append(state, answer);
        }
    }

    /// The reactive compaction after "prompt is too long": whether it succeeded, `None`
    /// when the user aborted.
    async fn reactive_compact(&mut self, state: &mut State) -> Option<bool> {
        let compacted = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return None,
            compacted = self.manager.reactive_compact(
                &mut state.messages,
                self.overhead,
                self.deps.summarizer.as_ref(),
                self.deps.files.as_ref(),
            ) => compacted,
        };
        let Ok(prepared) = compacted else {
            return Some(false);
        };
        for event in &prepared.events {
            self.emit(LoopEvent::Context(event.clone()));
        }
        self.compacted(state, &prepared.events, CompactTrigger::Reactive);
        self.sent_breakpoints = None;
        Some(true)
    }

    /// The stop hooks' answer on the response just kept; `None` when the user aborted.
    async fn stop_hooks(
        &self,
        state: &State,
        responded: Option<&Responded>,
    ) -> Option<StopDecision> {
        // Only a completed response leads to the stop hooks.
        let responded = responded?;
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            decision = self.deps.stop_hook.on_stop(StopHookInput {
                messages: state.messages.clone(),
                stop_hook_active: state.run.stop_hook_active,
                last_assistant_message: responded.message.clone(),
            }) => Some(decision),
        }
    }

    /// The last main request's parts, as a summary forked from it repeats them.
    fn last_fork(&self) -> Option<context::Fork> {
        let (model, max_tokens, thinking, effort) = self.last_sent.clone()?;
        Some(context::Fork {
            model,
            max_tokens,
            system: self.system.clone(),
            tools: self.tools.clone(),
            user_context: self.config.user_context.clone(),
            thinking,
            effort,
            breakpoints: self
                .sent_breakpoints
                .as_ref()
                .map(|sent| sent.all.clone())
                .unwrap_or_default(),
        })
    }

    /// The outcome of the run.
    fn finish(self, terminal: Terminal, state: State) -> LoopOutcome {
        // Background summaries end with the run; one not written yet is dropped.
        self.background.cancel();
        for pending in &self.pending_summaries {
            pending.abort();
        }
        tracing::info!(
            terminal = terminal.as_str(),
            turns = state.run.turn,
            requests = self.requests,
            "loop ended"
        );
        let fork = self.last_fork();
        LoopOutcome {
            terminal,
            messages: state.messages,
            turns: state.run.turn,
            requests: self.requests,
            usage: self.usage,
            result: self.last_text,
            last_request: self.last_request,
            fork,
            memory: self.manager.into_memory(),
        }
    }
}

/// The message that sends a model on while its output-token budget is not used up.
fn budget_nudge(used: u64, budget: u64) -> String {
    format!(
        "Keep working on the task: {used} of your {budget}-token output budget are used, {} are left. Go on with what remains to be done (more checks, more cases, a better result); if the task is completely done, say so in one line.",
        budget.saturating_sub(used)
    )
}

/// The tool definitions a request declares.
fn definitions(tools: &[Arc<dyn Tool>]) -> Vec<ToolDefinition> {
    tools
        .iter()
        .filter(|tool| !tool.hidden())
        .map(|tool| ToolDefinition {
            name: tool.name().to_owned(),
            description: Some(tool.description().to_owned()),
            input_schema: tool.input_schema().clone(),
            cache_control: None,
            extra: Default::default(),
        })
        .collect()
}

/// Tokens of what every request sends besides the messages.
fn overhead(config: &LoopConfig, manager: &ContextManager, tools: &[ToolDefinition]) -> Tokens {
    let estimator = manager.estimator();
    let system: Tokens = config.system.iter().map(|text| estimator.text(text)).sum();
    let tools = estimator.text(&serde_json::to_string(tools).unwrap_or_default());
    let user_context = config
        .user_context
        .as_deref()
        .map_or(Tokens::ZERO, |text| estimator.text(text));
    system + tools + user_context
}

/// The user message holding a turn's tool results (in model order), then any notes.
///
/// A call that repeated an earlier call's id was not run ([`executor::Outcome::DuplicateId`]);
/// its id's one result is the earlier call's, so what it was told goes as a note (a second
/// tool_result for the id would be dropped as a repeat before the next request).
fn results_message(results: &[CompletedTool], notes: &[String]) -> MessageParam {
    let (repeats, results): (Vec<&CompletedTool>, Vec<&CompletedTool>) = results
        .iter()
        .partition(|result| result.outcome == executor::Outcome::DuplicateId);
    let mut content: Vec<ContentBlock> = results
        .into_iter()
        .map(|result| ContentBlock::ToolResult(result.result.clone()))
        .collect();
    content.extend(
        repeats
            .into_iter()
            .map(|repeat| ContentBlock::text(repeat.result.content.text())),
    );
    content.extend(notes.iter().map(|note| ContentBlock::text(note.clone())));
    MessageParam {
        role: Role::User,
        content,
    }
}

/// System prompt blocks with the cache breakpoint on the last one. Empty texts are left
/// out (the API refuses an empty text block; the Python Agent SDK asks for an empty system
/// prompt by default).
fn system_blocks(config: &LoopConfig) -> Vec<SystemBlock> {
    let texts: Vec<&String> = config
        .system
        .iter()
        .filter(|text| !text.is_empty())
        .collect();
    let last = texts.len().saturating_sub(1);
    texts
        .into_iter()
        .enumerate()
        .map(|(index, text)| {
            SystemBlock::new(text.clone(), (index == last).then(CacheControl::ephemeral))
        })
        .collect()
}

#[cfg(test)]
mod system_tests {
    use super::*;

    #[test]
    fn empty_system_texts_are_left_out_and_the_breakpoint_is_on_the_last_kept() {
        let mut config =
            LoopConfig::for_model_info("claude-opus-4-8", &context::lookup("claude-opus-4-8").0);
        config.system = vec![String::new()];
        assert!(system_blocks(&config).is_empty());
        config.system = vec!["first".into(), String::new()];
        let blocks = serde_json::to_value(system_blocks(&config)).unwrap();
        assert_eq!(
            blocks,
            serde_json::json!([{"type": "text", "text": "first", "cache_control": {"type": "ephemeral"}}])
        );
    }
}
