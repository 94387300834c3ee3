//! `Write {file_path, content}`: creates or replaces a whole file.

use std::sync::Arc;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use serde_json::{Value, json};

use crate::common::{parse_input, run_to_completion};
use crate::files::{PreparedWrite, current_content};
use crate::session::Shared;
use crate::text::{Encoding, encode_for};

const DESCRIPTION: &str = "Writes a file with exactly `content`, creating it (and missing parent directories) or replacing it entirely. \
An existing file must have been read with Read in this session and not changed since; otherwise the write is refused, so read it first. \
Prefer Edit for changing part of an existing file: it sends only the change. \
`file_path` may be absolute or relative to the working directory; it must be inside the workspace. The write is atomic and keeps the file's permissions.";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    file_path: String,
    content: String,
}

/// The Write tool.
pub(crate) struct WriteTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl WriteTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "The file to write, absolute or relative to the working directory"
                },
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file"
                }
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

crate::common::file_tool!(WriteTool, "Write", writes(prepare));

/// Every check of a Write and the bytes it writes, without writing: the path confined and
/// not a folder, an existing file read first and unchanged since, the text encodable in the
/// file's encoding.
fn prepare(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
) -> Result<PreparedWrite, ToolError> {
    // `dir/` names a directory: writing it would create a file called `dir`.
    if input.file_path.ends_with('/') || input.file_path.ends_with("/.") {
        return Err(ToolError::InvalidInput(format!(
            "file_path {:?} names a directory; give the path of the file to write",
            input.file_path
        )));
    }
    let path = shared.confine(workspace, "Write", &input.file_path)?;
    let existing = current_content(shared, &path)?;
    let existed = existing.is_some();
    let original = existing
        .as_deref()
        .map(|bytes| Encoding::of(bytes).decode(bytes).into_owned());
    // An existing file keeps its encoding (see `text`); a new one is UTF-8.
    let encoding = existing.as_deref().map_or(Encoding::Utf8, Encoding::of);
    let bytes = encode_for(encoding, &input.content, &path)?.into_owned();
    let lines = input.content.lines().count();
    let verb = if existed { "Updated" } else { "Created" };
    let kept = match encoding {
        Encoding::Utf8 => String::new(),
        other => format!(", kept as {}", other.name()),
    };
    let output = ToolOutput::text(format!(
        "{verb} {} ({lines} lines, {} bytes{kept}).",
        path.display(),
        bytes.len()
    ))
    .with_structured(json!({
        "type": if existed { "update" } else { "create" },
        "filePath": path.to_string_lossy(),
        "content": input.content,
        "structuredPatch": crate::text::structured_patch(original.as_deref().unwrap_or(""), &input.content),
        "originalFile": original,
    }));
    Ok(PreparedWrite {
        path,
        previous: existing,
        bytes,
        output,
    })
}
