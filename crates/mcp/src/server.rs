//! One connected MCP server: a stdio child process (its own process group, killed with the
//! agent; its stderr appended to a log file, never the terminal) with rmcp's client over its
//! pipes, or a streamable HTTP endpoint ([`crate::http::HyperClient`]), and the tools it
//! lists.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{Peer, ServiceExt as _};
use tokio::sync::Mutex;

use crate::config::{Configured, ServerConfig};

/// Why a server is not usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The program could not be started.
    #[error("{name}: could not start `{command}`: {source}")]
    Spawn {
        /// The server.
        name: String,
        /// The program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The MCP handshake failed or the server answered garbage.
    #[error("{name}: {detail} (its stderr is in {log})")]
    Protocol {
        /// The server.
        name: String,
        /// What failed.
        detail: String,
        /// The server's log.
        log: String,
    },
    /// It did not finish starting in time.
    #[error("{name}: not ready after {} ms (MCP_TIMEOUT sets the limit)", after.as_millis())]
    Timeout {
        /// The server.
        name: String,
        /// How long it had.
        after: Duration,
    },
    /// Its configuration names a variable that is not set.
    #[error("{name}: {problem} (in {origin}); it was not started")]
    Config {
        /// The server.
        name: String,
        /// What is missing.
        problem: String,
        /// The file that configures it.
        origin: String,
    },
    /// A remote server could not be reached, refused the handshake or answered garbage.
    #[error("{name}: {detail} ({url})")]
    Remote {
        /// The server.
        name: String,
        /// What failed.
        detail: String,
        /// Its endpoint.
        url: String,
    },
}

/// A tool a server lists.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedTool {
    /// The server's name for it.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema (JSON Schema object).
    pub input_schema: serde_json::Value,
    /// The server's claim that it only reads (unchecked: used only to run it alongside
    /// others, never to allow it).
    pub read_only_hint: bool,
}

type Client = RunningService<RoleClient, ListWatcher>;

/// The most tools one server may list: a server listing more is failed (their definitions
/// would not fit in a request anyway), so an endless `nextCursor` cannot fill memory.
pub const MAX_TOOLS: usize = 1_000;

/// The most `tools/list` pages read for one listing.
const MAX_PAGES: usize = 100;

/// Lists the server's tools, page by page, within [`MAX_TOOLS`] and [`MAX_PAGES`].
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<ListedTool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|cursor| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|error| format!("listing its tools failed: {error}"))?;
        tools.extend(page.tools.into_iter().map(listed));
        if tools.len() > MAX_TOOLS {
            return Err(format!("it lists more than {MAX_TOOLS} tools"));
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err(format!("its tool list runs past {MAX_PAGES} pages"))
}

/// How long a `notifications/tools/list_changed` waits before the listing starts, so a
/// burst of them is listed once.
const LIST_CHANGED_PAUSE: Duration = Duration::from_millis(50);

/// The client's handler: keeps the server's tool list current when it sends
/// `notifications/tools/list_changed`. One listing runs at a time, after a short pause;
/// notifications that arrive meanwhile are folded into one more listing after it, so a
/// flood of them costs a listing per pause at most, never one each.
#[derive(Clone, Debug, Default)]
struct ListWatcher {
    listed: Arc<std::sync::Mutex<Vec<ListedTool>>>,
    /// Set by the transport ([`crate::flood::Bounded`]) when it passes a notification on;
    /// cleared here when it is taken up (the transport drops the ones in between).
    list_changed_pending: Arc<std::sync::atomic::AtomicBool>,
    /// A listing is running.
    listing: Arc<std::sync::atomic::AtomicBool>,
    /// The list changed since the running listing began.
    dirty: Arc<std::sync::atomic::AtomicBool>,
    /// How long one listing may take.
    limit: Duration,
}

