//! L1, the tool-result budget: oversized tool results move to files (lossless).
//!
//! A tool result larger than its budget (50,000 characters per result, 200,000 per message,
//! Claude Code's defaults) is written through an injected [`ResultStore`] and replaced by a
//! `<persisted-output>` block holding the path, the original size and a preview of the first
//! ~2 KB. The agent can Read the file back. Decisions are recorded in a [`ReplacementLog`]:
//! once replaced, a result stays replaced with the same bytes, and a result once kept is never
//! replaced later, so the history's prefix stays byte-stable for prompt caching.

use std::collections::{HashMap, HashSet};

use protocol::{ContentBlock, MessageParam, ToolResultContent, ToolUseId};

/// Budgets, in characters (Unicode scalar values) of result text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// Largest result kept inline. Default 50,000 (Claude Code's).
    pub per_result_chars: usize,
    /// Largest total of the results of one message kept inline. Default 200,000 (Claude
    /// Code's).
    pub per_message_chars: usize,
    /// Bytes of preview kept inline, cut at a line end when one is near. Default 2,000.
    pub preview_bytes: usize,
    /// Tools with a per-result limit of their own instead of `per_result_chars`: the first
    /// entry whose `name_prefix` starts the tool's name applies. Empty by default; the CLI
    /// gives MCP tools (`mcp__`) Claude Code's `MAX_MCP_OUTPUT_TOKENS` limit.
    pub tool_limits: Vec<ToolLimit>,
}

/// A per-result limit for the tools whose names start with `name_prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolLimit {
    /// The start of the tool names it covers (`mcp__`, `mcp__github__`).
    pub name_prefix: String,
    /// Largest result of those tools kept inline, in characters.
    pub chars: usize,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            per_result_chars: 50_000,
            per_message_chars: 200_000,
            preview_bytes: 2_000,
            tool_limits: Vec::new(),
        }
    }
}

impl BudgetConfig {
    /// The largest result of `tool` kept inline, in characters.
    pub fn result_limit(&self, tool: Option<&str>) -> usize {
        tool.and_then(|tool| {
            self.tool_limits
                .iter()
                .find(|limit| tool.starts_with(&limit.name_prefix))
        })
        .map_or(self.per_result_chars, |limit| limit.chars)
    }
}

/// Where oversized results go (the session's `tool-results/` folder in the CLI).
pub trait ResultStore: Send + Sync {
    /// Stores the full text of a result; returns the path the agent can Read it back from.
    ///
    /// # Errors
    ///
    /// A message saying why it could not be stored; the result then stays inline.
    fn persist(&mut self, tool_use_id: &ToolUseId, text: &str) -> Result<String, String>;
}

/// The decisions L1 made, so that applying it again gives the same bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplacementLog {
    replaced: HashMap<ToolUseId, String>,
    kept: HashSet<ToolUseId>,
}

impl ReplacementLog {
    /// Results replaced so far.
    pub fn replaced(&self) -> usize {
        self.replaced.len()
    }

    /// The replacement text of a result, if it was replaced.
    pub fn replacement(&self, id: &ToolUseId) -> Option<&str> {
        self.replaced.get(id).map(String::as_str)
    }
}

/// What one pass of L1 did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetReport {
    /// Results newly moved to the store: (id, original size in bytes, path).
    pub persisted: Vec<(ToolUseId, usize, String)>,
    /// Results that should have moved but could not be stored: (id, why). They stay inline.
    pub failed: Vec<(ToolUseId, String)>,
}

/// The text of a tool result's content (text blocks joined with a newline), or `None` when it
/// holds non-text blocks (images are never persisted).
fn result_text(content: &ToolResultContent) -> Option<String> {
    match content {
        ToolResultContent::Text(text) => Some(text.clone()),
        ToolResultContent::Blocks(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for block in blocks {
                texts.push(block.as_text()?);
            }
            Some(texts.join("\n"))
        }
    }
}

/// The inline replacement for a persisted result.
pub fn persisted_text(path: &str, original: &str, preview_bytes: usize) -> String {
    let mut cut = original.len().min(preview_bytes);
    while !original.is_char_boundary(cut) {
        cut -= 1;
    }
    // Prefer to end after a line end in the last quarter of the preview.
    if let Some(newline) = original[..cut].rfind('\n')
        && newline >= cut * 3 / 4
    {
        cut = newline + 1;
    }
    let preview = &original[..cut];
    let separator = if preview.ends_with('\n') { "" } else { "\n" };
    format!(
        "<persisted-output>\nOutput too large ({} bytes, {} lines). Full output saved to: {path}\n\nPreview (first {cut} bytes):\n{preview}{separator}...\n</persisted-output>",
        original.len(),
        original.lines().count(),
    )
}

