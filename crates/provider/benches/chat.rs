//! Throughput of the Chat Completions path (`provider::chat::ChatStream`: framing, chunk
//! decoding, translation onto Messages API events, accumulation into completed blocks)
//! against `eventsource-stream` + `serde_json::Value` of every event on the same bytes (what
//! a client that only parses the chunks does).
//!
//! Inputs, fed in 16 KiB chunks: `synthetic`, one ~10 MB stream (text in 5-80 character
//! deltas, then tool calls whose arguments arrive in many small fragments, a finish chunk, a
//! usage chunk, `[DONE]`), built here; `corpus`, the shared corpus's `openai/*.sse` streams
//! that end normally (one `ChatStream` per stream), skipped with a note when it is missing.
//! Run with `cargo bench -p agentloop-provider --bench chat` (also part of `cargo xtask bench`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use eventsource_stream::Eventsource as _;
use futures_util::Stream;
use provider::chat::ChatStream;
use serde_json::json;
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
    let frame = |body: &mut Vec<u8>, delta: serde_json::Value, finish: serde_json::Value| {
        let chunk = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
            "created": 1_754_693_439, "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_07871e2ad8",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        body.extend_from_slice(b"data: ");
        body.extend_from_slice(chunk.to_string().as_bytes());
        body.extend_from_slice(b"\n\n");
    };
    frame(
        &mut body,
        json!({"role": "assistant", "content": ""}),
        json!(null),
    );
    let words = "the quick brown fox jumps over a lazy dog while streaming tokens ";
    let mut n = 0usize;
    while body.len() < TARGET_BYTES / 2 {
        let len = 5 + (n * 37) % 76;
        let text: String = words.chars().cycle().skip(n % 13).take(len).collect();
        frame(&mut body, json!({"content": text}), json!(null));
        n += 1;
    }
    let mut call = 0;
    while body.len() < TARGET_BYTES {
        frame(
            &mut body,
            json!({"tool_calls": [{"index": call, "id": format!("call_{call}"), "type": "function",
                "function": {"name": "Edit", "arguments": ""}}]}),
            json!(null),
        );
        let arguments = json!({"file_path": format!("src/file_{call}.rs"),
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
                json!({"tool_calls": [{"index": call, "function": {"arguments": piece}}]}),
                json!(null),
            );
        }
        call += 1;
    }
    frame(&mut body, json!({}), json!("tool_calls"));
    body.extend_from_slice(
        br#"data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":900000,"prompt_tokens_details":{"cached_tokens":0}}}"#,
    );
    body.extend_from_slice(b"\n\ndata: [DONE]\n\n");
    body
}

fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENT_CORPUS_DIR") {
        return Some(PathBuf::from(dir));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|ancestor| ancestor.join("shared").join("corpus"))
        .find(|candidate| candidate.join("MANIFEST.tsv").is_file())
}

/// The corpus streams our decoder completes (the two that end in a server error are left
/// out: both paths would stop at a different place).
fn corpus() -> Option<Vec<Vec<u8>>> {
    let dir = corpus_dir()?.join("openai");
    let mut streams: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sse"))
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .filter(|(_, bytes)| decode(&chunks(bytes)).is_some())
        .collect();
    streams.sort();
    Some(streams.into_iter().map(|(_, bytes)| bytes).collect())
}

/// Our path: items handed out, or `None` when the stream fails.
fn decode(chunks: &[Bytes]) -> Option<usize> {
    let mut stream = ChatStream::new();
    let mut items = 0;
    for chunk in chunks {
        stream.push(chunk.clone());
        while let Some(item) = stream.next_item().ok()? {
            if let Item::MessageComplete(done) = &item {
                black_box(done);
            }
            items += 1;
        }
    }
    stream.finish().ok()?;
    Some(items)
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

/// The peer: `eventsource-stream` framing and a `serde_json::Value` of every chunk.
fn eventsource_value(chunks: &[Bytes]) -> usize {
    let mut events = 0;
    let stream = futures_util::stream::iter(chunks.iter().cloned().map(Ok::<_, Infallible>));
    drain(stream.eventsource(), |event| {
        let event = event.unwrap();
        if event.data != "[DONE]" {
            let value: serde_json::Value = serde_json::from_str(&event.data).unwrap();
            black_box(&value);
        }
        events += 1;
    });
    events
}

fn chat(c: &mut Criterion) {
    let synthetic = chunks(&synthetic());
    let mut inputs: Vec<(&str, Vec<Vec<Bytes>>)> = vec![("synthetic", vec![synthetic])];
    match corpus() {
        Some(streams) => inputs.push(("corpus", streams.iter().map(|s| chunks(s)).collect())),
        None => eprintln!("NOTE: corpus input skipped: the shared corpus was not found"),
    }
    for (name, streams) in &inputs {
        let bytes: usize = streams.iter().flatten().map(Bytes::len).sum();
        let items: usize = streams.iter().map(|s| decode(s).expect("decodes")).sum();
        println!(
            "input {name:>9}: {bytes:>9} bytes, {items:>7} pipeline items, {} stream(s)",
            streams.len()
        );
        let mut group = c.benchmark_group(format!("chat/{name}"));
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function("decode_accumulate", |b| {
            b.iter(|| streams.iter().map(|s| decode(s).unwrap()).sum::<usize>());
        });
        group.bench_function("peer_eventsource_value", |b| {
            b.iter(|| streams.iter().map(|s| eventsource_value(s)).sum::<usize>());
        });
        group.finish();
    }
}

criterion_group!(benches, chat);
criterion_main!(benches);
