//! WebFetch's fetching: one page over HTTPS, through the model's HTTP stack, within limits.
//!
//! - Only `https` ([`tools::web::FetchUrl`] upgrades `http`), with the webpki roots plus the
//!   user's (`--ca-cert`, `SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`) and `HTTPS_PROXY`/`NO_PROXY`.
//! - Never a private, link-local or loopback address ([`provider::Reach::Internet`]: a name
//!   resolving to one is refused too) unless the user's rules name the host
//!   ([`HostPolicy::named`]).
//! - Redirects within the host are followed, and between it and its `www.` form when the
//!   rules allow the new host as they allowed the first ([`HostPolicy::allowed`]), at most
//!   [`Limits::max_redirects`], a loop refused; any other redirect is not followed:
//!   [`Fetched::Redirect`] names it, so a permission for one host never reaches another.
//! - The body is read as it streams, decoded (gzip, br, deflate) and cut at
//!   [`Limits::max_bytes`]; the whole fetch is bounded by [`Limits::timeout`]. A page that
//!   never ends costs at most `max_bytes` of memory.
//! - HTML becomes Markdown ([`htmd`]); text, JSON and XML stay as they are; a PDF is kept as
//!   bytes; anything else is refused, naming its type. Control characters (terminal escapes)
//!   are removed from text.
//! - Each page is kept [`CACHE_TTL`] per URL.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt as _;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tools::web::FetchUrl;

/// How long a fetched page is kept (Claude Code's 15 minutes).
pub const CACHE_TTL: Duration = Duration::from_secs(15 * 60);

/// At most this many pages are kept (the oldest go first).
const CACHE_ENTRIES: usize = 32;

/// What a fetch may cost. Each has a variable (read at session start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes of a body read, after decoding (`AGENT_WEB_FETCH_MAX_BYTES`, default 10 MiB):
    /// a longer page is cut there; a longer PDF is refused.
    pub max_bytes: u64,
    /// The whole fetch, redirects and body included (`AGENT_WEB_FETCH_TIMEOUT_MS`, default
    /// 60,000).
    pub timeout: Duration,
    /// Redirects followed within a host (`AGENT_WEB_FETCH_MAX_REDIRECTS`, default 10).
    pub max_redirects: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(60),
            max_redirects: 10,
        }
    }
}

impl Limits {
    /// The defaults, with each variable `get` gives in its place.
    ///
    /// # Errors
    ///
    /// A value that is not a whole number (or is 0 for the size or time), naming the variable.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut limits = Self::default();
        let number = |name: &str, zero_ok: bool| -> Result<Option<u64>, String> {
            let Some(value) = get(name) else {
                return Ok(None);
            };
            match value.trim().parse::<u64>() {
                Ok(number) if number > 0 || zero_ok => Ok(Some(number)),
                _ => Err(format!(
                    "{name}={value:?}: expected a whole number{}",
                    if zero_ok { "" } else { " above 0" }
                )),
            }
        };
        if let Some(bytes) = number("AGENT_WEB_FETCH_MAX_BYTES", false)? {
            limits.max_bytes = bytes;
        }
        if let Some(ms) = number("AGENT_WEB_FETCH_TIMEOUT_MS", false)? {
            limits.timeout = Duration::from_millis(ms);
        }
        if let Some(redirects) = number("AGENT_WEB_FETCH_MAX_REDIRECTS", true)? {
            limits.max_redirects = u32::try_from(redirects).unwrap_or(u32::MAX);
        }
        Ok(limits)
    }
}

/// What a page holds, as WebFetch reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// An HTML page, as Markdown.
    Markdown(String),
    /// Text as it came (plain text, Markdown, JSON, XML, source code).
    Text(String),
    /// A PDF's bytes.
    Pdf(Bytes),
}

/// A fetched page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The URL the page came from (after redirects within the host).
    pub url: String,
    /// The HTTP status (a 404 page is a page too).
    pub status: u16,
    /// The content type as the server sent it (`text/html; charset=utf-8`), or empty.
    pub content_type: String,
    /// Bytes of the body read (decoded).
    pub bytes: u64,
    /// Whether the body was cut at [`Limits::max_bytes`].
    pub cut: bool,
    /// What it holds.
    pub content: Content,
}

