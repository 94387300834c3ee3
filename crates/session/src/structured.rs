//! `--json-schema`: a final answer in a shape the caller gives, validated.
//!
//! The model gets a `StructuredOutput` tool whose input schema is the caller's (the
//! executor checks every call against it, with the subset of JSON Schema it documents: a
//! schema needing more is refused up front, see [`executor::schema::unsupported_keywords`]),
//! and is told to call it once with its final answer. A stop hook in front of the session's
//! own makes the model try again when it ends without a valid call, at most
//! [`MAX_TRIES`] times; the result then carries `structured_output`, or has the subtype
//! `error_max_structured_output_retries`.

use std::sync::{Arc, Mutex, PoisonError};

use executor::{Tool, ToolContext, ToolFuture, ToolOutput};
use loop_core::{StopDecision, StopFuture, StopHook, StopHookInput};
use serde_json::Value;

/// The tool's name (Claude Code's).
pub const TOOL_NAME: &str = "StructuredOutput";

/// How many times the model may end its turn without a valid structured output.
pub const MAX_TRIES: u32 = 3;

/// What the system prompt adds.
pub const INSTRUCTION: &str = "The caller wants your final answer as structured data: when the task is done, call the StructuredOutput tool once with the answer in the shape its input schema gives (the tool checks it). After a successful call, end your turn without repeating the answer.";

/// The structured output of a run, as far as it got.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The accepted value.
    pub value: Option<Value>,
    /// Times the model ended its turn without one.
    pub misses: u32,
}

/// Shared between the tool, the stop hook and the result.
pub type Shared = Arc<Mutex<Outcome>>;

/// The caller's schema, checked: a JSON text or a file's path; an object schema using only
/// keywords the validator checks.
///
/// # Errors
///
/// What is wrong with it, naming the flag.
pub fn load_schema(value: &str) -> anyhow::Result<Value> {
    let text = if value.trim_start().starts_with('{') {
        value.to_owned()
    } else {
        std::fs::read_to_string(value)
            .map_err(|error| anyhow::anyhow!("--json-schema: reading {value}: {error}"))?
    };
    let schema: Value = serde_json::from_str(&text)
        .map_err(|error| anyhow::anyhow!("--json-schema: not JSON: {error}"))?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        anyhow::bail!(
            "--json-schema: the schema must describe an object (\"type\": \"object\"), the tool input the answer is given as"
        );
    }
    let unsupported = executor::schema::unsupported_keywords(&schema);
    if !unsupported.is_empty() {
        anyhow::bail!(
            "--json-schema: agent cannot check these keywords, so it cannot promise the shape: {}",
            unsupported.join(", ")
        );
    }
    Ok(schema)
}

/// The `StructuredOutput` tool.
#[derive(Debug)]
pub(crate) struct StructuredOutputTool {
    schema: Value,
    shared: Shared,
}

impl StructuredOutputTool {
    /// The tool for `schema`, recording into `shared`.
    pub fn new(schema: Value, shared: Shared) -> Self {
        Self { schema, shared }
    }
}

impl Tool for StructuredOutputTool {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn description(&self) -> &str {
        "Give your final answer as structured data, in the shape of this tool's input schema. Call it once, when the task is done."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        // The executor checked `input` against the schema before calling.
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .value = Some(input);
        Box::pin(std::future::ready(Ok(ToolOutput::text(
            "Structured output accepted. End your turn now.",
        ))))
    }
}

/// The stop hook in front of the session's: no end without a valid structured output, at
/// most [`MAX_TRIES`] misses.
pub(crate) struct RequireOutput {
    shared: Shared,
    inner: Arc<dyn StopHook>,
}

impl RequireOutput {
    /// In front of `inner`.
    pub fn new(shared: Shared, inner: Arc<dyn StopHook>) -> Self {
        Self { shared, inner }
    }
}

impl StopHook for RequireOutput {
    fn on_stop(&self, input: StopHookInput) -> StopFuture<'_> {
        let decision = {
            let mut outcome = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            if outcome.value.is_some() {
                None
            } else {
                outcome.misses += 1;
                Some(if outcome.misses >= MAX_TRIES {
                    StopDecision::Prevent {
                        reason: format!("no valid structured output after {MAX_TRIES} tries"),
                    }
                } else {
                    StopDecision::Block {
                        reasons: vec![format!(
                            "You ended your turn without calling {TOOL_NAME}. Call it now with your final answer in the shape of its input schema."
                        )],
                    }
                })
            }
        };
        match decision {
            Some(decision) => Box::pin(std::future::ready(decision)),
            None => self.inner.on_stop(input),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_checked_up_front() {
        assert!(
            load_schema(r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#).is_ok()
        );
        let error = load_schema(r#"{"type": "array"}"#).unwrap_err().to_string();
        assert!(error.contains("must describe an object"), "{error}");
        let error = load_schema(r#"{"type": "object", "if": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cannot check these keywords, so it cannot promise the shape: /: if"),
            "{error}"
        );
        let error = load_schema("/no/such/schema.json").unwrap_err().to_string();
        assert!(
            error.starts_with("--json-schema: reading /no/such/schema.json"),
            "{error}"
        );
    }
}
