//! Content blocks: the parts of a message.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

use crate::JsonObject;
use crate::ids::ToolUseId;
use crate::tagged::{from_object, serialize_tagged, skip_none, type_of};

/// A prompt-caching breakpoint, `{"type":"ephemeral"}` with an optional `ttl` (`"5m"`, `"1h"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheControl {
    /// Always `"ephemeral"` today.
    #[serde(rename = "type")]
    pub kind: String,
    /// Lifetime of the cache entry, `"5m"` (default) or `"1h"`.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub ttl: Option<String>,
}

impl CacheControl {
    /// The default 5-minute breakpoint, `{"type":"ephemeral"}`.
    pub fn ephemeral() -> Self {
        Self {
            kind: "ephemeral".to_owned(),
            ttl: None,
        }
    }
}

/// One block of a message's content.
///
/// Deserializes any object with a string `type`; types this crate does not model become
/// [`ContentBlock::Other`] and serialize back unchanged. Serialization writes `type` first, then
/// the known fields in declaration order, then unknown fields in arrival order.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ContentBlock {
    /// `text`: model or user prose, with citations when the model cites sources.
    Text(TextBlock),
    /// `image`: an image sent by the user or a tool.
    Image(ImageBlock),
    /// `document`: a PDF or plain-text document sent by the user or a tool.
    Document(DocumentBlock),
    /// `tool_use`: the model asks the client to run a tool.
    ToolUse(ToolUseBlock),
    /// `tool_result`: the client's answer to one tool_use.
    ToolResult(ToolResultBlock),
    /// `thinking`: extended thinking with the signature that lets it be sent back.
    Thinking(ThinkingBlock),
    /// `redacted_thinking`: encrypted thinking, sent back as it came.
    RedactedThinking(RedactedThinkingBlock),
    /// `server_tool_use`: a tool the API runs itself (web search, code execution, ...).
    ServerToolUse(ToolUseBlock),
    /// `mcp_tool_use`: a call to a remote MCP server made by the API (`server_name` in `extra`).
    McpToolUse(ToolUseBlock),
    /// Any `*_tool_result` block produced by the API for a server or MCP tool.
    ServerToolResult(ServerToolResultBlock),
    /// `compaction`: a server-side summary of earlier context.
    Compaction(CompactionBlock),
    /// `fallback`: the API served the response with another model.
    Fallback(FallbackBlock),
    /// A block type this crate does not know; kept whole, `type` included.
    Other(OtherBlock),
}

impl ContentBlock {
    /// The block's wire `type`, such as `"text"` or `"web_search_tool_result"`.
    pub fn block_type(&self) -> &str {
        match self {
            Self::Text(_) => "text",
            Self::Image(_) => "image",
            Self::Document(_) => "document",
            Self::ToolUse(_) => "tool_use",
            Self::ToolResult(_) => "tool_result",
            Self::Thinking(_) => "thinking",
            Self::RedactedThinking(_) => "redacted_thinking",
            Self::ServerToolUse(_) => "server_tool_use",
            Self::McpToolUse(_) => "mcp_tool_use",
            Self::ServerToolResult(block) => &block.kind,
            Self::Compaction(_) => "compaction",
            Self::Fallback(_) => "fallback",
            Self::Other(block) => block.block_type(),
        }
    }

