//! Read of PDFs: document blocks within the API's limits, the file's own bytes when short,
//! the pages asked for cut out as a document of their own when long; damage is a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use base64::Engine as _;
use common::Env;
use protocol::{ContentBlock, ToolResultContent};
use serde_json::json;

/// The document block of a Read result, decoded.
fn document_of(content: &ToolResultContent) -> Vec<u8> {
    let ToolResultContent::Blocks(blocks) = content else {
        panic!("a text result: {content:?}");
    };
    let document = blocks
        .iter()
        .find_map(|block| match block {
            ContentBlock::Document(document) => Some(document),
            _ => None,
        })
        .expect("a document block");
    assert_eq!(document.source["media_type"], "application/pdf");
    base64::engine::general_purpose::STANDARD
        .decode(document.source["data"].as_str().unwrap())
        .unwrap()
}

/// The text each page of `pdf` shows.
fn page_texts(pdf: &[u8]) -> Vec<String> {
    let document = lopdf::Document::load_mem(pdf).unwrap();
    let pages: Vec<u32> = document.get_pages().keys().copied().collect();
    pages
        .iter()
        .map(|page| document.extract_text(&[*page]).unwrap().trim().to_owned())
        .collect()
}

#[tokio::test]
async fn a_short_pdf_is_sent_as_the_file_itself() {
    let env = Env::new("pdf-short");
    let bytes = testkit::pdf::document(3, 100).unwrap();
    std::fs::write(env.ws().join("report.pdf"), &bytes).unwrap();
    let output = env
        .call("Read", json!({"file_path": "report.pdf"}))
        .await
        .unwrap();
    assert_eq!(document_of(&output.content), bytes);
    let text = output.content.text();
    assert!(text.contains("report.pdf: 3 pages"), "{text}");
    let structured = output.structured.unwrap();
    assert_eq!(structured["type"], "pdf");
    assert_eq!(structured["file"]["originalSize"], bytes.len());
    // Read counts as a read: Write may replace it now.
    env.call(
        "Write",
        json!({"file_path": "report.pdf", "content": "replaced"}),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_long_pdf_is_read_a_range_of_pages_at_a_time() {
    let env = Env::new("pdf-long");
    let bytes = testkit::pdf::document(500, 200).unwrap();
    std::fs::write(env.ws().join("book.pdf"), &bytes).unwrap();

    let error = env.err("Read", json!({"file_path": "book.pdf"})).await;
    assert!(
        error.contains("the PDF has 500 pages, more than the 10 read at once"),
        "{error}"
    );
    assert!(error.contains("pages: \"1-20\""), "{error}");

    let output = env
        .call("Read", json!({"file_path": "book.pdf", "pages": "250-259"}))
        .await
        .unwrap();
    let sent = document_of(&output.content);
    let texts = page_texts(&sent);
    assert_eq!(texts.len(), 10);
    assert_eq!(texts[0], "Page 250 of 500");
    assert_eq!(texts[9], "Page 259 of 500");
    assert!(
        sent.len() < bytes.len() / 10,
        "{} of {}",
        sent.len(),
        bytes.len()
    );
    let text = output.content.text();
    assert!(text.contains("pages 250-259 of 500 (10 pages"), "{text}");

    let error = env
        .err("Read", json!({"file_path": "book.pdf", "pages": "1-21"}))
        .await;
    assert!(error.contains("names 21 pages; read at most 20"), "{error}");
    let error = env
        .err("Read", json!({"file_path": "book.pdf", "pages": "499-501"}))
        .await;
    assert!(
        error.contains("past the end: the PDF has 500 pages"),
        "{error}"
    );
}

#[tokio::test]
async fn damaged_pdfs_and_misplaced_pages_are_clear_errors() {
    let env = Env::new("pdf-damaged");
    let bytes = testkit::pdf::document(20, 200).unwrap();
    std::fs::write(env.ws().join("cut.pdf"), &bytes[..bytes.len() / 2]).unwrap();
    let error = env.err("Read", json!({"file_path": "cut.pdf"})).await;
    assert!(
        error.contains("cut.pdf: the PDF is damaged")
            || error.contains("could not be read as a PDF"),
        "{error}"
    );
    std::fs::write(env.ws().join("junk.pdf"), b"%PDF-1.7\nnot really\n").unwrap();
    let error = env.err("Read", json!({"file_path": "junk.pdf"})).await;
    assert!(
        error.contains("junk.pdf: could not be read as a PDF"),
        "{error}"
    );

    std::fs::write(env.ws().join("notes.txt"), "one\ntwo\n").unwrap();
    let error = env
        .err("Read", json!({"file_path": "notes.txt", "pages": "1"}))
        .await;
    assert!(error.contains("pages is for PDF files only"), "{error}");
}
