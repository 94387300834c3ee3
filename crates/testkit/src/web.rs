//! A web server of fixed pages over TLS, for testing a client that fetches pages: HTML,
//! text and binary bodies, redirects, compressed bodies, slow and endless bodies. Every
//! request is recorded.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write as _;
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
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One page: a status, headers and a body.
#[derive(Clone, Debug)]
pub struct Page {
    status: u16,
    headers: Vec<(String, String)>,
    body: PageBody,
    delay: Duration,
}

#[derive(Clone, Debug)]
enum PageBody {
    Bytes(Vec<u8>),
    /// `chunk` every `every`, for ever.
    Endless {
        chunk: Vec<u8>,
        every: Duration,
    },
}

impl Page {
    /// A 200 page with `content_type` and `body`.
    pub fn new(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: PageBody::Bytes(body.into()),
            delay: Duration::ZERO,
        }
    }

    /// A 200 HTML page (`text/html; charset=utf-8`).
    pub fn html(html: &str) -> Self {
        Self::new("text/html; charset=utf-8", html)
    }

    /// A redirect (`status` 301, 302, 303, 307 or 308) to `location`.
    pub fn redirect(status: u16, location: &str) -> Self {
        Self {
            status,
            headers: vec![("location".into(), location.into())],
            body: PageBody::Bytes(Vec::new()),
            delay: Duration::ZERO,
        }
    }

    /// A 200 page of `content_type` whose body never ends: `chunk` every `every`.
    pub fn endless(content_type: &str, chunk: &[u8], every: Duration) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: PageBody::Endless {
                chunk: chunk.to_vec(),
                every,
            },
            delay: Duration::ZERO,
        }
    }

    /// The same page with status `status`.
    #[must_use]
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// The same page with one more header.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The same page answered only after `delay`.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The same page with its body gzip-compressed (`content-encoding: gzip`).
    ///
    /// # Panics
    ///
    /// On an endless page.
    #[must_use]
    pub fn gzip(self) -> Self {
        self.encoded("gzip", |body| {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            // Writing to a Vec cannot fail.
            let _ = encoder.write_all(body);
            encoder.finish().unwrap_or_default()
        })
    }

    /// The same page with its body brotli-compressed (`content-encoding: br`).
    ///
    /// # Panics
    ///
    /// On an endless page.
    #[must_use]
    pub fn brotli(self) -> Self {
        self.encoded("br", |body| {
            let mut out = Vec::new();
            {
                let mut encoder = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                // Writing to a Vec cannot fail.
                let _ = encoder.write_all(body);
            }
            out
        })
    }

    fn encoded(mut self, name: &str, encode: impl Fn(&[u8]) -> Vec<u8>) -> Self {
        let PageBody::Bytes(body) = &self.body else {
            panic!("an endless page cannot be compressed");
        };
        self.body = PageBody::Bytes(encode(body));
        self.headers.push(("content-encoding".into(), name.into()));
        self
    }
}

/// A request the page server received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// Path and query.
    pub path: String,
    /// Headers (names lowercase).
    pub headers: Vec<(String, String)>,
}

#[derive(Default)]
struct Shared {
    pages: Mutex<HashMap<String, Page>>,
    requests: Mutex<Vec<PageRequest>>,
}

/// Serves [`Page`]s over TLS on `127.0.0.1`, a free port, with a new self-signed certificate
/// for `localhost` and `127.0.0.1`; 404 for a path without a page. Stops when dropped.
pub struct PageServer {
    addr: SocketAddr,
    cert_pem: String,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for PageServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl PageServer {
    /// Starts serving (no pages yet).
    ///
    /// # Errors
    ///
    /// When the certificate cannot be made or the port bound.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("binding 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let (acceptor, cert_pem) = crate::server::self_signed()?;
        let shared = Arc::new(Shared::default());
        let serving = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let shared = Arc::clone(&serving);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that rejects the certificate ends the handshake.
                    if let Ok(tls) = acceptor.accept(stream).await {
                        let service =
                            service_fn(move |request| serve(request, Arc::clone(&shared)));
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            cert_pem,
            shared,
            accept,
        })
    }

    /// `https://localhost:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The PEM of its certificate.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Serves `page` at `path` (with its query, if any) from now on.
    pub fn page(&self, path: &str, page: Page) {
        if let Ok(mut pages) = self.shared.pages.lock() {
            pages.insert(path.to_owned(), page);
        }
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<PageRequest> {
        self.shared
            .requests
            .lock()
            .map(|requests| requests.clone())
            .unwrap_or_default()
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

async fn serve(
    request: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<Body>, Infallible> {
    let path = request
        .uri()
        .path_and_query()
        .map(ToString::to_string)
        .unwrap_or_default();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(PageRequest {
            path: path.clone(),
            headers,
        });
    }
    let page = shared
        .pages
        .lock()
        .ok()
        .and_then(|pages| pages.get(&path).cloned())
        .unwrap_or_else(|| Page::new("text/plain", "not found").status(404));
    tokio::time::sleep(page.delay).await;
    let body: Body = match page.body {
        PageBody::Bytes(bytes) => Full::new(Bytes::from(bytes))
            .map_err(|never| match never {})
            .boxed(),
        PageBody::Endless { chunk, every } => {
            let (sender, receiver) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
            tokio::spawn(async move {
                let chunk = Bytes::from(chunk);
                while sender.send(Ok(Frame::data(chunk.clone()))).await.is_ok() {
                    tokio::time::sleep(every).await;
                }
            });
            StreamBody::new(tokio_stream(receiver)).boxed()
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        hyper::StatusCode::from_u16(page.status).unwrap_or(hyper::StatusCode::OK);
    for (name, value) in &page.headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    Ok(response)
}

/// The frames `receiver` yields, as a stream.
fn tokio_stream(
    mut receiver: mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, std::io::Error>> {
    futures_util::stream::poll_fn(move |context| receiver.poll_recv(context))
}
