//! Client configuration, read from an injected source (the environment in production).

use std::collections::HashMap;
use std::time::Duration;

use crate::error::{ErrorKind, ProviderError};

/// Where configuration values come from: the process environment, or a map in tests (edition
/// 2024 makes `set_var` unsafe, so tests never touch the real environment).
pub trait ConfigSource {
    /// The value of `key`, if set and not empty.
    fn get(&self, key: &str) -> Option<String>;
}

/// The process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct EnvSource;

impl ConfigSource for EnvSource {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok().filter(|value| !value.is_empty())
    }
}

/// A fixed map of values.
#[derive(Clone, Debug, Default)]
pub struct MapSource(pub HashMap<String, String>);

impl MapSource {
    /// A source with the given pairs.
    pub fn new<const N: usize>(pairs: [(&str, &str); N]) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect(),
        )
    }
}

impl ConfigSource for MapSource {
    fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).filter(|value| !value.is_empty()).cloned()
    }
}

/// How requests are authenticated.
#[derive(Clone)]
pub enum Auth {
    /// `x-api-key: KEY` (`ANTHROPIC_API_KEY`).
    ApiKey(String),
    /// `authorization: Bearer TOKEN` (`ANTHROPIC_AUTH_TOKEN`, for gateways).
    Bearer(String),
    /// A key that comes from somewhere else when a request is made (Claude Code's
    /// `apiKeyHelper`): sent as both `x-api-key` and `authorization: Bearer` on the Messages
    /// API, as Claude Code sends it, and as `authorization: Bearer` elsewhere. A 401 makes
    /// the source forget it ([`KeySource::invalidate`]) and the request is sent once more with
    /// a fresh one.
    Source(std::sync::Arc<dyn KeySource>),
    /// No credentials (local gateways, tests).
    None,
}

impl PartialEq for Auth {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::ApiKey(a), Self::ApiKey(b)) | (Self::Bearer(a), Self::Bearer(b)) => a == b,
            (Self::Source(a), Self::Source(b)) => std::sync::Arc::ptr_eq(a, b),
            (Self::None, Self::None) => true,
            _ => false,
        }
    }
}

impl Eq for Auth {}

impl std::fmt::Debug for Auth {
    // Never print secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ApiKey(_) => "ApiKey(***)",
            Self::Bearer(_) => "Bearer(***)",
            Self::Source(_) => "Source(***)",
            Self::None => "None",
        })
    }
}

/// The future a [`KeySource`] returns: the key, or why there is none (for the user).
pub type KeyFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>>;

/// Where [`Auth::Source`] gets its key, each time a request is made (it caches as it sees
/// fit).
pub trait KeySource: Send + Sync {
    /// The key to send now.
    ///
    /// # Errors
    ///
    /// Why no key could be had; the request then fails as an authentication error naming it.
    fn key(&self) -> KeyFuture<'_>;

    /// The server refused the last key (401): the next [`KeySource::key`] gets a new one.
    fn invalidate(&self);
}

/// Whether the switch `name` is on in `source`: set, and neither `0` nor `false` (Claude
/// Code's `CLAUDE_CODE_USE_BEDROCK=1` and the like).
pub(crate) fn flag(source: &dyn ConfigSource, name: &str) -> bool {
    source
        .get(name)
        .is_some_and(|value| !matches!(value.as_str(), "0" | "false"))
}

/// `Ok` when `url` (the value of `variable`) is an `http://` or `https://` URL.
///
/// # Errors
///
/// [`ErrorKind::Config`] naming the variable and the value.
pub(crate) fn check_base_url(variable: &str, url: &str) -> Result<(), ProviderError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(());
    }
    Err(ProviderError::new(
        ErrorKind::Config,
        format!("{variable} must start with http:// or https://, got {url:?}"),
    ))
}

/// `source` without one variable.
struct Without<'a> {
    source: &'a dyn ConfigSource,
    name: &'static str,
}

