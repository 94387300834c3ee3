//! OpenAI-compatible Chat Completions at the edge: a Messages API request translated into a
//! `/chat/completions` body ([`chat_request`]), and a `chat.completion.chunk` stream decoded
//! onto the Messages API's stream events ([`ChatStream`]), so the accumulator, the streaming
//! executor and the loop see the same events and completed blocks from either provider.
//!
//! The translation of the stream is a small state machine over the open block:
//!
//! - `delta.reasoning_content` / `delta.reasoning` open (or continue) a `thinking` block, and
//!   so does a `<think>...</think>` at the content's start (a model served without a
//!   reasoning parser), its tags split anywhere;
//! - `delta.content` opens (or continues) a `text` block; content sent as a list of typed
//!   parts (Mistral's Magistral) gives its `text` parts as text and its `thinking` parts as
//!   thinking;
//! - `delta.tool_calls[i]` with a new `index`, or a new `id` at the same index (servers that
//!   number every call 0, or send no index), opens a `tool_use` block (its `id` and
//!   `function.name`); an id repeated in each piece of one call continues it; an id another
//!   call of the message already had is kept as it came, so the executor runs the first call
//!   only and tells the model the repeat was not run (a server re-sending a whole call must
//!   not run it twice); `function.arguments` are `input_json_delta`s. A block is complete
//!   (`content_block_stop`) when another block opens or `finish_reason` arrives; the loop
//!   starts the calls at the stop_reason, and runs none when it is `content_filter`;
//! - `finish_reason` maps to a stop_reason (`stop` and `eos` end_turn, or tool_use after tool
//!   calls, as Ollama and Gemini's endpoint end them; `tool_calls` tool_use, `length`
//!   max_tokens, `content_filter` refusal); the `message_delta` and `message_stop` follow at
//!   `data: [DONE]` (or the end of the body), after the usage chunk OpenAI sends last;
//! - a chunk holding `error` (or an SSE `error` event) is the server failing mid-stream.
//!
//! Usage (top-level, or Groq's `x_groq.usage`) maps `prompt_tokens` minus
//! `prompt_tokens_details.cached_tokens` to `input_tokens`, the cached part to
//! `cache_read_input_tokens`, and `completion_tokens` to `output_tokens`. How each server
//! streams is tested on its own shapes (`tests/chat_servers.rs`, sources in
//! `tests/fixtures/chat-servers/PROVENANCE.md`).

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use protocol::{
    ContentBlock, ContentDelta, CreateMessageRequest, DeltaUsage, Message, MessageDelta,
    MessageParam, Role, StopReason, StreamEvent, SystemPrompt, ToolChoice, ToolResultContent,
    Usage,
};
use serde_json::{Map, Value, json};
use sse_parser::{FinalMessage, Framer, Item, MessageAccumulator, Output};

use crate::error::{ErrorKind, ProviderError};

/// The request's effort as OpenAI names it (`reasoning_effort`, the Responses API's
/// `reasoning.effort`): `low`, `medium`, `high`; `xhigh` and `max` ask for the most the
/// servers commonly take, `high`. `None`: nothing asked, the server's default.
pub(crate) fn openai_effort(request: &protocol::CreateMessageRequest) -> Option<&'static str> {
    let effort = request.output_config.as_ref()?.effort?;
    Some(match effort {
        protocol::Effort::Low => "low",
        protocol::Effort::Medium => "medium",
        protocol::Effort::High | protocol::Effort::XHigh | protocol::Effort::Max => "high",
    })
}

/// How thinking blocks of earlier turns go back to a Chat Completions server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReasoningReplay {
    /// Left out (the default: DeepSeek rejects them).
    #[default]
    None,
    /// As the assistant message's `reasoning_content` (DeepSeek, vLLM, llama.cpp).
    ReasoningContent,
    /// As the assistant message's `reasoning` (OpenRouter, Groq).
    Reasoning,
}

/// Which field carries the output limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: what OpenAI-compatible servers accept (vLLM, Ollama, llama.cpp, Groq).
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's own reasoning models require.
    MaxCompletionTokens,
}

/// Options of the Chat Completions wire format.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatOptions {
    /// How earlier thinking goes back.
    pub reasoning_replay: ReasoningReplay,
    /// Which field carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
}

/// The `/chat/completions` body for a Messages API request: the system prompt as the first
/// message, tool_use / tool_result pairs as an assistant's `tool_calls` and one `tool`
/// message per result (in order), images as `image_url` parts (data URLs), tools as
/// function tools. Cache breakpoints are dropped; thinking goes back only as
/// `options.reasoning_replay` says.
pub fn chat_request(request: &CreateMessageRequest, options: &ChatOptions) -> Value {
    chat_request_with_extras(request, options, &std::collections::HashMap::new())
}

