//! `Read {file_path, offset?, limit?}`: a text file's lines, numbered.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::sync::Arc;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, Workspace};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::{io_error, parse_input, run_cancellable, truncate_line};
use crate::session::{ContentHasher, Shared};
use crate::text::Encoding;

/// Lines shown when no `limit` is given.
pub(crate) const DEFAULT_LIMIT: usize = 2_000;
/// Characters of one line shown before it is cut.
pub(crate) const MAX_LINE_CHARS: usize = 2_000;

/// The most of one line kept to be shown, in bytes: enough for [`MAX_LINE_CHARS`]
/// characters of 4 bytes and one more (so a cut line is always longer than what is shown).
const KEPT_LINE_BYTES: usize = MAX_LINE_CHARS * 4 + 4;

/// Reads the next line (up to and with its `\n`, or to the end of the file) from
/// `reader`: every chunk of it goes to `each`, and its first `keep` bytes into `line`.
/// Returns the line's whole length in bytes, 0 at the end of the file.
fn read_line_bounded(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: usize,
    mut each: impl FnMut(&[u8]),
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if buffer.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (&buffer[..=at], true),
            None => (buffer, false),
        };
        each(chunk);
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let length = chunk.len();
        total += length;
        reader.consume(length);
        if done {
            return Ok(total);
        }
    }
}

/// Whether a file is UTF-8, checked as it is read in pieces that may split a character.
#[derive(Default)]
struct Utf8Check {
    /// The start of a character the last piece ended in.
    carry: Vec<u8>,
    /// Whether anything invalid was seen.
    broken: bool,
}

impl Utf8Check {
    fn feed(&mut self, chunk: &[u8]) {
        if self.broken {
            return;
        }
        let mut joined;
        let bytes = if self.carry.is_empty() {
            chunk
        } else {
            joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(chunk);
            &joined[..]
        };
        match std::str::from_utf8(bytes) {
            Ok(_) => self.carry.clear(),
            // A character cut at the piece's end: its start waits for the next piece.
            Err(error) if error.error_len().is_none() => {
                self.carry = bytes[error.valid_up_to()..].to_vec();
            }
            Err(_) => self.broken = true,
        }
    }

    /// The line ended: whether everything so far was UTF-8 (a line break never splits a
    /// character, so a character left open is invalid).
    fn line_end(&mut self) -> bool {
        if !self.carry.is_empty() {
            self.broken = true;
            self.carry.clear();
        }
        !self.broken
    }
}
/// Bytes of numbered output before the listing stops early (and says where to continue).
const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// Bytes looked at for a NUL to call a file binary (what git and ripgrep do).
const BINARY_PROBE: usize = 8 * 1024;

const DESCRIPTION: &str = "Reads a text file and returns its lines numbered from 1, one per line as `N<TAB>line` (the number and tab are not part of the file; never include them in Edit's old_string). \
By default returns up to 2000 lines from the start; for long files pass `offset` (the first line number to show, from 1) and `limit` (how many lines). Lines longer than 2000 characters are cut with a marker. \
`file_path` may be absolute or relative to the working directory; it must be inside the workspace. \
Images (PNG, JPEG, GIF, WebP) come back as an image you can see, scaled down when large; a PDF as a document you can read (a PDF of more than 10 pages needs `pages`, at most 20 pages per Read); a Jupyter notebook (.ipynb) as its cells with their outputs. \
Reading a file is required before Write or Edit may change it. Reports an empty, missing, binary or directory path instead of content. Use Glob to find files and Grep to search in them.";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    file_path: String,
    offset: Option<u64>,
    limit: Option<u64>,
    pages: Option<String>,
}

/// The Read tool.
pub(crate) struct ReadTool {
    shared: Arc<Shared>,
    schema: Value,
}

