//! The one component that owns the terminal during an interactive session.
//!
//! Everything shown goes through one queue, in order, and is drawn by one task: finished
//! lines (answers, tool calls with their results, notices), the live rows of the turn (calls
//! in flight, the Markdown block still streaming), the spinner, a question, the input line
//! and the status line. Nothing interleaves because nothing else writes: even a stray write
//! to stderr (a library's warning, an MCP server's log) is caught by a pipe put in place of
//! file descriptor 2 and shown as finished lines.
//!
//! The terminal is in raw mode (no echo, no line discipline, no signal keys; output
//! processing kept, so a stray `\n` still starts a line) from [`Tui::start`] to
//! [`Tui::stop`]. In raw mode Ctrl-C is a key, not SIGINT: during a turn it calls the
//! `on_interrupt` handler given at start; at the prompt it clears the line or ends the read.
//!
//! Drawing is inline ([`crate::term::Painter`]): the scrollback keeps everything, no
//! alternate screen. Frames are coalesced (every message waiting in the queue is applied
//! before one frame is drawn) and synchronized when the terminal answers the DECRQM query for
//! mode 2026 within [`QUERY_TIMEOUT`].

use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use futures_util::StreamExt as _;
use tokio::sync::{mpsc, oneshot};

use crate::display_width;
use crate::editor::{Edit, LineEditor};
use crate::term::{Live, Painter};

/// How long a terminal capability query waits for its answer: a terminal that does not know
/// the query never answers.
pub const QUERY_TIMEOUT: Duration = Duration::from_millis(100);

/// Pushes the kitty keyboard protocol's "disambiguate escape codes" flag
/// (<https://sw.kovidgoyal.net/kitty/keyboard-protocol/>), and pops it.
const KITTY_PUSH: &str = "\x1b[>1u";
const KITTY_POP: &str = "\x1b[<u";

/// How long after a question is on the screen keys start to count as its answer.
const QUESTION_GRACE: Duration = Duration::from_millis(300);

/// The spinner's frames and its period.
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

/// What puts the terminal back in a hurry: erase the live region drawn last, show the
/// cursor, bracketed paste off. Kept up to date by every frame, for a process that exits
/// without running destructors (a second Ctrl-C during a turn).
static EMERGENCY: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

/// The terminal's width in columns, when there is one to ask.
pub fn terminal_width() -> Option<usize> {
    crossterm::terminal::size()
        .ok()
        .map(|(width, _)| usize::from(width))
        .filter(|width| *width > 0)
}

/// The bytes that erase the live region and restore the cursor and paste mode now (empty
/// when the terminal's task does not own the terminal). Write them to stdout before
/// `std::process::exit`.
pub fn emergency_restore() -> Vec<u8> {
    EMERGENCY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

fn set_emergency(bytes: Vec<u8>) {
    *EMERGENCY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = bytes;
}

/// How a read of the input line ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Enter: the line (also given when it was typed, and queued, during a turn).
    Line(String),
    /// Enter on a line that starts with pasted text: text for the model, never a command
    /// (a pasted `!rm -rf …` or `/clear` is not something the user typed).
    Pasted(String),
    /// Ctrl-C on an empty line.
    Interrupted,
    /// Ctrl-C on a line with text: the text is gone.
    Cleared,
    /// Ctrl-D on an empty line, or the terminal is gone.
    Eof,
    /// [`Handle::wake`]: something arrived for the model while the prompt waited (a
    /// background task ended). What was typed stays in the line for the next read.
    Woken,
}

/// Completes `@partial` to the paths it may name (see [`Config::complete_path`]).
pub type PathCompleter = Box<dyn Fn(&str) -> Vec<String> + Send + Sync>;

/// What the interactive session hands the terminal at start.
pub struct Config {
    /// Entries of the input history, oldest first.
    pub history: Vec<String>,
    /// Called for Ctrl-C (and Esc) while a turn runs ([`Handle::set_busy`]).
    pub on_interrupt: Box<dyn Fn() + Send + Sync>,
    /// Called for Shift+Tab (at the prompt or during a turn): switches the permission mode
    /// to the next one and returns its name, for the status line.
    pub on_cycle_mode: Box<dyn Fn() -> String + Send + Sync>,
    /// Called for Alt+T (Claude Code's key): turns thinking on or off for the next prompts
    /// and returns a line saying which, shown dim.
    pub on_toggle_thinking: Box<dyn Fn() -> String + Send + Sync>,
    /// Called for Tab after `@partial`: the paths `partial` may complete to.
    pub complete_path: PathCompleter,
    /// The commands a line may start with, `(name, what it does)`, for Tab after `/partial`.
    pub commands: Vec<(String, String)>,
    /// Where notifications go (resolved: see [`crate::notify::Channel::resolve`]): when a
    /// question waits for the user, and when a turn of at least [`NOTIFY_AFTER`] ends.
    pub notify: crate::notify::Channel,
    /// The theme the settings name (Claude Code's `theme`); `None`: the terminal's
    /// background decides (`OSC 11`, else `COLORFGBG`), else dark.
    pub theme: Option<crate::Theme>,
}

/// A turn shorter than this ends without a notification (the user is likely watching).
pub const NOTIFY_AFTER: Duration = Duration::from_secs(30);

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("history", &self.history.len())
            .finish_non_exhaustive()
    }
}

enum Message {
    Commit(Vec<String>),
    ClearScreen,
    Activity(Option<String>),
    TurnRows(Vec<String>),
    Status {
        model: String,
        mode: String,
        figures: String,
    },
    Busy(bool),
    CustomStatus(Option<Vec<String>>),
    Checklist(Vec<String>),
    ModeShown(String),
    Figures(String),
    RunningTasks(usize),
    Wake,
    Read(oneshot::Sender<ReadOutcome>),
    Ask {
        id: u64,
        question: Vec<String>,
        prompt: String,
        reply: oneshot::Sender<Option<String>>,
    },
    Abandon(u64),
    Pick {
        picker: Box<crate::picker::Picker>,
        reply: oneshot::Sender<Option<usize>>,
    },
    Detail(Vec<String>),
    Flush(oneshot::Sender<()>),
    Stop(oneshot::Sender<Vec<String>>),
}

