//! Claude Code's TaskCreated and TaskCompleted hooks, around the task tools: a task the
//! model makes (TaskCreate) is told to the TaskCreated hooks once it exists, and taken back
//! when one blocks; a task the model marks completed (TaskUpdate with `status: completed`)
//! is told to the TaskCompleted hooks first, and stays as it was when one blocks. Either
//! way the block's reasons are the call's error, for the model to act on (as in Claude Code
//! 2.1.197).

use std::sync::Arc;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde_json::{Value, json};
use tools::todo::{TASK_CREATE, TASK_UPDATE, TodoList, TodoStatus};

use super::{Event, Hooks};

/// A task tool with the task hooks around it.
pub struct TaskHooks {
    hooks: Hooks,
    inner: Arc<dyn Tool>,
    list: TodoList,
}

impl std::fmt::Debug for TaskHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHooks")
            .field("tool", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl TaskHooks {
    /// `tool` with the task hooks around it when it is TaskCreate (and TaskCreated hooks are
    /// configured) or TaskUpdate (and TaskCompleted hooks are); else `tool` itself. `list`
    /// is the list `tool` works on (a subagent's own, for a subagent's tools).
    pub fn wrap(hooks: &Hooks, tool: Arc<dyn Tool>, list: &TodoList) -> Arc<dyn Tool> {
        let wanted = match tool.name() {
            TASK_CREATE => Event::TaskCreated,
            TASK_UPDATE => Event::TaskCompleted,
            _ => return tool,
        };
        if !hooks.has(wanted) {
            return tool;
        }
        Arc::new(Self {
            hooks: hooks.clone(),
            inner: tool,
            list: list.clone(),
        })
    }

    /// Runs `event`'s hooks about `task`: the reasons of a block or `continue: false`.
    async fn refusals(&self, event: Event, task: &tools::todo::Task) -> Vec<String> {
        self.hooks
            .run(
                event,
                &[],
                json!({
                    "task_id": task.id,
                    "task_subject": task.subject,
                    "task_description": task.description,
                }),
            )
            .await
            .refusals()
    }

    async fn create(&self, input: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let output = self.inner.call(input, context).await?;
        let made = output
            .structured
            .as_ref()
            .and_then(|structured| structured["task"]["id"].as_str())
            .and_then(|id| self.list.get(id));
        let Some(task) = made.filter(|_| !output.is_error) else {
            return Ok(output);
        };
        let refusals = self.refusals(Event::TaskCreated, &task).await;
        if refusals.is_empty() {
            return Ok(output);
        }
        self.list.retract(&task.id);
        Ok(ToolOutput::error(format!(
            "TaskCreated hook blocked task #{}, so it was not created: {}",
            task.id,
            refusals.join("\n")
        )))
    }

    async fn update(&self, input: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let completing = input.get("status").and_then(Value::as_str) == Some("completed");
        let task = input
            .get("taskId")
            .and_then(Value::as_str)
            .and_then(|id| self.list.get(id))
            .filter(|task| completing && task.status != TodoStatus::Completed);
        if let Some(task) = task {
            let refusals = self.refusals(Event::TaskCompleted, &task).await;
            if !refusals.is_empty() {
                return Ok(ToolOutput::error(format!(
                    "TaskCompleted hook blocked completing task #{}, so it is unchanged: {}",
                    task.id,
                    refusals.join("\n")
                )));
            }
        }
        self.inner.call(input, context).await
    }
}

impl Tool for TaskHooks {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[&str] {
        self.inner.aliases()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn hidden(&self) -> bool {
        self.inner.hidden()
    }

    fn input_schema(&self) -> &Value {
        self.inner.input_schema()
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        self.inner.is_concurrency_safe(input)
    }

    fn is_read_only(&self, input: &Value) -> bool {
        self.inner.is_read_only(input)
    }

    fn timeout(&self, input: &Value) -> Option<std::time::Duration> {
        self.inner.timeout(input)
    }

    fn validate<'a>(
        &'a self,
        input: &'a Value,
        context: &'a ToolContext,
    ) -> executor::ValidateFuture<'a> {
        self.inner.validate(input, context)
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            if self.inner.name() == TASK_CREATE {
                self.create(input, context).await
            } else {
                self.update(input, context).await
            }
        })
    }
}
