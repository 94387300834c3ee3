//! What an "always" answer to a permission question remembers: for the rest of the session
//! the exact call ([`approval_key`]), and in the user's settings the rule it amounts to
//! ([`always_rule`]), saved only when that rule reads back as exactly that call
//! ([`rule_is_exact`]). Any front end that offers "always" uses these, so a rule saved from
//! one means the same in every other.

use std::path::Path;

use anyhow::Context as _;

/// Whether `rule` (from [`always_rule`]) reads back as exactly the call it was made for:
/// `Bash(command)` with no `*`, parenthesis or line break in the command and not ending in
/// `:*`; `Write(path)`/`Edit(path)` with no glob character; nothing else.
pub fn rule_is_exact(rule: &str) -> bool {
    let Some((tool, rest)) = rule.split_once('(') else {
        return false;
    };
    let Some(inner) = rest.strip_suffix(')') else {
        return false;
    };
    let plain = !inner.is_empty() && inner.trim() == inner && !inner.contains(['\n', '\r', '\\']);
    match tool {
        // Exact command rules also match the command with its quotes taken out, and `*`,
        // `:*` and parentheses mean something: only plain words are saved.
        "Bash" => plain && !inner.contains(['*', '(', ')', '"', '\'', '$', '`']),
        // An absolute path (as the tool resolved it) of a file, no glob character.
        "Write" | "Edit" => {
            plain
                && inner.starts_with('/')
                && !inner.ends_with('/')
                && !inner.contains(['*', '?', '[', ']', '{', '}', '!'])
                && !Path::new(inner).is_dir()
        }
        _ => false,
    }
}

/// `rule` (exact, see [`rule_is_exact`]) as a settings file must say it: a file tool's
/// absolute path with Claude Code's `//` (a single `/` is the workspace's root there);
/// Write's as Edit's (Edit rules cover both tools).
pub fn settings_rule(rule: &str) -> String {
    let Some((tool, rest)) = rule.split_once('(') else {
        return rule.to_owned();
    };
    let path = rest.strip_suffix(')').unwrap_or(rest);
    match tool {
        "Write" | "Edit" => format!("Edit(/{path})"),
        _ => rule.to_owned(),
    }
}

/// Adds `rule` to `permissions.allow` of the settings file at `path` (made, with its folder,
/// when missing), keeping everything else in it; written whole to a new file then renamed
/// over the old.
///
/// # Errors
///
/// When the file is not a JSON object (it is then left as it was), or cannot be written.
pub fn save_allow_rule(path: &Path, rule: &str) -> anyhow::Result<()> {
    let mut settings: serde_json::Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!("{} is not valid JSON; it was left as it is", path.display())
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let object = settings.as_object_mut().with_context(|| {
        format!(
            "{} is not a JSON object; it was left as it is",
            path.display()
        )
    })?;
    let permissions = object
        .entry("permissions")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
        .with_context(|| format!("{}: permissions is not an object", path.display()))?;
    let allow = permissions
        .entry("allow")
        .or_insert_with(|| serde_json::json!([]))
        .as_array_mut()
        .with_context(|| format!("{}: permissions.allow is not a list", path.display()))?;
    if !allow.iter().any(|known| known.as_str() == Some(rule)) {
        allow.push(serde_json::Value::from(rule));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let staging = path.with_extension("json.tmp");
    let mut text = serde_json::to_string_pretty(&settings)?;
    text.push('\n');
    std::fs::write(&staging, text).with_context(|| format!("writing {}", staging.display()))?;
    std::fs::rename(&staging, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The rule an "always" amounts to, in Claude Code's rule syntax: the tool and the exact
/// command or file (`Bash(cargo test)`, `Edit(src/lib.rs)`), or the tool alone.
pub fn always_rule(tool: &str, input: &serde_json::Value, resolved: Option<&str>) -> String {
    let detail = match tool {
        "Bash" => input.get("command").and_then(serde_json::Value::as_str),
        "Write" | "Edit" => {
            resolved.or_else(|| input.get("file_path").and_then(serde_json::Value::as_str))
        }
        // Another tool's "always" covers exactly the input it was given.
        _ => return format!("{tool} with exactly {}", protocol::canonical_json(input)),
    };
    let outside = input
        .get(tools::DISABLE_SANDBOX_FIELD)
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    match detail {
        Some(detail) if outside => format!("{tool}({detail}) outside the sandbox"),
        Some(detail) => format!("{tool}({detail})"),
        None => tool.to_owned(),
    }
}

/// What "always" remembers: the tool and the exact call: for Bash the whole command, for
/// Write and Edit the file (later changes of the same file are covered), for any other tool
/// its whole input (an MCP tool's `command` or `path` field says nothing of its other
/// fields). Never the shortened label (two commands that share their first 80 characters
/// or their first line are different commands).
pub fn approval_key(tool: &str, input: &serde_json::Value, resolved: Option<&str>) -> String {
    let detail = match tool {
        // Whether it asked to leave the sandbox is part of the call: "always" for the
        // sandboxed command does not cover it unsandboxed.
        "Bash" => input
            .get("command")
            .and_then(serde_json::Value::as_str)
            .map(|command| {
                let outside = input
                    .get(tools::DISABLE_SANDBOX_FIELD)
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false);
                format!("{command}\u{0}{outside}")
            }),
        "Write" | "Edit" => resolved.map(str::to_owned).or_else(|| {
            input
                .get("file_path")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        }),
        _ => None,
    };
    let detail = detail.unwrap_or_else(|| protocol::canonical_json(input).to_string());
    format!("{tool}\u{0}{detail}")
}
