//! The preprocessing step before each request: L1, L2, the level check, and L3 when needed,
//! with the circuit breaker.

use std::time::Duration;

use protocol::{MessageParam, ToolUseId, Usage};

use crate::autocompact::{
    CompactConfig, CompactError, FORK_SUFFIX, FileSource, Fork, MAX_CONSECUTIVE_FAILURES,
    SUMMARY_PROMPT, Summarizer, compact_inner,
};
use crate::budget::{BudgetConfig, ReplacementLog, ResultStore, apply_budget};
use crate::economics::{Batch, expected_requests};
use crate::levels::{Level, LevelCheck, WaterLevels};
use crate::microcompact::{MicrocompactConfig, apply, plan};
use crate::tokens::{BytesEstimator, TokenEstimator, Tokens, history_tokens};

/// Everything [`ContextManager`] can be configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextConfig {
    /// The model's thresholds.
    pub levels: WaterLevels,
    /// L1 budgets.
    pub budget: BudgetConfig,
    /// L2 settings.
    pub microcompact: MicrocompactConfig,
    /// L3 settings.
    pub compact: CompactConfig,
}

impl ContextConfig {
    /// Default settings for a model with `context_window` and `max_output` tokens.
    pub fn for_model(context_window: Tokens, max_output: Tokens) -> Self {
        Self {
            levels: WaterLevels::new(context_window, max_output),
            budget: BudgetConfig::default(),
            microcompact: MicrocompactConfig::default(),
            compact: CompactConfig::default(),
        }
    }
}

/// The injected services preprocessing uses.
pub struct Services<'a> {
    /// Where L1 writes oversized results.
    pub store: &'a mut dyn ResultStore,
    /// The model call of L3.
    pub summarizer: &'a dyn Summarizer,
    /// Current file contents for re-attachment after L3.
    pub files: &'a dyn FileSource,
    /// The main request's parts, so an L3 summary can be sent as its fork and read the
    /// history from the prompt cache; `None`: standalone summaries.
    pub main: Option<MainRequest<'a>>,
}

/// The main request as the loop sends it, borrowed for one preprocessing step: what a
/// summary sent as its fork shares ([`Fork`]).
#[derive(Clone, Copy, Debug)]
pub struct MainRequest<'a> {
    /// The model.
    pub model: &'a str,
    /// `max_tokens`.
    pub max_tokens: u32,
    /// System blocks, breakpoint included.
    pub system: &'a [protocol::SystemBlock],
    /// Tool declarations.
    pub tools: &'a [protocol::ToolDefinition],
    /// The user context.
    pub user_context: Option<&'a str>,
    /// Thinking, as sent (already fitted to `max_tokens`).
    pub thinking: Option<protocol::ThinkingConfig>,
    /// Effort, as sent.
    pub effort: Option<protocol::Effort>,
    /// The previous main request's message breakpoints, `(message, block)`.
    pub previous_breakpoints: &'a [(usize, usize)],
}

impl MainRequest<'_> {
    /// The owned parts a fork carries.
    pub fn to_fork(&self) -> Fork {
        Fork {
            model: self.model.to_owned(),
            max_tokens: self.max_tokens,
            system: self.system.to_vec(),
            tools: self.tools.to_vec(),
            user_context: self.user_context.map(str::to_owned),
            thinking: self.thinking,
            effort: self.effort,
            breakpoints: self.previous_breakpoints.to_vec(),
        }
    }
}

impl std::fmt::Debug for Services<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services").finish_non_exhaustive()
    }
}

