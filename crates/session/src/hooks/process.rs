//! Running one command hook: `bash -c COMMAND` in the working directory with the event on
//! stdin, through the MCP guard (`mcp::guard`, the agent binary re-executed) in a session
//! and process group of its own, with no controlling terminal, dying with the agent however
//! it ends. The first 1 MiB of each of stdout and stderr is kept. The hook is done when its
//! process exits; what it left running in the background is killed then (as the Bash tool
//! does). On timeout or cancellation the whole process group is killed.

use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use super::HookEnv;

/// How much of a hook's stdout and of its stderr is kept: 1 MiB each.
pub const OUTPUT_CAP: usize = 1 << 20;

/// How long the pipes may stay open after the hook exited (a background child holding them).
const PIPE_GRACE: Duration = Duration::from_millis(250);

/// How a command hook ended.
#[derive(Debug, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its stdout, trimmed, at most [`OUTPUT_CAP`] bytes.
    pub stdout: String,
    /// Its stderr, trimmed, at most [`OUTPUT_CAP`] bytes.
    pub stderr: String,
}

/// Kills a process group when dropped, unless disarmed: a hook that times out or whose
/// caller is cancelled leaves nothing running. The group is the hook's pid; the process
/// itself is killed first (the guard may not have made its group yet, and then dies before
/// it starts anything).
struct GroupKill(Option<i32>);

impl GroupKill {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let pid = nix::unistd::Pid::from_raw(group);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

/// Reads `pipe` to its end, keeping the first [`OUTPUT_CAP`] bytes in `kept`.
async fn read_capped(mut pipe: impl AsyncRead + Unpin, kept: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..read.min(room)]);
            }
        }
    }
}

/// A hook's sandbox placeholders, released off the runtime's threads whichever way the hook
/// ends ([`tools::release_sandbox`]).
struct Released(Option<tools::sandbox::PlaceholderGuard>);

impl Drop for Released {
    fn drop(&mut self) {
        tools::release_sandbox(self.0.take(), None);
    }
}

/// Runs one hook (`launch`) with `input` on stdin (`None`: nothing, stdin is closed). `Err`
/// says what went wrong, for a line after the hook's command: it could not start, or it
/// timed out (and was killed).
pub async fn run(
    env: &HookEnv,
    launch: &Launch,
    timeout: Duration,
    input: Option<&Value>,
) -> Result<Exit, String> {
    // `placeholders` lives until the hook is done (the sandbox's placeholders).
    let (line, placeholders) =
        command_line(env, launch).map_err(|error| format!("could not start: {error}"))?;
    let mut placeholders = Released(placeholders);
    let child = tokio::process::Command::from(line)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = child.map_err(|error| format!("could not start: {error}"))?;
    let mut group = GroupKill(child.id().and_then(|pid| i32::try_from(pid).ok()));
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    if let Some(pipe) = child.stdout.take() {
        readers.push(tokio::spawn(read_capped(pipe, Arc::clone(&stdout))));
    }
    if let Some(pipe) = child.stderr.take() {
        readers.push(tokio::spawn(read_capped(pipe, Arc::clone(&stderr))));
    }
    // Writing the event counts against the timeout too, but does not hold the hook up: a
    // hook that never reads its stdin is done when it exits.
    let feed = child.stdin.take().map(|mut stdin| {
        let payload = input.map(Value::to_string).unwrap_or_default();
        tokio::spawn(async move {
            let _ = stdin.write_all(payload.as_bytes()).await;
        })
    });
    let status = tokio::time::timeout(timeout, child.wait()).await;
    if let Some(feed) = feed {
        feed.abort();
    }
    let status = match status {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => return Err(format!("failed: {error}")),
        // `group` kills the hook and everything it started on the way out, `placeholders`
        // what it left in its sandbox.
        Err(_) => {
            if let Some(guard) = placeholders.0.as_mut() {
                guard.kill_sandbox();
            }
            return Err(format!("timed out after {}", seconds(timeout)));
        }
    };
    // It exited: the guard has ended what it left in the background (without a guard, as
    // in unit tests, that goes on).
    group.disarm();
    let _ = tokio::time::timeout(PIPE_GRACE, async {
        for reader in &mut readers {
            let _ = reader.await;
        }
    })
    .await;
    for reader in &readers {
        reader.abort();
    }
    let text = |kept: &Arc<Mutex<Vec<u8>>>| {
        String::from_utf8_lossy(&kept.lock().unwrap_or_else(PoisonError::into_inner))
            .trim()
            .to_owned()
    };
    Ok(Exit {
        code: status.code(),
        stdout: text(&stdout),
        stderr: text(&stderr),
    })
}

