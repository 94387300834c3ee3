//! The Chat Completions streams of real OpenAI-compatible servers, in the shapes each
//! server's own code, documentation or public bug reports show (`fixtures/chat-servers/`,
//! written for this test from those sources, each cited in `PROVENANCE.md`), decoded by
//! `provider::chat::ChatStream` against the result a correct client builds
//! (`fixtures/chat-servers/expected.json`, written from the same sources, not from this
//! decoder's output): the text, the thinking, each tool call (id, name, input), the stop
//! reason, the usage where the stream has it, or a failed stream. Each stream is also fed in
//! pieces of every size up to 64 bytes: the result must not depend on where the network cut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use bytes::Bytes;
use protocol::{ContentBlock, Message, StopReason};
use provider::chat::ChatStream;
use serde_json::{Value, json};
use sse_parser::Item;

/// The message `bytes` decode to when pushed in pieces of `size` (0: whole), or the error.
fn decode(bytes: &[u8], size: usize) -> Result<Message, String> {
    let mut stream = ChatStream::new();
    let mut done = None;
    let pieces: Vec<&[u8]> = if size == 0 {
        vec![bytes]
    } else {
        bytes.chunks(size).collect()
    };
    for piece in pieces {
        stream.push(Bytes::copy_from_slice(piece));
        while let Some(item) = stream.next_item().map_err(|error| error.to_string())? {
            if let Item::MessageComplete(message) = item {
                done = Some(message.message);
            }
        }
    }
    let finished = stream.finish().map_err(|error| error.to_string())?;
    done.or(finished.map(|finished| finished.message))
        .ok_or_else(|| "no message".to_owned())
}

/// What `message` is, in the shape of `expected.json`'s entries.
fn summary(message: &Message) -> Value {
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text(block) => text.push_str(&block.text),
            ContentBlock::Thinking(block) => thinking.push_str(&block.thinking),
            ContentBlock::ToolUse(call) => calls.push(json!({
                "id": call.id.as_str(), "name": call.name, "input": call.input,
            })),
            _ => {}
        }
    }
    let stop = match &message.stop_reason {
        Some(StopReason::EndTurn) => "end_turn".to_owned(),
        Some(StopReason::ToolUse) => "tool_use".to_owned(),
        Some(StopReason::MaxTokens) => "max_tokens".to_owned(),
        Some(StopReason::Refusal) => "refusal".to_owned(),
        other => format!("{other:?}"),
    };
    let usage = &message.usage;
    json!({
        "text": text, "thinking": thinking, "calls": calls, "stop": stop,
        "usage": {
            "input": usage.input_tokens + usage.cache_read_input_tokens.unwrap_or(0),
            "output": usage.output_tokens,
        },
    })
}

#[test]
fn every_servers_stream_decodes_to_what_its_sources_say() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat-servers");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let expected = expected.as_object().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".sse").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 30, "{names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let want = expected
            .get(name)
            .unwrap_or_else(|| panic!("{name}.sse has no entry in expected.json"));
        let bytes = std::fs::read(dir.join(format!("{name}.sse"))).unwrap();
        for size in std::iter::once(0).chain(1..=64) {
            let got = decode(&bytes, size);
            let problem = match (got, want["error"].as_str()) {
                (Err(_), Some(_)) => None,
                (Err(error), None) => Some(format!("failed: {error}")),
                (Ok(message), Some(kind)) => {
                    Some(format!("should fail ({kind}), got {}", summary(&message)))
                }
                (Ok(message), None) => {
                    let got = summary(&message);
                    let mut wrong = Vec::new();
                    for field in ["text", "thinking", "calls", "stop"] {
                        if got[field] != want[field] {
                            wrong.push(format!("{field}: {} != {}", got[field], want[field]));
                        }
                    }
                    if want["usage"].is_object() && got["usage"] != want["usage"] {
                        wrong.push(format!("usage: {} != {}", got["usage"], want["usage"]));
                    }
                    (!wrong.is_empty()).then(|| wrong.join("; "))
                }
            };
            if let Some(problem) = problem {
                failures.push(format!("{name} (pieces of {size}): {problem}"));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
