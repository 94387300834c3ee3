//! The HTTP(S) server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::script::{Endless, Faults, Reply, ReplyBody, Script, Turn, sse_frame};

/// A request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers (names lowercase).
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// When it arrived (its body read).
    pub received: std::time::Instant,
    /// When its head arrived, by the wall clock: what other processes (a benchmark's harness)
    /// can compare with their own times.
    pub arrived: std::time::SystemTime,
    /// The TCP connection it came on, numbered from 0 in the order the server accepted them
    /// (requests sharing a number came over one kept-alive connection).
    pub connection: u64,
}

impl RecordedRequest {
    /// The value of header `name` (lowercase), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// JSON answers to `GET PATH` (`/v1/models`, `/props`): they never consume the script.
    gets: Mutex<std::collections::HashMap<String, Value>>,
    /// The paths of the GET requests received, in order.
    got: Mutex<Vec<String>>,
    /// The credentials Bedrock requests must be signed with (`None`: not checked).
    aws: Mutex<Option<crate::bedrock::AwsKeys>>,
    /// The bearer token model requests must carry (`None`: not checked).
    bearer: Mutex<Option<String>>,
}

/// A running server; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    cert_pem: Option<String>,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("tls", &self.cert_pem.is_some())
            .finish()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.accept.abort();
    }
}

impl Server {
    /// Serves `script` over plain HTTP on `127.0.0.1`, a free port.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound.
    pub async fn start(script: Script) -> anyhow::Result<Self> {
        Self::bind(script, None, 0).await
    }

    /// Serves `script` over TLS on `127.0.0.1`, a free port, with a new self-signed
    /// certificate for `localhost` and `127.0.0.1` ([`Server::cert_pem`]).
    ///
    /// # Errors
    ///
    /// When the certificate cannot be made or the port bound.
    pub async fn start_tls(script: Script) -> anyhow::Result<Self> {
        Self::bind(script, Some(()), 0).await
    }

    /// [`Server::start`] or [`Server::start_tls`] on a given port (0 for any).
    ///
    /// # Errors
    ///
    /// When the certificate cannot be made or the port bound.
    pub async fn bind(script: Script, tls: Option<()>, port: u16) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .context("binding 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let (acceptor, cert_pem) = match tls {
            Some(()) => {
                let (acceptor, cert_pem) = self_signed()?;
                (Some(acceptor), Some(cert_pem))
            }
            None => (None, None),
        };
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            gets: Mutex::new(std::collections::HashMap::new()),
            got: Mutex::new(Vec::new()),
            aws: Mutex::new(None),
            bearer: Mutex::new(None),
        });
        let (shutdown, stop) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, acceptor, Arc::clone(&shared), stop));
        Ok(Self {
            addr,
            cert_pem,
            shared,
            shutdown,
            accept,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://localhost:PORT` with TLS.
    pub fn base_url(&self) -> String {
        match self.cert_pem {
            Some(_) => format!("https://localhost:{}", self.addr.port()),
            None => format!("http://127.0.0.1:{}", self.addr.port()),
        }
    }

    /// The PEM of the self-signed certificate (TLS servers only).
    pub fn cert_pem(&self) -> Option<&str> {
        self.cert_pem.as_deref()
    }

    /// From now on, a Bedrock request (`POST /model/{id}/invoke` or
    /// `/invoke-with-response-stream`) must carry an AWS Signature Version 4 made with one
    /// of `keys`' secrets for its region, or is refused as Bedrock refuses it (403 with
    /// `x-amzn-errortype`); an expired session token is refused as expired.
    pub fn expect_aws(&self, keys: crate::bedrock::AwsKeys) {
        if let Ok(mut aws) = self.shared.aws.lock() {
            *aws = Some(keys);
        }
    }

    /// From now on, a model request without `authorization: Bearer TOKEN` is refused with
    /// 401 as Google's endpoints refuse one (`UNAUTHENTICATED`).
    pub fn expect_bearer(&self, token: &str) {
        if let Ok(mut bearer) = self.shared.bearer.lock() {
            *bearer = Some(token.to_owned());
        }
    }

    /// Answers requests to `path` (any method) with `body` from now on: JSON, or a JSON
    /// string's text as `text/plain`. Requests to paths other
    /// than a model endpoint (`.../messages`, `.../chat/completions`) get these answers or a
    /// 404: they never consume the script and are not in [`Server::requests`].
    pub fn answer_get(&self, path: &str, body: Value) {
        if let Ok(mut gets) = self.shared.gets.lock() {
            gets.insert(path.to_owned(), body);
        }
    }

    /// The paths of the requests to other paths than a model endpoint, in order.
    pub fn gets(&self) -> Vec<String> {
        self.shared
            .got
            .lock()
            .map(|got| got.clone())
            .unwrap_or_default()
    }

    /// Every request received so far (GETs aside: [`Server::gets`]).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .map(|requests| requests.clone())
            .unwrap_or_default()
    }

    /// The usage the simulated prompt cache billed for each Messages request so far, in
    /// order (empty unless the script has [`Script::simulate_cache`]).
    pub fn billed(&self) -> Vec<crate::cache::CacheUsage> {
        self.shared
            .script
            .lock()
            .map(|script| script.billed().to_vec())
            .unwrap_or_default()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        self.shared
            .requests
            .lock()
            .map(|requests| requests.len())
            .unwrap_or_default()
    }
}

