//! Where response bytes come from: the network (hyper + rustls) or a cassette. The client
//! parses both the same way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt as _;
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use crate::error::{ErrorKind, ProviderError};

/// An HTTP request as the client sends it.
#[derive(Clone, Debug)]
pub struct HttpRequest {
    /// Method (POST).
    pub method: Method,
    /// Full URI.
    pub uri: Uri,
    /// Headers (credentials included: transports must never record them).
    pub headers: HeaderMap,
    /// The JSON body.
    pub body: Bytes,
}

/// The body of a response, chunk by chunk.
pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, ProviderError>> + Send>>;

/// An HTTP response with its body still arriving.
pub struct HttpResponse {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body chunks.
    pub body: BodyStream,
}

impl std::fmt::Debug for HttpResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

/// The future a [`Transport`] returns.
pub type ResponseFuture<'a> =
    Pin<Box<dyn Future<Output = Result<HttpResponse, ProviderError>> + Send + 'a>>;

/// Sends requests and returns responses.
pub trait Transport: Send + Sync {
    /// Sends `request`.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future abandons the request (the connection is not reused).
    fn send(&self, request: HttpRequest) -> ResponseFuture<'_>;
}

impl<T: Transport + ?Sized> Transport for Arc<T> {
    fn send(&self, request: HttpRequest) -> ResponseFuture<'_> {
        (**self).send(request)
    }
}

/// HTTPS (rustls, ring provider, webpki roots plus configured ones) and plain HTTP over one
/// connection pool, through an HTTP CONNECT proxy for the destinations the proxy settings
/// select (`HTTPS_PROXY`, `NO_PROXY`).
pub struct HyperTransport {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector<Resolver>>, Full<Bytes>>,
    proxied: Option<(Matcher, TunneledClient)>,
    reach: Reach,
}

/// Which addresses a [`HyperTransport`] connects to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reach {
    /// Any address (the model's server may be on a private network).
    #[default]
    Any,
    /// Public addresses and loopback only: a destination whose host is, or resolves to, an
    /// address [`is_private_address`] names is refused (every address a name resolves to is
    /// checked, and the connection goes to the checked ones, so a name cannot change its
    /// answer in between). Through a proxy only an address written in the URL is checked (the
    /// proxy resolves names). Claude Code 2.1.197 guards its `http` hooks the same way.
    Public,
    /// As [`Reach::Public`], and loopback refused too: for what the model asks for (a web
    /// page), which must not reach a server on this machine (a local admin port, a
    /// development server) unless the user names its host.
    Internet,
}

impl Reach {
    /// Whether a connection to `address` is refused.
    pub fn refuses(self, address: std::net::IpAddr) -> bool {
        match self {
            Self::Any => false,
            Self::Public => is_private_address(address),
            Self::Internet => is_private_address(address) || is_loopback_address(address),
        }
    }
}

/// Whether `address` is not a public one a hook or a page may be fetched from: private
/// (`10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`), link-local (`169.254.0.0/16`, a cloud's
/// metadata service; `fe80::/10`), carrier-grade NAT (`100.64.0.0/10`), benchmarking
/// (`198.18.0.0/15`, where some VPNs put their fake-IP DNS answers), documentation
/// (`192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`: never a public server), unspecified
/// and "this network" (`0.0.0.0/8`, `::`), reserved, multicast and broadcast (`224.0.0.0/3`),
/// unique-local and site-local (`fc00::/7`, `fec0::/10`), IPv6 multicast (`ff00::/8`), and
/// any of these IPv4 ranges inside IPv6 (see [`embedded_ipv4`]). Loopback is not: a hook or
/// a page served on this machine is the user's own ([`is_loopback_address`] tells it).
/// Claude Code 2.1.197 refuses the private, link-local, carrier-grade NAT and unique-local
/// ranges for its `http` hooks; the others are refused here too.
pub fn is_private_address(address: std::net::IpAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr};
    let v4 = |address: Ipv4Addr| {
        let [first, second, third, _] = address.octets();
        first == 0
            || first == 10
            || (first == 100 && (64..=127).contains(&second))
            || (first == 169 && second == 254)
            || (first == 172 && (16..=31).contains(&second))
            || (first == 192 && second == 168)
            || (first == 198 && (18..=19).contains(&second))
            || (first, second, third) == (192, 0, 2)
            || (first, second, third) == (198, 51, 100)
            || (first, second, third) == (203, 0, 113)
            || first >= 224
    };
    match address {
        IpAddr::V4(address) => v4(address),
        IpAddr::V6(address) => {
            if is_loopback_address(IpAddr::V6(address)) {
                return false;
            }
            if address.is_unspecified() {
                return true;
            }
            if let Some(embedded) = embedded_ipv4(address) {
                return v4(embedded);
            }
            let first = address.segments()[0];
            (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
                || (first & 0xff00) == 0xff00
        }
    }
}

