//! Phase 2 (and 4): one model call, streamed, with each tool started as soon as its
//! tool_use block is known complete.

use std::collections::HashMap;
use std::sync::Arc;

use executor::{CompletedTool, ExecutorEvent, InputProblem, StreamingToolExecutor, ToolCall};
use futures_util::StreamExt as _;
use protocol::{
    BlockStatus, CompletedBlock, ContentDelta, Message, StopReason, StreamEvent, ToolUseId, Usage,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::engine::{Deps, LoopConfig};
use crate::events::{HistoryEvent, LoopEvent, Transition};
use crate::model::{ModelError, ModelEvent};
use crate::request::ModelRequest;

/// How one model call ended.
pub(crate) enum CallEnd {
    /// A response completed; its tools have finished.
    Done(Box<Responded>),
    /// The call failed (nothing of it is kept).
    Failed(ModelError),
    /// The user aborted it.
    Aborted(Box<Aborted>),
}

/// A completed response and what its tools did.
pub(crate) struct Responded {
    /// The response.
    pub message: Message,
    /// Whether it was already reported kept ([`committed`]).
    pub reported: bool,
    /// Its tools' results, in completion order.
    pub results: Vec<CompletedTool>,
    /// A call reached the repeated-call stop count.
    pub repeat_stop: bool,
    /// Corrective notes for calls repeated to the note count.
    pub repeat_notes: Vec<String>,
    /// This turn's call counts (the next turn's `repeats`).
    pub repeats: HashMap<String, u32>,
}

/// What an aborted call leaves.
pub(crate) struct Aborted {
    /// The whole response, when it had completed (its event was already emitted).
    pub message: Option<Message>,
    /// Whether that response was already reported kept ([`committed`]).
    pub reported: bool,
    /// The completed blocks, when it had not (tool_uses only with their results).
    pub blocks: Vec<CompletedBlock>,
    /// The tools' results (unfinished ones as interrupted).
    pub results: Vec<CompletedTool>,
    /// Tools were running (or one was about to start).
    pub during_tools: bool,
    /// The usage reported so far by a response cut short (its message_start, then
    /// message_delta), when it had not completed.
    pub partial_usage: Option<Usage>,
}

/// The hand-off rule between the stream and the executor. A tool_use block is complete at
/// its `content_block_stop`, but the last block of a response cut by max_tokens is
/// truncated even though it stopped. So the latest completed tool_use is held here until the
/// stream says it was not the response's cut end: a later block starts, or message_delta's
/// stop_reason is not max_tokens. At message end it is released marked truncated if the
/// response was cut.
///
/// A response can also end incomplete ([`incomplete`]: a refusal, a server's content
/// filter) after whole calls; held calls are then not run. With a client whose calls are
/// final only at the stop_reason ([`crate::ModelClient::tool_use_final_at_block_stop`]
/// false: the OpenAI-compatible formats, whose `content_filter` finish follows whole
/// calls), every completed tool_use is held until the stop_reason, not only the latest.
#[derive(Debug, Default)]
struct Handoff {
    held: Vec<CompletedBlock>,
    /// Hold every completed tool_use until the stop_reason.
    until_stop: bool,
}

impl Handoff {
    /// Holds `block` (a tool_use), releasing the one held before unless every call waits
    /// for the stop_reason.
    fn hold(&mut self, block: CompletedBlock) -> Option<CompletedBlock> {
        let previous = if self.until_stop {
            None
        } else {
            self.held.pop()
        };
        self.held.push(block);
        previous
    }

    /// The held block, if a block after it has started at `index` (never when every call
    /// waits for the stop_reason).
    fn release_before(&mut self, index: usize) -> Option<CompletedBlock> {
        if self.until_stop {
            return None;
        }
        self.held.pop_if(|block| block.index < index)
    }

    /// The held blocks, whatever follows, in stream order.
    fn release(&mut self) -> Vec<CompletedBlock> {
        std::mem::take(&mut self.held)
    }

    fn is_holding(&self) -> bool {
        !self.held.is_empty()
    }
}

/// Whether `reason` ends a response before the model finished it, so that tool calls it
/// completed are not run: `refusal` (the Messages API's refusal, a Chat Completions
/// `content_filter`, a Responses `incomplete` for the content filter) and any reason this
/// crate does not know (`Other`, such as a Responses `incomplete` for another reason).
/// `max_tokens` is not one: its completed calls run and its cut one is answered as cut.
pub(crate) fn incomplete(reason: &StopReason) -> bool {
    matches!(reason, StopReason::Refusal | StopReason::Other(_))
}

/// What the model is told of a call its response's `reason` voided.
fn not_run(reason: &StopReason) -> String {
    format!(
        "Not run: the response ended with stop_reason {} before it was complete (a refusal or the server's content filter), so this call was not run.",
        reason.as_str()
    )
}

/// Whether a completed response is kept in the history whatever happens next, so it is
/// reported (and persisted) the moment it completes, before its tools finish: a crash
/// during a long tool then loses nothing but the tool's result. Only a response cut by
/// max_tokens may still be dropped (the escalation sends the same request again), so it is
/// reported when the loop decides.
pub(crate) fn committed(message: &Message) -> bool {
    message.stop_reason != Some(StopReason::MaxTokens)
}

/// One call in flight: the stream, the executor and what has been seen.
struct Call<'a> {
    executor: StreamingToolExecutor,
    handoff: Handoff,
    blocks: Vec<CompletedBlock>,
    added: Vec<ToolUseId>,
    results: Vec<CompletedTool>,
    done: Option<Message>,
    partial_usage: Option<Usage>,
    guard: RepeatGuard<'a>,
    /// The text block streaming now (its index and text so far): kept if the user aborts
    /// before it completes.
    partial_text: Option<(usize, String)>,
    /// The stop_reason that ended the response incomplete ([`incomplete`]): calls started
    /// after it are answered as not run.
    voided_by: Option<StopReason>,
}

