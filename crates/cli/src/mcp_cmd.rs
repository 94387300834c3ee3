//! `agent mcp add|add-json|list|get|remove`: MCP server configuration, as `claude mcp`
//! manages it.
//!
//! Where servers are kept:
//! - local (default): `~/.config/agent/mcp.json` under `projects.<folder>.mcpServers`, where
//!   the folder is this repository's root (or the working directory outside git);
//! - project: `.mcp.json` in the working directory (shared; started only in a trusted
//!   folder);
//! - user: `~/.config/agent/mcp.json` under `mcpServers` (every folder).
//!
//! `mcpServers` in `~/.config/agent/settings.json` counts as user scope too (read, never
//! written here).

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use session::mcp_config::{self, configured};

use crate::args::{McpAction, McpScope};

/// Runs `agent mcp ACTION` (in `-C`'s folder); returns the exit code.
///
/// # Errors
///
/// Bad input (named), or a file that cannot be read or written.
pub async fn run(action: &McpAction, args: &crate::args::Args) -> anyhow::Result<u8> {
    let (cwd, trust_flag) = (&crate::working_dir(args)?, args.trust);
    match action {
        McpAction::Add {
            scope,
            transport,
            env,
            headers,
            name,
            command,
        } => {
            let server = match transport.as_str() {
                "stdio" => {
                    let mut map = Map::new();
                    for pair in env {
                        let Some((key, value)) = pair.split_once('=') else {
                            bail!("--env {pair:?}: expected KEY=VALUE");
                        };
                        map.insert(key.to_owned(), Value::String(value.to_owned()));
                    }
                    let mut server = json!({"command": command[0], "args": command[1..]});
                    if !map.is_empty() {
                        server["env"] = Value::Object(map);
                    }
                    server
                }
                "http" => {
                    // Claude Code's order works too: `add --transport http NAME URL --header H`.
                    let (url, after) = command
                        .split_first()
                        .context("an http server takes a URL")?;
                    let mut headers = headers.clone();
                    let mut rest = after.iter();
                    while let Some(arg) = rest.next() {
                        match arg.as_str() {
                            "--header" | "-H" => headers.push(
                                rest.next()
                                    .with_context(|| format!("{arg} needs a value"))?
                                    .clone(),
                            ),
                            other => match other.strip_prefix("--header=") {
                                Some(header) => headers.push(header.to_owned()),
                                None => bail!(
                                    "an http server takes one URL and --header options, got {other:?} after {url}"
                                ),
                            },
                        }
                    }
                    let mut map = Map::new();
                    for header in &headers {
                        let Some((key, value)) = header.split_once(':') else {
                            bail!("--header {header:?}: expected \"Name: value\"");
                        };
                        map.insert(
                            key.trim().to_owned(),
                            Value::String(value.trim().to_owned()),
                        );
                    }
                    let mut server = json!({"type": "http", "url": url});
                    if !map.is_empty() {
                        server["headers"] = Value::Object(map);
                    }
                    server
                }
                other => bail!("--transport {other:?}: expected stdio or http"),
            };
            add(*scope, name, server, cwd)
        }
        McpAction::AddJson { scope, name, json } => {
            let server: Value = serde_json::from_str(json)
                .with_context(|| format!("the server's JSON {json:?}"))?;
            add(*scope, name, server, cwd)
        }
        McpAction::Remove { scope, name } => remove(*scope, name, cwd),
        McpAction::Get { name } => {
            let found = configured(cwd)?;
            let Some((scope, path, name, server)) =
                found.into_iter().find(|(_, _, server, _)| server == name)
            else {
                bail!("no MCP server named {name:?} for {}", cwd.display());
            };
            println!("{name} ({scope}, {}):", path.display());
            println!("{}", serde_json::to_string_pretty(&server)?);
            Ok(0)
        }
        McpAction::List => list(cwd, trust_flag).await,
        McpAction::Serve => serve(args).await,
    }
}

fn add(scope: McpScope, name: &str, server: Value, cwd: &Path) -> anyhow::Result<u8> {
    let (path, replaced) = mcp_config::add_server(
        scope.into(),
        name,
        &server,
        cwd,
        &session::Notices::stderr(),
    )?;
    println!(
        "{} MCP server {name} ({}) in {}",
        if replaced { "Replaced" } else { "Added" },
        mcp_config::Scope::from(scope).name(),
        path.display()
    );
    Ok(0)
}

