//! What the server answers: scripted turns, raw bodies, errors, and faults.

use std::collections::VecDeque;
use std::time::Duration;

use serde_json::{Value, json};

/// One content block of a scripted turn.
#[derive(Clone, Debug, PartialEq)]
enum Block {
    Text(String),
    Thinking(String, String),
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

/// A model response described by its blocks; rendered as an SSE stream or a JSON message.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    id: String,
    model: String,
    blocks: Vec<Block>,
    stop_reason: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    /// The prompt cache's share of the input, when simulated ([`Script::simulate_cache`]).
    cache: Option<crate::cache::CacheUsage>,
}

impl Default for Turn {
    fn default() -> Self {
        Self::new()
    }
}

impl Turn {
    /// An empty turn (stop reason decided by its blocks unless set).
    pub fn new() -> Self {
        Self {
            id: "msg_testkit".into(),
            model: "claude-test".into(),
            blocks: Vec::new(),
            stop_reason: None,
            input_tokens: 100,
            output_tokens: 20,
            cache: None,
        }
    }

    /// Sets the message id.
    pub fn id(mut self, id: &str) -> Self {
        self.id = id.into();
        self
    }

    /// Adds a text block.
    pub fn text(mut self, text: &str) -> Self {
        self.blocks.push(Block::Text(text.into()));
        self
    }

    /// Adds a thinking block with its signature.
    pub fn thinking(mut self, thinking: &str, signature: &str) -> Self {
        self.blocks
            .push(Block::Thinking(thinking.into(), signature.into()));
        self
    }

    /// Adds a redacted_thinking block with its encrypted `data` (it comes whole, in its
    /// content_block_start).
    pub fn redacted_thinking(mut self, data: &str) -> Self {
        self.blocks.push(Block::Redacted(data.into()));
        self
    }

