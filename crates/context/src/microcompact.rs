//! L2, microcompact: the contents of older tool results of compactable tools become a short
//! placeholder naming the tool and the size cleared.
//!
//! Only the content changes: the tool_result block, its id, its position and every other block
//! stay, so pairing holds. The most recent `keep_recent` compactable results stay
//! byte-identical. Idempotent: a placeholder is recognised and left as it is.

use std::collections::HashMap;

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
}

impl Default for MicrocompactConfig {
    fn default() -> Self {
        Self {
            keep_recent: 5,
            tools: COMPACTABLE_TOOLS
                .iter()
                .map(|&name| name.to_owned())
                .collect(),
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
}

/// The placeholder for a cleared result of `tool` that held `bytes` bytes.
pub fn placeholder(tool: &str, bytes: usize) -> String {
    format!(
        "{PLACEHOLDER_PREFIX} {tool} output, {bytes} bytes. Run the tool again if you need it.]"
    )
}

/// Clears old compactable results in place.
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
        result.content = ToolResultContent::Text(placeholder(&name, bytes));
        report.cleared += 1;
        report.bytes_cleared += bytes;
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

    #[test]
    fn clears_old_compactable_results_only() {
        let mut messages = vec![MessageParam::user_text("task")];
        messages.extend(turn("t1", "Read", "fn main() {}"));
        messages.extend(turn("t2", "Deploy", "deployed"));
        messages.extend(turn("t3", "Bash", "ok\n"));
        messages.extend(turn("t4", "Grep", "src/a.rs"));
        let config = MicrocompactConfig {
            keep_recent: 1,
            ..MicrocompactConfig::default()
        };
        let report = microcompact(&mut messages, &config);
        assert_eq!(
            report,
            MicrocompactReport {
                cleared: 2,
                bytes_cleared: 15
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
            "[Old tool result cleared: Read output, 12 bytes. Run the tool again if you need it.]"
        );
        assert_eq!(text(4), "deployed", "not a compactable tool");
        assert_eq!(
            text(6),
            "[Old tool result cleared: Bash output, 3 bytes. Run the tool again if you need it.]"
        );
        assert_eq!(text(8), "src/a.rs", "the most recent one stays");
        // Idempotent.
        let before = messages.clone();
        assert_eq!(microcompact(&mut messages, &config).cleared, 0);
        assert_eq!(messages, before);
    }
}
