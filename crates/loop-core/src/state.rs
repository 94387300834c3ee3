//! The loop's state and the one pure function that decides what happens next.
//!
//! The loop is the seeds' six-phase state machine (000_7dfda54faac69dcf.txt 4.3): 1
//! preprocess the context, 2 call the model (tools start as their blocks complete), 3 decide
//! whether the turn ends, 4 collect the tool results, 5 check the turn limit, 6 assemble the
//! next state and go around. Phases 3, 5 and 6 are [`decide`]: given the state and what the
//! last phase produced (an [`Outcome`]), it names the next [`Step`]. Some steps are effects
//! whose own outcome is decided again (a reactive compaction, the stop hooks); every other
//! step either goes around with a [`Transition`] or ends the run with a [`Terminal`].

use std::collections::HashMap;

use protocol::{MessageParam, Usage};

use crate::events::{Terminal, Transition};
use crate::hooks::StopDecision;
use crate::model::ModelError;

/// Budgets of the whole run: never reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunBudgets {
    /// 1-based turn number: one more after each turn whose tools ran.
    pub turn: u32,
    /// Stop-hook blocks honoured so far.
    pub stop_hook_blocks: u32,
    /// Whether a stop hook has blocked in this run (told to the next stop hook).
    pub stop_hook_active: bool,
    /// The model asked.
    pub model: String,
    /// Whether the fallback model has replaced the first one.
    pub fallback_used: bool,
    /// Output tokens of the run's responses so far (the token budget's count).
    pub output_tokens: u64,
    /// Token-budget nudges so far.
    pub continuations: u32,
    /// Output tokens when the last nudge was sent.
    pub output_at_continuation: u64,
    /// Nudges in a row, before the last, that each brought fewer than
    /// [`DIMINISHING_TOKENS`] output tokens.
    pub small_continuations: u32,
}

/// A nudge that brings fewer output tokens than this is small; three small ones in a row end
/// the run ([`Terminal::DiminishingReturns`]). Our rule: the seeds give no numbers.
pub const DIMINISHING_TOKENS: u64 = 500;

/// Small nudges in a row that end the run.
pub const DIMINISHING_STREAK: u32 = 3;

impl RunBudgets {
    /// Small nudges in a row, counting the last one (what it brought is known once the model
    /// stopped again).
    fn small_streak(&self) -> u32 {
        if self.continuations == 0 {
            return 0;
        }
        if self
            .output_tokens
            .saturating_sub(self.output_at_continuation)
            < DIMINISHING_TOKENS
        {
            self.small_continuations + 1
        } else {
            0
        }
    }
}

/// Budgets of one turn: reset when its tools ran and the next turn starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TurnBudgets {
    /// max_tokens recoveries in a row (reset by a stop-hook block too).
    pub max_tokens_recoveries: u32,
    /// Whether a reactive compaction was tried after "prompt is too long".
    pub reactive_compact_attempted: bool,
    /// The escalated output cap, once a response was cut before anything ran.
    pub output_cap_override: Option<u32>,
}

/// The loop's state, replaced wholesale at each turn of the loop (the seeds' `Y`).
#[derive(Clone, Debug)]
pub(crate) struct State {
    /// The history the next request sends.
    pub messages: Vec<MessageParam>,
    /// Run budgets.
    pub run: RunBudgets,
    /// Turn budgets.
    pub turn: TurnBudgets,
    /// The last response's usage and how many leading messages it covered.
    pub last_usage: Option<(Usage, usize)>,
    /// Consecutive-turn counts of each call signature seen in the previous turn.
    pub repeats: HashMap<String, u32>,
    /// Why the loop came around (none on the first pass).
    pub transition: Option<Transition>,
}

