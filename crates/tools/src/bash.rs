//! `Bash {command, timeout?, description?}`: runs a command with `bash -c`.
//!
//! Guarantees:
//!
//! - The command runs in its own process group (`setpgid(0, 0)` at spawn) with stdin closed
//!   and stdout and stderr on one pipe, so the output interleaves as on a terminal.
//! - When the call is cancelled or times out, the whole group gets SIGTERM, then SIGKILL
//!   200 ms later if anything is left; when the shell exits normally, whatever it left
//!   running in its group (background jobs holding the pipe) is stopped the same way after
//!   50 ms. If the future is dropped half-way, a guard SIGKILLs the group. No orphan of the
//!   group survives the call (a process that left the group with `setsid` is its own).
//! - The command runs in the OS sandbox with the profile the permission gate chose (see
//!   [`crate::permissions`]), or unsandboxed when the sandbox is off or the user approved
//!   `dangerouslyDisableSandbox`. A sandboxed command whose output shows a refused write or
//!   network access gets a note saying so, and how to ask for the command outside the sandbox.
//! - Its environment is not the agent's: only the variables of
//!   [`sandbox::env::PASSED_VARIABLES`] the agent has, then the session's configured `env`
//!   (settings' `env`), never the agent's credentials ([`sandbox::env::reset`]). `bash` itself
//!   is the one [`sandbox::env::resolve_program`] found outside the workspace; an unsandboxed
//!   command's `PATH` has no empty or relative entry.
//! - The working directory persists between calls: an `EXIT` trap writes `pwd -P` to a file
//!   in the session's private folder whose path is written into the script itself (nothing
//!   the command sets can redirect it); when it lies inside the workspace the next
//!   command (and relative paths of the file tools) start there, otherwise the session's
//!   directory is reset to the workspace's and the result says so. A command that ends with
//!   `exec` or is killed keeps the previous directory.
//! - Output beyond 30,000 characters is cut in the middle, with a marker saying how many
//!   characters were cut; memory stays bounded (64 KiB head and tail) whatever the command
//!   prints.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use executor::{
    PermissionDecision, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolProgress,
    Workspace,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

use crate::common::{parse_input, truncate_middle};
use crate::paths;
use crate::permissions::{
    BashRun, DISABLE_SANDBOX_FIELD, PermissionGate, PermissionRequest, Prompter, readonly, shell,
};
use crate::sandboxing;
use crate::session::Shared;
use sandbox::Profile;

/// Timeout when the input gives none, in milliseconds.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest timeout accepted, in milliseconds.
pub(crate) const MAX_TIMEOUT_MS: u64 = 600_000;
/// Characters of output returned; the middle of longer output is cut.
pub(crate) const MAX_OUTPUT_CHARS: usize = 30_000;
/// After the shell exits, how long processes it left behind may keep the pipe open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(50);
/// Between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(200);
/// Bytes of output kept from the start and from the end.
const KEEP_BYTES: usize = 64 * 1024;
/// How much longer than the command's timeout the executor may wait before it stops the call
/// itself (stopping the group takes at most [`TERM_GRACE`] plus a reap).
const EXECUTOR_MARGIN: Duration = Duration::from_secs(5);
/// Least time between two progress reports.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

const DESCRIPTION: &str = "Runs a shell command with `bash -c` and returns its output (stdout and stderr together) and, when it is not 0, its exit code. \
The command starts in the working directory, which persists between calls: after `cd sub`, later commands and relative file paths start in `sub` (a `cd` outside the workspace is undone). \
Times out after `timeout` milliseconds (default 120000, at most 600000); on timeout or interruption the command and everything it started are killed. Background jobs (`&`) are stopped when the command finishes. \
Output over 30000 characters is cut in the middle. stdin is closed, so interactive commands fail instead of waiting: pass flags such as `-y` or `--no-edit`. \
Quote paths containing spaces. Chain dependent commands with `&&`. Prefer the Read, Glob, Grep, Edit and Write tools over cat, find, grep, sed and echo redirection for files. \
Commands run in an OS sandbox: read-only unless an allow rule or the permission mode lets them write the workspace; `.git`, `.agent`, `.claude` and `.mcp.json` stay read-only (so `git commit` needs the user's approval), files outside the workspace are not visible or not writable, and there is no network unless the user enabled it. \
When the read-only sandbox refuses a write to the workspace, the user is asked (in an interactive session) and the command runs again with the workspace writable. \
Only if a command needs what the workspace-write sandbox refuses (the network, files outside the workspace, .git), call it again with `dangerouslyDisableSandbox: true`; the user is always asked to approve that.";

/// Closes every descriptor above 2 the shell inherited: a descriptor the agent itself was
/// started with (`agent 7<secret`) would otherwise reach outside any sandbox.
const CLOSE_INHERITED_FDS: &str = "for __agent_fd in /proc/self/fd/*; do __agent_fd=${__agent_fd##*/}; [ \"$__agent_fd\" -gt 2 ] 2>/dev/null && eval \"exec $__agent_fd>&-\" 2>/dev/null; done; unset __agent_fd; ";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    command: String,
    timeout: Option<u64>,
    #[allow(dead_code)] // shown to the user by the caller, not used here
    description: Option<String>,
    /// Read by the permission gate, which asks the user before such a call runs.
    #[serde(rename = "dangerouslyDisableSandbox")]
    #[allow(dead_code)]
    dangerously_disable_sandbox: Option<bool>,
    /// Start it in the background ([`crate::background`]).
    run_in_background: Option<bool>,
}

/// The Bash tool.
pub(crate) struct BashTool {
    shared: Arc<Shared>,
    schema: Value,
    /// Who is asked when the read-only sandbox refused a write to the workspace (see
    /// [`BashTool::escalate`]); `None`: headless, or a command the user typed.
    prompter: Option<Arc<dyn Prompter>>,
    /// What answers before the prompter (PermissionRequest hooks), as for any question.
    pre_ask: Option<Arc<dyn crate::PreAsk>>,
}

impl BashTool {
    pub(crate) fn new(
        shared: Arc<Shared>,
        prompter: Option<Arc<dyn Prompter>>,
        pre_ask: Option<Arc<dyn crate::PreAsk>>,
    ) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run"},
                "timeout": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TIMEOUT_MS,
                    "description": "Timeout in milliseconds (default 120000, at most 600000)"
                },
                "description": {
                    "type": "string",
                    "description": "What the command does, in 5 to 10 words, shown to the user"
                },
                DISABLE_SANDBOX_FIELD: {
                    "type": "boolean",
                    "description": "Run outside the sandbox. Only after the sandbox refused something the command needs; the user is always asked"
                },
                "run_in_background": {
                    "type": "boolean",
                    "description": "Start it in the background and return its task id at once (a dev server, a watcher, a long test run); read its output with TaskOutput, stop it with TaskStop. You are told when it ends"
                }
            },
            "required": ["command"],
            "additionalProperties": false
        });
        Self {
            shared,
            schema,
            prompter,
            pre_ask,
        }
    }
}