/// A TLS acceptor with a new self-signed certificate for `localhost` and `127.0.0.1`, and
/// the certificate's PEM.
///
/// # Errors
///
/// When the certificate cannot be made.
pub(crate) fn self_signed() -> anyhow::Result<(tokio_rustls::TlsAcceptor, String)> {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .context("making a self-signed certificate")?;
    let cert_pem = certified.cert.pem();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(certified.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .context("TLS server certificate")?;
    Ok((tokio_rustls::TlsAcceptor::from(Arc::new(config)), cert_pem))
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) {
    for connection in 0_u64.. {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let stop = stop.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                handle(request, connection, Arc::clone(&shared), stop.clone())
            });
            match acceptor {
                Some(acceptor) => {
                    // A client that rejects the certificate ends the handshake: nothing to serve.
                    if let Ok(tls) = acceptor.accept(stream).await {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    }
                }
                None => {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                }
            }
        });
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

async fn handle(
    request: Request<Incoming>,
    connection: u64,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Result<Response<Body>, Infallible> {
    let arrived = std::time::SystemTime::now();
    let method = request.method().to_string();
    let bedrock = request.uri().path().starts_with("/model/")
        && (request.uri().path().ends_with("/invoke")
            || request
                .uri()
                .path()
                .ends_with("/invoke-with-response-stream"));
    let vertex = request.uri().path().ends_with(":streamRawPredict")
        || request.uri().path().ends_with(":rawPredict");
    let model_endpoint = request.uri().path().ends_with("/messages")
        || request.uri().path().ends_with("/chat/completions")
        || request.uri().path().ends_with("/responses")
        || vertex
        || bedrock;
    if !model_endpoint {
        return Ok(metadata_answer(request.uri().path(), &shared));
    }
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers: Vec<(String, String)> = request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = request
        .into_body()
        .collect()
        .await
        .map(|body| body.to_bytes().to_vec())
        .unwrap_or_default();
    let request_bytes = body.len();
    let refusal = if bedrock {
        signature_refusal(&shared, &method, &path, &headers, &body)
    } else {
        bearer_refusal(&shared, &headers)
    };
    // An OpenAI-compatible client: turns are streamed as Chat Completions chunks, or as
    // Responses API events.
    let endpoint = path.split('?').next().unwrap_or_default();
    let wire = if bedrock {
        Wire::Bedrock
    } else if endpoint.ends_with("/chat/completions") {
        Wire::Chat
    } else if endpoint.ends_with("/responses") {
        Wire::Responses
    } else {
        Wire::Messages
    };
    let chat = wire == Wire::Chat;
    let streaming = if bedrock {
        endpoint.ends_with("-stream")
    } else {
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|json| json.get("stream").and_then(Value::as_bool))
            .unwrap_or(false)
    };
    // What a route's marker is looked for in: the first message (after a chat request's
    // system message) and the last (a fork's task is added there).
    let parsed = serde_json::from_slice::<Value>(&body).ok();
    let first_message = parsed
        .as_ref()
        .and_then(|json| {
            let messages = json
                .get("messages")
                .or_else(|| json.get("input"))?
                .as_array()?;
            let first = messages.get(usize::from(chat))?.to_string();
            let last = messages.last()?.to_string();
            Some(format!("{first}\n{last}"))
        })
        .unwrap_or_default();
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(RecordedRequest {
            method,
            path,
            headers,
            body,
            received: std::time::Instant::now(),
            arrived,
            connection,
        });
    }
    if let Some((kind, status, message)) = refusal {
        return Ok(bedrock_refusal(kind, status, &message));
    }
    let reply = shared
        .script
        .lock()
        .map(|mut script| {
            let body = parsed
                .as_ref()
                .filter(|_| matches!(wire, Wire::Messages | Wire::Bedrock));
            script.next(request_bytes, &first_message, body)
        })
        .unwrap_or_else(|_| Reply::error(500, "api_error", "poisoned"));
    if let ReplyBody::Endless(endless) = reply.body {
        return Ok(endless_response(reply.status, endless, stop).await);
    }
    Ok(respond(reply, streaming, wire, stop))
}

