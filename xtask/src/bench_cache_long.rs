//! `cargo xtask bench-cache --long`: what a session that crosses every limit of a
//! 200,000-token window costs in input tokens, priced as the API bills prompt caching, as
//! docs/benchmarks.md reports it.
//!
//! The session: 34 modules, each read (about 5,000 tokens with line numbers), searched,
//! edited, tested (`cat` of a 10 KB test log through Bash) and given a new test file by a
//! Write of about 20 KB (a tool_use input, which microcompact cannot clear): 170 tool calls,
//! then an answer, on `claude-opus-4-8` (a 200,000-token window: microcompact's and
//! autocompact's thresholds are crossed several times). `testkit serve --cache-log`
//! answers, splitting each request's input as the API's prompt cache would bill it
//! (`testkit::cache`: breakpoints, the 20-block lookback, the 1,024-token minimum), and
//! answers the compaction summary requests (those whose last message holds the summary
//! instruction) with a 6 KB summary.
//!
//! Cost is in full-price input tokens: uncached input at 1.0, cache writes at 1.25 (the
//! 5-minute TTL), cache reads at 0.1 (API-NOTES, "Models and prices"). Output tokens are the
//! same whatever the policy (the scripted answers) and are left out.
//!
//! Reports per build: requests (main and summary), the cost and its parts (uncached, written,
//! read), the summary requests' share, microcompact batches (requests where more results
//! became `[Old tool result cleared: ...]` placeholders than in the previous main request),
//! compactions (a new `<compact-boundary>` summary), and the share of input read from the
//! cache. With `--ab COMMIT` the same session also runs on that commit's build, and the ratio
//! is printed (the target: at most 0.8x); `--autocompact-pct N` runs both with
//! `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=N` (compacting earlier).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};

use crate::bench_cli::{Serve, git};

/// Modules in the repository; each gets five tool calls.
pub const MODULES: usize = 34;
/// Lines per module (about 18 KB: 5,000 tokens once numbered).
const MODULE_LINES: usize = 300;
/// Lines per test log (about 10 KB).
const LOG_LINES: usize = 140;
/// Lines per written test file (about 20 KB: 5,000 tokens).
const TEST_LINES: usize = 200;
/// The summary instruction of `context::autocompact::SUMMARY_PROMPT`, which routes the
/// summary requests.
const SUMMARY_MARKER: &str = "Your task is to create a detailed summary of the conversation";

/// Where the builds come from.
pub struct Builds {
    /// The working tree's `agent`.
    pub agent: PathBuf,
    /// The working tree's `testkit`.
    pub testkit: PathBuf,
    /// An earlier build to compare with, and its label.
    pub earlier: Option<(PathBuf, String)>,
    /// `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE` for every run (`None`: the default threshold).
    pub autocompact_pct: Option<u8>,
}

