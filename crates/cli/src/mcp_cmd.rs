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

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use session::mcp_config::{configured, local_key, read_json, user_file};

use crate::args::{McpAction, McpScope};

/// Writes `value` to `path` whole (a temporary file renamed over it); `private` files are
/// 0600 in a 0700 folder (the user's own), others keep the usual modes (a project's file).
fn write_json(path: &Path, value: &Value, private: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = path.parent().context("the file has no folder")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(if private { 0o700 } else { 0o755 })
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let temporary = dir.join(format!(".mcp-{}.tmp", std::process::id()));
    let result = (|| {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(if private { 0o600 } else { 0o644 })
            .open(&temporary)?;
        out.write_all(serde_json::to_string_pretty(value)?.as_bytes())?;
        out.write_all(b"\n")?;
        out.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// The `mcpServers` object of `scope` inside `document`, created when missing.
fn servers_mut<'a>(
    document: &'a mut Value,
    scope: McpScope,
    cwd: &Path,
) -> &'a mut Map<String, Value> {
    if !document.is_object() {
        *document = json!({});
    }
    let mut node = document;
    if scope == McpScope::Local {
        node = entry(node, "projects");
        node = entry(node, &local_key(cwd));
    }
    let servers = entry(node, "mcpServers");
    if !servers.is_object() {
        *servers = json!({});
    }
    match servers {
        Value::Object(map) => map,
        // Made an object just above.
        _ => unreachable!("mcpServers was made an object"),
    }
}

/// `value[key]`, made an object when missing or not one.
fn entry<'a>(value: &'a mut Value, key: &str) -> &'a mut Value {
    if !value.is_object() {
        *value = json!({});
    }
    let Value::Object(map) = value else {
        unreachable!("made an object above")
    };
    let slot = map.entry(key.to_owned()).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot
}

/// The file and whether it is the user's own.
fn file_of(scope: McpScope, cwd: &Path) -> anyhow::Result<(PathBuf, bool)> {
    Ok(match scope {
        McpScope::Project => (cwd.join(".mcp.json"), false),
        McpScope::Local | McpScope::User => (
            user_file().context("no config folder (neither XDG_CONFIG_HOME nor HOME)")?,
            true,
        ),
    })
}

/// Checks a server entry with Claude Code's rules (variables may be unset yet).
fn validate(name: &str, server: &Value, path: &Path) -> anyhow::Result<()> {
    let any = |_: &str| Some(String::new());
    mcp::config::servers(&json!({"mcpServers": {name: server}}), path, &any)?;
    Ok(())
}

/// Runs `agent mcp ACTION` in `cwd`; returns the exit code.
///
/// # Errors
///
/// Bad input (named), or a file that cannot be read or written.
pub async fn run(action: &McpAction, cwd: &Path, trust_flag: bool) -> anyhow::Result<u8> {
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
    }
}

fn add(scope: McpScope, name: &str, server: Value, cwd: &Path) -> anyhow::Result<u8> {
    if name.is_empty() || name.contains(char::is_whitespace) {
        bail!("the server's name {name:?} must be a non-empty word");
    }
    let (path, private) = file_of(scope, cwd)?;
    validate(name, &server, &path)?;
    let mut document = read_json(&path)?;
    let servers = servers_mut(&mut document, scope, cwd);
    let replaced = servers.insert(name.to_owned(), server.clone()).is_some();
    write_json(&path, &document, private)?;
    // The user's own server is no change for folder trust to ask about.
    if scope == McpScope::Project
        && let Err(error) = session::trust::record_mcp_server(cwd, name, &server)
    {
        eprintln!(
            "agent: warning: the server is not recorded as trusted, so the next session may ask about it: {error:#}"
        );
    }
    println!(
        "{} MCP server {name} ({}) in {}",
        if replaced { "Replaced" } else { "Added" },
        scope_name(scope),
        path.display()
    );
    Ok(0)
}

fn remove(scope: Option<McpScope>, name: &str, cwd: &Path) -> anyhow::Result<u8> {
    let scopes = match scope {
        Some(scope) => vec![scope],
        None => vec![McpScope::Local, McpScope::Project, McpScope::User],
    };
    for scope in scopes {
        let (path, private) = file_of(scope, cwd)?;
        if !path.is_file() {
            continue;
        }
        let mut document = read_json(&path)?;
        if servers_mut(&mut document, scope, cwd)
            .remove(name)
            .is_some()
        {
            write_json(&path, &document, private)?;
            println!(
                "Removed MCP server {name} ({}) from {}",
                scope_name(scope),
                path.display()
            );
            return Ok(0);
        }
    }
    bail!("no MCP server named {name:?} to remove")
}

fn scope_name(scope: McpScope) -> &'static str {
    match scope {
        McpScope::Local => "local",
        McpScope::Project => "project",
        McpScope::User => "user",
    }
}

/// Whether the folder of `cwd` is trusted without asking (`--trust`, `AGENT_TRUST`, the
/// user's `trustedFolders`, a remembered answer) with the configuration it was trusted with
/// (see `trust::standing`; a changed one is named in a warning): `mcp list` never asks and
/// records nothing.
fn trusted(cwd: &Path, flag: bool) -> anyhow::Result<bool> {
    use session::trust::Standing;
    let folder = session::settings::project_folder(cwd);
    let file = session::settings::user_settings_file().unwrap_or_default();
    let layers = session::settings::load(cwd)?;
    let entries = session::settings::agent_user_layer(&layers)
        .map(|layer| layer.settings.trusted_folders.clone())
        .unwrap_or_default();
    let items = session::trust::items(cwd, &layers, &session::commands::project_commands(cwd));
    Ok(
        match session::trust::standing(&folder, cwd, flag, &entries, &file, &items)? {
            Standing::Trusted(_) | Standing::Unrecorded(_) => true,
            Standing::Changed(change) => {
                eprintln!(
                    "agent: warning: {}",
                    session::trust::changed_warning(&folder, cwd, &change)
                );
                false
            }
            Standing::Untrusted => false,
        },
    )
}

/// Lists the servers and starts each once to say whether it works; a project's servers
/// only where the folder is trusted (they are programs the repository names).
async fn list(cwd: &Path, trust_flag: bool) -> anyhow::Result<u8> {
    let found = configured(cwd)?;
    let trusted = trusted(cwd, trust_flag)?;
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
    let startup = session::mcp_config::mcp_limits(None, true).startup;
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