fn command_of(input: &Value) -> Option<&str> {
    input.get("command").and_then(Value::as_str)
}

impl Tool for BashTool {
    fn name(&self) -> &str {
        "Bash"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// Safe only for one read-only command from the allow-list (see
    /// [`crate::permissions::readonly`]) with no redirections, no chaining and no
    /// substitutions; never for `cd`, which moves the session's working directory.
    fn is_concurrency_safe(&self, input: &Value) -> bool {
        let Some(Ok(analysis)) = command_of(input).map(shell::analyze) else {
            return false;
        };
        match analysis.parts.as_slice() {
            [part] => {
                !analysis.compound
                    && !part.carrier
                    && part.redirects.is_empty()
                    && part.words.first().is_some_and(|word| word.text != "cd")
                    && readonly::is_read_only_command(&part.words)
            }
            _ => false,
        }
    }

    /// A guess from the command's text (every part on the read-only list), for callers that
    /// want one; the permission gate does not use it, the sandbox profile bounds the command.
    fn is_read_only(&self, input: &Value) -> bool {
        match command_of(input).map(shell::analyze) {
            Some(Ok(analysis)) => analysis.parts.iter().all(readonly::is_read_only_part),
            _ => false,
        }
    }

    /// The command's own timeout plus a margin: Bash enforces its timeout itself (killing
    /// the process group and saying so); the executor's limit is only a backstop.
    fn timeout(&self, input: &Value) -> Option<Duration> {
        let requested = input.get("timeout").and_then(Value::as_u64);
        Some(timeout_of(requested) + EXECUTOR_MARGIN)
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let how = self.how_to_run(&input, &context);
            let raw = input.clone();
            let input: Input = parse_input("Bash", input)?;
            if input.run_in_background == Some(true) {
                return start_in_background(&self.shared, input, how, &context);
            }
            let timeout = timeout_of(input.timeout);
            let output = run(&self.shared, &input.command, timeout, how, &context).await?;
            if how != BashRun::Sandboxed(Profile::ReadOnly) {
                return Ok(output);
            }
            self.escalate(output, &raw, &context, |profile| {
                run(
                    &self.shared,
                    &input.command,
                    timeout,
                    BashRun::Sandboxed(profile),
                    &context,
                )
            })
            .await
        })
    }
}

impl BashTool {
    /// Escalation without the model: when the read-only sandbox refused a write that the
    /// workspace-write sandbox would allow ([`refused_writes_in_workspace`]), the user is
    /// asked, with the command and why; on yes it runs again with the workspace writable
    /// (the read-only run left nothing behind but its private temporary folder), and
    /// "always" allows the command's prefix for the session. Headless, in plan mode or
    /// declined, `output` (the refusal, with the sandbox's note) is the result. Never more
    /// than workspace-write: no network unless the settings give it, no protected path.
    async fn escalate<F, Fut>(
        &self,
        output: ToolOutput,
        input: &Value,
        context: &ToolContext,
        rerun: F,
    ) -> Result<ToolOutput, ToolError>
    where
        F: FnOnce(Profile) -> Fut,
        Fut: std::future::Future<Output = Result<ToolOutput, ToolError>>,
    {
        if (self.prompter.is_none() && self.pre_ask.is_none())
            || self.shared.mode.get() == crate::PermissionMode::Plan
            || !refused_writes_in_workspace(
                &self.shared,
                &self.shared.effective(&context.workspace),
                &output,
            )
        {
            return Ok(output);
        }
        let gate = PermissionGate::new(Arc::clone(&self.shared), None, None);
        let request = PermissionRequest {
            tool: "Bash",
            tool_use_id: context.tool_use_id.as_str(),
            input,
            reason: ESCALATION_REASON,
            change: None,
            always: gate.always_for("Bash", input),
        };
        let ask = async {
            // As any question: the PermissionRequest hooks first, then the prompter.
            if let Some(pre_ask) = &self.pre_ask
                && let Some(decision) = pre_ask
                    .answer(&request, self, self.prompter.is_some())
                    .await
            {
                return decision;
            }
            match &self.prompter {
                Some(prompter) => prompter.ask(request.clone()).await,
                None => PermissionDecision::deny("nobody can be asked here"),
            }
        };
        let decision = tokio::select! {
            biased;
            () = context.cancel.cancelled() => return Ok(output),
            decision = ask => decision,
        };
        match decision {
            // The command that ran is the one to run again: an approval that changed it
            // (a program answering in the user's place may) runs nothing after the fact.
            PermissionDecision::Allow {
                updated_input: Some(changed),
            } if changed != *input => Ok(with_note(
                output,
                "The approval to let it write the workspace changed the command, so it was not run again; run the changed command as a new call if it is wanted.",
            )),
            PermissionDecision::Allow { .. } => {
                let again = rerun(Profile::WorkspaceWrite).await?;
                Ok(with_note(again, RERUN_NOTE))
            }
            PermissionDecision::Deny { reason } => Ok(with_note(
                output,
                &format!("The user was asked to let it write the workspace and declined: {reason}"),
            )),
            PermissionDecision::Fail { error } => Err(error),
            _ => Ok(output),
        }
    }

    /// How the gate let this call run; for a call that did not go through the gate (a
    /// direct call), how it would run if allowed, without `dangerouslyDisableSandbox`, and
    /// read-only when the gate would not have allowed it outright.
    fn how_to_run(&self, input: &Value, context: &ToolContext) -> BashRun {
        if let Some((_, run)) = self.shared.grants.remove(context.tool_use_id.as_str()) {
            return run;
        }
        let mut input = input.clone();
        if let Some(fields) = input.as_object_mut() {
            fields.remove(DISABLE_SANDBOX_FIELD);
        }
        let gate = PermissionGate::new(Arc::clone(&self.shared), None, None);
        match gate.bash_decision(&input, self.shared.mode.get()) {
            (crate::Verdict::Allow, run) => run,
            (_, _) if self.shared.sandbox.is_active() => BashRun::Sandboxed(Profile::ReadOnly),
            (_, run) => run,
        }
    }
}

/// The timeout a call asked for, within bounds.
fn timeout_of(requested_ms: Option<u64>) -> Duration {
    Duration::from_millis(
        requested_ms
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS),
    )
}

