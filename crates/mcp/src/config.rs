//! Server configuration in Claude Code's shapes: `{"mcpServers": {NAME: SERVER}}` where a
//! server is `{"command", "args"?, "env"?}` (stdio, `"type": "stdio"` optional) or
//! `{"type": "http", "url", "headers"?}` (streamable HTTP). Strings may use `${VAR}` and
//! `${VAR:-default}`, expanded from the environment when the configuration is read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One configured server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerConfig {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program (looked up on `PATH`, without its empty or relative entries).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment beyond the few variables every server gets
        /// ([`sandbox::env::MCP_SERVER_VARIABLES`]); nothing else of the agent's is passed.
        env: BTreeMap<String, String>,
    },
    /// A remote server over streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Extra request headers (a bearer token, an API key).
        headers: BTreeMap<String, String>,
    },
    /// A server inside the program embedding the agent (the Agent SDK's `{"type": "sdk"}`
    /// servers): reached through [`crate::Options::host`]; without one it fails, saying so.
    Host,
    /// A server whose configuration names a variable that is not set (and has no default):
    /// it is reported as failed with this message and never started, and the others run.
    Incomplete {
        /// What is missing, with the field (`headers.Authorization: ${TOKEN} is not set ...`).
        problem: String,
    },
}

/// A configured server and where it was configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configured {
    /// The server's name (the `NAME` of `mcpServers`).
    pub name: String,
    /// How to reach it.
    pub config: ServerConfig,
    /// The file it came from (a later file's server of the same name replaces it).
    pub origin: PathBuf,
}

/// A configuration that cannot be used, naming the file and the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file is not JSON or has the wrong shape.
    #[error("{path}: {problem}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the server's name.
        problem: String,
    },
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Why a string could not be expanded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// A variable is unset and has no default.
    #[error("${{{name}}} is not set and has no default")]
    Unset {
        /// The variable.
        name: String,
    },
    /// A `${` is never closed.
    #[error("`${{` without a closing `}}` in {text:?}")]
    Unclosed {
        /// The whole string.
        text: String,
    },
}

