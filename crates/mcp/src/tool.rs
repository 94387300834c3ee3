//! An MCP server's tool as the executor's [`Tool`].

use std::sync::Arc;
use std::time::Duration;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::Value;

use crate::server::{ListedTool, Server};

/// One tool of one server, named `mcp__<server>__<tool>` for the model.
pub struct McpTool {
    server: Arc<Server>,
    /// The model's name.
    name: String,
    listed: ListedTool,
    description: String,
    /// The limit of each call (`MCP_TOOL_TIMEOUT`, else [`crate::DEFAULT_TOOL_TIMEOUT`]).
    timeout: Duration,
}

/// A call that had no answer within its limit: cancelled (the server is sent
/// `notifications/cancelled`), and the model is told which server, which tool and how long.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the MCP server {server} did not answer the call of its tool {tool} within {} ms, so it was cancelled (MCP_TOOL_TIMEOUT sets the limit, in milliseconds)",
    after.as_millis()
)]
pub struct CallTimedOut {
    /// The server's configured name.
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// The limit that passed.
    pub after: Duration,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// `listed` of `server`; `timeout` bounds each call.
    pub fn new(server: Arc<Server>, listed: ListedTool, timeout: Duration) -> Self {
        let name = crate::names::tool_name(&server.name, &listed.name);
        Self::named(server, listed, timeout, name)
    }

    /// The same, with the model's name for it given (see [`crate::names::tool_names`]).
    pub fn named(server: Arc<Server>, listed: ListedTool, timeout: Duration, name: String) -> Self {
        let description = if listed.description.is_empty() {
            format!("{} (MCP server {})", listed.name, server.name)
        } else {
            listed.description.clone()
        };
        Self {
            server,
            name,
            listed,
            description,
            timeout,
        }
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> &Value {
        &self.listed.input_schema
    }

    /// The server's `readOnlyHint` lets the call run alongside others; it is a claim, so it
    /// never makes the call allowed (see [`Tool::is_read_only`]).
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        self.listed.read_only_hint
    }

    /// Never: a server's word that a tool only reads is not checked, so every MCP tool needs
    /// an allow rule or the user's approval.
    fn is_read_only(&self, _input: &Value) -> bool {
        false
    }

    /// None: the call enforces its own limit, so that the model's error names the server
    /// and the tool and a timed-out call does not stop its siblings ([`CallTimedOut`]).
    fn timeout(&self, _input: &Value) -> Option<Duration> {
        None
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let arguments = match input {
                Value::Object(map) => map,
                Value::Null => serde_json::Map::new(),
                other => {
                    return Err(ToolError::InvalidInput(format!(
                        "the input must be a JSON object, got {other}"
                    )));
                }
            };
            // Waiting for the server (a call of another tool holding it) counts too. The
            // call dropped at the limit sends the server `notifications/cancelled`.
            let call =
                tokio::time::timeout(self.timeout, self.server.call(&self.listed.name, arguments));
            let result = tokio::select! {
                () = context.cancel.cancelled() => {
                    return Err(ToolError::Killed("interrupted".into()));
                }
                result = call => result,
            };
            let result = match result {
                Ok(Ok(result)) => result,
                Ok(Err(message)) => return Ok(ToolOutput::error(message)),
                Err(_) => {
                    let timed_out = CallTimedOut {
                        server: self.server.name.clone(),
                        tool: self.listed.name.clone(),
                        after: self.timeout,
                    };
                    tracing::warn!(error = %timed_out, "an MCP tool call timed out");
                    return Ok(ToolOutput::error(timed_out.to_string()));
                }
            };
            let value = serde_json::to_value(&result).unwrap_or(Value::Null);
            let content = content_of(&value);
            let is_error = value.get("isError").and_then(Value::as_bool) == Some(true);
            let mut output = if is_error {
                ToolOutput::error(String::new())
            } else {
                ToolOutput::text(String::new())
            };
            output.content = content;
            if let Some(structured) = value.get("structuredContent") {
                output.structured = Some(structured.clone());
            }
            Ok(output)
        })
    }
}

/// A call result's `content` (MCP's wire shapes) as tool_result content: text as text,
/// images as image blocks, an embedded text resource as its text under its URI, anything
/// else (binary resources, audio, links) as a line saying what it is.
pub fn content_of(result: &Value) -> ToolResultContent {
    let items = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut blocks = Vec::new();
    let mut images = 0usize;
    for item in &items {
        let block = match item.get("type").and_then(Value::as_str) {
            Some("text") => ContentBlock::text(text(item, "text")),
            Some("image") => {
                images += 1;
                if images > crate::image::MAX_PER_RESULT {
                    ContentBlock::text(format!(
                        "[an image, not shown: at most {} are sent at once]",
                        crate::image::MAX_PER_RESULT
                    ))
                } else {
                    crate::image::checked(&text(item, "data")).unwrap_or_else(|why| {
                        ContentBlock::text(format!("[an image, not shown: {why}]"))
                    })
                }
            }
            Some("resource") => {
                let resource = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = text(&resource, "uri");
                match resource.get("text").and_then(Value::as_str) {
                    Some(body) => ContentBlock::text(format!("[resource {uri}]\n{body}")),
                    None => ContentBlock::text(format!(
                        "[binary resource {uri} ({}), not shown]",
                        text(&resource, "mimeType")
                    )),
                }
            }
            Some("resource_link") => ContentBlock::text(format!(
                "[resource link {} {}]",
                text(item, "uri"),
                text(item, "name")
            )),
            Some(other) => ContentBlock::text(format!("[{other} content, not shown]")),
            None => continue,
        };
        blocks.push(block);
    }
    match blocks.as_slice() {
        [] => ToolResultContent::Text("(no output)".into()),
        [ContentBlock::Text(only)] => ToolResultContent::Text(only.text.clone()),
        _ => ToolResultContent::Blocks(blocks),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn results_map_to_tool_result_content() {
        assert_eq!(
            content_of(&json!({"content": [{"type": "text", "text": "hi"}]})),
            ToolResultContent::Text("hi".into())
        );
        assert_eq!(
            content_of(&json!({"content": []})),
            ToolResultContent::Text("(no output)".into())
        );
        let mixed = content_of(&json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "R0lGODlhAQABAAAAACw=", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///x", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///y", "blob": "AA==", "mimeType": "application/zip"}},
        ]}));
        let ToolResultContent::Blocks(blocks) = mixed else {
            panic!("{mixed:?}");
        };
        assert_eq!(blocks.len(), 4);
        assert!(
            matches!(blocks[1], ContentBlock::Image(_)),
            "{:?}",
            blocks[1]
        );
        assert_eq!(blocks[2].as_text(), Some("[resource file:///x]\nbody"));
        assert_eq!(
            blocks[3].as_text(),
            Some("[binary resource file:///y (application/zip), not shown]")
        );
    }
}
