//! OpenAI's Responses API at the edge: a Messages API request translated into a
//! `/responses` body ([`responses_request`]), and its stream of `response.*` events decoded
//! onto the Messages API's stream events ([`ResponsesStream`]), so the accumulator, the
//! streaming executor and the loop are unchanged.
//!
//! The history stays ours and is sent whole every time (`store: false`, no
//! `previous_response_id`), so resume, compaction and rewind work as with any provider.
//!
//! Output items become content blocks, in order, one open at a time:
//!
//! - a `message` item is a `text` block (`response.output_text.delta`, and a refusal's
//!   `response.refusal.delta`, are its text);
//! - a `function_call` item is a `tool_use` block (`call_id` and `name`; the arguments'
//!   `response.function_call_arguments.delta`s are `input_json_delta`s). It is complete at
//!   its `response.output_item.done`, so its tool starts while the model streams on;
//! - a `reasoning` item is an opaque `thinking` block: its summary text
//!   (`response.reasoning_summary_text.delta`) or raw reasoning text as the thinking, and
//!   its id and `encrypted_content` as the signature (`"<id> <encrypted_content>"`), which
//!   is how it goes back, as a `reasoning` input item, on the next request (only when the
//!   server returned encrypted content: the request asks for it with
//!   `include: ["reasoning.encrypted_content"]`);
//! - a `web_search_call` item (the server's search, asked for by a Messages API web search
//!   tool in the request: `{"type": "web_search_..."}` becomes `{"type": "web_search"}`
//!   with its `allowed_domains` as `filters`) is a `server_tool_use` block named
//!   `web_search` with its query, then a `web_search_tool_result` block with the sources it
//!   read (`include: ["web_search_call.action.sources"]`), as the Messages API gives them;
//! - other items (a server's own tools) are not blocks.
//!
//! `response.completed` ends the message (`tool_use` when a function call was made, else
//! `end_turn`); `response.incomplete` with `incomplete_details.reason: max_output_tokens`
//! is `max_tokens` (the recovery path applies), `content_filter` a refusal;
//! `response.failed` and `error` events are the server failing mid-stream. Usage maps
//! `input_tokens` minus `input_tokens_details.cached_tokens` to `input_tokens`, the cached
//! part to `cache_read_input_tokens`, and `output_tokens` as it is.

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use protocol::{
    ContentBlock, ContentDelta, CreateMessageRequest, DeltaUsage, Message, MessageDelta,
    MessageParam, Role, StopReason, StreamEvent, SystemPrompt, ToolChoice, ToolResultContent,
    Usage,
};
use serde_json::{Map, Value, json};
use sse_parser::{FinalMessage, Framer, Item, MessageAccumulator};

use crate::error::{ErrorKind, ProviderError};

