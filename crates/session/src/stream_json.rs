//! Claude Code's stream-json lines (`--output-format stream-json`, the Agent SDK's
//! `SDKMessage`s) for a session's events: an `assistant` line per completed content block,
//! a `user` line per tool_result (with the call's structured `tool_use_result`), a subagent's
//! lines carrying `parent_tool_use_id`, `system` lines for compactions and background
//! summaries, and with partial messages a `stream_event` line per stream event.
//!
//! [`Lines`] only shapes lines; where they go is its sink's business: the CLI writes them on
//! stdout ([`Lines::stdout`]), `agent batch` tags each with its task's id first. The
//! `system`/`init` and `result` lines are [`crate::sdk::init_message`] and
//! [`crate::sdk::result_message`], written through [`Lines::write`].

use std::collections::HashMap;
use std::io::Write as _;

use executor::ExecutorEvent;
use loop_core::{LoopEvent, Transition};
use protocol::{ContentBlock, MessageParam, StreamEvent, Usage};
use serde_json::{Value, json};

use crate::SubagentEvent;

/// Where a [`Lines`] writer's lines go, one JSON value per line.
pub type Sink = Box<dyn FnMut(Value) + Send>;

/// The stream-json lines of one session's events (see the module's documentation).
pub struct Lines {
    session_id: String,
    sink: Sink,
    /// `--include-partial-messages`: a `stream_event` line for every stream event.
    partial_messages: bool,
    /// The main agent's response streaming now, as its `message_start` gave it.
    message: Head,
    /// Each subagent's response streaming now, by agent id.
    subagents: HashMap<String, Head>,
    /// Finished calls' structured results by tool_use id, until their `user` line is written.
    tool_use_results: HashMap<String, Value>,
}

/// A response's id, model and usage, as its `message_start` gave them (a subagent's usage
/// is not kept: its lines carry none).
#[derive(Debug, Default)]
struct Head {
    id: String,
    model: String,
    usage: Usage,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("session_id", &self.session_id)
            .field("partial_messages", &self.partial_messages)
            .finish_non_exhaustive()
    }
}

impl Lines {
    /// Lines of the session `session_id` into `sink`.
    pub fn new(session_id: &str, sink: Sink) -> Self {
        Self {
            session_id: session_id.to_owned(),
            sink,
            partial_messages: false,
            message: Head::default(),
            subagents: HashMap::new(),
            tool_use_results: HashMap::new(),
        }
    }

    /// Lines of the session `session_id` on stdout ([`stdout_line`]).
    pub fn stdout(session_id: &str) -> Self {
        Self::new(session_id, Box::new(|line| stdout_line(&line)))
    }

    /// Also a `stream_event` line for every stream event, and a `message_withdrawn` line when
    /// a stream is asked again from the start (Claude Code's `--include-partial-messages`).
    #[must_use]
    pub fn with_partial_messages(mut self, on: bool) -> Self {
        self.partial_messages = on;
        self
    }

    /// The session the lines are of.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Writes `line` as it is (an `init` or `result` line).
    pub fn write(&mut self, line: Value) {
        (self.sink)(line);
    }

