//! Throughput of the Responses API path (`provider::responses::ResponsesStream`: framing,
//! event decoding, translation onto Messages API events, accumulation into completed
//! blocks) against `eventsource-stream` + `serde_json::Value` of every event on the same
//! bytes (what a client that only parses the events does).
//!
//! Input, fed in 16 KiB chunks: one ~10 MB synthetic stream in the shapes of the `openai`
//! SDK's event models (a message item whose text arrives in 5-80 character
//! `response.output_text.delta`s, then function calls whose arguments arrive in many small
//! `response.function_call_arguments.delta`s, each item added and done, then
//! `response.completed`). No real Responses capture is in the shared corpus. Run with
//! `cargo bench -p agentloop-provider --bench responses` (also part of `cargo xtask bench`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use eventsource_stream::Eventsource as _;
use futures_util::Stream;
use provider::responses::ResponsesStream;
use serde_json::{Value, json};
use sse_parser::Item;

const CHUNK: usize = 16 * 1024;
const TARGET_BYTES: usize = 10 * 1024 * 1024;

fn chunks(bytes: &[u8]) -> Vec<Bytes> {
    let all = Bytes::copy_from_slice(bytes);
    (0..all.len())
        .step_by(CHUNK)
        .map(|at| all.slice(at..(at + CHUNK).min(all.len())))
        .collect()
}

fn synthetic() -> Vec<u8> {
    let mut body = Vec::with_capacity(TARGET_BYTES + 4096);
    let mut sequence = 0u64;
    let mut frame = |body: &mut Vec<u8>, mut event: Value| {
        event["sequence_number"] = json!(sequence);
        sequence += 1;
        body.extend_from_slice(b"event: ");
        body.extend_from_slice(event["type"].as_str().unwrap().as_bytes());
        body.extend_from_slice(b"\ndata: ");
        body.extend_from_slice(event.to_string().as_bytes());
        body.extend_from_slice(b"\n\n");
    };
    let response = |status: &str| {
        json!({"id": "resp_bench", "object": "response", "created_at": 1_754_693_439,
            "status": status, "model": "gpt-5", "output": [], "parallel_tool_calls": true,
            "tool_choice": "auto", "tools": []})
    };
    frame(
        &mut body,
        json!({"type": "response.created", "response": response("in_progress")}),
    );
    frame(
        &mut body,
        json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"id": "msg_bench", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}),
    );
    let words = "the quick brown fox jumps over a lazy dog while streaming tokens ";
    let mut n = 0usize;
    while body.len() < TARGET_BYTES / 2 {
        let len = 5 + (n * 37) % 76;
        let text: String = words.chars().cycle().skip(n % 13).take(len).collect();
        frame(
            &mut body,
            json!({"type": "response.output_text.delta", "item_id": "msg_bench",
            "output_index": 0, "content_index": 0, "delta": text, "logprobs": []}),
        );
        n += 1;
    }
    frame(
        &mut body,
        json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"id": "msg_bench", "type": "message", "role": "assistant", "status": "completed", "content": []}}),
    );
    let mut index = 1;
    while body.len() < TARGET_BYTES {
        let item = format!("fc_{index}");
        frame(
            &mut body,
            json!({"type": "response.output_item.added", "output_index": index,
            "item": {"id": item, "type": "function_call", "call_id": format!("call_{index}"),
                "name": "Edit", "arguments": "", "status": "in_progress"}}),
        );
        let arguments = json!({"file_path": format!("src/file_{index}.rs"),
            "old_string": words.repeat(6), "new_string": words.repeat(7)})
        .to_string();
        let pieces: Vec<String> = arguments
            .chars()
            .collect::<Vec<_>>()
            .chunks(12)
            .map(|piece| piece.iter().collect())
            .collect();
        for piece in pieces {
            frame(
                &mut body,
                json!({"type": "response.function_call_arguments.delta",
                "item_id": item, "output_index": index, "delta": piece}),
            );
        }
        frame(
            &mut body,
            json!({"type": "response.output_item.done", "output_index": index,
            "item": {"id": item, "type": "function_call", "call_id": format!("call_{index}"),
                "name": "Edit", "arguments": arguments, "status": "completed"}}),
        );
        index += 1;
    }
    let mut done = response("completed");
    done["usage"] = json!({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 900_000, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 901_000});
    frame(
        &mut body,
        json!({"type": "response.completed", "response": done}),
    );
    body
}

/// Our path: the items handed out.
fn decode(chunks: &[Bytes]) -> usize {
    let mut stream = ResponsesStream::new();
    let mut items = 0;
    for chunk in chunks {
        stream.push(chunk.clone());
        while let Some(item) = stream.next_item().unwrap() {
            if let Item::MessageComplete(done) = &item {
                black_box(done);
            }
            items += 1;
        }
    }
    stream.finish().unwrap();
    items
}

fn drain<S: Stream>(stream: S, mut each: impl FnMut(S::Item)) {
    let mut stream = pin!(stream);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(item)) => each(item),
            Poll::Ready(None) => return,
            Poll::Pending => unreachable!("stream::iter never pends"),
        }
    }
}

/// The peer: `eventsource-stream` framing and a `serde_json::Value` of every event.
fn eventsource_value(chunks: &[Bytes]) -> usize {
    let mut events = 0;
    let stream = futures_util::stream::iter(chunks.iter().cloned().map(Ok::<_, Infallible>));
    drain(stream.eventsource(), |event| {
        let value: Value = serde_json::from_str(&event.unwrap().data).unwrap();
        black_box(&value);
        events += 1;
    });
    events
}

fn responses(c: &mut Criterion) {
    let body = synthetic();
    let input = chunks(&body);
    println!(
        "input synthetic: {} bytes, {} pipeline items",
        body.len(),
        decode(&input)
    );
    let mut group = c.benchmark_group("responses/synthetic");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("decode_accumulate", |b| b.iter(|| decode(&input)));
    group.bench_function("peer_eventsource_value", |b| {
        b.iter(|| eventsource_value(&input))
    });
    group.finish();
}

criterion_group!(benches, responses);
criterion_main!(benches);