/// A cheap, cloneable way to the terminal's task. Every method is non-blocking except the
/// ones that wait for the user; once the task stopped, they do nothing (reads end with
/// [`ReadOutcome::Eof`], questions with `None`).
#[derive(Clone, Debug)]
pub struct Handle {
    sender: mpsc::UnboundedSender<Message>,
    detail: Arc<AtomicBool>,
    questions: Arc<std::sync::atomic::AtomicU64>,
    /// What was entered and not taken yet.
    queued: Arc<std::sync::Mutex<Entered>>,
    /// The terminal's width in columns, as of its last resize.
    width: Arc<std::sync::atomic::AtomicUsize>,
}

/// A line entered during a turn, and whether it starts with pasted text.
type Queued = (String, bool);

/// What the user entered that the session has not taken yet, shared by the terminal's task
/// and its [`Handle`].
#[derive(Debug, Default)]
struct Entered {
    /// Lines entered during a turn, not sent yet.
    lines: Vec<Queued>,
    /// Image files pasted into lines sent: each placeholder (`[Image #1]`) and its path.
    images: Vec<(String, String)>,
}

impl Handle {
    fn send(&self, message: Message) {
        // A stopped terminal drops what would have been drawn: the session is ending.
        let _ = self.sender.send(message);
    }

    /// Lines for the scrollback, in order (styled, already safe to print).
    pub fn commit(&self, lines: Vec<String>) {
        if !lines.is_empty() {
            self.send(Message::Commit(lines));
        }
    }

    /// Clears the screen and its scrollback, then draws the live region at the top (`/clear`).
    pub fn clear_screen(&self) {
        self.send(Message::ClearScreen);
    }

    /// The spinner's message (`None` hides the spinner). The spinner adds its frame and the
    /// seconds since it appeared.
    pub fn set_activity(&self, message: Option<String>) {
        self.send(Message::Activity(message));
    }

    /// The turn's rows drawn above the spinner and redrawn in place (calls in flight, the
    /// text of a block still streaming); empty when there are none.
    pub fn set_turn_rows(&self, rows: Vec<String>) {
        self.send(Message::TurnRows(rows));
    }

    /// The status line under the input line: `  ─ MODEL · MODE FIGURES`, dim, where the
    /// mode is the one Shift+Tab last chose, or this `mode`; `figures` follow as given
    /// (` · context 24% (41.0k/167.0k) · 2 req · ...`). Text already safe to print.
    pub fn set_status(&self, model: String, mode: String, figures: String) {
        self.send(Message::Status {
            model,
            mode,
            figures,
        });
    }

    /// Rows shown in place of the status line (a `statusLine` command's output), or the
    /// status line again (`None`). Text already safe to print (colours allowed).
    pub fn set_custom_status(&self, rows: Option<Vec<String>>) {
        self.send(Message::CustomStatus(rows));
    }

    /// How many background tasks run now: the status line counts them (none: nothing is
    /// shown).
    pub fn set_running_tasks(&self, running: usize) {
        self.send(Message::RunningTasks(running));
    }

    /// Ends a [`Handle::read_line`] that is waiting with [`ReadOutcome::Woken`], the line
    /// being typed kept; nothing when no read waits (a turn is running: what arrived goes
    /// with its next request).
    pub fn wake(&self) {
        self.send(Message::Wake);
    }

    /// The status line's figures only (the session's requests, tokens and cost so far,
    /// during a turn).
    pub fn set_figures(&self, figures: String) {
        self.send(Message::Figures(figures));
    }

    /// Rows shown under the status line until replaced (the model's todo list), when shown:
    /// Ctrl-T hides and shows them. Empty: none. Text already safe to print.
    pub fn set_checklist(&self, rows: Vec<String>) {
        self.send(Message::Checklist(rows));
    }

    /// The permission mode the status line shows (it changed during a turn: a plan was
    /// approved).
    pub fn set_mode_shown(&self, mode: String) {
        self.send(Message::ModeShown(mode));
    }

    /// Whether a turn runs: then Ctrl-C interrupts it, and a line entered is queued for the
    /// next read. A new turn also starts a new record of details (see
    /// [`Handle::record_detail`]).
    pub fn set_busy(&self, busy: bool) {
        self.send(Message::Busy(busy));
    }

    /// Reads the input line: returns a line queued during the last turn at once, else waits
    /// for Enter, Ctrl-C or Ctrl-D. The line entered is copied into the scrollback after the
    /// prompt sign.
    pub async fn read_line(&self) -> ReadOutcome {
        let (reply, answer) = oneshot::channel();
        self.send(Message::Read(reply));
        answer.await.unwrap_or(ReadOutcome::Eof)
    }