fn remove(scope: Option<McpScope>, name: &str, cwd: &Path) -> anyhow::Result<u8> {
    let Some((scope, path)) = mcp_config::remove_server(scope.map(Into::into), name, cwd)? else {
        bail!("no MCP server named {name:?} to remove")
    };
    println!(
        "Removed MCP server {name} ({}) from {}",
        scope.name(),
        path.display()
    );
    Ok(0)
}

/// Lists the servers and starts each once to say whether it works; a project's servers
/// only where the folder is trusted (they are programs the repository names).
async fn list(cwd: &Path, trust_flag: bool) -> anyhow::Result<u8> {
    let found = configured(cwd)?;
    let trusted = mcp_config::folder_trusted(cwd, trust_flag, &session::Notices::stderr())?;
    if found.is_empty() {
        println!(
            "No MCP servers configured. Add one with `agent mcp add NAME -- COMMAND ARGS...`."
        );
        return Ok(0);
    }
    let lookup = |name: &str| std::env::var(name).ok();
    let mut servers = Vec::new();
    for (scope, path, name, server) in &found {
        if *scope == "project" && !trusted {
            continue;
        }
        match mcp::config::servers(&json!({"mcpServers": {name: server}}), path, &lookup) {
            Ok(mut list) => servers.append(&mut list),
            Err(error) => println!(
                "{}: {}",
                render::printable(name, false),
                render::printable(&error.to_string(), false)
            ),
        }
    }
    // Kept after the listing: a failure names its server's stderr log.
    let logs = session::transcript::project_dir(cwd)?.join("mcp-logs");
    let notices = session::Notices::stderr();
    let startup = session::mcp_config::mcp_limits(None, true, &notices).startup;
    let mut options = mcp::Options::new(logs, startup);
    options.guard = std::env::current_exe().ok();
    if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
        options.extra_roots_pem = std::sync::Arc::from(
            std::fs::read(&path)
                .with_context(|| format!("SSL_CERT_FILE {}", path.to_string_lossy()))?,
        );
    }
    let connected = mcp::connect_all(servers, &options).await;
    for (scope, _, name, server) in &found {
        let what = match server.get("url").and_then(Value::as_str) {
            Some(url) => url.to_owned(),
            None => std::iter::once(
                server
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
            .chain(
                server
                    .get("args")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            )
            .collect::<Vec<_>>()
            .join(" "),
        };
        let status = match connected.iter().find(|server| &server.name == name) {
            Some(server) => match &server.status {
                mcp::Status::Connected => format!("connected, {} tools", server.tools.len()),
                mcp::Status::Failed(reason) => format!("failed: {reason}"),
                mcp::Status::Pending => "pending".to_owned(),
            },
            None if *scope == "project" && !trusted => {
                "not started: the folder is not trusted (--trust or AGENT_TRUST=1 starts it)"
                    .to_owned()
            }
            None => "not started".to_owned(),
        };
        let note = if *scope == "project" && trusted {
            " (runs only where the folder is trusted)"
        } else {
            ""
        };
        println!(
            "{}: {} ({scope}){note} - {}",
            render::printable(name, false),
            render::printable(&what, false),
            render::printable(&status, false)
        );
    }
    Ok(0)
}

/// The tools `agent mcp serve` offers: the ones that need no model.
const SERVED: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "Bash",
    "NotebookEdit",
];

/// `agent mcp serve`: the tools of a headless session in this folder (its settings, rules
/// and sandbox, the flags before `mcp`) as an MCP server on stdio, until the client goes.
///
/// # Errors
///
/// Bad settings or flags, or the MCP handshake failing.
async fn serve(args: &crate::args::Args) -> anyhow::Result<u8> {
    let mut options = args.session_options();
    options.tools_only = true;
    let mut session = session::Session::open(&options, None, None)?;
    let server = session.tool_server(SERVED, ("agent", env!("CARGO_PKG_VERSION")))?;
    server.serve_stdio().await?;
    Ok(0)
}