/// The answer to a request that is not for a model: metadata a client may ask for (a
/// server's models, llama.cpp's props, Ollama's show, AWS credentials) from
/// `Server::answer_get`, else 404; never from the script.
fn metadata_answer(path: &str, shared: &Shared) -> Response<Body> {
    // Metadata a client may ask for (a server's models, llama.cpp's props, Ollama's
    // show): answered from `Server::answer_get`, 404 otherwise; never from the script.
    let path = path.to_owned();
    if let Ok(mut got) = shared.got.lock() {
        got.push(path.clone());
    }
    let answer = shared
        .gets
        .lock()
        .ok()
        .and_then(|gets| gets.get(&path).cloned());
    let (status, body) = match answer {
        Some(body) => (hyper::StatusCode::OK, body),
        None => (
            hyper::StatusCode::NOT_FOUND,
            serde_json::json!({"error": "not found"}),
        ),
    };
    // A JSON string is answered as its text (an instance metadata token, a role name).
    let (text, content_type) = match body {
        Value::String(text) => (text, "text/plain"),
        other => (other.to_string(), "application/json"),
    };
    let mut response = Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

/// Bedrock's refusal of a request: `status`, `x-amzn-errortype: KIND`, `{"message"}`.
fn bedrock_refusal(kind: &'static str, status: u16, message: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(
            crate::bedrock::refusal_body(message).to_string(),
        ))
        .map_err(|never| match never {})
        .boxed(),
    );
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::FORBIDDEN);
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        "x-amzn-errortype",
        hyper::header::HeaderValue::from_static(kind),
    );
    response
}

/// Why a model request is refused for its bearer token, when the server checks it
/// ([`Server::expect_bearer`]).
fn bearer_refusal(
    shared: &Shared,
    headers: &[(String, String)],
) -> Option<(&'static str, u16, String)> {
    let token = shared
        .bearer
        .lock()
        .ok()
        .and_then(|bearer| bearer.clone())?;
    let sent = headers
        .iter()
        .find(|(name, _)| name == "authorization")
        .map(|(_, value)| value.as_str());
    (sent != Some(&format!("Bearer {token}"))).then(|| {
        (
            "UNAUTHENTICATED",
            401,
            "Request had invalid authentication credentials. Expected OAuth 2 access token."
                .to_owned(),
        )
    })
}

/// Why a Bedrock request's signature is refused (see [`crate::bedrock::check`]), when the
/// server checks them ([`Server::expect_aws`]).
fn signature_refusal(
    shared: &Shared,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Option<(&'static str, u16, String)> {
    let keys = shared.aws.lock().ok().and_then(|keys| keys.clone())?;
    let host = headers
        .iter()
        .find(|(name, _)| name == "host")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    crate::bedrock::check(
        &keys,
        method,
        &format!("http://{host}{path}"),
        headers,
        body,
    )
}

/// The wire format a request came in (by its path), and its answers go out in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    /// `/v1/messages`.
    Messages,
    /// `/chat/completions`.
    Chat,
    /// `/responses`.
    Responses,
    /// Bedrock's `/model/{id}/invoke[-with-response-stream]`.
    Bedrock,
}

