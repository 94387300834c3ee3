//! Property tests: chunking never changes the result, arbitrary bytes never panic, and
//! arbitrary well-formed streams accumulate to the message they describe.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Value, json};
use sse_parser::{Framer, Item, MessageStream};

/// Splits `input` at the given cut points (taken modulo the length, sorted).
fn split<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(&input[start..cut]);
        start = cut;
    }
    chunks.push(&input[start..]);
    chunks
}

/// Everything observable of a run: framed events, pipeline items (as JSON-ish debug text) and
/// the ending.
fn observe(chunks: &[&[u8]]) -> (Vec<(Bytes, Bytes, Bytes)>, Vec<String>) {
    let mut framer = Framer::new();
    let mut events = Vec::new();
    for chunk in chunks {
        for event in framer.feed(Bytes::copy_from_slice(chunk)) {
            match event {
                Ok(event) => events.push((
                    event.event_bytes().clone(),
                    event.data().clone(),
                    event.id().clone(),
                )),
                Err(error) => {
                    events.push((Bytes::new(), Bytes::from(error.to_string()), Bytes::new()))
                }
            }
        }
    }
    let tail = framer.finish().map(|rest| format!("{rest:?}"));
    events.push((Bytes::new(), Bytes::from(format!("{tail:?}")), Bytes::new()));

    // The borrowing path gives the same events, the same error and the same ending.
    let mut framer = Framer::new();
    let mut borrowed = Vec::new();
    for chunk in chunks {
        framer.push(Bytes::copy_from_slice(chunk));
        loop {
            match framer.next_event_ref() {
                Ok(Some(event)) => borrowed.push((
                    Bytes::copy_from_slice(event.event_bytes()),
                    Bytes::copy_from_slice(event.data()),
                    Bytes::copy_from_slice(event.id()),
                )),
                Ok(None) => break,
                Err(error) => {
                    borrowed.push((Bytes::new(), Bytes::from(error.to_string()), Bytes::new()));
                    break;
                }
            }
        }
    }
    let tail = framer.finish().map(|rest| format!("{rest:?}"));
    borrowed.push((Bytes::new(), Bytes::from(format!("{tail:?}")), Bytes::new()));
    assert_eq!(borrowed, events, "next_event_ref and next_event disagree");

    let mut stream = MessageStream::new();
    let mut items = Vec::new();
    'outer: for chunk in chunks {
        stream.push(Bytes::copy_from_slice(chunk));
        loop {
            match stream.next_item() {
                Ok(Some(item)) => items.push(format!("{item:?}")),
                Ok(None) => break,
                Err(error) => {
                    items.push(format!("error: {error}"));
                    break 'outer;
                }
            }
        }
    }
    if !items.last().is_some_and(|item| item.starts_with("error")) {
        items.push(match stream.finish() {
            Ok(finished) => format!("{:?}", finished.message),
            Err(error) => format!("error: {error}"),
        });
    }
    (events, items)
}

