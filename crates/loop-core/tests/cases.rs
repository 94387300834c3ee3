//! The loop's promised behaviours, each with a scripted model on a paused clock.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use context::validate_pairing;
use loop_core::{
    ApiFailure, LoopConfig, LoopEvent, LoopOutcome, ModelError, StopDecision, StopFuture, StopHook,
    StopHookInput, Terminal, Transition, run_loop,
};
use protocol::{ContentBlock, MessageParam, StopReason};
use serde_json::json;
use testkit::model::*;
use tokio_util::sync::CancellationToken;

fn config() -> LoopConfig {
    LoopConfig::for_model("claude-sonnet-4-5")
}

async fn run(
    config: LoopConfig,
    deps: loop_core::Deps,
    prompt: &str,
) -> (LoopOutcome, Vec<LoopEvent>) {
    run_with_cancel(config, deps, prompt, CancellationToken::new()).await
}

async fn run_with_cancel(
    config: LoopConfig,
    deps: loop_core::Deps,
    prompt: &str,
    cancel: CancellationToken,
) -> (LoopOutcome, Vec<LoopEvent>) {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let outcome = run_loop(
        config,
        deps,
        vec![MessageParam::user_text(prompt)],
        sender,
        cancel,
    )
    .await;
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    validate_pairing(&outcome.messages)
        .unwrap_or_else(|error| panic!("{error}: {:#?}", outcome.messages));
    // One history: replaying the history events on the first message gives, byte for byte,
    // the history the loop kept.
    let mut replayed = vec![MessageParam::user_text(prompt)];
    for event in &events {
        if let LoopEvent::History(change) = event {
            change.apply(&mut replayed);
        }
    }
    assert_eq!(replayed, outcome.messages, "{events:#?}");
    (outcome, events)
}

#[tokio::test(start_paused = true)]
async fn read_edit_bash_then_text_completes_in_four_requests() {
    let log = log();
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("r1", "Read", json!({"file_path": "src/lib.rs"}))
            .end(StopReason::ToolUse),
        Reply::new()
            .tool("e1", "Edit", json!({"file_path": "src/lib.rs"}))
            .end(StopReason::ToolUse),
        Reply::new()
            .tool("b1", "Bash", json!({"command": "cargo test"}))
            .end(StopReason::ToolUse),
        Reply::new()
            .text("All tests pass.")
            .end(StopReason::EndTurn),
    ]);
    let tools = vec![
        Probe::tool("Read", true, &log),
        Probe::tool("Edit", false, &log),
        Probe::tool("Bash", false, &log),
    ];
    let (outcome, _) = run(config(), deps(Arc::clone(&model), tools), "fix the test").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    assert_eq!(outcome.result, "All tests pass.");
    assert_eq!(model.request_count(), 4);
    assert_eq!(outcome.requests, 4);
    assert_eq!(
        last_results(&model.request(1)),
        [("r1".to_owned(), "Read r1 ok".to_owned())]
    );
    assert_eq!(
        last_results(&model.request(2)),
        [("e1".to_owned(), "Edit e1 ok".to_owned())]
    );
    assert_eq!(
        last_results(&model.request(3)),
        [("b1".to_owned(), "Bash b1 ok".to_owned())]
    );
    assert!(
        outcome.usage.input_tokens > 400,
        "usage summed over the four requests"
    );
    // Requests carry the cache breakpoint on the last block of the last user message.
    let request = model.request(3);
    let last_block = request.messages.last().unwrap().content.last().unwrap();
    assert!(
        serde_json::to_value(last_block)
            .unwrap()
            .get("cache_control")
            .is_some()
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_runs_while_the_model_is_still_streaming() {
    let log = log();
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("a", "Read", json!({"file_path": "a.rs", "ms": 20}))
            .tool_slow(
                "b",
                "Read",
                json!({"file_path": "b.rs", "pattern": "x".repeat(40)}),
                10,
                50,
            )
            .end(StopReason::ToolUse),
        Reply::new().text("done").end(StopReason::EndTurn),
    ]);
    let (outcome, _) = run(
        config(),
        deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]),
        "go",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let stream_done = model.stream_done.lock().unwrap()[0];
    let log = log.lock().unwrap();
    let a = log.iter().find(|entry| entry.0 == "a").unwrap();
    assert!(a.1 < stream_done, "A started before message_stop");
    assert!(
        a.2.unwrap() < stream_done,
        "A (20 ms) finished while B's input was still streaming"
    );
    assert_eq!(stream_done - a.1, Duration::from_millis(500));
}

