//! Read of images: PNG, JPEG, GIF and WebP (told by their first bytes, not their names) come
//! back as an image content block the model can see, within the API's limits.
//!
//! The limits, from the Messages API's vision documentation: an image over 8000 px on a side
//! is rejected, and one whose long edge is over 1568 px is scaled down by the API anyway
//! (costing time, adding nothing), so an image is sent with a long edge of at most
//! [`LONG_EDGE`] px; an image block's data must stay under 5 MB of base64, so the encoded
//! image is at most [`MAX_SENT_BYTES`]. An image within both is sent as the file's own bytes;
//! a larger one is decoded (at most [`MAX_FILE_BYTES`] of file and [`MAX_DECODED_BYTES`] of
//! pixels), shrunk, and encoded again: PNG for PNG and GIF (screenshots, diagrams), JPEG for
//! the rest and whenever a PNG would be too big. An animated GIF or WebP is sent as its first
//! frame. The model's context counts an image at the estimate `context` gives image blocks.

use std::io::Cursor;
use std::path::Path;

use base64::Engine as _;
use executor::{ToolError, ToolOutput};
use image::{DynamicImage, ImageFormat, ImageReader, Limits};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::json;

/// The longest edge of an image sent, in pixels (the API's own downscaling threshold).
pub const LONG_EDGE: u32 = 1568;

/// The most bytes of an encoded image sent: 3.75 MB, which base64 makes 5 MB, the API's
/// limit for an image block.
pub const MAX_SENT_BYTES: usize = 3_750_000;

/// The largest image file read, in bytes (64 MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The most memory an image may decode to, in bytes (256 MiB: 64 megapixels of RGBA, such
/// as 8000x8000, the largest image the API takes whole).
pub const MAX_DECODED_BYTES: u64 = 256 << 20;

/// Held while an image file is read, decoded and shrunk: one image at a time in the
/// process, so many Reads of large images at once (the executor runs Reads in parallel) never
/// hold more than one image's file and pixels.
static DECODING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The turn to read and decode an image: held by whoever reads an image file or decodes
/// one, until its block is made (see [`DECODING`]).
pub(crate) fn turn() -> std::sync::MutexGuard<'static, ()> {
    // A poisoned lock guarded nothing but the turn itself.
    DECODING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The image format a file's first bytes announce, when it is one the API takes.
pub(crate) fn format_of(head: &[u8]) -> Option<ImageFormat> {
    match image::guess_format(head).ok()? {
        format @ (ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP) => {
            Some(format)
        }
        _ => None,
    }
}

/// Whether `head`, a file's first bytes, announces an image the model can see.
pub fn is_image(head: &[u8]) -> bool {
    format_of(head).is_some()
}

/// The image file at `path`, which the user named themselves (a file pasted into the
/// prompt, wherever it is): read as Read reads an image, without the workspace's bounds
/// (the user chose it) and without counting as read. At most [`MAX_FILE_BYTES`].
///
/// # Errors
///
/// A file that cannot be read, is larger than [`MAX_FILE_BYTES`], is not a PNG, JPEG, GIF
/// or WebP by its first bytes, or does not decode.
pub fn read_file(path: &Path) -> Result<ToolOutput, ToolError> {
    let shown = path.display();
    let metadata = std::fs::metadata(path)
        .map_err(|error| ToolError::InvalidInput(format!("{shown}: {error}")))?;
    if !metadata.is_file() {
        return Err(ToolError::InvalidInput(format!("{shown} is not a file")));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(ToolError::InvalidInput(format!(
            "{shown} has {} bytes; images of at most {MAX_FILE_BYTES} bytes are read",
            metadata.len()
        )));
    }
    let _turn = turn();
    let bytes = std::fs::read(path)
        .map_err(|error| ToolError::InvalidInput(format!("{shown}: {error}")))?;
    let format = format_of(&bytes[..bytes.len().min(64)]).ok_or_else(|| {
        ToolError::InvalidInput(format!("{shown} is not a PNG, JPEG, GIF or WebP image"))
    })?;
    read(path, &bytes, format)
}

/// The most images one result carries (a notebook's outputs): past it, a line says how many
/// more there were. Each image costs up to about 1,600 tokens.
pub const MAX_IMAGES_PER_RESULT: usize = 20;