    /// Adds a tool_use block; its input is streamed in several input_json_delta fragments.
    pub fn tool_use(mut self, id: &str, name: &str, input: Value) -> Self {
        self.blocks.push(Block::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        });
        self
    }

    /// Sets the stop reason (default: `tool_use` when the turn has a tool_use, else
    /// `end_turn`).
    pub fn stop(mut self, reason: &str) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Sets the usage (input and output tokens).
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    fn stop_reason(&self) -> String {
        self.stop_reason.clone().unwrap_or_else(|| {
            if self
                .blocks
                .iter()
                .any(|block| matches!(block, Block::ToolUse { .. }))
            {
                "tool_use".into()
            } else {
                "end_turn".into()
            }
        })
    }

    fn block_json(block: &Block) -> Value {
        match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Thinking(thinking, signature) => {
                json!({"type": "thinking", "thinking": thinking, "signature": signature})
            }
            Block::Redacted(data) => json!({"type": "redacted_thinking", "data": data}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }

    /// The final message as the API returns it to a non-streaming request.
    pub fn message_json(&self) -> Value {
        json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": self.blocks.iter().map(Self::block_json).collect::<Vec<_>>(),
            "stop_reason": self.stop_reason(), "stop_sequence": null,
            "usage": self.usage_json(self.output_tokens)
        })
    }

    /// The Messages API `usage` object, with the cache's split when simulated.
    fn usage_json(&self, output_tokens: u64) -> Value {
        let mut usage = json!({"input_tokens": self.input_tokens, "output_tokens": output_tokens});
        if let Some(cache) = self.cache {
            usage["input_tokens"] = json!(cache.input_tokens);
            usage["cache_creation_input_tokens"] = json!(cache.cache_creation_input_tokens);
            usage["cache_read_input_tokens"] = json!(cache.cache_read_input_tokens);
        }
        usage
    }

    /// The stream events, in order, as JSON values.
    pub fn events(&self) -> Vec<Value> {
        let mut events = vec![json!({"type": "message_start", "message": {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": self.usage_json(1)}})];
        for (index, block) in self.blocks.iter().enumerate() {
            let delta = |delta: Value| json!({"type": "content_block_delta", "index": index, "delta": delta});
            match block {
                Block::Text(text) => {
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}));
                    for piece in split_chars(text, 3) {
                        events.push(delta(json!({"type": "text_delta", "text": piece})));
                    }
                }
                Block::Thinking(thinking, signature) => {
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}));
                    for piece in split_chars(thinking, 2) {
                        events.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                    }
                    events.push(delta(
                        json!({"type": "signature_delta", "signature": signature}),
                    ));
                }
                Block::Redacted(data) => {
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "redacted_thinking", "data": data}}));
                }
                Block::ToolUse { id, name, input } => {
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": ""}),
                    ));
                    for piece in split_chars(&input.to_string(), 3) {
                        events.push(delta(
                            json!({"type": "input_json_delta", "partial_json": piece}),
                        ));
                    }
                }
            }
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events.push(json!({"type": "message_delta", "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null}, "usage": {"output_tokens": self.output_tokens}}));
        events.push(json!({"type": "message_stop"}));
        events
    }

    /// The turn as an OpenAI-compatible Chat Completions stream: `chat.completion.chunk`s
    /// (a role chunk; thinking as `reasoning_content` deltas; text in pieces; each tool call
    /// as a chunk with its `index`, `id` and name, then its arguments in pieces; the
    /// `finish_reason`; a usage chunk with empty `choices`), then `data: [DONE]`.
    pub fn chat_sse(&self) -> Vec<u8> {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": self.id, "object": "chat.completion.chunk", "created": 1_700_000_000,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        };
        let mut chunks = vec![chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        )];
        let mut calls = 0;
        for block in &self.blocks {
            match block {
                Block::Text(text) => {
                    for piece in split_chars(text, 3) {
                        chunks.push(chunk(json!({"content": piece}), Value::Null));
                    }
                }
                Block::Thinking(thinking, _) => {
                    for piece in split_chars(thinking, 2) {
                        chunks.push(chunk(json!({"reasoning_content": piece}), Value::Null));
                    }
                }
                // Chat Completions has no encrypted reasoning.
                Block::Redacted(_) => {}
                Block::ToolUse { id, name, input } => {
                    chunks.push(chunk(
                        json!({"tool_calls": [{"index": calls, "id": id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}),
                        Value::Null,
                    ));
                    for piece in split_chars(&input.to_string(), 3) {
                        chunks.push(chunk(
                            json!({"tool_calls": [{"index": calls, "function": {"arguments": piece}}]}),
                            Value::Null,
                        ));
                    }
                    calls += 1;
                }
            }
        }
        let finish = match self.stop_reason().as_str() {
            "tool_use" => "tool_calls",
            "max_tokens" => "length",
            "refusal" => "content_filter",
            _ => "stop",
        };
        chunks.push(chunk(json!({}), json!(finish)));
        chunks.push(
            json!({"id": self.id, "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": self.model, "choices": [],
            "usage": {"prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
                "prompt_tokens_details": {"cached_tokens": 0}}}),
        );
        let mut body = Vec::new();
        for chunk in chunks {
            body.extend(format!("data: {chunk}\n\n").into_bytes());
        }
        body.extend(b"data: [DONE]\n\n");
        body
    }

    /// The turn as an OpenAI Responses API stream, in the shapes of the `openai` SDK's
    /// event models: `response.created`, `response.in_progress`; per block an output item
    /// (`output_item.added`, its deltas, `output_item.done`): a thinking block as a
    /// `reasoning` item (its text as `reasoning_summary_text.delta`s, its signature as the
    /// done item's `encrypted_content`), text as a `message` item (`content_part.added`,
    /// `output_text.delta`s, `output_text.done`, `content_part.done`), a tool_use as a
    /// `function_call` item (`function_call_arguments.delta`s and `.done`); then
    /// `response.completed` with the whole output and usage, or `response.incomplete` with
    /// `incomplete_details.reason` `max_output_tokens` for a `max_tokens` stop.
    pub fn responses_sse(&self) -> Vec<u8> {
        let mut events: Vec<Value> = Vec::new();
        let mut output: Vec<Value> = Vec::new();
        let response = |status: &str, output: &[Value], usage: Value, incomplete: Value| {
            json!({"id": format!("resp_{}", self.id), "object": "response", "created_at": 1_700_000_000,
                "status": status, "model": self.model, "output": output,
                "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
                "incomplete_details": incomplete, "usage": usage})
        };
        events.push(json!({"type": "response.created", "response": response("in_progress", &[], Value::Null, Value::Null)}));
        events.push(json!({"type": "response.in_progress", "response": response("in_progress", &[], Value::Null, Value::Null)}));
        for (index, block) in self.blocks.iter().enumerate() {
            // OpenAI's id prefixes: `rs_` reasoning, `msg_` message, `fc_` function call.
            let prefix = match block {
                Block::Thinking(..) | Block::Redacted(_) => "rs",
                Block::Text(_) => "msg",
                Block::ToolUse { .. } => "fc",
            };
            let item_id = format!("{prefix}_{index}");
            match block {
                Block::Thinking(thinking, signature) => {
                    let added = json!({"id": item_id, "type": "reasoning", "summary": []});
                    events.push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                    events.push(json!({"type": "response.reasoning_summary_part.added", "item_id": item_id,
                        "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}));
                    for piece in split_chars(thinking, 2) {
                        events.push(json!({"type": "response.reasoning_summary_text.delta", "item_id": item_id,
                            "output_index": index, "summary_index": 0, "delta": piece}));
                    }
                    events.push(
                        json!({"type": "response.reasoning_summary_text.done", "item_id": item_id,
                        "output_index": index, "summary_index": 0, "text": thinking}),
                    );
                    events.push(json!({"type": "response.reasoning_summary_part.done", "item_id": item_id,
                        "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": thinking}}));
                    let done = json!({"id": item_id, "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": thinking}],
                        "encrypted_content": signature, "status": "completed"});
                    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
                    output.push(done);
                }
                Block::Redacted(data) => {
                    let done = json!({"id": item_id, "type": "reasoning", "summary": [],
                        "encrypted_content": data, "status": "completed"});
                    events.push(json!({"type": "response.output_item.added", "output_index": index, "item": {"id": item_id, "type": "reasoning", "summary": []}}));
                    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
                    output.push(done);
                }
                Block::Text(text) => {
                    let added = json!({"id": item_id, "type": "message", "role": "assistant",
                        "status": "in_progress", "content": []});
                    events.push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                    events.push(json!({"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}));
                    for piece in split_chars(text, 3) {
                        events.push(json!({"type": "response.output_text.delta", "item_id": item_id,
                            "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}));
                    }
                    events.push(
                        json!({"type": "response.output_text.done", "item_id": item_id,
                        "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                    );
                    let part = json!({"type": "output_text", "text": text, "annotations": []});
                    events.push(json!({"type": "response.content_part.done", "item_id": item_id, "output_index": index,
                        "content_index": 0, "part": part}));
                    let done = json!({"id": item_id, "type": "message", "role": "assistant",
                        "status": "completed", "content": [part]});
                    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
                    output.push(done);
                }
                Block::ToolUse { id, name, input } => {
                    let arguments = input.to_string();
                    let added = json!({"id": item_id, "type": "function_call", "call_id": id, "name": name,
                        "arguments": "", "status": "in_progress"});
                    events.push(json!({"type": "response.output_item.added", "output_index": index, "item": added}));
                    for piece in split_chars(&arguments, 3) {
                        events.push(json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                            "output_index": index, "delta": piece}));
                    }
                    events.push(
                        json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                        "output_index": index, "arguments": arguments}),
                    );
                    let done = json!({"id": item_id, "type": "function_call", "call_id": id, "name": name,
                        "arguments": arguments, "status": "completed"});
                    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": done}));
                    output.push(done);
                }
            }
        }
        let usage = json!({"input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": self.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + self.output_tokens});
        if self.stop_reason() == "max_tokens" {
            events.push(json!({"type": "response.incomplete", "response": response("incomplete", &output, usage,
                json!({"reason": "max_output_tokens"}))}));
        } else {
            events.push(json!({"type": "response.completed", "response": response("completed", &output, usage, Value::Null)}));
        }
        let mut body = Vec::new();
        for (sequence, mut event) in events.into_iter().enumerate() {
            event["sequence_number"] = json!(sequence);
            body.extend(sse_frame(&event));
        }
        body
    }

    /// The SSE body (`event:` + `data:` lines, blank-line terminated).
    pub fn sse(&self) -> Vec<u8> {
        let mut body = Vec::new();
        for event in self.events() {
            body.extend(sse_frame(&event));
        }
        body
    }
}

/// One SSE frame for `event`: `event: TYPE\ndata: JSON\n\n`.
pub fn sse_frame(event: &Value) -> Vec<u8> {
    let ty = event
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    format!("event: {ty}\ndata: {event}\n\n").into_bytes()
}

/// Splits `text` at char boundaries into about `parts` pieces of at most 32 chars (the size of
/// real deltas), at least one piece.
fn split_chars(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(parts.max(1)).min(32);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// What to send as the body.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ReplyBody {
    /// A streamed turn: SSE for streaming requests, the JSON message otherwise.
    Turn(Turn),
    /// Raw bytes with the given content type (a captured `.sse` file, an error body).
    Raw {
        /// The `content-type` header.
        content_type: String,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// `ping` events every `interval` for `duration`, then the turn.
    Pinging {
        /// Time between pings.
        interval: Duration,
        /// How long to ping.
        duration: Duration,
        /// The turn sent after the pings.
        turn: Turn,
    },
    /// A hostile server's answer, generated lazily (it never ends, or only after gigabytes).
    Endless(Endless),
}

/// What a hostile server sends instead of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Endless {
    /// Reads the request and never sends the response headers.
    NoHeaders,
    /// `message_start`, then a `ping` every interval, forever.
    Pings(Duration),
    /// `message_start` and a text block, then 1 KiB text deltas as fast as the client reads,
    /// forever.
    Text,
    /// `message_start` and a text block, then a delta every interval, forever: empty
    /// (`true`: no progress at all) or of one character (steady, tiny progress).
    Trickle {
        /// Time between deltas.
        interval: Duration,
        /// Whether the deltas are empty.
        empty: bool,
    },
    /// An `application/json` message (whatever the request's `stream` says) whose one text
    /// block is `bytes` long, written 64 KiB at a time.
    JsonBody {
        /// Length of the text.
        bytes: u64,
    },
}

/// Faults applied to one reply's body.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Chunk sizes in bytes, cycled (0 sends an empty frame). `None`: one chunk.
    pub chunk_sizes: Option<Vec<usize>>,
    /// Stop sending after this many body bytes and stay silent with the connection open.
    pub stall_after: Option<usize>,
    /// Reset the connection after this many body bytes.
    pub reset_after: Option<usize>,
    /// Wait this long between chunks.
    pub chunk_delay: Option<Duration>,
    /// Send the body in equal chunks 10 ms apart so that it takes about this long (a model
    /// streaming at a steady pace); replaces `chunk_sizes` and `chunk_delay`.
    pub spread_over: Option<Duration>,
}

/// One scripted answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: ReplyBody,
    /// Faults.
    pub faults: Faults,
}

impl Reply {
    /// A 200 answer with `turn`.
    pub fn turn(turn: Turn) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: ReplyBody::Turn(turn),
            faults: Faults::default(),
        }
    }

    /// A 200 `text/event-stream` answer with raw SSE bytes (a captured stream).
    pub fn raw_sse(bytes: Vec<u8>) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: ReplyBody::Raw {
                content_type: "text/event-stream; charset=utf-8".into(),
                bytes,
            },
            faults: Faults::default(),
        }
    }

    /// An API error: `{"type":"error","error":{"type":KIND,"message":MESSAGE},"request_id":…}`.
    pub fn error(status: u16, kind: &str, message: &str) -> Self {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_testkit"});
        Self {
            status,
            headers: vec![("request-id".into(), "req_testkit".into())],
            body: ReplyBody::Raw {
                content_type: "application/json".into(),
                bytes: body.to_string().into_bytes(),
            },
            faults: Faults::default(),
        }
    }

    /// An OpenAI-compatible server's error: `{"error":{"message":MESSAGE,"type":KIND,
    /// "code":CODE}}` with `status`.
    pub fn openai_error(status: u16, kind: &str, code: &str, message: &str) -> Self {
        let body =
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
        Self {
            status,
            headers: Vec::new(),
            body: ReplyBody::Raw {
                content_type: "application/json".into(),
                bytes: body.to_string().into_bytes(),
            },
            faults: Faults::default(),
        }
    }

    /// A 200 stream that fails with an `error` event after the message started.
    pub fn error_event(kind: &str, message: &str) -> Self {
        let start = Turn::new().events().remove(0);
        let mut bytes = sse_frame(&start);
        bytes.extend(sse_frame(
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        ));
        Self::raw_sse(bytes)
    }

    /// Pings every `interval` for `duration`, then `turn`.
    pub fn pinging(interval: Duration, duration: Duration, turn: Turn) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: ReplyBody::Pinging {
                interval,
                duration,
                turn,
            },
            faults: Faults::default(),
        }
    }

    /// A hostile server's answer (see [`Endless`]).
    pub fn endless(endless: Endless) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: ReplyBody::Endless(endless),
            faults: Faults::default(),
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the faults.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }
}

