//! Property tests: over random histories, L1, L2, L3 and normalization keep the pairing
//! validator passing (which includes strict alternation); L1 and L2 are idempotent.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use context::{
    BudgetConfig, BytesEstimator, CompactConfig, ContextConfig, ContextEvent, ContextManager,
    HistoryItem, MicrocompactConfig, NoFiles, ReplacementLog, Services, Tokens, WaterLevels,
    apply_budget, compact, first_rewrite, microcompact, normalize, validate_pairing,
};
use proptest::prelude::*;
use protocol::{ContentBlock, MessageParam, Role, ToolResultBlock};
use serde_json::json;

const TOOLS: &[&str] = &["Read", "Bash", "Grep", "Edit", "Deploy"];

/// One turn: the user's text length (0 = the turn continues with tool results), the
/// assistant's calls as (tool, result length), and whether it also says something.
type Turn = (usize, Vec<(usize, usize)>, bool);

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    prop::collection::vec(
        (
            0usize..300,
            prop::collection::vec((0..TOOLS.len(), 0usize..3_000), 0..4),
            any::<bool>(),
        ),
        1..12,
    )
}

/// A valid history from `turns`, ending with a user message.
fn history(turns: &[Turn]) -> Vec<MessageParam> {
    let mut messages = vec![user("the task")];
    let mut next_id = 0;
    for (text_len, tool_calls, says) in turns {
        let mut content = Vec::new();
        if *says || tool_calls.is_empty() {
            content.push(ContentBlock::text("thinking out loud"));
        }
        let mut results = Vec::new();
        for (tool, len) in tool_calls {
            let id = format!("toolu_{next_id}");
            next_id += 1;
            content.push(tool_use(
                &id,
                TOOLS[*tool],
                json!({"file_path": format!("f{next_id}.rs")}),
            ));
            results.push(ContentBlock::ToolResult(ToolResultBlock::text(
                id.as_str().into(),
                "r".repeat(*len),
                false,
            )));
        }
        messages.push(MessageParam {
            role: Role::Assistant,
            content,
        });
        if results.is_empty() || *text_len > 0 {
            results.push(ContentBlock::text("u".repeat(text_len + 1)));
        }
        messages.push(MessageParam {
            role: Role::User,
            content: results,
        });
    }
    messages
}

/// Ways to break a history.
#[derive(Clone, Debug)]
enum Damage {
    DropMessage(usize),
    Duplicate(usize),
    InsertUi(usize),
    DropBlock(usize, usize),
    Swap(usize),
}

