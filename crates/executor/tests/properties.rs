//! Property test of the admission rule over random sequences of safe and unsafe calls with
//! random durations, on a paused clock with an instrumented tracker.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use executor::{
    AllowAll, ExecutorConfig, ExecutorEvent, Outcome, StreamingToolExecutor, Tool, ToolCall,
    ToolContext, ToolFuture, ToolOutput, Workspace,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Sleeps `ms`; safe iff `safe` is true in its input. Records (index, start, end).
struct Timed {
    schema: Value,
    spans: Arc<Mutex<Vec<(usize, Instant, Instant)>>>,
}

impl Tool for Timed {
    fn name(&self) -> &str {
        "Timed"
    }
    fn description(&self) -> &str {
        "sleeps"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn is_concurrency_safe(&self, input: &Value) -> bool {
        input["safe"] == true
    }
    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap())).await;
            let index = input["index"].as_u64().unwrap() as usize;
            self.spans
                .lock()
                .unwrap()
                .push((index, start, Instant::now()));
            Ok(ToolOutput::text(index.to_string()))
        })
    }
}

fn overlap(a: (Instant, Instant), b: (Instant, Instant)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn admission_rule_holds(
        calls in prop::collection::vec((any::<bool>(), 1u64..50), 1..12),
        added_later in 0usize..12,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let tool = Arc::new(Timed { schema: json!({"type": "object"}), spans: Arc::clone(&spans) });
        let (events, results) = runtime.block_on(async {
            let mut executor = StreamingToolExecutor::new(
                vec![tool as Arc<dyn Tool>],
                Arc::new(AllowAll),
                ExecutorConfig::default(),
                CancellationToken::new(),
                Arc::new(Workspace::default()),
            );
            let mut events = Vec::new();
            // Some calls arrive while others already run, as with a streaming response.
            let split = added_later.min(calls.len());
            for (index, (safe, ms)) in calls.iter().enumerate().take(split) {
                executor.add_tool(ToolCall::new(format!("t{index}"), "Timed", json!({"safe": safe, "ms": ms, "index": index})));
            }
            if split < calls.len() {
                tokio::time::sleep(Duration::from_millis(3)).await;
                while let Ok(Some(event)) = tokio::time::timeout(Duration::ZERO, executor.next_event()).await {
                    events.push(event);
                }
            }
            for (index, (safe, ms)) in calls.iter().enumerate().skip(split) {
                executor.add_tool(ToolCall::new(format!("t{index}"), "Timed", json!({"safe": safe, "ms": ms, "index": index})));
            }
            events.extend(executor.drain().await);
            let results: Vec<(String, Outcome)> = events
                .iter()
                .filter_map(|event| match event {
                    ExecutorEvent::Completed(done) => Some((done.result.tool_use_id.to_string(), done.outcome.clone())),
                    _ => None,
                })
                .collect();
            (events, results)
        });
        // Exactly one result per call, in add order, all successful.
        let expected: Vec<(String, Outcome)> = (0..calls.len()).map(|i| (format!("t{i}"), Outcome::Success)).collect();
        prop_assert_eq!(results, expected);
        let started = events.iter().filter(|e| matches!(e, ExecutorEvent::Started { .. })).count();
        prop_assert_eq!(started, calls.len());

        let mut spans = spans.lock().unwrap().clone();
        spans.sort_by_key(|span| span.0);
        prop_assert_eq!(spans.len(), calls.len());
        for (i, &(safe_i, _)) in calls.iter().enumerate() {
            for (j, &(safe_j, _)) in calls.iter().enumerate().skip(i + 1) {
                let (a, b) = ((spans[i].1, spans[i].2), (spans[j].1, spans[j].2));
                // An unsafe call never overlaps anything.
                if !safe_i || !safe_j {
                    prop_assert!(!overlap(a, b), "t{} and t{} overlap", i, j);
                }
                // Start order obeys the scan rule: no call starts before an earlier one.
                prop_assert!(spans[j].1 >= spans[i].1, "t{} started before t{}", j, i);
            }
        }
        // Adjacent safe calls added together run together.
        for i in 0..calls.len().saturating_sub(1) {
            let added_together = (i + 1 < added_later.min(calls.len())) || i >= added_later;
            if calls[i].0 && calls[i + 1].0 && added_together {
                prop_assert!(overlap((spans[i].1, spans[i].2), (spans[i + 1].1, spans[i + 1].2)), "t{} and t{} did not overlap", i, i + 1);
            }
        }
    }
}
