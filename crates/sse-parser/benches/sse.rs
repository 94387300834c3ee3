//! Throughput of the `sse-parser` stages against peer crates and a memchr ceiling.
//!
//! Inputs are built here, not checked in:
//! - `text`: one ~10 MB Messages API stream, one text block of many `text_delta` events
//!   (5-80 characters each, JSON padded with spaces before the closing brace like real
//!   captures), periodic pings, message_delta, message_stop;
//! - `tools`: one ~10 MB stream of many tool_use blocks, each streamed as many
//!   `input_json_delta` fragments;
//! - `corpus`: every `anthropic/*.sse` file of the shared corpus, back to back (skipped with a
//!   note when the corpus is missing). Seven SDK fixtures end without the blank line that
//!   dispatches their last event; a line end is appended to those so the concatenation is one
//!   well-formed stream (every group sees exactly the same bytes).
//!
//! Every input is fed in 16 KiB chunks (`Bytes` slices of one buffer: no copy per iteration).
//! Groups report `Throughput::Bytes` of the whole input:
//! - `framing`: [`sse_parser::Framer::next_event`] (owned events: `Bytes` slices of the
//!   chunks), counting events;
//! - `framing_borrowed`: [`sse_parser::Framer::next_event_ref`] (events borrowed from the
//!   framer, as `MessageStream` reads them), counting events;
//! - `framing_peer_sse_stream`, `framing_peer_eventsource_stream`: the same chunks through the
//!   `sse-stream` and `eventsource-stream` crates, polled with a no-op waker over
//!   `futures_util::stream::iter` (no runtime), counting events;
//! - `memchr_ceiling`: a plain memchr newline count of the same chunks (memchr's vectorised
//!   count, which never stops at a match);
//! - `memchr_scan`: every newline position of the same chunks visited one by one (memchr's
//!   iterator), the least a line-based framer does;
//! - `decode_accumulate`: the whole [`sse_parser::MessageStream`] pipeline (one pipeline per
//!   corpus file, as each file is one message);
//! - `peer_eventsource_value`: `eventsource-stream` plus `serde_json::Value` of every event's
//!   data (what Codex CLI does);
//! - `zero_length_chunks`: the `text` input with an empty chunk between every real chunk,
//!   through the framer.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::{
    BenchmarkGroup, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
    measurement::WallTime,
};
use eventsource_stream::Eventsource as _;
use futures_util::Stream;
use serde_json::json;
use sse_parser::{Framer, Item, MessageStream};

/// Chunk size of the simulated network reads.
const CHUNK: usize = 16 * 1024;
/// Size the synthetic streams grow to before they are closed.
const TARGET_BYTES: usize = 10 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// One benchmark input.
struct Input {
    name: &'static str,
    /// The whole input in 16 KiB chunks.
    chunks: Vec<Bytes>,
    /// The chunks of each message (one pipeline per message): the synthetic streams are one
    /// message, the corpus one message per file.
    messages: Vec<Vec<Bytes>>,
    len: u64,
}

impl Input {
    fn new(name: &'static str, messages: Vec<Vec<u8>>) -> Self {
        let whole = Bytes::from(messages.concat());
        let chunks = split(&whole);
        let messages = messages
            .into_iter()
            .map(|message| split(&Bytes::from(message)))
            .collect();
        Self {
            name,
            chunks,
            messages,
            len: whole.len() as u64,
        }
    }
}

fn split(bytes: &Bytes) -> Vec<Bytes> {
    (0..bytes.len())
        .step_by(CHUNK)
        .map(|start| bytes.slice(start..bytes.len().min(start + CHUNK)))
        .collect()
}

/// SplitMix64: a deterministic generator, so every run measures the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..=high`.
    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len() - 1)]
    }
}

const WORDS: &[&str] = &[
    "the",
    "function",
    "returns",
    "a",
    "value",
    "when",
    "input",
    "is",
    "valid",
    "and",
    "we",
    "should",
    "check",
    "error",
    "handling",
    "in",
    "this",
    "module",
    "Let",
    "me",
    "look",
    "at",
    "file",
    "first",
    "then",
    "update",
    "tests",
    "accordingly",
    "because",
    "parser",
    "stream",
    "event",
    "buffer",
    "`Vec<u8>`",
    "`Result<T, E>`",
    "café",
    "naïve",
    "résumé",
    "日本語",
    "—",
    "→",
    "\"quoted\"",
    "path\\to\\file",
    "(see",
    "above)",
    "e.g.",
    "1.",
    "2.",
    "42",
];

