//! Command hooks with Claude Code's protocol: the event as JSON on stdin; exit 0 goes on
//! (stdout may hold a JSON answer), exit 2 blocks with stderr as the reason, any other exit is
//! a non-blocking error. JSON answers: `{"decision":"block","reason":…}` blocks,
//! `{"continue":false,"stopReason":…}` ends the run. A hook that fails or times out never
//! ends the session.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use executor::{
    CanUseTool, PermissionDecision, PermissionFuture, Tool, ToolCall, ToolContext, ToolFuture,
};
use loop_core::{StopDecision, StopFuture, StopHook, StopHookInput};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use crate::settings::HookMatcher;

/// What a hook answered.
#[derive(Debug, PartialEq)]
enum Answer {
    Go,
    Block(String),
    End(String),
}

/// Facts every hook event carries.
#[derive(Clone, Debug)]
pub struct HookEnv {
    /// The session id.
    pub session_id: String,
    /// The transcript file.
    pub transcript_path: PathBuf,
    /// The working directory (hooks run there).
    pub cwd: PathBuf,
    /// The permission mode's name.
    pub permission_mode: String,
    /// Extra environment of every hook (settings' `env`).
    pub env: Vec<(String, String)>,
}

impl HookEnv {
    fn event(&self, name: &str, mut fields: Value) -> Value {
        let mut event = json!({
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": self.cwd,
            "permission_mode": self.permission_mode,
            "hook_event_name": name,
        });
        if let (Some(event), Some(fields)) = (event.as_object_mut(), fields.as_object_mut()) {
            event.append(fields);
        }
        event
    }
}

/// Runs one hook command with `input` on stdin.
async fn run_command(env: &HookEnv, command: &str, timeout: Duration, input: &Value) -> Answer {
    let child = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(&env.cwd)
        .envs(env.env.iter().map(|(key, value)| (key, value)))
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => {
            eprintln!("agent: hook `{command}` could not start: {error}");
            return Answer::Go;
        }
    };
    let group = child.id().and_then(|pid| i32::try_from(pid).ok());
    let stdin = child.stdin.take();
    let payload = input.to_string();
    // Writing the event counts against the timeout too: a hook that never reads its stdin
    // must not block the agent once the pipe is full.
    let interaction = async move {
        let feed = async move {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(payload.as_bytes()).await;
            }
        };
        let (_, output) = tokio::join!(feed, child.wait_with_output());
        output
    };
    let output = match tokio::time::timeout(timeout, interaction).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => {
            eprintln!("agent: hook `{command}` failed: {error}");
            return Answer::Go;
        }
        Err(_) => {
            // The hook and everything it started (its own process group).
            if let Some(group) = group {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(group),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            eprintln!(
                "agent: hook `{command}` timed out after {} s",
                timeout.as_secs()
            );
            return Answer::Go;
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    match output.status.code() {
        Some(2) => Answer::Block(if stderr.is_empty() {
            format!("blocked by hook `{command}`")
        } else {
            stderr
        }),
        Some(0) => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let Ok(answer) = serde_json::from_str::<Value>(stdout.trim()) else {
                return Answer::Go;
            };
            if answer.get("continue") == Some(&Value::Bool(false)) {
                let reason = answer
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("stopped by a hook");
                return Answer::End(reason.to_owned());
            }
            if answer.get("decision").and_then(Value::as_str) == Some("block") {
                let reason = answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("blocked by a hook");
                return Answer::Block(reason.to_owned());
            }
            Answer::Go
        }
        _ => {
            eprintln!(
                "agent: hook `{command}` failed ({}): {stderr}",
                output.status
            );
            Answer::Go
        }
    }
}

/// Runs every hook of `matchers` that applies to `tool` (all of them for `None`); the first
/// end or block wins.
async fn run_all(
    env: &HookEnv,
    matchers: &[HookMatcher],
    tool: Option<&str>,
    input: &Value,
) -> Answer {
    let mut blocks = Vec::new();
    for matcher in matchers
        .iter()
        .filter(|matcher| tool.is_none_or(|tool| matcher.matches(tool)))
    {
        for hook in matcher.hooks.iter().filter(|hook| hook.kind == "command") {
            let timeout = Duration::from_secs(hook.timeout.unwrap_or(60));
            match run_command(env, &hook.command, timeout, input).await {
                Answer::Go => {}
                Answer::End(reason) => return Answer::End(reason),
                Answer::Block(reason) => blocks.push(reason),
            }
        }
    }
    if blocks.is_empty() {
        Answer::Go
    } else {
        Answer::Block(blocks.join("\n"))
    }
}

/// The Stop hooks of the settings, as loop-core's stop hook.
#[derive(Debug)]
pub struct CommandStopHook {
    env: HookEnv,
    matchers: Vec<HookMatcher>,
}

