//! Streaming tool execution: tools start the moment their tool_use block completes, while the
//! model is still streaming; reads run together, writes run alone; results come back in the
//! model's order; a failure can cancel its siblings.
//!
//! - [`Tool`]: what a tool is. It declares, per input, whether it is concurrency-safe.
//! - [`CanUseTool`]: the permission gate, injected by the caller (rules, modes, hooks).
//! - [`StreamingToolExecutor`]: takes [`ToolCall`]s with
//!   [`add_tool`](StreamingToolExecutor::add_tool) and hands out [`ExecutorEvent`]s with
//!   [`next_event`](StreamingToolExecutor::next_event).
//!
//! **Admission rule.** A call may start iff nothing is executing, or it is concurrency-safe and
//! everything executing is too. The queue is scanned in add order and the scan stops at the
//! first unsafe call that cannot start. So `[Read, Read, Edit, Read]` runs the two reads
//! together, then the Edit alone, then the last Read: a Read never overtakes an earlier Edit.
//!
//! **Abort policy.** The calls of one turn share a child token of the turn's token. When a call
//! fails in a way the [`AbortPolicy`] names (by default only fatal failures: could not run,
//! timed out, killed; [`AbortPolicy::OnAnyError`] is Claude Code's behaviour), its running
//! siblings are cancelled, queued ones never start, and each gets an error result naming the
//! failed call and saying it is safe to retry. Results already finished are kept. Cancelling
//! the turn's token is a user abort: every unfinished call gets an "interrupted by user" result.
//!
//! **Invariant.** Every added call gets exactly one result ([`ExecutorEvent::Completed`]), in
//! add order, `is_error` set where it failed. The API rejects histories that break this.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use executor::{AbortPolicy, AllowAll, ExecutorConfig, ExecutorEvent, Outcome,
//!     StreamingToolExecutor, Tool, ToolCall, ToolContext, ToolError, ToolFuture, ToolOutput,
//!     Workspace};
//! use serde_json::{json, Value};
//! use tokio_util::sync::CancellationToken;
//!
//! /// Sleeps `ms`, then fails when `fail` is set.
//! struct Step(Value);
//! impl Tool for Step {
//!     fn name(&self) -> &str { "Step" }
//!     fn description(&self) -> &str { "Sleeps, then succeeds or fails" }
//!     fn input_schema(&self) -> &Value { &self.0 }
//!     fn is_concurrency_safe(&self, _: &Value) -> bool { true }
//!     fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
//!         Box::pin(async move {
//!             let ms = input["ms"].as_u64().unwrap_or(0);
//!             tokio::select! {
//!                 () = tokio::time::sleep(Duration::from_millis(ms)) => {}
//!                 () = context.cancel.cancelled() => return Err(ToolError::Killed("cancelled".into())),
//!             }
//!             if input["fail"] == true { Err(ToolError::CouldNotRun("disk on fire".into())) }
//!             else { Ok(ToolOutput::text(format!("slept {ms} ms"))) }
//!         })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let mut executor = StreamingToolExecutor::new(
//!     vec![Arc::new(Step(json!({"type": "object"}))) as Arc<dyn Tool>],
//!     Arc::new(AllowAll),
//!     ExecutorConfig { policy: AbortPolicy::OnFatalError, ..ExecutorConfig::default() },
//!     CancellationToken::new(),
//!     Arc::new(Workspace::default()),
//! );
//! executor.add_tool(ToolCall::new("toolu_a", "Step", json!({"ms": 50})));
//! executor.add_tool(ToolCall::new("toolu_b", "Step", json!({"ms": 5, "fail": true})));
//! executor.add_tool(ToolCall::new("toolu_c", "Step", json!({"ms": 1})));
//! let outcomes: Vec<Outcome> = executor.drain().await.into_iter().filter_map(|event| match event {
//!     ExecutorEvent::Completed(done) => Some(done.outcome),
//!     _ => None,
//! }).collect();
//! // C finished before B failed and keeps its result; A was cancelled by B's fatal failure.
//! assert!(matches!(&outcomes[0], Outcome::SiblingFailed { failed_tool, .. } if failed_tool == "Step"));
//! assert_eq!(outcomes[1], Outcome::CouldNotRun);
//! assert_eq!(outcomes[2], Outcome::Success);
//! # }
//! ```
#![deny(missing_docs)]

mod executor;
mod permission;
pub mod schema;
mod tool;

pub use executor::{
    AbortPolicy, CompletedTool, Discarded, ExecutorConfig, ExecutorEvent, Outcome, PREVIEW_CHARS,
    StreamingToolExecutor,
};
pub use permission::{AllowAll, CanUseTool, PermissionDecision, PermissionFuture};
pub use tool::{
    InputProblem, Tool, ToolCall, ToolContext, ToolError, ToolFuture, ToolOutput, ToolProgress,
    ValidateFuture, Workspace,
};
