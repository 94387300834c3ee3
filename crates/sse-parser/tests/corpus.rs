//! The real-data corpus: WHATWG conformance cases, captured Messages API streams and the
//! messages the official Python SDK accumulates from them.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;
use sse_parser::{
    AccumulateError, Decoder, Error, FinalMessage, Framer, Item, MessageAccumulator, MessageStream,
    Output, SseEvent, Warning, is_event_stream,
};

use common::{corpus_dir, drop_nulls, files, read_json, stem};

fn b64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("valid base64 in the corpus")
}

/// Frames `chunks` and returns (type, data, id) of each event, plus the framer's retry.
fn frame_chunks(
    chunks: &[&[u8]],
    initial_id: Option<&str>,
) -> (Vec<(String, String, String)>, Option<u64>) {
    let mut framer = Framer::new();
    if let Some(id) = initial_id {
        framer.set_last_event_id(id.to_owned());
    }
    let mut events = Vec::new();
    for chunk in chunks {
        for event in framer.feed(Bytes::copy_from_slice(chunk)) {
            let event = event.unwrap();
            events.push((
                event.event_type().into_owned(),
                event.data_str().into_owned(),
                String::from_utf8_lossy(event.id()).into_owned(),
            ));
        }
    }
    framer.finish().unwrap();
    (events, framer.retry())
}