/// A server's content filter ends the response after two whole calls (Chat Completions'
/// `finish_reason: "content_filter"`, mapped to refusal): neither runs, each is answered as
/// not run, and the turn ends there. A complete finish runs both, started only at the
/// stop_reason.
#[tokio::test(start_paused = true)]
async fn calls_completed_before_a_content_filter_finish_are_not_run() {
    let calls = || {
        Reply::new()
            .tool("a", "Bash", json!({"command": "touch a"}))
            .tool_slow("b", "Read", json!({"file_path": "b.rs"}), 3, 10)
    };
    for reason in [StopReason::Refusal, StopReason::Other("incomplete".into())] {
        let log = log();
        let model = ScriptedModel::calls_final_at_stop(vec![calls().end(reason.clone())]);
        let tools = vec![
            Probe::tool("Bash", false, &log),
            Probe::tool("Read", true, &log),
        ];
        let (outcome, _) = run(config(), deps(Arc::clone(&model), tools), "go").await;
        assert_eq!(outcome.terminal, Terminal::Completed, "{reason:?}");
        assert!(log.lock().unwrap().is_empty(), "{reason:?}: nothing ran");
        assert_eq!(model.request_count(), 1, "the turn ended with the refusal");
        validate_pairing(&outcome.messages).unwrap();
        let results = results_of(outcome.messages.last().unwrap());
        let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        for (_, text) in &results {
            assert!(
                text.contains(&format!("stop_reason {}", reason.as_str()))
                    && text.contains("not run"),
                "{text}"
            );
        }
    }
    let log = log();
    let model = ScriptedModel::calls_final_at_stop(vec![
        calls().end(StopReason::ToolUse),
        Reply::new().text("done").end(StopReason::EndTurn),
    ]);
    let tools = vec![
        Probe::tool("Bash", false, &log),
        Probe::tool("Read", true, &log),
    ];
    let (outcome, _) = run(config(), deps(Arc::clone(&model), tools), "go").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let stream_done = model.stream_done.lock().unwrap()[0];
    let log = log.lock().unwrap();
    let started: Vec<(&str, bool)> = (log.iter())
        .map(|(id, at, _)| (id.as_str(), *at == stream_done))
        .collect();
    assert_eq!(
        started,
        [("a", true), ("b", true)],
        "both waited for the stop_reason"
    );
}

/// With the Messages API a call starts the moment it completes, so a refusal can only void
/// the call still held (the response's last block): it is answered as not run.
#[tokio::test(start_paused = true)]
async fn a_refusal_voids_the_call_not_yet_started() {
    let log = log();
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("a", "Read", json!({"file_path": "a.rs"}))
            .tool("b", "Bash", json!({"command": "touch b"}))
            .end(StopReason::Refusal),
    ]);
    let tools = vec![
        Probe::tool("Bash", false, &log),
        Probe::tool("Read", true, &log),
    ];
    let (outcome, _) = run(config(), deps(Arc::clone(&model), tools), "go").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let ran: Vec<String> = log.lock().unwrap().iter().map(|e| e.0.clone()).collect();
    assert_eq!(ran, ["a"], "the held Bash never ran");
    let results = results_of(outcome.messages.last().unwrap());
    assert_eq!(results[1].0, "b");
    assert!(
        results[1].1.contains("stop_reason refusal"),
        "{}",
        results[1].1
    );
}

/// Two calls under one id (a server re-sending a whole call): the first runs, the repeat
/// does not, and the next request carries the id's one result and a note telling the model.
#[tokio::test(start_paused = true)]
async fn a_repeated_call_id_runs_once_and_the_model_is_told() {
    let log = log();
    let model = ScriptedModel::calls_final_at_stop(vec![
        Reply::new()
            .tool("call_1", "Bash", json!({"command": "echo x >> log"}))
            .tool("call_1", "Bash", json!({"command": "echo x >> log"}))
            .end(StopReason::ToolUse),
        Reply::new().text("done").end(StopReason::EndTurn),
    ]);
    let tools = vec![Probe::tool("Bash", false, &log)];
    let (outcome, _) = run(config(), deps(Arc::clone(&model), tools), "go").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    assert_eq!(log.lock().unwrap().len(), 1, "the repeat did not run");
    let sent = model.request(1);
    let answer = sent.messages.last().unwrap();
    let results = results_of(answer);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, "call_1");
    let told: Vec<&str> = (answer.content.iter())
        .filter_map(ContentBlock::as_text)
        .collect();
    assert!(
        told.iter().any(|text| text.contains("repeats the tool_use id call_1")
            && text.contains("not run")),
        "{told:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_write_cut_by_max_tokens_never_runs_and_recovery_is_bounded() {
    let log = log();
    let model = ScriptedModel::new(|_, _| {
        Reply::new()
            .text("Writing the file now.")
            .cut_tool(
                "w",
                "Write",
                "{\"file_path\": \"big.txt\", \"content\": \"lorem",
            )
            .end(StopReason::MaxTokens)
    });
    let (outcome, events) = run(
        config(),
        deps(Arc::clone(&model), vec![Probe::tool("Write", false, &log)]),
        "write",
    )
    .await;
    assert_eq!(
        outcome.terminal,
        Terminal::ModelError(ModelError::MaxTokensExhausted(4))
    );
    assert_eq!(model.request_count(), 1 + 1 + 3);
    assert!(log.lock().unwrap().is_empty(), "the cut Write never ran");
    let transitions: Vec<Transition> = events
        .iter()
        .filter_map(|event| match event {
            LoopEvent::Transition(transition) => Some(*transition),
            _ => None,
        })
        .collect();
    assert_eq!(
        transitions,
        [
            Transition::MaxTokensEscalation,
            Transition::MaxTokensRecovery,
            Transition::MaxTokensRecovery,
            Transition::MaxTokensRecovery
        ]
    );
    // The escalated request raised the cap; recovery requests carry the error and the resume text.
    assert_eq!(model.request(0).max_tokens, 32_000);
    assert_eq!(model.request(1).max_tokens, 64_000);
    let results = last_results(&model.request(2));
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.contains("cut off by the output token limit"),
        "{}",
        results[0].1
    );
    let last = model
        .request(2)
        .messages
        .last()
        .unwrap()
        .content
        .last()
        .unwrap()
        .as_text()
        .unwrap()
        .to_owned();
    assert_eq!(last, loop_core::RESUME_PROMPT);
}

