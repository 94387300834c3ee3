//! Bytes through the whole pipeline in fuzzer-chosen chunks, plus framing invariance.
//!
//! Input layout: `[h] [size bytes ...] [payload ...]`
//!
//! - `h & 0x0f` is the number `n` of size bytes that follow (fewer if the input is shorter).
//!   `n == 0` means one-byte chunks.
//! - `(h >> 4) & 0x03` is the drain mode: 0 = drain after every chunk, 1 = drain after every
//!   second chunk (so chunks queue up inside the framer), 2 = push every chunk then drain once,
//!   3 = pull at most one item after each chunk, then drain the rest at the end.
//! - `h & 0x80` selects a tiny event limit so that `EventTooLarge` is reachable by mutation:
//!   16 bytes, or 256 bytes when `h & 0x40` is also set. Without it the limit is 64 KiB. (ASCII
//!   text never sets `0x80`, so raw `.sse` seeds run with the 64 KiB limit.)
//! - Size bytes are cycled over the payload: `0` pushes an empty chunk followed by a one-byte
//!   chunk, `1..=0xbf` is that many bytes, `0xc0..=0xff` is `(b - 0xbf) * 256` bytes.
//!
//! A raw `.sse` file used as a seed therefore loses its first few bytes to the header (for
//! `event: ...` the header is `e`, five size bytes `vent:`, so only the first event's type
//! line is damaged, and the decoder reads the type from the JSON anyway).
//!
//! Checks:
//! 1. `MessageStream` (with the selected event limit) never panics: `next_item` is drained until
//!    `None` or an error, then `finish()` is called (also after an error).
//! 2. Framing invariance: a `Framer` fed the chunks (same drain mode) and a `Framer` fed the
//!    payload as one chunk yield the same `(event type bytes, data, id)` sequence, the same
//!    error and the same `finish()` result. The error's `event_start` offset is compared only
//!    with `SSE_FUZZ_STRICT_OFFSETS` set, because of a known chunking bug (see
//!    `strict_offsets`).
//! 3. When the limited run succeeds, `sse_parser::frame_all` (32 MiB default limit) agrees.
//! 4. Every `FinalMessage` has one block status per content block.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sse_parser::{
    FinalMessage, FrameError, Framer, FramerConfig, Item, MessageStream, UnterminatedEvent,
};

/// Small enough to keep memory bounded, larger than any event of the seed corpus (43 KiB).
const CONFIG: FramerConfig = FramerConfig {
    max_event_bytes: 1 << 16,
};
/// Tiny limits, selected by the header, so the fuzzer reaches `EventTooLarge` easily.
const TINY: FramerConfig = FramerConfig {
    max_event_bytes: 16,
};
const SMALL: FramerConfig = FramerConfig {
    max_event_bytes: 256,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    EachChunk,
    EverySecondChunk,
    AllAtEnd,
    OneItemPerChunk,
}

/// How the payload is cut and pulled.
struct Plan {
    chunks: Vec<Bytes>,
    mode: Mode,
    config: FramerConfig,
}

fn plan(data: &[u8]) -> Option<(Plan, &[u8])> {
    let (&header, rest) = data.split_first()?;
    let n = usize::from(header & 0x0f).min(rest.len());
    let (sizes, payload) = rest.split_at(n);
    let mode = match (header >> 4) & 0x03 {
        0 => Mode::EachChunk,
        1 => Mode::EverySecondChunk,
        2 => Mode::AllAtEnd,
        _ => Mode::OneItemPerChunk,
    };
    let config = match header & 0xc0 {
        0x80 => TINY,
        0xc0 => SMALL,
        _ => CONFIG,
    };
    let mut chunks = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < payload.len() {
        let size = match sizes.get(i % sizes.len().max(1)).copied() {
            None => 1,
            Some(0) => {
                chunks.push(Bytes::new());
                1
            }
            Some(b @ 1..=0xbf) => usize::from(b),
            Some(b) => usize::from(b - 0xbf) * 256,
        };
        i += 1;
        let end = (pos + size).min(payload.len());
        // A separate allocation per chunk, as network reads would give.
        chunks.push(Bytes::copy_from_slice(&payload[pos..end]));
        pos = end;
    }
    Some((
        Plan {
            chunks,
            mode,
            config,
        },
        payload,
    ))
}

/// Whether to drain after pushing chunk `i`, and how many items at most.
fn drain_after(mode: Mode, i: usize) -> Option<usize> {
    match mode {
        Mode::EachChunk => Some(usize::MAX),
        Mode::EverySecondChunk => (i % 2 == 1).then_some(usize::MAX),
        Mode::AllAtEnd => None,
        Mode::OneItemPerChunk => Some(1),
    }
}

type Framed = (Bytes, Bytes, Bytes);

#[derive(Debug, PartialEq)]
enum Outcome {
    Finished(Option<UnterminatedEvent>),
    Failed(FrameError),
}

/// Pulls up to `max` events; returns the error if the framer failed.
fn pull(framer: &mut Framer, out: &mut Vec<Framed>, max: usize) -> Option<FrameError> {
    for _ in 0..max {
        match framer.next_event() {
            Ok(Some(event)) => out.push((
                event.event_bytes().clone(),
                event.data().clone(),
                event.id().clone(),
            )),
            Ok(None) => return None,
            Err(error) => return Some(error),
        }
    }
    None
}

