//! What one hook said, read as Claude Code reads it (`SyncHookJSONOutput` in `sdk.d.ts` of
//! `@anthropic-ai/claude-agent-sdk` 0.3.197): the exit status first, then a JSON object on
//! stdout when the hook exited 0.

use serde_json::Value;

use super::Event;

/// A PreToolUse hook's `permissionDecision`, strongest last (`deny` beats `ask` beats
/// `allow`, as in Claude Code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Run without asking (also the older `"decision": "approve"`).
    Allow,
    /// Ask the user even where the rules allow it.
    Ask,
    /// Refuse.
    Deny,
}

/// A PermissionRequest hook's `decision`.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestDecision {
    /// `{"behavior": "allow"}`, with the input to run instead when given.
    Allow {
        /// `updatedInput`.
        updated_input: Option<Value>,
        /// `updatedPermissions`: Claude Code's `PermissionUpdate` objects, as given.
        updated_permissions: Vec<Value>,
    },
    /// `{"behavior": "deny"}`, with the message for the model.
    Deny {
        /// `message`.
        message: Option<String>,
        /// `interrupt`: the turn stops too, as when the user interrupts it.
        interrupt: bool,
    },
}

/// What one hook said. Each field is what Claude Code reads from the JSON answer, or from
/// the exit status (exit 2: `block` with stderr as the reason).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// `"continue": false`, with `stopReason`.
    pub end: Option<String>,
    /// Exit 2 (its stderr) or `"decision": "block"` (its `reason`).
    pub block: Option<String>,
    /// `permissionDecision` (PreToolUse), with its reason.
    pub permission: Option<(Permission, Option<String>)>,
    /// `decision` of a PermissionRequest hook.
    pub request: Option<RequestDecision>,
    /// `updatedInput` (PreToolUse).
    pub updated_input: Option<Value>,
    /// `updatedToolOutput`, or the older `updatedMCPToolOutput` (PostToolUse).
    pub updated_output: Option<Value>,
    /// `additionalContext`, or plain stdout where Claude Code gives that to the model
    /// (SessionStart, UserPromptSubmit).
    pub context: Option<String>,
    /// `systemMessage`: a line for the user.
    pub system_message: Option<String>,
    /// `terminalSequence`, keeping only what Claude Code permits (see
    /// [`permitted_sequence`]): for the front end to write to the terminal.
    pub terminal_sequence: Option<String>,
    /// `sessionTitle` (SessionStart, UserPromptSubmit): the session's new title.
    pub session_title: Option<String>,
    /// `initialUserMessage` (SessionStart): a message that goes to the model before the
    /// user's first prompt.
    pub initial_message: Option<String>,
    /// `reloadSkills` (SessionStart): look for skills and commands again.
    pub reload_skills: bool,
    /// `watchPaths` (SessionStart, CwdChanged, FileChanged): files to watch for FileChanged.
    pub watch_paths: Vec<String>,
    /// WorktreeCreate: the folder made, from plain stdout's first line or
    /// `hookSpecificOutput.worktreePath`.
    pub worktree_path: Option<String>,
    /// Fields of the answer that are not what Claude Code's types allow (each ignored, and
    /// told: a guard whose `"continue": "false"` was meant to stop the run must not go
    /// unnoticed).
    pub problems: Vec<String>,
}

impl Reply {
    /// Drops what would widen what the model may do: an approval (`permissionDecision`
    /// `allow`, `decision: approve`, a PermissionRequest `allow` with its permission
    /// updates) and a replaced input. For a hook whose answer the folder could forge (in a
    /// folder that is not trusted, a confined hook shares its output with what the folder
    /// runs, such as git's `core.fsmonitor`). Returns whether anything was dropped.
    pub fn narrow(&mut self) -> bool {
        let mut dropped = self.updated_input.take().is_some();
        if matches!(self.permission, Some((Permission::Allow, _))) {
            self.permission = None;
            dropped = true;
        }
        if matches!(self.request, Some(RequestDecision::Allow { .. })) {
            self.request = None;
            dropped = true;
        }
        dropped
    }
}

