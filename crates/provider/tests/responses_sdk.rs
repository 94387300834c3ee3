//! The Responses API decoder against OpenAI's own Python SDK. No real Responses capture is
//! in the shared corpus, so testkit's Responses streams stand in for one: each is first
//! checked event by event against the SDK's event models and accumulated by the SDK's
//! streaming helper (`tests/openai-sdk/check.py`, `openai` pinned in its
//! `requirements.txt`), and what the SDK built is compared with what
//! `provider::responses::ResponsesStream` makes of the same bytes: text, reasoning, function
//! calls, stop reason and usage.
//!
//! The SDK lives in a Python virtual environment: `$AGENT_OPENAI_SDK_DIR`, else
//! `~/.cache/agent-ci/openai-sdk` (`.ci/run` makes it). Without it the test is skipped with a
//! note, except in CI (`CI=true`), where that is a failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use protocol::{ContentBlock, StopReason};
use provider::responses::ResponsesStream;
use serde_json::{Value, json};
use testkit::Turn;

/// The venv's Python, when the SDK is installed.
fn sdk_python() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENT_OPENAI_SDK_DIR")
        .map(PathBuf::from)
        .or_else(|| dirs_home().map(|home| home.join(".cache/agent-ci/openai-sdk")))?;
    let python = dir.join("bin/python");
    let works = std::process::Command::new(&python)
        .args(["-c", "import openai"])
        .output()
        .is_ok_and(|output| output.status.success());
    works.then_some(python)
}

fn dirs_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// The turns checked: text alone; reasoning, text and two calls; a cut response.
fn turns() -> Vec<(&'static str, Turn)> {
    vec![
        (
            "text",
            Turn::new().text("Hello from the Responses API, über and 日本."),
        ),
        (
            "calls",
            Turn::new()
                .thinking("First read, then search.", "gAAAAB-encrypted")
                .text("Looking.")
                .tool_use("call_r", "Read", json!({"file_path": "greet.py"}))
                .tool_use(
                    "call_g",
                    "Grep",
                    json!({"pattern": "helo", "output_mode": "content"}),
                ),
        ),
        (
            "cut",
            Turn::new()
                .text("A long answer cut by the limit")
                .stop("max_tokens"),
        ),
    ]
}

#[test]
fn testkit_streams_decode_as_the_openai_sdk_accumulates_them() {
    let Some(python) = sdk_python() else {
        assert!(
            std::env::var("CI").map_or(true, |ci| ci != "true"),
            "CI needs the openai SDK: .ci/run installs it (AGENT_OPENAI_SDK_DIR)"
        );
        eprintln!(
            "NOTE: the openai SDK check is skipped: no venv with `openai` at $AGENT_OPENAI_SDK_DIR or ~/.cache/agent-ci/openai-sdk (see .ci/run)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("agent-responses-sdk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let turns = turns();
    let mut files = Vec::new();
    for (name, turn) in &turns {
        let path = dir.join(format!("{name}.sse"));
        std::fs::write(&path, turn.responses_sse()).unwrap();
        files.push(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/openai-sdk/check.py");
    let output = std::process::Command::new(&python)
        .arg(&script)
        .args(&files)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the SDK refused a testkit stream: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(expected.len(), turns.len());
    for ((name, turn), sdk) in turns.iter().zip(&expected) {
        let mut stream = ResponsesStream::new();
        // In small pieces, as a network delivers it.
        for piece in turn.responses_sse().chunks(37) {
            stream.push(Bytes::copy_from_slice(piece));
        }
        let mut complete = None;
        while let Some(item) = stream.next_item().unwrap() {
            if let sse_parser::Item::MessageComplete(done) = item {
                complete = Some(done.message);
            }
        }
        stream.finish().unwrap();
        let ours = complete.unwrap_or_else(|| panic!("{name}: no message"));
        let accumulated = sdk["accumulated"]["output"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {sdk}"));
        // Item by item, in order, as blocks.
        let blocks: Vec<&ContentBlock> = ours.content.iter().collect();
        assert_eq!(blocks.len(), accumulated.len(), "{name}: {sdk}");
        let finished = sdk["final"]["output"].as_array().unwrap();
        for (position, (block, item)) in blocks.iter().zip(accumulated).enumerate() {
            match (block, item["type"].as_str()) {
                (ContentBlock::Text(text), Some("message")) => {
                    let sdk_text: String = item["content"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|part| part["text"].as_str())
                        .collect();
                    assert_eq!(text.text, sdk_text, "{name}");
                }
                (ContentBlock::ToolUse(call), Some("function_call")) => {
                    assert_eq!(call.id.as_str(), item["call_id"], "{name}");
                    assert_eq!(call.name, item["name"], "{name}");
                    let arguments: Value =
                        serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
                    assert_eq!(call.input, arguments, "{name}");
                }
                (ContentBlock::Thinking(thinking), Some("reasoning")) => {
                    // The SDK's helper does not add summary deltas to its snapshot: the
                    // reasoning item compared is the finished one (its summary and encrypted
                    // content, what goes back on the next request).
                    let item = &finished[position];
                    let summary: String = item["summary"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|part| part["text"].as_str())
                        .collect();
                    assert_eq!(thinking.thinking, summary, "{name}");
                    assert_eq!(
                        thinking.signature,
                        format!(
                            "{} {}",
                            item["id"].as_str().unwrap(),
                            item["encrypted_content"].as_str().unwrap()
                        ),
                        "{name}"
                    );
                }
                (block, kind) => panic!("{name}: block {block:?} for an item of type {kind:?}"),
            }
        }
        let final_response = &sdk["final"];
        let expected_stop = match (
            final_response["status"].as_str(),
            final_response["incomplete_details"]["reason"].as_str(),
        ) {
            (Some("completed"), _)
                if accumulated
                    .iter()
                    .any(|item| item["type"] == "function_call") =>
            {
                StopReason::ToolUse
            }
            (Some("completed"), _) => StopReason::EndTurn,
            (Some("incomplete"), Some("max_output_tokens")) => StopReason::MaxTokens,
            other => panic!("{name}: unexpected final status {other:?}"),
        };
        assert_eq!(ours.stop_reason, Some(expected_stop), "{name}");
        let usage = &final_response["usage"];
        assert_eq!(
            ours.usage.input_tokens + ours.usage.cache_read_input_tokens.unwrap_or(0),
            usage["input_tokens"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            ours.usage.output_tokens,
            usage["output_tokens"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(ours.id.as_str(), final_response["id"], "{name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
