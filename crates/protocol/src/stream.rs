//! Stream events of a streaming response and the completed blocks accumulated from them.
//!
//! The `sse-parser` crate decodes these from the wire; they live here so the loop and the tool
//! executor can use them without depending on the parser.

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::JsonObject;
use crate::content::{Citation, ContentBlock};
use crate::error::ApiErrorBody;
use crate::message::{Message, StopReason, Usage, read_usage};
use crate::tagged::skip_none;

/// One decoded event of a streaming Messages API response.
///
/// Serializes to the wire form (`{"type":"content_block_delta","index":0,"delta":{…}}`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// `message_start`: the response's envelope, with empty content and the first usage.
    MessageStart {
        /// The message so far (boxed: it is large, and deltas keep the enum small).
        message: Box<Message>,
    },
    /// `content_block_start`: a block opens at `index`.
    ContentBlockStart {
        /// Position of the block in the message's content.
        index: usize,
        /// The block's initial state (empty text, tool_use with `input: {}`, or a whole server
        /// tool result). Boxed to keep the enum small.
        content_block: Box<ContentBlock>,
    },
    /// `content_block_delta`: more of the block at `index`.
    ContentBlockDelta {
        /// Position of the block in the message's content.
        index: usize,
        /// The increment.
        delta: ContentDelta,
    },
    /// `content_block_stop`: the block at `index` is complete.
    ContentBlockStop {
        /// Position of the block in the message's content.
        index: usize,
    },
    /// `message_delta`: stop reason and cumulative usage.
    MessageDelta(Box<MessageDelta>),
    /// `message_stop`: the response is complete.
    MessageStop,
    /// `ping`: keep-alive.
    Ping,
    /// `error`: the API failed after the response had started (HTTP status was 200).
    Error(Box<ApiErrorBody>),
}

impl StreamEvent {
    /// The wire `type` of the event, equal to the SSE `event:` name.
    pub fn event_type(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta(_) => "message_delta",
            Self::MessageStop => "message_stop",
            Self::Ping => "ping",
            Self::Error(_) => "error",
        }
    }
}

impl Serialize for StreamEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", self.event_type())?;
        match self {
            Self::MessageStart { message } => map.serialize_entry("message", message)?,
            Self::ContentBlockStart {
                index,
                content_block,
            } => {
                map.serialize_entry("index", index)?;
                map.serialize_entry("content_block", content_block)?;
            }
            Self::ContentBlockDelta { index, delta } => {
                map.serialize_entry("index", index)?;
                map.serialize_entry("delta", delta)?;
            }
            Self::ContentBlockStop { index } => map.serialize_entry("index", index)?,
            Self::MessageDelta(delta) => {
                #[derive(Serialize)]
                struct Body<'a> {
                    #[serde(skip_serializing_if = "skip_none")]
                    stop_reason: &'a Option<StopReason>,
                    #[serde(skip_serializing_if = "skip_none")]
                    stop_sequence: &'a Option<String>,
                    #[serde(skip_serializing_if = "skip_none")]
                    stop_details: &'a Option<Value>,
                    #[serde(flatten)]
                    fields: &'a JsonObject,
                }
                map.serialize_entry(
                    "delta",
                    &Body {
                        stop_reason: &delta.stop_reason,
                        stop_sequence: &delta.stop_sequence,
                        stop_details: &delta.stop_details,
                        fields: &delta.delta_extra,
                    },
                )?;
                if let Some(usage) = &delta.usage {
                    map.serialize_entry("usage", usage)?;
                }
                for (key, value) in &delta.extra {
                    map.serialize_entry(key, value)?;
                }
            }
            Self::MessageStop | Self::Ping => {}
            Self::Error(body) => {
                map.serialize_entry("error", &body.error)?;
                if let Some(request_id) = &body.request_id {
                    map.serialize_entry("request_id", request_id)?;
                }
            }
        }
        map.end()
    }
}