impl rmcp::ClientHandler for ListWatcher {
    async fn on_tool_list_changed(&self, context: rmcp::service::NotificationContext<RoleClient>) {
        use std::sync::atomic::Ordering;
        // Taken up: a later notification is passed on again. Cleared before `dirty` is set,
        // so one dropped meanwhile is covered by the listing that `dirty` starts.
        self.list_changed_pending.store(false, Ordering::SeqCst);
        self.dirty.store(true, Ordering::SeqCst);
        // One listing at a time: the running one sees `dirty` and lists again.
        while !self.listing.swap(true, Ordering::SeqCst) {
            // A short pause first gathers a burst into the same listing.
            tokio::time::sleep(LIST_CHANGED_PAUSE).await;
            while self.dirty.swap(false, Ordering::SeqCst) {
                match tokio::time::timeout(self.limit, list_tools(&context.peer)).await {
                    Ok(Ok(tools)) => {
                        *self
                            .listed
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = tools;
                    }
                    Ok(Err(error)) => tracing::warn!(
                        error = %printable(&error),
                        "listing an MCP server's changed tools failed"
                    ),
                    Err(_) => tracing::warn!("listing an MCP server's changed tools timed out"),
                }
            }
            self.listing.store(false, Ordering::SeqCst);
            // A notification between the last check and letting go lists again.
            if !self.dirty.load(Ordering::SeqCst) {
                break;
            }
        }
    }
}

/// `text` with control characters shown as escapes (a server's text in a log line).
fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A listed tool as the server describes it.
fn listed(tool: rmcp::model::Tool) -> ListedTool {
    ListedTool {
        name: tool.name.to_string(),
        description: tool
            .description
            .map(|text| text.to_string())
            .unwrap_or_default(),
        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        read_only_hint: tool
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.read_only_hint)
            .unwrap_or(false),
    }
}

/// The most pages of `resources/list` read from one server (a server whose every page names
/// a next one is stopped there).
pub const MAX_RESOURCE_PAGES: usize = 20;

/// The most resources listed from one server (1,000): past it the listing stops, and says
/// so.
pub const MAX_RESOURCES: usize = 1_000;

/// How long one resource request (a page of the list, a read) may take: 60 s, or the tool
/// calls' limit (`MCP_TOOL_TIMEOUT`) when shorter. A resource is data the server has at
/// hand; a server that does not answer must not hang the turn (or a prompt that mentions
/// it).
pub const RESOURCE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A connected server; restarted once when its process died.
pub struct Server {
    /// Its configured name.
    pub name: String,
    config: Configured,
    log: PathBuf,
    startup: Duration,
    /// The limit of one resource request: [`RESOURCE_TIMEOUT`], or the tool calls' limit
    /// when that is shorter (`MCP_TOOL_TIMEOUT`).
    resource_timeout: Duration,
    extra_roots_pem: Arc<[u8]>,
    /// The program that runs [`crate::guard::guard_main`] (see [`crate::Options::guard`]).
    guard: Option<PathBuf>,
    /// Where a stdio server starts (see [`crate::Options::cwd`]).
    cwd: Option<PathBuf>,
    /// The embedding program, for a [`ServerConfig::Host`] server.
    host: Option<Arc<dyn crate::HostServers>>,
    state: Mutex<State>,
    /// The tools it lists now (kept current by [`ListWatcher`]).
    listed: Arc<std::sync::Mutex<Vec<ListedTool>>>,
}

struct State {
    client: Option<Client>,
    /// The child, killed (with its group) when the server is dropped or restarted.
    child: Option<tokio::process::Child>,
    restarted: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Starts `configured` and lists its tools, within `options.startup`. A stdio server's
    /// stderr is appended to `<options.log_dir>/<name>.log`.
    ///
    /// # Errors
    ///
    /// [`ServerError`] naming the server: it could not start or be reached, failed the
    /// handshake or the listing, or took longer than `options.startup`.
    pub async fn connect(
        configured: Configured,
        options: &crate::Options,
    ) -> Result<(Arc<Self>, Vec<ListedTool>), ServerError> {
        let log = options.log_dir.join(format!(
            "{}.log",
            crate::names::server_prefix(&configured.name)
        ));
        let server = Arc::new(Self {
            name: configured.name.clone(),
            config: configured,
            log,
            startup: options.startup,
            resource_timeout: RESOURCE_TIMEOUT.min(options.tool_timeout),
            extra_roots_pem: Arc::clone(&options.extra_roots_pem),
            guard: options.guard.clone(),
            cwd: options.cwd.clone(),
            host: options.host.clone(),
            state: Mutex::new(State {
                client: None,
                child: None,
                restarted: false,
            }),
            listed: Arc::default(),
        });
        // The handshake and the listing together within `startup`.
        let tools = tokio::time::timeout(options.startup, async {
            let mut state = server.state.lock().await;
            server.start(&mut state).await?;
            server.list(&state).await
        })
        .await
        .map_err(|_| ServerError::Timeout {
            name: server.name.clone(),
            after: options.startup,
        })??;
        *server
            .listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tools.clone();
        Ok((server, tools))
    }

