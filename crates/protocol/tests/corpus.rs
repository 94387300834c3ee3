//! Forward compatibility on real data: every message the official SDK built from a captured
//! stream, and every message of the real Claude Code transcripts, survives a round trip through
//! these types unchanged.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The corpus locator is shared with sse-parser's tests (one copy; it moves to `testkit` when
// that crate exists).
#[path = "../../sse-parser/tests/common/mod.rs"]
mod common;

use protocol::{ContentBlock, Message, MessageParam, Role};
use serde_json::Value;

use common::{corpus_dir, drop_nulls, files, read_json};

#[test]
fn sdk_built_messages_round_trip() {
    let Some(corpus) = corpus_dir() else { return };
    let mut checked = 0;
    for path in files(&corpus.join("expected"), ".json") {
        let original = read_json(&path);
        let message: Message = serde_json::from_value(original.clone())
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let back = serde_json::to_value(&message).unwrap();
        assert_eq!(drop_nulls(back), drop_nulls(original), "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 100, "checked {checked} messages");
}

#[test]
fn claude_code_transcript_messages_round_trip() {
    let Some(corpus) = corpus_dir() else { return };
    let (mut assistant, mut user) = (0, 0);
    for path in files(&corpus.join("transcripts"), ".jsonl") {
        let text = std::fs::read_to_string(&path).unwrap();
        for (line_number, line) in text.lines().enumerate() {
            let entry: Value = serde_json::from_str(line).unwrap();
            let place = format!("{}:{}", path.display(), line_number + 1);
            let Some(original) = entry.get("message") else {
                continue;
            };
            match entry["type"].as_str() {
                Some("assistant") => {
                    let message: Message = serde_json::from_value(original.clone())
                        .unwrap_or_else(|error| panic!("{place}: {error}"));
                    let back = serde_json::to_value(&message).unwrap();
                    assert_eq!(drop_nulls(back), drop_nulls(original.clone()), "{place}");
                    assistant += 1;
                }
                Some("user") => {
                    let param: MessageParam = serde_json::from_value(original.clone())
                        .unwrap_or_else(|error| panic!("{place}: {error}"));
                    assert_eq!(param.role, Role::User);
                    match &original["content"] {
                        Value::String(text) => {
                            assert_eq!(
                                param.content,
                                [ContentBlock::text(text.clone())],
                                "{place}"
                            );
                        }
                        blocks => {
                            let back = serde_json::to_value(&param.content).unwrap();
                            assert_eq!(drop_nulls(back), drop_nulls(blocks.clone()), "{place}");
                        }
                    }
                    user += 1;
                }
                _ => {}
            }
        }
    }
    assert!(
        assistant >= 80 && user >= 60,
        "{assistant} assistant, {user} user messages"
    );
}
