//! Ctrl-C (SIGINT), SIGTERM and SIGHUP: the first one aborts the turn in flight (its tools are
//! cancelled, their process groups killed, the history stays valid and the result is
//! written); a second one during the same turn exits at once with 128 + the signal's number.
//!
//! The listeners are registered once, before anything runs: a signal that arrived before them
//! would kill the process with no result and no cleanup (and leave tool processes running).
//! With no turn in flight, a headless run exits at once. The interactive session keeps the
//! terminal in raw mode, where Ctrl-C is a key, not a signal: the terminal's task calls
//! [`Interrupts::key_handler`] for it during a turn, which acts as a SIGINT would. A SIGINT
//! between turns comes from elsewhere and is ignored; SIGTERM and SIGHUP end the session: a
//! turn in flight is aborted first, and at the prompt the terminal's settings are put back
//! before exiting.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// The exit code after Ctrl-C: 128 + SIGINT, as shells report it.
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Debug, Default)]
struct Shared {
    /// The turn in flight.
    current: Mutex<Option<CancellationToken>>,
    /// The last signal received (0: none).
    last: AtomicI32,
    /// The terminal's settings before the terminal's task set raw mode (interactive).
    terminal: Mutex<Option<nix::sys::termios::Termios>>,
}

/// Routes SIGINT, SIGTERM and SIGHUP to the turn in flight.
#[derive(Debug)]
pub struct Interrupts {
    shared: Arc<Shared>,
}

impl Interrupts {
    /// Starts listening. `interactive`: whether this is the interactive session (see the
    /// module docs for the difference).
    ///
    /// # Errors
    ///
    /// When a signal handler cannot be installed.
    pub fn listen(interactive: bool) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared::default());
        if interactive {
            *shared
                .terminal
                .lock()
                .unwrap_or_else(PoisonError::into_inner) =
                nix::sys::termios::tcgetattr(std::io::stdin()).ok();
        }
        for (kind, number) in [
            (SignalKind::interrupt(), 2),
            (SignalKind::terminate(), 15),
            (SignalKind::hangup(), 1),
        ] {
            let mut stream = signal(kind).context("listening for Ctrl-C and termination")?;
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    shared.receive(number, interactive);
                }
            });
        }
        Ok(Self { shared })
    }

    /// A token for a new turn; the next signal cancels it.
    pub fn arm(&self) -> CancellationToken {
        let token = CancellationToken::new();
        *self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(token.clone());
        token
    }

    /// What Ctrl-C pressed during a turn does in raw mode, where it is a key and no signal:
    /// the same as SIGINT (the first aborts the turn, a second before it wound down exits
    /// with 130).
    pub fn key_handler(&self) -> impl Fn() + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        move || shared.receive(2, true)
    }

    /// The turn is over.
    pub fn disarm(&self) {
        *self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The exit code a run aborted by a signal ends with: 128 + the last signal's number
    /// (130 when none was recorded: an abort has no other cause).
    pub fn aborted_exit_code(&self) -> u8 {
        match self.shared.last.load(Ordering::SeqCst) {
            0 => EXIT_INTERRUPTED as u8,
            number => (128 + number) as u8,
        }
    }

    /// Whether SIGTERM or SIGHUP asked the interactive session to end.
    pub fn quit_requested(&self) -> bool {
        matches!(self.shared.last.load(Ordering::SeqCst), 1 | 15)
    }
}

impl Shared {
    fn receive(&self, number: i32, interactive: bool) {
        self.last.store(number, Ordering::SeqCst);
        let turn = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match turn {
            Some(token) if token.is_cancelled() => self.exit(number),
            Some(token) => token.cancel(),
            // A stray SIGINT at the interactive prompt.
            None if interactive && number == 2 => self.last.store(0, Ordering::SeqCst),
            None => self.exit(number),
        }
    }

    fn exit(&self, number: i32) -> ! {
        // Commands running outside a sandbox would outlive us (a sandboxed one dies with its
        // sandbox): their process groups are killed first.
        tools::kill_running_commands();
        if self
            .terminal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
        {
            // The live region erased, the cursor shown, bracketed paste off: what the
            // terminal's task would have done.
            use std::io::Write as _;
            let mut stdout = std::io::stdout();
            let mut restore = render::tui::emergency_restore();
            if restore.is_empty() {
                restore = b"\x1b[?2004l\x1b[?25h".to_vec();
            }
            let _ = stdout.write_all(&restore);
            let _ = stdout.flush();
        }
        if let Some(settings) = self
            .terminal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                settings,
            );
        }
        // Destructors do not run past `exit`: the sandbox's temporary folders go now.
        tools::sandbox::remove_private_dirs();
        std::process::exit(128 + number)
    }
}

impl session::control::Arming for Interrupts {
    fn arm(&self) -> CancellationToken {
        Interrupts::arm(self)
    }

    fn disarm(&self) {
        Interrupts::disarm(self);
    }
}
