//! L3, autocompact: above the threshold, the model summarizes the older history, and the
//! conversation continues from [boundary marker + summary, re-attached files, recent tail].
//!
//! Rules:
//! - The kept tail never starts with a user message carrying tool_results whose tool_use was
//!   summarized away: the boundary moves back to include that tool_use.
//! - The summary request is itself a valid API request that fits the window. When the main
//!   request's parts are given ([`compact_as_fork`]) and the history still fits, it is a
//!   **fork** of the main request: the same model, system, tools, user context and thinking,
//!   the whole history, the summary instruction appended to the last user message, and the
//!   previous main request's breakpoints, so the history is read
//!   from the prompt cache (a tenth of the price) instead of billed again (Claude Code sends
//!   its summaries this way). Otherwise (a prompt the API called too long, no main request)
//!   it is a standalone request ([`SUMMARY_SYSTEM`], no tools) of the part to summarize,
//!   whose oldest turns are dropped first when it is too big.
//! - A compaction fails when the model call errors or the history it produces is still at or
//!   above the threshold. After [`MAX_CONSECUTIVE_FAILURES`] failures in a row the circuit
//!   breaker opens and the caller ends at the blocking limit instead of calling the API
//!   forever.

use std::future::Future;
use std::pin::Pin;

use protocol::{
    ContentBlock, Effort, MessageParam, Role, SystemBlock, ThinkingConfig, ToolDefinition,
    ToolResultContent,
};

use crate::normalize::normalize_messages;
use crate::tokens::{TokenEstimator, Tokens};

/// Consecutive failed compactions after which autocompact stops trying (Claude Code's 3).
pub const MAX_CONSECUTIVE_FAILURES: u32 = 3;

/// First line of the message that replaces the summarized history.
pub const BOUNDARY_MARKER: &str = "<compact-boundary>";

/// The system prompt of the summary request.
pub const SUMMARY_SYSTEM: &str =
    "You are a helpful AI assistant tasked with summarizing conversations.";

/// The instruction closing the summary request: the nine sections the summary must have.
pub const SUMMARY_PROMPT: &str = "Your task is to create a detailed summary of the conversation so far. \
This summary replaces the conversation: the work continues from it, so keep everything needed to go on without losing context.

Write these sections:
1. Primary request and intent: every explicit request of the user, in detail.
2. Key technical concepts: technologies, frameworks and conventions discussed.
3. Files and code sections: every file examined, changed or created, why it matters, and the important code snippets.
4. Errors and fixes: every error met and how it was fixed, including user feedback.
5. Problem solving: problems solved and troubleshooting still in progress.
6. All user messages: every user message that is not a tool result, verbatim.
7. Pending tasks: what was asked and is not done yet.
8. Current work: precisely what was being worked on right before this summary, with file names and code.
9. Next step: the next step, directly in line with the most recent request, quoting it.

Answer with the summary only.";

/// Added to [`SUMMARY_PROMPT`] when the summary is a fork of the main request, which
/// declares tools the summary must not call.
pub const FORK_SUFFIX: &str =
    "\n\nAnswer in text: do not call any tool. The last few messages stay after your summary.";

/// Limits of a compaction, in tokens unless said otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactConfig {
    /// The kept tail holds at most this many messages (before boundary adjustment). Default 6.
    pub tail_max_messages: usize,
    /// The kept tail holds at most this many tokens (before boundary adjustment). Default
    /// 20,000.
    pub tail_max_tokens: Tokens,
    /// Output cap of the summary request (Claude Code's 20,000).
    pub summary_max_output: Tokens,
    /// Files re-attached after compaction: at most this many (5)...
    pub attach_max_files: usize,
    /// ...at most this many tokens each (5,000)...
    pub attach_per_file: Tokens,
    /// ...and this many in total (50,000).
    pub attach_total: Tokens,
}

impl Default for CompactConfig {
    fn default() -> Self {
        Self {
            tail_max_messages: 6,
            tail_max_tokens: Tokens(20_000),
            summary_max_output: Tokens(20_000),
            attach_max_files: 5,
            attach_per_file: Tokens(5_000),
            attach_total: Tokens(50_000),
        }
    }
}

/// A summary request: a valid Messages API request body's parts.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRequest {
    /// System prompt ([`SUMMARY_SYSTEM`]); unused by a fork, which has the main request's.
    pub system: String,
    /// The history to summarize, ending with a user message holding [`SUMMARY_PROMPT`] (a
    /// fork: the whole history, the instruction the last blocks of its last user message).
    pub messages: Vec<MessageParam>,
    /// Output cap in tokens (a fork: the main request's `max_tokens`, so its thinking is the
    /// same).
    pub max_output: Tokens,
    /// `Some`: send it as a fork of the main request, with these parts.
    pub fork: Option<Fork>,
}