/// The file the shell's `EXIT` trap writes its final directory to, in the session's private
/// folder; removed on drop.
struct CwdFile(PathBuf);

impl CwdFile {
    /// A file name no earlier command can have guessed: a command that knew it could plant
    /// a link there (and a later unsandboxed command's trap would write through it) or a
    /// FIFO (and the read would block).
    fn new(private: &std::path::Path) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        Self(private.join(format!(
            ".cwd-{}-{:016x}",
            COUNTER.fetch_add(1, Ordering::Relaxed),
            crate::common::random_u64()
        )))
    }

    /// The directory the shell ended in, if it said: read only from a regular file (a link
    /// or a FIFO planted in its place is not followed or waited on; at most 64 KiB).
    fn read(&self) -> Option<PathBuf> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags.bits())
            .open(&self.0)
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut bytes = Vec::new();
        file.take(64 * 1024).read_to_end(&mut bytes).ok()?;
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        (!bytes.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
    }

    /// The `trap` line that makes the shell write its directory here.
    fn trap(&self) -> String {
        let write = format!(
            "pwd -P >| {} 2>/dev/null",
            sandboxing::shell_quote(&self.0.to_string_lossy())
        );
        format!("trap {} EXIT", sandboxing::shell_quote(&write))
    }
}

