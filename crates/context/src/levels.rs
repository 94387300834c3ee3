//! Water levels: where a history's token count stands against the model's context window.
//!
//! ```text
//! 0                      warning      autocompact   blocking  effective  window
//! ├──────── Normal ─────────┼── Warning ──┼── AutoCompact ─┼── Blocking ──┤ reserve ┤
//!                        147_000      167_000        177_000   180_000    200_000
//! ```
//!
//! For a 200,000-token window and a model that can write at least 20,000 tokens:
//! `output_reserve = min(max_output, 20_000) = 20_000`, `effective = 200_000 - 20_000 =
//! 180_000`, `autocompact_at = effective - 13_000 = 167_000`, `blocking_at = effective - 3_000 =
//! 177_000`, `warning_at = autocompact_at - 20_000 = 147_000`. The constants are Claude Code's
//! (2.x): 20,000-token output reserve cap, 13,000-token autocompact buffer, 3,000-token
//! blocking buffer, warning 20,000 tokens before autocompact. The 10,000-token gap between
//! autocompact and blocking exists so that the compaction request itself still fits.

use crate::tokens::Tokens;

/// Cap of the output reserve, in tokens (Claude Code's 20,000).
pub const OUTPUT_RESERVE_CAP: Tokens = Tokens(20_000);
/// Autocompact buffer below the effective window, in tokens (Claude Code's 13,000).
pub const AUTOCOMPACT_BUFFER: Tokens = Tokens(13_000);
/// Blocking buffer below the effective window, in tokens (Claude Code's 3,000).
pub const BLOCKING_BUFFER: Tokens = Tokens(3_000);
/// Distance of the warning level below the autocompact threshold, in tokens (20,000).
pub const WARNING_BUFFER: Tokens = Tokens(20_000);

/// Where a token count stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Below the warning level.
    Normal,
    /// At or above the warning level: tell the user.
    Warning,
    /// At or above the autocompact threshold: compact before the next request.
    AutoCompact,
    /// At or above the blocking limit: do not send the request.
    Blocking,
}

/// The result of [`WaterLevels::check`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelCheck {
    /// The level.
    pub level: Level,
    /// Percentage of the autocompact threshold still free (0.0 at or above it), as Claude
    /// Code's "context left until auto-compact"; relative to the blocking limit when
    /// autocompact is disabled.
    pub percent_left: f64,
}

/// Overrides of the computed thresholds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelOverrides {
    /// Put the autocompact threshold at this percentage of the effective window instead
    /// (1-100; never above the computed threshold).
    pub autocompact_percent: Option<u8>,
    /// Never autocompact (the level skips from Warning to Blocking).
    pub autocompact_disabled: bool,
}

/// The thresholds of one model, all in tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaterLevels {
    /// The model's context window.
    pub context_window: Tokens,
    /// Kept free for the answer: `min(max_output, 20_000)`.
    pub output_reserve: Tokens,
    /// `context_window - output_reserve`.
    pub effective: Tokens,
    /// `effective - 13_000` (or the override).
    pub autocompact_at: Tokens,
    /// `effective - 3_000`.
    pub blocking_at: Tokens,
    /// `autocompact_at - 20_000`.
    pub warning_at: Tokens,
    autocompact_enabled: bool,
}

impl WaterLevels {
    /// The levels for a model with `context_window` and `max_output` tokens.
    pub fn new(context_window: Tokens, max_output: Tokens) -> Self {
        Self::with_overrides(context_window, max_output, LevelOverrides::default())
    }

    /// The levels with overrides applied.
    pub fn with_overrides(
        context_window: Tokens,
        max_output: Tokens,
        overrides: LevelOverrides,
    ) -> Self {
        let output_reserve = max_output.min(OUTPUT_RESERVE_CAP);
        let effective = context_window - output_reserve;
        let mut autocompact_at = effective - AUTOCOMPACT_BUFFER;
        if let Some(percent) = overrides.autocompact_percent {
            let percent = u64::from(percent.clamp(1, 100));
            autocompact_at = autocompact_at.min(Tokens(effective.0 * percent / 100));
        }
        let blocking_at = effective - BLOCKING_BUFFER;
        Self {
            context_window,
            output_reserve,
            effective,
            autocompact_at,
            blocking_at,
            warning_at: autocompact_at - WARNING_BUFFER,
            autocompact_enabled: !overrides.autocompact_disabled,
        }
    }