/// What preprocessing did, for the event stream.
#[derive(Clone, Debug, PartialEq)]
pub enum ContextEvent {
    /// L1 moved a result to a file.
    Persisted {
        /// The tool_use whose result moved.
        tool_use_id: ToolUseId,
        /// Its size in bytes.
        bytes: usize,
        /// Where it went.
        path: String,
    },
    /// L1 could not store a result; it stays inline.
    PersistFailed {
        /// The tool_use whose result stays.
        tool_use_id: ToolUseId,
        /// Why.
        reason: String,
    },
    /// L2 cleared old results, in one batch.
    Microcompacted {
        /// How many.
        cleared: usize,
        /// Bytes cleared.
        bytes: usize,
        /// The tool_use ids of the results cleared.
        tool_use_ids: Vec<ToolUseId>,
        /// Why now.
        reason: MicrocompactReason,
    },
    /// L3 compacted the history.
    Compacted {
        /// Tokens before (with the fixed overhead).
        before: Tokens,
        /// Tokens after (estimated, with the fixed overhead).
        after: Tokens,
        /// Messages summarized away.
        summarized: usize,
        /// Files re-attached.
        attached: Vec<String>,
    },
    /// L3 failed; `consecutive` failures so far.
    CompactFailed {
        /// Why.
        reason: String,
        /// Consecutive failures including this one.
        consecutive: u32,
    },
}

/// Why microcompact cleared results now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicrocompactReason {
    /// The reads the batch saves over the requests expected to follow exceed the cache write
    /// it causes ([`crate::economics`]).
    Pays,
    /// No request for longer than the cache lifetime: the prompt cache is cold.
    ColdCache,
}

impl MicrocompactReason {
    /// A stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pays => "pays",
            Self::ColdCache => "cold_cache",
        }
    }
}

/// Why the history cannot be sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlockReason {
    /// At or above the blocking limit.
    #[error("context blocked: {tokens} is at or above the blocking limit of {limit}")]
    BlockingLimit {
        /// The history's tokens.
        tokens: Tokens,
        /// The limit.
        limit: Tokens,
    },
    /// Autocompact failed too often in a row and the history is still above its threshold.
    #[error(
        "context blocked: autocompact failed {failures} times in a row and {tokens} is still at or above the threshold of {threshold}"
    )]
    CompactionExhausted {
        /// Consecutive failures.
        failures: u32,
        /// The history's tokens.
        tokens: Tokens,
        /// The autocompact threshold.
        threshold: Tokens,
    },
}

/// What preprocessing found and did; the history itself is changed in place.
#[derive(Clone, Debug, PartialEq)]
pub struct Prepared {
    /// The history's tokens, the fixed overhead (system prompt and tools) included.
    pub tokens: Tokens,
    /// Where that stands.
    pub check: LevelCheck,
    /// What was done, in order.
    pub events: Vec<ContextEvent>,
    /// `Some` when the history must not be sent.
    pub blocked: Option<BlockReason>,
}

/// What the context pipeline remembers between requests, and between the runs of one
/// session: the L1 decisions (so a result replaced once stays replaced the same way and the
/// prompt cache's prefix holds), the requests and growth since the history was last
/// rewritten (microcompact's cost model, [`crate::economics`]), and the autocompact failure
/// count (the circuit breaker). A new history (cleared, rewound, another session) starts from
/// `ContextMemory::default()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextMemory {
    log: ReplacementLog,
    consecutive_failures: u32,
    /// Requests prepared since the history was last rewritten (start, compaction, clear).
    since_rewrite: u64,
    /// The history's tokens right after that rewrite (`None`: not measured yet).
    tokens_at_rewrite: Option<Tokens>,
}

impl ContextMemory {
    /// Requests prepared since the history was last rewritten (the session's start, a
    /// compaction, a microcompact batch).
    pub fn requests_since_rewrite(&self) -> u64 {
        self.since_rewrite
    }

    fn rewritten(&mut self, tokens: Tokens) {
        self.since_rewrite = 0;
        self.tokens_at_rewrite = Some(tokens);
    }

    /// Consecutive failed compactions.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The L1 decisions so far.
    pub fn replacements(&self) -> &ReplacementLog {
        &self.log
    }
}

/// Runs the context pipeline before each request and keeps its [`ContextMemory`] between
/// requests.
pub struct ContextManager {
    config: ContextConfig,
    estimator: Box<dyn TokenEstimator>,
    memory: ContextMemory,
}

