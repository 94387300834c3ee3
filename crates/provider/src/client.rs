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

use crate::config::{ANTHROPIC_VERSION, Api, Auth, ClientConfig, Platform};
use crate::error::{ErrorKind, ProviderError};
use crate::retry::{Sleeper, TokioSleeper, backoff, retry_after, should_retry_header};
use crate::transport::{HttpRequest, HttpResponse, HyperTransport, Transport};

/// What a streaming call yields.
#[derive(Clone, Debug, PartialEq)]
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
    /// What a Chat Completions server attached to its tool calls, sent back with them.
    call_extras: crate::chat::CallExtras,
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
        let path = match config.api {
            Api::Messages => "/v1/messages",
            Api::ChatCompletions(_) => "/chat/completions",
            Api::Responses => "/responses",
        };
        let uri: Uri = format!("{}{path}", config.base_url.trim_end_matches('/'))
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
                call_extras: crate::chat::CallExtras::default(),
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
        let body = match self.wire_body(body) {
            Ok(body) => body,
            Err(error) => return Box::pin(futures_util::stream::iter([Err(error)])),
        };
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

    /// The context window an OpenAI-compatible server reports for `model`, in tokens: the
    /// `max_model_len` (vLLM), `context_length` (OpenRouter) or `max_context_length` of its
    /// entry in `GET {base}/models`, else LM Studio's own listing (`GET {root}/api/v0/models`:
    /// the `loaded_context_length` it runs the model with, else the model's
    /// `max_context_length`), else llama.cpp's `n_ctx` in `GET {root}/props`, else the `context_length` Ollama serves the model with when it is
    /// loaded (`GET {root}/api/ps`: what `OLLAMA_CONTEXT_LENGTH` or the model's `num_ctx`
    /// made it), else a `num_ctx` in the model's parameters from Ollama's
    /// `POST {root}/api/show`. `None` for the Messages API, or when the server reports none
    /// or does not answer within 5 s; each answer is read up to 1 MiB.
    pub async fn reported_context_window(&self, model: &str) -> Option<u64> {
        if self.inner.config.api == Api::Messages {
            return None;
        }
        let base = self.inner.config.base_url.trim_end_matches('/');
        // The first of `keys` that `model`'s entry in a `{"data": [...]}` listing has.
        let listed = |listing: &serde_json::Value, keys: &[&str]| {
            listing
                .get("data")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .find(|entry| entry.get("id").and_then(serde_json::Value::as_str) == Some(model))
                .and_then(|entry| {
                    keys.iter()
                        .find_map(|key| entry.get(*key).and_then(serde_json::Value::as_u64))
                })
                .filter(|window| *window > 0)
        };
        if let Some(models) = self.get_json(&format!("{base}/models")).await
            && let Some(window) = listed(
                &models,
                &["max_model_len", "context_length", "max_context_length"],
            )
        {
            return Some(window);
        }
        let root = base.strip_suffix("/v1").unwrap_or(base);
        if let Some(listing) = self.get_json(&format!("{root}/api/v0/models")).await
            && let Some(window) = listed(&listing, &["loaded_context_length", "max_context_length"])
        {
            return Some(window);
        }
        if let Some(props) = self.get_json(&format!("{root}/props")).await
            && let Some(window) = props
                .get("default_generation_settings")
                .and_then(|settings| settings.get("n_ctx"))
                .or_else(|| props.get("n_ctx"))
                .and_then(serde_json::Value::as_u64)
                .filter(|window| *window > 0)
        {
            return Some(window);
        }
        // Ollama, the model loaded: the window it runs with.
        if let Some(running) = self.get_json(&format!("{root}/api/ps")).await
            && let Some(window) = running
                .get("models")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .find(|entry| {
                    ["name", "model"].iter().any(|key| {
                        entry
                            .get(*key)
                            .and_then(serde_json::Value::as_str)
                            .is_some_and(|name| {
                                name == model || name.strip_suffix(":latest") == Some(model)
                            })
                    })
                })
                .and_then(|entry| entry.get("context_length"))
                .and_then(serde_json::Value::as_u64)
                .filter(|window| *window > 0)
        {
            return Some(window);
        }
        // Ollama, not loaded: only a `num_ctx` the model's parameters set is what it serves
        // (the model's own `context_length` is not: Ollama cuts prompts at its smaller
        // default).
        let body = serde_json::json!({"model": model}).to_string();
        let show = self
            .json(Method::POST, &format!("{root}/api/show"), Bytes::from(body))
            .await?;
        show.get("parameters")
            .and_then(serde_json::Value::as_str)?
            .lines()
            .find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u64>().ok())
                    .flatten()
            })
            .filter(|window| *window > 0)
    }

    /// `GET url` with the client's credentials: the JSON answer of a 2xx, else `None`.
    async fn get_json(&self, url: &str) -> Option<serde_json::Value> {
        self.json(Method::GET, url, Bytes::new()).await
    }

    /// `method url` with `body` and the client's credentials: the JSON answer of a 2xx,
    /// else `None` (within 5 s, at most 1 MiB).
    async fn json(&self, method: Method, url: &str, body: Bytes) -> Option<serde_json::Value> {
        let empty = body.is_empty();
        let key = self.source_key().await.ok()?;
        let mut request = self.request(body, key.as_deref());
        request.method = method;
        request.uri = url.parse().ok()?;
        if empty {
            request.headers.remove("content-type");
        }
        let limit = Duration::from_secs(5);
        let response = tokio::time::timeout(limit, self.inner.transport.send(request))
            .await
            .ok()?
            .ok()?;
        if !response.status.is_success() {
            return None;
        }
        let mut body = response.body;
        let (bytes, end) = read_body(&mut body, 1 << 20, limit, Some(Instant::now() + limit)).await;
        matches!(end, BodyEnd::Complete)
            .then(|| serde_json::from_slice(&bytes).ok())
            .flatten()
    }

    /// The request body in the server's wire format: the Messages API body as it came, or
    /// translated to Chat Completions.
    fn wire_body(&self, body: Bytes) -> Result<Bytes, ProviderError> {
        if self.inner.config.api == Api::Messages {
            return Ok(body);
        }
        let request: protocol::CreateMessageRequest =
            serde_json::from_slice(&body).map_err(|error| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!("the request is not a Messages API request: {error}"),
                )
            })?;
        let translated = match &self.inner.config.api {
            Api::ChatCompletions(options) => {
                let extras = self
                    .inner
                    .call_extras
                    .lock()
                    .map(|extras| extras.clone())
                    .unwrap_or_default();
                crate::chat::chat_request_with_extras(&request, options, &extras)
            }
            Api::Responses | Api::Messages => crate::responses::responses_request(&request),
        };
        Ok(Bytes::from(translated.to_string()))
    }

    /// The key of an [`Auth::Source`] for the next request; `None` for other credentials.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Authentication`] naming why the source has no key.
    async fn source_key(&self) -> Result<Option<String>, ProviderError> {
        match &self.inner.config.auth {
            Auth::Source(source) => source.key().await.map(Some).map_err(|error| {
                ProviderError::new(ErrorKind::Authentication, format!("no API key: {error}"))
            }),
            _ => Ok(None),
        }
    }

    /// The HTTP request for `body`, with `source_key` as the credential of an
    /// [`Auth::Source`].
    fn request(&self, body: Bytes, source_key: Option<&str>) -> HttpRequest {
        let config = &self.inner.config;
        let (body, long_context) = if config.api == Api::Messages {
            long_context(body)
        } else {
            (body, false)
        };
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        if config.api == Api::Messages {
            headers.insert(
                "anthropic-version",
                HeaderValue::from_static(ANTHROPIC_VERSION),
            );
        }
        headers.insert(
            "user-agent",
            HeaderValue::from_static(concat!("agent/", env!("CARGO_PKG_VERSION"))),
        );
        match &config.auth {
            Auth::ApiKey(key) if config.api != Api::Messages => {
                if let Ok(value) = HeaderValue::from_str(&format!("Bearer {key}")) {
                    headers.insert("authorization", value);
                }
            }
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
            Auth::Source(_) => {
                if let Some(key) = source_key {
                    if config.api == Api::Messages
                        && let Ok(value) = HeaderValue::from_str(key)
                    {
                        headers.insert("x-api-key", value);
                    }
                    if let Ok(value) = HeaderValue::from_str(&format!("Bearer {key}")) {
                        headers.insert("authorization", value);
                    }
                }
            }
            Auth::None => {}
        }
        let mut betas = config.betas.clone();
        if long_context && !betas.iter().any(|beta| beta == LONG_CONTEXT_BETA) {
            betas.push(LONG_CONTEXT_BETA.to_owned());
        }
        if !betas.is_empty()
            && config.api == Api::Messages
            && let Ok(value) = HeaderValue::from_str(&betas.join(","))
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

/// The `anthropic-beta` flag of the 1M-token context window, which Claude Code sends for a
/// model written with the `[1m]` suffix (`opus[1m]`, `claude-sonnet-4-6[1m]`).
pub const LONG_CONTEXT_BETA: &str = "context-1m-2025-08-07";

/// A Messages API body whose `model` (its first field, as the loop writes it) ends in
/// `[1m]`: the body with the suffix dropped, and `true` (the request then carries
/// [`LONG_CONTEXT_BETA`]); any other body unchanged, and `false`. Only the first field is
/// looked at: the body is not parsed.
fn long_context(body: Bytes) -> (Bytes, bool) {
    const START: &[u8] = b"{\"model\":\"";
    let Some(rest) = body.strip_prefix(START) else {
        return (body, false);
    };
    let Some(end) = rest.iter().position(|byte| *byte == b'"') else {
        return (body, false);
    };
    let Some(model) = rest[..end].strip_suffix(b"[1m]") else {
        return (body, false);
    };
    let mut stripped = Vec::with_capacity(body.len());
    stripped.extend_from_slice(START);
    stripped.extend_from_slice(model);
    stripped.extend_from_slice(&rest[end..]);
    (Bytes::from(stripped), true)
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
    let mut fresh_key = false;
    loop {
        // A rate limit another client of the gate met: wait it out first.
        if let Some(gate) = &config.rate_gate {
            let wait = gate.remaining();
            if !wait.is_zero() {
                inner.sleeper.sleep(wait).await;
            }
        }
        let failure = match attempt(&client, body.clone(), sender, &mut handed_out).await {
            Ok(()) => return Ok(()),
            Err(failure) => failure,
        };
        let error =
            match refused_credentials(inner, failure.error, handed_out, &mut fresh_key).await {
                Refused::Again => continue,
                Refused::Fail(error) => return Err(error),
                Refused::Other(error) => error,
            };
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
        // A failure that will not heal by waiting gets one more try, not the full count.
        let limit = if error.lasting {
            config.max_retries.min(1)
        } else {
            config.max_retries
        };
        if retryable && retries < limit {
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
            match (&config.rate_gate, error.kind) {
                // Everyone waits, this client too (at the top of the loop).
                (Some(gate), ErrorKind::RateLimited) => gate.hold(delay),
                _ => inner.sleeper.sleep(delay).await,
            }
            continue;
        }
        if retryable
            && matches!(error.kind, ErrorKind::StreamIdle | ErrorKind::StreamBroken)
            && config.api == Api::Messages
        {
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

/// What to do about credentials the server refused.
enum Refused {
    /// Send again: fresh credentials will be fetched.
    Again,
    /// Give up with this error (it names where the credentials came from).
    Fail(ProviderError),
    /// Not about credentials, or nothing more to try: the error goes on to the retry rules.
    Other(ProviderError),
}

/// The answer to a refusal of the credentials, once per call and only before any of the
/// response was handed out: a key from a source (`apiKeyHelper`) that got a 401 is fetched
/// again; Bedrock's credentials and Vertex AI's token (a 401 or 403: renewed since) are
/// looked up again, and refused again they fail the call naming where they came from.
async fn refused_credentials(
    inner: &Inner,
    error: ProviderError,
    handed_out: bool,
    fresh: &mut bool,
) -> Refused {
    let config = &inner.config;
    if handed_out {
        return Refused::Other(error);
    }
    if let Platform::Bedrock(bedrock) = &config.platform
        && matches!(
            error.kind,
            ErrorKind::Authentication | ErrorKind::Permission
        )
    {
        if !*fresh {
            *fresh = true;
            bedrock.invalidate().await;
            return Refused::Again;
        }
        let source = bedrock.credential_source(inner.transport.as_ref()).await;
        let mut named = error;
        named.message = format!("{} (credentials from {source})", named.message);
        return Refused::Fail(named);
    }
    if let Platform::Vertex(vertex) = &config.platform
        && matches!(
            error.kind,
            ErrorKind::Authentication | ErrorKind::Permission
        )
    {
        if !*fresh {
            *fresh = true;
            vertex.invalidate().await;
            return Refused::Again;
        }
        let source = vertex.credential_source(inner.transport.as_ref()).await;
        let mut named = error;
        named.message = format!("{} (token from {source})", named.message);
        return Refused::Fail(named);
    }
    if let Auth::Source(source) = &config.auth
        && error.kind == ErrorKind::Authentication
        && error.status == Some(401)
        && !*fresh
    {
        *fresh = true;
        source.invalidate();
        return Refused::Again;
    }
    Refused::Other(error)
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
        // The API has no error type of its own for these: its messages say `image` ("Could
        // not process image", "image exceeds 5 MB maximum", "image dimensions exceed max
        // allowed size"). Classified here, where the API's message is parsed, and nowhere
        // else.
        ApiErrorKind::InvalidRequest if message.to_ascii_lowercase().contains("image") => {
            ErrorKind::ImageRejected
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
    idle: Duration,
    config: &ClientConfig,
) -> Failure {
    let api = &config.api;
    // What arrives of the first 1 MiB is enough to classify the error; a body that stops
    // or fails half-way is classified on what came.
    // Within the idle timeout in all: an error body that trickles on is cut.
    let deadline = Instant::now() + idle;
    let (bytes, _) = read_body(&mut body, ERROR_BODY_LIMIT, idle, Some(deadline)).await;
    if matches!(config.platform, Platform::Bedrock(_))
        && let Some(mut error) = crate::bedrock::http_error(headers, status.as_u16(), &bytes)
    {
        error.request_id = headers
            .get("x-amzn-requestid")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        return Failure {
            error,
            retry_after: retry_after(headers),
            should_retry: should_retry_header(headers),
            rate_limits: Vec::new(),
        };
    }
    // A Chat Completions server's body (`{"error": {"message", "type", "code"}}`) also
    // parses as the Messages API's; its `code` says more (`context_length_exceeded`).
    let parsed = match api {
        Api::Messages => serde_json::from_slice::<ApiErrorBody>(&bytes).ok(),
        Api::ChatCompletions(_) | Api::Responses => None,
    };
    let (kind, message) = match &parsed {
        Some(api) => (
            api_error_kind(&api.error.kind, &api.error.message, Some(status)),
            // A server's message is cut like any body: it is printed on every retry.
            format!(
                "{}: {}",
                api.error.kind,
                api.error.message.chars().take(1_000).collect::<String>()
            ),
        ),
        None => match serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|value| crate::chat::error_of(&value, Some(status.as_u16())))
        {
            // An OpenAI-compatible server's error body.
            Some(error) => (error.kind, error.message),
            None => (
                status_kind(status),
                String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned(),
            ),
        },
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
    let response = send_request(client, body).await?;
    let request_id = request_id(&response.headers);
    if !response.status.is_success() {
        return Err(http_failure(
            response.status,
            &response.headers,
            response.body,
            config.idle_timeout,
            config,
        )
        .await);
    }
    let content_type = response
        .headers
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let Some(mut parser) = Parser::for_body(config, content_type, &client.inner.call_extras) else {
        let mut error = ProviderError::new(
            ErrorKind::NotEventStream,
            format!("expected text/event-stream, got {content_type:?}"),
        );
        error.status = Some(response.status.as_u16());
        error.request_id = request_id;
        return Err(error.into());
    };
    let mut body = response.body;
    let mut watchdog = Watchdog::new(config);
    let mut received: u64 = 0;
    loop {
        let next = match tokio::time::timeout_at(watchdog.deadline(), body.next()).await {
            Ok(next) => next,
            Err(_) => {
                let message = match watchdog.fire() {
                    Alarm::Warn(silent_for) => {
                        send(sender, ProviderEvent::Idle { silent_for }).await?;
                        continue;
                    }
                    Alarm::Idle => format!(
                        "no data for {} ms (AGENT_STREAM_IDLE_TIMEOUT_MS sets the limit)",
                        config.idle_timeout.as_millis()
                    ),
                    Alarm::NoProgress => format!(
                        "nothing but pings or empty updates for {} ms (AGENT_STREAM_PROGRESS_TIMEOUT_MS sets the limit)",
                        config.progress_timeout.as_millis()
                    ),
                    Alarm::TooLong => {
                        let mut error = ProviderError::new(
                            ErrorKind::ResponseTooLarge,
                            format!(
                                "the streamed response ran longer than {} ms (set AGENT_STREAM_TIMEOUT_MS to allow more)",
                                config.stream_timeout.as_millis()
                            ),
                        );
                        error.request_id = request_id;
                        return Err(error.into());
                    }
                };
                let mut error = ProviderError::new(ErrorKind::StreamIdle, message);
                error.request_id = request_id;
                return Err(error.into());
            }
        };
        match next {
            Some(Ok(chunk)) => {
                watchdog.bytes();
                received = received.saturating_add(chunk.len() as u64);
                if received > config.max_stream_bytes {
                    let mut error = too_large(
                        "streamed response",
                        config.max_stream_bytes,
                        "AGENT_MAX_STREAM_BYTES",
                    );
                    error.request_id = request_id;
                    return Err(error.into());
                }
                parser.push(chunk);
            }
            Some(Err(mut error)) => {
                error.request_id = request_id;
                return Err(error.into());
            }
            None => {
                // The body ended: apply the end-of-input rule.
                let finished = parser.finish(&request_id)?;
                return match finished {
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
                    if adds_content(&event) {
                        watchdog.progress();
                    }
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
                Err(failure) => return Err(with_request_id(failure, request_id)),
            }
        }
    }
}

/// The body's parser, by wire format. One lives on the stack of each attempt, so the size
/// difference of the variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Parser {
    Messages(MessageStream),
    /// Bedrock's event stream framing around the Messages API's events.
    Bedrock(crate::bedrock::EventStream, MessageStream),
    Chat(crate::chat::ChatStream),
    Responses(crate::responses::ResponsesStream),
}

impl Parser {
    /// The parser for a streamed body of media type `content_type` from the server
    /// `config` describes: `None` when it is not a stream (Bedrock's event stream, else
    /// `text/event-stream`).
    fn for_body(
        config: &ClientConfig,
        content_type: &str,
        extras: &crate::chat::CallExtras,
    ) -> Option<Self> {
        if matches!(config.platform, Platform::Bedrock(_))
            && content_type.starts_with(crate::bedrock::EVENT_STREAM_TYPE)
        {
            return Some(Self::Bedrock(
                crate::bedrock::EventStream::new(),
                MessageStream::new(),
            ));
        }
        if !sse_parser::is_event_stream(content_type) {
            return None;
        }
        Some(match &config.api {
            Api::Messages => Self::Messages(MessageStream::new()),
            Api::ChatCompletions(_) => {
                Self::Chat(crate::chat::ChatStream::with_call_extras(extras.clone()))
            }
            Api::Responses => Self::Responses(crate::responses::ResponsesStream::new()),
        })
    }

    fn push(&mut self, chunk: Bytes) {
        match self {
            Self::Messages(stream) => stream.push(chunk),
            Self::Bedrock(frames, stream) => {
                frames.push(&chunk);
                if !frames.events.is_empty() {
                    stream.push(Bytes::from(std::mem::take(&mut frames.events)));
                }
            }
            Self::Chat(stream) => stream.push(chunk),
            Self::Responses(stream) => stream.push(chunk),
        }
    }

    fn next_item(&mut self) -> Result<Option<Item>, Failure> {
        match self {
            Self::Messages(stream) => stream
                .next_item()
                .map_err(|error| parse_failure(error, None)),
            Self::Bedrock(frames, stream) => match stream.next_item() {
                Ok(None) => frames.failure().map_or(Ok(None), |error| Err(error.into())),
                other => other.map_err(|error| parse_failure(error, None)),
            },
            Self::Chat(stream) => stream.next_item().map_err(Failure::from),
            Self::Responses(stream) => stream.next_item().map_err(Failure::from),
        }
    }

    /// The end of the body: the final message, if the stream made one.
    fn finish(
        self,
        request_id: &Option<String>,
    ) -> Result<Option<sse_parser::FinalMessage>, Failure> {
        match self {
            Self::Messages(stream) => stream
                .finish()
                .map(|finished| finished.message)
                .map_err(|error| parse_failure(error, request_id.clone())),
            Self::Bedrock(mut frames, stream) => {
                if let Some(error) = frames.failure() {
                    return Err(with_request_id(error.into(), request_id.clone()));
                }
                if frames.has_partial() {
                    let error = ProviderError::new(
                        ErrorKind::StreamBroken,
                        "Bedrock's event stream ended inside a message",
                    );
                    return Err(with_request_id(error.into(), request_id.clone()));
                }
                stream
                    .finish()
                    .map(|finished| finished.message)
                    .map_err(|error| parse_failure(error, request_id.clone()))
            }
            Self::Chat(stream) => stream
                .finish()
                .map_err(|error| with_request_id(error.into(), request_id.clone())),
            Self::Responses(stream) => stream
                .finish()
                .map_err(|error| with_request_id(error.into(), request_id.clone())),
        }
    }
}

fn with_request_id(mut failure: Failure, request_id: Option<String>) -> Failure {
    if failure.error.request_id.is_none() {
        failure.error.request_id = request_id;
    }
    failure
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

/// The non-streaming last resort: the same request with `"stream": false`, within the
/// non-streaming timeout.
async fn non_streaming(
    client: &AnthropicClient,
    body: &Bytes,
) -> Result<(Message, Option<String>), ProviderError> {
    let limit = client.inner.config.non_streaming_timeout;
    tokio::time::timeout(limit, non_streaming_request(client, body))
        .await
        .unwrap_or_else(|_| {
            Err(ProviderError::new(
                ErrorKind::ResponseTimeout,
                format!(
                    "the non-streaming response did not complete within {} ms (AGENT_NON_STREAMING_TIMEOUT_MS sets the limit)",
                    limit.as_millis()
                ),
            ))
        })
}

async fn non_streaming_request(
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
    let config = &client.inner.config;
    let response = send_request(client, body).await?;
    let request_id = request_id(&response.headers);
    if !response.status.is_success() {
        return Err(http_failure(
            response.status,
            &response.headers,
            response.body,
            config.idle_timeout,
            config,
        )
        .await
        .error);
    }
    let mut body = response.body;
    // The whole call is under the non-streaming timeout (the caller's).
    let (bytes, end) = read_body(&mut body, config.max_body_bytes, config.idle_timeout, None).await;
    match end {
        BodyEnd::Complete => {}
        BodyEnd::TooLarge => {
            return Err(too_large(
                "non-streaming response",
                config.max_body_bytes,
                "AGENT_MAX_BODY_BYTES",
            ));
        }
        BodyEnd::Idle => {
            return Err(ProviderError::new(
                ErrorKind::StreamIdle,
                format!(
                    "the non-streaming response sent no data for {} ms (AGENT_STREAM_IDLE_TIMEOUT_MS sets the limit)",
                    config.idle_timeout.as_millis()
                ),
            ));
        }
        BodyEnd::Failed(error) => return Err(error),
    }
    let message: Message = serde_json::from_slice(&bytes).map_err(|error| {
        ProviderError::new(ErrorKind::Parse, format!("non-streaming response: {error}"))
    })?;
    Ok((message, request_id))
}

/// Whether `event` makes the response grow: a message or block starting, a delta that
/// carries something, the stop reason. Pings, empty deltas and usage-only updates do not
/// (a server sending only those forever makes no progress).
fn adds_content(event: &StreamEvent) -> bool {
    use protocol::ContentDelta;
    match event {
        StreamEvent::MessageStart { .. }
        | StreamEvent::ContentBlockStart { .. }
        | StreamEvent::ContentBlockStop { .. }
        | StreamEvent::MessageStop => true,
        StreamEvent::ContentBlockDelta { delta, .. } => match delta {
            ContentDelta::Text { text } => !text.is_empty(),
            ContentDelta::InputJson { partial_json } => !partial_json.is_empty(),
            ContentDelta::Thinking { thinking } => !thinking.is_empty(),
            ContentDelta::Signature { signature } => !signature.is_empty(),
            _ => true,
        },
        StreamEvent::MessageDelta(delta) => delta.stop_reason.is_some(),
        _ => false,
    }
}

/// The deadlines of one streamed response. The idle watchdog of the seeds
/// (000_7dfda54faac69dcf.txt, "流式空闲看门狗"): no bytes for `idle_warn` (45 s) is reported,
/// for `idle_timeout` (90 s) ends the attempt; and the progress limit: events that are all
/// `ping` for `progress_timeout` (5 min) end it too, so a server that pings forever cannot
/// hold the run.
#[derive(Debug)]
struct Watchdog {
    started: Instant,
    last_bytes: Instant,
    last_progress: Instant,
    warned: bool,
    idle_warn: Duration,
    idle_timeout: Duration,
    progress_timeout: Duration,
    stream_timeout: Duration,
}

/// Which deadline passed.
#[derive(Debug)]
enum Alarm {
    /// No bytes for the warning threshold (how long, so far).
    Warn(Duration),
    /// No bytes for the idle timeout.
    Idle,
    /// Nothing that makes the response grow for the progress timeout.
    NoProgress,
    /// The whole response took longer than the stream timeout.
    TooLong,
}

impl Watchdog {
    fn new(config: &ClientConfig) -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last_bytes: now,
            last_progress: now,
            warned: false,
            idle_warn: config.idle_warn,
            idle_timeout: config.idle_timeout,
            progress_timeout: config.progress_timeout,
            stream_timeout: config.stream_timeout,
        }
    }

    /// Whether the warning is still to come (a warning threshold at or past the timeout
    /// never warns).
    fn warns(&self) -> bool {
        !self.warned && self.idle_warn < self.idle_timeout
    }

    /// The next deadline.
    fn deadline(&self) -> Instant {
        let idle = if self.warns() {
            self.idle_warn
        } else {
            self.idle_timeout
        };
        (self.last_bytes + idle)
            .min(self.last_progress + self.progress_timeout)
            .min(self.started + self.stream_timeout)
    }

    /// The alarm of the deadline that passed.
    fn fire(&mut self) -> Alarm {
        let now = Instant::now();
        if now >= self.started + self.stream_timeout {
            Alarm::TooLong
        } else if now >= self.last_progress + self.progress_timeout {
            Alarm::NoProgress
        } else if self.warns() {
            self.warned = true;
            Alarm::Warn(now - self.last_bytes)
        } else {
            Alarm::Idle
        }
    }

    /// Bytes arrived.
    fn bytes(&mut self) {
        self.last_bytes = Instant::now();
        self.warned = false;
    }

    /// An event other than `ping` arrived.
    fn progress(&mut self) {
        self.last_progress = Instant::now();
    }
}

/// The most of an error response's body read to classify it.
const ERROR_BODY_LIMIT: u64 = 1 << 20;

/// Sends the request for `body`, waiting at most the headers timeout for the response.
async fn send_request(
    client: &AnthropicClient,
    body: Bytes,
) -> Result<HttpResponse, ProviderError> {
    let config = &client.inner.config;
    let host = client.inner.uri.host().unwrap_or("the server").to_owned();
    let request = match &config.platform {
        Platform::Anthropic => {
            let key = client.source_key().await?;
            client.request(body, key.as_deref())
        }
        Platform::Bedrock(bedrock) => {
            bedrock
                .request(&body, &config.betas, client.inner.transport.as_ref())
                .await?
        }
        Platform::Vertex(vertex) => {
            vertex
                .request(&body, &config.betas, client.inner.transport.as_ref())
                .await?
        }
    };
    tokio::time::timeout(
        config.headers_timeout,
        client.inner.transport.send(request),
    )
    .await
    .unwrap_or_else(|_| {
        Err(ProviderError::new(
            ErrorKind::ResponseTimeout,
            format!(
                "{host} sent no response headers within {} ms (AGENT_HEADERS_TIMEOUT_MS sets the limit)",
                config.headers_timeout.as_millis()
            ),
        ))
    })
}

/// The error for a response past `limit` bytes, naming the variable that raises it.
fn too_large(what: &str, limit: u64, variable: &str) -> ProviderError {
    ProviderError::new(
        ErrorKind::ResponseTooLarge,
        format!("the {what} passed {limit} bytes (set {variable} to allow more)"),
    )
}

/// How reading a body ended.
#[derive(Debug)]
enum BodyEnd {
    /// The body ended.
    Complete,
    /// The next chunk would have passed the limit (not read further).
    TooLarge,
    /// No byte for the idle timeout.
    Idle,
    /// The transport failed.
    Failed(ProviderError),
}

/// Reads `body` whole, keeping at most `limit` bytes, waiting at most `idle` for each
/// chunk and reading nothing after `deadline`: memory and time stay bounded whatever the
/// server sends.
async fn read_body(
    body: &mut crate::transport::BodyStream,
    limit: u64,
    idle: Duration,
    deadline: Option<Instant>,
) -> (Vec<u8>, BodyEnd) {
    let mut bytes = Vec::new();
    loop {
        let mut wait = Instant::now() + idle;
        if let Some(deadline) = deadline {
            wait = wait.min(deadline);
        }
        match tokio::time::timeout_at(wait, body.next()).await {
            Err(_) => return (bytes, BodyEnd::Idle),
            Ok(None) => return (bytes, BodyEnd::Complete),
            Ok(Some(Err(error))) => return (bytes, BodyEnd::Failed(error)),
            Ok(Some(Ok(chunk))) => {
                if (bytes.len() + chunk.len()) as u64 > limit {
                    let room = usize::try_from(limit)
                        .unwrap_or(usize::MAX)
                        .saturating_sub(bytes.len());
                    bytes.extend_from_slice(&chunk[..room.min(chunk.len())]);
                    return (bytes, BodyEnd::TooLarge);
                }
                bytes.extend_from_slice(&chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_are_classified_by_type_and_known_messages() {
        let invalid = |message: &str| {
            api_error_kind(
                &ApiErrorKind::InvalidRequest,
                message,
                Some(StatusCode::BAD_REQUEST),
            )
        };
        assert_eq!(
            invalid("prompt is too long: 210000 tokens > 200000 maximum"),
            ErrorKind::PromptTooLong
        );
        for message in [
            "Could not process image",
            "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum",
            "image dimensions exceed max allowed size: 8000 pixels",
        ] {
            assert_eq!(invalid(message), ErrorKind::ImageRejected, "{message}");
        }
        assert_eq!(
            invalid("max_tokens: must be greater than 0"),
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            api_error_kind(&ApiErrorKind::Overloaded, "Overloaded", None),
            ErrorKind::Overloaded
        );
    }
}