    /// (Re)starts the process, or reconnects to the endpoint, and the client.
    async fn start(&self, state: &mut State) -> Result<(), ServerError> {
        if let Some(mut child) = state.child.take() {
            kill_group(&mut child).await;
        }
        state.client = None;
        match &self.config.config {
            ServerConfig::Stdio { command, args, env } => {
                self.start_stdio(state, command, args, env).await
            }
            ServerConfig::Http { url, headers } => self.start_http(state, url, headers).await,
            ServerConfig::Host => self.start_host(state).await,
            ServerConfig::Incomplete { problem } => Err(ServerError::Config {
                name: self.name.clone(),
                problem: problem.clone(),
                origin: self.config.origin.display().to_string(),
            }),
        }
    }

    /// Connects to a streamable HTTP endpoint with the configured headers.
    async fn start_http(
        &self,
        state: &mut State,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), ServerError> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let remote = |detail: String| ServerError::Remote {
            name: self.name.clone(),
            detail,
            url: url.to_owned(),
        };
        let client = crate::http::HyperClient::new(&self.extra_roots_pem)
            .map_err(|error| remote(error.to_string()))?;
        let mut custom = std::collections::HashMap::new();
        for (name, value) in headers {
            let header = http::HeaderName::try_from(name.as_str())
                .map_err(|_| remote(format!("header {name:?} is not a valid header name")))?;
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|_| remote(format!("the value of header {name} is not valid")))?;
            custom.insert(header, value);
        }
        let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
        let transport = StreamableHttpClientTransport::with_client(client, config);
        let (watcher, transport) = self.watched(transport);
        let client = match tokio::time::timeout(self.startup, watcher.serve(transport)).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                let authorized = headers
                    .keys()
                    .any(|name| name.eq_ignore_ascii_case("authorization"));
                return Err(remote(handshake_failure(&error, authorized)));
            }
            Err(_) => {
                return Err(ServerError::Timeout {
                    name: self.name.clone(),
                    after: self.startup,
                });
            }
        };
        state.client = Some(client);
        Ok(())
    }

    /// Connects to a server the embedding program serves ([`crate::HostServers`]).
    async fn start_host(&self, state: &mut State) -> Result<(), ServerError> {
        let Some(host) = &self.host else {
            return Err(self.protocol(
                "a server of type sdk lives in the program that embeds the agent (the Agent SDK); this run has none".into(),
            ));
        };
        let stream = host
            .open(&self.name)
            .map_err(|detail| self.protocol(detail))?;
        let (read, write) = tokio::io::split(stream);
        let (watcher, transport) = self.watched(
            rmcp::transport::async_rw::AsyncRwTransport::new_client(read, write),
        );
        match tokio::time::timeout(self.startup, watcher.serve(transport)).await {
            Ok(Ok(client)) => {
                state.client = Some(client);
                Ok(())
            }
            Ok(Err(error)) => Err(self.protocol(format!("the MCP handshake failed: {error}"))),
            Err(_) => Err(ServerError::Timeout {
                name: self.name.clone(),
                after: self.startup,
            }),
        }
    }

    /// Starts a stdio server's process and the client over its pipes.
    async fn start_stdio(
        &self,
        state: &mut State,
        command: &str,
        args: &[String],
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), ServerError> {
        if let Some(dir) = self.log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_or_else(|_| Stdio::null(), Stdio::from);
        let mut command_line = match &self.guard {
            Some(guard) => {
                let mut line = tokio::process::Command::new(guard);
                line.arg(crate::guard::GUARD_ARG)
                    .arg(std::process::id().to_string())
                    .arg(command);
                line
            }
            None => tokio::process::Command::new(command),
        };
        if let Some(cwd) = &self.cwd {
            command_line.current_dir(cwd);
        }
        // Not the agent's environment (its keys and tokens): the MCP SDK's default set and
        // what the configuration names, as Claude Code starts servers.
        let mut child = command_line
            .args(args)
            .env_clear()
            .envs(sandbox::env::mcp_server_env(std::env::vars_os(), env))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ServerError::Spawn {
                name: self.name.clone(),
                command: command.to_owned(),
                source,
            })?;
        // Until the state holds the child (and kills its group when dropped), a start dropped
        // midway (the run ended while the server was still connecting) kills the group here:
        // `kill_on_drop` alone would kill the guard and leave the server running.
        let mut connecting = GroupOnDrop(child.id().and_then(|pid| i32::try_from(pid).ok()));
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(self.protocol("its pipes could not be opened".into()));
        };
        let (watcher, transport) = self.watched(
            rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin),
        );
        let client = match tokio::time::timeout(self.startup, watcher.serve(transport)).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                if let Some(source) = self.guard_spawn_failure(&mut child).await {
                    return Err(ServerError::Spawn {
                        name: self.name.clone(),
                        command: command.to_owned(),
                        source,
                    });
                }
                connecting.0 = None;
                kill_group(&mut child).await;
                return Err(self.protocol(format!("the MCP handshake failed: {error}")));
            }
            Err(_) => {
                connecting.0 = None;
                kill_group(&mut child).await;
                return Err(ServerError::Timeout {
                    name: self.name.clone(),
                    after: self.startup,
                });
            }
        };
        state.client = Some(client);
        state.child = Some(child);
        connecting.0 = None;
        Ok(())
    }

    /// The client's handler and `transport` bounded against a flood of the server's
    /// messages ([`crate::flood`]), sharing what they must.
    fn watched<T>(&self, transport: T) -> (ListWatcher, crate::flood::Bounded<T>) {
        let watcher = ListWatcher {
            listed: Arc::clone(&self.listed),
            limit: self.startup,
            ..ListWatcher::default()
        };
        let bounded = crate::flood::Bounded::new(
            transport,
            self.name.clone(),
            Arc::clone(&watcher.list_changed_pending),
            Arc::default(),
        );
        (watcher, bounded)
    }

    /// Why the guard could not start the server, when that is why the handshake failed: it
    /// exited with [`crate::guard::SPAWN_FAILED`] after writing the reason to the log.
    async fn guard_spawn_failure(
        &self,
        child: &mut tokio::process::Child,
    ) -> Option<std::io::Error> {
        self.guard.as_ref()?;
        let status = tokio::time::timeout(Duration::from_secs(1), child.wait())
            .await
            .ok()?
            .ok()?;
        if status.code() != Some(crate::guard::SPAWN_FAILED) {
            return None;
        }
        let log = std::fs::read_to_string(&self.log).ok()?;
        let reason = log
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(crate::guard::SPAWN_FAILED_PREFIX))?;
        Some(std::io::Error::other(reason.to_owned()))
    }

    fn protocol(&self, detail: String) -> ServerError {
        match &self.config.config {
            ServerConfig::Http { url, .. } => ServerError::Remote {
                name: self.name.clone(),
                detail,
                url: url.clone(),
            },
            ServerConfig::Stdio { .. } | ServerConfig::Host | ServerConfig::Incomplete { .. } => {
                ServerError::Protocol {
                    name: self.name.clone(),
                    detail,
                    log: self.log.display().to_string(),
                }
            }
        }
    }

    /// Where to look when it fails: its log (stdio) or its endpoint (HTTP).
    fn where_to_look(&self) -> String {
        match &self.config.config {
            ServerConfig::Http { url, .. } => url.clone(),
            ServerConfig::Stdio { .. } => self.log.display().to_string(),
            ServerConfig::Host => "the embedding program's server".to_owned(),
            ServerConfig::Incomplete { .. } => self.config.origin.display().to_string(),
        }
    }

    async fn list(&self, state: &State) -> Result<Vec<ListedTool>, ServerError> {
        let Some(client) = &state.client else {
            return Err(self.protocol("not connected".into()));
        };
        tokio::time::timeout(self.startup, list_tools(client.peer()))
            .await
            .map_err(|_| ServerError::Timeout {
                name: self.name.clone(),
                after: self.startup,
            })?
            .map_err(|detail| self.protocol(detail))
    }

    /// The tools it lists now (the list at connection, or the latest after a
    /// `notifications/tools/list_changed`).
    pub fn listed(&self) -> Vec<ListedTool> {
        self.listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Calls `tool` with `arguments`. A server whose process died is started again once
    /// for the whole session when the next call comes (a call during which it died is not
    /// repeated: it may have had effects).
    ///
    /// # Errors
    ///
    /// A message for the model: the server is gone, or the call failed in the protocol.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, String> {
        let mut state = self.state.lock().await;
        if !state.alive() {
            self.restart(&mut state).await?;
        }
        match self.call_once(&state, tool, arguments).await {
            Ok(result) => Ok(result),
            // Let its exit show, so the next call sees it and restarts it.
            Err(error) if state.exited_within(Duration::from_millis(500)).await => Err(format!(
                "{error}; the server stopped during the call (it is started again for the next one; see {})",
                self.where_to_look()
            )),
            Err(error) => Err(error),
        }
    }

    /// The resources it lists (every page, at most [`MAX_RESOURCE_PAGES`] and
    /// [`MAX_RESOURCES`], each page within [`RESOURCE_TIMEOUT`]), each as MCP's
    /// wire shape (`uri`, `name`, `mimeType`, `description`, ...).
    ///
    /// # Errors
    ///
    /// A message for the model: the server is gone, or the request failed.
    pub async fn list_resources(&self) -> Result<Vec<serde_json::Value>, String> {
        let peer = self.peer().await?;
        let mut resources = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_RESOURCE_PAGES {
            let params = cursor.take().map(|cursor| {
                let mut params = rmcp::model::PaginatedRequestParams::default();
                params.cursor = Some(cursor);
                params
            });
            let page = tokio::time::timeout(self.resource_timeout, peer.list_resources(params))
                .await
                .map_err(|_| {
                    format!(
                        "the MCP server {} did not list its resources within {:.1} s",
                        self.name,
                        self.resource_timeout.as_secs_f64()
                    )
                })?
                .map_err(|error| {
                    format!(
                        "the MCP server {} did not list its resources: {error}",
                        self.name
                    )
                })?;
            resources.extend(
                page.resources
                    .iter()
                    .take(MAX_RESOURCES.saturating_sub(resources.len()))
                    .filter_map(|resource| serde_json::to_value(resource).ok()),
            );
            match page.next_cursor {
                Some(next) if resources.len() < MAX_RESOURCES => cursor = Some(next),
                _ => break,
            }
        }
        Ok(resources)
    }

    /// A handle to send requests with, taken without holding the server's state while they
    /// wait (a slow request must not queue every other call behind it).
    async fn peer(&self) -> Result<rmcp::Peer<rmcp::RoleClient>, String> {
        let state = self.state.lock().await;
        match &state.client {
            Some(client) => Ok(client.peer().clone()),
            None => Err(format!("the MCP server {} is not connected", self.name)),
        }
    }

    /// The contents of the resource `uri`, as MCP's wire shape (`{contents: [{uri,
    /// mimeType, text | blob}]}`).
    ///
    /// # Errors
    ///
    /// A message for the model: the server is gone, or the request failed.
    pub async fn read_resource(&self, uri: &str) -> Result<serde_json::Value, String> {
        let peer = self.peer().await?;
        let request =
            peer.read_resource(rmcp::model::ReadResourceRequestParams::new(uri.to_owned()));
        let result = tokio::time::timeout(self.resource_timeout, request)
            .await
            .map_err(|_| {
                format!(
                    "the MCP server {} did not read {uri} within {:.1} s",
                    self.name,
                    self.resource_timeout.as_secs_f64()
                )
            })?
            .map_err(|error| format!("the MCP server {} did not read {uri}: {error}", self.name))?;
        serde_json::to_value(&result).map_err(|error| error.to_string())
    }

    /// Starts the server again, once per session.
    async fn restart(&self, state: &mut State) -> Result<(), String> {
        if state.restarted {
            return Err(format!(
                "the MCP server {} has stopped (it was already restarted once); see {}",
                self.name,
                self.where_to_look()
            ));
        }
        state.restarted = true;
        tracing::warn!(server = %self.name, "restarting a stopped MCP server");
        self.start(state)
            .await
            .map_err(|error| format!("the MCP server stopped and could not be restarted: {error}"))
    }

    async fn call_once(
        &self,
        state: &State,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, String> {
        let Some(client) = &state.client else {
            return Err(format!("the MCP server {} is not connected", self.name));
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        client
            .peer()
            .call_tool(params)
            .await
            .map_err(|error| format!("the MCP server {} failed the call: {error}", self.name))
    }
}

impl State {
    /// Whether the connection is open and, for a stdio server, its process still running.
    fn alive(&mut self) -> bool {
        let connected = self
            .client
            .as_ref()
            .is_some_and(|client| !client.is_closed());
        connected
            && self
                .child
                .as_mut()
                .is_none_or(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Whether the server went away within `wait`: its process exited (stdio) or its
    /// connection closed (HTTP).
    async fn exited_within(&mut self, wait: Duration) -> bool {
        match self.child.as_mut() {
            Some(child) => tokio::time::timeout(wait, child.wait()).await.is_ok(),
            None => {
                tokio::time::sleep(Duration::from_millis(50).min(wait)).await;
                self.client.as_ref().is_none_or(|client| client.is_closed())
            }
        }
    }
}

impl Drop for State {
    fn drop(&mut self) {
        if let Some(child) = &self.child
            && let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok())
        {
            let _ = nix_kill_group(pid);
        }
    }
}

/// SIGKILLs the process group it names when dropped, unless emptied first.
struct GroupOnDrop(Option<i32>);

impl Drop for GroupOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = nix_kill_group(pid);
        }
    }
}

