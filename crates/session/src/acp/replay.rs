//! A loaded session's history, sent to the editor as the updates it would have seen
//! (`session/load`): what the user typed, the model's text and thinking, each tool call
//! with its result.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use protocol::{ContentBlock, MessageParam, Role};

use super::calls;

/// Sends `history` (a session's, in `cwd`) as `session/update` notifications of
/// `session_id`. A user's text is shown as typed ([`crate::sessions::typed`]): what the
/// agent added itself (reminders, compaction markers) is left out.
pub(crate) fn send(
    cx: &ConnectionTo<Client>,
    session_id: &str,
    history: &[MessageParam],
    cwd: &Path,
) {
    let mut names = std::collections::HashMap::new();
    for update in updates(history, cwd, &mut names) {
        let _ = cx.send_notification(acp::SessionNotification::new(session_id.to_owned(), update));
    }
}

/// The updates for `history`; `names` keeps each tool_use's name by id, for its result.
fn updates(
    history: &[MessageParam],
    cwd: &Path,
    names: &mut std::collections::HashMap<String, String>,
) -> Vec<acp::SessionUpdate> {
    let mut updates = Vec::new();
    for message in history {
        for block in &message.content {
            match (message.role, block) {
                (Role::User, ContentBlock::Text(text)) => {
                    if let Some(typed) = crate::sessions::typed(&text.text) {
                        updates.push(acp::SessionUpdate::UserMessageChunk(chunk(&typed)));
                    }
                }
                (Role::Assistant, ContentBlock::Text(text)) => {
                    updates.push(acp::SessionUpdate::AgentMessageChunk(chunk(&text.text)));
                }
                (Role::Assistant, ContentBlock::Thinking(thinking)) => {
                    updates.push(acp::SessionUpdate::AgentThoughtChunk(chunk(
                        &thinking.thinking,
                    )));
                }
                (Role::Assistant, ContentBlock::ToolUse(tool_use)) => {
                    names.insert(tool_use.id.to_string(), tool_use.name.clone());
                    updates.push(acp::SessionUpdate::ToolCall(calls::announce(
                        tool_use.id.as_str(),
                        &tool_use.name,
                        &tool_use.input,
                        cwd,
                    )));
                }
                (Role::User, ContentBlock::ToolResult(result)) => {
                    let status = if result.is_error.unwrap_or(false) {
                        acp::ToolCallStatus::Failed
                    } else {
                        acp::ToolCallStatus::Completed
                    };
                    // Shown as the live turn showed it (fenced, cut).
                    let name = names
                        .get(result.tool_use_id.as_str())
                        .map_or("", String::as_str);
                    let text = calls::shown(name, &result.content.text());
                    let fields = acp::ToolCallUpdateFields::new()
                        .status(status)
                        .content(vec![calls::text_content(&text)]);
                    updates.push(acp::SessionUpdate::ToolCallUpdate(
                        acp::ToolCallUpdate::new(result.tool_use_id.to_string(), fields),
                    ));
                }
                _ => {}
            }
        }
    }
    updates
}

fn chunk(text: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(
        text.to_owned(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_history_replays_as_typed_text_calls_and_results() {
        let history: Vec<MessageParam> = serde_json::from_value(json!([
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>today is Monday</system-reminder>"},
                {"type": "text", "text": "fix the bug"}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/w/a.rs"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn a() {}"}
            ]}
        ]))
        .expect("a history");
        let updates = updates(&history, Path::new("/w"), &mut Default::default());
        let kinds: Vec<String> = updates
            .iter()
            .map(|update| {
                serde_json::to_value(update).expect("serializes")["sessionUpdate"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "user_message_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update"
            ]
        );
        let acp::SessionUpdate::UserMessageChunk(typed) = &updates[0] else {
            panic!("{:?}", updates[0]);
        };
        assert_eq!(
            typed.content,
            acp::ContentBlock::Text(acp::TextContent::new("fix the bug"))
        );
        let acp::SessionUpdate::ToolCall(call) = &updates[2] else {
            panic!("{:?}", updates[2]);
        };
        assert_eq!(call.title, "Read a.rs");
    }
}
