//! A scripted MCP server (rmcp's server), for the agent's MCP tests: on stdio
//! (`testkit mcp-server`) or over streamable HTTP ([`McpHttpServer`], `testkit
//! mcp-http-server`). Its tools:
//!
//! - `echo {text}`: the text back (claims `readOnlyHint`);
//! - `fail`: an `isError` result saying so;
//! - `slow {ms}`: waits, then says `slept`;
//! - `huge {bytes}`: that many `x`;
//! - `image`: a 1x1 PNG;
//! - `write {path, text}`: writes the file (a side effect a test can see);
//! - `crash`: the process exits at once (the client sees the server die); over HTTP the
//!   server forgets every session instead, as a restarted server would;
//! - `grow {times}`: adds the tool `bonus` (says `bonus!`) and sends
//!   `notifications/tools/list_changed` `times` times (default once); says how many times
//!   the tools were listed so far (`grown, listed N`).
//!
//! `TESTKIT_MCP_STARTUP_MS` delays the handshake (a slow server);
//! `TESTKIT_MCP_ENDLESS_PAGES` makes every `tools/list` page name a next one.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

/// The scripted server.
#[derive(Clone, Default)]
pub struct ScriptedMcp {
    /// Whether `grow` was called.
    grown: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// How many times the tools were listed.
    listings: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Over HTTP: the sessions `crash` forgets.
    sessions: Option<std::sync::Arc<LocalSessionManager>>,
}

impl std::fmt::Debug for ScriptedMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedMcp")
            .field("grown", &self.grown)
            .finish_non_exhaustive()
    }
}

fn tools(grown: bool) -> Value {
    let object = |properties: Value| json!({"type": "object", "properties": properties});
    let mut tools = json!({"tools": [
        {"name": "echo", "description": "Says the text back.", "inputSchema": object(json!({"text": {"type": "string"}})), "annotations": {"readOnlyHint": true}},
        {"name": "fail", "description": "Always fails.", "inputSchema": object(json!({}))},
        {"name": "slow", "description": "Waits ms milliseconds.", "inputSchema": object(json!({"ms": {"type": "integer"}}))},
        {"name": "huge", "description": "Returns bytes characters.", "inputSchema": object(json!({"bytes": {"type": "integer"}}))},
        {"name": "image", "description": "Returns an image.", "inputSchema": object(json!({}))},
        {"name": "write", "description": "Writes text to path.", "inputSchema": object(json!({"path": {"type": "string"}, "text": {"type": "string"}}))},
        {"name": "crash", "description": "Exits the server.", "inputSchema": object(json!({}))},
        {"name": "grow", "description": "Adds the tool bonus.", "inputSchema": object(json!({"times": {"type": "integer"}}))},
    ]});
    if grown && let Some(list) = tools["tools"].as_array_mut() {
        list.push(json!({"name": "bonus", "description": "Joined later.", "inputSchema": object(json!({}))}));
    }
    tools
}

/// A 1x1 transparent PNG, base64.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

fn result(value: Value) -> Result<CallToolResponse, ErrorData> {
    serde_json::from_value::<CallToolResult>(value)
        .map(CallToolResponse::from)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
}

