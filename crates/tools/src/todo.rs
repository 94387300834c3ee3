//! The model's task list, as Claude Code 2.1 keeps it: `TaskCreate {subject, description,
//! activeForm?, metadata?}`, `TaskGet {taskId}`, `TaskUpdate {taskId, subject?, description?,
//! activeForm?, status?, addBlocks?, addBlockedBy?, owner?, metadata?}` (status `pending`,
//! `in_progress`, `completed`, or `deleted` to remove it) and `TaskList {}`, with Claude
//! Code's output shapes. `TodoWrite {todos}`, the form earlier versions offered (the whole
//! list each time: `content`, `status`, `activeForm`), is accepted but not offered: it
//! replaces the list.
//!
//! The list belongs to the tool set (a session's, or a subagent's own); tasks are numbered
//! from 1 in the order they are made, so replaying a history's calls rebuilds the same ids
//! ([`TodoList::replay`]).

use std::sync::{Arc, Mutex, PoisonError};

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::common::parse_input;

/// The legacy tool's name, as Claude Code spells it (accepted, not offered).
pub const TODO_WRITE: &str = "TodoWrite";
/// The task tools' names, as Claude Code spells them.
pub const TASK_CREATE: &str = "TaskCreate";
/// See [`TASK_CREATE`].
pub const TASK_GET: &str = "TaskGet";
/// See [`TASK_CREATE`].
pub const TASK_UPDATE: &str = "TaskUpdate";
/// See [`TASK_CREATE`].
pub const TASK_LIST: &str = "TaskList";

/// Whether `name` is one of the tools that change the list.
pub fn changes_the_list(name: &str) -> bool {
    matches!(name, TODO_WRITE | TASK_CREATE | TASK_UPDATE)
}

/// The most tasks a list may hold: a list longer than this is not a plan any more.
pub const MAX_ITEMS: usize = 100;

/// Where a task stands.
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

/// One task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Its number, as text (`"1"`).
    pub id: String,
    /// What is to be done, briefly ("Run the tests").
    pub subject: String,
    /// What it involves.
    pub description: String,
    /// What is shown while it is in progress ("Running the tests").
    #[serde(default)]
    pub active_form: Option<String>,
    /// Where it stands.
    pub status: TodoStatus,
    /// The tasks that wait for this one.
    #[serde(default)]
    pub blocks: Vec<String>,
    /// The tasks this one waits for.
    #[serde(default)]
    pub blocked_by: Vec<String>,
    /// Who works on it (an agent's name).
    #[serde(default)]
    pub owner: Option<String>,
    /// Whatever the model attached.
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

/// One item of TodoWrite's input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Todo {
    /// What is to be done, in the imperative.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// What is shown while it is in progress.
    pub active_form: String,
}

#[derive(Default, Debug)]
struct Tasks {
    items: Vec<Task>,
    next: u64,
}

/// A tool set's task list, shared by its tools and whoever shows it.
#[derive(Clone, Debug, Default)]
pub struct TodoList(Arc<Mutex<Tasks>>);

impl TodoList {
    fn lock(&self) -> std::sync::MutexGuard<'_, Tasks> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tasks now, in the order they were made.
    pub fn items(&self) -> Vec<Task> {
        self.lock().items.clone()
    }

    /// The task numbered `id`, if the list holds it.
    pub fn get(&self, id: &str) -> Option<Task> {
        self.lock().items.iter().find(|task| task.id == id).cloned()
    }

    /// Takes back the task numbered `id` that was just made (a TaskCreated hook refused
    /// it): it leaves the list, and when it is the last one made its number is given back,
    /// so the ids stay those a replay of the history's successful calls gives.
    pub fn retract(&self, id: &str) {
        let mut tasks = self.lock();
        tasks.items.retain(|task| task.id != id);
        if tasks.next.to_string() == id {
            tasks.next -= 1;
        }
    }

    /// Empties the list and starts the numbering again (`/clear`).
    pub fn clear(&self) {
        *self.lock() = Tasks::default();
    }

    /// Applies a successful call of one of the list's tools to the list, as running it did:
    /// what a resumed session replays from its history, in order.
    pub fn replay(&self, tool: &str, input: &Value) {
        let _ = apply(self, tool, input);
    }
}