/// The result of a fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetched {
    /// The page.
    Page(Arc<Page>),
    /// `url` redirects (`status`) to `to`, on another host: not followed.
    Redirect {
        /// The URL asked for.
        url: String,
        /// Where it redirects.
        to: String,
        /// The redirect's status.
        status: u16,
    },
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FetchError {
    /// The connection or the request failed (refused address, TLS, DNS, reset).
    #[error("{url}: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// What the transport said.
        message: String,
    },
    /// [`Limits::timeout`] passed.
    #[error("{url}: no complete answer within {seconds} s (AGENT_WEB_FETCH_TIMEOUT_MS)")]
    Timeout {
        /// The URL.
        url: String,
        /// The limit in seconds.
        seconds: u64,
    },
    /// More redirects than [`Limits::max_redirects`].
    #[error("{url}: more than {max} redirects (AGENT_WEB_FETCH_MAX_REDIRECTS)")]
    TooManyRedirects {
        /// The URL.
        url: String,
        /// The limit.
        max: u32,
    },
    /// A redirect back to a URL already visited.
    #[error("{url}: the redirects go round in a loop (back to {to})")]
    RedirectLoop {
        /// The URL.
        url: String,
        /// The URL visited twice.
        to: String,
    },
    /// A redirect without a usable `Location` (the header itself is the server's text and
    /// is not repeated).
    #[error("{url}: redirect {status} without a usable Location (not an http or https URL)")]
    BadRedirect {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// A body that is not a page, text or PDF.
    #[error(
        "{url} is {content_type}: WebFetch reads web pages, text (JSON, XML, source) and PDFs, not other files"
    )]
    Binary {
        /// The URL.
        url: String,
        /// Its type.
        content_type: String,
    },
    /// A PDF longer than [`Limits::max_bytes`] (a cut PDF cannot be read).
    #[error("{url}: the PDF is larger than {max} bytes (AGENT_WEB_FETCH_MAX_BYTES)")]
    PdfTooLarge {
        /// The URL.
        url: String,
        /// The limit.
        max: u64,
    },
    /// A `content-encoding` this reader does not decode.
    #[error(
        "{url}: the body is {encoding}-encoded, which is not supported (gzip, br, deflate are)"
    )]
    Encoding {
        /// The URL.
        url: String,
        /// The encoding.
        encoding: String,
    },
    /// The body broke off or did not decode.
    #[error("{url}: reading the body failed: {message}")]
    Body {
        /// The URL.
        url: String,
        /// What failed.
        message: String,
    },
}

/// What the permission rules say of the hosts a fetch goes to.
pub trait HostPolicy: Sync {
    /// Whether the rules allow fetching `url` without asking (a redirect to it is followed).
    fn allowed(&self, url: &FetchUrl) -> bool;
    /// Whether the user's rules name `host` itself, so that it may be at a private or
    /// loopback address.
    fn named(&self, host: &str) -> bool;
}

