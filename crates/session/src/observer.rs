//! What a front end sees of a running turn.

use loop_core::LoopEvent;

use crate::subagents::SubagentEvent;

/// Where a front end asks the running turn to catch up: each request is answered (its
/// sender fired) once every event received before it was given to [`Observer::flush`].
/// A question to the user waits for that, so it appears after the text that led to it.
pub type CatchUp = tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>;

/// Waits until the turn behind `catch_up` has given the observer every event sent before
/// this call, at most a second (`None`: no turn runs; returns at once). What a front end
/// calls before it asks a question.
pub async fn catch_up(catch_up: Option<CatchUp>) {
    let Some(sender) = catch_up else {
        return;
    };
    let (done, wait) = tokio::sync::oneshot::channel();
    if sender.send(done).is_ok() {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), wait).await;
    }
}

/// A front end's view of a turn: every loop event in order and every subagent's events
/// (the session's warnings go to its [`Notices`](crate::Notices)). The terminal renders
/// them; a headless run prints JSON lines; a host may forward them.
pub trait Observer: Send {
    /// An event of the main loop (a text delta, a finished tool call, a history change).
    fn event(&mut self, event: &LoopEvent);
    /// An event of a subagent, tagged with the Task call that runs it.
    fn subagent(&mut self, event: &SubagentEvent);
    /// Show everything received so far: a question is about to be asked.
    fn flush(&mut self) {}
    /// Takes the channel catch-up requests come through while a turn runs (`None` when it
    /// ends). The default drops it: nothing waits.
    fn set_catch_up(&self, catch_up: Option<CatchUp>) {
        drop(catch_up);
    }
}
