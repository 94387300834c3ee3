//! Newline-separated JSON event payloads (the JSONL fixture form) through `Decoder` and
//! `MessageAccumulator`.
//!
//! Each line (a trailing `\r` is kept: it is JSON whitespace) goes through
//! `Decoder::decode_data`; decode errors are fine and the line is skipped, as a lenient caller
//! would. Decoded events go to `MessageAccumulator::push` until it errors (the accumulator is
//! documented as unusable after an error), then `finish()` is called, also after an error.
//!
//! Checks: no panic anywhere; every `FinalMessage` has one block status per content block; a
//! `BlockComplete` names a block index that was started.
#![no_main]

use libfuzzer_sys::fuzz_target;
use protocol::StreamEvent;
use sse_parser::{Decoder, FinalMessage, MessageAccumulator, Output};

fn check_final(done: &FinalMessage) {
    assert_eq!(
        done.block_status.len(),
        done.message.content.len(),
        "one block status per content block"
    );
}

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::new();
    let mut accumulator = MessageAccumulator::new();
    // Blocks started in the current message, to check BlockComplete indices.
    let mut started = 0usize;
    for line in data.split(|&b| b == b'\n') {
        if line.is_empty() {
            continue;
        }
        let event = match decoder.decode_data(line) {
            Ok(Some(event)) => event,
            Ok(None) => continue,
            Err(error) => {
                let _ = error.to_string();
                let _ = error.event_index();
                continue;
            }
        };
        match &event {
            StreamEvent::MessageStart { .. } => started = 0,
            StreamEvent::ContentBlockStart { .. } => started += 1,
            _ => {}
        }
        match accumulator.push(&event) {
            Ok(Some(Output::BlockComplete(block))) => {
                assert!(
                    block.index < started,
                    "BlockComplete for a block never started"
                );
            }
            Ok(Some(Output::MessageComplete(done))) => check_final(&done),
            Ok(Some(_)) | Ok(None) => {}
            Err(error) => {
                let _ = error.to_string();
                let _ = error.is_retryable();
                break;
            }
        }
    }
    let _ = (
        decoder.events(),
        decoder.unknown_events(),
        decoder.unknown_deltas(),
    );
    match accumulator.finish() {
        Ok(Some(done)) => check_final(&done),
        Ok(None) => {}
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
