//! Command hooks with Claude Code's protocol: the event as JSON on stdin; exit 0 goes on
//! (stdout may hold a JSON answer), exit 2 blocks with stderr as the reason, any other exit is
//! a non-blocking error. JSON answers: `{"decision":"block","reason":…}` blocks,
//! `{"continue":false,"stopReason":…}` ends the run (a Stop hook) or refuses the call (a
//! PreToolUse hook: a permission check cannot end the run), and `hookSpecificOutput` with
//! `permissionDecision` `allow` | `deny` | `ask` (PreToolUse) or `additionalContext`
//! (PostToolUse). `"decision":"approve"` is the older spelling of allow.
//!
//! Hooks run with `bash -c` in the working directory, with `CLAUDE_PROJECT_DIR` set to it and
//! settings' `env` applied over the variables commands receive from the agent's environment
//! (`sandbox::env::PASSED_VARIABLES`: never its keys and tokens, and a `PATH` without empty
//! or relative entries); `bash` is the one found once outside the workspace. Each hook runs
//! through the MCP guard (`mcp::guard`, the agent binary re-executed) in a session and
//! process group of their own, with no controlling terminal, and dies with the agent however
//! it ends. The first 1 MiB of each of stdout and stderr is kept. The hook is done when its
//! process exits; what it left running in the background is killed then (as the Bash tool
//! does). On timeout or cancellation the whole process group is killed. A hook that fails or
//! times out never ends the session.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use executor::{
    CanUseTool, PermissionDecision, PermissionFuture, Tool, ToolCall, ToolContext, ToolFuture,
};
use loop_core::{StopDecision, StopFuture, StopHook, StopHookInput};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use crate::settings::HookMatcher;
use render::printable;

/// How much of a hook's stdout and of its stderr is kept: 1 MiB each.
const OUTPUT_CAP: usize = 1 << 20;

/// How long the pipes may stay open after the hook exited (a background child holding them).
const PIPE_GRACE: Duration = Duration::from_millis(250);

/// What one hook answered.
#[derive(Debug, PartialEq)]
enum Answer {
    /// Nothing to say.
    Go,
    /// Exit 2, `decision: block`, or `permissionDecision: deny`.
    Block(String),
    /// `continue: false`.
    End(String),
    /// `permissionDecision: allow` (or `decision: approve`).
    Allow,
    /// `permissionDecision: ask`.
    Ask,
    /// `additionalContext`.
    Context(String),
}

/// What every hook of an event answered, together.
#[derive(Debug, Default, PartialEq)]
struct Verdict {
    /// The first `continue: false`.
    end: Option<String>,
    /// Every block's reason.
    blocks: Vec<String>,
    /// Some hook allowed the call.
    allow: bool,
    /// Some hook wants the user asked.
    ask: bool,
    /// Extra context for the model.
    context: Vec<String>,
}

/// Facts every hook event carries. Clones share the session part, so a new session (the
/// interactive `/clear`) reaches every hook at once.
#[derive(Clone, Debug)]
pub struct HookEnv {
    /// The session id and its transcript file.
    pub session: Arc<Mutex<(String, PathBuf)>>,
    /// The working directory (hooks run there).
    pub cwd: PathBuf,
    /// The permission mode's name at start.
    pub permission_mode: String,
    /// The session's gate once built: the mode hooks are told is the one in force when they
    /// run (the user may switch it: Shift+Tab, an approved plan).
    pub gate: Arc<std::sync::OnceLock<Arc<tools::PermissionGate>>>,
    /// Extra environment of every hook (settings' `env`).
    pub env: Vec<(String, String)>,
    /// The program that runs [`mcp::guard::guard_main`] (the agent binary): hooks start
    /// through it, in a session of their own and tied to the agent's life. `None` starts
    /// them directly in a process group of their own (tests of this module, whose binary has
    /// no guard).
    pub guard: Option<PathBuf>,
    /// Where a hook's failures are told (one that could not start, failed or timed out).
    pub notices: crate::Notices,
}

