//! Claude Code's `agent` hooks: a condition a small agent checks with tools. The hook's
//! `prompt` (with `$ARGUMENTS` replaced by the event's JSON, as for `prompt` hooks) goes to
//! an agent (the hook's `model`, else the session's small fast model) that may read the
//! workspace and the session's transcript (Read, Glob, Grep, and Bash in the read-only
//! sandbox; it asks no one, and runs no hook) for at most [`MAX_TURNS`] responses, and must
//! answer through the `StructuredOutput` tool with `{"ok": true}` or `{"ok": false,
//! "reason": ...}`. `ok: false` blocks as a command hook's exit 2 does, with "Agent hook
//! condition was not met: REASON" (Claude Code 2.1.197's words). The default timeout is
//! 60 s (2.1.197's).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

use super::Event;
use super::reply::Reply;
use crate::settings::HookCommand;

/// An agent hook's default timeout (2.1.197: 60 000 ms).
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The most responses an agent hook's agent may take (2.1.197: 50).
pub const MAX_TURNS: u32 = 50;

/// The future a [`HookAgent`] returns: the agent's structured output (`None` when it gave
/// none), or why it could not run.
pub type HookAgentFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Value>, String>> + Send + 'a>>;

/// The agent `agent` hooks run.
pub trait HookAgent: Send + Sync {
    /// Runs an agent under `system` on `prompt` with `model` (`None`: the session's small
    /// fast model) until it calls `StructuredOutput` with an `{ok, reason}` object, ends,
    /// or reaches [`MAX_TURNS`]; returns what it gave.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future stops the agent.
    fn check<'a>(
        &'a self,
        model: Option<&'a str>,
        system: String,
        prompt: String,
    ) -> HookAgentFuture<'a>;
}

/// The instructions of an agent hook's agent for `event`, naming the transcript it may read.
pub fn system(event: Event, transcript: &std::path::Path) -> String {
    let task = match event {
        Event::Stop | Event::SubagentStop => format!(
            "You are verifying a stop condition of a coding agent ({} hook): check that the agent completed what the user message asks.",
            event.name()
        ),
        _ => format!(
            "You are evaluating a {} hook of a coding agent: check the condition the user message describes.",
            event.name()
        ),
    };
    format!(
        "{task} The conversation's transcript (JSON lines) is at {}. Use the tools to look at the workspace and the transcript as far as you need; you cannot change anything. Then call the StructuredOutput tool once: {{\"ok\": true}} when the condition holds, or {{\"ok\": false, \"reason\": \"...\"}} saying plainly what is missing or wrong (the agent is told it). Always include a reason.",
        transcript.display()
    )
}

/// The `StructuredOutput` schema of an agent hook's answer.
pub fn schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["ok"],
        "additionalProperties": false
    })
}

/// Runs `agent` on `hook` for the event `input`, for at most `timeout`.
///
/// # Errors
///
/// No agent here, the agent failing, timing out or ending without an answer: a line for the
/// user after the hook's name.
pub async fn run(
    agent: Option<&dyn HookAgent>,
    event: Event,
    transcript: &std::path::Path,
    hook: &HookCommand,
    timeout: Duration,
    input: &Value,
) -> Result<Reply, String> {
    let agent = agent.ok_or_else(|| "cannot run: no agent here".to_owned())?;
    let checked = agent.check(
        hook.model.as_deref(),
        system(event, transcript),
        super::prompt::prompt_text(hook, input),
    );
    let answer = tokio::time::timeout(timeout, checked)
        .await
        .map_err(|_| format!("timed out after {} s", timeout.as_secs_f64()))??
        .ok_or_else(|| {
            "(an agent hook) ended without its answer: it must call StructuredOutput with {\"ok\": ...}".to_owned()
        })?;
    if answer["ok"] == true {
        return Ok(Reply::default());
    }
    let reason = answer["reason"]
        .as_str()
        .filter(|reason| !reason.trim().is_empty())
        .unwrap_or("no reason given");
    Ok(Reply {
        block: Some(format!("Agent hook condition was not met: {reason}")),
        ..Reply::default()
    })
}
