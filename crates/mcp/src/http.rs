//! Streamable HTTP servers: rmcp's [`StreamableHttpClient`] on the workspace's hyper +
//! rustls client (ring provider, webpki roots plus the user's extra roots), with event
//! streams framed by this workspace's `sse-parser`.
//!
//! Every response is bounded: a JSON body at [`MAX_JSON_BYTES`], one event of an event
//! stream at [`MAX_EVENT_BYTES`], an error body's text at [`MAX_ERROR_BYTES`]. OAuth is not
//! supported: a server that answers 401 with `WWW-Authenticate` is reported as needing
//! authorization, and a static `Authorization` header from the configuration is the way in.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use sse_stream::Sse;

/// The largest JSON response accepted, in bytes (rmcp's default for its own clients).
pub const MAX_JSON_BYTES: usize = 16 * 1024 * 1024;
/// The largest single event of an event stream, in bytes (rmcp's default).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// How much of an error response's body is kept for the message, in bytes.
pub const MAX_ERROR_BYTES: usize = 4 * 1024;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// A failure below MCP: the connection, TLS, or an unreadable body.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The request could not be sent or the response not read.
    #[error("{0}")]
    Transport(#[from] hyper_util::client::legacy::Error),
    /// The response body broke off.
    #[error("reading the response: {0}")]
    Body(#[from] hyper::Error),
    /// The request could not be built (a bad URL or header).
    #[error("{0}")]
    Request(#[from] http::Error),
    /// The message could not be encoded.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// TLS could not be set up, or an extra root certificate is unusable.
    #[error("TLS: {0}")]
    Tls(String),
}

/// An HTTP client for MCP's streamable HTTP transport: HTTPS (rustls) and plain HTTP over
/// one connection pool.
#[derive(Clone)]
pub struct HyperClient {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for HyperClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HyperClient").finish_non_exhaustive()
    }
}

impl HyperClient {
    /// A client trusting the webpki roots and the PEM certificates in `extra_roots_pem`
    /// (empty for none).
    ///
    /// # Errors
    ///
    /// [`HttpError::Tls`] when the PEM holds no valid certificate or TLS cannot be set up.
    pub fn new(extra_roots_pem: &[u8]) -> Result<Self, HttpError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if !extra_roots_pem.is_empty() {
            let mut added = 0;
            for certificate in CertificateDer::pem_slice_iter(extra_roots_pem) {
                let certificate = certificate
                    .map_err(|error| HttpError::Tls(format!("extra root certificates: {error}")))?;
                roots
                    .add(certificate)
                    .map_err(|error| HttpError::Tls(format!("extra root certificate: {error}")))?;
                added += 1;
            }
            if added == 0 {
                return Err(HttpError::Tls(
                    "extra root certificates: no PEM certificate found".into(),
                ));
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| HttpError::Tls(error.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // No Nagle: a request's head and body are small writes that must not wait for a
        // delayed ACK. (The server's side matters as much: testkit's server with Nagle on
        // measured 44 ms a call, with it off 0.16 ms; see docs/benchmarks.md.)
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    fn request(
        method: Method,
        uri: &str,
        session_id: Option<&str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> http::request::Builder {
        let mut builder = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        if let Some(auth) = auth_token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {auth}"));
        }
        for (name, value) in custom_headers {
            builder = builder.header(name, value);
        }
        if let Some(session_id) = session_id {
            builder = builder.header(SESSION_ID, session_id);
        }
        builder
    }

    async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, StreamableHttpError<HttpError>> {
        self.client
            .request(request)
            .await
            .map_err(|error| StreamableHttpError::Client(HttpError::Transport(error)))
    }
}

/// A 401 with a challenge: the server wants OAuth, which is not supported.
fn auth_required(
    response: &http::Response<hyper::body::Incoming>,
) -> Option<StreamableHttpError<HttpError>> {
    if response.status() != StatusCode::UNAUTHORIZED {
        return None;
    }
    let challenge = response.headers().get(header::WWW_AUTHENTICATE)?;
    Some(StreamableHttpError::AuthRequired(AuthRequiredError::new(
        String::from_utf8_lossy(challenge.as_bytes()).into_owned(),
    )))
}

fn media_type_is(value: Option<&HeaderValue>, expected: &str) -> bool {
    value.is_some_and(|value| {
        String::from_utf8_lossy(value.as_bytes())
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
    })
}

/// Reads at most `limit` bytes of `body`; `Ok(None)` when it is longer.
async fn read_at_most(
    body: hyper::body::Incoming,
    limit: usize,
) -> Result<Option<Vec<u8>>, StreamableHttpError<HttpError>> {
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| StreamableHttpError::Client(HttpError::Body(error)))?;
        if read.len() + chunk.len() > limit {
            return Ok(None);
        }
        read.extend_from_slice(&chunk);
    }
    Ok(Some(read))
}

/// The first [`MAX_ERROR_BYTES`] of `body` as text (the rest is not read).
async fn error_text(body: hyper::body::Incoming) -> String {
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    while read.len() < MAX_ERROR_BYTES {
        match stream.next().await {
            Some(Ok(chunk)) => read.extend_from_slice(&chunk),
            _ => break,
        }
    }
    read.truncate(MAX_ERROR_BYTES);
    String::from_utf8_lossy(&read).into_owned()
}

/// The event stream of `body`, framed by `sse-parser` (WHATWG rules), each event at most
/// `max_event_bytes`.
fn event_stream(
    body: hyper::body::Incoming,
    max_event_bytes: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    struct State {
        body: BoxStream<'static, Result<Bytes, hyper::Error>>,
        framer: sse_parser::Framer,
        ended: bool,
    }
    let state = State {
        body: body.into_data_stream().boxed(),
        framer: sse_parser::Framer::with_config(sse_parser::FramerConfig {
            max_event_bytes: max_event_bytes.min(MAX_EVENT_BYTES),
        }),
        ended: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            match state.framer.next_event() {
                Ok(Some(event)) => {
                    let sse = Sse {
                        event: (!event.event_bytes().is_empty())
                            .then(|| event.event_type().into_owned()),
                        data: Some(event.data_str().into_owned()),
                        id: (!event.id().is_empty())
                            .then(|| String::from_utf8_lossy(event.id()).into_owned()),
                        retry: state.framer.retry(),
                    };
                    return Some((Ok(sse), state));
                }
                Ok(None) if state.ended => return None,
                Ok(None) => {}
                Err(error) => {
                    state.ended = true;
                    return Some((Err(SseError::Body(Box::new(error))), state));
                }
            }
            match state.body.next().await {
                Some(Ok(chunk)) => state.framer.push(chunk),
                Some(Err(error)) => {
                    state.ended = true;
                    return Some((Err(SseError::Body(Box::new(error))), state));
                }
                None => {
                    // An event cut off by the end of the stream is not dispatched (WHATWG).
                    let _ = state.framer.finish();
                    state.ended = true;
                }
            }
        }
    })
    .boxed()
}

