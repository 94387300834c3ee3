//! VCR: record exchanges to a JSONL cassette, replay them with no network.
//!
//! Both are [`Transport`]s under the same client, so a replay goes through exactly the same
//! parsing path as a live call. One line per exchange:
//! `{"method","path","request_body","request_hash","status","headers":[[name,value]],"body"}`
//! (`body_b64` instead of `body` when the response is not UTF-8). Request headers are never
//! written (they carry the API key). A configured workspace root is written as `${WORKSPACE}`
//! and substituted back (JSON-escaped) on replay, so cassettes are portable.

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt as _;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::error::{ErrorKind, ProviderError};
use crate::transport::{HttpRequest, HttpResponse, ResponseFuture, Transport};

/// The placeholder for the workspace root in cassettes.
pub const WORKSPACE_PLACEHOLDER: &str = "${WORKSPACE}";

/// One recorded exchange.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// Request method.
    pub method: String,
    /// Request path (no host).
    pub path: String,
    /// Request body (JSON text, workspace replaced).
    pub request_body: String,
    /// SHA-256 of the canonical request body (keys sorted), hex.
    pub request_hash: String,
    /// Response status.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// Response body, when UTF-8 (workspace replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Response body, base64, when not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_b64: Option<String>,
}

/// SHA-256 (hex) of the canonical form of a JSON body (the raw bytes when not JSON).
pub fn canonical_hash(body: &str) -> String {
    let canonical = serde_json::from_str::<Value>(body).map_or_else(
        |_| body.to_owned(),
        |json| protocol::canonical_json(&json).to_string(),
    );
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `text` with the JSON-escaped workspace root replaced by the placeholder.
fn hide_workspace(text: &str, workspace: Option<&str>) -> String {
    match workspace {
        Some(root) if !root.is_empty() => {
            let escaped = serde_json::to_string(root).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            text.replace(escaped, WORKSPACE_PLACEHOLDER)
        }
        _ => text.to_owned(),
    }
}

fn show_workspace(text: &str, workspace: Option<&str>) -> String {
    match workspace {
        Some(root) => {
            let escaped = serde_json::to_string(root).unwrap_or_default();
            text.replace(WORKSPACE_PLACEHOLDER, escaped.trim_matches('"'))
        }
        None => text.to_owned(),
    }
}

/// A recording replaces its file; make sure that file is an earlier cassette (or empty, or
/// absent) so a mistyped `--record` path cannot destroy anything else.
fn refuse_non_cassette(path: &Path) -> Result<(), ProviderError> {
    let refuse = |why: &str| {
        Err(ProviderError::new(
            ErrorKind::Config,
            format!(
                "cassette {}: {why}; refusing to overwrite it (remove it first if you mean to)",
                path.display()
            ),
        ))
    };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(ProviderError::new(
                ErrorKind::Config,
                format!("cassette {}: {error}", path.display()),
            ));
        }
    };
    if !metadata.is_file() {
        return refuse("not a regular file");
    }
    if metadata.len() == 0 {
        return Ok(());
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(_) => return refuse("the file exists and is not a text cassette"),
    };
    let is_cassette = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .all(|line| serde_json::from_str::<Exchange>(line).is_ok());
    if is_cassette {
        Ok(())
    } else {
        refuse("the file exists and is not a cassette")
    }
}

/// Records every exchange of an inner transport to a cassette file.
pub struct RecordingTransport<T> {
    inner: T,
    path: PathBuf,
    workspace: Option<String>,
    /// Created (truncating an earlier cassette) when the first exchange is written, so a run
    /// that fails before any request leaves the old cassette alone.
    file: Arc<Mutex<Option<std::fs::File>>>,
}

impl<T> std::fmt::Debug for RecordingTransport<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingTransport")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> RecordingTransport<T> {
    /// Records to `path`: created, or truncated when it is an earlier cassette, when the first
    /// exchange completes. A write that fails later is logged (`tracing` error) and the
    /// exchange still reaches the caller.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when `path` exists and is not a cassette (nor empty), or is not
    /// a regular file, or its folder does not exist.
    pub fn new(inner: T, path: &Path, workspace: Option<String>) -> Result<Self, ProviderError> {
        refuse_non_cassette(path)?;
        let folder = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !folder.is_dir() {
            return Err(ProviderError::new(
                ErrorKind::Config,
                format!(
                    "cassette {}: the folder {} does not exist",
                    path.display(),
                    folder.display()
                ),
            ));
        }
        // Opening for appending truncates nothing but fails now, visibly, where the
        // recording would fail later (a read-only place, a link into a missing folder).
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|error| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!("cassette {}: {error}", path.display()),
                )
            })?;
        Ok(Self {
            inner,
            path: path.to_owned(),
            workspace,
            file: Arc::new(Mutex::new(None)),
        })
    }
}

