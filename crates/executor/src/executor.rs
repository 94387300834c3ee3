//! The streaming tool executor: admission, ordering, abort.
//!
//! Guarantees (each is tested):
//! 1. Admission: a call starts iff nothing is executing, or it is concurrency-safe and every
//!    executing call is too. The queue is scanned in add order and the scan stops at the first
//!    unsafe call that cannot start, so a later call never overtakes an earlier unsafe one.
//! 2. Every added call gets exactly one [`ExecutorEvent::Completed`], and those events come
//!    strictly in add order.
//! 3. A call that cannot be run (unknown tool, unusable input, schema violation, permission
//!    denial) is answered with an error result and never started.
//! 4. When the [`AbortPolicy`] fires, finished results stay as they are, running siblings are
//!    cancelled, queued and later-added ones never start, and each of them gets an error result
//!    naming the failing call.
//! 5. When the parent token is cancelled (user abort), nothing new starts and every call that
//!    did not finish gets an "interrupted by user" result.
//! 6. Dropping the executor cancels every call still running.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use protocol::{ToolResultBlock, ToolUseId};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::permission::{CanUseTool, PermissionDecision};
use crate::schema;
use crate::tool::{
    InputProblem, ProgressSender, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolProgress,
    Workspace,
};

/// Which failures cancel the other calls of the same turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum AbortPolicy {
    /// Any error result of a call that ran cancels the siblings (Claude Code's behaviour).
    /// Calls rejected before running (unknown tool, bad input, permission denied) never
    /// cascade: the model can fix them.
    OnAnyError,
    /// Only fatal failures cancel: the tool could not run, timed out or was killed. A command
    /// that merely exits non-zero does not cascade; cascading on benign exits makes models
    /// flail (public report anthropics/claude-code#22264).
    #[default]
    OnFatalError,
    /// Failures never cancel siblings.
    Never,
}

impl AbortPolicy {
    /// Whether a call that ended with `outcome` cancels its siblings.
    pub fn cascades(self, outcome: &Outcome) -> bool {
        match self {
            Self::Never => false,
            Self::OnFatalError => outcome.is_fatal(),
            Self::OnAnyError => outcome.is_error() && outcome.ran(),
        }
    }
}

/// Settings of a [`StreamingToolExecutor`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// Which failures cancel siblings. Default [`AbortPolicy::OnFatalError`].
    pub policy: AbortPolicy,
    /// Longest a call may run when its tool sets no timeout of its own; `None` for no limit.
    /// Default `None`.
    pub default_timeout: Option<Duration>,
    /// How long a cancelled call gets to clean up (kill its processes) before its future is
    /// dropped. Default 2 s.
    pub cancel_grace: Duration,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            policy: AbortPolicy::default(),
            default_timeout: None,
            cancel_grace: Duration::from_secs(2),
        }
    }
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The tool ran and succeeded.
    Success,
    /// The tool ran and reports a failure (a command's non-zero exit). Not fatal.
    ToolError,
    /// The tool rejected its input ([`ToolError::InvalidInput`]). Not fatal.
    InvalidInput,
    /// The tool could not run ([`ToolError::CouldNotRun`], or it panicked). Fatal.
    CouldNotRun,
    /// The tool's work was killed ([`ToolError::Killed`]). Fatal.
    Killed,
    /// The call ran past its timeout and was stopped. Fatal.
    TimedOut {
        /// The timeout that expired.
        after: Duration,
    },
    /// No tool has the name the model used.
    UnknownTool,
    /// The input JSON was invalid or cut off; the call was not run.
    UnusableInput,
    /// The input does not match the tool's schema; the call was not run.
    SchemaViolation,
    /// The tool_use id repeats the id of an earlier call of the same turn; the call was not
    /// run (the history's normalization drops the repeat before the next request).
    DuplicateId,
    /// The permission gate denied the call.
    PermissionDenied,
    /// The caller rejected the call before it ran ([`crate::InputProblem::Rejected`]).
    Rejected,
    /// A sibling's failure stopped this call: cancelled while running, or never started.
    SiblingFailed {
        /// The call whose failure cascaded.
        failed: ToolUseId,
        /// Its tool's name.
        failed_tool: String,
        /// Whether this call had started.
        was_running: bool,
    },
    /// The user aborted the turn before this call finished.
    Interrupted,
}

