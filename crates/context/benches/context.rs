//! Context pipeline costs on a long session: 2,000 messages, about 200,000 tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use context::{
    BytesEstimator, CompactConfig, MicrocompactConfig, TokenEstimator, Tokens, WaterLevels,
    history_tokens, microcompact, plan_boundary,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use protocol::{ContentBlock, MessageParam, Role, ToolResultBlock, ToolUseBlock, Usage};
use serde_json::json;

/// 1,000 turns of (assistant tool_use, user tool_result): 2,000 messages, ~200K tokens.
fn session() -> Vec<MessageParam> {
    let mut messages = vec![MessageParam::user_text(
        "Port the parser to Rust and make the tests pass.",
    )];
    for turn in 0..999 {
        let id = format!("toolu_{turn:05}");
        let tool = ["Read", "Bash", "Grep", "Edit"][turn % 4];
        messages.push(MessageParam {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("Let me look at the next part."),
                ContentBlock::ToolUse(ToolUseBlock {
                    id: id.as_str().into(),
                    name: tool.into(),
                    input: json!({"file_path": format!("src/module_{turn}.rs")}),
                    cache_control: None,
                    extra: Default::default(),
                }),
            ],
        });
        messages.push(MessageParam {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock::text(
                id.as_str().into(),
                format!("{turn}\tfn item() {{ /* ... */ }}\n").repeat(28),
                false,
            ))],
        });
    }
    messages.push(MessageParam::user_text("continue"));
    messages
}

fn bench(c: &mut Criterion) {
    let messages = session();
    let estimator = BytesEstimator::default();
    let tokens = estimator.messages(&messages);
    assert!(
        messages.len() >= 2_000 && tokens > Tokens(180_000),
        "{} messages, {tokens}",
        messages.len()
    );
    let levels = WaterLevels::new(Tokens(200_000), Tokens(64_000));
    let usage: Usage =
        serde_json::from_str(r#"{"input_tokens":150000,"output_tokens":200}"#).unwrap();
    let micro = MicrocompactConfig::default();

    let mut group = c.benchmark_group("context");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(3));
    group.bench_function("count_level_microcompact_2000_messages", |b| {
        b.iter_batched_ref(
            || messages.clone(),
            |messages| {
                let tokens = history_tokens(messages, Some((&usage, 1_900)), &estimator);
                let check = levels.check(tokens);
                let report = microcompact(messages, &micro);
                (check, report)
            },
            BatchSize::LargeInput,
        );
    });
    group.bench_function("count_all_2000_messages", |b| {
        b.iter(|| estimator.messages(&messages));
    });
    let compact = CompactConfig::default();
    group.bench_function("plan_boundary_2000_messages", |b| {
        b.iter(|| plan_boundary(&messages, &compact, &estimator));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