/// The main request's parts a summary shares when it is sent as a fork of that request:
/// everything the prompt cache keys on (model, tools, system, thinking) is the main
/// request's, so the history up to [`Fork::breakpoints`] is read from the cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Fork {
    /// The model the main request went to.
    pub model: String,
    /// The main request's `max_tokens`.
    pub max_tokens: u32,
    /// Its system blocks, breakpoint included.
    pub system: Vec<SystemBlock>,
    /// Its tool declarations.
    pub tools: Vec<ToolDefinition>,
    /// Its user context (the first user message's `<system-reminder>`).
    pub user_context: Option<String>,
    /// Its thinking configuration.
    pub thinking: Option<ThinkingConfig>,
    /// Its effort.
    pub effort: Option<Effort>,
    /// The previous main request's message breakpoints, `(message, block)` in the history:
    /// the fork has the same ones, so its bytes are that request's up to the end of its
    /// messages and its entries are read. Empty: the moving breakpoint on the last block.
    pub breakpoints: Vec<(usize, usize)>,
}

/// The future a [`Summarizer`] returns: the summary text, or why there is none.
pub type SummaryFuture<'a> =
    Pin<Box<dyn Future<Output = Result<String, SummarizerError>> + Send + 'a>>;

/// Why a summary call gave no summary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SummarizerError {
    /// The summary request is too long for the model's window.
    #[error("prompt is too long: {0}")]
    PromptTooLong(String),
    /// The model could not be reached, stayed overloaded or rate limited, or its stream
    /// broke, through every retry.
    #[error("the model is unavailable: {0}")]
    Unavailable(String),
    /// The API refused the request for another reason.
    #[error("the API refused the summary request: {0}")]
    Refused(String),
    /// The request could not be built or sent (a client problem, no answer from the API).
    #[error("the summary request could not be sent: {0}")]
    Client(String),
    /// The call ended without an answer.
    #[error("the summary call ended without an answer")]
    NoAnswer,
    /// A hook of the caller's refused the compaction (Claude Code's PreCompact hooks): the
    /// history stays as it was.
    #[error("compaction blocked by a hook: {0}")]
    Blocked(String),
}

/// The model call that writes summaries, injected by the caller.
pub trait Summarizer: Send + Sync {
    /// Sends `request` to the model and returns the text of its answer.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future abandons the call; nothing in this crate is left half-done.
    fn summarize(&self, request: SummaryRequest) -> SummaryFuture<'_>;
}

/// Current contents of files, for re-attaching recently read files after compaction.
pub trait FileSource: Send + Sync {
    /// The file's text, `None` when it cannot be read (gone, binary, outside the workspace).
    fn read(&self, path: &str) -> Option<String>;
}

/// A [`FileSource`] that has no files.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFiles;

impl FileSource for NoFiles {
    fn read(&self, _path: &str) -> Option<String> {
        None
    }
}

/// Why a compaction did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// There is nothing before the tail to summarize.
    #[error("nothing to compact: the history is {messages} messages, all of them in the kept tail")]
    NothingToCompact {
        /// Messages in the history.
        messages: usize,
    },
    /// Even the most recent turn alone does not fit in a summary request.
    #[error("the summary request does not fit: {needed} needed, {limit} available")]
    RequestTooLarge {
        /// Estimated tokens of the smallest request.
        needed: Tokens,
        /// What the window allows.
        limit: Tokens,
    },
    /// The model call failed.
    #[error("the summary call failed: {0}")]
    Summarizer(#[source] SummarizerError),
    /// The model answered with an empty summary.
    #[error("the model returned an empty summary")]
    EmptySummary,
}

/// A finished compaction.
#[derive(Clone, Debug, PartialEq)]
pub struct Compacted {
    /// The new history.
    pub messages: Vec<MessageParam>,
    /// Messages summarized away.
    pub summarized: usize,
    /// Messages of the summarized history dropped to make the summary request fit.
    pub dropped_for_fit: usize,
    /// Paths of the files re-attached.
    pub attached: Vec<String>,
}

/// The index where the kept tail starts: the longest suffix within the tail limits, moved
/// back so it never starts with a user message carrying tool_results. `0` means nothing can
/// be summarized.
pub fn plan_boundary(
    messages: &[MessageParam],
    config: &CompactConfig,
    estimator: &dyn TokenEstimator,
) -> usize {
    let mut boundary = messages.len();
    let mut tokens = Tokens::ZERO;
    while boundary > 0 && messages.len() - boundary < config.tail_max_messages {
        let next = tokens + estimator.message(&messages[boundary - 1]);
        if next > config.tail_max_tokens && boundary < messages.len() {
            break;
        }
        tokens = next;
        boundary -= 1;
    }
    // Never split a tool_use from its tool_result: include the assistant message.
    while boundary > 0 && starts_with_results(&messages[boundary]) {
        boundary -= 1;
    }
    // A tail must not start with an assistant message whose preceding user message was
    // summarized: that is fine (the summary is a user message), nothing more to check.
    boundary
}

