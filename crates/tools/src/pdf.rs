//! Read of PDFs: a PDF (told by its first bytes, `%PDF-`) comes back as a document content
//! block the model reads, text and pages alike, within the API's limits.
//!
//! The limits, from the Messages API's PDF support documentation: at most
//! [`API_MAX_PAGES`] pages in one request and 32 MB per request. A PDF of at most
//! [`WHOLE_PAGES`] pages and [`MAX_SENT_BYTES`] is sent as the file's own bytes; a longer one
//! needs the Read input `pages` (`"3"`, `"1-5"`), at most [`MAX_PAGES_PER_READ`] pages at a
//! time (Claude Code's limits), which are cut out of the file with `lopdf` as a document of
//! their own. Files of up to [`MAX_FILE_BYTES`] are opened for that.

use std::path::Path;

use base64::Engine as _;
use executor::{ToolError, ToolOutput};
use lopdf::Document;
use protocol::{ContentBlock, DocumentBlock, ToolResultContent};
use serde_json::json;

/// The most pages of one PDF the API takes in a request.
pub const API_MAX_PAGES: u32 = 100;

/// The most pages sent whole without `pages` (Claude Code's threshold: a longer PDF is read
/// a range at a time, so one Read never spends 100 pages of context).
pub const WHOLE_PAGES: u32 = 10;

/// The most pages one Read with `pages` sends (Claude Code's limit).
pub const MAX_PAGES_PER_READ: u32 = 20;

/// The most bytes of PDF sent in one block: 20 MB, whose base64 (26.7 MB) stays under the
/// API's 32 MB request limit with room for the rest of the conversation.
pub const MAX_SENT_BYTES: usize = 20_000_000;

/// The largest PDF file opened, in bytes (100 MiB): past it even `pages` is refused.
pub const MAX_FILE_BYTES: u64 = 100 << 20;

/// Whether `head`, a file's first bytes, announces a PDF.
pub fn is_pdf(head: &[u8]) -> bool {
    head.starts_with(b"%PDF-")
}

/// An inclusive range of page numbers, from 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pages {
    first: u32,
    last: u32,
}

impl Pages {
    /// `"3"`, `"1-5"` or `"10-"` (to the end, at most [`MAX_PAGES_PER_READ`] pages) of a
    /// document of `count` pages.
    fn parse(text: &str, count: u32) -> Result<Self, String> {
        let bad =
            || format!("pages must be a page number or a range such as \"1-5\", got {text:?}");
        let number = |part: &str| part.trim().parse::<u32>().map_err(|_| bad());
        let (first, last) = match text.split_once('-') {
            Some((first, "")) => {
                let first = number(first)?;
                (
                    first,
                    first.saturating_add(MAX_PAGES_PER_READ - 1).min(count),
                )
            }
            Some((first, last)) => (number(first)?, number(last)?),
            None => {
                let page = number(text)?;
                (page, page)
            }
        };
        if first == 0 || last < first {
            return Err(bad());
        }
        if last > count {
            return Err(format!(
                "pages {text:?} is past the end: the PDF has {count} pages"
            ));
        }
        if last - first + 1 > MAX_PAGES_PER_READ {
            return Err(format!(
                "pages {text:?} names {} pages; read at most {MAX_PAGES_PER_READ} at a time",
                last - first + 1
            ));
        }
        Ok(Self { first, last })
    }

    fn len(self) -> u32 {
        self.last - self.first + 1
    }
}

/// The text of every page of the PDF `bytes`, each page's decompressed content held to
/// 32 MiB (a small stream cannot inflate without bound).
///
/// # Errors
///
/// A PDF that does not parse or is encrypted, or whose text cannot be extracted.
pub fn text(bytes: &[u8]) -> Result<String, String> {
    let document = Document::load_mem(bytes).map_err(|error| error.to_string())?;
    if document.is_encrypted() {
        return Err("the PDF is encrypted".to_owned());
    }
    let pages: Vec<u32> = document.get_pages().keys().copied().collect();
    document
        .extract_text_with_limit(&pages, 32 << 20)
        .map_err(|error| error.to_string())
}

