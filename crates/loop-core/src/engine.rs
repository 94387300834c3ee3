//! The loop itself: one `State` value, replaced at each `continue`.

use std::collections::HashMap;
use std::sync::Arc;

use context::{
    ContextConfig, ContextEvent, ContextManager, FileSource, ResultStore, Services, Summarizer,
    Tokens,
};
use executor::{
    CanUseTool, CompletedTool, ExecutorConfig, ExecutorEvent, InputProblem, StreamingToolExecutor,
    Tool, ToolCall, Workspace,
};
use futures_util::StreamExt as _;
use protocol::{
    BlockStatus, CacheControl, CompletedBlock, ContentBlock, Message, MessageParam, Role,
    StopReason, StreamEvent, SystemBlock, ThinkingConfig, ToolDefinition, ToolUseId, Usage,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::events::{LoopEvent, LoopOutcome, Terminal, Transition};
use crate::hooks::{StopDecision, StopHook, StopHookInput};
use crate::model::{ModelClient, ModelError, ModelEvent};
use crate::request::ModelRequest;

/// The user message that asks the model to go on after a max_tokens cut.
pub const RESUME_PROMPT: &str = "Output token limit hit. Resume directly where you stopped, without apology or recap. If you were in the middle of a tool call, split the work into smaller steps.";

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    /// The model to ask.
    pub model: String,
    /// The model to switch to when the first stays overloaded.
    pub fallback_model: Option<String>,
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
    /// Tool execution.
    pub executor: ExecutorConfig,
}