/// [`chat_request`], each earlier tool call sent with what its server attached to it
/// (`extras`, by call id: see [`CallExtras`]).
pub fn chat_request_with_extras(
    request: &CreateMessageRequest,
    options: &ChatOptions,
    extras: &std::collections::HashMap<String, Value>,
) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
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
            messages.push(json!({"role": "system", "content": text}));
        }
    }
    for message in &request.messages {
        match message.role {
            Role::User => user_messages(message, &mut messages),
            Role::Assistant => messages.push(assistant_message(message, options, extras)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let limit = match options.max_tokens_field {
        MaxTokensField::MaxTokens => "max_tokens",
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
    };
    body.insert(limit.into(), json!(request.max_tokens));
    if let Some(effort) = openai_effort(request) {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if !request.stop_sequences.is_empty() {
        body.insert("stop".into(), json!(request.stop_sequences));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let mut function = Map::new();
                function.insert("name".into(), Value::String(tool.name.clone()));
                if let Some(description) = &tool.description {
                    function.insert("description".into(), Value::String(description.clone()));
                }
                function.insert("parameters".into(), tool.input_schema.clone());
                json!({"type": "function", "function": function})
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
            Some(ToolChoice::Tool { name, .. }) => (
                Some(json!({"type": "function", "function": {"name": name}})),
                true,
            ),
            Some(ToolChoice::None) => (Some(json!("none")), true),
        };
        if let Some(choice) = choice {
            body.insert("tool_choice".into(), choice);
        }
        body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
    }
    Value::Object(body)
}

/// An image block's source as a URL (`data:` for base64, the URL itself for `url`); the
/// Responses API's request uses it too.
pub(crate) fn image_url(source: &Value) -> Option<String> {
    match source.get("type").and_then(Value::as_str)? {
        "base64" => Some(format!(
            "data:{};base64,{}",
            source.get("media_type")?.as_str()?,
            source.get("data")?.as_str()?
        )),
        "url" => Some(source.get("url")?.as_str()?.to_owned()),
        _ => None,
    }
}

/// What stands for a document block on the OpenAI-style APIs, which take none: a model
/// told it was left out does not answer as if it had read it.
pub(crate) const DOCUMENT_NOTE: &str = "[A PDF document was attached here but not sent: this model's API takes no documents. Extract its text with a command (such as `pdftotext`) if you need it, or ask the user.]";

/// A tool result block's text as the OpenAI-style APIs take it: a text block's text, or
/// [`DOCUMENT_NOTE`] for a document (images go on separately).
pub(crate) fn result_text(block: &ContentBlock) -> Option<&str> {
    match block {
        ContentBlock::Text(text) => Some(&text.text),
        ContentBlock::Document(_) => Some(DOCUMENT_NOTE),
        _ => None,
    }
}

/// Text and image blocks as content parts (a document as [`DOCUMENT_NOTE`]).
fn parts(blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(json!({"type": "text", "text": text.text})),
            ContentBlock::Document(_) => Some(json!({"type": "text", "text": DOCUMENT_NOTE})),
            ContentBlock::Image(image) => image_url(&image.source)
                .map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
            _ => None,
        })
        .collect()
}

/// A user message: its tool results first, one `tool` message each (they must follow the
/// assistant's `tool_calls`), then the rest as one user message. A result's images, which a
/// `tool` message cannot hold, follow in a user message.
fn user_messages(message: &MessageParam, out: &mut Vec<Value>) {
    let mut images = Vec::new();
    let mut rest = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::ToolResult(result) => {
                let (text, result_images) = match &result.content {
                    ToolResultContent::Text(text) => (text.clone(), Vec::new()),
                    ToolResultContent::Blocks(blocks) => (
                        blocks
                            .iter()
                            .filter_map(result_text)
                            .collect::<Vec<_>>()
                            .join("\n"),
                        blocks
                            .iter()
                            .filter(|block| matches!(block, ContentBlock::Image(_)))
                            .cloned()
                            .collect(),
                    ),
                };
                let text = if result.is_error == Some(true) && !text.starts_with("Error") {
                    format!("Error: {text}")
                } else {
                    text
                };
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": result.tool_use_id.as_str(),
                    "content": text,
                }));
                images.extend(result_images);
            }
            other => rest.push(other.clone()),
        }
    }
    let mut content = parts(&images);
    content.extend(parts(&rest));
    if content.is_empty() {
        return;
    }
    // Plain text stays a string: the form every server accepts.
    let only_text = content.len() == 1 && content[0]["type"] == "text";
    let content = if only_text {
        content[0]["text"].clone()
    } else {
        Value::Array(content)
    };
    out.push(json!({"role": "user", "content": content}));
}

/// What servers attached to their tool calls and want sent back with them, by call id: the
/// `extra_content` of Gemini's OpenAI-compatible endpoint (its `google.thought_signature`,
/// without which a later request naming the call is refused). Kept by the client, never in
/// the history (another provider would refuse the field).
pub type CallExtras = std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Value>>>;

