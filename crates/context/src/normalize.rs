//! The shape rules every request's history must follow, their validator, and the repairs
//! that restore them.
//!
//! Rules (the API rejects histories that break them): the first message is a user message;
//! roles alternate; each tool_use id in an assistant message has exactly one tool_result in
//! the next message (a user message); each tool_result refers to a tool_use of the message
//! right before it.

use std::collections::HashSet;

use protocol::{ContentBlock, MessageParam, Role, ToolResultBlock, ToolUseId};

/// Why a history breaks the rules, with the message index (0-based) where it does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PairingError {
    /// The history does not start with a user message.
    #[error("message 0 is an assistant message; a history starts with a user message")]
    StartsWithAssistant,
    /// Two messages in a row have the same role.
    #[error("messages {index} and {} are both {role:?} messages", index + 1)]
    NotAlternating {
        /// Index of the first of the two.
        index: usize,
        /// Their role.
        role: Role,
    },
    /// Two tool_use blocks of one message share an id (the API rejects it).
    #[error("tool_use id {id} appears more than once in message {index}")]
    DuplicateToolUse {
        /// Index of the assistant message.
        index: usize,
        /// The repeated id.
        id: ToolUseId,
    },
    /// A tool_use has no tool_result in the next message.
    #[error("tool_use {id} in message {index} has no tool_result in the next message")]
    MissingResult {
        /// Index of the assistant message.
        index: usize,
        /// The tool_use id.
        id: ToolUseId,
    },
    /// A tool_use has more than one tool_result.
    #[error("tool_use {id} has {count} tool_results in message {index}")]
    DuplicateResult {
        /// Index of the user message.
        index: usize,
        /// The tool_use id.
        id: ToolUseId,
        /// How many results name it.
        count: usize,
    },
    /// A tool_result refers to no tool_use of the message before it.
    #[error("tool_result for {id} in message {index} answers no tool_use of the message before it")]
    OrphanResult {
        /// Index of the user message.
        index: usize,
        /// The id it names.
        id: ToolUseId,
    },
}

fn tool_use_ids(message: &MessageParam) -> Vec<&ToolUseId> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse(tool_use) => Some(&tool_use.id),
            _ => None,
        })
        .collect()
}

fn tool_result_ids(message: &MessageParam) -> Vec<&ToolUseId> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult(result) => Some(&result.tool_use_id),
            _ => None,
        })
        .collect()
}

/// Checks the rules; the first violation found, in message order.
///
/// # Errors
///
/// [`PairingError`] naming the violation and where it is.
pub fn validate_pairing(messages: &[MessageParam]) -> Result<(), PairingError> {
    if messages
        .first()
        .is_some_and(|first| first.role == Role::Assistant)
    {
        return Err(PairingError::StartsWithAssistant);
    }
    for (index, pair) in messages.windows(2).enumerate() {
        if pair[0].role == pair[1].role {
            return Err(PairingError::NotAlternating {
                index,
                role: pair[0].role,
            });
        }
    }
    for (index, message) in messages.iter().enumerate() {
        match message.role {
            Role::Assistant => {
                let results = messages
                    .get(index + 1)
                    .map(tool_result_ids)
                    .unwrap_or_default();
                for id in tool_use_ids(message) {
                    let count = results.iter().filter(|result| **result == id).count();
                    match count {
                        0 => {
                            return Err(PairingError::MissingResult {
                                index,
                                id: id.clone(),
                            });
                        }
                        1 => {}
                        count => {
                            return Err(PairingError::DuplicateResult {
                                index: index + 1,
                                id: id.clone(),
                                count,
                            });
                        }
                    }
                }
            }
            Role::User => {
                let uses: Vec<&ToolUseId> = index
                    .checked_sub(1)
                    .map(|previous| tool_use_ids(&messages[previous]))
                    .unwrap_or_default();
                for id in tool_result_ids(message) {
                    if !uses.contains(&id) {
                        return Err(PairingError::OrphanResult {
                            index,
                            id: id.clone(),
                        });
                    }
                }
            }
        }
    }
    Ok(())
}

/// One entry of a session's history as the loop keeps it: messages, and entries shown to the
/// user that never go to the API.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HistoryItem {
    /// A message for the API.
    Message(MessageParam),
    /// A UI-only entry (tool progress, a system note, a compaction notice): dropped before
    /// each request.
    UiOnly {
        /// What kind of entry (`progress`, `system`, ...).
        kind: String,
        /// Its text.
        text: String,
    },
}

