//! Where a session's MCP servers are configured beside the settings: the user's
//! `~/.config/agent/mcp.json` (user servers, and each folder's local ones under
//! `projects.<folder>.mcpServers`) and the project's `.mcp.json`, read and edited as `claude mcp`
//! edits them, and the time limits their start-up and calls run under.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Map, Value, json};

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
    // Claude Code's own file, as Claude Code reads it (a broken one is named by the run).
    let claude = crate::claude_code::State::read(&|_| {});
    push("user", &claude.path, claude.document.get("mcpServers"));
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
    if let Some(local) = claude.local_servers(cwd) {
        push("local", &claude.path, local.get("mcpServers"));
    }
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

/// The limits from the environment and the setting `mcpStartupWaitMs` (see [`McpLimits`]);
/// a `MCP_TOOL_TIMEOUT` that is no number is told of to `notices`.
pub fn mcp_limits(
    setting_wait: Option<u64>,
    headless: bool,
    notices: &crate::Notices,
) -> McpLimits {
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
                    notices.say(&format!(
                        "warning: MCP_TOOL_TIMEOUT={} is not a positive number of milliseconds; MCP calls are limited to the default {} ms",
                        render::printable(&value, false),
                        mcp::DEFAULT_TOOL_TIMEOUT.as_millis()
                    ));
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

/// Where an MCP server's configuration is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The user's, for one folder only (`~/.config/agent/mcp.json`, keyed by the folder).
    Local,
    /// The project's `.mcp.json`, shared with everyone working in it (started only where
    /// the folder is trusted).
    Project,
    /// The user's, in every folder (`~/.config/agent/mcp.json`).
    User,
}

impl Scope {
    /// `local`, `project` or `user`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Project => "project",
            Self::User => "user",
        }
    }
}

/// Adds (or replaces) the server `name` of `scope` for the folder `cwd`, as `claude mcp add`
/// does; a project's server is recorded as trusted (the user added it). Returns the file
/// written and whether an entry of that name was replaced.
///
/// # Errors
///
/// A name that is not one word, a server entry Claude Code's rules refuse, or a file that
/// cannot be read or written, each named.
pub fn add_server(
    scope: Scope,
    name: &str,
    server: &Value,
    cwd: &Path,
    notices: &crate::Notices,
) -> anyhow::Result<(PathBuf, bool)> {
    if name.is_empty() || name.contains(char::is_whitespace) {
        anyhow::bail!("the server's name {name:?} must be a non-empty word");
    }
    let (path, private) = file_of(scope, cwd)?;
    validate(name, server, &path)?;
    let mut document = read_json(&path)?;
    let servers = servers_mut(&mut document, scope, cwd);
    let replaced = servers.insert(name.to_owned(), server.clone()).is_some();
    write_json(&path, &document, private)?;
    // The user's own server is no change for folder trust to ask about.
    if scope == Scope::Project
        && let Err(error) = crate::trust::record_mcp_server(cwd, name, server)
    {
        notices.say(&format!(
            "warning: the server is not recorded as trusted, so the next session may ask about it: {error:#}"
        ));
    }
    Ok((path, replaced))
}

/// Removes the server `name` from `scope`, or from the first of local, project and user
/// that has one; returns the scope and the file it was removed from, `None` when none had it.
///
/// # Errors
///
/// A file that cannot be read or written, named.
pub fn remove_server(
    scope: Option<Scope>,
    name: &str,
    cwd: &Path,
) -> anyhow::Result<Option<(Scope, PathBuf)>> {
    let scopes = match scope {
        Some(scope) => vec![scope],
        None => vec![Scope::Local, Scope::Project, Scope::User],
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
            return Ok(Some((scope, path)));
        }
    }
    Ok(None)
}

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
    scope: Scope,
    cwd: &Path,
) -> &'a mut Map<String, Value> {
    if !document.is_object() {
        *document = json!({});
    }
    let mut node = document;
    if scope == Scope::Local {
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
fn file_of(scope: Scope, cwd: &Path) -> anyhow::Result<(PathBuf, bool)> {
    Ok(match scope {
        Scope::Project => (cwd.join(".mcp.json"), false),
        Scope::Local | Scope::User => (
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

/// Whether the folder of `cwd` is trusted without asking (`--trust`, `AGENT_TRUST`, the
/// user's `trustedFolders`, a remembered answer) with the configuration it was trusted with
/// (see `trust::standing`; a changed one is named in a warning): `mcp list` never asks and
/// records nothing.
///
/// # Errors
///
/// Settings or a trust record that cannot be read, named.
pub fn folder_trusted(cwd: &Path, flag: bool, notices: &crate::Notices) -> anyhow::Result<bool> {
    use crate::trust::Standing;
    let folder = crate::settings::project_folder(cwd);
    let file = crate::settings::user_settings_file().unwrap_or_default();
    let layers = crate::settings::load(cwd)?;
    let entries = crate::settings::agent_user_layer(&layers)
        .map(|layer| layer.settings.trusted_folders.clone())
        .unwrap_or_default();
    let items = crate::trust::items(cwd, &layers, &crate::commands::project_commands(cwd));
    Ok(
        match crate::trust::standing(
            &folder,
            cwd,
            &crate::trust::Grants {
                flag,
                setting_entries: &entries,
                settings_file: &file,
                claude: &crate::claude_code::State::read(&|line| notices.say(line)),
            },
            &items,
            notices,
        )? {
            Standing::Trusted(_) | Standing::Unrecorded(_) => true,
            Standing::Changed(change) => {
                notices.say(&format!(
                    "warning: {}",
                    crate::trust::changed_warning(&folder, cwd, &change)
                ));
                false
            }
            Standing::Untrusted => false,
        },
    )
}