impl Outcome {
    /// Whether the tool_result is an error.
    pub fn is_error(&self) -> bool {
        !matches!(self, Self::Success)
    }

    /// Whether the failure is fatal: the tool could not run, timed out or was killed.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::CouldNotRun | Self::Killed | Self::TimedOut { .. }
        )
    }

    /// Whether the tool itself ran (as opposed to a call rejected before running, or stopped
    /// by an abort before it finished).
    pub fn ran(&self) -> bool {
        matches!(
            self,
            Self::Success
                | Self::ToolError
                | Self::InvalidInput
                | Self::CouldNotRun
                | Self::Killed
                | Self::TimedOut { .. }
        )
    }

    /// Whether the call was stopped by an abort (user or sibling) rather than failing itself.
    pub fn is_abort(&self) -> bool {
        matches!(self, Self::SiblingFailed { .. } | Self::Interrupted)
    }
}

/// How a task's ending is reported ([`StreamingToolExecutor::judge`]).
struct Judged {
    outcome: Outcome,
    content: protocol::ToolResultContent,
    is_error: bool,
    /// The input of a denied call (for the denial event).
    denied_input: Option<Value>,
    structured: Option<Value>,
    notes: Vec<String>,
}

/// A finished call: its tool_result and how it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletedTool {
    /// Position in add order.
    pub index: usize,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The result to send back to the model.
    pub result: ToolResultBlock,
    /// How the call ended.
    pub outcome: Outcome,
    /// How long it ran; `None` when it never started.
    pub duration: Option<Duration>,
    /// The tool's structured result ([`crate::ToolOutput::structured`]), when it ran.
    pub structured: Option<Value>,
    /// Lines for the user ([`crate::ToolOutput::notes`]).
    pub notes: Vec<String>,
}

/// What the executor reports.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ExecutorEvent {
    /// A call was admitted and started.
    Started {
        /// Position in add order.
        index: usize,
        /// The tool_use id.
        tool_use_id: ToolUseId,
        /// The tool's name.
        name: String,
    },
    /// A running call reported progress.
    Progress {
        /// Position in add order.
        index: usize,
        /// The tool_use id.
        tool_use_id: ToolUseId,
        /// The report.
        progress: ToolProgress,
    },
    /// The permission gate denied a call (its error result follows in `Completed`).
    PermissionDenied {
        /// Position in add order.
        index: usize,
        /// The tool_use id.
        tool_use_id: ToolUseId,
        /// The tool's name.
        name: String,
        /// The input the model gave.
        input: Value,
        /// The gate's reason.
        reason: String,
    },
    /// A call finished before an earlier one did: its [`ExecutorEvent::Completed`] waits for
    /// theirs (add order), and this says at once that it is done, for a display that shows
    /// each call's own state while the batch runs. Sent only for such out-of-order ends.
    Finished {
        /// Position in add order.
        index: usize,
        /// The tool_use id.
        tool_use_id: ToolUseId,
        /// Whether the result is an error.
        is_error: bool,
        /// The result's first non-blank line of text, at most [`PREVIEW_CHARS`] characters.
        preview: String,
    },
    /// A call finished; these come strictly in add order.
    Completed(Box<CompletedTool>),
}

/// The length of [`ExecutorEvent::Finished`]'s preview, in characters: a terminal row.
pub const PREVIEW_CHARS: usize = 200;

/// A call dropped by [`StreamingToolExecutor::discard`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discarded {
    /// The tool_use id.
    pub tool_use_id: ToolUseId,
    /// The tool's name.
    pub name: String,
    /// Whether it had started (its side effects, if any, happened or were cut short).
    pub had_started: bool,
    /// Whether it had finished (its result was computed but not handed out).
    pub had_finished: bool,
}

/// A message from a call's task to the executor.
#[derive(Debug)]
pub(crate) struct TaskMessage {
    pub(crate) generation: u64,
    pub(crate) index: usize,
    pub(crate) kind: TaskKind,
}

#[derive(Debug)]
pub(crate) enum TaskKind {
    Progress(ToolProgress),
    Finished(TaskOutcome),
}

