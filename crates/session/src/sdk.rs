//! Messages in the Claude Agent SDK's stream-json shapes (`sdk.d.ts` of
//! `@anthropic-ai/claude-agent-sdk`) that a front end writes besides a turn's events: a run's
//! `result` (`SDKResultMessage`), and background tasks starting and ending
//! (`SDKTaskStartedMessage`, `SDKTaskNotificationMessage`).

use std::time::Duration;

use loop_core::{LoopOutcome, Terminal};
use serde_json::{Value, json};
use tools::background::{TaskEvent, TaskStatus};

/// The `system` message for `event` of session `session_id`: `task_started` (`task_id`,
/// `tool_use_id`, `description`, `task_type` `local_bash`, `local_agent` or `monitor`) or `task_notification` (`task_id`, `tool_use_id`, `status`
/// `completed`, `failed` or `stopped`, `output_file`, `summary`), each with a fresh `uuid`.
/// `None` for a monitor's event (the model hears of it; no message says so).
pub fn task_message(event: &TaskEvent, session_id: &str) -> Option<Value> {
    let mut message = match event {
        TaskEvent::Event(_) => return None,
        TaskEvent::Started(task) => {
            json!({
                "type": "system",
                "subtype": "task_started",
                "task_id": task.id(),
                "tool_use_id": task.tool_use_id(),
                "description": task.label(),
                "task_type": task.kind(),
            })
        }
        TaskEvent::Ended(task, _) => {
            let status = task.status();
            json!({
                "type": "system",
                "subtype": "task_notification",
                "task_id": task.id(),
                "tool_use_id": task.tool_use_id(),
                "status": match status {
                    TaskStatus::Stopped => "stopped",
                    TaskStatus::Exited(exit) if exit.success() => "completed",
                    _ => "failed",
                },
                "output_file": task.file(),
                "summary": task.summary(&status),
            })
        }
    };
    message["uuid"] = json!(uuid::Uuid::new_v4().to_string());
    message["session_id"] = json!(session_id);
    Some(message)
}

/// The `system`/`init` message of `session` (`SDKSystemMessage`): its working folder,
/// session id, tools, MCP servers and their state, model, permission mode, key source,
/// slash commands, skills, subagents, output style and a fresh `uuid`; besides Claude
/// Code's fields, `sandbox` says how Bash commands run (`backend`: `bwrap`, `landlock`,
/// `none` when nothing works here, `off` when turned off; `network`: whether commands that
/// may write the workspace reach the network, the setting `sandbox.network` in a sandbox,
/// `true` without one; read-only commands never do), and `unsupported` lists what the
/// driving program asked for that is not acted on, when anything is.
pub fn init_message(session: &crate::Session, unsupported: &[String]) -> Value {
    let mcp_servers: Vec<Value> = session
        .mcp_status()
        .into_iter()
        .map(|(name, status)| json!({"name": name, "status": status}))
        .collect();
    let sandbox = session.sandbox();
    let agents: Vec<&str> = session
        .agents()
        .iter()
        .map(|agent| agent.name.as_str())
        .collect();
    let mut line = json!({
        "type": "system", "subtype": "init", "cwd": session.cwd(),
        "session_id": session.session_id(), "tools": session.tool_names(),
        "mcp_servers": mcp_servers, "model": session.model(),
        "permissionMode": session.mode_name(), "apiKeySource": session.api_key_source(),
        "slash_commands": session.slash_command_names(), "skills": session.skill_names(),
        "agents": agents, "output_style": "default",
        "sandbox": {
            "backend": sandbox.describe(),
            "network": sandbox.network || !sandbox.is_active(),
        },
        "uuid": uuid::Uuid::new_v4().to_string(),
    });
    if !unsupported.is_empty() {
        line["unsupported"] = json!(unsupported);
    }
    line
}

/// The exit code and result subtype of a terminal reason.
pub fn exit_code(terminal: &Terminal) -> (u8, &'static str) {
    match terminal {
        Terminal::Completed
        | Terminal::StopHookPrevented(_)
        | Terminal::TokenBudgetReached
        | Terminal::DiminishingReturns => (0, "success"),
        Terminal::MaxTurns => (3, "error_max_turns"),
        Terminal::MaxBudget(_) => (3, "error_max_budget_usd"),
        Terminal::BlockingLimit(_)
        | Terminal::PromptTooLong
        | Terminal::RepeatedToolCall
        | Terminal::StopHookCapReached => (3, "error_during_execution"),
        Terminal::AbortedStreaming | Terminal::AbortedTools => (130, "error_during_execution"),
        Terminal::ModelError(_) | Terminal::ImageError(_) => (1, "error_during_execution"),
    }
}

