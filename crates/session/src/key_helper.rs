//! Claude Code's `apiKeyHelper`: a command whose output is the API key, run when a request
//! needs a key and the last one is older than the TTL (`CLAUDE_CODE_API_KEY_HELPER_TTL_MS`,
//! default 5 minutes: Claude Code 2.1.197's `pMd=300000`), or the server refused it (401).
//! The command runs as a hook does ([`crate::hooks::process`]: `bash -c` in the working
//! directory with the allow-listed environment, in a process group of its own that dies with
//! the agent), for at most 600 s, with nothing on stdin; its trimmed stdout is the key. When a
//! refresh fails and an earlier key exists, that key is used again (Claude Code's rule) and
//! the failure is told.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::hooks::{HookEnv, process};

/// The variable that sets how long a key is used before the command runs again, in
/// milliseconds, as Claude Code reads it.
pub const TTL_VARIABLE: &str = "CLAUDE_CODE_API_KEY_HELPER_TTL_MS";

/// How long a key is used when [`TTL_VARIABLE`] is not set (2.1.197: 300 000 ms).
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// How long the command may take (2.1.197: 600 000 ms).
pub const TIMEOUT: Duration = Duration::from_secs(600);

/// An `apiKeyHelper` command as a [`provider::KeySource`].
pub struct KeyHelper {
    command: String,
    env: HookEnv,
    ttl: Duration,
    /// The last key and when it was had.
    cached: Mutex<Option<(String, Instant)>>,
    /// One run at a time: requests that need a key meanwhile wait for its answer.
    running: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for KeyHelper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyHelper")
            .field("command", &self.command)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl KeyHelper {
    /// `command` run with `env`'s folder, environment and guard, its key kept for `ttl`.
    pub fn new(command: String, env: HookEnv, ttl: Duration) -> Self {
        Self {
            command,
            env,
            ttl,
            cached: Mutex::new(None),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// The TTL `value` of [`TTL_VARIABLE`] gives: a whole number of milliseconds.
    ///
    /// # Errors
    ///
    /// A line naming the variable and the value when it is not one.
    pub fn ttl(value: Option<&str>) -> Result<Duration, String> {
        match value.map(str::trim) {
            None | Some("") => Ok(DEFAULT_TTL),
            Some(value) => value
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| {
                    format!("{TTL_VARIABLE} must be a number of milliseconds, got {value:?}")
                }),
        }
    }

    fn fresh(&self) -> Option<String> {
        let cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        cached
            .as_ref()
            .filter(|(_, at)| at.elapsed() < self.ttl)
            .map(|(key, _)| key.clone())
    }

    /// Runs the command: its trimmed stdout, or why there is none.
    async fn run(&self) -> Result<String, String> {
        let exit = process::run(
            &self.env,
            &process::Launch::shell(&self.command),
            TIMEOUT,
            None,
        )
        .await?;
        match exit.code {
            Some(0) if exit.stdout.is_empty() => Err("it printed nothing".to_owned()),
            // The first line: a key never holds a line break, and a header must not.
            Some(0) => {
                let key = exit.stdout.lines().next().unwrap_or_default().trim();
                // A key is sent as a header: one that cannot be is said, not dropped.
                if key.chars().any(|c| c.is_control() || !c.is_ascii()) {
                    return Err(
                        "it printed something that is not a key (control or non-ASCII characters)"
                            .to_owned(),
                    );
                }
                Ok(key.to_owned())
            }
            code => {
                let status = code.map_or_else(
                    || "killed by a signal".to_owned(),
                    |code| format!("exited {code}"),
                );
                Err(if exit.stderr.is_empty() {
                    status
                } else {
                    format!("{status}: {}", render::printable(&exit.stderr, false))
                })
            }
        }
    }
}

impl provider::KeySource for KeyHelper {
    fn key(&self) -> provider::KeyFuture<'_> {
        Box::pin(async move {
            if let Some(key) = self.fresh() {
                return Ok(key);
            }
            let _running = self.running.lock().await;
            // Another request may have run it while this one waited.
            if let Some(key) = self.fresh() {
                return Ok(key);
            }
            match self.run().await {
                Ok(key) => {
                    *self.cached.lock().unwrap_or_else(PoisonError::into_inner) =
                        Some((key.clone(), Instant::now()));
                    Ok(key)
                }
                Err(error) => {
                    let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
                    match cached.as_mut() {
                        Some((key, at)) => {
                            self.env.notices.say(&format!(
                                "apiKeyHelper failed: {error}; the previous key is used"
                            ));
                            *at = Instant::now();
                            Ok(key.clone())
                        }
                        None => Err(format!("apiKeyHelper failed: {error}")),
                    }
                }
            }
        })
    }

    fn invalidate(&self) {
        *self.cached.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use provider::KeySource as _;

    use super::*;

    fn helper(dir: &std::path::Path, command: &str, ttl: Duration) -> KeyHelper {
        KeyHelper::new(
            command.to_owned(),
            crate::hooks::process::tests::env(dir),
            ttl,
        )
    }

    #[tokio::test]
    async fn the_key_is_kept_for_its_ttl_and_fetched_again_when_refused() {
        let dir = std::env::temp_dir().join(format!("agent-key-helper-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Each run prints the next key: key-1, key-2, ...
        let counting = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo \"  key-$n  \"";
        let keys = helper(&dir, counting, Duration::from_secs(60));
        assert_eq!(keys.key().await.unwrap(), "key-1");
        assert_eq!(keys.key().await.unwrap(), "key-1", "within the TTL");
        keys.invalidate();
        assert_eq!(keys.key().await.unwrap(), "key-2", "after a 401");
        let short = helper(&dir, counting, Duration::ZERO);
        assert_eq!(short.key().await.unwrap(), "key-3");
        assert_eq!(short.key().await.unwrap(), "key-4", "past the TTL");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_failing_helper_says_why_and_an_earlier_key_stands_in() {
        let dir = std::env::temp_dir();
        let failing = helper(&dir, "echo 'no vault' >&2; exit 3", Duration::ZERO);
        assert_eq!(
            failing.key().await.unwrap_err(),
            "apiKeyHelper failed: exited 3: no vault"
        );
        let control = helper(&dir, "printf 'sk-\\001bad\\n'", Duration::ZERO);
        assert_eq!(
            control.key().await.unwrap_err(),
            "apiKeyHelper failed: it printed something that is not a key (control or non-ASCII characters)"
        );
        let empty = helper(&dir, "true", Duration::ZERO);
        assert_eq!(
            empty.key().await.unwrap_err(),
            "apiKeyHelper failed: it printed nothing"
        );
        let flaky = helper(
            &dir,
            "if [ -e \"$FLAG\" ]; then exit 1; fi; echo k",
            Duration::ZERO,
        );
        assert_eq!(flaky.key().await.unwrap(), "k");
        let flag = dir.join(format!("agent-key-flag-{}", std::process::id()));
        std::fs::write(&flag, "").unwrap();
        let flaky = KeyHelper {
            command: format!("if [ -e {} ]; then exit 1; fi; echo k", flag.display()),
            ..flaky
        };
        assert_eq!(flaky.key().await.unwrap(), "k", "the earlier key stands in");
        let _ = std::fs::remove_file(&flag);
        assert_eq!(KeyHelper::ttl(None), Ok(DEFAULT_TTL));
        assert_eq!(
            KeyHelper::ttl(Some("1500")),
            Ok(Duration::from_millis(1500))
        );
        assert!(
            KeyHelper::ttl(Some("soon"))
                .unwrap_err()
                .contains(TTL_VARIABLE)
        );
    }
}