    /// A text block holding `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextBlock::new(text))
    }

    /// The text of a text block, `None` for every other block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(block) => Some(&block.text),
            _ => None,
        }
    }

    /// The tool_use part of a client tool call, `None` for every other block (server and MCP
    /// tool uses are run by the API, not the client).
    pub fn as_tool_use(&self) -> Option<&ToolUseBlock> {
        match self {
            Self::ToolUse(block) => Some(block),
            _ => None,
        }
    }

    /// Whether the API accepts a cache breakpoint on this block (not on thinking, redacted
    /// thinking or server blocks).
    pub fn can_carry_cache_control(&self) -> bool {
        matches!(
            self,
            Self::Text(_)
                | Self::Image(_)
                | Self::Document(_)
                | Self::ToolUse(_)
                | Self::ToolResult(_)
        )
    }

    /// Sets the block's cache breakpoint; returns `false` (and changes nothing) for block types
    /// the API does not accept one on (thinking, redacted thinking, server blocks).
    pub fn set_cache_control(&mut self, cache_control: Option<CacheControl>) -> bool {
        let slot = match self {
            Self::Text(block) => &mut block.cache_control,
            Self::Image(block) => &mut block.cache_control,
            Self::Document(block) => &mut block.cache_control,
            Self::ToolUse(block) => &mut block.cache_control,
            Self::ToolResult(block) => &mut block.cache_control,
            _ => return false,
        };
        *slot = cache_control;
        true
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ty = self.block_type();
        match self {
            Self::Text(block) => serialize_tagged(ty, block, serializer),
            Self::Image(block) => serialize_tagged(ty, block, serializer),
            Self::Document(block) => serialize_tagged(ty, block, serializer),
            Self::ToolUse(block) | Self::ServerToolUse(block) | Self::McpToolUse(block) => {
                serialize_tagged(ty, block, serializer)
            }
            Self::ToolResult(block) => serialize_tagged(ty, block, serializer),
            Self::Thinking(block) => serialize_tagged(ty, block, serializer),
            Self::RedactedThinking(block) => serialize_tagged(ty, block, serializer),
            Self::ServerToolResult(block) => block.raw.serialize(serializer),
            Self::Compaction(block) => serialize_tagged(ty, block, serializer),
            Self::Fallback(block) => serialize_tagged(ty, block, serializer),
            Self::Other(block) => block.fields.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = JsonObject::deserialize(deserializer)?;
        let ty = type_of::<D::Error>(&map, "content block")?;
        Ok(match ty.as_str() {
            "text" => Self::Text(from_object(map, &ty)?),
            "image" => Self::Image(from_object(map, &ty)?),
            "document" => Self::Document(from_object(map, &ty)?),
            "tool_use" => Self::ToolUse(from_object(map, &ty)?),
            "tool_result" => Self::ToolResult(from_object(map, &ty)?),
            "thinking" => Self::Thinking(from_object(map, &ty)?),
            "redacted_thinking" => Self::RedactedThinking(from_object(map, &ty)?),
            "server_tool_use" => Self::ServerToolUse(from_object(map, &ty)?),
            "mcp_tool_use" => Self::McpToolUse(from_object(map, &ty)?),
            "compaction" => Self::Compaction(from_object(map, &ty)?),
            "fallback" => Self::Fallback(from_object(map, &ty)?),
            server_result if server_result.ends_with("_tool_result") => {
                let tool_use_id = server_tool_use_id::<D::Error>(&ty, map.get("tool_use_id"))?;
                let raw = serde_json::value::to_raw_value(&map).map_err(D::Error::custom)?;
                // The nesting limit of a block kept raw, as on the streaming path.
                crate::raw_json::check(raw.get()).map_err(D::Error::custom)?;
                Self::ServerToolResult(ServerToolResultBlock {
                    kind: ty,
                    tool_use_id,
                    raw: Arc::new(raw),
                })
            }
            _ => Self::Other(OtherBlock { fields: map }),
        })
    }
}

/// `text` block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text, UTF-8.
    pub text: String,
    /// Citation objects (`char_location`, `web_search_result_location`, ...), kept as JSON
    /// text (see [`Citation`]); `None` when the block has none.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub citations: Option<Vec<Citation>>,
    /// Prompt-caching breakpoint on this block.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl TextBlock {
    /// A text block with no citations, breakpoint or extra fields.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            ..Self::default()
        }
    }
}