    /// Levels with explicit thresholds (tests, and settings that pin them): `warning_at` is
    /// 20,000 tokens below `autocompact_at` (saturating at 0).
    pub fn custom(
        context_window: Tokens,
        output_reserve: Tokens,
        autocompact_at: Tokens,
        blocking_at: Tokens,
    ) -> Self {
        Self {
            context_window,
            output_reserve,
            effective: context_window - output_reserve,
            autocompact_at,
            blocking_at,
            warning_at: autocompact_at - WARNING_BUFFER,
            autocompact_enabled: true,
        }
    }

    /// Whether autocompact is on.
    pub fn autocompact_enabled(&self) -> bool {
        self.autocompact_enabled
    }

    /// Where `tokens` stands.
    pub fn check(&self, tokens: Tokens) -> LevelCheck {
        let level = if tokens >= self.blocking_at {
            Level::Blocking
        } else if self.autocompact_enabled && tokens >= self.autocompact_at {
            Level::AutoCompact
        } else if tokens >= self.warning_at {
            Level::Warning
        } else {
            Level::Normal
        };
        let limit = if self.autocompact_enabled {
            self.autocompact_at
        } else {
            self.blocking_at
        };
        let percent_left = if limit.0 == 0 {
            0.0
        } else {
            (limit - tokens).0 as f64 * 100.0 / limit.0 as f64
        };
        LevelCheck {
            level,
            percent_left,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_hundred_k_window() {
        let levels = WaterLevels::new(Tokens(200_000), Tokens(32_000));
        assert_eq!(
            (
                levels.effective,
                levels.autocompact_at,
                levels.blocking_at,
                levels.warning_at
            ),
            (
                Tokens(180_000),
                Tokens(167_000),
                Tokens(177_000),
                Tokens(147_000)
            )
        );
        let level = |tokens| levels.check(Tokens(tokens)).level;
        assert_eq!(level(146_999), Level::Normal);
        assert_eq!(level(166_999), Level::Warning);
        assert_eq!(level(167_000), Level::AutoCompact);
        assert_eq!(level(176_999), Level::AutoCompact);
        assert_eq!(level(177_000), Level::Blocking);
        assert_eq!(levels.check(Tokens(0)).percent_left, 100.0);
        assert_eq!(levels.check(Tokens(83_500)).percent_left, 50.0);
        assert_eq!(levels.check(Tokens(170_000)).percent_left, 0.0);
    }

    #[test]
    fn one_million_window() {
        let levels = WaterLevels::new(Tokens(1_000_000), Tokens(64_000));
        assert_eq!(
            (
                levels.effective,
                levels.autocompact_at,
                levels.blocking_at,
                levels.warning_at
            ),
            (
                Tokens(980_000),
                Tokens(967_000),
                Tokens(977_000),
                Tokens(947_000)
            )
        );
        assert_eq!(levels.check(Tokens(966_999)).level, Level::Warning);
        assert_eq!(levels.check(Tokens(967_000)).level, Level::AutoCompact);
        assert_eq!(levels.check(Tokens(977_000)).level, Level::Blocking);
    }

    #[test]
    fn small_output_cap_reserves_less() {
        let levels = WaterLevels::new(Tokens(200_000), Tokens(8_192));
        assert_eq!(levels.effective, Tokens(191_808));
        assert_eq!(levels.autocompact_at, Tokens(178_808));
    }

    #[test]
    fn overrides() {
        let levels = WaterLevels::with_overrides(
            Tokens(200_000),
            Tokens(32_000),
            LevelOverrides {
                autocompact_percent: Some(50),
                autocompact_disabled: false,
            },
        );
        assert_eq!(levels.autocompact_at, Tokens(90_000));
        assert_eq!(levels.check(Tokens(90_000)).level, Level::AutoCompact);
        let off = WaterLevels::with_overrides(
            Tokens(200_000),
            Tokens(32_000),
            LevelOverrides {
                autocompact_percent: None,
                autocompact_disabled: true,
            },
        );
        assert_eq!(off.check(Tokens(170_000)).level, Level::Warning);
        assert_eq!(off.check(Tokens(177_000)).level, Level::Blocking);
    }
}