/// Runs the long scenario on each build and prints the report.
pub fn run(builds: &Builds) -> Result<()> {
    let scratch =
        std::env::temp_dir().join(format!("agent-bench-cache-long-{}", std::process::id()));
    let result = (|| {
        let mut rows = Vec::new();
        if let Some((earlier, label)) = &builds.earlier {
            let requests = session(
                earlier,
                &builds.testkit,
                &scratch.join("earlier"),
                builds.autocompact_pct,
            )?;
            rows.push((label.clone(), analyse(&requests)?));
        }
        let requests = session(
            &builds.agent,
            &builds.testkit,
            &scratch.join("tree"),
            builds.autocompact_pct,
        )?;
        rows.push(("working tree".to_owned(), analyse(&requests)?));
        print(&rows);
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn module_line(module: usize, n: usize) -> String {
    if n.is_multiple_of(12) {
        format!("def func_{module}_{n}(value, scale=1):")
    } else {
        format!("    value = transform(value, step={n}, module={module}) * scale  # stage {n}")
    }
}

fn log_text(module: usize) -> String {
    let mut text =
        format!("============ test session starts: tests/test_mod{module}.py ============\n");
    for n in 0..LOG_LINES {
        text.push_str(&format!(
            "tests/test_mod{module}.py::test_func_{module}_{n} PASSED in 0.0{}s  [{:>3}%]\n",
            n % 10,
            (n + 1) * 100 / LOG_LINES
        ));
    }
    text.push_str(&format!(
        "============ {LOG_LINES} passed in 1.42s ============\n"
    ));
    text
}

fn test_text(module: usize) -> String {
    (0..TEST_LINES)
        .map(|n| {
            format!(
                "def test_func_{module}_{n}():\n    assert func_{module}_{}(value={n}) == expected({module}, {n})\n",
                n * 12 % MODULE_LINES
            )
        })
        .collect()
}

/// The scripted turns: five tool calls per module, then the answer; and the summaries.
fn script() -> Value {
    let mut turns = Vec::new();
    let mut n = 0;
    let mut call = |text: String, name: &str, input: Value| {
        n += 1;
        turns.push(json!({
            "text": text,
            "tool_uses": [{"id": format!("toolu_{n:03}"), "name": name, "input": input}],
            "stop_reason": "tool_use",
        }));
    };
    for module in 0..MODULES {
        let path = format!("src/mod{module}.py");
        call(
            format!(
                "Module {module} next: reading {path} to see how its stages are chained before changing anything."
            ),
            "Read",
            json!({"file_path": path}),
        );
        call(
            format!("Checking who calls the functions of module {module}."),
            "Grep",
            json!({"pattern": format!("def func_{module}_1"), "output_mode": "content"}),
        );
        call(
            format!("Stage 7 of module {module} multiplies by its scale twice; simplifying it."),
            "Edit",
            json!({"file_path": path, "old_string": module_line(module, 7), "new_string": format!("    value = transform(value, step=7, module={module})  # simplified")}),
        );
        call(
            format!("Running the tests of module {module}."),
            "Bash",
            json!({"command": format!("cat logs/test_mod{module}.log")}),
        );
        call(
            format!("The tests pass; adding a test file for module {module}'s functions."),
            "Write",
            json!({"file_path": format!("tests/test_mod{module}.py"), "content": test_text(module)}),
        );
    }
    turns.push(json!({"text": "Done: every module simplified, tested and covered.", "stop_reason": "end_turn"}));
    let summaries: Vec<Value> = (0..8)
        .map(|n| {
            let summary = format!(
                "Summary {n}.\n1. Primary request: simplify every module, test it, add tests.\n{}",
                "3. Files: src/modN.py simplified at stage 7; tests/test_modN.py written; all tests pass.\n"
                    .repeat(70)
            );
            json!({"text": summary, "stop_reason": "end_turn"})
        })
        .collect();
    json!({"turns": turns, "routes": [{"marker": SUMMARY_MARKER, "turns": summaries}]})
}

/// Runs the session in a fresh repository and home; returns each Messages request's body
/// with the usage the simulated cache billed for it.
fn session(
    agent: &Path,
    testkit: &Path,
    scratch: &Path,
    autocompact_pct: Option<u8>,
) -> Result<Vec<(Value, Value)>> {
    let repo = scratch.join("repo");
    for folder in ["src", "logs", "tests"] {
        std::fs::create_dir_all(repo.join(folder))
            .with_context(|| format!("creating {}", repo.display()))?;
    }
    for module in 0..MODULES {
        let text: String = (0..MODULE_LINES)
            .map(|n| module_line(module, n) + "\n")
            .collect();
        std::fs::write(repo.join(format!("src/mod{module}.py")), text)?;
        std::fs::write(
            repo.join(format!("logs/test_mod{module}.log")),
            log_text(module),
        )?;
    }
    git(&repo, &["init", "-q"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-qm", "init"])?;
    let script_path = scratch.join("script.json");
    std::fs::write(&script_path, script().to_string())?;
    let log = scratch.join("requests.jsonl");
    let billed = scratch.join("billed.jsonl");
    let mut server = Serve::start_with(
        testkit,
        &script_path,
        &[
            "--requests".as_ref(),
            log.as_os_str(),
            "--cache-log".as_ref(),
            billed.as_os_str(),
        ],
    )?;
    let home = scratch.join("home");
    let mut command = Command::new(agent);
    if let Some(pct) = autocompact_pct {
        command.env("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", pct.to_string());
    }
    let output = command
        .args([
            "-p",
            "Simplify stage 7 of every module, run its tests, and add a test file for each.",
        ])
        .arg("-C")
        .arg(&repo)
        .args(["--base-url", &server.url, "--model", "claude-opus-4-8"])
        .args(["--permission-mode", "acceptEdits"])
        .args(["--allowedTools", "Bash(cat:*)", "--output-format", "json"])
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .output()
        .context("running agent")?;
    ensure!(
        output.status.success(),
        "the session failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    server.stop()?;
    let written = std::fs::read_dir(repo.join("tests"))?.count();
    ensure!(
        written == MODULES,
        "{written} test files written, {MODULES} expected"
    );
    let lines = |path: &Path| -> Result<Vec<Value>> {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading {}", path.display()))?
            .lines()
            .map(|line| serde_json::from_str(line).context("a logged line is not JSON"))
            .collect()
    };
    let requests = lines(&log)?;
    let billed = lines(&billed)?;
    ensure!(
        requests.len() == billed.len(),
        "{} requests but {} billed",
        requests.len(),
        billed.len()
    );
    Ok(requests.into_iter().zip(billed).collect())
}

/// What one build's session cost.
#[derive(Debug, Default)]
struct Figures {
    main_requests: usize,
    summary_requests: usize,
    uncached: u64,
    written: u64,
    read: u64,
    summary_cost: f64,
    microcompacts: usize,
    compactions: usize,
    /// The largest main request, in tokens.
    largest: u64,
}

/// Full-price tokens of one request's input.
fn cost(usage: &Value) -> f64 {
    let field = |name: &str| usage[name].as_u64().unwrap_or(0) as f64;
    field("input_tokens")
        + 1.25 * field("cache_creation_input_tokens")
        + 0.1 * field("cache_read_input_tokens")
}

fn analyse(requests: &[(Value, Value)]) -> Result<Figures> {
    let mut figures = Figures::default();
    let mut previous_cleared = 0;
    let mut previous_boundary: Option<String> = None;
    for (request, usage) in requests {
        let messages = request["messages"]
            .as_array()
            .context("a request without messages")?;
        let last = messages.last().map(Value::to_string).unwrap_or_default();
        let field = |name: &str| usage[name].as_u64().unwrap_or(0);
        figures.uncached += field("input_tokens");
        figures.written += field("cache_creation_input_tokens");
        figures.read += field("cache_read_input_tokens");
        if last.contains(SUMMARY_MARKER) {
            figures.summary_requests += 1;
            figures.summary_cost += cost(usage);
            continue;
        }
        figures.main_requests += 1;
        figures.largest = figures.largest.max(
            field("input_tokens")
                + field("cache_creation_input_tokens")
                + field("cache_read_input_tokens"),
        );
        let text = request["messages"].to_string();
        let cleared = text.matches("[Old tool result cleared").count();
        let first = messages.first().map(Value::to_string).unwrap_or_default();
        let boundary = first.contains("<compact-boundary>").then_some(first);
        if boundary.is_some() && boundary != previous_boundary {
            figures.compactions += 1;
        } else if cleared > previous_cleared {
            figures.microcompacts += 1;
        }
        previous_cleared = cleared;
        previous_boundary = boundary;
    }
    Ok(figures)
}

impl Figures {
    fn cost(&self) -> f64 {
        self.uncached as f64 + 1.25 * self.written as f64 + 0.1 * self.read as f64
    }
}

fn print(rows: &[(String, Figures)]) {
    println!(
        "| build | requests (main + summary) | input cost (K full-price tokens) | uncached (K) | cache writes (K) | cache reads (K) | summary requests' cost (K) | microcompact batches | compactions | largest request (K) | read share |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (label, figures) in rows {
        let total = figures.uncached + figures.written + figures.read;
        println!(
            "| {label} | {} + {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {} | {} | {:.0} | {:.1} % |",
            figures.main_requests,
            figures.summary_requests,
            figures.cost() / 1000.0,
            figures.uncached as f64 / 1000.0,
            figures.written as f64 / 1000.0,
            figures.read as f64 / 1000.0,
            figures.summary_cost / 1000.0,
            figures.microcompacts,
            figures.compactions,
            figures.largest as f64 / 1000.0,
            figures.read as f64 * 100.0 / total.max(1) as f64
        );
    }
    if let [(earlier, before), .., (_, after)] = rows {
        println!(
            "\nworking tree / {earlier}: {:.3}x input cost",
            after.cost() / before.cost()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_follow_the_cache_prices() {
        let usage = json!({"input_tokens": 100, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 10000});
        assert!((cost(&usage) - 2350.0).abs() < 1e-9);
    }

    #[test]
    fn rewrites_and_compactions_are_told_apart() {
        let request =
            |messages: Value| (json!({"messages": messages}), json!({"input_tokens": 10}));
        let user = |text: &str| json!({"role": "user", "content": text});
        let requests = [
            request(json!([user("task")])),
            request(json!([
                user("task"),
                user("[Old tool result cleared: Read]")
            ])),
            request(json!([user("<compact-boundary> one")])),
            request(json!([
                user("<compact-boundary> one"),
                user(SUMMARY_MARKER)
            ])),
            request(json!([user("<compact-boundary> one"), user("more")])),
            request(json!([user("<compact-boundary> two")])),
        ];
        let figures = analyse(&requests).unwrap_or_default();
        assert_eq!(figures.microcompacts, 1);
        assert_eq!(figures.compactions, 2);
        assert_eq!(figures.summary_requests, 1);
        assert_eq!(figures.main_requests, 5);
    }
}