/// Every captured `.sse` file, read once per test binary.
fn corpus_files() -> &'static [Vec<u8>] {
    static FILES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    FILES.get_or_init(|| {
        let Some(corpus) = common::corpus_dir() else {
            return Vec::new();
        };
        common::files(&corpus.join("anthropic"), ".sse")
            .into_iter()
            .map(|path| std::fs::read(path).unwrap())
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_chunking_of_a_corpus_file_gives_the_same_result(
        file in any::<prop::sample::Index>(),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
    ) {
        let files = corpus_files();
        if files.is_empty() {
            return Ok(());
        }
        let input = &files[file.index(files.len())];
        let whole = observe(&[input]);
        prop_assert_eq!(&observe(&split(input, &cuts)), &whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        input in prop::collection::vec(any::<u8>(), 0..2048),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let whole = observe(&[&input]);
        prop_assert_eq!(observe(&split(&input, &cuts)), whole);
    }

    #[test]
    fn event_like_noise_never_panics_and_chunking_is_invariant(
        lines in prop::collection::vec(prop_oneof![
            Just("data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[]}}".to_owned()),
            Just("data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}".to_owned()),
            Just("data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}".to_owned()),
            Just("data: {\"type\":\"content_block_stop\",\"index\":0}".to_owned()),
            Just("data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}".to_owned()),
            Just("data: {\"type\":\"message_stop\"}".to_owned()),
            Just(String::new()),
            Just(":comment".to_owned()),
            Just("event: content_block_delta".to_owned()),
            Just("event: content_block_del".to_owned()),
            Just("event: custom".to_owned()),
            Just("id: 7".to_owned()),
            "[a-z:\\r\\n ]{0,12}",
        ], 0..40),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
    ) {
        let input = lines.join("\n");
        let whole = observe(&[input.as_bytes()]);
        prop_assert_eq!(observe(&split(input.as_bytes(), &cuts)), whole);
    }
}

/// One block of a generated stream: its final JSON and the deltas that build it.
#[derive(Clone, Debug)]
enum Spec {
    Text(Vec<String>),
    Thinking(Vec<String>, String),
    Tool(Value, Vec<usize>),
}

fn spec() -> impl Strategy<Value = Spec> {
    let text = prop::collection::vec("\\PC{0,12}", 0..6).prop_map(Spec::Text);
    let thinking = (
        prop::collection::vec("\\PC{0,12}", 0..6),
        "[A-Za-z0-9+/]{1,20}",
    )
        .prop_map(|(parts, signature)| Spec::Thinking(parts, signature));
    let tool = (
        prop::collection::btree_map(
            "[a-z_]{1,8}",
            prop_oneof![
                any::<i32>().prop_map(Value::from),
                "\\PC{0,10}".prop_map(Value::from),
                any::<bool>().prop_map(Value::from),
            ],
            0..4,
        ),
        prop::collection::vec(any::<usize>(), 0..6),
    )
        .prop_map(|(fields, cuts)| Spec::Tool(Value::Object(fields.into_iter().collect()), cuts));
    prop_oneof![text, thinking, tool]
}

/// The SSE body for `specs` and the message the SDK would build from it.
fn build(specs: &[Spec], output_tokens: u64, reason: &str) -> (String, Value) {
    let mut events = vec![
        json!({"type":"message_start","message":{"id":"msg_p","type":"message",
        "role":"assistant","model":"claude-opus-4-8","content":[],"stop_reason":null,
        "stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}),
    ];
    let mut content = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        let delta =
            |delta: Value| json!({"type":"content_block_delta","index":index,"delta":delta});
        match spec {
            Spec::Text(parts) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}));
                events.extend(
                    parts
                        .iter()
                        .map(|part| delta(json!({"type":"text_delta","text":part}))),
                );
                content.push(json!({"type":"text","text":parts.concat()}));
            }
            Spec::Thinking(parts, signature) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"thinking","thinking":"","signature":""}}));
                events.extend(
                    parts
                        .iter()
                        .map(|part| delta(json!({"type":"thinking_delta","thinking":part}))),
                );
                events.push(delta(
                    json!({"type":"signature_delta","signature":signature}),
                ));
                content.push(
                    json!({"type":"thinking","thinking":parts.concat(),"signature":signature}),
                );
            }
            Spec::Tool(input, cuts) => {
                let id = format!("toolu_{index}");
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":"Edit","input":{}}}));
                let text = serde_json::to_string(input).unwrap();
                // Split at char boundaries only: fragments are JSON strings.
                let boundaries: Vec<usize> = (0..=text.len())
                    .filter(|i| text.is_char_boundary(*i))
                    .collect();
                let mut points: Vec<usize> = cuts
                    .iter()
                    .map(|cut| boundaries[cut % boundaries.len()])
                    .collect();
                points.sort_unstable();
                let mut start = 0;
                for point in points.into_iter().chain([text.len()]) {
                    events.push(delta(
                        json!({"type":"input_json_delta","partial_json":&text[start..point]}),
                    ));
                    start = point;
                }
                content.push(json!({"type":"tool_use","id":id,"name":"Edit","input":input}));
            }
        }
        events.push(json!({"type":"content_block_stop","index":index}));
    }
    events.push(json!({"type":"message_delta","delta":{"stop_reason":reason,"stop_sequence":null},"usage":{"output_tokens":output_tokens}}));
    events.push(json!({"type":"message_stop"}));
    let body = events
        .iter()
        .map(|event| {
            format!(
                "event: {}\ndata: {}\n\n",
                event["type"].as_str().unwrap(),
                event
            )
        })
        .collect();
    let message = json!({"id":"msg_p","type":"message","role":"assistant","model":"claude-opus-4-8",
        "content":content,"stop_reason":reason,"usage":{"input_tokens":5,"output_tokens":output_tokens}});
    (body, message)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn well_formed_streams_accumulate_to_the_reference(
        specs in prop::collection::vec(spec(), 0..6),
        output_tokens in 0u64..100_000,
        reason in prop::sample::select(vec!["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let (body, reference) = build(&specs, output_tokens, reason);
        let mut stream = MessageStream::new();
        let mut completed = 0;
        let mut message = None;
        for chunk in split(body.as_bytes(), &cuts) {
            stream.push(Bytes::copy_from_slice(chunk));
            while let Some(item) = stream.next_item().unwrap() {
                match item {
                    Item::BlockComplete(block) => {
                        prop_assert_eq!(block.index, completed);
                        prop_assert!(block.status.is_complete());
                        completed += 1;
                    }
                    Item::MessageComplete(done) => message = Some(done),
                    _ => {}
                }
            }
        }
        prop_assert_eq!(completed, specs.len());
        let done = message.unwrap();
        prop_assert_eq!(common::drop_nulls(serde_json::to_value(&done.message).unwrap()), reference);
        prop_assert!(done.warnings.is_empty());
    }
}