impl Drop for CwdFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The process groups of the commands running now, for [`kill_running_commands`].
static RUNNING: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<i32>> {
    RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SIGKILLs the process group of every Bash command still running: for a process about to
/// end without running destructors (`std::process::exit` on a second Ctrl-C), which would
/// otherwise leave an unsandboxed command running (a sandboxed one dies with its sandbox).
pub fn kill_running_commands() {
    for group in running().drain(..) {
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
}

/// Counts `group` among the running commands' groups (a background task's, while it runs).
pub(crate) fn register_group(group: Pid) {
    running().push(group.as_raw());
}

/// No longer counts `group` (see [`register_group`]).
pub(crate) fn unregister_group(group: Pid) {
    running().retain(|known| *known != group.as_raw());
}

/// Starts `input`'s command in the background, as `how` lets it run in the foreground (its
/// sandbox profile), and says where its output goes ([`crate::background`]). It never moves
/// the session's working directory.
fn start_in_background(
    shared: &Shared,
    input: Input,
    how: BashRun,
    context: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let workspace = &shared.effective(&context.workspace);
    let cwd = shared.cwd(workspace);
    let script = script(shared, how, None, &input.command);
    let wrapper = shared.background.wrapper();
    let (command, placeholders, _) = prepare(shared, workspace, how, &script, &cwd, wrapper)?;
    let task = shared.background.start(crate::background::Launch {
        command,
        placeholders,
        text: input.command,
        description: input.description,
        tool_use_id: Some(context.tool_use_id.to_string()),
        monitor: false,
        deadline: None,
    })?;
    // In the read-only sandbox nothing asks again when a write fails, as in the foreground:
    // the model is told before it relies on one.
    let read_only = if how == BashRun::Sandboxed(sandbox::Profile::ReadOnly) {
        " It runs in the read-only sandbox (no rule or mode lets it write the workspace): a command that must write files or a cache fails there; run such a command in the foreground, where the user is asked."
    } else {
        ""
    };
    let message = format!(
        "Command running in background with ID: {}. Output is being written to: {}. You will be notified when it completes. To check interim output, use TaskOutput with the ID (or Read on that file).{read_only}",
        task.id(),
        task.file().display()
    );
    Ok(ToolOutput::text(message).with_structured(json!({
        "stdout": "",
        "stderr": "",
        "interrupted": false,
        "backgroundTaskId": task.id(),
    })))
}

/// Starts a monitor: `command` in the background as a Bash call of it would run (the
/// sandbox profile the rules give such a call: read-only unless they allow it), each stdout
/// line an event told with the next request, stopped after `deadline` unless `None`
/// (persistent).
pub(crate) fn start_monitor(
    shared: &Arc<Shared>,
    command: &str,
    description: String,
    deadline: Option<Duration>,
    context: &ToolContext,
) -> Result<Arc<crate::background::Task>, ToolError> {
    let gate = PermissionGate::new(Arc::clone(shared), None, None);
    let how = match gate.bash_decision(&json!({ "command": command }), shared.mode.get()) {
        (crate::Verdict::Allow, run) => run,
        // A deny rule for the command wins here as for Bash: the Monitor call was decided
        // by the tool's name alone.
        (crate::Verdict::Deny { reason }, _) => {
            return Err(ToolError::CouldNotRun(format!(
                "the command is refused as a Bash command would be: {reason}"
            )));
        }
        // In bypassPermissions nothing asked about the Monitor call; an ask rule naming the
        // command must still be asked, which only Bash does.
        (crate::Verdict::Ask { reason }, _)
            if shared.mode.get() == crate::PermissionMode::BypassPermissions =>
        {
            return Err(ToolError::CouldNotRun(format!(
                "the command needs approval as a Bash command ({reason}); run it with Bash"
            )));
        }
        (_, _) if shared.sandbox.is_active() => BashRun::Sandboxed(Profile::ReadOnly),
        (_, run) => run,
    };
    let workspace = &shared.effective(&context.workspace);
    let cwd = shared.cwd(workspace);
    let script = script(shared, how, None, command);
    let wrapper = shared.background.wrapper();
    let (prepared, placeholders, _) = prepare(shared, workspace, how, &script, &cwd, wrapper)?;
    shared.background.start(crate::background::Launch {
        command: prepared,
        placeholders,
        text: command.to_owned(),
        description: Some(description),
        tool_use_id: Some(context.tool_use_id.to_string()),
        monitor: true,
        deadline,
    })
}

/// SIGKILLs the process group when dropped armed: the call's future was dropped half-way.
/// Registered in [`RUNNING`] while armed.
struct GroupGuard {
    group: Option<Pid>,
}

impl GroupGuard {
    fn new(group: Pid) -> Self {
        running().push(group.as_raw());
        Self { group: Some(group) }
    }

    /// The command ended on its own: nothing to kill.
    fn disarm(&mut self) {
        if let Some(group) = self.group.take() {
            running().retain(|known| *known != group.as_raw());
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            running().retain(|known| *known != group.as_raw());
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

/// Longest line kept whole while its carriage returns are collapsed; past it, the frames
/// before the last `\r` are collapsed, and a single frame longer than this goes out as it is.
const LINE_CAP: usize = 64 * 1024;

/// Keeps the first and last [`KEEP_BYTES`] of the output, counting the characters dropped
/// between them, after collapsing each line's carriage-return overwrites as a terminal shows
/// them (a progress bar's 3,000 frames become its last frame, before anything is cut).
#[derive(Default)]
struct OutputBuffer {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped_chars: u64,
    total_bytes: u64,
    /// The line being received (not yet ended by `\n`).
    line: Vec<u8>,
}

impl OutputBuffer {
    fn push(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|byte| *byte == b'\n') {
            self.line.extend_from_slice(piece);
            if piece.ends_with(b"\n") {
                let line = std::mem::take(&mut self.line);
                self.push_shown(&overwritten(&line));
            } else if self.line.len() > LINE_CAP {
                self.compact_line();
            }
        }
    }

    /// Bounds the line being received: its frames before the last `\r` become what they
    /// show; a single frame over [`LINE_CAP`] is passed on as it is.
    fn compact_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        match line.iter().rposition(|byte| *byte == b'\r') {
            Some(last) => {
                let mut kept = overwritten(&line[..last]).into_owned();
                kept.push(b'\r');
                kept.extend_from_slice(&line[last + 1..]);
                if kept.len() > LINE_CAP {
                    self.push_shown(&overwritten(&kept));
                } else {
                    self.line = kept;
                }
            }
            None => self.push_shown(&line),
        }
    }

    fn push_shown(&mut self, mut bytes: &[u8]) {
        self.total_bytes += bytes.len() as u64;
        if self.head.len() < KEEP_BYTES {
            let take = (KEEP_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > KEEP_BYTES {
            let excess = self.tail.len() - KEEP_BYTES;
            // A character starts at every byte that is not a UTF-8 continuation byte.
            self.dropped_chars += self
                .tail
                .range(..excess)
                .filter(|byte| **byte & 0xC0 != 0x80)
                .count() as u64;
            self.tail.drain(..excess);
        }
    }

    /// The output, middle-truncated to [`MAX_OUTPUT_CHARS`], trailing whitespace trimmed.
    fn finish(mut self) -> String {
        let line = std::mem::take(&mut self.line);
        self.push_shown(&overwritten(&line));
        let tail: Vec<u8> = self.tail.into();
        let text = if self.dropped_chars == 0 {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            String::from_utf8_lossy(&all).into_owned()
        } else {
            // The rest of a character whose first byte was dropped.
            let start = tail
                .iter()
                .position(|byte| byte & 0xC0 != 0x80)
                .unwrap_or(tail.len());
            let mut text = String::from_utf8_lossy(&self.head).into_owned();
            text.push_str(&String::from_utf8_lossy(&tail[start..]));
            text
        };
        truncate_middle(text.trim_end(), MAX_OUTPUT_CHARS, self.dropped_chars)
    }
}

/// What a terminal shows of `line` (ending with `\n` or not): each `\r` moves back to the
/// start of the line and what follows overwrites what was there, character by character
/// (`first\rsecond` shows `second`, `abcdef\rXY` shows `XYcdef`). A `\r` just before the
/// final `\n` (a CRLF ending) is only an ending.
fn overwritten(line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let (body, newline) = match line.strip_suffix(b"\n") {
        Some(body) => (body.strip_suffix(b"\r").unwrap_or(body), true),
        None => (line, false),
    };
    if !body.contains(&b'\r') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut shown: Vec<char> = Vec::new();
    for frame in body.split(|byte| *byte == b'\r') {
        for (column, c) in String::from_utf8_lossy(frame).chars().enumerate() {
            match shown.get_mut(column) {
                Some(slot) => *slot = c,
                None => shown.push(c),
            }
        }
    }
    let mut text: String = shown.into_iter().collect();
    if newline {
        text.push('\n');
    }
    std::borrow::Cow::Owned(text.into_bytes())
}

/// How the wait for the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Finished,
    Cancelled,
    TimedOut,
}

/// The script `bash -c` runs for `command`: the inherited descriptors closed, the trap that
/// keeps the shell's directory, the session's prelude (Claude Code's `CLAUDE_ENV_FILE`),
/// then the command. The prelude runs before the model's commands, in their shell (in their
/// sandbox); never before a command the user typed.
fn script(shared: &Shared, how: BashRun, cwd_file: Option<&CwdFile>, command: &str) -> String {
    let prelude = if how == BashRun::UserShell {
        String::new()
    } else {
        shared
            .prelude
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    };
    let trap = cwd_file.map_or_else(|| ":".to_owned(), CwdFile::trap);
    if prelude.is_empty() {
        format!("{CLOSE_INHERITED_FDS}{trap}; {command}")
    } else {
        format!("{CLOSE_INHERITED_FDS}{trap}\n{prelude}\n{command}")
    }
}

async fn run(
    shared: &Shared,
    command: &str,
    timeout: Duration,
    how: BashRun,
    context: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let workspace = &shared.effective(&context.workspace);
    let cwd = start_dir(shared, workspace, how)?;
    let cwd_file = CwdFile::new(shared.private.path());
    let script = script(shared, how, Some(&cwd_file), command);
    let (reader, writer) = std::io::pipe().map_err(|e| could_not_run("create a pipe", e))?;
    let mut pipe = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| could_not_run("read the command's output", e))?;
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let job = Job {
        shared,
        workspace,
        how,
        script: &script,
        cwd: &cwd,
    };
    let (ran, profile) = match start_persistent(&job, writer)? {
        Ok(remote) => (
            run_remote(remote, &mut pipe, deadline, context).await?,
            Some(Profile::ReadOnly),
        ),
        Err(writer) => run_local(&job, writer, &mut pipe, deadline, context).await?,
    };
    // Colours and other escape sequences are for a terminal: the model gets the text, the
    // structured result (the terminal's rows, hooks) keeps what the command printed.
    let raw = ran.output.finish();
    let text = crate::text::strip_escapes(&raw).into_owned();
    let elapsed = started.elapsed();
    match ran.end {
        End::Cancelled => {
            tracing::debug!("bash interrupted");
            Err(ToolError::Killed(with_output(
                format!(
                    "Command interrupted after {:.1} s: it was cancelled, and its process group was killed.",
                    elapsed.as_secs_f64()
                ),
                &text,
            )))
        }
        End::TimedOut => Err(ToolError::Killed(with_output(
            format!(
                "Command timed out after {} ms, and its process group was killed.",
                timeout.as_millis()
            ),
            &text,
        ))),
        End::Finished => {
            let status = ran.status.ok_or_else(|| {
                ToolError::CouldNotRun("bash ended without an exit status".into())
            })?;
            // The user's own `cd` is theirs: the model's commands keep their directory.
            let note = if how == BashRun::UserShell {
                None
            } else {
                follow_cwd(shared, workspace, &cwd_file)
            };
            // Claude Code's BashOutput: stdout and stderr come merged through one pipe here,
            // so all of it is `stdout`.
            let structured = json!({
                "stdout": raw,
                "stderr": "",
                "interrupted": false,
                "isImage": false,
            });
            let output = report(status, text, note);
            let output = match profile {
                Some(profile) if refused_by_sandbox(&output) => {
                    with_sandbox_note(output, profile, shared)
                }
                _ => output,
            };
            Ok(output.with_structured(structured))
        }
    }
}

fn could_not_run(what: &str, error: std::io::Error) -> ToolError {
    ToolError::CouldNotRun(format!("could not {what}: {error}"))
}

/// What a command left: how it ended, its status (none when it was stopped and did not
/// end), and its output.
struct Ran {
    end: End,
    status: Option<ExitStatus>,
    output: OutputBuffer,
}

/// Reads the command's output until it ended and its output closed (or a short while after
/// it ended: what it left running is stopped by the caller), the call was cancelled, or
/// `deadline` passed. `wait` ends with the command's status.
async fn collect(
    wait: &mut (impl Future<Output = std::io::Result<ExitStatus>> + Unpin),
    pipe: &mut pipe::Receiver,
    deadline: tokio::time::Instant,
    context: &ToolContext,
) -> Result<Ran, ToolError> {
    let mut output = OutputBuffer::default();
    let mut buffer = vec![0u8; 16 * 1024];
    let mut status: Option<ExitStatus> = None;
    let mut eof = false;
    let mut drain_until: Option<tokio::time::Instant> = None;
    let mut last_progress: Option<Instant> = None;
    let end = loop {
        if eof && status.is_some() {
            break End::Finished;
        }
        tokio::select! {
            biased;
            () = context.cancel.cancelled() => break End::Cancelled,
            () = tokio::time::sleep_until(deadline) => break End::TimedOut,
            waited = &mut *wait, if status.is_none() => match waited {
                Ok(exit) => {
                    status = Some(exit);
                    drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                Err(error) => return Err(could_not_run("wait for bash", error)),
            },
            () = tokio::time::sleep_until(drain_until.unwrap_or(deadline)), if drain_until.is_some() => {
                // Background processes still hold the pipe; they are stopped by the caller.
                break End::Finished;
            }
            read = pipe.read(&mut buffer), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(count) => {
                    output.push(&buffer[..count]);
                    if last_progress.is_none_or(|at| at.elapsed() >= PROGRESS_EVERY) {
                        last_progress = Some(Instant::now());
                        context.progress(progress(&buffer[..count], output.total_bytes));
                    }
                }
            },
        }
    };
    Ok(Ran {
        end,
        status,
        output,
    })
}

/// One command to start: the tool set, the workspace it runs for, how, its script and
/// folder.
struct Job<'a> {
    shared: &'a Shared,
    workspace: &'a executor::Workspace,
    how: BashRun,
    script: &'a str,
    cwd: &'a std::path::Path,
}

/// Starts the command in a process of its own (its sandbox's, or a plain shell) and runs it
/// to its end; returns what it left and its sandbox profile.
async fn run_local(
    job: &Job<'_>,
    writer: std::io::PipeWriter,
    pipe: &mut pipe::Receiver,
    deadline: tokio::time::Instant,
    context: &ToolContext,
) -> Result<(Ran, Option<Profile>), ToolError> {
    let writer_for_stderr = writer
        .try_clone()
        .map_err(|e| could_not_run("create a pipe", e))?;
    let (std_command, mut placeholders, profile) =
        prepare(job.shared, job.workspace, job.how, job.script, job.cwd, &[])?;
    let mut bash = Command::from(std_command);
    bash.stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer_for_stderr)
        .process_group(0);
    let spawned = bash.spawn();
    // Our copies of the pipe's write end must close, or the read end never sees EOF.
    drop(bash);
    let mut child = spawned.map_err(|e| could_not_run("start bash", e))?;
    let Some(group) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw)
    else {
        return Err(ToolError::CouldNotRun(
            "bash exited before it could be watched".into(),
        ));
    };
    let mut guard = GroupGuard::new(group);
    tracing::debug!(pid = group.as_raw(), cwd = %job.cwd.display(), "bash started");
    let mut ran = {
        let mut wait = Box::pin(child.wait());
        collect(&mut wait, pipe, deadline, context).await?
    };
    stop_command(group, &mut child, placeholders.as_mut()).await;
    if ran.status.is_none() && ran.end == End::Finished {
        ran.status = child.wait().await.ok();
    }
    let mut buffer = vec![0u8; 16 * 1024];
    drain(pipe, &mut buffer, &mut ran.output).await;
    release_sandbox(placeholders.take(), ran.status);
    guard.disarm();
    Ok((ran, profile))
}