impl HookEnv {
    /// Points every hook at a new session.
    pub fn set_session(&self, session_id: String, transcript_path: PathBuf) {
        *self.session.lock().unwrap_or_else(PoisonError::into_inner) =
            (session_id, transcript_path);
    }

    fn event(&self, name: &str, mut fields: Value) -> Value {
        let (session_id, transcript_path) = self
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut event = json!({
            "session_id": session_id,
            "transcript_path": transcript_path,
            "cwd": self.cwd,
            "permission_mode": self
                .gate
                .get()
                .map_or(self.permission_mode.as_str(), |gate| gate.mode().as_str()),
            "hook_event_name": name,
        });
        if let (Some(event), Some(fields)) = (event.as_object_mut(), fields.as_object_mut()) {
            event.append(fields);
        }
        event
    }
}

/// Kills a process group when dropped, unless disarmed: a hook that times out or whose
/// caller is cancelled leaves nothing running. The group is the hook's pid; the process
/// itself is killed first (the guard may not have made its group yet, and then dies before
/// it starts anything).
struct GroupKill(Option<i32>);

impl GroupKill {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let pid = nix::unistd::Pid::from_raw(group);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Reads `pipe` to its end, keeping the first [`OUTPUT_CAP`] bytes in `kept`.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, kept: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..read.min(room)]);
            }
        }
    }
}

/// Runs one hook command with `input` on stdin.
async fn run_command(env: &HookEnv, command: &str, timeout: Duration, input: &Value) -> Answer {
    let line = match command_line(env, command) {
        Ok(line) => line,
        Err(error) => {
            env.notices.say(&format!(
                "hook `{}` could not start: {error}",
                printable(command, false)
            ));
            return Answer::Go;
        }
    };
    let child = tokio::process::Command::from(line)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            env.notices.say(&format!(
                "hook `{}` could not start: {error}",
                printable(command, false)
            ));
            return Answer::Go;
        }
    };
    let mut group = GroupKill(child.id().and_then(|pid| i32::try_from(pid).ok()));
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    if let Some(pipe) = child.stdout.take() {
        readers.push(tokio::spawn(read_capped(pipe, Arc::clone(&stdout))));
    }
    if let Some(pipe) = child.stderr.take() {
        readers.push(tokio::spawn(read_capped(pipe, Arc::clone(&stderr))));
    }
    // Writing the event counts against the timeout too, but does not hold the hook up: a
    // hook that never reads its stdin is done when it exits.
    let feed = child.stdin.take().map(|mut stdin| {
        let payload = input.to_string();
        tokio::spawn(async move {
            let _ = stdin.write_all(payload.as_bytes()).await;
        })
    });
    let status = tokio::time::timeout(timeout, child.wait()).await;
    if let Some(feed) = feed {
        feed.abort();
    }
    let status = match status {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => {
            env.notices.say(&format!(
                "hook `{}` failed: {error}",
                printable(command, false)
            ));
            return Answer::Go;
        }
        Err(_) => {
            // `group` kills the hook and everything it started on the way out.
            env.notices.say(&format!(
                "hook `{}` timed out after {} s",
                printable(command, false),
                timeout.as_secs()
            ));
            return Answer::Go;
        }
    };
    // It exited: the guard has ended what it left in the background (without a guard, as
    // in unit tests, that goes on).
    group.disarm();
    let _ = tokio::time::timeout(PIPE_GRACE, async {
        for reader in &mut readers {
            let _ = reader.await;
        }
    })
    .await;
    for reader in &readers {
        reader.abort();
    }
    let text = |kept: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&kept.lock().unwrap_or_else(PoisonError::into_inner))
            .trim()
            .to_owned()
    };
    let (stdout, stderr) = (text(&stdout), text(&stderr));
    answer(&env.notices, command, status, &stdout, stderr)
}

