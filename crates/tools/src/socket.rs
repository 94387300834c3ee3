//! Monitor's WebSocket form (`ws: {url, protocols}`): the agent opens the socket itself, so
//! where it may connect is decided here, exactly: to this machine's own servers (every
//! address the host resolves to is a loopback address) unless the user's settings let
//! sandboxed commands reach the network (`sandbox.network`), as a command would. The socket
//! goes to the address checked, never to a second lookup's.

use std::net::SocketAddr;
use std::time::Duration;

use executor::ToolError;
use futures_util::StreamExt as _;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// The longest the lookup, the connection and the handshake may each take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest message (and frame) taken, in bytes: 1 MiB.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The longest event line kept of one text frame, in characters.
const MAX_EVENT_CHARS: usize = 4_000;

/// A socket ready to be followed as a monitor.
pub(crate) struct Connected {
    pub stream: WebSocketStream<TcpStream>,
    pub url: String,
    pub description: String,
    pub tool_use_id: Option<String>,
    pub deadline: Option<Duration>,
}

/// Opens `url` (`ws://` only) with `protocols` offered; `network`: the settings let
/// commands reach the network, so any host may be reached (else loopback only).
///
/// # Errors
///
/// [`ToolError::InvalidInput`] for a URL that is not `ws://host[:port]/...`, a host that is
/// not this machine's while the network is off, or a lookup, connection or handshake that
/// fails or takes longer than [`CONNECT_TIMEOUT`].
pub(crate) async fn connect(
    url: &str,
    protocols: &[String],
    network: bool,
) -> Result<WebSocketStream<TcpStream>, ToolError> {
    let invalid = |why: &str| ToolError::InvalidInput(format!("Monitor ws.url {url:?}: {why}"));
    // Not fatal: a server that is not up is the model's to know, not a reason to stop the
    // calls beside it.
    let failed = |why: String| ToolError::InvalidInput(format!("Monitor ws.url {url:?}: {why}"));
    let mut request = url
        .into_client_request()
        .map_err(|error| invalid(&error.to_string()))?;
    let uri = request.uri().clone();
    match uri.scheme_str() {
        Some("ws") => {}
        Some("wss") => {
            return Err(invalid(
                "wss:// is not opened by Monitor here; run a command that connects instead (such as `websocat`, with the network allowed in the sandbox)",
            ));
        }
        _ => return Err(invalid("not a ws:// URL")),
    }
    let host = uri
        .host()
        .map(|host| {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned()
        })
        .ok_or_else(|| invalid("no host"))?;
    let port = uri.port_u16().unwrap_or(80);
    let addresses: Vec<SocketAddr> = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::lookup_host((host.as_str(), port)),
    )
    .await
    .map_err(|_| failed("looking the host up took too long".into()))?
    .map_err(|error| failed(format!("looking the host up: {error}")))?
    .collect();
    let Some(address) = addresses.first().copied() else {
        return Err(failed("the host has no address".into()));
    };
    if !network && !addresses.iter().all(|address| address.ip().is_loopback()) {
        return Err(invalid(
            "only this machine's own servers (localhost) can be watched while commands have no network (the setting sandbox.network)",
        ));
    }
    if !protocols.is_empty() {
        let value = protocols
            .join(", ")
            .parse()
            .map_err(|_| invalid("a protocol name that is not a header value"))?;
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", value);
    }
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| failed("connecting took too long".into()))?
        .map_err(|error| failed(format!("connecting to {address}: {error}")))?;
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    let (stream, _) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio_tungstenite::client_async_with_config(request, tcp, Some(config)),
    )
    .await
    .map_err(|_| failed("the handshake took too long".into()))?
    .map_err(|error| failed(format!("the handshake: {error}")))?;
    Ok(stream)
}

/// Follows `stream` until it closes (`true`), breaks (`false`, its error told as a last
/// line) or `cancel` fires (closed politely; `true`): each text frame is a line for `line`
/// (its own line breaks as spaces, at most [`MAX_EVENT_CHARS`] characters), each binary
/// frame a placeholder line.
pub(crate) async fn follow(
    stream: &mut WebSocketStream<TcpStream>,
    cancel: &tokio_util::sync::CancellationToken,
    mut line: impl FnMut(String),
) -> bool {
    loop {
        let message = tokio::select! {
            () = cancel.cancelled() => {
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.close(None)).await;
                return true;
            }
            message = stream.next() => message,
        };
        match message {
            Some(Ok(Message::Text(text))) => {
                let flat: String = text
                    .chars()
                    .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
                    .take(MAX_EVENT_CHARS)
                    .collect();
                line(flat);
            }
            Some(Ok(Message::Binary(bytes))) => {
                line(format!("[binary frame, {} bytes]", bytes.len()))
            }
            Some(Ok(Message::Close(_))) | None => return true,
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                line(format!("[the WebSocket broke: {error}]"));
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_plain_ws_to_this_machine_while_the_network_is_off() {
        for (url, expected) in [
            ("wss://localhost/x", "wss:// is not opened"),
            ("http://localhost/x", "not a ws:// URL"),
            ("ws://192.0.2.1:9/x", "only this machine's own servers"),
        ] {
            let error = connect(url, &[], false).await.err().map(|e| e.to_string());
            assert!(
                error
                    .as_deref()
                    .is_some_and(|error| error.contains(expected)),
                "{url}: {error:?}"
            );
        }
        // Loopback is allowed: a closed port fails to connect, not the check.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap_or(9);
        let error = connect(&format!("ws://127.0.0.1:{port}/"), &[], false)
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("connecting to 127.0.0.1"), "{error}");
    }
}
