//! The interactive terminal's cost, whole process: `agent` on a pseudo-terminal renders an
//! answer of Markdown that `testkit serve` streams at a steady 100 tokens a second for 60
//! seconds (400 characters a second; a token is counted as 4 characters).
//!
//! Measured between the Enter that sends the prompt and the answer's last line on the
//! screen: the CPU time of the `agent` process (user + system, from `/proc/PID/stat`; HTTP,
//! SSE parsing, the loop, the Markdown renderer, the spinner's 10 frames a second and the
//! terminal's task all count) as a share of one core over the wall time, and the bytes it
//! wrote to the terminal per token. The figure is the whole process, so it bounds what the
//! renderer alone costs from above.

use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};

use crate::bench_cli::Serve;

/// How long the answer streams, and how fast.
const SECONDS: u64 = 60;
const CHARS_PER_SECOND: usize = 400;
/// The last line of the answer: when it is on the screen, the answer is drawn.
const END: &str = "End of the report.";

/// A Markdown answer of about `chars` characters: headings, paragraphs with emphasis and
/// code spans, lists, a table and a fenced code block, repeated.
fn answer(chars: usize) -> String {
    let section = |n: usize| {
        format!(
            "## Section {n}\n\nThe **renderer** re-flows this paragraph to the terminal's width while \
             the model streams it, with `inline code`, *emphasis* and a [link](https://example.com/{n}). \
             It keeps finished lines as they are.\n\n- first item of list {n}\n- second item, a little \
             longer so that it wraps on a narrow terminal\n  - a nested item\n\n| file | lines | state |\n\
             |---|--:|---|\n| src/lib.rs | {n}0 | changed |\n| src/main.rs | {n}5 | new |\n\n\
             ```rust\nfn section_{n}() -> usize {{\n    let total = (0..{n}).sum::<usize>();\n    total * 2\n}}\n```\n\n"
        )
    };
    let mut text = String::new();
    let mut n = 1;
    while text.len() < chars {
        text.push_str(&section(n));
        n += 1;
    }
    text.push_str(END);
    text
}

/// CPU time of process `pid` so far (user + system), from `/proc/PID/stat`.
fn cpu(pid: u32) -> Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').context("no ) in /proc/PID/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 = fields.get(11).context("utime")?.parse::<u64>()?
        + fields.get(12).context("stime")?.parse::<u64>()?;
    // USER_HZ, 100 on Linux whatever the kernel's HZ (sysconf(_SC_CLK_TCK)).
    Ok(Duration::from_millis(ticks * 10))
}

/// The figures of one run.
pub struct Figures {
    pub wall: Duration,
    pub cpu: Duration,
    pub bytes: usize,
    pub tokens: usize,
}