/// The command line of a hook: `bash -c COMMAND` (bash found outside the workspace), through
/// the guard when there is one (a session and process group of its own, dying with the
/// agent), in the working directory, with the allow-listed environment, settings' `env` and
/// `CLAUDE_PROJECT_DIR`.
fn command_line(env: &HookEnv, command: &str) -> Result<std::process::Command, String> {
    let bash = tools::sandbox::env::resolve_program("bash").map_err(|error| error.to_string())?;
    let mut line = match &env.guard {
        Some(guard) => {
            // Not in a group of its own: the guard's `setsid` makes its session and group.
            let mut line = std::process::Command::new(guard);
            line.arg(mcp::guard::GUARD_ARG)
                .arg(mcp::guard::NEW_SESSION_FLAG)
                .arg(std::process::id().to_string())
                .arg(&bash);
            line
        }
        None => {
            let mut line = std::process::Command::new(&bash);
            std::os::unix::process::CommandExt::arg0(&mut line, "bash");
            std::os::unix::process::CommandExt::process_group(&mut line, 0);
            line
        }
    };
    line.arg("-c")
        .arg(command)
        .current_dir(&env.cwd)
        .env("CLAUDE_PROJECT_DIR", &env.cwd);
    tools::sandbox::env::reset(
        &mut line,
        tools::sandbox::env::Confinement::Unsandboxed,
        &env.env,
    );
    Ok(line)
}

/// What a hook that exited with `status` answers: exit 2 blocks (with its stderr), exit 0
/// answers with its stdout (JSON or nothing), anything else is reported and lets the call
/// go on.
fn answer(
    notices: &crate::Notices,
    command: &str,
    status: std::process::ExitStatus,
    stdout: &str,
    stderr: String,
) -> Answer {
    match status.code() {
        Some(2) => Answer::Block(if stderr.is_empty() {
            format!("blocked by hook `{command}`")
        } else {
            stderr
        }),
        Some(0) => {
            // Text is fine (it says nothing); something meant as JSON that does not parse is
            // a broken hook the user should hear about.
            let looks_like_json = stdout.starts_with('{') || stdout.starts_with('[');
            if looks_like_json && serde_json::from_str::<Value>(stdout).is_err() {
                notices.say(&format!(
                    "hook `{}` printed invalid JSON, ignored: {}",
                    printable(command, false),
                    printable(&stdout.chars().take(200).collect::<String>(), false)
                ));
            }
            json_answer(stdout)
        }
        _ => {
            notices.say(&failure_line(command, &status.to_string(), &stderr));
            Answer::Go
        }
    }
}

/// The stderr line of a hook that failed: its command and output with control and escape
/// sequences neutralised (a hook's output must not drive the terminal).
fn failure_line(command: &str, status: &str, stderr: &str) -> String {
    format!(
        "hook `{}` failed ({status}): {}",
        printable(command, false),
        printable(stderr, true)
    )
}

/// The answer in a hook's stdout (exit 0); anything that is not a JSON object says nothing.
fn json_answer(stdout: &str) -> Answer {
    let Ok(answer) = serde_json::from_str::<Value>(stdout) else {
        return Answer::Go;
    };
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    if answer.get("continue") == Some(&Value::Bool(false)) {
        return Answer::End(
            text(&answer, "stopReason").unwrap_or_else(|| "stopped by a hook".into()),
        );
    }
    match answer.get("decision").and_then(Value::as_str) {
        Some("block") => {
            return Answer::Block(
                text(&answer, "reason").unwrap_or_else(|| "blocked by a hook".into()),
            );
        }
        Some("approve") => return Answer::Allow,
        _ => {}
    }
    if let Some(specific) = answer.get("hookSpecificOutput") {
        let reason = text(specific, "permissionDecisionReason");
        match specific.get("permissionDecision").and_then(Value::as_str) {
            Some("deny") => {
                return Answer::Block(reason.unwrap_or_else(|| "denied by a hook".into()));
            }
            Some("allow") => return Answer::Allow,
            Some("ask") => return Answer::Ask,
            _ => {}
        }
        if let Some(context) = text(specific, "additionalContext") {
            return Answer::Context(context);
        }
    }
    Answer::Go
}

