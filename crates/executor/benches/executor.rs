//! Executor overhead: dispatch cost per call, and parallel wall time of concurrency-safe calls.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use executor::{
    AllowAll, ExecutorConfig, ExecutorEvent, StreamingToolExecutor, Tool, ToolCall, ToolContext,
    ToolFuture, ToolOutput, Workspace,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Returns at once, or after `ms` of real time.
struct Bench {
    schema: Value,
}

impl Tool for Bench {
    fn name(&self) -> &str {
        "Bench"
    }
    fn description(&self) -> &str {
        "no-op"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn is_concurrency_safe(&self, input: &Value) -> bool {
        input["safe"] == true
    }
    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            if let Some(ms) = input["ms"].as_u64() {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Ok(ToolOutput::text("ok"))
        })
    }
}

fn executor() -> StreamingToolExecutor {
    StreamingToolExecutor::new(
        vec![Arc::new(Bench {
            schema: json!({"type":"object","properties":{"safe":{"type":"boolean"},"ms":{"type":"integer"}}}),
        }) as Arc<dyn Tool>],
        Arc::new(AllowAll),
        ExecutorConfig::default(),
        CancellationToken::new(),
        Arc::new(Workspace::default()),
    )
}

/// Runs the batch on a runtime worker, as the agent loop does (`spawn_loop`), so the tool
/// tasks' wake-ups stay inside the runtime instead of crossing to the benchmark's thread.
async fn run(calls: &[Value]) -> usize {
    let calls = calls.to_vec();
    tokio::spawn(async move { run_here(&calls).await })
        .await
        .unwrap()
}

async fn run_here(calls: &[Value]) -> usize {
    let mut executor = executor();
    for (index, input) in calls.iter().enumerate() {
        executor.add_tool(ToolCall::new(
            format!("toolu_{index}"),
            "Bench",
            input.clone(),
        ));
    }
    let mut completed = 0;
    while let Some(event) = executor.next_event().await {
        if matches!(event, ExecutorEvent::Completed(_)) {
            completed += 1;
        }
    }
    assert_eq!(completed, calls.len());
    completed
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("dispatch");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    for (name, safe) in [("noop_safe", true), ("noop_unsafe", false)] {
        let calls: Vec<Value> = (0..1000).map(|_| json!({"safe": safe})).collect();
        group.throughput(Throughput::Elements(calls.len() as u64));
        group.bench_with_input(BenchmarkId::new(name, 1000), &calls, |b, calls| {
            b.to_async(&runtime).iter(|| run(calls));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("parallel");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3));
    let calls: Vec<Value> = (0..8).map(|_| json!({"safe": true, "ms": 10})).collect();
    group.bench_with_input(BenchmarkId::new("safe_8x10ms", 8), &calls, |b, calls| {
        b.to_async(&runtime).iter(|| run(calls));
    });
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