    /// Asks a question: `question`'s lines over a line edited after `prompt`. Returns the
    /// answer, or `None` when the user pressed Ctrl-C (which also interrupts a running
    /// turn), Ctrl-D on an empty answer, or the terminal stopped. Keys typed before the
    /// question appeared never answer it. Dropping the future takes the question off the
    /// screen.
    pub async fn ask(&self, question: Vec<String>, prompt: String) -> Option<String> {
        let (id, answer) = self.open_question(question, prompt);
        /// Takes the question away when the wait is abandoned.
        struct Abandon<'a>(&'a Handle, u64, bool);
        impl Drop for Abandon<'_> {
            fn drop(&mut self) {
                if !self.2 {
                    self.0.send(Message::Abandon(self.1));
                }
            }
        }
        let mut guard = Abandon(self, id, false);
        let answer = answer.await.ok().flatten();
        guard.2 = true;
        answer
    }

    /// [`Handle::ask`] from blocking code (not on the runtime's own threads).
    pub fn ask_blocking(&self, question: Vec<String>, prompt: String) -> Option<String> {
        let (_, answer) = self.open_question(question, prompt);
        answer.blocking_recv().ok().flatten()
    }

    /// Sends a question; returns its id and where its answer comes.
    fn open_question(
        &self,
        question: Vec<String>,
        prompt: String,
    ) -> (u64, oneshot::Receiver<Option<String>>) {
        let id = self.questions.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        self.send(Message::Ask {
            id,
            question,
            prompt,
            reply,
        });
        (id, answer)
    }

    /// Shows `picker` in place of the input line and waits (blocking the calling thread:
    /// call it from `block_in_place` or a blocking thread) until an entry is chosen (its
    /// index in the picker's items) or none (`None`: Esc, Ctrl-C, or the terminal gone).
    pub fn pick_blocking(&self, picker: crate::picker::Picker) -> Option<usize> {
        let (reply, chosen) = oneshot::channel();
        self.send(Message::Pick {
            picker: Box::new(picker),
            reply,
        });
        chosen.blocking_recv().ok().flatten()
    }

    /// The full form of something the turn did (a tool's whole input and result), kept for
    /// Ctrl-O: shown at once while details are on, else when they are turned on.
    pub fn record_detail(&self, lines: Vec<String>) {
        self.send(Message::Detail(lines));
    }

    /// The terminal's width in columns, as of its last resize (what text rendered from now
    /// on should fit).
    pub fn width(&self) -> usize {
        self.width.load(Ordering::Relaxed)
    }

    /// Whether details are on (Ctrl-O).
    pub fn details_on(&self) -> bool {
        self.detail.load(Ordering::Relaxed)
    }

    /// Takes the image files pasted into `line` (a line read from the user): each
    /// placeholder it holds (`[Image #1]`) and the path pasted, `~/` not expanded (see
    /// [`crate::editor::pasted_image_path`]).
    pub fn take_images(&self, line: &str) -> Vec<(String, String)> {
        let mut entered = self
            .queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (taken, kept) = std::mem::take(&mut entered.images)
            .into_iter()
            .partition(|(placeholder, _)| line.contains(placeholder.as_str()));
        entered.images = kept;
        taken
    }

    /// Takes the lines the user entered while the turn runs (oldest first), for the next
    /// request; they are shown as sent at this point of the turn. Lines that are commands
    /// (`/…`, `!…`) stay queued for the prompt. Empty when there are none.
    pub fn take_queued(&self) -> Vec<String> {
        // Commands (`/compact`, `!ls`) wait for the prompt, where they run as commands.
        let lines: Vec<String> = {
            let mut queued = self
                .queued
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (commands, messages): (Vec<Queued>, Vec<Queued>) =
                std::mem::take(&mut queued.lines)
                    .into_iter()
                    .partition(|(line, pasted)| {
                        let line = line.trim_start();
                        !pasted && (line.starts_with('/') || line.starts_with('!'))
                    });
            queued.lines = commands;
            messages.into_iter().map(|(line, _)| line).collect()
        };
        if !lines.is_empty() {
            self.commit(lines.iter().map(|line| echo(line)).collect());
        }
        lines
    }

    /// Waits until everything sent before is on the screen.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        self.send(Message::Flush(done));
        let _ = wait.await;
    }
}

/// The terminal, owned; see the module docs.
#[derive(Debug)]
pub struct Tui {
    handle: Handle,
    task: tokio::task::JoinHandle<()>,
    restore: Restore,
}

/// What [`Tui::stop`] (or a drop) puts back.
#[derive(Debug)]
struct Restore {
    termios: Option<nix::sys::termios::Termios>,
    /// Whether the kitty keyboard protocol's flags were pushed (and must be popped).
    kitty_keys: bool,
    /// The original file descriptor 2, while a pipe stands in for it.
    stderr: Option<OwnedFd>,
    done: bool,
}

impl Restore {
    fn put_back(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        set_emergency(Vec::new());
        let mut stdout = std::io::stdout();
        if self.kitty_keys {
            let _ = stdout.write_all(KITTY_POP.as_bytes());
        }
        // Bracketed paste off, cursor shown.
        let _ = stdout.write_all(b"\x1b[?2004l\x1b[?25h");
        let _ = stdout.flush();
        if let Some(saved) = self.stderr.take() {
            let _ = nix::unistd::dup2_stderr(saved.as_fd());
        }
        if let Some(termios) = &self.termios {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                termios,
            );
        }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        self.put_back();
    }
}

impl Tui {
    /// Takes the terminal: raw mode on stdin, a pipe in place of stderr, bracketed paste on,
    /// the synchronized-output query asked. Draws on stdout.
    ///
    /// # Errors
    ///
    /// When stdin or stdout is not a terminal, or the terminal's modes cannot be set.
    pub fn start(config: Config) -> std::io::Result<Self> {
        use nix::sys::termios::{OutputFlags, SetArg, cfmakeraw, tcgetattr, tcsetattr};
        use std::io::IsTerminal as _;
        if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
            return Err(std::io::Error::other(
                "the interactive session needs a terminal on stdin and stdout",
            ));
        }
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).map_err(std::io::Error::from)?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        // Output processing stays: a `\n` written by anything still returns the carriage.
        raw.output_flags |= OutputFlags::OPOST | OutputFlags::ONLCR;
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).map_err(std::io::Error::from)?;
        let mut restore = Restore {
            termios: Some(saved),
            kitty_keys: false,
            stderr: None,
            done: false,
        };
        let capabilities = query_sync();
        let sync = capabilities.sync;
        // The setting, else what the terminal said of its background, else `COLORFGBG`.
        if let Some(theme) = config.theme.or(capabilities.background).or_else(|| {
            crate::Theme::from_colorfgbg(&std::env::var("COLORFGBG").unwrap_or_default())
        }) {
            theme.set();
        }
        let (width, height) = crossterm::terminal::size().unwrap_or((80, 24));
        let mut out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
        out.write_all(b"\x1b[?2004h")?;
        if capabilities.kitty_keys {
            // Disambiguate escape codes: Shift+Enter comes as its own key.
            out.write_all(KITTY_PUSH.as_bytes())?;
            restore.kitty_keys = true;
        }
        out.flush()?;
        let (sender, receiver) = mpsc::unbounded_channel();
        // Stray writes to stderr become finished lines.
        let (reader, writer) = std::io::pipe()?;
        restore.stderr = Some(std::io::stderr().as_fd().try_clone_to_owned()?);
        nix::unistd::dup2_stderr(writer.as_fd()).map_err(std::io::Error::from)?;
        drop(writer);
        spawn_stderr_reader(reader, sender.clone());
        let detail = Arc::new(AtomicBool::new(false));
        let queued: Arc<std::sync::Mutex<Entered>> = Arc::default();
        let shared_width = Arc::new(std::sync::atomic::AtomicUsize::new(usize::from(width)));
        let handle = Handle {
            sender,
            detail: Arc::clone(&detail),
            questions: Arc::default(),
            queued: Arc::clone(&queued),
            width: Arc::clone(&shared_width),
        };
        let mut painter = Painter::new(width, height, sync);
        // `start` leaves OPOST and ONLCR on.
        painter.set_onlcr(true);
        painter.set_reflow(crate::term::terminal_reflows(|name| {
            std::env::var(name).ok()
        }));
        let state = State {
            painter,
            width: shared_width,
            out,
            editor: LineEditor::new(config.history),
            on_interrupt: config.on_interrupt,
            detail,
            turn_rows: Vec::new(),
            checklist: (Vec::new(), true),
            activity: None,
            status: None,
            running_tasks: 0,
            custom_status: None,
            on_cycle_mode: config.on_cycle_mode,
            on_toggle_thinking: config.on_toggle_thinking,
            raw: raw.clone(),
            kitty_keys: capabilities.kitty_keys,
            complete_path: config.complete_path,
            commands: config.commands,
            choices: Vec::new(),
            search: None,
            busy: false,
            busy_since: None,
            notify: config.notify,
            queued: Arc::clone(&queued),
            read: None,
            last_esc: None,
            question: None,
            pick: None,
            details: Vec::new(),
            pending: Vec::new(),
            frame: 0,
        };
        let task = tokio::spawn(state.run(receiver));
        Ok(Self {
            handle,
            task,
            restore,
        })
    }

    /// A handle for drawing and reading.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Clears the live region and gives the terminal back as it was; returns the input
    /// history (oldest first) for saving.
    pub async fn stop(mut self) -> Vec<String> {
        let (reply, history) = oneshot::channel();
        self.handle.send(Message::Stop(reply));
        let history = history.await.unwrap_or_default();
        let _ = (&mut self.task).await;
        self.restore.put_back();
        history
    }
}