impl ConfigSource for Without<'_> {
    fn get(&self, key: &str) -> Option<String> {
        (key != self.name).then(|| self.source.get(key)).flatten()
    }
}

/// Default API base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Everything the client needs.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Base URL, `http://` or `https://`, with an optional path prefix; no trailing slash.
    pub base_url: String,
    /// Credentials.
    pub auth: Auth,
    /// `anthropic-beta` flags.
    pub betas: Vec<String>,
    /// Retries after the first request (at most `max_retries + 1` requests). Default 10, as
    /// Claude Code.
    pub max_retries: u32,
    /// First backoff delay. Default 500 ms (the SDKs').
    pub backoff_base: Duration,
    /// Longest backoff delay, and the clamp of server-requested waits. Default 32 s (Claude
    /// Code's cap).
    pub backoff_cap: Duration,
    /// Time without bytes after which an idle warning is emitted. Default 45 s (the seeds').
    pub idle_warn: Duration,
    /// Time without bytes after which the stream is cancelled and retried; also the longest
    /// wait between two chunks of a non-streaming or error body. Default 90 s (the seeds',
    /// Claude Code's `CLAUDE_STREAM_IDLE_TIMEOUT_MS`).
    pub idle_timeout: Duration,
    /// Time a stream may send nothing but `ping` events before it is cancelled and retried
    /// ([`ErrorKind::StreamIdle`]). Default 5 min: a long prompt's first token can take
    /// minutes, a server that pings forever must not hold the run.
    pub progress_timeout: Duration,
    /// Longest time one streamed response may take in all, however steadily it streams
    /// ([`ErrorKind::ResponseTooLarge`], not retried). Default 60 minutes: a 128,000-token
    /// answer at 50 tokens a second takes 43.
    pub stream_timeout: Duration,
    /// Time from sending a request to its response headers before the attempt fails
    /// ([`ErrorKind::ResponseTimeout`], retried). Default 60 s.
    pub headers_timeout: Duration,
    /// Most bytes of one streamed response before it fails
    /// ([`ErrorKind::ResponseTooLarge`], not retried). Default 64 MiB: about 16 million
    /// output tokens, far above any model's output limit (128 K tokens).
    pub max_stream_bytes: u64,
    /// Most bytes of one non-streaming response body before it fails
    /// ([`ErrorKind::ResponseTooLarge`]). Default 64 MiB.
    pub max_body_bytes: u64,
    /// Longest time of the non-streaming last resort, from the request to the body's end
    /// ([`ErrorKind::ResponseTimeout`]). Default 10 min (Claude Code's `API_TIMEOUT_MS`
    /// default): a body trickling a byte at a time must not hold the run.
    pub non_streaming_timeout: Duration,
    /// Whether a fallback model is configured: the 3rd consecutive 529 then ends the retries
    /// with [`ErrorKind::SwitchToFallback`].
    pub fallback_model: bool,
    /// Extra trusted root certificates, PEM (configuration or `SSL_CERT_FILE`).
    pub extra_roots_pem: Vec<u8>,
    /// Workspace root written as `${WORKSPACE}` in cassettes.
    pub workspace_root: Option<String>,
    /// HTTP CONNECT proxy settings (`HTTPS_PROXY`, `NO_PROXY`).
    pub proxy: crate::transport::ProxyConfig,
    /// The wire format the server speaks.
    pub api: Api,
    /// Shared with other clients (a batch's sessions): a rate limit one meets, all wait
    /// for ([`crate::RateGate`]). `None`: this client's own waits only.
    pub rate_gate: Option<crate::RateGate>,
    /// Where the Messages API is served: Anthropic's API (or a gateway speaking it), or a
    /// cloud platform with its own paths, authentication and framing.
    pub platform: Platform,
}

