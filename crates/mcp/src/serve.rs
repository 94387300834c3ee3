//! The other direction: executor tools served as an MCP server (`agent mcp serve`), so
//! another agent (Claude Code, Codex, an editor) can call them.
//!
//! Each `tools/call` runs as one call of a [`executor::StreamingToolExecutor`]: the input is
//! checked against the tool's schema, the gate decides it (a call that would be asked is
//! refused with its reason when nobody can be asked), the tool runs with its own limits, and
//! its tool_result becomes the MCP result (text and image content, `isError` for an error,
//! `structuredContent` when the tool gave one). A client's cancellation cancels the call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use executor::{CanUseTool, ExecutorConfig, ExecutorEvent, StreamingToolExecutor, Tool, ToolCall};
use protocol::{ContentBlock, ToolResultContent};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

/// Tools served over MCP, each call decided by `gate` and run in `workspace`.
#[derive(Clone)]
pub struct ToolServer {
    tools: Arc<[Arc<dyn Tool>]>,
    gate: Arc<dyn CanUseTool>,
    workspace: Arc<executor::Workspace>,
    /// The server's name and version in the handshake.
    name: String,
    version: String,
    calls: Arc<AtomicU64>,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|tool| tool.name())
                    .collect::<Vec<_>>(),
            )
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ToolServer {
    /// A server of `tools`, named `name` at `version` in the handshake.
    pub fn new(
        tools: Vec<Arc<dyn Tool>>,
        gate: Arc<dyn CanUseTool>,
        workspace: Arc<executor::Workspace>,
        (name, version): (&str, &str),
    ) -> Self {
        Self {
            tools: tools.into(),
            gate,
            workspace,
            name: name.to_owned(),
            version: version.to_owned(),
            calls: Arc::default(),
        }
    }

    /// Serves on this process's stdin and stdout until the client goes away.
    ///
    /// # Errors
    ///
    /// The handshake failing, or the transport breaking.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let service = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|error| ServeError(error.to_string()))?;
        service
            .waiting()
            .await
            .map_err(|error| ServeError(error.to_string()))?;
        Ok(())
    }

    /// Runs one call of `tool` with `input` to its end (or until `cancel`).
    async fn run(
        &self,
        name: &str,
        input: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> CallToolResult {
        let number = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let mut executor = StreamingToolExecutor::new(
            self.tools.to_vec(),
            Arc::clone(&self.gate),
            ExecutorConfig::default(),
            cancel,
            Arc::clone(&self.workspace),
        );
        executor.add_tool(ToolCall::new(format!("toolu_mcp_{number}"), name, input));
        let completed = executor
            .drain()
            .await
            .into_iter()
            .find_map(|event| match event {
                ExecutorEvent::Completed(completed) => Some(completed),
                _ => None,
            });
        let Some(completed) = completed else {
            return error_result("the call did not complete");
        };
        let mut content: Vec<Value> = Vec::new();
        match &completed.result.content {
            ToolResultContent::Text(text) => content.push(json!({"type": "text", "text": text})),
            ToolResultContent::Blocks(blocks) => {
                content.extend(blocks.iter().filter_map(mcp_content));
            }
        }
        let mut result = json!({
            "content": content,
            "isError": completed.result.is_error.unwrap_or(false),
        });
        if let Some(structured) = completed.structured.filter(Value::is_object) {
            result["structuredContent"] = structured;
        }
        serde_json::from_value(result).unwrap_or_else(|error| error_result(&error.to_string()))
    }
}

/// A content block of a tool_result as MCP content: text, or an image (base64).
fn mcp_content(block: &ContentBlock) -> Option<Value> {
    let value = serde_json::to_value(block).ok()?;
    match value.get("type").and_then(Value::as_str)? {
        "text" => Some(json!({"type": "text", "text": value["text"]})),
        "image" if value["source"]["type"] == "base64" => Some(json!({
            "type": "image",
            "data": value["source"]["data"],
            "mimeType": value["source"]["media_type"],
        })),
        _ => Some(json!({"type": "text", "text": value.to_string()})),
    }
}

/// An `isError` result saying `message`.
fn error_result(message: &str) -> CallToolResult {
    serde_json::from_value(json!({"content": [{"type": "text", "text": message}], "isError": true}))
        .unwrap_or_default()
}

/// Serving failed: the handshake or the transport.
#[derive(Debug, thiserror::Error)]
#[error("serving MCP on stdio: {0}")]
pub struct ServeError(String);

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new(self.name.clone(), self.version.clone());
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name(),
                    "description": tool.description(),
                    "inputSchema": tool.input_schema(),
                })
            })
            .collect();
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self
            .tools
            .iter()
            .any(|tool| tool.name() == request.name.as_ref())
        {
            return Err(ErrorData::invalid_params(
                format!("no tool {:?} (tools/list names them)", request.name),
                None,
            ));
        }
        let input = Value::Object(request.arguments.unwrap_or_default());
        let result = self.run(&request.name, input, context.ct.clone()).await;
        Ok(CallToolResponse::from(result))
    }
}
