//! What the Chat Completions stream tests share: decoding a body pushed in pieces.
// Test helpers: a failure here is a test failure.
#![allow(dead_code)]

use bytes::Bytes;
use protocol::ContentBlock;
use provider::chat::ChatStream;
use sse_parser::{FinalMessage, Item};

/// Decodes `body` pushed in pieces cut at `cuts` (offsets, in any order, repeats allowed):
/// the final message and the blocks completed on the way, or the error.
pub fn decode_cut(
    body: &[u8],
    cuts: impl IntoIterator<Item = usize>,
) -> Result<(FinalMessage, Vec<ContentBlock>), String> {
    let mut points: Vec<usize> = cuts.into_iter().map(|cut| cut.min(body.len())).collect();
    points.sort_unstable();
    points.dedup();
    let mut stream = ChatStream::new();
    let mut blocks = Vec::new();
    let mut done = None;
    let mut start = 0;
    for end in points.into_iter().chain([body.len()]) {
        stream.push(Bytes::copy_from_slice(&body[start..end]));
        start = end;
        while let Some(item) = stream.next_item().map_err(|error| error.to_string())? {
            match item {
                Item::BlockComplete(block) => blocks.push(block.block),
                Item::MessageComplete(message) => done = Some(*message),
                _ => {}
            }
        }
    }
    let finished = stream.finish().map_err(|error| error.to_string())?;
    let message = done.or(finished).ok_or("no message")?;
    Ok((message, blocks))
}

/// [`decode_cut`] with pieces of `size` bytes (0: whole).
pub fn decode(body: &[u8], size: usize) -> Result<(FinalMessage, Vec<ContentBlock>), String> {
    if size == 0 {
        return decode_cut(body, []);
    }
    decode_cut(body, (size..body.len()).step_by(size))
}
