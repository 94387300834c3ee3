//! The Chat Completions streams of real OpenAI-compatible servers, in the shapes each
//! server's own code, documentation or public bug reports show (`fixtures/chat-servers/`,
//! written for this test from those sources, each cited in `PROVENANCE.md`), decoded by
//! `provider::chat::ChatStream` (a test per server, named for its quirks) against the result
//! a correct client builds
//! (`fixtures/chat-servers/expected.json`, written from the same sources, not from this
//! decoder's output): the text, the thinking, each tool call (id, name, input), the stop
//! reason, the usage where the stream has it, or a failed stream. Each stream is also fed in
//! pieces of every size up to 64 bytes: the result must not depend on where the network cut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use protocol::{ContentBlock, Message, StopReason};
use serde_json::{Value, json};

/// The message `bytes` decode to when pushed in pieces of `size` (0: whole), or the error.
fn decode(bytes: &[u8], size: usize) -> Result<Message, String> {
    common::decode(bytes, size).map(|(message, _)| message.message)
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

/// Decodes every stream of `server` (its files are `SERVER-*.sse`) and compares each with
/// `expected.json`.
fn check(server: &str) {
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
        .filter(|name| name.starts_with(&format!("{server}-")))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no streams of {server}");
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

/// Every stream has its expectation, and every server its test below.
#[test]
fn every_stream_is_expected_and_every_server_tested() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat-servers");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let servers = SERVERS;
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".sse") {
            count += 1;
            assert!(expected.get(stem).is_some(), "{stem} has no expectation");
            assert!(
                servers
                    .iter()
                    .any(|server| stem.starts_with(&format!("{server}-"))),
                "{stem}: no test"
            );
        }
    }
    assert_eq!(count, 36);
}

const SERVERS: [&str; 13] = [
    "vllm",
    "sglang",
    "ollama",
    "llamacpp",
    "lmstudio",
    "openrouter",
    "groq",
    "deepseek",
    "mistral",
    "together",
    "fireworks",
    "azure",
    "gemini",
];

/// vLLM: `id` and name in a call's first piece only; reasoning in `reasoning_content` or
/// `reasoning` (by version); an error object then `[DONE]`.
#[test]
fn vllm() {
    check("vllm");
}

/// SGLang: every field sent, `null` when empty (`"id": null` on later pieces); older
/// builds repeat the id on every piece and number parallel calls all 0.
#[test]
fn sglang() {
    check("sglang");
}

/// Ollama: each call whole in one chunk, parallel calls all at index 0 (told apart by id);
/// thinking in `reasoning`; a failure ends the stream with no finish.
#[test]
fn ollama() {
    check("ollama");
}

/// llama.cpp's server: `content: null` first, id and name in a call's first piece only,
/// usage beside `timings`, an error object without `[DONE]`.
#[test]
fn llamacpp() {
    check("llamacpp");
}

/// LM Studio: later pieces with `"name": ""`; reasoning as `<think>` tags in the content.
#[test]
fn lmstudio() {
    check("lmstudio");
}

/// OpenRouter: `: OPENROUTER PROCESSING` comments, reasoning in `reasoning` and
/// `reasoning_details` (once), an error object with `finish_reason: "error"`, Gemini 3
/// ending tool calls with `stop`.
#[test]
fn openrouter() {
    check("openrouter");
}

/// Groq: a call whole in one chunk, usage in `x_groq.usage`, reasoning in `reasoning`.
#[test]
fn groq() {
    check("groq");
}

/// DeepSeek: `reasoning_content` with `content: null`, usage on the finish chunk.
#[test]
fn deepseek() {
    check("deepseek");
}

/// Mistral: calls without `index` or `type`, call and finish and usage in one chunk,
/// Magistral's content as a list of thinking and text parts.
#[test]
fn mistral() {
    check("mistral");
}

/// Together: an extra `text` field repeating the content (not counted twice), `eos`,
/// `<think>` tags from DeepSeek R1.
#[test]
fn together() {
    check("together");
}

/// Fireworks: OpenAI's shape, arguments in pieces.
#[test]
fn fireworks() {
    check("fireworks");
}

/// Azure OpenAI: a first chunk with no choices and `prompt_filter_results`, filter results
/// on every choice, a `content_filter` finish.
#[test]
fn azure() {
    check("azure");
}

/// Gemini's endpoint: calls without `index`, each whole, told apart by id; `stop` after
/// calls; `extra_content` with the thought signature.
#[test]
fn gemini() {
    check("gemini");
}

/// Every server stream, whole.
fn all_streams() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat-servers");
    let mut streams: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name()?.to_str()?.strip_suffix(".sse")?.to_owned();
            Some((name, std::fs::read(&path).unwrap()))
        })
        .collect();
    streams.sort();
    streams
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Any split of any server's stream (cut anywhere, even inside a UTF-8 character or a
    /// `data:` line) decodes to what the whole stream decodes to, error or message.
    #[test]
    fn any_split_of_any_server_stream_gives_the_same_message(
        pick in proptest::prelude::any::<proptest::sample::Index>(),
        cuts in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..32),
    ) {
        let streams = all_streams();
        let (name, bytes) = &streams[pick.index(streams.len())];
        let whole = decode(bytes, 0).map(|message| summary(&message));
        let split = common::decode_cut(bytes, cuts.iter().map(|cut| cut.index(bytes.len() + 1)))
            .map(|(message, _)| summary(&message.message));
        match (&whole, &split) {
            (Ok(whole), Ok(split)) => proptest::prop_assert_eq!(whole, split, "{}", name),
            (Err(_), Err(_)) => {}
            _ => proptest::prop_assert!(false, "{name}: whole {whole:?}, split {split:?}"),
        }
    }
}
