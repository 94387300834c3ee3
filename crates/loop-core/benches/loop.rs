//! Loop overhead per turn: an instant scripted model, no-op tools, a 100-turn session.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Probe, Reply, ScriptedModel, deps};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loop_core::{LoopConfig, Terminal, run_loop};
use protocol::{MessageParam, StopReason};
use serde_json::json;
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
    let client = common::Client(model);
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
        };
        let mut stream = client.stream(&request, CancellationToken::new());
        while stream.next().await.is_some() {}
    }
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

criterion_group!(benches, bench);
criterion_main!(benches);
