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
//! the bytes. With the `stream` feature, [`stream::SseStream`] and [`stream::ItemStream`] adapt
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
//! # Allocations and copies, stage by stage
//!
//! What each stage costs per event, in the usual case (a single-line event inside one chunk)
//! and otherwise. `tests/allocations.rs` asserts the framer's and the pipeline's figures;
//! docs/benchmarks.md has the measurements.
//!
//! | stage | usual case | otherwise |
//! |---|---|---|
//! | [`Framer::next_event`] | no allocation, no copy: the data is a [`bytes::Bytes`] slice of its chunk (one reference count); a known event name (the Messages API's, the Responses API's most frequent) is a static `Bytes` | a line that spans chunks is copied into one reused buffer; data of several lines is joined (copied) |
//! | [`Framer::next_event_ref`] | no allocation, no copy, no reference count: the fields borrow the chunk | as above; the event is built once and lent |
//! | [`Decoder`] | one pass over the event's bytes: the fixed prefix of the API's compact layout is compared, never parsed. A text, input JSON, thinking or signature delta: one allocation (the delta's `String`, sized from the raw string), its UTF-8 checked once on the decoded string. `content_block_stop`, `message_stop`, `ping`: none. `message_delta` and `message_start`: typed directly (no generic JSON tree). A server tool result block: validated and copied once as raw JSON, then shared by every clone | any other layout, an extra field, an unknown type: the generic path (serde_json, the event's UTF-8 checked once for the whole event), which also reports the errors |
//! | [`MessageAccumulator`] | text, thinking and input JSON are appended into one buffer per block (amortised growth, no per-delta allocation); a tool input is parsed once, at `content_block_stop` | each completed block is cloned once for its [`Output::BlockComplete`] (a server tool result: a reference count) |
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