fn starts_with_results(message: &MessageParam) -> bool {
    message.role == Role::User
        && message
            .content
            .iter()
            .any(|block| matches!(block, ContentBlock::ToolResult(_)))
}

/// Builds the summary request for `messages[..boundary]`, dropping the oldest parts until
/// it fits in `window` with room for the summary. Returns the request and how many messages
/// were dropped.
///
/// Whole turns go first (up to the next user message that is not tool results). When what
/// is left is one turn (a long task: one prompt, then many tool calls), its oldest
/// exchanges go next (an assistant message and the tool_results after it), keeping the
/// prompt; no tool_use ever loses its result.
///
/// # Errors
///
/// [`CompactError::RequestTooLarge`] when even the last turn's prompt and its last exchange
/// do not fit.
pub fn summary_request(
    summarized: &[MessageParam],
    window: Tokens,
    config: &CompactConfig,
    estimator: &dyn TokenEstimator,
) -> Result<(SummaryRequest, usize), CompactError> {
    let limit = window - config.summary_max_output;
    let fixed = estimator.text(SUMMARY_SYSTEM)
        + estimator.message(&MessageParam::user_text(SUMMARY_PROMPT));
    let request = |mut messages: Vec<MessageParam>| {
        messages.push(MessageParam::user_text(SUMMARY_PROMPT));
        let mut repairs = Vec::new();
        SummaryRequest {
            system: SUMMARY_SYSTEM.to_owned(),
            messages: normalize_messages(messages, &mut repairs),
            max_output: config.summary_max_output,
            fork: None,
        }
    };
    let mut start = 0;
    let needed = loop {
        let part = &summarized[start..];
        let needed = fixed + estimator.messages(part);
        if needed <= limit {
            return Ok((request(part.to_vec()), start));
        }
        let next = (start + 1..summarized.len()).find(|&index| {
            summarized[index].role == Role::User && !starts_with_results(&summarized[index])
        });
        match next {
            Some(next) => start = next,
            None => break needed,
        }
    };
    // One turn left: keep its prompt, drop its oldest exchanges.
    let prompt = &summarized[start];
    let prompt_tokens = fixed + estimator.message(prompt);
    let mut rest_tokens = estimator.messages(&summarized[start + 1..]);
    for skip in start + 1..summarized.len() {
        let candidate = &summarized[skip];
        if prompt.role == Role::User
            && candidate.role == Role::Assistant
            && prompt_tokens + rest_tokens <= limit
        {
            let mut messages = vec![prompt.clone()];
            messages.extend_from_slice(&summarized[skip..]);
            return Ok((request(messages), skip - 1));
        }
        rest_tokens = rest_tokens - estimator.message(candidate);
    }
    Err(CompactError::RequestTooLarge { needed, limit })
}

/// The summary request as a fork of the main request: the whole history with the
/// instruction added to its last user message (or as a new one when the history ends with
/// the model's turn).
pub fn fork_request(messages: &[MessageParam], fork: Fork) -> SummaryRequest {
    let mut history = messages.to_vec();
    let instruction = ContentBlock::text(format!("{SUMMARY_PROMPT}{FORK_SUFFIX}"));
    match history.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(instruction),
        _ => history.push(MessageParam {
            role: Role::User,
            content: vec![instruction],
        }),
    }
    SummaryRequest {
        system: SUMMARY_SYSTEM.to_owned(),
        messages: history,
        max_output: Tokens(u64::from(fork.max_tokens)),
        fork: Some(fork),
    }
}

/// Paths of files the summarized history Read, most recent first, each once.
fn read_paths(summarized: &[MessageParam]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for message in summarized.iter().rev() {
        for block in message.content.iter().rev() {
            if let ContentBlock::ToolUse(tool_use) = block
                && tool_use.name == "Read"
                && let Some(path) = tool_use
                    .input
                    .get("file_path")
                    .and_then(|path| path.as_str())
                && !paths.iter().any(|seen| seen == path)
            {
                paths.push(path.to_owned());
            }
        }
    }
    paths
}

