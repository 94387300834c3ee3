//! A scripted model for `loop_core` ([`ScriptedModel`] answering each request with a
//! [`Reply`] built step by step: stream events, sleeps, failures), probe tools that log when
//! each call starts and ends ([`Probe`]), no-op collaborators and a [`Deps`] builder: what the
//! loop's tests, its benchmark and the session's history properties share.
//!
//! Test support: a lock poisoned by a panicking test is that test's failure, so locks are
//! taken with `unwrap` here.
#![allow(clippy::unwrap_used, clippy::large_enum_variant)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use context::{FileSource, NoFiles, ResultStore, Summarizer, SummaryFuture, SummaryRequest};
use executor::{AllowAll, Tool, ToolContext, ToolFuture, ToolOutput, Workspace};
use loop_core::{
    Deps, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, NoStopHook, StopHook,
};
use protocol::{
    BlockStatus, CompletedBlock, ContentBlock, ContentDelta, CreateMessageRequest, Message,
    MessageDelta, StopReason, StreamEvent, TextBlock, ToolUseBlock, ToolUseId, Usage,
};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// (tool_use id, start, end) of each probe call.
pub type ProbeLog = Arc<Mutex<Vec<(String, Instant, Option<Instant>)>>>;

/// One step of a scripted response.
#[derive(Clone, Debug)]
pub enum Step {
    /// A model event.
    Event(ModelEvent),
    /// A pause.
    Sleep(Duration),
    /// The stream fails with this error.
    Fail(ModelError),
}

/// A scripted response.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    /// The steps, in order.
    pub steps: Vec<Step>,
    content: Vec<ContentBlock>,
    statuses: Vec<BlockStatus>,
}

impl Reply {
    /// A reply that has started (`message_start`), with no block yet.
    pub fn new() -> Self {
        let message = message(Vec::new(), None);
        Self {
            steps: vec![Step::Event(ModelEvent::Stream(StreamEvent::MessageStart {
                message: Box::new(message),
            }))],
            ..Self::default()
        }
    }

    /// A reply that fails at once with `error`.
    pub fn error(error: ModelError) -> Self {
        Self {
            steps: vec![Step::Fail(error)],
            ..Self::default()
        }
    }

    /// Pauses `ms` milliseconds.
    pub fn sleep(mut self, ms: u64) -> Self {
        self.steps.push(Step::Sleep(Duration::from_millis(ms)));
        self
    }

    fn start(&mut self, block: ContentBlock) -> usize {
        let index = self.content.len();
        self.steps.push(Step::Event(ModelEvent::Stream(
            StreamEvent::ContentBlockStart {
                index,
                content_block: Box::new(block.clone()),
            },
        )));
        index
    }

    fn stop(&mut self, index: usize, block: ContentBlock) {
        self.steps.push(Step::Event(ModelEvent::Stream(
            StreamEvent::ContentBlockStop { index },
        )));
        self.steps
            .push(Step::Event(ModelEvent::BlockComplete(CompletedBlock {
                index,
                block: block.clone(),
                status: BlockStatus::Complete,
            })));
        self.content.push(block);
        self.statuses.push(BlockStatus::Complete);
    }

    /// A complete text block, its text in one delta.
    pub fn text(mut self, text: &str) -> Self {
        let index = self.start(ContentBlock::text(""));
        self.steps.push(Step::Event(ModelEvent::Stream(
            StreamEvent::ContentBlockDelta {
                index,
                delta: ContentDelta::Text { text: text.into() },
            },
        )));
        self.stop(index, ContentBlock::Text(TextBlock::new(text)));
        self
    }

    /// A text block whose only delta comes after `ms` of silence.
    pub fn text_slow(mut self, text: &str, ms: u64) -> Self {
        let index = self.start(ContentBlock::text(""));
        self.steps.push(Step::Sleep(Duration::from_millis(ms)));
        self.steps.push(Step::Event(ModelEvent::Stream(
            StreamEvent::ContentBlockDelta {
                index,
                delta: ContentDelta::Text { text: text.into() },
            },
        )));
        self.stop(index, ContentBlock::Text(TextBlock::new(text)));
        self
    }