/// Text of about `len` characters: words, punctuation and the odd line break.
fn text_of(rng: &mut Rng, len: usize) -> String {
    let mut text = String::new();
    let mut chars = 0;
    while chars < len {
        let piece = match rng.range(0, 19) {
            0 => ".\n\n",
            1 => ", ",
            2 => "\n",
            _ => {
                text.push(' ');
                chars += 1;
                rng.pick(WORDS)
            }
        };
        text.push_str(piece);
        chars += piece.chars().count();
    }
    text.chars().take(len).collect()
}

/// Spaces before a closing brace, as in real captures.
fn pad(rng: &mut Rng) -> String {
    " ".repeat(rng.range(0, 15))
}

fn push_event(out: &mut Vec<u8>, name: &str, data: &str) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(b"\n\n");
}

fn message_start(out: &mut Vec<u8>, rng: &mut Rng) {
    let data = format!(
        r#"{{"type":"message_start","message":{{"model":"claude-sonnet-4-5-20250929","id":"msg_01{:016X}","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":2841,"cache_creation_input_tokens":0,"cache_read_input_tokens":15360,"cache_creation":{{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0}},"output_tokens":1,"service_tier":"standard"}}}}{}}}"#,
        rng.next(),
        pad(rng)
    );
    push_event(out, "message_start", &data);
}

fn ping(out: &mut Vec<u8>) {
    push_event(out, "ping", r#"{"type": "ping"}"#);
}

fn block_stop(out: &mut Vec<u8>, rng: &mut Rng, index: usize) {
    let data = format!(
        r#"{{"type":"content_block_stop","index":{index}{}}}"#,
        pad(rng)
    );
    push_event(out, "content_block_stop", &data);
}

fn message_end(out: &mut Vec<u8>, rng: &mut Rng, stop_reason: &str, output_tokens: usize) {
    let data = format!(
        r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop_reason}","stop_sequence":null}},"usage":{{"input_tokens":2841,"cache_creation_input_tokens":0,"cache_read_input_tokens":15360,"output_tokens":{output_tokens}}}{}}}"#,
        pad(rng)
    );
    push_event(out, "message_delta", &data);
    push_event(out, "message_stop", r#"{"type":"message_stop"    }"#);
}

fn text_delta(out: &mut Vec<u8>, rng: &mut Rng, index: usize, text: &str) {
    let data = format!(
        r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":{}}}{}}}"#,
        serde_json::to_string(text).unwrap(),
        pad(rng)
    );
    push_event(out, "content_block_delta", &data);
}

/// (a) One text block of many text deltas, ~10 MB.
fn text_stream() -> Vec<u8> {
    let mut rng = Rng(1);
    let mut out = Vec::with_capacity(TARGET_BYTES + 4096);
    message_start(&mut out, &mut rng);
    push_event(
        &mut out,
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}   }"#,
    );
    ping(&mut out);
    let mut deltas = 0;
    while out.len() < TARGET_BYTES {
        let len = rng.range(5, 80);
        let text = text_of(&mut rng, len);
        text_delta(&mut out, &mut rng, 0, &text);
        deltas += 1;
        if deltas % 500 == 0 {
            ping(&mut out);
        }
    }
    block_stop(&mut out, &mut rng, 0);
    message_end(&mut out, &mut rng, "end_turn", deltas * 3);
    out
}

