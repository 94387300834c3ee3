//! What a session has cost so far: requests, tokens and US dollars, as the status line,
//! `/cost` and `/status` show them.

/// `1234` as `1.2k`, `2_500_000` as `2.5M`.
pub fn compact_count(count: u64) -> String {
    match count {
        0..1_000 => count.to_string(),
        1_000..1_000_000 => format!("{:.1}k", count as f64 / 1_000.0),
        _ => format!("{:.1}M", count as f64 / 1_000_000.0),
    }
}

/// `532` as `532 B`, `12_345` as `12.1 KiB`, `3_500_000` as `3.3 MiB`.
pub fn compact_bytes(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// The session's figures so far (this process).
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Model requests.
    pub requests: u64,
    /// Input tokens, cache reads and writes included.
    pub input: u64,
    /// Cache reads among them.
    pub cache_read: u64,
    /// Output tokens.
    pub output: u64,
    /// `None` once a response could not be priced.
    pub cost: Option<f64>,
    /// Whether any response was counted.
    pub priced: bool,
    /// Tokens the last request sent.
    pub context: Option<u64>,
    /// The last request's time to its first event (`message_start`), in milliseconds.
    pub first_token_ms: Option<u64>,
}

impl Totals {
    /// Counts one turn's usage and cost (`None`: a response could not be priced).
    pub fn add(&mut self, usage: &protocol::Usage, cost: Option<f64>) {
        let read = usage.cache_read_input_tokens.unwrap_or(0);
        self.input += usage.input_tokens + usage.cache_creation_input_tokens.unwrap_or(0) + read;
        self.cache_read += read;
        self.output += usage.output_tokens;
        self.cost = match (self.priced, self.cost, cost) {
            (false, _, cost) => cost,
            (true, Some(total), Some(cost)) => Some(total + cost),
            (true, _, _) => None,
        };
        self.priced = true;
    }

    /// What a `statusLine` command is told of these totals, in Claude Code's shape:
    /// `cost` (`total_cost_usd`, `total_duration_ms` since `started`) and `context_window`
    /// (`total_input_tokens`, `total_output_tokens`, `context_window_size` = `window`,
    /// `used_percentage` and `remaining_percentage` of the last request), and
    /// `exceeds_200k_tokens`. What is not counted here (API time, lines changed) is left out.
    pub fn status_json(&self, window: u64, started: std::time::Instant) -> serde_json::Value {
        let context = self.context.unwrap_or(0);
        let used = if window == 0 {
            0.0
        } else {
            // Token counts are far below 2^52: exact as f64.
            #[allow(clippy::cast_precision_loss)]
            let share = context as f64 / window as f64 * 100.0;
            share.min(100.0)
        };
        serde_json::json!({
            "cost": {
                "total_cost_usd": self.cost.unwrap_or(0.0),
                "total_duration_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            },
            "context_window": {
                "total_input_tokens": self.input,
                "total_output_tokens": self.output,
                "context_window_size": window,
                "used_percentage": used,
                "remaining_percentage": 100.0 - used,
            },
            "exceeds_200k_tokens": context > 200_000,
        })
    }

    fn cost_text(&self) -> String {
        match self.cost {
            Some(cost) => format!("${cost:.4}"),
            None if self.priced => "$? (a model without a known price)".to_owned(),
            None => "$0".to_owned(),
        }
    }

    /// The status line's figures after the model and the mode: ` · context N% (used /
    /// autocompact level) · K req · X in / Y out · $C`.
    pub fn figures(&self, autocompact_at: u64) -> String {
        let context = match self.context {
            Some(tokens) if autocompact_at > 0 => format!(
                " · context {}% ({}/{})",
                tokens * 100 / autocompact_at,
                compact_count(tokens),
                compact_count(autocompact_at)
            ),
            _ => String::new(),
        };
        let cost = match self.cost {
            Some(cost) => format!(" · ${cost:.4}"),
            None if self.priced => " · $?".to_owned(),
            None => String::new(),
        };
        // Milliseconds are far below 2^52: exact as f64.
        #[allow(clippy::cast_precision_loss)]
        let first = self
            .first_token_ms
            .map(|ms| format!(" · 1st token {:.1} s", ms as f64 / 1000.0))
            .unwrap_or_default();
        format!(
            "{context} · {} req · {} in / {} out{cost}{first}",
            self.requests,
            compact_count(self.input),
            compact_count(self.output),
        )
    }

    /// `/cost`.
    pub fn report(&self, elapsed: std::time::Duration) -> String {
        let seconds = elapsed.as_secs();
        format!(
            "Cost: {}\nRequests: {}\nTokens: {} in ({} of them cache reads), {} out\nSession time: {}m {}s",
            self.cost_text(),
            self.requests,
            compact_count(self.input),
            compact_count(self.cache_read),
            compact_count(self.output),
            seconds / 60,
            seconds % 60,
        )
    }
}

/// Each request's time to first token: from the request's start to its response's
/// `message_start`, where the seeds measure it (a retried request counts from its first try).
#[derive(Clone, Debug, Default)]
pub struct FirstTokens {
    /// Milliseconds, one per request, in order.
    times: Vec<u64>,
    /// A request started whose first token has not come.
    waiting: Option<std::time::Instant>,
}

impl FirstTokens {
    /// A request started now.
    pub fn request(&mut self) {
        self.waiting = Some(std::time::Instant::now());
    }

