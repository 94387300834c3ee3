//! Ctrl-C (SIGINT): the first one aborts the turn in flight, a second one during the same
//! turn exits at once with code 130.
//!
//! The listener is registered once, before anything runs: a signal that arrived before it
//! would kill the process with no result and no cleanup. Between turns (the interactive
//! prompt) the terminal is in raw mode and Ctrl-C reaches the line editor as a key, not as a
//! signal; a SIGINT sent from elsewhere then is ignored in interactive mode and ends a headless
//! run that has not started its turn yet.

use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

/// The exit code after an interrupt: 128 + SIGINT, as shells report it.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Routes SIGINT to the turn in flight.
#[derive(Debug)]
pub struct Interrupts {
    current: Arc<Mutex<Option<CancellationToken>>>,
}

impl Interrupts {
    /// Starts listening. `idle_exits`: whether a SIGINT with no turn in flight exits
    /// (headless) or is ignored (interactive).
    ///
    /// # Errors
    ///
    /// When the signal handler cannot be installed.
    pub fn listen(idle_exits: bool) -> anyhow::Result<Self> {
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("listening for Ctrl-C")?;
        let current: Arc<Mutex<Option<CancellationToken>>> = Arc::default();
        let shared = Arc::clone(&current);
        tokio::spawn(async move {
            while sigint.recv().await.is_some() {
                let turn = shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                match turn {
                    Some(token) if token.is_cancelled() => std::process::exit(EXIT_INTERRUPTED),
                    Some(token) => token.cancel(),
                    None if idle_exits => std::process::exit(EXIT_INTERRUPTED),
                    None => {}
                }
            }
        });
        Ok(Self { current })
    }

    /// A token for a new turn; the next SIGINT cancels it.
    pub fn arm(&self) -> CancellationToken {
        let token = CancellationToken::new();
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(token.clone());
        token
    }

    /// The turn is over.
    pub fn disarm(&self) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}