/// The increment carried by a `content_block_delta`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentDelta {
    /// `text_delta`: appended to a text block.
    #[serde(rename = "text_delta")]
    Text {
        /// The text to append.
        text: String,
    },
    /// `input_json_delta`: a fragment of a tool_use's input JSON (not valid JSON by itself).
    #[serde(rename = "input_json_delta")]
    InputJson {
        /// The fragment to append.
        partial_json: String,
    },
    /// `thinking_delta`: appended to a thinking block.
    #[serde(rename = "thinking_delta")]
    Thinking {
        /// The thinking text to append.
        thinking: String,
    },
    /// `signature_delta`: sets a thinking block's signature.
    #[serde(rename = "signature_delta")]
    Signature {
        /// The signature.
        signature: String,
    },
    /// `citations_delta`: one citation appended to a text block's `citations`.
    #[serde(rename = "citations_delta")]
    Citations {
        /// The citation object (kept as received when the decoder could check it raw; see
        /// [`Citation`]).
        citation: Citation,
    },
    /// `compaction_delta`: sets a compaction block's fields.
    #[serde(rename = "compaction_delta")]
    Compaction {
        /// The readable summary.
        #[serde(skip_serializing_if = "skip_none")]
        content: Option<String>,
        /// The opaque payload.
        #[serde(skip_serializing_if = "skip_none")]
        encrypted_content: Option<String>,
    },
}

impl ContentDelta {
    /// The wire `type`, such as `"text_delta"`.
    pub fn delta_type(&self) -> &'static str {
        match self {
            Self::Text { .. } => "text_delta",
            Self::InputJson { .. } => "input_json_delta",
            Self::Thinking { .. } => "thinking_delta",
            Self::Signature { .. } => "signature_delta",
            Self::Citations { .. } => "citations_delta",
            Self::Compaction { .. } => "compaction_delta",
        }
    }
}

/// A `message_delta` event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessageDelta {
    /// The stop reason, when the event sets one.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence produced, when any.
    pub stop_sequence: Option<String>,
    /// Structured stop detail, when any.
    pub stop_details: Option<Value>,
    /// Other non-null fields of the event's `delta` (`container`, ...), set on the message.
    pub delta_extra: JsonObject,
    /// Cumulative usage; each present field overwrites the message's value.
    pub usage: Option<DeltaUsage>,
    /// Other non-null top-level fields of the event (`context_management`, ...), set on the
    /// message.
    pub extra: JsonObject,
}

/// The usage of a `message_delta`: every field optional, each present one a cumulative total
/// (tokens) that overwrites the earlier value.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeltaUsage {
    /// Uncached input tokens.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub input_tokens: Option<u64>,
    /// Input tokens written to the cache.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Output tokens so far.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub output_tokens: Option<u64>,
    /// Other fields (`server_tool_use`, `iterations`, ...); non-null ones overwrite.
    #[serde(flatten)]
    pub extra: JsonObject,
}

// By hand for the reason `Usage` is (see message.rs): `#[serde(flatten)]` buffers the whole
// object as generic content first. Same rules as that derive: the four counts typed (`null`
// is `None`, a count given twice is an error), every other field into `extra` in arrival
// order.
impl<'de> serde::Deserialize<'de> for DeltaUsage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = DeltaUsage;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a usage object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<DeltaUsage, A::Error> {
                let fields = read_usage::<A, Option<u64>>(map)?;
                Ok(DeltaUsage {
                    input_tokens: fields.input.flatten(),
                    cache_creation_input_tokens: fields.cache_creation.flatten(),
                    cache_read_input_tokens: fields.cache_read.flatten(),
                    output_tokens: fields.output.flatten(),
                    extra: fields.extra,
                })
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl Usage {
    /// Applies a message_delta's usage: each present, non-null field overwrites.
    pub fn apply_delta(&mut self, delta: &DeltaUsage) {
        if let Some(tokens) = delta.input_tokens {
            self.input_tokens = tokens;
        }
        if let Some(tokens) = delta.output_tokens {
            self.output_tokens = tokens;
        }
        if delta.cache_creation_input_tokens.is_some() {
            self.cache_creation_input_tokens = delta.cache_creation_input_tokens;
        }
        if delta.cache_read_input_tokens.is_some() {
            self.cache_read_input_tokens = delta.cache_read_input_tokens;
        }
        for (key, value) in &delta.extra {
            if !value.is_null() {
                self.extra.insert(key.clone(), value.clone());
            }
        }
    }
}

/// A content block whose `content_block_stop` has arrived (or, for the last block of a
/// `max_tokens` response, that the stream ended inside).
#[derive(Clone, Debug, PartialEq)]
pub struct CompletedBlock {
    /// Position of the block in the message's content.
    pub index: usize,
    /// The accumulated block.
    pub block: ContentBlock,
    /// Whether the block is whole.
    pub status: BlockStatus,
}

/// How whole a completed block is. A client must not run a tool_use that is not
/// [`BlockStatus::Complete`]; it answers it with an error tool_result instead.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub enum BlockStatus {
    /// The block is whole.
    #[default]
    Complete,
    /// A tool_use whose input JSON did not parse: its `input` is `{}`.
    InvalidInput(InvalidToolInput),
    /// The stream ended (stop_reason `max_tokens`) before the block's content_block_stop; for
    /// a tool use, `input` is `{}` and the cut-off JSON is kept in `raw_input`.
    Truncated {
        /// The input JSON received before the cut, for tool uses.
        raw_input: Option<String>,
    },
}

