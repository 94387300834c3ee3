//! Loop overhead per turn: an instant scripted model, no-op tools, a 100-turn session; and
//! the request body the loop writes for every call, from a history of about 150,000 tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loop_core::{LoopConfig, Terminal, run_loop};
use protocol::{MessageParam, StopReason};
use serde_json::json;
use testkit::model::{Client, Probe, Reply, ScriptedModel, deps};
use tokio_util::sync::CancellationToken;

const TURNS: usize = 100;

/// A model that calls the no-op tool for 99 turns, then answers.
fn hundred_turns() -> Arc<ScriptedModel> {
    ScriptedModel::fast(|n, _| {
        if n < TURNS - 1 {
            Reply::new()
                .text("Next step.")
                .tool(&format!("t{n}"), "Noop", json!({"step": n}))
                .end(StopReason::ToolUse)
        } else {
            Reply::new().text("Done.").end(StopReason::EndTurn)
        }
    })
}

async fn session() {
    let model = hundred_turns();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
    let outcome = run_loop(
        LoopConfig::for_model("claude-sonnet-4-5"),
        deps(model, vec![Probe::tool("Noop", true, &log)]),
        vec![MessageParam::user_text("go")],
        sender,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    assert_eq!(outcome.requests as usize, TURNS);
}

/// The scripted model alone: the same 100 replies streamed and drained with no loop, to
/// subtract the model's own cost from the session time.
async fn model_only() {
    use futures_util::StreamExt as _;
    use loop_core::{ModelClient as _, ModelRequest};
    let model = hundred_turns();
    let client = Client(model);
    let messages = vec![MessageParam::user_text("go")];
    for _ in 0..TURNS {
        let request = ModelRequest {
            model: "claude-sonnet-4-5",
            max_tokens: 1000,
            system: &[],
            tools: &[],
            messages: &messages,
            user_context: None,
            thinking: None,
            effort: None,
            breakpoints: None,
        };
        let mut stream = client.stream(&request, CancellationToken::new());
        while stream.next().await.is_some() {}
    }
}

/// A history of about 150,000 tokens (bytes / 4, as the context crate estimates JSON): 150
/// rounds of an assistant message (400 bytes of text and a Read call) and the user message
/// with its result (3,500 bytes of file text), after one user prompt.
fn history_150k() -> Vec<MessageParam> {
    let mut history = vec![MessageParam::user_text("Read every module and explain it.")];
    for n in 0..150 {
        let text: String = (0..8)
            .map(|line| format!("Looking at module {n}, part {line}: the next step reads it. "))
            .collect();
        let file: String = (0..52)
            .map(|line| {
                format!("{line:>6}\tlet value_{line} = compute(input_{n}, {line}); // module {n}\n")
            })
            .collect();
        let messages: Vec<MessageParam> = serde_json::from_value(json!([
            {"role": "assistant", "content": [
                {"type": "text", "text": text},
                {"type": "tool_use", "id": format!("toolu_{n:04}"), "name": "Read",
                 "input": {"file_path": format!("/work/project/src/module_{n}.rs")}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("toolu_{n:04}"), "content": file},
            ]},
        ]))
        .unwrap();
        history.extend(messages);
    }
    history
}

fn request_bench(c: &mut Criterion) {
    let history = history_150k();
    let system = [protocol::SystemBlock::new(
        "You are a coding agent. ".repeat(200),
        Some(protocol::CacheControl::ephemeral()),
    )];
    let request = loop_core::ModelRequest {
        model: "claude-sonnet-4-5",
        max_tokens: 32_000,
        system: &system,
        tools: &[],
        messages: &history,
        user_context: Some("Today's date is 2026-12-02."),
        thinking: None,
        effort: None,
        breakpoints: None,
    };
    let bytes = serde_json::to_vec(&request).unwrap().len();
    assert!(
        (560_000..680_000).contains(&bytes),
        "the history should be about 150,000 tokens: {bytes} bytes"
    );
    let mut group = c.benchmark_group("request");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Bytes(bytes as u64));
    // What the loop does for every request: the whole body written from the borrowed
    // history (`ModelClient::stream` serializes it before returning).
    group.bench_function("serialize_150k_token_history", |b| {
        b.iter(|| serde_json::to_vec(std::hint::black_box(&request)).unwrap())
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("loop");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(TURNS as u64));
    // Both run on a runtime worker, as `spawn_loop` runs the loop in the agent: driven from
    // the benchmark's own thread instead, every tool task's wake-up would cross threads (a
    // futex wake and a context switch per call, half of the time measured).
    group.bench_function("session_100_turns", |b| {
        b.to_async(&runtime)
            .iter(|| async { tokio::spawn(session()).await.unwrap() })
    });
    group.bench_function("scripted_model_only_100_replies", |b| {
        b.to_async(&runtime)
            .iter(|| async { tokio::spawn(model_only()).await.unwrap() })
    });
    group.finish();
}

criterion_group!(benches, bench, request_bench);
criterion_main!(benches);
