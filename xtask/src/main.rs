//! Repository chores, run as `cargo xtask <subcommand>` (an alias in `.cargo/config.toml`).
//!
//! Subcommands:
//! - `bench [-- <criterion args>]`: runs every benchmark of the workspace, one package at a
//!   time (`cargo bench -p <package> --bench <target>...` for each package that has bench
//!   targets, as listed by `cargo metadata`), then prints one summary table read from
//!   criterion's `new/benchmark.json` and `new/estimates.json` files: crate, benchmark, mean
//!   time per iteration and throughput. Arguments after `--` go to every bench binary (a
//!   criterion filter such as `framing`, or `--test`). The criterion directory is
//!   `$CRITERION_HOME`, else `criterion/` in the target directory (`CARGO_TARGET_DIR` is
//!   respected through `cargo metadata`).
//! - `bench-cli`: whole-process figures of the `agent` binary (start-up, a scripted 4-turn
//!   session against `testkit serve`, the interactive terminal's rendering cost); `--render`
//!   measures the rendering alone, `--long` a 1,000-turn session near the autocompact
//!   threshold alone: see [`bench_cli`], [`bench_render`] and [`bench_long`]. `--ab COMMIT
//!   [--runs N]` runs the 4-turn session by an earlier commit's build and the working
//!   tree's, interleaved, phase by phase: see [`bench_ab`]; `--sandbox-ab [--runs N]`
//!   four read-only shell commands with a sandbox per command against the persistent one.
//! - `symbol-order`: profiles the release `agent` under callgrind and writes the code layout
//!   release builds link with: see [`symbol_order`].
//! - `bench-cache`: how a scripted 30-turn session keeps the prompt cache (prefix reuse,
//!   cache breaks, estimated input cost): see [`bench_cache`].
//! - `help`: lists the subcommands.
//!
//! An unknown subcommand is an error with exit status 2.

mod bench_ab;
mod bench_cache;
mod bench_cache_long;
mod bench_cli;
mod bench_long;
mod bench_render;
mod symbol_order;
mod tidy;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::SystemTime;

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::Value;