    /// A complete tool_use whose input arrives in one fragment.
    pub fn tool(self, id: &str, name: &str, input: Value) -> Self {
        self.tool_slow(id, name, input, 1, 0)
    }

    /// A tool_use whose input arrives in `parts` fragments, `gap_ms` apart.
    pub fn tool_slow(
        mut self,
        id: &str,
        name: &str,
        input: Value,
        parts: usize,
        gap_ms: u64,
    ) -> Self {
        let block = tool_use(id, name, json!({}));
        let index = self.start(block);
        let text = input.to_string();
        let size = text.len().div_ceil(parts.max(1));
        for chunk in text.as_bytes().chunks(size.max(1)) {
            if gap_ms > 0 {
                self.steps.push(Step::Sleep(Duration::from_millis(gap_ms)));
            }
            self.steps.push(Step::Event(ModelEvent::Stream(
                StreamEvent::ContentBlockDelta {
                    index,
                    delta: ContentDelta::InputJson {
                        partial_json: String::from_utf8(chunk.to_vec()).unwrap(),
                    },
                },
            )));
        }
        self.stop(index, tool_use(id, name, input));
        self
    }

    /// A tool_use cut off by max_tokens: started, part of its input, never stopped.
    pub fn cut_tool(mut self, id: &str, name: &str, partial: &str) -> Self {
        let index = self.start(tool_use(id, name, json!({})));
        self.steps.push(Step::Event(ModelEvent::Stream(
            StreamEvent::ContentBlockDelta {
                index,
                delta: ContentDelta::InputJson {
                    partial_json: partial.into(),
                },
            },
        )));
        self.content.push(tool_use(id, name, json!({})));
        self.statuses.push(BlockStatus::Truncated {
            raw_input: Some(partial.into()),
        });
        self
    }

    /// Ends the message with `reason` (`message_delta`, `message_stop`, done).
    pub fn end(mut self, reason: StopReason) -> Self {
        self.steps
            .push(Step::Event(ModelEvent::Stream(StreamEvent::MessageDelta(
                Box::new(MessageDelta {
                    stop_reason: Some(reason.clone()),
                    ..MessageDelta::default()
                }),
            ))));
        self.steps
            .push(Step::Event(ModelEvent::Stream(StreamEvent::MessageStop)));
        let message = message(self.content.clone(), Some(reason));
        self.steps.push(Step::Event(ModelEvent::Done {
            message,
            block_status: self.statuses.clone(),
        }));
        self
    }
}

/// A tool_use block.
pub fn tool_use(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input,
        cache_control: None,
        extra: Default::default(),
    })
}

/// A complete assistant message with `content`, as a response ends.
pub fn message(content: Vec<ContentBlock>, stop_reason: Option<StopReason>) -> Message {
    Message {
        id: "msg_scripted".into(),
        kind: "message".into(),
        role: protocol::Role::Assistant,
        model: "claude-test".into(),
        content,
        stop_reason,
        stop_sequence: None,
        stop_details: None,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            ..Usage::default()
        },
        extra: Default::default(),
    }
}

type Script = dyn Fn(usize, &CreateMessageRequest) -> Reply + Send + Sync;

/// A model that answers request N with `script(N, request)` (N from 0) and records requests.
pub struct ScriptedModel {
    script: Box<Script>,
    /// Skip the realistic usage (serializing each request): for benchmarks, where the model's
    /// own cost must not count as loop overhead.
    fast: bool,
    /// What [`ModelClient::tool_use_final_at_block_stop`] says (`true` unless
    /// [`ScriptedModel::calls_final_at_stop`] made it an OpenAI-compatible server's).
    final_at_block_stop: bool,
    /// Every request received, and when.
    pub requests: Mutex<Vec<(CreateMessageRequest, Instant)>>,
    /// When each response's stream ended.
    pub stream_done: Mutex<Vec<Instant>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("requests", &self.request_count())
            .finish_non_exhaustive()
    }
}

