//! `agent batch`: many headless sessions at once, one per task of a task file, each in its
//! own checkout, up to `jobs` at a time; a result line per task as it ends.
//!
//! The output folder (`--out`, default `./agent-batch/`) holds `results.jsonl`
//! ([`ResultsFile`]), `worktrees/ID/` (each task's checkout: a detached git worktree of a
//! local repository, or a clone of a URL), `diffs/ID.diff` (what the task changed) and
//! `sessions/ID` (the id of the task's session, so a rerun continues it). The sessions'
//! transcripts are where any session's are (`transcript_path` in the results).
//!
//! A rerun of the same command skips the tasks whose last result is `done`, continues the
//! sessions of tasks that were interrupted (a killed batch: their checkout and session are
//! kept), and runs the failed and stopped ones again. The tasks run in the process, as
//! peers over the session library, each a [`crate::Session`] opened from the batch's
//! [`Options`] in its checkout.

mod checkout;
mod progress;
mod report;
mod results;
mod tasks;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::Options;

pub use progress::{LineProgress, Progress, TerminalProgress};
pub use report::{report, table};
pub use results::{ResultsFile, Status, TaskResult};
pub use tasks::{Shard, Task, read_tasks};

/// What went wrong with a batch (a task's own failure is its result, not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// A line of the task file is not a task.
    #[error("{}:{line}: {why}", file.display())]
    Task {
        /// The task file.
        file: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// A line of `results.jsonl` is not a result.
    #[error("{}:{line}: not a task result ({why})", file.display())]
    Results {
        /// The results file.
        file: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// `--shard` is not `INDEX/COUNT` with 1 <= INDEX <= COUNT.
    #[error("--shard {0:?}: give INDEX/COUNT, INDEX from 1 to COUNT (2/3)")]
    Shard(String),
    /// `--shard-count` without a usable `JOB_COMPLETION_INDEX`.
    #[error("--shard-count {count}: {why}")]
    JobIndex {
        /// The count given.
        count: usize,
        /// What is wrong with the index.
        why: String,
    },
    /// The task file cannot be read.
    #[error("the task file {}: {error}", path.display())]
    TaskFile {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A task's checkout could not be made.
    #[error("task {id}: its checkout: {why}")]
    Checkout {
        /// The task.
        id: String,
        /// Git's message.
        why: String,
    },
    /// A file of the output folder could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

impl BatchError {
    /// Whether it is the user's input that is wrong (the task file, the shard), not the
    /// batch's run.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Task { .. } | Self::Shard(_) | Self::JobIndex { .. } | Self::TaskFile { .. }
        )
    }

    fn io(path: &Path, error: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            error,
        }
    }
}

/// How a batch runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BatchOptions {
    /// The output folder.
    pub out: PathBuf,
    /// Tasks running at once.
    pub jobs: usize,
    /// The slice of the task file this run takes.
    pub shard: Option<Shard>,
    /// The most the whole batch may cost, in dollars: no task starts once it is spent, and
    /// each task's own budget is at most what is left.
    pub max_budget_usd: Option<f64>,
    /// The task file's folder (local repositories are relative to it).
    pub base: PathBuf,
    /// Every session's events on stdout as stream-json lines ([`crate::stream_json`]), each
    /// with its task's `task_id`, and a `task_result` line (the task's results.jsonl object)
    /// as each task ends.
    pub stream_json: bool,
}

impl BatchOptions {
    /// The defaults for a task file in `base`: `./agent-batch/`, [`default_jobs`], every
    /// task, no total budget.
    pub fn new(base: PathBuf) -> Self {
        Self {
            out: PathBuf::from("agent-batch"),
            jobs: default_jobs(),
            shard: None,
            max_budget_usd: None,
            base,
            stream_json: false,
        }
    }
}

/// Tasks at once by default: 4 per core (a session mostly waits for the model; about
/// 17 MiB each), at most 32.
pub fn default_jobs() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores * 4).clamp(1, 32)
}