impl ServerHandler for ScriptedMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let grown = self.grown.load(std::sync::atomic::Ordering::SeqCst);
        self.listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut page = tools(grown);
        // A hostile server: every page says there is another.
        if std::env::var_os("TESTKIT_MCP_ENDLESS_PAGES").is_some() {
            page["nextCursor"] = json!("more");
        }
        serde_json::from_value(page)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    /// Two resources: `notes://todo` (text) and `image://pixel` (a PNG blob).
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        serde_json::from_value(json!({"resources": [
            {"uri": "notes://todo", "name": "todo", "mimeType": "text/plain", "description": "What is left to do"},
            {"uri": "image://pixel", "name": "pixel", "mimeType": "image/png"},
        ]}))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = match request.uri.as_str() {
            "notes://todo" => {
                json!([{"uri": "notes://todo", "mimeType": "text/plain", "text": "1. write the tests\n2. ship"}])
            }
            "image://pixel" => {
                json!([{"uri": "image://pixel", "mimeType": "image/png", "blob": PNG}])
            }
            other => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {other}"),
                    None,
                ));
            }
        };
        serde_json::from_value::<ReadResourceResult>(json!({ "contents": contents }))
            .map(ReadResourceResponse::from)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let number = |key: &str| arguments.get(key).and_then(Value::as_u64).unwrap_or(0);
        let say = |text: String| json!({"content": [{"type": "text", "text": text}]});
        match request.name.as_ref() {
            "echo" => result(say(text("text"))),
            "fail" => {
                result(json!({"content": [{"type": "text", "text": "it failed"}], "isError": true}))
            }
            "slow" => {
                tokio::time::sleep(Duration::from_millis(number("ms"))).await;
                result(say("slept".into()))
            }
            "huge" => result(say(
                "x".repeat(usize::try_from(number("bytes")).unwrap_or(0))
            )),
            "image" => result(
                json!({"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}),
            ),
            "write" => match std::fs::write(text("path"), text("text")) {
                Ok(()) => result(say(format!("wrote {}", text("path")))),
                Err(error) => result(
                    json!({"content": [{"type": "text", "text": error.to_string()}], "isError": true}),
                ),
            },
            "crash" => match &self.sessions {
                Some(sessions) => {
                    let sessions = std::sync::Arc::clone(sessions);
                    // After this answer is out: a restart between two calls.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        sessions.sessions.write().await.clear();
                    });
                    Err(ErrorData::internal_error("the server restarted", None))
                }
                None => std::process::exit(3),
            },
            "grow" => {
                self.grown.store(true, std::sync::atomic::Ordering::SeqCst);
                let times = arguments.get("times").and_then(Value::as_u64).unwrap_or(1);
                for _ in 0..times {
                    let _ = context
                        .peer
                        .send_notification(
                            rmcp::model::ServerNotification::ToolListChangedNotification(
                                rmcp::model::ToolListChangedNotification {
                                    method: Default::default(),
                                    extensions: Default::default(),
                                },
                            ),
                        )
                        .await;
                }
                let listed = self.listings.load(std::sync::atomic::Ordering::SeqCst);
                result(say(format!("grown, listed {listed}")))
            }
            "bonus" => result(say("bonus!".into())),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

/// Serves [`ScriptedMcp`] on stdin and stdout until the client goes.
///
/// # Errors
///
/// When the handshake fails.
pub async fn serve_stdio() -> anyhow::Result<()> {
    if let Some(ms) = std::env::var("TESTKIT_MCP_STARTUP_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
    {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let service = ScriptedMcp::default()
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}

/// [`ScriptedMcp`] over streamable HTTP on `127.0.0.1` (an ephemeral port), for tests;
/// stopped on drop. With a bearer token, a request without `Authorization: Bearer TOKEN` is
/// answered 401 with a `WWW-Authenticate` challenge.
#[derive(Debug)]
pub struct McpHttpServer {
    url: String,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl McpHttpServer {
    /// Starts it on `port` (0: any free port).
    ///
    /// # Errors
    ///
    /// When the port cannot be bound.
    pub async fn start(port: u16, bearer: Option<&str>) -> std::io::Result<Self> {
        use hyper_util::rt::TokioIo;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let sessions = std::sync::Arc::new(LocalSessionManager::default());
        let factory_sessions = std::sync::Arc::clone(&sessions);
        let service = StreamableHttpService::new(
            move || {
                Ok(ScriptedMcp {
                    sessions: Some(std::sync::Arc::clone(&factory_sessions)),
                    ..ScriptedMcp::default()
                })
            },
            sessions,
            StreamableHttpServerConfig::default(),
        );
        let expected = bearer.map(|token| format!("Bearer {token}"));
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let service = service.clone();
                let expected = expected.clone();
                let counter = std::sync::Arc::clone(&counter);
                tokio::spawn(async move {
                    let handler = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let mut service = service.clone();
                            let expected = expected.clone();
                            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            async move {
                                use http_body_util::BodyExt as _;
                                use tower_service::Service as _;
                                let given = request
                                    .headers()
                                    .get(http::header::AUTHORIZATION)
                                    .and_then(|value| value.to_str().ok());
                                if let Some(expected) = &expected
                                    && given != Some(expected.as_str())
                                {
                                    let body = http_body_util::Full::new(bytes::Bytes::from(
                                        "a bearer token is required",
                                    ))
                                    .map_err(|never| match never {})
                                    .boxed();
                                    return http::Response::builder()
                                        .status(http::StatusCode::UNAUTHORIZED)
                                        .header(
                                            http::header::WWW_AUTHENTICATE,
                                            "Bearer realm=\"testkit\"",
                                        )
                                        .body(body);
                                }
                                match service.call(request).await {
                                    Ok(response) => Ok(response),
                                    Err(never) => match never {},
                                }
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), handler)
                        .await;
                });
            }
        });
        Ok(Self {
            url,
            requests,
            task,
        })
    }

    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How many HTTP requests it received (refused ones included).
    pub fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