/// One citation of a text block: a JSON object whose `type` says its kind
/// (`char_location`, `page_location`, `content_block_location`, `web_search_result_location`,
/// `search_result_location`, ...) and whose other fields depend on it (`cited_text`, `url`,
/// `title`, `encrypted_index`, `document_index`, `start_char_index`, ...: see the Messages
/// API's citations documentation), kept as JSON text.
///
/// The client sends citations back with their block and may show them; it never changes them.
/// So, like [`ServerToolResultBlock`], a citation is its JSON text (one shared buffer): no tree
/// of maps and strings is built when it arrives and a clone shares the text. How the text is
/// kept depends on how the citation was made:
///
/// - [`Citation::from_raw`] (the streaming decoder's path): the bytes as received, sent back
///   byte for byte; a citation with a key given twice is refused.
/// - [`Citation::from_value`] and `Deserialize` (a non-streaming response, a transcript read
///   back, any `serde` format): the value written out compactly; a key given twice in the
///   input was already resolved by the parse (serde_json keeps the last), so what is kept and
///   sent back is what this client read. The streaming decoder takes this path too when
///   `from_raw` refuses a repeated key.
///
/// Read it with [`Citation::kind`], [`Citation::to_value`], or a type of your own:
/// `serde_json::from_str::<T>(citation.raw().get())`.
///
/// ```
/// use protocol::Citation;
/// use serde_json::value::RawValue;
///
/// let raw = RawValue::from_string(r#"{"type":"char_location","cited_text":"x"}"#.to_owned())?;
/// let citation = Citation::from_raw(raw)?;
/// assert_eq!(citation.kind().as_deref(), Some("char_location"));
/// assert_eq!(citation.to_value()["cited_text"], "x");
/// assert_eq!(serde_json::to_string(&citation)?, r#"{"type":"char_location","cited_text":"x"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Citation {
    raw: Arc<Box<RawValue>>,
}

impl Citation {
    /// The citation from its raw JSON, as a streaming parser captures it: an object, checked
    /// as serde_json would read it into a `Value` (escapes, numbers), nesting at most 100
    /// deep (so a transcript line or request body of this crate holding it reads back), and
    /// refused with a key given twice (a reader that keeps the last would see another citation
    /// than one that keeps the first).
    ///
    /// # Errors
    ///
    /// When `raw` is not an object, or holds a lone surrogate escape, a number out of `f64`
    /// range, nesting past 100, or an object with a key twice.
    pub fn from_raw(raw: Box<RawValue>) -> Result<Self, serde_json::Error> {
        if !raw.get().starts_with('{') {
            return Err(serde_json::Error::custom(
                "a citation must be a JSON object",
            ));
        }
        crate::raw_json::check(raw.get())?;
        Ok(Self { raw: Arc::new(raw) })
    }

    /// The citation from a parsed JSON value, written out compactly.
    ///
    /// # Errors
    ///
    /// When `value` is not an object or nests deeper than 100.
    pub fn from_value(value: &Value) -> Result<Self, serde_json::Error> {
        if !value.is_object() {
            return Err(serde_json::Error::custom(
                "a citation must be a JSON object",
            ));
        }
        let raw = serde_json::value::to_raw_value(value)?;
        crate::raw_json::check(raw.get())?;
        Ok(Self { raw: Arc::new(raw) })
    }

    /// The citation's JSON text (as received when made by [`Citation::from_raw`]).
    pub fn raw(&self) -> &RawValue {
        &self.raw
    }

    /// The citation's `type` (`char_location`, `web_search_result_location`, ...), `None` when
    /// it has none or it is not a string; read from the text on each call.
    pub fn kind(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Kind {
            #[serde(rename = "type")]
            kind: Option<Value>,
        }
        match serde_json::from_str::<Kind>(self.raw.get()).ok()?.kind? {
            Value::String(kind) => Some(kind),
            _ => None,
        }
    }

    /// The citation parsed into a `Value` (`Null` if the text were ever unreadable, which
    /// the checks of [`Citation::from_raw`] and [`Citation::from_value`] rule out).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.raw.get()).unwrap_or_default()
    }
}

impl PartialEq for Citation {
    /// Equal when the texts are, or parse to equal `Value`s: spacing, escapes and the order
    /// of keys do not matter (`{"a":1,"b":2}` equals `{"b":2,"a":1}`), the spelling of a
    /// number does (`1` is not `1.0`). Texts that differ are both parsed, so this costs a
    /// parse of each.
    fn eq(&self, other: &Self) -> bool {
        self.raw.get() == other.raw.get() || self.to_value() == other.to_value()
    }
}

impl Serialize for Citation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl Eq for Citation {}

impl<'de> Deserialize<'de> for Citation {
    /// Reads a JSON object through any deserializer (a transcript's block may come through
    /// serde's buffered content, which cannot hand out raw text) and writes it out compactly,
    /// as [`Citation::from_value`] does.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Self::from_value(&value).map_err(D::Error::custom)
    }
}

