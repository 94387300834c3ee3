//! L2, microcompact: the contents of older tool results of compactable tools become a short
//! placeholder naming the tool and the size cleared.
//!
//! Only the content changes: the tool_result block, its id, its position and every other block
//! stay, so pairing holds. The most recent `keep_recent` compactable results stay
//! byte-identical, and so does a result no longer than its placeholder. Idempotent: a
//! placeholder is recognised and left as it is.
//!
//! **When it runs.** Clearing a result rewrites the history from that result on, which the
//! prompt cache then bills as a write (1.25x) instead of a read (0.1x). So
//! [`ContextManager`] clears a batch only when it pays by the cost model of
//! [`crate::economics`]: the reads the batch saves over the requests expected to follow exceed
//! the write it causes, once the history is past `floor_percent` (70 %) of the autocompact
//! threshold (below it the window has room and nothing is cleared); or when the cache is
//! known cold (no request for longer than
//! `cache_ttl`, 5 minutes, the API's default cache lifetime: the next request pays full price
//! anyway). [`first_rewrite`] names the block a batch would change first, so the loop can keep
//! a cache breakpoint just before it and the prefix before it stays a read.
//!
//! [`ContextManager`]: crate::ContextManager

use std::collections::HashMap;
use std::time::Duration;

use protocol::{ContentBlock, MessageParam, ToolResultContent, ToolUseId};

/// Tools whose old results can be cleared: their output can be produced again (Read, Grep,
/// Glob, Bash, web fetches) or is a confirmation (Edit, Write).
pub const COMPACTABLE_TOOLS: &[&str] = &[
    "Read",
    "Bash",
    "Grep",
    "Glob",
    "Edit",
    "Write",
    "WebFetch",
    "WebSearch",
];

/// Start of every placeholder, used to recognise one.
pub const PLACEHOLDER_PREFIX: &str = "[Old tool result cleared:";

/// Settings of microcompact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicrocompactConfig {
    /// How many of the most recent compactable results stay intact. Default 5.
    pub keep_recent: usize,
    /// Names of the compactable tools. Default [`COMPACTABLE_TOOLS`].
    pub tools: Vec<String>,
    /// How long the API keeps a prompt prefix cached: after this long without a request the
    /// cache is cold and clearing costs nothing more. Default 5 minutes (the API's default
    /// `ephemeral` lifetime; set 1 hour when requests use the 1-hour TTL).
    pub cache_ttl: Duration,
    /// Below this percentage of the autocompact threshold a warm cache's results are never
    /// cleared, whatever the cost model says: the window has room, and a cleared result the
    /// model needs again costs a re-read (a turn, and the result again as new input), which
    /// the cost model does not see; and a short session's future, which the cost model
    /// guesses from its past, is least known. A floor, not a trigger: above it the cost model
    /// decides. Default 70 (117,000 tokens of a 200,000-token window; docs/benchmarks.md
    /// measures 50 to 80).
    pub floor_percent: u8,
}

impl Default for MicrocompactConfig {
    fn default() -> Self {
        Self {
            keep_recent: 5,
            tools: COMPACTABLE_TOOLS
                .iter()
                .map(|&name| name.to_owned())
                .collect(),
            cache_ttl: Duration::from_secs(5 * 60),
            floor_percent: 70,
        }
    }
}

/// What one pass cleared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MicrocompactReport {
    /// Results cleared in this pass.
    pub cleared: usize,
    /// Bytes of content they held.
    pub bytes_cleared: usize,
    /// The tool_use ids of the results cleared, oldest first.
    pub tool_use_ids: Vec<ToolUseId>,
}

/// The placeholder for a cleared result of `tool` that held `bytes` bytes.
pub fn placeholder(tool: &str, bytes: usize) -> String {
    format!(
        "{PLACEHOLDER_PREFIX} {tool} output, {bytes} bytes. Run the tool again if you need it.]"
    )
}

/// One result a batch would clear: where it is and what replaces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clearable {
    /// `(message, block)` of the tool_result.
    pub at: (usize, usize),
    /// Its placeholder.
    pub placeholder: String,
    /// Bytes of content it holds now.
    pub bytes: usize,
}