/// Every subcommand with its one-line description, for `help`.
const SUBCOMMANDS: &[(&str, &str)] = &[
    (
        "bench [-- <criterion args>]",
        "run every workspace benchmark, package by package, and print one summary table",
    ),
    (
        "bench-cli [--render [--agent PATH]|--long]",
        "wall time and peak RSS of `agent --version` and a scripted 4-turn session; the interactive terminal's rendering cost (alone with --render); a 1,000-turn session near the autocompact threshold (alone with --long)",
    ),
    (
        "bench-cli --ab COMMIT [--runs N]",
        "the scripted 4-turn session by COMMIT's build and the working tree's, interleaved, N runs each (default 10): wall, CPU, peak RSS and each phase",
    ),
    (
        "bench-cli --sandbox-ab [--runs N]",
        "four read-only shell commands in the default mode, each in a sandbox of its own against the persistent sandbox (the working tree's build, interleaved, N runs each, default 10)",
    ),
    (
        "bench-cache [--agent PATH | --debug]",
        "prompt-cache prefix reuse, breaks and estimated cost of a scripted 30-turn session",
    ),
    (
        "bench-cache --long [--ab COMMIT] [--debug] [--autocompact-pct N]",
        "input cost, priced as the API bills prompt caching (testkit's cache simulation), of a 171-turn session crossing a 200K window's limits; with --ab, against COMMIT's build",
    ),
    (
        "symbol-order",
        "profile the release agent (--version and the 4-turn session) under callgrind and write crates/cli/symbol-order.txt, the code layout release builds link with",
    ),
    (
        "tidy",
        "check the layering (docs/ARCHITECTURE.md), unused dependencies, #![deny(missing_docs)] and function lengths",
    ),
    ("help", "list the subcommands"),
];

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(subcommand) = args.next() else {
        eprintln!("error: no subcommand given\n");
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    let rest: Vec<OsString> = args.collect();
    let result = match subcommand.to_str() {
        Some("bench") => bench(&rest),
        Some("bench-cli") if rest.first().is_some_and(|flag| flag == "--ab") => {
            ab_arguments(&rest[1..]).and_then(|(commit, runs)| {
                workspace().and_then(|ws| {
                    bench_cli::run_ab(&ws.root, &ws.target_dir, cargo(), &commit, runs)
                })
            })
        }
        Some("bench-cli") if rest.first().is_some_and(|flag| flag == "--sandbox-ab") => {
            runs_argument(&rest[1..]).and_then(|runs| {
                workspace().and_then(|ws| {
                    bench_cli::run_sandbox_ab(&ws.root, &ws.target_dir, cargo(), runs)
                })
            })
        }
        Some("bench-cli") => {
            let only = match rest.as_slice() {
                [] => Ok(bench_cli::Only::All),
                [flag] if flag == "--render" => Ok(bench_cli::Only::Render(None)),
                [flag, agent, path] if flag == "--render" && agent == "--agent" => {
                    Ok(bench_cli::Only::Render(Some(PathBuf::from(path))))
                }
                [flag] if flag == "--long" => Ok(bench_cli::Only::Long),
                _ => Err(anyhow::anyhow!(
                    "usage: cargo xtask bench-cli [--render [--agent PATH]|--long]"
                )),
            };
            only.and_then(|only| {
                workspace().and_then(|ws| bench_cli::run(&ws.root, &ws.target_dir, cargo(), only))
            })
        }
        Some("bench-cache") if rest.first().is_some_and(|flag| flag == "--long") => {
            bench_cache_long_args(&rest[1..]).and_then(|options| {
                workspace().and_then(|ws| {
                    let (agent, testkit) = bench_cli::build_tree_in(
                        &ws.root,
                        &ws.target_dir,
                        cargo(),
                        !options.debug,
                    )?;
                    let earlier = options
                        .commit
                        .map(|commit| {
                            bench_ab::build_commit(&ws.root, &ws.target_dir, &commit)
                                .map(|path| (path, commit))
                        })
                        .transpose()?;
                    bench_cache_long::run(&bench_cache_long::Builds {
                        agent,
                        testkit,
                        earlier,
                        autocompact_pct: options.autocompact_pct,
                    })
                })
            })
        }
        Some("bench-cache") => {
            let agent = match rest.as_slice() {
                [] => Ok((None, false)),
                [flag] if flag == "--debug" => Ok((None, true)),
                [flag, path] if flag == "--agent" => Ok((Some(PathBuf::from(path)), false)),
                _ => Err(anyhow::anyhow!(
                    "usage: cargo xtask bench-cache [--agent PATH | --debug]"
                )),
            };
            agent.and_then(|(agent, debug)| {
                workspace().and_then(|ws| {
                    let (built, testkit) =
                        bench_cli::build_tree_in(&ws.root, &ws.target_dir, cargo(), !debug)?;
                    bench_cache::run(&built, &testkit, agent.as_deref())
                })
            })
        }
        Some("symbol-order") if rest.is_empty() => workspace().and_then(|ws| {
            bench_cli::build_tree(&ws.root, &ws.target_dir, cargo())
                .and_then(|(agent, testkit)| symbol_order::run(&ws.root, &agent, &testkit))
        }),
        Some("tidy") => tidy_metadata().and_then(|(root, metadata)| tidy::run(&root, &metadata)),
        Some("help" | "-h" | "--help") => {
            print!("{}", usage());
            Ok(())
        }
        _ => {
            eprintln!(
                "error: unknown subcommand `{}`\n",
                subcommand.to_string_lossy()
            );
            eprint!("{}", usage());
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root and `cargo metadata --no-deps` for `tidy`.
fn tidy_metadata() -> Result<(PathBuf, Value)> {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    ensure!(
        output.status.success(),
        "cargo metadata failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value =
        serde_json::from_slice(&output.stdout).context("parsing cargo metadata's output")?;
    let root = PathBuf::from(metadata["workspace_root"].as_str().unwrap_or("."));
    Ok((root, metadata))
}

fn usage() -> String {
    let width = SUBCOMMANDS
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    let mut text = String::from("usage: cargo xtask <subcommand>\n\nsubcommands:\n");
    for (name, about) in SUBCOMMANDS {
        text.push_str(&format!("  {name:<width$}  {about}\n"));
    }
    text
}

// ---------------------------------------------------------------------------------------------
// bench
// ---------------------------------------------------------------------------------------------

/// A workspace package with bench targets.
struct BenchPackage {
    name: String,
    targets: Vec<String>,
}

/// What `cargo metadata` says about the workspace.
struct Workspace {
    root: PathBuf,
    target_dir: PathBuf,
    packages: Vec<BenchPackage>,
}

/// One benchmark's result.
struct Row {
    krate: String,
    id: String,
    mean_ns: f64,
    throughput: Option<(ThroughputKind, u64)>,
    written: SystemTime,
}

#[derive(Clone, Copy)]
enum ThroughputKind {
    Bytes,
    Elements,
}

fn bench(args: &[OsString]) -> Result<()> {
    // Everything after an optional leading `--` goes to the bench binaries.
    let passthrough = match args.split_first() {
        Some((first, rest)) if first == "--" => rest,
        _ => args,
    };
    let workspace = workspace()?;
    ensure!(
        !workspace.packages.is_empty(),
        "no workspace package has a bench target"
    );
    let criterion_dir = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.target_dir.join("criterion"));

    let mut seen = result_files(&criterion_dir)?;
    let mut produced: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut failed = Vec::new();
    for package in &workspace.packages {
        let mut command = cargo();
        command
            .current_dir(&workspace.root)
            .args(["bench", "--package", &package.name]);
        for target in &package.targets {
            command.args(["--bench", target]);
        }
        if !passthrough.is_empty() {
            command.arg("--").args(passthrough);
        }
        eprintln!(
            "xtask: cargo bench --package {} ({})",
            package.name,
            package.targets.join(", ")
        );
        let status = command
            .status()
            .with_context(|| format!("running cargo bench for {}", package.name))?;
        if !status.success() {
            // Keep going: the other packages' results are still worth a table.
            failed.push(format!("{} ({status})", package.name));
        }
        // The results this run wrote (new, or newer than before) are this package's.
        let now = result_files(&criterion_dir)?;
        for (dir, written) in &now {
            if seen.get(dir).is_none_or(|before| written > before) {
                produced.insert(dir.clone(), package.name.clone());
            }
        }
        seen = now;
    }

    let mut rows = Vec::new();
    for (dir, krate) in &produced {
        rows.push(
            read_row(dir, krate, seen.get(dir).copied())
                .with_context(|| format!("reading criterion results in {}", dir.display()))?,
        );
    }
    if rows.is_empty() {
        println!(
            "\nno benchmark wrote results under {} (did the filter match nothing?)",
            criterion_dir.display()
        );
    } else {
        // By crate, then in the order the benchmarks ran.
        rows.sort_by(|a, b| a.krate.cmp(&b.krate).then(a.written.cmp(&b.written)));
        println!("\n{}", table(&rows));
    }
    if !failed.is_empty() {
        bail!("cargo bench failed for {}", failed.join(", "));
    }
    Ok(())
}

/// `COMMIT [--runs N]` of `bench-cli --ab`.
fn ab_arguments(rest: &[OsString]) -> anyhow::Result<(String, usize)> {
    let usage = || anyhow::anyhow!("usage: cargo xtask bench-cli --ab COMMIT [--runs N]");
    let text: Vec<&str> = rest
        .iter()
        .map(|arg| arg.to_str().ok_or_else(usage))
        .collect::<anyhow::Result<_>>()?;
    match text[..] {
        [commit, ..] if !commit.starts_with("--") => {
            Ok((commit.to_owned(), runs_argument(&rest[1..])?))
        }
        _ => Err(usage()),
    }
}

/// `[--runs N]` (10 when not given).
fn runs_argument(rest: &[OsString]) -> anyhow::Result<usize> {
    let usage = || anyhow::anyhow!("expected [--runs N] after the bench's own arguments");
    let text: Vec<&str> = rest
        .iter()
        .map(|arg| arg.to_str().ok_or_else(usage))
        .collect::<anyhow::Result<_>>()?;
    match text[..] {
        [] => Ok(10),
        ["--runs", runs] => match runs.parse() {
            Ok(runs) if runs > 0 => Ok(runs),
            _ => Err(anyhow::anyhow!(
                "--runs {runs}: a count of runs, at least 1"
            )),
        },
        _ => Err(usage()),
    }
}

/// The options of `bench-cache --long`.
#[derive(Default)]
struct LongOptions {
    /// `--ab COMMIT`: the commit to compare with.
    commit: Option<String>,
    /// `--debug`: measure debug builds (quicker to build while working on a policy; the
    /// figures depend only on the request bodies, so they are the release builds' too).
    debug: bool,
    /// `--autocompact-pct N`.
    autocompact_pct: Option<u8>,
}

fn bench_cache_long_args(rest: &[OsString]) -> anyhow::Result<LongOptions> {
    let usage = || {
        anyhow::anyhow!(
            "usage: cargo xtask bench-cache --long [--ab COMMIT] [--debug] [--autocompact-pct N]"
        )
    };
    let mut options = LongOptions::default();
    let mut args = rest.iter().map(|arg| arg.to_str().ok_or_else(usage));
    while let Some(arg) = args.next() {
        match arg? {
            "--ab" => options.commit = Some(args.next().ok_or_else(usage)??.to_owned()),
            "--debug" => options.debug = true,
            "--autocompact-pct" => {
                let pct = args.next().ok_or_else(usage)??;
                options.autocompact_pct = Some(match pct.parse() {
                    Ok(pct @ 1..=100) => pct,
                    _ => anyhow::bail!("--autocompact-pct {pct}: a percentage from 1 to 100"),
                });
            }
            _ => return Err(usage()),
        }
    }
    Ok(options)
}

/// `cargo`, as the one that runs us when there is one, without the variables `cargo run` set
/// for xtask itself (they would describe the wrong package to the child builds).
fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if key.starts_with("CARGO_PKG_")
            || matches!(
                key,
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_RUSTC_CURRENT_DIR"
            )
        {
            command.env_remove(key);
        }
    }
    command
}

fn workspace() -> Result<Workspace> {
    let output = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    ensure!(
        output.status.success(),
        "cargo metadata failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value =
        serde_json::from_slice(&output.stdout).context("parsing cargo metadata's output")?;
    let text = |value: &Value, what: &str| -> Result<String> {
        value
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("cargo metadata: `{what}` is not a string"))
    };
    let members: Vec<String> = metadata["workspace_members"]
        .as_array()
        .context("cargo metadata: no `workspace_members`")?
        .iter()
        .map(|id| text(id, "workspace_members[]"))
        .collect::<Result<_>>()?;
    let mut packages = Vec::new();
    for package in metadata["packages"]
        .as_array()
        .context("cargo metadata: no `packages`")?
    {
        if !members.contains(&text(&package["id"], "id")?) {
            continue;
        }
        let mut targets = Vec::new();
        for target in package["targets"].as_array().into_iter().flatten() {
            let is_bench = target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "bench"));
            if is_bench {
                targets.push(text(&target["name"], "targets[].name")?);
            }
        }
        if !targets.is_empty() {
            targets.sort();
            packages.push(BenchPackage {
                name: text(&package["name"], "name")?,
                targets,
            });
        }
    }
    packages.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Workspace {
        root: text(&metadata["workspace_root"], "workspace_root")?.into(),
        target_dir: text(&metadata["target_directory"], "target_directory")?.into(),
        packages,
    })
}