/// Runs the measurement; `scratch` is an empty folder of its own.
pub fn measure(agent: &Path, testkit: &Path, scratch: &Path) -> Result<Figures> {
    let text = answer(CHARS_PER_SECOND * SECONDS as usize);
    let tokens = text.chars().count() / 4;
    let script = scratch.join("render.json");
    std::fs::create_dir_all(scratch)?;
    std::fs::write(
        &script,
        serde_json::json!([{"text": text, "stream_ms": SECONDS * 1_000}]).to_string(),
    )?;
    let server = Serve::start_with(testkit, &script, &[])?;
    let home = scratch.join("home");
    let repo = scratch.join("repo");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(&repo)?;

    let size = nix::pty::Winsize {
        ws_row: 50,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).context("opening a pseudo-terminal")?;
    let slave: OwnedFd = pty.slave;
    let mut child = Command::new(agent)
        .args(["-C"])
        .arg(&repo)
        .args(["--base-url", &server.url, "--model", "claude-sonnet-4-5"])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("ANTHROPIC_API_KEY", "bench")
        .env("TERM", "xterm-256color")
        .env("AGENT_DISABLE_BACKGROUND_REQUESTS", "1")
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave))
        .spawn()
        .context("starting agent")?;
    let pid = child.id();
    let mut keyboard = std::fs::File::from(pty.master);
    let mut reader = keyboard.try_clone()?;
    let screen = Arc::new(Mutex::new(Vec::<u8>::new()));
    let written = Arc::new(AtomicUsize::new(0));
    // `AGENT_BENCH_RENDER_DUMP=FILE`: every byte the agent wrote, kept for reading (where
    // the bytes per token go).
    let mut dump = std::env::var_os("AGENT_BENCH_RENDER_DUMP")
        .map(std::fs::File::create)
        .transpose()
        .context("creating AGENT_BENCH_RENDER_DUMP's file")?;
    {
        let screen = Arc::clone(&screen);
        let written = Arc::clone(&written);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 65_536];
            while let Ok(read) = reader.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                written.fetch_add(read, Ordering::SeqCst);
                if let Some(dump) = &mut dump {
                    use std::io::Write as _;
                    // A copy for reading, not a figure: a failed write only shortens it.
                    let _ = dump.write_all(&buffer[..read]);
                }
                let mut screen = screen.lock().unwrap_or_else(|e| e.into_inner());
                screen.extend_from_slice(&buffer[..read]);
                // Only the tail is searched; the whole answer need not be kept.
                let excess = screen.len().saturating_sub(4_096);
                screen.drain(..excess);
            }
        });
    }
    let seen = |needle: &str| {
        String::from_utf8_lossy(&screen.lock().unwrap_or_else(|e| e.into_inner())).contains(needle)
    };
    let wait = |needle: &str, limit: Duration| -> Result<()> {
        let deadline = Instant::now() + limit;
        while !seen(needle) {
            if Instant::now() > deadline {
                bail!("waited {limit:?} for {needle:?} on the agent's terminal");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    };
    wait("Type /help", Duration::from_secs(10))?;
    std::thread::sleep(Duration::from_millis(300));
    let cpu_before = cpu(pid)?;
    let bytes_before = written.load(Ordering::SeqCst);
    let start = Instant::now();
    keyboard.write_all(b"write the report\r")?;
    wait(END, Duration::from_secs(SECONDS * 3))?;
    let wall = start.elapsed();
    let cpu_used = cpu(pid)? - cpu_before;
    let bytes = written.load(Ordering::SeqCst) - bytes_before;
    // The turn is over when the status line counts its request; then Ctrl-D exits.
    wait(" 1 req ", Duration::from_secs(10))?;
    keyboard.write_all(b"\x04")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait()? {
            ensure!(status.success(), "agent exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("agent did not exit after Ctrl-D");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Figures {
        wall,
        cpu: cpu_used,
        bytes,
        tokens,
    })
}

/// Prints the figures as docs/benchmarks.md's table row.
pub fn print(figures: &Figures) {
    let share = figures.cpu.as_secs_f64() / figures.wall.as_secs_f64() * 100.0;
    println!();
    println!(
        "| interactive rendering, {SECONDS} s of Markdown at 100 tokens/s | wall | agent CPU | share of one core | bytes written | bytes / token | target |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    println!(
        "| {} tokens ({} chars), 120x50 pty | {:.1} s | {:.0} ms | {share:.2} % | {} | {:.1} | < 5 % of a core |",
        figures.tokens,
        figures.tokens * 4,
        figures.wall.as_secs_f64(),
        figures.cpu.as_secs_f64() * 1_000.0,
        figures.bytes,
        figures.bytes as f64 / figures.tokens as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_as_long_as_asked_and_ends_with_the_marker() {
        let text = answer(24_000);
        assert!(
            text.len() >= 24_000 && text.len() < 26_000,
            "{}",
            text.len()
        );
        assert!(text.ends_with(END));
        assert!(text.contains("| src/lib.rs |") && text.contains("```rust"));
    }

    #[test]
    fn cpu_time_is_read_from_proc() {
        let spent = cpu(std::process::id()).unwrap();
        assert!(spent < Duration::from_secs(3_600));
    }
}
