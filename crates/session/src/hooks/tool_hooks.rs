//! The hooks around a tool call: PreToolUse in front of the permission gate
//! ([`HookedGate`]), PermissionRequest before a question ([`PermissionRequestHooks`]), and
//! PostToolUse / PostToolUseFailure after the call ([`ToolHooks`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use executor::{
    CanUseTool, PermissionDecision, PermissionFuture, Tool, ToolCall, ToolContext, ToolError,
    ToolFuture, ToolOutput,
};
use protocol::{ContentBlock, ToolResultContent};
use serde_json::{Value, json};

use super::{Event, HookEnv, Hooks, Permission, RequestDecision};

/// Context PreToolUse hooks gave for calls not yet run, by tool_use id: [`ToolHooks`] adds
/// it to the call's result.
#[derive(Clone, Debug, Default)]
pub(super) struct PendingContext(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl PendingContext {
    fn put(&self, id: &str, context: Vec<String>) {
        if !context.is_empty() {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.to_owned(), context);
        }
    }

    fn take(&self, id: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
            .unwrap_or_default()
    }
}

/// `input` checked against `tool`'s schema: a hook's `updatedInput` is what runs, so it must
/// be an input the tool accepts.
fn checked_input(tool: &dyn Tool, input: Value, event: Event) -> Result<Value, String> {
    let problems = executor::schema::validate(tool.input_schema(), &input);
    if problems.is_empty() {
        Ok(input)
    } else {
        Err(format!(
            "a {} hook's updatedInput is not a valid input of {}: {}",
            event.name(),
            tool.name(),
            problems.join("; ")
        ))
    }
}

/// PreToolUse hooks in front of the permission gate, as Claude Code runs them: a hook that
/// blocks (exit 2, `decision: block`, `permissionDecision: deny`, `continue: false`) denies
/// the call with its reason; one that allows skips the question but not a deny rule or plan
/// mode; one that asks makes the gate ask even where the rules allow (headless: refused). An
/// `updatedInput` replaces the call's input, checked against the tool's schema and then by
/// the gate as any input is. `additionalContext` reaches the model with the call's result.
pub struct HookedGate {
    hooks: Hooks,
    inner: Arc<tools::PermissionGate>,
}

impl std::fmt::Debug for HookedGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedGate").finish_non_exhaustive()
    }
}

impl HookedGate {
    /// `hooks`' PreToolUse hooks before `inner`.
    pub fn new(hooks: Hooks, inner: Arc<tools::PermissionGate>) -> Self {
        Self { hooks, inner }
    }
}

impl CanUseTool for HookedGate {
    fn check<'a>(&'a self, call: &'a ToolCall, tool: &'a dyn Tool) -> PermissionFuture<'a> {
        Box::pin(async move {
            let verdict = self
                .hooks
                .run_for_call(
                    Event::PreToolUse,
                    tool,
                    &call.input,
                    json!({"tool_name": tool.name(), "tool_input": call.input, "tool_use_id": call.id}),
                )
                .await;
            let mut refusals = verdict.refusals();
            if let Some((Permission::Deny, reason)) = &verdict.permission {
                refusals.push(reason.clone().unwrap_or_else(|| "denied by a hook".into()));
            }
            if !refusals.is_empty() {
                refusals.extend(verdict.context);
                return PermissionDecision::deny(format!(
                    "a PreToolUse hook refused it: {}",
                    refusals.join("\n")
                ));
            }
            let updated = match verdict.updated_input {
                Some(input) => match checked_input(tool, input, Event::PreToolUse) {
                    Ok(input) => Some(ToolCall {
                        input,
                        ..call.clone()
                    }),
                    Err(problem) => return PermissionDecision::deny(problem),
                },
                None => None,
            };
            let checked = updated.as_ref().unwrap_or(call);
            let decision = match verdict.permission {
                Some((Permission::Ask, _)) => {
                    self.inner
                        .check_with_hook(checked, tool, tools::HookDecision::Ask)
                        .await
                }
                Some((Permission::Allow, _)) => {
                    self.inner
                        .check_with_hook(checked, tool, tools::HookDecision::Allow)
                        .await
                }
                _ => self.inner.check(checked, tool).await,
            };
            match decision {
                PermissionDecision::Allow { updated_input } => {
                    self.hooks.pending.put(call.id.as_str(), verdict.context);
                    PermissionDecision::Allow {
                        updated_input: updated_input.or(updated.map(|call| call.input)),
                    }
                }
                other => other,
            }
        })
    }
}

