//! Token counts and how to estimate them.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub};

use base64::Engine as _;
use protocol::{ContentBlock, DocumentBlock, ImageBlock, MessageParam, ToolResultContent, Usage};

/// A number of tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tokens(pub u64);

impl Tokens {
    /// Zero tokens.
    pub const ZERO: Self = Self(0);

    /// `self - other`, or zero when `other` is larger.
    pub fn saturating_sub(self, other: Self) -> Self {
        Self(self.0.saturating_sub(other.0))
    }
}

impl Add for Tokens {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl AddAssign for Tokens {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// Saturating subtraction: a token budget never goes negative.
impl Sub for Tokens {
    type Output = Self;
    fn sub(self, other: Self) -> Self {
        self.saturating_sub(other)
    }
}

impl Sum for Tokens {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::ZERO, Add::add)
    }
}

impl fmt::Display for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tokens", self.0)
    }
}

/// Estimates how many tokens content will cost. Only the provider knows the truth (its
/// `usage`); estimates fill the gap between two responses.
pub trait TokenEstimator: Send + Sync {
    /// Tokens of a piece of text.
    fn text(&self, text: &str) -> Tokens;

    /// Tokens of an image block.
    fn image(&self, image: &ImageBlock) -> Tokens;

    /// Tokens of a document block.
    fn document(&self, document: &DocumentBlock) -> Tokens;

    /// Tokens of one content block.
    fn block(&self, block: &ContentBlock) -> Tokens {
        match block {
            ContentBlock::Text(text) => self.text(&text.text),
            ContentBlock::Image(image) => self.image(image),
            ContentBlock::Document(document) => self.document(document),
            ContentBlock::ToolUse(tool_use) => {
                self.text(&tool_use.name) + self.text(&tool_use.input.to_string())
            }
            ContentBlock::ToolResult(result) => match &result.content {
                ToolResultContent::Text(text) => self.text(text),
                ToolResultContent::Blocks(blocks) => blocks.iter().map(|b| self.block(b)).sum(),
            },
            ContentBlock::Thinking(thinking) => self.text(&thinking.thinking),
            ContentBlock::RedactedThinking(redacted) => self.text(&redacted.data),
            other => self.text(&serde_json::to_string(other).unwrap_or_default()),
        }
    }

    /// Tokens of one message: its blocks plus a small framing cost.
    fn message(&self, message: &MessageParam) -> Tokens {
        Tokens(4) + message.content.iter().map(|block| self.block(block)).sum()
    }

    /// Tokens of a list of messages.
    fn messages(&self, messages: &[MessageParam]) -> Tokens {
        messages.iter().map(|message| self.message(message)).sum()
    }
}

/// The default estimator: one token per 4 bytes of text; an image by its size in pixels; a
/// PDF by its pages.
///
/// - Text: Claude's tokenizers average about 3.5-4 bytes per token on English and code, fewer
///   on other scripts.
/// - An image costs width x height / 750 tokens, at most 1,600 (the ~1.15-megapixel size the
///   API scales larger images down to), per the vision documentation; its size is read from
///   the first bytes of its data. An image whose size cannot be read (a URL, an unknown
///   format) counts the most.
/// - A PDF costs 3,000 tokens a page (the top of the 1,500-3,000 the PDF documentation gives
///   for a page's text; each page's image is counted within it). The pages are the page
///   tree's `/Count` where the file shows it, else one per 50 KB.
/// - A plain-text document costs its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BytesEstimator {
    /// Bytes per token. Default 4.
    pub bytes_per_token: u64,
    /// The most tokens one image costs. Default 1,600.
    pub image_tokens: u64,
    /// Tokens per PDF page. Default 3,000.
    pub pdf_page_tokens: u64,
}

impl Default for BytesEstimator {
    fn default() -> Self {
        Self {
            bytes_per_token: 4,
            image_tokens: 1_600,
            pdf_page_tokens: 3_000,
        }
    }
}

/// The most base64 characters of an image's data decoded to find its size (48 KiB of image:
/// a JPEG's size can follow its EXIF data).
const IMAGE_HEAD_CHARS: usize = 64 * 1024;

/// Bytes of PDF counted as one page when the page tree's `/Count` cannot be seen (it is
/// inside a compressed object stream).
const PDF_BYTES_PER_PAGE: usize = 50_000;

impl TokenEstimator for BytesEstimator {
    fn text(&self, text: &str) -> Tokens {
        Tokens((text.len() as u64).div_ceil(self.bytes_per_token.max(1)))
    }

    fn image(&self, image: &ImageBlock) -> Tokens {
        let pixels = base64_data(&image.source).and_then(|data| {
            // Whole base64 quanta only, so the head decodes on its own.
            let head = &data[..data.len().min(IMAGE_HEAD_CHARS) / 4 * 4];
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(head)
                .ok()?;
            let size = imagesize::blob_size(&bytes).ok()?;
            Some((size.width as u64).saturating_mul(size.height as u64))
        });
        Tokens(pixels.map_or(self.image_tokens, |pixels| {
            pixels.div_ceil(750).clamp(1, self.image_tokens)
        }))
    }

