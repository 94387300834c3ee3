//! A turn as the editor sees it: each loop event that shows becomes a `session/update`
//! notification.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use loop_core::LoopEvent;
use protocol::{ContentBlock, ContentDelta, StreamEvent};
use serde_json::Value;

use super::calls;
use crate::{CatchUp, ExecutorEvent, SubagentEvent};

/// Where a question waits for the editor to have been sent everything before it
/// ([`crate::Observer::set_catch_up`]), shared with the session's prompter.
pub(crate) type CatchUpCell = Arc<Mutex<Option<CatchUp>>>;

/// The `session/update` notifications of one session's turn.
pub(crate) struct Updates {
    cx: ConnectionTo<Client>,
    session_id: String,
    cwd: PathBuf,
    gate: Arc<tools::PermissionGate>,
    todos: tools::todo::TodoList,
    /// Each tool_use's name and input, by id, for its end.
    calls: HashMap<String, (String, Value)>,
    /// The mode the editor was last told.
    mode: tools::PermissionMode,
    /// The model's context window, in tokens (the size of `usage_update`).
    window: u64,
    catch_up: CatchUpCell,
}

impl Updates {
    pub(crate) fn new(
        cx: ConnectionTo<Client>,
        session_id: String,
        session: &crate::Session,
        catch_up: CatchUpCell,
    ) -> Self {
        let gate = session.permission_gate();
        Self {
            cx,
            session_id,
            cwd: session.cwd().to_owned(),
            mode: gate.mode(),
            window: session.context_window(),
            gate,
            todos: session.todo_list(),
            calls: HashMap::new(),
            catch_up,
        }
    }

    fn send(&self, update: acp::SessionUpdate) {
        // A failed send means the connection is closing: the turn is being stopped anyway.
        let _ = self.cx.send_notification(acp::SessionNotification::new(
            self.session_id.clone(),
            update,
        ));
    }

    /// A message of the agent's own (a built-in command's report).
    pub(crate) fn say(&self, text: &str) {
        self.text(text, false);
    }

    fn text(&self, text: &str, thought: bool) {
        if text.is_empty() {
            return;
        }
        let chunk = acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(
            text.to_owned(),
        )));
        self.send(if thought {
            acp::SessionUpdate::AgentThoughtChunk(chunk)
        } else {
            acp::SessionUpdate::AgentMessageChunk(chunk)
        });
    }

    fn tool(&mut self, event: &ExecutorEvent) {
        match event {
            ExecutorEvent::Started { tool_use_id, .. } => {
                let fields =
                    acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress);
                self.send(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(tool_use_id.to_string(), fields),
                ));
            }
            ExecutorEvent::Completed(done) => {
                let id = done.result.tool_use_id.to_string();
                if !self.calls.contains_key(&id) {
                    // Answered without being announced (cut off, unknown): announced now.
                    let call = calls::announce(&id, &done.name, &Value::Null, &self.cwd);
                    self.send(acp::SessionUpdate::ToolCall(call));
                }
                self.send(acp::SessionUpdate::ToolCallUpdate(calls::finish(
                    done, &self.cwd,
                )));
                if tools::todo::changes_the_list(&done.name) {
                    let plan = calls::plan(&self.todos.items());
                    self.send(acp::SessionUpdate::Plan(plan));
                }
                self.mode_changed();
            }
            _ => {}
        }
    }

    /// Tells the editor when the mode changed during the turn (ExitPlanMode, an
    /// "always" that switched to acceptEdits).
    fn mode_changed(&mut self) {
        let now = self.gate.mode();
        if now != self.mode {
            self.mode = now;
            self.send(acp::SessionUpdate::CurrentModeUpdate(
                acp::CurrentModeUpdate::new(now.as_str()),
            ));
        }
    }
}

impl crate::Observer for Updates {
    fn event(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::Stream(StreamEvent::ContentBlockDelta { delta, .. }) => match delta {
                ContentDelta::Text { text } => self.text(text, false),
                ContentDelta::Thinking { thinking } => self.text(thinking, true),
                _ => {}
            },
            LoopEvent::Block(block) => {
                if let ContentBlock::ToolUse(tool_use) = &block.block {
                    let id = tool_use.id.to_string();
                    let call = calls::announce(&id, &tool_use.name, &tool_use.input, &self.cwd);
                    self.calls
                        .insert(id, (tool_use.name.clone(), tool_use.input.clone()));
                    self.send(acp::SessionUpdate::ToolCall(call));
                }
            }
            LoopEvent::Tool(event) => self.tool(event),
            LoopEvent::Transition(_) => self.mode_changed(),
            // How full the context window is after each response: what the request held
            // and what the model added.
            LoopEvent::Usage(usage) => self.send(acp::SessionUpdate::UsageUpdate(
                acp::UsageUpdate::new(usage.context_tokens(), self.window),
            )),
            _ => {}
        }
    }

    fn subagent(&mut self, _event: &SubagentEvent) {
        // A subagent's work shows as its Task call's progress and result.
    }

    fn set_catch_up(&self, catch_up: Option<CatchUp>) {
        *self.catch_up.lock().unwrap_or_else(PoisonError::into_inner) = catch_up;
    }
}
