//! The accumulation cases the crate promises, each run through the whole pipeline with the
//! input split at every byte offset.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use protocol::{BlockStatus, ContentBlock, ErrorKind};
use serde_json::json;
use sse_parser::{AccumulateError, Error, FinalMessage, Item, MessageStream};

/// What a run produced: the completed blocks in order, and how it ended.
#[derive(Debug, PartialEq)]
struct Run {
    completed: Vec<(usize, String)>,
    outcome: Result<String, String>,
}

/// Frames `events` (SSE `event:` name = JSON type) into a body.
fn sse(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {}\n\n",
                event["type"].as_str().unwrap(),
                serde_json::to_string(event).unwrap()
            )
        })
        .collect()
}

fn run_chunks(chunks: &[&[u8]]) -> (Run, Option<FinalMessage>, Option<Error>) {
    let mut stream = MessageStream::new();
    let mut completed = Vec::new();
    let mut done = None;
    for chunk in chunks {
        stream.push(Bytes::copy_from_slice(chunk));
        loop {
            match stream.next_item() {
                Ok(Some(Item::BlockComplete(block))) => {
                    completed.push((block.index, serde_json::to_string(&block.block).unwrap()));
                }
                Ok(Some(Item::MessageComplete(message))) => done = Some(*message),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(error) => {
                    let outcome = Err(error.to_string());
                    return (Run { completed, outcome }, None, Some(error));
                }
            }
        }
    }
    match stream.finish() {
        Ok(finished) => {
            let message = done.or(finished.message).expect("a message");
            let outcome = Ok(serde_json::to_string(&message.message.content).unwrap());
            (Run { completed, outcome }, Some(message), None)
        }
        Err(error) => {
            let outcome = Err(error.to_string());
            (Run { completed, outcome }, None, Some(error))
        }
    }
}

/// Runs `body` whole, then split at every byte offset, and checks every run gives the same
/// result as the whole one. Returns the whole run's message and error.
fn check(body: &str) -> (Run, Option<FinalMessage>, Option<Error>) {
    let whole = run_chunks(&[body.as_bytes()]);
    for split in 0..=body.len() {
        let (a, b) = body.as_bytes().split_at(split);
        let (run, _, _) = run_chunks(&[a, b]);
        assert_eq!(run, whole.0, "split at byte {split}");
    }
    whole
}

fn message_start() -> serde_json::Value {
    json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",
        "model":"claude-opus-4-8","content":[],"stop_reason":null,"stop_sequence":null,
        "usage":{"input_tokens":10,"output_tokens":1}}})
}

fn tool_start(index: usize) -> serde_json::Value {
    json!({"type":"content_block_start","index":index,
        "content_block":{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}})
}

fn input_delta(index: usize, fragment: &str) -> serde_json::Value {
    json!({"type":"content_block_delta","index":index,
        "delta":{"type":"input_json_delta","partial_json":fragment}})
}

fn stop(index: usize) -> serde_json::Value {
    json!({"type":"content_block_stop","index":index})
}

fn end(reason: &str) -> Vec<serde_json::Value> {
    vec![
        json!({"type":"message_delta","delta":{"stop_reason":reason,"stop_sequence":null},"usage":{"output_tokens":30}}),
        json!({"type":"message_stop"}),
    ]
}

fn tool_stream(fragments: &[&str]) -> String {
    let mut events = vec![message_start(), tool_start(0)];
    events.extend(fragments.iter().map(|fragment| input_delta(0, fragment)));
    events.push(stop(0));
    events.extend(end("tool_use"));
    sse(&events)
}

#[test]
fn tool_input_without_fragments_is_the_start_input() {
    for fragments in [&[][..], &[""][..]] {
        let (run, message, _) = check(&tool_stream(fragments));
        assert_eq!(
            run.completed,
            [(
                0,
                r#"{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}"#.to_owned()
            )],
            "fragments {fragments:?}"
        );
        let message = message.unwrap();
        assert_eq!(
            message.message.content[0].as_tool_use().unwrap().input,
            json!({})
        );
        assert_eq!(message.block_status, [BlockStatus::Complete]);
    }
}

