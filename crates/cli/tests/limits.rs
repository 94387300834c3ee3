//! Bounded network reads, attacked by hostile servers: one that never sends headers, one
//! that pings forever, one that streams text forever, one whose non-streaming body is 2 GiB.
//! Each run ends with an error naming the limit and the variable that raises it, time limits
//! set to 2 s or less through the environment, size limits at their defaults (64 MiB), and
//! the agent's peak resident memory (its `ru_maxrss` as a waited-for child) under 256 MiB.
//!
//! `harness = false`: the cases run one after another in this process, whose only children
//! are the agents it starts, so `getrusage(RUSAGE_CHILDREN)` is theirs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use common::{Repo, repo};
use testkit::{Endless, Faults, Reply, Script, Server, Turn};

/// The peak resident memory allowed to an agent run, in KiB (`ru_maxrss`'s unit).
const PEAK_KIB: i64 = 256 * 1024;

/// Runs `agent -p hi` against `server` with short time limits; returns its output and how
/// long it took.
fn run(repo: &Repo, server: &Server, retries: u32) -> (Output, Duration) {
    let started = Instant::now();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agent"))
        .args(["-p", "hi", "--output-format", "json", "--base-url"])
        .arg(server.base_url())
        .arg("-C")
        .arg(&repo.dir)
        .env("HOME", &repo.home)
        .env("XDG_DATA_HOME", repo.home.join("data"))
        .env("XDG_CONFIG_HOME", repo.home.join("config"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("AGENT_MAX_RETRIES", retries.to_string())
        .env("AGENT_HEADERS_TIMEOUT_MS", "1000")
        .env("AGENT_STREAM_IDLE_TIMEOUT_MS", "1000")
        .env("AGENT_STREAM_PROGRESS_TIMEOUT_MS", "1500")
        .env("AGENT_NON_STREAMING_TIMEOUT_MS", "2000")
        .output()
        .unwrap();
    (output, started.elapsed())
}

/// The peak resident memory of any child waited for so far, KiB.
fn children_peak_kib() -> i64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss()
}

/// Runs one hostile server's case: `expected` must appear on stdout or stderr, the run end
/// with exit code 1 `within` the time, and the peak memory stay under [`PEAK_KIB`].
fn case(name: &str, replies: Vec<Reply>, retries: u32, expected: &[&str], within: Duration) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(Server::start(Script::new(replies)))
        .unwrap();
    let repo = repo(&format!("limits-{name}"));
    let (output, took) = run(&repo, &server, retries);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{name}: {stderr}\n{stdout}");
    for text in expected {
        assert!(
            stdout.contains(text) || stderr.contains(text),
            "{name}: {text:?} missing in\n{stderr}\n{stdout}"
        );
    }
    assert!(took < within, "{name}: took {took:?}");
    let peak = children_peak_kib();
    assert!(
        peak < PEAK_KIB,
        "{name}: peak resident memory {} MiB",
        peak / 1024
    );
    println!(
        "limits {name}: ended in {:.1} s, peak resident memory so far {} MiB",
        took.as_secs_f64(),
        peak / 1024
    );
    drop(server);
    runtime.shutdown_timeout(Duration::from_secs(1));
}

fn main() {
    case(
        "no-headers",
        vec![Reply::endless(Endless::NoHeaders)],
        0,
        &["sent no response headers within 1000 ms (AGENT_HEADERS_TIMEOUT_MS sets the limit)"],
        Duration::from_secs(10),
    );
    case(
        "pings",
        vec![Reply::endless(Endless::Pings(Duration::from_millis(50)))],
        // One retry: its reason is reported on stderr.
        1,
        &[
            "nothing but pings or empty updates for 1500 ms (AGENT_STREAM_PROGRESS_TIMEOUT_MS sets the limit)",
            "did not complete within 2000 ms (AGENT_NON_STREAMING_TIMEOUT_MS sets the limit)",
        ],
        Duration::from_secs(15),
    );
    case(
        "text",
        vec![Reply::endless(Endless::Text)],
        0,
        &["the streamed response passed 67108864 bytes (set AGENT_MAX_STREAM_BYTES to allow more)"],
        Duration::from_secs(60),
    );
    case(
        "body",
        vec![
            Reply::turn(Turn::new().text("hello")).faults(Faults {
                stall_after: Some(10),
                ..Faults::default()
            }),
            Reply::endless(Endless::JsonBody { bytes: 2 << 30 }),
        ],
        0,
        &[
            "the non-streaming response passed 67108864 bytes (set AGENT_MAX_BODY_BYTES to allow more)",
        ],
        Duration::from_secs(60),
    );
}