impl LoopConfig {
    /// Defaults for `model`, taking its window and caps from the model table.
    pub fn for_model(model: &str) -> Self {
        let (info, _known) = context::lookup(model);
        Self {
            model: model.to_owned(),
            fallback_model: None,
            max_turns: None,
            output_cap: u32::try_from(info.default_output_cap.0).unwrap_or(u32::MAX),
            escalated_output_cap: u32::try_from(info.escalated_output_cap.0).unwrap_or(u32::MAX),
            system: Vec::new(),
            user_context: None,
            thinking: None,
            max_tokens_recoveries: 3,
            stop_hook_cap: 8,
            repeat_note_at: 3,
            repeat_stop_at: 5,
            context: ContextConfig::for_model(info.context_window, info.max_output),
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

/// The loop's state, replaced wholesale at each `continue`.
#[derive(Clone, Debug)]
struct State {
    messages: Vec<MessageParam>,
    turn: u32,
    max_tokens_recoveries: u32,
    reactive_compact_attempted: bool,
    stop_hook_active: bool,
    stop_hook_blocks: u32,
    output_cap_override: Option<u32>,
    model: String,
    fallback_used: bool,
    /// The last response's usage and how many leading messages it covered.
    last_usage: Option<(Usage, usize)>,
    /// Consecutive-turn counts of each call signature seen in the previous turn.
    repeats: HashMap<String, u32>,
    transition: Option<Transition>,
}

/// How one model call ended.
enum CallEnd {
    Done {
        message: Box<Message>,
        results: Vec<CompletedTool>,
        repeat_stop: bool,
        repeat_notes: Vec<String>,
        repeats: HashMap<String, u32>,
    },
    Failed(ModelError),
    Aborted {
        /// The whole response, when it had completed (its event was already emitted).
        message: Option<Box<Message>>,
        blocks: Vec<CompletedBlock>,
        results: Vec<CompletedTool>,
        during_tools: bool,
        /// The usage reported so far by a response cut short (its message_start, then
        /// message_delta), when it had not completed.
        partial_usage: Option<Usage>,
    },
}

/// Runs the loop on a new task; returns its handle and the event stream.
pub fn spawn_loop(
    config: LoopConfig,
    deps: Deps,
    messages: Vec<MessageParam>,
    cancel: CancellationToken,
) -> (
    tokio::task::JoinHandle<LoopOutcome>,
    mpsc::UnboundedReceiver<LoopEvent>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let handle = tokio::spawn(run_loop(config, deps, messages, sender, cancel));
    (handle, receiver)
}

/// Runs the loop until a terminal reason. `messages` is the history so far, ending with the
/// user's new message. Events go to `events` (a closed receiver is fine).
///
/// # Cancellation safety
///
/// Use `cancel`, not dropping the future, to stop a run: cancelling ends it with
/// AbortedStreaming or AbortedTools and a history that passes the pairing validator. Dropping
/// the future stops everything too (tools are cancelled) but returns no history.
pub async fn run_loop(
    config: LoopConfig,
    mut deps: Deps,
    messages: Vec<MessageParam>,
    events: mpsc::UnboundedSender<LoopEvent>,
    cancel: CancellationToken,
) -> LoopOutcome {
    let emit = |event: LoopEvent| {
        // The caller may have stopped listening; the run goes on.
        let _ = events.send(event);
    };
    let mut manager = ContextManager::new(config.context.clone());
    let tool_definitions: Vec<ToolDefinition> = deps
        .tools
        .iter()
        .map(|tool| ToolDefinition {
            name: tool.name().to_owned(),
            description: Some(tool.description().to_owned()),
            input_schema: tool.input_schema().clone(),
            cache_control: None,
            extra: Default::default(),
        })
        .collect();
    let overhead = {
        let estimator = manager.estimator();
        let system: Tokens = config.system.iter().map(|text| estimator.text(text)).sum();
        let tools = estimator.text(&serde_json::to_string(&tool_definitions).unwrap_or_default());
        let user_context = config
            .user_context
            .as_deref()
            .map_or(Tokens::ZERO, |text| estimator.text(text));
        system + tools + user_context
    };
    let system = system_blocks(&config);
    let mut last_text = String::new();
    let mut usage_total = Usage::default();
    let mut requests = 0;
    let mut state = State {
        messages,
        turn: 1,
        max_tokens_recoveries: 0,
        reactive_compact_attempted: false,
        stop_hook_active: false,
        stop_hook_blocks: 0,
        output_cap_override: None,
        model: config.model.clone(),
        fallback_used: false,
        last_usage: None,
        repeats: HashMap::new(),
        transition: None,
    };

    let terminal = loop {
        if let Some(transition) = state.transition {
            emit(LoopEvent::Transition(transition));
        }
        if cancel.is_cancelled() {
            break Terminal::AbortedStreaming;
        }

        // 1. Preprocess: L1, L2, levels, L3.
        let prepared = {
            let services = Services {
                store: deps.result_store.as_mut(),
                summarizer: deps.summarizer.as_ref(),
                files: deps.files.as_ref(),
            };
            let last = state
                .last_usage
                .as_ref()
                .map(|(usage, covered)| (usage, *covered));
            tokio::select! {
                biased;
                () = cancel.cancelled() => break Terminal::AbortedStreaming,
                prepared = manager.preprocess(&mut state.messages, overhead, last, services) => prepared,
            }
        };
        let compacted = prepared
            .events
            .iter()
            .any(|event| matches!(event, ContextEvent::Compacted { .. }));
        for event in prepared.events {
            emit(LoopEvent::Context(event));
        }
        if compacted {
            state.last_usage = None;
            emit(LoopEvent::Transition(Transition::Compacted));
        }
        if let Some(reason) = prepared.blocked {
            break Terminal::BlockingLimit(reason.to_string());
        }

        // 2. Call the model, running tools as their blocks complete.
        let request = ModelRequest {
            model: &state.model,
            max_tokens: state.output_cap_override.unwrap_or(config.output_cap),
            system: &system,
            tools: &tool_definitions,
            messages: &state.messages,
            user_context: config.user_context.as_deref(),
            thinking: config.thinking.as_ref(),
        };
        requests += 1;
        emit(LoopEvent::Request {
            turn: state.turn,
            request: requests,
            model: state.model.clone(),
        });
        let end = call_model(&config, &deps, &state, &request, &cancel, &emit).await;
        let (message, results, repeat_stop, repeat_notes, repeats) = match end {
            CallEnd::Done {
                message,
                results,
                repeat_stop,
                repeat_notes,
                repeats,
            } => (message, results, repeat_stop, repeat_notes, repeats),
            CallEnd::Aborted {
                message,
                blocks,
                results,
                during_tools,
                partial_usage,
            } => {
                // A response cut short was billed for what it had used.
                if let Some(usage) = &partial_usage {
                    emit(LoopEvent::Usage(usage.clone()));
                    add_usage(&mut usage_total, usage);
                }
                let mut messages = std::mem::take(&mut state.messages);
                let assistant = match message {
                    // The response had completed (and was reported): keep it whole, and
                    // count what it cost.
                    Some(message) => {
                        emit(LoopEvent::Usage(message.usage.clone()));
                        add_usage(&mut usage_total, &message.usage);
                        last_text = message.text();
                        Some(message.to_param())
                    }
                    None if !blocks.is_empty() => {
                        let mut blocks = blocks;
                        blocks.sort_by_key(|block| block.index);
                        let partial = MessageParam {
                            role: Role::Assistant,
                            content: blocks.into_iter().map(|block| block.block).collect(),
                        };
                        emit(LoopEvent::PartialAssistant(partial.clone()));
                        Some(partial)
                    }
                    None => None,
                };
                if let Some(assistant) = assistant {
                    messages.push(assistant);
                    if !results.is_empty() {
                        let results = results_message(&results, &[]);
                        emit(LoopEvent::ToolResults(results.clone()));
                        messages.push(results);
                    }
                }
                state.messages = messages;
                break if during_tools {
                    Terminal::AbortedTools
                } else {
                    Terminal::AbortedStreaming
                };
            }
            CallEnd::Failed(error) => {
                let next = match error {
                    ModelError::PromptTooLong(_) if !state.reactive_compact_attempted => {
                        let compacted = tokio::select! {
                            biased;
                            () = cancel.cancelled() => break Terminal::AbortedStreaming,
                            compacted = manager.reactive_compact(&mut state.messages, overhead, deps.summarizer.as_ref(), deps.files.as_ref()) => compacted,
                        };
                        match compacted {
                            Ok(prepared) => {
                                for event in prepared.events {
                                    emit(LoopEvent::Context(event));
                                }
                                State {
                                    reactive_compact_attempted: true,
                                    last_usage: None,
                                    transition: Some(Transition::ReactiveCompact),
                                    ..state
                                }
                            }
                            Err(_) => break Terminal::PromptTooLong,
                        }
                    }
                    ModelError::PromptTooLong(_) => break Terminal::PromptTooLong,
                    ModelError::Overloaded(_)
                        if !state.fallback_used && config.fallback_model.is_some() =>
                    {
                        State {
                            model: config.fallback_model.clone().unwrap_or_default(),
                            fallback_used: true,
                            transition: Some(Transition::FallbackModel),
                            ..state
                        }
                    }
                    ModelError::Image(detail) => break Terminal::ImageError(detail),
                    other => break Terminal::ModelError(other),
                };
                state = next;
                continue;
            }
        };
        emit(LoopEvent::Usage(message.usage.clone()));
        last_text = message.text();
        add_usage(&mut usage_total, &message.usage);
        let has_tool_uses = message
            .content
            .iter()
            .any(|block| block.as_tool_use().is_some());

        // 3a. max_tokens: escalate once, then recover up to the limit.
        if message.stop_reason == Some(StopReason::MaxTokens) {
            let nothing_ran = results.iter().all(|result| !result.outcome.ran());
            let cap = state.output_cap_override.unwrap_or(config.output_cap);
            if state.output_cap_override.is_none()
                && nothing_ran
                && config.escalated_output_cap > cap
            {
                state = State {
                    output_cap_override: Some(config.escalated_output_cap),
                    transition: Some(Transition::MaxTokensEscalation),
                    ..state
                };
                continue;
            }
            let mut messages = std::mem::take(&mut state.messages);
            messages.push(message.to_param());
            if state.max_tokens_recoveries >= config.max_tokens_recoveries {
                if has_tool_uses {
                    let results = results_message(&results, &[]);
                    emit(LoopEvent::ToolResults(results.clone()));
                    messages.push(results);
                }
                state.messages = messages;
                break Terminal::ModelError(ModelError::MaxTokensExhausted(
                    state.max_tokens_recoveries + 1,
                ));
            }
            let mut next = results_message(&results, &repeat_notes);
            next.content.push(ContentBlock::text(RESUME_PROMPT));
            emit(LoopEvent::ToolResults(next.clone()));
            messages.push(next);
            let covered = messages.len() - 1;
            state = State {
                messages,
                max_tokens_recoveries: state.max_tokens_recoveries + 1,
                last_usage: Some((message.usage.clone(), covered)),
                repeats,
                transition: Some(Transition::MaxTokensRecovery),
                ..state
            };
            continue;
        }

        // 3b. No tool_use: stop hooks, then done.
        if !has_tool_uses {
            let mut messages = std::mem::take(&mut state.messages);
            messages.push(message.to_param());
            let decision = tokio::select! {
                biased;
                () = cancel.cancelled() => { state.messages = messages; break Terminal::AbortedStreaming }
                decision = deps.stop_hook.on_stop(StopHookInput {
                    messages: messages.clone(),
                    stop_hook_active: state.stop_hook_active,
                    last_assistant_message: (*message).clone(),
                }) => decision,
            };
            match decision {
                StopDecision::Block { reasons } => {
                    if state.stop_hook_blocks >= config.stop_hook_cap {
                        state.messages = messages;
                        break Terminal::StopHookCapReached;
                    }
                    let feedback = MessageParam::user_text(format!(
                        "Stop hook feedback:\n{}",
                        reasons.join("\n")
                    ));
                    emit(LoopEvent::UserMessage(feedback.clone()));
                    messages.push(feedback);
                    let covered = messages.len() - 1;
                    state = State {
                        messages,
                        stop_hook_active: true,
                        stop_hook_blocks: state.stop_hook_blocks + 1,
                        max_tokens_recoveries: 0,
                        last_usage: Some((message.usage.clone(), covered)),
                        repeats: HashMap::new(),
                        transition: Some(Transition::StopHookBlocking),
                        ..state
                    };
                    continue;
                }
                StopDecision::Prevent { reason } => {
                    state.messages = messages;
                    break Terminal::StopHookPrevented(reason);
                }
                _ => {
                    state.messages = messages;
                    break Terminal::Completed;
                }
            }
        }

        // 4. Tools ran: their results, in model order, as one user message.
        let mut messages = std::mem::take(&mut state.messages);
        messages.push(message.to_param());
        let results_message = results_message(&results, &repeat_notes);
        emit(LoopEvent::ToolResults(results_message.clone()));
        messages.push(results_message);
        if repeat_stop {
            state.messages = messages;
            break Terminal::RepeatedToolCall;
        }

        // 5. Max turns.
        if config.max_turns.is_some_and(|max| state.turn + 1 > max) {
            state.messages = messages;
            break Terminal::MaxTurns;
        }

        // 6. Next state.
        let covered = messages.len() - 1;
        state = State {
            messages,
            turn: state.turn + 1,
            max_tokens_recoveries: 0,
            reactive_compact_attempted: false,
            output_cap_override: None,
            last_usage: Some((message.usage.clone(), covered)),
            repeats,
            transition: Some(Transition::NextTurn),
            ..state
        };
    };

    // The text of the last response of this run (not of a resumed history).
    let result = last_text;
    tracing::info!(
        terminal = terminal.as_str(),
        turns = state.turn,
        requests,
        "loop ended"
    );
    LoopOutcome {
        terminal,
        messages: state.messages,
        turns: state.turn,
        requests,
        usage: usage_total,
        result,
    }
}

fn add_usage(total: &mut Usage, usage: &Usage) {
    total.input_tokens += usage.input_tokens;
    total.output_tokens += usage.output_tokens;
    let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    total.cache_creation_input_tokens = sum(
        total.cache_creation_input_tokens,
        usage.cache_creation_input_tokens,
    );
    total.cache_read_input_tokens =
        sum(total.cache_read_input_tokens, usage.cache_read_input_tokens);
}

/// The user message holding a turn's tool results (in model order), then any notes.
fn results_message(results: &[CompletedTool], notes: &[String]) -> MessageParam {
    let mut content: Vec<ContentBlock> = results
        .iter()
        .map(|result| ContentBlock::ToolResult(result.result.clone()))
        .collect();
    content.extend(notes.iter().map(|note| ContentBlock::text(note.clone())));
    MessageParam {
        role: Role::User,
        content,
    }
}

/// System prompt blocks with the cache breakpoint on the last one.
fn system_blocks(config: &LoopConfig) -> Vec<SystemBlock> {
    let last = config.system.len().saturating_sub(1);
    config
        .system
        .iter()
        .enumerate()
        .map(|(index, text)| {
            SystemBlock::new(text.clone(), (index == last).then(CacheControl::ephemeral))
        })
        .collect()
}

/// A tool call's identity for the repeated-call guard: name and canonical JSON input (keys
/// sorted at every level).
fn signature(name: &str, input: &Value) -> String {
    format!("{name} {}", protocol::canonical_json(input))
}

/// Streams one model call and runs its tools.
async fn call_model(
    config: &LoopConfig,
    deps: &Deps,
    state: &State,
    request: &ModelRequest<'_>,
    cancel: &CancellationToken,
    emit: &impl Fn(LoopEvent),
) -> CallEnd {
    let mut executor = StreamingToolExecutor::new(
        deps.tools.clone(),
        Arc::clone(&deps.permissions),
        config.executor,
        cancel.child_token(),
        Arc::clone(&deps.workspace),
    );
    let mut stream = deps.model.stream(request, cancel.child_token());
    let mut blocks: Vec<CompletedBlock> = Vec::new();
    let mut held: Option<CompletedBlock> = None;
    let mut added: Vec<ToolUseId> = Vec::new();
    let mut results: Vec<CompletedTool> = Vec::new();
    let mut done: Option<Message> = None;
    let mut partial_usage: Option<Usage> = None;
    let mut stream_open = true;

    let mut guard = RepeatGuard {
        previous: &state.repeats,
        current: HashMap::new(),
        notes: Vec::new(),
        stop: false,
        note_at: config.repeat_note_at,
        stop_at: config.repeat_stop_at,
    };
    let add = |executor: &mut StreamingToolExecutor,
               block: &CompletedBlock,
               truncated: bool,
               added: &mut Vec<ToolUseId>,
               guard: &mut RepeatGuard<'_>| {
        let Some(mut call) = ToolCall::from_block(block) else {
            return;
        };
        if truncated && call.input_problem.is_none() {
            call.input_problem = Some(InputProblem::Truncated);
        }
        guard.check(&mut call);
        added.push(call.id.clone());
        executor.add_tool(call);
    };

    loop {
        if !stream_open && executor.is_idle() {
            break;
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => {
                let during_tools = !executor.is_idle() || held.is_some();
                if let Some(block) = held.take() {
                    add(&mut executor, &block, false, &mut added, &mut guard);
                }
                // The executor's parent token is cancelled: unfinished calls end as interrupted.
                for event in executor.drain().await {
                    if let ExecutorEvent::Completed(completed) = &event {
                        results.push(completed.clone());
                    }
                    emit(LoopEvent::Tool(event));
                }
                // Keep only blocks whose tool_uses (if any) have results.
                blocks.retain(|block| block.block.as_tool_use().is_none_or(|tool_use| added.contains(&tool_use.id)));
                let partial_usage = if done.is_none() { partial_usage } else { None };
                return CallEnd::Aborted { message: done.map(Box::new), blocks, results, during_tools, partial_usage };
            }
            item = stream.next(), if stream_open => match item {
                None => {
                    stream_open = false;
                    if done.is_none() {
                        executor.discard();
                        return CallEnd::Failed(ModelError::Transport("the model stream ended without a response".into()));
                    }
                }
                Some(Err(error)) => {
                    let discarded = executor.discard();
                    report_discarded(&discarded, emit);
                    return CallEnd::Failed(error);
                }
                Some(Ok(event)) => match event {
                    ModelEvent::Stream(stream_event) => {
                        match &stream_event {
                            StreamEvent::MessageStart { message } => partial_usage = Some(message.usage.clone()),
                            StreamEvent::ContentBlockStart { index, .. } => {
                                // A later block started: the held tool_use was not the last.
                                if let Some(block) = held.take_if(|block| block.index < *index) {
                                    add(&mut executor, &block, false, &mut added, &mut guard);
                                }
                            }
                            StreamEvent::MessageDelta(delta) => {
                                if let (Some(usage), Some(update)) = (&mut partial_usage, &delta.usage) {
                                    usage.apply_delta(update);
                                }
                                if delta.stop_reason.as_ref().is_some_and(|reason| *reason != StopReason::MaxTokens)
                                    && let Some(block) = held.take()
                                {
                                    add(&mut executor, &block, false, &mut added, &mut guard);
                                }
                            }
                            _ => {}
                        }
                        emit(LoopEvent::Stream(stream_event));
                    }
                    ModelEvent::BlockComplete(block) => {
                        emit(LoopEvent::Block(block.clone()));
                        if let Some(previous) = held.take() {
                            add(&mut executor, &previous, false, &mut added, &mut guard);
                        }
                        if block.block.as_tool_use().is_some() {
                            held = Some(block.clone());
                        }
                        blocks.push(block);
                    }
                    ModelEvent::Restart { reason, non_streaming } => {
                        tracing::warn!(%reason, non_streaming, "model stream restarted");
                        let discarded = executor.discard();
                        report_discarded(&discarded, emit);
                        blocks.clear();
                        partial_usage = None;
                        held = None;
                        added.clear();
                        results.clear();
                        guard.reset();
                        emit(LoopEvent::Transition(if non_streaming { Transition::NonStreamingFallback } else { Transition::StreamRetry }));
                    }
                    ModelEvent::Retry { attempt, delay, reason } => emit(LoopEvent::Retry { attempt, delay, reason }),
                    ModelEvent::Idle { silent_for } => emit(LoopEvent::Idle { silent_for }),
                    ModelEvent::Done { message, block_status } => {
                        let cut = message.stop_reason == Some(StopReason::MaxTokens);
                        if let Some(block) = held.take() {
                            add(&mut executor, &block, cut, &mut added, &mut guard);
                        }
                        // tool_uses that never completed (left open by a cut) still need answers.
                        for (index, block) in message.content.iter().enumerate() {
                            if let Some(tool_use) = block.as_tool_use()
                                && !added.contains(&tool_use.id)
                            {
                                let status = block_status.get(index).cloned().unwrap_or(BlockStatus::Truncated { raw_input: None });
                                let completed = CompletedBlock { index, block: block.clone(), status };
                                add(&mut executor, &completed, true, &mut added, &mut guard);
                            }
                        }
                        emit(LoopEvent::Assistant(message.clone()));
                        done = Some(message);
                        stream_open = false;
                    }
                },
            },
            event = executor.next_event(), if !executor.is_idle() => {
                if let Some(event) = event {
                    if let ExecutorEvent::Completed(completed) = &event {
                        results.push(completed.clone());
                    }
                    emit(LoopEvent::Tool(event));
                }
            }
        }
    }
    let Some(message) = done else {
        return CallEnd::Failed(ModelError::Transport(
            "the model stream ended without a response".into(),
        ));
    };
    CallEnd::Done {
        message: Box::new(message),
        results,
        repeat_stop: guard.stop,
        repeat_notes: guard.notes,
        repeats: guard.current,
    }
}

/// The repeated-call guard of one response: counts each call signature's consecutive turns.
struct RepeatGuard<'a> {
    /// Counts of the previous turn.
    previous: &'a HashMap<String, u32>,
    /// Counts of this turn.
    current: HashMap<String, u32>,
    /// Corrective notes to send with this turn's results.
    notes: Vec<String>,
    /// Whether a call reached the stop count.
    stop: bool,
    note_at: u32,
    stop_at: u32,
}

impl RepeatGuard<'_> {
    /// Counts `call`; refuses it at the stop count, adds a note at the note count.
    fn check(&mut self, call: &mut ToolCall) {
        // Calls that cannot run count too: a model repeating a broken call must also stop.
        let previous = self.previous;
        let count = *self
            .current
            .entry(signature(&call.name, &call.input))
            .or_insert_with_key(|key| previous.get(key).copied().unwrap_or(0) + 1);
        if count >= self.stop_at {
            self.stop = true;
            if call.input_problem.is_some() {
                return;
            }
            call.input_problem = Some(InputProblem::Rejected {
                reason: format!(
                    "Error: this exact {} call was made {count} times in a row; it was not run and the run stops here.",
                    call.name
                ),
            });
            self.stop = true;
        } else if count == self.note_at {
            self.notes.push(format!(
                "Note: you have made this exact {} call with the same input {count} times in a row and got the same result each time. Do not repeat it; try a different approach.",
                call.name
            ));
        }
    }

    /// Forgets this turn's counts (the response was dropped).
    fn reset(&mut self) {
        self.current.clear();
        self.notes.clear();
        self.stop = false;
    }
}

fn report_discarded(discarded: &[executor::Discarded], emit: &impl Fn(LoopEvent)) {
    let finished: Vec<(String, String)> = discarded
        .iter()
        .filter(|tool| tool.had_started)
        .map(|tool| (tool.name.clone(), tool.tool_use_id.to_string()))
        .collect();
    if !finished.is_empty() {
        emit(LoopEvent::DiscardedTools { tools: finished });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::signature;

    #[test]
    fn signatures_ignore_key_order() {
        assert_eq!(
            signature(
                "Read",
                &json!({"file_path": "/w/a.txt", "limit": 10, "opts": {"b": 1, "a": 2}})
            ),
            signature(
                "Read",
                &json!({"opts": {"a": 2, "b": 1}, "limit": 10, "file_path": "/w/a.txt"})
            )
        );
        assert_ne!(
            signature("Read", &json!({"file_path": "a"})),
            signature("Read", &json!({"file_path": "b"}))
        );
    }
}