fn frame(chunks: &[Bytes], mode: Mode, config: FramerConfig) -> (Vec<Framed>, Outcome) {
    let mut framer = Framer::with_config(config);
    let mut events = Vec::new();
    let mut failed = None;
    for (i, chunk) in chunks.iter().enumerate() {
        framer.push(chunk.clone());
        if let Some(max) = drain_after(mode, i) {
            failed = pull(&mut framer, &mut events, max);
            if failed.is_some() {
                break;
            }
        }
    }
    if failed.is_none() {
        failed = pull(&mut framer, &mut events, usize::MAX);
    }
    let finished = framer.finish();
    let outcome = match failed {
        Some(error) => {
            // The error is documented to stick.
            assert_eq!(finished, Err(error.clone()), "finish after a framing error");
            Outcome::Failed(error)
        }
        None => match finished {
            Ok(rest) => Outcome::Finished(rest),
            Err(error) => Outcome::Failed(error),
        },
    };
    (events, outcome)
}

/// KNOWN BUG (not fixed here): when a CR ends one chunk and its LF starts the next, the framer
/// consumes that LF without moving the start offset of the next event, so
/// `EventTooLarge::event_start` of a following oversized event is one less than in a one-chunk
/// run (`"\r" | "\ndata: 0123456789abcdef\n"` with a 16-byte limit: 1 instead of 2). See
/// docs/fuzzing.md. Until it is fixed, `event_start` is compared only when the environment
/// variable `SSE_FUZZ_STRICT_OFFSETS` is set (to anything); events, error kind and limit are
/// always compared.
fn strict_offsets() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    // The chunking bug is fixed (see `event_start_does_not_depend_on_a_split_cr_lf`): offsets
    // are always compared; set SSE_FUZZ_LOOSE_OFFSETS to ignore them while bisecting.
    *STRICT.get_or_init(|| std::env::var_os("SSE_FUZZ_LOOSE_OFFSETS").is_none())
}

/// The outcome with `event_start` blanked out, for the non-strict comparison.
fn without_offset(outcome: &Outcome) -> Outcome {
    match outcome {
        Outcome::Finished(rest) => Outcome::Finished(rest.clone()),
        Outcome::Failed(FrameError::EventTooLarge { limit, .. }) => {
            Outcome::Failed(FrameError::EventTooLarge {
                limit: *limit,
                event_start: 0,
            })
        }
        Outcome::Failed(other) => Outcome::Failed(other.clone()),
    }
}

fn check_final(done: &FinalMessage) {
    assert_eq!(
        done.block_status.len(),
        done.message.content.len(),
        "one block status per content block"
    );
}

/// Pulls up to `max` items; returns `false` once the stream failed.
fn pull_items(stream: &mut MessageStream, max: usize) -> bool {
    for _ in 0..max {
        match stream.next_item() {
            Ok(Some(Item::MessageComplete(done))) => check_final(&done),
            Ok(Some(_)) => {}
            Ok(None) => return true,
            Err(error) => {
                let _ = error.to_string();
                let _ = error.is_retryable();
                return false;
            }
        }
    }
    true
}

fn pipeline(plan: &Plan) {
    let mut stream = MessageStream::with_config(plan.config);
    let mut ok = true;
    for (i, chunk) in plan.chunks.iter().enumerate() {
        stream.push(chunk.clone());
        if let Some(max) = drain_after(plan.mode, i) {
            ok = pull_items(&mut stream, max);
            if !ok {
                break;
            }
        }
    }
    if ok {
        pull_items(&mut stream, usize::MAX);
    }
    // Also after an error: finishing must not panic either.
    match stream.finish() {
        Ok(finished) => {
            if let Some(done) = &finished.message {
                check_final(done);
            }
        }
        Err(error) => {
            let _ = error.to_string();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((plan, payload)) = plan(data) else {
        return;
    };

    pipeline(&plan);

    let (chunked_events, chunked_outcome) = frame(&plan.chunks, plan.mode, plan.config);
    let whole = Bytes::copy_from_slice(payload);
    let (whole_events, whole_outcome) =
        frame(std::slice::from_ref(&whole), Mode::EachChunk, plan.config);
    assert_eq!(
        chunked_events, whole_events,
        "framed events differ between the chunked and the one-chunk run"
    );
    if strict_offsets() {
        assert_eq!(
            chunked_outcome, whole_outcome,
            "framing outcome differs between the chunked and the one-chunk run"
        );
    } else {
        assert_eq!(
            without_offset(&chunked_outcome),
            without_offset(&whole_outcome),
            "framing outcome differs between the chunked and the one-chunk run"
        );
    }

    if let Outcome::Finished(rest) = whole_outcome {
        let (events, all_rest) = sse_parser::frame_all(whole)
            .expect("frame_all failed where the limited framer did not");
        let events: Vec<Framed> = events
            .into_iter()
            .map(|e| (e.event_bytes().clone(), e.data().clone(), e.id().clone()))
            .collect();
        assert_eq!(events, whole_events, "frame_all disagrees with Framer");
        assert_eq!(all_rest, rest, "frame_all's unterminated event disagrees");
    }
});
