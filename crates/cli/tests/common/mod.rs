//! What the end-to-end tests share: a temporary git repository with its own home folder, and
//! the `agent` command pointed at a testkit server.
// Test helpers may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;
use testkit::Server;

/// A temporary repository (`dir`) and home folder (`home`: sessions, settings, the
/// certificate), removed on drop.
pub struct Repo {
    pub dir: PathBuf,
    pub home: PathBuf,
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.home);
        // The folder holding both, if nothing else is in it.
        if let Some(base) = self.dir.parent() {
            let _ = std::fs::remove_dir(base);
        }
    }
}

/// A git repository with `greet.py` and `notes.txt`, committed.
pub fn repo(name: &str) -> Repo {
    let base = std::env::temp_dir().join(format!("agent-e2e-{name}-{}", std::process::id()));
    let dir = base.join("repo");
    let home = base.join("home");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(dir.join("greet.py"), "def greet():\n    return 'helo'\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "remember the milk\n").unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "init"]);
    Repo {
        dir: dir.canonicalize().unwrap(),
        home: base.join("home"),
    }
}

/// The `agent` binary run in `repo` against `server` (its certificate trusted), with the
/// test's own home, data and config folders so nothing touches the user's.
pub fn command(repo: &Repo, server: &Server) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    Launch::new(repo, server).apply(&mut command);
    command
}

/// Runs [`command`] with `extra` arguments to the end; its output.
pub async fn run(repo: &Repo, server: &Server, extra: &[&str]) -> Output {
    command(repo, server).args(extra).output().await.unwrap()
}

/// The JSON lines of a run's stdout (stream-json, or json's one object), each parsed; a line
/// that is not JSON fails the test naming it.
pub fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect()
}

/// What [`command`] gives the agent, for tests that start it another way (through a shell,
/// in another folder): its arguments and environment.
pub struct Launch {
    /// `--base-url ... --ca-cert ... -C DIR`.
    pub args: Vec<std::ffi::OsString>,
    /// Variables set (`Some`) or removed (`None`).
    pub env: Vec<(&'static str, Option<PathBuf>)>,
}

impl Launch {
    pub fn new(repo: &Repo, server: &Server) -> Self {
        let cert = repo.home.join("ca.pem");
        std::fs::write(&cert, server.cert_pem().unwrap()).unwrap();
        Self {
            args: vec![
                "--base-url".into(),
                server.base_url().into(),
                "--ca-cert".into(),
                cert.into(),
                "-C".into(),
                repo.dir.clone().into(),
            ],
            env: vec![
                ("HOME", Some(repo.home.clone())),
                ("XDG_DATA_HOME", Some(repo.home.join("data"))),
                ("XDG_CONFIG_HOME", Some(repo.home.join("config"))),
                ("ANTHROPIC_API_KEY", None),
                ("ANTHROPIC_AUTH_TOKEN", None),
                ("ANTHROPIC_BASE_URL", None),
                ("AGENT_TRUST", None),
                // The terminal is the test's: no environment tells what it supports.
                ("TERM_PROGRAM", None),
                ("SSH_TTY", None),
                ("SSH_CONNECTION", None),
                ("TERM", Some(PathBuf::from("xterm-256color"))),
                // Nor how it treats its rows on a resize (the resize tests say it).
                ("TMUX", None),
                ("XTERM_VERSION", None),
                ("AGENT_TERMINAL_REFLOW", None),
                // Background summaries would take scripted replies meant for the session;
                // the tests of summaries turn them back on.
                (
                    "AGENT_DISABLE_BACKGROUND_REQUESTS",
                    Some(PathBuf::from("1")),
                ),
            ],
        }
    }

    /// The same, run in `dir` instead of the repository.
    pub fn in_dir(mut self, dir: &std::path::Path) -> Self {
        if let Some(at) = self.args.iter().position(|arg| arg == "-C") {
            self.args[at + 1] = dir.as_os_str().to_owned();
        }
        self
    }

    /// Adds the arguments and the environment to `command`.
    pub fn apply(&self, command: &mut tokio::process::Command) {
        command.args(&self.args);
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
    }
}

/// A `sleep` command no other process on the machine runs: `sleep 30.<pid><tag>` (a
/// concurrent test run must not be mistaken for this one's child).
pub fn unique_sleep(seconds: u32, tag: u32) -> String {
    format!("sleep {seconds}.{}{tag}", std::process::id())
}

/// The live (not zombie) processes whose command line is exactly `command` split on spaces.
pub fn processes_running(command: &str) -> Vec<i32> {
    let wanted: Vec<u8> = command
        .split(' ')
        .flat_map(|arg| arg.bytes().chain([0]))
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            (cmdline == wanted && !zombie).then_some(pid)
        })
        .collect()
}

