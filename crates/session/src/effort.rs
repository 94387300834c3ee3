//! Thinking and effort, as the user chose them (`--effort`, `/effort`, settings'
//! `effortLevel` and `alwaysThinkingEnabled`, `MAX_THINKING_TOKENS`), turned into each
//! request's `thinking` and `output_config.effort` for the model at hand
//! ([`context::reasoning`]):
//!
//! - a Claude model that thinks adaptively (Opus 4.6 and later, Sonnet 4.6 and later) thinks
//!   adaptively, as Claude Code asks it to, guided by the effort when one is chosen;
//! - an earlier Claude model that thinks with a budget (Opus 4.5, Sonnet 4.5, Haiku 4.5,
//!   Claude 4, Sonnet 3.7) gets `MAX_THINKING_TOKENS`, else a budget by effort
//!   ([`budget`]), never more than three quarters of the output cap;
//! - an effort a model does not take is lowered to the nearest one it does (`xhigh` on
//!   Sonnet 4.6 is `high`), as Claude Code lowers it; a model without the parameter gets none;
//! - OpenAI-style providers get the chosen effort as `reasoning_effort` /
//!   `reasoning.effort`, and no Anthropic thinking;
//! - `alwaysThinkingEnabled: false` or `MAX_THINKING_TOKENS=0` turn thinking off.

use loop_core::LoopConfig;
use protocol::{Effort, ThinkingConfig};

/// The budget a budget-thinking model gets for `effort` (none chosen: `high`), in tokens,
/// before the cap's limit: 2,048 (low), 8,192 (medium), 16,384 (high), 24,576 (xhigh),
/// 32,000 (max). Ours: Anthropic documents budgets from 1,024 up, and a larger budget for
/// harder tasks; Claude Code's own default budget is 31,999.
pub fn budget(effort: Option<Effort>) -> u32 {
    match effort.unwrap_or(Effort::High) {
        Effort::Low => 2_048,
        Effort::Medium => 8_192,
        Effort::High => 16_384,
        Effort::XHigh => 24_576,
        Effort::Max => 32_000,
    }
}

/// What the user chose about thinking and effort.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReasoningChoice {
    /// `--effort`, `/effort`, else settings' `effortLevel`; `None`: the model's default.
    pub effort: Option<Effort>,
    /// Settings' `alwaysThinkingEnabled`: `false` turns thinking off.
    pub thinking: Option<bool>,
    /// `MAX_THINKING_TOKENS` (settings' `env` first): `0` turns thinking off; any other
    /// value is the budget of a budget-thinking model.
    pub max_thinking_tokens: Option<u32>,
}

