//! The Chat Completions streams of the shared corpus (`corpus/openai/`: real OpenAI, Groq and
//! OpenRouter captures) decoded by `provider::chat::ChatStream`, against what the official
//! `openai` Python SDK's stream accumulation makes of them (`fixtures/chat-expected/`, made
//! by its `generate.py`): the same text, reasoning, tool calls and usage, or an error where
//! the SDK raises. Each stream is also fed in every split of a few chunk sizes: the blocks
//! must not depend on where the network cut the bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{decode, decode_cut};
use protocol::{ContentBlock, StopReason};
use serde_json::Value;

/// `$AGENT_CORPUS_DIR`, else `shared/corpus` beside an ancestor of this crate; `None` with a
/// loud note outside CI, a panic in CI.
fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENT_CORPUS_DIR") {
        return Some(PathBuf::from(dir));
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    for ancestor in manifest.ancestors() {
        let candidate = ancestor.join("shared").join("corpus");
        if candidate.join("MANIFEST.tsv").is_file() {
            return Some(candidate);
        }
    }
    assert!(
        !std::env::var("CI").is_ok_and(|ci| ci == "true"),
        "test corpus not found: set AGENT_CORPUS_DIR or put shared/corpus beside the workspace"
    );
    eprintln!("\n*** SKIPPED: test corpus not found (set AGENT_CORPUS_DIR) ***\n");
    None
}

fn stop_reason(finish: &str) -> StopReason {
    match finish {
        "stop" => StopReason::EndTurn,
        "tool_calls" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        other => panic!("unexpected finish_reason {other}"),
    }
}

#[test]
fn corpus_streams_decode_as_the_openai_sdk_accumulates_them() {
    let Some(corpus) = corpus_dir() else { return };
    let expected_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat-expected");
    let mut checked = 0;
    for entry in std::fs::read_dir(corpus.join("openai")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|ext| ext != "sse") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(expected_dir.join(format!("{name}.json")))
                .unwrap_or_else(|error| panic!("{name}: no expected file ({error})")),
        )
        .unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let whole = decode(&bytes, 0);
        for size in [1, 2, 3, 7, 64, 1000] {
            let split = decode(&bytes, size);
            match (&whole, &split) {
                (Ok((a, blocks_a)), Ok((b, blocks_b))) => {
                    assert_eq!(a.message, b.message, "{name}: split at {size}");
                    assert_eq!(blocks_a, blocks_b, "{name}: split at {size}");
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "{name}: split at {size}"),
                _ => panic!("{name}: split at {size} gives {split:?}, whole {whole:?}"),
            }
        }
        checked += 1;
        if let Some(error) = expected.get("error") {
            let message = error["message"].as_str().unwrap_or_default();
            let ours = whole
                .err()
                .unwrap_or_else(|| panic!("{name}: decoded, the SDK raised"));
            assert!(ours.contains(message), "{name}: {ours}");
            continue;
        }
        let (done, blocks) = whole.unwrap_or_else(|error| panic!("{name}: {error}"));
        let message = &done.message;
        assert_eq!(message.text(), expected["content"], "{name}");
        let thinking: String = message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Thinking(thinking) => Some(thinking.thinking.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(thinking, expected["reasoning"], "{name}");
        let calls: Vec<(String, String, Value)> = message
            .content
            .iter()
            .filter_map(ContentBlock::as_tool_use)
            .map(|call| (call.id.to_string(), call.name.clone(), call.input.clone()))
            .collect();
        let wanted: Vec<(String, String, Value)> = expected["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|call| {
                (
                    call["id"].as_str().unwrap().to_owned(),
                    call["name"].as_str().unwrap().to_owned(),
                    serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap(),
                )
            })
            .collect();
        assert_eq!(calls, wanted, "{name}");
        // Every block was handed out complete before the message ended, in order.
        assert_eq!(blocks, message.content, "{name}");
        assert_eq!(
            message.stop_reason,
            Some(stop_reason(expected["finish_reason"].as_str().unwrap())),
            "{name}"
        );
        if let Some(usage) = expected["usage"].as_object() {
            let cached = usage["cached_tokens"].as_u64().unwrap();
            assert_eq!(
                message.usage.input_tokens,
                usage["prompt_tokens"].as_u64().unwrap() - cached,
                "{name}"
            );
            assert_eq!(message.usage.cache_read_input_tokens.unwrap_or(0), cached);
            assert_eq!(
                message.usage.output_tokens,
                usage["completion_tokens"].as_u64().unwrap(),
                "{name}"
            );
        }
    }
    assert_eq!(checked, 8, "the corpus has eight Chat Completions streams");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any split of a Chat Completions stream (thinking, text, several tool calls with
    /// arguments in pieces, usage, `[DONE]`) gives the same events, blocks and message as
    /// the whole body.
    #[test]
    fn any_split_gives_the_same_blocks(
        cuts in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..24),
        text in "[a-zé😀 \\n\"\\\\]{0,40}",
        calls in 1usize..4,
    ) {
        let mut turn = testkit::Turn::new().thinking("weighing it", "").text(&text);
        for n in 0..calls {
            turn = turn.tool_use(
                &format!("call_{n}"),
                "Edit",
                serde_json::json!({"file_path": format!("f{n}.rs"), "new_string": text.clone()}),
            );
        }
        let body = turn.chat_sse();
        let whole = decode(&body, 0).map_err(proptest::test_runner::TestCaseError::fail)?;
        let (message, blocks) = decode_cut(&body, cuts.iter().map(|cut| cut.index(body.len() + 1)))
            .map_err(proptest::test_runner::TestCaseError::fail)?;
        proptest::prop_assert_eq!(&message.message, &whole.0.message);
        proptest::prop_assert_eq!(&blocks, &whole.1);
        // Thinking, text (an empty text makes no block), the calls.
        proptest::prop_assert_eq!(
            message.message.content.len(),
            1 + usize::from(!text.is_empty()) + calls
        );
        proptest::prop_assert_eq!(message.message.text(), text);
    }
}
