//! Inspect a captured Messages API stream.
//!
//! ```text
//! cargo run -p sse-parser --example accumulate -- FILE.sse            # the final message, one JSON line
//! cargo run -p sse-parser --example accumulate -- --events FILE.sse   # each decoded event, one JSON line each
//! ```
//!
//! `-` reads standard input. Exit status 0 on success, 1 when the stream is invalid or
//! incomplete (the error goes to stderr), 2 on a usage error. Warnings (a missing
//! `message_stop`, a block cut by max_tokens, skipped unknown events) go to stderr.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;

use bytes::Bytes;
use sse_parser::{Item, MessageStream, Warning};

const USAGE: &str = "usage: accumulate [--events] FILE.sse   (FILE may be - for stdin)";

fn main() -> ExitCode {
    let mut events = false;
    let mut path = None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--events" => events = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            flag if flag.starts_with("--") => {
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
    let mut last = None;
    while let Some(item) = stream.next_item().map_err(|error| error.to_string())? {
        match item {
            Item::Event(event) if print_events => {
                let line = serde_json::to_string(&event).map_err(|error| error.to_string())?;
                writeln!(out, "{line}").map_err(|error| error.to_string())?;
            }
            Item::MessageComplete(done) => last = Some(*done),
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
    if let Some(done) = finished.message.or(last) {
        for warning in &done.warnings {
            match warning {
                Warning::MessageStopMissing => {
                    eprintln!("accumulate: warning: the stream ended without message_stop")
                }
                Warning::BlockLeftOpen { index } => {
                    eprintln!("accumulate: warning: block {index} was cut off (marked truncated)")
                }
                other => eprintln!("accumulate: warning: {other:?}"),
            }
        }
        if !print_events {
            let line = serde_json::to_string(&done.message).map_err(|error| error.to_string())?;
            writeln!(out, "{line}").map_err(|error| error.to_string())?;
        }
    }
    Ok(())
}
