//! Accumulation of stream events into completed content blocks and the final message.
//!
//! Guarantees:
//! - A block is reported complete the moment its `content_block_stop` arrives, never before.
//! - tool_use (and server_tool_use, mcp_tool_use) input is the concatenation of every
//!   `input_json_delta` fragment, parsed once at `content_block_stop`; with no non-empty
//!   fragment it is the input `content_block_start` carried. Input that does not parse, or is
//!   not an object, leaves `input` as `{}` and marks the block
//!   [`BlockStatus::InvalidInput`]: never a panic, never a silently wrong input.
//! - `message_delta` usage fields overwrite (they are cumulative); absent fields keep their
//!   earlier values. Other message-level fields (`container`, `context_management`, ...) are set.
//! - A `fallback` block relabels the message's `model` to the model that served it.
//! - Errors name the 0-based index of the offending event.
//!
//! Multi-message input: after `message_stop`, a `message_start` begins a new message (server
//! tool flows send several back to back). A `message_start` while a message is still open is an
//! error ([`AccumulateError::UnexpectedMessageStart`]), as is a second `message_start` before
//! any `message_stop` (a duplicated or spliced stream).

use std::fmt::Write as _;

use protocol::{
    ApiErrorBody, BlockStatus, CompletedBlock, ContentBlock, ContentDelta, InvalidToolInput,
    JsonObject, Message, MessageDelta, MessageId, StopReason, StreamEvent,
};
use serde_json::Value;

/// What went wrong while accumulating.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccumulateError {
    /// An event other than ping or error arrived before `message_start`.
    #[error("event {event_index} ({event_type}) arrived before message_start")]
    BeforeMessageStart {
        /// 0-based index of the event.
        event_index: u64,
        /// The event's type.
        event_type: &'static str,
    },
    /// A `message_start` arrived while a message was still open.
    #[error(
        "event {event_index}: message_start while message {open_message} is still open (no message_stop)"
    )]
    UnexpectedMessageStart {
        /// 0-based index of the event.
        event_index: u64,
        /// The id of the message still open.
        open_message: MessageId,
    },
    /// An event other than message_start or ping arrived after `message_stop`.
    #[error("event {event_index} ({event_type}) arrived after message_stop")]
    AfterMessageStop {
        /// 0-based index of the event.
        event_index: u64,
        /// The event's type.
        event_type: &'static str,
    },
    /// `content_block_start` for an index other than the next one.
    #[error(
        "event {event_index}: content_block_start for index {index}, expected index {expected}"
    )]
    BlockOutOfOrder {
        /// 0-based index of the event.
        event_index: u64,
        /// The index the event named.
        index: usize,
        /// The next block index.
        expected: usize,
    },
    /// A delta or stop for a block index never started.
    #[error("event {event_index} ({event_type}) for block {index}, which was never started")]
    UnknownBlock {
        /// 0-based index of the event.
        event_index: u64,
        /// The event's type.
        event_type: &'static str,
        /// The block index the event named.
        index: usize,
    },
    /// A delta or stop for a block already stopped.
    #[error("event {event_index} ({event_type}) for block {index}, which was already stopped")]
    BlockClosed {
        /// 0-based index of the event.
        event_index: u64,
        /// The event's type.
        event_type: &'static str,
        /// The block index the event named.
        index: usize,
    },
    /// A delta whose type does not fit the block it names.
    #[error("event {event_index}: {delta_type} for block {index}, a {block_type} block")]
    DeltaMismatch {
        /// 0-based index of the event.
        event_index: u64,
        /// The block index.
        index: usize,
        /// The delta's type.
        delta_type: &'static str,
        /// The block's type.
        block_type: String,
    },
    /// The API sent an `error` event.
    #[error("event {event_index}: the API reported {error}")]
    Api {
        /// 0-based index of the event.
        event_index: u64,
        /// The error body (boxed: it is large and errors are rare).
        error: Box<ApiErrorBody>,
    },
    /// The input ended before the message was complete.
    #[error("stream ended before message_stop: {received}")]
    Incomplete {
        /// What was received, such as "message_start, 2 blocks (1 stopped), no message_delta".
        received: String,
    },
}

