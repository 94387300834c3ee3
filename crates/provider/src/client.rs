//! The Messages API client: streaming calls with retries, the idle watchdog and the
//! non-streaming last resort.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt as _;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use protocol::{
    ApiErrorBody, BlockStatus, CompletedBlock, ErrorKind as ApiErrorKind, Message, StreamEvent,
};
use sse_parser::{AccumulateError, Item, MessageStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{ANTHROPIC_VERSION, Auth, ClientConfig};
use crate::error::{ErrorKind, ProviderError};
use crate::retry::{Sleeper, TokioSleeper, backoff, retry_after, should_retry_header};
use crate::transport::{HttpRequest, HyperTransport, Transport};

/// What a streaming call yields.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ProviderEvent {
    /// A decoded stream event.
    Stream(StreamEvent),
    /// A content block whose `content_block_stop` arrived.
    Block(CompletedBlock),
    /// The request failed and will be made again after `delay`.
    Retry {
        /// 1-based retry number.
        attempt: u32,
        /// The wait before it.
        delay: Duration,
        /// What failed.
        reason: String,
        /// `anthropic-ratelimit-*` headers of the failed response.
        rate_limits: Vec<(String, String)>,
    },
    /// Events of a failed attempt were handed out: drop them, the request is made again.
    Restart {
        /// What failed.
        reason: String,
        /// Whether the replacement is the non-streaming last resort.
        non_streaming: bool,
    },
    /// No bytes for `silent_for` (the idle watchdog's warning).
    Idle {
        /// How long the stream has been silent.
        silent_for: Duration,
    },
    /// The response is complete.
    Done {
        /// The final message.
        message: Message,
        /// Status of each block by index.
        block_status: Vec<BlockStatus>,
        /// Whether it came from the non-streaming last resort.
        non_streaming: bool,
        /// The response's `request-id`.
        request_id: Option<String>,
    },
}

/// The stream a call returns; it ends after `Done` or an error.
pub type ProviderStream = Pin<Box<dyn Stream<Item = Result<ProviderEvent, ProviderError>> + Send>>;

struct Inner {
    config: ClientConfig,
    transport: Arc<dyn Transport>,
    sleeper: Arc<dyn Sleeper>,
    uri: Uri,
}

/// A streaming Messages API client. Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct AnthropicClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// How one attempt failed.
struct Failure {
    error: ProviderError,
    retry_after: Option<Duration>,
    should_retry: Option<bool>,
    rate_limits: Vec<(String, String)>,
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Self {
        Self {
            error,
            retry_after: None,
            should_retry: None,
            rate_limits: Vec::new(),
        }
    }
}

impl AnthropicClient {
    /// A client over the network.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when the base URL or the extra roots are invalid.
    pub fn new(config: ClientConfig) -> Result<Self, ProviderError> {
        let transport = Arc::new(HyperTransport::with_proxy(
            &config.extra_roots_pem,
            &config.proxy,
        )?);
        Self::with_transport(config, transport, Arc::new(TokioSleeper))
    }