/// How a call's task ended, before the executor turns it into an [`Outcome`].
#[derive(Debug)]
pub(crate) enum TaskOutcome {
    Ran(Result<ToolOutput, ToolError>),
    /// The gate refused; the input comes back for the denial event.
    Denied {
        reason: String,
        input: Value,
    },
    TimedOut(Duration),
    Cancelled,
    Panicked,
}

/// Where one added call stands.
enum Slot {
    /// Waiting for admission.
    Queued { tool: Arc<dyn Tool>, safe: bool },
    /// Admitted; its task runs.
    Running { safe: bool, started: Instant },
    /// Finished, result not yet handed out.
    Done(Box<CompletedTool>),
    /// Result handed out.
    Emitted,
}

struct Entry {
    call: ToolCall,
    slot: Slot,
}

/// The call whose failure fired the abort policy.
#[derive(Clone, Debug)]
struct SiblingFailure {
    id: ToolUseId,
    name: String,
}

/// Runs tool calls as their tool_use blocks complete: concurrency-safe calls together, others
/// alone, results in the model's order.
///
/// Drive it by awaiting [`StreamingToolExecutor::next_event`] (typically in a `select!` with
/// the model stream) and feed it with [`StreamingToolExecutor::add_tool`] as blocks complete.
/// Calls run on tokio tasks, so they make progress between polls; admission of queued calls
/// happens when a call is added and when a running one finishes.
///
/// ```
/// use std::sync::Arc;
/// use executor::{AllowAll, ExecutorConfig, ExecutorEvent, StreamingToolExecutor, Tool,
///     ToolCall, ToolContext, ToolFuture, ToolOutput, Workspace};
/// use serde_json::{json, Value};
/// use tokio_util::sync::CancellationToken;
///
/// struct Echo(Value);
/// impl Tool for Echo {
///     fn name(&self) -> &str { "Echo" }
///     fn description(&self) -> &str { "Repeats its text" }
///     fn input_schema(&self) -> &Value { &self.0 }
///     fn is_concurrency_safe(&self, _: &Value) -> bool { true }
///     fn call(&self, input: Value, _: ToolContext) -> ToolFuture<'_> {
///         Box::pin(async move { Ok(ToolOutput::text(input["text"].as_str().unwrap_or_default())) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let schema = json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]});
/// let mut executor = StreamingToolExecutor::new(
///     vec![Arc::new(Echo(schema)) as Arc<dyn Tool>],
///     Arc::new(AllowAll),
///     ExecutorConfig::default(),
///     CancellationToken::new(),
///     Arc::new(Workspace::default()),
/// );
/// executor.add_tool(ToolCall::new("toolu_1", "Echo", json!({"text": "hi"})));
/// executor.add_tool(ToolCall::new("toolu_2", "Echo", json!({})));
/// let mut results = Vec::new();
/// while let Some(event) = executor.next_event().await {
///     if let ExecutorEvent::Completed(done) = event {
///         results.push((done.result.is_error, done.outcome));
///     }
/// }
/// assert_eq!(results, [(None, executor::Outcome::Success), (Some(true), executor::Outcome::SchemaViolation)]);
/// # }
/// ```
pub struct StreamingToolExecutor {
    tools: Vec<Arc<dyn Tool>>,
    gate: Arc<dyn CanUseTool>,
    config: ExecutorConfig,
    workspace: Arc<Workspace>,
    parent: CancellationToken,
    /// Child of `parent` shared by this attempt's calls; cancelled by the abort policy.
    siblings: CancellationToken,
    entries: Vec<Entry>,
    /// The tool_use ids of `entries`, to answer a repeated id without running it.
    ids: HashSet<ToolUseId>,
    /// Next index whose Completed event is due.
    next_emit: usize,
    pending: VecDeque<ExecutorEvent>,
    sender: mpsc::UnboundedSender<TaskMessage>,
    receiver: mpsc::UnboundedReceiver<TaskMessage>,
    /// Bumped by `discard`: messages of earlier attempts are ignored.
    generation: u64,
    aborted_by: Option<SiblingFailure>,
    user_abort_handled: bool,
    /// Calls running, and how many of them are not concurrency-safe.
    running: usize,
    running_unsafe: usize,
    /// No call before this index is queued: the admission scan starts here.
    first_queued: usize,
}

