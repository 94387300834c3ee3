//! `cargo xtask bench-cli --ab COMMIT [--runs N]`: the scripted 4-turn session
//! (`tests/fixtures/four-turn.json`) run by the `agent` of an earlier commit and by the
//! working tree's, interleaved (A B A B ...), with a per-phase breakdown of each run.
//!
//! The earlier commit is checked out as a detached git worktree under
//! `target/bench-ab/src-COMMIT` and built there in release mode (its own
//! `rust-toolchain.toml`, target folder `target/bench-ab/target`); the working tree's build is
//! the one `bench-cli` makes. Both talk to the working tree's `testkit serve` on loopback, in a
//! fresh git repository and an empty home folder each run; the cache folder
//! (`XDG_CACHE_HOME`, where the sandbox probe's answer is kept) is shared by the runs, as a
//! user's is between sessions. Every run must exit 0 and leave
//! `greet.py` fixed, or the bench fails.
//!
//! Each run is `/usr/bin/time -f %M agent ...`:
//!
//! - **wall**: spawn to exit as this harness sees it (`std::time::Instant`; includes the exec
//!   of `/usr/bin/time`, about 0.5 ms, the same for both builds);
//! - **CPU**: user + system time of the agent and every child it waited for (git, the
//!   sandbox, `cat`), from `getrusage(RUSAGE_CHILDREN)` before and after (microseconds);
//! - **peak RSS**: `%M`, the largest single process of the run (the kernel's `ru_maxrss` of
//!   the waited children).
//!
//! The phases come from the server's `--timeline` (the wall-clock time each model request's
//! head arrived) against the spawn and exit times here (same machine, same clock):
//!
//! - **start-up**: spawn to the first request's head (arguments, settings, memory files,
//!   the start-up gathering, the sandbox probe, the request's making);
//! - **turn N**: request N's head to request N+1's: the model's reply streamed (the script
//!   answers at once), its tools run, the transcript written, the next request made;
//! - **exit**: the last request's head to the process's exit (the final answer streamed,
//!   the result printed, the transcript closed, the runtime shut down).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

use anyhow::{Context as _, Result, bail, ensure};

use crate::bench_cli::{Serve, git, spread};

/// One measured run.
#[derive(Clone, Debug, Default)]
struct Figures {
    /// Spawn to exit, milliseconds.
    wall_ms: f64,
    /// User + system time of the whole run, milliseconds.
    cpu_ms: f64,
    /// Largest single process's peak RSS, kilobytes.
    peak_rss_kb: u64,
    /// Start-up, each turn between two requests, exit: milliseconds.
    phases_ms: Vec<f64>,
}

/// Builds `commit`'s `agent` (release) in a worktree under `target/bench-ab`; returns its path.
pub fn build_commit(root: &Path, target: &Path, commit: &str) -> Result<PathBuf> {
    let resolved = Command::new("git")
        .args(["rev-parse", "--verify", &format!("{commit}^{{commit}}")])
        .current_dir(root)
        .output()
        .context("running git rev-parse")?;
    ensure!(resolved.status.success(), "{commit}: not a commit here");
    let full = String::from_utf8_lossy(&resolved.stdout).trim().to_owned();
    let short = &full[..full.len().min(12)];
    let base = target.join("bench-ab");
    let source = base.join(format!("src-{short}"));
    if !source.join("Cargo.toml").exists() {
        std::fs::create_dir_all(&base)?;
        let worktree = source.to_string_lossy().into_owned();
        git(
            root,
            &["worktree", "add", "--detach", "--force", &worktree, &full],
        )?;
    }
    // The commit's own toolchain file decides the compiler: the variables the outer cargo
    // set (its toolchain, its target folder) are not passed on.
    let mut build = Command::new("cargo");
    for key in [
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTC",
        "CARGO_TARGET_DIR",
        "RUSTFLAGS",
    ] {
        build.env_remove(key);
    }
    let status = build
        .args(["build", "--release", "-p", "agent"])
        .env("CARGO_TARGET_DIR", base.join("target"))
        .current_dir(&source)
        .status()
        .context("running cargo build for the earlier commit")?;
    ensure!(status.success(), "building {commit} failed");
    Ok(base.join("target/release/agent"))
}

