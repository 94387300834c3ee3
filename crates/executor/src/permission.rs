//! The permission gate: asked before every call, injected by the caller.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::tool::{Tool, ToolCall, ToolError};

/// The answer of a [`CanUseTool`] gate.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PermissionDecision {
    /// Run the call, with its input replaced when `updated_input` is set (a hook may rewrite
    /// it).
    Allow {
        /// The input to use instead of the model's.
        updated_input: Option<Value>,
    },
    /// Do not run it; the model gets an error tool_result with the reason.
    Deny {
        /// Why, for the model and for the permission denial event.
        reason: String,
    },
    /// Do not run it, and it was not refused: the call cannot do its job, found before
    /// anyone was asked ([`crate::Tool::validate`]). The model gets `error` as the call's
    /// result, exactly as if the tool had run and failed; no permission denial is counted.
    Fail {
        /// The tool's error.
        error: ToolError,
    },
}

impl PermissionDecision {
    /// Allow with the model's input.
    pub fn allow() -> Self {
        Self::Allow {
            updated_input: None,
        }
    }

    /// Deny with a reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Deny {
            reason: reason.into(),
        }
    }
}

/// The future a [`CanUseTool`] check returns.
pub type PermissionFuture<'a> = Pin<Box<dyn Future<Output = PermissionDecision> + Send + 'a>>;

/// Decides whether a call may run: permission rules, modes, PreToolUse hooks, or asking the
/// user. Called once per call, inside the call's task, after admission; a slow gate delays
/// only its own call.
pub trait CanUseTool: Send + Sync + 'static {
    /// Decides on `call` to `tool`.
    ///
    /// # Cancellation safety
    ///
    /// The executor drops the future when the call is cancelled (user abort, sibling abort);
    /// implementations must not leave shared state half-updated across an await.
    fn check<'a>(&'a self, call: &'a ToolCall, tool: &'a dyn Tool) -> PermissionFuture<'a>;
}

/// A gate that allows everything (`--permission-mode bypassPermissions`, tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowAll;

impl CanUseTool for AllowAll {
    fn check<'a>(&'a self, _call: &'a ToolCall, _tool: &'a dyn Tool) -> PermissionFuture<'a> {
        Box::pin(std::future::ready(PermissionDecision::allow()))
    }
}

impl<F> CanUseTool for F
where
    F: Fn(&ToolCall, &dyn Tool) -> PermissionDecision + Send + Sync + 'static,
{
    fn check<'a>(&'a self, call: &'a ToolCall, tool: &'a dyn Tool) -> PermissionFuture<'a> {
        Box::pin(std::future::ready(self(call, tool)))
    }
}
