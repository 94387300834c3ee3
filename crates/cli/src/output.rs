//! Rendering a run: text, json, or stream-json (Claude Code's shapes), plus the result object.

use render::printable;
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use executor::ExecutorEvent;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loop_core::{LoopEvent, LoopOutcome, Terminal, Transition};
use protocol::{ContentBlock, ContentDelta, StreamEvent, Usage};
use serde_json::{Value, json};

use crate::args::OutputFormat;
use session::cost::{Totals, compact_count};
pub use session::rows::{checklist, tool_label};
use session::rows::{context_line, detail_lines, dim, one_line, red, result_lines, stop_sentence};

pub use session::sdk::exit_code;

/// `line` wrapped at the terminal's width on word boundaries when stderr is a terminal and
/// the line is longer (the terminal would cut it mid-word); as it is otherwise, and when it
/// holds escape sequences or line breaks of its own.
fn fit_to_terminal(line: &str) -> std::borrow::Cow<'_, str> {
    use std::io::IsTerminal as _;
    if line.contains(['\x1b', '\n']) || !std::io::stderr().is_terminal() {
        return line.into();
    }
    match render::tui::terminal_width() {
        Some(width) if render::display_width(line) >= width => {
            fill(line, width.saturating_sub(1)).into()
        }
        _ => line.into(),
    }
}

/// `line` (plain text) filled into lines of at most `width` columns, on word boundaries.
fn fill(line: &str, width: usize) -> String {
    render::wrap(&[render::Span::new(line, render::Style::default())], width).join("\n")
}

/// The spinner and output gate of a live run on a terminal, shared (cheap clones) between the
/// renderer and the permission prompter.
///
/// Two back ends:
/// - the interactive session's terminal ([`Status::attach`]): everything goes to the one
///   task that owns the terminal ([`render::tui`]), which orders lines, the spinner, the
///   calls in flight and questions itself;
/// - otherwise (a headless run on a terminal) a spinner on stderr naming what is going on
///   (waiting for the model, the running tool) with the elapsed time and the tokens
///   received, hidden while the answer's text streams to stdout (headless runs ask no
///   questions). Draws nothing when stderr is not a terminal.
#[derive(Clone, Debug, Default)]
pub struct Status {
    inner: Arc<Mutex<StatusInner>>,
}

#[derive(Debug, Default)]
struct StatusInner {
    /// The terminal's task, when the interactive session owns the terminal.
    tui: Option<render::tui::Handle>,
    /// Text written since the last line break (tui back end).
    partial: String,
    /// Where a question asks the running turn's renderer to catch up first (see
    /// [`Status::catch_up`]).
    sync: Option<tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>>,
    bar: Option<ProgressBar>,
    /// The last message shown.
    message: Option<String>,
    /// The task list shown under the status line (interactive).
    todos: Option<tools::todo::TodoList>,
}