impl std::fmt::Debug for ContextManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextManager")
            .field("config", &self.config)
            .field("replaced", &self.memory.log.replaced())
            .field("consecutive_failures", &self.memory.consecutive_failures)
            .finish_non_exhaustive()
    }
}

impl ContextManager {
    /// A manager with the default estimator (bytes / 4).
    pub fn new(config: ContextConfig) -> Self {
        Self::with_estimator(config, Box::new(BytesEstimator::default()))
    }

    /// A manager with a custom estimator.
    pub fn with_estimator(config: ContextConfig, estimator: Box<dyn TokenEstimator>) -> Self {
        Self {
            config,
            estimator,
            memory: ContextMemory::default(),
        }
    }

    /// Goes on from `memory` (an earlier run's, see [`ContextManager::into_memory`]).
    #[must_use]
    pub fn with_memory(mut self, memory: ContextMemory) -> Self {
        self.memory = memory;
        self
    }

    /// What the manager remembers now, for the next run of the same history.
    pub fn into_memory(self) -> ContextMemory {
        self.memory
    }

    /// What the manager remembers now.
    pub fn memory(&self) -> &ContextMemory {
        &self.memory
    }

    /// The configuration.
    pub fn config(&self) -> &ContextConfig {
        &self.config
    }

    /// Replaces the water levels (another model's window after a fallback switch); the
    /// next [`ContextManager::preprocess`] measures against them.
    pub fn set_levels(&mut self, levels: WaterLevels) {
        self.config.levels = levels;
    }

    /// The estimator.
    pub fn estimator(&self) -> &dyn TokenEstimator {
        self.estimator.as_ref()
    }

    /// Consecutive failed compactions (reset by a successful one).
    pub fn consecutive_failures(&self) -> u32 {
        self.memory.consecutive_failures
    }

    /// Whether the circuit breaker is open (autocompact stopped trying).
    pub fn circuit_open(&self) -> bool {
        self.memory.consecutive_failures >= MAX_CONSECUTIVE_FAILURES
    }

    /// Whether microcompact should clear `planned` now, and why: the cache is cold, or the
    /// batch pays by the cost model of [`crate::economics`] (the caller has checked the
    /// floor). `tokens` is the whole prompt,
    /// `overhead` the system prompt's and tools' part of it.
    fn microcompact_reason(
        &self,
        messages: &[MessageParam],
        planned: &[crate::microcompact::Clearable],
        tokens: Tokens,
        overhead: Tokens,
        idle: Option<Duration>,
    ) -> Option<MicrocompactReason> {
        let first = planned.first()?;
        if idle.is_some_and(|idle| idle > self.config.microcompact.cache_ttl) {
            return Some(MicrocompactReason::ColdCache);
        }
        let levels = &self.config.levels;
        let estimator = self.estimator.as_ref();
        let saved = planned
            .iter()
            .map(|clearable| {
                let (message, block) = clearable.at;
                estimator
                    .block(&messages[message].content[block])
                    .saturating_sub(estimator.text(&clearable.placeholder))
            })
            .sum();
        let (message, block) = first.at;
        let readable = overhead
            + estimator.messages(&messages[..message])
            + messages[message].content[..block]
                .iter()
                .map(|block| estimator.block(block))
                .sum();
        let batch = Batch {
            history: tokens,
            readable,
            saved,
        };
        let memory = &self.memory;
        let grown = memory
            .tokens_at_rewrite
            .map_or(Tokens::ZERO, |at| tokens.saturating_sub(at));
        let headroom = levels
            .autocompact_enabled()
            .then(|| levels.autocompact_at.saturating_sub(tokens));
        let expected = expected_requests(memory.since_rewrite, grown, headroom);
        let pays = batch.pays(expected);
        tracing::debug!(
            cost = batch.cost(),
            benefit = batch.benefit(expected),
            expected,
            %saved,
            %readable,
            pays,
            "microcompact batch"
        );
        pays.then_some(MicrocompactReason::Pays)
    }