    fn document(&self, document: &DocumentBlock) -> Tokens {
        let source = &document.source;
        match source.get("type").and_then(serde_json::Value::as_str) {
            Some("text") => self.text(
                source
                    .get("data")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default(),
            ),
            _ => {
                let pages = base64_data(source)
                    .and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok())
                    .map_or(1, |pdf| pdf_pages(&pdf));
                Tokens(pages.saturating_mul(self.pdf_page_tokens))
            }
        }
    }
}

/// The base64 data of a `{"type": "base64", "data": …}` source.
fn base64_data(source: &serde_json::Value) -> Option<&str> {
    (source.get("type")?.as_str()? == "base64")
        .then(|| source.get("data")?.as_str())
        .flatten()
}

/// The pages of `pdf` as far as its bytes show them: the largest `/Count` (the page tree's
/// root counts every page), else one per [`PDF_BYTES_PER_PAGE`]; at least 1.
fn pdf_pages(pdf: &[u8]) -> u64 {
    let counted = memchr::memmem::find_iter(pdf, b"/Count")
        .filter_map(|at| {
            let rest = &pdf[at + b"/Count".len()..];
            let digits = rest.iter().skip_while(|b| b.is_ascii_whitespace());
            let number: Vec<u8> = digits
                .take_while(|b| b.is_ascii_digit())
                .copied()
                .take(6)
                .collect();
            std::str::from_utf8(&number).ok()?.parse::<u64>().ok()
        })
        .max();
    counted
        .unwrap_or((pdf.len() / PDF_BYTES_PER_PAGE) as u64)
        .max(1)
}

/// The token count of a history: what the provider reported for the last response, plus an
/// estimate of only the messages appended since.
///
/// `usage` is the last response's usage (input + cache reads + cache writes + output: the whole
/// request and its answer); `covered` is how many leading messages of `messages` that response
/// accounted for (the request's messages plus the response itself). Without a usage everything
/// is estimated.
pub fn history_tokens(
    messages: &[MessageParam],
    last: Option<(&Usage, usize)>,
    estimator: &dyn TokenEstimator,
) -> Tokens {
    match last {
        Some((usage, covered)) if covered <= messages.len() => {
            Tokens(usage.context_tokens()) + estimator.messages(&messages[covered..])
        }
        _ => estimator.messages(messages),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image block of a PNG's first bytes (signature and header) for `width` x `height`.
    fn png(width: u32, height: u32) -> ImageBlock {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        serde_json::from_value(serde_json::json!({
            "source": {"type": "base64", "media_type": "image/png", "data": data}
        }))
        .unwrap_or_else(|error| panic!("{error}"))
    }

    fn pdf(bytes: &[u8]) -> DocumentBlock {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        serde_json::from_value(serde_json::json!({
            "source": {"type": "base64", "media_type": "application/pdf", "data": data}
        }))
        .unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn images_cost_their_pixels_over_750_up_to_the_scaled_size() {
        let estimator = BytesEstimator::default();
        assert_eq!(estimator.image(&png(300, 200)), Tokens(80));
        assert_eq!(estimator.image(&png(1092, 1092)), Tokens(1_590));
        assert_eq!(estimator.image(&png(4000, 3000)), Tokens(1_600));
        let url: ImageBlock = serde_json::from_value(
            serde_json::json!({"source": {"type": "url", "url": "https://x/y.png"}}),
        )
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(
            estimator.image(&url),
            Tokens(1_600),
            "unknown size: the most"
        );
    }

    #[test]
    fn pdfs_cost_their_pages() {
        let estimator = BytesEstimator::default();
        let tree = b"%PDF-1.5\n1 0 obj << /Type /Pages /Count 12 /Kids [...] >> 2 0 obj << /Type /Pages /Count 3 >>";
        assert_eq!(estimator.document(&pdf(tree)), Tokens(36_000));
        let mut packed = b"%PDF-1.7\n".to_vec();
        packed.resize(120_000, b'x');
        assert_eq!(
            estimator.document(&pdf(&packed)),
            Tokens(6_000),
            "no /Count: by size"
        );
        let text: DocumentBlock = serde_json::from_value(serde_json::json!({
            "source": {"type": "text", "media_type": "text/plain", "data": "abcdefgh"}
        }))
        .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(estimator.document(&text), Tokens(2));
    }

    #[test]
    fn bytes_over_four_rounded_up() {
        let estimator = BytesEstimator::default();
        assert_eq!(estimator.text(""), Tokens(0));
        assert_eq!(estimator.text("abcd"), Tokens(1));
        assert_eq!(estimator.text("abcde"), Tokens(2));
        assert_eq!(
            estimator.message(&MessageParam::user_text("x".repeat(400))),
            Tokens(104)
        );
    }

    #[test]
    fn reported_usage_plus_estimate_of_what_came_after() {
        let estimator = BytesEstimator::default();
        let usage: Usage = serde_json::from_str(
            r#"{"input_tokens":10,"cache_read_input_tokens":1000,"cache_creation_input_tokens":90,"output_tokens":100}"#,
        )
        .unwrap();
        let messages = vec![
            MessageParam::user_text("a".repeat(4000)),
            MessageParam::user_text("b".repeat(40)),
        ];
        // The response covered the first message: 1_200 reported + 14 estimated.
        assert_eq!(
            history_tokens(&messages, Some((&usage, 1)), &estimator),
            Tokens(1_214)
        );
        assert_eq!(
            history_tokens(&messages, None, &estimator),
            Tokens(1_004 + 14)
        );
    }
}
