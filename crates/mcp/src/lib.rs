//! Model Context Protocol servers as tools: what a user configured for Claude Code (a
//! project's `.mcp.json`, `mcpServers` in settings, `--mcp-config`) becomes tools the
//! executor runs, named `mcp__<server>__<tool>`.
//!
//! - [`config`]: the configuration in Claude Code's shapes, with `${VAR}` expansion.
//! - [`Server`]: a connected server: stdio (rmcp's client over a child process in its own
//!   process group, its stderr in a log file, its environment only the MCP SDK's default
//!   variables and its configuration's `env`: [`sandbox::env::mcp_server_env`]) or streamable HTTP ([`http::HyperClient`],
//!   rmcp's transport on hyper + rustls), restarted or reconnected once if it goes away.
//! - [`McpTool`]: one of its tools as an `executor::Tool`; results (text, images, embedded
//!   resources) become tool_result content, `isError` an error result.
//! - [`serve::ToolServer`]: the other direction, executor tools served over stdio.
//! - [`connect_all`]: every server at once, each within the start-up limit; [`Pool`]: the
//!   same in the background, so a run waits for them only a short grace period.
//!
//! A server's `notifications/tools/list_changed` makes the client list its tools again;
//! [`Pool::tools`] shows the new list. A call without an answer within
//! [`Options::tool_timeout`] (`MCP_TOOL_TIMEOUT`, default [`DEFAULT_TOOL_TIMEOUT`]) is
//! cancelled with an error naming the server, the tool and the limit ([`CallTimedOut`]); a
//! server flooding the client with requests or notifications is held to bounded memory
//! ([`flood`]). Not yet: OAuth for remote servers (a server that asks
//! for it is reported as failed; a static `Authorization` header in the configuration works).
//!
//! A server configured as Claude Code's `.mcp.json` writes it, connected, its tools listed
//! under their `mcp__` names and one called (against `testkit`'s scripted server):
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = testkit::mcp::McpHttpServer::start(0, None).await?;
//! let file = serde_json::json!({"mcpServers": {"notes": {"type": "http", "url": server.url()}}});
//! let configured = mcp::config::servers(&file, ".mcp.json".as_ref(), &|_| None)?;
//! let options = mcp::Options::new(std::env::temp_dir(), Duration::from_secs(10));
//! let connected = mcp::connect_all(configured, &options).await;
//! assert!(matches!(connected[0].status, mcp::Status::Connected));
//! let echo = connected[0]
//!     .tools
//!     .iter()
//!     .find(|tool| tool.name() == "mcp__notes__echo")
//!     .expect("the server's echo tool");
//! let workspace = Arc::new(executor::Workspace::default());
//! let context = executor::ToolContext::detached("toolu_1".into(), workspace);
//! let output = echo.call(serde_json::json!({"text": "hello"}), context).await?;
//! assert!(!output.is_error);
//! println!("{:?}", output.content);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod config;
pub mod flood;
pub mod guard;
pub mod http;
pub mod image;
mod names;
pub mod resources;
pub mod serve;
mod server;
mod tool;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use names::{MAX_TOOL_NAME, server_prefix, tool_name, tool_names};
pub use server::{
    ListedTool, MAX_RESOURCE_PAGES, MAX_RESOURCES, MAX_TOOLS, RESOURCE_TIMEOUT, Server, ServerError,
};
pub use tool::{CallTimedOut, McpTool, content_of};

/// The limit of one tool call when `MCP_TOOL_TIMEOUT` does not set one: 10 minutes, the
/// longest a Bash command may run (its `timeout` parameter's maximum, as in Claude Code).
/// Claude Code's own default is about 28 hours (100,000,000 ms), which in practice means a
/// server that never answers hangs a headless run; a call that needs longer can be given it
/// with `MCP_TOOL_TIMEOUT` (milliseconds).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(600);

/// How servers are started and called.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where each stdio server's stderr goes (`<log_dir>/<server>.log`).
    pub log_dir: PathBuf,
    /// How long a server has to start and list its tools (`MCP_TIMEOUT`).
    pub startup: Duration,
    /// The limit of each tool call (`MCP_TOOL_TIMEOUT`; [`DEFAULT_TOOL_TIMEOUT`] unless
    /// set): a call without an answer by then is cancelled and the model gets an error
    /// naming the server, the tool and the limit.
    pub tool_timeout: Duration,
    /// Root certificates (PEM) trusted for HTTPS servers beside the webpki roots; empty for
    /// none.
    pub extra_roots_pem: Arc<[u8]>,
    /// A program that runs [`guard::guard_main`] when its first argument is
    /// [`guard::GUARD_ARG`] (the embedding binary itself): stdio servers are started through
    /// it so they die with this process even when it is SIGKILLed. `None` starts them
    /// directly (they then outlive a SIGKILL).
    pub guard: Option<PathBuf>,
    /// The folder stdio servers start in; `None`: this process's. A server started in a
    /// folder runs what the folder holds when it looks there (`python3 -m NAME` imports the
    /// folder's `NAME`, `npx` reads its `.npmrc`): an embedding program starts them
    /// elsewhere in a folder it does not trust.
    pub cwd: Option<PathBuf>,
    /// The program embedding the agent, which serves the [`config::ServerConfig::Host`]
    /// servers; `None`: such servers fail.
    pub host: Option<Arc<dyn HostServers>>,
}

/// A program embedding the agent that serves MCP servers itself (the Agent SDK's
/// in-process servers, reached through its control channel).
pub trait HostServers: Send + Sync + std::fmt::Debug {
    /// A connection to the server `name`: newline-delimited JSON-RPC both ways over the
    /// returned stream, as over a stdio server's pipes.
    ///
    /// # Errors
    ///
    /// Why the server cannot be reached (the program did not declare it).
    fn open(&self, name: &str) -> Result<tokio::io::DuplexStream, String>;
}