/// What a run's `result` message says besides the loop's outcome.
#[derive(Debug)]
pub struct RunReport<'a> {
    /// The session's id.
    pub session_id: &'a str,
    /// The run's wall time (`duration_ms`).
    pub duration: Duration,
    /// Time spent waiting for the model (`duration_api_ms`).
    pub api_duration: Duration,
    /// The API's stop_reason of the main agent's last response.
    pub stop_reason: Option<&'a str>,
    /// What the run cost, by model (`total_cost_usd`, `modelUsage`).
    pub ledger: &'a crate::cost::Ledger,
    /// Requests besides the main agent's (subagents'), added to `num_requests`.
    pub extra_requests: u32,
    /// The calls refused (`permission_denials`).
    pub denials: &'a [Value],
    /// `--json-schema`'s output, when it came (`structured_output`).
    pub structured: Option<Value>,
    /// `--json-schema`'s tries ran out (`error_max_structured_output_retries`).
    pub structured_failed: bool,
    /// Each request's time to first token (`ttft_ms`).
    pub first_tokens: &'a crate::cost::FirstTokens,
}

/// A run's `result` message, in Claude Code's shape: `subtype` ([`exit_code`]'s, or
/// `error_max_structured_output_retries`), `is_error`, `duration_ms`, `duration_api_ms`,
/// `num_turns`, `result`, `stop_reason` (the API's), `terminal_reason` (the loop's) and
/// `terminal_detail`, `session_id`, `total_cost_usd` (`null` when a model had no price),
/// `usage` (the main agent's), `modelUsage` (every model's), `num_requests`,
/// `permission_denials`, `ttft_ms` (ours: [`crate::cost::FirstTokens::summary_json`]),
/// `structured_output` when there is one, and `errors` (the terminal reason's text) for an
/// error.
pub fn result_message(outcome: &LoopOutcome, report: &RunReport<'_>) -> Value {
    let subtype = if report.structured_failed {
        "error_max_structured_output_retries"
    } else {
        exit_code(&outcome.terminal).1
    };
    let usage = &outcome.usage;
    let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let mut result = json!({
        "type": "result",
        "subtype": subtype,
        "is_error": subtype != "success",
        "duration_ms": millis(report.duration),
        "duration_api_ms": millis(report.api_duration),
        "num_turns": outcome.turns,
        "result": outcome.result,
        // The API's, as Claude Code reports it; the loop's own reason is below.
        "stop_reason": report.stop_reason,
        // Claude Code's name when --json-schema's tries ran out.
        "terminal_reason": if report.structured_failed {
            "structured_output_retry_exhausted"
        } else {
            outcome.terminal.as_str()
        },
        "terminal_detail": outcome.terminal.to_string(),
        "session_id": report.session_id,
        "total_cost_usd": report.ledger.cost(),
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens.unwrap_or(0),
            "cache_read_input_tokens": usage.cache_read_input_tokens.unwrap_or(0),
        },
        "modelUsage": report.ledger.model_usage_json(),
        "num_requests": outcome.requests + report.extra_requests,
        "permission_denials": report.denials,
        // Not in Claude Code's shape: the time to first token over the main agent's
        // requests (the seeds measure it at message_start).
        "ttft_ms": report.first_tokens.summary_json(),
        "uuid": uuid::Uuid::new_v4().to_string(),
    });
    if let Some(value) = &report.structured {
        result["structured_output"] = value.clone();
    }
    // An error result names what went wrong in `errors`, as `SDKResultError` does (the
    // Agent SDK joins them into the error it raises).
    if subtype != "success" {
        result["errors"] = json!([error_text(outcome)]);
    }
    result
}

/// What an error result's `errors` says: a sentence for the reasons a program meets most
/// (Claude Code's words for max turns), the terminal reason with its detail otherwise.
fn error_text(outcome: &LoopOutcome) -> String {
    match &outcome.terminal {
        Terminal::MaxTurns => format!("Reached maximum number of turns ({})", outcome.turns),
        Terminal::AbortedStreaming | Terminal::AbortedTools => {
            "Interrupted: the turn was stopped before it ended".to_owned()
        }
        other => other.to_string(),
    }
}

/// The result object of a run that failed before its loop started (bad settings, no API
/// key, a transcript that does not load): `terminal_reason` `startup_error`, no session.
pub fn failure_result(message: &str) -> Value {
    json!({
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": true,
        "duration_ms": 0,
        "duration_api_ms": 0,
        "num_turns": 0,
        "result": message,
        "stop_reason": null,
        "terminal_reason": "startup_error",
        "terminal_detail": message,
        "session_id": null,
        "total_cost_usd": 0.0,
        "usage": {
            "input_tokens": 0, "output_tokens": 0,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
        },
        "num_requests": 0,
        "permission_denials": [],
        "errors": [message],
        "uuid": uuid::Uuid::new_v4().to_string(),
    })
}