/// The replies a server gives, in order; when exhausted, the last one repeats (or, for an
/// empty script, a 500).
#[derive(Clone, Debug, Default)]
pub struct Script {
    pub(crate) replies: VecDeque<Reply>,
    pub(crate) last: Option<Reply>,
    /// Report each turn's `input_tokens` as the request's size (bytes / 4) instead of the
    /// turn's own figure, as the API counts what it was sent.
    pub(crate) usage_from_request: bool,
    /// The simulated prompt cache ([`Script::simulate_cache`]), and the usage it billed for
    /// each Messages request, in order.
    pub(crate) cache: Option<(crate::cache::PromptCache, Vec<crate::cache::CacheUsage>)>,
    /// Replies for requests whose first or last message holds a marker (a subagent's
    /// conversation), each in order, before the main list.
    pub(crate) routes: Vec<(String, VecDeque<Reply>)>,
}

/// A JSON script that does not describe turns, with the turn (0-based) and field at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// Not JSON, or not a list.
    #[error("a script is a JSON list of turns: {0}")]
    NotAList(String),
    /// A turn has a field of the wrong type or an unknown field.
    #[error("turn {turn}: {problem}")]
    BadTurn {
        /// 0-based position in the list.
        turn: usize,
        /// What is wrong.
        problem: String,
    },
}