/// Runs every hook of `matchers` that applies to `tool` (all of them for `None`), in order;
/// stops at the first `continue: false`.
async fn run_all(
    env: &HookEnv,
    matchers: &[HookMatcher],
    tool: Option<&str>,
    input: &Value,
) -> Verdict {
    let mut verdict = Verdict::default();
    for matcher in matchers
        .iter()
        .filter(|matcher| tool.is_none_or(|tool| matcher.matches(tool)))
    {
        for hook in matcher.hooks.iter().filter(|hook| hook.kind == "command") {
            let Some(command) = &hook.command else {
                continue;
            };
            let timeout = Duration::from_secs(hook.timeout.unwrap_or(60));
            match run_command(env, command, timeout, input).await {
                Answer::Go => {}
                Answer::End(reason) => {
                    verdict.end = Some(reason);
                    return verdict;
                }
                Answer::Block(reason) => verdict.blocks.push(reason),
                Answer::Allow => verdict.allow = true,
                Answer::Ask => verdict.ask = true,
                Answer::Context(context) => verdict.context.push(context),
            }
        }
    }
    verdict
}

/// The Stop hooks of the settings, as loop-core's stop hook; or a subagent's SubagentStop
/// hooks ([`CommandStopHook::subagent`]).
#[derive(Debug)]
pub struct CommandStopHook {
    env: HookEnv,
    matchers: Vec<HookMatcher>,
    /// `Stop` or `SubagentStop`.
    event: &'static str,
    /// The fields a SubagentStop event adds (`agent_id`, `agent_type`,
    /// `agent_transcript_path`).
    fields: serde_json::Map<String, Value>,
    /// What matchers are matched against (a subagent's type); `None`: every matcher applies.
    subject: Option<String>,
}

impl CommandStopHook {
    /// Stop hooks from `matchers`.
    pub fn new(env: HookEnv, matchers: Vec<HookMatcher>) -> Self {
        Self {
            env,
            matchers,
            event: "Stop",
            fields: serde_json::Map::new(),
            subject: None,
        }
    }

    /// SubagentStop hooks from `matchers` for one subagent, with Claude Code's payload:
    /// `agent_id`, `agent_type` (also what a matcher is matched against) and
    /// `agent_transcript_path`, besides `stop_hook_active` and `last_assistant_message`. A
    /// hook that blocks makes the subagent go on with the reason, as a Stop hook does.
    pub fn subagent(
        env: HookEnv,
        matchers: Vec<HookMatcher>,
        agent_id: &str,
        agent_type: &str,
        transcript: &Path,
    ) -> Self {
        let mut fields = serde_json::Map::new();
        fields.insert("agent_id".to_owned(), json!(agent_id));
        fields.insert("agent_type".to_owned(), json!(agent_type));
        fields.insert("agent_transcript_path".to_owned(), json!(transcript));
        Self {
            env,
            matchers,
            event: "SubagentStop",
            fields,
            subject: Some(agent_type.to_owned()),
        }
    }
}

impl StopHook for CommandStopHook {
    fn on_stop(&self, input: StopHookInput) -> StopFuture<'_> {
        Box::pin(async move {
            let mut fields = self.fields.clone();
            fields.insert("stop_hook_active".to_owned(), json!(input.stop_hook_active));
            fields.insert(
                "last_assistant_message".to_owned(),
                json!(input.last_assistant_message.text()),
            );
            let event = self.env.event(self.event, Value::Object(fields));
            let verdict = run_all(&self.env, &self.matchers, self.subject.as_deref(), &event).await;
            if let Some(reason) = verdict.end {
                StopDecision::Prevent { reason }
            } else if verdict.blocks.is_empty() {
                StopDecision::Allow
            } else {
                StopDecision::Block {
                    reasons: verdict.blocks,
                }
            }
        })
    }
}

/// PreToolUse hooks in front of the permission gate: a hook that blocks denies the call; one
/// that allows it skips the question but not a deny rule or plan mode; one that asks makes
/// the gate ask even where the rules allow (a headless run refuses).
pub struct HookedGate {
    env: HookEnv,
    matchers: Vec<HookMatcher>,
    inner: Arc<tools::PermissionGate>,
}