/// Fetches pages (see the module docs); cheap to share.
pub struct Fetcher {
    internet: Arc<dyn provider::Transport>,
    any: Arc<dyn provider::Transport>,
    limits: Limits,
    cache: Mutex<HashMap<String, (Instant, Fetched)>>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A fetcher sending through `internet` ([`provider::Reach::Internet`]) and, for a host
    /// an allow rule names, through `any` ([`provider::Reach::Any`]).
    pub fn new(
        internet: Arc<dyn provider::Transport>,
        any: Arc<dyn provider::Transport>,
        limits: Limits,
    ) -> Self {
        Self {
            internet,
            any,
            limits,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Fetches `url` (from the cache when it was fetched less than [`CACHE_TTL`] ago, and a
    /// page a redirect led to is still allowed), as `policy` lets it.
    ///
    /// # Errors
    ///
    /// See [`FetchError`].
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future abandons the request; nothing is cached.
    pub async fn fetch(
        &self,
        url: &FetchUrl,
        policy: &dyn HostPolicy,
    ) -> Result<Fetched, FetchError> {
        let key = url.uri.to_string();
        if let Some(hit) = self.cached(&key) {
            let still_allowed = match &hit {
                Fetched::Page(page) => FetchUrl::parse(&page.url)
                    .is_ok_and(|landed| landed.host == url.host || policy.allowed(&landed)),
                Fetched::Redirect { .. } => true,
            };
            if still_allowed {
                return Ok(hit);
            }
        }
        let deadline = Instant::now() + self.limits.timeout;
        let fetched = tokio::time::timeout(self.limits.timeout, self.follow(url, policy, deadline))
            .await
            .map_err(|_| FetchError::Timeout {
                url: key.clone(),
                seconds: self.limits.timeout.as_secs(),
            })??;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        if cache.len() >= CACHE_ENTRIES
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(key, _)| key.clone())
        {
            cache.remove(&oldest);
        }
        cache.insert(key, (Instant::now(), fetched.clone()));
        Ok(fetched)
    }

    fn cached(&self, key: &str) -> Option<Fetched> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(key)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, fetched)| fetched.clone())
    }

    /// Requests `url`, following redirects within its host.
    async fn follow(
        &self,
        url: &FetchUrl,
        policy: &dyn HostPolicy,
        deadline: Instant,
    ) -> Result<Fetched, FetchError> {
        let asked = url.uri.to_string();
        let mut current = url.clone();
        let mut seen = vec![asked.clone()];
        for _ in 0..=self.limits.max_redirects {
            let here = current.uri.to_string();
            let transport = if policy.named(&current.host) {
                &self.any
            } else {
                &self.internet
            };
            let response =
                transport
                    .send(request(&current))
                    .await
                    .map_err(|error| FetchError::Transport {
                        url: here.clone(),
                        message: error.message,
                    })?;
            if !response.status.is_redirection() || response.status == StatusCode::NOT_MODIFIED {
                return self
                    .read(here, response, deadline)
                    .await
                    .map(|page| Fetched::Page(Arc::new(page)));
            }
            let location = response
                .headers
                .get(http::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let bad = || FetchError::BadRedirect {
                url: here.clone(),
                status: response.status.as_u16(),
            };
            let target = join(&current, &location).ok_or_else(bad)?;
            let next = FetchUrl::parse(&target).map_err(|_| bad())?;
            let follow = next.host == current.host
                || (same_site(&current.host, &next.host) && policy.allowed(&next));
            if !follow {
                return Ok(Fetched::Redirect {
                    url: asked,
                    to: target,
                    status: response.status.as_u16(),
                });
            }
            let next_key = next.uri.to_string();
            if seen.contains(&next_key) {
                return Err(FetchError::RedirectLoop {
                    url: asked,
                    to: next_key,
                });
            }
            seen.push(next_key);
            current = next;
        }
        Err(FetchError::TooManyRedirects {
            url: asked,
            max: self.limits.max_redirects,
        })
    }

    /// Reads a response's body into a page.
    async fn read(
        &self,
        url: String,
        response: provider::HttpResponse,
        deadline: Instant,
    ) -> Result<Page, FetchError> {
        let content_type = response
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let encoding = response
            .headers
            .get(http::header::CONTENT_ENCODING)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        // Refused before reading: the type says it is not something to read. The type is
        // the server's text: only its media type, cut short, is repeated.
        if !mime.is_empty() && kind_of(&mime, &[]).is_none() {
            let content_type: String = mime
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || "/+.-".contains(*c))
                .take(80)
                .collect();
            return Err(FetchError::Binary { url, content_type });
        }
        let body = response
            .body
            .map(|chunk| chunk.map_err(|error| std::io::Error::other(error.message)));
        let reader = tokio_util::io::StreamReader::new(body);
        let reader = tokio::io::BufReader::new(reader);
        let decoded: Box<dyn AsyncRead + Send + Unpin> = match encoding.as_str() {
            "" | "identity" => Box::new(reader),
            "gzip" | "x-gzip" => {
                Box::new(async_compression::tokio::bufread::GzipDecoder::new(reader))
            }
            "br" => Box::new(async_compression::tokio::bufread::BrotliDecoder::new(
                reader,
            )),
            // HTTP's "deflate" is the zlib format.
            "deflate" => Box::new(async_compression::tokio::bufread::ZlibDecoder::new(reader)),
            _ => {
                return Err(FetchError::Encoding { url, encoding });
            }
        };
        let mut bytes = Vec::new();
        decoded
            .take(self.limits.max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .await
            .map_err(|error| FetchError::Body {
                url: url.clone(),
                message: error.to_string(),
            })?;
        let cut = bytes.len() as u64 > self.limits.max_bytes;
        if cut {
            bytes.truncate(usize::try_from(self.limits.max_bytes).unwrap_or(usize::MAX));
        }
        let Some(kind) = kind_of(&mime, &bytes) else {
            // Only ever the media type (empty here): the header is the server's text.
            return Err(FetchError::Binary {
                url,
                content_type: "not text (and no usable content type given)".to_owned(),
            });
        };
        let read = bytes.len() as u64;
        let content = match kind {
            Kind::Pdf if cut => {
                return Err(FetchError::PdfTooLarge {
                    url,
                    max: self.limits.max_bytes,
                });
            }
            Kind::Pdf => Content::Pdf(Bytes::from(bytes)),
            Kind::Html => {
                let html = decode(&content_type, bytes);
                match super::html::convert(html, deadline).await {
                    Some(markdown) => Content::Markdown(markdown),
                    None => {
                        return Err(FetchError::Timeout {
                            url,
                            seconds: self.limits.timeout.as_secs(),
                        });
                    }
                }
            }
            Kind::Text => Content::Text(clean(decode(&content_type, bytes))),
        };
        Ok(Page {
            url,
            status: response.status.as_u16(),
            content_type,
            bytes: read,
            cut,
            content,
        })
    }
}

