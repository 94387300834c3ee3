//! Read of images: image blocks within the API's limits, the file's own bytes when they fit,
//! scaled and encoded again when not; a corrupt image is a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use base64::Engine as _;
use common::Env;
use image::{ImageFormat, RgbImage};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::json;

/// A `width` x `height` image with a pattern (so it does not compress to nothing), encoded.
fn picture(width: u32, height: u32, format: ImageFormat) -> Vec<u8> {
    let image = RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 251) as u8, (y % 241) as u8, ((x * y) % 239) as u8])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// The image block of a Read result: its media type and decoded bytes.
fn image_of(content: &ToolResultContent) -> (String, Vec<u8>) {
    let ToolResultContent::Blocks(blocks) = content else {
        panic!("a text result: {content:?}");
    };
    let image = blocks
        .iter()
        .find_map(|block| match block {
            ContentBlock::Image(image) => Some(image),
            _ => None,
        })
        .expect("an image block");
    let media = image.source["media_type"].as_str().unwrap().to_owned();
    let data = base64::engine::general_purpose::STANDARD
        .decode(image.source["data"].as_str().unwrap())
        .unwrap();
    (media, data)
}

#[tokio::test]
async fn a_small_image_is_sent_as_the_file_itself() {
    let env = Env::new("media-small");
    let bytes = picture(120, 80, ImageFormat::Png);
    // A name that says nothing: the first bytes tell.
    std::fs::write(env.ws().join("shot.bin"), &bytes).unwrap();
    let output = env
        .call("Read", json!({"file_path": "shot.bin"}))
        .await
        .unwrap();
    let (media, data) = image_of(&output.content);
    assert_eq!(media, "image/png");
    assert_eq!(data, bytes);
    assert!(output.content.text().contains("120x80 px"));
    let structured = output.structured.unwrap();
    assert_eq!(structured["type"], "image");
    assert_eq!(structured["file"]["dimensions"]["originalWidth"], 120);
}

#[tokio::test]
async fn a_large_image_is_scaled_to_the_apis_limits() {
    let env = Env::new("media-large");
    std::fs::write(
        env.ws().join("big.png"),
        picture(3000, 2000, ImageFormat::Png),
    )
    .unwrap();
    std::fs::write(
        env.ws().join("photo.jpg"),
        picture(4000, 1000, ImageFormat::Jpeg),
    )
    .unwrap();
    for (file, media) in [("big.png", "image/png"), ("photo.jpg", "image/jpeg")] {
        let output = env
            .call("Read", json!({ "file_path": file }))
            .await
            .unwrap();
        let (sent_media, data) = image_of(&output.content);
        assert!(data.len() <= tools::media::MAX_SENT_BYTES, "{file}");
        let decoded = image::load_from_memory(&data).unwrap();
        assert_eq!(
            decoded.width().max(decoded.height()),
            tools::media::LONG_EDGE,
            "{file}"
        );
        // A PNG stays PNG when it fits, else JPEG; a JPEG stays JPEG.
        assert!(
            sent_media == media || sent_media == "image/jpeg",
            "{file}: {sent_media}"
        );
        assert!(output.content.text().contains("sent scaled to"), "{file}");
    }
}

#[tokio::test]
async fn a_corrupt_image_is_a_clear_error() {
    let env = Env::new("media-corrupt");
    let bytes = picture(300, 300, ImageFormat::Png);
    std::fs::write(env.ws().join("cut.png"), &bytes[..bytes.len() / 2]).unwrap();
    let error = env.err("Read", json!({"file_path": "cut.png"})).await;
    assert!(
        error.contains("cut.png could not be read as image/png"),
        "{error}"
    );
}