impl StreamableHttpClient for HyperClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_token,
            custom_headers,
            MAX_EVENT_BYTES,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let body = serde_json::to_vec(&message)
            .map_err(|error| StreamableHttpError::Client(HttpError::Json(error)))?;
        let had_session = session_id.is_some();
        let request = Self::request(
            Method::POST,
            &uri,
            session_id.as_deref(),
            auth_token,
            custom_headers,
        )
        .header(header::CONTENT_TYPE, JSON)
        .body(Full::new(Bytes::from(body)))
        .map_err(|error| StreamableHttpError::Client(HttpError::Request(error)))?;
        let response = self.send(request).await?;
        if let Some(error) = auth_required(&response) {
            return Err(error);
        }
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        let session_id = response
            .headers()
            .get(SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            // A JSON-RPC error in the body is the server's answer; anything else is reported
            // with the start of the body.
            if !media_type_is(content_type.as_ref(), JSON) {
                return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("HTTP {status}: {}", error_text(response.into_body()).await),
                )));
            }
            let body = read_at_most(response.into_body(), MAX_JSON_BYTES)
                .await?
                .unwrap_or_default();
            if let Ok(error @ ServerJsonRpcMessage::Error(_)) =
                serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(error, session_id));
            }
            let text = String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BYTES)]);
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {text}"),
            )));
        }
        if media_type_is(content_type.as_ref(), EVENT_STREAM) {
            return Ok(StreamableHttpPostResponse::Sse(
                event_stream(response.into_body(), max_sse_event_size),
                session_id,
            ));
        }
        if media_type_is(content_type.as_ref(), JSON) {
            let Some(body) = read_at_most(response.into_body(), MAX_JSON_BYTES).await? else {
                return Err(StreamableHttpError::ResponseBodyTooLarge {
                    max_size: MAX_JSON_BYTES,
                });
            };
            if body.is_empty() && awaits_no_response {
                return Ok(StreamableHttpPostResponse::Accepted);
            }
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, session_id)),
                Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                Err(error) => Err(StreamableHttpError::Deserialize(error)),
            };
        }
        if awaits_no_response {
            // Notifications and responses need nothing back: some servers answer an empty 200.
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(
            content_type.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
        ))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let request = Self::request(
            Method::DELETE,
            &uri,
            Some(&session_id),
            auth_token,
            custom_headers,
        )
        .body(Full::new(Bytes::new()))
        .map_err(|error| StreamableHttpError::Client(HttpError::Request(error)))?;
        let response = self.send(request).await?;
        let status = response.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!(
                "deleting the session: HTTP {status}: {}",
                error_text(response.into_body()).await
            ),
        )))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_token,
            custom_headers,
            MAX_EVENT_BYTES,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let mut builder = Self::request(
            Method::GET,
            &uri,
            session_id.as_deref(),
            auth_token,
            custom_headers,
        );
        if let Some(last_event_id) = last_event_id {
            builder = builder.header(LAST_EVENT_ID, last_event_id);
        }
        let request = builder
            .body(Full::new(Bytes::new()))
            .map_err(|error| StreamableHttpError::Client(HttpError::Request(error)))?;
        let response = self.send(request).await?;
        if let Some(error) = auth_required(&response) {
            return Err(error);
        }
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "opening the event stream: HTTP {status}: {}",
                    error_text(response.into_body()).await
                ),
            )));
        }
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        if !media_type_is(content_type.as_ref(), EVENT_STREAM) {
            return Err(StreamableHttpError::UnexpectedContentType(
                content_type.map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
            ));
        }
        Ok(event_stream(response.into_body(), max_sse_event_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_match_their_essence_only() {
        let value = |text: &'static str| HeaderValue::from_static(text);
        assert!(media_type_is(
            Some(&value("text/event-stream; charset=utf-8")),
            EVENT_STREAM
        ));
        assert!(media_type_is(Some(&value("Application/JSON")), JSON));
        assert!(!media_type_is(Some(&value("application/jsonx")), JSON));
        assert!(!media_type_is(None, JSON));
    }

    #[test]
    fn a_bad_extra_root_is_named() {
        let error = HyperClient::new(b"not a certificate")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("TLS: extra root certificates: no PEM certificate found")
        );
    }
}
