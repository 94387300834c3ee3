//! What the context code needs to know about each model: window, output caps, prices.
//!
//! Figures from Anthropic's public model documentation and pricing page, as of 2026-11; the
//! CLI lets settings override any entry. Prices are US dollars per million tokens.

use crate::tokens::Tokens;

/// One model's limits and prices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelInfo {
    /// Model id prefix this entry matches (dated ids such as `claude-sonnet-4-5-20250929`
    /// match `claude-sonnet-4-5`).
    pub id: &'static str,
    /// Context window in tokens.
    pub context_window: Tokens,
    /// Most output tokens the model can produce in one response.
    pub max_output: Tokens,
    /// The output cap sent by default (`max_tokens`).
    pub default_output_cap: Tokens,
    /// The cap the max_tokens recovery raises to, once (the model's max output).
    pub escalated_output_cap: Tokens,
    /// Prices, when known.
    pub prices: Option<Prices>,
}

/// The price of one server-side web search in US dollars (Anthropic's pricing: $10 per
/// 1,000 searches, on every model).
pub const WEB_SEARCH_USD: f64 = 0.01;

/// US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache writes with the 5-minute lifetime (1.25 x input).
    pub cache_write_5m: f64,
    /// Cache writes with the 1-hour lifetime (2 x input).
    pub cache_write_1h: f64,
    /// Cache reads (0.1 x input).
    pub cache_read: f64,
}

impl Prices {
    /// Prices derived from the input and output price with the standard cache multipliers
    /// (writes 1.25x for 5 minutes, 2x for 1 hour; reads 0.1x).
    pub const fn standard(input: f64, output: f64) -> Self {
        Self {
            input,
            output,
            cache_write_5m: input * 1.25,
            cache_write_1h: input * 2.0,
            cache_read: input * 0.1,
        }
    }

    /// The cost in dollars of a response's usage (cache writes priced as 5-minute writes,
    /// web searches at [`WEB_SEARCH_USD`] each).
    pub fn cost(&self, usage: &protocol::Usage) -> f64 {
        let per_token = |price: f64, tokens: u64| price * tokens as f64 / 1_000_000.0;
        let searches = WEB_SEARCH_USD * usage.web_search_requests() as f64;
        per_token(self.input, usage.input_tokens)
            + per_token(self.output, usage.output_tokens)
            + per_token(
                self.cache_write_5m,
                usage.cache_creation_input_tokens.unwrap_or(0),
            )
            + per_token(self.cache_read, usage.cache_read_input_tokens.unwrap_or(0))
            + searches
    }
}

const fn model(
    id: &'static str,
    window: u64,
    max_output: u64,
    default_cap: u64,
    prices: Prices,
) -> ModelInfo {
    ModelInfo {
        id,
        context_window: Tokens(window),
        max_output: Tokens(max_output),
        default_output_cap: Tokens(default_cap),
        escalated_output_cap: Tokens(max_output),
        prices: Some(prices),
    }
}

/// The model table, most specific ids first (a `[1m]` suffix selects the 1M-token window
/// where the model offers it, as Claude Code labels it).
pub const MODELS: &[ModelInfo] = &[
    model(
        "claude-opus-4-8[1m]",
        1_000_000,
        128_000,
        64_000,
        Prices::standard(5.0, 25.0),
    ),
    model(
        "claude-opus-4-8",
        200_000,
        128_000,
        64_000,
        Prices::standard(5.0, 25.0),
    ),
    model(
        "claude-opus-4-7",
        200_000,
        128_000,
        64_000,
        Prices::standard(5.0, 25.0),
    ),
    model(
        "claude-opus-4-6",
        200_000,
        128_000,
        64_000,
        Prices::standard(5.0, 25.0),
    ),
    model(
        "claude-opus-4-5",
        200_000,
        64_000,
        32_000,
        Prices::standard(5.0, 25.0),
    ),
    model(
        "claude-opus-4-1",
        200_000,
        32_000,
        32_000,
        Prices::standard(15.0, 75.0),
    ),
    model(
        "claude-opus-4",
        200_000,
        32_000,
        32_000,
        Prices::standard(15.0, 75.0),
    ),
    // Claude Code 2.1.197's table: a native 1M-token window, standard Sonnet prices.
    model(
        "claude-sonnet-5",
        1_000_000,
        64_000,
        32_000,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-sonnet-4-6[1m]",
        1_000_000,
        64_000,
        32_000,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-sonnet-4-6",
        200_000,
        64_000,
        32_000,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-sonnet-4-5[1m]",
        1_000_000,
        64_000,
        32_000,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-sonnet-4-5",
        200_000,
        64_000,
        32_000,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-sonnet-4",
        200_000,
        64_000,
        32_000,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-haiku-4-5",
        200_000,
        64_000,
        32_000,
        Prices::standard(1.0, 5.0),
    ),
    model(
        "claude-3-7-sonnet",
        200_000,
        64_000,
        8_192,
        Prices::standard(3.0, 15.0),
    ),
    model(
        "claude-3-5-haiku",
        200_000,
        8_192,
        8_192,
        Prices::standard(0.8, 4.0),
    ),
];