    /// A client over any transport (a cassette, a recorder) with an injected sleeper.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when the base URL is invalid.
    pub fn with_transport(
        config: ClientConfig,
        transport: Arc<dyn Transport>,
        sleeper: Arc<dyn Sleeper>,
    ) -> Result<Self, ProviderError> {
        let uri: Uri = format!("{}/v1/messages", config.base_url.trim_end_matches('/'))
            .parse()
            .map_err(|error| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!("base URL {}: {error}", config.base_url),
                )
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                transport,
                sleeper,
                uri,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Starts a streaming call with `body`, a Messages API request with `"stream": true`.
    /// Retries, restarts and the non-streaming last resort happen inside; the stream reports
    /// them as events.
    ///
    /// # Cancellation safety
    ///
    /// Cancelling `cancel` (or dropping the stream) aborts the request and the body read at
    /// once; the stream then ends with [`ErrorKind::Cancelled`].
    pub fn stream(&self, body: Bytes, cancel: CancellationToken) -> ProviderStream {
        let (sender, receiver) = mpsc::channel(64);
        let inner = Arc::clone(&self.inner);
        let task_cancel = cancel.child_token();
        let guard = task_cancel.clone().drop_guard();
        tokio::spawn(async move {
            let result = tokio::select! {
                biased;
                () = task_cancel.cancelled() => Err(ProviderError::new(ErrorKind::Cancelled, "the call was cancelled")),
                result = run(&inner, body, &sender) => result,
            };
            if let Err(error) = result {
                let _ = sender.send(Err(error)).await;
            }
        });
        let stream =
            futures_util::stream::unfold((receiver, guard), |(mut receiver, guard)| async move {
                receiver.recv().await.map(|item| (item, (receiver, guard)))
            });
        Box::pin(stream)
    }

    fn request(&self, body: Bytes) -> HttpRequest {
        let config = &self.inner.config;
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert(
            "user-agent",
            HeaderValue::from_static(concat!("agent/", env!("CARGO_PKG_VERSION"))),
        );
        match &config.auth {
            Auth::ApiKey(key) => {
                if let Ok(value) = HeaderValue::from_str(key) {
                    headers.insert("x-api-key", value);
                }
            }
            Auth::Bearer(token) => {
                if let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) {
                    headers.insert("authorization", value);
                }
            }
            Auth::None => {}
        }
        if !config.betas.is_empty()
            && let Ok(value) = HeaderValue::from_str(&config.betas.join(","))
        {
            headers.insert("anthropic-beta", value);
        }
        HttpRequest {
            method: Method::POST,
            uri: self.inner.uri.clone(),
            headers,
            body,
        }
    }
}

type Sender = mpsc::Sender<Result<ProviderEvent, ProviderError>>;

async fn send(sender: &Sender, event: ProviderEvent) -> Result<(), ProviderError> {
    sender
        .send(Ok(event))
        .await
        .map_err(|_| ProviderError::new(ErrorKind::Cancelled, "the caller stopped reading"))
}

/// The retry loop around streaming attempts.
async fn run(inner: &Arc<Inner>, body: Bytes, sender: &Sender) -> Result<(), ProviderError> {
    let client = AnthropicClient {
        inner: Arc::clone(inner),
    };
    let config = &inner.config;
    let mut retries = 0;
    let mut overloaded_in_a_row = 0;
    let mut handed_out = false;
    loop {
        let failure = match attempt(&client, body.clone(), sender, &mut handed_out).await {
            Ok(()) => return Ok(()),
            Err(failure) => failure,
        };
        let error = failure.error;
        if error.kind == ErrorKind::Overloaded {
            overloaded_in_a_row += 1;
            if config.fallback_model && overloaded_in_a_row >= 3 {
                let mut switch = error;
                switch.kind = ErrorKind::SwitchToFallback;
                return Err(switch);
            }
        } else {
            overloaded_in_a_row = 0;
        }
        let retryable = failure.should_retry.unwrap_or_else(|| error.is_retryable());
        if retryable && retries < config.max_retries {
            retries += 1;
            if handed_out {
                send(
                    sender,
                    ProviderEvent::Restart {
                        reason: error.to_string(),
                        non_streaming: false,
                    },
                )
                .await?;
                handed_out = false;
            }
            let delay = failure
                .retry_after
                .map(|wait| wait.min(config.backoff_cap))
                .unwrap_or_else(|| backoff(retries, config.backoff_base, config.backoff_cap));
            tracing::warn!(attempt = retries, ?delay, %error, "retrying");
            send(
                sender,
                ProviderEvent::Retry {
                    attempt: retries,
                    delay,
                    reason: error.to_string(),
                    rate_limits: failure.rate_limits,
                },
            )
            .await?;
            inner.sleeper.sleep(delay).await;
            continue;
        }
        if retryable && matches!(error.kind, ErrorKind::StreamIdle | ErrorKind::StreamBroken) {
            // The retries are spent on a broken stream: one non-streaming request.
            if handed_out {
                send(
                    sender,
                    ProviderEvent::Restart {
                        reason: error.to_string(),
                        non_streaming: true,
                    },
                )
                .await?;
            }
            let (message, request_id) = non_streaming(&client, &body).await?;
            let block_status = vec![BlockStatus::Complete; message.content.len()];
            send(
                sender,
                ProviderEvent::Done {
                    message,
                    block_status,
                    non_streaming: true,
                    request_id,
                },
            )
            .await?;
            return Ok(());
        }
        return Err(error);
    }
}

