//! `ExitPlanMode`: the model, in plan mode, presents its plan; the user approves it (and
//! the session leaves plan mode) or refuses it with feedback.
//!
//! The question is the permission gate's: in plan mode the gate always asks about this tool
//! (see [`crate::PermissionGate::exit_plan_mode_tool`]), and the prompter writes the mode the
//! user chose into the input's `mode` field before the call runs. The tool only switches the
//! mode; it never decides one itself.

use std::sync::Arc;

use executor::{Tool, ToolContext, ToolFuture, ToolOutput};
use serde_json::{Value, json};

use crate::PermissionMode;
use crate::session::Shared;

/// The tool's name, as Claude Code spells it.
pub const EXIT_PLAN_MODE: &str = "ExitPlanMode";

/// The name of the tool with which the model asks to plan first, as Claude Code spells it.
pub const ENTER_PLAN_MODE: &str = "EnterPlanMode";

/// The result an approved plan gets, as Claude Code words it.
pub const APPROVED: &str = "User has approved your plan. You can now start coding. Start with updating your todo list if applicable";

/// See the module docs.
pub(crate) struct ExitPlanModeTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl ExitPlanModeTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "plan": {
                    "type": "string",
                    "description": "The plan you came up with, that you want the user to approve. Supports markdown. The plan should be pretty concise."
                }
            },
            "required": ["plan"]
        });
        Self { shared, schema }
    }
}

impl Tool for ExitPlanModeTool {
    fn name(&self) -> &str {
        EXIT_PLAN_MODE
    }

    fn description(&self) -> &str {
        "Use this tool when you are in plan mode and have finished planning the implementation \
         steps of a task that requires writing code, and are ready to carry it out. It shows \
         the plan to the user, who approves it (then the session leaves plan mode and you can \
         change files) or refuses it with feedback. Do not use it for tasks that only gather \
         information, search or explain the code."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            if self.shared.mode.get() != PermissionMode::Plan {
                return Ok(ToolOutput::text(
                    "You are not in plan mode; there is nothing to exit. Go on with the task.",
                ));
            }
            let mode = match input.get("mode").and_then(Value::as_str) {
                Some("acceptEdits") => PermissionMode::AcceptEdits,
                _ => PermissionMode::Default,
            };
            self.shared.mode.set(mode);
            Ok(ToolOutput::text(format!(
                "{APPROVED} (the session is now in {mode} mode)."
            )))
        })
    }
}

/// `EnterPlanMode {}`: the model asks to plan before it changes anything. The gate asks the
/// user (the switch is theirs); approved, the session is in plan mode when the call runs.
/// Headless it is refused.
pub(crate) struct EnterPlanModeTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl EnterPlanModeTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {},
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

impl Tool for EnterPlanModeTool {
    fn name(&self) -> &str {
        ENTER_PLAN_MODE
    }

    fn description(&self) -> &str {
        "Asks the user to switch to plan mode before you start a task that is large, risky or \
         unclear: in plan mode you only read and search, then present a plan with ExitPlanMode \
         for approval before changing anything. Use it when several approaches are possible or \
         the change touches many files; not for small, clear tasks."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, _input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            self.shared.mode.set(PermissionMode::Plan);
            let message = "The session is now in plan mode: read and search to understand the task, change nothing, then present your plan with ExitPlanMode for the user to approve.";
            Ok(ToolOutput::text(message).with_structured(json!({ "message": message })))
        })
    }
}