struct AlwaysBlock {
    seen: Mutex<Vec<bool>>,
}

impl StopHook for AlwaysBlock {
    fn on_stop(&self, input: StopHookInput) -> StopFuture<'_> {
        self.seen.lock().unwrap().push(input.stop_hook_active);
        Box::pin(std::future::ready(StopDecision::Block {
            reasons: vec!["Run the linter first.".into()],
        }))
    }
}

#[tokio::test(start_paused = true)]
async fn stop_hook_blocks_are_capped_at_eight() {
    let log = log();
    let model = ScriptedModel::new(|n, _| {
        if n % 2 == 0 {
            Reply::new()
                .tool(
                    &format!("t{n}"),
                    "Bash",
                    json!({"command": format!("lint {n}")}),
                )
                .end(StopReason::ToolUse)
        } else {
            Reply::new().text("Done.").end(StopReason::EndTurn)
        }
    });
    let hook = Arc::new(AlwaysBlock {
        seen: Mutex::new(Vec::new()),
    });
    let deps = deps_with(
        Arc::clone(&model),
        vec![Probe::tool("Bash", false, &log)],
        Arc::clone(&hook) as Arc<dyn StopHook>,
        Arc::new(NoSummary),
    );
    let (outcome, _) = run(config(), deps, "finish").await;
    assert_eq!(outcome.terminal, Terminal::StopHookCapReached);
    let seen = hook.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 9);
    assert!(!seen[0] && seen[1..].iter().all(|active| *active));
    assert_eq!(model.request_count(), 18);
}

#[tokio::test(start_paused = true)]
async fn the_fifth_identical_call_ends_the_run() {
    let log = log();
    let model = ScriptedModel::new(|n, _| {
        // Same call every turn; the key order changes, the call does not.
        let input = if n % 2 == 0 {
            json!({"file_path": "/w/a.txt", "limit": 5})
        } else {
            json!({"limit": 5, "file_path": "/w/a.txt"})
        };
        Reply::new()
            .tool(&format!("r{n}"), "Read", input)
            .end(StopReason::ToolUse)
    });
    let mut config = config();
    config.max_turns = Some(50);
    let (outcome, _) = run(
        config,
        deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]),
        "read",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::RepeatedToolCall);
    assert_eq!(model.request_count(), 5);
    assert_eq!(log.lock().unwrap().len(), 4, "the 5th call was not run");
    // One corrective note, with the 3rd call's results.
    let notes: Vec<usize> = (0..5)
        .filter(|&n| {
            model
                .request(n)
                .messages
                .last()
                .unwrap()
                .content
                .iter()
                .any(|block| {
                    block.as_text().is_some_and(|text| {
                        text.starts_with("Note: you have made this exact Read call")
                    })
                })
        })
        .collect();
    assert_eq!(notes, [3]);
}

#[tokio::test(start_paused = true)]
async fn a_different_call_resets_the_repeat_count() {
    let log = log();
    let model = ScriptedModel::new(|n, _| match n {
        0..=3 => Reply::new()
            .tool(&format!("r{n}"), "Read", json!({"file_path": "/w/a.txt"}))
            .end(StopReason::ToolUse),
        4 => Reply::new()
            .tool("other", "Read", json!({"file_path": "/w/b.txt"}))
            .end(StopReason::ToolUse),
        5..=8 => Reply::new()
            .tool(&format!("r{n}"), "Read", json!({"file_path": "/w/a.txt"}))
            .end(StopReason::ToolUse),
        _ => Reply::new().text("ok").end(StopReason::EndTurn),
    });
    let (outcome, _) = run(
        config(),
        deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]),
        "read",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    assert_eq!(model.request_count(), 10);
}

#[tokio::test(start_paused = true)]
async fn prompt_too_long_compacts_once_then_gives_up() {
    let log = log();
    // Once: compact, then succeed.
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("r0", "Read", json!({"file_path": "a"}))
            .end(StopReason::ToolUse),
        Reply::error(ModelError::PromptTooLong(ApiFailure::new(
            "210000 tokens > 200000 maximum",
        ))),
        Reply::new().text("done").end(StopReason::EndTurn),
    ]);
    let summarizer = Arc::new(CountingSummarizer::default());
    let once = deps_with(
        Arc::clone(&model),
        vec![Probe::tool("Read", true, &log)],
        Arc::new(loop_core::NoStopHook),
        Arc::clone(&summarizer) as Arc<dyn context::Summarizer>,
    );
    let mut config = config();
    config.context.compact.tail_max_messages = 1;
    let (outcome, events) = run(config.clone(), once, "go").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    assert_eq!(summarizer.0.load(Ordering::SeqCst), 1);
    assert!(
        events
            .iter()
            .any(|event| matches!(event, LoopEvent::Transition(Transition::ReactiveCompact)))
    );
    assert!(
        model.request(2).messages[0].content[0]
            .as_text()
            .unwrap()
            .starts_with("<compact-boundary>")
    );

    // Twice: PromptTooLong.
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("r0", "Read", json!({"file_path": "a"}))
            .end(StopReason::ToolUse),
        Reply::error(ModelError::PromptTooLong(ApiFailure::new("too long"))),
        Reply::error(ModelError::PromptTooLong(ApiFailure::new("still too long"))),
    ]);
    let (outcome, _) = run(
        config,
        deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]),
        "go",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::PromptTooLong);
    assert_eq!(model.request_count(), 3);
}

