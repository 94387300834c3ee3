//! Claude Code's own state file, `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json` when that
//! variable is set), read so that a Claude Code setup carries over: the MCP servers added with
//! `claude mcp add` in user scope (`mcpServers`) and in local scope
//! (`projects.<folder>.mcpServers`), and the folders accepted in Claude Code's trust dialog
//! (`projects.<folder>.hasTrustDialogAccepted`).
//!
//! The file is the user's, outside every sandbox root, so a project cannot write it; it is
//! only read here, never written. A file that is missing is nothing; one that is not JSON is
//! one warning and nothing.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Where Claude Code keeps its state: `$CLAUDE_CONFIG_DIR/.claude.json`, else
/// `~/.claude.json`.
pub fn file() -> Option<PathBuf> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join(".claude.json")),
        None => dirs::home_dir().map(|home| home.join(".claude.json")),
    }
}

/// Claude Code's user folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude` (its `settings.json`,
/// `CLAUDE.md`, commands, skills, agents and output styles).
pub fn user_dir() -> Option<PathBuf> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => dirs::home_dir().map(|home| home.join(".claude")),
    }
}

/// The most of `~/.claude.json` read, in bytes (64 MiB: Claude Code keeps its per-project
/// history there, so it grows, but never near this).
const MAX_BYTES: u64 = 64 << 20;

/// Claude Code's state as read at start: the document, or nothing (no file, or one that
/// could not be used, which `read` warned about once).
#[derive(Clone, Debug, Default)]
pub struct State {
    /// The file read.
    pub path: PathBuf,
    /// Its JSON document (`{}` when there is none).
    pub document: Value,
}

impl State {
    /// Reads [`file()`]; a file that cannot be read or is not a JSON object is one warning
    /// through `warn` and an empty state.
    pub fn read(warn: &dyn Fn(&str)) -> Self {
        let Some(path) = file() else {
            return Self::default();
        };
        let empty = |path: PathBuf| Self {
            path,
            document: Value::Object(serde_json::Map::new()),
        };
        let text = match std::fs::metadata(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return empty(path),
            Ok(meta) if meta.len() > MAX_BYTES => {
                warn(&format!(
                    "warning: {} has {} bytes, more than the {MAX_BYTES} read; Claude Code's MCP servers and trusted folders are not used",
                    path.display(),
                    meta.len()
                ));
                return empty(path);
            }
            _ => match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) => {
                    warn(&format!(
                        "warning: {} could not be read ({error}); Claude Code's MCP servers and trusted folders are not used",
                        path.display()
                    ));
                    return empty(path);
                }
            },
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(document @ Value::Object(_)) => Self { path, document },
            Ok(_) => {
                warn(&format!(
                    "warning: {} is not a JSON object; Claude Code's MCP servers and trusted folders are not used",
                    path.display()
                ));
                empty(path)
            }
            Err(error) => {
                warn(&format!(
                    "warning: {} is not JSON (line {}, column {}: {error}); Claude Code's MCP servers and trusted folders are not used",
                    path.display(),
                    error.line(),
                    error.column()
                ));
                empty(path)
            }
        }
    }

    /// The entry of `folder` under `projects` (Claude Code keys them by the absolute path of
    /// the folder it ran in).
    fn project(&self, folder: &Path) -> Option<&Value> {
        self.document.get("projects")?.get(folder.to_str()?)
    }

    /// The nearest folder at or above `folder` whose trust dialog was accepted in Claude Code
    /// (`hasTrustDialogAccepted: true`), as Claude Code lets a parent's trust cover the
    /// folders below it. `folder` should be canonical.
    pub fn trusted_folder(&self, folder: &Path) -> Option<PathBuf> {
        folder
            .ancestors()
            .find(|ancestor| {
                self.project(ancestor)
                    .and_then(|project| project.get("hasTrustDialogAccepted"))
                    .and_then(Value::as_bool)
                    == Some(true)
            })
            .map(Path::to_path_buf)
    }

    /// How long the prompt waits before telling the Notification hooks the agent is idle:
    /// Claude Code's `messageIdleNotifThresholdMs`, else 60 s (its default).
    pub fn idle_threshold(&self) -> std::time::Duration {
        self.document
            .get("messageIdleNotifThresholdMs")
            .and_then(Value::as_u64)
            .map_or(
                crate::IDLE_NOTIFICATION_AFTER,
                std::time::Duration::from_millis,
            )
    }

    /// Its global configuration's `preferredNotifChannel`, where versions before the
    /// setting moved to `settings.json` kept it.
    pub fn notification_channel(&self) -> Option<String> {
        self.document
            .get("preferredNotifChannel")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    /// Its global configuration's `theme` (`dark`, `light`, their `-daltonized` and `-ansi`
    /// forms, or `auto`).
    pub fn theme(&self) -> Option<String> {
        self.document
            .get("theme")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    /// The user-scope servers (`mcpServers`), as a `{"mcpServers": …}` document.
    pub fn user_servers(&self) -> Option<Value> {
        let servers = self.document.get("mcpServers")?;
        Some(serde_json::json!({ "mcpServers": servers }))
    }

    /// The local-scope servers of `cwd` (`projects.<cwd>.mcpServers`, `cwd` as given and
    /// canonical), as a `{"mcpServers": …}` document.
    pub fn local_servers(&self, cwd: &Path) -> Option<Value> {
        let canonical = cwd.canonicalize().ok();
        let servers = [Some(cwd), canonical.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|folder| self.project(folder)?.get("mcpServers"))?;
        Some(serde_json::json!({ "mcpServers": servers }))
    }
}

/// Which of a project's `.mcp.json` servers may start, as Claude Code records its answers:
/// `enabledMcpjsonServers`, `disabledMcpjsonServers` and `enableAllProjectMcpServers` in any
/// settings file, and in `~/.claude.json` under the folder (where earlier versions kept them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpjsonApprovals {
    /// `enableAllProjectMcpServers: true` somewhere.
    pub enable_all: bool,
    /// The servers named enabled, when any list names them.
    pub enabled: Option<std::collections::BTreeSet<String>>,
    /// The servers named disabled (always honoured: a refusal only narrows).
    pub disabled: std::collections::BTreeSet<String>,
}