/// Where the Messages API is served.
#[derive(Clone, Debug, Default)]
pub enum Platform {
    /// `POST {base}/v1/messages` (Anthropic's API, a gateway).
    #[default]
    Anthropic,
    /// Amazon Bedrock (`CLAUDE_CODE_USE_BEDROCK=1`): see [`crate::bedrock`].
    Bedrock(std::sync::Arc<crate::bedrock::Bedrock>),
    /// Google Vertex AI (`CLAUDE_CODE_USE_VERTEX=1`): see [`crate::vertex`].
    Vertex(std::sync::Arc<crate::vertex::Vertex>),
}

/// The wire format of a server. The client takes Messages API requests either way and
/// hands out Messages API events: a Chat Completions server is translated at this edge
/// ([`crate::chat`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Api {
    /// Anthropic's Messages API: `POST {base_url}/v1/messages`, `x-api-key` (or a bearer
    /// token).
    #[default]
    Messages,
    /// An OpenAI-compatible Chat Completions API: `POST {base_url}/chat/completions` (the
    /// base URL ends in `/v1`, as `OPENAI_BASE_URL` does), a bearer key. No non-streaming
    /// last resort: a broken stream ends the run after the retries.
    ChatCompletions(crate::chat::ChatOptions),
    /// OpenAI's Responses API: `POST {base_url}/responses` (the base URL ends in `/v1`), a
    /// bearer key; the history sent whole each time (`store: false`). No non-streaming last
    /// resort.
    Responses,
}