/// A read-only sandboxed command started in the session's persistent sandbox
/// ([`Shared::zygote`]), its output to `writer`; `Err(writer)` back when it has none or
/// it did not take the command (too long, ended), so the command starts the usual way.
fn start_persistent(
    job: &Job<'_>,
    writer: std::io::PipeWriter,
) -> Result<Result<sandbox::Remote, std::io::PipeWriter>, ToolError> {
    let Job {
        shared,
        workspace,
        how,
        script,
        cwd,
    } = *job;
    if how != BashRun::Sandboxed(Profile::ReadOnly) || shared.sandbox.helper.is_none() {
        return Ok(Err(writer));
    }
    let policy =
        sandboxing::policy(shared, workspace, Profile::ReadOnly).map_err(ToolError::CouldNotRun)?;
    let Some(zygote) = shared.zygote(&policy, cwd) else {
        return Ok(Err(writer));
    };
    let shell = sandbox::env::resolve_program("bash")
        .map_err(|error| ToolError::CouldNotRun(error.to_string()))?;
    // The environment a sandbox of its own would give it.
    let mut probe = std::process::Command::new(&shell);
    probe.env("TMPDIR", &policy.temp_dir);
    sandbox::env::reset(
        &mut probe,
        sandbox::env::Confinement::Sandboxed,
        &shared.env,
    );
    let env = probe
        .get_envs()
        .filter_map(|(name, value)| Some((name.to_owned(), value?.to_owned())))
        .collect();
    let spec = sandbox::Spec {
        program: shell,
        args: vec!["-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        env,
    };
    let stdio = (|| {
        Ok::<_, std::io::Error>([
            OwnedFd::from(std::fs::File::open("/dev/null")?),
            OwnedFd::from(writer.try_clone()?),
            OwnedFd::from(writer.try_clone()?),
        ])
    })()
    .map_err(|e| could_not_run("create a pipe", e))?;
    match zygote.run(&spec, stdio) {
        // Our copy of the pipe's write end goes: the read end sees EOF when the command's do.
        Ok(remote) => Ok(Ok(remote)),
        Err(error) => {
            tracing::debug!(%error, "a sandbox of its own");
            Ok(Err(writer))
        }
    }
}

/// Kills a persistent sandbox's command when the call is dropped half-way.
struct RemoteGuard(sandbox::Remote);

impl Drop for RemoteGuard {
    fn drop(&mut self) {
        // After the command ended this asks for nothing (the sandbox knows it ended).
        self.0.signal(Signal::SIGKILL);
    }
}

/// Runs a command started in the persistent sandbox to its end: as [`run_local`] does, a
/// command stopped gets `SIGTERM`, then `SIGKILL` after [`TERM_GRACE`]; what it started
/// is stopped by the sandbox when it ends.
async fn run_remote(
    remote: sandbox::Remote,
    pipe: &mut pipe::Receiver,
    deadline: tokio::time::Instant,
    context: &ToolContext,
) -> Result<Ran, ToolError> {
    use futures_util::FutureExt as _;
    let _guard = RemoteGuard(remote.clone());
    let waiter = remote.clone();
    let mut wait = tokio::task::spawn_blocking(move || waiter.wait())
        .map(|joined| joined.unwrap_or_else(|error| Err(std::io::Error::other(error))));
    let mut ran = collect(&mut wait, pipe, deadline, context).await?;
    if ran.status.is_none() {
        remote.signal(Signal::SIGTERM);
        ran.status = match tokio::time::timeout(TERM_GRACE, &mut wait).await {
            Ok(status) => status.ok(),
            Err(_) => {
                remote.signal(Signal::SIGKILL);
                tokio::time::timeout(Duration::from_secs(1), &mut wait)
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
        };
    }
    let mut buffer = vec![0u8; 16 * 1024];
    drain(pipe, &mut buffer, &mut ran.output).await;
    Ok(ran)
}

/// After everything a sandboxed command started is stopped (its sandbox killed:
/// [`sandbox::PlaceholderGuard::kill_sandbox`]): a sandbox whose process exited with
/// `status` tells whether it could be set up (else its recorded back end is probed again at
/// the next start, see [`sandbox::PlaceholderGuard::exited`]), and its placeholders go once
/// its last process is gone: at once when it is (the usual case, so a caller sees them gone
/// when this returns), else on a blocking thread when called on a tokio runtime (up to 10 s
/// while the kernel kills hundreds of processes: on the runtime's own threads that wait
/// froze the terminal and every other task, found when Ctrl-C in a command's first
/// milliseconds left its sandbox running).
pub fn release_sandbox(
    placeholders: Option<sandbox::PlaceholderGuard>,
    status: Option<ExitStatus>,
) {
    let Some(mut placeholders) = placeholders else {
        return;
    };
    let wait = placeholders.must_wait();
    let release = move || match status {
        Some(exit) => placeholders.exited(exit),
        None => drop(placeholders),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if wait => drop(runtime.spawn_blocking(release)),
        _ => release(),
    }
}

/// Where a command starts: the shell's working directory (a command the user typed: where
/// the session started, never where the model went).
///
/// # Errors
///
/// That folder no longer exists.
fn start_dir(
    shared: &Shared,
    workspace: &Workspace,
    how: BashRun,
) -> Result<std::path::PathBuf, ToolError> {
    let cwd = if how == BashRun::UserShell {
        workspace.cwd.clone()
    } else {
        shared.cwd(workspace)
    };
    if !cwd.is_dir() {
        return Err(ToolError::CouldNotRun(format!(
            "the working directory {} does not exist",
            cwd.display()
        )));
    }
    Ok(cwd)
}

/// A command ready to start, the placeholders to remove when it ends (sandboxed), and the
/// sandbox profile it runs in (`None`: unsandboxed).
type Prepared = (
    std::process::Command,
    Option<sandbox::PlaceholderGuard>,
    Option<Profile>,
);

/// The `bash -c script` command for `how`: the sandbox's (with the placeholders to remove
/// when it ends, and its profile) or a plain one, with the environment it gets
/// ([`sandbox::env::reset`], or the user's shell's for a command the user typed).
fn prepare(
    shared: &Shared,
    workspace: &Workspace,
    how: BashRun,
    script: &str,
    cwd: &std::path::Path,
    wrapper: &[std::ffi::OsString],
) -> Result<Prepared, ToolError> {
    // Found once, outside the workspace: never the repository's own `bash`.
    let shell = sandbox::env::resolve_program("bash")
        .map_err(|error| ToolError::CouldNotRun(error.to_string()))?;
    let (mut std_command, placeholders, profile) = match how {
        BashRun::Unsandboxed | BashRun::UserShell => {
            let mut bash = match wrapper.split_first() {
                None => {
                    let mut bash = std::process::Command::new(&shell);
                    // `$0` stays `bash`, as when it was found by name.
                    std::os::unix::process::CommandExt::arg0(&mut bash, "bash");
                    bash
                }
                Some((program, arguments)) => {
                    let mut guarded = std::process::Command::new(program);
                    guarded.args(arguments).arg(&shell);
                    guarded
                }
            };
            bash.arg("-c").arg(script).current_dir(cwd);
            (bash, None, None)
        }
        BashRun::Sandboxed(profile) => {
            let Some(backend) = shared.sandbox.backend.clone() else {
                return Err(ToolError::CouldNotRun(
                    "the sandbox is off, but this call was allowed only in the sandbox".into(),
                ));
            };
            let policy =
                sandboxing::policy(shared, workspace, profile).map_err(ToolError::CouldNotRun)?;
            let prepared = sandbox::Sandbox::new(backend)
                .wrapped(wrapper.to_vec())
                .command(
                    &policy,
                    shell.as_os_str(),
                    &["-c".into(), script.into()],
                    cwd,
                )
                .map_err(|error| ToolError::CouldNotRun(error.to_string()))?;
            (prepared.command, Some(prepared.guard), Some(profile))
        }
    };
    let confinement = match profile {
        Some(_) => sandbox::env::Confinement::Sandboxed,
        None => sandbox::env::Confinement::Unsandboxed,
    };
    if how == BashRun::UserShell {
        sandbox::env::user_shell(&mut std_command, &shared.env, &shared.withheld_env);
    } else {
        sandbox::env::reset(&mut std_command, confinement, &shared.env);
    }
    Ok((std_command, placeholders, profile))
}

/// Messages with which the operating system refuses what a sandbox does not allow.
const REFUSALS: [&str; 8] = [
    "Read-only file system",
    "Device or resource busy",
    "Permission denied",
    "Operation not permitted",
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
];

fn refused_by_sandbox(output: &ToolOutput) -> bool {
    let protocol::ToolResultContent::Text(text) = &output.content else {
        return false;
    };
    REFUSALS.iter().any(|refusal| text.contains(refusal))
}

/// Why the user is asked about a command the read-only sandbox refused.
const ESCALATION_REASON: &str = "it needs to write the workspace: the read-only sandbox refused a write. Yes runs it again with the workspace writable (still sandboxed: no network, .git and settings read-only)";

/// Said after the result of a command run again with the workspace writable.
const RERUN_NOTE: &str = "(The read-only sandbox refused a write, so this command ran again with the workspace writable, as the user allowed.)";

/// Whether a read-only run's `output` shows a refused write that the workspace-write
/// profile would allow: a line with the operating system's refusal ("Read-only file
/// system" under bubblewrap, "Permission denied" or "Operation not permitted" under
/// Landlock) naming a path the workspace-write policy may write, or naming none it can be
/// told from. A line naming only paths it may not write (outside the workspace, `.git`)
/// does not count: writing the workspace would not help. Read from the command's output to
/// decide whether to ask, never to allow: the user's answer allows.
fn refused_writes_in_workspace(
    shared: &Shared,
    workspace: &Workspace,
    output: &ToolOutput,
) -> bool {
    const WRITE_REFUSALS: [&str; 3] = [
        "Read-only file system",
        "Permission denied",
        "Operation not permitted",
    ];
    let protocol::ToolResultContent::Text(text) = &output.content else {
        return false;
    };
    let Ok(policy) = sandboxing::policy(shared, workspace, Profile::WorkspaceWrite) else {
        return false;
    };
    let cwd = shared.cwd(workspace);
    text.lines()
        .filter(|line| WRITE_REFUSALS.iter().any(|refusal| line.contains(refusal)))
        .any(|line| {
            let named = named_paths(line);
            named.is_empty()
                || named
                    .iter()
                    .any(|path| policy.writes(&paths::lexical(path, &cwd)))
        })
}

/// The paths a refusal line names, as tools print them: quoted (`touch: cannot touch
/// 'out.txt': ...`, npm's `open '/w/x'`, `"x"`, `‘x’`), or the field before the refusal
/// (`bash: out.txt: Read-only file system`).
fn named_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (open, close) in [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')] {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let quoted = &after[..end];
            if !quoted.is_empty() && (!quoted.contains(' ') || quoted.contains('/')) {
                found.push(quoted.to_owned());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    if found.is_empty() {
        let fields: Vec<&str> = line.split(": ").collect();
        if let Some(at) = fields.iter().position(|field| {
            field.starts_with("Read-only file system")
                || field.starts_with("Permission denied")
                || field.starts_with("Operation not permitted")
        }) && at >= 1
        {
            let field = fields[at - 1].trim();
            if !field.is_empty() && !field.contains(' ') {
                found.push(field.to_owned());
            }
        }
    }
    found
}

/// `output` with `note` after its text, a blank line between.
fn with_note(mut output: ToolOutput, note: &str) -> ToolOutput {
    if let protocol::ToolResultContent::Text(text) = &mut output.content {
        text.push_str("\n\n");
        text.push_str(note);
    }
    output
}

/// Adds to a result that shows a refusal what the sandbox allowed, so the model can tell a refusal from a
/// bug and knows how to ask for more.
fn with_sandbox_note(output: ToolOutput, profile: Profile, shared: &Shared) -> ToolOutput {
    let network = profile == Profile::WorkspaceWrite && shared.sandbox.network;
    let allowed = match profile {
        Profile::ReadOnly => format!(
            "nothing may be written except $TMPDIR ({}), because no allow rule or permission mode lets this command write",
            shared.private.path().display()
        ),
        Profile::WorkspaceWrite => format!(
            "only the workspace (not .git, .agent, .claude or .mcp.json) and $TMPDIR ({}) may be written{}",
            shared.private.path().display(),
            match &shared.sandbox.backend {
                Some(sandbox::Backend::Landlock(_)) =>
                    " (under this Landlock sandbox, no new file or folder can be made directly in the workspace's top folder: create it in a subfolder, or ask)",
                _ => "",
            }
        ),
    };
    let network = if network {
        ""
    } else {
        ", and there is no network"
    };
    let how = match profile {
        Profile::ReadOnly => format!(
            "If it failed because it needs to write the workspace, the user must allow that (an allow rule such as `Bash(npm install:*)`, or acceptEdits mode); only if it needs the network or files outside the workspace, call Bash again with {DISABLE_SANDBOX_FIELD}: true; the user will be asked to approve it."
        ),
        Profile::WorkspaceWrite => format!(
            "If it failed because the sandbox refused something it needs, call Bash again with {DISABLE_SANDBOX_FIELD}: true; the user will be asked to approve it."
        ),
    };
    let note = format!("\n\nThis command ran in the {profile} sandbox: {allowed}{network}. {how}");
    let mut output = output;
    if let protocol::ToolResultContent::Text(text) = &mut output.content {
        text.push_str(&note);
    }
    output
}

/// A progress report: the last non-empty line of the latest output.
fn progress(chunk: &[u8], total_bytes: u64) -> ToolProgress {
    let text = String::from_utf8_lossy(chunk);
    let line = text
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default();
    let line: String = line.chars().take(200).collect();
    ToolProgress {
        message: line,
        data: Some(json!({ "output_bytes": total_bytes })),
    }
}

fn with_output(message: String, text: &str) -> String {
    if text.is_empty() {
        message
    } else {
        format!("{message}\nOutput before it stopped:\n{text}")
    }
}

/// The result of a command that ran to its end.
fn report(status: ExitStatus, text: String, note: Option<String>) -> ToolOutput {
    let mut body = text;
    let failure = match (status.code(), status.signal()) {
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("Exit code {code}")),
        (None, Some(signal)) => Some(match Signal::try_from(signal) {
            Ok(name) => format!("Killed by signal {signal} ({name})"),
            Err(_) => format!("Killed by signal {signal}"),
        }),
        (None, None) => Some("Exited abnormally".to_owned()),
    };
    if let Some(note) = note {
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str(&note);
    }
    match failure {
        None if body.is_empty() => ToolOutput::text("(no output)"),
        None => ToolOutput::text(body),
        Some(failure) if body.is_empty() => ToolOutput::error(format!("{failure} (no output)")),
        Some(failure) => ToolOutput::error(format!("{body}\n\n{failure}")),
    }
}

/// Stops everything a command started: what is in its sandbox
/// ([`sandbox::PlaceholderGuard::kill_sandbox`]: the sandbox's processes are in a session of
/// their own, out of the group's reach), then its process group ([`stop_group`]). bubblewrap
/// is not stopped before it has named the sandbox's first process (at most
/// [`SANDBOX_REPORT_WAIT`]): stopped earlier it never would, and the sandbox would run on
/// (found by an attack: a 1 ms timeout left one running about once in 200 runs).
async fn stop_command(
    group: Pid,
    child: &mut Child,
    mut sandbox: Option<&mut sandbox::PlaceholderGuard>,
) {
    if let Some(sandbox) = sandbox.as_deref_mut() {
        let deadline = Instant::now() + SANDBOX_REPORT_WAIT;
        while !sandbox.sandbox_known() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        sandbox.kill_sandbox();
    }
    stop_group(group, child).await;
    // bubblewrap has exited: what it said is complete.
    if let Some(sandbox) = sandbox {
        sandbox.kill_sandbox();
    }
}

/// How long a command being stopped may take to name its sandbox's first process (see
/// [`stop_command`]); bubblewrap does within milliseconds.
const SANDBOX_REPORT_WAIT: Duration = Duration::from_millis(500);

/// Stops whatever is left in the process group: SIGTERM, then SIGKILL after
/// [`TERM_GRACE`]. Reaps the shell itself so its zombie does not keep the group alive.
async fn stop_group(group: Pid, child: &mut Child) {
    let _ = child.try_wait();
    if killpg(group, None).is_err() {
        return; // nobody left
    }
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + TERM_GRACE;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let _ = child.try_wait();
        if killpg(group, None).is_err() {
            return;
        }
    }
    let _ = killpg(group, Signal::SIGKILL);
    // The shell is ours to reap; the rest are reaped by init.
    let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
}

/// Reads what is left in the pipe after the group was stopped (bounded: a process that left
/// the group may hold the pipe forever).
async fn drain(pipe: &mut pipe::Receiver, buffer: &mut [u8], output: &mut OutputBuffer) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(100);
    loop {
        match tokio::time::timeout_at(deadline, pipe.read(buffer)).await {
            Ok(Ok(count)) if count > 0 => output.push(&buffer[..count]),
            _ => return,
        }
    }
}