/// Applies the budget to every message: replaces recorded results with their recorded text,
/// and persists new results over the per-result budget, then the largest new results of a
/// message until the message is within the per-message budget.
pub fn apply_budget(
    messages: &mut [MessageParam],
    config: &BudgetConfig,
    store: &mut dyn ResultStore,
    log: &mut ReplacementLog,
) -> BudgetReport {
    let mut report = BudgetReport::default();
    for at in 0..messages.len() {
        // The names of the tools whose results this message may hold (the assistant message
        // before it), for per-tool limits.
        let names: HashMap<ToolUseId, String> = match at.checked_sub(1) {
            Some(previous) if !config.tool_limits.is_empty() => messages[previous]
                .content
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::ToolUse(call) => Some((call.id.clone(), call.name.clone())),
                    _ => None,
                })
                .collect(),
            _ => HashMap::new(),
        };
        let message = &mut messages[at];
        // Replay recorded replacements; find results not decided yet.
        let mut undecided = false;
        for block in &mut message.content {
            let ContentBlock::ToolResult(result) = block else {
                continue;
            };
            if let Some(text) = log.replaced.get(&result.tool_use_id) {
                // A result microcompact has cleared since stays cleared: L1 and L2 must not
                // undo each other (each undoing would be a silent rewrite of the prefix).
                let settled = matches!(
                    &result.content,
                    ToolResultContent::Text(current)
                        if current == text || current.starts_with(crate::microcompact::PLACEHOLDER_PREFIX)
                );
                if !settled {
                    result.content = ToolResultContent::Text(text.clone());
                }
            } else if !log.kept.contains(&result.tool_use_id) {
                undecided = true;
            }
        }
        if !undecided {
            // The common case on every turn after the first: nothing to copy or count.
            continue;
        }
        // (block index, id, text, chars) of results not decided yet.
        let mut fresh: Vec<(usize, ToolUseId, String, usize)> = Vec::new();
        let mut inline_chars = 0;
        for (index, block) in message.content.iter().enumerate() {
            let ContentBlock::ToolResult(result) = block else {
                continue;
            };
            if log.replaced.contains_key(&result.tool_use_id) {
                continue;
            }
            let Some(text) = result_text(&result.content) else {
                continue;
            };
            let chars = text.chars().count();
            if log.kept.contains(&result.tool_use_id) {
                inline_chars += chars;
                continue;
            }
            fresh.push((index, result.tool_use_id.clone(), text, chars));
        }
        let mut to_persist: Vec<usize> = Vec::new();
        let mut remaining: Vec<usize> = Vec::new();
        for (position, (_, id, _, chars)) in fresh.iter().enumerate() {
            if *chars > config.result_limit(names.get(id).map(String::as_str)) {
                to_persist.push(position);
            } else {
                inline_chars += chars;
                remaining.push(position);
            }
        }
        // Over the message budget: move the largest fresh results until it fits.
        remaining.sort_by_key(|&position| std::cmp::Reverse(fresh[position].3));
        for &position in &remaining {
            if inline_chars <= config.per_message_chars {
                break;
            }
            inline_chars -= fresh[position].3;
            to_persist.push(position);
        }
        for (position, (index, id, text, _)) in fresh.iter().enumerate() {
            if !to_persist.contains(&position) {
                log.kept.insert(id.clone());
                continue;
            }
            match store.persist(id, text) {
                Ok(path) => {
                    let replacement = persisted_text(&path, text, config.preview_bytes);
                    if let ContentBlock::ToolResult(result) = &mut message.content[*index] {
                        result.content = ToolResultContent::Text(replacement.clone());
                    }
                    log.replaced.insert(id.clone(), replacement);
                    report.persisted.push((id.clone(), text.len(), path));
                }
                Err(why) => {
                    // Not recorded: the next pass tries again.
                    report.failed.push((id.clone(), why));
                }
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use protocol::{Role, ToolResultBlock};

    use super::*;

    #[derive(Default)]
    struct Memory {
        files: Vec<(String, String)>,
        fail: bool,
    }

    impl ResultStore for Memory {
        fn persist(&mut self, id: &ToolUseId, text: &str) -> Result<String, String> {
            if self.fail {
                return Err("disk full".into());
            }
            let path = format!("/sessions/s1/tool-results/{id}.txt");
            self.files.push((path.clone(), text.to_owned()));
            Ok(path)
        }
    }

    fn results(sizes: &[(&str, usize)]) -> MessageParam {
        MessageParam {
            role: Role::User,
            content: sizes
                .iter()
                .map(|(id, size)| {
                    ContentBlock::ToolResult(ToolResultBlock::text(
                        (*id).into(),
                        "x\n".repeat(size / 2),
                        false,
                    ))
                })
                .collect(),
        }
    }

    fn texts(message: &MessageParam) -> Vec<String> {
        message
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::ToolResult(result) => result_text(&result.content).unwrap(),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn oversized_results_move_and_stay_moved() {
        let config = BudgetConfig::default();
        let mut store = Memory::default();
        let mut log = ReplacementLog::default();
        let mut messages = vec![results(&[("small", 1_000), ("big", 60_000)])];
        let report = apply_budget(&mut messages, &config, &mut store, &mut log);
        assert_eq!(
            report.persisted,
            [(
                "big".into(),
                60_000,
                "/sessions/s1/tool-results/big.txt".into()
            )]
        );
        let after = texts(&messages[0]);
        assert_eq!(after[0].len(), 1_000);
        assert!(after[1].starts_with("<persisted-output>\nOutput too large (60000 bytes, 30000 lines). Full output saved to: /sessions/s1/tool-results/big.txt\n\nPreview (first 2000 bytes):\n"));
        assert!(after[1].ends_with("\n...\n</persisted-output>"));
        // Lossless: the store has every byte.
        assert_eq!(store.files[0].1.len(), 60_000);
        // Idempotent, and byte-stable when the original comes back (a resumed transcript).
        let mut again = messages.clone();
        apply_budget(&mut again, &config, &mut store, &mut log);
        assert_eq!(again, messages);
        let mut original = vec![results(&[("small", 1_000), ("big", 60_000)])];
        apply_budget(&mut original, &config, &mut store, &mut log);
        assert_eq!(original, messages);
        assert_eq!(store.files.len(), 1);
    }

    #[test]
    fn message_budget_moves_the_largest_first() {
        let config = BudgetConfig {
            per_message_chars: 100_000,
            ..BudgetConfig::default()
        };
        let mut store = Memory::default();
        let mut log = ReplacementLog::default();
        let mut messages = vec![results(&[("a", 40_000), ("b", 45_000), ("c", 30_000)])];
        let report = apply_budget(&mut messages, &config, &mut store, &mut log);
        let moved: Vec<&str> = report
            .persisted
            .iter()
            .map(|(id, _, _)| id.as_str())
            .collect();
        assert_eq!(moved, ["b"]);
        // A kept result is never moved later, even if the budget shrinks.
        let tighter = BudgetConfig {
            per_message_chars: 10_000,
            ..config
        };
        let report = apply_budget(&mut messages, &tighter, &mut store, &mut log);
        assert!(report.persisted.is_empty());
    }

    #[test]
    fn tools_with_a_limit_of_their_own_follow_it() {
        let config = BudgetConfig {
            tool_limits: vec![ToolLimit {
                name_prefix: "mcp__".into(),
                chars: 10_000,
            }],
            ..BudgetConfig::default()
        };
        let call = |id: &str, name: &str| {
            serde_json::from_value::<ContentBlock>(serde_json::json!({
                "type": "tool_use", "id": id, "name": name, "input": {}
            }))
            .unwrap_or_else(|error| panic!("{error}"))
        };
        let calls = MessageParam {
            role: Role::Assistant,
            content: vec![call("m", "mcp__kit__huge"), call("r", "Read")],
        };
        let mut store = Memory::default();
        let mut log = ReplacementLog::default();
        let mut messages = vec![calls, results(&[("m", 20_000), ("r", 20_000)])];
        let report = apply_budget(&mut messages, &config, &mut store, &mut log);
        let moved: Vec<&str> = report
            .persisted
            .iter()
            .map(|(id, _, _)| id.as_str())
            .collect();
        // The MCP result is over its own limit; Read's is under the general one.
        assert_eq!(moved, ["m"]);
        assert_eq!(config.result_limit(Some("mcp__x__y")), 10_000);
        assert_eq!(config.result_limit(Some("Bash")), 50_000);
        assert_eq!(config.result_limit(None), 50_000);
    }

    #[test]
    fn store_failure_keeps_the_result_inline_and_retries() {
        let config = BudgetConfig::default();
        let mut store = Memory {
            fail: true,
            ..Memory::default()
        };
        let mut log = ReplacementLog::default();
        let mut messages = vec![results(&[("big", 60_000)])];
        let report = apply_budget(&mut messages, &config, &mut store, &mut log);
        assert_eq!(report.failed, [("big".into(), "disk full".into())]);
        assert_eq!(texts(&messages[0])[0].len(), 60_000);
        store.fail = false;
        let report = apply_budget(&mut messages, &config, &mut store, &mut log);
        assert_eq!(report.persisted.len(), 1);
    }
}