impl std::fmt::Debug for HookedGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedGate")
            .field("matchers", &self.matchers)
            .finish_non_exhaustive()
    }
}

impl HookedGate {
    /// `matchers` before `inner`.
    pub fn new(
        env: HookEnv,
        matchers: Vec<HookMatcher>,
        inner: Arc<tools::PermissionGate>,
    ) -> Self {
        Self {
            env,
            matchers,
            inner,
        }
    }
}

impl CanUseTool for HookedGate {
    fn check<'a>(&'a self, call: &'a ToolCall, tool: &'a dyn Tool) -> PermissionFuture<'a> {
        Box::pin(async move {
            let event = self.env.event(
                "PreToolUse",
                json!({"tool_name": tool.name(), "tool_input": call.input, "tool_use_id": call.id}),
            );
            // Matchers see the tool's own name and its aliases (`Agent` for `Task`): a hook
            // cannot be dodged by calling a tool by another name.
            let matchers: Vec<HookMatcher> = self
                .matchers
                .iter()
                .filter(|matcher| {
                    matcher.matches(tool.name())
                        || tool.aliases().iter().any(|alias| matcher.matches(alias))
                })
                .cloned()
                .collect();
            let verdict = run_all(&self.env, &matchers, None, &event).await;
            let refusals: Vec<String> = verdict.end.into_iter().chain(verdict.blocks).collect();
            if !refusals.is_empty() {
                PermissionDecision::deny(format!(
                    "a PreToolUse hook refused it: {}",
                    refusals.join("\n")
                ))
            } else if verdict.ask {
                self.inner
                    .check_with_hook(call, tool, tools::HookDecision::Ask)
                    .await
            } else if verdict.allow {
                self.inner
                    .check_with_hook(call, tool, tools::HookDecision::Allow)
                    .await
            } else {
                self.inner.check(call, tool).await
            }
        })
    }
}

/// The text of a tool result (text blocks joined with newlines).
fn result_text(content: &ToolResultContent) -> String {
    content.text()
}

/// A tool with PostToolUse hooks after it: when the call succeeded, the hooks of the
/// matchers that name it get the event (with `tool_response`); a hook that blocks (exit 2,
/// or `{"decision":"block"}`) has its reason added to the tool_result, so the model sees it,
/// as in Claude Code, and so is `additionalContext`. The call has already happened: nothing
/// is undone. A `{"continue":false}` answer is treated as a block (a tool cannot end the
/// run). The hooks run inside the call, so they count against its timeout and are cancelled
/// with it.
pub struct PostToolUse {
    env: HookEnv,
    matchers: Vec<HookMatcher>,
    inner: Arc<dyn Tool>,
}

impl std::fmt::Debug for PostToolUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostToolUse")
            .field("tool", &self.inner.name())
            .field("matchers", &self.matchers)
            .finish_non_exhaustive()
    }
}

impl PostToolUse {
    /// `tool` behind the PostToolUse hooks of `matchers`, or `tool` itself when there are
    /// none.
    pub fn wrap(env: &HookEnv, matchers: &[HookMatcher], tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        if matchers.is_empty() {
            return tool;
        }
        Arc::new(Self::new(env.clone(), matchers.to_vec(), tool))
    }

    /// `inner`, followed by the hooks of `matchers` that apply to it.
    pub fn new(env: HookEnv, matchers: Vec<HookMatcher>, inner: Arc<dyn Tool>) -> Self {
        let matchers = matchers
            .into_iter()
            .filter(|matcher| {
                matcher.matches(inner.name())
                    || inner.aliases().iter().any(|alias| matcher.matches(alias))
            })
            .collect();
        Self {
            env,
            matchers,
            inner,
        }
    }
}

impl Tool for PostToolUse {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[&str] {
        self.inner.aliases()
    }

    fn description(&self) -> &str {
        self.inner.description()
    }

    fn hidden(&self) -> bool {
        self.inner.hidden()
    }