/// PermissionRequest hooks: asked before the user is (or, headless, before the refusal).
/// A hook's `decision` allows (with an `updatedInput`, checked against the tool's schema) or
/// denies (with its `message`) in the user's place; exit 2 denies with its stderr. The gate
/// decides an `updatedInput` again ([`tools::PreAsk`]): it must fit the schema and pass the
/// rules without a question. With no
/// decision the question goes on, and in an interactive session the Notification hooks hear
/// of it (`notification_type` `permission_prompt`). `updatedPermissions` apply to the
/// session (`addRules` of allow rules, `setMode` but never to bypassPermissions); a deny's
/// `interrupt` stops the turn, as the user's interrupt does.
pub struct PermissionRequestHooks {
    hooks: Hooks,
}

impl std::fmt::Debug for PermissionRequestHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermissionRequestHooks")
            .finish_non_exhaustive()
    }
}

impl PermissionRequestHooks {
    /// The PermissionRequest and Notification hooks of `hooks`.
    pub fn new(hooks: Hooks) -> Self {
        Self { hooks }
    }
}

impl tools::PreAsk for PermissionRequestHooks {
    fn answer<'a>(
        &'a self,
        request: &'a tools::PermissionRequest<'a>,
        tool: &'a dyn Tool,
        interactive: bool,
    ) -> tools::PreAskFuture<'a> {
        Box::pin(async move {
            let verdict = self
                .hooks
                .run_for_call(
                    Event::PermissionRequest,
                    tool,
                    request.input,
                    json!({"tool_name": request.tool, "tool_input": request.input}),
                )
                .await;
            let refusals = verdict.refusals();
            if !refusals.is_empty() {
                return Some(PermissionDecision::deny(format!(
                    "a PermissionRequest hook refused it: {}",
                    refusals.join("\n")
                )));
            }
            // The gate checks a new input against the schema and the rules.
            if let Some(decision) = verdict.request {
                return Some(settle(
                    self.hooks.env(),
                    "a PermissionRequest hook",
                    decision,
                ));
            }
            if interactive {
                self.hooks.spawn(
                    Event::Notification,
                    &["permission_prompt"],
                    json!({
                        "message": format!("agent needs your permission to use {}", request.tool),
                        "title": "Permission needed",
                        "notification_type": "permission_prompt",
                    }),
                );
            }
            None
        })
    }
}

/// What `decision` (from `who`: "a PermissionRequest hook", "the SDK host") does: a deny
/// refuses with its message (and with `interrupt` stops the running turn, as the user's
/// interrupt does); an allow applies its `updatedPermissions` ([`apply_updates`]) and runs
/// the call, with its `updatedInput` when given.
pub(crate) fn settle(env: &HookEnv, who: &str, decision: RequestDecision) -> PermissionDecision {
    match decision {
        RequestDecision::Deny { message, interrupt } => {
            if interrupt
                && let Some(turn) = env
                    .turn
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .as_ref()
            {
                turn.cancel();
            }
            PermissionDecision::deny(format!(
                "{who} refused it: {}",
                message.unwrap_or_else(|| "denied".into())
            ))
        }
        RequestDecision::Allow {
            updated_input,
            updated_permissions,
        } => {
            apply_updates(env, who, &updated_permissions);
            PermissionDecision::Allow { updated_input }
        }
    }
}

