//! L2, microcompact: the contents of older tool results of compactable tools become a short
//! placeholder naming the tool and the size cleared.
//!
//! Only the content changes: the tool_result block, its id, its position and every other block
//! stay, so pairing holds. The most recent `keep_recent` compactable results stay
//! byte-identical, and so does a result no longer than its placeholder. Idempotent: a
//! placeholder is recognised and left as it is.
//!
//! **When it runs.** Clearing a result rewrites a message far back in the history, which
//! breaks the prompt cache from there on: every later request pays full price for what
//! follows (a cache read costs a tenth of fresh input). So [`ContextManager`] clears only when
//! it pays, in one batch: when the history reaches `trigger_percent` (80 %) of the
//! autocompact threshold (the window is filling; clearing now may save a compaction), or when
//! the cache is known cold (no request for longer than `cache_ttl`, 5 minutes, the API's
//! default cache lifetime: the next request pays full price anyway). After a batch it does not
//! fire again until the history has dropped below the trigger and risen to it again, or the
//! cache went cold again, so the prefix changes once and then stays stable.
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
    /// Clear when the history reaches this percentage of the autocompact threshold. Default
    /// 80.
    pub trigger_percent: u8,
    /// How long the API keeps a prompt prefix cached: after this long without a request the
    /// cache is cold and clearing costs nothing more. Default 5 minutes (the API's default
    /// `ephemeral` lifetime; set 1 hour when requests use the 1-hour TTL).
    pub cache_ttl: Duration,
}

impl Default for MicrocompactConfig {
    fn default() -> Self {
        Self {
            keep_recent: 5,
            tools: COMPACTABLE_TOOLS
                .iter()
                .map(|&name| name.to_owned())
                .collect(),
            trigger_percent: 80,
            cache_ttl: Duration::from_secs(5 * 60),
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

/// Clears old compactable results in place, now (when to call it is the
/// [`ContextManager`](crate::ContextManager)'s policy, see the module docs).
pub fn microcompact(
    messages: &mut [MessageParam],
    config: &MicrocompactConfig,
) -> MicrocompactReport {
    let mut names: HashMap<&ToolUseId, &str> = HashMap::new();
    // Positions (message, block) of compactable results, oldest first.
    let mut positions: Vec<(usize, usize, String)> = Vec::new();
    {
        for message in messages.iter() {
            for block in &message.content {
                if let ContentBlock::ToolUse(tool_use) = block {
                    names.insert(&tool_use.id, tool_use.name.as_str());
                }
            }
        }
        for (message_index, message) in messages.iter().enumerate() {
            for (block_index, block) in message.content.iter().enumerate() {
                let ContentBlock::ToolResult(result) = block else {
                    continue;
                };
                let Some(name) = names.get(&result.tool_use_id) else {
                    continue;
                };
                if config.tools.iter().any(|tool| tool == name) {
                    positions.push((message_index, block_index, (*name).to_owned()));
                }
            }
        }
    }
    let old = positions.len().saturating_sub(config.keep_recent);
    let mut report = MicrocompactReport::default();
    for (message_index, block_index, name) in positions.into_iter().take(old) {
        let ContentBlock::ToolResult(result) = &mut messages[message_index].content[block_index]
        else {
            continue;
        };
        if matches!(&result.content, ToolResultContent::Text(text) if text.starts_with(PLACEHOLDER_PREFIX))
        {
            continue;
        }
        let bytes = result.content.len_bytes();
        let replacement = placeholder(&name, bytes);
        // Never longer than what it replaces: a short result stays as it is.
        if replacement.len() >= bytes {
            continue;
        }
        result.content = ToolResultContent::Text(replacement);
        report.cleared += 1;
        report.bytes_cleared += bytes;
        report.tool_use_ids.push(result.tool_use_id.clone());
    }
    report
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
