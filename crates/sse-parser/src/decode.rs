//! Typed decoding of Anthropic Messages API stream events.
//!
//! Guarantees:
//! - The JSON `type` of the data decides the event (the SSE `event:` name is the same on the
//!   wire, but event-per-line fixtures have none).
//! - Unknown event types and unknown delta types are skipped and counted, never fatal: the API
//!   adds new ones without notice.
//! - A `content_block_delta` is decoded in one pass over its bytes, with no intermediate
//!   `serde_json::Value`.

use std::borrow::Cow;

use protocol::{
    ApiErrorBody, Citation, ContentBlock, ContentDelta, DeltaUsage, JsonObject, Message,
    MessageDelta, ServerToolResultBlock, StopReason, StreamEvent, TextBlock, ThinkingBlock,
    ToolUseBlock, ToolUseId,
};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::frame::{SseEvent, SseEventRef};

/// What went wrong while decoding one event.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The data is not the JSON the event type requires.
    #[error(
        "event {event_index} ({event_type}): invalid JSON: {source}; data starts with {preview:?}"
    )]
    Json {
        /// 0-based index of the event in the stream (unknown events included).
        event_index: u64,
        /// The event's type (from the JSON when readable, else the SSE `event:` name).
        event_type: String,
        /// What serde_json said, with line and column inside the data.
        source: serde_json::Error,
        /// The first 120 bytes of the data, for the error message.
        preview: String,
    },
    /// The JSON is well formed but a required field is missing.
    #[error("event {event_index} ({event_type}): missing `{field}`")]
    MissingField {
        /// 0-based index of the event in the stream.
        event_index: u64,
        /// The event's type.
        event_type: String,
        /// The missing field.
        field: &'static str,
    },
}

impl DecodeError {
    /// 0-based index of the failing event in the stream.
    pub fn event_index(&self) -> u64 {
        match self {
            Self::Json { event_index, .. } | Self::MissingField { event_index, .. } => *event_index,
        }
    }
}

/// Decodes [`SseEvent`]s into typed [`StreamEvent`]s, counting what it skips.
///
/// ```
/// use protocol::{ContentDelta, StreamEvent};
/// use sse_parser::{Decoder, SseEvent};
///
/// let mut decoder = Decoder::new();
/// let event = SseEvent::new(
///     "content_block_delta",
///     r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
///     "",
/// );
/// let decoded = decoder.decode(&event)?;
/// assert_eq!(
///     decoded,
///     Some(StreamEvent::ContentBlockDelta { index: 0, delta: ContentDelta::Text { text: "Hi".into() } })
/// );
/// # Ok::<(), sse_parser::DecodeError>(())
/// ```
#[derive(Debug, Default)]
pub struct Decoder {
    events: u64,
    unknown_events: u64,
    unknown_deltas: u64,
}

/// The event types this decoder knows; any other is skipped.
const KNOWN_EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "ping",
    "error",
];

/// The fields of any stream event, read in one pass; nested parts stay raw until the type is
/// known.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow)]
    ty: Cow<'a, str>,
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    delta: Option<RawDelta<'a>>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content_block: Option<&'a RawValue>,
}

/// A string borrowed from the input when it has no escapes. (serde does not borrow through
/// `Option<Cow<str>>` by itself: without this newtype every value would be copied.)
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

impl Str<'_> {
    fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

/// The fields of any `delta` object (content deltas and message_delta's delta).
#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(rename = "type", borrow, default)]
    ty: Option<Str<'a>>,
    #[serde(borrow, default)]
    text: Option<Str<'a>>,
    #[serde(borrow, default)]
    partial_json: Option<Str<'a>>,
    #[serde(borrow, default)]
    thinking: Option<Str<'a>>,
    #[serde(borrow, default)]
    signature: Option<Str<'a>>,
    #[serde(borrow, default)]
    citation: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    encrypted_content: Option<&'a RawValue>,
}

impl Decoder {
    /// A decoder with zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Events decoded or skipped so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Events skipped because their type is unknown.
    pub fn unknown_events(&self) -> u64 {
        self.unknown_events
    }

    /// Deltas skipped because their type is unknown.
    pub fn unknown_deltas(&self) -> u64 {
        self.unknown_deltas
    }

    /// Decodes one event. `Ok(None)` means the event was skipped (unknown event or delta type).
    ///
    /// # Errors
    ///
    /// [`DecodeError`] when the data is not the JSON its type requires; the error names the
    /// event's index and type.
    pub fn decode(&mut self, event: &SseEvent) -> Result<Option<StreamEvent>, DecodeError> {
        self.decode_json(event.data(), || event.event_type().into_owned())
    }

    /// Decodes one borrowed event (see [`crate::Framer::next_event_ref`]); the same as
    /// [`Decoder::decode`].
    ///
    /// # Errors
    ///
    /// As [`Decoder::decode`].
    pub fn decode_ref(
        &mut self,
        event: &SseEventRef<'_>,
    ) -> Result<Option<StreamEvent>, DecodeError> {
        self.decode_json(event.data(), || event.event_type().into_owned())
    }

    /// Decodes one event from its JSON data alone (the form of event-per-line fixtures).
    ///
    /// # Errors
    ///
    /// As [`Decoder::decode`].
    pub fn decode_data(&mut self, data: &[u8]) -> Result<Option<StreamEvent>, DecodeError> {
        self.decode_json(data, || "unknown".to_owned())
    }