impl std::fmt::Debug for StreamingToolExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamingToolExecutor")
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|tool| tool.name())
                    .collect::<Vec<_>>(),
            )
            .field("config", &self.config)
            .field("calls", &self.entries.len())
            .field("next_emit", &self.next_emit)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Drop for StreamingToolExecutor {
    fn drop(&mut self) {
        // Nobody will read the results: stop the work.
        self.siblings.cancel();
    }
}

impl StreamingToolExecutor {
    /// An executor for one turn.
    ///
    /// `tools` are the tools the model may call; `gate` is asked before each call; `parent`
    /// is the turn's token (cancelling it is a user abort); `workspace` is handed to every
    /// call.
    pub fn new(
        tools: Vec<Arc<dyn Tool>>,
        gate: Arc<dyn CanUseTool>,
        config: ExecutorConfig,
        parent: CancellationToken,
        workspace: Arc<Workspace>,
    ) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Self {
            tools,
            gate,
            config,
            workspace,
            siblings: parent.child_token(),
            parent,
            entries: Vec::new(),
            ids: HashSet::new(),
            next_emit: 0,
            pending: VecDeque::new(),
            sender,
            receiver,
            generation: 0,
            aborted_by: None,
            user_abort_handled: false,
            running: 0,
            running_unsafe: 0,
            first_queued: 0,
        }
    }

    /// Calls added so far in this attempt.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no call was added in this attempt.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether every added call's result has been handed out (nothing to wait for).
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.next_emit == self.entries.len()
    }

    /// Calls currently running.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Adds a call; it starts at once if admission allows. Returns its index in add order.
    /// Must be called from within a tokio runtime (calls run on tasks).
    pub fn add_tool(&mut self, call: ToolCall) -> usize {
        let index = self.entries.len();
        let repeated = !self.ids.insert(call.id.clone());
        let slot = match self.preflight(&call, repeated) {
            Ok((tool, safe)) => Slot::Queued { tool, safe },
            Err((outcome, text)) => {
                Slot::Done(Box::new(self.completed(index, &call, outcome, text, None)))
            }
        };
        tracing::debug!(index, id = %call.id, name = %call.name, queued = matches!(slot, Slot::Queued { .. }), "tool call added");
        self.entries.push(Entry { call, slot });
        self.admit();
        self.flush();
        index
    }

    /// The next event, or `None` when every added call's result has been handed out (more
    /// calls may still be added afterwards).
    ///
    /// # Cancellation safety
    ///
    /// Cancel-safe: dropping the future loses no event; state changes happen only after a
    /// message is received, synchronously.
    pub async fn next_event(&mut self) -> Option<ExecutorEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.next_emit == self.entries.len() {
                return None;
            }
            if self.parent.is_cancelled() && !self.user_abort_handled {
                self.user_abort();
                continue;
            }
            tokio::select! {
                message = self.receiver.recv() => {
                    // The executor holds a sender, so the channel never closes.
                    if let Some(message) = message {
                        self.handle(message);
                    }
                }
                () = self.parent.cancelled(), if !self.user_abort_handled => self.user_abort(),
            }
        }
    }

    /// Waits for every added call and returns all remaining events, in order.
    ///
    /// # Cancellation safety
    ///
    /// Not cancel-safe: events received before the drop are lost. Use
    /// [`StreamingToolExecutor::next_event`] in a `select!`.
    pub async fn drain(&mut self) -> Vec<ExecutorEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next_event().await {
            events.push(event);
        }
        events
    }

    /// Drops this attempt's calls: queued ones never start, running ones are cancelled, and
    /// results not yet handed out are dropped. Used when the response that asked for them is
    /// replaced (a stream retry or a non-streaming fallback). The executor is then ready for
    /// the next attempt's calls, indexed from 0 again.
    pub fn discard(&mut self) -> Vec<Discarded> {
        self.siblings.cancel();
        self.generation += 1;
        let discarded = self
            .entries
            .drain(..)
            .filter(|entry| !matches!(entry.slot, Slot::Emitted))
            .map(|entry| Discarded {
                tool_use_id: entry.call.id,
                name: entry.call.name,
                had_started: matches!(entry.slot, Slot::Running { .. })
                    || matches!(&entry.slot, Slot::Done(done) if done.duration.is_some()),
                had_finished: matches!(entry.slot, Slot::Done(_)),
            })
            .collect();
        self.ids.clear();
        self.next_emit = 0;
        self.first_queued = 0;
        self.running = 0;
        self.running_unsafe = 0;
        self.pending.clear();
        self.aborted_by = None;
        self.siblings = self.parent.child_token();
        discarded
    }

    /// Checks a call before queueing it: abort state, input problems, tool name, schema.
    fn preflight(
        &self,
        call: &ToolCall,
        repeated: bool,
    ) -> Result<(Arc<dyn Tool>, bool), (Outcome, String)> {
        if self.parent.is_cancelled() {
            return Err((Outcome::Interrupted, interrupted_text()));
        }
        if let Some(failure) = &self.aborted_by {
            return Err((
                Outcome::SiblingFailed {
                    failed: failure.id.clone(),
                    failed_tool: failure.name.clone(),
                    was_running: false,
                },
                sibling_text(failure, false),
            ));
        }
        if repeated {
            return Err((
                Outcome::DuplicateId,
                format!(
                    "Error: this {} call repeats the tool_use id {} of an earlier call, so it was not run. Give every call its own id.",
                    call.name, call.id
                ),
            ));
        }
        match &call.input_problem {
            Some(InputProblem::InvalidJson { raw, error }) => {
                let shown: String = raw.chars().take(200).collect();
                return Err((
                    Outcome::UnusableInput,
                    format!(
                        "Error: the input of this {} call (tool_use id {}) is not valid JSON ({error}), so it was not run. Input received: {shown}. Send the call again with a complete JSON object.",
                        call.name, call.id
                    ),
                ));
            }
            Some(InputProblem::Truncated) => {
                return Err((
                    Outcome::UnusableInput,
                    format!(
                        "Error: this {} call was cut off by the output token limit before its input was complete, so it was not run. Split the work into smaller steps.",
                        call.name
                    ),
                ));
            }
            Some(InputProblem::Rejected { reason }) => {
                return Err((Outcome::Rejected, reason.clone()));
            }
            None => {}
        }
        let Some(tool) = self.tools.iter().find(|tool| {
            tool.name() == call.name || tool.aliases().iter().any(|alias| *alias == call.name)
        }) else {
            // The tools the model is offered: a hidden one (kept for old transcripts) is not.
            let names: Vec<&str> = (self.tools.iter())
                .filter(|tool| !tool.hidden())
                .map(|tool| tool.name())
                .collect();
            return Err((
                Outcome::UnknownTool,
                format!(
                    "Error: No such tool available: {}. Available tools: {}",
                    call.name,
                    names.join(", ")
                ),
            ));
        };
        let problems = schema::validate(tool.input_schema(), &call.input);
        if !problems.is_empty() {
            return Err((
                Outcome::SchemaViolation,
                format!(
                    "InputValidationError: {} failed due to the following issue{}:\n{}",
                    call.name,
                    if problems.len() == 1 { "" } else { "s" },
                    problems.join("\n")
                ),
            ));
        }
        let safe = tool.is_concurrency_safe(&call.input);
        Ok((Arc::clone(tool), safe))
    }

    /// Starts every queued call that admission allows, scanning in add order from the first
    /// queued one (amortized O(1) per call: the scan start only moves forward).
    fn admit(&mut self) {
        if self.parent.is_cancelled() {
            return;
        }
        while self
            .entries
            .get(self.first_queued)
            .is_some_and(|entry| !matches!(entry.slot, Slot::Queued { .. }))
        {
            self.first_queued += 1;
        }
        for index in self.first_queued..self.entries.len() {
            let Slot::Queued { safe, .. } = self.entries[index].slot else {
                continue;
            };
            if self.can_start(safe) {
                self.start(index);
                if index == self.first_queued {
                    self.first_queued += 1;
                }
            } else if !safe {
                // A later call must not overtake an unsafe one.
                break;
            } else if self.running_unsafe > 0 {
                // Nothing can start while an unsafe call runs.
                break;
            }
        }
        debug_assert!(
            self.first_queued == self.entries.len() || self.running > 0,
            "queued calls with nothing running"
        );
    }

    /// The admission rule: nothing is executing, or this call and everything executing are
    /// concurrency-safe.
    fn can_start(&self, safe: bool) -> bool {
        self.running == 0 || (safe && self.running_unsafe == 0)
    }

    fn start(&mut self, index: usize) {
        let entry = &mut self.entries[index];
        let started = Instant::now();
        let Slot::Queued { tool, safe } = std::mem::replace(
            &mut entry.slot,
            Slot::Running {
                safe: false,
                started,
            },
        ) else {
            return;
        };
        entry.slot = Slot::Running { safe, started };
        self.running += 1;
        if !safe {
            self.running_unsafe += 1;
        }
        // The task takes the input (no deep copy); the entry keeps the id and the name, all
        // the executor needs of a running call (a denial hands the input back).
        let call = ToolCall {
            id: entry.call.id.clone(),
            name: entry.call.name.clone(),
            input: std::mem::take(&mut entry.call.input),
            input_problem: None,
        };
        let cancel = self.siblings.child_token();
        let context = ToolContext {
            tool_use_id: call.id.clone(),
            cancel: cancel.clone(),
            workspace: Arc::clone(&self.workspace),
            progress: ProgressSender {
                inner: Some((self.sender.clone(), self.generation, index)),
            },
        };
        let timeout = tool.timeout(&call.input).or(self.config.default_timeout);
        let grace = self.config.cancel_grace;
        let gate = Arc::clone(&self.gate);
        let reporter = Reporter {
            sender: self.sender.clone(),
            generation: self.generation,
            index,
            sent: false,
        };
        let span = tracing::info_span!("tool", name = %call.name, id = %call.id);
        self.pending.push_back(ExecutorEvent::Started {
            index,
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
        });
        tokio::spawn(
            async move {
                let outcome = run_call(tool, gate, call, context, timeout, grace).await;
                reporter.finish(outcome);
            }
            .instrument(span),
        );
    }

    fn handle(&mut self, message: TaskMessage) {
        if message.generation != self.generation {
            return;
        }
        let index = message.index;
        let Some(entry) = self.entries.get(index) else {
            return;
        };
        match message.kind {
            TaskKind::Progress(progress) => {
                if matches!(entry.slot, Slot::Running { .. }) {
                    self.pending.push_back(ExecutorEvent::Progress {
                        index,
                        tool_use_id: entry.call.id.clone(),
                        progress,
                    });
                }
            }
            TaskKind::Finished(outcome) => {
                let Slot::Running { started, safe } = entry.slot else {
                    return;
                };
                self.running -= 1;
                if !safe {
                    self.running_unsafe -= 1;
                }
                let duration = Some(started.elapsed());
                // Only the id and name are needed from here on (the input only for a denial
                // event): no clone of the whole call.
                let id = entry.call.id.clone();
                let name = entry.call.name.clone();
                let Judged {
                    outcome,
                    content,
                    is_error,
                    denied_input,
                    structured,
                    notes,
                } = self.judge(&name, outcome);
                if let Some(input) = denied_input {
                    self.pending.push_back(ExecutorEvent::PermissionDenied {
                        index,
                        tool_use_id: id.clone(),
                        name: name.clone(),
                        input,
                        reason: content_text(&content),
                    });
                }
                let cascades = !self.parent.is_cancelled()
                    && self.aborted_by.is_none()
                    && self.config.policy.cascades(&outcome);
                tracing::debug!(index, %id, ?outcome, cascades, "tool call finished");
                let result = ToolResultBlock {
                    tool_use_id: id.clone(),
                    content,
                    is_error: is_error.then_some(true),
                    cache_control: None,
                    extra: Default::default(),
                };
                if index > self.next_emit {
                    self.pending.push_back(ExecutorEvent::Finished {
                        index,
                        tool_use_id: id.clone(),
                        is_error,
                        preview: preview(&result.content),
                    });
                }
                if cascades {
                    self.fire_sibling_abort(SiblingFailure {
                        id,
                        name: name.clone(),
                    });
                }
                self.entries[index].slot = Slot::Done(Box::new(CompletedTool {
                    index,
                    name,
                    result,
                    outcome,
                    duration,
                    structured,
                    notes,
                }));
                self.admit();
                self.flush();
            }
        }
    }

    /// Turns a task's ending into the outcome and the result content.
    fn judge(&self, name: &str, outcome: TaskOutcome) -> Judged {
        use protocol::ToolResultContent::Text;
        if let TaskOutcome::Denied { reason, input } = outcome {
            return Judged {
                outcome: Outcome::PermissionDenied,
                content: Text(format!("Permission to use {name} was denied: {reason}")),
                is_error: true,
                denied_input: Some(input),
                structured: None,
                notes: Vec::new(),
            };
        }
        let (outcome, content, is_error) = match outcome {
            TaskOutcome::Ran(Ok(output)) => {
                let outcome = if output.is_error {
                    Outcome::ToolError
                } else {
                    Outcome::Success
                };
                return Judged {
                    outcome,
                    content: output.content,
                    is_error: output.is_error,
                    denied_input: None,
                    structured: output.structured,
                    notes: output.notes,
                };
            }
            TaskOutcome::Ran(Err(ToolError::TimedOut { after, note })) => (
                Outcome::TimedOut { after },
                Text(format!(
                    "Error: {} timed out after {} ms and was stopped.{note}",
                    name,
                    after.as_millis()
                )),
                true,
            ),
            TaskOutcome::Ran(Err(error)) => {
                let outcome = match &error {
                    ToolError::InvalidInput(_) => Outcome::InvalidInput,
                    ToolError::Killed(_) => Outcome::Killed,
                    _ => Outcome::CouldNotRun,
                };
                (outcome, Text(format!("Error: {error}")), true)
            }
            TaskOutcome::TimedOut(after) => (
                Outcome::TimedOut { after },
                Text(format!(
                    "Error: {} timed out after {} ms and was stopped.",
                    name,
                    after.as_millis()
                )),
                true,
            ),
            TaskOutcome::Panicked => (
                Outcome::CouldNotRun,
                Text(format!(
                    "Error: {} crashed while running (an internal error of the tool).",
                    name
                )),
                true,
            ),
            TaskOutcome::Cancelled => match (&self.aborted_by, self.parent.is_cancelled()) {
                (Some(failure), false) => (
                    Outcome::SiblingFailed {
                        failed: failure.id.clone(),
                        failed_tool: failure.name.clone(),
                        was_running: true,
                    },
                    Text(sibling_text(failure, true)),
                    true,
                ),
                _ => (Outcome::Interrupted, Text(interrupted_text()), true),
            },
            // Handled above.
            TaskOutcome::Denied { .. } => (Outcome::PermissionDenied, Text(String::new()), true),
        };
        Judged {
            outcome,
            content,
            is_error,
            denied_input: None,
            structured: None,
            notes: Vec::new(),
        }
    }

    fn fire_sibling_abort(&mut self, failure: SiblingFailure) {
        tracing::info!(id = %failure.id, name = %failure.name, "sibling abort");
        self.siblings.cancel();
        for index in self.next_emit..self.entries.len() {
            if matches!(self.entries[index].slot, Slot::Queued { .. }) {
                let call = self.entries[index].call.clone();
                let outcome = Outcome::SiblingFailed {
                    failed: failure.id.clone(),
                    failed_tool: failure.name.clone(),
                    was_running: false,
                };
                let done =
                    self.completed(index, &call, outcome, sibling_text(&failure, false), None);
                self.entries[index].slot = Slot::Done(Box::new(done));
            }
        }
        self.aborted_by = Some(failure);
    }

    fn user_abort(&mut self) {
        self.user_abort_handled = true;
        tracing::info!("user abort: interrupting tool calls");
        for index in self.next_emit..self.entries.len() {
            if matches!(self.entries[index].slot, Slot::Queued { .. }) {
                let call = self.entries[index].call.clone();
                let done =
                    self.completed(index, &call, Outcome::Interrupted, interrupted_text(), None);
                self.entries[index].slot = Slot::Done(Box::new(done));
            }
        }
        self.flush();
    }

    fn completed(
        &self,
        index: usize,
        call: &ToolCall,
        outcome: Outcome,
        text: String,
        duration: Option<Duration>,
    ) -> CompletedTool {
        CompletedTool {
            index,
            name: call.name.clone(),
            result: ToolResultBlock::text(call.id.clone(), text, true),
            outcome,
            duration,
            structured: None,
            notes: Vec::new(),
        }
    }

    /// Moves finished results to the event queue, in add order.
    fn flush(&mut self) {
        while let Some(entry) = self.entries.get_mut(self.next_emit) {
            if !matches!(entry.slot, Slot::Done(_)) {
                break;
            }
            if let Slot::Done(done) = std::mem::replace(&mut entry.slot, Slot::Emitted) {
                self.pending.push_back(ExecutorEvent::Completed(done));
            }
            self.next_emit += 1;
        }
    }
}

