//! Rendering a run: text, json, or stream-json (Claude Code's shapes), plus the result object.

use std::io::Write as _;
use std::time::{Duration, Instant};

use executor::ExecutorEvent;
use loop_core::{LoopEvent, LoopOutcome, Terminal};
use protocol::{ContentBlock, ContentDelta, MessageParam, StreamEvent, Usage};
use serde_json::{Value, json};

use crate::args::OutputFormat;

/// The exit code and result subtype of a terminal reason.
pub fn exit_code(terminal: &Terminal) -> (u8, &'static str) {
    match terminal {
        Terminal::Completed | Terminal::StopHookPrevented(_) => (0, "success"),
        Terminal::MaxTurns => (3, "error_max_turns"),
        Terminal::BlockingLimit(_)
        | Terminal::PromptTooLong
        | Terminal::RepeatedToolCall
        | Terminal::StopHookCapReached => (3, "error_during_execution"),
        Terminal::AbortedStreaming | Terminal::AbortedTools => (130, "error_during_execution"),
        _ => (1, "error_during_execution"),
    }
}

/// Writes the run's events as they come and the result at the end.
#[derive(Debug)]
pub struct Renderer {
    format: OutputFormat,
    session_id: String,
    model: String,
    started: Instant,
    api_time: Duration,
    request_started: Option<Instant>,
    message_id: String,
    message_model: String,
    denials: Vec<Value>,
    cost: Option<f64>,
    live_text: bool,
    wrote_text: bool,
}

impl Renderer {
    /// A renderer; `live_text` streams text deltas (text format on a terminal).
    pub fn new(format: OutputFormat, session_id: &str, model: &str, live_text: bool) -> Self {
        Self {
            format,
            session_id: session_id.to_owned(),
            model: model.to_owned(),
            started: Instant::now(),
            api_time: Duration::ZERO,
            request_started: None,
            message_id: String::new(),
            message_model: model.to_owned(),
            denials: Vec::new(),
            cost: Some(0.0),
            live_text,
            wrote_text: false,
        }
    }

    fn line(value: &Value) {
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (`agent … | head`) must not kill the run.
        let _ = writeln!(stdout, "{value}");
        let _ = stdout.flush();
    }

    /// The `system`/`init` line (stream-json only).
    pub fn init(&self, cwd: &str, tools: &[String], permission_mode: &str) {
        if self.format == OutputFormat::StreamJson {
            Self::line(&json!({
                "type": "system", "subtype": "init", "cwd": cwd, "session_id": self.session_id,
                "tools": tools, "mcp_servers": [], "model": self.model,
                "permissionMode": permission_mode, "apiKeySource": "none",
            }));
        }
    }

