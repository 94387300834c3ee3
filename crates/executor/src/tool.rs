//! What a tool is, what it receives and what it returns.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use protocol::{BlockStatus, CompletedBlock, ContentBlock, ToolResultContent, ToolUseId};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The boxed future a [`Tool::call`] returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// The boxed future a [`Tool::validate`] returns.
pub type ValidateFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ToolError>> + Send + 'a>>;

/// A tool the model can call.
///
/// Implementations must watch [`ToolContext::cancel`]: when it fires they stop promptly and
/// clean up (a command's whole process group is killed). The executor waits for them a short
/// grace period ([`crate::ExecutorConfig::cancel_grace`]) and then drops the future.
pub trait Tool: Send + Sync + 'static {
    /// Name the model calls it by, such as `Read`.
    fn name(&self) -> &str;

    /// Other names the model may call it by (Claude Code's renamed tools: `Agent` for
    /// `Task`); never offered, only accepted.
    fn aliases(&self) -> &[&str] {
        &[]
    }

    /// Whether the tool is accepted but never offered: the legacy form of a tool a model
    /// trained on another version may still call (Claude Code's TodoWrite beside its task
    /// tools). A request's tool list leaves it out; a call of it runs. The default is
    /// `false`.
    fn hidden(&self) -> bool {
        false
    }

    /// What the tool does, for the model.
    fn description(&self) -> &str;

    /// JSON Schema (2020-12) of the input object. The executor checks inputs against the subset
    /// described in [`crate::schema`] before calling the tool.
    fn input_schema(&self) -> &Value;

    /// Whether this call may run alongside other concurrency-safe calls. May depend on the
    /// input (`ls` is safe, `rm` is not). The default is `false`: unknown effects run alone.
    fn is_concurrency_safe(&self, input: &Value) -> bool {
        let _ = input;
        false
    }

    /// Whether this call only reads. Used by permission modes (plan mode allows only reads).
    fn is_read_only(&self, input: &Value) -> bool {
        let _ = input;
        false
    }

    /// The longest this call may run; `None` leaves it to the executor's default. Tools with a
    /// timeout of their own (Bash) return `None` and enforce theirs.
    fn timeout(&self, input: &Value) -> Option<Duration> {
        let _ = input;
        None
    }

    /// Checks that the call can do its job, for a permission gate to call before it asks the
    /// user about it (a failure then becomes the call's result,
    /// [`crate::PermissionDecision::Fail`]: no question, no run). For checks that need the
    /// world as it is (a file tool's file read first and unchanged, an edit's text present
    /// once), so a question is never put for a call that would fail. [`Tool::call`] must
    /// still check everything again: the world can change between the two. The default
    /// accepts every input.
    ///
    /// # Errors
    ///
    /// [`ToolError`] saying why the call cannot run, as [`Tool::call`] would.
    fn validate<'a>(&'a self, input: &'a Value, context: &'a ToolContext) -> ValidateFuture<'a> {
        let _ = (input, context);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Runs the tool.
    ///
    /// # Errors
    ///
    /// [`ToolError`] when the tool could not do its job. A tool that ran and has a failure to
    /// report (a command that exited non-zero) returns `Ok` with [`ToolOutput::error`].
    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_>;
}

/// Where tools may act: the session's working directory and the other directories it may use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workspace {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Further directories tools may read and write (`--add-dir`), absolute.
    pub additional_dirs: Vec<PathBuf>,
}

/// What a running tool receives besides its input.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The tool_use being answered.
    pub tool_use_id: ToolUseId,
    /// Fires when the call must stop: user abort, sibling abort, timeout or discard.
    pub cancel: CancellationToken,
    /// Where the tool may act.
    pub workspace: Arc<Workspace>,
    pub(crate) progress: ProgressSender,
}

impl ToolContext {
    /// Reports progress (a line of output, a percentage) to whoever renders the run. Never
    /// blocks; progress sent after the call finished is dropped.
    pub fn progress(&self, progress: ToolProgress) {
        self.progress.send(progress);
    }

    /// A context for calling a tool outside an executor (tests, one-off calls): progress goes
    /// nowhere.
    pub fn detached(tool_use_id: ToolUseId, workspace: Arc<Workspace>) -> Self {
        Self {
            tool_use_id,
            cancel: CancellationToken::new(),
            workspace,
            progress: ProgressSender { inner: None },
        }
    }
}

/// Sends progress of one call to the executor.
#[derive(Clone, Debug)]
pub(crate) struct ProgressSender {
    pub(crate) inner: Option<(
        mpsc::UnboundedSender<crate::executor::TaskMessage>,
        u64,
        usize,
    )>,
}