fn expected_events(list: &Value) -> Vec<(String, String, String)> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|event| {
            (
                event["type"].as_str().unwrap().to_owned(),
                event["data"].as_str().unwrap().to_owned(),
                event["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn whatwg_conformance_cases_at_every_split() {
    let Some(corpus) = corpus_dir() else { return };
    let text = std::fs::read_to_string(corpus.join("whatwg/cases.jsonl")).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let name = case["name"].as_str().unwrap();
        let input = b64(case["input_b64"].as_str().unwrap());
        let content_type = case["content_type"].as_str().unwrap();
        let fails = case["expect_connection_fails"].as_bool().unwrap_or(false);
        assert_eq!(
            !is_event_stream(content_type),
            fails,
            "{name}: media type {content_type:?}"
        );
        let expected = if fails {
            expected_events(&case["body_parse_if_mime_were_accepted"])
        } else {
            expected_events(&case["expected"])
        };
        let expected_retry = case["retry"].as_u64();
        let initial_id = case["initial_last_event_id"].as_str();
        for split in 0..=input.len() {
            let (a, b) = input.split_at(split);
            let (events, retry) = frame_chunks(&[a, b], initial_id);
            assert_eq!(events, expected, "{name}: split at byte {split}");
            assert_eq!(
                retry, expected_retry,
                "{name}: retry, split at byte {split}"
            );
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(
            frame_chunks(&bytes, initial_id).0,
            expected,
            "{name}: one-byte chunks"
        );
        checked += 1;
    }
    assert_eq!(checked, 34, "every WHATWG case ran");
}

#[test]
fn sdk_decoder_chunk_cases() {
    let Some(corpus) = corpus_dir() else { return };
    let text =
        std::fs::read_to_string(corpus.join("anthropic/edge/sdkpy_test_streaming_chunks.jsonl"))
            .unwrap();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let name = case["name"].as_str().unwrap();
        let chunks: Vec<Vec<u8>> = case["chunks_b64"]
            .as_array()
            .unwrap()
            .iter()
            .map(|chunk| b64(chunk.as_str().unwrap()))
            .collect();
        let chunk_refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let (events, _) = frame_chunks(&chunk_refs, None);
        // WHATWG semantics: events without data are not dispatched (where the SDK differs).
        let expected: Vec<&Value> = case["expected_sdk"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| !(event.get("json").is_none() && event["data"] == ""))
            .collect();
        assert_eq!(events.len(), expected.len(), "{name}: {events:?}");
        for ((ty, data, _), want) in events.iter().zip(expected) {
            let want_type = want["event"].as_str().unwrap_or("message");
            assert_eq!(ty, want_type, "{name}");
            if let Some(json) = want.get("json") {
                let got: Value = serde_json::from_str(data).unwrap();
                assert_eq!(&got, json, "{name}");
            }
            if let Some(raw) = want.get("data") {
                assert_eq!(data, raw.as_str().unwrap(), "{name}");
            }
        }
    }
}

/// Runs a whole body through the pipeline, returning the completed messages and how it ended.
fn run_pipeline(body: &[u8]) -> (Vec<FinalMessage>, Result<sse_parser::Finished, Error>) {
    let mut stream = MessageStream::new();
    stream.push(Bytes::copy_from_slice(body));
    let mut messages = Vec::new();
    loop {
        match stream.next_item() {
            Ok(Some(Item::MessageComplete(done))) => messages.push(*done),
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(error) => return (messages, Err(error)),
        }
    }
    (messages, stream.finish())
}

fn assert_matches_expected(name: &str, message: &protocol::Message, expected: &Path) {
    let got = drop_nulls(serde_json::to_value(message).unwrap());
    let want = drop_nulls(read_json(expected));
    if got != want {
        panic!(
            "{name}: accumulated message differs from the SDK's\n got: {}\nwant: {}",
            serde_json::to_string(&got).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
    }
}

#[test]
fn captured_sse_streams_match_the_sdk() {
    let Some(corpus) = corpus_dir() else { return };
    let mut compared = 0;
    let mut without_expected = Vec::new();
    for path in files(&corpus.join("anthropic"), ".sse") {
        let name = stem(&path);
        let body = std::fs::read(&path).unwrap();
        let (mut messages, finished) = run_pipeline(&body);
        let finished = finished.unwrap_or_else(|error| panic!("{name}: {error}"));
        messages.extend(finished.message);
        assert_eq!(messages.len(), 1, "{name}: one message per capture");
        let expected = corpus.join("expected").join(format!("{name}.json"));
        if expected.is_file() {
            assert_matches_expected(&name, &messages[0].message, &expected);
            compared += 1;
        } else {
            without_expected.push((name, messages.remove(0), finished.unterminated));
        }
    }
    assert!(compared >= 45, "compared {compared} captures with the SDK");
    // The captures without an expected file are the SDK fixtures that end without the blank
    // line dispatching message_stop: accepted with a warning by the documented rule.
    assert_eq!(without_expected.len(), 7);
    for (name, done, unterminated) in &without_expected {
        assert!(
            done.warnings.contains(&Warning::MessageStopMissing),
            "{name}"
        );
        let unterminated = unterminated.as_ref().unwrap_or_else(|| panic!("{name}"));
        assert_eq!(unterminated.event.event_type(), "message_stop", "{name}");
    }
}

/// The decoder's fast paths (the compact layouts of content_block_delta, message_start and
/// content_block_start) must decode every real event exactly as the generic path does. A
/// leading space is valid JSON and never matches a fast path, so it forces the generic one.
#[test]
fn fast_paths_agree_with_the_generic_decoder_on_every_captured_event() {
    let Some(corpus) = corpus_dir() else { return };
    let mut compared = std::collections::BTreeMap::<String, usize>::new();
    for path in files(&corpus.join("anthropic"), ".sse") {
        let name = stem(&path);
        let mut framer = Framer::new();
        framer.push(Bytes::from(std::fs::read(&path).unwrap()));
        while let Some(event) = framer.next_event().unwrap() {
            let data = event.data();
            let mut padded = b" ".to_vec();
            padded.extend_from_slice(data);
            let fast = Decoder::new().decode_data(data);
            let generic = Decoder::new().decode_data(&padded);
            match (fast, generic) {
                (Ok(fast), Ok(generic)) => assert_eq!(fast, generic, "{name}: {event:?}"),
                (Err(_), Err(_)) => {}
                (fast, generic) => panic!("{name}: {event:?}: {fast:?} vs {generic:?}"),
            }
            *compared.entry(event.event_type().into_owned()).or_default() += 1;
        }
    }
    for kind in [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ] {
        assert!(
            compared.get(kind).copied().unwrap_or(0) >= 45,
            "{kind}: {compared:?}"
        );
    }
}

#[test]
fn max_tokens_cut_inside_tool_json_is_truncated_not_run() {
    let Some(corpus) = corpus_dir() else { return };
    let body =
        std::fs::read(corpus.join("anthropic/sdkpy_incomplete_partial_json_response.sse")).unwrap();
    let (messages, finished) = run_pipeline(&body);
    assert!(messages.is_empty());
    let done = finished.unwrap().message.unwrap();
    assert_eq!(
        done.message.stop_reason,
        Some(protocol::StopReason::MaxTokens)
    );
    let protocol::BlockStatus::Truncated { raw_input } = &done.block_status[1] else {
        panic!("{:?}", done.block_status)
    };
    assert!(
        raw_input
            .as_deref()
            .unwrap()
            .contains("\"lines_of_text\": [")
    );
    assert_eq!(
        done.message.content[1].as_tool_use().unwrap().input,
        serde_json::json!({})
    );
    assert_eq!(done.runnable_tool_uses().count(), 0);
    assert_eq!(
        done.warnings,
        [
            Warning::MessageStopMissing,
            Warning::BlockLeftOpen { index: 1 }
        ]
    );
}

/// Accumulates event-per-line JSON, one message after another.
fn accumulate_lines(text: &str) -> Result<Vec<FinalMessage>, String> {
    let mut decoder = Decoder::new();
    let mut accumulator = MessageAccumulator::new();
    let mut messages = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let sse = SseEvent::new(
            Bytes::new(),
            Bytes::copy_from_slice(line.as_bytes()),
            Bytes::new(),
        );
        let Some(event) = decoder.decode(&sse).map_err(|error| error.to_string())? else {
            continue;
        };
        match accumulator.push(&event) {
            Ok(Some(Output::MessageComplete(done))) => messages.push(*done),
            Ok(_) => {}
            Err(error) => return Err(error.to_string()),
        }
    }
    messages.extend(accumulator.finish().map_err(|error| error.to_string())?);
    Ok(messages)
}

#[test]
fn jsonl_fixtures_match_the_sdk() {
    let Some(corpus) = corpus_dir() else { return };
    let mut compared = 0;
    for path in files(&corpus.join("anthropic/jsonl"), ".jsonl") {
        let name = stem(&path);
        let text = std::fs::read_to_string(&path).unwrap();
        let result = accumulate_lines(&text);
        match name.as_str() {
            "vercel_duplicate-message-start" => {
                assert_eq!(
                    result.unwrap_err(),
                    "event 1: message_start while message msg_dup is still open (no message_stop)"
                );
                continue;
            }
            "vercel_spliced-message-start" => {
                assert_eq!(
                    result.unwrap_err(),
                    "event 7: message_start while message msg_first is still open (no message_stop)"
                );
                continue;
            }
            _ => {}
        }
        let messages = result.unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(messages.len(), 1, "{name}");
        let expected = corpus.join("expected").join(format!("jsonl_{name}.json"));
        assert!(expected.is_file(), "{name}: no expected file");
        assert_matches_expected(&name, &messages[0].message, &expected);
        compared += 1;
    }
    assert!(compared >= 40, "compared {compared} fixtures");
}

#[test]
fn multi_message_fixtures_start_a_new_message_after_message_stop() {
    let Some(corpus) = corpus_dir() else { return };
    let multi = files(&corpus.join("anthropic/jsonl-multi"), ".jsonl");
    assert_eq!(multi.len(), 5);
    for path in multi {
        let name = stem(&path);
        let messages = accumulate_lines(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert!(messages.len() >= 2, "{name}");
        for (part, done) in messages.iter().enumerate() {
            let expected = corpus
                .join("expected")
                .join(format!("jsonl_{name}.part{}.json", part + 1));
            assert_matches_expected(
                &format!("{name} part {}", part + 1),
                &done.message,
                &expected,
            );
        }
    }
}

#[test]
fn observed_error_payloads_are_typed_and_retryable() {
    let Some(corpus) = corpus_dir() else { return };
    let text = std::fs::read_to_string(corpus.join("anthropic/edge/observed_error_payloads.jsonl"))
        .unwrap();
    let mut seen = 0;
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let row: Value = serde_json::from_str(line).unwrap();
        let data = row["data"].as_str().unwrap();
        let event = Decoder::new()
            .decode_data(data.as_bytes())
            .unwrap()
            .unwrap();
        let protocol::StreamEvent::Error(body) = &event else {
            panic!("{data}")
        };
        let mut accumulator = MessageAccumulator::new();
        let error = accumulator.push(&event).unwrap_err();
        assert!(matches!(error, AccumulateError::Api { event_index: 0, .. }));
        assert_eq!(error.is_retryable(), body.is_retryable(), "{data}");
        seen += 1;
    }
    assert_eq!(seen, 5);
}