/// The scratch repository of the session: `greet.py` with its typo, `notes.txt`, committed.
pub(crate) fn session_repo(scratch: &Path) -> Result<PathBuf> {
    let repo = scratch.join("repo");
    std::fs::create_dir_all(&repo).with_context(|| format!("creating {}", repo.display()))?;
    std::fs::write(repo.join("greet.py"), "def greet():\n    return 'helo'\n")?;
    std::fs::write(repo.join("notes.txt"), "remember the milk\n")?;
    git(&repo, &["init", "-q"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-qm", "init"])?;
    Ok(repo.canonicalize()?)
}

fn unix_us(time: SystemTime) -> i128 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|since| since.as_micros() as i128)
        .unwrap_or_default()
}

/// The 4-turn session's arguments to `agent`, as every measurement of it passes them:
/// the prompt, the repository, the server, acceptEdits with `Bash(cat:*)` allowed, json out.
pub(crate) fn session_args(repo: &Path, url: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["-p", "fix the greeting", "-C"].map(Into::into).into();
    args.push(repo.into());
    args.extend(
        [
            "--base-url",
            url,
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(cat:*)",
            "--output-format",
            "json",
        ]
        .map(Into::into),
    );
    args
}

/// The session's environment: an empty `home` (its data and config folders in it) and the
/// machine's `cache` folder.
pub(crate) fn session_env(home: &Path, cache: &Path) -> [(&'static str, PathBuf); 4] {
    [
        ("HOME", home.to_path_buf()),
        ("XDG_DATA_HOME", home.join("data")),
        ("XDG_CONFIG_HOME", home.join("config")),
        ("XDG_CACHE_HOME", cache.to_path_buf()),
    ]
}

/// User + system time of every waited-for child of this process so far (`getrusage`,
/// microseconds: `/usr/bin/time`'s `%U %S` count in 10 ms steps).
fn children_cpu() -> Result<std::time::Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).context("getrusage")?;
    let micros = |time: nix::sys::time::TimeVal| {
        std::time::Duration::from_secs(time.tv_sec() as u64)
            + std::time::Duration::from_micros(time.tv_usec() as u64)
    };
    Ok(micros(usage.user_time()) + micros(usage.system_time()))
}

/// A session both builds run: its script, arguments and phases.
pub(crate) struct Session {
    /// What the table's first line calls it.
    pub title: &'static str,
    /// The scripted model's replies.
    pub script: PathBuf,
    /// `agent`'s arguments for the repository and the server's URL.
    pub args: fn(&Path, &str) -> Vec<OsString>,
    /// The phases' names: start-up, each turn, the last to exit (one more than requests).
    pub phases: &'static [&'static str],
    /// Whether a run changes `greet.py` (the 4-turn session fixes it).
    pub fixes_greeting: bool,
}

impl Session {
    /// The 4-turn session (`tests/fixtures/four-turn.json`).
    pub(crate) fn four_turn(root: &Path) -> Self {
        Self {
            title: "4-turn session",
            script: root.join("tests/fixtures/four-turn.json"),
            args: session_args,
            phases: &[
                "start-up to request 1",
                "turn 1 (Read, Grep)",
                "turn 2 (Edit)",
                "turn 3 (Bash)",
                "turn 4 to exit",
            ],
            fixes_greeting: true,
        }
    }

    /// Four read-only shell commands in the default mode (`tests/fixtures/read-only-bash.json`):
    /// each runs in the read-only sandbox without a question.
    pub(crate) fn read_only_bash(root: &Path) -> Self {
        Self {
            title: "read-only session (4 Bash calls, default mode)",
            script: root.join("tests/fixtures/read-only-bash.json"),
            args: |repo, url| {
                let mut args: Vec<OsString> = ["-p", "look", "-C"].map(Into::into).into();
                args.push(repo.into());
                args.extend(["--base-url", url, "--output-format", "json"].map(Into::into));
                args
            },
            phases: &[
                "start-up to request 1",
                "turn 1 (Bash cat)",
                "turn 2 (Bash ls)",
                "turn 3 (Bash grep)",
                "turn 4 (Bash wc)",
                "turn 5 to exit",
            ],
            fixes_greeting: false,
        }
    }
}

/// One build in an A/B: its name in the table, its `agent`, extra environment.
pub(crate) type Build<'a> = (&'a str, &'a Path, &'a [(&'a str, &'a str)]);