fn damage() -> impl Strategy<Value = Vec<Damage>> {
    prop::collection::vec(
        prop_oneof![
            any::<usize>().prop_map(Damage::DropMessage),
            any::<usize>().prop_map(Damage::Duplicate),
            any::<usize>().prop_map(Damage::InsertUi),
            (any::<usize>(), any::<usize>()).prop_map(|(m, b)| Damage::DropBlock(m, b)),
            any::<usize>().prop_map(Damage::Swap),
        ],
        0..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn l1_keeps_pairing_and_is_idempotent(turns in turns(), per_result in 100usize..3_000, per_message in 500usize..6_000) {
        let mut messages = history(&turns);
        validate_pairing(&messages).unwrap();
        let config = BudgetConfig { per_result_chars: per_result, per_message_chars: per_message, preview_bytes: 200, tool_limits: Vec::new() };
        let mut store = MemoryStore::default();
        let mut log = ReplacementLog::default();
        apply_budget(&mut messages, &config, &mut store, &mut log);
        prop_assert!(validate_pairing(&messages).is_ok());
        let once = messages.clone();
        let report = apply_budget(&mut messages, &config, &mut store, &mut log);
        prop_assert!(report.persisted.is_empty());
        prop_assert_eq!(messages, once);
    }

    #[test]
    fn l2_keeps_pairing_and_is_idempotent(turns in turns(), keep in 0usize..6) {
        let mut messages = history(&turns);
        let original = messages.clone();
        let config = MicrocompactConfig { keep_recent: keep, ..MicrocompactConfig::default() };
        microcompact(&mut messages, &config);
        prop_assert!(validate_pairing(&messages).is_ok());
        // Only tool_result contents change: same roles, same block types, same ids.
        prop_assert_eq!(messages.len(), original.len());
        for (after, before) in messages.iter().zip(&original) {
            let types = |m: &MessageParam| m.content.iter().map(|b| b.block_type().to_owned()).collect::<Vec<_>>();
            prop_assert_eq!(types(after), types(before));
        }
        let once = messages.clone();
        prop_assert_eq!(microcompact(&mut messages, &config).cleared, 0);
        prop_assert_eq!(messages, once);
    }

    /// A session, request by request, under microcompact's cost model: the history is only
    /// ever extended, except by a reported batch, which changes nothing before the block
    /// [`first_rewrite`] named (the loop's anchor breakpoint, so that prefix stays a cache
    /// read) and keeps the pairing.
    #[test]
    fn l2_rewrites_only_after_its_anchor_and_only_when_it_says_so(
        turns in turns(),
        keep in 0usize..4,
        cold in prop::collection::vec(any::<bool>(), 12),
    ) {
        let mut config = ContextConfig::for_model(Tokens(200_000), Tokens(64_000));
        config.levels = WaterLevels::custom(Tokens(200_000), Tokens(20_000), Tokens(150_000), Tokens(179_000));
        config.microcompact.keep_recent = keep;
        // These histories are small: no floor, so the cost model decides every batch.
        config.microcompact.floor_percent = 0;
        let first_rewrite_config = config.microcompact.clone();
        let mut manager = ContextManager::new(config);
        let summarizer = FakeSummarizer::new("s".into(), Tokens(1_000_000));
        let mut store = MemoryStore::default();
        let mut messages: Vec<MessageParam> = Vec::new();
        for k in 1..=turns.len() {
            let full = history(&turns[..k]);
            messages.extend_from_slice(&full[messages.len()..]);
            let before = messages.clone();
            let first = first_rewrite(&before, &first_rewrite_config);
            let idle = cold[k % cold.len()].then(|| std::time::Duration::from_secs(600));
            let prepared = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(
                manager.preprocess(&mut messages, Tokens(3_000), None, idle, Services {
                    store: &mut store,
                    summarizer: &summarizer,
                    files: &NoFiles,
                    main: None,
                }),
            );
            prop_assert!(validate_pairing(&messages).is_ok());
            let cleared = prepared.events.iter().any(|event| matches!(event, ContextEvent::Microcompacted { .. }));
            if !cleared {
                prop_assert_eq!(&messages, &before, "request {}: changed without a reported batch", k);
                continue;
            }
            let (message, block) = first.expect("a batch clears something");
            prop_assert_eq!(&messages[..message], &before[..message]);
            prop_assert_eq!(&messages[message].content[..block], &before[message].content[..block]);
        }
    }

    #[test]
    fn l3_keeps_pairing(turns in turns(), tail in 1usize..8, tail_tokens in 100u64..3_000) {
        let messages = history(&turns);
        let config = CompactConfig { tail_max_messages: tail, tail_max_tokens: Tokens(tail_tokens), ..CompactConfig::default() };
        let summarizer = FakeSummarizer::new("summary".into(), Tokens(10_000_000));
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let result = runtime.block_on(compact(&messages, Tokens(200_000), &config, &BytesEstimator::default(), &summarizer, &context::NoFiles));
        match result {
            Ok(compacted) => {
                prop_assert!(validate_pairing(&compacted.messages).is_ok(), "{:?}", validate_pairing(&compacted.messages));
                prop_assert!(compacted.messages.len() <= messages.len());
                prop_assert_eq!(compacted.messages[0].role, Role::User);
            }
            Err(context::CompactError::NothingToCompact { .. }) => {}
            Err(other) => prop_assert!(false, "{other}"),
        }
    }

    #[test]
    fn normalization_repairs_any_damage(turns in turns(), damage in damage()) {
        let mut items: Vec<HistoryItem> = history(&turns).into_iter().map(HistoryItem::Message).collect();
        for hit in damage {
            let len = items.len().max(1);
            match hit {
                Damage::DropMessage(i) => { if !items.is_empty() { items.remove(i % len); } }
                Damage::Duplicate(i) => { if !items.is_empty() { let item = items[i % len].clone(); items.insert(i % len, item); } }
                Damage::InsertUi(i) => items.insert(i % (items.len() + 1), HistoryItem::UiOnly { kind: "progress".into(), text: "...".into() }),
                Damage::DropBlock(i, b) => {
                    if let Some(HistoryItem::Message(message)) = items.get_mut(i % len)
                        && !message.content.is_empty()
                    {
                        let blocks = message.content.len();
                        message.content.remove(b % blocks);
                    }
                }
                Damage::Swap(i) => { if items.len() > 1 { let i = i % (items.len() - 1); items.swap(i, i + 1); } }
            }
        }
        let (messages, _repairs) = normalize(items);
        prop_assert!(validate_pairing(&messages).is_ok(), "{:?}", validate_pairing(&messages));
        prop_assert!(messages.iter().all(|m| !m.content.is_empty()));
    }
}