/// The `/responses` body for a Messages API request: the system prompt as `instructions`,
/// each message as input items (text and images as a user or assistant message, tool_use
/// as `function_call`, tool_result as `function_call_output`, thinking with encrypted
/// content as `reasoning`), tools as function tools; `store: false`, encrypted reasoning
/// included. Cache breakpoints and stop sequences (which the API has not) are dropped.
pub fn responses_request(request: &CreateMessageRequest) -> Value {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        match message.role {
            Role::User => user_items(message, &mut input),
            Role::Assistant => assistant_items(message, &mut input),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    if let Some(system) = &request.system {
        let text = match system {
            SystemPrompt::Text(text) => text.clone(),
            SystemPrompt::Blocks(blocks) => blocks
                .iter()
                .map(|block| block.text.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        if !text.is_empty() {
            body.insert("instructions".into(), Value::String(text));
        }
    }
    body.insert("input".into(), Value::Array(input));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("store".into(), Value::Bool(false));
    let searches = request.tools.iter().any(is_web_search);
    body.insert(
        "include".into(),
        if searches {
            json!([
                "reasoning.encrypted_content",
                "web_search_call.action.sources"
            ])
        } else {
            json!(["reasoning.encrypted_content"])
        },
    );
    body.insert("max_output_tokens".into(), json!(request.max_tokens));
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    let effort = crate::chat::openai_effort(request);
    if request.thinking.is_some() || effort.is_some() {
        let mut reasoning = json!({"summary": "auto"});
        if let Some(effort) = effort {
            reasoning["effort"] = json!(effort);
        }
        body.insert("reasoning".into(), reasoning);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                if is_web_search(tool) {
                    let mut search = json!({"type": "web_search"});
                    if let Some(allowed) = tool.extra.get("allowed_domains") {
                        search["filters"] = json!({"allowed_domains": allowed});
                    }
                    return search;
                }
                let mut function = Map::new();
                function.insert("type".into(), json!("function"));
                function.insert("name".into(), Value::String(tool.name.clone()));
                if let Some(description) = &tool.description {
                    function.insert("description".into(), Value::String(description.clone()));
                }
                function.insert("parameters".into(), tool.input_schema.clone());
                // Our schemas are not written for strict mode (optional properties).
                function.insert("strict".into(), Value::Bool(false));
                Value::Object(function)
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let (choice, parallel) = match &request.tool_choice {
            None => (None, true),
            Some(ToolChoice::Auto {
                disable_parallel_tool_use,
            }) => (
                Some(json!("auto")),
                disable_parallel_tool_use != &Some(true),
            ),
            Some(ToolChoice::Any {
                disable_parallel_tool_use,
            }) => (
                Some(json!("required")),
                disable_parallel_tool_use != &Some(true),
            ),
            // The server's own search is asked for by requiring a tool (it is the only one).
            Some(ToolChoice::Tool { name, .. })
                if request
                    .tools
                    .iter()
                    .any(|tool| &tool.name == name && is_web_search(tool)) =>
            {
                (Some(json!("required")), true)
            }
            Some(ToolChoice::Tool { name, .. }) => {
                (Some(json!({"type": "function", "name": name})), true)
            }
            Some(ToolChoice::None) => (Some(json!("none")), true),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
    }
    Value::Object(body)
}

/// Whether `tool` is the Messages API's web search server tool (`web_search_20250305`, ...).
fn is_web_search(tool: &protocol::ToolDefinition) -> bool {
    tool.extra
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.starts_with("web_search_"))
}

/// Text and images as a user message's content parts (a document as a note:
/// [`crate::chat::DOCUMENT_NOTE`]).
fn input_parts(blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(json!({"type": "input_text", "text": text.text})),
            ContentBlock::Document(_) => {
                Some(json!({"type": "input_text", "text": crate::chat::DOCUMENT_NOTE}))
            }
            ContentBlock::Image(image) => crate::chat::image_url(&image.source)
                .map(|url| json!({"type": "input_image", "image_url": url, "detail": "auto"})),
            _ => None,
        })
        .collect()
}

/// A user message: each tool result as a `function_call_output` (first: they answer the
/// calls before), then the rest, with any image a result held, as one user message.
fn user_items(message: &MessageParam, out: &mut Vec<Value>) {
    let mut images = Vec::new();
    let mut rest = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult(result) => {
                let text = match &result.content {
                    ToolResultContent::Text(text) => text.clone(),
                    ToolResultContent::Blocks(blocks) => {
                        images.extend(
                            blocks
                                .iter()
                                .filter(|block| matches!(block, ContentBlock::Image(_)))
                                .cloned(),
                        );
                        blocks
                            .iter()
                            .filter_map(crate::chat::result_text)
                            .collect::<Vec<_>>()
                            .join("\n")
                    }
                };
                let text = if result.is_error == Some(true) && !text.starts_with("Error") {
                    format!("Error: {text}")
                } else {
                    text
                };
                out.push(json!({
                    "type": "function_call_output",
                    "call_id": result.tool_use_id.as_str(),
                    "output": text,
                }));
            }
            other => rest.push(other.clone()),
        }
    }
    let mut content = input_parts(&images);
    content.extend(input_parts(&rest));
    if !content.is_empty() {
        out.push(json!({"role": "user", "content": content}));
    }
}