/// `image` block. The `source` (`base64` with `media_type` and `data`, or `url`) is kept as
/// the API defines it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageBlock {
    /// `{"type":"base64","media_type":"image/png","data":"…"}` or `{"type":"url","url":"…"}`.
    pub source: Value,
    /// Prompt-caching breakpoint on this block.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `document` block: a PDF (`source` `{"type":"base64","media_type":"application/pdf",
/// "data":"…"}`), plain text (`{"type":"text","media_type":"text/plain","data":"…"}`) or a
/// URL, kept as the API defines it. `title`, `context` and `citations` stay in `extra`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DocumentBlock {
    /// Where the document's bytes are, as the API defines `source`.
    pub source: Value,
    /// Prompt-caching breakpoint on this block.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model (`title`, `context`, `citations`), kept in arrival
    /// order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tool_use`, `server_tool_use` and `mcp_tool_use` blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUseBlock {
    /// The id its tool_result must name.
    pub id: ToolUseId,
    /// The tool's name, as declared in the request's `tools`.
    pub name: String,
    /// The tool's input, a JSON object in every well-formed response.
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Prompt-caching breakpoint on this block.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model (`caller`, `server_name`, ...), kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn empty_object() -> Value {
    Value::Object(JsonObject::new())
}

/// `tool_result` block: the client's answer to a tool_use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultBlock {
    /// The tool_use this answers.
    pub tool_use_id: ToolUseId,
    /// A string or a list of blocks (text, image).
    #[serde(default, skip_serializing_if = "ToolResultContent::is_empty_blocks")]
    pub content: ToolResultContent,
    /// `Some(true)` when the tool failed; the model then sees the content as an error.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub is_error: Option<bool>,
    /// Prompt-caching breakpoint on this block.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ToolResultBlock {
    /// A tool_result with text content; `is_error` is set only when true.
    pub fn text(tool_use_id: ToolUseId, text: impl Into<String>, is_error: bool) -> Self {
        Self {
            tool_use_id,
            content: ToolResultContent::Text(text.into()),
            is_error: is_error.then_some(true),
            cache_control: None,
            extra: JsonObject::new(),
        }
    }
}

/// The content of a tool_result: the API takes a plain string or a list of blocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// A plain string.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<ContentBlock>),
}

impl Default for ToolResultContent {
    fn default() -> Self {
        Self::Blocks(Vec::new())
    }
}