/// Applies the `updatedPermissions` of `who`'s answer, Claude Code's
/// `PermissionUpdate`s. To the session: `addRules` of allow rules join its allow rules,
/// `setMode` switches its mode (never to bypassPermissions). To the settings file the
/// `destination` names (`userSettings`, `projectSettings`, `localSettings`): every kind
/// is written there ([`crate::approvals::write_permission_update`]), for the sessions
/// after this one, with a line saying so; a project's file only in a trusted folder.
/// What applies nowhere (a deny rule for the session alone, say) is told.
fn apply_updates(env: &HookEnv, who: &str, updates: &[Value]) {
    let Some(gate) = env.gate.get() else {
        return;
    };
    let notices = &env.notices;
    for update in updates {
        let shown = render::printable(&update.to_string(), false);
        let applied = apply_to_session(gate, update);
        let destination = update["destination"].as_str().unwrap_or("session");
        let Some((file, project)) = crate::approvals::update_destination(destination, &env.cwd)
        else {
            if let Err(error) = &applied {
                notices.say(&format!(
                    "{who}'s permission update {shown} is not applied: {error}"
                ));
            }
            continue;
        };
        let later = if applied.is_ok() {
            ""
        } else {
            " (it applies from the next session)"
        };
        let written = if project && env.confined {
            Err(anyhow::anyhow!("the folder is not trusted"))
        } else {
            crate::approvals::write_permission_update(&file, project, update)
        };
        match written {
            Ok(()) => notices.say(&format!("{who} saved {shown} in {}{later}", file.display())),
            Err(error) => notices.say(&format!(
                "{who}'s permission update {shown} was not saved in {}: {}",
                file.display(),
                render::printable(&format!("{error:#}"), false)
            )),
        }
    }
}

/// Applies one `PermissionUpdate` to the session of `gate`: an allow `addRules` or a
/// `setMode` (never to bypassPermissions).
///
/// # Errors
///
/// Why it does not apply: a rule that does not parse, a mode a hook may not set, or a kind
/// the session cannot take (deny and ask rules, replaced or removed rules and folders stay
/// as the session began with them).
fn apply_to_session(gate: &tools::PermissionGate, update: &Value) -> Result<(), String> {
    match update["type"].as_str().unwrap_or_default() {
        "addRules" if update["behavior"] == "allow" => {
            for rule in update["rules"].as_array().into_iter().flatten() {
                let Some(tool) = rule["toolName"].as_str() else {
                    return Err("a rule has no toolName".into());
                };
                let text = match rule["ruleContent"].as_str() {
                    Some(content) => format!("{tool}({content})"),
                    None => tool.to_owned(),
                };
                gate.allow_for_session(&text)
                    .map_err(|error| format!("{text}: {error}"))?;
            }
            Ok(())
        }
        "setMode" => {
            let mode = update["mode"]
                .as_str()
                .and_then(|mode| mode.parse::<tools::PermissionMode>().ok())
                .filter(|mode| *mode != tools::PermissionMode::BypassPermissions)
                .ok_or_else(|| format!("the mode {} is not one a hook may set", update["mode"]))?;
            gate.set_mode(mode);
            Ok(())
        }
        _ => Err("only allow rules and the mode change during a session".into()),
    }
}

/// A tool with the hooks after its call, as Claude Code runs them: when the call succeeded,
/// PostToolUse (with `tool_response` and `duration_ms`); when it failed (an error result or
/// an error), PostToolUseFailure (with `error` and `is_interrupt`). A hook's block reason
/// and `additionalContext` are added to the result, so the model sees them, and shown to
/// the user; `updatedToolOutput` replaces a successful result. The call has already
/// happened: nothing is undone, and `continue: false` counts as a block (a tool cannot end
/// the run). The hooks run inside the call, so they count against its timeout and are
/// cancelled with it. Context a PreToolUse hook gave for the call is added here too.
pub struct ToolHooks {
    hooks: Hooks,
    inner: Arc<dyn Tool>,
}