#[test]
fn tool_input_fragments_are_concatenated_then_parsed() {
    let (run, message, _) = check(&tool_stream(&["{\"pa", "th\": \"a.", "txt\"}"]));
    assert_eq!(
        run.completed,
        [(
            0,
            r#"{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"a.txt"}}"#
                .to_owned()
        )]
    );
    assert_eq!(message.unwrap().runnable_tool_uses().count(), 1);
}

#[test]
fn tool_input_that_does_not_parse_is_marked_invalid() {
    let (run, message, _) = check(&tool_stream(&["{\"path\": ", "oops}"]));
    assert_eq!(run.completed.len(), 1);
    let message = message.unwrap();
    let BlockStatus::InvalidInput(invalid) = &message.block_status[0] else {
        panic!("{:?}", message.block_status)
    };
    assert_eq!(invalid.raw, "{\"path\": oops}");
    assert!(
        invalid.error.contains("line 1 column 10"),
        "{}",
        invalid.error
    );
    // The history gets `{}`, and nobody may run it.
    assert_eq!(
        message.message.content[0].as_tool_use().unwrap().input,
        json!({})
    );
    assert_eq!(message.runnable_tool_uses().count(), 0);

    let (_, message, _) = check(&tool_stream(&["[1, 2]"]));
    let BlockStatus::InvalidInput(invalid) = &message.unwrap().block_status[0] else {
        panic!()
    };
    assert_eq!(
        invalid.error,
        "tool input must be a JSON object, got an array"
    );
}

#[test]
fn overloaded_error_event_mid_text_is_a_typed_retryable_error() {
    let body = sse(&[
        message_start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}),
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
    ]);
    let (run, message, error) = check(&body);
    assert!(message.is_none(), "no partial message");
    assert!(run.completed.is_empty());
    let error = error.unwrap();
    assert!(error.is_retryable());
    let Error::Accumulate(AccumulateError::Api {
        event_index,
        error: body,
    }) = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(*event_index, 3);
    assert_eq!(body.error.kind, ErrorKind::Overloaded);
    assert_eq!(
        error.to_string(),
        "event 3: the API reported overloaded_error: Overloaded"
    );
}

#[test]
fn end_of_input_mid_text_is_incomplete() {
    let body = sse(&[
        message_start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}),
    ]);
    let (run, message, error) = check(&body);
    assert!(message.is_none());
    assert!(run.completed.is_empty());
    let error = error.unwrap();
    assert!(error.is_retryable());
    assert_eq!(
        error.to_string(),
        "stream ended before message_stop: message_start, 1 block (0 stopped), block [0] still open, no stop_reason; 3 events in all"
    );
}

#[test]
fn end_of_input_inside_tool_json_is_incomplete_and_never_complete() {
    let body = sse(&[
        message_start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading."}}),
        stop(0),
        tool_start(1),
        input_delta(1, "{\"file_pa"),
    ]);
    let (run, message, error) = check(&body);
    assert!(message.is_none());
    // Only the text block completed; the cut tool_use never did.
    assert_eq!(run.completed.len(), 1);
    assert!(run.completed[0].1.contains("\"text\""));
    assert!(matches!(
        error,
        Some(Error::Accumulate(AccumulateError::Incomplete { .. }))
    ));
}

#[test]
fn thinking_and_signature_round_trip_byte_for_byte() {
    let body = sse(&[
        message_start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me "}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"check."}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG_ABC"}}),
        stop(0),
        end("end_turn")[0].clone(),
        end("end_turn")[1].clone(),
    ]);
    let (run, message, _) = check(&body);
    let wire = r#"{"type":"thinking","thinking":"Let me check.","signature":"SIG_ABC"}"#;
    assert_eq!(run.completed, [(0, wire.to_owned())]);
    let block = &message.unwrap().message.content[0];
    let ContentBlock::Thinking(thinking) = block else {
        panic!()
    };
    assert_eq!(
        (thinking.thinking.as_str(), thinking.signature.as_str()),
        ("Let me check.", "SIG_ABC")
    );
    // Replayable: parse the wire form back and serialize again, unchanged.
    let back: ContentBlock = serde_json::from_str(wire).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), wire);
}

