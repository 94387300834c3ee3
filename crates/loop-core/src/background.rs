//! Background requests to the small, fast model while the loop runs: the seeds' agent
//! progress summary (000_7dfda54faac69dcf.txt 4.8) and tool-use summary
//! (003_5d025cefc799750b.txt, the pending tool-use summary handed to the next turn).
//!
//! Neither ever enters the history or delays a main request:
//!
//! - the **progress summary** is a task of its own that wakes every
//!   [`SummaryConfig::progress_every`], reads the messages of the last request (a
//!   [`ForkPoint`] the engine keeps), asks for a 3-5 word summary and reports it as
//!   [`LoopEvent::ProgressSummary`];
//! - the **tool-use summary** is started when a tool batch's results are kept and the run goes
//!   on; the engine holds its handle (the pending summary) and reports it
//!   ([`LoopEvent::ToolUseSummary`]) after the first model call that ends once it is done; it
//!   never waits for one, so no request is delayed, and one not done when the run ends is
//!   dropped.
//!
//! Both are cancelled with the run (a child of its cancellation token, cancelled when the run
//! ends). Their usage comes with their events, priced by the caller at the fast model's rates.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use protocol::{ContentBlock, MessageParam, Role, ToolResultContent, ToolUseId, Usage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::events::LoopEvent;
use crate::model::{ModelClient, ModelEvent};
use crate::request::ModelRequest;
use crate::subagent::ForkPoint;

/// How often the progress summary is asked for (the seeds: every 30 s).
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(30);

/// The output cap of a summary request, in tokens (a line of text).
const SUMMARY_MAX_TOKENS: u32 = 128;

/// The longest summary kept, in bytes.
const SUMMARY_MAX_CHARS: usize = 200;

/// The most conversation text put in a summary request, in bytes (its recent end).
const EXCERPT_BYTES: usize = 8 * 1024;

/// What the background summaries do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SummaryConfig {
    /// The small, fast model that writes them (Claude Code's `haiku`, or the setting).
    pub model: String,
    /// How often a progress summary is asked for; `None`: never.
    pub progress_every: Option<Duration>,
    /// Whether each tool batch gets a one-line summary.
    pub tool_use: bool,
}

/// Asks `fast` on `model` for one short answer to `prompt`; `None` when the call fails or is
/// cancelled (a summary is never worth an error).
async fn ask(
    model: &dyn ModelClient,
    fast: &str,
    prompt: String,
    cancel: &CancellationToken,
) -> Option<(String, Usage)> {
    let messages = [MessageParam::user_text(prompt)];
    let request = ModelRequest {
        model: fast,
        max_tokens: SUMMARY_MAX_TOKENS,
        system: &[],
        tools: &[],
        messages: &messages,
        user_context: None,
        thinking: None,
        effort: None,
        breakpoints: None,
    };
    let mut stream = model.stream(&request, cancel.clone());
    loop {
        let event = tokio::select! {
            event = stream.next() => event?,
            () = cancel.cancelled() => return None,
        };
        match event {
            Ok(ModelEvent::Done { message, .. }) => {
                // One line: a model that answers at length is cut.
                let text = cut(message.text().trim(), SUMMARY_MAX_CHARS);
                return (!text.is_empty()).then_some((text, message.usage));
            }
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "a background summary failed");
                return None;
            }
        }
    }
}

/// The recent end of a conversation as plain text: each message's text, tool calls as
/// `Name(input)`, results cut to a line, at most [`EXCERPT_BYTES`].
fn excerpt(messages: &[MessageParam]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut size = 0;
    for message in messages.iter().rev() {
        let who = match message.role {
            Role::User => "User",
            Role::Assistant => "Agent",
        };
        for block in message.content.iter().rev() {
            let line = match block {
                ContentBlock::Text(text) if !text.text.starts_with("<system-reminder>") => {
                    format!("{who}: {}", cut(&text.text, 600))
                }
                ContentBlock::ToolUse(call) => {
                    format!(
                        "Agent calls {}({})",
                        call.name,
                        cut(&call.input.to_string(), 200)
                    )
                }
                ContentBlock::ToolResult(result) => {
                    let text = match &result.content {
                        ToolResultContent::Text(text) => cut(text, 200),
                        _ => "(non-text result)".to_owned(),
                    };
                    format!("Tool result: {text}")
                }
                _ => continue,
            };
            size += line.len() + 1;
            if size > EXCERPT_BYTES {
                parts.reverse();
                return parts.join("\n");
            }
            parts.push(line);
        }
    }
    parts.reverse();
    parts.join("\n")
}

/// `text` cut to `bytes` at a char boundary, with an ellipsis when cut, on one line.
fn cut(text: &str, bytes: usize) -> String {
    let line = text.replace('\n', " ");
    if line.len() <= bytes {
        return line;
    }
    let mut end = bytes;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// The progress summary task: every `every`, a 3-5 word summary of the conversation as its
/// last request sent it, reported as an event; ends when `cancel` fires.
pub(crate) async fn progress(
    model: Arc<dyn ModelClient>,
    fast: String,
    every: Duration,
    snapshot: Arc<ForkPoint>,
    events: mpsc::UnboundedSender<LoopEvent>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = cancel.cancelled() => return,
        }
        let messages = snapshot.messages();
        if messages.is_empty() {
            continue;
        }
        let prompt = format!(
            "A coding agent is working on a task. Its recent work:\n\n{}\n\nDescribe what it is doing right now in 3 to 5 words, present tense (for example: \"Fixing the failing test\"). Answer with those words only.",
            excerpt(&messages)
        );
        if let Some((text, usage)) = ask(model.as_ref(), &fast, prompt, &cancel).await {
            let _ = events.send(LoopEvent::ProgressSummary {
                text,
                model: fast.clone(),
                usage,
            });
        }
    }
}

/// A tool batch's one-line summary, as the event to report; `None` when the call fails.
pub(crate) async fn tool_use(
    model: Arc<dyn ModelClient>,
    fast: String,
    batch: Vec<MessageParam>,
    cancel: CancellationToken,
) -> Option<LoopEvent> {
    let tool_use_ids: Vec<ToolUseId> = batch
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| block.as_tool_use().map(|call| call.id.clone()))
        .collect();
    let prompt = format!(
        "A coding agent just ran these tools:\n\n{}\n\nSummarize in one short line (under 12 words, no period) what the tools did, for example \"Read config.rs and ran the tests (2 failed)\". Answer with that line only.",
        excerpt(&batch)
    );
    let (text, usage) = ask(model.as_ref(), &fast, prompt, &cancel).await?;
    Some(LoopEvent::ToolUseSummary {
        text,
        tool_use_ids,
        model: fast,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_excerpt_is_the_recent_end_in_plain_lines() {
        let messages = vec![
            MessageParam::user_text("fix the bug\nplease"),
            MessageParam {
                role: Role::Assistant,
                content: vec![ContentBlock::text("Looking.")],
            },
        ];
        assert_eq!(
            excerpt(&messages),
            "User: fix the bug please\nAgent: Looking."
        );
        let long: Vec<MessageParam> = (0..100)
            .map(|i| MessageParam::user_text(format!("{i} {}", "x".repeat(500))))
            .collect();
        let text = excerpt(&long);
        assert!(text.len() <= EXCERPT_BYTES, "{}", text.len());
        assert!(text.ends_with(&format!("99 {}", "x".repeat(500))));
        assert_eq!(cut("héllo", 2), "h…");
    }
}
