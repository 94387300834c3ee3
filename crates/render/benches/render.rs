//! What rendering the answer costs: a minute of Markdown streamed at 100 tokens a second
//! (6,000 deltas of about one token, 4 bytes, each), rendered block by block as the
//! interactive mode does. docs/benchmarks.md turns the time per minute into the share of one
//! core, and reports the bytes written per token.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use render::MarkdownStream;

/// About 24 KB of a model's answer: headings, paragraphs with emphasis and code, lists, a
/// table and fenced Rust and Python, repeated.
fn answer() -> String {
    let section = "## Step {n}: what changed\n\n\
The **parser** now keeps its state between chunks, so a `data:` line split across two reads \
is joined before it is decoded. This removes the *copy* we made for every event and the \
second pass over the bytes.\n\n\
- `frame.rs`: one pass with `memchr`, no per-line allocation\n\
- `decode.rs`: typed deltas, no `serde_json::Value`\n  \
- nested: the accumulator takes borrowed strings\n\
- tests: split at every byte, as before\n\n\
| file | before | after |\n|---|--:|--:|\n| frame.rs | 155 ns | 41 ns |\n| decode.rs | 310 ns | 120 ns |\n\n\
```rust\nfn feed(&mut self, chunk: &[u8]) -> usize {\n    let mut at = 0;\n    while let Some(end) = memchr::memchr(b'\\n', &chunk[at..]) {\n        self.line(&chunk[at..at + end]);\n        at += end + 1;\n    }\n    at\n}\n```\n\n\
```python\ndef check(events):\n    return all(e[\"type\"] for e in events)\n```\n\n\
> Note: the public `Bytes` API is unchanged.\n\n";
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 24_000 {
        n += 1;
        text.push_str(&section.replace("{n}", &n.to_string()));
    }
    text
}

/// The answer as deltas of 4 bytes (on character boundaries): about one token each.
fn deltas(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + 4).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

fn bench(c: &mut Criterion) {
    let text = answer();
    let pieces = deltas(&text);
    // Bytes written per token, printed once for docs/benchmarks.md.
    let mut stream = MarkdownStream::new(100);
    let mut written = 0;
    for piece in &pieces {
        written += stream
            .push(piece)
            .iter()
            .map(|line| line.len() + 1)
            .sum::<usize>();
    }
    written += stream
        .finish()
        .iter()
        .map(|line| line.len() + 1)
        .sum::<usize>();
    eprintln!(
        "render: {} deltas, {} bytes in, {written} bytes written, {:.1} bytes per token",
        pieces.len(),
        text.len(),
        written as f64 / pieces.len() as f64
    );
    let mut group = c.benchmark_group("render");
    group.throughput(Throughput::Elements(pieces.len() as u64));
    group.bench_function("markdown_stream_24kb_in_4_byte_deltas", |b| {
        b.iter(|| {
            let mut stream = MarkdownStream::new(100);
            let mut lines = 0;
            for piece in &pieces {
                lines += stream.push(piece).len();
            }
            lines + stream.finish().len()
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