/// How a body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Html,
    Text,
    Pdf,
}

/// How a body of type `mime` (lower case, no parameters; empty when the server sent none,
/// then `body` decides) is read, or `None` for a binary file.
fn kind_of(mime: &str, body: &[u8]) -> Option<Kind> {
    match mime {
        "text/html" | "application/xhtml+xml" => Some(Kind::Html),
        "application/pdf" => Some(Kind::Pdf),
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/ecmascript"
        | "application/x-javascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml"
        | "application/x-sh"
        | "application/x-httpd-php"
        | "application/sql"
        | "application/graphql" => Some(Kind::Text),
        mime if mime.starts_with("text/") || mime.ends_with("+json") || mime.ends_with("+xml") => {
            Some(Kind::Text)
        }
        "" => {
            let start = body.trim_ascii_start();
            if start.starts_with(b"%PDF-") {
                Some(Kind::Pdf)
            } else if start.len() >= 5
                && (start[..5].eq_ignore_ascii_case(b"<!doc")
                    || start[..5].eq_ignore_ascii_case(b"<html"))
            {
                Some(Kind::Html)
            } else if !body.contains(&0) && std::str::from_utf8(body).is_ok() {
                Some(Kind::Text)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The request for `url`: a GET asking for text, compressed if the server likes.
fn request(url: &FetchUrl) -> provider::HttpRequest {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_static(
            "text/markdown, text/html;q=0.9, text/plain;q=0.8, application/pdf;q=0.7, */*;q=0.1",
        ),
    );
    headers.insert(
        http::header::ACCEPT_ENCODING,
        HeaderValue::from_static("gzip, br, deflate"),
    );
    headers.insert(
        http::header::USER_AGENT,
        HeaderValue::from_static(concat!(
            "agent/",
            env!("CARGO_PKG_VERSION"),
            " (WebFetch; a coding agent fetching a page for its user)"
        )),
    );
    provider::HttpRequest {
        method: Method::GET,
        uri: url.uri.clone(),
        headers,
        body: Bytes::new(),
    }
}

/// `location` (absolute, scheme-relative, host-relative or path-relative) read against
/// `base`; `None` when it is empty.
fn join(base: &FetchUrl, location: &str) -> Option<String> {
    let location = location.trim();
    if location.is_empty() {
        return None;
    }
    let lower = location.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return Some(location.to_owned());
    }
    if let Some(rest) = location.strip_prefix("//") {
        return Some(format!("https://{rest}"));
    }
    let authority = base.uri.authority()?.as_str();
    if location.starts_with('/') {
        return Some(format!("https://{authority}{location}"));
    }
    if location.contains(':') && !location.starts_with('?') && !location.starts_with('#') {
        // Another scheme (`javascript:`, `ftp:`): not a page to follow.
        let scheme = location.split(':').next().unwrap_or_default();
        if scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            return Some(location.to_owned());
        }
    }
    let path = base.uri.path();
    if location.starts_with('?') {
        return Some(format!("https://{authority}{path}{location}"));
    }
    let directory = &path[..path.rfind('/').map_or(0, |slash| slash + 1)];
    Some(format!("https://{authority}{directory}{location}"))
}

/// Whether a redirect from `from` to `to` stays on the site: the same host, or the host
/// and its `www.` form.
fn same_site(from: &str, to: &str) -> bool {
    let bare = |host: &str| host.strip_prefix("www.").unwrap_or(host).to_owned();
    from == to || bare(from) == bare(to)
}

/// `bytes` as text in the charset `content_type` names (UTF-8 when it names none or one
/// unknown; malformed sequences replaced). Valid UTF-8 is taken as it is, without a copy.
fn decode(content_type: &str, bytes: Vec<u8>) -> String {
    let charset = content_type
        .split(';')
        .skip(1)
        .filter_map(|parameter| parameter.split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("charset"))
        .map(|(_, value)| value.trim().trim_matches('"').to_owned());
    let encoding = charset
        .and_then(|label| encoding_rs::Encoding::for_label(label.as_bytes()))
        .unwrap_or(encoding_rs::UTF_8);
    if encoding == encoding_rs::UTF_8 && !bytes.starts_with(b"\xef\xbb\xbf") {
        return match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        };
    }
    encoding.decode_with_bom_removal(&bytes).0.into_owned()
}