/// The compactable results that are not cleared yet and are longer than their placeholder,
/// oldest first, with whether each is old enough to clear now: not among the `keep_recent`
/// most recent compactable results, and seen by the model (not in a final user message: a
/// batch of parallel calls can hold more results than `keep_recent`, and the model must read
/// them once).
fn clearable(messages: &[MessageParam], config: &MicrocompactConfig) -> Vec<(Clearable, bool)> {
    let mut names: HashMap<&ToolUseId, &str> = HashMap::new();
    for message in messages {
        for block in &message.content {
            if let ContentBlock::ToolUse(tool_use) = block {
                names.insert(&tool_use.id, tool_use.name.as_str());
            }
        }
    }
    // Every compactable result, oldest first, as `(at, name, result)`.
    let mut positions = Vec::new();
    for (message_index, message) in messages.iter().enumerate() {
        for (block_index, block) in message.content.iter().enumerate() {
            let ContentBlock::ToolResult(result) = block else {
                continue;
            };
            let Some(name) = names.get(&result.tool_use_id) else {
                continue;
            };
            if config.tools.iter().any(|tool| tool == name) {
                positions.push(((message_index, block_index), *name, result));
            }
        }
    }
    let old = positions.len().saturating_sub(config.keep_recent);
    let unseen = match messages.last() {
        Some(last) if last.role == protocol::Role::User => messages.len() - 1,
        _ => messages.len(),
    };
    positions
        .into_iter()
        .enumerate()
        .filter_map(|(index, (at, name, result))| {
            if matches!(&result.content, ToolResultContent::Text(text) if text.starts_with(PLACEHOLDER_PREFIX))
            {
                return None;
            }
            let bytes = result.content.len_bytes();
            let placeholder = placeholder(name, bytes);
            // Never longer than what it replaces: a short result stays as it is.
            (placeholder.len() < bytes).then_some((
                Clearable {
                    at,
                    placeholder,
                    bytes,
                },
                index < old && at.0 < unseen,
            ))
        })
        .collect()
}

/// The results a batch would clear now, oldest first: the compactable results older than the
/// `keep_recent` most recent, seen by the model (not in a final user message), not cleared
/// yet, longer than their placeholder.
pub fn plan(messages: &[MessageParam], config: &MicrocompactConfig) -> Vec<Clearable> {
    clearable(messages, config)
        .into_iter()
        .filter_map(|(clearable, old)| old.then_some(clearable))
        .collect()
}

/// The block the next batch will change first, `(message, block)`: the oldest compactable
/// result not cleared yet (recent ones included: they are the next batch's once they age).
/// Everything before it stays byte-identical through any number of batches, so a cache
/// breakpoint just before it keeps that prefix a cache read across a clear. `None`: nothing
/// left to clear.
pub fn first_rewrite(
    messages: &[MessageParam],
    config: &MicrocompactConfig,
) -> Option<(usize, usize)> {
    clearable(messages, config)
        .first()
        .map(|(clearable, _)| clearable.at)
}

/// Clears the `planned` results ([`plan`]) in place.
pub fn apply(messages: &mut [MessageParam], planned: Vec<Clearable>) -> MicrocompactReport {
    let mut report = MicrocompactReport::default();
    for clearable in planned {
        let (message, block) = clearable.at;
        let Some(ContentBlock::ToolResult(result)) = messages
            .get_mut(message)
            .and_then(|message| message.content.get_mut(block))
        else {
            continue;
        };
        result.content = ToolResultContent::Text(clearable.placeholder);
        report.cleared += 1;
        report.bytes_cleared += clearable.bytes;
        report.tool_use_ids.push(result.tool_use_id.clone());
    }
    report
}

/// Clears old compactable results in place, now ([`plan`] then [`apply`]; when to call it is
/// the [`ContextManager`](crate::ContextManager)'s policy, see the module docs).
pub fn microcompact(
    messages: &mut [MessageParam],
    config: &MicrocompactConfig,
) -> MicrocompactReport {
    let planned = plan(messages, config);
    apply(messages, planned)
}

#[cfg(test)]
mod tests {
    use protocol::{Role, ToolResultBlock, ToolUseBlock};
    use serde_json::json;

    use super::*;