/// The entry assumed for unknown models: a 200,000-token window, a 32,000-token output cap,
/// no prices (cost reported as unknown).
pub const UNKNOWN_MODEL: ModelInfo = ModelInfo {
    id: "unknown",
    context_window: Tokens(200_000),
    max_output: Tokens(32_000),
    default_output_cap: Tokens(32_000),
    escalated_output_cap: Tokens(32_000),
    prices: None,
};

/// The entry for `model`: the longest id in [`MODELS`] that `model` starts with, or
/// [`UNKNOWN_MODEL`] with `known: false` (the caller should warn).
pub fn lookup(model: &str) -> (ModelInfo, bool) {
    let model = anthropic_id(model);
    MODELS
        .iter()
        .filter(|info| model.starts_with(info.id))
        .max_by_key(|info| info.id.len())
        .map_or((UNKNOWN_MODEL, false), |info| (*info, true))
}

/// The Anthropic model id inside a cloud platform's: Amazon Bedrock's model and inference
/// profile ids (`anthropic.claude-sonnet-4-5-20250929-v1:0`, with a `us.`, `eu.`, `apac.` or
/// `global.` profile prefix) lose the prefix and the version suffix; Google Vertex AI's
/// (`claude-sonnet-4-5@20250929`) have their `@` made a `-`. Any other name is returned as
/// it is. Shapes from the Bedrock and Vertex AI model catalogues.
pub fn anthropic_id(model: &str) -> std::borrow::Cow<'_, str> {
    if let Some(at) = model.find("anthropic.claude") {
        let id = &model[at + "anthropic.".len()..];
        let id = id.rfind("-v").map_or(id, |version| &id[..version]);
        return id.into();
    }
    if model.starts_with("claude") && model.contains('@') {
        return model.replacen('@', "-", 1).into();
    }
    model.into()
}

/// How a model thinks before it answers (the Messages API's `thinking`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingSupport {
    /// It does not.
    None,
    /// With a token budget only (`{"type": "enabled", "budget_tokens": N}`).
    Budget,
    /// Adaptively (`{"type": "adaptive"}`: it decides how much, guided by the effort), or
    /// with a budget (deprecated).
    Adaptive,
    /// Adaptively only: a budget is refused with an error.
    AdaptiveOnly,
}

/// A model's reasoning abilities: how it thinks, and the effort levels it takes
/// (`output_config.effort`; empty: no effort parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reasoning {
    /// How it thinks.
    pub thinking: ThinkingSupport,
    /// The effort levels it takes, lowest first.
    pub efforts: &'static [protocol::Effort],
}

impl Reasoning {
    /// The level sent for `wanted`: itself when the model takes it, else the highest level
    /// below it that it takes (Claude Code's silent downgrade: `xhigh` falls back to `high`);
    /// `None` when the model takes no effort parameter.
    pub fn effort(&self, wanted: protocol::Effort) -> Option<protocol::Effort> {
        self.efforts
            .iter()
            .copied()
            .filter(|effort| *effort <= wanted)
            .max()
            .or_else(|| self.efforts.first().copied())
    }
}