/// A token the user "presses Ctrl-C" on after `delay`.
fn cancelled_after(delay: Duration) -> CancellationToken {
    let cancel = CancellationToken::new();
    let abort = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        abort.cancel();
    });
    cancel
}

#[tokio::test(start_paused = true)]
async fn an_abort_after_a_complete_response_still_counts_its_usage() {
    let log = log();
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .text("Reading.")
            .tool("t1", "Read", json!({"ms": 10_000}))
            .end(StopReason::ToolUse),
    ]);
    let cancel = cancelled_after(Duration::from_millis(100));
    let (outcome, _) = run_with_cancel(
        config(),
        deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]),
        "go",
        cancel,
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::AbortedTools);
    assert_eq!(outcome.requests, 1);
    // The response completed before the abort: the API billed it, so it is counted.
    assert!(outcome.usage.input_tokens > 0, "{:?}", outcome.usage);
    assert!(outcome.usage.output_tokens > 0, "{:?}", outcome.usage);
    assert_eq!(outcome.result, "Reading.");
}

#[tokio::test(start_paused = true)]
async fn abort_while_tools_run_leaves_a_valid_history_and_sends_nothing_more() {
    let log = log();
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("t1", "Read", json!({"ms": 10_000}))
            .tool("t2", "Read", json!({"ms": 10_000}))
            .tool("t3", "Read", json!({"ms": 10_000}))
            .text_slow("Now one more.", 200)
            .tool("late", "Read", json!({"ms": 1}))
            .end(StopReason::ToolUse),
    ]);
    let cancel = cancelled_after(Duration::from_millis(100));
    let (outcome, _) = run_with_cancel(
        config(),
        deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]),
        "go",
        cancel,
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::AbortedTools);
    assert_eq!(model.request_count(), 1, "no request after the abort");
    // The response was cut short, but its input was billed: message_start's usage counts.
    assert!(outcome.usage.input_tokens > 0, "{:?}", outcome.usage);
    let ran: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|entry| entry.0.clone())
        .collect();
    assert_eq!(ran, ["t1", "t2", "t3"], "the late tool_use never ran");
    let results: Vec<String> = outcome
        .messages
        .last()
        .unwrap()
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult(result) => {
                Some(format!("{}:{:?}", result.tool_use_id, result.is_error))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results, ["t1:Some(true)", "t2:Some(true)", "t3:Some(true)"]);
    // Claude Code's marker closes the results' message: the model knows it was stopped.
    let last = outcome.messages.last().unwrap().content.last().unwrap();
    assert_eq!(
        last.as_text(),
        Some(loop_core::INTERRUPTED_FOR_TOOL_USE_MARKER)
    );
}

#[tokio::test(start_paused = true)]
async fn max_turns_two_ends_after_two_requests() {
    let log = log();
    let model = ScriptedModel::new(|n, _| {
        Reply::new()
            .tool(
                &format!("t{n}"),
                "Bash",
                json!({"command": format!("step {n}")}),
            )
            .end(StopReason::ToolUse)
    });
    let mut config = config();
    config.max_turns = Some(2);
    let (outcome, _) = run(
        config,
        deps(Arc::clone(&model), vec![Probe::tool("Bash", false, &log)]),
        "go",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::MaxTurns);
    assert_eq!(model.request_count(), 2);
    assert_eq!(outcome.turns, 2);
}

