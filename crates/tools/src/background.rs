//! Background tasks, as Claude Code runs them (a subagent started with `run_in_background`
//! is one too: [`BackgroundTasks::start_agent`]): `Bash` with `run_in_background: true`
//! starts the command in the sandbox profile the call would get in the foreground and
//! returns its id at once; `TaskOutput` reads what it printed since the last read (waiting
//! for its end when asked); `TaskStop` ends its process group; when it ends, a
//! notification waits for the session's next request ([`BackgroundTasks::notifications`]).
//!
//! Every task's output goes to a file in the session's tool-results folder (the first
//! [`FILE_BYTES`] as they come, then the last [`TAIL_BYTES`] when the task ends); the
//! session keeps at most [`HEAD_BYTES`] + [`TAIL_BYTES`] of each in memory. A task runs in a
//! process group of its own, through the session's guard when it has one (the group dies
//! with the agent, SIGKILL included), and ends when the session ends
//! ([`BackgroundTasks::stop_all`]: SIGTERM, then SIGKILL after [`STOP_GRACE`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use crate::common::{parse_input, truncate_middle};

/// What of a task's output the file keeps as it comes: the first 1 MiB.
pub const FILE_BYTES: u64 = 1 << 20;

/// What of a task's output is kept in memory from its start: 256 KiB.
pub const HEAD_BYTES: usize = 256 * 1024;

/// What of a task's output is kept in memory from its end (and added to its file when it
/// ends): 256 KiB.
pub const TAIL_BYTES: usize = 256 * 1024;

/// How long a stopped task has between SIGTERM and SIGKILL: 2 s.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// How long `TaskOutput` waits by default (`timeout`), in milliseconds: 30 s.
pub const DEFAULT_WAIT_MS: u64 = 30_000;

/// The longest `TaskOutput` may wait, in milliseconds: 10 minutes (Bash's longest timeout).
pub const MAX_WAIT_MS: u64 = 600_000;

/// The most events (stdout lines) of a monitor one notification carries.
pub const MONITOR_EVENTS: usize = 50;

/// A monitor's default deadline: 5 minutes (Claude Code's).
pub const MONITOR_TIMEOUT_MS: u64 = 300_000;

/// A monitor's longest deadline: 1 hour (Claude Code's).
pub const MONITOR_MAX_TIMEOUT_MS: u64 = 3_600_000;

/// The most lines of a finished task's output its notification carries.
pub const NOTIFICATION_LINES: usize = 20;

/// Where a task stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// Ended by itself: its exit code, or the signal that ended it.
    Exited(ExitStatus),
    /// Ended by `TaskStop` or the session's end.
    Stopped,
}

impl TaskStatus {
    /// `running`, `completed` (exit code 0), `failed` or `killed`, as Claude Code names them.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Exited(status) if status.success() => "completed",
            Self::Exited(_) => "failed",
            Self::Stopped => "killed",
        }
    }

    fn exit_code(&self) -> Option<i32> {
        match self {
            Self::Exited(status) => status.code().or_else(|| status.signal().map(|s| 128 + s)),
            _ => None,
        }
    }
}

/// A task's output, bounded: its first [`HEAD_BYTES`] and last [`TAIL_BYTES`].
#[derive(Default)]
struct Output {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Bytes received.
    total: u64,
    /// How far `TaskOutput` has read.
    read: u64,
    /// How far a monitor's events were told.
    told: u64,
}

impl Output {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = HEAD_BYTES - self.head.len();
        let (head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(head);
        self.tail.extend(rest);
        if self.tail.len() > TAIL_BYTES {
            let excess = self.tail.len() - TAIL_BYTES;
            self.tail.drain(..excess);
        }
    }