/// A repair [`normalize`] made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Repair {
    /// UI-only entries dropped.
    DroppedUiOnly {
        /// How many.
        count: usize,
    },
    /// Adjacent messages of the same role merged into one.
    Merged {
        /// The role.
        role: Role,
        /// Index (in the output) of the merged message.
        index: usize,
    },
    /// The history started with an assistant message; a user message was put before it.
    InsertedLeadingUser,
    /// A tool_use had no result; an "interrupted" error result was added.
    AddedMissingResult {
        /// The tool_use id.
        id: ToolUseId,
    },
    /// A tool_use repeated an id already used in its message; the repeat was dropped.
    DroppedDuplicateToolUse {
        /// The repeated id.
        id: ToolUseId,
    },
    /// A tool_result answered no tool_use of the message before it (or repeated one); it
    /// was dropped.
    DroppedOrphanResult {
        /// The id it named.
        id: ToolUseId,
    },
    /// A message left with no content was dropped.
    DroppedEmptyMessage {
        /// Its role.
        role: Role,
    },
}

/// The text of the result added for a tool_use that never got one.
pub const INTERRUPTED_RESULT: &str =
    "Error: this tool call was interrupted before it produced a result.";

/// Text of the user message inserted before a history that starts with the assistant.
const LEADING_USER: &str = "(conversation continues)";

/// Turns a session's history into a valid request history: drops UI-only entries, merges
/// adjacent messages of the same role (tool_results first in a merged user message), makes
/// the first message a user message, answers dangling tool_uses with an error result and
/// drops orphan tool_results. Returns the messages and every repair made; the output always
/// passes [`validate_pairing`].
pub fn normalize(items: Vec<HistoryItem>) -> (Vec<MessageParam>, Vec<Repair>) {
    let mut repairs = Vec::new();
    let mut dropped_ui = 0;
    let mut messages: Vec<MessageParam> = Vec::with_capacity(items.len());
    for item in items {
        match item {
            HistoryItem::Message(message) => messages.push(message),
            HistoryItem::UiOnly { .. } => dropped_ui += 1,
        }
    }
    if dropped_ui > 0 {
        repairs.push(Repair::DroppedUiOnly { count: dropped_ui });
    }
    let messages = normalize_messages(messages, &mut repairs);
    (messages, repairs)
}

