//! Jupyter notebooks (`.ipynb`): Read shows their cells with outputs, `NotebookEdit
//! {notebook_path, cell_id?, new_source, cell_type?, edit_mode?}` replaces, inserts or deletes
//! one cell, as Claude Code's tools do.
//!
//! An edit changes only the cell it names: the rest of the file keeps its exact bytes (cells,
//! metadata, numbers as written), and the new or replaced cell is written as Jupyter writes
//! one (keys sorted, the file's indent, non-ASCII kept). A
//! cell is named by its `id` (nbformat 4.5), or by its position: `cell-N` or `N`, from 0.
//! Replacing a code cell's source clears its outputs and execution count (they belonged to
//! the old code). NotebookEdit follows Edit's rules: the notebook read first and unchanged
//! since, the protected folders, Edit's permission rules; checkpoints record it.

use std::sync::Arc;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::{Value, json};

use crate::common::{parse_input, run_to_completion};
use crate::files::{PreparedWrite, current_content};
use crate::session::Shared;

/// The tool's name, as Claude Code spells it.
pub const NOTEBOOK_EDIT: &str = "NotebookEdit";

const DESCRIPTION: &str = "Changes one cell of a Jupyter notebook (.ipynb): `edit_mode` replace (the default: the cell's source becomes new_source; a code cell's outputs are cleared), insert (a new cell of `cell_type` after cell_id, or at the start without one) or delete. Name the cell by the id Read shows (or cell-N, from 0). The notebook must have been read with Read and not changed since; the rest of it is written back as Jupyter writes it.";

/// Characters of one cell's outputs shown by Read before they are cut.
const OUTPUT_CHARS: usize = 10_000;

/// A notebook parsed: its cells apart from the rest.
struct Notebook {
    /// Everything but `cells`.
    json: Value,
    cells: Vec<Value>,
}

/// The most JSON values (objects, arrays, strings, numbers...) a notebook may hold: 1
/// million, some 100 MB parsed. Past it a notebook is refused before it is parsed, so a file
/// of tiny values (`[0,0,0,…]`) cannot take gigabytes.
const MAX_VALUES: usize = 1_000_000;

/// The most cells a notebook may have.
const MAX_CELLS: usize = 10_000;