/// Whether the terminal supports synchronized output.
///
/// Known terminals are told by their environment (`TERM_PROGRAM`, `TERM`). Over SSH nothing
/// else is tried: a reply that came after the wait would reach the key reader as garbage and
/// swallow the keys after it. Locally the terminal is asked (DECRQM for mode 2026), with a
/// primary device attributes request (DA1, which every terminal answers) right behind it:
/// terminals answer in order, so once the DA1 answer is in, so is any answer to the first
/// question, and nothing can arrive late. The wait ends at [`QUERY_TIMEOUT`] either way (a
/// terminal that answers nothing, such as a test's terminal model). Bytes that are not
/// answers (keys typed at that moment) are lost.
fn query_sync() -> Capabilities {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let program = env("TERM_PROGRAM");
    let term = env("TERM");
    let known = matches!(
        program.as_str(),
        "WezTerm" | "iTerm.app" | "ghostty" | "vscode" | "kitty"
    ) || ["kitty", "foot", "ghostty", "wezterm"]
        .iter()
        .any(|name| term.contains(name));
    let remote = !env("SSH_TTY").is_empty() || !env("SSH_CONNECTION").is_empty();
    // The terminals known here all read the kitty keyboard protocol.
    if remote {
        return Capabilities {
            sync: known,
            kitty_keys: known,
            background: None,
        };
    }
    // Asked even when known: the background is what only the terminal can tell.
    let asked = ask_capabilities();
    Capabilities {
        sync: known || asked.sync,
        kitty_keys: known || asked.kitty_keys,
        background: asked.background,
    }
}

/// What the terminal said it supports.
#[derive(Clone, Copy, Debug, Default)]
struct Capabilities {
    /// Synchronized output (DEC mode 2026).
    sync: bool,
    /// The kitty keyboard protocol (Shift+Enter told from Enter).
    kitty_keys: bool,
    /// The theme its background colour calls for (`OSC 11 ; ?`), when it answered.
    background: Option<crate::Theme>,
}