    /// L2: clears a batch when [`Self::microcompact_reason`] says so, reporting it in
    /// `events`; returns the prompt's tokens after.
    fn microcompact_step(
        &mut self,
        messages: &mut [MessageParam],
        mut tokens: Tokens,
        overhead: Tokens,
        idle: Option<Duration>,
        events: &mut Vec<ContextEvent>,
    ) -> Tokens {
        // Below the floor with a warm cache nothing is cleared: no need to look (every
        // request comes here).
        let config = &self.config.microcompact;
        let floor =
            self.config.levels.autocompact_at.0 * u64::from(config.floor_percent.min(100)) / 100;
        let cold = idle.is_some_and(|idle| idle > config.cache_ttl);
        if tokens.0 < floor && !cold {
            return tokens;
        }
        let planned = plan(messages, config);
        if let Some(reason) = self.microcompact_reason(messages, &planned, tokens, overhead, idle) {
            let report = apply(messages, planned);
            if report.cleared > 0 {
                tokens = self.count(messages, overhead, None);
                self.memory.rewritten(tokens);
                events.push(ContextEvent::Microcompacted {
                    cleared: report.cleared,
                    bytes: report.bytes_cleared,
                    tool_use_ids: report.tool_use_ids,
                    reason,
                });
            }
        }
        tokens
    }

    fn count(
        &self,
        messages: &[MessageParam],
        overhead: Tokens,
        last: Option<(&Usage, usize)>,
    ) -> Tokens {
        match last {
            // The reported usage already includes the system prompt and tools.
            Some(last) => history_tokens(messages, Some(last), self.estimator.as_ref()),
            None => overhead + self.estimator.messages(messages),
        }
    }

    /// Prepares `messages` in place for the next request: L1, L2 when it pays (see the
    /// policy in [`microcompact`](crate::microcompact())), the level check, and L3 above the
    /// threshold. `overhead` is the tokens of the system prompt and tools; `last` the last
    /// response's usage and how many leading messages it covered; `idle` the time since the
    /// session's previous request (`None`: none, or unknown).
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future during a summary call leaves `messages` valid: L1 and L2 may have
    /// been applied (and recorded), L3 not.
    pub async fn preprocess(
        &mut self,
        messages: &mut Vec<MessageParam>,
        overhead: Tokens,
        last: Option<(&Usage, usize)>,
        idle: Option<Duration>,
        services: Services<'_>,
    ) -> Prepared {
        let mut events = Vec::new();
        let report = apply_budget(
            messages,
            &self.config.budget,
            services.store,
            &mut self.memory.log,
        );
        for (tool_use_id, bytes, path) in report.persisted {
            events.push(ContextEvent::Persisted {
                tool_use_id,
                bytes,
                path,
            });
        }
        for (tool_use_id, reason) in report.failed {
            events.push(ContextEvent::PersistFailed {
                tool_use_id,
                reason,
            });
        }
        let levels = self.config.levels;
        let mut tokens = self.count(messages, overhead, last);
        if self.memory.tokens_at_rewrite.is_none() {
            self.memory.rewritten(tokens);
        }
        tokens = self.microcompact_step(messages, tokens, overhead, idle, &mut events);
        let mut check = levels.check(tokens);
        if check.level >= Level::AutoCompact && levels.autocompact_enabled() && !self.circuit_open()
        {
            // A fork is the main request and the instruction: sendable while that stays below
            // the blocking limit.
            let instruction =
                self.estimator.text(SUMMARY_PROMPT) + self.estimator.text(FORK_SUFFIX);
            let fork = services
                .main
                .filter(|_| tokens + instruction < levels.blocking_at)
                .map(|main| main.to_fork());
            let attempt = self
                .compact_once(
                    messages,
                    overhead,
                    services.summarizer,
                    services.files,
                    fork,
                )
                .await;
            match attempt {
                Ok((compacted, after, attached, summarized)) => {
                    events.push(ContextEvent::Compacted {
                        before: tokens,
                        after,
                        attached,
                        summarized,
                    });
                    *messages = compacted;
                    tokens = after;
                    self.memory.rewritten(after);
                    check = levels.check(tokens);
                    if tokens >= levels.autocompact_at {
                        self.memory.consecutive_failures += 1;
                        events.push(ContextEvent::CompactFailed {
                            reason: format!("the compacted history ({after}) is still at or above the threshold of {}", levels.autocompact_at),
                            consecutive: self.memory.consecutive_failures,
                        });
                    } else {
                        self.memory.consecutive_failures = 0;
                    }
                }
                Err(error) => {
                    self.memory.consecutive_failures += 1;
                    events.push(ContextEvent::CompactFailed {
                        reason: error.to_string(),
                        consecutive: self.memory.consecutive_failures,
                    });
                }
            }
        }
        let blocked = if check.level == Level::Blocking {
            Some(BlockReason::BlockingLimit {
                tokens,
                limit: levels.blocking_at,
            })
        } else if check.level >= Level::AutoCompact
            && levels.autocompact_enabled()
            && self.circuit_open()
        {
            Some(BlockReason::CompactionExhausted {
                failures: self.memory.consecutive_failures,
                tokens,
                threshold: levels.autocompact_at,
            })
        } else {
            None
        };
        if blocked.is_none() {
            self.memory.since_rewrite += 1;
        }
        Prepared {
            tokens,
            check,
            events,
            blocked,
        }
    }

