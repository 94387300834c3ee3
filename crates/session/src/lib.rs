//! A coding agent's session as a library: everything above the agent loop that one
//! conversation with a model is, for any front end to drive: the `agent` terminal UI and its
//! headless mode use it, and so can an IDE server, a batch runner or a test.
//!
//! # A tour
//!
//! **Open.** [`Session::open`] resolves everything once from [`Options`] (the caller's
//! choices, in Claude Code's vocabulary) and the settings files: the settings layers and
//! folder trust ([`settings`], [`trust`]), the `.claude/` and `.agent/` folders (custom
//! [`commands`], skills, agents), the model and its provider, the tools and their one
//! permission gate, hooks, MCP servers ([`mcp_config`]), and the history to start from (a
//! new session, or one resumed from its transcript). Nothing is written until the first turn.
//!
//! **Drive.** [`Session::send`] sends a user message (a `/command` in it runs the custom
//! command or skill it names) and runs the loop until the turn ends, returning its
//! [`LoopOutcome`]. Every event of the turn goes to the front end's [`Observer`] as it
//! happens; a [`CancellationToken`] interrupts it. Between turns a front end may change the
//! mode ([`cycle_mode`]) or the model ([`Session::set_model`]), compact
//! ([`Session::compact`]), rewind ([`Session::rewind`], [`checkpoints`]), clear
//! ([`Session::clear`]), fork into a new session file ([`Session::fork`]) or switch to
//! another transcript ([`Session::switch_to`]); dropping the session closes it (its MCP
//! servers and their process groups end with it).
//!
//! **Ask.** What needs a person goes through traits the front end implements: a
//! [`Prompter`] answers permission questions (without one, calls that need approval are
//! refused with a message, as headless runs do), a [`trust::TrustAsker`] decides whether to
//! trust a folder. What only informs (a setting ignored, a hook that failed, an MCP server
//! that did not start) goes to the [`Notices`] sink of [`Options`]: stderr unless the front
//! end gives its own. The terminal, headless mode and programmatic hosts are peers.
//!
//! **Keep.** Each turn's history changes are appended to the session's transcript
//! ([`transcript`], Claude Code's JSON lines) as they complete; Write and Edit record their
//! changes for rewinding ([`checkpoints`]); [`cost`] adds up requests, tokens and dollars.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use session::{
//!     CancellationToken, LoopEvent, MessageParam, Observer, Options, PermissionDecision,
//!     PermissionFuture, PermissionRequest, Prompter, Session, SubagentEvent,
//! };
//!
//! /// Allows every call.
//! struct Yes;
//!
//! impl Prompter for Yes {
//!     fn ask<'a>(&'a self, _request: PermissionRequest<'a>) -> PermissionFuture<'a> {
//!         Box::pin(async { PermissionDecision::Allow { updated_input: None } })
//!     }
//! }
//!
//! /// Prints each finished response's text.
//! struct Print;
//!
//! impl Observer for Print {
//!     fn event(&mut self, event: &LoopEvent) {
//!         if let LoopEvent::Assistant(message) = event {
//!             message.content.iter().filter_map(|b| b.as_text()).for_each(|t| println!("{t}"));
//!         }
//!     }
//!     fn subagent(&mut self, _event: &SubagentEvent) {}
//! }
//!
//! # async fn run() -> anyhow::Result<()> {
//! let mut options = Options::default();
//! options.model.model = Some("sonnet".to_owned());
//! let mut session = Session::open(&options, Some(Arc::new(Yes)), None)?;
//! session.gather_context().await;
//! let outcome = session
//!     .send(MessageParam::user_text("Fix the failing test".to_owned()), &mut Print, CancellationToken::new())
//!     .await?;
//! println!("{:?} after {} requests", outcome.terminal, outcome.requests);
//! # Ok(()) }
//! ```
//!
//! `examples/drive.rs` runs the same against a scripted model server (`testkit`), with an
//! approver that counts its questions; CI runs it.

#![deny(missing_docs)]

pub mod acp;
mod adapter;
pub mod approvals;
pub mod batch;
mod budget;
pub mod checkpoints;
pub mod claude_code;
pub mod commands;
mod context_info;
pub mod control;
pub mod cost;
pub mod effort;
#[cfg(test)]
mod history_properties;
mod hook_agent;
pub mod hooks;
pub mod key_helper;
pub mod mcp_config;
mod notices;
mod observer;
pub mod options;
pub mod output_styles;
mod prefetch;
pub mod rows;
pub mod sdk;
mod session;
pub mod sessions;
pub mod settings;
mod skills;
pub mod slash;
pub mod snapshots;
mod status_line;
pub mod stream_json;
pub mod structured;
mod subagents;
mod tooling;
pub mod transcript;
pub mod trust;
pub mod web;
pub mod worktree;

pub use context_info::{PROMPT_TOKEN_BUDGET, PROMPT_VERSION, SYSTEM_PROMPT};
pub use notices::Notices;
pub use observer::{CatchUp, Observer, catch_up};
pub use options::Options;
pub use session::*;
pub use status_line::{
    FOLLOW_EVERY, STATUS_LINE_ROWS, STATUS_LINE_TIMEOUT, StatusFollower, StatusLine,
};
pub use subagents::SubagentEvent;

// What a front end needs to drive a session without naming the crates below it.
pub use executor::{ExecutorEvent, PermissionDecision, PermissionFuture};
pub use loop_core::{LoopEvent, LoopOutcome, Terminal};
pub use protocol::MessageParam;
pub use tokio_util::sync::CancellationToken;
pub use tools::{PermissionMode, PermissionRequest, Prompter};

/// A mistake in how the session was asked for that no parser of flags can see (a
/// `--session-id` that is not a UUID, a prompt that is empty): a command-line front end
/// exits with code 2 and no result object, as for a bad flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