    /// Where the tail starts in the whole output.
    fn tail_start(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    /// What came after byte `from`, as text, with what was not kept counted; the bytes up to
    /// the end are then read.
    fn since(&mut self, from: u64) -> String {
        let (head, dropped, tail) = self.kept_since(from);
        let mut bytes = head.to_vec();
        if dropped > 0 {
            bytes.extend_from_slice(format!("\n[... {dropped} bytes not kept ...]\n").as_bytes());
        }
        bytes.extend(tail);
        self.read = self.total;
        crate::text::strip_escapes(&String::from_utf8_lossy(&bytes)).into_owned()
    }

    /// What is kept of the output after byte `from`: the head's part, how many bytes after
    /// it were not kept (the dropped middle), and the tail's part.
    fn kept_since(&self, from: u64) -> (&[u8], u64, Vec<u8>) {
        let head_end = self.head.len() as u64;
        let head = self
            .head
            .get(usize::try_from(from).unwrap_or(usize::MAX)..)
            .unwrap_or_default();
        // The tail starts where the head ends, or later.
        let tail_start = self.tail_start();
        let dropped = tail_start.saturating_sub(from.max(head_end));
        let skip = from.saturating_sub(tail_start).min(self.tail.len() as u64);
        let tail = self
            .tail
            .iter()
            .skip(usize::try_from(skip).unwrap_or(usize::MAX))
            .copied()
            .collect();
        (head, dropped, tail)
    }

    /// A monitor's whole lines since they were last told (at most [`MONITOR_EVENTS`] of
    /// them, the rest counted), which are then told; `None` when there is none.
    fn new_events(&mut self) -> Option<String> {
        let (head, _, tail) = self.kept_since(self.told);
        let head_len = head.len();
        let mut bytes = head.to_vec();
        bytes.extend(tail);
        // Whole lines only: the rest waits for its end (what was not kept is skipped).
        let end = bytes.iter().rposition(|byte| *byte == b'\n')? + 1;
        self.told = if end <= head_len {
            self.told + end as u64
        } else {
            self.told.max(self.tail_start()) + (end - head_len) as u64
        };
        let text = crate::text::strip_escapes(&String::from_utf8_lossy(&bytes[..end])).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        let dropped = lines.len().saturating_sub(MONITOR_EVENTS);
        let mut kept = lines[dropped..].join("\n");
        if dropped > 0 {
            kept = format!("[{dropped} earlier events not shown]\n{kept}");
        }
        Some(truncate_middle(&kept, 8_000, 0))
    }

    /// The last `lines` lines.
    fn last_lines(&self, lines: usize) -> String {
        let bytes: Vec<u8> = if self.tail.is_empty() {
            self.head.clone()
        } else {
            self.tail.iter().copied().collect()
        };
        let text = crate::text::strip_escapes(&String::from_utf8_lossy(&bytes)).into_owned();
        let kept: Vec<&str> = text.trim_end().lines().rev().take(lines).collect();
        kept.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// One background task: a command, or a subagent ([`BackgroundTasks::start_agent`]).
pub struct Task {
    id: String,
    /// The tool_use that started it.
    tool_use_id: Option<String>,
    command: String,
    description: Option<String>,
    started: Instant,
    file: PathBuf,
    /// A command's process group.
    group: Option<Pid>,
    /// A subagent's stop.
    cancel: Option<tokio_util::sync::CancellationToken>,
    /// A monitor: each stdout line is an event, told as it comes.
    monitor: bool,
    state: Mutex<TaskState>,
    ended: tokio::sync::watch::Receiver<bool>,
}

struct TaskState {
    output: Output,
    status: TaskStatus,
    /// Its end was told (a notification, or a `TaskOutput` that saw it).
    told: bool,
    /// `TaskStop` (or the session's end) asked it to stop.
    stopping: bool,
}

impl Default for TaskState {
    /// Running, nothing printed yet.
    fn default() -> Self {
        Self {
            output: Output::default(),
            status: TaskStatus::Running,
            told: false,
            stopping: false,
        }
    }
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

impl Task {
    fn lock(&self) -> std::sync::MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it is a subagent (its output is its report).
    fn is_agent(&self) -> bool {
        self.cancel.is_some() && !self.monitor
    }

    /// Its id (`bash_1`, `agent_1`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Claude Code's name for its kind: `local_bash` or `local_agent`.
    pub fn kind(&self) -> &'static str {
        match (self.monitor, self.group.is_some()) {
            (true, _) => "monitor",
            (false, true) => "local_bash",
            (false, false) => "local_agent",
        }
    }

    /// The tool_use that started it (a Bash, Monitor or Task call).
    pub fn tool_use_id(&self) -> Option<&str> {
        self.tool_use_id.as_deref()
    }

    /// The command (a subagent's: its type and description).
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Where it stands now.
    pub fn status(&self) -> TaskStatus {
        self.lock().status.clone()
    }

    /// How long it has run (or ran).
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Its last `lines` lines of output (escape sequences removed).
    pub fn tail(&self, lines: usize) -> String {
        self.lock().output.last_lines(lines)
    }

    /// The file its output goes to.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// What names it for people: its description, else its command.
    pub fn label(&self) -> &str {
        self.description.as_deref().unwrap_or(&self.command)
    }

    /// Waits for its end, at most `limit`; whether it ended.
    async fn wait(&self, limit: Duration) -> bool {
        let mut ended = self.ended.clone();
        tokio::time::timeout(limit, ended.wait_for(|ended| *ended))
            .await
            .is_ok()
    }

    /// Stops it: SIGTERM to its group, then SIGKILL after [`STOP_GRACE`] (a subagent: its
    /// cancellation); `false` when it had already ended.
    pub async fn stop(&self) -> bool {
        {
            let mut state = self.lock();
            if state.status != TaskStatus::Running {
                return false;
            }
            state.stopping = true;
        }
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
            self.wait(STOP_GRACE).await;
            return true;
        }
        let Some(group) = self.group else {
            return false;
        };
        // The process itself too: the guard may not have made its group yet.
        let signal = |signal| {
            let _ = nix::sys::signal::kill(group, signal);
            let _ = killpg(group, signal);
        };
        signal(Signal::SIGTERM);
        if !self.wait(STOP_GRACE).await {
            signal(Signal::SIGKILL);
            self.wait(Duration::from_secs(1)).await;
        }
        true
    }

    /// The line that tells its end (`Background command "npm test" completed (exit code
    /// 0)`), as of `status`.
    pub fn summary(&self, status: &TaskStatus) -> String {
        let label = self.label();
        if self.monitor && self.group.is_none() {
            return match status {
                TaskStatus::Stopped => format!("Monitor \"{label}\" was stopped"),
                TaskStatus::Exited(status) if status.success() => {
                    format!("Monitor \"{label}\" ended: the WebSocket closed")
                }
                _ => format!("Monitor \"{label}\" failed: the WebSocket broke"),
            };
        }
        match (self.is_agent(), status) {
            (true, TaskStatus::Stopped) => format!("Agent \"{label}\" was stopped"),
            (true, TaskStatus::Exited(status)) if status.success() => {
                format!("Agent \"{label}\" completed")
            }
            (true, _) => format!("Agent \"{label}\" did not finish its task"),
            (false, TaskStatus::Stopped) => format!("Background command \"{label}\" was stopped"),
            (false, status) => match status.exit_code() {
                Some(0) => format!("Background command \"{label}\" completed (exit code 0)"),
                Some(code) => {
                    format!("Background command \"{label}\" failed with exit code {code}")
                }
                None => format!("Background command \"{label}\" ended"),
            },
        }
    }

    /// Its `<task-notification>` for the model.
    fn notification(&self, state: &TaskState) -> String {
        let summary = self.summary(&state.status);
        if self.is_agent() {
            let report = state.output.last_lines(usize::MAX);
            return format!(
                "<task-notification>\n<task-id>{}</task-id>\n<status>{}</status>\n<summary>{summary}</summary>\n<result>\n{}\n</result>\n</task-notification>",
                self.id,
                state.status.as_str(),
                truncate_middle(&report, crate::bash::MAX_OUTPUT_CHARS, 0)
            );
        }
        let tail = state.output.last_lines(NOTIFICATION_LINES);
        format!(
            "<task-notification>\n<task-id>{}</task-id>\n<output-file>{}</output-file>\n<status>{}</status>\n{}<summary>{summary}</summary>\n<last-lines>\n{}\n</last-lines>\n</task-notification>",
            self.id,
            self.file.display(),
            state.status.as_str(),
            state
                .status
                .exit_code()
                .map(|code| format!("<exit-code>{code}</exit-code>\n"))
                .unwrap_or_default(),
            truncate_middle(&tail, 4_000, 0)
        )
    }
}

/// A command ready to start in the background: a process group of its own (or the guard's
/// session, through the wrapper), its stdout and stderr to be piped.
pub(crate) struct Launch {
    pub command: std::process::Command,
    /// The sandbox's placeholders, kept until the task ends.
    pub placeholders: Option<sandbox::PlaceholderGuard>,
    /// The command as the model wrote it.
    pub text: String,
    pub description: Option<String>,
    /// The tool_use that started it.
    pub tool_use_id: Option<String>,
    /// A monitor (its lines are events).
    pub monitor: bool,
    /// When it is stopped if it has not ended (a monitor's `timeout_ms`).
    pub deadline: Option<Duration>,
}

/// A session's background tasks, shared by its tool set and every subagent's. Cheap to
/// clone.
#[derive(Clone)]
pub struct BackgroundTasks {
    inner: Arc<Inner>,
}

struct Inner {
    tasks: Mutex<Vec<Arc<Task>>>,
    next: AtomicU64,
    /// Where output files go (the session's tool-results folder's `tasks/`).
    dir: PathBuf,
    /// The program and first arguments every task starts through (the agent's guard).
    wrapper: Vec<OsString>,
    /// Told of each task's start and end ([`BackgroundTasks::listen`]).
    listeners: Mutex<Vec<Listener>>,
}

/// What hears of tasks starting and ending.
type Listener = Arc<dyn Fn(&TaskEvent) + Send + Sync>;

/// A task started or ended, as [`BackgroundTasks::listen`] tells it.
#[derive(Clone, Debug)]
pub enum TaskEvent {
    /// It started.
    Started(Arc<Task>),
    /// It ended (its status is set); the line that tells it ([`Task::summary`]).
    Ended(Arc<Task>, String),
    /// A monitor printed a whole line: an event for the model.
    Event(Arc<Task>),
}

impl std::fmt::Debug for BackgroundTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundTasks")
            .field("tasks", &self.tasks().len())
            .finish_non_exhaustive()
    }
}

