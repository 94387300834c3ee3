//! Stop hooks: asked when the model wants to end its turn.

use std::future::Future;
use std::pin::Pin;

use protocol::{Message, MessageParam};

/// What a stop hook sees.
#[derive(Clone, Debug, PartialEq)]
pub struct StopHookInput {
    /// The history, the final assistant message included.
    pub messages: Vec<MessageParam>,
    /// `true` when the loop is already continuing because of a stop hook.
    pub stop_hook_active: bool,
    /// The final assistant message.
    pub last_assistant_message: Message,
}

/// A stop hook's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopDecision {
    /// Let the turn end.
    Allow,
    /// Keep working: the reasons go to the model as a user message.
    Block {
        /// What the model is told.
        reasons: Vec<String>,
    },
    /// End the run now.
    Prevent {
        /// Why, for the user.
        reason: String,
    },
}

/// The future a [`StopHook`] returns.
pub type StopFuture<'a> = Pin<Box<dyn Future<Output = StopDecision> + Send + 'a>>;

/// Runs the configured Stop hooks (the CLI runs command hooks; tests script them).
pub trait StopHook: Send + Sync {
    /// Decides whether the turn may end.
    ///
    /// # Cancellation safety
    ///
    /// The loop drops the future on user abort.
    fn on_stop(&self, input: StopHookInput) -> StopFuture<'_>;
}

/// No stop hooks: every turn may end.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoStopHook;

impl StopHook for NoStopHook {
    fn on_stop(&self, _input: StopHookInput) -> StopFuture<'_> {
        Box::pin(std::future::ready(StopDecision::Allow))
    }
}