/// What a hook that exited with `code` (`None`: killed by a signal) answers for `event`.
/// `Err` is a line for the user: the hook failed (any exit but 0 and 2) or printed
/// something meant as JSON that does not parse; the session goes on either way.
pub fn read(event: Event, code: Option<i32>, stdout: &str, stderr: &str) -> Result<Reply, String> {
    match code {
        Some(2) => Ok(Reply {
            block: Some(if stderr.is_empty() {
                "blocked by a hook (exit 2)".to_owned()
            } else {
                stderr.to_owned()
            }),
            ..Reply::default()
        }),
        Some(0) => {
            let looks_like_json = stdout.starts_with('{');
            match serde_json::from_str::<Value>(stdout) {
                Ok(Value::Object(answer)) => Ok(json(event, &Value::Object(answer))),
                _ if looks_like_json => Err(format!(
                    "printed invalid JSON, ignored: {}",
                    stdout.chars().take(200).collect::<String>()
                )),
                _ if event == Event::WorktreeCreate => Ok(Reply {
                    worktree_path: stdout
                        .lines()
                        .map(str::trim)
                        .find(|line| !line.is_empty())
                        .map(str::to_owned),
                    ..Reply::default()
                }),
                // Plain text: the model sees it only where Claude Code gives it the model.
                _ if !stdout.is_empty() && event.stdout_is_context() => Ok(Reply {
                    context: Some(stdout.to_owned()),
                    ..Reply::default()
                }),
                _ => Ok(Reply::default()),
            }
        }
        Some(code) => Err(failure("exit status", &code.to_string(), stderr)),
        None => Err(failure("status", "killed by a signal", stderr)),
    }
}

fn failure(what: &str, status: &str, stderr: &str) -> String {
    if stderr.is_empty() {
        format!("failed ({what} {status})")
    } else {
        format!("failed ({what} {status}): {stderr}")
    }
}

/// The fields of the answer whose type is not the one `SyncHookJSONOutput` gives them, as
/// `field: what it is` lines.
fn type_problems(answer: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expect = |value: Option<&Value>, field: &str, ok: fn(&Value) -> bool, wanted: &str| {
        if let Some(value) = value
            && !ok(value)
        {
            problems.push(format!("{field} {value} (wanted {wanted})"));
        }
    };
    expect(
        answer.get("continue"),
        "continue",
        Value::is_boolean,
        "true or false",
    );
    expect(
        answer.get("suppressOutput"),
        "suppressOutput",
        Value::is_boolean,
        "true or false",
    );
    expect(
        answer.get("stopReason"),
        "stopReason",
        Value::is_string,
        "text",
    );
    expect(
        answer.get("systemMessage"),
        "systemMessage",
        Value::is_string,
        "text",
    );
    expect(answer.get("reason"), "reason", Value::is_string, "text");
    expect(
        answer.get("decision"),
        "decision",
        |value| matches!(value.as_str(), Some("approve" | "block")),
        "\"approve\" or \"block\"",
    );
    let specific = answer.get("hookSpecificOutput");
    expect(
        specific,
        "hookSpecificOutput",
        Value::is_object,
        "an object",
    );
    if let Some(specific) = specific.filter(|specific| specific.is_object()) {
        expect(
            specific.get("permissionDecision"),
            "hookSpecificOutput.permissionDecision",
            |value| matches!(value.as_str(), Some("allow" | "deny" | "ask")),
            "\"allow\", \"deny\" or \"ask\"",
        );
        expect(
            specific.get("additionalContext"),
            "hookSpecificOutput.additionalContext",
            Value::is_string,
            "text",
        );
        expect(
            specific.get("updatedInput"),
            "hookSpecificOutput.updatedInput",
            Value::is_object,
            "an object",
        );
        expect(
            specific.get("decision"),
            "hookSpecificOutput.decision",
            |value| {
                matches!(
                    value.get("behavior").and_then(Value::as_str),
                    Some("allow" | "deny")
                )
            },
            "{\"behavior\": \"allow\" or \"deny\"}",
        );
    }
    problems
}

