//! What the loop reports: transitions, terminal reasons and the event stream.

use std::fmt;
use std::time::Duration;

use context::ContextEvent;
use executor::ExecutorEvent;
use protocol::{
    CompletedBlock, Message, MessageParam, StreamEvent, ToolResultContent, ToolUseId, Usage,
};

use crate::model::ModelError;

/// Why the loop went around again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Tools ran; their results go to the model.
    NextTurn,
    /// The response hit max_tokens before anything ran: the same request again with the
    /// escalated output cap.
    MaxTokensEscalation,
    /// The response hit max_tokens: it is kept and the model is asked to resume.
    MaxTokensRecovery,
    /// The API said the prompt is too long: compacted, then the same turn again.
    ReactiveCompact,
    /// A stop hook blocked the end of the turn; its reasons go to the model.
    StopHookBlocking,
    /// The model stopped with output-token budget left: it is nudged to go on.
    TokenBudgetContinuation,
    /// The model stayed overloaded: the same turn with the fallback model.
    FallbackModel,
    /// The stream failed; the client fell back to one non-streaming request.
    NonStreamingFallback,
    /// The stream failed after blocks had arrived; the client retried it.
    StreamRetry,
    /// The history was compacted before the request.
    Compacted,
}

impl Transition {
    /// A stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NextTurn => "next_turn",
            Self::MaxTokensEscalation => "max_tokens_escalation",
            Self::MaxTokensRecovery => "max_tokens_recovery",
            Self::ReactiveCompact => "reactive_compact",
            Self::StopHookBlocking => "stop_hook_blocking",
            Self::TokenBudgetContinuation => "token_budget_continuation",
            Self::FallbackModel => "fallback_model",
            Self::NonStreamingFallback => "non_streaming_fallback",
            Self::StreamRetry => "stream_retry",
            Self::Compacted => "compacted",
        }
    }
}

/// Why the loop ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Terminal {
    /// The model finished and no stop hook objected.
    Completed,
    /// The turn limit was reached.
    MaxTurns,
    /// The user aborted while the model was streaming.
    AbortedStreaming,
    /// The user aborted while tools were running.
    AbortedTools,
    /// The prompt stayed too long after a reactive compaction.
    PromptTooLong,
    /// The history is at the blocking limit and cannot be compacted.
    BlockingLimit(String),
    /// The model call failed.
    ModelError(ModelError),
    /// The API rejected an image.
    ImageError(String),
    /// A stop hook ended the run.
    StopHookPrevented(String),
    /// The model repeated the same tool call too many times.
    RepeatedToolCall,
    /// Stop hooks blocked the end of the turn too many times.
    StopHookCapReached,
    /// The spending limit was reached (`--max-budget-usd`); the detail says how much was spent.
    MaxBudget(String),
    /// The output-token budget is used up (`--max-tokens-budget`).
    TokenBudgetReached,
    /// Three nudges in a row each brought fewer than 500 output tokens: the model is done
    /// before its output-token budget is.
    DiminishingReturns,
}

impl Terminal {
    /// A stable snake_case name, for JSON output.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::MaxTurns => "max_turns",
            Self::AbortedStreaming => "aborted_streaming",
            Self::AbortedTools => "aborted_tools",
            Self::PromptTooLong => "prompt_too_long",
            Self::BlockingLimit(_) => "blocking_limit",
            Self::ModelError(_) => "model_error",
            Self::ImageError(_) => "image_error",
            Self::StopHookPrevented(_) => "stop_hook_prevented",
            Self::RepeatedToolCall => "repeated_tool_call",
            Self::StopHookCapReached => "stop_hook_cap_reached",
            Self::MaxBudget(_) => "max_budget_usd",
            Self::TokenBudgetReached => "token_budget_reached",
            Self::DiminishingReturns => "diminishing_returns",
        }
    }
}

