//! The model port: what the loop needs from a Messages API client.

use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use protocol::{BlockStatus, CompletedBlock, Message, StreamEvent};

use crate::request::ModelRequest;
use tokio_util::sync::CancellationToken;

/// What a streaming model call yields.
#[derive(Clone, Debug, PartialEq)]
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

/// What the API said when it refused a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiFailure {
    /// The HTTP status; `None` for an `error` event in the middle of a stream.
    pub status: Option<u16>,
    /// The `request-id` of the response, when known (for support requests).
    pub request_id: Option<String>,
    /// The error type and message, as the API gave them (`invalid_request_error: ...`).
    pub message: String,
}

impl ApiFailure {
    /// A failure with only a message (tests, scripted models).
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            status: None,
            request_id: None,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(status) = self.status {
            write!(f, "HTTP {status}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(request_id) = &self.request_id {
            write!(f, " [request {request_id}]")?;
        }
        Ok(())
    }
}

/// Why a model call failed, after the client's own retries. Exhaustive on purpose: the loop
/// decides on each kind ([`crate::Terminal`]), and a new kind must be decided on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The API said the prompt is too long for the context window.
    #[error("prompt is too long: {0}")]
    PromptTooLong(ApiFailure),
    /// The API stayed overloaded through every retry.
    #[error("the API is overloaded: {0}")]
    Overloaded(ApiFailure),
    /// The API rejected an image in the request.
    #[error("image rejected: {0}")]
    Image(ApiFailure),
    /// The output cap was hit too many times in a row.
    #[error("the response hit the output token limit {0} times in a row")]
    MaxTokensExhausted(u32),
    /// Any other refusal by the API.
    #[error("API error: {0}")]
    Api(ApiFailure),
    /// The connection or the stream failed: no answer from the API (the detail says what
    /// failed and which limit, if one did).
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

    /// Whether a tool_use block is final at its `content_block_stop` (`true`, the Messages
    /// API: the streaming executor starts it at once, before the response ends), or only
    /// once the response's stop_reason shows the response complete (`false`: the
    /// OpenAI-compatible formats, where a `content_filter` finish can follow whole calls,
    /// which are then not run). Either way, calls still held when a response ends
    /// incomplete (a refusal) are answered as not run.
    fn tool_use_final_at_block_stop(&self) -> bool {
        true
    }
}