impl AccumulateError {
    /// Whether the request is worth retrying: an `error` event of a retryable kind
    /// (overloaded, rate limit, api error, timeout), or a stream cut before it completed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Api { error, .. } => error.is_retryable(),
            Self::Incomplete { .. } => true,
            _ => false,
        }
    }

    /// The API error, when the stream carried an `error` event.
    pub fn api_error(&self) -> Option<&ApiErrorBody> {
        match self {
            Self::Api { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Something the accumulator accepted but the caller should know about.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The input ended without `message_stop`, but every block was closed (or, for a
    /// `max_tokens` response, cut) and a stop reason had arrived.
    MessageStopMissing,
    /// A block was still open when the message ended; it is marked
    /// [`BlockStatus::Truncated`].
    BlockLeftOpen {
        /// The block's index.
        index: usize,
    },
}

/// The result of a whole message.
#[derive(Clone, Debug, PartialEq)]
pub struct FinalMessage {
    /// The accumulated message.
    pub message: Message,
    /// Status of each content block, by index (same length as `message.content`).
    pub block_status: Vec<BlockStatus>,
    /// What was accepted despite being off.
    pub warnings: Vec<Warning>,
}

impl FinalMessage {
    /// The client tool_use blocks whose input is whole and valid: the ones a client may run.
    pub fn runnable_tool_uses(&self) -> impl Iterator<Item = &protocol::ToolUseBlock> {
        self.message
            .content
            .iter()
            .zip(&self.block_status)
            .filter(|(_, status)| status.is_complete())
            .filter_map(|(block, _)| block.as_tool_use())
    }
}

/// What pushing an event produced.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Output {
    /// A block's `content_block_stop` arrived (boxed: outputs are rare next to events).
    BlockComplete(Box<CompletedBlock>),
    /// `message_stop` arrived: the message is complete.
    MessageComplete(Box<FinalMessage>),
}

/// One content block being built.
#[derive(Debug)]
struct Slot {
    block: ContentBlock,
    /// Concatenated input_json_delta fragments, for tool-use kinds.
    input_json: Option<String>,
    open: bool,
    status: BlockStatus,
}

/// Where the accumulator stands.
// One value per accumulator, replaced in place: the size difference costs nothing, boxing would
// cost an allocation per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum State {
    /// Waiting for message_start.
    Idle,
    /// Between message_start and message_stop.
    Open { message: Message, slots: Vec<Slot> },
    /// After message_stop; a new message_start may follow.
    Done,
}

/// Builds completed blocks and the final [`Message`] from [`StreamEvent`]s.
///
/// ```
/// use sse_parser::{Decoder, MessageAccumulator, Output};
///
/// let stream = [
///     r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#,
///     r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}}"#,
///     r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\":"}}"#,
///     r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"a.rs\"}"}}"#,
///     r#"{"type":"content_block_stop","index":0}"#,
///     r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}"#,
///     r#"{"type":"message_stop"}"#,
/// ];
/// let mut decoder = Decoder::new();
/// let mut accumulator = MessageAccumulator::new();
/// let mut outputs = Vec::new();
/// for data in stream {
///     if let Some(event) = decoder.decode_data(data.as_bytes())? {
///         outputs.extend(accumulator.push(&event)?);
///     }
/// }
/// let Output::BlockComplete(block) = &outputs[0] else { panic!() };
/// assert_eq!(block.block.as_tool_use().map(|t| &t.input["file_path"]), Some(&"a.rs".into()));
/// let Output::MessageComplete(done) = &outputs[1] else { panic!() };
/// assert_eq!(done.message.usage.output_tokens, 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MessageAccumulator {
    state: State,
    events: u64,
    messages: u64,
    stop_reason_seen: bool,
}