    /// A response's first event arrived; its time in milliseconds, the first time only.
    pub fn first_token(&mut self) -> Option<u64> {
        let started = self.waiting.take()?;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.times.push(ms);
        Some(ms)
    }

    /// The last request's, in milliseconds.
    pub fn last(&self) -> Option<u64> {
        self.times.last().copied()
    }

    /// The result message's `ttft_ms`: `{"last", "median", "max", "requests"}` in
    /// milliseconds over the run's requests; `null` before the first.
    pub fn summary_json(&self) -> serde_json::Value {
        let Some(last) = self.last() else {
            return serde_json::Value::Null;
        };
        let mut sorted = self.times.clone();
        sorted.sort_unstable();
        serde_json::json!({
            "last": last,
            "median": sorted[sorted.len() / 2],
            "max": sorted[sorted.len() - 1],
            "requests": sorted.len(),
        })
    }
}

/// One model's totals in a run (Claude Code's `ModelUsage`).
#[derive(Clone, Debug, Default)]
pub struct ModelTotals {
    /// Every response of the model, added up.
    pub usage: protocol::Usage,
    /// In USD; `None` once a response of it could not be priced.
    pub cost: Option<f64>,
}

/// What a run cost, priced response by response: the total in USD and the usage and cost
/// of each model that answered (main agent, subagents, summaries), as a run's `result`
/// message reports them (`total_cost_usd`, `modelUsage`).
///
/// Prices come from the settings' overrides first, then from the built-in table
/// ([`context::lookup`]), each for the name the server answered with, then for the one asked.
#[derive(Clone, Debug)]
pub struct Ledger {
    overrides: std::sync::Arc<std::collections::BTreeMap<String, context::Prices>>,
    /// `None` once a response could not be priced.
    cost: Option<f64>,
    models: std::collections::BTreeMap<String, ModelTotals>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self {
            overrides: std::sync::Arc::default(),
            cost: Some(0.0),
            models: std::collections::BTreeMap::new(),
        }
    }
}

/// The prices of a response: `overrides` (the settings' prices by model id) first, then
/// the built-in table ([`context::lookup`]), then the open-model table's vendor prices
/// ([`context::open_models`]), each for `answered` (the model the server named), then for
/// `requested`; `None` when neither is priced anywhere.
pub fn prices(
    overrides: &std::collections::BTreeMap<String, context::Prices>,
    answered: &str,
    requested: &str,
) -> Option<context::Prices> {
    let names = [answered, requested];
    names
        .iter()
        .find_map(|name| overrides.get(*name).copied())
        .or_else(|| {
            names.iter().find_map(|name| {
                let (info, known) = context::lookup(name);
                info.prices.filter(|_| known)
            })
        })
        .or_else(|| {
            names.iter().find_map(|name| {
                context::open_models::lookup_open(name).and_then(|open| open.info().prices)
            })
        })
}

impl Ledger {
    /// Prices by model id from the settings, used before the built-in table.
    pub fn set_overrides(
        &mut self,
        overrides: std::sync::Arc<std::collections::BTreeMap<String, context::Prices>>,
    ) {
        self.overrides = overrides;
    }

    /// The prices of a response: the settings' first, then the table's, each for
    /// `answered` (the model the server named), then for `requested`.
    pub fn prices(&self, answered: &str, requested: &str) -> Option<context::Prices> {
        prices(&self.overrides, answered, requested)
    }

    /// Adds one response's `usage`, priced as [`Ledger::prices`] finds it, under the model
    /// that answered (`requested` when the server named none). Returns its cost in USD, or
    /// `None` when it could not be priced (the run's cost is unknown from then on).
    pub fn add(&mut self, answered: &str, requested: &str, usage: &protocol::Usage) -> Option<f64> {
        let cost = self
            .prices(answered, requested)
            .map(|prices| prices.cost(usage));
        self.cost = self.cost.zip(cost).map(|(total, cost)| total + cost);
        let model = if answered.is_empty() {
            requested
        } else {
            answered
        };
        let totals = self
            .models
            .entry(model.to_owned())
            .or_insert_with(|| ModelTotals {
                cost: Some(0.0),
                ..ModelTotals::default()
            });
        totals.usage.accumulate(usage);
        totals.cost = totals.cost.zip(cost).map(|(total, cost)| total + cost);
        cost
    }