impl ScriptedModel {
    /// A model answering request N (from 0) with `script(N, request)`.
    pub fn new(
        script: impl Fn(usize, &CreateMessageRequest) -> Reply + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            fast: false,
            final_at_block_stop: true,
            script: Box::new(script),
            requests: Mutex::new(Vec::new()),
            stream_done: Mutex::new(Vec::new()),
        })
    }

    /// [`ScriptedModel::new`] without the realistic usage: for benchmarks.
    pub fn fast(
        script: impl Fn(usize, &CreateMessageRequest) -> Reply + Send + Sync + 'static,
    ) -> Arc<Self> {
        let mut model = Self::new(script);
        if let Some(model) = Arc::get_mut(&mut model) {
            model.fast = true;
        }
        model
    }

    /// [`ScriptedModel::from_list`] as the loop sees an OpenAI-compatible server: its tool
    /// calls are final only at the response's stop_reason
    /// ([`ModelClient::tool_use_final_at_block_stop`] is false).
    pub fn calls_final_at_stop(replies: Vec<Reply>) -> Arc<Self> {
        let mut model = Self::from_list(replies);
        if let Some(model) = Arc::get_mut(&mut model) {
            model.final_at_block_stop = false;
        }
        model
    }

    /// A model answering with `replies` in order (and failing past the end).
    pub fn from_list(replies: Vec<Reply>) -> Arc<Self> {
        Self::new(move |n, _| {
            replies
                .get(n)
                .cloned()
                .unwrap_or_else(|| panic!("no scripted reply for request {n}"))
        })
    }

    /// How many requests it has received.
    pub fn request_count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// Request `n` (from 0).
    pub fn request(&self, n: usize) -> CreateMessageRequest {
        self.requests.lock().unwrap()[n].0.clone()
    }
}

/// The [`ModelClient`] face of a [`ScriptedModel`].
#[derive(Debug)]
pub struct Client(pub Arc<ScriptedModel>);

impl ModelClient for Client {
    fn stream(&self, request: &ModelRequest<'_>, cancel: CancellationToken) -> ModelStream {
        // Benchmarks skip the copy: the model's own cost is not loop overhead.
        let request = if self.0.fast {
            CreateMessageRequest::new(request.model, request.max_tokens, Vec::new())
        } else {
            request.to_owned_request()
        };
        let n = {
            let mut requests = self.0.requests.lock().unwrap();
            requests.push((request.clone(), Instant::now()));
            requests.len() - 1
        };
        let mut reply = (self.0.script)(n, &request);
        // Report usage as the API would: the whole request counts as input.
        let input_tokens = if self.0.fast {
            100
        } else {
            serde_json::to_string(&request).map_or(0, |json| json.len() as u64 / 4)
        };
        for step in &mut reply.steps {
            if let Step::Event(ModelEvent::Done { message, .. }) = step {
                message.usage.input_tokens = input_tokens;
            }
        }
        let model = Arc::clone(&self.0);
        Box::pin(async_stream(reply, cancel, model))
    }

    fn tool_use_final_at_block_stop(&self) -> bool {
        self.0.final_at_block_stop
    }
}

fn async_stream(
    reply: Reply,
    cancel: CancellationToken,
    model: Arc<ScriptedModel>,
) -> impl futures_core::Stream<Item = Result<ModelEvent, ModelError>> + Send {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for step in reply.steps {
            match step {
                Step::Sleep(duration) => {
                    tokio::select! {
                        () = tokio::time::sleep(duration) => {}
                        () = cancel.cancelled() => return,
                    }
                }
                Step::Event(event) => {
                    let done = matches!(event, ModelEvent::Done { .. });
                    if sender.send(Ok(event)).is_err() {
                        return;
                    }
                    if done {
                        model.stream_done.lock().unwrap().push(Instant::now());
                    }
                }
                Step::Fail(error) => {
                    let _ = sender.send(Err(error));
                    return;
                }
            }
        }
    });
    tokio_stream_from(receiver)
}

fn tokio_stream_from<T: Send + 'static>(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures_core::Stream<Item = T> + Send {
    futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

/// A tool that records (id, start, end) and sleeps `ms` from its input.
pub struct Probe {
    /// Its name.
    pub name: &'static str,
    /// Whether calls may run together.
    pub safe: bool,
    /// Its input schema.
    pub schema: Value,
    /// Where calls are logged.
    pub log: ProbeLog,
    /// Bytes of filler after the answer (a result large enough to count in the context).
    pub padding: usize,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("name", &self.name)
            .field("safe", &self.safe)
            .finish_non_exhaustive()
    }
}