impl CommandStopHook {
    /// Stop hooks from `matchers`.
    pub fn new(env: HookEnv, matchers: Vec<HookMatcher>) -> Self {
        Self { env, matchers }
    }
}

impl StopHook for CommandStopHook {
    fn on_stop(&self, input: StopHookInput) -> StopFuture<'_> {
        Box::pin(async move {
            let event = self.env.event(
                "Stop",
                json!({
                    "stop_hook_active": input.stop_hook_active,
                    "last_assistant_message": input.last_assistant_message.text(),
                }),
            );
            match run_all(&self.env, &self.matchers, None, &event).await {
                Answer::Go => StopDecision::Allow,
                Answer::Block(reason) => StopDecision::Block {
                    reasons: vec![reason],
                },
                Answer::End(reason) => StopDecision::Prevent { reason },
            }
        })
    }
}

/// PreToolUse hooks in front of the permission gate: a hook that blocks denies the call.
pub struct HookedGate {
    env: HookEnv,
    matchers: Vec<HookMatcher>,
    inner: Arc<dyn CanUseTool>,
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
    pub fn new(env: HookEnv, matchers: Vec<HookMatcher>, inner: Arc<dyn CanUseTool>) -> Self {
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
                json!({"tool_name": call.name, "tool_input": call.input, "tool_use_id": call.id}),
            );
            match run_all(&self.env, &self.matchers, Some(&call.name), &event).await {
                Answer::Block(reason) | Answer::End(reason) => {
                    PermissionDecision::deny(format!("a PreToolUse hook refused it: {reason}"))
                }
                Answer::Go => self.inner.check(call, tool).await,
            }
        })
    }
}

/// A tool with PostToolUse hooks after it: when the call succeeded, the hooks of the
/// matchers that name it get the event (with `tool_response`); a hook that blocks (exit 2,
/// or `{"decision":"block"}`) has its reason added to the tool_result, so the model sees it,
/// as in Claude Code. The call has already happened: nothing is undone. A
/// `{"continue":false}` answer is treated as a block (a tool cannot end the run). The hooks
/// run inside the call, so they count against its timeout and are cancelled with it.
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
    /// `inner`, followed by the hooks of `matchers` that apply to it.
    pub fn new(env: HookEnv, matchers: Vec<HookMatcher>, inner: Arc<dyn Tool>) -> Self {
        let name = inner.name().to_owned();
        let matchers = matchers
            .into_iter()
            .filter(|matcher| matcher.matches(&name))
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

    fn description(&self) -> &str {
        self.inner.description()
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
            let event = self.env.event(
                "PostToolUse",
                json!({
                    "tool_name": self.inner.name(),
                    "tool_input": tool_input,
                    "tool_response": output.content,
                    "tool_use_id": tool_use_id,
                }),
            );
            match run_all(&self.env, &self.matchers, None, &event).await {
                Answer::Go => {}
                Answer::Block(reason) | Answer::End(reason) => {
                    let note = format!("\n\nPostToolUse hook feedback:\n{reason}");
                    match &mut output.content {
                        ToolResultContent::Text(text) => text.push_str(&note),
                        ToolResultContent::Blocks(blocks) => {
                            blocks.push(ContentBlock::text(note.trim_start()));
                        }
                    }
                }
            }
            Ok(output)
        })
    }
}

/// Refuses Write and Edit calls on the agent's own settings (`.agent/` in the working
/// directory, `agent/` in the user's config directory) before any other rule: a model must not
/// grant itself permissions or hooks for the next run, whatever the permission mode.
pub struct SettingsGuard {
    protected: Vec<PathBuf>,
    cwd: PathBuf,
    inner: Arc<dyn CanUseTool>,
}

impl std::fmt::Debug for SettingsGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettingsGuard")
            .field("protected", &self.protected)
            .finish_non_exhaustive()
    }
}

impl SettingsGuard {
    /// Guards the settings folders of `cwd` and the user in front of `inner`.
    pub fn new(cwd: PathBuf, inner: Arc<dyn CanUseTool>) -> Self {
        let mut protected = vec![real_path(&cwd.join(".agent"))];
        if let Some(config) = dirs::config_dir() {
            protected.push(real_path(&config.join("agent")));
        }
        Self {
            protected,
            cwd,
            inner,
        }
    }

    fn touches_settings(&self, call: &ToolCall) -> bool {
        if call.name == "Bash" {
            return call
                .input
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(|command| self.command_names_settings(command));
        }
        if !matches!(call.name.as_str(), "Write" | "Edit") {
            return false;
        }
        let Some(path) = call.input.get("file_path").and_then(Value::as_str) else {
            return false;
        };
        // Symlinks resolved (a link to the repository, or to `.agent` itself, must not
        // hide the folder), and compared ignoring case too (case-insensitive file systems).
        let full = real_path(&self.cwd.join(path));
        let lower = |path: &Path| PathBuf::from(path.to_string_lossy().to_lowercase());
        self.protected
            .iter()
            .any(|dir| full.starts_with(dir) || lower(&full).starts_with(lower(dir)))
    }
}

