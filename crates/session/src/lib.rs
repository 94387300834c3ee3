//! A coding agent's session as a library: everything above the loop that one conversation
//! with a model is, driven by any front end (a terminal, a headless run, a programmatic
//! host).
//!
//! (The tour is written below once the surface settles.)

#![deny(missing_docs)]

mod adapter;
mod budget;
pub mod checkpoints;
pub mod commands;
mod context_info;
#[cfg(test)]
mod history_properties;
mod hooks;
pub mod mcp_config;
mod observer;
pub mod options;
mod prefetch;
mod session;
pub mod sessions;
pub mod settings;
mod skills;
pub mod structured;
mod subagents;
mod tooling;
pub mod transcript;
pub mod trust;

pub use observer::{CatchUp, Observer};
pub use subagents::SubagentEvent;

/// A mistake in how the session was asked for that no parser of flags can see (a
/// `--session-id` that is not a UUID, a prompt that is empty): a command-line front end
/// exits with code 2 and no result object, as for a bad flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
pub use options::Options;
pub use session::*;