impl ReadTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "The file to read, absolute or relative to the working directory"
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "The line number to start at, from 1. Only for files too long to read at once"
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "How many lines to read. Only for files too long to read at once"
                },
                "pages": {
                    "type": "string",
                    "description": "PDFs only: the pages to read, such as \"3\" or \"1-5\" (at most 20)"
                }
            },
            "required": ["file_path"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

crate::common::file_tool!(ReadTool, "Read", read);

/// What Read found at a path: a whole file (an image, a PDF, a notebook) already answered,
/// or a text file, with its lines to read.
enum Opened {
    Answered(ToolOutput),
    Lines(std::fs::Metadata, Box<dyn BufRead>),
}

/// Opens `path` for Read: its kind checked, a whole file answered, a binary file refused,
/// a text file's lines from the disk or, with an editor, from its buffer.
fn open(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
    path: &std::path::Path,
) -> Result<Opened, ToolError> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolError::InvalidInput(format!(
                "File does not exist: {} (working directory: {})",
                path.display(),
                shared.cwd(workspace).display()
            )));
        }
        Err(error) => return Err(io_error("read", path, &error)),
    };
    check_kind(path, &metadata)?;
    let file = File::open(path).map_err(|error| io_error("open", path, &error))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let head = reader
        .fill_buf()
        .map_err(|error| io_error("read", path, &error))?;
    let kind = Whole::of(head, path, input.pages.as_deref())?;
    if let Some(kind) = kind {
        return read_whole(shared, path, &metadata, kind).map(Opened::Answered);
    }
    if head[..head.len().min(BINARY_PROBE)].contains(&0) {
        return Err(ToolError::InvalidInput(format!(
            "{} is a binary file ({} bytes); Read shows text files only",
            path.display(),
            metadata.len()
        )));
    }
    // An editor's buffer holds the text as the user sees it, unsaved changes included.
    let reader: Box<dyn BufRead> = match crate::files::editor(shared) {
        Some(editor) => Box::new(std::io::Cursor::new(crate::files::editor_read(
            editor, path,
        )?)),
        None => Box::new(reader),
    };
    Ok(Opened::Lines(metadata, reader))
}

