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
//!
//! # A tour
//!
//! [`run_loop`] (or [`spawn_loop`], on its own task with an event channel) takes a
//! [`LoopConfig`] (model, system prompt, caps, water levels, limits), the [`Deps`] and a
//! [`History`] ending with the user's new message; it sends [`LoopEvent`]s as it goes
//! (stream events, completed blocks, tool progress, context events, history changes) and
//! returns a [`LoopOutcome`]: the [`Terminal`] reason, the history left behind, usage, and
//! the context pipeline's memory for the next run. A model is anything that implements
//! [`ModelClient`]; here, one that answers at once:
//!
//! ```
//! use std::sync::Arc;
//!
//! use loop_core::{Deps, LoopConfig, ModelClient, ModelEvent, ModelRequest, ModelStream};
//! use loop_core::{NoStopHook, Terminal, run_loop};
//! use protocol::{BlockStatus, Message, MessageParam};
//! use tokio_util::sync::CancellationToken;
//!
//! /// Answers every request with the same text.
//! struct Hello;
//!
//! impl ModelClient for Hello {
//!     fn stream(&self, request: &ModelRequest<'_>, _cancel: CancellationToken) -> ModelStream {
//!         let message: Message = serde_json::from_value(serde_json::json!({
//!             "id": "msg_1", "type": "message", "role": "assistant", "model": request.model,
//!             "content": [{"type": "text", "text": "Hello."}],
//!             "stop_reason": "end_turn", "usage": {"input_tokens": 12, "output_tokens": 3},
//!         }))
//!         .expect("a message");
//!         let done = ModelEvent::Done { message, block_status: vec![BlockStatus::Complete] };
//!         Box::pin(futures_util::stream::iter([Ok(done)]))
//!     }
//! }
//!
//! /// No compaction happens in a run this short; no result is large enough to store.
//! struct Nothing;
//!
//! impl context::Summarizer for Nothing {
//!     fn summarize(&self, _request: context::SummaryRequest) -> context::SummaryFuture<'_> {
//!         Box::pin(async { Ok(String::new()) })
//!     }
//! }
//!
//! impl context::ResultStore for Nothing {
//!     fn persist(&mut self, _id: &protocol::ToolUseId, _text: &str) -> Result<String, String> {
//!         Err("nowhere to store it".to_owned())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let deps = Deps {
//!     model: Arc::new(Hello),
//!     tools: Vec::new(),
//!     permissions: Arc::new(executor::AllowAll),
//!     summarizer: Arc::new(Nothing),
//!     result_store: Box::new(Nothing),
//!     files: Arc::new(context::NoFiles),
//!     stop_hook: Arc::new(NoStopHook),
//!     workspace: Arc::default(),
//!     tool_source: None,
//!     fork_point: None,
//!     attachments: None,
//!     spend: None,
//! };
//! let (events, _receiver) = tokio::sync::mpsc::unbounded_channel();
//! let history = vec![MessageParam::user_text("Say hello.".to_owned())];
//! let config = LoopConfig::for_model("claude-sonnet-4-5");
//! let outcome = run_loop(config, deps, history, events, CancellationToken::new()).await;
//! assert!(matches!(outcome.terminal, Terminal::Completed));
//! assert_eq!(outcome.result, "Hello.");
//! assert_eq!(outcome.messages.len(), 2);
//! # }
//! ```
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
    AttachmentFuture, AttachmentSource, Batch, Deps, History, INTERRUPTED_FOR_TOOL_USE_MARKER,
    INTERRUPTED_MARKER, LoopConfig, RESUME_PROMPT, SpendGuard, ToolSource, run_loop, spawn_loop,
};
pub use events::{
    CompactTrigger, HistoryEvent, LoopEvent, LoopOutcome, Terminal, Transition, rewrite_results,
};
pub use hooks::{NoStopHook, StopDecision, StopFuture, StopHook, StopHookInput};
pub use model::{ApiFailure, ModelClient, ModelError, ModelEvent, ModelStream};
pub use request::{BlockAt, MAX_MESSAGE_BREAKPOINTS, ModelRequest, moving_breakpoint};