impl Script {
    /// A script of `replies`.
    pub fn new(replies: Vec<Reply>) -> Self {
        Self {
            replies: replies.into(),
            last: None,
            usage_from_request: false,
            cache: None,
            routes: Vec::new(),
        }
    }

    /// Answers the requests whose first or last message contains `marker` with `replies`, in
    /// order
    /// (once they are used up, such requests take the main list). Several conversations
    /// that run at once (subagents) each get their own replies this way, whatever order
    /// their requests arrive in.
    pub fn route(mut self, marker: &str, replies: Vec<Reply>) -> Self {
        self.routes.push((marker.to_owned(), replies.into()));
        self
    }

    /// Reports every turn's `input_tokens` as the size of the request it answers (bytes /
    /// 4), so an agent's context accounting sees its history grow as with the real API.
    pub fn usage_from_request(mut self) -> Self {
        self.usage_from_request = true;
        self
    }

    /// Splits every turn's input the way the API's prompt cache would bill the request it
    /// answers (see [`crate::cache`]): `input_tokens`, `cache_creation_input_tokens` and
    /// `cache_read_input_tokens` from the request's breakpoints and what earlier requests
    /// cached, adding up to the request's size (bytes / 4). Implies
    /// [`Script::usage_from_request`].
    pub fn simulate_cache(mut self) -> Self {
        self.usage_from_request = true;
        self.cache = Some((crate::cache::PromptCache::new(), Vec::new()));
        self
    }

