//! Start-up gathering off the critical path (the seeds' prefetch, 000_7dfda54faac69dcf.txt
//! 4.2 step 3 and 4.8): the memory files, the skills and `git status` are gathered at once;
//! the first request waits only for what it needs (the memory files and the skills), and
//! gives `git status`, which can take seconds in a large repository, a short grace
//! ([`GIT_STATUS_GRACE`]). A status that comes later is not lost: it is told to the model
//! with the next message that goes out ([`Late::take_ready`]), as a `<system-reminder>` in
//! that new message, so the cache prefix is unchanged.
//!
//! `AGENT_NO_PREFETCH=1` gathers one after the other and waits for everything (the
//! comparison `cargo xtask bench-cli` measures).

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;

/// How long the first request waits for a late source once what it needs is ready.
pub const GIT_STATUS_GRACE: Duration = Duration::from_millis(100);

/// A source that was not ready for the first request, still being gathered.
#[derive(Debug, Default)]
pub struct Late {
    pending: Mutex<Option<JoinHandle<Option<String>>>>,
}

impl Late {
    /// Nothing pending.
    pub fn none() -> Self {
        Self::default()
    }

    /// Its text, once, when it is ready; `None` while it is still being gathered, when it
    /// gave nothing, or when it was already taken. Never waits.
    pub fn take_ready(&self) -> Option<String> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if !pending.as_ref().is_some_and(JoinHandle::is_finished) {
            return None;
        }
        let handle = pending.take()?;
        // Finished, so polling it once gives its result.
        futures_util::FutureExt::now_or_never(handle)
            .and_then(Result::ok)
            .flatten()
    }

    /// Whether something is still being gathered.
    #[cfg(test)]
    pub fn is_pending(&self) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

/// Gathers `needed` and `optional` at once: returns when `needed` is done and `optional` is
/// done too or has had `grace` more; an `optional` not done by then goes on in the
/// background ([`Late`]).
pub async fn gather<N, O>(
    needed: N,
    optional: O,
    grace: Duration,
) -> (N::Output, Option<String>, Late)
where
    N: Future,
    O: Future<Output = Option<String>> + Send + 'static,
{
    let mut handle = tokio::spawn(optional);
    let needed = needed.await;
    match tokio::time::timeout(grace, &mut handle).await {
        Ok(joined) => (needed, joined.ok().flatten(), Late::none()),
        Err(_) => (
            needed,
            None,
            Late {
                pending: Mutex::new(Some(handle)),
            },
        ),
    }
}

/// The reminder that brings a late `git status` to the model.
pub fn late_git_status(section: &str) -> String {
    format!(
        "<system-reminder>\nThe repository's state at the start of this session (gathered while you started):\n{}\n</system-reminder>",
        section.trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slow source not needed for the first request does not delay it: the first request's
    /// context is ready when the needed part is (plus the grace), and the slow part is taken
    /// once, later, when it is ready.
    #[tokio::test(start_paused = true)]
    async fn the_first_request_does_not_wait_for_a_slow_source() {
        let started = tokio::time::Instant::now();
        let needed = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            "memory"
        };
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Some("Git status:\n## main\n".to_owned())
        };
        let (first, status, late) = gather(needed, slow, GIT_STATUS_GRACE).await;
        assert_eq!(first, "memory");
        assert_eq!(status, None);
        assert_eq!(started.elapsed(), Duration::from_millis(110));
        assert!(late.is_pending());
        assert_eq!(late.take_ready(), None);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(late.take_ready().as_deref(), Some("Git status:\n## main\n"));
        assert_eq!(late.take_ready(), None);
        assert!(!late.is_pending());

        // A fast one is in the first request.
        let (_, status, late) =
            gather(async {}, async { Some("s".to_owned()) }, GIT_STATUS_GRACE).await;
        assert_eq!(status.as_deref(), Some("s"));
        assert!(!late.is_pending());
    }
}
