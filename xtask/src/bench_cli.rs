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
//!   a freshly reset git repository and an empty home folder, transcript fsyncs included.
//!   Every run must exit 0 and leave `greet.py` fixed, or the bench fails.
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
    args: &'a [&'a str],
    envs: &'a [(&'a str, &'a Path)],
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
            self.args.join(" "),
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

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
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
fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    (values[0], median, values[values.len() - 1])
}

/// Runs the benchmark; `root` is the workspace root, `target` its target directory.
pub fn run(root: &Path, target: &Path, mut cargo: Command) -> Result<()> {
    let status = cargo
        .args(["build", "--release", "-p", "agent", "-p", "testkit"])
        .current_dir(root)
        .status()
        .context("running cargo build")?;
    ensure!(status.success(), "cargo build --release failed");
    let agent = target.join("release/agent");
    let testkit = target.join("release/testkit");
    let script = root.join("tests/fixtures/four-turn.json");

    let scratch = std::env::temp_dir().join(format!("agent-bench-cli-{}", std::process::id()));
    let result = measure_all(&agent, &testkit, &script, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn measure_all(agent: &Path, testkit: &Path, script: &Path, scratch: &Path) -> Result<()> {
    // --version.
    let version = Run {
        program: agent,
        args: &["--version"],
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
    let repo = scratch.join("repo");
    std::fs::create_dir_all(&repo).with_context(|| format!("creating {}", repo.display()))?;
    std::fs::write(repo.join("greet.py"), "def greet():\n    return 'helo'\n")?;
    std::fs::write(repo.join("notes.txt"), "remember the milk\n")?;
    git(&repo, &["init", "-q"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-qm", "init"])?;
    let repo = repo.canonicalize()?;
    let repo_arg = repo.to_string_lossy().into_owned();
    let mut session_walls = Vec::new();
    let mut session_rss = 0;
    for run in 0..13 {
        git(&repo, &["checkout", "-q", "--", "greet.py"])?;
        let home: PathBuf = scratch.join(format!("home-{run}"));
        std::fs::create_dir_all(&home)?;
        let server = Serve::start(testkit, script)?;
        let (data, config) = (home.join("data"), home.join("config"));
        let session = Run {
            program: agent,
            args: &[
                "-p",
                "fix the greeting",
                "-C",
                &repo_arg,
                "--base-url",
                &server.url,
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash(cat:*)",
                "--output-format",
                "json",
            ],
            envs: &[
                ("HOME", &home),
                ("XDG_DATA_HOME", &data),
                ("XDG_CONFIG_HOME", &config),
            ],
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