/// The limits [`decide`] applies, from the run's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// `max_tokens` of a request without escalation.
    pub output_cap: u32,
    /// The escalated cap.
    pub escalated_output_cap: u32,
    /// max_tokens recoveries in a row before the run ends.
    pub max_tokens_recoveries: u32,
    /// Stop-hook blocks honoured per run.
    pub stop_hook_cap: u32,
    /// The turn limit.
    pub max_turns: Option<u32>,
    /// The fallback model, when one is configured.
    pub fallback_model: Option<String>,
    /// Its output cap (requests after the switch ask for at most this).
    pub fallback_output_cap: Option<u32>,
    /// The output-token budget (`--max-tokens-budget`): while it is not used up, a model that
    /// stops is nudged to go on.
    pub token_budget: Option<u64>,
}

/// What a response was, as far as deciding goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Response {
    /// Its stop_reason is max_tokens.
    pub max_tokens: bool,
    /// None of its tools ran (refused, invalid or none).
    pub nothing_ran: bool,
    /// It holds tool_use blocks.
    pub tool_uses: bool,
    /// A call reached the repeated-call stop count.
    pub repeat_stop: bool,
    /// It ended incomplete (a refusal, a content filter): its calls were not run and the
    /// turn ends as if it held none.
    pub incomplete: bool,
}

/// What the last phase produced.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Outcome<'a> {
    /// The user aborted the call (during the tools, or while the model streamed).
    Aborted {
        /// Tools were running.
        during_tools: bool,
    },
    /// The call failed.
    Failed(&'a ModelError),
    /// A response completed (its tools ran during the stream).
    Responded(Response),
    /// A reactive compaction ran.
    Compacted {
        /// Whether it shortened the history.
        succeeded: bool,
    },
    /// The stop hooks answered.
    StopHooks(&'a StopDecision),
}

/// What happens next.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// Go around (phase 6), for this reason.
    Continue(Transition),
    /// End the run.
    Stop(Terminal),
    /// Compact the history now (then decide on [`Outcome::Compacted`]).
    ReactiveCompact,
    /// Run the stop hooks now (then decide on [`Outcome::StopHooks`]).
    RunStopHooks,
}

impl State {
    /// The state of a new run over `messages`.
    pub fn new(messages: Vec<MessageParam>, model: &str) -> Self {
        Self {
            messages,
            run: RunBudgets {
                turn: 1,
                stop_hook_blocks: 0,
                stop_hook_active: false,
                model: model.to_owned(),
                fallback_used: false,
                output_tokens: 0,
                continuations: 0,
                output_at_continuation: 0,
                small_continuations: 0,
            },
            turn: TurnBudgets::default(),
            last_usage: None,
            repeats: HashMap::new(),
            transition: None,
        }
    }

    /// The output cap of the next request.
    pub fn output_cap(&self, limits: &Limits) -> u32 {
        let cap = self.turn.output_cap_override.unwrap_or(limits.output_cap);
        match limits.fallback_output_cap {
            Some(fallback) if self.run.fallback_used => cap.min(fallback),
            _ => cap,
        }
    }

    /// The state after `transition` (phase 6), its messages already appended. `usage` is
    /// the last response's; `repeats` the call counts of its turn.
    pub fn next(
        self,
        transition: Transition,
        limits: &Limits,
        usage: &Usage,
        repeats: HashMap<String, u32>,
    ) -> Self {
        // Every message but the last (the one the loop just added) was in the request.
        let covered = Some((usage.clone(), self.messages.len().saturating_sub(1)));
        let mut next = Self {
            transition: Some(transition),
            ..self
        };
        match transition {
            Transition::NextTurn => {
                next.run.turn += 1;
                next.turn = TurnBudgets::default();
                next.last_usage = covered;
                next.repeats = repeats;
            }
            Transition::MaxTokensEscalation => {
                next.turn.output_cap_override = Some(limits.escalated_output_cap);
            }
            Transition::MaxTokensRecovery => {
                next.turn.max_tokens_recoveries += 1;
                next.last_usage = covered;
                next.repeats = repeats;
            }
            Transition::ReactiveCompact => {
                next.turn.reactive_compact_attempted = true;
                next.last_usage = None;
            }
            Transition::TokenBudgetContinuation => {
                next.run.small_continuations = next.run.small_streak();
                next.run.continuations += 1;
                next.run.output_at_continuation = next.run.output_tokens;
                next.turn.max_tokens_recoveries = 0;
                next.last_usage = covered;
                next.repeats = HashMap::new();
            }
            Transition::StopHookBlocking => {
                next.run.stop_hook_active = true;
                next.run.stop_hook_blocks += 1;
                next.turn.max_tokens_recoveries = 0;
                next.last_usage = covered;
                next.repeats = HashMap::new();
            }
            Transition::FallbackModel => {
                next.run.model = limits.fallback_model.clone().unwrap_or_default();
                next.run.fallback_used = true;
            }
            // Reported inside a phase, never a reason to go around.
            Transition::NonStreamingFallback | Transition::StreamRetry | Transition::Compacted => {}
        }
        next
    }
}

