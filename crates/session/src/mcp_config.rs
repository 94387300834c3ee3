//! Where a session's MCP servers are configured beside the settings: the user's
//! `~/.config/agent/mcp.json` (user servers, and each folder's local ones under
//! `projects.<folder>.mcpServers`), and the time limits their start-up and calls run under.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

/// The user's MCP file, `~/.config/agent/mcp.json`.
pub fn user_file() -> Option<PathBuf> {
    dirs::config_dir().map(|config| config.join("agent").join("mcp.json"))
}

/// The key of `cwd` among the local servers (its canonical folder, as folder trust keys it).
pub fn local_key(cwd: &Path) -> String {
    crate::settings::project_folder(cwd)
        .to_string_lossy()
        .into_owned()
}

/// The JSON document of `path`; `{}` when there is no such file.
///
/// # Errors
///
/// A file that cannot be read or is not JSON, naming it.
pub fn read_json(path: &Path) -> anyhow::Result<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(json!({})),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// The servers of `cwd` by scope, each `(scope name, file, name, entry)`.
pub fn configured(cwd: &Path) -> anyhow::Result<Vec<(&'static str, PathBuf, String, Value)>> {
    let mut found = Vec::new();
    let mut push = |scope: &'static str, path: &Path, servers: Option<&Value>| {
        for (name, server) in servers.and_then(Value::as_object).into_iter().flatten() {
            found.push((scope, path.to_path_buf(), name.clone(), server.clone()));
        }
    };
    if let Some(settings) = crate::settings::user_settings_file() {
        let document = read_json(&settings)?;
        push("user", &settings, document.get("mcpServers"));
    }
    if let Some(user) = user_file() {
        let document = read_json(&user)?;
        push("user", &user, document.get("mcpServers"));
        push(
            "local",
            &user,
            document
                .get("projects")
                .and_then(|projects| projects.get(local_key(cwd)))
                .and_then(|project| project.get("mcpServers")),
        );
    }
    let project = cwd.join(".mcp.json");
    let document = read_json(&project)?;
    push("project", &project, document.get("mcpServers"));
    Ok(found)
}

/// The user-level servers for a run: `~/.config/agent/mcp.json`'s user servers, then this
/// folder's local ones (the session adds settings', the project's and `--mcp-config`).
///
/// # Errors
///
/// A configuration that cannot be used, naming the file and server.
pub fn user_servers(
    cwd: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Vec<Vec<mcp::config::Configured>>> {
    let Some(user) = user_file() else {
        return Ok(Vec::new());
    };
    let document = read_json(&user)?;
    let mut lists = vec![mcp::config::servers(&document, &user, lookup)?];
    if let Some(local) = document
        .get("projects")
        .and_then(|projects| projects.get(local_key(cwd)))
    {
        lists.push(mcp::config::servers(local, &user, lookup)?);
    }
    Ok(lists)
}

/// MCP's time limits: `MCP_TIMEOUT` (start-up, default 10 s), `MCP_TOOL_TIMEOUT` (each
/// call; default [`mcp::DEFAULT_TOOL_TIMEOUT`], 10 minutes; a value that is not a positive
/// number is warned about and the default used), and how long the first request waits for
/// servers still starting (`MCP_STARTUP_WAIT_MS`, else the setting `mcpStartupWaitMs`,
/// default 2 s in a terminal and the whole start-up limit headless, where no later prompt
/// would let a late server's tools join), all in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct McpLimits {
    /// How long a server may take to start.
    pub startup: std::time::Duration,
    /// How long one tool call may take.
    pub tool_timeout: std::time::Duration,
    /// How long the first request waits for servers still starting.
    pub grace: std::time::Duration,
}

/// The limits from the environment and the setting `mcpStartupWaitMs` (see [`McpLimits`]).
pub fn mcp_limits(setting_wait: Option<u64>, headless: bool) -> McpLimits {
    let millis = |key: &str| {
        std::env::var(key)
            .ok()
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(std::time::Duration::from_millis)
    };
    let startup = millis("MCP_TIMEOUT").unwrap_or(std::time::Duration::from_secs(10));
    McpLimits {
        startup,
        tool_timeout: match std::env::var("MCP_TOOL_TIMEOUT") {
            Err(_) => mcp::DEFAULT_TOOL_TIMEOUT,
            Ok(value) => match value.trim().parse::<u64>() {
                Ok(ms) if ms > 0 => std::time::Duration::from_millis(ms),
                _ => {
                    eprintln!(
                        "agent: warning: MCP_TOOL_TIMEOUT={} is not a positive number of milliseconds; MCP calls are limited to the default {} ms",
                        render::printable(&value, false),
                        mcp::DEFAULT_TOOL_TIMEOUT.as_millis()
                    );
                    mcp::DEFAULT_TOOL_TIMEOUT
                }
            },
        },
        grace: millis("MCP_STARTUP_WAIT_MS")
            .or(setting_wait.map(std::time::Duration::from_millis))
            .unwrap_or(if headless {
                startup
            } else {
                std::time::Duration::from_secs(2)
            }),
    }
}