impl BackgroundTasks {
    /// Tasks whose output files go to `dir` and which start through `wrapper` (a program and
    /// its first arguments, such as the agent's guard: the task's own command line follows
    /// them; empty: started directly, in a process group of their own).
    pub fn new(dir: PathBuf, wrapper: Vec<OsString>) -> Self {
        Self {
            inner: Arc::new(Inner {
                tasks: Mutex::new(Vec::new()),
                next: AtomicU64::new(0),
                dir,
                wrapper,
                listeners: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Tells `listener` of every task that starts or ends from now on, on the thread
    /// where that happens (it must not block).
    pub fn listen(&self, listener: impl Fn(&TaskEvent) + Send + Sync + 'static) {
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::new(listener));
    }

    fn tell(&self, event: &TaskEvent) {
        let listeners = self
            .inner
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for listener in listeners {
            listener(event);
        }
    }

    /// The wrapper tasks start through.
    pub(crate) fn wrapper(&self) -> &[OsString] {
        &self.inner.wrapper
    }

    /// Every task, oldest first.
    pub fn tasks(&self) -> Vec<Arc<Task>> {
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The task `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Task>> {
        self.tasks().into_iter().find(|task| task.id == id)
    }

    /// How many tasks are running.
    pub fn running(&self) -> usize {
        self.tasks()
            .iter()
            .filter(|task| task.status() == TaskStatus::Running)
            .count()
    }

    /// A new task's id (`PREFIX_N`, one count for every kind) and its output file, in the
    /// tasks folder (made when missing).
    fn allocate(&self, prefix: &str) -> Result<(String, PathBuf), ToolError> {
        let number = self.inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("{prefix}_{number}");
        make_private_dir(&self.inner.dir).map_err(|error| {
            ToolError::CouldNotRun(format!("could not make the tasks folder: {error}"))
        })?;
        let file = self.inner.dir.join(format!("{id}.output"));
        Ok((id, file))
    }

    /// Keeps `task` (running) among the session's; returns it and what tells its end.
    fn register(&self, task: Task) -> Arc<Task> {
        let task = Arc::new(task);
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&task));
        self.tell(&TaskEvent::Started(Arc::clone(&task)));
        task
    }

    /// `task` ended (its status is set): waiters are woken, and the listeners told.
    fn ended(&self, task: &Arc<Task>, ended: &tokio::sync::watch::Sender<bool>) {
        let status = task.status();
        let _ = ended.send(true);
        let line = format!("{} ({})", task.summary(&status), task.id);
        self.tell(&TaskEvent::Ended(Arc::clone(task), line));
    }

    /// Starts `launch` in the background (on the tokio runtime).
    ///
    /// # Errors
    ///
    /// When its output file or pipe cannot be made, or it cannot start.
    pub(crate) fn start(&self, mut launch: Launch) -> Result<Arc<Task>, ToolError> {
        let could_not = |what: &str, error: std::io::Error| {
            ToolError::CouldNotRun(format!("could not {what}: {error}"))
        };
        let (id, path) = self.allocate(if launch.monitor { "monitor" } else { "bash" })?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| could_not("make the output file", e))?;
        let (reader, writer) = std::io::pipe().map_err(|e| could_not("create a pipe", e))?;
        let pipe =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))
                .map_err(|e| could_not("read the command's output", e))?;
        let writer_for_stderr = writer
            .try_clone()
            .map_err(|e| could_not("create a pipe", e))?;
        let wrapped = !self.wrapper().is_empty();
        let mut command = tokio::process::Command::from(launch.command);
        command
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(writer_for_stderr);
        if !wrapped {
            command.process_group(0);
        }
        let spawned = command.spawn();
        drop(command);
        let mut child = spawned.map_err(|e| could_not("start bash", e))?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw)
            .ok_or_else(|| ToolError::CouldNotRun("the command exited at once".into()))?;
        crate::bash::register_group(group);
        let (ended_sender, ended) = tokio::sync::watch::channel(false);
        let task = self.register(Task {
            id,
            tool_use_id: launch.tool_use_id.take(),
            command: launch.text,
            description: launch.description.take(),
            started: Instant::now(),
            file: path,
            group: Some(group),
            cancel: None,
            monitor: launch.monitor,
            state: Mutex::new(TaskState::default()),
            ended,
        });
        let (watched, tasks) = (Arc::clone(&task), self.clone());
        let mut placeholders = launch.placeholders.take();
        if let Some(deadline) = launch.deadline {
            let timed = Arc::clone(&task);
            tokio::spawn(async move {
                if !timed.wait(deadline).await {
                    timed.stop().await;
                }
            });
        }
        tokio::spawn(async move {
            let lines = (Arc::clone(&watched), tasks.clone());
            let on_line = move || {
                if lines.0.monitor {
                    lines.1.tell(&TaskEvent::Event(Arc::clone(&lines.0)));
                }
            };
            let status = follow(&watched, pipe, &mut child, &mut file, &on_line).await;
            // Whatever the command left in its sandbox goes with it; the placeholders once
            // the last of it is gone, off the runtime's threads.
            if let Some(placeholders) = placeholders.as_mut() {
                placeholders.kill_sandbox();
            }
            crate::bash::release_sandbox(placeholders, None);
            crate::bash::unregister_group(group);
            {
                let mut state = watched.lock();
                state.status = if state.stopping {
                    TaskStatus::Stopped
                } else {
                    TaskStatus::Exited(status)
                };
                // The end of a long output, after what the file kept of its start.
                if state.output.total > FILE_BYTES {
                    let tail: Vec<u8> = state.output.tail.iter().copied().collect();
                    let _ = file.write_all(b"\n[... the middle of the output was not kept ...]\n");
                    let _ = file.write_all(&tail);
                }
            }
            tasks.ended(&watched, &ended_sender);
        });
        Ok(task)
    }

    /// Starts a subagent in the background: `run` is its whole run, giving its report and
    /// whether it completed; `cancel` stops it. Its report goes to its output file and its
    /// notification.
    ///
    /// # Errors
    ///
    /// When its output file cannot be made.
    pub fn start_agent(
        &self,
        description: String,
        prompt: String,
        tool_use_id: Option<String>,
        run: impl std::future::Future<Output = (String, bool)> + Send + 'static,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<Arc<Task>, ToolError> {
        let (id, path) = self.allocate("agent")?;
        let (ended_sender, ended) = tokio::sync::watch::channel(false);
        let task = self.register(Task {
            id,
            tool_use_id,
            command: prompt,
            description: Some(description),
            started: Instant::now(),
            file: path,
            group: None,
            cancel: Some(cancel),
            monitor: false,
            state: Mutex::new(TaskState::default()),
            ended,
        });
        let (watched, tasks) = (Arc::clone(&task), self.clone());
        tokio::spawn(async move {
            let (report, completed) = run.await;
            let _ = std::fs::write(&watched.file, &report);
            {
                let mut state = watched.lock();
                state.output.push(report.as_bytes());
                state.status = if state.stopping {
                    TaskStatus::Stopped
                } else {
                    TaskStatus::Exited(ExitStatus::from_raw(if completed { 0 } else { 1 << 8 }))
                };
            }
            tasks.ended(&watched, &ended_sender);
        });
        Ok(task)
    }

    /// Starts a WebSocket monitor on `socket`, connected: each text frame is an event (a
    /// line; its own line breaks become spaces), a binary frame a placeholder line; the
    /// socket's close ends it (completed), as does an error (failed), its deadline or
    /// TaskStop (stopped).
    ///
    /// # Errors
    ///
    /// When its output file cannot be made.
    pub(crate) fn start_socket(
        &self,
        socket: crate::socket::Connected,
    ) -> Result<Arc<Task>, ToolError> {
        let (id, path) = self.allocate("monitor")?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|error| {
                ToolError::CouldNotRun(format!("could not make the output file: {error}"))
            })?;
        let cancel = tokio_util::sync::CancellationToken::new();
        let (ended_sender, ended) = tokio::sync::watch::channel(false);
        let task = self.register(Task {
            id,
            tool_use_id: socket.tool_use_id,
            command: socket.url,
            description: Some(socket.description),
            started: Instant::now(),
            file: path,
            group: None,
            cancel: Some(cancel.clone()),
            monitor: true,
            state: Mutex::new(TaskState::default()),
            ended,
        });
        if let Some(deadline) = socket.deadline {
            let timed = Arc::clone(&task);
            tokio::spawn(async move {
                if !timed.wait(deadline).await {
                    timed.stop().await;
                }
            });
        }
        let (watched, tasks, mut stream) = (Arc::clone(&task), self.clone(), socket.stream);
        tokio::spawn(async move {
            let completed = crate::socket::follow(&mut stream, &cancel, |line| {
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                let _ = file.write_all(&bytes);
                watched.lock().output.push(&bytes);
                tasks.tell(&TaskEvent::Event(Arc::clone(&watched)));
            })
            .await;
            {
                let mut state = watched.lock();
                state.status = if state.stopping {
                    TaskStatus::Stopped
                } else {
                    TaskStatus::Exited(ExitStatus::from_raw(if completed { 0 } else { 1 << 8 }))
                };
            }
            tasks.ended(&watched, &ended_sender);
        });
        Ok(task)
    }

    /// The notifications of the tasks that ended and were not told yet; they are told now.
    pub fn notifications(&self) -> Vec<String> {
        self.tasks()
            .iter()
            .filter_map(|task| {
                let mut state = task.lock();
                if state.status == TaskStatus::Running {
                    // A monitor's events, as they come.
                    let events = task.monitor.then(|| state.output.new_events()).flatten()?;
                    return Some(format!(
                        "<task-notification>\n<task-id>{}</task-id>\n<status>running</status>\n<summary>Monitor \"{}\" reported</summary>\n<events>\n{events}\n</events>\n</task-notification>",
                        task.id,
                        task.label()
                    ));
                }
                if state.told {
                    return None;
                }
                state.told = true;
                Some(task.notification(&state))
            })
            .collect()
    }

    /// Waits until no task runs, at most `limit`; the ones still running then.
    pub async fn wait_all(&self, limit: Duration) -> Vec<Arc<Task>> {
        let deadline = tokio::time::Instant::now() + limit;
        for task in self.tasks() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            task.wait(left).await;
        }
        self.tasks()
            .into_iter()
            .filter(|task| task.status() == TaskStatus::Running)
            .collect()
    }

    /// Stops every running task (SIGTERM, SIGKILL after [`STOP_GRACE`]), all at once; the
    /// ones it stopped.
    pub async fn stop_all(&self) -> Vec<Arc<Task>> {
        let running: Vec<Arc<Task>> = self
            .tasks()
            .into_iter()
            .filter(|task| task.status() == TaskStatus::Running)
            .collect();
        let stopping: Vec<_> = running
            .iter()
            .map(|task| {
                let task = Arc::clone(task);
                tokio::spawn(async move { task.stop().await })
            })
            .collect();
        for stop in stopping {
            let _ = stop.await;
        }
        running
    }
}

/// Makes `dir` (and its parents), readable by its owner alone.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Reads `task`'s output until it ends: into memory, and into `file` up to [`FILE_BYTES`].
/// Returns how it ended.
async fn follow(
    task: &Task,
    mut pipe: tokio::net::unix::pipe::Receiver,
    child: &mut tokio::process::Child,
    file: &mut std::fs::File,
    on_line: &(dyn Fn() + Send + Sync),
) -> ExitStatus {
    let mut buffer = vec![0u8; 16 * 1024];
    let mut written: u64 = 0;
    let mut status = None;
    // Each chunk read: into the file (its first FILE_BYTES), the task's output, and a line's
    // event.
    let mut keep = |chunk: &[u8]| {
        if written < FILE_BYTES {
            let room = usize::try_from(FILE_BYTES - written).unwrap_or(usize::MAX);
            let _ = file.write_all(&chunk[..chunk.len().min(room)]);
            written += chunk.len().min(room) as u64;
        }
        task.lock().output.push(chunk);
        if chunk.contains(&b'\n') {
            on_line();
        }
    };
    loop {
        tokio::select! {
            read = pipe.read(&mut buffer) => match read {
                Ok(0) | Err(_) => break,
                Ok(count) => keep(&buffer[..count]),
            },
            waited = child.wait(), if status.is_none() => {
                status = waited.ok();
                // The rest of its output, which may not have been read yet (the file once
                // missed it when the exit was seen first), and what the shell left in the
                // background holding the pipe: a short drain.
                let drained = tokio::time::timeout(Duration::from_millis(200), async {
                    while let Ok(count) = pipe.read(&mut buffer).await {
                        if count == 0 {
                            break;
                        }
                        keep(&buffer[..count]);
                    }
                });
                let _ = drained.await;
                break;
            }
        }
    }
    match status {
        Some(status) => status,
        None => child
            .wait()
            .await
            .unwrap_or_else(|_| ExitStatus::from_raw(1 << 8)),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputInput {
    task_id: String,
    #[serde(default = "yes")]
    block: bool,
    #[serde(default)]
    timeout: Option<u64>,
}

fn yes() -> bool {
    true
}

/// `TaskOutput` (Claude Code's; `BashOutput` is its older name).
pub(crate) struct TaskOutputTool {
    tasks: BackgroundTasks,
    schema: Value,
}

impl TaskOutputTool {
    pub(crate) fn new(tasks: BackgroundTasks) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "description": "The background task's id"},
                "block": {"type": "boolean", "description": "Wait for the task to end (default true)"},
                "timeout": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS,
                    "description": "How long to wait at most, in milliseconds (default 30000)"}
            },
            "required": ["task_id"],
            "additionalProperties": false
        });
        Self { tasks, schema }
    }
}

/// The task `id`, or an error naming the ids there are.
fn find(tasks: &BackgroundTasks, id: &str) -> Result<Arc<Task>, ToolError> {
    tasks.get(id).ok_or_else(|| {
        let known: Vec<String> = tasks.tasks().iter().map(|task| task.id.clone()).collect();
        ToolError::InvalidInput(if known.is_empty() {
            format!("no background task {id}: none was started")
        } else {
            format!(
                "no background task {id}; the tasks are {}",
                known.join(", ")
            )
        })
    })
}

impl Tool for TaskOutputTool {
    fn name(&self) -> &str {
        "TaskOutput"
    }

    fn aliases(&self) -> &[&str] {
        &["BashOutput"]
    }

    fn description(&self) -> &str {
        "Returns what a background task (a Bash command, or a Task subagent, started with run_in_background) printed since the last read (a subagent: its report once it finished), and whether it is still running. With block (the default) it waits for the task to end, at most timeout milliseconds."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn timeout(&self, input: &Value) -> Option<Duration> {
        let wait = input
            .get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_WAIT_MS);
        Some(Duration::from_millis(wait.min(MAX_WAIT_MS)) + Duration::from_secs(5))
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: OutputInput = parse_input("TaskOutput", input)?;
            let task = find(&self.tasks, &input.task_id)?;
            let wait =
                Duration::from_millis(input.timeout.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS));
            let ended = if input.block && task.status() == TaskStatus::Running {
                tokio::select! {
                    ended = task.wait(wait) => ended,
                    () = context.cancel.cancelled() => false,
                }
            } else {
                task.status() != TaskStatus::Running
            };
            let (status, text) = {
                let mut state = task.lock();
                let from = state.output.read;
                let text = state.output.since(from);
                if state.status != TaskStatus::Running {
                    state.told = true;
                }
                (state.status.clone(), text)
            };
            let retrieval = match (ended, input.block) {
                (true, _) => "success",
                (false, true) => "timeout",
                (false, false) => "not_ready",
            };
            let exit = status
                .exit_code()
                .map(|code| format!("<exit_code>{code}</exit_code>\n"))
                .unwrap_or_default();
            let shown = truncate_middle(text.trim_end(), crate::bash::MAX_OUTPUT_CHARS, 0);
            let body = format!(
                "<retrieval_status>{retrieval}</retrieval_status>\n<task_id>{}</task_id>\n<task_type>{}</task_type>\n<status>{}</status>\n{exit}<output>\n{shown}\n</output>",
                task.id,
                task.kind(),
                status.as_str(),
            );
            Ok(ToolOutput::text(body).with_structured(json!({
                "retrieval_status": retrieval,
                "task": {
                    "task_id": task.id,
                    "task_type": task.kind(),
                    "status": status.as_str(),
                    "description": task.label(),
                    "output": text,
                    "exitCode": status.exit_code(),
                },
            })))
        })
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StopInput {
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    shell_id: Option<String>,
}

/// `TaskStop` (Claude Code's; `KillShell` is its older name).
pub(crate) struct TaskStopTool {
    tasks: BackgroundTasks,
    schema: Value,
}

impl TaskStopTool {
    pub(crate) fn new(tasks: BackgroundTasks) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "description": "The background task to stop"},
                "shell_id": {"type": "string", "description": "Deprecated: task_id"}
            },
            "additionalProperties": false
        });
        Self { tasks, schema }
    }
}

impl Tool for TaskStopTool {
    fn name(&self) -> &str {
        "TaskStop"
    }

    fn aliases(&self) -> &[&str] {
        &["KillShell"]
    }

    fn description(&self) -> &str {
        "Stops a background task started with run_in_background: a Bash command's whole process group gets SIGTERM, then SIGKILL after 2 s; a subagent is interrupted."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// It only ends what the model started.
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: StopInput = parse_input("TaskStop", input)?;
            let Some(id) = input.task_id.or(input.shell_id) else {
                return Err(ToolError::InvalidInput("TaskStop needs task_id".into()));
            };
            let task = find(&self.tasks, &id)?;
            if !task.stop().await {
                let status = task.status();
                return Err(ToolError::InvalidInput(format!(
                    "background task {id} had already ended ({}{})",
                    status.as_str(),
                    status
                        .exit_code()
                        .map(|code| format!(", exit code {code}"))
                        .unwrap_or_default()
                )));
            }
            task.lock().told = true;
            let mut message = format!("Stopped background task {id} ({})", task.command);
            // A subagent's last words (where its worktree was left, say) are its report.
            if task.is_agent() {
                let report = task.tail(5);
                if !report.is_empty() {
                    message.push_str(&format!("; it reported: {report}"));
                }
            }
            Ok(ToolOutput::text(message.clone()).with_structured(json!({
                "message": message,
                "task_id": id,
                "task_type": task.kind(),
                "command": task.command,
            })))
        })
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MonitorInput {
    description: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    persistent: bool,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    ws: Option<SocketInput>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SocketInput {
    url: String,
    #[serde(default)]
    protocols: Vec<String>,
}

/// `Monitor` (Claude Code's): a command whose stdout lines are events, told to the model
/// with its next requests as they come.
pub(crate) struct MonitorTool {
    shared: Arc<crate::session::Shared>,
    schema: Value,
}

impl MonitorTool {
    pub(crate) fn new(shared: Arc<crate::session::Shared>) -> Self {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "What is watched, in a few words (shown with its events)"},
                "command": {"type": "string", "description": "The shell command; each line it prints is an event, and its exit ends the watch"},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": MONITOR_MAX_TIMEOUT_MS,
                    "description": "Stop it after this many milliseconds (default 300000); ignored when persistent"},
                "persistent": {"type": "boolean", "description": "Run for the whole session (until TaskStop)"},
                "ws": {
                    "type": "object",
                    "description": "A WebSocket to watch instead of a command: each text frame is an event, the socket's close ends the watch. ws:// only, to this machine's own servers unless commands may reach the network",
                    "properties": {
                        "url": {"type": "string"},
                        "protocols": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["url"],
                    "additionalProperties": false
                }
            },
            "required": ["description"],
            "additionalProperties": false
        });
        Self { shared, schema }
    }
}

impl Tool for MonitorTool {
    fn name(&self) -> &str {
        "Monitor"
    }

    fn description(&self) -> &str {
        "Watches something in the background: a shell command whose every stdout line is an event (a log tail, an `until` loop, a poller), or a WebSocket (ws) whose every text frame is one; returns its task id at once and tells you its new events with your next requests. It stops at its timeout (default 5 minutes, at most 1 hour), when the command exits or the socket closes, or with TaskStop; persistent runs for the session."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: MonitorInput = parse_input("Monitor", input)?;
            let timeout = input
                .timeout_ms
                .unwrap_or(MONITOR_TIMEOUT_MS)
                .min(MONITOR_MAX_TIMEOUT_MS);
            let deadline = (!input.persistent).then(|| Duration::from_millis(timeout));
            let command = input.command.filter(|command| !command.trim().is_empty());
            let task = match (command, input.ws) {
                (Some(_), Some(_)) => {
                    return Err(ToolError::InvalidInput(
                        "Monitor takes a command or a ws, not both".into(),
                    ));
                }
                (None, None) => {
                    return Err(ToolError::InvalidInput(
                        "Monitor needs a command (or a ws to watch)".into(),
                    ));
                }
                (Some(command), None) => crate::bash::start_monitor(
                    &self.shared,
                    &command,
                    input.description,
                    deadline,
                    &context,
                )?,
                (None, Some(socket)) => {
                    let network = self.shared.sandbox.network;
                    let stream =
                        crate::socket::connect(&socket.url, &socket.protocols, network).await?;
                    self.shared
                        .background
                        .start_socket(crate::socket::Connected {
                            stream,
                            url: socket.url,
                            description: input.description,
                            tool_use_id: Some(context.tool_use_id.to_string()),
                            deadline,
                        })?
                }
            };
            let until = match deadline {
                Some(_) => format!("for at most {timeout} ms"),
                None => "for the session (until TaskStop)".to_owned(),
            };
            Ok(ToolOutput::text(format!(
                "Monitor started with ID: {}, {until}. Its events (the lines it prints, or the socket's messages) come with your next requests; TaskStop stops it.",
                task.id()
            ))
            .with_structured(json!({
                "taskId": task.id(),
                "timeoutMs": deadline.map_or(0, |_| timeout),
                "persistent": input.persistent,
            })))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_its_head_and_tail_and_reads_on_from_where_it_was() {
        let mut output = Output::default();
        output.push(b"one\ntwo\n");
        assert_eq!(output.since(0), "one\ntwo\n");
        output.push(b"three\n");
        let from = output.read;
        assert_eq!(output.since(from), "three\n");
        // A monitor's events: whole lines, each told once.
        let mut events = Output::default();
        events.push(b"one\ntw");
        assert_eq!(events.new_events().as_deref(), Some("one"));
        assert_eq!(events.new_events(), None);
        events.push(b"o\nthree\n");
        assert_eq!(events.new_events().as_deref(), Some("two\nthree"));
        // Past both limits: the middle is counted, not kept.
        let mut big = Output::default();
        big.push(&vec![b'a'; HEAD_BYTES]);
        big.push(&[b'b'; 100]);
        big.push(&vec![b'c'; TAIL_BYTES]);
        let text = big.since(0);
        assert!(text.starts_with('a'));
        assert!(
            text.contains("[... 100 bytes not kept ...]"),
            "{}",
            &text[HEAD_BYTES..HEAD_BYTES + 60]
        );
        assert!(text.ends_with('c'));
        assert_eq!(text.matches('c').count(), TAIL_BYTES);
        // Read up to the middle, then more: only what is new.
        let from = big.read;
        big.push(b"\ntail end\n");
        assert_eq!(big.since(from), "\ntail end\n");
        assert_eq!(big.last_lines(1), "tail end");
    }
}