/// Phases 3, 5 and 6: the next step from the state and the last phase's outcome. Pure.
pub(crate) fn decide(state: &State, limits: &Limits, outcome: Outcome<'_>) -> Step {
    match outcome {
        Outcome::Aborted { during_tools: true } => Step::Stop(Terminal::AbortedTools),
        Outcome::Aborted {
            during_tools: false,
        } => Step::Stop(Terminal::AbortedStreaming),
        Outcome::Failed(ModelError::PromptTooLong(_)) if !state.turn.reactive_compact_attempted => {
            Step::ReactiveCompact
        }
        Outcome::Failed(ModelError::PromptTooLong(_)) => Step::Stop(Terminal::PromptTooLong),
        Outcome::Failed(ModelError::Overloaded(_))
            if !state.run.fallback_used && limits.fallback_model.is_some() =>
        {
            Step::Continue(Transition::FallbackModel)
        }
        Outcome::Failed(ModelError::Image(failure)) => {
            Step::Stop(Terminal::ImageError(failure.to_string()))
        }
        Outcome::Failed(error) => Step::Stop(Terminal::ModelError(error.clone())),
        Outcome::Compacted { succeeded: true } => Step::Continue(Transition::ReactiveCompact),
        Outcome::Compacted { succeeded: false } => Step::Stop(Terminal::PromptTooLong),
        Outcome::Responded(response) => decide_response(state, limits, response),
        Outcome::StopHooks(StopDecision::Block { .. })
            if state.run.stop_hook_blocks >= limits.stop_hook_cap =>
        {
            Step::Stop(Terminal::StopHookCapReached)
        }
        Outcome::StopHooks(StopDecision::Block { .. }) => {
            Step::Continue(Transition::StopHookBlocking)
        }
        Outcome::StopHooks(StopDecision::Prevent { reason }) => {
            Step::Stop(Terminal::StopHookPrevented(reason.clone()))
        }
        Outcome::StopHooks(StopDecision::Allow) => match limits.token_budget {
            None => Step::Stop(Terminal::Completed),
            Some(budget) if state.run.output_tokens >= budget => {
                Step::Stop(Terminal::TokenBudgetReached)
            }
            Some(_) if state.run.small_streak() >= DIMINISHING_STREAK => {
                Step::Stop(Terminal::DiminishingReturns)
            }
            Some(_) => Step::Continue(Transition::TokenBudgetContinuation),
        },
    }
}