impl fmt::Display for Terminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BlockingLimit(detail)
            | Self::ImageError(detail)
            | Self::StopHookPrevented(detail)
            | Self::MaxBudget(detail) => {
                write!(f, "{}: {detail}", self.as_str())
            }
            Self::ModelError(error) => write!(f, "model_error: {error}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// A change to the history the loop keeps: exactly what a transcript persists, so what is
/// saved is what the loop had, byte for byte, and a resumed session sends the same prefix.
/// Nothing else changes the history during a run. Exhaustive on purpose: a new kind of
/// change must be handled wherever history is persisted.
#[derive(Clone, Debug, PartialEq)]
pub enum HistoryEvent {
    /// A completed response was appended whole (with its id, model, stop_reason, usage).
    Response(Box<Message>),
    /// A message was appended: a user message the loop added (tool results, a resume
    /// prompt, stop-hook feedback) or the kept blocks of a response cut short by an abort.
    Appended(MessageParam),
    /// Context management rewrote the content of earlier tool results in place (L1 moved one
    /// to a file, L2 cleared old ones): each result's tool_use id and new content.
    Rewritten(Vec<(ToolUseId, ToolResultContent)>),
    /// Compaction replaced the history: from now on it is `messages` (the summary message
    /// first, then the recent messages kept).
    Compacted {
        /// What started it.
        trigger: CompactTrigger,
        /// Estimated tokens of the history before.
        pre_tokens: u64,
        /// The whole history after.
        messages: Vec<MessageParam>,
    },
    /// The user took the conversation back to an earlier point (a rewind; never made by the
    /// loop itself): from now on the history is `messages`, as it was when user turn `turn`
    /// ended (0: before the first turn). A rewind is undone by another one.
    Rewound {
        /// The user turn whose end the history is back at.
        turn: u64,
        /// The whole history after (may be empty).
        messages: Vec<MessageParam>,
    },
}

impl HistoryEvent {
    /// Replays this change on `history`: what the loop did to its own. Replaying a run's
    /// history events, in order, on the messages it started from gives the history it left.
    pub fn apply(&self, history: &mut Vec<MessageParam>) {
        match self {
            Self::Response(message) => history.push(message.to_param()),
            Self::Appended(message) => history.push(message.clone()),
            Self::Rewritten(results) => rewrite_results(history, results),
            Self::Compacted { messages, .. } | Self::Rewound { messages, .. } => {
                history.clone_from(messages);
            }
        }
    }
}

/// Gives each tool_result of `history` named in `results` its new content.
pub fn rewrite_results(history: &mut [MessageParam], results: &[(ToolUseId, ToolResultContent)]) {
    for block in history.iter_mut().flat_map(|message| &mut message.content) {
        if let protocol::ContentBlock::ToolResult(result) = block
            && let Some((_, content)) = results.iter().find(|(id, _)| *id == result.tool_use_id)
        {
            result.content = content.clone();
        }
    }
}

/// What started a compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactTrigger {
    /// The history crossed the autocompact threshold (L3).
    Auto,
    /// The API answered "prompt is too long" (reactive compaction).
    Reactive,
    /// The user asked for it (`/compact`); never made by the loop itself.
    Manual,
}

impl CompactTrigger {
    /// Claude Code's name in `compact_metadata.trigger`: `auto` for the loop's own
    /// compactions, `manual` for `/compact`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto | Self::Reactive => "auto",
            Self::Manual => "manual",
        }
    }
}

/// One thing the loop reports while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopEvent {
    /// A model request is about to be sent.
    Request {
        /// 1-based turn number.
        turn: u32,
        /// 1-based request number within the run.
        request: u32,
        /// The model asked.
        model: String,
    },
    /// A decoded stream event, for live rendering.
    Stream(StreamEvent),
    /// An assistant content block completed.
    Block(CompletedBlock),
    /// A response completed.
    Assistant(Message),
    /// Tool execution.
    Tool(ExecutorEvent),
    /// The tool results of a turn, as sent to the model (with a resume prompt or a
    /// corrective note when there is one).
    ToolResults(MessageParam),
    /// The completed blocks of a response cut short by a user abort, as kept in the history.
    PartialAssistant(MessageParam),
    /// A user message the loop added itself (stop-hook feedback).
    UserMessage(MessageParam),
    /// Context management.
    Context(ContextEvent),
    /// The model client is retrying.
    Retry {
        /// 1-based retry number.
        attempt: u32,
        /// The wait before it.
        delay: Duration,
        /// What failed.
        reason: String,
    },
    /// The stream has been silent for a while.
    Idle {
        /// How long.
        silent_for: Duration,
    },
    /// Side effects of tools that completed before their response was dropped (stream
    /// restart); their tool_uses left with the failed attempt.
    DiscardedTools {
        /// Names and ids of the tools.
        tools: Vec<(String, String)>,
    },
    /// The history changed (persist these, and only these).
    History(HistoryEvent),
    /// The loop goes around again.
    Transition(Transition),
    /// Usage of one response.
    Usage(Usage),
    /// A 3-5 word summary of the current progress, from the fast model in the background
    /// ([`crate::background`]); never part of the history.
    ProgressSummary {
        /// The summary.
        text: String,
        /// The model that wrote it.
        model: String,
        /// Its request's usage (not in [`LoopOutcome::usage`]).
        usage: Usage,
    },
    /// A one-line summary of a tool batch, from the fast model in the background, reported
    /// once the next model call finished; never part of the history.
    ToolUseSummary {
        /// The summary.
        text: String,
        /// The batch's tool_use ids.
        tool_use_ids: Vec<protocol::ToolUseId>,
        /// The model that wrote it.
        model: String,
        /// Its request's usage (not in [`LoopOutcome::usage`]).
        usage: Usage,
    },
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopOutcome {
    /// Why it ended.
    pub terminal: Terminal,
    /// The history left behind (always passes `context::validate_pairing`).
    pub messages: Vec<MessageParam>,
    /// Turns taken.
    pub turns: u32,
    /// Model requests sent.
    pub requests: u32,
    /// Usage summed over every response.
    pub usage: Usage,
    /// The text of the last assistant message.
    pub result: String,
    /// When the last request was sent (the next run's [`crate::LoopConfig::last_request`]).
    pub last_request: Option<std::time::SystemTime>,
    /// What the context pipeline remembers of `messages` (the next run's
    /// [`crate::History::memory`], so that its L1 decisions, microcompact arming and
    /// compaction breaker carry over).
    pub memory: context::ContextMemory,
    /// The last main request's parts (`None`: no request was sent), so a summary made
    /// between runs (`/compact`) can be sent as its fork and read the history from the
    /// prompt cache ([`context::compact_as_fork`]).
    pub fork: Option<context::Fork>,
}