/// An assistant message, block by block in order: reasoning with encrypted content, text,
/// function calls.
fn assistant_items(message: &MessageParam, out: &mut Vec<Value>) {
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut Vec<Value>| {
        if !text.is_empty() {
            out.push(json!({"role": "assistant", "content": std::mem::take(text)}));
        }
    };
    for block in &message.content {
        match block {
            ContentBlock::Text(block) => text.push_str(&block.text),
            ContentBlock::Thinking(block) => {
                // Only what this provider returned goes back: `<id> <encrypted_content>`.
                if let Some((id, encrypted)) = block.signature.split_once(' ')
                    && !id.is_empty()
                    && !encrypted.is_empty()
                {
                    flush(&mut text, out);
                    out.push(json!({
                        "type": "reasoning",
                        "id": id,
                        "summary": [{"type": "summary_text", "text": block.thinking}],
                        "encrypted_content": encrypted,
                    }));
                }
            }
            ContentBlock::ToolUse(call) => {
                flush(&mut text, out);
                out.push(json!({
                    "type": "function_call",
                    "call_id": call.id.as_str(),
                    "name": call.name,
                    "arguments": call.input.to_string(),
                }));
            }
            _ => {}
        }
    }
    flush(&mut text, out);
}

/// The kind of block an output item became.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    Tool,
}

/// The open block: the item's `output_index`, the block's index, its kind, whether its
/// arguments (a tool) streamed any delta, and the last summary part seen (thinking).
#[derive(Clone, Copy, Debug)]
struct OpenBlock {
    output_index: u64,
    index: usize,
    kind: Kind,
    streamed: bool,
    summary_index: u64,
}

/// One event of the stream, borrowing its strings where the JSON allows.
#[derive(Debug, Default, serde::Deserialize)]
struct Event<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
}

/// An event's type alone: read first, so an event this decoder does not use is skipped
/// whatever its other fields hold.
#[derive(Debug, serde::Deserialize)]
struct Tag<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
}

