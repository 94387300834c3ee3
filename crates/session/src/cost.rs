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
        format!(
            "{context} · {} req · {} in / {} out{cost}",
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
