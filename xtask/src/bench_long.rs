//! `cargo xtask bench-cli --long`: the release agent over a 1,000-turn headless session whose
//! history stays near the autocompact threshold, as docs/benchmarks.md reports it.
//!
//! The session: a prompt of about 130,000 tokens (project notes, on stdin), then 1,000 model
//! turns, each a paragraph of text (about 1 KB) and a `Read` of one of 40 files of about
//! 16 KB (4,000 tokens), then a final answer; `testkit serve --usage-from-request` answers
//! (each response's `input_tokens` is the request's bytes / 4, as the API would count), and
//! answers the summary requests of autocompaction (the requests whose last message holds
//! the summary instruction) with a 2 KB summary. With the default thresholds of a
//! 200,000-token window (autocompact at 167,000), the history climbs, microcompact clears
//! older results when its cost model says a batch pays (`context::economics`), the text
//! grows until autocompact summarizes, and so on.
//!
//! The agent runs with `--output-format stream-json`; this harness reads its lines as they
//! come and, at each turn's `user` line (its tool result), samples the agent process: its
//! CPU time (`clock_getcpuclockid`, every thread, nanoseconds), `VmRSS` and `VmHWM`. A
//! turn's CPU is the difference between two samples: preparing and writing the request,
//! reading the response, running the Read (in-process, about 16 KB), writing the
//! transcript and the output lines. The model's side (testkit) is another process. The history
//! size of each request is its `input_tokens`.
//!
//! Reports: per-turn CPU by windows of 100 turns (median), its spread from turn 10 to the
//! end, peak RSS against the largest request, RSS around each compaction, and the load
//! average before and after.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail, ensure};
use nix::time::{clock_getcpuclockid, clock_gettime};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::bench_cli::Serve;

/// Model turns that call a tool; one more answers.
pub const TURNS: usize = 1_000;
/// Files the turns read, in turn.
const FILES: usize = 40;
/// Lines per file (about 16 KB).
const FILE_LINES: usize = 220;
/// The summary instruction of `context::autocompact::SUMMARY_PROMPT`, which routes the
/// summary requests.
const SUMMARY_MARKER: &str = "Your task is to create a detailed summary of the conversation";

/// One sample, taken at a turn's `user` line (its tool results).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// CPU time of the agent process so far, in nanoseconds.
    pub cpu_ns: u64,
    /// Resident set size, in kilobytes.
    pub rss_kb: u64,
    /// Peak resident set size so far, in kilobytes.
    pub hwm_kb: u64,
    /// The size of the request the turn's response answered, in tokens (`usage.input_tokens`:
    /// bytes / 4).
    pub request_tokens: u64,
    /// Whether a compaction was reported since the previous sample.
    pub compacted: bool,
}

/// What a run measured.
#[derive(Debug)]
pub struct Figures {
    /// One sample per tool turn, in order.
    pub samples: Vec<Sample>,
    /// Compactions reported (`compact_boundary` lines).
    pub compactions: usize,
    /// Wall time of the session, in seconds.
    pub wall_s: f64,
    /// `/proc/loadavg`'s first three fields before and after.
    pub load: (String, String),
}

fn file_line(file: usize, n: usize) -> String {
    format!(
        "    let value_{n} = step(input, {n}, {file}); // line {n} of module {file}, unchanged\n"
    )
}

/// The scripted session.
fn script() -> Value {
    let paragraph = |n: usize| -> String {
        (0..6)
            .map(|k| format!("Turn {n}, note {k}: module {} keeps its state in a small table, and the next read checks how it is used. ", n % FILES))
            .collect()
    };
    let mut turns: Vec<Value> = (0..TURNS)
        .map(|n| {
            json!({
                "text": paragraph(n),
                "tool_uses": [{"id": format!("toolu_{n:04}"), "name": "Read",
                    "input": {"file_path": format!("src/mod{}.rs", n % FILES)}}],
            })
        })
        .collect();
    turns.push(json!({"text": "All modules read.", "stop_reason": "end_turn"}));
    let summary: String = (0..20)
        .map(|k| {
            format!("Summary line {k}: the modules were read one by one and their tables noted. ")
        })
        .collect();
    let summaries: Vec<Value> = (0..100).map(|_| json!({"text": summary})).collect();
    json!({"turns": turns, "routes": [{"marker": SUMMARY_MARKER, "turns": summaries}]})
}

/// About 130,000 tokens of project notes: the prompt.
fn prompt() -> String {
    let mut text = String::from("Here are the project notes; read every module after them.\n");
    let mut n = 0;
    while text.len() < 520_000 {
        text.push_str(&format!(
            "Note {n}: the cache layer keeps entries for a while and the scheduler wakes it up every few seconds; see module {}.\n",
            n % FILES
        ));
        n += 1;
    }
    text
}

fn proc_status_kb(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "?".to_owned())
}

