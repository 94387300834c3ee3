//! Where a session's notes for the user go: warnings (a setting that is ignored, a server that
//! failed, a hook that could not start) and notes (a session continued, a folder trusted) that
//! stop nothing. A front end shows them its own way; the default writes `agent: TEXT` lines
//! to stderr, as the `agent` binary shows them.

use std::sync::Arc;

/// A session's notice sink: cheap to clone, shared by everything the session starts (hooks,
/// subagents, MCP servers joining later).
#[derive(Clone)]
pub struct Notices(Sink, Option<Sink>);

/// Where text goes.
type Sink = Arc<dyn Fn(&str) + Send + Sync>;

impl Notices {
    /// Notices given to `show`, one line of text each (`warning: ...` for a warning, no
    /// `agent:` prefix).
    pub fn new(show: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(Arc::new(show), None)
    }

    /// These notices, with `emit` writing a hook's terminal sequence (a hook's
    /// `terminalSequence`, already reduced to what Claude Code permits: title and
    /// notification sequences, BEL) to the user's terminal. Without it they are dropped.
    #[must_use]
    pub fn with_terminal(self, emit: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self(self.0, Some(Arc::new(emit)))
    }

    /// Writes `sequence` to the user's terminal, when there is one ([`Notices::with_terminal`]).
    pub fn terminal(&self, sequence: &str) {
        if let Some(emit) = &self.1 {
            emit(sequence);
        }
    }

    /// `agent: TEXT` on stderr.
    pub fn stderr() -> Self {
        Self::new(|text| eprintln!("agent: {text}"))
    }

    /// Shows `text`.
    pub fn say(&self, text: &str) {
        (self.0)(text);
    }
}

impl Default for Notices {
    /// [`Notices::stderr`].
    fn default() -> Self {
        Self::stderr()
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notices")
    }
}