/// A hostile answer, generated as the client reads it (see [`Endless`]).
async fn endless_response(
    status: u16,
    endless: Endless,
    mut stop: watch::Receiver<bool>,
) -> Response<Body> {
    let start = Turn::new().text("x").events();
    let frame = |event: &Value| Bytes::from(sse_frame(event));
    let (content_type, body): (&str, Body) = match endless {
        Endless::NoHeaders => {
            let _ = stop.changed().await;
            (
                "text/plain",
                Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed(),
            )
        }
        Endless::Pings(interval) => {
            let first = frame(&start[0]);
            let ping = frame(&serde_json::json!({"type": "ping"}));
            let stream = futures_util::stream::unfold(true, move |first_frame| {
                let (first, ping) = (first.clone(), ping.clone());
                async move {
                    if first_frame {
                        return Some((Ok(Frame::data(first)), false));
                    }
                    tokio::time::sleep(interval).await;
                    Some((Ok(Frame::data(ping)), false))
                }
            });
            ("text/event-stream", StreamBody::new(stream).boxed())
        }
        Endless::Text => {
            let mut head = frame(&start[0]).to_vec();
            head.extend(sse_frame(&start[1]));
            let delta = frame(
                &serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "a".repeat(1024)}}),
            );
            let head = Bytes::from(head);
            let stream = futures_util::stream::unfold(true, move |first_frame| {
                let chunk = if first_frame {
                    head.clone()
                } else {
                    delta.clone()
                };
                async move { Some((Ok(Frame::data(chunk)), false)) }
            });
            ("text/event-stream", StreamBody::new(stream).boxed())
        }
        Endless::Trickle { interval, empty } => {
            let mut head = frame(&start[0]).to_vec();
            head.extend(sse_frame(&start[1]));
            let delta = frame(
                &serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": if empty { "" } else { "a" }}}),
            );
            let head = Bytes::from(head);
            let stream = futures_util::stream::unfold(true, move |first_frame| {
                let (head, delta) = (head.clone(), delta.clone());
                async move {
                    if first_frame {
                        return Some((Ok(Frame::data(head)), false));
                    }
                    tokio::time::sleep(interval).await;
                    Some((Ok(Frame::data(delta)), false))
                }
            });
            ("text/event-stream", StreamBody::new(stream).boxed())
        }
        Endless::JsonBody { bytes } => {
            const PIECE: u64 = 64 << 10;
            let head = Bytes::from_static(
                br#"{"id":"msg_big","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":""#,
            );
            let tail = Bytes::from_static(
                br#""}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}"#,
            );
            let piece = Bytes::from(vec![b'a'; PIECE as usize]);
            // State: None before the head, then the text bytes still to send; Some(u64::MAX)
            // once the tail is sent.
            let stream = futures_util::stream::unfold(None, move |state: Option<u64>| {
                let (head, tail, piece) = (head.clone(), tail.clone(), piece.clone());
                async move {
                    match state {
                        None => Some((Ok(Frame::data(head)), Some(bytes))),
                        Some(u64::MAX) => None,
                        Some(0) => Some((Ok(Frame::data(tail)), Some(u64::MAX))),
                        Some(left) => {
                            let size = left.min(PIECE);
                            Some((
                                Ok(Frame::data(piece.slice(..size as usize))),
                                Some(left - size),
                            ))
                        }
                    }
                }
            });
            ("application/json", StreamBody::new(stream).boxed())
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(body)
        .unwrap_or_else(|_| {
            Response::new(
                Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed(),
            )
        })
}