impl Options {
    /// Logs in `log_dir`, `startup` to start, calls limited to [`DEFAULT_TOOL_TIMEOUT`],
    /// webpki roots only.
    pub fn new(log_dir: impl Into<PathBuf>, startup: Duration) -> Self {
        Self {
            log_dir: log_dir.into(),
            startup,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            extra_roots_pem: Arc::from(Vec::new()),
            guard: None,
            cwd: None,
            host: None,
        }
    }
}

/// A server's state, as `system/init` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Connected, with its tools.
    Connected,
    /// Still starting when the run began.
    Pending,
    /// Could not be used (the message says why).
    Failed(String),
}

impl Status {
    /// Claude Code's name: `connected`, `pending`, `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Pending => "pending",
            Self::Failed(_) => "failed",
        }
    }
}

/// The outcome of connecting one server.
pub struct Connected {
    /// The server's name.
    pub name: String,
    /// Its state.
    pub status: Status,
    /// Its tools when it connected (empty unless connected).
    pub tools: Vec<Arc<dyn executor::Tool>>,
    /// The server, when connected (its tool list may change later: [`Server::listed`]).
    pub server: Option<Arc<Server>>,
    /// The limit of each call.
    pub tool_timeout: Duration,
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("name", &self.name)
            .field("status", &self.status)
            .field("tools", &self.tools.len())
            .finish()
    }
}

/// The tools of `server` as executor tools, with distinct names.
fn tools_of(
    server: &Arc<Server>,
    listed: Vec<ListedTool>,
    timeout: Duration,
) -> Vec<Arc<dyn executor::Tool>> {
    let names = names::tool_names(&server.name, listed.iter().map(|tool| tool.name.as_str()));
    listed
        .into_iter()
        .zip(names)
        .map(|(tool, name)| {
            Arc::new(McpTool::named(Arc::clone(server), tool, timeout, name))
                as Arc<dyn executor::Tool>
        })
        .collect()
}

/// Connects every server in parallel; a server not ready within `options.startup` is
/// failed with a timeout.
pub async fn connect_all(servers: Vec<config::Configured>, options: &Options) -> Vec<Connected> {
    let tool_timeout = options.tool_timeout;
    let tasks: Vec<_> = servers
        .into_iter()
        .map(|configured| {
            let options = options.clone();
            tokio::spawn(async move {
                let name = configured.name.clone();
                match Server::connect(configured, &options).await {
                    Ok((server, listed)) => Connected {
                        name,
                        status: Status::Connected,
                        tools: tools_of(&server, listed, tool_timeout),
                        server: Some(server),
                        tool_timeout,
                    },
                    Err(error) => Connected {
                        name,
                        status: Status::Failed(error.to_string()),
                        tools: Vec::new(),
                        server: None,
                        tool_timeout,
                    },
                }
            })
        })
        .collect();
    let mut connected = Vec::with_capacity(tasks.len());
    for task in tasks {
        if let Ok(result) = task.await {
            connected.push(result);
        }
    }
    connected
}

/// Servers connecting in the background: a run starts when they are ready or after a grace
/// period, whichever comes first; servers still starting are `pending` and their tools join
/// when they are ready (the next time the caller asks).
#[derive(Debug)]
pub struct Pool {
    entries: std::sync::Mutex<Vec<(String, Option<Connected>)>>,
    changed: tokio::sync::Notify,
}

impl Pool {
    /// Starts connecting every server of `servers` (see [`connect_all`] for the limits).
    pub fn start(servers: Vec<config::Configured>, options: &Options) -> Arc<Self> {
        let pool = Arc::new(Self {
            entries: std::sync::Mutex::new(
                servers
                    .iter()
                    .map(|server| (server.name.clone(), None))
                    .collect(),
            ),
            changed: tokio::sync::Notify::new(),
        });
        for (index, server) in servers.into_iter().enumerate() {
            let pool = Arc::clone(&pool);
            let options = options.clone();
            tokio::spawn(async move {
                let mut connected = connect_all(vec![server], &options).await;
                if let Some(connected) = connected.pop() {
                    pool.entries
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[index]
                        .1 = Some(connected);
                    pool.changed.notify_waiters();
                }
            });
        }
        pool
    }

    /// Waits until every server is connected or failed, or `grace` has passed.
    pub async fn settle(&self, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let notified = self.changed.notified();
            if self.pending() == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    fn pending(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(_, connected)| connected.is_none())
            .count()
    }

    /// Each server's name and state, in configuration order.
    pub fn status(&self) -> Vec<(String, Status)> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(name, connected)| {
                let status = connected
                    .as_ref()
                    .map_or(Status::Pending, |connected| connected.status.clone());
                (name.clone(), status)
            })
            .collect()
    }

    /// The tools every connected server lists now (a server's
    /// `notifications/tools/list_changed` shows here).
    pub fn tools(&self) -> Vec<Arc<dyn executor::Tool>> {
        let mut seen = std::collections::HashSet::new();
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(|(_, connected)| connected.as_ref())
            .filter_map(|connected| Some((connected.server.clone()?, connected.tool_timeout)))
            .flat_map(|(server, timeout)| tools_of(&server, server.listed(), timeout))
            // Two servers whose names sanitize alike (`a.b`, `a_b`): the first keeps them.
            .filter(|tool| seen.insert(tool.name().to_owned()))
            .collect()
    }

    /// The servers connected now, in configuration order.
    pub fn connected(&self) -> Vec<Arc<Server>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter_map(|(_, connected)| connected.as_ref()?.server.clone())
            .collect()
    }
}
