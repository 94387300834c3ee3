//! The context behaviours the crate promises, with exact results.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::*;
use context::{
    BlockReason, BytesEstimator, CompactConfig, ContextConfig, ContextEvent, ContextManager,
    FileSource, NoFiles, Services, TokenEstimator, Tokens, WaterLevels, compact, plan_boundary,
    validate_pairing,
};
use protocol::{ContentBlock, MessageParam, Role};

fn tail_of(messages: usize) -> CompactConfig {
    CompactConfig {
        tail_max_messages: messages,
        tail_max_tokens: Tokens(1_000_000),
        ..CompactConfig::default()
    }
}

/// u0 "task"; a1 [T1]; u1 [r T1]; a2 [T2, T3]; u2 [r T2, r T3]; a3 "done"; u3 "next"
fn paired_history() -> Vec<MessageParam> {
    vec![
        user("task"),
        calls(&["T1"]),
        results(&["T1"], "one"),
        calls(&["T2", "T3"]),
        results(&["T2", "T3"], "two"),
        assistant("done"),
        user("next"),
    ]
}

#[test]
fn the_boundary_never_splits_a_tool_use_from_its_result() {
    let history = paired_history();
    validate_pairing(&history).unwrap();
    // Keeping the last 3 messages would start the tail at u2 (results of a2): move back to a2.
    let boundary = plan_boundary(&history, &tail_of(3), &BytesEstimator::default());
    assert_eq!(boundary, 3);
    assert_eq!(history[boundary].role, Role::Assistant);
}

#[tokio::test]
async fn the_compacted_history_keeps_every_pair() {
    let history = paired_history();
    let summarizer = FakeSummarizer::new(
        "The user asked for a task; T1-T3 read files.".into(),
        Tokens(1_000_000),
    );
    let compacted = compact(
        &history,
        Tokens(200_000),
        &tail_of(3),
        &BytesEstimator::default(),
        &summarizer,
        &NoFiles,
    )
    .await
    .unwrap();
    validate_pairing(&compacted.messages).unwrap();
    assert_eq!(compacted.summarized, 3);
    // [boundary + summary], a2, u2, a3, u3
    assert_eq!(compacted.messages.len(), 5);
    let first = compacted.messages[0].content[0].as_text().unwrap();
    assert!(first.starts_with("<compact-boundary>\n"));
    assert!(first.ends_with("The user asked for a task; T1-T3 read files."));
    // Every tool_result's tool_use is in the message right before it.
    for (index, message) in compacted.messages.iter().enumerate() {
        for block in &message.content {
            if let ContentBlock::ToolResult(result) = block {
                let previous = &compacted.messages[index - 1];
                assert!(
                    previous
                        .content
                        .iter()
                        .any(|b| b.as_tool_use().is_some_and(|u| u.id == result.tool_use_id))
                );
            }
        }
    }
    // The summary request was a valid request ending with the instructions.
    let requests = summarizer.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let last = requests[0].messages.last().unwrap();
    assert!(
        last.content
            .last()
            .unwrap()
            .as_text()
            .unwrap()
            .contains("All user messages")
    );
}