    /// A `system` line: `fields` (its `subtype` and the rest), the session id and a new uuid.
    pub fn system(&mut self, fields: Value) {
        let mut line = json!({"type": "system"});
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
            line.insert("session_id".to_owned(), json!(self.session_id));
            line.insert("uuid".to_owned(), json!(uuid::Uuid::new_v4().to_string()));
        }
        self.write(line);
    }

    /// The lines of one event of the main loop.
    pub fn event(&mut self, event: &LoopEvent) {
        if self.partial_messages {
            self.partial(event);
        }
        match event {
            LoopEvent::Stream(StreamEvent::MessageStart { message }) => {
                self.message = Head {
                    id: message.id.to_string(),
                    model: message.model.clone(),
                    usage: message.usage.clone(),
                };
            }
            LoopEvent::Block(block) => {
                let head = &self.message;
                let line = self.assistant(
                    (&head.id, &head.model, Some(&head.usage)),
                    &block.block,
                    None,
                );
                self.write(line);
            }
            LoopEvent::Tool(ExecutorEvent::Completed(done)) => {
                if let Some(structured) = &done.structured {
                    self.tool_use_results.insert(
                        done.result.tool_use_id.as_str().to_owned(),
                        structured.clone(),
                    );
                }
            }
            LoopEvent::ToolResults(message) | LoopEvent::UserMessage(message) => {
                self.user(message, None);
            }
            // A compaction, as Claude Code reports it (SDKCompactBoundaryMessage).
            LoopEvent::History(loop_core::HistoryEvent::Compacted {
                trigger,
                pre_tokens,
                ..
            }) => self.system(json!({
                "subtype": "compact_boundary",
                "compact_metadata": {"trigger": trigger.as_str(), "pre_tokens": pre_tokens},
            })),
            LoopEvent::ProgressSummary { text, .. } => {
                self.system(json!({"subtype": "progress_summary", "summary": text}));
            }
            LoopEvent::ToolUseSummary {
                text, tool_use_ids, ..
            } => self.system(json!({
                "subtype": "tool_use_summary", "summary": text,
                "preceding_tool_use_ids": tool_use_ids,
            })),
            _ => {}
        }
    }

    /// The lines of one event of a subagent: its messages, carrying `parent_tool_use_id`
    /// (the Task call that started it).
    pub fn subagent(&mut self, event: &SubagentEvent) {
        let parent = event.parent_tool_use_id.as_str();
        match &event.event {
            LoopEvent::Stream(StreamEvent::MessageStart { message }) => {
                let head = self.subagents.entry(event.agent_id.clone()).or_default();
                head.id = message.id.to_string();
                head.model.clone_from(&message.model);
            }
            LoopEvent::Block(block) => {
                let head = self.subagents.get(&event.agent_id);
                let (id, model) = head.map_or(("", ""), |head| (&head.id, &head.model));
                // A subagent's lines carry no usage: its figures are in the result's.
                let line = self.assistant((id, model, None), &block.block, Some(parent));
                self.write(line);
            }
            LoopEvent::ToolResults(message) | LoopEvent::UserMessage(message) => {
                self.user(message, Some(parent));
            }
            _ => {}
        }
    }

    /// A completed block as its `assistant` line (`id`, `model`, `usage` of its response); the usage is the response's as its
    /// `message_start` gave it (the final figures come with the result), as Claude Code's
    /// assistant lines carry it.
    fn assistant(
        &self,
        (id, model, usage): (&str, &str, Option<&Usage>),
        block: &ContentBlock,
        parent: Option<&str>,
    ) -> Value {
        json!({
            "type": "assistant",
            "message": {
                "id": id, "type": "message", "role": "assistant",
                "model": model, "content": [block],
                "stop_reason": null, "stop_sequence": null, "usage": usage,
            },
            "parent_tool_use_id": parent, "session_id": self.session_id,
            "uuid": uuid::Uuid::new_v4().to_string(),
        })
    }

    /// A `user` line per tool_result of `message`, with the call's structured result as
    /// `tool_use_result` where it gave one (Claude Code's shapes: `{oldTodos, newTodos}`,
    /// `BashOutput`, ...).
    fn user(&mut self, message: &MessageParam, parent: Option<&str>) {
        for block in &message.content {
            if let ContentBlock::ToolResult(result) = block {
                let mut line = json!({
                    "type": "user",
                    "message": {"role": "user", "content": [block]},
                    "parent_tool_use_id": parent, "session_id": self.session_id,
                    "uuid": uuid::Uuid::new_v4().to_string(),
                    "timestamp": crate::transcript::timestamp(std::time::SystemTime::now()),
                });
                if let Some(structured) =
                    (self.tool_use_results).remove(result.tool_use_id.as_str())
                {
                    line["tool_use_result"] = structured;
                }
                self.write(line);
            }
        }
    }

    /// Partial messages: a stream event's `stream_event` line; for a stream asked again from
    /// the start, the line that withdraws the partial message its events built (the seeds'
    /// tombstone).
    fn partial(&mut self, event: &LoopEvent) {
        let line = match event {
            LoopEvent::Stream(stream) => json!({
                "type": "stream_event", "event": stream, "parent_tool_use_id": null,
                "session_id": self.session_id, "uuid": uuid::Uuid::new_v4().to_string(),
            }),
            LoopEvent::Transition(
                transition @ (Transition::StreamRetry | Transition::NonStreamingFallback),
            ) => json!({
                "type": "system", "subtype": "message_withdrawn",
                "message_id": self.message.id, "reason": transition.as_str(),
                "session_id": self.session_id, "uuid": uuid::Uuid::new_v4().to_string(),
            }),
            _ => return,
        };
        self.write(line);
    }
}

/// Writes `value` as one line on stdout, under the stdout lock (lines from other threads
/// never interleave with it). A closed stdout (`agent … | head`) is not an error: the run
/// goes on.
pub fn stdout_line(value: &Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}