/// Phase 3 (max_tokens, no tool_use), 5 (turn limit) and 6 for a completed response.
fn decide_response(state: &State, limits: &Limits, response: Response) -> Step {
    if response.max_tokens {
        // Escalate once, when nothing ran (the same request again costs no side effects).
        let cap = state.output_cap(limits);
        if state.turn.output_cap_override.is_none()
            && response.nothing_ran
            && limits.escalated_output_cap > cap
        {
            return Step::Continue(Transition::MaxTokensEscalation);
        }
        if state.turn.max_tokens_recoveries >= limits.max_tokens_recoveries {
            return Step::Stop(Terminal::ModelError(ModelError::MaxTokensExhausted(
                state.turn.max_tokens_recoveries + 1,
            )));
        }
        return Step::Continue(Transition::MaxTokensRecovery);
    }
    if !response.tool_uses || response.incomplete {
        return Step::RunStopHooks;
    }
    if response.repeat_stop {
        return Step::Stop(Terminal::RepeatedToolCall);
    }
    if limits.max_turns.is_some_and(|max| state.run.turn + 1 > max) {
        return Step::Stop(Terminal::MaxTurns);
    }
    Step::Continue(Transition::NextTurn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ApiFailure;

    fn limits() -> Limits {
        Limits {
            output_cap: 8_000,
            escalated_output_cap: 64_000,
            max_tokens_recoveries: 3,
            stop_hook_cap: 8,
            max_turns: Some(3),
            fallback_model: Some("fallback".into()),
            fallback_output_cap: None,
            token_budget: None,
        }
    }

    fn response() -> Response {
        Response {
            max_tokens: false,
            nothing_ran: false,
            tool_uses: true,
            repeat_stop: false,
            incomplete: false,
        }
    }

    fn state() -> State {
        State::new(Vec::new(), "first")
    }

    #[test]
    fn a_tool_turn_goes_around_until_the_turn_limit() {
        let limits = limits();
        let mut state = state();
        let outcome = Outcome::Responded(response());
        assert_eq!(
            decide(&state, &limits, outcome),
            Step::Continue(Transition::NextTurn)
        );
        state.messages.push(MessageParam::user_text("results"));
        state.turn.max_tokens_recoveries = 2;
        state.turn.output_cap_override = Some(64_000);
        let state = state.next(
            Transition::NextTurn,
            &limits,
            &Usage::default(),
            HashMap::new(),
        );
        assert_eq!(state.run.turn, 2);
        assert_eq!(state.turn, TurnBudgets::default(), "turn budgets reset");
        assert_eq!(state.last_usage.as_ref().map(|(_, n)| *n), Some(0));
        let state = state.next(
            Transition::NextTurn,
            &limits,
            &Usage::default(),
            HashMap::new(),
        );
        assert_eq!(
            decide(&state, &limits, outcome),
            Step::Stop(Terminal::MaxTurns)
        );
        let repeated = Outcome::Responded(Response {
            repeat_stop: true,
            ..response()
        });
        assert_eq!(
            decide(&state, &limits, repeated),
            Step::Stop(Terminal::RepeatedToolCall),
            "a repeated call ends the run before the turn limit is looked at"
        );
        let refused = Outcome::Responded(Response {
            incomplete: true,
            nothing_ran: true,
            ..response()
        });
        assert_eq!(
            decide(&state, &limits, refused),
            Step::RunStopHooks,
            "a response ended incomplete ends the turn: its calls were not run"
        );
    }

    #[test]
    fn max_tokens_escalates_once_then_recovers_three_times() {
        let limits = limits();
        let cut = |nothing_ran| {
            Outcome::Responded(Response {
                max_tokens: true,
                nothing_ran,
                tool_uses: false,
                repeat_stop: false,
                incomplete: false,
            })
        };
        let state = state();
        assert_eq!(
            decide(&state, &limits, cut(true)),
            Step::Continue(Transition::MaxTokensEscalation)
        );
        // A tool ran: escalating would run it twice.
        assert_eq!(
            decide(&state, &limits, cut(false)),
            Step::Continue(Transition::MaxTokensRecovery)
        );
        let mut state = state.next(
            Transition::MaxTokensEscalation,
            &limits,
            &Usage::default(),
            HashMap::new(),
        );
        assert_eq!(state.output_cap(&limits), 64_000);
        for recovery in 0..3 {
            assert_eq!(
                decide(&state, &limits, cut(true)),
                Step::Continue(Transition::MaxTokensRecovery),
                "recovery {recovery}"
            );
            state = state.next(
                Transition::MaxTokensRecovery,
                &limits,
                &Usage::default(),
                HashMap::new(),
            );
        }
        assert_eq!(state.output_cap(&limits), 64_000, "the escalation stays");
        assert_eq!(
            decide(&state, &limits, cut(true)),
            Step::Stop(Terminal::ModelError(ModelError::MaxTokensExhausted(4)))
        );
    }

    #[test]
    fn prompt_too_long_compacts_once() {
        let limits = limits();
        let error = ModelError::PromptTooLong(ApiFailure::new("too long"));
        let state = state();
        assert_eq!(
            decide(&state, &limits, Outcome::Failed(&error)),
            Step::ReactiveCompact
        );
        assert_eq!(
            decide(&state, &limits, Outcome::Compacted { succeeded: false }),
            Step::Stop(Terminal::PromptTooLong)
        );
        assert_eq!(
            decide(&state, &limits, Outcome::Compacted { succeeded: true }),
            Step::Continue(Transition::ReactiveCompact)
        );
        let state = state.next(
            Transition::ReactiveCompact,
            &limits,
            &Usage::default(),
            HashMap::new(),
        );
        assert_eq!(
            decide(&state, &limits, Outcome::Failed(&error)),
            Step::Stop(Terminal::PromptTooLong)
        );
    }

    #[test]
    fn overload_switches_to_the_fallback_model_once() {
        let limits = limits();
        let error = ModelError::Overloaded(ApiFailure::new("529"));
        let state = state();
        assert_eq!(
            decide(&state, &limits, Outcome::Failed(&error)),
            Step::Continue(Transition::FallbackModel)
        );
        let state = state.next(
            Transition::FallbackModel,
            &limits,
            &Usage::default(),
            HashMap::new(),
        );
        assert_eq!(state.run.model, "fallback");
        // Its own output cap applies from the switch on, the first model's before it.
        let capped = Limits {
            fallback_output_cap: Some(1_000),
            ..limits.clone()
        };
        assert_eq!(self::state().output_cap(&capped), 8_000);
        assert_eq!(state.output_cap(&capped), 1_000);
        assert_eq!(
            decide(&state, &limits, Outcome::Failed(&error)),
            Step::Stop(Terminal::ModelError(error.clone()))
        );
        let without = Limits {
            fallback_model: None,
            ..limits
        };
        assert_eq!(
            decide(&self::state(), &without, Outcome::Failed(&error)),
            Step::Stop(Terminal::ModelError(error))
        );
    }

    #[test]
    fn stop_hooks_block_up_to_the_cap() {
        let limits = limits();
        let mut state = state();
        let end = Outcome::Responded(Response {
            tool_uses: false,
            ..response()
        });
        assert_eq!(decide(&state, &limits, end), Step::RunStopHooks);
        let block = StopDecision::Block {
            reasons: vec!["lint".into()],
        };
        for _ in 0..8 {
            assert_eq!(
                decide(&state, &limits, Outcome::StopHooks(&block)),
                Step::Continue(Transition::StopHookBlocking)
            );
            state.turn.max_tokens_recoveries = 1;
            state = state.next(
                Transition::StopHookBlocking,
                &limits,
                &Usage::default(),
                HashMap::new(),
            );
            assert!(state.run.stop_hook_active);
            assert_eq!(state.turn.max_tokens_recoveries, 0);
        }
        assert_eq!(
            decide(&state, &limits, Outcome::StopHooks(&block)),
            Step::Stop(Terminal::StopHookCapReached)
        );
        assert_eq!(
            decide(&state, &limits, Outcome::StopHooks(&StopDecision::Allow)),
            Step::Stop(Terminal::Completed)
        );
        let prevent = StopDecision::Prevent {
            reason: "done".into(),
        };
        assert_eq!(
            decide(&state, &limits, Outcome::StopHooks(&prevent)),
            Step::Stop(Terminal::StopHookPrevented("done".into()))
        );
    }

    #[test]
    fn aborts_and_other_errors_end_the_run() {
        let limits = limits();
        let state = state();
        assert_eq!(
            decide(&state, &limits, Outcome::Aborted { during_tools: true }),
            Step::Stop(Terminal::AbortedTools)
        );
        assert_eq!(
            decide(
                &state,
                &limits,
                Outcome::Aborted {
                    during_tools: false
                }
            ),
            Step::Stop(Terminal::AbortedStreaming)
        );
        let image = ModelError::Image(ApiFailure::new("bad image"));
        assert_eq!(
            decide(&state, &limits, Outcome::Failed(&image)),
            Step::Stop(Terminal::ImageError("bad image".into()))
        );
    }
}