    fn turn(id: &str, tool: &str, output: &str) -> [MessageParam; 2] {
        [
            MessageParam {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse(ToolUseBlock {
                    id: id.into(),
                    name: tool.into(),
                    input: json!({}),
                    cache_control: None,
                    extra: Default::default(),
                })],
            },
            MessageParam {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResultBlock::text(
                    id.into(),
                    output,
                    false,
                ))],
            },
        ]
    }

    /// Microcompact clears results only: every assistant message, thinking and
    /// redacted_thinking blocks with their signatures included, stays byte for byte (the API
    /// refuses a changed thinking block).
    #[test]
    fn thinking_blocks_are_never_touched() {
        let mut messages = vec![MessageParam::user_text("task")];
        for id in ["t1", "t2", "t3"] {
            let [mut call, result] = turn(id, "Read", &"line\n".repeat(100));
            let thinking: Vec<ContentBlock> = serde_json::from_value(json!([
                {"type": "thinking", "thinking": format!("Why {id}."), "signature": format!("sig-{id}")},
                {"type": "redacted_thinking", "data": format!("ENC-{id}")},
            ]))
            .unwrap_or_else(|error| panic!("{error}"));
            call.content.splice(0..0, thinking);
            messages.extend([call, result]);
        }
        let assistants = |messages: &[MessageParam]| {
            serde_json::to_string(
                &messages
                    .iter()
                    .filter(|message| message.role == Role::Assistant)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or_default()
        };
        let before = assistants(&messages);
        let config = MicrocompactConfig {
            keep_recent: 1,
            ..MicrocompactConfig::default()
        };
        assert_eq!(microcompact(&mut messages, &config).cleared, 2);
        assert_eq!(assistants(&messages), before);
    }

    /// An old screenshot or PDF read is cleared like an old text result; the recent one stays.
    #[test]
    fn clears_old_images_and_documents() {
        let media = |id: &str| {
            let blocks: Vec<ContentBlock> = serde_json::from_value(json!([
                {"type": "text", "text": "Image shot.png: 800x600 px."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo".repeat(100)}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x".repeat(100)}},
            ]))
            .unwrap_or_else(|error| panic!("{error}"));
            let [call, mut result] = turn(id, "Read", "");
            if let ContentBlock::ToolResult(block) = &mut result.content[0] {
                block.content = ToolResultContent::Blocks(blocks);
            }
            [call, result]
        };
        let mut messages = vec![MessageParam::user_text("look")];
        messages.extend(media("old"));
        messages.extend(media("new"));
        let config = MicrocompactConfig {
            keep_recent: 1,
            ..MicrocompactConfig::default()
        };
        let report = microcompact(&mut messages, &config);
        assert_eq!(report.tool_use_ids, vec![ToolUseId::from("old")]);
        let content = |index: usize| match &messages[index].content[0] {
            ContentBlock::ToolResult(result) => result.content.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            matches!(content(2), ToolResultContent::Text(text) if text.starts_with("[Old tool result cleared: Read output,"))
        );
        assert!(
            matches!(content(4), ToolResultContent::Blocks(blocks) if blocks.len() == 3),
            "the recent read keeps its image and document"
        );
    }

    /// A batch of parallel calls can bring more results than `keep_recent` at once: none of
    /// them is cleared before the model has read them, while older ones are.
    #[test]
    fn results_the_model_has_not_seen_stay() {
        let mut messages = vec![MessageParam::user_text("task")];
        messages.extend(turn("old", "Read", &"old line\n".repeat(40)));
        let ids = ["p1", "p2", "p3", "p4"];
        messages.push(MessageParam {
            role: Role::Assistant,
            content: ids
                .iter()
                .map(|id| {
                    ContentBlock::ToolUse(ToolUseBlock {
                        id: (*id).into(),
                        name: "Read".into(),
                        input: json!({}),
                        cache_control: None,
                        extra: Default::default(),
                    })
                })
                .collect(),
        });
        messages.push(MessageParam {
            role: Role::User,
            content: ids
                .iter()
                .map(|id| {
                    ContentBlock::ToolResult(ToolResultBlock::text(
                        (*id).into(),
                        "new line\n".repeat(40),
                        false,
                    ))
                })
                .collect(),
        });
        let config = MicrocompactConfig {
            keep_recent: 1,
            ..MicrocompactConfig::default()
        };
        let report = microcompact(&mut messages, &config);
        assert_eq!(report.tool_use_ids, vec![ToolUseId::from("old")]);
        // Once the model has answered them, they are old like any other.
        messages.push(MessageParam {
            role: Role::Assistant,
            content: vec![ContentBlock::text("read them")],
        });
        let report = microcompact(&mut messages, &config);
        let cleared: Vec<&str> = report.tool_use_ids.iter().map(ToolUseId::as_str).collect();
        assert_eq!(cleared, ["p1", "p2", "p3"]);
    }

    #[test]
    fn clears_old_compactable_results_only() {
        let mut messages = vec![MessageParam::user_text("task")];
        let long_read = "fn main() {}\n".repeat(20);
        let long_bash = "ok\n".repeat(50);
        messages.extend(turn("t1", "Read", &long_read));
        messages.extend(turn("t2", "Deploy", &"deployed".repeat(30)));
        messages.extend(turn("t3", "Bash", &long_bash));
        messages.extend(turn("t4", "Bash", "short"));
        messages.extend(turn("t5", "Grep", "src/a.rs"));
        let config = MicrocompactConfig {
            keep_recent: 1,
            ..MicrocompactConfig::default()
        };
        let report = microcompact(&mut messages, &config);
        assert_eq!(
            report,
            MicrocompactReport {
                cleared: 2,
                bytes_cleared: 260 + 150,
                tool_use_ids: vec!["t1".into(), "t3".into()],
            }
        );
        let text = |index: usize| match &messages[index].content[0] {
            ContentBlock::ToolResult(result) => match &result.content {
                ToolResultContent::Text(text) => text.clone(),
                other => format!("{other:?}"),
            },
            _ => unreachable!(),
        };
        assert_eq!(
            text(2),
            "[Old tool result cleared: Read output, 260 bytes. Run the tool again if you need it.]"
        );
        assert_eq!(text(4), "deployed".repeat(30), "not a compactable tool");
        assert_eq!(
            text(6),
            "[Old tool result cleared: Bash output, 150 bytes. Run the tool again if you need it.]"
        );
        assert_eq!(text(8), "short", "never replaced by a longer placeholder");
        assert_eq!(text(10), "src/a.rs", "the most recent one stays");
        // Idempotent.
        let before = messages.clone();
        assert_eq!(microcompact(&mut messages, &config).cleared, 0);
        assert_eq!(messages, before);
    }
}
