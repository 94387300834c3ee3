//! The body of `POST /v1/messages`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JsonObject;
use crate::content::{CacheControl, TextBlock};
use crate::message::MessageParam;
use crate::tagged::skip_none;

/// Request body of `POST /v1/messages`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateMessageRequest {
    /// Model id, such as `claude-opus-4-8`.
    pub model: String,
    /// Output cap in tokens.
    pub max_tokens: u32,
    /// The conversation so far; must start with a user message and alternate roles.
    pub messages: Vec<MessageParam>,
    /// System prompt.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub system: Option<SystemPrompt>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// How the model must pick tools.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Extended thinking configuration.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub thinking: Option<ThinkingConfig>,
    /// `output_config`: how much effort the model puts into its answer.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub output_config: Option<OutputConfig>,
    /// `true` for a server-sent-event response.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub stream: Option<bool>,
    /// Strings that end generation when produced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Sampling temperature, 0.0 to 1.0.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub temperature: Option<f32>,
    /// Request metadata (`user_id`).
    #[serde(default, skip_serializing_if = "skip_none")]
    pub metadata: Option<Metadata>,
    /// Parameters this crate does not model (`top_k`, `service_tier`, `context_management`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CreateMessageRequest {
    /// A request with the required fields and nothing else.
    pub fn new(model: impl Into<String>, max_tokens: u32, messages: Vec<MessageParam>) -> Self {
        Self {
            model: model.into(),
            max_tokens,
            messages,
            system: None,
            tools: Vec::new(),
            tool_choice: None,
            thinking: None,
            output_config: None,
            stream: None,
            stop_sequences: Vec::new(),
            temperature: None,
            metadata: None,
            extra: JsonObject::new(),
        }
    }
}

/// The system prompt: a plain string or text blocks (blocks can carry cache breakpoints).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SystemPrompt {
    /// A plain string.
    Text(String),
    /// Text blocks, the form Claude Code sends (three blocks, the last two cached).
    Blocks(Vec<SystemBlock>),
}

/// One system prompt block: always `"type":"text"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemBlock {
    /// Always `"text"`.
    #[serde(rename = "type")]
    pub kind: SystemBlockKind,
    /// The block's text and cache breakpoint.
    #[serde(flatten)]
    pub text: TextBlock,
}

/// The only type a system block may have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SystemBlockKind {
    /// `"text"`.
    #[default]
    Text,
}

impl SystemBlock {
    /// A system text block, with a cache breakpoint when `cache_control` is set.
    pub fn new(text: impl Into<String>, cache_control: Option<CacheControl>) -> Self {
        let mut text = TextBlock::new(text);
        text.cache_control = cache_control;
        Self {
            kind: SystemBlockKind::Text,
            text,
        }
    }
}

/// A tool declaration: name, description and a JSON Schema (2020-12) of its input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub description: Option<String>,
    /// JSON Schema of the input object (`Null`, and not written, for a server tool such as
    /// `{"type": "web_search_20250305", "name": "web_search"}`).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input_schema: Value,
    /// Prompt-caching breakpoint (this project places none on tools; see API-NOTES).
    #[serde(default, skip_serializing_if = "skip_none")]
    pub cache_control: Option<CacheControl>,
    /// Fields this crate does not model (`type` of server tools, ...), kept in arrival order.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// How the model must pick tools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    Auto {
        /// Forbid calling several tools in one response.
        #[serde(default, skip_serializing_if = "skip_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must call some tool.
    Any {
        /// Forbid calling several tools in one response.
        #[serde(default, skip_serializing_if = "skip_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must call the named tool.
    Tool {
        /// The tool's name.
        name: String,
        /// Forbid calling several tools in one response.
        #[serde(default, skip_serializing_if = "skip_none")]
        disable_parallel_tool_use: Option<bool>,
    },
    /// The model must not call tools.
    None,
}

/// Extended thinking configuration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingConfig {
    /// Thinking with a token budget (at least 1,024, below `max_tokens`).
    Enabled {
        /// Thinking budget in tokens.
        budget_tokens: u32,
    },
    /// No thinking.
    Disabled,
    /// The model decides how much to think (what Claude Code sends).
    Adaptive,
}

impl ThinkingConfig {
    /// The smallest budget the API takes, in tokens.
    pub const MIN_BUDGET: u32 = 1_024;

    /// This configuration for a request whose output cap is `max_tokens`: a budget must stay
    /// below the cap (the API refuses it otherwise), so it is lowered to `max_tokens - 1`,
    /// and thinking is left out (`None`) when not even [`ThinkingConfig::MIN_BUDGET`] fits.
    /// Adaptive and disabled thinking are unchanged.
    pub fn fit(self, max_tokens: u32) -> Option<Self> {
        match self {
            Self::Enabled { budget_tokens } => {
                let budget = budget_tokens.min(max_tokens.saturating_sub(1));
                (budget >= Self::MIN_BUDGET).then_some(Self::Enabled {
                    budget_tokens: budget,
                })
            }
            other => Some(other),
        }
    }
}

/// How much effort the model puts into an answer: its thinking and its tool calls (the
/// Messages API's `output_config.effort`; OpenAI's `reasoning_effort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// The least thinking, the fastest answers.
    Low,
    /// Moderate thinking.
    Medium,
    /// Deep reasoning: the API's default.
    High,
    /// Deeper than high (the newest models).
    #[serde(rename = "xhigh")]
    XHigh,
    /// The most (some models).
    Max,
}

impl Effort {
    /// Every level, lowest first.
    pub const ALL: [Self; 5] = [Self::Low, Self::Medium, Self::High, Self::XHigh, Self::Max];

    /// Its name in requests and settings (`low`, ..., `xhigh`, `max`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::XHigh => "xhigh",
            Self::Max => "max",
        }
    }

    /// The level named `name` (as [`Effort::as_str`] writes it, any case).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|effort| effort.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

/// `output_config` of a request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputConfig {
    /// How much effort the model puts in.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub effort: Option<Effort>,
    /// Fields this crate does not model (`format`, `task_budget`).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Request metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// An opaque id of the end user, for abuse detection.
    #[serde(default, skip_serializing_if = "skip_none")]
    pub user_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::CacheControl;

    #[test]
    fn claude_code_shaped_request_serializes() {
        let mut request = CreateMessageRequest::new(
            "claude-opus-4-8",
            64_000,
            vec![MessageParam::user_text("hi")],
        );
        request.system = Some(SystemPrompt::Blocks(vec![
            SystemBlock::new("You are an agent.", None),
            SystemBlock::new("Static rules.", Some(CacheControl::ephemeral())),
        ]));
        request.thinking = Some(ThinkingConfig::Adaptive);
        request.stream = Some(true);
        request.tool_choice = Some(ToolChoice::Auto {
            disable_parallel_tool_use: None,
        });
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"model":"claude-opus-4-8","max_tokens":64000,"#,
                r#""messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"#,
                r#""system":[{"type":"text","text":"You are an agent."},"#,
                r#"{"type":"text","text":"Static rules.","cache_control":{"type":"ephemeral"}}],"#,
                r#""tool_choice":{"type":"auto"},"thinking":{"type":"adaptive"},"stream":true}"#
            )
        );
        let back: CreateMessageRequest = serde_json::from_str(&json).unwrap();
        assert_eq!(back, request);
    }
}
