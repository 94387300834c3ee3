//! Context-window management for an agent loop: how full the window is, and how to make room.
//!
//! Pure logic over [`protocol`] types; the model call for summaries ([`Summarizer`]), the file
//! writes of L1 ([`ResultStore`]) and file reads for re-attachment ([`FileSource`]) are
//! injected, so every behaviour is testable without I/O.
//!
//! - [`WaterLevels`]: thresholds from the model's window (see the diagram in [`levels`]).
//! - [`TokenEstimator`] and [`history_tokens`]: the provider's last reported usage plus an
//!   estimate of what was appended since.
//! - L1 [`apply_budget`]: oversized tool results move to files, losslessly.
//! - L2 [`microcompact`]: old tool results of compactable tools become placeholders.
//! - L3 [`compact`]: the model summarizes the older history.
//! - [`normalize`] and [`validate_pairing`]: the shape rules every request must follow.
//! - [`ContextManager`]: runs L1, L2, the level check and L3 before each request, with the
//!   circuit breaker.
//!
//! ```text
//! 0                      warning      autocompact   blocking  effective  window
//! ├──────── Normal ─────────┼── Warning ──┼── AutoCompact ─┼── Blocking ──┤ reserve ┤
//!                        147_000      167_000        177_000   180_000    200_000
//! ```
//!
//! (200,000-token window; Claude Code's constants: 20,000-token output reserve cap, 13,000-token
//! autocompact buffer, 3,000-token blocking buffer.)
//!
//! ```
//! use context::{Level, Tokens, WaterLevels, lookup};
//!
//! let (model, known) = lookup("claude-sonnet-4-5-20250929");
//! assert!(known);
//! let levels = WaterLevels::new(model.context_window, model.max_output);
//! assert_eq!(levels.autocompact_at, Tokens(167_000));
//! assert_eq!(levels.check(Tokens(170_000)).level, Level::AutoCompact);
//! ```
#![deny(missing_docs)]

mod autocompact;
mod budget;
pub mod economics;
pub mod levels;
mod manager;
mod microcompact;
mod models;
mod normalize;
pub mod open_models;
mod tokens;

pub use autocompact::{
    BOUNDARY_MARKER, CompactConfig, CompactError, Compacted, FORK_SUFFIX, FileSource, Fork,
    MAX_CONSECUTIVE_FAILURES, NoFiles, SUMMARY_PROMPT, SUMMARY_SYSTEM, Summarizer, SummarizerError,
    SummaryFuture, SummaryRequest, compact, compact_as_fork, content_bytes, fork_request,
    plan_boundary, summary_request,
};
pub use budget::{
    BudgetConfig, BudgetReport, ReplacementLog, ResultStore, ToolLimit, apply_budget,
    persisted_text,
};
pub use levels::{Level, LevelCheck, LevelOverrides, WaterLevels};
pub use manager::{
    BlockReason, ContextConfig, ContextEvent, ContextManager, ContextMemory, MainRequest,
    MicrocompactReason, Prepared, Services,
};
pub use microcompact::{
    COMPACTABLE_TOOLS, Clearable, MicrocompactConfig, MicrocompactReport, PLACEHOLDER_PREFIX,
    apply as apply_microcompact, first_rewrite, microcompact, placeholder,
    plan as plan_microcompact,
};
pub use models::{
    KNOWLEDGE_CUTOFFS, MODELS, ModelInfo, Prices, REASONING, Reasoning, ThinkingSupport,
    UNKNOWN_MODEL, WEB_SEARCH_USD, anthropic_id, knowledge_cutoff, lookup, reasoning,
};
pub use normalize::{
    HistoryItem, INTERRUPTED_RESULT, PairingError, Repair, normalize, normalize_messages,
    validate_pairing,
};
pub use tokens::{BytesEstimator, TokenEstimator, Tokens, history_tokens};