/// Runs the session once in `scratch` and samples the agent.
pub fn measure(agent: &Path, testkit: &Path, scratch: &Path) -> Result<Figures> {
    let repo = scratch.join("repo");
    std::fs::create_dir_all(repo.join("src"))
        .with_context(|| format!("creating {}", repo.display()))?;
    for file in 0..FILES {
        let text: String = (0..FILE_LINES).map(|n| file_line(file, n)).collect();
        std::fs::write(repo.join(format!("src/mod{file}.rs")), text)?;
    }
    let script_path = scratch.join("script.json");
    std::fs::write(&script_path, script().to_string())?;
    let server = Serve::start_with(testkit, &script_path, &["--usage-from-request".as_ref()])?;
    let home = scratch.join("home");
    let load_before = loadavg();
    let stderr_path = scratch.join("stderr.txt");
    let started = Instant::now();
    let mut child = Command::new(agent)
        .args(["-p", "--output-format", "stream-json"])
        .arg("-C")
        .arg(&repo)
        .args([
            "--base-url",
            &server.url,
            "--max-turns",
            &(2 * TURNS).to_string(),
        ])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // A file, not a pipe nobody reads while the session runs (a full pipe would stall
        // the agent).
        .stderr(std::fs::File::create(&stderr_path)?)
        .spawn()
        .context("starting agent")?;
    let pid = child.id();
    let clock = clock_getcpuclockid(Pid::from_raw(
        i32::try_from(pid).context("the agent's pid")?,
    ))
    .context("the agent's CPU clock")?;
    {
        let mut stdin = child.stdin.take().context("the agent's stdin")?;
        stdin.write_all(prompt().as_bytes())?;
    }
    let stdout = child.stdout.take().context("the agent's stdout")?;
    let mut samples = Vec::new();
    let mut compactions = 0;
    let mut compacted = false;
    let mut request_tokens = 0;
    let mut result = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the agent's output")?;
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match (value["type"].as_str(), value["subtype"].as_str()) {
            // One line per content block; the usage is the response's.
            (Some("assistant"), _) => {
                request_tokens = value["message"]["usage"]["input_tokens"]
                    .as_u64()
                    .unwrap_or(request_tokens);
            }
            // The tool results of a turn: the next request is prepared after this line.
            (Some("user"), _) => {
                let cpu = clock_gettime(clock).context("reading the agent's CPU clock")?;
                let cpu_ns =
                    u64::try_from(cpu.tv_sec())? * 1_000_000_000 + u64::try_from(cpu.tv_nsec())?;
                samples.push(Sample {
                    cpu_ns,
                    rss_kb: proc_status_kb(pid, "VmRSS:")?,
                    hwm_kb: proc_status_kb(pid, "VmHWM:")?,
                    request_tokens,
                    compacted: std::mem::take(&mut compacted),
                });
            }
            (Some("system"), Some("compact_boundary")) => {
                compactions += 1;
                compacted = true;
            }
            (Some("result"), _) => result = Some(value),
            _ => {}
        }
    }
    let status = child.wait().context("waiting for the agent")?;
    let wall_s = started.elapsed().as_secs_f64();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    drop(server);
    ensure!(status.success(), "the session failed ({status}):\n{stderr}");
    let Some(result) = result else {
        bail!("the agent printed no result line:\n{stderr}");
    };
    ensure!(
        result["subtype"] == "success" && samples.len() == TURNS,
        "expected {} tool turns and a success, got {} and {}:\n{stderr}",
        TURNS,
        samples.len(),
        result["subtype"]
    );
    Ok(Figures {
        samples,
        compactions,
        wall_s,
        load: (load_before, loadavg()),
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Per-turn CPU in microseconds: turn `i` (1-based response index) is the time from the
/// response before it to its own.
fn turn_cpu_us(samples: &[Sample]) -> Vec<f64> {
    samples
        .windows(2)
        .map(|pair| pair[1].cpu_ns.saturating_sub(pair[0].cpu_ns) as f64 / 1000.0)
        .collect()
}

/// Prints the report (the per-turn CPU's spread against its 2x target included). Every turn's
/// figures go to `csv` (turn, CPU µs, request tokens, RSS kB, compacted), from turn 2: turn 1
/// has no CPU figure of its own (it starts with the process).
pub fn print(figures: &Figures, csv: &Path) -> Result<()> {
    let samples = &figures.samples;
    let cpu = turn_cpu_us(samples);
    let mut rows = String::from("turn,cpu_us,request_tokens,rss_kb,compacted\n");
    for (index, (cpu, sample)) in cpu.iter().zip(&samples[1..]).enumerate() {
        rows.push_str(&format!(
            "{},{cpu:.0},{},{},{}\n",
            index + 2,
            sample.request_tokens,
            sample.rss_kb,
            u8::from(sample.compacted)
        ));
    }
    std::fs::write(csv, rows).with_context(|| format!("writing {}", csv.display()))?;
    println!("every turn: {}", csv.display());
    println!(
        "\nlong session: {} tool turns, {} compactions, {:.1} s wall, load average {} before, {} after",
        samples.len(),
        figures.compactions,
        figures.wall_s,
        figures.load.0,
        figures.load.1
    );
    println!(
        "{:>11} | {:>17} | {:>18} | {:>14} | {:>11}",
        "turns", "CPU/turn median", "request (tokens)", "RSS max (MB)", "compactions"
    );
    // Turn `t` (1-based) is sampled at `samples[t - 1]`; its CPU, the time since the sample
    // of turn `t - 1`, is `cpu[t - 2]`: turn 1 has none (its start is the process's). Windows
    // of 100 turns from turn 10 (the first turns include start-up work); the last one ends
    // with the last turn.
    let turns = samples.len();
    let mut window_medians = Vec::new();
    let mut first = 10;
    while first <= turns {
        // Up to the next hundred less one; a shorter rest joins the last window.
        let mut last = ((first / 100 + 1) * 100 - 1).min(turns);
        if turns - last < 100 {
            last = turns;
        }
        let mut window: Vec<f64> = cpu[first - 2..=last - 2].to_vec();
        let median_us = median(&mut window);
        window_medians.push(median_us);
        let in_window = &samples[first - 1..=last - 1];
        let mut tokens: Vec<f64> = in_window
            .iter()
            .map(|sample| sample.request_tokens as f64)
            .collect();
        let rss = in_window
            .iter()
            .map(|sample| sample.rss_kb)
            .max()
            .unwrap_or(0);
        let compactions = in_window.iter().filter(|sample| sample.compacted).count();
        println!(
            "{:>5}-{:<5} | {:>14.0} µs | {:>18.0} | {:>14.1} | {:>11}",
            first,
            last,
            median_us,
            median(&mut tokens),
            rss as f64 / 1024.0,
            compactions
        );
        first = last + 1;
    }
    let low = window_medians.iter().copied().fold(f64::INFINITY, f64::min);
    let high = window_medians.iter().copied().fold(0.0, f64::max);
    let spread = high / low;
    let peak_kb = samples
        .iter()
        .map(|sample| sample.hwm_kb)
        .max()
        .unwrap_or(0);
    let largest = samples
        .iter()
        .map(|sample| sample.request_tokens)
        .max()
        .unwrap_or(0);
    println!(
        "per-turn CPU, windows of 100 from turn 10: {low:.0}-{high:.0} µs, spread {spread:.2}x (target <= 2x: {})",
        if spread <= 2.0 { "met" } else { "MISSED" }
    );
    // The same history sizes early and late: the first and the last third of the turns from
    // turn 10, each turn whose request held 80,000-160,000 tokens. Flat means the late median
    // is not above the early one by more than the target.
    let sized = |from: usize, to: usize| -> f64 {
        let mut values: Vec<f64> = (from..=to)
            .filter(|turn| (80_000..160_000).contains(&samples[turn - 1].request_tokens))
            .map(|turn| cpu[turn - 2])
            .collect();
        median(&mut values)
    };
    let third = (turns - 10) / 3;
    let (early, late) = (sized(10, 10 + third), sized(turns - third, turns));
    println!(
        "same sizes (80-160K tokens): turns 10-{} median {early:.0} µs, turns {}-{turns} median {late:.0} µs: {:.2}x",
        10 + third,
        turns - third,
        late / early
    );
    // By history size: the cost of a turn follows the size of the request it writes, not
    // the turn's number.
    let mut by_size: std::collections::BTreeMap<u64, Vec<f64>> = std::collections::BTreeMap::new();
    for (cpu, sample) in cpu.iter().zip(&samples[1..]).skip(8) {
        by_size
            .entry(sample.request_tokens / 40_000 * 40)
            .or_default()
            .push(*cpu);
    }
    for (thousands, values) in &mut by_size {
        let count = values.len();
        println!(
            "requests of {thousands}-{}K tokens: {count} turns, median {:.0} µs",
            *thousands + 40,
            median(values)
        );
    }
    println!(
        "peak RSS {:.1} MB; largest request {} tokens ({:.1} MB of JSON)",
        peak_kb as f64 / 1024.0,
        largest,
        largest as f64 * 4.0 / 1e6
    );
    for (index, sample) in samples.iter().enumerate().filter(|(_, s)| s.compacted) {
        let before = &samples[index.saturating_sub(1)];
        let later = samples.get(index + 5).unwrap_or(sample);
        println!(
            "compaction before response {}: request {} -> {} tokens; RSS {:.1} MB before, {:.1} MB after it, {:.1} MB five turns later",
            index + 1,
            before.request_tokens,
            sample.request_tokens,
            before.rss_kb as f64 / 1024.0,
            sample.rss_kb as f64 / 1024.0,
            later.rss_kb as f64 / 1024.0
        );
    }
    Ok(())
}