#[tokio::test]
async fn circuit_breaker_after_three_failed_compactions() {
    // Window 10_000, threshold 8_000; system prompt and tools 7_500; each turn adds a
    // 1_000-token message; the summarizer answers 600 tokens and refuses anything over 10_000.
    let estimator = BytesEstimator::default();
    let config = ContextConfig {
        levels: WaterLevels::custom(Tokens(10_000), Tokens(100), Tokens(8_000), Tokens(9_900)),
        compact: CompactConfig {
            tail_max_messages: 1,
            tail_max_tokens: Tokens(1_100),
            summary_max_output: Tokens(1_000),
            ..CompactConfig::default()
        },
        ..ContextConfig::for_model(Tokens(10_000), Tokens(1_000))
    };
    let summarizer = FakeSummarizer::new("s".repeat(2_400), Tokens(10_000));
    let mut store = MemoryStore::default();
    let mut manager = ContextManager::new(config);
    let overhead = Tokens(7_500);
    let latest = "x".repeat(3_990);
    let mut messages = vec![
        user(&"t".repeat(1_000)),
        assistant(&"a".repeat(1_000)),
        user(&latest),
    ];
    let mut outcomes = Vec::new();
    for _turn in 0..6 {
        let prepared = manager
            .preprocess(
                &mut messages,
                overhead,
                None,
                None,
                Services {
                    store: &mut store,
                    summarizer: &summarizer,
                    files: &NoFiles,
                    main: None,
                },
            )
            .await;
        validate_pairing(&messages).unwrap();
        let failed = prepared
            .events
            .iter()
            .filter(|e| matches!(e, ContextEvent::CompactFailed { .. }))
            .count();
        outcomes.push((prepared.blocked.clone(), failed, prepared.tokens));
        if prepared.blocked.is_some() {
            break;
        }
        // The request is sent; the next turn adds the answer and another 1_000-token message.
        messages.push(assistant("ok"));
        messages.push(user(&latest));
    }
    assert_eq!(
        summarizer.calls(),
        3,
        "three compaction attempts, then no more model calls"
    );
    assert_eq!(outcomes.len(), 3);
    assert!(
        outcomes[..2]
            .iter()
            .all(|(blocked, failed, _)| blocked.is_none() && *failed == 1)
    );
    let (blocked, _, tokens) = outcomes[2].clone();
    assert_eq!(
        blocked,
        Some(BlockReason::CompactionExhausted {
            failures: 3,
            tokens,
            threshold: Tokens(8_000)
        })
    );
    assert!(tokens >= Tokens(8_000));
    assert!(manager.circuit_open());
    // Every summary request fitted the API's limit.
    for request in summarizer.requests.lock().unwrap().iter() {
        let size = estimator.text(&request.system)
            + estimator.messages(&request.messages)
            + request.max_output;
        assert!(size <= Tokens(10_000), "{size}");
    }
    // Once open, the breaker stops model calls for good.
    let again = manager
        .preprocess(
            &mut messages,
            overhead,
            None,
            None,
            Services {
                store: &mut store,
                summarizer: &summarizer,
                files: &NoFiles,
                main: None,
            },
        )
        .await;
    assert!(again.blocked.is_some(), "{:?}", again.events);
    assert_eq!(summarizer.calls(), 3);
}

#[tokio::test]
async fn a_successful_compaction_resets_the_count_and_reattaches_files() {
    struct Files(HashMap<String, String>);
    impl FileSource for Files {
        fn read(&self, path: &str) -> Option<String> {
            self.0.get(path).cloned()
        }
    }
    let mut files = HashMap::new();
    for id in ["A", "B", "C", "D", "E", "F", "G"] {
        files.insert(
            format!("src/{id}.rs"),
            format!("// {id}\n").repeat(if id == "G" { 10_000 } else { 10 }),
        );
    }
    let mut history = vec![user("task")];
    for id in ["A", "B", "C", "D", "E", "F", "G"] {
        history.push(calls(&[id]));
        history.push(results(&[id], &"r".repeat(45_000)));
    }
    history.push(assistant("all read"));
    history.push(user("now fix it"));
    let config = ContextConfig {
        compact: CompactConfig {
            tail_max_messages: 2,
            ..CompactConfig::default()
        },
        ..ContextConfig::for_model(Tokens(200_000), Tokens(64_000))
    };
    let mut manager = ContextManager::new(config);
    let summarizer = FakeSummarizer::new("summary".into(), Tokens(1_000_000));
    let mut store = MemoryStore::default();
    let prepared = manager
        .preprocess(
            &mut history,
            Tokens(120_000),
            None,
            None,
            Services {
                store: &mut store,
                summarizer: &summarizer,
                files: &Files(files),
                main: None,
            },
        )
        .await;
    assert!(prepared.blocked.is_none());
    validate_pairing(&history).unwrap();
    let attached = prepared.events.iter().find_map(|event| match event {
        ContextEvent::Compacted {
            attached,
            before,
            after,
            ..
        } => Some((attached.clone(), *before, *after)),
        _ => None,
    });
    let (attached, before, after) = attached.expect("compacted");
    assert!(
        before > Tokens(167_000) && after < Tokens(167_000),
        "{before} -> {after}"
    );
    // Most recently read first, at most 5.
    assert_eq!(
        attached,
        ["src/G.rs", "src/F.rs", "src/E.rs", "src/D.rs", "src/C.rs"]
    );
    assert_eq!(manager.consecutive_failures(), 0);
    let first = &history[0];
    assert_eq!(first.content.len(), 1 + 5);
    let estimator = BytesEstimator::default();
    for block in &first.content[1..] {
        assert!(estimator.block(block) <= Tokens(5_100));
    }
    // The big file was cut to its 5_000-token share.
    let g = first.content[1].as_text().unwrap();
    assert!(
        g.contains("Contents of src/G.rs")
            && g.contains("[... file cut to fit the re-attachment budget]")
    );
    assert!(estimator.text(g) >= Tokens(4_900));
}