/// The first non-blank line of a result's text, cut to [`PREVIEW_CHARS`] characters.
fn preview(content: &protocol::ToolResultContent) -> String {
    let text = content_text(content);
    text.lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .chars()
        .take(PREVIEW_CHARS)
        .collect()
}

fn interrupted_text() -> String {
    "Interrupted by user: this tool call was stopped before it completed.".to_owned()
}

fn sibling_text(failure: &SiblingFailure, was_running: bool) -> String {
    let what = if was_running {
        "was cancelled before it completed"
    } else {
        "was not run"
    };
    format!(
        "Error: this call {what} because the parallel {} call ({}) failed. It is safe to retry.",
        failure.name, failure.id
    )
}

fn content_text(content: &protocol::ToolResultContent) -> String {
    content.text()
}

/// Reports a call's ending exactly once, even when the task panics or is dropped.
struct Reporter {
    sender: mpsc::UnboundedSender<TaskMessage>,
    generation: u64,
    index: usize,
    sent: bool,
}

impl Reporter {
    fn finish(mut self, outcome: TaskOutcome) {
        self.send(outcome);
    }

    fn send(&mut self, outcome: TaskOutcome) {
        self.sent = true;
        // The executor may have been dropped; then nobody waits for the result.
        let _ = self.sender.send(TaskMessage {
            generation: self.generation,
            index: self.index,
            kind: TaskKind::Finished(outcome),
        });
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if !self.sent {
            self.send(TaskOutcome::Panicked);
        }
    }
}