/// What a call did, for its result.
struct Applied {
    text: String,
    structured: Value,
}

/// Runs one call of the list's tools against `list`.
fn apply(list: &TodoList, tool: &str, input: &Value) -> Result<Applied, ToolError> {
    match tool {
        TASK_CREATE => create(list, input),
        TASK_GET => get(list, input),
        TASK_UPDATE => update(list, input),
        TASK_LIST => Ok(list_all(list)),
        TODO_WRITE => write_all(list, input),
        other => Err(ToolError::InvalidInput(format!(
            "{other} is not a task tool"
        ))),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateInput {
    subject: String,
    description: String,
    #[serde(default)]
    active_form: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

fn create(list: &TodoList, input: &Value) -> Result<Applied, ToolError> {
    let input: CreateInput = parse_input(TASK_CREATE, input.clone())?;
    let mut tasks = list.lock();
    if tasks.items.len() >= MAX_ITEMS {
        return Err(ToolError::InvalidInput(format!(
            "the task list holds {MAX_ITEMS} tasks, the most it may; complete or delete some first"
        )));
    }
    tasks.next += 1;
    let id = tasks.next.to_string();
    tasks.items.push(Task {
        id: id.clone(),
        subject: input.subject.clone(),
        description: input.description,
        active_form: input.active_form,
        status: TodoStatus::Pending,
        blocks: Vec::new(),
        blocked_by: Vec::new(),
        owner: None,
        metadata: input.metadata,
    });
    Ok(Applied {
        text: format!("Task #{id} created: {}", input.subject),
        structured: json!({"task": {"id": id, "subject": input.subject}}),
    })
}

fn task_id(tool: &str, input: &Value) -> Result<String, ToolError> {
    input
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ToolError::InvalidInput(format!("{tool} needs taskId")))
}

fn get(list: &TodoList, input: &Value) -> Result<Applied, ToolError> {
    let id = task_id(TASK_GET, input)?;
    let tasks = list.lock();
    let Some(task) = tasks.items.iter().find(|task| task.id == id) else {
        return Ok(Applied {
            text: format!("No task #{id}."),
            structured: json!({ "task": null }),
        });
    };
    Ok(Applied {
        text: serde_json::to_string_pretty(task).unwrap_or_default(),
        structured: json!({"task": {
            "id": task.id, "subject": task.subject, "description": task.description,
            "status": task.status, "blocks": task.blocks, "blockedBy": task.blocked_by,
        }}),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct UpdateInput {
    task_id: String,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    active_form: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    add_blocks: Vec<String>,
    #[serde(default)]
    add_blocked_by: Vec<String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
}

fn update(list: &TodoList, input: &Value) -> Result<Applied, ToolError> {
    let input: UpdateInput = parse_input(TASK_UPDATE, input.clone())?;
    let mut tasks = list.lock();
    let Some(at) = tasks.items.iter().position(|task| task.id == input.task_id) else {
        return Err(ToolError::InvalidInput(format!(
            "no task #{}; TaskList shows the tasks",
            input.task_id
        )));
    };
    let id = input.task_id.clone();
    if input.status.as_deref() == Some("deleted") {
        tasks.items.remove(at);
        for task in &mut tasks.items {
            task.blocks.retain(|other| *other != id);
            task.blocked_by.retain(|other| *other != id);
        }
        return Ok(Applied {
            text: format!("Task #{id} deleted."),
            structured: json!({"success": true, "taskId": id, "updatedFields": ["status"],
                "statusChange": {"from": "pending", "to": "deleted"}}),
        });
    }
    let status = match input.status.as_deref() {
        None => None,
        Some(text) => Some(
            serde_json::from_value::<TodoStatus>(Value::from(text)).map_err(|_| {
                ToolError::InvalidInput(format!(
                    "status {text:?} is not pending, in_progress, completed or deleted"
                ))
            })?,
        ),
    };
    for other in input.add_blocks.iter().chain(&input.add_blocked_by) {
        if *other == id || !tasks.items.iter().any(|task| task.id == *other) {
            return Err(ToolError::InvalidInput(format!(
                "task #{id} cannot depend on #{other}: no such other task"
            )));
        }
    }
    let mut fields = Vec::new();
    let task = &mut tasks.items[at];
    let before = task.status;
    if let Some(subject) = input.subject {
        task.subject = subject;
        fields.push("subject");
    }
    if let Some(description) = input.description {
        task.description = description;
        fields.push("description");
    }
    if let Some(active_form) = input.active_form {
        task.active_form = Some(active_form);
        fields.push("activeForm");
    }
    if let Some(status) = status {
        task.status = status;
        fields.push("status");
    }
    if let Some(owner) = input.owner {
        task.owner = Some(owner);
        fields.push("owner");
    }
    if let Some(metadata) = input.metadata {
        task.metadata.extend(metadata);
        fields.push("metadata");
    }
    for other in &input.add_blocks {
        if !task.blocks.contains(other) {
            task.blocks.push(other.clone());
        }
    }
    for other in &input.add_blocked_by {
        if !task.blocked_by.contains(other) {
            task.blocked_by.push(other.clone());
        }
    }
    // The other side of each dependency.
    for other in &input.add_blocks {
        if let Some(blocked) = tasks.items.iter_mut().find(|task| task.id == *other)
            && !blocked.blocked_by.contains(&id)
        {
            blocked.blocked_by.push(id.clone());
        }
    }
    for other in &input.add_blocked_by {
        if let Some(blocking) = tasks.items.iter_mut().find(|task| task.id == *other)
            && !blocking.blocks.contains(&id)
        {
            blocking.blocks.push(id.clone());
        }
    }
    if !input.add_blocks.is_empty() {
        fields.push("blocks");
    }
    if !input.add_blocked_by.is_empty() {
        fields.push("blockedBy");
    }
    let mut structured = json!({"success": true, "taskId": id, "updatedFields": fields});
    if let Some(status) = status.filter(|status| *status != before) {
        structured["statusChange"] = json!({"from": before, "to": status});
    }
    Ok(Applied {
        text: format!("Task #{id} updated: {}.", fields.join(", ")),
        structured,
    })
}

fn list_all(list: &TodoList) -> Applied {
    let tasks = list.lock();
    let mut text = String::new();
    for task in &tasks.items {
        let status = serde_json::to_value(task.status).unwrap_or_default();
        text.push_str(&format!(
            "#{} [{}] {}",
            task.id,
            status.as_str().unwrap_or_default(),
            task.subject
        ));
        if !task.blocked_by.is_empty() {
            text.push_str(&format!(" (blocked by #{})", task.blocked_by.join(", #")));
        }
        text.push('\n');
    }
    if text.is_empty() {
        text.push_str("No tasks.");
    }
    let listed: Vec<Value> = tasks
        .items
        .iter()
        .map(|task| {
            let mut shown = json!({"id": task.id, "subject": task.subject, "status": task.status,
                "blockedBy": task.blocked_by});
            if let Some(owner) = &task.owner {
                shown["owner"] = json!(owner);
            }
            shown
        })
        .collect();
    Applied {
        text: text.trim_end().to_owned(),
        structured: json!({ "tasks": listed }),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    todos: Vec<Todo>,
}

/// TodoWrite: the whole list replaced, the items numbered afresh.
fn write_all(list: &TodoList, input: &Value) -> Result<Applied, ToolError> {
    let input: WriteInput = parse_input(TODO_WRITE, input.clone())?;
    if input.todos.len() > MAX_ITEMS {
        return Err(ToolError::InvalidInput(format!(
            "{} items; a todo list holds at most {MAX_ITEMS}",
            input.todos.len()
        )));
    }
    let mut tasks = list.lock();
    let old: Vec<Todo> = tasks
        .items
        .iter()
        .map(|task| Todo {
            content: task.subject.clone(),
            status: task.status,
            active_form: task.active_form.clone().unwrap_or_default(),
        })
        .collect();
    *tasks = Tasks::default();
    for todo in &input.todos {
        tasks.next += 1;
        let id = tasks.next.to_string();
        tasks.items.push(Task {
            id,
            subject: todo.content.clone(),
            description: todo.content.clone(),
            active_form: Some(todo.active_form.clone()),
            status: todo.status,
            blocks: Vec::new(),
            blocked_by: Vec::new(),
            owner: None,
            metadata: Map::new(),
        });
    }
    let count = |status| {
        input
            .todos
            .iter()
            .filter(|todo| todo.status == status)
            .count()
    };
    Ok(Applied {
        text: format!(
            "The todo list is updated: {} completed, {} in progress, {} pending.",
            count(TodoStatus::Completed),
            count(TodoStatus::InProgress),
            count(TodoStatus::Pending)
        ),
        structured: json!({"oldTodos": old, "newTodos": input.todos}),
    })
}

/// One of the list's tools.
pub(crate) struct TaskTool {
    name: &'static str,
    description: &'static str,
    schema: Value,
    list: TodoList,
}

impl TaskTool {
    /// The four task tools and the hidden TodoWrite over `list`.
    pub(crate) fn all(list: &TodoList) -> Vec<Self> {
        let status =
            json!({"type": "string", "enum": ["pending", "in_progress", "completed", "deleted"]});
        let object = |properties: Value, required: &[&str]| {
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false
            })
        };
        let tool = |name, description, schema| Self {
            name,
            description,
            schema,
            list: list.clone(),
        };
        vec![
            tool(
                TASK_CREATE,
                "Adds a task to your task list, which the user sees as a checklist while you work. Use the list for work of 3 or more distinct steps or when the user asks for several things, not for one simple step or a question. `subject` imperative (\"Run the tests\"), `activeForm` continuous, shown while it runs (\"Running the tests\"), `description` what done means. Returns the task's id.",
                object(
                    json!({"subject": {"type": "string"}, "description": {"type": "string"},
                        "activeForm": {"type": "string"}, "metadata": {"type": "object"}}),
                    &["subject", "description"],
                ),
            ),
            tool(
                TASK_GET,
                "Returns one task of your task list in full: subject, description, status, owner and the tasks it blocks and is blocked by. Use it before starting a task whose details TaskList does not show.",
                object(json!({"taskId": {"type": "string"}}), &["taskId"]),
            ),
            tool(
                TASK_UPDATE,
                "Changes a task: set `status` in_progress when you start it (one at a time) and completed as soon as it is done, or deleted to remove it; add dependencies with addBlocks/addBlockedBy. Mark a task completed only when it is wholly done (its tests pass); when something blocks it, keep it in_progress and add a task for the blocker.",
                object(
                    json!({"taskId": {"type": "string"}, "subject": {"type": "string"},
                        "description": {"type": "string"}, "activeForm": {"type": "string"},
                        "status": status, "addBlocks": {"type": "array", "items": {"type": "string"}},
                        "addBlockedBy": {"type": "array", "items": {"type": "string"}},
                        "owner": {"type": "string"}, "metadata": {"type": "object"}}),
                    &["taskId"],
                ),
            ),
            tool(
                TASK_LIST,
                "Lists your tasks with their ids, subjects, status and what blocks them. Use it to pick the next task (the first pending one nothing blocks) and to check the list after finishing one.",
                object(json!({}), &[]),
            ),
            tool(
                TODO_WRITE,
                "Writes the whole todo list (each item: content, status, activeForm), replacing the previous one. Claude Code's earlier form of the task list, accepted for models trained on it; prefer TaskCreate and TaskUpdate.",
                object(
                    json!({"todos": {"type": "array", "maxItems": MAX_ITEMS, "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "minLength": 1}
                        },
                        "required": ["content", "status", "activeForm"],
                        "additionalProperties": false
                    }}}),
                    &["todos"],
                ),
            ),
        ]
    }
}

impl Tool for TaskTool {
    fn name(&self) -> &str {
        self.name
    }

    fn hidden(&self) -> bool {
        self.name == TODO_WRITE
    }

    fn description(&self) -> &str {
        self.description
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// They change nothing outside the session: plan mode allows them.
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let applied = apply(&self.list, self.name, &input)?;
            Ok(ToolOutput::text(applied.text).with_structured(applied.structured))
        })
    }
}
