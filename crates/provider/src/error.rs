//! The provider's one error type.

use std::fmt;

/// What went wrong, and whether the client retries it.
///
/// | kind | retried |
/// |---|---|
/// | `Connect` (connection refused, reset, DNS) | yes |
/// | `Tls` (handshake, untrusted certificate) | no |
/// | `RateLimited` (429) | yes, honouring `retry-after` |
/// | `Overloaded` (529, or an `overloaded_error` event) | yes |
/// | `SwitchToFallback` (3rd consecutive 529 with a fallback model configured) | no: the caller switches model |
/// | `Server` (408, 409, 5xx, `api_error` event) | yes |
/// | `ResponseTimeout` (no response headers within the headers timeout) | yes |
/// | `StreamIdle` (no bytes for the idle timeout, or only pings for the progress timeout) | yes |
/// | `StreamBroken` (reset or cut body, incomplete stream) | yes, then one non-streaming request |
/// | `PromptTooLong` (400 "prompt is too long") | no: the caller compacts |
/// | `ImageRejected` (400 about an image in the request) | no: the caller drops the image |
/// | `InvalidRequest`, `Authentication`, `Permission`, `NotFound`, `RequestTooLarge`, other 4xx | no |
/// | `NotEventStream` (a 200 that is not `text/event-stream`) | no |
/// | `ResponseTooLarge` (a response past its size limit) | no |
/// | `Parse` (a body that is not the Messages API's) | no |
/// | `Replay` (a request that does not match the cassette) | no |
/// | `Config` | no |
/// | `Cancelled` | no |
///
/// A response header `x-should-retry: true|false` overrides the table for HTTP errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The connection failed.
    Connect,
    /// TLS failed.
    Tls,
    /// 429.
    RateLimited,
    /// 529 or an overloaded error event.
    Overloaded,
    /// The model stayed overloaded and a fallback model is configured.
    SwitchToFallback,
    /// 408, 409, 5xx, or an `api_error` event.
    Server,
    /// No response headers within the headers timeout.
    ResponseTimeout,
    /// The stream sent no bytes for the idle timeout, or only pings for the progress
    /// timeout.
    StreamIdle,
    /// The stream broke before it completed.
    StreamBroken,
    /// The prompt is longer than the context window.
    PromptTooLong,
    /// The API could not use an image of the request (too large, bad format).
    ImageRejected,
    /// 400 for another reason.
    InvalidRequest,
    /// 401.
    Authentication,
    /// 403.
    Permission,
    /// 404.
    NotFound,
    /// 413.
    RequestTooLarge,
    /// Any other status.
    Http,
    /// A 200 whose media type is not `text/event-stream`.
    NotEventStream,
    /// A response grew past its size limit.
    ResponseTooLarge,
    /// The body is not what the Messages API sends.
    Parse,
    /// The request does not match the cassette being replayed.
    Replay,
    /// Bad configuration.
    Config,
    /// The caller cancelled.
    Cancelled,
}

impl ErrorKind {
    /// Whether the client retries this kind (without an `x-should-retry` override).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::Connect
                | Self::RateLimited
                | Self::Overloaded
                | Self::Server
                | Self::ResponseTimeout
                | Self::StreamIdle
                | Self::StreamBroken
        )
    }

    fn label(self) -> &'static str {
        match self {
            Self::Connect => "connection error",
            Self::Tls => "TLS error",
            Self::RateLimited => "rate limited",
            Self::Overloaded => "overloaded",
            Self::SwitchToFallback => "overloaded; switch to the fallback model",
            Self::Server => "server error",
            Self::ResponseTimeout => "no response",
            Self::StreamIdle => "stream idle",
            Self::StreamBroken => "stream broken",
            Self::PromptTooLong => "prompt too long",
            Self::ImageRejected => "image rejected",
            Self::InvalidRequest => "invalid request",
            Self::Authentication => "authentication error",
            Self::Permission => "permission error",
            Self::NotFound => "not found",
            Self::RequestTooLarge => "request too large",
            Self::Http => "HTTP error",
            Self::NotEventStream => "not an event stream",
            Self::ResponseTooLarge => "response too large",
            Self::Parse => "unexpected response",
            Self::Replay => "cassette mismatch",
            Self::Config => "configuration error",
            Self::Cancelled => "cancelled",
        }
    }
}

/// An error with its kind, HTTP status and request id when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The detail (the API's message, the transport's error).
    pub message: String,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// The `request-id` of the response, when known.
    pub request_id: Option<String>,
    /// The failure is unlikely to heal by waiting (a host name that does not resolve, a
    /// connection refused by this very machine): retried once, not up to the retry limit.
    pub lasting: bool,
}

impl ProviderError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            status: None,
            request_id: None,
            lasting: false,
        }
    }

    /// Whether the client retries it.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.label())?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(request_id) = &self.request_id {
            write!(f, " [request {request_id}]")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProviderError {}