/// `1.5 s`, `600 s`.
fn seconds(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(1000) {
        format!("{} s", millis / 1000)
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// What a hook runs: a shell command, or (Claude Code's exec form) a program and its
/// arguments, with no shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The shell command, or the program when `args` is given.
    pub command: String,
    /// The program's arguments: `Some` runs `command` directly, never through a shell.
    pub args: Option<Vec<String>>,
    /// `CLAUDE_ENV_FILE` for it (SessionStart hooks): where its `export` lines go.
    pub env_file: Option<std::path::PathBuf>,
}

impl Launch {
    /// A shell command.
    pub fn shell(command: &str) -> Self {
        Self {
            command: command.to_owned(),
            args: None,
            env_file: None,
        }
    }
}

/// The command line of a hook: `bash -c COMMAND` (bash found outside the workspace), or the
/// exec form's program (a name found outside the workspace, a relative path taken from the
/// working directory) with its arguments; through the guard when there is one (a session
/// and process group of its own, dying with the agent), in the working directory, with the
/// allow-listed environment, settings' `env` and `CLAUDE_PROJECT_DIR`.
pub(super) fn command_line(
    env: &HookEnv,
    launch: &Launch,
) -> Result<
    (
        std::process::Command,
        Option<tools::sandbox::PlaceholderGuard>,
    ),
    String,
> {
    let (program, args): (std::path::PathBuf, Vec<std::ffi::OsString>) = match &launch.args {
        None => (
            tools::sandbox::env::resolve_program("bash").map_err(|error| error.to_string())?,
            vec!["-c".into(), launch.command.clone().into()],
        ),
        Some(args) => {
            let program = if launch.command.contains('/') {
                env.cwd.join(&launch.command)
            } else {
                tools::sandbox::env::resolve_program(&launch.command)
                    .map_err(|error| error.to_string())?
            };
            (program, args.iter().map(Into::into).collect())
        }
    };
    if env.confined {
        let readable = hook_scripts(launch);
        return confined_line(env, &program, &args, &readable)
            .map(|(line, guard)| (line, Some(guard)));
    }
    let mut line = match &env.guard {
        Some(guard) => {
            // Not in a group of its own: the guard's `setsid` makes its session and group.
            let mut line = std::process::Command::new(guard);
            line.arg(mcp::guard::GUARD_ARG)
                .arg(mcp::guard::NEW_SESSION_FLAG)
                .arg(std::process::id().to_string())
                .arg(&program);
            line
        }
        None => {
            let mut line = std::process::Command::new(&program);
            std::os::unix::process::CommandExt::process_group(&mut line, 0);
            line
        }
    };
    line.args(args)
        .current_dir(&env.cwd)
        .env("CLAUDE_PROJECT_DIR", &env.cwd);
    if let Some(file) = &launch.env_file {
        line.env("CLAUDE_ENV_FILE", file);
    }
    tools::sandbox::env::reset(
        &mut line,
        tools::sandbox::env::Confinement::Unsandboxed,
        &env.env,
    );
    Ok((line, None))
}

/// What a confined hook must read besides the sandbox's usual places: the folders where
/// hook scripts live by convention (`~/.claude/hooks`, `~/.config/agent/hooks`), and the
/// script a command names by its absolute path (`/home/u/bin/check.py ARGS`, or the exec
/// form's program).
fn hook_scripts(launch: &Launch) -> Vec<std::path::PathBuf> {
    let mut readable: Vec<std::path::PathBuf> = [
        crate::claude_code::user_dir().map(|dir| dir.join("hooks")),
        dirs::config_dir().map(|dir| dir.join("agent").join("hooks")),
    ]
    .into_iter()
    .flatten()
    .filter(|dir| dir.is_dir())
    .collect();
    let named = launch
        .command
        .split_whitespace()
        .next()
        .map(|word| word.trim_matches(['"', '\'']))
        .map(std::path::PathBuf::from)
        .filter(|path| path.is_absolute() && path.is_file());
    readable.extend(named);
    readable
}

/// The command line of a hook in a folder the agent does not trust ([`HookEnv::confined`]):
/// `program` inside the session's sandbox (bubblewrap's `--die-with-parent` and PID
/// namespace, or the Landlock helper's parent-death signal, tie it to the agent's life), in a
/// process group of its own, with the sandbox's environment. It gets no `CLAUDE_ENV_FILE`:
/// what it would write there runs before the model's commands.
fn confined_line(
    env: &HookEnv,
    program: &std::path::Path,
    args: &[std::ffi::OsString],
    readable: &[std::path::PathBuf],
) -> Result<(std::process::Command, tools::sandbox::PlaceholderGuard), String> {
    let Some(gate) = env.gate.get() else {
        return Err("the folder is not trusted and the session's sandbox is not ready".into());
    };
    let prepared = gate
        .confined_command(program.as_os_str(), args, &env.cwd, readable)
        .map_err(|error| {
            format!("the folder is not trusted, so it runs only in the sandbox, and {error}")
        })?;
    let mut line = prepared.command;
    std::os::unix::process::CommandExt::process_group(&mut line, 0);
    line.env("CLAUDE_PROJECT_DIR", &env.cwd);
    tools::sandbox::env::reset(
        &mut line,
        tools::sandbox::env::Confinement::Sandboxed,
        &env.env,
    );
    Ok((line, prepared.guard))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;

    pub(crate) fn env(dir: &Path) -> HookEnv {
        HookEnv {
            notices: crate::Notices::default(),
            session: Arc::new(Mutex::new(("s".into(), dir.join("t.jsonl")))),
            cwd: dir.to_path_buf(),
            permission_mode: "default".into(),
            gate: Arc::default(),
            env: vec![("HOOK_GREETING".into(), "hi".into())],
            guard: None,
            http: None,
            model: Arc::default(),
            agent: Arc::default(),
            env_file: None,
            mcp: Arc::default(),
            http_policy: crate::settings::HttpHookPolicy::default(),
            confined: false,
            turn: Arc::default(),
            watch: Arc::default(),
            wake: Arc::default(),
            waker: Arc::default(),
            host: Arc::default(),
        }
    }

    #[tokio::test]
    async fn a_hook_is_done_when_it_exits_and_its_output_is_capped() {
        let dir = std::env::temp_dir();
        let env = env(&dir);
        // A background child keeps the pipes open for 20 s: the answer comes at once anyway.
        let started = std::time::Instant::now();
        let exit = run(
            &env,
            &Launch::shell(
                "(sleep 20 &) ; echo \"no $HOOK_GREETING in $CLAUDE_PROJECT_DIR\" >&2; exit 2",
            ),
            Duration::from_secs(10),
            Some(&json!({})),
        )
        .await
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            exit,
            Exit {
                code: Some(2),
                stdout: String::new(),
                stderr: format!("no hi in {}", dir.display()),
            }
        );
        // Endless output: the first MiB is kept, the hook is stopped by its timeout.
        assert_eq!(
            run(
                &env,
                &Launch::shell("yes"),
                Duration::from_secs(1),
                Some(&json!({}))
            )
            .await,
            Err("timed out after 1 s".to_owned())
        );
        let exit = run(
            &env,
            &Launch::shell("head -c 3000000 /dev/zero | tr '\\0' x >&2; exit 2"),
            Duration::from_secs(10),
            Some(&json!({})),
        )
        .await
        .unwrap();
        assert_eq!(exit.stderr.len(), OUTPUT_CAP);
        // The event arrives on stdin.
        let exit = run(
            &env,
            &Launch::shell("cat"),
            Duration::from_secs(10),
            Some(&json!({"a": 1})),
        )
        .await
        .unwrap();
        assert_eq!(exit.stdout, r#"{"a":1}"#);
    }

    #[tokio::test]
    async fn a_cancelled_hook_leaves_no_process() {
        let dir = std::env::temp_dir();
        let env = env(&dir);
        let marker = format!("sleep 97.{}", std::process::id());
        let command = format!("{marker}; true");
        let event = json!({});
        let launch = Launch::shell(&command);
        let running = run(&env, &launch, Duration::from_secs(60), Some(&event));
        // Dropped after 300 ms, as a cancelled turn drops it.
        let _ = tokio::time::timeout(Duration::from_millis(300), running).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let alive = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                String::from_utf8_lossy(&cmdline).replace('\0', " ").trim() == marker
            })
        });
        assert!(!alive, "the hook's child survived");
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(seconds(Duration::from_secs(600)), "600 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
    }
}