/// Expands `${VAR}` and `${VAR:-default}` in `text` with `lookup`.
///
/// # Errors
///
/// [`ExpandError`]: the first variable that is unset and has no default, or a `${` left
/// open.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unclosed {
                text: text.to_owned(),
            });
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(ExpandError::Unset {
                    name: name.to_owned(),
                });
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The servers of one configuration object (`{"mcpServers": {...}}`, from `.mcp.json`,
/// settings or `--mcp-config`), in name order.
///
/// # Errors
///
/// [`ConfigError::Invalid`] naming `origin` and the server for anything else.
pub fn servers(
    document: &Value,
    origin: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Configured>, ConfigError> {
    let invalid = |problem: String| ConfigError::Invalid {
        path: origin.to_path_buf(),
        problem,
    };
    let Some(servers) = document.get("mcpServers") else {
        return Ok(Vec::new());
    };
    let Some(servers) = servers.as_object() else {
        return Err(invalid(
            "mcpServers must be an object of servers by name".into(),
        ));
    };
    let mut found = Vec::new();
    for (name, server) in servers {
        let config = match server_config(name, server, lookup) {
            Ok(config) => config,
            Err(Problem::Unset(problem)) => ServerConfig::Incomplete { problem },
            Err(Problem::Invalid(problem)) => return Err(invalid(problem)),
        };
        found.push(Configured {
            name: name.clone(),
            config,
            origin: origin.to_path_buf(),
        });
    }
    Ok(found)
}

/// Why one server's entry cannot be used: a variable it needs is unset (the server fails,
/// the others run), or the entry is malformed (the whole file is refused).
enum Problem {
    Unset(String),
    Invalid(String),
}

/// One server's entry (`mcpServers.NAME`), expanded.
fn server_config(
    name: &str,
    server: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, Problem> {
    let invalid = Problem::Invalid;
    let expanded = |key: &str, value: &str| {
        expand(value, lookup).map_err(|error| {
            let problem = format!("mcpServers.{name}.{key}: {error}");
            match error {
                ExpandError::Unset { .. } => Problem::Unset(problem),
                ExpandError::Unclosed { .. } => Problem::Invalid(problem),
            }
        })
    };
    let field = |key: &str| server.get(key);
    let text = |key: &str| -> Result<Option<String>, Problem> {
        match field(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(value)) => expanded(key, value).map(Some),
            Some(_) => Err(invalid(format!("mcpServers.{name}.{key} must be a string"))),
        }
    };
    let map = |key: &str| -> Result<BTreeMap<String, String>, Problem> {
        let mut map = BTreeMap::new();
        match field(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                for (entry, value) in entries {
                    let Some(value) = value.as_str() else {
                        return Err(invalid(format!(
                            "mcpServers.{name}.{key}.{entry} must be a string"
                        )));
                    };
                    let value = expanded(&format!("{key}.{entry}"), value)?;
                    map.insert(entry.clone(), value);
                }
            }
            Some(_) => {
                return Err(invalid(format!(
                    "mcpServers.{name}.{key} must be an object of strings"
                )));
            }
        }
        Ok(map)
    };
    if !server.is_object() {
        return Err(invalid(format!("mcpServers.{name} must be an object")));
    }
    let kind = text("type")?;
    let config = match kind.as_deref() {
        None | Some("stdio") => {
            let Some(command) = text("command")? else {
                return Err(invalid(format!(
                    "mcpServers.{name}: a stdio server needs a \"command\" (or give \"type\": \"http\" and a \"url\")"
                )));
            };
            let args = match field("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(args)) => args
                    .iter()
                    .map(|arg| match arg {
                        Value::String(arg) => expanded("args", arg),
                        _ => Err(invalid(format!(
                            "mcpServers.{name}.args must be a list of strings"
                        ))),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => {
                    return Err(invalid(format!(
                        "mcpServers.{name}.args must be a list of strings"
                    )));
                }
            };
            ServerConfig::Stdio {
                command,
                args,
                env: map("env")?,
            }
        }
        Some("http" | "streamable-http") => {
            let Some(url) = text("url")? else {
                return Err(invalid(format!(
                    "mcpServers.{name}: an http server needs a \"url\""
                )));
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(invalid(format!(
                    "mcpServers.{name}.url must start with http:// or https://, got {url:?}"
                )));
            }
            ServerConfig::Http {
                url,
                headers: map("headers")?,
            }
        }
        Some("sdk") => ServerConfig::Host,
        Some(other) => {
            return Err(invalid(format!(
                "mcpServers.{name}.type {other:?} is not stdio, http or sdk (Claude Code's sse type is not supported)"
            )));
        }
    };
    Ok(config)
}

/// The servers of a JSON file (`.mcp.json`, `--mcp-config`).
///
/// # Errors
///
/// [`ConfigError`] naming the file.
pub fn read_file(
    path: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Configured>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let document: Value = serde_json::from_str(&text).map_err(|error| ConfigError::Invalid {
        path: path.to_path_buf(),
        problem: format!("not JSON: {error}"),
    })?;
    servers(&document, path, lookup)
}

/// `lists` merged in order: a later server of the same name replaces an earlier one.
pub fn merge(lists: impl IntoIterator<Item = Vec<Configured>>) -> Vec<Configured> {
    let mut by_name: BTreeMap<String, Configured> = BTreeMap::new();
    for list in lists {
        for server in list {
            by_name.insert(server.name.clone(), server);
        }
    }
    by_name.into_values().collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("t0k".into()),
            "HOME" => Some("/home/u".into()),
            _ => None,
        }
    }

    #[test]
    fn claude_code_configurations_parse_with_expansion() {
        let document = json!({"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server-filesystem", "${HOME}/work"], "env": {"LEVEL": "${LEVEL:-info}"}},
            "github": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        }});
        let found = servers(&document, Path::new("/p/.mcp.json"), &env).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].config,
            ServerConfig::Stdio {
                command: "npx".into(),
                args: vec![
                    "-y".into(),
                    "server-filesystem".into(),
                    "/home/u/work".into()
                ],
                env: [("LEVEL".to_owned(), "info".to_owned())].into(),
            }
        );
        assert_eq!(
            found[1].config,
            ServerConfig::Http {
                url: "https://api.example.com/mcp".into(),
                headers: [("Authorization".to_owned(), "Bearer t0k".to_owned())].into(),
            }
        );
    }

    #[test]
    fn mistakes_name_the_file_and_the_server() {
        for (document, message) in [
            (json!({"mcpServers": []}), "mcpServers must be an object"),
            (
                json!({"mcpServers": {"a": {}}}),
                "mcpServers.a: a stdio server needs a \"command\"",
            ),
            (
                json!({"mcpServers": {"a": {"command": "x", "args": "y"}}}),
                "mcpServers.a.args must be a list",
            ),
            (
                json!({"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}),
                "mcpServers.a.type \"sse\"",
            ),
            (
                json!({"mcpServers": {"a": {"type": "http", "url": "ftp://x"}}}),
                "must start with http://",
            ),
            (
                json!({"mcpServers": {"a": {"command": "${OPEN"}}}),
                "`${` without a closing `}` in \"${OPEN\"",
            ),
        ] {
            let error = servers(&document, Path::new("/p/.mcp.json"), &env)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("/p/.mcp.json: "), "{error}");
            assert!(error.contains(message), "{error}");
        }
        // An unset variable costs only its server, which is reported and never started.
        let found = servers(
            &json!({"mcpServers": {
                "a": {"type": "http", "url": "https://x", "headers": {"Authorization": "Bearer ${MISSING}"}},
                "b": {"command": "ok"},
            }}),
            Path::new("/p/.mcp.json"),
            &env,
        )
        .unwrap();
        assert_eq!(
            found[0].config,
            ServerConfig::Incomplete {
                problem:
                    "mcpServers.a.headers.Authorization: ${MISSING} is not set and has no default"
                        .into()
            }
        );
        assert!(matches!(found[1].config, ServerConfig::Stdio { .. }));
    }

    #[test]
    fn later_files_replace_servers_of_the_same_name() {
        let server = |name: &str, command: &str, origin: &str| Configured {
            name: name.into(),
            config: ServerConfig::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: BTreeMap::new(),
            },
            origin: origin.into(),
        };
        let merged = merge([
            vec![server("a", "one", "/u"), server("b", "two", "/u")],
            vec![server("a", "three", "/p")],
        ]);
        assert_eq!(
            merged,
            [server("a", "three", "/p"), server("b", "two", "/u")]
        );
    }
}
