//! MCP resources as Claude Code's two tools: `ListMcpResourcesTool {server?}` lists what the
//! connected servers offer, `ReadMcpResourceTool {server, uri}` reads one. Both only read
//! (they run without a question). Text comes back as text, images as image blocks, other
//! binary content as a line saying what it is; a resource's text is cut at
//! [`MAX_RESOURCE_CHARS`] characters, with a marker.

use std::sync::Arc;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::{Value, json};

use crate::Pool;
use crate::server::Server;

/// The tool that lists resources, as Claude Code names it.
pub const LIST_RESOURCES: &str = "ListMcpResourcesTool";

/// The tool that reads one, as Claude Code names it.
pub const READ_RESOURCE: &str = "ReadMcpResourceTool";

/// Characters of one resource's text returned (100,000); the rest is cut.
pub const MAX_RESOURCE_CHARS: usize = 100_000;

/// Whether the resources of the server named so may be read (a deny rule on the whole
/// server says no).
pub type Readable = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// One of the two resource tools: which one, and the servers it works over.
pub struct ResourceTool {
    kind: Kind,
    pool: Arc<Pool>,
    readable: Readable,
    schema: Value,
}

/// Which resource tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// ListMcpResourcesTool.
    List,
    /// ReadMcpResourceTool.
    Read,
}

impl std::fmt::Debug for ResourceTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceTool")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// The two resource tools over `pool`'s servers (those connected when a call runs, and
/// `readable`).
pub fn tools(pool: &Arc<Pool>, readable: &Readable) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ResourceTool {
            kind: Kind::List,
            pool: Arc::clone(pool),
            readable: Arc::clone(readable),
            schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this server's resources"}
                },
                "additionalProperties": false
            }),
        }),
        Arc::new(ResourceTool {
            kind: Kind::Read,
            pool: Arc::clone(pool),
            readable: Arc::clone(readable),
            schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The server's name"},
                    "uri": {"type": "string", "description": "The resource's URI"}
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        }),
    ]
}

/// The server called `name`, or an error naming the ones there are.
fn find<'a>(servers: &'a [Arc<Server>], name: &str) -> Result<&'a Arc<Server>, ToolError> {
    servers
        .iter()
        .find(|server| server.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = servers.iter().map(|server| server.name.as_str()).collect();
            ToolError::InvalidInput(format!(
                "no connected MCP server is called {name:?}; the connected ones: {}",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ))
        })
}

impl Tool for ResourceTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::List => LIST_RESOURCES,
            Kind::Read => READ_RESOURCE,
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::List => {
                "Lists the resources (files, documents, records) the connected MCP servers offer, each with its server and URI, to read with ReadMcpResourceTool. `server` limits it to one server."
            }
            Kind::Read => {
                "Reads a resource of a connected MCP server by its URI (as ListMcpResourcesTool gives it): text as text, images as images."
            }
        }
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            match self.kind {
                Kind::List => {
                    list(
                        &self.connected(),
                        input.get("server").and_then(Value::as_str),
                    )
                    .await
                }
                Kind::Read => {
                    let field =
                        |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
                    let connected = self.connected();
                    let server = find(&connected, field("server"))?;
                    Ok(match server.read_resource(field("uri")).await {
                        Ok(result) => resource_output(&result),
                        Err(message) => ToolOutput::error(message),
                    })
                }
            }
        })
    }
}

/// Characters of a resource's name or description listed (the rest is cut).
const LISTED_CHARS: usize = 300;

/// What is listed of `resource` (of the server `server`): Claude Code's fields (`uri`,
/// `name`, `mimeType`, `description`, `server`), each string cut at [`LISTED_CHARS`].
fn summary(resource: &Value, server: &str) -> Value {
    let mut out = serde_json::Map::new();
    for key in ["uri", "name", "mimeType", "description"] {
        if let Some(text) = resource.get(key).and_then(Value::as_str) {
            let cut: String = text.chars().take(LISTED_CHARS).collect();
            out.insert(key.to_owned(), Value::from(cut));
        }
    }
    out.insert("server".to_owned(), Value::from(server));
    Value::Object(out)
}