impl McpjsonApprovals {
    /// The approvals of `sources` (settings documents, or `~/.claude.json`'s entry for the
    /// folder), merged: lists add up, `enableAllProjectMcpServers` holds if any says so.
    pub fn gather<'a>(
        sources: impl IntoIterator<Item = &'a std::collections::BTreeMap<String, Value>>,
    ) -> Self {
        let mut approvals = Self::default();
        let names = |value: Option<&Value>| -> Vec<String> {
            value
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        for source in sources {
            if source
                .get("enableAllProjectMcpServers")
                .and_then(Value::as_bool)
                == Some(true)
            {
                approvals.enable_all = true;
            }
            if let Some(list) = source.get("enabledMcpjsonServers") {
                approvals
                    .enabled
                    .get_or_insert_with(Default::default)
                    .extend(names(Some(list)));
            }
            approvals
                .disabled
                .extend(names(source.get("disabledMcpjsonServers")));
        }
        approvals
    }

    /// Whether the `.mcp.json` server `name` of a trusted folder starts: not when a list
    /// disables it; when an enabled list exists and `enableAllProjectMcpServers` is not set,
    /// only if that list names it; otherwise yes (the folder's trust approved what it showed).
    pub fn allows(&self, name: &str) -> bool {
        if self.disabled.contains(name) {
            return false;
        }
        self.enable_all
            || self
                .enabled
                .as_ref()
                .is_none_or(|enabled| enabled.contains(name))
    }

    /// The approvals `state` keeps under `cwd` (`projects.<cwd>`), as a source for
    /// [`Self::gather`] (empty when it keeps none).
    pub fn project_entry(state: &State, cwd: &Path) -> std::collections::BTreeMap<String, Value> {
        let canonical = cwd.canonicalize().ok();
        let entry = [Some(cwd), canonical.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|folder| state.project(folder)?.as_object());
        [
            "enabledMcpjsonServers",
            "disabledMcpjsonServers",
            "enableAllProjectMcpServers",
        ]
        .into_iter()
        .filter_map(|key| Some((key.to_owned(), entry?.get(key)?.clone())))
        .collect()
    }
}