#[tokio::test(start_paused = true)]
async fn autocompact_happens_between_tool_turns() {
    let log = log();
    // Each turn reads a ~30K-token file; the window is 200K: the threshold (167K) is crossed
    // mid-task, long before the model stops.
    let model = ScriptedModel::new(|n, _| {
        if n < 8 {
            Reply::new()
                .tool(
                    &format!("r{n}"),
                    "Big",
                    json!({"file_path": format!("f{n}")}),
                )
                .end(StopReason::ToolUse)
        } else {
            Reply::new().text("finished").end(StopReason::EndTurn)
        }
    });
    struct Big(serde_json::Value);
    impl executor::Tool for Big {
        fn name(&self) -> &str {
            "Big"
        }
        fn description(&self) -> &str {
            "returns a lot"
        }
        fn input_schema(&self) -> &serde_json::Value {
            &self.0
        }
        fn call(
            &self,
            _input: serde_json::Value,
            _context: executor::ToolContext,
        ) -> executor::ToolFuture<'_> {
            Box::pin(async { Ok(executor::ToolOutput::text("y".repeat(120_000))) })
        }
    }
    let summarizer = Arc::new(CountingSummarizer::default());
    let big = deps_with(
        Arc::clone(&model),
        vec![Arc::new(Big(json!({"type": "object"}))) as Arc<dyn executor::Tool>],
        Arc::new(loop_core::NoStopHook),
        Arc::clone(&summarizer) as Arc<dyn context::Summarizer>,
    );
    let mut config = LoopConfig::for_model("claude-sonnet-4-5");
    // Keep L1/L2 out of the way so the history really grows.
    config.context.budget.per_result_chars = 1_000_000;
    config.context.budget.per_message_chars = 1_000_000;
    config.context.microcompact.keep_recent = 100;
    config.context.compact.tail_max_messages = 2;
    let (outcome, events) = run(config, big, "go").await;
    let _ = log;
    assert_eq!(outcome.terminal, Terminal::Completed);
    assert!(summarizer.0.load(Ordering::SeqCst) >= 1);
    // The compaction came between two tool turns: a Compacted transition before a request
    // whose predecessor ended with tool_use.
    let position = events
        .iter()
        .position(|event| matches!(event, LoopEvent::Transition(Transition::Compacted)))
        .unwrap();
    let next_request = events[position..]
        .iter()
        .find_map(|event| match event {
            LoopEvent::Request { request, .. } => Some(*request),
            _ => None,
        })
        .unwrap();
    assert!(
        next_request > 1 && next_request <= 8,
        "compacted before request {next_request}"
    );
    let request = model.request(next_request as usize - 1);
    assert!(
        request.messages[0].content[0]
            .as_text()
            .unwrap()
            .starts_with("<compact-boundary>")
    );
}

/// The prompt cache's view of a long session: every request's messages (cache markers
/// aside) start with the previous request's, except where context management rewrote the
/// history, and that happens once: microcompact clears old results in one batch when the
/// history reaches 80 % of the autocompact threshold, then the prefix is stable again.
#[tokio::test(start_paused = true)]
async fn a_long_session_keeps_its_cache_prefix_but_where_a_batch_pays() {
    struct Read(serde_json::Value);
    impl executor::Tool for Read {
        fn name(&self) -> &str {
            "Read"
        }
        fn description(&self) -> &str {
            "reads"
        }
        fn input_schema(&self) -> &serde_json::Value {
            &self.0
        }
        fn call(
            &self,
            _input: serde_json::Value,
            context: executor::ToolContext,
        ) -> executor::ToolFuture<'_> {
            Box::pin(async move {
                // Every seventh file is too large for L1's 50,000-character budget: it moves
                // to the store before it is ever sent, so it breaks nothing either.
                let lines = if context.tool_use_id.as_str().ends_with('6') {
                    4_000
                } else {
                    130
                };
                Ok(executor::ToolOutput::text(format!(
                    "{} {}",
                    context.tool_use_id,
                    "line of a file\n".repeat(lines)
                )))
            })
        }
    }
    let model = ScriptedModel::new(|n, _| {
        if n < 30 {
            Reply::new()
                .tool(
                    &format!("r{n}"),
                    "Read",
                    json!({"file_path": format!("f{n}")}),
                )
                .end(StopReason::ToolUse)
        } else {
            Reply::new().text("finished").end(StopReason::EndTurn)
        }
    });
    let deps = deps(
        Arc::clone(&model),
        vec![Arc::new(Read(json!({"type": "object"}))) as Arc<dyn executor::Tool>],
    );
    let mut config = config();
    // About 550 tokens a turn, 30 turns, autocompact at 14,000: batches clear when their
    // saved reads pay for their rewrite (no floor: the context crate's tests have it), and
    // autocompact never comes.
    config.context.microcompact.floor_percent = 0;
    config.context.levels = context::WaterLevels::custom(
        context::Tokens(200_000),
        context::Tokens(20_000),
        context::Tokens(14_000),
        context::Tokens(179_000),
    );
    let (outcome, events) = run(config, deps, "read them all").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let batches: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            LoopEvent::Context(context::ContextEvent::Microcompacted {
                cleared, reason, ..
            }) => Some((*cleared, *reason)),
            _ => None,
        })
        .collect();
    assert!(!batches.is_empty(), "{batches:?}");
    assert!(
        batches
            .iter()
            .all(|(_, reason)| *reason == context::MicrocompactReason::Pays),
        "{batches:?}"
    );
    let persisted = events
        .iter()
        .filter(|event| {
            matches!(
                event,
                LoopEvent::Context(context::ContextEvent::Persisted { .. })
            )
        })
        .count();
    assert_eq!(persisted, 3, "r6, r16 and r26 moved to the store");
    assert!(batches[0].0 >= 5, "{batches:?}");

    // Cache breaks: a request whose messages do not start with the previous request's.
    let strip = |request: &protocol::CreateMessageRequest| -> Vec<serde_json::Value> {
        request
            .messages
            .iter()
            .map(|message| {
                let text = serde_json::to_string(message)
                    .unwrap()
                    .replace(r#","cache_control":{"type":"ephemeral"}"#, "");
                serde_json::from_str(&text).unwrap()
            })
            .collect()
    };
    // Where a request's message breakpoints are, as (message, block).
    let marked = |request: &protocol::CreateMessageRequest| -> Vec<(usize, usize)> {
        let mut marked = Vec::new();
        for (m, message) in request.messages.iter().enumerate() {
            for (b, block) in message.content.iter().enumerate() {
                if serde_json::to_string(block)
                    .unwrap()
                    .contains("cache_control")
                {
                    marked.push((m, b));
                }
            }
        }
        marked
    };
    let mut breaks = Vec::new();
    for n in 1..model.request_count() {
        let (previous, current) = (strip(&model.request(n - 1)), strip(&model.request(n)));
        assert!(marked(&model.request(n)).len() <= 3, "request {n}");
        if current.len() < previous.len() || current[..previous.len()] != previous[..] {
            breaks.push(n);
            // The batch changed nothing up to a breakpoint the previous request also had:
            // that prefix is still a cache read.
            let first_changed = current
                .iter()
                .zip(&previous)
                .position(|(a, b)| a != b)
                .unwrap();
            let shared: Vec<_> = marked(&model.request(n))
                .into_iter()
                .filter(|at| marked(&model.request(n - 1)).contains(at))
                .collect();
            assert!(
                shared.iter().any(|&(m, _)| m < first_changed),
                "request {n}: no breakpoint before message {first_changed}: {shared:?}"
            );
        }
    }
    assert_eq!(
        breaks.len(),
        batches.len(),
        "every cache break is a batch's: breaks at requests {breaks:?}"
    );
    // System and tools never change.
    for n in 1..model.request_count() {
        assert_eq!(model.request(n).system, model.request(0).system);
        assert_eq!(model.request(n).tools, model.request(0).tools);
    }
}

