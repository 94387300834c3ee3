//! `agent demo`: the offline demonstration.
//!
//! Copies `examples/demo/project` (a small Python project whose test fails) to a temporary
//! directory, makes it a git repository, runs this very binary on it with the recorded model
//! session (`examples/demo/session.jsonl`, replayed leniently: the user context carries a date
//! and a git status that differ from run to run), then shows the diff and runs the tests. The
//! tools run for real; only the model is replayed. `--live` talks to the real API instead.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, bail};

/// The task given to the agent (the recording was made with it).
pub const TASK: &str = "The test suite fails. Find the bug and fix it, then run the tests.";

fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo")
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            if entry.file_name() != "__pycache__" {
                copy_dir(&entry.path(), &target)?;
            }
        } else {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

async fn git(dir: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    tokio::process::Command::new(tools::sandbox::env::resolve_program("git")?)
        .args([
            "-c",
            "user.name=agent demo",
            "-c",
            "user.email=demo@agent.invalid",
            "-c",
            "color.ui=never",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .with_context(|| format!("running git {}", args.join(" ")))
}

/// Runs the demo; returns the exit code.
pub async fn run(live: bool, keep: bool) -> anyhow::Result<u8> {
    let source = demo_dir().join("project");
    let cassette = demo_dir().join("session.jsonl");
    if !source.is_dir() {
        bail!("the demo project is missing: {}", source.display());
    }
    let work = std::env::temp_dir().join(format!("agent-demo-{}", uuid::Uuid::new_v4()));
    copy_dir(&source, &work)?;
    let work = work.canonicalize()?;
    git(&work, &["init", "-q"]).await?;
    git(&work, &["add", "-A"]).await?;
    git(&work, &["commit", "-qm", "demo project"]).await?;
    eprintln!("── demo project copied to {}", work.display());
    eprintln!("── task: {TASK}\n");

    // The demo's session and settings stay out of the user's folders: its transcript goes
    // to a temporary data folder (removed with the project), and no user settings (hooks, a
    // model) change what the recording expects.
    let private = std::env::temp_dir().join(format!("agent-demo-home-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&private).with_context(|| format!("creating {}", private.display()))?;
    let exe = std::env::current_exe().context("locating the agent binary")?;
    let mut command = tokio::process::Command::new(exe);
    command
        .env("XDG_DATA_HOME", private.join("data"))
        .env("XDG_CONFIG_HOME", private.join("config"));
    command
        .args([
            "-p",
            TASK,
            "--permission-mode",
            "acceptEdits",
            "--max-turns",
            "20",
        ])
        .args(["--allowedTools", "Bash(python3 -m unittest:*)"])
        .arg("-C")
        .arg(&work);
    if !live {
        command
            .arg("--replay")
            .arg(&cassette)
            .arg("--replay-lenient");
    }
    let status = command.status().await.context("running the agent")?;
    eprintln!("\n── agent exited with {status}");

    let diff = git(&work, &["diff", "--stat", "--patch"]).await?;
    eprintln!("── the change:\n");
    println!("{}", String::from_utf8_lossy(&diff.stdout));
    eprintln!("── the tests:\n");
    let tests = tokio::process::Command::new(tools::sandbox::env::resolve_program("python3")?)
        .args(["-m", "unittest", "-v"])
        .current_dir(&work)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .status()
        .await
        .context("running python3 -m unittest")?;
    if keep {
        eprintln!(
            "── kept {} (the session transcript is under {})",
            work.display(),
            private.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&work);
        let _ = std::fs::remove_dir_all(&private);
    }
    if status.success() && tests.success() {
        eprintln!("\n── demo passed: the agent fixed the bug and the tests pass");
        Ok(0)
    } else {
        eprintln!("\n── demo failed");
        Ok(1)
    }
}
