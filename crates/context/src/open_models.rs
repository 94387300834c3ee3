//! The open-weight models people run for coding (Qwen, DeepSeek, Kimi, GLM, gpt-oss,
//! Devstral, Llama...), from a data file (`data/open-models.json`, every figure cited there)
//! rather than code: each model's native context window, output cap, capabilities and the
//! price its own vendor's API charges.
//!
//! A served model's window can be smaller than its native one (Ollama runs every model at
//! its own default unless told otherwise), so callers ask the server first and take this
//! table's window only when the server says nothing.

use std::sync::LazyLock;

use crate::models::{ModelInfo, Prices};
use crate::tokens::Tokens;

/// One open model of the table.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct OpenModel {
    /// The name people use for it (`qwen3-coder`).
    pub id: String,
    /// Other ids it goes by (its Hugging Face repository, OpenRouter's `vendor/model`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The native context window, in tokens.
    pub context_window: u64,
    /// The most output tokens its vendor states, if any.
    #[serde(default)]
    pub max_output: Option<u64>,
    /// Native function calling.
    #[serde(default)]
    pub tools: bool,
    /// Image input.
    #[serde(default)]
    pub vision: bool,
    /// Reasoning (thinking) output.
    #[serde(default)]
    pub reasoning: bool,
    /// The price of its vendor's API, US dollars per million tokens.
    #[serde(default)]
    pub price: Option<OpenPrice>,
    /// Where the figures come from.
    #[serde(default)]
    pub sources: Vec<String>,
}

/// A vendor's price for an open model.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct OpenPrice {
    /// Input, US dollars per million tokens.
    pub input: f64,
    /// Output, US dollars per million tokens.
    pub output: f64,
    /// Whose API charges it.
    #[serde(default)]
    pub from: String,
}

#[derive(serde::Deserialize)]
struct Table {
    models: Vec<OpenModel>,
}

/// The table, parsed once. The file is part of the build: a malformed one fails this
/// crate's tests, so an empty table here can only mean it has no models.
static TABLE: LazyLock<Vec<OpenModel>> = LazyLock::new(|| {
    serde_json::from_str::<Table>(include_str!("../data/open-models.json"))
        .map(|table| table.models)
        .unwrap_or_default()
});

/// Every model of the table.
pub fn open_models() -> &'static [OpenModel] {
    &TABLE
}

/// The open model `name` names: an id or alias, compared without case, after the
/// `vendor/` of a router's id and an Ollama `:tag`, the longest that `name` starts with.
pub fn lookup_open(name: &str) -> Option<&'static OpenModel> {
    let lower = name.to_ascii_lowercase();
    let tail = lower.rsplit('/').next().unwrap_or(&lower);
    let untagged = tail.split(':').next().unwrap_or(tail);
    let candidates = [lower.as_str(), tail, untagged];
    TABLE
        .iter()
        .flat_map(|model| {
            std::iter::once(model.id.as_str())
                .chain(model.aliases.iter().map(String::as_str))
                .map(move |id| (model, id))
        })
        .filter(|(_, id)| {
            let id = id.to_ascii_lowercase();
            candidates.iter().any(|candidate| {
                *candidate == id
                    || candidate
                        .strip_prefix(id.as_str())
                        .is_some_and(|rest| rest.starts_with(['-', '.', '@']))
            })
        })
        .max_by_key(|(_, id)| id.len())
        .map(|(model, _)| model)
}

impl OpenModel {
    /// Its limits and prices in the context code's terms: the output cap its vendor
    /// states (else a quarter of the window, at most 8,192), never more than half the
    /// window; prices with cache reads and writes at the input price (vendors' cache
    /// discounts differ).
    pub fn info(&'static self) -> ModelInfo {
        let window = self.context_window;
        let max_output = self
            .max_output
            .unwrap_or((window / 4).min(8_192))
            .min(window / 2);
        ModelInfo {
            id: &self.id,
            context_window: Tokens(window),
            max_output: Tokens(max_output),
            default_output_cap: Tokens(max_output.min(32_000)),
            escalated_output_cap: Tokens(max_output),
            prices: self.price.as_ref().map(|price| Prices {
                input: price.input,
                output: price.output,
                cache_write_5m: price.input,
                cache_write_1h: price.input,
                cache_read: price.input,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data file parses, every model is cited and sane, and ids are found as
    /// Ollama, OpenRouter and Hugging Face write them.
    #[test]
    fn the_table_parses_and_is_cited() {
        let table: Table = serde_json::from_str(include_str!("../data/open-models.json")).unwrap();
        assert!(table.models.len() >= 8, "{}", table.models.len());
        for model in &table.models {
            assert!(!model.sources.is_empty(), "{}: no source", model.id);
            assert!(
                (2_048..=10_000_000).contains(&model.context_window),
                "{}: window {}",
                model.id,
                model.context_window
            );
            assert_eq!(model.id, model.id.to_ascii_lowercase());
        }
        assert_eq!(open_models().len(), table.models.len());
        let first = &table.models[0];
        for name in [
            first.id.clone(),
            format!("{}:latest", first.id),
            format!("vendor/{}", first.id.to_ascii_uppercase()),
        ] {
            assert_eq!(
                lookup_open(&name).map(|model| &model.id),
                Some(&first.id),
                "{name}"
            );
        }
        let window = |name: &str| lookup_open(name).map(|model| model.context_window);
        assert_eq!(
            window("meta-llama/Llama-4-Scout-17B-16E-Instruct"),
            Some(10_000_000)
        );
        assert_eq!(window("llama4:maverick"), Some(1_000_000));
        assert!(lookup_open("claude-sonnet-4-5").is_none());
        assert!(lookup_open("").is_none());
    }
}