/// A tool that joins during a run (an MCP server that connected late) is offered from the
/// next request on, and runs.
#[tokio::test(start_paused = true)]
async fn tools_from_the_tool_source_join_at_the_next_request() {
    struct Late {
        ready: std::sync::atomic::AtomicBool,
        tool: Arc<dyn executor::Tool>,
    }
    impl loop_core::ToolSource for Late {
        fn tools(&self) -> Vec<Arc<dyn executor::Tool>> {
            if self.ready.load(Ordering::SeqCst) {
                vec![Arc::clone(&self.tool)]
            } else {
                Vec::new()
            }
        }
    }
    let log = log();
    let late = Arc::new(Late {
        ready: std::sync::atomic::AtomicBool::new(false),
        tool: Probe::tool("mcp__late__probe", true, &log),
    });
    let source = Arc::clone(&late);
    let model = ScriptedModel::new(move |n, _| {
        // The server finishes connecting while the first turn's tool runs.
        source.ready.store(true, Ordering::SeqCst);
        match n {
            0 => Reply::new()
                .tool("t0", "Read", json!({"file_path": "a"}))
                .end(StopReason::ToolUse),
            1 => Reply::new()
                .tool("t1", "mcp__late__probe", json!({}))
                .end(StopReason::ToolUse),
            _ => Reply::new().text("done").end(StopReason::EndTurn),
        }
    });
    let mut deps = deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]);
    deps.tool_source = Some(late as Arc<dyn loop_core::ToolSource>);
    let (outcome, _) = run(config(), deps, "go").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let names = |n: usize| -> Vec<String> {
        model
            .request(n)
            .tools
            .iter()
            .map(|tool| tool.name.clone())
            .collect()
    };
    assert_eq!(names(0), ["Read"]);
    assert_eq!(names(1), ["Read", "mcp__late__probe"]);
    let results = last_results(&model.request(2));
    assert_eq!(results[0].0, "t1");
    assert!(results[0].1.contains("ok"), "{results:?}");
}

/// After a fallback switch the context follows the fallback model's window: a history that
/// fits the first model's 200K-token window but not a 32K-token fallback's is compacted
/// before the first request to the fallback, and not without the fallback's levels.
#[tokio::test(start_paused = true)]
async fn the_fallback_models_window_governs_compaction_after_the_switch() {
    let history = || {
        let earlier = message(
            vec![ContentBlock::text("I looked at it.")],
            Some(StopReason::EndTurn),
        );
        vec![
            // About 16K tokens: far under 200K's threshold, over a 32K window's (11.5K) and
            // under its blocking limit (21.5K).
            MessageParam::user_text("x".repeat(64_000)),
            earlier.to_param(),
            MessageParam::user_text("go on"),
        ]
    };
    for with_levels in [true, false] {
        let model = ScriptedModel::from_list(vec![
            Reply::error(ModelError::Overloaded(ApiFailure::new("529"))),
            Reply::new().text("done").end(StopReason::EndTurn),
        ]);
        let summarizer = Arc::new(CountingSummarizer::default());
        let deps = deps_with(
            Arc::clone(&model),
            Vec::new(),
            Arc::new(loop_core::NoStopHook),
            Arc::clone(&summarizer) as Arc<dyn context::Summarizer>,
        );
        let mut config = config();
        config.fallback_model = Some("local-32k".into());
        config.context.compact.tail_max_messages = 1;
        if with_levels {
            config.fallback_levels = Some(context::WaterLevels::new(
                context::Tokens(32_768),
                context::Tokens(8_192),
            ));
        }
        let (sender, _receiver) = tokio::sync::mpsc::unbounded_channel();
        let outcome = run_loop(config, deps, history(), sender, CancellationToken::new()).await;
        assert_eq!(outcome.terminal, Terminal::Completed, "{with_levels}");
        let second = model.request(1);
        assert_eq!(second.model, "local-32k");
        let compacted = second.messages[0].content[0]
            .as_text()
            .is_some_and(|text| text.starts_with("<compact-boundary>"));
        assert_eq!(compacted, with_levels);
        assert_eq!(
            summarizer.0.load(Ordering::SeqCst),
            usize::from(with_levels)
        );
    }
}