/// Streams one model call and runs its tools.
pub(crate) async fn call_model(
    config: &LoopConfig,
    deps: &Deps,
    repeats: &HashMap<String, u32>,
    request: &ModelRequest<'_>,
    cancel: &CancellationToken,
    emit: &impl Fn(LoopEvent),
) -> CallEnd {
    let mut call = Call {
        executor: StreamingToolExecutor::new(
            deps.tools.clone(),
            Arc::clone(&deps.permissions),
            config.executor,
            cancel.child_token(),
            Arc::clone(&deps.workspace),
        ),
        handoff: Handoff {
            held: Vec::new(),
            until_stop: !deps.model.tool_use_final_at_block_stop(),
        },
        partial_text: None,
        blocks: Vec::new(),
        added: Vec::new(),
        results: Vec::new(),
        done: None,
        partial_usage: None,
        guard: RepeatGuard::new(repeats, config.repeat_note_at, config.repeat_stop_at),
        voided_by: None,
    };
    let mut stream = deps.model.stream(request, cancel.child_token());
    let mut stream_open = true;
    while stream_open || !call.executor.is_idle() {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return call.abort(emit).await,
            item = stream.next(), if stream_open => match item {
                None => {
                    stream_open = false;
                    if call.done.is_none() {
                        call.executor.discard();
                        return CallEnd::Failed(ended_without_response());
                    }
                }
                Some(Err(error)) => {
                    report_discarded(&call.executor.discard(), emit);
                    return CallEnd::Failed(error);
                }
                Some(Ok(event)) => stream_open = call.on_event(event, emit),
            },
            event = call.executor.next_event(), if !call.executor.is_idle() => {
                if let Some(event) = event {
                    call.on_tool_event(event, emit);
                }
            }
        }
    }
    call.finish()
}

fn ended_without_response() -> ModelError {
    ModelError::Transport("the model stream ended without a response".into())
}

