//! The prompt cache's prices, and when clearing old tool results (microcompact) pays.
//!
//! **Prices**, as multiples of the model's base input price (API-NOTES, "Models and prices";
//! Anthropic's pricing page): a cache read costs [`CACHE_READ`] (0.1), a cache write with the
//! 5-minute lifetime [`CACHE_WRITE`] (1.25), input after the last breakpoint 1.0.
//!
//! **A batch's cost.** Clearing changes the history from its first cleared result on. With a
//! cache breakpoint kept just before that result
//! ([`first_rewrite`](crate::microcompact::first_rewrite)), the prefix before it (`readable`)
//! is still read; everything after it is written again, less what the batch removed:
//! `CACHE_WRITE x (history - saved - readable)`, where without the clear the same part would
//! have been read: `CACHE_READ x (history - readable)`. The difference is the batch's cost.
//!
//! **Its benefit.** Every later request reads `saved` fewer tokens: `CACHE_READ x saved` per
//! request, over the requests expected before the history is rewritten anyway. That
//! expectation is the smaller of two numbers:
//! - the requests since the history was last rewritten (the session's start, a compaction, a
//!   clear): a session that has gone on for `n` requests since is expected to go on about `n`
//!   more (the same estimate that makes the rule a "rent or buy" decision: clear about when
//!   the extra reads already paid for the clearable results match what clearing costs). For a
//!   steady session, whose clearable results grow by `a` tokens a request and whose batch
//!   costs `F`, the period with the lowest cost per request is `sqrt(2F / (0.1 a))` requests;
//!   this rule clears every `sqrt(F / (0.1 a))`, which costs at most about 6 % more on the
//!   clearing's share (`(1/sqrt 2 + sqrt 2) / 2`);
//! - the requests left before autocompact replaces the history, at the growth per request
//!   seen since that rewrite.
//!
//! A batch is cleared when its benefit exceeds its cost, once the history is past
//! [`MicrocompactConfig::floor_percent`](crate::MicrocompactConfig::floor_percent) of the
//! autocompact threshold (below it the window has room, and a cleared result the model needs
//! again costs a re-read this model does not price). Its own clearing resets the count,
//! so a batch is never followed at once by another; a cold cache (see
//! [`MicrocompactConfig::cache_ttl`](crate::MicrocompactConfig::cache_ttl)) makes a clear
//! free, and it is always taken.

use crate::tokens::Tokens;

/// Price of a cache read, as a multiple of the base input price (Anthropic: 0.1x).
pub const CACHE_READ: f64 = 0.1;

/// Price of a cache write with the default 5-minute lifetime, as a multiple of the base
/// input price (Anthropic: 1.25x; 2x for the 1-hour lifetime).
pub const CACHE_WRITE: f64 = 1.25;

/// A microcompact batch, measured in tokens (the water levels' estimates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The whole prompt before the clear (system and tools included).
    pub history: Tokens,
    /// The prompt before the first block the batch changes (stays a cache read).
    pub readable: Tokens,
    /// What the batch removes (results less their placeholders).
    pub saved: Tokens,
}

impl Batch {
    /// What clearing costs on the next request beyond not clearing, in full-price tokens:
    /// the rewritten part's write less the read it replaces. Negative when the batch removes
    /// more than the rewrite costs.
    pub fn cost(&self) -> f64 {
        let after = self.history.0.saturating_sub(self.readable.0) as f64;
        let kept = after - self.saved.0 as f64;
        CACHE_WRITE * kept.max(0.0) - CACHE_READ * after
    }

    /// What clearing saves over `requests` later requests, in full-price tokens.
    pub fn benefit(&self, requests: u64) -> f64 {
        CACHE_READ * self.saved.0 as f64 * requests as f64
    }

    /// Whether clearing pays over `requests` expected later requests.
    pub fn pays(&self, requests: u64) -> bool {
        self.benefit(requests) > self.cost()
    }
}

/// How many more requests to expect before the history is rewritten anyway (see the module
/// docs): the smaller of `since_rewrite` (requests since the last rewrite) and the requests
/// left until `headroom` (tokens below the autocompact threshold; `None`: autocompact is off)
/// at the growth seen since the rewrite (`grown` tokens over `since_rewrite` requests).
pub fn expected_requests(since_rewrite: u64, grown: Tokens, headroom: Option<Tokens>) -> u64 {
    let Some(headroom) = headroom else {
        return since_rewrite;
    };
    if since_rewrite == 0 {
        return 0;
    }
    let growth = (grown.0 / since_rewrite).max(1);
    since_rewrite.min(headroom.0 / growth)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch whose rewrite is long and whose savings are small never pays soon.
    #[test]
    fn a_small_batch_far_back_waits() {
        let batch = Batch {
            history: Tokens(150_000),
            readable: Tokens(10_000),
            saved: Tokens(5_000),
        };
        // 1.25 x 135,000 - 0.1 x 140,000 = 154,750.
        assert!((batch.cost() - 154_750.0).abs() < 1e-6);
        assert!(!batch.pays(100));
        assert!(batch.pays(310));
    }

    /// A large batch right after the readable prefix pays within a few requests.
    #[test]
    fn a_large_batch_near_the_end_pays_soon() {
        let batch = Batch {
            history: Tokens(100_000),
            readable: Tokens(60_000),
            saved: Tokens(30_000),
        };
        // 1.25 x 10,000 - 0.1 x 40,000 = 8,500; 3,000 saved per request.
        assert!((batch.cost() - 8_500.0).abs() < 1e-6);
        assert!(!batch.pays(2));
        assert!(batch.pays(3));
    }

    /// Removing more than the rewrite costs pays at once.
    #[test]
    fn removing_nearly_everything_after_the_prefix_pays_at_once() {
        let batch = Batch {
            history: Tokens(50_000),
            readable: Tokens(10_000),
            saved: Tokens(39_000),
        };
        assert!(batch.cost() < 0.0);
        assert!(batch.pays(0));
    }

    #[test]
    fn expected_requests_are_capped_by_the_compaction_ahead() {
        // 20 requests since the rewrite, 2,000 tokens a request.
        assert_eq!(expected_requests(20, Tokens(40_000), None), 20);
        assert_eq!(
            expected_requests(20, Tokens(40_000), Some(Tokens(100_000))),
            20
        );
        assert_eq!(
            expected_requests(20, Tokens(40_000), Some(Tokens(10_000))),
            5
        );
        assert_eq!(expected_requests(0, Tokens(0), Some(Tokens(10_000))), 0);
    }
}