/// The servers of `document` (`{"mcpServers": …}`, from `origin`), each parsed on its own: a
/// server that cannot be used (an unknown `type`, a missing `command`) is one warning
/// through `warn`, naming the file and the server, and is left out; the others start.
pub fn servers_leniently(
    document: &Value,
    origin: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
    warn: &dyn Fn(&str),
) -> Vec<mcp::config::Configured> {
    let Some(servers) = document.get("mcpServers").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (name, server) in servers {
        let one = serde_json::json!({ "mcpServers": { name.clone(): server.clone() } });
        match mcp::config::servers(&one, origin, lookup) {
            Ok(mut parsed) => found.append(&mut parsed),
            Err(error) => warn(&format!(
                "warning: the MCP server {name} of {error}; it is not started"
            )),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn trust_and_servers_are_read_by_folder() {
        let state = State {
            path: PathBuf::from("/h/.claude.json"),
            document: json!({
                "mcpServers": {"docs": {"type": "stdio", "command": "docs-server"}},
                "projects": {
                    "/work/app": {"hasTrustDialogAccepted": true,
                        "mcpServers": {"db": {"type": "stdio", "command": "db-server"}}},
                    "/work/other": {"hasTrustDialogAccepted": false},
                }
            }),
        };
        assert_eq!(
            state.trusted_folder(Path::new("/work/app/src/deep")),
            Some(PathBuf::from("/work/app"))
        );
        assert_eq!(state.trusted_folder(Path::new("/work/other")), None);
        assert_eq!(state.trusted_folder(Path::new("/work")), None);
        assert_eq!(
            state.local_servers(Path::new("/work/app")).unwrap()["mcpServers"]["db"]["command"],
            "db-server"
        );
        assert!(state.local_servers(Path::new("/work/app/src")).is_none());
        assert!(state.user_servers().unwrap()["mcpServers"]["docs"].is_object());
    }

    #[test]
    fn mcpjson_approvals_follow_claude_codes_answers() {
        let object = |value: Value| -> std::collections::BTreeMap<String, Value> {
            value
                .as_object()
                .map(|map| map.clone().into_iter().collect())
                .unwrap_or_default()
        };
        let local =
            object(json!({"enabledMcpjsonServers": ["db"], "disabledMcpjsonServers": ["shell"]}));
        let state = object(json!({"enabledMcpjsonServers": ["docs"]}));
        let approvals = McpjsonApprovals::gather([&local, &state]);
        assert!(approvals.allows("db") && approvals.allows("docs"));
        assert!(!approvals.allows("shell"), "disabled");
        assert!(!approvals.allows("other"), "not in the enabled lists");
        let all = object(json!({"enableAllProjectMcpServers": true}));
        let approvals = McpjsonApprovals::gather([&local, &all]);
        assert!(approvals.allows("other") && !approvals.allows("shell"));
        // Nothing recorded: the folder's trust approved what it showed.
        assert!(McpjsonApprovals::gather([]).allows("anything"));
    }

    #[test]
    fn a_server_that_cannot_be_used_is_left_out_with_a_warning() {
        let warnings = std::cell::RefCell::new(Vec::new());
        let document = json!({"mcpServers": {
            "good": {"type": "stdio", "command": "ok"},
            "odd": {"type": "carrier-pigeon", "command": "coo"},
        }});
        let found = servers_leniently(
            &document,
            Path::new("/h/.claude.json"),
            &|_| None,
            &|line| warnings.borrow_mut().push(line.to_owned()),
        );
        assert_eq!(
            found.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["good"]
        );
        let warnings = warnings.into_inner();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("odd") && warnings[0].contains("/h/.claude.json"),
            "{warnings:?}"
        );
    }
}