const ALL_EFFORTS: &[protocol::Effort] = &protocol::Effort::ALL;
const NO_XHIGH: &[protocol::Effort] = &[
    protocol::Effort::Low,
    protocol::Effort::Medium,
    protocol::Effort::High,
    protocol::Effort::Max,
];
const UP_TO_HIGH: &[protocol::Effort] = &[
    protocol::Effort::Low,
    protocol::Effort::Medium,
    protocol::Effort::High,
];

/// Reasoning abilities by model id prefix, the longest matching prefix deciding (as dated
/// ids match in [`MODELS`]). From Anthropic's documentation of adaptive thinking (Opus 4.6,
/// Sonnet 4.6 and later; only adaptive from Opus 4.7) and of the effort parameter (Opus 4.5
/// and later; `max` on Opus 4.6+ and Sonnet 4.6+, `xhigh` on Opus 4.7+ and Sonnet 5), as
/// Claude Code's `EffortLevel` describes them (sdk.d.ts, 2.1.197); earlier Claude 4 and 3.7
/// models think with a budget.
pub const REASONING: &[(&str, Reasoning)] = &[
    (
        "claude-opus-4-8",
        Reasoning {
            thinking: ThinkingSupport::AdaptiveOnly,
            efforts: ALL_EFFORTS,
        },
    ),
    (
        "claude-opus-4-7",
        Reasoning {
            thinking: ThinkingSupport::AdaptiveOnly,
            efforts: ALL_EFFORTS,
        },
    ),
    (
        "claude-opus-4-6",
        Reasoning {
            thinking: ThinkingSupport::Adaptive,
            efforts: NO_XHIGH,
        },
    ),
    (
        "claude-opus-4-5",
        Reasoning {
            thinking: ThinkingSupport::Budget,
            efforts: UP_TO_HIGH,
        },
    ),
    (
        "claude-opus-4",
        Reasoning {
            thinking: ThinkingSupport::Budget,
            efforts: &[],
        },
    ),
    (
        "claude-sonnet-5",
        Reasoning {
            thinking: ThinkingSupport::Adaptive,
            efforts: ALL_EFFORTS,
        },
    ),
    (
        "claude-sonnet-4-6",
        Reasoning {
            thinking: ThinkingSupport::Adaptive,
            efforts: NO_XHIGH,
        },
    ),
    (
        "claude-sonnet-4",
        Reasoning {
            thinking: ThinkingSupport::Budget,
            efforts: &[],
        },
    ),
    (
        "claude-haiku-4-5",
        Reasoning {
            thinking: ThinkingSupport::Budget,
            efforts: &[],
        },
    ),
    (
        "claude-3-7-sonnet",
        Reasoning {
            thinking: ThinkingSupport::Budget,
            efforts: &[],
        },
    ),
];

/// The reasoning abilities of `model` ([`REASONING`]); none for a model it does not list.
pub fn reasoning(model: &str) -> Reasoning {
    longest_prefix(REASONING, model).map_or(
        Reasoning {
            thinking: ThinkingSupport::None,
            efforts: &[],
        },
        |reasoning| *reasoning,
    )
}

/// Each model's reliable knowledge cutoff (month and year), by model id prefix, the longest
/// matching prefix deciding. From Anthropic's models overview ("Reliable knowledge cutoff")
/// and Claude Code 2.1.197's model table, which agree; Claude 3 models are not listed there.
pub const KNOWLEDGE_CUTOFFS: &[(&str, &str)] = &[
    ("claude-opus-4-8", "January 2026"),
    ("claude-opus-4-7", "January 2026"),
    ("claude-opus-4-6", "May 2025"),
    ("claude-opus-4-5", "May 2025"),
    ("claude-opus-4", "January 2025"),
    ("claude-sonnet-5", "January 2026"),
    ("claude-sonnet-4-6", "August 2025"),
    ("claude-sonnet-4", "January 2025"),
    ("claude-haiku-4-5", "February 2025"),
];

/// The reliable knowledge cutoff of `model` ([`KNOWLEDGE_CUTOFFS`]), such as `"January
/// 2026"`; `None` for a model the table does not list (the model is then not told one).
pub fn knowledge_cutoff(model: &str) -> Option<&'static str> {
    longest_prefix(KNOWLEDGE_CUTOFFS, model).copied()
}