    fn input_schema(&self) -> &Value {
        self.inner.input_schema()
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        self.inner.is_concurrency_safe(input)
    }

    fn is_read_only(&self, input: &Value) -> bool {
        self.inner.is_read_only(input)
    }

    fn timeout(&self, input: &Value) -> Option<Duration> {
        self.inner.timeout(input)
    }

    fn validate<'a>(
        &'a self,
        input: &'a Value,
        context: &'a ToolContext,
    ) -> executor::ValidateFuture<'a> {
        self.inner.validate(input, context)
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        if self.matchers.is_empty() {
            return self.inner.call(input, context);
        }
        Box::pin(async move {
            let tool_use_id = context.tool_use_id.clone();
            let tool_input = input.clone();
            let mut output = self.inner.call(input, context).await?;
            if output.is_error {
                return Ok(output);
            }
            // Claude Code's shape of the tool's result where the tool gives one (Bash, Edit,
            // Write: docs/output-format.md), else its text.
            let response = match &output.structured {
                Some(structured) => structured.clone(),
                None => json!(result_text(&output.content)),
            };
            let event = self.env.event(
                "PostToolUse",
                json!({
                    "tool_name": self.inner.name(),
                    "tool_input": tool_input,
                    "tool_response": response,
                    "tool_use_id": tool_use_id,
                }),
            );
            let verdict = run_all(&self.env, &self.matchers, None, &event).await;
            let feedback: Vec<String> = verdict
                .end
                .into_iter()
                .chain(verdict.blocks)
                .chain(verdict.context)
                .collect();
            if !feedback.is_empty() {
                output.notes.extend(
                    feedback
                        .iter()
                        .map(|line| format!("PostToolUse hook: {line}")),
                );
                let note = format!("\n\nPostToolUse hook feedback:\n{}", feedback.join("\n"));
                match &mut output.content {
                    ToolResultContent::Text(text) => text.push_str(&note),
                    ToolResultContent::Blocks(blocks) => {
                        blocks.push(ContentBlock::text(note.trim_start()));
                    }
                }
            }
            Ok(output)
        })
    }
}

/// The settings folders the agent reads: `.agent/` and `.claude/` in the working directory,
/// `agent/` in the user's config directory, `~/.claude/` and `~/.claude.json`, and its
/// sessions (`agent/` in the user's data directory). No tool may change them: the
/// file tools refuse writes there after resolving the path exactly
/// (`tools::ToolSetConfig::protected`, which the permission gate reports as a denial), and
/// the OS sandbox keeps every command out of them (no command's text is read for them).
pub fn protected_dirs(cwd: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = PROTECTED_NAMES.iter().map(|name| cwd.join(name)).collect();
    dirs.extend(user_settings_dir());
    dirs.extend(claude_user_dir());
    // Claude Code's state: the folders it trusts and the MCP servers it starts carry over
    // (`crate::claude_code`), so a command that wrote it could trust a folder.
    dirs.extend(crate::claude_code::file());
    // Transcripts, checkpoints and persisted results: a rewind trusts what they say, so
    // nothing the model runs may write there (it matters when the workspace holds them,
    // a session started in the home folder).
    dirs.extend(dirs::data_dir().map(|data| data.join("agent")));
    dirs
}

/// Folder names whose contents no file tool may change wherever they are: a nested one is
/// the settings of a session started there (`sub/.claude/settings.json`).
pub const PROTECTED_NAMES: [&str; 2] = [".agent", ".claude"];

/// `~/.claude/`, Claude Code's user folder (its settings, memory and commands apply here).
fn claude_user_dir() -> Option<PathBuf> {
    dirs::home_dir().map(|home| home.join(".claude"))
}

