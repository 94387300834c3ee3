//! Inspect a captured Messages API stream.
//!
//! ```text
//! cargo run -p agentloop-sse-parser --example accumulate -- FILE.sse            # each final message, one JSON line each
//! cargo run -p agentloop-sse-parser --example accumulate -- --events FILE.sse   # each decoded event, one JSON line each
//! ```
//!
//! `-` reads standard input; `--` ends the options (for a file whose name starts with `-`).
//! A file may hold several messages (a whole session): each is printed. Exit status 0 on
//! success, 1 when the stream is invalid or incomplete (the error goes to stderr), 2 on a
//! usage error. Warnings (a missing `message_stop`, a block cut by max_tokens, a tool_use
//! whose input JSON did not parse and is shown as `{}`, skipped unknown events) go to stderr.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;

use bytes::Bytes;
use protocol::BlockStatus;
use sse_parser::{FinalMessage, Item, MessageStream, Warning};

const USAGE: &str = "usage: accumulate [--events] FILE.sse   (FILE may be - for stdin)";

fn main() -> ExitCode {
    let mut events = false;
    let mut path = None;
    let mut options = true;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--" if options => options = false,
            "--events" if options => events = true,
            "-h" | "--help" if options => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            flag if options && flag.starts_with("--") => {
                eprintln!("accumulate: unknown option {flag}\n{USAGE}");
                return ExitCode::from(2);
            }
            _ if path.is_some() => {
                eprintln!("accumulate: more than one file given\n{USAGE}");
                return ExitCode::from(2);
            }
            file => path = Some(file.to_owned()),
        }
    }
    let Some(path) = path else {
        eprintln!("accumulate: no file given\n{USAGE}");
        return ExitCode::from(2);
    };
    match run(&path, events) {
        Ok(()) => ExitCode::SUCCESS,
        // `accumulate … | head` closing the pipe early is not an error of the stream.
        Err(message) if message.contains("Broken pipe") => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("accumulate: {path}: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(path: &str, print_events: bool) -> Result<(), String> {
    let body = if path == "-" {
        let mut body = Vec::new();
        std::io::stdin()
            .read_to_end(&mut body)
            .map_err(|error| format!("reading stdin: {error}"))?;
        body
    } else {
        std::fs::read(path).map_err(|error| error.to_string())?
    };
    let mut stream = MessageStream::new();
    stream.push(Bytes::from(body));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut number = 0usize;
    let mut message = |done: FinalMessage, out: &mut std::io::StdoutLock<'_>| {
        number += 1;
        report(number, &done);
        if print_events {
            return Ok(());
        }
        let line = serde_json::to_string(&done.message).map_err(|error| error.to_string())?;
        writeln!(out, "{line}").map_err(|error| error.to_string())
    };
    while let Some(item) = stream.next_item().map_err(|error| error.to_string())? {
        match item {
            Item::Event(event) if print_events => {
                let line = serde_json::to_string(&event).map_err(|error| error.to_string())?;
                writeln!(out, "{line}").map_err(|error| error.to_string())?;
            }
            Item::MessageComplete(done) => message(*done, &mut out)?,
            _ => {}
        }
    }
    let finished = stream.finish().map_err(|error| error.to_string())?;
    if finished.unknown_events + finished.unknown_deltas > 0 {
        eprintln!(
            "accumulate: warning: skipped {} unknown events and {} unknown deltas",
            finished.unknown_events, finished.unknown_deltas
        );
    }
    if let Some(done) = finished.message {
        message(done, &mut out)?;
    }
    Ok(())
}

/// The warnings of message `number` (1-based), and its blocks that are not whole.
fn report(number: usize, done: &FinalMessage) {
    for warning in &done.warnings {
        match warning {
            Warning::MessageStopMissing => {
                eprintln!("accumulate: warning: message {number} ended without message_stop")
            }
            Warning::BlockLeftOpen { index } => eprintln!(
                "accumulate: warning: message {number}, block {index} was cut off (marked truncated)"
            ),
            other => eprintln!("accumulate: warning: message {number}: {other:?}"),
        }
    }
    for (index, status) in done.block_status.iter().enumerate() {
        if let BlockStatus::InvalidInput(invalid) = status {
            eprintln!(
                "accumulate: warning: message {number}, block {index}: the tool_use input is not valid JSON ({}; received {:?}); it is shown as {{}}",
                invalid.error, invalid.raw
            );
        }
    }
}
