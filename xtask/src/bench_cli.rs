//! `cargo xtask bench-cli`: whole-process figures of the `agent` binary, as docs/benchmarks.md
//! reports them.
//!
//! Builds `agent` and `testkit` in release mode, then measures wall time from spawn to exit
//! (`std::time::Instant`, the process run directly) and, in separate runs, peak RSS with
//! `/usr/bin/time -v` (Debian package `time`; its own wall clock has 10 ms steps, too coarse):
//!
//! - `agent --version`, 30 runs after 3 warm-up runs;
//! - the scripted 4-turn session of `tests/fixtures/four-turn.json` (Read + Grep, Edit, Bash
//!   `cat`, final text) against `testkit serve` on loopback, 10 runs, each with a fresh server,
//!   a freshly reset git repository and an empty home folder (the cache folder, where the
//!   sandbox probe's answer is kept, shared by the runs), transcript fsyncs included.
//!   Every run must exit 0 and leave `greet.py` fixed, or the bench fails.
//!
//! - the time from spawn to the first byte of the first model request (a listener on
//!   loopback takes the connection and records when the first byte arrives; the agent is
//!   then killed), in a repository made for a slow start: 60,000 committed files all touched
//!   since (so `git status` reads every one: about 0.45 s on the reference machine) and 40
//!   memory files on the way from the root to the working directory. 10 runs with the
//!   start-up gathering done at once (the default, the CLI's `prefetch` module) and 10 with
//!   `AGENT_NO_PREFETCH=1` (one after the other, everything awaited).
//!
//! - the interactive terminal rendering 60 s of Markdown streamed at 100 tokens a second
//!   (`bench_render`): CPU share of one core and bytes written per token.
//!
//! Prints min / median / max wall time and the largest peak RSS next to the targets
//! (`--version` < 5 ms and < 10 MB; the session < 50 ms and < 20 MB).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail, ensure};

/// The `Maximum resident set size` line of `/usr/bin/time -v`, in kilobytes.
fn parse_peak_rss(stderr: &str) -> Result<u64> {
    for line in stderr.lines() {
        if let Some(value) = line
            .trim()
            .strip_prefix("Maximum resident set size (kbytes): ")
        {
            return value.parse().with_context(|| format!("peak RSS {value:?}"));
        }
    }
    bail!("no peak RSS in /usr/bin/time -v's output:\n{stderr}")
}

/// How to run the measured program.
struct Run<'a> {
    program: &'a Path,
    args: &'a [std::ffi::OsString],
    envs: &'a [(&'static str, PathBuf)],
}

impl Run<'_> {
    fn command(&self, wrapped: bool) -> Command {
        let mut command = if wrapped {
            let mut time = Command::new("/usr/bin/time");
            time.arg("-v").arg(self.program);
            time
        } else {
            Command::new(self.program)
        };
        command.args(self.args).stdin(Stdio::null());
        for (key, value) in self.envs {
            command.env(key, value);
        }
        command
    }

    fn check(&self, status: std::process::ExitStatus, stderr: &[u8]) -> Result<()> {
        ensure!(
            status.success(),
            "{} {} failed ({status}):\n{}",
            self.program.display(),
            self.args.join(std::ffi::OsStr::new(" ")).display(),
            String::from_utf8_lossy(stderr)
        );
        Ok(())
    }

    /// Wall time from spawn to exit, milliseconds.
    fn wall_ms(&self) -> Result<f64> {
        let started = Instant::now();
        let output = self
            .command(false)
            .output()
            .with_context(|| format!("running {}", self.program.display()))?;
        let elapsed = started.elapsed();
        self.check(output.status, &output.stderr)?;
        Ok(elapsed.as_secs_f64() * 1_000.0)
    }

    /// Peak RSS of one run, kilobytes.
    fn peak_rss_kb(&self) -> Result<u64> {
        let output = self
            .command(true)
            .output()
            .context("running /usr/bin/time (Debian package `time`)")?;
        self.check(output.status, &output.stderr)?;
        parse_peak_rss(&String::from_utf8_lossy(&output.stderr))
    }
}