#[test]
fn events_out_of_place_name_their_index() {
    let cases: [(Vec<serde_json::Value>, &str); 4] = [
        (
            vec![json!({"type":"content_block_stop","index":0})],
            "event 0 (content_block_stop) arrived before message_start",
        ),
        (
            vec![message_start(), input_delta(2, "{")],
            "event 1 (content_block_delta) for block 2, which was never started",
        ),
        (
            vec![
                message_start(),
                tool_start(0),
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}),
            ],
            "event 2: text_delta for block 0, a tool_use block",
        ),
        (
            vec![
                message_start(),
                tool_start(0),
                stop(0),
                input_delta(0, "{}"),
            ],
            "event 3 (content_block_delta) for block 0, which was already stopped",
        ),
    ];
    for (events, expected) in cases {
        let (_, _, error) = check(&sse(&events));
        assert_eq!(error.unwrap().to_string(), expected);
    }
}

#[test]
fn fallback_block_relabels_the_model_and_usage_overwrites() {
    let body = sse(&[
        message_start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"fallback","from":{"model":"claude-opus-4-8"},"to":{"model":"claude-sonnet-4-5"}}}),
        stop(0),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":12,"output_tokens":40,"server_tool_use":{"web_search_requests":1}}}),
        json!({"type":"message_stop"}),
    ]);
    let (_, message, _) = check(&body);
    let message = message.unwrap().message;
    assert_eq!(message.model, "claude-sonnet-4-5");
    assert_eq!(
        (message.usage.input_tokens, message.usage.output_tokens),
        (12, 40)
    );
    assert_eq!(
        message.usage.extra["server_tool_use"]["web_search_requests"],
        1
    );
}

#[test]
fn bundled_example_stream_is_the_readme_demo() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/streams/edit_and_test.sse"
    );
    let body = std::fs::read_to_string(path).unwrap();
    let (run, message, error) = check(&body);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        run.completed
            .iter()
            .map(|(index, _)| *index)
            .collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let done = message.unwrap();
    let tools: Vec<(&str, String)> = done
        .runnable_tool_uses()
        .map(|tool| (tool.name.as_str(), tool.input.to_string()))
        .collect();
    assert_eq!(
        tools,
        [
            (
                "Edit",
                r#"{"file_path":"src/lib.rs","old_string":"a - b","new_string":"a + b"}"#
                    .to_owned()
            ),
            (
                "Bash",
                r#"{"command":"cargo test","description":"Run the tests"}"#.to_owned()
            ),
        ]
    );
    assert_eq!(done.message.usage.output_tokens, 187);
    assert!(done.message.text().ends_with("ça marche."));
}

/// Regression (found by fuzzing): a tool_use whose content_block_start carried a non-object
/// input and got no deltas was reported complete and runnable.
#[test]
fn a_non_object_start_input_is_invalid() {
    let body = sse(&[
        message_start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":"rm -rf"}}),
        stop(0),
        end("tool_use")[0].clone(),
        end("tool_use")[1].clone(),
    ]);
    let (run, message, _) = check(&body);
    assert_eq!(run.completed.len(), 1);
    let message = message.unwrap();
    let BlockStatus::InvalidInput(invalid) = &message.block_status[0] else {
        panic!("{:?}", message.block_status)
    };
    assert_eq!(invalid.raw, "\"rm -rf\"");
    assert_eq!(
        invalid.error,
        "tool input must be a JSON object, got a string"
    );
    assert_eq!(message.runnable_tool_uses().count(), 0);
}
