//! One connected MCP server: a stdio child process (its own process group, killed with the
//! agent; its stderr appended to a log file, never the terminal) with rmcp's client over its
//! pipes, and the tools it lists.

use std::path::{Path, PathBuf};
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
    /// The transport is not built yet.
    #[error("{name}: streamable HTTP servers are not supported yet (only stdio servers)")]
    Unsupported {
        /// The server.
        name: String,
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

/// The client's handler: keeps the server's tool list current when it sends
/// `notifications/tools/list_changed`.
#[derive(Clone, Debug, Default)]
struct ListWatcher {
    listed: Arc<std::sync::Mutex<Vec<ListedTool>>>,
}

impl rmcp::ClientHandler for ListWatcher {
    async fn on_tool_list_changed(&self, context: rmcp::service::NotificationContext<RoleClient>) {
        match context.peer.list_all_tools().await {
            Ok(tools) => {
                *self
                    .listed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    tools.into_iter().map(listed).collect();
            }
            Err(error) => tracing::warn!(%error, "listing an MCP server's changed tools failed"),
        }
    }
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

/// A connected server; restarted once when its process died.
pub struct Server {
    /// Its configured name.
    pub name: String,
    config: Configured,
    log: PathBuf,
    startup: Duration,
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
    /// Starts `configured` and lists its tools, within `startup`. The server's stderr is
    /// appended to `log_dir/<name>.log`.
    ///
    /// # Errors
    ///
    /// [`ServerError`] naming the server: it could not start, failed the handshake or the
    /// listing, or took longer than `startup`.
    pub async fn connect(
        configured: Configured,
        log_dir: &Path,
        startup: Duration,
    ) -> Result<(Arc<Self>, Vec<ListedTool>), ServerError> {
        let log = log_dir.join(format!(
            "{}.log",
            crate::names::server_prefix(&configured.name)
        ));
        let server = Arc::new(Self {
            name: configured.name.clone(),
            config: configured,
            log,
            startup,
            state: Mutex::new(State {
                client: None,
                child: None,
                restarted: false,
            }),
            listed: Arc::default(),
        });
        let tools = {
            let mut state = server.state.lock().await;
            server.start(&mut state).await?;
            server.list(&state).await?
        };
        *server
            .listed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = tools.clone();
        Ok((server, tools))
    }

    /// (Re)starts the process and the client.
    async fn start(&self, state: &mut State) -> Result<(), ServerError> {
        if let Some(mut child) = state.child.take() {
            kill_group(&mut child).await;
        }
        state.client = None;
        let ServerConfig::Stdio { command, args, env } = &self.config.config else {
            return Err(ServerError::Unsupported {
                name: self.name.clone(),
            });
        };
        if let Some(dir) = self.log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_or_else(|_| Stdio::null(), Stdio::from);
        let mut child = tokio::process::Command::new(command)
            .args(args)
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ServerError::Spawn {
                name: self.name.clone(),
                command: command.clone(),
                source,
            })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(self.protocol("its pipes could not be opened".into()));
        };
        let watcher = ListWatcher {
            listed: Arc::clone(&self.listed),
        };
        let client = match tokio::time::timeout(self.startup, watcher.serve((stdout, stdin))).await
        {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                kill_group(&mut child).await;
                return Err(self.protocol(format!("the MCP handshake failed: {error}")));
            }
            Err(_) => {
                kill_group(&mut child).await;
                return Err(ServerError::Timeout {
                    name: self.name.clone(),
                    after: self.startup,
                });
            }
        };
        state.client = Some(client);
        state.child = Some(child);
        Ok(())
    }

    fn protocol(&self, detail: String) -> ServerError {
        ServerError::Protocol {
            name: self.name.clone(),
            detail,
            log: self.log.display().to_string(),
        }
    }

    async fn list(&self, state: &State) -> Result<Vec<ListedTool>, ServerError> {
        let Some(client) = &state.client else {
            return Err(self.protocol("not connected".into()));
        };
        let peer: &Peer<RoleClient> = client.peer();
        let tools = tokio::time::timeout(self.startup, peer.list_all_tools())
            .await
            .map_err(|_| ServerError::Timeout {
                name: self.name.clone(),
                after: self.startup,
            })?
            .map_err(|error| self.protocol(format!("listing its tools failed: {error}")))?;
        Ok(tools
            .into_iter()
            .map(|tool| ListedTool {
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
            })
            .collect())
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
                self.log.display()
            )),
            Err(error) => Err(error),
        }
    }

    /// Starts the server again, once per session.
    async fn restart(&self, state: &mut State) -> Result<(), String> {
        if state.restarted {
            return Err(format!(
                "the MCP server {} has stopped (it was already restarted once); see {}",
                self.name,
                self.log.display()
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
    /// Whether the process is still running and its connection open.
    fn alive(&mut self) -> bool {
        let connected = self
            .client
            .as_ref()
            .is_some_and(|client| !client.is_closed());
        connected
            && self
                .child
                .as_mut()
                .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Whether the process exits within `wait`.
    async fn exited_within(&mut self, wait: Duration) -> bool {
        let Some(child) = self.child.as_mut() else {
            return true;
        };
        tokio::time::timeout(wait, child.wait()).await.is_ok()
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