impl Probe {
    /// A probe named `name` logging to `log`.
    pub fn tool(name: &'static str, safe: bool, log: &ProbeLog) -> Arc<dyn Tool> {
        Arc::new(Self {
            name,
            safe,
            schema: json!({"type": "object"}),
            log: Arc::clone(log),
            padding: 0,
        })
    }

    /// A concurrency-safe probe named `name` whose answers carry `padding` bytes of filler,
    /// logging nowhere anyone reads.
    pub fn padded(name: &'static str, padding: usize) -> Arc<dyn Tool> {
        Arc::new(Self {
            name,
            safe: true,
            schema: json!({"type": "object"}),
            log: log(),
            padding,
        })
    }
}

impl Tool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "probe"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        self.safe
    }
    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let slot = {
                let mut log = self.log.lock().unwrap();
                log.push((context.tool_use_id.to_string(), Instant::now(), None));
                log.len() - 1
            };
            let ms = input["ms"].as_u64().unwrap_or(0);
            // A zero sleep would still wait for the next 1 ms timer tick.
            if ms > 0 {
                tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {}
                () = context.cancel.cancelled() => return Err(executor::ToolError::Killed("cancelled".into())),
                }
            }
            self.log.lock().unwrap()[slot].2 = Some(Instant::now());
            Ok(ToolOutput::text(format!(
                "{} {} ok{}",
                self.name,
                context.tool_use_id,
                " x".repeat(self.padding / 2)
            )))
        })
    }
}

/// A summarizer that answers at once with a fixed summary.
#[derive(Debug)]
pub struct NoSummary;
impl Summarizer for NoSummary {
    fn summarize(&self, _request: SummaryRequest) -> SummaryFuture<'_> {
        Box::pin(std::future::ready(Ok(
            "Summary of the earlier work.".to_owned()
        )))
    }
}

/// A summarizer that counts its calls.
#[derive(Debug, Default)]
pub struct CountingSummarizer(pub AtomicUsize);
impl Summarizer for CountingSummarizer {
    fn summarize(&self, _request: SummaryRequest) -> SummaryFuture<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(Ok(
            "Summary: files read, edits made.".to_owned()
        )))
    }
}

/// A result store that says it stored each result (and keeps nothing).
#[derive(Debug, Default)]
pub struct NullStore;
impl ResultStore for NullStore {
    fn persist(&mut self, id: &ToolUseId, _text: &str) -> Result<String, String> {
        Ok(format!("/tmp/tool-results/{id}.txt"))
    }
}

/// The loop's collaborators around `model` and `tools`: everything allowed, no stop hook.
pub fn deps(model: Arc<ScriptedModel>, tools: Vec<Arc<dyn Tool>>) -> Deps {
    deps_with(model, tools, Arc::new(NoStopHook), Arc::new(NoSummary))
}

/// [`deps`] with a stop hook and a summarizer.
pub fn deps_with(
    model: Arc<ScriptedModel>,
    tools: Vec<Arc<dyn Tool>>,
    stop_hook: Arc<dyn StopHook>,
    summarizer: Arc<dyn Summarizer>,
) -> Deps {
    Deps {
        model: Arc::new(Client(model)),
        tools,
        permissions: Arc::new(AllowAll),
        summarizer,
        result_store: Box::new(NullStore),
        files: Arc::new(NoFiles) as Arc<dyn FileSource>,
        stop_hook,
        workspace: Arc::new(Workspace::default()),
        tool_source: None,
        fork_point: None,
        attachments: None,
        spend: None,
    }
}

/// The tool_result ids and texts of a request's last user message.
pub fn last_results(request: &protocol::CreateMessageRequest) -> Vec<(String, String)> {
    results_of(request.messages.last().unwrap())
}

/// The tool_result ids and texts of `message`.
pub fn results_of(message: &protocol::MessageParam) -> Vec<(String, String)> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult(result) => Some((
                result.tool_use_id.to_string(),
                match &result.content {
                    protocol::ToolResultContent::Text(text) => text.clone(),
                    other => format!("{other:?}"),
                },
            )),
            _ => None,
        })
        .collect()
}

/// An empty probe log.
pub fn log() -> ProbeLog {
    Arc::new(Mutex::new(Vec::new()))
}