/// SIGKILLs the process group `pid` leads (made with `process_group(0)`: its id is the
/// child's pid), so what the server started goes with it.
fn nix_kill_group(pid: i32) -> nix::Result<()> {
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
}

async fn kill_group(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        let _ = nix_kill_group(pid);
    }
    let _ = child.kill().await;
}

/// What a failed handshake with a remote server means for the user: the HTTP failure at
/// the bottom of rmcp's error (a refused connection, a 401 asking for OAuth, a status).
fn handshake_failure(error: &rmcp::service::ClientInitializeError, authorized: bool) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    type HttpFailure = StreamableHttpError<crate::http::HttpError>;
    let rmcp::service::ClientInitializeError::TransportError { error: dynamic, .. } = error else {
        return format!("the MCP handshake failed: {error}");
    };
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(dynamic.error.as_ref());
    while let Some(error) = current {
        let found = error.downcast_ref::<HttpFailure>().or_else(|| {
            match error.downcast_ref::<rmcp::transport::worker::WorkerQuitReason<HttpFailure>>() {
                Some(rmcp::transport::worker::WorkerQuitReason::Fatal { error, .. }) => Some(error),
                _ => None,
            }
        });
        match found {
            Some(StreamableHttpError::AuthRequired(_)) if authorized => {
                return "the server refused the configured Authorization header (HTTP 401): check the token".to_owned();
            }
            Some(StreamableHttpError::AuthRequired(_)) => {
                return "the server asks for authorization: OAuth is not supported yet; give it a token in the server's \"headers\" (for example {\"Authorization\": \"Bearer ${TOKEN}\"})".to_owned();
            }
            Some(StreamableHttpError::Client(client)) => {
                return format!("could not reach it: {}", chain(client));
            }
            Some(other) => return format!("the MCP handshake failed: {}", chain(other)),
            None => current = error.source(),
        }
    }
    format!(
        "the MCP handshake failed: {}",
        chain(dynamic.error.as_ref())
    )
}

/// An error and its causes, `: `-separated (hyper's "client error (Connect)" says why only
/// in its source).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
