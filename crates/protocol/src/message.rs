//! Messages: the model's response and the entries of a request's history.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::JsonObject;
use crate::content::ContentBlock;
use crate::ids::MessageId;
use crate::tagged::skip_none;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person or the client (tool results are user messages).
    User,
    /// The model.
    Assistant,
}

/// Why the model stopped. Unknown reasons deserialize into [`StopReason::Other`] and serialize
/// back unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// `end_turn`: the model finished its answer.
    EndTurn,
    /// `max_tokens`: the output cap was hit; the last block may be cut off.
    MaxTokens,
    /// `stop_sequence`: one of the request's stop sequences was produced.
    StopSequence,
    /// `tool_use`: the model wants tool results before going on.
    ToolUse,
    /// `pause_turn`: a long server-tool turn was paused; send the response back to resume.
    PauseTurn,
    /// `refusal`: the model declined for safety reasons.
    Refusal,
    /// `model_context_window_exceeded`: the context window filled up while generating.
    ModelContextWindowExceeded,
    /// A reason this crate does not know yet.
    Other(String),
}

impl StopReason {
    /// The wire string, such as `"end_turn"`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::EndTurn => "end_turn",
            Self::MaxTokens => "max_tokens",
            Self::StopSequence => "stop_sequence",
            Self::ToolUse => "tool_use",
            Self::PauseTurn => "pause_turn",
            Self::Refusal => "refusal",
            Self::ModelContextWindowExceeded => "model_context_window_exceeded",
            Self::Other(other) => other,
        }
    }

    /// Parses a wire string; never fails (unknown strings become [`StopReason::Other`]).
    pub fn parse(reason: &str) -> Self {
        match reason {
            "end_turn" => Self::EndTurn,
            "max_tokens" => Self::MaxTokens,
            "stop_sequence" => Self::StopSequence,
            "tool_use" => Self::ToolUse,
            "pause_turn" => Self::PauseTurn,
            "refusal" => Self::Refusal,
            "model_context_window_exceeded" => Self::ModelContextWindowExceeded,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let reason = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::parse(&reason))
    }
}

/// Token usage of one response, all counts in tokens.
///
/// In a stream, message_start carries the first values and each message_delta overwrites the
/// fields it carries (they are cumulative totals, not increments). Fields this crate does not
/// model (`cache_creation`, `server_tool_use`, `service_tier`, `iterations`, ...) stay in
/// `extra`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Usage {
    /// Input tokens not read from or written to the prompt cache.
    #[serde(default)]
    pub input_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Input tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Output tokens generated.
    #[serde(default)]
    pub output_tokens: u64,
    /// Fields this crate does not model, kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Usage {
    /// All input tokens of the request: uncached + cache writes + cache reads.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens
            + self.cache_creation_input_tokens.unwrap_or(0)
            + self.cache_read_input_tokens.unwrap_or(0)
    }

    /// The web searches the server ran for the response
    /// (`server_tool_use.web_search_requests`; 0 when absent).
    pub fn web_search_requests(&self) -> u64 {
        self.extra
            .get("server_tool_use")
            .and_then(|server| server.get("web_search_requests"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    }

    /// Input plus output tokens: what the request occupied of the context window.
    pub fn context_tokens(&self) -> u64 {
        self.total_input_tokens() + self.output_tokens
    }

    /// Adds `other` field by field: the counts add up; a cache figure is `None` only when
    /// both are (a server that never reports caching keeps reporting none).
    pub fn accumulate(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        for (sum, part) in [
            (
                &mut self.cache_creation_input_tokens,
                other.cache_creation_input_tokens,
            ),
            (
                &mut self.cache_read_input_tokens,
                other.cache_read_input_tokens,
            ),
        ] {
            if let Some(part) = part {
                *sum = Some(sum.unwrap_or(0) + part);
            }
        }
    }
}

/// A model response (`"type":"message"`), as returned by a non-streaming call or accumulated
/// from a stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// Response id.
    pub id: MessageId,
    /// Always `"message"`.
    #[serde(rename = "type", default = "message_type")]
    pub kind: String,
    /// Always [`Role::Assistant`] for responses.
    pub role: Role,
    /// The model that served the response (relabelled by a `fallback` block).
    pub model: String,
    /// The content blocks in order.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Why the model stopped; `None` until message_delta in a stream.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub stop_reason: Option<StopReason>,
    /// The stop sequence produced, when `stop_reason` is `stop_sequence`.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub stop_sequence: Option<String>,
    /// Structured detail on the stop (for example a refusal's category), as sent.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub stop_details: Option<Value>,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Fields this crate does not model (`container`, `context_management`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn message_type() -> String {
    "message".to_owned()
}