/// An assistant message: its text as `content`, its tool_use blocks as `tool_calls` (each
/// with the `extra_content` its server attached, from `extras`), its thinking as
/// `options.reasoning_replay` says.
fn assistant_message(
    message: &MessageParam,
    options: &ChatOptions,
    extras: &std::collections::HashMap<String, Value>,
) -> Value {
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text(block) => text.push_str(&block.text),
            ContentBlock::Thinking(block) => thinking.push_str(&block.thinking),
            ContentBlock::ToolUse(call) => {
                let mut entry = json!({
                    "id": call.id.as_str(),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.input.to_string()},
                });
                if let Some(extra) = extras.get(call.id.as_str()) {
                    entry["extra_content"] = extra.clone();
                }
                calls.push(entry);
            }
            _ => {}
        }
    }
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    out.insert(
        "content".into(),
        if text.is_empty() && !calls.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        },
    );
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if !thinking.is_empty() {
        match options.reasoning_replay {
            ReasoningReplay::None => {}
            ReasoningReplay::ReasoningContent => {
                out.insert("reasoning_content".into(), Value::String(thinking));
            }
            ReasoningReplay::Reasoning => {
                out.insert("reasoning".into(), Value::String(thinking));
            }
        }
    }
    Value::Object(out)
}

/// The error a Chat Completions server reports, in the body of a failed response or in a
/// chunk: `{"error": {"message", "type", "code"}}` (OpenAI, vLLM, Groq, OpenRouter's numeric
/// `code`), or `{"error": "text"}` (Ollama).
pub(crate) fn error_of(value: &Value, status: Option<u16>) -> Option<ProviderError> {
    let error = value.get("error")?;
    let (message, kind_name, code) = match error {
        Value::String(message) => (message.clone(), String::new(), String::new()),
        Value::Object(fields) => {
            let text = |key: &str| match fields.get(key) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Number(number)) => number.to_string(),
                _ => String::new(),
            };
            (text("message"), text("type"), text("code"))
        }
        _ => return None,
    };
    let lower = format!("{kind_name} {code} {message}").to_ascii_lowercase();
    let status = status.or_else(|| code.parse::<u16>().ok());
    let kind = if lower.contains("context_length_exceeded")
        || lower.contains("maximum context length")
        || lower.contains("context length")
        || lower.contains("prompt is too long")
    {
        ErrorKind::PromptTooLong
    } else if lower.contains("rate_limit") || status == Some(429) {
        ErrorKind::RateLimited
    } else if lower.contains("invalid_api_key") || status == Some(401) {
        ErrorKind::Authentication
    } else if lower.contains("overloaded") || status == Some(503) || status == Some(529) {
        ErrorKind::Overloaded
    } else {
        match status {
            Some(400) => ErrorKind::InvalidRequest,
            Some(403) => ErrorKind::Permission,
            Some(404) => ErrorKind::NotFound,
            Some(413) => ErrorKind::RequestTooLarge,
            Some(408 | 409 | 500..=599) | None => ErrorKind::Server,
            Some(_) => ErrorKind::Http,
        }
    };
    let label = [kind_name.as_str(), code.as_str()]
        .into_iter()
        .find(|part| !part.is_empty())
        .unwrap_or("error");
    let mut failure = ProviderError::new(
        kind,
        format!(
            "{label}: {}",
            message.chars().take(1_000).collect::<String>()
        ),
    );
    failure.status = status;
    Some(failure)
}

/// The open block of the translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    None,
    Text(usize),
    Thinking(usize),
    /// A tool call: its Chat Completions `index`, its block index.
    Tool(u64, usize),
}

/// Chunks to Messages API stream events (see the module docs).
#[derive(Debug)]
struct Translator {
    started: bool,
    open: Open,
    next_index: usize,
    stop_reason: Option<StopReason>,
    usage: Option<DeltaUsage>,
    stopped: bool,
    calls: u64,
    /// The id of the tool call open now (a call at the same `index` with another id is a
    /// new call: servers that number every call 0).
    open_id: Option<String>,
    /// The open call's id as the message has it.
    open_call: Option<String>,
    /// Where a call's `extra_content` is kept for the next requests.
    extras: Option<CallExtras>,
    /// Reasoning sent inside the content as `<think>...</think>` (see [`Think`]).
    think: Think,
}