impl Call<'_> {
    /// Hands `block` (a tool_use) to the executor; `truncated` marks a cut input.
    fn start(&mut self, block: &CompletedBlock, truncated: bool) {
        let Some(mut call) = ToolCall::from_block(block) else {
            return;
        };
        if truncated && call.input_problem.is_none() {
            call.input_problem = Some(InputProblem::Truncated);
        }
        if let Some(reason) = self.voided_by.as_ref()
            && call.input_problem.is_none()
        {
            call.input_problem = Some(InputProblem::Rejected {
                reason: not_run(reason),
            });
        }
        self.guard.check(&mut call);
        self.added.push(call.id.clone());
        self.executor.add_tool(call);
    }

    /// One event of the model stream; returns whether the stream stays open.
    fn on_event(&mut self, event: ModelEvent, emit: &impl Fn(LoopEvent)) -> bool {
        match event {
            ModelEvent::Stream(event) => {
                self.on_stream_event(&event);
                emit(LoopEvent::Stream(event));
            }
            ModelEvent::BlockComplete(block) => {
                if self
                    .partial_text
                    .as_ref()
                    .is_some_and(|(index, _)| *index == block.index)
                {
                    self.partial_text = None;
                }
                emit(LoopEvent::Block(block.clone()));
                if block.block.as_tool_use().is_some()
                    && let Some(previous) = self.handoff.hold(block.clone())
                {
                    self.start(&previous, false);
                }
                self.blocks.push(block);
            }
            ModelEvent::Restart {
                reason,
                non_streaming,
            } => {
                tracing::warn!(%reason, non_streaming, "model stream restarted");
                report_discarded(&self.executor.discard(), emit);
                self.partial_text = None;
                self.blocks.clear();
                self.partial_usage = None;
                self.handoff.release();
                self.voided_by = None;
                self.added.clear();
                self.results.clear();
                self.guard.reset();
                emit(LoopEvent::Transition(if non_streaming {
                    Transition::NonStreamingFallback
                } else {
                    Transition::StreamRetry
                }));
            }
            ModelEvent::Retry {
                attempt,
                delay,
                reason,
            } => emit(LoopEvent::Retry {
                attempt,
                delay,
                reason,
            }),
            ModelEvent::Idle { silent_for } => emit(LoopEvent::Idle { silent_for }),
            ModelEvent::Done {
                message,
                block_status,
            } => {
                self.on_done(&message, &block_status);
                emit(LoopEvent::Assistant(message.clone()));
                if committed(&message) {
                    emit(LoopEvent::History(HistoryEvent::Response(Box::new(
                        message.clone(),
                    ))));
                }
                self.done = Some(message);
                return false;
            }
        }
        true
    }

    /// Usage bookkeeping and the hand-off's release points.
    fn on_stream_event(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::MessageStart { message } => {
                self.partial_usage = Some(message.usage.clone());
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                // A later block started: the held tool_use was not the last.
                if let Some(block) = self.handoff.release_before(*index) {
                    self.start(&block, false);
                }
                self.partial_text = content_block
                    .as_text()
                    .map(|text| (*index, text.to_owned()));
            }
            StreamEvent::ContentBlockDelta {
                index,
                delta: ContentDelta::Text { text },
            } => {
                if let Some((at, partial)) = &mut self.partial_text
                    && *at == *index
                {
                    partial.push_str(text);
                }
            }
            StreamEvent::MessageDelta(delta) => {
                if let (Some(usage), Some(update)) = (&mut self.partial_usage, &delta.usage) {
                    usage.apply_delta(update);
                }
                match &delta.stop_reason {
                    None | Some(StopReason::MaxTokens) => {}
                    Some(reason) => {
                        if incomplete(reason) {
                            self.voided_by = Some(reason.clone());
                        }
                        for block in self.handoff.release() {
                            self.start(&block, false);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The response completed: the held block goes (truncated if cut), and tool_uses that
    /// never completed (left open by a cut) still get calls, so they get answers.
    fn on_done(&mut self, message: &Message, block_status: &[BlockStatus]) {
        let cut = message.stop_reason == Some(StopReason::MaxTokens);
        if let Some(reason) = message
            .stop_reason
            .as_ref()
            .filter(|reason| incomplete(reason))
        {
            self.voided_by = Some(reason.clone());
        }
        let held = self.handoff.release();
        let last = held.len().saturating_sub(1);
        for (n, block) in held.iter().enumerate() {
            // Only the response's last block can be the one max_tokens cut.
            self.start(block, cut && n == last);
        }
        for (index, block) in message.content.iter().enumerate() {
            if let Some(tool_use) = block.as_tool_use()
                && !self.added.contains(&tool_use.id)
            {
                let status = block_status
                    .get(index)
                    .cloned()
                    .unwrap_or(BlockStatus::Truncated { raw_input: None });
                let completed = CompletedBlock {
                    index,
                    block: block.clone(),
                    status,
                };
                self.start(&completed, true);
            }
        }
    }

    fn on_tool_event(&mut self, event: ExecutorEvent, emit: &impl Fn(LoopEvent)) {
        if let ExecutorEvent::Completed(completed) = &event {
            self.results.push(completed.as_ref().clone());
        }
        emit(LoopEvent::Tool(event));
    }

    /// The user aborted: what ran is kept, unfinished calls end as interrupted.
    async fn abort(mut self, emit: &impl Fn(LoopEvent)) -> CallEnd {
        let during_tools = !self.executor.is_idle() || self.handoff.is_holding();
        for block in self.handoff.release() {
            self.start(&block, false);
        }
        // The executor's parent token is cancelled: unfinished calls end as interrupted.
        for event in self.executor.drain().await {
            self.on_tool_event(event, emit);
        }
        // The text streaming when the user stopped it is kept, as far as it got.
        if self.done.is_none()
            && let Some((index, text)) = self.partial_text.take()
            && !text.trim().is_empty()
        {
            self.blocks.push(CompletedBlock {
                index,
                block: protocol::ContentBlock::text(text.trim_end()),
                status: BlockStatus::Truncated { raw_input: None },
            });
        }
        // Keep only blocks whose tool_uses (if any) have results.
        let added = &self.added;
        self.blocks.retain(|block| {
            block
                .block
                .as_tool_use()
                .is_none_or(|tool_use| added.contains(&tool_use.id))
        });
        let partial_usage = if self.done.is_none() {
            self.partial_usage
        } else {
            None
        };
        CallEnd::Aborted(Box::new(Aborted {
            reported: self.done.as_ref().is_some_and(committed),
            message: self.done,
            blocks: self.blocks,
            results: self.results,
            during_tools,
            partial_usage,
        }))
    }

    /// The stream ended and every tool finished.
    fn finish(self) -> CallEnd {
        let Some(message) = self.done else {
            return CallEnd::Failed(ended_without_response());
        };
        CallEnd::Done(Box::new(Responded {
            reported: committed(&message),
            message,
            results: self.results,
            repeat_stop: self.guard.stop,
            repeat_notes: self.guard.notes,
            repeats: self.guard.current,
        }))
    }
}

/// The repeated-call guard of one response: counts each call signature's consecutive turns.
struct RepeatGuard<'a> {
    /// Counts of the previous turn.
    previous: &'a HashMap<String, u32>,
    /// Counts of this turn.
    current: HashMap<String, u32>,
    /// Corrective notes to send with this turn's results.
    notes: Vec<String>,
    /// Whether a call reached the stop count.
    stop: bool,
    note_at: u32,
    stop_at: u32,
}

impl<'a> RepeatGuard<'a> {
    fn new(previous: &'a HashMap<String, u32>, note_at: u32, stop_at: u32) -> Self {
        Self {
            previous,
            current: HashMap::new(),
            notes: Vec::new(),
            stop: false,
            note_at,
            stop_at,
        }
    }

    /// Counts `call`; refuses it at the stop count, adds a note at the note count.
    fn check(&mut self, call: &mut ToolCall) {
        // Calls that cannot run count too: a model repeating a broken call must also stop.
        let previous = self.previous;
        let count = *self
            .current
            .entry(signature(&call.name, &call.input))
            .or_insert_with_key(|key| previous.get(key).copied().unwrap_or(0) + 1);
        if count >= self.stop_at {
            self.stop = true;
            if call.input_problem.is_some() {
                return;
            }
            call.input_problem = Some(InputProblem::Rejected {
                reason: format!(
                    "Error: this exact {} call was made {count} times in a row; it was not run and the run stops here.",
                    call.name
                ),
            });
        } else if count == self.note_at {
            self.notes.push(format!(
                "Note: you have made this exact {} call with the same input {count} times in a row and got the same result each time. Do not repeat it; try a different approach.",
                call.name
            ));
        }
    }

    /// Forgets this turn's counts (the response was dropped).
    fn reset(&mut self) {
        self.current.clear();
        self.notes.clear();
        self.stop = false;
    }
}

/// A tool call's identity for the repeated-call guard: name and canonical JSON input (keys
/// sorted at every level).
fn signature(name: &str, input: &Value) -> String {
    format!("{name} {}", protocol::canonical_json(input))
}

/// Reports tools whose response was dropped after they had started (their side effects
/// stay).
fn report_discarded(discarded: &[executor::Discarded], emit: &impl Fn(LoopEvent)) {
    let finished: Vec<(String, String)> = discarded
        .iter()
        .filter(|tool| tool.had_started)
        .map(|tool| (tool.name.clone(), tool.tool_use_id.to_string()))
        .collect();
    if !finished.is_empty() {
        emit(LoopEvent::DiscardedTools { tools: finished });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::signature;

    #[test]
    fn signatures_ignore_key_order() {
        assert_eq!(
            signature(
                "Read",
                &json!({"file_path": "/w/a.txt", "limit": 10, "opts": {"b": 1, "a": 2}})
            ),
            signature(
                "Read",
                &json!({"opts": {"a": 2, "b": 1}, "limit": 10, "file_path": "/w/a.txt"})
            )
        );
        assert_ne!(
            signature("Read", &json!({"file_path": "a"})),
            signature("Read", &json!({"file_path": "b"}))
        );
    }
}
