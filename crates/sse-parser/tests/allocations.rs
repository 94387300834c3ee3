//! Heap allocations per event, counted with an instrumented global allocator.
//!
//! The framer must not allocate while draining events whose lines lie inside one chunk (the
//! zero-copy guarantee of `frame.rs`); the full pipeline allocates at most once per text
//! delta (the delta's own `String`). Run with `--nocapture` to see the figures.
//!
//! The allocator counts every thread of the process, so this file holds ONE test: nothing else
//! runs while a region is measured.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::alloc::System;

use bytes::Bytes;
use protocol::{ContentDelta, StreamEvent};
use sse_parser::{Framer, Item, MessageStream};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const EVENTS: usize = 1000;

/// `EVENTS` text deltas of varying size, each `event: content_block_delta\ndata: {...}\n\n`.
fn deltas() -> String {
    let mut body = String::new();
    for i in 0..EVENTS {
        let text = "word ".repeat(1 + i % 16);
        body.push_str("event: content_block_delta\n");
        body.push_str(&format!(
            "data: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{text}\"}}{}}}\n\n",
            " ".repeat(i % 7)
        ));
    }
    body
}

/// A whole message around the deltas.
fn message() -> String {
    const HEAD: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    const TAIL: &str = concat!(
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":900}}\n\n",
        "event: message_stop\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    format!("{HEAD}{}{TAIL}", deltas())
}

/// One chunk whose `Bytes` is already shared: a `Bytes::from(Vec)` is promoted to a shared
/// buffer (one allocation) the first time it is cloned or sliced; do that here, outside any
/// measured region.
fn shared(chunk: Bytes) -> Bytes {
    drop(chunk.clone());
    chunk
}

/// Frames `chunk` and returns (events, allocations, reallocations, bytes allocated) of the
/// draining loop alone.
fn frame_counting(chunk: &Bytes) -> (usize, usize, usize, usize) {
    let mut framer = Framer::new();
    framer.push(chunk.clone());
    let mut events = 0;
    let region = Region::new(GLOBAL);
    while let Some(event) = framer.next_event().unwrap() {
        std::hint::black_box(&event);
        events += 1;
    }
    let change = region.change();
    (
        events,
        change.allocations,
        change.reallocations,
        change.bytes_allocated,
    )
}

#[test]
fn allocations_per_event() {
    // Framer: zero allocations per event when every line lies inside the chunk.
    let chunk = shared(Bytes::from(deltas()));
    // Warm-up: first use of anything lazily initialised.
    let _ = frame_counting(&chunk);
    // The allocator counts every thread, the test harness's too (rarely, under load): the
    // framer is deterministic, so the quietest of three measurements is its own figure.
    let (events, allocations, reallocations, bytes) = (0..3)
        .map(|_| frame_counting(&chunk))
        .min_by_key(|&(_, allocations, reallocations, _)| (allocations, reallocations))
        .unwrap();
    assert_eq!(events, EVENTS);
    println!(
        "framer, one chunk: {allocations} allocations, {reallocations} reallocations, {bytes} bytes for {events} events ({:.3} allocations/event)",
        allocations as f64 / events as f64
    );
    assert_eq!(
        (allocations, reallocations),
        (0, 0),
        "the framer allocated while draining single-chunk events"
    );

    // Framer over 16 KiB chunks: only lines that span two chunks are copied.
    let body = deltas();
    let chunks: Vec<Bytes> = body
        .as_bytes()
        .chunks(16 * 1024)
        .map(Bytes::copy_from_slice)
        .map(shared)
        .collect();
    let mut framer = Framer::new();
    let mut events = 0;
    let region = Region::new(GLOBAL);
    for chunk in &chunks {
        framer.push(chunk.clone());
        while let Some(event) = framer.next_event().unwrap() {
            std::hint::black_box(&event);
            events += 1;
        }
    }
    let change = region.change();
    drop(framer);
    assert_eq!(events, EVENTS);
    println!(
        "framer, 16 KiB chunks ({} chunk boundaries): {} allocations, {} reallocations for {events} events ({:.3} allocations/event)",
        chunks.len() - 1,
        change.allocations,
        change.reallocations,
        change.allocations as f64 / events as f64
    );

    // A line sent one byte per chunk (a hostile server can): the framer holds about the
    // line's bytes, not a record per chunk (found by an attack: 64 times the line before).
    let line = shared(Bytes::from(
        [b"data: ".as_slice(), &[b'x'; 60_000]].concat(),
    ));
    let mut framer = sse_parser::Framer::with_config(sse_parser::FramerConfig {
        max_event_bytes: 64 * 1024,
    });
    let region = Region::new(GLOBAL);
    for at in 0..line.len() {
        framer.push(line.slice(at..at + 1));
        assert!(framer.next_event().unwrap().is_none());
    }
    let change = region.change();
    let held = change.bytes_allocated - change.bytes_deallocated
        + change.bytes_reallocated.max(0) as usize;
    println!("framer, a 60,006-byte line in one-byte chunks: {held} bytes held");
    assert!(
        held < 4 * line.len(),
        "the framer holds {held} bytes for a line of {} bytes",
        line.len()
    );
    drop(framer);

    // Full pipeline: framing, typed decoding, accumulation. Each text delta may allocate
    // once (the `String` its `ContentDelta::Text` owns); the block's text grows in one
    // buffer (a few reallocations in all, as it doubles).
    let chunk = shared(Bytes::from(message()));
    let run = || {
        let mut stream = MessageStream::new();
        stream.push(chunk.clone());
        let mut items = 0;
        let mut events = 0;
        let mut delta_allocations = Vec::new();
        let mut delta_reallocations = 0;
        let whole = Region::new(GLOBAL);
        loop {
            let region = Region::new(GLOBAL);
            let Some(item) = stream.next_item().unwrap() else {
                break;
            };
            let change = region.change();
            if let Item::Event(StreamEvent::ContentBlockDelta {
                delta: ContentDelta::Text { .. },
                ..
            }) = &item
            {
                delta_allocations.push(change.allocations);
                delta_reallocations += change.reallocations;
            }
            if matches!(item, Item::Event(_)) {
                events += 1;
            }
            std::hint::black_box(&item);
            items += 1;
        }
        let change = whole.change();
        let finished = stream.finish().unwrap();
        assert!(finished.message.is_none(), "message_stop arrived");
        // The block's text buffer is created with its first delta; every other delta
        // allocates only its own `String`.
        let first = delta_allocations.first().copied().unwrap_or(0);
        let worst = delta_allocations.iter().skip(1).copied().max().unwrap_or(0);
        (items, events, change, (first, worst), delta_reallocations)
    };
    let _ = run();
    // The quietest of three (the allocator counts every thread).
    let (items, events, change, (first_delta, worst_delta), delta_reallocations) = (0..3)
        .map(|_| run())
        .min_by_key(|run| (run.3, run.4))
        .unwrap();
    assert_eq!(events, EVENTS + 5);
    println!(
        "MessageStream pipeline, one chunk: {} allocations, {} reallocations, {} bytes for {events} events / {items} items ({:.3} allocations/event, {:.3} reallocations/event); {first_delta} allocations for the first text delta (its String and the block's buffer), at most {worst_delta} for each later one, {delta_reallocations} reallocations over the {EVENTS} deltas",
        change.allocations,
        change.reallocations,
        change.bytes_allocated,
        change.allocations as f64 / events as f64,
        change.reallocations as f64 / events as f64
    );
    assert!(
        first_delta <= 2 && worst_delta <= 1,
        "text deltas allocated up to {worst_delta} times through the pipeline (the first {first_delta})"
    );
    assert!(
        delta_reallocations <= 16,
        "{delta_reallocations} reallocations over {EVENTS} deltas: the block's text is not growing in one buffer"
    );
}