/// Stops a batch: [`Stop::no_more`] starts no new task (the first Ctrl-C);
/// [`Stop::abort`] also stops the running ones, as Esc stops a turn (the second).
#[derive(Clone, Debug, Default)]
pub struct Stop {
    no_more: CancellationToken,
    abort: CancellationToken,
}

impl Stop {
    /// Starts no new task.
    pub fn no_more(&self) {
        self.no_more.cancel();
    }

    /// Stops the running tasks too.
    pub fn abort(&self) {
        self.no_more.cancel();
        self.abort.cancel();
    }

    /// Whether new tasks are stopped.
    pub fn stopping(&self) -> bool {
        self.no_more.is_cancelled()
    }
}

/// What a batch did.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Summary {
    /// Tasks skipped: done in an earlier run.
    pub skipped: usize,
    /// Results of this run, in the order the tasks ended.
    pub results: Vec<TaskResult>,
    /// Tasks not started (stopped, or the budget spent).
    pub not_started: usize,
    /// What this run cost, in dollars (tasks without a price count 0).
    pub cost_usd: f64,
}

impl Summary {
    /// The batch's exit code: 0 when every task it ran is done and none was left unstarted,
    /// else 1.
    pub fn exit_code(&self) -> u8 {
        u8::from(
            self.not_started > 0
                || self
                    .results
                    .iter()
                    .any(|result| result.status != Status::Done),
        )
    }
}

