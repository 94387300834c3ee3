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

    /// The cost in dollars of a response's usage (cache writes priced as 5-minute writes).
    pub fn cost(&self, usage: &protocol::Usage) -> f64 {
        let per_token = |price: f64, tokens: u64| price * tokens as f64 / 1_000_000.0;
        per_token(self.input, usage.input_tokens)
            + per_token(self.output, usage.output_tokens)
            + per_token(
                self.cache_write_5m,
                usage.cache_creation_input_tokens.unwrap_or(0),
            )
            + per_token(self.cache_read, usage.cache_read_input_tokens.unwrap_or(0))
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
    MODELS
        .iter()
        .filter(|info| model.starts_with(info.id))
        .max_by_key(|info| info.id.len())
        .map_or((UNKNOWN_MODEL, false), |info| (*info, true))
}

#[cfg(test)]
mod tests {
    use super::*;

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