/// Where the content stands with `<think>` tags (models served without a reasoning parser:
/// DeepSeek R1 and Qwen3 on llama.cpp, Ollama, vLLM): the content's start held until it
/// shows whether it opens with `<think>`; inside, the thinking's tail held until it shows
/// whether `</think>` is coming.
#[derive(Debug)]
enum Think {
    /// Nothing decided: the content so far (whitespace and a prefix of `<think>`).
    Undecided(String),
    /// Inside the tags: the held tail (a prefix of `</think>`).
    Inside(String),
    /// Just after `</think>`: the blank lines before the answer are dropped.
    Closed,
    /// Plain content from here on.
    Done,
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

impl Default for Translator {
    fn default() -> Self {
        Self {
            started: false,
            open: Open::None,
            next_index: 0,
            stop_reason: None,
            usage: None,
            stopped: false,
            calls: 0,
            open_id: None,
            open_call: None,
            extras: None,
            think: Think::Undecided(String::new()),
        }
    }
}

/// One `chat.completion.chunk`, borrowing from the event's bytes where the JSON allows
/// (strings without escapes); fields this decoder does not use are skipped unparsed.
#[derive(Debug, Default, serde::Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<ChunkUsage>,
    /// Groq's extension: the usage in the last chunk's `x_groq.usage`.
    #[serde(default)]
    x_groq: Option<XGroq>,
    /// A server failing mid-stream (`{"message", "code"}`, or a string).
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<ContentField<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

/// A delta's `content`: text, or (Mistral's Magistral models) a list of typed parts, a
/// thinking part holding its own list of text parts.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum ContentField<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, serde::Deserialize)]
struct ContentPart {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<Vec<ContentPart>>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ToolCallDelta<'a> {
    /// Gemini's endpoint: what it wants back with the call (see [`CallExtras`]).
    #[serde(default)]
    extra_content: Option<Value>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct XGroq {
    #[serde(default)]
    usage: Option<ChunkUsage>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ChunkUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl ChunkUsage {
    fn delta(&self) -> DeltaUsage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|details| details.cached_tokens);
        DeltaUsage {
            input_tokens: self
                .prompt_tokens
                .map(|prompt| prompt.saturating_sub(cached.unwrap_or(0))),
            cache_read_input_tokens: cached,
            output_tokens: self.completion_tokens,
            ..DeltaUsage::default()
        }
    }
}

fn stop_reason(finish: &str) -> StopReason {
    match finish {
        "stop" | "eos" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

impl Translator {
    fn start(&mut self, chunk: &Chunk<'_>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = Message {
            id: chunk.id.as_deref().unwrap_or_default().into(),
            kind: "message".into(),
            role: Role::Assistant,
            model: chunk.model.as_deref().unwrap_or_default().to_owned(),
            content: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            stop_details: None,
            usage: Usage::default(),
            extra: Map::new(),
        };
        out.push(StreamEvent::MessageStart {
            message: Box::new(message),
        });
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        match self.open {
            Open::None => {}
            Open::Text(index) | Open::Thinking(index) | Open::Tool(_, index) => {
                out.push(StreamEvent::ContentBlockStop { index });
            }
        }
        self.open = Open::None;
    }

    fn open(&mut self, block: ContentBlock, open: fn(usize) -> Open, out: &mut Vec<StreamEvent>) {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = open(index);
        out.push(StreamEvent::ContentBlockStart {
            index,
            content_block: Box::new(block),
        });
    }

    fn chunk(&mut self, chunk: &Chunk<'_>, out: &mut Vec<StreamEvent>) {
        self.start(chunk, out);
        let groq = chunk.x_groq.as_ref().and_then(|groq| groq.usage.as_ref());
        if let Some(usage) = chunk.usage.as_ref().or(groq) {
            self.usage = Some(usage.delta());
        }
        let Some(choice) = chunk.choices.as_ref().and_then(|choices| choices.first()) else {
            return;
        };
        if let Some(delta) = &choice.delta {
            self.delta(delta, out);
        }
        if let Some(finish) = &choice.finish_reason {
            self.flush_think(out);
            self.close(out);
            // Servers that say `stop` after calling tools (Ollama, Gemini's endpoint): the
            // calls are what the turn ended on.
            let reason = match stop_reason(finish) {
                StopReason::EndTurn if self.calls > 0 => StopReason::ToolUse,
                reason => reason,
            };
            self.stop_reason.get_or_insert(reason);
        }
    }

    fn delta(&mut self, delta: &Delta<'_>, out: &mut Vec<StreamEvent>) {
        let reasoning = delta
            .reasoning_content
            .as_deref()
            .or(delta.reasoning.as_deref())
            .filter(|text| !text.is_empty());
        if let Some(thinking) = reasoning {
            // A reasoning field: the server parses the tags itself.
            self.flush_think(out);
            self.thinking_delta(thinking, out);
        }
        match &delta.content {
            Some(ContentField::Text(text)) if !text.is_empty() => self.content(text, out),
            Some(ContentField::Parts(parts)) => {
                for part in parts {
                    match (part.kind.as_str(), &part.text, &part.thinking) {
                        ("thinking", _, Some(inner)) => {
                            let thinking: String = inner
                                .iter()
                                .filter_map(|part| part.text.as_deref())
                                .collect();
                            if !thinking.is_empty() {
                                self.flush_think(out);
                                self.thinking_delta(&thinking, out);
                            }
                        }
                        (_, Some(text), _) if !text.is_empty() => self.content(text, out),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if delta.tool_calls.is_some() {
            self.flush_think(out);
        }
        for call in delta.tool_calls.iter().flatten() {
            self.tool_call(call, out);
        }
    }

    /// Content text, with a leading `<think>...</think>` taken as thinking (see [`Think`]).
    fn content(&mut self, text: &str, out: &mut Vec<StreamEvent>) {
        match &mut self.think {
            Think::Done => self.text_delta(text, out),
            Think::Closed => {
                let text = text.trim_start();
                if !text.is_empty() {
                    self.think = Think::Done;
                    self.text_delta(text, out);
                }
            }
            Think::Undecided(held) => {
                held.push_str(text);
                let start = held.trim_start();
                if let Some(rest) = start.strip_prefix(THINK_OPEN) {
                    let rest = rest.to_owned();
                    self.think = Think::Inside(String::new());
                    self.content(&rest, out);
                } else if !THINK_OPEN.starts_with(start) {
                    let held = std::mem::take(held);
                    self.think = Think::Done;
                    self.text_delta(&held, out);
                }
            }
            Think::Inside(tail) => {
                tail.push_str(text);
                if let Some(at) = tail.find(THINK_CLOSE) {
                    let thinking = tail[..at].to_owned();
                    let rest = tail[at + THINK_CLOSE.len()..].to_owned();
                    self.think = Think::Closed;
                    if !thinking.is_empty() {
                        self.thinking_delta(&thinking, out);
                    }
                    self.content(&rest, out);
                    return;
                }
                // Hold only what could be the start of `</think>`.
                let keep = (1..THINK_CLOSE.len())
                    .rev()
                    .find(|length| {
                        tail.len() >= *length
                            && tail.is_char_boundary(tail.len() - length)
                            && THINK_CLOSE.starts_with(&tail[tail.len() - length..])
                    })
                    .unwrap_or(0);
                let thinking = tail[..tail.len() - keep].to_owned();
                tail.drain(..tail.len() - keep);
                if !thinking.is_empty() {
                    self.thinking_delta(&thinking, out);
                }
            }
        }
    }

    /// What the `<think>` state holds goes out: undecided content as text, a held tail as
    /// thinking; plain content from here on.
    fn flush_think(&mut self, out: &mut Vec<StreamEvent>) {
        match std::mem::replace(&mut self.think, Think::Done) {
            Think::Undecided(held) if !held.trim().is_empty() => self.text_delta(&held, out),
            Think::Inside(tail) if !tail.is_empty() => self.thinking_delta(&tail, out),
            _ => {}
        }
    }

    fn thinking_delta(&mut self, thinking: &str, out: &mut Vec<StreamEvent>) {
        let index = match self.open {
            Open::Thinking(index) => index,
            _ => {
                self.open(
                    ContentBlock::Thinking(protocol::ThinkingBlock {
                        thinking: String::new(),
                        signature: String::new(),
                        extra: Map::new(),
                    }),
                    Open::Thinking,
                    out,
                );
                self.next_index - 1
            }
        };
        out.push(StreamEvent::ContentBlockDelta {
            index,
            delta: ContentDelta::Thinking {
                thinking: thinking.to_owned(),
            },
        });
    }

    fn text_delta(&mut self, text: &str, out: &mut Vec<StreamEvent>) {
        let index = match self.open {
            Open::Text(index) => index,
            _ => {
                self.open(ContentBlock::text(""), Open::Text, out);
                self.next_index - 1
            }
        };
        out.push(StreamEvent::ContentBlockDelta {
            index,
            delta: ContentDelta::Text {
                text: text.to_owned(),
            },
        });
    }

    fn tool_call(&mut self, call: &ToolCallDelta<'_>, out: &mut Vec<StreamEvent>) {
        let arguments = call
            .function
            .as_ref()
            .and_then(|function| function.arguments.as_deref())
            .unwrap_or_default();
        let new_id = call
            .id
            .as_deref()
            .filter(|id| !id.is_empty() && Some(*id) != self.open_id.as_deref());
        let same = match (self.open, call.index) {
            // The same index, unless another id comes with it (servers that number every
            // call 0, or repeat the id in each piece of one call).
            (Open::Tool(open, _), Some(position)) => open == position && new_id.is_none(),
            // No index: a continuation unless it names a new call.
            (Open::Tool(..), None) => new_id.is_none(),
            _ => false,
        };
        let index = if same {
            let Open::Tool(_, index) = self.open else {
                return;
            };
            index
        } else {
            self.calls += 1;
            let id = call
                .id
                .as_deref()
                .filter(|id| !id.is_empty())
                .map_or_else(|| format!("call_{}", self.calls), str::to_owned);
            self.open_call = Some(id.clone());
            let name = call
                .function
                .as_ref()
                .and_then(|function| function.name.as_deref())
                .unwrap_or_default()
                .to_owned();
            let block = ContentBlock::ToolUse(protocol::ToolUseBlock {
                id: id.into(),
                name,
                input: Value::Object(Map::new()),
                cache_control: None,
                extra: Map::new(),
            });
            let chat_index = call.index.unwrap_or(self.calls);
            self.open_id = self.open_call.clone();
            self.close(out);
            let index = self.next_index;
            self.next_index += 1;
            self.open = Open::Tool(chat_index, index);
            out.push(StreamEvent::ContentBlockStart {
                index,
                content_block: Box::new(block),
            });
            index
        };
        if let (Some(extra), Some(extras), Some(id)) =
            (&call.extra_content, &self.extras, &self.open_call)
            && let Ok(mut extras) = extras.lock()
        {
            extras.insert(id.clone(), extra.clone());
        }
        if !arguments.is_empty() {
            out.push(StreamEvent::ContentBlockDelta {
                index,
                delta: ContentDelta::InputJson {
                    partial_json: arguments.to_owned(),
                },
            });
        }
    }

    /// `data: [DONE]`, or the end of the body after a `finish_reason`: the message ends.
    fn stop(&mut self, out: &mut Vec<StreamEvent>) {
        if self.stopped || self.stop_reason.is_none() {
            return;
        }
        self.flush_think(out);
        self.close(out);
        self.stopped = true;
        out.push(StreamEvent::MessageDelta(Box::new(MessageDelta {
            stop_reason: self.stop_reason.clone(),
            stop_sequence: None,
            stop_details: None,
            delta_extra: Map::new(),
            usage: Some(self.usage.take().unwrap_or_default()),
            extra: Map::new(),
        })));
        out.push(StreamEvent::MessageStop);
    }
}

/// Feeds translated `events` to `accumulator`, queueing each event and what it completed
/// (a block, the message) as items, in order. Shared by the translating streams.
pub(crate) fn accumulate(
    events: &mut Vec<StreamEvent>,
    accumulator: &mut MessageAccumulator,
    queue: &mut VecDeque<Item>,
) -> Result<(), ProviderError> {
    for event in events.drain(..) {
        let output = accumulator
            .push(&event)
            .map_err(|error| ProviderError::new(ErrorKind::Parse, error.to_string()))?;
        queue.push_back(Item::Event(event));
        match output {
            Some(Output::BlockComplete(block)) => queue.push_back(Item::BlockComplete(block)),
            Some(Output::MessageComplete(message)) => {
                queue.push_back(Item::MessageComplete(message));
            }
            // `Output` is non-exhaustive; nothing else is produced today.
            Some(_) | None => {}
        }
    }
    Ok(())
}

/// A Chat Completions stream as [`sse_parser::Item`]s: push the body's chunks, pull items,
/// [`ChatStream::finish`] at the end of the body. The same interface as
/// [`sse_parser::MessageStream`].
#[derive(Debug, Default)]
pub struct ChatStream {
    framer: Framer,
    translator: Translator,
    accumulator: MessageAccumulator,
    queue: VecDeque<Item>,
    events: Vec<StreamEvent>,
}

impl ChatStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty stream that keeps what the server attaches to its tool calls in `extras`
    /// (see [`CallExtras`]).
    pub fn with_call_extras(extras: CallExtras) -> Self {
        let mut stream = Self::default();
        stream.translator.extras = Some(extras);
        stream
    }

    /// Adds a chunk of the body.
    pub fn push(&mut self, chunk: Bytes) {
        self.framer.push(chunk);
    }

    fn accumulate(&mut self) -> Result<(), ProviderError> {
        accumulate(&mut self.events, &mut self.accumulator, &mut self.queue)
    }

    /// The next item from the chunks pushed so far, `None` when more input is needed.
    ///
    /// # Errors
    ///
    /// A [`ProviderError`]: the server's error mid-stream (classified as a failed response
    /// would be), an event that is not JSON, or an event over the framer's limit.
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
            let data = sse.data();
            if data.as_ref() == b"[DONE]" {
                self.translator.stop(&mut self.events);
                self.accumulate()?;
                continue;
            }
            if sse.event_bytes().as_ref() == b"error" {
                let error = serde_json::from_slice::<Value>(data)
                    .ok()
                    .and_then(|value| error_of(&value, None));
                return Err(match error {
                    Some(mut error) => {
                        error.message = format!("{} (error event mid-stream)", error.message);
                        error
                    }
                    None => ProviderError::new(
                        ErrorKind::Server,
                        format!(
                            "error event mid-stream: {}",
                            sse.data_str().chars().take(1_000).collect::<String>()
                        ),
                    ),
                });
            }
            let chunk: Chunk<'_> = serde_json::from_slice(data).map_err(|error| {
                ProviderError::new(
                    ErrorKind::Parse,
                    format!("a chunk that is not a chat.completion.chunk: {error}"),
                )
            })?;
            if let Some(error) = &chunk.error
                && let Some(mut error) = error_of(&json!({"error": error}), None)
            {
                error.message = format!("{} (error event mid-stream)", error.message);
                return Err(error);
            }
            self.translator.chunk(&chunk, &mut self.events);
            self.accumulate()?;
        }
    }

    /// Ends the stream: a stream that ended after its `finish_reason` but without
    /// `[DONE]` is complete; one that ended before is broken.
    ///
    /// # Errors
    ///
    /// As [`ChatStream::next_item`], or [`ErrorKind::StreamBroken`] for a stream cut short.
    pub fn finish(mut self) -> Result<Option<FinalMessage>, ProviderError> {
        while self.next_item()?.is_some() {}
        self.translator.stop(&mut self.events);
        self.accumulate()?;
        while self.queue.pop_front().is_some() {}
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
        let mut stream = ChatStream::new();
        stream.push(Bytes::from(body.to_owned()));
        let mut items = Vec::new();
        while let Some(item) = stream.next_item()? {
            items.push(item);
        }
        Ok(items)
    }

    /// The message a whole body makes.
    fn message(body: &str) -> protocol::Message {
        let items = items(body).unwrap_or_else(|error| panic!("{error}"));
        match items.last() {
            Some(Item::MessageComplete(done)) => done.message.clone(),
            other => panic!("{other:?}"),
        }
    }

    fn calls(message: &protocol::Message) -> Vec<(String, String, Value)> {
        message
            .content
            .iter()
            .filter_map(ContentBlock::as_tool_use)
            .map(|call| {
                (
                    call.id.as_str().to_owned(),
                    call.name.clone(),
                    call.input.clone(),
                )
            })
            .collect()
    }

    fn sse(chunks: &[Value]) -> String {
        let mut body: String = chunks
            .iter()
            .map(|chunk| format!("data: {chunk}\n\n"))
            .collect();
        body.push_str("data: [DONE]\n\n");
        body
    }

    /// The ways servers number and name their tool calls: every call at index 0 with its
    /// own id (two calls, not one merged); one call's id repeated in each piece (one call);
    /// two calls reusing an id (two calls, the id kept: the executor runs the first and
    /// answers the repeat as not run); `stop` after calls (the turn ended on tool use).
    #[test]
    fn tool_calls_numbered_and_named_as_servers_send_them() {
        let call = |index: Option<u64>, id: Option<&str>, name: Option<&str>, arguments: &str| {
            let mut call = json!({"type": "function", "function": {"arguments": arguments}});
            if let Some(index) = index {
                call["index"] = json!(index);
            }
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            if let Some(name) = name {
                call["function"]["name"] = json!(name);
            }
            json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        };
        let finish = |reason: &str| json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]});
        let both = sse(&[
            call(
                Some(0),
                Some("a"),
                Some("Read"),
                "{\"file_path\":\"a.txt\"}",
            ),
            call(
                Some(0),
                Some("b"),
                Some("Read"),
                "{\"file_path\":\"b.txt\"}",
            ),
            finish("stop"),
        ]);
        let message = message(&both);
        assert_eq!(
            calls(&message),
            [
                ("a".into(), "Read".into(), json!({"file_path": "a.txt"})),
                ("b".into(), "Read".into(), json!({"file_path": "b.txt"}))
            ]
        );
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
        let repeated = sse(&[
            call(Some(0), Some("a"), Some("Read"), "{\"file_"),
            call(Some(0), Some("a"), None, "path\":\"a.txt\"}"),
            finish("tool_calls"),
        ]);
        assert_eq!(
            calls(&message_of(&repeated)),
            [("a".into(), "Read".into(), json!({"file_path": "a.txt"}))]
        );
        let reused = sse(&[
            call(Some(0), Some("call_1"), Some("Read"), "{}"),
            call(Some(1), Some("call_1"), Some("Glob"), "{}"),
            finish("tool_calls"),
        ]);
        let ids: Vec<String> = calls(&message_of(&reused))
            .into_iter()
            .map(|(id, _, _)| id)
            .collect();
        assert_eq!(ids, ["call_1", "call_1"]);
        // Text alone ending in `stop` is still the end of the turn.
        let text = sse(&[
            json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}),
            finish("stop"),
        ]);
        assert_eq!(message_of(&text).stop_reason, Some(StopReason::EndTurn));
    }

    fn message_of(body: &str) -> protocol::Message {
        message(body)
    }

    /// Reasoning sent as `<think>` tags in the content (a model served without a reasoning
    /// parser) becomes thinking, the tags split anywhere across chunks; content that only
    /// looks like it at first is text; Groq's usage in `x_groq`.
    #[test]
    fn think_tags_become_thinking_and_groq_usage_is_read() {
        let body = "<think>\nI should read it.\n</think>\n\nThe answer.";
        for size in 1..=body.len() {
            let pieces: Vec<Value> = body
                .as_bytes()
                .chunks(size)
                .map(|piece| {
                    json!({"id": "c", "choices": [{"index": 0, "delta": {"content": String::from_utf8_lossy(piece)}}]})
                })
                .chain([json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                               "x_groq": {"usage": {"prompt_tokens": 12, "completion_tokens": 5}}})])
                .collect();
            let message = message(&sse(&pieces));
            let thinking: Vec<&str> = message
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Thinking(thinking) => Some(thinking.thinking.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(thinking, ["\nI should read it.\n"], "chunks of {size}");
            assert_eq!(message.text(), "The answer.", "chunks of {size}");
            assert_eq!(
                (message.usage.input_tokens, message.usage.output_tokens),
                (12, 5)
            );
        }
        let plain = sse(&[
            json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "<thin"}}]}),
            json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "g> is a tag"}}]}),
            json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ]);
        let message = message(&plain);
        assert_eq!(message.text(), "<thing> is a tag");
        assert!(
            !message
                .content
                .iter()
                .any(|block| matches!(block, ContentBlock::Thinking(_)))
        );
    }

    #[test]
    fn text_then_two_tool_calls_become_three_blocks() {
        let body = concat!(
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"Read\",\"arguments\":\"{\\\"file\"}}]}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"_path\\\":\\\"a\\\"}\"}}]}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"Bash\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":60}}}\n\n",
            "data: [DONE]\n\n",
        );
        let items = items(body).unwrap_or_else(|error| panic!("{error}"));
        let blocks: Vec<&protocol::CompletedBlock> = items
            .iter()
            .filter_map(|item| match item {
                Item::BlockComplete(block) => Some(block.as_ref()),
                _ => None,
            })
            .collect();
        assert_eq!(blocks.len(), 3);
        // The first call is complete as soon as the second opens.
        let first_call = items
            .iter()
            .position(|item| matches!(item, Item::BlockComplete(block) if block.index == 1));
        let second_start = items.iter().position(|item| {
            matches!(
                item,
                Item::Event(StreamEvent::ContentBlockStart { index: 2, .. })
            )
        });
        assert!(first_call < second_start, "{items:?}");
        let Some(Item::MessageComplete(done)) = items.last() else {
            panic!("{items:?}");
        };
        let message = &done.message;
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(message.usage.input_tokens, 40);
        assert_eq!(message.usage.cache_read_input_tokens, Some(60));
        assert_eq!(message.usage.output_tokens, 7);
        assert_eq!(message.text(), "Hi");
        let calls: Vec<(&str, &Value)> = message
            .content
            .iter()
            .filter_map(ContentBlock::as_tool_use)
            .map(|call| (call.name.as_str(), &call.input))
            .collect();
        assert_eq!(
            calls,
            [("Read", &json!({"file_path": "a"})), ("Bash", &json!({}))]
        );
    }

    #[test]
    fn length_is_max_tokens_and_errors_are_classified() {
        let body = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n";
        let got = items(body).unwrap_or_else(|error| panic!("{error}"));
        let Some(Item::MessageComplete(done)) = got.last() else {
            panic!("{got:?}");
        };
        assert_eq!(done.message.stop_reason, Some(StopReason::MaxTokens));

        let error = error_of(
            &json!({"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}}),
            Some(400),
        )
        .map(|error| error.kind);
        assert_eq!(error, Some(ErrorKind::PromptTooLong));
        let error =
            error_of(&json!({"error": "model \"x\" not found"}), Some(404)).map(|error| error.kind);
        assert_eq!(error, Some(ErrorKind::NotFound));
        let mid = items(
            "data: {\"id\":\"c\",\"choices\":[],\"error\":{\"code\":429,\"message\":\"slow down\"}}\n\n",
        );
        assert_eq!(
            mid.err().map(|error| error.kind),
            Some(ErrorKind::RateLimited)
        );
    }

    #[test]
    fn a_request_translates_pairs_images_and_thinking() {
        let request: CreateMessageRequest = serde_json::from_value(json!({
            "model": "qwen3-coder",
            "max_tokens": 1000,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Read", "description": "reads", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": ""},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [
                        {"type": "text", "text": "one"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
                    ]},
                    {"type": "text", "text": "go on"},
                ]},
            ],
        }))
        .unwrap_or_else(|error| panic!("{error}"));
        let body = chat_request(&request, &ChatOptions::default());
        assert_eq!(body["max_tokens"], 1000);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "function": {"name": "Read", "description": "reads", "parameters": {"type": "object"}}})
        );
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            messages[0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(messages[1], json!({"role": "user", "content": "look"}));
        assert_eq!(
            messages[2],
            json!({"role": "assistant", "content": "Reading.", "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"a\"}"}}
            ]})
        );
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "t1", "content": format!("one\n{DOCUMENT_NOTE}")})
        );
        assert_eq!(
            messages[4],
            json!({"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "go on"},
            ]})
        );
        let replayed = chat_request(
            &request,
            &ChatOptions {
                reasoning_replay: ReasoningReplay::ReasoningContent,
                max_tokens_field: MaxTokensField::MaxCompletionTokens,
            },
        );
        assert_eq!(replayed["messages"][2]["reasoning_content"], "hmm");
        assert_eq!(replayed["max_completion_tokens"], 1000);
    }
}