fn read(
    shared: &Shared,
    workspace: &Workspace,
    input: &Input,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let path = shared.confine(workspace, "Read", &input.file_path)?;
    let (metadata, mut reader) = match open(shared, workspace, input, &path)? {
        Opened::Answered(output) => return Ok(output),
        Opened::Lines(metadata, reader) => (metadata, reader),
    };

    let first = usize::try_from(input.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = input
        .limit
        .map_or(DEFAULT_LIMIT, |limit| {
            usize::try_from(limit).unwrap_or(usize::MAX)
        })
        .max(1);
    let mut hasher = ContentHasher::default();
    // The whole content of a small file, kept to show what changes later (attachments).
    let mut snapshot = (metadata.len() <= crate::watch::SNAPSHOT_BYTES).then(Vec::new);
    // The shown lines' bytes: decoded once the whole file is known to be UTF-8 or not.
    let mut shown: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut shown_bytes = 0usize;
    let mut utf8 = true;
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut last_shown = 0usize;
    let mut stopped_early = false;
    let mut check = Utf8Check::default();
    loop {
        line.clear();
        // A line is kept only as far as it can be shown: a file of one 1 GB line must not
        // take 1 GB. The rest of it is hashed, checked and snapshotted as it goes by.
        let read = read_line_bounded(&mut reader, &mut line, KEPT_LINE_BYTES, |chunk| {
            hasher.update(chunk);
            check.feed(chunk);
            if let Some(kept) = &mut snapshot {
                if kept.len() + chunk.len() > crate::watch::SNAPSHOT_BYTES as usize {
                    // The file grew while it was read: no snapshot rather than a wrong one.
                    kept.clear();
                    kept.shrink_to_fit();
                } else {
                    kept.extend_from_slice(chunk);
                }
            }
        })
        .map_err(|error| io_error("read", &path, &error))?;
        if read == 0 {
            break;
        }
        utf8 = check.line_end() && utf8;
        number += 1;
        if number.is_multiple_of(4096) && cancel.is_cancelled() {
            return Err(ToolError::Killed("interrupted while reading".into()));
        }
        if number < first || number - first >= limit || stopped_early {
            continue;
        }
        let bytes = line.strip_suffix(b"\n").unwrap_or(&line);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if shown_bytes > 0 && shown_bytes + bytes.len().min(MAX_LINE_CHARS * 4) > MAX_OUTPUT_BYTES {
            stopped_early = true;
            continue;
        }
        shown_bytes += bytes.len().min(MAX_LINE_CHARS * 4) + 8;
        shown.push((number, bytes.to_vec()));
        last_shown = number;
    }
    let encoding = if utf8 {
        Encoding::Utf8
    } else {
        Encoding::Windows1252
    };
    let mut output = String::with_capacity(shown_bytes);
    // Claude Code's `content`: the lines as read, without numbers.
    let mut content = String::with_capacity(shown_bytes);
    for (number, bytes) in &shown {
        let text = encoding.decode(bytes);
        let text = truncate_line(&text, MAX_LINE_CHARS);
        output.push_str(&format!("{number}\t{text}\n"));
        content.push_str(&text);
        content.push('\n');
    }
    content.pop();
    let stamp = hasher.stamp(metadata.modified().ok());
    match snapshot.filter(|snapshot| snapshot.len() as u64 == stamp.len) {
        Some(snapshot) => {
            shared.snapshots.insert(path.clone(), snapshot.into());
        }
        None => {
            shared.snapshots.remove(&path);
        }
    }
    shared.read_state.insert(path.clone(), stamp);

    answer(
        &path,
        output,
        content,
        Span {
            first,
            last_shown,
            shown: shown.len(),
            total: number,
            stopped_early,
        },
        encoding,
    )
}

/// Which lines a read showed.
struct Span {
    /// The first line asked for (from 1).
    first: usize,
    /// The last line shown.
    last_shown: usize,
    /// How many lines were shown.
    shown: usize,
    /// The file's lines.
    total: usize,
    /// Whether the output cap stopped the read before the limit.
    stopped_early: bool,
}

/// The answer of a read of `path`: `output` (numbered lines) with its notes, and Claude
/// Code's `FileReadOutput` around `content` (the lines as read).
fn answer(
    path: &std::path::Path,
    mut output: String,
    content: String,
    span: Span,
    encoding: Encoding,
) -> Result<ToolOutput, ToolError> {
    let first = span.first;
    if span.total == 0 {
        return Ok(ToolOutput::text(format!(
            "The file {} exists but is empty.",
            path.display()
        )));
    }
    if first > span.total {
        return Err(ToolError::InvalidInput(format!(
            "{} has {} lines; offset {first} is past the end",
            path.display(),
            span.total
        )));
    }
    output.pop(); // the last newline
    if span.last_shown < span.total {
        let why = if span.stopped_early {
            format!(" (output capped at {} KiB)", MAX_OUTPUT_BYTES / 1024)
        } else {
            String::new()
        };
        output.push_str(&format!(
            "\n\n[Showing lines {first}-{} of {}{why}. Continue with offset={}.]",
            span.last_shown,
            span.total,
            span.last_shown + 1
        ));
    }
    if let Some(note) = encoding.read_note() {
        output.push_str("\n\n");
        output.push_str(&note);
    }
    // Claude Code's `FileReadOutput` (sdk-tools.d.ts): what hooks and SDK programs get.
    Ok(ToolOutput::text(output).with_structured(json!({
        "type": "text",
        "file": {
            "filePath": path,
            "content": content,
            "numLines": span.shown,
            "startLine": first,
            "totalLines": span.total,
        },
    })))
}

/// Refuses a folder, and a FIFO, socket or device (which would block or never end).
fn check_kind(path: &std::path::Path, metadata: &std::fs::Metadata) -> Result<(), ToolError> {
    if metadata.is_dir() {
        return Err(ToolError::InvalidInput(format!(
            "{} is a directory, not a file; list it with Glob, or with `ls` in Bash",
            path.display()
        )));
    }
    if !metadata.is_file() {
        return Err(ToolError::InvalidInput(format!(
            "{} is not a regular file (a pipe, socket or device); it was not read",
            path.display()
        )));
    }
    Ok(())
}

/// A file Read takes whole rather than as lines.
enum Whole<'a> {
    /// An image in this format.
    Image(image::ImageFormat),
    /// A PDF, with the `pages` asked for.
    Pdf(Option<&'a str>),
    /// A Jupyter notebook.
    Notebook,
}

impl<'a> Whole<'a> {
    /// What the file at `path`, whose first bytes are `head`, is read as; `None` for lines.
    ///
    /// # Errors
    ///
    /// `pages` given for a file that is not a PDF.
    fn of(
        head: &[u8],
        path: &std::path::Path,
        pages: Option<&'a str>,
    ) -> Result<Option<Self>, ToolError> {
        let kind = if let Some(format) = crate::media::format_of(head) {
            Some(Whole::Image(format))
        } else if crate::pdf::is_pdf(head) {
            Some(Whole::Pdf(pages))
        } else if path.extension().and_then(|ext| ext.to_str()) == Some("ipynb") {
            Some(Whole::Notebook)
        } else {
            None
        };
        if pages.is_some() && !matches!(kind, Some(Whole::Pdf(_))) {
            return Err(ToolError::InvalidInput(format!(
                "pages is for PDF files only, and {} is not a PDF; use offset and limit for lines",
                path.display()
            )));
        }
        Ok(kind)
    }
}

/// An image, PDF or notebook: read whole (at most [`crate::media::MAX_FILE_BYTES`], or
/// [`crate::pdf::MAX_FILE_BYTES`] for a PDF) and counted as read, so a Write or
/// NotebookEdit may follow.
fn read_whole(
    shared: &Shared,
    path: &std::path::Path,
    metadata: &std::fs::Metadata,
    kind: Whole<'_>,
) -> Result<ToolOutput, ToolError> {
    let (limit, what) = match kind {
        Whole::Pdf(_) => (crate::pdf::MAX_FILE_BYTES, "PDFs"),
        Whole::Image(_) => (crate::media::MAX_FILE_BYTES, "images"),
        Whole::Notebook => (crate::media::MAX_FILE_BYTES, "notebooks"),
    };
    if metadata.len() > limit {
        return Err(ToolError::InvalidInput(format!(
            "{} has {} bytes; {what} of at most {limit} bytes are read",
            path.display(),
            metadata.len(),
        )));
    }
    // One whole read at a time in the process: images, PDFs and notebooks are the largest
    // things a Read holds, and the executor runs Reads in parallel.
    let _turn = crate::media::turn();
    let bytes = std::fs::read(path).map_err(|error| io_error("read", path, &error))?;
    let output = match kind {
        Whole::Image(format) => crate::media::read(path, &bytes, format)?,
        Whole::Pdf(pages) => crate::pdf::read(path, &bytes, pages)?,
        Whole::Notebook => crate::notebook::read(path, &bytes)?,
    };
    let stamp = crate::session::FileStamp::of(&bytes, metadata.modified().ok());
    shared.read_state.insert(path.to_path_buf(), stamp);
    Ok(output)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::BufReader;

    use super::*;

    /// Lines read in pieces of 3 bytes: each kept only as far as asked, every byte seen, and
    /// the UTF-8 check right across the pieces.
    #[test]
    fn lines_are_kept_bounded_and_checked_in_pieces() {
        let text = "héllo wörld\nshort\n日本語の行\nend".as_bytes();
        let mut reader = BufReader::with_capacity(3, text);
        let mut line = Vec::new();
        let mut seen = Vec::new();
        let mut check = Utf8Check::default();
        let mut lengths = Vec::new();
        loop {
            line.clear();
            let read = read_line_bounded(&mut reader, &mut line, 4, |chunk| {
                seen.extend_from_slice(chunk);
                check.feed(chunk);
            })
            .unwrap();
            if read == 0 {
                break;
            }
            assert!(check.line_end());
            assert!(line.len() <= 4);
            lengths.push(read);
        }
        assert_eq!(seen, text);
        assert_eq!(lengths, [14, 6, 16, 3]);
        let mut check = Utf8Check::default();
        check.feed(&[b'a', 0xE6]);
        check.feed(&[0x97]);
        assert!(!check.line_end(), "a character left open at the line's end");
        let mut check = Utf8Check::default();
        check.feed(&[0xFF, b'\n']);
        assert!(!check.line_end());
    }
}