impl<T: Transport> Transport for RecordingTransport<T> {
    fn send(&self, request: HttpRequest) -> ResponseFuture<'_> {
        Box::pin(async move {
            let method = request.method.to_string();
            let path = request
                .uri
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            let request_body = hide_workspace(
                &String::from_utf8_lossy(&request.body),
                self.workspace.as_deref(),
            );
            let response = self.inner.send(request).await?;
            let headers: Vec<(String, String)> = response
                .headers
                .iter()
                .filter_map(|(name, value)| {
                    Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
                })
                .collect();
            let status = response.status.as_u16();
            let file = Arc::clone(&self.file);
            let cassette = self.path.clone();
            let workspace = self.workspace.clone();
            let request_hash = canonical_hash(&request_body);
            // Tee the body: hand chunks on as they come, write the exchange when it ends.
            let mut collected = Vec::new();
            let mut inner = response.body;
            let body = async_stream(
                move |sender: tokio::sync::mpsc::Sender<Result<Bytes, ProviderError>>| async move {
                    while let Some(chunk) = inner.next().await {
                        if let Ok(bytes) = &chunk {
                            collected.extend_from_slice(bytes);
                        }
                        let failed = chunk.is_err();
                        if sender.send(chunk).await.is_err() || failed {
                            break;
                        }
                    }
                    let (body, body_b64) = match String::from_utf8(collected) {
                        Ok(text) => (Some(hide_workspace(&text, workspace.as_deref())), None),
                        Err(raw) => (None, Some(base64_encode(raw.as_bytes()))),
                    };
                    let exchange = Exchange {
                        method,
                        path,
                        request_body,
                        request_hash,
                        status,
                        headers,
                        body,
                        body_b64,
                    };
                    let written = serde_json::to_string(&exchange)
                        .map_err(std::io::Error::other)
                        .and_then(|line| {
                            let mut slot = file
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                            let file = match slot.as_mut() {
                                Some(file) => file,
                                None => slot.insert(std::fs::File::create(&cassette)?),
                            };
                            writeln!(file, "{line}")?;
                            file.flush()
                        });
                    if let Err(error) = written {
                        tracing::error!(cassette = %cassette.display(), %error, "an exchange could not be recorded");
                    }
                },
            );
            Ok(HttpResponse {
                status: response.status,
                headers: response.headers,
                body,
            })
        })
    }
}

/// A body stream fed by a task.
fn async_stream<F, Fut>(producer: F) -> crate::transport::BodyStream
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, ProviderError>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    tokio::spawn(producer(sender));
    Box::pin(futures_util::stream::unfold(
        receiver,
        |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
    ))
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// The first difference between two JSON values, as `path: recorded → now`.
fn json_diff(recorded: &Value, now: &Value, path: &str) -> Option<String> {
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let child = format!("{path}.{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => json_diff(x, y, &child),
                    (x, y) => Some(format!("{child}: recorded {} but now {}", show(x), show(y))),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                if let Some(diff) = json_diff(x, y, &format!("{path}[{index}]")) {
                    return Some(diff);
                }
            }
            (a.len() != b.len())
                .then(|| format!("{path}: recorded {} items but now {}", a.len(), b.len()))
        }
        (x, y) if x != y => Some(format!(
            "{path}: recorded {} but now {}",
            short(x),
            short(y)
        )),
        _ => None,
    }
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "nothing".to_owned(), short)
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 80 {
        format!("{}…", &text[..text.floor_char_boundary(80)])
    } else {
        text
    }
}

/// Answers from a cassette, in order, with no network.
pub struct ReplayTransport {
    exchanges: Mutex<VecDeque<Exchange>>,
    workspace: Option<String>,
    lenient: bool,
    path: PathBuf,
}

impl std::fmt::Debug for ReplayTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayTransport")
            .field("path", &self.path)
            .field("lenient", &self.lenient)
            .finish_non_exhaustive()
    }
}