impl Default for MessageAccumulator {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageAccumulator {
    /// An accumulator waiting for `message_start`.
    pub fn new() -> Self {
        Self {
            state: State::Idle,
            events: 0,
            messages: 0,
            stop_reason_seen: false,
        }
    }

    /// Events pushed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The message being built, `None` before `message_start` and after `message_stop`.
    /// Blocks still open appear as accumulated so far.
    pub fn current(&self) -> Option<&Message> {
        match &self.state {
            State::Open { message, .. } => Some(message),
            State::Idle | State::Done => None,
        }
    }

    /// Applies one event.
    ///
    /// # Errors
    ///
    /// [`AccumulateError`] when the event does not fit the stream so far, or is an API
    /// `error` event. The accumulator should not be used after an error.
    pub fn push(&mut self, event: &StreamEvent) -> Result<Option<Output>, AccumulateError> {
        let event_index = self.events;
        self.events += 1;
        let event_type = event.event_type();
        match event {
            StreamEvent::Ping => return Ok(None),
            StreamEvent::Error(error) => {
                return Err(AccumulateError::Api {
                    event_index,
                    error: error.clone(),
                });
            }
            StreamEvent::MessageStart { message } => {
                if let State::Open { message: open, .. } = &self.state {
                    return Err(AccumulateError::UnexpectedMessageStart {
                        event_index,
                        open_message: open.id.clone(),
                    });
                }
                let mut message = (**message).clone();
                // Room for the blocks of a usual response without growing (a slot is a few
                // hundred bytes: each doubling moves them all).
                let mut slots = Vec::with_capacity(message.content.len().max(8));
                slots.extend(
                    std::mem::take(&mut message.content)
                        .into_iter()
                        .map(|block| Slot {
                            block,
                            input_json: None,
                            open: false,
                            status: BlockStatus::Complete,
                        }),
                );
                self.state = State::Open { message, slots };
                self.messages += 1;
                self.stop_reason_seen = false;
                return Ok(None);
            }
            _ => {}
        }
        let (message, slots) = match &mut self.state {
            State::Open { message, slots } => (message, slots),
            State::Idle => {
                return Err(AccumulateError::BeforeMessageStart {
                    event_index,
                    event_type,
                });
            }
            State::Done => {
                return Err(AccumulateError::AfterMessageStop {
                    event_index,
                    event_type,
                });
            }
        };
        match event {
            StreamEvent::ContentBlockDelta { index, delta } => {
                let slot = open_slot(slots, *index, event_index, event_type)?;
                apply_delta(slot, *index, delta, event_index)?;
                Ok(None)
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                if *index != slots.len() {
                    return Err(AccumulateError::BlockOutOfOrder {
                        event_index,
                        index: *index,
                        expected: slots.len(),
                    });
                }
                let input_json = matches!(
                    &**content_block,
                    ContentBlock::ToolUse(_)
                        | ContentBlock::ServerToolUse(_)
                        | ContentBlock::McpToolUse(_)
                )
                .then(String::new);
                if let ContentBlock::Fallback(fallback) = &**content_block
                    && let Some(model) = fallback.to_model()
                {
                    message.model = model.to_owned();
                }
                slots.push(Slot {
                    block: (**content_block).clone(),
                    input_json,
                    open: true,
                    status: BlockStatus::Complete,
                });
                Ok(None)
            }
            StreamEvent::ContentBlockStop { index } => {
                let slot = open_slot(slots, *index, event_index, event_type)?;
                slot.open = false;
                finish_input(slot);
                Ok(Some(Output::BlockComplete(Box::new(CompletedBlock {
                    index: *index,
                    block: slot.block.clone(),
                    status: slot.status.clone(),
                }))))
            }
            StreamEvent::MessageDelta(delta) => {
                if delta.stop_reason.is_some() {
                    self.stop_reason_seen = true;
                }
                apply_message_delta(message, delta);
                Ok(None)
            }
            StreamEvent::MessageStop => {
                let State::Open { message, slots } =
                    std::mem::replace(&mut self.state, State::Done)
                else {
                    // The match above returned for every other state.
                    return Ok(None);
                };
                Ok(Some(Output::MessageComplete(Box::new(assemble(
                    message,
                    slots,
                    Vec::new(),
                )))))
            }
            // Ping, error and message_start were handled before the state match; event kinds
            // added to `protocol` later carry nothing this accumulator needs.
            _ => Ok(None),
        }
    }