    /// Compacts `messages` in place once, regardless of the level: the answer to the API saying the prompt is too
    /// long (the estimate was too low). The loop calls it at most once per turn.
    ///
    /// # Errors
    ///
    /// [`CompactError`] when the compaction could not be made.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future drops the summary call; nothing changes.
    pub async fn reactive_compact(
        &mut self,
        messages: &mut Vec<MessageParam>,
        overhead: Tokens,
        summarizer: &dyn Summarizer,
        files: &dyn FileSource,
    ) -> Result<Prepared, CompactError> {
        self.compact_now(messages, overhead, summarizer, files, None)
            .await
    }

    /// Compacts `messages` in place once, regardless of the level (the user's `/compact`):
    /// with `fork`, the summary is sent as a fork of the main request those parts describe
    /// (the history read from the prompt cache), falling back to the standalone request when
    /// it is refused as too long.
    ///
    /// # Errors
    ///
    /// [`CompactError`] when the compaction could not be made.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future drops the summary call; nothing changes.
    pub async fn compact_now(
        &mut self,
        messages: &mut Vec<MessageParam>,
        overhead: Tokens,
        summarizer: &dyn Summarizer,
        files: &dyn FileSource,
        fork: Option<Fork>,
    ) -> Result<Prepared, CompactError> {
        let before = self.count(messages, overhead, None);
        let (compacted, after, attached, summarized) = self
            .compact_once(messages, overhead, summarizer, files, fork)
            .await?;
        *messages = compacted;
        self.memory.rewritten(after);
        let check = self.config.levels.check(after);
        Ok(Prepared {
            tokens: after,
            check,
            events: vec![ContextEvent::Compacted {
                before,
                after,
                attached,
                summarized,
            }],
            blocked: None,
        })
    }

    async fn compact_once(
        &self,
        messages: &[MessageParam],
        overhead: Tokens,
        summarizer: &dyn Summarizer,
        files: &dyn FileSource,
        fork: Option<Fork>,
    ) -> Result<(Vec<MessageParam>, Tokens, Vec<String>, usize), CompactError> {
        let window = self.config.levels.context_window;
        // The summary may not ask for more than the model can answer (a local model's 8,192
        // output tokens, not the default 20,000), which also leaves the request more room.
        let mut config = self.config.compact;
        config.summary_max_output = config
            .summary_max_output
            .min(self.config.levels.output_reserve);
        let estimator = self.estimator.as_ref();
        let compacted = compact_inner(
            messages, window, &config, estimator, summarizer, files, fork,
        )
        .await?;
        let after = overhead + self.estimator.messages(&compacted.messages);
        tracing::info!(summarized = compacted.summarized, %after, "autocompact");
        Ok((
            compacted.messages,
            after,
            compacted.attached,
            compacted.summarized,
        ))
    }
}