/// One run of `session` by `build`, with a fresh server, home and `greet.py`.
fn one_run(
    (_, agent, env): Build<'_>,
    testkit: &Path,
    session: &Session,
    repo: &Path,
    (home, cache): (&Path, &Path),
) -> Result<Figures> {
    let script = session.script.as_path();
    git(repo, &["checkout", "-q", "--", "greet.py"])?;
    std::fs::create_dir_all(home)?;
    let timeline = home.join("timeline.jsonl");
    let times = home.join("time.txt");
    let mut server = Serve::start_with(
        testkit,
        script,
        &["--timeline".as_ref(), timeline.as_os_str()],
    )?;
    let mut command = Command::new("/usr/bin/time");
    command
        .args(["-f", "%M", "-o"])
        .arg(&times)
        .arg(agent)
        .args((session.args)(repo, &server.url))
        .envs(session_env(home, cache))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let before = children_cpu()?;
    let spawned_at = SystemTime::now();
    let started = Instant::now();
    let output = command
        .output()
        .context("running /usr/bin/time (Debian package `time`)")?;
    let wall = started.elapsed();
    let cpu = children_cpu()? - before;
    let exited_at = unix_us(spawned_at) + wall.as_micros() as i128;
    ensure!(
        output.status.success(),
        "{} failed ({}):\n{}",
        agent.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let fixed = std::fs::read_to_string(repo.join("greet.py"))?;
    ensure!(
        fixed.contains("'hello'") == session.fixes_greeting,
        "greet.py is not as the session leaves it:\n{fixed}"
    );
    server.stop()?;

    let text = std::fs::read_to_string(&times)?;
    let Ok(rss) = text.trim().parse::<u64>() else {
        bail!("/usr/bin/time wrote {text:?}");
    };
    let mut marks = vec![unix_us(spawned_at)];
    for line in std::fs::read_to_string(&timeline)?.lines() {
        let value: serde_json::Value = serde_json::from_str(line)?;
        let arrived = value["arrived_unix_us"]
            .as_i64()
            .with_context(|| format!("timeline line {line:?}"))?;
        marks.push(i128::from(arrived));
    }
    ensure!(
        marks.len() == session.phases.len(),
        "expected {} model requests, the server saw {}",
        session.phases.len() - 1,
        marks.len() - 1
    );
    marks.push(exited_at);
    Ok(Figures {
        wall_ms: wall.as_secs_f64() * 1_000.0,
        cpu_ms: cpu.as_secs_f64() * 1_000.0,
        peak_rss_kb: rss,
        phases_ms: marks
            .windows(2)
            .map(|pair| (pair[1] - pair[0]) as f64 / 1_000.0)
            .collect(),
    })
}

/// The medians of one build's runs: wall, CPU, peak RSS (MiB) and each phase.
fn medians(runs: &[Figures]) -> (f64, f64, f64, Vec<f64>) {
    let median = |values: Vec<f64>| {
        let mut values = values;
        spread(&mut values).1
    };
    let phases = (0..runs[0].phases_ms.len())
        .map(|phase| median(runs.iter().map(|run| run.phases_ms[phase]).collect()))
        .collect();
    (
        median(runs.iter().map(|run| run.wall_ms).collect()),
        median(runs.iter().map(|run| run.cpu_ms).collect()),
        median(
            runs.iter()
                .map(|run| run.peak_rss_kb as f64 / 1_024.0)
                .collect(),
        ),
        phases,
    )
}

/// Runs `session` by both builds `runs` times each, interleaved, and prints the table
/// (ratio: the second build over the first).
pub(crate) fn measure(
    builds: [Build<'_>; 2],
    testkit: &Path,
    session: &Session,
    scratch: &Path,
    runs: usize,
) -> Result<()> {
    let repo = session_repo(scratch)?;
    let mut figures: [Vec<Figures>; 2] = Default::default();
    // One warm-up run each, not counted.
    for round in 0..=runs {
        for (index, build) in builds.iter().enumerate() {
            let home = scratch.join(format!("home-{round}-{index}"));
            let cache = scratch.join("cache");
            let run = one_run(*build, testkit, session, &repo, (&home, &cache))?;
            if round > 0 {
                figures[index].push(run);
            }
        }
    }
    let [a, b] = [medians(&figures[0]), medians(&figures[1])];
    let [(first, ..), (second, ..)] = builds;
    println!(
        "{}, {runs} runs each, interleaved; medians (ratio: {second} / {first})",
        session.title
    );
    println!();
    println!("| | {first} | {second} | ratio |");
    println!("|---|---:|---:|---:|");
    let row = |name: &str, a: f64, b: f64, unit: &str| {
        println!("| {name} | {a:.1} {unit} | {b:.1} {unit} | {:.2}x |", b / a);
    };
    row("wall", a.0, b.0, "ms");
    row("CPU (user + sys)", a.1, b.1, "ms");
    row("peak RSS", a.2, b.2, "MiB");
    for (phase, name) in session.phases.iter().enumerate() {
        row(name, a.3[phase], b.3[phase], "ms");
    }
    Ok(())
}