/// An image given as base64 (a notebook's output, named `label`), checked as a file is: its
/// first bytes must announce a PNG, JPEG, GIF or WebP whatever it was labelled, it must
/// decode, and it is scaled within the API's limits. The caller holds [`turn`].
///
/// # Errors
///
/// Data that is not base64, larger than [`MAX_FILE_BYTES`], not an image the API takes, or
/// that does not decode.
pub(crate) fn block_from_base64(label: &str, data: &str) -> Result<ContentBlock, ToolError> {
    let data: String = data.chars().filter(|c| !c.is_whitespace()).collect();
    if data.len() as u64 > MAX_FILE_BYTES / 3 * 4 {
        return Err(ToolError::InvalidInput(format!(
            "{label}: {} characters of base64, more than an image is read with",
            data.len()
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|error| ToolError::InvalidInput(format!("{label}: not base64 ({error})")))?;
    let format = format_of(&bytes[..bytes.len().min(64)]).ok_or_else(|| {
        ToolError::InvalidInput(format!("{label}: not a PNG, JPEG, GIF or WebP image"))
    })?;
    let output = read(Path::new(label), &bytes, format)?;
    match output.content {
        ToolResultContent::Blocks(blocks) => blocks
            .into_iter()
            .find(|block| matches!(block, ContentBlock::Image(_)))
            .ok_or_else(|| ToolError::CouldNotRun(format!("{label}: no image was made"))),
        ToolResultContent::Text(_) => Err(ToolError::CouldNotRun(format!(
            "{label}: no image was made"
        ))),
    }
}

/// The MIME type the API names `format` by.
fn media_type(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "image/png",
        ImageFormat::Gif => "image/gif",
        ImageFormat::WebP => "image/webp",
        _ => "image/jpeg",
    }
}

/// The image `bytes` (the file at `path`, already confined and read whole, at most
/// [`MAX_FILE_BYTES`], by a caller holding [`turn`]) in `format`: its image block, with a line of text saying what was
/// sent, and Claude Code's structured `{type: "image", file}`.
///
/// # Errors
///
/// An image that does not decode (corrupt, truncated), or one that would decode to more than
/// [`MAX_DECODED_BYTES`].
pub(crate) fn read(
    path: &Path,
    bytes: &[u8],
    format: ImageFormat,
) -> Result<ToolOutput, ToolError> {
    let shown = path.display();
    let size = bytes.len();
    let corrupt = |error: image::ImageError| {
        ToolError::InvalidInput(format!(
            "{shown} could not be read as {}: {error}",
            media_type(format)
        ))
    };
    let reader = || {
        let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
        let mut limits = Limits::default();
        limits.max_alloc = Some(MAX_DECODED_BYTES);
        reader.limits(limits);
        reader
    };
    let (width, height) = reader().into_dimensions().map_err(corrupt)?;
    let (sent, sent_format, sent_size) =
        if width.max(height) <= LONG_EDGE && bytes.len() <= MAX_SENT_BYTES {
            // Within the limits: the file itself, checked whole first (a truncated file
            // would be rejected by the API).
            reader().decode().map_err(corrupt)?;
            (bytes.to_vec(), format, (width, height))
        } else {
            let decoded = reader().decode().map_err(corrupt)?;
            shrink(&decoded, format)?
        };
    let media = media_type(sent_format);
    let data = base64::engine::general_purpose::STANDARD.encode(&sent);
    let note = if sent_size == (width, height) && sent_format == format {
        format!("Image {shown}: {width}x{height} px, {size} bytes.")
    } else {
        format!(
            "Image {shown}: {width}x{height} px, {size} bytes; sent scaled to {}x{} px as {media} ({} bytes).",
            sent_size.0,
            sent_size.1,
            sent.len()
        )
    };
    let block = ContentBlock::Image(protocol::ImageBlock {
        source: json!({"type": "base64", "media_type": media, "data": data}),
        cache_control: None,
        extra: Default::default(),
    });
    let mut output = ToolOutput::text(note);
    output.content =
        ToolResultContent::Blocks(vec![ContentBlock::text(output.content.text()), block]);
    Ok(output.with_structured(json!({
        "type": "image",
        "file": {
            "base64": data,
            "type": media,
            "originalSize": size,
            "dimensions": {
                "originalWidth": width,
                "originalHeight": height,
                "displayWidth": sent_size.0,
                "displayHeight": sent_size.1,
            },
        },
    })))
}

/// An image as sent: its encoded bytes, their format and its size in pixels.
type Sent = (Vec<u8>, ImageFormat, (u32, u32));

/// `image` scaled so its long edge is at most [`LONG_EDGE`] and encoded within
/// [`MAX_SENT_BYTES`]: PNG for a PNG or GIF when it fits, else JPEG at falling quality, then
/// smaller.
fn shrink(image: &DynamicImage, original: ImageFormat) -> Result<Sent, ToolError> {
    let mut edge = LONG_EDGE.min(image.width().max(image.height()));
    loop {
        let scaled = if image.width().max(image.height()) > edge {
            image.thumbnail(edge, edge)
        } else {
            image.clone()
        };
        let size = (scaled.width(), scaled.height());
        if matches!(original, ImageFormat::Png | ImageFormat::Gif) {
            let png = encode(&scaled, ImageFormat::Png, 0)?;
            if png.len() <= MAX_SENT_BYTES {
                return Ok((png, ImageFormat::Png, size));
            }
        }
        for quality in [85, 70, 50] {
            let jpeg = encode(&scaled, ImageFormat::Jpeg, quality)?;
            if jpeg.len() <= MAX_SENT_BYTES {
                return Ok((jpeg, ImageFormat::Jpeg, size));
            }
        }
        if edge <= 64 {
            return Err(ToolError::CouldNotRun(
                "the image could not be made small enough to send".into(),
            ));
        }
        edge /= 2;
    }
}

/// `image` as `format` (JPEG at `quality`, without transparency).
fn encode(image: &DynamicImage, format: ImageFormat, quality: u8) -> Result<Vec<u8>, ToolError> {
    let mut out = Cursor::new(Vec::new());
    let written = if format == ImageFormat::Jpeg {
        let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality);
        DynamicImage::ImageRgb8(image.to_rgb8()).write_with_encoder(encoder)
    } else {
        image.write_to(&mut out, format)
    };
    written
        .map_err(|error| ToolError::CouldNotRun(format!("could not encode the image: {error}")))?;
    Ok(out.into_inner())
}