// `Usage` and `Message` read their fields by hand instead of `#[derive(Deserialize)]` with
// `#[serde(flatten)]`: flatten makes serde buffer the whole object as generic content first,
// which cost message_start decoding most of its time. Same rules as the derive: known fields
// typed (a duplicate is an error, a missing required one too), every other field into `extra`
// in arrival order.

/// A map key, borrowed from the input when it has no escapes: `Cow<str>`'s own
/// `Deserialize` copies every key into a `String`.
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(key.to_owned())))
            }
            fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// Reads the value of a known field into `target`; a field given twice is an error, as with
/// `#[derive(Deserialize)]`.
fn next_once<'de, A: serde::de::MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    target: &mut Option<T>,
    name: &str,
) -> Result<(), A::Error> {
    if target.is_some() {
        return Err(A::Error::custom(format_args!("duplicate field `{name}`")));
    }
    *target = Some(map.next_value()?);
    Ok(())
}

/// A usage object as read by [`read_usage`]: each of the four counts `None` when absent,
/// every other field in arrival order.
pub(crate) struct UsageFields<T> {
    pub(crate) input: Option<T>,
    pub(crate) cache_creation: Option<Option<u64>>,
    pub(crate) cache_read: Option<Option<u64>>,
    pub(crate) output: Option<T>,
    pub(crate) extra: JsonObject,
}

/// Reads a usage object's fields, for [`Usage`] and `DeltaUsage` alike: `T` is how the input
/// and output counts are read (`u64`, which refuses `null`, or `Option<u64>`); a count given
/// twice is an error.
pub(crate) fn read_usage<'de, A: serde::de::MapAccess<'de>, T: Deserialize<'de>>(
    mut map: A,
) -> Result<UsageFields<T>, A::Error> {
    let (mut input, mut cache_creation, mut cache_read, mut output) = (None, None, None, None);
    let mut extra = JsonObject::new();
    while let Some(Key(key)) = map.next_key()? {
        match key.as_ref() {
            "input_tokens" => next_once(&mut map, &mut input, &key)?,
            "cache_creation_input_tokens" => next_once(&mut map, &mut cache_creation, &key)?,
            "cache_read_input_tokens" => next_once(&mut map, &mut cache_read, &key)?,
            "output_tokens" => next_once(&mut map, &mut output, &key)?,
            _ => {
                extra.insert(key.into_owned(), map.next_value()?);
            }
        }
    }
    Ok(UsageFields {
        input,
        cache_creation,
        cache_read,
        output,
        extra,
    })
}

impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Usage;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a usage object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Usage, A::Error> {
                let fields = read_usage::<A, u64>(map)?;
                Ok(Usage {
                    input_tokens: fields.input.unwrap_or_default(),
                    cache_creation_input_tokens: fields.cache_creation.flatten(),
                    cache_read_input_tokens: fields.cache_read.flatten(),
                    output_tokens: fields.output.unwrap_or_default(),
                    extra: fields.extra,
                })
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Message;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Message, A::Error> {
                let (mut id, mut kind, mut role, mut model, mut content) =
                    (None, None, None, None, None);
                let (mut stop_reason, mut stop_sequence, mut stop_details, mut usage) =
                    (None, None, None, None);
                let mut extra = JsonObject::new();
                while let Some(Key(key)) = map.next_key()? {
                    match key.as_ref() {
                        "id" => next_once(&mut map, &mut id, &key)?,
                        "type" => next_once(&mut map, &mut kind, &key)?,
                        "role" => next_once(&mut map, &mut role, &key)?,
                        "model" => next_once(&mut map, &mut model, &key)?,
                        "content" => next_once(&mut map, &mut content, &key)?,
                        "stop_reason" => next_once(&mut map, &mut stop_reason, &key)?,
                        "stop_sequence" => next_once(&mut map, &mut stop_sequence, &key)?,
                        "stop_details" => next_once(&mut map, &mut stop_details, &key)?,
                        "usage" => next_once(&mut map, &mut usage, &key)?,
                        _ => {
                            extra.insert(key.into_owned(), map.next_value()?);
                        }
                    }
                }
                Ok(Message {
                    id: id.ok_or_else(|| A::Error::missing_field("id"))?,
                    kind: kind.unwrap_or_else(message_type),
                    role: role.ok_or_else(|| A::Error::missing_field("role"))?,
                    model: model.ok_or_else(|| A::Error::missing_field("model"))?,
                    content: content.unwrap_or_default(),
                    stop_reason: stop_reason.flatten(),
                    stop_sequence: stop_sequence.flatten(),
                    stop_details: stop_details.flatten(),
                    usage: usage.unwrap_or_default(),
                    extra,
                })
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

impl Message {
    /// The concatenated text of all text blocks.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect()
    }

    /// This response as a history entry to send back to the API.
    pub fn to_param(&self) -> MessageParam {
        MessageParam {
            role: self.role,
            content: self.content.clone(),
        }
    }
}

/// One entry of a request's `messages`: a role and its content blocks. A plain string content
/// is accepted on input and becomes one text block.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessageParam {
    /// `user` or `assistant`.
    pub role: Role,
    /// The blocks, in order.
    pub content: Vec<ContentBlock>,
}