/// `path` made absolute with every symlink resolved, like `realpath`, except that the
/// components that do not exist yet are kept as written (a file about to be created). `..`
/// applies to the resolved parent, as the kernel does. Gives up resolving after 40 links
/// (a loop) and keeps the rest lexical.
fn real_path(path: &Path) -> PathBuf {
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .map(|part| part.as_os_str().to_owned())
        .collect();
    let mut resolved = PathBuf::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match Path::new(&part).components().next() {
            Some(std::path::Component::RootDir | std::path::Component::Prefix(_)) => {
                resolved = PathBuf::from(&part);
                continue;
            }
            Some(std::path::Component::CurDir) | None => continue,
            Some(std::path::Component::ParentDir) => {
                resolved.pop();
                continue;
            }
            Some(std::path::Component::Normal(_)) => {}
        }
        let candidate = resolved.join(&part);
        match std::fs::read_link(&candidate) {
            Ok(target) if links < 40 => {
                links += 1;
                // Resolve the link's target in place of this component.
                if target.is_absolute() {
                    resolved = PathBuf::new();
                }
                pending.extend(
                    target
                        .components()
                        .rev()
                        .map(|part| part.as_os_str().to_owned()),
                );
            }
            _ => resolved = candidate,
        }
    }
    resolved
}

impl SettingsGuard {
    /// Whether a shell command names a settings folder: a word that is `.agent` or has it
    /// as a path component, or the user's agent config folder spelled out. Lexical, so a
    /// determined command can hide the path (`cd .ag""ent`); this catches the plain spellings
    /// a model writes, and the permission rules remain the real boundary for Bash.
    fn command_names_settings(&self, command: &str) -> bool {
        let words = command.split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    ';' | '|' | '&' | '<' | '>' | '(' | ')' | '\'' | '"' | '`' | '='
                )
        });
        let names_project = words
            .filter(|word| !word.is_empty())
            .any(|word| word.split('/').any(|component| component == ".agent"));
        let names_user = command.contains("/.config/agent")
            || self.protected[1..]
                .iter()
                .any(|dir| command.contains(&*dir.to_string_lossy()));
        names_project || names_user
    }
}

impl CanUseTool for SettingsGuard {
    fn check<'a>(&'a self, call: &'a ToolCall, tool: &'a dyn Tool) -> PermissionFuture<'a> {
        if self.touches_settings(call) {
            return Box::pin(std::future::ready(PermissionDecision::deny(
                "the agent's own settings (.agent/, ~/.config/agent/) cannot be changed or used by the agent's tools; ask the user to edit them",
            )));
        }
        self.inner.check(call, tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_do_not_hide_the_settings_folder() {
        let base = std::env::temp_dir().join(format!("agent-guard-{}", std::process::id()));
        let repo = base.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let repo = repo.canonicalize().unwrap();
        std::os::unix::fs::symlink(&repo, base.join("alias")).unwrap();
        // A dangling link to the folder that does not exist yet.
        std::os::unix::fs::symlink(".agent", repo.join("link")).unwrap();
        let guard = SettingsGuard::new(repo.clone(), Arc::new(executor::AllowAll));
        let write = |path: &str| {
            ToolCall::new("t", "Write", serde_json::json!({"file_path": path, "content": "{}"}))
        };
        let alias = base.join("alias/.agent/settings.local.json");
        for path in [
            ".agent/settings.json",
            "./sub/../.agent/settings.json",
            alias.to_str().unwrap(),
            "link/settings.local.json",
            ".AGENT/settings.json",
        ] {
            assert!(guard.touches_settings(&write(path)), "{path}");
        }
        for path in ["src/main.rs", ".agents/x", "agent/settings.json"] {
            assert!(!guard.touches_settings(&write(path)), "{path}");
        }
        assert_eq!(
            real_path(&base.join("alias/a/../b")),
            repo.join("b"),
            "`..` applies after the link"
        );
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn shell_commands_naming_the_settings_folders_are_caught() {
        let guard = SettingsGuard::new(PathBuf::from("/work/repo"), Arc::new(executor::AllowAll));
        for command in [
            "echo '{}' > .agent/settings.json",
            "cp x.json ./.agent/settings.local.json",
            "mkdir -p .agent && tee .agent/settings.json < x",
            "cd .agent; rm settings.json",
            "sed -i s/a/b/ ~/.config/agent/settings.json",
            "cat \"$HOME/.config/agent/settings.json\"",
            "ln -s /tmp/evil /work/repo/.agent",
        ] {
            assert!(guard.command_names_settings(command), "{command}");
        }
        for command in [
            "cargo test",
            "echo agent > notes.txt",
            "ls .agents/ .agent-old",
            "grep -r 'agent' src/",
        ] {
            assert!(!guard.command_names_settings(command), "{command}");
        }
    }
}