    fn decode_json(
        &mut self,
        data: &[u8],
        sse_name: impl FnOnce() -> String,
    ) -> Result<Option<StreamEvent>, DecodeError> {
        let event_index = self.events;
        self.events += 1;
        let json_error = |source: serde_json::Error, event_type: String| DecodeError::Json {
            event_index,
            event_type,
            source,
            preview: String::from_utf8_lossy(&data[..data.len().min(120)]).into_owned(),
        };
        if let Some(event) = fast_delta(data).or_else(|| fast_server_result(data)) {
            return Ok(Some(event));
        }
        // Validate UTF-8 once for the whole event; the JSON parser then skips it per string.
        let Ok(text) = simdutf8::basic::from_utf8(data) else {
            let source = serde_json::from_slice::<serde::de::IgnoredAny>(data)
                .err()
                .unwrap_or_else(|| serde::de::Error::custom("invalid UTF-8"));
            return Err(json_error(source, sse_name()));
        };
        if let Some(event) = fast_start(text).or_else(|| fast_other(text)) {
            return Ok(Some(event));
        }
        self.generic(text, event_index, json_error, sse_name)
    }

    /// The decoder for every event and layout: the envelope first, then the part its type
    /// names.
    fn generic(
        &mut self,
        text: &str,
        event_index: u64,
        json_error: impl Fn(serde_json::Error, String) -> DecodeError,
        sse_name: impl FnOnce() -> String,
    ) -> Result<Option<StreamEvent>, DecodeError> {
        let envelope: Envelope<'_> = match serde_json::from_str(text) {
            Ok(envelope) => envelope,
            Err(source) => {
                // An event type this decoder does not know may shape its fields differently
                // (a `delta` or `index` of another type): skip it rather than fail.
                #[derive(Deserialize)]
                struct TypeOnly<'a> {
                    #[serde(rename = "type", borrow)]
                    ty: Cow<'a, str>,
                }
                if let Ok(TypeOnly { ty }) = serde_json::from_str::<TypeOnly<'_>>(text)
                    && !KNOWN_EVENTS.contains(&ty.as_ref())
                {
                    self.unknown_events += 1;
                    return Ok(None);
                }
                return Err(json_error(source, sse_name()));
            }
        };
        let ty = envelope.ty.as_ref();
        let missing = |field| DecodeError::MissingField {
            event_index,
            event_type: ty.to_owned(),
            field,
        };
        let index = || envelope.index.ok_or_else(|| missing("index"));
        let event = match ty {
            "content_block_delta" => {
                let index = index()?;
                let delta = envelope.delta.ok_or_else(|| missing("delta"))?;
                match self.content_delta(delta, event_index)? {
                    Some(delta) => StreamEvent::ContentBlockDelta { index, delta },
                    None => return Ok(None),
                }
            }
            "ping" => StreamEvent::Ping,
            "content_block_stop" => StreamEvent::ContentBlockStop { index: index()? },
            "content_block_start" => {
                let index = index()?;
                let raw = envelope
                    .content_block
                    .ok_or_else(|| missing("content_block"))?;
                let content_block: ContentBlock = serde_json::from_str(raw.get())
                    .map_err(|source| json_error(source, ty.to_owned()))?;
                StreamEvent::ContentBlockStart {
                    index,
                    content_block: Box::new(content_block),
                }
            }
            "message_start" => {
                let raw = envelope.message.ok_or_else(|| missing("message"))?;
                let message: Message = serde_json::from_str(raw.get())
                    .map_err(|source| json_error(source, ty.to_owned()))?;
                StreamEvent::MessageStart {
                    message: Box::new(message),
                }
            }
            "message_delta" => {
                let object: JsonObject = serde_json::from_str(text)
                    .map_err(|source| json_error(source, ty.to_owned()))?;
                StreamEvent::MessageDelta(Box::new(
                    message_delta(object).map_err(|source| json_error(source, ty.to_owned()))?,
                ))
            }
            "message_stop" => StreamEvent::MessageStop,
            "error" => {
                let body: ApiErrorBody = serde_json::from_str(text)
                    .map_err(|source| json_error(source, ty.to_owned()))?;
                StreamEvent::Error(Box::new(body))
            }
            _ => {
                self.unknown_events += 1;
                return Ok(None);
            }
        };
        Ok(Some(event))
    }

    fn content_delta(
        &mut self,
        delta: RawDelta<'_>,
        event_index: u64,
    ) -> Result<Option<ContentDelta>, DecodeError> {
        let Some(ty) = delta.ty else {
            return Err(DecodeError::MissingField {
                event_index,
                event_type: "content_block_delta".to_owned(),
                field: "delta.type",
            });
        };
        let missing = |field| DecodeError::MissingField {
            event_index,
            event_type: "content_block_delta".to_owned(),
            field,
        };
        Ok(Some(match ty.0.as_ref() {
            "text_delta" => ContentDelta::Text {
                text: delta
                    .text
                    .ok_or_else(|| missing("delta.text"))?
                    .into_owned(),
            },
            "input_json_delta" => ContentDelta::InputJson {
                partial_json: delta
                    .partial_json
                    .ok_or_else(|| missing("delta.partial_json"))?
                    .into_owned(),
            },
            "thinking_delta" => ContentDelta::Thinking {
                thinking: delta
                    .thinking
                    .ok_or_else(|| missing("delta.thinking"))?
                    .into_owned(),
            },
            "signature_delta" => ContentDelta::Signature {
                signature: delta
                    .signature
                    .ok_or_else(|| missing("delta.signature"))?
                    .into_owned(),
            },
            "citations_delta" => {
                let raw = delta.citation.ok_or_else(|| missing("delta.citation"))?;
                let json_error = |source| DecodeError::Json {
                    event_index,
                    event_type: "content_block_delta".to_owned(),
                    source,
                    preview: raw.get().chars().take(120).collect(),
                };
                // Kept as sent when it passes the check; a key given twice is read as a
                // `Value` reads it (the last one wins) and written out again.
                let citation = match Citation::from_raw(raw.to_owned()) {
                    Ok(citation) => citation,
                    Err(_) => serde_json::from_str::<Value>(raw.get())
                        .and_then(|value| Citation::from_value(&value))
                        .map_err(json_error)?,
                };
                ContentDelta::Citations { citation }
            }
            "compaction_delta" => {
                let field = |raw: Option<&RawValue>| -> Result<Option<String>, DecodeError> {
                    raw.map(|raw| serde_json::from_str::<Option<String>>(raw.get()))
                        .transpose()
                        .map(Option::flatten)
                        .map_err(|source| DecodeError::Json {
                            event_index,
                            event_type: "content_block_delta".to_owned(),
                            source,
                            preview: raw
                                .map(|raw| raw.get().chars().take(120).collect())
                                .unwrap_or_default(),
                        })
                };
                ContentDelta::Compaction {
                    content: field(delta.content)?,
                    encrypted_content: field(delta.encrypted_content)?,
                }
            }
            _ => {
                self.unknown_deltas += 1;
                return Ok(None);
            }
        }))
    }
}

