//! `--max-budget-usd`: loop-core's spending limit, priced as the result's `total_cost_usd`
//! is (a settings `models` entry's `prices`, else the built-in table).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};

use protocol::Usage;

/// A dollar limit over every response of a session's run, its subagents' included.
#[derive(Debug)]
pub struct DollarBudget {
    limit: f64,
    prices: Arc<BTreeMap<String, context::Prices>>,
    /// Dollars spent so far, and the models that could not be priced (warned about once).
    spent: Mutex<(f64, BTreeSet<String>)>,
    /// Where the warning about a model without prices goes.
    notices: crate::Notices,
}

impl DollarBudget {
    /// A limit of `limit` US dollars, pricing with `prices` (settings) before the table;
    /// a model without prices is told of once to `notices`.
    pub fn new(
        limit: f64,
        prices: Arc<BTreeMap<String, context::Prices>>,
        notices: crate::Notices,
    ) -> Self {
        Self {
            limit,
            prices,
            spent: Mutex::new((0.0, BTreeSet::new())),
            notices,
        }
    }
}

impl loop_core::SpendGuard for DollarBudget {
    fn spend(&self, answered: &str, asked: &str, usage: &Usage) {
        // As the result's cost: the settings' prices, then the table's, each for the name the
        // server answered with, then for the one asked.
        let names = [answered, asked];
        let prices = names
            .iter()
            .find_map(|name| self.prices.get(*name).copied())
            .or_else(|| {
                names.iter().find_map(|name| {
                    let (info, known) = context::lookup(name);
                    info.prices.filter(|_| known)
                })
            });
        let model = answered;
        let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        match prices {
            Some(prices) => spent.0 += prices.cost(usage),
            None => {
                if spent.1.insert(model.to_owned()) {
                    self.notices.say(&format!(
                        "warning: --max-budget-usd: {} has no known prices, so its responses count as $0 (give them in settings' models.{}.prices)",
                        render::printable(model, false),
                        render::printable(model, false)
                    ));
                }
            }
        }
    }

    fn exceeded(&self) -> Option<String> {
        let spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner).0;
        (spent >= self.limit).then(|| {
            format!(
                "${spent:.4} spent, the limit is ${:.4} (--max-budget-usd)",
                self.limit
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use loop_core::SpendGuard as _;

    use super::*;

    #[test]
    fn the_limit_counts_priced_responses() {
        let prices = Arc::new(BTreeMap::from([(
            "m".to_owned(),
            context::Prices::standard(1.0, 2.0),
        )]));
        let budget = DollarBudget::new(0.01, prices, crate::Notices::default());
        let usage = Usage {
            input_tokens: 4_000,
            output_tokens: 1_000,
            ..Usage::default()
        };
        budget.spend("m", "m", &usage);
        assert_eq!(budget.exceeded(), None);
        // Answered under another name: priced as the model asked.
        budget.spend("m-2026-01-01", "m", &usage);
        assert_eq!(
            budget.exceeded().as_deref(),
            Some("$0.0120 spent, the limit is $0.0100 (--max-budget-usd)")
        );
    }
}