impl BlockStatus {
    /// `true` for [`BlockStatus::Complete`].
    pub fn is_complete(&self) -> bool {
        matches!(self, Self::Complete)
    }
}

/// A tool_use input that was not valid JSON (or not an object).
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidToolInput {
    /// The concatenated `input_json_delta` fragments, as received.
    pub raw: String,
    /// What the JSON parser said, with line and column.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_serializes_in_wire_form() {
        let event = StreamEvent::ContentBlockDelta {
            index: 1,
            delta: ContentDelta::InputJson {
                partial_json: "{\"a".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}"#
        );
    }

    #[test]
    fn usage_delta_overwrites_present_fields_only() {
        let mut usage: Usage = serde_json::from_str(
            r#"{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}"#,
        )
        .unwrap();
        let delta: DeltaUsage =
            serde_json::from_str(r#"{"output_tokens":65,"cache_read_input_tokens":null,"server_tool_use":{"web_search_requests":1}}"#)
                .unwrap();
        usage.apply_delta(&delta);
        assert_eq!(usage.input_tokens, 10);
        assert_eq!(usage.output_tokens, 65);
        assert_eq!(usage.cache_read_input_tokens, Some(5));
        assert_eq!(usage.extra["server_tool_use"]["web_search_requests"], 1);
    }

    /// The derive `DeltaUsage` had before it was written by hand: the reference.
    #[derive(Debug, serde::Deserialize)]
    struct DerivedDeltaUsage {
        #[serde(default)]
        input_tokens: Option<u64>,
        #[serde(default)]
        cache_creation_input_tokens: Option<u64>,
        #[serde(default)]
        cache_read_input_tokens: Option<u64>,
        #[serde(default)]
        output_tokens: Option<u64>,
        #[serde(flatten)]
        extra: JsonObject,
    }

    fn field() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop::sample::select(vec![
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "\\u006futput_tokens",
            "server_tool_use",
            "service_tier",
            "iterations",
        ]);
        let value = prop::sample::select(vec![
            "1",
            "0",
            "null",
            "-1",
            "1.5",
            "18446744073709551615",
            "\"7\"",
            "{\"web_search_requests\":1}",
            "[1,{\"a\":null}]",
            "true",
        ]);
        (key, value).prop_map(|(key, value)| format!("\"{key}\":{value}"))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

        /// On any usage object, from text and from a `Value`, the hand-written reader gives
        /// what the derive gave, or fails where it failed.
        #[test]
        fn delta_usage_reads_as_the_derive_did(
            fields in proptest::collection::vec(field(), 0..7),
        ) {
            let json = format!("{{{}}}", fields.join(","));
            let ours = serde_json::from_str::<DeltaUsage>(&json);
            let derived = serde_json::from_str::<DerivedDeltaUsage>(&json);
            proptest::prop_assert_eq!(ours.is_ok(), derived.is_ok(), "{}: {:?} / {:?}", json, ours, derived);
            if let (Ok(ours), Ok(derived)) = (&ours, &derived) {
                proptest::prop_assert_eq!(
                    (ours.input_tokens, ours.cache_creation_input_tokens, ours.cache_read_input_tokens, ours.output_tokens, &ours.extra),
                    (derived.input_tokens, derived.cache_creation_input_tokens, derived.cache_read_input_tokens, derived.output_tokens, &derived.extra),
                    "{}", json
                );
            }
            if let Ok(value) = serde_json::from_str::<Value>(&json) {
                let ours = serde_json::from_value::<DeltaUsage>(value.clone());
                let derived = serde_json::from_value::<DerivedDeltaUsage>(value);
                proptest::prop_assert_eq!(ours.is_ok(), derived.is_ok(), "{} as a Value", json);
                if let (Ok(ours), Ok(derived)) = (ours, derived) {
                    proptest::prop_assert_eq!(ours.output_tokens, derived.output_tokens);
                    proptest::prop_assert_eq!(ours.extra, derived.extra);
                }
            }
        }
    }
}
