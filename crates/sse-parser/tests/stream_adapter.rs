//! The `stream` feature's adapters over a stream of byte chunks.
#![cfg(feature = "stream")]
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use futures_util::StreamExt as _;
use sse_parser::Item;
use sse_parser::stream::{ItemStream, SseStream, StreamError};

const BODY: &str = concat!(
    "event: message_start\n",
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
    "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"h\u{e9}llo\"}}\n\n",
    "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
    "data: {\"type\":\"message_stop\"}\n\n",
);

fn chunks(size: usize) -> Vec<Result<Bytes, std::io::Error>> {
    BODY.as_bytes()
        .chunks(size)
        .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
        .collect()
}

#[tokio::test]
async fn item_stream_yields_blocks_and_the_message_whatever_the_chunking() {
    for size in [1, 3, 7, 64, BODY.len()] {
        let items: Vec<Item> = ItemStream::new(futures_util::stream::iter(chunks(size)))
            .map(|item| item.unwrap())
            .collect()
            .await;
        let kinds: Vec<&str> = items
            .iter()
            .map(|item| match item {
                Item::Event(_) => "event",
                Item::BlockComplete(_) => "block",
                Item::MessageComplete(_) => "message",
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "event", "event", "event", "event", "block", "event", "event", "message"
            ],
            "chunk size {size}"
        );
        let Some(Item::MessageComplete(done)) = items.last() else {
            panic!()
        };
        assert_eq!(done.message.text(), "h\u{e9}llo");
    }
}

#[tokio::test]
async fn transport_errors_and_truncation_surface() {
    let mut input = chunks(40);
    input.truncate(5);
    input.push(Err(std::io::Error::other("connection reset")));
    let results: Vec<_> = SseStream::new(futures_util::stream::iter(input))
        .collect()
        .await;
    let last = results.last().unwrap();
    assert!(
        matches!(last, Err(StreamError::Transport(error)) if error.to_string() == "connection reset")
    );

    // A body cut after the first delta: the pipeline reports an incomplete stream.
    let cut = BODY.find("data: {\"type\":\"content_block_stop\"").unwrap();
    let input = vec![Ok::<_, std::io::Error>(Bytes::copy_from_slice(
        &BODY.as_bytes()[..cut],
    ))];
    let results: Vec<_> = ItemStream::new(futures_util::stream::iter(input))
        .collect()
        .await;
    let Some(Err(StreamError::Parse(error))) = results.last() else {
        panic!("{results:?}")
    };
    assert!(error.is_retryable());
    assert_eq!(
        error.to_string(),
        "stream ended before message_stop: message_start, 1 block (0 stopped), block [0] still open, no stop_reason; 3 events in all"
    );
}