impl ToolResultContent {
    /// The text of the result: the string, or the text blocks joined with newlines (other
    /// blocks, such as images, left out).
    pub fn text(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Blocks(blocks) => blocks
                .iter()
                .filter_map(ContentBlock::as_text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    fn is_empty_blocks(&self) -> bool {
        matches!(self, Self::Blocks(blocks) if blocks.is_empty())
    }

    /// Size of the content in bytes: the string's length, or the sum of the text blocks'
    /// lengths (other blocks count as their JSON size).
    pub fn len_bytes(&self) -> usize {
        match self {
            Self::Text(text) => text.len(),
            Self::Blocks(blocks) => blocks
                .iter()
                .map(|block| match block {
                    ContentBlock::Text(text) => text.text.len(),
                    other => serde_json::to_string(other).map_or(0, |json| json.len()),
                })
                .sum(),
        }
    }
}

/// `thinking` block. The signature must be sent back unchanged with the thinking text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    /// The thinking text.
    pub thinking: String,
    /// Opaque signature over the thinking, from `signature_delta`.
    #[serde(default)]
    pub signature: String,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `redacted_thinking` block: encrypted thinking, replayed as it came.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedactedThinkingBlock {
    /// Opaque encrypted payload.
    pub data: String,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `compaction` block: a server-side summary of earlier context. `compaction_delta` sets its
/// fields (set, not append).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionBlock {
    /// The readable summary.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub content: Option<String>,
    /// The opaque payload the API needs to restore the compacted context.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub encrypted_content: Option<String>,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `fallback` block: the response was served by `to.model` instead of `from.model`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FallbackBlock {
    /// `{"model": …}` of the model that was asked for.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub from: Option<Value>,
    /// `{"model": …}` of the model that actually served the response.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub to: Option<Value>,
    /// Fields this crate does not model (`trigger`, ...), kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl FallbackBlock {
    /// The model named in `to.model`, when present.
    pub fn to_model(&self) -> Option<&str> {
        self.to.as_ref()?.get("model")?.as_str()
    }
}

/// A server-side tool result (`web_search_tool_result`, `bash_code_execution_tool_result`,
/// `mcp_tool_result`, ...): arrives whole in content_block_start and is kept as it came.
///
/// The client never reads inside these blocks, it only sends them back, so the block is kept
/// as its raw JSON text (one shared buffer): no tree of maps and strings is built when it
/// arrives, a clone shares the text, and it serializes back byte for byte. [`ServerToolResultBlock::fields`]
/// parses it on demand.
#[derive(Clone, Debug)]
pub struct ServerToolResultBlock {
    /// The block's wire `type`, ending in `_tool_result`.
    pub kind: String,
    /// The server tool_use it answers, when the block names one.
    pub tool_use_id: Option<ToolUseId>,
    /// The whole block object, `type` included, as it came; shared by clones (the block is
    /// never changed). The `Box` inside the `Arc` moves the text in without copying it again.
    raw: Arc<Box<RawValue>>,
}

impl ServerToolResultBlock {
    /// The block from its raw JSON object (`type` included), as a streaming parser captures
    /// it: checked as serde_json would read it into a `Value` (strings, escapes, numbers,
    /// nesting), without building one.
    ///
    /// # Errors
    ///
    /// When `raw` is not an object whose string `type` ends in `_tool_result`, its
    /// `tool_use_id` is not a string, any object in it has a key twice, it holds what a
    /// `serde_json::Value` cannot (a lone surrogate escape, a number out of range), or it
    /// nests deeper than 100 (so any message holding it reads back).
    pub fn from_raw(raw: Box<RawValue>) -> Result<Self, serde_json::Error> {
        // Everything a parse into a map would refuse is refused here, and a key given twice
        // too: the block is sent back as this text, and a duplicate would let the API read it
        // otherwise than this client (a second `type`, say).
        crate::raw_json::check(raw.get())?;
        if let Some((kind, tool_use_id)) = leading_kind_and_id(raw.get()) {
            return Ok(Self {
                kind: kind.to_owned(),
                tool_use_id: Some(ToolUseId(tool_use_id.to_owned())),
                raw: Arc::new(raw),
            });
        }
        /// Any value, `null` included (an `Option<Value>` field would read `null` as absent).
        fn present<'de, D: Deserializer<'de>>(value: D) -> Result<Option<Value>, D::Error> {
            Value::deserialize(value).map(Some)
        }
        #[derive(Deserialize)]
        struct Probe<'a> {
            #[serde(rename = "type", borrow)]
            kind: std::borrow::Cow<'a, str>,
            #[serde(default, deserialize_with = "present")]
            tool_use_id: Option<Value>,
        }
        // A derived struct would also read an array, positionally: a block is an object.
        if !raw.get().starts_with('{') {
            return Err(serde_json::Error::custom(
                "a server tool result block is an object",
            ));
        }
        let probe: Probe<'_> = serde_json::from_str(raw.get())?;
        if !probe.kind.ends_with("_tool_result") || probe.kind == "tool_result" {
            return Err(serde_json::Error::custom(format_args!(
                "`{}` is not a server tool result block",
                probe.kind
            )));
        }
        let tool_use_id = server_tool_use_id(&probe.kind, probe.tool_use_id.as_ref())?;
        Ok(Self {
            kind: probe.kind.into_owned(),
            tool_use_id,
            raw: Arc::new(raw),
        })
    }

    /// The block as it came: its JSON object, `type` included.
    pub fn raw(&self) -> &RawValue {
        &self.raw
    }

    /// Every field except `type`, in arrival order (`tool_use_id` included), parsed from the
    /// raw block.
    pub fn fields(&self) -> JsonObject {
        // The raw text was checked to be a JSON object by serde_json when the block was made
        // (parsed from the wire, or written from a map), so reading it again cannot fail; an
        // empty map is returned if it ever did rather than a panic.
        let mut fields: JsonObject = serde_json::from_str(self.raw.get()).unwrap_or_default();
        fields.shift_remove("type");
        fields
    }
}

impl PartialEq for ServerToolResultBlock {
    /// Equal when the kind, the tool_use_id and the fields are: the same text, or texts that
    /// parse to the same JSON (spacing and escapes do not matter).
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.tool_use_id == other.tool_use_id
            && (self.raw.get() == other.raw.get() || self.fields() == other.fields())
    }
}

