//! `TodoWrite {todos}`: the model's todo list, as Claude Code's models are trained to keep
//! it: the whole list is written each time, each item with its `content`, its `status`
//! (`pending`, `in_progress`, `completed`) and its `activeForm` (what is shown while it is in
//! progress). The list belongs to the tool set (a session's, or a subagent's own); the
//! result's structured form is Claude Code's `{oldTodos, newTodos}`.

use std::sync::{Arc, Mutex, PoisonError};

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::common::parse_input;
use crate::session::Shared;

/// The tool's name, as Claude Code spells it.
pub const TODO_WRITE: &str = "TodoWrite";

/// The most items a list may hold: a list longer than this is not a plan any more.
pub const MAX_ITEMS: usize = 100;

/// Where an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on now.
    InProgress,
    /// Done.
    Completed,
}

/// One item of the list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Todo {
    /// What is to be done, in the imperative ("Run the tests").
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// What is shown while it is in progress ("Running the tests").
    pub active_form: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    todos: Vec<Todo>,
}

/// A tool set's todo list, shared by its TodoWrite tool and whoever shows it.
#[derive(Clone, Debug, Default)]
pub struct TodoList(Arc<Mutex<Vec<Todo>>>);

impl TodoList {
    /// The items now.
    pub fn items(&self) -> Vec<Todo> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the items (a resumed session's last list); returns the ones before.
    pub fn replace(&self, items: Vec<Todo>) -> Vec<Todo> {
        std::mem::replace(
            &mut *self.0.lock().unwrap_or_else(PoisonError::into_inner),
            items,
        )
    }

    /// The list a TodoWrite call's `input` writes, if it is one.
    pub fn parse_input(input: &Value) -> Option<Vec<Todo>> {
        serde_json::from_value::<Input>(input.clone())
            .ok()
            .map(|input| input.todos)
    }
}

/// See the module docs.
pub(crate) struct TodoWriteTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl TodoWriteTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "maxItems": MAX_ITEMS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "minLength": 1}
                        },
                        "required": ["content", "status", "activeForm"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

impl Tool for TodoWriteTool {
    fn name(&self) -> &str {
        TODO_WRITE
    }

    fn description(&self) -> &str {
        "Writes your todo list, shown to the user as a checklist: the whole list each time. Use \
         it for tasks of 3 or more steps. `content` is imperative (\"Run the tests\"), \
         `activeForm` continuous (\"Running the tests\"). Keep one item in_progress; mark each \
         completed as soon as it is done."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    /// It changes nothing outside the session: plan mode allows it.
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: Input = parse_input(TODO_WRITE, input)?;
            if input.todos.len() > MAX_ITEMS {
                return Err(ToolError::InvalidInput(format!(
                    "{} items; a todo list holds at most {MAX_ITEMS}",
                    input.todos.len()
                )));
            }
            let count = |status| {
                input
                    .todos
                    .iter()
                    .filter(|todo| todo.status == status)
                    .count()
            };
            let (done, doing, pending) = (
                count(TodoStatus::Completed),
                count(TodoStatus::InProgress),
                count(TodoStatus::Pending),
            );
            let old = self.shared.todos.replace(input.todos.clone());
            let text = if input.todos.is_empty() {
                "The todo list is now empty.".to_owned()
            } else {
                format!(
                    "The todo list is updated: {done} completed, {doing} in progress, {pending} pending. Keep it current as you work: one item in progress, each marked completed as soon as it is done."
                )
            };
            Ok(ToolOutput::text(text).with_structured(json!({
                "oldTodos": old,
                "newTodos": input.todos,
            })))
        })
    }
}