/// The value of the longest key of `table` that `model` starts with.
fn longest_prefix<'a, T>(table: &'a [(&str, T)], model: &str) -> Option<&'a T> {
    table
        .iter()
        .filter(|(prefix, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_searches_are_priced_per_search() {
        let usage: protocol::Usage = serde_json::from_value(serde_json::json!({
            "input_tokens": 1_000_000, "output_tokens": 0,
            "server_tool_use": {"web_search_requests": 3}
        }))
        .unwrap();
        let cost = Prices::standard(3.0, 15.0).cost(&usage);
        assert!((cost - 3.03).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn knowledge_cutoffs_follow_the_most_specific_id() {
        assert_eq!(knowledge_cutoff("claude-opus-4-8"), Some("January 2026"));
        // A cloud platform's ids find the same entry.
        for id in [
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "claude-sonnet-4-5@20250929",
        ] {
            assert_eq!(anthropic_id(id), "claude-sonnet-4-5-20250929", "{id}");
            assert_eq!(lookup(id).0.id, "claude-sonnet-4-5", "{id}");
        }
        assert_eq!(anthropic_id("qwen3-coder"), "qwen3-coder");
        assert_eq!(knowledge_cutoff("claude-opus-4-6"), Some("May 2025"));
        // Dated ids and the first Claude 4 models' ids fall to their family's entry.
        assert_eq!(
            knowledge_cutoff("claude-opus-4-20250514"),
            Some("January 2025")
        );
        assert_eq!(
            knowledge_cutoff("claude-sonnet-4-6-20260101"),
            Some("August 2025")
        );
        assert_eq!(
            knowledge_cutoff("claude-haiku-4-5-20251001"),
            Some("February 2025")
        );
        assert_eq!(knowledge_cutoff("claude-3-7-sonnet-20250219"), None);
        assert_eq!(knowledge_cutoff("gpt-5"), None);
    }

    #[test]
    fn reasoning_by_model_and_effort_downgrades() {
        use protocol::Effort;
        let opus = reasoning("claude-opus-4-8[1m]");
        assert_eq!(opus.thinking, ThinkingSupport::AdaptiveOnly);
        assert_eq!(opus.effort(Effort::XHigh), Some(Effort::XHigh));
        let sonnet = reasoning("claude-sonnet-4-6");
        assert_eq!(sonnet.thinking, ThinkingSupport::Adaptive);
        assert_eq!(sonnet.effort(Effort::XHigh), Some(Effort::High));
        assert_eq!(sonnet.effort(Effort::Max), Some(Effort::Max));
        let older = reasoning("claude-opus-4-5-20251101");
        assert_eq!(older.thinking, ThinkingSupport::Budget);
        assert_eq!(older.effort(Effort::Max), Some(Effort::High));
        assert_eq!(reasoning("claude-sonnet-4-5").effort(Effort::Low), None);
        assert_eq!(
            reasoning("claude-opus-4-1").thinking,
            ThinkingSupport::Budget
        );
        assert_eq!(
            reasoning("claude-3-5-haiku").thinking,
            ThinkingSupport::None
        );
        assert_eq!(reasoning("gpt-5").thinking, ThinkingSupport::None);
    }

    #[test]
    fn lookup_by_prefix_and_unknown_fallback() {
        let (info, known) = lookup("claude-sonnet-4-5-20250929");
        assert!(known);
        assert_eq!(info.id, "claude-sonnet-4-5");
        assert_eq!(
            lookup("claude-opus-4-8[1m]").0.context_window,
            Tokens(1_000_000)
        );
        assert_eq!(lookup("claude-opus-4-8").0.context_window, Tokens(200_000));
        let (info, known) = lookup("gpt-9");
        assert!(!known);
        assert_eq!(
            (info.context_window, info.max_output, info.prices),
            (Tokens(200_000), Tokens(32_000), None)
        );
    }

    #[test]
    fn claude_code_reported_cost() {
        // Claude Code reported $0.042005 for 7,506 input and 179 output tokens on opus 4.8.
        let usage: protocol::Usage =
            serde_json::from_str(r#"{"input_tokens":7506,"output_tokens":179}"#).unwrap();
        let cost = lookup("claude-opus-4-8").0.prices.unwrap().cost(&usage);
        assert!((cost - 0.042_005).abs() < 1e-9, "{cost}");
    }
}