/// [`normalize`] for a history of messages only.
pub fn normalize_messages(
    messages: Vec<MessageParam>,
    repairs: &mut Vec<Repair>,
) -> Vec<MessageParam> {
    // Merge runs of the same role.
    let mut merged = merge_runs(messages, repairs);
    if merged
        .first()
        .is_some_and(|first| first.role == Role::Assistant)
    {
        merged.insert(0, MessageParam::user_text(LEADING_USER));
        repairs.push(Repair::InsertedLeadingUser);
    }
    // Pairing: walk assistant messages and the user message after each.
    let mut index = 0;
    while index < merged.len() {
        match merged[index].role {
            Role::Assistant => {
                let ids: Vec<ToolUseId> =
                    tool_use_ids(&merged[index]).into_iter().cloned().collect();
                if !ids.is_empty() {
                    if merged
                        .get(index + 1)
                        .is_none_or(|next| next.role != Role::User)
                    {
                        merged.insert(
                            index + 1,
                            MessageParam {
                                role: Role::User,
                                content: Vec::new(),
                            },
                        );
                    }
                    let next = &mut merged[index + 1];
                    let present: HashSet<ToolUseId> =
                        tool_result_ids(next).into_iter().cloned().collect();
                    let mut added = Vec::new();
                    for id in ids.iter().filter(|id| !present.contains(*id)) {
                        added.push(ContentBlock::ToolResult(ToolResultBlock::text(
                            id.clone(),
                            INTERRUPTED_RESULT,
                            true,
                        )));
                        repairs.push(Repair::AddedMissingResult { id: id.clone() });
                    }
                    // Results go first in a user message, in tool_use order.
                    let position = next
                        .content
                        .iter()
                        .take_while(|block| matches!(block, ContentBlock::ToolResult(_)))
                        .count();
                    next.content.splice(position..position, added);
                }
            }
            Role::User => {
                let allowed: Vec<ToolUseId> = index
                    .checked_sub(1)
                    .map(|previous| {
                        tool_use_ids(&merged[previous])
                            .into_iter()
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                let mut seen = HashSet::new();
                merged[index].content.retain(|block| match block {
                    ContentBlock::ToolResult(result) => {
                        let keep = allowed.contains(&result.tool_use_id)
                            && seen.insert(result.tool_use_id.clone());
                        if !keep {
                            repairs.push(Repair::DroppedOrphanResult {
                                id: result.tool_use_id.clone(),
                            });
                        }
                        keep
                    }
                    _ => true,
                });
            }
        }
        index += 1;
    }
    // Dropping orphans can empty a message; dropping it can make two neighbours share a role.
    if merged.iter().any(|message| message.content.is_empty()) {
        let before = merged.len();
        merged.retain(|message| {
            let keep = !message.content.is_empty();
            if !keep {
                repairs.push(Repair::DroppedEmptyMessage { role: message.role });
            }
            keep
        });
        if merged.len() != before {
            return normalize_messages(merged, repairs);
        }
    }
    merged
}

fn merge_runs(messages: Vec<MessageParam>, repairs: &mut Vec<Repair>) -> Vec<MessageParam> {
    let mut merged: Vec<MessageParam> = Vec::with_capacity(messages.len());
    for message in messages {
        match merged.last_mut() {
            Some(last) if last.role == message.role => {
                if message.role == Role::User {
                    // tool_results first, then everything else, each in order.
                    let (mut results, mut rest): (Vec<_>, Vec<_>) =
                        std::mem::take(&mut last.content)
                            .into_iter()
                            .chain(message.content)
                            .partition(|block| matches!(block, ContentBlock::ToolResult(_)));
                    results.append(&mut rest);
                    last.content = results;
                } else {
                    last.content.extend(message.content);
                }
                repairs.push(Repair::Merged {
                    role: message.role,
                    index: merged.len() - 1,
                });
            }
            _ => merged.push(message),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use protocol::ToolUseBlock;
    use serde_json::json;

    use super::*;

    pub(crate) fn tool_use(id: &str) -> ContentBlock {
        ContentBlock::ToolUse(ToolUseBlock {
            id: id.into(),
            name: "Read".into(),
            input: json!({}),
            cache_control: None,
            extra: Default::default(),
        })
    }

    pub(crate) fn tool_result(id: &str) -> ContentBlock {
        ContentBlock::ToolResult(ToolResultBlock::text(id.into(), "ok", false))
    }

    fn user(content: Vec<ContentBlock>) -> MessageParam {
        MessageParam {
            role: Role::User,
            content,
        }
    }

    fn assistant(content: Vec<ContentBlock>) -> MessageParam {
        MessageParam {
            role: Role::Assistant,
            content,
        }
    }

    #[test]
    fn validator_names_each_violation() {
        let cases: Vec<(Vec<MessageParam>, Result<(), PairingError>)> = vec![
            (vec![user(vec![ContentBlock::text("hi")])], Ok(())),
            (
                vec![assistant(vec![ContentBlock::text("hi")])],
                Err(PairingError::StartsWithAssistant),
            ),
            (
                vec![
                    user(vec![ContentBlock::text("a")]),
                    user(vec![ContentBlock::text("b")]),
                ],
                Err(PairingError::NotAlternating {
                    index: 0,
                    role: Role::User,
                }),
            ),
            (
                vec![
                    user(vec![ContentBlock::text("a")]),
                    assistant(vec![tool_use("t1")]),
                ],
                Err(PairingError::MissingResult {
                    index: 1,
                    id: "t1".into(),
                }),
            ),
            (
                vec![
                    user(vec![ContentBlock::text("a")]),
                    assistant(vec![tool_use("t1")]),
                    user(vec![tool_result("t1"), tool_result("t1")]),
                ],
                Err(PairingError::DuplicateResult {
                    index: 2,
                    id: "t1".into(),
                    count: 2,
                }),
            ),
            (
                vec![user(vec![tool_result("t9")])],
                Err(PairingError::OrphanResult {
                    index: 0,
                    id: "t9".into(),
                }),
            ),
        ];
        for (messages, expected) in cases {
            assert_eq!(validate_pairing(&messages), expected, "{messages:?}");
        }
    }

    #[test]
    fn normalize_repairs_and_reports() {
        let items = vec![
            HistoryItem::Message(user(vec![ContentBlock::text("task")])),
            HistoryItem::UiOnly {
                kind: "progress".into(),
                text: "reading".into(),
            },
            HistoryItem::Message(assistant(vec![tool_use("t1"), tool_use("t2")])),
            HistoryItem::Message(user(vec![tool_result("t1"), tool_result("t7")])),
            HistoryItem::Message(user(vec![ContentBlock::text("also this")])),
        ];
        let (messages, repairs) = normalize(items);
        validate_pairing(&messages).unwrap();
        assert_eq!(
            repairs,
            [
                Repair::DroppedUiOnly { count: 1 },
                Repair::Merged {
                    role: Role::User,
                    index: 2
                },
                Repair::AddedMissingResult { id: "t2".into() },
                Repair::DroppedOrphanResult { id: "t7".into() },
            ]
        );
        let last: Vec<&str> = messages[2]
            .content
            .iter()
            .map(ContentBlock::block_type)
            .collect();
        assert_eq!(last, ["tool_result", "tool_result", "text"]);
    }

    #[test]
    fn dropping_an_orphan_only_message_re_merges() {
        let messages = vec![
            user(vec![ContentBlock::text("a")]),
            assistant(vec![ContentBlock::text("b")]),
            user(vec![tool_result("ghost")]),
            assistant(vec![ContentBlock::text("c")]),
        ];
        let mut repairs = Vec::new();
        let out = normalize_messages(messages, &mut repairs);
        validate_pairing(&out).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].content.len(), 2);
        assert!(repairs.contains(&Repair::DroppedEmptyMessage { role: Role::User }));
    }
}