impl MessageParam {
    /// A user message with one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }
}

impl<'de> Deserialize<'de> for MessageParam {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Content {
            Text(String),
            Blocks(Vec<ContentBlock>),
        }
        #[derive(Deserialize)]
        struct Raw {
            role: Role,
            content: Value,
        }
        let raw = Raw::deserialize(deserializer)?;
        let content = match raw.content {
            Value::String(text) => vec![ContentBlock::text(text)],
            other => match serde_json::from_value::<Content>(other).map_err(D::Error::custom)? {
                Content::Text(text) => vec![ContentBlock::text(text)],
                Content::Blocks(blocks) => blocks,
            },
        };
        Ok(Self {
            role: raw.role,
            content,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn message_and_usage_read_known_fields_and_keep_the_rest_in_order() {
        let json = r#"{"model":"m","id":"msg_1","zeta":1,"type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"output_tokens":5,"service_tier":"standard","input_tokens":3,"cache_creation":{"a":1}},"alpha":{"b":[2]}}"#;
        let message: Message = serde_json::from_str(json).unwrap();
        assert_eq!(
            (message.id.as_str(), message.model.as_str()),
            ("msg_1", "m")
        );
        assert_eq!(message.stop_reason, None);
        assert_eq!(
            (message.usage.input_tokens, message.usage.output_tokens),
            (3, 5)
        );
        assert_eq!(message.usage.cache_read_input_tokens, None);
        let keys: Vec<&String> = message.extra.keys().collect();
        assert_eq!(keys, ["zeta", "alpha"]);
        let usage_keys: Vec<&String> = message.usage.extra.keys().collect();
        assert_eq!(usage_keys, ["service_tier", "cache_creation"]);
        // Through a `Value` too (transcripts are read that way).
        let value: Value = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::from_value::<Message>(value).unwrap(), message);
        for (bad, says) in [
            (r#"{"role":"assistant","model":"m"}"#, "missing field `id`"),
            (
                r#"{"id":"a","id":"b","role":"assistant","model":"m"}"#,
                "duplicate field `id`",
            ),
            (
                r#"{"id":"a","role":"assistant","model":"m","usage":{"output_tokens":null}}"#,
                "invalid type: null",
            ),
            (
                r#"{"id":"a","role":"assistant","model":"m","usage":{"input_tokens":1,"input_tokens":2}}"#,
                "duplicate field `input_tokens`",
            ),
            (r#"[1]"#, "expected a message object"),
        ] {
            let error = serde_json::from_str::<Message>(bad)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    use super::*;

    #[test]
    fn stop_reasons_round_trip_including_unknown() {
        for reason in [
            "end_turn",
            "max_tokens",
            "tool_use",
            "pause_turn",
            "refusal",
            "brand_new",
        ] {
            let parsed: StopReason = serde_json::from_str(&format!("\"{reason}\"")).unwrap();
            assert_eq!(
                serde_json::to_string(&parsed).unwrap(),
                format!("\"{reason}\"")
            );
        }
        assert_eq!(
            StopReason::parse("brand_new"),
            StopReason::Other("brand_new".into())
        );
    }

    #[test]
    fn usage_totals() {
        let usage: Usage = serde_json::from_str(
            r#"{"input_tokens":6,"cache_creation_input_tokens":3337,"cache_read_input_tokens":6289,"output_tokens":10,"service_tier":"standard"}"#,
        )
        .unwrap();
        assert_eq!(usage.total_input_tokens(), 9632);
        assert_eq!(usage.context_tokens(), 9642);
        assert_eq!(usage.extra["service_tier"], "standard");
    }

    #[test]
    fn message_param_accepts_string_content() {
        let param: MessageParam =
            serde_json::from_str(r#"{"role":"user","content":"hi"}"#).unwrap();
        assert_eq!(param, MessageParam::user_text("hi"));
        assert_eq!(
            serde_json::to_string(&param).unwrap(),
            r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#
        );
    }
}
