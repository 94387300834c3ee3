//! `Edit {file_path, old_string, new_string, replace_all?}`: exact string replacement.

use std::sync::Arc;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use serde_json::{Value, json};

use crate::common::{numbered, parse_input, run_to_completion};
use crate::files::{PreparedWrite, current_content};
use crate::session::Shared;
use crate::text::{self, Encoding, encode_for};

/// Lines of context shown around an edit.
const SNIPPET_CONTEXT: usize = 4;

const DESCRIPTION: &str = "Replaces exact text in a file: `old_string` must match the file character for character (including indentation and whitespace) and must occur exactly once, unless `replace_all` is true (then every occurrence is replaced). \
Copy old_string from Read's output without the `N<TAB>` line-number prefix, and include enough surrounding lines to make it unique. \
The file must have been read with Read in this session and not changed since. Line endings do not need to match (write `\\n`): each line keeps the ending the file has there, and so does the final newline; a file that is not UTF-8 keeps its encoding. \
An empty old_string creates a new file with new_string as its content. \
Fails, changing nothing, when old_string is not found, matches more than once without replace_all, or equals new_string. Returns the edited region with line numbers.";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

/// The Edit tool.
pub(crate) struct EditTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl EditTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "The file to change, absolute or relative to the working directory"
                },
                "old_string": {
                    "type": "string",
                    "description": "The exact text to replace"
                },
                "new_string": {
                    "type": "string",
                    "description": "The text to put in its place (must differ from old_string)"
                },
                "replace_all": {
                    "type": "boolean",
                    "default": false,
                    "description": "Replace every occurrence of old_string instead of requiring exactly one"
                }
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

crate::common::file_tool!(EditTool, "Edit", writes(prepare));

/// Every check of an Edit and the change it makes, without writing: the path confined, the
/// file read first and unchanged since, `old_string` present once (or `replace_all`).
fn prepare(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
) -> Result<PreparedWrite, ToolError> {
    let path = shared.confine(workspace, "Edit", &input.file_path)?;
    let shown = path.display();
    if input.old_string == input.new_string {
        return Err(ToolError::InvalidInput(
            "old_string and new_string are identical; there is nothing to change".into(),
        ));
    }
    let Some(previous) = current_content(shared, &path)? else {
        if input.old_string.is_empty() {
            let output = ToolOutput::text(format!(
                "Created {shown} ({} lines).",
                input.new_string.lines().count()
            ))
            .with_structured(json!({
                "filePath": path.to_string_lossy(),
                "oldString": "",
                "newString": input.new_string,
                "originalFile": null,
                "structuredPatch": text::structured_patch("", &input.new_string),
                "userModified": false,
                "replaceAll": false,
            }));
            return Ok(PreparedWrite {
                bytes: input.new_string.as_bytes().to_vec(),
                path,
                previous: None,
                output,
            });
        }
        return Err(ToolError::InvalidInput(format!(
            "File does not exist: {shown}. Create it with Write, or with Edit and an empty old_string"
        )));
    };
    // Any text file: a non-UTF-8 one is edited in its own encoding (see `text`).
    let encoding = Encoding::of(&previous);
    let content = encoding.decode(&previous).into_owned();
    if input.old_string.is_empty() {
        if !content.is_empty() {
            return Err(ToolError::InvalidInput(format!(
                "old_string is empty but {shown} is not; give the exact text to replace, or use Write to replace the whole file"
            )));
        }
        let bytes = encode_for(encoding, &input.new_string, &path)?.into_owned();
        let output = ToolOutput::text(format!(
            "Edited {shown}: it was empty and now holds new_string ({} lines).",
            input.new_string.lines().count()
        ));
        return Ok(PreparedWrite {
            path,
            previous: Some(previous),
            bytes,
            output,
        });
    }

    // Matched whatever the line endings; each replaced line keeps the file's ending there.
    let found = text::find_all(&content, &input.old_string);
    let count = found.len();
    let Some(first) = found.first() else {
        return Err(ToolError::InvalidInput(format!(
            "old_string was not found in {shown}. It must match the file exactly, including indentation, whitespace and line breaks; Read the file again to see its current text"
        )));
    };
    if count > 1 && !input.replace_all {
        return Err(ToolError::InvalidInput(format!(
            "Found {count} matches of old_string in {shown}, but replace_all is false. Set replace_all to true to replace every one, or include more surrounding lines in old_string so that it matches exactly one place"
        )));
    }
    let start = first.start;
    let (updated, new) = replace(&content, &found, input);
    let bytes = encode_for(encoding, &updated, &path)?.into_owned();

    let first_line = content[..start].matches('\n').count() + 1;
    let last_line = first_line + new.matches('\n').count();
    let snippet = numbered(
        &updated,
        first_line.saturating_sub(SNIPPET_CONTEXT).max(1),
        last_line + SNIPPET_CONTEXT,
    );
    let (replaced, which) = if input.replace_all && count > 1 {
        (format!("{count} occurrences"), "first edit")
    } else {
        ("1 occurrence".to_owned(), "edit")
    };
    let output = ToolOutput::text(format!(
        "Edited {shown}: replaced {replaced}. The result around the {which}:\n{snippet}"
    ))
    .with_structured(json!({
        "filePath": path.to_string_lossy(),
        "oldString": input.old_string,
        "newString": input.new_string,
        "originalFile": content,
        "structuredPatch": text::structured_patch(&content, &updated),
        "userModified": false,
        "replaceAll": input.replace_all,
    }));
    Ok(PreparedWrite {
        path,
        previous: Some(previous),
        bytes,
        output,
    })
}

/// `content` with the matches `found` of `input.old_string` replaced by `input.new_string`
/// (every one with `replace_all`, else the first), each replaced line keeping the file's
/// ending there; and the first replacement as written.
fn replace(content: &str, found: &[text::Found], input: &Input) -> (String, String) {
    let fallback = text::dominant_ending(content);
    let chosen = if input.replace_all {
        found
    } else {
        &found[..found.len().min(1)]
    };
    let mut updated = String::with_capacity(content.len() + input.new_string.len());
    let mut at = 0;
    let mut first_new = String::new();
    for (index, matched) in chosen.iter().enumerate() {
        let new = text::with_endings(&input.new_string, &matched.endings, fallback);
        updated.push_str(&content[at..matched.start]);
        updated.push_str(&new);
        at = matched.end;
        if index == 0 {
            first_new = new;
        }
    }
    updated.push_str(&content[at..]);
    (updated, first_new)
}

/// What an Edit call would make of the file's current `content` (decoded), for an approval
/// question to show as a diff, matched as the call matches (line endings included); `None`
/// when the call would fail (no match, several without `replace_all`, an input that does
/// not parse). `input` is the call's (`{file_path, old_string, new_string, replace_all?}`).
pub fn preview(content: Option<&str>, input: &Value) -> Option<String> {
    let input: Input = serde_json::from_value(input.clone()).ok()?;
    let Some(content) = content else {
        return input.old_string.is_empty().then_some(input.new_string);
    };
    if input.old_string.is_empty() {
        return content.is_empty().then_some(input.new_string);
    }
    let found = text::find_all(content, &input.old_string);
    if found.is_empty() || (found.len() > 1 && !input.replace_all) {
        return None;
    }
    Some(replace(content, &found, &input).0)
}