/// The PDF `bytes` (the file at `path`, already confined and read whole, at most
/// [`MAX_FILE_BYTES`]), whole or the `pages` asked for: its document block, a line of text
/// saying what was sent, and Claude Code's structured `{type: "pdf", file}`.
///
/// # Errors
///
/// A PDF that does not parse (corrupt, truncated past repair) or is encrypted; one of more
/// than [`WHOLE_PAGES`] pages or [`MAX_SENT_BYTES`] without `pages`; a `pages` that is not a
/// range within the document or spans more than [`MAX_PAGES_PER_READ`] pages; pages that
/// come to more than [`MAX_SENT_BYTES`].
pub fn read(path: &Path, bytes: &[u8], pages: Option<&str>) -> Result<ToolOutput, ToolError> {
    let shown = path.display();
    let invalid = |why: String| ToolError::InvalidInput(format!("{shown}: {why}"));
    let unreadable = |error: lopdf::Error| invalid(format!("could not be read as a PDF: {error}"));
    // The page count first, from the cross-reference table and the page tree only: a long
    // PDF asked for whole is refused without loading every object.
    let metadata = Document::load_metadata_mem(bytes).map_err(unreadable)?;
    if metadata.encrypted {
        return Err(invalid(
            "the PDF is encrypted; only unencrypted PDFs can be read".into(),
        ));
    }
    let count = metadata.page_count;
    if count == 0 {
        return Err(invalid("the PDF has no pages".into()));
    }
    let ask_for_pages = |why: String| {
        invalid(format!(
            "{why}; read it {MAX_PAGES_PER_READ} pages at a time with the `pages` input (e.g. pages: \"1-{}\")",
            MAX_PAGES_PER_READ.min(count)
        ))
    };
    let range = match pages {
        None if count > WHOLE_PAGES => {
            return Err(ask_for_pages(format!(
                "the PDF has {count} pages, more than the {WHOLE_PAGES} read at once"
            )));
        }
        None if bytes.len() > MAX_SENT_BYTES => {
            return Err(ask_for_pages(format!(
                "the PDF has {} bytes, more than the {MAX_SENT_BYTES} sent at once",
                bytes.len()
            )));
        }
        None => None,
        Some(text) => Some((text, Pages::parse(text, count).map_err(invalid)?)),
    };
    // Loaded whole: every object must parse before anything is sent.
    let mut document = Document::load_mem(bytes).map_err(unreadable)?;
    // An offset corrected is everyday damage every viewer repairs; a table rebuilt by
    // scanning means objects may be missing or stale (a file cut short, most often).
    if matches!(
        document.xref_recovery,
        Some(lopdf::xref::XrefRecovery::Reconstructed)
    ) {
        return Err(invalid(
            "the PDF is damaged (cut short, or its cross-reference table is unreadable), so pages may be missing; it was not sent".into(),
        ));
    }
    // The count the pages were checked against must be the pages there are.
    let held = u32::try_from(document.get_pages().len()).unwrap_or(u32::MAX);
    if held != count {
        return Err(invalid(format!(
            "the PDF is damaged: its page tree counts {count} pages but holds {held}; it was not sent"
        )));
    }
    let (sent, note) = match range {
        None => (
            bytes.to_vec(),
            format!("PDF {shown}: {count} pages, {} bytes.", bytes.len()),
        ),
        Some((text, range)) => {
            let cut = cut(&mut document, range, count).map_err(|error| {
                invalid(format!("pages {text:?} could not be cut out: {error}"))
            })?;
            if cut.len() > MAX_SENT_BYTES {
                return Err(invalid(format!(
                    "pages {text:?} come to {} bytes, more than the {MAX_SENT_BYTES} sent at once; ask for fewer pages",
                    cut.len()
                )));
            }
            let note = format!(
                "PDF {shown}: pages {}-{} of {count} ({} pages, {} bytes; the file has {} bytes).",
                range.first,
                range.last,
                range.len(),
                cut.len(),
                bytes.len()
            );
            (cut, note)
        }
    };
    let data = base64::engine::general_purpose::STANDARD.encode(&sent);
    let block = ContentBlock::Document(DocumentBlock {
        source: json!({"type": "base64", "media_type": "application/pdf", "data": data}),
        cache_control: None,
        extra: Default::default(),
    });
    let mut output = ToolOutput::text(note);
    output.content =
        ToolResultContent::Blocks(vec![ContentBlock::text(output.content.text()), block]);
    Ok(output.with_structured(json!({
        "type": "pdf",
        "file": {
            "filePath": path.display().to_string(),
            "base64": data,
            "originalSize": bytes.len(),
        },
    })))
}

/// `document` (of `count` pages) cut down to `range` and written out.
fn cut(document: &mut Document, range: Pages, count: u32) -> Result<Vec<u8>, lopdf::Error> {
    let others: Vec<u32> = (1..=count)
        .filter(|page| !(range.first..=range.last).contains(page))
        .collect();
    document.delete_pages(&others);
    document.prune_objects();
    let mut out = Vec::new();
    document.save_to(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_are_parsed_and_checked_against_the_document() {
        let ok = |text, count| Pages::parse(text, count).map(|p| (p.first, p.last));
        assert_eq!(ok("3", 10), Ok((3, 3)));
        assert_eq!(ok(" 2 - 5 ", 10), Ok((2, 5)));
        assert_eq!(ok("95-", 100), Ok((95, 100)));
        assert_eq!(ok("10-", 500), Ok((10, 29)));
        assert_eq!(ok("1-20", 500), Ok((1, 20)));
        let error = |text, count| Pages::parse(text, count).unwrap_err();
        assert!(error("1-21", 500).contains("names 21 pages; read at most 20"));
        assert!(error("11", 10).contains("past the end: the PDF has 10 pages"));
        assert!(error("0", 10).contains("a page number or a range"));
        assert!(error("5-3", 10).contains("a page number or a range"));
        assert!(error("all", 10).contains("got \"all\""));
    }
}