impl ResourceTool {
    /// The servers connected now whose resources may be read.
    fn connected(&self) -> Vec<Arc<Server>> {
        let mut connected = self.pool.connected();
        connected.retain(|server| (self.readable)(&server.name));
        connected
    }
}

/// ListMcpResourcesTool: every server's resources (or `only` one's), each with its server; a
/// server that fails says so in a line.
async fn list(connected: &[Arc<Server>], only: Option<&str>) -> Result<ToolOutput, ToolError> {
    let servers: Vec<&Arc<Server>> = match only {
        Some(name) => vec![find(connected, name)?],
        None => connected.iter().collect(),
    };
    let mut listed = Vec::new();
    let mut failures = Vec::new();
    for server in servers {
        match server.list_resources().await {
            Ok(resources) => {
                if resources.len() >= crate::server::MAX_RESOURCES {
                    failures.push(format!(
                        "{} lists more resources; only its first {} are shown",
                        server.name,
                        crate::server::MAX_RESOURCES
                    ));
                }
                listed.extend(
                    resources
                        .iter()
                        .map(|resource| summary(resource, &server.name)),
                );
            }
            Err(error) => failures.push(error),
        }
    }
    let mut text = if listed.is_empty() {
        "No resources.".to_owned()
    } else {
        serde_json::to_string_pretty(&listed).unwrap_or_default()
    };
    for failure in &failures {
        text.push_str(&format!("\n({failure})"));
    }
    Ok(ToolOutput::text(text).with_structured(Value::Array(listed)))
}

/// A `resources/read` result as a tool result: each content's text (cut at
/// [`MAX_RESOURCE_CHARS`]), an image blob as an image block, another blob as a line; and
/// Claude Code's structured `{contents: [{uri, mimeType, text}]}`.
pub fn resource_output(result: &Value) -> ToolOutput {
    let contents = result["contents"].as_array().map_or(&[][..], Vec::as_slice);
    let mut blocks = Vec::new();
    let mut structured = Vec::new();
    let mut images = 0usize;
    for content in contents {
        let uri = content["uri"].as_str().unwrap_or_default();
        let mime = content["mimeType"].as_str().unwrap_or_default();
        if let Some(text) = content["text"].as_str() {
            let cut: String = text.chars().take(MAX_RESOURCE_CHARS).collect();
            let more = text.chars().count().saturating_sub(MAX_RESOURCE_CHARS);
            let mut shown = format!("{uri}:\n{cut}");
            if more > 0 {
                shown.push_str(&format!("\n… ({more} more characters cut)"));
            }
            blocks.push(ContentBlock::text(shown));
            structured.push(json!({"uri": uri, "mimeType": mime, "text": cut}));
        } else if let Some(blob) = content["blob"].as_str() {
            if mime.starts_with("image/") {
                images += 1;
                blocks.push(if images > crate::image::MAX_PER_RESULT {
                    ContentBlock::text(format!(
                        "{uri}: an image, not shown (at most {} are sent at once)",
                        crate::image::MAX_PER_RESULT
                    ))
                } else {
                    crate::image::checked(blob).unwrap_or_else(|why| {
                        ContentBlock::text(format!("{uri}: an image, not shown: {why}"))
                    })
                });
            } else {
                blocks.push(ContentBlock::text(format!(
                    "{uri}: binary content ({mime}, {} bytes of base64), not shown",
                    blob.len()
                )));
            }
            structured.push(json!({"uri": uri, "mimeType": mime}));
        }
    }
    if blocks.is_empty() {
        blocks.push(ContentBlock::text("The resource is empty."));
    }
    let mut output = ToolOutput::text(String::new());
    output.content = ToolResultContent::Blocks(blocks);
    output.with_structured(json!({ "contents": structured }))
}
