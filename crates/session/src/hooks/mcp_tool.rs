//! Claude Code's `mcp_tool` hooks: a tool of a connected MCP server is called with the hook's
//! `input`, whose strings take `${path}` from the event's JSON (`${tool_input.file_path}`;
//! an object as its JSON, a missing value as nothing); the tool's text answer is read as a
//! command hook's stdout would be, and an error answer is a failure told to the user.

use std::time::Duration;

use serde_json::Value;

use super::HookEnv;
use super::process::Exit;
use crate::settings::HookCommand;

/// Calls `hook`'s tool with its `input` filled from the event `event`, for at most `timeout`.
/// `Ok` holds the answer as a command's exit 0; `Err` says what went wrong, for a line after
/// the hook's name.
pub async fn run(
    env: &HookEnv,
    hook: &HookCommand,
    timeout: Duration,
    event: &Value,
) -> Result<Exit, String> {
    let server_name = hook.server.as_deref().unwrap_or_default();
    let tool = hook.tool.as_deref().unwrap_or_default();
    let server = env
        .mcp
        .get()
        .and_then(|pool| {
            pool.connected()
                .into_iter()
                .find(|server| server.name == server_name)
        })
        .ok_or_else(|| format!("cannot be called: MCP server '{server_name}' is not connected"))?;
    let arguments = match hook.input.as_ref().map(|input| fill(input, event)) {
        None => serde_json::Map::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Err("cannot be called: its input is not an object".to_owned()),
    };
    let result = tokio::time::timeout(timeout, server.call(tool, arguments))
        .await
        .map_err(|_| format!("timed out after {} s", timeout.as_secs_f64()))?
        .map_err(|error| format!("failed: {error}"))?;
    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
    let text = mcp::content_of(&value).text();
    if value.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(format!("failed: the tool answered an error: {text}"));
    }
    Ok(Exit {
        code: Some(0),
        stdout: text.trim().to_owned(),
        stderr: String::new(),
    })
}

/// `input` with `${path}` in its strings replaced from `event` (Claude Code 2.1.197's rule:
/// a dotted path of names; an object or list as its JSON; a missing value as nothing).
fn fill(input: &Value, event: &Value) -> Value {
    match input {
        Value::String(text) => Value::String(fill_text(text, event)),
        Value::Array(items) => Value::Array(items.iter().map(|item| fill(item, event)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), fill(value, event)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn fill_text(text: &str, event: &Value) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        let path = &after[..end];
        let valid = path.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if valid {
            let found = path
                .split('.')
                .try_fold(event, |value, name| value.get(name));
            match found {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => out.push_str(text),
                Some(Value::Number(number)) => out.push_str(&number.to_string()),
                Some(Value::Bool(flag)) => out.push_str(&flag.to_string()),
                Some(other) => out.push_str(&other.to_string()),
            }
        } else {
            out.push_str(&rest[at..at + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn input_takes_paths_of_the_event() {
        let event = json!({"tool_input": {"file_path": "src/a.rs", "n": 3}, "prompt": "go"});
        assert_eq!(
            fill(
                &json!({"path": "${tool_input.file_path}", "all": ["${tool_input}", "${missing} ${prompt}"], "n": 1}),
                &event
            ),
            json!({"path": "src/a.rs", "all": ["{\"file_path\":\"src/a.rs\",\"n\":3}", " go"], "n": 1})
        );
        assert_eq!(
            fill_text("${not valid} ${open", &event),
            "${not valid} ${open"
        );
    }
}