/// Whether `bytes` (JSON) holds more than `limit` values, counted without parsing: each
/// `,`, `[` and `{` outside strings starts one more.
fn more_values_than(bytes: &[u8], limit: usize) -> bool {
    let (mut count, mut in_string, mut escaped) = (1usize, false, false);
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => {
                count += 1;
                if count > limit {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

impl Notebook {
    fn parse(bytes: &[u8], path: &std::path::Path) -> Result<Self, ToolError> {
        if more_values_than(bytes, MAX_VALUES) {
            return Err(ToolError::InvalidInput(format!(
                "{} holds more than {MAX_VALUES} JSON values, more than a notebook is read with; it was not read or changed",
                path.display()
            )));
        }
        let mut json: Value = serde_json::from_slice(bytes).map_err(|error| {
            ToolError::InvalidInput(format!(
                "{} is not a valid notebook (its JSON does not parse: {error}); it was not changed",
                path.display()
            ))
        })?;
        let cells = match json.get_mut("cells").map(Value::take) {
            Some(Value::Array(cells)) => cells,
            _ => {
                return Err(ToolError::InvalidInput(format!(
                    "{} is not a Jupyter notebook (no `cells` list); it was not changed",
                    path.display()
                )));
            }
        };
        if cells.len() > MAX_CELLS {
            return Err(ToolError::InvalidInput(format!(
                "{} has {} cells, more than the {MAX_CELLS} a notebook is read with; it was not changed",
                path.display(),
                cells.len()
            )));
        }
        if let Some(at) = cells.iter().position(|cell| !cell.is_object()) {
            return Err(ToolError::InvalidInput(format!(
                "{} is not a valid notebook: cell {at} is not an object; it was not changed",
                path.display()
            )));
        }
        Ok(Self { json, cells })
    }

    fn cells(&self) -> &[Value] {
        &self.cells
    }

    /// The language of its code cells.
    fn language(&self) -> String {
        self.json["metadata"]["language_info"]["name"]
            .as_str()
            .or_else(|| self.json["metadata"]["kernelspec"]["language"].as_str())
            .unwrap_or("python")
            .to_owned()
    }

    /// Whether its cells carry ids (nbformat 4.5 and later).
    fn has_ids(&self) -> bool {
        let minor = self.json["nbformat_minor"].as_u64().unwrap_or(0);
        self.json["nbformat"].as_u64().unwrap_or(0) > 4 || minor >= 5
    }

    /// The position of the cell `name` names: its id, or `cell-N`/`N`.
    fn find(&self, name: &str) -> Option<usize> {
        if let Some(at) = self
            .cells
            .iter()
            .position(|cell| cell["id"].as_str() == Some(name))
        {
            return Some(at);
        }
        let index: usize = name.strip_prefix("cell-").unwrap_or(name).parse().ok()?;
        (index < self.cells.len()).then_some(index)
    }
}

/// One change to a notebook's list of cells.
enum Change {
    /// Cell `at` becomes the cell given.
    Replace(usize, Value),
    /// The cell given goes at position `at` (0: first; the count: last).
    Insert(usize, Value),
    /// Cell `at` goes.
    Delete(usize),
}

/// `text` (a notebook that parsed) with `change` made to its cells, every other byte as it
/// was: cells and metadata not named keep their exact text (numbers Jupyter wrote, key order,
/// spacing). A new or replaced cell is written as Jupyter writes one (keys sorted, the
/// file's indent).
fn spliced(text: &str, change: &Change) -> Result<Vec<u8>, ToolError> {
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        cells: &'a serde_json::value::RawValue,
    }
    let failed =
        |error: String| ToolError::CouldNotRun(format!("could not write the notebook: {error}"));
    let top: Top<'_> = serde_json::from_str(text).map_err(|error| failed(error.to_string()))?;
    let list = top.cells.get();
    let cells: Vec<&serde_json::value::RawValue> =
        serde_json::from_str(list).map_err(|error| failed(error.to_string()))?;
    // Byte offsets in `text`: the raw values borrow from it.
    let offset = |part: &str| part.as_ptr() as usize - text.as_ptr() as usize;
    let span = |at: usize| {
        let start = offset(cells[at].get());
        (start, start + cells[at].get().len())
    };
    let list_start = offset(list);
    // The indent of a cell: what precedes it on its line, else two units of one space. A
    // cell that shares its line with other text (a notebook written on one line) makes the
    // new cell compact too, and the separators bare commas.
    let indent = match cells.first() {
        Some(first) => {
            let start = offset(first.get());
            let line = text[..start].rfind('\n').map_or(0, |at| at + 1);
            let before = &text[line..start];
            before
                .chars()
                .all(char::is_whitespace)
                .then(|| before.to_owned())
        }
        None => Some("  ".to_owned()),
    };
    let written = |cell: &Value| -> Result<String, ToolError> {
        let Some(indent) = &indent else {
            return serde_json::to_string(&sorted(cell)).map_err(|error| failed(error.to_string()));
        };
        let unit = " ".repeat((indent.len() / 2).max(1));
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        serde::Serialize::serialize(&sorted(cell), &mut serializer)
            .map_err(|error| failed(error.to_string()))?;
        let out = String::from_utf8(out).map_err(|error| failed(error.to_string()))?;
        Ok(out.replace('\n', &format!("\n{indent}")))
    };
    let separator = match &indent {
        Some(indent) => format!(",\n{indent}"),
        None => ",".to_owned(),
    };
    let mut out = text.to_owned();
    match change {
        Change::Replace(at, cell) => {
            let (start, end) = span(*at);
            out.replace_range(start..end, &written(cell)?);
        }
        Change::Delete(at) => {
            let (start, end) = span(*at);
            let range = if at + 1 < cells.len() {
                start..span(at + 1).0
            } else if *at > 0 {
                span(at - 1).1..end
            } else {
                start..end
            };
            out.replace_range(range, "");
        }
        Change::Insert(at, cell) => {
            let cell = written(cell)?;
            if *at < cells.len() {
                out.insert_str(span(*at).0, &format!("{cell}{separator}"));
            } else if let Some(last) = cells.len().checked_sub(1) {
                out.insert_str(span(last).1, &format!("{separator}{cell}"));
            } else {
                // An empty list: Jupyter's layout (the list's key at one unit of indent).
                let indent = indent.as_deref().unwrap_or("  ");
                let outer = &indent[..indent.len() / 2];
                out.replace_range(
                    list_start..list_start + list.len(),
                    &format!("[\n{indent}{cell}\n{outer}]"),
                );
            }
        }
    }
    Ok(out.into_bytes())
}

/// `value` with every object's keys in sorted order, as Python's `sort_keys` writes them.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|key| (key.clone(), sorted(&fields[key])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A cell's `source` (a string or a list of lines) as one string.
fn joined(source: &Value) -> String {
    match source {
        Value::String(text) => text.clone(),
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// `text` as Jupyter stores a source: its lines, each with its line break but the last.
fn split(text: &str) -> Value {
    Value::Array(
        text.split_inclusive('\n')
            .map(|line| Value::from(line.to_owned()))
            .collect(),
    )
}

/// Read of a notebook: each cell as `<cell id="..." type="...">source</cell>`, then its
/// outputs (text, and `image/png`/`image/jpeg` data as image blocks), with Claude Code's
/// structured `{type: "notebook", file: {filePath, cells}}`.
pub(crate) fn read(path: &std::path::Path, bytes: &[u8]) -> Result<ToolOutput, ToolError> {
    let notebook = Notebook::parse(bytes, path)?;
    let language = notebook.language();
    let mut blocks: Vec<ContentBlock> = Vec::new();
    let mut sent_images = 0usize;
    let mut text = format!(
        "Notebook {} ({} cells, {language}):\n",
        path.display(),
        notebook.cells().len()
    );
    for (index, cell) in notebook.cells().iter().enumerate() {
        let id = cell["id"]
            .as_str()
            .map_or_else(|| format!("cell-{index}"), str::to_owned);
        let kind = cell["cell_type"].as_str().unwrap_or("code");
        text.push_str(&format!(
            "<cell id=\"{id}\" type=\"{kind}\">{}</cell>\n",
            joined(&cell["source"])
        ));
        let mut shown = String::new();
        let mut images: Vec<ContentBlock> = Vec::new();
        for output in cell["outputs"].as_array().map_or(&[][..], Vec::as_slice) {
            match output["output_type"].as_str() {
                Some("stream") => shown.push_str(&joined(&output["text"])),
                Some("error") => shown.push_str(&format!(
                    "{}: {}\n",
                    output["ename"].as_str().unwrap_or("Error"),
                    output["evalue"].as_str().unwrap_or_default()
                )),
                _ => {
                    let data = &output["data"];
                    for key in ["image/png", "image/jpeg"] {
                        let Some(encoded) = data[key].as_str() else {
                            continue;
                        };
                        sent_images += 1;
                        if sent_images > crate::media::MAX_IMAGES_PER_RESULT {
                            continue;
                        }
                        // What Jupyter stores: base64, sometimes with line breaks; checked,
                        // and scaled, as an image file is.
                        match crate::media::block_from_base64(
                            &format!("an output of {id}"),
                            encoded,
                        ) {
                            Ok(image) => images.push(image),
                            Err(error) => shown.push_str(&format!("[image not shown: {error}]\n")),
                        }
                    }
                    if let Some(plain) = data.get("text/plain") {
                        shown.push_str(&joined(plain));
                        shown.push('\n');
                    }
                }
            }
        }
        if !shown.is_empty() {
            let cut: String = shown.chars().take(OUTPUT_CHARS).collect();
            let more = shown.chars().count().saturating_sub(OUTPUT_CHARS);
            text.push_str(&format!("<outputs of=\"{id}\">{cut}"));
            if more > 0 {
                text.push_str(&format!("… ({more} more characters)"));
            }
            text.push_str("</outputs>\n");
        }
        // The cell's images follow its text outputs.
        if !images.is_empty() {
            blocks.push(ContentBlock::text(std::mem::take(&mut text)));
            blocks.append(&mut images);
        }
    }
    if sent_images > crate::media::MAX_IMAGES_PER_RESULT {
        text.push_str(&format!(
            "[{} more images in outputs not shown: at most {} are sent at once]\n",
            sent_images - crate::media::MAX_IMAGES_PER_RESULT,
            crate::media::MAX_IMAGES_PER_RESULT
        ));
    }
    blocks.push(ContentBlock::text(text));
    blocks.retain(|block| block.as_text() != Some(""));
    let structured = json!({
        "type": "notebook",
        "file": {"filePath": path.to_string_lossy(), "cells": notebook.cells()},
    });
    let mut output = ToolOutput::text(String::new());
    output.content = if blocks.len() == 1
        && let Some(text) = blocks[0].as_text()
    {
        ToolResultContent::Text(text.to_owned())
    } else {
        ToolResultContent::Blocks(blocks)
    };
    Ok(output.with_structured(structured))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    notebook_path: String,
    #[serde(default)]
    cell_id: Option<String>,
    new_source: String,
    #[serde(default)]
    cell_type: Option<String>,
    #[serde(default)]
    edit_mode: Option<String>,
}

/// The NotebookEdit tool.
pub(crate) struct NotebookEditTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl NotebookEditTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "notebook_path": {"type": "string", "description": "The notebook (.ipynb) to change"},
                "cell_id": {"type": "string", "description": "The cell's id as Read shows it (or cell-N); for insert, the new cell goes after it (at the start without one)"},
                "new_source": {"type": "string", "description": "The cell's new source"},
                "cell_type": {"type": "string", "enum": ["code", "markdown"], "description": "Required for insert"},
                "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"], "description": "Default replace"}
            },
            "required": ["notebook_path", "new_source"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

crate::common::file_tool!(NotebookEditTool, "NotebookEdit", writes(prepare));

/// Every check of a NotebookEdit and the notebook it writes, without writing.
fn prepare(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
) -> Result<PreparedWrite, ToolError> {
    let path = shared.confine(workspace, NOTEBOOK_EDIT, &input.notebook_path)?;
    if path.extension().and_then(|ext| ext.to_str()) != Some("ipynb") {
        return Err(ToolError::InvalidInput(format!(
            "{} is not a notebook (.ipynb); use Edit for other files",
            path.display()
        )));
    }
    let Some(previous) = current_content(shared, &path)? else {
        return Err(ToolError::InvalidInput(format!(
            "Notebook does not exist: {}",
            path.display()
        )));
    };
    let notebook = Notebook::parse(&previous, &path)?;
    let mode = input.edit_mode.as_deref().unwrap_or("replace");
    let found = input.cell_id.as_deref().map(|id| (id, notebook.find(id)));
    if let Some((id, None)) = found {
        return Err(ToolError::InvalidInput(format!(
            "no cell {id} in {}; Read the notebook to see its cells' ids",
            path.display()
        )));
    }
    let at = found.and_then(|(_, at)| at);
    let language = notebook.language();
    let (cell_id, cell_type, change) = match mode {
        "replace" | "delete" => {
            let Some(at) = at else {
                return Err(ToolError::InvalidInput(format!(
                    "{mode} needs the cell_id of the cell to {mode}"
                )));
            };
            let id = cell_name(&notebook.cells()[at], at);
            let kind = notebook.cells()[at]["cell_type"]
                .as_str()
                .unwrap_or("code")
                .to_owned();
            if mode == "delete" {
                (id, kind, Change::Delete(at))
            } else {
                let kind = input.cell_type.clone().unwrap_or(kind);
                let mut cell = notebook.cells()[at].clone();
                cell["source"] = split(&input.new_source);
                cell["cell_type"] = Value::from(kind.clone());
                if kind == "code" {
                    cell["outputs"] = json!([]);
                    cell["execution_count"] = Value::Null;
                } else if let Some(fields) = cell.as_object_mut() {
                    fields.remove("outputs");
                    fields.remove("execution_count");
                }
                (id, kind, Change::Replace(at, cell))
            }
        }
        "insert" => {
            let Some(kind) = input.cell_type.clone() else {
                return Err(ToolError::InvalidInput(
                    "insert needs cell_type: code or markdown".into(),
                ));
            };
            let mut cell = json!({
                "cell_type": kind,
                "metadata": {},
                "source": split(&input.new_source),
            });
            if kind == "code" {
                cell["outputs"] = json!([]);
                cell["execution_count"] = Value::Null;
            }
            let id = if notebook.has_ids() {
                let id = format!("{:08x}", crate::common::random_u64() as u32);
                cell["id"] = Value::from(id.clone());
                id
            } else {
                format!("cell-{}", at.map_or(0, |at| at + 1))
            };
            let position = at.map_or(0, |at| at + 1);
            (id, kind, Change::Insert(position, cell))
        }
        other => {
            return Err(ToolError::InvalidInput(format!(
                "edit_mode {other:?} is not replace, insert or delete"
            )));
        }
    };
    // `Notebook::parse` read it as JSON, which is UTF-8.
    let text = String::from_utf8_lossy(&previous);
    let bytes = spliced(&text, &change)?;
    let done = match mode {
        "insert" => "Inserted",
        "delete" => "Deleted",
        _ => "Replaced",
    };
    let output = ToolOutput::text(format!(
        "{done} cell {cell_id} ({cell_type}) of {}.",
        path.display()
    ))
    .with_structured(json!({
        "new_source": input.new_source,
        "cell_id": cell_id,
        "cell_type": cell_type,
        "language": language,
        "edit_mode": mode,
        "notebook_path": path.to_string_lossy(),
        "original_file": String::from_utf8_lossy(&previous),
        "updated_file": String::from_utf8_lossy(&bytes),
    }));
    Ok(PreparedWrite {
        path,
        previous: Some(previous),
        bytes,
        output,
    })
}

/// How a cell is named: its id, or `cell-N`.
fn cell_name(cell: &Value, index: usize) -> String {
    cell["id"]
        .as_str()
        .map_or_else(|| format!("cell-{index}"), str::to_owned)
}