    /// The run's cost in USD so far; `None` once a response could not be priced.
    pub fn cost(&self) -> Option<f64> {
        self.cost
    }

    /// Each model's totals, by the name it answered with.
    pub fn models(&self) -> &std::collections::BTreeMap<String, ModelTotals> {
        &self.models
    }

    /// Claude Code's `modelUsage` object: for each model `inputTokens`, `outputTokens`,
    /// `cacheReadInputTokens`, `cacheCreationInputTokens`, `webSearchRequests`, `costUSD`
    /// (`null` when unpriced), and from the model table `contextWindow` and
    /// `maxOutputTokens` (0 for a model the table does not know).
    pub fn model_usage_json(&self) -> serde_json::Map<String, serde_json::Value> {
        self.models
            .iter()
            .map(|(model, totals)| {
                let (info, known) = context::lookup(model);
                let usage = &totals.usage;
                (
                    model.clone(),
                    serde_json::json!({
                        "inputTokens": usage.input_tokens,
                        "outputTokens": usage.output_tokens,
                        "cacheReadInputTokens": usage.cache_read_input_tokens.unwrap_or(0),
                        "cacheCreationInputTokens": usage.cache_creation_input_tokens.unwrap_or(0),
                        "webSearchRequests": 0,
                        "costUSD": totals.cost,
                        "contextWindow": if known { info.context_window.0 } else { 0 },
                        "maxOutputTokens": if known { info.max_output.0 } else { 0 },
                    }),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> protocol::Usage {
        protocol::Usage {
            input_tokens: input,
            output_tokens: output,
            ..protocol::Usage::default()
        }
    }

    #[test]
    fn first_tokens_count_once_per_request_and_show_in_the_figures() {
        let mut first = FirstTokens::default();
        assert_eq!(first.first_token(), None);
        assert_eq!(first.summary_json(), serde_json::Value::Null);
        for _ in 0..3 {
            first.request();
            assert!(first.first_token().is_some());
            // A restarted stream's second message_start is not a second first token.
            assert_eq!(first.first_token(), None);
        }
        assert_eq!(first.summary_json()["requests"], 3);
        let totals = Totals {
            first_token_ms: Some(420),
            ..Totals::default()
        };
        assert!(
            totals.figures(0).ends_with(" · 1st token 0.4 s"),
            "{}",
            totals.figures(0)
        );
    }

    #[test]
    fn the_ledger_prices_overrides_first_and_loses_the_total_to_an_unpriced_model() {
        let mut ledger = Ledger::default();
        let overrides = [("my-model".to_owned(), context::Prices::standard(2.0, 10.0))];
        ledger.set_overrides(std::sync::Arc::new(overrides.into_iter().collect()));
        // Per million tokens: 1M in at $2 + 0.5M out at $10.
        let cost = ledger.add("", "my-model", &usage(1_000_000, 500_000));
        assert_eq!(cost, Some(7.0));
        assert_eq!(ledger.cost(), Some(7.0));
        assert_eq!(ledger.models()["my-model"].usage.input_tokens, 1_000_000);
        // A dated name the server answered with falls back to the one asked.
        ledger.add("my-model-2026", "my-model", &usage(0, 100_000));
        assert_eq!(ledger.models()["my-model-2026"].cost, Some(1.0));
        assert_eq!(ledger.cost(), Some(8.0));
        // A model nobody prices: its own cost and the run's become unknown.
        assert_eq!(ledger.add("mystery", "mystery", &usage(10, 10)), None);
        assert_eq!(ledger.cost(), None);
        let json = ledger.model_usage_json();
        assert_eq!(json["mystery"]["costUSD"], serde_json::Value::Null);
        assert_eq!(json["my-model"]["costUSD"], 7.0);
        assert_eq!(json["my-model"]["outputTokens"], 500_000);
    }
}

/// A run's figures as its events come ([`crate::LoopEvent`]s of the main agent and its
/// subagents): usage and cost by model, the models asked and answering, the time spent
/// waiting for the model, the refused calls and the subagents' requests, for a front end
/// that reports a run without drawing it (`agent batch`). Priced as the terminal and the
/// headless output price (the answering model's prices, else the asked one's).
#[derive(Debug, Default)]
pub struct Meter {
    ledger: Ledger,
    first_tokens: FirstTokens,
    requested: String,
    answering: String,
    /// Each subagent's (asked, answering) models, by agent id.
    agents: std::collections::HashMap<String, (String, String)>,
    subagent_requests: u32,
    subagent_usage: protocol::Usage,
    request_started: Option<std::time::Instant>,
    api_time: std::time::Duration,
    stop_reason: Option<String>,
    denials: Vec<serde_json::Value>,
}

impl Meter {
    /// A meter pricing with `overrides` (the settings' prices) on top of the built-in table.
    pub fn new(
        overrides: std::sync::Arc<std::collections::BTreeMap<String, context::Prices>>,
    ) -> Self {
        let mut meter = Self::default();
        meter.ledger.set_overrides(overrides);
        meter
    }

    /// Counts one event of the main agent.
    pub fn event(&mut self, event: &loop_core::LoopEvent) {
        use loop_core::LoopEvent;
        match event {
            LoopEvent::Request { model, .. } => {
                self.requested.clone_from(model);
                self.request_started = Some(std::time::Instant::now());
                self.first_tokens.request();
            }
            LoopEvent::Stream(protocol::StreamEvent::MessageStart { message }) => {
                self.first_tokens.first_token();
                self.answering.clone_from(&message.model);
            }
            LoopEvent::Assistant(message) => {
                if let Some(started) = self.request_started.take() {
                    self.api_time += started.elapsed();
                }
                self.answering.clone_from(&message.model);
                self.stop_reason = message
                    .stop_reason
                    .as_ref()
                    .map(|reason| reason.as_str().to_owned());
            }
            LoopEvent::Usage(usage) => {
                self.ledger.add(&self.answering, &self.requested, usage);
            }
            LoopEvent::ProgressSummary { model, usage, .. }
            | LoopEvent::ToolUseSummary { model, usage, .. } => {
                self.ledger.add(model, model, usage);
            }
            LoopEvent::Tool(executor::ExecutorEvent::Progress { progress, .. }) => {
                if let Some((answered, asked, usage)) = crate::web::usage_of(progress) {
                    self.ledger.add(&answered, &asked, &usage);
                }
            }
            LoopEvent::Tool(executor::ExecutorEvent::PermissionDenied {
                tool_use_id,
                name,
                input,
                ..
            }) => self.deny(tool_use_id.as_str(), name, input),
            _ => {}
        }
    }

    /// Counts one event of a subagent (its own models, its usage among the run's).
    pub fn subagent(&mut self, event: &crate::SubagentEvent) {
        use loop_core::LoopEvent;
        let models = self.agents.entry(event.agent_id.clone()).or_default();
        match &event.event {
            LoopEvent::Request { model, .. } => {
                models.0.clone_from(model);
                self.subagent_requests += 1;
            }
            LoopEvent::Stream(protocol::StreamEvent::MessageStart { message }) => {
                models.1.clone_from(&message.model);
            }
            LoopEvent::Assistant(message) => models.1.clone_from(&message.model),
            LoopEvent::Usage(usage) => {
                let (asked, answering) = models.clone();
                self.ledger.add(&answering, &asked, usage);
                self.subagent_usage.accumulate(usage);
            }
            LoopEvent::Tool(executor::ExecutorEvent::PermissionDenied {
                tool_use_id,
                name,
                input,
                ..
            }) => self.deny(tool_use_id.as_str(), name, input),
            _ => {}
        }
    }

    fn deny(&mut self, tool_use_id: &str, name: &str, input: &serde_json::Value) {
        self.denials.push(
            serde_json::json!({"tool_name": name, "tool_use_id": tool_use_id, "tool_input": input}),
        );
    }

    /// What the run cost so far (`None` when a model had no price).
    pub fn cost(&self) -> Option<f64> {
        self.ledger.cost()
    }

    /// The usage of the run: the main agent's (`outcome`) and every subagent's.
    pub fn total_usage(&self, outcome: &loop_core::LoopOutcome) -> protocol::Usage {
        let mut usage = outcome.usage.clone();
        usage.accumulate(&self.subagent_usage);
        usage
    }

    /// The run's `result` message ([`crate::sdk::result_message`]).
    pub fn result(
        &self,
        outcome: &loop_core::LoopOutcome,
        session_id: &str,
        duration: std::time::Duration,
    ) -> serde_json::Value {
        crate::sdk::result_message(
            outcome,
            &crate::sdk::RunReport {
                session_id,
                duration,
                api_duration: self.api_time,
                stop_reason: self.stop_reason.as_deref(),
                ledger: &self.ledger,
                extra_requests: self.subagent_requests,
                denials: &self.denials,
                structured: None,
                structured_failed: false,
                first_tokens: &self.first_tokens,
            },
        )
    }
}