/// The local question of [`query_sync`]: DECRQM for mode 2026, the kitty keyboard protocol's
/// flags query (`CSI ? u`), the background colour (`OSC 11 ; ?`), then DA1.
fn ask_capabilities() -> Capabilities {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut stdout = std::io::stdout();
    let question = format!("{}\x1b[?u\x1b]11;?\x1b\\\x1b[c", crate::term::SYNC_QUERY);
    if stdout
        .write_all(question.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return Capabilities::default();
    }
    let stdin = std::io::stdin();
    let deadline = Instant::now() + QUERY_TIMEOUT;
    let mut reply = Vec::new();
    loop {
        if crate::term::device_attributes_answered(&reply) {
            return Capabilities {
                sync: crate::term::sync_supported(&reply),
                kitty_keys: crate::term::kitty_keys_answered(&reply),
                background: crate::Theme::from_background_answer(&reply),
            };
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Capabilities::default();
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        let wait = PollTimeout::try_from(left).unwrap_or(PollTimeout::ZERO);
        match poll(&mut fds, wait) {
            Ok(0) => return Capabilities::default(),
            Ok(_) => {
                let mut buffer = [0u8; 256];
                match nix::unistd::read(stdin.as_fd(), &mut buffer) {
                    Ok(0) | Err(_) => return Capabilities::default(),
                    Ok(read) => reply.extend_from_slice(&buffer[..read]),
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return Capabilities::default(),
        }
    }
}

/// Reads what is written to the stderr pipe and sends it as finished lines.
fn spawn_stderr_reader(mut reader: std::io::PipeReader, sender: mpsc::UnboundedSender<Message>) {
    std::thread::spawn(move || {
        let mut pending = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let read = match reader.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            pending.extend_from_slice(&buffer[..read]);
            // A writer that never ends its line is shown in pieces of 64 KiB.
            if pending.len() > 65_536 && !pending.contains(&b'\n') {
                pending.push(b'\n');
            }
            let Some(end) = pending.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let text: Vec<u8> = pending.drain(..=end).collect();
            // Colours dropped (a log's levels, a server's coloured output), then anything
            // else that is not text shown as escapes.
            let lines = String::from_utf8_lossy(&text)
                .lines()
                .map(|line| crate::printable(&crate::term::strip_styles(line), false))
                .collect();
            if sender.send(Message::Commit(lines)).is_err() {
                break;
            }
        }
    });
}

/// A reverse search through the history (Ctrl-R).
struct Search {
    query: String,
    /// The index of the entry shown.
    found: Option<usize>,
    /// The line as it was before the search.
    saved: String,
}

struct Question {
    id: u64,
    /// When the frame showing it was written: keys read before then, or within
    /// [`QUESTION_GRACE`] after (typed before the user could have seen it, read late by a
    /// busy or slow terminal), go to the input line, never to the question.
    shown_at: Option<Instant>,
    /// How many finished lines were waiting when it was asked (its own text last): the ones
    /// after it are held back until it is answered, then written after the answer.
    held_from: usize,
    prompt: String,
    editor: LineEditor,
    reply: oneshot::Sender<Option<String>>,
}

struct State {
    painter: Painter,
    /// The terminal's width, shared with every [`Handle`].
    width: Arc<std::sync::atomic::AtomicUsize>,
    out: std::fs::File,
    editor: LineEditor,
    on_interrupt: Box<dyn Fn() + Send + Sync>,
    detail: Arc<AtomicBool>,
    turn_rows: Vec<String>,
    /// The rows under the status line ([`Handle::set_checklist`]), and whether they show.
    checklist: (Vec<String>, bool),
    /// The spinner's message and when it appeared.
    activity: Option<(String, Instant)>,
    /// The status line's model, mode and figures.
    status: Option<(String, String, String)>,
    /// Background tasks running ([`Handle::set_running_tasks`]).
    running_tasks: usize,
    /// Rows shown in place of the status line.
    custom_status: Option<Vec<String>>,
    on_cycle_mode: Box<dyn Fn() -> String + Send + Sync>,
    on_toggle_thinking: Box<dyn Fn() -> String + Send + Sync>,
    /// The terminal's raw settings, put back after each turn.
    raw: nix::sys::termios::Termios,
    /// Whether the kitty keyboard protocol is on.
    kitty_keys: bool,
    complete_path: PathCompleter,
    commands: Vec<(String, String)>,
    /// The completions Tab offered last, shown under the input until the next key.
    choices: Vec<String>,
    search: Option<Search>,
    busy: bool,
    /// When the turn in flight started.
    busy_since: Option<Instant>,
    /// Where notifications go.
    notify: crate::notify::Channel,
    /// Lines entered during a turn, for the next reads, and pasted images.
    queued: Arc<std::sync::Mutex<Entered>>,
    read: Option<oneshot::Sender<ReadOutcome>>,
    question: Option<Question>,
    /// A list being chosen from ([`Handle::pick_blocking`]), and where the choice goes.
    pick: Option<(Box<crate::picker::Picker>, oneshot::Sender<Option<usize>>)>,
    /// The turn's details (Ctrl-O).
    details: Vec<String>,
    /// Finished lines not drawn yet.
    pending: Vec<String>,
    frame: usize,
    /// When Esc was pressed at an empty prompt (a second within [`DOUBLE_ESC`] rewinds).
    last_esc: Option<Instant>,
}

/// How soon a second Esc at an empty prompt must follow the first to open the rewind list
/// (`/rewind`), as Esc Esc does in Claude Code.
const DOUBLE_ESC: Duration = Duration::from_millis(800);

/// What one step of the task decided.
enum Step {
    Go,
    Stop(oneshot::Sender<Vec<String>>),
}

impl State {
    async fn run(mut self, mut receiver: mpsc::UnboundedReceiver<Message>) {
        let mut events = EventStream::new();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut keys_open = true;
        self.draw();
        loop {
            let step = tokio::select! {
                message = receiver.recv() => match message {
                    Some(message) => {
                        let mut step = self.apply(message);
                        // Everything already waiting goes into the same frame.
                        while matches!(step, Step::Go) {
                            match receiver.try_recv() {
                                Ok(message) => step = self.apply(message),
                                Err(_) => break,
                            }
                        }
                        step
                    }
                    None => break,
                },
                event = events.next(), if keys_open => {
                    match event {
                        Some(Ok(event)) => self.event(event),
                        // The terminal is gone: reads end.
                        Some(Err(_)) | None => {
                            keys_open = false;
                            if let Some(read) = self.read.take() {
                                let _ = read.send(ReadOutcome::Eof);
                            }
                        }
                    }
                    Step::Go
                }
                _ = tick.tick(), if self.activity.is_some() => {
                    self.frame = self.frame.wrapping_add(1);
                    Step::Go
                }
            };
            match step {
                Step::Go => self.draw(),
                Step::Stop(reply) => {
                    let _ = reply.send(self.editor.history().to_vec());
                    self.activity = None;
                    self.turn_rows.clear();
                    self.draw_final();
                    return;
                }
            }
        }
        self.draw_final();
    }

    fn apply(&mut self, message: Message) -> Step {
        match message {
            Message::Commit(lines) => {
                self.pending.extend(lines);
            }
            Message::ClearScreen => {
                // What was not drawn yet belongs to the screen being cleared.
                self.pending.clear();
                let bytes = self.painter.clear_screen();
                let _ = self.out.write_all(&bytes);
            }
            Message::Activity(message) => {
                self.activity = match (message, self.activity.take()) {
                    (None, _) => None,
                    (Some(message), Some((_, since))) => Some((message, since)),
                    (Some(message), None) => Some((message, Instant::now())),
                };
            }
            Message::TurnRows(rows) => self.turn_rows = rows,
            Message::Checklist(rows) => self.checklist.0 = rows,
            Message::CustomStatus(rows) => self.custom_status = rows,
            Message::Status {
                model,
                mode,
                figures,
            } => self.status = Some((model, mode, figures)),
            Message::Figures(figures) => {
                if let Some((_, _, shown)) = &mut self.status {
                    *shown = figures;
                }
            }
            Message::RunningTasks(running) => self.running_tasks = running,
            Message::Wake => {
                if let Some(reply) = self.read.take() {
                    let _ = reply.send(ReadOutcome::Woken);
                }
            }
            Message::ModeShown(mode) => {
                if let Some((_, shown, _)) = &mut self.status {
                    *shown = mode;
                }
            }
            Message::Busy(busy) => self.set_busy(busy),
            Message::Read(reply) => {
                let next = {
                    let mut queued = self.queue();
                    (!queued.lines.is_empty()).then(|| queued.lines.remove(0))
                };
                match next {
                    Some((line, pasted)) => {
                        self.pending.push(echo(&line));
                        let _ = reply.send(if pasted {
                            ReadOutcome::Pasted(line)
                        } else {
                            ReadOutcome::Line(line)
                        });
                    }
                    None => self.read = Some(reply),
                }
            }
            Message::Ask {
                id,
                question,
                prompt,
                reply,
            } => {
                if self.question.is_some() {
                    self.answer(None);
                }
                // The question's text goes to the scrollback at once: whole (a live row is cut
                // to the width, and a long diff would not fit the screen), scrollable, and in
                // its place in the turn; the live region keeps the line the answer is typed on.
                self.pending.extend(question);
                self.notify("needs your answer");
                self.question = Some(Question {
                    id,
                    shown_at: None,
                    held_from: self.pending.len(),
                    prompt,
                    editor: LineEditor::default(),
                    reply,
                });
            }
            Message::Abandon(id) => {
                // The turn went on without the answer (it was interrupted): the question is
                // closed where it stood, marked unanswered.
                if self
                    .question
                    .as_ref()
                    .is_some_and(|question| question.id == id)
                {
                    self.answer(None);
                }
            }
            Message::Detail(lines) => {
                if self.detail.load(Ordering::Relaxed) {
                    self.pending.extend(lines.iter().cloned());
                }
                self.details.extend(lines);
            }
            Message::Flush(done) => {
                self.draw();
                let _ = done.send(());
            }
            Message::Pick { picker, reply } => {
                if let Some((_, earlier)) = self.pick.replace((picker, reply)) {
                    let _ = earlier.send(None);
                }
            }
            Message::Stop(reply) => return Step::Stop(reply),
        }
        Step::Go
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Entered> {
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => self.key(key),
            Event::Paste(text) => {
                let text = text.replace("\r\n", "\n").replace('\r', "\n");
                self.editing().apply(Edit::Paste(text));
            }
            Event::Resize(width, height) => {
                self.painter.resize(width, height);
                self.width.store(usize::from(width), Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// The editor keys go to: the question's, once it has been on the screen for
    /// [`QUESTION_GRACE`].
    fn editing(&mut self) -> &mut LineEditor {
        match &mut self.question {
            Some(question) if Self::answering(question) => &mut question.editor,
            _ => &mut self.editor,
        }
    }

    /// Whether keys now answer `question` (see [`Question::shown_at`]).
    fn answering(question: &Question) -> bool {
        question
            .shown_at
            .is_some_and(|shown| shown.elapsed() >= QUESTION_GRACE)
    }

    /// Tab: completes the `@path` before the cursor, or the `/command` a line starts with
    /// (to the one match, or to what all the matches share, then lists them: a command
    /// with what it does).
    fn complete(&mut self) {
        let (start, word) = self.editor.word_before_cursor();
        if start == 0
            && let Some(partial) = word.strip_prefix('/')
        {
            let found: Vec<&(String, String)> = self
                .commands
                .iter()
                .filter(|(name, _)| name.starts_with(partial))
                .collect();
            let Some((first, _)) = found.first() else {
                return;
            };
            let replacement = match found.as_slice() {
                [_] => format!("/{first} "),
                _ => format!(
                    "/{}",
                    shared_prefix(found.iter().map(|(name, _)| name.as_str()))
                ),
            };
            self.editor.replace_from(start, &replacement);
            if found.len() > 1 {
                self.choices = found
                    .iter()
                    .map(|(name, about)| format!("/{name:<12} {about}"))
                    .collect();
            }
            return;
        }
        let Some(partial) = word.strip_prefix('@') else {
            return;
        };
        let found = (self.complete_path)(partial);
        let Some(first) = found.first() else {
            return;
        };
        let shared = shared_prefix(found.iter().map(String::as_str));
        // A path with a space is quoted, so the whole of it is the mention.
        let mention = |path: &str, end: &str| {
            if path.contains(char::is_whitespace) {
                format!("@\"{path}\"{end}")
            } else {
                format!("@{path}{end}")
            }
        };
        let replacement = if found.len() == 1 && !first.ends_with('/') {
            mention(first, " ")
        } else if shared.contains(char::is_whitespace) {
            // Quoting a partial path would end the mention early: leave it for more typing.
            format!("@{partial}")
        } else {
            mention(&shared, "")
        };
        self.editor.replace_from(start, &replacement);
        if found.len() > 1 {
            self.choices = found;
        }
    }

    /// Ctrl-R's reverse search through the history: typed text narrows it, Ctrl-R goes to
    /// the next older match, Enter (or any editing key) takes the match into the input line,
    /// Esc, Ctrl-G or Ctrl-C puts back what was there. Returns whether the key was the
    /// search's.
    fn search_key(&mut self, key: &KeyEvent) -> bool {
        let Some(search) = &mut self.search else {
            return false;
        };
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        let history = self.editor.history();
        let find = |query: &str, before: usize| {
            history[..before.min(history.len())]
                .iter()
                .rposition(|entry| entry.contains(query))
        };
        match key.code {
            KeyCode::Char('r') if control => {
                let before = search.found.unwrap_or(history.len());
                if let Some(found) = find(&search.query, before) {
                    search.found = Some(found);
                }
            }
            KeyCode::Char('g' | 'c') if control => {
                let saved = std::mem::take(&mut search.saved);
                self.search = None;
                self.editor.set(saved);
            }
            KeyCode::Esc => {
                let saved = std::mem::take(&mut search.saved);
                self.search = None;
                self.editor.set(saved);
            }
            KeyCode::Char(c) if !control => {
                search.query.push(c);
                search.found = find(&search.query, history.len());
            }
            KeyCode::Backspace => {
                search.query.pop();
                search.found = find(&search.query, history.len());
            }
            _ => {
                // Taken: the match goes into the line; Enter stops there, other keys act on
                // it.
                let taken = search
                    .found
                    .and_then(|found| history.get(found).cloned())
                    .unwrap_or_else(|| std::mem::take(&mut search.saved));
                self.search = None;
                self.editor.set(taken);
                return key.code == KeyCode::Enter;
            }
        }
        true
    }

    /// A key for the open picker, if there is one: returns whether there was. Enter or Esc
    /// closes it and sends the choice.
    fn pick_key(&mut self, key: &KeyEvent) -> bool {
        let Some((picker, _)) = &mut self.pick else {
            return false;
        };
        let chosen = match picker.key(key) {
            crate::picker::Step::Going => return true,
            crate::picker::Step::Chosen(index) => Some(index),
            crate::picker::Step::Cancelled => None,
        };
        if let Some((_, reply)) = self.pick.take() {
            let _ = reply.send(chosen);
        }
        true
    }

    fn key(&mut self, key: KeyEvent) {
        self.choices.clear();
        if self.pick_key(&key) || (self.question.is_none() && self.search_key(&key)) {
            return;
        }
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            KeyCode::Char('r') if control && self.question.is_none() => {
                self.search = Some(Search {
                    query: String::new(),
                    found: None,
                    saved: self.editor.text().to_owned(),
                });
            }
            KeyCode::Char('c') if control => self.interrupt(),
            KeyCode::Char('d') if control => {
                if let Some(question) = &self.question {
                    // An empty answer, as Enter would give: the turn goes on.
                    if question.editor.is_empty() {
                        self.answer(Some(String::new()));
                        return;
                    }
                } else if self.editor.is_empty() {
                    if let Some(read) = self.read.take() {
                        let _ = read.send(ReadOutcome::Eof);
                    }
                    return;
                }
                self.editing().apply(Edit::Delete);
            }
            KeyCode::Char('t') if control => self.checklist.1 = !self.checklist.1,
            KeyCode::Char('t') if key.modifiers.contains(KeyModifiers::ALT) => {
                let said = (self.on_toggle_thinking)();
                self.pending.push(dim(&said));
            }
            KeyCode::Char('o') if control => {
                let on = !self.detail.load(Ordering::Relaxed);
                self.detail.store(on, Ordering::Relaxed);
                if on {
                    self.pending
                        .push(dim("── the turn in full (Ctrl-O: the summary again) ──"));
                    self.pending.extend(self.details.iter().cloned());
                } else {
                    self.pending
                        .push(dim("── summary view (Ctrl-O: the turn in full) ──"));
                }
            }
            // Esc, as Ctrl-C: no answer to a question (see `interrupt`), else the turn
            // interrupted.
            KeyCode::Esc if self.question.is_some() || self.busy => self.interrupt(),
            // Esc Esc at an empty prompt: the rewind list, as `/rewind` typed.
            KeyCode::Esc if self.read.is_some() && self.editor.is_empty() => {
                let now = Instant::now();
                if self
                    .last_esc
                    .take()
                    .is_some_and(|at| now.duration_since(at) < DOUBLE_ESC)
                {
                    if let Some(read) = self.read.take() {
                        self.pending.push(echo("/rewind"));
                        let _ = read.send(ReadOutcome::Line("/rewind".to_owned()));
                    }
                } else {
                    self.last_esc = Some(now);
                }
            }
            KeyCode::BackTab if self.question.is_none() => {
                let mode = (self.on_cycle_mode)();
                if let Some((_, shown, _)) = &mut self.status {
                    *shown = mode;
                }
            }
            // Shift+Enter (told apart by the kitty keyboard protocol) or Alt+Enter: a newline.
            KeyCode::Enter
                if key
                    .modifiers
                    .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                self.editing().apply(Edit::Insert("\n".to_owned()));
            }
            KeyCode::Enter => self.enter(),
            code => {
                let edit = match code {
                    KeyCode::Char('a') if control => Edit::Home,
                    KeyCode::Char('e') if control => Edit::End,
                    KeyCode::Char('b') if control => Edit::Left,
                    KeyCode::Char('f') if control => Edit::Right,
                    KeyCode::Char('b') if alt => Edit::WordLeft,
                    KeyCode::Char('f') if alt => Edit::WordRight,
                    KeyCode::Char('u') if control => Edit::KillToStart,
                    KeyCode::Char('k') if control => Edit::KillToEnd,
                    KeyCode::Char('w') if control => Edit::KillWord,
                    KeyCode::Char('p') if control => Edit::HistoryPrevious,
                    KeyCode::Char('n') if control => Edit::HistoryNext,
                    KeyCode::Char(_) if control => return,
                    KeyCode::Char(c) => Edit::Insert(c.to_string()),
                    KeyCode::Backspace if alt => Edit::KillWord,
                    KeyCode::Backspace => Edit::Backspace,
                    KeyCode::Delete => Edit::Delete,
                    KeyCode::Left if control => Edit::WordLeft,
                    KeyCode::Right if control => Edit::WordRight,
                    KeyCode::Left => Edit::Left,
                    KeyCode::Right => Edit::Right,
                    KeyCode::Home => Edit::Home,
                    KeyCode::End => Edit::End,
                    KeyCode::Up if self.question.is_none() => Edit::HistoryPrevious,
                    KeyCode::Down if self.question.is_none() => Edit::HistoryNext,
                    KeyCode::Tab if self.question.is_none() => {
                        self.complete();
                        return;
                    }
                    _ => return,
                };
                self.editing().apply(edit);
            }
        }
    }

    fn interrupt(&mut self) {
        // At a question, the one who asked hears "no answer" and decides what it stops (a
        // permission question stops the turn itself, after the call's refusal is recorded).
        if self.question.is_some() {
            self.answer(None);
            return;
        }
        if self.busy {
            (self.on_interrupt)();
            return;
        }
        let outcome = if self.editor.is_empty() {
            ReadOutcome::Interrupted
        } else {
            self.editor.clear();
            ReadOutcome::Cleared
        };
        if let Some(read) = self.read.take() {
            let _ = read.send(outcome);
        }
    }

    /// A turn starts (`busy`) or ends: a turn that took [`NOTIFY_AFTER`] or longer ends with
    /// a notification.
    fn set_busy(&mut self, busy: bool) {
        self.busy = busy;
        if busy {
            self.details.clear();
            self.busy_since = Some(Instant::now());
            return;
        }
        if self
            .busy_since
            .take()
            .is_some_and(|since| since.elapsed() >= NOTIFY_AFTER)
        {
            self.notify("finished and waits for your next prompt");
        }
        // A command that reached the terminal (run outside the sandbox) may have changed its
        // modes: raw mode again.
        let _ = nix::sys::termios::tcsetattr(
            std::io::stdin(),
            nix::sys::termios::SetArg::TCSANOW,
            &self.raw,
        );
    }

    /// Sends a notification that the session `what` (the channel's sequence goes straight
    /// to the terminal: it moves nothing on the screen).
    fn notify(&mut self, what: &str) {
        if let Some(sequence) = self.notify.sequence("agent", &format!("agent {what}")) {
            let _ = self.out.write_all(sequence.as_bytes());
            let _ = self.out.flush();
        }
    }

    fn answer(&mut self, answer: Option<String>) {
        if let Some(question) = self.question.take() {
            // The answer follows the question in the scrollback, before what was held back
            // while it was asked.
            let line = match &answer {
                Some(text) => format!("{}{}", question.prompt, crate::printable(text, false)),
                None => format!("{}{}", question.prompt, dim("(no answer)")),
            };
            let at = question.held_from.min(self.pending.len());
            self.pending.insert(at, line);
            let _ = question.reply.send(answer);
        }
    }

    fn enter(&mut self) {
        if let Some(question) = &mut self.question
            && Self::answering(question)
        {
            let text = question.editor.submit();
            self.answer(Some(text));
            return;
        }
        // `\` at the end of the line: a newline instead.
        if self.editor.text().ends_with('\\') {
            self.editor.apply(Edit::Backspace);
            self.editor.apply(Edit::Insert("\n".to_owned()));
            return;
        }
        let pasted = self.editor.starts_with_paste();
        match self.read.take() {
            Some(read) => {
                let line = self.editor.submit();
                let images = self.editor.take_images();
                self.queue().images.extend(images);
                self.pending.push(echo(&line));
                let _ = read.send(if pasted {
                    ReadOutcome::Pasted(line)
                } else {
                    ReadOutcome::Line(line)
                });
            }
            None if !self.editor.is_empty() => {
                let line = self.editor.submit();
                let images = self.editor.take_images();
                let mut entered = self.queue();
                entered.images.extend(images);
                entered.lines.push((line, pasted));
            }
            None => {}
        }
    }

    /// The live region as it stands.
    fn live(&self) -> Live {
        let width = self.painter.width().saturating_sub(1);
        // While a question waits, nothing the model streams is drawn next to it.
        let mut rows = if self.question.is_some() {
            Vec::new()
        } else {
            self.turn_rows.clone()
        };
        // A question stops the spinner: what waits is the user.
        if let Some((message, since)) = self.activity.as_ref().filter(|_| self.question.is_none()) {
            let glyph = SPINNER[self.frame % SPINNER.len()];
            rows.push(format!(
                "\x1b[36m{glyph}\x1b[0m {message} \x1b[2m{}s\x1b[0m",
                since.elapsed().as_secs()
            ));
        }
        let mut cursor = None;
        for (line, _) in self.queue().lines.iter() {
            rows.push(dim(&format!(
                "› {} (queued: sent with the next request)",
                crate::printable(line, false)
            )));
        }
        if let Some((picker, _)) = &self.pick {
            rows.extend(picker.rows(width));
        } else if let Some(question) = &self.question {
            // A prompt that leaves too little room for the answer gets rows of its own, the
            // answer a short prompt of its own under them.
            let prompt = if display_width(&question.prompt) + 16 > width {
                rows.extend(wrap_plain(&question.prompt, width));
                "  › "
            } else {
                question.prompt.as_str()
            };
            let (editor_rows, (row, column)) = question.editor.rows(prompt, width);
            cursor = Some((rows.len() + row, column));
            rows.extend(editor_rows);
        } else {
            if let Some(search) = &self.search {
                let found = search
                    .found
                    .and_then(|found| self.editor.history().get(found))
                    .map_or("", String::as_str);
                let mut shown = LineEditor::default();
                shown.set(found.to_owned());
                let prompt = format!(
                    "(reverse-i-search)`{}': ",
                    crate::printable(&search.query, false)
                );
                let (editor_rows, (row, column)) = shown.rows(&prompt, width);
                cursor = Some((rows.len() + row, column));
                rows.extend(editor_rows);
            } else if self.read.is_some() || !self.editor.is_empty() {
                let (editor_rows, (row, column)) = self.editor.rows("› ", width);
                cursor = Some((rows.len() + row, column));
                rows.extend(editor_rows);
            }
            if !self.choices.is_empty() {
                let mut line = String::from("  ");
                for choice in &self.choices {
                    if display_width(&line) + display_width(choice) + 2 > width {
                        rows.push(dim(&line));
                        line = String::from("  ");
                    }
                    line.push_str(&crate::printable(choice, false));
                    line.push_str("  ");
                }
                rows.push(dim(&line));
            }
        }
        if let Some(custom) = &self.custom_status {
            rows.extend(custom.iter().map(|row| crate::term::fit(row, width)));
        } else if let Some((model, mode, figures)) = &self.status {
            let tasks = match self.running_tasks {
                0 => String::new(),
                1 => " · 1 background task".to_owned(),
                running => format!(" · {running} background tasks"),
            };
            // The tasks first: a narrow terminal cuts the end of the row.
            rows.push(dim(&format!("  ─ {model} · {mode}{tasks}{figures}")));
        }
        if self.checklist.1 {
            rows.extend(self.checklist.0.iter().cloned());
        }
        Live { rows, cursor }
    }

    fn draw(&mut self) {
        let live = self.live();
        // While a question waits, what came after it waits too (the question stays where the
        // call came in the turn's order).
        let upto = match &mut self.question {
            Some(question) => std::mem::replace(&mut question.held_from, 0),
            None => self.pending.len(),
        };
        let finished: Vec<String> = self.pending.drain(..upto).collect();
        let bytes = self.painter.frame(&finished, &live);
        let _ = self.out.write_all(&bytes);
        let _ = self.out.flush();
        let mut restore = self.painter.clear_bytes();
        restore.extend_from_slice(b"\x1b[?2004l");
        if self.kitty_keys {
            restore.extend_from_slice(KITTY_POP.as_bytes());
        }
        set_emergency(restore);
        if let Some(question) = &mut self.question
            && question.shown_at.is_none()
        {
            question.shown_at = Some(Instant::now());
        }
    }

    /// The last frame: what is finished, and the live region gone.
    fn draw_final(&mut self) {
        let finished = std::mem::take(&mut self.pending);
        let mut bytes = self.painter.frame(&finished, &Live::default());
        bytes.extend(self.painter.clear());
        let _ = self.out.write_all(&bytes);
        let _ = self.out.flush();
    }
}

/// What every one of `names` starts with.
fn shared_prefix<'a>(mut names: impl Iterator<Item = &'a str>) -> String {
    let Some(first) = names.next() else {
        return String::new();
    };
    names.fold(first.to_owned(), |shared, next| {
        shared
            .chars()
            .zip(next.chars())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a)
            .collect()
    })
}

/// `text` cut into rows of at most `width` columns, at spaces where it can.
fn wrap_plain(text: &str, width: usize) -> Vec<String> {
    crate::wrap(
        &[crate::Span::new(text, crate::Style::default())],
        width.max(8),
    )
}

/// A line the user entered, as the scrollback keeps it.
fn echo(line: &str) -> String {
    let mut rows = line.split('\n');
    let mut text = format!(
        "› {}",
        crate::printable(rows.next().unwrap_or_default(), false)
    );
    for row in rows {
        text.push_str("\n  ");
        text.push_str(&crate::printable(row, false));
    }
    text
}

/// `text` dimmed (SGR 2), reset after.
pub(crate) fn dim(text: &str) -> String {
    format!("\x1b[2m{text}\x1b[0m")
}