impl std::fmt::Debug for ToolHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHooks")
            .field("tool", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl ToolHooks {
    /// `tool` with `hooks` after it, or `tool` itself when no PreToolUse, PostToolUse or
    /// PostToolUseFailure hook is configured.
    pub fn wrap(hooks: &Hooks, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        if [
            Event::PreToolUse,
            Event::PostToolUse,
            Event::PostToolUseFailure,
        ]
        .iter()
        .any(|event| hooks.has(*event))
            || (tool.name() == "Bash" && hooks.has(Event::CwdChanged))
        {
            Arc::new(Self {
                hooks: hooks.clone(),
                inner: tool,
            })
        } else {
            tool
        }
    }

    /// Where the main agent's shell is before a Bash call, when CwdChanged hooks want to
    /// know it changed (a subagent's shell is its own).
    fn shell_cwd(&self) -> Option<std::path::PathBuf> {
        if self.inner.name() != "Bash"
            || !self.hooks.has(Event::CwdChanged)
            || self.hooks.agent.is_some()
        {
            return None;
        }
        self.hooks.env().gate.get().map(|gate| gate.shell_cwd())
    }

    /// Runs the CwdChanged hooks when the shell left `was`: their `watchPaths` are watched,
    /// what they wrote to `CLAUDE_ENV_FILE` runs before the next commands.
    async fn cwd_changed(&self, was: std::path::PathBuf) {
        let Some(now) = self.hooks.env().gate.get().map(|gate| gate.shell_cwd()) else {
            return;
        };
        if now == was {
            return;
        }
        let verdict = self
            .hooks
            .run(
                Event::CwdChanged,
                &[],
                json!({"old_cwd": was, "new_cwd": now}),
            )
            .await;
        self.hooks.env().apply_env_file();
        if let Some(watch) = self.hooks.env().watch.get() {
            watch.add(&verdict.watch_paths, &now);
        }
    }

    /// What the hooks after a call said, for the model: block reasons, then context.
    async fn after(
        &self,
        tool_use_id: &str,
        input: Value,
        ended: Result<&ToolOutput, &ToolError>,
        took: Duration,
    ) -> (Vec<String>, Option<Value>) {
        let duration_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        let input_for_rules = &input.clone();
        let (event, fields) = match ended {
            Ok(output) if !output.is_error => (
                Event::PostToolUse,
                json!({
                    "tool_name": self.inner.name(),
                    "tool_input": input,
                    // Claude Code's shape of the result where the tool gives one (Bash, Edit,
                    // Write: docs/output-format.md), else its text.
                    "tool_response": output.structured.clone()
                        .unwrap_or_else(|| json!(output.content.text())),
                    "tool_use_id": tool_use_id,
                    "duration_ms": duration_ms,
                }),
            ),
            failed => {
                let (error, interrupted) = match failed {
                    Ok(output) => (output.content.text(), false),
                    Err(error) => (error.to_string(), matches!(error, ToolError::Killed(_))),
                };
                (
                    Event::PostToolUseFailure,
                    json!({
                        "tool_name": self.inner.name(),
                        "tool_input": input,
                        "tool_use_id": tool_use_id,
                        "error": error,
                        "is_interrupt": interrupted,
                        "duration_ms": duration_ms,
                    }),
                )
            }
        };
        let verdict = self
            .hooks
            .run_for_call(event, self.inner.as_ref(), input_for_rules, fields)
            .await;
        let mut feedback = verdict.refusals();
        feedback.extend(verdict.context);
        let replaced = (event == Event::PostToolUse)
            .then_some(verdict.updated_output)
            .flatten();
        (feedback, replaced)
    }
}

/// How long a tool that passed its limit is given to stop before it is dropped (the
/// executor's default grace).
const STOP_GRACE: Duration = Duration::from_secs(2);

impl ToolHooks {
    /// The tool's call, held to the tool's own limit here (the executor's limit for this
    /// wrapper is longer by the hooks' time): past it, the call is cancelled, given
    /// [`STOP_GRACE`] to stop, and reported as timed out.
    async fn call_within_limit(
        &self,
        input: Value,
        mut context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(limit) = self.inner.timeout(&input) else {
            return self.inner.call(input, context).await;
        };
        let stop = context.cancel.child_token();
        context.cancel = stop.clone();
        let mut call = self.inner.call(input, context);
        match tokio::time::timeout(limit, &mut call).await {
            Ok(ended) => ended,
            Err(_) => {
                stop.cancel();
                let _ = tokio::time::timeout(STOP_GRACE, &mut call).await;
                Err(ToolError::TimedOut {
                    after: limit,
                    note: String::new(),
                })
            }
        }
    }
}

/// `output`'s content replaced by a hook's `updatedToolOutput` (a string as text, anything
/// else as its JSON).
fn replace_content(output: &mut ToolOutput, replacement: Value) {
    output.content = ToolResultContent::Text(match replacement {
        Value::String(text) => text,
        other => other.to_string(),
    });
}

/// `feedback` added to `output`, for the model and as notes for the user.
fn add_feedback(output: &mut ToolOutput, event: &str, feedback: &[String]) {
    output
        .notes
        .extend(feedback.iter().map(|line| format!("{event} hook: {line}")));
    let note = format!("\n\n{event} hook feedback:\n{}", feedback.join("\n"));
    match &mut output.content {
        ToolResultContent::Text(text) => text.push_str(&note),
        ToolResultContent::Blocks(blocks) => {
            blocks.push(ContentBlock::text(note.trim_start()));
        }
    }
}

impl Tool for ToolHooks {
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

    /// The tool's own limit (which [`ToolHooks`] enforces on the tool itself), then time for
    /// the tool to stop and for the hooks after it: they never eat into the tool's time.
    fn timeout(&self, input: &Value) -> Option<Duration> {
        self.inner.timeout(input).map(|limit| {
            limit
                + STOP_GRACE
                + self
                    .hooks
                    .longest(&[Event::PostToolUse, Event::PostToolUseFailure])
        })
    }

    fn validate<'a>(
        &'a self,
        input: &'a Value,
        context: &'a ToolContext,
    ) -> executor::ValidateFuture<'a> {
        self.inner.validate(input, context)
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let tool_use_id = context.tool_use_id.as_str().to_owned();
            let before = self.hooks.pending.take(&tool_use_id);
            let tool_input = input.clone();
            let started = Instant::now();
            let shell_was = self.shell_cwd();
            let ended = self.call_within_limit(input, context).await;
            let took = started.elapsed();
            if let Some(was) = shell_was {
                self.cwd_changed(was).await;
            }
            let (after, replaced) = self
                .after(&tool_use_id, tool_input, ended.as_ref(), took)
                .await;
            let event = match &ended {
                Ok(output) if !output.is_error => Event::PostToolUse,
                _ => Event::PostToolUseFailure,
            };
            match ended {
                Ok(mut output) => {
                    if let Some(replacement) = replaced {
                        replace_content(&mut output, replacement);
                    }
                    if !before.is_empty() {
                        add_feedback(&mut output, Event::PreToolUse.name(), &before);
                    }
                    if !after.is_empty() {
                        add_feedback(&mut output, event.name(), &after);
                    }
                    Ok(output)
                }
                // The error keeps its kind (it decides whether siblings are cancelled).
                Err(error) => {
                    let lines: Vec<String> = before.into_iter().chain(after).collect();
                    if lines.is_empty() {
                        return Err(error);
                    }
                    let note = format!("\n\n{} hook feedback:\n{}", event.name(), lines.join("\n"));
                    Err(match error {
                        ToolError::InvalidInput(text) => ToolError::InvalidInput(text + &note),
                        ToolError::CouldNotRun(text) => ToolError::CouldNotRun(text + &note),
                        ToolError::Killed(text) => ToolError::Killed(text + &note),
                        ToolError::TimedOut {
                            after,
                            note: earlier,
                        } => ToolError::TimedOut {
                            after,
                            note: earlier + &note,
                        },
                        other => other,
                    })
                }
            }
        })
    }
}
