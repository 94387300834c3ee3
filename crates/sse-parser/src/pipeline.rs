//! Bytes in, events, completed blocks and the final message out: the three stages chained.

use bytes::Bytes;
use protocol::StreamEvent;

use crate::accumulate::{AccumulateError, FinalMessage, MessageAccumulator, Output};
use crate::decode::{DecodeError, Decoder};
use crate::frame::{FrameError, Framer, FramerConfig, UnterminatedEvent};

/// Any error of the pipeline, by stage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not a valid event stream (an event past the size limit).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// An event's JSON does not fit its type.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The events do not make a valid message, or the API sent an `error` event.
    #[error(transparent)]
    Accumulate(#[from] AccumulateError),
}

impl Error {
    /// Whether retrying the request may help: an overloaded, rate-limit, timeout or api error
    /// event, or a stream cut before `message_stop`.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Accumulate(error) => error.is_retryable(),
            Self::Frame(_) | Self::Decode(_) => false,
        }
    }
}

/// One item of a [`MessageStream`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Item {
    /// A decoded event, in stream order (forward it for live rendering).
    Event(StreamEvent),
    /// A block whose `content_block_stop` arrived; follows that event.
    BlockComplete(Box<protocol::CompletedBlock>),
    /// The message is complete; follows the `message_stop` event.
    MessageComplete(Box<FinalMessage>),
}

/// The whole parsing path of a streaming response: framing, decoding, accumulation.
///
/// ```
/// use bytes::Bytes;
/// use sse_parser::{Item, MessageStream};
///
/// let body = concat!(
///     "event: message_start\n",
///     "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
///     "event: content_block_start\n",
///     "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
///     "event: content_block_delta\n",
///     "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
///     "event: content_block_stop\n",
///     "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
///     "event: message_delta\n",
///     "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
///     "event: message_stop\n",
///     "data: {\"type\":\"message_stop\"}\n\n",
/// );
/// let mut stream = MessageStream::new();
/// stream.push(Bytes::from_static(body.as_bytes()));
/// let mut text = String::new();
/// while let Some(item) = stream.next_item()? {
///     if let Item::MessageComplete(done) = item {
///         text = done.message.text();
///     }
/// }
/// assert_eq!(text, "Hello");
/// # Ok::<(), sse_parser::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct MessageStream {
    framer: Framer,
    decoder: Decoder,
    accumulator: MessageAccumulator,
    pending: Option<Output>,
    completed: u64,
}

/// How a [`MessageStream`] ended; see [`MessageStream::finish`].
#[derive(Debug)]
pub struct Finished {
    /// The message still open at the end of input, accepted by the accumulator's rule (no
    /// message_stop but a stop reason and every block stopped, or a max_tokens cut); `None`
    /// when every message ended with message_stop.
    pub message: Option<FinalMessage>,
    /// The event-stream event the input ended inside, if any (the standard does not dispatch
    /// it).
    pub unterminated: Option<UnterminatedEvent>,
    /// Events skipped because their type is unknown.
    pub unknown_events: u64,
    /// Deltas skipped because their type is unknown.
    pub unknown_deltas: u64,
}

impl MessageStream {
    /// A pipeline with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A pipeline with the given framing limits.
    pub fn with_config(config: FramerConfig) -> Self {
        Self {
            framer: Framer::with_config(config),
            ..Self::default()
        }
    }

    /// Adds a chunk of the response body (empty chunks are harmless).
    pub fn push(&mut self, chunk: Bytes) {
        self.framer.push(chunk);
    }

    /// The next item, or `None` when more bytes are needed.
    ///
    /// # Errors
    ///
    /// [`Error`] from the stage that failed; an `error` event is
    /// [`Error::Accumulate`] with [`AccumulateError::Api`].
    pub fn next_item(&mut self) -> Result<Option<Item>, Error> {
        if let Some(output) = self.pending.take() {
            return Ok(Some(self.item(output)));
        }
        loop {
            let Some(sse) = self.framer.next_event_ref()? else {
                return Ok(None);
            };
            let Some(event) = self.decoder.decode_ref(&sse)? else {
                continue;
            };
            self.pending = self.accumulator.push(&event)?;
            return Ok(Some(Item::Event(event)));
        }
    }

    fn item(&mut self, output: Output) -> Item {
        match output {
            Output::BlockComplete(block) => Item::BlockComplete(block),
            Output::MessageComplete(message) => {
                self.completed += 1;
                Item::MessageComplete(message)
            }
        }
    }

    /// Ends the input: reads what is left, then applies the accumulator's end-of-input rule.
    /// Items still unread are dropped; drain [`MessageStream::next_item`] first.
    ///
    /// # Errors
    ///
    /// [`Error`] when the remaining bytes fail, or the stream ended before a message was
    /// complete (see [`MessageAccumulator::finish`]).
    pub fn finish(mut self) -> Result<Finished, Error> {
        while self.next_item()?.is_some() {}
        let unterminated = self.framer.finish()?;
        let message = self.accumulator.finish()?;
        Ok(Finished {
            message,
            unterminated,
            unknown_events: self.decoder.unknown_events(),
            unknown_deltas: self.decoder.unknown_deltas(),
        })
    }
}