impl ClientConfig {
    /// A configuration with defaults for `base_url` and `auth`.
    pub fn new(base_url: &str, auth: Auth) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            auth,
            betas: Vec::new(),
            max_retries: 10,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(32),
            idle_warn: Duration::from_secs(45),
            idle_timeout: Duration::from_secs(90),
            progress_timeout: Duration::from_secs(300),
            stream_timeout: Duration::from_secs(60 * 60),
            headers_timeout: Duration::from_secs(60),
            max_stream_bytes: 64 << 20,
            max_body_bytes: 64 << 20,
            non_streaming_timeout: Duration::from_secs(600),
            fallback_model: false,
            extra_roots_pem: Vec::new(),
            workspace_root: None,
            proxy: crate::transport::ProxyConfig::default(),
            api: Api::Messages,
            rate_gate: None,
            platform: Platform::Anthropic,
        }
    }

    /// Reads `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` / `ANTHROPIC_AUTH_TOKEN`,
    /// `AGENT_STREAM_IDLE_WARN_MS`, `AGENT_STREAM_IDLE_TIMEOUT_MS`,
    /// `AGENT_STREAM_PROGRESS_TIMEOUT_MS`, `AGENT_STREAM_TIMEOUT_MS`, `AGENT_HEADERS_TIMEOUT_MS`,
    /// `AGENT_NON_STREAMING_TIMEOUT_MS`,
    /// `AGENT_MAX_STREAM_BYTES`, `AGENT_MAX_BODY_BYTES`, `AGENT_MAX_RETRIES`, `SSL_CERT_FILE`,
    /// `HTTPS_PROXY` (or `ALL_PROXY`) and `NO_PROXY` from `source`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] naming the variable when a value is malformed or a file cannot be
    /// read.
    pub fn from_source(source: &dyn ConfigSource) -> Result<Self, ProviderError> {
        let home = || source.get("HOME").map(std::path::PathBuf::from);
        let cloud = if flag(source, "CLAUDE_CODE_USE_BEDROCK") {
            let bedrock = crate::bedrock::Bedrock::from_source(source, home())?;
            Some((
                "CLAUDE_CODE_USE_BEDROCK",
                bedrock.base_url.clone(),
                Platform::Bedrock(std::sync::Arc::new(bedrock)),
            ))
        } else if flag(source, "CLAUDE_CODE_USE_VERTEX") {
            let vertex = crate::vertex::Vertex::from_source(source, home())?;
            Some((
                "CLAUDE_CODE_USE_VERTEX",
                vertex.base_url.clone(),
                Platform::Vertex(std::sync::Arc::new(vertex)),
            ))
        } else {
            None
        };
        if let Some((name, base_url, platform)) = cloud {
            // Everything else (timeouts, limits, proxy) as for Anthropic's API.
            let mut config = Self::from_source(&Without { source, name })?;
            config.base_url = base_url;
            config.auth = Auth::None;
            config.platform = platform;
            return Ok(config);
        }
        let base_url = source
            .get("ANTHROPIC_BASE_URL")
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
        check_base_url("ANTHROPIC_BASE_URL", &base_url)?;
        let auth = match (
            source.get("ANTHROPIC_API_KEY"),
            source.get("ANTHROPIC_AUTH_TOKEN"),
        ) {
            (Some(key), _) => Auth::ApiKey(key),
            (None, Some(token)) => Auth::Bearer(token),
            (None, None) => Auth::None,
        };
        let mut config = Self::new(&base_url, auth);
        let number = |key: &str, unit: &str| -> Result<Option<u64>, ProviderError> {
            source
                .get(key)
                .map(|value| {
                    value.trim().parse::<u64>().map_err(|_| {
                        ProviderError::new(
                            ErrorKind::Config,
                            format!("{key} must be a number of {unit}, got {value:?}"),
                        )
                    })
                })
                .transpose()
        };
        let millis = |key: &str| {
            Ok::<_, ProviderError>(number(key, "milliseconds")?.map(Duration::from_millis))
        };
        if let Some(warn) = millis("AGENT_STREAM_IDLE_WARN_MS")? {
            config.idle_warn = warn;
        }
        if let Some(timeout) = millis("AGENT_STREAM_IDLE_TIMEOUT_MS")? {
            config.idle_timeout = timeout;
        }
        if let Some(timeout) = millis("AGENT_STREAM_TIMEOUT_MS")? {
            config.stream_timeout = timeout;
        }
        if let Some(timeout) = millis("AGENT_STREAM_PROGRESS_TIMEOUT_MS")? {
            config.progress_timeout = timeout;
        }
        if let Some(timeout) = millis("AGENT_HEADERS_TIMEOUT_MS")? {
            config.headers_timeout = timeout;
        }
        if let Some(timeout) = millis("AGENT_NON_STREAMING_TIMEOUT_MS")? {
            config.non_streaming_timeout = timeout;
        }
        if let Some(bytes) = number("AGENT_MAX_STREAM_BYTES", "bytes")? {
            config.max_stream_bytes = bytes;
        }
        if let Some(bytes) = number("AGENT_MAX_BODY_BYTES", "bytes")? {
            config.max_body_bytes = bytes;
        }
        if let Some(retries) = number("AGENT_MAX_RETRIES", "retries")? {
            config.max_retries = u32::try_from(retries).map_err(|_| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!(
                        "AGENT_MAX_RETRIES must be at most {}, got {retries}",
                        u32::MAX
                    ),
                )
            })?;
        }
        config.proxy = crate::transport::ProxyConfig::from_source(source);
        if let Some(path) = source.get("SSL_CERT_FILE") {
            config.extra_roots_pem = std::fs::read(&path).map_err(|error| {
                ProviderError::new(ErrorKind::Config, format!("SSL_CERT_FILE {path}: {error}"))
            })?;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_injected_source() {
        let source = MapSource::new([
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080/gateway/"),
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
            ("AGENT_STREAM_IDLE_TIMEOUT_MS", "200"),
        ]);
        let config = ClientConfig::from_source(&source).unwrap();
        assert_eq!(config.base_url, "http://127.0.0.1:8080/gateway");
        assert_eq!(config.auth, Auth::Bearer("tok".into()));
        assert_eq!(config.idle_timeout, Duration::from_millis(200));
        assert_eq!(format!("{:?}", config.auth), "Bearer(***)");
        let bad = MapSource::new([("AGENT_STREAM_IDLE_WARN_MS", "soon")]);
        assert_eq!(
            ClientConfig::from_source(&bad).unwrap_err().to_string(),
            "configuration error: AGENT_STREAM_IDLE_WARN_MS must be a number of milliseconds, got \"soon\""
        );
    }
}
