//! Images an MCP server sends (a tool's `image` content, a resource's image blob), checked
//! before they reach the model: the API refuses a request that holds an image it cannot
//! read, which would stop the turn. What comes in is base64 labelled with a MIME type; what
//! goes out is an image block only when the data decodes, its first bytes announce a PNG,
//! JPEG, GIF or WebP (the type sent is that one, whatever the label said), and it is within
//! the API's size limit. Servers are not asked to scale: a larger image is a line saying so.

use base64::Engine as _;
use protocol::ContentBlock;
use serde_json::json;

/// The most images one result carries; past it, each is a line.
pub const MAX_PER_RESULT: usize = 20;

/// The most bytes of one image (3.75 MB: 5 MB once base64-encoded, the API's limit for an
/// image block).
pub const MAX_BYTES: usize = 3_750_000;

/// The image block of base64 `data`, or why it cannot be one.
///
/// # Errors
///
/// Data that is not base64, too large, or not a PNG, JPEG, GIF or WebP by its first bytes.
pub fn checked(data: &str) -> Result<ContentBlock, String> {
    let data: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    if data.len() > MAX_BYTES / 3 * 4 + 4 {
        return Err(format!(
            "{} characters of base64, more than the API takes ({MAX_BYTES} bytes)",
            data.len()
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|error| format!("not base64 ({error})"))?;
    let media = media_type(&bytes).ok_or("not a PNG, JPEG, GIF or WebP image")?;
    Ok(ContentBlock::Image(protocol::ImageBlock {
        source: json!({"type": "base64", "media_type": media, "data": data}),
        cache_control: None,
        extra: serde_json::Map::new(),
    }))
}

/// The type `bytes` announce, among the ones the API takes.
fn media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_images_within_the_limit_become_blocks() {
        // A 1x1 GIF labelled anything is sent as a GIF.
        let gif = "R0lGODlhAQABAAAAACw=";
        let block = checked(gif).unwrap_or_else(|why| panic!("{why}"));
        let ContentBlock::Image(image) = block else {
            panic!("not an image")
        };
        assert_eq!(image.source["media_type"], "image/gif");
        assert!(
            checked("not base64 <>!!")
                .unwrap_err()
                .contains("not base64")
        );
        assert!(checked("aGVsbG8=").unwrap_err().contains("not a PNG"));
        let huge = "A".repeat(MAX_BYTES / 3 * 4 + 100);
        assert!(
            checked(&huge)
                .unwrap_err()
                .contains("more than the API takes")
        );
    }
}
