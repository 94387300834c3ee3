//! Messages in the Claude Agent SDK's stream-json shapes (`sdk.d.ts` of
//! `@anthropic-ai/claude-agent-sdk`) that a front end writes for what happens outside a
//! turn's events: background tasks starting and ending (`SDKTaskStartedMessage`,
//! `SDKTaskNotificationMessage`).

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