impl ReasoningChoice {
    /// The choice from the flag (`flag`, before the settings), the settings' keys (`other`:
    /// `effortLevel`, `alwaysThinkingEnabled`) and `MAX_THINKING_TOKENS` (`lookup`).
    ///
    /// # Errors
    ///
    /// A value that is not one the key takes, naming the key and the levels.
    pub fn new(
        flag: Option<Effort>,
        other: &std::collections::BTreeMap<String, serde_json::Value>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Self> {
        let effort = match (flag, other.get("effortLevel")) {
            (Some(effort), _) => Some(effort),
            (None, None) => None,
            (None, Some(value)) => Some(
                value
                    .as_str()
                    .and_then(Effort::from_name)
                    .ok_or_else(|| anyhow::anyhow!("settings: effortLevel {value}: {}", LEVELS))?,
            ),
        };
        let thinking = match other.get("alwaysThinkingEnabled") {
            None => None,
            Some(serde_json::Value::Bool(on)) => Some(*on),
            Some(value) => anyhow::bail!("settings: alwaysThinkingEnabled {value}: true or false"),
        };
        let max_thinking_tokens = match lookup("MAX_THINKING_TOKENS") {
            None => None,
            Some(value) => Some(value.trim().parse::<u32>().map_err(|_| {
                anyhow::anyhow!(
                    "MAX_THINKING_TOKENS {value:?}: a number of tokens (0 turns thinking off)"
                )
            })?),
        };
        Ok(Self {
            effort,
            thinking,
            max_thinking_tokens,
        })
    }

    /// Whether thinking is on (it is unless turned off).
    pub fn thinking_on(&self) -> bool {
        self.thinking != Some(false) && self.max_thinking_tokens != Some(0)
    }

    /// Sets `config`'s `thinking` and `effort` for its model and output cap; `openai`: the
    /// session's provider speaks an OpenAI format.
    pub fn configure(&self, config: &mut LoopConfig, openai: bool) {
        if openai {
            config.thinking = None;
            config.effort = self.effort;
            return;
        }
        let reasoning = context::reasoning(&config.model);
        config.effort = self.effort.and_then(|effort| reasoning.effort(effort));
        config.thinking = match reasoning.thinking {
            _ if !self.thinking_on() => None,
            context::ThinkingSupport::None => None,
            context::ThinkingSupport::Budget => {
                let wanted = self
                    .max_thinking_tokens
                    .unwrap_or_else(|| budget(self.effort));
                let ceiling = config.output_cap.saturating_mul(3) / 4;
                Some(ThinkingConfig::Enabled {
                    budget_tokens: wanted.min(ceiling),
                })
                .and_then(|thinking| thinking.fit(config.output_cap))
            }
            context::ThinkingSupport::Adaptive | context::ThinkingSupport::AdaptiveOnly => {
                Some(ThinkingConfig::Adaptive)
            }
        };
    }

    /// A line for `/effort` and `/status`: the level chosen (or the model's default) and
    /// whether thinking is on.
    pub fn describe(&self, config: &LoopConfig) -> String {
        let effort = match (self.effort, config.effort) {
            (None, _) => "the model's default".to_owned(),
            (Some(chosen), Some(sent)) if chosen == sent => chosen.as_str().to_owned(),
            (Some(chosen), Some(sent)) => format!(
                "{} ({} is not taken by {}: {} is sent)",
                sent.as_str(),
                chosen.as_str(),
                config.model,
                sent.as_str()
            ),
            (Some(chosen), None) => format!(
                "{} (not sent: {} takes no effort level)",
                chosen.as_str(),
                config.model
            ),
        };
        let thinking = match config.thinking {
            Some(ThinkingConfig::Adaptive) => "adaptive".to_owned(),
            Some(ThinkingConfig::Enabled { budget_tokens }) => {
                format!("a budget of {budget_tokens} tokens")
            }
            Some(ThinkingConfig::Disabled) | None if !self.thinking_on() => {
                "off (Alt+T, alwaysThinkingEnabled or MAX_THINKING_TOKENS)".to_owned()
            }
            _ => "none (the model does not think)".to_owned(),
        };
        format!("Effort: {effort}. Thinking: {thinking}.")
    }
}

/// Flips `switch` ([`crate::Session::thinking_switch`]) and says what the next prompts get
/// (Alt+T).
pub fn toggle(switch: &std::sync::atomic::AtomicBool) -> String {
    let on = !switch.fetch_xor(true, std::sync::atomic::Ordering::Relaxed);
    if on {
        "  ⎿  thinking on for the next prompts (Alt+T: off)".to_owned()
    } else {
        "  ⎿  thinking off for the next prompts (Alt+T: on)".to_owned()
    }
}

/// The levels, for messages.
pub const LEVELS: &str = "low, medium, high, xhigh or max";

#[cfg(test)]
mod tests {
    use super::*;

    fn config(model: &str, cap: u32) -> LoopConfig {
        let mut config = LoopConfig::for_model_info(model, &context::lookup(model).0);
        config.output_cap = cap;
        config
    }