impl ProgressSender {
    fn send(&self, progress: ToolProgress) {
        if let Some((sender, generation, index)) = &self.inner {
            // The executor may be gone (discarded, dropped): progress is best effort.
            let _ = sender.send(crate::executor::TaskMessage {
                generation: *generation,
                index: *index,
                kind: crate::executor::TaskKind::Progress(progress),
            });
        }
    }
}

/// A progress report of a running tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolProgress {
    /// A short human-readable line, such as a line of command output.
    pub message: String,
    /// Structured detail, when the tool has some.
    pub data: Option<Value>,
}

impl ToolProgress {
    /// A progress line without structured data.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            data: None,
        }
    }
}

/// What a tool returns when it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The tool_result content for the model.
    pub content: ToolResultContent,
    /// `true` when the tool ran but reports a failure (a command's non-zero exit). Such a
    /// result is not fatal: under the default policy it does not cancel siblings.
    pub is_error: bool,
    /// What the tool did as structured data, for hooks and transcripts, in Claude Code's
    /// `toolUseResult` shapes (`sdk-tools.d.ts` of `@anthropic-ai/claude-agent-sdk`: Bash
    /// `{stdout, stderr, interrupted, isImage}`, Edit `{filePath, oldString, newString,
    /// originalFile, structuredPatch, userModified, replaceAll}`, ...). `None`: only the text.
    pub structured: Option<Value>,
    /// Lines for the user, not the model (a hook's feedback), shown next to the call.
    pub notes: Vec<String>,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: ToolResultContent::Text(text.into()),
            is_error: false,
            structured: None,
            notes: Vec::new(),
        }
    }

    /// A text result reporting a non-fatal failure.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: ToolResultContent::Text(text.into()),
            is_error: true,
            structured: None,
            notes: Vec::new(),
        }
    }

    /// The same output with its structured form.
    #[must_use]
    pub fn with_structured(mut self, structured: Value) -> Self {
        self.structured = Some(structured);
        self
    }
}

/// Why a tool could not do its job. Every variant is fatal under
/// [`crate::AbortPolicy::OnFatalError`] except [`ToolError::InvalidInput`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The input passed the schema but makes no sense to the tool (a missing file, an
    /// `old_string` not found). Not fatal: the model can correct it.
    #[error("{0}")]
    InvalidInput(String),
    /// The tool could not run (a process failed to spawn, an I/O error).
    #[error("{0}")]
    CouldNotRun(String),
    /// The tool's work was killed (by a signal, or because it was cancelled).
    #[error("{0}")]
    Killed(String),
    /// The tool enforced a deadline itself and its work was stopped (a wrapper that runs
    /// more after the work, such as hooks, keeps the work to its own limit this way): the
    /// executor reports it as a timeout of the call, with `note` after its message.
    #[error("timed out after {} ms{note}", after.as_millis())]
    TimedOut {
        /// The limit that passed.
        after: std::time::Duration,
        /// Text added after the timeout's message (empty, or starting with a line break).
        note: String,
    },
}

/// One tool_use handed to the executor.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The tool_use id its result must name.
    pub id: ToolUseId,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The input object.
    pub input: Value,
    /// Why the input cannot be used, when the stream marked the block (invalid JSON, cut off
    /// by max_tokens). Such a call is answered with an error and never run.
    pub input_problem: Option<InputProblem>,
}

/// Why a tool_use's input cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputProblem {
    /// The input JSON did not parse.
    InvalidJson {
        /// The raw input text received.
        raw: String,
        /// What the parser said.
        error: String,
    },
    /// The response was cut off (max_tokens) before the input was complete.
    Truncated,
    /// The caller refuses the call (a loop guard, such as repeated identical calls); the
    /// reason is the tool_result text.
    Rejected {
        /// What the model is told.
        reason: String,
    },
}

impl ToolCall {
    /// A call with a well-formed input.
    pub fn new(id: impl Into<ToolUseId>, name: impl Into<String>, input: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            input,
            input_problem: None,
        }
    }

    /// The call of a completed client tool_use block, carrying the block's status; `None`
    /// for every other block (text, thinking, server tool uses).
    pub fn from_block(completed: &CompletedBlock) -> Option<Self> {
        let ContentBlock::ToolUse(block) = &completed.block else {
            return None;
        };
        let input_problem = match &completed.status {
            BlockStatus::InvalidInput(invalid) => Some(InputProblem::InvalidJson {
                raw: invalid.raw.clone(),
                error: invalid.error.clone(),
            }),
            BlockStatus::Truncated { .. } => Some(InputProblem::Truncated),
            _ => None,
        };
        Some(Self {
            id: block.id.clone(),
            name: block.name.clone(),
            input: block.input.clone(),
            input_problem,
        })
    }
}
