//! Claude Code's `prompt` hooks: a condition the small fast model judges. The hook's
//! `prompt` (with `$ARGUMENTS` replaced by the event's JSON, or the JSON after it when it
//! has no `$ARGUMENTS`) goes to the model (the hook's `model`, else the session's small fast
//! model), which answers `{"ok": true}` or `{"ok": false, "reason": ...}`; `ok: false`
//! blocks as a command hook's exit 2 does, with the reason. The default timeout is 30 s
//! (Claude Code 2.1.197's).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

use super::reply::Reply;
use crate::settings::HookCommand;

/// A prompt hook's default timeout (2.1.197: 30 000 ms).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The instructions the model judges a prompt hook's condition under.
pub const SYSTEM: &str = "You evaluate a condition for a hook of a coding agent. You get the hook's instruction and the event it fires on, as JSON. Decide whether the condition holds (the action may go on, the work is done, the prompt is fine). Answer with one JSON object and nothing else: {\"ok\": true} when it holds, or {\"ok\": false, \"reason\": \"...\"} when it does not, where the reason says plainly what is missing or wrong; the agent is told it.";

/// The future a [`HookModel`] returns: the answer's text, or why there is none.
pub type HookModelFuture<'a> = Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>>;

/// The model prompt hooks ask: one request, no tools.
pub trait HookModel: Send + Sync {
    /// Sends `prompt` under `system` to `model` (`None`: the session's small fast model)
    /// and returns the text of the answer.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future abandons the request.
    fn ask<'a>(
        &'a self,
        model: Option<&'a str>,
        system: &'a str,
        prompt: String,
    ) -> HookModelFuture<'a>;
}

/// The text sent for `hook` on the event `input`.
pub(super) fn prompt_text(hook: &HookCommand, input: &Value) -> String {
    let prompt = hook.prompt.as_deref().unwrap_or_default();
    let json = input.to_string();
    if prompt.contains("$ARGUMENTS") {
        prompt.replace("$ARGUMENTS", &json)
    } else {
        format!("{prompt}\n\nThe event:\n{json}")
    }
}

/// What the model's `answer` says, as a hook's reply.
///
/// # Errors
///
/// An answer that holds no `{"ok": ...}` object.
pub fn read(answer: &str) -> Result<Reply, String> {
    let object = answer
        .find('{')
        .zip(answer.rfind('}'))
        .filter(|(start, end)| start < end)
        .and_then(|(start, end)| serde_json::from_str::<Value>(&answer[start..=end]).ok());
    let Some(ok) = object
        .as_ref()
        .and_then(|object| object.get("ok"))
        .and_then(Value::as_bool)
    else {
        return Err(format!(
            "answered without {{\"ok\": true|false}}: {}",
            answer.chars().take(200).collect::<String>()
        ));
    };
    if ok {
        return Ok(Reply::default());
    }
    let reason = object
        .as_ref()
        .and_then(|object| object.get("reason"))
        .and_then(Value::as_str)
        .filter(|reason| !reason.trim().is_empty())
        .unwrap_or("the condition of a prompt hook does not hold");
    Ok(Reply {
        block: Some(reason.to_owned()),
        ..Reply::default()
    })
}

/// Asks `model` about `hook` on the event `input`, for at most `timeout`.
///
/// # Errors
///
/// No model, the request failing or timing out, an answer without `ok`: a line for the
/// user after the hook's name.
pub async fn run(
    model: Option<&dyn HookModel>,
    hook: &HookCommand,
    timeout: Duration,
    input: &Value,
) -> Result<Reply, String> {
    let model = model.ok_or_else(|| "cannot be asked: no model here".to_owned())?;
    let asked = model.ask(hook.model.as_deref(), SYSTEM, prompt_text(hook, input));
    let answer = tokio::time::timeout(timeout, asked)
        .await
        .map_err(|_| format!("timed out after {} s", timeout.as_secs_f64()))?
        .map_err(|error| format!("failed: {error}"))?;
    read(&answer)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_answer_is_read_where_it_is() {
        assert_eq!(read("{\"ok\": true}"), Ok(Reply::default()));
        assert_eq!(
            read("Sure.\n```json\n{\"ok\": false, \"reason\": \"tests not run\"}\n```")
                .unwrap()
                .block
                .as_deref(),
            Some("tests not run")
        );
        assert!(
            read("I think so")
                .unwrap_err()
                .starts_with("answered without")
        );
        let hook: HookCommand =
            serde_json::from_value(json!({"type": "prompt", "prompt": "Is it done? $ARGUMENTS"}))
                .unwrap();
        assert_eq!(
            prompt_text(&hook, &json!({"a": 1})),
            "Is it done? {\"a\":1}"
        );
    }
}