/// The layout the API sends, `{"type":"…_tool_result","tool_use_id":"…",…`, read from the
/// start of a block already checked (a JSON object, no key twice), without reading the rest
/// of it again. `None` for any other layout (escapes in either string included): the caller
/// then reads the whole object.
fn leading_kind_and_id(raw: &str) -> Option<(&str, &str)> {
    let string = |text: &str| -> Option<(usize, usize)> {
        let end = text.find(['"', '\\'])?;
        (text.as_bytes()[end] == b'"').then_some((end, end + 1))
    };
    let rest = raw.strip_prefix(r#"{"type":""#)?;
    let (kind_end, after) = string(rest)?;
    let kind = &rest[..kind_end];
    if !kind.ends_with("_tool_result") || kind == "tool_result" {
        return None;
    }
    let rest = rest[after..].strip_prefix(r#","tool_use_id":""#)?;
    let (id_end, after) = string(rest)?;
    matches!(rest.as_bytes().get(after), Some(b',' | b'}')).then_some((kind, &rest[..id_end]))
}

/// The `tool_use_id` of a server tool result block: absent, or a string.
fn server_tool_use_id<E: serde::de::Error>(
    kind: &str,
    id: Option<&Value>,
) -> Result<Option<ToolUseId>, E> {
    match id {
        Some(Value::String(id)) => Ok(Some(ToolUseId(id.clone()))),
        Some(_) => Err(E::custom(format_args!(
            "`{kind}` block: `tool_use_id` must be a string"
        ))),
        None => Ok(None),
    }
}

/// A block of a type this crate does not model, kept whole.
#[derive(Clone, Debug, PartialEq)]
pub struct OtherBlock {
    /// Every field, `type` included, in arrival order.
    pub fields: JsonObject,
}

impl OtherBlock {
    /// The block's wire `type`.
    pub fn block_type(&self) -> &str {
        self.fields
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(json: &str) -> ContentBlock {
        let block: ContentBlock = serde_json::from_str(json).unwrap();
        assert_eq!(
            serde_json::to_string(&block).unwrap(),
            json,
            "byte-exact round trip"
        );
        block
    }

    #[test]
    fn thinking_round_trips_byte_for_byte() {
        let block =
            roundtrip(r#"{"type":"thinking","thinking":"Let me check.","signature":"SIG_ABC"}"#);
        assert_eq!(block.block_type(), "thinking");
    }

    #[test]
    fn document_round_trips_with_its_title_and_cache_breakpoint() {
        let block = roundtrip(
            r#"{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"cache_control":{"type":"ephemeral"},"title":"a.pdf"}"#,
        );
        let ContentBlock::Document(document) = &block else {
            panic!("not a document: {block:?}")
        };
        assert_eq!(document.source["media_type"], "application/pdf");
        assert_eq!(document.extra["title"], "a.pdf");
        assert!(document.cache_control.is_some());
    }

    #[test]
    fn tool_use_keeps_unknown_caller() {
        let block = roundtrip(
            r#"{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"},"caller":{"type":"direct"}}"#,
        );
        assert_eq!(
            block.as_tool_use().unwrap().extra["caller"]["type"],
            "direct"
        );
    }

    /// Numbers go back as the same numbers (serde_json's `float_roundtrip`; found by an
    /// attack: without it this one came back as `4.4700214401601126e-167`).
    #[test]
    fn numbers_round_trip_exactly() {
        let block: ContentBlock =
            serde_json::from_str(r#"{"type":"hologram","c":0.4470021440160113e-166}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&block).unwrap(),
            r#"{"type":"hologram","c":4.470021440160113e-167}"#
        );
    }

    #[test]
    fn unknown_block_type_round_trips() {
        let block = roundtrip(r#"{"type":"hologram","z":{"b":1,"a":2},"list":[1,2]}"#);
        assert_eq!(block.block_type(), "hologram");
        assert!(matches!(block, ContentBlock::Other(_)));
    }

    #[test]
    fn citations_are_kept_as_sent_and_read_back_through_any_path() {
        // Through `ContentBlock`'s generic path (a map first, then serde's buffered content
        // for the flattened fields), as a transcript is read.
        let block = roundtrip(
            r#"{"type":"text","text":"Paris.","citations":[{"type":"web_search_result_location","cited_text":"Paris is","url":"https://e.x","encrypted_index":"Eo8B"}]}"#,
        );
        let ContentBlock::Text(text) = block else {
            panic!("a text block")
        };
        let citations = text.citations.unwrap();
        assert_eq!(citations[0].to_value()["url"], "https://e.x");
        // Kept byte for byte from the raw text; equal to the same JSON spelled otherwise.
        let spaced = r#"{ "type" : "char_location", "cited_text" : "A" }"#;
        let raw = Citation::from_raw(RawValue::from_string(spaced.to_owned()).unwrap()).unwrap();
        assert_eq!(serde_json::to_string(&raw).unwrap(), spaced);
        let compact = serde_json::json!({"type": "char_location", "cited_text": "A"});
        assert_eq!(raw, Citation::from_value(&compact).unwrap());
        assert_ne!(
            raw,
            Citation::from_value(&serde_json::json!({"type": "char_location"})).unwrap()
        );
        assert!(Citation::from_value(&serde_json::json!("text")).is_err());
        assert!(Citation::from_value(&Value::Null).is_err());
        let deep = (0..200).fold(serde_json::json!("a"), |inner, _| {
            serde_json::json!([inner])
        });
        let error = Citation::from_value(&serde_json::json!({ "a": deep }))
            .unwrap_err()
            .to_string();
        assert!(error.contains("nesting deeper than 100"), "{error}");
        for (bad, says) in [
            ("null", "must be a JSON object"),
            ("[1]", "must be a JSON object"),
            (
                r#"{"type":"char_location","type":"page_location"}"#,
                "key `type` given twice",
            ),
            (r#"{"cited_text":"\udead"}"#, "lone surrogate"),
            (r#"{"start_char_index":1e400}"#, "number out of range"),
        ] {
            let error = Citation::from_raw(RawValue::from_string(bad.to_owned()).unwrap())
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn server_tool_result_is_kept_whole() {
        let block = roundtrip(
            r#"{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://a"}]}"#,
        );
        let ContentBlock::ServerToolResult(result) = block else {
            panic!("{block:?}")
        };
        assert_eq!(result.tool_use_id.as_ref().unwrap().as_str(), "srvtoolu_1");
        assert_eq!(
            result.fields()["content"][0]["url"],
            "https://a",
            "the fields parse on demand"
        );
        // Nesting: at most 100 deep, the block counting one, from the raw text and from a
        // transcript alike; at the limit, a transcript line holding the block reads back.
        let nested = |depth: usize| {
            format!(
                r#"{{"type":"x_tool_result","tool_use_id":"s","content":{}1{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        for (depth, kept) in [(99, true), (100, false), (126, false), (300, false)] {
            let raw = nested(depth);
            let from_raw =
                ServerToolResultBlock::from_raw(RawValue::from_string(raw.clone()).unwrap());
            assert_eq!(from_raw.is_ok(), kept, "depth {depth}");
            let from_map = serde_json::from_str::<ContentBlock>(&raw);
            assert_eq!(from_map.is_ok(), kept, "depth {depth} through a map");
            if let Ok(block) = from_raw {
                let line = format!(
                    r#"{{"type":"assistant","message":{{"role":"assistant","content":[{}]}}}}"#,
                    serde_json::to_string(&ContentBlock::ServerToolResult(block)).unwrap()
                );
                assert!(
                    serde_json::from_str::<Value>(&line).is_ok(),
                    "depth {depth}"
                );
            }
        }
        // A large object: still refused on a repeated key, in linear time.
        let mut wide: String = (0..5_000).map(|n| format!(r#""k{n}":{n},"#)).collect();
        wide.push_str(r#""k4999":0"#);
        let raw = format!(r#"{{"type":"x_tool_result","tool_use_id":"s","content":{{{wide}}}}}"#);
        assert!(ServerToolResultBlock::from_raw(RawValue::from_string(raw).unwrap()).is_err());
        // From the raw text: the same block, and refusals that name the problem.
        let raw = r#"{"type":"web_search_tool_result", "tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://\u0061"}]}"#;
        // The API's own layout is read from its start; the same block either way.
        let compact = r#"{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://a"}]}"#;
        assert_eq!(
            leading_kind_and_id(compact),
            Some(("web_search_tool_result", "srvtoolu_1"))
        );
        assert_eq!(
            leading_kind_and_id(raw),
            None,
            "a space: the whole object is read"
        );
        assert_eq!(
            leading_kind_and_id(r#"{"type":"x_tool_result","tool_use_id":"a\u0062"}"#),
            None
        );
        assert_eq!(
            ServerToolResultBlock::from_raw(RawValue::from_string(compact.to_owned()).unwrap())
                .unwrap(),
            result
        );
        let from_raw =
            ServerToolResultBlock::from_raw(RawValue::from_string(raw.to_owned()).unwrap())
                .unwrap();
        assert_eq!(from_raw, result, "spacing and escapes do not matter");
        assert_eq!(
            serde_json::to_string(&ContentBlock::ServerToolResult(from_raw)).unwrap(),
            raw
        );
        for (bad, says) in [
            (
                r#"{"type":"web_search_tool_result","tool_use_id":"s","content":[],"type":"text","text":"SMUGGLED"}"#,
                "key `type` given twice",
            ),
            (
                r#"{"type":"web_search_tool_result","tool_use_id":"A","content":[],"tool_use_id":"B"}"#,
                "key `tool_use_id` given twice",
            ),
            (
                r#"{"type":"web_search_tool_result","tool_use_id":"s","content":[{"a":1,"b":2,"a":3}]}"#,
                "key `a` given twice",
            ),
            (
                r#"{"type":"web_search_tool_result","tool_use_id":"s","content":"\udead"}"#,
                "lone surrogate escape",
            ),
            (
                r#"{"type":"web_search_tool_result","tool_use_id":"s","content":1e400}"#,
                "number out of range",
            ),
            (r#"{"type":"tool_result"}"#, "not a server tool result"),
            // Found by a second attack: `null` read as absent, an array read positionally.
            (
                r#"{"type":"x_tool_result","tool_use_id":null,"content":[]}"#,
                "must be a string",
            ),
            (r#"["x_tool_result","srv_1"]"#, "is an object"),
            (
                r#"{"type":"x_tool_result","tool_use_id":7}"#,
                "must be a string",
            ),
            (r#"{"tool_use_id":"a"}"#, "missing field `type`"),
        ] {
            let error =
                ServerToolResultBlock::from_raw(RawValue::from_string(bad.to_owned()).unwrap())
                    .unwrap_err();
            assert!(error.to_string().contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn tool_result_string_and_block_content() {
        roundtrip(
            r#"{"type":"tool_result","tool_use_id":"toolu_1","content":"ok","is_error":true}"#,
        );
        let block = roundtrip(
            r#"{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ok"}]}"#,
        );
        let ContentBlock::ToolResult(result) = block else {
            panic!()
        };
        assert_eq!(result.content.len_bytes(), 2);
    }

    #[test]
    fn missing_type_is_a_clear_error() {
        let error = serde_json::from_str::<ContentBlock>(r#"{"text":"x"}"#).unwrap_err();
        assert!(error.to_string().contains("missing `type`"), "{error}");
        let error = serde_json::from_str::<ContentBlock>(r#"{"type":"text"}"#).unwrap_err();
        assert!(error.to_string().contains("`text` block"), "{error}");
    }

    #[test]
    fn cache_control_only_where_allowed() {
        let mut text = ContentBlock::text("hi");
        assert!(text.set_cache_control(Some(CacheControl::ephemeral())));
        assert_eq!(
            serde_json::to_string(&text).unwrap(),
            r#"{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}"#
        );
        let mut thinking = ContentBlock::Thinking(ThinkingBlock::default());
        assert!(!thinking.set_cache_control(Some(CacheControl::ephemeral())));
    }
}