    /// The usage the simulated cache billed for each Messages request so far, in order
    /// (empty unless [`Script::simulate_cache`]).
    pub fn billed(&self) -> &[crate::cache::CacheUsage] {
        self.cache
            .as_ref()
            .map_or(&[], |(_, billed)| billed.as_slice())
    }

    /// A script from its JSON form, the one `testkit serve FILE.json` reads: a list of turns
    /// `{"text"?: string, "tool_uses"?: [{"id": string, "name": string, "input": object}],
    /// "stop_reason"?: string, "stream_ms"?: number}`, each rendered like [`Turn`] (and with
    /// `stream_ms`, sent at a steady pace over that many milliseconds: [`Faults::spread_over`]);
    /// or an object `{"turns": [...],
    /// "routes": [{"marker": "ALPHA:", "turns": [...]}]}` whose routes answer the requests
    /// whose first or last message holds the marker ([`Script::route`]: subagents).
    ///
    /// # Errors
    ///
    /// [`ScriptError`] naming the turn and the field, for anything else (unknown fields
    /// included: a typo must not silently change the script).
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| ScriptError::NotAList(error.to_string()))?;
        // The object form: the main list and the routes ([`Script::route`]).
        if let Value::Object(object) = &value {
            let turns = object
                .get("turns")
                .cloned()
                .unwrap_or(Value::Array(Vec::new()));
            let mut script = Self::new(Self::turns(&turns, "")?);
            for (index, route) in object
                .get("routes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(marker) = route.get("marker").and_then(Value::as_str) else {
                    return Err(ScriptError::NotAList(format!(
                        "routes[{index}].marker must be a string"
                    )));
                };
                let turns = route
                    .get("turns")
                    .cloned()
                    .unwrap_or(Value::Array(Vec::new()));
                let replies = Self::turns(&turns, &format!("routes[{index}]."))?;
                script = script.route(marker, replies);
            }
            if let Some(key) = object
                .keys()
                .find(|key| !matches!(key.as_str(), "turns" | "routes"))
            {
                return Err(ScriptError::NotAList(format!(
                    "unknown key {key:?} (known: turns, routes)"
                )));
            }
            return Ok(script);
        }
        Ok(Self::new(Self::turns(&value, "")?))
    }

    /// The replies of a JSON list of turns; `at` prefixes the place in error messages.
    fn turns(value: &Value, at: &str) -> Result<Vec<Reply>, ScriptError> {
        let Some(turns) = value.as_array() else {
            return Err(ScriptError::NotAList(format!(
                "{at}turns: expected a list of turns"
            )));
        };
        let mut replies = Vec::with_capacity(turns.len());
        for (index, spec) in turns.iter().enumerate() {
            let bad = |problem: String| ScriptError::BadTurn {
                turn: index,
                problem,
            };
            let Some(fields) = spec.as_object() else {
                return Err(bad("not an object".into()));
            };
            let mut turn = Turn::new();
            let mut spread = None;
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("text", Value::String(text)) => turn = turn.text(text),
                    ("stop_reason", Value::String(reason)) => turn = turn.stop(reason),
                    ("tool_uses", Value::Array(tools)) => {
                        for (position, tool) in tools.iter().enumerate() {
                            let field = |name: &str| {
                                tool.get(name).and_then(Value::as_str).ok_or_else(|| {
                                    bad(format!("tool_uses[{position}].{name} must be a string"))
                                })
                            };
                            let input = tool.get("input").filter(|input| input.is_object());
                            let Some(input) = input else {
                                return Err(bad(format!(
                                    "tool_uses[{position}].input must be an object"
                                )));
                            };
                            turn = turn.tool_use(field("id")?, field("name")?, input.clone());
                        }
                    }
                    ("stream_ms", Value::Number(ms)) => {
                        let Some(ms) = ms.as_u64() else {
                            return Err(bad("stream_ms must be a whole number".into()));
                        };
                        spread = Some(Duration::from_millis(ms));
                    }
                    ("text" | "stop_reason" | "stream_ms", _) => {
                        return Err(bad(format!("{key} must be a string")));
                    }
                    ("tool_uses", _) => return Err(bad("tool_uses must be a list".into())),
                    (other, _) => {
                        return Err(bad(format!(
                            "unknown field {other:?} (known: text, tool_uses, stop_reason, stream_ms)"
                        )));
                    }
                }
            }
            let mut reply = Reply::turn(turn);
            reply.faults.spread_over = spread;
            replies.push(reply);
        }
        Ok(replies)
    }

    /// The next reply, to a request of `request_bytes` bytes whose first and last messages
    /// (as JSON text) are in `first_message`.
    pub(crate) fn next(
        &mut self,
        request_bytes: usize,
        first_message: &str,
        body: Option<&Value>,
    ) -> Reply {
        let routed = self
            .routes
            .iter_mut()
            .find(|(marker, replies)| {
                !replies.is_empty() && first_message.contains(marker.as_str())
            })
            .and_then(|(_, replies)| replies.pop_front());
        let mut reply = match routed.or_else(|| self.replies.pop_front()) {
            Some(reply) => {
                self.last = Some(reply.clone());
                reply
            }
            None => self
                .last
                .clone()
                .unwrap_or_else(|| Reply::error(500, "api_error", "the testkit script is empty")),
        };
        if self.usage_from_request
            && let ReplyBody::Turn(turn) = &mut reply.body
        {
            turn.input_tokens = request_bytes as u64 / 4;
            if let (Some((cache, billed)), Some(body)) = (&mut self.cache, body) {
                let usage = cache.bill(body, request_bytes, std::time::Instant::now());
                billed.push(usage);
                turn.cache = Some(usage);
            }
        }
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_scripts_route_by_marker() {
        let mut script = Script::from_json(
            r#"{"turns": [{"text": "main"}],
                "routes": [{"marker": "ALPHA:", "turns": [{"text": "alpha"}]}]}"#,
        )
        .unwrap();
        let text = |reply: Reply| match reply.body {
            ReplyBody::Turn(turn) => turn.message_json()["content"][0]["text"].clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            text(script.next(0, r#"{"content":"ALPHA: go"}"#, None)),
            "alpha"
        );
        assert_eq!(text(script.next(0, r#"{"content":"hello"}"#, None)), "main");
    }

    #[test]
    fn json_scripts_are_strict() {
        let script = Script::from_json(
            r#"[{"text": "Looking.", "tool_uses": [{"id": "toolu_1", "name": "Read", "input": {"file_path": "a"}}]},
                {"text": "Done.", "stop_reason": "end_turn"}]"#,
        )
        .unwrap();
        assert_eq!(script.replies.len(), 2);
        let expected =
            Turn::new()
                .text("Looking.")
                .tool_use("toolu_1", "Read", json!({"file_path": "a"}));
        assert_eq!(script.replies[0].body, ReplyBody::Turn(expected));
        for (text, message) in [
            ("3", "a script is a JSON list of turns"),
            (
                r#"{"turn": []}"#,
                "a script is a JSON list of turns: unknown key \"turn\"",
            ),
            (
                r#"{"routes": [{"turns": []}]}"#,
                "a script is a JSON list of turns: routes[0].marker must be a string",
            ),
            ("[1]", "turn 0: not an object"),
            (r#"[{"txt": "x"}]"#, "turn 0: unknown field \"txt\""),
            (r#"[{}, {"text": 3}]"#, "turn 1: text must be a string"),
            (
                r#"[{"tool_uses": [{"id": "t", "name": "Read"}]}]"#,
                "turn 0: tool_uses[0].input must be an object",
            ),
            (
                r#"[{"tool_uses": [{"name": "Read", "input": {}}]}]"#,
                "turn 0: tool_uses[0].id must be a string",
            ),
        ] {
            let error = Script::from_json(text).unwrap_err().to_string();
            assert!(error.starts_with(message), "{text}: {error}");
        }
    }

    #[test]
    fn turn_events_are_well_formed() {
        let turn =
            Turn::new()
                .text("Hi there")
                .tool_use("toolu_1", "Read", json!({"file_path": "a.rs"}));
        let events = turn.events();
        assert_eq!(
            events.first().and_then(|e| e["type"].as_str()),
            Some("message_start")
        );
        assert_eq!(
            events.last().and_then(|e| e["type"].as_str()),
            Some("message_stop")
        );
        let fragments: String = events
            .iter()
            .filter(|e| e["delta"]["type"] == "input_json_delta")
            .filter_map(|e| e["delta"]["partial_json"].as_str())
            .collect();
        assert_eq!(fragments, r#"{"file_path":"a.rs"}"#);
        assert_eq!(turn.message_json()["stop_reason"], "tool_use");
    }
}
