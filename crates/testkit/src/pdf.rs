//! PDFs made for tests and benchmarks: `pages` pages, each saying "Page N of M" in Courier
//! and carrying `filler` bytes of content (so size grows with pages as in a real document).

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};

/// A PDF of `pages` pages; each page's content stream is padded to at least `filler` bytes.
///
/// # Errors
///
/// Only if lopdf fails to write the document it built (an I/O error on a `Vec`, which does
/// not happen, or an encoding error for the page operators).
pub fn document(pages: u32, filler: usize) -> Result<Vec<u8>, lopdf::Error> {
    let mut document = Document::with_version("1.5");
    let pages_id = document.new_object_id();
    let font = document.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Courier",
    });
    let resources = document.add_object(dictionary! {
        "Font" => dictionary! { "F1" => font },
    });
    let mut kids = Vec::new();
    for page in 1..=pages {
        let mut operations = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 24.into()]),
            Operation::new("Td", vec![72.into(), 720.into()]),
            Operation::new(
                "Tj",
                vec![Object::string_literal(format!("Page {page} of {pages}"))],
            ),
            Operation::new("ET", vec![]),
        ];
        // Filler: invisible text moves, as many as it takes.
        while operations.len() * 12 < filler {
            operations.push(Operation::new("Td", vec![0.into(), 0.into()]));
        }
        let content = Content { operations }.encode()?;
        let contents = document.add_object(Stream::new(dictionary! {}, content));
        let page = document.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => contents,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        });
        kids.push(page.into());
    }
    document.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => i64::from(pages),
            "Resources" => resources,
        }),
    );
    let catalog = document.add_object(dictionary! {
        "Type" => "Catalog",
        "Pages" => pages_id,
    });
    document.trailer.set("Root", catalog);
    let mut out = Vec::new();
    document.save_to(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_made_pdf_has_its_pages() {
        let bytes = super::document(12, 100).unwrap_or_default();
        let document = lopdf::Document::load_mem(&bytes).map_err(|e| e.to_string());
        assert_eq!(document.map(|d| d.get_pages().len()), Ok(12));
    }
}