/// `agent/` in the user's config directory.
fn user_settings_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|config| config.join("agent"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_hooks_output_cannot_drive_the_terminal() {
        let line = failure_line(
            "lint\x1b]0;title\x07",
            "exit status: 1",
            "bad\x1b]52;c;cm0gLXJm\x07\x1b[2J\nsecond line",
        );
        assert!(!line.contains('\x1b') && !line.contains('\x07'), "{line:?}");
        assert!(line.contains("second line"), "{line:?}");
        // Shown as `agent: hook ...` by the stderr notice sink.
        assert!(line.starts_with("hook `lint\\u{1b}]0;title"), "{line:?}");
    }

    #[test]
    fn json_answers_in_both_spellings() {
        assert_eq!(json_answer("not json"), Answer::Go);
        assert_eq!(json_answer("{}"), Answer::Go);
        assert_eq!(
            json_answer(r#"{"continue": false, "stopReason": "enough"}"#),
            Answer::End("enough".into())
        );
        assert_eq!(
            json_answer(r#"{"decision": "block", "reason": "lint first"}"#),
            Answer::Block("lint first".into())
        );
        assert_eq!(json_answer(r#"{"decision": "approve"}"#), Answer::Allow);
        assert_eq!(
            json_answer(
                r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm"}}"#
            ),
            Answer::Block("no rm".into())
        );
        assert_eq!(
            json_answer(r#"{"hookSpecificOutput": {"permissionDecision": "allow"}}"#),
            Answer::Allow
        );
        assert_eq!(
            json_answer(r#"{"hookSpecificOutput": {"permissionDecision": "ask"}}"#),
            Answer::Ask
        );
        assert_eq!(
            json_answer(
                r#"{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "3 warnings"}}"#
            ),
            Answer::Context("3 warnings".into())
        );
    }

    fn env(dir: &Path) -> HookEnv {
        HookEnv {
            notices: crate::Notices::default(),
            session: Arc::new(Mutex::new(("s".into(), dir.join("t.jsonl")))),
            cwd: dir.to_path_buf(),
            permission_mode: "default".into(),
            gate: Arc::default(),
            env: vec![("HOOK_GREETING".into(), "hi".into())],
            guard: None,
        }
    }

    #[test]
    fn every_hook_sees_a_new_session() {
        let dir = std::env::temp_dir();
        let shared = env(&dir);
        let held_by_a_hook = shared.clone();
        shared.set_session("second".into(), dir.join("second.jsonl"));
        let event = held_by_a_hook.event("Stop", json!({}));
        assert_eq!(event["session_id"], "second");
        assert_eq!(event["transcript_path"], json!(dir.join("second.jsonl")));
    }

    #[tokio::test]
    async fn a_hook_is_done_when_it_exits_and_its_output_is_capped() {
        let dir = std::env::temp_dir();
        let env = env(&dir);
        // A background child keeps the pipes open for 20 s: the answer comes at once anyway.
        let started = std::time::Instant::now();
        let answer = run_command(
            &env,
            "(sleep 20 &) ; echo \"no $HOOK_GREETING in $CLAUDE_PROJECT_DIR\" >&2; exit 2",
            Duration::from_secs(10),
            &json!({}),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(answer, Answer::Block(format!("no hi in {}", dir.display())));
        // Endless output: the first MiB is kept, the hook is stopped by its timeout.
        let answer = run_command(&env, "yes", Duration::from_secs(1), &json!({})).await;
        assert_eq!(answer, Answer::Go);
        let answer = run_command(
            &env,
            "head -c 3000000 /dev/zero | tr '\\0' x >&2; exit 2",
            Duration::from_secs(10),
            &json!({}),
        )
        .await;
        match answer {
            Answer::Block(reason) => assert_eq!(reason.len(), OUTPUT_CAP),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_cancelled_hook_leaves_no_process() {
        let dir = std::env::temp_dir();
        let env = env(&dir);
        let marker = format!("sleep 97.{}", std::process::id());
        let command = format!("{marker}; true");
        let event = json!({});
        let run = run_command(&env, &command, Duration::from_secs(60), &event);
        // Dropped after 300 ms, as a cancelled turn drops it.
        let _ = tokio::time::timeout(Duration::from_millis(300), run).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let alive = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                String::from_utf8_lossy(&cmdline).replace('\0', " ").trim() == marker
            })
        });
        assert!(!alive, "the hook's child survived");
    }
}