/// The body of a call's task: permission, then the tool under cancellation and timeout.
async fn run_call(
    tool: Arc<dyn Tool>,
    gate: Arc<dyn CanUseTool>,
    call: ToolCall,
    context: ToolContext,
    timeout: Option<Duration>,
    grace: Duration,
) -> TaskOutcome {
    let cancel = context.cancel.clone();
    // The gate sees the tool's own name, whatever name the model called it by (an alias).
    let mut call = call;
    if call.name != tool.name() {
        call.name = tool.name().to_owned();
    }
    let decision = tokio::select! {
        biased;
        () = cancel.cancelled() => return TaskOutcome::Cancelled,
        decision = gate.check(&call, tool.as_ref()) => decision,
    };
    let input = match decision {
        PermissionDecision::Allow { updated_input } => updated_input.unwrap_or(call.input),
        PermissionDecision::Fail { error } => return TaskOutcome::Ran(Err(error)),
        PermissionDecision::Deny { reason } => {
            return TaskOutcome::Denied {
                reason,
                input: call.input,
            };
        }
    };
    let mut future = tool.call(input, context);
    let deadline = async {
        match timeout {
            Some(after) => {
                tokio::time::sleep(after).await;
                after
            }
            None => std::future::pending().await,
        }
    };
    // Cancellation is checked first: a tool that watches the token itself returns an error
    // when it fires, and that error must not pass for a failure of its own.
    tokio::select! {
        biased;
        () = cancel.cancelled() => {
            // Give the tool time to kill its processes, then drop it.
            let _ = tokio::time::timeout(grace, &mut future).await;
            TaskOutcome::Cancelled
        }
        result = &mut future => TaskOutcome::Ran(result),
        after = deadline => {
            cancel.cancel();
            let _ = tokio::time::timeout(grace, &mut future).await;
            TaskOutcome::TimedOut(after)
        }
    }
}