/// Whether `address` is this machine's loopback, however it is written: `127.0.0.0/8`,
/// `::1`, or a loopback IPv4 address inside IPv6 ([`embedded_ipv4`]: `::ffff:127.0.0.1`
/// reaches `127.0.0.1`). `Ipv6Addr::is_loopback` knows only `::1`.
pub fn is_loopback_address(address: std::net::IpAddr) -> bool {
    match address {
        std::net::IpAddr::V4(address) => address.is_loopback(),
        std::net::IpAddr::V6(address) => {
            address.is_loopback() || embedded_ipv4(address).is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// The IPv4 address an IPv6 address carries, in the forms that reach it: mapped
/// (`::ffff:0:0/96`), translated (`::ffff:0:0:0/96`), compatible (`::/96`, deprecated; not
/// `::` and `::1`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`, the address after the
/// prefix).
pub fn embedded_ipv4(address: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let v4 = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        std::net::Ipv4Addr::new(a, b, c, d)
    };
    match address.segments() {
        [0, 0, 0, 0, 0, 0xffff, high, low]
        | [0, 0, 0, 0, 0xffff, 0, high, low]
        | [0x64, 0xff9b, 0, 0, 0, 0, high, low] => Some(v4(high, low)),
        [0, 0, 0, 0, 0, 0, high, low] if high != 0 || low > 1 => Some(v4(high, low)),
        [0x2002, high, low, ..] => Some(v4(high, low)),
        _ => None,
    }
}

/// The names a [`HyperTransport`] connects to, resolved by the system (`getaddrinfo`, on
/// tokio's blocking pool) and, for [`Reach::Public`], checked.
#[derive(Clone, Copy, Debug)]
struct Resolver {
    reach: Reach,
}

impl tower_service::Service<hyper_util::client::legacy::connect::dns::Name> for Resolver {
    type Response = std::vec::IntoIter<std::net::SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: hyper_util::client::legacy::connect::dns::Name) -> Self::Future {
        let reach = self.reach;
        Box::pin(async move {
            let found: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if let Some(private) = found.iter().find(|found| reach.refuses(found.ip())) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    refused(reach, name.as_str(), private.ip()),
                ));
            }
            Ok(found.into_iter())
        })
    }
}

/// Why a transport of `reach` refuses `host`.
fn refused(reach: Reach, host: &str, address: std::net::IpAddr) -> String {
    match reach {
        Reach::Internet => format!(
            "{host} resolves to {address}, a private, link-local or loopback address: refused"
        ),
        _ => format!(
            "{host} resolves to {address}, a private or link-local address: refused (loopback is allowed)"
        ),
    }
}

/// The client that reaches HTTPS destinations through an HTTP CONNECT tunnel.
type TunneledClient = Client<hyper_rustls::HttpsConnector<Tunnel<HttpConnector>>, Full<Bytes>>;

/// Proxy settings, as curl reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Proxy for `https://` destinations (`HTTPS_PROXY`, else `ALL_PROXY`), `http://host:port`
    /// with optional `user:password@`.
    pub https: Option<String>,
    /// Hosts, domains and networks that bypass the proxy (`NO_PROXY`), comma-separated.
    pub no_proxy: Option<String>,
}

