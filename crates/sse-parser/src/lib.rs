//! Parsing of Anthropic Messages API streaming responses, in three stages.
//!
//! 1. [`Framer`]: the WHATWG HTML event-stream rules over byte chunks, zero-copy. Push
//!    [`bytes::Bytes`] chunks in any split, pull [`SseEvent`]s (or borrow [`SseEventRef`]s).
//! 2. [`Decoder`]: an [`SseEvent`]'s JSON into a typed [`protocol::StreamEvent`]. Unknown event
//!    and delta types are skipped and counted.
//! 3. [`MessageAccumulator`]: events into [`protocol::CompletedBlock`]s, each the moment its
//!    `content_block_stop` arrives (this is what lets a client start a tool while the model is
//!    still talking), and the final [`protocol::Message`] at `message_stop`.
//!
//! [`MessageStream`] chains the three for the common case. No tokio, no I/O: the caller brings
//! the bytes. With the `stream` feature, `stream::SseStream` and `stream::ItemStream` adapt
//! any `futures_core::Stream` of byte chunks.
//!
//! ```
//! use bytes::Bytes;
//! use sse_parser::{Item, MessageStream};
//!
//! let mut stream = MessageStream::new();
//! // Chunks can split anywhere, even inside a line end or a UTF-8 character.
//! for chunk in [
//!     &b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","[..],
//!     b"\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\r",
//!     b"\n\r\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n",
//!     b"data: {\"type\":\"message_stop\"}\n\n",
//! ] {
//!     stream.push(Bytes::from_static(chunk));
//!     while let Some(item) = stream.next_item()? {
//!         if let Item::MessageComplete(done) = item {
//!             assert_eq!(done.message.stop_reason.map(|r| r.to_string()).as_deref(), Some("end_turn"));
//!         }
//!     }
//! }
//! # Ok::<(), sse_parser::Error>(())
//! ```
//!
//! # Owned or borrowed events
//!
//! [`Framer::next_event`] hands out [`SseEvent`]s you can keep, send to another task or store:
//! their fields are [`bytes::Bytes`] slices of the chunks (no copy). [`Framer::next_event_ref`]
//! lends [`SseEventRef`]s instead, valid until the next call to the framer: no reference count
//! to take and release, about 40 % less time per event (docs/benchmarks.md in the repository).
//! Take the borrowed form when you decode each event at once, as [`MessageStream`] does; the
//! owned form otherwise ([`SseEventRef::to_event`] copies one that you need to keep).
//!
//! # Allocations and copies, stage by stage
//!
//! What each stage costs per event. "Usual" is a single-line event inside one chunk, in the
//! compact JSON the API writes (no spaces between tokens, fields in the API's order: for a
//! delta, `{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"…"}}`).
//! Any other JSON is decoded the same way, only slower: through serde_json (the same events
//! come out either way, and the errors are always serde_json's). `tests/allocations.rs`
//! asserts the framer's and the pipeline's figures.
//!
//! | stage | usual case | other cases |
//! |---|---|---|
//! | [`Framer::next_event`] | no allocation, no copy: the data is a `Bytes` slice of its chunk (one reference count). The frequent event names (the Messages API's, and the Responses API's for the crates that read that API with this framer) are static `Bytes` | a line that spans two chunks is copied into one reused buffer; the lines of a multi-line data field are joined (copied) |
//! | [`Framer::next_event_ref`] | no allocation, no copy, no reference count: the fields borrow the chunk | as for `next_event`; the framer keeps the event it built and lends it |
//! | [`Decoder`] | the fixed start of the event is compared byte for byte, not parsed. A text, input JSON, thinking or signature delta: one allocation (the delta's `String`), its UTF-8 checked once. `content_block_stop`, `message_stop`, `ping`: no allocation. `message_delta` and `message_start`: read into their types directly, no JSON tree. A server tool result block or a citation: captured as JSON text by serde_json's raw scan (its UTF-8 checked once, with SIMD), checked by one more pass that skips string bodies with memchr, copied once; its clones share that text | serde_json, the event's UTF-8 checked once |
//!
//! [`MessageAccumulator`], in every case: text, thinking and input JSON are appended into one
//! buffer per block (growing by doubling, nothing per delta); a tool's input is parsed once, at
//! its `content_block_stop`; each completed block is cloned once for its
//! [`Output::BlockComplete`] (a server tool result or a citation only shares its text).
//!
//! [`MessageStream`] reads the framer through [`Framer::next_event_ref`]: framing, decoding and
//! accumulating a text delta allocates exactly once (its `String`, which
//! [`Item::Event`] hands out), plus the block's buffer with its first delta.
//!
//! **Design decision: pull, not callbacks.** Each stage hands out one item per call, so a
//! caller can stop, forward or cancel between any two events and nothing is buffered beyond the
//! current event. The cost is a little bookkeeping per call (the pipeline holds at most one
//! pending output).
#![deny(missing_docs)]

mod accumulate;
mod decode;
mod frame;
mod pipeline;
#[cfg(feature = "stream")]
pub mod stream;

pub use accumulate::{AccumulateError, FinalMessage, MessageAccumulator, Output, Warning};
pub use decode::{DecodeError, Decoder};
pub use frame::{
    DEFAULT_MAX_EVENT_BYTES, Events, FrameError, Framer, FramerConfig, SseEvent, SseEventRef,
    UnterminatedEvent, frame_all, is_event_stream,
};
pub use pipeline::{Error, Finished, Item, MessageStream};