impl Status {
    fn lock(&self) -> std::sync::MutexGuard<'_, StatusInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on, draws through the terminal's task `tui` (see the type's docs).
    pub fn attach(&self, tui: render::tui::Handle) {
        let mut inner = self.lock();
        if let Some(bar) = inner.bar.take() {
            bar.finish_and_clear();
        }
        inner.tui = Some(tui);
    }

    /// Back to the spinner on stderr (the terminal's task stopped).
    pub fn detach(&self) {
        self.lock().tui = None;
    }

    /// The interactive terminal's width in columns, when attached.
    pub fn terminal_width(&self) -> Option<usize> {
        self.lock().tui.as_ref().map(render::tui::Handle::width)
    }

    /// The terminal's task, when attached.
    pub fn tui(&self) -> Option<render::tui::Handle> {
        self.lock().tui.clone()
    }

    /// The task list the status line shows under it (the interactive session's).
    pub fn set_todo_list(&self, list: tools::todo::TodoList) {
        self.lock().todos = Some(list);
    }

    /// Draws the task list under the status line as it is now (only with the terminal's
    /// task and a list).
    pub fn show_checklist(&self) {
        let (tui, list) = {
            let inner = self.lock();
            (inner.tui.clone(), inner.todos.clone())
        };
        if let (Some(tui), Some(list)) = (tui, list) {
            tui.set_checklist(checklist(&list.items(), true));
        }
    }

    /// The turn's rows redrawn in place (the calls in flight); only with the terminal's task.
    pub fn set_turn_rows(&self, rows: Vec<String>) {
        if let Some(tui) = &self.lock().tui {
            tui.set_turn_rows(rows);
        }
    }

    /// A tool's whole input and result, for Ctrl-O; only with the terminal's task.
    pub fn record_detail(&self, lines: Vec<String>) {
        if let Some(tui) = &self.lock().tui {
            tui.record_detail(lines);
        }
    }

    /// Shows `message` (replacing the current one; starts the spinner if hidden).
    pub fn show(&self, message: String) {
        let mut inner = self.lock();
        if let Some(tui) = &inner.tui {
            tui.set_activity(Some(message));
            return;
        }
        inner.message = Some(message.clone());
        match inner.bar.as_ref() {
            Some(bar) => bar.set_message(message),
            None => {
                let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                spinner.set_style(
                    ProgressStyle::with_template("{spinner:.cyan} {msg} {elapsed:.dim}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                spinner.set_message(message);
                spinner.enable_steady_tick(Duration::from_millis(100));
                inner.bar = Some(spinner);
            }
        }
    }

    /// Clears the spinner from the screen.
    pub fn hide(&self) {
        let mut inner = self.lock();
        if let Some(tui) = &inner.tui {
            tui.set_activity(None);
            return;
        }
        inner.message = None;
        if let Some(bar) = inner.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Writes a line to stderr above the spinner (held back during a pause).
    pub fn println(&self, line: &str) {
        let inner = self.lock();
        if let Some(tui) = &inner.tui {
            tui.commit(line.split('\n').map(str::to_owned).collect());
            return;
        }
        let line = fit_to_terminal(line);
        match inner.bar.as_ref() {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Writes answer text to stdout, with the spinner out of the way (held back during a
    /// pause).
    pub fn print_text(&self, text: &str) {
        let mut inner = self.lock();
        if let Some(tui) = inner.tui.clone() {
            // Whole lines go to the scrollback; the rest waits for its line break.
            inner.partial.push_str(&printable(text, true));
            if let Some(end) = inner.partial.rfind('\n') {
                let done: String = inner.partial.drain(..=end).collect();
                tui.commit(done.lines().map(str::to_owned).collect());
            }
            return;
        }
        if let Some(bar) = inner.bar.take() {
            bar.finish_and_clear();
        }
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, "{}", printable(text, true));
        let _ = stdout.flush();
    }

    /// Writes rendered lines to stdout (already safe to print, with their own SGR
    /// sequences), with the spinner out of the way (held back during a pause).
    pub fn print_lines(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let inner = self.lock();
        if let Some(tui) = &inner.tui {
            tui.commit(lines.to_vec());
            return;
        }
        let mut text = lines.join("\n");
        text.push('\n');
        let mut stdout = std::io::stdout().lock();
        match inner.bar.as_ref() {
            Some(bar) => bar.suspend(|| {
                let _ = write!(stdout, "{text}");
                let _ = stdout.flush();
            }),
            None => {
                let _ = write!(stdout, "{text}");
                let _ = stdout.flush();
            }
        }
    }

    /// Where the running turn's renderer takes catch-up requests from now on (`None` when the
    /// turn ends).
    pub fn set_sync(
        &self,
        sync: Option<tokio::sync::mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>>,
    ) {
        self.lock().sync = sync;
    }

    /// Waits until the turn's renderer has drawn every event the loop sent before this call
    /// (and the text it held back): a question asked about a tool call then comes after the
    /// text that preceded the call. Waits at most a second; returns at once outside a turn.
    pub async fn catch_up(&self) {
        let sender = self.lock().sync.clone();
        session::catch_up(sender).await;
    }
}

/// Writes the run's events as they come and the result at the end.
#[derive(Debug)]
pub struct Renderer {
    format: OutputFormat,
    session_id: String,
    /// The stream-json lines (that format only).
    lines: Option<session::stream_json::Lines>,
    /// `--verbose`: each request and transition named on stderr.
    verbose: bool,
    /// `--json-schema`: the structured output, as far as it got.
    structured: Option<session::structured::Shared>,
    /// The whole run's figures: time, cost, usage by model, denials.
    run: RunFigures,
    /// The turn's figures: the response streaming now and the responses so far.
    turn: TurnFigures,
    /// What the terminal shows while the turn runs.
    view: LiveView,
}

/// The whole run's figures: time, cost, usage by model, denials.
#[derive(Debug)]
struct RunFigures {
    started: Instant,
    api_time: Duration,
    /// The model the last request asked for (a server may answer with another name, such
    /// as a dated version of it).
    requested_model: String,
    denials: Vec<Value>,
    /// Usage and cost by model, of every response (main agent, subagents, summaries).
    ledger: session::cost::Ledger,
    /// The main agent's requests' times to first token.
    first_tokens: session::cost::FirstTokens,
    /// Usage of every subagent's responses.
    subagent_usage: Usage,
    /// Model requests of subagents.
    subagent_requests: u32,
    /// The session's figures before this turn, for a status line kept current during it.
    live_totals: Option<(Totals, u64)>,
    /// The settings' `statusLine` command, refreshed as the figures change.
    status_line: Option<session::StatusFollower>,
}

/// The turn's figures: the response streaming now and the responses so far.
#[derive(Debug)]
struct TurnFigures {
    request_started: Option<Instant>,
    message_model: String,
    /// The stop_reason of the main agent's last response, as the API gave it.
    last_stop_reason: Option<String>,
    /// Tokens the main agent's last completed request sent.
    context_tokens: Option<u64>,
    /// This turn's completed responses so far (the main loop's): their usage, their cost
    /// (`None` once one could not be priced) and their number, for the live status line
    /// (the loop reports usage for the cost only once a response's tools are done).
    turn_usage: Usage,
    turn_cost: Option<f64>,
    turn_responses: u64,
    /// Output tokens of the responses finished so far, and of the one streaming.
    tokens_done: u64,
    tokens_streaming: u64,
    /// Text of the response streaming now was drawn: a restart of its stream discards it.
    response_text_shown: bool,
}

/// What the terminal shows while the turn runs.
#[derive(Debug)]
struct LiveView {
    live_text: bool,
    wrote_text: bool,
    /// Something was drawn after the last tool's result (text, or another tool): a tool-use
    /// summary of the batch before it (the small fast model's line, which the loop reports
    /// once the next model call has ended) would show out of order, after the answer, and is
    /// not drawn.
    answered: bool,
    /// The spinner (live runs only).
    status: Option<Status>,
    /// The answer's Markdown, rendered block by block (interactive).
    markdown: Option<render::MarkdownStream>,
    /// When the open Markdown block's tail was last drawn in the live rows.
    preview_at: Option<Instant>,
    /// Inputs of the tool_use blocks seen, by id, for the tool lines.
    tool_inputs: HashMap<String, Value>,
    /// Tools running now, by id, with their labels.
    running: Vec<(String, String)>,
    /// The calls of the batch in flight, in the order they started: each one's `⏺` line is
    /// written with its own result under it, in that order (a later call that finishes
    /// first waits for the ones before it).
    calls: CallQueue,
    /// Subagents seen, by id: (requested model, answering model, message id, description,
    /// current tool).
    agents: BTreeMap<String, AgentView>,
    /// The last progress summary (live view).
    progress: Option<String>,
}

/// The tool calls of the batch in flight, in the order they started, as the terminal shows
/// them: each call's `⏺` line with its own result under it, in that order; a call that
/// finishes before an earlier one waits for it. Each method returns the lines to write now.
///
/// `in_place` (the interactive terminal): a call's lines are written only once it and every
/// call before it finished; until then [`CallQueue::live_rows`] gives the rows to redraw in
/// place, each call with its own state.
#[derive(Debug, Default)]
struct CallQueue {
    calls: Vec<CallView>,
    in_place: bool,
}

#[derive(Debug)]
struct CallView {
    id: String,
    label: String,
    /// Its `⏺` line is written.
    shown: bool,
    /// Its result's lines, once it finished.
    lines: Option<Vec<String>>,
    /// Its result's first line, when it finished before an earlier call (its lines come in
    /// order).
    preview: Option<String>,
}

impl CallQueue {
    /// Call `id` started (or was answered without running), labelled `label`.
    fn start(&mut self, id: &str, label: String) -> Vec<String> {
        if !self.calls.iter().any(|call| call.id == id) {
            self.calls.push(CallView {
                id: id.to_owned(),
                label,
                shown: false,
                lines: None,
                preview: None,
            });
        }
        self.ready()
    }

    /// Call `id` finished with `lines` under it.
    fn finish(&mut self, id: &str, lines: Vec<String>) -> Vec<String> {
        if let Some(call) = self.calls.iter_mut().find(|call| call.id == id) {
            call.lines = Some(lines);
        }
        self.ready()
    }

    /// The calls not written yet, each as its `⏺` line and its state: the first line of its
    /// result once it finished, else that it runs.
    fn live_rows(&self) -> Vec<String> {
        let mut rows = Vec::new();
        for call in &self.calls {
            rows.push(format!("⏺ {}", call.label));
            match (&call.lines, &call.preview) {
                (Some(lines), _) => rows.extend(lines.first().cloned()),
                (None, Some(preview)) => rows.push(preview.clone()),
                (None, None) => rows.push(dim("  ⎿  running…")),
            }
        }
        rows
    }

    /// Call `id` finished before an earlier one; `line` stands for its result until then.
    fn preview(&mut self, id: &str, line: String) {
        if let Some(call) = self.calls.iter_mut().find(|call| call.id == id) {
            call.preview = Some(line);
        }
    }

    /// Whether call `id` is known.
    fn knows(&self, id: &str) -> bool {
        self.calls.iter().any(|call| call.id == id)
    }

    /// From the first call on: its `⏺` line, and its result when it has one; stops at the
    /// first call still running.
    fn ready(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(call) = self.calls.first_mut() {
            if self.in_place && call.lines.is_none() {
                break;
            }
            if !call.shown {
                call.shown = true;
                out.push(format!("⏺ {}", call.label));
                continue;
            }
            let Some(lines) = call.lines.take() else {
                break;
            };
            self.calls.remove(0);
            out.extend(lines);
        }
        out
    }
}

/// What the renderer keeps of one subagent.
#[derive(Debug, Default)]
struct AgentView {
    requested_model: String,
    message_model: String,
    description: String,
    /// The tool it runs now, when it runs one.
    tool: Option<String>,
    /// The Task call that started it.
    parent: String,
    done: bool,
}

impl Renderer {
    /// A renderer; `live_text` streams text deltas (text format on a terminal).
    pub fn new(format: OutputFormat, session_id: &str, model: &str, live_text: bool) -> Self {
        Self {
            format,
            session_id: session_id.to_owned(),
            lines: (format == OutputFormat::StreamJson)
                .then(|| session::stream_json::Lines::stdout(session_id)),
            verbose: false,
            structured: None,
            run: RunFigures {
                started: Instant::now(),
                api_time: Duration::ZERO,
                requested_model: model.to_owned(),
                denials: Vec::new(),
                ledger: session::cost::Ledger::default(),
                first_tokens: session::cost::FirstTokens::default(),
                subagent_usage: Usage::default(),
                subagent_requests: 0,
                live_totals: None,
                status_line: None,
            },
            turn: TurnFigures {
                request_started: None,
                message_model: model.to_owned(),
                last_stop_reason: None,
                context_tokens: None,
                turn_usage: Usage::default(),
                turn_cost: Some(0.0),
                turn_responses: 0,
                tokens_done: 0,
                tokens_streaming: 0,
                response_text_shown: false,
            },
            view: LiveView {
                live_text,
                wrote_text: false,
                answered: false,
                status: None,
                markdown: None,
                preview_at: None,
                tool_inputs: HashMap::new(),
                running: Vec::new(),
                calls: CallQueue::default(),
                agents: BTreeMap::new(),
                progress: None,
            },
        }
    }

    /// Reports `--json-schema`'s structured output in the result (`structured_output`, or
    /// the subtype `error_max_structured_output_retries`).
    pub fn with_structured(mut self, structured: Option<session::structured::Shared>) -> Self {
        self.structured = structured;
        self
    }

    /// Whether `--json-schema`'s tries were used up without a valid structured output.
    pub fn structured_failed(&self) -> bool {
        self.structured.as_ref().is_some_and(|shared| {
            let outcome = shared.lock().unwrap_or_else(PoisonError::into_inner);
            outcome.value.is_none() && outcome.misses >= session::structured::MAX_TRIES
        })
    }

    /// Names each request (its number, turn and model) and each transition of the loop on
    /// stderr (`--verbose`); retries are named there anyway.
    pub fn with_verbose(mut self, on: bool) -> Self {
        self.verbose = on;
        self
    }

    /// Writes a `stream_event` line for every event of the main agent's model stream
    /// (stream-json only; Claude Code's `--include-partial-messages`).
    pub fn with_partial_messages(mut self, on: bool) -> Self {
        self.lines = self
            .lines
            .take()
            .map(|lines| lines.with_partial_messages(on));
        self
    }

    /// Prices models with `overrides` (settings' `models` entries) before the built-in table.
    pub fn with_prices(mut self, overrides: Arc<BTreeMap<String, context::Prices>>) -> Self {
        self.run.ledger.set_overrides(overrides);
        self
    }

    /// Shows a spinner and tool activity on stderr (live text runs on a terminal).
    pub fn with_status(mut self, status: Status) -> Self {
        if self.view.live_text {
            self.view.calls.in_place = status.tui().is_some();
            self.view.status = Some(status);
        }
        self
    }

    /// Keeps the status line's figures current while the turn runs: the session's `totals`
    /// before it plus what the turn has used so far, against `autocompact_at` tokens.
    pub fn with_live_totals(mut self, totals: Totals, autocompact_at: u64) -> Self {
        self.run.live_totals = Some((totals, autocompact_at));
        self
    }

    /// Runs the settings' `statusLine` command as the live figures change (see
    /// [`session::StatusFollower`]).
    pub fn with_status_line(mut self, follower: Option<session::StatusFollower>) -> Self {
        self.run.status_line = follower;
        self
    }

    /// Sends the status line its figures now (see [`Renderer::with_live_totals`]).
    fn update_figures(&self) {
        let (Some((base, autocompact_at)), Some(status)) =
            (&self.run.live_totals, &self.view.status)
        else {
            return;
        };
        let Some(tui) = status.tui() else {
            return;
        };
        let mut totals = base.clone();
        let mut usage = self.turn.turn_usage.clone();
        usage.accumulate(&self.run.subagent_usage);
        totals.add(&usage, self.turn.turn_cost);
        totals.requests += self.turn.turn_responses;
        if let Some(tokens) = self.turn.context_tokens {
            totals.context = Some(tokens);
        }
        totals.first_token_ms = self.run.first_tokens.last().or(totals.first_token_ms);
        tui.set_figures(totals.figures(*autocompact_at));
        if let Some(follower) = &self.run.status_line {
            follower.update(&totals, move |rows| tui.set_custom_status(Some(rows)));
        }
    }

    /// Redraws the turn's live rows (the interactive terminal): the tail of the Markdown
    /// block still streaming, dim and raw (it is drawn rendered once complete), then the
    /// calls in flight.
    fn update_calls(&mut self) {
        const PREVIEW_ROWS: usize = 6;
        if !self.view.calls.in_place {
            return;
        }
        let Some(status) = &self.view.status else {
            return;
        };
        let mut rows = Vec::new();
        if let Some(markdown) = &self.view.markdown {
            let width = markdown.width().saturating_sub(2).max(10);
            let mut wrapped: Vec<String> = Vec::new();
            // The tail only: the cost stays the same however long the block grows.
            let pending = markdown.pending();
            let mut from = pending.len().saturating_sub(PREVIEW_ROWS * width * 4);
            while !pending.is_char_boundary(from) {
                from += 1;
            }
            for line in pending[from..].lines() {
                let line = printable(line, false);
                if line.is_empty() {
                    wrapped.push(String::new());
                    continue;
                }
                // Between words, as the block is drawn once complete (a word wider than a
                // row is cut).
                wrapped.extend(render::wrap(
                    &[render::Span::new(line, render::Style::default())],
                    width,
                ));
            }
            let skip = wrapped.len().saturating_sub(PREVIEW_ROWS);
            rows.extend(wrapped[skip..].iter().map(|row| dim(row)));
        }
        rows.extend(self.view.calls.live_rows());
        status.set_turn_rows(rows);
        self.view.preview_at = Some(Instant::now());
    }

    /// Renders the answer's Markdown for the terminal (headings, lists, tables, coloured
    /// code) instead of writing it raw; live text runs only.
    pub fn with_markdown(mut self, on: bool) -> Self {
        if on && self.view.live_text {
            let width = console::Term::stdout()
                .size_checked()
                .map_or(80, |(_, columns)| usize::from(columns));
            self.view.markdown = Some(render::MarkdownStream::new(width.saturating_sub(1)));
        }
        self
    }

    /// Writes lines already rendered to stdout, around the spinner.
    fn print_rendered(&self, lines: &[String]) {
        match &self.view.status {
            Some(status) => status.print_lines(lines),
            None => {
                let mut stdout = std::io::stdout().lock();
                for line in lines {
                    let _ = writeln!(stdout, "{line}");
                }
                let _ = stdout.flush();
            }
        }
    }

    /// Draws what is held back (the Markdown of an unfinished block): a question is about to
    /// be asked.
    pub fn flush(&mut self) {
        self.end_text();
    }

    fn show(&self, activity: &str) {
        if let Some(status) = &self.view.status {
            // The last progress summary, when there is one: "Fixing the test · Running …".
            let activity = match &self.view.progress {
                Some(progress) => format!("{progress} · {activity}"),
                None => activity.to_owned(),
            };
            let activity = activity.as_str();
            let tokens = self.turn.tokens_done + self.turn.tokens_streaming;
            let message = if tokens == 0 {
                format!("{activity}…")
            } else {
                format!("{activity}… · ↓ {} tokens", compact_count(tokens))
            };
            status.show(message);
        }
    }

    /// Renders the Markdown blocks completed from now on at the interactive terminal's
    /// width, which a resize may have changed since the stream began.
    fn follow_width(&mut self) {
        if let (Some(markdown), Some(width)) = (
            &mut self.view.markdown,
            self.view.status.as_ref().and_then(Status::terminal_width),
        ) {
            markdown.set_width(width.saturating_sub(1));
        }
    }

    /// Ends the text line being streamed, if any, before something else is written (with
    /// Markdown, the last block is rendered).
    fn end_text(&mut self) {
        self.follow_width();
        if let Some(markdown) = &mut self.view.markdown {
            let lines = markdown.finish();
            self.print_rendered(&lines);
            self.update_calls();
        }
        if self.view.wrote_text {
            match &self.view.status {
                Some(status) => status.print_text("\n"),
                None => println!(),
            }
            self.view.wrote_text = false;
        }
    }

    /// Writes `lines` on stderr, around the spinner.
    fn write_lines(&self, lines: &[String]) {
        for line in lines {
            self.stderr_line(line);
        }
    }

    /// The spinner's activity: the running tools (the first, and how many more), else
    /// thinking.
    fn show_running(&self) {
        match self.view.running.as_slice() {
            [] => self.show("Thinking"),
            [(_, label)] => self.show(&format!("Running {label}")),
            [(_, label), rest @ ..] => {
                self.show(&format!("Running {label} (+{} more)", rest.len()));
            }
        }
    }

    /// A tool call's progress in the live view: its `⏺` line when it starts, its result
    /// under it when it ends, the preview of a finished call, the spinner's label.
    fn live_tool(&mut self, event: &ExecutorEvent) {
        match event {
            ExecutorEvent::Started {
                tool_use_id, name, ..
            } => {
                self.end_text();
                self.view.answered = true;
                let input = self
                    .view
                    .tool_inputs
                    .get(tool_use_id.as_str())
                    .cloned()
                    .unwrap_or(Value::Null);
                let label = tool_label(name, &input);
                let lines = self.view.calls.start(tool_use_id.as_str(), label.clone());
                self.write_lines(&lines);
                self.update_calls();
                self.view.running.push((tool_use_id.to_string(), label));
                self.show_running();
            }
            ExecutorEvent::Completed(done) => {
                self.view.answered = false;
                let id = done.result.tool_use_id.as_str();
                let input = self
                    .view
                    .tool_inputs
                    .get(id)
                    .cloned()
                    .unwrap_or(Value::Null);
                if !self.view.calls.knows(id) {
                    // Answered without running (refused, unknown, cut off): named too.
                    self.end_text();
                    let lines = self.view.calls.start(id, tool_label(&done.name, &input));
                    self.write_lines(&lines);
                }
                if tools::todo::changes_the_list(&done.name)
                    && let Some(status) = &self.view.status
                {
                    status.show_checklist();
                }
                let mut lines = result_lines(done, &input);
                lines.extend(
                    done.notes
                        .iter()
                        .map(|note| dim(&format!("     {}", one_line(note)))),
                );
                if let Some(status) = &self.view.status {
                    status.record_detail(detail_lines(done, &input));
                }
                let lines = self.view.calls.finish(id, lines);
                self.write_lines(&lines);
                self.update_calls();
                self.view
                    .running
                    .retain(|(running, _)| running.as_str() != id);
                self.show_running();
            }
            ExecutorEvent::Finished {
                tool_use_id,
                is_error,
                preview,
                ..
            } => {
                let text = printable(preview, false);
                let line = if *is_error {
                    format!("  ⎿  {}", red(&text))
                } else {
                    format!("  ⎿  {text}")
                };
                self.view.calls.preview(tool_use_id.as_str(), line);
                self.update_calls();
                self.view
                    .running
                    .retain(|(running, _)| running.as_str() != tool_use_id.as_str());
                self.show_running();
            }
            // Nothing to draw for the others (permission denials come as results too).
            _ => {}
        }
    }

    /// Live rendering on a terminal: the spinner, tool lines, retries.
    fn live(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::Request { .. } => {
                self.turn.tokens_streaming = 0;
                self.turn.response_text_shown = false;
                self.show("Thinking");
            }
            // The stream broke and is asked again: what it had drawn will not be kept.
            LoopEvent::Transition(Transition::StreamRetry | Transition::NonStreamingFallback)
                if self.turn.response_text_shown =>
            {
                self.end_text();
                self.turn.response_text_shown = false;
                self.stderr_line(&dim(
                    "  ⋯ the answer above was cut off (the stream broke) and is discarded; retrying",
                ));
            }
            LoopEvent::Stream(StreamEvent::MessageDelta(delta)) => {
                if let Some(tokens) = delta.usage.as_ref().and_then(|usage| usage.output_tokens) {
                    self.turn.tokens_streaming = tokens;
                    let label = self.view.running.last().map(|(_, label)| label.clone());
                    if self.view.status.is_some() && !self.view.wrote_text {
                        self.show(&label.map_or_else(
                            || "Thinking".to_owned(),
                            |label| format!("Running {label}"),
                        ));
                    }
                }
            }
            LoopEvent::Block(block) => {
                match &block.block {
                    ContentBlock::ToolUse(tool_use) => {
                        self.view
                            .tool_inputs
                            .insert(tool_use.id.to_string(), tool_use.input.clone());
                    }
                    // A text block is complete: its last Markdown block is drawn now, before
                    // any question about the tool calls after it.
                    ContentBlock::Text(_) if self.view.markdown.is_some() => self.end_text(),
                    // Thinking: one dim row; the whole of it with the turn in full.
                    ContentBlock::Thinking(thinking) if !thinking.thinking.trim().is_empty() => {
                        let (row, detail) = session::rows::thinking_rows(&thinking.thinking);
                        if let Some(status) = &self.view.status {
                            status.record_detail(detail);
                        }
                        self.write_lines(&[row]);
                    }
                    _ => {}
                }
            }
            LoopEvent::Assistant(message) => {
                self.turn.tokens_done += message.usage.output_tokens;
                self.turn.tokens_streaming = 0;
                // The status line counts the response as soon as it is complete.
                let prices = (self.run.ledger).prices(&message.model, &self.run.requested_model);
                self.turn.turn_cost = self
                    .turn
                    .turn_cost
                    .zip(prices.map(|prices| prices.cost(&message.usage)))
                    .map(|(total, cost)| total + cost);
                self.turn.turn_usage.accumulate(&message.usage);
                self.turn.turn_responses += 1;
                self.update_figures();
            }
            LoopEvent::Tool(event) => self.live_tool(event),
            LoopEvent::Retry {
                attempt, reason, ..
            } => {
                self.end_text();
                self.stderr_line(&format!(
                    "  ⚠ retrying (attempt {attempt}): {}",
                    printable(reason, false)
                ));
                self.show("Waiting to retry");
            }
            LoopEvent::Context(event) => {
                self.end_text();
                self.stderr_line(&format!("  ⋯ {}", context_line(event)));
            }
            // The loop's own user messages are a stop hook's feedback.
            LoopEvent::UserMessage(message) => {
                self.end_text();
                let text: Vec<&str> = message
                    .content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect();
                self.stderr_line(&dim(&format!("  ⎿  {}", one_line(&text.join("\n")))));
            }
            // The progress summary names what the spinner waits on.
            LoopEvent::ProgressSummary { text, .. } => {
                self.view.progress = Some(printable(&one_line(text), false));
                // Streaming text owns the line until it ends.
                if !self.view.wrote_text {
                    let activity = self.view.running.last().map_or_else(
                        || "Thinking".to_owned(),
                        |(_, label)| format!("Running {label}"),
                    );
                    self.show(&activity);
                }
            }
            LoopEvent::ToolUseSummary { text, .. } if !self.view.answered => {
                self.end_text();
                self.stderr_line(&dim(&format!("  ⎿  {}", printable(&one_line(text), false))));
            }
            // Nothing to draw for these (a new kind of event must be decided on here).
            LoopEvent::ToolUseSummary { .. }
            | LoopEvent::Stream(_)
            | LoopEvent::ToolResults(_)
            | LoopEvent::PartialAssistant(_)
            | LoopEvent::Idle { .. }
            | LoopEvent::DiscardedTools { .. }
            | LoopEvent::History(_)
            | LoopEvent::Transition(_)
            | LoopEvent::Usage(_) => {}
        }
    }

    fn stderr_line(&self, line: &str) {
        match &self.view.status {
            Some(status) => status.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// A response's usage, priced at the prices of the model that answered (else the one
    /// asked).
    fn usage(&mut self, usage: &Usage) {
        (self.run.ledger).add(&self.turn.message_model, &self.run.requested_model, usage);
    }

    /// `--verbose`: each request and each transition of the loop on stderr.
    fn verbose_line(&self, event: &LoopEvent) {
        match event {
            LoopEvent::Request {
                turn,
                request,
                model,
            } => self.stderr_line(&format!(
                "agent: request {request} (turn {turn}) to {}",
                printable(model, false)
            )),
            LoopEvent::Transition(transition) => {
                self.stderr_line(&format!("agent: transition: {}", transition.as_str()));
            }
            _ => {}
        }
    }

    /// A live run's text delta: Markdown rendered block by block (interactive), else the
    /// text as it comes.
    fn text_delta(&mut self, text: &str) {
        self.turn.response_text_shown = true;
        self.view.answered = true;
        self.follow_width();
        if let Some(markdown) = &mut self.view.markdown {
            // Complete blocks only: the cursor stays at a line's start, the spinner keeps
            // its line.
            let lines = markdown.push(text);
            self.print_rendered(&lines);
            // The open block's tail, at most 10 times a second.
            if !lines.is_empty()
                || self
                    .view
                    .preview_at
                    .is_none_or(|at| at.elapsed() >= Duration::from_millis(100))
            {
                self.update_calls();
            }
            return;
        }
        match &self.view.status {
            Some(status) => status.print_text(text),
            None => {
                let mut stdout = std::io::stdout().lock();
                let _ = write!(stdout, "{}", printable(text, true));
                let _ = stdout.flush();
            }
        }
        self.view.wrote_text = true;
    }

    /// A response completed: its time, the context its request sent, its model and
    /// stop_reason.
    fn response_done(&mut self, message: &protocol::Message) {
        if let Some(started) = self.turn.request_started.take() {
            self.run.api_time += started.elapsed();
        }
        // What the request sent, as the completed response counts it (Chat Completions and
        // the Responses API report usage only at the end).
        self.turn.context_tokens = Some(
            message.usage.input_tokens
                + message.usage.cache_creation_input_tokens.unwrap_or(0)
                + message.usage.cache_read_input_tokens.unwrap_or(0),
        );
        self.turn.message_model = message.model.clone();
        self.turn.last_stop_reason = message
            .stop_reason
            .as_ref()
            .map(|reason| reason.as_str().to_owned());
    }

    /// A request starts, or its response's first event comes: its time to first token, the
    /// model asked and the one answering.
    fn follow_request(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::Request { model, .. } => {
                self.turn.request_started = Some(Instant::now());
                self.run.first_tokens.request();
                self.run.requested_model.clone_from(model);
            }
            LoopEvent::Stream(StreamEvent::MessageStart { message }) => {
                // Shown with the response's figures when it completes.
                if let Some(ms) = self.run.first_tokens.first_token()
                    && self.verbose
                {
                    self.stderr_line(&format!("agent: first token after {ms} ms"));
                }
                self.turn.message_model = message.model.clone();
            }
            _ => {}
        }
    }

    /// Renders one loop event.
    pub fn event(&mut self, event: &LoopEvent) {
        if self.view.live_text {
            self.live(event);
        }
        if self.verbose {
            self.verbose_line(event);
        }
        if let Some(lines) = &mut self.lines {
            lines.event(event);
        }
        self.follow_request(event);
        match event {
            LoopEvent::Stream(StreamEvent::ContentBlockDelta {
                delta: ContentDelta::Text { text },
                ..
            }) if self.view.live_text => self.text_delta(text),
            LoopEvent::Assistant(message) => self.response_done(message),
            // Every usage the loop reports is priced: completed responses (kept or not) and
            // the part of a response an abort cut short, at the prices of the model that
            // answered.
            LoopEvent::Usage(usage) => self.usage(usage),
            // A web tool's own model request (a page answered, a search): its cost.
            LoopEvent::Tool(ExecutorEvent::Progress { progress, .. }) => {
                if let Some((answered, asked, usage)) = session::web::usage_of(progress) {
                    self.run.ledger.add(&answered, &asked, &usage);
                }
            }
            LoopEvent::Tool(ExecutorEvent::PermissionDenied {
                tool_use_id,
                name,
                input,
                ..
            }) => {
                self.run.denials.push(
                    json!({"tool_name": name, "tool_use_id": tool_use_id, "tool_input": input}),
                );
            }
            // A Task call's result: its subagent is done, however it ended.
            LoopEvent::Tool(ExecutorEvent::Completed(done)) if !self.view.agents.is_empty() => {
                let id = done.result.tool_use_id.as_str();
                self.view
                    .agents
                    .values_mut()
                    .filter(|view| view.parent == id)
                    .for_each(|view| view.done = true);
            }
            // A live run shows retries in its own way; every other run says on stderr why
            // it is waiting (a run with the network down would otherwise sit silent).
            LoopEvent::Retry {
                attempt,
                delay,
                reason,
            } if !self.view.live_text => {
                eprintln!(
                    "agent: retrying in {:.1} s (attempt {attempt}): {}",
                    delay.as_secs_f64(),
                    printable(reason, false)
                );
            }
            // Background summaries: priced at the fast model's rates.
            LoopEvent::ProgressSummary { model, usage, .. }
            | LoopEvent::ToolUseSummary { model, usage, .. } => {
                self.run.ledger.add(model, model, usage);
            }
            // Nothing to write for these in this format (a new kind of event must be decided
            // on here).
            LoopEvent::Request { .. }
            | LoopEvent::Stream(_)
            | LoopEvent::Block(_)
            | LoopEvent::Tool(_)
            | LoopEvent::ToolResults(_)
            | LoopEvent::UserMessage(_)
            | LoopEvent::PartialAssistant(_)
            | LoopEvent::Context(_)
            | LoopEvent::Retry { .. }
            | LoopEvent::Idle { .. }
            | LoopEvent::DiscardedTools { .. }
            | LoopEvent::History(_)
            | LoopEvent::Transition(_) => {}
        }
    }

    /// Renders one event of a subagent's run: its messages as stream-json lines carrying
    /// `parent_tool_use_id` (the Task call that started it), its usage in the totals and the
    /// cost (at its own model's prices), its refused calls among the denials, and in a live
    /// view one status line naming each running subagent and its current tool.
    pub fn subagent(&mut self, event: &session::SubagentEvent) {
        if let Some(lines) = &mut self.lines {
            lines.subagent(event);
        }
        let parent = event.parent_tool_use_id.as_str();
        if matches!(event.event, LoopEvent::Request { .. }) {
            self.run.subagent_requests += 1;
        }
        let view = self.view.agents.entry(event.agent_id.clone()).or_default();
        if view.description.is_empty() {
            view.description.clone_from(&event.description);
            view.parent = parent.to_owned();
        }
        match &event.event {
            LoopEvent::Request { model, .. } => view.requested_model.clone_from(model),
            LoopEvent::Stream(StreamEvent::MessageStart { message }) => {
                view.message_model.clone_from(&message.model);
            }
            LoopEvent::Usage(usage) => {
                let cost = (self.run.ledger).add(&view.message_model, &view.requested_model, usage);
                self.turn.turn_cost = self
                    .turn
                    .turn_cost
                    .zip(cost)
                    .map(|(total, cost)| total + cost);
                self.run.subagent_usage.accumulate(usage);
                self.update_figures();
            }
            LoopEvent::Tool(ExecutorEvent::Started { name, .. }) => {
                view.tool = Some(name.clone());
                self.show_agents();
            }
            LoopEvent::Tool(ExecutorEvent::Completed(_)) => {
                view.tool = None;
                self.show_agents();
            }
            LoopEvent::Tool(ExecutorEvent::PermissionDenied {
                tool_use_id,
                name,
                input,
                ..
            }) => {
                self.run.denials.push(
                    json!({"tool_name": name, "tool_use_id": tool_use_id, "tool_input": input}),
                );
            }
            LoopEvent::Assistant(message) => view.message_model.clone_from(&message.model),
            _ => {}
        }
    }

    /// The live status line while subagents run: each with its current tool.
    fn show_agents(&self) {
        if self.view.status.is_none() {
            return;
        }
        let running: Vec<String> = self
            .view
            .agents
            .values()
            .filter(|view| !view.done)
            .map(|view| match &view.tool {
                Some(tool) => format!("{} ({tool})", view.description),
                None => view.description.clone(),
            })
            .collect();
        if !running.is_empty() {
            self.show(&printable(
                &format!("Running {}: {}", plural(running.len()), running.join(" · ")),
                false,
            ));
        }
    }

    /// The result object.
    pub fn result(&self, outcome: &LoopOutcome) -> Value {
        let structured = self.structured.as_ref().and_then(|shared| {
            shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .value
                .clone()
        });
        session::sdk::result_message(
            outcome,
            &session::sdk::RunReport {
                session_id: &self.session_id,
                duration: self.run.started.elapsed(),
                api_duration: self.run.api_time,
                stop_reason: self.turn.last_stop_reason.as_deref(),
                ledger: &self.run.ledger,
                extra_requests: self.run.subagent_requests,
                denials: &self.run.denials,
                structured,
                structured_failed: self.structured_failed(),
                first_tokens: &self.run.first_tokens,
            },
        )
    }

    /// The usage of the run: the main agent's (`outcome`) and every subagent's.
    pub fn total_usage(&self, outcome: &LoopOutcome) -> Usage {
        let mut usage = outcome.usage.clone();
        usage.accumulate(&self.run.subagent_usage);
        usage
    }

    /// The tokens the main agent's last request sent (input, cache writes and reads, as its
    /// completed response counted them): how full the context is; `None` before the first
    /// response.
    pub fn context_tokens(&self) -> Option<u64> {
        self.turn.context_tokens
    }

    /// The last request's time to first token, in milliseconds.
    pub fn first_token_ms(&self) -> Option<u64> {
        self.run.first_tokens.last()
    }

    /// The cost of the run in USD so far; `None` when a model without a known price answered.
    pub fn cost(&self) -> Option<f64> {
        self.run.ledger.cost()
    }

    /// Writes the end of one interactive turn: the answer's last line ended (or the answer,
    /// when it was not streamed), and why the turn stopped when it did not complete.
    pub fn finish_interactive(&mut self, outcome: &LoopOutcome) {
        if let Some(status) = &self.view.status {
            status.hide();
        }
        let streamed = self.view.wrote_text || self.view.markdown.is_some();
        self.end_text();
        if !streamed && !self.view.live_text && !outcome.result.is_empty() {
            println!("{}", printable(&outcome.result, true));
        }
        if outcome.terminal != Terminal::Completed {
            let line = format!("agent: {}", stop_sentence(&outcome.terminal));
            match &self.view.status {
                Some(status) => status.println(&red(&line)),
                None => eprintln!("{line}"),
            }
        }
    }

    /// Writes the end of the run.
    pub fn finish(&self, outcome: &LoopOutcome) {
        if let Some(status) = &self.view.status {
            status.hide();
        }
        match self.format {
            OutputFormat::Text => {
                if self.view.wrote_text {
                    println!();
                } else if !outcome.result.is_empty() {
                    let mut stdout = std::io::stdout().lock();
                    let _ = writeln!(stdout, "{}", printable(&outcome.result, true));
                }
                // A run whose calls were refused is not a silent success.
                if !self.run.denials.is_empty() {
                    let mut names: Vec<&str> = self
                        .run
                        .denials
                        .iter()
                        .filter_map(|denial| denial["tool_name"].as_str())
                        .collect();
                    names.dedup();
                    let count = self.run.denials.len();
                    eprintln!(
                        "agent: {count} tool {} refused ({}); each refusal told the model why and which rule or mode would allow it (--allowedTools, --permission-mode)",
                        if count == 1 { "call was" } else { "calls were" },
                        printable(&names.join(", "), false)
                    );
                }
                if outcome.terminal != Terminal::Completed {
                    eprintln!(
                        "agent: stopped: {}",
                        printable(&outcome.terminal.to_string(), false)
                    );
                }
            }
            OutputFormat::Json | OutputFormat::StreamJson => {
                session::stream_json::stdout_line(&self.result(outcome));
            }
        }
    }
}

/// `1 agent`, `2 agents`.
fn plural(count: usize) -> String {
    if count == 1 {
        "1 agent".to_owned()
    } else {
        format!("{count} agents")
    }
}

pub use session::sdk::failure_result;

/// Writes the result of a prompt a UserPromptSubmit hook refused (nothing was sent) as one
/// line on stdout: [`failure_result`] with `terminal_reason` `prompt_blocked`.
pub fn print_blocked(message: &str, session_id: &str) {
    let mut result = failure_result(message);
    (result["terminal_reason"], result["session_id"]) =
        (json!("prompt_blocked"), json!(session_id));
    session::stream_json::stdout_line(&result);
}

/// Writes [`failure_result`] as one line on stdout.
pub fn print_failure(message: &str) {
    session::stream_json::stdout_line(&failure_result(message));
}

/// The session's view of a turn is the renderer's: each call goes to the method of the same
/// name above; catch-up requests (a question about to be asked) reach it through the status
/// line, which answers them between two events.
impl session::Observer for Renderer {
    fn event(&mut self, event: &LoopEvent) {
        Renderer::event(self, event);
    }

    fn subagent(&mut self, event: &session::SubagentEvent) {
        Renderer::subagent(self, event);
    }

    fn flush(&mut self) {
        Renderer::flush(self);
    }

    fn set_catch_up(&self, catch_up: Option<session::CatchUp>) {
        if let Some(status) = &self.view.status {
            status.set_sync(catch_up);
        }
    }
}

#[cfg(test)]
mod tests {
    use loop_core::ModelError;

    use super::*;
    use session::rows::result_summary;

    #[test]
    fn long_notices_wrap_between_words() {
        let line = "agent: warning: /home/user/project/.claude/settings.json: unknown setting \"permisions\" is ignored (a typo?)";
        let filled = fill(line, 50);
        for row in filled.lines() {
            assert!(render::display_width(row) <= 50, "{row:?}");
        }
        assert!(filled.lines().count() > 1, "{filled}");
        // Every word comes through whole, in order (none is longer than a line here).
        let words: Vec<&str> = filled.split_whitespace().collect();
        assert_eq!(words, line.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn the_status_line_and_cost_add_up_the_session() {
        let mut totals = Totals::default();
        let usage = |input, output| protocol::Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: Some(500),
            ..protocol::Usage::default()
        };
        totals.add(&usage(1_000, 200), Some(0.01));
        totals.add(&usage(2_000, 300), Some(0.02));
        totals.requests = 2;
        totals.context = Some(41_000);
        assert_eq!(
            totals.figures(167_000),
            " · context 24% (41.0k/167.0k) · 2 req · 4.0k in / 500 out · $0.0300"
        );
        assert_eq!(
            totals.report(std::time::Duration::from_secs(125)),
            "Cost: $0.0300\nRequests: 2\nTokens: 4.0k in (1.0k of them cache reads), 500 out\nSession time: 2m 5s"
        );
        totals.add(&usage(1, 1), None);
        assert!(totals.figures(0).ends_with(" · $?"));
        assert!(
            totals
                .report(std::time::Duration::ZERO)
                .starts_with("Cost: $? ")
        );
    }

    #[test]
    fn every_reported_usage_is_priced_even_a_cut_response() {
        let mut renderer = Renderer::new(OutputFormat::Json, "s", "claude-sonnet-4-5", false);
        let start = |model: &str| {
            let message: protocol::Message = serde_json::from_value(serde_json::json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0}
            }))
            .unwrap();
            LoopEvent::Stream(StreamEvent::MessageStart {
                message: Box::new(message),
            })
        };
        renderer.event(&start("claude-sonnet-4-5"));
        // An abort cut the response: only its partial usage is reported.
        renderer.event(&LoopEvent::Usage(protocol::Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            ..protocol::Usage::default()
        }));
        // Sonnet 4.5: $3 per million input tokens, $15 per million output tokens.
        let cost = renderer.cost().unwrap();
        assert!((cost - 4.5).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn a_tool_name_from_the_model_is_neutralised_too() {
        assert_eq!(
            tool_label("Nope\x1b[31m", &serde_json::json!({})),
            "Nope\\u{1b}[31m"
        );
    }

    #[test]
    fn terminal_escapes_in_model_text_are_neutralised() {
        let text = "ok\x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J\x1b]0;title\x07\rdone\u{202E}txt\n\tnext";
        let shown = printable(text, true);
        assert!(!shown.contains('\x1b') && !shown.contains('\x07') && !shown.contains('\r'));
        assert!(!shown.contains('\u{202E}'));
        assert_eq!(
            shown,
            "ok\\u{1b}]52;c;cm0gLXJmIH4=\\u{7} \\u{1b}[2J\\u{1b}]0;title\\u{7}\\rdone\\u{202e}txt\n\tnext"
        );
    }

    /// Parallel calls: each result under its own call, in the order they started, whatever
    /// order they finish in.
    #[test]
    fn each_call_is_written_with_its_own_result() {
        let mut queue = CallQueue::default();
        assert_eq!(queue.start("a", "Bash(slow)".into()), ["⏺ Bash(slow)"]);
        assert!(queue.start("b", "Bash(fast)".into()).is_empty());
        assert!(queue.start("c", "Read(x)".into()).is_empty());
        // b finishes first: it waits for a.
        assert!(queue.finish("b", vec!["  ⎿  fast".into()]).is_empty());
        assert_eq!(
            queue.finish("a", vec!["  ⎿  slow".into()]),
            ["  ⎿  slow", "⏺ Bash(fast)", "  ⎿  fast", "⏺ Read(x)"]
        );
        assert_eq!(queue.finish("c", vec!["  ⎿  x".into()]), ["  ⎿  x"]);
        assert!(!queue.knows("a"));
        // A call answered without running is named, then its result.
        assert_eq!(queue.start("d", "Write(y)".into()), ["⏺ Write(y)"]);
        assert_eq!(
            queue.finish("d", vec!["  ⎿  refused".into()]),
            ["  ⎿  refused"]
        );
    }

    #[test]
    fn tool_labels_and_counts() {
        assert_eq!(
            tool_label(
                "Bash",
                &serde_json::json!({"command": "cargo test\necho done"})
            ),
            "Bash(cargo test…)"
        );
        assert_eq!(
            tool_label("Read", &serde_json::json!({"file_path": "src/lib.rs"})),
            "Read(src/lib.rs)"
        );
        assert_eq!(tool_label("Other", &serde_json::json!({"x": 1})), "Other");
        let long = "x".repeat(200);
        assert_eq!(
            tool_label("Grep", &serde_json::json!({ "pattern": long }))
                .chars()
                .count(),
            "Grep()".len() + 80 + 1
        );
        assert_eq!(compact_count(999), "999");
        assert_eq!(compact_count(1_234), "1.2k");
        assert_eq!(compact_count(2_500_000), "2.5M");
    }

    #[test]
    fn context_events_read_as_sentences() {
        let line = context_line(&context::ContextEvent::Microcompacted {
            cleared: 3,
            bytes: 4_096,
            tool_use_ids: Vec::new(),
            reason: context::MicrocompactReason::Pays,
        });
        assert_eq!(
            line,
            "cleared 3 old tool results (4096 bytes) from the context: re-reading them would cost more than rewriting the prompt cache"
        );
        let block = protocol::ToolResultBlock::text("t".into(), "\u{1b}[31mred\rok", false);
        assert_eq!(result_summary(&block), "\\u{1b}[31mred\\rok");
    }

    #[test]
    fn result_summaries_are_one_line() {
        let block =
            protocol::ToolResultBlock::text("toolu_1".into(), "\nfirst\nsecond\nthird", false);
        assert_eq!(result_summary(&block), "first (+3 lines)");
        let block = protocol::ToolResultBlock::text("toolu_1".into(), "ok", false);
        assert_eq!(result_summary(&block), "ok");
    }

    #[test]
    fn exit_codes_follow_the_table() {
        let cases = [
            (Terminal::Completed, 0, "success"),
            (Terminal::StopHookPrevented("x".into()), 0, "success"),
            (Terminal::MaxTurns, 3, "error_max_turns"),
            (Terminal::MaxBudget("$1".into()), 3, "error_max_budget_usd"),
            (Terminal::TokenBudgetReached, 0, "success"),
            (Terminal::DiminishingReturns, 0, "success"),
            (Terminal::RepeatedToolCall, 3, "error_during_execution"),
            (Terminal::StopHookCapReached, 3, "error_during_execution"),
            (Terminal::PromptTooLong, 3, "error_during_execution"),
            (
                Terminal::ModelError(ModelError::Transport("x".into())),
                1,
                "error_during_execution",
            ),
            (Terminal::AbortedTools, 130, "error_during_execution"),
            (Terminal::AbortedStreaming, 130, "error_during_execution"),
        ];
        for (terminal, code, subtype) in cases {
            assert_eq!(exit_code(&terminal), (code, subtype), "{terminal}");
        }
    }
}