/// `text` without control characters (an escape sequence would drive the user's terminal)
/// other than newlines and tabs, nor the invisible characters that hide or reorder text
/// (zero-width space, word joiner, byte order mark, bidirectional overrides and isolates:
/// a `</web-content>` split by one reads as the tag); `\r\n` becomes `\n`. Text without
/// any is returned as it is (a page of megabytes is not copied).
pub fn clean(text: String) -> String {
    let unwanted = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}' | '\u{2060}' | '\u{feff}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unwanted) {
        return text;
    }
    text.replace("\r\n", "\n")
        .chars()
        .filter(|c| !unwanted(*c))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn url(text: &str) -> FetchUrl {
        FetchUrl::parse(text).unwrap()
    }

    #[test]
    fn locations_are_read_against_the_page() {
        let base = url("https://example.com/docs/a/page.html?x=1");
        let cases = [
            ("https://other.net/x", "https://other.net/x"),
            ("//cdn.example.com/y", "https://cdn.example.com/y"),
            ("/root", "https://example.com/root"),
            ("next.html", "https://example.com/docs/a/next.html"),
            ("../up", "https://example.com/docs/a/../up"),
            ("?page=2", "https://example.com/docs/a/page.html?page=2"),
        ];
        for (location, expected) in cases {
            assert_eq!(
                join(&base, location).as_deref(),
                Some(expected),
                "{location}"
            );
        }
        assert_eq!(join(&base, "  "), None);
        assert!(FetchUrl::parse(&join(&base, "javascript:alert(1)").unwrap()).is_err());
    }

    /// Answers every request from a table of `(url, status, location, body)`.
    struct Table(Vec<(&'static str, u16, &'static str, &'static str)>);

    impl provider::Transport for Table {
        fn send(&self, request: provider::HttpRequest) -> provider::ResponseFuture<'_> {
            let url = request.uri.to_string();
            let row = self.0.iter().find(|row| row.0 == url).copied();
            Box::pin(async move {
                let (_, status, location, body) = row.unwrap_or(("", 404, "", ""));
                let mut headers = HeaderMap::new();
                headers.insert("content-type", HeaderValue::from_static("text/plain"));
                if !location.is_empty() {
                    headers.insert("location", HeaderValue::from_static(location));
                }
                let chunk: Result<Bytes, provider::ProviderError> = Ok(Bytes::from(body));
                Ok(provider::HttpResponse {
                    status: StatusCode::from_u16(status).unwrap(),
                    headers,
                    body: Box::pin(futures_util::stream::iter([chunk])),
                })
            })
        }
    }

    /// Allows the hosts it lists; names none.
    struct Allowing(&'static [&'static str]);

    impl HostPolicy for Allowing {
        fn allowed(&self, url: &FetchUrl) -> bool {
            self.0.contains(&url.host.as_str())
        }
        fn named(&self, _host: &str) -> bool {
            false
        }
    }

    /// Attack: a redirect between a host and its `www.` form went around a deny rule on
    /// the other. It is followed only when the rules allow the new host.
    #[tokio::test]
    async fn a_www_redirect_is_followed_only_where_the_rules_allow() {
        let table = Arc::new(Table(vec![
            (
                "https://www.pub.example/",
                301,
                "https://pub.example/secret",
                "",
            ),
            ("https://pub.example/secret", 200, "", "SECRET"),
            ("https://pub.example/a", 302, "/b", ""),
            ("https://pub.example/b", 200, "", "B"),
        ]));
        let fetcher = Fetcher::new(table.clone(), table, Limits::default());
        let fetched = fetcher
            .fetch(
                &url("https://www.pub.example/"),
                &Allowing(&["www.pub.example"]),
            )
            .await
            .unwrap();
        assert!(
            matches!(&fetched, Fetched::Redirect { to, .. } if to == "https://pub.example/secret"),
            "{fetched:?}"
        );
        // Both hosts allowed: followed (a fresh fetcher, as the cache keeps answers by URL).
        let table = Arc::new(Table(vec![
            (
                "https://www.pub.example/",
                301,
                "https://pub.example/secret",
                "",
            ),
            ("https://pub.example/secret", 200, "", "SECRET"),
        ]));
        let fetcher = Fetcher::new(table.clone(), table, Limits::default());
        let both = Allowing(&["www.pub.example", "pub.example"]);
        let Fetched::Page(page) = fetcher
            .fetch(&url("https://www.pub.example/"), &both)
            .await
            .unwrap()
        else {
            panic!("not followed");
        };
        assert_eq!(page.content, Content::Text("SECRET".into()));
        // The cached page is not given out once the rules no longer allow where it came from.
        let fetched = fetcher
            .fetch(
                &url("https://www.pub.example/"),
                &Allowing(&["www.pub.example"]),
            )
            .await
            .unwrap();
        assert!(matches!(fetched, Fetched::Redirect { .. }), "{fetched:?}");
    }

    #[test]
    fn a_site_is_its_host_and_its_www_form() {
        assert!(same_site("example.com", "www.example.com"));
        assert!(same_site("www.example.com", "example.com"));
        assert!(!same_site("example.com", "docs.example.com"));
        assert!(!same_site("example.com", "example.com.evil.net"));
    }

    #[test]
    fn kinds_follow_the_type_and_else_the_bytes() {
        assert_eq!(kind_of("text/html", b""), Some(Kind::Html));
        assert_eq!(kind_of("application/ld+json", b""), Some(Kind::Text));
        assert_eq!(kind_of("text/x-rust", b""), Some(Kind::Text));
        assert_eq!(kind_of("application/pdf", b""), Some(Kind::Pdf));
        assert_eq!(kind_of("image/png", b"text"), None);
        assert_eq!(kind_of("application/octet-stream", b"text"), None);
        assert_eq!(kind_of("", b"  %PDF-1.7"), Some(Kind::Pdf));
        assert_eq!(kind_of("", b"\n<!DOCTYPE html><p>x"), Some(Kind::Html));
        assert_eq!(kind_of("", b"plain words"), Some(Kind::Text));
        assert_eq!(kind_of("", b"\x89PNG\r\n\x1a\n\0\0"), None);
    }

    #[test]
    fn text_is_decoded_in_its_charset() {
        assert_eq!(
            decode("text/plain; charset=ISO-8859-1", b"caf\xe9".to_vec()),
            "café"
        );
        assert_eq!(decode("text/plain", "café".into()), "café");
        assert_eq!(decode("text/plain", b"caf\xe9!".to_vec()), "caf\u{fffd}!");
        assert_eq!(
            decode("text/plain; charset=\"nonsense\"", b"ok".to_vec()),
            "ok"
        );
        assert_eq!(decode("text/plain", b"\xef\xbb\xbfbom".to_vec()), "bom");
        assert_eq!(clean("a\r\nb\u{1b}[0m\tc".into()), "a\nb[0m\tc");
        assert_eq!(
            clean("<\u{200b}/web-content>\u{202e}x".into()),
            "</web-content>x"
        );
    }

    #[test]
    fn limits_come_from_the_variables() {
        let limits = Limits::from_env(|name| match name {
            "AGENT_WEB_FETCH_MAX_BYTES" => Some("1024".into()),
            "AGENT_WEB_FETCH_MAX_REDIRECTS" => Some("0".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(limits.max_bytes, 1024);
        assert_eq!(limits.max_redirects, 0);
        assert_eq!(limits.timeout, Duration::from_secs(60));
        let error = Limits::from_env(|name| {
            (name == "AGENT_WEB_FETCH_TIMEOUT_MS").then(|| "soon".to_owned())
        })
        .unwrap_err();
        assert!(error.contains("AGENT_WEB_FETCH_TIMEOUT_MS"), "{error}");
    }
}