fn request_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("request-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

fn rate_limits(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("anthropic-ratelimit-"))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

/// The error for an API error kind and message.
fn api_error_kind(kind: &ApiErrorKind, message: &str, status: Option<StatusCode>) -> ErrorKind {
    match kind {
        ApiErrorKind::InvalidRequest
            if message.to_ascii_lowercase().contains("prompt is too long") =>
        {
            ErrorKind::PromptTooLong
        }
        ApiErrorKind::InvalidRequest => ErrorKind::InvalidRequest,
        ApiErrorKind::Authentication => ErrorKind::Authentication,
        ApiErrorKind::Permission => ErrorKind::Permission,
        ApiErrorKind::NotFound => ErrorKind::NotFound,
        ApiErrorKind::RequestTooLarge => ErrorKind::RequestTooLarge,
        ApiErrorKind::RateLimit => ErrorKind::RateLimited,
        ApiErrorKind::Overloaded => ErrorKind::Overloaded,
        ApiErrorKind::Api | ApiErrorKind::Timeout => ErrorKind::Server,
        _ => status.map_or(ErrorKind::Http, status_kind),
    }
}

fn status_kind(status: StatusCode) -> ErrorKind {
    match status.as_u16() {
        400 => ErrorKind::InvalidRequest,
        401 => ErrorKind::Authentication,
        403 => ErrorKind::Permission,
        404 => ErrorKind::NotFound,
        413 => ErrorKind::RequestTooLarge,
        429 => ErrorKind::RateLimited,
        529 => ErrorKind::Overloaded,
        408 | 409 | 500..=599 => ErrorKind::Server,
        _ => ErrorKind::Http,
    }
}

/// Reads an error response's body (bounded) and classifies it.
async fn http_failure(
    status: StatusCode,
    headers: &HeaderMap,
    mut body: crate::transport::BodyStream,
) -> Failure {
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > 1 << 20 {
            break;
        }
    }
    let parsed = serde_json::from_slice::<ApiErrorBody>(&bytes).ok();
    let (kind, message) = match &parsed {
        Some(api) => (
            api_error_kind(&api.error.kind, &api.error.message, Some(status)),
            format!("{}: {}", api.error.kind, api.error.message),
        ),
        None => (
            status_kind(status),
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned(),
        ),
    };
    // A 429/529 is classified by status even if the body says otherwise.
    let kind = match status.as_u16() {
        429 => ErrorKind::RateLimited,
        529 => ErrorKind::Overloaded,
        _ => kind,
    };
    let mut error = ProviderError::new(kind, message);
    error.status = Some(status.as_u16());
    error.request_id = request_id(headers).or_else(|| parsed.and_then(|api| api.request_id));
    Failure {
        error,
        retry_after: retry_after(headers),
        should_retry: should_retry_header(headers),
        rate_limits: rate_limits(headers),
    }
}