    /// Ends the input and returns the last message.
    ///
    /// After `message_stop` this returns nothing new: the message was already handed out in
    /// [`Output::MessageComplete`], so this fails with `Incomplete` only if no message was
    /// completed at all. Without `message_stop`, the message is accepted with
    /// [`Warning::MessageStopMissing`] when a stop reason arrived and every block is stopped;
    /// when the stop reason is `max_tokens`, open blocks are kept and marked
    /// [`BlockStatus::Truncated`]. Otherwise the stream is incomplete.
    ///
    /// # Errors
    ///
    /// [`AccumulateError::Incomplete`], saying what was received.
    pub fn finish(self) -> Result<Option<FinalMessage>, AccumulateError> {
        match self.state {
            State::Done => Ok(None),
            State::Idle => Err(AccumulateError::Incomplete {
                received: if self.events == 0 {
                    "no events".to_owned()
                } else {
                    format!("{} events, none of them message_start", self.events)
                },
            }),
            State::Open { message, slots } => {
                let open: Vec<usize> = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, slot)| slot.open)
                    .map(|(index, _)| index)
                    .collect();
                let max_tokens = message.stop_reason == Some(StopReason::MaxTokens);
                if self.stop_reason_seen && (open.is_empty() || max_tokens) {
                    let mut warnings = vec![Warning::MessageStopMissing];
                    warnings.extend(open.iter().map(|&index| Warning::BlockLeftOpen { index }));
                    return Ok(Some(assemble(message, slots, warnings)));
                }
                let mut received = format!("message_start, {} block", slots.len());
                if slots.len() != 1 {
                    received.push('s');
                }
                let _ = write!(received, " ({} stopped)", slots.len() - open.len());
                if open.is_empty() {
                    received.push_str(", no open block");
                } else {
                    let _ = write!(received, ", block {open:?} still open");
                }
                match &message.stop_reason {
                    Some(reason) => {
                        let _ = write!(received, ", stop_reason {reason}");
                    }
                    None => received.push_str(", no stop_reason"),
                }
                let _ = write!(received, "; {} events in all", self.events);
                Err(AccumulateError::Incomplete { received })
            }
        }
    }
}

fn open_slot<'a>(
    slots: &'a mut [Slot],
    index: usize,
    event_index: u64,
    event_type: &'static str,
) -> Result<&'a mut Slot, AccumulateError> {
    let Some(slot) = slots.get_mut(index) else {
        return Err(AccumulateError::UnknownBlock {
            event_index,
            event_type,
            index,
        });
    };
    if !slot.open {
        return Err(AccumulateError::BlockClosed {
            event_index,
            event_type,
            index,
        });
    }
    Ok(slot)
}

