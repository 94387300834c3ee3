//! When to retry and how long to wait.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use http::HeaderMap;

/// Waits between attempts; injected so tests do not sleep.
pub trait Sleeper: Send + Sync {
    /// Waits `duration`.
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// Real waiting, with tokio's timer.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// A wait shared by every client that holds a clone (the sessions of one batch): when one
/// of them is rate limited (429) and told how long to wait, all of them wait that long
/// before their next request, instead of each meeting the limit in turn.
#[derive(Clone, Debug, Default)]
pub struct RateGate {
    not_before: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

impl RateGate {
    /// A gate nobody waits at yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds every client of the gate for `wait` from now (a longer hold already set
    /// stays).
    pub fn hold(&self, wait: Duration) {
        let until = std::time::Instant::now() + wait;
        let mut not_before = self
            .not_before
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if not_before.is_none_or(|earlier| earlier < until) {
            *not_before = Some(until);
        }
    }

    /// How long a request must still wait (zero when it may go now).
    pub fn remaining(&self) -> Duration {
        let not_before = *self
            .not_before
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        not_before.map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(std::time::Instant::now())
        })
    }
}

/// Exponential backoff for retry `attempt` (1-based): `base * 2^(attempt-1)`, capped, minus up to
/// 25% jitter.
pub fn backoff(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let exponent = attempt.saturating_sub(1).min(20);
    let delay = base.saturating_mul(1 << exponent).min(cap);
    let jitter = 1.0 - fastrand::f64() * 0.25;
    delay.mul_f64(jitter)
}

/// The wait the server asks for: `retry-after-ms` (milliseconds), then `retry-after` (seconds,
/// possibly fractional, or an HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    // A server's number may be anything: one too large for a Duration is "a very long
    // time" (the caller clamps it), never a panic.
    let seconds = |value: f64| {
        (value.is_finite() && value >= 0.0)
            .then(|| Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX))
    };
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok())
        && let Some(wait) = seconds(ms / 1000.0)
    {
        return Some(wait);
    }
    let value = header("retry-after")?;
    if let Ok(value) = value.parse::<f64>() {
        return seconds(value);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// `x-should-retry: true|false`, when present.
pub fn should_retry_header(headers: &HeaderMap) -> Option<bool> {
    match headers.get("x-should-retry")?.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn a_rate_gate_keeps_the_longest_hold() {
        let gate = RateGate::new();
        assert_eq!(gate.remaining(), Duration::ZERO);
        gate.hold(Duration::from_secs(30));
        gate.hold(Duration::from_secs(1));
        let other = gate.clone();
        assert!(
            other.remaining() > Duration::from_secs(25),
            "{:?}",
            other.remaining()
        );
    }

    #[test]
    fn absurd_retry_after_values_do_not_panic() {
        for (name, value) in [
            ("retry-after", "1e20"),
            ("retry-after-ms", "1e300"),
            ("retry-after", "-5"),
            ("retry-after", "NaN"),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(
                http::HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
            let wait = retry_after(&headers);
            assert!(
                wait.is_none() || wait == Some(Duration::MAX),
                "{name}: {value}: {wait:?}"
            );
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let base = Duration::from_millis(500);
        let cap = Duration::from_secs(32);
        for attempt in 1..=12 {
            let nominal = base.saturating_mul(1 << (attempt - 1)).min(cap);
            let delay = backoff(attempt, base, cap);
            assert!(
                delay <= nominal && delay >= nominal.mul_f64(0.75),
                "attempt {attempt}: {delay:?}"
            );
        }
    }

    #[test]
    fn retry_after_forms() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after", HeaderValue::from_static("1.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut dated = HeaderMap::new();
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        dated.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        let wait = retry_after(&dated).unwrap();
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        dated.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&dated), None);
    }
}