    /// Renders one loop event.
    pub fn event(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::Request { .. } => self.request_started = Some(Instant::now()),
            LoopEvent::Stream(StreamEvent::MessageStart { message }) => {
                self.message_id = message.id.to_string();
                self.message_model = message.model.clone();
            }
            LoopEvent::Stream(StreamEvent::ContentBlockDelta {
                delta: ContentDelta::Text { text },
                ..
            }) if self.live_text => {
                let mut stdout = std::io::stdout().lock();
                let _ = write!(stdout, "{text}");
                let _ = stdout.flush();
                self.wrote_text = true;
            }
            LoopEvent::Block(block) if self.format == OutputFormat::StreamJson => {
                Self::line(&json!({
                    "type": "assistant",
                    "message": {
                        "id": self.message_id, "type": "message", "role": "assistant",
                        "model": self.message_model, "content": [block.block],
                        "stop_reason": null, "stop_sequence": null,
                    },
                    "parent_tool_use_id": null, "session_id": self.session_id,
                    "uuid": uuid::Uuid::new_v4().to_string(),
                }));
            }
            LoopEvent::Assistant(message) => {
                if let Some(started) = self.request_started.take() {
                    self.api_time += started.elapsed();
                }
                let (info, _) = context::lookup(&message.model);
                self.cost = match (self.cost, info.prices) {
                    (Some(total), Some(prices)) => Some(total + prices.cost(&message.usage)),
                    _ => None,
                };
            }
            LoopEvent::ToolResults(message) | LoopEvent::UserMessage(message)
                if self.format == OutputFormat::StreamJson =>
            {
                self.user_lines(message);
            }
            LoopEvent::Tool(ExecutorEvent::PermissionDenied {
                tool_use_id,
                name,
                input,
                ..
            }) => {
                self.denials.push(
                    json!({"tool_name": name, "tool_use_id": tool_use_id, "tool_input": input}),
                );
            }
            LoopEvent::Tool(ExecutorEvent::Started { name, .. }) if self.live_text => {
                if self.wrote_text {
                    println!();
                    self.wrote_text = false;
                }
                eprintln!("⏺ {name}");
            }
            _ => {}
        }
    }

    fn user_lines(&self, message: &MessageParam) {
        for block in &message.content {
            if let ContentBlock::ToolResult(_) = block {
                Self::line(&json!({
                    "type": "user",
                    "message": {"role": "user", "content": [block]},
                    "parent_tool_use_id": null, "session_id": self.session_id,
                    "uuid": uuid::Uuid::new_v4().to_string(),
                    "timestamp": crate::transcript::timestamp(std::time::SystemTime::now()),
                }));
            }
        }
    }

    /// The result object.
    pub fn result(&self, outcome: &LoopOutcome) -> Value {
        let (_, subtype) = exit_code(&outcome.terminal);
        let usage: &Usage = &outcome.usage;
        json!({
            "type": "result",
            "subtype": subtype,
            "is_error": subtype != "success",
            "duration_ms": self.started.elapsed().as_millis() as u64,
            "duration_api_ms": self.api_time.as_millis() as u64,
            "num_turns": outcome.turns,
            "result": outcome.result,
            "stop_reason": outcome.terminal.as_str(),
            "terminal_reason": outcome.terminal.as_str(),
            "terminal_detail": outcome.terminal.to_string(),
            "session_id": self.session_id,
            "total_cost_usd": self.cost,
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_creation_input_tokens": usage.cache_creation_input_tokens.unwrap_or(0),
                "cache_read_input_tokens": usage.cache_read_input_tokens.unwrap_or(0),
            },
            "num_requests": outcome.requests,
            "permission_denials": self.denials,
        })
    }

    /// Writes the end of the run.
    pub fn finish(&self, outcome: &LoopOutcome) {
        match self.format {
            OutputFormat::Text => {
                if self.wrote_text {
                    println!();
                } else if !outcome.result.is_empty() {
                    let mut stdout = std::io::stdout().lock();
                    let _ = writeln!(stdout, "{}", outcome.result);
                }
                if outcome.terminal != Terminal::Completed {
                    eprintln!("agent: stopped: {}", outcome.terminal);
                }
            }
            OutputFormat::Json | OutputFormat::StreamJson => Self::line(&self.result(outcome)),
        }
    }
}

#[cfg(test)]
mod tests {
    use loop_core::ModelError;

    use super::*;

    #[test]
    fn exit_codes_follow_the_table() {
        let cases = [
            (Terminal::Completed, 0, "success"),
            (Terminal::StopHookPrevented("x".into()), 0, "success"),
            (Terminal::MaxTurns, 3, "error_max_turns"),
            (Terminal::RepeatedToolCall, 3, "error_during_execution"),
            (Terminal::StopHookCapReached, 3, "error_during_execution"),
            (Terminal::PromptTooLong, 3, "error_during_execution"),
            (
                Terminal::ModelError(ModelError::Transport("x".into())),
                1,
                "error_during_execution",
            ),
            (Terminal::AbortedTools, 130, "error_during_execution"),
            (Terminal::AbortedStreaming, 130, "error_during_execution"),
        ];
        for (terminal, code, subtype) in cases {
            assert_eq!(exit_code(&terminal), (code, subtype), "{terminal}");
        }
    }
}