/// One streaming attempt: sends the request, checks the response, parses the body under the
/// idle watchdog.
async fn attempt(
    client: &AnthropicClient,
    body: Bytes,
    sender: &Sender,
    handed_out: &mut bool,
) -> Result<(), Failure> {
    let config = &client.inner.config;
    let response = client.inner.transport.send(client.request(body)).await?;
    let request_id = request_id(&response.headers);
    if !response.status.is_success() {
        return Err(http_failure(response.status, &response.headers, response.body).await);
    }
    let content_type = response
        .headers
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    if !sse_parser::is_event_stream(content_type) {
        let mut error = ProviderError::new(
            ErrorKind::NotEventStream,
            format!("expected text/event-stream, got {content_type:?}"),
        );
        error.status = Some(response.status.as_u16());
        error.request_id = request_id;
        return Err(error.into());
    }
    let mut body = response.body;
    let mut parser = MessageStream::new();
    let mut last_bytes = Instant::now();
    let mut warned = false;
    loop {
        let limit = if warned || config.idle_warn >= config.idle_timeout {
            config.idle_timeout
        } else {
            config.idle_warn
        };
        let next = match tokio::time::timeout_at(last_bytes + limit, body.next()).await {
            Err(_) if !warned && config.idle_warn < config.idle_timeout => {
                warned = true;
                send(
                    sender,
                    ProviderEvent::Idle {
                        silent_for: last_bytes.elapsed(),
                    },
                )
                .await?;
                continue;
            }
            Err(_) => {
                let mut error = ProviderError::new(
                    ErrorKind::StreamIdle,
                    format!("no data for {} ms", config.idle_timeout.as_millis()),
                );
                error.request_id = request_id;
                return Err(error.into());
            }
            Ok(next) => next,
        };
        match next {
            Some(Ok(chunk)) => {
                last_bytes = Instant::now();
                warned = false;
                parser.push(chunk);
            }
            Some(Err(mut error)) => {
                error.request_id = request_id;
                return Err(error.into());
            }
            None => {
                // The body ended: apply the end-of-input rule.
                let finished = parser
                    .finish()
                    .map_err(|error| parse_failure(error, request_id.clone()))?;
                return match finished.message {
                    Some(done) => {
                        send(
                            sender,
                            ProviderEvent::Done {
                                message: done.message,
                                block_status: done.block_status,
                                non_streaming: false,
                                request_id,
                            },
                        )
                        .await?;
                        Ok(())
                    }
                    None => Err(ProviderError::new(
                        ErrorKind::StreamBroken,
                        "the stream ended without a message",
                    )
                    .into()),
                };
            }
        }
        loop {
            match parser.next_item() {
                Ok(Some(Item::Event(event))) => {
                    *handed_out = true;
                    send(sender, ProviderEvent::Stream(event)).await?;
                }
                Ok(Some(Item::BlockComplete(block))) => {
                    send(sender, ProviderEvent::Block(*block)).await?
                }
                Ok(Some(Item::MessageComplete(done))) => {
                    send(
                        sender,
                        ProviderEvent::Done {
                            message: done.message,
                            block_status: done.block_status,
                            non_streaming: false,
                            request_id,
                        },
                    )
                    .await?;
                    return Ok(());
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(error) => return Err(parse_failure(error, request_id)),
            }
        }
    }
}

/// Classifies a parser error: error events by their kind, an incomplete stream as broken,
/// anything else as a parse error.
fn parse_failure(error: sse_parser::Error, request_id: Option<String>) -> Failure {
    let mut failure = match &error {
        sse_parser::Error::Accumulate(AccumulateError::Api { error: body, .. }) => {
            let mut detail = ProviderError::new(
                api_error_kind(&body.error.kind, &body.error.message, None),
                format!(
                    "{}: {} (error event mid-stream)",
                    body.error.kind, body.error.message
                ),
            );
            detail.request_id = body.request_id.clone();
            detail
        }
        sse_parser::Error::Accumulate(AccumulateError::Incomplete { received }) => {
            ProviderError::new(
                ErrorKind::StreamBroken,
                format!("the stream ended early: {received}"),
            )
        }
        other => ProviderError::new(ErrorKind::Parse, other.to_string()),
    };
    if failure.request_id.is_none() {
        failure.request_id = request_id;
    }
    failure.into()
}

/// The non-streaming last resort: the same request with `"stream": false`.
async fn non_streaming(
    client: &AnthropicClient,
    body: &Bytes,
) -> Result<(Message, Option<String>), ProviderError> {
    let mut json: serde_json::Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::new(
            ErrorKind::Config,
            format!("the request body is not JSON: {error}"),
        )
    })?;
    if let Some(object) = json.as_object_mut() {
        object.insert("stream".into(), serde_json::Value::Bool(false));
    }
    let body = Bytes::from(json.to_string());
    let response = client.inner.transport.send(client.request(body)).await?;
    let request_id = request_id(&response.headers);
    if !response.status.is_success() {
        return Err(
            http_failure(response.status, &response.headers, response.body)
                .await
                .error,
        );
    }
    let mut bytes = Vec::new();
    let mut body = response.body;
    while let Some(chunk) = body.next().await {
        bytes.extend_from_slice(&chunk?);
    }
    let message: Message = serde_json::from_slice(&bytes).map_err(|error| {
        ProviderError::new(ErrorKind::Parse, format!("non-streaming response: {error}"))
    })?;
    Ok((message, request_id))
}