/// Every benchmark result directory (`.../new`) under `dir`, with the time its estimates were
/// written. A missing `dir` has none.
fn result_files(dir: &Path) -> Result<BTreeMap<PathBuf, SystemTime>> {
    let mut found = BTreeMap::new();
    if dir.is_dir() {
        walk(dir, &mut found)?;
    }
    Ok(found)
}

fn walk(dir: &Path, found: &mut BTreeMap<PathBuf, SystemTime>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("reading {}", dir.display()))?
            .path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|name| name == "new") {
            let estimates = path.join("estimates.json");
            if estimates.is_file() && path.join("benchmark.json").is_file() {
                let written = std::fs::metadata(&estimates)
                    .and_then(|metadata| metadata.modified())
                    .with_context(|| format!("reading the time of {}", estimates.display()))?;
                found.insert(path, written);
            }
        } else {
            walk(&path, found)?;
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn read_row(dir: &Path, krate: &str, written: Option<SystemTime>) -> Result<Row> {
    let benchmark = read_json(&dir.join("benchmark.json"))?;
    let estimates = read_json(&dir.join("estimates.json"))?;
    let id = match benchmark["full_id"].as_str() {
        Some(id) => id.to_owned(),
        None => {
            let parts = ["group_id", "function_id", "value_str"];
            parts
                .iter()
                .filter_map(|part| benchmark[part].as_str())
                .collect::<Vec<_>>()
                .join("/")
        }
    };
    let mean_ns = estimates["mean"]["point_estimate"]
        .as_f64()
        .context("estimates.json: no mean.point_estimate")?;
    let throughput = match &benchmark["throughput"] {
        Value::Object(map) => map.iter().find_map(|(kind, amount)| {
            let kind = match kind.as_str() {
                "Bytes" | "BytesDecimal" => ThroughputKind::Bytes,
                "Elements" => ThroughputKind::Elements,
                _ => return None,
            };
            Some((kind, amount.as_u64()?))
        }),
        _ => None,
    };
    Ok(Row {
        krate: krate.to_owned(),
        id,
        mean_ns,
        throughput,
        written: written.unwrap_or(SystemTime::UNIX_EPOCH),
    })
}

/// A duration in nanoseconds in the largest unit that keeps it at or above 1.
fn human_time(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

fn human_throughput(throughput: Option<(ThroughputKind, u64)>, ns: f64) -> String {
    let Some((kind, amount)) = throughput else {
        return "-".to_owned();
    };
    if ns <= 0.0 {
        return "-".to_owned();
    }
    let per_second = amount as f64 / (ns / 1e9);
    match kind {
        ThroughputKind::Bytes => format!("{:.1} MB/s", per_second / 1e6),
        ThroughputKind::Elements if per_second >= 1e9 => {
            format!("{:.2} G elem/s", per_second / 1e9)
        }
        ThroughputKind::Elements if per_second >= 1e6 => {
            format!("{:.2} M elem/s", per_second / 1e6)
        }
        ThroughputKind::Elements if per_second >= 1e3 => {
            format!("{:.2} K elem/s", per_second / 1e3)
        }
        ThroughputKind::Elements => format!("{per_second:.1} elem/s"),
    }
}

/// The summary as a Markdown table (aligned, so it reads as plain text too).
fn table(rows: &[Row]) -> String {
    let header = ["crate", "benchmark", "time (mean)", "throughput"];
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|row| {
            [
                row.krate.clone(),
                row.id.clone(),
                human_time(row.mean_ns),
                human_throughput(row.throughput, row.mean_ns),
            ]
        })
        .collect();
    let mut widths = header.map(|title| title.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 4]| {
        let mut line = String::from("|");
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            // Numbers right-aligned, names left-aligned.
            if i >= 2 {
                line.push_str(&format!(" {}{cell} |", " ".repeat(pad)));
            } else {
                line.push_str(&format!(" {cell}{} |", " ".repeat(pad)));
            }
        }
        line.push('\n');
        line
    };
    let mut text = line(header);
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(i, width)| {
            if i >= 2 {
                format!("{}:", "-".repeat(width - 1))
            } else {
                "-".repeat(*width)
            }
        })
        .collect();
    text.push_str(&line([&rule[0], &rule[1], &rule[2], &rule[3]]));
    for row in &cells {
        text.push_str(&line([&row[0], &row[1], &row[2], &row[3]]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(human_time(12.34), "12.3 ns");
        assert_eq!(human_time(1_500.0), "1.500 µs");
        assert_eq!(human_time(2_000_000.0), "2.000 ms");
        assert_eq!(human_time(3e9), "3.000 s");
        assert_eq!(
            human_throughput(Some((ThroughputKind::Bytes, 10_000_000)), 1e9),
            "10.0 MB/s"
        );
        assert_eq!(
            human_throughput(Some((ThroughputKind::Elements, 5_000)), 1e9),
            "5.00 K elem/s"
        );
        assert_eq!(human_throughput(None, 1.0), "-");
    }

    #[test]
    fn usage_lists_every_subcommand() {
        let text = usage();
        assert!(text.contains("bench") && text.contains("help"));
    }
}