impl ReplayTransport {
    /// Loads `path`. With `lenient`, requests are matched by position only.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] naming the file and line when it cannot be read or parsed.
    pub fn open(
        path: &Path,
        workspace: Option<String>,
        lenient: bool,
    ) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ProviderError::new(
                ErrorKind::Config,
                format!("cassette {}: {error}", path.display()),
            )
        })?;
        let mut exchanges = VecDeque::new();
        for (number, line) in text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
        {
            let exchange = serde_json::from_str(line).map_err(|error| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!("cassette {} line {}: {error}", path.display(), number + 1),
                )
            })?;
            exchanges.push_back(exchange);
        }
        Ok(Self {
            exchanges: Mutex::new(exchanges),
            workspace,
            lenient,
            path: path.to_owned(),
        })
    }

    /// Exchanges not replayed yet.
    pub fn remaining(&self) -> usize {
        self.exchanges
            .lock()
            .map(|exchanges| exchanges.len())
            .unwrap_or(0)
    }
}

impl Transport for ReplayTransport {
    fn send(&self, request: HttpRequest) -> ResponseFuture<'_> {
        Box::pin(async move {
            let exchange = self
                .exchanges
                .lock()
                .ok()
                .and_then(|mut exchanges| exchanges.pop_front())
                .ok_or_else(|| {
                    ProviderError::new(
                        ErrorKind::Replay,
                        format!(
                            "cassette {} has no more recorded requests",
                            self.path.display()
                        ),
                    )
                })?;
            let body = hide_workspace(
                &String::from_utf8_lossy(&request.body),
                self.workspace.as_deref(),
            );
            if !self.lenient && canonical_hash(&body) != exchange.request_hash {
                let recorded: Value =
                    serde_json::from_str(&exchange.request_body).unwrap_or(Value::Null);
                let now: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let diff = json_diff(&recorded, &now, "$")
                    .unwrap_or_else(|| "the bodies differ".to_owned());
                return Err(ProviderError::new(
                    ErrorKind::Replay,
                    format!("request does not match the cassette: {diff}"),
                ));
            }
            let mut headers = HeaderMap::new();
            for (name, value) in &exchange.headers {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::try_from(name.as_str()),
                    HeaderValue::from_str(value),
                ) {
                    headers.append(name, value);
                }
            }
            let bytes = match (&exchange.body, &exchange.body_b64) {
                (Some(text), _) => show_workspace(text, self.workspace.as_deref()).into_bytes(),
                (None, Some(encoded)) => base64_decode(encoded).ok_or_else(|| {
                    ProviderError::new(ErrorKind::Config, "cassette: invalid body_b64")
                })?,
                (None, None) => Vec::new(),
            };
            let status = StatusCode::from_u16(exchange.status).map_err(|error| {
                ProviderError::new(ErrorKind::Config, format!("cassette status: {error}"))
            })?;
            let body = futures_util::stream::iter([Ok(Bytes::from(bytes))]);
            Ok(HttpResponse {
                status,
                headers,
                body: Box::pin(body),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for input in [
            &b""[..],
            b"a",
            b"ab",
            b"abc",
            b"abcd",
            &[0xff, 0x00, 0x10, 0x80],
        ] {
            assert_eq!(base64_decode(&base64_encode(input)).unwrap(), input);
        }
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
    }

    #[test]
    fn canonical_hash_ignores_key_order() {
        assert_eq!(
            canonical_hash(r#"{"a":1,"b":{"c":2,"d":3}}"#),
            canonical_hash(r#"{"b":{"d":3,"c":2},"a":1}"#)
        );
        assert_ne!(canonical_hash(r#"{"a":1}"#), canonical_hash(r#"{"a":2}"#));
    }

    #[test]
    fn diff_names_the_field() {
        let recorded =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let now =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
        assert_eq!(
            json_diff(&recorded, &now, "$").unwrap(),
            r#"$.messages[0].content: recorded "hi" but now "hello""#
        );
    }

    #[test]
    fn workspace_placeholder_round_trips_escaped() {
        let text = r#"{"path":"C:\\work\\repo\\a.rs"}"#;
        let hidden = hide_workspace(text, Some(r"C:\work\repo"));
        assert_eq!(hidden, r#"{"path":"${WORKSPACE}\\a.rs"}"#);
        assert_eq!(show_workspace(&hidden, Some(r"C:\work\repo")), text);
    }
}