/// (b) Many tool_use blocks, each with many input_json_delta fragments, ~10 MB.
fn tool_stream() -> Vec<u8> {
    let mut rng = Rng(2);
    let mut out = Vec::with_capacity(TARGET_BYTES + 64 * 1024);
    message_start(&mut out, &mut rng);
    push_event(
        &mut out,
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""} }"#,
    );
    ping(&mut out);
    for _ in 0..8 {
        let len = rng.range(5, 80);
        let text = text_of(&mut rng, len);
        text_delta(&mut out, &mut rng, 0, &text);
    }
    block_stop(&mut out, &mut rng, 0);
    let mut index = 1;
    let mut fragments = 0;
    while out.len() < TARGET_BYTES {
        let (name, input) = match rng.range(0, 2) {
            0 => {
                let len = rng.range(500, 6000);
                (
                    "Write",
                    json!({
                        "file_path": format!("/work/project/src/module_{index}.rs"),
                        "content": text_of(&mut rng, len),
                    }),
                )
            }
            1 => {
                let old_len = rng.range(20, 400);
                let new_len = rng.range(20, 800);
                (
                    "Edit",
                    json!({
                        "file_path": format!("/work/project/src/lib_{index}.rs"),
                        "old_string": text_of(&mut rng, old_len),
                        "new_string": text_of(&mut rng, new_len),
                        "replace_all": false,
                    }),
                )
            }
            _ => {
                let len = rng.range(10, 200);
                (
                    "Bash",
                    json!({
                        "command": text_of(&mut rng, len),
                        "description": "Run the test suite",
                        "timeout": 120000,
                    }),
                )
            }
        };
        let start = format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"toolu_01{:022X}","name":"{name}","input":{{}},"caller":{{"type":"direct"}}}}{}}}"#,
            rng.next(),
            pad(&mut rng)
        );
        push_event(&mut out, "content_block_start", &start);
        // Real tool blocks almost always begin with an empty fragment.
        let mut json_text = String::new();
        let input = serde_json::to_string(&input).unwrap();
        let mut rest = input.as_str();
        let mut first = true;
        while first || !rest.is_empty() {
            let mut cut = if first {
                0
            } else {
                rng.range(1, 60).min(rest.len())
            };
            first = false;
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (fragment, tail) = rest.split_at(cut);
            rest = tail;
            json_text.push_str(fragment);
            let data = format!(
                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{}}}{}}}"#,
                serde_json::to_string(fragment).unwrap(),
                pad(&mut rng)
            );
            push_event(&mut out, "content_block_delta", &data);
            fragments += 1;
            if fragments % 500 == 0 {
                ping(&mut out);
            }
        }
        debug_assert_eq!(json_text, input);
        block_stop(&mut out, &mut rng, index);
        index += 1;
    }
    message_end(&mut out, &mut rng, "tool_use", fragments * 2);
    out
}

/// The shared corpus: `$AGENT_CORPUS_DIR`, else `shared/corpus` beside an ancestor.
fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENT_CORPUS_DIR") {
        return Some(PathBuf::from(dir)).filter(|dir| dir.is_dir());
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|ancestor| ancestor.join("shared").join("corpus"))
        .find(|candidate| candidate.join("MANIFEST.tsv").is_file())
}

/// (c) Every `anthropic/*.sse` file, one message each, each ending with a blank line.
fn corpus_files() -> Option<Vec<Vec<u8>>> {
    let dir = corpus_dir()?.join("anthropic");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "sse"))
        .collect();
    paths.sort();
    let files: Vec<Vec<u8>> = paths
        .iter()
        .map(|path| {
            let mut body = std::fs::read(path).unwrap();
            // Dispatch the last event of the fixtures that end without a blank line.
            while !body.ends_with(b"\n\n") {
                body.push(b'\n');
            }
            body
        })
        .collect();
    (!files.is_empty()).then_some(files)
}

fn inputs() -> Vec<Input> {
    let mut inputs = vec![
        Input::new("text", vec![text_stream()]),
        Input::new("tools", vec![tool_stream()]),
    ];
    match corpus_files() {
        Some(files) => inputs.push(Input::new("corpus", files)),
        None => eprintln!(
            "\n*** note: shared/corpus not found (set AGENT_CORPUS_DIR): skipping the `corpus` input ***\n"
        ),
    }
    inputs
}

// ---------------------------------------------------------------------------------------------
// The measured paths
// ---------------------------------------------------------------------------------------------

fn frame(chunks: &[Bytes]) -> usize {
    let mut framer = Framer::new();
    let mut events = 0;
    for chunk in chunks {
        framer.push(chunk.clone());
        while let Some(event) = framer.next_event().unwrap() {
            black_box(&event);
            events += 1;
        }
    }
    events
}

fn frame_borrowed(chunks: &[Bytes]) -> usize {
    let mut framer = Framer::new();
    let mut events = 0;
    for chunk in chunks {
        framer.push(chunk.clone());
        while let Some(event) = framer.next_event_ref().unwrap() {
            black_box(&event);
            events += 1;
        }
    }
    events
}

/// Polls a stream that never pends (built on `stream::iter`) to its end.
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

fn byte_stream(chunks: &[Bytes]) -> impl Stream<Item = Result<Bytes, Infallible>> + '_ {
    futures_util::stream::iter(chunks.iter().cloned().map(Ok))
}

fn frame_sse_stream(chunks: &[Bytes]) -> usize {
    let mut events = 0;
    drain(
        sse_stream::SseStream::from_bytes_stream(byte_stream(chunks)),
        |event| {
            black_box(&event.unwrap());
            events += 1;
        },
    );
    events
}

fn frame_eventsource(chunks: &[Bytes]) -> usize {
    let mut events = 0;
    drain(byte_stream(chunks).eventsource(), |event| {
        black_box(&event.unwrap());
        events += 1;
    });
    events
}

