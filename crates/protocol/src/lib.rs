//! Serde types of the Anthropic Messages API: the vocabulary every other crate of `agent` speaks.
//!
//! - [`Message`] is a model response; [`MessageParam`] is one entry of a request's history.
//!   Both hold [`ContentBlock`]s: text, tool_use, tool_result, thinking, redacted_thinking,
//!   image, server-side tool blocks, and any block type this crate does not know yet.
//! - [`CreateMessageRequest`] is the body of `POST /v1/messages`; [`ApiErrorBody`] is what the
//!   API answers on failure (and what a mid-stream `error` event carries).
//! - [`StreamEvent`] is one decoded server-sent event of a streaming response, and
//!   [`CompletedBlock`] a content block whose `content_block_stop` has arrived. The
//!   `sse-parser` crate produces them; the loop and the tool executor consume them without
//!   depending on the parser.
//!
//! **Forward compatibility** is a design rule, not an afterthought: the API adds block types,
//! stop reasons and fields without notice. An unknown block type deserializes into
//! [`ContentBlock::Other`], an unknown stop reason into [`StopReason::Other`], and unknown
//! fields of known blocks land in an `extra` map. All of them serialize back unchanged, so a
//! block returned to the API keeps fields such as `caller` on tool_use.
//!
//! ```
//! use protocol::{ContentBlock, Message, StopReason};
//!
//! let json = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-8",
//!   "content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"a.rs"},
//!   "caller":{"type":"direct"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}"#;
//! let message: Message = serde_json::from_str(json)?;
//! assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
//! let ContentBlock::ToolUse(tool_use) = &message.content[0] else { unreachable!() };
//! assert_eq!(tool_use.name, "Read");
//! // The unknown `caller` field survives a round trip.
//! let back = serde_json::to_value(&message.content[0])?;
//! assert_eq!(back["caller"]["type"], "direct");
//! # Ok::<(), serde_json::Error>(())
//! ```
#![deny(missing_docs)]

mod canonical;
mod content;
mod error;
mod ids;
mod message;
mod raw_json;
mod request;
mod stream;
mod tagged;

pub use canonical::canonical_json;
pub use content::{
    CacheControl, Citation, CompactionBlock, ContentBlock, DocumentBlock, FallbackBlock,
    ImageBlock, OtherBlock, RedactedThinkingBlock, ServerToolResultBlock, TextBlock, ThinkingBlock,
    ToolResultBlock, ToolResultContent, ToolUseBlock,
};
pub use error::{ApiErrorBody, ApiErrorDetail, ErrorKind};
pub use ids::{MessageId, ToolUseId};
pub use message::{Message, MessageParam, Role, StopReason, Usage};
pub use request::{
    CreateMessageRequest, Effort, Metadata, OutputConfig, SystemBlock, SystemBlockKind,
    SystemPrompt, ThinkingConfig, ToolChoice, ToolDefinition,
};
pub use stream::{
    BlockStatus, CompletedBlock, ContentDelta, DeltaUsage, InvalidToolInput, MessageDelta,
    StreamEvent,
};

/// A JSON object with its keys in the order they arrived (serde_json's `preserve_order`).
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