/// A `testkit serve` child, killed on drop.
pub(crate) struct Serve {
    child: Child,
    pub(crate) url: String,
}

impl Serve {
    fn start(testkit: &Path, script: &Path) -> Result<Self> {
        Self::start_with(testkit, script, &[])
    }

    /// `testkit serve SCRIPT ARGS...` (`--requests LOG`, `--usage-from-request`).
    pub(crate) fn start_with(
        testkit: &Path,
        script: &Path,
        args: &[&std::ffi::OsStr],
    ) -> Result<Self> {
        let mut child = Command::new(testkit)
            .arg("serve")
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting testkit serve")?;
        let stdout = child.stdout.take().context("testkit's stdout")?;
        let mut url = String::new();
        BufReader::new(stdout)
            .read_line(&mut url)
            .context("reading testkit's URL")?;
        ensure!(url.starts_with("http://"), "testkit printed {url:?}");
        Ok(Self {
            child,
            url: url.trim().to_owned(),
        })
    }
}

impl Serve {
    /// Stops the server with SIGTERM (it writes its `--requests` and `--timeline` logs then)
    /// and waits for it.
    pub(crate) fn stop(&mut self) -> Result<()> {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pid = i32::try_from(self.child.id()).context("testkit's pid")?;
        kill(Pid::from_raw(pid), Signal::SIGTERM).context("stopping testkit")?;
        let status = self.child.wait().context("waiting for testkit")?;
        ensure!(status.success(), "testkit serve ended with {status}");
        Ok(())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@agent.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("git {}", args.join(" ")))?;
    ensure!(status.success(), "git {} failed", args.join(" "));
    Ok(())
}

/// min, median, max.
pub(crate) fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    (values[0], median, values[values.len() - 1])
}

/// Which figures `bench-cli` measures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Only {
    /// Everything.
    All,
    /// The interactive rendering alone (`--render`), of this `agent` binary when given
    /// (`--render --agent PATH`: an earlier build, for a ratio), else the working tree's.
    Render(Option<PathBuf>),
    /// The 1,000-turn session alone (`--long`).
    Long,
}