/// The fields of a JSON answer `event` has a meaning for. A `hookSpecificOutput` that
/// names another event is ignored, as Claude Code ignores it; a field of the wrong type is
/// ignored and named in [`Reply::problems`].
fn json(event: Event, answer: &Value) -> Reply {
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut reply = Reply {
        system_message: text(answer, "systemMessage"),
        terminal_sequence: text(answer, "terminalSequence")
            .map(|sequence| permitted_sequence(&sequence))
            .filter(|sequence| !sequence.is_empty()),
        problems: type_problems(answer),
        ..Reply::default()
    };
    if answer.get("continue") == Some(&Value::Bool(false)) {
        reply.end = Some(text(answer, "stopReason").unwrap_or_else(|| "stopped by a hook".into()));
    }
    match answer.get("decision").and_then(Value::as_str) {
        Some("block") => {
            reply.block =
                Some(text(answer, "reason").unwrap_or_else(|| "blocked by a hook".into()));
        }
        Some("approve") => reply.permission = Some((Permission::Allow, text(answer, "reason"))),
        _ => {}
    }
    let Some(specific) = answer.get("hookSpecificOutput").filter(|specific| {
        specific
            .get("hookEventName")
            .and_then(Value::as_str)
            .is_none_or(|name| name == event.name())
    }) else {
        return reply;
    };
    reply.context = text(specific, "additionalContext");
    reply.worktree_path = text(specific, "worktreePath").filter(|path| !path.is_empty());
    reply.session_title = text(specific, "sessionTitle")
        .map(|title| title.trim().to_owned())
        .filter(|title| !title.is_empty());
    reply.initial_message = text(specific, "initialUserMessage").filter(|text| !text.is_empty());
    reply.reload_skills = specific.get("reloadSkills") == Some(&Value::Bool(true));
    reply.watch_paths = specific
        .get("watchPaths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let reason = text(specific, "permissionDecisionReason");
    reply.permission = match specific.get("permissionDecision").and_then(Value::as_str) {
        Some("allow") => Some((Permission::Allow, reason)),
        Some("ask") => Some((Permission::Ask, reason)),
        Some("deny") => Some((Permission::Deny, reason)),
        _ => reply.permission,
    };
    reply.updated_input = specific
        .get("updatedInput")
        .filter(|input| input.is_object())
        .cloned();
    reply.updated_output = specific
        .get("updatedToolOutput")
        .or_else(|| specific.get("updatedMCPToolOutput"))
        .cloned();
    if let Some(decision) = specific.get("decision") {
        reply.request = request_decision(decision);
    }
    reply
}

/// A permission decision in Claude Code's shape (a PermissionRequest hook's `decision`, the
/// Agent SDK's `PermissionResult`): `{"behavior": "allow", "updatedInput"?,
/// "updatedPermissions"?}` or `{"behavior": "deny", "message"?, "interrupt"?}`; `None` for
/// any other behavior.
pub fn request_decision(decision: &Value) -> Option<RequestDecision> {
    match decision.get("behavior").and_then(Value::as_str) {
        // An input to run instead that is no object cannot be run, and the model's must not
        // run in its place: refused.
        Some("allow")
            if decision
                .get("updatedInput")
                .is_some_and(|input| !input.is_null() && !input.is_object()) =>
        {
            Some(RequestDecision::Deny {
                message: Some(
                    "the allow's updatedInput is not an object, so the call was not run".into(),
                ),
                interrupt: false,
            })
        }
        Some("allow") => Some(RequestDecision::Allow {
            updated_input: decision
                .get("updatedInput")
                .filter(|input| input.is_object())
                .cloned(),
            updated_permissions: decision
                .get("updatedPermissions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }),
        Some("deny") => Some(RequestDecision::Deny {
            message: decision
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            interrupt: decision.get("interrupt") == Some(&Value::Bool(true)),
        }),
        _ => None,
    }
}

/// The parts of a hook's `terminalSequence` Claude Code permits: BEL, and the operating
/// system commands that set the title or notify (`ESC ] N ; text` ended by BEL or `ESC \`,
/// N one of 0, 1, 2, 9, 99, 777) with no other control character in their text. Anything
/// else is dropped.
pub fn permitted_sequence(sequence: &str) -> String {
    const PERMITTED: [&str; 6] = ["0", "1", "2", "9", "99", "777"];
    let mut kept = String::new();
    let mut rest = sequence;
    while let Some(first) = rest.chars().next() {
        if first == '\u{7}' {
            kept.push(first);
            rest = &rest[1..];
            continue;
        }
        let Some(body) = rest.strip_prefix("\u{1b}]") else {
            // Not a sequence: skip to the next escape or bell.
            let next = rest[first.len_utf8()..]
                .find(['\u{1b}', '\u{7}'])
                .map_or(rest.len(), |at| at + first.len_utf8());
            rest = &rest[next..];
            continue;
        };
        let end = body
            .find(['\u{7}', '\u{1b}'])
            .map(|at| (at, body[at..].starts_with('\u{7}')));
        let Some((at, bell)) =
            end.filter(|(at, bell)| *bell || body[*at..].starts_with("\u{1b}\\"))
        else {
            // Another escape inside it, or unterminated: dropped through its end.
            let stop = [
                body.find('\u{7}').map(|at| at + 1),
                body.find("\u{1b}\\").map(|at| at + 2),
            ];
            rest = stop
                .into_iter()
                .flatten()
                .min()
                .map_or("", |at| &body[at..]);
            continue;
        };
        let terminator = if bell { 1 } else { 2 };
        let text = &body[..at];
        let number = text.split(';').next().unwrap_or_default();
        if text.contains(';') && PERMITTED.contains(&number) && !text.chars().any(char::is_control)
        {
            kept.push_str(&rest[..2 + at + terminator]);
        }
        rest = &body[at + terminator..];
    }
    kept
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn only_title_and_notification_sequences_pass() {
        let notify = "\u{1b}]9;Build done\u{7}";
        let title = "\u{1b}]2;agent\u{1b}\\";
        let urxvt = "\u{1b}]777;notify;agent;done\u{7}";
        assert_eq!(permitted_sequence(notify), notify);
        assert_eq!(permitted_sequence(title), title);
        assert_eq!(permitted_sequence(urxvt), urxvt);
        assert_eq!(permitted_sequence("\u{7}"), "\u{7}");
        // A clipboard write (OSC 52), a colour change, a cursor move, plain text: dropped.
        assert_eq!(permitted_sequence("\u{1b}]52;c;cm0gLXJmIH4=\u{7}"), "");
        assert_eq!(permitted_sequence("\u{1b}]4;1;rgb:ff/00/00\u{7}"), "");
        assert_eq!(permitted_sequence("\u{1b}[2J\u{1b}[H"), "");
        assert_eq!(permitted_sequence("hello"), "");
        // A hidden escape inside a permitted one's text, an unterminated one: dropped.
        assert_eq!(permitted_sequence("\u{1b}]0;a\u{1b}[31mb\u{7}"), "");
        assert_eq!(permitted_sequence("\u{1b}]0;title"), "");
        // The permitted parts of a mixture are kept, in order.
        assert_eq!(
            permitted_sequence(&format!("{notify}\u{1b}]52;c;eA==\u{7}{title}")),
            format!("{notify}{title}")
        );
    }

    use super::*;

    fn ok(event: Event, stdout: &str) -> Reply {
        read(event, Some(0), stdout, "").unwrap()
    }

    #[test]
    fn exit_codes_decide_first() {
        assert_eq!(
            read(
                Event::PreToolUse,
                Some(2),
                "{\"decision\":\"approve\"}",
                "no rm"
            )
            .unwrap(),
            Reply {
                block: Some("no rm".into()),
                ..Reply::default()
            }
        );
        assert_eq!(
            read(Event::Stop, Some(1), "", "boom").unwrap_err(),
            "failed (exit status 1): boom"
        );
        assert_eq!(
            read(Event::Stop, None, "", "").unwrap_err(),
            "failed (status killed by a signal)"
        );
        assert_eq!(
            read(Event::Stop, Some(0), "{not json", "").unwrap_err(),
            "printed invalid JSON, ignored: {not json"
        );
    }

    #[test]
    fn answers_of_the_wrong_type_are_named() {
        let reply = ok(
            Event::PreToolUse,
            r#"{"continue": "false", "decision": "deny", "hookSpecificOutput": {"permissionDecision": "DENY"}}"#,
        );
        assert_eq!(reply.end, None);
        assert_eq!(reply.permission, None);
        assert_eq!(
            reply.problems,
            [
                "continue \"false\" (wanted true or false)",
                "decision \"deny\" (wanted \"approve\" or \"block\")",
                "hookSpecificOutput.permissionDecision \"DENY\" (wanted \"allow\", \"deny\" or \"ask\")",
            ]
        );
        assert_eq!(
            ok(Event::PreToolUse, r#"{"hookSpecificOutput": []}"#).problems,
            ["hookSpecificOutput [] (wanted an object)"]
        );
        assert!(
            ok(Event::Stop, r#"{"continue": false, "decision": "block"}"#)
                .problems
                .is_empty()
        );
    }

    #[test]
    fn a_worktree_create_hook_names_its_folder_either_way() {
        let plain = ok(Event::WorktreeCreate, "\n/work/trees/a\nextra\n");
        assert_eq!(plain.worktree_path.as_deref(), Some("/work/trees/a"));
        assert_eq!(plain.context, None);
        let json = ok(
            Event::WorktreeCreate,
            r#"{"hookSpecificOutput": {"hookEventName": "WorktreeCreate", "worktreePath": "/w/b"}}"#,
        );
        assert_eq!(json.worktree_path.as_deref(), Some("/w/b"));
        assert_eq!(ok(Event::WorktreeCreate, "").worktree_path, None);
        // Another event's stdout is never a worktree.
        assert_eq!(ok(Event::SessionStart, "/w/c").worktree_path, None);
    }

    #[test]
    fn plain_stdout_is_context_only_where_claude_code_gives_it_the_model() {
        assert_eq!(
            ok(Event::SessionStart, "branch main").context.as_deref(),
            Some("branch main")
        );
        assert_eq!(
            ok(Event::UserPromptSubmit, "it is Friday")
                .context
                .as_deref(),
            Some("it is Friday")
        );
        assert_eq!(ok(Event::PostToolUse, "lint ok"), Reply::default());
        assert_eq!(ok(Event::Stop, ""), Reply::default());
    }

    #[test]
    fn json_answers_in_every_spelling() {
        assert_eq!(
            ok(
                Event::Stop,
                r#"{"continue": false, "stopReason": "enough", "systemMessage": "bye"}"#
            ),
            Reply {
                end: Some("enough".into()),
                system_message: Some("bye".into()),
                ..Reply::default()
            }
        );
        assert_eq!(
            ok(
                Event::Stop,
                r#"{"decision": "block", "reason": "tests first"}"#
            )
            .block,
            Some("tests first".into())
        );
        assert_eq!(
            ok(Event::PreToolUse, r#"{"decision": "approve"}"#).permission,
            Some((Permission::Allow, None))
        );
        let pre = ok(
            Event::PreToolUse,
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": "no rm", "updatedInput": {"command": "ls"},
                "additionalContext": "on main"}}"#,
        );
        assert_eq!(
            pre.permission,
            Some((Permission::Deny, Some("no rm".into())))
        );
        assert_eq!(pre.updated_input, Some(json!({"command": "ls"})));
        assert_eq!(pre.context.as_deref(), Some("on main"));
        // Another event's output says nothing here.
        assert_eq!(
            ok(
                Event::PreToolUse,
                r#"{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "x"}}"#
            ),
            Reply::default()
        );
        let post = ok(
            Event::PostToolUse,
            r#"{"hookSpecificOutput": {"updatedMCPToolOutput": "short"}}"#,
        );
        assert_eq!(post.updated_output, Some(json!("short")));
        let request = ok(
            Event::PermissionRequest,
            r#"{"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow", "updatedInput": {"command": "ls -a"}}}}"#,
        );
        assert_eq!(
            request.request,
            Some(RequestDecision::Allow {
                updated_input: Some(json!({"command": "ls -a"})),
                updated_permissions: Vec::new(),
            })
        );
        let denied = ok(
            Event::PermissionRequest,
            r#"{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "not on Fridays"}}}"#,
        );
        assert_eq!(
            denied.request,
            Some(RequestDecision::Deny {
                message: Some("not on Fridays".into()),
                interrupt: false,
            })
        );
    }
}