/// Follows the shell's final directory; a note when it left the workspace.
fn follow_cwd(shared: &Shared, workspace: &executor::Workspace, file: &CwdFile) -> Option<String> {
    let dir = file.read()?;
    let dir = paths::real_path(&dir).ok()?;
    if paths::is_under(&dir, &paths::roots(workspace)) {
        shared.set_shell_cwd(Some(dir));
        return None;
    }
    shared.set_shell_cwd(None);
    let home = shared.cwd(workspace);
    tracing::debug!(left = %dir.display(), "shell cwd reset");
    Some(format!(
        "Shell cwd was reset to {} ({} is outside the workspace).",
        home.display(),
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_buffer_keeps_everything_when_small() {
        let mut buffer = OutputBuffer::default();
        buffer.push(b"hello\n");
        buffer.push("wörld\n\n".as_bytes());
        assert_eq!(buffer.finish(), "hello\nwörld");
    }

    #[test]
    fn carriage_return_frames_collapse_as_a_terminal_shows_them() {
        // The public reports' inputs: `printf 'first\rsecond\n'`, and a progress bar of
        // 3,000 frames.
        let mut buffer = OutputBuffer::default();
        buffer.push(b"first\rsecond\n");
        assert_eq!(buffer.finish(), "second");
        let mut buffer = OutputBuffer::default();
        let bar: String = (0..3_000)
            .map(|n| format!("\r{:>3}% [{:<6}]", n / 30, "#".repeat(n / 500)))
            .collect();
        for chunk in bar.as_bytes().chunks(1000) {
            buffer.push(chunk);
        }
        buffer.push(b"\ndone\n");
        assert_eq!(buffer.finish(), " 99% [##### ]\ndone");
        // Shorter frames leave the end of longer ones, a CRLF ending is left as it is, and
        // multi-byte characters overwrite whole.
        let mut buffer = OutputBuffer::default();
        buffer.push("abcdef\rXY\nline\r\nünï\rö\r\n".as_bytes());
        assert_eq!(buffer.finish(), "XYcdef\nline\r\nönï");
        // A single endless frame is bounded, and passed on.
        let mut buffer = OutputBuffer::default();
        buffer.push(&vec![b'x'; 3 * LINE_CAP]);
        assert!(buffer.line.len() <= LINE_CAP);
        let out = buffer.finish();
        assert!(out.contains("characters truncated"), "{}", &out[..100]);
        assert!(out.chars().filter(|c| *c == 'x').count() <= MAX_OUTPUT_CHARS);
    }

    #[test]
    fn output_buffer_cuts_the_middle_and_counts_exactly() {
        let mut buffer = OutputBuffer::default();
        let total = 300_000usize;
        let text: String = (0..total)
            .map(|i| if i % 100 == 99 { '\n' } else { 'é' })
            .collect();
        for chunk in text.as_bytes().chunks(4093) {
            buffer.push(chunk);
        }
        let out = buffer.finish();
        let marker = format!(
            "[... {} characters truncated ...]",
            total - MAX_OUTPUT_CHARS - 1
        );
        // `- 1`: the final newline is trimmed before the cut is counted.
        assert!(out.contains(&marker), "{}", &out[..200]);
        let kept: usize = out
            .split(&marker)
            .map(|part| part.trim_matches('\n').chars().count())
            .sum();
        assert!(kept <= MAX_OUTPUT_CHARS);
    }

    #[test]
    fn reports() {
        let ok = ExitStatus::from_raw(0);
        let failed = ExitStatus::from_raw(3 << 8);
        let killed = ExitStatus::from_raw(9);
        assert_eq!(
            report(ok, String::new(), None),
            ToolOutput::text("(no output)")
        );
        assert_eq!(report(ok, "hi".into(), None), ToolOutput::text("hi"));
        assert_eq!(
            report(failed, "oops".into(), None),
            ToolOutput::error("oops\n\nExit code 3")
        );
        assert_eq!(
            report(failed, String::new(), None),
            ToolOutput::error("Exit code 3 (no output)")
        );
        assert_eq!(
            report(killed, String::new(), None),
            ToolOutput::error("Killed by signal 9 (SIGKILL) (no output)")
        );
    }
}