fn apply_delta(
    slot: &mut Slot,
    index: usize,
    delta: &ContentDelta,
    event_index: u64,
) -> Result<(), AccumulateError> {
    match (delta, &mut slot.block, &mut slot.input_json) {
        (ContentDelta::Text { text }, ContentBlock::Text(block), _) => block.text.push_str(text),
        (ContentDelta::InputJson { partial_json }, _, Some(json)) => json.push_str(partial_json),
        (ContentDelta::Thinking { thinking }, ContentBlock::Thinking(block), _) => {
            block.thinking.push_str(thinking);
        }
        (ContentDelta::Signature { signature }, ContentBlock::Thinking(block), _) => {
            block.signature.clone_from(signature);
        }
        (ContentDelta::Citations { citation }, ContentBlock::Text(block), _) => {
            block
                .citations
                .get_or_insert_with(Vec::new)
                .push(citation.clone());
        }
        (
            ContentDelta::Compaction {
                content,
                encrypted_content,
            },
            ContentBlock::Compaction(block),
            _,
        ) => {
            block.content.clone_from(content);
            if encrypted_content.is_some() {
                block.encrypted_content.clone_from(encrypted_content);
            }
        }
        (delta, block, _) => {
            return Err(AccumulateError::DeltaMismatch {
                event_index,
                index,
                delta_type: delta.delta_type(),
                block_type: block.block_type().to_owned(),
            });
        }
    }
    Ok(())
}

/// Parses a tool-use block's concatenated input at content_block_stop.
fn finish_input(slot: &mut Slot) {
    let Some(json) = slot.input_json.take() else {
        return;
    };
    if json.is_empty() {
        // No fragment, or only empty ones: keep what content_block_start carried, if it is an
        // object (a tool's input always is).
        if let ContentBlock::ToolUse(block)
        | ContentBlock::ServerToolUse(block)
        | ContentBlock::McpToolUse(block) = &mut slot.block
            && !block.input.is_object()
        {
            let raw = block.input.to_string();
            let error = format!(
                "tool input must be a JSON object, got {}",
                json_kind(&block.input)
            );
            block.input = Value::Object(JsonObject::new());
            slot.status = BlockStatus::InvalidInput(InvalidToolInput { raw, error });
        }
        return;
    }
    let input = match &mut slot.block {
        ContentBlock::ToolUse(block)
        | ContentBlock::ServerToolUse(block)
        | ContentBlock::McpToolUse(block) => &mut block.input,
        _ => return,
    };
    match serde_json::from_str::<Value>(&json) {
        Ok(value @ Value::Object(_)) => *input = value,
        Ok(other) => {
            *input = Value::Object(JsonObject::new());
            slot.status = BlockStatus::InvalidInput(InvalidToolInput {
                raw: json,
                error: format!(
                    "tool input must be a JSON object, got {}",
                    json_kind(&other)
                ),
            });
        }
        Err(error) => {
            *input = Value::Object(JsonObject::new());
            slot.status = BlockStatus::InvalidInput(InvalidToolInput {
                raw: json,
                error: error.to_string(),
            });
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn apply_message_delta(message: &mut Message, delta: &MessageDelta) {
    // The SDK sets these three whatever they hold; null clears.
    message.stop_reason.clone_from(&delta.stop_reason);
    message.stop_sequence.clone_from(&delta.stop_sequence);
    message.stop_details.clone_from(&delta.stop_details);
    for (key, value) in delta.delta_extra.iter().chain(&delta.extra) {
        message.extra.insert(key.clone(), value.clone());
    }
    if let Some(usage) = &delta.usage {
        message.usage.apply_delta(usage);
    }
}

/// Builds the final message; open blocks are closed as truncated.
fn assemble(mut message: Message, slots: Vec<Slot>, mut warnings: Vec<Warning>) -> FinalMessage {
    let mut block_status = Vec::with_capacity(slots.len());
    message.content.reserve_exact(slots.len());
    for (index, mut slot) in slots.into_iter().enumerate() {
        if slot.open {
            let raw_input = slot.input_json.take();
            if let ContentBlock::ToolUse(block)
            | ContentBlock::ServerToolUse(block)
            | ContentBlock::McpToolUse(block) = &mut slot.block
            {
                block.input = Value::Object(JsonObject::new());
            }
            slot.status = BlockStatus::Truncated { raw_input };
            if !warnings.contains(&Warning::BlockLeftOpen { index }) {
                warnings.push(Warning::BlockLeftOpen { index });
            }
        }
        message.content.push(slot.block);
        block_status.push(slot.status);
    }
    FinalMessage {
        message,
        block_status,
        warnings,
    }
}