/// The common case, decoded without the generic path: a text, input JSON or thinking delta in
/// the exact compact layout the API sends
/// (`{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"…"}}`,
/// optionally followed by JSON whitespace). It works on the bytes: the fixed prefix is compared,
/// and only the one string is checked for UTF-8 and decoded ([`json_string`]), straight into
/// the delta's `String` (its one allocation). Anything else, an extra field, another order, an
/// invalid string, returns `None` and goes through the generic decoder (which reports the
/// errors), so this can only be faster, never different.
fn fast_delta(data: &[u8]) -> Option<StreamEvent> {
    let rest = data.strip_prefix(br#"{"type":"content_block_delta","index":"#)?;
    let (index, rest) = leading_index(rest)?;
    let rest = rest.strip_prefix(br#","delta":{"type":""#)?;
    type Make = fn(String) -> ContentDelta;
    let (rest, make): (&[u8], Make) =
        if let Some(rest) = rest.strip_prefix(br#"text_delta","text":"#) {
            (rest, |text| ContentDelta::Text { text })
        } else if let Some(rest) = rest.strip_prefix(br#"input_json_delta","partial_json":"#) {
            (rest, |partial_json| ContentDelta::InputJson {
                partial_json,
            })
        } else if let Some(rest) = rest.strip_prefix(br#"thinking_delta","thinking":"#) {
            (rest, |thinking| ContentDelta::Thinking { thinking })
        } else if let Some(rest) = rest.strip_prefix(br#"signature_delta","signature":"#) {
            (rest, |signature| ContentDelta::Signature { signature })
        } else {
            return None;
        };
    let (value, tail) = json_string(rest)?;
    let tail = skip_whitespace(tail).strip_prefix(b"}")?;
    let tail = skip_whitespace(tail).strip_prefix(b"}")?;
    if !skip_whitespace(tail).is_empty() {
        return None;
    }
    Some(StreamEvent::ContentBlockDelta {
        index,
        delta: make(value),
    })
}

/// `bytes` after any leading JSON whitespace (space, tab, LF, CR: RFC 8259, section 2).
fn skip_whitespace(bytes: &[u8]) -> &[u8] {
    let blank = bytes
        .iter()
        .take_while(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
        .count();
    &bytes[blank..]
}

/// The JSON string at the start of `bytes`, decoded, and the bytes after its closing quote;
/// `None` when `bytes` does not start with a string serde_json would accept (a control
/// character, invalid UTF-8, a bad or lone-surrogate escape, no closing quote).
///
/// One pass over the bytes copies the escape-free runs and decodes the escapes into one buffer
/// allocated once (the delta's `String`); one UTF-8 check of the result hands it over without
/// a copy.
fn json_string(bytes: &[u8]) -> Option<(String, &[u8])> {
    /// Bytes that end a run: `"`, `\`, and the control characters JSON forbids in strings.
    const SPECIAL: [bool; 256] = {
        let mut table = [false; 256];
        let mut byte = 0;
        while byte < 0x20 {
            table[byte] = true;
            byte += 1;
        }
        table[b'"' as usize] = true;
        table[b'\\' as usize] = true;
        table
    };
    let body = bytes.strip_prefix(b"\"")?;
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    let mut run = 0;
    loop {
        // The next byte that ends the run: eight bytes at a time while eight are left.
        at = loop {
            match body.get(at..).and_then(<[u8]>::first_chunk::<8>) {
                Some(word) => match special_bytes(u64::from_le_bytes(*word)) {
                    0 => at += 8,
                    mask => break at + mask.trailing_zeros() as usize / 8,
                },
                None => {
                    break at
                        + body[at..]
                            .iter()
                            .position(|&byte| SPECIAL[usize::from(byte)])?;
                }
            }
        };
        out.extend_from_slice(&body[run..at]);
        match body[at] {
            b'"' => break,
            b'\\' => {
                let used = escape(&body[at + 1..], &mut out)?;
                at += 1 + used;
                run = at;
            }
            _ => return None,
        }
    }
    let text = String::from_utf8(out).ok()?;
    Some((text, &body[at + 1..]))
}

/// The bytes of `word` (eight bytes, the first in the low bits) that are `"`, `\` or below
/// 0x20 (the bytes that end a run of a JSON string), as the high bit of each such byte, by
/// the usual SWAR tests: a byte is zero in `x` when the high bit of `(x - 0x01…) & !x &
/// 0x80…` is set for it; a byte below n sets it in `(x - n…) & !x & 0x80…`. A borrow can only
/// mark bytes above a true one, so the lowest bit set is exact: `trailing_zeros() / 8` is the
/// first such byte's index.
fn special_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let quote = zero_in(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_in(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    quote | backslash | control
}

/// Decodes the escape at the start of `escape` (which starts after the backslash) onto `out`;
/// returns the bytes it used, `None` for an escape serde_json refuses.
fn escape(escape: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let simple = match escape.first()? {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let (decoded, used) = unicode_escape(escape)?;
            out.extend_from_slice(decoded.encode_utf8(&mut [0; 4]).as_bytes());
            return Some(used);
        }
        _ => return None,
    };
    out.push(simple);
    Some(1)
}

/// The character of a `\uXXXX` escape (or a `\uXXXX\uXXXX` surrogate pair) at the start of
/// `escape` (which starts after the backslash), and the bytes it used; `None` for a bad or lone
/// surrogate, as serde_json refuses.
fn unicode_escape(escape: &[u8]) -> Option<(char, usize)> {
    let hex = |at: usize| -> Option<u32> {
        escape.get(at..at + 4)?.iter().try_fold(0, |code, &digit| {
            Some(code * 16 + char::from(digit).to_digit(16)?)
        })
    };
    let first = hex(1)?;
    match first {
        0xD800..=0xDBFF => {
            if escape.get(5..7)? != b"\\u" {
                return None;
            }
            let second = hex(7)?;
            if !(0xDC00..=0xDFFF).contains(&second) {
                return None;
            }
            let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            Some((char::from_u32(code)?, 11))
        }
        0xDC00..=0xDFFF => None,
        _ => Some((char::from_u32(first)?, 5)),
    }
}

/// The other frequent events in the compact layout the API sends, optionally followed by
/// whitespace: `content_block_stop`, `message_stop`, `ping`, a `message_delta` whose `delta`
/// holds only stop fields and which has nothing but `usage` besides (typed directly, no map),
/// and a `citations_delta` (its citation parsed where it stands). Anything else returns `None`
/// and goes through the generic decoder, so this can only be faster, never different.
fn fast_other(text: &str) -> Option<StreamEvent> {
    /// A message_delta's `delta` with the stop fields only.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct StopFields {
        #[serde(default)]
        stop_reason: Option<StopReason>,
        #[serde(default)]
        stop_sequence: Option<String>,
        #[serde(default)]
        stop_details: Option<Value>,
    }
    if let Some(rest) = text.strip_prefix(r#"{"type":"content_block_stop","index":"#) {
        let (index, rest) = leading_index(rest.as_bytes())?;
        closing_brace(&text[text.len() - rest.len()..])?;
        return Some(StreamEvent::ContentBlockStop { index });
    }
    if let Some(rest) = text.strip_prefix(r#"{"type":"message_stop""#) {
        closing_brace(rest)?;
        return Some(StreamEvent::MessageStop);
    }
    if let Some(rest) = text.strip_prefix(r#"{"type":"ping""#) {
        closing_brace(rest)?;
        return Some(StreamEvent::Ping);
    }
    if let Some(rest) = text.strip_prefix(r#"{"type":"message_delta","delta":"#)
        && shallow(text)
    {
        // The generic decoder ignores a `delta` that is not an object; a derived struct would
        // read an array positionally.
        if !rest.starts_with('{') {
            return None;
        }
        let (stop, rest) = parse_prefix::<StopFields>(rest)?;
        let rest = rest.strip_prefix(r#","usage":"#)?;
        let (usage, rest) = parse_prefix::<Option<DeltaUsage>>(rest)?;
        closing_brace(rest)?;
        return Some(StreamEvent::MessageDelta(Box::new(MessageDelta {
            stop_reason: stop.stop_reason,
            stop_sequence: stop.stop_sequence,
            stop_details: stop.stop_details.filter(|details| !details.is_null()),
            usage,
            ..MessageDelta::default()
        })));
    }
    let rest = text.strip_prefix(r#"{"type":"content_block_delta","index":"#)?;
    let (index, rest) = leading_index(rest.as_bytes())?;
    let rest = text[text.len() - rest.len()..]
        .strip_prefix(r#","delta":{"type":"citations_delta","citation":"#)?;
    if !shallow(text) {
        return None;
    }
    let (citation, rest) = parse_prefix::<&RawValue>(rest)?;
    let citation = Citation::from_raw(citation.to_owned()).ok()?;
    let rest = skip_whitespace(rest.as_bytes()).strip_prefix(b"}")?;
    // Only ASCII was skipped: `rest` starts on a character boundary.
    closing_brace(&text[text.len() - rest.len()..])?;
    Some(StreamEvent::ContentBlockDelta {
        index,
        delta: ContentDelta::Citations { citation },
    })
}

/// `message_start` and `content_block_start` in the compact layout the API sends
/// (`{"type":"message_start","message":{…}}`, `{"type":"content_block_start","index":N,
/// "content_block":{…}}`, optionally followed by whitespace): the nested object is parsed where
/// it stands instead of being captured raw first and parsed again, and the usual opening
/// blocks (an empty text, an empty thinking, a tool_use or server_tool_use with its id, name
/// and empty input) are
/// built without the generic map path. Anything else returns `None` and goes through the
/// generic decoder (which also reports the errors), so this can only be faster, never
/// different.
fn fast_start(text: &str) -> Option<StreamEvent> {
    if let Some(rest) = text.strip_prefix(r#"{"type":"message_start","message":"#) {
        let (message, tail) = parse_prefix::<Message>(rest)?;
        closing_brace(tail)?;
        return Some(StreamEvent::MessageStart {
            message: Box::new(message),
        });
    }
    let rest = text.strip_prefix(r#"{"type":"content_block_start","index":"#)?;
    let (index, rest) = leading_index(rest.as_bytes())?;
    // The prefix is ASCII, so the rest starts on a character boundary.
    let rest = text[text.len() - rest.len()..].strip_prefix(r#","content_block":"#)?;
    let (block, tail) = match opening_block(rest) {
        Some(found) => found,
        None => parse_prefix::<ContentBlock>(rest)?,
    };
    closing_brace(tail)?;
    Some(StreamEvent::ContentBlockStart {
        index,
        content_block: Box::new(block),
    })
}

/// The usual first state of a block, in the API's exact layout, and what follows it.
fn opening_block(text: &str) -> Option<(ContentBlock, &str)> {
    if let Some(tail) = text.strip_prefix(r#"{"type":"text","text":""}"#) {
        return Some((ContentBlock::Text(TextBlock::new("")), tail));
    }
    // A text block that will carry citations (an answer from web search) opens this way.
    if let Some(tail) = text.strip_prefix(r#"{"citations":[],"type":"text","text":""}"#) {
        let block = TextBlock {
            citations: Some(Vec::new()),
            ..TextBlock::default()
        };
        return Some((ContentBlock::Text(block), tail));
    }
    if let Some(tail) = text.strip_prefix(r#"{"type":"thinking","thinking":"","signature":""}"#) {
        let block = ThinkingBlock {
            thinking: String::new(),
            signature: String::new(),
            extra: JsonObject::new(),
        };
        return Some((ContentBlock::Thinking(block), tail));
    }
    let (rest, server) = match text.strip_prefix(r#"{"type":"tool_use","id":"#) {
        Some(rest) => (rest, false),
        None => (
            text.strip_prefix(r#"{"type":"server_tool_use","id":"#)?,
            true,
        ),
    };
    let (id, rest) = parse_prefix::<Str<'_>>(rest)?;
    let rest = rest.strip_prefix(r#","name":"#)?;
    let (name, rest) = parse_prefix::<Str<'_>>(rest)?;
    let rest = rest.strip_prefix(r#","input":{}"#)?;
    // The API now says who called the tool; the one caller it sends today is kept as sent.
    let (tail, extra) = match rest.strip_prefix(r#","caller":{"type":"direct"}}"#) {
        Some(tail) => {
            let mut caller = JsonObject::new();
            caller.insert("type".to_owned(), Value::String("direct".to_owned()));
            let mut extra = JsonObject::new();
            extra.insert("caller".to_owned(), Value::Object(caller));
            (tail, extra)
        }
        None => (rest.strip_prefix('}')?, JsonObject::new()),
    };
    let block = ToolUseBlock {
        id: ToolUseId(id.into_owned()),
        name: name.into_owned(),
        input: Value::Object(JsonObject::new()),
        cache_control: None,
        extra,
    };
    let block = if server {
        ContentBlock::ServerToolUse(block)
    } else {
        ContentBlock::ToolUse(block)
    };
    Some((block, tail))
}

/// A `content_block_start` whose block is a server tool result (often tens of kilobytes of
/// search results), read on the bytes: the prefix and the closing brace are compared as
/// ASCII, and the block's UTF-8 is checked once, with simdutf8, before serde_json's raw
/// capture reads it from `&str` (which then checks nothing again); the block is kept as its raw JSON
/// (checked, copied once, no tree built; see [`protocol::ServerToolResultBlock`]). The same
/// event as [`fast_start`] and the generic decoder give (checked in the tests); anything else
/// returns `None`.
fn fast_server_result(data: &[u8]) -> Option<StreamEvent> {
    let rest = data.strip_prefix(br#"{"type":"content_block_start","index":"#)?;
    let (index, rest) = leading_index(rest)?;
    let block = rest.strip_prefix(br#","content_block":"#)?;
    let kind = block.strip_prefix(br#"{"type":""#)?;
    if !kind[..memchr::memchr(b'"', kind)?].ends_with(b"_tool_result") {
        return None;
    }
    // The block is most of the event, often tens of kilobytes: its UTF-8 is checked with
    // SIMD (simdutf8) rather than by serde_json's raw capture, which then only scans.
    let block = simdutf8::basic::from_utf8(block).ok()?;
    let mut values = serde_json::Deserializer::from_str(block).into_iter::<&RawValue>();
    let raw = values.next()?.ok()?;
    let tail = skip_whitespace(&block.as_bytes()[values.byte_offset()..]).strip_prefix(b"}")?;
    if !skip_whitespace(tail).is_empty() {
        return None;
    }
    let block = ServerToolResultBlock::from_raw(raw.to_owned()).ok()?;
    Some(StreamEvent::ContentBlockStart {
        index,
        content_block: Box::new(ContentBlock::ServerToolResult(block)),
    })
}

/// A block index (1 to 9 digits, as the fast paths accept it) at the start of `text`, and
/// the bytes after it.
fn leading_index(text: &[u8]) -> Option<(usize, &[u8])> {
    let digits = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits == 0 || digits > 9 || (digits > 1 && text[0] == b'0') {
        return None;
    }
    let index = text[..digits]
        .iter()
        .fold(0, |index, digit| index * 10 + usize::from(digit - b'0'));
    Some((index, &text[digits..]))
}

/// One JSON value at the start of `text`, and the text after it; `None` when it does not
/// parse as a `T`.
fn parse_prefix<'a, T: Deserialize<'a>>(text: &'a str) -> Option<(T, &'a str)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, &text[values.byte_offset()..]))
}

/// `Some` when `tail` is the event object's closing brace and nothing but JSON whitespace.
fn closing_brace(tail: &str) -> Option<()> {
    let tail = skip_whitespace(tail.as_bytes()).strip_prefix(b"}")?;
    skip_whitespace(tail).is_empty().then_some(())
}

/// Whether `data` has so few `{` and `[` (strings included: the count can only be too high)
/// that no value in it can reach serde_json's nesting limit of 128, wherever a fast path
/// starts parsing it. A fast path that parses a nested value from the middle of the event
/// counts depth from there, the generic decoder (for the values it parses) from the top; past
/// this, the generic decoder decides. Values kept raw (citations, server tool results) have
/// their own limit, the same on both paths (`protocol`'s raw check: 100 from the value).
fn shallow(data: &str) -> bool {
    memchr::memchr2_iter(b'{', b'[', data.as_bytes())
        .nth(100)
        .is_none()
}

/// Splits a message_delta event object into its typed parts.
fn message_delta(mut object: JsonObject) -> Result<MessageDelta, serde_json::Error> {
    object.shift_remove("type");
    let mut delta = MessageDelta::default();
    if let Some(Value::Object(mut body)) = object.shift_remove("delta") {
        if let Some(reason) = body.shift_remove("stop_reason") {
            delta.stop_reason = Option::<StopReason>::deserialize(reason)?;
        }
        if let Some(sequence) = body.shift_remove("stop_sequence") {
            delta.stop_sequence = Option::<String>::deserialize(sequence)?;
        }
        if let Some(details) = body.shift_remove("stop_details") {
            delta.stop_details = Some(details).filter(|details| !details.is_null());
        }
        delta.delta_extra = body
            .into_iter()
            .filter(|(_, value)| !value.is_null())
            .collect();
    }
    if let Some(usage) = object.shift_remove("usage")
        && !usage.is_null()
    {
        delta.usage = Some(DeltaUsage::deserialize(usage)?);
    }
    delta.extra = object
        .into_iter()
        .filter(|(_, value)| !value.is_null())
        .collect();
    Ok(delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(json: &str) -> Result<Option<StreamEvent>, DecodeError> {
        Decoder::new().decode_data(json.as_bytes())
    }

    #[test]
    fn padded_ping_and_unknown_types() {
        let mut decoder = Decoder::new();
        assert_eq!(
            decoder.decode_data(br#"{"type": "ping"}   "#).unwrap(),
            Some(StreamEvent::Ping)
        );
        assert_eq!(
            decoder
                .decode_data(br#"{"type":"brand_new","x":1}"#)
                .unwrap(),
            None
        );
        assert_eq!(
            decoder
                .decode_data(br#"{"type":"content_block_delta","index":0,"delta":{"type":"hologram_delta"}}"#)
                .unwrap(),
            None
        );
        assert_eq!(
            (
                decoder.events(),
                decoder.unknown_events(),
                decoder.unknown_deltas()
            ),
            (3, 1, 1)
        );
    }

    #[test]
    fn the_fast_path_agrees_with_the_generic_decoder() {
        let cases = [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi \"there\" \u00e9\n"}}"#,
            r#"{"type":"content_block_delta","index":12,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}   "#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"thinking_delta","thinking":""} }"#,
        ];
        for case in cases {
            let fast = fast_delta(case.as_bytes()).expect(case);
            let generic: Envelope<'_> = serde_json::from_str(case).unwrap();
            let delta = Decoder::new()
                .content_delta(generic.delta.unwrap(), 0)
                .unwrap()
                .unwrap();
            assert_eq!(
                fast,
                StreamEvent::ContentBlockDelta {
                    index: generic.index.unwrap(),
                    delta
                },
                "{case}"
            );
        }
        // Anything unusual goes the generic way.
        for other in [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","extra":1}}"#,
            r#"{"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}} x"#,
            r#"{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\ud800"}}"#,
            "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\tb\"}}",
            "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\x0c",
        ] {
            assert_eq!(fast_delta(other.as_bytes()), None, "{other}");
        }
    }

    proptest::proptest! {
        /// Every string serde_json writes (escapes of quotes, backslashes, control characters,
        /// non-ASCII and astral characters) decodes to itself.
        #[test]
        fn json_string_decodes_what_serde_json_writes(text in ".*", ascii in "[ -~]*") {
            for text in [text, ascii] {
                let json = serde_json::to_string(&text).unwrap();
                let decoded = json_string(json.as_bytes());
                proptest::prop_assert_eq!(decoded, Some((text.clone(), &b""[..])));
            }
        }

        /// On any bytes, json_string either gives up or agrees with serde_json.
        #[test]
        fn json_string_never_disagrees_with_serde_json(
            body in proptest::collection::vec(proptest::sample::select(
                &b"ab\"\\/ubfnrtDdCc089F\x01\x7f\xc3\xa9\xff\xed\xa0\x80"[..]
            ), 0..24),
        ) {
            let mut input = b"\"".to_vec();
            input.extend_from_slice(&body);
            input.push(b'"');
            let serde = serde_json::from_slice::<String>(&input).ok();
            match json_string(&input) {
                Some((ours, [])) => {
                    proptest::prop_assert_eq!(Some(ours), serde);
                }
                Some((ours, rest)) => {
                    // The string ended early: the prefix must be a string serde_json reads alike.
                    let used = input.len() - rest.len();
                    proptest::prop_assert_eq!(
                        serde_json::from_slice::<String>(&input[..used]).ok(),
                        Some(ours)
                    );
                }
                None => {}
            }
        }
    }

    #[test]
    fn the_eight_byte_test_finds_the_first_special_byte() {
        let first = |word: [u8; 8]| match special_bytes(u64::from_le_bytes(word)) {
            0 => None,
            mask => Some(mask.trailing_zeros() as usize / 8),
        };
        for special in (0..0x20).chain([b'"', b'\\']) {
            for at in 0..8 {
                let mut word = *b"abcdefgh";
                word[at] = special;
                assert_eq!(first(word), Some(at), "{special:#x} at {at}");
                // Whatever follows it (a borrow runs upward only).
                for later in at + 1..8 {
                    for other in [0x00, 0x01, 0x1F, 0x20, 0x21, b'"', b'\\', 0x80, 0xFF] {
                        let mut word = word;
                        word[later] = other;
                        assert_eq!(
                            first(word),
                            Some(at),
                            "{special:#x} at {at}, {other:#x} at {later}"
                        );
                    }
                }
            }
        }
        for plain in (0x20..=0xFF).filter(|byte| !matches!(byte, b'"' | b'\\')) {
            assert_eq!(first([plain; 8]), None, "{plain:#x}");
        }
        assert_eq!(first(*b"!!!!!!!!"), None);
        assert_eq!(
            first([0xFF, 0x20, 0x80, 0x7F, 0x23, 0x5D, 0x5B, 0x21]),
            None
        );
    }

    #[test]
    fn json_string_refuses_what_serde_json_refuses() {
        for bad in [
            &b"\"no end"[..],
            b"\"ends in a backslash\\",
            b"\"tab\there\"",
            b"\"\\ud800\"",
            b"\"\\udc00\"",
            b"\"\\ud800\\u0041\"",
            b"\"\\u12G4\"",
            b"\"\\x\"",
            b"\"\xff\"",
            b"not a string",
        ] {
            assert_eq!(json_string(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(
            json_string(br#""a\"b\u00e9\ud83d\ude00\/" }"#),
            Some(("a\"b\u{e9}\u{1F600}/".to_owned(), &b" }"[..]))
        );
    }

    #[test]
    fn a_citation_is_kept_as_sent_unless_a_key_repeats() {
        let event = r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"a b"}}}"#;
        let Some(StreamEvent::ContentBlockDelta {
            delta: ContentDelta::Citations { citation },
            ..
        }) = decode(event).unwrap()
        else {
            panic!("a citations delta");
        };
        assert_eq!(
            citation.raw().get(),
            r#"{"type":"char_location","cited_text":"a b"}"#
        );
        // A key given twice: the fast path gives way, and the generic decoder reads it as a
        // `Value` does (the last wins), so no reader can see another citation than this one.
        let twice = r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location","type":"page_location"}}}"#;
        assert_eq!(fast_other(twice), None);
        let Some(StreamEvent::ContentBlockDelta {
            delta: ContentDelta::Citations { citation },
            ..
        }) = decode(twice).unwrap()
        else {
            panic!("a citations delta");
        };
        assert_eq!(citation.raw().get(), r#"{"type":"page_location"}"#);
        // What a `Value` refuses is refused.
        let lone = r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"cited_text":"\udead"}}}"#;
        assert!(decode(lone).is_err());
        // Found by an attack: the fast path kept a `null` citation the generic decoder
        // refused, and kept citations so deep that a transcript line holding them could not
        // be read again. Both paths now refuse what is not an object, or nests past 100.
        let event = |citation: &str| {
            format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"citations_delta","citation":{citation}}}}}"#
            )
        };
        let deep = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        for (citation, kept) in [
            ("null".to_owned(), false),
            (r#""text""#.to_owned(), false),
            ("[1]".to_owned(), false),
            ("{}".to_owned(), true),
            (deep(100), true),
            (deep(101), false),
            (deep(124), false),
        ] {
            let fast = decode(&event(&citation));
            let generic = decode(&format!(" {}", event(&citation)));
            assert_eq!(fast.is_ok(), kept, "{citation:.40}");
            assert_eq!(generic.is_ok(), kept, "{citation:.40} (generic)");
            if let (Ok(fast), Ok(generic)) = (fast, generic) {
                assert_eq!(fast, generic);
            }
        }
    }

    #[test]
    fn the_start_fast_path_agrees_with_the_generic_decoder() {
        let cases = [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":""}  }"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_\u0031","name":"Read","input":{}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
            // Not an opening shape: the nested object is parsed where it stands.
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"Read","input":{},"caller":{"type":"direct"}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"Read","input":{},"caller":{"type":"other"}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"Read","input":{},"caller":{"type":"direct"},"x":1}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":[{"type":"web_search_result","url":"u"}]}}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"bash_code_execution_tool_result","tool_use_id":"s","content":{"type":"bash_code_execution_result","stdout":"a\u0062","return_code":0}} }"#,
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":4,"content_block":{"citations":[],"type":"text","text":""}   }"#,
        ];
        for case in cases {
            let fast = fast_start(case).expect(case);
            let generic = Decoder::new()
                .decode_data(format!(" {case}").as_bytes())
                .unwrap()
                .unwrap();
            assert_eq!(fast, generic, "{case}");
            // The byte-level path for server tool results gives the same event, or gives way.
            if let Some(on_bytes) = fast_server_result(case.as_bytes()) {
                assert_eq!(on_bytes, fast, "{case}");
            }
        }
        assert!(fast_server_result(cases[7].as_bytes()).is_some());
        assert!(fast_server_result(cases[8].as_bytes()).is_some());
        // Invalid UTF-8 inside the block: refused here, an error from the generic decoder.
        let mut bad = br#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":""#.to_vec();
        bad.extend_from_slice(b"\xff\"}}");
        assert_eq!(fast_server_result(&bad), None);
        assert!(Decoder::new().decode_data(&bad).is_err());
        // Server tool results that a map would read otherwise, or refuse: the fast path
        // agrees with the generic decoder (found by an attack: a second `type` made the
        // client keep a server result that the API would read as a text block).
        for case in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":[],"type":"text","text":"SMUGGLED"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"A","content":[],"tool_use_id":"B"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":"\udead"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":1e400}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result", "tool_use_id":"s","content":"\udead"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":null,"content":[]}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"x_tool_result","tool_use_id":"s","c":0.4470021440160113e-166}}"#,
        ] {
            let generic = Decoder::new().decode_data(format!(" {case}").as_bytes());
            for fast in [fast_start(case), fast_server_result(case.as_bytes())]
                .into_iter()
                .flatten()
            {
                assert_eq!(Some(fast), *generic.as_ref().unwrap(), "{case}");
            }
            if fast_start(case).is_none() {
                assert!(generic.is_err(), "{case}");
            }
        }
        // Nesting: at most 100 from the block, on both paths (found by an attack: deeper
        // blocks were kept, and the transcript line holding them could not be read again).
        for (depth, kept) in [(99, true), (100, false), (125, false)] {
            let case = format!(
                r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"web_search_tool_result","tool_use_id":"s","content":{}1{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let fast = Decoder::new().decode_data(case.as_bytes());
            let generic = Decoder::new().decode_data(format!(" {case}").as_bytes());
            assert_eq!(
                (fast.is_ok(), generic.is_ok()),
                (kept, kept),
                "depth {depth}"
            );
            if let (Ok(fast), Ok(generic)) = (fast, generic) {
                assert_eq!(fast, generic, "depth {depth}");
            }
        }
        let smuggled = Decoder::new()
            .decode_data(br#"{"type":"content_block_start","index":0,"content_block":{"type":"web_search_tool_result","tool_use_id":"s","content":[],"type":"text","text":"SMUGGLED"}}"#)
            .unwrap();
        assert!(
            matches!(&smuggled, Some(StreamEvent::ContentBlockStart { content_block, .. }) if content_block.block_type() == "text"),
            "{smuggled:?}"
        );
        for other in [
            r#"{"type":"content_block_start","content_block":{"type":"text","text":""},"index":0}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""},"x":1}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}} y"#,
            r#"{"type":"message_start","message":{"id":"msg_1"}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":7,"name":"R","input":{}}}"#,
        ] {
            assert_eq!(fast_start(other), None, "{other}");
        }
    }

    #[test]
    fn the_other_fast_paths_agree_with_the_generic_decoder() {
        let cases = [
            r#"{"type":"content_block_stop","index":7}"#,
            r#"{"type":"content_block_stop","index":0}  "#,
            r#"{"type":"message_stop"}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":53,"server_tool_use":{"web_search_requests":1}}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber"}},"usage":null}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"brand_new","stop_details":null},"usage":{"output_tokens":1}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","cited_text":"a","url":"u"}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"EqQBCkYIB"}}"#,
        ];
        for case in cases {
            let fast = fast_delta(case.as_bytes())
                .or_else(|| fast_other(case))
                .expect(case);
            let mut decoder = Decoder::new();
            // A leading space takes the generic path.
            let generic = decoder.generic(
                &format!(" {case}"),
                0,
                |source, _| panic!("{source}"),
                || "x".to_owned(),
            );
            assert_eq!(Some(fast), generic.unwrap(), "{case}");
        }
        for other in [
            r#"{"type":"content_block_stop","index":0,"x":1}"#,
            r#"{"type":"message_stop","x":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","container":{"id":"c"}},"usage":{"output_tokens":1}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1},"context_management":{}}"#,
            r#"{"type":"message_delta","usage":{"output_tokens":1},"delta":{"stop_reason":"end_turn"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{},"x":1}}"#,
            // Only JSON's four whitespace characters may follow (found by an attack).
            "{\"type\":\"ping\"}\x0c",
            "{\"type\":\"message_stop\"}\u{a0}",
            "{\"type\":\"content_block_stop\",\"index\":0}\u{2028}",
            "{\"type\":\"content_block_stop\",\"index\":0\u{3000}}",
            "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}\x0c}}",
        ] {
            assert_eq!(fast_other(other), None, "{other}");
        }
        // Nesting: the generic decoder counts from the top of the event, so deep values are
        // left to it (found by an attack: the fast path accepted one level more).
        let deep = format!(
            r#"{{"type":"message_delta","delta":{{"stop_details":{}1{}}},"usage":null}}"#,
            "[".repeat(126),
            "]".repeat(126)
        );
        assert_eq!(fast_other(&deep), None);
        // Found by a second attack: an array `delta` was read positionally.
        let array = r#"{"type":"message_delta","delta":["end_turn"],"usage":null}"#;
        assert_eq!(fast_other(array), None);
        let Some(StreamEvent::MessageDelta(delta)) =
            Decoder::new().decode_data(array.as_bytes()).unwrap()
        else {
            panic!("a message_delta")
        };
        assert_eq!(delta.stop_reason, None);
        assert!(Decoder::new().decode_data(deep.as_bytes()).is_err());
    }

    #[test]
    fn message_delta_keeps_extras_and_overwrites_usage() {
        let event = decode(
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"container":{"id":"c1"}},"usage":{"output_tokens":53},"context_management":{"applied_edits":[]}}"#,
        )
        .unwrap()
        .unwrap();
        let StreamEvent::MessageDelta(delta) = event else {
            panic!()
        };
        assert_eq!(delta.stop_reason, Some(StopReason::EndTurn));
        assert_eq!(delta.stop_sequence, None);
        assert_eq!(delta.delta_extra["container"]["id"], "c1");
        assert_eq!(delta.usage.unwrap().output_tokens, Some(53));
        assert!(delta.extra.contains_key("context_management"));
    }

    #[test]
    fn errors_name_the_event() {
        let mut decoder = Decoder::new();
        decoder.decode_data(br#"{"type":"ping"}"#).unwrap();
        let error = decoder
            .decode_data(
                br#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
            )
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "event 1 (content_block_delta): missing `index`"
        );
        let error = decoder.decode_data(b"{not json").unwrap_err();
        assert_eq!(error.event_index(), 2);
        assert!(
            error
                .to_string()
                .starts_with("event 2 (unknown): invalid JSON"),
            "{error}"
        );
    }

    #[test]
    fn error_event_is_typed() {
        let event = decode(r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"} }"#)
            .unwrap()
            .unwrap();
        let StreamEvent::Error(body) = event else {
            panic!()
        };
        assert!(body.is_retryable());
    }
}