/// Attachments go with a tool batch's results when the run goes on, after the results, and
/// nowhere else: not in a final answer's turn, not in earlier messages.
#[tokio::test(start_paused = true)]
async fn attachments_join_the_results_of_a_batch_that_goes_on() {
    struct Once(Mutex<Vec<String>>);
    impl loop_core::AttachmentSource for Once {
        fn attachments<'a>(&'a self, _: loop_core::Batch<'a>) -> loop_core::AttachmentFuture<'a> {
            let notes = std::mem::take(&mut *self.0.lock().unwrap());
            Box::pin(async move { notes })
        }
    }
    let log = log();
    let model = ScriptedModel::from_list(vec![
        Reply::new()
            .tool("r1", "Read", json!({}))
            .end(StopReason::ToolUse),
        Reply::new()
            .tool("r2", "Read", json!({}))
            .end(StopReason::ToolUse),
        Reply::new().text("done").end(StopReason::EndTurn),
    ]);
    let mut deps = deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]);
    deps.attachments = Some(Arc::new(Once(Mutex::new(vec![
        "<system-reminder>\nnotes.txt changed\n</system-reminder>".to_owned(),
    ]))));
    let (outcome, _) = run(config(), deps, "go").await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let second = model.request(1);
    let last = second.messages.last().unwrap();
    assert!(matches!(last.content[0], ContentBlock::ToolResult(_)));
    assert_eq!(
        last.content[1].as_text(),
        Some("<system-reminder>\nnotes.txt changed\n</system-reminder>")
    );
    // Once: the next batch's results carry nothing more.
    let third = model.request(2);
    assert_eq!(third.messages.last().unwrap().content.len(), 1);
    // The earlier messages stay as they were sent (cache breakpoints aside: they move).
    let unmarked = |messages: &[MessageParam]| {
        let mut messages = messages.to_vec();
        for block in messages.iter_mut().flat_map(|message| &mut message.content) {
            block.set_cache_control(None);
        }
        messages
    };
    let kept = second.messages.len() - 1;
    assert_eq!(
        unmarked(&third.messages[..kept]),
        unmarked(&second.messages[..kept])
    );
    assert_eq!(
        third.messages[kept].content[1].as_text(),
        last.content[1].as_text()
    );
}

/// Background summaries on a paused clock: the model named `fast` writes them; the main
/// model the rest.
fn summary_config() -> LoopConfig {
    let mut config = config();
    config.summaries = Some(loop_core::background::SummaryConfig {
        model: "fast".to_owned(),
        progress_every: Some(Duration::from_secs(30)),
        tool_use: true,
    });
    config
}

/// A model that answers `fast` requests with `fast_reply` and the others from `main`.
fn with_fast(main: Vec<Reply>, fast_reply: Reply) -> Arc<ScriptedModel> {
    let main_count = std::sync::atomic::AtomicUsize::new(0);
    ScriptedModel::new(move |_, request| {
        if request.model == "fast" {
            return fast_reply.clone();
        }
        let n = main_count.fetch_add(1, Ordering::SeqCst);
        main.get(n)
            .cloned()
            .unwrap_or_else(|| panic!("no main reply {n}"))
    })
}

