//! The agent loop as an explicit state machine.
//!
//! No network and no filesystem of its own: the model ([`ModelClient`]), the tools
//! (`executor::Tool`), permissions, the summarizer, the result store, the file source and the
//! stop hook come in as one [`Deps`] value, so every path is tested with a scripted model.
//!
//! ```text
//!                 ┌──────────────────────────────────────────────────────────────┐
//!                 ▼                                                              │
//!   ┌─ 1 preprocess: L1 budget → L2 microcompact → levels → L3 ──(blocked)──▶ BlockingLimit
//!   │             │                                        (Compacted)
//!   │             ▼
//!   │  2 call model: stream; each tool_use goes to the executor once it is known complete
//!   │             │ error ─┬─ prompt too long (once) ─▶ ReactiveCompact ─────────────┤
//!   │             │        ├─ overloaded + fallback model ─▶ FallbackModel ──────────┤
//!   │             │        └─ otherwise ─▶ ModelError / PromptTooLong / ImageError
//!   │             │ user abort ─▶ AbortedStreaming / AbortedTools
//!   │             ▼
//!   │  3 stop_reason max_tokens ─┬─ nothing ran, not escalated ─▶ MaxTokensEscalation ─┤
//!   │             │              ├─ recoveries < 3 ─▶ MaxTokensRecovery ───────────────┤
//!   │             │              └─ otherwise ─▶ ModelError(max tokens)
//!   │    no tool_use ─▶ stop hook ─┬─ block (< cap) ─▶ StopHookBlocking ───────────────┤
//!   │             │                ├─ block at cap ─▶ StopHookCapReached
//!   │             │                ├─ prevent ─▶ StopHookPrevented
//!   │             │                └─ allow ─▶ Completed
//!   │             ▼
//!   │  4 tools: results in model order ─(5th identical call)─▶ RepeatedToolCall
//!   │  5 turn + 1 > max_turns ─▶ MaxTurns
//!   └─ 6 next state (NextTurn) ─────────────────────────────────────────────────────┘
//! ```
//!
//! One `State` value (messages, turn count, max_tokens recovery count, reactive-compact flag,
//! stop-hook state, output-cap override, model, repeated-call counts, the transition that led
//! here) is replaced wholesale at each `continue`; there is no recursion.
#![deny(missing_docs)]

pub mod background;
mod call;
mod engine;
mod events;
mod hooks;
mod model;
mod request;
mod state;
pub mod subagent;

pub use engine::{
    AttachmentFuture, AttachmentSource, Deps, LoopConfig, RESUME_PROMPT, SpendGuard, ToolSource,
    run_loop, spawn_loop,
};
pub use events::{
    CompactTrigger, HistoryEvent, LoopEvent, LoopOutcome, Terminal, Transition, rewrite_results,
};
pub use hooks::{NoStopHook, StopDecision, StopFuture, StopHook, StopHookInput};
pub use model::{ApiFailure, ModelClient, ModelError, ModelEvent, ModelStream};
pub use request::ModelRequest;
