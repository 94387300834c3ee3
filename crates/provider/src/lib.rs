//! A streaming client for the Anthropic Messages API, on hyper 1 + rustls (ring).
//!
//! - [`AnthropicClient`] sends `POST {base}/v1/messages` with `stream: true` and yields
//!   [`ProviderEvent`]s: the decoded stream events and completed blocks as they arrive (parsed
//!   by `sse-parser`), retry and idle notices, restarts, and the final message.
//! - Retries live here and only here: exponential backoff with jitter (500 ms base, 32 s cap,
//!   10 retries by default), `retry-after-ms` / `retry-after` honoured, `x-should-retry`
//!   obeyed; a stream that breaks mid-way is retried too (after a [`ProviderEvent::Restart`]
//!   when its events were handed out), and when the retries are spent one non-streaming
//!   request gets a last chance. Every [`ErrorKind`] says whether it is retried.
//! - An idle watchdog warns after 45 s without bytes and cancels the stream after 90 s (a
//!   retryable error); pings count as activity.
//! - Bytes come from a [`Transport`]: [`HyperTransport`] over the network, or
//!   [`RecordingTransport`] / [`ReplayTransport`] for VCR cassettes, so a replayed session
//!   goes through exactly the same parsing path as a live one.
//!
//! This crate does not depend on the agent loop: the CLI adapts [`AnthropicClient`] to
//! loop-core's model port.
//!
//! ```no_run
//! use provider::{AnthropicClient, ClientConfig, EnvSource, ProviderEvent};
//! use futures_util::StreamExt as _;
//! # async fn demo() -> Result<(), provider::ProviderError> {
//! let client = AnthropicClient::new(ClientConfig::from_source(&EnvSource)?)?;
//! let body = br#"{"model":"claude-opus-4-8","max_tokens":1024,"stream":true,
//!   "messages":[{"role":"user","content":"Hello"}]}"#;
//! let mut events = client.stream(bytes::Bytes::from_static(body), Default::default());
//! while let Some(event) = events.next().await {
//!     if let ProviderEvent::Done { message, .. } = event? {
//!         println!("{}", message.text());
//!     }
//! }
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod aws;
pub mod bedrock;
pub mod chat;
mod client;
mod cloud;
mod config;
mod error;
pub mod google;
pub mod responses;
mod retry;
mod transport;
mod vcr;
pub mod vertex;

pub use client::{AnthropicClient, ProviderEvent, ProviderStream};
pub use config::{
    ANTHROPIC_VERSION, Api, Auth, ClientConfig, ConfigSource, DEFAULT_BASE_URL, EnvSource,
    KeyFuture, KeySource, MapSource, Platform,
};
pub use error::{ErrorKind, ProviderError};
pub use retry::{RateGate, Sleeper, TokioSleeper, backoff, retry_after};
pub use transport::{
    BodyStream, HttpRequest, HttpResponse, HyperTransport, ProxyConfig, Reach, ResponseFuture,
    Transport, TransportPool, embedded_ipv4, is_loopback_address, is_private_address,
};
pub use vcr::{
    Exchange, RecordingTransport, ReplayTransport, WORKSPACE_PLACEHOLDER, canonical_hash,
};