impl ProxyConfig {
    /// The proxy settings `source` gives: `HTTPS_PROXY` (or `https_proxy`, `ALL_PROXY`,
    /// `all_proxy`) and `NO_PROXY` (or `no_proxy`), as curl reads them.
    pub fn from_source(source: &dyn crate::ConfigSource) -> Self {
        Self {
            https: ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
                .iter()
                .find_map(|key| source.get(key)),
            no_proxy: ["NO_PROXY", "no_proxy"]
                .iter()
                .find_map(|key| source.get(key)),
        }
    }
}

/// Network transports shared by many clients (the sessions of a batch): one
/// [`HyperTransport`], and so one connection pool, per trust and proxy configuration, so
/// sessions reuse each other's kept-alive connections instead of each opening its own.
///
/// Clones share the pool. Transports are built on first use and kept for the pool's life;
/// a configuration is the exact extra root certificates (PEM bytes) and [`ProxyConfig`].
#[derive(Clone, Debug, Default)]
pub struct TransportPool {
    built: Arc<std::sync::Mutex<Vec<PooledTransport>>>,
}

/// One configuration's transport in a [`TransportPool`].
#[derive(Debug)]
struct PooledTransport {
    extra_roots_pem: Vec<u8>,
    proxy: ProxyConfig,
    transport: Arc<HyperTransport>,
}

impl TransportPool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// The transport for `extra_roots_pem` and `proxy` ([`HyperTransport::with_proxy`]),
    /// built the first time they are asked for and shared after.
    ///
    /// # Errors
    ///
    /// As [`HyperTransport::with_proxy`] (nothing is kept then).
    pub fn get(
        &self,
        extra_roots_pem: &[u8],
        proxy: &ProxyConfig,
    ) -> Result<Arc<HyperTransport>, ProviderError> {
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(pooled) = built
            .iter()
            .find(|pooled| pooled.extra_roots_pem == extra_roots_pem && &pooled.proxy == proxy)
        {
            return Ok(Arc::clone(&pooled.transport));
        }
        let transport = Arc::new(HyperTransport::with_proxy(extra_roots_pem, proxy)?);
        built.push(PooledTransport {
            extra_roots_pem: extra_roots_pem.to_vec(),
            proxy: proxy.clone(),
            transport: Arc::clone(&transport),
        });
        Ok(transport)
    }
}

impl std::fmt::Debug for HyperTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HyperTransport").finish_non_exhaustive()
    }
}

impl HyperTransport {
    /// A transport trusting the webpki roots and the certificates in `extra_roots_pem`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when the PEM holds no valid certificate or TLS cannot be set up.
    pub fn new(extra_roots_pem: &[u8]) -> Result<Self, ProviderError> {
        Self::with_proxy(extra_roots_pem, &ProxyConfig::default())
    }

    /// A transport that tunnels through `proxy` where its settings say so.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when the PEM holds no valid certificate, TLS cannot be set up, or
    /// the proxy URL is invalid.
    pub fn with_proxy(extra_roots_pem: &[u8], proxy: &ProxyConfig) -> Result<Self, ProviderError> {
        Self::with_reach(extra_roots_pem, proxy, Reach::Any)
    }

    /// A transport that tunnels through `proxy` where its settings say so and connects only
    /// where `reach` allows.
    ///
    /// # Errors
    ///
    /// As [`HyperTransport::with_proxy`].
    pub fn with_reach(
        extra_roots_pem: &[u8],
        proxy: &ProxyConfig,
        reach: Reach,
    ) -> Result<Self, ProviderError> {
        let tls = shared_tls_config(extra_roots_pem)?;
        let https = |tls: rustls::ClientConfig| {
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
        };
        let mut direct = HttpConnector::new_with_resolver(Resolver { reach });
        direct.enforce_http(false);
        let client =
            Client::builder(TokioExecutor::new()).build(https(tls.clone()).wrap_connector(direct));
        let proxied = match &proxy.https {
            Some(url) => {
                let mut builder = Matcher::builder().https(url.as_str());
                if let Some(no_proxy) = &proxy.no_proxy {
                    builder = builder.no(no_proxy.as_str());
                }
                let matcher = builder.build();
                let probe: Uri = "https://api.anthropic.com/"
                    .parse()
                    .map_err(|_| ProviderError::new(ErrorKind::Config, "proxy"))?;
                let intercept = matcher.intercept(&probe).or_else(|| {
                    // NO_PROXY may exclude the probe host; the proxy address itself is what
                    // the tunnel needs.
                    Matcher::builder()
                        .https(url.as_str())
                        .build()
                        .intercept(&probe)
                });
                let Some(intercept) = intercept else {
                    return Err(ProviderError::new(
                        ErrorKind::Config,
                        format!("HTTPS_PROXY {url:?} is not a valid proxy URL"),
                    ));
                };
                let mut tunnel = Tunnel::new(intercept.uri().clone(), HttpConnector::new());
                if let Some(auth) = intercept.basic_auth() {
                    tunnel = tunnel.with_auth(auth.clone());
                }
                let connector = https(tls).wrap_connector(tunnel);
                Some((
                    matcher,
                    Client::builder(TokioExecutor::new()).build(connector),
                ))
            }
            None => None,
        };
        Ok(Self {
            client,
            proxied,
            reach,
        })
    }
}