fn memchr_lines(chunks: &[Bytes]) -> usize {
    chunks
        .iter()
        .map(|chunk| memchr::memchr_iter(b'\n', chunk).count())
        .sum()
}

/// Every newline's position, visited one by one, as a line-based framer must at least do
/// (the count above is memchr's vectorised count, which never stops at a match).
fn memchr_scan(chunks: &[Bytes]) -> usize {
    chunks
        .iter()
        .map(|chunk| memchr::memchr_iter(b'\n', chunk).fold(0, |sum, at| sum ^ black_box(at)))
        .fold(0, |a, b| a ^ b)
}

/// The whole pipeline, one [`MessageStream`] per message; returns (items, messages).
fn decode_accumulate(messages: &[Vec<Bytes>]) -> (usize, usize) {
    let mut items = 0;
    let mut complete = 0;
    for chunks in messages {
        let mut stream = MessageStream::new();
        for chunk in chunks {
            stream.push(chunk.clone());
            while let Some(item) = stream.next_item().unwrap() {
                if let Item::MessageComplete(_) = &item {
                    complete += 1;
                }
                black_box(&item);
                items += 1;
            }
        }
        let finished = stream.finish().unwrap();
        complete += usize::from(finished.message.is_some());
    }
    (items, complete)
}

fn eventsource_value(chunks: &[Bytes]) -> usize {
    let mut events = 0;
    drain(byte_stream(chunks).eventsource(), |event| {
        let event = event.unwrap();
        let value: serde_json::Value = serde_json::from_str(&event.data).unwrap();
        black_box(&value);
        events += 1;
    });
    events
}

/// Checks once, outside the measurements, that every path sees the same events.
fn check(input: &Input) {
    let events = frame(&input.chunks);
    assert_eq!(frame_borrowed(&input.chunks), events, "{}", input.name);
    assert_eq!(frame_sse_stream(&input.chunks), events, "{}", input.name);
    assert_eq!(frame_eventsource(&input.chunks), events, "{}", input.name);
    assert_eq!(eventsource_value(&input.chunks), events, "{}", input.name);
    let (items, messages) = decode_accumulate(&input.messages);
    assert_eq!(messages, input.messages.len(), "{}", input.name);
    println!(
        "input {:>6}: {:>9} bytes, {:>6} events, {:>6} pipeline items, {} message(s), {} lines",
        input.name,
        input.len,
        events,
        items,
        messages,
        memchr_lines(&input.chunks)
    );
}

// ---------------------------------------------------------------------------------------------
// Groups
// ---------------------------------------------------------------------------------------------

fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    // Iterations take milliseconds: flat sampling keeps each benchmark to a few seconds.
    group.sampling_mode(SamplingMode::Flat);
    group
}

fn benches(c: &mut Criterion) {
    let inputs = inputs();
    for input in &inputs {
        check(input);
    }
    let run = |c: &mut Criterion, name: &str, f: &dyn Fn(&Input) -> usize| {
        let mut g = group(c, name);
        for input in &inputs {
            g.throughput(Throughput::Bytes(input.len));
            g.bench_function(input.name, |b| b.iter(|| f(black_box(input))));
        }
        g.finish();
    };
    run(c, "framing", &|input| frame(&input.chunks));
    run(c, "framing_borrowed", &|input| {
        frame_borrowed(&input.chunks)
    });
    run(c, "framing_peer_sse_stream", &|input| {
        frame_sse_stream(&input.chunks)
    });
    run(c, "framing_peer_eventsource_stream", &|input| {
        frame_eventsource(&input.chunks)
    });
    run(c, "memchr_ceiling", &|input| memchr_lines(&input.chunks));
    run(c, "memchr_scan", &|input| memchr_scan(&input.chunks));
    run(c, "decode_accumulate", &|input| {
        decode_accumulate(&input.messages).0
    });
    run(c, "peer_eventsource_value", &|input| {
        eventsource_value(&input.chunks)
    });

    // Empty chunks between the real ones must be harmless and (nearly) free.
    let text = &inputs[0];
    let interleaved: Vec<Bytes> = text
        .chunks
        .iter()
        .flat_map(|chunk| [Bytes::new(), chunk.clone()])
        .collect();
    assert_eq!(frame(&interleaved), frame(&text.chunks));
    let mut g = group(c, "zero_length_chunks");
    g.throughput(Throughput::Bytes(text.len));
    g.bench_function(text.name, |b| b.iter(|| frame(black_box(&interleaved))));
    g.finish();
}

criterion_group! {
    name = sse;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(sse);
