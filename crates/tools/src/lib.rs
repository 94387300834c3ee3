//! The built-in tools the model calls (Read, Write, Edit, Glob, Grep, Bash) with Claude
//! Code's names and input fields, confined to the workspace, and the permission gate that
//! applies Claude Code's modes and allow / ask / deny rules.
//!
//! - [`ToolSet`]: one session's tools, built from a [`ToolSetConfig`] (or [`builtin`] for a
//!   headless session). Its [`tools`](ToolSet::tools) go to the executor; they share the
//!   read-file state behind read-before-write (a concurrent map: path -> content hash and
//!   modification time) and the shell's working directory.
//! - [`PermissionGate`]: the set's [`executor::CanUseTool`]. It [`evaluates`](PermissionGate::evaluate)
//!   each call to a [`Verdict`] from the [`PermissionConfig`] (mode and rules, in the syntax
//!   of Claude Code's settings); an `Ask` goes to the [`Prompter`], or is denied with an
//!   explanation when the session is headless.
//!
//! **Two layers.** The gate decides what may run. Confinement is enforced again inside
//! each file tool, whatever the gate said and whatever the mode: a path must resolve (`..`
//! applied, symbolic links followed on every existing component) inside the working
//! directory or an additional directory, or inside a directory an explicit allow rule names;
//! the session's tool-results folder is always readable. bypassPermissions skips the
//! questions, never the confinement.
//!
//! **Shell commands** run in an OS sandbox ([`sandbox`]): the gate chooses the profile.
//! Commands no allow rule covers run read-only without a question; allowed ones (and every
//! command in acceptEdits or bypassPermissions) may write the workspace except its protected
//! paths; `dangerouslyDisableSandbox` is always asked. Rules read the text: a quote-aware
//! splitter finds every simple command of a line, inside `$( )`, backticks, subshells,
//! `bash -c` and `eval` too; a line is allowed only if every part is, denied if any part is;
//! while a Bash deny or ask rule exists, what the splitter cannot see (computed command
//! names, `sh` reading stdin, unparsable lines) is asked. The text only ever refuses or asks:
//! what a command can do is bounded by its profile, which the kernel enforces.
//!
//! ```
//! use std::sync::Arc;
//! use executor::{ToolContext, Workspace};
//! use protocol::ToolResultContent;
//! use serde_json::json;
//! use tools::{PermissionConfig, PermissionMode, Verdict};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("tools-doctest-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let workspace = Arc::new(Workspace { cwd: dir.clone(), additional_dirs: Vec::new() });
//! let permissions = PermissionConfig {
//!     default_mode: PermissionMode::AcceptEdits,
//!     allow: vec!["Bash(git status:*)".into()],
//!     deny: vec!["Bash(rm:*)".into()],
//!     ..PermissionConfig::default()
//! };
//! let set = tools::builtin(Arc::clone(&workspace), permissions)?;
//!
//! // Every part of a command line counts.
//! let bash = set.tool("Bash").ok_or("no Bash tool")?;
//! let verdict = set.gate().evaluate(bash.as_ref(), &json!({"command": "git status && rm -rf x"}));
//! assert!(matches!(verdict, Verdict::Deny { .. }));
//!
//! // Write, then Read: lines numbered from 1 as `N<TAB>line`.
//! let context = || ToolContext::detached("toolu_1".into(), Arc::clone(&workspace));
//! let write = set.tool("Write").ok_or("no Write tool")?;
//! write.call(json!({"file_path": "notes.txt", "content": "one\ntwo\n"}), context()).await?;
//! let read = set.tool("Read").ok_or("no Read tool")?;
//! let output = read.call(json!({"file_path": "notes.txt"}), context()).await?;
//! assert_eq!(output.content, ToolResultContent::Text("1\tone\n2\ttwo".into()));
//!
//! // Outside the workspace, in any mode.
//! let escaped = write.call(json!({"file_path": "../escaped.txt", "content": ""}), context()).await;
//! assert!(escaped.is_err());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod ask;
pub mod background;
mod bash;
mod common;
mod edit;
mod error;
mod files;
mod glob;
mod grep;
mod journal;
pub mod media;
pub mod notebook;
mod paths;
pub mod pdf;
mod permissions;
pub mod plan;
pub mod prompt;
mod read;
mod sandboxing;
mod session;
pub mod skills;
mod socket;
#[cfg(test)]
mod testutil;
mod text;
pub mod todo;
mod walk;
pub mod watch;
pub mod web;
mod write;

pub use bash::{kill_running_commands, release_sandbox};
pub use edit::preview as preview_edit;
pub use error::Error;
pub use files::{
    EditorFiles, open_parent, open_regular_at, remove_file_at, replace_file, replace_file_at,
};
pub use journal::WriteJournal;
pub use paths::real_path;
pub use permissions::{
    Always, BashRun, DISABLE_SANDBOX_FIELD, HookDecision, ModeHandle, PermissionConfig,
    PermissionGate, PermissionMode, PermissionRequest, PreAsk, PreAskFuture, Prompter,
    ProposedChange, RuleSense, Verdict,
};
pub use sandbox;
pub use session::{SandboxConfig, ToolSet, ToolSetConfig, TurnGrant, builtin};
pub use watch::{ChangeKind, FileChange, FileWatch};