/// The TLS configuration trusting the webpki roots and `extra_roots_pem`: built once per
/// distinct `extra_roots_pem` in the process, since the session's transports (the model's,
/// the web tools') share it and a system bundle (`SSL_CERT_FILE`, some 200 KB of PEM) costs
/// about a millisecond to parse each time (docs/benchmarks.md, "Speed against the first
/// wave").
fn shared_tls_config(extra_roots_pem: &[u8]) -> Result<rustls::ClientConfig, ProviderError> {
    type Built = std::sync::Mutex<Vec<(Vec<u8>, rustls::ClientConfig)>>;
    static BUILT: std::sync::OnceLock<Built> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, config)) = built.iter().find(|(pem, _)| pem == extra_roots_pem) {
        return Ok(config.clone());
    }
    let config = tls_config(extra_roots_pem)?;
    built.push((extra_roots_pem.to_vec(), config.clone()));
    Ok(config)
}

/// Builds the TLS configuration ([`shared_tls_config`] keeps it).
fn tls_config(extra_roots_pem: &[u8]) -> Result<rustls::ClientConfig, ProviderError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if !extra_roots_pem.is_empty() {
        let mut added = 0;
        for certificate in CertificateDer::pem_slice_iter(extra_roots_pem) {
            let certificate = certificate.map_err(|error| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!("extra root certificates: {error}"),
                )
            })?;
            roots.add(certificate).map_err(|error| {
                ProviderError::new(
                    ErrorKind::Config,
                    format!("extra root certificate: {error}"),
                )
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(ProviderError::new(
                ErrorKind::Config,
                "extra root certificates: no PEM certificate found",
            ));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| ProviderError::new(ErrorKind::Config, format!("TLS: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Classifies a transport failure: TLS problems are named as such, with the host.
fn transport_error(error: &(dyn std::error::Error + 'static), host: &str) -> ProviderError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut messages = Vec::new();
    while let Some(current) = source {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return ProviderError::new(
                ErrorKind::Tls,
                format!("TLS handshake with {host} failed: {tls}"),
            );
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && let Some(tls) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return ProviderError::new(
                ErrorKind::Tls,
                format!("TLS handshake with {host} failed: {tls}"),
            );
        }
        messages.push(current.to_string());
        source = current.source();
    }
    messages.dedup();
    let detail = messages.join(": ");
    // hyper-util boxes connector errors, which can hide the rustls type: the text still says.
    let lower = detail.to_ascii_lowercase();
    if lower.contains("certificate") || lower.contains("handshake") || lower.contains("tls") {
        let last = messages.last().map_or(detail.as_str(), String::as_str);
        return ProviderError::new(
            ErrorKind::Tls,
            format!("TLS handshake with {host} failed: {last}"),
        );
    }
    let mut error = ProviderError::new(ErrorKind::Connect, format!("{host}: {detail}"));
    // A name that does not resolve, or a server on this machine that is not listening:
    // waiting two minutes for it helps nobody.
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback());
    error.lasting = lower.contains("dns error")
        || lower.contains("failed to lookup address")
        || lower.contains("name or service not known")
        || (loopback && lower.contains("connection refused"));
    error
}

impl Transport for HyperTransport {
    fn send(&self, request: HttpRequest) -> ResponseFuture<'_> {
        Box::pin(async move {
            let host = request.uri.host().unwrap_or("?").to_owned();
            // An address in the URL is never resolved, so the resolver cannot check it.
            if let Ok(address) = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                && self.reach.refuses(address)
            {
                let mut error =
                    ProviderError::new(ErrorKind::Connect, refused(self.reach, &host, address));
                error.lasting = true;
                return Err(error);
            }
            let mut builder = http::Request::builder()
                .method(request.method)
                .uri(request.uri);
            if let Some(headers) = builder.headers_mut() {
                *headers = request.headers;
            }
            let http_request = builder.body(Full::new(request.body)).map_err(|error| {
                ProviderError::new(ErrorKind::Config, format!("building the request: {error}"))
            })?;
            let tunneled = self
                .proxied
                .as_ref()
                .filter(|(matcher, _)| matcher.intercept(http_request.uri()).is_some())
                .map(|(_, client)| client);
            let response = match tunneled {
                Some(client) => client.request(http_request).await,
                None => self.client.request(http_request).await,
            }
            .map_err(|error| transport_error(&error, &host))?;
            let (parts, body) = response.into_parts();
            let body = body.into_data_stream().map(move |chunk| {
                chunk.map_err(|error| {
                    let mut detail = transport_error(&error, "the server");
                    detail.kind = ErrorKind::StreamBroken;
                    detail
                })
            });
            Ok(HttpResponse {
                status: parts.status,
                headers: parts.headers,
                body: Box::pin(body),
            })
        })
    }
}

/// `method url` with `headers` and `body` through `transport`, the whole exchange within
/// `limit`: the body of a 2xx answer (at most 64 KiB), else why not (`HTTP 403: ...`, a
/// timeout, a bad URL), for the small JSON endpoints credentials come from (AWS's container
/// and instance metadata, Google's token endpoints and metadata server).
pub(crate) async fn fetch_small(
    transport: &dyn Transport,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Bytes,
    limit: std::time::Duration,
) -> Result<Vec<u8>, String> {
    let uri: Uri = url
        .parse()
        .map_err(|error| format!("bad URL {url}: {error}"))?;
    let request = HttpRequest {
        method,
        uri,
        headers,
        body,
    };
    let exchange = async {
        let response = transport
            .send(request)
            .await
            .map_err(|error| error.to_string())?;
        let mut body = response.body;
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            bytes.extend_from_slice(&chunk.map_err(|error| error.to_string())?);
            if bytes.len() > 64 << 10 {
                return Err("the answer is over 64 KiB".to_owned());
            }
        }
        if !response.status.is_success() {
            let text: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
            return Err(format!("HTTP {}: {text}", response.status));
        }
        Ok(bytes)
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| format!("no answer within {} s", limit.as_secs()))?
}

/// `text` percent-encoded for a URL path segment or a form value: RFC 3986's unreserved
/// characters kept, every other byte `%XX` (a model id's `:`, an ARN's `/`, a form's `&`).
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use tower_service::Service as _;

    use super::*;

    #[test]
    fn a_pool_shares_one_transport_per_configuration() {
        let pool = TransportPool::new();
        let direct = ProxyConfig::default();
        let first = pool.get(&[], &direct).unwrap();
        let again = pool.clone().get(&[], &direct).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "clones share the pool");
        let proxied = ProxyConfig {
            https: Some("http://127.0.0.1:3128".into()),
            no_proxy: None,
        };
        let other = pool.get(&[], &proxied).unwrap();
        assert!(!Arc::ptr_eq(&first, &other), "another proxy, another pool");
        let bad = pool.get(
            b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
            &direct,
        );
        assert!(bad.is_err());
        assert_eq!(
            pool.built.lock().unwrap().len(),
            2,
            "a failed build is not kept"
        );
    }

    /// The credential endpoints (AWS's instance metadata and container endpoints, Google's
    /// metadata server) are plain `http://` on link-local or internal addresses: `HTTPS_PROXY`
    /// tunnels `https://` destinations only, so they are reached directly, as the AWS and
    /// Google SDKs reach them.
    #[test]
    fn credential_endpoints_bypass_the_https_proxy() {
        let proxy = ProxyConfig {
            https: Some("http://127.0.0.1:3128".into()),
            no_proxy: None,
        };
        let transport = HyperTransport::with_reach(&[], &proxy, Reach::Any).unwrap();
        let (matcher, _) = transport.proxied.as_ref().expect("a proxy is set");
        let through = |uri: &str| matcher.intercept(&uri.parse().unwrap()).is_some();
        assert!(through(
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke"
        ));
        for direct in [
            "http://169.254.169.254/latest/api/token",
            "http://169.254.170.2/v2/credentials/abc",
            "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token",
        ] {
            assert!(!through(direct), "{direct} went through the proxy");
        }
    }

    fn address(text: &str) -> IpAddr {
        text.parse().expect("a test address")
    }

    #[test]
    fn private_link_local_and_unique_local_addresses_are_private_and_loopback_is_not() {
        for private in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "::",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "febf::1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "198.18.0.1",
            "198.19.255.255",
            "240.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::a9fe:a9fe",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "fec0::1",
            "ff02::1",
        ] {
            assert!(is_private_address(address(private)), "{private}");
        }
        for public in [
            "127.0.0.1",
            "::1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "198.20.0.1",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(!is_private_address(address(public)), "{public}");
        }
    }

    #[tokio::test]
    async fn a_public_transport_refuses_private_addresses_written_or_resolved() {
        let transport =
            HyperTransport::with_reach(&[], &ProxyConfig::default(), Reach::Public).unwrap();
        let request = |uri: &str| HttpRequest {
            method: Method::POST,
            uri: uri.parse().unwrap(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
        };
        for uri in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fd00:ec2::254]/",
            "https://10.0.0.1/",
        ] {
            let error = transport.send(request(uri)).await.unwrap_err();
            assert!(
                error.message.contains("private or link-local"),
                "{uri}: {error}"
            );
            assert!(error.lasting, "{uri}");
        }
        // What the resolver answers for a name: every address is checked.
        let mut resolver = Resolver {
            reach: Reach::Public,
        };
        let name = "192.168.0.7".parse().unwrap();
        let error = resolver.call(name).await.unwrap_err();
        assert!(error.to_string().contains("192.168.0.7"), "{error}");
        let mut any = Resolver { reach: Reach::Any };
        let found: Vec<_> = any
            .call("192.168.0.7".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert_eq!(found[0].ip(), address("192.168.0.7"));
        let loopback: Vec<_> = resolver
            .call("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(loopback.iter().all(|found| found.ip().is_loopback()));
        // Internet: loopback refused too, by name and by address.
        let mut internet = Resolver {
            reach: Reach::Internet,
        };
        let error = internet
            .call("localhost".parse().unwrap())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("loopback"), "{error}");
        let transport =
            HyperTransport::with_reach(&[], &ProxyConfig::default(), Reach::Internet).unwrap();
        for uri in [
            "https://127.0.0.1:1/",
            "https://[::1]:1/",
            "https://10.0.0.1/",
        ] {
            let error = transport.send(request(uri)).await.unwrap_err();
            assert!(error.message.contains("refused"), "{uri}: {error}");
        }
        assert!(Reach::Internet.refuses(address("127.0.0.53")));
        // Loopback inside IPv6, in every form that reaches it (an attack found these).
        for looped in [
            "::ffff:127.0.0.1",
            "::ffff:7f00:1",
            "::ffff:0:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "0:0:0:0:0:0:0:1",
        ] {
            assert!(Reach::Internet.refuses(address(looped)), "{looped}");
            assert!(!Reach::Public.refuses(address(looped)), "{looped}");
        }
        for documentation in [
            "192.0.2.2",
            "198.51.100.7",
            "203.0.113.9",
            "::ffff:192.0.2.2",
        ] {
            assert!(
                Reach::Public.refuses(address(documentation)),
                "{documentation}"
            );
        }
        assert!(!Reach::Public.refuses(address("127.0.0.53")));
        assert!(!Reach::Internet.refuses(address("93.184.215.14")));
    }
}