/// Microcompact clears only when it pays ([`context::economics`]): never on a session's first
/// request with a warm cache; at once on a cold cache (no request for longer than its
/// lifetime); and in a running session, exactly when the batch's saved reads over the
/// expected requests exceed its rewrite, never twice in a row.
#[test]
fn microcompact_clears_when_it_pays_or_on_a_cold_cache() {
    use std::time::Duration;
    let turn = |n: usize| {
        let id = format!("T{n}");
        [calls(&[&id]), results(&[&id], &"x".repeat(4_000))]
    };
    let mut history = vec![user("task")];
    for n in 0..8 {
        history.extend(turn(n));
    }
    let mut config = ContextConfig::for_model(Tokens(200_000), Tokens(64_000));
    config.microcompact.keep_recent = 2;
    // Autocompact at 40,000 tokens, so the floor (70 %) is 28,000: reached around request 27.
    config.levels = WaterLevels::custom(
        Tokens(200_000),
        Tokens(20_000),
        Tokens(40_000),
        Tokens(179_000),
    );
    let floor =
        Tokens(config.levels.autocompact_at.0 * u64::from(config.microcompact.floor_percent) / 100);
    assert_eq!(floor, Tokens(28_000));
    let summarizer = FakeSummarizer::new("s".into(), Tokens(1_000_000));
    let mut store = MemoryStore::default();
    let mut preprocess =
        |manager: &mut ContextManager, messages: &mut Vec<MessageParam>, idle: Option<Duration>| {
            let prepared = block_on(manager.preprocess(
                messages,
                Tokens::ZERO,
                None,
                idle,
                Services {
                    store: &mut store,
                    summarizer: &summarizer,
                    files: &NoFiles,
                    main: None,
                },
            ));
            prepared
                .events
                .iter()
                .filter_map(|event| match event {
                    ContextEvent::Microcompacted {
                        tool_use_ids,
                        reason,
                        ..
                    } => Some((tool_use_ids.len(), *reason)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
    // The first request: nothing is expected to follow yet, so nothing pays (checked with the
    // floor at 0: 8 results of 1,000 tokens are below the floor of 28,000).
    let mut config_first = config.clone();
    config_first.microcompact.floor_percent = 0;
    for idle in [None, Some(Duration::from_secs(60))] {
        let mut manager = ContextManager::new(config_first.clone());
        let mut messages = history.clone();
        assert!(preprocess(&mut manager, &mut messages, idle).is_empty());
        assert_eq!(messages, history);
    }
    // Cold cache (6 minutes idle, the lifetime is 5): the 6 oldest of 8 results, at once.
    let mut manager = ContextManager::new(config.clone());
    let mut messages = history.clone();
    let cleared = preprocess(&mut manager, &mut messages, Some(Duration::from_secs(360)));
    assert_eq!(cleared, [(6, context::MicrocompactReason::ColdCache)]);

    // A running session, a 4,000-byte result a request: each request's decision is the cost
    // model's on that request's batch.
    let estimator = BytesEstimator::default();
    let mut manager = ContextManager::new(config.clone());
    let mut messages = vec![user("task")];
    let mut decisions = Vec::new();
    let mut sizes_at_clears = Vec::new();
    let mut last_rewrite = None;
    for n in 0..40 {
        messages.extend(turn(n));
        let planned = context::plan_microcompact(&messages, &config.microcompact);
        let tokens = estimator.messages(&messages);
        let since = manager.memory().requests_since_rewrite();
        let expected_to_clear = tokens >= floor
            && planned.first().is_some_and(|first| {
                let (message, block) = first.at;
                let readable = estimator.messages(&messages[..message])
                    + messages[message].content[..block]
                        .iter()
                        .map(|block| estimator.block(block))
                        .sum();
                let saved = planned
                    .iter()
                    .map(|clearable| {
                        let (m, b) = clearable.at;
                        estimator.block(&messages[m].content[b])
                            - estimator.text(&clearable.placeholder)
                    })
                    .sum();
                let at_rewrite: Tokens = last_rewrite.unwrap_or(Tokens::ZERO);
                let expected = context::economics::expected_requests(
                    since,
                    tokens.saturating_sub(at_rewrite),
                    Some(config.levels.autocompact_at.saturating_sub(tokens)),
                );
                context::economics::Batch {
                    history: tokens,
                    readable,
                    saved,
                }
                .pays(expected)
            });
        if last_rewrite.is_none() {
            last_rewrite = Some(tokens);
        }
        let cleared = preprocess(&mut manager, &mut messages, None);
        assert_eq!(
            !cleared.is_empty(),
            expected_to_clear,
            "request {n}: {cleared:?}"
        );
        if !cleared.is_empty() {
            sizes_at_clears.push(tokens);
            assert_eq!(cleared[0].1, context::MicrocompactReason::Pays);
            last_rewrite = Some(estimator.messages(&messages));
        }
        decisions.push(!cleared.is_empty());
    }
    let clears = decisions.iter().filter(|&&cleared| cleared).count();
    assert!((1..=6).contains(&clears), "{decisions:?}");
    assert!(
        sizes_at_clears.iter().all(|&tokens| tokens >= floor),
        "a batch below the floor: {sizes_at_clears:?}"
    );
    assert!(
        decisions[..20].iter().all(|&cleared| !cleared),
        "nothing while the history is far below the floor: {decisions:?}"
    );
    assert!(
        !decisions.windows(2).any(|pair| pair[0] && pair[1]),
        "a batch right after a batch: {decisions:?}"
    );
    assert!(!decisions[0], "not on the first request");
}

/// Runs a future to completion on a fresh current-thread runtime.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

/// One long task is one turn (a prompt, then tool calls): when it does not fit a summary
/// request, its oldest exchanges are dropped, its prompt kept, and every tool_use keeps its
/// result; only when the prompt and the last exchange alone do not fit is it an error.
#[test]
fn a_long_single_turn_is_summarized_without_its_oldest_exchanges() {
    let estimator = BytesEstimator::default();
    let big = "x".repeat(40_000);
    let summarized = vec![
        user("the task"),
        calls(&["T1"]),
        results(&["T1"], &big),
        calls(&["T2"]),
        results(&["T2"], &big),
        calls(&["T3"]),
        results(&["T3"], "small"),
    ];
    let config = CompactConfig {
        summary_max_output: Tokens(8_192),
        ..CompactConfig::default()
    };
    // Room for about one big result besides the summary's output.
    let window = Tokens(8_192 + 14_000);
    let (request, dropped) =
        context::summary_request(&summarized, window, &config, &estimator).unwrap();
    assert_eq!(dropped, 2, "T1's call and result");
    let texts: Vec<String> = request
        .messages
        .iter()
        .map(|m| format!("{:?}", m.role))
        .collect();
    assert_eq!(texts, ["User", "Assistant", "User", "Assistant", "User"]);
    assert!(format!("{:?}", request.messages[0]).contains("the task"));
    assert!(format!("{:?}", request.messages[1]).contains("T2"));
    validate_pairing(&request.messages).unwrap();
    assert!(estimator.messages(&request.messages) <= window - config.summary_max_output);
    // Even the last exchange alone is too big: an error naming the sizes.
    let small_window = Tokens(8_192 + 9_000);
    let error = context::summary_request(&summarized[..5], small_window, &config, &estimator)
        .map(|(_, dropped)| dropped)
        .unwrap_err();
    assert!(
        matches!(error, context::CompactError::RequestTooLarge { .. }),
        "{error}"
    );
}