    #[test]
    fn each_model_family_gets_what_it_takes() {
        let choice = |effort| ReasoningChoice {
            effort,
            ..ReasoningChoice::default()
        };
        // Adaptive, with the effort as chosen or lowered.
        let mut opus = config("claude-opus-4-8", 64_000);
        choice(Some(Effort::XHigh)).configure(&mut opus, false);
        assert_eq!(
            (opus.thinking, opus.effort),
            (Some(ThinkingConfig::Adaptive), Some(Effort::XHigh))
        );
        let mut sonnet = config("claude-sonnet-4-6", 32_000);
        choice(Some(Effort::XHigh)).configure(&mut sonnet, false);
        assert_eq!(sonnet.effort, Some(Effort::High));
        // Budgets by effort, within three quarters of the cap.
        let mut older = config("claude-sonnet-4-5-20250929", 32_000);
        choice(Some(Effort::Low)).configure(&mut older, false);
        assert_eq!(
            (older.thinking, older.effort),
            (
                Some(ThinkingConfig::Enabled {
                    budget_tokens: 2_048
                }),
                None
            )
        );
        choice(Some(Effort::Max)).configure(&mut older, false);
        assert_eq!(
            older.thinking,
            Some(ThinkingConfig::Enabled {
                budget_tokens: 24_000
            })
        );
        choice(None).configure(&mut older, false);
        assert_eq!(
            older.thinking,
            Some(ThinkingConfig::Enabled {
                budget_tokens: 16_384
            })
        );
        // MAX_THINKING_TOKENS: the budget, or off.
        let budgeted = ReasoningChoice {
            max_thinking_tokens: Some(5_000),
            ..ReasoningChoice::default()
        };
        budgeted.configure(&mut older, false);
        assert_eq!(
            older.thinking,
            Some(ThinkingConfig::Enabled {
                budget_tokens: 5_000
            })
        );
        let off = ReasoningChoice {
            max_thinking_tokens: Some(0),
            ..ReasoningChoice::default()
        };
        off.configure(&mut opus, false);
        assert_eq!(opus.thinking, None);
        let off = ReasoningChoice {
            thinking: Some(false),
            effort: Some(Effort::Low),
            ..ReasoningChoice::default()
        };
        off.configure(&mut opus, false);
        assert_eq!((opus.thinking, opus.effort), (None, Some(Effort::Low)));
        // A model without thinking, and the OpenAI formats.
        let mut haiku = config("claude-3-5-haiku", 8_192);
        choice(Some(Effort::High)).configure(&mut haiku, false);
        assert_eq!((haiku.thinking, haiku.effort), (None, None));
        let mut gpt = config("gpt-5", 32_000);
        choice(Some(Effort::Medium)).configure(&mut gpt, true);
        assert_eq!((gpt.thinking, gpt.effort), (None, Some(Effort::Medium)));
        // A cap too small for a budget: no thinking.
        let mut tiny = config("claude-haiku-4-5", 1_200);
        choice(None).configure(&mut tiny, false);
        assert_eq!(tiny.thinking, None);
    }

    #[test]
    fn settings_and_the_variable_are_read_as_claude_code_writes_them() {
        let other: std::collections::BTreeMap<String, serde_json::Value> = [
            ("effortLevel".to_owned(), serde_json::json!("medium")),
            ("alwaysThinkingEnabled".to_owned(), serde_json::json!(false)),
        ]
        .into_iter()
        .collect();
        let none = |_: &str| None;
        let choice = ReasoningChoice::new(None, &other, &none).unwrap_or_default();
        assert_eq!(choice.effort, Some(Effort::Medium));
        assert!(!choice.thinking_on());
        // The flag wins over the setting.
        let flagged = ReasoningChoice::new(Some(Effort::Max), &other, &none).unwrap_or_default();
        assert_eq!(flagged.effort, Some(Effort::Max));
        let bad: std::collections::BTreeMap<String, serde_json::Value> =
            [("effortLevel".to_owned(), serde_json::json!("ultra"))]
                .into_iter()
                .collect();
        let error = ReasoningChoice::new(None, &bad, &none)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("settings: effortLevel \"ultra\": low, medium, high, xhigh or max")
        );
        let variable = |key: &str| (key == "MAX_THINKING_TOKENS").then(|| "lots".to_owned());
        let error = ReasoningChoice::new(None, &Default::default(), &variable)
            .err()
            .map(|e| e.to_string());
        assert!(error.is_some_and(|error| error.contains("MAX_THINKING_TOKENS \"lots\"")));
    }
}