/// Cuts `text` to at most `tokens` by the estimator, at a char boundary.
fn cut_to(text: &str, tokens: Tokens, estimator: &dyn TokenEstimator) -> String {
    if estimator.text(text) <= tokens {
        return text.to_owned();
    }
    let (mut low, mut high) = (0, text.len());
    while low < high {
        let mid = (low + high).div_ceil(2);
        let mut cut = mid;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        if estimator.text(&text[..cut]) <= tokens {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let mut cut = low;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[... file cut to fit the re-attachment budget]",
        &text[..cut]
    )
}

/// Runs one compaction of `messages`: plans the boundary, asks the summarizer with a
/// standalone request, and builds the new history. The new history passes
/// [`crate::validate_pairing`] when the input did.
///
/// # Errors
///
/// [`CompactError`] when there is nothing to summarize, the request cannot fit, or the model
/// call fails.
///
/// # Cancellation safety
///
/// Dropping the future drops the summary call; `messages` is only read.
pub async fn compact(
    messages: &[MessageParam],
    window: Tokens,
    config: &CompactConfig,
    estimator: &dyn TokenEstimator,
    summarizer: &dyn Summarizer,
    files: &dyn FileSource,
) -> Result<Compacted, CompactError> {
    compact_inner(messages, window, config, estimator, summarizer, files, None).await
}

/// [`compact`], with the summary sent as a fork of the main request ([`fork_request`]), so
/// the history is read from the prompt cache. The caller checks that the history with the
/// instruction still fits the window. When the fork is refused as too long, or answers
/// without text (it called a tool), the standalone request is sent instead.
///
/// # Errors
///
/// As [`compact`].
///
/// # Cancellation safety
///
/// As [`compact`].
pub async fn compact_as_fork(
    messages: &[MessageParam],
    window: Tokens,
    config: &CompactConfig,
    estimator: &dyn TokenEstimator,
    summarizer: &dyn Summarizer,
    files: &dyn FileSource,
    fork: Fork,
) -> Result<Compacted, CompactError> {
    compact_inner(
        messages,
        window,
        config,
        estimator,
        summarizer,
        files,
        Some(fork),
    )
    .await
}

pub(crate) async fn compact_inner(
    messages: &[MessageParam],
    window: Tokens,
    config: &CompactConfig,
    estimator: &dyn TokenEstimator,
    summarizer: &dyn Summarizer,
    files: &dyn FileSource,
    fork: Option<Fork>,
) -> Result<Compacted, CompactError> {
    let boundary = plan_boundary(messages, config, estimator);
    if boundary == 0 {
        return Err(CompactError::NothingToCompact {
            messages: messages.len(),
        });
    }
    let (summarized, tail) = messages.split_at(boundary);
    let forked = match fork {
        Some(fork) => match summarizer.summarize(fork_request(messages, fork)).await {
            Ok(summary) if !summary.trim().is_empty() => Some(summary),
            Ok(_) | Err(SummarizerError::PromptTooLong(_)) => None,
            Err(error) => return Err(CompactError::Summarizer(error)),
        },
        None => None,
    };
    let (summary, dropped_for_fit) = match forked {
        Some(summary) => (summary, 0),
        None => {
            let (request, dropped) = summary_request(summarized, window, config, estimator)?;
            let summary = summarizer
                .summarize(request)
                .await
                .map_err(CompactError::Summarizer)?;
            (summary, dropped)
        }
    };
    let summary = summary.trim();
    if summary.is_empty() {
        return Err(CompactError::EmptySummary);
    }
    let mut content = vec![ContentBlock::text(format!(
        "{BOUNDARY_MARKER}\nThis session continues from an earlier conversation that ran out of context. The summary below covers the earlier part.\n\n{summary}"
    ))];
    // Re-attach recently read files the tail does not already show.
    let mut attached = Vec::new();
    let mut budget = config.attach_total;
    let tail_paths = read_paths(tail);
    for path in read_paths(summarized) {
        if attached.len() >= config.attach_max_files || budget == Tokens::ZERO {
            break;
        }
        if tail_paths.contains(&path) {
            continue;
        }
        let Some(text) = files.read(&path) else {
            continue;
        };
        let text = cut_to(&text, config.attach_per_file.min(budget), estimator);
        budget = budget - estimator.text(&text);
        content.push(ContentBlock::text(format!(
            "<system-reminder>\nContents of {path}, read before the summary (current version):\n{text}\n</system-reminder>"
        )));
        attached.push(path);
    }
    let mut history = vec![MessageParam {
        role: Role::User,
        content,
    }];
    history.extend_from_slice(tail);
    let mut repairs = Vec::new();
    let history = normalize_messages(history, &mut repairs);
    Ok(Compacted {
        messages: history,
        summarized: boundary,
        dropped_for_fit,
        attached,
    })
}

/// The text size of a history's tool results and texts, for reports.
pub fn content_bytes(messages: &[MessageParam]) -> usize {
    messages
        .iter()
        .flat_map(|message| &message.content)
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.len(),
            ContentBlock::ToolResult(result) => match &result.content {
                ToolResultContent::Text(text) => text.len(),
                other => other.len_bytes(),
            },
            _ => 0,
        })
        .sum()
}