/// The events the decoder reads (see [`Translator::event`]); every other one is skipped.
const HANDLED: &[&str] = &[
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_item.added",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// `response.*` events to Messages API stream events (see the module docs).
#[derive(Debug, Default)]
struct Translator {
    started: bool,
    open: Option<OpenBlock>,
    next_index: usize,
    /// Function calls opened (their blocks): the message's stop reason, and the ids of calls
    /// a server sent without one (`call_N`).
    calls: u64,
    /// Server web searches made (`web_search_call` items).
    searches: u64,
    stopped: bool,
}

impl Translator {
    fn start(&mut self, response: Option<&Value>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let text = |key: &str| {
            response
                .and_then(|response| response.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        out.push(StreamEvent::MessageStart {
            message: Box::new(Message {
                id: text("id").into(),
                kind: "message".into(),
                role: Role::Assistant,
                model: text("model"),
                content: Vec::new(),
                stop_reason: None,
                stop_sequence: None,
                stop_details: None,
                usage: Usage::default(),
                extra: Map::new(),
            }),
        });
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some(open) = self.open.take() {
            out.push(StreamEvent::ContentBlockStop { index: open.index });
        }
    }

    fn open(
        &mut self,
        output_index: u64,
        kind: Kind,
        block: ContentBlock,
        out: &mut Vec<StreamEvent>,
    ) {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some(OpenBlock {
            output_index,
            index,
            kind,
            streamed: false,
            summary_index: 0,
        });
        out.push(StreamEvent::ContentBlockStart {
            index,
            content_block: Box::new(block),
        });
    }

    /// The block a text or thinking delta of item `output_index` goes to: the open one when
    /// it is that item's and of that kind; a new one when the server skipped
    /// `output_item.added` and nothing else is open (a lenient server's form); `None` (the
    /// delta is dropped) when it would cut another item's block short, such as a function
    /// call still receiving its arguments.
    fn block(
        &mut self,
        output_index: u64,
        kind: Kind,
        out: &mut Vec<StreamEvent>,
    ) -> Option<usize> {
        match self.open {
            Some(open) if open.output_index == output_index && open.kind == kind => {
                Some(open.index)
            }
            Some(open) if open.output_index == output_index || open.kind == Kind::Tool => None,
            _ => {
                let block = match kind {
                    Kind::Thinking => empty_thinking(),
                    Kind::Text | Kind::Tool => ContentBlock::text(""),
                };
                self.open(output_index, kind, block, out);
                Some(self.next_index - 1)
            }
        }
    }

    /// The open function call of item `output_index`; arguments for any other item are
    /// dropped (a call is only ever opened by its `output_item.added`, with its name).
    fn tool(&self, output_index: u64) -> Option<OpenBlock> {
        self.open
            .filter(|open| open.output_index == output_index && open.kind == Kind::Tool)
    }

    fn added(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) {
        let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "message" => self.open(output_index, Kind::Text, ContentBlock::text(""), out),
            "function_call" => {
                self.calls += 1;
                // A call must have an id to be answered: a server that sent none gets one.
                let id = match text("call_id") {
                    "" => format!("call_{}", self.calls),
                    id => id.to_owned(),
                };
                self.open(output_index, Kind::Tool, tool_block(&id, text("name")), out);
            }
            "reasoning" => self.open(output_index, Kind::Thinking, empty_thinking(), out),
            // A server-side tool's item: not a block of ours.
            _ => self.close(out),
        }
    }

    fn done(&mut self, output_index: u64, item: &Value, out: &mut Vec<StreamEvent>) {
        if item.get("type").and_then(Value::as_str) == Some("web_search_call") {
            self.web_search(item, out);
            return;
        }
        let Some(open) = self.open.filter(|open| open.output_index == output_index) else {
            return;
        };
        match open.kind {
            Kind::Tool if !open.streamed => {
                // Arguments that came whole with the item.
                if let Some(arguments) = item.get("arguments").and_then(Value::as_str)
                    && !arguments.is_empty()
                {
                    out.push(StreamEvent::ContentBlockDelta {
                        index: open.index,
                        delta: ContentDelta::InputJson {
                            partial_json: arguments.to_owned(),
                        },
                    });
                }
            }
            Kind::Thinking => {
                let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
                if let Some(encrypted) = item.get("encrypted_content").and_then(Value::as_str)
                    && !encrypted.is_empty()
                    && !id.is_empty()
                    && !id.contains(' ')
                {
                    out.push(StreamEvent::ContentBlockDelta {
                        index: open.index,
                        delta: ContentDelta::Signature {
                            signature: format!("{id} {encrypted}"),
                        },
                    });
                }
            }
            Kind::Tool | Kind::Text => {}
        }
        self.close(out);
    }

    /// A finished `web_search_call`: its search as a `server_tool_use` block and the
    /// sources it read as a `web_search_tool_result` block (the Messages API's pair).
    fn web_search(&mut self, item: &Value, out: &mut Vec<StreamEvent>) {
        self.close(out);
        self.searches += 1;
        let id = match item.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("ws_{}", self.searches),
        };
        let action = item.get("action").unwrap_or(&Value::Null);
        let query = action
            .get("query")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                action
                    .get("queries")
                    .and_then(Value::as_array)
                    .and_then(|queries| queries.first())
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let sources: Vec<Value> = action
            .get("sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|source| source.get("url").and_then(Value::as_str))
            .map(|url| json!({"type": "web_search_result", "url": url, "title": ""}))
            .collect();
        let blocks = [
            json!({"type": "server_tool_use", "id": id, "name": "web_search", "input": {"query": query}}),
            json!({"type": "web_search_tool_result", "tool_use_id": id, "content": sources}),
        ];
        for block in blocks {
            let Ok(block) = serde_json::from_value::<ContentBlock>(block) else {
                continue;
            };
            let index = self.next_index;
            self.next_index += 1;
            out.push(StreamEvent::ContentBlockStart {
                index,
                content_block: Box::new(block),
            });
            out.push(StreamEvent::ContentBlockStop { index });
        }
    }

    /// `response.completed` / `response.incomplete`: the message ends.
    fn stop(&mut self, response: Option<&Value>, complete: bool, out: &mut Vec<StreamEvent>) {
        if self.stopped {
            return;
        }
        self.start(response, out);
        self.close(out);
        self.stopped = true;
        let stop_reason = if complete {
            if self.calls > 0 {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }
        } else {
            match response
                .and_then(|response| response.pointer("/incomplete_details/reason"))
                .and_then(Value::as_str)
            {
                Some("max_output_tokens") => StopReason::MaxTokens,
                Some("content_filter") => StopReason::Refusal,
                Some(other) => StopReason::Other(other.to_owned()),
                None => StopReason::Other("incomplete".to_owned()),
            }
        };
        let usage = response
            .and_then(|response| response.get("usage"))
            .map(|usage| {
                let number = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
                let cached = number("/input_tokens_details/cached_tokens");
                DeltaUsage {
                    input_tokens: number("/input_tokens")
                        .map(|input| input.saturating_sub(cached.unwrap_or(0))),
                    cache_read_input_tokens: cached,
                    output_tokens: number("/output_tokens"),
                    ..DeltaUsage::default()
                }
            });
        let mut usage = usage.unwrap_or_default();
        if self.searches > 0 {
            // Counted as the Messages API counts them, so a ledger sees the searches.
            usage.extra.insert(
                "server_tool_use".into(),
                json!({"web_search_requests": self.searches}),
            );
        }
        out.push(StreamEvent::MessageDelta(Box::new(MessageDelta {
            stop_reason: Some(stop_reason),
            stop_sequence: None,
            stop_details: None,
            delta_extra: Map::new(),
            usage: Some(usage),
            extra: Map::new(),
        })));
        out.push(StreamEvent::MessageStop);
    }

    /// Translates one event; an error event is the server failing.
    fn event(
        &mut self,
        event: &Event<'_>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        let index = event.output_index.unwrap_or(0);
        let delta = event.delta.as_deref().unwrap_or_default();
        match event.kind.as_ref() {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.start(event.response.as_ref(), out);
            }
            "response.output_item.added" => {
                self.start(None, out);
                if let Some(item) = &event.item {
                    self.added(index, item, out);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" if !delta.is_empty() => {
                self.start(None, out);
                if let Some(block) = self.block(index, Kind::Text, out) {
                    out.push(StreamEvent::ContentBlockDelta {
                        index: block,
                        delta: ContentDelta::Text {
                            text: delta.to_owned(),
                        },
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta"
                if !delta.is_empty() =>
            {
                self.start(None, out);
                if let Some(block) = self.block(index, Kind::Thinking, out) {
                    // A new summary part starts a new paragraph.
                    let part = event.summary_index.unwrap_or(0);
                    let mut text = delta.to_owned();
                    if let Some(open) = self.open.as_mut()
                        && part > open.summary_index
                    {
                        open.summary_index = part;
                        text.insert_str(0, "\n\n");
                    }
                    out.push(StreamEvent::ContentBlockDelta {
                        index: block,
                        delta: ContentDelta::Thinking { thinking: text },
                    });
                }
            }
            "response.function_call_arguments.delta" if !delta.is_empty() => {
                if let Some(open) = self.tool(index) {
                    if let Some(open) = self.open.as_mut() {
                        open.streamed = true;
                    }
                    out.push(StreamEvent::ContentBlockDelta {
                        index: open.index,
                        delta: ContentDelta::InputJson {
                            partial_json: delta.to_owned(),
                        },
                    });
                }
            }
            "response.function_call_arguments.done" => {
                // The whole arguments, when no delta carried them.
                if let Some(open) = self.tool(index).filter(|open| !open.streamed)
                    && let Some(arguments) = event.arguments.as_deref().filter(|a| !a.is_empty())
                {
                    if let Some(open) = self.open.as_mut() {
                        open.streamed = true;
                    }
                    out.push(StreamEvent::ContentBlockDelta {
                        index: open.index,
                        delta: ContentDelta::InputJson {
                            partial_json: arguments.to_owned(),
                        },
                    });
                }
            }
            "response.output_item.done" => {
                if let Some(item) = &event.item {
                    self.done(index, item, out);
                }
            }
            "response.completed" => self.stop(event.response.as_ref(), true, out),
            "response.incomplete" => self.stop(event.response.as_ref(), false, out),
            "response.failed" => {
                let error = event
                    .response
                    .as_ref()
                    .and_then(|response| response.get("error"))
                    .cloned()
                    .unwrap_or_else(|| json!({"message": "the response failed"}));
                return Err(mid_stream(&error));
            }
            // Content part and `.done` events repeat what the deltas said; other events are
            // about a server's own tools.
            _ => {}
        }
        Ok(())
    }
}

/// A server's error mid-stream (`{"code", "message"}`), classified as a failed response
/// would be.
fn mid_stream(error: &Value) -> ProviderError {
    let mut failure = crate::chat::error_of(&json!({"error": error}), None).unwrap_or_else(|| {
        ProviderError::new(ErrorKind::Server, "an error event without a message")
    });
    failure.message = format!("{} (error event mid-stream)", failure.message);
    failure
}

fn empty_thinking() -> ContentBlock {
    ContentBlock::Thinking(protocol::ThinkingBlock {
        thinking: String::new(),
        signature: String::new(),
        extra: Map::new(),
    })
}

fn tool_block(id: &str, name: &str) -> ContentBlock {
    ContentBlock::ToolUse(protocol::ToolUseBlock {
        id: id.into(),
        name: name.to_owned(),
        input: Value::Object(Map::new()),
        cache_control: None,
        extra: Map::new(),
    })
}

/// A Responses API stream as [`sse_parser::Item`]s: push the body's chunks, pull items,
/// [`ResponsesStream::finish`] at the end of the body. The same interface as
/// [`sse_parser::MessageStream`] and [`crate::chat::ChatStream`].
#[derive(Debug, Default)]
pub struct ResponsesStream {
    framer: Framer,
    translator: Translator,
    accumulator: MessageAccumulator,
    queue: VecDeque<Item>,
    events: Vec<StreamEvent>,
}

impl ResponsesStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a chunk of the body.
    pub fn push(&mut self, chunk: Bytes) {
        self.framer.push(chunk);
    }

    /// The next item from the chunks pushed so far, `None` when more input is needed.
    ///
    /// # Errors
    ///
    /// A [`ProviderError`]: the server's error mid-stream (an `error` event or
    /// `response.failed`, classified as a failed response would be), an event that is not
    /// JSON, or an event over the framer's limit.
    pub fn next_item(&mut self) -> Result<Option<Item>, ProviderError> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Ok(Some(item));
            }
            let Some(sse) = self
                .framer
                .next_event()
                .map_err(|error| ProviderError::new(ErrorKind::Parse, error.to_string()))?
            else {
                return Ok(None);
            };
            let not_an_event = |error: serde_json::Error| {
                ProviderError::new(
                    ErrorKind::Parse,
                    format!("an event that is not a Responses API event: {error}"),
                )
            };
            let tag: Tag<'_> = serde_json::from_slice(sse.data()).map_err(not_an_event)?;
            if tag.kind == "error" {
                // `{"code", "message"}` as the SDK models it, or nested in `error` as
                // OpenAI sends it; codes may be numbers (proxies).
                let value: Value = serde_json::from_slice(sse.data()).map_err(not_an_event)?;
                let error = value
                    .get("error")
                    .filter(|error| error.is_object())
                    .cloned()
                    .unwrap_or(value);
                return Err(mid_stream(&error));
            }
            if !HANDLED.contains(&tag.kind.as_ref()) {
                continue;
            }
            let event: Event<'_> = serde_json::from_slice(sse.data()).map_err(not_an_event)?;
            self.translator.event(&event, &mut self.events)?;
            crate::chat::accumulate(&mut self.events, &mut self.accumulator, &mut self.queue)?;
        }
    }

    /// Ends the stream: one that ended before `response.completed` (or `.incomplete`) is
    /// broken.
    ///
    /// # Errors
    ///
    /// As [`ResponsesStream::next_item`], or [`ErrorKind::StreamBroken`] for a stream cut
    /// short.
    pub fn finish(mut self) -> Result<Option<FinalMessage>, ProviderError> {
        while self.next_item()?.is_some() {}
        self.accumulator.finish().map_err(|error| {
            ProviderError::new(
                ErrorKind::StreamBroken,
                format!("the stream ended early: {error}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(body: &str) -> Result<Vec<Item>, ProviderError> {
        let mut stream = ResponsesStream::new();
        stream.push(Bytes::from(body.to_owned()));
        let mut items = Vec::new();
        while let Some(item) = stream.next_item()? {
            items.push(item);
        }
        Ok(items)
    }

    fn frame(event: &Value) -> String {
        format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or_default()
        )
    }

    /// The Messages API's web search tool becomes the Responses API's, and its
    /// `web_search_call` comes back as the Messages API's server tool blocks, counted.
    #[test]
    fn a_web_search_goes_out_and_comes_back_as_the_messages_api_has_it() {
        let request: CreateMessageRequest = serde_json::from_value(json!({
            "model": "gpt-5",
            "max_tokens": 1000,
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8,
                       "allowed_domains": ["docs.rs"]}],
            "tool_choice": {"type": "tool", "name": "web_search"},
            "messages": [{"role": "user", "content": "Search the web for: serde"}],
        }))
        .unwrap_or_else(|error| panic!("{error}"));
        let body = responses_request(&request);
        assert_eq!(
            body["tools"],
            json!([{"type": "web_search", "filters": {"allowed_domains": ["docs.rs"]}}])
        );
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(
            body["include"],
            json!([
                "reasoning.encrypted_content",
                "web_search_call.action.sources"
            ])
        );

        let events = [
            json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}}),
            json!({"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "ws_1", "type": "web_search_call", "status": "completed",
                "action": {"type": "search", "query": "serde", "sources": [{"type": "url", "url": "https://docs.rs/serde"}]}}}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message"}}),
            json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Serde serializes."}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "msg_1", "type": "message"}}),
            json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {"input_tokens": 50, "output_tokens": 9}}}),
        ];
        let body: String = events.iter().map(frame).collect();
        let items = items(&body).unwrap_or_else(|error| panic!("{error}"));
        let Some(Item::MessageComplete(done)) = items.last() else {
            panic!("{items:?}");
        };
        let message = &done.message;
        let blocks = serde_json::to_value(&message.content).unwrap_or_default();
        assert_eq!(
            blocks,
            json!([
                {"type": "server_tool_use", "id": "ws_1", "name": "web_search", "input": {"query": "serde"}},
                {"type": "web_search_tool_result", "tool_use_id": "ws_1", "content": [
                    {"type": "web_search_result", "url": "https://docs.rs/serde", "title": ""}
                ]},
                {"type": "text", "text": "Serde serializes."},
            ])
        );
        assert_eq!(message.stop_reason, Some(StopReason::EndTurn));
        assert_eq!(message.usage.web_search_requests(), 1);
    }

    #[test]
    fn reasoning_text_and_a_call_become_three_blocks_and_the_call_completes_early() {
        let events = [
            json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "Plan."}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 1, "delta": "More."}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAA"}}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message"}}),
            json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Reading."}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "msg_1", "type": "message"}}),
            json!({"type": "response.output_item.added", "output_index": 2, "item": {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "Read", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"file_path\":"}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "\"a\"}"}),
            json!({"type": "response.function_call_arguments.done", "output_index": 2, "arguments": "{\"file_path\":\"a\"}"}),
            json!({"type": "response.output_item.done", "output_index": 2, "item": {"id": "fc_1", "type": "function_call", "call_id": "call_a", "name": "Read", "arguments": "{\"file_path\":\"a\"}"}}),
            json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 7}}}),
        ];
        let body: String = events.iter().map(frame).collect();
        let items = items(&body).unwrap_or_else(|error| panic!("{error}"));
        let call_done = items
            .iter()
            .position(|item| matches!(item, Item::BlockComplete(block) if block.index == 2));
        let message_done = items
            .iter()
            .position(|item| matches!(item, Item::MessageComplete(_)));
        assert!(call_done < message_done, "{items:?}");
        let Some(Item::MessageComplete(done)) = items.last() else {
            panic!("{items:?}");
        };
        let message = &done.message;
        assert_eq!(message.id.as_str(), "resp_1");
        assert_eq!(message.model, "gpt-5");
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(message.usage.input_tokens, 40);
        assert_eq!(message.usage.cache_read_input_tokens, Some(60));
        assert_eq!(message.usage.output_tokens, 7);
        let ContentBlock::Thinking(thinking) = &message.content[0] else {
            panic!("{message:?}");
        };
        assert_eq!(thinking.thinking, "Plan.\n\nMore.");
        assert_eq!(thinking.signature, "rs_1 gAAA");
        assert_eq!(message.text(), "Reading.");
        let call = message.content[2]
            .as_tool_use()
            .unwrap_or_else(|| panic!("{message:?}"));
        assert_eq!((call.id.as_str(), call.name.as_str()), ("call_a", "Read"));
        assert_eq!(call.input, json!({"file_path": "a"}));
    }

    #[test]
    fn incomplete_is_max_tokens_and_errors_are_classified() {
        let body: String = [
            json!({"type": "response.created", "response": {"id": "r", "model": "m"}}),
            json!({"type": "response.output_text.delta", "output_index": 0, "delta": "cut"}),
            json!({"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}}),
        ]
        .iter()
        .map(frame)
        .collect();
        let got = items(&body).unwrap_or_else(|error| panic!("{error}"));
        let Some(Item::MessageComplete(done)) = got.last() else {
            panic!("{got:?}");
        };
        assert_eq!(done.message.stop_reason, Some(StopReason::MaxTokens));
        assert_eq!(done.message.text(), "cut");
        let error = items(&frame(
            &json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}),
        ));
        assert_eq!(
            error.err().map(|error| error.kind),
            Some(ErrorKind::RateLimited)
        );
        let failed = items(&frame(
            &json!({"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}}),
        ));
        assert_eq!(
            failed.err().map(|error| error.kind),
            Some(ErrorKind::Server)
        );
        // A stream cut before its end is broken.
        let mut stream = ResponsesStream::new();
        stream.push(Bytes::from(frame(
            &json!({"type": "response.output_text.delta", "output_index": 0, "delta": "x"}),
        )));
        assert_eq!(
            stream.finish().err().map(|error| error.kind),
            Some(ErrorKind::StreamBroken)
        );
    }

    /// Attacks as a hostile or careless server: argument deltas for a call never added, a
    /// call without an id, a text delta in the middle of a call's arguments, a nested error
    /// event, an unknown event with odd field types.
    #[test]
    fn a_careless_server_cannot_make_a_nameless_call_or_cut_one_short() {
        let body: String = [
            json!({"type": "response.created", "response": {"id": "r", "model": "m"}}),
            // Arguments for an item never added: dropped, no call is made up.
            json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{\"command\":\"rm -rf /\"}"}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "call_id": "", "name": "Bash"}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"command\":"}),
            // A text delta of another item while the call streams: dropped, the call goes on.
            json!({"type": "response.output_text.delta", "output_index": 2, "delta": "noise"}),
            json!({"type": "response.some_future_event", "delta": {"object": true}, "output_index": -1}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "\"ls\"}"}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call"}}),
            json!({"type": "response.completed", "response": {}}),
        ]
        .iter()
        .map(frame)
        .collect();
        let got = items(&body).unwrap_or_else(|error| panic!("{error}"));
        let Some(Item::MessageComplete(done)) = got.last() else {
            panic!("{got:?}");
        };
        let calls: Vec<&protocol::ToolUseBlock> = done
            .message
            .content
            .iter()
            .filter_map(ContentBlock::as_tool_use)
            .collect();
        assert_eq!(calls.len(), 1, "{:?}", done.message);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_1", "Bash")
        );
        assert_eq!(calls[0].input, json!({"command": "ls"}));
        assert_eq!(done.message.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(done.message.text(), "");
        // OpenAI's nested error shape, and a proxy's numeric code.
        let nested = items(&frame(
            &json!({"type": "error", "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window"}}),
        ));
        let nested = nested.err();
        assert_eq!(
            nested.as_ref().map(|error| error.kind),
            Some(ErrorKind::PromptTooLong)
        );
        assert!(nested.is_some_and(|error| error.message.contains("Your input exceeds")),);
        let numeric = items(&frame(
            &json!({"type": "error", "code": 429, "message": "slow down"}),
        ));
        assert_eq!(
            numeric.err().map(|error| error.kind),
            Some(ErrorKind::RateLimited)
        );
    }

    #[test]
    fn a_request_becomes_input_items() {
        let request: CreateMessageRequest = serde_json::from_value(json!({
            "model": "gpt-5",
            "max_tokens": 1000,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Read", "description": "reads", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "rs_9 gAAA"},
                    {"type": "thinking", "thinking": "not ours", "signature": "EqQBCkYI"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "call_1", "name": "Read", "input": {"file_path": "a"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "one", "is_error": true},
                    {"type": "text", "text": "go on"},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
                ]},
            ],
        }))
        .unwrap_or_else(|error| panic!("{error}"));
        let body = responses_request(&request);
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(body["store"], false);
        assert_eq!(body["max_output_tokens"], 1000);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "name": "Read", "description": "reads", "parameters": {"type": "object"}, "strict": false})
        );
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
                {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "hmm"}], "encrypted_content": "gAAA"},
                {"role": "assistant", "content": "Reading."},
                {"type": "function_call", "call_id": "call_1", "name": "Read", "arguments": "{\"file_path\":\"a\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "Error: one"},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "go on"},
                    {"type": "input_text", "text": crate::chat::DOCUMENT_NOTE},
                ]},
            ])
        );
    }
}
