//! The model port: what the loop needs from a Messages API client.

use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use protocol::{BlockStatus, CompletedBlock, Message, StreamEvent};

use crate::request::ModelRequest;
use tokio_util::sync::CancellationToken;

/// What a streaming model call yields.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ModelEvent {
    /// A decoded stream event, for live rendering.
    Stream(StreamEvent),
    /// A content block whose `content_block_stop` arrived.
    BlockComplete(CompletedBlock),
    /// The client is retrying after a failure before any byte of the response arrived.
    Retry {
        /// 1-based retry number.
        attempt: u32,
        /// How long the client waits before it.
        delay: Duration,
        /// What failed.
        reason: String,
    },
    /// The stream failed after blocks were emitted and the request is being made again: drop
    /// everything of the failed attempt. `non_streaming` is set when the retry is the last-resort
    /// non-streaming request.
    Restart {
        /// What failed.
        reason: String,
        /// Whether the replacement is a non-streaming request.
        non_streaming: bool,
    },
    /// No bytes arrived for a while (the idle watchdog's warning).
    Idle {
        /// How long the stream has been silent.
        silent_for: Duration,
    },
    /// The response is complete.
    Done {
        /// The final message, usage included.
        message: Message,
        /// Status of each content block, by index.
        block_status: Vec<BlockStatus>,
    },
}

/// Why a model call failed, after the client's own retries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The API said the prompt is too long for the context window.
    #[error("prompt is too long: {0}")]
    PromptTooLong(String),
    /// The API stayed overloaded through every retry.
    #[error("the API is overloaded: {0}")]
    Overloaded(String),
    /// The API rejected an image.
    #[error("image rejected: {0}")]
    Image(String),
    /// The output cap was hit too many times in a row.
    #[error("the response hit the output token limit {0} times in a row")]
    MaxTokensExhausted(u32),
    /// Any other API error (status and body message).
    #[error("API error {status}: {message}")]
    Api {
        /// HTTP status (or 0 for an `error` event mid-stream).
        status: u16,
        /// The error kind and message.
        message: String,
    },
    /// The connection or the stream failed.
    #[error("transport error: {0}")]
    Transport(String),
    /// The client failed without any answer from the API: its configuration, or a replayed
    /// cassette that does not hold the request.
    #[error("{0}")]
    Client(String),
}

/// The stream a [`ModelClient`] returns.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A streaming Messages API client, as the loop sees it. The `provider` crate implements it
/// over HTTPS; tests implement it with scripts.
pub trait ModelClient: Send + Sync {
    /// Starts a streaming call. `request` is borrowed: serialize it (its `Serialize` impl
    /// writes the exact request body) before returning. The stream ends after
    /// [`ModelEvent::Done`] or an error. Cancelling `cancel` must end the stream promptly (it
    /// may end with no `Done`).
    fn stream(&self, request: &ModelRequest<'_>, cancel: CancellationToken) -> ModelStream;
}