/// A progress summary is asked for at 30 s while a slow tool runs; its text reaches the
/// events, never the history; no summary is asked after the run ended.
#[tokio::test(start_paused = true)]
async fn a_progress_summary_comes_every_30_s_and_ends_with_the_run() {
    let log = log();
    let model = with_fast(
        vec![
            Reply::new()
                .tool("s1", "Slow", json!({"ms": 45_000}))
                .end(StopReason::ToolUse),
            Reply::new().text("finished").end(StopReason::EndTurn),
        ],
        Reply::new()
            .text("Running the slow tool")
            .end(StopReason::EndTurn),
    );
    let mut config = summary_config();
    config.summaries.as_mut().unwrap().tool_use = false;
    let started = tokio::time::Instant::now();
    let (outcome, events) = run(
        config,
        deps(Arc::clone(&model), vec![Probe::tool("Slow", true, &log)]),
        "go",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let summaries: Vec<&String> = events
        .iter()
        .filter_map(|event| match event {
            LoopEvent::ProgressSummary { text, model, .. } if model == "fast" => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(summaries, ["Running the slow tool"]);
    let requests = model.requests.lock().unwrap().clone();
    let fast: Vec<_> = requests.iter().filter(|(r, _)| r.model == "fast").collect();
    assert_eq!(fast.len(), 1);
    assert_eq!(fast[0].1 - started, Duration::from_secs(30));
    assert!(format!("{:?}", fast[0].0.messages).contains("User: go"));
    assert!(!format!("{:?}", outcome.messages).contains("Running the slow tool"));
    // Cancelled with the run: time goes on, nothing more is asked.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(
        model
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(r, _)| r.model == "fast")
            .count(),
        1
    );
}

/// A tool batch's summary never delays the next request: the summary takes 10 s, the next
/// request goes at once, and the summary is reported after the first call that ends once it
/// is done.
#[tokio::test(start_paused = true)]
async fn a_tool_use_summary_never_delays_the_next_request() {
    let log = log();
    let model = with_fast(
        vec![
            Reply::new()
                .tool("r1", "Slow", json!({"ms": 0}))
                .end(StopReason::ToolUse),
            Reply::new()
                .tool("r2", "Slow", json!({"ms": 20_000}))
                .end(StopReason::ToolUse),
            Reply::new().text("finished").end(StopReason::EndTurn),
        ],
        Reply::new()
            .sleep(10_000)
            .text("Ran the probe")
            .end(StopReason::EndTurn),
    );
    let mut config = summary_config();
    config.summaries.as_mut().unwrap().progress_every = None;
    let started = tokio::time::Instant::now();
    let (outcome, events) = run(
        config,
        deps(Arc::clone(&model), vec![Probe::tool("Slow", true, &log)]),
        "go",
    )
    .await;
    assert_eq!(outcome.terminal, Terminal::Completed);
    let requests = model.requests.lock().unwrap().clone();
    let main: Vec<_> = requests.iter().filter(|(r, _)| r.model != "fast").collect();
    // The second main request went out before the 10 s summary was done.
    assert!(
        main[1].1 - started < Duration::from_secs(1),
        "{:?}",
        main[1].1 - started
    );
    let reported: Vec<(usize, &String, &Vec<protocol::ToolUseId>)> = events
        .iter()
        .enumerate()
        .filter_map(|(at, event)| match event {
            LoopEvent::ToolUseSummary {
                text, tool_use_ids, ..
            } => Some((at, text, tool_use_ids)),
            _ => None,
        })
        .collect();
    // The first batch's summary (done at 10 s, during the 20 s tool) is reported; the
    // second's was not done when the run ended and is dropped.
    assert_eq!(reported.len(), 1, "{events:#?}");
    assert_eq!(reported[0].1, "Ran the probe");
    assert_eq!(reported[0].2, &vec![protocol::ToolUseId::from("r1")]);
    let third_request = events
        .iter()
        .position(|event| matches!(event, LoopEvent::Request { request: 3, .. }))
        .unwrap();
    assert!(reported[0].0 < third_request);
    assert!(!format!("{:?}", outcome.messages).contains("Ran the probe"));
}

/// The seeds' token budget: a model that stops with budget left is nudged on; the run ends
/// when the budget is used up, or after three nudges in a row that each bring fewer than 500
/// output tokens. Each scripted response has 20 output tokens.
#[tokio::test(start_paused = true)]
async fn a_token_budget_nudges_until_used_up_or_diminishing() {
    for (budget, requests, terminal) in [
        (50, 3, Terminal::TokenBudgetReached),
        (10_000, 4, Terminal::DiminishingReturns),
    ] {
        let model = ScriptedModel::new(|n, _| {
            Reply::new()
                .text(&format!("part {n}"))
                .end(StopReason::EndTurn)
        });
        let mut config = config();
        config.token_budget = Some(budget);
        let (outcome, events) = run(config, deps(Arc::clone(&model), Vec::new()), "go").await;
        assert_eq!(outcome.terminal, terminal, "{budget}");
        assert_eq!(model.request_count(), requests, "{budget}");
        let nudges = events
            .iter()
            .filter(|event| {
                matches!(
                    event,
                    LoopEvent::Transition(Transition::TokenBudgetContinuation)
                )
            })
            .count();
        assert_eq!(nudges, requests - 1);
        let last = model.request(requests - 1);
        let nudge = last.messages.last().unwrap().content[0]
            .as_text()
            .unwrap()
            .to_owned();
        assert!(nudge.starts_with("Keep working on the task:"), "{nudge}");
        assert!(
            nudge.contains(&format!("of your {budget}-token output budget")),
            "{nudge}"
        );
    }
}

/// A spending limit is asked before every request: once reached, the run stops before the
/// next one with the limit's words.
#[tokio::test(start_paused = true)]
async fn a_spending_limit_stops_before_the_next_request() {
    struct Limit(Mutex<u64>);
    impl loop_core::SpendGuard for Limit {
        fn spend(&self, _answered: &str, _asked: &str, usage: &protocol::Usage) {
            *self.0.lock().unwrap() += usage.output_tokens;
        }
        fn exceeded(&self) -> Option<String> {
            (*self.0.lock().unwrap() >= 40).then(|| "40 tokens' worth spent".to_owned())
        }
    }
    let log = log();
    let model = ScriptedModel::new(|n, _| {
        Reply::new()
            .tool(&format!("r{n}"), "Read", json!({}))
            .end(StopReason::ToolUse)
    });
    let mut deps = deps(Arc::clone(&model), vec![Probe::tool("Read", true, &log)]);
    deps.spend = Some(Arc::new(Limit(Mutex::new(0))));
    let (outcome, _) = run(config(), deps, "go").await;
    assert_eq!(
        outcome.terminal,
        Terminal::MaxBudget("40 tokens' worth spent".to_owned())
    );
    assert_eq!(model.request_count(), 2);
}
