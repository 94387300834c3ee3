//! The settings' `statusLine` command, as Claude Code runs it: with its status JSON on
//! stdin, its rows shown under the prompt, refreshed while a turn goes on
//! ([`StatusFollower`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::{hooks, settings};

/// A session's `statusLine` command with what it runs with
/// ([`crate::Session::status_line_command`]): owned and cheap to clone.
#[derive(Clone)]
pub struct StatusLine {
    pub(crate) settings: settings::StatusLineSettings,
    pub(crate) hooks: hooks::Hooks,
    pub(crate) model: String,
    pub(crate) workspace: serde_json::Value,
    pub(crate) failed: Arc<AtomicBool>,
    pub(crate) notices: crate::Notices,
}

impl std::fmt::Debug for StatusLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusLine")
            .field("command", &self.settings.command)
            .finish_non_exhaustive()
    }
}

impl StatusLine {
    /// Runs the command with Claude Code's status JSON and `counted`'s keys (see
    /// [`crate::Session::status_line`]): its rows, or `None`.
    pub fn run(
        &self,
        counted: serde_json::Value,
    ) -> impl std::future::Future<Output = Option<Vec<String>>> + Send + 'static + use<> {
        // The mode is the one in force now.
        let mut input = self
            .hooks
            .input(hooks::Event::Notification, serde_json::json!({}));
        if let Some(object) = input.as_object_mut() {
            object.remove("hook_event_name");
            object.insert(
                "model".into(),
                serde_json::json!({"id": self.model, "display_name": self.model}),
            );
            object.insert("workspace".into(), self.workspace.clone());
            object.insert(
                "version".into(),
                serde_json::json!(env!("CARGO_PKG_VERSION")),
            );
            object.insert(
                "output_style".into(),
                serde_json::json!({"name": "default"}),
            );
            if let serde_json::Value::Object(counted) = counted {
                object.extend(counted);
            }
        }
        let env = self.hooks.env().clone();
        let this = self.clone();
        async move {
            let status_line = &this.settings;
            let exit = hooks::process::run(
                &env,
                &hooks::process::Launch::shell(&status_line.command),
                STATUS_LINE_TIMEOUT,
                Some(&input),
            )
            .await;
            let failure = match exit {
                Ok(exit) if exit.code == Some(0) => {
                    let pad = " ".repeat(usize::from(status_line.padding.unwrap_or(2)));
                    let rows: Vec<String> = exit
                        .stdout
                        .lines()
                        .take(STATUS_LINE_ROWS)
                        .map(|line| format!("{pad}{}", render::printable_colored(line, false)))
                        .collect();
                    return (!rows.is_empty()).then_some(rows);
                }
                Ok(exit) => format!("exited with {:?}: {}", exit.code, exit.stderr),
                Err(error) => error,
            };
            if !this.failed.swap(true, Ordering::Relaxed) {
                this.notices.say(&format!(
                    "statusLine command `{}` {}",
                    render::printable(&status_line.command, false),
                    render::printable(&failure, false)
                ));
            }
            None
        }
    }
}

/// How long a `statusLine` command may take: 5 s (ours; a slow one leaves the last rows).
pub const STATUS_LINE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The most rows a `statusLine` command's output is shown in.
pub const STATUS_LINE_ROWS: usize = 3;

/// How often the status line may run while a turn goes on: at most once a second (Claude
/// Code debounces its refresh too), one run at a time.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Refreshes a status line while a turn goes on ([`StatusFollower::update`] with each new
/// figure): at most every [`FOLLOW_EVERY`], never two runs at once, and only when what it
/// would be told changed. Cheap to clone; the clones share their state.
#[derive(Clone, Debug)]
pub struct StatusFollower {
    line: StatusLine,
    window: u64,
    started: Instant,
    /// Milliseconds after `started` of the last run's start.
    last: Arc<AtomicU64>,
    running: Arc<AtomicBool>,
    told: Arc<std::sync::Mutex<serde_json::Value>>,
}

impl StatusFollower {
    /// Follows `line`, telling it the session's figures against a `window` of tokens and
    /// the time since `started`.
    pub fn new(line: StatusLine, window: u64, started: Instant) -> Self {
        Self {
            line,
            window,
            started,
            last: Arc::new(AtomicU64::new(0)),
            running: Arc::new(AtomicBool::new(false)),
            told: Arc::new(std::sync::Mutex::new(serde_json::Value::Null)),
        }
    }

    /// The session's figures are now `totals`: runs the command (on the tokio runtime) when
    /// it is time and they changed, and gives its rows to `show`.
    pub fn update(
        &self,
        totals: &crate::cost::Totals,
        show: impl FnOnce(Vec<String>) + Send + 'static,
    ) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last.load(Ordering::Relaxed);
        if (last != 0 && now.saturating_sub(last) < FOLLOW_EVERY.as_millis() as u64)
            || self.running.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let mut counted = totals.status_json(self.window, self.started);
        // The time alone changing is no reason to run it.
        let figures = {
            let mut figures = counted.clone();
            if let Some(cost) = figures
                .get_mut("cost")
                .and_then(|cost| cost.as_object_mut())
            {
                cost.remove("total_duration_ms");
            }
            figures
        };
        {
            let mut told = self
                .told
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *told == figures {
                self.running.store(false, Ordering::Release);
                return;
            }
            *told = figures;
        }
        self.last.store(now.max(1), Ordering::Relaxed);
        let running = Arc::clone(&self.running);
        let job = self.line.run(std::mem::take(&mut counted));
        tokio::spawn(async move {
            if let Some(rows) = job.await {
                show(rows);
            }
            running.store(false, Ordering::Release);
        });
    }
}