/// Waits (up to 10 s) until a process runs exactly `command`; returns its pid.
pub async fn wait_for_process(command: &str) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(pid) = processes_running(command).first() {
            return *pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "`{command}` never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The text (as JSON) of the tool_result for `id`, as the first request that has it sent it.
pub fn result_text(server: &Server, id: &str) -> String {
    result_block(server, id)["content"].to_string()
}

/// The whole tool_result block answering `id` in the requests `server` received.
pub fn result_block(server: &Server, id: &str) -> serde_json::Value {
    for request in server.requests() {
        for message in request.json()["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && block["tool_use_id"] == id {
                    return block.clone();
                }
            }
        }
    }
    panic!("no result for {id}")
}

/// The back ends that work here, by the name `AGENT_SANDBOX_BACKEND` takes.
pub fn sandbox_backends() -> Vec<&'static str> {
    use tools::sandbox::Backend;
    let in_ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
    let helper = std::path::Path::new(env!("CARGO_BIN_EXE_agent"));
    let mut found = Vec::new();
    for (name, backend) in [
        ("bwrap", Backend::detect(None)),
        ("landlock", Backend::Landlock(helper.to_path_buf())),
    ] {
        let works = match backend {
            Backend::Bubblewrap(_) => true,
            // The helper's own check that the kernel enforces Landlock.
            Backend::Landlock(_) => std::process::Command::new(helper)
                .args([tools::sandbox::HELPER_ARG, "probe"])
                .output()
                .is_ok_and(|output| output.status.success()),
            _ => false,
        };
        if works {
            found.push(name);
        } else if in_ci {
            panic!("CI needs the {name} sandbox back end");
        } else {
            eprintln!("NOTE: {name} sandbox tests skipped: it does not work here");
        }
    }
    found
}

/// `testkit`, built beside `agent` by `cargo test --workspace` (its own tests need it);
/// `None`, with a note naming `what` is skipped, when it is not built (in CI a failure).
pub fn testkit_binary(what: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_BIN_EXE_agent")).with_file_name("testkit");
    if path.is_file() {
        return Some(path);
    }
    assert!(
        !std::env::var("CI").is_ok_and(|ci| ci == "true"),
        "CI needs {} (cargo test --workspace builds it)",
        path.display()
    );
    eprintln!(
        "NOTE: {what} skipped: {} is not built (run cargo test --workspace)",
        path.display()
    );
    None
}

/// Asserts that `output`'s process succeeded, showing `context` (empty, or what the run was,
/// ending with `: `) and its stderr when it did not.
pub fn assert_success(output: &std::process::Output, context: &str) {
    assert!(
        output.status.success(),
        "{context}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The folder `.ci/run` installs `what` into (`$variable`, else `~/.cache/agent-ci/FOLDER`)
/// when every path of `present` is there; otherwise `None`, said on stderr, and under
/// `CI=true` a failure.
pub fn ci_install(what: &str, variable: &str, folder: &str, present: &[&str]) -> Option<PathBuf> {
    let dir = std::env::var_os(variable).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".cache/agent-ci").join(folder))
    })?;
    if present.iter().all(|path| dir.join(path).exists()) {
        return Some(dir);
    }
    assert!(
        !std::env::var("CI").is_ok_and(|ci| ci == "true"),
        "CI needs {what} in {} (.ci/run installs it)",
        dir.display()
    );
    eprintln!(
        "SKIPPED: {what} is not installed in {} (.ci/run installs it; {variable} points elsewhere)",
        dir.display()
    );
    None
}

/// Asserts that the request body `fork` is a fork of `main` (a summary sent from the cached
/// prefix): the same bytes exactly up to the end of `main`'s messages (model, `max_tokens`,
/// every message and breakpoint), then its own; `what` names it in the failure.
pub fn assert_forks(main: &[u8], fork: &[u8], what: &str) {
    let shared = main.iter().zip(fork).take_while(|(a, b)| a == b).count();
    let messages_end = String::from_utf8_lossy(main)
        .find(r#"],"system":"#)
        .unwrap();
    assert_eq!(shared, messages_end, "{what}");
}

/// `agent -p PROMPT --output-format json --permission-mode acceptEdits` in `repo`, the test's
/// own environment cleared of every variable in `cleared` and of Anthropic's, then `env`
/// set (a cloud's switch, endpoint and credentials): a run against a cloud's stand-in.
#[allow(dead_code)]
pub async fn run_on_cloud(
    repo: &Repo,
    cleared: &[&str],
    env: &[(&str, String)],
    prompt: &str,
) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent"));
    command
        .arg("-C")
        .arg(&repo.dir)
        .args(["-p", prompt, "--output-format", "json"])
        .args(["--permission-mode", "acceptEdits"])
        .env("HOME", &repo.home)
        .env("XDG_DATA_HOME", repo.home.join("data"))
        .env("XDG_CONFIG_HOME", repo.home.join("config"))
        .env("AGENT_DISABLE_BACKGROUND_REQUESTS", "1")
        .env("AGENT_MAX_RETRIES", "0");
    let anthropic = [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
    ];
    for name in anthropic.iter().chain(cleared) {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().await.unwrap()
}

/// A run's stdout and stderr, one after the other (an error may be in either).
#[allow(dead_code)]
pub fn all_output(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A run's one JSON result (`--output-format json`); a run without one fails the test with
/// its stderr.
#[allow(dead_code)]
pub fn json_result(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "no JSON result; stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