fn respond(
    reply: Reply,
    streaming: bool,
    wire: Wire,
    stop: watch::Receiver<bool>,
) -> Response<Body> {
    let (content_type, frames): (String, Vec<(Duration, Vec<u8>)>) = match reply.body {
        ReplyBody::Turn(turn) if streaming && wire == Wire::Chat => (
            "text/event-stream; charset=utf-8".into(),
            vec![(Duration::ZERO, turn.chat_sse())],
        ),
        ReplyBody::Turn(turn) if streaming && wire == Wire::Responses => (
            "text/event-stream; charset=utf-8".into(),
            vec![(Duration::ZERO, turn.responses_sse())],
        ),
        ReplyBody::Turn(turn) if streaming && wire == Wire::Bedrock => (
            "application/vnd.amazon.eventstream".into(),
            vec![(Duration::ZERO, crate::bedrock::frames(&turn.sse()))],
        ),
        ReplyBody::Turn(turn) if streaming => (
            "text/event-stream; charset=utf-8".into(),
            vec![(Duration::ZERO, turn.sse())],
        ),
        ReplyBody::Turn(turn) => (
            "application/json".into(),
            vec![(Duration::ZERO, turn.message_json().to_string().into_bytes())],
        ),
        ReplyBody::Raw {
            content_type,
            bytes,
        } => (content_type, vec![(Duration::ZERO, bytes)]),
        // Answered by `endless_response` before this is called.
        ReplyBody::Endless(_) => ("text/plain".into(), Vec::new()),
        ReplyBody::Pinging {
            interval,
            duration,
            turn,
        } => {
            let mut frames = Vec::new();
            let ping = sse_frame(&serde_json::json!({"type": "ping"}));
            let start = turn.sse();
            // message_start first, then pings, then the rest.
            let split = start
                .windows(2)
                .position(|pair| pair == b"\n\n")
                .map_or(0, |at| at + 2);
            frames.push((Duration::ZERO, start[..split].to_vec()));
            let mut elapsed = Duration::ZERO;
            while elapsed < duration {
                frames.push((interval, ping.clone()));
                elapsed += interval;
            }
            frames.push((Duration::ZERO, start[split..].to_vec()));
            ("text/event-stream".into(), frames)
        }
    };
    let mut builder = Response::builder()
        .status(reply.status)
        .header("content-type", content_type);
    for (name, value) in &reply.headers {
        builder = builder.header(name, value);
    }
    let body = fault_body(frames, reply.faults, stop);
    builder.body(body).unwrap_or_else(|_| {
        let mut response = Response::new(
            Full::new(Bytes::from_static(b"bad scripted reply"))
                .map_err(|never| match never {})
                .boxed(),
        );
        *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        response
    })
}

/// The body as a stream of frames with the faults applied, produced by a task.
fn fault_body(
    frames: Vec<(Duration, Vec<u8>)>,
    faults: Faults,
    mut stop: watch::Receiver<bool>,
) -> Body {
    let (sender, receiver) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    // A body spread over a duration: 10 ms between chunks of equal size.
    let mut faults = faults;
    if let Some(total) = faults.spread_over {
        let bytes: usize = frames.iter().map(|(_, frame)| frame.len()).sum();
        let chunks = (total.as_millis() / 10).max(1) as usize;
        faults.chunk_sizes = Some(vec![bytes.div_ceil(chunks).max(1)]);
        faults.chunk_delay = Some(Duration::from_millis(10));
    }
    tokio::spawn(async move {
        let mut sent = 0usize;
        let mut sizes = faults
            .chunk_sizes
            .clone()
            .unwrap_or_default()
            .into_iter()
            .cycle();
        let has_sizes = faults
            .chunk_sizes
            .as_ref()
            .is_some_and(|sizes| !sizes.is_empty());
        for (wait, bytes) in frames {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let mut size = if has_sizes {
                    sizes.next().unwrap_or(rest.len())
                } else {
                    rest.len()
                };
                size = size.min(rest.len());
                if let Some(limit) = faults.reset_after.or(faults.stall_after) {
                    if sent >= limit {
                        if faults.reset_after.is_some() {
                            // Let what was sent reach the client before the connection drops.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            let _ = sender
                                .send(Err(std::io::Error::other("testkit: connection reset")))
                                .await;
                        } else {
                            // Silent, connection open, until the server stops.
                            let _ = stop.changed().await;
                        }
                        return;
                    }
                    size = size.min(limit - sent).max(if limit > sent { 1 } else { 0 });
                }
                let (chunk, tail) = rest.split_at(size);
                rest = tail;
                sent += chunk.len();
                if sender
                    .send(Ok(Frame::data(Bytes::copy_from_slice(chunk))))
                    .await
                    .is_err()
                {
                    return;
                }
                if let Some(delay) = faults.chunk_delay {
                    tokio::time::sleep(delay).await;
                }
            }
        }
        if let Some(limit) = faults.reset_after.or(faults.stall_after)
            && sent >= limit
        {
            if faults.reset_after.is_some() {
                let _ = sender
                    .send(Err(std::io::Error::other("testkit: connection reset")))
                    .await;
            } else {
                let _ = stop.changed().await;
            }
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|frame| (frame, receiver))
    });
    StreamBody::new(stream).boxed()
}