/// Runs the benchmark; `root` is the workspace root, `target` its target directory.
pub fn run(root: &Path, target: &Path, cargo: Command, only: Only) -> Result<()> {
    let (built, testkit) = build_tree(root, target, cargo)?;
    let agent = match &only {
        Only::Render(Some(other)) => other.clone(),
        _ => built,
    };
    let script = root.join("tests/fixtures/four-turn.json");

    let scratch = std::env::temp_dir().join(format!("agent-bench-cli-{}", std::process::id()));
    let result = (|| {
        if only == Only::All {
            measure_all(&agent, &testkit, &script, &scratch)?;
        }
        if matches!(only, Only::All | Only::Render(_)) {
            let figures = crate::bench_render::measure(&agent, &testkit, &scratch.join("render"))?;
            crate::bench_render::print(&figures);
        }
        if matches!(only, Only::All | Only::Long) {
            let figures = crate::bench_long::measure(&agent, &testkit, &scratch.join("long"))?;
            crate::bench_long::print(&figures, &target.join("bench-long.csv"))?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Builds the working tree's `agent` and `testkit` in release mode; returns their paths.
pub(crate) fn build_tree(root: &Path, target: &Path, cargo: Command) -> Result<(PathBuf, PathBuf)> {
    build_tree_in(root, target, cargo, true)
}

/// Builds the working tree's `agent` and `testkit`, in release mode or (quicker to build)
/// the dev profile; returns their paths.
pub(crate) fn build_tree_in(
    root: &Path,
    target: &Path,
    mut cargo: Command,
    release: bool,
) -> Result<(PathBuf, PathBuf)> {
    cargo.arg("build");
    if release {
        cargo.arg("--release");
    }
    let status = cargo
        .args(["-p", "agent", "-p", "testkit"])
        .current_dir(root)
        .status()
        .context("running cargo build")?;
    ensure!(status.success(), "cargo build failed");
    let profile = target.join(if release { "release" } else { "debug" });
    Ok((profile.join("agent"), profile.join("testkit")))
}

/// `bench-cli --ab COMMIT [--runs N]`: the 4-turn session by `commit`'s build and the
/// working tree's, interleaved, phase by phase ([`crate::bench_ab`]).
pub fn run_ab(root: &Path, target: &Path, cargo: Command, commit: &str, runs: usize) -> Result<()> {
    let earlier = crate::bench_ab::build_commit(root, target, commit)?;
    let (agent, testkit) = build_tree(root, target, cargo)?;
    let session = crate::bench_ab::Session::four_turn(root);
    let scratch = std::env::temp_dir().join(format!("agent-bench-ab-{}", std::process::id()));
    let result = crate::bench_ab::measure(
        [(commit, &earlier, &[]), ("working tree", &agent, &[])],
        &testkit,
        &session,
        &scratch,
        runs,
    );
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// `bench-cli --sandbox-ab [--runs N]`: four read-only shell commands in the default mode,
/// each in a sandbox of its own (`AGENT_SANDBOX_PERSISTENT=0`) against the persistent
/// sandbox, by the working tree's build, interleaved, phase by phase.
pub fn run_sandbox_ab(root: &Path, target: &Path, cargo: Command, runs: usize) -> Result<()> {
    let (agent, testkit) = build_tree(root, target, cargo)?;
    let session = crate::bench_ab::Session::read_only_bash(root);
    let scratch = std::env::temp_dir().join(format!("agent-bench-sbx-{}", std::process::id()));
    let result = crate::bench_ab::measure(
        [
            (
                "a sandbox per command",
                &agent,
                &[("AGENT_SANDBOX_PERSISTENT", "0")],
            ),
            ("persistent sandbox", &agent, &[]),
        ],
        &testkit,
        &session,
        &scratch,
        runs,
    );
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Milliseconds from spawning `agent` (in `dir`, with `home` and `envs`) to the first byte
/// of its first model request, which a loopback listener receives.
fn first_request_ms(agent: &Path, dir: &Path, home: &Path, envs: &[(&str, &str)]) -> Result<f64> {
    use std::io::Read as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a listener")?;
    let url = format!("http://{}", listener.local_addr()?);
    let mut command = Command::new(agent);
    command
        .args([
            "-p",
            "hello",
            "--output-format",
            "json",
            "--base-url",
            &url,
            "-C",
        ])
        .arg(dir)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("ANTHROPIC_API_KEY", "bench")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (key, value) in envs {
        command.env(key, value);
    }
    let started = Instant::now();
    let mut child = command.spawn().context("starting agent")?;
    let (mut stream, _) = listener.accept().context("waiting for the request")?;
    let mut byte = [0u8; 1];
    stream
        .read_exact(&mut byte)
        .context("reading the request")?;
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    Ok(elapsed.as_secs_f64() * 1_000.0)
}

/// A repository where starting is slow: `files` committed files touched since (so `git
/// status` reads each), and the memory files of 10 nested folders; returns the deepest
/// folder, where the agent starts.
fn slow_start_repo(root: &Path, files: usize) -> Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    for index in 0..files {
        let dir = root.join(format!("src/d{}", index / 300));
        if index % 300 == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        std::fs::write(dir.join(format!("f{index}.txt")), "x")?;
    }
    let mut deepest = root.to_path_buf();
    for level in 0..10 {
        if level > 0 {
            deepest = deepest.join(format!("level{level}"));
        }
        std::fs::create_dir_all(deepest.join(".claude"))?;
        for name in [
            "AGENTS.md",
            "CLAUDE.md",
            ".claude/CLAUDE.md",
            "CLAUDE.local.md",
        ] {
            std::fs::write(
                deepest.join(name),
                format!(
                    "Memory of level {level}: {}\n",
                    "keep the style. ".repeat(20)
                ),
            )?;
        }
    }
    git(root, &["init", "-q"])?;
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-qm", "init"])?;
    Ok(deepest)
}

/// Touches every file below `dir/src` (a new modification time: `git status` reads them).
fn touch_all(dir: &Path) -> Result<()> {
    let status = Command::new("find")
        .arg(dir.join("src"))
        .args(["-type", "f", "-exec", "touch", "{}", "+"])
        .status()
        .context("touching the files")?;
    ensure!(status.success(), "touching the files failed");
    Ok(())
}

fn measure_all(agent: &Path, testkit: &Path, script: &Path, scratch: &Path) -> Result<()> {
    // --version.
    let version = Run {
        program: agent,
        args: &["--version".into()],
        envs: &[],
    };
    for _ in 0..3 {
        version.wall_ms()?;
    }
    let mut version_walls = Vec::new();
    for _ in 0..30 {
        version_walls.push(version.wall_ms()?);
    }
    let version_rss = version.peak_rss_kb()?;

    // The 4-turn session.
    let repo = crate::bench_ab::session_repo(scratch)?;
    let mut session_walls = Vec::new();
    let mut session_rss = 0;
    for run in 0..13 {
        git(&repo, &["checkout", "-q", "--", "greet.py"])?;
        let home: PathBuf = scratch.join(format!("home-{run}"));
        std::fs::create_dir_all(&home)?;
        let server = Serve::start(testkit, script)?;
        let (args, envs) = (
            crate::bench_ab::session_args(&repo, &server.url),
            crate::bench_ab::session_env(&home, &scratch.join("cache")),
        );
        let session = Run {
            program: agent,
            args: &args,
            envs: &envs,
        };
        // Ten timed runs, then three under /usr/bin/time for the peak RSS.
        if run < 10 {
            session_walls.push(session.wall_ms()?);
        } else {
            session_rss = session_rss.max(session.peak_rss_kb()?);
        }
        let fixed = std::fs::read_to_string(repo.join("greet.py"))?;
        ensure!(
            fixed.contains("'hello'"),
            "run {run}: greet.py was not fixed:\n{fixed}"
        );
    }

    let row = |name: &str, walls: &mut [f64], rss_kb: u64, target: &str| {
        let (min, median, max) = spread(walls);
        println!(
            "| {name} | {} | {min:.1} / {median:.1} / {max:.1} ms | {:.1} MiB | {target} |",
            walls.len(),
            rss_kb as f64 / 1_024.0
        );
    };
    // Time to the first request, with and without the start-up gathering at once.
    let slow = scratch.join("slow");
    let start_dir = slow_start_repo(&slow, 60_000)?;
    let mut first = Vec::new();
    for (name, envs) in [
        ("at once (default)", &[][..]),
        (
            "one after the other (`AGENT_NO_PREFETCH=1`)",
            &[("AGENT_NO_PREFETCH", "1")][..],
        ),
    ] {
        let mut walls = Vec::new();
        for run in 0..11 {
            touch_all(&slow)?;
            let home = scratch.join(format!("first-{}-{run}", walls.len()));
            std::fs::create_dir_all(&home)?;
            let ms = first_request_ms(agent, &start_dir, &home, envs)?;
            // The first run warms the caches.
            if run > 0 {
                walls.push(ms);
            }
        }
        first.push((name, walls));
    }

    println!("| run | timed runs | wall min / median / max | peak RSS | target |");
    println!("|---|---:|---:|---:|---|");
    row(
        "`agent --version`",
        &mut version_walls,
        version_rss,
        "< 5 ms, < 10 MB",
    );
    row(
        "scripted 4-turn session (tests/fixtures/four-turn.json)",
        &mut session_walls,
        session_rss,
        "< 50 ms, < 20 MB",
    );
    println!();
    println!(
        "| start-up gathering | timed runs | spawn to first request byte, min / median / max |"
    );
    println!("|---|---:|---:|");
    for (name, mut walls) in first {
        let (min, median, max) = spread(&mut walls);
        println!(
            "| {name} | {} | {min:.1} / {median:.1} / {max:.1} ms |",
            walls.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_v_output_parses() {
        let text = "\tCommand being timed: \"agent --version\"\n\tElapsed (wall clock) time (h:mm:ss or m:ss): 0:00.03\n\tMaximum resident set size (kbytes): 4608\n";
        assert_eq!(parse_peak_rss(text).expect("parses"), 4_608);
        assert!(parse_peak_rss("nothing").is_err());
        assert_eq!(spread(&mut [3.0, 1.0, 2.0]), (1.0, 2.0, 3.0));
    }
}