/// Runs `tasks` (the task file's, in order) as [`BatchOptions`] say, from `base` (the
/// batch's session options: model, mode, rules, settings), telling `progress`; `stop` stops
/// it. Each result is appended to `results.jsonl` as its task ends.
///
/// # Errors
///
/// The output folder or its results file cannot be used, or a result cannot be written
/// (the batch stops: what is not written would be run again).
pub async fn run(
    base: &Options,
    tasks: Vec<Task>,
    batch: &BatchOptions,
    progress: &mut dyn Progress,
    stop: &Stop,
) -> Result<Summary, BatchError> {
    std::fs::create_dir_all(&batch.out).map_err(|error| BatchError::io(&batch.out, error))?;
    let out =
        std::fs::canonicalize(&batch.out).map_err(|error| BatchError::io(&batch.out, error))?;
    let results = ResultsFile::new(&out);
    let earlier = results.read()?;
    let mut summary = Summary::default();
    let mut queue = std::collections::VecDeque::new();
    for (position, task) in tasks.into_iter().enumerate() {
        if batch.shard.is_some_and(|shard| !shard.takes(position)) {
            continue;
        }
        if earlier
            .iter()
            .any(|result| result.id == task.id && result.status == Status::Done)
        {
            summary.skipped += 1;
            continue;
        }
        queue.push_back(task);
    }
    progress.begin(queue.len(), summary.skipped);
    // One rate limit for the whole batch: a 429 one session meets, every session waits for;
    // and one connection pool: a task's requests reuse the connections earlier tasks opened.
    let mut base = base.clone();
    base.model
        .rate_gate
        .get_or_insert_with(provider::RateGate::new);
    base.model
        .transports
        .get_or_insert_with(provider::TransportPool::new);
    let base = &base;
    let mut running: JoinSet<TaskResult> = JoinSet::new();
    loop {
        while running.len() < batch.jobs.max(1) && !stop.stopping() && !spent(batch, &summary) {
            let Some(task) = queue.pop_front() else { break };
            progress.started(&task.id);
            let options = task_options(base, &task, batch, &summary);
            let (base_dir, out, abort) = (batch.base.clone(), out.clone(), stop.abort.clone());
            let lines = batch.stream_json.then(|| tagged(&task.id));
            running
                .spawn(async move { run_task(options, task, (base_dir, out), lines, abort).await });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        let result = match joined {
            Ok(result) => result,
            // A task's panic is a bug; its result is lost and it runs again next time.
            Err(error) => {
                progress.note(&format!("a task's worker failed: {error}"));
                continue;
            }
        };
        results.append(&result)?;
        if batch.stream_json
            && let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(&result)
        {
            let mut line = serde_json::json!({"type": "task_result", "task_id": result.id});
            if let Some(line) = line.as_object_mut() {
                line.extend(fields);
            }
            crate::stream_json::stdout_line(&line);
        }
        summary.cost_usd += result.total_cost_usd.unwrap_or(0.0);
        progress.finished(&result, summary.cost_usd);
        summary.results.push(result);
    }
    summary.not_started = queue.len();
    if summary.not_started > 0
        && !stop.stopping()
        && let Some(budget) = batch.max_budget_usd
    {
        progress.note(&format!(
            "the batch's budget of ${budget:.4} is spent (${:.4}; a task that had started could go past it): no more tasks started",
            summary.cost_usd
        ));
    }
    progress.end(&summary);
    Ok(summary)
}

/// Whether the batch's budget is spent.
fn spent(batch: &BatchOptions, summary: &Summary) -> bool {
    batch
        .max_budget_usd
        .is_some_and(|budget| summary.cost_usd >= budget)
}

/// The session options of `task`: the batch's, with the task's model, limits, rules and
/// mode, and a budget within what is left of the batch's.
fn task_options(base: &Options, task: &Task, batch: &BatchOptions, summary: &Summary) -> Options {
    let mut options = base.clone();
    if let Some(model) = &task.model {
        options.model.model = Some(model.clone());
    }
    if let Some(turns) = task.max_turns {
        options.limits.max_turns = Some(turns);
    }
    let left = batch
        .max_budget_usd
        .map(|budget| (budget - summary.cost_usd).max(0.0));
    options.limits.max_budget_usd = match (task.max_budget_usd, left) {
        (Some(own), Some(left)) => Some(own.min(left)),
        (own, left) => own.or(left).or(options.limits.max_budget_usd),
    };
    if let Some(rules) = &task.allowed_tools {
        options
            .permissions
            .allowed_tools
            .extend(rules.iter().cloned());
    }
    if let Some(mode) = task
        .permission_mode
        .as_deref()
        .and_then(|mode| mode.parse().ok())
    {
        options.permissions.mode = Some(mode);
    }
    options
}

/// The stream-json sink of task `id`: each line on stdout with `"task_id": id`.
fn tagged(id: &str) -> crate::stream_json::Sink {
    let id = serde_json::Value::String(id.to_owned());
    Box::new(move |mut line| {
        if let Some(fields) = line.as_object_mut() {
            fields.insert("task_id".to_owned(), id.clone());
        }
        crate::stream_json::stdout_line(&line);
    })
}

/// Runs one task to its end: its checkout (from the task file's folder `base`, under the
/// output folder `out`), its session (continued when an earlier run was interrupted; its
/// stream-json lines into `lines`, when given), its diff. Never fails: a failure is its
/// result.
async fn run_task(
    mut options: Options,
    task: Task,
    (base, out): (PathBuf, PathBuf),
    lines: Option<crate::stream_json::Sink>,
    abort: CancellationToken,
) -> TaskResult {
    let started = Instant::now();
    let mut result = TaskResult::failed(&task.id, String::new());
    let (dir, start) = match checkout::prepare(&task, &base, &out).await {
        Ok(checkout) => checkout,
        Err(error) => {
            result.result = error.to_string();
            result.duration_ms = millis(started.elapsed());
            return result;
        }
    };
    let marker = out.join("sessions").join(&task.id);
    options.cwd = Some(dir.clone());
    options.no_snapshots = true;
    // An interrupted run's session goes on where it was.
    options.resume.resume = std::fs::read_to_string(&marker)
        .ok()
        .map(|id| id.trim().to_owned())
        .filter(|id| !id.is_empty());
    let ran = run_session(
        &options,
        &task,
        (&marker, lines),
        abort.clone(),
        &mut result,
    )
    .await;
    if let Err(error) = ran {
        result.result = format!("{error:#}");
    }
    match checkout::diff(&task.id, &dir, &start, &out).await {
        Ok(path) => result.diff_path = Some(path),
        Err(error) if result.result.is_empty() => result.result = error.to_string(),
        Err(_) => {}
    }
    if abort.is_cancelled() && result.status != Status::Done {
        result.status = Status::Stopped;
    }
    result.duration_ms = millis(started.elapsed());
    result
}

/// Opens the task's session (its id written to `marker`), runs its prompt (its stream-json
/// lines into `lines`, when given) and fills `result` from the outcome.
async fn run_session(
    options: &Options,
    task: &Task,
    (marker, lines): (&Path, Option<crate::stream_json::Sink>),
    abort: CancellationToken,
    result: &mut TaskResult,
) -> anyhow::Result<()> {
    let mut session = match crate::Session::open(options, None, None) {
        Ok(session) => session,
        // The interrupted session's transcript is gone: a new session, in the same checkout.
        Err(_) if options.resume.resume.is_some() => {
            let mut fresh = options.clone();
            fresh.resume.resume = None;
            crate::Session::open(&fresh, None, None)?
        }
        Err(error) => return Err(error),
    };
    if let Some(folder) = marker.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::write(marker, format!("{}\n", session.session_id()))?;
    result.session_id = Some(session.session_id().to_owned());
    session.gather_context().await;
    let mut observer = TaskObserver {
        meter: crate::cost::Meter::new(session.price_overrides()),
        lines: lines.map(|sink| crate::stream_json::Lines::new(session.session_id(), sink)),
    };
    if let Some(lines) = &mut observer.lines {
        lines.write(crate::sdk::init_message(&session, &[]));
    }
    let started = Instant::now();
    let outcome = session
        .turn(task.prompt.clone(), &mut observer, abort)
        .await;
    result.transcript_path = session
        .has_transcript()
        .then(|| session.transcript_path().to_path_buf());
    session.end(crate::EndReason::Other).await;
    let outcome = outcome?;
    let report = observer.meter.result(
        &outcome,
        &result.session_id.clone().unwrap_or_default(),
        started.elapsed(),
    );
    if let Some(lines) = &mut observer.lines {
        lines.write(report.clone());
    }
    let usage = observer.meter.total_usage(&outcome);
    let exit_code = crate::sdk::exit_code(&outcome.terminal).0;
    result.exit_code = exit_code;
    result.status = match exit_code {
        0 => Status::Done,
        130 => Status::Stopped,
        _ => Status::Failed,
    };
    result.total_cost_usd = report["total_cost_usd"].as_f64();
    result.input_tokens = usage.input_tokens;
    result.output_tokens = usage.output_tokens;
    result.cache_creation_input_tokens = usage.cache_creation_input_tokens.unwrap_or(0);
    result.cache_read_input_tokens = usage.cache_read_input_tokens.unwrap_or(0);
    result.num_turns = outcome.turns;
    result.result = if exit_code == 0 {
        outcome.result.clone()
    } else {
        report["errors"][0]
            .as_str()
            .map_or_else(|| outcome.result.clone(), str::to_owned)
    };
    Ok(())
}

/// A task's turn, seen for its figures and, with stream-json, written as lines.
struct TaskObserver {
    meter: crate::cost::Meter,
    lines: Option<crate::stream_json::Lines>,
}

impl crate::Observer for TaskObserver {
    fn event(&mut self, event: &loop_core::LoopEvent) {
        self.meter.event(event);
        if let Some(lines) = &mut self.lines {
            lines.event(event);
        }
    }

    fn subagent(&mut self, event: &crate::SubagentEvent) {
        self.meter.subagent(event);
        if let Some(lines) = &mut self.lines {
            lines.subagent(event);
        }
    }
}

impl TaskResult {
    fn failed(id: &str, why: String) -> Self {
        Self {
            id: id.to_owned(),
            status: Status::Failed,
            exit_code: 1,
            total_cost_usd: None,
            input_tokens: 0,
            output_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            num_turns: 0,
            duration_ms: 0,
            diff_path: None,
            transcript_path: None,
            result: why,
            session_id: None,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What `agent batch` is asked to do: its command line.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Invocation {
    /// The task file (with `report_only`, a `results.jsonl`).
    pub file: PathBuf,
    /// The output folder.
    pub out: PathBuf,
    /// Tasks at once [default: [`default_jobs`]].
    pub jobs: Option<usize>,
    /// `--shard INDEX/COUNT`, as given.
    pub shard: Option<String>,
    /// `--shard-count COUNT`: the slice is a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`.
    pub shard_count: Option<usize>,
    /// `--report`: show the results' table and write `report.html`; run nothing.
    pub report_only: bool,
    /// `--output-format stream-json`: see [`BatchOptions::stream_json`].
    pub stream_json: bool,
}

impl Invocation {
    /// Runs the task file `file` into `./agent-batch/`, everything else by default.
    pub fn new(file: PathBuf) -> Self {
        Self {
            file,
            out: PathBuf::from("agent-batch"),
            jobs: None,
            shard: None,
            shard_count: None,
            report_only: false,
            stream_json: false,
        }
    }
}

/// `agent batch FILE`: reads the task file (local repositories are relative to its folder),
/// writes into the output folder with `jobs` at once ([`default_jobs`] by default; the
/// budget of `base` is the whole batch's), takes the shard (`shard`, else a Kubernetes
/// Indexed Job's `JOB_COMPLETION_INDEX` of `shard_count`), runs the batch with a progress
/// bar at a terminal (a line per task elsewhere) until it ends or Ctrl-C stops it (the
/// first starts no new task, the second stops the running ones), and says where the
/// results are. Returns the exit code ([`Summary::exit_code`]). With `report_only`, `file`
/// is a `results.jsonl`: its table is printed and `report.html` written ([`report`]).
///
/// # Errors
///
/// The task file cannot be read or holds a bad line; a bad shard; [`run`]'s errors.
pub async fn command(base: &Options, invocation: &Invocation) -> Result<u8, BatchError> {
    let Invocation {
        file,
        out,
        jobs,
        shard,
        shard_count,
        report_only,
        stream_json,
    } = invocation;
    let (file, jobs, shard_count) = (file.as_path(), *jobs, *shard_count);
    if *report_only {
        let (table, page) = report(file)?;
        print!("{table}");
        eprintln!("agent batch: the report page is {}", page.display());
        return Ok(0);
    }
    let mut base = base.clone();
    let mut batch = BatchOptions::new(file.parent().map(Path::to_path_buf).unwrap_or_default());
    batch.out.clone_from(out);
    batch.jobs = jobs.unwrap_or(batch.jobs);
    batch.stream_json = *stream_json;
    // `--max-budget-usd` is the whole batch's.
    batch.max_budget_usd = base.limits.max_budget_usd.take();
    let base = &base;
    let text = std::fs::read_to_string(file).map_err(|error| BatchError::TaskFile {
        path: file.to_path_buf(),
        error,
    })?;
    let tasks = read_tasks(&text, file)?;
    batch.shard = match (shard.as_deref(), shard_count) {
        (Some(shard), _) => Some(Shard::parse(shard)?),
        (None, Some(count)) => {
            // Never every task on every pod: without its index a pod runs nothing.
            let index = std::env::var("JOB_COMPLETION_INDEX").map_err(|_| BatchError::JobIndex {
                count,
                why: "JOB_COMPLETION_INDEX is not set (Kubernetes sets it in an Indexed Job's pods; by hand, give --shard INDEX/COUNT)".into(),
            })?;
            Some(Shard::from_completion_index(&index, count)?)
        }
        (None, None) => None,
    };
    let stop = Stop::default();
    let signals = stop.clone();
    let listener = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nagent batch: no new tasks; Ctrl-C again stops the running ones");
            signals.no_more();
        }
        if tokio::signal::ctrl_c().await.is_ok() {
            signals.abort();
        }
    });
    let mut progress: Box<dyn Progress> = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        Box::new(TerminalProgress::default())
    } else {
        Box::new(LineProgress::default())
    };
    let summary = run(base, tasks, &batch, progress.as_mut(), &stop).await;
    listener.abort();
    let summary = summary?;
    eprintln!(
        "agent batch: results in {}",
        ResultsFile::new(&batch.out).path().display()
    );
    Ok(summary.exit_code())
}
